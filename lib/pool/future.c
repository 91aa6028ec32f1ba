/* SPDX-License-Identifier: MIT */
/*
 * future.c - futures of tpe_submit tasks: state machine, waiting,
 * references, failure and continuations.
 *
 * Design notes (beside future.h's)
 * --------------------------------
 * Failure: tls_frame is the callable that runs on this thread (NULL
 * between callables); tpe_task_fail writes its error there. A callable
 * that runs another inline (a caller-runs rejection, a continuation that
 * runs a task) opens a nested frame; run_started restores the outer one.
 *
 * Continuations: a struct tpe__then is, in turn,
 *   1. on f->thens (registered, f not final), or fired at once;
 *   2. fired: pool == NULL: its callback runs on the firing thread;
 *      pool != NULL: it is submitted there as a task (hop = its future)
 *      and itself pushed on hop->thens as hop's guard; refused: it runs
 *      on the firing thread;
 *   3. as hop's guard, fired when hop ends: the task ran the callback
 *      (hop DONE), or hop was cancelled (a discard policy, tpe_shutdown_
 *      now, tpe_purge) and the guard runs it on its firing thread.
 * So the callback runs exactly once, whatever the pool does. The node is
 * freed by whoever ran the callback (hop NULL) or by the guard.
 *
 * Firing takes no lock of the future's. The completing threads: the one
 * that ran the callable; for a cancel, the caller of tpe_future_cancel,
 * the thread that hands a task back (no pool lock held, task.c), or
 * lib/sched's (no pool lock held either: tpe_shutdown_now translates the
 * scheduled tasks it drained after it dropped the lock).
 */
#include <errno.h>
#include <stdlib.h>

#include "pool/future.h"
#include "base/fork.h"
#include "base/sync.h"

struct tpe__then {
	struct tpe__then *next; /* L: the future's lock, while on a list */
	tpe_then_fn fn;         /* I */
	void *ctx;              /* I */
	tpe_t *pool;            /* the firing thread's: NULL once used */
	struct tpe_future *f;   /* I: the future it waits for (a reference) */
	struct tpe_future *hop; /* the pool task's future, once submitted;
				 * written before it is pushed on hop->thens
				 * (hop->lock orders it for hop's completer) */
};

/* The callable running on this thread, and what it reported. */
struct frame {
	int error;
};
static TPE__TLS struct frame *tls_frame;

static void fire(struct tpe__then *t);

/* Fires, in registration order, the list that the final transition took. */
static void
fire_all(struct tpe__then *newest_first)
{
	struct tpe__then *t, *next, *list = NULL;

	for (t = newest_first; t != NULL; t = next) {
		next = t->next;
		t->next = list;
		list = t;
	}
	for (t = list; t != NULL; t = next) {
		next = t->next;
		fire(t);
	}
}

void
tpe__future_init(struct tpe_future *f, tpe_call_fn fn, void *arg)
{
	tpe__mutex_init_ranked(&f->lock, TPE__RANK_FUTURE);
	tpe__cond_init(&f->cond);
	f->state = TPE__F_NEW;
	f->error = 0;
	f->result = NULL;
	f->thens = NULL;
	f->fn = fn;
	f->arg = arg;
	f->refs = 2;
	f->fork_gen = tpe__fork_gen();
	f->sched = NULL;
	f->accepted_tick = 0;
}

int
tpe__future_create(struct tpe_future **fp, tpe_call_fn fn, void *arg)
{
	struct tpe_future *f = malloc(sizeof(*f));

	if (f == NULL)
		return ENOMEM;
	tpe__future_init(f, fn, arg);
	*fp = f;
	return 0;
}

