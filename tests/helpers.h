/* SPDX-License-Identifier: MIT */
/*
 * helpers.h - the one helpers header of tests/: every test and stress
 * program includes it. Plain helpers first (the monotonic clock, a seeded
 * random generator, this process's threads as /proc tells them, latches
 * and gates, counting and blocking tasks, bounded semaphore waits); then,
 * unless the includer defines TU_NO_CMOCKA (the stress programs of make
 * check-stress are plain programs), the cmocka ones: a time bound per
 * binary, named builders for the states most tests start from (a pool
 * with given knobs, its workers held by blocker tasks, its queue filled),
 * and a polling wait for the few values the contract only promises
 * "eventually"; then, where the includer defines TU_FAULT_INJECTION,
 * failure injection through the --wrap'ed malloc, calloc and
 * pthread_create.
 */
#ifndef TPE_TESTS_HELPERS_H
#define TPE_TESTS_HELPERS_H

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>


#include "tpe.h"

#define TU_MS (INT64_C(1000000))
#define TU_S (INT64_C(1000000000))

static inline int64_t
tu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void
tu_sleep_ns(int64_t ns)
{
	struct timespec ts = { ns / 1000000000, ns % 1000000000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* xorshift64*: reproducible from a seed; the state must not be 0. */
static inline uint64_t
tu_rnd_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * UINT64_C(2685821657736338717);
}

/* A number below n (0 when n is 0). */
static inline unsigned
tu_rnd(uint64_t *s, unsigned n)
{
	return n ? (unsigned)(tu_rnd_next(s) % n) : 0;
}

/*
 * The number of threads in this process (the entries of /proc/self/task),
 * or -1 where there is no /proc: a test that counts the threads a call
 * started or joined skips itself then.
 */
static inline long
tu_thread_count(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	long n = 0;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/*
 * Waits (1 s at most) for the thread count to come back to `want`, and
 * returns the last count: a joined thread may stay listed for a moment
 * after pthread_join returned, while the kernel finishes its exit. A
 * thread nobody joined stays.
 */
static inline long
tu_thread_count_settled(long want)
{
	int64_t end = tu_now_ns() + TU_S;
	long n;

	while ((n = tu_thread_count()) != want && tu_now_ns() < end)
		tu_sleep_ns(TU_MS);
	return n;
}

static inline void *
tu_warm_up_main(void *arg)
{
	return arg;
}

/*
 * The baseline thread count, after a first thread came and went: a
 * runtime that starts a thread of its own with the first one
 * (ThreadSanitizer's) has it by then. `create` is pthread_create, or the
 * real one of a program that wraps it.
 */
static inline long
tu_thread_baseline(int (*create)(pthread_t *, const pthread_attr_t *,
    void *(*)(void *), void *))
{
	pthread_t t;

	if (create(&t, NULL, tu_warm_up_main, NULL) == 0)
		pthread_join(t, NULL);
	return tu_thread_count();
}

/*
 * A thread of this process as the kernel sees it (Linux /proc): its
 * context switches so far, voluntary and not (each wake-up of a sleeping
 * thread is one), and its state letter ('S' asleep, 'R' running). -1 and
 * '?' where /proc cannot tell. Tests count wake-ups with them instead of
 * measuring CPU time.
 */
static inline long
tu_thread_switches(long tid)
{
	char path[64], line[128];
	long n = 0, v;
	int found = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%ld/status", tid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1 ||
		    sscanf(line, "nonvoluntary_ctxt_switches: %ld", &v) == 1) {
			n += v;
			found++;
		}
	fclose(f);
	return found == 2 ? n : -1;
}

static inline char
tu_thread_state(long tid)
{
	char path[64], buf[256], *p, c = '?';
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%ld/stat", tid);
	if ((f = fopen(path, "r")) == NULL)
		return c;
	/* "tid (name) S ...": the name may hold spaces and parentheses. */
	if (fgets(buf, sizeof(buf), f) != NULL &&
	    (p = strrchr(buf, ')')) != NULL && p[1] == ' ')
		c = p[2];
	fclose(f);
	return c;
}

/*
 * The threads a pool started, recorded by its on_start hook:
 *
 *	struct tu_tids tids = TU_TIDS_INIT;
 *	p = tu_pool_with(&(struct tu_pool_opts){ ...,
 *	    .on_start = tu_tids_hook, .thread_hooks_ctx = &tids });
 */
#define TU_TIDS_MAX 64
struct tu_tids {
	pthread_mutex_t lock;
	long tid[TU_TIDS_MAX];
	size_t n;
};
#define TU_TIDS_INIT { PTHREAD_MUTEX_INITIALIZER, { 0 }, 0 }

static inline void
tu_tids_hook(tpe_t *pool, void *ctx)
{
	struct tu_tids *t = ctx;

	(void)pool;
	pthread_mutex_lock(&t->lock);
	if (t->n < TU_TIDS_MAX)
		t->tid[t->n++] = (long)syscall(SYS_gettid);
	pthread_mutex_unlock(&t->lock);
}

/*
 * The threads of this process that are not in `old` (the threads that a
 * call such as thpool_init started, where no hook can record them), or
 * false where there is no /proc.
 */
static inline bool
tu_tids_new_since(struct tu_tids *t, const struct tu_tids *old)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	size_t i;
	long tid;

	t->n = 0;
	if (d == NULL)
		return false;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		tid = strtol(e->d_name, NULL, 10);
		for (i = 0; old != NULL && i < old->n; i++)
			if (old->tid[i] == tid)
				break;
		if ((old == NULL || i == old->n) && t->n < TU_TIDS_MAX)
			t->tid[t->n++] = tid;
	}
	closedir(d);
	return true;
}

