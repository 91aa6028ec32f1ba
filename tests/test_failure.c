/* SPDX-License-Identifier: MIT */
/*
 * test_failure.c - deterministic failure injection: pthread_create and
 * malloc/calloc failing inside the library (Java behaviours 54-56 of
 * doc/java-behaviours.md). The rule checked is the one Samba's pthreadpool
 * follows: when no worker can be started for a task, the task is still
 * accepted if a live worker will take it from the queue later, and refused
 * with the error if none is alive (or the queue has no room), so an
 * accepted task is never left with nobody to run it.
 *
 * Linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=pthread_create: the
 * faults and the wrappers are tests/helpers.h's (create_errno and
 * create_around shape what a failed or let-through thread start does).
 */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include <string.h>

#define TU_FAULT_INJECTION /* this binary links the --wrap wrappers */
#include "helpers.h"

#include "engine/locked.h"
#include "pool/node_cache.h"
#include "pool/pool.h"
#include "pool/reserve.h"
#include "base/sync.h"
#include "pool/worker.h"

/* ---- helpers ---------------------------------------------------------- */

/* Asserts the pool holds nothing and started nothing. */
static void
assert_pool_empty(tpe_t *pool)
{
	struct tpe_stats s = tu_stats(pool);

	assert_int_equal(s.pool_size, 0);
	assert_int_equal(s.active, 0);
	assert_int_equal(s.queued, 0);
	assert_int_equal(s.submitted, 0);
	assert_int_equal(s.completed, 0);
}

/* Shuts down, waits, destroys: the clean-up every failure must allow. */
static void
finish(tpe_t *pool)
{
	assert_int_equal(tpe_shutdown(pool), 0);
	assert_int_equal(tpe_await_termination(pool, 60 * TU_S), 0);
	assert_int_equal(tpe_destroy(pool), 0);
}

/* A task recording the thread it ran on. */
struct on_thread {
	pthread_t thread;
	int ran;                  /* atomic */
	struct tu_latch *done;    /* may be NULL */
};

static void
on_thread_fn(void *arg)
{
	struct on_thread *t = arg;

	t->thread = pthread_self();
	__atomic_add_fetch(&t->ran, 1, __ATOMIC_SEQ_CST);
	if (t->done)
		tu_latch_count_down(t->done);
}

/* ---- (a) the first worker cannot be created --------------------------- */

static void
first_worker_fails(size_t core, size_t max, enum tpe_queue_kind kind,
    size_t cap)
{
	tpe_t *pool = tu_pool(core, max, kind, cap, TPE_REJECT_ABORT);
	int count = 0, count2 = 0, fcount = 0;
	tpe_future_t *f = (tpe_future_t *)&count;   /* sentinel */
	struct tu_latch done;
	struct tu_blocker ok = { NULL, NULL, &done, 0 };
	int rc, rc2;

	tu_latch_init(&done, 1);
	fault_arm(&create_fault, 0, -1, false);
	rc = tpe_execute(pool, tu_count_fn, &count);
	rc2 = tpe_submit(pool, tu_count_call, &fcount, &f);
	assert_true(fault_disarm(&create_fault) >= 2);
	assert_int_equal(rc, EAGAIN);
	assert_int_equal(rc2, EAGAIN);
	assert_ptr_equal(f, (tpe_future_t *)&count);  /* not written */
	assert_pool_empty(pool);                      /* nothing kept */
	assert_int_equal(tu_load(&count), 0);
	assert_int_equal(tu_load(&fcount), 0);

	/* The failure stopped: the pool works. */
	assert_int_equal(tpe_execute(pool, tu_blocker_fn, &ok), 0);
	tu_latch_wait(&done);
	assert_int_equal(tpe_execute(pool, tu_count_fn, &count2), 0);
	finish(pool);
	/* The refused tasks never ran, not even later. */
	assert_int_equal(tu_load(&count), 0);
	assert_int_equal(tu_load(&fcount), 0);
	assert_int_equal(tu_load(&count2), 1);
	tu_latch_destroy(&done);
}

static void
test_failure_first_worker_create_fails(void **state)
{
	(void)state;
	first_worker_fails(1, 1, TPE_QUEUE_UNBOUNDED, 0);     /* step 1 */
	first_worker_fails(2, 4, TPE_QUEUE_BOUNDED, 4);       /* step 1 */
	first_worker_fails(0, 1, TPE_QUEUE_UNBOUNDED, 0);     /* step 2 re-check */
	first_worker_fails(0, 3, TPE_QUEUE_BOUNDED, 2);       /* step 2 re-check */
	first_worker_fails(0, 2, TPE_QUEUE_HANDOFF, 0);       /* step 3 */
}

/*
 * The same when allocations fail: every allocation of one execute on a
 * fresh pool fails in turn, (1) from then on: the call is refused and
 * nothing is kept; (2) once: the library may retry and accept the task,
 * which must then run exactly once.
 */
