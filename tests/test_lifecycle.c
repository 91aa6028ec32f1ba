/* SPDX-License-Identifier: MIT */
/*
 * test_lifecycle.c - shutdown, shutdown-now, termination, the terminated
 * hook, await_termination and destroy (Java behaviours 37-53 of
 * doc/java-behaviours.md), termination reached through tpe_remove/tpe_purge
 * (item 63) and the monotonic completed count (item 60).
 *
 * Helper threads, tasks and hooks never call cmocka's assert macros (they
 * would longjmp across threads): they record what they saw and the test
 * thread asserts it afterwards.
 */
#include <sched.h>
#include <semaphore.h>
#include <string.h>

#include "helpers.h"

/* ---- helpers ---------------------------------------------------------- */

/* Asserts the terminated-pool invariants (Java item 40, 53). */
static void
assert_terminated(tpe_t *pool, uint64_t submitted, uint64_t completed)
{
	struct tpe_stats s = tu_stats(pool);

	assert_true(tpe_is_shutdown(pool));
	assert_true(tpe_is_terminated(pool));
	assert_int_equal(tpe_await_termination(pool, 0), 0);
	assert_int_equal(tpe_await_termination(pool, -1), 0);
	assert_int_equal(s.pool_size, 0);
	assert_int_equal(s.active, 0);
	assert_int_equal(s.idle, 0);
	assert_int_equal(s.queued, 0);
	assert_int_equal(s.submitted, submitted);
	assert_int_equal(s.completed, completed);
}

/* Records every hand-back (drained or discard callback). */
#define HB_MAX 64
struct handback_log {
	pthread_mutex_t lock;
	tpe_t *pool;           /* to call into the pool from the callback */
	int n;
	tpe_fn fn[HB_MAX];
	void *arg[HB_MAX];
	bool shutdown_seen[HB_MAX]; /* tpe_is_shutdown inside the callback */
	int stats_rc[HB_MAX];       /* tpe_get_stats inside (proves no lock held) */
};

static void
hb_init(struct handback_log *l, tpe_t *pool)
{
	memset(l, 0, sizeof(*l));
	pthread_mutex_init(&l->lock, NULL);
	l->pool = pool;
}

static void
hb_fn(tpe_fn fn, void *arg, void *ctx)
{
	struct handback_log *l = ctx;
	struct tpe_stats s;

	pthread_mutex_lock(&l->lock);
	if (l->n < HB_MAX) {
		l->fn[l->n] = fn;
		l->arg[l->n] = arg;
		if (l->pool != NULL) {
			l->shutdown_seen[l->n] = tpe_is_shutdown(l->pool);
			l->stats_rc[l->n] = tpe_get_stats(l->pool, &s,
			    sizeof(s));
		}
	}
	l->n++;
	pthread_mutex_unlock(&l->lock);
}

static int
hb_count(struct handback_log *l)
{
	int n;

	pthread_mutex_lock(&l->lock);
	n = l->n;
	pthread_mutex_unlock(&l->lock);
	return n;
}

/* A terminated hook that records what it sees and may block on a gate. */
struct hook_state {
	int calls;                 /* atomic */
	pthread_t thread;
	bool saw_shutdown;
	bool saw_terminated;
	int await_poll;            /* tpe_await_termination(pool, 0) */
	int await_forever;         /* tpe_await_termination(pool, -1) */
	int await_timed;           /* tpe_await_termination(pool, 1 s) */
	int destroy_rc;            /* tpe_destroy(pool) */
	int stats_rc;
	struct tpe_stats stats;
	struct tu_latch *entered;  /* may be NULL */
	struct tu_latch *release;  /* may be NULL */
};

static void
hook_fn(tpe_t *pool, void *ctx)
{
	struct hook_state *h = ctx;

	h->thread = pthread_self();
	h->saw_shutdown = tpe_is_shutdown(pool);
	h->saw_terminated = tpe_is_terminated(pool);
	h->await_poll = tpe_await_termination(pool, 0);
	h->await_forever = tpe_await_termination(pool, -1);
	h->await_timed = tpe_await_termination(pool, TU_S);
	h->destroy_rc = tpe_destroy(pool);
	h->stats_rc = tpe_get_stats(pool, &h->stats, sizeof(h->stats));
	__atomic_add_fetch(&h->calls, 1, __ATOMIC_SEQ_CST);
	if (h->entered)
		tu_latch_count_down(h->entered);
	if (h->release)
		tu_latch_wait(h->release);
}

static void
assert_hook_saw_tidying(struct hook_state *h)
{
	assert_true(h->saw_shutdown);
	assert_false(h->saw_terminated);
	assert_int_equal(h->await_poll, ETIMEDOUT);
	assert_int_equal(h->await_forever, EDEADLK);
	assert_int_equal(h->await_timed, EDEADLK);
	assert_int_equal(h->destroy_rc, EDEADLK);
	assert_int_equal(h->stats_rc, 0);
	/* Java item 53: no worker is counted once the pool is TIDYING. */
	assert_int_equal(h->stats.pool_size, 0);
	assert_int_equal(h->stats.active, 0);
	assert_int_equal(h->stats.queued, 0);
}

/* A thread that waits for a pool's termination. */
struct waiter {
	pthread_t thread;
	tpe_t *pool;
	int64_t timeout;
	struct tu_latch *ready;   /* counted down just before waiting */
	int rc;
	int returned;             /* atomic: set right after the call returns */
};

static void *
waiter_main(void *arg)
{
	struct waiter *w = arg;

	if (w->ready)
		tu_latch_count_down(w->ready);
	w->rc = tpe_await_termination(w->pool, w->timeout);
	__atomic_store_n(&w->returned, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static void
waiter_start(struct waiter *w, tpe_t *pool, int64_t timeout,
    struct tu_latch *ready)
{
	memset(w, 0, sizeof(*w));
	w->pool = pool;
	w->timeout = timeout;
	w->ready = ready;
	assert_int_equal(pthread_create(&w->thread, NULL, waiter_main, w), 0);
}

static bool
waiter_returned(struct waiter *w)
{
	return __atomic_load_n(&w->returned, __ATOMIC_SEQ_CST) != 0;
}

/* ---- states and flags (items 38, 39, 40) ------------------------------ */

static void
test_lifecycle_fresh_pool_flags(void **state)
{
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);

	(void)state;
	assert_false(tpe_is_shutdown(pool));
	assert_false(tpe_is_terminated(pool));
	assert_int_equal(tpe_await_termination(pool, 0), ETIMEDOUT);
	assert_int_equal(tpe_shutdown(pool), 0);
	assert_true(tpe_is_shutdown(pool));
	/* No worker and an empty queue: terminated before shutdown returns. */
	assert_true(tpe_is_terminated(pool));
	assert_terminated(pool, 0, 0);
	assert_int_equal(tpe_destroy(pool), 0);
}

static void
test_lifecycle_shutdown_runs_queued_tasks(void **state)
{
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_BOUNDED, 10, TPE_REJECT_ABORT);
	struct tu_saturation sat;
	int counts[5] = { 0 };
	struct tpe_stats s;
	int i;

	(void)state;
	tu_saturate(pool, 1, 0, &sat);
	tu_fill_queue(pool, 5, tu_count_fn, counts, sizeof(counts[0]));

	assert_int_equal(tpe_shutdown(pool), 0);
	assert_true(tpe_is_shutdown(pool));
	assert_false(tpe_is_terminated(pool));
	assert_int_equal(tpe_await_termination(pool, 0), ETIMEDOUT);
	s = tu_stats(pool);
	assert_int_equal(s.queued, 5);     /* shutdown keeps the queue */
	assert_int_equal(s.pool_size, 1);
	assert_int_equal(s.active, 1);
	for (i = 0; i < 5; i++)
		assert_int_equal(tu_load(&counts[i]), 0);

	tu_unsaturate(&sat);
	assert_int_equal(tpe_await_termination(pool, -1), 0);
	for (i = 0; i < 5; i++)
		assert_int_equal(tu_load(&counts[i]), 1);
	assert_int_equal(tu_ran(&sat.b[0]), 1);
	assert_terminated(pool, 6, 6);
	s = tu_stats(pool);
	assert_int_equal(s.largest_pool_size, 1);
	assert_int_equal(s.rejected, 0);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_saturation_destroy(&sat);
}

