/* SPDX-License-Identifier: MIT */
/*
 * rejection.c - abort, caller-runs, discard, discard-oldest, and custom
 * handlers (Java's RejectedExecutionHandler family).
 *
 * Differences from Java, on purpose: a pool that is shut down refuses with
 * ECANCELED before any policy runs (the caller keeps the task instead of
 * Java's silent discard); discard-oldest replaces the head once instead of
 * recursing into execute (which never ends on a hand-off queue).
 */
#include <errno.h>

#include "pool/future.h"
#include "policy/rejection.h"

static int
reject_abort(tpe_t *pool, struct tpe__task *t, void *ctx)
{
	(void)ctx;
	(void)t;
	tpe__pool_count_rejected(pool);
	return EAGAIN;
}

static int
reject_caller_runs(tpe_t *pool, struct tpe__task *t, void *ctx)
{
	(void)ctx;
	tpe__pool_count_rejected(pool);
	if (tpe_is_shutdown(pool))
		return ECANCELED;
	tpe__task_run_inline(pool, t);
	return 0;
}

static int
reject_discard(tpe_t *pool, struct tpe__task *t, void *ctx)
{
	(void)ctx;
	tpe__pool_count_rejected(pool);
	if (tpe_is_shutdown(pool))
		return ECANCELED;
	tpe__task_discard(pool, t);
	return 0;
}

static int
reject_discard_oldest(tpe_t *pool, struct tpe__task *t, void *ctx)
{
	struct tpe__task *victim;
	int rc;

	(void)ctx;
	tpe__pool_count_rejected(pool);
	rc = tpe__pool_replace_oldest(pool, t, &victim);
	if (victim != NULL)
		tpe__task_discard(pool, victim);
	return rc;
}

static int
reject_custom(tpe_t *pool, struct tpe__task *t, void *ctx)
{
	const struct tpe_attr *a = &pool->attr;

	(void)ctx;
	tpe__pool_count_rejected(pool);
	if (tpe_is_shutdown(pool))
		return ECANCELED;
	return tpe__task_offer_to_handler(pool, t, a->reject_fn, a->reject_ctx);
}

void
tpe__rejection_select(const struct tpe_attr *a, tpe__reject_fn *fn, void **ctx)
{
	static const tpe__reject_fn standard[] = {
		[TPE_REJECT_ABORT] = reject_abort,
		[TPE_REJECT_CALLER_RUNS] = reject_caller_runs,
		[TPE_REJECT_DISCARD] = reject_discard,
		[TPE_REJECT_DISCARD_OLDEST] = reject_discard_oldest,
	};

	*ctx = NULL;
	*fn = a->reject_fn != NULL ? reject_custom : standard[a->rejection];
}
