/* SPDX-License-Identifier: MIT */
/*
 * test_compose.c - composing futures: completion queues (tpe_cq_*), and
 * tpe_invoke_all / tpe_invoke_any, on every queue kind and both policies;
 * each documented error; shutdown-now's hand-back; memory failure.
 *
 * Tasks never call cmocka's assert macros: they record what they saw and
 * the test thread asserts it.
 */
#define TU_FAULT_INJECTION
#include <string.h>

#include "helpers.h"

/* ---- helpers ---------------------------------------------------------- */

/* The pools every table case runs on: each queue kind, each policy. */
struct kind_row {
	const char *name;
	enum tpe_queue_kind queue;
	size_t capacity;
	enum tpe_policy policy;
};
static const struct kind_row kind_rows[] = {
	{ "unbounded", TPE_QUEUE_UNBOUNDED, 0, TPE_POLICY_QUEUE_FIRST },
	{ "bounded", TPE_QUEUE_BOUNDED, 8, TPE_POLICY_QUEUE_FIRST },
	{ "handoff", TPE_QUEUE_HANDOFF, 0, TPE_POLICY_QUEUE_FIRST },
	{ "per_worker", TPE_QUEUE_PER_WORKER, 0, TPE_POLICY_QUEUE_FIRST },
	{ "priority", TPE_QUEUE_PRIORITY, 0, TPE_POLICY_QUEUE_FIRST },
	{ "priority_bounded", TPE_QUEUE_PRIORITY, 8, TPE_POLICY_SCALE_FIRST },
	{ "scale_first", TPE_QUEUE_UNBOUNDED, 0, TPE_POLICY_SCALE_FIRST },
	{ "scale_first_bounded", TPE_QUEUE_BOUNDED, 8, TPE_POLICY_SCALE_FIRST },
};
#define N_KIND_ROWS (sizeof(kind_rows) / sizeof(kind_rows[0]))

/* A fixed pool of n threads of the row's kind. */
static tpe_t *
row_pool(const struct kind_row *r, size_t n)
{
	return tu_pool_with(&(struct tu_pool_opts){ .core = n, .max = n,
	    .queue = r->queue, .capacity = r->capacity, .policy = r->policy });
}

/* A callable: counts its runs, reports started, waits on an optional
 * gate, fails with `error` when not 0, returns `ret`. */
struct job {
	struct tu_latch *started;  /* may be NULL */
	struct tu_latch *release;  /* may be NULL */
	struct tu_latch *done;     /* may be NULL: counted down at the end */
	tpe_t *pause;              /* may be NULL: pauses this pool first */
	int error;
	void *ret;
	int ran;                   /* atomic */
};

static void *
job_call(void *arg)
{
	struct job *j = arg;

	__atomic_add_fetch(&j->ran, 1, __ATOMIC_SEQ_CST);
	if (j->started != NULL)
		tu_latch_count_down(j->started);
	if (j->release != NULL)
		tu_latch_wait(j->release);
	if (j->pause != NULL)
		(void)tpe_pause(j->pause);
	if (j->error != 0)
		(void)tpe_task_fail(j->error);
	if (j->done != NULL)
		tu_latch_count_down(j->done);
	return j->ret;
}

/* A continuation that counts down the latch it is given. */
static void
count_down_then(tpe_future_t *f, void *ctx)
{
	tpe_future_release(f);
	tu_latch_count_down(ctx);
}

static void
release_all(tpe_future_t **f, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		tpe_future_release(f[i]);
}

/* ---- completion queues ------------------------------------------------ */