/* ---- terminated hook (items 41, 45, 51, 52, 53) ---------------------- */

static void
test_lifecycle_terminated_hook_before_waiters(void **state)
{
	struct tu_latch entered, hook_release, ready;
	struct tu_saturation sat;
	struct hook_state h;
	struct waiter w1, w2;
	tpe_t *pool;

	(void)state;
	memset(&h, 0, sizeof(h));
	tu_latch_init(&entered, 1);
	tu_latch_init(&hook_release, 1);
	tu_latch_init(&ready, 2);
	h.entered = &entered;
	h.release = &hook_release;
	pool = tu_pool_with(&(struct tu_pool_opts){ .core = 1, .max = 1,
	    .terminated = hook_fn, .terminated_ctx = &h });

	tu_saturate(pool, 1, 0, &sat);
	waiter_start(&w1, pool, -1, &ready);
	waiter_start(&w2, pool, 3600 * TU_S, &ready);
	tu_latch_wait(&ready);

	assert_int_equal(tpe_shutdown(pool), 0);
	assert_int_equal(__atomic_load_n(&h.calls, __ATOMIC_SEQ_CST), 0);
	tu_unsaturate(&sat);                    /* the last worker exits... */
	tu_latch_wait(&entered);                /* ...and runs the hook */

	/* The hook is blocked: TIDYING, nobody woke. */
	assert_true(tpe_is_shutdown(pool));
	assert_false(tpe_is_terminated(pool));
	assert_int_equal(tpe_await_termination(pool, 0), ETIMEDOUT);
	assert_int_equal(tpe_await_termination(pool, 20 * TU_MS), ETIMEDOUT);
	assert_false(waiter_returned(&w1));
	assert_false(waiter_returned(&w2));

	/* Once the pool is terminated, every waiter wakes: one left asleep
	 * (a lost wake-up) fails here, not at the binary's time bound. */
	tu_latch_count_down(&hook_release);
	assert_true(TU_EVENTUALLY(tpe_is_terminated(pool), TU_WAIT_BOUND));
	assert_true(TU_EVENTUALLY(waiter_returned(&w1) &&
	    waiter_returned(&w2), TU_WAIT_BOUND));
	assert_int_equal(pthread_join(w1.thread, NULL), 0);
	assert_int_equal(pthread_join(w2.thread, NULL), 0);
	assert_int_equal(w1.rc, 0);
	assert_int_equal(w2.rc, 0);
	assert_int_equal(tpe_await_termination(pool, -1), 0);
	assert_true(tpe_is_terminated(pool));
	assert_int_equal(__atomic_load_n(&h.calls, __ATOMIC_SEQ_CST), 1);
	assert_hook_saw_tidying(&h);
	assert_terminated(pool, 1, 1);

	/* Item 45: idempotent after termination; the hook stays at one call. */
	assert_int_equal(tpe_shutdown(pool), 0);
	assert_int_equal(tpe_shutdown_now(pool, NULL, NULL), 0);
	assert_int_equal(tpe_shutdown(pool), 0);
	assert_true(tpe_is_terminated(pool));
	assert_int_equal(tpe_destroy(pool), 0);
	assert_int_equal(__atomic_load_n(&h.calls, __ATOMIC_SEQ_CST), 1);

	tu_saturation_destroy(&sat);
	tu_latch_destroy(&entered);
	tu_latch_destroy(&hook_release);
	tu_latch_destroy(&ready);
}

static void
test_lifecycle_shutdown_empty_pool_runs_hook_in_caller(void **state)
{
	struct hook_state h;
	tpe_t *pool;

	(void)state;
	memset(&h, 0, sizeof(h));
	pool = tu_pool_with(&(struct tu_pool_opts){ .core = 1, .max = 1,
	    .queue = TPE_QUEUE_HANDOFF, .terminated = hook_fn,
	    .terminated_ctx = &h });

	assert_int_equal(tpe_shutdown(pool), 0);
	/* Item 51: already ran, in this thread, before shutdown returned. */
	assert_int_equal(__atomic_load_n(&h.calls, __ATOMIC_SEQ_CST), 1);
	assert_true(pthread_equal(h.thread, pthread_self()));
	assert_hook_saw_tidying(&h);
	assert_true(tpe_is_terminated(pool));
	assert_int_equal(tpe_await_termination(pool, 0), 0);
	assert_int_equal(tpe_shutdown(pool), 0);
	assert_int_equal(tpe_destroy(pool), 0);
	assert_int_equal(__atomic_load_n(&h.calls, __ATOMIC_SEQ_CST), 1);
}

static void
test_lifecycle_shutdown_now_empty_pool_runs_hook_once(void **state)
{
	struct hook_state h;
	struct handback_log log;
	tpe_t *pool;

	(void)state;
	memset(&h, 0, sizeof(h));
	pool = tu_pool_with(&(struct tu_pool_opts){ .core = 2, .max = 2,
	    .terminated = hook_fn, .terminated_ctx = &h });
	hb_init(&log, NULL);

	assert_int_equal(tpe_shutdown_now(pool, hb_fn, &log), 0);
	assert_int_equal(__atomic_load_n(&h.calls, __ATOMIC_SEQ_CST), 1);
	assert_true(pthread_equal(h.thread, pthread_self()));
	assert_hook_saw_tidying(&h);
	assert_int_equal(hb_count(&log), 0);
	assert_terminated(pool, 0, 0);
	assert_int_equal(tpe_shutdown_now(pool, hb_fn, &log), 0);
	assert_int_equal(tpe_shutdown(pool), 0);
	assert_int_equal(hb_count(&log), 0);
	assert_int_equal(tpe_destroy(pool), 0);
	assert_int_equal(__atomic_load_n(&h.calls, __ATOMIC_SEQ_CST), 1);
}

/* A hook on a pool whose idle workers exit on shutdown: still exactly once. */
static void
test_lifecycle_terminated_hook_once_with_idle_workers(void **state)
{
	struct hook_state h;
	tpe_t *pool;
	size_t started = 0;

	(void)state;
	memset(&h, 0, sizeof(h));
	pool = tu_pool_with(&(struct tu_pool_opts){ .core = 4, .max = 4,
	    .terminated = hook_fn, .terminated_ctx = &h });
	assert_int_equal(tpe_prestart_core_threads(pool, &started), 0);
	assert_int_equal(started, 4);

	assert_int_equal(tpe_shutdown(pool), 0);
	assert_int_equal(tpe_await_termination(pool, -1), 0);
	/* The hook ran before await returned. */
	assert_int_equal(__atomic_load_n(&h.calls, __ATOMIC_SEQ_CST), 1);
	assert_hook_saw_tidying(&h);
	assert_terminated(pool, 0, 0);
	assert_int_equal(tu_stats(pool).largest_pool_size, 4);
	assert_int_equal(tpe_shutdown(pool), 0);
	assert_int_equal(tpe_shutdown_now(pool, NULL, NULL), 0);
	assert_int_equal(tpe_destroy(pool), 0);
	assert_int_equal(__atomic_load_n(&h.calls, __ATOMIC_SEQ_CST), 1);
}

/* ---- await_termination (item 42) and EINVAL --------------------------- */

