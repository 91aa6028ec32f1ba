/* SPDX-License-Identifier: MIT */
/*
 * tpe.h - libtpe, a thread-pool executor for C (POSIX threads).
 *
 * This is the only installed header of the library. Anything it does not
 * declare is internal and unsupported. Every function here is documented in
 * its own manual page; tpe(7) is the overview (policies, lifecycle,
 * ownership, memory ordering, fork, thread safety).
 *
 * Conventions (all functions):
 *   - return 0 or a positive errno value, like pthreads; never -1 + errno;
 *   - a call that fails ran nothing and kept nothing: the caller still owns
 *     the task's argument;
 *   - timeouts are int64_t nanoseconds, relative, on CLOCK_MONOTONIC:
 *     negative waits forever, 0 polls.
 */
#ifndef TPE_H
#define TPE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && __GNUC__ >= 4
#define TPE_API __attribute__((visibility("default")))
#else
#define TPE_API
#endif

#define TPE_VERSION_MAJOR 0
#define TPE_VERSION_MINOR 1
#define TPE_VERSION_PATCH 0
#define TPE_VERSION_HEX \
	((TPE_VERSION_MAJOR << 16) | (TPE_VERSION_MINOR << 8) | TPE_VERSION_PATCH)

/* Opaque handles. */
typedef struct tpe tpe_t;
typedef struct tpe_attr tpe_attr_t;
typedef struct tpe_future tpe_future_t;
typedef struct tpe_strategy tpe_strategy_t;

/* A task: runs once on a pool thread with the argument it was given. */
typedef void (*tpe_fn)(void *arg);

/* A callable for tpe_submit: its return value is the future's result. */
typedef void *(*tpe_call_fn)(void *arg);

/*
 * Receives a task that was accepted and will never run (discard policies,
 * tpe_shutdown_now, cancelled futures leaving the queue), so that its
 * argument can be freed or the task run elsewhere. For a task that came
 * from tpe_submit, fn is NULL, arg is the callable's argument, and the
 * future has already been cancelled.
 */
typedef void (*tpe_handback_fn)(tpe_fn fn, void *arg, void *ctx);

/*
 * A custom rejection handler. Return 0 when the handler took the task
 * (ran it, stored it, freed it): the submitting call then returns 0.
 * Return a positive errno value to refuse it: the submitting call returns
 * that value and the caller keeps the argument. For a tpe_submit task,
 * fn/arg is an internal pair that runs the callable and completes the
 * future when called as fn(arg); a handler that returns 0 must call it
 * exactly once.
 */
typedef int (*tpe_reject_fn)(tpe_t *pool, tpe_fn fn, void *arg, void *ctx);

/* Task hooks: run on the worker thread just before / after each task. For
 * a tpe_submit task, fn is NULL and arg is the callable's argument. */
typedef void (*tpe_task_hook_fn)(tpe_t *pool, tpe_fn fn, void *arg, void *ctx);

/* Thread hooks (start / exit of each worker) and the terminated hook. */
typedef void (*tpe_pool_hook_fn)(tpe_t *pool, void *ctx);

enum tpe_queue_kind {
	TPE_QUEUE_UNBOUNDED = 0, /* linked FIFO, no bound; capacity must be 0 */
	TPE_QUEUE_BOUNDED = 1,   /* array FIFO; capacity > 0 */
	TPE_QUEUE_HANDOFF = 2,   /* synchronous hand-off; capacity must be 0 */
	TPE_QUEUE_PER_WORKER = 3, /* a stack per worker for many tiny tasks;
				   * fixed pool (core == max); capacity 0 */
	TPE_QUEUE_PRIORITY = 4    /* by priority, then FIFO; capacity 0:
				   * unbounded, > 0: bounded */
};

enum tpe_policy {
	TPE_POLICY_QUEUE_FIRST = 0, /* Java: core, then queue, then max */
	TPE_POLICY_SCALE_FIRST = 1  /* core, then idle worker, then max, then queue */
};

/*
 * How a task behaves when it runs (Jetty's InvocationType). A BLOCKING
 * task may block; a NON_BLOCKING one never does and may run on any thread,
 * the last free one included; an EITHER task may block, but when it is run
 * inline as non-blocking (tpe_in_non_blocking() is then true) it behaves
 * as non-blocking.
 */
enum tpe_invocation {
	TPE_BLOCKING = 0,
	TPE_NON_BLOCKING = 1,
	TPE_EITHER = 2
};

/* Execution strategies over a producer (tpe_strategy_create). */
enum tpe_strategy_mode {
	TPE_STRATEGY_ADAPTIVE = 0, /* eat-what-you-kill: PC, PIC, PEC or EPC per task */
	TPE_STRATEGY_PC = 1,       /* produce-consume: every task in the producing thread */
	TPE_STRATEGY_PEC = 2,      /* produce-execute-consume: every task to the pool */
	TPE_STRATEGY_EPC = 3       /* execute-produce-consume: hand production on, consume here */
};

