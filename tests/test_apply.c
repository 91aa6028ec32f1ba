/* SPDX-License-Identifier: MIT */
/*
 * test_apply.c - the parallel loop (tpe_parallel_for(3)): every index once
 * on every queue kind under both policies; helpers take part; the caller
 * does it all when the pool refuses helpers, from a worker of a pool of
 * one, and never waits for a helper that has not started; a helper handed
 * back reaches no user callback.
 *
 * Tasks never call cmocka's asserts: they record, the test thread asserts.
 */
#define TU_FAULT_INJECTION /* this binary links the --wrap wrappers */
#include "helpers.h"

struct conf {
	const char *name;
	enum tpe_queue_kind kind;
	size_t capacity;
	enum tpe_policy policy;
	size_t core, max;
};

static const struct conf confs[] = {
	{ "unbounded", TPE_QUEUE_UNBOUNDED, 0, TPE_POLICY_QUEUE_FIRST, 2, 2 },
	{ "bounded", TPE_QUEUE_BOUNDED, 1, TPE_POLICY_QUEUE_FIRST, 2, 2 },
	{ "unbounded_scale_first", TPE_QUEUE_UNBOUNDED, 0,
	    TPE_POLICY_SCALE_FIRST, 1, 3 },
	{ "bounded_scale_first", TPE_QUEUE_BOUNDED, 1, TPE_POLICY_SCALE_FIRST,
	    1, 3 },
	{ "handoff_queue_first", TPE_QUEUE_HANDOFF, 0, TPE_POLICY_QUEUE_FIRST,
	    1, 3 },
	{ "handoff_scale_first", TPE_QUEUE_HANDOFF, 0, TPE_POLICY_SCALE_FIRST,
	    1, 3 },
	{ "per_worker", TPE_QUEUE_PER_WORKER, 0, TPE_POLICY_QUEUE_FIRST, 3, 3 },
};
#define NCONFS (sizeof(confs) / sizeof(confs[0]))

static struct tu_handbacks handed;

static tpe_t *
conf_pool(const struct conf *c)
{
	return tu_pool_with(&(struct tu_pool_opts){ .core = c->core,
	    .max = c->max, .queue = c->kind, .capacity = c->capacity,
	    .policy = c->policy, .rejection = TPE_REJECT_ABORT,
	    .discard = tu_handback_fn, .discard_ctx = &handed });
}

/* The record of a loop: how often each index ran. */
struct hits {
	size_t n;
	int *ran;       /* atomic each */
};

static void
hit_fn(size_t i, void *arg)
{
	struct hits *h = arg;

	if (i < h->n)
		__atomic_add_fetch(&h->ran[i], 1, __ATOMIC_SEQ_CST);
}

static struct hits
hits_new(size_t n)
{
	struct hits h = { n, calloc(n + 1, sizeof(int)) };

	assert_non_null(h.ran);
	return h;
}

/* Every index of [0, n) exactly once, none outside. */
static void
assert_each_once(const struct hits *h)
{
	size_t i, bad = 0;

	for (i = 0; i < h->n; i++)
		if (tu_load(&h->ran[i]) != 1)
			bad++;
	assert_int_equal(bad, 0);
}

static void
test_apply_each_index_once_every_kind(void **state)
{
	static const size_t ns[] = { 1, 2, 3, 64, 1000, 100003 };
	size_t k, j;

	(void)state;
	for (k = 0; k < NCONFS; k++) {
		tpe_t *p = conf_pool(&confs[k]);

		tu_handbacks_init(&handed);
		for (j = 0; j < sizeof(ns) / sizeof(ns[0]); j++) {
			struct hits h = hits_new(ns[j]);

			assert_int_equal(tpe_parallel_for(p, ns[j], hit_fn,
			    &h), 0);
			assert_each_once(&h);
			free(h.ran);
		}
		tpe_destroy(p);
		/* Helpers are the library's: never handed to the user. */
		assert_int_equal(tu_handbacks_count(&handed), 0);
	}
}

/* Two iterations that each wait for the other to have started: only a
 * helper taking one while the caller runs the other ends them. */
struct meet {
	struct tu_latch both;
	int ok;          /* atomic: iterations that met the other */
};

static void
meet_fn(size_t i, void *arg)
{
	struct meet *m = arg;

	(void)i;
	tu_latch_count_down(&m->both);
	if (tu_latch_wait_for(&m->both, TU_WAIT_BOUND))
		__atomic_add_fetch(&m->ok, 1, __ATOMIC_SEQ_CST);
}

