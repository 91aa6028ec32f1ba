/* SPDX-License-Identifier: MIT */
/*
 * sched.c - delayed and periodic tasks: a binary min-heap of pending tasks
 * per pool, a timer thread that hands due tasks to the pool, and the
 * re-arming of periodic tasks.
 *
 * Design notes
 * ------------
 * Data structure: a binary min-heap of record pointers ordered by (due,
 * seq), each record knowing its index, so schedule, cancel-with-removal
 * and pop are O(log n) and the next due time is heap[0]. A binary heap
 * rather than a hierarchical wheel: exact due times with no tick (no CPU
 * while nothing is due: the timer sleeps until heap[0]'s due time), FIFO
 * for equal due times through seq, 8 bytes of array per pending task, and
 * removal by index; a wheel's O(1) would need a tick or a cascade and
 * cannot order equal due times without extra work. Memory per pending
 * timer beyond the task's future: the record's fields below (48 bytes on
 * LP64) plus one heap slot (8 bytes; the array doubles, so up to 16).
 *
 * Where a due task goes: h->enter(pool, run_task, rec), the engine's
 * submit_wait with timeout 0: the pool's own path on every queue kind and
 * engine (sched calls nothing of the pool but through its hook), which
 * never calls the rejection policy (so caller-runs never runs user code
 * on this thread). Refused for saturation (or ENOMEM), or ECANCELED by a
 * pool that stopped before this scheduler's shutdown_now hook, the record
 * goes back to the heap with its due time and seq, still first, and the
 * timer offers it again after RETRY_NS (the hook, which waits until the
 * timer holds nothing, then takes it). The pool's discard callback is
 * tpe__sched_discard (pool.c installs it), so a queued run_task the pool
 * drops reaches the user as the user's pair.
 *
 * A record (struct sched_task) begins with its future, so it lives as
 * long as the future's references: the scheduler's (held from schedule to
 * "finish") and the caller's (tpe_future_release). The future's state is
 * the task's: NEW while it may still run, RUNNING/DONE for a one-shot that
 * started, CANCELLED. A periodic task's future stays NEW between runs and
 * ends only CANCELLED.
 *
 * Where a record is: in the heap (idx != NOT_IN_HEAP), or taken by the
 * timer (about to enter the pool, or to be handed back), or in the pool as
 * a task (run_task, rec), or running. Exactly one of those; whoever takes
 * it from the heap owns it until it puts it back or finishes it. finish()
 * hands a cancelled record's argument to a callback, once, and drops the
 * scheduler's reference.
 *
 * Lifecycle of the scheduler: created by the first schedule on the pool
 * (its timer thread with it) unless a shutdown came first (close_hook:
 * then the pool never gets one). tpe_shutdown's hook sets `shutdown`
 * (under S, before the pool leaves RUNNING), waits until the timer holds
 * nothing, and hands back what the flags drop (keep_at_shutdown). What
 * stays is what the timer owes the pool: Java keeps its workers for the
 * delay queue after shutdown, and a due task enters as any task. So the
 * timer goes on after shutdown and enters due tasks through the same
 * h->enter, which a SHUTDOWN pool still admits for the scheduler's tasks
 * (tpe__sched_admits: the path shutdown does not close); task hooks,
 * statistics, purge and hand-back see them as before shutdown. While it
 * owes anything (h->owes: a record in the heap or held by the timer, after
 * shutdown and before stop) the pool does not terminate; when that ends,
 * h->settle lets it (unlock_settle). tpe_shutdown_now's hook, which the
 * pool calls once it is STOP, sets `stop`: every pending record is handed
 * back, the timer leaves its loop.
 *
 * Lock: s->lock (rank SCHED, a leaf: no other lock of the library is taken
 * while it is held; the pool is never called and no user code runs under
 * it). Legend: base/sync.h; "S" below means s->lock.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/fork.h"
#include "base/sync.h"
#include "pool/future.h"
#include "sched/sched.h"

#define NOT_IN_HEAP SIZE_MAX
#define RETRY_NS INT64_C(1000000) /* a refused due task is offered again */
/* h->s after a shutdown found no scheduler: none is made any more. */
#define SCHED_CLOSED (&closed_sched)

struct sched_task {
	struct tpe_future f;   /* first: freed with the future (future.h) */
	tpe_fn fn;             /* I: NULL for a tpe_schedule_call task */
	void *arg;             /* I: the user's argument */
	int64_t due;           /* S; A: read by tpe_future_get_delay */
	int64_t period;        /* I: > 0 fixed rate, < 0 fixed delay, 0 once */
	uint64_t seq;          /* S: FIFO among equal due times */
	int priority;          /* I: its queue priority in the pool */
	size_t idx;            /* S: heap index, or NOT_IN_HEAP */
	/* The scheduler is f.sched's: &s->fops while it holds the record,
	 * &released_ops once it let go (release_record), so that a later
	 * cancel never touches a freed scheduler (rec_sched). */
};

