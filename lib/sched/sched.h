/* SPDX-License-Identifier: MIT */
/*
 * sched.h - delayed and periodic tasks (tpe_schedule(3)): the timer of a
 * pool and the hooks through which the pool tells it about its lifecycle.
 *
 * Where it sits: lib/sched, a layer on the pool's public calls. A due task
 * enters the pool through its engine's submit_wait (timeout 0), so the
 * timer works on every queue kind, policy and engine unchanged; after
 * tpe_shutdown too, where the engine admits the scheduler's tasks
 * (tpe__sched_admits) until tpe_shutdown_now. It takes from the pool
 * only the narrow struct tpe__sched_hook below (embedded in the pool, its
 * I fields set at create) and the future module (a scheduled task's
 * record begins with its future: future.h). pool.c calls the hooks listed
 * below, each without pool->lock held; sched never takes pool->lock.
 */
#ifndef TPE_SCHED_H
#define TPE_SCHED_H

#include <stdbool.h>
#include <stddef.h>

#include "pool/state.h"
#include "queue/node.h"
#include "tpe.h"

struct tpe__sched;

/* What the scheduler gets of its pool (pool->sched_hook). */
struct tpe__sched_hook {
	struct tpe__sched *s;     /* A: NULL until the first schedule or
				   * shutdown (CAS), then fixed until
				   * tpe__sched_destroy (sched.c) */
	tpe_t *pool;              /* I: only passed to enter and settle */
	/* I: how a due task enters the pool: the engine's submit_wait with
	 * timeout 0 (never the rejection policy, never waits for room),
	 * which a SHUTDOWN pool still admits (tpe__sched_admits). 0, or
	 * EAGAIN / ENOMEM / ETIMEDOUT (saturated), ECANCELED (stopped), or
	 * ENOTSUP (shut down, and its engine takes nothing more: the stacks
	 * engine's workers close once drained): the caller keeps the task. */
	int (*enter)(tpe_t *pool, tpe_fn fn, void *arg);
	/* I: called with no lock held when `owes` went false: the pool may
	 * terminate now, and its idle waiters look again. */
	void (*settle)(tpe_t *pool);
	/* I: called with no lock held when a task that may have been due
	 * left the timer (entered the pool, went back, was removed): the
	 * pool's idle waiters look again (each checks under its lock). It
	 * never ends the pool: the timer calls it while tpe_shutdown_now may
	 * be between its stop and its drain. */
	void (*look_again)(tpe_t *pool);
	tpe_handback_fn discard;  /* I: the pool's discard callback */
	void *discard_ctx;        /* I */
	unsigned flags;           /* I: TPE_SCHED_* */
	/* S (sched.c's lock), A: after tpe_shutdown and until
	 * tpe_shutdown_now, whether a scheduled task must still enter the
	 * pool (pending, or held by the timer): the pool does not terminate
	 * meanwhile (tpe__sched_owes). */
	bool owes;
};

/* Whether the scheduler still owes the shut-down pool a task: read under
 * pool->lock by its termination check. Acquire: pairs with sched.c's
 * release store (owes_locked), which is followed by h->settle when it
 * stores false. */
static inline bool
tpe__sched_owes(const struct tpe__sched_hook *h)
{
	return __atomic_load_n(&h->owes, __ATOMIC_ACQUIRE);
}

/*
 * The hooks pool.c calls (never with pool->lock held):
 *
 * tpe__sched_shutdown: from tpe_shutdown, before the pool leaves RUNNING.
 *   New schedules are refused from here on; the flags decide what stays;
 *   what stays is owed (h->owes): the timer enters it when due, as
 *   before shutdown, and the pool does not terminate until it has.
 * tpe__sched_shutdown_now: from tpe_shutdown_now, once the pool is STOP
 *   (it refuses every task then) and before it drains its queue. Every
 *   pending scheduled task goes to cb (user fn/arg) once. False: forked in
 *   cb (touch nothing).
 * tpe__sched_translate: for each node tpe_shutdown_now drained, without
 *   pool->lock (the future's cancel runs its continuations, which may
 *   call into the pool): a due scheduled task gets its user fn/arg back
 *   (its future cancelled); any other node is left untouched.
 * tpe__sched_dropped: the match of tpe_purge and tpe_shutdown for queued
 *   nodes (pool->lock held, no lock of sched's taken): a due scheduled
 *   task that will not run (its future cancelled, or a periodic run after
 *   a shutdown that stops it). The pool hands such nodes to its discard
 *   callback (tpe__sched_discard).
 * tpe__sched_pending: the pending scheduled tasks (the `queued` stat).
 * tpe__sched_due: whether a scheduled task is due and not yet in the pool
 *   (pending, or held by the timer): tpe_wait_idle waits for it, as for
 *   queued work. Under pool->lock (S is a leaf); h->settle follows every
 *   change that can make it false.
 * tpe__sched_purge: removes cancelled pending tasks; how many.
 * tpe__sched_destroy: from tpe_destroy after termination (joins the timer
 *   thread; in a fork child only frees memory: the thread is gone there).
 * tpe__sched_atfork_forget: from the pool's fork child handler.
 */
