/* SPDX-License-Identifier: MIT */
/*
 * test_execute_wait.c - the blocking submit, tpe_execute_wait(3) and
 * tpe_submit_wait(3): waiting for room on bounded, hand-off and
 * scale-first pools, each event that makes room, each error, FIFO among
 * waiters, shutdown waking them, EDEADLK, and races with barriers.
 *
 * A waiter is known to be in the line through the white-box hook
 * tpe__submit_joined_hook, which the library calls under the pool's lock
 * just before the waiter sleeps: the test then acts on an exact state.
 */
#define TU_FAULT_INJECTION /* this binary links the --wrap wrappers */
#include "helpers.h"

#include "engine/locked.h"
#include "pool/pool.h"

/* ---- helpers ---------------------------------------------------------- */

static sem_t joined; /* posted by every submitter that joins a line */

static void
joined_hook(tpe_t *pool)
{
	(void)pool;
	sem_post(&joined);
}

static int
setup(void **state)
{
	(void)state;
	assert_int_equal(sem_init(&joined, 0, 0), 0);
	tpe__submit_joined_hook = joined_hook;
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	tpe__submit_joined_hook = NULL;
	/* Every join was waited for by the test that caused it. */
	assert_int_equal(sem_trywait(&joined), -1);
	sem_destroy(&joined);
	return 0;
}

static void
assert_joined(void)
{
	assert_true(tu_sem_wait_for(&joined, TU_WAIT_BOUND));
}

/* A thread blocked in tpe_execute_wait or tpe_submit_wait. */
struct waiter {
	pthread_t thread;
	tpe_t *pool;
	tpe_fn fn;           /* execute: the task */
	tpe_call_fn call;    /* submit: the callable */
	void *arg;
	int64_t timeout;
	tpe_future_t *future;
	int rc;
	struct tu_latch done;
};

static void *
waiter_main(void *arg)
{
	struct waiter *w = arg;

	if (w->call != NULL)
		w->rc = tpe_submit_wait(w->pool, w->call, w->arg, w->timeout,
		    &w->future);
	else
		w->rc = tpe_execute_wait(w->pool, w->fn, w->arg, w->timeout);
	tu_latch_count_down(&w->done);
	return NULL;
}

/* Starts w and returns once it waits in the pool's line. */
static void
waiter_start(struct waiter *w)
{
	tu_latch_init(&w->done, 1);
	assert_int_equal(pthread_create(&w->thread, NULL, waiter_main, w), 0);
	assert_joined();
}

/*
 * Waits for w's call to return (a wait without end, when the wake-up the
 * test is about is missing, fails here) and joins it. The tests wait
 * forever (timeout -1): a bounded wait would try once more at its
 * deadline and succeed, hiding a missing wake-up.
 */
static int
waiter_join(struct waiter *w)
{
	assert_true(tu_latch_wait_for(&w->done, TU_WAIT_BOUND));
	tu_latch_destroy(&w->done);
	assert_int_equal(pthread_join(w->thread, NULL), 0);
	return w->rc;
}

/* Asserts the task of a returned tpe_submit_wait ran and gave arg. */
static void
assert_future_result(tpe_future_t *f, void *arg)
{
	void *r = NULL;

	assert_int_equal(tpe_future_get(f, TU_WAIT_BOUND, &r), 0);
	assert_ptr_equal(r, arg);
	tpe_future_release(f);
}

static struct tpe_stats
stats(tpe_t *pool)
{
	return tu_stats(pool);
}

/* Shuts p down, waits for its end and destroys it: its last statistics. */
static struct tpe_stats
finish(tpe_t *pool)
{
	struct tpe_stats s;

	assert_int_equal(tpe_shutdown(pool), 0);
	assert_int_equal(tpe_await_termination(pool, TU_WAIT_BOUND), 0);
	s = stats(pool);
	assert_int_equal(tpe_destroy(pool), 0);
	return s;
}

/* ---- success ---------------------------------------------------------- */

static void
test_execute_wait_room(void **state)
{
	tpe_t *p = tu_pool(1, 1, TPE_QUEUE_BOUNDED, 2, TPE_REJECT_ABORT);
	tpe_future_t *f;
	int n = 0;

	(void)state;
	assert_int_equal(tpe_execute_wait(p, tu_count_fn, &n, -1), 0);
	assert_int_equal(tpe_execute_wait(p, tu_count_fn, &n, 0), 0);
	assert_int_equal(tpe_submit_wait(p, tu_count_call, &n, TU_S, &f), 0);
	assert_future_result(f, &n);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(n, 3);
}

/* A saturated pool of one worker, queue full: a waiter, then room. */
static void
waits_then_placed(tpe_t *p, size_t queued, bool submit)
{
	struct tu_saturation sat;
	struct waiter w = { .pool = p, .fn = tu_count_fn, .timeout = -1 };
	struct tpe_stats s;
	int n = 0;

	w.arg = &n;
	if (submit)
		w.call = tu_count_call;
	tu_saturate(p, 1, queued, &sat);
	waiter_start(&w);
	assert_int_equal(tu_load(&n), 0);
	assert_int_equal(stats(p).rejected, 0);
	tu_unsaturate(&sat);
	assert_int_equal(waiter_join(&w), 0);
	if (submit)
		assert_future_result(w.future, &n);
	s = finish(p);
	assert_int_equal(n, 1);
	assert_int_equal(s.rejected, 0);
	assert_int_equal(s.submitted, 1 + queued + 1);
	tu_saturation_destroy(&sat);
}

