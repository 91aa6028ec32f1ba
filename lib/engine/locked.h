/* SPDX-License-Identifier: MIT */
/*
 * locked.h - the locked engine's state, shared by its two files (locked.c:
 * execute and the workers' loop; locked_wait.c: the blocking submit).
 * Inside lib/engine only.
 */
#ifndef TPE_ENGINE_LOCKED_H
#define TPE_ENGINE_LOCKED_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/park.h"
#include "engine/engine.h"

/* Legend: doc/architecture.md ("L, A": written under L, read without). */
struct tpe__locked {
	struct tpe__engine base;
	tpe_t *pool;                /* I: from attach */
	struct tpe__queue *q;       /* I; contents L */
	struct tpe__policy policy;  /* I */
	bool lockfree;              /* I: step 2 may push without the lock */
	bool unbounded;             /* I: the queue never refuses for want
				     * of room (its remaining room at create
				     * was SIZE_MAX) */
	pthread_cond_t work_cond;   /* W: idle workers wait here, with L;
				     * offers and the cascade signal it */
	unsigned config_gen;        /* L: bumped to make waiting workers
				     * re-check the pool */
	size_t takers;              /* L, A: workers waiting for a task */
	size_t sleepers;            /* L, A: those of them asleep on
				     * work_cond; a lock-free offer reads it */
	unsigned offers;            /* A: bumped after each accepted offer
				     * (L held); spinning takers read it */
	struct tpe__spin_pay spin_pay; /* L: whether spins pay (base/park.h) */
};

/*
 * The wake-up rules (locked.c, design notes) as pure functions of the
 * counts, so that tests can check them: after an offer under the lock, a
 * sleeper is signalled only when more tasks wait than awake (spinning)
 * takers will pick up; after a lock-free push that found the inbox empty,
 * only when no awake taker will look at the queue.
 */
static inline bool
tpe__locked_signal_needed(size_t queued, size_t takers, size_t sleepers)
{
	return sleepers > 0 && queued > takers - sleepers;
}

static inline bool
tpe__locked_wake_needed(size_t takers, size_t sleepers)
{
	return sleepers > 0 && takers <= sleepers;
}

/*
 * execute's steps for t (at priority prio: engine.h) under the lock, then
 * the queue without the
 * policy's gate (scale-first's re-enqueue), then a parked reserved thread
 * (its hand for a hand-off, else a wake-up to drain the queue), but never
 * a rejection verdict. 0: the pool took t (*signal: signal work_cond
 * after the unlock); ECANCELED: not RUNNING; ENOMEM: the queue could not
 * grow (the priority kind); EAGAIN with *saturated: the
 * call would have been rejected for saturation, t is still the caller's;
 * EAGAIN or ENOMEM without it: no worker is alive and none could be
 * started, so nothing would ever make room. L held (dropped while a
 * thread starts).
 */
int tpe__locked_place_locked(struct tpe__locked *le, struct tpe__task *t,
    int prio, bool *signal, bool *saturated);

/* The REPLACE_OLDEST verdict: under one lock, takes the queue's oldest
 * droppable node out (*victim, the caller's now; the priority kind's
 * lowest-priority, oldest one) and offers t in its place (the verdict
 * itself, in locked.c, at the call's priority; this entry at 0). 0,
 * EAGAIN (nothing to drop or refused again), ECANCELED. */
int tpe__locked_replace_oldest(struct tpe__locked *le, struct tpe__task *t,
    struct tpe__task **victim);

/* Asks the reserve for one more thread and wakes a sleeping worker so
 * that it parks, never waiting for the lock (the first half of a miss of
 * tpe_try_execute, which may also start a worker). Any thread. */
void tpe__locked_reserve_request(struct tpe__locked *le);

/* The engine's submit (locked.c) at priority prio, for the blocking
 * submit's pools that never saturate. */
int tpe__locked_submit_plain(struct tpe__locked *le, tpe_fn fn, void *arg,
    struct tpe_future *f, int prio);

/* The engine's submit_wait op (locked_wait.c). */
int tpe__locked_submit_wait(struct tpe__engine *e, tpe_fn fn, void *arg,
    struct tpe_future *f, int64_t timeout_ns);

/* White-box tests: called, when set, with pool->lock held by a submitter
 * that has just joined the line, before it sleeps (it may only post a
 * semaphore); and the number of blocked submitters (takes the lock). */
extern void (*tpe__submit_joined_hook)(tpe_t *pool);
size_t tpe__submit_waiting(tpe_t *pool);

#endif /* TPE_ENGINE_LOCKED_H */
