/* SPDX-License-Identifier: MIT */
/*
 * test_metrics.c - runtime metrics (tpe_attr_set_metrics(3),
 * tpe_get_metrics(3), tpe_histogram_percentile(3),
 * tpe_metrics_write_prometheus(3)): exact counts once the pool is idle,
 * histogram counts that match the tasks timed, percentiles within 3% of
 * the values recorded, counts that survive resizing, shutdown-now and
 * fork, every documented error, and the Prometheus text.
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/sized.h"
#include "base/tick.h"
#include "metrics/metrics.h"
#define TU_FAULT_INJECTION
#include "helpers.h"

/* A queue kind of each engine: the locked one and the stacks one. */
static const enum tpe_queue_kind both_engines[] = { TPE_QUEUE_UNBOUNDED,
    TPE_QUEUE_PER_WORKER };

/* A pool with metrics (flags) and the given knobs. */
static tpe_t *
metrics_pool(const struct tu_pool_opts *o, unsigned flags)
{
	tpe_attr_t *a = tu_attr_with(o);
	tpe_t *p;

	assert_int_equal(tpe_attr_set_metrics(a, flags), 0);
	assert_int_equal(tpe_create(&p, a), 0);
	tpe_attr_destroy(a);
	return p;
}

/* The pool's metrics; heap, the struct is large. Asserts success. */
static struct tpe_metrics *
metrics_of(const tpe_t *pool)
{
	struct tpe_metrics *m = malloc(sizeof(*m));

	assert_non_null(m);
	assert_int_equal(tpe_get_metrics(pool, m, sizeof(*m)), 0);
	return m;
}

/* Whether one read agrees with itself: each histogram's buckets add up to
 * its count, both counts are tasks_timed, no more than tasks_run, and no
 * more threads retired than started. */
static bool
consistent(const struct tpe_metrics *m)
{
	uint64_t q = 0, r = 0;
	size_t i;

	for (i = 0; i < TPE_HISTOGRAM_BUCKETS; i++) {
		q += m->queue_wait.buckets[i];
		r += m->run_time.buckets[i];
	}
	return q == m->queue_wait.count && r == m->run_time.count &&
	    m->queue_wait.count == m->tasks_timed &&
	    m->run_time.count == m->tasks_timed &&
	    m->tasks_timed <= m->tasks_run &&
	    m->threads_retired <= m->threads_started;
}

/* One read agrees with itself (consistent()), or the test fails with the
 * counts. */
static void
assert_consistent(const struct tpe_metrics *m)
{
	if (!consistent(m))
		fail_msg("one read apart: tasks_run %llu tasks_timed %llu "
		    "queue_wait %llu run_time %llu started %llu retired %llu",
		    (unsigned long long)m->tasks_run,
		    (unsigned long long)m->tasks_timed,
		    (unsigned long long)m->queue_wait.count,
		    (unsigned long long)m->run_time.count,
		    (unsigned long long)m->threads_started,
		    (unsigned long long)m->threads_retired);
}

/* ---- the attribute and the errors -------------------------------------- */

static void
test_metrics_attr(void **state)
{
	tpe_attr_t *a;

	(void)state;
	assert_int_equal(tpe_attr_create(&a), 0);
	assert_int_equal(tpe_attr_set_metrics(NULL, TPE_METRICS_ON), EINVAL);
	assert_int_equal(tpe_attr_set_metrics(a, 0x4), EINVAL);
	assert_int_equal(tpe_attr_set_metrics(a, TPE_METRICS_TIME_ALL),
	    EINVAL);
	assert_int_equal(tpe_attr_set_metrics(a, TPE_METRICS_ON), 0);
	assert_int_equal(tpe_attr_set_metrics(a,
	    TPE_METRICS_ON | TPE_METRICS_TIME_ALL), 0);
	assert_int_equal(tpe_attr_set_metrics(a, 0), 0);
	tpe_attr_destroy(a);
}

static void
test_metrics_errors(void **state)
{
	struct tpe_metrics *m = calloc(1, sizeof(*m));
	tpe_t *off, *on;

	(void)state;
	assert_non_null(m);
	off = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	on = metrics_pool(&(struct tu_pool_opts){ .core = 1, .max = 1 },
	    TPE_METRICS_ON);
	/* Off by default. */
	assert_int_equal(tpe_get_metrics(off, m, sizeof(*m)), ENOTSUP);
	assert_int_equal(tpe_metrics_reset(off), ENOTSUP);
	assert_int_equal(tpe_get_metrics(NULL, m, sizeof(*m)), EINVAL);
	assert_int_equal(tpe_get_metrics(on, NULL, sizeof(*m)), EINVAL);
	assert_int_equal(tpe_get_metrics(on, m, sizeof(size_t) - 1), EINVAL);
	assert_int_equal(tpe_get_metrics(on, m, 0), EINVAL);
	assert_int_equal(tpe_metrics_reset(NULL), EINVAL);
	assert_int_equal(tpe_get_metrics(on, m, sizeof(*m)), 0);
	assert_int_equal(m->timing_period, 32);
	assert_int_equal(tpe_metrics_reset(on), 0);
	assert_int_equal(tpe_destroy(off), 0);
	assert_int_equal(tpe_destroy(on), 0);
	free(m);
}

/* ---- exact counts ------------------------------------------------------ */

#define N_TASKS 2000

static void
exact_counts(enum tpe_queue_kind kind, size_t cap, size_t workers)
{
	int count = 0;
	struct tpe_metrics *m;
	struct tpe_stats st;
	tpe_future_t *f;
	tpe_t *pool;
	int i;

	pool = metrics_pool(&(struct tu_pool_opts){ .core = workers,
	    .max = workers, .queue = kind, .capacity = cap },
	    TPE_METRICS_ON | TPE_METRICS_TIME_ALL);
	for (i = 0; i < N_TASKS; i++)
		assert_int_equal(tpe_execute(pool, tu_count_fn, &count), 0);
	assert_int_equal(tpe_submit(pool, tu_count_call, &count, &f), 0);
	assert_int_equal(tpe_wait_idle(pool, -1), 0);
	m = metrics_of(pool);
	st = tu_stats(pool);
	assert_int_equal(tu_load(&count), N_TASKS + 1);
	assert_int_equal(m->tasks_run, N_TASKS + 1);
	assert_int_equal(m->tasks_run, st.completed);
	assert_int_equal(m->tasks_timed, N_TASKS + 1);
	assert_int_equal(m->timing_period, 1);
	assert_consistent(m);
	assert_int_equal(m->threads_started, st.largest_pool_size);
	assert_int_equal(m->threads_retired, 0);
	assert_int_equal(m->threads_failed, 0);
	assert_int_equal(m->pool_size, st.pool_size);
	assert_int_equal(m->queued, 0);
	assert_int_equal(m->rejected_abort + m->rejected_shutdown, 0);
	if (kind == TPE_QUEUE_PER_WORKER) {
		/* A stolen batch may be stolen again (a thief publishes
		 * its rest too), so stolen_tasks has no bound here. */
		assert_true(m->batches >= 1);
		assert_true(m->steals <= m->batches);
	} else {
		assert_int_equal(m->batches, 0);
	}
	tpe_future_release(f);
	free(m);
	/* A second round: the next read holds both (each read moves the
	 * timed tasks out of the blocks: none twice, none lost). */
	for (i = 0; i < N_TASKS; i++)
		assert_int_equal(tpe_execute(pool, tu_count_fn, &count), 0);
	assert_int_equal(tpe_wait_idle(pool, -1), 0);
	m = metrics_of(pool);
	assert_int_equal(m->tasks_run, 2 * N_TASKS + 1);
	assert_int_equal(m->tasks_timed, 2 * N_TASKS + 1);
	assert_consistent(m);
	assert_int_equal(tpe_destroy(pool), 0);
	free(m);
}

