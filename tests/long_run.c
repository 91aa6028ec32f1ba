/* SPDX-License-Identifier: MIT */
/*
 * long_run.c - many tasks while workers keep leaving and starting: memory
 * stays flat, no thread is left unjoined, every task runs once.
 *
 *   long_run [tasks]
 *
 * Defaults: 10^7 tasks (TPE_LONG_RUN_TASKS; .ci/phase-chaos.sh runs fewer).
 * TPE_LONG_RUN_SEED repeats a run, TPE_LONG_RUN_RSS_MB (default 64) is the
 * growth allowed after the warm-up. The pool lets its core threads time
 * out, with a keep-alive drawn between 1 us and 1 ms and drawn again every
 * batch (tpe_set_keep_alive), so its workers exit and start all the time;
 * two submitters give it batches with pauses between them, alternating
 * queue-first and scale-first pools across the run. The resident set size
 * (/proc/self/statm) is sampled after each batch: it is reported first,
 * largest and last, and the largest after the first tenth of the run may
 * exceed the value at the end of that tenth by TPE_LONG_RUN_RSS_MB at most.
 * After tpe_destroy, /proc/self/task lists as many threads as at the start,
 * each task ran exactly once, and the statistics agree.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tpe.h"

#define TU_NO_CMOCKA /* a plain program, not a cmocka test */
#include "helpers.h"

#define NSUB 2
#define BATCH 512
#define POOLS 4   /* the run is split over this many pools in turn */





static long
rss_kib(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long size = 0, resident = 0;

	if (f == NULL)
		return -1;
	if (fscanf(f, "%ld %ld", &size, &resident) != 2)
		resident = -1;
	fclose(f);
	return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static unsigned char *ran;  /* A: per task */
static uint64_t ntasks;
static uint64_t next_task;   /* A: the next batch's first task */
static uint64_t refused;     /* A: calls that returned an error */
static tpe_t *pool;
static unsigned long failures;

static uint64_t starts;      /* A: worker threads started */

static void
on_start(tpe_t *p, void *ctx)
{
	(void)p;
	(void)ctx;
	__atomic_add_fetch(&starts, 1, __ATOMIC_RELAXED);
}

static void
task(void *arg)
{
	__atomic_add_fetch(&ran[(uintptr_t)arg], 1, __ATOMIC_RELAXED);
}

struct sub {
	pthread_t t;
	uint64_t rs;
	uint64_t lo, hi;   /* this pool's share of the tasks */
};

static void *
submitter(void *arg)
{
	struct sub *s = arg;
	uint64_t i, first;
	int rc;

	for (;;) {
		first = __atomic_fetch_add(&next_task, BATCH, __ATOMIC_RELAXED);
		if (first >= s->hi)
			break;
		for (i = first; i < first + BATCH && i < s->hi; i++) {
			/* Refusals (a saturated bounded queue) are retried:
			 * every task must run. */
			while ((rc = tpe_execute(pool, task,
			    (void *)(uintptr_t)i)) != 0) {
				__atomic_add_fetch(&refused, 1, __ATOMIC_RELAXED);
				if (rc != EAGAIN) {
					fprintf(stderr, "long_run: tpe_execute "
					    "= %d\n", rc);
					__atomic_add_fetch(&failures, 1,
					    __ATOMIC_RELAXED);
					return NULL;
				}
				sched_yield();
			}
		}
		/* A pause longer than the keep-alive, now and then: the
		 * workers time out, the next batch starts new ones. */
		if (tu_rnd_next(&s->rs) % 2 == 0)
			tu_sleep_ns((int64_t)(tu_rnd_next(&s->rs) % 1500) * 1000);
		if (tu_rnd_next(&s->rs) % 8 == 0)
			(void)tpe_set_keep_alive(pool, 1000 +
			    (int64_t)(tu_rnd_next(&s->rs) % 1000000));
	}
	return NULL;
}

static void
fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "long_run: FAILED: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	failures++;
}