static void
test_apply_helpers_take_part(void **state)
{
	size_t k;

	(void)state;
	for (k = 0; k < NCONFS; k++) {
		tpe_t *p = conf_pool(&confs[k]);
		struct meet m = { .ok = 0 };

		tu_latch_init(&m.both, 2);
		assert_int_equal(tpe_parallel_for(p, 2, meet_fn, &m), 0);
		print_message("# %s: %d of 2 met\n", confs[k].name,
		    tu_load(&m.ok));
		assert_int_equal(tu_load(&m.ok), 2);
		tpe_destroy(p);
		tu_latch_destroy(&m.both);
	}
}

/*
 * The caller waits for the chunks other threads run: of two iterations
 * that meet, the helper's ends only once the caller sleeps in its wait
 * (a state read from /proc; where it cannot be read, at once), so a caller
 * that returned before the helper's iteration ended finds it unfinished.
 */
struct late {
	struct tu_latch both;
	long caller;     /* the calling thread's id */
	int finished;    /* atomic */
	int saw_sleep;   /* atomic: the helper saw the caller asleep */
};

static void
late_fn(size_t i, void *arg)
{
	struct late *l = arg;
	int64_t end = tu_now_ns() + TU_WAIT_BOUND;
	int kind;

	(void)i;
	tu_latch_count_down(&l->both);
	(void)tu_latch_wait_for(&l->both, TU_WAIT_BOUND);
	if ((long)syscall(SYS_gettid) != l->caller) {
		/* Asleep without a time-out (the loop's park); the latch's
		 * wait is a timed one. */
		while (((kind = tu_thread_wait_kind(l->caller)) ==
		    TU_WAIT_OTHER || kind == TU_WAIT_TIMED) &&
		    tu_now_ns() < end)
			tu_sleep_ns(TU_MS / 4);
		if (kind != TU_WAIT_OTHER && kind != TU_WAIT_TIMED)
			__atomic_store_n(&l->saw_sleep, 1, __ATOMIC_SEQ_CST);
	}
	__atomic_add_fetch(&l->finished, 1, __ATOMIC_SEQ_CST);
}