/*
 * How a thread of this process waits, from /proc/self/task/TID/syscall
 * (Linux, glibc): TU_WAIT_UNTIMED when it sleeps in a condition wait with
 * no time-out (a futex FUTEX_WAIT_BITSET without a timeout: a wait only a
 * wake-up ends), TU_WAIT_TIMED in one with a time-out, TU_WAIT_LOCK when
 * it sleeps on a busy mutex (FUTEX_WAIT), TU_WAIT_OTHER when it runs or
 * waits in another call, TU_WAIT_GONE when it has exited,
 * TU_WAIT_UNKNOWN when this system cannot tell.
 */
enum { TU_WAIT_UNKNOWN = -2, TU_WAIT_GONE = -1, TU_WAIT_OTHER = 0,
    TU_WAIT_UNTIMED = 1, TU_WAIT_TIMED = 2, TU_WAIT_LOCK = 3 };

static inline int
tu_thread_wait_kind(long tid)
{
#if defined(__linux__) && defined(SYS_futex)
	char path[64], buf[256];
	unsigned long nr, uaddr, op, val, timeout;
	FILE *f;
	int n;

	snprintf(path, sizeof(path), "/proc/self/task/%ld/syscall", tid);
	if ((f = fopen(path, "r")) == NULL)
		return errno == ENOENT && access("/proc/self/task", F_OK) == 0 ?
		    TU_WAIT_GONE : TU_WAIT_UNKNOWN;
	n = fgets(buf, sizeof(buf), f) != NULL ? sscanf(buf,
	    "%lu %lx %lx %lx %lx", &nr, &uaddr, &op, &val, &timeout) : 0;
	fclose(f);
	if (n == 0 && strncmp(buf, "running", 7) == 0)
		return TU_WAIT_OTHER;
	if (n != 5)
		return n == 0 ? TU_WAIT_UNKNOWN : TU_WAIT_OTHER;
	/* FUTEX_WAIT is 0, FUTEX_WAIT_BITSET 9; the private flag is 128. */
	if (nr != SYS_futex)
		return TU_WAIT_OTHER;
	if ((op & 127) == 9)
		return timeout == 0 ? TU_WAIT_UNTIMED : TU_WAIT_TIMED;
	return (op & 127) == 0 && timeout == 0 ? TU_WAIT_LOCK : TU_WAIT_OTHER;
#else
	(void)tid;
	return TU_WAIT_UNKNOWN;
#endif
}

