/* SPDX-License-Identifier: MIT */
/*
 * test_sched.c - delayed and periodic tasks (tpe_schedule(3)).
 *
 * From the JSR-166 TCK's ScheduledExecutorTest, translated: testExecute
 * (delay 0 runs), testSchedule1/3 (one-shot runs, never before its delay,
 * result through the future), testSchedule4 and testFixedRateSequence /
 * testFixedDelaySequence (periodic runs, cancelled from inside), the
 * testSchedule*_RejectedExecutionException family (ECANCELED after
 * shutdown), testSchedule*_NullPointerException (EINVAL),
 * testScheduleAtFixedRate/WithFixedDelay_IllegalArgument (period <= 0),
 * testGetQueue/testPurge (queued, tpe_purge, REMOVE_ON_CANCEL),
 * testShutdown_cancellation (test_sched_shutdown_wedged, each flag),
 * testShutdownNow_delayedTasks (hand-back exactly once; unlike Java the
 * futures report ECANCELED at once, as issue 20 and tpe_submit say),
 * testIsShutdown/testIsTerminated around scheduled tasks.
 * Left out: testInvokeAny/All (no invokeAny in libtpe), the thread-factory
 * tests and cancel(true) (no factories, no interruption in C),
 * testGetActiveCount/CompletedTaskCount/LargestPoolSize/PoolSize/
 * TaskCount/CorePoolSize (the pool's counters: test_stats), testExecute
 * and testSubmit* of plain tasks (test_future, test_conformance),
 * testRemove (tpe_remove matches a fn/arg pair the pool queued; a
 * scheduled task is removed by cancelling its future), the
 * exception-in-periodic-task ones (a C task cannot throw), and the rate
 * checks of testFixedRate/DelaySequence that assert an upper bound (only
 * lower bounds here).
 *
 * Helpers and tasks never call cmocka's asserts; the test thread does.
 * No timing asserts except lower bounds ("never before its delay").
 */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define TU_FAULT_INJECTION /* this binary links the --wrap wrappers */
#include "helpers.h"
#include "pool/pool.h"
#include "sched/sched.h"

/* Counts what the discard callback got per argument. */
struct tally {
	int ran;        /* atomic */
	int discarded;  /* atomic */
	int handed;     /* atomic: tpe_shutdown_now's callback */
	int64_t at;     /* first run's time */
	int64_t not_before;
};

static void
tally_fn(void *arg)
{
	struct tally *t = arg;

	if (__atomic_add_fetch(&t->ran, 1, __ATOMIC_SEQ_CST) == 1)
		t->at = tu_now_ns();
}

static void
discard_cb(tpe_fn fn, void *arg, void *ctx)
{
	(void)ctx;
	if (fn != tally_fn)
		return; /* only tallies count */
	__atomic_add_fetch(&((struct tally *)arg)->discarded, 1,
	    __ATOMIC_SEQ_CST);
}

static void
handed_cb(tpe_fn fn, void *arg, void *ctx)
{
	(void)ctx;
	if (fn != tally_fn)
		return;
	__atomic_add_fetch(&((struct tally *)arg)->handed, 1, __ATOMIC_SEQ_CST);
}

static tpe_t *
make_pool(enum tpe_queue_kind kind, size_t cap, size_t core, size_t max,
    unsigned flags)
{
	tpe_attr_t *a;
	tpe_t *p;

	assert_int_equal(tpe_attr_create(&a), 0);
	assert_int_equal(tpe_attr_set_pool_size(a, core, max), 0);
	assert_int_equal(tpe_attr_set_queue(a, kind, cap), 0);
	assert_int_equal(tpe_attr_set_discard_callback(a, discard_cb, NULL), 0);
	assert_int_equal(tpe_attr_set_schedule_flags(a, flags), 0);
	assert_int_equal(tpe_create(&p, a), 0);
	tpe_attr_destroy(a);
	return p;
}

static tpe_t *
default_pool(unsigned flags)
{
	return make_pool(TPE_QUEUE_UNBOUNDED, 0, 2, 2, flags);
}

static void
noop_fn(void *arg)
{
	(void)arg;
}

static void *
call_fn(void *arg)
{
	return arg;
}

/* ---- errors ----------------------------------------------------------- */

static void
test_sched_errors(void **state)
{
	tpe_future_t *f = (tpe_future_t *)&f;
	tpe_attr_t *a;
	tpe_t *p = default_pool(0);
	int64_t d;

	(void)state;
	assert_int_equal(tpe_schedule(NULL, noop_fn, NULL, 0, NULL), EINVAL);
	assert_int_equal(tpe_schedule(p, NULL, NULL, 0, &f), EINVAL);
	assert_null(f);
	assert_int_equal(tpe_schedule_call(p, NULL, NULL, 0, NULL), EINVAL);
	assert_int_equal(tpe_schedule_call(NULL, call_fn, NULL, 0, NULL),
	    EINVAL);
	assert_int_equal(tpe_schedule_at_fixed_rate(p, noop_fn, NULL, 0, 0,
	    NULL), EINVAL);
	assert_int_equal(tpe_schedule_at_fixed_rate(p, noop_fn, NULL, 0, -1,
	    NULL), EINVAL);
	assert_int_equal(tpe_schedule_with_fixed_delay(p, noop_fn, NULL, 0, 0,
	    NULL), EINVAL);
	assert_int_equal(tpe_schedule_with_fixed_delay(NULL, noop_fn, NULL, 0,
	    1, NULL), EINVAL);
	assert_int_equal(tpe_schedule_at_fixed_rate(p, NULL, NULL, 0, 1,
	    NULL), EINVAL);
	assert_int_equal(tpe_future_get_delay(NULL, &d), EINVAL);
	assert_int_equal(tpe_submit(p, call_fn, NULL, &f), 0);
	assert_int_equal(tpe_future_get_delay(f, &d), EINVAL);
	tpe_future_release(f);
	assert_int_equal(tpe_schedule(p, noop_fn, NULL, TU_S, &f), 0);
	assert_int_equal(tpe_future_get_delay(f, NULL), EINVAL);
	assert_int_equal(tpe_future_cancel(f), 0);
	tpe_future_release(f);
	assert_int_equal(tpe_attr_create(&a), 0);
	assert_int_equal(tpe_attr_set_schedule_flags(NULL, 0), EINVAL);
	assert_int_equal(tpe_attr_set_schedule_flags(a, 0x8), EINVAL);
	assert_int_equal(tpe_attr_set_schedule_flags(a, 0x7), 0);
	tpe_attr_destroy(a);
	/* After shutdown: ECANCELED, but EINVAL first. */
	assert_int_equal(tpe_shutdown(p), 0);
	assert_int_equal(tpe_schedule(p, noop_fn, NULL, 0, NULL), ECANCELED);
	assert_int_equal(tpe_schedule_call(p, call_fn, NULL, 0, NULL),
	    ECANCELED);
	assert_int_equal(tpe_schedule_at_fixed_rate(p, noop_fn, NULL, 0, 1,
	    NULL), ECANCELED);
	assert_int_equal(tpe_schedule_with_fixed_delay(p, noop_fn, NULL, 0, 1,
	    NULL), ECANCELED);
	assert_int_equal(tpe_schedule(p, NULL, NULL, 0, NULL), EINVAL);
	assert_int_equal(tpe_schedule_at_fixed_rate(p, noop_fn, NULL, 0, 0,
	    NULL), EINVAL);
	assert_int_equal(tpe_destroy(p), 0);
}

/* ---- one-shots -------------------------------------------------------- */

static void
test_sched_never_before_delay(void **state)
{
	struct tally t[8];
	tpe_future_t *f[8];
	tpe_t *p = default_pool(0);
	void *res = NULL;
	int i;

	(void)state;
	memset(t, 0, sizeof(t));
	for (i = 0; i < 8; i++) {
		t[i].not_before = tu_now_ns() + i * 3 * TU_MS;
		assert_int_equal(tpe_schedule(p, tally_fn, &t[i], i * 3 * TU_MS,
		    &f[i]), 0);
	}
	for (i = 0; i < 8; i++) {
		assert_int_equal(tpe_future_get(f[i], 10 * TU_S, &res), 0);
		assert_null(res);
		assert_int_equal(tu_ran(&t[i]), 1);
		assert_true(t[i].at >= t[i].not_before);
		assert_true(tpe_future_is_done(f[i]));
		assert_int_equal(tpe_future_cancel(f[i]), EBUSY);
		tpe_future_release(f[i]);
	}
	assert_int_equal(tpe_schedule_call(p, call_fn, &t[0], 2 * TU_MS,
	    &f[0]), 0);
	assert_int_equal(tpe_future_get(f[0], 10 * TU_S, &res), 0);
	assert_ptr_equal(res, &t[0]);
	tpe_future_release(f[0]);
	assert_int_equal(tpe_destroy(p), 0);
}

/* Delay <= 0 is now; equal due times keep the order they were scheduled
 * in (one worker, so the run order is the entry order). */
struct order {
	pthread_mutex_t lock;
	int seen[64];
	int n;
};
struct order_item {
	struct order *o;
	int i;
};

static void
order_fn(void *arg)
{
	struct order_item *it = arg;

	pthread_mutex_lock(&it->o->lock);
	it->o->seen[it->o->n++] = it->i;
	pthread_mutex_unlock(&it->o->lock);
}

/* The tests' clock (sched.h): frozen at fake_now. */
static int64_t fake_now; /* atomic */

static int64_t
fake_clock(void)
{
	return __atomic_load_n(&fake_now, __ATOMIC_SEQ_CST);
}

static void hold_timer(bool taken);
static void unhold_timer(void);
static struct tu_latch hold_in, hold_out;

/* With a frozen clock (tpe__sched_clock_hook) every due time is the same
 * instant, and the timer is held until all 64 are pending: they enter in
 * the order they were scheduled. */
static void
test_sched_fifo_and_nonpositive_delay(void **state)
{
	struct order o = { PTHREAD_MUTEX_INITIALIZER, { 0 }, 0 };
	struct order_item it[64];
	tpe_t *p = make_pool(TPE_QUEUE_UNBOUNDED, 0, 1, 1, 0);
	int i;

	(void)state;
	fake_now = tu_now_ns();
	__atomic_store_n(&tpe__sched_clock_hook, fake_clock, __ATOMIC_SEQ_CST);
	hold_timer(false);
	for (i = 0; i < 64; i++) {
		it[i].o = &o;
		it[i].i = i;
		assert_int_equal(tpe_schedule(p, order_fn, &it[i],
		    i % 2 == 0 ? 0 : -TU_S, NULL), 0);
		if (i == 0)
			assert_true(tu_latch_wait_for(&hold_in,
			    TU_WAIT_BOUND));
	}
	assert_int_equal(tpe_shutdown(p), 0);
	tu_latch_count_down(&hold_out);
	assert_int_equal(tpe_await_termination(p, 10 * TU_S), 0);
	unhold_timer();
	__atomic_store_n(&tpe__sched_clock_hook, NULL, __ATOMIC_SEQ_CST);
	assert_int_equal(o.n, 64);
	for (i = 0; i < 64; i++)
		assert_int_equal(o.seen[i], i);
	assert_int_equal(tpe_destroy(p), 0);
}

