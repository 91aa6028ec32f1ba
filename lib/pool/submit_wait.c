/* SPDX-License-Identifier: MIT */
/*
 * submit_wait.c - the blocking submit: tpe_execute_wait and tpe_submit_wait
 * wait for room where tpe_execute would reject a task for saturation.
 *
 * Design notes
 * ------------
 * A call first tries exactly tpe_execute's steps under the pool's policy
 * (tpe__pool_place_locked: a core worker, the queue, a worker below max,
 * scale-first's re-enqueue), under pool->lock, and then a parked reserved
 * thread, an idle worker that takes nothing from the queue: it is handed
 * the task (hand-off) or woken to drain the queue (bounded), so that no
 * call waits for it to idle out of the reserve. Where tpe_execute would
 * call the rejection policy (saturated) it joins the pool's line of
 * blocked submitters (pool.h, submit_line) instead, and sleeps on a
 * condition variable of its own, a record on its stack, until it is woken,
 * its deadline passes or the pool stops running. The rejection policy is
 * never called on this path.
 *
 * FIFO: only the head of the line tries to place its task; a later call
 * that finds the line non-empty joins its tail without trying. So no
 * later blocked submitter takes room an earlier one waits for. (A plain
 * tpe_execute does not queue behind them: it takes any room there is, or
 * is rejected; the head then waits for the next room.)
 *
 * Wake-ups, all under pool->lock, so none is lost between a waiter's last
 * look and its sleep:
 *   - room (tpe__pool_room_locked, pool.h): a worker took a task from the
 *     queue or is about to wait for one (or to park as a reserved thread),
 *     wc fell (a worker left or a start failed), tpe_remove, tpe_purge, a
 *     submitter took its task back: the head is signalled;
 *   - state, paused or sizes changed (wake_workers_locked: shutdown,
 *     shutdown-now, pause, resume, tpe_set_pool_size, keep-alive): every
 *     waiter is signalled, so each sees ECANCELED or tries again;
 *   - a head that leaves the line, whatever the result, signals the next
 *     one: room it was woken for may be left over (tpe_purge freed many
 *     places) and the next one is the only one allowed to take it.
 * The head's place attempt may drop the lock to start a thread; room that
 * appears meanwhile is seen by the offer it makes afterwards under the
 * lock, so a signal it misses then is not needed.
 *
 * EDEADLK: a worker of the pool waits only while some other worker may
 * still make room. The call that would make every worker the pool may
 * have (max, counting the caller) blocked in a blocking submit to this
 * pool returns EDEADLK instead of waiting; after a shrink (wake_all),
 * waiting workers give up one by one until that holds again.
 *
 * Cost when nobody waits: a worker, a remove or a purge reads
 * submit_line.head under the lock it already holds; tpe_execute's own
 * path is unchanged.
 *
 * The caller keeps its task on every error: t is freed here (its future,
 * if any, by the caller), never handed back. Termination does not wait
 * for blocked submitters: a shutdown wakes them, and tpe_destroy's rule
 * (every call on the pool has returned) covers the rest.
 */
#include <errno.h>
#include <stdlib.h>

#include "pool/future.h"
#include "pool/pool.h"
#include "base/sync.h"
#include "pool/task.h"

struct tpe__submit_waiter {
	struct tpe__submit_waiter *next; /* L: the next younger waiter */
	pthread_cond_t cond;             /* signalled under L; its thread
					  * waits on it with pool->lock */
	bool worker;                     /* I: the thread is a worker of
					  * this pool (EDEADLK) */
};

void (*tpe__submit_joined_hook)(tpe_t *pool);

void
tpe__submit_wake_head_locked(tpe_t *pool)
{
	TPE__ASSERT_HELD(&pool->lock);
	if (pool->submit_line.head != NULL)
		tpe__cond_signal(&pool->submit_line.head->cond);
}

void
tpe__submit_wake_all_locked(tpe_t *pool)
{
	struct tpe__submit_waiter *w;

	TPE__ASSERT_HELD(&pool->lock);
	for (w = pool->submit_line.head; w != NULL; w = w->next)
		tpe__cond_signal(&w->cond);
}

size_t
tpe__submit_waiting(tpe_t *pool)
{
	size_t n;

	tpe__mutex_lock(&pool->lock);
	n = pool->submit_line.waiting;
	tpe__mutex_unlock(&pool->lock);
	return n;
}

/* Appends w to the line (the youngest). L held. */
static void
line_join_locked(tpe_t *pool, struct tpe__submit_waiter *w)
{
	struct tpe__submit_line *line = &pool->submit_line;

	TPE__ASSERT_HELD(&pool->lock);
	w->next = NULL;
	if (line->tail != NULL)
		line->tail->next = w;
	else
		line->head = w;
	line->tail = w;
	line->waiting++;
	if (w->worker)
		line->workers++;
}

/* Takes w out of the line, wherever it is; when it was the head, the next
 * one becomes the head and is woken (see the design notes). L held. */
static void
line_leave_locked(tpe_t *pool, struct tpe__submit_waiter *w)
{
	struct tpe__submit_line *line = &pool->submit_line;
	struct tpe__submit_waiter **pp, *prev = NULL;

	TPE__ASSERT_HELD(&pool->lock);
	for (pp = &line->head; *pp != w; pp = &(*pp)->next) {
		TPE__ASSERT(*pp != NULL);
		prev = *pp;
	}
	*pp = w->next;
	if (line->tail == w)
		line->tail = prev;
	TPE__ASSERT(line->waiting > 0 && (!w->worker || line->workers > 0));
	line->waiting--;
	if (w->worker)
		line->workers--;
	if (prev == NULL)
		tpe__submit_wake_head_locked(pool);
}

