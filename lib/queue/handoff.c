/* SPDX-License-Identifier: MIT */
/*
 * handoff.c - the synchronous hand-off queue (Java's SynchronousQueue).
 *
 * An offer succeeds only when a worker waits for a task that no earlier
 * offer has claimed: takers > size. The node then sits in the list only
 * until that woken taker polls it, so the queue never holds more nodes than
 * there are waiting workers, and it reports no spare capacity. It has no
 * inbox: a lock-free push could not know whether a taker waits.
 *
 * Where it sits: a queue kind (queue.h), storage under the pool lock; it
 * includes queue/ and base/ only, and is one row of engine/kinds.c.
 */
#include <errno.h>
#include <stdlib.h>

#include "queue/linked.h"

static int
handoff_offer(struct tpe__queue *q, struct tpe__task *t, size_t takers)
{
	if (takers <= tpe__linked_size(q))
		return EAGAIN;
	return tpe__linked_push(q, t);
}

static size_t
handoff_remaining(const struct tpe__queue *q)
{
	(void)q;
	return 0;
}

/* Nothing to drop: every node here belongs to a worker that was waiting. */
static struct tpe__task *
handoff_drop_oldest(struct tpe__queue *q)
{
	(void)q;
	return NULL;
}

static const struct tpe__queue_ops handoff_ops = {
	.name = "handoff",
	.offer = handoff_offer,
	.poll = tpe__linked_poll,
	.size = tpe__linked_size,
	.remaining = handoff_remaining,
	.remove_if = tpe__linked_remove_if,
	.drop_oldest = handoff_drop_oldest,
	.destroy = tpe__linked_destroy,
};

int
tpe__queue_handoff_create(struct tpe__queue **q)
{
	return tpe__linked_init(q, &handoff_ops, false);
}
