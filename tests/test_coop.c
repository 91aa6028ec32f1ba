/* SPDX-License-Identifier: MIT */
/*
 * test_coop.c - the cooperative tasklet service: round-robin order, idle
 * backoff and parking, stealing, completion exactly once under cancel and
 * wait races, errors, blocking tasklets, destroy, bad input, and malloc /
 * pthread_create failures (the --wrap wrappers of tests/helpers.h).
 */
#include <signal.h>

#define TU_FAULT_INJECTION /* this binary links the --wrap wrappers */
#include "helpers.h"

#include "coop/coop.h"

/* ---- a test tasklet ---------------------------------------------------- */

#define ORDER_MAX 64

/*
 * Counts its calls; returns `progress` until it has been called `limit`
 * times (limit 0: forever) and *release (when set) is non-zero, then
 * `final`. Checks that no two calls overlap (an atomic exchange of
 * in_call), notes the thread of its first and of its latest call, and
 * counts its end.
 */
struct tk {
	int id;
	int limit;
	int progress;
	int final;
	int *release;
	struct tu_latch *started; /* counted down at the first call */
	struct tu_latch *reached; /* counted down at call reached_at */
	int reached_at;
	int *order, *order_len;   /* the ids of the calls, in order */
	int calls, in_call, overlap, ends, end_result; /* atomic */
	pthread_t first;
	pthread_t last;           /* atomic: the thread of the latest call */
	pthread_t end_thread;     /* the thread of the end callback */
};

static int
tk_fn(void *p)
{
	struct tk *t = p;
	int n, r;

	if (__atomic_exchange_n(&t->in_call, 1, __ATOMIC_SEQ_CST))
		__atomic_store_n(&t->overlap, 1, __ATOMIC_SEQ_CST);
	n = __atomic_add_fetch(&t->calls, 1, __ATOMIC_SEQ_CST);
	if (n == 1) {
		t->first = pthread_self();
		if (t->started != NULL)
			tu_latch_count_down(t->started);
	}
	if (t->reached != NULL && n == t->reached_at)
		tu_latch_count_down(t->reached);
	__atomic_store_n(&t->last, pthread_self(), __ATOMIC_SEQ_CST);
	if (t->order != NULL) {
		int i = __atomic_fetch_add(t->order_len, 1, __ATOMIC_SEQ_CST);

		if (i < ORDER_MAX)
			t->order[i] = t->id;
	}
	r = t->progress;
	if (t->limit > 0 && n >= t->limit && (t->release == NULL ||
	    __atomic_load_n(t->release, __ATOMIC_SEQ_CST)))
		r = t->final;
	__atomic_store_n(&t->in_call, 0, __ATOMIC_SEQ_CST);
	return r;
}

static void
tk_end(void *p, int result)
{
	struct tk *t = p;

	t->end_thread = pthread_self();
	__atomic_store_n(&t->end_result, result, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&t->ends, 1, __ATOMIC_SEQ_CST);
}

/* Tasklets for tk[0..n): each calls its tk and ends with it. */
static void
tk_tasklets(struct tpe_tasklet *ts, struct tk *tk, size_t n, unsigned flags)
{
	size_t i;

	for (i = 0; i < n; i++) {
		tk[i].id = (int)i;
		ts[i] = (struct tpe_tasklet){ tk_fn, &tk[i], tk_end, flags };
	}
}

/* Every tasklet ended exactly once, with `result`, and none overlapped. */
static void
assert_ended_once(struct tk *tk, size_t n, int result)
{
	size_t i;

	for (i = 0; i < n; i++) {
		assert_int_equal(tu_load(&tk[i].ends), 1);
		if (result >= 0)
			assert_int_equal(tu_load(&tk[i].end_result), result);
		assert_int_equal(tu_load(&tk[i].overlap), 0);
	}
}

static tpe_coop_t *
coop_new(size_t threads, int64_t max_park_ns, unsigned flags)
{
	struct tpe_coop_config c = { threads, max_park_ns, flags, "test" };
	tpe_coop_t *coop = NULL;

	assert_int_equal(tpe_coop_create(&coop, &c, sizeof(c)), 0);
	return coop;
}

#define EV_TIMEOUT (10 * TU_S)

/* ---- round robin, backoff, parking ------------------------------------ */

/* One worker calls each tasklet of a job once per pass, in job order. */
static void
test_coop_round_robin_order(void **state)
{
	tpe_coop_t *coop = coop_new(1, 0, 0);
	struct tk tk[3] = { 0 };
	struct tpe_tasklet ts[3];
	int order[ORDER_MAX], len = 0, i;
	tpe_job_t *job;

	(void)state;
	for (i = 0; i < 3; i++)
		tk[i] = (struct tk){ .limit = 5, .progress = TPE_MADE_PROGRESS,
		    .final = TPE_DONE, .order = order, .order_len = &len };
	tk_tasklets(ts, tk, 3, 0);
	assert_int_equal(tpe_coop_submit(coop, ts, 3, sizeof(ts[0]), &job),
	    0);
	assert_int_equal(tpe_job_wait(job, -1), 0);
	assert_int_equal(len, 15);
	for (i = 0; i < 15; i++)
		assert_int_equal(order[i], i % 3);
	assert_ended_once(tk, 3, 0);
	tpe_job_release(job);
	assert_int_equal(tpe_coop_destroy(coop), 0);
}

/* The park schedule: spins and yields, then 1 us doubling, bounded. */
static void
test_coop_park_schedule(void **state)
{
	uint64_t n, first = TPE__COOP_SPIN_PASSES + TPE__COOP_YIELD_PASSES + 1;

	(void)state;
	for (n = 1; n < first; n++)
		assert_int_equal(tpe__coop_park_ns(n, 1000000), 0);
	assert_int_equal(tpe__coop_park_ns(first, 1000000), 1000);
	assert_int_equal(tpe__coop_park_ns(first + 1, 1000000), 2000);
	assert_int_equal(tpe__coop_park_ns(first + 9, 1000000), 512000);
	assert_int_equal(tpe__coop_park_ns(first + 10, 1000000), 1000000);
	assert_int_equal(tpe__coop_park_ns(first + 60, 1000000), 1000000);
	assert_int_equal(tpe__coop_park_ns(UINT64_MAX, 1000000), 1000000);
	assert_int_equal(tpe__coop_park_ns(first + 3, 5000), 5000);
}

/* A tasklet that made no progress many times (its worker backs off to the
 * longest park) is still called again, and finishes. */
static void
test_coop_backoff_still_calls(void **state)
{
	tpe_coop_t *coop = coop_new(1, 200000, 0);
	struct tk tk = { .limit = 300, .progress = TPE_NO_PROGRESS,
	    .final = TPE_DONE };
	struct tpe_tasklet ts;
	tpe_job_t *job;

	(void)state;
	tk_tasklets(&ts, &tk, 1, 0);
	assert_int_equal(tpe_coop_submit(coop, &ts, 1, sizeof(ts), &job), 0);
	/* A hang guard only: 300 parks of at most 0.2 ms. */
	assert_int_equal(tpe_job_wait(job, EV_TIMEOUT), 0);
	assert_int_equal(tu_load(&tk.calls), 300);
	assert_ended_once(&tk, 1, 0);
	tpe_job_release(job);
	assert_int_equal(tpe_coop_destroy(coop), 0);
}

