/* SPDX-License-Identifier: MIT */
/*
 * test_rejection.c - the rejection policies (ABORT, CALLER_RUNS, DISCARD,
 * DISCARD_OLDEST, custom handler) for tpe_execute and tpe_submit, their
 * counters, and submissions after shutdown (ECANCELED, no handler).
 * Java behaviours (doc/java-behaviours.md): D 29-37, E 46.
 */
#define _GNU_SOURCE
#include <string.h>

#include "helpers.h"

#include "engine/locked.h"
#include "pool/pool.h"
#include "base/sync.h"

#define EV_TIMEOUT (10 * TU_S)
#define CUSTOM (-1) /* "policy" value meaning: install reject_handler */

/* ---- recorders ---------------------------------------------------------- */

#define MAXREC 16

struct call {
	tpe_t *pool;
	tpe_fn fn;
	void *arg;
	void *ctx;
	pthread_t thr;
};

struct recorder {
	pthread_mutex_t lock;
	int n;
	struct call c[MAXREC];
};

static struct recorder discards = { PTHREAD_MUTEX_INITIALIZER, 0, { { 0 } } };
static struct recorder handled = { PTHREAD_MUTEX_INITIALIZER, 0, { { 0 } } };

static void
rec_reset(struct recorder *r)
{
	pthread_mutex_lock(&r->lock);
	r->n = 0;
	memset(r->c, 0, sizeof(r->c));
	pthread_mutex_unlock(&r->lock);
}

static void
rec_add(struct recorder *r, tpe_t *pool, tpe_fn fn, void *arg, void *ctx)
{
	pthread_mutex_lock(&r->lock);
	if (r->n < MAXREC)
		r->c[r->n] = (struct call){ pool, fn, arg, ctx, pthread_self() };
	r->n++;
	pthread_mutex_unlock(&r->lock);
}

static int
rec_n(struct recorder *r)
{
	int n;

	pthread_mutex_lock(&r->lock);
	n = r->n;
	pthread_mutex_unlock(&r->lock);
	return n;
}

static struct call
rec_get(struct recorder *r, int i)
{
	struct call c;

	pthread_mutex_lock(&r->lock);
	c = r->c[i];
	pthread_mutex_unlock(&r->lock);
	return c;
}

static void
discard_cb(tpe_fn fn, void *arg, void *ctx)
{
	rec_add(&discards, NULL, fn, arg, ctx);
}

/* The custom handler: records the call, reads the pool's statistics (it
 * runs outside every lock), then does what `handler_mode` says. */
enum { H_RUN = 0, H_KEEP, H_REFUSE };
static int handler_mode;
static tpe_fn kept_fn;
static void *kept_arg;
static int handler_stats_rc;
static struct tpe_stats handler_stats;

static int
reject_handler(tpe_t *pool, tpe_fn fn, void *arg, void *ctx)
{
	rec_add(&handled, pool, fn, arg, ctx);
	handler_stats_rc = tpe_get_stats(pool, &handler_stats,
	    sizeof(handler_stats));
	switch (handler_mode) {
	case H_RUN:
		fn(arg);
		return 0;
	case H_KEEP:
		kept_fn = fn;
		kept_arg = arg;
		return 0;
	default:
		return ENOSPC;
	}
}

static int handler_ctx_obj, discard_ctx_obj;

/*
 * P(1, max, kind/cap) with the given policy (or CUSTOM) and the recording
 * discard callback; resets the recorders. The tests saturate it with
 * tu_saturate(): P(1,1,ABQ(1)) holds b[0] running and b[1] queued, a
 * hand-off pool b[0] only.
 */
static tpe_t *
pool_rej(size_t max, enum tpe_queue_kind kind, size_t cap, int policy)
{
	rec_reset(&discards);
	rec_reset(&handled);
	handler_mode = H_RUN;
	kept_fn = NULL;
	kept_arg = NULL;
	handler_stats_rc = -1;
	return tu_pool_with(&(struct tu_pool_opts){ .core = 1, .max = max,
	    .queue = kind, .capacity = cap,
	    .rejection = policy == CUSTOM ? TPE_REJECT_ABORT :
	    (enum tpe_rejection)policy,
	    .reject_handler = policy == CUSTOM ? reject_handler : NULL,
	    .reject_ctx = &handler_ctx_obj,
	    .discard = discard_cb, .discard_ctx = &discard_ctx_obj });
}

