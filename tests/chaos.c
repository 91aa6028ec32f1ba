/* SPDX-License-Identifier: MIT */
/*
 * chaos.c - the ownership promises of tpe(7) checked at scale, with figures.
 *
 *   chaos [seconds [rounds]]
 *
 * Environment: TPE_CHAOS_SEED (a seed to repeat a run; printed at the start
 * and at a failure), TPE_CHAOS_SECONDS (default 60), TPE_CHAOS_ROUNDS
 * (default: no limit), TPE_CHAOS_KIND (every round on this queue kind, the
 * number of its enum tpe_queue_kind; default: a random kind), TPE_CHAOS_TASKS (tasks per round at most, default
 * 4096), TPE_CHAOS_FAULTS (one round in this many injects malloc and
 * pthread_create failures, default 4; 0 never), TPE_CHAOS_VERBOSE,
 * TPE_CHAOS_HANG_STOP (a round that hangs stops the process with SIGSTOP
 * after its report, for a debugger to attach, instead of exiting).
 *
 * Each round builds a random pool: every queue kind, both sizing policies,
 * every rejection policy and a custom handler, random sizes, keep-alive,
 * core timeout and reserved threads, and every hook (task, thread,
 * terminated, discard callback). Submitter threads start on a barrier and
 * give every task id of their share to an "actor" from the table `actors`
 * (tpe_execute_priority with a priority from -2 to 2, which the priority
 * kind ranks and the others ignore, tpe_execute_typed, tpe_try_execute,
 * tpe_submit with tpe_future_get / cancel / release, tpe_execute then
 * tpe_remove, and the
 * blocking tpe_execute_wait and tpe_submit_wait with random timeouts,
 * forever included, which never reach the rejection policy; tpe_schedule
 * and tpe_schedule_call with delays from "now" to 2 ms, or 10 s and an
 * immediate cancel, and tpe_schedule_at_fixed_rate / _with_fixed_delay
 * tasks that cancel their own future after a few runs or are cancelled by
 * their submitter; each round has random TPE_SCHED_* flags); a chaos
 * thread meanwhile resizes, changes the keep-alive and the core timeout,
 * pauses and resumes, purges, removes, waits for idleness, prestarts and
 * reads statistics. Tasks submit child tasks, open random blocking
 * sections (tpe_blocking_begin, nested or left open, tpe_managed_block;
 * each round has a random number of spare threads), hooks and the
 * rejection handler call back into the pool. The round ends with tpe_shutdown,
 * tpe_shutdown_now (the drained callback gets the rest), a task's own
 * shutdown or shutdown-now, or a plain tpe_destroy. Then, per task id:
 *   - accepted (0 returned): ran + handed back + removed == 1, where a task
 *     run by TPE_REJECT_CALLER_RUNS or taken by the custom handler counts
 *     as run or handed back as it was;
 *     (a periodic task: handed back exactly once, after any number of
 *     runs, never two at once);
 *   - refused (an error returned): it did not run and was not handed back,
 *     and the error is one the function documents;
 *   - a future agrees: done; tpe_future_get gives the value iff the task
 *     ran, ECANCELED iff it did not; a cancel that returned 0 means it
 *     never ran, EBUSY that it ran;
 *   - after ECANCELED, a submitter sees only ECANCELED;
 *   - statistics: every snapshot has completed <= submitted; at the end the
 *     pool is empty (no thread, task, queue entry), the before and after
 *     hooks ran as often, every thread that started ended, the terminated
 *     hook ran once, and /proc/self/task has as many threads as before.
 * Two rounds in three keep runtime metrics (tpe_attr_set_metrics, half of
 * them timing every task; chosen from the keep-alive drawn, so that the
 * draws of a seed stay as they were): at the end their counts are exact
 * (tasks run = completed, every thread started retired, the rejections by
 * cause add up to `rejected`, each histogram counts the tasks timed).
 * Some rounds also drive an execution strategy (tpe_strategy_*) in a random
 * mode from several threads: each produced task is consumed exactly once
 * and the strategy's counters add up to the tasks produced.
 *
 * In one round out of TPE_CHAOS_FAULTS, malloc, calloc, posix_memalign and
 * pthread_create fail at random inside the library (this program is linked
 * with -Wl,--wrap for them, as tests/test_failure.c, and its own
 * allocations and threads bypass the failures); every refused call must
 * return a documented error, and all the checks above still hold.
 *
 * The seed fixes every round's configuration and choices, not the
 * interleaving of the threads. Exits 0 when no check failed; a round that
 * takes longer than a bound is reported as a hang (SIGALRM). New actors
 * (another API that takes tasks) are one row of `actors`: a function that
 * gives the task id to the API and returns its result.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tpe.h"

#define TU_NO_CMOCKA /* a plain program, not a cmocka test */
#include "helpers.h"
#include "pool/pool.h" /* the timer's share of queued, at a failure */
#include "engine/stacks.h"

#define MAX_SUBMITTERS 4
#define MAX_REPORTS 30
#define ROUND_BOUND_S 60   /* a round that takes longer hangs */

/* ---- the wrapped allocator and thread start ---------------------------- */

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
int __real_posix_memalign(void **p, size_t align, size_t size);
int __real_pthread_create(pthread_t *thread, const pthread_attr_t *attr,
    void *(*start)(void *), void *arg);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
int __wrap_posix_memalign(void **p, size_t align, size_t size);
int __wrap_pthread_create(pthread_t *thread, const pthread_attr_t *attr,
    void *(*start)(void *), void *arg);

/* One call in `fault_one_in` fails while armed (0: none), and one
 * pthread_create in fault_one_in / 16, which is called far less; atomics. */
static unsigned fault_one_in;
/* TPE_CHAOS_KIND, or -1: every round's queue kind drawn. */
static int chaos_kind = -1;
/* TPE_CHAOS_HANG_STOP set: a hang stops the process (on_alarm). */
static bool hang_stop;
/* The round's pool until its end's tpe_destroy: a hang prints what its
 * termination waits for (on_alarm). */
static tpe_t *hang_pool;
static uint64_t faults_malloc, faults_create;
static __thread uint64_t fault_rs;

static bool
fault_now(unsigned div)
{
	unsigned n = __atomic_load_n(&fault_one_in, __ATOMIC_RELAXED) / div;
	uint64_t x;

	if (__atomic_load_n(&fault_one_in, __ATOMIC_RELAXED) == 0)
		return false;
	if (n < 2)
		n = 2;
	if (fault_rs == 0)
		fault_rs = ((uint64_t)(uintptr_t)&fault_rs * 0x9e3779b97f4a7c15) | 1;
	x = fault_rs;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	fault_rs = x;
	return (x * UINT64_C(2685821657736338717)) % n == 0;
}

void *
__wrap_malloc(size_t size)
{
	if (fault_now(1)) {
		__atomic_add_fetch(&faults_malloc, 1, __ATOMIC_RELAXED);
		errno = ENOMEM;
		return NULL;
	}
	return __real_malloc(size);
}

void *
__wrap_calloc(size_t n, size_t size)
{
	if (fault_now(1)) {
		__atomic_add_fetch(&faults_malloc, 1, __ATOMIC_RELAXED);
		errno = ENOMEM;
		return NULL;
	}
	return __real_calloc(n, size);
}

int
__wrap_posix_memalign(void **p, size_t align, size_t size)
{
	if (fault_now(1)) {
		__atomic_add_fetch(&faults_malloc, 1, __ATOMIC_RELAXED);
		return ENOMEM;
	}
	return __real_posix_memalign(p, align, size);
}

int
__wrap_pthread_create(pthread_t *thread, const pthread_attr_t *attr,
    void *(*start)(void *), void *arg)
{
	static const int errs[] = { EAGAIN, EAGAIN, ENOMEM, EPERM };

	if (fault_now(16)) {
		uint64_t k = __atomic_add_fetch(&faults_create, 1,
		    __ATOMIC_RELAXED);

		return errs[k % 4];
	}
	return __real_pthread_create(thread, attr, start, arg);
}

/* The harness's own memory and threads never fail on purpose. */
static void *
xcalloc(size_t n, size_t size)
{
	void *p = __real_calloc(n, size);

	if (p == NULL) {
		fprintf(stderr, "chaos: out of memory\n");
		exit(2);
	}
	return p;
}

static void
xthread(pthread_t *t, void *(*fn)(void *), void *arg)
{
	if (__real_pthread_create(t, NULL, fn, arg) != 0) {
		fprintf(stderr, "chaos: cannot start a thread\n");
		exit(2);
	}
}

/* ---- figures and violations ------------------------------------------- */