struct tpe__sched {
	struct tpe__future_sched fops; /* I: its records' f.sched */
	struct tpe__mutex lock;
	pthread_cond_t timer_cond;   /* W: the timer thread waits here */
	pthread_cond_t idle_cond;    /* W: shutdown hooks wait for !busy */
	struct sched_task **heap;    /* S */
	size_t n, cap;               /* S */
	uint64_t next_seq;           /* S */
	bool shutdown;               /* S, A: no new schedules; what stays
				      * is owed to the pool; read by
				      * run_task without S */
	bool stop;                   /* S, A: shutdown_now: nothing runs any
				      * more, the timer leaves; read by
				      * run_task without S */
	bool busy;                   /* S: the timer holds a record outside
				      * S: entering the pool, or handing it
				      * back (the shutdown hooks wait, so
				      * that the pool terminates after) */
	bool quit;                   /* S: the timer thread must leave */
	bool live;                   /* S: published in the hook (get_sched
				      * won its CAS); until then the timer
				      * waits and touches nothing the hook
				      * shares: a scheduler that lost the
				      * race is stopped unseen */
	pthread_t thread;            /* I */
	struct tpe__sched_hook *h;   /* I */
	unsigned fork_gen;           /* I */
};

int64_t (*tpe__sched_clock_hook)(void);
void (*tpe__sched_timer_hook)(bool holding);
void (*tpe__sched_made_hook)(bool started);

static const struct tpe__future_sched sched_future_ops, released_ops;
static struct tpe__sched closed_sched; /* only its address is used */
static struct tpe__sched *hook_sched(const struct tpe__sched_hook *h);

/* ---- the heap (S held) ------------------------------------------------ */

static bool
before(const struct sched_task *a, const struct sched_task *b)
{
	return a->due < b->due || (a->due == b->due && a->seq < b->seq);
}

static void
place(struct tpe__sched *s, size_t i, struct sched_task *r)
{
	s->heap[i] = r;
	r->idx = i;
}

static void
sift_up(struct tpe__sched *s, size_t i, struct sched_task *r)
{
	while (i > 0) {
		size_t p = (i - 1) / 2;

		if (!before(r, s->heap[p]))
			break;
		place(s, i, s->heap[p]);
		i = p;
	}
	place(s, i, r);
}

static void
sift_down(struct tpe__sched *s, size_t i, struct sched_task *r)
{
	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= s->n)
			break;
		if (c + 1 < s->n && before(s->heap[c + 1], s->heap[c]))
			c++;
		if (!before(s->heap[c], r))
			break;
		place(s, i, s->heap[c]);
		i = c;
	}
	place(s, i, r);
}

/* 0 or ENOMEM (the heap is unchanged). */
static int
heap_reserve_locked(struct tpe__sched *s)
{
	struct sched_task **nh;
	size_t cap;

	/* Room for one more besides the record the timer holds (busy),
	 * out of the heap meanwhile: a refused one goes back in, and a
	 * schedule made in between must not have taken its place. */
	if (s->n + (s->busy ? 1 : 0) < s->cap)
		return 0;
	cap = s->cap == 0 ? 16 : s->cap * 2;
	nh = realloc(s->heap, cap * sizeof(*nh));
	if (nh == NULL)
		return ENOMEM;
	s->heap = nh;
	s->cap = cap;
	return 0;
}

/* Room must have been reserved. */
static void
heap_push_locked(struct tpe__sched *s, struct sched_task *r)
{
	TPE__ASSERT_HELD(&s->lock);
	TPE__ASSERT(s->n < s->cap);
	s->n++;
	sift_up(s, s->n - 1, r);
}

static void
heap_remove_locked(struct tpe__sched *s, struct sched_task *r)
{
	size_t i = r->idx;
	struct sched_task *last;

	TPE__ASSERT_HELD(&s->lock);
	TPE__ASSERT(i < s->n && s->heap[i] == r);
	r->idx = NOT_IN_HEAP;
	last = s->heap[--s->n];
	if (i == s->n)
		return;
	if (i > 0 && before(last, s->heap[(i - 1) / 2]))
		sift_up(s, i, last);
	else
		sift_down(s, i, last);
}

static void
set_due(struct sched_task *r, int64_t due)
{
	/* Pairs with the relaxed load in get_delay (a snapshot). */
	__atomic_store_n(&r->due, due, __ATOMIC_RELAXED);
}

static int64_t
add_sat(int64_t a, int64_t b)
{
	if (b > 0 && a > INT64_MAX - b)
		return INT64_MAX;
	return a + b;
}

/* Wakes the timer, which waits for heap[0]. */
static void
wake_locked(struct tpe__sched *s)
{
	TPE__ASSERT_HELD(&s->lock);
	tpe__cond_signal(&s->timer_cond);
}

