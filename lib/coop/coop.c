/* SPDX-License-Identifier: MIT */
/*
 * coop.c - the cooperative tasklet service: a fixed set of workers, each
 * calling its tasklets round-robin, jobs of tasklets, idle backoff, work
 * stealing between calls, and a dedicated thread per blocking tasklet.
 *
 * Design notes
 * ------------
 * Tasklets. A job is one allocation: the job and its n tasklet slots. A
 * cooperative slot belongs to exactly one worker at a time and sits in
 * that worker's list (or, on its way there, in the worker's inbox). Only
 * the owner calls a slot's function, so a tasklet never runs on two
 * threads at once; ownership changes only between two calls (stealing,
 * below). A blocking slot belongs to its dedicated thread from its start
 * to its end.
 *
 * The worker loop. One pass: take the inbox (new tasklets, stolen ones
 * handed over) onto the tail of the list, then call each tasklet of the
 * list once, in list order: round robin, one call each per pass. Before a
 * call the worker looks at the job's error word: non-zero (a sibling
 * failed, the job was cancelled, the service is being destroyed) dismisses
 * the slot with ECANCELED without calling it. A call that returns
 * TPE_DONE or an errno dismisses the slot with that result. Dismissal
 * unlinks the slot from the list before anything else, so it happens at
 * most once per slot: there is no second "job failed" check after a
 * finished call that could dismiss the same slot again and count the job
 * down twice (the double-dismissal that makes a job complete while one of
 * its tasklets still runs).
 *
 * Idle backoff. A pass in which no call made progress (every call returned
 * TPE_NO_PROGRESS) is idle; the n-th idle pass in a row spins
 * (TPE__COOP_SPIN_PASSES), then yields (TPE__COOP_YIELD_PASSES), then
 * parks for 1 us, 2 us, 4 us ... up to max_park_ns (tpe__coop_park_ns: the
 * sleep ladder of base/park.h's backoff).
 * One pass with progress resets n. A worker with no tasklet at all parks
 * without a timeout: a service without work uses no CPU.
 *
 * Park protocol (no lost wake-up). Everything that gives a worker
 * something to look at (submit's new tasklets, a hand-over of a stolen
 * one, a steal mark on one of its tasklets, a cancel, destroy) does it
 * under the worker's lock: changes the state, sets `news`, and signals
 * the condition variable if `parked`. The worker parks under the same
 * lock, and only while `news` is false: it re-checks after taking the
 * lock, so a change made before it parks is seen, and one made after it
 * set `parked` signals it. `news` is also read without the lock at the
 * top of each pass (a relaxed hint: the lock is taken to act on it).
 *
 * Stealing (unless TPE_COOP_NO_STEALING). When a worker dismisses a
 * finished tasklet it looks for the worker with the most tasklets; when
 * that one has at least two more than itself, it marks one of its
 * tasklets (the `thief` word, CAS from NULL, under the victim's lock so
 * that the slot is still in the victim's list) and wakes the victim. The
 * victim, at its next look at the marked slot (before it would call it),
 * unlinks it and pushes it to the thief's inbox: the move happens between
 * two calls, on the owner, so the tasklet is never called on two threads.
 * A thief that has left (destroy) is not given the slot: the mark is
 * dropped and the victim keeps it. The counts compared are snapshots;
 * a wrong guess only moves one tasklet too many or too few.
 *
 * The last caller ends a tasklet. Each slot remembers the worker that
 * called it last (`last`, NULL before its first call), and each worker
 * counts the slots it called last that another worker now owns (`away`:
 * handed over, not yet called by the new owner). The end of a slot runs
 * on its last caller, as tpe_coop_submit(3) promises: an owner that must
 * end a slot it never called (its job failed while the slot was on its
 * way from a steal) does not end it but returns it to `last`'s inbox
 * (accepted even after that worker closed), which ends it. A first call
 * by the new owner makes it `last` and counts the old one's `away` down;
 * a slot stolen back by its last caller counts it down at the hand-over.
 * A worker that leaves (destroy) ends what it owns, returns what others
 * called last, and then waits until its `away` is 0, ending what comes
 * back; it exits only then, so a returned slot always finds its worker.
 * Waits cannot cycle: returning never waits, and every owner leaves.
 * A slot never called (`last` NULL) ends on its owner.
 *
 * Jobs. `remaining` counts the slots not yet ended; the end of a slot
 * (the end callback, then the count) happens once, on the thread that
 * called it last (a worker, as above, or its dedicated thread), or that
 * owned it when it was never called. The one that counts the last slot
 * completes the job under its lock: `done`, the result (the error word: 0,
 * the first errno, or ECANCELED), a broadcast. The error word is set once
 * (CAS from 0): a failing tasklet, tpe_job_cancel, or destroy; after the
 * job completed cancel does nothing (it checks `done` under the lock, and
 * `remaining`, which the last slot counts down before it takes the lock:
 * between the two the result is decided, and a cancel that set the error
 * word there would change it; tpe__coop_complete_hook holds that window
 * open for test_coop_job_cancel_after_done). A cancel
 * from outside the service then waits for completion (so no call starts
 * after it returns); from a worker of the service, or the dedicated thread
 * of one of the job's tasklets, it only marks, since completion may need
 * the calling thread; tpe_job_wait from those threads is EDEADLK, and
 * tpe_coop_destroy from any thread of the service is EDEADLK. References:
 * the caller's (tpe_job_release) and the service's (dropped at
 * completion); the last one frees.
 *
 * Submit. Under the service lock (one job at a time, so that jobs spread
 * evenly): refuse when destroy has begun; start the dedicated threads,
 * which wait at the job's gate; then hand each cooperative slot to a
 * worker, round robin from where the last job ended; then open the gate.
 * When a thread cannot start, the gate opens with `aborted` set: the
 * started threads leave without calling anything, submit waits for them
 * and frees the job, and the call fails with EAGAIN having run nothing.
 *
 * Threads. Every thread the service starts (workers, dedicated threads)
 * starts through tpe__thread_create, with the asynchronous signals
 * blocked, and is joined: workers by destroy; a dedicated thread, at its
 * end, puts its record (one `struct dedicated`, allocated by submit) on
 * the `dead` list under coop->lock, and the next submit or destroy joins
 * it and frees the record. So when destroy returns no thread of the
 * service is left, and ended dedicated threads wait unjoined at most
 * until the next submit.
 *
 * Destroy. Sets `stopping` under the service lock (so no submit is half
 * done), gives every worker news, and joins them: a worker that sees
 * `stopping` closes its inbox, sets each job's error word to ECANCELED and
 * ends (or returns) every slot it owns. Dedicated threads see the error
 * word or `stopping` at their next turn; destroy then waits for
 * `blocking` to reach 0 and joins them from the `dead` list.
 *
 * Metrics (TPE_COOP_METRICS; tpe_coop_get_metrics(3)). Each worker has
 * its block (`m`, NULL when metrics are off: the worker then runs the
 * pass it had before metrics, pass_of's unmetered copy, and pays one test
 * of a pointer per pass), written by that worker alone with a relaxed load
 * and store (metrics/metrics.h's one-writer add: no locked instruction),
 * read by tpe_coop_get_metrics with relaxed loads and summed: the merge on
 * read of lib/metrics. Every call is counted; 1 in 32 on
 * average is timed (two reads of CLOCK_MONOTONIC, some 50 ns, where a
 * tasklet call costs 3 to 4 ns: the NEWS entry has the numbers), at
 * random intervals from a per-worker generator, so that a round robin of
 * tasklets whose count divides the period is not always sampled on the
 * same tasklet; TPE_COOP_METRICS_TIME_ALL times every call. A call's
 * counts are written after it returns and before its slot can end, so a
 * thread that saw the job complete sees them (the completion orders
 * them). The dedicated threads of blocking tasklets count their calls
 * in one more block, shared (`metrics[n]`): many writers, relaxed atomic
 * adds (a blocking tasklet's call is slow anyway); each thread samples
 * with a generator of its own. Passes, idle passes and parks are the
 * workers' only.
 *
 * Lock order: coop->lock -> job->lock -> worker->lock; no thread holds
 * two worker locks. A worker holds no lock while it calls a tasklet or
 * ends one.
 *
 * Layer: a client of the public API; it includes include/tpe.h and
 * lib/base only: sync (locks, tpe__thread_create, thread names), the named
 * atomics, and park.h's backoff ladder (doc/architecture.md,
 * build-aux/check-layering.sh).
 *
 * Legend and lock order: base/sync.h (I here: set at create or submit). A
 * field under a lock names it (coop->lock, w->lock, job->lock); O is the
 * owning worker's: it writes it under w->lock and reads it without, others
 * read it under w->lock.
 */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomic.h"