/*
 * Whether exactly `n` of the recorded threads live, each asleep in a wait
 * without a time-out: then none of them can leave on a keep-alive, however
 * long the test waited. -1 when this system cannot tell.
 */
static inline int
tu_tids_wait_untimed(struct tu_tids *t, size_t n)
{
	size_t i, live = 0;
	int k, all = 1;

	pthread_mutex_lock(&t->lock);
	for (i = 0; i < t->n; i++) {
		k = tu_thread_wait_kind(t->tid[i]);
		if (k == TU_WAIT_UNKNOWN) {
			pthread_mutex_unlock(&t->lock);
			return -1;
		}
		if (k == TU_WAIT_GONE)
			continue;
		live++;
		if (k != TU_WAIT_UNTIMED)
			all = 0;
	}
	pthread_mutex_unlock(&t->lock);
	return all && live == n;
}

/*
 * The moment `timeout_ns` from now on CLOCK_REALTIME, the clock of
 * pthread_cond_timedwait (default attributes) and sem_timedwait.
 */
static inline struct timespec
tu_deadline(int64_t timeout_ns)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += timeout_ns / TU_S;
	ts.tv_nsec += timeout_ns % TU_S;
	if (ts.tv_nsec >= TU_S) {
		ts.tv_sec++;
		ts.tv_nsec -= TU_S;
	}
	return ts;
}

/*
 * A latch: count_down() n times opens it; wait() blocks until open.
 * A gate is a latch of 1: tasks wait on it, the test opens it.
 */
struct tu_latch {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	long count;
};

static inline void
tu_latch_init(struct tu_latch *l, long count)
{
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->cond, NULL);
	l->count = count;
}

static inline void
tu_latch_destroy(struct tu_latch *l)
{
	pthread_mutex_destroy(&l->lock);
	pthread_cond_destroy(&l->cond);
}

static inline void
tu_latch_count_down(struct tu_latch *l)
{
	pthread_mutex_lock(&l->lock);
	if (l->count > 0 && --l->count == 0)
		pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
}

static inline void
tu_latch_wait(struct tu_latch *l)
{
	pthread_mutex_lock(&l->lock);
	while (l->count > 0)
		pthread_cond_wait(&l->cond, &l->lock);
	pthread_mutex_unlock(&l->lock);
}

/*
 * Waits until the latch opens or `timeout_ns` passes; true if it opened.
 * For waits that a bug could make endless: the test fails at once instead
 * of running into the binary's time bound.
 */
static inline bool
tu_latch_wait_for(struct tu_latch *l, int64_t timeout_ns)
{
	struct timespec ts = tu_deadline(timeout_ns);
	bool open;

	pthread_mutex_lock(&l->lock);
	while (l->count > 0 &&
	    pthread_cond_timedwait(&l->cond, &l->lock, &ts) == 0)
		;
	open = l->count == 0;
	pthread_mutex_unlock(&l->lock);
	return open;
}

static inline long
tu_latch_count(struct tu_latch *l)
{
	long c;

	pthread_mutex_lock(&l->lock);
	c = l->count;
	pthread_mutex_unlock(&l->lock);
	return c;
}

/*
 * A blocker task: counts `started` down, then waits for `release`, then
 * counts `done` down. Pass a struct tu_blocker as the task argument.
 */
struct tu_blocker {
	struct tu_latch *started; /* may be NULL */
	struct tu_latch *release; /* may be NULL: returns at once */
	struct tu_latch *done;    /* may be NULL */
	int ran;                  /* incremented under release->lock or atomically */
};

static inline void
tu_blocker_fn(void *arg)
{
	struct tu_blocker *b = arg;

	__atomic_add_fetch(&b->ran, 1, __ATOMIC_SEQ_CST);
	if (b->started)
		tu_latch_count_down(b->started);
	if (b->release)
		tu_latch_wait(b->release);
	if (b->done)
		tu_latch_count_down(b->done);
}