/*
 * Updates h->owes (S held): after shutdown and before stop, whether a
 * record is in the heap or held by the timer, i.e. must still enter the
 * pool. True when that just ended: the caller tells the pool, S dropped
 * (h->settle), which may terminate now. The store is a release, pairing
 * with the acquire load in tpe__sched_owes (the pool's termination check,
 * under pool->lock); a check that read true before this store is followed
 * by the settle, which checks again under pool->lock.
 */
static bool
owes_locked(struct tpe__sched *s)
{
	struct tpe__sched_hook *h = s->h;
	bool owes = s->shutdown && !s->stop && (s->n > 0 || s->busy);
	bool was = h->owes; /* only written under S */

	TPE__ASSERT_HELD(&s->lock);
	if (owes != was)
		__atomic_store_n(&h->owes, owes, __ATOMIC_RELEASE);
	return was && !owes;
}

/* Unlocks S; tells the pool when the scheduler's debt just ended, or
 * when `left` (a task that may have been due left the timer: the pool's
 * idle waiters look again, tpe__sched_due). */
static void
unlock_settle(struct tpe__sched *s, bool left)
{
	bool ended = owes_locked(s);

	tpe__mutex_unlock(&s->lock);
	if (ended)
		s->h->settle(s->h->pool);
	else if (left)
		s->h->look_again(s->h->pool);
}

/* The scheduler's clock: CLOCK_MONOTONIC, or the tests' (sched.h). */
static int64_t
sched_now(void)
{
	int64_t (*clock)(void) = __atomic_load_n(&tpe__sched_clock_hook,
	    __ATOMIC_RELAXED);

	return clock != NULL ? clock() : tpe__now_ns();
}

/* Sets shutdown or stop (S held): release, pairing with the acquire load
 * in periodic_stopped. */
static void
set_flag_locked(struct tpe__sched *s, bool *flag)
{
	TPE__ASSERT_HELD(&s->lock);
	__atomic_store_n(flag, true, __ATOMIC_RELEASE);
}

/* Whether a periodic task must not start another run: shutdown without
 * CONTINUE_PERIODIC, or shutdown_now. Without S (a hint that becomes
 * exact under S at the re-arm). */
static bool
periodic_stopped(const struct tpe__sched *s)
{
	/* Pairs with set_flag_locked. */
	return __atomic_load_n(&s->stop, __ATOMIC_ACQUIRE) ||
	    (__atomic_load_n(&s->shutdown, __ATOMIC_ACQUIRE) &&
	    (s->h->flags & TPE_SCHED_CONTINUE_PERIODIC_AFTER_SHUTDOWN) == 0);
}

/* ---- a record's end ---------------------------------------------------- */

/* r's scheduler, or NULL once it let go of r (release_record). */
static struct tpe__sched *
rec_sched(const struct sched_task *r)
{
	/* Acquire: pairs with the release stores in schedule and
	 * release_record. */
	const struct tpe__future_sched *o = __atomic_load_n(&r->f.sched,
	    __ATOMIC_ACQUIRE);

	if (o == &released_ops)
		return NULL;
	return (struct tpe__sched *)(void *)((char *)(uintptr_t)o -
	    offsetof(struct tpe__sched, fops));
}

/* Marks r let go by its scheduler: a cancel from now on touches only r. */
static void
let_go(struct sched_task *r)
{
	/* Release: pairs with rec_sched and future.c's loads. */
	__atomic_store_n(&r->f.sched, &released_ops, __ATOMIC_RELEASE);
}

/* Drops the scheduler's reference to r (let go first). */
static void
release_record(struct sched_task *r)
{
	let_go(r);
	tpe__future_unref(&r->f);
}

/*
 * Ends the scheduler's ownership of r, which is in no heap and will not
 * run again: cancels its future (a no-op if it ran) and, when it was
 * cancelled, hands its argument to cb (fn NULL for a call task). No lock
 * held. False: forked in cb, touch nothing.
 */
static bool
finish(struct sched_task *r, tpe_handback_fn cb, void *ctx)
{
	unsigned gen = tpe__fork_gen();

	tpe__future_cancel(&r->f);
	if (cb != NULL &&
	    __atomic_load_n(&r->f.state, __ATOMIC_ACQUIRE) == TPE__F_CANCELLED) {
		cb(r->fn, r->arg, ctx);
		if (tpe__forked_since(gen))
			return false;
	}
	release_record(r);
	return true;
}

static bool
discard(struct sched_task *r)
{
	const struct tpe__sched_hook *h = rec_sched(r)->h;

	return finish(r, h->discard, h->discard_ctx);
}

/* ---- running a task on a worker -------------------------------------- */

static void *
run_plain(void *arg)
{
	struct sched_task *r = arg;

	r->fn(r->arg);
	return NULL;
}

static void run_task(void *arg);

/* The record tpe__sched_begin decided to run on this thread, until its
 * run_task (a worker runs one task at a time). */
static TPE__TLS struct sched_task *tls_begun;

const tpe_fn tpe__sched_task_fn = run_task;

