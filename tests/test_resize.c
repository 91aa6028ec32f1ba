/* SPDX-License-Identifier: MIT */
/*
 * test_resize.c - dynamic sizing: tpe_set_pool_size, tpe_set_keep_alive,
 * tpe_set_allow_core_timeout, keep-alive expiry, tpe_prestart_core_threads,
 * and a task resizing its own pool.
 * Java behaviours (doc/java-behaviours.md): B 13-17 (pool setters), F 64,
 * 65, G 68-76, 79.
 */
#define _GNU_SOURCE
#include <string.h>

#include "helpers.h"

#define EV_TIMEOUT (10 * TU_S)

static size_t
pool_size(tpe_t *p)
{
	return tu_stats(p).pool_size;
}

/*
 * The pool keeps n threads however long it stays idle: not a wait of some
 * keep-alive periods (a slow machine may not cover them: the check would
 * pass for the wrong reason), but the state that makes it so: n of the
 * pool's threads live, each asleep in a wait without a time-out
 * (tu_tids_wait_untimed). Where the system cannot tell, the lower-bound
 * wait of old.
 */
static void
assert_stays(tpe_t *p, struct tu_tids *t, size_t n)
{
	if (tu_tids_wait_untimed(t, n) < 0) {
		tu_sleep_ns(50 * TU_MS);
	} else {
		assert_true(TU_EVENTUALLY(tu_tids_wait_untimed(t, n) == 1,
		    EV_TIMEOUT));
	}
	assert_int_equal(pool_size(p), n);
}

static void
check_sizes(tpe_t *p, size_t core, size_t max)
{
	struct tpe_stats s = tu_stats(p);

	assert_int_equal(s.core_size, core);
	assert_int_equal(s.max_size, max);
}

/* ---- tpe_set_pool_size: errors and round trips (items 13-16) ------------ */

static void
test_resize_set_pool_size_errors(void **state)
{
	tpe_t *p = tu_pool(2, 3, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);

	(void)state;
	assert_int_equal(tpe_set_pool_size(NULL, 1, 1), EINVAL);
	/* max 0, max below core, "negative" core: both unchanged. */
	assert_int_equal(tpe_set_pool_size(p, 0, 0), EINVAL);
	check_sizes(p, 2, 3);
	assert_int_equal(tpe_set_pool_size(p, 2, 1), EINVAL);
	check_sizes(p, 2, 3);
	assert_int_equal(tpe_set_pool_size(p, 4, 3), EINVAL);
	check_sizes(p, 2, 3);
	assert_int_equal(tpe_set_pool_size(p, (size_t)-1, 3), EINVAL);
	check_sizes(p, 2, 3);
	/* Item 16: a valid change reads back at once. */
	assert_int_equal(tpe_set_pool_size(p, 2, 5), 0);
	check_sizes(p, 2, 5);
	assert_int_equal(tpe_set_pool_size(p, 2, 4), 0);
	check_sizes(p, 2, 4);
	assert_int_equal(tpe_set_pool_size(p, 0, 1), 0);
	check_sizes(p, 0, 1);
	/* Setting sizes starts no thread on a pool without tasks. */
	assert_int_equal(pool_size(p), 0);
	assert_int_equal(tpe_destroy(p), 0);
}

/* Item 14: for s = 1..4, (s, s) works; (s+1, s) and (s, 0) fail and leave
 * (s, s). */
