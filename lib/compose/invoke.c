/* SPDX-License-Identifier: MIT */
/*
 * invoke.c - Java's invokeAll and invokeAny (tpe_invoke_all(3)) on the
 * public tpe_submit and the future's continuations.
 *
 * Design notes
 * ------------
 * invoke-all submits every task, then waits on each future in turn with
 * the one deadline; at the deadline it cancels them all (a cancel of a
 * running or done task is a no-op, EBUSY). No state is shared with the
 * tasks, so nothing outlives the call but the futures it hands back.
 *
 * invoke-any needs "the first success or the last end", which no one
 * future says: each future gets a continuation (attached with a node made
 * before the submission, so an accepted task always gets one) that counts
 * it in a latch shared with the call:
 *  - remaining: the tasks submitted and not yet ended, plus those still
 *    to be submitted; the call subtracts the ones it did not submit;
 *  - winner: the first future that ended successfully (DONE, not failed),
 *    set once, under the latch's lock, by its continuation;
 *  - the latch lives until its last reference goes: the call's, and one
 *    per continuation not yet run (a task still running after the call
 *    returned, cancelled too late, ends later).
 * The call waits until winner is set, remaining is 0 or the deadline
 * passed, then cancels every future: the winner is fixed before the
 * cancels, so a cancel can never undo it.
 *
 * Deadlock: a worker of pool that waits for pool's tasks may be the thread
 * they need (a pool of one thread; its own stack of a per-worker pool).
 * Both calls return EDEADLK there before submitting anything.
 *
 * Legend: doc/architecture.md.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/sync.h"
#include "pool/future.h"
#include "pool/pool.h"
#include "tpe.h"

/* The calls' argument checks: 0 or EINVAL/EDEADLK. */
static int
check(tpe_t *pool, size_t n, const tpe_call_fn *fns, tpe_future_t **futures)
{
	size_t i;

	if (pool == NULL || futures == NULL || (n > 0 && fns == NULL))
		return EINVAL;
	for (i = 0; i < n; i++)
		if (fns[i] == NULL)
			return EINVAL;
	if (tpe__tls_worker_pool == pool)
		return EDEADLK;
	return 0;
}

/* Cancels futures[0..n) that are not NULL (a running or done one stays). */
static void
cancel_all(tpe_future_t **futures, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (futures[i] != NULL)
			(void)tpe_future_cancel(futures[i]);
}

/* The time left until deadline (tpe__deadline's), as a timeout. */
static int64_t
left(int64_t timeout_ns, int64_t deadline)
{
	int64_t now;

	if (timeout_ns < 0)
		return -1;
	now = tpe__now_ns();
	return deadline > now ? deadline - now : 0;
}

/* Submits task i for i in [0, n); at the first refusal, futures[i..n) are
 * NULL and the error is returned. then[i], when given, is attached to
 * task i's future right after it was accepted (fn/ctx). */
static int
submit_all(tpe_t *pool, size_t n, const tpe_call_fn *fns, void *const *args,
    tpe_future_t **futures, struct tpe__then **then, tpe_then_fn fn,
    void *ctx, size_t *submitted)
{
	size_t i, j;
	int rc = 0;

	for (i = 0; i < n; i++) {
		rc = tpe_submit(pool, fns[i], args != NULL ? args[i] : NULL,
		    &futures[i]);
		if (rc != 0)
			break;
		if (then != NULL) {
			tpe__then_attach(then[i], futures[i], fn, ctx, NULL);
			then[i] = NULL;
		}
	}
	*submitted = i;
	for (j = i; j < n; j++)
		futures[j] = NULL;
	return rc;
}

int
tpe_invoke_all(tpe_t *pool, size_t n, const tpe_call_fn *fns,
    void *const *args, int64_t timeout_ns, tpe_future_t **futures)
{
	int64_t deadline;
	size_t i, submitted;
	int rc;

	rc = check(pool, n, fns, futures);
	if (rc != 0)
		return rc;
	deadline = tpe__deadline(timeout_ns);
	rc = submit_all(pool, n, fns, args, futures, NULL, NULL, NULL,
	    &submitted);
	if (rc != 0) {
		cancel_all(futures, submitted);
		return rc;
	}
	for (i = 0; i < n; i++) {
		rc = tpe_future_get(futures[i], left(timeout_ns, deadline),
		    NULL);
		if (rc == ETIMEDOUT) {
			cancel_all(futures, n);
			return ETIMEDOUT;
		}
	}
	return 0;
}

