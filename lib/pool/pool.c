/* SPDX-License-Identifier: MIT */
/*
 * pool.c - the pool: tpe_execute's three steps, lifecycle (shutdown,
 * termination), sizing, maintenance and statistics. See pool.h for the
 * design notes, the lock legend and the invariants.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pool/future.h"
#include "base/invocation.h"
#include "policy/policy.h"
#include "pool/pool.h"
#include "pool/registry.h"
#include "pool/task.h"
#include "policy/rejection.h"
#include "base/sized.h"
#include "base/sync.h"
#include "pool/worker.h"

__thread tpe_t *tpe__tls_worker_pool;
__thread tpe_t *tpe__tls_hook_pool;

static int
load_state(const tpe_t *pool)
{
	/* Pairs with set_state_locked(). */
	return __atomic_load_n(&pool->state, __ATOMIC_ACQUIRE);
}

static void
set_state_locked(tpe_t *pool, int state)
{
	TPE__ASSERT_HELD(&pool->lock);
	/* Monotonic (pool.h); a fork child re-marks a terminated pool. */
	TPE__ASSERT(state > pool->state || state == TPE__TERMINATED);
	/* seq_cst: pairs with the lock-free offer's load of state after its
	 * push (pool.h); release for load_state() readers. */
	__atomic_store_n(&pool->state, state, __ATOMIC_SEQ_CST);
}

/* seq_cst: pairs with the loads of tpe_try_execute and the claimer's
 * re-check in tpe__reserve_hand (reserved.c). L held. */
static void
set_paused_locked(tpe_t *pool, bool paused)
{
	TPE__ASSERT_HELD(&pool->lock);
	__atomic_store_n(&pool->paused, paused, __ATOMIC_SEQ_CST);
}

/* Idle workers re-check state and configuration (Java's interruptIdleWorkers). */
static void
wake_workers_locked(tpe_t *pool)
{
	tpe__reserve_wake_all_locked(pool);
	TPE__ASSERT_HELD(&pool->lock);
	pool->config_gen++;
	tpe__cond_broadcast(&pool->work_cond);
	if (pool->queue->ops->wake_all != NULL)
		pool->queue->ops->wake_all(pool->queue);
	/* Blocked submitters: ECANCELED, or room after a resize or resume. */
	if (pool->submit_line.head != NULL)
		tpe__submit_wake_all_locked(pool);
}

static bool
match_all(const struct tpe__task *t, void *ctx)
{
	(void)t;
	(void)ctx;
	return true;
}

/* ---- termination ------------------------------------------------------ */

bool
tpe__pool_try_terminate_locked(tpe_t *pool)
{
	TPE__ASSERT_HELD(&pool->lock);
	if (pool->state == TPE__RUNNING || pool->state >= TPE__TIDYING)
		return false;
	if (pool->state == TPE__SHUTDOWN && !tpe__queue_is_empty(pool->queue))
		return false;
	if (pool->nthreads != 0 || pool->handing_back != 0) {
		/* Idle workers must see the new state and leave. */
		tpe__cond_broadcast(&pool->work_cond);
		return false;
	}
	set_state_locked(pool, TPE__TIDYING);
	return true;
}

void
tpe__pool_finish_termination(tpe_t *pool)
{
	tpe_t *outer = tpe__tls_hook_pool;
	unsigned gen = tpe__fork_gen();

	if (pool->attr.terminated != NULL) {
		tpe__tls_hook_pool = pool;
		pool->attr.terminated(pool, pool->attr.terminated_ctx);
		if (tpe__forked_since(gen))
			return; /* the child's pool is terminated already */
		tpe__tls_hook_pool = outer;
	}
	tpe__mutex_lock(&pool->lock);
	set_state_locked(pool, TPE__TERMINATED);
	tpe__cond_broadcast(&pool->term_cond);
	tpe__cond_broadcast(&pool->idle_cond);
	tpe__mutex_unlock(&pool->lock);
}

/* Unlocks, then finishes termination if this thread entered TIDYING. */
static void
unlock_and_terminate(tpe_t *pool)
{
	bool terminate = tpe__pool_try_terminate_locked(pool);

	tpe__mutex_unlock(&pool->lock);
	if (terminate)
		tpe__pool_finish_termination(pool);
}

/* ---- creation --------------------------------------------------------- */

/*
 * A queue kind that runs its own workers learns its pool, and a fixed pool
 * starts all its workers now, so that every worker stack has its owner
 * from the first submission on (queue.h). 0, or the error of the kind or
 * of the thread start (the pool is then destroyed by the caller).
 */
static int
attach_queue(tpe_t *pool)
{
	struct tpe__queue *q = pool->queue;
	int rc = 0;

	if (q->ops->attach != NULL)
		rc = q->ops->attach(q, pool);
	if (rc != 0 || !q->ops->fixed_pool)
		return rc;
	tpe__mutex_lock(&pool->lock);
	while (rc == 0 && pool->wc < pool->core)
		rc = tpe__worker_start_locked(pool, NULL);
	tpe__mutex_unlock(&pool->lock);
	return rc;
}

