/* SPDX-License-Identifier: MIT */
/*
 * locked.c - the locked engine: Java's execute over a queue kind under the
 * pool lock (dispatch, the rejection verdicts), and its workers' loop
 * (Java's runWorker and getTask), with the unbounded queue's lock-free
 * step 2 and reserved threads.
 *
 * Design notes
 * ------------
 * Where it sits: an engine (engine.h). It calls the queue ops (lib/queue),
 * reads its policy (lib/policy: data), runs tasks through the task module
 * (pool/task.h), parks reserved threads through the reserve
 * (pool/reserve.h), and calls the pool's worker and lifecycle functions
 * (pool.h). Its blocking submit is locked_wait.c.
 *
 * Execute: 1. below core, a new worker for t; 2. the queue (with the
 * policy's gate: scale-first queues only for an unclaimed waiting worker);
 * 3. below max, a new worker for t; 4. the policy's verdicts (reject). All
 * decided under pool->lock, where the shutdown re-check of Java's step 2 is
 * the state test made before the offer under the same lock; except step 2
 * for a queue with an inbox and no gate (the unbounded queue under
 * queue-first), which is made without the lock, as Java's execute offers to
 * LinkedBlockingQueue without its main lock: when the pool is RUNNING and
 * has at least core (and at least one) workers, the submitter counts the
 * task in `submitted`, pushes it (queue.h) and then re-reads state, wc,
 * the parked reserved threads and `sleepers` (seq_cst). Only when one of
 * them says "shut down", "no worker" or "a worker sleeps" does it take the
 * lock to settle the task (settle_lockfree): take it back and refuse it
 * (ECANCELED), start a worker, or wake one.
 *
 * Waiting is this engine's, not the queue's: poll_or_wait_locked waits on
 * work_cond and counts the waiting worker in `takers` while it waits, and
 * in `sleepers` while it sleeps. The queue's offer is told `takers` (the
 * hand-off accepts only while takers > size). Two decisions a lock-free
 * offer could slip past are made in the Dekker pattern, a seq_cst store
 * followed by a seq_cst load on each side (tpe__queue_pending is the load
 * on the lock side):
 *   - a worker about to sleep: sleepers++ (store), then pending (load)
 *     before it waits; the submitter pushes (RMW), then loads takers and
 *     sleepers (sleeper_needed) and, when no awake taker will look, wakes
 *     a sleeper under the lock;
 *   - a worker about to exit: pool->wc-- (store), then the queue's size
 *     (load); the submitter pushes, then loads pool->wc (may_leave_locked).
 *
 * Wake-ups follow Java's LinkedBlockingQueue: an offer wakes a sleeper
 * only when no awake taker (spinning, or on its way to sleep, which looks
 * once more) will see the task, and a lock-free offer only when its push
 * found the inbox empty (a later push rides on the wake-up of the first);
 * a worker that takes a task wakes the next sleeper when tasks remain that
 * no awake taker will take (the cascade). At most one taker spins at a
 * time.
 *
 * get_task decides, under pool->lock, between "run a queued task", "wait"
 * and "exit"; it exits only when the queue is empty (or the pool stopped),
 * or, above max, straight after a task while another worker remains
 * (should_exit_locked). So no submitter can count on an idle worker that
 * is about to leave: an offer that relies on a waiting worker (takers:
 * hand-off, scale-first) is made under the same lock, and a worker counted
 * in takers polls the queue before it may re-evaluate its exit. (Tomcat
 * shipped that race, bug 65454: its idle count and its exit decision were
 * made under different locks, and a task offered to a worker that was
 * timing out waited for the next submission.)
 *
 * Keep-alive: the deadline is fixed when the worker starts waiting and
 * survives spurious wake-ups; a configuration change (config_gen) re-times
 * it. wc is decremented by the exiting worker under the lock, so two
 * workers that time out together re-check against the fresh wc and the
 * pool never shrinks below core (TimeOutShrink).
 *
 * Legend: doc/architecture.md (L, A fields here are written under L and
 * read without it); lock order: base/sync.h.
 */
#include <errno.h>
#include <stdlib.h>

#include "base/probe.h"
#include "base/atomic.h"
#include "base/cpu.h"
#include "base/fork.h"
#include "base/park.h"
#include "base/sync.h"
#include "engine/blocking.h"
#include "engine/locked.h"
#include "pool/future.h"
#include "pool/pool.h"

/* How long a taker spins before it sleeps; a wake-up costs more. */
#define SPIN_NS 20000
/*
 * A spin must earn its CPU: after SPIN_MISSES spins in a row that saw no
 * offer (tasks come further apart than SPIN_NS: the spin only burns a
 * core, the wake-up comes anyway), takers sleep at once, and only every
 * SPIN_PROBE-th wait spins, to notice when tasks come close again; one
 * spin that sees an offer makes every wait spin again (base/park.h,
 * struct tpe__spin_pay).
 */
#define SPIN_MISSES 4
#define SPIN_PROBE 16

static struct tpe__locked *
locked_of(struct tpe__engine *e)
{
	return (struct tpe__locked *)(void *)e;
}

static int
state_acquire(const tpe_t *pool)
{
	/* Acquire: pairs with the pool's release of its state (pool.c). */
	return __atomic_load_n(&pool->state, __ATOMIC_ACQUIRE);
}

static bool
match_all(const struct tpe__task *t, void *ctx)
{
	(void)t;
	(void)ctx;
	return true;
}

/* ---- the queue, and waiting for it ------------------------------------ */

/* After an offer succeeded (L held): wakes spinning takers. */
static void
offered_locked(struct tpe__locked *le)
{
	/* Release pairs with the acquire loads in spin_for_offer; the
	 * spinner then takes the lock, which orders the node itself. */
	tpe__publish(&le->offers, le->offers + 1);
}

/* Whether a submitter must signal work_cond after an offer: only when
 * more tasks wait than spinning takers will pick up. L held. */
static bool
needs_signal_locked(struct tpe__locked *le)
{
	return le->sleepers > 0 && tpe__locked_signal_needed(
	    le->q->ops->size(le->q), le->takers, le->sleepers);
}

/*
 * After a lock-free push, without the lock: whether a sleeping worker must
 * be woken because no awake taker will look at the queue. takers is
 * loaded before sleepers, so a taker counted as awake here either is, or
 * stored its sleepers increment after this load and so sees the node in
 * its last look (the Dekker pair above).
 */
