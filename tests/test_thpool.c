/* SPDX-License-Identifier: MIT */
/*
 * test_thpool.c - the C-Thread-Pool compatibility API (include/tpe/thpool.h,
 * tpe_thpool(3)): each function used the way C-Thread-Pool's users use it,
 * and each defect of C-Thread-Pool that tpe_thpool(3) says is fixed (pools
 * sharing state, pause by signal, thpool_init spinning when a thread cannot
 * start, waits and destroys from a job hanging).
 *
 * Linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=pthread_create, so that
 * thpool_init can be made to fail at each allocation and at each thread
 * start (tests/helpers.h). A failure is armed for the calls of the arming
 * thread only, and only around the call under test.
 */
#define _GNU_SOURCE /* pthread_getname_np */
#include <dirent.h>
#include <sched.h>
#include <string.h>

#define TU_FAULT_INJECTION /* this binary links the --wrap wrappers */
#include "helpers.h"

#include "pool/pool.h"
#include "thpool.h"

/* ---- helpers ---------------------------------------------------------- */

/* This process's threads, or -1 where /proc/self/task cannot tell. */
#define thread_count tu_thread_count

/*
 * Asserts that every thread in t sleeps in a wait without a time-out, so
 * that a job still queued is not merely "not run yet": nothing runs it
 * until someone wakes them (tu_tids_wait_untimed). Where this system
 * cannot tell, nothing is asserted.
 */
static void
assert_all_asleep(struct tu_tids *t)
{
	if (tu_tids_wait_untimed(t, t->n) < 0)
		return;
	assert_true(t->n > 0); /* thpool_init started its threads */
	assert_true(TU_EVENTUALLY(tu_tids_wait_untimed(t, t->n) == 1,
	    TU_WAIT_BOUND));
}

/*
 * Asserts that the threads thpool_init started are gone (joined): the
 * count comes back to `before` or below. Below, because `before` may
 * still list a thread the previous test joined (the kernel lists a
 * joined thread for a moment after pthread_join returned, longer under
 * ThreadSanitizer), which then leaves; waiting for "== before" failed on
 * that. A pool thread left behind keeps the count above `before`, unless
 * an older thread was leaving at that very moment (then one run misses it,
 * not every run).
 */
static void
assert_threads_back_to(long before)
{
	if (before < 0)
		return;
	assert_true(TU_EVENTUALLY(thread_count() <= before, TU_WAIT_BOUND));
}

/* The README's job: counts how many times it ran and the sum of its
 * arguments, under a lock of its own as a user would. */
struct tally {
	pthread_mutex_t lock;
	int runs;
	long sum;
};

static struct tally readme_tally = { PTHREAD_MUTEX_INITIALIZER, 0, 0 };

static void
readme_task(void *arg)
{
	pthread_mutex_lock(&readme_tally.lock);
	readme_tally.runs++;
	readme_tally.sum += (long)(intptr_t)arg;
	pthread_mutex_unlock(&readme_tally.lock);
}

/* Holds a worker: a tu_blocker job the test starts and releases. */
struct held {
	struct tu_latch started;
	struct tu_latch release;
	struct tu_latch done;
	struct tu_blocker b;
};

static void
held_init(struct held *h, long n)
{
	tu_latch_init(&h->started, n);
	tu_latch_init(&h->release, 1);
	tu_latch_init(&h->done, n);
	h->b = (struct tu_blocker){ &h->started, &h->release, &h->done, 0 };
}

/* Adds n blocker jobs to tp and waits until all n run. */
static void
hold(threadpool tp, struct held *h, long n)
{
	long i;

	held_init(h, n);
	for (i = 0; i < n; i++)
		assert_int_equal(thpool_add_work(tp, tu_blocker_fn, &h->b), 0);
	tu_latch_wait(&h->started);
}

static void
held_release(struct held *h)
{
	tu_latch_count_down(&h->release);
}

static void
held_destroy(struct held *h)
{
	tu_latch_destroy(&h->started);
	tu_latch_destroy(&h->release);
	tu_latch_destroy(&h->done);
}

/* ---- the README's example --------------------------------------------- */

