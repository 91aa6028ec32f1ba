/* SPDX-License-Identifier: MIT */
/*
 * metrics.h - a pool's runtime metrics: per-worker counter blocks with
 * their latency histograms, pool-wide counters, merged on read
 * (tpe_get_metrics(3)).
 *
 * Design notes
 * ------------
 * Where it sits: lib/metrics, beside the pool: it includes only tpe.h and
 * base/ (build-aux/check-layering.sh); the pool, its workers and the
 * engines call it, it calls nothing of theirs. A pool created without
 * metrics has pool->metrics == NULL and every recording point is one test
 * of a pointer the worker loaded once (the engines keep it in a local or
 * in the worker's own slot).
 *
 * Blocks: each worker thread owns one struct tpe__metrics_worker for its
 * whole life, given by tpe__metrics_worker_get_locked before the thread
 * starts and given back by tpe__metrics_worker_put_locked when it exits;
 * get and put are serialised by the caller's lock (the pool lock, "L"),
 * which also hands a block from a worker that exited to the next one that
 * starts (the put happens-before the get). A block is never freed before
 * tpe__metrics_destroy and its plain counts are never cleared: a worker
 * that exits leaves them in its block, the next worker adds to them, so
 * the sums survive resizes and thread churn (its timed counts move to
 * m->timed at each read, below). The memory is one block per thread the
 * pool ever had at once (its largest pool size), some 35 KiB each (two
 * sets of two histograms).
 *
 * Writers: a block has one writer at a time (its worker, "O"), which adds
 * to its plain counts (tasks not timed, idle waits, ...) with a relaxed
 * load and a relaxed store (no read-modify-write, no locked instruction);
 * readers load each word relaxed: a count no other data depends on
 * (base/atomic.h, counters). The pool-wide counters (reserve, rejections,
 * threads) have many writers: relaxed atomic adds, on their own cache
 * line. Every block is on the list `all` (pushed with a release CAS, read
 * from an acquire load of the head: the reader then sees the block's
 * initialised fields), which a reader walks to sum them.
 *
 * One read agrees with itself (tpe_get_metrics(3)): a timed task adds one
 * to tasks_timed and to the count, a bucket and the sum of both
 * histograms, and a read sees all of that or none of it. The timed counts
 * of a block are in two sets, timed[0] and timed[1], a phaser in the
 * manner of HdrHistogram's WriterReaderPhaser: the writer records into
 * timed[phase]; a reader (L held: one at a time) flips `phase`, waits
 * until the writer is out of the record it may have begun in the old set,
 * then folds that set into m->timed (L) and zeroes it. The writer never
 * waits; the reader waits only for a record under way, a few dozen
 * instructions (longer only when the writer's thread is preempted inside
 * them), never for a task. A read is then m->timed: whole records only.
 * tasks_run is the tasks not timed (a plain count) plus tasks_timed, so
 * tasks_timed <= tasks_run at every read too.
 *
 * The pairs (writer: tpe__metrics_task_end_slow; reader: fold_block):
 *  (1) The writer's seq_cst exchange making `seq` odd, then its seq_cst
 *      load of `phase`; the reader's seq_cst store of `phase`, then its
 *      seq_cst load of `seq`. Store then load on each side, each on the
 *      other's word: with seq_cst on all four, at least one side sees
 *      the other's store (base/atomic.h, Dekker). Either the reader sees
 *      `seq` odd and waits for it to move, or the writer sees the new
 *      phase and records into the new set. Release/acquire would not do:
 *      on x86 the store buffer, on ARM and POWER the weak order, let
 *      both loads miss both stores; the exchange (x86 xchg, ARMv8 swpal
 *      or an ldaxr/stlxr loop, POWER hwsync then an lwarx/stwcx. loop)
 *      and the seq_cst load and store (ARMv8 ldar and stlr, POWER with
 *      hwsync) give the order on each.
 *  (2) The writer's release store of `seq` (even) at the end of a record;
 *      the reader's acquire loads of `seq` (the seq_cst load, the wait):
 *      the record's words in the old set are visible before the reader
 *      reads them, on any CPU.
 *  (3) The reader's zeroing of the old set, then its seq_cst (so also
 *      release) store of `phase` at the next read; the writer's seq_cst
 *      (so also acquire) load of `phase`: a writer that records into a
 *      set again sees it zeroed, not its stores racing the memset.
 * The wait ends when `seq` differs from the odd value seen: the next
 * value is that record's end (2), and any record after it sees the new
 * phase (1). In the child of a fork no writer is left: the reader does
 * not wait (a record cut by the fork may count in part there).
 *
 * Reset: a writer's load-and-store would undo a reset that cleared its
 * plain counts under it, so tpe_metrics_reset keeps a baseline of them
 * that every read subtracts (L guards it); each count only grows and a
 * later relaxed load of a word never returns an older value than an
 * earlier one (coherence), so no difference is negative. The timed
 * counts need no baseline: the reset folds every block and clears
 * m->timed. The baseline of threads_started is the threads retired at
 * the reset, so the threads then alive count as started and
 * threads_started - threads_retired stays the threads alive or starting
 * (each thread retires after its start is counted, both under L).
 *
 * Timing: the submitting thread stamps a task's node with the task clock
 * (base/tick.h: the TSC where it is invariant and the kernel keeps time
 * with it, else CLOCK_MONOTONIC; a stamp is in its ticks) for 1 in 32 of
 * its submissions (a thread-local countdown), or for every one with
 * TPE_METRICS_TIME_ALL; a node not stamped holds 0. The worker counts
 * every task, and times the run of a stamped one: queue wait = start -
 * stamp, run time = end - start, each turned into nanoseconds when
 * recorded. So each timed task costs three clock reads and two histogram
 * records: on the 2-core VM this was written on, some 80 ns with
 * clock_gettime (22 ns a read), some 45 with the TSC (10 ns a read), as
 * much as a whole tiny task costs in a per-worker pool (25 to 100 ns):
 * so 1 in 32, some 1.5 ns a task, within the budget of issue 22 (tiny-1
 * with metrics >= 0.9x off). (Measured alone, with clock_gettime: 81 ns a
 * task timing every task, 10 ns sampling 1 in 8, 0.3 ns with metrics off.)
 * The phaser adds to a timed record one exchange and a seq_cst load of a
 * line the worker owns (some 20 cycles on x86); a task not timed costs
 * what it did, one relaxed add.
 */
