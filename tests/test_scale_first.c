/* SPDX-License-Identifier: MIT */
/*
 * test_scale_first.c - TPE_POLICY_SCALE_FIRST, which grows the pool to max
 * before it queues. The eager pools of Tomcat and Dubbo that do this could
 * queue a task for a worker that looked idle while that worker was timing
 * out and leaving, stranding the task; libtpe decides "is a worker idle
 * for it?" and "may this worker leave?" under one lock. The checks S1-S8
 * are defined in doc/java-behaviours.md. The barrier test is what users
 * meet: tasks that wait for each other finish only if none of them waits
 * in the queue while the pool is below max.
 *
 * A task stranded in the queue shows up as a latch that never opens; every
 * such wait here is timed (tu_latch_wait_for, helpers.h) so a regression
 * fails the test instead of hanging it.
 */
#include "helpers.h"

#include <semaphore.h>
#include <string.h>

#define BOUND (10 * TU_S) /* far beyond any correct run; only bugs reach it */

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
	tpe_t *p = tu_pool_with(&(struct tu_pool_opts){
	    .policy = TPE_POLICY_SCALE_FIRST, .core = 2, .max = 4,
	    .queue = TPE_QUEUE_BOUNDED, .capacity = 10 });

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
	struct tu_saturation sat;
	struct tu_latch done;
	struct tu_blocker quick = { NULL, NULL, &done, 0 };

	(void)state;
	tu_latch_init(&done, 1);
	tpe_t *p = tu_pool_with(&(struct tu_pool_opts){
	    .policy = TPE_POLICY_SCALE_FIRST, .core = 2, .max = 4,
	    .keep_alive = TU_S * 3600 });

	tu_saturate(p, 3, 0, &sat);
	assert_int_equal(tu_stats(p).pool_size, 3);
	tu_unsaturate(&sat);
	/* All three workers go back to waiting (idle is counted in take). */
	assert_true(TU_EVENTUALLY(tu_stats(p).idle == 3, BOUND));

	assert_int_equal(tpe_execute(p, tu_blocker_fn, &quick), 0);
	assert_true(tu_latch_wait_for(&done, BOUND));
	assert_int_equal(tu_stats(p).pool_size, 3);
	assert_int_equal(tu_stats(p).largest_pool_size, 3);

	assert_int_equal(tpe_destroy(p), 0);
	tu_saturation_destroy(&sat);
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
		c.pool = tu_pool_with(&(struct tu_pool_opts){
		    .policy = TPE_POLICY_SCALE_FIRST, .core = 1, .max = 4,
		    .queue = TPE_QUEUE_BOUNDED, .capacity = 16,
		    .keep_alive = TU_S * 3600 });
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
 *
 * Besides "every task starts", the loop checks the scale-first invariant
 * (tpe_attr_set_policy(3)) on consistent snapshots
 * taken where it matters: by each submitter right after tpe_execute
 * returned (the moment its task may sit in the queue), and by the task
 * hooks on the worker (the moment a task left the queue, and the moment
 * its worker is about to look at the queue again). Below max, every queued
 * task must have a worker of its own (queue_is_claimed). A second phase
 * runs two submitters at once, so that tasks also queue at max.
 */

static long
iterations(long dflt)
{
	const char *e = getenv("TPE_TEST_ITERATIONS");

	return e != NULL ? atol(e) : dflt;
}

/*
 * The invariant, on one snapshot: a task is queued only while an idle
 * worker is claimed for it or the pool is at max. Below max, each queued
 * task needs a worker of its own that runs no task: an idle one, or one
 * still starting (counted in pool_size, in neither idle nor active, see
 * tpe_get_stats(3)), which takes from the queue as its first act.
 */
static bool
queue_is_claimed(const struct tpe_stats *s)
{
	return s->queued == 0 || s->pool_size >= s->max_size ||
	    (s->active <= s->pool_size &&
	    s->queued <= s->pool_size - s->active);
}

/* Invariant checks from several threads (none may call cmocka). */
struct inv_rec {
	pthread_mutex_t lock;
	long checks;          /* L */
	long queued_seen;     /* L: checks that saw a queued task */
	long violations;      /* L */
	struct tpe_stats bad; /* L: the first violating snapshot */
};