static void
test_metrics_exact_unbounded(void **state)
{
	(void)state;
	exact_counts(TPE_QUEUE_UNBOUNDED, 0, 2);
}

static void
test_metrics_exact_bounded(void **state)
{
	(void)state;
	exact_counts(TPE_QUEUE_BOUNDED, N_TASKS + 8, 2);
}

static void
test_metrics_exact_per_worker(void **state)
{
	(void)state;
	exact_counts(TPE_QUEUE_PER_WORKER, 0, 2);
}

/* Sampled: every task counted, 1 in 32 of this thread's timed. */
static void
test_metrics_sampled(void **state)
{
	size_t k;

	(void)state;
	for (k = 0; k < 2; k++) {
		struct tpe_metrics *m;
		int count = 0, i;
		tpe_t *pool;

		pool = metrics_pool(&(struct tu_pool_opts){ .core = 2,
		    .max = 2, .queue = both_engines[k] }, TPE_METRICS_ON);
		for (i = 0; i < 32 * 25; i++)
			assert_int_equal(tpe_execute(pool, tu_count_fn,
			    &count), 0);
		assert_int_equal(tpe_wait_idle(pool, -1), 0);
		m = metrics_of(pool);
		assert_int_equal(m->tasks_run, 800);
		assert_int_equal(m->tasks_timed, 25);
		assert_int_equal(m->timing_period, 32);
		assert_consistent(m);
		assert_int_equal(tpe_destroy(pool), 0);
		free(m);
	}
}

static void
sleep_fn(void *arg)
{
	tu_sleep_ns(*(int64_t *)arg);
}

/* Real delays: lower bounds only. A task that sleeps runs at least that
 * long; a task queued behind a gate that opens after a sleep waits at
 * least that long. */
static void
test_metrics_real_delays(void **state)
{
	int64_t ns = 3 * TU_MS;
	struct tu_latch started, release;
	struct tu_blocker b = { &started, &release, NULL, 0 };
	struct tpe_metrics *m;
	uint64_t v;
	tpe_t *pool;
	int count = 0;

	(void)state;
	tu_latch_init(&started, 1);
	tu_latch_init(&release, 1);
	pool = metrics_pool(&(struct tu_pool_opts){ .core = 1, .max = 1 },
	    TPE_METRICS_ON | TPE_METRICS_TIME_ALL);
	assert_int_equal(tpe_execute(pool, tu_blocker_fn, &b), 0);
	tu_latch_wait(&started);
	/* Queued behind the blocker, which the gate holds for ns. */
	assert_int_equal(tpe_execute(pool, tu_count_fn, &count), 0);
	tu_sleep_ns(ns);
	tu_latch_count_down(&release);
	assert_int_equal(tpe_execute(pool, sleep_fn, &ns), 0);
	assert_int_equal(tpe_wait_idle(pool, -1), 0);
	m = metrics_of(pool);
	assert_int_equal(m->run_time.count, 3);
	assert_int_equal(tpe_histogram_percentile(&m->run_time, 100, &v), 0);
	assert_true(v >= (uint64_t)ns * 97 / 100);
	assert_true(m->run_time.sum_ns >= 2 * (uint64_t)ns);
	assert_int_equal(tpe_histogram_percentile(&m->queue_wait, 100, &v),
	    0);
	assert_true(v >= (uint64_t)ns * 97 / 100);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
	free(m);
}

/*
 * The task clock (base/tick.h) against CLOCK_MONOTONIC over 20 ms: the TSC
 * where this machine allows it, then the fallback. The ticks are read
 * inside the monotonic interval, so their span is at most that interval
 * (plus the calibration's error) and, unless a preemption came between
 * two reads, within 1% of it: a preempted try is tried again, up to 5.
 */
static bool
clock_within(void)
{
	int64_t ref, n0, n1, k0, k1;
	uint64_t ns;

	n0 = tpe__now_ns();
	k0 = tpe__tick_now();
	tu_sleep_ns(20 * TU_MS);
	k1 = tpe__tick_now();
	n1 = tpe__now_ns();
	ref = n1 - n0;
	ns = tpe__tick_to_ns(k1 - k0);
	return ns <= (uint64_t)(ref + ref / 1000) &&
	    ns >= (uint64_t)(ref - ref / 100);
}

static void
test_metrics_task_clock(void **state)
{
	int pass, tries;

	(void)state;
	for (pass = 0; pass < 2; pass++) {
		tpe__tick_select(pass == 0);
		print_message("task clock: %s\n",
		    tpe__tick_tsc ? "TSC" : "CLOCK_MONOTONIC");
		assert_true(pass == 0 || !tpe__tick_tsc);
		for (tries = 0; !clock_within(); tries++)
			assert_true(tries < 5);
		assert_int_equal(tpe__tick_to_ns(-1), 0);
		assert_int_equal(tpe__tick_to_ns(0), 0);
	}
	tpe__tick_select(true);
}

/* ---- the histogram helpers --------------------------------------------- */

static void
assert_within_3pct(uint64_t got, uint64_t want)
{
	double err = fabs((double)got - (double)want) / (double)want;

	if (err > 0.03)
		fail_msg("%llu is not within 3%% of %llu",
		    (unsigned long long)got, (unsigned long long)want);
}

static void
test_metrics_percentiles(void **state)
{
	struct tpe_histogram *h = calloc(1, sizeof(*h));
	uint64_t v, sum = 0;
	double mean;
	int i;

	(void)state;
	assert_non_null(h);
	/* One value at a time, 100 ns to 100 s: every percentile is it. */
	for (v = 100; v <= UINT64_C(100000000000); v = v * 13 / 10) {
		uint64_t got;

		memset(h, 0, sizeof(*h));
		assert_int_equal(tpe_histogram_record(h, v), 0);
		assert_int_equal(tpe_histogram_percentile(h, 50, &got), 0);
		assert_within_3pct(got, v);
		assert_int_equal(tpe_histogram_percentile(h, 0, &got), 0);
		assert_within_3pct(got, v);
		assert_int_equal(tpe_histogram_percentile(h, 100, &got), 0);
		assert_within_3pct(got, v);
	}
	/* 1 .. 10000 us, one each: the p-th percentile is p * 100 us. */
	memset(h, 0, sizeof(*h));
	for (i = 1; i <= 10000; i++) {
		assert_int_equal(tpe_histogram_record(h, (uint64_t)i * 1000),
		    0);
		sum += (uint64_t)i * 1000;
	}
	assert_int_equal(h->count, 10000);
	assert_int_equal(h->sum_ns, sum);
	for (i = 1; i <= 100; i++) {
		assert_int_equal(tpe_histogram_percentile(h, i, &v), 0);
		assert_within_3pct(v, (uint64_t)i * 100 * 1000);
	}
	assert_int_equal(tpe_histogram_percentile(h, 99.9, &v), 0);
	assert_within_3pct(v, 9990 * 1000);
	assert_int_equal(tpe_histogram_mean(h, &mean), 0);
	assert_true(fabs(mean - (double)sum / 10000.0) < 1e-6 * mean);
	/* Errors. */
	assert_int_equal(tpe_histogram_percentile(NULL, 50, &v), EINVAL);
	assert_int_equal(tpe_histogram_percentile(h, 50, NULL), EINVAL);
	assert_int_equal(tpe_histogram_percentile(h, -1, &v), EINVAL);
	assert_int_equal(tpe_histogram_percentile(h, 100.5, &v), EINVAL);
	assert_int_equal(tpe_histogram_percentile(h, NAN, &v), EINVAL);
	assert_int_equal(tpe_histogram_mean(NULL, &mean), EINVAL);
	assert_int_equal(tpe_histogram_mean(h, NULL), EINVAL);
	assert_int_equal(tpe_histogram_record(NULL, 1), EINVAL);
	memset(h, 0, sizeof(*h));
	assert_int_equal(tpe_histogram_percentile(h, 50, &v), ENOENT);
	assert_int_equal(tpe_histogram_mean(h, &mean), ENOENT);
	free(h);
}

