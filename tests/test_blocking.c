/* SPDX-License-Identifier: MIT */
/*
 * test_blocking.c - managed blocking (tpe_blocking_begin, tpe_blocking_end,
 * tpe_managed_block, tpe_attr_set_max_spare_threads): the pool deadlock
 * that blocked workers cause, and how the calls lift it, on the locked
 * engine and the per-worker one; the bound max + spares; keep-alive
 * retirement; nesting; non-workers; and a thread start or an allocation
 * that fails inside begin.
 *
 * Linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=pthread_create
 * (tests/helpers.h, TU_FAULT_INJECTION).
 */
#define _GNU_SOURCE
#include <string.h>

#define TU_FAULT_INJECTION
#include "helpers.h"

#include "engine/locked.h"
#include "pool/pool.h"

/* How long a test waits for a pool that is expected to stay stuck. */
#define STUCK_NS (200 * TU_MS)

/* ---- the deadlock scenario ------------------------------------------- */

/*
 * Two waiters wait on `latch`, which a third task, queued behind them,
 * opens. Each waiter counts `started` down (after its begin when
 * `managed`), then waits, then counts `done` down.
 */
enum how { PLAIN, SECTION, MANAGED };

struct scene {
	enum how how;
	struct tu_latch go;      /* the waiters begin after it opens */
	struct tu_latch started; /* 2: both waiters wait (or are about to) */
	struct tu_latch latch;   /* opened by the third task */
	struct tu_latch done;    /* 2: both waiters are through */
	int begin_rc;            /* atomic: the worst begin result */
};

static bool
latch_open(void *ctx)
{
	return tu_latch_count(ctx) == 0;
}

static bool
latch_block(void *ctx)
{
	tu_latch_wait(ctx);
	return true;
}

static void
waiter_fn(void *arg)
{
	struct scene *s = arg;
	int rc = 0;

	tu_latch_wait(&s->go);
	switch (s->how) {
	case PLAIN:
		tu_latch_count_down(&s->started);
		tu_latch_wait(&s->latch);
		break;
	case SECTION:
		rc = tpe_blocking_begin();
		tu_latch_count_down(&s->started);
		tu_latch_wait(&s->latch);
		assert_int_equal(tpe_blocking_end(), 0);
		break;
	case MANAGED:
		tu_latch_count_down(&s->started);
		rc = tpe_managed_block(latch_open, latch_block, &s->latch);
		break;
	}
	if (rc != 0)
		__atomic_store_n(&s->begin_rc, rc, __ATOMIC_SEQ_CST);
	tu_latch_count_down(&s->done);
}

static void
opener_fn(void *arg)
{
	tu_latch_count_down(arg);
}

static void
scene_init(struct scene *s, enum how how)
{
	memset(s, 0, sizeof(*s));
	s->how = how;
	tu_latch_init(&s->go, 1);
	tu_latch_init(&s->started, 2);
	tu_latch_init(&s->latch, 1);
	tu_latch_init(&s->done, 2);
}

static void
scene_destroy(struct scene *s)
{
	tu_latch_destroy(&s->go);
	tu_latch_destroy(&s->started);
	tu_latch_destroy(&s->latch);
	tu_latch_destroy(&s->done);
}

static tpe_t *
scene_pool(enum tpe_queue_kind kind, size_t core, size_t max)
{
	return tu_pool_with(&(struct tu_pool_opts){ .core = core, .max = max,
	    .queue = kind, .capacity = kind == TPE_QUEUE_BOUNDED ? 4 : 0 });
}

/*
 * The scene on a pool: the waiters start (both workers of core 2 held),
 * the opener is queued (before or after the waiters begin, `late`), and
 * the waiters complete only when the pool runs the opener. Returns
 * whether they completed within STUCK_NS (plain) or TU_WAIT_BOUND;
 * always leaves the pool destroyed.
 */
static bool
run_scene(enum tpe_queue_kind kind, enum how how, bool late)
{
	size_t workers = 2;
	tpe_t *pool = scene_pool(kind, workers,
	    kind == TPE_QUEUE_PER_WORKER ? workers : 8);
	struct scene s;
	bool ok;

	scene_init(&s, how);
	assert_int_equal(tpe_execute(pool, waiter_fn, &s), 0);
	assert_int_equal(tpe_execute(pool, waiter_fn, &s), 0);
	if (late) {
		/* Both are blocked (inside their sections) before the task
		 * that would release them comes. */
		tu_latch_count_down(&s.go);
		assert_true(tu_latch_wait_for(&s.started, TU_WAIT_BOUND));
		assert_int_equal(tpe_execute(pool, opener_fn, &s.latch), 0);
	} else {
		/* The opener waits in the queue before they begin. */
		assert_int_equal(tpe_execute(pool, opener_fn, &s.latch), 0);
		tu_latch_count_down(&s.go);
		assert_true(tu_latch_wait_for(&s.started, TU_WAIT_BOUND));
	}
	ok = tu_latch_wait_for(&s.done, how == PLAIN ? STUCK_NS :
	    TU_WAIT_BOUND);
	/* Release them whatever happened, so the pool ends cleanly. */
	tu_latch_count_down(&s.latch);
	assert_int_equal(tpe_destroy(pool), 0);
	assert_int_equal(tu_latch_count(&s.done), 0);
	assert_int_equal(__atomic_load_n(&s.begin_rc, __ATOMIC_SEQ_CST), 0);
	scene_destroy(&s);
	return ok;
}

static void
test_blocking_deadlock_without_calls(void **state)
{
	(void)state;
	/* Core 2, max 8, unbounded queue: the pool never grows, the opener
	 * waits behind the waiters for ever. */
	assert_false(run_scene(TPE_QUEUE_UNBOUNDED, PLAIN, false));
	assert_false(run_scene(TPE_QUEUE_UNBOUNDED, PLAIN, true));
}

static void
test_blocking_deadlock_lifted(void **state)
{
	(void)state;
	assert_true(run_scene(TPE_QUEUE_UNBOUNDED, SECTION, false));
	assert_true(run_scene(TPE_QUEUE_UNBOUNDED, SECTION, true));
	assert_true(run_scene(TPE_QUEUE_UNBOUNDED, MANAGED, false));
	assert_true(run_scene(TPE_QUEUE_UNBOUNDED, MANAGED, true));
	assert_true(run_scene(TPE_QUEUE_BOUNDED, SECTION, true));
}