static void
test_thpool_readme_example(void **state)
{
	threadpool thpool;
	int i;

	(void)state;
	thpool = thpool_init(4);
	assert_non_null(thpool);
	for (i = 0; i < 40; i++)
		assert_int_equal(thpool_add_work(thpool, readme_task,
		    (void *)(intptr_t)i), 0);
	thpool_wait(thpool);
	/* thpool_wait's promise: every job has run, and its effects show. */
	pthread_mutex_lock(&readme_tally.lock);
	assert_int_equal(readme_tally.runs, 40);
	assert_int_equal(readme_tally.sum, 40 * 39 / 2);
	pthread_mutex_unlock(&readme_tally.lock);
	assert_int_equal(thpool_num_threads_working(thpool), 0);
	thpool_destroy(thpool);
}

/* ---- thpool_init ------------------------------------------------------ */

static void
test_thpool_init_not_positive_is_null(void **state)
{
	(void)state;
	assert_null(thpool_init(0));
	assert_null(thpool_init(-1));
	assert_null(thpool_init(-2147483647 - 1));
}

/* Every thread is started by thpool_init, not at the first job. */
static void
test_thpool_init_starts_every_thread(void **state)
{
	long before = thread_count();
	threadpool tp;
	struct held h;

	(void)state;
	tp = thpool_init(3);
	assert_non_null(tp);
	if (before >= 0)
		assert_int_equal(thread_count(), before + 3);
	/* All three can hold a job at once. */
	hold(tp, &h, 3);
	assert_int_equal(thpool_num_threads_working(tp), 3);
	held_release(&h);
	thpool_wait(tp);
	thpool_destroy(tp);
	held_destroy(&h);
	assert_threads_back_to(before);
}

#if defined(__linux__)
static void
name_task(void *arg)
{
	pthread_getname_np(pthread_self(), arg, 16);
}
#endif

static void
test_thpool_init_names_threads(void **state)
{
#if defined(__linux__)
	char name[16] = "";
	threadpool tp = thpool_init(1);

	(void)state;
	assert_non_null(tp);
	assert_int_equal(thpool_add_work(tp, name_task, name), 0);
	thpool_wait(tp);
	assert_string_equal(name, "thpool-1");
	thpool_destroy(tp);
#else
	(void)state;
	print_message("# SKIP: thread names are read with pthread_getname_np, Linux only\n");
	skip();
#endif
}

/* The k-th of n threads cannot start, for every k: NULL, the k threads
 * started before it are joined, nothing leaks (LeakSanitizer checks in
 * the sanitizer build), and nothing spins: the time bound. */
static void
test_thpool_init_pthread_create_fails(void **state)
{
	const int n = 4;
	long before = thread_count();
	threadpool tp;
	int k;

	(void)state;
	for (k = 0; k < n; k++) {
		fault_arm(&create_fault, k, 1, false);
		tp = thpool_init(n);
		assert_int_equal(fault_disarm(&create_fault), 1);
		assert_null(tp);
		assert_threads_back_to(before);
	}
	/* Without the fault, the same call succeeds. */
	tp = thpool_init(n);
	assert_non_null(tp);
	thpool_destroy(tp);
	assert_threads_back_to(before);
}

/* Each allocation thpool_init makes fails in turn, until it needs no more:
 * NULL each time, nothing left behind. */
static void
test_thpool_init_malloc_fails(void **state)
{
	long before = thread_count();
	threadpool tp;
	long k, failures = 0;
	int ran = 0;

	(void)state;
	for (k = 0; k < 100; k++) {
		fault_arm(&malloc_fault, k, 1, false);
		tp = thpool_init(2);
		if (fault_disarm(&malloc_fault) == 0) {
			/* Past the last allocation: this one succeeded. */
			assert_non_null(tp);
			break;
		}
		failures++;
		assert_null(tp);
		assert_threads_back_to(before);
	}
	assert_true(failures > 0);
	assert_true(k < 100);
	assert_int_equal(thpool_add_work(tp, tu_count_fn, &ran), 0);
	thpool_wait(tp);
	assert_int_equal(tu_load(&ran), 1);
	thpool_destroy(tp);
	assert_threads_back_to(before);
}