static void
test_sched_get_delay(void **state)
{
	tpe_future_t *f, *g;
	tpe_t *p = default_pool(TPE_SCHED_REMOVE_ON_CANCEL);
	int64_t d;

	(void)state;
	assert_int_equal(tpe_schedule(p, noop_fn, NULL, 60 * TU_S, &f), 0);
	assert_int_equal(tpe_future_get_delay(f, &d), 0);
	assert_true(d > 0 && d <= 60 * TU_S);
	/* now + delay saturates: "never". */
	assert_int_equal(tpe_schedule(p, noop_fn, NULL, INT64_MAX, &g), 0);
	assert_int_equal(tpe_future_get_delay(g, &d), 0);
	assert_true(d == INT64_MAX);
	assert_int_equal(tpe_future_get(g, 0, NULL), ETIMEDOUT);
	assert_int_equal(tpe_future_cancel(f), 0);
	assert_int_equal(tpe_future_cancel(g), 0);
	assert_int_equal(tpe_future_get(g, 0, NULL), ECANCELED);
	tpe_future_release(f);
	tpe_future_release(g);
	assert_int_equal(tpe_destroy(p), 0);
}

/* ---- periodic --------------------------------------------------------- */

struct periodic {
	tpe_future_t *f;        /* set before the first run can cancel */
	int ran;                /* atomic */
	int inside;             /* atomic: overlap detector */
	int overlap;            /* atomic */
	int stop_after;
	int64_t last_end, min_gap;
	int64_t first_start, start0;
	pthread_mutex_t lock;
	sem_t set;
};

static void
periodic_fn(void *arg)
{
	struct periodic *pe = arg;
	int64_t now = tu_now_ns();
	int n;

	if (__atomic_add_fetch(&pe->inside, 1, __ATOMIC_SEQ_CST) != 1)
		__atomic_store_n(&pe->overlap, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_lock(&pe->lock);
	if (pe->last_end != 0 && now - pe->last_end < pe->min_gap)
		pe->min_gap = now - pe->last_end;
	if (pe->first_start == 0)
		pe->first_start = now;
	pthread_mutex_unlock(&pe->lock);
	n = __atomic_add_fetch(&pe->ran, 1, __ATOMIC_SEQ_CST);
	if (n == pe->stop_after) {
		/* Wait until the scheduling call stored the future. */
		sem_wait(&pe->set);
		/* Cancelled while it runs: 0, and no other run starts. */
		if (tpe_future_cancel(pe->f) != 0)
			__atomic_store_n(&pe->overlap, 2, __ATOMIC_SEQ_CST);
	}
	pthread_mutex_lock(&pe->lock);
	pe->last_end = tu_now_ns();
	pthread_mutex_unlock(&pe->lock);
	__atomic_sub_fetch(&pe->inside, 1, __ATOMIC_SEQ_CST);
}

static void
periodic_init(struct periodic *pe, int stop_after)
{
	memset(pe, 0, sizeof(*pe));
	pe->stop_after = stop_after;
	pe->min_gap = INT64_MAX;
	pthread_mutex_init(&pe->lock, NULL);
	sem_init(&pe->set, 0, 0);
}

static void
run_periodic(bool rate)
{
	struct periodic pe;
	tpe_t *p = make_pool(TPE_QUEUE_UNBOUNDED, 0, 4, 4, 0);
	int rc;

	periodic_init(&pe, 5);
	pe.start0 = tu_now_ns();
	if (rate)
		rc = tpe_schedule_at_fixed_rate(p, periodic_fn, &pe, TU_MS,
		    2 * TU_MS, &pe.f);
	else
		rc = tpe_schedule_with_fixed_delay(p, periodic_fn, &pe, TU_MS,
		    2 * TU_MS, &pe.f);
	assert_int_equal(rc, 0);
	sem_post(&pe.set);
	/* Completes only by cancel. */
	assert_int_equal(tpe_future_get(pe.f, 30 * TU_S, NULL), ECANCELED);
	assert_true(tpe_future_is_cancelled(pe.f));
	assert_int_equal(tpe_shutdown(p), 0);
	assert_int_equal(tpe_await_termination(p, 30 * TU_S), 0);
	assert_int_equal(tu_ran(&pe), 5);
	assert_int_equal(pe.overlap, 0);
	assert_true(pe.first_start >= pe.start0 + TU_MS);
	if (!rate)
		assert_true(pe.min_gap >= 2 * TU_MS);
	tpe_future_release(pe.f);
	assert_int_equal(tpe_destroy(p), 0);
}

static void
test_sched_fixed_rate(void **state)
{
	(void)state;
	run_periodic(true);
}

static void
test_sched_fixed_delay(void **state)
{
	(void)state;
	run_periodic(false);
}

/* A fixed-rate run that overruns: the next ones run back to back, never
 * overlapping, and none is skipped (start k >= first + k * period). */
struct overrun {
	int ran;
	int inside, overlap;
	int64_t start[8];
	struct tu_latch *release;
	struct tu_latch *done;
};

static void
overrun_fn(void *arg)
{
	struct overrun *o = arg;
	int n;

	if (__atomic_add_fetch(&o->inside, 1, __ATOMIC_SEQ_CST) != 1)
		__atomic_store_n(&o->overlap, 1, __ATOMIC_SEQ_CST);
	n = __atomic_load_n(&o->ran, __ATOMIC_SEQ_CST);
	if (n < 8)
		o->start[n] = tu_now_ns();
	if (n == 0)
		tu_latch_wait(o->release);
	__atomic_sub_fetch(&o->inside, 1, __ATOMIC_SEQ_CST);
	if (__atomic_add_fetch(&o->ran, 1, __ATOMIC_SEQ_CST) == 8)
		tu_latch_count_down(o->done);
}

static void
test_sched_fixed_rate_overrun(void **state)
{
	struct tu_latch release, done;
	struct overrun o;
	tpe_future_t *f;
	tpe_t *p = make_pool(TPE_QUEUE_UNBOUNDED, 0, 4, 4, 0);
	int64_t t0;
	int i;

	(void)state;
	memset(&o, 0, sizeof(o));
	tu_latch_init(&release, 1);
	tu_latch_init(&done, 1);
	o.release = &release;
	o.done = &done;
	t0 = tu_now_ns();
	assert_int_equal(tpe_schedule_at_fixed_rate(p, overrun_fn, &o, 0,
	    TU_MS, &f), 0);
	tu_sleep_ns(10 * TU_MS); /* only lets the first run overrun */
	tu_latch_count_down(&release);
	tu_latch_wait(&done);
	assert_int_equal(tpe_future_cancel(f), 0);
	assert_int_equal(o.overlap, 0);
	for (i = 0; i < 8; i++)
		assert_true(o.start[i] >= t0 + i * TU_MS);
	tpe_future_release(f);
	assert_int_equal(tpe_destroy(p), 0);
	tu_latch_destroy(&release);
	tu_latch_destroy(&done);
}

/* ---- cancel, purge, REMOVE_ON_CANCEL ----------------------------------- */

static void
test_sched_cancel_discard_purge(void **state)
{
	struct tally t[4];
	tpe_future_t *f[4];
	struct tpe_stats st;
	size_t purged;
	tpe_t *p = default_pool(0);
	int i;

	(void)state;
	memset(t, 0, sizeof(t));
	for (i = 0; i < 4; i++)
		assert_int_equal(tpe_schedule(p, tally_fn, &t[i], 60 * TU_S,
		    &f[i]), 0);
	assert_int_equal(tpe_get_stats(p, &st, sizeof(st)), 0);
	assert_int_equal(st.queued, 4);
	assert_int_equal(tpe_future_cancel(f[0]), 0);
	assert_int_equal(tpe_future_cancel(f[1]), 0);
	assert_int_equal(tpe_future_get(f[0], 0, NULL), ECANCELED);
	/* Without REMOVE_ON_CANCEL a cancelled task stays until tpe_purge,
	 * or until the timer finds it at the head of its heap (a timer that
	 * wakes meanwhile, e.g. still handling the first schedule's wake-up,
	 * drops a cancelled head at once): so the counts allow both; each
	 * task comes back exactly once either way. */
	assert_int_equal(tpe_get_stats(p, &st, sizeof(st)), 0);
	assert_true(st.queued >= 2 && st.queued <= 4);
	assert_int_equal(tpe_purge(p, &purged), 0);
	assert_true(purged <= 2);
	assert_true(TU_EVENTUALLY(tu_load(&t[0].discarded) == 1 &&
	    tu_load(&t[1].discarded) == 1, 10 * TU_S));
	assert_int_equal(tpe_get_stats(p, &st, sizeof(st)), 0);
	assert_int_equal(st.queued, 2);
	/* Shutdown: delayed one-shots stay; cancelled ones then leave at
	 * once, so termination does not wait for their due time. */
	assert_int_equal(tpe_shutdown(p), 0);
	assert_int_equal(tpe_await_termination(p, 0), ETIMEDOUT);
	assert_int_equal(tpe_future_cancel(f[2]), 0);
	assert_int_equal(tpe_future_cancel(f[3]), 0);
	assert_int_equal(tpe_await_termination(p, 10 * TU_S), 0);
	for (i = 0; i < 4; i++) {
		assert_int_equal(t[i].ran, 0);
		assert_int_equal(t[i].discarded, 1);
		tpe_future_release(f[i]);
	}
	assert_int_equal(tpe_destroy(p), 0);
}

static void
test_sched_remove_on_cancel(void **state)
{
	struct tally t;
	tpe_future_t *f;
	struct tpe_stats st;
	tpe_t *p = default_pool(TPE_SCHED_REMOVE_ON_CANCEL);

	(void)state;
	memset(&t, 0, sizeof(t));
	assert_int_equal(tpe_schedule_with_fixed_delay(p, tally_fn, &t,
	    60 * TU_S, TU_S, &f), 0);
	assert_int_equal(tpe_get_stats(p, &st, sizeof(st)), 0);
	assert_int_equal(st.queued, 1);
	assert_int_equal(tpe_future_cancel(f), 0);
	assert_int_equal(t.discarded, 1);
	assert_int_equal(tpe_get_stats(p, &st, sizeof(st)), 0);
	assert_int_equal(st.queued, 0);
	assert_int_equal(tpe_future_cancel(f), 0); /* again: no second hand-back */
	assert_int_equal(t.discarded, 1);
	tpe_future_release(f);
	assert_int_equal(tpe_destroy(p), 0);
}

/* ---- shutdown variants ------------------------------------------------- */

static void
shutdown_case(unsigned flags, bool delayed_runs, bool periodic_continues)
{
	struct tally one, per;
	tpe_future_t *f1, *fp;
	tpe_t *p = default_pool(flags);

	memset(&one, 0, sizeof(one));
	memset(&per, 0, sizeof(per));
	/* Dropped: an hour ahead, so surely not due at the shutdown. Run:
	 * due before the shutdown or after, it runs either way. */
	assert_int_equal(tpe_schedule(p, tally_fn, &one,
	    delayed_runs ? 20 * TU_MS : 3600 * TU_S, &f1), 0);
	assert_int_equal(tpe_schedule_at_fixed_rate(p, tally_fn, &per, 0,
	    TU_MS, &fp), 0);
	while (tu_ran(&per) == 0)
		tu_sleep_ns(TU_MS);
	assert_int_equal(tpe_shutdown(p), 0);
	assert_true(tpe_is_shutdown(p));
	if (periodic_continues) {
		int seen = tu_ran(&per);

		while (tu_ran(&per) < seen + 3)
			tu_sleep_ns(TU_MS);
		assert_false(tpe_is_terminated(p));
		assert_int_equal(tpe_future_cancel(fp), 0);
	}
	assert_int_equal(tpe_await_termination(p, 30 * TU_S), 0);
	assert_int_equal(tpe_future_get(fp, 0, NULL), ECANCELED);
	assert_int_equal(per.discarded, 1);
	if (delayed_runs) {
		assert_int_equal(tpe_future_get(f1, 0, NULL), 0);
		assert_int_equal(one.ran, 1);
		assert_int_equal(one.discarded, 0);
	} else {
		assert_int_equal(tpe_future_get(f1, 0, NULL), ECANCELED);
		assert_int_equal(one.ran, 0);
		assert_int_equal(one.discarded, 1);
	}
	tpe_future_release(f1);
	tpe_future_release(fp);
	assert_int_equal(tpe_destroy(p), 0);
}

static void
test_sched_shutdown_default(void **state)
{
	(void)state;
	shutdown_case(0, true, false);
}

static void
test_sched_shutdown_drop_delayed(void **state)
{
	(void)state;
	shutdown_case(TPE_SCHED_DROP_DELAYED_AFTER_SHUTDOWN, false, false);
}

static void
test_sched_shutdown_continue_periodic(void **state)
{
	(void)state;
	shutdown_case(TPE_SCHED_CONTINUE_PERIODIC_AFTER_SHUTDOWN, true, true);
}

/*
 * The TCK's testShutdown_cancellation: the pool's two workers wedged by
 * blockers, two periodic tasks and a one-shot due and handed to the pool
 * (its queue), then shutdown. Periodic ones stop (their queued run does
 * not start) unless CONTINUE_PERIODIC; the one-shot was due, so it runs
 * whatever the flags.
 */
static void
wedged_case(unsigned flags)
{
	struct tu_latch started, release;
	struct tu_blocker b = { &started, &release, NULL, 0 };
	struct tally rate, delay, once;
	tpe_future_t *fr, *fd, *fo;
	struct tpe_stats st;
	bool cont = (flags & TPE_SCHED_CONTINUE_PERIODIC_AFTER_SHUTDOWN) != 0;
	tpe_t *p = default_pool(flags);

	memset(&rate, 0, sizeof(rate));
	memset(&delay, 0, sizeof(delay));
	memset(&once, 0, sizeof(once));
	tu_latch_init(&started, 2);
	tu_latch_init(&release, 1);
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &b), 0);
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &b), 0);
	tu_latch_wait(&started);
	assert_int_equal(tpe_schedule_at_fixed_rate(p, tally_fn, &rate, TU_MS,
	    TU_MS, &fr), 0);
	assert_int_equal(tpe_schedule_with_fixed_delay(p, tally_fn, &delay,
	    TU_MS, TU_MS, &fd), 0);
	assert_int_equal(tpe_schedule(p, tally_fn, &once, TU_MS, &fo), 0);
	do { /* until the timer has handed all three to the pool */
		assert_int_equal(tpe_get_stats(p, &st, sizeof(st)), 0);
	} while (st.submitted < 5);
	assert_int_equal(tpe_shutdown(p), 0);
	assert_true(tpe_is_shutdown(p));
	assert_false(tpe_is_terminated(p));
	tu_latch_count_down(&release);
	assert_int_equal(tpe_future_get(fo, 30 * TU_S, NULL), 0);
	assert_int_equal(once.ran, 1);
	if (cont) {
		while (tu_ran(&rate) < 2 || tu_ran(&delay) < 2)
			tu_sleep_ns(TU_MS);
		assert_int_equal(tpe_future_cancel(fr), 0);
		assert_int_equal(tpe_future_cancel(fd), 0);
	}
	assert_int_equal(tpe_await_termination(p, 30 * TU_S), 0);
	assert_int_equal(tpe_future_get(fr, 0, NULL), ECANCELED);
	assert_int_equal(tpe_future_get(fd, 0, NULL), ECANCELED);
	if (!cont) {
		assert_int_equal(rate.ran, 0);
		assert_int_equal(delay.ran, 0);
	}
	assert_int_equal(rate.discarded, 1);
	assert_int_equal(delay.discarded, 1);
	assert_int_equal(b.ran, 2);
	tpe_future_release(fr);
	tpe_future_release(fd);
	tpe_future_release(fo);
	assert_int_equal(tpe_destroy(p), 0);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
}