/* Buckets: increasing lower bounds, each value in the bucket whose range
 * holds it, widths at most 1/32 of the lower bound. */
static void
test_metrics_buckets(void **state)
{
	struct tpe_histogram *h = calloc(1, sizeof(*h));
	size_t i, j;
	uint64_t v;

	(void)state;
	assert_non_null(h);
	assert_int_equal(tpe_histogram_bucket_lower(0), 0);
	assert_int_equal(tpe_histogram_bucket_lower(TPE_HISTOGRAM_BUCKETS),
	    UINT64_MAX);
	for (i = 1; i < TPE_HISTOGRAM_BUCKETS; i++) {
		uint64_t lo = tpe_histogram_bucket_lower(i);
		uint64_t prev = tpe_histogram_bucket_lower(i - 1);

		assert_true(lo > prev);
		assert_true(prev < 64 || (lo - prev) * 32 <= prev);
	}
	/* Values at, just below and just above each lower bound. */
	for (i = 1; i < TPE_HISTOGRAM_BUCKETS; i++) {
		uint64_t lo = tpe_histogram_bucket_lower(i);
		uint64_t probe[3] = { lo - 1, lo, lo + 1 };
		size_t want[3] = { i - 1, i, i };

		if (i + 1 < TPE_HISTOGRAM_BUCKETS &&
		    tpe_histogram_bucket_lower(i + 1) == lo + 1)
			want[2] = i + 1;
		for (j = 0; j < 3; j++) {
			memset(h, 0, sizeof(*h));
			tpe_histogram_record(h, probe[j]);
			assert_int_equal(h->buckets[want[j]], 1);
		}
	}
	/* Beyond the top: the last bucket. */
	memset(h, 0, sizeof(*h));
	v = UINT64_MAX;
	tpe_histogram_record(h, v);
	assert_int_equal(h->buckets[TPE_HISTOGRAM_BUCKETS - 1], 1);
	free(h);
}

/* The top of the range: 2^38 ns and above count in the last bucket, and
 * nothing is written past it. */
static void
test_metrics_bucket_top(void **state)
{
	struct {
		struct tpe_histogram h;
		uint64_t guard[4];
	} *g = calloc(1, sizeof(*g));
	static const uint64_t top = UINT64_C(1) << 38;
	const size_t last = TPE_HISTOGRAM_BUCKETS - 1;
	size_t i;

	(void)state;
	assert_non_null(g);
	assert_int_equal(tpe__hist_index(top - 1), last);
	assert_int_equal(tpe__hist_index(top), last);
	assert_int_equal(tpe__hist_index(top + 1), last);
	assert_int_equal(tpe__hist_index(UINT64_MAX), last);
	assert_int_equal(tpe_histogram_record(&g->h, top - 1), 0);
	assert_int_equal(tpe_histogram_record(&g->h, top), 0);
	assert_int_equal(tpe_histogram_record(&g->h, top + 1), 0);
	assert_int_equal(g->h.buckets[last], 3);
	assert_int_equal(g->h.count, 3);
	for (i = 0; i < sizeof(g->guard) / sizeof(g->guard[0]); i++)
		assert_int_equal(g->guard[i], 0);
	free(g);
}

/* The percentile is the value at rank ceil(p * count / 100): p75 of
 * {1 us, 1 s} is 1 s, p50 is 1 us. */
static void
test_metrics_percentile_rank(void **state)
{
	static const struct {
		double p;
		uint64_t want;
	} two[] = { { 0, 1000 }, { 50, 1000 }, { 50.001, 1000000000 },
	    { 75, 1000000000 }, { 100, 1000000000 } },
	four[] = { { 25, 1000 }, { 25.01, 2000 }, { 50, 2000 },
	    { 75, 3000 }, { 75.01, 4000 }, { 100, 4000 } };
	struct tpe_histogram *h = calloc(1, sizeof(*h));
	uint64_t v;
	size_t i;

	(void)state;
	assert_non_null(h);
	assert_int_equal(tpe_histogram_record(h, 1000), 0);
	assert_int_equal(tpe_histogram_record(h, 1000000000), 0);
	for (i = 0; i < sizeof(two) / sizeof(two[0]); i++) {
		assert_int_equal(tpe_histogram_percentile(h, two[i].p, &v), 0);
		assert_within_3pct(v, two[i].want);
	}
	memset(h, 0, sizeof(*h));
	for (i = 1; i <= 4; i++)
		assert_int_equal(tpe_histogram_record(h, i * 1000), 0);
	for (i = 0; i < sizeof(four) / sizeof(four[0]); i++) {
		assert_int_equal(tpe_histogram_percentile(h, four[i].p, &v),
		    0);
		assert_within_3pct(v, four[i].want);
	}
	free(h);
}

/* ---- reset ------------------------------------------------------------- */

static void
test_metrics_reset(void **state)
{
	struct tpe_metrics *m;
	int count = 0, i;
	tpe_t *pool;

	(void)state;
	pool = metrics_pool(&(struct tu_pool_opts){ .core = 2, .max = 2 },
	    TPE_METRICS_ON | TPE_METRICS_TIME_ALL);
	for (i = 0; i < 100; i++)
		assert_int_equal(tpe_execute(pool, tu_count_fn, &count), 0);
	assert_int_equal(tpe_wait_idle(pool, -1), 0);
	assert_int_equal(tpe_metrics_reset(pool), 0);
	m = metrics_of(pool);
	assert_int_equal(m->tasks_run, 0);
	assert_int_equal(m->run_time.count, 0);
	/* The two threads alive count as started. */
	assert_int_equal(m->threads_started, 2);
	assert_int_equal(m->threads_retired, 0);
	assert_int_equal(m->pool_size, 2); /* gauges are not reset */
	free(m);
	for (i = 0; i < 30; i++)
		assert_int_equal(tpe_execute(pool, tu_count_fn, &count), 0);
	assert_int_equal(tpe_wait_idle(pool, -1), 0);
	/* A second reset moves the baseline again. */
	m = metrics_of(pool);
	assert_int_equal(m->tasks_run, 30);
	assert_consistent(m);
	assert_int_equal(m->run_time.count, 30);
	free(m);
	assert_int_equal(tpe_metrics_reset(pool), 0);
	m = metrics_of(pool);
	assert_int_equal(m->tasks_run, 0);
	free(m);
	assert_int_equal(tpe_destroy(pool), 0);
}

/* Every count and every pool-wide counter, white-box: a reset takes each
 * one back to 0 (threads_started to the threads alive: the man page), and
 * counts on from there. */