void tpe__sched_shutdown(struct tpe__sched_hook *h);
bool tpe__sched_shutdown_now(struct tpe__sched_hook *h, tpe_handback_fn cb,
    void *ctx);
void tpe__sched_translate(struct tpe__sched_hook *h, struct tpe__task *t);
bool tpe__sched_dropped(const struct tpe__task *t);
size_t tpe__sched_pending(const struct tpe__sched_hook *h);
bool tpe__sched_due(const struct tpe__sched_hook *h);
size_t tpe__sched_purge(struct tpe__sched_hook *h);
void tpe__sched_destroy(struct tpe__sched_hook *h);
/* The pool's fork child handler, for each queued node it frees: drops a
 * scheduled task's record (the child has no timer). */
void tpe__sched_atfork_forget(struct tpe__task *t);

/*
 * The discard callback the pool installs in its attributes (ctx: the
 * hook), so that a scheduled task the pool itself drops (DISCARD_OLDEST
 * evicting it, a shutdown with no worker to drain the queue) reaches the
 * user's discard callback (h->discard) as the user's fn/arg, its future
 * cancelled; anything else is passed on unchanged.
 */
void tpe__sched_discard(tpe_fn fn, void *arg, void *ctx);

/*
 * The function of the task a due scheduled task enters the pool as, and
 * what the pool's task runner asks of it before the task hooks (struct
 * tpe__tasks' wrap_fn and wrap_begin): whether the user's task will run
 * (a one-shot is started here, so that a cancel from now on says EBUSY;
 * a cancelled or stopped task will not run and gets no hooks), and the
 * user's fn/arg for the hooks (fn NULL for a tpe_schedule_call task).
 */
extern const tpe_fn tpe__sched_task_fn;
bool tpe__sched_begin(void *arg, tpe_fn *fn, void **user_arg);

/*
 * Whether a pool in `state` (enum tpe__state) takes a task whose node fn
 * is fn: RUNNING takes every task; SHUTDOWN only the scheduler's, which
 * its timer enters only while it owes them (the path tpe_shutdown does not
 * close: Java's delay queue after shutdown); STOP and later none. The
 * engines ask this wherever they test the state with a task in hand.
 */
static inline bool
tpe__sched_admits(int state, tpe_fn fn)
{
	return state == TPE__RUNNING ||
	    (state == TPE__SHUTDOWN && fn == tpe__sched_task_fn);
}

/*
 * Tests only (NULL otherwise): the scheduler's clock instead of
 * CLOCK_MONOTONIC (due times, tpe_future_get_delay, the timer's "is it
 * due"; the timer still sleeps on CLOCK_MONOTONIC), and a hook the timer
 * calls without its lock when heap[0] is due: first with holding false
 * (the task still pending), then with holding true (taken out, about to
 * enter the pool; a shutdown waits for it). The made hook is called by
 * the first schedule of a pool with its new scheduler, before it publishes
 * it in the hook (a race with another first schedule, which may win):
 * with started false before its timer thread starts, then true after.
 */
extern int64_t (*tpe__sched_clock_hook)(void);
extern void (*tpe__sched_timer_hook)(bool holding);
extern void (*tpe__sched_made_hook)(bool started);

/*
 * The work of the four public calls (lib/pool/schedule.c checks the pool,
 * the arguments and the pool's state first): schedules fn (or call) on
 * arg after delay_ns, with period (> 0 fixed rate, < 0 fixed delay, 0 a
 * one-shot), each run entering the pool at `priority` (a priority queue's
 * rank: tpe_schedule_priority(3)). 0, or ECANCELED (shut down), ENOMEM,
 * EAGAIN (no timer thread); on error *future (if given) is left alone and
 * nothing was scheduled.
 */
int tpe__sched_schedule(struct tpe__sched_hook *h, tpe_fn fn,
    tpe_call_fn call, void *arg, int64_t delay_ns, int64_t period,
    int priority, tpe_future_t **future);
/* The priority a due task enters the pool with; arg is the argument of
 * its enter (a record; any thread, no lock: it is fixed at schedule). */
int tpe__sched_priority(const void *arg);

#endif /* TPE_SCHED_H */