#ifndef TPE_METRICS_H
#define TPE_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/atomic.h"
#include "base/sized.h"
#include "base/sync.h"
#include "base/tick.h"
#include "tpe.h"

/* 1 in how many of a thread's submissions is timed by default. */
#define TPE__METRICS_PERIOD 32

/* A histogram's buckets (tpe.h): one writer, relaxed (above). */
struct tpe__hist {
	uint64_t count;
	uint64_t sum_ns;
	uint64_t buckets[TPE_HISTOGRAM_BUCKETS];
};

/* What the timed tasks of a block add: tasks_timed is run_time.count. */
struct tpe__metrics_timed {
	struct tpe__hist queue_wait;
	struct tpe__hist run_time;
};

/* One worker's block; O: its worker, read relaxed by any thread. */
struct tpe__metrics_worker {
	uint64_t tasks_untimed; /* O: tasks run and not timed */
	uint64_t idle_waits;   /* O */
	uint64_t wakeups;      /* O */
	uint64_t spin_hits;    /* O */
	uint64_t batches;      /* O */
	uint64_t steals;       /* O */
	uint64_t stolen_tasks; /* O */
	struct tpe__metrics_worker *all_next;  /* I once on `all` */
	struct tpe__metrics_worker *free_next; /* L: on `free` */
	unsigned seq;    /* O, A: odd while the writer records (design notes,
			  * pairs (1) and (2)) */
	unsigned phase;  /* L, A: the set the writer records into; the
			  * reader flips it (pairs (1) and (3)) */
	/* timed[phase]: O; the other one: L (the reader folds it). */
	struct tpe__metrics_timed timed[2];
} __attribute__((aligned(TPE__CACHE_LINE)));

