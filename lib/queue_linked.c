/* SPDX-License-Identifier: MIT */
/* queue_linked.c - the unbounded FIFO: a singly linked list of task nodes. */
#include <errno.h>
#include <stdlib.h>

#include "queue.h"

static size_t
linked_remaining(const struct tpe__queue *q)
{
	(void)q;
	return SIZE_MAX;
}

static const struct tpe__queue_ops linked_ops = {
	.name = "unbounded",
	.offer = tpe__linked_offer,
	.poll = tpe__linked_poll,
	.size = tpe__linked_size,
	.remaining = linked_remaining,
	.remove_if = tpe__linked_remove_if,
	.destroy = tpe__linked_destroy,
};

int
tpe__linked_offer(struct tpe__queue *q, struct tpe__task *t)
{
	struct tpe__queue_linked *lq = (struct tpe__queue_linked *)q;

	tpe__task_list_push(&lq->list, t);
	return 0;
}

struct tpe__task *
tpe__linked_poll(struct tpe__queue *q)
{
	struct tpe__queue_linked *lq = (struct tpe__queue_linked *)q;

	return tpe__task_list_pop(&lq->list);
}

size_t
tpe__linked_size(const struct tpe__queue *q)
{
	const struct tpe__queue_linked *lq = (const struct tpe__queue_linked *)q;

	return lq->list.count;
}

size_t
tpe__linked_remove_if(struct tpe__queue *q, tpe__task_match_fn match,
    void *ctx, size_t max, struct tpe__task_list *out)
{
	struct tpe__queue_linked *lq = (struct tpe__queue_linked *)q;
	struct tpe__task **pp = &lq->list.head;
	struct tpe__task *t;
	size_t n = 0;

	while (n < max && (t = *pp) != NULL) {
		if (!match(t, ctx)) {
			pp = &t->next;
			continue;
		}
		*pp = t->next;
		if (lq->list.tailp == &t->next)
			lq->list.tailp = pp;
		lq->list.count--;
		tpe__task_list_push(out, t);
		n++;
	}
	return n;
}

void
tpe__linked_destroy(struct tpe__queue *q)
{
	free(q);
}

int
tpe__queue_linked_create(struct tpe__queue **q)
{
	struct tpe__queue_linked *lq = calloc(1, sizeof(*lq));

	if (lq == NULL)
		return ENOMEM;
	lq->base.ops = &linked_ops;
	tpe__task_list_init(&lq->list);
	*q = &lq->base;
	return 0;
}