bool
tpe__sched_begin(void *arg, tpe_fn *fn, void **user_arg)
{
	struct sched_task *r = arg;

	if (r->period == 0 ? !tpe__future_start(&r->f) :
	    !tpe__future_is_new(&r->f) || periodic_stopped(rec_sched(r)))
		return false; /* run_task hands it back */
	tls_begun = r;
	*fn = r->fn;
	*user_arg = r->arg;
	return true;
}

/* The task the pool runs for a due record. */
static void
run_task(void *arg)
{
	struct sched_task *r = arg;
	struct tpe__sched *s = rec_sched(r);
	unsigned gen = tpe__fork_gen();
	bool again;
	/* Decided by tpe__sched_begin (the hooks ran): it runs. */
	bool begun = tls_begun == r;

	tls_begun = NULL;
	if (r->period == 0) {
		/* One-shot: the future's rule (NEW -> RUNNING, or cancelled). */
		enum tpe__future_run_result rr = begun ?
		    tpe__future_run_started(&r->f) : tpe__future_run(&r->f);

		if (rr == TPE__FORKED)
			return;
		if (rr == TPE__NOT_RUN)
			(void)discard(r);
		else
			release_record(r);
		return;
	}
	/* A run already handed to the pool when the pool was shut down does
	 * not start (Java cancels the periodic tasks in its queue). */
	if (!begun && (!tpe__future_is_new(&r->f) || periodic_stopped(s))) {
		(void)discard(r);
		return;
	}
	if (r->period > 0)
		set_due(r, add_sat(r->due, r->period));
	r->fn(r->arg);
	if (tpe__forked_since(gen))
		return;
	tpe__mutex_lock(&s->lock);
	again = tpe__future_is_new(&r->f) && !s->stop &&
	    (!s->shutdown ||
	    (s->h->flags & TPE_SCHED_CONTINUE_PERIODIC_AFTER_SHUTDOWN) != 0) &&
	    heap_reserve_locked(s) == 0;
	if (again) {
		if (r->period < 0)
			set_due(r, add_sat(sched_now(), -r->period));
		r->seq = s->next_seq++;
		heap_push_locked(s, r);
		wake_locked(s);
	}
	/* Owed again after shutdown (CONTINUE_PERIODIC): stored before this
	 * worker goes back to its pool, which therefore cannot terminate in
	 * between (the run holds it). */
	unlock_settle(s, false);
	if (!again)
		(void)discard(r);
}

/* ---- the timer thread -------------------------------------------------- */

/* A shutdown hook waits until the timer holds no record (S held); not on
 * the timer thread itself (a discard callback that shuts the pool down). */
static void
wait_not_busy_locked(struct tpe__sched *s)
{
	TPE__ASSERT_HELD(&s->lock);
	if (pthread_equal(pthread_self(), s->thread))
		return;
	while (s->busy)
		tpe__cond_wait_until(&s->idle_cond, &s->lock, INT64_MAX);
}

/*
 * The timer hands r (out of the heap) back through the discard callback,
 * S dropped meanwhile and `busy` set: a shutdown hook waits for it, so
 * that no hand-back runs after the pool has terminated. S held on entry
 * and, when it returns true, on return; false: forked in the callback.
 */
static bool
hand_back_busy_locked(struct tpe__sched *s, struct sched_task *r)
{
	s->busy = true;
	tpe__mutex_unlock(&s->lock);
	if (!discard(r))
		return false;
	tpe__mutex_lock(&s->lock);
	s->busy = false;
	tpe__cond_broadcast(&s->idle_cond);
	return true;
}

/* Calls the tests' timer hook (sched.h), if any, S dropped meanwhile. */
static void
timer_hook_locked(struct tpe__sched *s, bool holding)
{
	void (*hook)(bool) = __atomic_load_n(&tpe__sched_timer_hook,
	    __ATOMIC_RELAXED);

	if (hook == NULL)
		return;
	tpe__mutex_unlock(&s->lock);
	hook(holding);
	tpe__mutex_lock(&s->lock);
}

/*
 * The timer thread: sleeps until heap[0] is due, then hands it to the
 * pool; before and after tpe_shutdown alike (Design notes), until
 * tpe_shutdown_now's stop or tpe__sched_destroy's quit.
 */
/*
 * The timer let go of the record it held (in the pool, or back in the
 * heap): not busy any more, so the shutdown hooks waiting for that go on,
 * and the pool's idle waiters look again (tpe__sched_due). Only once the
 * record is where it stays: a hook that saw busy false while the record
 * was in neither place would miss it (a refused one pushed back into the
 * heap after tpe_shutdown_now's hook had emptied it stayed there, counted
 * in the terminated pool's queued; tests/chaos found it). S held, dropped
 * around the pool's call, held again on return.
 */
static void
not_busy_look_again_locked(struct tpe__sched *s)
{
	TPE__ASSERT_HELD(&s->lock);
	s->busy = false;
	tpe__cond_broadcast(&s->idle_cond);
	tpe__mutex_unlock(&s->lock);
	s->h->look_again(s->h->pool);
	tpe__mutex_lock(&s->lock);
}

