/* SPDX-License-Identifier: MIT */
/*
 * worker.c - worker threads: creation, the run loop (Java's runWorker and
 * getTask live in the engine), exit, and joining.
 *
 * Design notes
 * ------------
 * Where it sits: the pool's side of its threads. A worker thread is
 * created here (named, hooked, with every asynchronous signal blocked:
 * base/sync.h), lives in its engine's loop (engine.h, worker_loop: Java's
 * runWorker and getTask for the locked engine), and ends here: it leaves
 * pool->live for pool->exited, and may be the one that terminates the pool.
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

#include "base/fork.h"
#include "base/sync.h"
#include "pool/worker.h"
#include "base/probe.h"

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

/* The record's size (worker.h): a 64-byte malloc chunk on LP64 glibc. */
_Static_assert(sizeof(void *) != 8 || sizeof(struct tpe__worker) <= 56,
    "struct tpe__worker grew past 56 bytes");

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

	snprintf(name, sizeof(name), "%s-%u", a->name_prefix, w->id);
	tpe__thread_set_name(name);
	tpe__tls_worker_pool = pool;
	tpe__metrics_tls_worker = w->mw; /* the engines' (metrics.h) */
	TPE__PROBE3(thread__start, pool, a->name_prefix, w->id);
	if (a->on_start != NULL) {
		a->on_start(pool, a->thread_hook_ctx);
		if (forked(gen))
			return NULL;
	}

	tpe__mutex_lock(&pool->lock);
	t = w->first;
	w->first = NULL;
	/* The engine's loop gives up the place in wc before it returns. */
	ok = pool->engine->ops->worker_loop(pool->engine, t);
	if (!ok)
		return NULL; /* forked: see forked() */
	tpe__mutex_unlock(&pool->lock);

	if (a->on_exit != NULL) {
		a->on_exit(pool, a->thread_hook_ctx);
		if (forked(gen))
			return NULL;
	}
	tpe__tls_worker_pool = NULL;
	tpe__metrics_tls_worker = NULL;
	TPE__PROBE3(thread__exit, pool, a->name_prefix, w->id);

	tpe__mutex_lock(&pool->lock);
	if (pool->metrics != NULL) {
		tpe__metrics_worker_put_locked(pool->metrics, w->mw);
		tpe__metrics_count(pool->metrics, TPE__M_THREAD_RETIRED);
	}
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
	struct tpe__metrics_worker *mw = NULL;
	unsigned long id;
	pthread_t tid;
	bool terminate;
	int rc;

	TPE__ASSERT_HELD(&pool->lock);
	/* Its metrics block first: failing here changes nothing. */
	if (pool->metrics != NULL &&
	    (mw = tpe__metrics_worker_get_locked(pool->metrics)) == NULL) {
		tpe__metrics_count(pool->metrics, TPE__M_THREAD_FAILED);
		return ENOMEM;
	}
	/* Counted before the thread can run and retire (undone below if
	 * it does not start). */
	tpe__metrics_count(pool->metrics, TPE__M_THREAD_STARTED);
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
		w->id = (unsigned int)id;
		w->mw = mw;
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
	if (pool->metrics != NULL) {
		tpe__metrics_worker_put_locked(pool->metrics, mw);
		tpe__counter_sub(&pool->metrics->counters[
		    TPE__M_THREAD_STARTED], 1);
		tpe__metrics_count(pool->metrics, TPE__M_THREAD_FAILED);
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
