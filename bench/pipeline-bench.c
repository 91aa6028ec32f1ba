/* SPDX-License-Identifier: MIT */
/*
 * pipeline-bench.c - items per second through a 3-stage pipeline
 * (source -> transform -> sink), two ways with the same items and the
 * same work per item:
 *   cooperative  three tasklets on a tpe_coop_t joined by tpe_ring_t
 *                rings (batches of up to BATCH items per call);
 *   blocking     three long-running tasks on a tpe_t pool joined by
 *                bounded blocking queues (a mutex and two condition
 *                variables each), one item per put and take, as a
 *                hand-written thread pipeline does it.
 * Prints each run, then the medians and their ratio.
 *
 *   bench/pipeline-bench [--items N] [--runs R] [--capacity C]
 *                        [--work W] [--threads T]
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tpe.h"

#define BATCH 64

static size_t items = 1000000;
static size_t capacity = 1024;
static unsigned work = 32;     /* rounds of the transform's mixing */
static size_t threads;         /* coop workers; 0: the library's default */

static int64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The work per item: a few rounds of xorshift mixing. */
static uintptr_t
transform(uintptr_t v)
{
	unsigned i;

	for (i = 0; i < work; i++) {
		v ^= v << 13;
		v ^= v >> 7;
		v ^= v << 17;
	}
	return v | 1; /* never 0 */
}

/* ---- cooperative ------------------------------------------------------- */

struct cstage {
	tpe_ring_t *in, *out;
	size_t next;          /* source: items offered */
	void *buf[BATCH];     /* transform: items not yet offered */
	size_t buf_i, buf_n;
	uintptr_t sum;        /* sink */
	size_t seen;
};

static int
c_source(void *ctx)
{
	struct cstage *s = ctx;
	int k;

	for (k = 0; k < BATCH && s->next < items; k++) {
		if (tpe_ring_offer(s->out,
		    (void *)(uintptr_t)(s->next + 1)) != 0)
			break;
		s->next++;
	}
	if (s->next == items) {
		tpe_ring_close(s->out);
		return TPE_DONE;
	}
	return k > 0 ? TPE_MADE_PROGRESS : TPE_NO_PROGRESS;
}

/* Transforms a drained batch into buf, then offers it; what the out ring
 * refuses waits in buf for the next call (backpressure). */
static int
c_transform(void *ctx)
{
	struct cstage *s = ctx;
	bool progress = false;
	size_t n, i;
	int rc;

	for (;;) {
		while (s->buf_i < s->buf_n) {
			if (tpe_ring_offer(s->out, s->buf[s->buf_i]) != 0)
				return progress ? TPE_MADE_PROGRESS :
				    TPE_NO_PROGRESS;
			s->buf_i++;
			progress = true;
		}
		rc = tpe_ring_drain(s->in, s->buf, BATCH, &n);
		if (rc == EPIPE) {
			tpe_ring_close(s->out);
			return TPE_DONE;
		}
		if (rc != 0)
			return progress ? TPE_MADE_PROGRESS : TPE_NO_PROGRESS;
		for (i = 0; i < n; i++)
			s->buf[i] = (void *)transform((uintptr_t)s->buf[i]);
		s->buf_i = 0;
		s->buf_n = n;
		if (progress)
			return TPE_MADE_PROGRESS;
	}
}

static int
c_sink(void *ctx)
{
	struct cstage *s = ctx;
	void *buf[BATCH];
	size_t n, i;
	int rc;

	rc = tpe_ring_drain(s->in, buf, BATCH, &n);
	if (rc == EAGAIN)
		return TPE_NO_PROGRESS;
	if (rc == EPIPE)
		return TPE_DONE;
	for (i = 0; i < n; i++)
		s->sum += (uintptr_t)buf[i];
	s->seen += n;
	return TPE_MADE_PROGRESS;
}

static double
run_coop(uintptr_t *sum)
{
	struct tpe_coop_config c = { threads, 0, 0, "bench" };
	struct cstage src = { 0 }, tr = { 0 }, sink = { 0 };
	tpe_ring_t *r1, *r2;
	tpe_coop_t *coop;
	tpe_job_t *job;
	int64_t t0, t1;
	int rc;

	if (tpe_ring_create(&r1, capacity) != 0 ||
	    tpe_ring_create(&r2, capacity) != 0 ||
	    tpe_coop_create(&coop, &c, sizeof(c)) != 0) {
		fprintf(stderr, "pipeline-bench: cannot set up\n");
		exit(1);
	}
	src.out = r1;
	tr.in = r1;
	tr.out = r2;
	sink.in = r2;
	{
		struct tpe_tasklet ts[] = {
			{ c_source, &src, NULL, 0 },
			{ c_transform, &tr, NULL, 0 },
			{ c_sink, &sink, NULL, 0 },
		};

		t0 = now_ns();
		rc = tpe_coop_submit(coop, ts, 3, sizeof(ts[0]), &job);
		if (rc == 0)
			rc = tpe_job_wait(job, -1);
		t1 = now_ns();
	}
	if (rc != 0 || sink.seen != items) {
		fprintf(stderr, "pipeline-bench: cooperative run failed (%d)\n",
		    rc);
		exit(1);
	}
	tpe_job_release(job);
	tpe_coop_destroy(coop);
	tpe_ring_destroy(r1);
	tpe_ring_destroy(r2);
	*sum = sink.sum;
	return (double)items * 1e9 / (double)(t1 - t0);
}

/* ---- blocking ---------------------------------------------------------- */

