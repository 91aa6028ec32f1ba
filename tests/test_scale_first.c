/* SPDX-License-Identifier: MIT */
/*
 * test_scale_first.c - TPE_POLICY_SCALE_FIRST: S1-S8 of
 * research/java_tpe.md §c.4 and the barrier test of issue 3.
 *
 * A task stranded in the queue shows up as a latch that never opens; every
 * such wait here is timed (tu_latch_wait_for) so a regression fails the
 * test instead of hanging it.
 */
#include "testutil.h"

#include <semaphore.h>
#include <string.h>

#define BOUND (10 * TU_S) /* far beyond any correct run; only bugs reach it */

/* Waits until the latch opens or `timeout_ns` passes; true if it opened. */
static bool
tu_latch_wait_for(struct tu_latch *l, int64_t timeout_ns)
{
	struct timespec ts;
	bool open;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += timeout_ns / TU_S;
	ts.tv_nsec += timeout_ns % TU_S;
	if (ts.tv_nsec >= TU_S) {
		ts.tv_sec++;
		ts.tv_nsec -= TU_S;
	}
	pthread_mutex_lock(&l->lock);
	while (l->count > 0 &&
	    pthread_cond_timedwait(&l->cond, &l->lock, &ts) == 0)
		;
	open = l->count == 0;
	pthread_mutex_unlock(&l->lock);
	return open;
}

static tpe_t *
scale_pool(size_t core, size_t max, enum tpe_queue_kind kind, size_t cap,
    int64_t keep_alive_ns)
{
	tpe_attr_t *a;
	tpe_t *p;

	assert_int_equal(tpe_attr_create(&a), 0);
	assert_int_equal(tpe_attr_set_pool_size(a, core, max), 0);
	assert_int_equal(tpe_attr_set_queue(a, kind, cap), 0);
	assert_int_equal(tpe_attr_set_policy(a, TPE_POLICY_SCALE_FIRST), 0);
	if (keep_alive_ns >= 0)
		assert_int_equal(tpe_attr_set_keep_alive(a, keep_alive_ns), 0);
	assert_int_equal(tpe_create(&p, a), 0);
	tpe_attr_destroy(a);
	return p;
}

/* S1 + S2: grow to max before queueing, then queue, then reject. */
static void
test_scale_first_grows_then_queues_then_rejects(void **state)
{
	struct tu_latch started, release;
	struct tu_blocker b = { &started, &release, NULL, 0 };
	struct tpe_stats s;
	int i;

	(void)state;
	tu_latch_init(&started, 4);
	tu_latch_init(&release, 1);
	tpe_t *p = scale_pool(2, 4, TPE_QUEUE_BOUNDED, 10, -1);

	for (i = 0; i < 4; i++)
		assert_int_equal(tpe_execute(p, tu_blocker_fn, &b), 0);
	assert_true(tu_latch_wait_for(&started, BOUND));
	s = tu_stats(p);
	assert_int_equal(s.pool_size, 4); /* queue-first would give 2 */
	assert_int_equal(s.queued, 0);
	assert_int_equal(s.active, 4);

	/* At max: the 5th..14th queue; saturated size = max + capacity. */
	for (i = 0; i < 10; i++) {
		assert_int_equal(tpe_execute(p, tu_blocker_fn, &b), 0);
		assert_int_equal(tu_stats(p).queued, (size_t)i + 1);
	}
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &b), EAGAIN);
	s = tu_stats(p);
	assert_int_equal(s.pool_size, 4);
	assert_int_equal(s.queued, 10);
	assert_int_equal(s.rejected, 1);
	assert_int_equal(s.submitted, 14);

	tu_latch_count_down(&release);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(tu_load(&b.ran), 14);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
}