static void
inv_init(struct inv_rec *r)
{
	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->lock, NULL);
}

static void
inv_check(const tpe_t *pool, struct inv_rec *r)
{
	struct tpe_stats s;
	int rc = tpe_get_stats(pool, &s, sizeof(s));

	pthread_mutex_lock(&r->lock);
	r->checks++;
	if (rc == 0 && s.queued > 0)
		r->queued_seen++;
	if (rc != 0 || !queue_is_claimed(&s)) {
		if (r->violations++ == 0)
			r->bad = s;
	}
	pthread_mutex_unlock(&r->lock);
}

/* Asserts no check failed; prints the first bad snapshot otherwise. */
static void
inv_assert(struct inv_rec *r, const char *what)
{
	if (r->violations != 0)
		print_message("%s: %ld of %ld snapshots (%ld with a queued "
		    "task) broke the invariant; first: pool_size %zu max %zu "
		    "idle %zu active %zu queued %zu\n", what, r->violations,
		    r->checks, r->queued_seen, r->bad.pool_size,
		    r->bad.max_size, r->bad.idle, r->bad.active,
		    r->bad.queued);
	assert_int_equal(r->violations, 0);
	assert_true(r->checks > 0);
}

static void
inv_hook(tpe_t *pool, tpe_fn fn, void *arg, void *ctx)
{
	(void)fn;
	(void)arg;
	inv_check(pool, ctx);
}

/* One submitter: submit, check, wait for the task, place the next submit. */
struct s5_submitter {
	pthread_t thread;
	tpe_t *pool;
	long iters;
	sem_t sem;
	struct inv_rec *inv;
	int rc;        /* first tpe_execute error */
	int stranded;  /* a task did not run within BOUND */
};

static void *
s5_submit_loop(void *arg)
{
	struct s5_submitter *s = arg;
	long i;

	for (i = 0; i < s->iters; i++) {
		int64_t until = tu_now_ns() + (i % 41) * 1000;

		s->rc = tpe_execute(s->pool, tu_post_fn, &s->sem);
		if (s->rc != 0)
			break;
		inv_check(s->pool, s->inv);
		if (!tu_sem_wait_for(&s->sem, BOUND)) {
			s->stranded = 1;
			break;
		}
		while (tu_now_ns() < until)
			; /* place the next submit near the expiry */
	}
	return NULL;
}

static void
test_scale_first_keep_alive_races_submit(void **state)
{
	const int64_t keep_alive = 20000; /* 20 us */
	long n = iterations(100000), per;
	struct s5_submitter sub[2];
	struct inv_rec inv;
	struct tpe_stats s;
	int core, nsub, i;

	(void)state;
	for (nsub = 1; nsub <= 2; nsub++) {
		/* n submits in all: a quarter per (submitters, core) pair. */
		per = n / 4 / nsub > 0 ? n / 4 / nsub : 1;
		for (core = 0; core <= 1; core++) {
			tpe_t *p;

			inv_init(&inv);
			p = tu_pool_with(&(struct tu_pool_opts){
			    .policy = TPE_POLICY_SCALE_FIRST,
			    .core = (size_t)core, .max = 2,
			    .keep_alive = keep_alive, .allow_core_timeout = true,
			    .before = inv_hook, .after = inv_hook,
			    .task_hooks_ctx = &inv });
			for (i = 0; i < nsub; i++) {
				memset(&sub[i], 0, sizeof(sub[i]));
				sub[i].pool = p;
				sub[i].iters = per;
				sub[i].inv = &inv;
				sem_init(&sub[i].sem, 0, 0);
			}
			if (nsub == 2)
				assert_int_equal(pthread_create(&sub[1].thread,
				    NULL, s5_submit_loop, &sub[1]), 0);
			s5_submit_loop(&sub[0]);
			if (nsub == 2)
				assert_int_equal(pthread_join(sub[1].thread,
				    NULL), 0);
			for (i = 0; i < nsub; i++) {
				assert_int_equal(sub[i].rc, 0);
				assert_int_equal(sub[i].stranded, 0);
				sem_destroy(&sub[i].sem);
			}
			s = tu_stats(p);
			assert_int_equal(s.submitted, (uint64_t)(per * nsub));
			assert_int_equal(s.rejected, 0);
			assert_true(s.largest_pool_size <= 2);
			assert_int_equal(tpe_destroy(p), 0);
			inv_assert(&inv, nsub == 1 ? "one submitter" :
			    "two submitters");
			pthread_mutex_destroy(&inv.lock);
		}
	}
}

