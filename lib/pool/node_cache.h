/* SPDX-License-Identifier: MIT */
/*
 * node_cache.h - task node allocation without the pool's lock: a per-thread cache
 * that a pool's workers refill through the pool's return stack.
 *
 * Where it sits: lib/pool, under the task module (its only caller);
 * built on lib/base's take-all stack (queue/node.h's tpe__task_stack).
 */
#ifndef TPE_NODE_H
#define TPE_NODE_H

#include <stddef.h>

#include "pool/task.h"

/*
 * A pool's return stack (embedded in struct tpe). Legend: base/sync.h.
 */
struct tpe__node_returns {
	struct tpe__task *head; /* A: Treiber stack, taken whole */
	size_t count;           /* A: about how many nodes it holds */
	size_t max;             /* I: the bound (0: the default, 256) */
};

/*
 * The bound for a pool whose submitters push without the lock and may run
 * ahead of its workers (the per-worker stacks, the unbounded queue's
 * inbox): its nodes in flight far exceed the default, and a node that
 * cannot come back is a malloc on the submitter and a free on a worker.
 * At most 3 MB (48-byte chunks) stay cached until the pool is destroyed.
 */
#define TPE__NODE_RETURNS_MANY 65536

/* A node for a new task, any thread, no lock: NULL when malloc fails. */
struct tpe__task *tpe__node_get(struct tpe__node_returns *r);
/* Gives back the node of a finished task, any thread, no lock. */
void tpe__node_put(struct tpe__node_returns *r, struct tpe__task *t);
/* Gives back n nodes linked first .. last through their next fields,
 * with one atomic operation; any thread, no lock. */
void tpe__node_put_chain(struct tpe__node_returns *r, struct tpe__task *first,
    struct tpe__task *last, size_t n);
/* Frees the calling thread's cache: its next node comes from a return
 * stack or malloc. For white-box tests that count allocations. */
void tpe__node_cache_flush(void);
/* Frees what the return stack holds (the pool is being destroyed). */
void tpe__node_returns_free(struct tpe__node_returns *r);

#endif /* TPE_NODE_H */