static void
test_resize_set_pool_size_round_trips(void **state)
{
	tpe_t *p = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	size_t s;

	(void)state;
	for (s = 1; s <= 4; s++) {
		assert_int_equal(tpe_set_pool_size(p, s, s), 0);
		check_sizes(p, s, s);
		assert_int_equal(tpe_set_pool_size(p, s + 1, s), EINVAL);
		check_sizes(p, s, s);
		assert_int_equal(tpe_set_pool_size(p, s, s - 1), EINVAL);
		check_sizes(p, s, s);
	}
	/* Shrinking: core first is implied by the single call. */
	assert_int_equal(tpe_set_pool_size(p, 1, 2), 0);
	check_sizes(p, 1, 2);
	/* Setters work after shutdown and after termination, like Java. */
	assert_int_equal(tpe_shutdown(p), 0);
	assert_int_equal(tpe_set_pool_size(p, 2, 3), 0);
	check_sizes(p, 2, 3);
	assert_int_equal(tpe_await_termination(p, -1), 0);
	assert_int_equal(tpe_set_pool_size(p, 1, 1), 0);
	check_sizes(p, 1, 1);
	assert_int_equal(tpe_set_pool_size(p, 2, 1), EINVAL);
	check_sizes(p, 1, 1);
	assert_int_equal(tpe_set_keep_alive(p, TU_S), 0);
	assert_int_equal(tpe_set_allow_core_timeout(p, true), 0);
	assert_int_equal(pool_size(p), 0);
	assert_int_equal(tpe_destroy(p), 0);
}

/* ---- items 71-73, 79: resizing a busy pool, then its keep-alive -------- */

static void
test_resize_config_changes(void **state)
{
	static struct tu_saturation sat, more;
	static int count;
	tpe_t *p = tu_pool_with(&(struct tu_pool_opts){ .core = 3, .max = 9,
	    .keep_alive = 60 * TU_S, .queue = TPE_QUEUE_BOUNDED,
	    .capacity = 9 });
	struct tpe_stats s;
	int64_t t0;
	int i;

	(void)state;
	/* Item 71: 18 blockers = 3 core + 9 queued + 6 non-core. */
	tu_saturate(p, 9, 9, &sat);
	s = tu_stats(p);
	assert_int_equal(s.pool_size, 9);
	assert_int_equal(s.largest_pool_size, 9);
	assert_int_equal(s.active, 9);
	assert_int_equal(s.queued, 9);
	assert_int_equal(s.submitted, 18);
	count = 0;
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), EAGAIN);
	/* Grow max while saturated: new submissions start threads. */
	assert_int_equal(tpe_set_pool_size(p, 3, 12), 0);
	tu_saturate(p, 3, 0, &more);
	s = tu_stats(p);
	assert_int_equal(s.pool_size, 12);
	assert_int_equal(s.largest_pool_size, 12);
	assert_int_equal(s.active, 12);
	assert_int_equal(s.queued, 9);
	assert_int_equal(s.submitted, 21);
	assert_int_equal(s.completed + s.active + s.queued, 21);

	/* Item 72: lower max while all 12 are busy: nobody is disturbed. */
	assert_int_equal(tpe_set_pool_size(p, 3, 6), 0);
	s = tu_stats(p);
	assert_int_equal(s.max_size, 6);
	assert_int_equal(s.pool_size, 12);
	assert_int_equal(s.active, 12);
	/* Item 79: no thread is created while the count is above max. */
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), EAGAIN);
	assert_int_equal(tu_stats(p).pool_size, 12);
	tu_unsaturate(&sat);
	tu_unsaturate(&more);
	/* The surplus exits as tasks finish: 6 threads stay (keep-alive 60 s). */
	assert_true(TU_EVENTUALLY((s = tu_stats(p)).completed == 21 &&
	    s.pool_size == 6, EV_TIMEOUT));
	assert_int_equal(s.largest_pool_size, 12);
	assert_int_equal(s.queued, 0);
	for (i = 0; i < 18; i++)
		assert_int_equal(tu_ran(&sat.b[i]), 1);
	for (i = 0; i < 3; i++)
		assert_int_equal(tu_ran(&more.b[i]), 1);
	assert_true(TU_EVENTUALLY(tu_stats(p).idle == 6, EV_TIMEOUT));

	/* Item 73: a shorter keep-alive re-times the idle waits: down to core. */
	t0 = tu_now_ns();
	assert_int_equal(tpe_set_keep_alive(p, 10 * TU_MS), 0);
	assert_true(TU_EVENTUALLY(pool_size(p) == 3, EV_TIMEOUT));
	assert_true(tu_now_ns() - t0 >= 10 * TU_MS);
	/* Then allow-core-timeout: down to 0. */
	assert_int_equal(tpe_set_allow_core_timeout(p, true), 0);
	assert_true(TU_EVENTUALLY(pool_size(p) == 0, EV_TIMEOUT));
	s = tu_stats(p);
	assert_int_equal(s.largest_pool_size, 12);
	assert_int_equal(s.completed, 21);
	/* The pool still works: a new task starts a thread again. */
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	assert_int_equal(tu_load(&count), 1);
	assert_int_equal(tpe_shutdown(p), 0);
	assert_int_equal(tpe_await_termination(p, -1), 0);
	assert_int_equal(tpe_destroy(p), 0);
	tu_saturation_destroy(&sat);
	tu_saturation_destroy(&more);
}