static bool
sleeper_needed(const struct tpe__locked *le)
{
	size_t takers = __atomic_load_n(&le->takers, __ATOMIC_SEQ_CST);
	size_t sleepers = __atomic_load_n(&le->sleepers, __ATOMIC_SEQ_CST);

	return tpe__locked_wake_needed(takers, sleepers);
}

/* Step 2's offer: the policy's gate, then the queue's own rule; t ranked
 * at prio (the submitting call's priority: engine.h). L held. */
static int
offer_locked(struct tpe__locked *le, struct tpe__task *t, int prio)
{
	struct tpe__queue *q = le->q;

	if (le->policy.queue_needs_taker && le->takers <= q->ops->size(q))
		return EAGAIN; /* no unclaimed idle worker: grow instead */
	return tpe__queue_offer(q, t, le->takers, prio);
}

/* An offer without the policy's gate: the queue's rule only (room left);
 * scale-first's re-enqueue and discard-oldest's replacement. L held. */
static int
force_locked(struct tpe__locked *le, struct tpe__task *t, int prio)
{
	return tpe__queue_offer(le->q, t, le->takers, prio);
}

/* Spins (lock dropped) until an offer is seen (true), or the spin budget
 * or the deadline runs out (false). */
static bool
spin_for_offer(struct tpe__locked *le, struct tpe__mutex *lock,
    int64_t deadline_ns)
{
	/* Acquire pairs with the release store in offered_locked. */
	unsigned seen = tpe__observe(&le->offers);
	struct tpe__backoff b;
	bool offered = false;

	/* Spin, yielding now and then (a submitter may share this CPU). */
	tpe__backoff_init(&b, SPIN_NS, deadline_ns, 0);
	tpe__mutex_unlock(lock);
	for (;;) {
		/* Acquire, as above. */
		if (tpe__observe(&le->offers) != seen ||
		    tpe__queue_pending(le->q)) {
			offered = true;
			break;
		}
		if (tpe__backoff_step(&b) == TPE__BACKOFF_SPENT)
			break;
	}
	tpe__mutex_lock(lock);
	return offered;
}

/*
 * Returns the queue's oldest task; when there is none, waits once (counted
 * in takers) until woken or until `deadline_ns` (absolute monotonic,
 * negative = none) and returns NULL, so that the caller re-checks its own
 * state (paused, stopped) before it calls again, which polls first. *rc is
 * ETIMEDOUT when the deadline passed, else 0. L held.
 *
 * With `spin`, the wait spins briefly with the lock dropped, watching
 * `offers`, and returns after the spin without sleeping (so the caller
 * re-checks the pool's state, which may have changed unseen); *rc is then
 * 0 when an offer was seen (another taker may have won it: spinning again
 * is worth it) or EAGAIN when none came. Without `spin`, it sleeps on
 * work_cond.
 */
static struct tpe__task *
poll_or_wait_locked(struct tpe__locked *le, int64_t deadline_ns, bool spin,
    int *rc)
{
	struct tpe__mutex *lock = &le->pool->lock;
	struct tpe__task *t;

	TPE__ASSERT_HELD(lock);
	/* Sleepers are a subset of the takers. */
	TPE__ASSERT(le->sleepers <= le->takers);
	*rc = 0;
	t = le->q->ops->poll(le->q);
	if (t != NULL)
		return t;
	/*
	 * Counted while waiting, spinning or asleep: an offer that relies on
	 * a waiting taker (hand-off, scale-first) reads takers under the
	 * same lock; it signals work_cond only for sleepers.
	 */
	__atomic_store_n(&le->takers, le->takers + 1, __ATOMIC_SEQ_CST);
	/* One spinner at a time: a second one would only take CPU from the
	 * submitters it waits for (two cores, tiny tasks); it sleeps, and
	 * the wake-up rules above call it when the queue builds up. */
	if (spin && tpe__can_spin() && le->takers - le->sleepers == 1 &&
	    tpe__spin_pays(&le->spin_pay, SPIN_MISSES, SPIN_PROBE)) {
		bool hit = spin_for_offer(le, lock, deadline_ns);

		tpe__spin_paid(&le->spin_pay, hit);
		if (hit)
			TPE__METRICS_WORKER_ADD(tpe__metrics_tls_worker,
			    spin_hits, 1);
		else
			*rc = EAGAIN; /* nothing came: the next wait sleeps */
		if (deadline_ns >= 0 && tpe__now_ns() >= deadline_ns)
			*rc = ETIMEDOUT;
	} else {
		/*
		 * Dekker with the lock-free offer: the seq_cst store of
		 * sleepers, then the seq_cst load in tpe__queue_pending.
		 * Either this sees the node, or the submitter sees sleepers
		 * > 0 and signals under the lock, which it cannot take before
		 * the wait has released it.
		 */
		__atomic_store_n(&le->sleepers, le->sleepers + 1,
		    __ATOMIC_SEQ_CST);
		if (!tpe__queue_pending(le->q)) {
			struct tpe__metrics_worker *mw =
			    tpe__metrics_tls_worker;

			TPE__METRICS_WORKER_ADD(mw, idle_waits, 1);
			*rc = tpe__cond_wait_until(&le->work_cond, lock,
			    deadline_ns);
			if (*rc == 0)
				TPE__METRICS_WORKER_ADD(mw, wakeups, 1);
		}
		TPE__ASSERT(le->sleepers > 0);
		__atomic_store_n(&le->sleepers, le->sleepers - 1,
		    __ATOMIC_RELAXED);
	}
	TPE__ASSERT(le->takers > 0);
	__atomic_store_n(&le->takers, le->takers - 1, __ATOMIC_RELAXED);
	/*
	 * No poll here: the caller re-checks the pool's state first (paused,
	 * stopped) and polls at its next call, before it may decide to exit.
	 */
	return NULL;
}

/* ---- execute ---------------------------------------------------------- */

struct owned_node {
	const struct tpe__task *t;
	const void *owner;
};

static bool
match_owned(const struct tpe__task *t, void *ctx)
{
	const struct owned_node *k = ctx;

	return t == k->t && t->owner == k->owner;
}

/*
 * Takes the task the caller submitted as node t with token `owner` back out
 * of the queue, uncounted, if it is still there: true when it was (the
 * caller keeps it), false when a worker took it or tpe_shutdown_now handed
 * it back. The token, not the address alone: the node may have run and
 * been reused for another task since the caller last held the lock
 * (task.h). L held.
 */