/* A callable that counts and records its thread. */
struct callrec {
	int ran;
	pthread_t thr;
};

static void *
callrec_fn(void *arg)
{
	struct callrec *c = arg;

	c->thr = pthread_self();
	__atomic_add_fetch(&c->ran, 1, __ATOMIC_SEQ_CST);
	return arg;
}

static void
callrec_task(void *arg)
{
	(void)callrec_fn(arg);
}

/* The statistics after one refusal that reached the policy: counted as
 * rejected, neither submitted nor queued. Returns them. */
static struct tpe_stats
assert_refusal_counted(const tpe_t *p, const struct tpe_stats *before)
{
	struct tpe_stats after = tu_stats(p);

	assert_int_equal(after.rejected, before->rejected + 1);
	assert_int_equal(after.submitted, before->submitted);
	assert_int_equal(after.queued, before->queued);
	return after;
}

/* A callable that ran once, in this thread, and completed its future f
 * with its own argument. */
static void
assert_ran_here(struct callrec *c, tpe_future_t *f)
{
	void *res = NULL;

	assert_int_equal(c->ran, 1);
	assert_true(pthread_equal(c->thr, pthread_self()));
	assert_true(tpe_future_is_done(f));
	assert_false(tpe_future_is_cancelled(f));
	assert_int_equal(tpe_future_get(f, 0, &res), 0);
	assert_ptr_equal(res, c);
}

/* ---- ABORT: EAGAIN, the caller keeps the task (items 29, 36) ----------- */

static void
test_rejection_abort(void **state)
{
	static struct tu_saturation sat;
	static int count;
	tpe_t *p = pool_rej(1, TPE_QUEUE_BOUNDED, 1, TPE_REJECT_ABORT);
	struct tpe_stats before, after;

	(void)state;
	tu_saturate(p, 1, 1, &sat);
	before = tu_stats(p);
	assert_int_equal(before.submitted, 2);
	assert_int_equal(before.rejected, 0);
	count = 0;
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), EAGAIN);
	after = assert_refusal_counted(p, &before);
	assert_int_equal(after.completed, before.completed);
	assert_int_equal(after.pool_size, before.pool_size);
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), EAGAIN);
	assert_int_equal(tu_stats(p).rejected, before.rejected + 2);
	assert_int_equal(tu_stats(p).queued, 1);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	/* The caller kept the task: it never ran, nothing was handed back. */
	assert_int_equal(count, 0);
	assert_int_equal(rec_n(&discards), 0);
	assert_int_equal(tu_ran(&sat.b[0]), 1);
	assert_int_equal(tu_ran(&sat.b[1]), 1);
	tu_saturation_destroy(&sat);
}

/* Item 24 for submit: EAGAIN, *future untouched. */
static void
test_rejection_abort_submit(void **state)
{
	static struct tu_saturation sat;
	static struct callrec c;
	tpe_t *p = pool_rej(1, TPE_QUEUE_BOUNDED, 1, TPE_REJECT_ABORT);
	tpe_future_t *f = (tpe_future_t *)&c;
	struct tpe_stats before;

	(void)state;
	tu_saturate(p, 1, 1, &sat);
	before = tu_stats(p);
	memset(&c, 0, sizeof(c));
	assert_int_equal(tpe_submit(p, callrec_fn, &c, &f), EAGAIN);
	assert_ptr_equal(f, (tpe_future_t *)&c);
	(void)assert_refusal_counted(p, &before);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(c.ran, 0);
	assert_int_equal(rec_n(&discards), 0);
	tu_saturation_destroy(&sat);
}

/* ---- CALLER_RUNS: the submitting thread runs it (item 31) -------------- */