/* The plain counts of a read, in the order of the read's table
 * (metrics.c): the blocks' ones, then the pool-wide counters. */
#define TPE__M_PLAIN_BLOCK 7
#define TPE__M_PLAIN (TPE__M_PLAIN_BLOCK + TPE__M_COUNT)

/* The pool-wide counters: many writers, relaxed adds. */
enum tpe__metrics_counter {
	TPE__M_RESERVE_HIT,
	TPE__M_RESERVE_MISS,
	TPE__M_REJECT_ABORT,
	TPE__M_REJECT_CALLER_RUNS,
	TPE__M_REJECT_DISCARD,
	TPE__M_REJECT_DISCARD_OLDEST,
	TPE__M_REJECT_HANDLER,
	TPE__M_REJECT_SHUTDOWN,
	TPE__M_THREAD_STARTED,
	TPE__M_THREAD_RETIRED,
	TPE__M_THREAD_FAILED,
	TPE__M_COUNT
};

struct tpe__metrics {
	bool time_all;                        /* I: TPE_METRICS_TIME_ALL */
	unsigned fork_gen;                    /* I: the process's fork
					       * generation at create */
	struct tpe__metrics_worker *all;      /* A: release CAS push, acquire
					       * load; never popped */
	struct tpe__metrics_worker *free;     /* L: blocks of exited workers */
	uint64_t base[TPE__M_PLAIN];          /* L: the plain counts at the
					       * last reset (design notes) */
	struct {
		struct tpe_histogram queue_wait, run_time;
	} timed;                              /* L: the folded timed sets
					       * since the last reset */
	/* Many writers (submitters, starters): a line of their own. */
	uint64_t counters[TPE__M_COUNT] __attribute__((aligned(TPE__CACHE_LINE))); /* A */
} ;

/* The block of the calling worker thread, or NULL (no metrics, or not a
 * worker); set by the worker's thread before its loop (worker.c). */
extern TPE__TLS struct tpe__metrics_worker *tpe__metrics_tls_worker;

/* White-box tests: called in a record between its two histograms, and by
 * a reader that found a record under way. NULL outside them. */
extern void (*tpe__metrics_record_hook)(void);
extern void (*tpe__metrics_wait_hook)(void);

/* flags: TPE_METRICS_*, with TPE_METRICS_ON. 0 or ENOMEM. */
int tpe__metrics_create(struct tpe__metrics **m, unsigned flags);
/* Frees every block; no worker is left. NULL: nothing. */
void tpe__metrics_destroy(struct tpe__metrics *m);

/* A block for a worker about to start (a spent one, else a new one): the
 * caller's lock held (the pool lock). NULL: ENOMEM. */
struct tpe__metrics_worker *tpe__metrics_worker_get_locked(
    struct tpe__metrics *m);
/* The block of a worker that exited, or whose start failed; its counts
 * stay. The caller's lock held. */
void tpe__metrics_worker_put_locked(struct tpe__metrics *m,
    struct tpe__metrics_worker *w);

/* The merged snapshot, minus the baseline, into *out (zeroed first; the
 * gauges are the caller's): folds every block's timed set, which may
 * wait for a record under way (design notes). The caller's lock held
 * (the baseline, the folded sets, one reader at a time). */
void tpe__metrics_read_locked(struct tpe__metrics *m,
    struct tpe_metrics *out);
/* The counts from now on start at 0 (threads_started at the threads
 * alive). The caller's lock held. Always 0. */