static bool
take_back_locked(struct tpe__locked *le, struct tpe__task *t,
    const void *owner)
{
	tpe_t *pool = le->pool;
	struct owned_node k = { t, owner };
	struct tpe__task_list out;

	TPE__ASSERT_HELD(&pool->lock);
	tpe__task_list_init(&out);
	if (le->q->ops->remove_if(le->q, match_owned, &k, 1, &out) == 0)
		return false;
	tpe__pool_count_submitted(pool, -1);
	tpe__pool_notify_idle_locked(pool);
	tpe__pool_room_locked(pool);
	return true;
}

/*
 * t is in the queue and counted: make sure some worker will take it.
 * Returns with pool->lock held; 0, or the start error when no worker is
 * alive and t could be taken back out of the queue (then the caller keeps t).
 */
static int
ensure_taker_locked(struct tpe__locked *le, struct tpe__task *t,
    const void *owner, bool *signal)
{
	tpe_t *pool = le->pool;
	int rc;

	TPE__ASSERT_HELD(&pool->lock);
	*signal = needs_signal_locked(le);
	/* Parked reserved threads do not take queued tasks while another
	 * worker waits for them; when none does (the others are all busy,
	 * or there are none), the parked ones leave the reserve to look at
	 * the queue, so a task never waits behind busy workers while a
	 * thread of the pool idles (an EPC strategy's queued producer would
	 * stall production there). They park again once it is empty. */
	if (pool->wc > 0 && le->takers == 0 &&
	    tpe__reserve_parked(&pool->reserve) > 0)
		tpe__reserve_wake_all_locked(&pool->reserve, &pool->lock);
	/* Workers blocked: someone must run it (engine/blocking.c). */
	if (pool->blocking.blocked > 0)
		(void)tpe__locked_compensate_locked(le);
	if (pool->wc > 0 || pool->paused)
		return 0;
	/* Java's re-check: no worker alive, start one for the queue. */
	rc = tpe__worker_start_locked(pool, NULL);
	if (rc == 0 || pool->wc > 0)
		return 0;
	/* Samba's rule: nobody can run it, so do not keep it. */
	return take_back_locked(le, t, owner) ? rc : 0;
}

/* After an offer under the lock succeeded: count it, then as above. The
 * lock has been held since the offer, so t is still the caller's task. */
static int
accepted_locked(struct tpe__locked *le, struct tpe__task *t, bool *signal)
{
	TPE__ASSERT_HELD(&le->pool->lock);
	tpe__pool_count_submitted(le->pool, 1);
	offered_locked(le);
	return ensure_taker_locked(le, t, t->owner, signal);
}

/* Unlocks, signals a sleeper when an offer asked for it. */
static void
unlock_signal(struct tpe__locked *le, bool signal)
{
	tpe__mutex_unlock(&le->pool->lock);
	if (signal)
		tpe__cond_signal(&le->work_cond);
}

/*
 * Starts a worker whose first task is t. t counts as submitted before the
 * lock is dropped: the new worker may run and finish it before the lock
 * comes back, and no snapshot may show completed > submitted. L held.
 */
static int
start_with_task_locked(tpe_t *pool, struct tpe__task *t)
{
	int rc;

	TPE__ASSERT_HELD(&pool->lock);
	tpe__pool_count_submitted(pool, 1);
	rc = tpe__worker_start_locked(pool, t);
	if (rc != 0)
		tpe__pool_count_submitted(pool, -1);
	return rc;
}

/*
 * Steps 1 and 3: a new worker for t while the pool is below `limit`.
 * Returns true when that decided the call (*rc: 0 started, ECANCELED the
 * pool was shut down while the lock was dropped to start it), false to go
 * on to the next step. L held.
 */
static bool
step_start_locked(tpe_t *pool, struct tpe__task *t, size_t limit, int *rc)
{
	bool standing_in, above;

	TPE__ASSERT_HELD(&pool->lock);
	/* Blocked workers count out (engine/blocking.c). */
	if (pool->paused || !tpe__blocking_below_locked(pool, limit))
		return false;
	standing_in = pool->wc >= limit;
	above = pool->wc >= pool->max;
	if (standing_in)
		tpe__blocking_starting_locked(pool, above);
	if (start_with_task_locked(pool, t) == 0) {
		if (standing_in)
			tpe__blocking_started_locked(pool, above, true);
		*rc = 0;
		return true;
	}
	if (standing_in)
		tpe__blocking_started_locked(pool, above, false);
	if (!tpe__sched_admits(pool->state, t->fn)) {
		*rc = ECANCELED;
		return true;
	}
	return false;
}

/* Which of execute's steps execute_steps_locked makes (Design notes). */
enum {
	STEP_CORE = 1 << 0,  /* 1. below core, a new worker for t */
	STEP_QUEUE = 1 << 1, /* 2. the queue, through the policy's gate */
	STEP_MAX = 1 << 2,   /* 3. below max, a new worker for t */
	STEP_FORCE = 1 << 3  /* the queue without the gate (re-enqueue) */
};

/*
 * Java's execute, the steps in `steps` in their order, for t (at priority
 * prio) under the lock: true when one of them decided (*rc: 0 the pool
 * took t, *signal set for the unlock; ECANCELED the pool was shut down
 * while a start dropped the lock; ENOMEM the queue could not grow to take
 * it (the priority kind), which is no saturation and no case for the
 * rejection policy; or ensure_taker_locked's error); false when none
 * could take t (*rc: the last offer's refusal, EAGAIN without one): the
 * rejection's turn. STEP_FORCE, after step 3: scale-first's re-enqueue
 * (room in the queue, whatever its gate); for queue-first the same offer
 * again, after step 3 may have dropped the lock. The caller has checked
 * the state. L held (dropped while a thread starts).
 */
static bool
execute_steps_locked(struct tpe__locked *le, struct tpe__task *t, int prio,
    unsigned steps, bool *signal, int *rc)
{
	tpe_t *pool = le->pool;
	bool no_memory;

	TPE__ASSERT_HELD(&pool->lock);
	*rc = EAGAIN;
	if ((steps & STEP_CORE) &&
	    step_start_locked(pool, t, pool->core, rc))
		return true;
	if ((steps & STEP_QUEUE) && (*rc = offer_locked(le, t, prio)) == 0) {
		*rc = accepted_locked(le, t, signal);
		return true;
	}
	no_memory = *rc == ENOMEM;
	/* Step 3 needs no room in the queue: it may still take t. */
	if ((steps & STEP_MAX) && step_start_locked(pool, t, pool->max, rc))
		return true;
	if ((steps & STEP_FORCE) && (*rc = force_locked(le, t, prio)) == 0) {
		*rc = accepted_locked(le, t, signal);
		return true;
	}
	if (no_memory || *rc == ENOMEM) {
		*rc = ENOMEM;
		return true;
	}
	return false;
}

