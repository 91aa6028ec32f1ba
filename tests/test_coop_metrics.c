/* SPDX-License-Identifier: MIT */
/*
 * test_coop_metrics.c - the tasklet service's metrics
 * (tpe_coop_get_metrics(3)): exact call counts when quiescent, histogram
 * counts equal to the timed calls, the sampling, idle passes and parks,
 * the sized struct, every documented error, and allocation failures (the
 * --wrap wrappers of tests/helpers.h).
 */
#include <stdlib.h>
#include <string.h>

#define TU_FAULT_INJECTION /* this binary links the --wrap wrappers */
#include "helpers.h"

/* A tasklet that counts its calls: `limit` calls, the last one returns
 * TPE_DONE, the others `progress`; sleeps `sleep_ns` in each call; with
 * `release` set it goes on returning `progress` until *release. */
struct ctr {
	int limit;
	int progress;
	int64_t sleep_ns;
	int *release;
	int calls; /* atomic */
};

static int
ctr_fn(void *p)
{
	struct ctr *c = p;
	int n = __atomic_add_fetch(&c->calls, 1, __ATOMIC_SEQ_CST);

	if (c->sleep_ns > 0)
		tu_sleep_ns(c->sleep_ns);
	if (c->release != NULL)
		return tu_load(c->release) ? TPE_DONE : c->progress;
	return n >= c->limit ? TPE_DONE : c->progress;
}

static tpe_coop_t *
coop_new(size_t threads, unsigned flags)
{
	struct tpe_coop_config c = { threads, 0, flags, "cm" };
	tpe_coop_t *coop = NULL;

	assert_int_equal(tpe_coop_create(&coop, &c, sizeof(c)), 0);
	return coop;
}

/* Runs one job of n counting tasklets to its end, the first `blocking`
 * of them blocking; the calls they saw. */
static uint64_t
run_job_blocking(tpe_coop_t *coop, struct ctr *c, size_t n, size_t blocking)
{
	struct tpe_tasklet ts[16];
	tpe_job_t *job;
	uint64_t calls = 0;
	size_t i;

	assert_true(n <= 16);
	for (i = 0; i < n; i++)
		ts[i] = (struct tpe_tasklet){ ctr_fn, &c[i], NULL,
		    i < blocking ? TPE_TASKLET_BLOCKING : 0 };
	assert_int_equal(tpe_coop_submit(coop, ts, n, sizeof(ts[0]), &job),
	    0);
	assert_int_equal(tpe_job_wait(job, -1), 0);
	tpe_job_release(job);
	for (i = 0; i < n; i++)
		calls += (uint64_t)tu_load(&c[i].calls);
	return calls;
}

static uint64_t
run_job(tpe_coop_t *coop, struct ctr *c, size_t n)
{
	return run_job_blocking(coop, c, n, 0);
}

static uint64_t
bucket_sum(const struct tpe_histogram *h)
{
	uint64_t sum = 0;
	size_t i;

	for (i = 0; i < TPE_HISTOGRAM_BUCKETS; i++)
		sum += h->buckets[i];
	return sum;
}

static struct tpe_coop_metrics *
metrics_of(tpe_coop_t *coop)
{
	struct tpe_coop_metrics *m = malloc(sizeof(*m));

	assert_non_null(m);
	assert_int_equal(tpe_coop_get_metrics(coop, m, sizeof(*m)), 0);
	return m;
}

/* Every call timed: calls, calls_timed and the histogram's count equal
 * the calls the tasklets saw, once the job has completed. */
