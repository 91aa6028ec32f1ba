/* SPDX-License-Identifier: MIT */
/*
 * pool.c - the pool: creation, the public calls that hand a task to the
 * engine, lifecycle (shutdown, termination, fork), sizing, maintenance and
 * statistics. See pool.h for the design notes, the legend and the
 * invariants; the path of a task is its engine's (lib/engine).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/probe.h"
#include "base/fork.h"
#include "base/invocation.h"
#include "base/sized.h"
#include "base/sync.h"
#include "engine/engine.h"
#include "policy/policy.h"
#include "pool/future.h"
#include "pool/pool.h"
#include "pool/task.h"
#include "pool/worker.h"

TPE__TLS tpe_t *tpe__tls_worker_pool;

static int
state_acquire(const tpe_t *pool)
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
	 * push (pool.h); release for state_acquire() readers. */
	__atomic_store_n(&pool->state, state, __ATOMIC_SEQ_CST);
}

/* seq_cst: pairs with the loads of tpe_try_execute and the claimer's
 * re-check in tpe__reserve_hand (reserve.c). L held. */
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
	TPE__ASSERT_HELD(&pool->lock);
	tpe__reserve_wake_all_locked(&pool->reserve, &pool->lock);
	pool->engine->ops->wake_all_locked(pool->engine);
	/* Blocked submitters: ECANCELED, or room after a resize or resume. */
	tpe__submit_line_wake_all_locked(&pool->submit_line, &pool->lock);
}

/* How many tasks wait in the engine. L held. */
static size_t
queued_locked(tpe_t *pool)
{
	struct tpe__engine_counts c;

	pool->engine->ops->counts_locked(pool->engine, &c);
	return c.queued;
}

/* ---- termination ------------------------------------------------------ */

bool
tpe__pool_try_terminate_locked(tpe_t *pool)
{
	TPE__ASSERT_HELD(&pool->lock);
	if (pool->state == TPE__RUNNING || pool->state >= TPE__TIDYING)
		return false;
	if (pool->nthreads != 0 || pool->handing_back != 0) {
		/* Idle workers must see the new state and leave. */
		pool->engine->ops->wake_all_locked(pool->engine);
		return false;
	}
	/* No worker is left: after a shutdown, no task may be either (with
	 * no thread, the engine's idle is "nothing queued"), nor may the
	 * timer owe one (sched.h: it settles the pool when that ends). */
	if (pool->state == TPE__SHUTDOWN &&
	    (!pool->engine->ops->idle_locked(pool->engine) ||
	    tpe__sched_owes(&pool->sched_hook)))
		return false;
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
 * The scheduler's way in (sched.h's enter): the engine's submit_wait
 * without tpe_execute_wait's check of the state, so that a SHUTDOWN pool
 * still takes the tasks the timer owes (the engine admits them:
 * tpe__sched_admits); timeout 0, never the rejection policy.
 */
static int
enter_scheduled(tpe_t *pool, tpe_fn fn, void *arg)
{
	int rc;

	/* arg is the task's record, which begins with its future (sched.c). */
	TPE__PROBE3(sched__due, pool, pool->attr.name_prefix, arg);
	rc = pool->engine->ops->submit_wait(pool->engine, fn, arg, NULL, 0);

	/* A shut-down pool whose engine does not admit them (the stacks
	 * engine's workers close their stacks once drained): ENOTSUP. */
	if (rc == ECANCELED && state_acquire(pool) == TPE__SHUTDOWN)
		return ENOTSUP;
	return rc;
}

/* The scheduler owes nothing any more (sched.h's settle). */
static void
settle_scheduled(tpe_t *pool)
{
	tpe__mutex_lock(&pool->lock);
	if (pool->idle_waiters > 0)
		tpe__cond_broadcast(&pool->idle_cond);
	unlock_and_terminate(pool);
}

/* A due task left the scheduler's timer (sched.h's look_again): the idle
 * waiters look again; the pool's state is left alone. */
static void
look_again_scheduled(tpe_t *pool)
{
	tpe__mutex_lock(&pool->lock);
	if (pool->idle_waiters > 0)
		tpe__cond_broadcast(&pool->idle_cond);
	tpe__mutex_unlock(&pool->lock);
}

/* In the child of fork(), with pool->lock held by this thread (copied from
 * the parent): the pool is terminated there; leaves it initialised afresh,
 * unlocked (base/fork.h). */
static void
atfork_child(void *ctx);