/* Workers without tasklets park without a timeout (before and after a
 * job) and then do not wake: over a while, no return from their park
 * wait is counted (a timed park would count one per timeout, a spinning
 * worker would not stay parked). */
static void
test_coop_idle_parks_forever(void **state)
{
	tpe_coop_t *coop = coop_new(2, 0, 0);
	struct tk tk[4] = { 0 };
	struct tpe_tasklet ts[4];
	tpe_job_t *job;
	uint64_t wakeups;
	int i;

	(void)state;
	assert_true(TU_EVENTUALLY(tpe__coop_parked_forever(coop) == 2,
	    EV_TIMEOUT));
	for (i = 0; i < 4; i++)
		tk[i] = (struct tk){ .limit = 100,
		    .progress = TPE_NO_PROGRESS, .final = TPE_DONE };
	tk_tasklets(ts, tk, 4, 0);
	assert_int_equal(tpe_coop_submit(coop, ts, 4, sizeof(ts[0]), &job),
	    0);
	assert_int_equal(tpe_job_wait(job, -1), 0);
	tpe_job_release(job);
	assert_true(TU_EVENTUALLY(tpe__coop_parked_forever(coop) == 2,
	    EV_TIMEOUT));
	wakeups = tpe__coop_wakeups(coop);
	/* Not a timing assert: a window in which nothing may happen. */
	tu_sleep_ns(100 * TU_MS);
	assert_int_equal(tpe__coop_wakeups(coop), wakeups);
	assert_int_equal(tpe__coop_parked_forever(coop), 2);
	assert_int_equal(tpe_coop_destroy(coop), 0);
}

/* ---- stealing ---------------------------------------------------------- */

/* How many of the even tasklets were last called by thread th. */
static int
called_last_by(struct tk *tk, int n, pthread_t th)
{
	int i, c = 0;

	for (i = 0; i < n; i += 2)
		c += pthread_equal(__atomic_load_n(&tk[i].last,
		    __ATOMIC_SEQ_CST), th) != 0;
	return c;
}

/*
 * Two workers; a job whose even tasklets (worker 0) run until released
 * and whose odd ones (worker 1) finish at once. Worker 1, its list empty,
 * steals from worker 0: some even tasklet is then called by worker 1 (the
 * thread that ran the odd ones), never by two threads at once. Without
 * stealing none is.
 */
static void
steal_case(unsigned flags)
{
	tpe_coop_t *coop = coop_new(2, 0, flags);
	struct tk tk[16] = { 0 };
	struct tpe_tasklet ts[16];
	int release = 0, i;
	pthread_t w1;
	tpe_job_t *job;

	for (i = 0; i < 16; i++)
		tk[i] = (struct tk){ .limit = i % 2 ? 1 : 10,
		    .progress = TPE_MADE_PROGRESS, .final = TPE_DONE,
		    .release = i % 2 ? NULL : &release };
	tk_tasklets(ts, tk, 16, 0);
	assert_int_equal(tpe_coop_submit(coop, ts, 16, sizeof(ts[0]), &job),
	    0);
	for (i = 1; i < 16; i += 2)
		assert_true(TU_EVENTUALLY(tu_load(&tk[i].ends) == 1,
		    EV_TIMEOUT));
	w1 = tk[1].first;
	if (flags & TPE_COOP_NO_STEALING) {
		/* Worker 1 has had many passes in which to steal. */
		int c = tu_load(&tk[0].calls);

		assert_true(TU_EVENTUALLY(tu_load(&tk[0].calls) > c + 1000,
		    EV_TIMEOUT));
		assert_int_equal(called_last_by(tk, 16, w1), 0);
	} else {
		assert_true(TU_EVENTUALLY(called_last_by(tk, 16, w1) > 0,
		    EV_TIMEOUT));
	}
	__atomic_store_n(&release, 1, __ATOMIC_SEQ_CST);
	assert_int_equal(tpe_job_wait(job, -1), 0);
	assert_ended_once(tk, 16, 0);
	tpe_job_release(job);
	assert_int_equal(tpe_coop_destroy(coop), 0);
}

static void
test_coop_steals_from_longest(void **state)
{
	(void)state;
	steal_case(0);
}

static void
test_coop_no_stealing(void **state)
{
	(void)state;
	steal_case(TPE_COOP_NO_STEALING);
}

/* ---- the last caller ends a tasklet ---------------------------------- */

/*
 * The state: two workers, A and B, and a job of 7 tasklets; A has 0, 2, 4
 * and 6 (s, a1 and two idle ones), B has 1, 3 and 5 (b1, b2, idle). A
 * calls s, then blocks in a1. B's b1 then finishes: B steals, and marks
 * s, A's first tasklet (A has 4, B 2). B then blocks in b2. A, released,
 * hands s over to B's inbox at its next look at it and calls a1 again:
 * s has been called last by A and is now B's, not yet called by B. Then
 * the job fails (a1 returns EIO; its end callback releases B), or the
 * service is destroyed (A's tasklets end in destroy; a1's end callback
 * releases B). Either way s ends with ECANCELED, and its end callback
 * must run on A, the thread that called it last.
 */
struct lastcall {
	int destroy;             /* I: the destroy variant */
	sem_t a_blocked, a_go, b_in, b_go, handed;
	int a1_calls, b2_called; /* atomic */
	pthread_t s_last;        /* written by s's calls */
	pthread_t s_end;         /* written by s's end callback */
	int s_ends, s_result;    /* atomic */
};

static int
lc_s(void *p)
{
	struct lastcall *lc = p;

	lc->s_last = pthread_self();
	return TPE_NO_PROGRESS;
}

static void
lc_s_end(void *p, int result)
{
	struct lastcall *lc = p;

	lc->s_end = pthread_self();
	__atomic_store_n(&lc->s_result, result, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&lc->s_ends, 1, __ATOMIC_SEQ_CST);
}

static int
lc_a1(void *p)
{
	struct lastcall *lc = p;
	int n = __atomic_add_fetch(&lc->a1_calls, 1, __ATOMIC_SEQ_CST);

	if (n == 1) {
		sem_post(&lc->a_blocked);
		assert_true(tu_sem_wait_for(&lc->a_go, TU_WAIT_BOUND));
	} else if (n == 2) {
		/* After A's look at s (list order): s has been handed over. */
		sem_post(&lc->handed);
		if (!lc->destroy)
			return EIO;
	}
	return TPE_NO_PROGRESS;
}

static void
lc_a1_end(void *p, int result)
{
	struct lastcall *lc = p;

	(void)result;
	/* The job's error word is set (EIO), or destroy has begun. */
	sem_post(&lc->b_go);
}

static int
lc_b1(void *p)
{
	struct lastcall *lc = p;

	/* A is inside a1, having called s. */
	assert_true(tu_sem_wait_for(&lc->a_blocked, TU_WAIT_BOUND));
	return TPE_DONE;
}

static int
lc_b2(void *p)
{
	struct lastcall *lc = p;

	/* First call: B has marked s (steal runs right after b1 ended). */
	if (__atomic_exchange_n(&lc->b2_called, 1, __ATOMIC_SEQ_CST) == 0) {
		sem_post(&lc->b_in);
		assert_true(tu_sem_wait_for(&lc->b_go, TU_WAIT_BOUND));
	}
	return TPE_NO_PROGRESS;
}