#include "base/cpu.h"
#include "base/park.h"
#include "base/sized.h"
#include "base/sync.h"
#include "coop/coop.h"
#include "metrics/metrics.h"

/* The first version of each input struct: the least a caller passes. */
#define TPE__COOP_CONFIG_MIN TPE__END_OF(struct tpe_coop_config, thread_name)
#define TPE__TASKLET_MIN TPE__END_OF(struct tpe_tasklet, flags)

#define DEFAULT_MAX_PARK_NS INT64_C(1000000)
#define DEFAULT_NAME "tpe-coop"

struct worker;

/* A worker's metrics (the design notes): O, one writer, relaxed adds. */
struct coop_metrics {
	uint64_t calls;
	uint64_t calls_timed;
	uint64_t passes;
	uint64_t idle_passes;
	uint64_t parks;
	struct tpe__hist call_time;
} __attribute__((aligned(TPE__CACHE_LINE)));

/* The mean interval between two timed calls (TPE_COOP_METRICS). */
#define TIMING_PERIOD 32

/* A calling thread's sampling state: private to it. */
struct sampler {
	uint32_t tick;               /* calls to the next timed one */
	uint32_t rng;                /* xorshift32 state, never 0 */
};

struct slot {
	tpe_tasklet_fn fn;           /* I */
	void *ctx;                   /* I */
	tpe_tasklet_end_fn end;      /* I */
	unsigned flags;              /* I */
	struct tpe_job *job;         /* I */
	struct slot *prev, *next;    /* O: the owner's list; w->lock in an inbox */
	struct worker *thief;        /* A: the thief that marked it, or NULL */
	struct worker *last;         /* private to the owner (passed with the
	                              * slot under the inbox locks): the
	                              * worker that called it last, or NULL */
};

struct worker {
	tpe_coop_t *coop;            /* I */
	size_t id;                   /* I */
	pthread_t thread;            /* I */
	struct tpe__mutex lock;
	pthread_cond_t cond;         /* W: the worker parks here, w->lock */
	struct slot *head, *tail;    /* O: the tasklets it calls, in order */
	struct slot *in_head, *in_tail; /* w->lock: the inbox, appended in order */
	size_t load;                 /* A (written under w->lock): list + inbox */
	bool news;                   /* A (written under w->lock): look at the inbox */
	bool parked;                 /* w->lock: waiting on cond */
	bool closed;                 /* w->lock: has left; takes no tasklet */
	size_t away;                 /* w->lock: slots it called last, owned by
	                              * another worker */
	uint64_t idle;               /* private: idle passes in a row */
	struct coop_metrics *m;      /* I: NULL when metrics are off */
	struct sampler smp;          /* private */
};

/* A dedicated thread of a blocking tasklet: allocated by submit, freed
 * by whoever joins it (reap). */
struct dedicated {
	pthread_t thread;            /* I (written by submit under
	                              * coop->lock, before the thread can
	                              * take that lock) */
	struct slot *slot;           /* I */
	struct dedicated *next;      /* coop->lock (the dead list) */
};

struct tpe_coop {
	struct tpe__mutex lock;
	pthread_cond_t cond;         /* W: blocking threads ending (destroy) */
	size_t n;                    /* I: workers */
	struct worker *workers;      /* I */
	int64_t max_park_ns;         /* I */
	unsigned flags;              /* I */
	char name[16];               /* I */
	size_t rr;                   /* coop->lock: the next job's first worker */
	bool stopping;               /* A (written under coop->lock): destroy began */
	size_t blocking;             /* coop->lock: dedicated threads not yet gone */
	struct dedicated *dead;      /* coop->lock: ended dedicated threads to join */
	size_t parked_forever;       /* A: workers parked without timeout */
	uint64_t wakeups;            /* A: returns from a worker's park wait */
	uint64_t timeouts;           /* A: timed parks that ran to their end */
	/* I: the workers' blocks and the dedicated threads' one, or NULL.
	 * Last: placed between the fields the workers read per pass it cost
	 * the metrics-off loop some 0.5 ns a call (a layout effect). */
	struct coop_metrics *metrics;
};

