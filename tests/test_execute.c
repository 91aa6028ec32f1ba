/* SPDX-License-Identifier: MIT */
/*
 * test_execute.c - tpe_execute's three steps and the queue interplay,
 * statistics, thread names, task and thread hooks, tpe_remove, tpe_purge,
 * tpe_wait_idle, tpe_pause / tpe_resume.
 * Java behaviours (doc/java-behaviours.md): C 19-28, F 57-63.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <string.h>

#include "helpers.h"

#include "base/sync.h"
#include "engine/locked.h"
#include "pool/pool.h"
#include "queue/queue.h"

#define EV_TIMEOUT (10 * TU_S)

/* ---- argument checks (item 19) ------------------------------------------ */

static void
test_execute_null_fn(void **state)
{
	static int count;
	tpe_t *p = tu_pool(1, 1, TPE_QUEUE_BOUNDED, 10, TPE_REJECT_ABORT);
	tpe_future_t *f = (tpe_future_t *)&count;
	struct tpe_stats s;

	(void)state;
	assert_int_equal(tpe_execute(p, NULL, &count), EINVAL);
	assert_int_equal(tpe_execute(p, NULL, NULL), EINVAL);
	assert_int_equal(tpe_execute(NULL, tu_count_fn, &count), EINVAL);
	assert_int_equal(tpe_submit(p, NULL, &count, &f), EINVAL);
	assert_ptr_equal(f, (tpe_future_t *)&count);
	assert_int_equal(tpe_submit(p, tu_count_call, &count, NULL), EINVAL);
	assert_int_equal(tpe_submit(NULL, tu_count_call, &count, &f), EINVAL);
	assert_ptr_equal(f, (tpe_future_t *)&count);
	s = tu_stats(p);
	assert_int_equal(s.pool_size, 0);
	assert_int_equal(s.queued, 0);
	assert_int_equal(s.submitted, 0);
	assert_int_equal(s.rejected, 0);
	assert_int_equal(s.largest_pool_size, 0);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(count, 0);
}

/* ---- item 20: a task runs on a pool thread ------------------------------ */

struct where {
	struct tu_latch done;
	pthread_t self;
	int ran;
};

static void
where_fn(void *arg)
{
	struct where *w = arg;

	w->self = pthread_self();
	__atomic_add_fetch(&w->ran, 1, __ATOMIC_SEQ_CST);
	tu_latch_count_down(&w->done);
}

static void
test_execute_runs_on_pool_thread(void **state)
{
	static struct where w;
	tpe_t *p = tu_pool(1, 1, TPE_QUEUE_BOUNDED, 10, TPE_REJECT_ABORT);

	(void)state;
	tu_latch_init(&w.done, 1);
	w.ran = 0;
	assert_int_equal(tpe_execute(p, where_fn, &w), 0);
	tu_latch_wait(&w.done);
	assert_false(pthread_equal(w.self, pthread_self()));
	assert_int_equal(w.ran, 1);
	assert_true(TU_EVENTUALLY(tu_stats(p).completed == 1, EV_TIMEOUT));
	assert_int_equal(tu_stats(p).submitted, 1);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(w.ran, 1);
	tu_latch_destroy(&w.done);
}

/* ---- item 21: step 1 starts a thread below core even if one is idle ----- */

static void
test_execute_core_thread_even_if_idle(void **state)
{
	static int count;
	tpe_t *p = tu_pool(2, 2, TPE_QUEUE_BOUNDED, 10, TPE_REJECT_ABORT);
	struct tpe_stats s;

	(void)state;
	count = 0;
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	assert_true(TU_EVENTUALLY((s = tu_stats(p)).completed == 1 &&
	    s.idle == 1, EV_TIMEOUT));
	assert_int_equal(s.pool_size, 1);
	assert_int_equal(s.active, 0);
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	s = tu_stats(p);
	assert_int_equal(s.pool_size, 2);
	assert_int_equal(s.largest_pool_size, 2);
	assert_int_equal(s.queued, 0);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(count, 2);
}

/* ---- item 22: step 2 queues at core ------------------------------------- */

static void
test_execute_queues_at_core(void **state)
{
	static struct tu_saturation sat;
	tpe_t *p = tu_pool(1, 1, TPE_QUEUE_BOUNDED, 10, TPE_REJECT_ABORT);
	struct tpe_stats s;
	int i;

	(void)state;
	tu_saturate(p, 1, 4, &sat);
	s = tu_stats(p);
	assert_int_equal(s.pool_size, 1);
	assert_int_equal(s.active, 1);
	assert_int_equal(s.queued, 4);
	assert_int_equal(s.submitted, 5);
	assert_int_equal(s.completed, 0);
	/* FIFO: the first is running, the others wait. */
	assert_int_equal(tu_ran(&sat.b[0]), 1);
	for (i = 1; i < 5; i++)
		assert_int_equal(tu_ran(&sat.b[i]), 0);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	for (i = 0; i < 5; i++)
		assert_int_equal(tu_ran(&sat.b[i]), 1);
	tu_saturation_destroy(&sat);
}

/* ---- item 23: step 3, a non-core thread runs the NEW task --------------- */

static void
test_execute_non_core_runs_new_task(void **state)
{
	static struct tu_latch s1, s2, s3, release;
	static struct tu_blocker t1, t2, t3;
	tpe_t *p = tu_pool(1, 2, TPE_QUEUE_BOUNDED, 1, TPE_REJECT_ABORT);
	struct tpe_stats s;

	(void)state;
	tu_latch_init(&s1, 1);
	tu_latch_init(&s2, 1);
	tu_latch_init(&s3, 1);
	tu_latch_init(&release, 1);
	t1 = (struct tu_blocker){ &s1, &release, NULL, 0 };
	t2 = (struct tu_blocker){ &s2, &release, NULL, 0 };
	t3 = (struct tu_blocker){ &s3, &release, NULL, 0 };
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &t1), 0);
	tu_latch_wait(&s1);
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &t2), 0);
	assert_int_equal(tu_stats(p).queued, 1);
	assert_int_equal(tu_stats(p).pool_size, 1);
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &t3), 0);
	tu_latch_wait(&s3);
	s = tu_stats(p);
	assert_int_equal(tu_ran(&t2), 0);
	assert_int_equal(tu_latch_count(&s2), 1);
	assert_int_equal(s.queued, 1);
	assert_int_equal(s.pool_size, 2);
	assert_int_equal(s.largest_pool_size, 2);
	assert_int_equal(s.active, 2);
	tu_latch_count_down(&release);
	tu_latch_wait(&s2);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(tu_ran(&t1), 1);
	assert_int_equal(tu_ran(&t2), 1);
	assert_int_equal(tu_ran(&t3), 1);
	tu_latch_destroy(&s1);
	tu_latch_destroy(&s2);
	tu_latch_destroy(&s3);
	tu_latch_destroy(&release);
}

/* ---- item 24: saturation = max + capacity ------------------------------- */