/*
 * A strategy's producer: stores the next task in *fn, *arg and *type and
 * returns true, or returns false when it has nothing now (it then arranges
 * for tpe_strategy_produce or tpe_strategy_dispatch to be called when more
 * work arrives). Never called by two threads at once.
 */
typedef bool (*tpe_produce_fn)(void *ctx, tpe_fn *fn, void **arg,
    enum tpe_invocation *type);

enum tpe_rejection {
	TPE_REJECT_ABORT = 0,        /* refuse: EAGAIN, the caller keeps the task */
	TPE_REJECT_CALLER_RUNS = 1,  /* run the task in the submitting thread */
	TPE_REJECT_DISCARD = 2,      /* drop the task (to the discard callback) */
	TPE_REJECT_DISCARD_OLDEST = 3 /* drop the queue's head, queue the task */
};

/*
 * Statistics snapshot, taken under the pool's lock. This struct only ever
 * grows at its end: tpe_get_stats takes the caller's sizeof and writes no
 * more than that, zeroing the fields the library does not know.
 */
struct tpe_stats {
	size_t pool_size;         /* live worker threads */
	size_t core_size;         /* configured core size */
	size_t max_size;          /* configured maximum size */
	size_t active;            /* workers running (or about to run) a task */
	size_t idle;              /* workers waiting for a task */
	size_t largest_pool_size; /* the most worker threads ever alive at once */
	size_t queued;            /* tasks waiting in the queue */
	size_t reserved;          /* reserved threads parked for tpe_try_execute */
	uint64_t submitted;       /* tasks accepted by the pool (queued or given to a worker) */
	uint64_t completed;       /* tasks the workers finished */
	uint64_t rejected;        /* submissions that reached the rejection policy */
	size_t blocked;           /* of the active workers, those inside a
				   * blocking section (tpe_blocking_begin(3)) */
	uint64_t compensations;   /* workers started because others blocked */
};

/*
 * A strategy's counters (tpe_strategy_get_stats): how many produced tasks
 * each mode consumed. Grows at its end like struct tpe_stats.
 */
struct tpe_strategy_stats {
	uint64_t pc;   /* run by the producing thread (produce-consume) */
	uint64_t pic;  /* EITHER tasks run there as non-blocking */
	uint64_t pec;  /* given to the pool (produce-execute-consume) */
	uint64_t epc;  /* run there after production was handed to another thread */
};

/*
 * Runtime metrics (tpe_attr_set_metrics(3), tpe_get_metrics(3)). A
 * log-linear histogram of durations in nanoseconds: values below 64 ns
 * have a bucket each, and every power of two above is cut into 32 equal
 * buckets, so a bucket's width is at most 1/32 of its lower bound and
 * tpe_histogram_percentile, which answers a bucket's midpoint, is within
 * 1/64 (1.6%) of the value recorded. Values of 2^38 ns (275 s) or more
 * count in the last bucket. TPE_HISTOGRAM_BUCKETS never changes within a
 * version of the struct below.
 */
#define TPE_HISTOGRAM_BUCKETS 1088
struct tpe_histogram {
	uint64_t count;   /* values recorded */
	uint64_t sum_ns;  /* their sum */
	uint64_t buckets[TPE_HISTOGRAM_BUCKETS]; /* tpe_histogram_bucket_lower */
};

/*
 * A pool's metrics, merged from its workers' counters when read. Grows at
 * its end like struct tpe_stats (tpe_get_metrics takes the caller's
 * sizeof). The counters count from tpe_create or the last
 * tpe_metrics_reset; the four gauges are tpe_get_stats's.
 */
struct tpe_metrics {
	size_t pool_size;          /* gauges: live workers, */
	size_t active;             /* running a task, */
	size_t idle;               /* waiting for one, */
	size_t queued;             /* tasks waiting */
	size_t blocked;            /* of the active, in a blocking section
				    * (tpe_blocking_begin(3)) */
	uint64_t tasks_run;        /* tasks the workers ran (exact) */
	uint64_t tasks_timed;      /* of those, timed into the histograms */
	uint64_t idle_waits;       /* a worker went to sleep for lack of work */
	uint64_t wakeups;          /* a sleeping worker was woken */
	uint64_t spin_hits;        /* a spinning worker saw a task come */
	uint64_t batches;          /* stacks taken whole (per-worker pools) */
	uint64_t steals;           /* batches taken from another worker */
	uint64_t stolen_tasks;     /* tasks in those */
	uint64_t reserve_hits;     /* tpe_try_execute found a reserved thread */
	uint64_t reserve_misses;   /* tpe_try_execute said EAGAIN */
	uint64_t rejected_abort;       /* refused: EAGAIN (TPE_REJECT_ABORT) */
	uint64_t rejected_caller_runs; /* run by the submitter */
	uint64_t rejected_discard;     /* dropped to the discard callback */
	uint64_t rejected_discard_oldest; /* the oldest queued one dropped */
	uint64_t rejected_handler;     /* given to the rejection handler */
	uint64_t rejected_shutdown;    /* refused: ECANCELED, shut down */
	uint64_t threads_started;  /* worker threads started */
	uint64_t threads_retired;  /* worker threads that exited */
	uint64_t threads_failed;   /* starts that failed (EAGAIN, ENOMEM) */
	uint64_t compensations;    /* workers started for blocked ones */
	unsigned timing_period;    /* 1 in how many tasks is timed (1 or 32) */
	struct tpe_histogram queue_wait; /* accepted -> started */
	struct tpe_histogram run_time;   /* started -> finished (with hooks) */
};

