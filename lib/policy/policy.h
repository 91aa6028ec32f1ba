/* SPDX-License-Identifier: MIT */
/*
 * policy.h - sizing policies and rejection: what the dispatcher does when a
 * step of Java's execute fails, decided from the attributes once, at
 * tpe_create.
 *
 * Design notes
 * ------------
 * Where it sits: on the public header alone; below the engines, which
 * carry the decisions out. A policy calls nothing and knows no pool: it is
 * data, made from the two public enums (tpe_policy, tpe_rejection). The locked engine's execute is always Java's three steps (a core
 * worker, the queue, a worker below max) and then the rejection; a policy
 * changes two things in them:
 *   - whether step 2 may queue a task only for an unclaimed waiting worker
 *     (scale-first: the pool grows before it queues), and how far the pool
 *     grows for tasks already queued when it resumes or is resized;
 *   - the verdicts a refused task goes through, in order (below).
 * Queue-first (Java) is the plain three steps and the configured rejection
 * verdict; scale-first (scale_first.c) adds its gate and puts "re-queue"
 * before the configured verdict.
 *
 * Adding a policy: a file in lib/policy with its setup function, and one
 * row in the table of policy.c.
 */
#ifndef TPE_POLICY_H
#define TPE_POLICY_H

#include <stdbool.h>

#include "tpe.h"

/*
 * What becomes of a task that execute's steps refused; the dispatcher
 * (engine/locked.c, reject) carries it out. All but REQUEUE count as a
 * rejection in the statistics, and all but REFUSE and REQUEUE refuse with
 * ECANCELED instead once the pool is shut down.
 */
enum tpe__verdict {
	TPE__VERDICT_NONE,           /* end of the list */
	TPE__VERDICT_REFUSE,         /* abort: EAGAIN, the caller keeps it */
	TPE__VERDICT_RUN_HERE,       /* caller-runs: run in the caller */
	TPE__VERDICT_DISCARD,        /* hand it to the discard callback */
	TPE__VERDICT_REPLACE_OLDEST, /* drop the queue's oldest, queue it */
	TPE__VERDICT_HANDLER,        /* the custom rejection handler */
	TPE__VERDICT_REQUEUE         /* try the steps afresh under the lock,
				      * then the queue without the step-2
				      * gate; on EAGAIN the next verdict */
};

#define TPE__VERDICTS_MAX 3

struct tpe__policy {
	const char *name;
	/* Step 2 offers only while a waiting worker is not yet claimed by
	 * a queued task (takers > queued); otherwise step 3 grows the pool. */
	bool queue_needs_taker;
	/* Tasks already queued when sizes change or the pool resumes grow
	 * the pool to max (else to core, as Java's setCorePoolSize). */
	bool queued_grow_to_max;
	/* Tried in order until one takes the task or refuses for good. */
	enum tpe__verdict verdicts[TPE__VERDICTS_MAX];
};

/* The policy `policy`, its list ending with the verdict `rejection`. 0 or
 * EINVAL (unknown policy). */
int tpe__policy_setup(enum tpe_policy policy, enum tpe__verdict rejection,
    struct tpe__policy *p);

/* The verdict of a standard rejection policy, or of a custom handler
 * (rejection.c). */
enum tpe__verdict tpe__rejection_verdict(enum tpe_rejection rejection,
    bool custom_handler);

/* The policies' own setups, one per row of policy.c's table. */
void tpe__queue_first_setup(struct tpe__policy *p);
void tpe__scale_first_setup(struct tpe__policy *p);

#endif /* TPE_POLICY_H */
