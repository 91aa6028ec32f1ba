/* SPDX-License-Identifier: MIT */
/*
 * rejection.c - abort, caller-runs, discard, discard-oldest, and custom
 * handlers (Java's RejectedExecutionHandler family), as verdicts that the
 * dispatcher carries out (policy.h; engine/locked.c, reject).
 *
 * Differences from Java, on purpose: a pool that is shut down refuses with
 * ECANCELED before any policy runs (the caller keeps the task instead of
 * Java's silent discard); discard-oldest replaces the head once instead of
 * recursing into execute (which never ends on a hand-off queue).
 */
#include "policy/policy.h"

enum tpe__verdict
tpe__rejection_verdict(enum tpe_rejection rejection, bool custom_handler)
{
	static const enum tpe__verdict standard[] = {
		[TPE_REJECT_ABORT] = TPE__VERDICT_REFUSE,
		[TPE_REJECT_CALLER_RUNS] = TPE__VERDICT_RUN_HERE,
		[TPE_REJECT_DISCARD] = TPE__VERDICT_DISCARD,
		[TPE_REJECT_DISCARD_OLDEST] = TPE__VERDICT_REPLACE_OLDEST,
	};

	if (custom_handler)
		return TPE__VERDICT_HANDLER;
	if ((unsigned)rejection >= sizeof(standard) / sizeof(standard[0]))
		return TPE__VERDICT_REFUSE;
	return standard[rejection];
}