static void
test_blocking_per_worker_deadlock(void **state)
{
	(void)state;
	assert_false(run_scene(TPE_QUEUE_PER_WORKER, PLAIN, true));
	assert_true(run_scene(TPE_QUEUE_PER_WORKER, SECTION, false));
	assert_true(run_scene(TPE_QUEUE_PER_WORKER, SECTION, true));
	assert_true(run_scene(TPE_QUEUE_PER_WORKER, MANAGED, true));
}

/* ---- a task queued while the pool was paused --------------------------- */

/*
 * A pool of one whose worker is inside a section; the pool is paused and
 * the task that would release the worker is submitted. A paused pool
 * starts no thread, so that submission stood in for nobody; tpe_resume
 * must do what it would have done (engine/blocking.c) and start a worker
 * for the queued task. The blocked task waits on a semaphore that only
 * the queued task posts. The per-worker pool stands in at the begin
 * already (a slot is handed over, paused or not).
 */
struct held {
	struct tu_latch inside; /* the task is inside its section */
	sem_t released;         /* posted by the queued task only */
	int ok;                 /* atomic: the task was released */
};

static void
held_fn(void *arg)
{
	struct held *h = arg;

	assert_int_equal(tpe_blocking_begin(), 0);
	tu_latch_count_down(&h->inside);
	if (tu_sem_wait_for(&h->released, TU_WAIT_BOUND))
		__atomic_store_n(&h->ok, 1, __ATOMIC_SEQ_CST);
	assert_int_equal(tpe_blocking_end(), 0);
}

static void
test_blocking_resume_stands_in(void **state)
{
	static const enum tpe_queue_kind kinds[] = { TPE_QUEUE_UNBOUNDED,
	    TPE_QUEUE_BOUNDED, TPE_QUEUE_PER_WORKER };
	size_t k;

	(void)state;
	for (k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		tpe_t *pool = scene_pool(kinds[k], 1, 1);
		struct held h;
		struct tpe_stats st;

		memset(&h, 0, sizeof(h));
		tu_latch_init(&h.inside, 1);
		assert_int_equal(sem_init(&h.released, 0, 0), 0);
		assert_int_equal(tpe_execute(pool, held_fn, &h), 0);
		assert_true(tu_latch_wait_for(&h.inside, TU_WAIT_BOUND));
		assert_int_equal(tpe_pause(pool), 0);
		assert_int_equal(tpe_execute(pool, tu_post_fn, &h.released),
		    0);
		assert_int_equal(tpe_resume(pool), 0);
		/* Started by the resume (or the begin), under the lock:
		 * there before tpe_resume returns; a spare, it stays. */
		st = tu_stats(pool);
		assert_int_equal(st.compensations, 1);
		assert_int_equal(st.pool_size, 2);
		assert_int_equal(tpe_wait_idle(pool, TU_WAIT_BOUND), 0);
		assert_int_equal(__atomic_load_n(&h.ok, __ATOMIC_SEQ_CST), 1);
		assert_int_equal(tpe_destroy(pool), 0);
		tu_latch_destroy(&h.inside);
		sem_destroy(&h.released);
	}
}

/* ---- futures of the same pool ----------------------------------------- */

struct future_scene {
	struct tu_latch go, started, done;
	tpe_future_t *f;        /* the queued task's */
	int result;             /* atomic: the waiters' get results, or'd */
};

static bool
future_done(void *ctx)
{
	return tpe_future_is_done(ctx);
}

static bool
future_block(void *ctx)
{
	void *r;

	return tpe_future_get(ctx, -1, &r) == 0;
}

static void
future_waiter_fn(void *arg)
{
	struct future_scene *s = arg;

	tu_latch_wait(&s->go);
	tu_latch_count_down(&s->started);
	assert_int_equal(tpe_managed_block(future_done, future_block, s->f),
	    0);
	tu_latch_count_down(&s->done);
}

static void
test_blocking_future_get(void **state)
{
	static const enum tpe_queue_kind kinds[] = { TPE_QUEUE_UNBOUNDED,
	    TPE_QUEUE_PER_WORKER };
	size_t k;
	int count = 0;

	(void)state;
	for (k = 0; k < 2; k++) {
		tpe_t *pool = scene_pool(kinds[k], 2,
		    kinds[k] == TPE_QUEUE_PER_WORKER ? 2 : 8);
		struct future_scene s;

		memset(&s, 0, sizeof(s));
		tu_latch_init(&s.go, 1);
		tu_latch_init(&s.started, 2);
		tu_latch_init(&s.done, 2);
		assert_int_equal(tpe_execute(pool, future_waiter_fn, &s), 0);
		assert_int_equal(tpe_execute(pool, future_waiter_fn, &s), 0);
		/* Queued behind the two waiters, which hold both workers. */
		assert_int_equal(tpe_submit(pool, tu_count_call, &count, &s.f),
		    0);
		tu_latch_count_down(&s.go);
		assert_true(tu_latch_wait_for(&s.done, TU_WAIT_BOUND));
		assert_true(tpe_future_is_done(s.f));
		tpe_future_release(s.f);
		assert_int_equal(tpe_destroy(pool), 0);
		tu_latch_destroy(&s.go);
		tu_latch_destroy(&s.started);
		tu_latch_destroy(&s.done);
	}
	assert_int_equal(tu_load(&count), 2);
}

/* ---- the bound: max + spares ------------------------------------------ */

#define MANY 1000

struct many {
	struct tu_latch go;     /* the tasks begin after it opens */
	sem_t inside;           /* posted by each task inside its section */
	struct tu_latch gate;   /* the tasks wait on it */
	int eagain;             /* atomic: begins that could not compensate */
	int ran;                /* atomic */
};