struct tpe_job {
	tpe_coop_t *coop;            /* I (not read after completion) */
	struct tpe__mutex lock;
	pthread_cond_t cond;         /* W: done, and the gate */
	size_t n;                    /* I */
	size_t remaining;            /* A: slots not yet ended */
	int error;                   /* A: 0, or the first errno (CAS once) */
	int refs;                    /* A */
	bool done;                   /* job->lock */
	int result;                  /* job->lock: valid once done */
	bool go, aborted;            /* job->lock: the gate of the dedicated threads */
	size_t waiting_threads;      /* job->lock: started; an aborted submit waits for 0 */
	struct slot slots[];         /* I (fields as struct slot says) */
};

/* White-box tests (coop.h): NULL outside them. */
void (*tpe__coop_complete_hook)(tpe_job_t *job);

/* The worker this thread is (NULL: none), and the blocking slot it runs. */
static TPE__TLS struct worker *tls_worker;
static TPE__TLS struct slot *tls_slot;

/* ---- jobs -------------------------------------------------------------- */

static void
job_unref(struct tpe_job *job)
{
	/* acq_rel: the last owner sees every write of the other owner. */
	if (tpe__fetch_sub(&job->refs, 1) != 0)
		return;
	tpe__cond_destroy(&job->cond);
	tpe__mutex_destroy(&job->lock);
	free(job);
}

/* Sets the job's error word unless it is set: true when this call set it. */
static bool
job_fail(struct tpe_job *job, int err)
{
	int expected = 0;

	/* Pairs with the acquire loads before each call (worker_pass,
	 * blocking_main) and with the load at completion. */
	return tpe__cas(&job->error, &expected, err);
}

static int
job_error(struct tpe_job *job)
{
	/* Pairs with job_fail's CAS. */
	return tpe__observe(&job->error);
}

static inline void
complete_hook(struct tpe_job *job)
{
	/* Relaxed: set by a test before the job exists. */
	void (*hook)(tpe_job_t *) = tpe__hint_load(&tpe__coop_complete_hook);

	if (hook != NULL)
		hook(job);
}

/*
 * The end of slot s: its failure becomes the job's error if it is the
 * first, the end callback runs, and the job counts it. The last one
 * completes the job. After this, s and its job may be gone.
 */
static void
slot_end(struct slot *s, int result)
{
	struct tpe_job *job = s->job;

	if (result != 0)
		job_fail(job, result);
	if (s->end != NULL)
		s->end(s->ctx, result);
	/* acq_rel: the last one sees every slot's effects (they happen-before
	 * tpe_job_wait's return through the job lock). */
	if (tpe__fetch_sub(&job->remaining, 1) != 0)
		return;
	complete_hook(job);
	tpe__mutex_lock(&job->lock);
	job->done = true;
	job->result = job_error(job);
	tpe__cond_broadcast(&job->cond);
	tpe__mutex_unlock(&job->lock);
	job_unref(job);
}

/* ---- workers: lists, news, parking ------------------------------------ */

static void
set_news_locked(struct worker *w)
{
	TPE__ASSERT_HELD(&w->lock);
	/* Relaxed: a hint read without the lock at the top of a pass; the
	 * worker takes the lock before it acts on it. */
	tpe__hint_store(&w->news, true);
	if (w->parked)
		tpe__cond_signal(&w->cond);
}

static void
wake(struct worker *w)
{
	tpe__mutex_lock(&w->lock);
	set_news_locked(w);
	tpe__mutex_unlock(&w->lock);
}

static void
wake_all(tpe_coop_t *coop)
{
	size_t i;

	for (i = 0; i < coop->n; i++)
		wake(&coop->workers[i]);
}

static void
add_load_locked(struct worker *w, long delta)
{
	TPE__ASSERT_HELD(&w->lock);
	/* Relaxed: thieves compare snapshots (a wrong guess is harmless). */
	tpe__hint_store(&w->load, w->load + (size_t)delta);
}

static size_t
load_of(struct worker *w)
{
	return tpe__hint_load(&w->load);
}

/* Appends s to one of w's lists (its list or its inbox) and counts it. */
static void
append_locked(struct worker *w, struct slot **head, struct slot **tail,
    struct slot *s)
{
	TPE__ASSERT_HELD(&w->lock);
	s->next = NULL;
	s->prev = *tail;
	if (*tail != NULL)
		(*tail)->next = s;
	else
		*head = s;
	*tail = s;
	add_load_locked(w, 1);
}

/* Appends s to w's inbox; false when w has left (s is not taken). */
static bool
inbox_push_locked(struct worker *w, struct slot *s)
{
	TPE__ASSERT_HELD(&w->lock);
	if (w->closed)
		return false;
	append_locked(w, &w->in_head, &w->in_tail, s);
	set_news_locked(w);
	return true;
}

/* Moves the inbox to the tail of the list (the owner). */
static void
take_inbox_locked(struct worker *w)
{
	TPE__ASSERT_HELD(&w->lock);
	tpe__hint_store(&w->news, false);
	if (w->in_head == NULL)
		return;
	w->in_head->prev = w->tail;
	if (w->tail != NULL)
		w->tail->next = w->in_head;
	else
		w->head = w->in_head;
	w->tail = w->in_tail;
	w->in_head = w->in_tail = NULL;
}

static void
unlink_locked(struct worker *w, struct slot *s)
{
	TPE__ASSERT_HELD(&w->lock);
	if (s->prev != NULL)
		s->prev->next = s->next;
	else
		w->head = s->next;
	if (s->next != NULL)
		s->next->prev = s->prev;
	else
		w->tail = s->prev;
	add_load_locked(w, -1);
}

/*
 * Parks w until it has news, or for ns (ns < 0: without a timeout). The
 * re-check of news under the lock is what the park protocol needs.
 */
