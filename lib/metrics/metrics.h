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
 * tpe__metrics_destroy and never cleared: a worker that exits leaves its
 * counts in its block, the next worker adds to them, so the sums survive
 * resizes and thread churn, and the memory is one block per thread the
 * pool ever had at once (its largest pool size).
 *
 * Writers: a block has one writer at a time (its worker, "O"), which adds
 * with a relaxed load and a relaxed store (no read-modify-write, no locked
 * instruction); readers load each word relaxed: a count no other data
 * depends on (base/atomic.h, counters). The pool-wide counters (reserve,
 * rejections, threads) have many writers: relaxed atomic adds, on their
 * own cache line. Every block is on the list `all` (pushed with a release
 * CAS, read from an acquire load of the head: the reader then sees the
 * block's initialised fields), which a reader walks to sum them.
 *
 * Reset: a writer's load-and-store would undo a reset that cleared its
 * block under it, so tpe_metrics_reset keeps a baseline, a merged
 * snapshot, and every read subtracts it (L guards the baseline). Each
 * counter only grows and a later relaxed load of a word never returns an
 * older value than an earlier one (coherence), so no difference is
 * negative.
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

/* One worker's block; O: its worker, read relaxed by any thread. */
struct tpe__metrics_worker {
	uint64_t tasks_run;    /* O */
	uint64_t tasks_timed;  /* O */
	uint64_t idle_waits;   /* O */
	uint64_t wakeups;      /* O */
	uint64_t spin_hits;    /* O */
	uint64_t batches;      /* O */
	uint64_t steals;       /* O */
	uint64_t stolen_tasks; /* O */
	struct tpe__metrics_worker *all_next;  /* I once on `all` */
	struct tpe__metrics_worker *free_next; /* L: on `free` */
	struct tpe__hist queue_wait;           /* O */
	struct tpe__hist run_time;             /* O */
} __attribute__((aligned(TPE__CACHE_LINE)));

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
	struct tpe__metrics_worker *all;      /* A: release CAS push, acquire
					       * load; never popped */
	struct tpe__metrics_worker *free;     /* L: blocks of exited workers */
	struct tpe_metrics *baseline;         /* L: the last reset, or NULL */
	/* Many writers (submitters, starters): a line of their own. */
	uint64_t counters[TPE__M_COUNT] __attribute__((aligned(TPE__CACHE_LINE))); /* A */
} ;

/* The block of the calling worker thread, or NULL (no metrics, or not a
 * worker); set by the worker's thread before its loop (worker.c). */
extern TPE__TLS struct tpe__metrics_worker *tpe__metrics_tls_worker;

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
 * gauges are the caller's). The caller's lock held (the baseline). */
void tpe__metrics_read_locked(const struct tpe__metrics *m,
    struct tpe_metrics *out);
/* The counts from now on start at 0. The caller's lock held. 0, ENOMEM. */
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
 * its run time, not at its start, so that both histograms and
 * tasks_timed count the same tasks: a task still running (a scrape's own
 * task, reading the metrics) is in none of them. w not NULL. */
void tpe__metrics_task_end_slow(struct tpe__metrics_worker *w,
    int64_t accepted_tick, int64_t start_tick);
static inline void
tpe__metrics_task_end(struct tpe__metrics_worker *w, int64_t accepted_tick,
    int64_t start_tick)
{
	tpe__metrics_add(&w->tasks_run, 1);
	if (start_tick != 0)
		tpe__metrics_task_end_slow(w, accepted_tick, start_tick);
}

#endif /* TPE_METRICS_H */