int
tpe_create(tpe_t **poolp, const tpe_attr_t *attr)
{
	struct tpe__policy_setup setup;
	tpe_t *pool;
	int rc;

	if (poolp == NULL)
		return EINVAL;
	pool = calloc(1, sizeof(*pool));
	if (pool == NULL)
		return ENOMEM;
	if (attr != NULL)
		pool->attr = *attr;
	else
		tpe__attr_defaults(&pool->attr);
	rc = tpe__attr_validate(&pool->attr);
	if (rc == 0)
		rc = tpe__reserve_init(&pool->reserve,
		    tpe__reserve_capacity(&pool->attr));
	if (rc == 0) {
		rc = tpe__policy_install(&pool->attr, &setup);
		if (rc != 0)
			tpe__reserve_destroy(&pool->reserve);
	}
	if (rc != 0) {
		free(pool);
		return rc;
	}
	pool->queue = setup.queue;
	pool->reject = setup.reject;
	pool->reject_ctx = setup.reject_ctx;
	pool->policy_state = setup.state;
	pool->queued_grow_to_max = setup.queued_grow_to_max;
	pool->policy_free = setup.state_free;
	pool->core = pool->attr.core;
	pool->max = pool->attr.max;
	pool->keep_alive_ns = pool->attr.keep_alive_ns;
	pool->allow_core_timeout = pool->attr.allow_core_timeout;
	pool->state = TPE__RUNNING;
	tpe__mutex_init(&pool->lock);
	tpe__cond_init(&pool->work_cond);
	tpe__cond_init(&pool->idle_cond);
	tpe__cond_init(&pool->term_cond);
	tpe__registry_add(pool);
	rc = attach_queue(pool);
	if (rc != 0) {
		/* Never handed out: no terminated hook for it. */
		pool->attr.terminated = NULL;
		tpe_destroy(pool);
		return rc;
	}
	*poolp = pool;
	return 0;
}

/* ---- execute ---------------------------------------------------------- */

struct owned_node {
	const struct tpe__task *t;
	const void *owner;
};

static bool
match_owned(const struct tpe__task *t, void *ctx)
{
	const struct owned_node *k = ctx;

	return t == k->t && t->owner == k->owner;
}

/*
 * Takes the task the caller submitted as node t with token `owner` back out
 * of the queue, uncounted, if it is still there: true when it was (the
 * caller keeps it), false when a worker took it or tpe_shutdown_now handed
 * it back. The token, not the address alone: the node may have run and
 * been reused for another task since the caller last held the lock
 * (task.h). L held.
 */
static bool
take_back_locked(tpe_t *pool, struct tpe__task *t, const void *owner)
{
	struct owned_node k = { t, owner };
	struct tpe__task_list out;

	TPE__ASSERT_HELD(&pool->lock);
	tpe__task_list_init(&out);
	if (pool->queue->ops->remove_if(pool->queue, match_owned, &k, 1,
	    &out) == 0)
		return false;
	tpe__pool_count_submitted(pool, -1);
	tpe__pool_notify_idle_locked(pool);
	tpe__pool_room_locked(pool);
	return true;
}

/*
 * t is in the queue and counted: make sure some worker will take it.
 * Returns with pool->lock held; 0, or the start error when no worker is
 * alive and t could be taken back out of the queue (then the caller keeps t).
 */
static int
ensure_taker_locked(tpe_t *pool, struct tpe__task *t, const void *owner,
    bool *signal)
{
	int rc;

	TPE__ASSERT_HELD(&pool->lock);
	*signal = tpe__queue_needs_signal(pool->queue);
	/* Parked reserved threads do not take queued tasks while another
	 * worker waits for them; when none does (the others are all busy,
	 * or there are none), the parked ones leave the reserve to look at
	 * the queue, so a task never waits behind busy workers while a
	 * thread of the pool idles (an EPC strategy's queued producer would
	 * stall production there). They park again once it is empty. */
	if (pool->wc > 0 && pool->queue->takers == 0 &&
	    tpe__reserve_parked(&pool->reserve) > 0)
		tpe__reserve_wake_all_locked(pool);
	if (pool->wc > 0 || pool->paused)
		return 0;
	/* Java's re-check: no worker alive, start one for the queue. */
	rc = tpe__worker_start_locked(pool, NULL);
	if (rc == 0 || pool->wc > 0)
		return 0;
	/* Samba's rule: nobody can run it, so do not keep it. */
	return take_back_locked(pool, t, owner) ? rc : 0;
}

/* After an offer under the lock succeeded: count it, then as above. The
 * lock has been held since the offer, so t is still the caller's task. */
static int
accepted_locked(tpe_t *pool, struct tpe__task *t, bool *signal)
{
	TPE__ASSERT_HELD(&pool->lock);
	tpe__pool_count_submitted(pool, 1);
	tpe__queue_offered(pool->queue);
	return ensure_taker_locked(pool, t, t->owner, signal);
}

int
tpe__pool_replace_oldest(tpe_t *pool, struct tpe__task *t,
    struct tpe__task **victim)
{
	struct tpe__queue *q = pool->queue;
	bool signal = false;
	int rc;

	*victim = NULL;
	tpe__mutex_lock(&pool->lock);
	if (pool->state != TPE__RUNNING) {
		rc = ECANCELED;
	} else if ((*victim = tpe__queue_drop_oldest(q)) == NULL) {
		rc = EAGAIN;
	} else if ((rc = tpe__queue_force(q, t)) == 0) {
		/* Forced: the slot just freed is this task's, whatever policy
		 * rule the queue's plain offer applies. */
		rc = accepted_locked(pool, t, &signal);
	}
	tpe__mutex_unlock(&pool->lock);
	if (signal)
		tpe__cond_signal(&pool->work_cond);
	return rc;
}

