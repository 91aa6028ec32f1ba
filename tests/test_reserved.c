/* SPDX-License-Identifier: MIT */
/*
 * test_reserved.c - reserved threads and tpe_try_execute; invocation types
 * (tpe_execute_typed, tpe_in_non_blocking).
 *
 * A reserved thread is a worker that parks where tpe_try_execute can hand
 * it a task (lib/reserved.h). The tests build "one thread parked" with
 * park_reserved(): it asks for reserved threads until the statistics show
 * them parked, a state the manual only promises "eventually" (a request is
 * served by the next worker that looks for a task), so it polls, bounded.
 */
#include <sched.h>
#include <semaphore.h>
#include <string.h>
#include <sys/syscall.h>

#include "helpers.h"

#include "base/invocation.h"
#include "engine/locked.h"
#include "pool/pool.h"
#include "pool/reserve.h"
#include "pool/task.h"

#define EV_TIMEOUT (10 * TU_S)

/* The paused flag white-box hand-offs pass (tpe__reserve_hand). */
static const bool not_paused = false;

/* A pool of `threads` prestarted workers, `reserved` of them reservable. */
static tpe_t *
pool_reserving(size_t threads, int reserved, int64_t keep_alive)
{
	tpe_t *p = tu_pool_reserving(&(struct tu_pool_opts){ .core = threads,
	    .max = threads, .keep_alive = keep_alive }, reserved);
	size_t started = 0;

	assert_int_equal(tpe_prestart_core_threads(p, &started), 0);
	return p;
}

/* The reserve's first slot (white-box): made by the first park, or here
 * under the pool lock for a test that parks no thread (reserve.h). */
static struct tpe__reserve_slot *
slot0(tpe_t *p)
{
	struct tpe__reserve_slot *s;

	tpe__mutex_lock(&p->lock);
	s = tpe__reserve_slots_locked(&p->reserve, &p->lock);
	tpe__mutex_unlock(&p->lock);
	assert_non_null(s);
	return s;
}

/* Asks the reserve for a thread and wakes a worker to park, as a miss of
 * tpe_try_execute does. */
static void
request(tpe_t *p)
{
	tpe__locked_reserve_request((struct tpe__locked *)p->engine);
}

/* Asks until n threads are parked (see the file comment). */
static void
park_reserved(tpe_t *p, size_t n)
{
	assert_true(TU_EVENTUALLY((request(p),
	    tu_stats(p).reserved >= n), EV_TIMEOUT));
}

/* A task recording the thread it ran on. */
struct where {
	pthread_t thread;
	int ran;                 /* atomic */
	struct tu_latch *done;
};

static void
where_fn(void *arg)
{
	struct where *w = arg;

	w->thread = pthread_self();
	__atomic_add_fetch(&w->ran, 1, __ATOMIC_SEQ_CST);
	if (w->done != NULL)
		tu_latch_count_down(w->done);
}

/* ---- bad input -------------------------------------------------------- */

static void
test_reserved_bad_input(void **state)
{
	tpe_attr_t *a;
	tpe_t *p = pool_reserving(2, 1, 0);
	int count = 0;

	(void)state;
	assert_int_equal(tpe_try_execute(NULL, tu_count_fn, &count), EINVAL);
	assert_int_equal(tpe_try_execute(p, NULL, &count), EINVAL);
	assert_int_equal(tpe_attr_create(&a), 0);
	assert_int_equal(tpe_attr_set_reserved_threads(NULL, 1), EINVAL);
	assert_int_equal(tpe_attr_set_reserved_threads(a, -2), EINVAL);
	assert_int_equal(tpe_attr_set_reserved_threads(a, -1), 0);
	assert_int_equal(tpe_attr_set_reserved_threads(a, 0), 0);
	tpe_attr_destroy(a);
	assert_int_equal(tpe_execute_typed(NULL, tu_count_fn, &count,
	    TPE_BLOCKING), EINVAL);
	assert_int_equal(tpe_execute_typed(p, NULL, &count, TPE_BLOCKING),
	    EINVAL);
	assert_int_equal(tpe_execute_typed(p, tu_count_fn, &count,
	    (enum tpe_invocation)3), EINVAL);
	assert_int_equal(tpe_execute_typed(p, tu_count_fn, &count,
	    (enum tpe_invocation)-1), EINVAL);
	assert_int_equal(tu_stats(p).submitted, 0);
	assert_int_equal(tpe_shutdown(p), 0);
	assert_int_equal(tpe_try_execute(p, tu_count_fn, &count), ECANCELED);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(count, 0);
}

/* ---- capacity --------------------------------------------------------- */

static void
test_reserved_capacity(void **state)
{
	struct tpe_attr a;

	(void)state;
	tpe__attr_defaults(&a);
	a.max = 1;
	a.reserved = 5;
	assert_int_equal(tpe__reserve_capacity(&a), 0);  /* one stays */
	a.max = 4;
	assert_int_equal(tpe__reserve_capacity(&a), 3);
	a.reserved = 0;
	assert_int_equal(tpe__reserve_capacity(&a), 0);
	a.reserved = -1;
	a.max = 2;
	assert_int_equal(tpe__reserve_capacity(&a), 1);  /* at least 1 */
	a.max = 64;
	assert_true(tpe__reserve_capacity(&a) >= 1);
	assert_true(tpe__reserve_capacity(&a) <= 8);     /* max / 8 */
}

/* ---- lazy start, miss, capacity 0 ------------------------------------- */