static void
test_metrics_reset_every_count(void **state)
{
	struct tpe_metrics *m = calloc(1, sizeof(*m));
	struct tpe__metrics_worker *w;
	struct tpe__metrics *mm;
	uint64_t *got[TPE__M_COUNT];
	size_t pass;
	int c, i;

	(void)state;
	assert_non_null(m);
	assert_int_equal(tpe__metrics_create(&mm, TPE_METRICS_ON), 0);
	w = tpe__metrics_worker_get_locked(mm);
	assert_non_null(w);
	got[TPE__M_RESERVE_HIT] = &m->reserve_hits;
	got[TPE__M_RESERVE_MISS] = &m->reserve_misses;
	got[TPE__M_REJECT_ABORT] = &m->rejected_abort;
	got[TPE__M_REJECT_CALLER_RUNS] = &m->rejected_caller_runs;
	got[TPE__M_REJECT_DISCARD] = &m->rejected_discard;
	got[TPE__M_REJECT_DISCARD_OLDEST] = &m->rejected_discard_oldest;
	got[TPE__M_REJECT_HANDLER] = &m->rejected_handler;
	got[TPE__M_REJECT_SHUTDOWN] = &m->rejected_shutdown;
	got[TPE__M_THREAD_STARTED] = &m->threads_started;
	got[TPE__M_THREAD_RETIRED] = &m->threads_retired;
	got[TPE__M_THREAD_FAILED] = &m->threads_failed;
	/* Pass 0 from creation, pass 1 after a reset: each count k + its
	 * own number, so that two counts swapped show. */
	for (pass = 0; pass < 2; pass++) {
		uint64_t k = pass == 0 ? 10 : 100;
		int64_t now = tpe__metrics_clock();

		for (i = 0; i < (int)k + 1; i++)
			tpe__metrics_task_end(w, 0, 0);
		for (i = 0; i < (int)k + 2; i++)
			tpe__metrics_task_end(w, now, now);
		TPE__METRICS_WORKER_ADD(w, idle_waits, k + 3);
		TPE__METRICS_WORKER_ADD(w, wakeups, k + 4);
		TPE__METRICS_WORKER_ADD(w, spin_hits, k + 5);
		TPE__METRICS_WORKER_ADD(w, batches, k + 6);
		TPE__METRICS_WORKER_ADD(w, steals, k + 7);
		TPE__METRICS_WORKER_ADD(w, stolen_tasks, k + 8);
		/* Fewer of the later ones: no more retired than started. */
		for (c = 0; c < TPE__M_COUNT; c++)
			for (i = 0; i < (int)k + 20 - c; i++)
				tpe__metrics_count(mm, (enum
				    tpe__metrics_counter)c);
		tpe__metrics_read_locked(mm, m);
		assert_int_equal(m->tasks_run, 2 * k + 3);
		assert_int_equal(m->tasks_timed, k + 2);
		assert_consistent(m);
		assert_int_equal(m->queue_wait.buckets[0], k + 2);
		assert_int_equal(m->idle_waits, k + 3);
		assert_int_equal(m->wakeups, k + 4);
		assert_int_equal(m->spin_hits, k + 5);
		assert_int_equal(m->batches, k + 6);
		assert_int_equal(m->steals, k + 7);
		assert_int_equal(m->stolen_tasks, k + 8);
		for (c = 0; c < TPE__M_COUNT; c++) {
			uint64_t want = k + 20 - (uint64_t)c;

			/* After the reset, the one thread alive at it (one
			 * more started than retired) counts as started. */
			if (pass == 1 && c == TPE__M_THREAD_STARTED)
				want += 1;
			assert_int_equal(*got[c], want);
		}
		/* Twice: a second reset, then nothing counted, reads 0. */
		assert_int_equal(tpe__metrics_reset_locked(mm), 0);
		assert_int_equal(tpe__metrics_reset_locked(mm), 0);
		tpe__metrics_read_locked(mm, m);
		assert_int_equal(m->tasks_run + m->tasks_timed +
		    m->queue_wait.count + m->run_time.count +
		    m->queue_wait.sum_ns + m->run_time.sum_ns, 0);
		assert_int_equal(m->queue_wait.buckets[0], 0);
		assert_int_equal(m->idle_waits + m->wakeups + m->spin_hits +
		    m->batches + m->steals + m->stolen_tasks, 0);
		for (c = 0; c < TPE__M_COUNT; c++)
			if (c != TPE__M_THREAD_STARTED)
				assert_int_equal(*got[c], 0);
	}
	tpe__metrics_worker_put_locked(mm, w);
	tpe__metrics_destroy(mm);
	free(m);
}

/* A reset leaves threads_started - threads_retired the threads alive: a
 * thread that retires after it does not take the difference below. */
static void
test_metrics_reset_threads_alive(void **state)
{
	struct tpe_metrics *m;
	int64_t end;
	tpe_t *pool;
	bool one;

	(void)state;
	pool = metrics_pool(&(struct tu_pool_opts){ .core = 2, .max = 2,
	    .keep_alive = TU_MS }, TPE_METRICS_ON);
	assert_int_equal(tpe_prestart_core_threads(pool, NULL), 0);
	assert_int_equal(tpe_metrics_reset(pool), 0);
	m = metrics_of(pool);
	assert_int_equal(m->threads_started, 2);
	assert_int_equal(m->threads_retired, 0);
	free(m);
	assert_int_equal(tpe_set_pool_size(pool, 1, 1), 0);
	/* One leaves (bounded wait: no timing assert). */
	end = tu_now_ns() + TU_WAIT_BOUND;
	do {
		m = metrics_of(pool);
		one = m->threads_retired == 1;
		if (!one) {
			free(m);
			tu_sleep_ns(TU_MS);
		}
	} while (!one && tu_now_ns() < end);
	assert_true(one);
	assert_int_equal(m->threads_started, 2);
	assert_int_equal(m->threads_started - m->threads_retired, 1);
	free(m);
	assert_int_equal(tpe_destroy(pool), 0);
}

/* ---- one read agrees with itself ---------------------------------------- */

static struct tu_latch hr_in, hr_out;
static int hr_waits;

/* The writer, between the two histograms of a timed task: held there. */
static void
half_record_hook(void)
{
	tu_latch_count_down(&hr_in);
	tu_latch_wait(&hr_out);
}

/* A reader found the writer inside its record: let the writer go on. */
static void
reader_waits_hook(void)
{
	__atomic_add_fetch(&hr_waits, 1, __ATOMIC_SEQ_CST);
	tu_latch_count_down(&hr_out);
}

/*
 * The exact state: a worker has recorded a task's queue wait and not yet
 * its run time (held by the white-box hook), and a read comes. The read
 * waits for the record to end (the hook it calls lets the writer go), so
 * it holds the whole task: one in tasks_timed and in both histograms.
 * Before the fix it returned at once: queue_wait.count 1, run_time.count
 * and tasks_timed 0.
 */
static void
test_metrics_read_waits_for_record(void **state)
{
	size_t k;

	(void)state;
	for (k = 0; k < 2; k++) {
		struct tpe_metrics *m;
		int count = 0;
		tpe_t *pool;

		tu_latch_init(&hr_in, 1);
		tu_latch_init(&hr_out, 1);
		hr_waits = 0;
		pool = metrics_pool(&(struct tu_pool_opts){ .core = 1,
		    .max = 1, .queue = both_engines[k] },
		    TPE_METRICS_ON | TPE_METRICS_TIME_ALL);
		__atomic_store_n(&tpe__metrics_record_hook, half_record_hook,
		    __ATOMIC_SEQ_CST);
		__atomic_store_n(&tpe__metrics_wait_hook, reader_waits_hook,
		    __ATOMIC_SEQ_CST);
		assert_int_equal(tpe_execute(pool, tu_count_fn, &count), 0);
		tu_latch_wait(&hr_in);
		/* The one task is held; no other record meets the hook. */
		__atomic_store_n(&tpe__metrics_record_hook, NULL,
		    __ATOMIC_SEQ_CST);
		m = metrics_of(pool);
		tu_latch_count_down(&hr_out); /* in case the read did not */
		__atomic_store_n(&tpe__metrics_wait_hook, NULL,
		    __ATOMIC_SEQ_CST);
		assert_int_equal(tpe_wait_idle(pool, -1), 0);
		assert_int_equal(tpe_destroy(pool), 0);
		assert_consistent(m);
		assert_int_equal(m->tasks_timed, 1);
		assert_int_equal(tu_load(&hr_waits), 1);
		free(m);
		tu_latch_destroy(&hr_in);
		tu_latch_destroy(&hr_out);
	}
}