/* The worker taking the queued task makes the room, while that task
 * still runs (no worker waits for a task yet). */
static void
test_execute_wait_room_after_take(void **state)
{
	struct tu_latch started, g1, g2;
	struct tu_blocker r, q;
	struct waiter w = { .fn = tu_count_fn, .timeout = -1 };
	tpe_t *p;
	int n = 0;

	(void)state;
	tu_latch_init(&started, 2);
	tu_latch_init(&g1, 1);
	tu_latch_init(&g2, 1);
	r = (struct tu_blocker){ &started, &g1, NULL, 0 };
	q = (struct tu_blocker){ &started, &g2, NULL, 0 };
	p = tu_pool(1, 1, TPE_QUEUE_BOUNDED, 1, TPE_REJECT_ABORT);
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &r), 0);
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &q), 0);
	w.pool = p;
	w.arg = &n;
	waiter_start(&w);
	tu_latch_count_down(&g1);
	assert_int_equal(waiter_join(&w), 0);
	assert_true(tu_latch_wait_for(&started, TU_WAIT_BOUND));
	assert_int_equal(tu_load(&n), 0);
	tu_latch_count_down(&g2);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(n, 1);
	tu_latch_destroy(&started);
	tu_latch_destroy(&g1);
	tu_latch_destroy(&g2);
}

/*
 * Each way a pool can make a waiter wait and then place its task
 * (waits_then_placed): one row a case, as the cases were named, each with
 * its variants. Hand-off: the one worker is busy; it frees, goes idle,
 * takes the task.
 */
struct placed_row {
	const char *name;
	struct {
		struct tu_pool_opts pool;
		size_t queued;
		bool submit;
	} v[2];
	int nv;
};

static const struct placed_row placed_rows[] = {
	{ "test_execute_wait_bounded", { { { .core = 1, .max = 1,
	    .queue = TPE_QUEUE_BOUNDED, .capacity = 1 }, 1, false } }, 1 },
	{ "test_submit_wait_bounded", { { { .core = 1, .max = 1,
	    .queue = TPE_QUEUE_BOUNDED, .capacity = 1,
	    .rejection = TPE_REJECT_CALLER_RUNS }, 1, true } }, 1 },
	{ "test_execute_wait_handoff", {
	    { { .core = 1, .max = 1, .queue = TPE_QUEUE_HANDOFF,
		.rejection = TPE_REJECT_DISCARD }, 0, false },
	    { { .core = 0, .max = 1, .queue = TPE_QUEUE_HANDOFF }, 0,
		true } }, 2 },
	{ "test_execute_wait_scale_first", {
	    { { .core = 1, .max = 1, .queue = TPE_QUEUE_BOUNDED,
		.capacity = 1, .policy = TPE_POLICY_SCALE_FIRST }, 1, false },
	    { { .core = 0, .max = 1, .queue = TPE_QUEUE_HANDOFF,
		.policy = TPE_POLICY_SCALE_FIRST }, 0, true } }, 2 },
};

static void
test_execute_wait_placed(void **state)
{
	const struct placed_row *row = *state;
	int i;

	for (i = 0; i < row->nv; i++)
		waits_then_placed(tu_pool_with(&row->v[i].pool),
		    row->v[i].queued, row->v[i].submit);
}

/* A pool of `threads` started workers, one of them parked as a reserved
 * thread (tpe_try_execute's misses ask for it; test_reserved.c). */
static tpe_t *
pool_with_reserved(size_t core, size_t max, enum tpe_queue_kind kind,
    size_t cap)
{
	tpe_attr_t *a = tu_attr_with(&(struct tu_pool_opts){ .core = core,
	    .max = max, .queue = kind, .capacity = cap,
	    .keep_alive = 3600 * TU_S });
	size_t started;
	tpe_t *p;

	assert_int_equal(tpe_attr_set_reserved_threads(a, 1), 0);
	assert_int_equal(tpe_create(&p, a), 0);
	tpe_attr_destroy(a);
	assert_int_equal(tpe_prestart_core_threads(p, &started), 0);
	assert_true(TU_EVENTUALLY((tpe__locked_reserve_request((struct tpe__locked *)p->engine),
	    tu_stats(p).reserved == 1), TU_WAIT_BOUND));
	return p;
}

/*
 * A parked reserved thread takes no queued or handed-off task; a blocked
 * submitter does not wait for it to idle out. Hand-off: it is given the
 * task (a poll suffices). Bounded: a queued task already woke it to drain
 * the queue, which makes room.
 */
static void
test_execute_wait_reserved_thread(void **state)
{
	struct tu_saturation sat;
	sem_t ran;
	tpe_t *p;
	int n = 0;

	(void)state;
	assert_int_equal(sem_init(&ran, 0, 0), 0);
	/* One worker parked, the other started for a blocker: at max. */
	p = pool_with_reserved(1, 2, TPE_QUEUE_HANDOFF, 0);
	tu_saturate(p, 1, 0, &sat);
	assert_int_equal(tu_stats(p).pool_size, 2);
	assert_int_equal(tpe_execute_wait(p, tu_post_fn, &ran, 0), 0);
	assert_true(tu_sem_wait_for(&ran, TU_WAIT_BOUND));
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	tu_saturation_destroy(&sat);

	/* Both workers started, one parked, one running a blocker, a task
	 * queued behind it: the queued task wakes the parked thread (no
	 * other worker waits for tasks), which runs it, so the blocking
	 * submit finds room at once or once that thread has drained the
	 * queue, with the blocker still running either way. */
	p = pool_with_reserved(2, 2, TPE_QUEUE_BOUNDED, 1);
	tu_saturate(p, 1, 0, &sat);
	assert_int_equal(tpe_execute(p, tu_count_fn, &n), 0);
	assert_int_equal(tpe_execute_wait(p, tu_count_fn, &n, -1), 0);
	/* It may have waited in the line for that drain: its join is no
	 * later test's. */
	(void)sem_trywait(&joined);
	assert_true(TU_EVENTUALLY(tu_load(&n) == 2, TU_WAIT_BOUND));
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(n, 2);
	tu_saturation_destroy(&sat);
	sem_destroy(&ran);
}

