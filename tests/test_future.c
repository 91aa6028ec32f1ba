/* SPDX-License-Identifier: MIT */
/*
 * test_future.c - tpe_submit and futures: results, timed gets, cancel,
 * several waiters, early release, cancelled tasks left in the queue
 * (Java behaviours 80-83, 86, 88, 90 and 94 of doc/java-behaviours.md; the
 * rest of its section H has no C analogue, as that file says).
 *
 * Helper threads and tasks never call cmocka's assert macros: they record
 * what they saw and the test thread asserts it.
 */
#include <string.h>

#include "helpers.h"

/* ---- helpers ---------------------------------------------------------- */

/* A callable: counts its runs, waits on an optional gate, returns `value`. */
struct callable {
	struct tu_latch *started;  /* may be NULL */
	struct tu_latch *release;  /* may be NULL */
	void *value;
	int ran;                   /* atomic */
	long payload;              /* plain write, read after get (happens-before) */
};

static void *
callable_fn(void *arg)
{
	struct callable *c = arg;

	__atomic_add_fetch(&c->ran, 1, __ATOMIC_SEQ_CST);
	if (c->started)
		tu_latch_count_down(c->started);
	if (c->release)
		tu_latch_wait(c->release);
	c->payload = 42;
	return c->value;
}

/* A thread waiting on a future. */
struct getter {
	pthread_t thread;
	tpe_future_t *f;
	int64_t timeout;
	struct tu_latch *ready;
	int rc;
	void *result;
	int returned;   /* atomic */
};

