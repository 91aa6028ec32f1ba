/* SPDX-License-Identifier: MIT */
/*
 * schedule.c - the public calls of delayed and periodic tasks
 * (tpe_schedule(3)): the pool's side, which checks the pool, the arguments
 * and the pool's state, and hands the rest to its scheduler (lib/sched,
 * through pool->sched_hook). Here rather than in lib/sched so that the
 * scheduler calls nothing of the pool but through its hook: the pool
 * calls down into lib/sched, never the other way.
 *
 * On any error *future (if given) is NULL and nothing was scheduled.
 * EINVAL (bad arguments) comes before ECANCELED (shut down), as for the
 * rest of the API.
 */
#include <errno.h>

#include "pool/pool.h"
#include "sched/sched.h"

static int
schedule(tpe_t *pool, tpe_fn fn, tpe_call_fn call, bool valid, void *arg,
    int64_t delay_ns, int64_t period, int priority, tpe_future_t **future)
{
	if (future != NULL)
		*future = NULL;
	if (pool == NULL || !valid)
		return EINVAL;
	if (tpe_is_shutdown(pool))
		return ECANCELED;
	return tpe__sched_schedule(&pool->sched_hook, fn, call, arg, delay_ns,
	    period, priority, future);
}

int
tpe_schedule(tpe_t *pool, tpe_fn fn, void *arg, int64_t delay_ns,
    tpe_future_t **future)
{
	return schedule(pool, fn, NULL, fn != NULL, arg, delay_ns, 0, 0,
	    future);
}

int
tpe_schedule_call(tpe_t *pool, tpe_call_fn fn, void *arg, int64_t delay_ns,
    tpe_future_t **future)
{
	return schedule(pool, NULL, fn, fn != NULL, arg, delay_ns, 0, 0,
	    future);
}

int
tpe_schedule_at_fixed_rate(tpe_t *pool, tpe_fn fn, void *arg,
    int64_t initial_ns, int64_t period_ns, tpe_future_t **future)
{
	return schedule(pool, fn, NULL, fn != NULL && period_ns > 0, arg,
	    initial_ns, period_ns, 0, future);
}

int
tpe_schedule_with_fixed_delay(tpe_t *pool, tpe_fn fn, void *arg,
    int64_t initial_ns, int64_t delay_ns, tpe_future_t **future)
{
	/* The scheduler keeps a fixed delay as a negative period. */
	return schedule(pool, fn, NULL, fn != NULL && delay_ns > 0, arg,
	    initial_ns, delay_ns > 0 ? -delay_ns : 0, 0, future);
}

/* A task run at `priority` in a TPE_QUEUE_PRIORITY pool when due
 * (tpe_schedule_priority(3)); on other kinds the priority is ignored. */
int
tpe_schedule_priority(tpe_t *pool, tpe_fn fn, void *arg, int64_t delay_ns,
    int priority, tpe_future_t **future)
{
	return schedule(pool, fn, NULL, fn != NULL, arg, delay_ns, 0,
	    priority, future);
}