static void
test_apply_waits_for_running_chunks(void **state)
{
	tpe_t *p = tu_pool(2, 2, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct late l = { .finished = 0 };

	(void)state;
	tu_latch_init(&l.both, 2);
	l.caller = (long)syscall(SYS_gettid);
	assert_int_equal(tpe_parallel_for(p, 2, late_fn, &l), 0);
	assert_int_equal(tu_load(&l.finished), 2);
	assert_int_equal(tu_load(&l.saw_sleep), 1);
	tpe_destroy(p);
	tu_latch_destroy(&l.both);
}

/*
 * A pool whose one worker is held: the helpers queue (or are refused) and
 * never start while the loop runs; the caller does every index and
 * returns without waiting for them. Then tpe_shutdown_now: the queued
 * helpers reach neither the drained nor the discard callback, and their
 * shared state is freed (the sanitizer builds see a leak otherwise).
 */
static void
test_apply_caller_does_all_when_pool_busy(void **state)
{
	static const enum tpe_queue_kind kinds[] = { TPE_QUEUE_UNBOUNDED,
	    TPE_QUEUE_BOUNDED, TPE_QUEUE_HANDOFF, TPE_QUEUE_PER_WORKER };
	size_t k;

	(void)state;
	for (k = 0; k < 4; k++) {
		struct tu_handbacks drained;
		struct tu_saturation sat;
		struct hits h = hits_new(5000);
		tpe_t *p;

		tu_handbacks_init(&handed);
		tu_handbacks_init(&drained);
		p = tu_pool_with(&(struct tu_pool_opts){ .core = 1, .max = 1,
		    .queue = kinds[k],
		    .capacity = kinds[k] == TPE_QUEUE_BOUNDED ? 4 : 0,
		    .rejection = TPE_REJECT_ABORT, .discard = tu_handback_fn,
		    .discard_ctx = &handed });
		tu_saturate(p, 1, 0, &sat);
		assert_int_equal(tpe_parallel_for(p, h.n, hit_fn, &h), 0);
		assert_each_once(&h);
		assert_int_equal(tpe_shutdown_now(p, tu_handback_fn, &drained),
		    0);
		tu_unsaturate(&sat);
		assert_int_equal(tpe_await_termination(p, TU_WAIT_BOUND), 0);
		assert_int_equal(tu_handbacks_count(&drained), 0);
		assert_int_equal(tu_handbacks_count(&handed), 0);
		tpe_destroy(p);
		tu_saturation_destroy(&sat);
		free(h.ran);
	}
}

/* A custom rejection handler is never offered a helper: the caller does
 * the work. */
static int
handler_calls;

static int
count_handler(tpe_t *pool, tpe_fn fn, void *arg, void *ctx)
{
	(void)pool;
	(void)fn;
	(void)arg;
	(void)ctx;
	__atomic_add_fetch(&handler_calls, 1, __ATOMIC_SEQ_CST);
	return 0;
}

static void
test_apply_handler_never_sees_helpers(void **state)
{
	struct tu_saturation sat;
	struct hits h = hits_new(1000);
	tpe_t *p;

	(void)state;
	p = tu_pool_with(&(struct tu_pool_opts){ .core = 1, .max = 1,
	    .queue = TPE_QUEUE_HANDOFF, .reject_handler = count_handler });
	tu_saturate(p, 1, 0, &sat);
	assert_int_equal(tpe_parallel_for(p, h.n, hit_fn, &h), 0);
	assert_each_once(&h);
	assert_int_equal(tu_load(&handler_calls), 0);
	tu_unsaturate(&sat);
	tpe_destroy(p);
	tu_saturation_destroy(&sat);
	free(h.ran);
}

/* A shut-down pool takes no helper: the caller does it all. */
static void
test_apply_shut_down_pool_caller_runs_all(void **state)
{
	struct hits h = hits_new(777);
	tpe_t *p = tu_pool(2, 2, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);

	(void)state;
	assert_int_equal(tpe_shutdown(p), 0);
	assert_int_equal(tpe_parallel_for(p, h.n, hit_fn, &h), 0);
	assert_each_once(&h);
	tpe_destroy(p);
	free(h.ran);
}

/* From the one worker of a pool of one: the loop completes (the worker
 * does it all; its helpers wait behind it and find nothing left). */
struct inner {
	tpe_t *pool;
	struct hits h;
	int rc;
	struct tu_latch done;
};

static void
inner_fn(void *arg)
{
	struct inner *in = arg;

	in->rc = tpe_parallel_for(in->pool, in->h.n, hit_fn, &in->h);
	tu_latch_count_down(&in->done);
}

static void
test_apply_from_worker_of_pool_of_one(void **state)
{
	static const enum tpe_queue_kind kinds[] = { TPE_QUEUE_UNBOUNDED,
	    TPE_QUEUE_BOUNDED, TPE_QUEUE_HANDOFF, TPE_QUEUE_PER_WORKER };
	size_t k;

	(void)state;
	for (k = 0; k < 4; k++) {
		struct inner in = { .rc = -1 };

		in.pool = tu_pool_with(&(struct tu_pool_opts){ .core = 1,
		    .max = 1, .queue = kinds[k],
		    .capacity = kinds[k] == TPE_QUEUE_BOUNDED ? 4 : 0,
		    .rejection = TPE_REJECT_ABORT });
		in.h = hits_new(3000);
		tu_latch_init(&in.done, 1);
		assert_int_equal(tpe_execute(in.pool, inner_fn, &in), 0);
		assert_true(tu_latch_wait_for(&in.done, TU_WAIT_BOUND));
		assert_int_equal(in.rc, 0);
		assert_each_once(&in.h);
		tpe_destroy(in.pool);
		tu_latch_destroy(&in.done);
		free(in.h.ran);
	}
}

static void
test_apply_arguments(void **state)
{
	struct hits h = hits_new(1);
	tpe_t *p = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);

	(void)state;
	assert_int_equal(tpe_parallel_for(NULL, 1, hit_fn, &h), EINVAL);
	assert_int_equal(tpe_parallel_for(p, 1, NULL, &h), EINVAL);
	assert_int_equal(tpe_parallel_for(p, 0, hit_fn, &h), 0);
	assert_int_equal(tu_load(&h.ran[0]), 0);
	assert_int_equal(tpe_parallel_for(p, 1, hit_fn, &h), 0);
	assert_int_equal(tu_load(&h.ran[0]), 1);
	tpe_destroy(p);
	free(h.ran);
}

/* No memory for the loop's state: the caller runs every index. */
static void
test_apply_out_of_memory_runs_here(void **state)
{
	struct hits h = hits_new(500);
	tpe_t *p = tu_pool(2, 2, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);

	(void)state;
	fault_arm(&malloc_fault, 0, -1, false);
	assert_int_equal(tpe_parallel_for(p, h.n, hit_fn, &h), 0);
	assert_true(fault_disarm(&malloc_fault) > 0);
	assert_each_once(&h);
	tpe_destroy(p);
	free(h.ran);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_apply_each_index_once_every_kind),
		cmocka_unit_test(test_apply_helpers_take_part),
		cmocka_unit_test(test_apply_waits_for_running_chunks),
		cmocka_unit_test(test_apply_caller_does_all_when_pool_busy),
		cmocka_unit_test(test_apply_handler_never_sees_helpers),
		cmocka_unit_test(test_apply_shut_down_pool_caller_runs_all),
		cmocka_unit_test(test_apply_from_worker_of_pool_of_one),
		cmocka_unit_test(test_apply_arguments),
		cmocka_unit_test(test_apply_out_of_memory_runs_here),
	};

	tu_time_bound(0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
