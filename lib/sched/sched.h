/* SPDX-License-Identifier: MIT */
/*
 * sched.h - delayed and periodic tasks (tpe_schedule(3)): the timer of a
 * pool and the hooks through which the pool tells it about its lifecycle.
 *
 * Where it sits: lib/sched, a layer on the pool's public calls. A due task
 * enters the pool through tpe_execute_wait (timeout 0), so the timer works
 * on every queue kind, policy and engine unchanged. It takes from the pool
 * only the narrow struct tpe__sched_hook below (embedded in the pool, its
 * I fields set at create) and the future module (a scheduled task's
 * record begins with its future: future.h). pool.c calls the hooks listed
 * below, each without pool->lock held; sched never takes pool->lock.
 */
#ifndef TPE_SCHED_H
#define TPE_SCHED_H

#include <stdbool.h>
#include <stddef.h>

#include "queue/node.h"
#include "tpe.h"

struct tpe__sched;

/* What the scheduler gets of its pool (pool->sched_hook). */
struct tpe__sched_hook {
	struct tpe__sched *s;     /* A: NULL until the first schedule or
				   * shutdown (CAS), then fixed until
				   * tpe__sched_destroy (sched.c) */
	tpe_t *pool;              /* I: only passed to enter */
	/* I: how a due task enters the pool: tpe_execute_wait (its rules:
	 * never the rejection policy, 0 waits for no room) */
	int (*enter)(tpe_t *pool, tpe_fn fn, void *arg, int64_t timeout_ns);
	tpe_handback_fn discard;  /* I: the pool's discard callback */
	void *discard_ctx;        /* I */
	unsigned flags;           /* I: TPE_SCHED_* */
};

/*
 * The hooks pool.c calls (never with pool->lock held):
 *
 * tpe__sched_shutdown: from tpe_shutdown, before the pool leaves RUNNING.
 *   New schedules are refused from here on; the flags decide what stays;
 *   what stays runs on one worker of the pool (a "gate" task submitted
 *   now), which keeps the pool from terminating until it is done.
 * tpe__sched_shutdown_now: from tpe_shutdown_now, before the pool drains
 *   its queue. Every pending scheduled task goes to cb (user fn/arg) once.
 * tpe__sched_translate: for each node tpe_shutdown_now drained: a due
 *   scheduled task gets its user fn/arg back (its future cancelled) and
 *   true; the gate task: false (the pool frees the node, no hand-back);
 *   any other node: true, untouched.
 * tpe__sched_pending: the pending scheduled tasks (the `queued` stat).
 * tpe__sched_purge: removes cancelled pending tasks; how many.
 * tpe__sched_destroy: from tpe_destroy after termination (joins the timer
 *   thread; in a fork child only frees memory: the thread is gone there).
 * tpe__sched_atfork_forget: from the pool's fork child handler.
 */
void tpe__sched_shutdown(struct tpe__sched_hook *h);
void tpe__sched_shutdown_now(struct tpe__sched_hook *h, tpe_handback_fn cb,
    void *ctx);
bool tpe__sched_translate(struct tpe__sched_hook *h, struct tpe__task *t);
size_t tpe__sched_pending(const struct tpe__sched_hook *h);
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
 * The work of the four public calls (lib/pool/schedule.c checks the pool,
 * the arguments and the pool's state first): schedules fn (or call) on
 * arg after delay_ns, with period (> 0 fixed rate, < 0 fixed delay, 0 a
 * one-shot). 0, or ECANCELED (shut down), ENOMEM, EAGAIN (no timer
 * thread); on error *future (if given) is left alone and nothing was
 * scheduled.
 */
int tpe__sched_schedule(struct tpe__sched_hook *h, tpe_fn fn,
    tpe_call_fn call, void *arg, int64_t delay_ns, int64_t period,
    tpe_future_t **future);

#endif /* TPE_SCHED_H */