static void
test_coop_metrics_time_all_exact(void **state)
{
	tpe_coop_t *coop = coop_new(2, TPE_COOP_METRICS |
	    TPE_COOP_METRICS_TIME_ALL);
	struct ctr c[6];
	struct tpe_coop_metrics *m;
	uint64_t seen, seen2;
	size_t i;

	(void)state;
	for (i = 0; i < 6; i++)
		c[i] = (struct ctr){ .limit = 50 + (int)i * 7,
		    .progress = TPE_MADE_PROGRESS };
	seen = run_job(coop, c, 6);
	m = metrics_of(coop);
	assert_int_equal(m->calls, seen);
	assert_int_equal(m->calls_timed, seen);
	assert_int_equal(m->call_time.count, seen);
	assert_int_equal(bucket_sum(&m->call_time), seen);
	assert_int_equal(m->timing_period, 1);
	/* The longest tasklet's calls were one a pass; the last pass may
	 * not be counted yet (it is counted after the job completed). */
	assert_true(m->passes >= 50 + 5 * 7 - 1);
	assert_true(m->idle_passes <= m->passes);
	free(m);

	/* A second job adds to the counts. */
	for (i = 0; i < 6; i++)
		c[i] = (struct ctr){ .limit = 10, .progress =
		    TPE_MADE_PROGRESS };
	seen2 = run_job(coop, c, 6);
	m = metrics_of(coop);
	assert_int_equal(m->calls, seen + seen2);
	assert_int_equal(m->call_time.count, seen + seen2);
	free(m);
	assert_int_equal(tpe_coop_destroy(coop), 0);
}

/* The dedicated threads of blocking tasklets count their calls too (in
 * the shared block), timed or sampled like the workers'. */
static void
test_coop_metrics_blocking_tasklets(void **state)
{
	static const unsigned flags[] = { TPE_COOP_METRICS |
	    TPE_COOP_METRICS_TIME_ALL, TPE_COOP_METRICS };
	struct tpe_coop_metrics *m;
	struct ctr c[4];
	uint64_t seen;
	size_t i, k;

	(void)state;
	for (k = 0; k < 2; k++) {
		tpe_coop_t *coop = coop_new(1, flags[k]);

		for (i = 0; i < 4; i++)
			c[i] = (struct ctr){ .limit = 300 + (int)i,
			    .progress = TPE_MADE_PROGRESS };
		seen = run_job_blocking(coop, c, 4, 2);
		assert_int_equal(seen, 4 * 300 + 6);
		m = metrics_of(coop);
		assert_int_equal(m->calls, seen);
		assert_int_equal(m->call_time.count, m->calls_timed);
		assert_int_equal(bucket_sum(&m->call_time), m->calls_timed);
		if (k == 0)
			assert_int_equal(m->calls_timed, seen);
		else
			/* At least 1 in 63 of each thread's calls: the
			 * worker's 605, the dedicated threads' 300, 301. */
			assert_true(m->calls_timed >= 605 / 63 + 300 / 63 +
			    301 / 63 && m->calls_timed < seen);
		/* Only the worker's passes: its two tasklets' calls. */
		assert_true(m->passes <= 300 + 3);
		free(m);
		assert_int_equal(tpe_coop_destroy(coop), 0);
	}
}

/* Sampled: every call counted, about 1 in 32 timed, the histogram holds
 * exactly the timed ones. */
static void
test_coop_metrics_sampled(void **state)
{
	tpe_coop_t *coop = coop_new(1, TPE_COOP_METRICS);
	struct ctr c[8];
	struct tpe_coop_metrics *m;
	uint64_t seen;
	size_t i;

	(void)state;
	for (i = 0; i < 8; i++)
		c[i] = (struct ctr){ .limit = 1000, .progress =
		    TPE_MADE_PROGRESS };
	seen = run_job(coop, c, 8);
	assert_int_equal(seen, 8000);
	m = metrics_of(coop);
	assert_int_equal(m->calls, seen);
	assert_int_equal(m->call_time.count, m->calls_timed);
	assert_int_equal(bucket_sum(&m->call_time), m->calls_timed);
	/* At most 63 calls between two timed ones (the man page). */
	assert_true(m->calls_timed >= seen / 63);
	assert_true(m->calls_timed < seen);
	assert_int_equal(m->timing_period, 32);
	free(m);
	assert_int_equal(tpe_coop_destroy(coop), 0);
}

/* Known delays: a tasklet that sleeps 2 ms per call; the median of the
 * call times is at least 2 ms less the histogram's error (1/64). */