static void
test_compose_cq_completion_order(void **state)
{
	size_t k;

	(void)state;
	for (k = 0; k < N_KIND_ROWS; k++) {
		tpe_t *pool = row_pool(&kind_rows[k], 3);
		struct tu_latch started, release[3], listed[3];
		struct job j[3];
		tpe_future_t *f[3], *got;
		tpe_cq_t *cq;
		static const int order[3] = { 1, 2, 0 };
		void *res;
		int i;

		print_message("kind %s\n", kind_rows[k].name);
		tu_latch_init(&started, 3);
		assert_int_equal(tpe_cq_create(&cq, pool), 0);
		for (i = 0; i < 3; i++) {
			tu_latch_init(&release[i], 1);
			memset(&j[i], 0, sizeof(j[i]));
			j[i].started = &started;
			j[i].release = &release[i];
			j[i].ret = &j[i];
			j[i].error = i == 2 ? EPERM : 0;
			assert_int_equal(tpe_cq_submit(cq, job_call, &j[i],
			    &f[i]), 0);
			/* Runs after the queue's continuation (registration
			 * order): the future is listed when it ran. */
			tu_latch_init(&listed[i], 1);
			assert_int_equal(tpe_future_then(f[i], count_down_then,
			    &listed[i], NULL), 0);
		}
		assert_true(tu_latch_wait_for(&started, TU_WAIT_BOUND));
		assert_int_equal(tpe_cq_poll(cq, &got), ETIMEDOUT);
		/* Completed in the order 1, 2, 0. */
		for (i = 0; i < 3; i++) {
			tu_latch_count_down(&release[order[i]]);
			tu_latch_wait(&listed[order[i]]);
		}
		for (i = 0; i < 3; i++) {
			got = NULL;
			assert_int_equal(tpe_cq_take(cq, 0, &got), 0);
			assert_ptr_equal(got, f[order[i]]);
			res = NULL;
			assert_int_equal(tpe_future_get(got, 0, &res),
			    order[i] == 2 ? EIO : 0);
			assert_ptr_equal(res, &j[order[i]]);
			tpe_future_release(got);
		}
		assert_int_equal(tpe_cq_poll(cq, &got), ETIMEDOUT);
		assert_int_equal(tpe_cq_destroy(cq), 0);
		release_all(f, 3);
		assert_int_equal(tpe_destroy(pool), 0);
		for (i = 0; i < 3; i++) {
			assert_int_equal(tu_ran(&j[i]), 1);
			tu_latch_destroy(&release[i]);
			tu_latch_destroy(&listed[i]);
		}
		tu_latch_destroy(&started);
	}
}

/* A thread blocked in tpe_cq_take. */
struct taker {
	pthread_t thread;
	tpe_cq_t *cq;
	tpe_future_t *f;
	int rc;
};

static void *
taker_main(void *arg)
{
	struct taker *t = arg;

	t->rc = tpe_cq_take(t->cq, -1, &t->f);
	return NULL;
}

/* take waits for a completion; a timed take and poll say ETIMEDOUT. */
static void
test_compose_cq_take_waits(void **state)
{
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct tu_latch started, release;
	struct job j = { .started = &started, .release = &release };
	struct taker t = { .rc = -1 };
	tpe_future_t *f;
	tpe_cq_t *cq;

	(void)state;
	tu_latch_init(&started, 1);
	tu_latch_init(&release, 1);
	assert_int_equal(tpe_cq_create(&cq, pool), 0);
	f = TU_SENTINEL;
	assert_int_equal(tpe_cq_take(cq, TU_MS, &f), ETIMEDOUT);
	assert_ptr_equal(f, TU_SENTINEL);
	/* No future wanted back from submit: take hands it back anyway. */
	assert_int_equal(tpe_cq_submit(cq, job_call, &j, NULL), 0);
	tu_latch_wait(&started);
	t.cq = cq;
	assert_int_equal(pthread_create(&t.thread, NULL, taker_main, &t), 0);
	assert_int_equal(tpe_cq_poll(cq, &f), ETIMEDOUT);
	tu_latch_count_down(&release);
	assert_int_equal(pthread_join(t.thread, NULL), 0);
	assert_int_equal(t.rc, 0);
	assert_true(tpe_future_is_done(t.f));
	tpe_future_release(t.f);
	assert_int_equal(tpe_cq_destroy(cq), 0);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
}

/* tpe_shutdown_now: the tasks not started come back through the queue,
 * cancelled, never lost. */