static struct figures {
	uint64_t rounds, fault_rounds, strategy_rounds;
	uint64_t attempted, accepted, refused, ran, handed, removed;
	uint64_t handler_took, child_tasks, cancelled_held;
	uint64_t blocking_sections;
	uint64_t futures, futures_value, futures_cancelled, cancels_ok;
	uint64_t strategy_tasks, strat_pc, strat_pic, strat_pec, strat_epc;
	uint64_t create_refused, ends[4], chaos_ops;
	uint64_t wait_timedout, wait_deadlk;
	uint64_t scheduled, periodic, periodic_runs, self_cancels;
	uint64_t per_actor[12][2];  /* attempted, accepted */
} fig;

static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long violations;
static uint64_t round_no;
static uint64_t seed;
static char round_desc[256];

static void violation(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static void
violation(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&report_lock);
	if (violations++ < MAX_REPORTS) {
		fprintf(stderr, "VIOLATION (seed 0x%" PRIx64 ", round %" PRIu64
		    ", %s): ", seed, round_no, round_desc);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fputc('\n', stderr);
	}
	pthread_mutex_unlock(&report_lock);
}

#define CHECK(cond, ...) do { if (!(cond)) violation(__VA_ARGS__); } while (0)

static void
add(uint64_t *c, uint64_t n)
{
	__atomic_add_fetch(c, n, __ATOMIC_RELAXED);
}

/* ---- a round's state -------------------------------------------------- */

enum end_mode { END_DESTROY, END_SHUTDOWN, END_SHUTDOWN_NOW, END_BY_TASK };
static const char *end_names[] = { "destroy", "shutdown", "shutdown_now",
	"task-shutdown" };

struct round;

/* One task id. Counters are atomics; rc and the rest belong to the
 * thread that made the attempt until the round's checks. */
struct slot {
	struct round *r;
	unsigned id;
	int actor;          /* index in actors[], -1: not attempted */
	int rc;             /* what the actor's call returned */
	int ran;            /* A: the body ran */
	int handed;         /* A: handed back (discard, drained, handler) */
	int removed;        /* tpe_remove returned 0 for it */
	int cancel_rc;      /* tpe_future_cancel's result, -1 not called */
	bool is_submit;     /* a tpe_submit or tpe_schedule_call task:
			     * hand-backs get fn NULL */
	bool plain_future;  /* a tpe_schedule future: its result is NULL */
	bool periodic;      /* a tpe_schedule_at_fixed_rate / _with_fixed_delay
			     * task: fn slot_periodic, any number of runs */
	int stop_after;     /* I: a periodic task cancels itself after this
			     * many runs */
	int running;        /* A: a periodic run in progress (overlap check) */
	tpe_future_t *pf;   /* A: a periodic task's future, published for its
			     * own cancel (the first run may come first) */
	bool keep_future;   /* f is checked at the end, then released */
	bool held;          /* A: the custom handler keeps it (deferred) */
	tpe_future_t *f;
};

struct deferred {
	tpe_fn fn;
	void *arg;
};

struct round {
	tpe_t *pool;
	uint64_t seed;
	unsigned kind, policy, rej, nsub;
	size_t core, max;
	bool per_worker, faults;
	bool bounded;                /* the queue has a capacity */
	unsigned sched_flags;        /* TPE_SCHED_* of the pool */
	enum end_mode end;
	unsigned trigger;            /* END_SHUTDOWN*: after this many attempts;
				      * END_BY_TASK: the id whose task stops */
	struct slot *slots;
	unsigned n_main, n_child;
	unsigned next_child;         /* A: children claimed */
	unsigned attempts;           /* A: main attempts so far */
	int submitters_done;         /* A */
	pthread_barrier_t start;
	/* Hook and callback counts (atomics). */
	uint64_t before, after, on_start, on_exit, terminated;
	int stopped;                 /* A: a task shut the pool down */
	/* The custom handler's deferred tasks, run once submitters ended. */
	pthread_mutex_t dlock;
	struct deferred *deferred;
	size_t ndeferred, cap_deferred;
};

static __thread bool tls_submitter;     /* a submitter thread */
static __thread bool tls_held;          /* the handler kept the task */
static __thread struct round *tls_round; /* set on pool threads by on_start */
static __thread bool tls_in_wait;       /* in tpe_execute_wait / submit_wait */

static void slot_run(void *arg);
static void *slot_call(void *arg);
static void slot_periodic(void *arg);

/* ---- hooks and callbacks ---------------------------------------------- */

static void
check_stats(tpe_t *pool, const char *where)
{
	struct tpe_stats st;
	int rc = tpe_get_stats(pool, &st, sizeof(st));

	CHECK(rc == 0, "%s: tpe_get_stats = %d", where, rc);
	if (rc != 0)
		return;
	CHECK(st.completed <= st.submitted, "%s: completed %" PRIu64
	    " > submitted %" PRIu64, where, st.completed, st.submitted);
	/* Both count a worker from the moment its start is decided. */
	CHECK(st.pool_size <= st.largest_pool_size, "%s: pool_size %zu > "
	    "largest_pool_size %zu", where, st.pool_size,
	    st.largest_pool_size);
}

/* A terminated pool's metrics, when it keeps them: exact (the head). */
static void
check_metrics(tpe_t *pool, const struct tpe_stats *st)
{
	struct tpe_metrics *m = __real_malloc(sizeof(*m));
	int rc;

	if (m == NULL)
		return;
	rc = tpe_get_metrics(pool, m, sizeof(*m));
	CHECK(rc == 0 || rc == ENOTSUP, "tpe_get_metrics = %d", rc);
	if (rc == 0) {
		CHECK(m->tasks_run == st->completed, "end: metrics tasks_run %"
		    PRIu64 " != completed %" PRIu64, m->tasks_run,
		    st->completed);
		CHECK(m->threads_started == m->threads_retired, "end: threads "
		    "started %" PRIu64 " != retired %" PRIu64,
		    m->threads_started, m->threads_retired);
		CHECK(m->rejected_abort + m->rejected_caller_runs +
		    m->rejected_discard + m->rejected_discard_oldest +
		    m->rejected_handler == st->rejected, "end: rejections by "
		    "cause do not add up to %" PRIu64, st->rejected);
		CHECK(m->queue_wait.count == m->tasks_timed &&
		    m->run_time.count == m->tasks_timed &&
		    m->tasks_timed <= m->tasks_run, "end: histograms count %"
		    PRIu64 ", %" PRIu64 ", timed %" PRIu64,
		    m->queue_wait.count, m->run_time.count, m->tasks_timed);
	}
	free(m);
}

static struct slot *
slot_of(struct round *r, tpe_fn fn, void *arg)
{
	struct slot *s = arg;

	if (fn != NULL && fn != slot_run && fn != slot_periodic)
		return NULL;  /* not one of ours (the handler's pair) */
	if (s < r->slots || s >= r->slots + r->n_main + r->n_child)
		return NULL;
	return s;
}

static void
hook_before(tpe_t *pool, tpe_fn fn, void *arg, void *ctx)
{
	struct round *r = ctx;

	add(&r->before, 1);
	CHECK(pool == r->pool, "before hook: wrong pool");
	/* The custom handler passes a submit task's internal pair on to
	 * tpe_try_execute, as a plain task: the hooks get that pair. A
	 * scheduled task reaches the hooks as the scheduler's own pair (its
	 * record, or the gate task after tpe_shutdown), not the user's. */
	CHECK(slot_of(r, fn, arg) != NULL || r->rej == 4 || fn != slot_run,
	    "before hook: a task not ours");
}

static void
hook_after(tpe_t *pool, tpe_fn fn, void *arg, void *ctx)
{
	struct round *r = ctx;
	struct slot *s = slot_of(r, fn, arg);

	add(&r->after, 1);
	CHECK(s != NULL || r->rej == 4 || fn != slot_run,
	    "after hook: a task not ours");
	if (s != NULL && s->id % 61 == 0)
		check_stats(pool, "after hook");
}

static void
hook_start(tpe_t *pool, void *ctx)
{
	struct round *r = ctx;

	add(&r->on_start, 1);
	tls_round = r;
	(void)tpe_is_shutdown(pool);
}

static void
hook_exit(tpe_t *pool, void *ctx)
{
	struct round *r = ctx;
	int rc = tpe_wait_idle(pool, 1000000);

	add(&r->on_exit, 1);
	CHECK(rc == EDEADLK, "tpe_wait_idle on a worker = %d, not EDEADLK",
	    rc);
	tls_round = NULL;
}

static void
hook_terminated(tpe_t *pool, void *ctx)
{
	struct round *r = ctx;
	int rc;

	add(&r->terminated, 1);
	CHECK(tpe_is_shutdown(pool) && !tpe_is_terminated(pool),
	    "terminated hook: not in TIDYING");
	rc = tpe_await_termination(pool, 0);
	CHECK(rc == ETIMEDOUT, "terminated hook: await(0) = %d", rc);
	rc = tpe_destroy(pool);
	CHECK(rc == EDEADLK, "terminated hook: destroy = %d", rc);
	check_stats(pool, "terminated hook");
}

