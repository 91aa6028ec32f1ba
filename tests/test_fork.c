/* SPDX-License-Identifier: MIT */
/*
 * test_fork.c - the fork() contract (tpe(7), "Fork"): in the child a
 * pool created before the fork has no threads and is terminated; its queued
 * tasks are dropped without running or being handed back; new pools work.
 * The parent's pool is not disturbed.
 *
 * The child never calls cmocka: each failed check exits with its own code,
 * which the parent asserts is 0.
 */
#include <signal.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "testutil.h"

/*
 * ThreadSanitizer cannot start threads in the child of a multi-threaded
 * fork ("dup thread with used id"): under it, the child skips the check
 * that a new pool works.
 */
#if defined(__SANITIZE_THREAD__)
#define CHILD_THREADS 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CHILD_THREADS 0
#endif
#endif
#ifndef CHILD_THREADS
#define CHILD_THREADS 1
#endif

/*
 * AddressSanitizer's allocator (gcc 12) takes no lock around fork(): when
 * another thread is inside malloc or free at the fork, the child inherits
 * that size class's lock held forever, and the first thread the child
 * starts deadlocks in the sanitizer's own thread set-up. Plain glibc malloc
 * is fork-safe. Under ASan, a child forked while another thread allocates
 * skips the check that a new pool works.
 */
#if defined(__SANITIZE_ADDRESS__)
#define CHILD_THREADS_WHILE_ALLOCATING 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CHILD_THREADS_WHILE_ALLOCATING 0
#endif
#endif
#ifndef CHILD_THREADS_WHILE_ALLOCATING
#define CHILD_THREADS_WHILE_ALLOCATING CHILD_THREADS
#endif

static int discarded;      /* atomic: discard callback calls */
static int drained;        /* atomic: drained callback calls */
static int hook_calls;     /* atomic: terminated hook calls */

static void
discard_cb(tpe_fn fn, void *arg, void *ctx)
{
	(void)fn;
	(void)arg;
	(void)ctx;
	__atomic_add_fetch(&discarded, 1, __ATOMIC_SEQ_CST);
}

static void
drained_cb(tpe_fn fn, void *arg, void *ctx)
{
	(void)fn;
	(void)arg;
	(void)ctx;
	__atomic_add_fetch(&drained, 1, __ATOMIC_SEQ_CST);
}

static void
hook_cb(tpe_t *pool, void *ctx)
{
	(void)pool;
	(void)ctx;
	__atomic_add_fetch(&hook_calls, 1, __ATOMIC_SEQ_CST);
}

static void *
ret_arg_fn(void *arg)
{
	__atomic_add_fetch((int *)arg, 1, __ATOMIC_SEQ_CST);
	return arg;
}

/* Waits for the child; returns its exit code, or 200 + signal number. */
static int
child_status(pid_t pid)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return 255;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 200 + WTERMSIG(st);
	return 254;
}

/* In a child: a new pool runs a task and is destroyed; 0 or a code. */
static int
child_new_pool_works(int base)
{
	struct tu_latch done;
	struct tu_blocker t = { NULL, NULL, &done, 0 };
	tpe_future_t *f;
	void *res = NULL;
	int count = 0;
	tpe_t *p;

	if (!CHILD_THREADS)
		return 0;
	tu_latch_init(&done, 1);
	if (tpe_create(&p, NULL) != 0)
		return base;
	if (tpe_execute(p, tu_blocker_fn, &t) != 0)
		return base + 1;
	tu_latch_wait(&done);
	if (tpe_submit(p, ret_arg_fn, &count, &f) != 0)
		return base + 2;
	if (tpe_future_get(f, -1, &res) != 0 || res != &count)
		return base + 3;
	tpe_future_release(f);
	if (tpe_shutdown(p) != 0)
		return base + 4;
	if (tpe_await_termination(p, -1) != 0)
		return base + 5;
	if (tpe_destroy(p) != 0)
		return base + 6;
	if (__atomic_load_n(&t.ran, __ATOMIC_SEQ_CST) != 1 || count != 1)
		return base + 7;
	return 0;
}