static void
saturate_check(size_t core, size_t max, enum tpe_queue_kind kind, size_t cap)
{
	static struct tu_saturation sat;
	static int count;
	size_t nsat = max + cap, i;
	tpe_t *p = tu_pool(core, max, kind, cap, TPE_REJECT_ABORT);
	struct tpe_stats s;

	tu_saturate(p, max, cap, &sat);
	count = 0;
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), EAGAIN);
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), EAGAIN);
	s = tu_stats(p);
	assert_int_equal(s.pool_size, max);
	assert_int_equal(s.active, max);
	assert_int_equal(s.queued, cap);
	assert_int_equal(s.submitted, nsat);
	assert_int_equal(s.rejected, 2);
	assert_int_equal(s.completed, 0);
	/* Java's taskCount (completed + active + queued) stays saturated. */
	assert_int_equal(s.completed + s.active + s.queued, nsat);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	for (i = 0; i < nsat; i++)
		assert_int_equal(tu_ran(&sat.b[i]), 1);
	assert_int_equal(count, 0);
	tu_saturation_destroy(&sat);
}

static void
test_execute_saturation(void **state)
{
	(void)state;
	saturate_check(1, 1, TPE_QUEUE_BOUNDED, 1);
	saturate_check(2, 3, TPE_QUEUE_BOUNDED, 4);
	saturate_check(3, 3, TPE_QUEUE_BOUNDED, 2);
	saturate_check(1, 4, TPE_QUEUE_HANDOFF, 0);
	saturate_check(0, 3, TPE_QUEUE_HANDOFF, 0);
}

/* ---- item 25: core 0 with an unbounded queue: exactly one worker --------- */

static void
test_execute_core_zero_unbounded_one_worker(void **state)
{
	static struct tu_saturation sat;
	tpe_t *p = tu_pool(0, 10, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct tpe_stats s;

	(void)state;
	tu_saturate(p, 1, 2, &sat);
	s = tu_stats(p);
	assert_int_equal(s.pool_size, 1);
	assert_int_equal(s.queued, 2);
	assert_int_equal(s.active, 1);
	assert_int_equal(tu_ran(&sat.b[0]), 1);
	assert_int_equal(tu_ran(&sat.b[1]), 0);
	assert_int_equal(tu_ran(&sat.b[2]), 0);
	tu_unsaturate(&sat);
	assert_true(TU_EVENTUALLY(tu_stats(p).completed == 3, EV_TIMEOUT));
	s = tu_stats(p);
	assert_int_equal(s.largest_pool_size, 1);
	assert_int_equal(s.pool_size, 1);
	assert_int_equal(tpe_destroy(p), 0);
	tu_saturation_destroy(&sat);
}

/* ---- item 26: a hand-off ("cached") pool -------------------------------- */

static void
test_execute_handoff_cached_pool(void **state)
{
	enum { N = 4 };
	static struct tu_latch started, release, last_started;
	static struct tu_blocker b[N], last;
	static int count;
	tpe_t *p = tu_pool(0, N, TPE_QUEUE_HANDOFF, 0, TPE_REJECT_ABORT);
	struct tpe_stats s;
	int i;

	(void)state;
	tu_latch_init(&started, N);
	tu_latch_init(&release, 1);
	tu_latch_init(&last_started, 1);
	for (i = 0; i < N; i++) {
		b[i] = (struct tu_blocker){ &started, &release, NULL, 0 };
		assert_int_equal(tpe_execute(p, tu_blocker_fn, &b[i]), 0);
		assert_int_equal(tu_stats(p).pool_size, (size_t)i + 1);
	}
	tu_latch_wait(&started);
	count = 0;
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), EAGAIN);
	s = tu_stats(p);
	assert_int_equal(s.pool_size, N);
	assert_int_equal(s.queued, 0);
	assert_int_equal(s.rejected, 1);
	tu_latch_count_down(&release);
	/* Every worker is idle, waiting for a hand-off. */
	assert_true(TU_EVENTUALLY((s = tu_stats(p)).completed == N &&
	    s.idle == N, EV_TIMEOUT));
	last = (struct tu_blocker){ &last_started, NULL, NULL, 0 };
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &last), 0);
	s = tu_stats(p);
	assert_int_equal(s.pool_size, N);
	assert_int_equal(s.largest_pool_size, N);
	tu_latch_wait(&last_started);
	assert_int_equal(tu_stats(p).largest_pool_size, N);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(count, 0);
	assert_int_equal(tu_ran(&last), 1);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
	tu_latch_destroy(&last_started);
}

/* ---- item 27: the same (fn, arg) 1000 times ------------------------------ */

static void
test_execute_same_task_many_times(void **state)
{
	static int count;
	tpe_t *p = tu_pool_with(&(struct tu_pool_opts){ .core = 1, .max = 30,
	    .keep_alive = 60 * TU_S, .queue = TPE_QUEUE_BOUNDED,
	    .capacity = 30 });
	int i, rc, rejected = 0;

	(void)state;
	count = 0;
	for (i = 0; i < 1000; i++) {
		while ((rc = tpe_execute(p, tu_count_fn, &count)) == EAGAIN) {
			rejected++;
			sched_yield();
		}
		assert_int_equal(rc, 0);
	}
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	assert_int_equal(tu_load(&count), 1000);
	assert_true(TU_EVENTUALLY(tu_stats(p).completed == 1000, EV_TIMEOUT));
	assert_int_equal(tu_stats(p).submitted, 1000);
	assert_int_equal(tu_stats(p).rejected, (uint64_t)rejected);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(tu_load(&count), 1000);
}

/* ---- item 28: keep-alive 0, the non-core thread exits when idle --------- */

static void
test_execute_keep_alive_zero_non_core_exits(void **state)
{
	static struct tu_saturation sat;
	tpe_t *p = tu_pool_with(&(struct tu_pool_opts){ .core = 1, .max = 2,
	    .keep_alive = TU_KEEP_ALIVE_ZERO, .queue = TPE_QUEUE_BOUNDED,
	    .capacity = 1 });
	struct tpe_stats s;

	(void)state;
	/* The first starts the core thread, the second is queued, the third
	 * finds the queue full and starts the non-core thread. */
	tu_saturate(p, 2, 1, &sat);
	s = tu_stats(p);
	assert_int_equal(s.pool_size, 2);
	assert_int_equal(s.queued, 1);
	tu_unsaturate(&sat);
	assert_true(TU_EVENTUALLY((s = tu_stats(p)).completed == 3 &&
	    s.pool_size == 1, EV_TIMEOUT));
	assert_int_equal(s.largest_pool_size, 2);
	assert_int_equal(s.queued, 0);
	assert_int_equal(tpe_destroy(p), 0);
	tu_saturation_destroy(&sat);
}

/* ---- items 57-61: statistics ------------------------------------------- */

struct stats_task {
	tpe_t *pool;
	struct tu_latch started, release;
	struct tpe_stats inside;
	int rc;
};

static void
stats_task_fn(void *arg)
{
	struct stats_task *t = arg;

	t->rc = tpe_get_stats(t->pool, &t->inside, sizeof(t->inside));
	tu_latch_count_down(&t->started);
	tu_latch_wait(&t->release);
}

