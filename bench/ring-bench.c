/* SPDX-License-Identifier: MIT */
/*
 * ring-bench.c - how fast items go through a tpe_ring_t from one thread to
 * another, against what the machine's cache coherence allows.
 *
 *   bench/ring-bench [--runs N] [--items N] [--capacity N] [--pings N]
 *                    [--batch N] [--quick] [--no-pin]
 *
 * Three figures, each the best and the median of --runs runs:
 *   1. ring throughput: a producer thread offers --items numbered items, a
 *      consumer thread takes them (one tpe_ring_poll per item, then again
 *      with tpe_ring_drain of up to --batch), items/s and ns per item;
 *   2. the cache-line round trip: two threads pass one atomic int on a
 *      shared cache line back and forth (--pings round trips), ns per
 *      round trip;
 *   3. their ratio: ns per item over ns per round trip. A ring whose two
 *      sides exchanged a line for every item would sit near 1 (or above);
 *      the cached indices and the batching of lines should bring it well
 *      below.
 * Each side spins on EAGAIN (yielding the processor now and then, for
 * shared machines); with two processors or more the two threads are
 * pinned to the first two processors of the affinity mask (--no-pin: not).
 * The figures are noisy on a loaded or virtual machine: look at the best.
 */
#define _GNU_SOURCE /* pthread_setaffinity_np, CPU_* */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tpe.h"

#define LINE 64
/* Spins on a refused offer or an empty poll before a sched_yield. */
#define SPINS_PER_YIELD 1024

struct options {
	int runs;
	unsigned long items;
	size_t capacity;
	unsigned long pings;
	size_t batch;
	int pin;
};

static int64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void
relax(unsigned *spins)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
	if (++*spins % SPINS_PER_YIELD == 0)
		sched_yield();
}

/* ---- pinning ------------------------------------------------------------ */

static int cpus[2] = { -1, -1 };

static void
find_cpus(void)
{
	cpu_set_t set;
	int n = 0;

	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return;
	for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
		if (CPU_ISSET(c, &set))
			cpus[n++] = c;
	if (n < 2)
		cpus[0] = cpus[1] = -1;
}

static void
pin_self(int which)
{
	cpu_set_t set;

	if (cpus[which] < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpus[which], &set);
	(void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/* ---- two threads started together ------------------------------------- */

struct pair {
	pthread_barrier_t start;
	int pin;
	void *(*fn[2])(void *);
	void *arg;
};

struct pair_arg {
	struct pair *p;
	int which;
};

static void *
pair_main(void *arg)
{
	struct pair_arg *a = arg;

	if (a->p->pin)
		pin_self(a->which);
	pthread_barrier_wait(&a->p->start);
	return a->p->fn[a->which](a->p->arg);
}

/* Runs fn0 and fn1 on two threads from a common start; the time from the
 * start to the end of both, in ns. */
static int64_t
run_pair(void *(*fn0)(void *), void *(*fn1)(void *), void *arg, int pin)
{
	struct pair p = { .pin = pin, .fn = { fn0, fn1 }, .arg = arg };
	struct pair_arg a[2] = { { &p, 0 }, { &p, 1 } };
	pthread_t t[2];
	int64_t t0;

	pthread_barrier_init(&p.start, NULL, 3);
	if (pthread_create(&t[0], NULL, pair_main, &a[0]) != 0 ||
	    pthread_create(&t[1], NULL, pair_main, &a[1]) != 0) {
		fprintf(stderr, "ring-bench: pthread_create failed\n");
		exit(1);
	}
	pthread_barrier_wait(&p.start);
	t0 = now_ns();
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	t0 = now_ns() - t0;
	pthread_barrier_destroy(&p.start);
	return t0;
}

/* ---- 1. the ring -------------------------------------------------------- */

struct stream {
	tpe_ring_t *ring;
	unsigned long items;
	size_t batch;             /* 0: poll */
	unsigned long bad;        /* items out of sequence: must stay 0 */
};

static void *
producer(void *arg)
{
	struct stream *s = arg;
	unsigned spins = 0;

	for (unsigned long i = 0; i < s->items; i++)
		while (tpe_ring_offer(s->ring, (void *)(uintptr_t)i) == EAGAIN)
			relax(&spins);
	tpe_ring_close(s->ring);
	return NULL;
}

static void *
consumer(void *arg)
{
	struct stream *s = arg;
	void *items[1024];
	uintptr_t next = 0;
	unsigned spins = 0;
	size_t n;
	int rc;

	for (;;) {
		if (s->batch == 0) {
			rc = tpe_ring_poll(s->ring, items);
			n = 1;
		} else {
			rc = tpe_ring_drain(s->ring, items, s->batch, &n);
		}
		if (rc == EAGAIN) {
			relax(&spins);
			continue;
		}
		if (rc != 0)
			break;
		for (size_t i = 0; i < n; i++)
			if ((uintptr_t)items[i] != next++)
				s->bad++;
	}
	return NULL;
}

/* ns per item of one run. */
static double
ring_run(const struct options *o, size_t batch)
{
	struct stream s = { .items = o->items, .batch = batch };
	int64_t ns;

	if (tpe_ring_create(&s.ring, o->capacity) != 0) {
		fprintf(stderr, "ring-bench: tpe_ring_create failed\n");
		exit(1);
	}
	ns = run_pair(producer, consumer, &s, o->pin);
	tpe_ring_destroy(s.ring);
	if (s.bad != 0) {
		fprintf(stderr, "ring-bench: items lost or reordered\n");
		exit(1);
	}
	return (double)ns / (double)o->items;
}

/* ---- 2. the cache-line round trip ------------------------------------- */

struct ping {
	/* The shared line: odd values from the pinger, even from the
	 * ponger. */
	unsigned long word __attribute__((aligned(LINE)));
	char pad_[LINE - sizeof(unsigned long)];
	unsigned long rounds;
};

static void *
pinger(void *arg)
{
	struct ping *p = arg;
	unsigned spins = 0;

	for (unsigned long i = 0; i < p->rounds; i++) {
		/* Release/acquire with the ponger's store and load: the
		 * line goes there and back once per round. */
		__atomic_store_n(&p->word, 2 * i + 1, __ATOMIC_RELEASE);
		while (__atomic_load_n(&p->word, __ATOMIC_ACQUIRE) != 2 * i + 2)
			relax(&spins);
	}
	return NULL;
}

static void *
ponger(void *arg)
{
	struct ping *p = arg;
	unsigned spins = 0;

	for (unsigned long i = 0; i < p->rounds; i++) {
		while (__atomic_load_n(&p->word, __ATOMIC_ACQUIRE) != 2 * i + 1)
			relax(&spins);
		__atomic_store_n(&p->word, 2 * i + 2, __ATOMIC_RELEASE);
	}
	return NULL;
}

/* ns per round trip of one run. */
static double
ping_run(const struct options *o)
{
	struct ping *p;
	int64_t ns;

	if ((p = aligned_alloc(LINE, sizeof(*p))) == NULL) {
		fprintf(stderr, "ring-bench: out of memory\n");
		exit(1);
	}
	p->word = 0;
	p->rounds = o->pings;
	ns = run_pair(pinger, ponger, p, o->pin);
	free(p);
	return (double)ns / (double)o->pings;
}

/* ---- the table ---------------------------------------------------------- */

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

struct figure {
	double best, median;
};

static struct figure
measure(const struct options *o, double (*run)(const struct options *,
    size_t), size_t arg)
{
	double *v = calloc((size_t)o->runs, sizeof(*v));
	struct figure f;

	if (v == NULL) {
		fprintf(stderr, "ring-bench: out of memory\n");
		exit(1);
	}
	for (int i = 0; i < o->runs; i++)
		v[i] = run(o, arg);
	qsort(v, (size_t)o->runs, sizeof(*v), cmp_double);
	f.best = v[0];
	f.median = o->runs % 2 ? v[o->runs / 2] :
	    (v[o->runs / 2 - 1] + v[o->runs / 2]) / 2;
	free(v);
	return f;
}

static double
ping_run_arg(const struct options *o, size_t unused)
{
	(void)unused;
	return ping_run(o);
}

static void
usage(void)
{
	fprintf(stderr, "usage: ring-bench [--runs N] [--items N] "
	    "[--capacity N] [--pings N] [--batch N] [--quick] [--no-pin]\n");
	exit(2);
}

static unsigned long
number(const char *s)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v == 0)
		usage();
	return v;
}