static int
lc_idle(void *p)
{
	(void)p;
	return TPE_NO_PROGRESS;
}

static void
last_caller_case(int destroy)
{
	tpe_coop_t *coop = coop_new(2, 0, 0);
	struct lastcall lc = { .destroy = destroy };
	struct tpe_tasklet ts[7];
	tpe_job_t *job;
	int i;

	sem_init(&lc.a_blocked, 0, 0);
	sem_init(&lc.a_go, 0, 0);
	sem_init(&lc.b_in, 0, 0);
	sem_init(&lc.b_go, 0, 0);
	sem_init(&lc.handed, 0, 0);
	for (i = 0; i < 7; i++)
		ts[i] = (struct tpe_tasklet){ lc_idle, &lc, NULL, 0 };
	ts[0] = (struct tpe_tasklet){ lc_s, &lc, lc_s_end, 0 };
	ts[1].fn = lc_b1;
	ts[2] = (struct tpe_tasklet){ lc_a1, &lc, lc_a1_end, 0 };
	ts[3].fn = lc_b2;
	assert_int_equal(tpe_coop_submit(coop, ts, 7, sizeof(ts[0]), &job),
	    0);
	/* B is in b2, s is marked; release A, which hands s over. */
	assert_true(tu_sem_wait_for(&lc.b_in, TU_WAIT_BOUND));
	sem_post(&lc.a_go);
	assert_true(tu_sem_wait_for(&lc.handed, TU_WAIT_BOUND));
	if (destroy) {
		assert_int_equal(tpe_coop_destroy(coop), 0);
		assert_int_equal(tpe_job_wait(job, 0), ECANCELED);
	} else {
		assert_int_equal(tpe_job_wait(job, -1), EIO);
	}
	assert_int_equal(tu_load(&lc.s_ends), 1);
	assert_int_equal(tu_load(&lc.s_result), ECANCELED);
	assert_true(pthread_equal(lc.s_end, lc.s_last));
	tpe_job_release(job);
	if (!destroy)
		assert_int_equal(tpe_coop_destroy(coop), 0);
	sem_destroy(&lc.a_blocked);
	sem_destroy(&lc.a_go);
	sem_destroy(&lc.b_in);
	sem_destroy(&lc.b_go);
	sem_destroy(&lc.handed);
}

/* A tasklet stolen, then cancelled before its new worker called it, ends
 * on the worker that called it last: when its job fails, and when its
 * service is destroyed. */
static void
test_coop_end_on_last_caller(void **state)
{
	(void)state;
	last_caller_case(0);
	last_caller_case(1);
}

/*
 * Looped, not built: three workers with stealing, jobs of tasklets that
 * finish at different times (so that workers steal) cancelled at once;
 * each end callback runs on the thread of the tasklet's latest call.
 */
static void
test_coop_end_on_last_caller_loop(void **state)
{
	int round, i;

	(void)state;
	for (round = 0; round < 40; round++) {
		tpe_coop_t *coop = coop_new(3, 0, 0);
		struct tk tk[24] = { 0 };
		struct tpe_tasklet ts[24];
		struct tu_latch started;
		tpe_job_t *job;

		tu_latch_init(&started, 24);
		for (i = 0; i < 24; i++)
			tk[i] = (struct tk){ .limit = i % 3 ? 0 : 1 + i,
			    .progress = TPE_MADE_PROGRESS, .final = TPE_DONE,
			    .started = &started };
		tk_tasklets(ts, tk, 24, 0);
		assert_int_equal(tpe_coop_submit(coop, ts, 24, sizeof(ts[0]),
		    &job), 0);
		assert_true(tu_latch_wait_for(&started, TU_WAIT_BOUND));
		assert_int_equal(tpe_job_cancel(job), 0);
		for (i = 0; i < 24; i++)
			if (tu_load(&tk[i].calls) > 0)
				assert_true(pthread_equal(tk[i].end_thread,
				    tk[i].last));
		tpe_job_release(job);
		assert_int_equal(tpe_coop_destroy(coop), 0);
		tu_latch_destroy(&started);
	}
}

/* ---- completion, errors, cancel --------------------------------------- */

/* The first error a tasklet returns is the job's; the others end with
 * ECANCELED and are called no more. */
static void
test_coop_first_error(void **state)
{
	tpe_coop_t *coop = coop_new(2, 0, 0);
	struct tk tk[3] = { 0 };
	struct tpe_tasklet ts[3];
	tpe_job_t *job;

	(void)state;
	tk[0] = (struct tk){ .limit = 3, .progress = TPE_MADE_PROGRESS,
	    .final = EIO };
	tk[1] = (struct tk){ .progress = TPE_MADE_PROGRESS };
	tk[2] = (struct tk){ .progress = TPE_NO_PROGRESS };
	tk_tasklets(ts, tk, 3, 0);
	assert_int_equal(tpe_coop_submit(coop, ts, 3, sizeof(ts[0]), &job),
	    0);
	assert_int_equal(tpe_job_wait(job, -1), EIO);
	assert_int_equal(tpe_job_wait(job, 0), EIO);
	assert_int_equal(tu_load(&tk[0].end_result), EIO);
	assert_int_equal(tu_load(&tk[1].end_result), ECANCELED);
	assert_int_equal(tu_load(&tk[2].end_result), ECANCELED);
	assert_ended_once(tk, 3, -1);
	/* Cancel after completion: 0, no effect. */
	assert_int_equal(tpe_job_cancel(job), 0);
	assert_int_equal(tpe_job_wait(job, 0), EIO);
	tpe_job_release(job);
	assert_int_equal(tpe_coop_destroy(coop), 0);
}

/* A negative value other than the two "call again" ones is EINVAL. */
static void
test_coop_bad_return_is_einval(void **state)
{
	tpe_coop_t *coop = coop_new(1, 0, 0);
	struct tk tk = { .limit = 1, .final = -7 };
	struct tpe_tasklet ts;
	tpe_job_t *job;

	(void)state;
	tk_tasklets(&ts, &tk, 1, 0);
	assert_int_equal(tpe_coop_submit(coop, &ts, 1, sizeof(ts), &job), 0);
	assert_int_equal(tpe_job_wait(job, -1), EINVAL);
	assert_ended_once(&tk, 1, EINVAL);
	tpe_job_release(job);
	assert_int_equal(tpe_coop_destroy(coop), 0);
}

/*
 * A cancel from outside the service wakes the workers. A worker whose
 * one tasklet never makes progress backs off to long parks (max_park_ns:
 * an hour); at the call after which it parks for LONG_PARK or more, the
 * job is cancelled. The worker gives the tasklet up at its next pass, and
 * only the cancel's wake-up brings that pass before the park's end: every
 * park before the last ran to its timeout, the last one did not. (Without
 * the wake-up the last one ran to its end as well, and the cancel returned
 * only then.) LONG_PARK is the window the cancel has to come in; the
 * worker reaches it after about as long again of parks.
 */
#define LONG_PARK (500 * TU_MS)
#define HOUR (3600 * TU_S)