struct any {
	struct tpe__mutex lock;
	pthread_cond_t cond;        /* W: the call waits here, with lock */
	size_t refs;                /* L: the call's + the pending
				     * continuations' */
	size_t remaining;           /* L: tasks not ended (Design notes) */
	tpe_future_t *winner;       /* L: set once; NULL until then */
};

/* Drops a reference; the last one frees. L held on entry, released. */
static void
any_unref_unlock(struct any *a)
{
	bool last = --a->refs == 0;

	tpe__mutex_unlock(&a->lock);
	if (last) {
		tpe__cond_destroy(&a->cond);
		tpe__mutex_destroy(&a->lock);
		free(a);
	}
}

/* Each task's continuation: counts its end, the first success wins. */
static void
any_ended(tpe_future_t *f, void *ctx)
{
	struct any *a = ctx;
	bool success = !tpe_future_is_cancelled(f) && tpe_future_error(f) == 0;

	tpe__mutex_lock(&a->lock);
	TPE__ASSERT(a->remaining > 0);
	a->remaining--;
	if (success && a->winner == NULL)
		a->winner = f;
	if (a->winner != NULL || a->remaining == 0)
		tpe__cond_broadcast(&a->cond);
	any_unref_unlock(a);
	/* The winner stays valid for the call: futures[] holds it. */
	tpe_future_release(f);
}

/* What invoke-any says when none won: EIO if one failed, else all were
 * cancelled. */
static int
none_won(tpe_future_t **futures, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (tpe_future_error(futures[i]) != 0)
			return EIO;
	return ECANCELED;
}

int
tpe_invoke_any(tpe_t *pool, size_t n, const tpe_call_fn *fns,
    void *const *args, int64_t timeout_ns, tpe_future_t **futures,
    void **result, size_t *index)
{
	struct tpe__then **then;
	struct any *a;
	int64_t deadline;
	size_t i, submitted;
	int rc, wrc = 0;

	rc = check(pool, n, fns, futures);
	if (rc != 0)
		return rc;
	if (n == 0)
		return EINVAL;
	deadline = tpe__deadline(timeout_ns);
	a = malloc(sizeof(*a));
	then = calloc(n, sizeof(*then));
	if (a == NULL || then == NULL)
		goto nomem;
	for (i = 0; i < n; i++)
		if ((then[i] = tpe__then_new()) == NULL)
			goto nomem;
	tpe__mutex_init(&a->lock);
	tpe__cond_init(&a->cond);
	a->refs = n + 1;
	a->remaining = n;
	a->winner = NULL;

	rc = submit_all(pool, n, fns, args, futures, then, any_ended, a,
	    &submitted);
	for (i = submitted; i < n; i++)
		tpe__then_free(then[i]);
	free(then);
	tpe__mutex_lock(&a->lock);
	/* The ones not submitted never end, nor hold a reference. */
	a->remaining -= n - submitted;
	a->refs -= n - submitted;
	while (rc == 0 && a->winner == NULL && a->remaining > 0 &&
	    wrc != ETIMEDOUT) {
		if (timeout_ns == 0)
			wrc = ETIMEDOUT;
		else
			wrc = tpe__cond_wait_until(&a->cond, &a->lock,
			    deadline);
	}
	/* Fixed before the cancels below (Design notes). */
	if (rc == 0 && a->winner != NULL) {
		for (i = 0; futures[i] != a->winner; i++)
			continue;
		if (index != NULL)
			*index = i;
		(void)tpe_future_get(a->winner, 0, result);
	} else if (rc == 0) {
		rc = a->remaining == 0 ? none_won(futures, n) : ETIMEDOUT;
	}
	any_unref_unlock(a);
	cancel_all(futures, submitted);
	return rc;

nomem:
	if (then != NULL)
		for (i = 0; i < n; i++)
			tpe__then_free(then[i]);
	free(then);
	free(a);
	return ENOMEM;
}