/* How many times a blocker ran: the `ran` field of a struct tu_blocker (or
 * of any test struct with an atomic int `ran`), read atomically. */
#define tu_ran(obj) __atomic_load_n(&(obj)->ran, __ATOMIC_SEQ_CST)

/* A counting task: atomically increments the int it is given. */
static inline void
tu_count_fn(void *arg)
{
	__atomic_add_fetch((int *)arg, 1, __ATOMIC_SEQ_CST);
}

static inline int
tu_load(const int *p)
{
	return __atomic_load_n(p, __ATOMIC_SEQ_CST);
}

/* A task that posts the semaphore (sem_t) it is given. */
static inline void
tu_post_fn(void *arg)
{
	sem_post(arg);
}

/* Waits for a post of sem for at most `timeout_ns`; false if that passed
 * (for waits that only a bug, such as a stranded task, makes endless). */
static inline bool
tu_sem_wait_for(sem_t *sem, int64_t timeout_ns)
{
	struct timespec ts = tu_deadline(timeout_ns);

	while (sem_timedwait(sem, &ts) != 0)
		if (errno != EINTR)
			return false;
	return true;
}

/* A no-op task. */
static inline void
tu_nop_fn(void *arg)
{
	(void)arg;
}

/* The tasks above as callables for tpe_submit: each returns its arg. */
static inline void *
tu_count_call(void *arg)
{
	tu_count_fn(arg);
	return arg;
}

static inline void *
tu_blocker_call(void *arg)
{
	tu_blocker_fn(arg);
	return arg;
}

static inline void *
tu_nop_call(void *arg)
{
	return arg;
}

/*
 * Counting hooks: each adds one (atomically) to its field of the struct
 * tu_hook_counts given as the hooks' ctx (task_hooks_ctx,
 * thread_hooks_ctx, terminated_ctx of struct tu_pool_opts).
 */
struct tu_hook_counts {
	int before, after, start, exit, terminated; /* atomic */
};

static inline void
tu_count_before(tpe_t *pool, tpe_fn fn, void *arg, void *ctx)
{
	(void)pool;
	(void)fn;
	(void)arg;
	tu_count_fn(&((struct tu_hook_counts *)ctx)->before);
}

static inline void
tu_count_after(tpe_t *pool, tpe_fn fn, void *arg, void *ctx)
{
	(void)pool;
	(void)fn;
	(void)arg;
	tu_count_fn(&((struct tu_hook_counts *)ctx)->after);
}

static inline void
tu_count_start(tpe_t *pool, void *ctx)
{
	(void)pool;
	tu_count_fn(&((struct tu_hook_counts *)ctx)->start);
}

static inline void
tu_count_exit(tpe_t *pool, void *ctx)
{
	(void)pool;
	tu_count_fn(&((struct tu_hook_counts *)ctx)->exit);
}

static inline void
tu_count_terminated(tpe_t *pool, void *ctx)
{
	(void)pool;
	tu_count_fn(&((struct tu_hook_counts *)ctx)->terminated);
}

/*
 * A log of hand-backs, for a discard callback or the drained callback of
 * tpe_shutdown_now: tu_handback_fn with a struct tu_handbacks as its ctx
 * records each task's fn and arg (the first TU_HB_MAX) and counts them all.
 */
#define TU_HB_MAX 16
struct tu_handbacks {
	pthread_mutex_t lock;
	int n;
	tpe_fn fn[TU_HB_MAX];
	void *arg[TU_HB_MAX];
};

static inline void
tu_handbacks_init(struct tu_handbacks *l)
{
	memset(l, 0, sizeof(*l));
	pthread_mutex_init(&l->lock, NULL);
}

static inline void
tu_handback_fn(tpe_fn fn, void *arg, void *ctx)
{
	struct tu_handbacks *l = ctx;

	pthread_mutex_lock(&l->lock);
	if (l->n < TU_HB_MAX) {
		l->fn[l->n] = fn;
		l->arg[l->n] = arg;
	}
	l->n++;
	pthread_mutex_unlock(&l->lock);
}