struct bqueue {
	pthread_mutex_t lock;
	pthread_cond_t not_empty, not_full;
	uintptr_t *buf;
	size_t head, len;
};

static void
bq_init(struct bqueue *q)
{
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->not_empty, NULL);
	pthread_cond_init(&q->not_full, NULL);
	q->buf = calloc(capacity, sizeof(*q->buf));
	q->head = q->len = 0;
	if (q->buf == NULL)
		exit(1);
}

static void
bq_destroy(struct bqueue *q)
{
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->not_empty);
	pthread_cond_destroy(&q->not_full);
	free(q->buf);
}

static void
bq_put(struct bqueue *q, uintptr_t v)
{
	pthread_mutex_lock(&q->lock);
	while (q->len == capacity)
		pthread_cond_wait(&q->not_full, &q->lock);
	q->buf[(q->head + q->len++) % capacity] = v;
	pthread_cond_signal(&q->not_empty);
	pthread_mutex_unlock(&q->lock);
}

static uintptr_t
bq_take(struct bqueue *q)
{
	uintptr_t v;

	pthread_mutex_lock(&q->lock);
	while (q->len == 0)
		pthread_cond_wait(&q->not_empty, &q->lock);
	v = q->buf[q->head];
	q->head = (q->head + 1) % capacity;
	q->len--;
	pthread_cond_signal(&q->not_full);
	pthread_mutex_unlock(&q->lock);
	return v;
}

struct bstage {
	struct bqueue *in, *out;
	uintptr_t sum;
};

/* 0 is the end of the stream (items are never 0). */
static void
b_source(void *arg)
{
	struct bstage *s = arg;
	size_t i;

	for (i = 0; i < items; i++)
		bq_put(s->out, (uintptr_t)(i + 1));
	bq_put(s->out, 0);
}

static void
b_transform(void *arg)
{
	struct bstage *s = arg;
	uintptr_t v;

	while ((v = bq_take(s->in)) != 0)
		bq_put(s->out, transform(v));
	bq_put(s->out, 0);
}

static void
b_sink(void *arg)
{
	struct bstage *s = arg;
	uintptr_t v;

	while ((v = bq_take(s->in)) != 0)
		s->sum += v;
}

static double
run_blocking(uintptr_t *sum)
{
	struct bqueue q1, q2;
	struct bstage src = { NULL, &q1, 0 }, tr = { &q1, &q2, 0 },
	    sink = { &q2, NULL, 0 };
	tpe_attr_t *a;
	tpe_t *pool;
	int64_t t0, t1;

	bq_init(&q1);
	bq_init(&q2);
	if (tpe_attr_create(&a) != 0 || tpe_attr_set_pool_size(a, 3, 3) != 0 ||
	    tpe_create(&pool, a) != 0) {
		fprintf(stderr, "pipeline-bench: cannot create the pool\n");
		exit(1);
	}
	tpe_attr_destroy(a);
	tpe_prestart_core_threads(pool, NULL);
	t0 = now_ns();
	if (tpe_execute(pool, b_sink, &sink) != 0 ||
	    tpe_execute(pool, b_transform, &tr) != 0 ||
	    tpe_execute(pool, b_source, &src) != 0) {
		fprintf(stderr, "pipeline-bench: cannot execute\n");
		exit(1);
	}
	tpe_shutdown(pool);
	tpe_await_termination(pool, -1);
	t1 = now_ns();
	tpe_destroy(pool);
	bq_destroy(&q1);
	bq_destroy(&q2);
	*sum = sink.sum;
	return (double)items * 1e9 / (double)(t1 - t0);
}

/* ---- main -------------------------------------------------------------- */

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double
median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int
main(int argc, char **argv)
{
	double coop[101], blk[101], mc, mb;
	uintptr_t s1, s2;
	int i, runs = 5;

	for (i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : "";

		if (strcmp(argv[i], "--items") == 0)
			items = strtoull(v, NULL, 10), i++;
		else if (strcmp(argv[i], "--runs") == 0)
			runs = atoi(v), i++;
		else if (strcmp(argv[i], "--capacity") == 0)
			capacity = strtoull(v, NULL, 10), i++;
		else if (strcmp(argv[i], "--work") == 0)
			work = (unsigned)atoi(v), i++;
		else if (strcmp(argv[i], "--threads") == 0)
			threads = strtoull(v, NULL, 10), i++;
		else {
			fprintf(stderr, "usage: %s [--items N] [--runs R] "
			    "[--capacity C (power of 2)] [--work W] "
			    "[--threads T]\n", argv[0]);
			return 2;
		}
	}
	if (runs < 1 || runs > 101 || items == 0 || capacity < BATCH) {
		fprintf(stderr, "pipeline-bench: bad options\n");
		return 2;
	}
	printf("pipeline: %zu items, ring/queue capacity %zu, work %u, "
	    "%d runs (median)\n", items, capacity, work, runs);
	for (i = 0; i < runs; i++) {
		coop[i] = run_coop(&s1);
		blk[i] = run_blocking(&s2);
		if (s1 != s2) {
			fprintf(stderr, "pipeline-bench: sums differ\n");
			return 1;
		}
		printf("run %d: cooperative %.0f items/s, blocking %.0f "
		    "items/s\n", i + 1, coop[i], blk[i]);
	}
	mc = median(coop, runs);
	mb = median(blk, runs);
	printf("median: cooperative %.0f items/s, blocking %.0f items/s, "
	    "ratio %.2fx (target >= 3x)\n", mc, mb, mc / mb);
	return 0;
}
