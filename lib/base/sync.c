/* SPDX-License-Identifier: MIT */
/* sync.c - pthread wrappers that abort on broken invariants, monotonic waits,
 * and the lock-ownership records of a debug build. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/sync.h"

void
tpe__die(const char *file, int line, const char *func, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	size_t n;

	/* Formatted on the stack and written at once: no allocation (the
	 * heap may be what broke), and two threads dying together do not
	 * interleave their lines. One byte stays free for the newline. */
	n = (size_t)snprintf(buf, sizeof(buf) - 1, "libtpe: %s:%d: %s: ",
	    file, line, func);
	if (n < sizeof(buf) - 1) {
		va_start(ap, fmt);
		vsnprintf(buf + n, sizeof(buf) - 1 - n, fmt, ap);
		va_end(ap);
	}
	n = strlen(buf);
	buf[n++] = '\n';
	(void)!write(STDERR_FILENO, buf, n);
	abort();
}

#define CHECKED(call, what)                                               \
	do {                                                              \
		int rc_ = (call);                                         \
		if (rc_ != 0)                                             \
			tpe__panic(what, rc_);                            \
	} while (0)

#ifdef TPE_DEBUG
/* The owner tag of the calling thread: its address is unique among the
 * threads alive. */
static TPE__TLS char self_tag;

static void
set_owner(struct tpe__mutex *m, void *owner)
{
	/* Relaxed: only the holder compares against its own tag, and it
	 * wrote the field last itself (struct tpe__mutex, sync.h). */
	__atomic_store_n(&m->owner, owner, __ATOMIC_RELAXED);
}

/*
 * The ranks this thread holds, counted per rank (a thread holds a few
 * locks at most, and several of one rank only as fork's prepare does).
 */
static TPE__TLS unsigned short held_ranks[TPE__RANK_COUNT];

static const char *const rank_names[TPE__RANK_COUNT] = {
	"NONE", "FORK", "POOL", "SLOT", "FUTURE", "STRATEGY", "COOP",
	"COOP_JOB", "COOP_WORKER",
};

/*
 * Before a blocking acquire of a lock of rank r: dies when the calling
 * thread holds a lock of a higher rank, or one of the same rank (siblings:
 * only POOL locks under FORK, fork's prepare). The lock order: sync.h.
 */
static void
check_order(const struct tpe__mutex *m)
{
	int r = m->rank, k;

	if (r == TPE__RANK_NONE)
		return;
	for (k = r + 1; k < TPE__RANK_COUNT; k++)
		if (held_ranks[k] > 0)
			TPE__DIE("lock order: taking a %s lock while holding a "
			    "%s lock", rank_names[r], rank_names[k]);
	if (held_ranks[r] > 0 &&
	    !(r == TPE__RANK_POOL && held_ranks[TPE__RANK_FORK] > 0))
		TPE__DIE("lock order: taking a second %s lock",
		    rank_names[r]);
}

static void
count_rank(const struct tpe__mutex *m, int delta)
{
	if (m->rank != TPE__RANK_NONE)
		held_ranks[m->rank] = (unsigned short)(held_ranks[m->rank] +
		    delta);
}

bool
tpe__mutex_held(const struct tpe__mutex *m)
{
	return __atomic_load_n(&m->owner, __ATOMIC_RELAXED) == &self_tag;
}

void
tpe__assert_held(const struct tpe__mutex *m, const char *what,
    const char *file, int line, const char *func)
{
	if (!tpe__mutex_held(m))
		tpe__die(file, line, func, "%s not held by this thread", what);
}
#endif

void
tpe__mutex_forget_held(void)
{
#ifdef TPE_DEBUG
	memset(held_ranks, 0, sizeof(held_ranks));
#endif
}

void
tpe__mutex_init(struct tpe__mutex *m)
{
	tpe__mutex_init_ranked(m, TPE__RANK_NONE);
}

void
tpe__mutex_init_ranked(struct tpe__mutex *m, enum tpe__lock_rank rank)
{
	pthread_mutexattr_t ma;

#ifdef TPE_DEBUG
	m->rank = (int)rank;
#else
	(void)rank;
#endif
	CHECKED(pthread_mutexattr_init(&ma), "pthread_mutexattr_init");
#ifdef TPE_DEBUG
	/* Relocking, or unlocking a mutex another thread holds, fails and
	 * dies (CHECKED) instead of hanging or corrupting. */
	CHECKED(pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK),
	    "pthread_mutexattr_settype");
	m->owner = NULL;
