/* SPDX-License-Identifier: MIT */
/*
 * reserve.h - reserved threads: idle workers parked where tpe_try_execute
 * can hand them a task directly, without the queue.
 *
 * Design notes
 * ------------
 * A reserved thread is an ordinary worker of the pool (it counts in wc, so
 * against max) that, instead of waiting on the queue, parks in one of the
 * pool's `capacity` slots. A tpe_try_execute that finds no parked thread
 * asks for one (`want`), and the next worker that finds the queue empty in
 * get_task parks instead of waiting (engine/locked.c); when no worker can
 * answer (none idle, none starting) and the pool is below max, the miss
 * starts one (engine/locked.c, try_submit), which parks once it finds the
 * queue empty.
 *
 * Where it sits: under the pool and its engine; it takes its own struct
 * and, to park, a struct tpe__reserve_env (the pool lock and what the
 * parked thread must ask of the engine), never tpe_t.
 * So creating a pool starts none, and the caller of tpe_try_execute never
 * queues or waits for a thread. After running a
 * handed task a reserved thread parks again; after the keep-alive time
 * parked (when the keep-alive is not 0) it leaves the reserve and is an
 * ordinary idle worker again, so an idle reserve shrinks to 0.
 *
 * A slot's state (A: atomic):
 *   EMPTY   -> WAITING   its owner parks (CAS, owner only);
 *   WAITING -> TAKEN     a claimer won the parked thread (CAS, any thread);
 *   WAITING -> EMPTY     the owner leaves: idle out, or the pool changed
 *                        (CAS, owner only: it fails once a claimer won);
 *   TAKEN   -> EMPTY     the owner took what the claimer put in `item`.
 * A claimer that won a slot always puts something in it: a task, or
 * NOTHING when it found the pool shut down after its claim. So an owner
 * whose CAS WAITING -> EMPTY failed waits for the item and never leaves
 * without it: a task handed to a thread that is timing out still runs
 * (the hang Jetty shipped when its idle reserved thread offered itself a
 * stop token, issue 4612, cannot happen here: nobody blocks on a hand-off).
 *
 * Memory: the slots (a cache line or two each) are allocated by the
 * first thread that parks, under the pool lock, and published with a
 * seq_cst store before its slot CAS (the pointer also tells a lock-free
 * submitter that no thread ever parked: count() in reserve.c); so a pool that never calls tpe_try_execute carries none
 * (it is the default pool: about 300 bytes, 18 per thread of a pool of 16).
 * When that allocation fails the thread does not park and the misses go
 * on: nothing is queued or lost, the next park tries again.
 *
 * Lock order (base/sync.h): pool->lock -> slot->lock (wake-ups under the
 * pool lock); the owner holds only slot->lock while parked, a claimer only
 * slot->lock.
 */
#ifndef TPE_RESERVED_H
#define TPE_RESERVED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/atomic.h"
#include "base/sync.h"
#include "pool/attr.h"
#include "pool/task.h"


struct tpe__reserve_slot {
	int state;                /* A: EMPTY, WAITING, TAKEN (above) */
	struct tpe__task *item;   /* slot->lock; set by the claimer */
	struct tpe__mutex lock;
	pthread_cond_t cond;      /* W: the owner waits here (monotonic) */
} __attribute__((aligned(TPE__CACHE_LINE)));

struct tpe__reserve {
	size_t capacity;                 /* I: 0 = no reserved threads */
	struct tpe__reserve_slot *slots; /* A: capacity entries, NULL until
					  * the first park makes them (L;
					  * seq_cst store before its slot
					  * CAS, acquire loads); freed only
					  * by destroy */
	size_t want;                     /* A: asked for by misses, not parked yet */
	size_t starting;                 /* L: pool->lock; workers that misses
					  * started for `want`s no worker took
					  * yet (engine/locked.c, try_submit) */
	unsigned epoch;                  /* A: bumped (under pool->lock) when
					  * parked threads must re-check the pool */
};

/* The capacity the attributes give for a pool of `max` threads: n, or the
 * heuristic for -1, and at most max - 1 (one thread stays for the queue). */