static void
many_fn(void *arg)
{
	struct many *m = arg;
	int rc;

	tu_latch_wait(&m->go);
	rc = tpe_blocking_begin();
	if (rc != 0) {
		assert_int_equal(rc, EAGAIN);
		__atomic_add_fetch(&m->eagain, 1, __ATOMIC_SEQ_CST);
	}
	sem_post(&m->inside);
	tu_latch_wait(&m->gate);
	assert_int_equal(tpe_blocking_end(), 0);
	__atomic_add_fetch(&m->ran, 1, __ATOMIC_SEQ_CST);
}

static tpe_t *
spare_pool(enum tpe_queue_kind kind, size_t core, size_t max, size_t spares,
    int64_t keep_alive)
{
	tpe_attr_t *a = tu_attr_with(&(struct tu_pool_opts){ .core = core,
	    .max = max, .queue = kind, .keep_alive = keep_alive });
	tpe_t *pool;

	assert_int_equal(tpe_attr_set_max_spare_threads(a, spares), 0);
	assert_int_equal(tpe_create(&pool, a), 0);
	tpe_attr_destroy(a);
	return pool;
}

static void
many_block(enum tpe_queue_kind kind, size_t core, size_t max, size_t spares)
{
	tpe_t *pool = spare_pool(kind, core, max, spares, 0);
	struct many m;
	struct tpe_stats st;
	size_t i;

	memset(&m, 0, sizeof(m));
	sem_init(&m.inside, 0, 0);
	tu_latch_init(&m.gate, 1);
	tu_latch_init(&m.go, 1);
	for (i = 0; i < MANY; i++)
		assert_int_equal(tpe_execute(pool, many_fn, &m), 0);
	/* All queued before the first begin: each begin finds work. */
	tu_latch_count_down(&m.go);
	/* Every thread the pool may have is inside a section... */
	for (i = 0; i < max + spares; i++)
		assert_true(tu_sem_wait_for(&m.inside, TU_WAIT_BOUND));
	st = tu_stats(pool);
	assert_int_equal(st.pool_size, max + spares);
	assert_int_equal(st.largest_pool_size, max + spares);
	assert_int_equal(st.blocked, max + spares);
	/* ...and the last begins found the limit. */
	assert_true(__atomic_load_n(&m.eagain, __ATOMIC_SEQ_CST) >= 1);
	assert_int_equal(st.compensations, max + spares - core);
	tu_latch_count_down(&m.gate);
	assert_int_equal(tpe_shutdown(pool), 0);
	assert_int_equal(tpe_await_termination(pool, TU_WAIT_BOUND), 0);
	st = tu_stats(pool);
	assert_true(st.largest_pool_size <= max + spares);
	assert_int_equal(st.completed, MANY);
	assert_int_equal(tu_ran(&m), MANY);
	assert_int_equal(tpe_destroy(pool), 0);
	sem_destroy(&m.inside);
	tu_latch_destroy(&m.gate);
	tu_latch_destroy(&m.go);
}

static void
test_blocking_bounded_by_spares(void **state)
{
	(void)state;
	many_block(TPE_QUEUE_UNBOUNDED, 2, 4, 4);
	many_block(TPE_QUEUE_PER_WORKER, 2, 2, 3);
}

/* ---- scale-first: a blocked worker is no capacity ---------------------- */

struct sf {
	struct tu_latch inside;  /* the blocked task is inside its section */
	struct tu_latch latch;   /* opened by the last task */
};

static void
sf_blocked_fn(void *arg)
{
	struct sf *s = arg;

	assert_int_equal(tpe_blocking_begin(), 0);
	tu_latch_count_down(&s->inside);
	tu_latch_wait(&s->latch);
	assert_int_equal(tpe_blocking_end(), 0);
}

/*
 * Scale-first, core 1, max 2, one spare: one worker busy (not blocked),
 * the other blocked. The next task must get a thread of its own (step 3
 * counts the running workers only), not the queue behind them.
 */
static void
test_blocking_scale_first(void **state)
{
	tpe_attr_t *a = tu_attr_with(&(struct tu_pool_opts){ .core = 1,
	    .max = 2, .policy = TPE_POLICY_SCALE_FIRST });
	struct tu_latch started, gate;
	struct tu_blocker busy = { &started, &gate, NULL, 0 };
	struct sf s;
	struct tpe_stats st;
	tpe_t *pool;

	(void)state;
	assert_int_equal(tpe_attr_set_max_spare_threads(a, 1), 0);
	assert_int_equal(tpe_create(&pool, a), 0);
	tpe_attr_destroy(a);
	tu_latch_init(&started, 1);
	tu_latch_init(&gate, 1);
	tu_latch_init(&s.inside, 1);
	tu_latch_init(&s.latch, 1);
	assert_int_equal(tpe_execute(pool, tu_blocker_fn, &busy), 0);
	assert_true(tu_latch_wait_for(&started, TU_WAIT_BOUND));
	assert_int_equal(tpe_execute(pool, sf_blocked_fn, &s), 0);
	assert_true(tu_latch_wait_for(&s.inside, TU_WAIT_BOUND));
	assert_int_equal(tpe_execute(pool, opener_fn, &s.latch), 0);
	assert_true(tu_latch_wait_for(&s.latch, TU_WAIT_BOUND));
	st = tu_stats(pool);
	assert_int_equal(st.largest_pool_size, 3);
	assert_int_equal(st.compensations, 1);
	tu_latch_count_down(&gate);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_latch_destroy(&started);
	tu_latch_destroy(&gate);
	tu_latch_destroy(&s.inside);
	tu_latch_destroy(&s.latch);
}

/* ---- the rules of compensation ---------------------------------------- */

/*
 * Core 2, max 4: one worker busy, one blocked; a third task gets a worker
 * of its own (step 1 counts the running workers only, a stand-in). Two
 * run, as many as the core size: a fourth task waits in the queue and
 * nobody is started for it (the compensation floor is the core size).
 */