/*
 * The engine learns its pool, and a fixed pool starts all its workers now,
 * so that every worker of the stacks engine has its stack from the first
 * submission on (engine.h). 0, or the error of the engine or of the thread
 * start (the pool is then destroyed by the caller).
 */
static int
attach_engine(tpe_t *pool)
{
	struct tpe__engine *e = pool->engine;
	int rc;

	rc = e->ops->attach(e, pool);
	if (rc != 0 || (e->caps & TPE__CAP_FIXED) == 0)
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
	struct tpe__policy policy;
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
		tpe__reserve_init(&pool->reserve,
		    tpe__reserve_capacity(&pool->attr));
	if (rc == 0 && pool->attr.metrics != 0)
		rc = tpe__metrics_create(&pool->metrics, pool->attr.metrics);
	if (rc == 0) {
		rc = tpe__policy_setup(pool->attr.policy,
		    tpe__rejection_verdict(pool->attr.rejection,
		    pool->attr.reject_fn != NULL), &policy);
		if (rc == 0)
			rc = tpe__engine_create(&pool->attr, &policy,
			    &pool->engine);
		if (rc != 0)
			tpe__metrics_destroy(pool->metrics);
	}
	if (rc != 0) {
		free(pool);
		return rc;
	}
	pool->queued_grow_to_max = policy.queued_grow_to_max;
	pool->tasks.pool = pool;
	pool->tasks.attr = &pool->attr;
	pool->tasks.returns = &pool->returns;
	pool->tasks.wrap_fn = tpe__sched_task_fn;
	pool->tasks.wrap_begin = tpe__sched_begin;
	pool->sched_hook.pool = pool;
	pool->sched_hook.enter = enter_scheduled;
	pool->sched_hook.settle = settle_scheduled;
	pool->sched_hook.look_again = look_again_scheduled;
	pool->sched_hook.discard = pool->attr.discard;
	pool->sched_hook.discard_ctx = pool->attr.discard_ctx;
	pool->sched_hook.flags = pool->attr.sched_flags;
	/* Every discard passes through the scheduler, which gives its own
	 * tasks back as the user's pairs (sched.h). */
	pool->attr.discard = tpe__sched_discard;
	pool->attr.discard_ctx = &pool->sched_hook;
	pool->core = pool->attr.core;
	pool->max = pool->attr.max;
	pool->blocking.max_spare = pool->attr.max_spare;
	pool->keep_alive_ns = pool->attr.keep_alive_ns;
	pool->allow_core_timeout = pool->attr.allow_core_timeout;
	pool->state = TPE__RUNNING;
	tpe__mutex_init_ranked(&pool->lock, TPE__RANK_POOL);
	tpe__cond_init(&pool->idle_cond);
	tpe__cond_init(&pool->term_cond);
	pool->fork_entry.lock = &pool->lock;
	pool->fork_entry.child = atfork_child;
	pool->fork_entry.ctx = pool;
	tpe__fork_register(&pool->fork_entry);
	rc = attach_engine(pool);
	if (rc != 0) {
		/* Never handed out: no terminated hook for it. */
		pool->attr.terminated = NULL;
		tpe_destroy(pool);
		return rc;
	}
	*poolp = pool;
	return 0;
}

/* ---- handing tasks to the engine -------------------------------------- */

/* A submission's result for the task fn(arg) (fn NULL: a callable's);
 * one refused for shutdown counts in the metrics and fires task__reject
 * (base/probe.h; a refusal for saturation fires it in the engine). */
static int
refused(tpe_t *pool, tpe_fn fn, void *arg, int rc)
{
	if (rc == ECANCELED) {
		tpe__metrics_count(pool->metrics, TPE__M_REJECT_SHUTDOWN);
		TPE__PROBE5(task__reject, pool, pool->attr.name_prefix, fn, arg,
		    ECANCELED);
	}
	return rc;
}

void
tpe__pool_count_rejected(tpe_t *pool)
{
	tpe__mutex_lock(&pool->lock);
	pool->rejected++;
	tpe__mutex_unlock(&pool->lock);
}