static void
test_compose_cq_shutdown_now(void **state)
{
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct tu_latch started, release;
	struct tu_handbacks hb;
	struct job run = { .started = &started, .release = &release };
	struct job q[2];
	tpe_future_t *got[3];
	tpe_cq_t *cq;
	int i;

	(void)state;
	memset(q, 0, sizeof(q));
	tu_handbacks_init(&hb);
	tu_latch_init(&started, 1);
	tu_latch_init(&release, 1);
	assert_int_equal(tpe_cq_create(&cq, pool), 0);
	assert_int_equal(tpe_cq_submit(cq, job_call, &run, NULL), 0);
	tu_latch_wait(&started);
	assert_int_equal(tpe_cq_submit(cq, job_call, &q[0], NULL), 0);
	assert_int_equal(tpe_cq_submit(cq, job_call, &q[1], NULL), 0);
	assert_int_equal(tpe_shutdown_now(pool, tu_handback_fn, &hb), 0);
	assert_int_equal(tu_handbacks_count(&hb), 2);
	for (i = 0; i < 2; i++) {
		assert_int_equal(tpe_cq_poll(cq, &got[i]), 0);
		assert_true(tpe_future_is_cancelled(got[i]));
	}
	assert_int_equal(tpe_cq_submit(cq, job_call, &q[0], NULL),
	    ECANCELED);
	tu_latch_count_down(&release);
	assert_int_equal(tpe_cq_take(cq, -1, &got[2]), 0);
	assert_int_equal(tpe_future_get(got[2], 0, NULL), 0);
	release_all(got, 3);
	assert_int_equal(tpe_cq_destroy(cq), 0);
	assert_int_equal(tpe_destroy(pool), 0);
	assert_int_equal(tu_ran(&q[0]) + tu_ran(&q[1]), 0);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
}

/* destroy with futures listed and tasks still running: the listed ones are
 * released, a later completion is dropped; the submitter's references stay
 * valid (ASan's leak check sees the rest). */
static void
test_compose_cq_destroy_pending(void **state)
{
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct tu_latch started, release;
	struct job done = { .ret = (void *)1 };
	struct job run = { .started = &started, .release = &release,
	    .ret = (void *)2 };
	tpe_future_t *fd, *fr;
	tpe_cq_t *cq;
	void *res = NULL;

	(void)state;
	tu_latch_init(&started, 1);
	tu_latch_init(&release, 1);
	assert_int_equal(tpe_cq_create(&cq, pool), 0);
	assert_int_equal(tpe_cq_submit(cq, job_call, &done, &fd), 0);
	assert_int_equal(tpe_future_get(fd, -1, NULL), 0);
	assert_int_equal(tpe_cq_submit(cq, job_call, &run, &fr), 0);
	tu_latch_wait(&started);
	assert_int_equal(tpe_cq_destroy(cq), 0);
	tu_latch_count_down(&release);
	assert_int_equal(tpe_future_get(fr, -1, &res), 0);
	assert_ptr_equal(res, (void *)2);
	assert_int_equal(tpe_future_get(fd, 0, &res), 0);
	assert_ptr_equal(res, (void *)1);
	tpe_future_release(fd);
	tpe_future_release(fr);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
}