static void
test_rejection_caller_runs(void **state)
{
	static struct tu_saturation sat;
	static struct callrec r[5];
	tpe_t *p = pool_rej(1, TPE_QUEUE_BOUNDED, 1, TPE_REJECT_CALLER_RUNS);
	struct tpe_stats st;
	int i;

	(void)state;
	tu_saturate(p, 1, 0, &sat);
	memset(r, 0, sizeof(r));
	for (i = 0; i < 5; i++) {
		assert_int_equal(tpe_execute(p, callrec_task, &r[i]), 0);
		if (i > 0) {
			/* Ran synchronously, in this thread, before return. */
			assert_int_equal(r[i].ran, 1);
			assert_true(pthread_equal(r[i].thr, pthread_self()));
		}
	}
	assert_int_equal(tu_load(&r[0].ran), 0);
	st = tu_stats(p);
	assert_int_equal(st.queued, 1);
	assert_int_equal(st.rejected, 4);
	assert_int_equal(st.completed, 0);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	/* tasks[0] was queued and ran on the worker. */
	assert_int_equal(r[0].ran, 1);
	assert_false(pthread_equal(r[0].thr, pthread_self()));
	for (i = 1; i < 5; i++)
		assert_int_equal(r[i].ran, 1);
	assert_int_equal(rec_n(&discards), 0);
	tu_saturation_destroy(&sat);
}

static void
test_rejection_caller_runs_submit(void **state)
{
	static struct tu_saturation sat;
	static struct callrec c;
	tpe_t *p = pool_rej(1, TPE_QUEUE_HANDOFF, 0, TPE_REJECT_CALLER_RUNS);
	tpe_future_t *f = NULL;

	(void)state;
	tu_saturate(p, 1, 0, &sat);
	memset(&c, 0, sizeof(c));
	assert_int_equal(tpe_submit(p, callrec_fn, &c, &f), 0);
	assert_non_null(f);
	assert_ran_here(&c, f);
	assert_int_equal(tpe_future_cancel(f), EBUSY);
	tpe_future_release(f);
	assert_int_equal(tu_stats(p).rejected, 1);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(c.ran, 1);
	tu_saturation_destroy(&sat);
}

/* ---- DISCARD: dropped, to the discard callback (item 30) --------------- */

static void
test_rejection_discard(void **state)
{
	static struct tu_saturation sat;
	static int count;
	tpe_t *p = pool_rej(1, TPE_QUEUE_BOUNDED, 1, TPE_REJECT_DISCARD);
	struct tpe_stats before, after;
	struct call c;

	(void)state;
	tu_saturate(p, 1, 1, &sat);
	before = tu_stats(p);
	count = 0;
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	after = assert_refusal_counted(p, &before);
	assert_int_equal(after.completed, before.completed);
	/* Handed to the discard callback, exactly once, before return. */
	assert_int_equal(rec_n(&discards), 1);
	c = rec_get(&discards, 0);
	assert_true(c.fn == tu_count_fn);
	assert_ptr_equal(c.arg, &count);
	assert_ptr_equal(c.ctx, &discard_ctx_obj);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(count, 0);
	assert_int_equal(rec_n(&discards), 1);
	assert_int_equal(tu_ran(&sat.b[1]), 1);
	tu_saturation_destroy(&sat);
}

/* Without a discard callback the task is simply dropped. */
static void
test_rejection_discard_no_callback(void **state)
{
	static struct tu_saturation sat;
	static int count;
	tpe_t *p = tu_pool(1, 1, TPE_QUEUE_HANDOFF, 0, TPE_REJECT_DISCARD);

	(void)state;
	tu_saturate(p, 1, 0, &sat);
	count = 0;
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	assert_int_equal(tu_stats(p).rejected, 2);
	assert_int_equal(tu_stats(p).submitted, 1);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(count, 0);
	tu_saturation_destroy(&sat);
}

static void
test_rejection_discard_submit(void **state)
{
	static struct tu_saturation sat;
	static struct callrec c;
	tpe_t *p = pool_rej(1, TPE_QUEUE_BOUNDED, 1, TPE_REJECT_DISCARD);
	tpe_future_t *f = NULL;
	void *res = NULL;
	struct call d;

	(void)state;
	tu_saturate(p, 1, 1, &sat);
	memset(&c, 0, sizeof(c));
	assert_int_equal(tpe_submit(p, callrec_fn, &c, &f), 0);
	assert_non_null(f);
	assert_true(tpe_future_is_done(f));
	assert_true(tpe_future_is_cancelled(f));
	assert_int_equal(tpe_future_get(f, 0, &res), ECANCELED);
	assert_int_equal(tpe_future_get(f, -1, &res), ECANCELED);
	assert_int_equal(tpe_future_cancel(f), 0);
	assert_int_equal(rec_n(&discards), 1);
	d = rec_get(&discards, 0);
	assert_true(d.fn == NULL);
	assert_ptr_equal(d.arg, &c);
	assert_ptr_equal(d.ctx, &discard_ctx_obj);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	tpe_future_release(f);
	assert_int_equal(c.ran, 0);
	assert_int_equal(rec_n(&discards), 1);
	tu_saturation_destroy(&sat);
}