void
tpe__pool_count_rejected(tpe_t *pool)
{
	tpe__mutex_lock(&pool->lock);
	pool->rejected++;
	tpe__mutex_unlock(&pool->lock);
}

/*
 * Starts a worker whose first task is t. t counts as submitted before the
 * lock is dropped: the new worker may run and finish it before the lock
 * comes back, and no snapshot may show completed > submitted. L held.
 */
static int
start_with_task_locked(tpe_t *pool, struct tpe__task *t)
{
	int rc;

	TPE__ASSERT_HELD(&pool->lock);
	tpe__pool_count_submitted(pool, 1);
	rc = tpe__worker_start_locked(pool, t);
	if (rc != 0)
		tpe__pool_count_submitted(pool, -1);
	return rc;
}

/*
 * Steps 1 and 3: a new worker for t while the pool is below `limit`.
 * Returns true when that decided the call (*rc: 0 started, ECANCELED the
 * pool was shut down while the lock was dropped to start it), false to go
 * on to the next step. L held.
 */
static bool
step_start_locked(tpe_t *pool, struct tpe__task *t, size_t limit, int *rc)
{
	TPE__ASSERT_HELD(&pool->lock);
	if (pool->paused || pool->wc >= limit)
		return false;
	if (start_with_task_locked(pool, t) == 0) {
		*rc = 0;
		return true;
	}
	if (pool->state != TPE__RUNNING) {
		*rc = ECANCELED;
		return true;
	}
	return false;
}

/*
 * The lock-free offer found the pool shut down, without workers, or with
 * a worker asleep (pool.h): settle t under the lock. 0: the pool took t;
 * ECANCELED: t was taken back (Java's "!isRunning && remove"), the caller
 * keeps it; or ensure_taker_locked's error.
 */
static int
settle_lockfree(tpe_t *pool, struct tpe__task *t, const void *owner)
{
	bool signal = false;
	int rc = 0;

	tpe__mutex_lock(&pool->lock);
	if (pool->state != TPE__RUNNING) {
		if (take_back_locked(pool, t, owner)) {
			tpe__task_free(pool, t);
			rc = ECANCELED;
		}
		/* Its removal may be what termination waited for. */
		unlock_and_terminate(pool);
		return rc;
	}
	rc = ensure_taker_locked(pool, t, owner, &signal);
	if (rc != 0)
		tpe__task_free(pool, t);
	tpe__mutex_unlock(&pool->lock);
	if (signal)
		tpe__cond_signal(&pool->work_cond);
	return rc;
}

/*
 * Step 2 without the lock, for a queue that takes lock-free offers, once
 * step 1 cannot apply (at least core workers) and some worker is alive
 * (pool.h). Returns false to take the locked path instead.
 */
static bool
dispatch_lockfree(tpe_t *pool, tpe_fn fn, void *arg, struct tpe_future *f,
    const void *owner, int *rc)
{
	struct tpe__queue *q = pool->queue;
	struct tpe__task *t;
	bool first;
	size_t wc, parked;

	if (q->ops->offer_lockfree == NULL)
		return false;
	wc = __atomic_load_n(&pool->wc, __ATOMIC_RELAXED);
	if (wc == 0 || wc < __atomic_load_n(&pool->core, __ATOMIC_RELAXED) ||
	    load_state(pool) != TPE__RUNNING)
		return false;
	t = tpe__task_new(pool, fn, arg, f, owner);
	if (t == NULL) {
		*rc = ENOMEM;
		return true;
	}
	/* Counted before any worker can finish it (tpe_get_stats). */
	tpe__pool_count_submitted(pool, 1);
	first = q->ops->offer_lockfree(q, t);
	/* Java's re-check after the offer. These seq_cst loads follow the
	 * push's seq_cst CAS: they pair with the stores of state
	 * (set_state_locked, under the lock, then the workers' look at the
	 * queue), of wc (may_leave_locked), of q->sleepers (queue.c) and of
	 * a reserved slot (reserved.c, park): with threads parked in the
	 * reserve, some other worker must be waiting for tasks
	 * (ensure_taker_locked), or the lock settles it. */
	wc = __atomic_load_n(&pool->wc, __ATOMIC_SEQ_CST);
	parked = tpe__reserve_parked(&pool->reserve);
	if (__atomic_load_n(&pool->state, __ATOMIC_SEQ_CST) == TPE__RUNNING &&
	    wc > parked &&
	    (parked == 0 || __atomic_load_n(&q->takers, __ATOMIC_SEQ_CST) > 0) &&
	    !(first && tpe__queue_sleeper_needed(q)))
		*rc = 0;
	else
		*rc = settle_lockfree(pool, t, owner);
	return true;
}

int
tpe__pool_requeue(tpe_t *pool, struct tpe__task *t,
    int (*force)(struct tpe__queue *q, struct tpe__task *t))
{
	struct tpe__queue *q = pool->queue;
	bool signal = false;
	int rc;

	tpe__mutex_lock(&pool->lock);
	if (pool->state != TPE__RUNNING)
		rc = ECANCELED;
	else if (q->ops->offer(q, t) == 0)
		rc = accepted_locked(pool, t, &signal);
	else if (step_start_locked(pool, t, pool->max, &rc))
		; /* started (0), or shut down meanwhile (ECANCELED) */
	else if ((rc = force(q, t)) == 0)
		rc = accepted_locked(pool, t, &signal);
	tpe__mutex_unlock(&pool->lock);
	if (signal)
		tpe__cond_signal(&pool->work_cond);
	return rc;
}

