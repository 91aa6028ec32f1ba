/* SPDX-License-Identifier: MIT */
/*
 * registry.h - the list of live pools, kept for fork(): the atfork handlers
 * hold every pool's lock across fork() so the child sees consistent pools,
 * then mark them terminated in the child (their threads do not exist there).
 */
#ifndef TPE_REGISTRY_H
#define TPE_REGISTRY_H

#include "pool.h"

/* How many fork()s this process descends from (A: atomic). */
extern unsigned tpe__fork_generation;

void tpe__registry_add(tpe_t *pool);
void tpe__registry_remove(tpe_t *pool);

#endif /* TPE_REGISTRY_H */