/* ---- DISCARD_OLDEST: the queue's head makes room (item 33) ------------- */

static void
test_rejection_discard_oldest(void **state)
{
	static struct tu_saturation sat;
	static struct tu_blocker r3;
	tpe_t *p = pool_rej(1, TPE_QUEUE_BOUNDED, 1, TPE_REJECT_DISCARD_OLDEST);
	struct tpe_stats before, after;
	struct call d;

	(void)state;
	tu_saturate(p, 1, 1, &sat); /* r1 = b[0] running, r2 = b[1] queued */
	before = tu_stats(p);
	r3 = (struct tu_blocker){ NULL, &sat.release, NULL, 0 };
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &r3), 0);
	after = tu_stats(p);
	assert_int_equal(after.queued, 1);
	assert_int_equal(after.rejected, before.rejected + 1);
	assert_int_equal(after.completed, before.completed);
	/* The head (r2) went to the discard callback, exactly once. */
	assert_int_equal(rec_n(&discards), 1);
	d = rec_get(&discards, 0);
	assert_true(d.fn == tu_blocker_fn);
	assert_ptr_equal(d.arg, &sat.b[1]);
	assert_ptr_equal(d.ctx, &discard_ctx_obj);
	/* r3 is the one queued now. */
	assert_int_equal(tpe_remove(p, tu_blocker_fn, &sat.b[1]), ENOENT);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(tu_ran(&sat.b[0]), 1);
	assert_int_equal(tu_ran(&sat.b[1]), 0);
	assert_int_equal(tu_ran(&r3), 1);
	assert_int_equal(rec_n(&discards), 1);
	tu_saturation_destroy(&sat);
}

/* The dropped head is a future: it is cancelled, the callback gets fn NULL. */
static void
test_rejection_discard_oldest_future_head(void **state)
{
	static struct tu_saturation sat;
	static struct callrec c2;
	static int count;
	tpe_t *p = pool_rej(1, TPE_QUEUE_BOUNDED, 1, TPE_REJECT_DISCARD_OLDEST);
	tpe_future_t *f2 = NULL;
	void *res;
	struct call d;

	(void)state;
	tu_saturate(p, 1, 0, &sat);
	memset(&c2, 0, sizeof(c2));
	assert_int_equal(tpe_submit(p, callrec_fn, &c2, &f2), 0);
	assert_false(tpe_future_is_done(f2));
	count = 0;
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	assert_true(tpe_future_is_cancelled(f2));
	assert_int_equal(tpe_future_get(f2, 0, &res), ECANCELED);
	assert_int_equal(rec_n(&discards), 1);
	d = rec_get(&discards, 0);
	assert_true(d.fn == NULL);
	assert_ptr_equal(d.arg, &c2);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	tpe_future_release(f2);
	assert_int_equal(c2.ran, 0);
	assert_int_equal(count, 1);
	tu_saturation_destroy(&sat);
}

/* Nothing to drop (hand-off queue): EAGAIN, the caller keeps the task. */
static void
test_rejection_discard_oldest_handoff(void **state)
{
	static struct tu_saturation sat;
	static int count;
	static struct callrec c;
	tpe_t *p = pool_rej(1, TPE_QUEUE_HANDOFF, 0, TPE_REJECT_DISCARD_OLDEST);
	tpe_future_t *f = (tpe_future_t *)&c;

	(void)state;
	tu_saturate(p, 1, 0, &sat);
	count = 0;
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), EAGAIN);
	memset(&c, 0, sizeof(c));
	assert_int_equal(tpe_submit(p, callrec_fn, &c, &f), EAGAIN);
	assert_ptr_equal(f, (tpe_future_t *)&c);
	assert_int_equal(rec_n(&discards), 0);
	assert_int_equal(tu_stats(p).rejected, 2);
	assert_int_equal(tu_stats(p).submitted, 1);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(count, 0);
	assert_int_equal(c.ran, 0);
	assert_int_equal(rec_n(&discards), 0);
	tu_saturation_destroy(&sat);
}