/*
 * Java's execute(): 1. below core, a new worker for t; 2. the queue;
 * 3. below max, a new worker for t; 4. the rejection policy. Step 2 for a
 * queue with lock-free offers goes through dispatch_lockfree, which makes
 * Java's re-checks after its push; everything else is decided under
 * pool->lock, where the shutdown re-check of Java's step 2 is the state
 * test made before the offer under the same lock.
 * 0: the pool (or the policy) took t; else the caller keeps t.
 */
static int
dispatch(tpe_t *pool, tpe_fn fn, void *arg, struct tpe_future *f)
{
	struct tpe__queue *q = pool->queue;
	struct tpe__task *t;
	bool signal = false;
	char token = 0; /* this call's owner token: its address (task.h) */
	int rc;

	if (q->ops->submit != NULL)
		return q->ops->submit(q, fn, arg, f);
	if (dispatch_lockfree(pool, fn, arg, f, &token, &rc))
		return rc;
	if (load_state(pool) != TPE__RUNNING)
		return ECANCELED;
	t = tpe__task_new(pool, fn, arg, f, &token);
	if (t == NULL)
		return ENOMEM;
	tpe__mutex_lock(&pool->lock);
	if (pool->state != TPE__RUNNING) {
		tpe__mutex_unlock(&pool->lock);
		tpe__task_free(pool, t);
		return ECANCELED;
	}
	if (step_start_locked(pool, t, pool->core, &rc))
		goto decided;
	if (q->ops->offer(q, t) == 0) {
		rc = accepted_locked(pool, t, &signal);
		goto decided;
	}
	if (step_start_locked(pool, t, pool->max, &rc))
		goto decided;
	tpe__mutex_unlock(&pool->lock);
	rc = pool->reject(pool, t, pool->reject_ctx);
	if (rc != 0)
		tpe__task_free(pool, t);
	return rc;

decided:
	if (rc != 0)
		tpe__task_free(pool, t);
	tpe__mutex_unlock(&pool->lock);
	if (signal)
		tpe__cond_signal(&pool->work_cond);
	return rc;
}

int
tpe_execute(tpe_t *pool, tpe_fn fn, void *arg)
{
	if (pool == NULL || fn == NULL)
		return EINVAL;
	return dispatch(pool, fn, arg, NULL);
}

int
tpe_execute_typed(tpe_t *pool, tpe_fn fn, void *arg, enum tpe_invocation type)
{
	/* The pool runs every type the same way; the type is for the
	 * strategies that decide which thread runs a task (tpe(7)). */
	if (!tpe__invocation_valid(type))
		return EINVAL;
	return tpe_execute(pool, fn, arg);
}

/*
 * A miss of tpe_try_execute: asks the reserve for one more thread, and,
 * when no worker can answer (none idle, none starting) and the pool is
 * below max, starts one, as Jetty's ReservedThreadExecutor starts a
 * reserved thread through its executor. Without it a pool used only
 * through tpe_try_execute would never get a reserved thread. Never waits
 * for the lock (a busy lock means a worker or a submitter is at work, and
 * the next miss tries again) nor for the thread to park: the new worker
 * finds the queue empty and parks (get_task, tpe__reserve_wanted_locked).
 */
static void
reserve_miss(tpe_t *pool)
{
	struct tpe__reserve *r = &pool->reserve;

	tpe__reserve_request(pool);
	if (tpe__reserve_wanted(r) == 0 || !tpe__mutex_trylock(&pool->lock))
		return;
	/* One thread per want at most: r->starting counts those started
	 * whose want no worker took yet (tpe__reserve_wanted_locked). */
	if (pool->state == TPE__RUNNING && !pool->paused &&
	    pool->queue->takers == 0 && pool->wc < pool->max &&
	    r->starting < tpe__reserve_wanted(r)) {
		r->starting++;
		if (tpe__worker_start_locked(pool, NULL) != 0 &&
		    r->starting > 0)
			r->starting--;
	}
	tpe__mutex_unlock(&pool->lock);
}

/*
 * Hands the task to a parked reserved thread, or refuses at once: no
 * queue, no wait for a thread (reserved.h); a miss may start one
 * (reserve_miss). The task
 * counts as submitted before the hand-off, since the reserved thread may
 * finish it before this returns.
 */
int
tpe_try_execute(tpe_t *pool, tpe_fn fn, void *arg)
{
	struct tpe__task *t;
	bool cancelled;
	char token = 0; /* this call's owner token (task.h) */

	if (pool == NULL || fn == NULL)
		return EINVAL;
	if (load_state(pool) != TPE__RUNNING)
		return ECANCELED;
	/* A paused pool starts no task (tpe_pause(3)): refused, and no
	 * reserved thread is asked for. The claimer re-checks after its
	 * claim, and a thread handed a task as the pause comes holds it
	 * until resume (tpe__reserve_park_locked). */
	if (__atomic_load_n(&pool->paused, __ATOMIC_SEQ_CST))
		return EAGAIN;
	if (tpe__reserve_parked(&pool->reserve) == 0) {
		reserve_miss(pool);
		return EAGAIN;
	}
	t = tpe__task_new(pool, fn, arg, NULL, &token);
	if (t == NULL)
		return ENOMEM;
	tpe__pool_count_submitted(pool, 1);
	if (tpe__reserve_hand(&pool->reserve, t, &pool->state, &pool->paused,
	    &cancelled))
		return 0;
	tpe__pool_count_submitted(pool, -1);
	tpe__task_free(pool, t);
	if (cancelled)
		return ECANCELED;
	reserve_miss(pool);
	return EAGAIN;
}