static inline int
tu_handbacks_count(struct tu_handbacks *l)
{
	int n;

	pthread_mutex_lock(&l->lock);
	n = l->n;
	pthread_mutex_unlock(&l->lock);
	return n;
}

#ifndef TU_NO_CMOCKA
#include <cmocka.h>

/*
 * Every test binary calls this first: it is killed (SIGALRM) past the bound,
 * `seconds` (0: TU_TIME_BOUND_S) times the environment's TPE_TEST_TIME_SCALE,
 * a whole number from 1 to 1000 (anything else counts as 1), for slow build
 * machines. build-aux/run-test.sh multiplies its outer bound,
 * TPE_TEST_TIMEOUT (300 s), by the same factor, so that one stays larger.
 */
#define TU_TIME_BOUND_S 120
static inline unsigned
tu_time_scale(void)
{
	const char *e = getenv("TPE_TEST_TIME_SCALE");
	unsigned long v;
	char *end;

	if (e == NULL || *e < '1' || *e > '9')
		return 1;
	v = strtoul(e, &end, 10);
	return *end == '\0' && v <= 1000 ? (unsigned)v : 1;
}

/*
 * It also applies TPE_TEST_FILTER, a cmocka glob over the case names
 * (build-aux/mutation-check.sh runs one case of a binary with it).
 */
static inline void
tu_time_bound(unsigned seconds)
{
	const char *filter = getenv("TPE_TEST_FILTER");

	if (filter != NULL && *filter != '\0')
		cmocka_set_test_filter(filter);
	alarm((seconds ? seconds : TU_TIME_BOUND_S) * tu_time_scale());
}

/*
 * One row of a table of cases as a cmocka case of its own: the row's name
 * is the case's name (TPE_TEST_FILTER and build-aux/mutations/ select
 * it), the row is the state the one test function reads.
 *
 *	static const struct row rows[] = { { "test_x_a", ... }, ... };
 *	TU_ROW_TEST(test_x, &rows[0]), TU_ROW_TEST(test_x, &rows[1]),
 */
#define TU_ROW_TEST(fn, row)                                               \
	((struct CMUnitTest){ .name = (row)->name, .test_func = (fn),      \
	    .initial_state = (void *)(row) })

/*
 * A value an out-parameter starts from, so that "not written" is told
 * apart from "wrote NULL": a call that must not write leaves it equal to
 * TU_SENTINEL. Never dereferenced.
 */
static char tu_sentinel_ __attribute__((unused));
#define TU_SENTINEL ((void *)&tu_sentinel_)

/*
 * Asserts the name of a pool's thread, as pthread_getname_np read it: want,
 * where the library names its threads (HAVE_PTHREAD_SETNAME_NP, config.h);
 * elsewhere anything but want (the library left the inherited name).
 */
static inline void
tu_assert_thread_name(const char *got, const char *want)
{
#ifdef HAVE_PTHREAD_SETNAME_NP
	assert_string_equal(got, want);
#else
	assert_string_not_equal(got, want);
#endif
}

/*
 * Poll a condition on pool statistics for at most `timeout_ns`; used only
 * where the contract itself says "eventually" (e.g. completed counts are
 * updated after the after-hook, threads exit after keep-alive). Returns
 * true when the condition held.
 */
#define TU_EVENTUALLY(cond, timeout_ns)                                    \
	({                                                                 \
		int64_t tu_deadline_ = tu_now_ns() + (timeout_ns);         \
		bool tu_ok_;                                               \
		while (!(tu_ok_ = (cond)) && tu_now_ns() < tu_deadline_)   \
			tu_sleep_ns(TU_MS / 2);                            \
		tu_ok_;                                                    \
	})

static inline struct tpe_stats
tu_stats(const tpe_t *pool)
{
	struct tpe_stats s;

	assert_int_equal(tpe_get_stats(pool, &s, sizeof(s)), 0);
	return s;
}