static void
test_blocking_compensation_floor(void **state)
{
	tpe_t *pool = scene_pool(TPE_QUEUE_UNBOUNDED, 2, 4);
	struct tu_latch started, gate;
	struct tu_blocker busy[2] = { { &started, &gate, NULL, 0 },
	    { &started, &gate, NULL, 0 } };
	struct tpe_stats st;
	struct sf s;
	int count = 0;

	(void)state;
	tu_latch_init(&started, 1);
	tu_latch_init(&gate, 1);
	tu_latch_init(&s.inside, 1);
	tu_latch_init(&s.latch, 1);
	assert_int_equal(tpe_execute(pool, tu_blocker_fn, &busy[0]), 0);
	assert_int_equal(tpe_execute(pool, sf_blocked_fn, &s), 0);
	assert_true(tu_latch_wait_for(&s.inside, TU_WAIT_BOUND));
	assert_true(tu_latch_wait_for(&started, TU_WAIT_BOUND));
	tu_latch_destroy(&started);
	tu_latch_init(&started, 1);
	assert_int_equal(tpe_execute(pool, tu_blocker_fn, &busy[1]), 0);
	assert_true(tu_latch_wait_for(&started, TU_WAIT_BOUND));
	assert_int_equal(tu_stats(pool).compensations, 1);
	/* Decided under the lock before tpe_execute returns. */
	assert_int_equal(tpe_execute(pool, tu_count_fn, &count), 0);
	st = tu_stats(pool);
	assert_int_equal(st.pool_size, 3);
	assert_int_equal(st.compensations, 1);
	assert_int_equal(st.queued, 1);
	tu_latch_count_down(&gate);
	tu_latch_count_down(&s.latch);
	assert_int_equal(tpe_destroy(pool), 0);
	assert_int_equal(count, 1);
	tu_latch_destroy(&started);
	tu_latch_destroy(&gate);
	tu_latch_destroy(&s.inside);
	tu_latch_destroy(&s.latch);
}

/*
 * Core 0, max 2: step 1 never starts a worker, so the only stand-in for a
 * blocked worker is the one the submission makes after its offer
 * (ensure_taker_locked). Without it the task would wait behind the
 * blocked one for ever, as a core-size pool would.
 */
static void
test_blocking_submission_compensates(void **state)
{
	tpe_t *pool = scene_pool(TPE_QUEUE_UNBOUNDED, 0, 2);
	struct tpe_stats st;
	struct sf s;

	(void)state;
	tu_latch_init(&s.inside, 1);
	tu_latch_init(&s.latch, 1);
	assert_int_equal(tpe_execute(pool, sf_blocked_fn, &s), 0);
	assert_true(tu_latch_wait_for(&s.inside, TU_WAIT_BOUND));
	assert_int_equal(tu_stats(pool).pool_size, 1);
	assert_int_equal(tpe_execute(pool, opener_fn, &s.latch), 0);
	/* Started under the lock before tpe_execute returns; an idle
	 * worker above core stays for the keep-alive (60 s). */
	st = tu_stats(pool);
	assert_int_equal(st.compensations, 1);
	assert_int_equal(st.pool_size, 2);
	assert_int_equal(tpe_wait_idle(pool, TU_WAIT_BOUND), 0);
	assert_int_equal(tu_stats(pool).blocked, 0);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_latch_destroy(&s.inside);
	tu_latch_destroy(&s.latch);
}

/*
 * A worker begins a section while a task is queued and an idle worker
 * waits for it: that worker is woken to run it, no thread is started.
 * The state is built under the pool's lock: the second worker of a core-2
 * pool asleep in the locked engine's wait, a task offered to the queue
 * and no wake-up sent (a submitter between its unlock and its signal).
 */
struct beginner {
	struct tu_latch started, go, release;
	int begin_rc;
};

static void
beginner_fn(void *arg)
{
	struct beginner *b = arg;

	tu_latch_count_down(&b->started);
	tu_latch_wait(&b->go);
	b->begin_rc = tpe_blocking_begin();
	tu_latch_wait(&b->release);
	assert_int_equal(tpe_blocking_end(), 0);
}

/* One worker runs a task and the other sleeps in the engine's wait. */
static bool
one_asleep(tpe_t *pool)
{
	struct tpe__locked *le = (struct tpe__locked *)pool->engine;
	bool asleep;

	tpe__mutex_lock(&pool->lock);
	asleep = pool->active == 1 && le->takers == 1 && le->sleepers == 1;
	tpe__mutex_unlock(&pool->lock);
	return asleep;
}

static void
test_blocking_begin_wakes_idle_worker(void **state)
{
	tpe_t *pool = scene_pool(TPE_QUEUE_BOUNDED, 2, 4);
	struct tpe__locked *le = (struct tpe__locked *)pool->engine;
	struct tpe__task *t;
	struct beginner b;
	struct tpe_stats st;
	sem_t ran;
	char token = 0;

	(void)state;
	memset(&b, 0, sizeof(b));
	tu_latch_init(&b.started, 1);
	tu_latch_init(&b.go, 1);
	tu_latch_init(&b.release, 1);
	assert_int_equal(sem_init(&ran, 0, 0), 0);
	assert_int_equal(tpe_prestart_core_threads(pool, NULL), 0);
	assert_int_equal(tpe_execute(pool, beginner_fn, &b), 0);
	assert_true(tu_latch_wait_for(&b.started, TU_WAIT_BOUND));
	assert_true(TU_EVENTUALLY(one_asleep(pool), TU_WAIT_BOUND));
	t = tpe__task_new(&pool->tasks, tu_post_fn, &ran, NULL, &token);
	assert_non_null(t);
	tpe__mutex_lock(&pool->lock);
	assert_int_equal(le->q->ops->offer(le->q, t, le->takers), 0);
	tpe__pool_count_submitted(pool, 1);
	tpe__mutex_unlock(&pool->lock);
	tu_latch_count_down(&b.go);
	/* Only the begin wakes the sleeper. */
	assert_true(tu_sem_wait_for(&ran, TU_WAIT_BOUND));
	st = tu_stats(pool);
	assert_int_equal(st.compensations, 0);
	assert_int_equal(st.largest_pool_size, 2);
	tu_latch_count_down(&b.release);
	assert_int_equal(tpe_destroy(pool), 0);
	/* Written after the begin returned, which the wake-up may precede. */
	assert_int_equal(b.begin_rc, 0);
	tu_latch_destroy(&b.started);
	tu_latch_destroy(&b.go);
	tu_latch_destroy(&b.release);
	sem_destroy(&ran);
}