static void
handback(tpe_fn fn, void *arg, void *ctx)
{
	struct round *r = ctx;
	struct slot *s = arg;

	if (s < r->slots || s >= r->slots + r->n_main + r->n_child) {
		violation("hand-back of an argument not ours (fn %p)",
		    (void *)(uintptr_t)fn);
		return;
	}
	CHECK(s->is_submit ? fn == NULL : fn == (s->periodic ? slot_periodic :
	    slot_run), "slot %u: handed back with fn %p", s->id,
	    (void *)(uintptr_t)fn);
	CHECK(!s->periodic || __atomic_load_n(&s->running, __ATOMIC_SEQ_CST)
	    == 0, "slot %u: handed back while a run is in progress", s->id);
	__atomic_add_fetch(&s->handed, 1, __ATOMIC_SEQ_CST);
}

/*
 * The custom rejection handler: refuses, runs the task here, hands it to a
 * reserved thread of the same pool, takes it as handed back (execute
 * tasks only: a submit pair must be called), or keeps it to run later
 * (submitter threads only: those are all joined before the pool ends).
 */
static int
reject_handler(tpe_t *pool, tpe_fn fn, void *arg, void *ctx)
{
	struct round *r = ctx;
	struct slot *s = slot_of(r, fn, arg);
	unsigned h = (unsigned)(((uintptr_t)arg >> 4) * 2654435761u >> 7) % 6;

	CHECK(pool == r->pool, "handler: wrong pool");
	CHECK(!tls_in_wait, "handler called by a blocking submit");
	switch (h) {
	case 0:
		return EAGAIN;
	case 1:
		fn(arg);
		add(&fig.handler_took, 1);
		return 0;
	case 2:
		if (tpe_try_execute(pool, fn, arg) == 0) {
			add(&fig.handler_took, 1);
			tls_held = true;  /* passed on: a cancel may win */
			return 0;
		}
		return EAGAIN;
	case 3:
		if (s != NULL && !s->is_submit) {
			__atomic_add_fetch(&s->handed, 1, __ATOMIC_SEQ_CST);
			add(&fig.handler_took, 1);
			return 0;
		}
		return EAGAIN;
	default:
		if (!tls_submitter)
			return EAGAIN;
		pthread_mutex_lock(&r->dlock);
		if (r->ndeferred == r->cap_deferred) {
			pthread_mutex_unlock(&r->dlock);
			return EAGAIN;
		}
		r->deferred[r->ndeferred++] = (struct deferred){ fn, arg };
		pthread_mutex_unlock(&r->dlock);
		/* The pair of a submit task carries the future, not the
		 * slot: the submitter marks its slot when it sees 0. */
		tls_held = true;
		add(&fig.handler_took, 1);
		return 0;
	}
}

/* ---- actors: how a task id is given to the library -------------------- */

/*
 * An actor gives slot s to one API and returns the call's result; 0 means
 * the task was accepted: it must then be run, handed back or removed
 * exactly once. `ok` is the set of documented results besides 0. Tasklet
 * jobs (tpe_coop_*) and the thpool_* API are to be added here.
 */
struct actor {
	const char *name;
	int (*give)(struct round *r, struct slot *s, uint64_t *rs);
	const int *ok;        /* terminated by 0 */
	unsigned weight;
};

static int
give_execute(struct round *r, struct slot *s, uint64_t *rs)
{
	/* A priority from -2 to 2 (ignored by every kind but priority). */
	return tpe_execute_priority(r->pool, slot_run, s,
	    (int)tu_rnd(rs, 5) - 2);
}

static int
give_typed(struct round *r, struct slot *s, uint64_t *rs)
{
	return tpe_execute_typed(r->pool, slot_run, s,
	    (enum tpe_invocation)tu_rnd(rs, 3));
}

static int
give_try(struct round *r, struct slot *s, uint64_t *rs)
{
	(void)rs;
	return tpe_try_execute(r->pool, slot_run, s);
}

/* A blocking submit's timeout: poll, short, long, or forever. A wait that
 * is never woken holds its round past ROUND_BOUND_S: reported as a hang. */
static int64_t
wait_timeout(uint64_t *rs)
{
	static const int64_t t[] = { 0, 1000, 100000, 1000000, -1 };

	return t[tu_rnd(rs, sizeof(t) / sizeof(t[0]))];
}

/*
 * The results of a blocking submit beyond those of tpe_execute: ETIMEDOUT
 * and EDEADLK only where the queue can refuse, EDEADLK only on a thread of
 * the pool; the rejection policy is never called (tls_in_wait: the handler
 * and an inline run by caller-runs check it). Returns rc.
 */
static int
waited(struct round *r, struct slot *s, int rc)
{
	bool can_wait = r->bounded || r->kind == TPE_QUEUE_HANDOFF;

	CHECK(can_wait || (rc != ETIMEDOUT && rc != EDEADLK),
	    "slot %u: queue kind %u, blocking submit = %d", s->id,
	    r->kind, rc);
	CHECK(rc != EDEADLK || tls_round == r, "slot %u: EDEADLK outside "
	    "the pool", s->id);
	if (rc == ETIMEDOUT)
		add(&fig.wait_timedout, 1);
	else if (rc == EDEADLK)
		add(&fig.wait_deadlk, 1);
	return rc;
}

static int
give_execute_wait(struct round *r, struct slot *s, uint64_t *rs)
{
	bool outer = tls_in_wait;
	int rc;

	tls_in_wait = true;
	rc = tpe_execute_wait(r->pool, slot_run, s, wait_timeout(rs));
	tls_in_wait = outer;
	return waited(r, s, rc);
}

static int
give_future(struct round *r, struct slot *s, uint64_t *rs, bool wait)
{
	tpe_future_t *f = NULL;
	bool outer = tls_in_wait;
	void *res;
	int rc;

	s->is_submit = true;
	tls_held = false;
	if (wait) {
		tls_in_wait = true;
		rc = waited(r, s, tpe_submit_wait(r->pool, slot_call, s,
		    wait_timeout(rs), &f));
		tls_in_wait = outer;
	} else {
		rc = tpe_submit(r->pool, slot_call, s, &f);
	}
	s->held = tls_held;
	if (rc != 0) {
		CHECK(f == NULL, "slot %u: tpe_submit failed but wrote the "
		    "future", s->id);
		return rc;
	}
	add(&fig.futures, 1);
	switch (tu_rnd(rs, 8)) {
	case 0:
		s->cancel_rc = tpe_future_cancel(f);
		CHECK(s->cancel_rc == 0 || s->cancel_rc == EBUSY,
		    "slot %u: cancel = %d", s->id, s->cancel_rc);
		break;
	case 1:
		/* Released before it ran: the pool keeps its reference. */
		tpe_future_release(f);
		return 0;
	case 2:
		rc = tpe_future_get(f, tu_rnd(rs, 2) ? 0 : 100000, &res);
		CHECK(rc == 0 || rc == ETIMEDOUT || rc == ECANCELED,
		    "slot %u: get = %d", s->id, rc);
		CHECK(rc != 0 || res == s, "slot %u: wrong result", s->id);
		break;
	}
	s->f = f;
	s->keep_future = true;
	return 0;
}

static int
give_submit(struct round *r, struct slot *s, uint64_t *rs)
{
	return give_future(r, s, rs, false);
}

static int
give_submit_wait(struct round *r, struct slot *s, uint64_t *rs)
{
	return give_future(r, s, rs, true);
}

static int
give_remove(struct round *r, struct slot *s, uint64_t *rs)
{
	int rc = tpe_execute(r->pool, slot_run, s), rr;

	if (rc != 0 || tu_rnd(rs, 2))
		return rc;
	rr = tpe_remove(r->pool, slot_run, s);
	if (rr == 0)
		s->removed = 1;
	else
		CHECK(rr == ENOENT || (rr == ENOTSUP && r->per_worker),
		    "slot %u: tpe_remove = %d", s->id, rr);
	return 0;
}

/*
 * A delayed one-shot: tpe_schedule or tpe_schedule_call, due now, in the
 * past, or within 2 ms; or due in 10 s and cancelled at once (the round
 * must not wait for it). The future, when asked for, is cancelled, waited
 * for a little, asked its delay, or released at once.
 */
