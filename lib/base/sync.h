/* SPDX-License-Identifier: MIT */
/*
 * sync.h - thin pthread wrappers: calls that cannot fail in a correct program
 * abort with a message naming the call and where it failed; timed waits on
 * CLOCK_MONOTONIC; and the checks of a debug build (--enable-debug).
 *
 * Where it sits: lib/base, the bottom layer; it includes only system
 * headers, config.h, tpe.h and base/ (build-aux/check-layering.sh).
 *
 * Design notes
 * ------------
 * A debug build (TPE_DEBUG, from config.h) makes every mutex error-checking
 * and records which thread holds it, so that a function whose name ends in
 * _locked can assert that its caller holds the lock (TPE__ASSERT_HELD), and
 * TPE__ASSERT checks the invariants the design notes state. A release build
 * compiles both to nothing: struct tpe__mutex is then a pthread_mutex_t and
 * nothing more, and an assertion's expression is not evaluated.
 *
 * The owner is the address of a thread-local variable of the holder (NULL:
 * not held), one pointer, so that a thread that does not hold the mutex can
 * never read "held by me", whatever it races with: only the holder writes
 * its own address, and it clears it before it unlocks or waits.
 *
 * The lock order of the library (the one list; the kernel's workqueue.c
 * keeps its the same way). Every mutex has a rank (tpe__mutex_init_ranked);
 * a thread takes locks in increasing rank only, and a debug build asserts
 * it on every acquire (tpe__mutex_lock dies naming both ranks):
 *
 *   1 FORK         the fork registry's lock (base/fork.c)
 *   2 POOL         a pool's lock, pool->lock (pool/pool.h): "L" in lib/pool
 *                  and lib/engine; fork's prepare() holds every pool's at
 *                  once, in registry order, under FORK (siblings)
 *   3 SLOT         a reserve slot's lock (pool/reserve.h), a stack's wait
 *                  lock (engine/stacks.c, without futexes): taken under
 *                  POOL by wake-ups, never two at once
 *   4 FUTURE       a future's lock (pool/future.h)
 *   5 STRATEGY     a strategy's lock (strategy/): never held while it calls
 *                  the pool
 *   6 COOP         the tasklet service's lock (coop/)
 *   7 COOP_JOB     a tasklet job's lock
 *   8 COOP_WORKER  a tasklet worker's lock
 *   9 SCHED        a pool's timer lock, s->lock (sched/sched.c): a leaf,
 *                  never held while it calls the pool, a future's lock
 *                  or user code
 *
 * No lock of the library is held while user code runs, nor while a thread
 * is created or joined.
 *
 * And the one legend of the annotation on each shared field:
 *   I  set before the object is shared (create, attach), read-only after
 *   L  the owning pool's lock (rank POOL)
 *   A  atomic; each access says which other access it pairs with
 *   O  owned by one thread, which alone writes it; others read it only
 *      as the module's notes say (atomic loads, or under a named lock)
 *   P, C  the producer's / the consumer's side of a single-producer,
 *      single-consumer structure (one thread each)
 *   R  the fork registry's lock (rank FORK)
 * A field guarded by any other lock names that lock ("slot->lock",
 * "f->lock", "s->lock").
 */
#ifndef TPE_SYNC_H
#define TPE_SYNC_H

/* TPE_DEBUG changes struct tpe__mutex: every file that sees the struct must
 * agree on it, tests included, so it comes with the struct. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define TPE__NS_PER_S INT64_C(1000000000)

/*
 * Aborts with "libtpe: FILE:LINE: FUNC: <message>" (liburcu's urcu_die);
 * only for broken invariants, never for a user's error. TPE__DIE passes the
 * caller's place.
 */
void tpe__die(const char *file, int line, const char *func,
    const char *fmt, ...) __attribute__((noreturn, format(printf, 4, 5)));
#define TPE__DIE(...) tpe__die(__FILE__, __LINE__, __func__, __VA_ARGS__)

/* Aborts with "libtpe: FILE:LINE: FUNC: <what>: <strerror(err)>". */
#define tpe__panic(what, err) TPE__DIE("%s: %s", (what), strerror(err))

/*
 * TPE__ASSERT(cond): in a debug build, dies naming the expression, file and
 * line unless cond holds. In a release build cond is not evaluated; it is
 * still compiled (sizeof), so it cannot rot.
 */
