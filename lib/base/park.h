/* SPDX-License-Identifier: MIT */
/*
 * park.h - the library's one way to sleep until something changes (a wait
 * sequence, an eventcount) and its one spin-yield-sleep backoff.
 *
 * Where it sits: lib/base, the bottom layer; it includes only system
 * headers, config.h, tpe.h and base/ (build-aux/check-layering.sh).
 *
 * Design notes
 * ------------
 * Park. struct tpe__park is a sequence number that wakers bump. A thread
 * that wants to sleep until a condition C (a word other threads change)
 * holds does, with no lock:
 *
 *     for (;;) {
 *             unsigned seq = tpe__park_prepare(&p);   (1) before the look
 *             if (C)                                   (2) the last look
 *                     break;
 *             if (tpe__park_wait(&p, seq, deadline) == ETIMEDOUT)
 *                     break;                           (3)
 *     }
 *
 * and a thread that makes C true does: change C (a seq_cst store or RMW),
 * then tpe__park_wake_all(&p) (bump the sequence, then wake). No wake-up is
 * lost: if the sleeper's look (2) missed the change, its read (1) came
 * before the waker's bump (both seq_cst, the change before the bump), so
 * the sequence it waits on is already stale and the wait returns at once,
 * or the waker's wake finds it asleep. Looking at C before (1) instead of
 * after is the classic lost wake-up (test_base's no-lost-wakeup test).
 * A wait may return 0 without a change (spuriously, a signal): the caller
 * loops and looks again.
 *
 * Where the system has futexes (HAVE_LINUX_FUTEX, unless TPE_FORCE_CONDVAR
 * builds the fallback for tests), the sequence is the futex word: the wait
 * is FUTEX_WAIT on it (the kernel compares it with seq atomically) and a
 * wake-all is one FUTEX_WAKE after the bump. Elsewhere a mutex and a
 * condition variable (monotonic) guard the wait: the waker bumps and
 * broadcasts under the mutex, the sleeper compares under it. The park
 * word is the same size either way; only the fallback adds the mutex and
 * the condition variable.
 *
 * Backoff. struct tpe__backoff is a spinning waiter's budget: each
 * tpe__backoff_step relaxes the processor (tpe__cpu_relax), every
 * TPE__BACKOFF_YIELD_EVERY-th step instead looks at the clock and yields
 * (a thread the waiter waits for may share its processor), and, once the
 * budget is spent, either says so (TPE__BACKOFF_SPENT) or, when the caller
 * asked for a sleep phase, sleeps 1 us, 2 us, 4 us ... up to sleep_max_ns
 * per step (a bounded nanosleep). The caller's absolute deadline ends
 * every phase. The clock is first read at the first yield, so that a spin
 * that ends within TPE__BACKOFF_YIELD_EVERY steps (most do) costs no
 * clock read; the budget counts from there. A budget of 0, a machine
 * with one processor (tpe__can_spin), or a crowded one (below), spins not
 * at all.
 *
 * Earning its CPU. struct tpe__spin_pay decides whether a waiter that
 * could spin before it gives up (sleeps, or takes another way) should:
 * after `misses` spins in a row that found nothing (what it waits for
 * comes further apart than its spin: the spin only burns a core), only
 * every `probe`-th wait spins, to notice when things come close again;
 * one spin that pays makes every wait spin again. The idle worker's spin
 * (engine/locked.c) and the adaptive strategy's wait after a miss
 * (strategy/strategy.c) follow it. It is the waiter's own state, under
 * whatever lock guards the waiter.
 *
 * Crowding. A spin pays only while the thread it waits for has a
 * processor of its own. When runnable threads outnumber the processors
 * (other programs' busy threads beside the pool), a spinner is a runnable
 * thread among too many: its yield hands its processor to a thread that
 * may keep it for a whole time slice (0.75 ms and more), and meanwhile the
 * spinner still counts as an awake waiter, so a submitter wakes no
 * sleeper for the task it spins for (engine/locked.c's wake-up rule): the
 * task waits for the spinner's next slice. A sleeper, woken by a futex,
 * is preferred by the scheduler. So a look of the backoff that comes more
 * than TPE__SPIN_LATE_NS after the one before (64 relax steps and a yield
 * that finds nobody else runnable take under 5 us) says that this thread
 * lost its processor. That look returns TPE__BACKOFF_YIELDED without a
 * yield, so the caller looks for its work: the thread that had the
 * processor may be the one it waits for (a submitter), and then the spin
 * paid and the caller stops stepping. A step after it means the caller
 * found nothing: the backoff ends its spin (TPE__BACKOFF_SPENT, or the
 * sleep phase) and marks the process crowded for
 * tpe__spin_crowd_hold_ns (100 ms). While it is marked, no backoff spins:
 * tpe__backoff_init gives no budget (the sleep phase remains), so a
 * waiter that tpe__spin_pays let spin finds nothing at once and counts a
 * miss, and its next waits sleep. The mark is process-wide (the
 * processors are), and it expires by itself: the first spin after it
 * looks again. It is off unless tpe__spin_crowd_hold_ns is set (below). Measured on a
 * 2-core VM beside two busy loops (C-Thread-Pool's batch-and-wait: 8 jobs
 * of 20 us, wait, 1000 times, pool of 2), bench/README.md's oversub
 * section has the figures.
 *
 * Legend: base/sync.h (p->lock: the fallback's mutex, outside the lock
 * order: only park.c takes it, and takes nothing under it).
 */