static int
give_schedule(struct round *r, struct slot *s, uint64_t *rs)
{
	static const int64_t delays[] = { -1000, 0, 10000, 500000, 2000000,
		10000000000 };
	unsigned di = tu_rnd(rs, sizeof(delays) / sizeof(delays[0]));
	bool far = delays[di] > 1000000000, want = far || tu_rnd(rs, 3) != 0;
	tpe_future_t *f = NULL;
	int64_t d;
	void *res;
	int rc;

	add(&fig.scheduled, 1);
	s->is_submit = tu_rnd(rs, 2) == 0;
	s->plain_future = !s->is_submit;
	if (s->is_submit)
		rc = tpe_schedule_call(r->pool, slot_call, s, delays[di],
		    want ? &f : NULL);
	else
		rc = tpe_schedule(r->pool, slot_run, s, delays[di],
		    want ? &f : NULL);
	if (rc != 0 || !want) {
		CHECK(f == NULL, "slot %u: schedule = %d wrote a future",
		    s->id, rc);
		return rc;
	}
	add(&fig.futures, 1);
	rc = tpe_future_get_delay(f, &d);
	CHECK(rc == 0, "slot %u: get_delay = %d", s->id, rc);
	CHECK(rc != 0 || d <= (delays[di] > 0 ? delays[di] : 0), "slot %u: "
	    "delay %" PRId64 " > %" PRId64 " scheduled", s->id, d,
	    delays[di]);
	switch (far ? 0 : tu_rnd(rs, 6)) {
	case 0:
		s->cancel_rc = tpe_future_cancel(f);
		CHECK(s->cancel_rc == 0 || (!far && s->cancel_rc == EBUSY),
		    "slot %u: cancel = %d", s->id, s->cancel_rc);
		break;
	case 1:
		tpe_future_release(f);
		return 0;
	case 2:
		rc = tpe_future_get(f, tu_rnd(rs, 2) ? 0 : 3000000, &res);
		CHECK(rc == 0 || rc == ETIMEDOUT || rc == ECANCELED,
		    "slot %u: get = %d", s->id, rc);
		CHECK(rc != 0 || res == (s->is_submit ? (void *)s : NULL),
		    "slot %u: wrong result", s->id);
		break;
	}
	s->f = f;
	s->keep_future = true;
	return 0;
}

/* A periodic task, fixed rate or fixed delay, every 50 µs to 1 ms; it
 * cancels its own future after stop_after runs, or its submitter cancels
 * it at once. Its argument comes back once, through a callback. */
static int
give_periodic(struct round *r, struct slot *s, uint64_t *rs)
{
	int64_t initial = (int64_t)tu_rnd(rs, 1000) * 1000 - 100000;
	int64_t period = 50000 + (int64_t)tu_rnd(rs, 950) * 1000;
	tpe_future_t *f = NULL;
	int rc;

	add(&fig.periodic, 1);
	s->periodic = true;
	s->stop_after = 1 + (int)tu_rnd(rs, 4);
	if (tu_rnd(rs, 2))
		rc = tpe_schedule_at_fixed_rate(r->pool, slot_periodic, s,
		    initial, period, &f);
	else
		rc = tpe_schedule_with_fixed_delay(r->pool, slot_periodic, s,
		    initial, period, &f);
	if (rc != 0) {
		CHECK(f == NULL, "slot %u: periodic = %d wrote a future",
		    s->id, rc);
		return rc;
	}
	__atomic_store_n(&s->pf, f, __ATOMIC_RELEASE); /* pairs with the
							 * task's load */
	if (tu_rnd(rs, 4) == 0) {
		s->cancel_rc = tpe_future_cancel(f);
		CHECK(s->cancel_rc == 0, "slot %u: periodic cancel = %d",
		    s->id, s->cancel_rc);
	}
	s->f = f;
	s->keep_future = true;
	return 0;
}

static const int ok_execute[] = { EAGAIN, ECANCELED, ENOMEM, 0 };
static const int ok_wait[] = { EAGAIN, ECANCELED, ENOMEM, ETIMEDOUT,
	EDEADLK, 0 };

static const struct actor actors[] = {
	{ "execute", give_execute, ok_execute, 4 },
	{ "execute_typed", give_typed, ok_execute, 2 },
	{ "try_execute", give_try, ok_execute, 2 },
	{ "submit", give_submit, ok_execute, 3 },
	{ "execute+remove", give_remove, ok_execute, 2 },
	{ "execute_wait", give_execute_wait, ok_wait, 2 },
	{ "submit_wait", give_submit_wait, ok_wait, 2 },
	{ "schedule", give_schedule, ok_execute, 3 },
	{ "periodic", give_periodic, ok_execute, 1 },
};
#define NACTORS (sizeof(actors) / sizeof(actors[0]))

static int
pick_actor(uint64_t *rs)
{
	unsigned total = 0, k, x;

	for (k = 0; k < NACTORS; k++)
		total += actors[k].weight;
	x = tu_rnd(rs, total);
	for (k = 0; x >= actors[k].weight; k++)
		x -= actors[k].weight;
	return (int)k;
}

static bool
documented(const struct actor *a, int rc)
{
	const int *e;

	if (rc == 0)
		return true;
	for (e = a->ok; *e != 0; e++)
		if (*e == rc)
			return true;
	return false;
}

/* Gives slot s to a random actor; records what happened. */
static int
attempt(struct round *r, struct slot *s, uint64_t *rs)
{
	int k = pick_actor(rs), rc;

	bool outer = tls_held;  /* attempts nest: a task run inline */

	s->actor = k;
	s->cancel_rc = -1;
	tls_held = false;
	rc = actors[k].give(r, s, rs);
	s->held = s->held || tls_held;
	tls_held = outer;
	s->rc = rc;
	CHECK(documented(&actors[k], rc), "slot %u: %s returned %d", s->id,
	    actors[k].name, rc);
	return rc;
}

/* ---- the tasks -------------------------------------------------------- */

/* tpe_managed_block's callbacks: done after a few calls. */
static bool
tries_done(void *ctx)
{
	return *(unsigned *)ctx == 0;
}

static bool
tries_block(void *ctx)
{
	unsigned *left = ctx;

	sched_yield();
	return --*left == 0;
}

/* A blocking section around a short wait: nested, left open for the pool
 * to close, or through tpe_managed_block. */
static void
blocking_section(uint64_t *rs)
{
	unsigned left = 1 + tu_rnd(rs, 3);
	int rc;

	add(&fig.blocking_sections, 1);
	switch (tu_rnd(rs, 4)) {
	case 0:
		rc = tpe_managed_block(tries_done, tries_block, &left);
		CHECK(rc == 0 || rc == EAGAIN || rc == ENOMEM,
		    "tpe_managed_block = %d", rc);
		return;
	case 1:
		rc = tpe_blocking_begin();
		CHECK(rc == 0 || rc == EAGAIN || rc == ENOMEM,
		    "tpe_blocking_begin = %d", rc);
		sched_yield();
		return; /* left open: the pool closes it after the task */
	default:
		rc = tpe_blocking_begin();
		CHECK(rc == 0 || rc == EAGAIN || rc == ENOMEM,
		    "tpe_blocking_begin = %d", rc);
		if (tu_rnd(rs, 2)) {
			CHECK(tpe_blocking_begin() == 0, "nested begin");
			sched_yield();
			CHECK(tpe_blocking_end() == 0, "nested end");
		}
		sched_yield();
		rc = tpe_blocking_end();
		CHECK(rc == 0, "tpe_blocking_end = %d", rc);
		return;
	}
}

/* What a task does besides counting: call back into its pool. */
static void
task_body(struct slot *s)
{
	struct round *r = s->r;
	uint64_t rs = (r->seed ^ s->id * UINT64_C(0x9e3779b97f4a7c15)) | 1;
	unsigned c;

	if (r->end == END_BY_TASK && s->id == r->trigger) {
		int rc;

		__atomic_store_n(&r->stopped, 1, __ATOMIC_SEQ_CST);
		if (tu_rnd(&rs, 2))
			rc = tpe_shutdown(r->pool);
		else
			rc = tpe_shutdown_now(r->pool, handback, r);
		CHECK(rc == 0, "shutdown from a task = %d", rc);
		/* On a worker of the pool (not run by the caller-runs policy
		 * or the handler in a submitter), destroy must refuse. */
		if (tls_round == r) {
			rc = tpe_destroy(r->pool);
			CHECK(rc == EDEADLK, "destroy from a task = %d", rc);
		}
		return;
	}
	switch (tu_rnd(&rs, 16)) {
	case 0:
	case 1:
		/* A child task, from inside the pool. */
		c = __atomic_fetch_add(&r->next_child, 1, __ATOMIC_RELAXED);
		if (c < r->n_child) {
			struct slot *k = &r->slots[r->n_main + c];

			(void)attempt(r, k, &rs);
			add(&fig.child_tasks, 1);
		}
		break;
	case 2:
		check_stats(r->pool, "task");
		break;
	case 3:
		if (tls_round == r) {
			int rc = tpe_await_termination(r->pool, 1000);

			CHECK(rc == EDEADLK, "await from a worker = %d", rc);
		}
		break;
	case 4:
		sched_yield();
		break;
	case 5:
		blocking_section(&rs);
		break;
	}
}