int
tpe_execute(tpe_t *pool, tpe_fn fn, void *arg)
{
	if (pool == NULL || fn == NULL)
		return EINVAL;
	return refused(pool, fn, arg,
	    pool->engine->ops->submit(pool->engine, fn, arg, NULL));
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

/* Hands the task to an idle reserved worker, or refuses at once: no
 * queue, no wait for a thread (reserve.h; the engine's try_submit). */
int
tpe_try_execute(tpe_t *pool, tpe_fn fn, void *arg)
{
	if (pool == NULL || fn == NULL)
		return EINVAL;
	if (state_acquire(pool) != TPE__RUNNING)
		return refused(pool, fn, arg, ECANCELED);
	/* A paused pool starts no task (tpe_pause(3)): refused, and no
	 * reserved thread is asked for. The claimer re-checks after its
	 * claim, and a thread handed a task as the pause comes holds it
	 * until resume (tpe__reserve_park_locked). */
	if (__atomic_load_n(&pool->paused, __ATOMIC_SEQ_CST))
		return EAGAIN;
	return refused(pool, fn, arg,
	    pool->engine->ops->try_submit(pool->engine, fn, arg));
}

/*
 * tpe_submit and tpe_submit_wait: the future, then the engine's submit or
 * submit_wait (`wait`). On any error the caller gets nothing and both
 * references (the caller's and the task's) are dropped.
 */
static int
submit_future(tpe_t *pool, tpe_call_fn fn, void *arg, bool wait,
    int64_t timeout_ns, tpe_future_t **future)
{
	struct tpe__engine *e;
	struct tpe_future *f;
	int rc;

	if (pool == NULL || fn == NULL || future == NULL)
		return EINVAL;
	/* Refused for shutdown before anything is allocated: a shut-down
	 * pool says ECANCELED even when memory is short. */
	if (state_acquire(pool) != TPE__RUNNING)
		return refused(pool, NULL, arg, ECANCELED);
	rc = tpe__future_create(&f, fn, arg);
	if (rc != 0)
		return rc;
	e = pool->engine;
	rc = wait ? e->ops->submit_wait(e, NULL, arg, f, timeout_ns) :
	    e->ops->submit(e, NULL, arg, f);
	if (rc != 0) {
		tpe__future_unref(f);
		tpe__future_unref(f);
		return refused(pool, NULL, arg, rc);
	}
	*future = f;
	return 0;
}

int
tpe_submit(tpe_t *pool, tpe_call_fn fn, void *arg, tpe_future_t **future)
{
	return submit_future(pool, fn, arg, false, 0, future);
}

/* ---- blocking submit: the engine's submit_wait ------------------------- */

int
tpe_execute_wait(tpe_t *pool, tpe_fn fn, void *arg, int64_t timeout_ns)
{
	if (pool == NULL || fn == NULL)
		return EINVAL;
	/* Where the pool's state says no before anything is allocated, as
	 * tpe_execute's own check. */
	if (state_acquire(pool) != TPE__RUNNING)
		return refused(pool, fn, arg, ECANCELED);
	return refused(pool, fn, arg,
	    pool->engine->ops->submit_wait(pool->engine, fn, arg, NULL,
	    timeout_ns));
}

int
tpe_submit_wait(tpe_t *pool, tpe_call_fn fn, void *arg, int64_t timeout_ns,
    tpe_future_t **future)
{
	return submit_future(pool, fn, arg, true, timeout_ns, future);
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
	    queued_locked(pool) == 0)
		return 0;
	return tpe__worker_start_locked(pool, NULL);
}

/*
 * Hands the tasks a drain removed (out) to cb outside the lock; L held on
 * entry and, when it returns true, on return. Termination waits until they
 * are all handed back (handing_back). With `translate` (a cb that is not
 * the pool's discard callback, which passes through the scheduler), the
 * scheduled tasks among them are first turned into the user's pairs, their
 * futures cancelled, also outside the lock: a future's cancel runs its
 * continuations (tpe_future_then(3)), which may call into the pool. False:
 * cb forked and this is the child (the lock is not held; touch nothing of
 * the pool, as tpe_shutdown).
 */
static bool
hand_back_removed_locked(tpe_t *pool, struct tpe__task_list *out,
    tpe_handback_fn cb, void *ctx, bool translate)
{
	struct tpe__task *t;

	TPE__ASSERT_HELD(&pool->lock);
	if (out->count == 0)
		return true;
	pool->handing_back++;
	tpe__pool_notify_idle_locked(pool);
	tpe__mutex_unlock(&pool->lock);
	for (t = translate ? out->head : NULL; t != NULL; t = t->next)
		tpe__sched_translate(&pool->sched_hook, t);
	if (!tpe__task_hand_back_list(&pool->tasks, out, cb, ctx))
		return false;
	tpe__mutex_lock(&pool->lock);
	TPE__ASSERT(pool->handing_back > 0);
	pool->handing_back--;
	return true;
}