static void
test_coop_metrics_known_delay(void **state)
{
	tpe_coop_t *coop = coop_new(1, TPE_COOP_METRICS |
	    TPE_COOP_METRICS_TIME_ALL);
	struct ctr c = { .limit = 5, .progress = TPE_MADE_PROGRESS,
	    .sleep_ns = 2 * TU_MS };
	struct tpe_coop_metrics *m;
	uint64_t p50;
	double mean;

	(void)state;
	assert_int_equal(run_job(coop, &c, 1), 5);
	m = metrics_of(coop);
	assert_int_equal(m->call_time.count, 5);
	assert_int_equal(tpe_histogram_percentile(&m->call_time, 50.0, &p50),
	    0);
	assert_true(p50 >= (uint64_t)(2 * TU_MS) - (uint64_t)(2 * TU_MS) / 64);
	assert_int_equal(tpe_histogram_mean(&m->call_time, &mean), 0);
	assert_true(mean >= 2.0 * TU_MS);
	free(m);
	assert_int_equal(tpe_coop_destroy(coop), 0);
}

/* Idle passes: a tasklet without progress makes every pass idle; after
 * the spin and yield passes the worker parks (the backoff). Polled until
 * counted, read while the worker writes (TSan: relaxed words). */
static void
test_coop_metrics_idle_passes(void **state)
{
	tpe_coop_t *coop = coop_new(1, TPE_COOP_METRICS);
	int release = 0;
	struct ctr c = { .progress = TPE_NO_PROGRESS, .release = &release };
	struct tpe_tasklet t = { ctr_fn, &c, NULL, 0 };
	struct tpe_coop_metrics *m = malloc(sizeof(*m));
	int64_t deadline = tu_now_ns() + 10 * TU_S;
	tpe_job_t *job;

	(void)state;
	assert_non_null(m);
	assert_int_equal(tpe_coop_submit(coop, &t, 1, sizeof(t), &job), 0);
	for (;;) {
		assert_int_equal(tpe_coop_get_metrics(coop, m, sizeof(*m)),
		    0);
		if (m->idle_passes >= 20 && m->parks >= 2)
			break;
		assert_true(tu_now_ns() < deadline);
		tu_sleep_ns(TU_MS);
	}
	__atomic_store_n(&release, 1, __ATOMIC_SEQ_CST);
	assert_int_equal(tpe_job_wait(job, -1), 0);
	tpe_job_release(job);
	assert_int_equal(tpe_coop_get_metrics(coop, m, sizeof(*m)), 0);
	/* Every call but the last made no progress: one idle pass each. */
	assert_int_equal(m->calls, (uint64_t)tu_load(&c.calls));
	assert_int_equal(m->idle_passes, m->calls - 1);
	assert_true(m->idle_passes <= m->passes);
	free(m);
	assert_int_equal(tpe_coop_destroy(coop), 0);
}

/* The growing-struct rule: an older (shorter) struct gets the members
 * that fit whole and zeroes after; a newer (longer) one gets zeroes past
 * this version's. */
static void
test_coop_metrics_sized(void **state)
{
	tpe_coop_t *coop = coop_new(1, TPE_COOP_METRICS |
	    TPE_COOP_METRICS_TIME_ALL);
	struct ctr c = { .limit = 3, .progress = TPE_MADE_PROGRESS };
	size_t big = sizeof(struct tpe_coop_metrics) + 64;
	unsigned char *buf = malloc(big);
	struct tpe_coop_metrics *m = (struct tpe_coop_metrics *)(void *)buf;
	size_t i, part;

	(void)state;
	assert_non_null(buf);
	assert_int_equal(run_job(coop, &c, 1), 3);
	/* calls and half of calls_timed: only calls is written. */
	part = offsetof(struct tpe_coop_metrics, calls_timed) + 4;
	memset(buf, 0xa5, big);
	assert_int_equal(tpe_coop_get_metrics(coop, m, part), 0);
	assert_int_equal(m->calls, 3);
	for (i = sizeof(uint64_t); i < part; i++)
		assert_int_equal(buf[i], 0);
	for (i = part; i < big; i++)
		assert_int_equal(buf[i], 0xa5);
	/* A newer caller's struct. */
	memset(buf, 0xa5, big);
	assert_int_equal(tpe_coop_get_metrics(coop, m, big), 0);
	assert_int_equal(m->calls, 3);
	assert_int_equal(m->call_time.count, 3);
	for (i = sizeof(*m); i < big; i++)
		assert_int_equal(buf[i], 0);
	free(buf);
	assert_int_equal(tpe_coop_destroy(coop), 0);
}