static void
test_failure_first_worker_alloc_fails(void **state)
{
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	int count = 0, expected = 0;
	long k;
	int rc;

	(void)state;
	for (k = 0;; k++) {
		fault_arm(&malloc_fault, k, -1, false);
		rc = tpe_execute(pool, tu_count_fn, &count);
		if (fault_disarm(&malloc_fault) == 0) {
			assert_int_equal(rc, 0);
			expected++;
			break;
		}
		assert_true(rc == ENOMEM || rc == EAGAIN);
		assert_pool_empty(pool);
		assert_true(k < 100);
	}
	assert_true(k >= 2);   /* at least the task node and the worker */
	finish(pool);
	assert_int_equal(tu_load(&count), expected);

	pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	count = expected = 0;
	for (k = 0;; k++) {
		struct tpe_stats s;

		fault_arm(&malloc_fault, k, 1, false);
		rc = tpe_execute(pool, tu_count_fn, &count);
		if (fault_disarm(&malloc_fault) == 0) {
			assert_int_equal(rc, 0);
			expected++;
			break;
		}
		s = tu_stats(pool);
		if (rc == 0) {
			expected++;
			assert_int_equal(s.submitted, (uint64_t)expected);
		} else {
			assert_true(rc == ENOMEM || rc == EAGAIN);
			assert_int_equal(s.submitted, (uint64_t)expected);
			assert_int_equal(s.queued + s.active + s.completed,
			    (uint64_t)expected);
			if (expected == 0)
				assert_pool_empty(pool);
		}
		assert_true(k < 100);
	}
	finish(pool);
	assert_int_equal(tu_load(&count), expected);
}

/* The snapshot a thread start takes of its pool while pthread_create has
 * not returned (create_around). */
static tpe_t *snap_pool;
static struct tpe_stats snap;

static int
snapshot_then_create(pthread_t *thread, const pthread_attr_t *attr,
    void *(*start)(void *), void *arg)
{
	assert_int_equal(tpe_get_stats(snap_pool, &snap, sizeof(snap)), 0);
	return __real_pthread_create(thread, attr, start, arg);
}

/*
 * A snapshot taken while a worker is being started never shows pool_size
 * above largest_pool_size (Java never does). Before the fix largest counted
 * the worker only once its thread existed: pool_size 1, largest 0 here.
 */