static void
test_lifecycle_await_timeouts(void **state)
{
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct tu_saturation sat;
	struct tu_latch ready;
	struct waiter w;
	int64_t t0, dt;

	(void)state;
	tu_latch_init(&ready, 1);

	/* An idle running pool: 0 polls, a positive timeout waits it out. */
	t0 = tu_now_ns();
	assert_int_equal(tpe_await_termination(pool, 0), ETIMEDOUT);
	t0 = tu_now_ns();
	assert_int_equal(tpe_await_termination(pool, 1), ETIMEDOUT);
	dt = tu_now_ns() - t0;
	assert_true(dt >= 1);
	t0 = tu_now_ns();
	assert_int_equal(tpe_await_termination(pool, 999999), ETIMEDOUT);
	dt = tu_now_ns() - t0;
	assert_true(dt >= 999999);
	t0 = tu_now_ns();
	assert_int_equal(tpe_await_termination(pool, 30 * TU_MS), ETIMEDOUT);
	dt = tu_now_ns() - t0;
	assert_true(dt >= 30 * TU_MS);

	/* A negative timeout waits for as long as it takes. */
	tu_saturate(pool, 1, 0, &sat);
	waiter_start(&w, pool, -1, &ready);
	tu_latch_wait(&ready);
	assert_int_equal(tpe_await_termination(pool, 10 * TU_MS), ETIMEDOUT);
	assert_false(waiter_returned(&w));
	assert_int_equal(tpe_shutdown(pool), 0);
	assert_int_equal(tpe_await_termination(pool, 10 * TU_MS), ETIMEDOUT);
	assert_false(waiter_returned(&w));
	tu_unsaturate(&sat);
	assert_int_equal(pthread_join(w.thread, NULL), 0);
	assert_int_equal(w.rc, 0);
	assert_true(tpe_is_terminated(pool));
	/* Terminated: every timeout returns 0 at once. */
	assert_int_equal(tpe_await_termination(pool, 0), 0);
	assert_int_equal(tpe_await_termination(pool, 1), 0);
	assert_int_equal(tpe_await_termination(pool, -1), 0);
	assert_int_equal(tpe_await_termination(pool, INT64_MIN), 0);
	assert_int_equal(tpe_await_termination(pool, INT64_MAX), 0);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_saturation_destroy(&sat);
	tu_latch_destroy(&ready);
}

static void
test_lifecycle_await_huge_timeout_no_overflow(void **state)
{
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct tu_saturation sat;
	struct tu_latch ready;
	struct waiter w;

	(void)state;
	tu_latch_init(&ready, 1);
	tu_saturate(pool, 1, 0, &sat);
	/* INT64_MAX must saturate, not wrap to a deadline in the past. */
	waiter_start(&w, pool, INT64_MAX, &ready);
	tu_latch_wait(&ready);
	assert_int_equal(tpe_await_termination(pool, 10 * TU_MS), ETIMEDOUT);
	assert_false(waiter_returned(&w));
	assert_int_equal(tpe_shutdown(pool), 0);
	tu_unsaturate(&sat);
	assert_int_equal(pthread_join(w.thread, NULL), 0);
	assert_int_equal(w.rc, 0);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_saturation_destroy(&sat);
	tu_latch_destroy(&ready);
}

static void
test_lifecycle_null_pool_einval(void **state)
{
	struct handback_log log;

	(void)state;
	hb_init(&log, NULL);
	assert_int_equal(tpe_shutdown(NULL), EINVAL);
	assert_int_equal(tpe_shutdown_now(NULL, NULL, NULL), EINVAL);
	assert_int_equal(tpe_shutdown_now(NULL, hb_fn, &log), EINVAL);
	assert_int_equal(tpe_await_termination(NULL, 0), EINVAL);
	assert_int_equal(tpe_await_termination(NULL, -1), EINVAL);
	assert_int_equal(tpe_await_termination(NULL, TU_S), EINVAL);
	assert_int_equal(tpe_destroy(NULL), EINVAL);
	assert_false(tpe_is_shutdown(NULL));
	assert_false(tpe_is_terminated(NULL));
	assert_int_equal(hb_count(&log), 0);
}

/* ---- EDEADLK from inside the pool ------------------------------------- */

struct self_calls {
	tpe_t *other;          /* another, running pool */
	int await_forever;
	int await_timed;
	int await_poll;
	int await_other;
	int destroy_rc;
	bool shutdown_after;   /* tpe_is_shutdown after the failed destroy */
	struct tu_latch done;
};

static tpe_t *self_pool; /* the pool the self_calls task runs in */

static void
self_calls_fn(void *arg)
{
	struct self_calls *c = arg;

	c->await_forever = tpe_await_termination(self_pool, -1);
	c->await_timed = tpe_await_termination(self_pool, TU_S);
	c->await_poll = tpe_await_termination(self_pool, 0);
	c->await_other = tpe_await_termination(c->other, TU_MS);
	c->destroy_rc = tpe_destroy(self_pool);
	c->shutdown_after = tpe_is_shutdown(self_pool);
	tu_latch_count_down(&c->done);
}

static void
test_lifecycle_edeadlk_from_task(void **state)
{
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	tpe_t *other = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct self_calls c;
	struct tu_latch done;
	struct tu_blocker after = { NULL, NULL, &done, 0 };

	(void)state;
	memset(&c, 0, sizeof(c));
	c.other = other;
	tu_latch_init(&c.done, 1);
	tu_latch_init(&done, 1);
	self_pool = pool;
	assert_int_equal(tpe_execute(pool, self_calls_fn, &c), 0);
	tu_latch_wait(&c.done);
	assert_int_equal(c.await_forever, EDEADLK);
	assert_int_equal(c.await_timed, EDEADLK);
	assert_int_equal(c.await_poll, ETIMEDOUT);
	assert_int_equal(c.await_other, ETIMEDOUT);
	assert_int_equal(c.destroy_rc, EDEADLK);
	assert_false(c.shutdown_after);   /* the failed destroy changed nothing */

	/* The pool keeps working. */
	assert_false(tpe_is_shutdown(pool));
	assert_int_equal(tpe_execute(pool, tu_blocker_fn, &after), 0);
	tu_latch_wait(&done);
	assert_int_equal(tu_load(&after.ran), 1);
	assert_int_equal(tpe_destroy(pool), 0);
	assert_int_equal(tpe_destroy(other), 0);
	tu_latch_destroy(&c.done);
	tu_latch_destroy(&done);
}

/* ---- shutdown_now hands back the queue, in order (item 43) ------------ */

static void
test_lifecycle_shutdown_now_hands_back_queue_in_order(void **state)
{
	tpe_t *pool = tu_pool(2, 2, TPE_QUEUE_BOUNDED, 10, TPE_REJECT_ABORT);
	struct tu_saturation sat;
	int counts[3] = { 0 };
	struct handback_log log;
	struct tpe_stats s;
	int i, n;

	(void)state;
	hb_init(&log, pool);
	tu_saturate(pool, 2, 0, &sat);
	tu_fill_queue(pool, 3, tu_count_fn, counts, sizeof(counts[0]));
	assert_int_equal(tu_stats(pool).queued, 3);

	assert_int_equal(tpe_shutdown_now(pool, hb_fn, &log), 0);
	/* Every hand-back happened before shutdown_now returned. */
	n = hb_count(&log);
	assert_int_equal(n, 3);
	for (i = 0; i < 3; i++) {
		assert_ptr_equal(log.fn[i], tu_count_fn);
		assert_ptr_equal(log.arg[i], &counts[i]);   /* queue order */
		assert_true(log.shutdown_seen[i]);
		assert_int_equal(log.stats_rc[i], 0);       /* no lock held */
	}
	s = tu_stats(pool);
	assert_int_equal(s.queued, 0);
	assert_int_equal(s.active, 2);
	assert_true(tpe_is_shutdown(pool));
	assert_false(tpe_is_terminated(pool));
	assert_int_equal(tpe_execute(pool, tu_count_fn, &counts[0]), ECANCELED);

	tu_unsaturate(&sat);
	assert_int_equal(tpe_await_termination(pool, -1), 0);
	assert_int_equal(tu_ran(&sat.b[0]), 1);
	assert_int_equal(tu_ran(&sat.b[1]), 1);
	for (i = 0; i < 3; i++)
		assert_int_equal(tu_load(&counts[i]), 0);
	assert_int_equal(hb_count(&log), 3);
	assert_terminated(pool, 5, 2);
	assert_int_equal(tpe_shutdown_now(pool, hb_fn, &log), 0);
	assert_int_equal(hb_count(&log), 3);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_saturation_destroy(&sat);
}