/* ---- a custom handler, called once per refused task (item 35) --------- */

static void
test_rejection_custom_handler_accepts(void **state)
{
	static struct tu_saturation sat;
	static int count;
	tpe_t *p = pool_rej(1, TPE_QUEUE_BOUNDED, 1, CUSTOM);
	struct call h;

	(void)state;
	tu_saturate(p, 1, 1, &sat);
	count = 0;
	handler_mode = H_RUN;
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	/* Called exactly once, with (pool, fn, arg, ctx), in this thread. */
	assert_int_equal(rec_n(&handled), 1);
	h = rec_get(&handled, 0);
	assert_ptr_equal(h.pool, p);
	assert_true(h.fn == tu_count_fn);
	assert_ptr_equal(h.arg, &count);
	assert_ptr_equal(h.ctx, &handler_ctx_obj);
	assert_true(pthread_equal(h.thr, pthread_self()));
	/* It ran outside the pool's lock: it could read the statistics. */
	assert_int_equal(handler_stats_rc, 0);
	assert_int_equal(handler_stats.queued, 1);
	assert_int_equal(count, 1);
	assert_int_equal(tu_stats(p).rejected, 1);
	assert_int_equal(tu_stats(p).queued, 1);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(rec_n(&handled), 1);
	assert_int_equal(rec_n(&discards), 0);
	assert_int_equal(count, 1);
	tu_saturation_destroy(&sat);
}

static void
test_rejection_custom_handler_refuses(void **state)
{
	static struct tu_saturation sat;
	static int count;
	tpe_t *p = pool_rej(1, TPE_QUEUE_BOUNDED, 1, CUSTOM);
	struct tpe_stats before;

	(void)state;
	tu_saturate(p, 1, 1, &sat);
	before = tu_stats(p);
	count = 0;
	handler_mode = H_REFUSE;
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), ENOSPC);
	assert_int_equal(rec_n(&handled), 1);
	(void)assert_refusal_counted(p, &before);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(count, 0);
	assert_int_equal(rec_n(&handled), 1);
	assert_int_equal(rec_n(&discards), 0);
	tu_saturation_destroy(&sat);
}

/* For tpe_submit the handler gets a runnable pair; fn(arg) completes the
 * future. */
static void
test_rejection_custom_handler_submit(void **state)
{
	static struct tu_saturation sat;
	static struct callrec c, c2;
	tpe_t *p = pool_rej(1, TPE_QUEUE_HANDOFF, 0, CUSTOM);
	tpe_future_t *f = NULL, *f2 = (tpe_future_t *)&c2;
	void *res = NULL;
	struct call h;

	(void)state;
	tu_saturate(p, 1, 0, &sat);
	memset(&c, 0, sizeof(c));
	handler_mode = H_KEEP;
	assert_int_equal(tpe_submit(p, callrec_fn, &c, &f), 0);
	assert_non_null(f);
	assert_int_equal(rec_n(&handled), 1);
	h = rec_get(&handled, 0);
	assert_ptr_equal(h.pool, p);
	assert_non_null(h.fn);
	assert_ptr_equal(h.ctx, &handler_ctx_obj);
	/* Not run yet: the future is not done. */
	assert_int_equal(c.ran, 0);
	assert_false(tpe_future_is_done(f));
	assert_int_equal(tpe_future_get(f, 0, &res), ETIMEDOUT);
	/* Running the pair runs the callable and completes the future. */
	kept_fn(kept_arg);
	assert_ran_here(&c, f);
	tpe_future_release(f);

	/* A refusing handler: its value, *future untouched. */
	handler_mode = H_REFUSE;
	memset(&c2, 0, sizeof(c2));
	assert_int_equal(tpe_submit(p, callrec_fn, &c2, &f2), ENOSPC);
	assert_ptr_equal(f2, (tpe_future_t *)&c2);
	assert_int_equal(rec_n(&handled), 2);
	assert_int_equal(tu_stats(p).rejected, 2);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(c.ran, 1);
	assert_int_equal(c2.ran, 0);
	assert_int_equal(rec_n(&discards), 0);
	tu_saturation_destroy(&sat);
}

