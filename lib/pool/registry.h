/* SPDX-License-Identifier: MIT */
/*
 * registry.h - the list of live pools, kept for fork(): the atfork handlers
 * hold every pool's lock across fork() so the child sees consistent pools,
 * then mark them terminated in the child (their threads do not exist there).
 */
#ifndef TPE_REGISTRY_H
#define TPE_REGISTRY_H

#include "pool/pool.h"

/* How many fork()s this process descends from (A: atomic). */
extern unsigned tpe__fork_generation;

/* The current fork generation: read it before calling user code. */
static inline unsigned
tpe__fork_gen(void)
{
	/* Relaxed: only the forking thread itself can see it change (the
	 * child's atfork handler runs in that thread before fork returns). */
	return __atomic_load_n(&tpe__fork_generation, __ATOMIC_RELAXED);
}

/* Whether this is the child of a fork() made since `gen` was read. */
static inline bool
tpe__forked_since(unsigned gen)
{
	return tpe__fork_gen() != gen;
}

void tpe__registry_add(tpe_t *pool);
void tpe__registry_remove(tpe_t *pool);

#endif /* TPE_REGISTRY_H */
