/* SPDX-License-Identifier: MIT */
/*
 * worker.c - worker threads: creation, the run loop (Java's runWorker and
 * getTask), exit, and joining.
 *
 * Design notes
 * ------------
 * A worker takes pool->lock once per task: leaving a task (active--,
 * completed++) and getting the next one happen in the same critical section.
 *
 * get_task decides, under pool->lock, between "run a queued task", "wait"
 * and "exit"; it exits only when the queue is empty (or the pool stopped),
 * or, above max, straight after a task while another worker remains
 * (should_exit_locked). So no submitter can count on an idle worker that
 * is about to leave: an offer that relies on a waiting worker (q->takers:
 * hand-off, scale-first) is made under the same lock, and a worker counted
 * in q->takers polls the queue before it may re-evaluate its exit. (Tomcat
 * shipped that race, bug 65454: its idle count and its exit decision were
 * made under different locks, and a task offered to a worker that was
 * timing out waited for the next submission.)
 * The one offer made without the lock (pool.h, the lock-free step 2) is
 * covered by the order of the exit itself: wc first, then a last look at
 * the queue (may_leave_locked).
 *
 * A queue kind that runs its own workers (queue.h, worker_loop) replaces
 * the run loop and get_task (queue_loop_locked): its workers never wait on
 * work_cond and never leave before shutdown; this file still creates,
 * counts, names, hooks and joins them.
 *
 * Keep-alive: the deadline is fixed when the worker starts waiting and
 * survives spurious wake-ups; a configuration change (config_gen) re-times
 * it. wc is decremented by the exiting worker under the lock, so two
 * workers that time out together re-check against the fresh wc and the
 * pool never shrinks below core (TimeOutShrink).
 *
 * Joining: a worker's last act under pool->lock moves it from pool->live to
 * pool->exited; tpe__worker_reap (called before each thread creation and by
 * tpe_destroy) joins those, so a pool holds at most a few unjoined threads
 * and tpe_destroy frees nothing a thread still touches.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool/registry.h"
#include "base/sync.h"
#include "pool/worker.h"

static void
list_insert(struct tpe__worker **head, struct tpe__worker *w)
{
	w->prev = NULL;
	w->next = *head;
	if (*head != NULL)
		(*head)->prev = w;
	*head = w;
}

static void
list_remove(struct tpe__worker **head, struct tpe__worker *w)
{
	if (w->prev != NULL)
		w->prev->next = w->next;
	else
		*head = w->next;
	if (w->next != NULL)
		w->next->prev = w->prev;
	w->prev = w->next = NULL;
}

/*
 * The worker has decided to exit: gives up its place in wc, unless that
 * would strand queued tasks. The decrement comes before the last look at
 * the queue: a lock-free offer pushes and then reads wc (pool.h), so either
 * it sees this worker gone (and settles its task under the lock) or this
 * look sees its node (and the last worker stays, as Java's
 * processWorkerExit would start a replacement). L held.
 */
static bool
may_leave_locked(tpe_t *pool)
{
	TPE__ASSERT_HELD(&pool->lock);
	/* Counters never wrap; a worker counted in wc is alive (nthreads). */
	TPE__ASSERT(pool->wc > 0 && pool->wc <= pool->nthreads);
	/* A worker leaves only after seeing the queue empty (pool.h): since
	 * that look under the lock, only lock-free pushes, which their
	 * submitters settle, can have arrived. Or, above max, it leaves the
	 * queue to another worker (should_exit_locked). */
	TPE__ASSERT(tpe__queue_is_empty(pool->queue) ||
	    tpe__queue_pending(pool->queue) ||
	    (pool->wc > pool->max && pool->wc > 1));
	tpe__pool_set_wc_locked(pool, pool->wc - 1);
	if (pool->wc > 0 || pool->state >= TPE__STOP ||
	    tpe__queue_is_empty(pool->queue)) {
		/* Below max now: a blocked submitter may start a worker. */
		tpe__pool_room_locked(pool);
		return true;
	}
	tpe__pool_set_wc_locked(pool, pool->wc + 1);
	return false;
}