int
tpe_submit(tpe_t *pool, tpe_call_fn fn, void *arg, tpe_future_t **future)
{
	struct tpe_future *f;
	int rc;

	if (pool == NULL || fn == NULL || future == NULL)
		return EINVAL;
	/* Refused for shutdown before anything is allocated: a shut-down
	 * pool says ECANCELED even when memory is short. */
	if (load_state(pool) != TPE__RUNNING)
		return ECANCELED;
	rc = tpe__future_create(&f, fn, arg);
	if (rc != 0)
		return rc;
	rc = dispatch(pool, NULL, arg, f);
	if (rc != 0) {
		tpe__future_unref(f);
		tpe__future_unref(f);
		return rc;
	}
	*future = f;
	return 0;
}

/* ---- blocking submit: the dispatch without the rejection policy ------- */

int
tpe__pool_place_locked(tpe_t *pool, struct tpe__task *t, bool *signal,
    bool *saturated)
{
	struct tpe__queue *q = pool->queue;
	int rc;

	TPE__ASSERT_HELD(&pool->lock);
	*saturated = false;
	if (pool->state != TPE__RUNNING)
		return ECANCELED;
	/* dispatch's steps 1 to 3, as tpe__pool_requeue decides afresh. */
	if (step_start_locked(pool, t, pool->core, &rc))
		return rc;
	if (q->ops->offer(q, t) == 0)
		return accepted_locked(pool, t, signal);
	if (step_start_locked(pool, t, pool->max, &rc))
		return rc;
	/* Scale-first's re-enqueue (room in the queue, whatever its rule);
	 * for queue-first the same offer again, after step 3 may have
	 * dropped the lock. */
	if (tpe__queue_force(q, t) == 0)
		return accepted_locked(pool, t, signal);
	/* Parked reserved threads (reserved.h) are idle workers that take
	 * no queued or handed-off task, and a blocked submitter must not
	 * wait for room only they could make: with tasks queued they look
	 * again (and take those before they park again); with none (the
	 * hand-off), one takes t, as from tpe_try_execute. Not while paused. */
	if (!pool->paused && tpe__reserve_parked(&pool->reserve) > 0) {
		bool cancelled;

		if (!tpe__queue_is_empty(q)) {
			tpe__reserve_wake_all_locked(pool);
		} else {
			/* Counted first: the reserved thread may finish t
			 * before the caller counts (tpe_try_execute). */
			tpe__pool_count_submitted(pool, 1);
			if (tpe__reserve_hand(&pool->reserve, t, &pool->state,
			    &pool->paused, &cancelled))
				return 0;
			tpe__pool_count_submitted(pool, -1);
		}
	}
	/* Saturated, unless no worker is alive and the pool is not paused:
	 * then step 3 could not start a thread (below max), and no worker
	 * will ever make room. */
	*saturated = pool->wc > 0 || pool->paused;
	return EAGAIN;
}

/* ---- lifecycle -------------------------------------------------------- */

/*
 * The queue holds tasks but no worker is alive to run them (a paused pool
 * that never started one, or thread creation failing): start one. Called
 * and returns with the lock held; 0 or the start error.
 */
static int
ensure_worker_locked(tpe_t *pool)
{
	TPE__ASSERT_HELD(&pool->lock);
	if (pool->wc > 0 || pool->paused || pool->state >= TPE__STOP ||
	    tpe__queue_is_empty(pool->queue))
		return 0;
	return tpe__worker_start_locked(pool, NULL);
}

int
tpe_shutdown(tpe_t *pool)
{
	struct tpe__task_list orphans;

	if (pool == NULL)
		return EINVAL;
	tpe__task_list_init(&orphans);
	tpe__mutex_lock(&pool->lock);
	if (pool->state == TPE__RUNNING) {
		set_state_locked(pool, TPE__SHUTDOWN);
		set_paused_locked(pool, false);
		wake_workers_locked(pool);
	}
	if (ensure_worker_locked(pool) != 0 && pool->wc == 0) {
		/* Nobody can drain the queue: hand its tasks back. */
		pool->queue->ops->remove_if(pool->queue, match_all, NULL,
		    SIZE_MAX, &orphans);
	}
	if (orphans.count > 0) {
		tpe_handback_fn cb = pool->attr.discard;
		void *ctx = pool->attr.discard_ctx;

		pool->handing_back++;
		tpe__mutex_unlock(&pool->lock);
		if (!tpe__task_hand_back_list(pool, &orphans, cb, ctx))
			return 0; /* forked in cb: the child's pool is done */
		tpe__mutex_lock(&pool->lock);
		TPE__ASSERT(pool->handing_back > 0);
		pool->handing_back--;
	}
	unlock_and_terminate(pool);
	return 0;
}

