/* SPDX-License-Identifier: MIT */
/* sync.c - pthread wrappers that abort on broken invariants, monotonic waits. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sync.h"

void
tpe__panic(const char *what, int err)
{
	fprintf(stderr, "libtpe: %s: %s\n", what, strerror(err));
	abort();
}

#define CHECKED(call, what)                                               \
	do {                                                              \
		int rc_ = (call);                                         \
		if (rc_ != 0)                                             \
			tpe__panic(what, rc_);                            \
	} while (0)

void
tpe__mutex_init(pthread_mutex_t *m)
{
	pthread_mutexattr_t ma;

	CHECKED(pthread_mutexattr_init(&ma), "pthread_mutexattr_init");
#if defined(__GLIBC__)
	/* Critical sections are a few dozen instructions: spin a little on
	 * contention before sleeping in the kernel. */
	CHECKED(pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP),
	    "pthread_mutexattr_settype");
#endif
	CHECKED(pthread_mutex_init(m, &ma), "pthread_mutex_init");
	pthread_mutexattr_destroy(&ma);
}

void
tpe__mutex_destroy(pthread_mutex_t *m)
{
	CHECKED(pthread_mutex_destroy(m), "pthread_mutex_destroy");
}

void
tpe__mutex_lock(pthread_mutex_t *m)
{
	CHECKED(pthread_mutex_lock(m), "pthread_mutex_lock");
}

void
tpe__mutex_unlock(pthread_mutex_t *m)
{
	CHECKED(pthread_mutex_unlock(m), "pthread_mutex_unlock");
}

void
tpe__cond_init(pthread_cond_t *c)
{
	pthread_condattr_t ca;

	CHECKED(pthread_condattr_init(&ca), "pthread_condattr_init");
	CHECKED(pthread_condattr_setclock(&ca, CLOCK_MONOTONIC),
	    "pthread_condattr_setclock");
	CHECKED(pthread_cond_init(c, &ca), "pthread_cond_init");
	pthread_condattr_destroy(&ca);
}

void
tpe__cond_destroy(pthread_cond_t *c)
{
	CHECKED(pthread_cond_destroy(c), "pthread_cond_destroy");
}

void
tpe__cond_signal(pthread_cond_t *c)
{
	CHECKED(pthread_cond_signal(c), "pthread_cond_signal");
}

void
tpe__cond_broadcast(pthread_cond_t *c)
{
	CHECKED(pthread_cond_broadcast(c), "pthread_cond_broadcast");
}

int
tpe__cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m, int64_t deadline_ns)
{
	struct timespec ts;
	int rc;

	if (deadline_ns < 0) {
		CHECKED(pthread_cond_wait(c, m), "pthread_cond_wait");
		return 0;
	}
	ts.tv_sec = (time_t)(deadline_ns / TPE__NS_PER_S);
	ts.tv_nsec = (long)(deadline_ns % TPE__NS_PER_S);
	rc = pthread_cond_timedwait(c, m, &ts);
	if (rc != 0 && rc != ETIMEDOUT)
		tpe__panic("pthread_cond_timedwait", rc);
	return rc;
}

int64_t
tpe__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * TPE__NS_PER_S + ts.tv_nsec;
}

int64_t
tpe__deadline(int64_t timeout_ns)
{
	int64_t now;

	if (timeout_ns < 0)
		return -1;
	now = tpe__now_ns();
	if (timeout_ns > INT64_MAX - now)
		return INT64_MAX;
	return now + timeout_ns;
}
