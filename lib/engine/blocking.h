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
 * Tasks are queued while workers are blocked: when no idle worker waits
 * and fewer than core (at least one) workers run, starts one to stand in.
 * 0, nothing needed or one started; EAGAIN (the limit, or the system
 * refused the thread) or ENOMEM. L held (dropped while a thread starts).
 */
int tpe__locked_compensate_locked(struct tpe__locked *le);

/* The locked engine's blocking op (engine.h). */
int tpe__locked_blocking(struct tpe__engine *e, bool begin);

#endif /* TPE_ENGINE_BLOCKING_H */