static void
test_sched_shutdown_wedged(void **state)
{
	(void)state;
	wedged_case(0);
	wedged_case(TPE_SCHED_DROP_DELAYED_AFTER_SHUTDOWN);
	wedged_case(TPE_SCHED_CONTINUE_PERIODIC_AFTER_SHUTDOWN |
	    TPE_SCHED_DROP_DELAYED_AFTER_SHUTDOWN |
	    TPE_SCHED_REMOVE_ON_CANCEL);
}

static void
test_sched_shutdown_now_hands_back(void **state)
{
	struct tally t[16];
	tpe_future_t *f[16];
	tpe_t *p = default_pool(0);
	int i;

	(void)state;
	memset(t, 0, sizeof(t));
	for (i = 0; i < 16; i++) {
		if (i % 2 == 0)
			assert_int_equal(tpe_schedule(p, tally_fn, &t[i],
			    60 * TU_S, &f[i]), 0);
		else
			assert_int_equal(tpe_schedule_at_fixed_rate(p,
			    tally_fn, &t[i], 60 * TU_S, TU_S, &f[i]), 0);
	}
	assert_int_equal(tpe_shutdown_now(p, handed_cb, NULL), 0);
	for (i = 0; i < 16; i++) {
		assert_int_equal(tpe_future_get(f[i], 0, NULL), ECANCELED);
		assert_int_equal(t[i].handed, 1);
		assert_int_equal(t[i].discarded, 0);
		assert_int_equal(t[i].ran, 0);
		tpe_future_release(f[i]);
	}
	assert_int_equal(tpe_await_termination(p, 10 * TU_S), 0);
	assert_int_equal(tpe_destroy(p), 0);
}

/* tpe_shutdown leaves a delayed one-shot owed to the pool, whose workers
 * are blocked; tpe_shutdown_now then hands the one-shot back once and
 * nothing else of the scheduler's (no helper task) to the callback. */
static int foreign_handed;

static void
counting_handed_cb(tpe_fn fn, void *arg, void *ctx)
{
	if (fn == tally_fn)
		handed_cb(fn, arg, ctx);
	else if (fn != tu_blocker_fn)
		__atomic_add_fetch(&foreign_handed, 1, __ATOMIC_SEQ_CST);
}

static void
test_sched_shutdown_then_shutdown_now(void **state)
{
	struct tu_latch started, release;
	struct tu_blocker b = { &started, &release, NULL, 0 };
	struct tally t;
	tpe_future_t *f;
	tpe_t *p = default_pool(0);

	(void)state;
	memset(&t, 0, sizeof(t));
	tu_latch_init(&started, 2);
	tu_latch_init(&release, 1);
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &b), 0);
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &b), 0);
	tu_latch_wait(&started);
	assert_int_equal(tpe_schedule(p, tally_fn, &t, 60 * TU_S, &f), 0);
	assert_int_equal(tpe_shutdown(p), 0);
	assert_int_equal(tpe_await_termination(p, 0), ETIMEDOUT);
	assert_int_equal(tpe_shutdown_now(p, counting_handed_cb, NULL), 0);
	assert_int_equal(t.handed, 1);
	assert_int_equal(foreign_handed, 0);
	assert_int_equal(tpe_future_get(f, 0, NULL), ECANCELED);
	tu_latch_count_down(&release);
	assert_int_equal(tpe_await_termination(p, 30 * TU_S), 0);
	assert_int_equal(t.ran, 0);
	assert_int_equal(t.discarded, 0);
	tpe_future_release(f);
	assert_int_equal(tpe_destroy(p), 0);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
}

/* ---- scheduling from tasks, refusal --------------------------------- */

struct chain {
	tpe_t *pool;
	int left;
	sem_t done;
};

static void
chain_fn(void *arg)
{
	struct chain *c = arg;

	if (--c->left == 0 ||
	    tpe_schedule(c->pool, chain_fn, c, TU_MS / 10, NULL) != 0)
		sem_post(&c->done);
}

static void
test_sched_from_tasks(void **state)
{
	struct chain c;

	(void)state;
	c.pool = default_pool(0);
	c.left = 50;
	sem_init(&c.done, 0, 0);
	assert_int_equal(tpe_schedule(c.pool, chain_fn, &c, 0, NULL), 0);
	assert_true(tu_sem_wait_for(&c.done, 30 * TU_S));
	assert_int_equal(c.left, 0);
	assert_int_equal(tpe_destroy(c.pool), 0);
	sem_destroy(&c.done);
}

/* A saturated bounded pool (one worker blocked, queue full, abort
 * policy): due tasks wait in the timer, none is rejected or lost. */
static void
test_sched_saturated_pool_loses_nothing(void **state)
{
	struct tu_latch started, release;
	struct tu_blocker b = { &started, &release, NULL, 0 };
	struct tally t[8];
	tpe_future_t *f[8];
	tpe_t *p = make_pool(TPE_QUEUE_BOUNDED, 1, 1, 1, 0);
	int64_t d;
	int i, filler = 0;

	(void)state;
	memset(t, 0, sizeof(t));
	tu_latch_init(&started, 1);
	tu_latch_init(&release, 1);
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &b), 0);
	tu_latch_wait(&started);
	assert_int_equal(tpe_execute(p, tu_count_fn, &filler), 0);
	for (i = 0; i < 8; i++)
		assert_int_equal(tpe_schedule(p, tally_fn, &t[i], 0, &f[i]), 0);
	tu_sleep_ns(5 * TU_MS); /* they are due; the pool is full */
	assert_int_equal(tpe_future_get_delay(f[7], &d), 0);
	assert_true(d <= 0);
	assert_false(tpe_future_is_done(f[7]));
	tu_latch_count_down(&release);
	for (i = 0; i < 8; i++) {
		assert_int_equal(tpe_future_get(f[i], 30 * TU_S, NULL), 0);
		assert_int_equal(t[i].ran, 1);
		tpe_future_release(f[i]);
	}
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(filler, 1);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
}

/* DISCARD_OLDEST evicts a due scheduled task from the pool's queue: the
 * discard callback gets the user's pair and the future is cancelled. */
static void
test_sched_discard_oldest_evicts(void **state)
{
	struct tu_latch started, release;
	struct tu_blocker b = { &started, &release, NULL, 0 };
	struct tpe_stats st;
	struct tally t, u;
	tpe_future_t *f;
	tpe_attr_t *a;
	tpe_t *p;

	(void)state;
	memset(&t, 0, sizeof(t));
	memset(&u, 0, sizeof(u));
	tu_latch_init(&started, 1);
	tu_latch_init(&release, 1);
	assert_int_equal(tpe_attr_create(&a), 0);
	assert_int_equal(tpe_attr_set_pool_size(a, 1, 1), 0);
	assert_int_equal(tpe_attr_set_queue(a, TPE_QUEUE_BOUNDED, 1), 0);
	assert_int_equal(tpe_attr_set_rejection(a, TPE_REJECT_DISCARD_OLDEST),
	    0);
	assert_int_equal(tpe_attr_set_discard_callback(a, discard_cb, NULL), 0);
	assert_int_equal(tpe_create(&p, a), 0);
	tpe_attr_destroy(a);
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &b), 0);
	tu_latch_wait(&started);
	assert_int_equal(tpe_schedule(p, tally_fn, &t, 0, &f), 0);
	do { /* until the timer has put it in the pool's queue */
		assert_int_equal(tpe_get_stats(p, &st, sizeof(st)), 0);
	} while (st.submitted < 2);
	assert_int_equal(tpe_execute(p, tally_fn, &u), 0);
	assert_int_equal(t.discarded, 1);
	assert_int_equal(tpe_future_get(f, 0, NULL), ECANCELED);
	tu_latch_count_down(&release);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(t.ran, 0);
	assert_int_equal(u.ran, 1);
	tpe_future_release(f);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
}