/* Unbounded and per-worker pools never wait, whatever runs. */
static void
test_execute_wait_never_waits(void **state)
{
	struct tu_saturation sat;
	tpe_future_t *f;
	tpe_t *p;
	int n = 0;

	(void)state;
	p = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	tu_saturate(p, 1, 2, &sat);
	assert_int_equal(tpe_execute_wait(p, tu_count_fn, &n, 0), 0);
	assert_int_equal(tpe_submit_wait(p, tu_count_call, &n, 0, &f), 0);
	tu_unsaturate(&sat);
	assert_future_result(f, &n);
	assert_int_equal(tpe_destroy(p), 0);
	tu_saturation_destroy(&sat);

	p = tu_pool(2, 2, TPE_QUEUE_PER_WORKER, 0, TPE_REJECT_ABORT);
	assert_int_equal(tpe_execute_wait(p, tu_count_fn, &n, 0), 0);
	assert_int_equal(tpe_submit_wait(p, tu_count_call, &n, 0, &f), 0);
	assert_future_result(f, &n);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(n, 4);
}

/* ---- the events that make room --------------------------------------- */

/* tpe_remove and tpe_purge free a place without any task running. */
static void
test_execute_wait_remove_and_purge(void **state)
{
	struct tu_saturation sat;
	struct waiter w = { .fn = tu_count_fn, .timeout = -1 };
	tpe_future_t *queued;
	size_t purged;
	tpe_t *p;
	int n = 0, removed = 0;

	(void)state;
	p = tu_pool(1, 1, TPE_QUEUE_BOUNDED, 1, TPE_REJECT_ABORT);
	tu_saturate(p, 1, 0, &sat);
	assert_int_equal(tpe_execute(p, tu_count_fn, &removed), 0);
	w.pool = p;
	w.arg = &n;
	waiter_start(&w);
	assert_int_equal(tpe_remove(p, tu_count_fn, &removed), 0);
	assert_int_equal(waiter_join(&w), 0);

	/* The waiter's task is queued now; cancel it and wait behind it. */
	assert_int_equal(tpe_remove(p, tu_count_fn, &n), 0);
	assert_int_equal(tpe_submit(p, tu_count_call, &n, &queued), 0);
	waiter_start(&w);
	assert_int_equal(tpe_future_cancel(queued), 0);
	tpe_future_release(queued);
	assert_int_equal(tpe_purge(p, &purged), 0);
	assert_int_equal(purged, 1);
	assert_int_equal(waiter_join(&w), 0);

	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(n, 1);
	assert_int_equal(removed, 0);
	tu_saturation_destroy(&sat);
}

/* A purge frees two places at once: the first waiter, placed, wakes the
 * second (the room events wake only the oldest). */
static void
test_execute_wait_purge_two(void **state)
{
	struct tu_saturation sat;
	struct waiter w[2];
	tpe_future_t *f[2];
	size_t purged;
	tpe_t *p;
	int n = 0, i;

	(void)state;
	p = tu_pool(1, 1, TPE_QUEUE_BOUNDED, 2, TPE_REJECT_ABORT);
	tu_saturate(p, 1, 0, &sat);
	for (i = 0; i < 2; i++)
		assert_int_equal(tpe_submit(p, tu_count_call, &n, &f[i]), 0);
	for (i = 0; i < 2; i++) {
		w[i] = (struct waiter){ .pool = p, .fn = tu_count_fn,
		    .arg = &n, .timeout = -1 };
		waiter_start(&w[i]);
	}
	for (i = 0; i < 2; i++) {
		assert_int_equal(tpe_future_cancel(f[i]), 0);
		tpe_future_release(f[i]);
	}
	assert_int_equal(tpe_purge(p, &purged), 0);
	assert_int_equal(purged, 2);
	for (i = 0; i < 2; i++)
		assert_int_equal(waiter_join(&w[i]), 0);
	assert_int_equal(tu_stats(p).queued, 2);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(n, 2);
	tu_saturation_destroy(&sat);
}

/* A resize that raises max lets the waiter start a worker. */
static void
test_execute_wait_resize(void **state)
{
	struct tu_saturation sat;
	struct waiter w = { .fn = tu_post_fn, .timeout = -1 };
	sem_t ran;
	tpe_t *p;

	(void)state;
	assert_int_equal(sem_init(&ran, 0, 0), 0);
	p = tu_pool(1, 1, TPE_QUEUE_HANDOFF, 0, TPE_REJECT_ABORT);
	tu_saturate(p, 1, 0, &sat);
	w.pool = p;
	w.arg = &ran;
	waiter_start(&w);
	assert_int_equal(tpe_set_pool_size(p, 1, 2), 0);
	assert_int_equal(waiter_join(&w), 0);
	assert_true(tu_sem_wait_for(&ran, TU_WAIT_BOUND));
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	tu_saturation_destroy(&sat);
	sem_destroy(&ran);
}

