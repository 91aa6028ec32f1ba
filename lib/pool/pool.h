/* SPDX-License-Identifier: MIT */
/*
 * pool.h - the pool object (tpe_t) and the internal interface other modules
 * (worker, rejection, policies, registry) use.
 *
 * Design notes
 * ------------
 * One mutex, pool->lock, guards every mutable field below and the queue's
 * contents. It is never held while user code runs (tasks, hooks, handlers,
 * callbacks) nor while a thread is created or joined, so user code may call
 * back into the pool.
 *
 * The one path that does not take pool->lock is step 2 of tpe_execute for
 * a queue with lock-free offers (the unbounded queue under queue-first),
 * as Java's execute offers to LinkedBlockingQueue without its main lock:
 * when the pool is RUNNING and has at least core (and at least one)
 * workers, the submitter counts the task in `submitted`, pushes it
 * (queue.h, offer_lockfree) and then re-reads state, wc and q->sleepers
 * (seq_cst). Only when one of them says "shut down", "no worker" or "a
 * worker sleeps" does it take the lock to settle the task (pool.c,
 * settle_lockfree_locked): take it back and refuse it (ECANCELED), start a
 * worker, or wake one. The workers' side of those races is the Dekker
 * pairs in queue.h: a worker decrements wc before its last look at the
 * queue (worker.c, may_leave_locked), and bumps q->sleepers before its
 * last look before sleeping.
 *
 * A queue kind that runs its own workers (queue.h; the per-worker stacks)
 * takes the whole of tpe_execute's dispatch (its submit op, no lock) and
 * its workers' lives; the pool starts them all in tpe_create, and wakes
 * them through the kind (wake_all) when state, paused or configuration
 * change.
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
 *             when get_task decides the worker exits; it is what the
 *             statistics report as pool_size, and largest_pool_size is
 *             the most it ever was (counted at the reservation, as Java
 *             counts largestPoolSize before it starts the thread), so
 *             pool_size never exceeds largest_pool_size and neither
 *             exceeds max while exiting threads finish;
 *   nthreads  worker threads alive or being created (Java's workers.size());
 *             termination needs nthreads == 0, so TERMINATED means no worker
 *             runs any pool code any more except its final unlock/return,
 *             which tpe_destroy's join waits for;
 *   active    workers running a task, or created with a first task;
 *   q->takers workers waiting for a task (idle).
 *
 * Invariants (under pool->lock):
 *   - a task is in the queue only while state < STOP, or while the thread
 *     that set STOP is draining it;
 *   - when the queue is non-empty and state is RUNNING or SHUTDOWN and the
 *     pool is not paused, wc > 0 or the submitting thread is about to start
 *     a worker (tpe__pool_ensure_worker_locked) or hand the tasks back;
 *   - a worker exits only after seeing the queue empty (or state >= STOP),
 *     or, above max, straight after a task while another worker remains
 *     (worker.c, should_exit_locked);
 *     the last one (wc == 0 after its decrement) looks again afterwards.
 *
 * Blocking submitters (tpe_execute_wait, tpe_submit_wait; submit_wait.c)
 * that found the pool saturated wait in submit_line, oldest first; only
 * the oldest tries again. Every event that can make room calls
 * tpe__pool_room_locked (a task leaving the queue, a worker starting to
 * wait for one, wc falling, tpe_remove, tpe_purge, a submitter taking its
 * task back), and every change of state, paused or sizes wakes them all
 * (wake_workers_locked): one test of submit_line.head when nobody waits.
 *
 * Lock order: registry lock -> pool->lock -> future->lock.
 */
#ifndef TPE_POOL_H
#define TPE_POOL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "pool/attr.h"
#include "pool/node.h"
#include "queue/queue.h"
#include "pool/reserve.h"
#include "base/sync.h"
#include "pool/task.h"
#include "tpe.h"

enum tpe__state {
	TPE__RUNNING,
	TPE__SHUTDOWN,
	TPE__STOP,
	TPE__TIDYING,
	TPE__TERMINATED
};

struct tpe__worker;
struct tpe__submit_waiter;

/*
 * The line of blocking submitters (submit_wait.c), oldest first: a FIFO
 * of records on the waiting threads' stacks. All L.
 */
struct tpe__submit_line {
	struct tpe__submit_waiter *head; /* L: the oldest, the only one that tries */
	struct tpe__submit_waiter *tail; /* L: the newest (NULL when empty) */
	size_t waiting;                  /* L: records in the line */
	size_t workers;                  /* L: of them, workers of this pool */
};

/* A rejection policy: 0 = it took the task; else an errno, caller keeps it. */
typedef int (*tpe__reject_fn)(tpe_t *pool, struct tpe__task *t, void *ctx);

/*
 * Legend: I = set at create, read-only after; L = pool->lock;
 * A = atomic (written under L, read without); R = registry lock.
 */
struct tpe {
	/* Written by every worker on every task (under the lock). */
	struct tpe__mutex lock;
	size_t active;             /* L */
	uint64_t completed;        /* L */
	pthread_cond_t work_cond;  /* workers wait here for tasks / changes */
	pthread_cond_t idle_cond;  /* tpe_wait_idle waiters */
	pthread_cond_t term_cond;  /* tpe_await_termination waiters */

	size_t max;                /* L */
	int64_t keep_alive_ns;     /* L */
	bool allow_core_timeout;   /* L */
	bool paused;               /* L, A: written with set_paused_locked;
				    * read without L by tpe_try_execute */
	unsigned config_gen;       /* L: bumped to make waiting workers re-check */

