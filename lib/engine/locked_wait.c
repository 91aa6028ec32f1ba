/* SPDX-License-Identifier: MIT */
/*
 * locked_wait.c - the locked engine's blocking submit (tpe_execute_wait,
 * tpe_submit_wait): wait for room where execute would reject a task for
 * saturation.
 *
 * Design notes
 * ------------
 * A call first tries exactly tpe_execute's steps under the pool's policy
 * (tpe__locked_place_locked: a core worker, the queue, a worker below max,
 * scale-first's re-enqueue), under pool->lock, and then a parked reserved
 * thread, an idle worker that takes nothing from the queue: it is handed
 * the task (hand-off) or woken to drain the queue (bounded), so that no
 * call waits for it to idle out of the reserve. Where tpe_execute would
 * call the rejection policy (saturated) it joins the pool's line of
 * blocked submitters (pool/submit_line.h) instead, and sleeps on a
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

#include "base/sync.h"
#include "engine/locked.h"
#include "pool/pool.h"

void (*tpe__submit_joined_hook)(tpe_t *pool);

size_t
tpe__submit_waiting(tpe_t *pool)
{
	size_t n;

	tpe__mutex_lock(&pool->lock);
	n = pool->submit_line.waiting;
	tpe__mutex_unlock(&pool->lock);
	return n;
}

/*
 * The caller's task t found the pool saturated (or others already wait):
 * waits in the line until the head's place attempt decides, the deadline
 * passes, the pool stops running, or waiting would deadlock (above).
 * Returns what tpe__locked_place_locked returned (0: the pool took t), or
 * ETIMEDOUT, ECANCELED, EDEADLK; t stays the caller's on error. L held.
 */
static int
wait_in_line_locked(struct tpe__locked *le, struct tpe__task *t, int prio,
    int64_t timeout_ns, int64_t deadline, bool *signal)
{
	tpe_t *pool = le->pool;
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
	tpe__submit_line_join_locked(line, &w, &pool->lock);
	if (tpe__submit_joined_hook != NULL)
		tpe__submit_joined_hook(pool);
	for (;;) {
		timed_out = tpe__cond_wait_until(&w.cond, &pool->lock,
		    deadline) == ETIMEDOUT;
		if (line->head == &w) {
			rc = tpe__locked_place_locked(le, t, prio, signal,
			    &saturated);
			if (!saturated)
				break;
		} else if (!tpe__sched_admits(pool->state, t->fn)) {
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
	tpe__submit_line_leave_locked(line, &w, &pool->lock);
	/* Every signal of w.cond was made under the lock, now held here. */
	tpe__cond_destroy(&w.cond);
	return rc;
}

/*
 * Whether execute on this pool never reaches a rejection verdict: storage
 * that never refuses for want of room (the unbounded queue, engine.h's
 * TPE__CAP_UNBOUNDED; the unbounded priority queue: le->unbounded) under
 * a policy without a gate on step 2. No lock held: I fields only. Then the blocking calls are the
 * plain ones. Not scale-first on an unbounded queue: its gate refuses a
 * task when no worker is idle, and when none can start either, execute
 * runs the verdicts (caller-runs would run the task here).
 */
static bool
never_saturates(const struct tpe__locked *le)
{
	return ((le->base.caps & TPE__CAP_UNBOUNDED) != 0 || le->unbounded) &&
	    !le->policy.queue_needs_taker;
}

int
tpe__locked_submit_wait(struct tpe__engine *e, tpe_fn fn, void *arg,
    struct tpe_future *f, int64_t timeout_ns)
{
	struct tpe__locked *le = (struct tpe__locked *)(void *)e;
	tpe_t *pool = le->pool;
	struct tpe__task *t;
	/* The deadline counts from the call. */
	int64_t deadline = tpe__deadline(timeout_ns);
	bool signal = false, saturated = true, terminate;
	char token = 0; /* this call's owner token (task.h) */
	int rc = ECANCELED;
	/* The call's priority (engine.h); a due scheduled task's is in its
	 * record. */
	int prio = fn == tpe__sched_task_fn ? tpe__sched_priority(arg) :
	    tpe__submit_priority_take();

	if (never_saturates(le))
		return tpe__locked_submit_plain(le, fn, arg, f, prio);
	t = tpe__task_new(&pool->tasks, fn, arg, f, &token);
	if (t == NULL)
		return ENOMEM;
	tpe__mutex_lock(&pool->lock);
	if (pool->submit_line.head == NULL)
		rc = tpe__locked_place_locked(le, t, prio, &signal,
		    &saturated);
	else if (!tpe__sched_admits(pool->state, fn))
		saturated = false; /* rc: ECANCELED */
	if (saturated)
		rc = wait_in_line_locked(le, t, prio, timeout_ns, deadline,
		    &signal);
	/* A task taken back out of the queue (no worker could be started)
	 * may be what a shutdown's termination waited for. */
	terminate = rc != 0 && tpe__pool_try_terminate_locked(pool);
	tpe__mutex_unlock(&pool->lock);
	if (signal)
		tpe__cond_signal(&le->work_cond);
	if (rc != 0)
		tpe__task_free(&pool->tasks, t);
	if (terminate)
		tpe__pool_finish_termination(pool);
	return rc;
}