/*
 * A worker that begins a blocking section (tpe_blocking_begin(3)) is no
 * longer running capacity: a submission would get a worker of its own
 * (step 1 counts the running workers only), so the waiter that waits for
 * room must be woken to try again. Hand-off, core 1, max 1: the one
 * worker busy, a waiter in the line, then the worker blocks.
 */
struct section {
	struct tu_latch started, go, inside, release;
};

static void
section_fn(void *arg)
{
	struct section *s = arg;

	tu_latch_count_down(&s->started);
	tu_latch_wait(&s->go);
	assert_int_equal(tpe_blocking_begin(), 0);
	tu_latch_count_down(&s->inside);
	tu_latch_wait(&s->release);
	assert_int_equal(tpe_blocking_end(), 0);
}

static void
test_execute_wait_worker_blocks(void **state)
{
	struct waiter w = { .fn = tu_count_fn, .timeout = -1 };
	struct section s;
	tpe_t *p;
	int n = 0;

	(void)state;
	tu_latch_init(&s.started, 1);
	tu_latch_init(&s.go, 1);
	tu_latch_init(&s.inside, 1);
	tu_latch_init(&s.release, 1);
	p = tu_pool(1, 1, TPE_QUEUE_HANDOFF, 0, TPE_REJECT_ABORT);
	assert_int_equal(tpe_execute(p, section_fn, &s), 0);
	assert_true(tu_latch_wait_for(&s.started, TU_WAIT_BOUND));
	w.pool = p;
	w.arg = &n;
	waiter_start(&w);
	tu_latch_count_down(&s.go);
	assert_true(tu_latch_wait_for(&s.inside, TU_WAIT_BOUND));
	/* Placed while the worker is still inside its section. */
	assert_int_equal(waiter_join(&w), 0);
	assert_int_equal(stats(p).compensations, 1);
	tu_latch_count_down(&s.release);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(n, 1);
	tu_latch_destroy(&s.started);
	tu_latch_destroy(&s.go);
	tu_latch_destroy(&s.inside);
	tu_latch_destroy(&s.release);
}

/* A paused pool makes the call wait; tpe_resume ends the wait. */
static void
test_execute_wait_paused(void **state)
{
	struct waiter w = { .fn = tu_count_fn, .timeout = -1 };
	tpe_t *p;
	int n = 0;

	(void)state;
	/* Bounded: the queue is full while paused. */
	p = tu_pool(1, 1, TPE_QUEUE_BOUNDED, 1, TPE_REJECT_ABORT);
	assert_int_equal(tpe_pause(p), 0);
	assert_int_equal(tpe_execute(p, tu_count_fn, &n), 0);
	w.pool = p;
	w.arg = &n;
	waiter_start(&w);
	assert_int_equal(tpe_resume(p), 0);
	assert_int_equal(waiter_join(&w), 0);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(n, 2);

	/* Hand-off: no worker may start while paused. */
	p = tu_pool(0, 1, TPE_QUEUE_HANDOFF, 0, TPE_REJECT_ABORT);
	assert_int_equal(tpe_pause(p), 0);
	w.pool = p;
	waiter_start(&w);
	assert_int_equal(tpe_resume(p), 0);
	assert_int_equal(waiter_join(&w), 0);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(n, 3);
}

/* ---- FIFO -------------------------------------------------------------- */

struct order {
	int next;
	int seq[8];
};

struct rec {
	struct order *o;
	int id;
};

static void
rec_fn(void *arg)
{
	struct rec *r = arg;
	int i = __atomic_fetch_add(&r->o->next, 1, __ATOMIC_SEQ_CST);

	r->o->seq[i] = r->id;
}

/*
 * Three waiters join in the order A, B, C (each known to be in the line
 * before the next starts); the one worker then frees one place at a time.
 * The queue is FIFO and one worker runs everything, so the order the tasks
 * ran is the order the waiters got in.
 */
static void
fifo(enum tpe_queue_kind kind, size_t cap, size_t queued)
{
	struct tu_saturation sat;
	struct order o = { 0 };
	struct rec r[4];
	struct waiter w[3];
	tpe_t *p;
	int i;

	p = tu_pool(1, 1, kind, cap, TPE_REJECT_ABORT);
	tu_saturate(p, 1, 0, &sat);
	r[0] = (struct rec){ &o, 0 };
	if (queued > 0)
		assert_int_equal(tpe_execute(p, rec_fn, &r[0]), 0);
	for (i = 0; i < 3; i++) {
		r[i + 1] = (struct rec){ &o, i + 1 };
		w[i] = (struct waiter){ .pool = p, .fn = rec_fn,
		    .arg = &r[i + 1], .timeout = -1 };
		waiter_start(&w[i]);
	}
	assert_int_equal(tpe__submit_waiting(p), 3);
	/* A poll behind them does not try. */
	assert_int_equal(tpe_execute_wait(p, rec_fn, &r[0], 0), ETIMEDOUT);
	tu_unsaturate(&sat);
	for (i = 0; i < 3; i++)
		assert_int_equal(waiter_join(&w[i]), 0);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(o.next, (int)queued + 3);
	for (i = 0; i < 3; i++)
		assert_int_equal(o.seq[(int)queued + i], i + 1);
	tu_saturation_destroy(&sat);
}