static void
test_lifecycle_shutdown_now_null_drained_uses_discard(void **state)
{
	struct tu_saturation sat;
	int counts[4] = { 0 };
	struct handback_log log;
	tpe_t *pool;
	int i;

	(void)state;
	hb_init(&log, NULL);
	pool = tu_pool_with(&(struct tu_pool_opts){ .core = 1, .max = 1,
	    .discard = hb_fn, .discard_ctx = &log });
	log.pool = pool;
	tu_saturate(pool, 1, 0, &sat);
	tu_fill_queue(pool, 4, tu_count_fn, counts, sizeof(counts[0]));

	assert_int_equal(tpe_shutdown_now(pool, NULL, NULL), 0);
	assert_int_equal(hb_count(&log), 4);
	for (i = 0; i < 4; i++) {
		assert_ptr_equal(log.fn[i], tu_count_fn);
		assert_ptr_equal(log.arg[i], &counts[i]);
		assert_int_equal(log.stats_rc[i], 0);
	}
	tu_unsaturate(&sat);
	assert_int_equal(tpe_await_termination(pool, -1), 0);
	for (i = 0; i < 4; i++)
		assert_int_equal(tu_load(&counts[i]), 0);
	assert_terminated(pool, 5, 1);
	assert_int_equal(tpe_destroy(pool), 0);
	/* The blocker ran and was not handed back. */
	assert_int_equal(hb_count(&log), 4);
	tu_saturation_destroy(&sat);
}

static void
test_lifecycle_shutdown_now_no_callback_drops(void **state)
{
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct tu_saturation sat;
	int counts[3] = { 0 };
	int i;

	(void)state;
	tu_saturate(pool, 1, 0, &sat);
	tu_fill_queue(pool, 3, tu_count_fn, counts, sizeof(counts[0]));
	assert_int_equal(tpe_shutdown_now(pool, NULL, NULL), 0);
	assert_int_equal(tu_stats(pool).queued, 0);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_await_termination(pool, -1), 0);
	for (i = 0; i < 3; i++)
		assert_int_equal(tu_load(&counts[i]), 0);
	assert_terminated(pool, 4, 1);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_saturation_destroy(&sat);
}

static void
test_lifecycle_shutdown_now_cancels_futures(void **state)
{
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct tu_saturation sat;
	int counts[3] = { 0 };
	tpe_future_t *f0, *f2;
	struct handback_log log;
	void *res = (void *)1;

	(void)state;
	hb_init(&log, pool);
	tu_saturate(pool, 1, 0, &sat);
	assert_int_equal(tpe_submit(pool, tu_count_call, &counts[0], &f0), 0);
	assert_int_equal(tpe_execute(pool, tu_count_fn, &counts[1]), 0);
	assert_int_equal(tpe_submit(pool, tu_count_call, &counts[2], &f2), 0);

	assert_int_equal(tpe_shutdown_now(pool, hb_fn, &log), 0);
	assert_int_equal(hb_count(&log), 3);
	assert_null(log.fn[0]);
	assert_ptr_equal(log.arg[0], &counts[0]);
	assert_ptr_equal(log.fn[1], tu_count_fn);
	assert_ptr_equal(log.arg[1], &counts[1]);
	assert_null(log.fn[2]);
	assert_ptr_equal(log.arg[2], &counts[2]);
	/* Cancelled before the callback ran, so certainly now. */
	assert_true(tpe_future_is_cancelled(f0));
	assert_true(tpe_future_is_done(f0));
	assert_true(tpe_future_is_cancelled(f2));
	assert_int_equal(tpe_future_get(f0, -1, &res), ECANCELED);
	assert_int_equal(tpe_future_get(f2, 0, &res), ECANCELED);
	assert_ptr_equal(res, (void *)1);
	assert_int_equal(tpe_future_cancel(f0), 0);

	tu_unsaturate(&sat);
	assert_int_equal(tpe_await_termination(pool, -1), 0);
	assert_int_equal(tu_load(&counts[0]), 0);
	assert_int_equal(tu_load(&counts[1]), 0);
	assert_int_equal(tu_load(&counts[2]), 0);
	tpe_future_release(f0);
	tpe_future_release(f2);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_saturation_destroy(&sat);
}

/* shutdown then shutdown_now: the queue kept by shutdown is handed back. */
static void
test_lifecycle_shutdown_then_shutdown_now(void **state)
{
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_BOUNDED, 4, TPE_REJECT_ABORT);
	struct tu_saturation sat;
	int counts[2] = { 0 };
	struct handback_log log;

	(void)state;
	hb_init(&log, pool);
	tu_saturate(pool, 1, 0, &sat);
	tu_fill_queue(pool, 2, tu_count_fn, counts, sizeof(counts[0]));
	assert_int_equal(tpe_shutdown(pool), 0);
	assert_int_equal(tu_stats(pool).queued, 2);
	assert_int_equal(tpe_shutdown_now(pool, hb_fn, &log), 0);
	assert_int_equal(hb_count(&log), 2);
	assert_ptr_equal(log.arg[0], &counts[0]);
	assert_ptr_equal(log.arg[1], &counts[1]);
	/* A second shutdown_now has nothing left to hand back. */
	assert_int_equal(tpe_shutdown_now(pool, hb_fn, &log), 0);
	assert_int_equal(hb_count(&log), 2);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_await_termination(pool, -1), 0);
	assert_int_equal(tu_load(&counts[0]), 0);
	assert_int_equal(tu_load(&counts[1]), 0);
	assert_terminated(pool, 3, 1);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_saturation_destroy(&sat);
}

/* ---- refused after shutdown (items 37, 46) ---------------------------- */

static int custom_calls;

static int
custom_handler(tpe_t *pool, tpe_fn fn, void *arg, void *ctx)
{
	(void)pool;
	(void)ctx;
	__atomic_add_fetch(&custom_calls, 1, __ATOMIC_SEQ_CST);
	fn(arg);
	return 0;
}

/*
 * P(1,1,ABQ(1)) saturated by a running blocker and a queued task; refused
 * by the policy while running, refused with ECANCELED (no handler, no
 * caller-runs, nothing counted) once shut down.
 */
static void
refused_after_shutdown(enum tpe_rejection rej, bool custom, bool now)
{
	struct tu_saturation sat;
	int queued_count = 0, extra = 0;
	struct handback_log log;
	struct tpe_stats s0, s;
	tpe_future_t *f = (tpe_future_t *)&extra; /* sentinel */
	tpe_t *pool;

	hb_init(&log, NULL);
	custom_calls = 0;
	pool = tu_pool_with(&(struct tu_pool_opts){ .core = 1, .max = 1,
	    .queue = TPE_QUEUE_BOUNDED, .capacity = 1, .rejection = rej,
	    .reject_handler = custom ? custom_handler : NULL,
	    .discard = hb_fn, .discard_ctx = &log });
	tu_saturate(pool, 1, 0, &sat);
	assert_int_equal(tpe_execute(pool, tu_count_fn, &queued_count), 0);
	if (!custom && rej == TPE_REJECT_ABORT) {
		assert_int_equal(tpe_execute(pool, tu_count_fn, &extra), EAGAIN);
		assert_int_equal(tu_stats(pool).rejected, 1);
	}

	if (now)
		assert_int_equal(tpe_shutdown_now(pool, NULL, NULL), 0);
	else
		assert_int_equal(tpe_shutdown(pool), 0);
	s0 = tu_stats(pool);
	extra = 0;
	custom_calls = 0;
	log.n = 0;
	assert_int_equal(tpe_execute(pool, tu_count_fn, &extra), ECANCELED);
	assert_int_equal(tpe_submit(pool, tu_count_call, &extra, &f), ECANCELED);
	assert_ptr_equal(f, (tpe_future_t *)&extra);  /* not written */
	assert_false(tpe_is_terminated(pool));
	assert_int_equal(tu_load(&extra), 0);          /* not run in caller */
	assert_int_equal(__atomic_load_n(&custom_calls, __ATOMIC_SEQ_CST), 0);
	assert_int_equal(hb_count(&log), 0);           /* not discarded */
	s = tu_stats(pool);
	assert_int_equal(s.submitted, s0.submitted);
	assert_int_equal(s.rejected, s0.rejected);
	assert_int_equal(s.queued, s0.queued);

	tu_unsaturate(&sat);
	assert_int_equal(tpe_await_termination(pool, -1), 0);
	assert_int_equal(tpe_execute(pool, tu_count_fn, &extra), ECANCELED);
	assert_int_equal(tpe_submit(pool, tu_count_call, &extra, &f), ECANCELED);
	assert_ptr_equal(f, (tpe_future_t *)&extra);
	assert_int_equal(tu_load(&extra), 0);
	assert_int_equal(__atomic_load_n(&custom_calls, __ATOMIC_SEQ_CST), 0);
	/* Item 46: 2 completed after shutdown, 1 after shutdown_now. */
	assert_int_equal(tu_load(&queued_count), now ? 0 : 1);
	assert_terminated(pool, 2, now ? 1 : 2);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_saturation_destroy(&sat);
}