static void
test_reserved_lazy_and_miss(void **state)
{
	tpe_t *p = tu_pool_with(&(struct tu_pool_opts){ .core = 2, .max = 2 });
	tpe_t *none = pool_reserving(2, 0, 0);
	int count = 0, i;

	(void)state;
	/* Creating a pool starts nothing, and the first call misses. */
	assert_int_equal(tu_stats(p).pool_size, 0);
	assert_int_equal(tu_stats(p).reserved, 0);
	assert_int_equal(tpe_try_execute(p, tu_count_fn, &count), EAGAIN);
	assert_int_equal(tu_stats(p).submitted, 0);
	/* No worker could answer the miss, so it started one (and only
	 * one: later misses see it starting or idle). Before, a pool used
	 * only through tpe_try_execute never got a reserved thread. */
	assert_int_equal(tu_stats(p).pool_size, 1);
	assert_int_equal(tpe_try_execute(p, tu_count_fn, &count) == 0 ||
	    tu_stats(p).largest_pool_size == 1, true);
	/* It parks, and the pool serves tpe_try_execute with no other use. */
	assert_true(TU_EVENTUALLY(tu_stats(p).reserved == 1, EV_TIMEOUT));
	while (tpe_try_execute(p, tu_count_fn, &count) != 0)
		assert_int_equal(tu_stats(p).reserved, 0); /* raced a hit */
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	count = 0;
	/* Capacity 0: always a miss, and no worker ever parks. */
	for (i = 0; i < 100; i++)
		assert_int_equal(tpe_try_execute(none, tu_count_fn, &count),
		    EAGAIN);
	assert_int_equal(tpe_wait_idle(none, -1), 0);
	assert_int_equal(tu_stats(none).reserved, 0);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(tpe_destroy(none), 0);
	assert_int_equal(count, 0);
}

/*
 * The reserve's slots are made by the first thread that parks, not by
 * tpe_create: a pool that is never asked for a reserved thread carries
 * none (reserve.h). White-box: the slots pointer.
 */
static void
test_reserved_slots_made_by_first_park(void **state)
{
	tpe_t *p = pool_reserving(2, 2, 0);
	int count = 0, hits = 0, i;

	(void)state;
	for (i = 0; i < 100; i++)
		assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	assert_null(__atomic_load_n(&p->reserve.slots, __ATOMIC_ACQUIRE));
	assert_int_equal(tu_stats(p).reserved, 0);
	/*
	 * A miss asks for a thread; the one that parks makes the slots. The
	 * wake-up a miss sends can be skipped or lost (a worker between its
	 * look at the request and its sleep); the next miss sends it again
	 * (reserve.h, engine/locked.c), so miss until a thread parks (or a
	 * try hits one that just did).
	 */
	assert_int_equal(tpe_try_execute(p, tu_count_fn, &count), EAGAIN);
	assert_true(TU_EVENTUALLY(tu_stats(p).reserved >= 1 ||
	    (tpe_try_execute(p, tu_count_fn, &count) == 0 && ++hits > 0),
	    EV_TIMEOUT));
	assert_non_null(__atomic_load_n(&p->reserve.slots, __ATOMIC_ACQUIRE));
	while (tpe_try_execute(p, tu_count_fn, &count) != 0)
		assert_true(TU_EVENTUALLY(tu_stats(p).reserved >= 1,
		    EV_TIMEOUT));
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	assert_int_equal(tu_load(&count), 101 + hits);
	assert_int_equal(tpe_destroy(p), 0);
}

/* ---- a hit runs on the parked thread, which parks again -------------- */

/* The pool's threads, as their start hook records them. */
struct threads {
	pthread_mutex_t lock;
	pthread_t id[4];
	size_t n;
};

static void
record_thread(tpe_t *pool, void *ctx)
{
	struct threads *t = ctx;

	(void)pool;
	pthread_mutex_lock(&t->lock);
	if (t->n < 4)
		t->id[t->n] = pthread_self();
	t->n++;
	pthread_mutex_unlock(&t->lock);
}

/* A blocker that records its thread. */
struct holder {
	struct tu_blocker b;
	pthread_t thread;
};

static void
hold_fn(void *arg)
{
	struct holder *h = arg;

	h->thread = pthread_self();
	tu_blocker_fn(&h->b);
}

/*
 * Two workers: one is held by a blocker before any parks, so the parked
 * one is the other, and the hit must run there (not merely "not on the
 * caller": a hit run by any other thread fails too).
 */
static void
test_reserved_hit(void **state)
{
	struct threads th = { PTHREAD_MUTEX_INITIALIZER, { 0 }, 0 };
	tpe_t *p = tu_pool_reserving(&(struct tu_pool_opts){ .core = 2,
	    .max = 2, .on_start = record_thread, .thread_hooks_ctx = &th }, 1);
	struct tu_latch done, started, release;
	struct holder h = { { &started, &release, NULL, 0 }, 0 };
	struct where w = { 0 };
	struct tpe_stats s;
	pthread_t other;
	size_t n = 0;

	(void)state;
	assert_int_equal(tpe_prestart_core_threads(p, &n), 0);
	assert_int_equal(n, 2);
	tu_latch_init(&done, 1);
	tu_latch_init(&started, 1);
	tu_latch_init(&release, 1);
	w.done = &done;
	assert_int_equal(tpe_execute(p, hold_fn, &h), 0);
	tu_latch_wait(&started);
	park_reserved(p, 1);
	s = tu_stats(p);
	assert_int_equal(s.reserved, 1);
	assert_int_equal(s.pool_size, 2);
	assert_int_equal(s.active, 1);   /* the blocker */
	/* Each start hook ran before its thread took work. */
	pthread_mutex_lock(&th.lock);
	assert_int_equal(th.n, 2);
	other = pthread_equal(th.id[0], h.thread) ? th.id[1] : th.id[0];
	assert_true(pthread_equal(th.id[0], h.thread) ||
	    pthread_equal(th.id[1], h.thread));
	pthread_mutex_unlock(&th.lock);
	assert_int_equal(tpe_try_execute(p, where_fn, &w), 0);
	/* Bounded: a hand-off whose thread is never woken fails here. */
	assert_true(tu_latch_wait_for(&done, EV_TIMEOUT *
	    (int64_t)tu_time_scale()));
	assert_int_equal(tu_load(&w.ran), 1);
	/* The blocker's thread is busy: the parked thread is the other. */
	assert_true(pthread_equal(w.thread, other));
	tu_latch_count_down(&release);
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	assert_int_equal(tu_stats(p).submitted, 2);
	/* Back in the reserve after its task. */
	assert_true(TU_EVENTUALLY((request(p),
	    tu_stats(p).reserved == 1 && tu_stats(p).completed == 2),
	    EV_TIMEOUT));
	assert_int_equal(tpe_destroy(p), 0);
	tu_latch_destroy(&done);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
}