/*
 * Room that the head of the line waits for is the head's, even before it
 * wakes: a later call does not take it. The state is built under the
 * pool's lock: a waiter asleep in the line and a place in the queue freed
 * without the room's wake-up yet (a worker that took a task and signalled
 * the head, which has not got the lock back).
 */
static void
test_execute_wait_later_caller_keeps_out(void **state)
{
	struct tu_saturation sat;
	struct waiter w = { .fn = tu_count_fn, .timeout = -1 };
	struct tpe__task *queued;
	struct tpe__locked *le;
	tpe_t *p;
	int n = 0, later = 0;

	(void)state;
	p = tu_pool(1, 1, TPE_QUEUE_BOUNDED, 1, TPE_REJECT_ABORT);
	le = (struct tpe__locked *)p->engine;
	tu_saturate(p, 1, 1, &sat);
	w.pool = p;
	w.arg = &n;
	waiter_start(&w);
	tpe__mutex_lock(&p->lock);
	queued = le->q->ops->poll(le->q);
	assert_non_null(queued);
	tpe__pool_count_submitted(p, -1);
	tpe__mutex_unlock(&p->lock);
	/* The queue has room; the waiter has not seen it yet. */
	assert_int_equal(stats(p).queued, 0);
	assert_int_equal(tpe_execute_wait(p, tu_count_fn, &later, 0),
	    ETIMEDOUT);
	assert_int_equal(stats(p).queued, 0);
	assert_int_equal(tpe__submit_waiting(p), 1);
	/* The wake-up the room sends. */
	tpe__mutex_lock(&p->lock);
	tpe__pool_room_locked(p);
	tpe__mutex_unlock(&p->lock);
	assert_int_equal(waiter_join(&w), 0);
	tpe__task_free(&p->tasks, queued);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(n, 1);
	assert_int_equal(later, 0);
	tu_saturation_destroy(&sat);
}

static void
test_execute_wait_fifo(void **state)
{
	(void)state;
	fifo(TPE_QUEUE_BOUNDED, 1, 1);
	fifo(TPE_QUEUE_HANDOFF, 0, 0);
}

/* ---- errors ------------------------------------------------------------ */

static void
test_execute_wait_einval(void **state)
{
	tpe_t *p = tu_pool(1, 1, TPE_QUEUE_BOUNDED, 1, TPE_REJECT_ABORT);
	tpe_future_t *f = NULL;
	int n = 0;

	(void)state;
	assert_int_equal(tpe_execute_wait(NULL, tu_count_fn, &n, -1), EINVAL);
	assert_int_equal(tpe_execute_wait(p, NULL, &n, -1), EINVAL);
	assert_int_equal(tpe_submit_wait(NULL, tu_count_call, &n, -1, &f),
	    EINVAL);
	assert_int_equal(tpe_submit_wait(p, NULL, &n, -1, &f), EINVAL);
	assert_int_equal(tpe_submit_wait(p, tu_count_call, &n, -1, NULL),
	    EINVAL);
	assert_null(f);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(n, 0);
}

static void
test_execute_wait_ecanceled(void **state)
{
	static const enum tpe_queue_kind kinds[] = { TPE_QUEUE_BOUNDED,
	    TPE_QUEUE_HANDOFF, TPE_QUEUE_UNBOUNDED };
	tpe_future_t *f = NULL;
	size_t i;
	int n = 0;

	(void)state;
	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		tpe_t *p = tu_pool(1, 1, kinds[i],
		    kinds[i] == TPE_QUEUE_BOUNDED, TPE_REJECT_ABORT);

		assert_int_equal(tpe_shutdown(p), 0);
		assert_int_equal(tpe_execute_wait(p, tu_count_fn, &n, -1),
		    ECANCELED);
		assert_int_equal(tpe_submit_wait(p, tu_count_call, &n, -1, &f),
		    ECANCELED);
		assert_int_equal(tpe_destroy(p), 0);
	}
	assert_null(f);
	assert_int_equal(n, 0);
}

/* Waiters are woken by tpe_shutdown / tpe_shutdown_now: ECANCELED, their
 * tasks never ran, no rejection counted. */
static void
shutdown_wakes(bool now)
{
	struct tu_saturation sat;
	struct waiter w[2] = {
		{ .fn = tu_count_fn, .timeout = -1 },
		{ .call = tu_count_call, .timeout = 10 * TU_S },
	};
	struct tpe_stats s;
	tpe_t *p;
	int n = 0, i;

	p = tu_pool(1, 1, TPE_QUEUE_BOUNDED, 1, TPE_REJECT_ABORT);
	tu_saturate(p, 1, 1, &sat);
	for (i = 0; i < 2; i++) {
		w[i].pool = p;
		w[i].arg = &n;
		waiter_start(&w[i]);
	}
	if (now)
		assert_int_equal(tpe_shutdown_now(p, NULL, NULL), 0);
	else
		assert_int_equal(tpe_shutdown(p), 0);
	for (i = 0; i < 2; i++)
		assert_int_equal(waiter_join(&w[i]), ECANCELED);
	assert_int_equal(tpe__submit_waiting(p), 0);
	tu_unsaturate(&sat);
	s = finish(p);
	assert_int_equal(n, 0);
	assert_int_equal(s.rejected, 0);
	assert_int_equal(s.submitted, 2);
	tu_saturation_destroy(&sat);
}

static void
test_execute_wait_shutdown_wakes(void **state)
{
	(void)state;
	shutdown_wakes(false);
}

static void
test_execute_wait_shutdown_now_wakes(void **state)
{
	(void)state;
	shutdown_wakes(true);
}