int tpe__metrics_reset_locked(struct tpe__metrics *m);

/* The layout of struct tpe_metrics (base/sized.h). */
extern const struct tpe__sized tpe__metrics_layout;

/* Histogram bucket of a value (tpe.h). */
size_t tpe__hist_index(uint64_t v);
/* One value into h: its one writer (relaxed load and store) or, when
 * `shared`, one of many (relaxed atomic adds). */
void tpe__hist_record(struct tpe__hist *h, uint64_t v, bool shared);
/* Adds h's counts to dst: relaxed loads of a histogram being written. */
void tpe__hist_sum(struct tpe_histogram *dst, const struct tpe__hist *src);

/* ---- recording --------------------------------------------------------- */

/* A one-writer add: relaxed load and store (the design notes). */
static inline void
tpe__metrics_add(uint64_t *c, uint64_t n)
{
	tpe__hint_store(c, tpe__hint_load(c) + n);
}

/* An add to a count that has one writer, or many when `shared` (relaxed
 * atomic add). */
static inline void
tpe__metrics_add_any(uint64_t *c, uint64_t n, bool shared)
{
	if (shared)
		tpe__counter_add(c, n);
	else
		tpe__metrics_add(c, n);
}

/* A pool-wide count (m may be NULL: metrics off). */
static inline void
tpe__metrics_count(struct tpe__metrics *m, enum tpe__metrics_counter c)
{
	if (m != NULL)
		tpe__counter_add(&m->counters[c], 1);
}

/* A worker's count in its own block (w may be NULL: metrics off). */
#define TPE__METRICS_WORKER_ADD(w, field, n)                     \
	do {                                                     \
		if ((w) != NULL)                                 \
			tpe__metrics_add(&(w)->field, (n));      \
	} while (0)

/* The submitting thread's countdown to its next timed task (metrics.c). */
extern TPE__TLS unsigned tpe__metrics_tls_tick;

/* The task clock now (base/tick.h), never 0: 0 means "not timed". */
static inline int64_t
tpe__metrics_clock(void)
{
	int64_t now = tpe__tick_now();

	return now != 0 ? now : 1;
}

/* The stamp of a node being made for a pool whose attributes say
 * `flags` (TPE_METRICS_*; 0: off): the clock, or 0 (not timed). The
 * countdown is the submitting thread's own (thread-local). */
static inline int64_t
tpe__metrics_stamp(unsigned flags)
{
	if (flags == 0)
		return 0;
	if ((flags & TPE_METRICS_TIME_ALL) == 0 &&
	    ++tpe__metrics_tls_tick % TPE__METRICS_PERIOD != 0)
		return 0;
	return tpe__metrics_clock();
}

/* A worker starts a task stamped `accepted_tick` (0: not timed): returns
 * the start time for tpe__metrics_task_end, or 0. Records nothing yet. */
static inline int64_t
tpe__metrics_task_start(struct tpe__metrics_worker *w, int64_t accepted_tick)
{
	(void)w;
	return accepted_tick == 0 ? 0 : tpe__metrics_clock();
}

/* The task accepted at `accepted_tick` and started at `start_tick` (0: not
 * timed) ended: counted, and timed. Its queue wait is recorded here with
 * its run time, not at its start, in one record (design notes), so that
 * both histograms and tasks_timed count the same tasks: a task still
 * running (a scrape's own task, reading the metrics) is in none of them.
 * w not NULL. */
void tpe__metrics_task_end_slow(struct tpe__metrics_worker *w,
    int64_t accepted_tick, int64_t start_tick);
static inline void
tpe__metrics_task_end(struct tpe__metrics_worker *w, int64_t accepted_tick,
    int64_t start_tick)
{
	if (start_tick != 0)
		tpe__metrics_task_end_slow(w, accepted_tick, start_tick);
	else
		tpe__metrics_add(&w->tasks_untimed, 1);
}

#endif /* TPE_METRICS_H */