/* S3: an idle worker takes the task; no thread is started. */
static void
test_scale_first_reuses_idle_worker(void **state)
{
	struct tu_latch started, release, done;
	struct tu_blocker b = { &started, &release, NULL, 0 };
	struct tu_blocker quick = { NULL, NULL, &done, 0 };
	int i;

	(void)state;
	tu_latch_init(&started, 3);
	tu_latch_init(&release, 1);
	tu_latch_init(&done, 1);
	tpe_t *p = scale_pool(2, 4, TPE_QUEUE_UNBOUNDED, 0, TU_S * 3600);

	for (i = 0; i < 3; i++)
		assert_int_equal(tpe_execute(p, tu_blocker_fn, &b), 0);
	assert_true(tu_latch_wait_for(&started, BOUND));
	assert_int_equal(tu_stats(p).pool_size, 3);
	tu_latch_count_down(&release);
	/* All three workers go back to waiting (idle is counted in take). */
	assert_true(TU_EVENTUALLY(tu_stats(p).idle == 3, BOUND));

	assert_int_equal(tpe_execute(p, tu_blocker_fn, &quick), 0);
	assert_true(tu_latch_wait_for(&done, BOUND));
	assert_int_equal(tu_stats(p).pool_size, 3);
	assert_int_equal(tu_stats(p).largest_pool_size, 3);

	assert_int_equal(tpe_destroy(p), 0);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
	tu_latch_destroy(&done);
}

/* S4: a burst from 4 threads at once onto an idle pool with core 1. */
struct burst_ctx {
	tpe_t *pool;
	pthread_barrier_t go;
	struct tu_blocker *b;
	int rc;
};

static void *
burst_submitter(void *arg)
{
	struct burst_ctx *c = arg;
	int rc;

	pthread_barrier_wait(&c->go);
	rc = tpe_execute(c->pool, tu_blocker_fn, c->b);
	if (rc != 0)
		__atomic_store_n(&c->rc, rc, __ATOMIC_SEQ_CST);
	return NULL;
}

static void
test_scale_first_burst_from_idle(void **state)
{
	struct tu_latch started, release;
	struct tu_blocker b = { &started, &release, NULL, 0 };
	struct burst_ctx c = { .b = &b };
	pthread_t th[4];
	size_t n;
	int i, round;

	(void)state;
	for (round = 0; round < 50; round++) {
		tu_latch_init(&started, 4);
		tu_latch_init(&release, 1);
		c.pool = scale_pool(1, 4, TPE_QUEUE_BOUNDED, 16, TU_S * 3600);
		c.rc = 0;
		assert_int_equal(tpe_prestart_core_threads(c.pool, &n), 0);
		assert_int_equal(n, 1);
		assert_true(TU_EVENTUALLY(tu_stats(c.pool).idle == 1, BOUND));
		pthread_barrier_init(&c.go, NULL, 4);
		for (i = 0; i < 4; i++)
			pthread_create(&th[i], NULL, burst_submitter, &c);
		for (i = 0; i < 4; i++)
			pthread_join(th[i], NULL);
		assert_int_equal(c.rc, 0);
		/* All four run at once: none waits behind another. */
		assert_true(tu_latch_wait_for(&started, BOUND));
		assert_int_equal(tu_stats(c.pool).pool_size, 4);
		assert_int_equal(tu_stats(c.pool).queued, 0);
		tu_latch_count_down(&release);
		assert_int_equal(tpe_destroy(c.pool), 0);
		pthread_barrier_destroy(&c.go);
		tu_latch_destroy(&started);
		tu_latch_destroy(&release);
	}
}

/*
 * S5: keep-alive expiry racing a submit (Tomcat BZ 65454, Elasticsearch
 * #124667). With core 0 the only worker may be timing out at the moment
 * the task arrives; the task must still start. Looped; the submit is
 * placed around the worker's keep-alive deadline by a varying delay.
 */
static void
signal_sem(void *arg)
{
	sem_post(arg);
}

static void
timed_sem_wait_or_fail(sem_t *sem)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += BOUND / TU_S;
	while (sem_timedwait(sem, &ts) != 0)
		assert_int_equal(errno, EINTR); /* ETIMEDOUT: a stranded task */
}

static long
iterations(long dflt)
{
	const char *e = getenv("TPE_TEST_ITERATIONS");

	return e != NULL ? atol(e) : dflt;
}