#elif defined(HAVE_DECL_PTHREAD_MUTEX_ADAPTIVE_NP) && \
    HAVE_DECL_PTHREAD_MUTEX_ADAPTIVE_NP
	/* Critical sections are a few dozen instructions: spin a little on
	 * contention before sleeping in the kernel (glibc; elsewhere a
	 * default mutex). */
	CHECKED(pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP),
	    "pthread_mutexattr_settype");
#endif
	CHECKED(pthread_mutex_init(&m->m, &ma), "pthread_mutex_init");
	pthread_mutexattr_destroy(&ma);
}

void
tpe__mutex_destroy(struct tpe__mutex *m)
{
	CHECKED(pthread_mutex_destroy(&m->m), "pthread_mutex_destroy");
}

void
tpe__mutex_lock(struct tpe__mutex *m)
{
#ifdef TPE_DEBUG
	check_order(m);
#endif
	CHECKED(pthread_mutex_lock(&m->m), "pthread_mutex_lock");
#ifdef TPE_DEBUG
	set_owner(m, &self_tag);
	count_rank(m, 1);
#endif
}

bool
tpe__mutex_trylock(struct tpe__mutex *m)
{
	int rc = pthread_mutex_trylock(&m->m);

	if (rc == EBUSY)
		return false;
	if (rc != 0)
		tpe__panic("pthread_mutex_trylock", rc);
#ifdef TPE_DEBUG
	/* A trylock cannot deadlock: counted, not checked. */
	set_owner(m, &self_tag);
	count_rank(m, 1);
#endif
	return true;
}

void
tpe__mutex_unlock(struct tpe__mutex *m)
{
#ifdef TPE_DEBUG
	TPE__ASSERT_HELD(m);
	set_owner(m, NULL);
	count_rank(m, -1);
#endif
	CHECKED(pthread_mutex_unlock(&m->m), "pthread_mutex_unlock");
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
tpe__cond_wait_until(pthread_cond_t *c, struct tpe__mutex *m,
    int64_t deadline_ns)
{
	struct timespec ts;
	int rc = 0;

#ifdef TPE_DEBUG
	/* The wait releases m: other threads may hold it until it returns. */
	TPE__ASSERT_HELD(m);
	set_owner(m, NULL);
#endif
	if (deadline_ns < 0) {
		CHECKED(pthread_cond_wait(c, &m->m), "pthread_cond_wait");
	} else {
		ts = tpe__timespec_of_ns(deadline_ns);
		rc = pthread_cond_timedwait(c, &m->m, &ts);
		if (rc != 0 && rc != ETIMEDOUT)
			tpe__panic("pthread_cond_timedwait", rc);
	}
#ifdef TPE_DEBUG
	set_owner(m, &self_tag);
#endif
	return rc;
}

struct timespec
tpe__timespec_of_ns(int64_t ns)
{
	/* time_t is a signed integer type (POSIX, Linux): its largest
	 * value, whatever its width. */
	const int64_t max_s = sizeof(time_t) >= sizeof(int64_t) ? INT64_MAX :
	    (int64_t)((UINT64_C(1) << (sizeof(time_t) * 8 - 1)) - 1);
	struct timespec ts;

	if (ns / TPE__NS_PER_S > max_s) {
		ts.tv_sec = (time_t)max_s;
		ts.tv_nsec = 0;
	} else {
		ts.tv_sec = (time_t)(ns / TPE__NS_PER_S);
		ts.tv_nsec = (long)(ns % TPE__NS_PER_S);
	}
	return ts;
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

int
tpe__thread_create(pthread_t *tid, const pthread_attr_t *pa,
    void *(*start)(void *), void *arg)
{
	sigset_t all, old;
	int rc;

	sigfillset(&all);
	/* Synchronous signals must reach the thread that caused them. */
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGFPE);
	sigdelset(&all, SIGILL);
	sigdelset(&all, SIGTRAP);
	sigdelset(&all, SIGSYS);
	sigdelset(&all, SIGABRT);
	/* The new thread inherits the creator's mask; the creator's own is
	 * restored at once. */
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(tid, pa, start, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

void
tpe__thread_set_name(const char *name)
{
#ifdef HAVE_PTHREAD_SETNAME_NP
	char buf[16];

	/* Linux refuses a name of more than 15 bytes (ERANGE): keep the
	 * start of a longer one. */
	snprintf(buf, sizeof(buf), "%s", name);
	(void)pthread_setname_np(pthread_self(), buf);
#else
	(void)name;
#endif
}