/*
 * The knobs of a test pool. A field left 0 (NULL, false) keeps the
 * library's default, so a test names only what its state needs, with
 * designated initialisers:
 *
 *	p = tu_pool_with(&(struct tu_pool_opts){ .core = 1, .max = 2,
 *	    .queue = TPE_QUEUE_BOUNDED, .capacity = 1,
 *	    .keep_alive = 10 * TU_MS });
 *
 * max 0 keeps the default sizes; keep_alive 0 keeps the default keep-alive
 * (TU_KEEP_ALIVE_ZERO asks for a keep-alive of 0); a reject_handler is
 * installed instead of `rejection`.
 */
#define TU_KEEP_ALIVE_ZERO INT64_MIN
struct tu_pool_opts {
	size_t core, max;
	enum tpe_queue_kind queue;
	size_t capacity;
	enum tpe_policy policy;
	enum tpe_rejection rejection;
	tpe_reject_fn reject_handler;
	void *reject_ctx;
	int64_t keep_alive;               /* ns */
	bool allow_core_timeout;
	const char *thread_name;
	tpe_handback_fn discard;
	void *discard_ctx;
	tpe_task_hook_fn before, after;   /* task hooks */
	void *task_hooks_ctx;
	tpe_pool_hook_fn on_start, on_exit; /* thread hooks */
	void *thread_hooks_ctx;
	tpe_pool_hook_fn terminated;
	void *terminated_ctx;
};

/* Attributes with the given knobs, for a test that creates several pools
 * from one set; asserts every setter succeeds. */
static inline tpe_attr_t *
tu_attr_with(const struct tu_pool_opts *o)
{
	tpe_attr_t *a;

	assert_int_equal(tpe_attr_create(&a), 0);
	if (o->max != 0)
		assert_int_equal(tpe_attr_set_pool_size(a, o->core, o->max), 0);
	assert_int_equal(tpe_attr_set_queue(a, o->queue, o->capacity), 0);
	assert_int_equal(tpe_attr_set_policy(a, o->policy), 0);
	if (o->reject_handler != NULL)
		assert_int_equal(tpe_attr_set_rejection_handler(a,
		    o->reject_handler, o->reject_ctx), 0);
	else
		assert_int_equal(tpe_attr_set_rejection(a, o->rejection), 0);
	/* Keep-alive first: allow-core-timeout needs a non-zero one. */
	if (o->keep_alive == TU_KEEP_ALIVE_ZERO)
		assert_int_equal(tpe_attr_set_keep_alive(a, 0), 0);
	else if (o->keep_alive != 0)
		assert_int_equal(tpe_attr_set_keep_alive(a, o->keep_alive), 0);
	if (o->allow_core_timeout)
		assert_int_equal(tpe_attr_set_allow_core_timeout(a, true), 0);
	if (o->thread_name != NULL)
		assert_int_equal(tpe_attr_set_thread_name(a, o->thread_name),
		    0);
	if (o->discard != NULL)
		assert_int_equal(tpe_attr_set_discard_callback(a, o->discard,
		    o->discard_ctx), 0);
	if (o->before != NULL || o->after != NULL)
		assert_int_equal(tpe_attr_set_task_hooks(a, o->before, o->after,
		    o->task_hooks_ctx), 0);
	if (o->on_start != NULL || o->on_exit != NULL)
		assert_int_equal(tpe_attr_set_thread_hooks(a, o->on_start,
		    o->on_exit, o->thread_hooks_ctx), 0);
	if (o->terminated != NULL)
		assert_int_equal(tpe_attr_set_terminated_hook(a, o->terminated,
		    o->terminated_ctx), 0);
	return a;
}

/* A pool with the given knobs; asserts success. */
static inline tpe_t *
tu_pool_with(const struct tu_pool_opts *o)
{
	tpe_attr_t *a = tu_attr_with(o);
	tpe_t *p;

	assert_int_equal(tpe_create(&p, a), 0);
	tpe_attr_destroy(a);
	return p;
}