static void
test_failure_stats_during_start_pool_size_within_largest(void **state)
{
	tpe_t *pool = tu_pool(2, 2, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	int count = 0;

	(void)state;
	snap_pool = pool;
	create_around = snapshot_then_create;
	assert_int_equal(tpe_execute(pool, tu_count_fn, &count), 0);
	create_around = NULL;
	assert_int_equal(snap.pool_size, 1);
	assert_int_equal(snap.largest_pool_size, 1);
	finish(pool);
	assert_int_equal(tu_load(&count), 1);
}

/*
 * largest_pool_size counts a worker from the moment the pool decides to
 * start it, as Java's getLargestPoolSize does (addWorker notes it before
 * the thread starts), so that it is never below pool_size: a start that
 * then fails has counted too.
 */
static void
test_failure_largest_pool_size_counts_decided_starts(void **state)
{
	tpe_t *pool = tu_pool(2, 2, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct tu_saturation sat;
	int count = 0;
	int rc;

	(void)state;
	fault_arm(&create_fault, 0, -1, false);
	rc = tpe_execute(pool, tu_count_fn, &count);
	assert_true(fault_disarm(&create_fault) >= 1);
	assert_int_equal(rc, EAGAIN);
	assert_int_equal(tu_stats(pool).pool_size, 0);
	assert_int_equal(tu_stats(pool).largest_pool_size, 1);

	tu_saturate(pool, 1, 0, &sat);
	fault_arm(&create_fault, 0, -1, false);
	rc = tpe_execute(pool, tu_count_fn, &count);   /* kept: queued */
	assert_true(fault_disarm(&create_fault) >= 1);
	assert_int_equal(rc, 0);
	assert_int_equal(tu_stats(pool).pool_size, 1);
	/* The saturating worker, and the second one as it was decided. */
	assert_int_equal(tu_stats(pool).largest_pool_size, 2);
	tu_unsaturate(&sat);
	finish(pool);
	assert_int_equal(tu_load(&count), 1);
	tu_saturation_destroy(&sat);
}

/* ---- (b) creation fails once a worker is alive (Java item 55) --------- */

static void
test_failure_create_fails_after_first_worker(void **state)
{
	enum { N = 100 };
	tpe_t *pool = tu_pool(N, N, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct on_thread t[N];
	struct tu_latch done;
	struct tpe_stats s;
	long failed;
	int i, rc[N];

	(void)state;
	tu_latch_init(&done, N);
	memset(t, 0, sizeof(t));
	/* Every creation but the first fails, from any thread. */
	fault_arm(&create_fault, 1, -1, true);
	for (i = 0; i < N; i++) {
		t[i].done = &done;
		rc[i] = tpe_execute(pool, on_thread_fn, &t[i]);
	}
	tu_latch_wait(&done);
	s = tu_stats(pool);
	failed = fault_disarm(&create_fault);
	for (i = 0; i < N; i++)
		assert_int_equal(rc[i], 0);
	assert_true(failed >= 1);
	for (i = 0; i < N; i++) {
		assert_int_equal(tu_load(&t[i].ran), 1);
		assert_true(pthread_equal(t[i].thread, t[0].thread));
	}
	assert_int_equal(s.pool_size, 1);
	assert_int_equal(s.submitted, N);
	finish(pool);
	tu_latch_destroy(&done);
}

/* The worker is busy; the next core worker cannot start: the task waits. */
static void
test_failure_create_fails_task_queued_behind_busy_worker(void **state)
{
	tpe_t *pool = tu_pool(2, 2, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct tu_saturation sat;
	struct tu_latch done;
	struct on_thread t = { 0 };
	struct tpe_stats s;
	int rc;

	(void)state;
	tu_latch_init(&done, 1);
	t.done = &done;
	tu_saturate(pool, 1, 0, &sat);
	fault_arm(&create_fault, 0, -1, false);
	rc = tpe_execute(pool, on_thread_fn, &t);
	assert_true(fault_disarm(&create_fault) >= 1);
	assert_int_equal(rc, 0);
	s = tu_stats(pool);
	assert_int_equal(s.pool_size, 1);
	assert_int_equal(s.queued, 1);
	assert_int_equal(s.submitted, 2);
	assert_int_equal(tu_load(&t.ran), 0);
	tu_unsaturate(&sat);
	tu_latch_wait(&done);
	assert_int_equal(tu_load(&t.ran), 1);
	/* It ran on the only worker, the blocker's. */
	assert_int_equal(tu_stats(pool).pool_size, 1);
	finish(pool);
	tu_saturation_destroy(&sat);
	tu_latch_destroy(&done);
}

/* Queue full, the non-core thread cannot start: rejected, nothing lost. */
static void
test_failure_create_fails_for_noncore_worker(void **state)
{
	tpe_t *pool = tu_pool(1, 2, TPE_QUEUE_BOUNDED, 1, TPE_REJECT_ABORT);
	struct tu_saturation sat;
	int queued = 0, extra = 0;
	struct tpe_stats s;
	int rc;

	(void)state;
	tu_saturate(pool, 1, 0, &sat);
	assert_int_equal(tpe_execute(pool, tu_count_fn, &queued), 0);
	fault_arm(&create_fault, 0, -1, false);
	rc = tpe_execute(pool, tu_count_fn, &extra);
	assert_true(fault_disarm(&create_fault) >= 1);
	assert_int_equal(rc, EAGAIN);
	s = tu_stats(pool);
	assert_int_equal(s.pool_size, 1);
	assert_int_equal(s.queued, 1);
	assert_int_equal(s.submitted, 2);
	tu_unsaturate(&sat);
	finish(pool);
	assert_int_equal(tu_load(&queued), 1);
	assert_int_equal(tu_load(&extra), 0);
	tu_saturation_destroy(&sat);
}

/* ---- (c) allocation failures ------------------------------------------- */

static void
test_failure_attr_create_enomem(void **state)
{
	tpe_attr_t *sentinel = (tpe_attr_t *)&sentinel, *a;
	long k;
	int rc;

	(void)state;
	for (k = 0;; k++) {
		a = sentinel;
		fault_arm(&malloc_fault, k, 1, false);
		rc = tpe_attr_create(&a);
		if (fault_disarm(&malloc_fault) == 0) {
			assert_int_equal(rc, 0);
			break;
		}
		assert_int_equal(rc, ENOMEM);
		assert_ptr_equal(a, sentinel);
		assert_true(k < 100);
	}
	assert_true(k >= 1);
	assert_ptr_not_equal(a, sentinel);
	tpe_attr_destroy(a);
}

static void
create_enomem(const tpe_attr_t *attr)
{
	tpe_t *sentinel = (tpe_t *)&sentinel, *pool;
	long k;
	int rc;

	for (k = 0;; k++) {
		pool = sentinel;
		fault_arm(&malloc_fault, k, 1, false);
		rc = tpe_create(&pool, attr);
		if (fault_disarm(&malloc_fault) == 0) {
			assert_int_equal(rc, 0);
			break;
		}
		assert_int_equal(rc, ENOMEM);
		assert_ptr_equal(pool, sentinel);   /* untouched */
		assert_true(k < 100);
	}
	assert_true(k >= 1);
	assert_ptr_not_equal(pool, sentinel);
	finish(pool);
}

static void
test_failure_create_enomem(void **state)
{
	tpe_attr_t *a;

	(void)state;
	create_enomem(NULL);
	assert_int_equal(tpe_attr_create(&a), 0);
	assert_int_equal(tpe_attr_set_pool_size(a, 2, 4), 0);
	assert_int_equal(tpe_attr_set_queue(a, TPE_QUEUE_BOUNDED, 64), 0);
	assert_int_equal(tpe_attr_set_thread_name(a, "fail"), 0);
	create_enomem(a);
	assert_int_equal(tpe_attr_set_queue(a, TPE_QUEUE_HANDOFF, 0), 0);
	assert_int_equal(tpe_attr_set_policy(a, TPE_POLICY_SCALE_FIRST), 0);
	create_enomem(a);
	assert_int_equal(tpe_attr_set_queue(a, TPE_QUEUE_UNBOUNDED, 0), 0);
	assert_int_equal(tpe_attr_set_rejection(a, TPE_REJECT_DISCARD_OLDEST),
	    0);
	create_enomem(a);
	tpe_attr_destroy(a);
}

/*
 * A task node (tpe_execute), or a future or its node (tpe_submit), cannot
 * be allocated: ENOMEM, nothing counted, not run, *future untouched. One
 * row a call, as the cases were named.
 */
struct enomem_row {
	const char *name;
	bool submit;
};

static const struct enomem_row enomem_rows[] = {
	{ "test_failure_execute_enomem", false },
	{ "test_failure_submit_enomem", true },
};

static void
test_failure_call_enomem(void **state)
{
	const struct enomem_row *row = *state;
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct tu_saturation sat;
	int count = 0;
	tpe_future_t *sentinel = (tpe_future_t *)&count, *f;
	struct tpe_stats s0, s;
	void *res = NULL;
	long k;
	int rc;

	tu_saturate(pool, 1, 0, &sat);
	s0 = tu_stats(pool);
	for (k = 0;; k++) {
		f = sentinel;
		fault_arm(&malloc_fault, k, 1, false);
		rc = row->submit ? tpe_submit(pool, tu_count_call, &count, &f) :
		    tpe_execute(pool, tu_count_fn, &count);
		if (fault_disarm(&malloc_fault) == 0) {
			assert_int_equal(rc, 0);
			break;
		}
		assert_int_equal(rc, ENOMEM);
		assert_ptr_equal(f, sentinel);
		s = tu_stats(pool);
		assert_int_equal(s.submitted, s0.submitted);
		assert_int_equal(s.queued, 0);
		assert_int_equal(s.rejected, 0);
		assert_int_equal(s.pool_size, 1);
		assert_true(k < 100);
	}
	assert_true(k >= 1);
	assert_int_equal(tu_stats(pool).queued, 1);
	tu_unsaturate(&sat);
	if (row->submit) {
		assert_ptr_not_equal(f, sentinel);
		assert_int_equal(tpe_future_get(f, -1, &res), 0);
		assert_ptr_equal(res, &count);
		tpe_future_release(f);
	}
	finish(pool);
	assert_int_equal(tu_load(&count), 1);   /* only the accepted call */
	tu_saturation_destroy(&sat);
}

/* Every allocation of a first submit (node, future, worker) in turn. */
static void
test_failure_submit_fresh_pool_every_allocation(void **state)
{
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	int count = 0;
	tpe_future_t *sentinel = (tpe_future_t *)&count, *f;
	void *res = NULL;
	long k;
	int rc;

	(void)state;
	/* Allocations fail from the k-th on (a single failure could be
	 * retried by the library and the task accepted, which is fine). */
	for (k = 0;; k++) {
		f = sentinel;
		fault_arm(&malloc_fault, k, -1, false);
		rc = tpe_submit(pool, tu_count_call, &count, &f);
		if (fault_disarm(&malloc_fault) == 0) {
			assert_int_equal(rc, 0);
			break;
		}
		/* No worker alive: a failed worker start refuses the task. */
		assert_true(rc == ENOMEM || rc == EAGAIN);
		assert_ptr_equal(f, sentinel);
		assert_pool_empty(pool);
		assert_true(k < 100);
	}
	assert_true(k >= 3);   /* a future, a node and a worker */
	assert_int_equal(tpe_future_get(f, -1, &res), 0);
	tpe_future_release(f);
	finish(pool);
	assert_int_equal(tu_load(&count), 1);
}

/* A core worker beyond the first cannot be allocated: the task is kept. */
static void
test_failure_second_worker_alloc_fails_task_kept(void **state)
{
	tpe_t *pool = tu_pool(2, 2, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct tu_saturation sat;
	int counts[100] = { 0 };
	long k;
	int rc, i;

	(void)state;
	tu_saturate(pool, 1, 0, &sat);
	for (k = 0;; k++) {
		fault_arm(&malloc_fault, k, 1, false);
		rc = tpe_execute(pool, tu_count_fn, &counts[k]);
		if (fault_disarm(&malloc_fault) == 0) {
			assert_int_equal(rc, 0);
			break;
		}
		/* The node failed (ENOMEM, not kept) or the worker (kept). */
		assert_true(rc == ENOMEM || rc == 0);
		if (rc == ENOMEM)
			counts[k] = -1000;
		assert_true(k < 99);
	}
	tu_unsaturate(&sat);
	finish(pool);
	for (i = 0; i <= k; i++)
		assert_true(counts[i] == -1000 || counts[i] == 1);
	tu_saturation_destroy(&sat);
}

/* ---- (d) prestart ------------------------------------------------------- */

static void
test_failure_prestart_partial(void **state)
{
	tpe_t *pool = tu_pool(4, 4, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	size_t started = 99;
	int count = 0;
	struct tu_latch done;
	struct tu_blocker t = { NULL, NULL, &done, 0 };
	int rc;

	(void)state;
	tu_latch_init(&done, 1);
	fault_arm(&create_fault, 2, -1, false);
	rc = tpe_prestart_core_threads(pool, &started);
	assert_true(fault_disarm(&create_fault) >= 1);
	assert_int_equal(rc, EAGAIN);
	assert_int_equal(started, 2);
	assert_int_equal(tu_stats(pool).pool_size, 2);

	/* The pool works, and the rest can be started later. */
	assert_int_equal(tpe_execute(pool, tu_blocker_fn, &t), 0);
	tu_latch_wait(&done);
	started = 99;
	assert_int_equal(tpe_prestart_core_threads(pool, &started), 0);
	/* The execute above started the third core worker (step 1). */
	assert_int_equal(started, 1);
	assert_int_equal(tu_stats(pool).pool_size, 4);
	started = 99;
	assert_int_equal(tpe_prestart_core_threads(pool, &started), 0);
	assert_int_equal(started, 0);
	assert_int_equal(tpe_execute(pool, tu_count_fn, &count), 0);
	finish(pool);
	assert_int_equal(tu_load(&count), 1);
	tu_latch_destroy(&done);
}

static void
test_failure_prestart_first_fails(void **state)
{
	tpe_t *pool = tu_pool(3, 3, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	size_t started = 99;
	int rc;

	(void)state;
	fault_arm(&create_fault, 0, -1, false);
	rc = tpe_prestart_core_threads(pool, &started);
	assert_true(fault_disarm(&create_fault) >= 1);
	assert_int_equal(rc, EAGAIN);
	assert_int_equal(started, 0);
	assert_pool_empty(pool);
	/* started may be NULL */
	fault_arm(&create_fault, 1, -1, false);
	rc = tpe_prestart_core_threads(pool, NULL);
	assert_true(fault_disarm(&create_fault) >= 1);
	assert_int_equal(rc, EAGAIN);
	assert_int_equal(tu_stats(pool).pool_size, 1);
	finish(pool);
}

static void
test_failure_prestart_alloc_fails(void **state)
{
	tpe_t *pool = tu_pool(3, 3, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	size_t started = 99, alive = 0;
	long k;
	int rc;

	(void)state;
	for (k = 0;; k++) {
		started = 99;
		fault_arm(&malloc_fault, k, 1, false);
		rc = tpe_prestart_core_threads(pool, &started);
		if (fault_disarm(&malloc_fault) == 0) {
			assert_int_equal(rc, 0);
			alive += started;
			break;
		}
		assert_true(rc == EAGAIN || rc == ENOMEM);
		alive += started;
		assert_int_equal(tu_stats(pool).pool_size, alive);
		assert_true(k < 100);
	}
	assert_int_equal(alive, 3);
	assert_int_equal(tu_stats(pool).pool_size, 3);
	finish(pool);
}

/* ---- (e) shutdown_now and destroy right after failures ---------------- */

static void
test_failure_shutdown_now_after_failures(void **state)
{
	tpe_t *pool = tu_pool(2, 2, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	struct tu_saturation sat;
	int counts[5] = { 0 };
	int i;

	(void)state;
	tu_saturate(pool, 1, 0, &sat);
	fault_arm(&create_fault, 0, -1, false);
	tu_fill_queue(pool, 5, tu_count_fn, counts, sizeof(counts[0]));
	assert_true(fault_disarm(&create_fault) >= 1);
	assert_int_equal(tu_stats(pool).queued, 5);
	assert_int_equal(tpe_shutdown_now(pool, NULL, NULL), 0);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_await_termination(pool, 60 * TU_S), 0);
	assert_int_equal(tpe_destroy(pool), 0);
	for (i = 0; i < 5; i++)
		assert_int_equal(tu_load(&counts[i]), 0);
	tu_saturation_destroy(&sat);
}

static void
test_failure_destroy_after_create_failure_only(void **state)
{
	tpe_t *pool = tu_pool(2, 2, TPE_QUEUE_BOUNDED, 2, TPE_REJECT_ABORT);
	int count = 0;

	(void)state;
	fault_arm(&create_fault, 0, -1, false);
	assert_int_equal(tpe_execute(pool, tu_count_fn, &count), EAGAIN);
	assert_int_equal(tpe_prestart_core_threads(pool, NULL), EAGAIN);
	fault_disarm(&create_fault);
	/* destroy without an explicit shutdown. */
	assert_int_equal(tpe_destroy(pool), 0);
	assert_int_equal(count, 0);
}

/* ---- prestart with workers that expire as fast as they start ---------- */

/*
 * With core timeout and a keep-alive shorter than a thread start, every
 * worker tpe_prestart_core_threads starts may be gone before it starts the
 * next. Built exactly: each creation waits until every earlier worker has
 * run its on-exit hook (so wc is back to 0). The call starts the missing
 * core workers once, and returns. Before the fix it looped "until wc ==
 * core", which never came: here the 17th creation fails to end that loop.
 */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int created;
	int exited;
} churn = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };

static void
churn_on_exit(tpe_t *pool, void *ctx)
{
	(void)pool;
	(void)ctx;
	pthread_mutex_lock(&churn.lock);
	churn.exited++;
	pthread_cond_broadcast(&churn.cond);
	pthread_mutex_unlock(&churn.lock);
}

static int
churn_create(pthread_t *thread, const pthread_attr_t *attr,
    void *(*start)(void *), void *arg)
{
	pthread_mutex_lock(&churn.lock);
	while (churn.exited < churn.created)
		pthread_cond_wait(&churn.cond, &churn.lock);
	churn.created++;
	pthread_mutex_unlock(&churn.lock);
	return __real_pthread_create(thread, attr, start, arg);
}

static void
test_failure_prestart_ends_when_workers_expire(void **state)
{
	tpe_attr_t *a;
	tpe_t *pool;
	size_t started = 99;
	int rc;

	(void)state;
	assert_int_equal(tpe_attr_create(&a), 0);
	assert_int_equal(tpe_attr_set_pool_size(a, 4, 4), 0);
	assert_int_equal(tpe_attr_set_keep_alive(a, 1), 0);
	assert_int_equal(tpe_attr_set_allow_core_timeout(a, true), 0);
	assert_int_equal(tpe_attr_set_thread_hooks(a, NULL, churn_on_exit,
	    NULL), 0);
	assert_int_equal(tpe_create(&pool, a), 0);
	tpe_attr_destroy(a);
	churn.created = churn.exited = 0;
	create_around = churn_create;
	fault_arm(&create_fault, 16, -1, true);
	rc = tpe_prestart_core_threads(pool, &started);
	fault_disarm(&create_fault);
	create_around = NULL;
	assert_int_equal(rc, 0);
	assert_int_equal(started, 4);
	pthread_mutex_lock(&churn.lock);
	assert_int_equal(churn.created, 4);
	pthread_mutex_unlock(&churn.lock);
	finish(pool);
}

/* ---- tpe_wait_idle and a worker start that fails ---------------------- */

/*
 * A hand-off pool with no worker: tpe_execute reserves a worker for the
 * task (active 1), its thread cannot be created, and the task is refused.
 * A tpe_wait_idle that began while the start was under way must wake:
 * the pool is idle again. Before the fix nothing woke it. Built exactly:
 * the creation blocks until the waiter is counted in pool->idle_waiters.
 */
static struct tu_latch *create_entered, *create_may_fail;

static int
blocked_failing_create(pthread_t *thread, const pthread_attr_t *attr,
    void *(*start)(void *), void *arg)
{
	(void)thread;
	(void)attr;
	(void)start;
	(void)arg;
	tu_latch_count_down(create_entered);
	tu_latch_wait(create_may_fail);
	return EAGAIN;
}

struct call_thread {
	pthread_t thread;
	tpe_t *pool;
	int rc;
};

static void *
execute_thread(void *arg)
{
	struct call_thread *c = arg;
	static int count;

	c->rc = tpe_execute(c->pool, tu_count_fn, &count);
	return NULL;
}

static void *
wait_idle_thread(void *arg)
{
	struct call_thread *c = arg;

	/* Forever: a wait that times out would see the pool idle then and
	 * return 0 too, hiding a missed wake-up. */
	c->rc = tpe_wait_idle(c->pool, -1);
	return NULL;
}

static size_t
idle_waiters(tpe_t *pool)
{
	size_t n;

	tpe__mutex_lock(&pool->lock);
	n = pool->idle_waiters;
	tpe__mutex_unlock(&pool->lock);
	return n;
}

static void
test_failure_wait_idle_woken_when_start_fails(void **state)
{
	tpe_t *pool = tu_pool(0, 1, TPE_QUEUE_HANDOFF, 0, TPE_REJECT_ABORT);
	struct tu_latch entered, may_fail;
	struct call_thread ex = { .pool = pool, .rc = -1 };
	struct call_thread wi = { .pool = pool, .rc = -1 };
	struct timespec deadline;

	(void)state;
	deadline = tu_deadline(60 * TU_S); /* for the join below */
	tu_latch_init(&entered, 1);
	tu_latch_init(&may_fail, 1);
	create_entered = &entered;
	create_may_fail = &may_fail;
	create_around = blocked_failing_create;
	/* The test's own threads bypass the wrapper. */
	assert_int_equal(__real_pthread_create(&ex.thread, NULL,
	    execute_thread, &ex), 0);
	tu_latch_wait(&entered);
	assert_int_equal(tu_stats(pool).active, 1); /* the reserved start */
	assert_int_equal(__real_pthread_create(&wi.thread, NULL,
	    wait_idle_thread, &wi), 0);
	while (idle_waiters(pool) == 0)
		tu_sleep_ns(TU_MS / 10);
	tu_latch_count_down(&may_fail);
	assert_int_equal(pthread_join(ex.thread, NULL), 0);
	create_around = NULL;
	/* Bounded only so that a missed wake-up fails this test alone. */
	assert_int_equal(pthread_timedjoin_np(wi.thread, NULL, &deadline), 0);
	assert_int_equal(ex.rc, EAGAIN);
	assert_int_equal(wi.rc, 0);
	assert_pool_empty(pool);
	finish(pool);
	tu_latch_destroy(&entered);
	tu_latch_destroy(&may_fail);
}

/* ---- one error for every refused thread start ------------------------- */

/*
 * pthread_create refuses attributes with EINVAL (a stack size the system
 * does not take) or EPERM (a scheduling policy without privilege): the
 * calls that start workers say EAGAIN for every refusal, as their manuals
 * list. Before the fix tpe_execute passed the raw value on.
 */
static void
create_error_is_eagain(int err)
{
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	tpe_future_t *f = TU_SENTINEL; /* "not written", told from NULL */
	size_t started = 99;
	int count = 0, rc_ex, rc_sub, rc_pre;

	create_errno = err;
	fault_arm(&create_fault, 0, -1, false);
	rc_ex = tpe_execute(pool, tu_count_fn, &count);
	rc_sub = tpe_submit(pool, tu_count_call, &count, &f);
	rc_pre = tpe_prestart_core_threads(pool, &started);
	fault_disarm(&create_fault);
	create_errno = EAGAIN;
	assert_int_equal(rc_ex, EAGAIN);
	assert_int_equal(rc_sub, EAGAIN);
	assert_ptr_equal(f, TU_SENTINEL);
	assert_int_equal(rc_pre, EAGAIN);
	assert_int_equal(started, 0);
	assert_pool_empty(pool);
	finish(pool);
	assert_int_equal(count, 0);
}

static void
test_failure_create_error_is_eagain(void **state)
{
	(void)state;
	create_error_is_eagain(EINVAL);
	create_error_is_eagain(EPERM);
	create_error_is_eagain(ENOMEM);
}

/* ---- a shut-down pool says ECANCELED even without memory -------------- */

static void
test_failure_shutdown_refusal_needs_no_memory(void **state)
{
	tpe_t *pool = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	tpe_future_t *f = TU_SENTINEL;
	int count = 0, rc_ex, rc_sub;

	(void)state;
	assert_int_equal(tpe_shutdown(pool), 0);
	fault_arm(&malloc_fault, 0, -1, false);
	rc_sub = tpe_submit(pool, tu_count_call, &count, &f);
	rc_ex = tpe_execute(pool, tu_count_fn, &count);
	fault_disarm(&malloc_fault);
	assert_int_equal(rc_sub, ECANCELED);
	assert_int_equal(rc_ex, ECANCELED);
	assert_ptr_equal(f, TU_SENTINEL);
	assert_int_equal(tpe_destroy(pool), 0);
}

/* ---- tpe_try_execute without memory ----------------------------------- */

/*
 * A reserved thread is parked, but the task's node cannot be allocated:
 * ENOMEM (tpe_try_execute(3)), nothing counted, nothing run, and the
 * thread stays parked for the next call. The pool has run no task, so
 * no node comes back from its return stack (lib/node.c), and fault_arm
 * empties this thread's cache: the call must allocate.
 */
static void
test_failure_try_execute_enomem(void **state)
{
	tpe_t *pool = tu_pool_reserving(&(struct tu_pool_opts){ .core = 2,
	    .max = 2 }, 1);
	int count = 0, rc;

	(void)state;
	assert_int_equal(tpe_prestart_core_threads(pool, NULL), 0);
	assert_true(TU_EVENTUALLY((tpe__locked_reserve_request((struct tpe__locked *)pool->engine),
	    tu_stats(pool).reserved == 1), TU_WAIT_BOUND));
	fault_arm(&malloc_fault, 0, -1, false);
	rc = tpe_try_execute(pool, tu_count_fn, &count);
	fault_disarm(&malloc_fault);
	assert_int_equal(rc, ENOMEM);
	assert_int_equal(tu_stats(pool).submitted, 0);
	assert_int_equal(tu_stats(pool).reserved, 1);
	assert_int_equal(tpe_try_execute(pool, tu_count_fn, &count), 0);
	assert_int_equal(tpe_wait_idle(pool, -1), 0);
	assert_int_equal(tu_load(&count), 1);
	assert_int_equal(tpe_destroy(pool), 0);
}

/* ---- a worker that exits before pthread_create returns ----------------- */

/*
 * POSIX does not promise that pthread_create stores the new thread's id
 * before the thread runs. Built exactly: the id is written only after the
 * worker has run its task, timed out, left, and a reap has run. The reap
 * must not join (or free) a worker whose id its creator has not recorded
 * yet; a later reap does. Before the fix the reap joined an id that was
 * never written (and freed the record that pthread_create then wrote).
 */
static tpe_t *late_id_pool;

static bool
has_exited_worker(tpe_t *pool)
{
	bool any;

	tpe__mutex_lock(&pool->lock);
	any = pool->exited != NULL;
	tpe__mutex_unlock(&pool->lock);
	return any;
}

static int
late_id_create(pthread_t *thread, const pthread_attr_t *attr,
    void *(*start)(void *), void *arg)
{
	pthread_t tid;
	int rc = __real_pthread_create(&tid, attr, start, arg);

	if (rc != 0)
		return rc;
	while (!has_exited_worker(late_id_pool))
		tu_sleep_ns(TU_MS / 10);
	tpe__worker_reap(late_id_pool);
	*thread = tid;
	return 0;
}

static void
test_failure_worker_exits_before_its_id_is_stored(void **state)
{
	tpe_attr_t *a;
	int count = 0;

	(void)state;
	assert_int_equal(tpe_attr_create(&a), 0);
	assert_int_equal(tpe_attr_set_pool_size(a, 1, 1), 0);
	assert_int_equal(tpe_attr_set_keep_alive(a, 1), 0);
	assert_int_equal(tpe_attr_set_allow_core_timeout(a, true), 0);
	assert_int_equal(tpe_create(&late_id_pool, a), 0);
	tpe_attr_destroy(a);
	create_around = late_id_create;
	assert_int_equal(tpe_execute(late_id_pool, tu_count_fn, &count), 0);
	create_around = NULL;
	assert_int_equal(tu_load(&count), 1);
	assert_int_equal(tpe_destroy(late_id_pool), 0);
}

/* ---- a per-worker pool starts its workers in tpe_create ----------------- */

/*
 * TPE_QUEUE_PER_WORKER starts every worker in tpe_create: when the k-th
 * thread cannot be started (for every k), tpe_create says EAGAIN, writes
 * no pool, and the k workers already started have run their start and
 * exit hooks and ended; the terminated hook never runs (tpe_create(3)).
 */
static int pw_starts, pw_exits, pw_terminated; /* atomic */

static void
pw_on_start(tpe_t *pool, void *ctx)
{
	(void)pool;
	(void)ctx;
	__atomic_add_fetch(&pw_starts, 1, __ATOMIC_SEQ_CST);
}

static void
pw_on_exit(tpe_t *pool, void *ctx)
{
	(void)pool;
	(void)ctx;
	__atomic_add_fetch(&pw_exits, 1, __ATOMIC_SEQ_CST);
}

static void
pw_on_terminated(tpe_t *pool, void *ctx)
{
	(void)pool;
	(void)ctx;
	__atomic_add_fetch(&pw_terminated, 1, __ATOMIC_SEQ_CST);
}

static void
test_failure_per_worker_create_eagain(void **state)
{
	tpe_attr_t *a;
	tpe_t *pool;
	long k;
	int rc;

	(void)state;
	assert_int_equal(tpe_attr_create(&a), 0);
	assert_int_equal(tpe_attr_set_pool_size(a, 3, 3), 0);
	assert_int_equal(tpe_attr_set_queue(a, TPE_QUEUE_PER_WORKER, 0), 0);
	assert_int_equal(tpe_attr_set_thread_hooks(a, pw_on_start,
	    pw_on_exit, NULL), 0);
	assert_int_equal(tpe_attr_set_terminated_hook(a, pw_on_terminated,
	    NULL), 0);
	for (k = 0; k < 3; k++) {
		pw_starts = pw_exits = pw_terminated = 0;
		pool = (tpe_t *)&k; /* sentinel: must stay unwritten */
		fault_arm(&create_fault, k, 1, false);
		rc = tpe_create(&pool, a);
		assert_int_equal(fault_disarm(&create_fault), 1);
		assert_int_equal(rc, EAGAIN);
		assert_ptr_equal(pool, (tpe_t *)&k);
		assert_int_equal(tu_load(&pw_starts), k);
		assert_int_equal(tu_load(&pw_exits), k);
		assert_int_equal(tu_load(&pw_terminated), 0);
	}
	/* With no fault it works. */
	pw_starts = pw_exits = 0;
	assert_int_equal(tpe_create(&pool, a), 0);
	finish(pool);
	assert_int_equal(tu_load(&pw_starts), 3);
	assert_int_equal(tu_load(&pw_exits), 3);
	tpe_attr_destroy(a);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_failure_first_worker_create_fails),
		cmocka_unit_test(test_failure_first_worker_alloc_fails),
		cmocka_unit_test(test_failure_largest_pool_size_counts_decided_starts),
		cmocka_unit_test(test_failure_stats_during_start_pool_size_within_largest),
		cmocka_unit_test(test_failure_create_fails_after_first_worker),
		cmocka_unit_test(test_failure_create_fails_task_queued_behind_busy_worker),
		cmocka_unit_test(test_failure_create_fails_for_noncore_worker),
		cmocka_unit_test(test_failure_attr_create_enomem),
		cmocka_unit_test(test_failure_create_enomem),
		TU_ROW_TEST(test_failure_call_enomem, &enomem_rows[0]),
		TU_ROW_TEST(test_failure_call_enomem, &enomem_rows[1]),
		cmocka_unit_test(test_failure_submit_fresh_pool_every_allocation),
		cmocka_unit_test(test_failure_second_worker_alloc_fails_task_kept),
		cmocka_unit_test(test_failure_prestart_partial),
		cmocka_unit_test(test_failure_prestart_first_fails),
		cmocka_unit_test(test_failure_prestart_alloc_fails),
		cmocka_unit_test(test_failure_shutdown_now_after_failures),
		cmocka_unit_test(test_failure_destroy_after_create_failure_only),
		cmocka_unit_test(test_failure_prestart_ends_when_workers_expire),
		cmocka_unit_test(test_failure_wait_idle_woken_when_start_fails),
		cmocka_unit_test(test_failure_create_error_is_eagain),
		cmocka_unit_test(test_failure_shutdown_refusal_needs_no_memory),
		cmocka_unit_test(test_failure_try_execute_enomem),
		cmocka_unit_test(test_failure_worker_exits_before_its_id_is_stored),
		cmocka_unit_test(test_failure_per_worker_create_eagain),
	};

	tu_time_bound(0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
