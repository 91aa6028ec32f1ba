/* SPDX-License-Identifier: MIT */
/*
 * task.h - the internal task node that queues hold and workers run.
 *
 * A node is owned by exactly one party at a time: the submitter until the
 * queue (or a worker's first-task slot) takes it, then the queue (under
 * pool->lock), then the worker that dequeued it or the code that removed it
 * (remove, purge, drain). Whoever owns it last frees it with tpe__task_free.
 */
#ifndef TPE_TASK_H
#define TPE_TASK_H

#include <stddef.h>

#include "tpe.h"

struct tpe_future;

struct tpe__task {
	struct tpe__task *next;     /* owner's list link (queue or local list) */
	tpe_fn fn;                  /* the user's task; NULL when future != NULL */
	void *arg;                  /* the user's argument (callable's, for futures) */
	struct tpe_future *future;  /* set for tpe_submit tasks (holds a reference) */
	/* The submitting call's token (the address of a local of that call,
	 * unique among calls in progress): once the node is in the queue and
	 * the lock was dropped, it may have run and been reused for another
	 * task, so taking "this task" back must match the token too, not the
	 * node's address alone (pool.c, take_back_locked). */
	const void *owner;
};

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

#endif /* TPE_TASK_H */
