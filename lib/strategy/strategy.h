/* SPDX-License-Identifier: MIT */
/*
 * strategy.h - execution strategies over a producer callback
 * (tpe_strategy_*): Jetty's adaptive "eat what you kill", and the forced
 * PC, PEC and EPC modes.
 *
 * Where it sits: on the public header and lib/base only, as any client
 * of the library (build-aux/check-layering.sh): it drives a pool through
 * tpe_execute_typed and tpe_try_execute.
 *
 * Design notes
 * ------------
 * A strategy repeatedly calls the user's producer, which returns one task
 * at a time, and decides per task which thread runs it:
 *   PC   the producing thread runs it, then produces again;
 *   PIC  the same for an EITHER task, run as non-blocking
 *        (tpe__invoke_non_blocking: tpe_in_non_blocking() is true inside);
 *   PEC  the pool runs it (tpe_execute_typed); the producing thread goes on
 *        producing at once;
 *   EPC  production is handed to another thread (a "pending producer"),
 *        and the producing thread runs the task with hot caches; when the
 *        task returns it produces again only if nobody took production
 *        over meanwhile.
 * ADAPTIVE chooses per task, from the task's type and whether the thread
 * that produces runs as non-blocking (`non_blocking`, sampled once, when
 * the thread becomes the producer):
 *
 *   type \ producer   may block                      non-blocking
 *   NON_BLOCKING      PC                             PC
 *   EITHER            EPC if a pending producer      PC
 *                     is running or a reserved
 *                     thread takes one (after the
 *                     wait below), else PIC
 *   BLOCKING          EPC as above, else PEC         PEC
 *
 * So the producing thread runs a task that may block only once another
 * thread is running towards production: a pending producer that a
 * reserved thread took (tpe_try_execute, which only succeeds by handing
 * the task to a parked thread). Otherwise it keeps producing (PEC, or PIC,
 * where the EITHER task promises not to block). Production can therefore
 * not stall behind consumers that block, whatever the pool's load: the
 * starvation of the original EPC design (its pending producer waited in
 * the pool's queue behind blocked threads) cannot happen in ADAPTIVE. The
 * forced EPC mode keeps that old design on purpose and can starve: when no
 * reserved thread is free, its pending producer is queued.
 *
 * The wait after a miss (ADAPTIVE): when tpe_try_execute finds no parked
 * thread, the thread that ran the last EPC task is often a moment from
 * being free (its task is returning), and PEC then hands the fresh task,
 * its caches cold, to whichever thread comes next, which is a cascade:
 * the freed thread takes that queued task instead of parking, so the
 * next try misses too. So, once production has been handed on (the pool
 * has reserved threads), the producer waits a little (HAND_WAIT_NS,
 * 4 us, spinning with s->lock dropped) for either of:
 *   - a relay: an EPC consumer of this strategy whose task returns while
 *     the producer waits takes production over directly (consume(),
 *     invariant 2c): it is the producer from then on, and the waiting
 *     thread runs its task as EPC;
 *   - a reserved thread: tpe_try_execute is retried between looks.
 * Nothing else changes: the producing thread still runs a task that may
 * block only once another thread produces or is on its way to, so
 * production cannot stall behind blocked consumers; the wait only delays
 * production by at most HAND_WAIT_NS. When the wait ends with neither,
 * the task goes PEC (PIC) as before. A wait must earn its CPU: after 4
 * waits in a row that found no thread (consumers that block, or a pool
 * with no reserved thread free), only every 16th miss waits, until one
 * pays again (base/park.h, struct tpe__spin_pay, as the pool's idle
 * spin). "Handed on" is read from the EPC count, relaxed: a miss that
 * comes before the first EPC task is counted does not wait.
 *
 * States (`state`, s->lock):
 *   IDLE        no thread produces;
 *   PRODUCING   exactly one thread (the producer) is in the produce loop;
 *   REPRODUCING the same, and someone asked for more (tpe_strategy_produce
 *               or _dispatch, or a pending producer, arrived while it
 *               produced): it calls the producer at least once more
 *               before it may go IDLE.
 * EPC also makes the state IDLE on purpose: the producer gives production
 * up while it consumes.
 *
 * Pending producers (`pending[kind]`, s->lock): the ones this strategy started
 * through the pool, or is starting, that have not run yet. QUEUED ones
 * were given to tpe_execute_typed (by tpe_strategy_dispatch, or by forced
 * EPC when no reserved thread is free) and may wait in the pool's queue;
 * HANDED ones were given to a parked reserved thread by tpe_try_execute
 * and run now. `starting[kind]` counts the starts still in progress: the
 * count is raised before the pool is asked (so that a pending producer
 * that runs at once finds itself counted and the count never goes
 * negative, unlike Jetty 12's), and the lock is dropped while the pool
 * decides. A start that the pool refuses is undone: the counts go back
 * (Jetty left its `pending` set on a refusal, so later hand-offs counted
 * on a producer that never came). A pending producer that the pool ran in
 * the starting thread itself (its TPE_REJECT_CALLER_RUNS, or a rejection
 * handler that runs the task) does nothing and counts as refused: a
 * strategy never produces in the thread of tpe_strategy_dispatch.
 *
 * A pending producer of `kind` is "on its way" when pending[kind] >
 * starting[kind]: then at least one whose start is confirmed has not run
 * yet (pending counts it until it runs; an unconfirmed start that already
 * ran no longer counts in pending but still in starting, which can only
 * lower the difference). Every decision that counts on a pending producer
 * tests this, never pending alone.
 *
 * When the pool refuses (saturated, shut down, out of memory):
 *   - a PEC task runs in the producing thread, as TPE_REJECT_CALLER_RUNS
 *     would (an EITHER task as non-blocking), and counts as PC (PIC): no
 *     produced task is lost, and production goes on after it;
 *   - an EPC hand-off is not made: ADAPTIVE falls back to PEC/PIC, forced
 *     EPC runs the task as PC;
 *   - tpe_strategy_dispatch returns the pool's error (ECANCELED once it is
 *     shut down), with the pending producer undone;
 *   - tpe_strategy_produce still produces in its caller, which then runs
 *     every task itself: a shut-down pool's strategy can be drained.
 * A task type the library does not know counts as BLOCKING, the type that
 * never runs inline without a hand-off; a producer that returns true with
 * no function returned nothing and is called again.
 *
 * Invariants:
 *   1. Never two producers: production is granted only by IDLE ->
 *      PRODUCING, under s->lock. Every other arrival makes PRODUCING into
 *      REPRODUCING (or leaves REPRODUCING) and returns.
 *   2. The producer gives production up only (a) under s->lock, when the
 *      producer returned nothing and the state is PRODUCING (-> IDLE), or
 *      (b) under s->lock, for EPC, when a pending producer is on its way
 *      (-> IDLE), before it runs the task, or (c) under s->lock, while it
 *      waits after a miss (`waiting`), to an EPC consumer whose task
 *      returned: the consumer sets `relayed` and is the producer from
 *      then on, the state unchanged (PRODUCING or REPRODUCING, which the
 *      new producer honours); the waiting thread reads `relayed` under
 *      s->lock before it would produce again, and runs its task as EPC.
 *   3. After an EPC task, the consumer takes production back only by
 *      IDLE -> PRODUCING under s->lock, and only when nobody has become
 *      the producer since it gave production up; otherwise it leaves.
 *      IDLE alone does not tell: a pending producer (or a
 *      tpe_strategy_produce caller) may have taken production over, found
 *      nothing and gone IDLE again; a consumer that took production back
 *      then would call the producer once more for nothing, or stay in a
 *      producer that blocks for work. So `gen` counts producers: +1 at each IDLE ->
 *      PRODUCING and at each relay (2c); the producer notes it when it
 *      hands production on, and takes production back only if it has not
 *      moved (Jetty's ExecuteProduceConsume tells the two apart by its
 *      `idle` flag; its AdaptiveExecutionStrategy does not). This race
 *      always runs: a C task cannot throw, and tasks and producers must
 *      return normally (no pthread_exit, longjmp out or cancellation
 *      through the strategy: tpe_strategy_create(3)).
 *   4. No lost wake-up: a tpe_strategy_produce or _dispatch that returned
 *      0 is followed by a call of the producer that began after it. It
 *      became the producer; or found a producer and set REPRODUCING, which
 *      that producer reads under s->lock before it may go IDLE; or found IDLE
 *      with a pending producer on its way, which takes s->lock after it; or
 *      started one.
 *   5. ADAPTIVE counts on a HANDED pending producer only; forced EPC on
 *      either kind. pending[HANDED] <= 1 (only the producer starts one,
 *      and only when none is on its way).
 *   6. Lifetime: `callers` counts the threads that are inside the
 *      strategy (a producer, an EPC consumer, a dispatch that is starting
 *      a pending producer); with the pending counts it is what
 *      tpe_strategy_destroy checks, under s->lock: it frees only when all are 0,
 *      and then the state is IDLE. A thread's last touch of the strategy
 *      is the unlock after its own decrement.
 *
 * Metrics (tpe_strategy_set_metrics, tpe_strategy_get_metrics(3)): off
 * by default. On, each EPC hand-over is counted and timed, all under
 * s->lock, where the transitions it measures happen: it starts when the
 * producer gives production up for EPC (hand_production_on, -> IDLE,
 * invariant 2b: `handed_ns` = now) and ends at the next IDLE ->
 * PRODUCING, the only way out of that IDLE but a producer that ends
 * (which cannot happen: nobody produces). When a pending producer makes
 * that transition (try_produce from the pool), now - handed_ns goes into
 * the histogram; when another thread does (the EPC consumer after its
 * task, invariant 3, or a tpe_strategy_produce caller), the hand-over
 * counts as reclaimed. A later hand-over while no one took production
 * cannot happen (only the producer hands over), so handed_ns is 0 at each
 * start. The clock is read only with metrics on, twice per hand-over.
 *
 * Layer: a client of the public API (tpe_try_execute, tpe_execute_typed);
 * it includes include/tpe.h and lib/base only (doc/architecture.md,
 * build-aux/check-layering.sh).
 *
 * Locks: s->lock is a leaf: nothing else is locked while it is held,
 * and it is never held while user code (the producer, a task) or the pool
 * (tpe_try_execute, tpe_execute_typed) runs, so the producer and the tasks
 * may call any tpe_strategy_ function, this strategy's included.
 */