/*
 * The lock-free offer found the pool shut down, without workers, or with
 * a worker asleep: settle t under the lock. 0: the pool took t;
 * ECANCELED: t was taken back (Java's "!isRunning && remove"), the caller
 * keeps it; or ensure_taker_locked's error.
 */
static int
settle_lockfree(struct tpe__locked *le, struct tpe__task *t,
    const void *owner)
{
	tpe_t *pool = le->pool;
	bool signal = false, terminate;
	int rc = 0;

	tpe__mutex_lock(&pool->lock);
	if (!tpe__sched_admits(pool->state, t->fn)) {
		if (take_back_locked(le, t, owner)) {
			tpe__task_free(&pool->tasks, t);
			rc = ECANCELED;
		}
		/* Its removal may be what termination waited for. */
		terminate = tpe__pool_try_terminate_locked(pool);
		tpe__mutex_unlock(&pool->lock);
		if (terminate)
			tpe__pool_finish_termination(pool);
		return rc;
	}
	rc = ensure_taker_locked(le, t, owner, &signal);
	if (rc != 0)
		tpe__task_free(&pool->tasks, t);
	unlock_signal(le, signal);
	return rc;
}

/*
 * Step 2 without the lock, for a queue with an inbox and no gate, once
 * step 1 cannot apply (at least core workers) and some worker is alive.
 * Returns false to take the locked path instead.
 */
static bool
dispatch_lockfree(struct tpe__locked *le, tpe_fn fn, void *arg,
    struct tpe_future *f, const void *owner, int *rc)
{
	tpe_t *pool = le->pool;
	struct tpe__task *t;
	bool first;
	size_t wc, parked;

	if (!le->lockfree)
		return false;
	wc = __atomic_load_n(&pool->wc, __ATOMIC_RELAXED);
	if (wc == 0 || wc < __atomic_load_n(&pool->core, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&pool->blocking.blocked, __ATOMIC_RELAXED) > 0 ||
	    state_acquire(pool) != TPE__RUNNING)
		return false;
	t = tpe__task_new(&pool->tasks, fn, arg, f, owner);
	if (t == NULL) {
		*rc = ENOMEM;
		return true;
	}
	/* Counted before any worker can finish it (tpe_get_stats). */
	tpe__pool_count_submitted(pool, 1);
	first = tpe__queue_push_lockfree(le->q, t);
	/* Java's re-check after the offer. These seq_cst loads follow the
	 * push's seq_cst CAS: they pair with the stores of state (pool.c,
	 * under the lock, then the workers' look at the queue), of wc
	 * (may_leave_locked), of sleepers (poll_or_wait_locked), of blocked
	 * (engine/blocking.c: a worker that begins a section looks at the
	 * queue after its store) and of a reserved
	 * slot (reserve.c, park): with threads parked in the reserve, some
	 * other worker must be waiting for tasks (ensure_taker_locked), or
	 * the lock settles it. */
	wc = __atomic_load_n(&pool->wc, __ATOMIC_SEQ_CST);
	parked = tpe__reserve_parked(&pool->reserve);
	if (__atomic_load_n(&pool->state, __ATOMIC_SEQ_CST) == TPE__RUNNING &&
	    __atomic_load_n(&pool->blocking.blocked, __ATOMIC_SEQ_CST) == 0 &&
	    wc > parked &&
	    (parked == 0 ||
	    __atomic_load_n(&le->takers, __ATOMIC_SEQ_CST) > 0) &&
	    !(first && sleeper_needed(le)))
		*rc = 0;
	else
		*rc = settle_lockfree(le, t, owner);
	return true;
}

/*
 * REQUEUE (scale-first's re-enqueue): the steps decided afresh under one
 * lock, because the pool may have changed since step 3 looked (a worker
 * timed out and left): the gated offer, else a new worker below max, else
 * the queue without the gate. ECANCELED when not RUNNING; EAGAIN when the
 * queue is full (then the next verdict); 0: the pool took t.
 */
static int
requeue(struct tpe__locked *le, struct tpe__task *t, int prio)
{
	tpe_t *pool = le->pool;
	bool signal = false;
	int rc;

	tpe__mutex_lock(&pool->lock);
	if (pool->state != TPE__RUNNING)
		rc = ECANCELED;
	else
		(void)execute_steps_locked(le, t, prio,
		    STEP_QUEUE | STEP_MAX | STEP_FORCE, &signal, &rc);
	unlock_signal(le, signal);
	return rc;
}

/* REPLACE_OLDEST (locked.h), t at priority prio. */
static int
replace_oldest(struct tpe__locked *le, struct tpe__task *t, int prio,
    struct tpe__task **victim)
{
	tpe_t *pool = le->pool;
	bool signal = false;
	int rc;

	*victim = NULL;
	tpe__mutex_lock(&pool->lock);
	if (pool->state != TPE__RUNNING) {
		rc = ECANCELED;
	} else if ((*victim = le->q->ops->drop_oldest(le->q)) == NULL) {
		rc = EAGAIN;
	} else if ((rc = force_locked(le, t, prio)) == 0) {
		/* Forced: the slot just freed is this task's, whatever rule
		 * the policy's gate applies. */
		rc = accepted_locked(le, t, &signal);
	}
	unlock_signal(le, signal);
	return rc;
}

int
tpe__locked_replace_oldest(struct tpe__locked *le, struct tpe__task *t,
    struct tpe__task **victim)
{
	return replace_oldest(le, t, 0, victim);
}

/* A rejection by verdict v, in the metrics (lib/metrics). */
static void
count_rejection(tpe_t *pool, enum tpe__verdict v)
{
	enum tpe__metrics_counter c;

	switch (v) {
	case TPE__VERDICT_RUN_HERE: c = TPE__M_REJECT_CALLER_RUNS; break;
	case TPE__VERDICT_DISCARD: c = TPE__M_REJECT_DISCARD; break;
	case TPE__VERDICT_REPLACE_OLDEST:
		c = TPE__M_REJECT_DISCARD_OLDEST;
		break;
	case TPE__VERDICT_HANDLER: c = TPE__M_REJECT_HANDLER; break;
	default: c = TPE__M_REJECT_ABORT; break;
	}
	tpe__metrics_count(pool->metrics, c);
}