/* A paused pool takes due tasks as tpe_execute does; they run after
 * resume. */
static void
test_sched_paused_pool(void **state)
{
	struct tally t;
	tpe_future_t *f;
	tpe_t *p = default_pool(0);

	(void)state;
	memset(&t, 0, sizeof(t));
	assert_int_equal(tpe_pause(p), 0);
	assert_int_equal(tpe_schedule(p, tally_fn, &t, 0, &f), 0);
	assert_int_equal(tpe_future_get(f, 20 * TU_MS, NULL), ETIMEDOUT);
	assert_int_equal(t.ran, 0);
	assert_int_equal(tpe_resume(p), 0);
	assert_int_equal(tpe_future_get(f, 10 * TU_S, NULL), 0);
	assert_int_equal(t.ran, 1);
	tpe_future_release(f);
	assert_int_equal(tpe_destroy(p), 0);
}

/* ---- exactly once, races ---------------------------------------------- */

struct stress {
	tpe_future_t **f;
	struct tally *t;
	size_t n;
	uint64_t seed;
};

static void *
canceller_main(void *arg)
{
	struct stress *s = arg;
	size_t i;

	for (i = 0; i < s->n; i++) {
		if (tu_rnd(&s->seed, 2) == 0)
			(void)tpe_future_cancel(s->f[i]);
	}
	return NULL;
}

static void
stress_kind(enum tpe_queue_kind kind, size_t cap, size_t core, size_t max,
    unsigned flags, size_t n)
{
	struct stress s;
	pthread_t th;
	tpe_t *p = make_pool(kind, cap, core, max, flags);
	uint64_t seed = 12345;
	size_t i;

	s.f = calloc(n, sizeof(*s.f));
	s.t = calloc(n, sizeof(*s.t));
	s.n = n;
	s.seed = 777;
	assert_non_null(s.f);
	assert_non_null(s.t);
	for (i = 0; i < n; i++)
		assert_int_equal(tpe_schedule(p, tally_fn, &s.t[i],
		    (int64_t)tu_rnd(&seed, 2000) * 1000, &s.f[i]), 0);
	assert_int_equal(pthread_create(&th, NULL, canceller_main, &s), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(tpe_shutdown(p), 0);
	assert_int_equal(tpe_await_termination(p, 60 * TU_S), 0);
	for (i = 0; i < n; i++) {
		int r = s.t[i].ran, d = s.t[i].discarded;
		int rc = tpe_future_get(s.f[i], 0, NULL);

		assert_int_equal(r + d, 1);
		assert_int_equal(rc, r == 1 ? 0 : ECANCELED);
		tpe_future_release(s.f[i]);
	}
	assert_int_equal(tpe_destroy(p), 0);
	free(s.f);
	free(s.t);
}

static void
test_sched_exactly_once_random(void **state)
{
	(void)state;
	stress_kind(TPE_QUEUE_UNBOUNDED, 0, 2, 2, 0, 100000);
	stress_kind(TPE_QUEUE_UNBOUNDED, 0, 2, 2, TPE_SCHED_REMOVE_ON_CANCEL,
	    20000);
}

static void
test_sched_every_queue_kind(void **state)
{
	(void)state;
	stress_kind(TPE_QUEUE_BOUNDED, 4, 1, 2, 0, 5000);
	stress_kind(TPE_QUEUE_HANDOFF, 0, 1, 2, 0, 5000);
	stress_kind(TPE_QUEUE_PER_WORKER, 0, 2, 2, 0, 5000);
}

/* The scale-first policy with a caller-runs rejection: the timer never
 * meets the policy, so every task runs on a worker of the pool, none on
 * the timer thread (white-box: the worker's thread-local pool). */
static int ran_off_worker;

static void
probe_fn(void *arg)
{
	if (tpe__tls_worker_pool == NULL)
		__atomic_store_n(&ran_off_worker, 1, __ATOMIC_SEQ_CST);
	tally_fn(arg);
}

static void
test_sched_scale_first_caller_runs(void **state)
{
	struct tally t[200];
	tpe_future_t *f[200];
	tpe_attr_t *a;
	tpe_t *p;
	int i;

	(void)state;
	memset(t, 0, sizeof(t));
	assert_int_equal(tpe_attr_create(&a), 0);
	assert_int_equal(tpe_attr_set_pool_size(a, 1, 2), 0);
	assert_int_equal(tpe_attr_set_queue(a, TPE_QUEUE_BOUNDED, 2), 0);
	assert_int_equal(tpe_attr_set_policy(a, TPE_POLICY_SCALE_FIRST), 0);
	assert_int_equal(tpe_attr_set_rejection(a, TPE_REJECT_CALLER_RUNS), 0);
	assert_int_equal(tpe_create(&p, a), 0);
	tpe_attr_destroy(a);
	for (i = 0; i < 200; i++)
		assert_int_equal(tpe_schedule(p, probe_fn, &t[i], 0, &f[i]), 0);
	for (i = 0; i < 200; i++) {
		assert_int_equal(tpe_future_get(f[i], 30 * TU_S, NULL), 0);
		assert_int_equal(t[i].ran, 1);
		tpe_future_release(f[i]);
	}
	assert_int_equal(ran_off_worker, 0);
	assert_int_equal(tpe_destroy(p), 0);
}

/* Cancel racing the due time: both threads start on a barrier; the task
 * runs or is cancelled (then handed to discard), never both. */
struct race {
	pthread_barrier_t go;
	tpe_future_t *f;
	int rc;
};

static void *
race_main(void *arg)
{
	struct race *r = arg;

	pthread_barrier_wait(&r->go);
	r->rc = tpe_future_cancel(r->f);
	return NULL;
}

static void
test_sched_cancel_races_due_time(void **state)
{
	tpe_t *p = default_pool(0);
	int i;

	(void)state;
	for (i = 0; i < 2000; i++) {
		struct race r;
		struct tally t;
		pthread_t th;

		memset(&t, 0, sizeof(t));
		pthread_barrier_init(&r.go, NULL, 2);
		assert_int_equal(pthread_create(&th, NULL, race_main, &r), 0);
		assert_int_equal(tpe_schedule(p, tally_fn, &t, i % 3 == 0 ? 0 :
		    (i % 50) * 1000, &r.f), 0);
		pthread_barrier_wait(&r.go);
		assert_int_equal(pthread_join(th, NULL), 0);
		if (r.rc == 0) {
			assert_int_equal(tpe_future_get(r.f, 10 * TU_S, NULL),
			    ECANCELED);
		} else {
			assert_int_equal(r.rc, EBUSY);
			assert_int_equal(tpe_future_get(r.f, 10 * TU_S, NULL),
			    0);
		}
		tpe_future_release(r.f);
		/* The hand-back or the run has happened or will: wait. */
		while (tu_ran(&t) + __atomic_load_n(&t.discarded,
		    __ATOMIC_SEQ_CST) == 0)
			assert_int_equal(tpe_purge(p, NULL), 0);
		assert_int_equal(tu_ran(&t) + t.discarded, 1);
		assert_int_equal(tu_ran(&t), r.rc == 0 ? 0 : 1);
		pthread_barrier_destroy(&r.go);
	}
	assert_int_equal(tpe_destroy(p), 0);
}

/* Futures outlive their pool: after tpe_destroy, cancel, get, get_delay
 * and release of scheduled futures touch nothing of the pool (the ASan
 * build checks). */
static void
test_sched_futures_outlive_pool(void **state)
{
	tpe_future_t *fp, *fo, *fd;
	tpe_t *p = default_pool(0);
	int64_t d;

	(void)state;
	assert_int_equal(tpe_schedule_at_fixed_rate(p, noop_fn, NULL, 60 * TU_S,
	    TU_S, &fp), 0);
	assert_int_equal(tpe_schedule(p, noop_fn, NULL, 0, &fo), 0);
	assert_int_equal(tpe_future_get(fo, 10 * TU_S, NULL), 0);
	assert_int_equal(tpe_schedule_with_fixed_delay(p, noop_fn, NULL, 0,
	    TU_MS, &fd), 0);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(tpe_future_cancel(fp), 0);
	assert_int_equal(tpe_future_cancel(fd), 0);
	assert_int_equal(tpe_future_cancel(fo), EBUSY);
	assert_int_equal(tpe_future_get(fp, 0, NULL), ECANCELED);
	assert_int_equal(tpe_future_get_delay(fp, &d), 0);
	tpe_future_release(fp);
	tpe_future_release(fo);
	tpe_future_release(fd);
}

/* A thread named "tpe-timer" of this process other than `not`, alive
 * (a joined one may stay listed for a moment), or -1. */
static long
timer_tid(long not)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	long tid = -1;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL) {
		char path[300], name[32] = "";
		char st;
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
		    e->d_name);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		if (fgets(name, sizeof(name), f) != NULL &&
		    strncmp(name, "tpe-timer", 9) == 0 &&
		    atol(e->d_name) != not) {
			st = tu_thread_state(atol(e->d_name));
			if (st == 'S' || st == 'R')
				tid = atol(e->d_name);
		}
		fclose(f);
	}
	closedir(d);
	return tid;
}

/* No thread until the first schedule, then one (the timer; no worker
 * while nothing is due), and the timer does not wake while nothing is
 * due (its context switches stay put over a window). */
static void
test_sched_no_thread_no_wakeups(void **state)
{
	long base, tid, old, sw;
	int64_t end;
	tpe_future_t *f;
	tpe_t *p;

	(void)state;
	/* Earlier tests' threads are joined; let the kernel finish them. */
	base = tu_thread_baseline(__real_pthread_create);
	if (base < 0)
		skip();
	old = timer_tid(-1);
	p = default_pool(TPE_SCHED_REMOVE_ON_CANCEL);
	assert_int_equal(tu_thread_count_settled(base), base);
	assert_int_equal(tpe_schedule(p, noop_fn, NULL, 3600 * TU_S, &f), 0);
	assert_int_equal(tu_thread_count_settled(base + 1), base + 1);
	/* Let it name itself and reach its wait (1 s at most), then count. */
	end = tu_now_ns() + TU_S;
	while (((tid = timer_tid(old)) < 0 || tu_thread_state(tid) != 'S') &&
	    tu_now_ns() < end)
		tu_sleep_ns(TU_MS);
	if (tid < 0 || tu_thread_switches(tid) < 0 ||
	    tu_thread_state(tid) != 'S') {
		assert_int_equal(tpe_future_cancel(f), 0);
		tpe_future_release(f);
		assert_int_equal(tpe_destroy(p), 0);
		skip();
	}
	sw = tu_thread_switches(tid);
	tu_sleep_ns(50 * TU_MS);
	assert_int_equal(tu_thread_switches(tid), sw);
	assert_int_equal(tpe_future_cancel(f), 0);
	tpe_future_release(f);
	assert_int_equal(tpe_destroy(p), 0);
}

/* ---- failures and fork ------------------------------------------------ */

/* The scheduler's calloc, the timer's pthread_create, the record's malloc:
 * each fails with its documented error, schedules nothing and leaks
 * nothing (the ASan build checks the leaks); a later call works. */