/* ---- thpool_add_work -------------------------------------------------- */

static void
test_thpool_add_work_errors(void **state)
{
	threadpool tp = thpool_init(1);
	int ran = 0;

	(void)state;
	assert_non_null(tp);
	assert_int_equal(thpool_add_work(NULL, tu_count_fn, &ran), -1);
	assert_int_equal(thpool_add_work(tp, NULL, &ran), -1);
	/* A NULL argument is fine: C-Thread-Pool's README passes one. */
	assert_int_equal(thpool_add_work(tp, tu_nop_fn, NULL), 0);
	thpool_wait(tp);
	assert_int_equal(tu_load(&ran), 0);
	thpool_destroy(tp);
}

/* No memory for the job: -1, and the job never runs. */
static void
test_thpool_add_work_malloc_fails(void **state)
{
	threadpool tp = thpool_init(1);
	int ran = 0;
	int rc;

	(void)state;
	assert_non_null(tp);
	fault_arm(&malloc_fault, 0, -1, false);
	rc = thpool_add_work(tp, tu_count_fn, &ran);
	assert_true(fault_disarm(&malloc_fault) > 0);
	assert_int_equal(rc, -1);
	thpool_wait(tp);
	assert_int_equal(tu_load(&ran), 0);
	assert_int_equal(thpool_add_work(tp, tu_count_fn, &ran), 0);
	thpool_wait(tp);
	assert_int_equal(tu_load(&ran), 1);
	thpool_destroy(tp);
}

/* Jobs run in the order they were added (one thread: a FIFO). */
static int order_seen[8];
static int order_n;

static void
order_task(void *arg)
{
	order_seen[order_n++] = (int)(intptr_t)arg;   /* one thread only */
}

static void
test_thpool_add_work_fifo(void **state)
{
	threadpool tp = thpool_init(1);
	struct held h;
	int i;

	(void)state;
	assert_non_null(tp);
	hold(tp, &h, 1);
	for (i = 0; i < 8; i++)
		assert_int_equal(thpool_add_work(tp, order_task,
		    (void *)(intptr_t)i), 0);
	held_release(&h);
	thpool_wait(tp);
	for (i = 0; i < 8; i++)
		assert_int_equal(order_seen[i], i);
	thpool_destroy(tp);
	held_destroy(&h);
}

/* ---- thpool_wait ------------------------------------------------------ */

struct waiter {
	threadpool tp;
	int *ran;
	int ran_when_back;   /* jobs counted when thpool_wait returned */
	int back;            /* atomic */
	long tid;            /* atomic: the waiter's, before it waits */
};

