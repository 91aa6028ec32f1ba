/* SPDX-License-Identifier: MIT */
/*
 * testutil.h - shared helpers for the cmocka tests: a time bound per binary,
 * latches and gates to build exact pool states without sleeps, and a
 * polling wait for the few values Java itself only promises "eventually"
 * (completed counts, pool size after keep-alive).
 */
#ifndef TPE_TESTUTIL_H
#define TPE_TESTUTIL_H

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tpe.h"

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

static inline void
tu_time_bound(unsigned seconds)
{
	alarm((seconds ? seconds : TU_TIME_BOUND_S) * tu_time_scale());
}

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

	while (nanosleep(&ts, &ts) == EINTR)
		;
}

#define TU_MS (INT64_C(1000000))
#define TU_S (INT64_C(1000000000))

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

/* A no-op task. */
static inline void
tu_nop_fn(void *arg)
{
	(void)arg;
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

/* Create a pool from the common knobs; asserts success. */
static inline tpe_t *
tu_pool(size_t core, size_t max, enum tpe_queue_kind kind, size_t cap,
    enum tpe_rejection rej)
{
	tpe_attr_t *a;
	tpe_t *p;

	assert_int_equal(tpe_attr_create(&a), 0);
	assert_int_equal(tpe_attr_set_pool_size(a, core, max), 0);
	assert_int_equal(tpe_attr_set_queue(a, kind, cap), 0);
	assert_int_equal(tpe_attr_set_rejection(a, rej), 0);
	assert_int_equal(tpe_create(&p, a), 0);
	tpe_attr_destroy(a);
	return p;
}

#endif /* TPE_TESTUTIL_H */