static void *
getter_main(void *arg)
{
	struct getter *g = arg;

	tu_latch_count_down(g->ready);
	g->rc = tpe_future_get(g->f, g->timeout, &g->result);
	__atomic_store_n(&g->returned, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static void
getters_start(struct getter *g, int n, tpe_future_t *f, struct tu_latch *ready)
{
	int i;

	for (i = 0; i < n; i++) {
		memset(&g[i], 0, sizeof(g[i]));
		g[i].f = f;
		/* half untimed, half with a long timeout */
		g[i].timeout = (i & 1) ? 3600 * TU_S : -1;
		g[i].ready = ready;
		g[i].result = (void *)&g[i];   /* sentinel */
		assert_int_equal(pthread_create(&g[i].thread, NULL, getter_main,
		    &g[i]), 0);
	}
}

/* ---- results (item 80) ------------------------------------------------ */

static void
test_future_submit_get_result(void **state)
{
	tpe_t *pool = tu_pool(2, 2, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct callable c = { NULL, NULL, (void *)0x1234, 0, 0 };
	struct callable z = { NULL, NULL, NULL, 0, 0 };
	tpe_future_t *f, *fz;
	void *res = NULL;

	(void)state;
	assert_int_equal(tpe_submit(pool, callable_fn, &c, &f), 0);
	assert_non_null(f);
	assert_int_equal(tpe_future_get(f, -1, &res), 0);
	assert_ptr_equal(res, (void *)0x1234);
	assert_int_equal(c.payload, 42);   /* effects happen-before get */
	assert_true(tpe_future_is_done(f));
	assert_false(tpe_future_is_cancelled(f));
	/* Repeated gets, timed and polling, give the same value. */
	res = NULL;
	assert_int_equal(tpe_future_get(f, 0, &res), 0);
	assert_ptr_equal(res, (void *)0x1234);
	res = NULL;
	assert_int_equal(tpe_future_get(f, TU_S, &res), 0);
	assert_ptr_equal(res, (void *)0x1234);
	assert_int_equal(tu_ran(&c), 1);

	/* A NULL result is a result. */
	res = (void *)1;
	assert_int_equal(tpe_submit(pool, callable_fn, &z, &fz), 0);
	assert_int_equal(tpe_future_get(fz, -1, &res), 0);
	assert_null(res);
	assert_true(tpe_future_is_done(fz));

	tpe_future_release(f);
	tpe_future_release(fz);
	assert_int_equal(tpe_destroy(pool), 0);
}

static void
test_future_get_null_result_pointer(void **state)
{
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct callable c = { NULL, NULL, (void *)0x77, 0, 0 };
	tpe_future_t *f;

	(void)state;
	assert_int_equal(tpe_submit(pool, callable_fn, &c, &f), 0);
	assert_int_equal(tpe_future_get(f, -1, NULL), 0);
	assert_int_equal(tpe_future_get(f, 0, NULL), 0);
	assert_int_equal(tu_ran(&c), 1);
	tpe_future_release(f);
	assert_int_equal(tpe_destroy(pool), 0);
}

static void
test_future_many_results(void **state)
{
	enum { N = 200 };
	tpe_t *pool = tu_pool(3, 3, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct callable c[N];
	tpe_future_t *f[N];
	void *res;
	int i;

	(void)state;
	for (i = 0; i < N; i++) {
		memset(&c[i], 0, sizeof(c[i]));
		c[i].value = &c[i];
		assert_int_equal(tpe_submit(pool, callable_fn, &c[i], &f[i]), 0);
	}
	for (i = N - 1; i >= 0; i--) {
		res = NULL;
		assert_int_equal(tpe_future_get(f[i], -1, &res), 0);
		assert_ptr_equal(res, &c[i]);
		assert_int_equal(c[i].payload, 42);
		tpe_future_release(f[i]);
	}
	assert_int_equal(tpe_shutdown(pool), 0);
	assert_int_equal(tpe_await_termination(pool, -1), 0);
	assert_int_equal(tu_stats(pool).completed, N);
	for (i = 0; i < N; i++)
		assert_int_equal(tu_ran(&c[i]), 1);
	assert_int_equal(tpe_destroy(pool), 0);
}

/* ---- timed get (item 86) ---------------------------------------------- */

static void
test_future_timed_get_times_out(void **state)
{
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct tu_latch started, release;
	struct callable c = { &started, &release, (void *)0x55, 0, 0 };
	tpe_future_t *f;
	void *res = (void *)1;
	int64_t t0, dt;

	(void)state;
	tu_latch_init(&started, 1);
	tu_latch_init(&release, 1);
	assert_int_equal(tpe_submit(pool, callable_fn, &c, &f), 0);
	tu_latch_wait(&started);

	assert_int_equal(tpe_future_get(f, 0, &res), ETIMEDOUT);
	assert_ptr_equal(res, (void *)1);              /* not written */
	t0 = tu_now_ns();
	assert_int_equal(tpe_future_get(f, 1, &res), ETIMEDOUT);
	assert_true(tu_now_ns() - t0 >= 1);
	t0 = tu_now_ns();
	assert_int_equal(tpe_future_get(f, 999999, &res), ETIMEDOUT);
	assert_true(tu_now_ns() - t0 >= 999999);
	t0 = tu_now_ns();
	assert_int_equal(tpe_future_get(f, 25 * TU_MS, &res), ETIMEDOUT);
	dt = tu_now_ns() - t0;
	assert_true(dt >= 25 * TU_MS);
	assert_ptr_equal(res, (void *)1);
	assert_false(tpe_future_is_done(f));
	assert_false(tpe_future_is_cancelled(f));

	tu_latch_count_down(&release);
	assert_int_equal(tpe_future_get(f, INT64_MAX, &res), 0);
	assert_ptr_equal(res, (void *)0x55);
	tpe_future_release(f);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
}

/* A timeout too large to add to "now" must saturate, not wrap. */
static void
test_future_timed_get_huge_timeout(void **state)
{
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct tu_latch started, release, ready;
	struct callable c = { &started, &release, (void *)0x66, 0, 0 };
	struct getter g;
	tpe_future_t *f;

	(void)state;
	tu_latch_init(&started, 1);
	tu_latch_init(&release, 1);
	tu_latch_init(&ready, 1);
	assert_int_equal(tpe_submit(pool, callable_fn, &c, &f), 0);
	tu_latch_wait(&started);
	memset(&g, 0, sizeof(g));
	g.f = f;
	g.timeout = INT64_MAX;
	g.ready = &ready;
	assert_int_equal(pthread_create(&g.thread, NULL, getter_main, &g), 0);
	tu_latch_wait(&ready);
	assert_int_equal(tpe_future_get(f, 10 * TU_MS, NULL), ETIMEDOUT);
	assert_false(__atomic_load_n(&g.returned, __ATOMIC_SEQ_CST));
	tu_latch_count_down(&release);
	assert_int_equal(pthread_join(g.thread, NULL), 0);
	assert_int_equal(g.rc, 0);
	assert_ptr_equal(g.result, (void *)0x66);
	tpe_future_release(f);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
	tu_latch_destroy(&ready);
}

/* ---- cancel (items 82, 83, 90) ---------------------------------------- */

static void
test_future_cancel_before_run(void **state)
{
	struct tu_handbacks log;
	tpe_t *pool = tu_pool_with(&(struct tu_pool_opts){ .core = 1, .max = 1,
	    .discard = tu_handback_fn, .discard_ctx = &log });
	struct tu_saturation sat;
	struct callable c = { NULL, NULL, (void *)0x99, 0, 0 };
	tpe_future_t *f;
	void *res = (void *)1;
	struct tpe_stats s;

	(void)state;
	tu_handbacks_init(&log);
	tu_saturate(pool, 1, 0, &sat);
	assert_int_equal(tpe_submit(pool, callable_fn, &c, &f), 0);
	assert_false(tpe_future_is_done(f));
	assert_int_equal(tpe_future_get(f, 0, &res), ETIMEDOUT);

	assert_int_equal(tpe_future_cancel(f), 0);
	assert_true(tpe_future_is_done(f));
	assert_true(tpe_future_is_cancelled(f));
	assert_int_equal(tpe_future_get(f, -1, &res), ECANCELED);
	assert_int_equal(tpe_future_get(f, 0, &res), ECANCELED);
	assert_int_equal(tpe_future_get(f, TU_S, &res), ECANCELED);
	assert_int_equal(tpe_future_get(f, -1, NULL), ECANCELED);
	assert_ptr_equal(res, (void *)1);
	assert_int_equal(tpe_future_cancel(f), 0);   /* again: still 0 */

	/* Item 90: it stays queued until a worker dequeues it as a no-op. */
	s = tu_stats(pool);
	assert_int_equal(s.queued, 1);
	assert_int_equal(tu_handbacks_count(&log), 0);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_shutdown(pool), 0);
	assert_int_equal(tpe_await_termination(pool, -1), 0);
	assert_int_equal(tu_ran(&c), 0);
	s = tu_stats(pool);
	assert_int_equal(s.submitted, 2);
	assert_int_equal(s.completed, 2);  /* the no-op counts as completed */
	assert_int_equal(tu_handbacks_count(&log), 1);
	assert_null(log.fn[0]);
	assert_ptr_equal(log.arg[0], &c);
	assert_int_equal(tpe_future_cancel(f), 0);
	assert_int_equal(tpe_future_get(f, -1, &res), ECANCELED);
	tpe_future_release(f);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_saturation_destroy(&sat);
}

/* A cancelled no-op dequeued by a live pool: hooks not run, later tasks run. */
static void
test_future_cancelled_queued_task_is_noop(void **state)
{
	struct tu_handbacks log;
	struct tu_hook_counts hc = { 0 };
	struct tu_saturation sat;
	struct tu_latch done;
	struct tu_blocker last = { NULL, NULL, &done, 0 };
	struct callable c1 = { NULL, NULL, NULL, 0, 0 };
	struct callable c2 = { NULL, NULL, NULL, 0, 0 };
	tpe_future_t *f1, *f2;
	tpe_t *pool;

	(void)state;
	tu_handbacks_init(&log);
	tu_latch_init(&done, 1);
	pool = tu_pool_with(&(struct tu_pool_opts){ .core = 1, .max = 1,
	    .discard = tu_handback_fn, .discard_ctx = &log,
	    .before = tu_count_before, .after = tu_count_after,
	    .task_hooks_ctx = &hc });

	tu_saturate(pool, 1, 0, &sat);
	assert_int_equal(tpe_submit(pool, callable_fn, &c1, &f1), 0);
	assert_int_equal(tpe_submit(pool, callable_fn, &c2, &f2), 0);
	assert_int_equal(tpe_execute(pool, tu_blocker_fn, &last), 0);
	assert_int_equal(tpe_future_cancel(f1), 0);
	assert_int_equal(tu_stats(pool).queued, 3);
	tu_unsaturate(&sat);
	tu_latch_wait(&done);
	/* The FIFO worker passed f1 (a no-op) and ran f2 and `last`. */
	assert_int_equal(tpe_future_get(f2, -1, NULL), 0);
	assert_int_equal(tu_ran(&c1), 0);
	assert_int_equal(tu_ran(&c2), 1);
	assert_true(TU_EVENTUALLY(tu_stats(pool).completed == 4, 10 * TU_S));
	assert_true(TU_EVENTUALLY(tu_handbacks_count(&log) == 1, 10 * TU_S));
	assert_null(log.fn[0]);
	assert_ptr_equal(log.arg[0], &c1);
	assert_int_equal(tpe_shutdown(pool), 0);
	assert_int_equal(tpe_await_termination(pool, -1), 0);
	/* Hooks ran around the blocker, f2 and `last`, not the no-op. */
	assert_int_equal(__atomic_load_n(&hc.before, __ATOMIC_SEQ_CST), 3);
	assert_int_equal(__atomic_load_n(&hc.after, __ATOMIC_SEQ_CST), 3);
	assert_int_equal(tu_stats(pool).completed, 4);
	assert_int_equal(tu_handbacks_count(&log), 1);
	tpe_future_release(f1);
	tpe_future_release(f2);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_saturation_destroy(&sat);
	tu_latch_destroy(&done);
}

static void
test_future_cancel_running_is_ebusy(void **state)
{
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct tu_latch started, release;
	struct callable c = { &started, &release, (void *)0xabc, 0, 0 };
	tpe_future_t *f;
	void *res = NULL;

	(void)state;
	tu_latch_init(&started, 1);
	tu_latch_init(&release, 1);
	assert_int_equal(tpe_submit(pool, callable_fn, &c, &f), 0);
	tu_latch_wait(&started);
	assert_int_equal(tpe_future_cancel(f), EBUSY);
	assert_false(tpe_future_is_cancelled(f));
	assert_false(tpe_future_is_done(f));
	tu_latch_count_down(&release);
	assert_int_equal(tpe_future_get(f, -1, &res), 0);
	assert_ptr_equal(res, (void *)0xabc);
	assert_int_equal(tu_ran(&c), 1);
	tpe_future_release(f);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
}

static void
test_future_cancel_done_is_ebusy(void **state)
{
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct callable c = { NULL, NULL, (void *)0xdef, 0, 0 };
	tpe_future_t *f;
	void *res = NULL;

	(void)state;
	assert_int_equal(tpe_submit(pool, callable_fn, &c, &f), 0);
	assert_int_equal(tpe_future_get(f, -1, &res), 0);
	assert_int_equal(tpe_future_cancel(f), EBUSY);
	assert_int_equal(tpe_future_cancel(f), EBUSY);
	assert_true(tpe_future_is_done(f));
	assert_false(tpe_future_is_cancelled(f));
	res = NULL;
	assert_int_equal(tpe_future_get(f, 0, &res), 0);
	assert_ptr_equal(res, (void *)0xdef);    /* result unchanged */
	tpe_future_release(f);
	assert_int_equal(tpe_destroy(pool), 0);
}

/* ---- several waiters (item 88) ---------------------------------------- */

static void
test_future_several_waiters_get_value(void **state)
{
	enum { NW = 6 };
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct tu_latch started, release, ready;
	struct callable c = { &started, &release, (void *)0x4242, 0, 0 };
	struct getter g[NW];
	tpe_future_t *f;
	int i;

	(void)state;
	tu_latch_init(&started, 1);
	tu_latch_init(&release, 1);
	tu_latch_init(&ready, NW);
	assert_int_equal(tpe_submit(pool, callable_fn, &c, &f), 0);
	tu_latch_wait(&started);
	getters_start(g, NW, f, &ready);
	tu_latch_wait(&ready);
	assert_int_equal(tpe_future_get(f, 10 * TU_MS, NULL), ETIMEDOUT);
	for (i = 0; i < NW; i++)
		assert_false(__atomic_load_n(&g[i].returned, __ATOMIC_SEQ_CST));
	tu_latch_count_down(&release);
	for (i = 0; i < NW; i++) {
		assert_int_equal(pthread_join(g[i].thread, NULL), 0);
		assert_int_equal(g[i].rc, 0);
		assert_ptr_equal(g[i].result, (void *)0x4242);
	}
	tpe_future_release(f);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
	tu_latch_destroy(&ready);
}

static void
test_future_several_waiters_get_cancelled(void **state)
{
	enum { NW = 6 };
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct tu_saturation sat;
	struct tu_latch ready;
	struct callable c = { NULL, NULL, (void *)0x4242, 0, 0 };
	struct getter g[NW];
	tpe_future_t *f;
	int i;

	(void)state;
	tu_latch_init(&ready, NW);
	tu_saturate(pool, 1, 0, &sat);
	assert_int_equal(tpe_submit(pool, callable_fn, &c, &f), 0);
	getters_start(g, NW, f, &ready);
	tu_latch_wait(&ready);
	assert_int_equal(tpe_future_get(f, 10 * TU_MS, NULL), ETIMEDOUT);
	for (i = 0; i < NW; i++)
		assert_false(__atomic_load_n(&g[i].returned, __ATOMIC_SEQ_CST));
	assert_int_equal(tpe_future_cancel(f), 0);
	for (i = 0; i < NW; i++) {
		assert_int_equal(pthread_join(g[i].thread, NULL), 0);
		assert_int_equal(g[i].rc, ECANCELED);
		assert_ptr_equal(g[i].result, (void *)&g[i]);  /* untouched */
	}
	tu_unsaturate(&sat);
	assert_int_equal(tpe_shutdown(pool), 0);
	assert_int_equal(tpe_await_termination(pool, -1), 0);
	assert_int_equal(tu_ran(&c), 0);
	tpe_future_release(f);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_saturation_destroy(&sat);
	tu_latch_destroy(&ready);
}

/* ---- release (reference counting) ------------------------------------ */

static void
test_future_release_before_completion(void **state)
{
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct tu_latch started, release, done;
	struct callable c = { &started, &release, NULL, 0, 0 };
	struct tu_blocker after = { NULL, NULL, &done, 0 };
	tpe_future_t *f;

	(void)state;
	tu_latch_init(&started, 1);
	tu_latch_init(&release, 1);
	tu_latch_init(&done, 1);
	/* Released while still queued (the pool has no thread yet? it has one
	 * started with the task; release before and while it runs). */
	assert_int_equal(tpe_submit(pool, callable_fn, &c, &f), 0);
	tpe_future_release(f);
	tu_latch_wait(&started);
	tu_latch_count_down(&release);
	/* FIFO with one worker: `after` runs once the callable returned. */
	assert_int_equal(tpe_execute(pool, tu_blocker_fn, &after), 0);
	tu_latch_wait(&done);
	assert_int_equal(tu_ran(&c), 1);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
	tu_latch_destroy(&done);
}

static void
test_future_release_while_queued(void **state)
{
	enum { N = 50 };
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct tu_saturation sat;
	struct callable c[N];
	tpe_future_t *f;
	int i;

	(void)state;
	tu_saturate(pool, 1, 0, &sat);
	for (i = 0; i < N; i++) {
		memset(&c[i], 0, sizeof(c[i]));
		assert_int_equal(tpe_submit(pool, callable_fn, &c[i], &f), 0);
		if (i % 3 == 0)
			assert_int_equal(tpe_future_cancel(f), 0);
		tpe_future_release(f);  /* the pool still holds its reference */
	}
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(pool), 0);
	for (i = 0; i < N; i++)
		assert_int_equal(tu_ran(&c[i]), i % 3 == 0 ? 0 : 1);
	tu_saturation_destroy(&sat);
}

static void
test_future_release_then_shutdown_now(void **state)
{
	struct tu_handbacks log;
	tpe_t *pool = tu_pool_with(&(struct tu_pool_opts){ .core = 1, .max = 1,
	    .discard = tu_handback_fn, .discard_ctx = &log });
	struct tu_saturation sat;
	struct callable c = { NULL, NULL, NULL, 0, 0 };
	tpe_future_t *f;

	(void)state;
	tu_handbacks_init(&log);
	tu_saturate(pool, 1, 0, &sat);
	assert_int_equal(tpe_submit(pool, callable_fn, &c, &f), 0);
	tpe_future_release(f);
	assert_int_equal(tpe_shutdown_now(pool, NULL, NULL), 0);
	assert_int_equal(tu_handbacks_count(&log), 1);
	assert_null(log.fn[0]);
	assert_ptr_equal(log.arg[0], &c);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(pool), 0);
	assert_int_equal(tu_ran(&c), 0);
	tu_saturation_destroy(&sat);
}

/* ---- NULL arguments ----------------------------------------------------- */

static void
test_future_null_arguments(void **state)
{
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct callable c = { NULL, NULL, NULL, 0, 0 };
	tpe_future_t *sentinel = (tpe_future_t *)&c;
	tpe_future_t *f = sentinel;
	void *res = (void *)1;

	(void)state;
	assert_int_equal(tpe_future_get(NULL, -1, &res), EINVAL);
	assert_int_equal(tpe_future_get(NULL, 0, &res), EINVAL);
	assert_int_equal(tpe_future_get(NULL, TU_S, NULL), EINVAL);
	assert_ptr_equal(res, (void *)1);
	assert_int_equal(tpe_future_cancel(NULL), EINVAL);
	assert_false(tpe_future_is_done(NULL));
	assert_false(tpe_future_is_cancelled(NULL));
	tpe_future_release(NULL);

	assert_int_equal(tpe_submit(NULL, callable_fn, &c, &f), EINVAL);
	assert_int_equal(tpe_submit(pool, NULL, &c, &f), EINVAL);
	assert_int_equal(tpe_submit(pool, callable_fn, &c, NULL), EINVAL);
	assert_ptr_equal(f, sentinel);
	assert_int_equal(tu_ran(&c), 0);
	assert_int_equal(tu_stats(pool).submitted, 0);
	assert_int_equal(tpe_destroy(pool), 0);
	assert_int_equal(tu_ran(&c), 0);
}

/* ---- rejected submissions (item 94) ----------------------------------- */

static void
test_future_rejection_policies(void **state)
{
	struct tu_handbacks log;
	struct tu_saturation sat;
	struct callable queued = { NULL, NULL, (void *)1, 0, 0 };
	struct callable extra = { NULL, NULL, (void *)2, 0, 0 };
	tpe_future_t *fq, *fx, *sentinel = (tpe_future_t *)&sat, *f;
	void *res;
	int r;
	enum tpe_rejection rejs[4] = { TPE_REJECT_ABORT, TPE_REJECT_CALLER_RUNS,
		TPE_REJECT_DISCARD, TPE_REJECT_DISCARD_OLDEST };

	(void)state;
	for (r = 0; r < 4; r++) {
		tpe_t *pool = tu_pool_with(&(struct tu_pool_opts){ .core = 1,
		    .max = 1, .queue = TPE_QUEUE_BOUNDED, .capacity = 1,
		    .rejection = rejs[r], .discard = tu_handback_fn,
		    .discard_ctx = &log });

		tu_handbacks_init(&log);
		queued.ran = extra.ran = 0;
		tu_saturate(pool, 1, 0, &sat);
		assert_int_equal(tpe_submit(pool, callable_fn, &queued, &fq), 0);
		f = sentinel;
		switch (rejs[r]) {
		case TPE_REJECT_ABORT:
			assert_int_equal(tpe_submit(pool, callable_fn, &extra,
			    &f), EAGAIN);
			assert_ptr_equal(f, sentinel);   /* not written */
			fx = NULL;
			break;
		case TPE_REJECT_CALLER_RUNS:
			assert_int_equal(tpe_submit(pool, callable_fn, &extra,
			    &fx), 0);
			/* Ran in this thread: already done. */
			assert_int_equal(tu_ran(&extra), 1);
			assert_true(tpe_future_is_done(fx));
			assert_int_equal(tpe_future_get(fx, 0, &res), 0);
			assert_ptr_equal(res, (void *)2);
			break;
		case TPE_REJECT_DISCARD:
			assert_int_equal(tpe_submit(pool, callable_fn, &extra,
			    &fx), 0);
			assert_true(tpe_future_is_cancelled(fx));
			assert_true(tpe_future_is_done(fx));
			assert_int_equal(tpe_future_get(fx, -1, &res),
			    ECANCELED);
			assert_int_equal(tu_handbacks_count(&log), 1);
			assert_null(log.fn[0]);
			assert_ptr_equal(log.arg[0], &extra);
			break;
		default: /* DISCARD_OLDEST: the queued future is dropped. */
			assert_int_equal(tpe_submit(pool, callable_fn, &extra,
			    &fx), 0);
			assert_true(tpe_future_is_cancelled(fq));
			assert_int_equal(tpe_future_get(fq, -1, &res),
			    ECANCELED);
			assert_false(tpe_future_is_done(fx));
			assert_int_equal(tu_handbacks_count(&log), 1);
			assert_null(log.fn[0]);
			assert_ptr_equal(log.arg[0], &queued);
			break;
		}
		assert_int_equal(tu_stats(pool).rejected, 1);
		tu_unsaturate(&sat);
		if (rejs[r] != TPE_REJECT_DISCARD_OLDEST) {
			assert_int_equal(tpe_future_get(fq, -1, &res), 0);
			assert_ptr_equal(res, (void *)1);
		} else {
			assert_int_equal(tpe_future_get(fx, -1, &res), 0);
			assert_ptr_equal(res, (void *)2);
		}
		assert_int_equal(tpe_destroy(pool), 0);
		assert_int_equal(tu_ran(&queued),
		    rejs[r] == TPE_REJECT_DISCARD_OLDEST ? 0 : 1);
		assert_int_equal(tu_ran(&extra),
		    rejs[r] == TPE_REJECT_ABORT ||
		    rejs[r] == TPE_REJECT_DISCARD ? 0 : 1);
		tpe_future_release(fq);
		tpe_future_release(fx);
		tu_saturation_destroy(&sat);
		pthread_mutex_destroy(&log.lock);
	}
}

/* A custom handler that keeps the internal pair and runs it later. */
struct kept {
	tpe_fn fn;
	void *arg;
	int calls;
};

static int
keep_handler(tpe_t *pool, tpe_fn fn, void *arg, void *ctx)
{
	struct kept *k = ctx;

	(void)pool;
	k->fn = fn;
	k->arg = arg;
	k->calls++;
	return 0;
}

static void
test_future_custom_handler_completes_later(void **state)
{
	struct tu_saturation sat;
	struct callable c = { NULL, NULL, (void *)0x31, 0, 0 };
	struct kept k = { NULL, NULL, 0 };
	tpe_future_t *f;
	tpe_t *pool = tu_pool_with(&(struct tu_pool_opts){ .core = 1, .max = 1,
	    .queue = TPE_QUEUE_HANDOFF, .reject_handler = keep_handler,
	    .reject_ctx = &k });
	void *res = NULL;

	(void)state;
	tu_saturate(pool, 1, 0, &sat);
	assert_int_equal(tpe_submit(pool, callable_fn, &c, &f), 0);
	assert_int_equal(k.calls, 1);
	assert_non_null(k.fn);
	/* Not done until the handler's pair runs (item 94). */
	assert_false(tpe_future_is_done(f));
	assert_int_equal(tpe_future_get(f, 0, &res), ETIMEDOUT);
	k.fn(k.arg);
	assert_int_equal(tu_ran(&c), 1);
	assert_int_equal(tpe_future_get(f, 0, &res), 0);
	assert_ptr_equal(res, (void *)0x31);
	tpe_future_release(f);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_saturation_destroy(&sat);
}

/* Counts the discard callback's calls. */
static void
count_discard(tpe_fn fn, void *arg, void *ctx)
{
	(void)fn;
	(void)arg;
	tu_count_fn(ctx);
}

/*
 * Found by tests/chaos.c: a submit task whose pair a custom handler kept,
 * cancelled before the pair is called. The cancel succeeds and is the
 * task's only hand-back (tpe(7), GUARANTEES): calling the pair afterwards
 * runs nothing, and the discard callback is not called for it.
 */
static void
test_future_cancel_while_handler_keeps_pair(void **state)
{
	struct tu_saturation sat;
	struct callable c = { NULL, NULL, (void *)0x32, 0, 0 };
	struct kept k = { NULL, NULL, 0 };
	int discarded = 0;
	tpe_future_t *f;
	tpe_t *pool = tu_pool_with(&(struct tu_pool_opts){ .core = 1, .max = 1,
	    .queue = TPE_QUEUE_HANDOFF, .reject_handler = keep_handler,
	    .reject_ctx = &k, .discard = count_discard,
	    .discard_ctx = &discarded });
	void *res = NULL;

	(void)state;
	tu_saturate(pool, 1, 0, &sat);
	assert_int_equal(tpe_submit(pool, callable_fn, &c, &f), 0);
	assert_int_equal(k.calls, 1);
	assert_int_equal(tpe_future_cancel(f), 0);
	assert_true(tpe_future_is_cancelled(f));
	k.fn(k.arg);          /* the handler keeps its promise: once */
	assert_int_equal(tu_ran(&c), 0);
	assert_int_equal(tpe_future_get(f, 0, &res), ECANCELED);
	tpe_future_release(f);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(pool), 0);
	assert_int_equal(tu_load(&discarded), 0);
	tu_saturation_destroy(&sat);
}