/*
 * Java's getTask exit rule. Above max (the pool was shrunk), a worker that
 * comes back from a task leaves whenever another worker remains to run
 * what is queued, and any worker leaves once the queue is empty. A waiting
 * worker that was woken does not leave with tasks queued: an offer may
 * have counted on it (hand-off, scale-first), as a Java SynchronousQueue
 * hands the item to the very taker. Otherwise a worker leaves only with
 * the queue empty, once the pool is shut down or its keep-alive expired.
 * L held.
 */
static bool
should_exit_locked(tpe_t *pool, bool empty, bool expired, bool after_task)
{
	TPE__ASSERT_HELD(&pool->lock);
	if (pool->wc > pool->max)
		return empty || (after_task && pool->wc > 1);
	return empty && (pool->state == TPE__SHUTDOWN || expired);
}

/*
 * Returns the next task, or NULL when the worker must exit (wc has then
 * been decremented). An idle worker that the reserve wants parks there
 * instead of waiting on the queue, and comes back with a handed task or to
 * look at the pool again (reserved.h); *reserved is the worker's own
 * "I am a reserved thread". pool->lock held on entry and exit.
 */
static struct tpe__task *
get_task_locked(tpe_t *pool, bool *reserved)
{
	struct tpe__queue *q = pool->queue;
	struct tpe__task *t;
	unsigned gen = pool->config_gen;
	bool timed_out = false, spin = true, after_task = true;
	int64_t deadline = -1;
	int rc;

	TPE__ASSERT_HELD(&pool->lock);
	for (;;) {
		bool empty, timed;

		if (pool->state >= TPE__STOP)
			break;
		if (pool->paused) {
			/* Not counted as a taker: no offer may rely on it. */
			tpe__cond_wait_until(&pool->work_cond, &pool->lock, -1);
			continue;
		}
		empty = tpe__queue_is_empty(q);
		timed = pool->allow_core_timeout || pool->wc > pool->core;
		if (should_exit_locked(pool, empty, timed && timed_out,
		    after_task)) {
			if (!may_leave_locked(pool))
				continue;
			/* Leaving tasks to the others: a wake-up that was
			 * meant for this worker must not leave with it. */
			if (!empty && tpe__queue_needs_signal(q))
				tpe__cond_signal(&pool->work_cond);
			return NULL;
		}
		/* About to wait for a task, in the queue or parked in the
		 * reserve: a blocked submitter may hand it one (hand-off,
		 * scale-first, a parked reserved thread); it gets the lock
		 * once this worker counts in q->takers or is parked, and
		 * has dropped it. */
		if (empty)
			tpe__pool_room_locked(pool);
		if (empty && pool->state == TPE__RUNNING &&
		    tpe__reserve_wanted_locked(pool, reserved)) {
			t = tpe__reserve_park_locked(pool, reserved);
			after_task = false;
			if (t != NULL)
				return t;
			continue;
		}
		if (!timed)
			deadline = -1;
		else if (deadline < 0)
			deadline = tpe__deadline(pool->keep_alive_ns);
		/* Spin once per get_task, then sleep: see tpe__queue_take. */
		t = tpe__queue_take(q, &pool->lock, &pool->work_cond,
		    deadline, spin, &rc);
		after_task = false;
		if (t != NULL) {
			/* A place in the queue is free (bounded). */
			tpe__pool_room_locked(pool);
			/* The cascade (queue.h): tasks left that no awake
			 * taker will take wake the next sleeper. */
			if (tpe__queue_needs_signal(q))
				tpe__cond_signal(&pool->work_cond);
			return t;
		}
		/* Spin again while offers keep coming (another worker won the
		 * last one); sleep once a spin saw nothing. */
		spin = spin && rc == 0;
		if (pool->config_gen != gen) {
			/* Sizes, keep-alive or state changed: start over. */
			gen = pool->config_gen;
			timed_out = false;
			deadline = -1;
		} else if (rc == ETIMEDOUT) {
			timed_out = true;
		}
	}
	/* The one exit that need not see the queue empty: a stopped pool. */
	TPE__ASSERT(pool->state >= TPE__STOP && pool->wc > 0);
	tpe__pool_set_wc_locked(pool, pool->wc - 1);
	return NULL;
}

/*
 * largest_pool_size: the most wc ever was. Noted when a start reserves its
 * place in wc, as Java notes largestPoolSize before it starts the thread,
 * so that pool_size (wc) never shows above it; a start that then fails has
 * still counted. L held.
 */