/* ---- spares stay until the keep-alive --------------------------------- */

/*
 * Core 1, max 1: the blocked task's latch is opened by a task that a
 * compensating worker runs. Once both are done the pool has 2 workers: the
 * spare stays for the keep-alive (60 s) instead of leaving after its task
 * as Java's above-max rule would have it (each worker makes its exit
 * decision under the lock, before tpe_wait_idle can return).
 */
static void
test_blocking_spares_stay(void **state)
{
	tpe_t *pool = scene_pool(TPE_QUEUE_UNBOUNDED, 1, 1);
	struct sf s;
	struct tpe_stats st;

	(void)state;
	tu_latch_init(&s.inside, 1);
	tu_latch_init(&s.latch, 1);
	assert_int_equal(tpe_execute(pool, sf_blocked_fn, &s), 0);
	assert_true(tu_latch_wait_for(&s.inside, TU_WAIT_BOUND));
	assert_int_equal(tpe_execute(pool, opener_fn, &s.latch), 0);
	assert_int_equal(tpe_wait_idle(pool, TU_WAIT_BOUND), 0);
	st = tu_stats(pool);
	assert_int_equal(st.compensations, 1);
	assert_int_equal(st.pool_size, 2);
	assert_int_equal(st.blocked, 0);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_latch_destroy(&s.inside);
	tu_latch_destroy(&s.latch);
}

/*
 * The spare is counted before its start returns: a compensating worker
 * that runs a task and makes its exit decision while the thread that
 * started it is still in pthread_create must see itself as a spare, not
 * as a worker above max (it left at once before the fix). Built: the
 * create wrapper holds the submitting thread after the thread exists
 * until the new worker ran the opener, and the opener waits until the
 * blocked task has left its section, so the decision comes with nobody
 * blocked and the start not yet returned.
 */
static struct tu_latch *early_opener_done;

static int
hold_after_create(pthread_t *thread, const pthread_attr_t *attr,
    void *(*start)(void *), void *arg)
{
	int rc = __real_pthread_create(thread, attr, start, arg);

	if (rc == 0 && !tu_latch_wait_for(early_opener_done, TU_WAIT_BOUND))
		fprintf(stderr, "spare counted early: the opener did not run\n");
	return rc;
}

struct early {
	struct tu_latch inside, latch, left, opener_done;
};

static void
early_blocked_fn(void *arg)
{
	struct early *e = arg;

	assert_int_equal(tpe_blocking_begin(), 0);
	tu_latch_count_down(&e->inside);
	tu_latch_wait(&e->latch);
	assert_int_equal(tpe_blocking_end(), 0);
	tu_latch_count_down(&e->left);
}

static void
early_opener_fn(void *arg)
{
	struct early *e = arg;

	tu_latch_count_down(&e->latch);
	(void)tu_latch_wait_for(&e->left, TU_WAIT_BOUND);
	tu_latch_count_down(&e->opener_done);
}

static void
test_blocking_spare_counted_before_start(void **state)
{
	tpe_t *pool = scene_pool(TPE_QUEUE_UNBOUNDED, 1, 1);
	struct early e;
	struct tpe_stats st;

	(void)state;
	tu_latch_init(&e.inside, 1);
	tu_latch_init(&e.latch, 1);
	tu_latch_init(&e.left, 1);
	tu_latch_init(&e.opener_done, 1);
	early_opener_done = &e.opener_done;
	assert_int_equal(tpe_execute(pool, early_blocked_fn, &e), 0);
	assert_true(tu_latch_wait_for(&e.inside, TU_WAIT_BOUND));
	create_around = hold_after_create;
	assert_int_equal(tpe_execute(pool, early_opener_fn, &e), 0);
	create_around = NULL;
	assert_int_equal(tpe_wait_idle(pool, TU_WAIT_BOUND), 0);
	st = tu_stats(pool);
	assert_int_equal(st.compensations, 1);
	assert_int_equal(st.pool_size, 2);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_latch_destroy(&e.inside);
	tu_latch_destroy(&e.latch);
	tu_latch_destroy(&e.left);
	tu_latch_destroy(&e.opener_done);
}

/*
 * The metrics (tpe_get_metrics(3)) report the blocked workers as a gauge
 * and the compensations as a counter that tpe_metrics_reset restarts;
 * the Prometheus text names them.
 */
static void
test_blocking_metrics(void **state)
{
	tpe_attr_t *a = tu_attr_with(&(struct tu_pool_opts){ .core = 1,
	    .max = 1 });
	struct tpe_metrics *m = malloc(sizeof(*m));
	char *text = malloc(1 << 20);
	struct sf s;
	tpe_t *pool;

	(void)state;
	assert_non_null(m);
	assert_non_null(text);
	assert_int_equal(tpe_attr_set_metrics(a, TPE_METRICS_ON), 0);
	assert_int_equal(tpe_create(&pool, a), 0);
	tpe_attr_destroy(a);
	tu_latch_init(&s.inside, 1);
	tu_latch_init(&s.latch, 1);
	assert_int_equal(tpe_execute(pool, sf_blocked_fn, &s), 0);
	assert_true(tu_latch_wait_for(&s.inside, TU_WAIT_BOUND));
	assert_int_equal(tpe_get_metrics(pool, m, sizeof(*m)), 0);
	assert_int_equal(m->blocked, 1);
	assert_int_equal(m->compensations, 0);
	assert_int_equal(tpe_execute(pool, opener_fn, &s.latch), 0);
	assert_int_equal(tpe_wait_idle(pool, TU_WAIT_BOUND), 0);
	assert_int_equal(tpe_get_metrics(pool, m, sizeof(*m)), 0);
	assert_int_equal(m->blocked, 0);
	assert_int_equal(m->compensations, 1);
	assert_int_equal(tpe_metrics_format_prometheus(text, 1 << 20, NULL, m,
	    sizeof(*m), "tpe", NULL), 0);
	assert_non_null(strstr(text, "tpe_compensations_total 1\n"));
	assert_non_null(strstr(text, "tpe_blocked_threads 0\n"));
	assert_int_equal(tpe_metrics_reset(pool), 0);
	assert_int_equal(tpe_get_metrics(pool, m, sizeof(*m)), 0);
	assert_int_equal(m->compensations, 0);
	assert_int_equal(tu_stats(pool).compensations, 1);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_latch_destroy(&s.inside);
	tu_latch_destroy(&s.latch);
	free(m);
	free(text);
}

