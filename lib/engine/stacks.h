/* SPDX-License-Identifier: MIT */
/*
 * stacks.h - the stacks engine's knobs for white-box tests (stacks.c).
 */
#ifndef TPE_ENGINE_STACKS_H
#define TPE_ENGINE_STACKS_H

#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"

/* How long an idle worker spins before it sleeps (ns; 0: at once; set
 * before tpe_create). */
extern int64_t tpe__per_worker_spin_ns;
/* Back-pressure: a submitting thread looks every TPE__PW_BACKLOG_EVERY
 * pushes (a power of two) and yields the CPU once when more than
 * TPE__PW_BACKLOG_MAX tasks were pushed onto the slot since its stack was
 * last taken (16384 nodes: about 0.8 MB, what a core's caches hold). */
#define TPE__PW_BACKLOG_EVERY 1024
#define TPE__PW_BACKLOG_MAX 16384
/* A stack taken whole with more tasks than this (by the slot's counters)
 * runs newest first, without the reversal; smaller ones oldest first. */
#define TPE__PW_LIFO_BATCH 4096
/* How many of the engine's workers sleep and are not being woken (for the
 * white-box tests): counted asleep, deep or watching, with their SLEEP
 * marker still on, so that a push passes them over for an awake worker
 * until it wakes one. Exact when no push or wake-up is in flight. */
size_t tpe__stacks_sleepers(const struct tpe__engine *e);
/* Called (when set) by a thief after it marked itself awake and before it
 * takes another worker's tasks, so that a test can let the owner take
 * them first (the steal then fails). */
extern void (*tpe__per_worker_steal_hook)(void);
/* Called (when set) by an idle worker after its last look at its stack and
 * before it puts its SLEEP marker there, so that a test can push a task
 * in between (the marker must then not go on). */
extern void (*tpe__per_worker_sleep_hook)(void);
/* Called (when set) by a submitter just before it yields the CPU because
 * its slot's worker is far behind (the back-pressure of stacks.c). */
extern void (*tpe__per_worker_yield_hook)(void);
/* Called (when set) by a watcher whose look is due (its timed sleep ran
 * out), while it still counts as a watcher, so that a test can push tasks
 * behind an awake worker that wake nobody, before the watcher looks. */
extern void (*tpe__per_worker_watch_hook)(void);
/* Called (when set) by a worker that took a batch of more than one task,
 * before it publishes the rest of it and runs the first. */
extern void (*tpe__per_worker_batch_hook)(void);
/* How many of the engine's workers sleep as watchers (counted; for the
 * white-box tests). */
size_t tpe__stacks_watchers(const struct tpe__engine *e);

/* Managed blocking, for the white-box tests (takes the pool lock): the
 * threads without a slot that look for one or were started to (*spares),
 * and the slots handed over that no thread owns yet (*unowned). */
void tpe__stacks_handover_counts(const struct tpe__engine *e, size_t *spares,
    size_t *unowned);

#endif /* TPE_ENGINE_STACKS_H */