static void
test_sched_malloc_and_thread_failures(void **state)
{
	struct tally t;
	tpe_future_t *f = NULL;
	tpe_t *p = default_pool(0);

	(void)state;
	memset(&t, 0, sizeof(t));
	fault_arm(&malloc_fault, 0, -1, false);
	assert_int_equal(tpe_schedule(p, tally_fn, &t, 0, &f), ENOMEM);
	fault_disarm(&malloc_fault);
	assert_null(f);
	fault_arm(&create_fault, 0, -1, false);
	assert_int_equal(tpe_schedule(p, tally_fn, &t, 0, &f), EAGAIN);
	assert_true(fault_disarm(&create_fault) >= 1);
	assert_null(f);
	/* The scheduler exists now; only the record's malloc fails. */
	assert_int_equal(tpe_schedule(p, tally_fn, &t, 0, &f), 0);
	assert_int_equal(tpe_future_get(f, 10 * TU_S, NULL), 0);
	tpe_future_release(f);
	f = NULL;
	fault_arm(&malloc_fault, 0, -1, false);
	assert_int_equal(tpe_schedule_at_fixed_rate(p, tally_fn, &t, 0, TU_MS,
	    &f), ENOMEM);
	fault_disarm(&malloc_fault);
	assert_null(f);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(t.ran, 1);
	assert_int_equal(t.discarded, 0);
}

/* The first schedule races the first tpe_shutdown: the shutdown happens
 * while the timer thread is being created (create_around), so it found no
 * scheduler to tell. The schedule then says ECANCELED and keeps nothing
 * (the caller keeps arg), and the pool terminates. */
static tpe_t *racing_pool;

static int
shutdown_then_create(pthread_t *thread, const pthread_attr_t *attr,
    void *(*start)(void *), void *arg)
{
	(void)tpe_shutdown(racing_pool);
	return __real_pthread_create(thread, attr, start, arg);
}

static void
test_sched_first_schedule_races_shutdown(void **state)
{
	struct tally t;
	tpe_future_t *f = (tpe_future_t *)&f;
	struct tpe_stats st;

	(void)state;
	memset(&t, 0, sizeof(t));
	racing_pool = default_pool(0);
	create_around = shutdown_then_create;
	assert_int_equal(tpe_schedule(racing_pool, tally_fn, &t, 0, &f),
	    ECANCELED);
	create_around = NULL;
	assert_null(f);
	assert_int_equal(tpe_await_termination(racing_pool, 10 * TU_S), 0);
	assert_int_equal(tpe_get_stats(racing_pool, &st, sizeof(st)), 0);
	assert_int_equal(st.queued, 0);
	assert_int_equal(tpe_destroy(racing_pool), 0);
	assert_int_equal(t.ran + t.discarded, 0);
}

/*
 * A cancelled task the timer finds first in line is handed back by the
 * timer thread; tpe_shutdown waits for that hand-back, so that once the
 * pool has terminated every scheduled task has run or come back (before,
 * tpe_await_termination could return while the timer was still in the
 * discard callback: the fuzzer saw a task neither run nor handed back).
 * Built: the pool is saturated so the timer holds the due task A in its
 * retry loop; A is cancelled; the timer's next look hands it to a discard
 * callback that blocks; then a thread shuts the pool down and awaits its
 * termination, and must still be inside tpe_shutdown (the hook's timed
 * wait) when the callback is released.
 */
static struct tu_latch *held_cb_entered, *held_cb_release;
static int held_cb_handed; /* atomic */

static void
held_discard(tpe_fn fn, void *arg, void *ctx)
{
	(void)fn;
	(void)arg;
	(void)ctx;
	tu_latch_count_down(held_cb_entered);
	tu_latch_wait(held_cb_release);
	__atomic_add_fetch(&held_cb_handed, 1, __ATOMIC_SEQ_CST);
}

struct shutter {
	tpe_t *pool;
	long tid;            /* atomic */
	int shut_returned;   /* atomic */
	int done;            /* atomic */
	int handed_at_end;   /* held_cb_handed when termination was seen */
};

static void *
shutter_main(void *arg)
{
	struct shutter *sh = arg;

	__atomic_store_n(&sh->tid, (long)syscall(SYS_gettid), __ATOMIC_SEQ_CST);
	(void)tpe_shutdown(sh->pool);
	__atomic_store_n(&sh->shut_returned, 1, __ATOMIC_SEQ_CST);
	if (tpe_await_termination(sh->pool, 30 * TU_S) == 0)
		sh->handed_at_end = __atomic_load_n(&held_cb_handed,
		    __ATOMIC_SEQ_CST);
	else
		sh->handed_at_end = -1;
	__atomic_store_n(&sh->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static bool
shutter_waits_or_done(struct shutter *sh)
{
	long tid = __atomic_load_n(&sh->tid, __ATOMIC_SEQ_CST);
	int kind;

	if (__atomic_load_n(&sh->done, __ATOMIC_SEQ_CST))
		return true;
	if (tid == 0 || __atomic_load_n(&sh->shut_returned, __ATOMIC_SEQ_CST))
		return false;
	kind = tu_thread_wait_kind(tid);
	return kind == TU_WAIT_TIMED || kind == TU_WAIT_UNKNOWN;
}

static void
test_sched_shutdown_waits_for_timer_hand_back(void **state)
{
	struct tu_latch started, release, entered, cb_release;
	struct tu_blocker b = { &started, &release, NULL, 0 };
	struct shutter sh = { 0 };
	struct tally a;
	tpe_future_t *fa;
	pthread_t th;
	int filler = 0;
	tpe_attr_t *at;
	tpe_t *p;

	(void)state;
	memset(&a, 0, sizeof(a));
	tu_latch_init(&started, 1);
	tu_latch_init(&release, 1);
	tu_latch_init(&entered, 1);
	tu_latch_init(&cb_release, 1);
	held_cb_entered = &entered;
	held_cb_release = &cb_release;
	__atomic_store_n(&held_cb_handed, 0, __ATOMIC_SEQ_CST);
	assert_int_equal(tpe_attr_create(&at), 0);
	assert_int_equal(tpe_attr_set_pool_size(at, 1, 1), 0);
	assert_int_equal(tpe_attr_set_queue(at, TPE_QUEUE_BOUNDED, 1), 0);
	assert_int_equal(tpe_attr_set_discard_callback(at, held_discard, NULL),
	    0);
	assert_int_equal(tpe_create(&p, at), 0);
	tpe_attr_destroy(at);
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &b), 0);
	tu_latch_wait(&started);
	assert_int_equal(tpe_execute(p, tu_count_fn, &filler), 0);
	/* Due now; the full pool refuses it, so the timer keeps it. */
	assert_int_equal(tpe_schedule(p, tally_fn, &a, 0, &fa), 0);
	assert_int_equal(tpe_future_cancel(fa), 0);
	/* The timer's next look (1 ms on) hands it back and blocks there. */
	assert_true(tu_latch_wait_for(&entered, TU_WAIT_BOUND));
	sh.pool = p;
	assert_int_equal(pthread_create(&th, NULL, shutter_main, &sh), 0);
	tu_latch_count_down(&release); /* the pool itself can now finish */
	assert_true(TU_EVENTUALLY(shutter_waits_or_done(&sh), TU_WAIT_BOUND));
	tu_latch_count_down(&cb_release);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(sh.handed_at_end, 1);
	assert_int_equal(tu_ran(&a), 0);
	assert_int_equal(filler, 1);
	tpe_future_release(fa);
	assert_int_equal(tpe_destroy(p), 0);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
	tu_latch_destroy(&entered);
	tu_latch_destroy(&cb_release);
}

/*
 * The task hooks around scheduled tasks see the user's pair, as around
 * tpe_execute and tpe_submit tasks (fn NULL for a tpe_schedule_call task),
 * never the scheduler's own; and a one-shot cancelled while it waited in
 * the pool's queue gets no hooks (tpe_attr_set_task_hooks(3)): it goes to
 * the discard callback, once. The state is built: the one worker is held
 * while the four due tasks enter the queue, and the cancel comes then.
 */
struct hook_rec {
	pthread_mutex_t lock;
	int n_before, n_after, n_discarded;
	tpe_fn fn[8];
	void *arg[8];
	tpe_fn discarded_fn;
	void *discarded_arg;
};

static void
rec_before(tpe_t *pool, tpe_fn fn, void *arg, void *ctx)
{
	struct hook_rec *h = ctx;

	(void)pool;
	pthread_mutex_lock(&h->lock);
	if (h->n_before < 8) {
		h->fn[h->n_before] = fn;
		h->arg[h->n_before] = arg;
	}
	h->n_before++;
	pthread_mutex_unlock(&h->lock);
}

static void
rec_after(tpe_t *pool, tpe_fn fn, void *arg, void *ctx)
{
	struct hook_rec *h = ctx;
	int i;
	bool seen = false;

	(void)pool;
	pthread_mutex_lock(&h->lock);
	for (i = 0; i < h->n_before && i < 8; i++)
		seen |= h->fn[i] == fn && h->arg[i] == arg;
	if (seen)
		h->n_after++;
	pthread_mutex_unlock(&h->lock);
}

static void
rec_discard(tpe_fn fn, void *arg, void *ctx)
{
	struct hook_rec *h = ctx;

	pthread_mutex_lock(&h->lock);
	h->n_discarded++;
	h->discarded_fn = fn;
	h->discarded_arg = arg;
	pthread_mutex_unlock(&h->lock);
}

static bool
rec_has(struct hook_rec *h, tpe_fn fn, void *arg)
{
	int i;

	for (i = 0; i < h->n_before && i < 8; i++)
		if (h->fn[i] == fn && h->arg[i] == arg)
			return true;
	return false;
}

static void
test_sched_task_hooks_see_user_pair(void **state)
{
	struct hook_rec h = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct tu_latch started, release;
	struct tu_blocker b = { &started, &release, NULL, 0 };
	struct tally a, c, d;
	int call_arg;
	tpe_future_t *fa, *fb, *fc, *fd;
	tpe_t *p;

	(void)state;
	memset(&a, 0, sizeof(a));
	memset(&c, 0, sizeof(c));
	memset(&d, 0, sizeof(d));
	tu_latch_init(&started, 1);
	tu_latch_init(&release, 1);
	p = tu_pool_with(&(struct tu_pool_opts){ .core = 1, .max = 1,
	    .queue = TPE_QUEUE_UNBOUNDED, .before = rec_before,
	    .after = rec_after, .task_hooks_ctx = &h,
	    .discard = rec_discard, .discard_ctx = &h });
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &b), 0);
	tu_latch_wait(&started);
	assert_int_equal(tpe_schedule(p, tally_fn, &a, 0, &fa), 0);
	assert_int_equal(tpe_schedule_call(p, call_fn, &call_arg, 0, &fb), 0);
	assert_int_equal(tpe_schedule_at_fixed_rate(p, tally_fn, &c, 0,
	    3600 * TU_S, &fc), 0);
	assert_int_equal(tpe_schedule(p, tally_fn, &d, 0, &fd), 0);
	/* All four due and in the pool's queue (white-box), behind b. */
	assert_true(TU_EVENTUALLY(
	    tpe__sched_pending(&p->sched_hook) == 0, TU_WAIT_BOUND));
	assert_int_equal(tpe_future_cancel(fd), 0);
	tu_latch_count_down(&release);
	assert_true(TU_EVENTUALLY(tu_ran(&a) == 1 && tu_ran(&c) == 1 &&
	    tpe_future_is_done(fb), TU_WAIT_BOUND));
	assert_int_equal(tpe_wait_idle(p, 10 * TU_S), 0);
	pthread_mutex_lock(&h.lock);
	assert_int_equal(h.n_before, 4);
	assert_int_equal(h.n_after, 4);
	assert_true(rec_has(&h, tu_blocker_fn, &b));
	assert_true(rec_has(&h, tally_fn, &a));
	assert_true(rec_has(&h, NULL, &call_arg));
	assert_true(rec_has(&h, tally_fn, &c));
	assert_int_equal(h.n_discarded, 1);
	assert_ptr_equal(h.discarded_fn, tally_fn);
	assert_ptr_equal(h.discarded_arg, &d);
	pthread_mutex_unlock(&h.lock);
	assert_int_equal(tu_ran(&d), 0);
	assert_int_equal(tpe_future_cancel(fc), 0);
	tpe_future_release(fa);
	tpe_future_release(fb);
	tpe_future_release(fc);
	tpe_future_release(fd);
	assert_int_equal(tpe_destroy(p), 0);
}