#ifndef TPE_PARK_H
#define TPE_PARK_H

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdbool.h>
#include <limits.h>
#include <stdint.h>

#include "base/sync.h"

#if defined(HAVE_LINUX_FUTEX) && !defined(TPE_FORCE_CONDVAR)
#define TPE__PARK_FUTEX 1
#endif

struct tpe__park {
	unsigned seq;          /* A: bumped by each wake (the futex word) */
#ifndef TPE__PARK_FUTEX
	struct tpe__mutex lock; /* guards the sleep on cond */
	pthread_cond_t cond;   /* W: sleepers wait here, with p->lock */
#endif
};

void tpe__park_init(struct tpe__park *p);
void tpe__park_destroy(struct tpe__park *p);

/* The sequence to wait on: read BEFORE the last look at the condition.
 * seq_cst: pairs with the bump in tpe__park_wake_all. Any thread. */
static inline unsigned
tpe__park_prepare(struct tpe__park *p)
{
	return __atomic_load_n(&p->seq, __ATOMIC_SEQ_CST);
}

/*
 * Sleeps while the sequence is still seq, until the absolute monotonic
 * time deadline_ns (negative: none). 0: woken, the sequence moved, or a
 * spurious return (look again); ETIMEDOUT: the deadline has passed (also
 * when it had passed on entry). Never holds a lock on return.
 */
int tpe__park_wait(struct tpe__park *p, unsigned seq, int64_t deadline_ns);

/* Bumps the sequence (seq_cst, after the caller's change of the
 * condition) and wakes every sleeper. Any thread, any lock held. */
void tpe__park_wake_all(struct tpe__park *p);

/* ---- backoff ------------------------------------------------------------ */

/* Steps between looks at the clock, each with a yield. */
#define TPE__BACKOFF_YIELD_EVERY 64
/* The first sleep of the sleep phase; each doubles, up to sleep_max_ns. */
#define TPE__BACKOFF_SLEEP_MIN_NS INT64_C(1000)

enum tpe__backoff_did {
	TPE__BACKOFF_RELAXED,  /* a pause instruction */
	TPE__BACKOFF_YIELDED,  /* looked at the clock, yielded: a place for
	                        * the caller's costlier looks */
	TPE__BACKOFF_SLEPT,    /* slept (the sleep phase) */
	TPE__BACKOFF_SPENT     /* budget or deadline spent: stop waiting */
};

/* Legend: I = set by tpe__backoff_init; the rest private to the waiter. */
struct tpe__backoff {
	int64_t budget_ns;     /* I: spinning and yielding time */
	int64_t deadline_ns;   /* I: absolute monotonic end, negative: none */
	int64_t sleep_max_ns;  /* I: 0: no sleep phase; else the longest sleep */
	int64_t end_ns;        /* the budget's end; 0 until the first look */
	int64_t look_ns;       /* when the last look was (crowding) */
	bool late;             /* the last look was late (crowding) */
	uint64_t steps;        /* steps taken */
	uint64_t sleeps;       /* sleeps taken */
};