static void
test_execute_stats(void **state)
{
	static struct stats_task t;
	static int count;
	tpe_t *p = tu_pool(1, 1, TPE_QUEUE_BOUNDED, 10, TPE_REJECT_ABORT);
	struct tpe_stats s;
	int i;

	(void)state;
	s = tu_stats(p);
	assert_int_equal(s.pool_size, 0);
	assert_int_equal(s.active, 0);
	assert_int_equal(s.largest_pool_size, 0);
	assert_int_equal(s.submitted, 0);
	assert_int_equal(s.completed, 0);
	assert_int_equal(s.core_size, 1);
	assert_int_equal(s.max_size, 1);

	t.pool = p;
	t.rc = -1;
	tu_latch_init(&t.started, 1);
	tu_latch_init(&t.release, 1);
	assert_int_equal(tpe_execute(p, stats_task_fn, &t), 0);
	tu_latch_wait(&t.started);
	/* Read from inside the task (items 57, 58). */
	assert_int_equal(t.rc, 0);
	assert_int_equal(t.inside.pool_size, 1);
	assert_int_equal(t.inside.active, 1);
	assert_int_equal(t.inside.idle, 0);
	assert_int_equal(t.inside.largest_pool_size, 1);
	assert_int_equal(t.inside.submitted, 1);
	assert_int_equal(t.inside.completed, 0);
	/* And from outside. */
	s = tu_stats(p);
	assert_int_equal(s.pool_size, 1);
	assert_int_equal(s.active, 1);
	assert_int_equal(s.idle, 0);
	assert_int_equal(s.largest_pool_size, 1);
	assert_int_equal(s.submitted, 1);
	assert_int_equal(s.completed, 0);
	assert_int_equal(s.queued, 0);
	/* Item 61: taskCount grows with each execute; completed stays 0. */
	count = 0;
	for (i = 1; i <= 3; i++) {
		assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
		s = tu_stats(p);
		assert_int_equal(s.submitted, (uint64_t)i + 1);
		assert_int_equal(s.queued, (size_t)i);
		assert_int_equal(s.completed, 0);
		assert_int_equal(s.completed + s.active + s.queued,
		    (uint64_t)i + 1);
	}
	tu_latch_count_down(&t.release);
	/* Item 60: completed reaches 4 eventually and never decreases. */
	assert_true(TU_EVENTUALLY(tu_stats(p).completed == 4, EV_TIMEOUT));
	assert_true(TU_EVENTUALLY((s = tu_stats(p)).active == 0 &&
	    s.idle == 1, EV_TIMEOUT));
	assert_int_equal(s.queued, 0);
	assert_int_equal(s.pool_size, 1);
	assert_int_equal(tu_load(&count), 3);
	assert_int_equal(tpe_shutdown(p), 0);
	assert_int_equal(tpe_await_termination(p, -1), 0);
	s = tu_stats(p);
	assert_int_equal(s.pool_size, 0);
	assert_int_equal(s.active, 0);
	assert_int_equal(s.idle, 0);
	assert_int_equal(s.queued, 0);
	assert_int_equal(s.completed, 4);
	assert_int_equal(s.submitted, 4);
	assert_int_equal(s.largest_pool_size, 1);
	assert_int_equal(tpe_destroy(p), 0);
	tu_latch_destroy(&t.started);
	tu_latch_destroy(&t.release);
}

/* Item 59: largest pool size, kept after termination. */
static void
test_execute_largest_pool_size(void **state)
{
	static struct tu_saturation sat;
	tpe_t *p = tu_pool(3, 3, TPE_QUEUE_BOUNDED, 10, TPE_REJECT_ABORT);
	struct tpe_stats s;

	(void)state;
	assert_int_equal(tu_stats(p).largest_pool_size, 0);
	tu_saturate(p, 3, 0, &sat);
	s = tu_stats(p);
	assert_int_equal(s.largest_pool_size, 3);
	assert_int_equal(s.active, 3);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_shutdown(p), 0);
	assert_int_equal(tpe_await_termination(p, -1), 0);
	s = tu_stats(p);
	assert_int_equal(s.largest_pool_size, 3);
	assert_int_equal(s.pool_size, 0);
	assert_int_equal(s.completed, 3);
	assert_int_equal(tpe_destroy(p), 0);
	tu_saturation_destroy(&sat);
}

static void
test_execute_get_stats_einval(void **state)
{
	struct tpe_stats s;
	tpe_t *p = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);

	(void)state;
	assert_int_equal(tpe_get_stats(NULL, &s, sizeof(s)), EINVAL);
	assert_int_equal(tpe_get_stats(p, NULL, sizeof(s)), EINVAL);
	assert_int_equal(tpe_get_stats(NULL, NULL, sizeof(s)), EINVAL);
	assert_int_equal(tpe_destroy(p), 0);
}

/* ---- thread names ------------------------------------------------------- */

struct named {
	struct tu_latch *started, *release;
	char name[32];
};

static void
named_fn(void *arg)
{
	struct named *n = arg;

	memset(n->name, 0, sizeof(n->name));
	pthread_getname_np(pthread_self(), n->name, sizeof(n->name));
	tu_latch_count_down(n->started);
	tu_latch_wait(n->release);
}

static void
test_execute_thread_names(void **state)
{
	static struct tu_latch started, release;
	static struct named n[3];
	tpe_t *p = tu_pool_with(&(struct tu_pool_opts){ .core = 3, .max = 3,
	    .thread_name = "wk" });
	int i;

	(void)state;
	tu_latch_init(&started, 3);
	tu_latch_init(&release, 1);
	for (i = 0; i < 3; i++) {
		n[i].started = &started;
		n[i].release = &release;
		assert_int_equal(tpe_execute(p, named_fn, &n[i]), 0);
	}
	tu_latch_wait(&started);
	/* Each task started its own core thread, in order. */
	tu_assert_thread_name(n[0].name, "wk-1");
	tu_assert_thread_name(n[1].name, "wk-2");
	tu_assert_thread_name(n[2].name, "wk-3");
	tu_latch_count_down(&release);
	assert_int_equal(tpe_destroy(p), 0);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
}

/* ---- task hooks --------------------------------------------------------- */

/* What one task hook saw of its call. */
struct hook_seen {
	pthread_t thr;
	int n;                   /* calls for this task, atomic */
	int val_at;              /* the task's val at the call */
	tpe_fn fn;
	tpe_t *pool;
	void *ctx;
};

struct hooked {
	int val;                 /* the task increments it */
	pthread_t task_thr;
	struct hook_seen before, after;
};

static void
hooked_fn(void *arg)
{
	struct hooked *h = arg;

	h->task_thr = pthread_self();
	__atomic_add_fetch(&h->val, 1, __ATOMIC_SEQ_CST);
}

static void *
hooked_call(void *arg)
{
	hooked_fn(arg);
	return arg;
}

static void
hook_saw(struct hook_seen *w, struct hooked *h, tpe_t *pool, tpe_fn fn,
    void *ctx)
{
	w->thr = pthread_self();
	w->fn = fn;
	w->pool = pool;
	w->ctx = ctx;
	w->val_at = __atomic_load_n(&h->val, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&w->n, 1, __ATOMIC_SEQ_CST);
}

