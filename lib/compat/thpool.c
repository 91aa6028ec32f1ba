/* SPDX-License-Identifier: MIT */
/*
 * thpool.c - the C-Thread-Pool compatibility API (include/tpe/thpool.h),
 * each threadpool a fixed libtpe pool.
 *
 * Design notes
 *   A threadpool is a handle around one tpe_t created with core == max ==
 *   num_threads, an unbounded FIFO queue and no core timeout, its workers
 *   all started by thpool_init: the shape of C-Thread-Pool's pool. Each
 *   thpool_* call is one or two tpe_* calls on that tpe_t, so the pool's
 *   lock guards all the state there is; this module has no state of its
 *   own, global or per pool, beyond the handle (I: set by thpool_init,
 *   read-only until thpool_destroy frees it). That is what fixes
 *   C-Thread-Pool's interference between pools: there, the keep-alive and
 *   on-hold flags are process globals, so destroying one pool stopped the
 *   others and resuming one resumed all.
 *
 *   The mapping and its reasons:
 *   - thpool_init starts every thread before it returns, as C-Thread-Pool
 *     does, but through tpe_prestart_core_threads, which reports a thread
 *     that cannot start: the pool is then destroyed (its started workers
 *     joined) and NULL returned. C-Thread-Pool ignores pthread_create's
 *     result and spins forever waiting for the thread. num_threads <= 0 is
 *     refused: C-Thread-Pool makes a pool of no thread, whose work never
 *     runs and whose thpool_wait never returns.
 *   - thpool_add_work is tpe_execute: 0, or -1 for any error.
 *   - thpool_wait is tpe_wait_idle without a time limit: the queue empty
 *     and no job running.
 *   - thpool_pause/thpool_resume are tpe_pause/tpe_resume: per pool, under
 *     the pool's lock, no signal. C-Thread-Pool sends SIGUSR1 to its
 *     threads, whose handler (installed for the whole process) sleeps in a
 *     loop, freezing a job wherever it is, holding whatever locks it holds.
 *     Here a running job finishes and no new one starts.
 *   - thpool_destroy is tpe_shutdown_now (the queued jobs are dropped, as
 *     C-Thread-Pool documents: "wait for the currently active threads to
 *     finish and then 'kill' the whole threadpool") then tpe_destroy, which
 *     joins every thread before the memory is freed. C-Thread-Pool polls,
 *     detaches its threads and frees the pool while the last one may still
 *     be unlocking its mutex.
 *   - thpool_num_threads_working is the active count of tpe_get_stats,
 *     read under the pool's lock.
 *   - thpool_destroy from one of the pool's own jobs does nothing (it
 *     would wait for itself): tpe_wait_idle with no timeout tells, with
 *     EDEADLK, that the caller is one of the pool's workers.
 *   Layer: a client of the public API alone (include/tpe.h,
 *   include/tpe/thpool.h; doc/architecture.md, build-aux/check-layering.sh).
 *   A NULL threadpool is accepted by every call and does nothing (0 or -1
 *   where a value is returned); C-Thread-Pool crashes on it, except in
 *   thpool_destroy.
 */
#include <errno.h>
#include <stdlib.h>

#include "tpe.h"
#include "tpe/thpool.h"

struct thpool_ {
	tpe_t *pool;    /* I */
};

/* Workers are named "thpool-N", as C-Thread-Pool names its threads. */
#define THPOOL_THREAD_NAME "thpool"

static int
create_fixed(tpe_t **pool, size_t n)
{
	tpe_attr_t *attr;
	int rc;

	if ((rc = tpe_attr_create(&attr)) != 0)
		return rc;
	rc = tpe_attr_set_pool_size(attr, n, n);
	if (rc == 0)
		rc = tpe_attr_set_queue(attr, TPE_QUEUE_UNBOUNDED, 0);
	if (rc == 0)
		rc = tpe_attr_set_thread_name(attr, THPOOL_THREAD_NAME);
	if (rc == 0)
		rc = tpe_create(pool, attr);
	tpe_attr_destroy(attr);
	return rc;
}

threadpool
thpool_init(int num_threads)
{
	struct thpool_ *tp;

	if (num_threads <= 0)
		return NULL;
	if ((tp = malloc(sizeof(*tp))) == NULL)
		return NULL;
	if (create_fixed(&tp->pool, (size_t)num_threads) != 0) {
		free(tp);
		return NULL;
	}
	if (tpe_prestart_core_threads(tp->pool, NULL) != 0) {
		/* No job was queued: the shutdown runs nothing, and the
		 * workers that did start are joined. */
		(void)tpe_destroy(tp->pool);
		free(tp);
		return NULL;
	}
	return tp;
}

int
thpool_add_work(threadpool tp, void (*function_p)(void *), void *arg_p)
{
	if (tp == NULL)
		return -1;
	return tpe_execute(tp->pool, function_p, arg_p) == 0 ? 0 : -1;
}

void
thpool_wait(threadpool tp)
{
	/* From one of the pool's own jobs this returns EDEADLK at once
	 * (that job would be waiting for itself); C-Thread-Pool hangs. */
	if (tp != NULL)
		(void)tpe_wait_idle(tp->pool, -1);
}

void
thpool_pause(threadpool tp)
{
	if (tp != NULL)
		(void)tpe_pause(tp->pool);
}

void
thpool_resume(threadpool tp)
{
	/* EAGAIN/ENOMEM (no worker alive for queued jobs) cannot happen:
	 * a fixed pool without core timeout keeps all its workers. */
	if (tp != NULL)
		(void)tpe_resume(tp->pool);
}

void
thpool_destroy(threadpool tp)
{
	if (tp == NULL)
		return;
	/* A job destroying its own pool would wait for itself to finish:
	 * refused before anything changes. tpe_wait_idle says EDEADLK at
	 * once, and only, on the pool's own workers (tpe_wait_idle(3));
	 * elsewhere, with no time to wait, it only looks. */
	if (tpe_wait_idle(tp->pool, 0) == EDEADLK)
		return;
	(void)tpe_shutdown_now(tp->pool, NULL, NULL);
	(void)tpe_destroy(tp->pool);
	free(tp);
}

int
thpool_num_threads_working(threadpool tp)
{
	struct tpe_stats st;

	if (tp == NULL || tpe_get_stats(tp->pool, &st, sizeof(st)) != 0)
		return 0;
	return (int)st.active;
}