/* ---- version ---------------------------------------------------------- */

TPE_API const char *tpe_version(void);

/* ---- attributes ------------------------------------------------------- */

TPE_API int tpe_attr_create(tpe_attr_t **attr);
TPE_API void tpe_attr_destroy(tpe_attr_t *attr);
TPE_API int tpe_attr_set_pool_size(tpe_attr_t *attr, size_t core, size_t max);
TPE_API int tpe_attr_set_keep_alive(tpe_attr_t *attr, int64_t keep_alive_ns);
TPE_API int tpe_attr_set_allow_core_timeout(tpe_attr_t *attr, bool allow);
TPE_API int tpe_attr_set_queue(tpe_attr_t *attr, enum tpe_queue_kind kind,
    size_t capacity);
TPE_API int tpe_attr_set_policy(tpe_attr_t *attr, enum tpe_policy policy);
TPE_API int tpe_attr_set_rejection(tpe_attr_t *attr, enum tpe_rejection rejection);
TPE_API int tpe_attr_set_rejection_handler(tpe_attr_t *attr, tpe_reject_fn fn,
    void *ctx);
TPE_API int tpe_attr_set_thread_name(tpe_attr_t *attr, const char *prefix);
TPE_API int tpe_attr_set_stack_size(tpe_attr_t *attr, size_t bytes);
TPE_API int tpe_attr_set_pthread_attr(tpe_attr_t *attr,
    const pthread_attr_t *pattr);
TPE_API int tpe_attr_set_task_hooks(tpe_attr_t *attr, tpe_task_hook_fn before,
    tpe_task_hook_fn after, void *ctx);
TPE_API int tpe_attr_set_thread_hooks(tpe_attr_t *attr, tpe_pool_hook_fn on_start,
    tpe_pool_hook_fn on_exit, void *ctx);
TPE_API int tpe_attr_set_terminated_hook(tpe_attr_t *attr, tpe_pool_hook_fn fn,
    void *ctx);
TPE_API int tpe_attr_set_discard_callback(tpe_attr_t *attr, tpe_handback_fn fn,
    void *ctx);
TPE_API int tpe_attr_set_reserved_threads(tpe_attr_t *attr, int n);
/*
 * How many threads beyond max the pool may start to stand in for workers
 * blocked in a blocking section (tpe_blocking_begin(3)). Default
 * TPE_DEFAULT_SPARE_THREADS, at most TPE_MAX_SPARE_THREADS (else EINVAL).
 */
#define TPE_DEFAULT_SPARE_THREADS 256
#define TPE_MAX_SPARE_THREADS 32767
TPE_API int tpe_attr_set_max_spare_threads(tpe_attr_t *attr, size_t n);

/*
 * Scheduling flags (tpe_attr_set_schedule_flags), all off by default as
 * Java's ScheduledThreadPoolExecutor defaults:
 *   CONTINUE_PERIODIC_AFTER_SHUTDOWN  periodic tasks keep running after
 *       tpe_shutdown (until cancelled or tpe_shutdown_now); off: they stop
 *       at shutdown, their futures are cancelled and their arguments go to
 *       the discard callback;
 *   DROP_DELAYED_AFTER_SHUTDOWN  one-shot tasks whose delay has not passed
 *       at tpe_shutdown are dropped (futures cancelled, arguments to the
 *       discard callback); off: they still run at their due time and
 *       tpe_await_termination waits for them;
 *   REMOVE_ON_CANCEL  a cancelled scheduled task leaves the timer at once
 *       (its memory is freed, `queued` stops counting it); off: it stays
 *       until its due time or tpe_purge.
 */
#define TPE_SCHED_CONTINUE_PERIODIC_AFTER_SHUTDOWN 0x1u
#define TPE_SCHED_DROP_DELAYED_AFTER_SHUTDOWN 0x2u
#define TPE_SCHED_REMOVE_ON_CANCEL 0x4u
/* 0; EINVAL attr NULL or a bit that is not one of TPE_SCHED_*. */
TPE_API int tpe_attr_set_schedule_flags(tpe_attr_t *attr, unsigned flags);

/*
 * Metrics (tpe_attr_set_metrics(3)): off by default. TPE_METRICS_ON
 * counts and times 1 in 32 of the tasks each thread submits;
 * TPE_METRICS_TIME_ALL (with ON) times every task.
 */
#define TPE_METRICS_ON 0x1u
#define TPE_METRICS_TIME_ALL 0x2u
TPE_API int tpe_attr_set_metrics(tpe_attr_t *attr, unsigned flags);

/* ---- the pool --------------------------------------------------------- */