static void *
timer_main(void *arg)
{
	struct tpe__sched *s = arg;
	int64_t retry_until = 0;
	bool hooked = false;

	tpe__thread_set_name("tpe-timer");
	tpe__mutex_lock(&s->lock);
	/* Not before get_sched published s: a loser of its race runs no
	 * loop, whose owes_locked would store this scheduler's debt (none)
	 * over the winner's in the shared hook, and let a shut-down pool
	 * terminate while the winner still holds tasks it owes. */
	while (!s->live && !s->quit)
		tpe__cond_wait_until(&s->timer_cond, &s->lock, INT64_MAX);
	while (!s->quit && !s->stop) {
		struct sched_task *r;
		int64_t now;
		int rc;

		if (owes_locked(s)) {
			/* Nothing owed any more: the pool may terminate. */
			tpe__mutex_unlock(&s->lock);
			s->h->settle(s->h->pool);
			tpe__mutex_lock(&s->lock);
			continue;
		}
		if (s->n == 0) {
			tpe__cond_wait_until(&s->timer_cond, &s->lock, INT64_MAX);
			continue;
		}
		r = s->heap[0];
		if (!tpe__future_is_new(&r->f)) {
			heap_remove_locked(s, r);
			if (!hand_back_busy_locked(s, r))
				return NULL;
			continue;
		}
		now = sched_now();
		if (r->due > now || retry_until > now) {
			tpe__cond_wait_until(&s->timer_cond, &s->lock,
			    r->due > retry_until ? r->due : retry_until);
			continue;
		}
		if (!hooked) {
			/* heap[0] is due and still in the heap. */
			hooked = true;
			timer_hook_locked(s, false);
			continue;
		}
		hooked = false;
		heap_remove_locked(s, r);
		s->busy = true;
		timer_hook_locked(s, true);
		tpe__mutex_unlock(&s->lock);
		/* Never the rejection policy, never blocking (sched.h). */
		rc = s->h->enter(s->h->pool, run_task, r);
		tpe__mutex_lock(&s->lock);
		if (rc == 0) {
			retry_until = 0;
			not_busy_look_again_locked(s);
			continue;
		}
		if (rc == ENOTSUP || (rc == ENOMEM && s->shutdown)) {
			/* The pool is shut down and its engine takes no task
			 * any more, or no memory could be had for it: to the
			 * discard callback, its future cancelled
			 * (tpe_schedule(3)). A shut-down pool waits for what
			 * the timer owes it, and memory may never come back:
			 * a retry could hold its termination for ever. */
			if (!hand_back_busy_locked(s, r))
				return NULL;
			continue;
		}
		/*
		 * Refused: saturated, no memory, or ECANCELED by a pool that
		 * stopped before this scheduler's shutdown_now hook came,
		 * which takes it from the heap (it waited for !busy). Back
		 * at its place, due, offered again after RETRY_NS.
		 */
		TPE__ASSERT(s->n < s->cap);
		heap_push_locked(s, r);
		retry_until = add_sat(sched_now(), RETRY_NS);
		not_busy_look_again_locked(s);
	}
	tpe__mutex_unlock(&s->lock);
	return NULL;
}

/* ---- creation and the public calls ------------------------------------ */

static void
sched_free(struct tpe__sched *s)
{
	if (!tpe__forked_since(s->fork_gen)) {
		tpe__cond_destroy(&s->timer_cond);
		tpe__cond_destroy(&s->idle_cond);
		tpe__mutex_destroy(&s->lock);
	}
	free(s->heap);
	free(s);
}

static void
stop_thread(struct tpe__sched *s)
{
	tpe__mutex_lock(&s->lock);
	s->quit = true;
	tpe__cond_signal(&s->timer_cond);
	tpe__mutex_unlock(&s->lock);
	pthread_join(s->thread, NULL);
}