/* ---- all reserved threads busy: a miss, and the task never runs ------- */

static void
test_reserved_all_busy(void **state)
{
	tpe_t *p = pool_reserving(3, 1, 0);
	struct tu_latch started, release;
	struct tu_blocker b = { &started, &release, NULL, 0 };
	int count = 0;

	(void)state;
	tu_latch_init(&started, 1);
	tu_latch_init(&release, 1);
	park_reserved(p, 1);
	assert_int_equal(tpe_try_execute(p, tu_blocker_fn, &b), 0);
	tu_latch_wait(&started);
	assert_int_equal(tu_stats(p).reserved, 0);
	assert_int_equal(tpe_try_execute(p, tu_count_fn, &count), EAGAIN);
	tu_latch_count_down(&release);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(count, 0);
	assert_int_equal(tu_ran(&b), 1);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
}

/* ---- parked threads do not strand queued tasks ------------------------ */

/*
 * core 1, max 2: the only worker parks in the reserve. A task submitted
 * then goes to the queue (the pool is at core), and the parked thread is
 * all the pool has: it must leave the reserve and run it.
 */
static void
test_reserved_only_worker_takes_queue(void **state)
{
	tpe_t *p = tu_pool_reserving(&(struct tu_pool_opts){ .core = 1,
	    .max = 2 }, 1);
	struct tu_latch done;
	struct where w = { 0 };
	size_t started = 0;

	(void)state;
	assert_int_equal(tpe_prestart_core_threads(p, &started), 0);
	tu_latch_init(&done, 1);
	w.done = &done;
	park_reserved(p, 1);
	assert_int_equal(tu_stats(p).pool_size, 1);
	assert_int_equal(tpe_execute(p, where_fn, &w), 0);
	tu_latch_wait(&done);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(tu_load(&w.ran), 1);
	tu_latch_destroy(&done);
}

/* ---- idling out races the hand-off: exactly once ---------------------- */

/*
 * A keep-alive of 20 us: each round waits until a thread is parked, then
 * hands off after 0 to 200 us (timer slack makes the 20 us wait last
 * longer; the parked thread's spin is off), so the claim (WAITING -> TAKEN) and the
 * idle-out (WAITING -> EMPTY) race on the slot, won by either side. Every
 * call that returned 0 ran its task exactly once, and no refused one ran.
 * The delay yields, so that the parked thread runs during it even where
 * threads run one at a time (valgrind); rounds go on, with longer delays,
 * until both sides have won at least once, and the test asserts they did:
 * a race never reached would pass for the wrong reason.
 */
static void
delay_ns(int64_t ns)
{
	int64_t end = tu_now_ns() + ns;

	while (tu_now_ns() < end)
		sched_yield();
}

/* Until a thread is parked (white-box: the slots, without the lock). */
static void
wait_parked(tpe_t *p)
{
	int64_t end = tu_now_ns() + EV_TIMEOUT * (int64_t)tu_time_scale();

	while (tpe__reserve_parked(&p->reserve) == 0) {
		assert_true(tu_now_ns() < end);
		request(p);
		sched_yield();
	}
}

#define RACE_ROUNDS 3000
#define RACE_MAX_ROUNDS 6000

static int race_ran[RACE_MAX_ROUNDS]; /* atomic */

static void
race_fn(void *arg)
{
	__atomic_add_fetch((int *)arg, 1, __ATOMIC_SEQ_CST);
}

static void
test_reserved_idle_out_races_hand_off(void **state)
{
	tpe_t *p = pool_reserving(2, 1, 20 * 1000);
	static int accepted[RACE_MAX_ROUNDS];
	int i, hits = 0, rc;
	int64_t delay;

	(void)state;
	/* The race is between the claim and the wait's time-out: a parked
	 * thread that spins first (20 us) leaves that window too narrow to
	 * reach, so the spin is off here. */
	__atomic_store_n(&tpe__reserve_spin_ns, 0, __ATOMIC_RELAXED);
	memset(race_ran, 0, sizeof(race_ran));
	for (i = 0; i < RACE_MAX_ROUNDS; i++) {
		if (i >= RACE_ROUNDS && hits > 0 && hits < i)
			break;
		wait_parked(p);
		delay = (i * 7919) % 200000;
		if (i >= RACE_ROUNDS) /* not reached yet: up to 20 ms */
			delay *= 1 + (i - RACE_ROUNDS) % 100;
		delay_ns(delay);
		rc = tpe_try_execute(p, race_fn, &race_ran[i]);
		assert_true(rc == 0 || rc == EAGAIN);
		accepted[i] = rc == 0;
		hits += accepted[i];
	}
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	while (i-- > 0)
		assert_int_equal(tu_load(&race_ran[i]), accepted[i]);
	assert_int_equal(tu_stats(p).submitted, (uint64_t)hits);
	assert_int_equal(tpe_destroy(p), 0);
	__atomic_store_n(&tpe__reserve_spin_ns, 20000, __ATOMIC_RELAXED);
	/* Both outcomes happened: the race was reached from both sides. */
	assert_true(hits > 0);
	assert_true(hits < RACE_MAX_ROUNDS);
}