/*
 * The caller's task t found the pool saturated (or others already wait):
 * waits in the line until the head's place attempt decides, the deadline
 * passes, the pool stops running, or waiting would deadlock (above).
 * Returns what tpe__pool_place_locked returned (0: the pool took t), or
 * ETIMEDOUT, ECANCELED, EDEADLK; t stays the caller's on error. L held.
 */
static int
wait_in_line_locked(tpe_t *pool, struct tpe__task *t, int64_t timeout_ns,
    int64_t deadline, bool *signal)
{
	struct tpe__submit_line *line = &pool->submit_line;
	struct tpe__submit_waiter w;
	bool saturated, timed_out;
	int rc;

	TPE__ASSERT_HELD(&pool->lock);
	if (timeout_ns == 0)
		return ETIMEDOUT;
	w.worker = tpe__tls_worker_pool == pool;
	if (w.worker && line->workers + 1 >= pool->max)
		return EDEADLK;
	tpe__cond_init(&w.cond);
	line_join_locked(pool, &w);
	if (tpe__submit_joined_hook != NULL)
		tpe__submit_joined_hook(pool);
	for (;;) {
		timed_out = tpe__cond_wait_until(&w.cond, &pool->lock,
		    deadline) == ETIMEDOUT;
		if (line->head == &w) {
			rc = tpe__pool_place_locked(pool, t, signal,
			    &saturated);
			if (!saturated)
				break;
		} else if (pool->state != TPE__RUNNING) {
			rc = ECANCELED;
			break;
		}
		if (w.worker && line->workers >= pool->max) {
			rc = EDEADLK;
			break;
		}
		if (timed_out) {
			rc = ETIMEDOUT;
			break;
		}
	}
	line_leave_locked(pool, &w);
	/* Every signal of w.cond was made under the lock, now held here. */
	tpe__cond_destroy(&w.cond);
	return rc;
}

/*
 * The blocking dispatch of a task (fn/arg, or the future f) for a pool
 * whose queue can refuse. 0: the pool took it; else the caller keeps it.
 */
static int
place_or_wait(tpe_t *pool, tpe_fn fn, void *arg, struct tpe_future *f,
    int64_t timeout_ns)
{
	struct tpe__task *t;
	/* The deadline counts from the call. */
	int64_t deadline = tpe__deadline(timeout_ns);
	bool signal = false, saturated = true, terminate;
	char token = 0; /* this call's owner token (task.h) */
	int rc = ECANCELED;

	t = tpe__task_new(pool, fn, arg, f, &token);
	if (t == NULL)
		return ENOMEM;
	tpe__mutex_lock(&pool->lock);
	if (pool->submit_line.head == NULL)
		rc = tpe__pool_place_locked(pool, t, &signal, &saturated);
	else if (pool->state != TPE__RUNNING)
		saturated = false; /* rc: ECANCELED */
	if (saturated)
		rc = wait_in_line_locked(pool, t, timeout_ns, deadline,
		    &signal);
	/* A task taken back out of the queue (no worker could be started)
	 * may be what a shutdown's termination waited for. */
	terminate = rc != 0 && tpe__pool_try_terminate_locked(pool);
	tpe__mutex_unlock(&pool->lock);
	if (signal)
		tpe__cond_signal(&pool->work_cond);
	if (rc != 0)
		tpe__task_free(pool, t);
	if (terminate)
		tpe__pool_finish_termination(pool);
	return rc;
}

/*
 * Whether tpe_execute on this pool never reaches the rejection policy:
 * the per-worker kind has none, and queue-first's unbounded queue takes
 * every task at step 2. Then the blocking calls are the plain ones. Not
 * scale-first on an unbounded queue: its queue refuses a task when no
 * worker is idle, and when none can start either, tpe_execute calls the
 * policy (caller-runs would run the task here). I: the attributes are a
 * copy.
 */
static bool
never_saturates(const tpe_t *pool)
{
	return pool->attr.queue_kind == TPE_QUEUE_PER_WORKER ||
	    (pool->attr.queue_kind == TPE_QUEUE_UNBOUNDED &&
	    pool->attr.policy == TPE_POLICY_QUEUE_FIRST);
}

/* Where the pool's state says no before anything is allocated, as
 * tpe_execute's and tpe_submit's own checks. */
static bool
running(const tpe_t *pool)
{
	/* Acquire pairs with set_state_locked's store (pool.c). */
	return __atomic_load_n(&pool->state, __ATOMIC_ACQUIRE) ==
	    TPE__RUNNING;
}

int
tpe_execute_wait(tpe_t *pool, tpe_fn fn, void *arg, int64_t timeout_ns)
{
	if (pool == NULL || fn == NULL)
		return EINVAL;
	if (never_saturates(pool))
		return tpe_execute(pool, fn, arg);
	if (!running(pool))
		return ECANCELED;
	return place_or_wait(pool, fn, arg, NULL, timeout_ns);
}

int
tpe_submit_wait(tpe_t *pool, tpe_call_fn fn, void *arg, int64_t timeout_ns,
    tpe_future_t **future)
{
	struct tpe_future *f;
	int rc;

	if (pool == NULL || fn == NULL || future == NULL)
		return EINVAL;
	if (never_saturates(pool))
		return tpe_submit(pool, fn, arg, future);
	if (!running(pool))
		return ECANCELED;
	rc = tpe__future_create(&f, fn, arg);
	if (rc != 0)
		return rc;
	rc = place_or_wait(pool, NULL, arg, f, timeout_ns);
	if (rc != 0) {
		/* Both references: the caller's and the task's (tpe_submit). */
		tpe__future_unref(f);
		tpe__future_unref(f);
		return rc;
	}
	*future = f;
	return 0;
}
