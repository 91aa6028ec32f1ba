/* SPDX-License-Identifier: MIT */
/*
 * queue_linked.c - the unbounded FIFO: a singly linked list of task nodes,
 * with a lock-free inbox for tpe_execute's fast path.
 *
 * Design notes
 * ------------
 * `list` is the queue proper (L: pool->lock). `inbox` is a Treiber stack:
 * any thread pushes onto it with a CAS and no lock (linked_offer_lockfree);
 * only a holder of pool->lock takes it, whole, with one exchange (absorb),
 * reverses it into push order and appends it to `list`. A whole-stack take
 * has no ABA problem, and the reversal keeps FIFO order: the nodes of one
 * take were pushed after every node of the previous take.
 *
 * Every operation that looks at the contents under the lock (poll when the
 * list is empty, size, remove_if) absorbs first, and is_empty looks at the
 * inbox too, so no decision made under the lock misses a node whose push
 * came before it. The push is seq_cst and
 * linked_pending is a seq_cst load: the Dekker pairs queue.h describes.
 */
#include <errno.h>
#include <stdlib.h>

#include "queue/queue.h"

/* Moves the inbox to the tail of the list, oldest first. L held. */
static void
absorb(struct tpe__queue_linked *lq)
{
	struct tpe__task *t, *next, *fifo = NULL, *last = NULL;
	size_t n = 0;

	/* Pairs with the seq_cst CAS in linked_offer_lockfree: the nodes'
	 * contents, written before the push, are visible after the take. */
	if (__atomic_load_n(&lq->inbox, __ATOMIC_SEQ_CST) == NULL)
		return;
	t = __atomic_exchange_n(&lq->inbox, NULL, __ATOMIC_SEQ_CST);
	for (; t != NULL; t = next) {
		next = t->next;
		t->next = fifo;
		fifo = t;
		if (last == NULL)
			last = t; /* the newest push ends the batch */
		n++;
	}
	*lq->list.tailp = fifo;
	lq->list.tailp = &last->next;
	lq->list.count += n;
}

static bool
linked_offer_lockfree(struct tpe__queue *q, struct tpe__task *t)
{
	struct tpe__queue_linked *lq = (struct tpe__queue_linked *)q;
	struct tpe__task *head = __atomic_load_n(&lq->inbox, __ATOMIC_RELAXED);

	/* seq_cst: the submitter's following loads of pool->wc and
	 * q->sleepers must not be ordered before this push (queue.h). */
	do {
		t->next = head;
	} while (!__atomic_compare_exchange_n(&lq->inbox, &head, t, true,
	    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
	return head == NULL;
}

static bool
linked_pending(const struct tpe__queue *q)
{
	const struct tpe__queue_linked *lq = (const struct tpe__queue_linked *)q;

	/* Pairs with the push's CAS (queue.h, the Dekker pairs). */
	return __atomic_load_n(&lq->inbox, __ATOMIC_SEQ_CST) != NULL;
}

/* Empty without absorbing: the lock holder's list, then the inbox with
 * linked_pending's seq_cst load (the Dekker pairs of queue.h). L held. */
static bool
linked_is_empty(struct tpe__queue *q)
{
	const struct tpe__queue_linked *lq = (const struct tpe__queue_linked *)q;

	return lq->list.head == NULL && !linked_pending(q);
}

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
	.offer_lockfree = linked_offer_lockfree,
	.pending = linked_pending,
	.is_empty = linked_is_empty,
};

int
tpe__linked_offer(struct tpe__queue *q, struct tpe__task *t)
{
	struct tpe__queue_linked *lq = (struct tpe__queue_linked *)q;

	/* FIFO across both paths: earlier lock-free pushes go first. */
	absorb(lq);
	tpe__task_list_push(&lq->list, t);
	return 0;
}

struct tpe__task *
tpe__linked_poll(struct tpe__queue *q)
{
	struct tpe__queue_linked *lq = (struct tpe__queue_linked *)q;

	if (lq->list.head == NULL)
		absorb(lq);
	return tpe__task_list_pop(&lq->list);
}

size_t
tpe__linked_size(struct tpe__queue *q)
{
	struct tpe__queue_linked *lq = (struct tpe__queue_linked *)q;

	absorb(lq);
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

	absorb(lq);
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