/* ---- after shutdown: ECANCELED, no policy runs (items 32, 34, 37) ------ */

static void
after_shutdown_check(int policy)
{
	static struct tu_saturation sat;
	static int count;
	static struct callrec c;
	tpe_t *p = pool_rej(1, TPE_QUEUE_BOUNDED, 1, policy);
	tpe_future_t *f = (tpe_future_t *)&c;

	tu_saturate(p, 1, 1, &sat);
	count = 0;
	memset(&c, 0, sizeof(c));
	assert_int_equal(tpe_shutdown(p), 0);
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), ECANCELED);
	assert_int_equal(tpe_submit(p, callrec_fn, &c, &f), ECANCELED);
	assert_ptr_equal(f, (tpe_future_t *)&c);
	/* No handler ran, nothing ran in the caller, the head stayed. */
	assert_int_equal(count, 0);
	assert_int_equal(c.ran, 0);
	assert_int_equal(rec_n(&handled), 0);
	assert_int_equal(rec_n(&discards), 0);
	assert_int_equal(tu_stats(p).queued, 1);
	assert_false(tpe_is_terminated(p));
	tu_unsaturate(&sat);
	assert_int_equal(tpe_await_termination(p, -1), 0);
	/* And after termination. */
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), ECANCELED);
	assert_int_equal(tpe_submit(p, callrec_fn, &c, &f), ECANCELED);
	assert_ptr_equal(f, (tpe_future_t *)&c);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(count, 0);
	assert_int_equal(c.ran, 0);
	assert_int_equal(rec_n(&handled), 0);
	assert_int_equal(rec_n(&discards), 0);
	/* The queued task was not dropped: shutdown drained it. */
	assert_int_equal(tu_ran(&sat.b[0]), 1);
	assert_int_equal(tu_ran(&sat.b[1]), 1);
	tu_saturation_destroy(&sat);
}

static void
test_rejection_after_shutdown_every_policy(void **state)
{
	(void)state;
	after_shutdown_check(TPE_REJECT_ABORT);
	after_shutdown_check(TPE_REJECT_CALLER_RUNS);
	after_shutdown_check(TPE_REJECT_DISCARD);
	after_shutdown_check(TPE_REJECT_DISCARD_OLDEST);
	after_shutdown_check(CUSTOM);
}

/* A shut-down pool that is not saturated refuses too. */
static void
test_rejection_after_shutdown_idle_pool(void **state)
{
	static int count;
	tpe_t *p = pool_rej(2, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_CALLER_RUNS);

	(void)state;
	count = 0;
	assert_int_equal(tpe_shutdown(p), 0);
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), ECANCELED);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(count, 0);
}

/* ---- item 46: rejected while saturated and after shutdown ----------------- */

static void
drained_cb(tpe_fn fn, void *arg, void *ctx)
{
	rec_add(&handled, NULL, fn, arg, ctx);
}

static void
saturated_then_shutdown(bool now)
{
	static struct tu_saturation sat;
	static int count;
	tpe_t *p = pool_rej(1, TPE_QUEUE_BOUNDED, 1, TPE_REJECT_ABORT);
	struct tpe_stats st;
	struct call d;

	tu_saturate(p, 1, 1, &sat);
	count = 0;
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), EAGAIN);
	if (now) {
		assert_int_equal(tpe_shutdown_now(p, drained_cb, &count), 0);
		/* The queued task came back, before shutdown_now returned. */
		assert_int_equal(rec_n(&handled), 1);
		d = rec_get(&handled, 0);
		assert_true(d.fn == tu_blocker_fn);
		assert_ptr_equal(d.arg, &sat.b[1]);
		assert_ptr_equal(d.ctx, &count);
	} else {
		assert_int_equal(tpe_shutdown(p), 0);
	}
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), ECANCELED);
	assert_false(tpe_is_terminated(p));
	tu_unsaturate(&sat);
	assert_int_equal(tpe_await_termination(p, -1), 0);
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), ECANCELED);
	st = tu_stats(p);
	assert_int_equal(st.completed, now ? 1 : 2);
	assert_int_equal(st.queued, 0);
	assert_int_equal(st.pool_size, 0);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(count, 0);
	assert_int_equal(tu_ran(&sat.b[1]), now ? 0 : 1);
	tu_saturation_destroy(&sat);
}