static void
before_hook(tpe_t *pool, tpe_fn fn, void *arg, void *ctx)
{
	hook_saw(&((struct hooked *)arg)->before, arg, pool, fn, ctx);
}

static void
after_hook(tpe_t *pool, tpe_fn fn, void *arg, void *ctx)
{
	hook_saw(&((struct hooked *)arg)->after, arg, pool, fn, ctx);
}

static void
test_execute_task_hooks(void **state)
{
	enum { N = 20, NS = 3 };
	static struct hooked h[N + NS];
	static int ctx_obj;
	tpe_future_t *f[NS];
	tpe_t *p;
	void *res;
	int i;

	(void)state;
	memset(h, 0, sizeof(h));
	p = tu_pool_with(&(struct tu_pool_opts){ .core = 2, .max = 2,
	    .before = before_hook, .after = after_hook,
	    .task_hooks_ctx = &ctx_obj });
	for (i = 0; i < N; i++)
		assert_int_equal(tpe_execute(p, hooked_fn, &h[i]), 0);
	for (i = 0; i < NS; i++)
		assert_int_equal(tpe_submit(p, hooked_call, &h[N + i], &f[i]), 0);
	for (i = 0; i < NS; i++) {
		res = NULL;
		assert_int_equal(tpe_future_get(f[i], -1, &res), 0);
		assert_ptr_equal(res, &h[N + i]);
		tpe_future_release(f[i]);
	}
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	assert_true(TU_EVENTUALLY(tu_stats(p).completed == N + NS, EV_TIMEOUT));
	assert_int_equal(tpe_destroy(p), 0);
	for (i = 0; i < N + NS; i++) {
		assert_int_equal(h[i].val, 1);
		assert_int_equal(h[i].before.n, 1);
		assert_int_equal(h[i].after.n, 1);
		assert_int_equal(h[i].before.val_at, 0);
		assert_int_equal(h[i].after.val_at, 1);
		assert_true(pthread_equal(h[i].before.thr, h[i].task_thr));
		assert_true(pthread_equal(h[i].after.thr, h[i].task_thr));
		assert_false(pthread_equal(h[i].task_thr, pthread_self()));
		assert_ptr_equal(h[i].before.pool, p);
		assert_ptr_equal(h[i].after.pool, p);
		assert_ptr_equal(h[i].before.ctx, &ctx_obj);
		assert_ptr_equal(h[i].after.ctx, &ctx_obj);
		if (i < N) {
			assert_true(h[i].before.fn == hooked_fn);
			assert_true(h[i].after.fn == hooked_fn);
		} else {
			/* tpe_submit tasks: fn NULL, arg the callable's. */
			assert_true(h[i].before.fn == NULL);
			assert_true(h[i].after.fn == NULL);
		}
	}
}

/* ---- thread hooks ------------------------------------------------------- */

static __thread int tl_on_start_ran;
static int n_on_start, n_on_exit, n_exit_after_start;
static tpe_t *thread_hook_pool[2];
static void *thread_hook_ctx[2];

static void
on_start_hook(tpe_t *pool, void *ctx)
{
	tl_on_start_ran = 1;
	__atomic_store_n(&thread_hook_pool[0], pool, __ATOMIC_SEQ_CST);
	__atomic_store_n(&thread_hook_ctx[0], ctx, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&n_on_start, 1, __ATOMIC_SEQ_CST);
}

static void
on_exit_hook(tpe_t *pool, void *ctx)
{
	__atomic_store_n(&thread_hook_pool[1], pool, __ATOMIC_SEQ_CST);
	__atomic_store_n(&thread_hook_ctx[1], ctx, __ATOMIC_SEQ_CST);
	if (tl_on_start_ran)
		__atomic_add_fetch(&n_exit_after_start, 1, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&n_on_exit, 1, __ATOMIC_SEQ_CST);
}

struct tl_probe {
	struct tu_latch *started, *release;
	int saw_on_start;
};

static void
tl_probe_fn(void *arg)
{
	struct tl_probe *t = arg;

	t->saw_on_start = tl_on_start_ran;
	tu_latch_count_down(t->started);
	tu_latch_wait(t->release);
}

static void
test_execute_thread_hooks(void **state)
{
	static struct tu_latch started, release;
	static struct tl_probe t[3];
	static int ctx_obj, count;
	tpe_t *p;
	int i;

	(void)state;
	n_on_start = n_on_exit = n_exit_after_start = 0;
	p = tu_pool_with(&(struct tu_pool_opts){ .core = 3, .max = 3,
	    .on_start = on_start_hook, .on_exit = on_exit_hook,
	    .thread_hooks_ctx = &ctx_obj });
	tu_latch_init(&started, 3);
	tu_latch_init(&release, 1);
	for (i = 0; i < 3; i++) {
		t[i] = (struct tl_probe){ &started, &release, 0 };
		assert_int_equal(tpe_execute(p, tl_probe_fn, &t[i]), 0);
	}
	tu_latch_wait(&started);
	/* on_start ran first on each of the 3 threads. */
	assert_int_equal(tu_load(&n_on_start), 3);
	assert_int_equal(tu_load(&n_on_exit), 0);
	for (i = 0; i < 3; i++)
		assert_int_equal(t[i].saw_on_start, 1);
	tu_latch_count_down(&release);
	/* More tasks reuse the same threads: no new on_start. */
	count = 0;
	for (i = 0; i < 10; i++)
		assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	assert_int_equal(tu_load(&count), 10);
	assert_int_equal(tu_stats(p).largest_pool_size, 3);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(tu_load(&n_on_start), 3);
	assert_int_equal(tu_load(&n_on_exit), 3);
	assert_int_equal(tu_load(&n_exit_after_start), 3);
	assert_ptr_equal(thread_hook_pool[0], p);
	assert_ptr_equal(thread_hook_pool[1], p);
	assert_ptr_equal(thread_hook_ctx[0], &ctx_obj);
	assert_ptr_equal(thread_hook_ctx[1], &ctx_obj);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
}

/* ---- item 63: tpe_remove takes back a queued task, not a running one --- */

static int n_discarded;
static tpe_fn discarded_fn[16];
static void *discarded_arg[16];
static void *discarded_ctx;

static void
discard_cb(tpe_fn fn, void *arg, void *ctx)
{
	int i = __atomic_fetch_add(&n_discarded, 1, __ATOMIC_SEQ_CST);

	if (i < 16) {
		discarded_fn[i] = fn;
		discarded_arg[i] = arg;
	}
	__atomic_store_n(&discarded_ctx, ctx, __ATOMIC_SEQ_CST);
}