/* ---- the parked thread times out while a claimer hands it a task ------ */

/*
 * The exact interleaving of the race above, built. The parked thread
 * (keep-alive 100 ms) waits on its slot with a time-out; the test takes
 * the slot lock and waits until that thread has timed out and sleeps on
 * the lock (its wait must take the lock back to return); then a claimer
 * claims the slot (WAITING -> TAKEN) and sleeps on the same lock in
 * give(). Both are seen asleep in the kernel (/proc: tu_thread_wait_kind),
 * the parked thread first in the lock's queue, so the unlock wakes it
 * first: it finds no item and a timed-out wait, and must not leave a
 * TAKEN slot (its leave is a CAS from WAITING). It waits for the item,
 * and the task runs before tpe_wait_idle returns. A leave that
 * overwrote TAKEN would strand the task in an empty slot while the pool
 * looks idle. Ten rounds; where /proc cannot tell, skipped.
 */
struct claimer {
	tpe_t *pool;
	int *ran;
	int rc;
	long tid;                /* atomic */
};

static void *
claimer_main(void *arg)
{
	struct claimer *c = arg;

	__atomic_store_n(&c->tid, (long)syscall(SYS_gettid), __ATOMIC_SEQ_CST);
	c->rc = tpe_try_execute(c->pool, race_fn, c->ran);
	return NULL;
}

/* The recorded thread that waits with a time-out (the parked one), or 0. */
static long
timed_waiter(struct tu_tids *t)
{
	size_t i;
	long tid = 0;

	pthread_mutex_lock(&t->lock);
	for (i = 0; i < t->n; i++)
		if (tu_thread_wait_kind(t->tid[i]) == TU_WAIT_TIMED)
			tid = t->tid[i];
	pthread_mutex_unlock(&t->lock);
	return tid;
}

static void
test_reserved_time_out_against_claim(void **state)
{
	static struct tu_tids tids = TU_TIDS_INIT;
	tpe_t *p = tu_pool_reserving(&(struct tu_pool_opts){ .core = 2,
	    .max = 2, .keep_alive = 100 * TU_MS, .on_start = tu_tids_hook,
	    .thread_hooks_ctx = &tids }, 1);
	int64_t bound = EV_TIMEOUT * (int64_t)tu_time_scale();
	struct tpe__reserve_slot *s;
	int i, tries, ran[10];
	size_t started = 0;
	long owner;

	(void)state;
	assert_int_equal(tpe_prestart_core_threads(p, &started), 0);
	s = slot0(p);
	if (tu_thread_wait_kind((long)syscall(SYS_gettid)) ==
	    TU_WAIT_UNKNOWN) {
		assert_int_equal(tpe_destroy(p), 0);
		skip(); /* no /proc/self/task/TID/syscall */
	}
	__atomic_store_n(&tpe__reserve_spin_ns, 0, __ATOMIC_RELAXED);
	for (i = 0, tries = 0; i < 10; tries++) {
		struct claimer c = { p, &ran[i], -1, 0 };
		pthread_t t;

		assert_true(tries < 100);
		ran[i] = 0;
		wait_parked(p);
		assert_true(TU_EVENTUALLY((owner = timed_waiter(&tids)) != 0 ||
		    tpe__reserve_parked(&p->reserve) == 0, bound));
		tpe__mutex_lock(&s->lock);
		if (owner == 0 || tpe__reserve_parked(&p->reserve) == 0) {
			/* It idled out before the lock: again. */
			tpe__mutex_unlock(&s->lock);
			continue;
		}
		/* Timed out, and back for the lock: still WAITING. */
		assert_true(TU_EVENTUALLY(tu_thread_wait_kind(owner) ==
		    TU_WAIT_LOCK, bound));
		assert_int_equal(tpe__reserve_parked(&p->reserve), 1);
		assert_int_equal(pthread_create(&t, NULL, claimer_main, &c), 0);
		assert_true(TU_EVENTUALLY(tpe__reserve_handing(&p->reserve) ==
		    1 && __atomic_load_n(&c.tid, __ATOMIC_SEQ_CST) != 0 &&
		    tu_thread_wait_kind(c.tid) == TU_WAIT_LOCK, bound));
		tpe__mutex_unlock(&s->lock);
		assert_int_equal(pthread_join(t, NULL), 0);
		assert_int_equal(c.rc, 0);
		assert_int_equal(tpe_wait_idle(p, -1), 0);
		assert_int_equal(tu_load(&ran[i]), 1);
		i++;
	}
	assert_int_equal(tu_stats(p).submitted, 10);
	assert_int_equal(tpe_destroy(p), 0);
	__atomic_store_n(&tpe__reserve_spin_ns, 20000, __ATOMIC_RELAXED);
}

/* ---- a claim that finds the pool shut down ----------------------------- */

/*
 * A shutdown between tpe_try_execute's look at the pool and its claim:
 * the claimer re-reads the state after the claim and must report
 * ECANCELED (tpe_try_execute(3)), handing the thread nothing. Built
 * white-box: the hand-off is given a state that says SHUTDOWN while the
 * pool itself runs on, so the thread it woke must park again.
 */
