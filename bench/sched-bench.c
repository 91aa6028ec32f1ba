/* SPDX-License-Identifier: MIT */
/*
 * sched-bench.c - libtpe's delayed tasks (tpe_schedule) against Java's
 * ScheduledThreadPoolExecutor, libuv timers and a timerfd per timer.
 *
 *   bench/sched-bench [--runs N] [--timers N] [--pairs N] [--samples N]
 *                     [--quick] [--java PATH] [--java-classdir D]
 *                     [--no-java]
 *
 * Each figure is the median of --runs runs (default 5), with min-max:
 *   1. cost: --timers timers (default 10^6) are made pending with delays
 *      spread over an hour (none fires), ns per schedule while filling;
 *      then --pairs (default 10^5) "schedule a timer with a random far
 *      delay, cancel it" pairs, ns per pair, with those timers pending;
 *   2. lateness on an idle peer: --samples one-shots (default 2000) with
 *      random delays of 1 to 200 ms (whole milliseconds, libuv's unit),
 *      start time minus due time measured in the task, p50 and p99 in us;
 *   3. memory (libtpe only): heap growth (mallinfo2) per pending timer
 *      with --timers pending, the future of each included.
 * --quick divides the counts by 100.
 *
 * Peers: libtpe (a pool of 2 threads, TPE_SCHED_REMOVE_ON_CANCEL;
 * tpe_schedule + tpe_future_cancel + tpe_future_release); Java
 * (bench/java/SchedBench.java in a JVM of its own:
 * ScheduledThreadPoolExecutor(2), setRemoveOnCancelPolicy(true), schedule
 * + cancel(false)); libuv (one loop, one thread: uv_timer_init +
 * uv_timer_start, cancel = uv_timer_stop; lateness in the callback under
 * uv_run); timerfd (timerfd_create + timerfd_settime, cancel = close; as
 * many pending as RLIMIT_NOFILE's hard limit allows, said in the output;
 * lateness: a thread waits on all of them with epoll).
 */
#define _GNU_SOURCE
#include <config.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h> /* mallinfo2 */
#endif
#include <sys/resource.h>
#include <sys/wait.h>
#ifdef __linux__
#include <sys/epoll.h>
#include <sys/timerfd.h>
#define HAVE_TIMERFD 1
#endif
#ifdef TPE_BENCH_HAVE_UV
#include <uv.h>
#endif

#include "tpe.h"
#include "java_child.h"

#define HOUR_MS (3600LL * 1000)
#define MIN_FAR_MS (60LL * 1000)
#define MAX_RUNS 64
#define NMETRICS 5

/* The metrics of one run, -1 when not measured. */
enum { M_FILL, M_PAIR, M_P50, M_P99, M_HEAP };
static const char *const mname[NMETRICS] = {
	"fill ns/timer", "sched+cancel ns", "p50 late us", "p99 late us",
	"heap B/timer"
};

struct peer {
	const char *name;
	const char *what;
	bool (*cost)(double *fill, double *pair, double *heap, long *pending);
	bool (*late)(double *p50, double *p99);
	double v[NMETRICS][MAX_RUNS];
	int n[NMETRICS];
	long pending;
	char err[160];
};

static struct {
	int runs;
	long timers;
	long pairs;
	long samples;
	const char *java;
	const char *java_dir;
	int timeout_s;
} P = { 5, 1000000, 100000, 2000, NULL, NULL, 600 };

static int64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t
rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* A far delay: 1 minute to 1 hour, in ms. */
static int64_t
far_ms(void)
{
	return MIN_FAR_MS + (int64_t)(rnd() % (uint64_t)(HOUR_MS - MIN_FAR_MS));
}

/* A near delay: 1 to 200 ms. */
static int64_t
near_ms(void)
{
	return 1 + (int64_t)(rnd() % 200);
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static void
percentiles(int64_t *late, long n, double *p50, double *p99)
{
	qsort(late, (size_t)n, sizeof(*late), cmp_i64);
	*p50 = (double)late[n / 2] / 1000.0;
	*p99 = (double)late[n * 99 / 100] / 1000.0;
}

static size_t
heap_used(void)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
#else
	return 0;
#endif
}

/* ---- libtpe ------------------------------------------------------------- */

static void
nop(void *arg)
{
	(void)arg;
}

static void
drop(tpe_fn fn, void *arg, void *ctx)
{
	(void)fn;
	(void)arg;
	(void)ctx;
}