/* ---- races between get, cancel and run -------------------------------- */

struct canceller {
	pthread_t thread;
	tpe_future_t *f;
	pthread_barrier_t *bar;
	int rc;
};

static void *
canceller_main(void *arg)
{
	struct canceller *c = arg;

	pthread_barrier_wait(c->bar);
	c->rc = tpe_future_cancel(c->f);
	return NULL;
}

static void
test_future_cancel_run_race(void **state)
{
	enum { ROUNDS = 2000 };
	tpe_t *pool = tu_pool(2, 2, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	pthread_barrier_t bar;
	struct callable c;
	struct canceller k;
	tpe_future_t *f;
	void *res;
	int i, rc, cancelled = 0;

	(void)state;
	assert_int_equal(pthread_barrier_init(&bar, NULL, 2), 0);
	for (i = 0; i < ROUNDS; i++) {
		memset(&c, 0, sizeof(c));
		c.value = &c;
		assert_int_equal(tpe_submit(pool, callable_fn, &c, &f), 0);
		k.f = f;
		k.bar = &bar;
		assert_int_equal(pthread_create(&k.thread, NULL, canceller_main,
		    &k), 0);
		pthread_barrier_wait(&bar);
		res = NULL;
		rc = tpe_future_get(f, -1, &res);
		assert_int_equal(pthread_join(k.thread, NULL), 0);
		/* Exactly one outcome, consistent everywhere. */
		if (k.rc == 0) {
			cancelled++;
			assert_int_equal(rc, ECANCELED);
			assert_true(tpe_future_is_cancelled(f));
		} else {
			assert_int_equal(k.rc, EBUSY);
			assert_int_equal(rc, 0);
			assert_ptr_equal(res, &c);
			assert_false(tpe_future_is_cancelled(f));
		}
		assert_true(tpe_future_is_done(f));
		tpe_future_release(f);
		if (k.rc == 0) {
			/* It never runs, even later. */
			assert_int_equal(tpe_wait_idle(pool, -1), 0);
			assert_int_equal(tu_ran(&c), 0);
		} else {
			assert_int_equal(tu_ran(&c), 1);
		}
	}
	pthread_barrier_destroy(&bar);
	assert_int_equal(tpe_destroy(pool), 0);
	print_message("# cancel won %d of %d\n", cancelled, ROUNDS);
}

/*
 * tpe_attr_set_task_hooks(3): the hooks never run around the no-op a worker
 * makes of a cancelled future's task. The before hook itself cancels the
 * task it is called for, the latest moment a cancel can come: the future
 * must already count as started (EBUSY), and the task then runs. Before the
 * fix the worker looked at the future, called the hook, and only then
 * started it, so this cancel won and the hooks ran around a no-op.
 */
struct hook_cancel {
	sem_t published;          /* the future pointer is in f */
	tpe_future_t *f;
	int cancel_rc;            /* what the before hook's cancel returned */
	int before, after;        /* atomic: hook calls */
};

static void
hook_cancel_before(tpe_t *pool, tpe_fn fn, void *arg, void *ctx)
{
	struct hook_cancel *h = ctx;

	(void)pool;
	(void)fn;
	(void)arg;
	__atomic_add_fetch(&h->before, 1, __ATOMIC_SEQ_CST);
	sem_wait(&h->published);
	h->cancel_rc = tpe_future_cancel(h->f);
}

static void
hook_cancel_after(tpe_t *pool, tpe_fn fn, void *arg, void *ctx)
{
	struct hook_cancel *h = ctx;

	(void)pool;
	(void)fn;
	(void)arg;
	__atomic_add_fetch(&h->after, 1, __ATOMIC_SEQ_CST);
}

static void
hooks_never_wrap_cancelled(enum tpe_queue_kind kind)
{
	struct hook_cancel h;
	struct callable c;
	tpe_t *pool;
	void *res = NULL;

	memset(&h, 0, sizeof(h));
	memset(&c, 0, sizeof(c));
	c.value = &c;
	assert_int_equal(sem_init(&h.published, 0, 0), 0);
	pool = tu_pool_with(&(struct tu_pool_opts){ .core = 2, .max = 2,
	    .queue = kind, .before = hook_cancel_before,
	    .after = hook_cancel_after, .task_hooks_ctx = &h });
	assert_int_equal(tpe_submit(pool, callable_fn, &c, &h.f), 0);
	assert_int_equal(sem_post(&h.published), 0);
	assert_int_equal(tpe_future_get(h.f, -1, &res), 0);
	assert_int_equal(tpe_wait_idle(pool, -1), 0);
	/* The hooks ran, so the task is no no-op: it ran once, and the
	 * cancel from inside the before hook came too late. */
	assert_int_equal(h.cancel_rc, EBUSY);
	assert_ptr_equal(res, &c);
	assert_int_equal(tu_ran(&c), 1);
	assert_int_equal(tu_load(&h.before), 1);
	assert_int_equal(tu_load(&h.after), 1);
	tpe_future_release(h.f);
	assert_int_equal(tpe_destroy(pool), 0);
	sem_destroy(&h.published);
}

static void
test_future_hooks_never_wrap_cancelled_task(void **state)
{
	(void)state;
	hooks_never_wrap_cancelled(TPE_QUEUE_UNBOUNDED);
	hooks_never_wrap_cancelled(TPE_QUEUE_PER_WORKER);
}

/* ---- failure (tpe_task_fail) and continuations (tpe_future_then) ------ */

/* The pools every case below runs on: each queue kind, each policy. */
struct kind_row {
	const char *name;
	enum tpe_queue_kind queue;
	size_t capacity;
	enum tpe_policy policy;
};
static const struct kind_row kind_rows[] = {
	{ "unbounded", TPE_QUEUE_UNBOUNDED, 0, TPE_POLICY_QUEUE_FIRST },
	{ "bounded", TPE_QUEUE_BOUNDED, 8, TPE_POLICY_QUEUE_FIRST },
	{ "handoff", TPE_QUEUE_HANDOFF, 0, TPE_POLICY_QUEUE_FIRST },
	{ "per_worker", TPE_QUEUE_PER_WORKER, 0, TPE_POLICY_QUEUE_FIRST },
	{ "priority", TPE_QUEUE_PRIORITY, 0, TPE_POLICY_QUEUE_FIRST },
	{ "priority_bounded", TPE_QUEUE_PRIORITY, 8, TPE_POLICY_SCALE_FIRST },
	{ "scale_first", TPE_QUEUE_UNBOUNDED, 0, TPE_POLICY_SCALE_FIRST },
	{ "scale_first_bounded", TPE_QUEUE_BOUNDED, 8, TPE_POLICY_SCALE_FIRST },
};
#define N_KIND_ROWS (sizeof(kind_rows) / sizeof(kind_rows[0]))

/* A fixed pool of `n` threads of the row's kind (core == max: the
 * per-worker kind's rule; a hand-off pool takes n tasks at once). */
static tpe_t *
row_pool(const struct kind_row *r, size_t n, tpe_handback_fn discard,
    void *discard_ctx)
{
	return tu_pool_with(&(struct tu_pool_opts){ .core = n, .max = n,
	    .queue = r->queue, .capacity = r->capacity, .policy = r->policy,
	    .discard = discard, .discard_ctx = discard_ctx });
}

/* A callable that reports failure: tpe_task_fail(error[0]), then
 * error[1] (when not 0: the last call wins), and returns ret. */
struct failing {
	int error[2];
	void *ret;
	int bad_rc[2];       /* tpe_task_fail(0) and (-1), inside */
	struct tu_latch *release; /* may be NULL */
	struct tu_latch *started; /* may be NULL */
	pthread_t thread;
};

static void *
failing_call(void *arg)
{
	struct failing *c = arg;

	c->thread = pthread_self();
	c->bad_rc[0] = tpe_task_fail(0);
	c->bad_rc[1] = tpe_task_fail(-1);
	if (c->started != NULL)
		tu_latch_count_down(c->started);
	if (c->release != NULL)
		tu_latch_wait(c->release);
	if (c->error[0] != 0)
		(void)tpe_task_fail(c->error[0]);
	if (c->error[1] != 0)
		(void)tpe_task_fail(c->error[1]);
	return c->ret;
}

/* Submits c, waiting for room (a hand-off pool's worker may be on its
 * way back). */
static int
submit_failing(tpe_t *pool, struct failing *c, tpe_future_t **f)
{
	return tpe_submit_wait(pool, failing_call, c, -1, f);
}

/* A plain task: what tpe_task_fail says outside a callable. */
static void
fail_outside_fn(void *arg)
{
	*(int *)arg = tpe_task_fail(EPERM);
}

static void
test_future_task_fail(void **state)
{
	size_t k;

	(void)state;
	/* No callable on this thread. */
	assert_int_equal(tpe_task_fail(EPERM), EINVAL);
	assert_int_equal(tpe_future_error(NULL), 0);
	for (k = 0; k < N_KIND_ROWS; k++) {
		tpe_t *pool = row_pool(&kind_rows[k], 1, NULL, NULL);
		struct failing ok = { .ret = (void *)0x11 };
		struct failing bad = { .error = { EPERM, 0 },
		    .ret = (void *)0x22 };
		struct failing twice = { .error = { EPERM, ENOSPC } };
		tpe_future_t *f;
		void *res;
		int outside = -1;

		print_message("kind %s\n", kind_rows[k].name);
		res = NULL;
		assert_int_equal(submit_failing(pool, &ok, &f), 0);
		assert_int_equal(tpe_future_get(f, -1, &res), 0);
		assert_ptr_equal(res, (void *)0x11);
		assert_int_equal(tpe_future_error(f), 0);
		assert_int_equal(ok.bad_rc[0], EINVAL);
		assert_int_equal(ok.bad_rc[1], EINVAL);
		tpe_future_release(f);

		res = NULL;
		assert_int_equal(submit_failing(pool, &bad, &f), 0);
		assert_int_equal(tpe_future_get(f, -1, &res), EIO);
		assert_ptr_equal(res, (void *)0x22); /* what it returned */
		assert_int_equal(tpe_future_error(f), EPERM);
		assert_true(tpe_future_is_done(f));
		assert_false(tpe_future_is_cancelled(f));
		assert_int_equal(tpe_future_get(f, 0, NULL), EIO);
		tpe_future_release(f);

		/* The next task on that same worker runs in no frame. */
		assert_int_equal(tpe_execute_wait(pool, fail_outside_fn,
		    &outside, -1), 0);
		assert_int_equal(tpe_wait_idle(pool, -1), 0);
		assert_int_equal(outside, EINVAL);

		assert_int_equal(submit_failing(pool, &twice, &f),
		    0);
		assert_int_equal(tpe_future_get(f, -1, NULL), EIO);
		assert_int_equal(tpe_future_error(f), ENOSPC);
		tpe_future_release(f);
		assert_int_equal(tpe_destroy(pool), 0);
	}
}

/* A callable that runs another future's callable inline on its thread (a
 * caller-runs rejection): the inner frame's failure is the inner task's
 * alone. */
struct nesting {
	tpe_t *full;          /* saturated, CALLER_RUNS */
	struct failing inner;
	tpe_future_t *inner_f;
	int submit_rc;
};

static void *
nesting_call(void *arg)
{
	struct nesting *n = arg;

	n->submit_rc = tpe_submit(n->full, failing_call, &n->inner,
	    &n->inner_f);
	return NULL;
}

static void
test_future_task_fail_nested_frames(void **state)
{
	tpe_t *full = tu_pool(1, 1, TPE_QUEUE_BOUNDED, 1,
	    TPE_REJECT_CALLER_RUNS);
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct tu_saturation sat;
	struct nesting n = { .full = full, .inner = { .error = { EPERM, 0 } },
	    .submit_rc = -1 };
	tpe_future_t *f;

	(void)state;
	tu_saturate(full, 1, 1, &sat);
	assert_int_equal(tpe_submit(pool, nesting_call, &n, &f), 0);
	assert_int_equal(tpe_future_get(f, -1, NULL), 0);
	assert_int_equal(n.submit_rc, 0);
	assert_int_equal(tpe_future_get(n.inner_f, -1, NULL), EIO);
	assert_int_equal(tpe_future_error(n.inner_f), EPERM);
	/* The outer task did not fail. */
	assert_int_equal(tpe_future_error(f), 0);
	tpe_future_release(f);
	tpe_future_release(n.inner_f);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(full), 0);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_saturation_destroy(&sat);
}