/* ---- reserved threads see blocked workers as unavailable -------------- */

static void
test_blocking_reserve(void **state)
{
	tpe_attr_t *a = tu_attr_with(&(struct tu_pool_opts){ .core = 2,
	    .max = 2 });
	struct sf s[2];
	int count = 0, i, rc = EAGAIN;
	int64_t end;
	tpe_t *pool;

	(void)state;
	assert_int_equal(tpe_attr_set_reserved_threads(a, 1), 0);
	assert_int_equal(tpe_attr_set_max_spare_threads(a, 2), 0);
	assert_int_equal(tpe_create(&pool, a), 0);
	tpe_attr_destroy(a);
	/* Both workers of the pool blocked: at max, but none available. */
	for (i = 0; i < 2; i++) {
		tu_latch_init(&s[i].inside, 1);
		tu_latch_init(&s[i].latch, 1);
		assert_int_equal(tpe_execute(pool, sf_blocked_fn, &s[i]), 0);
		assert_true(tu_latch_wait_for(&s[i].inside, TU_WAIT_BOUND));
	}
	/* A miss starts a reserved thread (tpe_attr_set_reserved_threads(3):
	 * the pool starts hitting after its first misses). */
	end = tu_now_ns() + TU_WAIT_BOUND;
	while ((rc = tpe_try_execute(pool, tu_count_fn, &count)) == EAGAIN &&
	    tu_now_ns() < end)
		tu_sleep_ns(TU_MS);
	assert_int_equal(rc, 0);
	assert_int_equal(tu_stats(pool).pool_size, 3);
	for (i = 0; i < 2; i++)
		tu_latch_count_down(&s[i].latch);
	assert_int_equal(tpe_destroy(pool), 0);
	assert_int_equal(tu_load(&count), 1);
	for (i = 0; i < 2; i++) {
		tu_latch_destroy(&s[i].inside);
		tu_latch_destroy(&s[i].latch);
	}
}

/* ---- retirement after the keep-alive ---------------------------------- */

static void
test_blocking_spares_retire(void **state)
{
	static const enum tpe_queue_kind kinds[] = { TPE_QUEUE_UNBOUNDED,
	    TPE_QUEUE_PER_WORKER };
	size_t k, i;

	(void)state;
	for (k = 0; k < 2; k++) {
		tpe_t *pool = spare_pool(kinds[k], 2, 2, 6, 20 * TU_MS);
		struct many m;
		struct tpe_stats st;

		memset(&m, 0, sizeof(m));
		sem_init(&m.inside, 0, 0);
		tu_latch_init(&m.gate, 1);
		tu_latch_init(&m.go, 0);
		for (i = 0; i < 8; i++)
			assert_int_equal(tpe_execute(pool, many_fn, &m), 0);
		for (i = 0; i < 8; i++)
			assert_true(tu_sem_wait_for(&m.inside,
			    TU_WAIT_BOUND));
		assert_int_equal(tu_stats(pool).pool_size, 8);
		tu_latch_count_down(&m.gate);
		assert_int_equal(tpe_wait_idle(pool, TU_WAIT_BOUND), 0);
		/* The keep-alive (as the contract says: eventually). */
		assert_true(TU_EVENTUALLY(tu_stats(pool).pool_size == 2,
		    TU_WAIT_BOUND));
		st = tu_stats(pool);
		assert_int_equal(st.blocked, 0);
		assert_int_equal(st.completed, 8);
		assert_int_equal(st.largest_pool_size, 8);
		assert_int_equal(tpe_destroy(pool), 0);
		sem_destroy(&m.inside);
		tu_latch_destroy(&m.gate);
		tu_latch_destroy(&m.go);
	}
}

/* ---- nesting, non-workers, arguments ----------------------------------- */

struct nest {
	tpe_t *pool;
	size_t blocked[4];
	int extra_end;
};

static size_t
blocked_now(tpe_t *pool)
{
	struct tpe_stats st;

	assert_int_equal(tpe_get_stats(pool, &st, sizeof(st)), 0);
	return st.blocked;
}

static void
nest_fn(void *arg)
{
	struct nest *n = arg;

	assert_int_equal(tpe_blocking_begin(), 0);
	n->blocked[0] = blocked_now(n->pool);
	assert_int_equal(tpe_blocking_begin(), 0);
	n->blocked[1] = blocked_now(n->pool);
	assert_int_equal(tpe_blocking_end(), 0);
	n->blocked[2] = blocked_now(n->pool);
	assert_int_equal(tpe_blocking_end(), 0);
	n->blocked[3] = blocked_now(n->pool);
	n->extra_end = tpe_blocking_end();
}

/* Leaves its section open: the pool closes it after the task. */
static void
open_fn(void *arg)
{
	(void)arg;
	assert_int_equal(tpe_blocking_begin(), 0);
}

/*
 * A task that returned inside its section left it to the pool, which
 * closed it: the next task on the same thread (a pool of one) opens a
 * section of its own, counted as blocked again.
 */
struct after_open {
	tpe_t *pool;
	size_t inside, after;
};

static void
after_open_fn(void *arg)
{
	struct after_open *a = arg;

	assert_int_equal(tpe_blocking_begin(), 0);
	a->inside = blocked_now(a->pool);
	assert_int_equal(tpe_blocking_end(), 0);
	a->after = blocked_now(a->pool);
}