/* A queued scheduled task that will not run (sched.h): tpe_purge's and
 * tpe_shutdown's match. */
static bool
match_sched_dropped(const struct tpe__task *t, void *ctx)
{
	(void)ctx;
	return tpe__sched_dropped(t);
}

int
tpe_shutdown(tpe_t *pool)
{
	struct tpe__task_list orphans;

	if (pool == NULL)
		return EINVAL;
	/* First, while the pool still takes tasks: the scheduler decides
	 * what stays, which it owes the pool from now on (sched.h). */
	tpe__sched_shutdown(&pool->sched_hook);
	tpe__task_list_init(&orphans);
	tpe__mutex_lock(&pool->lock);
	if (pool->state == TPE__RUNNING) {
		set_state_locked(pool, TPE__SHUTDOWN);
		set_paused_locked(pool, false);
		wake_workers_locked(pool);
	}
	/* Scheduled runs that will not start (stopped periodic runs,
	 * cancelled ones) leave the queue now, as Java's onShutdown removes
	 * them; a kind that only drains whole hands them back when taken. */
	if ((pool->engine->caps & TPE__CAP_DRAIN_ONLY) == 0) {
		pool->engine->ops->drain_locked(pool->engine,
		    match_sched_dropped, NULL, SIZE_MAX, &orphans);
		if (orphans.count > 0)
			tpe__pool_room_locked(pool);
	}
	if (ensure_worker_locked(pool) != 0 && pool->wc == 0) {
		/* Nobody can drain the queue: hand its tasks back. */
		pool->engine->ops->drain_locked(pool->engine, NULL, NULL,
		    SIZE_MAX, &orphans);
	}
	if (!hand_back_removed_locked(pool, &orphans, pool->attr.discard,
	    pool->attr.discard_ctx, false))
		return 0; /* forked in cb: the child's pool is done */
	unlock_and_terminate(pool);
	return 0;
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
	/* Then, the pool stopped (a callback sees it shut down and refusing
	 * every task), pending scheduled tasks, each to drained once
	 * (sched.h); termination waits for them. */
	pool->handing_back++;
	tpe__mutex_unlock(&pool->lock);
	if (!tpe__sched_shutdown_now(&pool->sched_hook, drained, ctx))
		return 0; /* forked in drained: see tpe_shutdown */
	tpe__mutex_lock(&pool->lock);
	TPE__ASSERT(pool->handing_back > 0);
	pool->handing_back--;
	pool->engine->ops->drain_locked(pool->engine, NULL, NULL, SIZE_MAX,
	    &out);
	if (!hand_back_removed_locked(pool, &out, drained, ctx, true))
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
	    state_acquire(pool) != TPE__TERMINATED)
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
	tpe__sched_destroy(&pool->sched_hook);
	tpe__fork_unregister(&pool->fork_entry);
	tpe__worker_reap(pool);
	pool->engine->ops->destroy(pool->engine);
	tpe__node_returns_free(&pool->returns);
	tpe__reserve_destroy(&pool->reserve);
	tpe__metrics_destroy(pool->metrics);
	tpe__cond_destroy(&pool->term_cond);
	tpe__cond_destroy(&pool->idle_cond);
	tpe__mutex_destroy(&pool->lock);
	free(pool);
	return 0;
}

bool
tpe_is_shutdown(const tpe_t *pool)
{
	return pool != NULL && state_acquire(pool) >= TPE__SHUTDOWN;
}

bool
tpe_is_terminated(const tpe_t *pool)
{
	return pool != NULL && state_acquire(pool) == TPE__TERMINATED;
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
	struct tpe__engine_counts c;
	size_t unclaimed, k = pool->wc < limit ? limit - pool->wc : 0;
	int rc = 0;

	TPE__ASSERT_HELD(&pool->lock);
	pool->engine->ops->counts_locked(pool->engine, &c);
	unclaimed = c.queued > c.idle ? c.queued - c.idle : 0;
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
		/* Blocked workers: what the offers made meanwhile would have
		 * done. A start that fails there is retried by the next offer
		 * or begin, as a begin's is: the blocked workers live. */
		(void)tpe__blocking_resumed_locked(pool);
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
	/* A scheduled task whose delay has passed is work: due, it waits
	 * to enter the queue (sched.h; its settle wakes this wait). */
	while (!tpe__pool_is_idle_locked(pool) ||
	    tpe__sched_due(&pool->sched_hook)) {
		if (timeout_ns == 0 || rc == ETIMEDOUT) {
			rc = ETIMEDOUT;
			break;
		}
		rc = tpe__cond_wait_until(&pool->idle_cond, &pool->lock,
		    deadline);
	}
	if (tpe__pool_is_idle_locked(pool) &&
	    !tpe__sched_due(&pool->sched_hook))
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
	/* A fixed pool keeps its size (engine.h, TPE__CAP_FIXED). */
	if ((pool->engine->caps & TPE__CAP_FIXED) != 0)
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
	if (allow && (pool->engine->caps & TPE__CAP_FIXED) != 0)
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

	return tpe__task_future(t) == NULL && t->fn == m->fn &&
	    t->arg == m->arg;
}