/* fork() with pending timers: the child has no timer; its pool is
 * terminated, a schedule says ECANCELED, and destroy returns. */
static void
test_sched_fork_child(void **state)
{
	struct tally t;
	tpe_future_t *f;
	tpe_t *p = default_pool(0);
	pid_t pid;
	int status;

	(void)state;
	memset(&t, 0, sizeof(t));
	assert_int_equal(tpe_schedule(p, tally_fn, &t, 60 * TU_S, &f), 0);
	assert_int_equal(tpe_schedule_at_fixed_rate(p, noop_fn, NULL, 0, TU_MS,
	    NULL), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int bad = 0;

		if (tpe_schedule(p, noop_fn, NULL, 0, NULL) != ECANCELED)
			bad |= 1;
		if (tpe_future_cancel(f) != 0)
			bad |= 2;
		tpe_future_release(f);
		if (tpe_destroy(p) != 0)
			bad |= 4;
		_exit(bad);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(tpe_future_cancel(f), 0);
	tpe_future_release(f);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(t.discarded, 1);
}

/* ---- issue 33: scheduled tasks after shutdown are tasks ---------------- */

/* A pool from tu_pool_with's knobs with schedule flags and the tally's
 * discard callback. */
static tpe_t *
flagged_pool(const struct tu_pool_opts *o, unsigned flags)
{
	struct tu_pool_opts oo = *o;
	tpe_attr_t *a;
	tpe_t *p;

	if (oo.discard == NULL)
		oo.discard = discard_cb;
	a = tu_attr_with(&oo);
	assert_int_equal(tpe_attr_set_schedule_flags(a, flags), 0);
	assert_int_equal(tpe_create(&p, a), 0);
	tpe_attr_destroy(a);
	return p;
}

/* The white-box timer hook (sched.h): holds the timer the first time
 * heap[0] is due (still pending, or taken when hold_taken), counts every
 * call with holding true and when it came (the scheduler's clock). */
static struct tu_latch *hold_entered, *hold_release;
static bool hold_taken;
static int hold_calls;   /* atomic: calls with holding true */
static int64_t hold_at[16];

static void
hold_hook(bool holding)
{
	int n;

	if (holding) {
		n = __atomic_fetch_add(&hold_calls, 1, __ATOMIC_SEQ_CST);
		if (n < 16)
			hold_at[n] = tu_now_ns();
	}
	if (holding != hold_taken || hold_entered == NULL)
		return;
	tu_latch_count_down(hold_entered);
	tu_latch_wait(hold_release);
	hold_entered = NULL;
}

static void
hold_timer(bool taken)
{
	tu_latch_init(&hold_in, 1);
	tu_latch_init(&hold_out, 1);
	hold_taken = taken;
	hold_calls = 0;
	hold_release = &hold_out;
	hold_entered = &hold_in;
	/* The timer reads it atomically (relaxed: a new timer thread is
	 * made after this store, or the hook was the same). */
	__atomic_store_n(&tpe__sched_timer_hook, hold_hook, __ATOMIC_SEQ_CST);
}

static void
unhold_timer(void)
{
	__atomic_store_n(&tpe__sched_timer_hook, NULL, __ATOMIC_SEQ_CST);
	tu_latch_destroy(&hold_in);
	tu_latch_destroy(&hold_out);
}

/*
 * Tasks pending at shutdown (the timer held while they are due) enter the
 * pool as tasks: the task hooks see each, `completed` counts each, and
 * `queued` counts each once (no helper task), on every queue kind that
 * takes them after shutdown and both policies.
 */
static void
after_shutdown_case(enum tpe_queue_kind kind, size_t cap,
    enum tpe_policy policy)
{
	struct tu_hook_counts hc = { 0 };
	struct tally t[20];
	tpe_future_t *f[20];
	struct tpe_stats st;
	tpe_t *p;
	int i;

	memset(t, 0, sizeof(t));
	p = flagged_pool(&(struct tu_pool_opts){ .core = 2, .max = 2,
	    .queue = kind, .capacity = cap, .policy = policy,
	    .before = tu_count_before, .after = tu_count_after,
	    .task_hooks_ctx = &hc }, 0);
	hold_timer(false);
	assert_int_equal(tpe_schedule(p, tally_fn, &t[0], 0, &f[0]), 0);
	assert_true(tu_latch_wait_for(&hold_in, TU_WAIT_BOUND));
	for (i = 1; i < 20; i++)
		assert_int_equal(tpe_schedule(p, tally_fn, &t[i], 0, &f[i]),
		    0);
	assert_int_equal(tpe_shutdown(p), 0);
	assert_int_equal(tpe_get_stats(p, &st, sizeof(st)), 0);
	assert_int_equal(st.queued, 20);
	assert_int_equal(st.completed, 0);
	assert_false(tpe_is_terminated(p));
	tu_latch_count_down(&hold_out);
	assert_int_equal(tpe_await_termination(p, 30 * TU_S), 0);
	for (i = 0; i < 20; i++) {
		assert_int_equal(tpe_future_get(f[i], 0, NULL), 0);
		assert_int_equal(t[i].ran, 1);
		assert_int_equal(t[i].discarded, 0);
		tpe_future_release(f[i]);
	}
	assert_int_equal(hc.before, 20);
	assert_int_equal(hc.after, 20);
	assert_int_equal(tpe_get_stats(p, &st, sizeof(st)), 0);
	assert_int_equal(st.completed, 20);
	assert_int_equal(st.submitted, 20);
	assert_int_equal(st.queued, 0);
	assert_int_equal(tpe_destroy(p), 0);
	unhold_timer();
}

static void
test_sched_after_shutdown_are_tasks(void **state)
{
	(void)state;
	after_shutdown_case(TPE_QUEUE_UNBOUNDED, 0, TPE_POLICY_QUEUE_FIRST);
	after_shutdown_case(TPE_QUEUE_UNBOUNDED, 0, TPE_POLICY_SCALE_FIRST);
	after_shutdown_case(TPE_QUEUE_BOUNDED, 4, TPE_POLICY_QUEUE_FIRST);
	after_shutdown_case(TPE_QUEUE_BOUNDED, 4, TPE_POLICY_SCALE_FIRST);
	after_shutdown_case(TPE_QUEUE_HANDOFF, 0, TPE_POLICY_QUEUE_FIRST);
	after_shutdown_case(TPE_QUEUE_HANDOFF, 0, TPE_POLICY_SCALE_FIRST);
}

/* One blocked worker, one periodic task an hour ahead, CONTINUE_PERIODIC:
 * shutdown leaves `queued` at 1 (Java's getQueue().size()). */
static void
test_sched_shutdown_queued_unchanged(void **state)
{
	struct tu_saturation sat;
	struct tally per;
	struct tpe_stats st;
	tpe_future_t *f;
	tpe_t *p = flagged_pool(&(struct tu_pool_opts){ .core = 1, .max = 1,
	    .queue = TPE_QUEUE_UNBOUNDED },
	    TPE_SCHED_CONTINUE_PERIODIC_AFTER_SHUTDOWN);

	(void)state;
	memset(&per, 0, sizeof(per));
	tu_saturate(p, 1, 0, &sat);
	assert_int_equal(tpe_schedule_at_fixed_rate(p, tally_fn, &per,
	    3600 * TU_S, TU_S, &f), 0);
	assert_int_equal(tpe_get_stats(p, &st, sizeof(st)), 0);
	assert_int_equal(st.queued, 1);
	assert_int_equal(tpe_shutdown(p), 0);
	assert_int_equal(tpe_get_stats(p, &st, sizeof(st)), 0);
	assert_int_equal(st.queued, 1);
	assert_int_equal(tpe_future_cancel(f), 0);
	assert_int_equal(tpe_get_stats(p, &st, sizeof(st)), 0);
	assert_int_equal(st.queued, 0);
	assert_int_equal(per.discarded, 1);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_await_termination(p, 30 * TU_S), 0);
	tpe_future_release(f);
	assert_int_equal(tpe_destroy(p), 0);
	tu_saturation_destroy(&sat);
}

/* A pool without threads, shut down while it owes a periodic task
 * (CONTINUE_PERIODIC): not terminated while owed; the cancel that ends
 * the debt terminates it before it returns (the scheduler settles it). */
static void
test_sched_cancel_after_shutdown_terminates(void **state)
{
	struct tally per;
	tpe_future_t *f;
	tpe_t *p = make_pool(TPE_QUEUE_UNBOUNDED, 0, 1, 1,
	    TPE_SCHED_CONTINUE_PERIODIC_AFTER_SHUTDOWN);

	(void)state;
	memset(&per, 0, sizeof(per));
	assert_int_equal(tpe_schedule_at_fixed_rate(p, tally_fn, &per,
	    3600 * TU_S, TU_S, &f), 0);
	assert_int_equal(tpe_shutdown(p), 0);
	assert_false(tpe_is_terminated(p));
	assert_int_equal(tpe_await_termination(p, 0), ETIMEDOUT);
	assert_int_equal(tpe_future_cancel(f), 0);
	assert_true(tpe_is_terminated(p));
	assert_int_equal(per.discarded, 1);
	assert_int_equal(per.ran, 0);
	tpe_future_release(f);
	assert_int_equal(tpe_destroy(p), 0);
}

/*
 * A periodic run the timer handed to the queue (behind a blocked worker)
 * stops at shutdown: when tpe_shutdown returns its future is cancelled,
 * it went to the discard callback once and left the queue. On a kind that
 * only drains whole (per-worker), it leaves when the worker takes it, with
 * task hooks too (it never starts: no hooks for it).
 */
static void
queued_periodic_case(enum tpe_queue_kind kind, bool at_once)
{
	struct tu_hook_counts hc = { 0 };
	struct tu_saturation sat;
	struct tally per;
	struct tpe_stats st;
	tpe_future_t *f;
	tpe_t *p = flagged_pool(&(struct tu_pool_opts){ .core = 1, .max = 1,
	    .queue = kind, .before = tu_count_before,
	    .after = tu_count_after, .task_hooks_ctx = &hc }, 0);

	memset(&per, 0, sizeof(per));
	tu_saturate(p, 1, 0, &sat);
	assert_int_equal(tpe_schedule_at_fixed_rate(p, tally_fn, &per, 0,
	    3600 * TU_S, &f), 0);
	/* Handed to the queue: no longer pending (white-box). */
	assert_true(TU_EVENTUALLY(
	    tpe__sched_pending(&p->sched_hook) == 0, TU_WAIT_BOUND));
	assert_int_equal(tpe_shutdown(p), 0);
	if (at_once) {
		assert_int_equal(tpe_future_get(f, 0, NULL), ECANCELED);
		assert_int_equal(per.discarded, 1);
		assert_int_equal(tpe_get_stats(p, &st, sizeof(st)), 0);
		assert_int_equal(st.queued, 0);
	}
	tu_unsaturate(&sat);
	assert_int_equal(tpe_await_termination(p, 30 * TU_S), 0);
	assert_int_equal(tpe_future_get(f, 0, NULL), ECANCELED);
	assert_int_equal(per.ran, 0);
	assert_int_equal(per.discarded, 1);
	assert_int_equal(hc.before, 1); /* the blocker only */
	assert_int_equal(hc.after, 1);
	tpe_future_release(f);
	assert_int_equal(tpe_destroy(p), 0);
	tu_saturation_destroy(&sat);
}