static void
test_coop_cancel_wakes_parked_worker(void **state)
{
	tpe_coop_t *coop = coop_new(1, HOUR, 0);
	int first_park = TPE__COOP_SPIN_PASSES + TPE__COOP_YIELD_PASSES + 1;
	struct tu_latch reached;
	struct tk tk = { .progress = TPE_NO_PROGRESS, .reached = &reached };
	struct tpe_tasklet ts;
	tpe_job_t *job;
	int calls;

	(void)state;
	tk.reached_at = first_park;
	while (tpe__coop_park_ns((uint64_t)tk.reached_at, HOUR) <
	    LONG_PARK * tu_time_scale())
		tk.reached_at++;
	tu_latch_init(&reached, 1);
	tk_tasklets(&ts, &tk, 1, 0);
	assert_int_equal(tpe_coop_submit(coop, &ts, 1, sizeof(ts), &job), 0);
	assert_true(tu_latch_wait_for(&reached, EV_TIMEOUT));
	assert_int_equal(tpe_job_cancel(job), 0);
	assert_int_equal(tpe_job_wait(job, 0), ECANCELED);
	assert_ended_once(&tk, 1, ECANCELED);
	/* The n-th idle pass in a row (the n-th call) parks from the first
	 * park on: the parks after calls first_park .. calls - 1 timed out,
	 * the one after the last call was cut short (or never began). */
	calls = tu_load(&tk.calls);
	assert_true(calls >= tk.reached_at);
	assert_int_equal(tpe__coop_park_timeouts(coop),
	    (uint64_t)(calls - first_park));
	tpe_job_release(job);
	assert_int_equal(tpe_coop_destroy(coop), 0);
	tu_latch_destroy(&reached);
}

struct waiter {
	tpe_job_t *job;
	int rc;
};

static void *
waiter_main(void *p)
{
	struct waiter *w = p;

	w->rc = tpe_job_wait(w->job, -1);
	return NULL;
}

/*
 * Looped: a job of cooperative and blocking tasklets that run until
 * cancelled; two threads wait, the test cancels (twice, then once more
 * after completion). Every tasklet ends once with ECANCELED, waits return
 * ECANCELED, no call overlaps, and no call starts after cancel returned.
 */
static void
test_coop_cancel_and_wait_races(void **state)
{
	int round;

	(void)state;
	for (round = 0; round < 30; round++) {
		tpe_coop_t *coop = coop_new(2, 0, 0);
		struct tk tk[5] = { 0 };
		struct tpe_tasklet ts[5];
		struct waiter w[2];
		pthread_t th[2];
		struct tu_latch started;
		int i, calls[5];
		tpe_job_t *job;

		tu_latch_init(&started, 5);
		for (i = 0; i < 5; i++)
			tk[i] = (struct tk){ .progress = i % 2 ?
			    TPE_NO_PROGRESS : TPE_MADE_PROGRESS,
			    .started = &started };
		tk_tasklets(ts, tk, 5, 0);
		ts[4].flags = TPE_TASKLET_BLOCKING;
		assert_int_equal(tpe_coop_submit(coop, ts, 5, sizeof(ts[0]),
		    &job), 0);
		for (i = 0; i < 2; i++) {
			w[i] = (struct waiter){ job, -1 };
			assert_int_equal(pthread_create(&th[i], NULL,
			    waiter_main, &w[i]), 0);
		}
		if (round % 2 == 0)
			assert_true(tu_latch_wait_for(&started,
			    TU_WAIT_BOUND));
		assert_int_equal(tpe_job_cancel(job), 0);
		for (i = 0; i < 5; i++)
			calls[i] = tu_load(&tk[i].calls);
		assert_int_equal(tpe_job_cancel(job), 0);
		for (i = 0; i < 2; i++) {
			pthread_join(th[i], NULL);
			assert_int_equal(w[i].rc, ECANCELED);
		}
		assert_int_equal(tpe_job_wait(job, 0), ECANCELED);
		assert_int_equal(tpe_job_cancel(job), 0);
		assert_ended_once(tk, 5, ECANCELED);
		for (i = 0; i < 5; i++)
			assert_int_equal(tu_load(&tk[i].calls), calls[i]);
		tpe_job_release(job);
		assert_int_equal(tpe_coop_destroy(coop), 0);
		tu_latch_destroy(&started);
	}
}

/* Released before done, then completed by its tasklets, or by destroy. */
static void
test_coop_release_before_done(void **state)
{
	int round;

	(void)state;
	for (round = 0; round < 20; round++) {
		tpe_coop_t *coop = coop_new(2, 0, 0);
		struct tk tk[3] = { 0 };
		struct tpe_tasklet ts[3];
		tpe_job_t *job;
		int i;

		for (i = 0; i < 3; i++)
			tk[i] = (struct tk){ .limit = round % 2 ? 50 : 0,
			    .progress = TPE_MADE_PROGRESS,
			    .final = TPE_DONE };
		tk_tasklets(ts, tk, 3, round % 3 == 0 ?
		    TPE_TASKLET_BLOCKING : 0);
		assert_int_equal(tpe_coop_submit(coop, ts, 3, sizeof(ts[0]),
		    &job), 0);
		tpe_job_release(job);
		if (round % 2)
			for (i = 0; i < 3; i++)
				assert_true(TU_EVENTUALLY(
				    tu_load(&tk[i].ends) == 1, EV_TIMEOUT));
		assert_int_equal(tpe_coop_destroy(coop), 0);
		assert_ended_once(tk, 3, round % 2 ? 0 : ECANCELED);
	}
}

/* Destroy with running jobs: each ends with ECANCELED; a job not yet
 * released stays valid. */
static void
test_coop_destroy_running(void **state)
{
	tpe_coop_t *coop = coop_new(2, 0, 0);
	struct tk tk[6] = { 0 };
	struct tpe_tasklet ts[6];
	struct tu_latch started;
	tpe_job_t *job;
	int i;

	(void)state;
	tu_latch_init(&started, 6);
	for (i = 0; i < 6; i++)
		tk[i] = (struct tk){ .progress = TPE_MADE_PROGRESS,
		    .started = &started };
	tk_tasklets(ts, tk, 6, 0);
	ts[5].flags = TPE_TASKLET_BLOCKING;
	assert_int_equal(tpe_coop_submit(coop, ts, 6, sizeof(ts[0]), &job),
	    0);
	assert_true(tu_latch_wait_for(&started, TU_WAIT_BOUND));
	assert_int_equal(tpe_coop_destroy(coop), 0);
	assert_int_equal(tpe_job_wait(job, 0), ECANCELED);
	assert_int_equal(tpe_job_cancel(job), 0);
	assert_ended_once(tk, 6, ECANCELED);
	tpe_job_release(job);
	tu_latch_destroy(&started);
}

/* ---- calls from inside a tasklet --------------------------------------- */

struct inner {
	tpe_job_t *job;        /* set before release */
	int release;
	tpe_coop_t *coop;
	int wait_rc, cancel_rc, destroy_rc, calls;
	int wait0_rc, result_rc, result0_rc, result;
};