/* A pool with the given knobs and `reserved` reservable threads
 * (tpe_attr_set_reserved_threads); asserts success. */
static inline tpe_t *
tu_pool_reserving(const struct tu_pool_opts *o, int reserved)
{
	tpe_attr_t *a = tu_attr_with(o);
	tpe_t *p;

	assert_int_equal(tpe_attr_set_reserved_threads(a, reserved), 0);
	assert_int_equal(tpe_create(&p, a), 0);
	tpe_attr_destroy(a);
	return p;
}

/* A pool from the most common knobs; asserts success. */
static inline tpe_t *
tu_pool(size_t core, size_t max, enum tpe_queue_kind kind, size_t cap,
    enum tpe_rejection rej)
{
	return tu_pool_with(&(struct tu_pool_opts){ .core = core, .max = max,
	    .queue = kind, .capacity = cap, .rejection = rej });
}

/*
 * A saturated pool, libuv's saturate_threadpool(): `running` workers each
 * held by a blocker task, and `queued` more blockers behind them, all
 * waiting on one gate. tu_saturate() submits running + queued blockers,
 * b[0] first, asserting each is accepted, and returns once `running` of
 * them have started (failing the test if that takes TU_WAIT_BOUND). Which
 * ones run is the pool's policy: the caller picks knobs under which
 * `running` workers can start (for queue-first with core < running, the
 * queued ones must fill the queue first). tu_unsaturate() opens the gate;
 * tu_saturation_destroy() comes after the blockers returned (after
 * tpe_destroy or tpe_await_termination).
 */
#define TU_WAIT_BOUND (10 * TU_S) /* far beyond any correct run */
#define TU_SAT_MAX 64
struct tu_saturation {
	struct tu_latch started, release;
	struct tu_blocker b[TU_SAT_MAX];
};

static inline void
tu_saturate(tpe_t *pool, size_t running, size_t queued,
    struct tu_saturation *sat)
{
	size_t i;

	assert_true(running + queued <= TU_SAT_MAX);
	tu_latch_init(&sat->started, (long)running);
	tu_latch_init(&sat->release, 1);
	for (i = 0; i < running + queued; i++) {
		sat->b[i] = (struct tu_blocker){ &sat->started, &sat->release,
		    NULL, 0 };
		assert_int_equal(tpe_execute(pool, tu_blocker_fn, &sat->b[i]),
		    0);
	}
	assert_true(tu_latch_wait_for(&sat->started, TU_WAIT_BOUND));
}

static inline void
tu_unsaturate(struct tu_saturation *sat)
{
	tu_latch_count_down(&sat->release);
}

static inline void
tu_saturation_destroy(struct tu_saturation *sat)
{
	tu_latch_destroy(&sat->started);
	tu_latch_destroy(&sat->release);
}

/*
 * Fills the queue of a saturated pool: submits fn `n` times, asserting
 * each is accepted. Task i gets (char *)arg + i * stride: stride 0 gives
 * every task the same argument, sizeof(a[0]) one element of array a each.
 */
static inline void
tu_fill_queue(tpe_t *pool, size_t n, tpe_fn fn, void *arg, size_t stride)
{
	size_t i;

	for (i = 0; i < n; i++)
		assert_int_equal(tpe_execute(pool, fn,
		    (char *)arg + i * stride), 0);
}

#endif /* TU_NO_CMOCKA */

#ifdef TU_FAULT_INJECTION
/*
 * Failure injection, for a test linked with
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=pthread_create (tests/Makefile.inc,
 * TPE_WRAP_FAULT): it defines TU_FAULT_INJECTION before including this
 * header, in its one file. Armed faults, and the malloc, calloc and
 * pthread_create wrappers that obey them.
 *
 * The library's calls (and the test's) go through the __wrap_ functions,
 * which call the real ones unless a test armed a failure. cmocka and libc
 * allocate through their own, unwrapped references, but the arming is kept
 * as narrow as possible anyway: only around the call under test and, for
 * malloc, only for calls from the arming thread.
 */
