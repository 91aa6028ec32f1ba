/* SPDX-License-Identifier: MIT */
/*
 * pool.h - the pool object (tpe_t) and what its engines and its worker
 * threads call of it.
 *
 * Design notes
 * ------------
 * Where it sits: the top of the core. The pool owns the object, its
 * lifecycle (shutdown, termination, fork), its sizes and threads
 * (worker.c), its statistics and the reserve; the engine (lib/engine)
 * carries tasks to workers and runs the workers' loop, and calls back
 * into the functions below. Everything else the pool uses sits below it
 * and takes narrow things, not tpe_t: the task module a struct tpe__tasks
 * (task.h), the reserve its struct and a struct tpe__reserve_env, the fork
 * registry an entry with a callback (base/fork.h), the policy and queue
 * kinds nothing at all.
 *
 * One mutex, pool->lock (L, rank TPE__RANK_POOL: base/sync.h has the
 * lock order), guards every mutable field below and the engine's locked
 * state. It is never held while user code runs (tasks, hooks, handlers,
 * callbacks) nor while a thread is created or joined, so user code may call
 * back into the pool.
 *
 * Lifecycle (state, monotonic): RUNNING -> SHUTDOWN -> TIDYING -> TERMINATED,
 * RUNNING|SHUTDOWN -> STOP -> TIDYING. TIDYING is entered by exactly one
 * thread (tpe__pool_try_terminate_locked returned true), which runs the
 * terminated hook outside the lock and then sets TERMINATED and wakes the
 * waiters (tpe__pool_finish_termination).
 *
 * Counters:
 *   wc        workers permitted to run and not yet told to stop (Java's
 *             workerCount): reserved before a thread is created, released
 *             when the engine's loop decides the worker exits; it is what
 *             the statistics report as pool_size, and largest_pool_size is
 *             the most it ever was (counted at the reservation, as Java
 *             counts largestPoolSize before it starts the thread), so
 *             pool_size never exceeds largest_pool_size and neither
 *             exceeds max while exiting threads finish;
 *   nthreads  worker threads alive or being created (Java's workers.size());
 *             termination needs nthreads == 0, so TERMINATED means no worker
 *             runs any pool code any more except its final unlock/return,
 *             which tpe_destroy's join waits for;
 *   active    workers running a task, or started with a first task (the
 *             engine counts them; the stacks engine counts its own).
 *
 * Invariants (under pool->lock):
 *   - a task is queued only while state < STOP, or while the thread that
 *     set STOP is draining it;
 *   - when a task is queued and state is RUNNING or SHUTDOWN and the pool
 *     is not paused, wc > 0 or the submitting thread is about to start a
 *     worker or hand the tasks back;
 *   - a worker exits only after seeing the queue empty (or state >= STOP),
 *     or, above max, straight after a task while another worker remains
 *     (engine/locked.c); the last one (wc == 0 after its decrement) looks
 *     again afterwards.
 *
 * Delayed and periodic tasks (lib/sched) sit on the pool's public calls;
 * the pool tells the scheduler about its lifecycle through pool->sched_hook
 * and these calls, each made without L (sched's lock is a leaf):
 * tpe__sched_shutdown first thing in tpe_shutdown (the pool still takes
 * the gate task then), tpe__sched_shutdown_now before tpe_shutdown_now
 * drains, tpe__sched_translate on each node it drained (under L, no lock
 * of sched's taken for a plain node), tpe__sched_purge in tpe_purge,
 * tpe__sched_pending in tpe_get_stats (`queued`), tpe__sched_destroy in
 * tpe_destroy after termination, tpe__sched_atfork_forget in the fork
 * child handler; and the attributes' discard callback is
 * tpe__sched_discard, which passes everything but the scheduler's own
 * tasks on to the user's.
 *
 * Blocking submitters (tpe_execute_wait, tpe_submit_wait; engine/
 * locked_wait.c) that found the pool saturated wait in submit_line, oldest
 * first; only the oldest tries again. Every event that can make room calls
 * tpe__pool_room_locked, and every change of state, paused or sizes wakes
 * them all (wake_workers_locked): one test of submit_line.head when nobody
 * waits.
 */
#ifndef TPE_POOL_H
#define TPE_POOL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/fork.h"
#include "base/sync.h"
#include "engine/engine.h"
#include "metrics/metrics.h"
#include "pool/attr.h"
#include "pool/blocking.h"
#include "pool/node_cache.h"
#include "pool/reserve.h"
#include "pool/state.h"
#include "pool/submit_line.h"
#include "pool/task.h"
#include "sched/sched.h"
#include "tpe.h"


struct tpe__worker;

/*
 * Legend: base/sync.h (A: written under L, read without, unless the
 * field says otherwise).
 */
struct tpe {
	/* Written by a locked-engine worker on every task, under the lock:
	 * with the lock on one cache line. */
	struct tpe__mutex lock;
	size_t active;             /* L: counted by worker.c (a first task)
				    * and the locked engine */
	uint64_t completed;        /* L: the locked engine's */
	pthread_cond_t idle_cond;  /* W: tpe_wait_idle waiters, with L */
	pthread_cond_t term_cond;  /* W: tpe_await_termination waiters, L */

	size_t max;                /* L */
	int64_t keep_alive_ns;     /* L */
	bool allow_core_timeout;   /* L */
	bool paused;               /* L, A: written with set_paused_locked;
				    * read without L by tpe_try_execute and
				    * the stacks engine */
	size_t nthreads;           /* L */
	size_t largest;            /* L: the most wc ever was */
	size_t idle_waiters;       /* L, A: threads in tpe_wait_idle; read
				    * without L by the stacks engine */
	size_t handing_back;       /* L: tpe_shutdown_now calls still delivering */
	uint64_t rejected;         /* L */
	unsigned long next_id;     /* L: thread name numbers */
	struct tpe__submit_line submit_line; /* L: blocking submitters */
	struct tpe__blocking blocking; /* L: workers in a blocking section */