/* A queued task whose future was cancelled; a scheduled task's is its
 * record's (sched.h). */
static bool
match_cancelled(const struct tpe__task *t, void *ctx)
{
	(void)ctx;
	if (tpe__task_future(t) == NULL)
		return tpe__sched_dropped(t);
	return tpe_future_is_cancelled(tpe__task_future(t));
}

int
tpe_remove(tpe_t *pool, tpe_fn fn, void *arg)
{
	struct match_fn_arg m = { fn, arg };
	struct tpe__task_list out;

	if (pool == NULL || fn == NULL)
		return EINVAL;
	if ((pool->engine->caps & TPE__CAP_DRAIN_ONLY) != 0)
		return ENOTSUP;
	tpe__task_list_init(&out);
	tpe__mutex_lock(&pool->lock);
	pool->engine->ops->drain_locked(pool->engine, match_fn_arg, &m, 1,
	    &out);
	tpe__pool_notify_idle_locked(pool);
	if (out.count > 0)
		tpe__pool_room_locked(pool);
	unlock_and_terminate(pool);
	if (out.count == 0)
		return ENOENT;
	tpe__task_free(&pool->tasks, tpe__task_list_pop(&out));
	return 0;
}

int
tpe_purge(tpe_t *pool, size_t *purged)
{
	struct tpe__task_list out;
	tpe_handback_fn cb;
	size_t sched_purged;
	void *ctx;

	if (purged != NULL)
		*purged = 0;
	if (pool == NULL)
		return EINVAL;
	if ((pool->engine->caps & TPE__CAP_DRAIN_ONLY) != 0)
		return ENOTSUP;
	cb = pool->attr.discard;
	ctx = pool->attr.discard_ctx;
	/* Cancelled scheduled tasks, through the discard callback too. */
	sched_purged = tpe__sched_purge(&pool->sched_hook);
	tpe__task_list_init(&out);
	tpe__mutex_lock(&pool->lock);
	pool->engine->ops->drain_locked(pool->engine, match_cancelled, NULL,
	    SIZE_MAX, &out);
	if (purged != NULL)
		*purged = out.count + sched_purged;
	if (out.count > 0)
		tpe__pool_room_locked(pool);
	if (!hand_back_removed_locked(pool, &out, cb, ctx, false))
		return 0; /* forked in cb: see tpe_shutdown */
	unlock_and_terminate(pool);
	return 0;
}

int
tpe_get_stats(const tpe_t *cpool, struct tpe_stats *stats, size_t size)
{
	tpe_t *pool = (tpe_t *)cpool; /* the lock is not part of the value */
	struct tpe_stats snap, *s = &snap;
	struct tpe__engine_counts c;
	size_t sched_pending;
	bool ended;

	if (pool == NULL ||
	    tpe__sized_check(&tpe__stats_layout, stats, size) != 0)
		return EINVAL;
	memset(s, 0, sizeof(*s));
	/* Pending scheduled tasks count as queued (tpe_schedule(3)). */
	sched_pending = tpe__sched_pending(&pool->sched_hook);
	tpe__mutex_lock(&pool->lock);
	ended = pool->state >= TPE__TIDYING;
	/* The engine's counts come before `submitted`: a task counts as
	 * submitted before it can run, so the snapshot never shows more
	 * completed (or taken from the queue) than submitted. */
	pool->engine->ops->counts_locked(pool->engine, &c);
	s->pool_size = ended ? 0 : pool->wc;
	s->core_size = pool->core;
	s->max_size = pool->max;
	s->active = ended ? 0 : c.active;
	s->idle = ended ? 0 : c.idle;
	s->completed = c.completed;
	s->largest_pool_size = pool->largest;
	TPE__ASSERT(ended || s->pool_size <= s->largest_pool_size);
	s->queued = c.queued + sched_pending;
	s->reserved = ended ? 0 : tpe__reserve_parked(&pool->reserve);
	s->submitted = c.submitted +
	    __atomic_load_n(&pool->submitted, __ATOMIC_SEQ_CST);
	s->rejected = pool->rejected;
	s->blocked = ended ? 0 : pool->blocking.blocked;
	s->compensations = pool->blocking.compensations;
	tpe__mutex_unlock(&pool->lock);
	tpe__sized_copy(&tpe__stats_layout, stats, size, s);
	return 0;
}