static void
slot_run(void *arg)
{
	struct slot *s = arg;

	/* Run inline by caller-runs inside a blocking submit: the policy
	 * must never be called there. */
	CHECK(!tls_in_wait, "slot %u: ran inside a blocking submit", s->id);
	__atomic_add_fetch(&s->ran, 1, __ATOMIC_SEQ_CST);
	task_body(s);
}

static void *
slot_call(void *arg)
{
	slot_run(arg);
	return arg;
}

/* A periodic run: runs of one task never overlap; after stop_after runs
 * the task cancels its own future (0 while it runs: no other run starts). */
static void
slot_periodic(void *arg)
{
	struct slot *s = arg;
	tpe_future_t *f;
	int n, rc;

	CHECK(__atomic_add_fetch(&s->running, 1, __ATOMIC_SEQ_CST) == 1,
	    "slot %u: two periodic runs at once", s->id);
	n = __atomic_add_fetch(&s->ran, 1, __ATOMIC_SEQ_CST);
	add(&fig.periodic_runs, 1);
	/* Pairs with the submitter's release store of pf. */
	f = __atomic_load_n(&s->pf, __ATOMIC_ACQUIRE);
	if (n >= s->stop_after && f != NULL) {
		rc = tpe_future_cancel(f);
		CHECK(rc == 0, "slot %u: self-cancel = %d", s->id, rc);
		add(&fig.self_cancels, 1);
	}
	__atomic_sub_fetch(&s->running, 1, __ATOMIC_SEQ_CST);
}

/* ---- the threads of a round -------------------------------------------- */

struct submitter {
	pthread_t thread;
	struct round *r;
	unsigned idx;
};

static void *
submitter_main(void *arg)
{
	struct submitter *sub = arg;
	struct round *r = sub->r;
	unsigned per = r->n_main / r->nsub;
	unsigned lo = per * sub->idx;
	unsigned hi = sub->idx == r->nsub - 1 ? r->n_main : lo + per, i;
	uint64_t rs = (r->seed ^ (sub->idx + 1) * UINT64_C(0xbf58476d1ce4e5b9)) | 1;
	bool cancelled = false;
	int cancelled_by = -1;

	tls_submitter = true;
	pthread_barrier_wait(&r->start);
	for (i = lo; i < hi; i++) {
		struct slot *s = &r->slots[i];
		int rc = attempt(r, s, &rs);

		__atomic_add_fetch(&r->attempts, 1, __ATOMIC_SEQ_CST);
		/* try_execute after shutdown also says ECANCELED. */
		CHECK(!cancelled || rc == ECANCELED, "slot %u: %s = %d after "
		    "%s said ECANCELED", s->id, actors[s->actor].name, rc,
		    actors[cancelled_by].name);
		/* A schedule says ECANCELED from the moment tpe_shutdown
		 * begins (its hook runs while the pool is still RUNNING), so
		 * only another API's ECANCELED closes the door for all. */
		if (rc == ECANCELED && !cancelled &&
		    actors[s->actor].give != give_schedule &&
		    actors[s->actor].give != give_periodic) {
			cancelled = true;
			cancelled_by = s->actor;
		}
		if (tu_rnd(&rs, 64) == 0)
			sched_yield();
	}
	return NULL;
}

/* A documented result of a maintenance call: 0 or one of the errors. */
static void
expect(int rc, const char *what, int e1, int e2, int e3)
{
	CHECK(rc == 0 || rc == e1 || rc == e2 || rc == e3, "%s = %d", what,
	    rc);
}

static void *
chaos_main(void *arg)
{
	struct round *r = arg;
	uint64_t rs = (r->seed ^ UINT64_C(0x94d049bb133111eb)) | 1;
	bool paused = false, act = false, allow = false;
	int rc;

	pthread_barrier_wait(&r->start);
	for (;;) {
		size_t core, max, purged, started;
		bool done = __atomic_load_n(&r->submitters_done,
		    __ATOMIC_SEQ_CST);
		struct slot *s;

		if ((r->end == END_SHUTDOWN || r->end == END_SHUTDOWN_NOW) &&
		    !act && (done || __atomic_load_n(&r->attempts,
		    __ATOMIC_SEQ_CST) >= r->trigger)) {
			act = true;
			if (r->end == END_SHUTDOWN)
				rc = tpe_shutdown(r->pool);
			else
				rc = tpe_shutdown_now(r->pool, tu_rnd(&rs, 4) ?
				    handback : NULL, r);
			CHECK(rc == 0, "%s = %d", end_names[r->end], rc);
		}
		if (done)
			break;
		add(&fig.chaos_ops, 1);
		switch (tu_rnd(&rs, 12)) {
		case 0:
			max = 1 + tu_rnd(&rs, 8);
			core = tu_rnd(&rs, (unsigned)max + 1);
			if (r->per_worker && tu_rnd(&rs, 2)) {
				core = r->core;
				max = r->max;
			}
			rc = tpe_set_pool_size(r->pool, core, max);
			if (r->per_worker)
				CHECK(rc == (core == r->core && max == r->max ?
				    0 : EINVAL), "per-worker set_pool_size = %d",
				    rc);
			else
				CHECK(rc == 0, "set_pool_size = %d", rc);
			break;
		case 1:
			rc = tpe_set_keep_alive(r->pool,
			    (int64_t)tu_rnd(&rs, 2000) * 1000);
			expect(rc, "set_keep_alive", EINVAL, -1, -1);
			break;
		case 2:
			allow = tu_rnd(&rs, 2);
			rc = tpe_set_allow_core_timeout(r->pool, allow);
			expect(rc, "set_allow_core_timeout", EINVAL, -1, -1);
			CHECK(!r->per_worker || !allow || rc == EINVAL,
			    "per-worker core timeout = %d", rc);
			break;
		case 3:
			if (!paused) {
				rc = tpe_pause(r->pool);
				expect(rc, "pause", ECANCELED, -1, -1);
				paused = rc == 0;
			} else {
				rc = tpe_resume(r->pool);
				/* Restarting workers may fail under faults. */
				expect(rc, "resume", ECANCELED, EAGAIN, ENOMEM);
				paused = false;
			}
			break;
		case 4:
			rc = tpe_purge(r->pool, &purged);
			CHECK(rc == 0 || (rc == ENOTSUP && r->per_worker),
			    "purge = %d", rc);
			break;
		case 5:
			s = &r->slots[tu_rnd(&rs, r->n_main)];
			rc = tpe_remove(r->pool, slot_run, s);
			if (rc == 0)
				s->removed = 1;  /* only this thread sets it here */
			else
				CHECK(rc == ENOENT || (rc == ENOTSUP &&
				    r->per_worker), "remove = %d", rc);
			break;
		case 6:
			rc = tpe_wait_idle(r->pool, tu_rnd(&rs, 2) ? 0 : 200000);
			expect(rc, "wait_idle", ETIMEDOUT, -1, -1);
			break;
		case 7:
			rc = tpe_prestart_core_threads(r->pool, &started);
			expect(rc, "prestart", ECANCELED, EAGAIN, ENOMEM);
			break;
		case 8:
			check_stats(r->pool, "chaos");
			break;
		default:
			tu_sleep_ns((int64_t)tu_rnd(&rs, 200) * 1000);
			break;
		}
	}
	if (paused) {
		rc = tpe_resume(r->pool);
		expect(rc, "resume", ECANCELED, EAGAIN, ENOMEM);
	}
	return NULL;
}

/* ---- one round ---------------------------------------------------------- */

static const char *queue_names[] = { "unbounded", "bounded", "handoff",
	"per-worker", "priority" };
static const char *rej_names[] = { "abort", "caller-runs", "discard",
	"discard-oldest", "custom" };

