/* SPDX-License-Identifier: MIT */
/*
 * stacks.h - the stacks engine's state (TPE_QUEUE_PER_WORKER), shared by
 * its three files: stacks.c (the slot stacks, push, take and steal, the
 * worker loop, the statistics), stacks_idle.c (awake, spinning, watching,
 * deep: the idle protocol) and stacks_blocking.c (managed blocking: a
 * blocked worker's slot goes to a spare thread); and the knobs and
 * counts of the white-box tests. Inside lib/engine (and its tests) only.
 *
 * Legend (doc/architecture.md): I init-only, A atomic (the access it
 * pairs with is named at each), O written by the slot's owner only, L
 * pool->lock, W a sleeping object (its own sync; who waits and who
 * wakes is named).
 */
#ifndef TPE_ENGINE_STACKS_H
#define TPE_ENGINE_STACKS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/atomic.h"
#include "base/park.h"
#include "base/sync.h"
#include "engine/engine.h"
#include "pool/pool.h"

/* ---- knobs and counts of the white-box tests ---------------------------- */

/* How long an idle worker spins before it sleeps (ns; 0: at once; set
 * before tpe_create). */
extern int64_t tpe__stacks_spin_ns;
/* Back-pressure: a submitting thread looks every TPE__STACKS_BACKLOG_EVERY
 * pushes (a power of two) and yields the CPU once when more than
 * TPE__STACKS_BACKLOG_MAX tasks were pushed onto the slot since its stack
 * was last taken (16384 nodes: about 0.8 MB, what a core's caches hold). */
#define TPE__STACKS_BACKLOG_EVERY 1024
#define TPE__STACKS_BACKLOG_MAX 16384
/* A stack taken whole with more tasks than this (by the slot's counters)
 * runs newest first, without the reversal; smaller ones oldest first. */
#define TPE__STACKS_LIFO_BATCH 4096
/* How many of the engine's workers sleep and are not being woken (for the
 * white-box tests): counted asleep, deep or watching, with their SLEEP
 * marker still on, so that a push passes them over for an awake worker
 * until it wakes one. Exact when no push or wake-up is in flight. */
size_t tpe__stacks_sleepers(const struct tpe__engine *e);
/* How many of the engine's workers sleep as watchers (counted). */
size_t tpe__stacks_watchers(const struct tpe__engine *e);
/* Managed blocking, for the white-box tests (takes the pool lock): the
 * threads without a slot that look for one or were started to (*spares),
 * and the slots handed over that no thread owns yet (*unowned). */
void tpe__stacks_handover_counts(const struct tpe__engine *e, size_t *spares,
    size_t *unowned);
/* Called (when set) by a thief after it marked itself awake and before it
 * takes another worker's tasks, so that a test can let the owner take
 * them first (the steal then fails). */
extern void (*tpe__stacks_steal_hook)(void);
/* Called (when set) by an idle worker after its last look at its stack and
 * before it puts its SLEEP marker there, so that a test can push a task
 * in between (the marker must then not go on). */
extern void (*tpe__stacks_sleep_hook)(void);
/* Called (when set) by a submitter just before it yields the CPU because
 * its slot's worker is far behind (the back-pressure of stacks.c). */
extern void (*tpe__stacks_yield_hook)(void);
/* Called (when set) by a watcher whose look is due (its timed sleep ran
 * out), while it still counts as a watcher, so that a test can push tasks
 * behind an awake worker that wake nobody, before the watcher looks. */
extern void (*tpe__stacks_watch_hook)(void);
/* Called (when set) by a worker that took a batch of more than one task,
 * before it publishes the rest of it and runs the first. */
extern void (*tpe__stacks_batch_hook)(void);

/* ---- the engine's state ------------------------------------------------- */

/* The markers of a slot's stack word (stacks.c); never node addresses. */
#define TPE__STACKS_ASLEEP ((struct tpe__task *)(uintptr_t)1)
#define TPE__STACKS_LEFT ((struct tpe__task *)(uintptr_t)2)

