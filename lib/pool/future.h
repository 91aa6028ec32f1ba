/* SPDX-License-Identifier: MIT */
/*
 * future.h - the result of a tpe_submit task.
 *
 * Where it sits: lib/pool, under the pool and the task module, which
 * create, start, run and complete futures; it calls only lib/base (the
 * fork generation).
 *
 * Design notes
 * ------------
 * States: NEW -> RUNNING -> DONE, or NEW -> CANCELLED. Every transition
 * happens once, under f->lock, and broadcasts f->cond; a waiter re-checks
 * the state under the same lock, so all effects of the callable (which ran
 * before the DONE transition) happen-before tpe_future_get returns 0.
 *
 * Failure: the callable calls tpe_task_fail(error) while it runs; the
 * error is kept in a thread-local frame (future.c) that
 * tpe__future_run_started opens around the callable (nested frames for a
 * callable that runs another one inline), and stored in f->error with the
 * result, before DONE. A DONE future with f->error != 0 is "failed":
 * tpe_future_get says EIO. No new state: every test of DONE still holds.
 *
 * Continuations (tpe_future_then): f->thens is the one pointer they cost a
 * future. A continuation registered while the future is NEW or RUNNING is
 * pushed on it under f->lock; the transition to DONE or CANCELLED takes the
 * whole list under the same lock (thens = NULL, then state), so a
 * registration either is on the list the completer takes, or sees the
 * final state and fires itself: each continuation fires exactly once, and
 * after the final state is visible. Firing happens with no lock held (of
 * the future's; the caller of tpe__future_cancel may hold others: see
 * future.c). Each continuation holds its own reference to f until its
 * callback, which inherits it, releases it.
 *
 * References: the submitter's and the pool's (refs starts at 2). The pool
 * drops its reference after running or disposing of the task, so the
 * submitter may release first. refs is atomic so that release never takes
 * f->lock (it is also what the child of a fork may call). A future made
 * before a fork() is freed in the child without destroying its lock and
 * condition variable: parent threads that waited on them do not exist
 * there, and glibc's destroy would wait for them forever.
 */
#ifndef TPE_FUTURE_H
#define TPE_FUTURE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/sync.h"
#include "queue/node.h"
#include "tpe.h"

enum tpe__future_state {
	TPE__F_NEW,
	TPE__F_RUNNING,
	TPE__F_DONE,
	TPE__F_CANCELLED
};

/*
 * What a scheduled task's future (lib/sched) adds: the scheduler's side of
 * a cancel (called after the future went CANCELLED, no lock held) and
 * tpe_future_get_delay. NULL for a tpe_submit future.
 */
struct tpe__future_sched {
	void (*on_cancel)(struct tpe_future *f);
	int64_t (*get_delay)(const struct tpe_future *f);
};

struct tpe__then;

struct tpe_future {
	struct tpe__mutex lock;
	pthread_cond_t cond; /* W: tpe_future_get waits here, with f->lock */
	int state;        /* L: f->lock for writes; A: read by is_done */
	int error;        /* L: written once, before state = DONE: the
			   * callable's tpe_task_fail error, 0 if none */
	void *result;     /* L: written once, before state = DONE */
	tpe_call_fn fn;   /* I */
	void *arg;        /* I */
	unsigned refs;    /* A: atomic */
	unsigned fork_gen; /* I: tpe__fork_generation at creation */
	int64_t accepted_tick; /* I: when its task was made, for the metrics
			      * (queue/node.h); written before the task is
			      * published, read by the worker that takes it */
	struct tpe__then *thens; /* L: f->lock: continuations waiting for
				  * the final state, newest first; NULL from
				  * the final state on (future.c) */
	const struct tpe__future_sched *sched; /* A: NULL unless tpe_schedule*,
				 * then lib/sched's, which it may swap for
				 * another (a release store; future.c's
				 * loads acquire) */
};

/* A new future with two references (the caller's and the pool's). */
int tpe__future_create(struct tpe_future **f, tpe_call_fn fn, void *arg);
void tpe__future_unref(struct tpe_future *f);
/* The same in memory the caller allocated with malloc, f at its start
 * (tpe__future_unref frees it): lib/sched's records. */
void tpe__future_init(struct tpe_future *f, tpe_call_fn fn, void *arg);

enum tpe__future_run_result {
	TPE__RAN,      /* the callable ran; the future is DONE */
	TPE__NOT_RUN,  /* it was cancelled before it could start */
	TPE__FORKED    /* the callable forked and this is the child: the
			* future was left as it was (a parent thread may
			* hold its lock), and must not be touched */
};

/* Runs the callable unless the future was cancelled: tpe__future_start,
 * then tpe__future_run_started. */
enum tpe__future_run_result tpe__future_run(struct tpe_future *f);

/*
 * NEW -> RUNNING: true when this call started the future, false when it was
 * cancelled first. From here on tpe_future_cancel says EBUSY, so a worker
 * that starts the future before the task hooks never calls the hooks
 * around a task that a cancel then turns into a no-op.
 */
bool tpe__future_start(struct tpe_future *f);

/* Runs the callable of a future that tpe__future_start started, and
 * completes it: TPE__RAN, or TPE__FORKED (see above). */
enum tpe__future_run_result tpe__future_run_started(struct tpe_future *f);

/* Whether f is still NEW (neither started nor cancelled). Any thread. */
static inline bool
tpe__future_is_new(const struct tpe_future *f)
{
	/* Pairs with the release store of a state change (future.c). */
	return __atomic_load_n(&f->state, __ATOMIC_ACQUIRE) == TPE__F_NEW;
}

/* NEW -> CANCELLED; true if this call (or an earlier one) cancelled it.
 * Fires the continuations on the calling thread when this call cancelled
 * it: call it holding no lock a continuation may take. */
bool tpe__future_cancel(struct tpe_future *f);

/*
 * A continuation made ahead, so that lib/compose can attach one right
 * after a submission was accepted, with no failure in between:
 * tpe__then_new (NULL: no memory), then tpe__then_attach (which takes it,
 * as tpe_future_then: a new reference to f, fired exactly once) or
 * tpe__then_free.
 */
struct tpe__then *tpe__then_new(void);
void tpe__then_attach(struct tpe__then *t, struct tpe_future *f,
    tpe_then_fn fn, void *ctx, tpe_t *pool);
void tpe__then_free(struct tpe__then *t);

/* When task t was accepted, for the metrics (0: not timed): in the node,
 * or in its future for a tpe_submit task (queue/node.h). Here, not in
 * pool/task.h, so that a file that sees the task functions does not see
 * the future's layout. */
static inline int64_t
tpe__task_accepted_tick(const struct tpe__task *t)
{
	struct tpe_future *f = tpe__task_future(t);

	return f != NULL ? f->accepted_tick : t->u.accepted_tick;
}

#endif /* TPE_FUTURE_H */