/*
 * Hands the tasks a drain removed (out) to cb outside the lock; L held on
 * entry and, when it returns true, on return. Termination waits until they
 * are all handed back (handing_back). False: cb forked and this is the
 * child (the lock is not held; touch nothing of the pool, as tpe_shutdown).
 */
static bool
hand_back_removed_locked(tpe_t *pool, struct tpe__task_list *out,
    tpe_handback_fn cb, void *ctx)
{
	TPE__ASSERT_HELD(&pool->lock);
	if (out->count == 0)
		return true;
	pool->handing_back++;
	tpe__pool_notify_idle_locked(pool);
	tpe__mutex_unlock(&pool->lock);
	if (!tpe__task_hand_back_list(pool, out, cb, ctx))
		return false;
	tpe__mutex_lock(&pool->lock);
	TPE__ASSERT(pool->handing_back > 0);
	pool->handing_back--;
	return true;
}

int
tpe_shutdown_now(tpe_t *pool, tpe_handback_fn drained, void *ctx)
{
	struct tpe__task_list out;

	if (pool == NULL)
		return EINVAL;
	if (drained == NULL) {
		drained = pool->attr.discard;
		ctx = pool->attr.discard_ctx;
	}
	tpe__task_list_init(&out);
	tpe__mutex_lock(&pool->lock);
	if (pool->state < TPE__STOP) {
		set_state_locked(pool, TPE__STOP);
		set_paused_locked(pool, false);
		wake_workers_locked(pool);
	}
	pool->queue->ops->remove_if(pool->queue, match_all, NULL, SIZE_MAX,
	    &out);
	if (!hand_back_removed_locked(pool, &out, drained, ctx))
		return 0; /* forked in drained: see tpe_shutdown */
	unlock_and_terminate(pool);
	return 0;
}

static bool
waits_on_itself(const tpe_t *pool)
{
	return tpe__tls_worker_pool == pool || tpe__tls_hook_pool == pool;
}

int
tpe_await_termination(tpe_t *pool, int64_t timeout_ns)
{
	int64_t deadline;
	int rc = 0;

	if (pool == NULL)
		return EINVAL;
	if (timeout_ns != 0 && waits_on_itself(pool) &&
	    load_state(pool) != TPE__TERMINATED)
		return EDEADLK;
	deadline = tpe__deadline(timeout_ns);
	tpe__mutex_lock(&pool->lock);
	while (pool->state != TPE__TERMINATED) {
		if (timeout_ns == 0 || rc == ETIMEDOUT) {
			rc = ETIMEDOUT;
			break;
		}
		rc = tpe__cond_wait_until(&pool->term_cond, &pool->lock,
		    deadline);
	}
	if (pool->state == TPE__TERMINATED)
		rc = 0;
	tpe__mutex_unlock(&pool->lock);
	return rc;
}

int
tpe_destroy(tpe_t *pool)
{
	if (pool == NULL)
		return EINVAL;
	if (waits_on_itself(pool))
		return EDEADLK;
	tpe_shutdown(pool);
	tpe_await_termination(pool, -1);
	tpe__registry_remove(pool);
	tpe__worker_reap(pool);
	pool->queue->ops->destroy(pool->queue);
	tpe__node_returns_free(&pool->returns);
	tpe__reserve_destroy(&pool->reserve);
	if (pool->policy_free != NULL)
		pool->policy_free(pool->policy_state);
	tpe__cond_destroy(&pool->term_cond);
	tpe__cond_destroy(&pool->idle_cond);
	tpe__cond_destroy(&pool->work_cond);
	tpe__mutex_destroy(&pool->lock);
	free(pool);
	return 0;
}

bool
tpe_is_shutdown(const tpe_t *pool)
{
	return pool != NULL && load_state(pool) >= TPE__SHUTDOWN;
}

bool
tpe_is_terminated(const tpe_t *pool)
{
	return pool != NULL && load_state(pool) == TPE__TERMINATED;
}

/*
 * Starts workers for the tasks already queued (one per task no waiting
 * worker is claimed for), up to core (Java's setCorePoolSize) or, under a
 * policy that grows before queueing, up to max. L held.
 */
static int
start_for_queue_locked(tpe_t *pool)
{
	size_t limit = pool->queued_grow_to_max ? pool->max : pool->core;
	size_t queued = pool->queue->ops->size(pool->queue);
	size_t unclaimed = queued > pool->queue->takers ?
	    queued - pool->queue->takers : 0;
	size_t k = pool->wc < limit ? limit - pool->wc : 0;
	int rc = 0;

	TPE__ASSERT_HELD(&pool->lock);
	/* Decided once, like Java's setCorePoolSize: a worker just started
	 * has not taken its task yet, so re-reading the queue would overshoot. */
	if (k > unclaimed)
		k = unclaimed;
	while (rc == 0 && k-- > 0 && pool->state == TPE__RUNNING &&
	    !pool->paused && pool->wc < limit)
		rc = tpe__worker_start_locked(pool, NULL);
	if (rc == 0)
		rc = ensure_worker_locked(pool);
	return rc;
}

int
tpe_pause(tpe_t *pool)
{
	int rc = 0;

	if (pool == NULL)
		return EINVAL;
	tpe__mutex_lock(&pool->lock);
	if (pool->state != TPE__RUNNING)
		rc = ECANCELED;
	else if (!pool->paused) {
		set_paused_locked(pool, true);
		wake_workers_locked(pool);
	}
	tpe__mutex_unlock(&pool->lock);
	return rc;
}

