/* SPDX-License-Identifier: MIT */
/*
 * queue.h - the storage interface: where a pool under its lock keeps the
 * tasks that wait for a worker.
 *
 * Design notes
 * ------------
 * Where it sits: on the task node (queue/node.h) and the public header;
 * below the engines (lib/engine), which alone call these ops. A queue kind knows nothing of
 * workers, policies or pools: it stores nodes. What a kind needs to know of
 * the workers (how many wait for a task, for the hand-off) its caller
 * passes in.
 *
 * Every op is called with the owning pool's lock held (L): a queue has no
 * lock of its own, so that the engine decides "queue, grow or reject" and
 * "take, wait or exit" under one lock (engine/locked.c says why).
 *
 * The one exception is a kind's inbox (`inbox`, NULL for kinds that have
 * none): a take-all stack (base/stack.h) that submitters push onto without
 * the lock (tpe__queue_push_lockfree) and that the kind itself absorbs, in
 * push order, into its contents at the next poll, size or remove_if. Only
 * a kind that never refuses may have one (the unbounded queue). The pushes
 * are seq_cst read-modify-writes and tpe__queue_pending is a seq_cst load:
 * the engine builds its Dekker pairs on them (engine/locked.c).
 *
 * Ownership: offer either takes the node (0) or refuses it (EAGAIN, or
 * ENOMEM from a kind whose storage grows) and leaves it with the caller;
 * poll, drop_oldest and remove_if hand nodes back to the caller; destroy
 * frees an empty queue.
 *
 * Order: every kind but one polls in offer order. The priority kind
 * (priority.c) polls by rank: it has offer_ranked, which its caller (the
 * engine, through tpe__queue_offer) uses to pass the priority of the
 * submitting call; its plain offer ranks at priority 0. The priority is
 * the queue's, kept beside the node, never in it (node.h). For the kinds
 * in offer order, offer_ranked is NULL and a priority is ignored.
 *
 * Adding a kind: a file in lib/queue with its create function and ops,
 * and one row in the table of lib/engine/kinds.c.
 */
#ifndef TPE_QUEUE_H
#define TPE_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/atomic.h"
#include "queue/node.h"

struct tpe__queue;

struct tpe__queue_ops {
	const char *name;
	/*
	 * offer: L held. Takes t and returns 0, or refuses it with EAGAIN
	 * (full; or, for the hand-off, no waiting worker left for it) and
	 * the caller keeps t. `takers` is how many workers wait for a task
	 * now (engine/locked.c); a kind that hands over rather than stores
	 * accepts only while takers > size.
	 */
	int (*offer)(struct tpe__queue *q, struct tpe__task *t, size_t takers);
	/*
	 * offer_ranked: L held; NULL for a kind in offer order. offer, t
	 * ranked at `priority` (higher polled first, FIFO among equals).
	 * Also refuses with ENOMEM when its storage could not grow.
	 */
	int (*offer_ranked)(struct tpe__queue *q, struct tpe__task *t,
	    size_t takers, int priority);
	/* poll: L held. The oldest node (FIFO, the inbox's nodes after every
	 * node offered under the lock before they were absorbed; for a
	 * ranked kind the first in rank), or NULL. */
	struct tpe__task *(*poll)(struct tpe__queue *q);
	/* size: L held. How many nodes the queue holds, inbox included. */
	size_t (*size)(struct tpe__queue *q);
	/* remaining: L held. How many more offers could succeed now;
	 * SIZE_MAX when unbounded, 0 for the hand-off. */
	size_t (*remaining)(const struct tpe__queue *q);
	/* remove_if: L held. Moves up to max nodes for which match is true,
	 * oldest first (a ranked kind: in poll order), to out; keeps the
	 * order of the others. Returns how many it moved. */
	size_t (*remove_if)(struct tpe__queue *q, tpe__task_match_fn match,
	    void *ctx, size_t max, struct tpe__task_list *out);
	/* drop_oldest: L held. The node a discard-oldest policy may drop,
	 * taken out, or NULL when there is none (the hand-off: its nodes
	 * already belong to the workers that will poll them). A ranked
	 * kind drops the node it would poll last: the lowest priority,
	 * oldest among those. */
	struct tpe__task *(*drop_oldest)(struct tpe__queue *q);
	/* destroy: no lock (the pool is being freed). Frees an empty queue. */
	void (*destroy)(struct tpe__queue *q);
};

struct tpe__queue {
	const struct tpe__queue_ops *ops; /* I */
	struct tpe__task **inbox;         /* I: the kind's inbox, or NULL;
					   * its top is A (above) */
};

/*
 * Any thread, no lock, only for a kind with an inbox: pushes t there; it
 * joins the queue at the next poll, size or remove_if. Returns whether the
 * inbox was empty (a later push then rides on the wake-up of the first).
 * A seq_cst read-modify-write: the caller's loads after it (engine/
 * locked.c) are not ordered before it.
 */
static inline bool
tpe__queue_push_lockfree(struct tpe__queue *q, struct tpe__task *t)
{
	return tpe__task_stack_push_mpsc(q->inbox, t);
}

/* Any thread, no lock: whether pushed nodes wait in the inbox. A seq_cst
 * load, pairing with tpe__queue_push_lockfree. */
static inline bool
tpe__queue_pending(const struct tpe__queue *q)
{
	return q->inbox != NULL && !tpe__task_stack_is_empty(q->inbox);
}

/*
 * L held: whether the queue holds no node, a lock-free push that came
 * before this call included. The inbox is looked at first (the seq_cst
 * load of tpe__queue_pending: the lock side of the engine's Dekker pairs),
 * and size only when it is empty, so that the look absorbs nothing: a
 * worker that asks before each task does not pull the inbox's line from
 * the submitters every time (poll absorbs only once the list is empty).
 */
static inline bool
tpe__queue_is_empty(struct tpe__queue *q)
{
	return !tpe__queue_pending(q) && q->ops->size(q) == 0;
}

/*
 * L held: offers t at `priority`, which only a ranked kind uses (above).
 * 0, or the kind's refusal (EAGAIN, ENOMEM) and the caller keeps t.
 */
static inline int
tpe__queue_offer(struct tpe__queue *q, struct tpe__task *t, size_t takers,
    int priority)
{
	if (q->ops->offer_ranked != NULL)
		return q->ops->offer_ranked(q, t, takers, priority);
	return q->ops->offer(q, t, takers);
}

int tpe__queue_linked_create(struct tpe__queue **q);
int tpe__queue_array_create(struct tpe__queue **q, size_t capacity);
int tpe__queue_handoff_create(struct tpe__queue **q);
/* capacity 0: unbounded. 0, EINVAL (capacity too large) or ENOMEM. */
int tpe__queue_priority_create(struct tpe__queue **q, size_t capacity);

#endif /* TPE_QUEUE_H */