/*
 * S6: counter hygiene. Tasks leave the queue of a scale-first pool in every
 * way other than running: a discard-oldest drop, tpe_remove, tpe_purge of
 * cancelled futures. Afterwards, with max raised well above the pool size,
 * idle reuse still happens: 4 blockers on 4 idle workers start no thread
 * (a drifted queued or idle count would over-spawn, or leave a blocker
 * waiting in the queue), and only a 5th starts one. Last, a shutdown-now
 * drain hands the queue back in order and every count ends exact.
 */
static void
test_scale_first_counters_stay_exact(void **state)
{
	struct tu_latch started1, release1, started2, started3, release2;
	struct tu_blocker b1 = { &started1, &release1, NULL, 0 };
	struct tu_blocker b2 = { &started2, &release2, NULL, 0 };
	struct tu_blocker b3 = { &started3, &release2, NULL, 0 };
	struct tu_handbacks discards, drained;
	tpe_future_t *f1, *f2;
	struct tpe_stats s;
	tpe_t *p;
	size_t purged;
	void *res;
	int x = 0, y = 0, z = 0, w = 0, i;

	(void)state;
	tu_latch_init(&started1, 4);
	tu_latch_init(&release1, 1);
	tu_latch_init(&started2, 4);
	tu_latch_init(&started3, 1);
	tu_latch_init(&release2, 1);
	tu_handbacks_init(&discards);
	tu_handbacks_init(&drained);
	p = tu_pool_with(&(struct tu_pool_opts){
	    .policy = TPE_POLICY_SCALE_FIRST, .core = 1, .max = 4,
	    .queue = TPE_QUEUE_BOUNDED, .capacity = 4,
	    .rejection = TPE_REJECT_DISCARD_OLDEST, .discard = tu_handback_fn,
	    .discard_ctx = &discards, .keep_alive = TU_S * 3600 });

	/* At max (4 running), then a full queue: x, f1, f2, y. */
	for (i = 0; i < 4; i++)
		assert_int_equal(tpe_execute(p, tu_blocker_fn, &b1), 0);
	assert_true(tu_latch_wait_for(&started1, BOUND));
	assert_int_equal(tu_stats(p).pool_size, 4);
	assert_int_equal(tpe_execute(p, tu_count_fn, &x), 0);
	assert_int_equal(tpe_submit(p, tu_nop_call, &x, &f1), 0);
	assert_int_equal(tpe_submit(p, tu_nop_call, &x, &f2), 0);
	assert_int_equal(tpe_execute(p, tu_count_fn, &y), 0);
	s = tu_stats(p);
	assert_int_equal(s.queued, 4);
	assert_int_equal(s.rejected, 0);

	/* Discard-oldest: z takes the slot of x, the head. */
	assert_int_equal(tpe_execute(p, tu_count_fn, &z), 0);
	assert_int_equal(tu_handbacks_count(&discards), 1);
	assert_ptr_equal(discards.fn[0], tu_count_fn);
	assert_ptr_equal(discards.arg[0], &x);
	s = tu_stats(p);
	assert_int_equal(s.queued, 4);
	assert_int_equal(s.rejected, 1);
	assert_int_equal(s.pool_size, 4);

	/* remove y; purge the cancelled f1, f2: only z is left. */
	assert_int_equal(tpe_remove(p, tu_count_fn, &y), 0);
	assert_int_equal(tu_stats(p).queued, 3);
	assert_int_equal(tpe_future_cancel(f1), 0);
	assert_int_equal(tpe_future_cancel(f2), 0);
	assert_int_equal(tpe_purge(p, &purged), 0);
	assert_int_equal(purged, 2);
	assert_int_equal(tu_handbacks_count(&discards), 3);
	assert_null(discards.fn[1]);
	assert_null(discards.fn[2]);
	s = tu_stats(p);
	assert_int_equal(s.queued, 1);
	assert_int_equal(s.active, 4);
	assert_int_equal(s.idle, 0);

	/* z runs; then all four workers wait. */
	tu_latch_count_down(&release1);
	assert_true(TU_EVENTUALLY(tu_stats(p).idle == 4 &&
	    tu_stats(p).completed == 5, BOUND));
	s = tu_stats(p);
	assert_int_equal(s.queued, 0);
	assert_int_equal(s.active, 0);
	assert_int_equal(s.pool_size, 4);
	assert_int_equal(tu_load(&z), 1);

	/* Room to over-spawn: max 8 with 4 idle workers. */
	assert_int_equal(tpe_set_pool_size(p, 1, 8), 0);
	s = tu_stats(p);
	assert_int_equal(s.pool_size, 4);
	assert_int_equal(s.max_size, 8);
	for (i = 0; i < 4; i++)
		assert_int_equal(tpe_execute(p, tu_blocker_fn, &b2), 0);
	/* All four run at once, on the idle workers: no thread started. */
	assert_true(tu_latch_wait_for(&started2, BOUND));
	s = tu_stats(p);
	assert_int_equal(s.pool_size, 4);
	assert_int_equal(s.largest_pool_size, 4);
	assert_int_equal(s.active, 4);
	assert_int_equal(s.queued, 0);
	/* The check is sharp: a 5th finds no idle worker and starts one. */
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &b3), 0);
	assert_true(tu_latch_wait_for(&started3, BOUND));
	s = tu_stats(p);
	assert_int_equal(s.pool_size, 5);
	assert_int_equal(s.largest_pool_size, 5);
	assert_int_equal(s.queued, 0);

	/* At max again (5): two tasks queue; shutdown-now hands them back. */
	assert_int_equal(tpe_set_pool_size(p, 1, 5), 0);
	assert_int_equal(tpe_execute(p, tu_count_fn, &w), 0);
	assert_int_equal(tpe_execute(p, tu_count_fn, &w), 0);
	assert_int_equal(tu_stats(p).queued, 2);
	assert_int_equal(tpe_shutdown_now(p, tu_handback_fn, &drained), 0);
	assert_int_equal(tu_handbacks_count(&drained), 2);
	assert_ptr_equal(drained.fn[0], tu_count_fn);
	assert_ptr_equal(drained.arg[0], &w);
	assert_ptr_equal(drained.fn[1], tu_count_fn);
	assert_ptr_equal(drained.arg[1], &w);
	s = tu_stats(p);
	assert_int_equal(s.queued, 0);
	assert_int_equal(s.idle, 0);
	assert_int_equal(s.active, 5);
	assert_int_equal(s.pool_size, 5);

	tu_latch_count_down(&release2);
	assert_int_equal(tpe_await_termination(p, BOUND), 0);
	s = tu_stats(p);
	assert_int_equal(s.pool_size, 0);
	assert_int_equal(s.active, 0);
	assert_int_equal(s.idle, 0);
	assert_int_equal(s.queued, 0);
	assert_int_equal(s.largest_pool_size, 5);
	/* 4 + x f1 f2 y z + 5 + 2 accepted; 4 + z + 5 ran; only z's
	 * submission reached the rejection policy. */
	assert_int_equal(s.submitted, 16);
	assert_int_equal(s.completed, 10);
	assert_int_equal(s.rejected, 1);
	assert_int_equal(tu_load(&x), 0);
	assert_int_equal(tu_load(&y), 0);
	assert_int_equal(tu_load(&w), 0);
	assert_int_equal(tu_load(&b1.ran), 4);
	assert_int_equal(tu_load(&b2.ran), 4);
	assert_int_equal(tu_load(&b3.ran), 1);
	assert_int_equal(tu_handbacks_count(&discards), 3);
	assert_int_equal(tpe_future_get(f1, 0, &res), ECANCELED);
	assert_int_equal(tpe_future_get(f2, 0, &res), ECANCELED);

	tpe_future_release(f1);
	tpe_future_release(f2);
	assert_int_equal(tpe_destroy(p), 0);
	tu_latch_destroy(&started1);
	tu_latch_destroy(&release1);
	tu_latch_destroy(&started2);
	tu_latch_destroy(&started3);
	tu_latch_destroy(&release2);
	pthread_mutex_destroy(&discards.lock);
	pthread_mutex_destroy(&drained.lock);
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
		memset(&r, 0, sizeof(r));
		r.pool = tu_pool_with(&(struct tu_pool_opts){
		    .policy = TPE_POLICY_SCALE_FIRST, .core = 1, .max = 3,
		    .queue = TPE_QUEUE_BOUNDED, .capacity = 64,
		    .discard = slot_handback });
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
	tpe_t *p = tu_pool_with(&(struct tu_pool_opts){
	    .policy = TPE_POLICY_SCALE_FIRST, .core = 1, .max = 2,
	    .queue = TPE_QUEUE_BOUNDED, .capacity = 8,
	    .keep_alive = TU_S * 3600 });

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
 * The barrier test: PARTIES tasks that all wait for each other complete
 * only if none is queued behind another, that is if the pool gives each
 * its own thread before queueing (queue-first, with an unbounded queue,
 * would stop at core and deadlock). Submitted from 8 threads at once.
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
		c.pool = tu_pool_with(&(struct tu_pool_opts){
		    .policy = TPE_POLICY_SCALE_FIRST, .core = 2,
		    .max = PARTIES });
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
	struct tu_saturation sat;

	(void)state;
	tpe_t *p = tu_pool(2, 4, TPE_QUEUE_BOUNDED, 10, TPE_REJECT_ABORT);

	tu_saturate(p, 2, 2, &sat);
	assert_int_equal(tu_stats(p).pool_size, 2);
	assert_int_equal(tu_stats(p).queued, 2);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	tu_saturation_destroy(&sat);
}