void
tpe__future_unref(struct tpe_future *f)
{
	/* acq_rel: the last owner sees every write of the other owner. */
	if (__atomic_sub_fetch(&f->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	if (!tpe__forked_since(f->fork_gen)) {
		tpe__cond_destroy(&f->cond);
		tpe__mutex_destroy(&f->lock);
	}
	free(f);
}

/* Returns the continuations a final state takes (NULL for RUNNING). */
static struct tpe__then *
set_state_locked(struct tpe_future *f, int state)
{
	struct tpe__then *thens = NULL;

	TPE__ASSERT_HELD(&f->lock);
	/* NEW -> RUNNING -> DONE, or NEW -> CANCELLED, each once (future.h). */
	TPE__ASSERT(f->state == TPE__F_NEW ?
	    state == TPE__F_RUNNING || state == TPE__F_CANCELLED :
	    f->state == TPE__F_RUNNING && state == TPE__F_DONE);
	if (state != TPE__F_RUNNING) {
		/* Taken with the final state, under f->lock: a registration
		 * after this sees the state (tpe_future_then). */
		thens = f->thens;
		f->thens = NULL;
	}
	/* Pairs with the acquire load in tpe_future_is_done(). */
	__atomic_store_n(&f->state, state, __ATOMIC_RELEASE);
	return thens;
}

bool
tpe__future_start(struct tpe_future *f)
{
	bool started;

	tpe__mutex_lock(&f->lock);
	started = f->state == TPE__F_NEW;
	if (started)
		(void)set_state_locked(f, TPE__F_RUNNING);
	tpe__mutex_unlock(&f->lock);
	return started;
}

enum tpe__future_run_result
tpe__future_run_started(struct tpe_future *f)
{
	struct frame frame = { 0 }, *outer = tls_frame;
	struct tpe__then *thens;
	void *result;

	TPE__ASSERT(__atomic_load_n(&f->state, __ATOMIC_RELAXED) ==
	    TPE__F_RUNNING);
	tls_frame = &frame;
	result = f->fn(f->arg);
	tls_frame = outer;
	if (tpe__forked_since(f->fork_gen))
		return TPE__FORKED;

	tpe__mutex_lock(&f->lock);
	f->result = result;
	f->error = frame.error;
	thens = set_state_locked(f, TPE__F_DONE);
	tpe__cond_broadcast(&f->cond);
	tpe__mutex_unlock(&f->lock);
	fire_all(thens);
	return TPE__RAN;
}

enum tpe__future_run_result
tpe__future_run(struct tpe_future *f)
{
	if (!tpe__future_start(f))
		return TPE__NOT_RUN;
	return tpe__future_run_started(f);
}

bool
tpe__future_cancel(struct tpe_future *f)
{
	struct tpe__then *thens = NULL;
	bool cancelled;

	tpe__mutex_lock(&f->lock);
	if (f->state == TPE__F_NEW) {
		thens = set_state_locked(f, TPE__F_CANCELLED);
		tpe__cond_broadcast(&f->cond);
	}
	cancelled = f->state == TPE__F_CANCELLED;
	tpe__mutex_unlock(&f->lock);
	fire_all(thens);
	return cancelled;
}

int
tpe_future_get(tpe_future_t *f, int64_t timeout_ns, void **result)
{
	int64_t deadline;
	int rc = 0;

	if (f == NULL)
		return EINVAL;
	deadline = tpe__deadline(timeout_ns);
	tpe__mutex_lock(&f->lock);
	while (f->state == TPE__F_NEW || f->state == TPE__F_RUNNING) {
		if (timeout_ns == 0 || rc == ETIMEDOUT) {
			tpe__mutex_unlock(&f->lock);
			return ETIMEDOUT;
		}
		rc = tpe__cond_wait_until(&f->cond, &f->lock, deadline);
	}
	if (f->state == TPE__F_CANCELLED) {
		rc = ECANCELED;
	} else {
		rc = f->error != 0 ? EIO : 0;
		if (result != NULL)
			*result = f->result;
	}
	tpe__mutex_unlock(&f->lock);
	return rc;
}

int
tpe_future_cancel(tpe_future_t *f)
{
	const struct tpe__future_sched *ops;

	if (f == NULL)
		return EINVAL;
	if (!tpe__future_cancel(f))
		return EBUSY;
	/* A scheduled task leaves its timer (REMOVE_ON_CANCEL, shutdown); a
	 * periodic one that runs now finishes this run and starts no other. */
	/* Acquire: pairs with lib/sched's stores of f->sched. */
	ops = __atomic_load_n(&f->sched, __ATOMIC_ACQUIRE);
	if (ops != NULL)
		ops->on_cancel(f);
	return 0;
}

int
tpe_future_get_delay(const tpe_future_t *f, int64_t *delay_ns)
{
	const struct tpe__future_sched *ops;

	if (f == NULL || delay_ns == NULL)
		return EINVAL;
	/* Acquire: pairs with lib/sched's stores of f->sched. */
	ops = __atomic_load_n(&f->sched, __ATOMIC_ACQUIRE);
	if (ops == NULL)
		return EINVAL;
	*delay_ns = ops->get_delay(f);
	return 0;
}

bool
tpe_future_is_done(const tpe_future_t *f)
{
	int s;

	if (f == NULL)
		return false;
	s = __atomic_load_n(&f->state, __ATOMIC_ACQUIRE);
	return s == TPE__F_DONE || s == TPE__F_CANCELLED;
}

bool
tpe_future_is_cancelled(const tpe_future_t *f)
{
	if (f == NULL)
		return false;
	return __atomic_load_n(&f->state, __ATOMIC_ACQUIRE) == TPE__F_CANCELLED;
}

void
tpe_future_release(tpe_future_t *f)
{
	if (f != NULL)
		tpe__future_unref(f);
}

int
tpe_future_error(const tpe_future_t *f)
{
	/* Acquire: pairs with the release store of DONE (set_state_locked),
	 * which follows the write of f->error. */
	if (f == NULL ||
	    __atomic_load_n(&f->state, __ATOMIC_ACQUIRE) != TPE__F_DONE)
		return 0;
	return f->error;
}

int
tpe_task_fail(int error)
{
	if (error <= 0 || tls_frame == NULL)
		return EINVAL;
	tls_frame->error = error;
	return 0;
}

/* ---- continuations ---------------------------------------------------- */

/* Pushes t on f's list, or fires it when f is already final. */
static void
attach(struct tpe_future *f, struct tpe__then *t)
{
	bool final;

	tpe__mutex_lock(&f->lock);
	final = f->state == TPE__F_DONE || f->state == TPE__F_CANCELLED;
	if (!final) {
		t->next = f->thens;
		f->thens = t;
	}
	tpe__mutex_unlock(&f->lock);
	if (final)
		fire(t);
}

/* Runs the callback, which inherits t's reference to t->f. */
static void
call(struct tpe__then *t)
{
	t->fn(t->f, t->ctx);
}

/* The task a continuation with a pool runs there. */
static void *
then_task(void *arg)
{
	call(arg);
	return NULL;
}

static void
fire(struct tpe__then *t)
{
	tpe_t *pool = t->pool;

	if (t->hop != NULL) {
		/* hop's guard: the task ran the callback unless hop was
		 * cancelled. */
		if (tpe_future_is_cancelled(t->hop))
			call(t);
		tpe__future_unref(t->hop);
		free(t);
		return;
	}
	if (pool != NULL) {
		t->pool = NULL;
		if (tpe_submit(pool, then_task, t, &t->hop) == 0) {
			attach(t->hop, t);
			return;
		}
		/* Refused: here, never lost. */
	}
	call(t);
	free(t);
}

struct tpe__then *
tpe__then_new(void)
{
	return malloc(sizeof(struct tpe__then));
}

void
tpe__then_free(struct tpe__then *t)
{
	free(t);
}

void
tpe__then_attach(struct tpe__then *t, struct tpe_future *f, tpe_then_fn fn,
    void *ctx, tpe_t *pool)
{
	t->next = NULL;
	t->fn = fn;
	t->ctx = ctx;
	t->pool = pool;
	t->f = f;
	t->hop = NULL;
	/* The continuation's reference, for its callback. Relaxed: the
	 * caller holds one, so the count cannot reach 0 meanwhile; the
	 * acq_rel decrements in tpe__future_unref order the rest. */
	__atomic_add_fetch(&f->refs, 1, __ATOMIC_RELAXED);
	attach(f, t);
}

int
tpe_future_then(tpe_future_t *f, tpe_then_fn fn, void *ctx, tpe_t *pool)
{
	struct tpe__then *t;

	if (f == NULL || fn == NULL)
		return EINVAL;
	t = tpe__then_new();
	if (t == NULL)
		return ENOMEM;
	tpe__then_attach(t, f, fn, ctx, pool);
	return 0;
}