/*
 * Step 4: the policy's verdicts, in order (policy.h), without the lock,
 * for t at priority prio. 0: a verdict took t (it ran, was handed back or
 * queued); else an errno value and the caller keeps t.
 */
static int
reject(struct tpe__locked *le, struct tpe__task *t, int prio)
{
	tpe_t *pool = le->pool;
	const struct tpe_attr *a = &pool->attr;
	struct tpe__task *victim;
	size_t i;
	int rc = EAGAIN;

	for (i = 0; i < TPE__VERDICTS_MAX; i++) {
		enum tpe__verdict v = le->policy.verdicts[i];

		if (v == TPE__VERDICT_NONE)
			break;
		if (v == TPE__VERDICT_REQUEUE) {
			rc = requeue(le, t, prio);
			if (rc != EAGAIN)
				return rc; /* taken, shut down, ENOMEM */
			continue;
		}
		tpe__pool_count_rejected(pool);
		count_rejection(pool, v);
		TPE__PROBE5(task__reject, pool, a->name_prefix, t->fn, t->arg,
		    EAGAIN);
		if (v == TPE__VERDICT_REFUSE)
			return EAGAIN;
		if (v == TPE__VERDICT_REPLACE_OLDEST) {
			rc = replace_oldest(le, t, prio, &victim);
			if (victim != NULL)
				tpe__task_discard(&pool->tasks, victim);
			return rc;
		}
		if (tpe_is_shutdown(pool))
			return ECANCELED;
		switch (v) {
		case TPE__VERDICT_RUN_HERE:
			tpe__task_run_inline(&pool->tasks, t);
			return 0;
		case TPE__VERDICT_DISCARD:
			tpe__task_discard(&pool->tasks, t);
			return 0;
		case TPE__VERDICT_HANDLER:
			return tpe__task_offer_to_handler(&pool->tasks, t,
			    a->reject_fn, a->reject_ctx);
		default:
			return EAGAIN;
		}
	}
	return rc;
}

/*
 * Java's execute(): the steps of the design notes, for a task at priority
 * prio. 0: the pool (or a verdict) took t; else the caller keeps fn/arg
 * and f.
 */
static int
submit_locked_path(struct tpe__locked *le, tpe_fn fn, void *arg,
    struct tpe_future *f, int prio)
{
	tpe_t *pool = le->pool;
	struct tpe__task *t;
	bool signal = false;
	char token = 0; /* this call's owner token: its address (task.h) */
	int rc;

	/* The scheduler's tasks after shutdown too (sched.h). */
	if (!tpe__sched_admits(state_acquire(pool), fn))
		return ECANCELED;
	t = tpe__task_new(&pool->tasks, fn, arg, f, &token);
	if (t == NULL)
		return ENOMEM;
	tpe__mutex_lock(&pool->lock);
	if (!tpe__sched_admits(pool->state, fn)) {
		tpe__mutex_unlock(&pool->lock);
		tpe__task_free(&pool->tasks, t);
		return ECANCELED;
	}
	if (!execute_steps_locked(le, t, prio,
	    STEP_CORE | STEP_QUEUE | STEP_MAX, &signal, &rc)) {
		tpe__mutex_unlock(&pool->lock);
		rc = reject(le, t, prio); /* step 4 */
		if (rc != 0)
			tpe__task_free(&pool->tasks, t);
		return rc;
	}
	if (rc != 0)
		tpe__task_free(&pool->tasks, t);
	unlock_signal(le, signal);
	return rc;
}

TPE__TLS int tpe__submit_priority;

/* The engine's submit, at the call's priority (engine.h). */
static int
locked_submit(struct tpe__engine *e, tpe_fn fn, void *arg,
    struct tpe_future *f)
{
	return tpe__locked_submit_plain(locked_of(e), fn, arg, f,
	    tpe__submit_priority_take());
}

int
tpe__locked_place_locked(struct tpe__locked *le, struct tpe__task *t,
    int prio, bool *signal, bool *saturated)
{
	tpe_t *pool = le->pool;
	int rc;

	TPE__ASSERT_HELD(&pool->lock);
	*saturated = false;
	if (!tpe__sched_admits(pool->state, t->fn))
		return ECANCELED;
	/* execute's steps 1 to 3, then the re-enqueue. */
	if (execute_steps_locked(le, t, prio,
	    STEP_CORE | STEP_QUEUE | STEP_MAX | STEP_FORCE, signal, &rc))
		return rc;
	/* Parked reserved threads (reserve.h) are idle workers that take
	 * no queued or handed-off task, and a blocked submitter must not
	 * wait for room only they could make: with tasks queued they look
	 * again (and take those before they park again); with none (the
	 * hand-off), one takes t, as from tpe_try_execute. Not while paused. */
	if (!pool->paused && tpe__reserve_parked(&pool->reserve) > 0) {
		bool cancelled;

		if (!tpe__queue_is_empty(le->q)) {
			tpe__reserve_wake_all_locked(&pool->reserve,
			    &pool->lock);
		} else {
			/* Counted first: the reserved thread may finish t
			 * before the caller counts (tpe_try_execute). */
			tpe__pool_count_submitted(pool, 1);
			if (tpe__reserve_hand(&pool->reserve, t, &pool->state,
			    &pool->paused, &cancelled))
				return 0;
			tpe__pool_count_submitted(pool, -1);
		}
	}
	/* Saturated, unless no worker is alive and the pool is not paused:
	 * then step 3 could not start a thread (below max), and no worker
	 * will ever make room. */
	*saturated = pool->wc > 0 || pool->paused;
	return EAGAIN;
}

/* ---- tpe_try_execute: reserved threads -------------------------------- */

void
tpe__locked_reserve_request(struct tpe__locked *le)
{
	tpe_t *pool = le->pool;

	if (!tpe__reserve_request(&pool->reserve))
		return;
	/*
	 * Wake a sleeping worker so it parks, but never wait for the lock:
	 * a busy lock means a worker or a submitter is at work, and any
	 * worker that looks for a task next takes the request (get_task).
	 * A wake-up that is skipped (or lost: it is sent while the worker is
	 * between its look at `want` and its sleep) is sent again by the next
	 * miss while the request is outstanding, and a worker that finishes a
	 * task or times out looks at `want` anyway.
	 */
	if (__atomic_load_n(&le->sleepers, __ATOMIC_SEQ_CST) > 0 &&
	    tpe__mutex_trylock(&pool->lock)) {
		tpe__cond_signal(&le->work_cond);
		tpe__mutex_unlock(&pool->lock);
	}
}