	struct tpe__worker *live;   /* L: started or starting workers */
	struct tpe__worker *exited; /* L: exited workers not yet joined */

	struct tpe__fork_entry fork_entry; /* I; links: the fork registry's */
	struct tpe__tasks tasks;   /* I: what a task's life needs (task.h) */
	/* The timer of delayed and periodic tasks (sched/sched.h): its I
	 * fields set at create; pool.c calls its hooks without L. */
	struct tpe__sched_hook sched_hook;

	/* Read by every lock-free submission and rarely written: a cache
	 * line of its own, away from the per-task fields above. */
	char pad0_[TPE__CACHE_LINE];
	int state;                 /* L, A: enum tpe__state */
	size_t wc;                 /* L, A: written with tpe__pool_set_wc_locked */
	size_t core;               /* L, A: read by the lock-free offer */
	struct tpe__engine *engine; /* I; its state: engine.h */
	struct tpe__metrics *metrics; /* I: NULL when off; its state:
				       * metrics/metrics.h (its baseline L) */
	uint64_t metrics_comp_base;   /* L: blocking.compensations at the
				       * last tpe_metrics_reset */
	bool queued_grow_to_max;   /* I: the policy's (policy.h) */
	struct tpe_attr attr;      /* I: copy; live sizing fields above instead */
	struct tpe__reserve reserve; /* I: capacity, slots; the rest A (reserve.h) */

	/* Written by every submission, on a cache line of its own. */
	char pad_[TPE__CACHE_LINE];
	uint64_t submitted;        /* A: added to before the task can run */
	char pad2_[TPE__CACHE_LINE - sizeof(uint64_t)];
	/* Written by every finished task, on a cache line of its own. */
	struct tpe__node_returns returns; /* A: node_cache.c */
	char pad3_[TPE__CACHE_LINE - sizeof(struct tpe__node_returns)];
};

/*
 * Sets wc (L held). seq_cst: an exiting worker's store pairs with the
 * lock-free offer's load of wc after its push (engine/locked.c, the
 * Dekker pairs).
 */
static inline void
tpe__pool_set_wc_locked(tpe_t *pool, size_t wc)
{
	TPE__ASSERT_HELD(&pool->lock);
	__atomic_store_n(&pool->wc, wc, __ATOMIC_SEQ_CST);
}

/* Counts accepted tasks: relaxed, the task's own hand-over orders it. */
static inline void
tpe__pool_count_submitted(tpe_t *pool, int64_t delta)
{
	__atomic_add_fetch(&pool->submitted, (uint64_t)delta, __ATOMIC_RELAXED);
}

/*
 * tpe_wait_idle's condition: nothing runs, nothing is queued, and no task
 * is on its way to a reserved thread (claimed by tpe_try_execute, not yet
 * counted in active by the thread that takes it). L held.
 */
static inline bool
tpe__pool_is_idle_locked(tpe_t *pool)
{
	TPE__ASSERT_HELD(&pool->lock);
	return pool->engine->ops->idle_locked(pool->engine) &&
	    tpe__reserve_handing(&pool->reserve) == 0;
}

/*
 * Whether a thread waits in tpe_wait_idle, without the lock: seq_cst,
 * pairing with the seq_cst store of idle_waiters in tpe_wait_idle (a
 * worker of the stacks engine clears its busy flag, then looks here; the
 * waiter counts itself, then looks at the busy flags).
 */
static inline bool
tpe__pool_idle_waited(const tpe_t *pool)
{
	return __atomic_load_n(&pool->idle_waiters, __ATOMIC_SEQ_CST) > 0;
}

/* Wakes tpe_wait_idle's waiters once the pool is idle. Called after every
 * change of active or of the queue's contents. L held. */
static inline void
tpe__pool_notify_idle_locked(tpe_t *pool)
{
	TPE__ASSERT_HELD(&pool->lock);
	if (pool->idle_waiters > 0 && tpe__pool_is_idle_locked(pool))
		tpe__cond_broadcast(&pool->idle_cond);
}

/* L held; returns true if the caller must run tpe__pool_finish_termination. */
bool tpe__pool_try_terminate_locked(tpe_t *pool);
/* L not held: terminated hook, then TERMINATED, then wake the waiters. */
void tpe__pool_finish_termination(tpe_t *pool);

void tpe__pool_count_rejected(tpe_t *pool);

/*
 * Room may have appeared for a blocked submitter: a task left the queue,
 * a worker waits for one, wc fell below max. Wakes the oldest, which
 * tries again. When nobody waits, one load of a field under the lock the
 * caller holds anyway. L held.
 */
static inline void
tpe__pool_room_locked(tpe_t *pool)
{
	TPE__ASSERT_HELD(&pool->lock);
	tpe__submit_line_wake_head_locked(&pool->submit_line, &pool->lock);
}

/*
 * Starts a worker with `first` as its first task (may be NULL; the engine
 * counts it as active). Called and returns with pool->lock held, but drops
 * it while the thread is created. Reserves the slot first (wc, nthreads),
 * so concurrent callers never overshoot a bound; undoes it on failure.
 * Returns 0, ENOMEM (the worker record), or EAGAIN for any failure of
 * pthread_create. On failure the caller still owns `first`.
 */
int tpe__worker_start_locked(tpe_t *pool, struct tpe__task *first);



/* The pool this thread is a worker of (the terminated hook's: task.h). */
extern TPE__TLS tpe_t *tpe__tls_worker_pool;

#endif /* TPE_POOL_H */