static tpe_attr_t *
round_attr(struct round *r, uint64_t *rs)
{
	tpe_attr_t *a;
	size_t cap = 0;
	int64_t ka;
	int rc;

	r->kind = tu_rnd(rs, 5);
	if (chaos_kind >= 0)
		r->kind = chaos_kind; /* TPE_CHAOS_KIND; the draw stays */
	r->policy = tu_rnd(rs, 2);
	r->rej = tu_rnd(rs, 5);
	r->core = tu_rnd(rs, 4);
	r->max = r->core + 1 + tu_rnd(rs, 6);
	r->per_worker = r->kind == TPE_QUEUE_PER_WORKER;
	if (r->per_worker) {
		r->core = r->max;
		r->policy = TPE_POLICY_QUEUE_FIRST;
	}
	/* The priority kind: bounded one round in two. */
	if (r->kind == TPE_QUEUE_BOUNDED ||
	    (r->kind == TPE_QUEUE_PRIORITY && tu_rnd(rs, 2) == 0))
		cap = 1 + tu_rnd(rs, 32);
	r->bounded = cap > 0;
	r->sched_flags = tu_rnd(rs, 8);
	ka = (int64_t)tu_rnd(rs, 3000) * 1000;   /* 0 .. 3 ms */
	rc = tpe_attr_create(&a);
	if (rc != 0) {
		fprintf(stderr, "chaos: tpe_attr_create = %d\n", rc);
		exit(2);
	}
	rc = tpe_attr_set_pool_size(a, r->core, r->max) ||
	    tpe_attr_set_queue(a, (enum tpe_queue_kind)r->kind, cap) ||
	    tpe_attr_set_policy(a, (enum tpe_policy)r->policy) ||
	    tpe_attr_set_keep_alive(a, ka == 0 ? 1000 : ka) ||
	    tpe_attr_set_allow_core_timeout(a, !r->per_worker &&
	    tu_rnd(rs, 2)) ||
	    tpe_attr_set_reserved_threads(a, (int)tu_rnd(rs, 4) - 1) ||
	    tpe_attr_set_max_spare_threads(a, tu_rnd(rs, 5)) ||
	    tpe_attr_set_task_hooks(a, hook_before, hook_after, r) ||
	    tpe_attr_set_thread_hooks(a, hook_start, hook_exit, r) ||
	    tpe_attr_set_terminated_hook(a, hook_terminated, r) ||
	    tpe_attr_set_discard_callback(a, handback, r) ||
	    tpe_attr_set_schedule_flags(a, r->sched_flags) ||
	    tpe_attr_set_metrics(a, (ka / 1000) % 3 == 0 ? 0 :
	    (ka / 1000) % 3 == 1 ? TPE_METRICS_ON :
	    TPE_METRICS_ON | TPE_METRICS_TIME_ALL) ||
	    (r->rej < 4 ? tpe_attr_set_rejection(a,
	    (enum tpe_rejection)r->rej) :
	    tpe_attr_set_rejection_handler(a, reject_handler, r));
	if (rc != 0) {
		fprintf(stderr, "chaos: attribute setup failed\n");
		exit(2);
	}
	snprintf(round_desc, sizeof(round_desc), "core=%zu max=%zu queue=%s/%zu "
	    "policy=%s reject=%s keep-alive=%" PRId64 "us sched=%u end=%s%s",
	    r->core, r->max, queue_names[r->kind], cap,
	    r->policy ? "scale-first" : "queue-first", rej_names[r->rej],
	    ka / 1000, r->sched_flags, end_names[r->end],
	    r->faults ? " faults" : "");
	return a;
}

/* Creates the pool; under faults a refusal must leave nothing behind. */
static void
round_create(struct round *r, tpe_attr_t *a, int threads0)
{
	int rc, tries;

	for (tries = 0; ; tries++) {
		if (tries == 20)
			__atomic_store_n(&fault_one_in, 0, __ATOMIC_SEQ_CST);
		rc = tpe_create(&r->pool, a);
		if (rc == 0) {
			__atomic_store_n(&hang_pool, r->pool, __ATOMIC_SEQ_CST);
			return;
		}
		add(&fig.create_refused, 1);
		CHECK(r->faults && (rc == ENOMEM || rc == EAGAIN),
		    "tpe_create = %d", rc);
		CHECK(tu_thread_count_settled(threads0) == threads0,
		    "tpe_create failed and left threads");
		if (!r->faults)
			exit(1);
	}
}

static void
run_deferred(struct round *r)
{
	size_t i;

	pthread_mutex_lock(&r->dlock);
	for (i = 0; i < r->ndeferred; i++)
		r->deferred[i].fn(r->deferred[i].arg);
	r->ndeferred = 0;
	pthread_mutex_unlock(&r->dlock);
}

static void
check_slots(struct round *r)
{
	unsigned i;

	for (i = 0; i < r->n_main + r->n_child; i++) {
		struct slot *s = &r->slots[i];
		int ran = __atomic_load_n(&s->ran, __ATOMIC_SEQ_CST);
		int handed = __atomic_load_n(&s->handed, __ATOMIC_SEQ_CST);
		void *res = NULL;
		int rc;

		if (s->actor < 0) {
			CHECK(i >= r->n_main, "slot %u never attempted", i);
			continue;
		}
		fig.attempted++;
		fig.per_actor[s->actor][0]++;
		fig.ran += (uint64_t)ran;
		fig.handed += (uint64_t)handed;
		fig.removed += (uint64_t)s->removed;
		if (s->rc != 0) {
			fig.refused++;
			CHECK(ran + handed + s->removed == 0, "slot %u (%s) "
			    "refused with %d but ran %d, handed back %d", i,
			    actors[s->actor].name, s->rc, ran, handed);
			continue;
		}
		fig.accepted++;
		fig.per_actor[s->actor][1]++;
		if (s->periodic) {
			/* Any number of runs; the argument back once. */
			fig.ran -= (uint64_t)ran;
			CHECK(handed == 1 && s->removed == 0, "slot %u "
			    "(periodic) ran %d times, handed back %d, "
			    "removed %d", i, ran, handed, s->removed);
			CHECK(tpe_future_is_cancelled(s->f) &&
			    tpe_future_get(s->f, 0, NULL) == ECANCELED,
			    "slot %u: periodic future not cancelled", i);
			tpe_future_release(s->f);
			continue;
		}
		if (s->is_submit && s->held && s->cancel_rc == 0 &&
		    ran + handed == 0) {
			/*
			 * Cancelled while the custom handler held its pair:
			 * calling the pair then does nothing, and no callback
			 * gets the argument; the caller's successful cancel
			 * is its hand-back (tpe(7): "or, for a task of
			 * tpe_submit, by cancelling its future").
			 */
			fig.cancelled_held++;
			handed = 1;
			fig.handed++;
		}
		CHECK(ran + handed + s->removed == 1, "slot %u (%s) accepted "
		    "but ran %d, handed back %d, removed %d", i,
		    actors[s->actor].name, ran, handed, s->removed);
		if (s->cancel_rc == 0)
			CHECK(ran == 0, "slot %u: cancelled but ran", i);
		if (s->cancel_rc == 0)
			fig.cancels_ok++;
		if (s->cancel_rc == EBUSY)
			CHECK(ran == 1, "slot %u: cancel said EBUSY but the "
			    "task did not run", i);
		if (!s->keep_future)
			continue;
		CHECK(tpe_future_is_done(s->f), "slot %u: future not done", i);
		rc = tpe_future_get(s->f, 0, &res);
		if (ran == 1) {
			fig.futures_value++;
			CHECK(rc == 0 && res == (s->plain_future ? NULL :
			    (void *)s), "slot %u: ran but get = %d", i, rc);
		} else {
			fig.futures_cancelled++;
			CHECK(rc == ECANCELED && tpe_future_is_cancelled(s->f),
			    "slot %u: did not run but get = %d", i, rc);
		}
		tpe_future_release(s->f);
	}
}

/* A per-worker pool that terminated with tasks counted queued: each
 * slot's counts and top, to say where they are. */
static void
dump_stacks(tpe_t *pool)
{
	struct tpe__stacks *se = tpe__stacks_of(pool->engine);
	size_t i;

	fprintf(stderr, "stacks: removed %" PRIu64 " orphan_done %" PRIu64
	    "\n", se->removed, se->orphan_done);
	for (i = 0; i < se->n; i++) {
		struct tpe__stacks_slot *sl = &se->slots[i];

		fprintf(stderr, "slot %zu: head %p rest %p pushed %" PRIu64
		    " started %" PRIu64 " completed %" PRIu64 " dropped %"
		    PRIu64 " handed %d\n", i, (void *)sl->head,
		    (void *)sl->rest, sl->pushed, sl->started, sl->completed,
		    sl->dropped, (int)sl->handed);
	}
}