/* Everything the child checks on the parent's pool. Returns 0 or a code. */
static int
child_checks(tpe_t *pool, tpe_future_t *f, int *counts, int ncounts,
    int hook_before)
{
	struct tpe_stats s;
	tpe_future_t *g = (tpe_future_t *)&s;
	int dummy = 0;
	int64_t t0;
	int i, rc;

	alarm(5);   /* alarms are not inherited: bound the child too */
	if (tpe_execute(pool, tu_count_fn, &dummy) != ECANCELED)
		return 10;
	if (tpe_submit(pool, ret_arg_fn, &dummy, &g) != ECANCELED)
		return 11;
	if (g != (tpe_future_t *)&s)
		return 12;
	if (!tpe_is_shutdown(pool))
		return 13;
	if (!tpe_is_terminated(pool))
		return 14;
	t0 = tu_now_ns();
	if (tpe_await_termination(pool, -1) != 0)
		return 15;
	if (tpe_await_termination(pool, 0) != 0)
		return 16;
	if (tu_now_ns() - t0 > 10 * TU_S)
		return 17;   /* "at once": a generous sanity bound only */
	if (tpe_get_stats(pool, &s) != 0)
		return 18;
	if (s.pool_size != 0)
		return 19;
	if (s.active != 0 || s.idle != 0)
		return 20;
	if (s.queued != 0)
		return 21;
	/* Idempotent, and nothing is handed back in the child. */
	if (tpe_shutdown(pool) != 0)
		return 22;
	if (tpe_shutdown_now(pool, drained_cb, NULL) != 0)
		return 23;
	/* A future obtained before the fork may be released. */
	tpe_future_release(f);
	rc = tpe_destroy(pool);
	if (rc != 0)
		return 24;
	for (i = 0; i < ncounts; i++)
		if (__atomic_load_n(&counts[i], __ATOMIC_SEQ_CST) != 0)
			return 25;
	if (dummy != 0)
		return 26;
	if (__atomic_load_n(&discarded, __ATOMIC_SEQ_CST) != 0)
		return 27;
	if (__atomic_load_n(&drained, __ATOMIC_SEQ_CST) != 0)
		return 28;
	if (__atomic_load_n(&hook_calls, __ATOMIC_SEQ_CST) != hook_before)
		return 29;
	return child_new_pool_works(40);
}

static void
test_fork_child_sees_terminated_pool(void **state)
{
	enum { N = 4 };
	struct tu_saturation sat;
	int counts[N] = { 0 }, fcount = 0;
	tpe_future_t *f;
	tpe_t *pool;
	void *res = NULL;
	pid_t pid;
	int i, crc;

	(void)state;
	discarded = drained = hook_calls = 0;
	pool = tu_pool_with(&(struct tu_pool_opts){ .core = 1, .max = 2,
	    .discard = discard_cb, .terminated = hook_cb });

	tu_saturate(pool, 1, 0, &sat);
	tu_fill_queue(pool, N, tu_count_fn, counts, sizeof(counts[0]));
	assert_int_equal(tpe_submit(pool, ret_arg_fn, &fcount, &f), 0);
	assert_int_equal(tu_stats(pool).queued, N + 1);

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int rc = child_checks(pool, f, counts, N, 0);

		if (rc == 0 && __atomic_load_n(&fcount, __ATOMIC_SEQ_CST) != 0)
			rc = 30;
		_exit(rc);
	}
	/* Asserted last, so that a failure here still cleans up. */
	crc = child_status(pid);

	/* The parent's pool was not disturbed. */
	assert_false(tpe_is_shutdown(pool));
	assert_int_equal(tu_stats(pool).queued, N + 1);
	assert_int_equal(tu_stats(pool).active, 1);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_future_get(f, -1, &res), 0);
	assert_ptr_equal(res, &fcount);
	tpe_future_release(f);
	assert_int_equal(tpe_shutdown(pool), 0);
	assert_int_equal(tpe_await_termination(pool, -1), 0);
	for (i = 0; i < N; i++)
		assert_int_equal(tu_load(&counts[i]), 1);
	assert_int_equal(tu_load(&fcount), 1);
	assert_int_equal(tu_stats(pool).completed, N + 2);
	assert_int_equal(tpe_destroy(pool), 0);
	assert_int_equal(__atomic_load_n(&discarded, __ATOMIC_SEQ_CST), 0);
	assert_int_equal(__atomic_load_n(&hook_calls, __ATOMIC_SEQ_CST), 1);
	tu_saturation_destroy(&sat);
	assert_int_equal(crc, 0);
}

