/* SPDX-License-Identifier: MIT */
/* future.c - futures of tpe_submit tasks: state machine, waiting, references. */
#include <errno.h>
#include <stdlib.h>

#include "pool/future.h"
#include "base/fork.h"
#include "base/sync.h"

void
tpe__future_init(struct tpe_future *f, tpe_call_fn fn, void *arg)
{
	tpe__mutex_init_ranked(&f->lock, TPE__RANK_FUTURE);
	tpe__cond_init(&f->cond);
	f->state = TPE__F_NEW;
	f->result = NULL;
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

static void
set_state_locked(struct tpe_future *f, int state)
{
	TPE__ASSERT_HELD(&f->lock);
	/* NEW -> RUNNING -> DONE, or NEW -> CANCELLED, each once (future.h). */
	TPE__ASSERT(f->state == TPE__F_NEW ?
	    state == TPE__F_RUNNING || state == TPE__F_CANCELLED :
	    f->state == TPE__F_RUNNING && state == TPE__F_DONE);
	/* Pairs with the acquire load in tpe_future_is_done(). */
	__atomic_store_n(&f->state, state, __ATOMIC_RELEASE);
}

bool
tpe__future_start(struct tpe_future *f)
{
	bool started;

	tpe__mutex_lock(&f->lock);
	started = f->state == TPE__F_NEW;
	if (started)
		set_state_locked(f, TPE__F_RUNNING);
	tpe__mutex_unlock(&f->lock);
	return started;
}

enum tpe__future_run_result
tpe__future_run_started(struct tpe_future *f)
{
	void *result;

	TPE__ASSERT(__atomic_load_n(&f->state, __ATOMIC_RELAXED) ==
	    TPE__F_RUNNING);
	result = f->fn(f->arg);
	if (tpe__forked_since(f->fork_gen))
		return TPE__FORKED;

	tpe__mutex_lock(&f->lock);
	f->result = result;
	set_state_locked(f, TPE__F_DONE);
	tpe__cond_broadcast(&f->cond);
	tpe__mutex_unlock(&f->lock);
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
	bool cancelled;

	tpe__mutex_lock(&f->lock);
	if (f->state == TPE__F_NEW) {
		set_state_locked(f, TPE__F_CANCELLED);
		tpe__cond_broadcast(&f->cond);
	}
	cancelled = f->state == TPE__F_CANCELLED;
	tpe__mutex_unlock(&f->lock);
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
		rc = 0;
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
