/* SPDX-License-Identifier: MIT */
/*
 * array.c - the bounded FIFO: a ring of node pointers of fixed capacity.
 *
 * Where it sits: a queue kind (queue.h), storage under the pool lock; it
 * includes queue/ and base/ only, and is one row of engine/kinds.c.
 */
#include <errno.h>
#include <stdlib.h>

#include "queue/queue.h"

struct queue_array {
	struct tpe__queue base;
	size_t capacity;          /* I: set at create */
	size_t head;              /* L: index of the oldest node */
	size_t count;             /* L */
	struct tpe__task *slot[]; /* L: capacity entries */
};

static int
array_offer(struct tpe__queue *q, struct tpe__task *t, size_t takers)
{
	struct queue_array *aq = (struct queue_array *)q;

	(void)takers;
	if (aq->count == aq->capacity)
		return EAGAIN;
	aq->slot[(aq->head + aq->count) % aq->capacity] = t;
	aq->count++;
	return 0;
}

static struct tpe__task *
array_poll(struct tpe__queue *q)
{
	struct queue_array *aq = (struct queue_array *)q;
	struct tpe__task *t;

	if (aq->count == 0)
		return NULL;
	t = aq->slot[aq->head];
	aq->head = (aq->head + 1) % aq->capacity;
	aq->count--;
	return t;
}

static size_t
array_size(struct tpe__queue *q)
{
	return ((const struct queue_array *)q)->count;
}

static size_t
array_remaining(const struct tpe__queue *q)
{
	const struct queue_array *aq = (const struct queue_array *)q;

	return aq->capacity - aq->count;
}

static size_t
array_remove_if(struct tpe__queue *q, tpe__task_match_fn match, void *ctx,
    size_t max, struct tpe__task_list *out)
{
	struct queue_array *aq = (struct queue_array *)q;
	size_t i, kept = 0, n = 0;

	/* One pass, compacting the kept nodes towards the head in order. */
	for (i = 0; i < aq->count; i++) {
		struct tpe__task *t = aq->slot[(aq->head + i) % aq->capacity];

		if (n < max && match(t, ctx)) {
			tpe__task_list_push(out, t);
			n++;
		} else {
			aq->slot[(aq->head + kept) % aq->capacity] = t;
			kept++;
		}
	}
	aq->count = kept;
	return n;
}

static void
array_destroy(struct tpe__queue *q)
{
	free(q);
}

static const struct tpe__queue_ops array_ops = {
	.name = "bounded",
	.offer = array_offer,
	.poll = array_poll,
	.size = array_size,
	.remaining = array_remaining,
	.remove_if = array_remove_if,
	.drop_oldest = array_poll,
	.destroy = array_destroy,
};

int
tpe__queue_array_create(struct tpe__queue **q, size_t capacity)
{
	struct queue_array *aq;

	if (capacity == 0 ||
	    capacity > (SIZE_MAX - sizeof(*aq)) / sizeof(aq->slot[0]))
		return EINVAL;
	aq = calloc(1, sizeof(*aq) + capacity * sizeof(aq->slot[0]));
	if (aq == NULL)
		return ENOMEM;
	aq->base.ops = &array_ops;
	aq->capacity = capacity;
	*q = &aq->base;
	return 0;
}