static void
test_blocking_left_open_section_closed(void **state)
{
	struct after_open a = { 0 };

	(void)state;
	a.pool = scene_pool(TPE_QUEUE_UNBOUNDED, 1, 1);
	assert_int_equal(tpe_execute(a.pool, open_fn, NULL), 0);
	assert_int_equal(tpe_wait_idle(a.pool, TU_WAIT_BOUND), 0);
	assert_int_equal(blocked_now(a.pool), 0);
	assert_int_equal(tpe_execute(a.pool, after_open_fn, &a), 0);
	assert_int_equal(tpe_wait_idle(a.pool, TU_WAIT_BOUND), 0);
	assert_int_equal(a.inside, 1);
	assert_int_equal(a.after, 0);
	assert_int_equal(blocked_now(a.pool), 0);
	assert_int_equal(tu_stats(a.pool).pool_size, 1);
	assert_int_equal(tpe_destroy(a.pool), 0);
}

/*
 * tpe_managed_block asks is_releasable before it opens a section: a
 * condition already met blocks nothing, counts the worker as blocked at
 * no moment, and starts nobody for the task queued behind it.
 */
struct releasable {
	tpe_t *pool;
	struct tu_latch go;
	int calls, blocks, rc;
	size_t blocked_seen; /* at the first call */
};

static bool
releasable_now(void *ctx)
{
	struct releasable *r = ctx;

	if (r->calls++ == 0)
		r->blocked_seen = blocked_now(r->pool);
	return true;
}

static bool
releasable_block(void *ctx)
{
	struct releasable *r = ctx;

	r->blocks++;
	return true;
}

static void
releasable_fn(void *arg)
{
	struct releasable *r = arg;

	tu_latch_wait(&r->go);
	r->rc = tpe_managed_block(releasable_now, releasable_block, r);
}

static void
test_blocking_managed_releasable_first(void **state)
{
	struct releasable r;
	struct tpe_stats st;
	int count = 0;

	(void)state;
	memset(&r, 0, sizeof(r));
	r.pool = scene_pool(TPE_QUEUE_UNBOUNDED, 1, 1);
	tu_latch_init(&r.go, 1);
	assert_int_equal(tpe_execute(r.pool, releasable_fn, &r), 0);
	/* Queued behind it: a section would start a worker for it. */
	assert_int_equal(tpe_execute(r.pool, tu_count_fn, &count), 0);
	tu_latch_count_down(&r.go);
	assert_int_equal(tpe_wait_idle(r.pool, TU_WAIT_BOUND), 0);
	st = tu_stats(r.pool);
	assert_int_equal(r.rc, 0);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.blocks, 0);
	assert_int_equal(r.blocked_seen, 0);
	assert_int_equal(st.compensations, 0);
	assert_int_equal(st.largest_pool_size, 1);
	assert_int_equal(tpe_destroy(r.pool), 0);
	assert_int_equal(count, 1);
	tu_latch_destroy(&r.go);
}

static void
test_blocking_nested(void **state)
{
	static const enum tpe_queue_kind kinds[] = { TPE_QUEUE_UNBOUNDED,
	    TPE_QUEUE_PER_WORKER };
	size_t k;

	(void)state;
	for (k = 0; k < 2; k++) {
		struct nest n = { 0 };

		n.pool = scene_pool(kinds[k], 1, 1);
		assert_int_equal(tpe_execute(n.pool, nest_fn, &n), 0);
		assert_int_equal(tpe_wait_idle(n.pool, TU_WAIT_BOUND), 0);
		assert_int_equal(n.blocked[0], 1);
		assert_int_equal(n.blocked[1], 1);
		assert_int_equal(n.blocked[2], 1);
		assert_int_equal(n.blocked[3], 0);
		assert_int_equal(n.extra_end, EINVAL);
		assert_int_equal(tpe_execute(n.pool, open_fn, NULL), 0);
		assert_int_equal(tpe_wait_idle(n.pool, TU_WAIT_BOUND), 0);
		assert_int_equal(blocked_now(n.pool), 0);
		/* A pool with nothing queued starts nobody; the per-worker
		 * one hands the slot over at once, to a spare. */
		if (kinds[k] == TPE_QUEUE_PER_WORKER)
			assert_true(tu_stats(n.pool).compensations >= 1);
		else
			assert_int_equal(tu_stats(n.pool).compensations, 0);
		assert_int_equal(tpe_destroy(n.pool), 0);
	}
}

/*
 * On a per-worker pool of one: the task's slot is handed over in its first
 * section, and the task queued behind it (which opens `adopted`) can run
 * only on the thread that took the slot; so the second section begins on
 * a thread without a slot.
 */
struct twice {
	struct tu_latch adopted;
	int rc[4];
};

static void
twice_fn(void *arg)
{
	struct twice *t = arg;

	t->rc[0] = tpe_blocking_begin();
	tu_latch_wait(&t->adopted);
	t->rc[1] = tpe_blocking_end();
	t->rc[2] = tpe_blocking_begin();
	t->rc[3] = tpe_blocking_end();
}

static void
test_blocking_per_worker_second_section(void **state)
{
	tpe_t *pool = scene_pool(TPE_QUEUE_PER_WORKER, 1, 1);
	struct twice t;
	struct tpe_stats st;
	int i;

	(void)state;
	memset(&t, 0, sizeof(t));
	tu_latch_init(&t.adopted, 1);
	assert_int_equal(tpe_execute(pool, twice_fn, &t), 0);
	assert_int_equal(tpe_execute(pool, opener_fn, &t.adopted), 0);
	assert_int_equal(tpe_wait_idle(pool, TU_WAIT_BOUND), 0);
	for (i = 0; i < 4; i++)
		assert_int_equal(t.rc[i], 0);
	st = tu_stats(pool);
	assert_int_equal(st.blocked, 0);
	assert_int_equal(st.completed, 2);
	assert_int_equal(st.active, 0);
	assert_true(st.compensations >= 1);
	/* Still a working pool. */
	assert_int_equal(tpe_execute(pool, opener_fn, &t.adopted), 0);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_latch_destroy(&t.adopted);
}

static int calls;

static bool
count_block(void *ctx)
{
	(void)ctx;
	return ++calls >= 3;
}

static bool
never(void *ctx)
{
	(void)ctx;
	return false;
}

static bool
always(void *ctx)
{
	(void)ctx;
	return true;
}