static void
test_sched_shutdown_stops_queued_periodic(void **state)
{
	(void)state;
	queued_periodic_case(TPE_QUEUE_UNBOUNDED, true);
	queued_periodic_case(TPE_QUEUE_PER_WORKER, false);
}

/* tpe_purge removes a cancelled scheduled task already due and queued. */
static void
test_sched_purge_due_cancelled(void **state)
{
	struct tu_saturation sat;
	struct tally t;
	struct tpe_stats st;
	tpe_future_t *f;
	size_t purged;
	tpe_t *p = flagged_pool(&(struct tu_pool_opts){ .core = 1, .max = 1,
	    .queue = TPE_QUEUE_UNBOUNDED }, 0);

	(void)state;
	memset(&t, 0, sizeof(t));
	tu_saturate(p, 1, 0, &sat);
	assert_int_equal(tpe_schedule(p, tally_fn, &t, 0, &f), 0);
	assert_true(TU_EVENTUALLY(
	    tpe__sched_pending(&p->sched_hook) == 0, TU_WAIT_BOUND));
	assert_int_equal(tpe_future_cancel(f), 0);
	assert_int_equal(tpe_purge(p, &purged), 0);
	assert_int_equal(purged, 1);
	assert_int_equal(t.discarded, 1);
	assert_int_equal(tpe_get_stats(p, &st, sizeof(st)), 0);
	assert_int_equal(st.queued, 0);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_wait_idle(p, 30 * TU_S), 0);
	assert_int_equal(t.ran, 0);
	assert_int_equal(t.discarded, 1);
	tpe_future_release(f);
	assert_int_equal(tpe_destroy(p), 0);
	tu_saturation_destroy(&sat);
}

/* tpe_shutdown_now hands scheduled tasks back once the pool is shut down:
 * the callback sees it shut down and refusing tasks. */
static tpe_t *handback_pool;
static int handback_seen[4]; /* is_shutdown, execute, execute_wait, schedule */

static void
probing_handed_cb(tpe_fn fn, void *arg, void *ctx)
{
	(void)ctx;
	if (fn != tally_fn)
		return;
	handback_seen[0] = tpe_is_shutdown(handback_pool);
	handback_seen[1] = tpe_execute(handback_pool, noop_fn, NULL);
	handback_seen[2] = tpe_execute_wait(handback_pool, noop_fn, NULL, 0);
	handback_seen[3] = tpe_schedule(handback_pool, noop_fn, NULL, 0, NULL);
	handed_cb(fn, arg, ctx);
}

static void
test_sched_shutdown_now_hands_back_after_shutdown(void **state)
{
	struct tally t;
	tpe_future_t *f;
	tpe_t *p = default_pool(0);

	(void)state;
	memset(&t, 0, sizeof(t));
	handback_pool = p;
	assert_int_equal(tpe_schedule(p, tally_fn, &t, 3600 * TU_S, &f), 0);
	assert_int_equal(tpe_shutdown_now(p, probing_handed_cb, NULL), 0);
	assert_int_equal(t.handed, 1);
	assert_int_equal(handback_seen[0], 1);
	assert_int_equal(handback_seen[1], ECANCELED);
	assert_int_equal(handback_seen[2], ECANCELED);
	assert_int_equal(handback_seen[3], ECANCELED);
	assert_int_equal(tpe_future_get(f, 0, NULL), ECANCELED);
	assert_int_equal(tpe_await_termination(p, 30 * TU_S), 0);
	tpe_future_release(f);
	assert_int_equal(tpe_destroy(p), 0);
}

/*
 * A continuation of a due one-shot scheduled task that tpe_shutdown_now
 * drains from the pool's queue runs when its future is cancelled there,
 * and may call into the pool: the future is cancelled outside the pool's
 * lock. (Cancelled under it, the continuation's tpe_get_stats deadlocked
 * on the lock its own thread held; the debug build asserted.)
 */
static tpe_t *then_pool;
static int then_stats_rc = -1;
static int then_cancelled = -1;

static void
then_reads_stats(tpe_future_t *f, void *ctx)
{
	struct tpe_stats st;

	(void)ctx;
	then_cancelled = tpe_future_is_cancelled(f);
	then_stats_rc = tpe_get_stats(then_pool, &st, sizeof(st));
	tpe_future_release(f);
}

static size_t
queued_of(tpe_t *p)
{
	struct tpe_stats st;

	return tpe_get_stats(p, &st, sizeof(st)) == 0 ? st.queued : SIZE_MAX;
}

static void
test_sched_shutdown_now_continuation_outside_lock(void **state)
{
	struct tu_saturation sat;
	struct tally t;
	tpe_future_t *f;
	tpe_t *p = flagged_pool(&(struct tu_pool_opts){ .core = 1, .max = 1,
	    .queue = TPE_QUEUE_UNBOUNDED }, 0);

	(void)state;
	memset(&t, 0, sizeof(t));
	then_pool = p;
	then_stats_rc = then_cancelled = -1;
	tu_saturate(p, 1, 0, &sat);
	assert_int_equal(tpe_schedule(p, tally_fn, &t, 0, &f), 0);
	/* Due, and entered: in the pool's queue behind the blocked worker
	 * (queued counts the timer's heap, not a record it holds while it
	 * enters it: queued 1 with the heap empty is the pool's queue). */
	assert_true(TU_EVENTUALLY(
	    tpe__sched_pending(&p->sched_hook) == 0 && queued_of(p) == 1,
	    TU_WAIT_BOUND));
	assert_int_equal(tpe_future_then(f, then_reads_stats, NULL, NULL), 0);
	assert_int_equal(then_stats_rc, -1); /* not done yet */
	assert_int_equal(tpe_shutdown_now(p, handed_cb, &t), 0);
	assert_int_equal(then_cancelled, 1);
	assert_int_equal(then_stats_rc, 0);
	assert_int_equal(t.handed, 1);
	assert_int_equal(t.ran, 0);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_await_termination(p, 30 * TU_S), 0);
	tpe_future_release(f);
	assert_int_equal(tpe_destroy(p), 0);
	tu_saturation_destroy(&sat);
}

/*
 * Two first schedules of a pool race to make its scheduler; the loser's
 * timer must touch nothing of the pool's hook. Built exactly: A's
 * scheduler is made and held before its timer starts; B's wins, and
 * tpe_shutdown leaves it owing a delayed task (the pool must not
 * terminate); then A's timer starts. Before the fix, its first loop
 * stored its own debt (none) over B's and settled the pool, which
 * terminated with the task still held (tests/chaos: "terminated pool not
 * empty", queued held in the timer). The made hook then gives A's timer a
 * bounded while (the only time window here: it can only let the defect
 * show) before A publishes and loses.
 */
static sem_t made_in, made_go;
static bool made_held;     /* A's scheduler was held (atomic) */
static pthread_t made_thread; /* A's thread: written before made_in */
static tpe_t *made_pool;

static void
made_hook(bool started)
{
	if (!started) {
		if (__atomic_exchange_n(&made_held, true, __ATOMIC_SEQ_CST))
			return; /* B's scheduler */
		made_thread = pthread_self();
		sem_post(&made_in);
		(void)tu_sem_wait_for(&made_go, TU_WAIT_BOUND);
		return;
	}
	if (!pthread_equal(pthread_self(), made_thread))
		return; /* B's */
	/* A's timer runs now: the debt must stay B's. */
	(void)TU_EVENTUALLY(!tpe__sched_owes(&made_pool->sched_hook),
	    100 * TU_MS * tu_time_scale());
}

static void *
first_schedule_main(void *arg)
{
	*(int *)arg = tpe_schedule(made_pool, noop_fn, NULL, 3600 * TU_S,
	    NULL);
	return NULL;
}

static void
test_sched_losing_scheduler_touches_nothing(void **state)
{
	pthread_t th;
	tpe_future_t *f;
	int rc_a = -1;
	tpe_t *p = default_pool(0);

	(void)state;
	made_pool = p;
	made_held = false;
	assert_int_equal(sem_init(&made_in, 0, 0), 0);
	assert_int_equal(sem_init(&made_go, 0, 0), 0);
	tpe__sched_made_hook = made_hook;
	assert_int_equal(pthread_create(&th, NULL, first_schedule_main,
	    &rc_a), 0);
	assert_true(tu_sem_wait_for(&made_in, TU_WAIT_BOUND));
	/* B: the second call makes its own scheduler and publishes it. */
	assert_int_equal(tpe_schedule(p, noop_fn, NULL, 3600 * TU_S, &f), 0);
	assert_int_equal(tpe_shutdown(p), 0);
	assert_true(tpe__sched_owes(&p->sched_hook));
	/* A: its timer starts, then it loses the race (ECANCELED: the
	 * winner is shut down). */
	sem_post(&made_go);
	assert_int_equal(pthread_join(th, NULL), 0);
	tpe__sched_made_hook = NULL;
	assert_int_equal(rc_a, ECANCELED);
	assert_true(tpe__sched_owes(&p->sched_hook));
	assert_false(tpe_is_terminated(p));
	/* Cancelled, the owed task leaves the timer: the debt ends, and so
	 * does the pool. */
	assert_int_equal(tpe_future_cancel(f), 0);
	assert_int_equal(tpe_await_termination(p, 30 * TU_S), 0);
	tpe_future_release(f);
	assert_int_equal(tpe_destroy(p), 0);
	sem_destroy(&made_in);
	sem_destroy(&made_go);
}

/* tpe_wait_idle counts a scheduled task whose delay has passed as queued
 * work (held in the timer here), and not one still ahead. */
static void
test_sched_wait_idle_counts_due(void **state)
{
	struct tally due, later;
	tpe_future_t *fd, *fl;
	tpe_t *p = default_pool(0);

	(void)state;
	memset(&due, 0, sizeof(due));
	memset(&later, 0, sizeof(later));
	assert_int_equal(tpe_schedule(p, tally_fn, &later, 3600 * TU_S, &fl),
	    0);
	assert_int_equal(tpe_wait_idle(p, 0), 0);
	hold_timer(false);
	assert_int_equal(tpe_schedule(p, tally_fn, &due, 0, &fd), 0);
	assert_true(tu_latch_wait_for(&hold_in, TU_WAIT_BOUND));
	assert_int_equal(tpe_wait_idle(p, 0), ETIMEDOUT);
	tu_latch_count_down(&hold_out);
	assert_int_equal(tpe_wait_idle(p, 30 * TU_S), 0);
	assert_int_equal(due.ran, 1);
	assert_int_equal(later.ran, 0);
	assert_int_equal(tpe_future_cancel(fl), 0);
	tpe_future_release(fd);
	tpe_future_release(fl);
	assert_int_equal(tpe_destroy(p), 0);
	unhold_timer();
}

/* ---- issue 33: cases that catch the scheduler's plausible bugs --------- */

/* A fixed-rate run that starts late (the clock moved on while it waited
 * behind a blocked worker) keeps its rate: the next run is due one period
 * after the last due time, not after the late start. */
static struct tu_latch *rate_running, *rate_release;