static void
test_execute_wait_timeout(void **state)
{
	struct tu_saturation sat;
	tpe_future_t *f = NULL;
	tpe_t *p;
	int n = 0;

	(void)state;
	p = tu_pool(1, 1, TPE_QUEUE_BOUNDED, 1, TPE_REJECT_CALLER_RUNS);
	tu_saturate(p, 1, 1, &sat);
	/* 0 polls: no wait, no line. */
	assert_int_equal(tpe_execute_wait(p, tu_count_fn, &n, 0), ETIMEDOUT);
	assert_int_equal(tpe_submit_wait(p, tu_count_call, &n, 0, &f),
	    ETIMEDOUT);
	/* Positive: waits in the line, then gives up. */
	assert_int_equal(tpe_execute_wait(p, tu_count_fn, &n, TU_MS),
	    ETIMEDOUT);
	assert_joined();
	assert_int_equal(tpe_submit_wait(p, tu_count_call, &n, TU_MS, &f),
	    ETIMEDOUT);
	assert_joined();
	assert_null(f);
	assert_int_equal(tpe__submit_waiting(p), 0);
	/* Not a rejection: the policy (caller-runs) never ran. */
	assert_int_equal(stats(p).rejected, 0);
	assert_int_equal(stats(p).submitted, 2);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(n, 0);
	tu_saturation_destroy(&sat);
}

/*
 * A blocking submit that cannot be carried out fails at once with the
 * error, runs nothing and calls no rejection policy; with the fault gone,
 * the same call is taken. One row per way to fail:
 * - enomem: no memory for the task;
 * - no_thread: no worker alive and none can start: EAGAIN, not an endless
 *   wait;
 * - scale_first_unbounded_no_thread: scale-first on an unbounded queue
 *   refuses a task when no worker is idle and none can start: tpe_execute
 *   then calls the rejection policy (here caller-runs, which would run the
 *   task in this thread). A blocking submit never does: EAGAIN, nothing
 *   ran. Before the fix the blocking calls took every unbounded pool for
 *   one that never refuses and called tpe_execute (found by tests/chaos
 *   under TSan: "ran inside a blocking submit").
 */
struct failing_submit {
	const char *name;
	struct tu_pool_opts pool;
	struct fault *fault;
	bool any_thread;
	int err;
};

static const struct failing_submit failing_submits[] = {
	{ "test_execute_wait_enomem", { .core = 1, .max = 1,
	    .queue = TPE_QUEUE_BOUNDED, .capacity = 1 }, &malloc_fault,
	    false, ENOMEM },
	{ "test_execute_wait_no_thread", { .core = 0, .max = 1,
	    .queue = TPE_QUEUE_HANDOFF }, &create_fault, true, EAGAIN },
	{ "test_execute_wait_scale_first_unbounded_no_thread", { .core = 1,
	    .max = 2, .queue = TPE_QUEUE_UNBOUNDED,
	    .policy = TPE_POLICY_SCALE_FIRST,
	    .rejection = TPE_REJECT_CALLER_RUNS }, &create_fault, true,
	    EAGAIN },
};

static void
test_execute_wait_fails(void **state)
{
	const struct failing_submit *c = *state;
	tpe_future_t *f = NULL;
	tpe_t *p = tu_pool_with(&c->pool);
	int n = 0;

	fault_arm(c->fault, 0, -1, c->any_thread);
	assert_int_equal(tpe_execute_wait(p, tu_count_fn, &n, -1), c->err);
	assert_int_equal(tpe_submit_wait(p, tu_count_call, &n, -1, &f), c->err);
	assert_true(fault_disarm(c->fault) >= 2);
	assert_int_equal(n, 0);             /* not run here by the policy */
	assert_null(f);
	assert_int_equal(stats(p).rejected, 0);
	/* Without the fault, the same calls are taken at once. */
	assert_int_equal(tpe_execute_wait(p, tu_count_fn, &n, 0), 0);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(n, 1);
}

/* ---- EDEADLK ----------------------------------------------------------- */

/* A task that, once let go, makes a blocking submit to its own pool. */
struct self_submit {
	tpe_t *pool;
	struct tu_latch started, go, done;
	int64_t timeout;
	int *count;
	int rc;
};

static void
self_submit_fn(void *arg)
{
	struct self_submit *s = arg;

	tu_latch_count_down(&s->started);
	tu_latch_wait(&s->go);
	s->rc = tpe_execute_wait(s->pool, tu_count_fn, s->count, s->timeout);
	tu_latch_count_down(&s->done);
}

static void
self_submit_init(struct self_submit *s, tpe_t *p, int *count,
    int64_t timeout)
{
	s->pool = p;
	s->count = count;
	s->timeout = timeout;
	s->rc = -1;
	tu_latch_init(&s->started, 1);
	tu_latch_init(&s->go, 1);
	tu_latch_init(&s->done, 1);
}

static void
self_submit_destroy(struct self_submit *s)
{
	tu_latch_destroy(&s->started);
	tu_latch_destroy(&s->go);
	tu_latch_destroy(&s->done);
}