static void
test_execute_remove(void **state)
{
	static struct tu_saturation sat;
	static int count, other;
	struct tu_blocker *b = sat.b;
	tpe_t *p = tu_pool_with(&(struct tu_pool_opts){ .core = 1, .max = 1,
	    .queue = TPE_QUEUE_BOUNDED, .capacity = 10, .discard = discard_cb });

	(void)state;
	n_discarded = 0;
	tu_saturate(p, 1, 5, &sat);
	assert_int_equal(tu_stats(p).queued, 5);
	/* Running: not removable. */
	assert_int_equal(tpe_remove(p, tu_blocker_fn, &b[0]), ENOENT);
	assert_int_equal(tpe_remove(p, tu_blocker_fn, &b[4]), 0);
	assert_int_equal(tpe_remove(p, tu_blocker_fn, &b[4]), ENOENT);
	assert_int_equal(tu_stats(p).queued, 4);
	assert_int_equal(tpe_remove(p, tu_blocker_fn, &b[3]), 0);
	assert_int_equal(tu_stats(p).queued, 3);
	/* Exact (fn, arg) match only; never submitted => ENOENT. */
	assert_int_equal(tpe_remove(p, tu_count_fn, &b[5]), ENOENT);
	assert_int_equal(tpe_remove(p, tu_blocker_fn, &other), ENOENT);
	assert_int_equal(tpe_remove(p, tu_count_fn, &other), ENOENT);
	assert_int_equal(tpe_remove(NULL, tu_blocker_fn, &b[5]), EINVAL);
	assert_int_equal(tpe_remove(p, NULL, &b[5]), EINVAL);
	assert_int_equal(tu_stats(p).queued, 3);
	/* Two identical tasks: remove takes one of them. */
	count = 0;
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	assert_int_equal(tpe_remove(p, tu_count_fn, &count), 0);
	assert_int_equal(tu_stats(p).queued, 4);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(tu_ran(&b[0]), 1);
	assert_int_equal(tu_ran(&b[1]), 1);
	assert_int_equal(tu_ran(&b[2]), 1);
	assert_int_equal(tu_ran(&b[3]), 0);
	assert_int_equal(tu_ran(&b[4]), 0);
	assert_int_equal(tu_ran(&b[5]), 1);
	assert_int_equal(count, 1);
	/* remove hands the argument back to the caller: no callback. */
	assert_int_equal(n_discarded, 0);
	tu_saturation_destroy(&sat);
}

/* A done task is not removable either. */
static void
test_execute_remove_done_task(void **state)
{
	static int count;
	tpe_t *p = tu_pool(1, 1, TPE_QUEUE_BOUNDED, 10, TPE_REJECT_ABORT);

	(void)state;
	count = 0;
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	assert_int_equal(tpe_remove(p, tu_count_fn, &count), ENOENT);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(count, 1);
}

/* ---- item 62: cancelled futures stay queued until tpe_purge ------------- */

static void
test_execute_purge(void **state)
{
	static struct tu_saturation sat;
	static struct tu_blocker b[5];
	static int ctx_obj;
	tpe_future_t *f[5] = { NULL };
	tpe_t *p = tu_pool_with(&(struct tu_pool_opts){ .core = 1, .max = 1,
	    .queue = TPE_QUEUE_BOUNDED, .capacity = 10, .discard = discard_cb,
	    .discard_ctx = &ctx_obj });
	struct tpe_stats s;
	size_t purged;
	void *res;
	int i;

	(void)state;
	n_discarded = 0;
	discarded_ctx = NULL;
	tu_saturate(p, 1, 0, &sat);
	/* b[1..4] queued as futures, behind the same gate. */
	for (i = 1; i < 5; i++) {
		b[i] = (struct tu_blocker){ NULL, &sat.release, NULL, 0 };
		assert_int_equal(tpe_submit(p, tu_blocker_call, &b[i], &f[i]), 0);
	}
	s = tu_stats(p);
	assert_int_equal(s.queued, 4);
	assert_int_equal(s.active, 1);
	assert_int_equal(s.completed, 0);
	/* Nothing cancelled: nothing to purge. */
	purged = 99;
	assert_int_equal(tpe_purge(p, &purged), 0);
	assert_int_equal(purged, 0);
	assert_int_equal(tu_stats(p).queued, 4);
	assert_int_equal(tpe_future_cancel(f[4]), 0);
	assert_int_equal(tpe_future_cancel(f[3]), 0);
	/* Cancelled tasks stay queued until purged. */
	assert_int_equal(tu_stats(p).queued, 4);
	assert_int_equal(n_discarded, 0);
	purged = 99;
	assert_int_equal(tpe_purge(p, &purged), 0);
	assert_int_equal(purged, 2);
	s = tu_stats(p);
	assert_int_equal(s.queued, 2);
	assert_int_equal(s.completed + s.active + s.queued, 3);
	/* Each went to the discard callback once, with fn NULL. */
	assert_int_equal(n_discarded, 2);
	assert_true(discarded_fn[0] == NULL);
	assert_true(discarded_fn[1] == NULL);
	assert_true((discarded_arg[0] == &b[3] && discarded_arg[1] == &b[4]) ||
	    (discarded_arg[0] == &b[4] && discarded_arg[1] == &b[3]));
	assert_ptr_equal(discarded_ctx, &ctx_obj);
	/* Again: unchanged. */
	purged = 99;
	assert_int_equal(tpe_purge(p, &purged), 0);
	assert_int_equal(purged, 0);
	assert_int_equal(tu_stats(p).queued, 2);
	assert_int_equal(tpe_purge(p, NULL), 0);
	assert_int_equal(tpe_purge(NULL, &purged), EINVAL);
	assert_int_equal(n_discarded, 2);

	tu_unsaturate(&sat);
	for (i = 1; i <= 2; i++) {
		res = NULL;
		assert_int_equal(tpe_future_get(f[i], -1, &res), 0);
		assert_ptr_equal(res, &b[i]);
	}
	assert_int_equal(tpe_future_get(f[3], -1, &res), ECANCELED);
	assert_int_equal(tpe_future_get(f[4], 0, &res), ECANCELED);
	assert_int_equal(tpe_destroy(p), 0);
	for (i = 1; i < 5; i++)
		tpe_future_release(f[i]);
	assert_int_equal(tu_ran(&sat.b[0]), 1);
	assert_int_equal(tu_ran(&b[1]), 1);
	assert_int_equal(tu_ran(&b[2]), 1);
	assert_int_equal(tu_ran(&b[3]), 0);
	assert_int_equal(tu_ran(&b[4]), 0);
	assert_int_equal(n_discarded, 2);
	tu_saturation_destroy(&sat);
}

/* ---- tpe_wait_idle ------------------------------------------------------ */

static void
test_execute_wait_idle(void **state)
{
	static struct tu_latch started, release, done;
	static struct tu_blocker b;
	static int count;
	tpe_t *p = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	int64_t t0;

	(void)state;
	assert_int_equal(tpe_wait_idle(NULL, 0), EINVAL);
	assert_int_equal(tpe_wait_idle(NULL, -1), EINVAL);
	/* A fresh pool is idle. */
	assert_int_equal(tpe_wait_idle(p, 0), 0);
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	tu_latch_init(&started, 1);
	tu_latch_init(&release, 1);
	tu_latch_init(&done, 1);
	b = (struct tu_blocker){ &started, &release, &done, 0 };
	count = 0;
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &b), 0);
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	tu_latch_wait(&started);
	assert_int_equal(tpe_wait_idle(p, 0), ETIMEDOUT);
	t0 = tu_now_ns();
	assert_int_equal(tpe_wait_idle(p, 20 * TU_MS), ETIMEDOUT);
	assert_true(tu_now_ns() - t0 >= 20 * TU_MS);
	assert_int_equal(tu_load(&count), 0);
	tu_latch_count_down(&release);
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	/* Queue empty and nothing running: every task's effects are visible. */
	assert_int_equal(tu_latch_count(&done), 0);
	assert_int_equal(tu_load(&count), 1);
	assert_int_equal(tu_stats(p).queued, 0);
	assert_int_equal(tpe_wait_idle(p, 0), 0);
	/* The pool stays up. */
	assert_false(tpe_is_shutdown(p));
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	assert_int_equal(tu_load(&count), 2);
	assert_int_equal(tpe_destroy(p), 0);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
	tu_latch_destroy(&done);
}