static tpe_t *
tpe_pool(void)
{
	tpe_attr_t *attr;
	tpe_t *pool = NULL;

	if (tpe_attr_create(&attr) != 0)
		return NULL;
	if (tpe_attr_set_pool_size(attr, 2, 2) != 0 ||
	    tpe_attr_set_schedule_flags(attr, TPE_SCHED_REMOVE_ON_CANCEL) != 0 ||
	    tpe_create(&pool, attr) != 0)
		pool = NULL;
	tpe_attr_destroy(attr);
	return pool;
}

static bool
tpe_cost(double *fill, double *pair, double *heap, long *pending)
{
	tpe_future_t **f, *g;
	tpe_t *pool;
	size_t h0, h1;
	int64_t t0, t1, t2;
	long i;
	bool ok = true;

	f = calloc((size_t)P.timers, sizeof(*f));
	if (f == NULL || (pool = tpe_pool()) == NULL) {
		free(f);
		return false;
	}
	h0 = heap_used();
	t0 = now_ns();
	for (i = 0; i < P.timers && ok; i++)
		ok = tpe_schedule(pool, nop, NULL, far_ms() * 1000000,
		    &f[i]) == 0;
	t1 = now_ns();
	h1 = heap_used();
	for (i = 0; i < P.pairs && ok; i++) {
		ok = tpe_schedule(pool, nop, NULL, far_ms() * 1000000,
		    &g) == 0 && tpe_future_cancel(g) == 0;
		tpe_future_release(g);
	}
	t2 = now_ns();
	*fill = (double)(t1 - t0) / (double)P.timers;
	*pair = (double)(t2 - t1) / (double)P.pairs;
	*heap = h0 != 0 ? (double)(h1 - h0) / (double)P.timers : -1;
	*pending = P.timers;
	tpe_shutdown_now(pool, drop, NULL);
	tpe_await_termination(pool, INT64_C(60) * 1000000000);
	tpe_destroy(pool);
	for (i = 0; i < P.timers; i++)
		if (f[i] != NULL)
			tpe_future_release(f[i]);
	free(f);
	return ok;
}

struct sample {
	int64_t due;
	int64_t *late;
};

static void
tpe_late_task(void *arg)
{
	struct sample *s = arg;

	*s->late = now_ns() - s->due;
}

static bool
tpe_late(double *p50, double *p99)
{
	struct sample *s = calloc((size_t)P.samples, sizeof(*s));
	int64_t *late = calloc((size_t)P.samples, sizeof(*late));
	tpe_future_t **f = calloc((size_t)P.samples, sizeof(*f));
	tpe_t *pool = NULL;
	bool ok = s != NULL && late != NULL && f != NULL &&
	    (pool = tpe_pool()) != NULL;
	long i, made = 0;

	for (i = 0; i < P.samples && ok; i++) {
		int64_t d = near_ms() * 1000000;

		s[i].late = &late[i];
		s[i].due = now_ns() + d;
		ok = tpe_schedule(pool, tpe_late_task, &s[i], d, &f[i]) == 0;
		made += ok;
	}
	/*
	 * Wait for every task on its future, the pool still running: a
	 * tpe_shutdown here would measure the after-shutdown path (one task
	 * at a time on one worker), not an idle pool.
	 */
	for (i = 0; i < made; i++) {
		ok = ok && tpe_future_get(f[i], INT64_C(60) * 1000000000,
		    NULL) == 0;
		tpe_future_release(f[i]);
	}
	if (pool != NULL) {
		tpe_shutdown(pool);
		tpe_await_termination(pool, INT64_C(60) * 1000000000);
		tpe_destroy(pool);
	}
	if (ok)
		percentiles(late, P.samples, p50, p99);
	free(f);
	free(s);
	free(late);
	return ok;
}

/* ---- libuv -------------------------------------------------------------- */

#ifdef TPE_BENCH_HAVE_UV
static void
uv_nop(uv_timer_t *t)
{
	(void)t;
}