static void
test_reserved_claim_after_shutdown(void **state)
{
	tpe_t *p = pool_reserving(2, 1, 0);
	int shut = TPE__SHUTDOWN, count = 0;
	struct tpe__task *t;
	bool cancelled = false;
	char token = 0;

	(void)state;
	park_reserved(p, 1);
	t = tpe__task_new(&p->tasks, tu_count_fn, &count, NULL, &token);
	assert_non_null(t);
	assert_false(tpe__reserve_hand(&p->reserve, t, &shut, &not_paused, &cancelled));
	assert_true(cancelled);
	tpe__task_free(&p->tasks, t);
	/* The thread got nothing, ran nothing, and parks again. */
	park_reserved(p, 1);
	assert_int_equal(tpe_try_execute(p, tu_count_fn, &count), 0);
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	assert_int_equal(tu_load(&count), 1);
	/* And a running pool's hand-off does not say cancelled. */
	park_reserved(p, 1);
	t = tpe__task_new(&p->tasks, tu_count_fn, &count, NULL, &token);
	assert_non_null(t);
	cancelled = true;
	assert_true(tpe__reserve_hand(&p->reserve, t, &p->state, &p->paused,
	    &cancelled));
	assert_false(cancelled);
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	assert_int_equal(tu_load(&count), 2);
	assert_int_equal(tpe_destroy(p), 0);
}

/* ---- claimers against each other: one slot, one winner ---------------- */

/*
 * White-box, the claim alone: the slot is marked WAITING by the test
 * itself (the pool has started no thread, so no owner touches it), and
 * two threads call tpe__reserve_hand at the same moment: the leader marks
 * the slot, raises the start word and claims at once; the follower spins
 * on the start word and claims as soon as it moves. Exactly one may win
 * a WAITING slot; a claim that is not one atomic step from WAITING to
 * TAKEN lets both win (two tasks handed to one thread, one lost). The
 * test thread only waits, so the two claimers have the two CPUs. Up to
 * 5000000 rounds, or 1 s of them (times the time scale).
 */
struct claim_race {
	tpe_t *pool;
	struct tpe__reserve_slot *slot; /* the one slot */
	int64_t end;
	int go;                  /* atomic: the round started */
	int ready;               /* atomic: the follower's round */
	int done;                /* atomic: the follower's last round */
	int rounds;              /* the leader's count, read after join */
	int double_wins;         /* rounds that both claimers won */
	int no_wins;             /* rounds that neither won */
	int stop;                /* atomic */
};

/* One claim of the one slot with a task of its own; true if it won. */
static bool
claim_once(tpe_t *pool)
{
	int running = TPE__RUNNING, count = 0;
	struct tpe__task *t;
	bool cancelled, won;
	char token = 0;

	t = tpe__task_new(&pool->tasks, tu_count_fn, &count, NULL, &token);
	if (t == NULL)
		return false;
	won = tpe__reserve_hand(&pool->reserve, t, &running, &not_paused,
	    &cancelled);
	/* No owner runs it: freed here, won or not. */
	tpe__task_free(&pool->tasks, t);
	return won;
}

static void
spin_until(const int *word, int value, const int *stop)
{
	unsigned spins = 0;

	while (__atomic_load_n(word, __ATOMIC_ACQUIRE) != value &&
	    !__atomic_load_n(stop, __ATOMIC_ACQUIRE))
		if (++spins % 4096 == 0)
			sched_yield(); /* the other may share this CPU */
}

static int follower_won; /* the follower's result for the round */

static void *
claim_follower_main(void *arg)
{
	struct claim_race *cr = arg;
	int round;

	for (round = 1;; round++) {
		__atomic_store_n(&cr->ready, round, __ATOMIC_RELEASE);
		spin_until(&cr->go, round, &cr->stop);
		if (__atomic_load_n(&cr->stop, __ATOMIC_ACQUIRE))
			return NULL;
		__atomic_store_n(&follower_won, claim_once(cr->pool),
		    __ATOMIC_RELAXED);
		__atomic_store_n(&cr->done, round, __ATOMIC_RELEASE);
	}
}

