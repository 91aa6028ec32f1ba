/* SPDX-License-Identifier: MIT */
/*
 * completion.c - completion queues (tpe_cq_create(3)), Java's
 * ExecutorCompletionService: tasks submitted through the queue to its
 * pool come back, as their futures, in the order they completed.
 *
 * Design notes
 * ------------
 * Built on continuations: tpe_cq_submit submits with tpe_submit and
 * attaches to the future a continuation (made before the submission, so an
 * accepted task always has one) on the completing thread. The continuation
 * appends an entry, which owns the continuation's reference to the future,
 * to the done list, under cq->lock; take and poll pop the head. So the
 * list's order is the order in which the continuations ran, which follows
 * each future's final state (future.c fires after it): for two tasks whose
 * completions are ordered (one ended before the other's began to end),
 * the list has them in that order.
 *
 * Lifetime: refs counts the owner (until tpe_cq_destroy) and each
 * continuation that has not run. destroy releases the futures still
 * listed; a continuation that runs after destroy releases its future at
 * once; the last reference frees the queue. Nothing waits.
 *
 * Legend: doc/architecture.md.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/sync.h"
#include "pool/future.h"
#include "tpe.h"

struct entry {
	struct entry *next;     /* L: cq->lock, while listed */
	tpe_future_t *f;        /* I: one reference, the entry's */
	struct tpe_cq *cq;      /* I */
};

struct tpe_cq {
	struct tpe__mutex lock;
	pthread_cond_t cond;    /* W: take waits here, with lock */
	tpe_t *pool;            /* I */
	struct entry *head;     /* L: completed, not taken: oldest first */
	struct entry **tail;    /* L: &last->next, or &head */
	size_t refs;            /* L: the owner's + pending continuations' */
	bool destroyed;         /* L: the owner let go */
};

/* Drops a reference; the last one frees. L held on entry, released. */
static void
cq_unref_unlock(struct tpe_cq *cq)
{
	bool last = --cq->refs == 0;

	tpe__mutex_unlock(&cq->lock);
	if (last) {
		tpe__cond_destroy(&cq->cond);
		tpe__mutex_destroy(&cq->lock);
		free(cq);
	}
}

int
tpe_cq_create(tpe_cq_t **cqp, tpe_t *pool)
{
	struct tpe_cq *cq;

	if (cqp == NULL || pool == NULL)
		return EINVAL;
	cq = malloc(sizeof(*cq));
	if (cq == NULL)
		return ENOMEM;
	tpe__mutex_init(&cq->lock);
	tpe__cond_init(&cq->cond);
	cq->pool = pool;
	cq->head = NULL;
	cq->tail = &cq->head;
	cq->refs = 1;
	cq->destroyed = false;
	*cqp = cq;
	return 0;
}

/* The continuation of each task: its future joins the done list. */
static void
completed(tpe_future_t *f, void *ctx)
{
	struct entry *e = ctx;
	struct tpe_cq *cq = e->cq;
	bool listed;

	tpe__mutex_lock(&cq->lock);
	listed = !cq->destroyed;
	if (listed) {
		e->next = NULL;
		*cq->tail = e;
		cq->tail = &e->next;
		tpe__cond_signal(&cq->cond);
	}
	cq_unref_unlock(cq);
	if (!listed) {
		tpe_future_release(f);
		free(e);
	}
}

int
tpe_cq_submit(tpe_cq_t *cq, tpe_call_fn fn, void *arg, tpe_future_t **future)
{
	struct tpe__then *then;
	struct entry *e;
	tpe_future_t *f;
	int rc;

	if (cq == NULL || fn == NULL)
		return EINVAL;
	e = malloc(sizeof(*e));
	then = tpe__then_new();
	if (e == NULL || then == NULL) {
		free(e);
		tpe__then_free(then);
		return ENOMEM;
	}
	rc = tpe_submit(cq->pool, fn, arg, &f);
	if (rc != 0) {
		free(e);
		tpe__then_free(then);
		return rc;
	}
	e->f = f;
	e->cq = cq;
	tpe__mutex_lock(&cq->lock);
	cq->refs++;
	tpe__mutex_unlock(&cq->lock);
	/* Its reference is the entry's, handed to the taker. */
	tpe__then_attach(then, f, completed, e, NULL);
	if (future != NULL)
		*future = f;
	else
		tpe_future_release(f);
	return 0;
}

int
tpe_cq_take(tpe_cq_t *cq, int64_t timeout_ns, tpe_future_t **future)
{
	struct entry *e;
	int64_t deadline;
	int rc = 0;

	if (cq == NULL || future == NULL)
		return EINVAL;
	deadline = tpe__deadline(timeout_ns);
	tpe__mutex_lock(&cq->lock);
	while (cq->head == NULL) {
		if (timeout_ns == 0 || rc == ETIMEDOUT) {
			tpe__mutex_unlock(&cq->lock);
			return ETIMEDOUT;
		}
		rc = tpe__cond_wait_until(&cq->cond, &cq->lock, deadline);
	}
	e = cq->head;
	cq->head = e->next;
	if (cq->head == NULL)
		cq->tail = &cq->head;
	tpe__mutex_unlock(&cq->lock);
	*future = e->f;
	free(e);
	return 0;
}

int
tpe_cq_poll(tpe_cq_t *cq, tpe_future_t **future)
{
	return tpe_cq_take(cq, 0, future);
}

int
tpe_cq_destroy(tpe_cq_t *cq)
{
	struct entry *e, *next;

	if (cq == NULL)
		return EINVAL;
	tpe__mutex_lock(&cq->lock);
	TPE__ASSERT(!cq->destroyed);
	cq->destroyed = true;
	e = cq->head;
	cq->head = NULL;
	cq->tail = &cq->head;
	cq_unref_unlock(cq);
	for (; e != NULL; e = next) {
		next = e->next;
		tpe_future_release(e->f);
		free(e);
	}
	return 0;
}