	size_t nthreads;           /* L */
	size_t largest;            /* L: the most wc ever was */
	size_t idle_waiters;       /* L, A: threads in tpe_wait_idle; read
				    * without L by per-worker workers */
	size_t handing_back;       /* L: tpe_shutdown_now calls still delivering */
	uint64_t rejected;         /* L */
	unsigned long next_id;     /* L: thread name numbers */
	struct tpe__submit_line submit_line; /* L: blocking submitters */

	struct tpe__worker *live;   /* L: started or starting workers */
	struct tpe__worker *exited; /* L: exited workers not yet joined */

	tpe_t *reg_prev, *reg_next; /* R: registry of pools for fork() */

	/* Read by every lock-free submission and rarely written: a cache
	 * line of its own, away from the per-task fields above. */
	char pad0_[TPE__CACHE_LINE];
	int state;                 /* L, A: enum tpe__state */
	size_t wc;                 /* L, A: written with tpe__pool_set_wc_locked */
	size_t core;               /* L, A: read by the lock-free offer */
	struct tpe__queue *queue;  /* I; contents L */
	tpe__reject_fn reject;     /* I */
	void *reject_ctx;          /* I */
	bool queued_grow_to_max;   /* I: start workers for queued tasks up to max */
	void *policy_state;        /* I: owned by the policy */
	void (*policy_free)(void *state); /* I */
	struct tpe_attr attr;      /* I: copy; live sizing fields above instead */
	struct tpe__reserve reserve; /* I: capacity, slots; the rest A (reserved.h) */

	/* Written by every submission, on a cache line of its own. */
	char pad_[TPE__CACHE_LINE];
	uint64_t submitted;        /* A: added to before the task can run */
	char pad2_[TPE__CACHE_LINE - sizeof(uint64_t)];
	/* Written by every finished task, on a cache line of its own. */
	struct tpe__node_returns returns; /* A: node.c */
	char pad3_[TPE__CACHE_LINE - sizeof(struct tpe__node_returns)];
};

/*
 * Sets wc (L held). seq_cst: an exiting worker's store pairs with the
 * lock-free offer's load of wc after its push (queue.h, the Dekker pairs).
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
	/* is_empty before busy: the order a kind with its own workers
	 * needs (queue.h, busy). */
	return pool->active == 0 && tpe__queue_is_empty(pool->queue) &&
	    !tpe__queue_busy(pool->queue) &&
	    tpe__reserve_handing(&pool->reserve) == 0;
}

/*
 * Whether a thread waits in tpe_wait_idle, without the lock: seq_cst,
 * pairing with the seq_cst store of idle_waiters in tpe_wait_idle (a
 * worker of a kind with its own workers clears its busy flag, then looks
 * here; the waiter counts itself, then looks at the busy flags).
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

/*
 * A policy's second chance for t after tpe_execute's step 3 failed, decided
 * afresh under one lock, because the pool may have changed since step 3
 * looked (a worker timed out and left): the queue's own offer, else a new
 * worker below max, else `force` (a policy's forcing offer). ECANCELED when
 * not RUNNING; the force's EAGAIN; EAGAIN/ENOMEM when no worker is alive
 * and none can be started (t is then not kept). 0: the pool took t.
 */
int tpe__pool_requeue(tpe_t *pool, struct tpe__task *t,
    int (*force)(struct tpe__queue *q, struct tpe__task *t));

/* DISCARD_OLDEST: under one lock, takes the queue's head out (*victim) and
 * offers t. 0, EAGAIN (nothing to drop or refused again), ECANCELED. */
int tpe__pool_replace_oldest(tpe_t *pool, struct tpe__task *t,
    struct tpe__task **victim);

void tpe__pool_count_rejected(tpe_t *pool);

/* ---- blocking submit (submit_wait.c; the pool's side in pool.c) ------- */

/*
 * tpe_execute's steps for t under the lock, then the policy's forced
 * offer (scale-first's re-enqueue), then a parked reserved thread (its
 * hand for a hand-off, else a wake-up to drain the queue), but never the
 * rejection policy. 0: the pool took t (*signal as for an offer: signal
 * work_cond after the unlock); ECANCELED: not RUNNING; EAGAIN with
 * *saturated: the call would have been rejected for saturation, t is
 * still the caller's; EAGAIN or ENOMEM without it: no worker is alive and
 * none could be started, so nothing would ever make room. L held
 * (dropped while a thread starts).
 */
int tpe__pool_place_locked(tpe_t *pool, struct tpe__task *t, bool *signal,
    bool *saturated);

/* Wakes the oldest blocked submitter / every one of them. L held. */
void tpe__submit_wake_head_locked(tpe_t *pool);
void tpe__submit_wake_all_locked(tpe_t *pool);
/* White-box tests: blocked submitters in pool's line (takes the lock);
 * and, when set, called with pool->lock held by a submitter that has just
 * joined the line, before it sleeps (it may only post a semaphore). */
size_t tpe__submit_waiting(tpe_t *pool);
extern void (*tpe__submit_joined_hook)(tpe_t *pool);

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
	if (pool->submit_line.head != NULL)
		tpe__submit_wake_head_locked(pool);
}


/* In the child of fork(), with pool->lock held by this thread (copied from
 * the parent); leaves it initialised afresh, unlocked. */
void tpe__pool_atfork_child(tpe_t *pool);

/* The pool this thread is a worker of / runs the terminated hook of. */
extern __thread tpe_t *tpe__tls_worker_pool;
extern __thread tpe_t *tpe__tls_hook_pool;

#endif /* TPE_POOL_H */