static void
test_compose_cq_errors(void **state)
{
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_BOUNDED, 1, TPE_REJECT_ABORT);
	struct tu_saturation sat;
	struct job j = { 0 };
	tpe_future_t *f = TU_SENTINEL;
	tpe_cq_t *cq = TU_SENTINEL;

	(void)state;
	assert_int_equal(tpe_cq_create(NULL, pool), EINVAL);
	assert_int_equal(tpe_cq_create(&cq, NULL), EINVAL);
	assert_ptr_equal(cq, TU_SENTINEL);
	fault_arm(&malloc_fault, 0, -1, false);
	assert_int_equal(tpe_cq_create(&cq, pool), ENOMEM);
	fault_disarm(&malloc_fault);
	assert_int_equal(tpe_cq_create(&cq, pool), 0);
	assert_int_equal(tpe_cq_submit(NULL, job_call, &j, &f), EINVAL);
	assert_int_equal(tpe_cq_submit(cq, NULL, &j, &f), EINVAL);
	assert_int_equal(tpe_cq_take(NULL, 0, &f), EINVAL);
	assert_int_equal(tpe_cq_take(cq, 0, NULL), EINVAL);
	assert_int_equal(tpe_cq_poll(NULL, &f), EINVAL);
	assert_int_equal(tpe_cq_destroy(NULL), EINVAL);
	/* Each allocation of a submit failing in turn: ENOMEM, nothing
	 * accepted. */
	fault_arm(&malloc_fault, 0, -1, false);
	assert_int_equal(tpe_cq_submit(cq, job_call, &j, &f), ENOMEM);
	fault_disarm(&malloc_fault);
	fault_arm(&malloc_fault, 1, -1, false);
	assert_int_equal(tpe_cq_submit(cq, job_call, &j, &f), ENOMEM);
	fault_disarm(&malloc_fault);
	assert_ptr_equal(f, TU_SENTINEL);
	/* Saturated: the pool's refusal. */
	tu_saturate(pool, 1, 1, &sat);
	assert_int_equal(tpe_cq_submit(cq, job_call, &j, &f), EAGAIN);
	assert_ptr_equal(f, TU_SENTINEL);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_wait_idle(pool, -1), 0);
	assert_int_equal(tpe_cq_poll(cq, &f), ETIMEDOUT);
	assert_int_equal(tpe_shutdown(pool), 0);
	assert_int_equal(tpe_cq_submit(cq, job_call, &j, &f), ECANCELED);
	assert_int_equal(tpe_cq_destroy(cq), 0);
	assert_int_equal(tpe_destroy(pool), 0);
	assert_int_equal(tu_ran(&j), 0);
	tu_saturation_destroy(&sat);
}

/* tpe_future_then without memory: ENOMEM, the callback never runs and no
 * reference was taken (the last release frees the future: ASan). */
static void
test_compose_then_enomem(void **state)
{
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct tu_latch fired;
	tpe_future_t *f;

	(void)state;
	tu_latch_init(&fired, 1);
	assert_int_equal(tpe_submit(pool, tu_nop_call, NULL, &f), 0);
	assert_int_equal(tpe_future_get(f, -1, NULL), 0);
	fault_arm(&malloc_fault, 0, -1, false);
	assert_int_equal(tpe_future_then(f, count_down_then, &fired, NULL),
	    ENOMEM);
	fault_disarm(&malloc_fault);
	assert_int_equal(tu_latch_count(&fired), 1);
	tpe_future_release(f);
	assert_int_equal(tpe_destroy(pool), 0);
	tu_latch_destroy(&fired);
}

/* ---- invoke-all ------------------------------------------------------- */

static void
test_compose_invoke_all_results(void **state)
{
	enum { N = 4 };
	size_t k;

	(void)state;
	for (k = 0; k < N_KIND_ROWS; k++) {
		tpe_t *pool = row_pool(&kind_rows[k], N);
		struct job j[N];
		tpe_call_fn fns[N];
		void *args[N];
		tpe_future_t *f[N];
		void *res;
		int i;

		print_message("kind %s\n", kind_rows[k].name);
		for (i = 0; i < N; i++) {
			memset(&j[i], 0, sizeof(j[i]));
			j[i].ret = &j[i];
			j[i].error = i == 1 ? ENOSPC : 0;
			fns[i] = job_call;
			args[i] = &j[i];
		}
		assert_int_equal(tpe_invoke_all(pool, N, fns, args, -1, f), 0);
		for (i = 0; i < N; i++) {
			/* Done when the call returned. */
			assert_true(tpe_future_is_done(f[i]));
			res = NULL;
			assert_int_equal(tpe_future_get(f[i], 0, &res),
			    i == 1 ? EIO : 0);
			assert_ptr_equal(res, &j[i]);
			assert_int_equal(tpe_future_error(f[i]),
			    i == 1 ? ENOSPC : 0);
			assert_int_equal(tu_ran(&j[i]), 1);
		}
		release_all(f, N);
		/* args NULL: every argument NULL. */
		fns[0] = tu_nop_call;
		assert_int_equal(tpe_invoke_all(pool, 1, fns, NULL, -1, f), 0);
		res = TU_SENTINEL;
		assert_int_equal(tpe_future_get(f[0], 0, &res), 0);
		assert_null(res);
		tpe_future_release(f[0]);
		/* Nothing to do. */
		assert_int_equal(tpe_invoke_all(pool, 0, NULL, NULL, 0, f), 0);
		assert_int_equal(tpe_destroy(pool), 0);
	}
}