/* ---- tpe_set_keep_alive / allow-core-timeout errors (items 17, 18) ------ */

static void
test_resize_set_keep_alive_errors(void **state)
{
	tpe_t *p = tu_pool(1, 2, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);

	(void)state;
	assert_int_equal(tpe_set_keep_alive(NULL, TU_S), EINVAL);
	assert_int_equal(tpe_set_allow_core_timeout(NULL, false), EINVAL);
	assert_int_equal(tpe_set_keep_alive(p, -1), EINVAL);
	assert_int_equal(tpe_set_keep_alive(p, INT64_MIN), EINVAL);
	assert_int_equal(tpe_set_keep_alive(p, 0), 0);
	assert_int_equal(tpe_set_allow_core_timeout(p, true), EINVAL);
	assert_int_equal(tpe_set_allow_core_timeout(p, false), 0);
	assert_int_equal(tpe_set_keep_alive(p, 5 * TU_MS), 0);
	assert_int_equal(tpe_set_allow_core_timeout(p, true), 0);
	assert_int_equal(tpe_set_keep_alive(p, 0), EINVAL);
	assert_int_equal(tpe_set_keep_alive(p, -7), EINVAL);
	assert_int_equal(tpe_set_allow_core_timeout(p, true), 0);
	assert_int_equal(tpe_destroy(p), 0);
}

/* The failing setters left keep-alive 10 ms + allow-core-timeout: a core
 * thread times out. */
static void
test_resize_keep_alive_unchanged_after_error(void **state)
{
	static int count;
	tpe_t *p = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);

	(void)state;
	assert_int_equal(tpe_set_keep_alive(p, 10 * TU_MS), 0);
	assert_int_equal(tpe_set_allow_core_timeout(p, true), 0);
	assert_int_equal(tpe_set_keep_alive(p, 0), EINVAL);
	assert_int_equal(tpe_set_keep_alive(p, -1), EINVAL);
	count = 0;
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	assert_true(TU_EVENTUALLY(pool_size(p) == 0, EV_TIMEOUT));
	assert_int_equal(tu_load(&count), 1);
	assert_int_equal(tu_stats(p).largest_pool_size, 1);
	assert_int_equal(tpe_destroy(p), 0);
}

/* ---- items 68, 69: core threads time out only when allowed ------------- */

static void
test_resize_allow_core_timeout_true(void **state)
{
	static int count;
	static struct tu_tids tids = TU_TIDS_INIT;
	tpe_t *p = tu_pool_with(&(struct tu_pool_opts){ .core = 2, .max = 10,
	    .keep_alive = 10 * TU_MS, .allow_core_timeout = true,
	    .queue = TPE_QUEUE_BOUNDED, .capacity = 10,
	    .on_start = tu_tids_hook, .thread_hooks_ctx = &tids });
	int64_t t0;

	(void)state;
	count = 0;
	t0 = tu_now_ns();
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	assert_true(TU_EVENTUALLY(pool_size(p) == 0, EV_TIMEOUT));
	/* The threads waited the keep-alive before leaving. */
	assert_true(tu_now_ns() - t0 >= 10 * TU_MS);
	assert_int_equal(tu_load(&count), 2);
	assert_int_equal(tu_stats(p).largest_pool_size, 2);
	/* Turning it off again at run time keeps new core threads. */
	assert_int_equal(tpe_set_allow_core_timeout(p, false), 0);
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	assert_true(TU_EVENTUALLY(tu_stats(p).completed == 3, EV_TIMEOUT));
	assert_stays(p, &tids, 1);
	assert_int_equal(tpe_destroy(p), 0);
}