static void
test_blocking_non_worker(void **state)
{
	tpe_t *pool = scene_pool(TPE_QUEUE_UNBOUNDED, 1, 1);

	(void)state;
	/* Not a worker: nothing to do, nothing counted. */
	assert_int_equal(tpe_blocking_begin(), 0);
	assert_int_equal(tpe_blocking_begin(), 0);
	assert_int_equal(tpe_blocking_end(), 0);
	assert_int_equal(tpe_blocking_end(), 0);
	assert_int_equal(tpe_blocking_end(), 0);
	assert_int_equal(blocked_now(pool), 0);
	/* managed_block still blocks until done. */
	calls = 0;
	assert_int_equal(tpe_managed_block(never, count_block, NULL), 0);
	assert_int_equal(calls, 3);
	calls = 0;
	assert_int_equal(tpe_managed_block(NULL, count_block, NULL), 0);
	assert_int_equal(calls, 3);
	calls = 0;
	assert_int_equal(tpe_managed_block(always, count_block, NULL), 0);
	assert_int_equal(calls, 0);
	assert_int_equal(tpe_managed_block(always, NULL, NULL), EINVAL);
	assert_int_equal(tpe_destroy(pool), 0);
}

static void
test_blocking_attr(void **state)
{
	tpe_attr_t *a;

	(void)state;
	assert_int_equal(tpe_attr_set_max_spare_threads(NULL, 1), EINVAL);
	assert_int_equal(tpe_attr_create(&a), 0);
	assert_int_equal(tpe_attr_set_max_spare_threads(a,
	    TPE_MAX_SPARE_THREADS + 1), EINVAL);
	assert_int_equal(tpe_attr_set_max_spare_threads(a,
	    TPE_MAX_SPARE_THREADS), 0);
	assert_int_equal(tpe_attr_set_max_spare_threads(a, 0), 0);
	tpe_attr_destroy(a);
}

/* ---- failures inside begin -------------------------------------------- */

struct failing {
	struct fault *fault;
	struct tu_latch go;
	int begin_rc;
	struct tpe_stats inside;
	tpe_t *pool;
};

/* Arms the fault for its own thread, begins (a worker is needed: the
 * queue holds a task and nobody else runs), and goes on. */
static void
failing_fn(void *arg)
{
	struct failing *f = arg;

	tu_latch_wait(&f->go);
	fault_arm(f->fault, 0, -1, false);
	f->begin_rc = tpe_blocking_begin();
	fault_disarm(f->fault);
	assert_int_equal(tpe_get_stats(f->pool, &f->inside,
	    sizeof(f->inside)), 0);
	assert_int_equal(tpe_blocking_end(), 0);
}

static void
failing_begin(struct fault *fault, int want, enum tpe_queue_kind kind)
{
	struct failing f;
	struct tpe_stats st;
	int count = 0;

	memset(&f, 0, sizeof(f));
	f.fault = fault;
	f.pool = scene_pool(kind, 1, 1);
	tu_latch_init(&f.go, 1);
	assert_int_equal(tpe_execute(f.pool, failing_fn, &f), 0);
	assert_int_equal(tpe_execute(f.pool, tu_count_fn, &count), 0);
	tu_latch_count_down(&f.go);
	assert_int_equal(tpe_wait_idle(f.pool, TU_WAIT_BOUND), 0);
	/* The task went on, counted as blocked, and nothing else moved. */
	assert_int_equal(f.begin_rc, want);
	assert_int_equal(f.inside.blocked, 1);
	assert_int_equal(f.inside.pool_size, 1);
	assert_int_equal(f.inside.compensations, 0);
	/* The pool is whole: the queued task ran, and it takes more. */
	assert_int_equal(tu_load(&count), 1);
	assert_int_equal(tpe_execute(f.pool, tu_count_fn, &count), 0);
	assert_int_equal(tpe_wait_idle(f.pool, TU_WAIT_BOUND), 0);
	st = tu_stats(f.pool);
	assert_int_equal(st.blocked, 0);
	assert_int_equal(st.pool_size, 1);
	assert_int_equal(st.completed, 3);
	assert_int_equal(tpe_destroy(f.pool), 0);
	assert_int_equal(tu_load(&count), 2);
	tu_latch_destroy(&f.go);
}

static void
test_blocking_begin_create_fails(void **state)
{
	(void)state;
	failing_begin(&create_fault, EAGAIN, TPE_QUEUE_UNBOUNDED);
	failing_begin(&create_fault, EAGAIN, TPE_QUEUE_PER_WORKER);
}

static void
test_blocking_begin_malloc_fails(void **state)
{
	(void)state;
	failing_begin(&malloc_fault, ENOMEM, TPE_QUEUE_UNBOUNDED);
	failing_begin(&malloc_fault, ENOMEM, TPE_QUEUE_PER_WORKER);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_blocking_deadlock_without_calls),
		cmocka_unit_test(test_blocking_deadlock_lifted),
		cmocka_unit_test(test_blocking_per_worker_deadlock),
		cmocka_unit_test(test_blocking_resume_stands_in),
		cmocka_unit_test(test_blocking_compensation_floor),
		cmocka_unit_test(test_blocking_submission_compensates),
		cmocka_unit_test(test_blocking_begin_wakes_idle_worker),
		cmocka_unit_test(test_blocking_future_get),
		cmocka_unit_test(test_blocking_bounded_by_spares),
		cmocka_unit_test(test_blocking_spares_retire),
		cmocka_unit_test(test_blocking_scale_first),
		cmocka_unit_test(test_blocking_spares_stay),
		cmocka_unit_test(test_blocking_spare_counted_before_start),
		cmocka_unit_test(test_blocking_metrics),
		cmocka_unit_test(test_blocking_reserve),
		cmocka_unit_test(test_blocking_nested),
		cmocka_unit_test(test_blocking_left_open_section_closed),
		cmocka_unit_test(test_blocking_managed_releasable_first),
		cmocka_unit_test(test_blocking_per_worker_second_section),
		cmocka_unit_test(test_blocking_non_worker),
		cmocka_unit_test(test_blocking_attr),
		cmocka_unit_test(test_blocking_begin_create_fails),
		cmocka_unit_test(test_blocking_begin_malloc_fails),
	};

	tu_time_bound(0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