static void
park(struct worker *w, int64_t ns)
{
	int64_t deadline = ns < 0 ? -1 : tpe__deadline(ns);

	if (w->m != NULL)
		tpe__metrics_add(&w->m->parks, 1);
	tpe__mutex_lock(&w->lock);
	if (ns < 0)
		/* Pairs with the load in tpe__coop_parked_forever. */
		tpe__fetch_add(&w->coop->parked_forever, 1);
	w->parked = true;
	while (!w->news) {
		int rc = tpe__cond_wait_until(&w->cond, &w->lock, deadline);

		/* Relaxed: statistics (tpe__coop_wakeups, _park_timeouts). */
		tpe__counter_add(&w->coop->wakeups, 1);
		if (rc != 0) {
			tpe__counter_add(&w->coop->timeouts, 1);
			break;
		}
	}
	w->parked = false;
	if (ns < 0)
		tpe__fetch_sub(&w->coop->parked_forever, 1);
	tpe__mutex_unlock(&w->lock);
}

int64_t
tpe__coop_park_ns(uint64_t n, int64_t max_ns)
{
	if (n <= TPE__COOP_SPIN_PASSES + TPE__COOP_YIELD_PASSES)
		return 0;
	/* The park phase is the base backoff's sleep ladder (park.h). */
	return tpe__backoff_sleep_ns(n - TPE__COOP_SPIN_PASSES -
	    TPE__COOP_YIELD_PASSES, max_ns);
}

/*
 * The n-th idle pass in a row of a worker (may_spin) or of a dedicated
 * thread (which yields instead of spinning): relaxes or yields and returns
 * 0, or returns how long to park (the design notes, Idle backoff).
 */
static int64_t
idle_backoff(uint64_t n, int64_t max_ns, bool may_spin)
{
	int64_t ns = tpe__coop_park_ns(n, max_ns);

	if (ns != 0)
		return ns;
	if (may_spin && n <= TPE__COOP_SPIN_PASSES)
		tpe__cpu_relax();
	else
		sched_yield();
	return 0;
}

/* One idle pass more: spin, yield or park (the design notes). */
static void
idle(struct worker *w)
{
	int64_t ns;

	if (w->idle < UINT64_MAX)
		w->idle++;
	ns = idle_backoff(w->idle, w->coop->max_park_ns, true);
	if (ns != 0)
		park(w, ns);
}

/* ---- stealing ---------------------------------------------------------- */

/* Marks the first unmarked slot of the list starting at s for thief. */
static bool
mark_one_locked(struct worker *victim, struct slot *s, struct worker *thief)
{
	TPE__ASSERT_HELD(&victim->lock);
	for (; s != NULL; s = s->next) {
		struct worker *none = NULL;

		/* Pairs with the acquire load in worker_pass: the victim
		 * sees the mark before its next call of s. */
		if (tpe__cas(&s->thief, &none, thief)) {
			set_news_locked(victim);
			return true;
		}
	}
	return false;
}

/* w has just dismissed a tasklet: mark one of the longest list's. */
static void
steal(struct worker *w)
{
	tpe_coop_t *coop = w->coop;
	struct worker *victim = NULL;
	size_t i, most = load_of(w) + 1;

	if ((coop->flags & TPE_COOP_NO_STEALING) || coop->n < 2)
		return;
	for (i = 0; i < coop->n; i++) {
		if (load_of(&coop->workers[i]) > most) {
			victim = &coop->workers[i];
			most = load_of(victim);
		}
	}
	if (victim == NULL)
		return;
	tpe__mutex_lock(&victim->lock);
	/* The list, else the inbox: slots not yet taken keep their mark. */
	if (!mark_one_locked(victim, victim->head, w))
		mark_one_locked(victim, victim->in_head, w);
	tpe__mutex_unlock(&victim->lock);
}

/* s, owned by w, was marked by thief: move it there (between two calls). */
static void
hand_over(struct worker *w, struct slot *s, struct worker *thief)
{
	/* Read before the push: the thief owns s after it. */
	struct worker *last = s->last;
	bool moved;

	tpe__hint_store(&s->thief, NULL);
	tpe__mutex_lock(&w->lock);
	unlink_locked(w, s);
	/* Counted before the push, so that the thief's count-down (adopt)
	 * never comes first. */
	if (last == w)
		w->away++;
	tpe__mutex_unlock(&w->lock);
	tpe__mutex_lock(&thief->lock);
	moved = inbox_push_locked(thief, s);
	/* Back with the worker that called it last (it will not adopt). */
	if (moved && last == thief) {
		TPE__ASSERT(thief->away > 0);
		thief->away--;
	}
	tpe__mutex_unlock(&thief->lock);
	if (moved)
		return;
	/* The thief has left (destroy): keep it, at the tail. */
	tpe__mutex_lock(&w->lock);
	append_locked(w, &w->head, &w->tail, s);
	if (last == w)
		w->away--;
	tpe__mutex_unlock(&w->lock);
}

/* w is about to call s, which another worker called last: w becomes its
 * last caller, and that worker has one slot away less. */
static void
adopt(struct worker *w, struct slot *s)
{
	struct worker *prev = s->last;

	if (prev != NULL) {
		tpe__mutex_lock(&prev->lock);
		TPE__ASSERT(prev->away > 0);
		prev->away--;
		/* A leaving worker waits for its away count (worker_leave). */
		if (prev->closed)
			set_news_locked(prev);
		tpe__mutex_unlock(&prev->lock);
	}
	s->last = w;
}

/* ---- the worker loop --------------------------------------------------- */

static void
dismiss(struct worker *w, struct slot *s, int result)
{
	tpe__mutex_lock(&w->lock);
	unlink_locked(w, s);
	tpe__mutex_unlock(&w->lock);
	slot_end(s, result);
}

/*
 * s, owned by w, ends with ECANCELED (its job failed): on w when w called
 * it last or nobody did; else it goes back to the worker that did, which
 * ends it (the design notes: the last caller ends a tasklet).
 */
static void
cancel_slot(struct worker *w, struct slot *s)
{
	struct worker *home = s->last;

	if (home == NULL || home == w) {
		dismiss(w, s, ECANCELED);
		return;
	}
	tpe__mutex_lock(&w->lock);
	unlink_locked(w, s);
	tpe__mutex_unlock(&w->lock);
	tpe__hint_store(&s->thief, NULL);
	tpe__mutex_lock(&home->lock);
	/* Even when home has closed: it waits for its away count to reach
	 * 0 before it exits, and s is counted there. */
	append_locked(home, &home->in_head, &home->in_tail, s);
	TPE__ASSERT(home->away > 0);
	home->away--;
	set_news_locked(home);
	tpe__mutex_unlock(&home->lock);
}