/* A hand-off queue: scale-first behaves like queue-first (never queues). */
static void
test_scale_first_handoff(void **state)
{
	struct tu_saturation sat;
	int x = 0;

	(void)state;
	tpe_t *p = tu_pool_with(&(struct tu_pool_opts){
	    .policy = TPE_POLICY_SCALE_FIRST, .core = 0, .max = 3,
	    .queue = TPE_QUEUE_HANDOFF });

	tu_saturate(p, 3, 0, &sat);
	assert_int_equal(tpe_execute(p, tu_count_fn, &x), EAGAIN);
	assert_int_equal(tu_stats(p).queued, 0);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	tu_saturation_destroy(&sat);
}

/* Every rejection policy still applies once the re-enqueue finds no room. */
static void
test_scale_first_caller_runs_when_full(void **state)
{
	struct tu_saturation sat;
	tpe_t *p;
	int x = 0;

	(void)state;
	p = tu_pool_with(&(struct tu_pool_opts){
	    .policy = TPE_POLICY_SCALE_FIRST, .core = 1, .max = 1,
	    .queue = TPE_QUEUE_BOUNDED, .capacity = 1,
	    .rejection = TPE_REJECT_CALLER_RUNS });

	tu_saturate(p, 1, 0, &sat);
	assert_int_equal(tpe_execute(p, tu_count_fn, &x), 0); /* re-enqueued */
	assert_int_equal(tu_stats(p).queued, 1);
	assert_int_equal(tpe_execute(p, tu_count_fn, &x), 0); /* caller runs */
	assert_int_equal(tu_load(&x), 1);
	assert_int_equal(tu_stats(p).rejected, 1);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(tu_load(&x), 2);
	tu_saturation_destroy(&sat);
}

/* Discard-oldest under scale-first: the freed slot goes to the new task. */
static void
test_scale_first_discard_oldest(void **state)
{
	struct tu_saturation sat;
	tpe_t *p;
	int x = 0, y = 0;

	(void)state;
	p = tu_pool_with(&(struct tu_pool_opts){
	    .policy = TPE_POLICY_SCALE_FIRST, .core = 1, .max = 1,
	    .queue = TPE_QUEUE_BOUNDED, .capacity = 1,
	    .rejection = TPE_REJECT_DISCARD_OLDEST });

	tu_saturate(p, 1, 0, &sat);
	assert_int_equal(tpe_execute(p, tu_count_fn, &x), 0); /* queued */
	assert_int_equal(tpe_execute(p, tu_count_fn, &y), 0); /* replaces x */
	assert_int_equal(tu_stats(p).queued, 1);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(x, 0);
	assert_int_equal(y, 1);
	tu_saturation_destroy(&sat);
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