/* Pools in every state at the fork: fresh, idle workers, shut down, terminated. */
static void
test_fork_pools_in_every_state(void **state)
{
	tpe_t *fresh, *idle, *down, *term;
	struct tu_saturation sat;
	int count = 0, crc;
	pid_t pid;

	(void)state;
	fresh = tu_pool(2, 2, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	idle = tu_pool(3, 3, TPE_QUEUE_BOUNDED, 4, TPE_REJECT_ABORT);
	assert_int_equal(tpe_prestart_core_threads(idle, NULL), 0);
	assert_true(TU_EVENTUALLY(tu_stats(idle).idle == 3, 10 * TU_S));
	down = tu_pool(1, 1, TPE_QUEUE_HANDOFF, 0, TPE_REJECT_ABORT);
	tu_saturate(down, 1, 0, &sat);
	assert_int_equal(tpe_shutdown(down), 0);
	term = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	assert_int_equal(tpe_shutdown(term), 0);
	assert_true(tpe_is_terminated(term));

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		tpe_t *all[4] = { fresh, idle, down, term };
		struct tpe_stats s;
		int i;

		alarm(5);
		for (i = 0; i < 4; i++) {
			if (tpe_execute(all[i], tu_count_fn, &count) != ECANCELED)
				_exit(10 + i);
			if (!tpe_is_terminated(all[i]))
				_exit(20 + i);
			if (tpe_await_termination(all[i], -1) != 0)
				_exit(30 + i);
			if (tpe_get_stats(all[i], &s) != 0 || s.pool_size != 0)
				_exit(40 + i);
			if (tpe_prestart_core_threads(all[i], NULL) != ECANCELED)
				_exit(50 + i);
			if (tpe_destroy(all[i]) != 0)
				_exit(60 + i);
		}
		if (count != 0)
			_exit(70);
		_exit(child_new_pool_works(80));
	}
	crc = child_status(pid);

	assert_int_equal(tpe_execute(fresh, tu_count_fn, &count), 0);
	assert_int_equal(tpe_execute(idle, tu_count_fn, &count), 0);
	assert_int_equal(tu_stats(idle).pool_size, 3);
	assert_false(tpe_is_terminated(down));
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(fresh), 0);
	assert_int_equal(tpe_destroy(idle), 0);
	assert_int_equal(tpe_destroy(down), 0);
	assert_int_equal(tpe_destroy(term), 0);
	assert_int_equal(tu_load(&count), 2);
	tu_saturation_destroy(&sat);
	assert_int_equal(crc, 0);
}

static void
test_fork_without_any_pool(void **state)
{
	tpe_t *p;
	pid_t pid;

	(void)state;
	/* A pool that existed and is gone must not haunt the child. */
	p = tu_pool(2, 2, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	assert_int_equal(tpe_prestart_core_threads(p, NULL), 0);
	assert_int_equal(tpe_destroy(p), 0);

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(5);
		_exit(child_new_pool_works(10));
	}
	assert_int_equal(child_status(pid), 0);

	/* And the parent still creates pools. */
	p = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	assert_int_equal(tpe_destroy(p), 0);
}

/* A grandchild: the pool created in the child behaves the same way. */
static void
test_fork_twice(void **state)
{
	pid_t pid;

	(void)state;
	if (!CHILD_THREADS)
		skip();
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct tu_latch started, release;
		struct tu_blocker b = { &started, &release, NULL, 0 };
		tpe_t *p;
		pid_t gpid;
		int st, rc;

		alarm(5);
		tu_latch_init(&started, 1);
		tu_latch_init(&release, 1);
		if (tpe_create(&p, NULL) != 0)
			_exit(10);
		if (tpe_execute(p, tu_blocker_fn, &b) != 0)
			_exit(11);
		tu_latch_wait(&started);
		gpid = fork();
		if (gpid < 0)
			_exit(12);
		if (gpid == 0) {
			alarm(5);
			if (tpe_execute(p, tu_nop_fn, NULL) != ECANCELED)
				_exit(20);
			if (!tpe_is_terminated(p))
				_exit(21);
			if (tpe_destroy(p) != 0)
				_exit(22);
			_exit(child_new_pool_works(30));
		}
		while ((rc = waitpid(gpid, &st, 0)) < 0 && errno == EINTR)
			;
		if (rc < 0 || !WIFEXITED(st))
			_exit(13);
		if (WEXITSTATUS(st) != 0)
			_exit(WEXITSTATUS(st));
		tu_latch_count_down(&release);
		if (tpe_destroy(p) != 0)
			_exit(14);
		if (b.ran != 1)
			_exit(15);
		_exit(0);
	}
	assert_int_equal(child_status(pid), 0);
}

/* fork() again and again while another thread submits: no deadlock. */
struct hammer {
	tpe_t *pool;
	int stop;      /* atomic */
	int count;     /* atomic: tasks run */
	long accepted;
};

static void *
hammer_main(void *arg)
{
	struct hammer *h = arg;

	while (!__atomic_load_n(&h->stop, __ATOMIC_SEQ_CST)) {
		if (tpe_execute(h->pool, tu_count_fn, &h->count) == 0)
			h->accepted++;
	}
	return NULL;
}