/* The calls to the next timed one: 1 with TPE_COOP_METRICS_TIME_ALL,
 * else 1 to 2 * TIMING_PERIOD - 1, uniformly (mean TIMING_PERIOD). */
static uint32_t
next_tick(const tpe_coop_t *coop, struct sampler *smp)
{
	uint32_t x = smp->rng;

	if (coop->flags & TPE_COOP_METRICS_TIME_ALL)
		return 1;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	smp->rng = x;
	return 1 + x % (2 * TIMING_PERIOD - 1);
}

static void
sampler_init(const tpe_coop_t *coop, struct sampler *smp, uint32_t seed)
{
	smp->rng = seed * 2654435761u | 1u; /* odd: never 0 */
	smp->tick = next_tick(coop, smp);
}

/* A timed call that took ns: into m's histogram. */
static void
record_call(struct coop_metrics *m, int64_t ns, bool shared)
{
	tpe__hist_record(&m->call_time, ns > 0 ? (uint64_t)ns : 0, shared);
	tpe__metrics_add_any(&m->calls_timed, 1, shared);
}

/* Calls s, counted (and timed) in block m when it is not NULL. */
static inline int
call_slot(const tpe_coop_t *coop, struct coop_metrics *m,
    struct sampler *smp, bool shared, struct slot *s)
{
	int64_t start;
	int r;

	if (m == NULL) /* a dedicated thread without metrics */
		return s->fn(s->ctx);
	if (--smp->tick != 0) {
		r = s->fn(s->ctx);
		tpe__metrics_add_any(&m->calls, 1, shared);
		return r;
	}
	smp->tick = next_tick(coop, smp);
	start = tpe__now_ns();
	r = s->fn(s->ctx);
	record_call(m, tpe__now_ns() - start, shared);
	tpe__metrics_add_any(&m->calls, 1, shared);
	return r;
}

/*
 * One call of each tasklet; true when one of them made progress. Two
 * copies (`metered` is a constant in each: worker_pass, metered_pass), so
 * that a service without metrics runs the loop it had before them.
 */
static inline __attribute__((always_inline)) bool
pass_of(struct worker *w, bool metered)
{
	struct coop_metrics *m = metered ? w->m : NULL;
	struct slot *s, *next;
	struct worker *thief;
	bool progress = false;
	int r;

	for (s = w->head; s != NULL; s = next) {
		next = s->next;
		/* Before the steal mark: a slot of a failed job is not handed
		 * over (it would end on a thread that never called it). */
		if (job_error(s->job) != 0) {
			cancel_slot(w, s);
			progress = true;
			continue;
		}
		/* Pairs with the CAS in steal(). */
		thief = tpe__observe(&s->thief);
		if (thief != NULL) {
			hand_over(w, s, thief);
			continue;
		}
		if (s->last != w)
			adopt(w, s);
		r = metered ? call_slot(w->coop, m, &w->smp, false, s) :
		    s->fn(s->ctx);
		if (r == TPE_MADE_PROGRESS) {
			progress = true;
		} else if (r != TPE_NO_PROGRESS) {
			/* Any other negative value is a broken tasklet. */
			dismiss(w, s, r < 0 ? EINVAL : r);
			progress = true;
			steal(w);
		}
	}
	if (metered) {
		tpe__metrics_add(&m->passes, 1);
		if (!progress)
			tpe__metrics_add(&m->idle_passes, 1);
	}
	return progress;
}

static bool
worker_pass(struct worker *w)
{
	return pass_of(w, false);
}

static bool
metered_pass(struct worker *w)
{
	return pass_of(w, true);
}

/*
 * Destroy: every tasklet w owns ends with ECANCELED (or goes back to its
 * last caller); w takes no more, and waits for the ones it called last
 * that others own, which come back or are adopted.
 */
static void
worker_leave(struct worker *w)
{
	struct slot *s;
	bool done;

	tpe__mutex_lock(&w->lock);
	w->closed = true;
	take_inbox_locked(w);
	tpe__mutex_unlock(&w->lock);
	for (;;) {
		while ((s = w->head) != NULL) {
			job_fail(s->job, ECANCELED);
			cancel_slot(w, s);
		}
		tpe__mutex_lock(&w->lock);
		w->parked = true;
		while (w->in_head == NULL && w->away > 0)
			tpe__cond_wait_until(&w->cond, &w->lock, -1);
		w->parked = false;
		take_inbox_locked(w);
		done = w->head == NULL;
		TPE__ASSERT(!done || w->away == 0);
		tpe__mutex_unlock(&w->lock);
		if (done)
			break;
	}
}

static bool
stopping(tpe_coop_t *coop)
{
	/* Pairs with the store in tpe_coop_destroy (made under coop->lock,
	 * before the wake-ups that make each worker look). */
	return tpe__observe(&coop->stopping);
}

/* Names the calling thread "<name>-<tag><id>" (tpe__thread_set_name cuts
 * it to Linux's 15 characters, and does nothing where names are missing). */
static void
set_thread_name(const tpe_coop_t *coop, const char *tag, size_t id)
{
	char name[48];

	snprintf(name, sizeof(name), "%s-%s%zu", coop->name, tag, id);
	tpe__thread_set_name(name);
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;

	set_thread_name(w->coop, "", w->id);
	tls_worker = w;
	for (;;) {
		/* Relaxed: set_news_locked's store; acted on under the lock. */
		if (tpe__hint_load(&w->news)) {
			tpe__mutex_lock(&w->lock);
			take_inbox_locked(w);
			tpe__mutex_unlock(&w->lock);
		}
		if (stopping(w->coop))
			break;
		if (w->head == NULL) {
			w->idle = 0;
			park(w, -1);
			continue;
		}
		if (w->m == NULL ? worker_pass(w) : metered_pass(w))
			w->idle = 0;
		else
			idle(w);
	}
	worker_leave(w);
	return NULL;
}

/* ---- blocking tasklets ------------------------------------------------- */

/* The calling dedicated thread (record d) is about to return: it goes on
 * the dead list, for the next submit or destroy to join. */
