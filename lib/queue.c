/* SPDX-License-Identifier: MIT */
/* queue.c - the waiting side of the queue interface, shared by every kind. */
#include "queue.h"
#include "sync.h"

struct tpe__task *
tpe__queue_take(struct tpe__queue *q, pthread_mutex_t *lock,
    pthread_cond_t *cond, int64_t deadline_ns, int *rc)
{
	struct tpe__task *t;

	*rc = 0;
	t = q->ops->poll(q);
	if (t != NULL)
		return t;
	/*
	 * Counted while waiting: an offer that relies on a waiting taker
	 * (hand-off, scale-first) reads q->takers under the same lock, and the
	 * submitter signals `cond` after such an offer.
	 */
	q->takers++;
	*rc = tpe__cond_wait_until(cond, lock, deadline_ns);
	q->takers--;
	return q->ops->poll(q);
}