TPE_API int tpe_create(tpe_t **pool, const tpe_attr_t *attr);
TPE_API int tpe_execute(tpe_t *pool, tpe_fn fn, void *arg);
TPE_API int tpe_execute_typed(tpe_t *pool, tpe_fn fn, void *arg,
    enum tpe_invocation type);
TPE_API int tpe_try_execute(tpe_t *pool, tpe_fn fn, void *arg);
TPE_API bool tpe_in_non_blocking(void);
TPE_API int tpe_submit(tpe_t *pool, tpe_call_fn fn, void *arg,
    tpe_future_t **future);
/*
 * Blocking submit: as tpe_execute / tpe_submit, but where the pool would
 * reject the task for saturation (a full bounded queue, no worker free for
 * a hand-off, at max) the call waits for room instead, first come first
 * served, and never calls the rejection policy. timeout_ns as above;
 * ETIMEDOUT when it passed, ECANCELED when the pool is or becomes shut
 * down, EDEADLK from a worker of the pool when every worker would be
 * blocked so (tpe_execute_wait(3)). Unbounded and per-worker pools never
 * wait.
 */
TPE_API int tpe_execute_wait(tpe_t *pool, tpe_fn fn, void *arg,
    int64_t timeout_ns);
TPE_API int tpe_submit_wait(tpe_t *pool, tpe_call_fn fn, void *arg,
    int64_t timeout_ns, tpe_future_t **future);
TPE_API int tpe_shutdown(tpe_t *pool);
TPE_API int tpe_shutdown_now(tpe_t *pool, tpe_handback_fn drained, void *ctx);
TPE_API int tpe_await_termination(tpe_t *pool, int64_t timeout_ns);
TPE_API int tpe_destroy(tpe_t *pool);
TPE_API bool tpe_is_shutdown(const tpe_t *pool);
TPE_API bool tpe_is_terminated(const tpe_t *pool);
TPE_API int tpe_pause(tpe_t *pool);
TPE_API int tpe_resume(tpe_t *pool);
TPE_API int tpe_wait_idle(tpe_t *pool, int64_t timeout_ns);
TPE_API int tpe_set_pool_size(tpe_t *pool, size_t core, size_t max);
TPE_API int tpe_set_keep_alive(tpe_t *pool, int64_t keep_alive_ns);
TPE_API int tpe_set_allow_core_timeout(tpe_t *pool, bool allow);
TPE_API int tpe_prestart_core_threads(tpe_t *pool, size_t *started);
TPE_API int tpe_remove(tpe_t *pool, tpe_fn fn, void *arg);
TPE_API int tpe_purge(tpe_t *pool, size_t *purged);
TPE_API int tpe_get_stats(const tpe_t *pool, struct tpe_stats *stats,
    size_t size);

/* ---- priorities (tpe_execute_priority(3)) ----------------------------- */

/*
 * The calls above with a priority for the task: on a TPE_QUEUE_PRIORITY
 * pool, queued tasks start highest priority first and, among equal
 * priorities, in the order they were accepted (a plain call's task has
 * priority 0); on any other kind the priority is ignored. Errors: the
 * plain call's, and ENOMEM when an unbounded priority queue could not
 * grow (the caller keeps the task). tpe_schedule_priority: tpe_schedule,
 * each due run entering the pool at `priority`.
 */
TPE_API int tpe_execute_priority(tpe_t *pool, tpe_fn fn, void *arg,
    int priority);
TPE_API int tpe_submit_priority(tpe_t *pool, tpe_call_fn fn, void *arg,
    int priority, tpe_future_t **future);
TPE_API int tpe_execute_wait_priority(tpe_t *pool, tpe_fn fn, void *arg,
    int priority, int64_t timeout_ns);
TPE_API int tpe_submit_wait_priority(tpe_t *pool, tpe_call_fn fn, void *arg,
    int priority, int64_t timeout_ns, tpe_future_t **future);
TPE_API int tpe_schedule_priority(tpe_t *pool, tpe_fn fn, void *arg,
    int64_t delay_ns, int priority, tpe_future_t **future);

/* ---- managed blocking (tpe_blocking_begin(3)) ------------------------- */

/*
 * A task about to block (blocking I/O, a wait on a future or a latch that
 * another task of the same pool opens) brackets the wait: while a worker
 * is inside, its pool counts it as blocked, not running, and when fewer
 * than core workers (at least one) are left running while tasks wait, it
 * wakes an idle worker or starts a compensating one, up to max plus the
 * spare threads (tpe_attr_set_max_spare_threads). Both act on the pool of
 * the calling worker; on any other thread they do nothing and return 0.
 * Nested sections count once (the outermost pair acts). begin returns 0,
 * or EAGAIN (ENOMEM) when a compensating worker was needed and none could
 * be started (the limit, or the system refused the thread or its memory):
 * the worker is inside the section anyway and the caller goes on (and
 * calls tpe_blocking_end as always). end: 0; EINVAL without a begin.
 */