static void
blocking_gone(tpe_coop_t *coop, struct dedicated *d)
{
	tpe__mutex_lock(&coop->lock);
	d->next = coop->dead;
	coop->dead = d;
	if (--coop->blocking == 0)
		tpe__cond_broadcast(&coop->cond);
	tpe__mutex_unlock(&coop->lock);
}

/* Joins the dedicated threads on the dead list and frees their records. */
static void
reap(tpe_coop_t *coop)
{
	struct dedicated *d, *next;

	tpe__mutex_lock(&coop->lock);
	d = coop->dead;
	coop->dead = NULL;
	tpe__mutex_unlock(&coop->lock);
	for (; d != NULL; d = next) {
		/* Each has left every lock; it only returns. */
		int rc = pthread_join(d->thread, NULL);

		if (rc != 0)
			tpe__panic("pthread_join", rc);
		next = d->next;
		free(d);
	}
}

static void *
blocking_main(void *arg)
{
	struct dedicated *d = arg;
	struct slot *s = d->slot;
	struct tpe_job *job = s->job;
	tpe_coop_t *coop = job->coop;
	struct coop_metrics *m = NULL;
	struct sampler smp = { 0, 0 };
	uint64_t idle_passes = 0;
	bool aborted;
	int64_t ns;
	int r;

	tpe__mutex_lock(&job->lock);
	while (!job->go)
		tpe__cond_wait_until(&job->cond, &job->lock, -1);
	aborted = job->aborted;
	tpe__mutex_unlock(&job->lock);
	if (aborted) {
		/* Submit failed: it waits for this thread, then frees the
		 * job. Counted out of the service first, so that submit
		 * returns with no thread of the job left counted. */
		blocking_gone(coop, d);
		tpe__mutex_lock(&job->lock);
		if (--job->waiting_threads == 0)
			tpe__cond_broadcast(&job->cond);
		tpe__mutex_unlock(&job->lock);
		return NULL;
	}
	set_thread_name(coop, "b", (size_t)(s - job->slots));
	tls_slot = s;
	if (coop->metrics != NULL) {
		m = &coop->metrics[coop->n];
		/* A seed of its own: the slot's address. */
		sampler_init(coop, &smp, (uint32_t)((uintptr_t)s >> 4));
	}
	for (;;) {
		if (job_error(job) != 0 || stopping(coop)) {
			r = ECANCELED;
			break;
		}
		r = call_slot(coop, m, &smp, true, s);
		if (r == TPE_MADE_PROGRESS) {
			idle_passes = 0;
		} else if (r == TPE_NO_PROGRESS) {
			/* The same backoff; a nanosleep bounded by
			 * max_park_ns, so a cancel is seen within it. */
			if (idle_passes < UINT64_MAX)
				idle_passes++;
			ns = idle_backoff(idle_passes, coop->max_park_ns,
			    false);
			if (ns != 0)
				tpe__sleep_ns(ns);
		} else {
			if (r < 0)
				r = EINVAL;
			break;
		}
	}
	tls_slot = NULL;
	slot_end(s, r);
	blocking_gone(coop, d);
	return NULL;
}

/* ---- the service ------------------------------------------------------- */

/* The most workers a service may have (a bad value, not a resource). */
#define MAX_THREADS 4096

/* Whether the calling thread waiting for job could wait for itself: it is
 * a worker of the job's service, or the dedicated thread of one of the
 * job's tasklets. */
static bool
waits_for_itself(const struct tpe_job *job)
{
	return (tls_worker != NULL && tls_worker->coop == job->coop) ||
	    (tls_slot != NULL && tls_slot->job == job);
}

