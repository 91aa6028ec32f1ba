/* SPDX-License-Identifier: MIT */
/*
 * linked.c - the unbounded FIFO: a singly linked list of task nodes, with
 * an inbox for lock-free offers (queue.h).
 *
 * Where it sits: a queue kind (queue.h), storage under the pool lock; it
 * includes queue/ and base/ only, and is one row of engine/kinds.c.
 *
 * Design notes
 * ------------
 * `list` is the queue proper (L: pool->lock). `inbox` is a take-all stack
 * that any thread pushes onto without the lock (tpe__queue_push_lockfree);
 * only a holder of the lock takes it, whole, with one exchange (absorb),
 * reverses it into push order and appends it to `list`. A whole-stack take
 * has no ABA problem, and the reversal keeps FIFO order: the nodes of one
 * take were pushed after every node of the previous take. poll (when the
 * list is empty), size and remove_if absorb first, so no decision made
 * under the lock misses a node whose push came before it.
 *
 * Memory ordering (the inbox is base/stack.h's stack; its notes say why
 * it holds on weakly ordered processors): the submitter writes the node,
 * then pushes it with a seq_cst CAS, a release; absorb takes the stack
 * with a seq_cst exchange, an acquire, before it reads any node: the
 * node's contents and the task's argument, written before the push, are
 * visible to the worker that polls it. The list itself is L's. The
 * "came before" above is the Dekker pair of engine/locked.c: the
 * submitter's push then its seq_cst look for sleeping workers, against a
 * worker's seq_cst store of "I sleep" (under L) then its seq_cst look at
 * the inbox (tpe__queue_pending): each side stores, then loads the other
 * side's word, and only seq_cst on both keeps those two in order on ARM
 * or POWER (release/acquire would let each miss the other).
 *
 * The hand-off kind (handoff.c) is this list with another offer rule and
 * no inbox.
 */
#include <errno.h>
#include <stdlib.h>

#include "queue/linked.h"

/* Moves the inbox to the tail of the list, oldest first. L held. */
static void
absorb(struct tpe__queue_linked *lq)
{
	struct tpe__task *fifo, *last;
	size_t n;

	/* seq_cst, pairing with the push's CAS (queue.h): the nodes'
	 * contents, written before the push, are visible after the take. */
	if (tpe__task_stack_is_empty(&lq->inbox))
		return;
	last = tpe__task_stack_take_all(&lq->inbox);
	/* Oldest first; the newest push (the old top) ends the batch. */
	fifo = tpe__task_stack_reverse_count(last, &n);
	*lq->list.tailp = fifo;
	lq->list.tailp = &last->next;
	lq->list.count += n;
}

static int
linked_offer(struct tpe__queue *q, struct tpe__task *t, size_t takers)
{
	(void)takers;
	return tpe__linked_push(q, t);
}

static size_t
linked_remaining(const struct tpe__queue *q)
{
	(void)q;
	return SIZE_MAX;
}

static const struct tpe__queue_ops linked_ops = {
	.name = "unbounded",
	.offer = linked_offer,
	.poll = tpe__linked_poll,
	.size = tpe__linked_size,
	.remaining = linked_remaining,
	.remove_if = tpe__linked_remove_if,
	.drop_oldest = tpe__linked_poll,
	.destroy = tpe__linked_destroy,
};

int
tpe__linked_push(struct tpe__queue *q, struct tpe__task *t)
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
tpe__linked_init(struct tpe__queue **q, const struct tpe__queue_ops *ops,
    bool inbox)
{
	struct tpe__queue_linked *lq = calloc(1, sizeof(*lq));

	if (lq == NULL)
		return ENOMEM;
	lq->base.ops = ops;
	lq->base.inbox = inbox ? &lq->inbox : NULL;
	tpe__task_list_init(&lq->list);
	*q = &lq->base;
	return 0;
}

int
tpe__queue_linked_create(struct tpe__queue **q)
{
	return tpe__linked_init(q, &linked_ops, true);
}