/* A submitter that keeps up to RACE_AHEAD tiny tasks in the pool until
 * told to stop. */
#define RACE_AHEAD 4096
struct race {
	tpe_t *pool;
	int done;     /* tasks ended (tu_count_fn) */
	int stop;     /* A: the reader is through */
	long sent;
};

static void *
race_submitter(void *arg)
{
	struct race *r = arg;

	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		if (r->sent - tu_load(&r->done) >= RACE_AHEAD) {
			sched_yield();
			continue;
		}
		if (tpe_execute(r->pool, tu_count_fn, &r->done) == 0)
			r->sent++;
	}
	return NULL;
}

/*
 * Readers racing with workers that time every task, and with resets:
 * every read must agree with itself (consistent()). Bounded in reads, not
 * in time: RACE_READS reads, a reset after every third, RACE_BETWEEN
 * tasks ended between two reads. Before the fix about one read in ten of
 * a per-worker pool and one in 40 of an unbounded one were apart.
 */
#define RACE_READS 300
#define RACE_BETWEEN 16
static void
test_metrics_read_races_workers(void **state)
{
	size_t k;

	(void)state;
	for (k = 0; k < 2; k++) {
		struct tpe_metrics *m = malloc(sizeof(*m)), bad;
		struct race r = { 0 };
		long i, nbad = 0;
		pthread_t th;

		assert_non_null(m);
		r.pool = metrics_pool(&(struct tu_pool_opts){ .core = 2,
		    .max = 2, .queue = both_engines[k] },
		    TPE_METRICS_ON | TPE_METRICS_TIME_ALL);
		assert_int_equal(pthread_create(&th, NULL, race_submitter, &r),
		    0);
		for (i = 0; i < RACE_READS; i++) {
			int seen = tu_load(&r.done);

			/* Some tasks between two reads (without a clock). */
			while (tu_load(&r.done) - seen < RACE_BETWEEN)
				sched_yield();
			assert_int_equal(tpe_get_metrics(r.pool, m,
			    sizeof(*m)), 0);
			if (!consistent(m) && nbad++ == 0)
				bad = *m;
			if (i % 3 == 2)
				assert_int_equal(tpe_metrics_reset(r.pool), 0);
		}
		__atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
		assert_int_equal(pthread_join(th, NULL), 0);
		assert_int_equal(tpe_wait_idle(r.pool, -1), 0);
		assert_int_equal(tpe_destroy(r.pool), 0);
		print_message("# %s: %ld tasks, %ld of %d reads apart\n",
		    k == 0 ? "unbounded" : "per-worker", r.sent, nbad,
		    RACE_READS);
		free(m);
		if (nbad > 0)
			assert_consistent(&bad); /* the first one apart */
	}
}

/* ---- resize, rejections, reserve, shutdown-now, fork ------------------- */

/* Whether the pool has settled at one thread: one worker counted, and
 * every other one that started has retired (counted at its very end). */
static bool
settled_at_one(const tpe_t *pool)
{
	struct tpe_metrics *m = metrics_of(pool);
	bool one = tu_stats(pool).pool_size == 1 &&
	    m->threads_started - m->threads_retired == 1;

	free(m);
	return one;
}

static void
test_metrics_survive_resize(void **state)
{
	struct tu_saturation sat;
	struct tpe_metrics *m;
	struct tpe_stats st;
	int count = 0, i;
	int64_t end;
	tpe_t *pool;

	(void)state;
	pool = metrics_pool(&(struct tu_pool_opts){ .core = 1, .max = 1,
	    .keep_alive = 5 * TU_MS }, TPE_METRICS_ON | TPE_METRICS_TIME_ALL);
	for (i = 0; i < 50; i++)
		assert_int_equal(tpe_execute(pool, tu_count_fn, &count), 0);
	assert_int_equal(tpe_set_pool_size(pool, 4, 4), 0);
	/* Four threads, each in a task. */
	tu_saturate(pool, 4, 0, &sat);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_wait_idle(pool, -1), 0);
	assert_int_equal(tpe_set_pool_size(pool, 1, 1), 0);
	/* The extra three leave (bounded wait: no timing assert). */
	end = tu_now_ns() + TU_WAIT_BOUND;
	while (!settled_at_one(pool) && tu_now_ns() < end)
		tu_sleep_ns(TU_MS);
	for (i = 0; i < 50; i++)
		assert_int_equal(tpe_execute(pool, tu_count_fn, &count), 0);
	assert_int_equal(tpe_wait_idle(pool, -1), 0);
	m = metrics_of(pool);
	st = tu_stats(pool);
	if (st.pool_size != 1)
		print_message("# pool_size %zu active %zu idle %zu "
		    "reserved %zu started %llu retired %llu\n", st.pool_size,
		    st.active, st.idle, st.reserved,
		    (unsigned long long)m->threads_started,
		    (unsigned long long)m->threads_retired);
	assert_int_equal(st.pool_size, 1);
	assert_int_equal(m->tasks_run, 104);
	assert_int_equal(m->tasks_run, st.completed);
	assert_consistent(m);
	assert_int_equal(m->run_time.count, 104);
	assert_int_equal(m->threads_started - m->threads_retired, 1);
	assert_true(m->threads_retired >= 3);
	assert_int_equal(m->threads_failed, 0);
	free(m);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_saturation_destroy(&sat);
}

static int
take_handler(tpe_t *pool, tpe_fn fn, void *arg, void *ctx)
{
	(void)pool;
	(void)fn;
	(void)arg;
	(void)ctx;
	return 0; /* taken (dropped: the tasks here are no-ops) */
}

static void
test_metrics_rejections(void **state)
{
	static const enum tpe_rejection kinds[] = { TPE_REJECT_ABORT,
	    TPE_REJECT_CALLER_RUNS, TPE_REJECT_DISCARD,
	    TPE_REJECT_DISCARD_OLDEST, (enum tpe_rejection)-1 };
	size_t k;

	(void)state;
	for (k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		struct tu_saturation sat;
		struct tpe_metrics *m;
		tpe_t *pool;
		int count = 0;
		uint64_t *want;

		pool = metrics_pool(&(struct tu_pool_opts){ .core = 1,
		    .max = 1, .queue = TPE_QUEUE_BOUNDED, .capacity = 1,
		    .rejection = kinds[k] == (enum tpe_rejection)-1 ?
		    TPE_REJECT_ABORT : kinds[k],
		    .reject_handler = kinds[k] == (enum tpe_rejection)-1 ?
		    take_handler : NULL }, TPE_METRICS_ON);
		tu_saturate(pool, 1, 1, &sat);
		(void)tpe_execute(pool, tu_count_fn, &count);
		(void)tpe_execute(pool, tu_count_fn, &count);
		tu_unsaturate(&sat);
		assert_int_equal(tpe_wait_idle(pool, -1), 0);
		assert_int_equal(tpe_shutdown(pool), 0);
		assert_int_equal(tpe_execute(pool, tu_count_fn, &count),
		    ECANCELED);
		assert_int_equal(tpe_try_execute(pool, tu_count_fn, &count),
		    ECANCELED);
		assert_int_equal(tpe_await_termination(pool, -1), 0);
		m = metrics_of(pool);
		switch (k) {
		case 0: want = &m->rejected_abort; break;
		case 1: want = &m->rejected_caller_runs; break;
		case 2: want = &m->rejected_discard; break;
		case 3: want = &m->rejected_discard_oldest; break;
		default: want = &m->rejected_handler; break;
		}
		assert_int_equal(*want, 2);
		assert_int_equal(m->rejected_abort + m->rejected_caller_runs +
		    m->rejected_discard + m->rejected_discard_oldest +
		    m->rejected_handler, 2);
		assert_int_equal(m->rejected_shutdown, 2);
		assert_int_equal(tu_stats(pool).rejected, 2);
		/* Terminated: every thread that started has retired. */
		assert_int_equal(m->threads_started, m->threads_retired);
		free(m);
		assert_int_equal(tpe_destroy(pool), 0);
		tu_saturation_destroy(&sat);
	}
}

