/* SPDX-License-Identifier: MIT */
/*
 * blocking.h - managed blocking in the locked engine: the sizing rules
 * that count blocked workers out (engine/blocking.c has the design
 * notes). Inside lib/engine only.
 */
#ifndef TPE_ENGINE_BLOCKING_H
#define TPE_ENGINE_BLOCKING_H

#include <stdbool.h>
#include <stddef.h>

#include "engine/locked.h"
#include "pool/pool.h"

/* The workers of wc that are not blocked: those that run or may take a
 * task. L held. */
static inline size_t
tpe__blocking_running_locked(const tpe_t *pool)
{
	return pool->wc - pool->blocking.blocked;
}

/*
 * Whether a worker may start under `limit` (core or max): the running
 * workers below it, and with blocked workers never more than max plus
 * the spares in all. With none blocked: wc < limit, as before. L held.
 */
static inline bool
tpe__blocking_below_locked(const tpe_t *pool, size_t limit)
{
	if (pool->blocking.blocked == 0)
		return pool->wc < limit;
	return tpe__blocking_running_locked(pool) < limit &&
	    pool->wc < pool->max + pool->blocking.max_spare;
}

/*
 * Java's "above max" (the pool was shrunk: a worker leaves after its task,
 * get_task looks at the queue without polling): the running workers,
 * less the spares started above max for blocked ones, are more than max.
 * Spares leave by the keep-alive instead, so that a pool whose tasks keep
 * blocking does not start and end a thread per task. L held.
 */
static inline bool
tpe__blocking_above_max_locked(const tpe_t *pool)
{
	size_t n = tpe__blocking_running_locked(pool);
	size_t s = pool->blocking.spares;

	return (s < n ? n - s : 0) > pool->max;
}

/*
 * A worker is about to be started to stand in for blocked ones; `above`
 * when wc is at or above max (it is a spare). Counted before the start,
 * which drops L: the new worker may run a task, and make its exit
 * decision, before the start returns; uncounted it would leave by the
 * above-max rule at once. L held.
 */
static inline void
tpe__blocking_starting_locked(tpe_t *pool, bool above)
{
	if (above)
		pool->blocking.spares++;
}

/* The start of tpe__blocking_starting_locked ended: ok, or failed (the
 * spare is taken back; a worker leaving meanwhile may have clamped it
 * already, tpe__blocking_left_locked). L held. */
static inline void
tpe__blocking_started_locked(tpe_t *pool, bool above, bool ok)
{
	if (ok)
		pool->blocking.compensations++;
	else if (above && pool->blocking.spares > 0)
		pool->blocking.spares--;
}

/* wc fell: spares are never more than the workers above max. L held. */
static inline void
tpe__blocking_left_locked(tpe_t *pool)
{
	size_t room = pool->wc > pool->max ? pool->wc - pool->max : 0;

	if (pool->blocking.spares > room)
		pool->blocking.spares = room;
}

/*
 * Tasks are queued while workers are blocked: when no idle worker waits
 * and fewer than core (at least one) workers run, starts one to stand in.
 * 0, nothing needed or one started; EAGAIN (the limit, or the system
 * refused the thread) or ENOMEM. L held (dropped while a thread starts).
 */
int tpe__locked_compensate_locked(struct tpe__locked *le);

/* The locked engine's blocking op (engine.h). */
int tpe__locked_blocking(struct tpe__engine *e, bool begin);

#endif /* TPE_ENGINE_BLOCKING_H */