/*
 * A miss of tpe_try_execute: asks the reserve for one more thread, and,
 * when no worker can answer (none idle, none starting) and the pool is
 * below max, starts one, as Jetty's ReservedThreadExecutor starts a
 * reserved thread through its executor. Without it a pool used only
 * through tpe_try_execute would never get a reserved thread. Never waits
 * for the lock (a busy lock means a worker or a submitter is at work, and
 * the next miss tries again) nor for the thread to park: the new worker
 * finds the queue empty and parks (get_task, tpe__reserve_wanted_locked).
 */
static void
reserve_miss(struct tpe__locked *le)
{
	tpe_t *pool = le->pool;
	struct tpe__reserve *r = &pool->reserve;

	tpe__locked_reserve_request(le);
	if (tpe__reserve_wanted(r) == 0 || !tpe__mutex_trylock(&pool->lock))
		return;
	/* One thread per want at most: r->starting counts those started
	 * whose want no worker took yet (tpe__reserve_wanted_locked). */
	if (pool->state == TPE__RUNNING && !pool->paused &&
	    le->takers == 0 && tpe__blocking_below_locked(pool, pool->max) &&
	    r->starting < tpe__reserve_wanted(r)) {
		r->starting++;
		if (tpe__worker_start_locked(pool, NULL) != 0 &&
		    r->starting > 0)
			r->starting--;
	}
	tpe__mutex_unlock(&pool->lock);
}

/*
 * Hands the task to a parked reserved thread, or refuses at once: no
 * queue, no wait for a thread (reserve.h); a miss may start one. The task
 * counts as submitted before the hand-off, since the reserved thread may
 * finish it before this returns.
 */
static int
locked_try_submit(struct tpe__engine *e, tpe_fn fn, void *arg)
{
	struct tpe__locked *le = locked_of(e);
	tpe_t *pool = le->pool;
	struct tpe__task *t;
	bool cancelled;
	char token = 0; /* this call's owner token (task.h) */

	if (tpe__reserve_parked(&pool->reserve) == 0) {
		tpe__metrics_count(pool->metrics, TPE__M_RESERVE_MISS);
		reserve_miss(le);
		return EAGAIN;
	}
	t = tpe__task_new(&pool->tasks, fn, arg, NULL, &token);
	if (t == NULL)
		return ENOMEM;
	tpe__pool_count_submitted(pool, 1);
	if (tpe__reserve_hand(&pool->reserve, t, &pool->state, &pool->paused,
	    &cancelled)) {
		tpe__metrics_count(pool->metrics, TPE__M_RESERVE_HIT);
		return 0;
	}
	tpe__pool_count_submitted(pool, -1);
	tpe__task_free(&pool->tasks, t);
	if (cancelled)
		return ECANCELED;
	tpe__metrics_count(pool->metrics, TPE__M_RESERVE_MISS);
	reserve_miss(le);
	return EAGAIN;
}

/* ---- the workers' loop ------------------------------------------------ */

/*
 * The worker has decided to exit: gives up its place in wc, unless that
 * would strand queued tasks. The decrement comes before the last look at
 * the queue: a lock-free offer pushes and then reads wc, so either it sees
 * this worker gone (and settles its task under the lock) or this look sees
 * its node (and the last worker stays, as Java's processWorkerExit would
 * start a replacement). L held.
 */
static bool
may_leave_locked(struct tpe__locked *le, bool empty)
{
	tpe_t *pool = le->pool;

	TPE__ASSERT_HELD(&pool->lock);
	/* Counters never wrap; a worker counted in wc is alive (nthreads). */
	TPE__ASSERT(pool->wc > 0 && pool->wc <= pool->nthreads);
	/* A worker leaves only after seeing the queue empty (`empty`: its
	 * look under the lock, held since; only lock-free pushes, which
	 * their submitters settle, can have arrived, and the look below
	 * absorbs them). Or, above max, it leaves the queue to another
	 * worker (should_exit_locked). */
	TPE__ASSERT(empty || (tpe__blocking_above_max_locked(pool) &&
	    pool->wc > 1));
	tpe__pool_set_wc_locked(pool, pool->wc - 1);
	if (pool->wc > 0 || pool->state >= TPE__STOP ||
	    tpe__queue_is_empty(le->q)) {
		tpe__blocking_left_locked(pool);
		/* Below max now: a blocked submitter may start a worker. */
		tpe__pool_room_locked(pool);
		return true;
	}
	tpe__pool_set_wc_locked(pool, pool->wc + 1);
	return false;
}

/*
 * Java's getTask exit rule. Above max (the pool was shrunk), a worker that
 * comes back from a task leaves whenever another worker remains to run
 * what is queued, and any worker leaves once the queue is empty. A waiting
 * worker that was woken does not leave with tasks queued: an offer may
 * have counted on it (hand-off, scale-first), as a Java SynchronousQueue
 * hands the item to the very taker. Otherwise a worker leaves only with
 * the queue empty, once the pool is shut down or its keep-alive expired.
 * L held.
 */
static bool
should_exit_locked(tpe_t *pool, bool empty, bool expired, bool after_task)
{
	TPE__ASSERT_HELD(&pool->lock);
	/* The running workers, less the spares (blocking.c). */
	if (tpe__blocking_above_max_locked(pool))
		return empty || (after_task && pool->wc > 1);
	return empty && (pool->state == TPE__SHUTDOWN || expired);
}

/* A worker took t from the queue. L held. */
static struct tpe__task *
took_locked(struct tpe__locked *le, struct tpe__task *t)
{
	/* A place in the queue is free (bounded). */
	tpe__pool_room_locked(le->pool);
	/* The cascade: tasks left that no awake taker will take wake the
	 * next sleeper. */
	if (needs_signal_locked(le))
		tpe__cond_signal(&le->work_cond);
	return t;
}

/* The reserve's questions (reserve.h, struct tpe__reserve_env). */
static bool
env_work_waiting(void *ctx)
{
	struct tpe__locked *le = ctx;

	return !tpe__queue_is_empty(le->q);
}