struct tpe__stacks_slot {
	/* Pushed by submitters, taken by the owner: its own cache line. */
	struct tpe__task *head;   /* A: the stack, NULL, TPE__STACKS_ASLEEP or
				   * TPE__STACKS_LEFT; pushes, the owner's
				   * exchange, thieves' CAS, the drains' CAS
				   * (under L) */
	struct tpe__park park;    /* W: the owner sleeps on it; whoever
				   * replaces its TPE__STACKS_ASLEEP marker, and
				   * the pool's changes, wake it */
	int busy;                 /* A, O: the owner is awake (a thief also
				   * sets its own before it steals) */
	uint64_t pushed;          /* A: tasks pushed here, counted by the
				   * submitter before its push (a relaxed
				   * add on the line the push takes anyway;
				   * undone when the push is refused) */
	bool handed;              /* L: its owner blocked and handed it
				   * over; no thread owns it yet */
	/* Counters, written on every task by the owner alone: a line of
	 * their own, so that they do not pull the stack's line back. */
	uint64_t started __attribute__((aligned(TPE__CACHE_LINE))); /* A, O */
	struct tpe__task *rest;   /* A: the owner's batch behind its running
				   * task, in run order; taken by the owner
				   * after the task, or by a thief */
	uint64_t completed;       /* A, O: tasks it finished */
	uint64_t dropped;         /* A, O: handed back at shutdown-now */
	uint64_t taken_upto;      /* A: `pushed` when the stack was last
				   * taken whole (the owner, a thief);
				   * relaxed, a hint for yield_if_behind */
} __attribute__((aligned(TPE__CACHE_LINE)));

struct tpe__stacks {
	struct tpe__engine base;  /* I */
	tpe_t *pool;              /* I: set by attach */
	size_t n;                 /* I: slots, = workers */
	struct tpe__stacks_slot *slots; /* I: n of them */
	uint64_t removed;         /* L: taken out by the drains */
	/* Written by workers going to sleep and by the pool's changes,
	 * read by pushes and spinners: a line of their own. */
	/* A: the next starting worker's slot */
	size_t next_slot __attribute__((aligned(TPE__CACHE_LINE)));
	unsigned gen;             /* A: bumped after each change of the pool */
	int paused;               /* A: pool->paused, copied under L */
	size_t deep;              /* A: workers asleep with no timeout */
	size_t watchers;          /* A: workers asleep with a timeout */
	/* Written at each start and end of a spin: away from the above,
	 * which every push reads. */
	int spinner __attribute__((aligned(TPE__CACHE_LINE))); /* A: 1 while
							 * a worker spins */
	/* Managed blocking (stacks_blocking.c). */
	pthread_cond_t spare_cond; /* W: spare threads wait here, with L */
	size_t spares;            /* L: threads without a slot looking for
				   * one, or started to */
	size_t nfree;             /* L: slots handed over, not yet owned */
	size_t orphans;           /* A: threads without a slot still in the
				   * task they blocked in; seq_cst, the
				   * tpe_wait_idle pair of set_asleep */
	uint64_t orphan_done;     /* A: tasks those finished (statistics) */
};

/*
 * The stacks engine whose base is e. Every tpe__engine this engine's ops
 * receive was made by tpe__engine_stacks_create as a struct tpe__stacks
 * (base first, the whole aligned to a cache line), so the cast restores
 * the type it was made with; it goes through void * because the compiler
 * cannot know that the stricter alignment holds (clang's -Wcast-align).
 */
static inline struct tpe__stacks *
tpe__stacks_of(struct tpe__engine *e)
{
	return (struct tpe__stacks *)(void *)e;
}

static inline const struct tpe__stacks *
tpe__stacks_of_const(const struct tpe__engine *e)
{
	return (const struct tpe__stacks *)(const void *)e;
}

/* A stack word that holds a task, not NULL nor a marker. */
static inline bool
tpe__stacks_is_task(const struct tpe__task *h)
{
	return (uintptr_t)h > (uintptr_t)TPE__STACKS_LEFT;
}

/*
 * The pool's state, seq_cst: the stores are set_state_locked's (pool.c),
 * each followed by the bump of gen (tpe__stacks_wake_all_locked); a
 * worker reads gen first, then this, so a change it misses here moves
 * gen for its sleep (stacks_idle.c).
 */
static inline int
tpe__stacks_state_seq_cst(const tpe_t *pool)
{
	return __atomic_load_n(&pool->state, __ATOMIC_SEQ_CST);
}

/* Calls a white-box test's hook when one is set (relaxed: the tests set
 * them before the state they build). */
static inline void
tpe__stacks_test_hook(void (**where)(void))
{
	void (*hook)(void) = tpe__hint_load(where);

	if (hook != NULL)
		hook();
}

/* ---- the idle protocol (stacks_idle.c) ---------------------------------- */

/*
 * The worker is awake (after its start, a sleep or a pause): the Dekker
 * store of the watcher pair (stacks_idle.c), made before it takes its
 * TPE__STACKS_ASLEEP marker back, so that a push that lands after that sees it
 * awake; its partner is a sleeper's load in other_awake.
 */
static inline void
tpe__stacks_set_awake(struct tpe__stacks_slot *me)
{
	tpe__dekker_store(&me->busy, 1);
}

/* A thief marks itself awake before its exchange or CAS, which is a
 * release: a tpe_wait_idle waiter that reads the word it wrote sees the
 * thief awake (stacks_idle.c). Relaxed: the thief's RMW orders it. */