static void
test_metrics_reserve(void **state)
{
	struct tpe_metrics *m;
	uint64_t misses = 0;
	int count = 0, rc;
	int64_t end;
	tpe_attr_t *a;
	tpe_t *pool;

	(void)state;
	a = tu_attr_with(&(struct tu_pool_opts){ .core = 0, .max = 2 });
	assert_int_equal(tpe_attr_set_reserved_threads(a, 1), 0);
	assert_int_equal(tpe_attr_set_metrics(a, TPE_METRICS_ON), 0);
	assert_int_equal(tpe_create(&pool, a), 0);
	tpe_attr_destroy(a);
	/* Misses until a reserved thread parks, then one hit. */
	end = tu_now_ns() + TU_WAIT_BOUND;
	while ((rc = tpe_try_execute(pool, tu_count_fn, &count)) == EAGAIN &&
	    tu_now_ns() < end) {
		misses++;
		tu_sleep_ns(TU_MS);
	}
	assert_int_equal(rc, 0);
	assert_int_equal(tpe_wait_idle(pool, -1), 0);
	m = metrics_of(pool);
	assert_int_equal(m->reserve_hits, 1);
	assert_int_equal(m->reserve_misses, misses);
	assert_int_equal(m->tasks_run, 1);
	free(m);
	assert_int_equal(tpe_destroy(pool), 0);

	/* A per-worker pool has no reserve: every try misses. */
	pool = metrics_pool(&(struct tu_pool_opts){ .core = 1, .max = 1,
	    .queue = TPE_QUEUE_PER_WORKER }, TPE_METRICS_ON);
	assert_int_equal(tpe_try_execute(pool, tu_count_fn, &count), EAGAIN);
	m = metrics_of(pool);
	assert_int_equal(m->reserve_misses, 1);
	assert_int_equal(m->reserve_hits, 0);
	free(m);
	assert_int_equal(tpe_destroy(pool), 0);
}

static void
test_metrics_shutdown_now(void **state)
{
	size_t k;

	(void)state;
	for (k = 0; k < 2; k++) {
		struct tu_handbacks hb;
		struct tu_saturation sat;
		struct tpe_metrics *m;
		int count = 0, i;
		tpe_t *pool;

		tu_handbacks_init(&hb);
		pool = metrics_pool(&(struct tu_pool_opts){ .core = 1,
		    .max = 1, .queue = both_engines[k] },
		    TPE_METRICS_ON | TPE_METRICS_TIME_ALL);
		for (i = 0; i < 10; i++)
			assert_int_equal(tpe_execute(pool, tu_count_fn,
			    &count), 0);
		assert_int_equal(tpe_wait_idle(pool, -1), 0);
		tu_saturate(pool, 1, 0, &sat);
		for (i = 0; i < 5; i++)
			assert_int_equal(tpe_execute(pool, tu_count_fn,
			    &count), 0);
		assert_int_equal(tpe_shutdown_now(pool, tu_handback_fn, &hb),
		    0);
		tu_unsaturate(&sat);
		assert_int_equal(tpe_await_termination(pool, -1), 0);
		m = metrics_of(pool);
		/* The ten, the blocker; the five went back. */
		assert_int_equal(tu_handbacks_count(&hb), 5);
		assert_int_equal(m->tasks_run, 11);
		assert_int_equal(m->tasks_run, tu_stats(pool).completed);
		assert_consistent(m);
		assert_int_equal(m->run_time.count, 11);
		assert_int_equal(m->threads_started, m->threads_retired);
		assert_int_equal(m->pool_size, 0);
		free(m);
		assert_int_equal(tpe_destroy(pool), 0);
		tu_saturation_destroy(&sat);
	}
}