/* What a continuation saw. */
struct then_rec {
	struct tu_latch *fired;  /* counted down once per run; may be NULL */
	int *seq;                /* may be NULL: the order of runs */
	int order;
	pthread_t thread;
	int rc;                  /* tpe_future_get(f, 0, &result) */
	void *result;
	int error;
	int ran;                 /* atomic: runs */
};

static void
then_record(tpe_future_t *f, void *ctx)
{
	struct then_rec *r = ctx;

	r->thread = pthread_self();
	r->rc = tpe_future_get(f, 0, &r->result);
	r->error = tpe_future_error(f);
	if (r->seq != NULL)
		r->order = __atomic_fetch_add(r->seq, 1, __ATOMIC_SEQ_CST);
	tpe_future_release(f); /* its reference */
	__atomic_add_fetch(&r->ran, 1, __ATOMIC_SEQ_CST);
	if (r->fired != NULL)
		tu_latch_count_down(r->fired);
}

static void
test_future_then_outcomes(void **state)
{
	size_t k;

	(void)state;
	for (k = 0; k < N_KIND_ROWS; k++) {
		struct tu_handbacks hb;
		tpe_t *pool;
		struct tu_latch release, fired, started;
		struct failing run = { .ret = (void *)0x33,
		    .release = &release };
		struct failing bad = { .error = { EPERM, 0 },
		    .ret = (void *)0x44 };
		struct failing queued = { 0 };
		struct then_rec r1 = { 0 }, r2 = { 0 }, r3 = { 0 }, r4 = { 0 },
		    r5 = { 0 };
		tpe_future_t *f, *g, *q;

		print_message("kind %s\n", kind_rows[k].name);
		tu_handbacks_init(&hb);
		pool = row_pool(&kind_rows[k], 1, tu_handback_fn, &hb);
		tu_latch_init(&release, 1);
		tu_latch_init(&fired, 1);
		r1.fired = &fired;

		/* Registered while the task runs: on the completing worker. */
		assert_int_equal(submit_failing(pool, &run, &f), 0);
		/* A task behind it, not started while the first one runs
		 * (a hand-off pool of one refuses it: cancel one of those is
		 * told apart below). */
		assert_int_equal(tpe_future_then(f, then_record, &r1, NULL), 0);
		assert_int_equal(tu_ran(&r1), 0);
		tu_latch_count_down(&release);
		tu_latch_wait(&fired);
		assert_int_equal(tu_ran(&r1), 1);
		assert_true(pthread_equal(r1.thread, run.thread));
		assert_int_equal(r1.rc, 0);
		assert_ptr_equal(r1.result, (void *)0x33);
		assert_int_equal(r1.error, 0);

		/* Already done: at once, on this thread. */
		assert_int_equal(tpe_future_then(f, then_record, &r2, NULL), 0);
		assert_int_equal(tu_ran(&r2), 1);
		assert_true(pthread_equal(r2.thread, pthread_self()));
		assert_int_equal(r2.rc, 0);
		tpe_future_release(f);

		/* Failed. */
		assert_int_equal(submit_failing(pool, &bad, &g), 0);
		assert_int_equal(tpe_future_get(g, -1, NULL), EIO);
		assert_int_equal(tpe_future_then(g, then_record, &r3, NULL), 0);
		assert_int_equal(tu_ran(&r3), 1);
		assert_int_equal(r3.rc, EIO);
		assert_ptr_equal(r3.result, (void *)0x44);
		assert_int_equal(r3.error, EPERM);
		tpe_future_release(g);

		/* Cancelled while queued behind a blocker: on the cancelling
		 * thread, at once; then handed back by tpe_shutdown_now. */
		tu_latch_init(&release, 1);
		tu_latch_init(&started, 1);
		run.release = &release;
		run.started = &started;
		assert_int_equal(submit_failing(pool, &run, &f), 0);
		tu_latch_wait(&started);
		if (kind_rows[k].queue != TPE_QUEUE_HANDOFF) {
			assert_int_equal(tpe_submit(pool, failing_call, &queued,
			    &q), 0);
			assert_int_equal(tpe_future_then(q, then_record, &r4,
			    NULL), 0);
			assert_int_equal(tpe_future_cancel(q), 0);
			assert_int_equal(tu_ran(&r4), 1);
			assert_true(pthread_equal(r4.thread, pthread_self()));
			assert_int_equal(r4.rc, ECANCELED);
			assert_int_equal(r4.error, 0);
			tpe_future_release(q);

			assert_int_equal(tpe_submit(pool, failing_call, &queued,
			    &q), 0);
			assert_int_equal(tpe_future_then(q, then_record, &r5,
			    NULL), 0);
			assert_int_equal(tpe_shutdown_now(pool, NULL, NULL), 0);
			assert_int_equal(tu_ran(&r5), 1);
			assert_int_equal(r5.rc, ECANCELED);
			tpe_future_release(q);
		}
		tu_latch_count_down(&release);
		assert_int_equal(tpe_destroy(pool), 0);
		assert_int_equal(tpe_future_get(f, 0, NULL), 0);
		tpe_future_release(f);
		tu_latch_destroy(&release);
		tu_latch_destroy(&fired);
		tu_latch_destroy(&started);
	}
}