#ifdef TPE_DEBUG
#define TPE__ASSERT(cond)                                                  \
	(__builtin_expect(!!(cond), 1) ? (void)0 :                         \
	    TPE__DIE("assertion failed: %s", #cond))
#else
#define TPE__ASSERT(cond) ((void)sizeof(!(cond)))
#endif

/* The ranks of the lock order above; NONE: a lock outside it (tests'). */
enum tpe__lock_rank {
	TPE__RANK_NONE,
	TPE__RANK_FORK,
	TPE__RANK_POOL,
	TPE__RANK_SLOT,
	TPE__RANK_FUTURE,
	TPE__RANK_STRATEGY,
	TPE__RANK_COOP,
	TPE__RANK_COOP_JOB,
	TPE__RANK_COOP_WORKER,
	TPE__RANK_SCHED,
	TPE__RANK_COUNT
};

struct tpe__mutex {
	pthread_mutex_t m;
#ifdef TPE_DEBUG
	void *owner; /* A: the holder's tag (sync.c), NULL when not held */
	int rank;    /* I: enum tpe__lock_rank */
#endif
};

/* A mutex of rank `rank` in the lock order above. */
void tpe__mutex_init_ranked(struct tpe__mutex *m, enum tpe__lock_rank rank);
/* A mutex outside the lock order (rank NONE: not checked). */
void tpe__mutex_init(struct tpe__mutex *m);
/* In the child of fork(), in the forking thread: the locks it held across
 * fork() were initialised afresh, not unlocked; forget that it held them
 * (a debug build's rank counts; nothing otherwise). */
void tpe__mutex_forget_held(void);
void tpe__mutex_destroy(struct tpe__mutex *m);
void tpe__mutex_lock(struct tpe__mutex *m);
void tpe__mutex_unlock(struct tpe__mutex *m);
/* Takes m if it is free (true), else returns false at once. */
bool tpe__mutex_trylock(struct tpe__mutex *m);

/*
 * TPE__ASSERT_HELD(m): in a debug build, dies naming m, file and line
 * unless the calling thread holds m (Linux's lockdep_assert_held). The
 * first statement of every function whose name ends in _locked.
 */
#ifdef TPE_DEBUG
/* Whether the calling thread holds m. Any thread, no lock. */
bool tpe__mutex_held(const struct tpe__mutex *m);
void tpe__assert_held(const struct tpe__mutex *m, const char *what,
    const char *file, int line, const char *func);
#define TPE__ASSERT_HELD(m)                                                \
	tpe__assert_held((m), #m, __FILE__, __LINE__, __func__)
#else
#define TPE__ASSERT_HELD(m) ((void)sizeof(m))
#endif

/* A condition variable that times its waits on CLOCK_MONOTONIC. */
void tpe__cond_init(pthread_cond_t *c);
void tpe__cond_destroy(pthread_cond_t *c);
void tpe__cond_signal(pthread_cond_t *c);
void tpe__cond_broadcast(pthread_cond_t *c);

/*
 * Waits on c until woken or until the absolute monotonic time `deadline_ns`
 * (negative: no deadline). Returns 0 when woken (possibly spuriously) or
 * ETIMEDOUT once the deadline has passed. m is held on entry and on return;
 * a debug build records it as not held in between.
 */
int tpe__cond_wait_until(pthread_cond_t *c, struct tpe__mutex *m,
    int64_t deadline_ns);

/*
 * ns (>= 0, a time or a span) as a timespec, its seconds saturated at the
 * largest time_t: where time_t has 32 bits (Debian's armhf and i386 with
 * glibc's default), seconds past 2^31 - 1 (68 years) would wrap, to a
 * negative time or an early one, and a far deadline would pass at once.
 * Saturated, it lies 68 years ahead: as good as never.
 */
struct timespec tpe__timespec_of_ns(int64_t ns);

int64_t tpe__now_ns(void);


/*
 * The absolute deadline for a relative timeout: negative stays negative
 * (forever); overflow saturates at INT64_MAX.
 */
int64_t tpe__deadline(int64_t timeout_ns);

/*
 * pthread_create(tid, pa, start, arg) for every thread the library starts:
 * the thread starts with every asynchronous signal blocked (all but
 * SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS and SIGABRT), so that a
 * signal sent to the process goes to one of the application's threads
 * (tpe(7), Signals). The caller's mask is unchanged on return. Returns
 * pthread_create's result.
 */
int tpe__thread_create(pthread_t *tid, const pthread_attr_t *pa,
    void *(*start)(void *), void *arg);

/*
 * Names the calling thread (at most 15 bytes are kept) where the system can
 * (pthread_setname_np, HAVE_PTHREAD_SETNAME_NP); elsewhere does nothing.
 * Best effort: a name is for debuggers and ps, nothing depends on it.
 */
void tpe__thread_set_name(const char *name);

/*
 * A thread-local of the library: the initial-exec TLS model, so that an
 * access is one load off the thread pointer instead of a call to
 * __tls_get_addr (the general-dynamic model a shared library gets by
 * default; several such calls per submission were a measurable share of a
 * tiny task's cost). The library's thread-locals take a few dozen bytes of
 * the static TLS block that glibc keeps for libraries, so the library can
 * still be dlopen'ed.
 */
#define TPE__TLS __thread __attribute__((tls_model("initial-exec")))

#endif /* TPE_SYNC_H */
