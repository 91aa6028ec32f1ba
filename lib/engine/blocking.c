/* SPDX-License-Identifier: MIT */
/*
 * blocking.c - managed blocking in the locked engine: a worker inside a
 * blocking section (tpe_blocking_begin(3)) is counted as blocked, and the
 * pool keeps enough running workers for the tasks that wait.
 *
 * Design notes
 * ------------
 * Where it sits: the locked engine (locked.c) calls the rules of
 * blocking.h at the places where it sizes the pool, and this file's op
 * when a worker enters or leaves its outermost section (pool/blocking.c).
 *
 * Counting: pool->blocking.blocked (L) counts the workers inside a
 * section; they stay in wc and active. Every sizing decision of execute
 * and get_task counts them out: step 1 starts a worker while the running
 * workers (wc - blocked) are below core, step 3 while they are below max,
 * get_task's "above max" rule looks at the running ones, and a reserve
 * miss starts a reserved thread only while they are below max; and no
 * start passes max + max_spare threads while workers are blocked. With
 * none blocked every rule is the old one.
 *
 * Compensation: when tasks are queued, no idle worker waits for them (none
 * in take, none parked in the reserve: those are woken to look at the
 * queue) and fewer than core workers (at least one) run, a worker is
 * started to
 * stand in (tpe__locked_compensate_locked), at three moments: when a
 * worker begins a section (the tasks already queued), after an offer while
 * workers are blocked (ensure_taker_locked: the tasks that come later),
 * and when a paused pool resumes (tpe__blocking_resumed_locked: a paused
 * pool starts no thread, so the offers made meanwhile stood in for
 * nobody).
 * A compensating worker is an ordinary worker above core: it times out
 * after the keep-alive once idle. One started at or above max is counted
 * in `spares` (at most wc - max), which Java's "above max" rule of
 * getTask (leave after the task) subtracts: a pool whose tasks keep
 * blocking keeps its spares until they idle out, instead of starting and
 * ending a thread per task; a pool shrunk by tpe_set_pool_size still
 * sheds its other workers after their task.
 *
 * The lock-free step 2 (locked.c, dispatch_lockfree) pushes a task
 * without the lock. Dekker pair, seq_cst both sides: a worker that begins
 * a section stores blocked, then looks at the queue (tpe__queue_is_empty:
 * its inbox load); the submitter pushes, then loads blocked and settles
 * its task under the lock when it is not 0. Either the beginner sees the
 * task, or the submitter sees the worker blocked: a task never waits
 * behind blocked workers unseen.
 *
 * Blocking submit: a begin is room for the head of the line of blocked
 * submitters (locked_wait.c): the steps it retries count the running
 * workers only, so it may now start one where it could not before.
 *
 * Failure: a start that fails (the limit, pthread_create, malloc) leaves
 * the worker counted as blocked and the pool as it was; begin reports the
 * error, and the next offer or begin tries again.
 *
 * Legend and lock order: base/sync.h.
 */
#include <errno.h>

#include "base/atomic.h"
#include "base/sync.h"
#include "engine/blocking.h"
#include "pool/pool.h"

int
tpe__locked_compensate_locked(struct tpe__locked *le)
{
	tpe_t *pool = le->pool;
	size_t floor = pool->core > 0 ? pool->core : 1;
	bool above;
	int rc;

	TPE__ASSERT_HELD(&pool->lock);
	if (pool->blocking.blocked == 0 || pool->state >= TPE__STOP ||
	    pool->paused || tpe__queue_is_empty(le->q))
		return 0;
	if (le->takers > 0) {
		/* An idle worker will take it; make sure one is awake. */
		if (le->sleepers > 0)
			tpe__cond_signal(&le->work_cond);
		return 0;
	}
	/* Parked reserved threads are idle workers too: they look at the
	 * queue (ensure_taker_locked's rule) instead of a new thread. */
	if (tpe__reserve_parked(&pool->reserve) > 0) {
		tpe__reserve_wake_all_locked(&pool->reserve, &pool->lock);
		return 0;
	}
	if (tpe__blocking_running_locked(pool) >= floor)
		return 0;
	if (pool->wc >= pool->max + pool->blocking.max_spare)
		return EAGAIN;
	above = pool->wc >= pool->max;
	tpe__blocking_starting_locked(pool, above);
	rc = tpe__worker_start_locked(pool, NULL);
	tpe__blocking_started_locked(pool, above, rc == 0);
	return rc;
}

int
tpe__locked_blocking(struct tpe__engine *e, bool begin)
{
	struct tpe__locked *le = (struct tpe__locked *)(void *)e;
	tpe_t *pool = le->pool;
	struct tpe__blocking *b = &pool->blocking;
	int rc = 0;

	tpe__mutex_lock(&pool->lock);
	if (begin) {
		/* Only a worker that runs a task blocks. */
		TPE__ASSERT(b->blocked < pool->active);
		/* seq_cst, before the look at the queue: the Dekker pair of
		 * the design notes. */
		__atomic_store_n(&b->blocked, b->blocked + 1, __ATOMIC_SEQ_CST);
		rc = tpe__locked_compensate_locked(le);
		/* One running worker fewer: the steps that start a worker
		 * count running ones only, so a blocked submitter may now
		 * have room (locked_wait.c). */
		tpe__pool_room_locked(pool);
	} else {
		TPE__ASSERT(b->blocked > 0);
		/* The lock-free offer reads it after its push: a stale
		 * non-zero only sends it to the locked path (settle). */
		__atomic_store_n(&b->blocked, b->blocked - 1, __ATOMIC_SEQ_CST);
	}
	tpe__mutex_unlock(&pool->lock);
	return rc;
}

int
tpe__blocking_resumed_locked(tpe_t *pool)
{
	struct tpe__locked *le;
	uint64_t before;
	size_t n;
	int rc = 0;

	TPE__ASSERT_HELD(&pool->lock);
	/* The stacks engine hands a blocked worker's slot over at its
	 * begin, paused or not (stacks.c): nothing waited for the resume. */
	if (pool->engine->ops->blocking != tpe__locked_blocking)
		return 0;
	le = (struct tpe__locked *)(void *)pool->engine;
	/* What each offer made while paused would have done: one stand-in
	 * per queued task at most, counted once (a worker just started has
	 * not taken its task yet), until the rule finds enough running. */
	for (n = le->q->ops->size(le->q); rc == 0 && n > 0; n--) {
		before = pool->blocking.compensations;
		rc = tpe__locked_compensate_locked(le);
		if (pool->blocking.compensations == before)
			break;
	}
	return rc;
}