static int
inner_fn(void *p)
{
	struct inner *in = p;

	if (!__atomic_load_n(&in->release, __ATOMIC_SEQ_CST))
		return TPE_NO_PROGRESS;
	if (__atomic_add_fetch(&in->calls, 1, __ATOMIC_SEQ_CST) > 1)
		return TPE_MADE_PROGRESS;
	in->wait_rc = tpe_job_wait(in->job, -1);
	/* Only looking cannot wait for itself: not EDEADLK. */
	in->wait0_rc = tpe_job_wait(in->job, 0);
	in->result = -12345;
	in->result_rc = tpe_job_wait_result(in->job, TU_S, &in->result);
	in->result0_rc = tpe_job_wait_result(in->job, 0, &in->result);
	in->destroy_rc = tpe_coop_destroy(in->coop);
	in->cancel_rc = tpe_job_cancel(in->job);
	return TPE_MADE_PROGRESS;
}

/* From a tasklet of the job: wait is EDEADLK (ETIMEDOUT with timeout 0,
 * which only looks; the same with tpe_job_wait_result, which writes no
 * result then), destroy EDEADLK, cancel 0 without waiting for itself; the
 * job then ends with ECANCELED. Also from a blocking tasklet. */
static void
inner_case(unsigned flags)
{
	tpe_coop_t *coop = coop_new(2, 0, 0);
	struct inner in = { .coop = coop };
	struct tpe_tasklet ts = { inner_fn, &in, NULL, flags };
	tpe_job_t *job;

	assert_int_equal(tpe_coop_submit(coop, &ts, 1, sizeof(ts), &job), 0);
	in.job = job;
	__atomic_store_n(&in.release, 1, __ATOMIC_SEQ_CST);
	assert_int_equal(tpe_job_wait(job, -1), ECANCELED);
	assert_int_equal(in.wait_rc, EDEADLK);
	assert_int_equal(in.wait0_rc, ETIMEDOUT);
	assert_int_equal(in.result_rc, EDEADLK);
	assert_int_equal(in.result0_rc, ETIMEDOUT);
	assert_int_equal(in.result, -12345);
	assert_int_equal(in.destroy_rc, EDEADLK);
	assert_int_equal(in.cancel_rc, 0);
	tpe_job_release(job);
	assert_int_equal(tpe_coop_destroy(coop), 0);
}

static void
test_coop_calls_from_tasklet(void **state)
{
	(void)state;
	inner_case(0);
	inner_case(TPE_TASKLET_BLOCKING);
}

/* ---- blocking tasklets ------------------------------------------------- */

struct blocker {
	struct tu_latch *gate;
	struct tu_latch *started; /* may be NULL */
	pthread_t thread;
	int polls;
};

static int
blocker_fn(void *p)
{
	struct blocker *b = p;

	b->thread = pthread_self();
	if (b->started != NULL)
		tu_latch_count_down(b->started);
	if (b->polls-- > 0)
		return TPE_NO_PROGRESS;
	tu_latch_wait(b->gate);
	return TPE_DONE;
}

/* A blocking tasklet blocks its own thread, not a worker: with one worker,
 * cooperative tasklets finish while it blocks. */
static void
test_coop_blocking_tasklet(void **state)
{
	tpe_coop_t *coop = coop_new(1, 0, 0);
	struct tu_latch gate;
	struct blocker b = { .gate = &gate, .polls = 5 };
	struct tk tk[2] = { 0 };
	struct tpe_tasklet ts[3];
	tpe_job_t *job;

	(void)state;
	tu_latch_init(&gate, 1);
	tk[0] = (struct tk){ .limit = 20, .progress = TPE_MADE_PROGRESS,
	    .final = TPE_DONE };
	tk[1] = tk[0];
	tk_tasklets(ts, tk, 2, 0);
	ts[2] = (struct tpe_tasklet){ blocker_fn, &b, NULL,
	    TPE_TASKLET_BLOCKING };
	assert_int_equal(tpe_coop_submit(coop, ts, 3, sizeof(ts[0]), &job),
	    0);
	assert_true(TU_EVENTUALLY(tu_load(&tk[0].ends) == 1 &&
	    tu_load(&tk[1].ends) == 1, EV_TIMEOUT));
	assert_int_equal(tpe_job_wait(job, 0), ETIMEDOUT);
	assert_int_equal(tpe__coop_blocking_threads(coop), 1);
	tu_latch_count_down(&gate);
	assert_int_equal(tpe_job_wait(job, -1), 0);
	assert_false(pthread_equal(b.thread, tk[0].first));
	assert_true(TU_EVENTUALLY(tpe__coop_blocking_threads(coop) == 0,
	    EV_TIMEOUT));
	tpe_job_release(job);
	assert_int_equal(tpe_coop_destroy(coop), 0);
	tu_latch_destroy(&gate);
}

/* A submit that races with destroy is refused with ECANCELED once destroy
 * has begun (destroy waits here for a blocking tasklet's call). */
struct destroyer {
	tpe_coop_t *coop;
	int rc;
};

static void *
destroyer_main(void *p)
{
	struct destroyer *d = p;

	d->rc = tpe_coop_destroy(d->coop);
	return NULL;
}

static void
test_coop_submit_during_destroy(void **state)
{
	tpe_coop_t *coop = coop_new(1, 0, 0);
	struct tu_latch gate, started;
	struct blocker b = { .gate = &gate, .started = &started };
	struct tpe_tasklet t = { blocker_fn, &b, NULL, TPE_TASKLET_BLOCKING };
	struct tk tk = { .progress = TPE_MADE_PROGRESS };
	struct tpe_tasklet t2 = { tk_fn, &tk, NULL, 0 };
	struct destroyer d = { coop, -1 };
	tpe_job_t *job, *j2;
	pthread_t th;
	int rc;

	(void)state;
	tu_latch_init(&gate, 1);
	tu_latch_init(&started, 1);
	assert_int_equal(tpe_coop_submit(coop, &t, 1, sizeof(t), &job), 0);
	/* In its call: destroy cannot end it before the gate opens. */
	assert_true(tu_latch_wait_for(&started, TU_WAIT_BOUND));
	assert_int_equal(pthread_create(&th, NULL, destroyer_main, &d), 0);
	/* Until destroy sets its flag, submits succeed (and are cancelled
	 * by it); then ECANCELED. */
	while ((rc = tpe_coop_submit(coop, &t2, 1, sizeof(t2), &j2)) == 0) {
		tpe_job_release(j2);
		tu_sleep_ns(TU_MS);
	}
	assert_int_equal(rc, ECANCELED);
	tu_latch_count_down(&gate);
	pthread_join(th, NULL);
	assert_int_equal(d.rc, 0);
	assert_int_equal(tpe_job_wait(job, 0), 0);
	tpe_job_release(job);
	tu_latch_destroy(&gate);
	tu_latch_destroy(&started);
}

/* ---- tpe_job_wait_result ----------------------------------------------- */

#define NOT_WRITTEN (-424242)

/* The outcome has its own channel: a job whose tasklet failed with
 * ETIMEDOUT (or EINVAL) is told apart from a wait that timed out. */