static bool
uv_cost(double *fill, double *pair, double *heap, long *pending)
{
	uv_loop_t loop;
	uv_timer_t *t, *u;
	int64_t t0, t1, t2;
	long i;

	(void)heap;
	t = calloc((size_t)P.timers, sizeof(*t));
	u = calloc((size_t)P.pairs, sizeof(*u));
	if (t == NULL || u == NULL || uv_loop_init(&loop) != 0) {
		free(t);
		free(u);
		return false;
	}
	t0 = now_ns();
	for (i = 0; i < P.timers; i++) {
		uv_timer_init(&loop, &t[i]);
		uv_timer_start(&t[i], uv_nop, (uint64_t)far_ms(), 0);
	}
	t1 = now_ns();
	for (i = 0; i < P.pairs; i++) {
		uv_timer_init(&loop, &u[i]);
		uv_timer_start(&u[i], uv_nop, (uint64_t)far_ms(), 0);
		uv_timer_stop(&u[i]);
	}
	t2 = now_ns();
	*fill = (double)(t1 - t0) / (double)P.timers;
	*pair = (double)(t2 - t1) / (double)P.pairs;
	*pending = P.timers;
	for (i = 0; i < P.timers; i++)
		uv_close((uv_handle_t *)&t[i], NULL);
	for (i = 0; i < P.pairs; i++)
		uv_close((uv_handle_t *)&u[i], NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	uv_loop_close(&loop);
	free(t);
	free(u);
	return true;
}

static void
uv_late_cb(uv_timer_t *t)
{
	struct sample *s = t->data;

	*s->late = now_ns() - s->due;
}

static bool
uv_late(double *p50, double *p99)
{
	struct sample *s = calloc((size_t)P.samples, sizeof(*s));
	int64_t *late = calloc((size_t)P.samples, sizeof(*late));
	uv_timer_t *t = calloc((size_t)P.samples, sizeof(*t));
	uv_loop_t loop;
	bool ok = s != NULL && late != NULL && t != NULL &&
	    uv_loop_init(&loop) == 0;
	long i;

	if (ok) {
		for (i = 0; i < P.samples; i++) {
			int64_t d = near_ms();

			s[i].late = &late[i];
			uv_update_time(&loop);
			s[i].due = now_ns() + d * 1000000;
			t[i].data = &s[i];
			uv_timer_init(&loop, &t[i]);
			uv_timer_start(&t[i], uv_late_cb, (uint64_t)d, 0);
		}
		uv_run(&loop, UV_RUN_DEFAULT); /* until every timer fired */
		for (i = 0; i < P.samples; i++)
			uv_close((uv_handle_t *)&t[i], NULL);
		uv_run(&loop, UV_RUN_DEFAULT);
		uv_loop_close(&loop);
		percentiles(late, P.samples, p50, p99);
	}
	free(s);
	free(late);
	free(t);
	return ok;
}
#endif

/* ---- timerfd ------------------------------------------------------------ */

#ifdef HAVE_TIMERFD
/* How many timerfds fit: the soft RLIMIT_NOFILE raised to the hard one. */
static long
fd_room(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return 0;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 1L << 30)
		return 1L << 30;
	return (long)rl.rlim_cur - 64; /* stdio, the pipes, epoll */
}