static void
run_round(uint64_t *rs, unsigned max_tasks, unsigned fault_every)
{
	struct submitter subs[MAX_SUBMITTERS];
	struct round *r = xcalloc(1, sizeof(*r));
	pthread_t chaos;
	tpe_attr_t *a;
	struct tpe_stats st;
	int threads0 = tu_thread_count(), n, rc;
	unsigned i, k;

	alarm(ROUND_BOUND_S);
	r->seed = tu_rnd_next(rs) | 1;
	r->faults = fault_every != 0 && tu_rnd(rs, fault_every) == 0;
	r->end = (enum end_mode)tu_rnd(rs, 4);
	r->nsub = 1 + tu_rnd(rs, MAX_SUBMITTERS);
	r->n_main = r->nsub + tu_rnd(rs, max_tasks);
	r->n_child = r->n_main / 4 + 1;
	r->trigger = tu_rnd(rs, r->n_main);
	r->slots = xcalloc(r->n_main + r->n_child, sizeof(*r->slots));
	for (i = 0; i < r->n_main + r->n_child; i++) {
		r->slots[i].r = r;
		r->slots[i].id = i;
		r->slots[i].actor = -1;
	}
	r->cap_deferred = r->n_main;
	r->deferred = xcalloc(r->cap_deferred, sizeof(*r->deferred));
	pthread_mutex_init(&r->dlock, NULL);
	a = round_attr(r, rs);
	if (getenv("TPE_CHAOS_VERBOSE") != NULL)
		printf("round %" PRIu64 ": %u tasks, %u submitters, %s\n",
		    round_no, r->n_main, r->nsub, round_desc);
	if (r->faults) {
		fig.fault_rounds++;
		__atomic_store_n(&fault_one_in, 8 + tu_rnd(rs, 120),
		    __ATOMIC_SEQ_CST);
	}
	round_create(r, a, threads0);
	tpe_attr_destroy(a);

	if (pthread_barrier_init(&r->start, NULL, r->nsub + 2) != 0)
		exit(2);
	for (k = 0; k < r->nsub; k++) {
		subs[k].r = r;
		subs[k].idx = k;
		xthread(&subs[k].thread, submitter_main, &subs[k]);
	}
	xthread(&chaos, chaos_main, r);
	pthread_barrier_wait(&r->start);
	for (k = 0; k < r->nsub; k++)
		pthread_join(subs[k].thread, NULL);
	__atomic_store_n(&r->submitters_done, 1, __ATOMIC_SEQ_CST);
	pthread_join(chaos, NULL);
	/* The handler's kept tasks: only submitters keep any. */
	run_deferred(r);

	if (r->end != END_DESTROY) {
		rc = tpe_await_termination(r->pool, r->end == END_BY_TASK &&
		    !__atomic_load_n(&r->stopped, __ATOMIC_SEQ_CST) ? 0 : -1);
		if (rc == ETIMEDOUT) {
			/* The stopping task never ran: end it here. */
			rc = tpe_shutdown(r->pool);
			CHECK(rc == 0, "shutdown = %d", rc);
			rc = tpe_await_termination(r->pool, -1);
		}
		CHECK(rc == 0, "await_termination = %d", rc);
		CHECK(tpe_is_terminated(r->pool), "not terminated");
		rc = tpe_get_stats(r->pool, &st, sizeof(st));
		if (st.queued != 0 && r->per_worker)
			dump_stacks(r->pool);
		CHECK(rc == 0 && st.pool_size == 0 && st.active == 0 &&
		    st.idle == 0 && st.queued == 0 && st.reserved == 0,
		    "terminated pool not empty: size %zu active %zu idle %zu "
		    "queued %zu (of them in the timer %zu) reserved %zu",
		    st.pool_size, st.active, st.idle, st.queued,
		    tpe__sched_pending(&r->pool->sched_hook), st.reserved);
		CHECK(st.completed <= st.submitted, "end: completed %" PRIu64
		    " > submitted %" PRIu64, st.completed, st.submitted);
		CHECK(st.submitted >= r->before, "end: submitted %" PRIu64
		    " < tasks run by workers %" PRIu64, st.submitted,
		    r->before);
		check_metrics(r->pool, &st);
	}
	__atomic_store_n(&hang_pool, NULL, __ATOMIC_SEQ_CST);
	rc = tpe_destroy(r->pool);
	CHECK(rc == 0, "tpe_destroy = %d", rc);
	__atomic_store_n(&fault_one_in, 0, __ATOMIC_SEQ_CST);
	fig.ends[r->end]++;

	CHECK(r->terminated == 1, "terminated hook ran %" PRIu64 " times",
	    r->terminated);
	CHECK(r->before == r->after, "before hooks %" PRIu64 " != after %"
	    PRIu64, r->before, r->after);
	CHECK(r->on_start == r->on_exit, "thread start hooks %" PRIu64
	    " != exit hooks %" PRIu64, r->on_start, r->on_exit);
	n = tu_thread_count_settled(threads0);
	CHECK(n == threads0, "%d threads after the round, %d before", n,
	    threads0);
	check_slots(r);
	pthread_barrier_destroy(&r->start);
	pthread_mutex_destroy(&r->dlock);
	free(r->deferred);
	free(r->slots);
	free(r);
	fig.rounds++;
	alarm(0);
}

/* ---- strategies --------------------------------------------------------- */

struct strat {
	tpe_strategy_t *s;
	unsigned n;
	unsigned next;        /* A: next task to produce */
	int *consumed;        /* A: per task */
	uint64_t rs;          /* the producer's: never called concurrently */
	int in_producer;      /* A: a check of that promise */
};

static void
strat_task(void *arg)
{
	int *c = arg;

	__atomic_add_fetch(c, 1, __ATOMIC_SEQ_CST);
}

static bool
strat_produce(void *ctx, tpe_fn *fn, void **arg, enum tpe_invocation *type)
{
	struct strat *st = ctx;
	unsigned i;

	CHECK(__atomic_add_fetch(&st->in_producer, 1, __ATOMIC_SEQ_CST) == 1,
	    "strategy: two producers at once");
	i = __atomic_load_n(&st->next, __ATOMIC_SEQ_CST);
	if (i >= st->n || tu_rnd(&st->rs, 16) == 0) {
		/* Nothing now: somebody calls produce again later. */
		__atomic_sub_fetch(&st->in_producer, 1, __ATOMIC_SEQ_CST);
		return false;
	}
	__atomic_store_n(&st->next, i + 1, __ATOMIC_SEQ_CST);
	*fn = strat_task;
	*arg = &st->consumed[i];
	*type = (enum tpe_invocation)tu_rnd(&st->rs, 3);
	__atomic_sub_fetch(&st->in_producer, 1, __ATOMIC_SEQ_CST);
	return true;
}

struct strat_thread {
	pthread_t t;
	struct strat *st;
	bool dispatch;
};

static void *
strat_main(void *arg)
{
	struct strat_thread *th = arg;
	int rc;

	while (__atomic_load_n(&th->st->next, __ATOMIC_SEQ_CST) < th->st->n) {
		rc = th->dispatch ? tpe_strategy_dispatch(th->st->s) :
		    tpe_strategy_produce(th->st->s);
		CHECK(rc == 0 || rc == EAGAIN || rc == ENOMEM,
		    "strategy %s = %d", th->dispatch ? "dispatch" : "produce",
		    rc);
		sched_yield();
	}
	return NULL;
}

static void
run_strategy(uint64_t *rs)
{
	struct strat st;
	struct strat_thread th[3];
	struct tpe_strategy_stats ss;
	tpe_attr_t *a;
	tpe_t *pool;
	unsigned i, mode = tu_rnd(rs, 4);
	size_t max = 1 + tu_rnd(rs, 6);
	int threads0 = tu_thread_count(), rc, tries;

	memset(&st, 0, sizeof(st));
	st.n = 100 + tu_rnd(rs, 2000);
	st.rs = tu_rnd_next(rs) | 1;
	st.consumed = xcalloc(st.n, sizeof(int));
	if (tpe_attr_create(&a) != 0 ||
	    tpe_attr_set_pool_size(a, tu_rnd(rs, (unsigned)max + 1), max) != 0 ||
	    tpe_attr_set_policy(a, (enum tpe_policy)tu_rnd(rs, 2)) != 0 ||
	    tpe_attr_set_queue(a, TPE_QUEUE_BOUNDED, 1 + tu_rnd(rs, 8)) != 0 ||
	    tpe_attr_set_rejection(a, (enum tpe_rejection)tu_rnd(rs, 2)) != 0 ||
	    tpe_attr_set_reserved_threads(a, (int)tu_rnd(rs, 3)) != 0 ||
	    tpe_attr_set_keep_alive(a, 1000 + tu_rnd(rs, 1000000)) != 0 ||
	    tpe_create(&pool, a) != 0 ||
	    tpe_strategy_create(&st.s, pool, strat_produce, &st,
	    (enum tpe_strategy_mode)mode) != 0) {
		fprintf(stderr, "chaos: strategy setup failed\n");
		exit(2);
	}
	tpe_attr_destroy(a);
	for (i = 0; i < 3; i++) {
		th[i].st = &st;
		th[i].dispatch = i == 2;
		xthread(&th[i].t, strat_main, &th[i]);
	}
	for (i = 0; i < 3; i++)
		pthread_join(th[i].t, NULL);
	/* Pending producers may still be on their way: wait them out. */
	for (tries = 0; ; tries++) {
		rc = tpe_wait_idle(pool, -1);
		CHECK(rc == 0, "strategy: wait_idle = %d", rc);
		rc = tpe_strategy_get_stats(st.s, &ss, sizeof(ss));
		CHECK(rc == 0, "strategy_get_stats = %d", rc);
		rc = tpe_strategy_destroy(st.s);
		if (rc != EBUSY || tries == 10000)
			break;
		tu_sleep_ns(100000);
	}
	CHECK(rc == 0, "strategy_destroy = %d", rc);
	CHECK(ss.pc + ss.pic + ss.pec + ss.epc == st.n, "strategy (mode %u): "
	    "pc %" PRIu64 " + pic %" PRIu64 " + pec %" PRIu64 " + epc %"
	    PRIu64 " != %u produced", mode, ss.pc, ss.pic, ss.pec, ss.epc,
	    st.n);
	rc = tpe_destroy(pool);
	CHECK(rc == 0, "strategy pool destroy = %d", rc);
	for (i = 0; i < st.n; i++)
		CHECK(st.consumed[i] == 1, "strategy (mode %u) task %u "
		    "consumed %d times", mode, i, st.consumed[i]);
	CHECK(tu_thread_count_settled(threads0) == threads0,
	    "strategy round left threads");
	fig.strat_pc += ss.pc;
	fig.strat_pic += ss.pic;
	fig.strat_pec += ss.pec;
	fig.strat_epc += ss.epc;
	fig.strategy_rounds++;
	fig.strategy_tasks += st.n;
	free(st.consumed);
}

