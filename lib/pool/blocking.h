/* SPDX-License-Identifier: MIT */
/*
 * blocking.h - managed blocking (tpe_blocking_begin(3)): what the pool
 * keeps of the workers that are inside a blocking section.
 *
 * Design notes
 * ------------
 * Where it sits: lib/pool. The public calls (blocking.c) find the pool of
 * the calling worker through its thread-local (pool.h), count nested
 * sections in a thread-local depth, and hand the outermost begin and end
 * to the pool's engine (engine.h, the blocking op); the engine decides
 * what a blocked worker means for its workers (engine/blocking.c for the
 * locked engine, stacks.c for the stacks engine).
 *
 * A worker inside a section is counted in `blocked` and still in wc and
 * active (it runs a task, as Java's ForkJoinPool counts a compensated
 * worker active but not running): the engines size the pool on wc -
 * blocked, the running workers, and never let wc pass max + max_spare.
 *
 * Legend: base/sync.h (L: pool->lock; A: written under L, read without).
 */
#ifndef TPE_POOL_BLOCKING_H
#define TPE_POOL_BLOCKING_H

#include <stddef.h>
#include <stdint.h>

#include "tpe.h"

struct tpe__blocking {
	size_t blocked;          /* L, A: workers inside a section; stored
				  * seq_cst, read by the lock-free offer
				  * after its push (engine/blocking.c) */
	uint64_t compensations;  /* L: workers started because others
				  * blocked */
	size_t spares;           /* L: of the workers above max, those
				  * started to stand in (they leave by the
				  * keep-alive, not by the above-max rule);
				  * at most wc - max */
	size_t max_spare;        /* I: threads allowed beyond max */
};

/*
 * After each task a worker ran (no lock): closes a section the task left
 * open, so that a worker never stays counted as blocked.
 */
void tpe__blocking_task_done(void);

/*
 * tpe_resume, once the pool is no longer paused: stands in for the blocked
 * workers as the offers made while it was paused would have (engine/
 * blocking.c, the engine's rule); 0, or the error of a start that failed
 * (the next offer or begin tries again). L held (dropped while a thread
 * starts).
 */
int tpe__blocking_resumed_locked(tpe_t *pool);

#endif /* TPE_POOL_BLOCKING_H */