/* The only worker waits for room only it could make. */
static void
test_execute_wait_edeadlk(void **state)
{
	struct self_submit s;
	tpe_t *p;
	int n = 0;

	(void)state;
	p = tu_pool(1, 1, TPE_QUEUE_BOUNDED, 1, TPE_REJECT_ABORT);
	self_submit_init(&s, p, &n, TU_S);
	assert_int_equal(tpe_execute(p, self_submit_fn, &s), 0);
	assert_true(tu_latch_wait_for(&s.started, TU_WAIT_BOUND));
	assert_int_equal(tpe_execute(p, tu_count_fn, &n), 0); /* full */
	tu_latch_count_down(&s.go);
	assert_true(tu_latch_wait_for(&s.done, TU_WAIT_BOUND));
	assert_int_equal(s.rc, EDEADLK);
	self_submit_destroy(&s);
	assert_int_equal(tpe_wait_idle(p, TU_WAIT_BOUND), 0);

	/* A poll from the worker is not a wait: ETIMEDOUT. */
	self_submit_init(&s, p, &n, 0);
	assert_int_equal(tpe_execute(p, self_submit_fn, &s), 0);
	assert_true(tu_latch_wait_for(&s.started, TU_WAIT_BOUND));
	assert_int_equal(tpe_execute(p, tu_count_fn, &n), 0);
	tu_latch_count_down(&s.go);
	assert_true(tu_latch_wait_for(&s.done, TU_WAIT_BOUND));
	assert_int_equal(s.rc, ETIMEDOUT);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(n, 2);
	self_submit_destroy(&s);
}

/* Two workers: the first waits (the other may still make room), the
 * second would leave nobody: EDEADLK; it returns, and its worker makes
 * room for the first. */
static void
test_execute_wait_edeadlk_last_worker(void **state)
{
	struct self_submit s[2];
	tpe_t *p;
	int n = 0, i;

	(void)state;
	p = tu_pool(2, 2, TPE_QUEUE_BOUNDED, 1, TPE_REJECT_ABORT);
	for (i = 0; i < 2; i++) {
		self_submit_init(&s[i], p, &n, -1);
		assert_int_equal(tpe_execute(p, self_submit_fn, &s[i]), 0);
		assert_true(tu_latch_wait_for(&s[i].started, TU_WAIT_BOUND));
	}
	assert_int_equal(tpe_execute(p, tu_count_fn, &n), 0); /* full */
	tu_latch_count_down(&s[0].go);
	assert_joined();
	tu_latch_count_down(&s[1].go);
	assert_true(tu_latch_wait_for(&s[1].done, TU_WAIT_BOUND));
	assert_int_equal(s[1].rc, EDEADLK);
	assert_true(tu_latch_wait_for(&s[0].done, TU_WAIT_BOUND));
	assert_int_equal(s[0].rc, 0);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(n, 2);
	for (i = 0; i < 2; i++)
		self_submit_destroy(&s[i]);
}

/* A shrink below the number of waiting workers: one of them gives up
 * (EDEADLK), the other waits on and is placed. */
static void
test_execute_wait_edeadlk_after_shrink(void **state)
{
	struct self_submit s[2];
	struct tu_saturation sat;
	tpe_t *p;
	int n = 0, i, deadlk = 0, placed = 0;

	(void)state;
	p = tu_pool(3, 3, TPE_QUEUE_BOUNDED, 1, TPE_REJECT_ABORT);
	for (i = 0; i < 2; i++) {
		self_submit_init(&s[i], p, &n, -1);
		assert_int_equal(tpe_execute(p, self_submit_fn, &s[i]), 0);
		assert_true(tu_latch_wait_for(&s[i].started, TU_WAIT_BOUND));
	}
	tu_saturate(p, 1, 0, &sat);
	assert_int_equal(tpe_execute(p, tu_count_fn, &n), 0); /* full */
	for (i = 0; i < 2; i++) {
		tu_latch_count_down(&s[i].go);
		assert_joined();
	}
	assert_int_equal(tpe_set_pool_size(p, 2, 2), 0);
	/* Either may be the one that gives up. The other cannot return
	 * before the blocker does: no worker can take the queued task (the
	 * one that gave up leaves, above max, straight after its task). */
	assert_true(TU_EVENTUALLY(tu_latch_count(&s[0].done) == 0 ||
	    tu_latch_count(&s[1].done) == 0, TU_WAIT_BOUND));
	for (i = 0; i < 2; i++)
		if (tu_latch_count(&s[i].done) == 0)
			deadlk += s[i].rc == EDEADLK;
		else
			placed++;
	assert_int_equal(deadlk, 1);
	assert_int_equal(placed, 1);
	tu_unsaturate(&sat);
	placed = 0;
	for (i = 0; i < 2; i++) {
		assert_true(tu_latch_wait_for(&s[i].done, TU_WAIT_BOUND));
		placed += s[i].rc == 0;
	}
	assert_int_equal(placed, 1);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(n, 2);
	for (i = 0; i < 2; i++)
		self_submit_destroy(&s[i]);
	tu_saturation_destroy(&sat);
}

/* ---- races ------------------------------------------------------------- */

#define RACE_THREADS 4
#define RACE_TASKS 2000

struct race {
	tpe_t *pool;
	pthread_barrier_t start;
	int ran;              /* tasks that ran */
	int ok;               /* calls that returned 0 */
	int timed_out;
	int cancelled;
	int other;            /* any other result: a failure */
	bool random_timeouts;
	bool until_cancelled;
	struct tu_latch enough; /* counted down by tasks (shutdown race) */
};

static void
race_task(void *arg)
{
	struct race *r = arg;

	__atomic_add_fetch(&r->ran, 1, __ATOMIC_SEQ_CST);
	tu_latch_count_down(&r->enough);
}