/* ---- main --------------------------------------------------------------- */

static void
on_alarm(int sig)
{
	char msg[160];
	tpe_t *pool;
	int len;

	(void)sig;
	len = snprintf(msg, sizeof(msg), "chaos: round %" PRIu64 " took more "
	    "than %d s (hang?), seed 0x%" PRIx64 "\n", round_no, ROUND_BOUND_S,
	    seed);
	(void)!write(2, msg, (size_t)len);
	(void)!write(2, round_desc, strlen(round_desc));
	(void)!write(2, "\n", 1);
	pool = __atomic_load_n(&hang_pool, __ATOMIC_SEQ_CST);
	if (pool != NULL) {
		/* Read without the lock (a hung thread may hold it): what
		 * the pool's termination waits for, as last stored. */
		len = snprintf(msg, sizeof(msg), "chaos: the pool: state %d "
		    "threads %zu wc %zu handing back %zu paused %d timer "
		    "owes %d\n", __atomic_load_n(&pool->state,
		    __ATOMIC_RELAXED), __atomic_load_n(&pool->nthreads,
		    __ATOMIC_RELAXED), __atomic_load_n(&pool->wc,
		    __ATOMIC_RELAXED), __atomic_load_n(&pool->handing_back,
		    __ATOMIC_RELAXED), (int)__atomic_load_n(&pool->paused,
		    __ATOMIC_RELAXED), (int)tpe__sched_owes(&pool->sched_hook));
		(void)!write(2, msg, (size_t)len);
	}
	if (hang_stop) {
		/* TPE_CHAOS_HANG_STOP: stopped as it hangs, for a debugger
		 * to attach (gdb -p PID) and look at every thread. */
		(void)kill(getpid(), SIGSTOP);
	}
	_exit(1);
}

static unsigned long
env_ul(const char *name, unsigned long dflt)
{
	const char *e = getenv(name);

	return e != NULL && *e != '\0' ? strtoul(e, NULL, 0) : dflt;
}

int
main(int argc, char **argv)
{
	unsigned long seconds = env_ul("TPE_CHAOS_SECONDS", 60);
	unsigned long rounds = env_ul("TPE_CHAOS_ROUNDS", 0);
	unsigned tasks = (unsigned)env_ul("TPE_CHAOS_TASKS", 4096);
	unsigned faults = (unsigned)env_ul("TPE_CHAOS_FAULTS", 4);
	int64_t t0, budget;
	uint64_t rs;
	size_t k;

	if (argc > 1)
		seconds = strtoul(argv[1], NULL, 0);
	if (argc > 2)
		rounds = strtoul(argv[2], NULL, 0);
	seed = getenv("TPE_CHAOS_SEED") != NULL ?
	    env_ul("TPE_CHAOS_SEED", 0) :
	    (uint64_t)tu_now_ns() ^ ((uint64_t)getpid() << 32);
	if (tasks < MAX_SUBMITTERS)
		tasks = MAX_SUBMITTERS;
	hang_stop = getenv("TPE_CHAOS_HANG_STOP") != NULL;
	if (getenv("TPE_CHAOS_KIND") != NULL)
		chaos_kind = (int)(env_ul("TPE_CHAOS_KIND", 0) % 5);
	signal(SIGALRM, on_alarm);
	/* Each round counts threads from here on. */
	(void)tu_thread_baseline(__real_pthread_create);
	printf("chaos: seed=0x%" PRIx64 " seconds=%lu rounds=%lu tasks<=%u "
	    "faults=1/%u (repeat with TPE_CHAOS_SEED=0x%" PRIx64 ")\n", seed,
	    seconds, rounds, tasks, faults, seed);
	fflush(stdout);
	rs = seed | 1;
	t0 = tu_now_ns();
	budget = (int64_t)seconds * 1000000000;
	while ((rounds == 0 || fig.rounds < rounds) &&
	    tu_now_ns() - t0 < budget && violations == 0) {
		round_no++;
		run_round(&rs, tasks, faults);
		if (round_no % 4 == 0) {
			round_no++;
			snprintf(round_desc, sizeof(round_desc), "strategy");
			run_strategy(&rs);
		}
	}
	printf("chaos: %" PRIu64 " rounds in %.1f s (%" PRIu64 " with faults; "
	    "ends: %" PRIu64 " destroy, %" PRIu64 " shutdown, %" PRIu64
	    " shutdown_now, %" PRIu64 " by a task)\n", fig.rounds,
	    (double)(tu_now_ns() - t0) / 1e9, fig.fault_rounds, fig.ends[0],
	    fig.ends[1], fig.ends[2], fig.ends[3]);
	printf("chaos: tasks attempted %" PRIu64 " = accepted %" PRIu64
	    " + refused %" PRIu64 " (%" PRIu64 " submitted from tasks)\n",
	    fig.attempted, fig.accepted, fig.refused, fig.child_tasks);
	printf("chaos: blocking sections in tasks %" PRIu64 "\n",
	    fig.blocking_sections);
	printf("chaos: accepted %" PRIu64 " = ran %" PRIu64 " + handed back %"
	    PRIu64 " + removed %" PRIu64 "\n", fig.accepted, fig.ran,
	    fig.handed, fig.removed);
	printf("chaos:   the custom handler took %" PRIu64 "; cancelled while "
	    "it held them %" PRIu64 "\n", fig.handler_took, fig.cancelled_held);
	for (k = 0; k < NACTORS; k++)
		printf("chaos:   %-15s attempted %8" PRIu64 " accepted %8"
		    PRIu64 "\n", actors[k].name, fig.per_actor[k][0],
		    fig.per_actor[k][1]);
	printf("chaos: blocking submits timed out %" PRIu64 ", EDEADLK %"
	    PRIu64 "\n", fig.wait_timedout, fig.wait_deadlk);
	printf("chaos: scheduled one-shots %" PRIu64 ", periodic tasks %"
	    PRIu64 " (runs %" PRIu64 ", self-cancels %" PRIu64 ")\n",
	    fig.scheduled, fig.periodic, fig.periodic_runs, fig.self_cancels);
	printf("chaos: futures %" PRIu64 " (checked: %" PRIu64 " value, %"
	    PRIu64 " cancelled; cancel returned 0: %" PRIu64 ")\n",
	    fig.futures, fig.futures_value, fig.futures_cancelled,
	    fig.cancels_ok);
	printf("chaos: strategy rounds %" PRIu64 ", tasks %" PRIu64
	    " (pc %" PRIu64 ", pic %" PRIu64 ", pec %" PRIu64 ", epc %" PRIu64
	    ")\n", fig.strategy_rounds, fig.strategy_tasks, fig.strat_pc,
	    fig.strat_pic, fig.strat_pec, fig.strat_epc);
	printf("chaos: faults injected: malloc %" PRIu64 ", pthread_create %"
	    PRIu64 "; tpe_create refused %" PRIu64 "\n", faults_malloc,
	    faults_create, fig.create_refused);
	printf("chaos: maintenance calls %" PRIu64 "\n", fig.chaos_ops);
	printf("chaos: violations %lu\n", violations);
	if (violations != 0) {
		fprintf(stderr, "chaos: FAILED, seed 0x%" PRIx64 "\n", seed);
		return 1;
	}
	return 0;
}