/* The timeout passes while the tasks wait (the pool paused, so none can
 * start): each is cancelled, none runs; a timeout of 0 polls. */
static void
test_compose_invoke_all_timeout(void **state)
{
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct job j[2] = { { 0 }, { 0 } };
	tpe_call_fn fns[2] = { job_call, job_call };
	void *args[2] = { &j[0], &j[1] };
	tpe_future_t *f[2];
	int64_t timeout;

	(void)state;
	assert_int_equal(tpe_pause(pool), 0);
	for (timeout = 0; timeout <= 20 * TU_MS; timeout += 20 * TU_MS) {
		assert_int_equal(tpe_invoke_all(pool, 2, fns, args, timeout,
		    f), ETIMEDOUT);
		assert_true(tpe_future_is_cancelled(f[0]));
		assert_true(tpe_future_is_cancelled(f[1]));
		release_all(f, 2);
	}
	assert_int_equal(tpe_resume(pool), 0);
	assert_int_equal(tpe_destroy(pool), 0);
	assert_int_equal(tu_ran(&j[0]) + tu_ran(&j[1]), 0);
}

/* A task that calls invoke-all or invoke-any on its own pool. */
struct inner {
	tpe_t *pool;
	int all_rc, any_rc;
	bool written;   /* a future was handed back */
};

static void *
inner_call(void *arg)
{
	struct inner *in = arg;
	tpe_call_fn fns[1] = { tu_nop_call };
	tpe_future_t *f[1] = { TU_SENTINEL };

	in->all_rc = tpe_invoke_all(in->pool, 1, fns, NULL, -1, f);
	if (f[0] != TU_SENTINEL) {
		in->written = true;
		tpe_future_release(f[0]);
		f[0] = TU_SENTINEL;
	}
	in->any_rc = tpe_invoke_any(in->pool, 1, fns, NULL, -1, f, NULL,
	    NULL);
	if (f[0] != TU_SENTINEL) {
		in->written = true;
		tpe_future_release(f[0]);
	}
	return NULL;
}

/* From a worker of the same pool (a pool of one thread here would wait
 * forever): EDEADLK, nothing submitted. */
static void
test_compose_invoke_from_worker(void **state)
{
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	tpe_t *other = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct inner in = { pool, -1, -1, false };
	struct inner out = { other, -1, -1, false };
	tpe_future_t *f;

	(void)state;
	assert_int_equal(tpe_submit(pool, inner_call, &in, &f), 0);
	assert_int_equal(tpe_future_get(f, -1, NULL), 0);
	assert_int_equal(in.all_rc, EDEADLK);
	assert_int_equal(in.any_rc, EDEADLK);
	assert_false(in.written);
	tpe_future_release(f);
	assert_int_equal(tu_stats(pool).submitted, 1);
	/* Another pool's worker may wait. */
	assert_int_equal(tpe_submit(pool, inner_call, &out, &f), 0);
	assert_int_equal(tpe_future_get(f, -1, NULL), 0);
	assert_int_equal(out.all_rc, 0);
	assert_int_equal(out.any_rc, 0);
	assert_true(out.written);
	tpe_future_release(f);
	assert_int_equal(tpe_destroy(pool), 0);
	assert_int_equal(tpe_destroy(other), 0);
}

/* A thread in invoke-all or invoke-any with no timeout. */
struct invoker {
	pthread_t thread;
	tpe_t *pool;
	bool any;
	tpe_call_fn fns[2];
	void *args[2];
	tpe_future_t *f[2];
	int rc;
};

static void *
invoker_main(void *arg)
{
	struct invoker *v = arg;

	if (v->any)
		v->rc = tpe_invoke_any(v->pool, 2, v->fns, v->args, -1, v->f,
		    NULL, NULL);
	else
		v->rc = tpe_invoke_all(v->pool, 2, v->fns, v->args, -1, v->f);
	return NULL;
}

/* tpe_shutdown_now while the call waits: the task not started is
 * cancelled (handed back), and the call returns. */