static void
note_largest_locked(tpe_t *pool)
{
	TPE__ASSERT_HELD(&pool->lock);
	if (pool->wc > pool->largest)
		pool->largest = pool->wc;
}

/*
 * After user code returned into this thread: true when the process forked
 * in it and this is the child, where the pool was reset by the atfork
 * handler and this thread is no worker of it any more. The thread then
 * returns from worker_main at once, touching nothing (task.c).
 */
static bool
forked(unsigned gen)
{
	return tpe__forked_since(gen);
}

/*
 * The run loop of Java's runWorker: t (the first task, or NULL), then the
 * tasks get_task hands out, until it says exit (wc given up there).
 * pool->lock held on entry and on return; false: forked (see forked()).
 */
static bool
run_tasks_locked(tpe_t *pool, struct tpe__task *t)
{
	bool reserved = false;

	TPE__ASSERT_HELD(&pool->lock);
	for (;;) {
		if (t == NULL) {
			t = get_task_locked(pool, &reserved);
			if (t == NULL)
				return true;
			pool->active++;
			/* A running worker is counted in wc until it leaves
			 * get_task for good, and in nthreads until it ends. */
			TPE__ASSERT(pool->active <= pool->wc &&
			    pool->wc <= pool->nthreads);
		}
		tpe__mutex_unlock(&pool->lock);
		if (!tpe__task_run(pool, t))
			return false;
		t = NULL;
		tpe__mutex_lock(&pool->lock);
		TPE__ASSERT(pool->active > 0);
		pool->active--;
		pool->completed++;
		tpe__pool_notify_idle_locked(pool);
	}
}

/*
 * A queue kind that runs its own workers (queue.h, worker_loop) takes the
 * worker's life over; when it returns, the worker gives up its place in
 * wc, as get_task does before it says exit. pool->lock held on entry and
 * on return, dropped in between; false: forked.
 */
static bool
queue_loop_locked(tpe_t *pool)
{
	TPE__ASSERT_HELD(&pool->lock);
	tpe__mutex_unlock(&pool->lock);
	if (!pool->queue->ops->worker_loop(pool->queue))
		return false;
	tpe__mutex_lock(&pool->lock);
	TPE__ASSERT(pool->wc > 0 && pool->state >= TPE__SHUTDOWN);
	tpe__pool_set_wc_locked(pool, pool->wc - 1);
	return true;
}

static void *
worker_main(void *arg)
{
	struct tpe__worker *w = arg;
	tpe_t *pool = w->pool;
	const struct tpe_attr *a = &pool->attr;
	unsigned gen = tpe__fork_gen();
	struct tpe__task *t;
	char name[16];
	bool terminate, ok;

	snprintf(name, sizeof(name), "%s-%lu", a->name_prefix, w->id);
	tpe__thread_set_name(name);
	tpe__tls_worker_pool = pool;
	if (a->on_start != NULL) {
		a->on_start(pool, a->thread_hook_ctx);
		if (forked(gen))
			return NULL;
	}

	tpe__mutex_lock(&pool->lock);
	t = w->first;
	w->first = NULL;
	if (pool->queue->ops->worker_loop != NULL) {
		TPE__ASSERT(t == NULL);
		ok = queue_loop_locked(pool);
	} else {
		ok = run_tasks_locked(pool, t);
	}
	if (!ok)
		return NULL; /* forked: see forked() */
	tpe__mutex_unlock(&pool->lock);

	if (a->on_exit != NULL) {
		a->on_exit(pool, a->thread_hook_ctx);
		if (forked(gen))
			return NULL;
	}
	tpe__tls_worker_pool = NULL;

	tpe__mutex_lock(&pool->lock);
	list_remove(&pool->live, w);
	list_insert(&pool->exited, w);
	TPE__ASSERT(pool->nthreads > 0);
	pool->nthreads--;
	tpe__pool_notify_idle_locked(pool);
	terminate = tpe__pool_try_terminate_locked(pool);
	tpe__mutex_unlock(&pool->lock);
	if (terminate)
		tpe__pool_finish_termination(pool);
	return NULL;
}

