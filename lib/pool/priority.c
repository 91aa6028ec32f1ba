/* SPDX-License-Identifier: MIT */
/*
 * priority.c - the calls that give a task its priority
 * (tpe_execute_priority(3)): the plain calls, with the priority carried
 * to the engine in the thread's tpe__submit_priority (engine/engine.h),
 * which the locked engine takes at the start of its submit and passes on
 * to its queue's offer. Only a TPE_QUEUE_PRIORITY pool's queue ranks by
 * it; every other kind ignores it, so that code written for a priority
 * pool runs on any pool. Scheduled tasks carry theirs in the scheduler's
 * record (pool/schedule.c, tpe_schedule_priority).
 *
 * Each call resets the thread's priority to 0 once the plain call returns,
 * whether or not an engine took it (a refusal before the engine, the
 * stacks engine): no later call on this thread inherits it.
 */
#include "engine/engine.h"
#include "tpe.h"

int
tpe_execute_priority(tpe_t *pool, tpe_fn fn, void *arg, int priority)
{
	int rc;

	tpe__submit_priority = priority;
	rc = tpe_execute(pool, fn, arg);
	tpe__submit_priority = 0;
	return rc;
}

int
tpe_submit_priority(tpe_t *pool, tpe_call_fn fn, void *arg, int priority,
    tpe_future_t **future)
{
	int rc;

	tpe__submit_priority = priority;
	rc = tpe_submit(pool, fn, arg, future);
	tpe__submit_priority = 0;
	return rc;
}

int
tpe_execute_wait_priority(tpe_t *pool, tpe_fn fn, void *arg, int priority,
    int64_t timeout_ns)
{
	int rc;

	tpe__submit_priority = priority;
	rc = tpe_execute_wait(pool, fn, arg, timeout_ns);
	tpe__submit_priority = 0;
	return rc;
}

int
tpe_submit_wait_priority(tpe_t *pool, tpe_call_fn fn, void *arg,
    int priority, int64_t timeout_ns, tpe_future_t **future)
{
	int rc;

	tpe__submit_priority = priority;
	rc = tpe_submit_wait(pool, fn, arg, timeout_ns, future);
	tpe__submit_priority = 0;
	return rc;
}