int
main(int argc, char **argv)
{
	struct options o = { .runs = 5, .items = 10000000, .capacity = 1024,
	    .pings = 1000000, .batch = 256, .pin = 1 };
	struct figure poll, drain, rtt;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--quick") == 0) {
			o.items /= 100;
			o.pings /= 100;
			o.runs = 3;
		} else if (strcmp(a, "--no-pin") == 0) {
			o.pin = 0;
		} else if (i + 1 < argc && strcmp(a, "--runs") == 0) {
			o.runs = (int)number(argv[++i]);
		} else if (i + 1 < argc && strcmp(a, "--items") == 0) {
			o.items = number(argv[++i]);
		} else if (i + 1 < argc && strcmp(a, "--capacity") == 0) {
			o.capacity = number(argv[++i]);
		} else if (i + 1 < argc && strcmp(a, "--pings") == 0) {
			o.pings = number(argv[++i]);
		} else if (i + 1 < argc && strcmp(a, "--batch") == 0) {
			o.batch = number(argv[++i]);
			if (o.batch > 1024)
				usage();
		} else {
			usage();
		}
	}
	if (o.runs > 1000)
		usage();
	if (o.pin)
		find_cpus();

	rtt = measure(&o, ping_run_arg, 0);
	poll = measure(&o, ring_run, 0);
	drain = measure(&o, ring_run, o.batch);

	printf("ring-bench: %d runs each; %lu items through a ring of %zu; "
	    "%lu round trips; threads %s\n", o.runs, o.items, o.capacity,
	    o.pings, cpus[0] >= 0 ? "pinned to two CPUs" : "not pinned");
	printf("%-34s %12s %12s %10s %10s\n", "", "best", "median",
	    "ns best", "ratio");
	printf("%-34s %12s %12s %10.1f %10s\n",
	    "cache-line round trip (ns)", "", "", rtt.best, "1.00");
	printf("%-34s %10.2fM/s %10.2fM/s %10.1f %10.3f\n",
	    "ring, poll (items/s)", 1e3 / poll.best, 1e3 / poll.median,
	    poll.best, poll.best / rtt.best);
	printf("%-34s %10.2fM/s %10.2fM/s %10.1f %10.3f\n",
	    "ring, drain (items/s)", 1e3 / drain.best, 1e3 / drain.median,
	    drain.best, drain.best / rtt.best);
	printf("(ns best: ns per item, or per round trip; ratio: ns per "
	    "item / ns per round trip, best of each;\n round trip median %.1f "
	    "ns; drain takes up to %zu items a call)\n", rtt.median, o.batch);
	return 0;
}