static void *
claim_leader_main(void *arg)
{
	struct claim_race *cr = arg;
	struct tpe__reserve_slot *s = cr->slot;
	int round, wins;

	for (round = 1; round <= 5000000 && tu_now_ns() < cr->end; round++) {
		spin_until(&cr->ready, round, &cr->stop);
		s->item = NULL;
		__atomic_store_n(&s->state, 1 /* WAITING */, __ATOMIC_SEQ_CST);
		__atomic_store_n(&cr->go, round, __ATOMIC_SEQ_CST);
		wins = claim_once(cr->pool);
		spin_until(&cr->done, round, &cr->stop);
		wins += __atomic_load_n(&follower_won, __ATOMIC_RELAXED);
		cr->double_wins += wins > 1;
		cr->no_wins += wins == 0;
		__atomic_store_n(&s->state, 0 /* EMPTY */, __ATOMIC_SEQ_CST);
	}
	cr->rounds = round - 1;
	s->item = NULL;
	__atomic_store_n(&cr->stop, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void
test_reserved_claimers_one_winner(void **state)
{
	struct claim_race cr = { 0 };
	pthread_t leader, follower;

	(void)state;
	cr.pool = tu_pool_reserving(&(struct tu_pool_opts){ .core = 2,
	    .max = 2 }, 1);
	cr.slot = slot0(cr.pool); /* no thread parks to make it */
	cr.end = tu_now_ns() + TU_S * (int64_t)tu_time_scale();
	assert_int_equal(pthread_create(&follower, NULL, claim_follower_main,
	    &cr), 0);
	assert_int_equal(pthread_create(&leader, NULL, claim_leader_main,
	    &cr), 0);
	assert_int_equal(pthread_join(leader, NULL), 0);
	assert_int_equal(pthread_join(follower, NULL), 0);
	assert_true(cr.rounds > 0);
	assert_int_equal(cr.double_wins, 0);
	assert_int_equal(cr.no_wins, 0);
	assert_int_equal(tu_stats(cr.pool).pool_size, 0);
	assert_int_equal(tpe_destroy(cr.pool), 0);
}

/* ---- several callers against idle-out: each task runs exactly once ---- */

/*
 * 2, 3, then 4 threads start together on a barrier and each calls
 * tpe_try_execute once, while the one reserved thread (keep-alive 20 us,
 * no spin) may be timing out: the callers race each other's claims and
 * the owner's leave on the one slot. After each round, a bounded
 * tpe_wait_idle (a slot left TAKEN with no owner never looks idle) and a
 * count per task: every call that returned 0 ran exactly once, every
 * other never, and the submitted count is the number of 0s.
 */
#define CALLERS_MAX 4
#define CALLER_ROUNDS 400

struct caller {
	tpe_t *pool;
	pthread_barrier_t *start, *end;
	int ran[CALLER_ROUNDS];    /* atomic */
	int rc[CALLER_ROUNDS];
	int rounds;
};

static void *
caller_main(void *arg)
{
	struct caller *c = arg;
	int i;

	for (i = 0; i < c->rounds; i++) {
		pthread_barrier_wait(c->start);
		c->rc[i] = tpe_try_execute(c->pool, race_fn, &c->ran[i]);
		pthread_barrier_wait(c->end);
	}
	return NULL;
}

static void
callers_round_robin(int n)
{
	tpe_t *p = pool_reserving(3, 1, 20 * 1000);
	struct caller c[CALLERS_MAX];
	pthread_t t[CALLERS_MAX];
	pthread_barrier_t start, end;
	uint64_t hits = 0;
	int i, k;

	assert_int_equal(pthread_barrier_init(&start, NULL, (unsigned)n + 1), 0);
	assert_int_equal(pthread_barrier_init(&end, NULL, (unsigned)n + 1), 0);
	for (k = 0; k < n; k++) {
		memset(&c[k], 0, sizeof(c[k]));
		c[k].pool = p;
		c[k].start = &start;
		c[k].end = &end;
		c[k].rounds = CALLER_ROUNDS;
		assert_int_equal(pthread_create(&t[k], NULL, caller_main,
		    &c[k]), 0);
	}
	for (i = 0; i < CALLER_ROUNDS; i++) {
		wait_parked(p);
		pthread_barrier_wait(&start);
		pthread_barrier_wait(&end);
		assert_int_equal(tpe_wait_idle(p,
		    EV_TIMEOUT * (int64_t)tu_time_scale()), 0);
		assert_int_equal(tpe__reserve_handing(&p->reserve), 0);
		for (k = 0; k < n; k++) {
			assert_true(c[k].rc[i] == 0 || c[k].rc[i] == EAGAIN);
			assert_int_equal(tu_load(&c[k].ran[i]), c[k].rc[i] == 0);
			hits += c[k].rc[i] == 0;
		}
	}
	for (k = 0; k < n; k++)
		assert_int_equal(pthread_join(t[k], NULL), 0);
	assert_int_equal(tu_stats(p).submitted, hits);
	assert_int_equal(tpe_destroy(p), 0);
	pthread_barrier_destroy(&start);
	pthread_barrier_destroy(&end);
}

static void
test_reserved_callers_race_idle_out(void **state)
{
	int n;

	(void)state;
	__atomic_store_n(&tpe__reserve_spin_ns, 0, __ATOMIC_RELAXED);
	for (n = 2; n <= CALLERS_MAX; n++)
		callers_round_robin(n);
	__atomic_store_n(&tpe__reserve_spin_ns, 20000, __ATOMIC_RELAXED);
}

/* ---- a hand-off counts as running until the thread counts it ---------- */

/*
 * Between taking its task from the slot and counting it in active (under
 * the pool lock), the reserved thread holds no lock: the pool must not
 * look idle then, or tpe_wait_idle returns before the task ran. Built
 * exactly: the test holds the pool lock while the thread takes the task,
 * so the thread stops right there, waiting for the lock. (Before the fix
 * the slot was already EMPTY: the pool looked idle.)
 */
static bool
slot_taken(struct tpe__reserve_slot *s)
{
	bool taken;

	tpe__mutex_lock(&s->lock);
	taken = s->item == NULL;
	tpe__mutex_unlock(&s->lock);
	return taken;
}

static void
test_reserved_hand_off_counts_until_running(void **state)
{
	tpe_t *p = pool_reserving(2, 1, 0);
	struct tu_latch done;
	struct where w = { 0 };
	struct tpe__reserve_slot *s;
	int64_t end;

	(void)state;
	tu_latch_init(&done, 1);
	w.done = &done;
	park_reserved(p, 1);
	s = slot0(p);
	tpe__mutex_lock(&p->lock);
	assert_int_equal(tpe_try_execute(p, where_fn, &w), 0);
	/* A bound, not a figure: stretched like the binary's (valgrind
	 * runs threads one at a time; the yield lets the reserved thread
	 * run where a scheduler would not preempt this loop). */
	end = tu_now_ns() + EV_TIMEOUT * (int64_t)tu_time_scale();
	while (!slot_taken(&s[0])) {
		assert_true(tu_now_ns() < end);
		sched_yield();
	}
	assert_false(tpe__pool_is_idle_locked(p));
	tpe__mutex_unlock(&p->lock);
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	assert_int_equal(tu_load(&w.ran), 1);
	tu_latch_wait(&done);
	assert_int_equal(tpe_destroy(p), 0);
	tu_latch_destroy(&done);
}

/* ---- shutdown with reserved threads parked, busy, re-parking ---------- */

struct racer {
	tpe_t *pool;
	int accepted;      /* calls that returned 0 */
	int ran;           /* atomic: their tasks that ran */
	int stop;          /* atomic */
	sem_t *go;
};

static void *
racer_main(void *arg)
{
	struct racer *r = arg;
	int rc;

	sem_wait(r->go);
	while (!__atomic_load_n(&r->stop, __ATOMIC_SEQ_CST)) {
		rc = tpe_try_execute(r->pool, tu_count_fn, &r->ran);
		if (rc == 0)
			r->accepted++;
		else if (rc == ECANCELED)
			break;
		else
			assert_true(rc == EAGAIN);
	}
	return NULL;
}

static void
shutdown_with_reserve(bool now, int round)
{
	tpe_t *p = pool_reserving(3, 2, 0);
	struct racer r = { p, 0, 0, 0, NULL };
	sem_t go;
	pthread_t t;

	assert_int_equal(sem_init(&go, 0, 0), 0);
	r.go = &go;
	park_reserved(p, (size_t)(1 + round % 2));
	assert_int_equal(pthread_create(&t, NULL, racer_main, &r), 0);
	sem_post(&go);
	/* The racer hands tasks to threads that run and re-park. */
	if (now)
		assert_int_equal(tpe_shutdown_now(p, NULL, NULL), 0);
	else
		assert_int_equal(tpe_shutdown(p), 0);
	/* Bounded: a parked thread that shutdown does not wake fails here. */
	assert_int_equal(tpe_await_termination(p, EV_TIMEOUT *
	    (int64_t)tu_time_scale()), 0);
	__atomic_store_n(&r.stop, 1, __ATOMIC_SEQ_CST);
	assert_int_equal(pthread_join(t, NULL), 0);
	/* Accepted = ran: a hand-off is never lost, nor run twice. */
	assert_int_equal(tu_load(&r.ran), r.accepted);
	assert_int_equal(tu_stats(p).reserved, 0);
	assert_int_equal(tpe_try_execute(p, tu_count_fn, &r.ran), ECANCELED);
	assert_int_equal(tpe_destroy(p), 0);
	sem_destroy(&go);
}

static void
test_reserved_shutdown_races(void **state)
{
	int i;

	(void)state;
	for (i = 0; i < 100; i++) {
		shutdown_with_reserve(false, i);
		shutdown_with_reserve(true, i);
	}
}

/* ---- invocation types -------------------------------------------------- */

static void
record_non_blocking(void *arg)
{
	__atomic_store_n((int *)arg, tpe_in_non_blocking() ? 1 : 2,
	    __ATOMIC_SEQ_CST);
}

static void
nested_fn(void *arg)
{
	int *seen = arg;

	seen[0] = tpe_in_non_blocking();
	tpe__invoke_non_blocking(record_non_blocking, &seen[1]);
	seen[2] = tpe_in_non_blocking();
}

static void
test_reserved_invocation_types(void **state)
{
	tpe_t *p = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	int seen[3] = { 0, 0, 0 }, types[3] = { 0, 0, 0 };

	(void)state;
	/* Every valid type runs as tpe_execute would, on a worker that is
	 * not running as non-blocking. */
	assert_int_equal(tpe_execute_typed(p, record_non_blocking, &types[0],
	    TPE_BLOCKING), 0);
	assert_int_equal(tpe_execute_typed(p, record_non_blocking, &types[1],
	    TPE_NON_BLOCKING), 0);
	assert_int_equal(tpe_execute_typed(p, record_non_blocking, &types[2],
	    TPE_EITHER), 0);
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	assert_int_equal(tu_load(&types[0]), 2);
	assert_int_equal(tu_load(&types[1]), 2);
	assert_int_equal(tu_load(&types[2]), 2);
	/* The flag nests, and is restored. */
	assert_false(tpe_in_non_blocking());
	tpe__invoke_non_blocking(nested_fn, seen);
	assert_int_equal(seen[0], 1);
	assert_int_equal(seen[1], 1);
	assert_int_equal(seen[2], 1);
	assert_false(tpe_in_non_blocking());
	assert_int_equal(tpe_destroy(p), 0);
}

/* A worker clears the flag before each task, even if the last one left it
 * set (a task that unwound out of a non-blocking invocation). */
static void
leave_flag_set(void *arg)
{
	(void)arg;
	tpe__tls_non_blocking = true;
}

static void
test_reserved_flag_reset_between_tasks(void **state)
{
	tpe_t *p = pool_reserving(2, 1, 0);
	int seen = 0, seen2 = 0;

	(void)state;
	assert_int_equal(tpe_execute(p, leave_flag_set, NULL), 0);
	assert_int_equal(tpe_execute(p, record_non_blocking, &seen), 0);
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	park_reserved(p, 1);
	assert_int_equal(tpe_try_execute(p, leave_flag_set, NULL), 0);
	assert_true(TU_EVENTUALLY(tu_stats(p).reserved == 1, EV_TIMEOUT));
	assert_int_equal(tpe_try_execute(p, record_non_blocking, &seen2), 0);
	assert_int_equal(tpe_destroy(p), 0);
	/* 2: the task saw the flag false. (Each pool has two workers, so
	 * the first pair may have run on different threads: the reserved
	 * pair ran on the one reserved thread.) */
	assert_int_equal(tu_load(&seen2), 2);
	assert_true(tu_load(&seen) == 2);
}

/* ---- a paused pool starts no task, a handed one included -------------- */

/*
 * tpe_try_execute(3) lists "the pool is paused" under EAGAIN, and
 * tpe_pause(3) says no task starts until resume. Before the fix a parked
 * thread was handed the task and ran it while paused.
 */
static void
test_reserved_paused_pool_refuses(void **state)
{
	tpe_t *p = pool_reserving(2, 1, 0);
	struct tu_latch done;
	struct where w = { 0 };
	int i;

	(void)state;
	tu_latch_init(&done, 1);
	w.done = &done;
	park_reserved(p, 1);
	assert_int_equal(tpe_pause(p), 0);
	for (i = 0; i < 100; i++)
		assert_int_equal(tpe_try_execute(p, where_fn, &w), EAGAIN);
	assert_int_equal(tu_stats(p).submitted, 0);
	assert_int_equal(tpe_resume(p), 0);
	/* Unpaused, the reserve serves again. */
	park_reserved(p, 1);
	assert_int_equal(tpe_try_execute(p, where_fn, &w), 0);
	tu_latch_wait(&done);
	assert_int_equal(tu_load(&w.ran), 1);
	assert_int_equal(tpe_destroy(p), 0);
	tu_latch_destroy(&done);
}

/* The pause that comes between a claimer's re-checks and its hand-over. */
static tpe_t *hook_pool;

static void
pause_in_hand_off(void)
{
	tpe__reserve_hand_hook = NULL;
	assert_int_equal(tpe_pause(hook_pool), 0);
}

/*
 * The claimer saw the pool running, then tpe_pause returned, then the task
 * reached the parked thread: it was accepted before the pause, and must
 * wait for resume, counted by tpe_wait_idle all along.
 */
static void
test_reserved_handed_task_waits_for_resume(void **state)
{
	tpe_t *p = pool_reserving(2, 1, 0);
	struct tu_latch done;
	struct where w = { 0 };

	(void)state;
	tu_latch_init(&done, 1);
	w.done = &done;
	park_reserved(p, 1);
	hook_pool = p;
	tpe__reserve_hand_hook = pause_in_hand_off;
	assert_int_equal(tpe_try_execute(p, where_fn, &w), 0);
	assert_null(tpe__reserve_hand_hook); /* the hook ran: paused */
	/* Not idle while the task waits, and it does not start: before the
	 * fix it ran at once and the pool went idle. */
	assert_int_equal(tpe_wait_idle(p, 50 * TU_MS), ETIMEDOUT);
	assert_int_equal(tu_load(&w.ran), 0);
	assert_int_equal(tu_stats(p).active, 0);
	assert_int_equal(tpe_resume(p), 0);
	tu_latch_wait(&done);
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	assert_int_equal(tu_load(&w.ran), 1);
	assert_int_equal(tu_stats(p).completed, 1);
	assert_int_equal(tpe_destroy(p), 0);
	tu_latch_destroy(&done);
}

/* ---- a queued task never waits while a reserved thread idles ---------- */

/*
 * max 2: worker A runs a task that blocks, worker B is parked in the
 * reserve. A task queued now (an EPC strategy's queued pending producer is
 * one) must run on B, not wait for A: before the fix parked threads left
 * the reserve only when they were all the workers, and production stalled
 * until A's task ended. Both the lock-free (unbounded) and the locked
 * (bounded) queue.
 */
static void
queued_task_takes_parked_thread(enum tpe_queue_kind kind)
{
	tpe_attr_t *a = tu_attr_with(&(struct tu_pool_opts){ .core = 2,
	    .max = 2, .queue = kind,
	    .capacity = kind == TPE_QUEUE_BOUNDED ? 4 : 0 });
	struct tu_latch started, release, done;
	struct tu_blocker b = { &started, &release, NULL, 0 };
	struct where w = { 0 };
	size_t n = 0;
	tpe_t *p;

	tu_latch_init(&started, 1);
	tu_latch_init(&release, 1);
	tu_latch_init(&done, 1);
	w.done = &done;
	assert_int_equal(tpe_attr_set_reserved_threads(a, 1), 0);
	assert_int_equal(tpe_create(&p, a), 0);
	tpe_attr_destroy(a);
	assert_int_equal(tpe_prestart_core_threads(p, &n), 0);
	park_reserved(p, 1);
	/* A: the other worker, held. */
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &b), 0);
	tu_latch_wait(&started);
	assert_int_equal(tpe_execute(p, where_fn, &w), 0);
	/* Runs while A is still held (bounded: it fails by time-out). */
	assert_true(tu_latch_wait_for(&done, EV_TIMEOUT));
	assert_int_equal(tu_load(&b.ran), 1);
	assert_int_equal(tu_latch_count(&release), 1); /* A still held */
	tu_latch_count_down(&release);
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	/* And B goes back to the reserve. */
	park_reserved(p, 1);
	assert_int_equal(tpe_destroy(p), 0);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
	tu_latch_destroy(&done);
}