static void
test_resize_allow_core_timeout_false(void **state)
{
	static int count;
	static struct tu_tids tids = TU_TIDS_INIT;
	tpe_t *p = tu_pool_with(&(struct tu_pool_opts){ .core = 2, .max = 10,
	    .keep_alive = 10 * TU_MS, .queue = TPE_QUEUE_BOUNDED,
	    .capacity = 10, .on_start = tu_tids_hook,
	    .thread_hooks_ctx = &tids });

	(void)state;
	count = 0;
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	assert_true(TU_EVENTUALLY(tu_stats(p).completed == 2, EV_TIMEOUT));
	assert_stays(p, &tids, 2);
	/* Switching it on at run time: the idle core threads time out. */
	assert_int_equal(tpe_set_allow_core_timeout(p, true), 0);
	assert_true(TU_EVENTUALLY(pool_size(p) == 0, EV_TIMEOUT));
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(tu_load(&count), 2);
}

/* ---- item 70: timed-out threads shrink the pool to core, never below --- */

static void
test_resize_timeout_shrink_to_core(void **state)
{
	static struct tu_saturation sat;
	static struct tu_tids tids = TU_TIDS_INIT;
	tpe_t *p = tu_pool_with(&(struct tu_pool_opts){ .core = 4, .max = 8,
	    .keep_alive = 10 * TU_MS, .queue = TPE_QUEUE_HANDOFF,
	    .on_start = tu_tids_hook, .thread_hooks_ctx = &tids });
	int round;

	(void)state;
	for (round = 0; round < 2; round++) {
		tu_saturate(p, 8, 0, &sat);
		assert_int_equal(pool_size(p), 8);
		tu_unsaturate(&sat);
		assert_true(TU_EVENTUALLY(pool_size(p) <= 4, EV_TIMEOUT));
		assert_int_equal(pool_size(p), 4);
		/* And it stays exactly core. */
		assert_stays(p, &tids, 4);
		assert_true(TU_EVENTUALLY(tu_stats(p).idle == 4, EV_TIMEOUT));
		tu_saturation_destroy(&sat);
	}
	assert_true(TU_EVENTUALLY(tu_stats(p).completed == 16, EV_TIMEOUT));
	assert_int_equal(tpe_destroy(p), 0);
}

/* ---- item 75: raising core with queued tasks starts workers ------------- */

static void
test_resize_raise_core_starts_workers(void **state)
{
	static struct tu_latch started0, started1, release;
	static struct tu_blocker b[6];
	tpe_t *p = tu_pool(1, 8, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct tpe_stats s;
	int i;

	(void)state;
	tu_latch_init(&started0, 1);
	tu_latch_init(&started1, 3);
	tu_latch_init(&release, 1);
	b[0] = (struct tu_blocker){ &started0, &release, NULL, 0 };
	for (i = 1; i < 6; i++)
		b[i] = (struct tu_blocker){ &started1, &release, NULL, 0 };
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &b[0]), 0);
	tu_latch_wait(&started0);
	for (i = 1; i < 4; i++)
		assert_int_equal(tpe_execute(p, tu_blocker_fn, &b[i]), 0);
	s = tu_stats(p);
	assert_int_equal(s.pool_size, 1);
	assert_int_equal(s.queued, 3);
	/* core 1 -> 6 with 3 queued: min(6 - 1, 3) = 3 new workers. */
	assert_int_equal(tpe_set_pool_size(p, 6, 8), 0);
	tu_latch_wait(&started1);
	s = tu_stats(p);
	assert_int_equal(s.pool_size, 4);
	assert_int_equal(s.queued, 0);
	assert_int_equal(s.active, 4);
	/* With an empty queue, raising core starts none. */
	assert_int_equal(tpe_set_pool_size(p, 8, 8), 0);
	assert_int_equal(pool_size(p), 4);
	/* Below the new core, a task starts a thread (step 1). */
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &b[4]), 0);
	assert_int_equal(pool_size(p), 5);
	tu_latch_count_down(&release);
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	assert_int_equal(pool_size(p), 5);
	assert_int_equal(tu_stats(p).largest_pool_size, 5);
	assert_int_equal(tpe_destroy(p), 0);
	for (i = 0; i < 5; i++)
		assert_int_equal(tu_ran(&b[i]), 1);
	tu_latch_destroy(&started0);
	tu_latch_destroy(&started1);
	tu_latch_destroy(&release);
}