/* The metrics snapshot (lib/metrics) with tpe_get_stats's gauges, under
 * the lock (the baseline). */
int
tpe_get_metrics(const tpe_t *cpool, struct tpe_metrics *metrics, size_t size)
{
	tpe_t *pool = (tpe_t *)cpool; /* the lock is not part of the value */
	struct tpe_metrics *snap;
	struct tpe_stats st;

	if (pool == NULL ||
	    tpe__sized_check(&tpe__metrics_layout, metrics, size) != 0)
		return EINVAL;
	if (pool->metrics == NULL)
		return ENOTSUP;
	/* About 17 KiB: not on the stack of a task that asks. */
	snap = tpe__sized_out_begin(&tpe__metrics_layout, metrics, size);
	if (snap == NULL)
		return ENOMEM;
	(void)tpe_get_stats(pool, &st, sizeof(st));
	tpe__mutex_lock(&pool->lock);
	tpe__metrics_read_locked(pool->metrics, snap);
	snap->compensations = pool->blocking.compensations -
	    pool->metrics_comp_base;
	tpe__mutex_unlock(&pool->lock);
	snap->pool_size = st.pool_size;
	snap->active = st.active;
	snap->idle = st.idle;
	snap->queued = st.queued;
	snap->blocked = st.blocked;
	tpe__sized_out_end(&tpe__metrics_layout, metrics, size, snap);
	return 0;
}

int
tpe_metrics_reset(tpe_t *pool)
{
	int rc;

	if (pool == NULL)
		return EINVAL;
	if (pool->metrics == NULL)
		return ENOTSUP;
	tpe__mutex_lock(&pool->lock);
	rc = tpe__metrics_reset_locked(pool->metrics);
	if (rc == 0)
		pool->metrics_comp_base = pool->blocking.compensations;
	tpe__mutex_unlock(&pool->lock);
	return rc;
}

/* ---- fork ------------------------------------------------------------- */

static void
atfork_child(void *ctx)
{
	tpe_t *pool = ctx;
	struct tpe__task_list out;
	struct tpe__task *t;

	TPE__ASSERT_HELD(&pool->lock);
	/* The workers do not exist here; the queued tasks are the parent's. */
	tpe__task_list_init(&out);
	pool->engine->ops->drain_locked(pool->engine, NULL, NULL, SIZE_MAX,
	    &out);
	while ((t = tpe__task_list_pop(&out)) != NULL) {
		if (tpe__task_future(t) != NULL)
			tpe__future_unref(tpe__task_future(t));
		tpe__sched_atfork_forget(t);
		tpe__task_free(&pool->tasks, t);
	}
	tpe__worker_forget_all_locked(pool);
	pool->engine->ops->forget_locked(pool->engine);
	pool->blocking.blocked = 0; /* its threads are gone too */
	pool->blocking.spares = 0;
	tpe__pool_set_wc_locked(pool, 0);
	pool->nthreads = pool->active = 0;
	pool->idle_waiters = pool->handing_back = 0;
	/* The blocked submitters were threads of the parent. */
	memset(&pool->submit_line, 0, sizeof(pool->submit_line));
	set_paused_locked(pool, false);
	set_state_locked(pool, TPE__TERMINATED);
	/* The forking thread may be a worker of this pool or deliver one of
	 * its callbacks: here it is neither (tpe_destroy works in the child);
	 * the node of the task it ran is freed (task.h). */
	tpe__tls_worker_pool = NULL;
	tpe__tls_hook_pool = NULL;
	tpe__task_atfork_child();
	tpe__reserve_atfork_child(&pool->reserve);
	tpe__mutex_init_ranked(&pool->lock, TPE__RANK_POOL);
	tpe__cond_init(&pool->idle_cond);
	tpe__cond_init(&pool->term_cond);
}