/* Each policy (or a custom handler), after tpe_shutdown and after
 * tpe_shutdown_now: one row a case, as the cases were named. */
struct refused_row {
	const char *name;
	enum tpe_rejection rej[2];
	int nrej;
	bool custom;
};

static const struct refused_row refused_rows[] = {
	{ "test_lifecycle_refused_after_shutdown_abort",
	    { TPE_REJECT_ABORT }, 1, false },
	{ "test_lifecycle_refused_after_shutdown_caller_runs",
	    { TPE_REJECT_CALLER_RUNS }, 1, false },
	{ "test_lifecycle_refused_after_shutdown_discard",
	    { TPE_REJECT_DISCARD, TPE_REJECT_DISCARD_OLDEST }, 2, false },
	{ "test_lifecycle_refused_after_shutdown_custom_handler",
	    { TPE_REJECT_ABORT }, 1, true },
};

static void
test_lifecycle_refused_after_shutdown(void **state)
{
	const struct refused_row *row = *state;
	int i;

	for (i = 0; i < row->nrej; i++) {
		refused_after_shutdown(row->rej[i], row->custom, false);
		refused_after_shutdown(row->rej[i], row->custom, true);
	}
}

/* ---- idle and running workers on shutdown (items 49, 50) ------------- */

static void
test_lifecycle_idle_workers_exit_on_shutdown(void **state)
{
	struct tu_latch started, release, done;
	struct tu_blocker b = { &started, &release, &done, 0 };
	tpe_t *pool;
	size_t n = 0;
	struct tpe_stats s;

	(void)state;
	tu_latch_init(&started, 1);
	tu_latch_init(&release, 1);
	tu_latch_init(&done, 1);
	pool = tu_pool_with(&(struct tu_pool_opts){ .core = 4, .max = 8,
	    .keep_alive = 3600 * TU_S });
	assert_int_equal(tpe_prestart_core_threads(pool, &n), 0);
	assert_int_equal(n, 4);
	/* One worker busy during shutdown, idle after it. */
	assert_int_equal(tpe_execute(pool, tu_blocker_fn, &b), 0);
	tu_latch_wait(&started);
	s = tu_stats(pool);
	assert_int_equal(s.pool_size, 4);
	assert_int_equal(tpe_shutdown(pool), 0);
	/* The idle ones leave at once; the busy one keeps the pool alive. */
	assert_int_equal(tpe_await_termination(pool, 10 * TU_MS), ETIMEDOUT);
	tu_latch_count_down(&release);
	tu_latch_wait(&done);
	/* Far below the hour of keep-alive. */
	assert_int_equal(tpe_await_termination(pool, 60 * TU_S), 0);
	assert_terminated(pool, 1, 1);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
	tu_latch_destroy(&done);
}

static void
test_lifecycle_shutdown_with_allow_core_timeout_idle_exit(void **state)
{
	tpe_t *pool;
	size_t n = 0;

	(void)state;
	pool = tu_pool_with(&(struct tu_pool_opts){ .core = 3, .max = 3,
	    .queue = TPE_QUEUE_BOUNDED, .capacity = 2,
	    .keep_alive = 3600 * TU_S, .allow_core_timeout = true });
	assert_int_equal(tpe_prestart_core_threads(pool, &n), 0);
	assert_int_equal(n, 3);
	assert_int_equal(tpe_shutdown(pool), 0);
	assert_int_equal(tpe_await_termination(pool, 60 * TU_S), 0);
	assert_terminated(pool, 0, 0);
	assert_int_equal(tpe_destroy(pool), 0);
}

struct observer {
	struct tu_latch started, release;
	bool saw_shutdown;   /* tpe_is_shutdown(pool) after the release */
	bool saw_terminated;
	int finished;        /* atomic */
	tpe_t *pool;
};

static void
observer_fn(void *arg)
{
	struct observer *o = arg;

	tu_latch_count_down(&o->started);
	tu_latch_wait(&o->release);
	o->saw_shutdown = tpe_is_shutdown(o->pool);
	o->saw_terminated = tpe_is_terminated(o->pool);
	__atomic_store_n(&o->finished, 1, __ATOMIC_SEQ_CST);
}

/* Neither shutdown interrupts a running task, or ends the pool under it:
 * one row each, as the cases were named. */
struct undisturbed_row {
	const char *name;
	size_t size;               /* core and max */
	bool now;                  /* tpe_shutdown_now, else tpe_shutdown */
};

static const struct undisturbed_row undisturbed_rows[] = {
	{ "test_lifecycle_shutdown_does_not_disturb_running_task", 2, false },
	{ "test_lifecycle_shutdown_now_does_not_disturb_running_task", 1,
	    true },
};

static void
test_lifecycle_shutdown_undisturbed(void **state)
{
	const struct undisturbed_row *row = *state;
	tpe_t *pool = tu_pool(row->size, row->size, TPE_QUEUE_UNBOUNDED, 0,
	    TPE_REJECT_ABORT);
	struct observer o;
	struct tpe_stats s;

	memset(&o, 0, sizeof(o));
	tu_latch_init(&o.started, 1);
	tu_latch_init(&o.release, 1);
	o.pool = pool;
	assert_int_equal(tpe_execute(pool, observer_fn, &o), 0);
	tu_latch_wait(&o.started);
	if (row->now)
		assert_int_equal(tpe_shutdown_now(pool, NULL, NULL), 0);
	else
		assert_int_equal(tpe_shutdown(pool), 0);
	s = tu_stats(pool);
	assert_int_equal(s.active, 1);
	assert_int_equal(s.pool_size, 1);
	assert_int_equal(__atomic_load_n(&o.finished, __ATOMIC_SEQ_CST), 0);
	assert_false(tpe_is_terminated(pool));
	tu_latch_count_down(&o.release);
	assert_int_equal(tpe_await_termination(pool, -1), 0);
	assert_int_equal(__atomic_load_n(&o.finished, __ATOMIC_SEQ_CST), 1);
	assert_true(o.saw_shutdown);
	assert_false(o.saw_terminated);
	assert_terminated(pool, 1, 1);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_latch_destroy(&o.started);
	tu_latch_destroy(&o.release);
}

/* ---- destroy ------------------------------------------------------------ */

struct destroyer {
	pthread_t thread;
	tpe_t *pool;
	int rc;
};

static void *
destroyer_main(void *arg)
{
	struct destroyer *d = arg;

	d->rc = tpe_destroy(d->pool);
	return NULL;
}

static void
test_lifecycle_destroy_runs_queued_tasks(void **state)
{
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct tu_saturation sat;
	int counts[10] = { 0 };
	struct destroyer d;
	int i;

	(void)state;
	tu_saturate(pool, 1, 0, &sat);
	tu_fill_queue(pool, 10, tu_count_fn, counts, sizeof(counts[0]));
	d.pool = pool;
	d.rc = -1;
	assert_int_equal(pthread_create(&d.thread, NULL, destroyer_main, &d), 0);
	/*
	 * Wait until destroy has shut the pool down (it cannot finish: the
	 * blocker holds it). Not a timing assertion: a wait for a state.
	 */
	while (!tpe_is_shutdown(pool))
		sched_yield();
	assert_int_equal(tu_stats(pool).queued, 10);
	assert_int_equal(tpe_execute(pool, tu_count_fn, &counts[0]), ECANCELED);
	for (i = 0; i < 10; i++)
		assert_int_equal(tu_load(&counts[i]), 0);
	tu_unsaturate(&sat);  /* the pool may be freed from here on */
	assert_int_equal(pthread_join(d.thread, NULL), 0);
	assert_int_equal(d.rc, 0);
	for (i = 0; i < 10; i++)
		assert_int_equal(tu_load(&counts[i]), 1);
	assert_int_equal(tu_ran(&sat.b[0]), 1);
	tu_saturation_destroy(&sat);
}

