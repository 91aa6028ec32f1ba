/* SPDX-License-Identifier: MIT */
/* park.c - the wait sequence and the spin-yield-sleep backoff (park.h). */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <time.h>

#include "base/park.h"

#ifdef TPE__PARK_FUTEX
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "base/cpu.h"

#ifdef TPE__PARK_FUTEX
void
tpe__park_init(struct tpe__park *p)
{
	p->seq = 0;
}

void
tpe__park_destroy(struct tpe__park *p)
{
	(void)p;
}

/* FUTEX_WAIT with a relative time-out (or none). Where time_t is wider
 * than long (a 32-bit system built with _TIME_BITS=64), the time-out is a
 * 64-bit timespec only futex_time64 reads: the old call would take
 * tv_sec's high word for tv_nsec. */
static long
futex_wait(unsigned *addr, unsigned val, const struct timespec *ts)
{
#if defined(SYS_futex_time64)
	if (sizeof(ts->tv_sec) > sizeof(long))
		return syscall(SYS_futex_time64, addr, FUTEX_WAIT_PRIVATE, val,
		    ts, NULL, 0);
#endif
	return syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, ts, NULL, 0);
}

int
tpe__park_wait(struct tpe__park *p, unsigned seq, int64_t deadline_ns)
{
	struct timespec ts, *tsp = NULL;
	int64_t left;

	if (deadline_ns >= 0) {
		left = deadline_ns - tpe__now_ns();
		if (left <= 0)
			return ETIMEDOUT;
		/* Saturated where time_t is 32 bits (sync.h). */
		ts = tpe__timespec_of_ns(left);
		tsp = &ts; /* FUTEX_WAIT's timeout is relative */
	}
	/* The kernel compares p->seq with seq and sleeps only while they are
	 * equal, atomically with respect to a FUTEX_WAKE. */
	if (futex_wait(&p->seq, seq, tsp) != 0 && errno == ETIMEDOUT)
		return ETIMEDOUT;
	/* Woken, EAGAIN (the sequence had moved), EINTR: look again. */
	return 0;
}

void
tpe__park_wake_all(struct tpe__park *p)
{
	/* seq_cst: after the waker's change of the condition, before the
	 * sleeper's next tpe__park_prepare (park.h). */
	__atomic_add_fetch(&p->seq, 1, __ATOMIC_SEQ_CST);
	syscall(SYS_futex, &p->seq, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL,
	    0);
}
#else
void
tpe__park_init(struct tpe__park *p)
{
	p->seq = 0;
	tpe__mutex_init(&p->lock);
	tpe__cond_init(&p->cond);
}

void
tpe__park_destroy(struct tpe__park *p)
{
	tpe__cond_destroy(&p->cond);
	tpe__mutex_destroy(&p->lock);
}

int
tpe__park_wait(struct tpe__park *p, unsigned seq, int64_t deadline_ns)
{
	int rc = 0;

	tpe__mutex_lock(&p->lock);
	/* Under the lock the waker's bump and broadcast cannot fall between
	 * this comparison and the wait. seq_cst: pairs with the bump. */
	if (__atomic_load_n(&p->seq, __ATOMIC_SEQ_CST) == seq)
		rc = tpe__cond_wait_until(&p->cond, &p->lock, deadline_ns);
	tpe__mutex_unlock(&p->lock);
	if (rc == 0 && deadline_ns >= 0 && tpe__now_ns() >= deadline_ns &&
	    __atomic_load_n(&p->seq, __ATOMIC_SEQ_CST) == seq)
		rc = ETIMEDOUT;
	return rc;
}

void
tpe__park_wake_all(struct tpe__park *p)
{
	tpe__mutex_lock(&p->lock);
	/* seq_cst: after the waker's change of the condition (park.h). */
	__atomic_add_fetch(&p->seq, 1, __ATOMIC_SEQ_CST);
	tpe__cond_broadcast(&p->cond);
	tpe__mutex_unlock(&p->lock);
}
#endif

/* ---- backoff ------------------------------------------------------------ */

void
tpe__backoff_init(struct tpe__backoff *b, int64_t budget_ns,
    int64_t deadline_ns, int64_t sleep_max_ns)
{
	/* No spinning where it cannot pay (one processor, or crowded ones):
	 * the budget is spent at once. */
	b->budget_ns = tpe__can_spin() && budget_ns > 0 &&
	    !tpe__spin_crowded() ? budget_ns : 0;
	b->deadline_ns = deadline_ns;
	b->sleep_max_ns = sleep_max_ns > 0 ? sleep_max_ns : 0;
	b->end_ns = 0;
	b->look_ns = 0;
	b->late = false;
	b->steps = 0;
	b->sleeps = 0;
}