/* Several continuations of one future: each once, in registration order;
 * the future may be released right after registering them. */
static void
test_future_then_order_and_release(void **state)
{
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct tu_latch release, fired;
	struct failing run = { .release = &release };
	struct then_rec r[3];
	tpe_future_t *f;
	int seq = 0, i;

	(void)state;
	tu_latch_init(&release, 1);
	tu_latch_init(&fired, 3);
	memset(r, 0, sizeof(r));
	assert_int_equal(submit_failing(pool, &run, &f), 0);
	for (i = 0; i < 3; i++) {
		r[i].fired = &fired;
		r[i].seq = &seq;
		assert_int_equal(tpe_future_then(f, then_record, &r[i], NULL),
		    0);
	}
	tpe_future_release(f); /* the continuations hold their own */
	tu_latch_count_down(&release);
	/* They run on the worker within its task: done when it is idle. */
	assert_int_equal(tpe_wait_idle(pool, -1), 0);
	for (i = 0; i < 3; i++) {
		assert_int_equal(tu_ran(&r[i]), 1);
		assert_int_equal(r[i].order, i);
	}
	assert_int_equal(tpe_destroy(pool), 0);
	tu_latch_destroy(&release);
	tu_latch_destroy(&fired);
}

/* Registration racing completion: every continuation runs exactly once. */
static void
test_future_then_races_completion(void **state)
{
	enum { N = 300 };
	tpe_t *pool = tu_pool(2, 2, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	static struct then_rec r[N];
	struct tu_latch fired;
	tpe_future_t *f;
	int i;

	(void)state;
	memset(r, 0, sizeof(r));
	tu_latch_init(&fired, N);
	for (i = 0; i < N; i++) {
		r[i].fired = &fired;
		assert_int_equal(tpe_submit(pool, tu_nop_call, NULL, &f), 0);
		assert_int_equal(tpe_future_then(f, then_record, &r[i], NULL),
		    0);
		tpe_future_release(f);
	}
	tu_latch_wait(&fired);
	assert_int_equal(tpe_destroy(pool), 0);
	for (i = 0; i < N; i++)
		assert_int_equal(tu_ran(&r[i]), 1);
	tu_latch_destroy(&fired);
}

/* A thread-start hook: the pool's worker threads, by pthread_t. */
struct pool_threads {
	pthread_mutex_t lock;
	pthread_t t[8];
	int n;
};

static void
pool_threads_hook(tpe_t *pool, void *ctx)
{
	struct pool_threads *p = ctx;

	(void)pool;
	pthread_mutex_lock(&p->lock);
	if (p->n < 8)
		p->t[p->n++] = pthread_self();
	pthread_mutex_unlock(&p->lock);
}

static bool
pool_threads_has(struct pool_threads *p, pthread_t t)
{
	bool has = false;
	int i;

	pthread_mutex_lock(&p->lock);
	for (i = 0; i < p->n; i++)
		has = has || pthread_equal(p->t[i], t);
	pthread_mutex_unlock(&p->lock);
	return has;
}

/* With a pool: a task there; refused, on the completing thread; handed
 * back by that pool (a discard policy, tpe_shutdown_now), on the thread
 * that hands it back; never lost. */
static void
test_future_then_on_pool(void **state)
{
	size_t k;

	(void)state;
	for (k = 0; k < N_KIND_ROWS; k++) {
		struct pool_threads pt = { PTHREAD_MUTEX_INITIALIZER, { 0 },
		    0 };
		struct tu_handbacks hb;
		tpe_t *a = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0,
		    TPE_REJECT_ABORT);
		tpe_t *b;
		struct tu_saturation sat;
		struct tu_latch fired;
		struct failing run = { 0 };
		struct then_rec r1 = { 0 }, r2 = { 0 }, r3 = { 0 };
		tpe_future_t *f;

		print_message("kind %s\n", kind_rows[k].name);
		tu_handbacks_init(&hb);
		b = tu_pool_with(&(struct tu_pool_opts){ .core = 1, .max = 1,
		    .queue = kind_rows[k].queue,
		    .capacity = kind_rows[k].capacity,
		    .policy = kind_rows[k].policy,
		    .on_start = pool_threads_hook, .thread_hooks_ctx = &pt });
		tu_latch_init(&fired, 1);
		r1.fired = &fired;

		/* Done already: still a task on b. */
		assert_int_equal(tpe_submit(a, failing_call, &run, &f), 0);
		assert_int_equal(tpe_future_get(f, -1, NULL), 0);
		assert_int_equal(tpe_future_then(f, then_record, &r1, b), 0);
		tu_latch_wait(&fired);
		/* The task there has ended, and its guard with it: once. */
		assert_int_equal(tpe_wait_idle(b, -1), 0);
		assert_int_equal(tu_ran(&r1), 1);
		assert_true(pool_threads_has(&pt, r1.thread));
		assert_int_equal(r1.rc, 0);

		/* b busy, the continuation queued there, then b shut down
		 * now: it runs on the shutting-down thread. */
		if (kind_rows[k].queue != TPE_QUEUE_HANDOFF) {
			tu_saturate(b, 1, 0, &sat);
			assert_int_equal(tpe_future_then(f, then_record, &r2,
			    b), 0);
			assert_int_equal(tu_ran(&r2), 0);
			assert_int_equal(tpe_shutdown_now(b, tu_handback_fn,
			    &hb), 0);
			assert_int_equal(tu_ran(&r2), 1);
			assert_true(pthread_equal(r2.thread, pthread_self()));
			assert_int_equal(tu_handbacks_count(&hb), 1);
			tu_unsaturate(&sat);
		} else {
			assert_int_equal(tpe_shutdown(b), 0);
		}
		/* b refuses (shut down): here, at once. */
		assert_int_equal(tpe_future_then(f, then_record, &r3, b), 0);
		assert_int_equal(tu_ran(&r3), 1);
		assert_true(pthread_equal(r3.thread, pthread_self()));
		tpe_future_release(f);
		assert_int_equal(tpe_destroy(b), 0);
		if (kind_rows[k].queue != TPE_QUEUE_HANDOFF)
			tu_saturation_destroy(&sat);
		assert_int_equal(tpe_destroy(a), 0);
		tu_latch_destroy(&fired);
	}
}