static void
test_scale_first_keep_alive_races_submit(void **state)
{
	const int64_t keep_alive = 20000; /* 20 us */
	long i, n = iterations(100000);
	struct tpe_stats s;
	sem_t sem;
	int core;

	(void)state;
	sem_init(&sem, 0, 0);
	for (core = 0; core <= 1; core++) {
		tpe_attr_t *a;
		tpe_t *p;

		assert_int_equal(tpe_attr_create(&a), 0);
		assert_int_equal(tpe_attr_set_pool_size(a, core, 2), 0);
		assert_int_equal(tpe_attr_set_policy(a, TPE_POLICY_SCALE_FIRST), 0);
		assert_int_equal(tpe_attr_set_keep_alive(a, keep_alive), 0);
		assert_int_equal(tpe_attr_set_allow_core_timeout(a, true), 0);
		assert_int_equal(tpe_create(&p, a), 0);
		tpe_attr_destroy(a);
		for (i = 0; i < n / 2; i++) {
			int64_t until = tu_now_ns() + (i % 41) * 1000;

			assert_int_equal(tpe_execute(p, signal_sem, &sem), 0);
			timed_sem_wait_or_fail(&sem);
			while (tu_now_ns() < until)
				; /* place the next submit near the expiry */
		}
		s = tu_stats(p);
		assert_int_equal(s.submitted, (uint64_t)(n / 2));
		assert_true(s.largest_pool_size <= 2);
		assert_int_equal(tpe_destroy(p), 0);
	}
	sem_destroy(&sem);
}

/*
 * S6: counter hygiene. Tasks leave the pool by remove, purge and a
 * discard-oldest drop; afterwards idle reuse still happens (no drifting
 * counter makes the pool over-spawn).
 */
static void *
ident(void *arg)
{
	return arg;
}

static void
test_scale_first_counters_stay_exact(void **state)
{
	struct tu_latch started, release, done;
	struct tu_blocker b = { &started, &release, NULL, 0 };
	struct tu_blocker quick = { NULL, NULL, &done, 0 };
	tpe_future_t *f1, *f2;
	size_t purged;
	int x = 0;

	(void)state;
	tu_latch_init(&started, 2);
	tu_latch_init(&release, 1);
	tu_latch_init(&done, 1);
	tpe_t *p = scale_pool(1, 2, TPE_QUEUE_BOUNDED, 4, TU_S * 3600);

	assert_int_equal(tpe_execute(p, tu_blocker_fn, &b), 0);
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &b), 0);
	assert_true(tu_latch_wait_for(&started, BOUND));
	/* At max: these queue. */
	assert_int_equal(tpe_execute(p, tu_count_fn, &x), 0);
	assert_int_equal(tpe_submit(p, ident, &x, &f1), 0);
	assert_int_equal(tpe_submit(p, ident, &x, &f2), 0);
	assert_int_equal(tu_stats(p).queued, 3);
	assert_int_equal(tpe_remove(p, tu_count_fn, &x), 0);
	assert_int_equal(tpe_future_cancel(f1), 0);
	assert_int_equal(tpe_future_cancel(f2), 0);
	assert_int_equal(tpe_purge(p, &purged), 0);
	assert_int_equal(purged, 2);
	assert_int_equal(tu_stats(p).queued, 0);
	tu_latch_count_down(&release);
	assert_true(TU_EVENTUALLY(tu_stats(p).idle == 2, BOUND));

	/* Two idle workers: two more tasks start no thread. */
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &quick), 0);
	assert_true(tu_latch_wait_for(&done, BOUND));
	assert_int_equal(tu_stats(p).pool_size, 2);
	assert_int_equal(tu_stats(p).largest_pool_size, 2);
	assert_int_equal(tu_load(&x), 0);

	tpe_future_release(f1);
	tpe_future_release(f2);
	assert_int_equal(tpe_destroy(p), 0);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
	tu_latch_destroy(&done);
}

/* S7: submissions racing shutdown / shutdown-now: exactly-once disposition. */
#define RACE_TASKS 2000
#define RACE_THREADS 4