static void
env_before_start(void *ctx)
{
	struct tpe__locked *le = ctx;
	tpe_t *pool = le->pool;

	/* Resume and shutdown broadcast work_cond (wake_workers_locked). */
	while (pool->paused && pool->state < TPE__STOP)
		tpe__cond_wait_until(&le->work_cond, &pool->lock, -1);
}

/*
 * Whether an idle worker parks in the reserve instead of waiting on the
 * queue: the queue is empty, the pool runs, and the reserve wants a
 * thread (reserve.h; *reserved: this worker is one already). L held.
 */
static bool
should_park_locked(struct tpe__locked *le, bool empty, bool *reserved)
{
	tpe_t *pool = le->pool;

	TPE__ASSERT_HELD(&pool->lock);
	return empty && pool->state == TPE__RUNNING &&
	    tpe__reserve_wanted_locked(&pool->reserve, &pool->lock, reserved);
}

/* Parks in the reserve until handed a task (returned) or sent back to
 * look at the pool (NULL). L held (dropped while parked). */
static struct tpe__task *
park_locked(struct tpe__locked *le, bool *reserved)
{
	tpe_t *pool = le->pool;
	struct tpe__reserve_env env = {
		.lock = &pool->lock,
		.keep_alive_ns = pool->keep_alive_ns,
		.work_waiting = env_work_waiting,
		.before_start = env_before_start,
		.ctx = le,
	};

	tpe__task_flush_kept(&pool->tasks);
	return tpe__reserve_park_locked(&pool->reserve, &env, reserved);
}

/*
 * The common case first: a task is queued. At or below max no worker
 * leaves while tasks are queued (should_exit_locked), so the exit rule
 * need not look before the poll; and the poll leaves the inbox alone
 * while the list holds tasks, so a busy worker does not pull the
 * submitters' line before every task. NULL: none polled, *empty whether
 * the queue was empty under the lock. L held.
 */
static struct tpe__task *
poll_first_locked(struct tpe__locked *le, bool *empty)
{
	struct tpe__task *t;

	if (tpe__blocking_above_max_locked(le->pool)) {
		*empty = tpe__queue_is_empty(le->q);
		return NULL;
	}
	t = le->q->ops->poll(le->q);
	*empty = t == NULL;
	return t;
}

/*
 * The worker decided to exit: true when it gave up its place in wc
 * (may_leave_locked), false when it must stay for a task that came. L
 * held.
 */
static bool
leave_locked(struct tpe__locked *le, bool empty)
{
	if (!may_leave_locked(le, empty))
		return false;
	tpe__task_flush_kept(&le->pool->tasks);
	/* Leaving tasks to the others: a wake-up that was meant for this
	 * worker must not leave with it. */
	if (!empty && needs_signal_locked(le))
		tpe__cond_signal(&le->work_cond);
	return true;
}

/* A worker's waits for a task within one get_task: its keep-alive
 * deadline, fixed when it starts waiting and kept across wake-ups, and
 * whether the next wait may spin. */
struct waiting {
	unsigned gen;     /* le->config_gen the deadline belongs to */
	int64_t deadline; /* absolute monotonic; negative: not set */
	bool timed_out;   /* the keep-alive ran out */
	bool spin;        /* spin before sleeping */
};

/*
 * Waits once for a task (poll_or_wait_locked), `timed` by the keep-alive:
 * the task, or NULL to look at the pool again (w updated: a configuration
 * change re-times the keep-alive). L held.
 */
static struct tpe__task *
wait_locked(struct tpe__locked *le, struct waiting *w, bool timed)
{
	tpe_t *pool = le->pool;
	struct tpe__task *t;
	int rc;

	if (!timed)
		w->deadline = -1;
	else if (w->deadline < 0)
		w->deadline = tpe__deadline(pool->keep_alive_ns);
	/* Waiting: no spent node held meanwhile (task.h). */
	tpe__task_flush_kept(&pool->tasks);
	/* Spin once per get_task, then sleep: see poll_or_wait_locked. */
	t = poll_or_wait_locked(le, w->deadline, w->spin, &rc);
	if (t != NULL)
		return took_locked(le, t);
	/* Spin again while offers keep coming (another worker won the
	 * last one); sleep once a spin saw nothing. */
	w->spin = w->spin && rc == 0;
	if (le->config_gen != w->gen) {
		/* Sizes, keep-alive or state changed: start over. */
		w->gen = le->config_gen;
		w->timed_out = false;
		w->deadline = -1;
	} else if (rc == ETIMEDOUT) {
		w->timed_out = true;
	}
	return NULL;
}

/*
 * Java's getTask: the next task, or NULL when the worker must exit (wc
 * has then been decremented). An idle worker that the reserve wants
 * parks there instead of waiting on the queue, and comes back with a
 * handed task or to look at the pool again (reserve.h); *reserved is the
 * worker's own "I am a reserved thread". pool->lock held on entry and
 * exit.
 */
static struct tpe__task *
get_task_locked(struct tpe__locked *le, bool *reserved)
{
	tpe_t *pool = le->pool;
	struct waiting w = { le->config_gen, -1, false, true };
	struct tpe__task *t;
	bool after_task = true, empty, timed;

	TPE__ASSERT_HELD(&pool->lock);
	while (pool->state < TPE__STOP) {
		if (pool->paused) {
			/* Not counted as a taker: no offer may rely on it. */
			tpe__cond_wait_until(&le->work_cond, &pool->lock, -1);
			continue;
		}
		if ((t = poll_first_locked(le, &empty)) != NULL)
			return took_locked(le, t);
		timed = pool->allow_core_timeout || pool->wc > pool->core;
		if (should_exit_locked(pool, empty, timed && w.timed_out,
		    after_task)) {
			if (leave_locked(le, empty))
				return NULL;
			continue;
		}
		/* About to wait for a task, in the queue or parked in the
		 * reserve: a blocked submitter may hand it one (hand-off,
		 * scale-first, a parked reserved thread); it gets the lock
		 * once this worker counts in takers or is parked, and has
		 * dropped it. */
		if (empty)
			tpe__pool_room_locked(pool);
		after_task = false;
		t = should_park_locked(le, empty, reserved) ?
		    park_locked(le, reserved) : wait_locked(le, &w, timed);
		if (t != NULL)
			return t;
	}
	/* The one exit that need not see the queue empty: a stopped pool. */
	TPE__ASSERT(pool->state >= TPE__STOP && pool->wc > 0);
	tpe__task_flush_kept(&pool->tasks);
	tpe__pool_set_wc_locked(pool, pool->wc - 1);
	tpe__blocking_left_locked(pool);
	return NULL;
}