TPE_API int tpe_blocking_begin(void);
TPE_API int tpe_blocking_end(void);
/*
 * Java's ForkJoinPool.managedBlock: is_releasable(ctx) says whether the
 * wait is over (may be NULL: never before a block); block(ctx) blocks and
 * returns true once no more blocking is needed. Calls block, inside a
 * blocking section, until either says so; no section (no compensation)
 * when is_releasable is true at once. 0, or begin's error (the blocking
 * was done anyway); EINVAL block NULL (nothing called).
 */
typedef bool (*tpe_releasable_fn)(void *ctx);
typedef bool (*tpe_block_fn)(void *ctx);
TPE_API int tpe_managed_block(tpe_releasable_fn is_releasable,
    tpe_block_fn block, void *ctx);
/* Metrics (tpe_get_metrics(3)): a merged snapshot, a reset, the helpers on
 * a histogram, and the Prometheus text exposition format. */
TPE_API int tpe_get_metrics(const tpe_t *pool, struct tpe_metrics *metrics,
    size_t size);
TPE_API int tpe_metrics_reset(tpe_t *pool);
TPE_API int tpe_histogram_percentile(const struct tpe_histogram *h,
    double percentile, uint64_t *value_ns);
TPE_API int tpe_histogram_mean(const struct tpe_histogram *h,
    double *mean_ns);
TPE_API int tpe_histogram_record(struct tpe_histogram *h, uint64_t value_ns);
TPE_API uint64_t tpe_histogram_bucket_lower(size_t bucket);
TPE_API int tpe_metrics_write_prometheus(FILE *out,
    const struct tpe_metrics *metrics, size_t size, const char *prefix,
    const char *labels);
TPE_API int tpe_metrics_format_prometheus(char *buf, size_t len,
    size_t *needed, const struct tpe_metrics *metrics, size_t size,
    const char *prefix, const char *labels);

/* ---- futures ---------------------------------------------------------- */

TPE_API int tpe_future_get(tpe_future_t *future, int64_t timeout_ns,
    void **result);
TPE_API int tpe_future_cancel(tpe_future_t *future);
TPE_API bool tpe_future_is_done(const tpe_future_t *future);
TPE_API bool tpe_future_is_cancelled(const tpe_future_t *future);
TPE_API void tpe_future_release(tpe_future_t *future);
/*
 * The time left until a scheduled task's next start, in nanoseconds on
 * CLOCK_MONOTONIC: negative when that start is overdue (due and waiting
 * for the pool to take it, or running); once the future is done or
 * cancelled, relative to its last scheduled start. While a periodic run
 * runs, a fixed-rate task reports its next start (known when the run
 * begins), a fixed-delay task the start of this run (its next start is
 * known only when the run ends). INT64_MAX for a delay that saturated
 * ("never"). A snapshot: it may be stale by the time it returns. 0;
 * EINVAL future or delay_ns NULL, or a future that did not come from a
 * tpe_schedule* call.
 */
TPE_API int tpe_future_get_delay(const tpe_future_t *future, int64_t *delay_ns);

/* ---- failure, continuations, invoke-all/any, completion queues -------- */

/*
 * Failure (tpe_task_fail(3)): a callable whose task completes a future
 * (tpe_submit, a one-shot tpe_schedule*, the calls below) calls
 * tpe_task_fail(error), error > 0, to complete it failed: tpe_future_get
 * then returns EIO (and *result what the callable returned), and
 * tpe_future_error returns error. tpe_task_fail: 0; EINVAL error <= 0 or
 * no callable running on this thread. tpe_future_error: the task's error,
 * 0 while the future is not completed failed.
 */
TPE_API int tpe_task_fail(int error);
TPE_API int tpe_future_error(const tpe_future_t *future);

/*
 * A continuation (tpe_future_then(3)): fn(future, ctx) runs exactly once
 * when future completes (ran, failed or cancelled), and owns one reference
 * to it, which it releases with tpe_future_release. pool NULL: at once on
 * the calling thread when future is already done, else on the thread that
 * completes it; a pool: as a task there (refused or handed back: on the
 * thread that saw it refused or handed back). 0; EINVAL future or fn
 * NULL; ENOMEM (fn will not run).
 */
typedef void (*tpe_then_fn)(tpe_future_t *future, void *ctx);
TPE_API int tpe_future_then(tpe_future_t *future, tpe_then_fn fn, void *ctx,
    tpe_t *pool);

/*
 * Java's invokeAll and invokeAny (tpe_invoke_all(3)): task i is
 * fns[i](args[i]) (args NULL: every argument NULL), its future goes to
 * futures[i] (the caller releases each non-NULL one). invoke-all returns
 * when all are done (0), or ETIMEDOUT, the ones not started cancelled;
 * invoke-any returns 0 with the result of one that succeeded (its index
 * in *index), the others cancelled, or EIO when none succeeded,
 * ECANCELED when all were cancelled, ETIMEDOUT. Both return EDEADLK from
 * a worker of pool (nothing submitted).
 */
TPE_API int tpe_invoke_all(tpe_t *pool, size_t n, const tpe_call_fn *fns,
    void *const *args, int64_t timeout_ns, tpe_future_t **futures);