/*
 * Creates the thread (tpe__thread_create: every asynchronous signal
 * blocked); its id goes to *tid, not to w: the thread may run, exit and be
 * reaped before pthread_create returns, and POSIX does not promise that *tid is written
 * before the thread starts (the creator publishes it under the lock).
 */
static int
create_thread(tpe_t *pool, struct tpe__worker *w, pthread_t *tid)
{
	pthread_attr_t pa;
	int rc;

	rc = pthread_attr_init(&pa);
	if (rc != 0)
		return rc;
	rc = tpe__thread_attr_apply(&pool->attr.thread, &pa);
	if (rc == 0)
		rc = tpe__thread_create(tid, &pa, worker_main, w);
	pthread_attr_destroy(&pa);
	return rc;
}

int
tpe__worker_start_locked(tpe_t *pool, struct tpe__task *first)
{
	struct tpe__worker *w;
	unsigned long id;
	pthread_t tid;
	bool terminate;
	int rc;

	TPE__ASSERT_HELD(&pool->lock);
	/* Reserve: concurrent callers see the slot taken at once. */
	tpe__pool_set_wc_locked(pool, pool->wc + 1);
	note_largest_locked(pool);
	pool->nthreads++;
	if (first != NULL)
		pool->active++;
	id = ++pool->next_id;
	tpe__mutex_unlock(&pool->lock);

	tpe__worker_reap(pool);
	w = malloc(sizeof(*w));
	rc = w == NULL ? ENOMEM : 0;
	if (rc == 0) {
		w->pool = pool;
		w->first = first;
		w->id = id;
		w->joinable = false;
		tpe__mutex_lock(&pool->lock);
		list_insert(&pool->live, w);
		tpe__mutex_unlock(&pool->lock);
		/* One error for every refusal of the system to start a thread,
		 * whatever pthread_create said (EAGAIN for a limit, EINVAL or
		 * EPERM for attributes it refuses): tpe_execute(3), ERRORS. */
		if (create_thread(pool, w, &tid) != 0)
			rc = EAGAIN;
	}

	tpe__mutex_lock(&pool->lock);
	if (rc == 0) {
		w->thread = tid;
		w->joinable = true;
		return 0;
	}
	if (w != NULL) {
		list_remove(&pool->live, w);
		free(w);
	}
	/* The reservation above is still counted. */
	TPE__ASSERT(pool->wc > 0 && pool->nthreads > 0 &&
	    (first == NULL || pool->active > 0));
	tpe__pool_set_wc_locked(pool, pool->wc - 1);
	pool->nthreads--;
	if (first != NULL)
		pool->active--;
	/* The slot it held below max is free again. */
	tpe__pool_room_locked(pool);
	/* The start that failed may have been all a tpe_wait_idle waited for
	 * (the task is refused or was never there) or all that held
	 * termination back. */
	tpe__pool_notify_idle_locked(pool);
	terminate = tpe__pool_try_terminate_locked(pool);
	if (terminate) {
		tpe__mutex_unlock(&pool->lock);
		tpe__pool_finish_termination(pool);
		tpe__mutex_lock(&pool->lock);
	}
	return rc;
}

void
tpe__worker_reap(tpe_t *pool)
{
	struct tpe__worker *w, *next, *ready = NULL;

	tpe__mutex_lock(&pool->lock);
	for (w = pool->exited; w != NULL; w = next) {
		next = w->next;
		/* One that exited before its creator recorded its id stays
		 * for a later reap (create_thread). */
		if (w->joinable) {
			list_remove(&pool->exited, w);
			list_insert(&ready, w);
		}
	}
	tpe__mutex_unlock(&pool->lock);
	for (w = ready; w != NULL; w = next) {
		next = w->next;
		pthread_join(w->thread, NULL);
		free(w);
	}
}

void
tpe__worker_forget_all_locked(tpe_t *pool)
{
	struct tpe__worker *lists[2] = { pool->live, pool->exited };
	int i;

	TPE__ASSERT_HELD(&pool->lock);
	for (i = 0; i < 2; i++) {
		struct tpe__worker *w, *next;

		for (w = lists[i]; w != NULL; w = next) {
			next = w->next;
			free(w);
		}
	}
	pool->live = pool->exited = NULL;
}