/*
 * The run loop of Java's runWorker: t (the first task, or NULL), then the
 * tasks get_task hands out, until it says exit (wc given up there).
 * pool->lock held on entry and on return (TPE__WORKER_EXIT); or
 * TPE__WORKER_FORKED_CHILD: forked in user code (task.h), L not held.
 */
static enum tpe__worker_end
locked_worker_loop(struct tpe__engine *e, struct tpe__task *t)
{
	struct tpe__locked *le = locked_of(e);
	tpe_t *pool = le->pool;
	/* NULL without metrics: one test per task (metrics.h). */
	struct tpe__metrics_worker *mw = tpe__metrics_tls_worker;
	bool reserved = false;
	int64_t start = 0, accepted = 0;

	TPE__ASSERT_HELD(&pool->lock);
	for (;;) {
		if (t == NULL) {
			t = get_task_locked(le, &reserved);
			if (t == NULL)
				return TPE__WORKER_EXIT;
			pool->active++;
			/* A running worker is counted in wc until it leaves
			 * get_task for good, and in nthreads until it ends. */
			TPE__ASSERT(pool->active <= pool->wc &&
			    pool->wc <= pool->nthreads);
		}
		tpe__mutex_unlock(&pool->lock);
		if (mw != NULL)
			start = tpe__metrics_task_start(mw,
			    accepted = tpe__task_accepted_tick(t));
		if (!tpe__task_run_keep(&pool->tasks, t))
			return TPE__WORKER_FORKED_CHILD;
		if (mw != NULL)
			tpe__metrics_task_end(mw, accepted, start);
		tpe__blocking_task_done();
		tpe__task_keep(&pool->tasks, t);
		t = NULL;
		tpe__mutex_lock(&pool->lock);
		TPE__ASSERT(pool->active > 0);
		pool->active--;
		pool->completed++;
		tpe__pool_notify_idle_locked(pool);
	}
}

/* ---- the rest of the interface ---------------------------------------- */

static int
locked_attach(struct tpe__engine *e, tpe_t *pool)
{
	struct tpe__locked *le = locked_of(e);

	le->pool = pool;
	/* A lock-free submitter runs ahead of the workers by tens of
	 * thousands of tasks: a return stack of the default 256 nodes made
	 * about half of them a malloc (node_cache.h). */
	if (le->lockfree)
		pool->returns.max = TPE__NODE_RETURNS_MANY;
	return 0;
}

/* Idle workers re-check state and configuration (Java's
 * interruptIdleWorkers); config_gen re-times their keep-alive. */
static void
locked_wake_all_locked(struct tpe__engine *e)
{
	struct tpe__locked *le = locked_of(e);

	TPE__ASSERT_HELD(&le->pool->lock);
	le->config_gen++;
	tpe__cond_broadcast(&le->work_cond);
}

static bool
locked_idle_locked(struct tpe__engine *e)
{
	struct tpe__locked *le = locked_of(e);

	TPE__ASSERT_HELD(&le->pool->lock);
	return le->pool->active == 0 && tpe__queue_is_empty(le->q);
}

static void
locked_counts_locked(struct tpe__engine *e, struct tpe__engine_counts *c)
{
	struct tpe__locked *le = locked_of(e);

	TPE__ASSERT_HELD(&le->pool->lock);
	c->active = le->pool->active;
	c->idle = le->takers;
	c->completed = le->pool->completed;
	c->queued = le->q->ops->size(le->q);
	c->submitted = 0; /* all in pool->submitted */
}

static size_t
locked_drain_locked(struct tpe__engine *e, tpe__task_match_fn match,
    void *ctx, size_t max, struct tpe__task_list *out)
{
	struct tpe__locked *le = locked_of(e);

	TPE__ASSERT_HELD(&le->pool->lock);
	return le->q->ops->remove_if(le->q, match != NULL ? match : match_all,
	    ctx, max, out);
}

static void
locked_forget_locked(struct tpe__engine *e)
{
	struct tpe__locked *le = locked_of(e);

	le->takers = le->sleepers = 0;
	/* Threads that waited on it in the parent do not exist here. */
	tpe__cond_init(&le->work_cond);
}

static void
locked_destroy(struct tpe__engine *e)
{
	struct tpe__locked *le = locked_of(e);

	le->q->ops->destroy(le->q);
	tpe__cond_destroy(&le->work_cond);
	free(le);
}

static const struct tpe__engine_ops locked_ops = {
	.name = "locked",
	.attach = locked_attach,
	.submit = locked_submit,
	.submit_wait = tpe__locked_submit_wait,
	.try_submit = locked_try_submit,
	.worker_loop = locked_worker_loop,
	.wake_all_locked = locked_wake_all_locked,
	.idle_locked = locked_idle_locked,
	.counts_locked = locked_counts_locked,
	.drain_locked = locked_drain_locked,
	.forget_locked = locked_forget_locked,
	.destroy = locked_destroy,
	.blocking = tpe__locked_blocking,
};

int
tpe__engine_locked_create(struct tpe__queue *q, const struct tpe__policy *p,
    struct tpe__engine **e)
{
	struct tpe__locked *le = calloc(1, sizeof(*le));

	if (le == NULL)
		return ENOMEM;
	le->base.ops = &locked_ops;
	le->q = q;
	le->policy = *p;
	/* The lock-free step 2 needs an inbox and no gate (a gated offer
	 * must see takers under the lock). */
	le->lockfree = q->inbox != NULL && !p->queue_needs_taker;
	/* Asked once, of the empty queue: the blocking submit reads it
	 * without the lock, where the room left is L's. */
	le->unbounded = q->ops->remaining(q) == SIZE_MAX;
	tpe__cond_init(&le->work_cond);
	*e = &le->base;
	return 0;
}

/* The lock-free step 2 where it applies (its queue keeps no order: the
 * priority is not needed), else the locked path. */
int
tpe__locked_submit_plain(struct tpe__locked *le, tpe_fn fn, void *arg,
    struct tpe_future *f, int prio)
{
	char token = 0; /* this call's owner token: its address (task.h) */
	int rc;

	if (dispatch_lockfree(le, fn, arg, f, &token, &rc))
		return rc;
	return submit_locked_path(le, fn, arg, f, prio);
}