int
tpe_resume(tpe_t *pool)
{
	int rc = 0;

	if (pool == NULL)
		return EINVAL;
	tpe__mutex_lock(&pool->lock);
	if (pool->state != TPE__RUNNING) {
		rc = ECANCELED;
	} else if (pool->paused) {
		set_paused_locked(pool, false);
		wake_workers_locked(pool);
		rc = start_for_queue_locked(pool);
		if (rc != 0 && pool->wc > 0)
			rc = 0;
	}
	tpe__mutex_unlock(&pool->lock);
	return rc;
}

int
tpe_wait_idle(tpe_t *pool, int64_t timeout_ns)
{
	int64_t deadline;
	int rc = 0;

	if (pool == NULL)
		return EINVAL;
	if (tpe__tls_worker_pool == pool)
		return EDEADLK;
	deadline = tpe__deadline(timeout_ns);
	tpe__mutex_lock(&pool->lock);
	/* seq_cst: pairs with tpe__pool_idle_waited (pool.h). */
	__atomic_store_n(&pool->idle_waiters, pool->idle_waiters + 1,
	    __ATOMIC_SEQ_CST);
	while (!tpe__pool_is_idle_locked(pool)) {
		if (timeout_ns == 0 || rc == ETIMEDOUT) {
			rc = ETIMEDOUT;
			break;
		}
		rc = tpe__cond_wait_until(&pool->idle_cond, &pool->lock,
		    deadline);
	}
	if (tpe__pool_is_idle_locked(pool))
		rc = 0;
	TPE__ASSERT(pool->idle_waiters > 0);
	__atomic_store_n(&pool->idle_waiters, pool->idle_waiters - 1,
	    __ATOMIC_RELAXED);
	tpe__mutex_unlock(&pool->lock);
	return rc;
}

/* ---- sizing ----------------------------------------------------------- */

int
tpe_set_pool_size(tpe_t *pool, size_t core, size_t max)
{
	if (pool == NULL || max == 0 || core > max)
		return EINVAL;
	/* A fixed pool keeps its size (queue.h, fixed_pool). */
	if (pool->queue->ops->fixed_pool)
		return core == max && max == pool->attr.max ? 0 : EINVAL;
	tpe__mutex_lock(&pool->lock);
	__atomic_store_n(&pool->core, core, __ATOMIC_RELAXED);
	pool->max = max;
	wake_workers_locked(pool);
	/* Java's setCorePoolSize: workers for the tasks already queued. */
	(void)start_for_queue_locked(pool);
	tpe__mutex_unlock(&pool->lock);
	return 0;
}

int
tpe_set_keep_alive(tpe_t *pool, int64_t keep_alive_ns)
{
	int rc = 0;

	if (pool == NULL || keep_alive_ns < 0)
		return EINVAL;
	tpe__mutex_lock(&pool->lock);
	if (keep_alive_ns == 0 && pool->allow_core_timeout) {
		rc = EINVAL;
	} else {
		pool->keep_alive_ns = keep_alive_ns;
		wake_workers_locked(pool);
	}
	tpe__mutex_unlock(&pool->lock);
	return rc;
}

int
tpe_set_allow_core_timeout(tpe_t *pool, bool allow)
{
	int rc = 0;

	if (pool == NULL)
		return EINVAL;
	/* A fixed pool's workers never leave before shutdown. */
	if (allow && pool->queue->ops->fixed_pool)
		return EINVAL;
	tpe__mutex_lock(&pool->lock);
	if (allow && pool->keep_alive_ns == 0) {
		rc = EINVAL;
	} else if (allow != pool->allow_core_timeout) {
		pool->allow_core_timeout = allow;
		wake_workers_locked(pool);
	}
	tpe__mutex_unlock(&pool->lock);
	return rc;
}

int
tpe_prestart_core_threads(tpe_t *pool, size_t *started)
{
	size_t n = 0, k;
	int rc = 0;

	if (started != NULL)
		*started = 0;
	if (pool == NULL)
		return EINVAL;
	tpe__mutex_lock(&pool->lock);
	/* At most the missing ones, counted once: with core timeout and a
	 * keep-alive shorter than a thread start, the workers it starts may
	 * leave as fast as it starts them, and "until wc == core" would
	 * never end. */
	k = pool->wc < pool->core ? pool->core - pool->wc : 0;
	while (rc == 0 && n < k && pool->wc < pool->core) {
		if (pool->state != TPE__RUNNING)
			rc = ECANCELED;
		else if ((rc = tpe__worker_start_locked(pool, NULL)) == 0)
			n++;
	}
	if (rc == 0 && pool->state != TPE__RUNNING && n == 0)
		rc = ECANCELED;
	tpe__mutex_unlock(&pool->lock);
	if (started != NULL)
		*started = n;
	return rc;
}

/* ---- maintenance ------------------------------------------------------ */

struct match_fn_arg {
	tpe_fn fn;
	void *arg;
};

static bool
match_fn_arg(const struct tpe__task *t, void *ctx)
{
	const struct match_fn_arg *m = ctx;

	return t->future == NULL && t->fn == m->fn && t->arg == m->arg;
}