static void
test_compose_invoke_shutdown_now(void **state)
{
	int any;

	(void)state;
	for (any = 0; any < 2; any++) {
		tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0,
		    TPE_REJECT_ABORT);
		struct tu_latch started, release;
		struct tu_handbacks hb;
		struct job j[2] = { { .started = &started,
		    .release = &release, .error = EPERM }, { 0 } };
		struct invoker v = { .pool = pool, .any = any != 0,
		    .fns = { job_call, job_call }, .args = { &j[0], &j[1] },
		    .rc = -1 };

		tu_handbacks_init(&hb);
		tu_latch_init(&started, 1);
		tu_latch_init(&release, 1);
		assert_int_equal(pthread_create(&v.thread, NULL, invoker_main,
		    &v), 0);
		tu_latch_wait(&started);
		/* Task 1 is queued once its submission returned: the queue
		 * holds it when shutdown-now comes (wait for it). */
		assert_true(TU_EVENTUALLY(tu_stats(pool).queued == 1,
		    TU_WAIT_BOUND));
		assert_int_equal(tpe_shutdown_now(pool, tu_handback_fn, &hb),
		    0);
		assert_int_equal(tu_handbacks_count(&hb), 1);
		tu_latch_count_down(&release);
		assert_int_equal(pthread_join(v.thread, NULL), 0);
		/* invoke-any: task 0 failed and task 1 was cancelled. */
		assert_int_equal(v.rc, any ? EIO : 0);
		assert_int_equal(tpe_future_get(v.f[0], 0, NULL), EIO);
		assert_true(tpe_future_is_cancelled(v.f[1]));
		release_all(v.f, 2);
		assert_int_equal(tpe_destroy(pool), 0);
		assert_int_equal(tu_ran(&j[1]), 0);
		tu_latch_destroy(&started);
		tu_latch_destroy(&release);
	}
}

static void
test_compose_invoke_errors(void **state)
{
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_BOUNDED, 1, TPE_REJECT_ABORT);
	struct tu_saturation sat;
	struct job j[3] = { { 0 }, { 0 }, { 0 } };
	tpe_call_fn fns[3] = { job_call, job_call, job_call };
	tpe_call_fn bad[2] = { job_call, NULL };
	void *args[3] = { &j[0], &j[1], &j[2] };
	tpe_future_t *f[3];
	void *res = TU_SENTINEL;
	size_t idx = 7;

	(void)state;
	assert_int_equal(tpe_invoke_all(NULL, 1, fns, args, 0, f), EINVAL);
	assert_int_equal(tpe_invoke_all(pool, 1, NULL, args, 0, f), EINVAL);
	assert_int_equal(tpe_invoke_all(pool, 1, fns, args, 0, NULL), EINVAL);
	assert_int_equal(tpe_invoke_all(pool, 2, bad, args, 0, f), EINVAL);
	assert_int_equal(tpe_invoke_any(NULL, 1, fns, args, 0, f, &res,
	    &idx), EINVAL);
	assert_int_equal(tpe_invoke_any(pool, 0, fns, args, 0, f, &res, &idx),
	    EINVAL);
	assert_int_equal(tpe_invoke_any(pool, 1, NULL, args, 0, f, &res,
	    &idx), EINVAL);
	assert_int_equal(tpe_invoke_any(pool, 1, fns, args, 0, NULL, &res,
	    &idx), EINVAL);
	assert_int_equal(tpe_invoke_any(pool, 2, bad, args, 0, f, &res, &idx),
	    EINVAL);
	/* invoke-any's memory, before anything is submitted. */
	fault_arm(&malloc_fault, 0, -1, false);
	assert_int_equal(tpe_invoke_any(pool, 3, fns, args, 0, f, &res, &idx),
	    ENOMEM);
	fault_disarm(&malloc_fault);
	fault_arm(&malloc_fault, 3, -1, false);
	assert_int_equal(tpe_invoke_any(pool, 3, fns, args, 0, f, &res, &idx),
	    ENOMEM);
	fault_disarm(&malloc_fault);
	assert_int_equal(tu_stats(pool).submitted, 0);

	/* The pool refuses task 1 (its worker busy, task 0 fills the
	 * queue): task 0 is cancelled, futures[1] NULL, and the pool's
	 * error. */
	tu_saturate(pool, 1, 0, &sat);
	assert_int_equal(tpe_invoke_all(pool, 2, fns, args, -1, f), EAGAIN);
	assert_null(f[1]);
	assert_true(tpe_future_is_cancelled(f[0]));
	tpe_future_release(f[0]);
	/* The cancelled task leaves the queue. */
	assert_int_equal(tpe_purge(pool, NULL), 0);
	assert_int_equal(tpe_invoke_any(pool, 2, fns, args, -1, f, &res,
	    &idx), EAGAIN);
	assert_null(f[1]);
	assert_true(tpe_future_is_cancelled(f[0]));
	tpe_future_release(f[0]);
	assert_ptr_equal(res, TU_SENTINEL);
	assert_int_equal(idx, 7);
	tu_unsaturate(&sat);

	/* Shut down: ECANCELED, nothing submitted. */
	assert_int_equal(tpe_shutdown(pool), 0);
	assert_int_equal(tpe_invoke_all(pool, 1, fns + 1, args + 1, -1, f),
	    ECANCELED);
	assert_null(f[0]);
	assert_int_equal(tpe_invoke_any(pool, 1, fns + 1, args + 1, -1, f,
	    &res, &idx), ECANCELED);
	assert_null(f[0]);
	assert_int_equal(tpe_destroy(pool), 0);
	assert_int_equal(tu_ran(&j[0]) + tu_ran(&j[1]) + tu_ran(&j[2]), 0);
	tu_saturation_destroy(&sat);
}

