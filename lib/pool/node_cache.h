/* SPDX-License-Identifier: MIT */
/*
 * node_cache.h - task node allocation without the pool's lock: nodes carved
 * in address order from per-thread chunks, which come back whole through
 * a pool's return stack (node_cache.c).
 *
 * Where it sits: lib/pool, under the task module (its only caller);
 * built on lib/base's take-all stack (base/stack.h).
 */
#ifndef TPE_NODE_H
#define TPE_NODE_H

#include <stddef.h>

#include "pool/task.h"

/*
 * A pool's return stack (embedded in struct tpe). Legend: base/sync.h.
 */
struct tpe__node_chunk;
struct tpe__node_returns {
	struct tpe__node_chunk *head; /* A: Treiber stack of whole chunks,
				       * taken whole */
	size_t count;           /* A: about how many chunks it holds */
	size_t max;             /* I: the bound in nodes, rounded up to
				 * whole chunks (0: the default, 256) */
};

/*
 * The bound for a pool whose submitters push without the lock and may run
 * ahead of its workers (the per-worker stacks, the unbounded queue's
 * inbox): its nodes in flight far exceed the default, and a chunk that
 * cannot come back is a malloc on the submitter and a free on a worker.
 * At most about 2.6 MB (162 chunks of 16 KiB) stay cached until the pool
 * is destroyed.
 */
#define TPE__NODE_RETURNS_MANY 65536

/* The bytes of a chunk, its alignment too (node_cache.c). */
#define TPE__NODE_CHUNK_BYTES 16384
/* How many nodes a whole chunk holds, and t's chunk (for white-box
 * tests: a thread's first chunk is smaller). */
size_t tpe__node_chunk_nodes(void);
size_t tpe__node_chunk_nodes_of(const struct tpe__task *t);

/* A node for a new task, any thread, no lock: NULL when no chunk can be
 * allocated. */
struct tpe__task *tpe__node_get(struct tpe__node_returns *r);
/* Gives back the node of a finished task, any thread, no lock; r NULL:
 * outside any pool (a forked child's leftovers), its chunk is freed if
 * nothing else holds it. */
void tpe__node_put(struct tpe__node_returns *r, struct tpe__task *t);
/* Gives back n nodes linked from first through their next fields, with
 * one atomic operation per chunk they come from; any thread, no lock. */
void tpe__node_put_chain(struct tpe__node_returns *r, struct tpe__task *first,
    size_t n);
/* Releases the calling thread's chunks: its next node comes from a return
 * stack or posix_memalign. For white-box tests that count allocations. */
void tpe__node_cache_flush(void);
/* Frees what the return stack holds (the pool is being destroyed). */
void tpe__node_returns_free(struct tpe__node_returns *r);

#endif /* TPE_NODE_H */
