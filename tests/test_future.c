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
	};

	tu_time_bound(0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