static void
test_coop_wait_result(void **state)
{
	static const int fails[] = { 0, ETIMEDOUT, EINVAL, EIO };
	tpe_coop_t *coop = coop_new(2, 0, 0);
	struct tpe_tasklet ts;
	tpe_job_t *job;
	size_t i;
	int result;

	(void)state;
	for (i = 0; i < sizeof(fails) / sizeof(fails[0]); i++) {
		struct tk tk = { .limit = 3, .progress = TPE_MADE_PROGRESS,
		    .final = fails[i] };

		tk_tasklets(&ts, &tk, 1, 0);
		assert_int_equal(tpe_coop_submit(coop, &ts, 1, sizeof(ts),
		    &job), 0);
		result = NOT_WRITTEN;
		assert_int_equal(tpe_job_wait_result(job, -1, &result), 0);
		assert_int_equal(result, fails[i]);
		/* Completed: a poll gives the same, as does tpe_job_wait. */
		result = NOT_WRITTEN;
		assert_int_equal(tpe_job_wait_result(job, 0, &result), 0);
		assert_int_equal(result, fails[i]);
		assert_int_equal(tpe_job_wait(job, 0), fails[i]);
		tpe_job_release(job);
	}

	/* Not completed: ETIMEDOUT, nothing written; cancelled: ECANCELED. */
	{
		struct tk tk = { .progress = TPE_NO_PROGRESS };

		tk_tasklets(&ts, &tk, 1, 0);
		assert_int_equal(tpe_coop_submit(coop, &ts, 1, sizeof(ts),
		    &job), 0);
		result = NOT_WRITTEN;
		assert_int_equal(tpe_job_wait_result(job, 0, &result),
		    ETIMEDOUT);
		assert_int_equal(tpe_job_wait_result(job, TU_MS, &result),
		    ETIMEDOUT);
		assert_int_equal(result, NOT_WRITTEN);
		assert_int_equal(tpe_job_cancel(job), 0);
		assert_int_equal(tpe_job_wait_result(job, 0, &result), 0);
		assert_int_equal(result, ECANCELED);
		tpe_job_release(job);
	}

	/* EINVAL: a NULL job or a NULL result. */
	result = NOT_WRITTEN;
	assert_int_equal(tpe_job_wait_result(NULL, 0, &result), EINVAL);
	assert_int_equal(result, NOT_WRITTEN);
	{
		struct tk tk = { .limit = 1, .final = TPE_DONE };

		tk_tasklets(&ts, &tk, 1, 0);
		assert_int_equal(tpe_coop_submit(coop, &ts, 1, sizeof(ts),
		    &job), 0);
		assert_int_equal(tpe_job_wait_result(job, -1, NULL), EINVAL);
		assert_int_equal(tpe_job_wait(job, -1), 0);
		tpe_job_release(job);
	}
	assert_int_equal(tpe_coop_destroy(coop), 0);
}

/* ---- cancel against completion ----------------------------------------- */

struct window {
	tpe_job_t *job;           /* the job whose completion is held */
	sem_t in, go;
	int held, timed_out;      /* atomic */
};

static struct window *the_window;

/* The complete hook: holds the job's completion (its last tasklet has
 * ended and been counted) until the test says go. */
static void
window_hook(tpe_job_t *job)
{
	struct window *w = the_window;

	if (w == NULL || job != __atomic_load_n(&w->job, __ATOMIC_SEQ_CST))
		return;
	__atomic_store_n(&w->held, 1, __ATOMIC_SEQ_CST);
	sem_post(&w->in);
	if (!tu_sem_wait_for(&w->go, 2 * TU_S))
		__atomic_store_n(&w->timed_out, 1, __ATOMIC_SEQ_CST);
}

struct canceller {
	tpe_job_t *job;
	sem_t *done;
	int rc;
};

static void *
canceller_main(void *p)
{
	struct canceller *c = p;

	c->rc = tpe_job_cancel(c->job);
	sem_post(c->done);
	return NULL;
}

/* The single tasklet waits until the test has published the job, so that
 * the hook knows which completion to hold. */
static int
wait_published_fn(void *p)
{
	struct window *w = p;

	if (__atomic_load_n(&w->job, __ATOMIC_SEQ_CST) == NULL)
		return TPE_NO_PROGRESS;
	return TPE_DONE;
}

/*
 * Cancelling a job that completed with 0 changes nothing; nor does a
 * cancel in the window between its last tasklet's end and its completion
 * (held open by the complete hook): the job completes with 0, cancel
 * returns 0 at once (from outside the service: it does not wait for a
 * completion that is already decided). Against the mutation "drop the
 * remaining == 0 guard in tpe_job_cancel", which makes that cancel turn
 * the result into ECANCELED and wait for the held completion.
 */
static void
test_coop_job_cancel_after_done(void **state)
{
	tpe_coop_t *coop = coop_new(2, 0, 0);
	struct window w = { 0 };
	struct tpe_tasklet ts = { wait_published_fn, &w, NULL, 0 };
	struct canceller c;
	sem_t cancelled;
	pthread_t th;
	tpe_job_t *job;
	int result, i;

	(void)state;
	/* Completed with 0, then cancelled: 0, the result stays 0. */
	{
		struct tk tk = { .limit = 2, .progress = TPE_MADE_PROGRESS,
		    .final = TPE_DONE };
		struct tpe_tasklet t;

		tk_tasklets(&t, &tk, 1, 0);
		assert_int_equal(tpe_coop_submit(coop, &t, 1, sizeof(t),
		    &job), 0);
		assert_int_equal(tpe_job_wait(job, -1), 0);
		assert_int_equal(tpe_job_cancel(job), 0);
		assert_int_equal(tpe_job_cancel(job), 0);
		result = NOT_WRITTEN;
		assert_int_equal(tpe_job_wait_result(job, 0, &result), 0);
		assert_int_equal(result, 0);
		assert_int_equal(tu_load(&tk.ends), 1);
		assert_int_equal(tu_load(&tk.end_result), 0);
		tpe_job_release(job);
	}

	/* Cancelled inside the window, a few times. */
	sem_init(&w.in, 0, 0);
	sem_init(&w.go, 0, 0);
	sem_init(&cancelled, 0, 0);
	the_window = &w;
	tpe__coop_complete_hook = window_hook;
	for (i = 0; i < 3; i++) {
		__atomic_store_n(&w.job, NULL, __ATOMIC_SEQ_CST);
		assert_int_equal(tpe_coop_submit(coop, &ts, 1, sizeof(ts),
		    &job), 0);
		__atomic_store_n(&w.job, job, __ATOMIC_SEQ_CST);
		assert_true(tu_sem_wait_for(&w.in, TU_WAIT_BOUND));
		/* The last tasklet is counted, the job not yet complete. */
		assert_int_equal(tpe_job_wait(job, 0), ETIMEDOUT);
		c = (struct canceller){ job, &cancelled, -1 };
		assert_int_equal(pthread_create(&th, NULL, canceller_main, &c),
		    0);
		/* Cancel must not wait for the held completion: the hook
		 * holds it until the cancel has returned (2 s at most). */
		assert_true(tu_sem_wait_for(&cancelled, TU_WAIT_BOUND));
		sem_post(&w.go);
		pthread_join(th, NULL);
		assert_int_equal(c.rc, 0);
		result = NOT_WRITTEN;
		assert_int_equal(tpe_job_wait_result(job, -1, &result), 0);
		assert_int_equal(result, 0);
		assert_int_equal(tu_load(&w.timed_out), 0);
		tpe_job_release(job);
	}
	tpe__coop_complete_hook = NULL;
	the_window = NULL;
	assert_int_equal(tpe_coop_destroy(coop), 0);
	sem_destroy(&w.in);
	sem_destroy(&w.go);
	sem_destroy(&cancelled);
}

