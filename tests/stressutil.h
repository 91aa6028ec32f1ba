/* SPDX-License-Identifier: MIT */
/*
 * stressutil.h - helpers shared by the long programs of make check-stress
 * (tests/chaos.c, tests/long_run.c, tests/limits.c), which are plain
 * programs, not cmocka tests: a seeded random generator, the monotonic
 * clock, and the count of this process's threads.
 */
#ifndef TPE_STRESSUTIL_H
#define TPE_STRESSUTIL_H

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* xorshift64*: reproducible from a seed; the state must not be 0. */
static inline uint64_t
su_rnd_next(uint64_t *s)
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
su_rnd(uint64_t *s, unsigned n)
{
	return n ? (unsigned)(su_rnd_next(s) % n) : 0;
}

static inline int64_t
su_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void
su_sleep_ns(int64_t ns)
{
	struct timespec ts = { ns / 1000000000, ns % 1000000000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* The threads of this process, from /proc/self/task (-1: unreadable). */
static inline int
su_thread_count(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/*
 * Waits (1 s at most) for the count to come back to `want`, and returns
 * the last count: a joined thread may stay listed for a moment after
 * pthread_join returned, while the kernel finishes its exit. A thread
 * nobody joined stays.
 */
static inline int
su_thread_count_settled(int want)
{
	int64_t end = su_now_ns() + 1000000000;
	int n;

	while ((n = su_thread_count()) != want && su_now_ns() < end)
		su_sleep_ns(1000000);
	return n;
}

static inline void *
su_warm_up_main(void *arg)
{
	return arg;
}

/*
 * The baseline thread count, after a first thread came and went: a
 * runtime that starts a thread of its own with the first one
 * (ThreadSanitizer's) has it by then. `create` is pthread_create, or the
 * real one of a program that wraps it.
 */
static inline int
su_thread_baseline(int (*create)(pthread_t *, const pthread_attr_t *,
    void *(*)(void *), void *))
{
	pthread_t t;

	if (create(&t, NULL, su_warm_up_main, NULL) == 0)
		pthread_join(t, NULL);
	return su_thread_count();
}

#endif /* TPE_STRESSUTIL_H */