static void
rate_fn(void *arg)
{
	(void)arg;
	if (rate_running != NULL) {
		tu_latch_count_down(rate_running);
		tu_latch_wait(rate_release);
	}
}

static void
test_sched_fixed_rate_keeps_rate(void **state)
{
	struct tu_saturation sat;
	struct tu_latch running, release;
	const int64_t period = 3600 * TU_S, late = 1800 * TU_S;
	int64_t delay;
	tpe_future_t *f;
	tpe_t *p = make_pool(TPE_QUEUE_UNBOUNDED, 0, 1, 1, 0);

	(void)state;
	tu_latch_init(&running, 1);
	tu_latch_init(&release, 1);
	rate_running = &running;
	rate_release = &release;
	fake_now = tu_now_ns();
	__atomic_store_n(&tpe__sched_clock_hook, fake_clock, __ATOMIC_SEQ_CST);
	tu_saturate(p, 1, 0, &sat);
	assert_int_equal(tpe_schedule_at_fixed_rate(p, rate_fn, NULL, 0,
	    period, &f), 0);
	assert_true(TU_EVENTUALLY(
	    tpe__sched_pending(&p->sched_hook) == 0, TU_WAIT_BOUND));
	__atomic_store_n(&fake_now, fake_now + late, __ATOMIC_SEQ_CST);
	tu_unsaturate(&sat);
	assert_true(tu_latch_wait_for(&running, TU_WAIT_BOUND));
	/* Due at the first due time + period: period - late from now. */
	assert_int_equal(tpe_future_get_delay(f, &delay), 0);
	assert_int_equal(delay, period - late);
	tu_latch_count_down(&release);
	assert_int_equal(tpe_future_cancel(f), 0);
	tpe_future_release(f);
	assert_int_equal(tpe_destroy(p), 0);
	__atomic_store_n(&tpe__sched_clock_hook, NULL, __ATOMIC_SEQ_CST);
	rate_running = NULL;
	tu_saturation_destroy(&sat);
	tu_latch_destroy(&running);
	tu_latch_destroy(&release);
}

/* A due task the saturated pool refuses is offered again no sooner than
 * every millisecond (tpe_schedule(3)), not in a spin. */
static void
test_sched_refused_retry_paced(void **state)
{
	struct tu_saturation sat;
	struct tally t;
	tpe_future_t *f;
	tpe_t *p = make_pool(TPE_QUEUE_BOUNDED, 1, 1, 1, 0);
	int i;

	(void)state;
	memset(&t, 0, sizeof(t));
	tu_saturate(p, 1, 1, &sat);
	hold_timer(true);
	hold_entered = NULL; /* count only, never hold */
	assert_int_equal(tpe_schedule(p, tally_fn, &t, 0, &f), 0);
	/* The ninth call's count comes after the eighth's hold_at. */
	assert_true(TU_EVENTUALLY(__atomic_load_n(&hold_calls,
	    __ATOMIC_SEQ_CST) >= 9, TU_WAIT_BOUND));
	__atomic_store_n(&tpe__sched_timer_hook, NULL, __ATOMIC_SEQ_CST);
	for (i = 1; i < 8; i++)
		assert_true(hold_at[i] - hold_at[i - 1] >= TU_MS);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_future_get(f, 30 * TU_S, NULL), 0);
	assert_int_equal(t.ran, 1);
	tpe_future_release(f);
	assert_int_equal(tpe_destroy(p), 0);
	unhold_timer();
	tu_saturation_destroy(&sat);
}

/* DROP_DELAYED drops the one-shots not yet due at shutdown, not those due
 * and still pending (a saturated pool refused them): those run. */
static void
test_sched_drop_delayed_keeps_due(void **state)
{
	struct tu_saturation sat;
	struct tally due, later;
	tpe_future_t *fd, *fl;
	tpe_t *p = make_pool(TPE_QUEUE_BOUNDED, 1, 1, 1,
	    TPE_SCHED_DROP_DELAYED_AFTER_SHUTDOWN);

	(void)state;
	memset(&due, 0, sizeof(due));
	memset(&later, 0, sizeof(later));
	tu_saturate(p, 1, 1, &sat);
	assert_int_equal(tpe_schedule(p, tally_fn, &due, 0, &fd), 0);
	assert_int_equal(tpe_schedule(p, tally_fn, &later, 3600 * TU_S, &fl),
	    0);
	assert_int_equal(tpe_shutdown(p), 0);
	assert_int_equal(tpe_future_get(fl, 0, NULL), ECANCELED);
	assert_int_equal(later.discarded, 1);
	assert_int_equal(tpe__sched_pending(&p->sched_hook), 1);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_future_get(fd, 30 * TU_S, NULL), 0);
	assert_int_equal(tpe_await_termination(p, 30 * TU_S), 0);
	assert_int_equal(due.ran, 1);
	assert_int_equal(due.discarded, 0);
	tpe_future_release(fd);
	tpe_future_release(fl);
	assert_int_equal(tpe_destroy(p), 0);
	tu_saturation_destroy(&sat);
}

/* A periodic task running while tpe_shutdown_now comes does not re-arm,
 * even with CONTINUE_PERIODIC: its future ends cancelled and nothing is
 * left pending. */
static void
test_sched_shutdown_now_stops_running_periodic(void **state)
{
	struct tu_latch running, release;
	struct tpe_stats st;
	tpe_future_t *f;
	tpe_t *p = make_pool(TPE_QUEUE_UNBOUNDED, 0, 1, 1,
	    TPE_SCHED_CONTINUE_PERIODIC_AFTER_SHUTDOWN);

	(void)state;
	tu_latch_init(&running, 1);
	tu_latch_init(&release, 1);
	rate_running = &running;
	rate_release = &release;
	assert_int_equal(tpe_schedule_with_fixed_delay(p, rate_fn, NULL, 0,
	    3600 * TU_S, &f), 0);
	assert_true(tu_latch_wait_for(&running, TU_WAIT_BOUND));
	assert_int_equal(tpe_shutdown_now(p, handed_cb, NULL), 0);
	rate_running = NULL;
	tu_latch_count_down(&release);
	assert_int_equal(tpe_await_termination(p, 30 * TU_S), 0);
	assert_int_equal(tpe_future_get(f, 0, NULL), ECANCELED);
	assert_int_equal(tpe_get_stats(p, &st, sizeof(st)), 0);
	assert_int_equal(st.queued, 0);
	tpe_future_release(f);
	assert_int_equal(tpe_destroy(p), 0);
	tu_latch_destroy(&running);
	tu_latch_destroy(&release);
}

/* The heap keeps a slot for the task the timer holds: with the heap
 * exactly full of other tasks, a refused one goes back in. */
static void
test_sched_heap_room_for_held(void **state)
{
	struct tu_saturation sat;
	struct tally held, t[16];
	tpe_future_t *fh, *f[16];
	tpe_t *p = make_pool(TPE_QUEUE_BOUNDED, 1, 1, 1, 0);
	int i;

	(void)state;
	memset(&held, 0, sizeof(held));
	memset(t, 0, sizeof(t));
	tu_saturate(p, 1, 1, &sat);
	hold_timer(true);
	assert_int_equal(tpe_schedule(p, tally_fn, &held, 0, &fh), 0);
	assert_true(tu_latch_wait_for(&hold_in, TU_WAIT_BOUND));
	/* The heap's first array holds 16. */
	for (i = 0; i < 16; i++)
		assert_int_equal(tpe_schedule(p, tally_fn, &t[i],
		    3600 * TU_S, &f[i]), 0);
	tu_latch_count_down(&hold_out);
	/* Refused (saturated), back in the heap, offered again. */
	assert_true(TU_EVENTUALLY(__atomic_load_n(&hold_calls,
	    __ATOMIC_SEQ_CST) >= 2, TU_WAIT_BOUND));
	assert_int_equal(tpe__sched_pending(&p->sched_hook), 17);
	for (i = 0; i < 16; i++) {
		assert_int_equal(tpe_future_cancel(f[i]), 0);
		tpe_future_release(f[i]);
	}
	tu_unsaturate(&sat);
	assert_int_equal(tpe_future_get(fh, 30 * TU_S, NULL), 0);
	assert_int_equal(held.ran, 1);
	tpe_future_release(fh);
	assert_int_equal(tpe_destroy(p), 0);
	unhold_timer();
	tu_saturation_destroy(&sat);
	for (i = 0; i < 16; i++) {
		assert_int_equal(t[i].ran, 0);
		assert_int_equal(t[i].discarded, 1);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sched_errors),
		cmocka_unit_test(test_sched_never_before_delay),
		cmocka_unit_test(test_sched_fifo_and_nonpositive_delay),
		cmocka_unit_test(test_sched_get_delay),
		cmocka_unit_test(test_sched_fixed_rate),
		cmocka_unit_test(test_sched_fixed_delay),
		cmocka_unit_test(test_sched_fixed_rate_overrun),
		cmocka_unit_test(test_sched_cancel_discard_purge),
		cmocka_unit_test(test_sched_remove_on_cancel),
		cmocka_unit_test(test_sched_shutdown_default),
		cmocka_unit_test(test_sched_shutdown_drop_delayed),
		cmocka_unit_test(test_sched_shutdown_continue_periodic),
		cmocka_unit_test(test_sched_shutdown_wedged),
		cmocka_unit_test(test_sched_shutdown_now_hands_back),
		cmocka_unit_test(test_sched_shutdown_then_shutdown_now),
		cmocka_unit_test(test_sched_from_tasks),
		cmocka_unit_test(test_sched_saturated_pool_loses_nothing),
		cmocka_unit_test(test_sched_exactly_once_random),
		cmocka_unit_test(test_sched_every_queue_kind),
		cmocka_unit_test(test_sched_paused_pool),
		cmocka_unit_test(test_sched_discard_oldest_evicts),
		cmocka_unit_test(test_sched_scale_first_caller_runs),
		cmocka_unit_test(test_sched_cancel_races_due_time),
		cmocka_unit_test(test_sched_futures_outlive_pool),
		cmocka_unit_test(test_sched_no_thread_no_wakeups),
		cmocka_unit_test(test_sched_first_schedule_races_shutdown),
		cmocka_unit_test(test_sched_malloc_and_thread_failures),
		cmocka_unit_test(test_sched_task_hooks_see_user_pair),
		cmocka_unit_test(test_sched_shutdown_waits_for_timer_hand_back),
		cmocka_unit_test(test_sched_fork_child),
		cmocka_unit_test(test_sched_after_shutdown_are_tasks),
		cmocka_unit_test(test_sched_shutdown_queued_unchanged),
		cmocka_unit_test(test_sched_cancel_after_shutdown_terminates),
		cmocka_unit_test(test_sched_shutdown_stops_queued_periodic),
		cmocka_unit_test(test_sched_purge_due_cancelled),
		cmocka_unit_test(test_sched_wait_idle_counts_due),
		cmocka_unit_test(test_sched_shutdown_now_hands_back_after_shutdown),
		cmocka_unit_test(
		    test_sched_shutdown_now_continuation_outside_lock),
		cmocka_unit_test(test_sched_losing_scheduler_touches_nothing),
		cmocka_unit_test(test_sched_fixed_rate_keeps_rate),
		cmocka_unit_test(test_sched_refused_retry_paced),
		cmocka_unit_test(test_sched_drop_delayed_keeps_due),
		cmocka_unit_test(test_sched_shutdown_now_stops_running_periodic),
		cmocka_unit_test(test_sched_heap_room_for_held),
	};

	tu_time_bound(0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