/* Item 75, second half: lowering core lets idle workers above it time out. */
static void
test_resize_lower_core_idle_workers_exit(void **state)
{
	static struct tu_saturation sat;
	static struct tu_tids tids = TU_TIDS_INIT;
	tpe_t *p = tu_pool_with(&(struct tu_pool_opts){ .core = 4, .max = 4,
	    .keep_alive = 10 * TU_MS, .on_start = tu_tids_hook,
	    .thread_hooks_ctx = &tids });

	(void)state;
	tu_saturate(p, 4, 0, &sat);
	tu_unsaturate(&sat);
	assert_true(TU_EVENTUALLY(tu_stats(p).idle == 4, EV_TIMEOUT));
	assert_stays(p, &tids, 4); /* core threads: no keep-alive expiry */
	assert_int_equal(tpe_set_pool_size(p, 1, 4), 0);
	assert_true(TU_EVENTUALLY(pool_size(p) == 1, EV_TIMEOUT));
	assert_stays(p, &tids, 1);
	assert_int_equal(tpe_destroy(p), 0);
	tu_saturation_destroy(&sat);
}

/* Lowering max below the live count: idle surplus workers exit now. */
static void
test_resize_lower_max_idle_surplus_exits(void **state)
{
	static struct tu_saturation sat;
	tpe_t *p = tu_pool(4, 4, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);

	(void)state;
	tu_saturate(p, 4, 0, &sat);
	tu_unsaturate(&sat);
	assert_true(TU_EVENTUALLY(tu_stats(p).idle == 4, EV_TIMEOUT));
	/* Keep-alive is 60 s: only the lowered max makes them leave. */
	assert_int_equal(tpe_set_pool_size(p, 2, 2), 0);
	assert_true(TU_EVENTUALLY(pool_size(p) == 2, EV_TIMEOUT));
	assert_int_equal(tu_stats(p).largest_pool_size, 4);
	assert_int_equal(tpe_destroy(p), 0);
	tu_saturation_destroy(&sat);
}

/* ---- item 76: the last worker never leaves a non-empty queue ------------- */

static void
test_resize_last_worker_drains_queue(void **state)
{
	static struct tu_saturation sat;
	static int count;
	tpe_t *p = tu_pool_with(&(struct tu_pool_opts){ .core = 1, .max = 1,
	    .keep_alive = 1, .allow_core_timeout = true });

	(void)state;
	tu_saturate(p, 1, 0, &sat);
	count = 0;
	tu_fill_queue(p, 100, tu_count_fn, &count, 0);
	tu_unsaturate(&sat);
	/* Every queued task runs although the worker may time out any time the
	 * queue is empty. */
	assert_true(TU_EVENTUALLY(tu_load(&count) == 100, EV_TIMEOUT));
	assert_true(TU_EVENTUALLY(pool_size(p) == 0, EV_TIMEOUT));
	assert_int_equal(tu_stats(p).completed, 101);
	assert_int_equal(tpe_destroy(p), 0);
	tu_saturation_destroy(&sat);
}

/* ---- items 64, 65: prestarting starts the missing core threads --------- */