static void *
waiter_main(void *arg)
{
	struct waiter *w = arg;

	__atomic_store_n(&w->tid, (long)syscall(SYS_gettid), __ATOMIC_SEQ_CST);
	thpool_wait(w->tp);
	w->ran_when_back = tu_load(w->ran);
	__atomic_store_n(&w->back, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/* Two threads wait while jobs run and more are queued: neither is back
 * before the jobs are released, and both see every job done. */
static void
test_thpool_wait_running_and_queued(void **state)
{
	threadpool tp = thpool_init(2);
	struct waiter w[2];
	pthread_t t[2];
	struct held h;
	int ran = 0;
	int i;

	(void)state;
	assert_non_null(tp);
	hold(tp, &h, 2);
	for (i = 0; i < 10; i++)
		assert_int_equal(thpool_add_work(tp, tu_count_fn, &ran), 0);
	for (i = 0; i < 2; i++) {
		w[i] = (struct waiter){ tp, &ran, -1, 0, 0 };
		assert_int_equal(pthread_create(&t[i], NULL, waiter_main,
		    &w[i]), 0);
	}
	/* Both waiters are asleep in thpool_wait (the only place they can
	 * sleep before they are back) before the jobs may go on: a wait that
	 * returned at once would be back, with none of the jobs run. */
	for (i = 0; i < 2; i++)
		assert_true(TU_EVENTUALLY(__atomic_load_n(&w[i].back,
		    __ATOMIC_SEQ_CST) != 0 || (__atomic_load_n(&w[i].tid,
		    __ATOMIC_SEQ_CST) != 0 && tu_thread_state(__atomic_load_n(
		    &w[i].tid, __ATOMIC_SEQ_CST)) == 'S'), TU_WAIT_BOUND));
	/* Both threads are held and ten jobs queued: not idle. */
	assert_int_equal(tu_load(&ran), 0);
	assert_int_equal(__atomic_load_n(&w[0].back, __ATOMIC_SEQ_CST), 0);
	assert_int_equal(__atomic_load_n(&w[1].back, __ATOMIC_SEQ_CST), 0);
	held_release(&h);
	for (i = 0; i < 2; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
		assert_int_equal(w[i].ran_when_back, 10);
	}
	assert_int_equal(tu_ran(&h.b), 2);
	thpool_destroy(tp);
	held_destroy(&h);
}

static void
test_thpool_wait_idle_pool_returns(void **state)
{
	threadpool tp = thpool_init(2);

	(void)state;
	assert_non_null(tp);
	thpool_wait(tp);
	thpool_wait(tp);
	thpool_destroy(tp);
}

/* A job that waits for, or destroys, its own pool would wait for itself:
 * both calls return and the pool goes on. */
struct self_call {
	threadpool tp;
	int done;   /* atomic */
};

static void
self_call_task(void *arg)
{
	struct self_call *s = arg;

	thpool_wait(s->tp);
	thpool_destroy(s->tp);
	__atomic_store_n(&s->done, 1, __ATOMIC_SEQ_CST);
}

static void
test_thpool_wait_and_destroy_from_own_job(void **state)
{
	struct self_call s = { thpool_init(2), 0 };
	int ran = 0;

	(void)state;
	assert_non_null(s.tp);
	assert_int_equal(thpool_add_work(s.tp, self_call_task, &s), 0);
	thpool_wait(s.tp);
	assert_int_equal(__atomic_load_n(&s.done, __ATOMIC_SEQ_CST), 1);
	/* The pool is still up. */
	assert_int_equal(thpool_add_work(s.tp, tu_count_fn, &ran), 0);
	thpool_wait(s.tp);
	assert_int_equal(tu_load(&ran), 1);
	thpool_destroy(s.tp);
}

/* ---- thpool_num_threads_working ---------------------------------------- */

static void
test_thpool_num_threads_working_counts_held_jobs(void **state)
{
	threadpool tp = thpool_init(4);
	struct held h;

	(void)state;
	assert_non_null(tp);
	assert_int_equal(thpool_num_threads_working(tp), 0);
	hold(tp, &h, 3);
	assert_int_equal(thpool_num_threads_working(tp), 3);
	held_release(&h);
	tu_latch_wait(&h.done);
	thpool_wait(tp);
	assert_int_equal(thpool_num_threads_working(tp), 0);
	thpool_destroy(tp);
	held_destroy(&h);
}

/* ---- thpool_pause / thpool_resume ------------------------------------- */

/* Pausing one pool does not pause another (C-Thread-Pool: one global
 * flag), and no signal is involved. */
static void
test_thpool_pause_is_per_pool(void **state)
{
	static struct tu_tids before = TU_TIDS_INIT, of_a = TU_TIDS_INIT;
	threadpool a, b;
	int ran_a = 0, ran_b = 0;

	(void)state;
	tu_tids_new_since(&before, NULL);
	a = thpool_init(2);
	tu_tids_new_since(&of_a, &before);
	b = thpool_init(2);
	assert_non_null(a);
	assert_non_null(b);
	thpool_pause(a);
	thpool_pause(a);        /* pausing twice does nothing more */
	assert_int_equal(thpool_add_work(a, tu_count_fn, &ran_a), 0);
	assert_int_equal(thpool_add_work(b, tu_count_fn, &ran_b), 0);
	thpool_wait(b);
	assert_int_equal(tu_load(&ran_b), 1);
	/* b ran; a's job is still queued, and a's threads sleep: a is
	 * paused. */
	assert_all_asleep(&of_a);
	assert_int_equal(tu_load(&ran_a), 0);
	/* Resuming b (not paused) does not resume a. */
	thpool_resume(b);
	assert_int_equal(thpool_add_work(b, tu_count_fn, &ran_b), 0);
	thpool_wait(b);
	assert_int_equal(tu_load(&ran_b), 2);
	assert_all_asleep(&of_a);
	assert_int_equal(tu_load(&ran_a), 0);
	thpool_resume(a);
	thpool_wait(a);
	assert_int_equal(tu_load(&ran_a), 1);
	thpool_destroy(a);
	thpool_destroy(b);
}

/* A running job is not frozen by a pause: it finishes, and the next
 * queued job waits for the resume. */
static void
test_thpool_pause_lets_running_job_finish(void **state)
{
	static struct tu_tids before = TU_TIDS_INIT, of_tp = TU_TIDS_INIT;
	threadpool tp;
	struct held h;
	int ran = 0;

	(void)state;
	tu_tids_new_since(&before, NULL);
	tp = thpool_init(1);
	tu_tids_new_since(&of_tp, &before);
	assert_non_null(tp);
	hold(tp, &h, 1);
	assert_int_equal(thpool_add_work(tp, tu_count_fn, &ran), 0);
	thpool_pause(tp);
	held_release(&h);
	tu_latch_wait(&h.done);
	assert_true(TU_EVENTUALLY(thpool_num_threads_working(tp) == 0,
	    TU_WAIT_BOUND));
	/* Its thread went to sleep with the job queued: paused, not late. */
	assert_all_asleep(&of_tp);
	assert_int_equal(tu_load(&ran), 0);
	thpool_resume(tp);
	thpool_wait(tp);
	assert_int_equal(tu_load(&ran), 1);
	thpool_destroy(tp);
	held_destroy(&h);
}

/* A pause right before a resume never leaves the pool paused
 * (C-Thread-Pool could, with its signal and sleep(1) loop). */
static void
test_thpool_pause_resume_back_to_back(void **state)
{
	threadpool tp = thpool_init(2);
	int ran = 0;
	int i;

	(void)state;
	assert_non_null(tp);
	for (i = 0; i < 200; i++) {
		thpool_pause(tp);
		assert_int_equal(thpool_add_work(tp, tu_count_fn, &ran), 0);
		thpool_resume(tp);
	}
	thpool_wait(tp);
	assert_int_equal(tu_load(&ran), 200);
	thpool_destroy(tp);
}

/* ---- thpool_destroy --------------------------------------------------- */

/* Queued jobs are dropped (never run), as C-Thread-Pool documents; the
 * pool was paused, so which jobs are queued is exact. */
static void
test_thpool_destroy_drops_queued_jobs(void **state)
{
	long before = thread_count();
	threadpool tp = thpool_init(2);
	int ran = 0;
	int i;

	(void)state;
	assert_non_null(tp);
	thpool_pause(tp);
	for (i = 0; i < 50; i++)
		assert_int_equal(thpool_add_work(tp, tu_count_fn, &ran), 0);
	thpool_destroy(tp);
	assert_int_equal(tu_load(&ran), 0);
	assert_threads_back_to(before);
}

struct destroyer {
	threadpool tp;
	struct held *h;
	int job_done_when_back;
};

static void *
destroyer_main(void *arg)
{
	struct destroyer *d = arg;

	thpool_destroy(d->tp);
	d->job_done_when_back = (int)(tu_latch_count(&d->h->done) == 0);
	return NULL;
}

/*
 * The held job returns only once its pool is shut down (white-box: the
 * worker's pool), so thpool_destroy has dropped the queue by then: the
 * state is built, and no queued job may run.
 */
static void
hold_until_shutdown_fn(void *arg)
{
	struct held *h = arg;
	int64_t end;

	tu_latch_count_down(&h->started);
	tu_latch_wait(&h->release);
	end = tu_now_ns() + TU_WAIT_BOUND * (int64_t)tu_time_scale();
	while (!tpe_is_shutdown(tpe__tls_worker_pool) && tu_now_ns() < end)
		sched_yield();
	tu_latch_count_down(&h->done);
}

/* The running job finishes before thpool_destroy returns, and the queued
 * jobs are dropped, never run; their memory is freed (LeakSanitizer). */
static void
test_thpool_destroy_waits_for_running_job(void **state)
{
	long before = thread_count();
	struct destroyer d = { thpool_init(1), NULL, 0 };
	struct held h;
	pthread_t t;
	int ran = 0;
	int i;

	(void)state;
	assert_non_null(d.tp);
	d.h = &h;
	held_init(&h, 1);
	assert_int_equal(thpool_add_work(d.tp, hold_until_shutdown_fn, &h), 0);
	tu_latch_wait(&h.started);
	for (i = 0; i < 20; i++)
		assert_int_equal(thpool_add_work(d.tp, tu_count_fn, &ran), 0);
	assert_int_equal(pthread_create(&t, NULL, destroyer_main, &d), 0);
	held_release(&h);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(d.job_done_when_back, 1);
	assert_int_equal(tu_load(&ran), 0);
	held_destroy(&h);
	assert_threads_back_to(before);
}

/* Destroying one pool does not stop another (C-Thread-Pool: a global
 * keep-alive flag); many pools live side by side. */
#define MANY 16

static void
test_thpool_many_pools(void **state)
{
	threadpool tp[MANY];
	int ran[MANY] = { 0 };
	int i, j;

	(void)state;
	for (i = 0; i < MANY; i++) {
		tp[i] = thpool_init(1 + i % 3);
		assert_non_null(tp[i]);
	}
	for (i = 0; i < MANY; i++)
		for (j = 0; j < 10; j++)
			assert_int_equal(thpool_add_work(tp[i], tu_count_fn,
			    &ran[i]), 0);
	/* Destroy the even pools; the odd ones go on working. */
	for (i = 0; i < MANY; i += 2) {
		thpool_wait(tp[i]);
		thpool_destroy(tp[i]);
	}
	for (i = 1; i < MANY; i += 2)
		for (j = 0; j < 10; j++)
			assert_int_equal(thpool_add_work(tp[i], tu_count_fn,
			    &ran[i]), 0);
	for (i = 1; i < MANY; i += 2) {
		thpool_wait(tp[i]);
		assert_int_equal(tu_load(&ran[i]), 20);
		thpool_destroy(tp[i]);
	}
	for (i = 0; i < MANY; i += 2)
		assert_int_equal(tu_load(&ran[i]), 10);
}

/* ---- NULL ------------------------------------------------------------- */

static void
test_thpool_null_pool(void **state)
{
	(void)state;
	thpool_wait(NULL);
	thpool_pause(NULL);
	thpool_resume(NULL);
	thpool_destroy(NULL);
	assert_int_equal(thpool_num_threads_working(NULL), 0);
	assert_int_equal(thpool_add_work(NULL, tu_nop_fn, NULL), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_thpool_readme_example),
		cmocka_unit_test(test_thpool_init_not_positive_is_null),
		cmocka_unit_test(test_thpool_init_starts_every_thread),
		cmocka_unit_test(test_thpool_init_names_threads),
		cmocka_unit_test(test_thpool_init_pthread_create_fails),
		cmocka_unit_test(test_thpool_init_malloc_fails),
		cmocka_unit_test(test_thpool_add_work_errors),
		cmocka_unit_test(test_thpool_add_work_malloc_fails),
		cmocka_unit_test(test_thpool_add_work_fifo),
		cmocka_unit_test(test_thpool_wait_running_and_queued),
		cmocka_unit_test(test_thpool_wait_idle_pool_returns),
		cmocka_unit_test(test_thpool_wait_and_destroy_from_own_job),
		cmocka_unit_test(test_thpool_num_threads_working_counts_held_jobs),
		cmocka_unit_test(test_thpool_pause_is_per_pool),
		cmocka_unit_test(test_thpool_pause_lets_running_job_finish),
		cmocka_unit_test(test_thpool_pause_resume_back_to_back),
		cmocka_unit_test(test_thpool_destroy_drops_queued_jobs),
		cmocka_unit_test(test_thpool_destroy_waits_for_running_job),
		cmocka_unit_test(test_thpool_many_pools),
		cmocka_unit_test(test_thpool_null_pool),
	};

	tu_time_bound(0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