static void *
race_submitter(void *arg)
{
	struct race *r = arg;
	unsigned seed = (unsigned)(uintptr_t)pthread_self();
	int i, rc;

	pthread_barrier_wait(&r->start);
	for (i = 0; r->until_cancelled || i < RACE_TASKS; i++) {
		int64_t timeout = -1;

		if (r->random_timeouts) {
			static const int64_t t[] = { 0, 1000, 100000, -1 };

			timeout = t[rand_r(&seed) % 4];
		}
		rc = tpe_execute_wait(r->pool, race_task, r, timeout);
		if (rc == 0)
			__atomic_add_fetch(&r->ok, 1, __ATOMIC_SEQ_CST);
		else if (rc == ETIMEDOUT)
			__atomic_add_fetch(&r->timed_out, 1, __ATOMIC_SEQ_CST);
		else if (rc == ECANCELED)
			__atomic_add_fetch(&r->cancelled, 1, __ATOMIC_SEQ_CST);
		else
			__atomic_add_fetch(&r->other, 1, __ATOMIC_SEQ_CST);
		if (rc == ECANCELED && r->until_cancelled)
			break;
	}
	return NULL;
}

/*
 * RACE_THREADS submitters, started on a barrier, against a small pool;
 * each task runs exactly when its call returned 0.
 */
static void
race(const struct tu_pool_opts *o, bool random_timeouts,
    bool until_cancelled)
{
	pthread_t th[RACE_THREADS];
	struct race r = { .random_timeouts = random_timeouts,
	    .until_cancelled = until_cancelled };
	struct tpe_stats s;
	int i;

	r.pool = tu_pool_with(o);
	tu_latch_init(&r.enough, 500);
	assert_int_equal(pthread_barrier_init(&r.start, NULL,
	    RACE_THREADS + 1), 0);
	tpe__submit_joined_hook = NULL; /* joins are not counted here */
	for (i = 0; i < RACE_THREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, race_submitter,
		    &r), 0);
	pthread_barrier_wait(&r.start);
	if (until_cancelled) {
		assert_true(tu_latch_wait_for(&r.enough, TU_WAIT_BOUND));
		assert_int_equal(tpe_shutdown(r.pool), 0);
	}
	for (i = 0; i < RACE_THREADS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	s = finish(r.pool);
	tpe__submit_joined_hook = joined_hook;
	assert_int_equal(r.other, 0);
	assert_int_equal(r.ran, r.ok);
	assert_int_equal(s.submitted, (uint64_t)r.ok);
	assert_int_equal(s.rejected, 0);
	if (!random_timeouts && !until_cancelled)
		assert_int_equal(r.ok, RACE_THREADS * RACE_TASKS);
	if (until_cancelled)
		assert_int_equal(r.cancelled, RACE_THREADS);
	pthread_barrier_destroy(&r.start);
	tu_latch_destroy(&r.enough);
}

static void
test_execute_wait_race(void **state)
{
	const struct tu_pool_opts opts[] = {
		{ .core = 1, .max = 2, .queue = TPE_QUEUE_BOUNDED,
		    .capacity = 2 },
		{ .core = 0, .max = 2, .queue = TPE_QUEUE_HANDOFF,
		    .keep_alive = TU_MS, .allow_core_timeout = false },
		{ .core = 1, .max = 2, .queue = TPE_QUEUE_BOUNDED,
		    .capacity = 1, .policy = TPE_POLICY_SCALE_FIRST,
		    .keep_alive = TU_MS },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		race(&opts[i], false, false);
		race(&opts[i], true, false);
		race(&opts[i], true, true);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_execute_wait_room),
		TU_ROW_TEST(test_execute_wait_placed, &placed_rows[0]),
		TU_ROW_TEST(test_execute_wait_placed, &placed_rows[1]),
		cmocka_unit_test(test_execute_wait_room_after_take),
		TU_ROW_TEST(test_execute_wait_placed, &placed_rows[2]),
		TU_ROW_TEST(test_execute_wait_placed, &placed_rows[3]),
		cmocka_unit_test(test_execute_wait_never_waits),
		cmocka_unit_test(test_execute_wait_reserved_thread),
		cmocka_unit_test(test_execute_wait_remove_and_purge),
		cmocka_unit_test(test_execute_wait_purge_two),
		cmocka_unit_test(test_execute_wait_resize),
		cmocka_unit_test(test_execute_wait_paused),
		cmocka_unit_test(test_execute_wait_worker_blocks),
		cmocka_unit_test(test_execute_wait_fifo),
		cmocka_unit_test(test_execute_wait_later_caller_keeps_out),
		cmocka_unit_test(test_execute_wait_einval),
		cmocka_unit_test(test_execute_wait_ecanceled),
		cmocka_unit_test(test_execute_wait_shutdown_wakes),
		cmocka_unit_test(test_execute_wait_shutdown_now_wakes),
		cmocka_unit_test(test_execute_wait_timeout),
		TU_ROW_TEST(test_execute_wait_fails, &failing_submits[0]),
		TU_ROW_TEST(test_execute_wait_fails, &failing_submits[1]),
		TU_ROW_TEST(test_execute_wait_fails, &failing_submits[2]),
		cmocka_unit_test(test_execute_wait_edeadlk),
		cmocka_unit_test(test_execute_wait_edeadlk_last_worker),
		cmocka_unit_test(test_execute_wait_edeadlk_after_shrink),
		cmocka_unit_test(test_execute_wait_race),
	};

	tu_time_bound(0);
	return cmocka_run_group_tests(tests, setup, teardown);
}