TPE_API int tpe_invoke_any(tpe_t *pool, size_t n, const tpe_call_fn *fns,
    void *const *args, int64_t timeout_ns, tpe_future_t **futures,
    void **result, size_t *index);

/*
 * A completion queue (tpe_cq_create(3)), Java's ExecutorCompletionService:
 * tasks submitted through it to its pool; take (with a timeout) and poll
 * hand back their futures in the order they completed, each with a
 * reference the caller releases.
 */
typedef struct tpe_cq tpe_cq_t;
TPE_API int tpe_cq_create(tpe_cq_t **cq, tpe_t *pool);
TPE_API int tpe_cq_submit(tpe_cq_t *cq, tpe_call_fn fn, void *arg,
    tpe_future_t **future);
TPE_API int tpe_cq_take(tpe_cq_t *cq, int64_t timeout_ns,
    tpe_future_t **future);
TPE_API int tpe_cq_poll(tpe_cq_t *cq, tpe_future_t **future);
TPE_API int tpe_cq_destroy(tpe_cq_t *cq);

/* ---- delayed and periodic tasks (tpe_schedule(3)) --------------------- */

/*
 * Java's ScheduledThreadPoolExecutor on any pool (every queue kind, policy
 * and engine). A timer thread, created by the first schedule on the pool,
 * keeps the pending tasks; when one is due it enters the pool through the
 * pool's normal submit path and runs on a worker, never on the timer
 * thread. Delays are int64_t nanoseconds, relative, on CLOCK_MONOTONIC:
 * a task never starts before its delay has passed; a delay <= 0 means now;
 * now + delay saturates (a huge delay means never, not a wrap into the
 * past). Tasks due at the same time enter the pool in the order they were
 * scheduled.
 *
 * When the pool refuses a due task for saturation (a full bounded queue, a
 * hand-off with no taker, at max), the task is neither rejected nor lost
 * and the rejection policy is not called (so a caller-runs policy never
 * runs user code on the timer thread): it stays due at the head of the
 * timer, tpe_future_get_delay reports it overdue (negative), and the timer
 * offers it again every millisecond until the pool takes it, oldest due
 * first, as Java's workers take a due task from the delay queue only when
 * they are free. A paused pool queues due tasks as tpe_execute does; they
 * run after tpe_resume. A due task that the pool later drops from its
 * queue (TPE_REJECT_DISCARD_OLDEST evicting it) goes to the discard
 * callback as the user's fn/arg, its future cancelled.
 *
 * future may be NULL for every call. A one-shot's future completes when
 * the task has run (tpe_future_get: 0, *result the callable's return value
 * for tpe_schedule_call, NULL for tpe_schedule); all effects of the task
 * happen-before tpe_future_get returns 0. A periodic task's future
 * completes only by cancellation (tpe_future_get: ECANCELED); one that
 * cannot be re-armed for lack of memory is cancelled that way too and its
 * argument handed to the discard callback.
 *
 * tpe_future_cancel: a task that has not started is cancelled (0), its
 * argument is handed to the discard callback, and it leaves the timer at
 * once with TPE_SCHED_REMOVE_ON_CANCEL, else when due or at tpe_purge. A
 * periodic task cancelled while it runs: 0, that run finishes and no other
 * starts (this is how a periodic task stops itself: it cancels its own
 * future). A one-shot that has started: EBUSY, as for tpe_submit.
 * Futures outlive their pool (cancel, get, get_delay and release work
 * after tpe_destroy), but a cancel must not race tpe_destroy itself.
 *
 * Shutdown: new schedules get ECANCELED (EINVAL is checked first). At
 * tpe_shutdown, one-shots still pending run at their due time unless
 * TPE_SCHED_DROP_DELAYED_AFTER_SHUTDOWN (those already due run anyway),
 * periodic tasks stop unless TPE_SCHED_CONTINUE_PERIODIC_AFTER_SHUTDOWN
 * (a run already handed to the pool's queue does not start; its future
 * is cancelled when a worker reaches it, before termination);
 * what stops is cancelled and handed to the discard callback; cancelled
 * tasks are dropped at once; tpe_await_termination waits for what will
 * still run. What still runs after tpe_shutdown runs one task at a time on
 * one worker of the pool, which stays for it (as Java's workers stay for
 * the delay queue; on a FIFO queue it starts after the tasks queued before
 * the shutdown; a TPE_QUEUE_PER_WORKER pool of one thread may start it
 * first, and those tasks then wait for it); if the pool cannot take that one task at the moment of
 * tpe_shutdown (a saturated bounded or hand-off pool), what would have
 * run is handed to the discard callback instead. tpe_shutdown_now hands every scheduled task that has not
 * started back through its callback exactly once (fn NULL for
 * tpe_schedule_call tasks, as for tpe_submit), and their futures report
 * ECANCELED at once (a periodic task running at that moment finishes its
 * run and then goes to the discard callback). Pending scheduled tasks
 * count in the `queued` statistic until they enter the pool; tpe_purge
 * removes cancelled ones (on a TPE_QUEUE_PER_WORKER pool tpe_purge says
 * ENOTSUP as before: use TPE_SCHED_REMOVE_ON_CANCEL there).
 *
 * Errors (all four calls): EINVAL pool or fn NULL, or (periodic) a
 * period or delay <= 0; ECANCELED the pool is shut down; ENOMEM; EAGAIN
 * the timer thread could not be created (nothing was scheduled; a later
 * call tries again). On any error nothing was scheduled, *future (when
 * future is not NULL) is set to NULL, and the caller keeps arg.
 */
