/* SPDX-License-Identifier: MIT */
/*
 * fork.h - fork() safety: the fork generation, and a registry of objects
 * whose lock the atfork handlers hold across fork() and whose child
 * callback resets them in the child.
 *
 * Design notes
 * ------------
 * Where it sits: lib/base; it knows nothing of pools. A pool registers an
 * entry (its lock and its child callback) for its life (pool.c).
 *
 * prepare() takes the registry lock (rank TPE__RANK_FORK) and then every
 * entry's lock in list order, so no object is halfway through a change when
 * fork() copies the address space; parent() releases them; child() runs in
 * the only thread of the child, which holds all of them: it bumps the fork
 * generation, then calls each entry's child callback with the entry's lock
 * held (the callback leaves it initialised afresh, unlocked: threads that
 * waited on it in the parent do not exist here). An entry's lock is never
 * held while user code runs, so prepare() cannot wait on a task.
 *
 * Legend and lock order: base/sync.h (R: the registry lock, rank FORK).
 */
#ifndef TPE_FORK_H
#define TPE_FORK_H

#include <stdbool.h>

#include "base/sync.h"

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

struct tpe__fork_entry {
	struct tpe__mutex *lock;          /* I: held across fork() */
	void (*child)(void *ctx);         /* I: in the child, lock held */
	void *ctx;                        /* I */
	struct tpe__fork_entry *prev, *next; /* R */
};

/* Adds / removes an entry (any thread, R not held). */
void tpe__fork_register(struct tpe__fork_entry *e);
void tpe__fork_unregister(struct tpe__fork_entry *e);

#endif /* TPE_FORK_H */