/* A pool whose full queue discards (DISCARD): the continuation's task is
 * accepted and dropped, and the continuation runs on the thread that
 * dropped it (the completing worker of the future's pool). */
static void
test_future_then_on_discarding_pool(void **state)
{
	tpe_t *a = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	tpe_t *b = tu_pool(1, 1, TPE_QUEUE_BOUNDED, 1, TPE_REJECT_DISCARD);
	struct tu_saturation sat;
	struct tu_latch release, fired;
	struct failing run = { .release = &release };
	struct then_rec r = { 0 };
	tpe_future_t *f;

	(void)state;
	tu_latch_init(&release, 1);
	tu_latch_init(&fired, 1);
	r.fired = &fired;
	tu_saturate(b, 1, 1, &sat);
	assert_int_equal(tpe_submit(a, failing_call, &run, &f), 0);
	assert_int_equal(tpe_future_then(f, then_record, &r, b), 0);
	tu_latch_count_down(&release);
	tu_latch_wait(&fired);
	assert_int_equal(tu_ran(&r), 1);
	assert_true(pthread_equal(r.thread, run.thread));
	tpe_future_release(f);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(b), 0);
	assert_int_equal(tpe_destroy(a), 0);
	tu_saturation_destroy(&sat);
	tu_latch_destroy(&release);
	tu_latch_destroy(&fired);
}