static void
test_rejection_saturated_then_shutdown(void **state)
{
	(void)state;
	saturated_then_shutdown(false);
}

static void
test_rejection_saturated_then_shutdown_now(void **state)
{
	(void)state;
	saturated_then_shutdown(true);
}

/* ---- DISCARD_OLDEST never drops a task handed to a waiting worker ----- */

/*
 * White-box: a hand-off queue holds a node only between the offer that
 * gave it to a waiting worker and that worker's poll. DISCARD_OLDEST must
 * find nothing to drop there (tpe_attr_set_rejection(3)); before the fix it
 * took that node, so a task accepted for an idle worker was discarded and
 * the new one ran instead. The state is built under the pool's lock: one
 * waiting worker counted in the locked engine's takers, its node offered,
 * not yet polled.
 */
static bool
match_any(const struct tpe__task *t, void *ctx)
{
	(void)t;
	(void)ctx;
	return true;
}

static void
discard_oldest_skips_handed(enum tpe_policy policy)
{
	tpe_t *p = tu_pool_with(&(struct tu_pool_opts){ .core = 0, .max = 1,
	    .queue = TPE_QUEUE_HANDOFF, .policy = policy,
	    .rejection = TPE_REJECT_DISCARD_OLDEST });
	struct tpe__locked *le = (struct tpe__locked *)p->engine;
	struct tpe__queue *q = le->q;
	struct tpe__task *handed, *newer, *victim = NULL;
	struct tpe__task_list out;
	int count = 0;

	handed = tpe__task_new(&p->tasks, tu_count_fn, &count, NULL, &handed);
	newer = tpe__task_new(&p->tasks, tu_count_fn, &count, NULL, &newer);
	assert_non_null(handed);
	assert_non_null(newer);

	tpe__mutex_lock(&p->lock);
	le->takers = 1; /* one worker waits for a task */
	assert_int_equal(q->ops->offer(q, handed, le->takers), 0);
	tpe__mutex_unlock(&p->lock);

	assert_int_equal(tpe__locked_replace_oldest(le, newer, &victim),
	    EAGAIN);
	assert_null(victim);

	tpe__mutex_lock(&p->lock);
	assert_int_equal(q->ops->size(q), 1); /* still the worker's */
	tpe__task_list_init(&out);
	assert_int_equal(q->ops->remove_if(q, match_any, NULL, 1, &out), 1);
	assert_ptr_equal(out.head, handed);
	le->takers = 0;
	tpe__mutex_unlock(&p->lock);
	tpe__task_free(&p->tasks, handed);
	tpe__task_free(&p->tasks, newer);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(count, 0);
}

static void
test_rejection_discard_oldest_skips_handed_task(void **state)
{
	(void)state;
	discard_oldest_skips_handed(TPE_POLICY_QUEUE_FIRST);
	discard_oldest_skips_handed(TPE_POLICY_SCALE_FIRST);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rejection_abort),
		cmocka_unit_test(test_rejection_abort_submit),
		cmocka_unit_test(test_rejection_caller_runs),
		cmocka_unit_test(test_rejection_caller_runs_submit),
		cmocka_unit_test(test_rejection_discard),
		cmocka_unit_test(test_rejection_discard_no_callback),
		cmocka_unit_test(test_rejection_discard_submit),
		cmocka_unit_test(test_rejection_discard_oldest),
		cmocka_unit_test(test_rejection_discard_oldest_future_head),
		cmocka_unit_test(test_rejection_discard_oldest_handoff),
		cmocka_unit_test(test_rejection_custom_handler_accepts),
		cmocka_unit_test(test_rejection_custom_handler_refuses),
		cmocka_unit_test(test_rejection_custom_handler_submit),
		cmocka_unit_test(test_rejection_after_shutdown_every_policy),
		cmocka_unit_test(test_rejection_after_shutdown_idle_pool),
		cmocka_unit_test(test_rejection_saturated_then_shutdown),
		cmocka_unit_test(test_rejection_saturated_then_shutdown_now),
		cmocka_unit_test(test_rejection_discard_oldest_skips_handed_task),
	};

	tu_time_bound(0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