void tpe__backoff_init(struct tpe__backoff *b, int64_t budget_ns,
    int64_t deadline_ns, int64_t sleep_max_ns);

/* One step of the waiting; what it did (TPE__BACKOFF_SPENT: stop). */
enum tpe__backoff_did tpe__backoff_step(struct tpe__backoff *b);

/*
 * The sleep-phase ladder: the n-th sleep (n >= 1) lasts
 * TPE__BACKOFF_SLEEP_MIN_NS << (n - 1), never more than max_ns
 * (max_ns > 0).
 */
int64_t tpe__backoff_sleep_ns(uint64_t n, int64_t max_ns);

/* Sleeps ns (> 0) with nanosleep; a signal may end it early. */
void tpe__sleep_ns(int64_t ns);

/* ---- earning its CPU ------------------------------------------------------ */

/* A look that comes this long after the one before: the spinner lost its
 * processor (crowding, above). */
#define TPE__SPIN_LATE_NS INT64_C(50000)
/* How long a crowding that was seen stops every spin, when it is on
 * (tpe__spin_crowd_hold_ns). */
#define TPE__SPIN_CROWD_HOLD_NS INT64_C(100000000)

/*
 * A: relaxed, read by tpe__spin_crowd_seen; 0: crowding is never marked.
 * 0 by default for now: on a 2-core VM loaded 23-35 by other work, the
 * mark (at TPE__SPIN_CROWD_HOLD_NS) cut the sched_yield calls of
 * C-Thread-Pool's batch-and-wait 3-4x, but its wall time gain was not
 * consistent across sittings, and tpe-bench's tiny-1 (default pool) ran
 * 1.2-1.8x slower in 6 of 6 alternating runs (the same with the mark off:
 * as before). A quiet run decides (bench/README.md, oversub).
 */
extern int64_t tpe__spin_crowd_hold_ns;

/* A: relaxed, the end of the crowded mark (monotonic ns), 0: none. Written
 * by tpe__spin_crowd_seen and by the expiry in tpe__spin_crowded_at, read
 * by every spin decision; no other data hangs on it (a hint). */
extern int64_t tpe__spin_crowd_until;

/* A spin found at now_ns that it had lost its processor: no spin for
 * tpe__spin_crowd_hold_ns from now_ns. Any thread. */
void tpe__spin_crowd_seen(int64_t now_ns);

/* Whether the crowded mark holds at now_ns; clears it once it ran out.
 * Any thread. */
bool tpe__spin_crowded_at(int64_t now_ns);

/* Whether spinning is off because the processors are crowded: no clock
 * read unless a mark is set. Any thread. */
static inline bool
tpe__spin_crowded(void)
{
	/* Relaxed: a hint (tpe__spin_crowd_until). */
	if (__atomic_load_n(&tpe__spin_crowd_until, __ATOMIC_RELAXED) == 0)
		return false;
	return tpe__spin_crowded_at(tpe__now_ns());
}

/* Legend: the waiter's own (its caller's lock). */
struct tpe__spin_pay {
	unsigned misses;       /* spins in a row that found nothing */
	unsigned skips;        /* waits that did not spin since */
};

/* Whether this wait should spin: yes while spins pay, else every
 * `probe`-th wait once `max_misses` spins in a row found nothing. A
 * crowded process (tpe__spin_crowded) is the backoff's to handle: a wait
 * that spins through it gets no budget, finds nothing and counts a miss;
 * a caller whose spin has no backoff asks tpe__spin_crowded itself. */
static inline bool
tpe__spin_pays(struct tpe__spin_pay *p, unsigned max_misses, unsigned probe)
{
	if (p->misses < max_misses)
		return true;
	return ++p->skips % probe == 0;
}

/* The spin that tpe__spin_pays allowed found what it waited for, or not. */
static inline void
tpe__spin_paid(struct tpe__spin_pay *p, bool paid)
{
	if (paid)
		p->misses = 0;
	else if (p->misses < UINT_MAX)
		p->misses++;
}

#endif /* TPE_PARK_H */