static void
test_metrics_fork(void **state)
{
	struct tpe_metrics *m;
	int count = 0, i, st;
	tpe_t *pool;
	pid_t pid;

	(void)state;
	pool = metrics_pool(&(struct tu_pool_opts){ .core = 2, .max = 2 },
	    TPE_METRICS_ON | TPE_METRICS_TIME_ALL);
	for (i = 0; i < 100; i++)
		assert_int_equal(tpe_execute(pool, tu_count_fn, &count), 0);
	assert_int_equal(tpe_wait_idle(pool, -1), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* The child: a terminated pool whose counts are the
		 * parent's at the fork; readable, resettable, destroyable. */
		struct tpe_metrics *c = malloc(sizeof(*c));
		int rc = 0;

		if (c == NULL || tpe_get_metrics(pool, c, sizeof(*c)) != 0)
			rc = 1;
		else if (c->tasks_run != 100 || c->run_time.count != 100)
			rc = 2;
		else if (c->pool_size != 0)
			rc = 3;
		else if (tpe_metrics_reset(pool) != 0 ||
		    tpe_get_metrics(pool, c, sizeof(*c)) != 0 ||
		    c->tasks_run != 0)
			rc = 4;
		else if (tpe_destroy(pool) != 0)
			rc = 5;
		free(c);
		_exit(rc);
	}
	while (waitpid(pid, &st, 0) < 0)
		;
	for (i = 0; i < 100; i++)
		assert_int_equal(tpe_execute(pool, tu_count_fn, &count), 0);
	assert_int_equal(tpe_wait_idle(pool, -1), 0);
	m = metrics_of(pool);
	assert_int_equal(m->tasks_run, 200);
	assert_int_equal(m->run_time.count, 200);
	free(m);
	assert_int_equal(tpe_destroy(pool), 0);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* ---- no memory --------------------------------------------------------- */

/* tpe_create with metrics, each allocation failed in turn: ENOMEM, until
 * none is left to fail. */
static void
test_metrics_enomem_create(void **state)
{
	tpe_attr_t *a;
	long k;

	(void)state;
	a = tu_attr_with(&(struct tu_pool_opts){ .core = 1, .max = 1 });
	assert_int_equal(tpe_attr_set_metrics(a, TPE_METRICS_ON), 0);
	for (k = 0; k < 100; k++) {
		tpe_t *pool = NULL;
		long failed;
		int rc;

		fault_arm(&malloc_fault, k, 1, false);
		rc = tpe_create(&pool, a);
		failed = fault_disarm(&malloc_fault);
		if (failed == 0) {
			assert_int_equal(rc, 0);
			assert_int_equal(tpe_destroy(pool), 0);
			break;
		}
		assert_int_equal(rc, ENOMEM);
	}
	assert_true(k < 100);
	tpe_attr_destroy(a);
}

/* A worker whose block cannot be allocated does not start: ENOMEM, counted
 * as a failed start; the next start works. The first allocation of the
 * call is the node, the next ones the block. */
static void
test_metrics_enomem_worker(void **state)
{
	struct tpe_metrics *m;
	int count = 0;
	tpe_t *pool;

	(void)state;
	pool = metrics_pool(&(struct tu_pool_opts){ .core = 1, .max = 1 },
	    TPE_METRICS_ON);
	fault_arm(&malloc_fault, 1, -1, false);
	assert_int_equal(tpe_execute(pool, tu_count_fn, &count), ENOMEM);
	assert_true(fault_disarm(&malloc_fault) >= 1);
	m = metrics_of(pool);
	assert_true(m->threads_failed >= 1);
	assert_int_equal(m->threads_started, 0);
	assert_int_equal(m->pool_size, 0);
	free(m);
	assert_int_equal(tpe_execute(pool, tu_count_fn, &count), 0);
	assert_int_equal(tpe_wait_idle(pool, -1), 0);
	m = metrics_of(pool);
	assert_int_equal(m->threads_started, 1);
	assert_int_equal(m->tasks_run, 1);
	assert_int_equal(tu_load(&count), 1);
	free(m);
	assert_int_equal(tpe_destroy(pool), 0);
}

/* The copy of an older caller's read; a reset needs no memory. */
static void
test_metrics_enomem_read_reset(void **state)
{
	size_t old = TPE__END_OF(struct tpe_metrics, timing_period);
	struct tpe_metrics *m = calloc(1, sizeof(*m));
	tpe_t *pool;

	(void)state;
	assert_non_null(m);
	pool = metrics_pool(&(struct tu_pool_opts){ .core = 1, .max = 1 },
	    TPE_METRICS_ON);
	fault_arm(&malloc_fault, 0, -1, false);
	assert_int_equal(tpe_get_metrics(pool, m, old), ENOMEM);
	/* This version's size needs no copy; a reset allocates nothing. */
	assert_int_equal(tpe_get_metrics(pool, m, sizeof(*m)), 0);
	assert_int_equal(tpe_metrics_reset(pool), 0);
	fault_disarm(&malloc_fault);
	assert_int_equal(tpe_get_metrics(pool, m, old), 0);
	assert_int_equal(tpe_destroy(pool), 0);
	free(m);
}

/* ---- the growing-struct rule ------------------------------------------- */

static void
test_metrics_sizes(void **state)
{
	size_t big = sizeof(struct tpe_metrics) + 64;
	unsigned char *buf = malloc(big + 64);
	size_t old = TPE__END_OF(struct tpe_metrics, timing_period);
	struct tpe_metrics *m;
	int count = 0;
	tpe_t *pool;
	size_t i;

	(void)state;
	assert_non_null(buf);
	pool = metrics_pool(&(struct tu_pool_opts){ .core = 1, .max = 1 },
	    TPE_METRICS_ON);
	assert_int_equal(tpe_execute(pool, tu_count_fn, &count), 0);
	assert_int_equal(tpe_wait_idle(pool, -1), 0);
	/* An older caller: its fields, nothing past its size. */
	memset(buf, 0xa5, big + 64);
	assert_int_equal(tpe_get_metrics(pool, (void *)buf, old), 0);
	m = (struct tpe_metrics *)(void *)buf;
	assert_int_equal(m->tasks_run, 1);
	for (i = old; i < big + 64; i++)
		assert_int_equal(buf[i], 0xa5);
	/* A newer caller: its unknown fields zeroed, nothing past. */
	memset(buf, 0xa5, big + 64);
	assert_int_equal(tpe_get_metrics(pool, (void *)buf, big), 0);
	assert_int_equal(m->tasks_run, 1);
	for (i = sizeof(struct tpe_metrics); i < big; i++)
		assert_int_equal(buf[i], 0);
	for (i = big; i < big + 64; i++)
		assert_int_equal(buf[i], 0xa5);
	assert_int_equal(tpe_destroy(pool), 0);
	free(buf);
}

/* ---- Prometheus -------------------------------------------------------- */

static struct tpe_metrics *
synthetic(void)
{
	struct tpe_metrics *m = calloc(1, sizeof(*m));

	assert_non_null(m);
	m->pool_size = 4;
	m->tasks_run = 12345;
	m->rejected_discard = 7;
	tpe_histogram_record(&m->queue_wait, 100);      /* < 128 ns */
	tpe_histogram_record(&m->queue_wait, 1000000);  /* 1 ms */
	tpe_histogram_record(&m->queue_wait, 1500000000); /* 1.5 s */
	tpe_histogram_record(&m->run_time, UINT64_C(500000000000)); /* top */
	return m;
}

static void
assert_has(const char *text, const char *line)
{
	if (strstr(text, line) == NULL)
		fail_msg("missing: %s", line);
}

static void
test_metrics_prometheus_text(void **state)
{
	struct tpe_metrics *m = synthetic();
	size_t needed = 0, n2 = 0;
	char *buf, small[16];

	(void)state;
	/* The size query: no buffer. */
	assert_int_equal(tpe_metrics_format_prometheus(NULL, 0, &needed, m,
	    sizeof(*m), "app", "pool=\"web\",zone=\"a\""), ERANGE);
	assert_true(needed > 1000);
	buf = malloc(needed);
	assert_non_null(buf);
	/* One byte short: ERANGE, the same size asked, an empty string. */
	assert_int_equal(tpe_metrics_format_prometheus(buf, needed - 1, &n2,
	    m, sizeof(*m), "app", "pool=\"web\",zone=\"a\""), ERANGE);
	assert_int_equal(n2, needed);
	assert_string_equal(buf, "");
	assert_int_equal(tpe_metrics_format_prometheus(small, sizeof(small),
	    &n2, m, sizeof(*m), "app", NULL), ERANGE);
	assert_int_equal(tpe_metrics_format_prometheus(buf, needed, &n2, m,
	    sizeof(*m), "app", "pool=\"web\",zone=\"a\""), 0);
	assert_int_equal(strlen(buf) + 1, needed);
	assert_has(buf, "# HELP app_tasks_run_total ");
	assert_has(buf, "# TYPE app_tasks_run_total counter\n");
	assert_has(buf, "\napp_tasks_run_total{pool=\"web\",zone=\"a\"} 12345\n");
	assert_has(buf, "\napp_threads{pool=\"web\",zone=\"a\"} 4\n");
	assert_has(buf, "# TYPE app_threads gauge\n");
	assert_has(buf, "\napp_rejected_total{pool=\"web\",zone=\"a\","
	    "cause=\"discard\"} 7\n");
	assert_has(buf, "# TYPE app_queue_wait_seconds histogram\n");
	assert_has(buf, "\napp_queue_wait_seconds_bucket{pool=\"web\","
	    "zone=\"a\",le=\"1.28e-07\"} 1\n");
	/* 1 ms is below 2^21 ns = 2.097 ms. */
	assert_has(buf, "\napp_queue_wait_seconds_bucket{pool=\"web\","
	    "zone=\"a\",le=\"0.000524288\"} 1\n");
	assert_has(buf, "\napp_queue_wait_seconds_bucket{pool=\"web\","
	    "zone=\"a\",le=\"0.002097152\"} 2\n");
	assert_has(buf, "\napp_queue_wait_seconds_bucket{pool=\"web\","
	    "zone=\"a\",le=\"+Inf\"} 3\n");
	assert_has(buf, "\napp_queue_wait_seconds_sum{pool=\"web\","
	    "zone=\"a\"} 1.501000100\n");
	assert_has(buf, "\napp_queue_wait_seconds_count{pool=\"web\","
	    "zone=\"a\"} 3\n");
	/* 500 s is beyond the last finite le (137 s). */
	assert_has(buf, "\napp_run_time_seconds_bucket{pool=\"web\","
	    "zone=\"a\",le=\"137.438953472\"} 0\n");
	assert_has(buf, "\napp_run_time_seconds_bucket{pool=\"web\","
	    "zone=\"a\",le=\"+Inf\"} 1\n");
	free(buf);

	/* No labels, the default prefix: bare names, le alone. */
	assert_int_equal(tpe_metrics_format_prometheus(NULL, 0, &needed, m,
	    sizeof(*m), NULL, ""), ERANGE);
	buf = malloc(needed);
	assert_non_null(buf);
	assert_int_equal(tpe_metrics_format_prometheus(buf, needed, NULL, m,
	    sizeof(*m), NULL, ""), 0);
	assert_has(buf, "\ntpe_tasks_run_total 12345\n");
	assert_has(buf, "\ntpe_queue_wait_seconds_bucket{le=\"+Inf\"} 3\n");
	assert_has(buf, "\ntpe_rejected_total{cause=\"abort\"} 0\n");
	free(buf);
	free(m);
}

static void
test_metrics_prometheus_file(void **state)
{
	struct tpe_metrics *m = synthetic();
	size_t needed, flen = 0;
	char *buf, *ftext = NULL;
	FILE *f, *ro;

	(void)state;
	assert_int_equal(tpe_metrics_format_prometheus(NULL, 0, &needed, m,
	    sizeof(*m), "x", "a=\"b\""), ERANGE);
	buf = malloc(needed);
	assert_non_null(buf);
	assert_int_equal(tpe_metrics_format_prometheus(buf, needed, NULL, m,
	    sizeof(*m), "x", "a=\"b\""), 0);
	f = open_memstream(&ftext, &flen);
	assert_non_null(f);
	assert_int_equal(tpe_metrics_write_prometheus(f, m, sizeof(*m), "x",
	    "a=\"b\""), 0);
	assert_int_equal(fclose(f), 0);
	assert_string_equal(ftext, buf);
	free(ftext);
	/* A stream that refuses writes: EIO. */
	ro = fopen("/dev/null", "r");
	assert_non_null(ro);
	assert_int_equal(tpe_metrics_write_prometheus(ro, m, sizeof(*m), "x",
	    NULL), EIO);
	fclose(ro);
	free(buf);
	free(m);
}

/* Each le counts the values below its bound, in ns: 2^k - 1 in, 2^k out
 * (prometheus.c). */
static void
test_metrics_prometheus_bounds(void **state)
{
	static const char *const want[] = {
		"\ntpe_queue_wait_seconds_bucket{le=\"1.28e-07\"} 1\n",
		"\ntpe_queue_wait_seconds_bucket{le=\"5.12e-07\"} 2\n",
		"\ntpe_queue_wait_seconds_bucket{le=\"34.359738368\"} 2\n",
		"\ntpe_queue_wait_seconds_bucket{le=\"137.438953472\"} 3\n",
		"\ntpe_queue_wait_seconds_bucket{le=\"+Inf\"} 4\n",
		"\ntpe_queue_wait_seconds_count 4\n",
	};
	struct tpe_metrics *m = calloc(1, sizeof(*m));
	size_t needed, i;
	char *buf;

	(void)state;
	assert_non_null(m);
	tpe_histogram_record(&m->queue_wait, 127);
	tpe_histogram_record(&m->queue_wait, 128);
	tpe_histogram_record(&m->queue_wait, (UINT64_C(1) << 37) - 1);
	tpe_histogram_record(&m->queue_wait, UINT64_C(1) << 37);
	assert_int_equal(tpe_metrics_format_prometheus(NULL, 0, &needed, m,
	    sizeof(*m), NULL, NULL), ERANGE);
	buf = malloc(needed);
	assert_non_null(buf);
	assert_int_equal(tpe_metrics_format_prometheus(buf, needed, NULL, m,
	    sizeof(*m), NULL, NULL), 0);
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		assert_has(buf, want[i]);
	free(buf);
	free(m);
}

static void
test_metrics_prometheus_errors(void **state)
{
	struct tpe_metrics *m = synthetic();
	size_t needed = 99;
	char buf[64];

	(void)state;
	assert_int_equal(tpe_metrics_write_prometheus(NULL, m, sizeof(*m),
	    NULL, NULL), EINVAL);
	assert_int_equal(tpe_metrics_write_prometheus(stdout, NULL,
	    sizeof(*m), NULL, NULL), EINVAL);
	assert_int_equal(tpe_metrics_write_prometheus(stdout, m,
	    sizeof(*m) - 1, NULL, NULL), EINVAL);
	assert_int_equal(tpe_metrics_format_prometheus(NULL, 1, &needed, m,
	    sizeof(*m), NULL, NULL), EINVAL);
	assert_int_equal(needed, 0);
	assert_int_equal(tpe_metrics_format_prometheus(buf, sizeof(buf),
	    &needed, NULL, sizeof(*m), NULL, NULL), EINVAL);
	assert_int_equal(tpe_metrics_format_prometheus(buf, sizeof(buf),
	    &needed, m, 8, NULL, NULL), EINVAL);
	assert_int_equal(tpe_metrics_format_prometheus(buf, sizeof(buf),
	    &needed, m, sizeof(*m), "", NULL), EINVAL);
	assert_int_equal(tpe_metrics_format_prometheus(buf, sizeof(buf),
	    &needed, m, sizeof(*m), "9lives", NULL), EINVAL);
	assert_int_equal(tpe_metrics_format_prometheus(buf, sizeof(buf),
	    &needed, m, sizeof(*m), "a-b", NULL), EINVAL);
	assert_int_equal(tpe_metrics_format_prometheus(buf, sizeof(buf),
	    &needed, m, sizeof(*m), "ok", "a=\"}\""), EINVAL);
	assert_int_equal(tpe_metrics_format_prometheus(buf, sizeof(buf),
	    &needed, m, sizeof(*m), "ok", "a=\"b\"\n"), EINVAL);
	assert_int_equal(tpe_metrics_write_prometheus(stdout, m, sizeof(*m),
	    "ok", "{"), EINVAL);
	free(m);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_metrics_attr),
		cmocka_unit_test(test_metrics_errors),
		cmocka_unit_test(test_metrics_exact_unbounded),
		cmocka_unit_test(test_metrics_exact_bounded),
		cmocka_unit_test(test_metrics_exact_per_worker),
		cmocka_unit_test(test_metrics_sampled),
		cmocka_unit_test(test_metrics_real_delays),
		cmocka_unit_test(test_metrics_task_clock),
		cmocka_unit_test(test_metrics_percentiles),
		cmocka_unit_test(test_metrics_buckets),
		cmocka_unit_test(test_metrics_bucket_top),
		cmocka_unit_test(test_metrics_percentile_rank),
		cmocka_unit_test(test_metrics_reset),
		cmocka_unit_test(test_metrics_reset_every_count),
		cmocka_unit_test(test_metrics_reset_threads_alive),
		cmocka_unit_test(test_metrics_read_waits_for_record),
		cmocka_unit_test(test_metrics_read_races_workers),
		cmocka_unit_test(test_metrics_survive_resize),
		cmocka_unit_test(test_metrics_rejections),
		cmocka_unit_test(test_metrics_reserve),
		cmocka_unit_test(test_metrics_shutdown_now),
		cmocka_unit_test(test_metrics_fork),
		cmocka_unit_test(test_metrics_enomem_create),
		cmocka_unit_test(test_metrics_enomem_worker),
		cmocka_unit_test(test_metrics_enomem_read_reset),
		cmocka_unit_test(test_metrics_sizes),
		cmocka_unit_test(test_metrics_prometheus_text),
		cmocka_unit_test(test_metrics_prometheus_file),
		cmocka_unit_test(test_metrics_prometheus_bounds),
		cmocka_unit_test(test_metrics_prometheus_errors),
	};

	tu_time_bound(0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