#ifndef TPE_STRATEGY_H
#define TPE_STRATEGY_H

#include <stdint.h>

#include "base/park.h"
#include "base/sync.h"
#include "tpe.h"

enum tpe__strategy_state {
	TPE__S_IDLE,
	TPE__S_PRODUCING,
	TPE__S_REPRODUCING
};

/* Kinds of pending producer (the design notes). */
enum tpe__pending_kind {
	TPE__PENDING_QUEUED, /* tpe_execute_typed: may wait in the queue */
	TPE__PENDING_HANDED, /* tpe_try_execute: a reserved thread runs it */
	TPE__PENDING_KINDS
};

/*
 * Legend: base/sync.h; the counters marked A are relaxed (statistics
 * only: no other data depends on them).
 */
struct tpe_strategy {
	tpe_t *pool;                       /* I */
	tpe_produce_fn produce;            /* I */
	void *ctx;                         /* I */
	enum tpe_strategy_mode mode;       /* I */

	struct tpe__mutex lock;
	int state;                         /* s->lock: enum tpe__strategy_state */
	uint64_t gen;                      /* s->lock: production generation,
					    * +1 per new producer (invariant 3) */
	int pending[TPE__PENDING_KINDS];   /* s->lock: started, not yet run */
	int starting[TPE__PENDING_KINDS];  /* s->lock: of those, starts in progress */
	unsigned callers;                  /* s->lock: threads inside (invariant 6) */
	bool waiting;                      /* s->lock: the producer waits
					    * after a miss (ADAPTIVE) */
	bool relayed;                      /* s->lock (written; read without
					    * it as a hint, relaxed): an EPC
					    * consumer took production over
					    * from the waiting producer */
	struct tpe__spin_pay wait_pay;     /* s->lock: whether waits pay
					    * (base/park.h) */

	uint64_t pc, pic, pec, epc;        /* A: tasks per mode */

	bool metrics;                      /* s->lock: on */
	int64_t handed_ns;                 /* s->lock: the hand-over under
					    * way began (0: none) */
	uint64_t handovers, reclaimed;     /* s->lock */
	struct tpe_histogram *handover_time; /* s->lock: allocated when
					      * first turned on */
};

/* What the white-box tests look at: a snapshot under s->lock. */
struct tpe__strategy_peek {
	int state;
	int pending[TPE__PENDING_KINDS];
	int starting[TPE__PENDING_KINDS];
	unsigned callers;
};

void tpe__strategy_peek(tpe_strategy_t *s, struct tpe__strategy_peek *out);

/* The longest an ADAPTIVE producer waits after a miss (ns; 0: never),
 * and, when set, a call made as each wait begins (s->lock not held).
 * White-box tests lengthen the one and use the other to build the state
 * the wait is for. */
extern int64_t tpe__strategy_hand_wait_ns;
extern void (*tpe__strategy_hand_wait_hook)(void);

#endif /* TPE_STRATEGY_H */