int
main(int argc, char **argv)
{
	const char *e;
	uint64_t seed, rs, i, completed = 0, submitted = 0;
	long rss_first = -1, rss_warm = -1, rss_max = 0, rss_last = 0, rss;
	long allowed_kib;
	int threads0, threads1;
	unsigned p, k;
	int64_t t0 = tu_now_ns();

	threads0 = tu_thread_baseline(pthread_create);
	e = getenv("TPE_LONG_RUN_TASKS");
	ntasks = argc > 1 ? strtoull(argv[1], NULL, 0) :
	    e != NULL ? strtoull(e, NULL, 0) : 10000000;
	e = getenv("TPE_LONG_RUN_SEED");
	seed = e != NULL ? strtoull(e, NULL, 0) :
	    (uint64_t)tu_now_ns() ^ ((uint64_t)getpid() << 32);
	e = getenv("TPE_LONG_RUN_RSS_MB");
	allowed_kib = (e != NULL ? atol(e) : 64) * 1024;
	if (ntasks < POOLS * BATCH)
		ntasks = POOLS * BATCH;
	printf("long_run: tasks=%" PRIu64 " seed=0x%" PRIx64 " (repeat with "
	    "TPE_LONG_RUN_SEED)\n", ntasks, seed);
	fflush(stdout);
	rs = seed | 1;
	/* Touched now, so the array is in the first sample already. */
	ran = malloc(ntasks);
	if (ran == NULL) {
		fprintf(stderr, "long_run: out of memory\n");
		return 2;
	}
	memset(ran, 0, ntasks);
	/* The compiler may turn malloc + memset into calloc, whose pages
	 * become resident only when written: write each page now. */
	for (i = 0; i < ntasks; i += 1024)
		((volatile unsigned char *)ran)[i] = 0;

	for (p = 0; p < POOLS; p++) {
		struct sub subs[NSUB];
		struct tpe_stats st;
		tpe_attr_t *a;
		uint64_t lo = ntasks / POOLS * p;
		uint64_t hi = p == POOLS - 1 ? ntasks : lo + ntasks / POOLS;
		int64_t ka = 1000 + (int64_t)(tu_rnd_next(&rs) % 1000000);
		bool scale = p % 2 == 1;

		if (tpe_attr_create(&a) != 0 ||
		    tpe_attr_set_pool_size(a, 2, 4) != 0 ||
		    tpe_attr_set_keep_alive(a, ka) != 0 ||
		    tpe_attr_set_allow_core_timeout(a, true) != 0 ||
		    tpe_attr_set_policy(a, scale ? TPE_POLICY_SCALE_FIRST :
		    TPE_POLICY_QUEUE_FIRST) != 0 ||
		    (scale && tpe_attr_set_queue(a, TPE_QUEUE_BOUNDED,
		    1024) != 0) ||
		    tpe_attr_set_thread_hooks(a, on_start, NULL, NULL) != 0 ||
		    tpe_create(&pool, a) != 0) {
			fprintf(stderr, "long_run: pool setup failed\n");
			return 2;
		}
		tpe_attr_destroy(a);
		next_task = lo;
		for (k = 0; k < NSUB; k++) {
			subs[k].rs = tu_rnd_next(&rs) | 1;
			subs[k].lo = lo;
			subs[k].hi = hi;
			if (pthread_create(&subs[k].t, NULL, submitter,
			    &subs[k]) != 0)
				return 2;
		}
		/* Sample while the submitters run. */
		for (;;) {
			uint64_t at = __atomic_load_n(&next_task,
			    __ATOMIC_RELAXED);

			rss = rss_kib();
			if (rss_first < 0)
				rss_first = rss;
			if (rss_warm < 0 && at >= ntasks / 10)
				rss_warm = rss;
			if (rss > rss_max)
				rss_max = rss;
			rss_last = rss;
			if (rss_warm >= 0 && rss - rss_warm > allowed_kib) {
				fail("RSS %ld KiB, %ld KiB after the warm-up",
				    rss, rss_warm);
				break;
			}
			if (at >= hi)
				break;
			tu_sleep_ns(20000000);
		}
		for (k = 0; k < NSUB; k++)
			pthread_join(subs[k].t, NULL);
		if (tpe_wait_idle(pool, -1) != 0)
			fail("tpe_wait_idle");
		if (tpe_get_stats(pool, &st, sizeof(st)) != 0)
			fail("tpe_get_stats");
		submitted += st.submitted;
		completed += st.completed;
		if (tpe_destroy(pool) != 0)
			fail("tpe_destroy");
		threads1 = tu_thread_count_settled(threads0);
		if (threads1 != threads0)
			fail("%d threads after tpe_destroy, %d at the start",
			    threads1, threads0);
		if (failures != 0)
			break;
		rss = rss_kib();
		if (rss > rss_max)
			rss_max = rss;
		rss_last = rss;
	}
	for (i = 0; i < ntasks && failures == 0; i++)
		if (ran[i] != 1)
			fail("task %" PRIu64 " ran %d times", i, ran[i]);
	if (submitted != ntasks || completed != ntasks)
		fail("statistics: submitted %" PRIu64 ", completed %" PRIu64
		    ", tasks %" PRIu64, submitted, completed, ntasks);
	printf("long_run: %" PRIu64 " tasks ran once each in %.1f s; %" PRIu64
	    " refusals retried; %" PRIu64 " worker threads started\n", ntasks,
	    (double)(tu_now_ns() - t0) / 1e9, refused, starts);
	printf("long_run: RSS KiB first %ld, after warm-up %ld, max %ld, last "
	    "%ld (allowed growth %ld)\n", rss_first, rss_warm, rss_max,
	    rss_last, allowed_kib);
	printf("long_run: threads at start %d, after each destroy %d\n",
	    threads0, (int)tu_thread_count());
	printf("long_run: %s\n", failures == 0 ? "OK" : "FAILED");
	free(ran);
	return failures == 0 ? 0 : 1;
}