static void
test_fork_while_submitting(void **state)
{
	enum { FORKS = 25 };
	static struct hammer h;   /* static: never aliased by a later test */
	pthread_t th;
	pid_t pid;
	int i, crc = 0;

	(void)state;
	memset(&h, 0, sizeof(h));
	h.pool = tu_pool(2, 4, TPE_QUEUE_BOUNDED, 64, TPE_REJECT_CALLER_RUNS);
	assert_int_equal(pthread_create(&th, NULL, hammer_main, &h), 0);
	for (i = 0; i < FORKS; i++) {
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			int dummy = 0;

			alarm(5);
			if (tpe_execute(h.pool, tu_count_fn, &dummy) != ECANCELED)
				_exit(10);
			if (!tpe_is_terminated(h.pool))
				_exit(11);
			if (tpe_destroy(h.pool) != 0)
				_exit(12);
			if (!CHILD_THREADS_WHILE_ALLOCATING)
				_exit(0);
			_exit(child_new_pool_works(20));
		}
		crc = child_status(pid);
		if (crc != 0)
			break;
	}
	__atomic_store_n(&h.stop, 1, __ATOMIC_SEQ_CST);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(tpe_destroy(h.pool), 0);
	assert_int_equal(tu_load(&h.count), (int)h.accepted);
	assert_int_equal(crc, 0);
}

/*
 * Idle workers sleeping on the pool's condition variable at the fork: the
 * child must still be able to destroy the pool (glibc keeps such waiters
 * counted in the mutex, so a child that only unlocks the copied mutex gets
 * EBUSY from pthread_mutex_destroy).
 */
static void
test_fork_idle_workers_asleep(void **state)
{
	tpe_t *pool;
	pid_t pid;
	int round, crc;

	(void)state;
	for (round = 0; round < 5; round++) {
		pool = tu_pool(4, 4, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
		assert_int_equal(tpe_prestart_core_threads(pool, NULL), 0);
		assert_true(TU_EVENTUALLY(tu_stats(pool).idle == 4, 10 * TU_S));
		/* Give the idle workers time to go from spinning to sleeping
		 * (not needed for correctness: it only makes the case likely). */
		assert_int_equal(tpe_await_termination(pool, 20 * TU_MS),
		    ETIMEDOUT);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			alarm(5);
			if (tpe_execute(pool, tu_nop_fn, NULL) != ECANCELED)
				_exit(10);
			if (tpe_destroy(pool) != 0)
				_exit(11);
			_exit(child_new_pool_works(20));
		}
		crc = child_status(pid);
		assert_int_equal(tu_stats(pool).pool_size, 4);
		assert_int_equal(tpe_destroy(pool), 0);
		assert_int_equal(crc, 0);
	}
}

/* A parent thread waits on a queued future at the fork; the child releases it. */
struct fwaiter {
	pthread_t thread;
	tpe_future_t *f;
	struct tu_latch *ready;
	int rc;
};

static void *
fwaiter_main(void *arg)
{
	struct fwaiter *w = arg;

	tu_latch_count_down(w->ready);
	w->rc = tpe_future_get(w->f, -1, NULL);
	return NULL;
}

static void
test_fork_future_waited_on_in_parent(void **state)
{
	struct tu_saturation sat;
	struct tu_latch ready;
	struct fwaiter w;
	int fcount = 0;
	tpe_future_t *f;
	tpe_t *pool;
	pid_t pid;
	int crc;

	(void)state;
	tu_latch_init(&ready, 1);
	pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	tu_saturate(pool, 1, 0, &sat);
	assert_int_equal(tpe_submit(pool, ret_arg_fn, &fcount, &f), 0);
	w.f = f;
	w.ready = &ready;
	w.rc = -1;
	assert_int_equal(pthread_create(&w.thread, NULL, fwaiter_main, &w), 0);
	tu_latch_wait(&ready);
	/* Likely (not certainly) asleep in tpe_future_get by now. */
	assert_int_equal(tpe_future_get(f, 20 * TU_MS, NULL), ETIMEDOUT);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(5);
		if (tpe_destroy(pool) != 0)
			_exit(10);
		tpe_future_release(f);
		if (fcount != 0)
			_exit(11);
		_exit(child_new_pool_works(20));
	}
	crc = child_status(pid);
	tu_unsaturate(&sat);
	assert_int_equal(pthread_join(w.thread, NULL), 0);
	assert_int_equal(w.rc, 0);
	assert_int_equal(tu_load(&fcount), 1);
	tpe_future_release(f);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_saturation_destroy(&sat);
	tu_latch_destroy(&ready);
	assert_int_equal(crc, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fork_child_sees_terminated_pool),
		cmocka_unit_test(test_fork_pools_in_every_state),
		cmocka_unit_test(test_fork_without_any_pool),
		cmocka_unit_test(test_fork_twice),
		cmocka_unit_test(test_fork_while_submitting),
		cmocka_unit_test(test_fork_idle_workers_asleep),
		cmocka_unit_test(test_fork_future_waited_on_in_parent),
	};

	tu_time_bound(0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