static int
tfd_arm(int64_t delay_ms)
{
	struct itimerspec its = { { 0, 0 }, { 0, 0 } };
	int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);

	if (fd < 0)
		return -1;
	its.it_value.tv_sec = delay_ms / 1000;
	its.it_value.tv_nsec = (delay_ms % 1000) * 1000000;
	if (timerfd_settime(fd, 0, &its, NULL) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static bool
tfd_cost(double *fill, double *pair, double *heap, long *pending)
{
	long n = fd_room() - 1, i, filled = 0;
	int64_t t0, t1, t2;
	int *fd, g;
	bool ok = true;

	(void)heap;
	if (n > P.timers)
		n = P.timers;
	if (n <= 0 || (fd = calloc((size_t)n, sizeof(*fd))) == NULL)
		return false;
	t0 = now_ns();
	for (i = 0; i < n && ok; i++) {
		fd[i] = tfd_arm(far_ms());
		ok = fd[i] >= 0;
		filled += ok;
	}
	t1 = now_ns();
	for (i = 0; i < P.pairs && ok; i++) {
		g = tfd_arm(far_ms());
		ok = g >= 0 && close(g) == 0;
	}
	t2 = now_ns();
	*fill = (double)(t1 - t0) / (double)n;
	*pair = (double)(t2 - t1) / (double)P.pairs;
	*pending = n;
	for (i = 0; i < filled; i++)
		close(fd[i]);
	free(fd);
	return ok;
}

struct tfd_late {
	int ep;
	long n;
	int *fd;
	struct sample *s;
};

static void *
tfd_waiter(void *arg)
{
	struct tfd_late *w = arg;
	struct epoll_event ev[64];
	long seen = 0;
	uint64_t x;
	int k, i;

	while (seen < w->n) {
		k = epoll_wait(w->ep, ev, 64, 60000);
		if (k <= 0) {
			if (k < 0 && errno == EINTR)
				continue;
			break;
		}
		for (i = 0; i < k; i++) {
			struct sample *s = &w->s[ev[i].data.u64];

			*s->late = now_ns() - s->due;
			if (read(w->fd[ev[i].data.u64], &x, sizeof(x)) < 0)
				continue;
			epoll_ctl(w->ep, EPOLL_CTL_DEL,
			    w->fd[ev[i].data.u64], NULL);
			seen++;
		}
	}
	return (void *)(intptr_t)(seen == w->n);
}

static bool
tfd_late(double *p50, double *p99)
{
	struct tfd_late w = { -1, P.samples, NULL, NULL };
	int64_t *late = calloc((size_t)P.samples, sizeof(*late));
	pthread_t th;
	void *res = NULL;
	long i, made = 0;
	bool ok;

	w.fd = calloc((size_t)P.samples, sizeof(*w.fd));
	w.s = calloc((size_t)P.samples, sizeof(*w.s));
	ok = late != NULL && w.fd != NULL && w.s != NULL &&
	    fd_room() > P.samples && (w.ep = epoll_create1(EPOLL_CLOEXEC)) >= 0;
	/* Every fd is created and watched, unarmed, before the waiter. */
	for (i = 0; i < P.samples && ok; i++) {
		struct epoll_event ev = { EPOLLIN, { .u64 = (uint64_t)i } };

		w.s[i].late = &late[i];
		w.fd[i] = timerfd_create(CLOCK_MONOTONIC,
		    TFD_NONBLOCK | TFD_CLOEXEC);
		ok = w.fd[i] >= 0 &&
		    epoll_ctl(w.ep, EPOLL_CTL_ADD, w.fd[i], &ev) == 0;
		made += w.fd[i] >= 0;
	}
	ok = ok && pthread_create(&th, NULL, tfd_waiter, &w) == 0;
	if (ok) {
		for (i = 0; i < P.samples; i++) {
			struct itimerspec its = { { 0, 0 }, { 0, 0 } };
			int64_t d = near_ms();

			its.it_value.tv_sec = d / 1000;
			its.it_value.tv_nsec = (d % 1000) * 1000000;
			w.s[i].due = now_ns() + d * 1000000;
			timerfd_settime(w.fd[i], 0, &its, NULL);
		}
		pthread_join(th, &res);
		ok = res != NULL;
	}
	if (ok)
		percentiles(late, P.samples, p50, p99);
	for (i = 0; i < made; i++)
		close(w.fd[i]);
	if (w.ep >= 0)
		close(w.ep);
	free(w.fd);
	free(w.s);
	free(late);
	return ok;
}
#endif

/* ---- Java --------------------------------------------------------------- */

static char java_version[64];

/* What run_java's lines fill: v[k0][run] and v[k0 + 1][run]. */
struct java_read {
	struct peer *pe;
	int k0, got;
};

static void
java_line(char *line, void *ctx)
{
	struct java_read *jr = ctx;
	struct peer *pe = jr->pe;

	if (strncmp(line, "version ", 8) == 0) {
		snprintf(java_version, sizeof(java_version), "%s", line + 8);
	} else if (strncmp(line, "run ", 4) == 0 && jr->got < P.runs) {
		char *end;

		pe->v[jr->k0][jr->got] = strtod(line + 4, &end);
		pe->v[jr->k0 + 1][jr->got] = strtod(end, NULL);
		jr->got++;
	} else if (strncmp(line, "error ", 6) == 0) {
		snprintf(pe->err, sizeof(pe->err), "%s", line + 6);
	}
}

/*
 * Runs SchedBench.java with args; each "run a b" line fills v[k0][run],
 * v[k0 + 1][run]. Returns the number of runs read.
 */
static int
run_java(struct peer *pe, int k0, char *const argv[])
{
	struct java_read jr = { pe, k0, 0 };

	(void)java_child_run(argv, (int64_t)P.timeout_s * 1000000000,
	    java_line, &jr, pe->err, sizeof(pe->err));
	return jr.got;
}

static void
java_all(struct peer *pe)
{
	char a_t[24], a_p[24], a_r[24], a_s[24], cls[4096];
	char o_cp[] = "-cp", o_cls[] = "SchedBench", o_cost[] = "cost";
	char o_late[] = "late";
	char *cost[] = { (char *)P.java, o_cp, (char *)P.java_dir, o_cls,
	    o_cost, a_t, a_p, a_r, NULL };
	char *late[] = { (char *)P.java, o_cp, (char *)P.java_dir, o_cls,
	    o_late, a_s, a_r, NULL };

	snprintf(cls, sizeof(cls), "%s/SchedBench.class",
	    P.java_dir != NULL ? P.java_dir : ".");
	if (P.java == NULL || P.java_dir == NULL || access(cls, R_OK) != 0) {
		snprintf(pe->err, sizeof(pe->err), "not run: %s",
		    P.java == NULL ? "no java (configure or --java)" :
		    "no SchedBench.class (make bench builds it)");
		return;
	}
	snprintf(a_t, sizeof(a_t), "%ld", P.timers);
	snprintf(a_p, sizeof(a_p), "%ld", P.pairs);
	snprintf(a_r, sizeof(a_r), "%d", P.runs);
	snprintf(a_s, sizeof(a_s), "%ld", P.samples);
	pe->n[M_FILL] = pe->n[M_PAIR] = run_java(pe, M_FILL, cost);
	pe->pending = pe->n[M_FILL] > 0 ? P.timers : 0;
	pe->n[M_P50] = pe->n[M_P99] = run_java(pe, M_P50, late);
}

/* ---- the peers, the table ----------------------------------------------- */

static struct peer peers[] = {
	{ "libtpe", "tpe_schedule + tpe_future_cancel, pool of 2, "
	    "REMOVE_ON_CANCEL", tpe_cost, tpe_late, { { 0 } }, { 0 }, 0,
	    "" },
	{ "java", "ScheduledThreadPoolExecutor(2), removeOnCancel, "
	    "schedule + cancel(false)", NULL, NULL, { { 0 } }, { 0 }, 0, "" },
#ifdef TPE_BENCH_HAVE_UV
	{ "libuv", "one loop: uv_timer_init + uv_timer_start / "
	    "uv_timer_stop", uv_cost, uv_late, { { 0 } }, { 0 }, 0, "" },
#endif
#ifdef HAVE_TIMERFD
	{ "timerfd", "a timerfd per timer: timerfd_create + "
	    "timerfd_settime / close", tfd_cost, tfd_late, { { 0 } }, { 0 },
	    0, "" },
#endif
};
#define NPEERS (sizeof(peers) / sizeof(peers[0]))

static int
cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of a metric, -1 when not measured; lo and hi its range. */
static double
med(const struct peer *pe, int k, double *lo, double *hi)
{
	double s[MAX_RUNS];
	int n = pe->n[k];

	if (n <= 0)
		return -1;
	memcpy(s, pe->v[k], (size_t)n * sizeof(double));
	qsort(s, (size_t)n, sizeof(double), cmp_d);
	if (lo != NULL)
		*lo = s[0];
	if (hi != NULL)
		*hi = s[n - 1];
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static void
cell(const struct peer *pe, int k)
{
	char b[48];
	double lo, hi, m = med(pe, k, &lo, &hi);

	if (m < 0 && pe->n[k] <= 0)
		snprintf(b, sizeof(b), "-");
	else
		snprintf(b, sizeof(b), "%.1f (%.1f-%.1f)", m, lo, hi);
	printf(" %-24s", b);
}

static struct peer *
peer_named(const char *name)
{
	size_t i;

	for (i = 0; i < NPEERS; i++)
		if (strcmp(peers[i].name, name) == 0)
			return &peers[i];
	return NULL;
}

static void
usage(FILE *f)
{
	fprintf(f, "usage: sched-bench [--runs N] [--timers N] [--pairs N] "
	    "[--samples N] [--quick]\n"
	    "                   [--java PATH] [--java-classdir D] "
	    "[--no-java]\n");
}

int
main(int argc, char **argv)
{
	bool quick = false, no_java = false;
	struct peer *lt, *jv;
	size_t p;
	int i, r, k;

#ifdef TPE_BENCH_JAVA
	P.java = TPE_BENCH_JAVA;
#endif
#ifdef TPE_BENCH_JAVA_CLASSDIR
	P.java_dir = TPE_BENCH_JAVA_CLASSDIR;
#endif
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "--quick") == 0)
			quick = true;
		else if (strcmp(a, "--no-java") == 0)
			no_java = true;
		else if (strcmp(a, "--runs") == 0 && v != NULL && ++i)
			P.runs = atoi(v);
		else if (strcmp(a, "--timers") == 0 && v != NULL && ++i)
			P.timers = atol(v);
		else if (strcmp(a, "--pairs") == 0 && v != NULL && ++i)
			P.pairs = atol(v);
		else if (strcmp(a, "--samples") == 0 && v != NULL && ++i)
			P.samples = atol(v);
		else if (strcmp(a, "--java") == 0 && v != NULL && ++i)
			P.java = v;
		else if (strcmp(a, "--java-classdir") == 0 && v != NULL && ++i)
			P.java_dir = v;
		else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (quick) {
		P.timers /= 100;
		P.pairs /= 100;
		P.samples /= 10;
	}
	if (P.runs < 1 || P.runs > MAX_RUNS || P.timers < 1 ||
	    P.pairs < 1 || P.samples < 1) {
		fprintf(stderr, "sched-bench: --runs 1..%d, counts >= 1\n",
		    MAX_RUNS);
		return 2;
	}
	printf("sched-bench: %ld pending timers (delays over 1 h), %ld "
	    "schedule+cancel pairs, %ld lateness samples (1-200 ms), "
	    "median of %d runs (min-max)\n", P.timers, P.pairs, P.samples,
	    P.runs);
	fflush(stdout);
	jv = peer_named("java");
	if (no_java)
		snprintf(jv->err, sizeof(jv->err), "not run: --no-java");
	else
		java_all(jv);
	for (r = 0; r < P.runs; r++) {
		for (p = 0; p < NPEERS; p++) {
			struct peer *pe = &peers[p];
			double a = -1, b = -1, c = -1;
			long pend = 0;

			if (pe->cost == NULL)
				continue;
			if (pe->cost(&a, &b, &c, &pend)) {
				pe->v[M_FILL][pe->n[M_FILL]++] = a;
				pe->v[M_PAIR][pe->n[M_PAIR]++] = b;
				if (c >= 0)
					pe->v[M_HEAP][pe->n[M_HEAP]++] = c;
				pe->pending = pend;
			} else {
				snprintf(pe->err, sizeof(pe->err),
				    "cost run failed");
			}
			if (pe->late(&a, &b)) {
				pe->v[M_P50][pe->n[M_P50]++] = a;
				pe->v[M_P99][pe->n[M_P99]++] = b;
			} else {
				snprintf(pe->err, sizeof(pe->err),
				    "lateness run failed");
			}
		}
	}
	printf("\n%-8s %-8s", "peer", "pending");
	for (k = 0; k < NMETRICS; k++)
		printf(" %-24s", mname[k]);
	printf("\n");
	for (p = 0; p < NPEERS; p++) {
		printf("%-8s %-8ld", peers[p].name, peers[p].pending);
		for (k = 0; k < NMETRICS; k++)
			cell(&peers[p], k);
		printf("\n");
	}
	printf("\n");
	for (p = 0; p < NPEERS; p++) {
		printf("%-8s %s%s%s\n", peers[p].name, peers[p].what,
		    peers[p].err[0] != '\0' ? "; " : "", peers[p].err);
		if (strcmp(peers[p].name, "timerfd") == 0 &&
		    peers[p].pending < P.timers)
			printf("%-8s only %ld pending (RLIMIT_NOFILE's hard "
			    "limit), not %ld\n", "", peers[p].pending,
			    P.timers);
	}
	if (java_version[0] != '\0')
		printf("java:    %s\n", java_version);
	printf("heap B/timer: mallinfo2 growth while filling, divided by "
	    "the pending count; includes each timer's future\n");

	lt = peer_named("libtpe");
	printf("\ntargets (issue 20, this machine):\n");
	{
		double a = med(lt, M_PAIR, NULL, NULL);
		double b = med(jv, M_PAIR, NULL, NULL);
		double c = med(lt, M_P99, NULL, NULL);
		double h = med(lt, M_HEAP, NULL, NULL);

		if (a < 0 || b < 0)
			printf("  %-40s not measured\n",
			    "schedule+cancel ns <= java's");
		else
			printf("  %-40s %.1f vs %.1f  %s\n",
			    "schedule+cancel ns <= java's", a, b,
			    a <= b ? "met" : "NOT met");
		if (lt->n[M_P99] <= 0)
			printf("  %-40s not measured\n", "p99 lateness <= 1 ms");
		else
			printf("  %-40s %.1f us  %s\n", "p99 lateness <= 1 ms",
			    c, c <= 1000 ? "met" : "NOT met");
		if (h < 0)
			printf("  %-40s not measured\n",
			    "heap per pending timer");
		else
			printf("  %-40s %.1f B (future included; issue: "
			    "<= 64 B beyond the task)\n",
			    "heap per pending timer", h);
	}
	return 0;
}