struct self_wait {
	tpe_t *pool;
	int rc_forever, rc_timed;
	struct tu_latch done;
};

static void
self_wait_fn(void *arg)
{
	struct self_wait *w = arg;

	w->rc_forever = tpe_wait_idle(w->pool, -1);
	w->rc_timed = tpe_wait_idle(w->pool, 10 * TU_MS);
	tu_latch_count_down(&w->done);
}

static void
test_execute_wait_idle_edeadlk(void **state)
{
	static struct self_wait w;
	tpe_t *p = tu_pool(2, 2, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);

	(void)state;
	w.pool = p;
	w.rc_forever = w.rc_timed = -1;
	tu_latch_init(&w.done, 1);
	assert_int_equal(tpe_execute(p, self_wait_fn, &w), 0);
	tu_latch_wait(&w.done);
	assert_int_equal(w.rc_forever, EDEADLK);
	assert_int_equal(w.rc_timed, EDEADLK);
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	assert_int_equal(tpe_destroy(p), 0);
	tu_latch_destroy(&w.done);
}

/* ---- tpe_pause / tpe_resume --------------------------------------------- */

static void
test_execute_pause_resume(void **state)
{
	static int count;
	tpe_t *p = tu_pool(2, 2, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct tpe_stats s;
	int i;

	(void)state;
	count = 0;
	/* One idle worker, waiting for work. */
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	assert_true(TU_EVENTUALLY((s = tu_stats(p)).completed == 1 &&
	    s.idle == 1, EV_TIMEOUT));
	assert_int_equal(tpe_pause(p), 0);
	assert_int_equal(tpe_pause(p), 0);
	for (i = 0; i < 5; i++)
		assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	s = tu_stats(p);
	assert_int_equal(s.queued, 5);
	assert_int_equal(s.submitted, 6);
	/* The queue stays non-empty for the whole timed wait. */
	assert_int_equal(tpe_wait_idle(p, 50 * TU_MS), ETIMEDOUT);
	s = tu_stats(p);
	assert_int_equal(s.queued, 5);
	assert_int_equal(s.completed, 1);
	assert_int_equal(s.active, 0);
	assert_int_equal(tu_load(&count), 1);
	assert_int_equal(tpe_resume(p), 0);
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	assert_int_equal(tu_load(&count), 6);
	assert_true(TU_EVENTUALLY(tu_stats(p).completed == 6, EV_TIMEOUT));
	assert_int_equal(tu_stats(p).queued, 0);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(tu_load(&count), 6);
}

/* Paused fresh pool, bounded queue: the queue takes one, the next is
 * rejected (no thread starts while paused); resume runs the queued one. */
static void
test_execute_pause_rejects_when_queue_full(void **state)
{
	static int count, other;
	tpe_t *p = tu_pool(1, 2, TPE_QUEUE_BOUNDED, 1, TPE_REJECT_ABORT);
	struct tpe_stats s;

	(void)state;
	count = other = 0;
	assert_int_equal(tpe_pause(p), 0);
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	assert_int_equal(tpe_execute(p, tu_count_fn, &other), EAGAIN);
	s = tu_stats(p);
	assert_int_equal(s.queued, 1);
	assert_int_equal(s.rejected, 1);
	assert_int_equal(s.submitted, 1);
	assert_int_equal(tpe_wait_idle(p, 20 * TU_MS), ETIMEDOUT);
	assert_int_equal(tu_load(&count), 0);
	assert_int_equal(tpe_resume(p), 0);
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	assert_int_equal(tu_load(&count), 1);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(other, 0);
}

/* Running tasks finish while paused; queued ones wait for resume. */
static void
test_execute_pause_running_task_finishes(void **state)
{
	static struct tu_latch started, release, done;
	static struct tu_blocker b;
	static int count;
	tpe_t *p = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);

	(void)state;
	tu_latch_init(&started, 1);
	tu_latch_init(&release, 1);
	tu_latch_init(&done, 1);
	b = (struct tu_blocker){ &started, &release, &done, 0 };
	count = 0;
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &b), 0);
	tu_latch_wait(&started);
	assert_int_equal(tpe_pause(p), 0);
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	tu_latch_count_down(&release);
	tu_latch_wait(&done);
	assert_int_equal(tpe_wait_idle(p, 50 * TU_MS), ETIMEDOUT);
	assert_int_equal(tu_load(&count), 0);
	assert_int_equal(tu_stats(p).queued, 1);
	assert_int_equal(tpe_resume(p), 0);
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	assert_int_equal(tu_load(&count), 1);
	/* Pause again, queue one more and destroy: shutdown resumes it and
	 * the queue drains. */
	assert_int_equal(tpe_pause(p), 0);
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(tu_load(&count), 2);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
	tu_latch_destroy(&done);
}

static void
test_execute_pause_errors(void **state)
{
	tpe_t *p = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);

	(void)state;
	assert_int_equal(tpe_pause(NULL), EINVAL);
	assert_int_equal(tpe_resume(NULL), EINVAL);
	assert_int_equal(tpe_shutdown(p), 0);
	assert_int_equal(tpe_pause(p), ECANCELED);
	assert_int_equal(tpe_resume(p), ECANCELED);
	assert_int_equal(tpe_await_termination(p, -1), 0);
	assert_int_equal(tpe_pause(p), ECANCELED);
	assert_int_equal(tpe_resume(p), ECANCELED);
	assert_int_equal(tpe_destroy(p), 0);

	/* Paused, then shut down: resume reports ECANCELED. */
	p = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	assert_int_equal(tpe_pause(p), 0);
	assert_int_equal(tpe_shutdown(p), 0);
	assert_int_equal(tpe_resume(p), ECANCELED);
	assert_int_equal(tpe_destroy(p), 0);
}

/* Worker threads block every asynchronous signal, not the synchronous ones. */
struct sigmask_probe {
	sigset_t mask;
	struct tu_latch done;
};

static void
record_sigmask(void *arg)
{
	struct sigmask_probe *sp = arg;

	pthread_sigmask(SIG_BLOCK, NULL, &sp->mask);
	tu_latch_count_down(&sp->done);
}