#include "pool/node_cache.h"

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
int __real_pthread_create(pthread_t *thread, const pthread_attr_t *attr,
    void *(*start)(void *), void *arg);

void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
int __wrap_pthread_create(pthread_t *thread, const pthread_attr_t *attr,
    void *(*start)(void *), void *arg);

/*
 * An armed failure: the first `skip` matching calls succeed, the next
 * `count` fail (count < 0: all of them). Only calls from `thread` match
 * unless `any_thread`. All fields are read and written atomically.
 */
struct fault {
	int armed;
	int any_thread;
	pthread_t thread;
	long skip;
	long count;
	long seen;    /* matching calls while armed */
	long failed;  /* calls made to fail */
};

static struct fault malloc_fault;   /* malloc and calloc share it */
static struct fault create_fault;

/* The error an armed pthread_create fault returns (a test may change it). */
static int create_errno = EAGAIN;

/* A test's own pthread_create, called (when set) instead of the real one
 * for the calls the armed fault lets through, to build a state around a
 * thread start. */
static int (*create_around)(pthread_t *thread, const pthread_attr_t *attr,
    void *(*start)(void *), void *arg);

static inline bool
fault_hit(struct fault *f)
{
	long n, count;

	if (!__atomic_load_n(&f->armed, __ATOMIC_SEQ_CST))
		return false;
	if (!__atomic_load_n(&f->any_thread, __ATOMIC_SEQ_CST) &&
	    !pthread_equal(pthread_self(), f->thread))
		return false;
	n = __atomic_fetch_add(&f->seen, 1, __ATOMIC_SEQ_CST);
	if (n < f->skip)
		return false;
	count = f->count;
	if (count >= 0 && n - f->skip >= count)
		return false;
	__atomic_add_fetch(&f->failed, 1, __ATOMIC_SEQ_CST);
	return true;
}

static inline void
fault_arm(struct fault *f, long skip, long count, bool any_thread)
{
	/* Nodes cached by this thread (lib/pool/node_cache.c) would hide
	 * allocations: every armed call starts from an empty cache. */
	tpe__node_cache_flush();
	f->thread = pthread_self();
	f->skip = skip;
	f->count = count;
	f->seen = 0;
	f->failed = 0;
	__atomic_store_n(&f->any_thread, any_thread ? 1 : 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&f->armed, 1, __ATOMIC_SEQ_CST);
}

/* Disarms; returns how many calls were made to fail. */
static inline long
fault_disarm(struct fault *f)
{
	__atomic_store_n(&f->armed, 0, __ATOMIC_SEQ_CST);
	return __atomic_load_n(&f->failed, __ATOMIC_SEQ_CST);
}

void *
__wrap_malloc(size_t size)
{
	if (fault_hit(&malloc_fault)) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_malloc(size);
}

void *
__wrap_calloc(size_t n, size_t size)
{
	if (fault_hit(&malloc_fault)) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_calloc(n, size);
}

int
__wrap_pthread_create(pthread_t *thread, const pthread_attr_t *attr,
    void *(*start)(void *), void *arg)
{
	if (fault_hit(&create_fault))
		return create_errno;
	if (create_around != NULL)
		return create_around(thread, attr, start, arg);
	return __real_pthread_create(thread, attr, start, arg);
}
/*
 * Task nodes come in chunks from posix_memalign (lib/pool/node_cache.c),
 * and so do the metrics' cache-line-aligned blocks: failed with malloc
 * and calloc (TPE_WRAP_FAULT has --wrap=posix_memalign too).
 */
int __real_posix_memalign(void **p, size_t align, size_t size);
int __wrap_posix_memalign(void **p, size_t align, size_t size);

int
__wrap_posix_memalign(void **p, size_t align, size_t size)
{
	if (fault_hit(&malloc_fault))
		return ENOMEM;
	return __real_posix_memalign(p, align, size);
}

#endif /* TU_FAULT_INJECTION */

#endif /* TPE_TESTS_HELPERS_H */