/* The pool's scheduler, made with its thread by the first call. */
static int
get_sched(struct tpe__sched_hook *h, struct tpe__sched **sp)
{
	struct tpe__sched *s, *expected = NULL;
	int rc;

	/* Pairs with the release CAS below and close_hook's. */
	s = __atomic_load_n(&h->s, __ATOMIC_ACQUIRE);
	if (s == SCHED_CLOSED)
		return ECANCELED;
	if (s != NULL) {
		*sp = s;
		return 0;
	}
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return ENOMEM;
	tpe__mutex_init_ranked(&s->lock, TPE__RANK_SCHED);
	tpe__cond_init(&s->timer_cond);
	tpe__cond_init(&s->idle_cond);
	s->fops = sched_future_ops;
	s->h = h;
	s->fork_gen = tpe__fork_gen();
	rc = heap_reserve_locked(s); /* not shared yet */
	if (rc == 0 && tpe__sched_made_hook != NULL)
		tpe__sched_made_hook(false);
	if (rc == 0)
		rc = tpe__thread_create(&s->thread, NULL, timer_main, s);
	if (rc == 0 && tpe__sched_made_hook != NULL)
		tpe__sched_made_hook(true);
	if (rc != 0) {
		sched_free(s);
		return rc == ENOMEM ? ENOMEM : EAGAIN;
	}
	if (!__atomic_compare_exchange_n(&h->s, &expected, s, false,
	    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		stop_thread(s);
		sched_free(s);
		if (expected == SCHED_CLOSED)
			return ECANCELED; /* a shutdown came first */
		s = expected;
	} else {
		/* Published: its timer may begin. */
		tpe__mutex_lock(&s->lock);
		s->live = true;
		tpe__cond_signal(&s->timer_cond);
		tpe__mutex_unlock(&s->lock);
	}
	*sp = s;
	return 0;
}

int
tpe__sched_schedule(struct tpe__sched_hook *h, tpe_fn fn, tpe_call_fn call,
    void *arg, int64_t delay_ns, int64_t period, int priority,
    tpe_future_t **future)
{
	struct tpe__sched *s;
	struct sched_task *r;
	int64_t now;
	int rc;

	rc = get_sched(h, &s);
	if (rc != 0)
		return rc;
	r = malloc(sizeof(*r));
	if (r == NULL)
		return ENOMEM;
	/* A call task's future runs the callable on its argument, as
	 * tpe_submit's; a plain task's runs run_plain on the record. */
	tpe__future_init(&r->f, call != NULL ? call : run_plain,
	    call != NULL ? arg : (void *)r);
	r->f.sched = &s->fops; /* not shared yet */
	r->fn = fn;
	r->arg = arg;
	r->period = period;
	r->priority = priority;
	r->idx = NOT_IN_HEAP;
	now = sched_now();
	r->due = delay_ns <= 0 ? now : add_sat(now, delay_ns);
	tpe__mutex_lock(&s->lock);
	rc = s->shutdown ? ECANCELED : heap_reserve_locked(s);
	if (rc == 0) {
		r->seq = s->next_seq++;
		heap_push_locked(s, r);
		if (r->idx == 0)
			wake_locked(s);
	}
	tpe__mutex_unlock(&s->lock);
	if (rc != 0) {
		tpe__future_unref(&r->f);
		tpe__future_unref(&r->f);
		return rc;
	}
	if (future != NULL)
		*future = &r->f;
	else
		tpe__future_unref(&r->f);
	return 0;
}

int
tpe__sched_priority(const void *arg)
{
	return ((const struct sched_task *)arg)->priority;
}

/* ---- the future's side ------------------------------------------------- */

/* After the future went CANCELLED: leaves the heap at once with
 * REMOVE_ON_CANCEL or after shutdown (termination must not wait). */
static void
on_cancel(struct tpe_future *f)
{
	struct sched_task *r = (struct sched_task *)f;
	/* NULL once the scheduler let go of r (it ran, was handed back, or
	 * the pool is gone). A cancel racing tpe_destroy of the pool is not
	 * supported (tpe_schedule(3)). */
	struct tpe__sched *s = rec_sched(r);
	bool removed = false;

	if (s == NULL || tpe__forked_since(s->fork_gen))
		return; /* the child: see hook_sched */
	tpe__mutex_lock(&s->lock);
	if (r->idx != NOT_IN_HEAP &&
	    ((s->h->flags & TPE_SCHED_REMOVE_ON_CANCEL) != 0 || s->shutdown)) {
		/* Only the head's waiter cares: the timer sleeps
		 * until heap[0]'s due time, and a later one leaving changes
		 * nothing for it (waking it on every cancel cost a futex
		 * wake and a lock hand-over per cancel). */
		bool head = r->idx == 0;

		heap_remove_locked(s, r);
		removed = true;
		if (head)
			wake_locked(s);
	}
	/* After shutdown it may have been the last one owed. */
	unlock_settle(s, removed);
	if (removed)
		(void)discard(r);
}

static int64_t
get_delay(const struct tpe_future *f)
{
	const struct sched_task *r = (const struct sched_task *)f;
	int64_t due = __atomic_load_n(&r->due, __ATOMIC_RELAXED);

	if (due == INT64_MAX)
		return INT64_MAX;
	return due - sched_now();
}

static const struct tpe__future_sched sched_future_ops = {
	.on_cancel = on_cancel,
	.get_delay = get_delay,
};

/* A record its scheduler let go of: a cancel has nothing to remove. */
static void
on_cancel_released(struct tpe_future *f)
{
	(void)f;
}

static const struct tpe__future_sched released_ops = {
	.on_cancel = on_cancel_released,
	.get_delay = get_delay,
};

/* ---- the pool's hooks -------------------------------------------------- */

/*
 * The pool's scheduler, or NULL when it has none or when this is the
 * child of a fork(): there the timer thread is gone and s->lock may be
 * held by a parent thread, so the hooks do nothing (the child's pool is
 * terminated already) and tpe__sched_destroy only frees memory.
 */
static struct tpe__sched *
hook_sched(const struct tpe__sched_hook *h)
{
	/* Pairs with get_sched's CAS. */
	struct tpe__sched *s = __atomic_load_n(&h->s, __ATOMIC_ACQUIRE);

	if (s == SCHED_CLOSED || (s != NULL && tpe__forked_since(s->fork_gen)))
		return NULL;
	return s;
}

/*
 * The scheduler a shutdown hook acts on. With none yet, the hook is closed
 * instead (h->s = SCHED_CLOSED), so that none is made after it: the CAS on h->s
 * orders every first schedule against the shutdown, which is what makes
 * "a schedule that returned 0 before tpe_shutdown is seen by its hook"
 * true (a scheduler published after the hook looked would never learn of
 * the shutdown).
 */
static struct tpe__sched *
close_hook(struct tpe__sched_hook *h)
{
	struct tpe__sched *expected = NULL;

	/* Pairs with get_sched's load and CAS. */
	if (__atomic_compare_exchange_n(&h->s, &expected, SCHED_CLOSED, false,
	    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return NULL;
	return hook_sched(h);
}

/* Moves up to max records that must not stay (keep() false) out of the
 * heap into out; S held. Rebuilds the heap. Returns how many. */
static size_t
take_leaving_locked(struct tpe__sched *s, bool (*keep)(struct tpe__sched *,
    struct sched_task *, int64_t), struct sched_task **out, size_t max)
{
	size_t i, k = 0, m = 0;
	int64_t now = sched_now();

	for (i = 0; i < s->n; i++) {
		struct sched_task *r = s->heap[i];

		if (m < max && !keep(s, r, now)) {
			r->idx = NOT_IN_HEAP;
			out[m++] = r;
		} else {
			s->heap[k++] = r;
		}
	}
	s->n = k;
	for (i = s->n / 2; i-- > 0;)
		sift_down(s, i, s->heap[i]);
	for (i = 0; i < s->n; i++)
		s->heap[i]->idx = i;
	return m;
}

static bool
keep_at_shutdown(struct tpe__sched *s, struct sched_task *r, int64_t now)
{
	if (!tpe__future_is_new(&r->f))
		return false;
	if (r->period != 0)
		return (s->h->flags &
		    TPE_SCHED_CONTINUE_PERIODIC_AFTER_SHUTDOWN) != 0;
	return r->due <= now ||
	    (s->h->flags & TPE_SCHED_DROP_DELAYED_AFTER_SHUTDOWN) == 0;
}

static bool
keep_none(struct tpe__sched *s, struct sched_task *r, int64_t now)
{
	(void)s; (void)r; (void)now;
	return false;
}

static bool
keep_uncancelled(struct tpe__sched *s, struct sched_task *r, int64_t now)
{
	(void)s; (void)now;
	return tpe__future_is_new(&r->f);
}

/* Ends every record of out (array of m) through cb. False: forked in
 * cb, touch nothing. */
static bool
finish_all(struct sched_task **out, size_t m, tpe_handback_fn cb, void *ctx)
{
	size_t i;

	for (i = 0; i < m; i++)
		if (!finish(out[i], cb, ctx))
			return false;
	return true;
}

/* Records taken out of the heap a chunk at a time when no array for all
 * of them can be allocated. */
#define TAKE_CHUNK 64

/*
 * Takes every record that keep() says must go out of the heap and ends it
 * through cb (finish): in one array when memory allows, else TAKE_CHUNK at
 * a time from the stack, so that a failed allocation never leaves a
 * record in the timer that had to go. S held on entry and on return,
 * dropped while records end; *count (if given) the number ended. False:
 * forked in cb (S not held, touch nothing).
 */
static bool
take_and_finish_locked(struct tpe__sched *s, bool (*keep)(
    struct tpe__sched *, struct sched_task *, int64_t), tpe_handback_fn cb,
    void *ctx, size_t *count)
{
	struct sched_task *chunk[TAKE_CHUNK], **out;
	size_t m, max;
	bool ok;

	if (count != NULL)
		*count = 0;
	while (s->n > 0) {
		max = s->n;
		out = malloc(max * sizeof(*out));
		if (out == NULL) {
			out = chunk;
			max = TAKE_CHUNK;
		}
		m = take_leaving_locked(s, keep, out, max);
		tpe__mutex_unlock(&s->lock);
		ok = finish_all(out, m, cb, ctx);
		if (out != chunk)
			free(out);
		if (!ok)
			return false;
		tpe__mutex_lock(&s->lock);
		if (count != NULL)
			*count += m;
		if (m < max)
			break; /* every record that must go went */
	}
	return true;
}

void
tpe__sched_shutdown(struct tpe__sched_hook *h)
{
	struct tpe__sched *s = close_hook(h);

	if (s == NULL)
		return;
	tpe__mutex_lock(&s->lock);
	if (s->shutdown) {
		tpe__mutex_unlock(&s->lock);
		return;
	}
	set_flag_locked(s, &s->shutdown);
	wait_not_busy_locked(s);
	if (!take_and_finish_locked(s, keep_at_shutdown, h->discard,
	    h->discard_ctx, NULL))
		return; /* forked in the callback */
	/* What stayed is owed (h->owes set here, before the pool leaves
	 * RUNNING); the timer goes on entering it when due. */
	unlock_settle(s, false);
}

bool
tpe__sched_shutdown_now(struct tpe__sched_hook *h, tpe_handback_fn cb,
    void *ctx)
{
	struct tpe__sched *s = close_hook(h);

	if (s == NULL)
		return true;
	tpe__mutex_lock(&s->lock);
	set_flag_locked(s, &s->shutdown);
	set_flag_locked(s, &s->stop);
	tpe__cond_signal(&s->timer_cond);
	wait_not_busy_locked(s);
	if (!take_and_finish_locked(s, keep_none, cb, ctx, NULL))
		return false; /* forked in the callback */
	unlock_settle(s, false);
	return true;
}

void
tpe__sched_translate(struct tpe__sched_hook *h, struct tpe__task *t)
{
	struct tpe__sched *s = hook_sched(h);
	struct sched_task *r;

	if (s == NULL || t->fn != run_task)
		return;
	r = t->arg;
	tpe__future_cancel(&r->f);
	/* The user's pair; a tpe_schedule_call task's fn is NULL, which
	 * makes the node a future's (node.h): one with none. */
	t->fn = r->fn;
	t->arg = r->arg;
	t->u.future = NULL;
	release_record(r);
}

bool
tpe__sched_dropped(const struct tpe__task *t)
{
	const struct sched_task *r = t->arg;

	if (t->fn != run_task)
		return false;
	if (tpe_future_is_cancelled(&r->f))
		return true;
	return r->period != 0 && periodic_stopped(rec_sched(r));
}

bool
tpe__sched_due(const struct tpe__sched_hook *h)
{
	struct tpe__sched *s = hook_sched(h);
	bool due;

	if (s == NULL)
		return false;
	tpe__mutex_lock(&s->lock);
	due = s->busy || (s->n > 0 && s->heap[0]->due <= sched_now());
	tpe__mutex_unlock(&s->lock);
	return due;
}

size_t
tpe__sched_pending(const struct tpe__sched_hook *h)
{
	struct tpe__sched *s = hook_sched(h);
	size_t n;

	if (s == NULL)
		return 0;
	tpe__mutex_lock(&s->lock);
	n = s->n;
	tpe__mutex_unlock(&s->lock);
	return n;
}

size_t
tpe__sched_purge(struct tpe__sched_hook *h)
{
	struct tpe__sched *s = hook_sched(h);
	size_t m = 0;

	if (s == NULL)
		return 0;
	tpe__mutex_lock(&s->lock);
	if (!take_and_finish_locked(s, keep_uncancelled, h->discard,
	    h->discard_ctx, &m))
		return m; /* forked in the callback */
	unlock_settle(s, m > 0);
	return m;
}

void
tpe__sched_destroy(struct tpe__sched_hook *h)
{
	/* Not hook_sched: the child frees its copy's memory too. */
	struct tpe__sched *s = __atomic_load_n(&h->s, __ATOMIC_ACQUIRE);
	size_t i;

	h->s = NULL;
	if (s == NULL || s == SCHED_CLOSED)
		return;
	if (tpe__forked_since(s->fork_gen)) {
		/* The child: the timer thread is not here, the locks may be
		 * held by parent threads; only memory is freed. */
		for (i = 0; i < s->n; i++)
			release_record(s->heap[i]);
		sched_free(s);
		return;
	}
	stop_thread(s);
	/* The pool terminated: what stayed after shutdown entered it, or
	 * tpe_shutdown_now took it; what a forked child left goes back. */
	for (i = 0; i < s->n; i++)
		(void)discard(s->heap[i]);
	sched_free(s);
}

void
tpe__sched_atfork_forget(struct tpe__task *t)
{
	/* The child: only the scheduler's reference goes (an atomic
	 * decrement; the last one frees without touching the locks). */
	if (t->fn == run_task)
		tpe__future_unref(&((struct sched_task *)t->arg)->f);
}

void
tpe__sched_discard(tpe_fn fn, void *arg, void *ctx)
{
	struct tpe__sched_hook *h = ctx;
	struct tpe__sched *s = hook_sched(h);
	struct sched_task *r;

	if (s != NULL && fn == run_task) {
		/* A due scheduled task the pool dropped (DISCARD_OLDEST, a
		 * queue no worker can drain): the user's pair, its future
		 * cancelled. */
		r = arg;
		(void)finish(r, h->discard, h->discard_ctx);
		return;
	}
	if (h->discard != NULL)
		h->discard(fn, arg, h->discard_ctx);
}