/* ---- invoke-any ------------------------------------------------------- */

/* The first success wins; a failure before it does not; a loser may
 * still run when the call returns. */
static void
test_compose_invoke_any_first_success(void **state)
{
	enum { N = 3 };
	size_t k;

	(void)state;
	for (k = 0; k < N_KIND_ROWS; k++) {
		tpe_t *pool = row_pool(&kind_rows[k], N);
		struct tu_latch release, failed;
		/* 2 succeeds once 0 failed; 1 runs on meanwhile. */
		struct job j[N] = { { .error = EPERM, .ret = (void *)1,
		    .done = &failed },
		    { .release = &release, .ret = (void *)2 },
		    { .release = &failed, .ret = (void *)3 } };
		tpe_call_fn fns[N] = { job_call, job_call, job_call };
		void *args[N] = { &j[0], &j[1], &j[2] };
		tpe_future_t *f[N];
		void *res = NULL;
		size_t idx = 9;

		print_message("kind %s\n", kind_rows[k].name);
		tu_latch_init(&release, 1);
		tu_latch_init(&failed, 1);
		assert_int_equal(tpe_invoke_any(pool, N, fns, args, -1, f,
		    &res, &idx), 0);
		assert_ptr_equal(res, (void *)3);
		assert_int_equal(idx, 2);
		assert_int_equal(tpe_future_get(f[0], -1, NULL), EIO);
		tu_latch_count_down(&release);
		release_all(f, N);
		assert_int_equal(tpe_destroy(pool), 0);
		tu_latch_destroy(&release);
		tu_latch_destroy(&failed);
	}
}

/* The rest are cancelled: the winner pauses its pool of one thread, so
 * the loser is still queued when the call cancels it. */
static void
test_compose_invoke_any_cancels_rest(void **state)
{
	size_t k;

	(void)state;
	for (k = 0; k < N_KIND_ROWS; k++) {
		tpe_t *pool;
		struct job j[2] = { { .ret = (void *)1 }, { 0 } };
		tpe_call_fn fns[2] = { job_call, job_call };
		void *args[2] = { &j[0], &j[1] };
		tpe_future_t *f[2];
		void *res = NULL;
		size_t idx = 9;

		if (kind_rows[k].queue == TPE_QUEUE_HANDOFF)
			continue; /* no queue to leave the loser in */
		print_message("kind %s\n", kind_rows[k].name);
		pool = row_pool(&kind_rows[k], 1);
		j[0].pause = pool;
		assert_int_equal(tpe_invoke_any(pool, 2, fns, args, -1, f,
		    &res, &idx), 0);
		assert_ptr_equal(res, (void *)1);
		assert_int_equal(idx, 0);
		assert_true(tpe_future_is_cancelled(f[1]));
		assert_int_equal(tpe_resume(pool), 0);
		assert_int_equal(tpe_wait_idle(pool, -1), 0);
		assert_int_equal(tu_ran(&j[1]), 0);
		release_all(f, 2);
		assert_int_equal(tpe_destroy(pool), 0);
	}
}