static void
test_execute_workers_block_async_signals(void **state)
{
	static const int async_sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGUSR1,
	    SIGUSR2, SIGCHLD, SIGPIPE, SIGALRM };
	static const int sync_sigs[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL };
	struct sigmask_probe sp;
	sigset_t caller, empty;
	size_t i;

	(void)state;
	/* The caller's own mask is untouched by thread creation. */
	sigemptyset(&empty);
	pthread_sigmask(SIG_SETMASK, &empty, NULL);
	tu_latch_init(&sp.done, 1);
	tpe_t *p = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);

	assert_int_equal(tpe_execute(p, record_sigmask, &sp), 0);
	tu_latch_wait(&sp.done);
	for (i = 0; i < sizeof(async_sigs) / sizeof(async_sigs[0]); i++)
		assert_int_equal(sigismember(&sp.mask, async_sigs[i]), 1);
	for (i = 0; i < sizeof(sync_sigs) / sizeof(sync_sigs[0]); i++)
		assert_int_equal(sigismember(&sp.mask, sync_sigs[i]), 0);
	pthread_sigmask(SIG_BLOCK, NULL, &caller);
	assert_int_equal(sigismember(&caller, SIGINT), 0);
	assert_int_equal(tpe_destroy(p), 0);
	tu_latch_destroy(&sp.done);
}

/*
 * Every signal the library's threads must block, tested one by one: all
 * but the synchronous ones (they reach the thread that caused them),
 * SIGKILL and SIGSTOP (which cannot be blocked) and the ones the C
 * library keeps for itself (between 32 and SIGRTMIN).
 */
static bool
is_async_signal(int sig)
{
	switch (sig) {
	case SIGSEGV: case SIGBUS: case SIGFPE: case SIGILL: case SIGTRAP:
	case SIGSYS: case SIGABRT: case SIGKILL: case SIGSTOP:
		return false;
	default:
		return sig < 32 || (sig >= SIGRTMIN && sig <= SIGRTMAX);
	}
}

static void
assert_blocks_every_async_signal(const sigset_t *mask)
{
	int sig;

	for (sig = 1; sig <= SIGRTMAX; sig++) {
		if (is_async_signal(sig) && sigismember(mask, sig) != 1)
			fail_msg("signal %d (%s) is not blocked", sig,
			    strsignal(sig));
	}
	assert_int_equal(sigismember(mask, SIGSEGV), 0);
}

/* The same for each kind of thread a pool starts: a worker (started by
 * tpe_execute) and a reserved thread (asked for by tpe_try_execute's
 * misses, then handed the probe). */
static void
test_execute_pool_threads_block_every_async_signal(void **state)
{
	struct sigmask_probe worker, reserved;
	sigset_t empty;
	tpe_t *p;

	(void)state;
	sigemptyset(&empty);
	pthread_sigmask(SIG_SETMASK, &empty, NULL);
	tu_latch_init(&worker.done, 1);
	tu_latch_init(&reserved.done, 1);
	p = tu_pool_reserving(&(struct tu_pool_opts){ .core = 1, .max = 3 }, 1);
	assert_int_equal(tpe_execute(p, record_sigmask, &worker), 0);
	tu_latch_wait(&worker.done);
	assert_blocks_every_async_signal(&worker.mask);
	assert_true(TU_EVENTUALLY(tpe_try_execute(p, record_sigmask,
	    &reserved) == 0, TU_WAIT_BOUND));
	tu_latch_wait(&reserved.done);
	assert_blocks_every_async_signal(&reserved.mask);
	assert_int_equal(tpe_destroy(p), 0);
	tu_latch_destroy(&worker.done);
	tu_latch_destroy(&reserved.done);
}

/* ---- the lock-free offer (unbounded queue, queue-first) ---------------- */

/* Counts the tasks that ran; the submitter waits for a given count. */
struct ran_count {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	long n; /* under lock */
};