int64_t
tpe__backoff_sleep_ns(uint64_t n, int64_t max_ns)
{
	uint64_t shift = n > 0 ? n - 1 : 0;

	/* 1 us << 40 is 12 days: no bound is reached later (and the shift
	 * cannot overflow). */
	if (shift >= 40 || TPE__BACKOFF_SLEEP_MIN_NS << shift >= max_ns)
		return max_ns;
	return TPE__BACKOFF_SLEEP_MIN_NS << shift;
}

void
tpe__sleep_ns(int64_t ns)
{
	struct timespec ts = tpe__timespec_of_ns(ns);

	nanosleep(&ts, NULL);
}

/* now + budget_ns, saturating at INT64_MAX. */
static int64_t
budget_end(int64_t now, int64_t budget_ns)
{
	return budget_ns > INT64_MAX - now ? INT64_MAX : now + budget_ns;
}

/* The sleep phase's next step, bounded by the deadline. */
static enum tpe__backoff_did
backoff_sleep(struct tpe__backoff *b, int64_t now)
{
	int64_t ns;

	if (b->sleep_max_ns == 0)
		return TPE__BACKOFF_SPENT;
	if (b->deadline_ns >= 0 && now < 0)
		now = tpe__now_ns();
	if (b->deadline_ns >= 0 && now >= b->deadline_ns)
		return TPE__BACKOFF_SPENT;
	ns = tpe__backoff_sleep_ns(++b->sleeps, b->sleep_max_ns);
	if (b->deadline_ns >= 0 && ns > b->deadline_ns - now)
		ns = b->deadline_ns - now;
	tpe__sleep_ns(ns);
	return TPE__BACKOFF_SLEPT;
}

enum tpe__backoff_did
tpe__backoff_step(struct tpe__backoff *b)
{
	int64_t now, end;

	b->steps++;
	if (b->late) {
		/* The caller looked after a late look and found nothing: the
		 * spin lost its processor and did not pay (park.h). */
		tpe__spin_crowd_seen(b->look_ns);
		b->late = false;
		b->end_ns = -1;
	}
	if (b->budget_ns == 0 || b->end_ns < 0)
		return backoff_sleep(b, -1);
	if (b->steps % TPE__BACKOFF_YIELD_EVERY != 0) {
		tpe__cpu_relax();
		return TPE__BACKOFF_RELAXED;
	}
	now = tpe__now_ns();
	if (b->end_ns == 0) {
		/* The budget counts from the first look (park.h). */
		b->end_ns = budget_end(now, b->budget_ns);
	} else if (now - b->look_ns > TPE__SPIN_LATE_NS) {
		/* Off its processor since the last look: no yield now; the
		 * caller looks, and the next step tells (park.h). */
		b->late = true;
		b->look_ns = now;
		return TPE__BACKOFF_YIELDED;
	}
	b->look_ns = now;
	end = b->end_ns;
	if (b->deadline_ns >= 0 && b->deadline_ns < end)
		end = b->deadline_ns;
	if (now >= end) {
		b->end_ns = -1; /* spent: the sleep phase, if any */
		return backoff_sleep(b, now);
	}
	sched_yield(); /* the thread waited for may share this CPU */
	return TPE__BACKOFF_YIELDED;
}

/* ---- crowding ----------------------------------------------------------- */

int64_t tpe__spin_crowd_until; /* park.h */
int64_t tpe__spin_crowd_hold_ns; /* park.h: 0, off by default */

void
tpe__spin_crowd_seen(int64_t now_ns)
{
	/* Relaxed: a setting, no data behind it. */
	int64_t hold = __atomic_load_n(&tpe__spin_crowd_hold_ns,
	    __ATOMIC_RELAXED), until;

	if (hold <= 0)
		return;
	until = budget_end(now_ns, hold);
	/* 0 means "no mark". Relaxed: a hint (park.h). */
	__atomic_store_n(&tpe__spin_crowd_until, until != 0 ? until : 1,
	    __ATOMIC_RELAXED);
}

bool
tpe__spin_crowded_at(int64_t now_ns)
{
	/* Relaxed, as every access: a hint (park.h). */
	int64_t until = __atomic_load_n(&tpe__spin_crowd_until,
	    __ATOMIC_RELAXED);

	if (until == 0)
		return false;
	if (now_ns < until)
		return true;
	/* Ran out: the next spin looks again. A CAS, so that a mark set
	 * meanwhile by another spinner stays. */
	__atomic_compare_exchange_n(&tpe__spin_crowd_until, &until, 0, false,
	    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
	return false;
}