struct race {
	tpe_t *pool;
	pthread_barrier_t go;
	int slot[RACE_THREADS * RACE_TASKS]; /* ran or handed back: +1 */
	int refused[RACE_THREADS * RACE_TASKS];
	int base;
};

struct race_arg {
	struct race *r;
	int id;
};

static void
slot_fn(void *arg)
{
	__atomic_add_fetch((int *)arg, 1, __ATOMIC_SEQ_CST);
}

static void
slot_handback(tpe_fn fn, void *arg, void *ctx)
{
	(void)ctx;
	assert_ptr_equal(fn, slot_fn);
	__atomic_add_fetch((int *)arg, 1, __ATOMIC_SEQ_CST);
}

static void *
race_submitter(void *arg)
{
	struct race_arg *ra = arg;
	struct race *r = ra->r;
	int i;

	pthread_barrier_wait(&r->go);
	for (i = 0; i < RACE_TASKS; i++) {
		int k = ra->id * RACE_TASKS + i;

		if (tpe_execute(r->pool, slot_fn, &r->slot[k]) != 0)
			r->refused[k] = 1;
	}
	return NULL;
}

static void
test_scale_first_submit_races_shutdown(void **state)
{
	static struct race r;
	struct race_arg ra[RACE_THREADS];
	pthread_t th[RACE_THREADS];
	int round, i;

	(void)state;
	for (round = 0; round < 40; round++) {
		tpe_attr_t *a;

		memset(&r, 0, sizeof(r));
		assert_int_equal(tpe_attr_create(&a), 0);
		assert_int_equal(tpe_attr_set_pool_size(a, 1, 3), 0);
		assert_int_equal(tpe_attr_set_queue(a, TPE_QUEUE_BOUNDED, 64), 0);
		assert_int_equal(tpe_attr_set_policy(a, TPE_POLICY_SCALE_FIRST), 0);
		assert_int_equal(tpe_attr_set_discard_callback(a, slot_handback,
		    NULL), 0);
		assert_int_equal(tpe_create(&r.pool, a), 0);
		tpe_attr_destroy(a);
		pthread_barrier_init(&r.go, NULL, RACE_THREADS + 1);
		for (i = 0; i < RACE_THREADS; i++) {
			ra[i].r = &r;
			ra[i].id = i;
			pthread_create(&th[i], NULL, race_submitter, &ra[i]);
		}
		pthread_barrier_wait(&r.go);
		tu_sleep_ns((round % 8) * 50000); /* vary where shutdown lands */
		if (round % 2)
			assert_int_equal(tpe_shutdown_now(r.pool, slot_handback,
			    NULL), 0);
		else
			assert_int_equal(tpe_shutdown(r.pool), 0);
		for (i = 0; i < RACE_THREADS; i++)
			pthread_join(th[i], NULL);
		assert_int_equal(tpe_destroy(r.pool), 0);
		for (i = 0; i < RACE_THREADS * RACE_TASKS; i++)
			assert_int_equal(r.slot[i] + r.refused[i], 1);
		pthread_barrier_destroy(&r.go);
	}
}

/*
 * S8: raising max while tasks are queued starts workers for them; lowering
 * max lets the surplus leave once idle.
 */
static void
test_scale_first_resize(void **state)
{
	struct tu_latch started, release;
	struct tu_blocker b = { &started, &release, NULL, 0 };
	int i;

	(void)state;
	tu_latch_init(&started, 4);
	tu_latch_init(&release, 1);
	tpe_t *p = scale_pool(1, 2, TPE_QUEUE_BOUNDED, 8, TU_S * 3600);

	for (i = 0; i < 4; i++)
		assert_int_equal(tpe_execute(p, tu_blocker_fn, &b), 0);
	assert_int_equal(tu_stats(p).queued, 2);
	assert_int_equal(tpe_set_pool_size(p, 1, 4), 0);
	assert_true(tu_latch_wait_for(&started, BOUND));
	assert_int_equal(tu_stats(p).pool_size, 4);
	assert_int_equal(tu_stats(p).queued, 0);

	assert_int_equal(tpe_set_pool_size(p, 1, 2), 0);
	tu_latch_count_down(&release);
	assert_true(TU_EVENTUALLY(tu_stats(p).pool_size == 2, BOUND));
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(tu_load(&b.ran), 4);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
}