/* Runs fn(arg) once, no earlier than delay_ns from now. */
TPE_API int tpe_schedule(tpe_t *pool, tpe_fn fn, void *arg, int64_t delay_ns,
    tpe_future_t **future);
/* Runs fn(arg) once, no earlier than delay_ns from now; its return value is
 * the future's result. */
TPE_API int tpe_schedule_call(tpe_t *pool, tpe_call_fn fn, void *arg,
    int64_t delay_ns, tpe_future_t **future);
/*
 * Fixed rate: starts fn(arg) at initial_ns, then every period_ns after
 * the previous *scheduled* start. Runs never overlap: a run that overruns
 * delays the next ones, which then start back to back (no run is skipped)
 * until the schedule is caught up. initial_ns <= 0 means now.
 */
TPE_API int tpe_schedule_at_fixed_rate(tpe_t *pool, tpe_fn fn, void *arg,
    int64_t initial_ns, int64_t period_ns, tpe_future_t **future);
/* Fixed delay: starts fn(arg) at initial_ns, then delay_ns after the end
 * of the previous run. initial_ns <= 0 means now. */
TPE_API int tpe_schedule_with_fixed_delay(tpe_t *pool, tpe_fn fn, void *arg,
    int64_t initial_ns, int64_t delay_ns, tpe_future_t **future);

/* ---- execution strategies (eat-what-you-kill) ------------------------ */

TPE_API int tpe_strategy_create(tpe_strategy_t **strategy, tpe_t *pool,
    tpe_produce_fn produce, void *ctx, enum tpe_strategy_mode mode);
TPE_API int tpe_strategy_produce(tpe_strategy_t *strategy);
TPE_API int tpe_strategy_dispatch(tpe_strategy_t *strategy);
TPE_API int tpe_strategy_get_stats(const tpe_strategy_t *strategy,
    struct tpe_strategy_stats *stats, size_t size);
TPE_API int tpe_strategy_destroy(tpe_strategy_t *strategy);

/*
 * A strategy's metrics (tpe_strategy_get_metrics(3)): the counts of
 * struct tpe_strategy_stats and the hand-over times of EPC. Grows at its
 * end like struct tpe_stats.
 */
struct tpe_strategy_metrics {
	uint64_t pc;               /* as struct tpe_strategy_stats */
	uint64_t pic;
	uint64_t pec;
	uint64_t epc;
	uint64_t handovers;        /* production given up for EPC, metrics on */
	uint64_t handovers_reclaimed; /* of those, ended by another thread
				       * than the pending producer */
	struct tpe_histogram handover_time; /* given up -> a pending
					     * producer takes production */
};
/* flags: TPE_METRICS_ON, or 0 (off, the default). */
TPE_API int tpe_strategy_set_metrics(tpe_strategy_t *strategy,
    unsigned flags);
TPE_API int tpe_strategy_get_metrics(const tpe_strategy_t *strategy,
    struct tpe_strategy_metrics *metrics, size_t size);

/* ---- SPSC rings ------------------------------------------------------- */

/*
 * A bounded single-producer single-consumer ring of pointers: one thread
 * at a time offers, one thread at a time polls or drains. A full ring
 * refuses the offer (EAGAIN), which is the backpressure.
 */
typedef struct tpe_ring tpe_ring_t;
/* capacity: a power of two >= 2, else EINVAL; ENOMEM. */
TPE_API int tpe_ring_create(tpe_ring_t **ring, size_t capacity);
/* Producer side (one thread at a time). 0; EAGAIN full (backpressure: the
 * caller keeps item); EPIPE after tpe_ring_close; EINVAL ring NULL.
 * Any pointer, NULL included, is an item. */
TPE_API int tpe_ring_offer(tpe_ring_t *ring, void *item);
/* Consumer side (one thread at a time). 0 and *item; EAGAIN empty; EPIPE
 * empty and closed (end of stream); EINVAL NULL arguments. */
TPE_API int tpe_ring_poll(tpe_ring_t *ring, void **item);
/* Consumer: moves up to max items into items[] (oldest first), *count
 * how many. 0 when *count > 0; EAGAIN empty; EPIPE empty and closed;
 * EINVAL NULL arguments or max == 0. */
TPE_API int tpe_ring_drain(tpe_ring_t *ring, void **items, size_t max,
    size_t *count);
/* Producer: no more items; what is in the ring can still be polled.
 * Idempotent: 0; EINVAL NULL. */
TPE_API int tpe_ring_close(tpe_ring_t *ring);
/* Frees the ring (items in it are the caller's business). NULL: no-op. */
TPE_API void tpe_ring_destroy(tpe_ring_t *ring);