static size_t
min_size(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* Stops and joins the first `started` workers, frees coop. */
static void
coop_free(tpe_coop_t *coop, size_t started)
{
	size_t i;

	tpe__mutex_lock(&coop->lock);
	/* Pairs with the acquire load in stopping(). */
	tpe__publish(&coop->stopping, true);
	tpe__mutex_unlock(&coop->lock);
	for (i = 0; i < started; i++)
		wake(&coop->workers[i]);
	for (i = 0; i < started; i++) {
		int rc = pthread_join(coop->workers[i].thread, NULL);

		if (rc != 0)
			tpe__panic("pthread_join", rc);
	}
	tpe__mutex_lock(&coop->lock);
	while (coop->blocking > 0)
		tpe__cond_wait_until(&coop->cond, &coop->lock, -1);
	tpe__mutex_unlock(&coop->lock);
	reap(coop);
	for (i = 0; i < coop->n; i++) {
		tpe__cond_destroy(&coop->workers[i].cond);
		tpe__mutex_destroy(&coop->workers[i].lock);
	}
	tpe__cond_destroy(&coop->cond);
	tpe__mutex_destroy(&coop->lock);
	free(coop->workers);
	free(coop->metrics);
	free(coop);
}

int
tpe_coop_create(tpe_coop_t **coopp, const struct tpe_coop_config *config,
    size_t config_size)
{
	struct tpe_coop_config c = { 0 };
	tpe_coop_t *coop;
	size_t i;
	int rc;

	if (coopp == NULL)
		return EINVAL;
	if (config != NULL) {
		/* The first version's fields are the least a caller has;
		 * fields past config_size keep their defaults (0). */
		if (config_size < TPE__COOP_CONFIG_MIN)
			return EINVAL;
		memcpy(&c, config, min_size(config_size, sizeof(c)));
	}
	if (c.max_park_ns < 0 || (c.flags & ~(TPE_COOP_NO_STEALING |
	    TPE_COOP_METRICS | TPE_COOP_METRICS_TIME_ALL)) != 0 ||
	    ((c.flags & TPE_COOP_METRICS_TIME_ALL) &&
	    !(c.flags & TPE_COOP_METRICS)) || c.threads > MAX_THREADS)
		return EINVAL;
	coop = calloc(1, sizeof(*coop));
	if (coop == NULL)
		return ENOMEM;
	coop->n = c.threads != 0 ? c.threads : tpe__cpu_count();
	coop->max_park_ns = c.max_park_ns != 0 ? c.max_park_ns :
	    DEFAULT_MAX_PARK_NS;
	coop->flags = c.flags;
	/* Room for "-<worker number>" in a 15-character thread name. */
	snprintf(coop->name, 11, "%s",
	    c.thread_name != NULL ? c.thread_name : DEFAULT_NAME);
	coop->workers = calloc(coop->n, sizeof(*coop->workers));
	if (coop->workers == NULL) {
		free(coop);
		return ENOMEM;
	}
	if ((c.flags & TPE_COOP_METRICS) != 0) {
		void *p;

		/* Cache-line aligned blocks: no two workers share a line. */
		/* n workers' and the dedicated threads' (the last). */
		if (posix_memalign(&p, TPE__CACHE_LINE,
		    (coop->n + 1) * sizeof(*coop->metrics)) != 0) {
			free(coop->workers);
			free(coop);
			return ENOMEM;
		}
		memset(p, 0, (coop->n + 1) * sizeof(*coop->metrics));
		coop->metrics = p;
	}
	tpe__mutex_init_ranked(&coop->lock, TPE__RANK_COOP);
	tpe__cond_init(&coop->cond);
	for (i = 0; i < coop->n; i++) {
		struct worker *w = &coop->workers[i];

		w->coop = coop;
		w->id = i;
		if (coop->metrics != NULL) {
			w->m = &coop->metrics[i];
			sampler_init(coop, &w->smp, (uint32_t)i + 1);
		}
		tpe__mutex_init_ranked(&w->lock, TPE__RANK_COOP_WORKER);
		tpe__cond_init(&w->cond);
	}
	for (i = 0; i < coop->n; i++) {
		rc = tpe__thread_create(&coop->workers[i].thread, NULL,
		    worker_main, &coop->workers[i]);
		if (rc != 0) {
			coop_free(coop, i);
			return EAGAIN;
		}
	}
	*coopp = coop;
	return 0;
}

/* Undoes a submit whose threads [started] wait at the gate: they leave
 * without calling anything; then the job is freed. */
static void
job_abort(struct tpe_job *job)
{
	tpe__mutex_lock(&job->lock);
	job->aborted = true;
	job->go = true;
	tpe__cond_broadcast(&job->cond);
	while (job->waiting_threads > 0)
		tpe__cond_wait_until(&job->cond, &job->lock, -1);
	tpe__mutex_unlock(&job->lock);
	tpe__cond_destroy(&job->cond);
	tpe__mutex_destroy(&job->lock);
	free(job);
}

/* Starts the dedicated threads of job's blocking tasklets; they wait at
 * the gate. 0, ENOMEM (no record for one), or EAGAIN when one could not
 * start. */
static int
start_blocking_locked(tpe_coop_t *coop, struct tpe_job *job)
{
	struct dedicated *d;
	size_t i;
	int rc = 0;

	TPE__ASSERT_HELD(&coop->lock);
	for (i = 0; i < job->n && rc == 0; i++) {
		if (!(job->slots[i].flags & TPE_TASKLET_BLOCKING))
			continue;
		if ((d = calloc(1, sizeof(*d))) == NULL)
			return ENOMEM;
		d->slot = &job->slots[i];
		tpe__mutex_lock(&job->lock);
		job->waiting_threads++;
		tpe__mutex_unlock(&job->lock);
		/* Joinable: joined from the dead list (reap). */
		rc = tpe__thread_create(&d->thread, NULL, blocking_main, d);
		if (rc == 0) {
			coop->blocking++;
			continue;
		}
		free(d);
		tpe__mutex_lock(&job->lock);
		job->waiting_threads--;
		tpe__mutex_unlock(&job->lock);
	}
	return rc == 0 ? 0 : EAGAIN;
}

/* Hands the cooperative slots to the workers, round robin from coop->rr,
 * each worker's share in one inbox push (so they start in one pass). */
static void
spread_locked(tpe_coop_t *coop, struct tpe_job *job)
{
	size_t i, j, k, start = coop->rr, ncoop = 0;

	TPE__ASSERT_HELD(&coop->lock);
	for (j = 0; j < coop->n; j++) {
		struct worker *w = &coop->workers[(start + j) % coop->n];
		bool locked = false;

		for (i = 0, k = 0; i < job->n; i++) {
			if (job->slots[i].flags & TPE_TASKLET_BLOCKING)
				continue;
			if (k++ % coop->n != j)
				continue;
			if (!locked) {
				tpe__mutex_lock(&w->lock);
				locked = true;
			}
			/* No worker leaves before stopping is set, under
			 * coop->lock, which the caller holds. */
			if (!inbox_push_locked(w, &job->slots[i]))
				TPE__DIE("worker %zu closed while running", j);
		}
		if (locked)
			tpe__mutex_unlock(&w->lock);
		ncoop = k;
	}
	coop->rr = (start + ncoop) % coop->n;
}

int
tpe_coop_submit(tpe_coop_t *coop, const struct tpe_tasklet *tasklets,
    size_t n, size_t tasklet_size, tpe_job_t **jobp)
{
	struct tpe_job *job;
	size_t i;
	int rc;

	if (coop == NULL || tasklets == NULL || jobp == NULL || n == 0 ||
	    tasklet_size < TPE__TASKLET_MIN)
		return EINVAL;
	for (i = 0; i < n; i++) {
		struct tpe_tasklet t = { 0 };

		memcpy(&t, (const char *)tasklets + i * tasklet_size,
		    min_size(tasklet_size, sizeof(t)));
		if (t.fn == NULL || (t.flags & ~TPE_TASKLET_BLOCKING) != 0)
			return EINVAL;
	}
	if (n > (SIZE_MAX - sizeof(*job)) / sizeof(struct slot))
		return ENOMEM;
	job = calloc(1, sizeof(*job) + n * sizeof(struct slot));
	if (job == NULL)
		return ENOMEM;
	job->coop = coop;
	job->n = n;
	job->remaining = n;
	job->refs = 2;
	tpe__mutex_init_ranked(&job->lock, TPE__RANK_COOP_JOB);
	tpe__cond_init(&job->cond);
	for (i = 0; i < n; i++) {
		struct tpe_tasklet t = { 0 };

		memcpy(&t, (const char *)tasklets + i * tasklet_size,
		    min_size(tasklet_size, sizeof(t)));
		job->slots[i].fn = t.fn;
		job->slots[i].ctx = t.ctx;
		job->slots[i].end = t.end;
		job->slots[i].flags = t.flags;
		job->slots[i].job = job;
	}

	/* The dedicated threads that ended since the last call. */
	reap(coop);
	tpe__mutex_lock(&coop->lock);
	if (coop->stopping) {
		tpe__mutex_unlock(&coop->lock);
		job_abort(job);
		return ECANCELED;
	}
	if ((rc = start_blocking_locked(coop, job)) != 0) {
		/* The started threads end through blocking_gone, which
		 * takes coop->lock; once job_abort has seen them all leave,
		 * they are on the dead list. */
		tpe__mutex_unlock(&coop->lock);
		job_abort(job);
		reap(coop);
		return rc;
	}
	spread_locked(coop, job);
	tpe__mutex_lock(&job->lock);
	job->go = true;
	tpe__cond_broadcast(&job->cond);
	tpe__mutex_unlock(&job->lock);
	tpe__mutex_unlock(&coop->lock);
	*jobp = job;
	return 0;
}

/*
 * Waits for job's completion: 0 with its result in *result, ETIMEDOUT
 * (nothing written), or EDEADLK from a thread the job may need.
 */
static int
job_wait(tpe_job_t *job, int64_t timeout_ns, int *result)
{
	int64_t deadline;
	int rc = 0;

	deadline = tpe__deadline(timeout_ns);
	tpe__mutex_lock(&job->lock);
	if (!job->done && timeout_ns != 0 && waits_for_itself(job)) {
		tpe__mutex_unlock(&job->lock);
		return EDEADLK;
	}
	while (!job->done &&
	    tpe__cond_wait_until(&job->cond, &job->lock, deadline) == 0)
		;
	if (job->done)
		*result = job->result;
	else
		rc = ETIMEDOUT;
	tpe__mutex_unlock(&job->lock);
	return rc;
}

int
tpe_job_wait(tpe_job_t *job, int64_t timeout_ns)
{
	int result, rc;

	if (job == NULL)
		return EINVAL;
	rc = job_wait(job, timeout_ns, &result);
	return rc == 0 ? result : rc;
}

int
tpe_job_wait_result(tpe_job_t *job, int64_t timeout_ns, int *result)
{
	if (job == NULL || result == NULL)
		return EINVAL;
	return job_wait(job, timeout_ns, result);
}

int
tpe_job_cancel(tpe_job_t *job)
{
	if (job == NULL)
		return EINVAL;
	tpe__mutex_lock(&job->lock);
	/* remaining == 0: the last tasklet has ended and its thread is on
	 * its way to complete the job (slot_end): too late to cancel. */
	if (job->done || tpe__observe(&job->remaining) == 0) {
		tpe__mutex_unlock(&job->lock);
		return 0;
	}
	job_fail(job, ECANCELED);
	/* The job is not done and cannot complete while this thread holds
	 * its lock, so its service still exists (destroy ends every job
	 * before it frees). */
	wake_all(job->coop);
	if (!waits_for_itself(job))
		while (!job->done)
			tpe__cond_wait_until(&job->cond, &job->lock, -1);
	tpe__mutex_unlock(&job->lock);
	return 0;
}

void
tpe_job_release(tpe_job_t *job)
{
	if (job != NULL)
		job_unref(job);
}

int
tpe_coop_destroy(tpe_coop_t *coop)
{
	if (coop == NULL)
		return EINVAL;
	if ((tls_worker != NULL && tls_worker->coop == coop) ||
	    (tls_slot != NULL && tls_slot->job->coop == coop))
		return EDEADLK;
	coop_free(coop, coop->n);
	return 0;
}

size_t
tpe__coop_parked_forever(tpe_coop_t *coop)
{
	/* Pairs with the updates in park(). */
	return tpe__dekker_load(&coop->parked_forever);
}

uint64_t
tpe__coop_wakeups(tpe_coop_t *coop)
{
	return tpe__counter_read(&coop->wakeups);
}

uint64_t
tpe__coop_park_timeouts(tpe_coop_t *coop)
{
	return tpe__counter_read(&coop->timeouts);
}

size_t
tpe__coop_blocking_threads(tpe_coop_t *coop)
{
	size_t n;

	tpe__mutex_lock(&coop->lock);
	n = coop->blocking;
	tpe__mutex_unlock(&coop->lock);
	return n;
}

/* ---- metrics ----------------------------------------------------------- */

#define END(m) TPE__END_OF(struct tpe_coop_metrics, m)
static const size_t coop_metrics_ends[] = {
	END(calls), END(calls_timed), END(passes), END(idle_passes),
	END(parks), END(timing_period), END(call_time),
};
_Static_assert(END(call_time) == sizeof(struct tpe_coop_metrics),
    "coop_metrics_ends lists every member");
#undef END
static const struct tpe__sized coop_metrics_layout = {
	sizeof(struct tpe_coop_metrics), coop_metrics_ends,
	sizeof(coop_metrics_ends) / sizeof(coop_metrics_ends[0])
};

/* Adds one worker's block to *out: relaxed loads of words that one
 * writer stores (the design notes). */
static void
merge(struct tpe_coop_metrics *out, const struct coop_metrics *m)
{
	out->calls += tpe__hint_load(&m->calls);
	out->calls_timed += tpe__hint_load(&m->calls_timed);
	out->passes += tpe__hint_load(&m->passes);
	out->idle_passes += tpe__hint_load(&m->idle_passes);
	out->parks += tpe__hint_load(&m->parks);
	tpe__hist_sum(&out->call_time, &m->call_time);
}

int
tpe_coop_get_metrics(const tpe_coop_t *coop, struct tpe_coop_metrics *metrics,
    size_t size)
{
	struct tpe_coop_metrics *snap;
	size_t i;

	if (coop == NULL ||
	    tpe__sized_check(&coop_metrics_layout, metrics, size) != 0)
		return EINVAL;
	if (coop->metrics == NULL)
		return ENOTSUP;
	/* About 9 KiB: not on the stack of a tasklet that asks. */
	snap = tpe__sized_out_begin(&coop_metrics_layout, metrics, size);
	if (snap == NULL)
		return ENOMEM;
	for (i = 0; i <= coop->n; i++)
		merge(snap, &coop->metrics[i]);
	snap->timing_period = (coop->flags & TPE_COOP_METRICS_TIME_ALL) ? 1 :
	    TIMING_PERIOD;
	tpe__sized_out_end(&coop_metrics_layout, metrics, size, snap);
	return 0;
}