static inline void
tpe__stacks_set_busy(struct tpe__stacks_slot *me)
{
	if (tpe__hint_load(&me->busy) == 0)
		tpe__hint_store(&me->busy, 1);
}

/* The worker holds no task and goes to sleep or waits out a pause: the
 * tpe_wait_idle pair (stacks_idle.c). */
void tpe__stacks_set_asleep(struct tpe__stacks *se,
    struct tpe__stacks_slot *me);

/* Wakes a deep sleeper other than `me` to watch (stacks_idle.c). */
void tpe__stacks_wake_watcher(struct tpe__stacks *se,
    const struct tpe__stacks_slot *me);

/*
 * Tasks wait behind awake worker `s` (a push that did not replace a
 * marker, a batch's first rest): when sleepers sleep deep but none
 * watches, wakes one to watch. The loads of the watcher pair
 * (stacks_idle.c): after the caller's push or store, they pair with a
 * sleeper's count in `deep` before its look at the busy flags, and with
 * a leaving watcher's decrement of `watchers` before its look at the
 * stacks. On every push: inline, two loads when nobody sleeps.
 */
static inline void
tpe__stacks_ensure_watcher(struct tpe__stacks *se,
    const struct tpe__stacks_slot *s)
{
	if (se->n > 1 && tpe__dekker_load(&se->deep) > 0 &&
	    tpe__dekker_load(&se->watchers) == 0)
		tpe__stacks_wake_watcher(se, s);
}

/* While the pool is paused (and running), waits for a change. */
void tpe__stacks_wait_while_paused(struct tpe__stacks *se,
    struct tpe__stacks_slot *me);

/*
 * The owner's stack is empty and the pool runs: spins (when it pays and
 * no other worker is awake), steals, and sleeps through the protocol of
 * stacks_idle.c until its stack may hold tasks or the pool changed after
 * `gen`. Returns a stolen stack in run order, or NULL to look again; the
 * worker is awake.
 */
struct tpe__task *tpe__stacks_idle_wait(struct tpe__stacks *se,
    struct tpe__stacks_slot *me, unsigned gen);

/* The engine's wake_all_locked and idle_locked ops (engine.h). */
void tpe__stacks_wake_all_locked(struct tpe__engine *e);
bool tpe__stacks_idle_locked(struct tpe__engine *e);

/* ---- the stacks (stacks.c) ---------------------------------------------- */

/* Takes from an awake worker other than `me` the rest of the batch behind
 * its running task, else its whole stack, in run order; NULL if none. */
struct tpe__task *tpe__stacks_steal(struct tpe__stacks *se,
    struct tpe__stacks_slot *me);

/* ---- managed blocking (stacks_blocking.c) ------------------------------- */

/* The slot this thread owns (NULL: none, a spare or a thread that lost
 * its slot in a blocking section). Read after every task. */
extern TPE__TLS struct tpe__stacks_slot *tpe__stacks_tls_slot;
/* Set when this thread took its handed slot back (tpe_blocking_end). */
extern TPE__TLS bool tpe__stacks_tls_retook;

/*
 * A thread without a slot (counted in spares when `counted`): adopts a
 * handed-over slot (returned, and tpe__stacks_tls_slot; L not held), or
 * gives up its place in wc after the keep-alive, or at shutdown once none
 * is handed (NULL; L held, as worker_loop returns).
 */
struct tpe__stacks_slot *tpe__stacks_adopt(struct tpe__stacks *se,
    bool counted);

/* The slotless end of task t (stacks_blocking.c, lost_slot). */
void tpe__stacks_end_slotless(struct tpe__stacks *se, struct tpe__task *t,
    struct tpe__task *done, size_t n);

/*
 * After task t (no lock): false when this thread still owns `me` (one
 * load per task); true when t handed it over and nobody gave it back:
 * t's completion is counted, the batch's spent nodes (the n from done,
 * and t) end, and the thread holds no slot and no task.
 */
static inline bool
tpe__stacks_lost_slot(struct tpe__stacks *se, struct tpe__stacks_slot *me,
    struct tpe__task *t, struct tpe__task *done, size_t n)
{
	if (tpe__stacks_tls_slot == me)
		return false;
	tpe__stacks_end_slotless(se, t, done, n);
	return true;
}

/* Whether this thread took its slot back in the task just run (then the
 * rest its last owner left is taken, whatever the batch held). */
static inline bool
tpe__stacks_took_back(void)
{
	if (!tpe__stacks_tls_retook)
		return false; /* every task: a load, no store */
	tpe__stacks_tls_retook = false;
	return true;
}

/* The engine's blocking op (engine.h). */
int tpe__stacks_blocking(struct tpe__engine *e, bool begin);

#endif /* TPE_ENGINE_STACKS_H */