static bool
match_cancelled(const struct tpe__task *t, void *ctx)
{
	(void)ctx;
	return t->future != NULL && tpe_future_is_cancelled(t->future);
}

int
tpe_remove(tpe_t *pool, tpe_fn fn, void *arg)
{
	struct match_fn_arg m = { fn, arg };
	struct tpe__task_list out;

	if (pool == NULL || fn == NULL)
		return EINVAL;
	if (pool->queue->ops->drain_only)
		return ENOTSUP;
	tpe__task_list_init(&out);
	tpe__mutex_lock(&pool->lock);
	pool->queue->ops->remove_if(pool->queue, match_fn_arg, &m, 1, &out);
	tpe__pool_notify_idle_locked(pool);
	if (out.count > 0)
		tpe__pool_room_locked(pool);
	unlock_and_terminate(pool);
	if (out.count == 0)
		return ENOENT;
	tpe__task_free(pool, tpe__task_list_pop(&out));
	return 0;
}

int
tpe_purge(tpe_t *pool, size_t *purged)
{
	struct tpe__task_list out;
	tpe_handback_fn cb;
	void *ctx;

	if (purged != NULL)
		*purged = 0;
	if (pool == NULL)
		return EINVAL;
	if (pool->queue->ops->drain_only)
		return ENOTSUP;
	cb = pool->attr.discard;
	ctx = pool->attr.discard_ctx;
	tpe__task_list_init(&out);
	tpe__mutex_lock(&pool->lock);
	pool->queue->ops->remove_if(pool->queue, match_cancelled, NULL,
	    SIZE_MAX, &out);
	if (purged != NULL)
		*purged = out.count;
	if (out.count > 0)
		tpe__pool_room_locked(pool);
	if (!hand_back_removed_locked(pool, &out, cb, ctx))
		return 0; /* forked in cb: see tpe_shutdown */
	unlock_and_terminate(pool);
	return 0;
}

int
tpe_get_stats(const tpe_t *cpool, struct tpe_stats *stats, size_t size)
{
	tpe_t *pool = (tpe_t *)cpool; /* the lock is not part of the value */
	struct tpe_stats snap, *s = &snap;
	bool ended;

	if (pool == NULL ||
	    tpe__sized_check(&tpe__stats_layout, stats, size) != 0)
		return EINVAL;
	memset(s, 0, sizeof(*s));
	tpe__mutex_lock(&pool->lock);
	ended = pool->state >= TPE__TIDYING;
	s->pool_size = ended ? 0 : pool->wc;
	s->core_size = pool->core;
	s->max_size = pool->max;
	s->active = ended ? 0 : pool->active;
	s->idle = ended ? 0 : pool->queue->takers;
	s->completed = pool->completed;
	if (pool->queue->ops->counts != NULL) {
		size_t active;
		uint64_t completed;

		/* Its workers count themselves; an idle one is any other. */
		pool->queue->ops->counts(pool->queue, &active, &completed);
		s->active = ended ? 0 : active;
		s->idle = ended || active > pool->wc ? 0 : pool->wc - active;
		s->completed += completed;
	}
	s->largest_pool_size = pool->largest;
	TPE__ASSERT(ended || s->pool_size <= s->largest_pool_size);
	/* After the completed count: a task counts as submitted before it
	 * can run, so the snapshot never shows more completed (or taken
	 * from the queue) than submitted. */
	s->queued = pool->queue->ops->size(pool->queue);
	s->reserved = ended ? 0 : tpe__reserve_parked(&pool->reserve);
	s->submitted = __atomic_load_n(&pool->submitted, __ATOMIC_SEQ_CST);
	s->rejected = pool->rejected;
	tpe__mutex_unlock(&pool->lock);
	tpe__sized_copy(&tpe__stats_layout, stats, size, s);
	return 0;
}

/* ---- fork ------------------------------------------------------------- */

void
tpe__pool_atfork_child(tpe_t *pool)
{
	struct tpe__task_list out;
	struct tpe__task *t;

	TPE__ASSERT_HELD(&pool->lock);
	/* The workers do not exist here; the queued tasks are the parent's. */
	tpe__task_list_init(&out);
	pool->queue->ops->remove_if(pool->queue, match_all, NULL, SIZE_MAX,
	    &out);
	while ((t = tpe__task_list_pop(&out)) != NULL) {
		if (t->future != NULL)
			tpe__future_unref(t->future);
		tpe__task_free(pool, t);
	}
	tpe__worker_forget_all_locked(pool);
	tpe__pool_set_wc_locked(pool, 0);
	pool->nthreads = pool->active = 0;
	pool->queue->takers = 0;
	pool->idle_waiters = pool->handing_back = 0;
	/* The blocked submitters were threads of the parent. */
	memset(&pool->submit_line, 0, sizeof(pool->submit_line));
	set_paused_locked(pool, false);
	set_state_locked(pool, TPE__TERMINATED);
	/* The forking thread may be a worker of this pool or deliver one of
	 * its callbacks: here it is neither (tpe_destroy works in the child). */
	tpe__tls_worker_pool = NULL;
	tpe__tls_hook_pool = NULL;
	tpe__reserve_atfork_child(&pool->reserve);
	tpe__mutex_init(&pool->lock);
	tpe__cond_init(&pool->work_cond);
	tpe__cond_init(&pool->idle_cond);
	tpe__cond_init(&pool->term_cond);
}