/* ---- cooperative tasklets (tpe_coop_create(3)) ------------------------ */

typedef struct tpe_coop tpe_coop_t;
typedef struct tpe_job tpe_job_t;

/*
 * What a tasklet call returns: TPE_DONE (0) when it has finished, a
 * positive errno value when it failed (it is finished too, the job reports
 * the first such error and its other tasklets are called no more), or one
 * of the negative values to be called again.
 */
#define TPE_DONE 0
#define TPE_MADE_PROGRESS (-1)
#define TPE_NO_PROGRESS (-2)
typedef int (*tpe_tasklet_fn)(void *ctx);
/* Called exactly once per tasklet when it will be called no more, with 0,
 * the errno it returned, or ECANCELED (tpe_coop_submit(3)). May be NULL. */
typedef void (*tpe_tasklet_end_fn)(void *ctx, int result);

#define TPE_TASKLET_BLOCKING 0x1u /* not cooperative: a dedicated thread */
struct tpe_tasklet {
	tpe_tasklet_fn fn;        /* required */
	void *ctx;
	tpe_tasklet_end_fn end;   /* may be NULL */
	unsigned flags;           /* TPE_TASKLET_BLOCKING */
};  /* grows only at its end: tpe_coop_submit takes the caller's sizeof */

#define TPE_COOP_NO_STEALING 0x1u
/* Metrics (tpe_coop_get_metrics(3)): off by default. TPE_COOP_METRICS
 * counts every tasklet call and times 1 in 32 of them on average;
 * TPE_COOP_METRICS_TIME_ALL (with METRICS) times every call. */
#define TPE_COOP_METRICS 0x2u
#define TPE_COOP_METRICS_TIME_ALL 0x4u
struct tpe_coop_config {
	size_t threads;           /* 0: the CPUs this process may run on */
	int64_t max_park_ns;      /* 0: 1 ms; the idle backoff's bound */
	unsigned flags;           /* TPE_COOP_NO_STEALING */
	const char *thread_name;  /* NULL: "tpe-coop" */
};  /* grows only at its end: tpe_coop_create takes the caller's sizeof */

TPE_API int tpe_coop_create(tpe_coop_t **coop,
    const struct tpe_coop_config *config, size_t config_size);
TPE_API int tpe_coop_submit(tpe_coop_t *coop,
    const struct tpe_tasklet *tasklets, size_t n, size_t tasklet_size,
    tpe_job_t **job);
TPE_API int tpe_job_wait(tpe_job_t *job, int64_t timeout_ns);
TPE_API int tpe_job_wait_result(tpe_job_t *job, int64_t timeout_ns,
    int *result);
TPE_API int tpe_job_cancel(tpe_job_t *job);
TPE_API void tpe_job_release(tpe_job_t *job);
TPE_API int tpe_coop_destroy(tpe_coop_t *coop);

/*
 * A tasklet service's metrics (tpe_coop_get_metrics(3)), merged from its
 * workers' counters when read; counted from tpe_coop_create. Grows at its
 * end like struct tpe_stats (the call takes the caller's sizeof).
 */
struct tpe_coop_metrics {
	uint64_t calls;            /* tasklet calls (exact), blocking ones too */
	uint64_t calls_timed;      /* of those, timed into call_time */
	uint64_t passes;           /* worker passes over their tasklets: */
	uint64_t idle_passes;      /* of those, passes with no progress */
	uint64_t parks;            /* a worker parked (timed or not) */
	unsigned timing_period;    /* 1 in how many calls is timed (1 or 32) */
	struct tpe_histogram call_time; /* call -> return of a tasklet */
};
TPE_API int tpe_coop_get_metrics(const tpe_coop_t *coop,
    struct tpe_coop_metrics *metrics, size_t size);

/* ---- task groups and the parallel loop (issue 36: "groups") ----------- */

/*
 * A task group (tpe_group_create(3)): tasks given to pools through it,
 * waited for, cancelled and notified as one set. Opaque.
 */
typedef struct tpe_group tpe_group_t;
/* Runs once when the group becomes empty (tpe_group_notify(3)). */
typedef void (*tpe_group_notify_fn)(tpe_group_t *group, void *ctx);
/* One iteration of tpe_parallel_for(3). */
typedef void (*tpe_apply_fn)(size_t i, void *arg);

TPE_API int tpe_group_create(tpe_group_t **group);
TPE_API int tpe_group_destroy(tpe_group_t *group);
TPE_API size_t tpe_group_size(const tpe_group_t *group);
TPE_API int tpe_group_execute(tpe_group_t *group, tpe_t *pool, tpe_fn fn,
    void *arg);
TPE_API int tpe_group_wait(tpe_group_t *group, int64_t timeout_ns);
TPE_API int tpe_group_cancel(tpe_group_t *group);
TPE_API int tpe_group_notify(tpe_group_t *group, tpe_group_notify_fn fn,
    void *ctx);
TPE_API int tpe_parallel_for(tpe_t *pool, size_t n, tpe_apply_fn fn,
    void *arg);

#ifdef __cplusplus
}
#endif

#endif /* TPE_H */
