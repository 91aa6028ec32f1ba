/* SPDX-License-Identifier: MIT */
/*
 * node.h - the task node: what a queue stores and a worker runs, and the
 * list in which modules hand nodes to each other. A node's life (who owns
 * it, how it ends) is pool/task.h's.
 *
 * Where it sits: lib/queue, the bottom of the core: the public header
 * and base/stack.h only.
 */
#ifndef TPE_QUEUE_NODE_H
#define TPE_QUEUE_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/stack.h"
#include "tpe.h"

struct tpe_future;
struct tpe__set;

struct tpe__task {
	struct tpe__task *next;     /* owner's list link (queue or local list) */
	tpe_fn fn;                  /* the user's task; NULL for a tpe_submit
				     * task (then u.future is set) */
	void *arg;                  /* the user's argument (callable's, for futures) */
	/* Read through tpe__task_future: a tpe_submit task (fn NULL) has its
	 * future here (holding a reference); any other the time it was
	 * accepted, for the metrics (lib/metrics; a future keeps its own,
	 * pool/future.h). One word for both keeps the node at 48 bytes
	 * with `set` below (pool/node_cache.c: 339 to a 16 KiB chunk; a
	 * field of its own would make it 56). */
	union {
		struct tpe_future *future;
		int64_t accepted_tick;
	} u;
	/* The submitting call's token (the address of a local of that call,
	 * unique among calls in progress): once the node is in the queue and
	 * the lock was dropped, it may have run and been reused for another
	 * task, so taking "this task" back must match the token too, not the
	 * node's address alone (engine/locked.c, take_back_locked). */
	const void *owner;
	/* The set of tasks this one belongs to (a task group, a parallel
	 * loop's helper: pool/task.h's struct tpe__set), NULL for none; set
	 * when the node is made, read when it ends. The one word a group
	 * costs a task: 40 bytes became 48. */
	struct tpe__set *set;
};

/* The future of a tpe_submit task, NULL for any other. */
static inline struct tpe_future *
tpe__task_future(const struct tpe__task *t)
{
	return t->fn == NULL ? t->u.future : NULL;
}

/* A singly linked FIFO of nodes, for lists handed between modules. */
struct tpe__task_list {
	struct tpe__task *head;
	struct tpe__task **tailp;
	size_t count;
};

static inline void
tpe__task_list_init(struct tpe__task_list *l)
{
	l->head = NULL;
	l->tailp = &l->head;
	l->count = 0;
}

static inline void
tpe__task_list_push(struct tpe__task_list *l, struct tpe__task *t)
{
	t->next = NULL;
	*l->tailp = t;
	l->tailp = &t->next;
	l->count++;
}

static inline struct tpe__task *
tpe__task_list_pop(struct tpe__task_list *l)
{
	struct tpe__task *t = l->head;

	if (t == NULL)
		return NULL;
	l->head = t->next;
	if (l->head == NULL)
		l->tailp = &l->head;
	l->count--;
	t->next = NULL;
	return t;
}

/* The take-all stack of nodes (base/stack.h): tpe__task_stack_push_mpsc,
 * _take_all, _reverse and the rest, over the `next` link. */
TPE__STACK_DEFINE(tpe__task_stack, struct tpe__task, next)

/* A predicate over nodes (remove_if, the drains). */
typedef bool (*tpe__task_match_fn)(const struct tpe__task *t, void *ctx);

#endif /* TPE_QUEUE_NODE_H */