/* ---- threads: signals, joins ------------------------------------------- */

/* Records whether SIGINT, SIGTERM and SIGUSR1 are blocked on the calling
 * thread, and SIGSEGV not. */
struct sigseen {
	int blocked;     /* 1: as promised; 0: not; -1: not called */
};

static int
sig_fn(void *p)
{
	struct sigseen *ss = p;
	sigset_t cur;

	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	ss->blocked = sigismember(&cur, SIGINT) == 1 &&
	    sigismember(&cur, SIGTERM) == 1 &&
	    sigismember(&cur, SIGUSR1) == 1 &&
	    sigismember(&cur, SIGSEGV) == 0;
	return TPE_DONE;
}

/* Workers and dedicated threads block the asynchronous signals, even
 * when the thread that created the service (or submitted) does not. */
static void
test_coop_threads_block_async_signals(void **state)
{
	struct sigseen ss[2] = { { -1 }, { -1 } };
	struct tpe_tasklet ts[2] = {
		{ sig_fn, &ss[0], NULL, 0 },
		{ sig_fn, &ss[1], NULL, TPE_TASKLET_BLOCKING },
	};
	sigset_t unblock, old;
	tpe_coop_t *coop;
	tpe_job_t *job;

	(void)state;
	sigemptyset(&unblock);
	sigaddset(&unblock, SIGINT);
	sigaddset(&unblock, SIGTERM);
	sigaddset(&unblock, SIGUSR1);
	pthread_sigmask(SIG_UNBLOCK, &unblock, &old);
	coop = coop_new(1, 0, 0);
	assert_int_equal(tpe_coop_submit(coop, ts, 2, sizeof(ts[0]), &job),
	    0);
	assert_int_equal(tpe_job_wait(job, -1), 0);
	assert_int_equal(ss[0].blocked, 1);
	assert_int_equal(ss[1].blocked, 1);
	tpe_job_release(job);
	assert_int_equal(tpe_coop_destroy(coop), 0);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* The thread count comes back to `before`: every thread started is gone.
 * A joined thread may stay listed for a moment after pthread_join
 * returned, while the kernel finishes its exit: hence the bounded look. */
static void
assert_threads_back_to(int before)
{
	if (before < 0)
		return;
	assert_true(TU_EVENTUALLY(tu_thread_count() == before, TU_WAIT_BOUND));
}

/* The process's threads with none of this file's alive (main sets it). */
static long threads0 = -1;

/*
 * The thread count to come back to, taken once the threads of earlier
 * cases have left the kernel's list: read at once, it may still count a
 * thread that an earlier case joined (listed for a moment after its
 * join), and the count then never comes back down to it (seen once under
 * ASan, in test_coop_create_failures).
 */
static int
threads_before(void)
{
	return (int)(threads0 < 0 ? tu_thread_count() :
	    tu_thread_count_settled(threads0));
}

/*
 * A dedicated thread that is still running after its tasklet ended: a
 * thread-specific value's destructor runs when the thread returns, after
 * the service saw it end. It waits until destroy has returned, or 500 ms:
 * destroy joins the thread, so the wait must run out.
 */
static pthread_key_t linger_key;
static sem_t destroy_returned, lingered;
static int linger_saw_return;    /* atomic */

static void
linger_dtor(void *p)
{
	(void)p;
	if (tu_sem_wait_for(&destroy_returned, 500 * TU_MS))
		__atomic_store_n(&linger_saw_return, 1, __ATOMIC_SEQ_CST);
	sem_post(&lingered);
}

static int
linger_fn(void *p)
{
	pthread_setspecific(linger_key, p);
	return TPE_DONE;
}

/* tpe_coop_destroy joins every thread the service started: its workers,
 * and the dedicated threads of blocking tasklets (also those whose job
 * has completed); right after it returns none is left. */
static void
test_coop_destroy_joins_threads(void **state)
{
	struct tpe_tasklet ts = { linger_fn, &linger_key, NULL,
	    TPE_TASKLET_BLOCKING };
	int before, round;

	(void)state;
	assert_int_equal(pthread_key_create(&linger_key, linger_dtor), 0);
	sem_init(&destroy_returned, 0, 0);
	sem_init(&lingered, 0, 0);
	{
		tpe_coop_t *coop = coop_new(2, 0, 0);
		tpe_job_t *job;

		assert_int_equal(tpe_coop_submit(coop, &ts, 1, sizeof(ts),
		    &job), 0);
		assert_int_equal(tpe_job_wait(job, -1), 0);
		tpe_job_release(job);
		assert_int_equal(tpe_coop_destroy(coop), 0);
		sem_post(&destroy_returned);
		assert_true(tu_sem_wait_for(&lingered, TU_WAIT_BOUND));
		assert_int_equal(tu_load(&linger_saw_return), 0);
	}
	/* Looped: the count is back after each destroy (with jobs running,
	 * completed, and dedicated threads of both). */
	before = threads_before();
	for (round = 0; round < 20; round++) {
		struct tk tk[3] = { 0 };
		struct tpe_tasklet t[3];
		tpe_coop_t *coop = coop_new(2, 0, 0);
		tpe_job_t *job;
		int i;

		for (i = 0; i < 3; i++)
			tk[i] = (struct tk){ .limit = round % 2 ? 2 : 0,
			    .progress = TPE_MADE_PROGRESS,
			    .final = TPE_DONE };
		tk_tasklets(t, tk, 3, 0);
		t[1].flags = TPE_TASKLET_BLOCKING;
		t[2].flags = TPE_TASKLET_BLOCKING;
		assert_int_equal(tpe_coop_submit(coop, t, 3, sizeof(t[0]),
		    &job), 0);
		if (round % 2)
			assert_int_equal(tpe_job_wait(job, -1), 0);
		assert_int_equal(tpe_coop_destroy(coop), 0);
		assert_threads_back_to(before);
		tpe_job_release(job);
	}
	sem_destroy(&destroy_returned);
	sem_destroy(&lingered);
	pthread_key_delete(linger_key);
}

/* ---- bad input --------------------------------------------------------- */

static void
test_coop_bad_input(void **state)
{
	struct tpe_coop_config c = { 1, 0, 0, NULL };
	struct tk tk = { .limit = 1, .final = TPE_DONE };
	struct tpe_tasklet ts = { tk_fn, &tk, NULL, 0 }, bad;
	/* Sentinels, not NULL: "not written" is told from "wrote NULL". */
	tpe_coop_t *const coop_unset = (tpe_coop_t *)&tk;
	tpe_job_t *const job_unset = (tpe_job_t *)&tk;
	tpe_coop_t *coop = coop_unset;
	tpe_job_t *job = job_unset;

	(void)state;
	assert_int_equal(tpe_coop_create(NULL, NULL, 0), EINVAL);
	assert_int_equal(tpe_coop_create(&coop, &c, 8), EINVAL);
	c.max_park_ns = -1;
	assert_int_equal(tpe_coop_create(&coop, &c, sizeof(c)), EINVAL);
	c.max_park_ns = 0;
	c.flags = 0x80;
	assert_int_equal(tpe_coop_create(&coop, &c, sizeof(c)), EINVAL);
	c.flags = 0;
	c.threads = 1000000;
	assert_int_equal(tpe_coop_create(&coop, &c, sizeof(c)), EINVAL);
	assert_ptr_equal(coop, coop_unset);
	/* Defaults: config NULL (size ignored). */
	assert_int_equal(tpe_coop_create(&coop, NULL, 0), 0);

	assert_int_equal(tpe_coop_submit(NULL, &ts, 1, sizeof(ts), &job),
	    EINVAL);
	assert_int_equal(tpe_coop_submit(coop, NULL, 1, sizeof(ts), &job),
	    EINVAL);
	assert_int_equal(tpe_coop_submit(coop, &ts, 1, sizeof(ts), NULL),
	    EINVAL);
	assert_int_equal(tpe_coop_submit(coop, &ts, 0, sizeof(ts), &job),
	    EINVAL);
	assert_int_equal(tpe_coop_submit(coop, &ts, 1, 8, &job), EINVAL);
	bad = ts;
	bad.fn = NULL;
	assert_int_equal(tpe_coop_submit(coop, &bad, 1, sizeof(bad), &job),
	    EINVAL);
	bad = ts;
	bad.flags = 0x10;
	assert_int_equal(tpe_coop_submit(coop, &bad, 1, sizeof(bad), &job),
	    EINVAL);
	assert_ptr_equal(job, job_unset);
	assert_int_equal(tu_load(&tk.calls), 0);

	assert_int_equal(tpe_job_wait(NULL, 0), EINVAL);
	assert_int_equal(tpe_job_cancel(NULL), EINVAL);
	tpe_job_release(NULL);
	assert_int_equal(tpe_coop_destroy(NULL), EINVAL);

	/* A larger caller struct (a newer version): its stride is used. */
	{
		struct { struct tpe_tasklet t; long more; } big[2] = {
			{ ts, 1 }, { ts, 2 } };

		assert_int_equal(tpe_coop_submit(coop, &big[0].t, 2,
		    sizeof(big[0]), &job), 0);
		assert_int_equal(tpe_job_wait(job, -1), 0);
		assert_int_equal(tu_load(&tk.calls), 2);
		tpe_job_release(job);
	}
	assert_int_equal(tpe_coop_destroy(coop), 0);
}

/* ---- malloc and pthread_create failures -------------------------------- */

/* Allocation failures: ENOMEM; the k-th worker not starting: EAGAIN, and
 * the k workers started are stopped and joined (the thread count is back,
 * each time). Nothing is written to *coop. */
static void
test_coop_create_failures(void **state)
{
	struct tpe_coop_config c = { 3, 0, 0, NULL };
	tpe_coop_t *const unset = (tpe_coop_t *)&c;
	tpe_coop_t *coop = unset;
	long k;
	int before = threads_before();

	(void)state;
	for (k = 0; k < 2; k++) {
		fault_arm(&malloc_fault, k, -1, false);
		assert_int_equal(tpe_coop_create(&coop, &c, sizeof(c)),
		    ENOMEM);
		fault_disarm(&malloc_fault);
		assert_ptr_equal(coop, unset);
	}
	for (k = 0; k < 3; k++) {
		fault_arm(&create_fault, k, -1, false);
		assert_int_equal(tpe_coop_create(&coop, &c, sizeof(c)),
		    EAGAIN);
		fault_disarm(&create_fault);
		assert_ptr_equal(coop, unset);
		assert_threads_back_to(before);
	}
}

/* A job whose k-th blocking tasklet cannot get its thread: EAGAIN, no
 * tasklet called or ended, the started threads joined; the service works
 * on. Its allocations failing: ENOMEM, the same. */
static void
test_coop_submit_failures(void **state)
{
	tpe_coop_t *coop;
	struct tk tk[4] = { 0 };
	struct tpe_tasklet ts[4];
	tpe_job_t *const unset = (tpe_job_t *)&tk;
	tpe_job_t *job = unset;
	long k;
	int before;
	int i;

	(void)state;
	/* Settled first: then the count with the service's workers is
	 * exact (a started thread is listed when pthread_create returns). */
	(void)threads_before();
	coop = coop_new(1, 0, 0);
	before = tu_thread_count();
	for (i = 0; i < 4; i++)
		tk[i] = (struct tk){ .limit = 1, .final = TPE_DONE };
	tk_tasklets(ts, tk, 4, TPE_TASKLET_BLOCKING);
	ts[0].flags = 0;
	/* The job, then the record of each dedicated thread. */
	for (k = 0; k < 4; k++) {
		fault_arm(&malloc_fault, k, -1, false);
		assert_int_equal(tpe_coop_submit(coop, ts, 4, sizeof(ts[0]),
		    &job), ENOMEM);
		fault_disarm(&malloc_fault);
		assert_ptr_equal(job, unset);
		assert_int_equal(tpe__coop_blocking_threads(coop), 0);
		assert_threads_back_to(before);
	}
	for (k = 0; k < 3; k++) {
		fault_arm(&create_fault, k, -1, false);
		assert_int_equal(tpe_coop_submit(coop, ts, 4, sizeof(ts[0]),
		    &job), EAGAIN);
		fault_disarm(&create_fault);
		assert_ptr_equal(job, unset);
		assert_int_equal(tpe__coop_blocking_threads(coop), 0);
		assert_threads_back_to(before);
		for (i = 0; i < 4; i++) {
			assert_int_equal(tu_load(&tk[i].calls), 0);
			assert_int_equal(tu_load(&tk[i].ends), 0);
		}
	}
	assert_int_equal(tpe_coop_submit(coop, ts, 4, sizeof(ts[0]), &job),
	    0);
	assert_int_equal(tpe_job_wait(job, -1), 0);
	assert_ended_once(tk, 4, 0);
	tpe_job_release(job);
	assert_int_equal(tpe_coop_destroy(coop), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_coop_round_robin_order),
		cmocka_unit_test(test_coop_park_schedule),
		cmocka_unit_test(test_coop_backoff_still_calls),
		cmocka_unit_test(test_coop_idle_parks_forever),
		cmocka_unit_test(test_coop_steals_from_longest),
		cmocka_unit_test(test_coop_no_stealing),
		cmocka_unit_test(test_coop_end_on_last_caller),
		cmocka_unit_test(test_coop_end_on_last_caller_loop),
		cmocka_unit_test(test_coop_first_error),
		cmocka_unit_test(test_coop_bad_return_is_einval),
		cmocka_unit_test(test_coop_cancel_and_wait_races),
		cmocka_unit_test(test_coop_cancel_wakes_parked_worker),
		cmocka_unit_test(test_coop_release_before_done),
		cmocka_unit_test(test_coop_destroy_running),
		cmocka_unit_test(test_coop_calls_from_tasklet),
		cmocka_unit_test(test_coop_blocking_tasklet),
		cmocka_unit_test(test_coop_submit_during_destroy),
		cmocka_unit_test(test_coop_wait_result),
		cmocka_unit_test(test_coop_job_cancel_after_done),
		cmocka_unit_test(test_coop_threads_block_async_signals),
		cmocka_unit_test(test_coop_destroy_joins_threads),
		cmocka_unit_test(test_coop_bad_input),
		cmocka_unit_test(test_coop_create_failures),
		cmocka_unit_test(test_coop_submit_failures),
	};

	tu_time_bound(0);
	threads0 = tu_thread_baseline(__real_pthread_create);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