static void
test_future_then_errors(void **state)
{
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct then_rec r = { 0 };
	tpe_future_t *f;

	(void)state;
	assert_int_equal(tpe_future_then(NULL, then_record, &r, NULL),
	    EINVAL);
	assert_int_equal(tpe_submit(pool, tu_nop_call, NULL, &f), 0);
	assert_int_equal(tpe_future_then(f, NULL, &r, NULL), EINVAL);
	assert_int_equal(tpe_future_get(f, -1, NULL), 0);
	assert_int_equal(tu_ran(&r), 0);
	tpe_future_release(f);
	assert_int_equal(tpe_destroy(pool), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_future_submit_get_result),
		cmocka_unit_test(test_future_get_null_result_pointer),
		cmocka_unit_test(test_future_many_results),
		cmocka_unit_test(test_future_timed_get_times_out),
		cmocka_unit_test(test_future_timed_get_huge_timeout),
		cmocka_unit_test(test_future_cancel_before_run),
		cmocka_unit_test(test_future_cancelled_queued_task_is_noop),
		cmocka_unit_test(test_future_cancel_running_is_ebusy),
		cmocka_unit_test(test_future_cancel_done_is_ebusy),
		cmocka_unit_test(test_future_several_waiters_get_value),
		cmocka_unit_test(test_future_several_waiters_get_cancelled),
		cmocka_unit_test(test_future_release_before_completion),
		cmocka_unit_test(test_future_release_while_queued),
		cmocka_unit_test(test_future_release_then_shutdown_now),
		cmocka_unit_test(test_future_null_arguments),
		cmocka_unit_test(test_future_rejection_policies),
		cmocka_unit_test(test_future_custom_handler_completes_later),
		cmocka_unit_test(test_future_cancel_while_handler_keeps_pair),
		cmocka_unit_test(test_future_cancel_run_race),
		cmocka_unit_test(test_future_hooks_never_wrap_cancelled_task),
		cmocka_unit_test(test_future_task_fail),
		cmocka_unit_test(test_future_task_fail_nested_frames),
		cmocka_unit_test(test_future_then_outcomes),
		cmocka_unit_test(test_future_then_order_and_release),
		cmocka_unit_test(test_future_then_races_completion),
		cmocka_unit_test(test_future_then_on_pool),
		cmocka_unit_test(test_future_then_on_discarding_pool),
		cmocka_unit_test(test_future_then_errors),
	};

	tu_time_bound(0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