static void
test_reserved_queued_task_takes_parked_thread(void **state)
{
	(void)state;
	queued_task_takes_parked_thread(TPE_QUEUE_UNBOUNDED);
	queued_task_takes_parked_thread(TPE_QUEUE_BOUNDED);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reserved_bad_input),
		cmocka_unit_test(test_reserved_capacity),
		cmocka_unit_test(test_reserved_lazy_and_miss),
		cmocka_unit_test(test_reserved_slots_made_by_first_park),
		cmocka_unit_test(test_reserved_hit),
		cmocka_unit_test(test_reserved_all_busy),
		cmocka_unit_test(test_reserved_only_worker_takes_queue),
		cmocka_unit_test(test_reserved_idle_out_races_hand_off),
		cmocka_unit_test(test_reserved_time_out_against_claim),
		cmocka_unit_test(test_reserved_claim_after_shutdown),
		cmocka_unit_test(test_reserved_callers_race_idle_out),
		cmocka_unit_test(test_reserved_claimers_one_winner),
		cmocka_unit_test(test_reserved_hand_off_counts_until_running),
		cmocka_unit_test(test_reserved_shutdown_races),
		cmocka_unit_test(test_reserved_invocation_types),
		cmocka_unit_test(test_reserved_flag_reset_between_tasks),
		cmocka_unit_test(test_reserved_paused_pool_refuses),
		cmocka_unit_test(test_reserved_handed_task_waits_for_resume),
		cmocka_unit_test(test_reserved_queued_task_takes_parked_thread),
	};

	tu_time_bound(0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