/* Every documented error. */
static void
test_coop_metrics_errors(void **state)
{
	struct tpe_coop_config bad = { 1, 0, TPE_COOP_METRICS_TIME_ALL, NULL };
	tpe_coop_t *off = coop_new(1, 0), *on = coop_new(1, TPE_COOP_METRICS);
	struct tpe_coop_metrics *m = malloc(sizeof(*m));
	tpe_coop_t *coop = NULL;

	(void)state;
	assert_non_null(m);
	assert_int_equal(tpe_coop_get_metrics(NULL, m, sizeof(*m)), EINVAL);
	assert_int_equal(tpe_coop_get_metrics(on, NULL, sizeof(*m)), EINVAL);
	assert_int_equal(tpe_coop_get_metrics(on, m, 0), EINVAL);
	assert_int_equal(tpe_coop_get_metrics(on, m, sizeof(uint64_t) - 1),
	    EINVAL);
	/* EINVAL before ENOTSUP. */
	assert_int_equal(tpe_coop_get_metrics(off, m, 0), EINVAL);
	assert_int_equal(tpe_coop_get_metrics(off, m, sizeof(*m)), ENOTSUP);
	/* TIME_ALL without METRICS; a bit the library does not know. */
	assert_int_equal(tpe_coop_create(&coop, &bad, sizeof(bad)), EINVAL);
	bad.flags = 0x80u | TPE_COOP_METRICS;
	assert_int_equal(tpe_coop_create(&coop, &bad, sizeof(bad)), EINVAL);
	assert_null(coop);
	/* A short struct needs a copy: ENOMEM when there is no memory. */
	fault_arm(&malloc_fault, 0, -1, false);
	assert_int_equal(tpe_coop_get_metrics(on, m, sizeof(uint64_t)),
	    ENOMEM);
	fault_disarm(&malloc_fault);
	assert_int_equal(tpe_coop_get_metrics(on, m, sizeof(uint64_t)), 0);
	free(m);
	assert_int_equal(tpe_coop_destroy(off), 0);
	assert_int_equal(tpe_coop_destroy(on), 0);
}

/* The blocks' allocation fails: ENOMEM, nothing left behind. */
static void
test_coop_metrics_create_enomem(void **state)
{
	struct tpe_coop_config c = { 2, 0, TPE_COOP_METRICS, NULL };
	tpe_coop_t *coop = NULL;
	long threads = tu_thread_count();
	long skip, failed;
	int rc;

	(void)state;
	/* Fail each allocation of create in turn. */
	for (skip = 0;; skip++) {
		fault_arm(&malloc_fault, skip, 1, false);
		rc = tpe_coop_create(&coop, &c, sizeof(c));
		failed = fault_disarm(&malloc_fault);
		if (failed == 0) {
			assert_int_equal(rc, 0);
			break;
		}
		assert_int_equal(rc, ENOMEM);
		assert_int_equal(tu_thread_count_settled(threads), threads);
	}
	assert_true(skip >= 3); /* coop, workers, blocks */
	assert_int_equal(tpe_coop_destroy(coop), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_coop_metrics_time_all_exact),
		cmocka_unit_test(test_coop_metrics_sampled),
		cmocka_unit_test(test_coop_metrics_blocking_tasklets),
		cmocka_unit_test(test_coop_metrics_known_delay),
		cmocka_unit_test(test_coop_metrics_idle_passes),
		cmocka_unit_test(test_coop_metrics_sized),
		cmocka_unit_test(test_coop_metrics_errors),
		cmocka_unit_test(test_coop_metrics_create_enomem),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