/*
 * Issue 3's barrier test: B tasks that all wait for each other complete
 * only if none is queued behind another. Submitted from 8 threads at once.
 */
#define PARTIES 48
#define SUBMITTERS 8

struct barrier_ctx {
	tpe_t *pool;
	pthread_barrier_t go;
	struct tu_latch all_arrived;
	struct tu_latch finished;
	int timed_out;
};

static void
party_fn(void *arg)
{
	struct barrier_ctx *c = arg;

	tu_latch_count_down(&c->all_arrived);
	if (!tu_latch_wait_for(&c->all_arrived, BOUND))
		__atomic_store_n(&c->timed_out, 1, __ATOMIC_SEQ_CST);
	tu_latch_count_down(&c->finished);
}

static void *
party_submitter(void *arg)
{
	struct barrier_ctx *c = arg;
	int i;

	pthread_barrier_wait(&c->go);
	for (i = 0; i < PARTIES / SUBMITTERS; i++)
		assert_int_equal(tpe_execute(c->pool, party_fn, c), 0);
	return NULL;
}

static void
test_scale_first_barrier_parties_all_run(void **state)
{
	struct barrier_ctx c;
	pthread_t th[SUBMITTERS];
	int i, round;

	(void)state;
	for (round = 0; round < 5; round++) {
		memset(&c, 0, sizeof(c));
		c.pool = scale_pool(2, PARTIES, TPE_QUEUE_UNBOUNDED, 0, -1);
		tu_latch_init(&c.all_arrived, PARTIES);
		tu_latch_init(&c.finished, PARTIES);
		pthread_barrier_init(&c.go, NULL, SUBMITTERS);
		for (i = 0; i < SUBMITTERS; i++)
			pthread_create(&th[i], NULL, party_submitter, &c);
		for (i = 0; i < SUBMITTERS; i++)
			pthread_join(th[i], NULL);
		assert_true(tu_latch_wait_for(&c.finished, 2 * BOUND));
		assert_int_equal(c.timed_out, 0);
		assert_int_equal(tu_stats(c.pool).queued, 0);
		assert_int_equal(tpe_destroy(c.pool), 0);
		pthread_barrier_destroy(&c.go);
		tu_latch_destroy(&c.all_arrived);
		tu_latch_destroy(&c.finished);
	}
}

/* The same program under queue-first cannot complete: the control case. */
static void
test_scale_first_queue_first_would_queue(void **state)
{
	struct tu_latch started, release;
	struct tu_blocker b = { &started, &release, NULL, 0 };
	int i;

	(void)state;
	tu_latch_init(&started, 2);
	tu_latch_init(&release, 1);
	tpe_t *p = tu_pool(2, 4, TPE_QUEUE_BOUNDED, 10, TPE_REJECT_ABORT);

	for (i = 0; i < 4; i++)
		assert_int_equal(tpe_execute(p, tu_blocker_fn, &b), 0);
	assert_true(tu_latch_wait_for(&started, BOUND));
	assert_int_equal(tu_stats(p).pool_size, 2);
	assert_int_equal(tu_stats(p).queued, 2);
	tu_latch_count_down(&release);
	assert_int_equal(tpe_destroy(p), 0);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
}

/* A hand-off queue: scale-first behaves like queue-first (never queues). */
static void
test_scale_first_handoff(void **state)
{
	struct tu_latch started, release;
	struct tu_blocker b = { &started, &release, NULL, 0 };
	int i;

	(void)state;
	tu_latch_init(&started, 3);
	tu_latch_init(&release, 1);
	tpe_t *p = scale_pool(0, 3, TPE_QUEUE_HANDOFF, 0, -1);

	for (i = 0; i < 3; i++)
		assert_int_equal(tpe_execute(p, tu_blocker_fn, &b), 0);
	assert_true(tu_latch_wait_for(&started, BOUND));
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &b), EAGAIN);
	assert_int_equal(tu_stats(p).queued, 0);
	tu_latch_count_down(&release);
	assert_int_equal(tpe_destroy(p), 0);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
}