static void
ran_count_fn(void *arg)
{
	struct ran_count *r = arg;

	pthread_mutex_lock(&r->lock);
	r->n++;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

static void
ran_count_wait(struct ran_count *r, long n)
{
	pthread_mutex_lock(&r->lock);
	while (r->n < n)
		pthread_cond_wait(&r->cond, &r->lock);
	pthread_mutex_unlock(&r->lock);
}

/*
 * One task at a time to a pool whose only worker times out after 1 us:
 * every submission races the worker's exit (may_leave_locked against the
 * lock-free offer's re-check of wc). A task stranded in the queue with no
 * worker would hang the wait (and the test's time bound fails it).
 */
static void
keep_alive_race(size_t core)
{
	enum { ROUNDS = 20000 };
	struct ran_count r = { PTHREAD_MUTEX_INITIALIZER,
	    PTHREAD_COND_INITIALIZER, 0 };
	tpe_t *p = tu_pool_with(&(struct tu_pool_opts){ .core = core, .max = 1,
	    .keep_alive = 1000 });
	struct tpe_stats st;
	long i;

	if (core > 0)
		assert_int_equal(tpe_set_allow_core_timeout(p, true), 0);
	for (i = 0; i < ROUNDS; i++) {
		assert_int_equal(tpe_execute(p, ran_count_fn, &r), 0);
		ran_count_wait(&r, i + 1);
	}
	st = tu_stats(p);
	assert_int_equal(st.submitted, ROUNDS);
	assert_true(st.pool_size <= 1);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(r.n, ROUNDS);
}

static void
test_execute_lockfree_offer_races_keep_alive(void **state)
{
	(void)state;
	keep_alive_race(1); /* core 1, allow-core-timeout */
	keep_alive_race(0); /* core 0: the queue's last worker */
}

/*
 * Two submitters, each one task at a time, to an idle pool of two
 * workers that spin briefly and then sleep: every submission races a
 * worker going to sleep (the sleepers Dekker pair). A lost wake-up hangs.
 */
enum { WAKER_ROUNDS = 20000 };

struct waker_arg {
	tpe_t *pool;
	pthread_barrier_t *start;
	struct ran_count r;
};

static void *
waker_main(void *arg)
{
	struct waker_arg *w = arg;
	long i;

	pthread_barrier_wait(w->start);
	for (i = 0; i < WAKER_ROUNDS; i++) {
		if (tpe_execute(w->pool, ran_count_fn, &w->r) != 0)
			return (void *)1;
		ran_count_wait(&w->r, i + 1);
		if (i % 16 == 0)
			tu_sleep_ns(30 * 1000); /* let the workers fall asleep */
	}
	return NULL;
}

static void
test_execute_lockfree_offer_wakes_sleepers(void **state)
{
	struct waker_arg w[2];
	pthread_barrier_t start;
	pthread_t th[2];
	void *res;
	tpe_t *p = tu_pool(2, 2, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	int i;

	(void)state;
	assert_int_equal(tpe_prestart_core_threads(p, NULL), 0);
	pthread_barrier_init(&start, NULL, 2);
	for (i = 0; i < 2; i++) {
		w[i].pool = p;
		w[i].start = &start;
		pthread_mutex_init(&w[i].r.lock, NULL);
		pthread_cond_init(&w[i].r.cond, NULL);
		w[i].r.n = 0;
		assert_int_equal(pthread_create(&th[i], NULL, waker_main, &w[i]),
		    0);
	}
	for (i = 0; i < 2; i++) {
		assert_int_equal(pthread_join(th[i], &res), 0);
		assert_null(res);
		assert_int_equal(w[i].r.n, WAKER_ROUNDS);
	}
	assert_int_equal(tu_stats(p).submitted, 2 * WAKER_ROUNDS);
	assert_int_equal(tpe_destroy(p), 0);
	pthread_barrier_destroy(&start);
	for (i = 0; i < 2; i++) {
		pthread_mutex_destroy(&w[i].r.lock);
		pthread_cond_destroy(&w[i].r.cond);
	}
}

/*
 * Tasks offered without the lock keep Java's order: a single worker runs
 * them FIFO, and a blocked worker's queue shows them in the statistics,
 * to tpe_remove and to tpe_shutdown_now, in submission order.
 */
static int order_log[8];
static int order_n; /* atomic */

static void
order_fn(void *arg)
{
	int i = __atomic_fetch_add(&order_n, 1, __ATOMIC_SEQ_CST);

	order_log[i] = (int)(intptr_t)arg;
}

static int handed[8];
static int nhanded;

static void
handed_cb(tpe_fn fn, void *arg, void *ctx)
{
	(void)fn;
	(void)ctx;
	handed[nhanded++] = (int)(intptr_t)arg;
}

static void
test_execute_lockfree_offer_keeps_order(void **state)
{
	struct tu_saturation sat;
	tpe_t *p = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	intptr_t i;

	(void)state;
	tu_saturate(p, 1, 0, &sat);
	for (i = 0; i < 6; i++)
		assert_int_equal(tpe_execute(p, order_fn, (void *)i), 0);
	assert_int_equal(tu_stats(p).queued, 6);
	assert_int_equal(tpe_remove(p, order_fn, (void *)2), 0);
	assert_int_equal(tpe_remove(p, order_fn, (void *)2), ENOENT);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	assert_int_equal(tu_load(&order_n), 5);
	assert_int_equal(order_log[0], 0);
	assert_int_equal(order_log[1], 1);
	assert_int_equal(order_log[2], 3);
	assert_int_equal(order_log[3], 4);
	assert_int_equal(order_log[4], 5);

	/* Queued behind a blocked worker again, then handed back in order. */
	tu_saturation_destroy(&sat);
	tu_saturate(p, 1, 0, &sat);
	for (i = 0; i < 4; i++)
		assert_int_equal(tpe_execute(p, order_fn, (void *)i), 0);
	nhanded = 0;
	assert_int_equal(tpe_shutdown_now(p, handed_cb, NULL), 0);
	assert_int_equal(nhanded, 4);
	for (i = 0; i < 4; i++)
		assert_int_equal(handed[i], (int)i);
	assert_int_equal(tpe_execute(p, order_fn, (void *)7), ECANCELED);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(tu_load(&order_n), 5);
	tu_saturation_destroy(&sat);
}

/*
 * A burst of tasks pushed without the lock onto the queue of a pool whose
 * workers all sleep: only the first push wakes a sleeper (the later ones
 * ride on its wake-up), and each worker that takes a task wakes the next
 * while tasks remain that no awake worker will take (the cascade). So the
 * burst runs on as many workers as are idle. The state is built with the
 * engine's own steps: the pushes (tpe__queue_push_lockfree) and the one
 * wake-up the first push's submitter sends under the lock.
 */
static bool
all_asleep(tpe_t *p, size_t n)
{
	struct tpe__locked *le = (struct tpe__locked *)p->engine;
	bool asleep;

	tpe__mutex_lock(&p->lock);
	asleep = le->sleepers == n;
	tpe__mutex_unlock(&p->lock);
	return asleep;
}

static void
test_execute_woken_worker_wakes_next(void **state)
{
	enum { N = 3 };
	tpe_t *p = tu_pool(N, N, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct tpe__locked *le = (struct tpe__locked *)p->engine;
	struct tu_latch started, gate;
	struct tu_blocker b[N];
	struct tpe__task *t;
	char token = 0;
	int i;

	(void)state;
	tu_latch_init(&started, N);
	tu_latch_init(&gate, 1);
	assert_int_equal(tpe_prestart_core_threads(p, NULL), 0);
	assert_true(TU_EVENTUALLY(all_asleep(p, N), EV_TIMEOUT));
	for (i = 0; i < N; i++) {
		b[i] = (struct tu_blocker){ &started, &gate, NULL, 0 };
		t = tpe__task_new(&p->tasks, tu_blocker_fn, &b[i], NULL,
		    &token);
		assert_non_null(t);
		tpe__pool_count_submitted(p, 1);
		assert_true(tpe__queue_push_lockfree(le->q, t) == (i == 0));
	}
	tpe__mutex_lock(&p->lock);
	tpe__cond_signal(&le->work_cond);
	tpe__mutex_unlock(&p->lock);
	/* Each blocker holds its worker: all N run at once. */
	assert_true(tu_latch_wait_for(&started, EV_TIMEOUT));
	assert_int_equal(tu_stats(p).active, N);
	tu_latch_count_down(&gate);
	assert_int_equal(tpe_destroy(p), 0);
	for (i = 0; i < N; i++)
		assert_int_equal(tu_ran(&b[i]), 1);
	tu_latch_destroy(&started);
	tu_latch_destroy(&gate);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_execute_null_fn),
		cmocka_unit_test(test_execute_runs_on_pool_thread),
		cmocka_unit_test(test_execute_core_thread_even_if_idle),
		cmocka_unit_test(test_execute_queues_at_core),
		cmocka_unit_test(test_execute_non_core_runs_new_task),
		cmocka_unit_test(test_execute_saturation),
		cmocka_unit_test(test_execute_core_zero_unbounded_one_worker),
		cmocka_unit_test(test_execute_handoff_cached_pool),
		cmocka_unit_test(test_execute_same_task_many_times),
		cmocka_unit_test(test_execute_keep_alive_zero_non_core_exits),
		cmocka_unit_test(test_execute_stats),
		cmocka_unit_test(test_execute_largest_pool_size),
		cmocka_unit_test(test_execute_get_stats_einval),
		cmocka_unit_test(test_execute_thread_names),
		cmocka_unit_test(test_execute_task_hooks),
		cmocka_unit_test(test_execute_thread_hooks),
		cmocka_unit_test(test_execute_remove),
		cmocka_unit_test(test_execute_remove_done_task),
		cmocka_unit_test(test_execute_purge),
		cmocka_unit_test(test_execute_wait_idle),
		cmocka_unit_test(test_execute_wait_idle_edeadlk),
		cmocka_unit_test(test_execute_pause_resume),
		cmocka_unit_test(test_execute_pause_rejects_when_queue_full),
		cmocka_unit_test(test_execute_pause_running_task_finishes),
		cmocka_unit_test(test_execute_pause_errors),
		cmocka_unit_test(test_execute_workers_block_async_signals),
		cmocka_unit_test(test_execute_pool_threads_block_every_async_signal),
		cmocka_unit_test(test_execute_lockfree_offer_races_keep_alive),
		cmocka_unit_test(test_execute_lockfree_offer_wakes_sleepers),
		cmocka_unit_test(test_execute_lockfree_offer_keeps_order),
		cmocka_unit_test(test_execute_woken_worker_wakes_next),
	};

	tu_time_bound(0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
