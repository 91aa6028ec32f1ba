/* SPDX-License-Identifier: MIT */
/*
 * test_coop.c - the cooperative tasklet service: round-robin order, idle
 * backoff and parking, stealing, completion exactly once under cancel and
 * wait races, errors, blocking tasklets, destroy, bad input, and malloc /
 * pthread_create failures (the --wrap wrappers below).
 */
#include <sys/resource.h>

#include "testutil.h"

#include "coop.h"

/* ---- the wrappers (tests/Makefile.inc links with --wrap) -------------- */

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
int __real_pthread_create(pthread_t *thread, const pthread_attr_t *attr,
    void *(*start)(void *), void *arg);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
int __wrap_pthread_create(pthread_t *thread, const pthread_attr_t *attr,
    void *(*start)(void *), void *arg);

/* Calls of the calling thread after `skip` more fail, when armed. */
struct fault {
	int armed;
	pthread_t thread;
	long skip;
};

static struct fault alloc_fault, create_fault;

static bool
fault_hit(struct fault *f)
{
	if (!__atomic_load_n(&f->armed, __ATOMIC_SEQ_CST) ||
	    !pthread_equal(pthread_self(), f->thread))
		return false;
	return __atomic_sub_fetch(&f->skip, 1, __ATOMIC_SEQ_CST) < 0;
}

static void
fault_arm(struct fault *f, long skip)
{
	f->thread = pthread_self();
	f->skip = skip;
	__atomic_store_n(&f->armed, 1, __ATOMIC_SEQ_CST);
}

static void
fault_disarm(struct fault *f)
{
	__atomic_store_n(&f->armed, 0, __ATOMIC_SEQ_CST);
}

void *
__wrap_malloc(size_t size)
{
	return fault_hit(&alloc_fault) ? NULL : __real_malloc(size);
}

void *
__wrap_calloc(size_t n, size_t size)
{
	return fault_hit(&alloc_fault) ? NULL : __real_calloc(n, size);
}

int
__wrap_pthread_create(pthread_t *thread, const pthread_attr_t *attr,
    void *(*start)(void *), void *arg)
{
	if (fault_hit(&create_fault))
		return EAGAIN;
	return __real_pthread_create(thread, attr, start, arg);
}

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
	int *order, *order_len;   /* the ids of the calls, in order */
	int calls, in_call, overlap, ends, end_result; /* atomic */
	pthread_t first;
	pthread_t last;           /* atomic: the thread of the latest call */
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

static int64_t
cpu_ns(void)
{
	struct rusage r;

	getrusage(RUSAGE_SELF, &r);
	return ((int64_t)r.ru_utime.tv_sec + r.ru_stime.tv_sec) * TU_S +
	    ((int64_t)r.ru_utime.tv_usec + r.ru_stime.tv_usec) * 1000;
}

/* Workers without tasklets park without a timeout (before and after a
 * job) and use no CPU. */
static void
test_coop_idle_parks_forever(void **state)
{
	tpe_coop_t *coop = coop_new(2, 0, 0);
	struct tk tk[4] = { 0 };
	struct tpe_tasklet ts[4];
	tpe_job_t *job;
	int64_t c0;
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
	c0 = cpu_ns();
	tu_sleep_ns(300 * TU_MS);
	/* Spinning or timed parks would use far more; parked ones ~0. */
	assert_true(cpu_ns() - c0 < 30 * TU_MS);
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
	in->destroy_rc = tpe_coop_destroy(in->coop);
	in->cancel_rc = tpe_job_cancel(in->job);
	return TPE_MADE_PROGRESS;
}

/* From a tasklet of the job: wait is EDEADLK, destroy EDEADLK, cancel 0
 * without waiting for itself; the job then ends with ECANCELED. Also from
 * a blocking tasklet. */
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

/* ---- bad input --------------------------------------------------------- */

static void
test_coop_bad_input(void **state)
{
	struct tpe_coop_config c = { 1, 0, 0, NULL };
	struct tk tk = { .limit = 1, .final = TPE_DONE };
	struct tpe_tasklet ts = { tk_fn, &tk, NULL, 0 }, bad;
	tpe_coop_t *coop = NULL;
	tpe_job_t *job = NULL;

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
	assert_null(coop);
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
	assert_null(job);
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

static void
test_coop_create_failures(void **state)
{
	struct tpe_coop_config c = { 3, 0, 0, NULL };
	tpe_coop_t *coop = NULL;
	long k;

	(void)state;
	for (k = 0; k < 2; k++) {
		fault_arm(&alloc_fault, k);
		assert_int_equal(tpe_coop_create(&coop, &c, sizeof(c)),
		    ENOMEM);
		fault_disarm(&alloc_fault);
		assert_null(coop);
	}
	for (k = 0; k < 3; k++) {
		fault_arm(&create_fault, k);
		assert_int_equal(tpe_coop_create(&coop, &c, sizeof(c)),
		    EAGAIN);
		fault_disarm(&create_fault);
		assert_null(coop);
	}
}

/* A job whose k-th blocking tasklet cannot get its thread: EAGAIN, no
 * tasklet called or ended, the started threads gone; the service works
 * on. Its allocation failing: ENOMEM. */
static void
test_coop_submit_failures(void **state)
{
	tpe_coop_t *coop = coop_new(1, 0, 0);
	struct tk tk[4] = { 0 };
	struct tpe_tasklet ts[4];
	tpe_job_t *job = NULL;
	long k;
	int i;

	(void)state;
	for (i = 0; i < 4; i++)
		tk[i] = (struct tk){ .limit = 1, .final = TPE_DONE };
	tk_tasklets(ts, tk, 4, TPE_TASKLET_BLOCKING);
	ts[0].flags = 0;
	fault_arm(&alloc_fault, 0);
	assert_int_equal(tpe_coop_submit(coop, ts, 4, sizeof(ts[0]), &job),
	    ENOMEM);
	fault_disarm(&alloc_fault);
	for (k = 0; k < 3; k++) {
		fault_arm(&create_fault, k);
		assert_int_equal(tpe_coop_submit(coop, ts, 4, sizeof(ts[0]),
		    &job), EAGAIN);
		fault_disarm(&create_fault);
		assert_null(job);
		assert_int_equal(tpe__coop_blocking_threads(coop), 0);
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
		cmocka_unit_test(test_coop_first_error),
		cmocka_unit_test(test_coop_bad_return_is_einval),
		cmocka_unit_test(test_coop_cancel_and_wait_races),
		cmocka_unit_test(test_coop_release_before_done),
		cmocka_unit_test(test_coop_destroy_running),
		cmocka_unit_test(test_coop_calls_from_tasklet),
		cmocka_unit_test(test_coop_blocking_tasklet),
		cmocka_unit_test(test_coop_submit_during_destroy),
		cmocka_unit_test(test_coop_bad_input),
		cmocka_unit_test(test_coop_create_failures),
		cmocka_unit_test(test_coop_submit_failures),
	};

	tu_time_bound(0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