/* Every rejection policy still applies once the re-enqueue finds no room. */
static void
test_scale_first_caller_runs_when_full(void **state)
{
	struct tu_latch started, release;
	struct tu_blocker b = { &started, &release, NULL, 0 };
	tpe_attr_t *a;
	tpe_t *p;
	int x = 0;

	(void)state;
	tu_latch_init(&started, 1);
	tu_latch_init(&release, 1);
	assert_int_equal(tpe_attr_create(&a), 0);
	assert_int_equal(tpe_attr_set_pool_size(a, 1, 1), 0);
	assert_int_equal(tpe_attr_set_queue(a, TPE_QUEUE_BOUNDED, 1), 0);
	assert_int_equal(tpe_attr_set_policy(a, TPE_POLICY_SCALE_FIRST), 0);
	assert_int_equal(tpe_attr_set_rejection(a, TPE_REJECT_CALLER_RUNS), 0);
	assert_int_equal(tpe_create(&p, a), 0);
	tpe_attr_destroy(a);

	assert_int_equal(tpe_execute(p, tu_blocker_fn, &b), 0);
	assert_true(tu_latch_wait_for(&started, BOUND));
	assert_int_equal(tpe_execute(p, tu_count_fn, &x), 0); /* re-enqueued */
	assert_int_equal(tu_stats(p).queued, 1);
	assert_int_equal(tpe_execute(p, tu_count_fn, &x), 0); /* caller runs */
	assert_int_equal(tu_load(&x), 1);
	assert_int_equal(tu_stats(p).rejected, 1);
	tu_latch_count_down(&release);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(tu_load(&x), 2);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
}

/* Discard-oldest under scale-first: the freed slot goes to the new task. */
static void
test_scale_first_discard_oldest(void **state)
{
	struct tu_latch started, release;
	struct tu_blocker b = { &started, &release, NULL, 0 };
	tpe_attr_t *a;
	tpe_t *p;
	int x = 0, y = 0;

	(void)state;
	tu_latch_init(&started, 1);
	tu_latch_init(&release, 1);
	assert_int_equal(tpe_attr_create(&a), 0);
	assert_int_equal(tpe_attr_set_pool_size(a, 1, 1), 0);
	assert_int_equal(tpe_attr_set_queue(a, TPE_QUEUE_BOUNDED, 1), 0);
	assert_int_equal(tpe_attr_set_policy(a, TPE_POLICY_SCALE_FIRST), 0);
	assert_int_equal(tpe_attr_set_rejection(a, TPE_REJECT_DISCARD_OLDEST),
	    0);
	assert_int_equal(tpe_create(&p, a), 0);
	tpe_attr_destroy(a);

	assert_int_equal(tpe_execute(p, tu_blocker_fn, &b), 0);
	assert_true(tu_latch_wait_for(&started, BOUND));
	assert_int_equal(tpe_execute(p, tu_count_fn, &x), 0); /* queued */
	assert_int_equal(tpe_execute(p, tu_count_fn, &y), 0); /* replaces x */
	assert_int_equal(tu_stats(p).queued, 1);
	tu_latch_count_down(&release);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(x, 0);
	assert_int_equal(y, 1);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scale_first_grows_then_queues_then_rejects),
		cmocka_unit_test(test_scale_first_reuses_idle_worker),
		cmocka_unit_test(test_scale_first_burst_from_idle),
		cmocka_unit_test(test_scale_first_keep_alive_races_submit),
		cmocka_unit_test(test_scale_first_counters_stay_exact),
		cmocka_unit_test(test_scale_first_submit_races_shutdown),
		cmocka_unit_test(test_scale_first_resize),
		cmocka_unit_test(test_scale_first_barrier_parties_all_run),
		cmocka_unit_test(test_scale_first_queue_first_would_queue),
		cmocka_unit_test(test_scale_first_handoff),
		cmocka_unit_test(test_scale_first_caller_runs_when_full),
		cmocka_unit_test(test_scale_first_discard_oldest),
	};

	tu_time_bound(0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