size_t tpe__reserve_capacity(const struct tpe_attr *a);

/* No allocation: the slots are made by the first thread that parks. */
void tpe__reserve_init(struct tpe__reserve *r, size_t capacity);
void tpe__reserve_destroy(struct tpe__reserve *r);
/* The slots, made now if none are yet: NULL when capacity is 0 or the
 * allocation failed (then no thread parks; tpe_try_execute misses). The
 * caller holds `lock`, the pool lock, under which alone they are made. */
struct tpe__reserve_slot *tpe__reserve_slots_locked(struct tpe__reserve *r,
    struct tpe__mutex *lock);
/* In the child of fork(): every slot empty, primitives new. */
void tpe__reserve_atfork_child(struct tpe__reserve *r);

/* How many threads are parked now (a snapshot). Any thread. */
size_t tpe__reserve_parked(const struct tpe__reserve *r);
/* How many hand-offs are claimed and not yet taken by their thread. */
size_t tpe__reserve_handing(const struct tpe__reserve *r);

/*
 * Hands t to a parked thread: true when one was claimed and given t. Then
 * `state` and `paused` are re-read after the claim; when the state is not
 * RUNNING, the thread is given nothing, t is not taken and *cancelled is
 * set; when the pool is paused, the thread is given nothing and t is not
 * taken. Never blocks beyond the claimed slot's own lock, which only its
 * owner also takes.
 */
bool tpe__reserve_hand(struct tpe__reserve *r, struct tpe__task *t,
    const int *state, const bool *paused, bool *cancelled);

/* White-box: called, when set, between a claim's re-checks and the
 * hand-over of the task (tests build the pause that comes in between). */
extern void (*tpe__reserve_hand_hook)(void);

/* After a miss: asks for one more reserved thread, at most capacity in
 * all. Any thread. Returns whether a request is outstanding: then the
 * caller wakes an idle worker (without waiting for its lock) so that it
 * parks. */
bool tpe__reserve_request(struct tpe__reserve *r);
/* How many threads misses asked for that have not parked yet (a
 * snapshot). Any thread. */
size_t tpe__reserve_wanted(const struct tpe__reserve *r);
/*
 * An idle worker's question, `lock` (the pool lock) held: should it park?
 * Yes when it is a reserved thread already (*reserved) or takes one of the
 * `want`s.
 */
bool tpe__reserve_wanted_locked(struct tpe__reserve *r,
    struct tpe__mutex *lock, bool *reserved);

/* What a parking worker needs of its pool (engine/locked.c fills it). */
struct tpe__reserve_env {
	struct tpe__mutex *lock;  /* the pool lock: held on entry and return */
	int64_t keep_alive_ns;    /* idle time parked before it leaves (0: none) */
	/* lock held, after the slot is taken: whether work waits that the
	 * thread must take instead of parking; a seq_cst look, the Dekker
	 * partner of a lock-free offer's count of parked threads. */
	bool (*work_waiting)(void *ctx);
	/* lock held, a task in hand: waits until it may start (a paused pool
	 * holds it until resume or shutdown). */
	void (*before_start)(void *ctx);
	void *ctx;
};
/*
 * Parks the calling worker in a free slot; env->lock held on entry and on
 * return, dropped while parked. Returns a handed task, or NULL: the pool
 * changed (re-check it; *reserved stays true), the worker idled out or
 * found no free slot (*reserved becomes false).
 */
struct tpe__task *tpe__reserve_park_locked(struct tpe__reserve *r,
    const struct tpe__reserve_env *env, bool *reserved);
/* How long a parked thread spins before it sleeps (ns). White-box tests
 * set it to 0 to race the sleeping protocol itself. */
extern int64_t tpe__reserve_spin_ns;

/* Parked threads leave their slots and re-check the pool; `lock` (the
 * pool lock) held. */
void tpe__reserve_wake_all_locked(struct tpe__reserve *r,
    struct tpe__mutex *lock);

#endif /* TPE_RESERVED_H */