static void
test_resize_prestart_core_threads(void **state)
{
	static int count;
	tpe_t *p = tu_pool(2, 6, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct tpe_stats s;
	size_t n;

	(void)state;
	assert_int_equal(tpe_prestart_core_threads(NULL, &n), EINVAL);
	n = 99;
	assert_int_equal(tpe_prestart_core_threads(p, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(pool_size(p), 2);
	n = 99;
	assert_int_equal(tpe_prestart_core_threads(p, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(pool_size(p), 2);
	/* Prestarted workers wait for work and take it: no new thread. */
	assert_true(TU_EVENTUALLY((s = tu_stats(p)).idle == 2, EV_TIMEOUT));
	assert_int_equal(s.active, 0);
	count = 0;
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	assert_int_equal(pool_size(p), 2);
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	assert_int_equal(tu_load(&count), 1);
	/* Raise core: 2 more. */
	assert_int_equal(tpe_set_pool_size(p, 4, 6), 0);
	n = 99;
	assert_int_equal(tpe_prestart_core_threads(p, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(pool_size(p), 4);
	assert_int_equal(tpe_prestart_core_threads(p, NULL), 0);
	assert_int_equal(pool_size(p), 4);
	n = 99;
	assert_int_equal(tpe_prestart_core_threads(p, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(tu_stats(p).largest_pool_size, 4);
	/* After shutdown: ECANCELED. */
	assert_int_equal(tpe_shutdown(p), 0);
	assert_int_equal(tpe_prestart_core_threads(p, &n), ECANCELED);
	assert_int_equal(tpe_prestart_core_threads(p, NULL), ECANCELED);
	assert_int_equal(tpe_destroy(p), 0);

	/* core 0: starts nothing. */
	p = tu_pool(0, 3, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	n = 99;
	assert_int_equal(tpe_prestart_core_threads(p, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(pool_size(p), 0);
	assert_int_equal(tpe_destroy(p), 0);
}

/* Prestart with some core threads already alive starts only the rest. */
static void
test_resize_prestart_partial(void **state)
{
	static struct tu_saturation sat;
	tpe_t *p = tu_pool(3, 3, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	size_t n = 99;

	(void)state;
	tu_saturate(p, 1, 0, &sat);
	assert_int_equal(tpe_prestart_core_threads(p, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(pool_size(p), 3);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	tu_saturation_destroy(&sat);
}

/* ---- item 74: a task resizes its own pool (SelfInterrupt) ---------------- */

enum { SELF_N = 8 };

struct self_resize {
	tpe_t *pool;
	struct tu_latch all_started, release, done;
	int rc[SELF_N][2];
	int next;
};

static void
self_resize_fn(void *arg)
{
	struct self_resize *s = arg;
	int i = __atomic_fetch_add(&s->next, 1, __ATOMIC_SEQ_CST);

	tu_latch_count_down(&s->all_started);
	tu_latch_wait(&s->all_started);
	s->rc[i][0] = tpe_set_pool_size(s->pool, SELF_N, SELF_N);
	s->rc[i][1] = tpe_set_pool_size(s->pool, 1, SELF_N);
	tu_latch_count_down(&s->done);
	tu_latch_wait(&s->release);
}

static void
test_resize_task_resizes_own_pool(void **state)
{
	static struct self_resize s;
	tpe_t *p = tu_pool_with(&(struct tu_pool_opts){ .core = SELF_N,
	    .max = SELF_N, .keep_alive = 1, .queue = TPE_QUEUE_HANDOFF });
	struct tpe_stats st;
	int i;

	(void)state;
	memset(&s, 0, sizeof(s));
	s.pool = p;
	tu_latch_init(&s.all_started, SELF_N);
	tu_latch_init(&s.release, 1);
	tu_latch_init(&s.done, SELF_N);
	for (i = 0; i < SELF_N; i++)
		assert_int_equal(tpe_execute(p, self_resize_fn, &s), 0);
	tu_latch_wait(&s.done);
	for (i = 0; i < SELF_N; i++) {
		assert_int_equal(s.rc[i][0], 0);
		assert_int_equal(s.rc[i][1], 0);
	}
	/* The busy workers were not disturbed. */
	st = tu_stats(p);
	assert_int_equal(st.core_size, 1);
	assert_int_equal(st.max_size, SELF_N);
	assert_int_equal(st.pool_size, SELF_N);
	assert_int_equal(st.active, SELF_N);
	tu_latch_count_down(&s.release);
	/* Then the non-core workers time out (keep-alive 1 ns): core 1 stays. */
	assert_true(TU_EVENTUALLY((st = tu_stats(p)).pool_size == 1 &&
	    st.completed == SELF_N, EV_TIMEOUT));
	assert_int_equal(tpe_destroy(p), 0);
	tu_latch_destroy(&s.all_started);
	tu_latch_destroy(&s.release);
	tu_latch_destroy(&s.done);
}

/* ---- lowering max below the live workers, with tasks queued ----------- */

/*
 * Java lets a worker above max leave after its task whenever another
 * worker remains, so the queued tasks run on the new, smaller pool. The
 * four workers are busy on a gate, six tasks queue behind them, max goes
 * to 1; from then on each queued task sees one worker in the statistics
 * and runs alone. (Before the fix, all four workers stayed until the queue
 * was empty: the first queued task saw pool_size 4.)
 */
struct shrink_probe {
	int running;        /* atomic: queued tasks running now */
	int most_running;   /* atomic: the most at once */
	int most_size;      /* atomic: the largest pool_size a task saw */
	tpe_t *pool;
	struct tu_latch *done;
};

static void
atomic_max(int *p, int v)
{
	int cur = __atomic_load_n(p, __ATOMIC_SEQ_CST);

	while (v > cur && !__atomic_compare_exchange_n(p, &cur, v, false,
	    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		;
}

static void
shrink_probe_fn(void *arg)
{
	struct shrink_probe *p = arg;
	int now = __atomic_add_fetch(&p->running, 1, __ATOMIC_SEQ_CST);

	atomic_max(&p->most_running, now);
	atomic_max(&p->most_size, (int)tu_stats(p->pool).pool_size);
	__atomic_sub_fetch(&p->running, 1, __ATOMIC_SEQ_CST);
	tu_latch_count_down(p->done);
}

static void
test_resize_lower_max_with_queued_tasks(void **state)
{
	tpe_t *pool = tu_pool(4, 4, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct tu_saturation sat;
	struct tu_latch done;
	struct shrink_probe probe = { 0, 0, 0, pool, &done };

	(void)state;
	tu_latch_init(&done, 6);
	tu_saturate(pool, 4, 0, &sat);
	tu_fill_queue(pool, 6, shrink_probe_fn, &probe, 0);
	assert_int_equal(tpe_set_pool_size(pool, 1, 1), 0);
	tu_unsaturate(&sat);
	tu_latch_wait(&done);
	assert_int_equal(tu_load(&probe.most_size), 1);
	assert_int_equal(tu_load(&probe.most_running), 1);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_saturation_destroy(&sat);
	tu_latch_destroy(&done);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_resize_set_pool_size_errors),
		cmocka_unit_test(test_resize_set_pool_size_round_trips),
		cmocka_unit_test(test_resize_config_changes),
		cmocka_unit_test(test_resize_set_keep_alive_errors),
		cmocka_unit_test(test_resize_keep_alive_unchanged_after_error),
		cmocka_unit_test(test_resize_allow_core_timeout_true),
		cmocka_unit_test(test_resize_allow_core_timeout_false),
		cmocka_unit_test(test_resize_timeout_shrink_to_core),
		cmocka_unit_test(test_resize_raise_core_starts_workers),
		cmocka_unit_test(test_resize_lower_core_idle_workers_exit),
		cmocka_unit_test(test_resize_lower_max_idle_surplus_exits),
		cmocka_unit_test(test_resize_last_worker_drains_queue),
		cmocka_unit_test(test_resize_prestart_core_threads),
		cmocka_unit_test(test_resize_prestart_partial),
		cmocka_unit_test(test_resize_task_resizes_own_pool),
		cmocka_unit_test(test_resize_lower_max_with_queued_tasks),
	};

	tu_time_bound(0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