static void
test_lifecycle_destroy_fresh_and_after_shutdown_now(void **state)
{
	tpe_t *pool;

	(void)state;
	pool = tu_pool(2, 4, TPE_QUEUE_HANDOFF, 0, TPE_REJECT_ABORT);
	assert_int_equal(tpe_destroy(pool), 0);
	pool = tu_pool(2, 4, TPE_QUEUE_BOUNDED, 3, TPE_REJECT_ABORT);
	assert_int_equal(tpe_prestart_core_threads(pool, NULL), 0);
	assert_int_equal(tpe_shutdown_now(pool, NULL, NULL), 0);
	assert_int_equal(tpe_destroy(pool), 0);
	pool = tu_pool(0, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	assert_int_equal(tpe_shutdown(pool), 0);
	assert_true(tpe_is_terminated(pool));
	assert_int_equal(tpe_destroy(pool), 0);
}

/* ---- disposition invariant under races (items 47, 48) ----------------- */

struct slot {
	int ran;      /* atomic */
	int handed;   /* atomic */
	int rc;       /* the submitting call's return value */
};

static void
slot_run(void *arg)
{
	__atomic_add_fetch(&((struct slot *)arg)->ran, 1, __ATOMIC_SEQ_CST);
}

static void
slot_handback(tpe_fn fn, void *arg, void *ctx)
{
	(void)fn;
	(void)ctx;
	__atomic_add_fetch(&((struct slot *)arg)->handed, 1, __ATOMIC_SEQ_CST);
}

struct race {
	tpe_t *pool;
	pthread_barrier_t start;
	sem_t go;            /* posted by submitter 0 after `trigger` calls */
	int trigger;
	int per_thread;
	int nthreads;
	struct slot *slots;  /* nthreads * per_thread */
	int violation;       /* a submitter saw rc != ECANCELED after ECANCELED */
	bool until_cancelled; /* item 47: submit until ECANCELED */
};

struct submitter {
	pthread_t thread;
	struct race *r;
	int idx;
};

static void *
submitter_main(void *arg)
{
	struct submitter *s = arg;
	struct race *r = s->r;
	struct slot *slots = r->slots + (size_t)s->idx * r->per_thread;
	bool cancelled = false;
	int i;

	pthread_barrier_wait(&r->start);
	for (i = 0; i < r->per_thread; i++) {
		if (s->idx == 0 && i == r->trigger)
			sem_post(&r->go);
		slots[i].rc = tpe_execute(r->pool, slot_run, &slots[i]);
		if (cancelled && slots[i].rc != ECANCELED)
			__atomic_store_n(&r->violation, 1, __ATOMIC_SEQ_CST);
		if (slots[i].rc == ECANCELED) {
			cancelled = true;
			if (r->until_cancelled)
				break;
		}
	}
	for (i++; i < r->per_thread; i++)
		slots[i].rc = -1;                 /* never attempted */
	if (s->idx == 0 && r->trigger >= r->per_thread)
		sem_post(&r->go);
	return NULL;
}

/* Runs one round; returns false (after recording why) on a violation. */
static void
race_round(struct race *r, tpe_attr_t *a, int mode)
{
	struct submitter subs[8];
	struct tpe_stats st;
	uint64_t accepted = 0, ran = 0, handed = 0;
	size_t n = (size_t)r->nthreads * r->per_thread, k;
	int i;

	assert_true(r->nthreads <= 8);
	memset(r->slots, 0, n * sizeof(*r->slots));
	assert_int_equal(tpe_create(&r->pool, a), 0);
	assert_int_equal(pthread_barrier_init(&r->start, NULL,
	    (unsigned)r->nthreads + 1), 0);
	assert_int_equal(sem_init(&r->go, 0, 0), 0);
	r->violation = 0;
	for (i = 0; i < r->nthreads; i++) {
		subs[i].r = r;
		subs[i].idx = i;
		assert_int_equal(pthread_create(&subs[i].thread, NULL,
		    submitter_main, &subs[i]), 0);
	}
	pthread_barrier_wait(&r->start);
	while (sem_wait(&r->go) != 0)
		;
	if (mode == 0)
		assert_int_equal(tpe_shutdown(r->pool), 0);
	else
		assert_int_equal(tpe_shutdown_now(r->pool, slot_handback, NULL),
		    0);
	for (i = 0; i < r->nthreads; i++)
		assert_int_equal(pthread_join(subs[i].thread, NULL), 0);
	assert_int_equal(tpe_await_termination(r->pool, -1), 0);
	st = tu_stats(r->pool);
	assert_int_equal(tpe_destroy(r->pool), 0);
	pthread_barrier_destroy(&r->start);
	sem_destroy(&r->go);

	assert_int_equal(r->violation, 0);
	for (k = 0; k < n; k++) {
		struct slot *s = &r->slots[k];
		int ran_k = __atomic_load_n(&s->ran, __ATOMIC_SEQ_CST);
		int handed_k = __atomic_load_n(&s->handed, __ATOMIC_SEQ_CST);

		if (s->rc == -1) {
			assert_int_equal(ran_k + handed_k, 0);
			continue;
		}
		if (s->rc == 0) {
			accepted++;
			if (ran_k + handed_k != 1)
				print_error("slot %zu: ran %d handed %d\n", k,
				    ran_k, handed_k);
			assert_int_equal(ran_k + handed_k, 1);
		} else {
			assert_true(s->rc == ECANCELED || s->rc == EAGAIN);
			assert_int_equal(ran_k + handed_k, 0);
		}
		if (mode == 0)
			assert_int_equal(handed_k, 0);
		ran += (uint64_t)ran_k;
		handed += (uint64_t)handed_k;
	}
	assert_int_equal(ran + handed, accepted);
	assert_int_equal(st.submitted, accepted);
	assert_int_equal(st.completed, ran);
	assert_int_equal(st.pool_size, 0);
	assert_int_equal(st.queued, 0);
}

/* A race of `nthreads` submitters of `per_thread` tasks each. */
static void
race_init(struct race *r, int nthreads, int per_thread)
{
	memset(r, 0, sizeof(*r));
	r->nthreads = nthreads;
	r->per_thread = per_thread;
	r->slots = calloc((size_t)nthreads * (size_t)per_thread,
	    sizeof(*r->slots));
	assert_non_null(r->slots);
}

static void
test_lifecycle_disposition_invariant_race(void **state)
{
	enum { NTH = 4, PER = 400, ROUNDS = 120 };
	struct race r;
	unsigned seed = 12345;
	int round;

	(void)state;
	race_init(&r, NTH, PER);
	for (round = 0; round < ROUNDS; round++) {
		static const enum tpe_queue_kind kinds[3] = {
			TPE_QUEUE_UNBOUNDED, TPE_QUEUE_BOUNDED, TPE_QUEUE_HANDOFF
		};
		tpe_attr_t *a;
		size_t core = (size_t)(rand_r(&seed) % 4);
		size_t max = core + 1 + (size_t)(rand_r(&seed) % 4);
		size_t cap = kinds[round % 3] == TPE_QUEUE_BOUNDED ?
		    1 + (size_t)(rand_r(&seed) % 64) : 0;

		a = tu_attr_with(&(struct tu_pool_opts){ .core = core,
		    .max = max, .queue = kinds[round % 3], .capacity = cap });
		r.trigger = rand_r(&seed) % (PER + 1);
		r.until_cancelled = false;
		race_round(&r, a, round & 1);
		tpe_attr_destroy(a);
	}
	free(r.slots);
}

/*
 * Item 47 (Java's ShutdownNowExecuteRace): P(10,10,3 days,ABQ(10)) shut
 * down with shutdown_now right after the submitters start, 256 times:
 * every pool terminates and every task is accounted for exactly once.
 */
static void
test_lifecycle_shutdown_now_execute_race(void **state)
{
	enum { NTH = 2, PER = 2000, POOLS = 256 };
	struct race r;
	tpe_attr_t *a;
	int i;

	(void)state;
	race_init(&r, NTH, PER);
	a = tu_attr_with(&(struct tu_pool_opts){ .core = 10, .max = 10,
	    .queue = TPE_QUEUE_BOUNDED, .capacity = 10,
	    .keep_alive = 3 * 86400 * TU_S });
	for (i = 0; i < POOLS; i++) {
		r.trigger = 0;            /* shut down right after the start */
		r.until_cancelled = true;
		race_round(&r, a, 1);
	}
	tpe_attr_destroy(a);
	free(r.slots);
}

/* ---- remove / purge let a shut-down pool terminate (item 63) ---------- */

/*
 * The state of item 63: P(1,1,ABQ(10)) with a terminated hook and a
 * discard log; queue emptied while its worker runs; the running task let
 * go, then the termination.
 */
static tpe_t *
item63_pool(struct hook_state *h, struct handback_log *log)
{
	memset(h, 0, sizeof(*h));
	hb_init(log, NULL);
	return tu_pool_with(&(struct tu_pool_opts){ .core = 1, .max = 1,
	    .queue = TPE_QUEUE_BOUNDED, .capacity = 10,
	    .terminated = hook_fn, .terminated_ctx = h,
	    .discard = hb_fn, .discard_ctx = log });
}

/* Queue empty, but the worker still runs: not terminated yet. */
static void
item63_emptied_still_running(tpe_t *pool, struct hook_state *h)
{
	struct tpe_stats s = tu_stats(pool);

	assert_int_equal(s.queued, 0);
	assert_int_equal(s.pool_size, 1);
	assert_int_equal(s.active, 1);
	assert_false(tpe_is_terminated(pool));
	assert_int_equal(tpe_await_termination(pool, 0), ETIMEDOUT);
	assert_int_equal(__atomic_load_n(&h->calls, __ATOMIC_SEQ_CST), 0);
}

static void
item63_terminates(tpe_t *pool, struct hook_state *h,
    struct tu_saturation *sat)
{
	tu_unsaturate(sat);
	/* Bounded: a queue that did not really empty would hang here. */
	assert_int_equal(tpe_await_termination(pool, 10 * TU_S), 0);
	assert_true(tpe_is_terminated(pool));
	assert_int_equal(__atomic_load_n(&h->calls, __ATOMIC_SEQ_CST), 1);
	assert_false(pthread_equal(h->thread, pthread_self()));
	assert_hook_saw_tidying(h);
}

/*
 * Item 63 with tpe_remove: P(1,1) shut down while its only worker is
 * blocked and two tasks are queued. Removing them does not terminate the
 * pool (the worker still runs) and calls no callback; once the running
 * task ends, the worker finds the queue empty and exits, the pool
 * terminates, the removed tasks never ran and the hook ran once, on the
 * worker.
 */
static void
test_lifecycle_remove_empties_queue_then_terminates(void **state)
{
	struct tu_saturation sat;
	int counts[2] = { 0 };
	struct handback_log log;
	struct hook_state h;
	tpe_t *pool;

	(void)state;
	pool = item63_pool(&h, &log);
	tu_saturate(pool, 1, 0, &sat);
	tu_fill_queue(pool, 2, tu_count_fn, counts, sizeof(counts[0]));
	assert_int_equal(tpe_shutdown(pool), 0);
	assert_int_equal(tu_stats(pool).queued, 2);

	assert_int_equal(tpe_remove(pool, tu_count_fn, &counts[1]), 0);
	assert_int_equal(tu_stats(pool).queued, 1);
	assert_false(tpe_is_terminated(pool));
	assert_int_equal(tpe_remove(pool, tu_count_fn, &counts[0]), 0);
	assert_int_equal(tpe_remove(pool, tu_count_fn, &counts[0]), ENOENT);
	item63_emptied_still_running(pool, &h);
	assert_int_equal(hb_count(&log), 0);

	item63_terminates(pool, &h, &sat);
	/* Removed tasks stay accepted but are not completed. */
	assert_terminated(pool, 3, 1);
	assert_int_equal(tu_load(&counts[0]), 0);
	assert_int_equal(tu_load(&counts[1]), 0);
	assert_int_equal(tu_ran(&sat.b[0]), 1);
	assert_int_equal(hb_count(&log), 0);
	assert_int_equal(tpe_destroy(pool), 0);
	assert_int_equal(__atomic_load_n(&h.calls, __ATOMIC_SEQ_CST), 1);
	tu_saturation_destroy(&sat);
}

/*
 * Item 63 with tpe_purge: the same state, the queue holding two futures.
 * Cancelling them leaves them queued (no termination); purging empties the
 * queue and hands them to the discard callback (fn NULL); once the
 * running task ends the pool terminates, the hook ran once, the futures
 * stay cancelled and nothing counts them as completed.
 */
static void
test_lifecycle_purge_empties_queue_then_terminates(void **state)
{
	struct tu_saturation sat;
	int counts[2] = { 0 };
	struct handback_log log;
	struct hook_state h;
	tpe_future_t *f[2];
	tpe_t *pool;
	size_t purged;
	void *res;
	int i;

	(void)state;
	pool = item63_pool(&h, &log);
	log.pool = pool;
	tu_saturate(pool, 1, 0, &sat);
	for (i = 0; i < 2; i++)
		assert_int_equal(tpe_submit(pool, tu_count_call, &counts[i], &f[i]),
		    0);
	assert_int_equal(tpe_shutdown(pool), 0);

	for (i = 0; i < 2; i++)
		assert_int_equal(tpe_future_cancel(f[i]), 0);
	/* Cancelled but not purged: still queued, so no termination. */
	assert_int_equal(tu_stats(pool).queued, 2);
	assert_false(tpe_is_terminated(pool));
	assert_int_equal(hb_count(&log), 0);

	purged = 0;
	assert_int_equal(tpe_purge(pool, &purged), 0);
	assert_int_equal(purged, 2);
	assert_int_equal(hb_count(&log), 2);
	for (i = 0; i < 2; i++) {
		assert_null(log.fn[i]);
		assert_true(log.shutdown_seen[i]);
		assert_int_equal(log.stats_rc[i], 0);
	}
	assert_true((log.arg[0] == &counts[0] && log.arg[1] == &counts[1]) ||
	    (log.arg[0] == &counts[1] && log.arg[1] == &counts[0]));
	item63_emptied_still_running(pool, &h);

	item63_terminates(pool, &h, &sat);
	assert_terminated(pool, 3, 1);
	for (i = 0; i < 2; i++) {
		assert_int_equal(tu_load(&counts[i]), 0);
		assert_true(tpe_future_is_cancelled(f[i]));
		assert_int_equal(tpe_future_get(f[i], 0, &res), ECANCELED);
		tpe_future_release(f[i]);
	}
	assert_int_equal(hb_count(&log), 2);
	assert_int_equal(tpe_destroy(pool), 0);
	assert_int_equal(__atomic_load_n(&h.calls, __ATOMIC_SEQ_CST), 1);
	tu_saturation_destroy(&sat);
}

/* ---- completed never decreases (item 60) ------------------------------ */

/* Each task checks its own snapshot against the last one its thread saw. */
struct mono {
	int violations;  /* atomic: a snapshot went back or past submitted */
	int ran;         /* atomic */
	tpe_t *pool;
};

static __thread uint64_t mono_last;

static void
mono_task(void *arg)
{
	struct mono *m = arg;
	struct tpe_stats s;

	/* This task runs: it is submitted and not completed. */
	if (tpe_get_stats(m->pool, &s, sizeof(s)) != 0 ||
	    s.completed < mono_last || s.completed >= s.submitted)
		__atomic_add_fetch(&m->violations, 1, __ATOMIC_SEQ_CST);
	else
		mono_last = s.completed;
	__atomic_add_fetch(&m->ran, 1, __ATOMIC_SEQ_CST);
}

/* A snapshot from the test thread, checked against the previous one. */
static struct tpe_stats
mono_snap(tpe_t *pool, uint64_t *last)
{
	struct tpe_stats s = tu_stats(pool);

	assert_true(s.completed >= *last);
	assert_true(s.completed <= s.submitted);
	*last = s.completed;
	return s;
}

/*
 * Item 60: completed never decreases. P(1,4,ABQ(16)) with a 1 ms keep-alive
 * and core timeout, so workers start and exit all along (their counts must
 * not get lost or counted twice): rounds of tasks, each submitted with a
 * snapshot after it (EAGAIN is retried), each taking a snapshot itself;
 * between rounds the pool drains to no thread while snapshots go on.
 * Every thread's sequence of snapshots must be non-decreasing, also across
 * shutdown and termination.
 */
static void
test_lifecycle_completed_never_decreases(void **state)
{
	enum { ROUNDS = 4, PER_ROUND = 3000 };
	struct mono m;
	struct tpe_stats s;
	uint64_t last = 0, total;
	tpe_t *pool;
	int round, i, rc;

	(void)state;
	memset(&m, 0, sizeof(m));
	pool = tu_pool_with(&(struct tu_pool_opts){ .core = 1, .max = 4,
	    .queue = TPE_QUEUE_BOUNDED, .capacity = 16, .keep_alive = TU_MS,
	    .allow_core_timeout = true });
	m.pool = pool;
	for (round = 0; round < ROUNDS; round++) {
		for (i = 0; i < PER_ROUND; i++) {
			while ((rc = tpe_execute(pool, mono_task, &m)) != 0) {
				assert_int_equal(rc, EAGAIN);
				mono_snap(pool, &last);
				sched_yield();
			}
			mono_snap(pool, &last);
		}
		total = (uint64_t)(round + 1) * PER_ROUND;
		/* Drains, then every worker times out: both "eventually". */
		assert_true(TU_EVENTUALLY((s = mono_snap(pool, &last),
		    s.completed == total && s.pool_size == 0), 10 * TU_S));
	}
	assert_int_equal(tpe_shutdown(pool), 0);
	mono_snap(pool, &last);
	assert_int_equal(tpe_await_termination(pool, 10 * TU_S), 0);
	s = mono_snap(pool, &last);
	assert_int_equal(s.completed, total);
	assert_int_equal(s.submitted, total);
	assert_true(s.largest_pool_size >= 1 && s.largest_pool_size <= 4);
	assert_int_equal(tu_load(&m.ran), (int)total);
	assert_int_equal(tu_load(&m.violations), 0);
	assert_int_equal(tpe_destroy(pool), 0);
}

/* ---- a hand-back callback that waits for termination ------------------ */

/*
 * tpe_shutdown_now and tpe_purge deliver tasks to a callback on the
 * calling thread, and termination waits until that delivery is over: a
 * callback that waits for termination (or destroys the pool) would wait
 * for itself. It gets EDEADLK, as a worker does. Before the fix it slept
 * until its timeout (ETIMEDOUT), and tpe_destroy there never returned.
 */
struct self_wait {
	tpe_t *pool;
	int calls;         /* atomic */
	int await_rc;      /* the first call's results */
	int destroy_rc;
};

static void
self_wait_cb(tpe_fn fn, void *arg, void *ctx)
{
	struct self_wait *w = ctx;

	(void)fn;
	(void)arg;
	if (__atomic_add_fetch(&w->calls, 1, __ATOMIC_SEQ_CST) != 1)
		return;
	w->await_rc = tpe_await_termination(w->pool, 2 * TU_S);
	/* Only where the wait was refused: otherwise this would hang. */
	w->destroy_rc = w->await_rc == EDEADLK ? tpe_destroy(w->pool) : -1;
}

static void
test_lifecycle_handback_callback_waits_on_itself(void **state)
{
	struct tu_saturation sat;
	struct self_wait w = { NULL, 0, 0, 0 };
	tpe_future_t *f;
	int count = 0;
	size_t purged = 0;

	(void)state;
	w.pool = tu_pool_with(&(struct tu_pool_opts){ .core = 1, .max = 1,
	    .discard = self_wait_cb, .discard_ctx = &w });
	tu_saturate(w.pool, 1, 0, &sat);

	/* tpe_purge: a cancelled future leaves the queue to the callback. */
	assert_int_equal(tpe_submit(w.pool, tu_nop_call, NULL, &f), 0);
	assert_int_equal(tpe_future_cancel(f), 0);
	assert_int_equal(tpe_purge(w.pool, &purged), 0);
	assert_int_equal(purged, 1);
	assert_int_equal(tu_load(&w.calls), 1);
	assert_int_equal(w.await_rc, EDEADLK);
	assert_int_equal(w.destroy_rc, EDEADLK);
	tpe_future_release(f);

	/* tpe_shutdown_now: the queued tasks go to the same callback. */
	w.calls = 0;
	w.await_rc = w.destroy_rc = 0;
	assert_int_equal(tpe_execute(w.pool, tu_count_fn, &count), 0);
	assert_int_equal(tpe_execute(w.pool, tu_count_fn, &count), 0);
	assert_int_equal(tpe_shutdown_now(w.pool, self_wait_cb, &w), 0);
	assert_int_equal(tu_load(&w.calls), 2);
	assert_int_equal(w.await_rc, EDEADLK);
	assert_int_equal(w.destroy_rc, EDEADLK);

	/* Outside the callback the same thread may wait again. */
	tu_unsaturate(&sat);
	assert_int_equal(tpe_await_termination(w.pool, -1), 0);
	assert_int_equal(tpe_destroy(w.pool), 0);
	assert_int_equal(count, 0);
	tu_saturation_destroy(&sat);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lifecycle_fresh_pool_flags),
		cmocka_unit_test(test_lifecycle_shutdown_runs_queued_tasks),
		cmocka_unit_test(test_lifecycle_terminated_hook_before_waiters),
		cmocka_unit_test(test_lifecycle_shutdown_empty_pool_runs_hook_in_caller),
		cmocka_unit_test(test_lifecycle_shutdown_now_empty_pool_runs_hook_once),
		cmocka_unit_test(test_lifecycle_terminated_hook_once_with_idle_workers),
		cmocka_unit_test(test_lifecycle_await_timeouts),
		cmocka_unit_test(test_lifecycle_await_huge_timeout_no_overflow),
		cmocka_unit_test(test_lifecycle_null_pool_einval),
		cmocka_unit_test(test_lifecycle_edeadlk_from_task),
		cmocka_unit_test(test_lifecycle_shutdown_now_hands_back_queue_in_order),
		cmocka_unit_test(test_lifecycle_shutdown_now_null_drained_uses_discard),
		cmocka_unit_test(test_lifecycle_shutdown_now_no_callback_drops),
		cmocka_unit_test(test_lifecycle_shutdown_now_cancels_futures),
		cmocka_unit_test(test_lifecycle_shutdown_then_shutdown_now),
		TU_ROW_TEST(test_lifecycle_refused_after_shutdown,
		    &refused_rows[0]),
		TU_ROW_TEST(test_lifecycle_refused_after_shutdown,
		    &refused_rows[1]),
		TU_ROW_TEST(test_lifecycle_refused_after_shutdown,
		    &refused_rows[2]),
		TU_ROW_TEST(test_lifecycle_refused_after_shutdown,
		    &refused_rows[3]),
		cmocka_unit_test(test_lifecycle_idle_workers_exit_on_shutdown),
		cmocka_unit_test(test_lifecycle_shutdown_with_allow_core_timeout_idle_exit),
		TU_ROW_TEST(test_lifecycle_shutdown_undisturbed,
		    &undisturbed_rows[0]),
		TU_ROW_TEST(test_lifecycle_shutdown_undisturbed,
		    &undisturbed_rows[1]),
		cmocka_unit_test(test_lifecycle_destroy_runs_queued_tasks),
		cmocka_unit_test(test_lifecycle_destroy_fresh_and_after_shutdown_now),
		cmocka_unit_test(test_lifecycle_disposition_invariant_race),
		cmocka_unit_test(test_lifecycle_shutdown_now_execute_race),
		cmocka_unit_test(test_lifecycle_remove_empties_queue_then_terminates),
		cmocka_unit_test(test_lifecycle_purge_empties_queue_then_terminates),
		cmocka_unit_test(test_lifecycle_completed_never_decreases),
		cmocka_unit_test(test_lifecycle_handback_callback_waits_on_itself),
	};

	tu_time_bound(0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