/* None succeeds: EIO when one failed; ECANCELED when all were cancelled
 * (a discarding pool); ETIMEDOUT, the rest cancelled. */
static void
test_compose_invoke_any_none_succeeds(void **state)
{
	tpe_t *pool = tu_pool(2, 2, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	tpe_t *full = tu_pool(1, 1, TPE_QUEUE_BOUNDED, 1, TPE_REJECT_DISCARD);
	tpe_t *one = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct tu_saturation sat, sat1;
	struct job j[2] = { { .error = EPERM }, { .error = ENOSPC } };
	struct job t[2] = { { 0 }, { 0 } };
	tpe_call_fn fns[2] = { job_call, job_call };
	void *args[2] = { &j[0], &j[1] };
	void *targs[2] = { &t[0], &t[1] };
	tpe_future_t *f[2];
	void *res = TU_SENTINEL;

	(void)state;
	assert_int_equal(tpe_invoke_any(pool, 2, fns, args, -1, f, &res,
	    NULL), EIO);
	assert_int_equal(tpe_future_error(f[0]), EPERM);
	assert_int_equal(tpe_future_error(f[1]), ENOSPC);
	assert_ptr_equal(res, TU_SENTINEL);
	release_all(f, 2);

	tu_saturate(full, 1, 1, &sat);
	assert_int_equal(tpe_invoke_any(full, 2, fns, args, -1, f, &res,
	    NULL), ECANCELED);
	assert_true(tpe_future_is_cancelled(f[0]));
	assert_true(tpe_future_is_cancelled(f[1]));
	release_all(f, 2);
	tu_unsaturate(&sat);

	/* The one worker busy: the tasks wait in the queue past the
	 * timeout, and are cancelled. */
	tu_saturate(one, 1, 0, &sat1);
	assert_int_equal(tpe_invoke_any(one, 2, fns, targs, 0, f, &res, NULL),
	    ETIMEDOUT);
	assert_true(tpe_future_is_cancelled(f[0]));
	assert_true(tpe_future_is_cancelled(f[1]));
	release_all(f, 2);
	assert_int_equal(tpe_invoke_any(one, 2, fns, targs, 20 * TU_MS, f,
	    &res, NULL), ETIMEDOUT);
	assert_true(tpe_future_is_cancelled(f[0]));
	assert_true(tpe_future_is_cancelled(f[1]));
	release_all(f, 2);
	tu_unsaturate(&sat1);
	assert_ptr_equal(res, TU_SENTINEL);
	assert_int_equal(tpe_destroy(pool), 0);
	assert_int_equal(tpe_destroy(full), 0);
	assert_int_equal(tpe_destroy(one), 0);
	assert_int_equal(tu_ran(&t[0]) + tu_ran(&t[1]), 0);
	tu_saturation_destroy(&sat);
	tu_saturation_destroy(&sat1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_compose_cq_completion_order),
		cmocka_unit_test(test_compose_cq_take_waits),
		cmocka_unit_test(test_compose_cq_shutdown_now),
		cmocka_unit_test(test_compose_cq_destroy_pending),
		cmocka_unit_test(test_compose_cq_errors),
		cmocka_unit_test(test_compose_then_enomem),
		cmocka_unit_test(test_compose_invoke_all_results),
		cmocka_unit_test(test_compose_invoke_all_timeout),
		cmocka_unit_test(test_compose_invoke_from_worker),
		cmocka_unit_test(test_compose_invoke_shutdown_now),
		cmocka_unit_test(test_compose_invoke_errors),
		cmocka_unit_test(test_compose_invoke_any_first_success),
		cmocka_unit_test(test_compose_invoke_any_cancels_rest),
		cmocka_unit_test(test_compose_invoke_any_none_succeeds),
	};

	tu_time_bound(0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
