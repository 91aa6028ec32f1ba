/* SPDX-License-Identifier: MIT */
/*
 * test_per_worker.c - TPE_QUEUE_PER_WORKER: the fixed pool of per-worker
 * stacks (the stacks engine, lib/engine/stacks*.c).
 *
 * White-box where a state cannot be built from outside: the tests set the
 * workers' idle spin to 0 (tpe__stacks_spin_ns) so that an idle worker
 * sleeps at once and every submission races with a worker going to sleep,
 * and read how many workers sleep (tpe__stacks_sleepers).
 * TPE_TEST_FILTER=<case> runs one case (the mutant check).
 *
 * The exactly-once stress runs 4 submitters x TPE_PW_STRESS_TASKS tasks
 * (default 2 x 10^5 each in make check; make check-stress runs 10^6).
 */
#include <string.h>

#include "helpers.h"

#include "pool/pool.h"
#include "engine/stacks.h"

#define EV_TIMEOUT (10 * TU_S)

/* A per-worker pool of n workers with the given extra knobs. */
static tpe_t *
pw_pool_with(size_t n, struct tu_pool_opts o)
{
	o.core = o.max = n;
	o.queue = TPE_QUEUE_PER_WORKER;
	return tu_pool_with(&o);
}

static tpe_t *
pw_pool(size_t n)
{
	return pw_pool_with(n, (struct tu_pool_opts){ 0 });
}

static size_t
sleepers(tpe_t *p)
{
	return tpe__stacks_sleepers(p->engine);
}

/* Every test starts with the default spin; some set it to 0. */
static int
reset_spin(void **state)
{
	(void)state;
	tpe__stacks_spin_ns = 50000;
	/* A test that failed leaves no hook behind. */
	__atomic_store_n(&tpe__stacks_steal_hook, NULL, __ATOMIC_SEQ_CST);
	__atomic_store_n(&tpe__stacks_sleep_hook, NULL, __ATOMIC_SEQ_CST);
	__atomic_store_n(&tpe__stacks_yield_hook, NULL, __ATOMIC_SEQ_CST);
	__atomic_store_n(&tpe__stacks_watch_hook, NULL, __ATOMIC_SEQ_CST);
	__atomic_store_n(&tpe__stacks_batch_hook, NULL, __ATOMIC_SEQ_CST);
	return 0;
}

/* ---- attributes and the fixed pool's refusals ------------------------- */

/*
 * A refused setter says EINVAL and leaves the attribute object as it was
 * (white-box: the whole struct, byte for byte), so a caller that goes on
 * after the refusal gets the pool it had set up.
 */
#define assert_refused(a, call)                                            \
	do {                                                               \
		struct tpe_attr before_;                                   \
                                                                           \
		memcpy(&before_, (a), sizeof(before_));                    \
		assert_int_equal((call), EINVAL);                          \
		assert_memory_equal((a), &before_, sizeof(before_));       \
	} while (0)

static void
test_per_worker_attr_rules(void **state)
{
	tpe_attr_t *a;

	(void)state;
	assert_int_equal(tpe_attr_create(&a), 0);
	assert_refused(a, tpe_attr_set_queue(a, TPE_QUEUE_PER_WORKER, 1));
	/* Only a fixed pool: core == max, either order of the setters. */
	assert_int_equal(tpe_attr_set_pool_size(a, 1, 2), 0);
	assert_refused(a, tpe_attr_set_queue(a, TPE_QUEUE_PER_WORKER, 0));
	assert_int_equal(tpe_attr_set_pool_size(a, 2, 2), 0);
	assert_int_equal(tpe_attr_set_queue(a, TPE_QUEUE_PER_WORKER, 0), 0);
	assert_refused(a, tpe_attr_set_pool_size(a, 1, 2));
	/* No core timeout, no scale-first. */
	assert_refused(a, tpe_attr_set_allow_core_timeout(a, true));
	assert_refused(a, tpe_attr_set_policy(a, TPE_POLICY_SCALE_FIRST));
	assert_int_equal(tpe_attr_set_policy(a, TPE_POLICY_QUEUE_FIRST), 0);
	/* Back to another kind, everything is allowed again. */
	assert_int_equal(tpe_attr_set_queue(a, TPE_QUEUE_UNBOUNDED, 0), 0);
	assert_int_equal(tpe_attr_set_pool_size(a, 1, 2), 0);
	assert_int_equal(tpe_attr_set_allow_core_timeout(a, true), 0);
	assert_refused(a, tpe_attr_set_queue(a, TPE_QUEUE_PER_WORKER, 0));
	tpe_attr_destroy(a);
}

static void
test_per_worker_fixed_pool(void **state)
{
	tpe_t *p = pw_pool(2);
	struct tpe_stats s;
	size_t started = 99, purged = 99;
	int count = 0;

	(void)state;
	/* Every worker runs from tpe_create on. */
	s = tu_stats(p);
	assert_int_equal(s.pool_size, 2);
	assert_int_equal(s.largest_pool_size, 2);
	assert_int_equal(s.reserved, 0);
	assert_int_equal(tpe_prestart_core_threads(p, &started), 0);
	assert_int_equal(started, 0);
	assert_int_equal(tpe_set_pool_size(p, 2, 2), 0);
	assert_int_equal(tpe_set_pool_size(p, 1, 2), EINVAL);
	assert_int_equal(tpe_set_pool_size(p, 3, 3), EINVAL);
	assert_int_equal(tpe_set_allow_core_timeout(p, true), EINVAL);
	assert_int_equal(tpe_set_allow_core_timeout(p, false), 0);
	assert_int_equal(tpe_remove(p, tu_count_fn, &count), ENOTSUP);
	assert_int_equal(tpe_purge(p, &purged), ENOTSUP);
	assert_int_equal(purged, 0);
	/* No reserved threads. */
	assert_int_equal(tpe_try_execute(p, tu_count_fn, &count), EAGAIN);
	s = tu_stats(p);
	assert_int_equal(s.pool_size, 2);
	assert_int_equal(s.core_size, 2);
	assert_int_equal(s.max_size, 2);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(tu_load(&count), 0);
}

/* ---- running, statistics, tpe_wait_idle ------------------------------- */

static void
test_per_worker_runs_all_exact_stats(void **state)
{
	tpe_t *p = pw_pool(2);
	struct tpe_stats s;
	int count = 0, i;

	(void)state;
	for (i = 0; i < 100000; i++)
		assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	assert_int_equal(tu_load(&count), 100000);
	s = tu_stats(p);
	assert_int_equal(s.submitted, 100000);
	assert_int_equal(s.completed, 100000);
	assert_int_equal(s.queued, 0);
	assert_int_equal(s.active, 0);
	assert_int_equal(s.idle, 2);
	assert_int_equal(s.pool_size, 2);
	assert_int_equal(tpe_destroy(p), 0);
}

/* The two workers held, tasks queued behind them: the counts meanwhile,
 * and tpe_wait_idle woken by the last batch. */
static void
test_per_worker_wait_idle_and_stats_meanwhile(void **state)
{
	tpe_t *p = pw_pool(2);
	struct tu_saturation sat;
	struct tpe_stats s;
	int count = 0;

	(void)state;
	tu_saturate(p, 2, 0, &sat);
	tu_fill_queue(p, 10, tu_count_fn, &count, 0);
	s = tu_stats(p);
	assert_int_equal(s.active, 2);
	assert_int_equal(s.idle, 0);
	assert_int_equal(s.queued, 10);
	assert_int_equal(s.submitted, 12);
	assert_int_equal(s.completed, 0);
	assert_int_equal(tpe_wait_idle(p, 0), ETIMEDOUT);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	assert_int_equal(tu_load(&count), 10);
	s = tu_stats(p);
	assert_int_equal(s.completed, 12);
	assert_int_equal(s.queued, 0);
	assert_int_equal(s.active, 0);
	assert_int_equal(tpe_destroy(p), 0);
	tu_saturation_destroy(&sat);
}

/* ---- no lost wake-up -------------------------------------------------- */


static unsigned long
rounds_from_env(const char *name, unsigned long dflt)
{
	const char *e = getenv(name);

	return e != NULL && atol(e) > 0 ? (unsigned long)atol(e) : dflt;
}

/*
 * 10^5 rounds of one task to an idle pool, then wait for it. With no
 * spin, the workers go to sleep right after each task, so a submission
 * meets a worker on its way to sleep: without the re-check of the sleep
 * protocol, a round would wait forever (the bound fails it).
 */
static void
test_per_worker_no_lost_wakeup(void **state)
{
	unsigned long rounds = rounds_from_env("TPE_PW_WAKE_ROUNDS", 100000);
	unsigned long i;
	tpe_t *p;
	sem_t sem;

	(void)state;
	tpe__stacks_spin_ns = 0;
	p = pw_pool(2);
	assert_int_equal(sem_init(&sem, 0, 0), 0);
	for (i = 0; i < rounds; i++) {
		assert_int_equal(tpe_execute(p, tu_post_fn, &sem), 0);
		if (!tu_sem_wait_for(&sem, EV_TIMEOUT))
			fail_msg("round %lu: the task never ran", i);
	}
	/* And once with every worker surely asleep. */
	assert_true(TU_EVENTUALLY(sleepers(p) == 2, EV_TIMEOUT));
	assert_int_equal(tpe_execute(p, tu_post_fn, &sem), 0);
	assert_true(tu_sem_wait_for(&sem, EV_TIMEOUT));
	assert_int_equal(tpe_destroy(p), 0);
	sem_destroy(&sem);
}

/*
 * A push that lands between an idle owner's last look at its stack and
 * its SLEEP marker is taken, not covered: the marker goes on only over an
 * empty stack (a CAS from NULL). Built exactly: the one worker is held in
 * the sleep hook after its last look, a task is pushed onto its empty
 * stack (no marker yet, so the push wakes no one), then the worker goes
 * on; the task must run. A plain store of the marker drops it.
 */
static struct tu_latch *sleep_hooked, *sleep_go;
static int sleep_hook_once; /* atomic */

static void
sleep_race_hook(void)
{
	if (__atomic_exchange_n(&sleep_hook_once, 1, __ATOMIC_SEQ_CST))
		return;
	tu_latch_count_down(sleep_hooked);
	if (!tu_latch_wait_for(sleep_go, TU_WAIT_BOUND))
		fprintf(stderr, "sleep race: never let go\n");
}

static void
test_per_worker_push_before_sleep_marker(void **state)
{
	struct tu_latch hooked, go;
	int count = 0;
	tpe_t *p;

	(void)state;
	tpe__stacks_spin_ns = 0;
	tu_latch_init(&hooked, 1);
	tu_latch_init(&go, 1);
	sleep_hooked = &hooked;
	sleep_go = &go;
	__atomic_store_n(&sleep_hook_once, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&tpe__stacks_sleep_hook, sleep_race_hook,
	    __ATOMIC_SEQ_CST);
	p = pw_pool(1);
	/* Starts the worker if it is not yet; it then goes idle. */
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	assert_true(tu_latch_wait_for(&hooked, TU_WAIT_BOUND));
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	tu_latch_count_down(&go);
	if (!TU_EVENTUALLY(tu_load(&count) == 2, EV_TIMEOUT))
		fail_msg("the task pushed before the marker never ran");
	assert_int_equal(tpe_wait_idle(p, EV_TIMEOUT), 0);
	__atomic_store_n(&tpe__stacks_sleep_hook, NULL, __ATOMIC_SEQ_CST);
	assert_int_equal(tu_stats(p).completed, 2);
	assert_int_equal(tpe_destroy(p), 0);
	tu_latch_destroy(&hooked);
	tu_latch_destroy(&go);
}

/*
 * Back-pressure: a submitter whose slot's worker is far behind yields its
 * CPU now and then, and only then. Built exactly: the one worker is held
 * in a task, so every push stays on its stack; up to TPE__STACKS_BACKLOG_MAX
 * pushes since its take, no yield; two looks later (one every
 * TPE__STACKS_BACKLOG_EVERY pushes of this thread), at least one. Every task
 * still runs once, and once the worker has caught up, pushes yield no
 * more.
 */
static int yields; /* atomic */

static void
count_yield_hook(void)
{
	__atomic_add_fetch(&yields, 1, __ATOMIC_SEQ_CST);
}

static void
test_per_worker_yields_when_far_behind(void **state)
{
	struct tu_latch started, release;
	struct tu_blocker b;
	int count = 0, after;
	long i, n = 0;
	tpe_t *p;

	(void)state;
	p = pw_pool(1);
	tu_latch_init(&started, 1);
	tu_latch_init(&release, 1);
	b = (struct tu_blocker){ &started, &release, NULL, 0 };
	__atomic_store_n(&yields, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&tpe__stacks_yield_hook, count_yield_hook,
	    __ATOMIC_SEQ_CST);
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &b), 0);
	assert_true(tu_latch_wait_for(&started, TU_WAIT_BOUND));
	for (i = 0; i < TPE__STACKS_BACKLOG_MAX; i++, n++)
		assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	assert_int_equal(__atomic_load_n(&yields, __ATOMIC_SEQ_CST), 0);
	for (i = 0; i < 2 * TPE__STACKS_BACKLOG_EVERY; i++, n++)
		assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	assert_true(__atomic_load_n(&yields, __ATOMIC_SEQ_CST) >= 1);
	tu_latch_count_down(&release);
	assert_int_equal(tpe_wait_idle(p, EV_TIMEOUT), 0);
	assert_int_equal(tu_load(&count), n);
	/* Caught up: the worker took its stack, nothing is behind. */
	after = __atomic_load_n(&yields, __ATOMIC_SEQ_CST);
	for (i = 0; i < 2 * TPE__STACKS_BACKLOG_EVERY; i++, n++)
		assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	assert_int_equal(__atomic_load_n(&yields, __ATOMIC_SEQ_CST), after);
	assert_int_equal(tpe_wait_idle(p, EV_TIMEOUT), 0);
	__atomic_store_n(&tpe__stacks_yield_hook, NULL, __ATOMIC_SEQ_CST);
	assert_int_equal(tu_load(&count), n);
	assert_int_equal(tu_stats(p).completed, (uint64_t)n + 1);
	assert_int_equal(tpe_destroy(p), 0);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
}

/*
 * A large batch runs newest first, a small one oldest first (stacks.c,
 * large batches). Built exactly: the one worker is held while n tasks are
 * pushed onto its stack, then takes them whole; each task writes its
 * number where the run order says. Every task runs once either way.
 */
struct run_order {
	long *ran;  /* the task numbers, in the order they ran */
	long next;  /* atomic: the next place in ran */
};

struct order_task {
	struct run_order *o;
	long i;
};

static void
order_fn(void *arg)
{
	struct order_task *t = arg;
	long k = __atomic_fetch_add(&t->o->next, 1, __ATOMIC_SEQ_CST);

	t->o->ran[k] = t->i;
}

/* Runs n tasks behind a held worker; true when the newest ran first
 * (false: the oldest did). Fails unless each ran exactly once. */
static bool
held_batch_newest_first(long n)
{
	struct run_order o = { calloc((size_t)n, sizeof(long)), 0 };
	struct order_task *t = calloc((size_t)n, sizeof(*t));
	char *seen = calloc((size_t)n, 1);
	struct tu_saturation sat;
	bool newest;
	tpe_t *p;
	long i;

	assert_non_null(o.ran);
	assert_non_null(t);
	assert_non_null(seen);
	for (i = 0; i < n; i++)
		t[i] = (struct order_task){ &o, i };
	p = pw_pool(1);
	tu_saturate(p, 1, 0, &sat);
	tu_fill_queue(p, (size_t)n, order_fn, t, sizeof(t[0]));
	tu_unsaturate(&sat);
	assert_int_equal(tpe_wait_idle(p, EV_TIMEOUT), 0);
	assert_int_equal(__atomic_load_n(&o.next, __ATOMIC_SEQ_CST), n);
	for (i = 0; i < n; i++) {
		assert_in_range(o.ran[i], 0, n - 1);
		assert_int_equal(seen[o.ran[i]], 0);
		seen[o.ran[i]] = 1;
	}
	/* One batch, in one order or the other. */
	newest = o.ran[0] == n - 1;
	for (i = 0; i < n; i++)
		assert_int_equal(o.ran[i], newest ? n - 1 - i : i);
	assert_int_equal(tpe_destroy(p), 0);
	tu_saturation_destroy(&sat);
	free(o.ran);
	free(t);
	free(seen);
	return newest;
}

static void
test_per_worker_large_batch_newest_first(void **state)
{
	(void)state;
	assert_false(held_batch_newest_first(8));
	assert_false(held_batch_newest_first(TPE__STACKS_LIFO_BATCH));
	assert_true(held_batch_newest_first(TPE__STACKS_LIFO_BATCH + 1));
}

/*
 * An idle pool's workers sleep and are not woken: each worker's thread
 * is asleep and makes next to no context switch (a wake-up is one) over
 * a window of 300 ms. A spinning worker would be running, a polling one would
 * switch; counted per library thread, so the figure does not depend on
 * the machine's speed or on a sanitizer's own threads. The window is no
 * bound on anything: a longer one only looks longer.
 */
static void
test_per_worker_idle_uses_no_cpu(void **state)
{
	static struct tu_tids t = TU_TIDS_INIT;
	tpe_t *p = pw_pool_with(2, (struct tu_pool_opts){
	    .on_start = tu_tids_hook, .thread_hooks_ctx = &t });
	long before[2];
	int count = 0;
	size_t i;

	(void)state;
	tu_fill_queue(p, 1000, tu_count_fn, &count, 0);
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	assert_true(TU_EVENTUALLY(sleepers(p) == 2, EV_TIMEOUT));
	pthread_mutex_lock(&t.lock);
	assert_int_equal(t.n, 2);
	pthread_mutex_unlock(&t.lock);
	if (tu_thread_switches(t.tid[0]) < 0) {
		assert_int_equal(tpe_destroy(p), 0);
		skip(); /* no /proc */
	}
	/* Counted as sleepers just before their futex wait: asleep soon. */
	for (i = 0; i < 2; i++)
		assert_true(TU_EVENTUALLY(tu_thread_state(t.tid[i]) == 'S',
		    EV_TIMEOUT));
	for (i = 0; i < 2; i++)
		before[i] = tu_thread_switches(t.tid[i]);
	tu_sleep_ns(300 * TU_MS);
	for (i = 0; i < 2; i++) {
		assert_int_equal(tu_thread_state(t.tid[i]), 'S');
		/* At most the last look of a watcher (it wakes each
		 * WATCH_NS, 1 ms, while another worker is awake, then finds
		 * none and sleeps for good) and one preemption on its way:
		 * a worker still watching would wake about 300 times. */
		assert_in_range(tu_thread_switches(t.tid[i]) - before[i], 0, 2);
	}
	assert_int_equal(tu_load(&count), 1000);
	assert_int_equal(tpe_destroy(p), 0);
}

/* ---- stealing --------------------------------------------------------- */

static void
latch_fn(void *arg)
{
	tu_latch_count_down(arg);
}

/* A steal case's task: counted, then the latch. */
struct counted_latch {
	struct tu_latch latch;
	int ran; /* atomic */
};

static void
counted_latch_fn(void *arg)
{
	struct counted_latch *c = arg;

	__atomic_add_fetch(&c->ran, 1, __ATOMIC_SEQ_CST);
	tu_latch_count_down(&c->latch);
}

/*
 * One worker held by a long task; tasks submitted after it land on both
 * stacks or, while the other worker sleeps, on the held worker's (pushes
 * pass a sleeper over for an awake worker): the other worker steals what
 * lands behind the held one, so they all run while the long task still
 * holds. `one_by_one` waits for each before the next, with no spin, so
 * that the idle worker is asleep whenever a task lands behind the held
 * one: it must wake as the watcher and steal. Each task runs once: a
 * thief that ran a stack without detaching it would run it again.
 */
static void
steal_case(bool one_by_one)
{
	struct tu_latch started, release;
	struct counted_latch done = { .ran = 0 };
	struct tu_blocker b;
	tpe_t *p;
	int i, n = 200;

	tpe__stacks_spin_ns = one_by_one ? 0 : 50000;
	p = pw_pool(2);
	tu_latch_init(&started, 1);
	tu_latch_init(&release, 1);
	tu_latch_init(&done.latch, n);
	b = (struct tu_blocker){ &started, &release, NULL, 0 };
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &b), 0);
	assert_true(tu_latch_wait_for(&started, TU_WAIT_BOUND));
	for (i = 0; i < n; i++) {
		long left = tu_latch_count(&done.latch);

		assert_int_equal(tpe_execute(p, counted_latch_fn, &done), 0);
		if (one_by_one &&
		    !TU_EVENTUALLY(tu_latch_count(&done.latch) < left,
		    EV_TIMEOUT))
			fail_msg("task %d stranded behind the held worker", i);
	}
	if (!tu_latch_wait_for(&done.latch, TU_WAIT_BOUND))
		fail_msg("%ld tasks stranded behind the held worker",
		    tu_latch_count(&done.latch));
	assert_int_equal(tu_ran(&b), 1);
	tu_latch_count_down(&release);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(tu_load(&done.ran), n);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
	tu_latch_destroy(&done.latch);
}

static void
test_per_worker_steals_from_held_worker(void **state)
{
	(void)state;
	steal_case(false);
}

static void
test_per_worker_watcher_steals_one_by_one(void **state)
{
	(void)state;
	steal_case(true);
}

/*
 * The rest of a batch is stolen once: the thief's exchange leaves NULL
 * behind, so the owner, back from its running task, finds nothing to take
 * back and runs none of the stolen tasks again. Built exactly: worker A,
 * held by b0, gets b1, t2 and t3 on its stack and B, a watcher, is held in
 * the steal hook until A has detached the three and runs b1 with t2 and
 * t3 as its rest; B then steals the rest and runs it while b1 still holds
 * A. The three land on A only while B sleeps with its marker on and no
 * push wakes it: a deep sleeper (it went to sleep before A was awake) is
 * woken by the first push behind A and may take the next ones itself. So
 * first a nudge: a task pushed behind A, which B (woken, or watching)
 * steals and runs; B then sleeps again, now as a watcher, since A is awake
 * until b0 returns, and pushes behind A wake no watcher.
 *
 * The latches live outside the test's frame: a failed assertion leaves
 * the pool's threads waiting on them (rest_give_up lets go of them first).
 */
static struct {
	struct tu_latch started[2], release[2], hooked, go;
	struct tu_blocker b[2];
	int hook_once; /* atomic */
} rest;

static void
rest_steal_hook(void)
{
	if (__atomic_exchange_n(&rest.hook_once, 1, __ATOMIC_SEQ_CST))
		return;
	tu_latch_count_down(&rest.hooked);
	if (!tu_latch_wait_for(&rest.go, TU_WAIT_BOUND))
		fprintf(stderr, "rest steal: never let go\n");
}

/* Fails the test after letting every thread it holds go on. */
static void
rest_give_up(tpe_t *p, const char *what, int count)
{
	/* Read first: what the pool looked like when the wait gave up. */
	struct tpe_stats st = tu_stats(p);
	size_t asleep = sleepers(p);
	int i;

	__atomic_store_n(&tpe__stacks_steal_hook, NULL, __ATOMIC_SEQ_CST);
	tu_latch_count_down(&rest.go);
	for (i = 0; i < 2; i++)
		tu_latch_count_down(&rest.release[i]);
	fail_msg("%s (sleepers %zu, queued %zu, active %zu, count %d)", what,
	    asleep, st.queued, st.active, count);
}

static void
test_per_worker_rest_stolen_once(void **state)
{
	int count = 0, nudged = 0, i;
	tpe_t *p;

	(void)state;
	tpe__stacks_spin_ns = 0;
	p = pw_pool(2);
	for (i = 0; i < 2; i++) {
		tu_latch_init(&rest.started[i], 1);
		tu_latch_init(&rest.release[i], 1);
		rest.b[i] = (struct tu_blocker){ &rest.started[i],
		    &rest.release[i], NULL, 0 };
	}
	tu_latch_init(&rest.hooked, 1);
	tu_latch_init(&rest.go, 1);
	__atomic_store_n(&rest.hook_once, 0, __ATOMIC_SEQ_CST);
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &rest.b[0]), 0);
	if (!tu_latch_wait_for(&rest.started[0], TU_WAIT_BOUND))
		rest_give_up(p, "b0 never started", 0);
	if (!TU_EVENTUALLY(sleepers(p) == 1, EV_TIMEOUT))
		rest_give_up(p, "B never slept", 0);
	/* The nudge: B runs it, then sleeps as a watcher. */
	assert_int_equal(tpe_execute(p, tu_count_fn, &nudged), 0);
	if (!TU_EVENTUALLY(tu_load(&nudged) == 1 && sleepers(p) == 1,
	    EV_TIMEOUT))
		rest_give_up(p, "the nudge behind A never ran", 0);
	__atomic_store_n(&tpe__stacks_steal_hook, rest_steal_hook,
	    __ATOMIC_SEQ_CST);
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &rest.b[1]), 0);
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	/* B, the watcher, holds in its first steal (of A's stack). */
	if (!tu_latch_wait_for(&rest.hooked, TU_WAIT_BOUND))
		rest_give_up(p, "the watcher never stole", tu_load(&count));
	/* None of the three ran: they wait behind b0, on A's stack. */
	assert_int_equal(tu_load(&count), 0);
	assert_int_equal(tu_ran(&rest.b[1]), 0);
	tu_latch_count_down(&rest.release[0]);
	if (!tu_latch_wait_for(&rest.started[1], TU_WAIT_BOUND))
		rest_give_up(p, "A never ran b1", tu_load(&count));
	tu_latch_count_down(&rest.go);
	/* B steals t2 and t3 (A's rest) while b1 holds A. */
	if (!TU_EVENTUALLY(tu_load(&count) == 2, TU_WAIT_BOUND))
		rest_give_up(p, "the rest behind b1 never ran",
		    tu_load(&count));
	tu_latch_count_down(&rest.release[1]);
	assert_int_equal(tpe_wait_idle(p, EV_TIMEOUT), 0);
	__atomic_store_n(&tpe__stacks_steal_hook, NULL, __ATOMIC_SEQ_CST);
	assert_int_equal(tu_load(&count), 2);
	assert_int_equal(tu_load(&nudged), 1);
	assert_int_equal(tu_stats(p).completed, 5);
	assert_int_equal(tpe_destroy(p), 0);
	for (i = 0; i < 2; i++) {
		tu_latch_destroy(&rest.started[i]);
		tu_latch_destroy(&rest.release[i]);
	}
	tu_latch_destroy(&rest.hooked);
	tu_latch_destroy(&rest.go);
}

/*
 * The last watcher that leaves passes the watch on: tasks pushed behind an
 * awake worker while a watcher watched woke nobody, so a watcher that
 * stops watching without them, while a sleeper sleeps deep, must wake that
 * sleeper to watch, or they wait for the awake worker's task. Built
 * exactly with three workers (pass_setup): A runs b0; W, the only
 * watcher, is held in the watch hook (still counted) while tasks are
 * pushed behind A; D sleeps deep (it went to sleep before any worker was
 * awake), so pushes pass over its slot and W's for A's, and wake nobody.
 * W then looks, steals a task that blocks it, and stops watching: D must
 * wake and take what still waits behind A while A and W are held. Before
 * the fix that task waited for A's (the memory-thread scenario of
 * tpe-bench saw it: "only 15 of 16 blocking tasks ran at once").
 *
 * The latches live outside the test's frame, as in the rest test.
 */
enum { B0, B1, BW, BX, NBLOCK }; /* b0 and b1 hold A, bW or bX holds W */

static struct {
	struct tu_latch started[NBLOCK], release[NBLOCK];
	struct tu_latch hooked, go;             /* W, in the watch hook */
	struct tu_latch batch_hooked, batch_go; /* A, in the batch hook */
	struct tu_blocker b[NBLOCK];
	int hook_once, batch_once; /* atomic */
} pass;

static void
pass_watch_hook(void)
{
	if (__atomic_exchange_n(&pass.hook_once, 1, __ATOMIC_SEQ_CST))
		return;
	tu_latch_count_down(&pass.hooked);
	if (!tu_latch_wait_for(&pass.go, TU_WAIT_BOUND))
		fprintf(stderr, "pass watch: never let go\n");
}

static void
pass_batch_hook(void)
{
	if (__atomic_exchange_n(&pass.batch_once, 1, __ATOMIC_SEQ_CST))
		return;
	tu_latch_count_down(&pass.batch_hooked);
	if (!tu_latch_wait_for(&pass.batch_go, TU_WAIT_BOUND))
		fprintf(stderr, "pass batch: never let go\n");
}

/* Fails the test after letting every thread it holds go on. */
static void
pass_give_up(tpe_t *p, const char *what, int count)
{
	struct tpe_stats st = tu_stats(p);
	size_t asleep = sleepers(p), watching = tpe__stacks_watchers(p->engine);
	int i;

	__atomic_store_n(&tpe__stacks_watch_hook, NULL, __ATOMIC_SEQ_CST);
	__atomic_store_n(&tpe__stacks_batch_hook, NULL, __ATOMIC_SEQ_CST);
	tu_latch_count_down(&pass.go);
	tu_latch_count_down(&pass.batch_go);
	for (i = 0; i < NBLOCK; i++)
		tu_latch_count_down(&pass.release[i]);
	fail_msg("%s (sleepers %zu, watchers %zu, queued %zu, active %zu, "
	    "count %d)", what, asleep, watching, st.queued, st.active, count);
}

/* The state both cases start from: A runs b0, W is held in its look
 * (counted as the only watcher), D sleeps deep. */
static tpe_t *
pass_setup(void)
{
	int nudged = 0, i;
	tpe_t *p;

	tpe__stacks_spin_ns = 0;
	p = pw_pool(3);
	for (i = 0; i < NBLOCK; i++) {
		tu_latch_init(&pass.started[i], 1);
		tu_latch_init(&pass.release[i], 1);
		pass.b[i] = (struct tu_blocker){ &pass.started[i],
		    &pass.release[i], NULL, 0 };
	}
	tu_latch_init(&pass.hooked, 1);
	tu_latch_init(&pass.go, 1);
	tu_latch_init(&pass.batch_hooked, 1);
	tu_latch_init(&pass.batch_go, 1);
	__atomic_store_n(&pass.hook_once, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&pass.batch_once, 0, __ATOMIC_SEQ_CST);
	/* All three deep: none awake, so none watches. */
	if (!TU_EVENTUALLY(sleepers(p) == 3 &&
	    tpe__stacks_watchers(p->engine) == 0, EV_TIMEOUT))
		pass_give_up(p, "the workers never all slept deep", 0);
	/* b0 wakes its slot's owner, A. */
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &pass.b[B0]), 0);
	if (!tu_latch_wait_for(&pass.started[B0], TU_WAIT_BOUND))
		pass_give_up(p, "b0 never started", 0);
	/* The nudge lands behind A and wakes one deep sleeper, W, which
	 * steals it and then watches (A is awake); D stays deep. */
	assert_int_equal(tpe_execute(p, tu_count_fn, &nudged), 0);
	if (!TU_EVENTUALLY(tu_load(&nudged) == 1 && sleepers(p) == 2 &&
	    tpe__stacks_watchers(p->engine) == 1, EV_TIMEOUT))
		pass_give_up(p, "W never watched", 0);
	/* W's next look holds in the hook, W still counted as watching. */
	__atomic_store_n(&tpe__stacks_watch_hook, pass_watch_hook,
	    __ATOMIC_SEQ_CST);
	if (!tu_latch_wait_for(&pass.hooked, TU_WAIT_BOUND))
		pass_give_up(p, "W never looked", 0);
	return p;
}

/* Lets every blocker go and checks that each task ran once. */
static void
pass_finish(tpe_t *p, int count, int count_want, size_t completed)
{
	int i;

	__atomic_store_n(&tpe__stacks_watch_hook, NULL, __ATOMIC_SEQ_CST);
	__atomic_store_n(&tpe__stacks_batch_hook, NULL, __ATOMIC_SEQ_CST);
	for (i = 0; i < NBLOCK; i++)
		tu_latch_count_down(&pass.release[i]);
	assert_int_equal(tpe_wait_idle(p, EV_TIMEOUT), 0);
	assert_int_equal(count, count_want);
	for (i = 0; i < NBLOCK; i++)
		assert_in_range(tu_ran(&pass.b[i]), 0, 1);
	assert_int_equal(tu_stats(p).completed, completed);
	assert_int_equal(tpe_destroy(p), 0);
	for (i = 0; i < NBLOCK; i++) {
		tu_latch_destroy(&pass.started[i]);
		tu_latch_destroy(&pass.release[i]);
	}
	tu_latch_destroy(&pass.hooked);
	tu_latch_destroy(&pass.go);
	tu_latch_destroy(&pass.batch_hooked);
	tu_latch_destroy(&pass.batch_go);
}

/*
 * A runs b1 with bW as the rest of its batch and t on its stack; W steals
 * the rest (bW) and D must take t.
 */
static void
test_per_worker_last_watcher_passes_watch(void **state)
{
	int count = 0;
	tpe_t *p;

	(void)state;
	p = pass_setup();
	/* b1 and bW go behind A: a watcher counts, so they wake nobody. */
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &pass.b[B1]), 0);
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &pass.b[BW]), 0);
	/* A takes both and runs b1, with bW as the rest of its batch. */
	tu_latch_count_down(&pass.release[B0]);
	if (!tu_latch_wait_for(&pass.started[B1], TU_WAIT_BOUND))
		pass_give_up(p, "A never ran b1", 0);
	/* t goes onto A's stack, and wakes nobody either. */
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	assert_int_equal(tu_ran(&pass.b[BW]), 0);
	assert_int_equal(tu_load(&count), 0);
	assert_int_equal(sleepers(p), 2);
	/* W looks: it steals A's rest, bW, and stops watching. */
	tu_latch_count_down(&pass.go);
	if (!tu_latch_wait_for(&pass.started[BW], TU_WAIT_BOUND))
		pass_give_up(p, "W never stole bW", tu_load(&count));
	/* D must take t while b1 and bW hold A and W. */
	if (!TU_EVENTUALLY(tu_load(&count) == 1, EV_TIMEOUT))
		pass_give_up(p, "t stranded behind A, D asleep",
		    tu_load(&count));
	pass_finish(p, tu_load(&count), 1, 5);
	assert_int_equal(tu_ran(&pass.b[BW]), 1);
}

/*
 * A batch publishes its rest before it looks for a watcher: A has taken
 * b1 and bW and is held (the batch hook) before it runs b1; bX goes onto
 * A's stack; W steals bX, which blocks it, and stops watching while A's
 * rest is not published yet, so it finds nothing behind A to pass the
 * watch on for. A then publishes bW and must see that nobody watches and
 * wake D. Before the fix A looked for a watcher when it took the batch,
 * found W, and bW waited for b1.
 */
static void
test_per_worker_batch_rest_published_before_check(void **state)
{
	tpe_t *p;

	(void)state;
	p = pass_setup();
	__atomic_store_n(&tpe__stacks_batch_hook, pass_batch_hook,
	    __ATOMIC_SEQ_CST);
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &pass.b[B1]), 0);
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &pass.b[BW]), 0);
	/* A takes b1 and bW and holds before it runs b1. */
	tu_latch_count_down(&pass.release[B0]);
	if (!tu_latch_wait_for(&pass.batch_hooked, TU_WAIT_BOUND))
		pass_give_up(p, "A never took b1 and bW", 0);
	/* bX goes onto A's stack, and wakes nobody. */
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &pass.b[BX]), 0);
	/* W looks: A's rest is not out yet, so it steals A's stack, bX. */
	tu_latch_count_down(&pass.go);
	if (!tu_latch_wait_for(&pass.started[BX], TU_WAIT_BOUND))
		pass_give_up(p, "W never stole bX", 0);
	assert_int_equal(sleepers(p), 1);
	/* A publishes bW, runs b1; D must take bW. */
	tu_latch_count_down(&pass.batch_go);
	if (!tu_latch_wait_for(&pass.started[B1], TU_WAIT_BOUND))
		pass_give_up(p, "A never ran b1", 0);
	if (!tu_latch_wait_for(&pass.started[BW], EV_TIMEOUT))
		pass_give_up(p, "bW stranded behind A, D asleep", 0);
	pass_finish(p, 0, 0, 5);
	assert_int_equal(tu_ran(&pass.b[BX]), 1);
}

/*
 * A watcher's steal that finds nothing after all must leave the thief
 * asleep for tpe_wait_idle: the thief marks itself awake before it takes
 * (Design notes), and when the owner took its tasks first, that mark must
 * go again. Built exactly: worker A holds a task with t2 on its stack, the
 * watcher B finds t2 and, from the steal hook, lets A take and run t2
 * before its own CAS fails. Before the fix B slept on marked awake and
 * tpe_wait_idle never returned.
 */
static struct tu_latch *failed_steal_release, *failed_steal_t2;
static int failed_steal_hooked; /* atomic */

static void
failed_steal_hook(void)
{
	if (__atomic_exchange_n(&failed_steal_hooked, 1, __ATOMIC_SEQ_CST))
		return;
	tu_latch_count_down(failed_steal_release);
	if (!tu_latch_wait_for(failed_steal_t2, TU_WAIT_BOUND))
		fprintf(stderr, "failed steal: t2 did not run\n");
}

static void
test_per_worker_failed_steal_leaves_thief_asleep(void **state)
{
	struct tu_latch started, release, t2;
	struct tu_blocker b;
	struct tpe_stats s;
	tpe_t *p;

	(void)state;
	tpe__stacks_spin_ns = 0;
	p = pw_pool(2);
	tu_latch_init(&started, 1);
	tu_latch_init(&release, 1);
	tu_latch_init(&t2, 1);
	failed_steal_release = &release;
	failed_steal_t2 = &t2;
	__atomic_store_n(&failed_steal_hooked, 0, __ATOMIC_SEQ_CST);
	b = (struct tu_blocker){ &started, &release, NULL, 0 };
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &b), 0);
	assert_true(tu_latch_wait_for(&started, TU_WAIT_BOUND));
	/* The other worker sleeps: t2 goes behind the held one, and the
	 * push wakes the sleeper as the watcher that will try to steal. */
	assert_true(TU_EVENTUALLY(sleepers(p) == 1, EV_TIMEOUT));
	__atomic_store_n(&tpe__stacks_steal_hook, failed_steal_hook,
	    __ATOMIC_SEQ_CST);
	assert_int_equal(tpe_execute(p, latch_fn, &t2), 0);
	assert_true(tu_latch_wait_for(&t2, TU_WAIT_BOUND));
	assert_int_equal(tpe_wait_idle(p, EV_TIMEOUT), 0);
	__atomic_store_n(&tpe__stacks_steal_hook, NULL, __ATOMIC_SEQ_CST);
	assert_int_equal(__atomic_load_n(&failed_steal_hooked,
	    __ATOMIC_SEQ_CST), 1);
	s = tu_stats(p);
	assert_int_equal(s.completed, 2);
	assert_int_equal(s.active, 0);
	assert_int_equal(s.idle, 2);
	assert_int_equal(tpe_destroy(p), 0);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
	tu_latch_destroy(&t2);
}

/* ---- futures and hooks ------------------------------------------------ */

static void *
twice_fn(void *arg)
{
	return (void *)((uintptr_t)arg * 2);
}

static void
test_per_worker_futures_and_hooks(void **state)
{
	struct tu_hook_counts h = { 0 };
	tpe_future_t *f[64];
	void *res;
	tpe_t *p;
	int i;

	(void)state;
	p = pw_pool_with(2, (struct tu_pool_opts){ .before = tu_count_before,
	    .after = tu_count_after, .task_hooks_ctx = &h,
	    .on_start = tu_count_start, .on_exit = tu_count_exit,
	    .thread_hooks_ctx = &h, .terminated = tu_count_terminated,
	    .terminated_ctx = &h });
	for (i = 0; i < 64; i++)
		assert_int_equal(tpe_submit(p, twice_fn,
		    (void *)(uintptr_t)i, &f[i]), 0);
	for (i = 0; i < 64; i++) {
		assert_int_equal(tpe_future_get(f[i], -1, &res), 0);
		assert_int_equal((uintptr_t)res, (uintptr_t)i * 2);
		tpe_future_release(f[i]);
	}
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	assert_int_equal(tu_load(&h.before), 64);
	assert_int_equal(tu_load(&h.after), 64);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(tu_load(&h.start), 2);
	assert_int_equal(tu_load(&h.exit), 2);
	assert_int_equal(tu_load(&h.terminated), 1);
}

/* ---- pause, shutdown, shutdown-now ------------------------------------ */

static void
test_per_worker_pause_resume(void **state)
{
	tpe_t *p = pw_pool(2);
	int count = 0;

	(void)state;
	assert_int_equal(tpe_pause(p), 0);
	tu_fill_queue(p, 1000, tu_count_fn, &count, 0);
	/* Submitted after the pause: none may start before the resume. */
	assert_int_equal(tpe_wait_idle(p, 0), ETIMEDOUT);
	assert_int_equal(tu_load(&count), 0);
	assert_int_equal(tu_stats(p).queued, 1000);
	assert_int_equal(tpe_resume(p), 0);
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	assert_int_equal(tu_load(&count), 1000);
	assert_int_equal(tpe_destroy(p), 0);
}

static void
test_per_worker_shutdown_drains_then_rejects(void **state)
{
	tpe_t *p = pw_pool(2);
	struct tu_saturation sat;
	int count = 0;
	tpe_future_t *f;

	(void)state;
	tu_saturate(p, 2, 0, &sat);
	tu_fill_queue(p, 500, tu_count_fn, &count, 0);
	assert_int_equal(tpe_shutdown(p), 0);
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), ECANCELED);
	assert_int_equal(tpe_submit(p, twice_fn, NULL, &f), ECANCELED);
	assert_false(tpe_is_terminated(p));
	tu_unsaturate(&sat);
	assert_int_equal(tpe_await_termination(p, -1), 0);
	assert_int_equal(tu_load(&count), 500);
	assert_int_equal(tu_stats(p).completed, 502);
	assert_int_equal(tpe_destroy(p), 0);
	tu_saturation_destroy(&sat);
}

struct handed {
	int fn, fut; /* atomic: plain tasks, future tasks */
};

static void
count_handed(tpe_fn fn, void *arg, void *ctx)
{
	struct handed *h = ctx;

	(void)arg;
	__atomic_add_fetch(fn != NULL ? &h->fn : &h->fut, 1, __ATOMIC_SEQ_CST);
}

/*
 * shutdown-now hands back every task that never started: those on the
 * stacks to the drained callback; those a worker took in its batch behind
 * its running task, and any pushed later, to the discard callback. With
 * no spin, the second blocker lands behind the first (a sleeping worker
 * is passed over), in the first one's batch, and the other worker must
 * take it from there (the rest of a batch can be stolen).
 */
static void
test_per_worker_shutdown_now_hands_back_all(void **state)
{
	struct handed drained = { 0 }, discarded = { 0 };
	struct tu_latch started, release;
	struct tu_blocker b[2];
	tpe_future_t *f[20];
	int count = 0, i, rc;
	tpe_t *p;
	void *res;

	(void)state;
	tpe__stacks_spin_ns = 0;
	p = pw_pool_with(2, (struct tu_pool_opts){ .discard = count_handed,
	    .discard_ctx = &discarded });
	assert_true(TU_EVENTUALLY(sleepers(p) == 2, EV_TIMEOUT));
	tu_latch_init(&started, 2);
	tu_latch_init(&release, 1);
	for (i = 0; i < 2; i++) {
		b[i] = (struct tu_blocker){ &started, &release, NULL, 0 };
		assert_int_equal(tpe_execute(p, tu_blocker_fn, &b[i]), 0);
	}
	/* Both workers held: nothing else can start before shutdown-now. */
	assert_true(tu_latch_wait_for(&started, TU_WAIT_BOUND));
	tu_fill_queue(p, 100, tu_count_fn, &count, 0);
	for (i = 0; i < 20; i++)
		assert_int_equal(tpe_submit(p, twice_fn, NULL, &f[i]), 0);
	assert_int_equal(tpe_shutdown_now(p, count_handed, &drained), 0);
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), ECANCELED);
	tu_latch_count_down(&release);
	assert_int_equal(tpe_await_termination(p, -1), 0);
	/* The blockers ran; nothing else started, all came back once. */
	assert_int_equal(tu_ran(&b[0]) + tu_ran(&b[1]), 2);
	assert_int_equal(tu_load(&count), 0);
	assert_int_equal(tu_load(&drained.fn) + tu_load(&discarded.fn), 100);
	assert_int_equal(tu_load(&drained.fut) + tu_load(&discarded.fut), 20);
	for (i = 0; i < 20; i++) {
		rc = tpe_future_get(f[i], 0, &res);
		assert_int_equal(rc, ECANCELED);
		assert_true(tpe_future_is_cancelled(f[i]));
		tpe_future_release(f[i]);
	}
	assert_int_equal(tu_stats(p).completed, 2);
	assert_int_equal(tpe_destroy(p), 0);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
}

/*
 * The rest of a batch: one worker, held by a first blocker while a second
 * blocker and ten tasks are pushed onto its stack, takes all eleven at
 * once when the first returns; shutdown-now finds its stack empty, and the
 * worker hands the ten back through the discard callback once the second
 * blocker returns.
 */
static void
test_per_worker_shutdown_now_hands_back_batch_rest(void **state)
{
	struct handed drained = { 0 }, discarded = { 0 };
	struct tu_latch started[2], release[2];
	struct tu_blocker b[2];
	int count = 0, i;
	tpe_t *p;

	(void)state;
	p = pw_pool_with(1, (struct tu_pool_opts){ .discard = count_handed,
	    .discard_ctx = &discarded });
	for (i = 0; i < 2; i++) {
		tu_latch_init(&started[i], 1);
		tu_latch_init(&release[i], 1);
		b[i] = (struct tu_blocker){ &started[i], &release[i], NULL, 0 };
	}
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &b[0]), 0);
	assert_true(tu_latch_wait_for(&started[0], TU_WAIT_BOUND));
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &b[1]), 0);
	tu_fill_queue(p, 10, tu_count_fn, &count, 0);
	tu_latch_count_down(&release[0]);
	assert_true(tu_latch_wait_for(&started[1], TU_WAIT_BOUND));
	assert_int_equal(tu_stats(p).queued, 10);
	assert_int_equal(tpe_shutdown_now(p, count_handed, &drained), 0);
	assert_int_equal(tu_load(&drained.fn), 0);
	tu_latch_count_down(&release[1]);
	assert_int_equal(tpe_await_termination(p, -1), 0);
	assert_int_equal(tu_load(&count), 0);
	assert_int_equal(tu_load(&discarded.fn), 10);
	assert_int_equal(tu_stats(p).queued, 0);
	assert_int_equal(tpe_destroy(p), 0);
	for (i = 0; i < 2; i++) {
		tu_latch_destroy(&started[i]);
		tu_latch_destroy(&release[i]);
	}
}

/* ---- managed blocking: the slot goes to a spare -------------------- */

/* The tasks of the hand-over case, on a pool of one slot. */
struct handover {
	sem_t a_go;      /* lets the first blocking task end its section */
	sem_t b_began;   /* the second task is inside its section */
	sem_t c_ran;     /* the task behind it ran (for the second task) */
	sem_t c_seen;    /* the same, for the test */
	int begin_rc[2]; /* atomic: each section's tpe_blocking_begin */
};

static struct handover ho;

/* Blocks until the test lets it go; its thread then has no slot. */
static void
handover_a(void *arg)
{
	(void)arg;
	__atomic_store_n(&ho.begin_rc[0], tpe_blocking_begin(),
	    __ATOMIC_SEQ_CST);
	(void)tu_sem_wait_for(&ho.a_go, EV_TIMEOUT);
	(void)tpe_blocking_end();
}

/* Blocks until the task submitted behind it, on the slot it handed
 * over, has run, or the test gave up on it (it posts c_ran then). The
 * bound is a safety net only, well past the test's own wait: a B that
 * ended its section first would take its slot back and run C itself, and
 * the case would pass without the spare (it did, on a loaded machine,
 * when both waits were EV_TIMEOUT). */
static void
handover_b(void *arg)
{
	(void)arg;
	__atomic_store_n(&ho.begin_rc[1], tpe_blocking_begin(),
	    __ATOMIC_SEQ_CST);
	sem_post(&ho.b_began);
	(void)tu_sem_wait_for(&ho.c_ran, 4 * EV_TIMEOUT * tu_time_scale());
	(void)tpe_blocking_end();
}

static void
handover_c(void *arg)
{
	(void)arg;
	sem_post(&ho.c_ran);
	sem_post(&ho.c_seen);
}

/* Waits until the pool has `spares` threads without a slot and no slot
 * without a thread; false after EV_TIMEOUT. */
static bool
wait_handover_counts(tpe_t *p, size_t spares_want)
{
	int64_t end = tu_now_ns() + EV_TIMEOUT * tu_time_scale();
	size_t spares, unowned;

	for (;;) {
		tpe__stacks_handover_counts(p->engine, &spares, &unowned);
		if (spares == spares_want && unowned == 0)
			return true;
		if (tu_now_ns() >= end)
			return false;
		tu_sleep_ns(TU_MS);
	}
}

/*
 * A worker that begins a blocking section while a spare thread waits for
 * a slot (a thread that lost its own slot in an earlier section) hands
 * its slot to that spare, which must be woken: no new thread is started
 * for it (the spare will take it), so without the signal the task pushed
 * behind the blocked one waits for the spare's keep-alive (an hour here).
 * Built exactly: A's section hands the one slot to a new thread; A ends
 * without its slot and waits as a spare (counted: 1 spare, no slot
 * unowned); B, on the new owner, begins a section: the slot goes to A's
 * thread, which runs C while B still blocks.
 */
static void
test_per_worker_handover_wakes_waiting_spare(void **state)
{
	tpe_t *p;
	size_t spares, unowned;

	(void)state;
	memset(&ho, 0, sizeof(ho));
	assert_int_equal(sem_init(&ho.a_go, 0, 0), 0);
	assert_int_equal(sem_init(&ho.b_began, 0, 0), 0);
	assert_int_equal(sem_init(&ho.c_ran, 0, 0), 0);
	assert_int_equal(sem_init(&ho.c_seen, 0, 0), 0);
	p = pw_pool_with(1, (struct tu_pool_opts){ .keep_alive = 3600 * TU_S });
	assert_int_equal(tpe_execute(p, handover_a, NULL), 0);
	/* A's slot went to a new thread (no spare waited): owned again. */
	assert_true(wait_handover_counts(p, 0));
	sem_post(&ho.a_go);
	/* A's thread, slotless after its task, waits for a slot. */
	assert_true(wait_handover_counts(p, 1));
	assert_int_equal(tpe_execute(p, handover_b, NULL), 0);
	assert_true(tu_sem_wait_for(&ho.b_began,
	    EV_TIMEOUT * tu_time_scale()));
	assert_int_equal(tu_load(&ho.begin_rc[0]), 0);
	assert_int_equal(tu_load(&ho.begin_rc[1]), 0);
	assert_int_equal(tpe_execute(p, handover_c, NULL), 0);
	/* The waiting spare took B's slot and ran C while B blocks. */
	if (!tu_sem_wait_for(&ho.c_seen, EV_TIMEOUT * tu_time_scale())) {
		tpe__stacks_handover_counts(p->engine, &spares, &unowned);
		print_error("C did not run: %zu spares wait, %zu slots "
		    "handed over and unowned\n", spares, unowned);
		sem_post(&ho.c_ran); /* B ends its section */
		fail();
	}
	assert_true(wait_handover_counts(p, 1)); /* B's thread, now */
	assert_int_equal(tpe_destroy(p), 0);
	sem_destroy(&ho.a_go);
	sem_destroy(&ho.b_began);
	sem_destroy(&ho.c_ran);
	sem_destroy(&ho.c_seen);
}

/* ---- exactly once under racing submitters and shutdowns --------------- */

#define STRESS_SUBMITTERS 4

struct stress {
	tpe_t *pool;
	unsigned char *seen;     /* per task: runs + hand-backs (atomic) */
	unsigned char *accepted; /* per task: 1 when tpe_execute said 0 */
	size_t per;              /* tasks per submitter */
	pthread_barrier_t start;
	unsigned long progress;  /* atomic: submissions so far */
};

struct stress_sub {
	struct stress *st;
	size_t first;
	pthread_t thread;
};

static void
stress_task(void *arg)
{
	__atomic_add_fetch((unsigned char *)arg, 1, __ATOMIC_RELAXED);
}

static void
stress_handback(tpe_fn fn, void *arg, void *ctx)
{
	(void)fn;
	(void)ctx;
	__atomic_add_fetch((unsigned char *)arg, 1, __ATOMIC_RELAXED);
}

static void *
stress_submitter(void *arg)
{
	struct stress_sub *s = arg;
	struct stress *st = s->st;
	size_t i;
	int rc;

	pthread_barrier_wait(&st->start);
	for (i = s->first; i < s->first + st->per; i++) {
		rc = tpe_execute(st->pool, stress_task, &st->seen[i]);
		if (rc == 0)
			st->accepted[i] = 1;
		else if (rc != ECANCELED)
			return (void *)(uintptr_t)1;
		__atomic_add_fetch(&st->progress, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/* One round: mode 0 destroy at the end, 1 shutdown, 2 shutdown-now, at
 * a random point of the submissions. */
static void
stress_round(size_t per, int mode, unsigned seed)
{
	struct stress_sub subs[STRESS_SUBMITTERS];
	size_t n = per * STRESS_SUBMITTERS, i, bad = 0;
	unsigned long trigger = (unsigned long)(rand_r(&seed) % (n + 1));
	struct stress st;
	void *ret;
	int k;

	memset(&st, 0, sizeof(st));
	st.per = per;
	st.seen = calloc(n, 1);
	st.accepted = calloc(n, 1);
	assert_non_null(st.seen);
	assert_non_null(st.accepted);
	st.pool = pw_pool_with(2, (struct tu_pool_opts){
	    .discard = stress_handback });
	assert_int_equal(pthread_barrier_init(&st.start, NULL,
	    STRESS_SUBMITTERS + 1), 0);
	for (k = 0; k < STRESS_SUBMITTERS; k++) {
		subs[k] = (struct stress_sub){ &st, (size_t)k * per, 0 };
		assert_int_equal(pthread_create(&subs[k].thread, NULL,
		    stress_submitter, &subs[k]), 0);
	}
	pthread_barrier_wait(&st.start);
	if (mode != 0) {
		while (__atomic_load_n(&st.progress, __ATOMIC_RELAXED) <
		    trigger)
			sched_yield();
		if (mode == 1)
			assert_int_equal(tpe_shutdown(st.pool), 0);
		else
			assert_int_equal(tpe_shutdown_now(st.pool,
			    stress_handback, NULL), 0);
	}
	for (k = 0; k < STRESS_SUBMITTERS; k++) {
		assert_int_equal(pthread_join(subs[k].thread, &ret), 0);
		assert_null(ret);
	}
	assert_int_equal(tpe_destroy(st.pool), 0);
	for (i = 0; i < n; i++) {
		/* Accepted: ran or came back exactly once; refused: never. */
		if (st.seen[i] != st.accepted[i] && bad++ < 5)
			print_error("mode %d task %zu: accepted %d, ran or "
			    "handed back %d times\n", mode, i, st.accepted[i],
			    st.seen[i]);
	}
	assert_int_equal(bad, 0);
	pthread_barrier_destroy(&st.start);
	free(st.seen);
	free(st.accepted);
}

static void
test_per_worker_exactly_once_stress(void **state)
{
	size_t per = rounds_from_env("TPE_PW_STRESS_TASKS", 200000);
	unsigned seed = (unsigned)tu_now_ns();
	int mode;

	(void)state;
	print_message("# seed %u, %d x %zu tasks a round\n", seed,
	    STRESS_SUBMITTERS, per);
	for (mode = 0; mode < 3; mode++)
		stress_round(per, mode, seed + (unsigned)mode);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_per_worker_attr_rules, reset_spin),
		cmocka_unit_test_setup(test_per_worker_fixed_pool, reset_spin),
		cmocka_unit_test_setup(test_per_worker_runs_all_exact_stats,
		    reset_spin),
		cmocka_unit_test_setup(
		    test_per_worker_wait_idle_and_stats_meanwhile, reset_spin),
		cmocka_unit_test_setup(test_per_worker_no_lost_wakeup,
		    reset_spin),
		cmocka_unit_test_setup(
		    test_per_worker_push_before_sleep_marker, reset_spin),
		cmocka_unit_test_setup(test_per_worker_yields_when_far_behind,
		    reset_spin),
		cmocka_unit_test_setup(test_per_worker_large_batch_newest_first,
		    reset_spin),
		cmocka_unit_test_setup(test_per_worker_idle_uses_no_cpu,
		    reset_spin),
		cmocka_unit_test_setup(test_per_worker_steals_from_held_worker,
		    reset_spin),
		cmocka_unit_test_setup(
		    test_per_worker_watcher_steals_one_by_one, reset_spin),
		cmocka_unit_test_setup(
		    test_per_worker_failed_steal_leaves_thief_asleep,
		    reset_spin),
		cmocka_unit_test_setup(test_per_worker_rest_stolen_once,
		    reset_spin),
		cmocka_unit_test_setup(
		    test_per_worker_last_watcher_passes_watch, reset_spin),
		cmocka_unit_test_setup(
		    test_per_worker_batch_rest_published_before_check,
		    reset_spin),
		cmocka_unit_test_setup(test_per_worker_futures_and_hooks,
		    reset_spin),
		cmocka_unit_test_setup(test_per_worker_pause_resume,
		    reset_spin),
		cmocka_unit_test_setup(
		    test_per_worker_shutdown_drains_then_rejects, reset_spin),
		cmocka_unit_test_setup(
		    test_per_worker_shutdown_now_hands_back_all, reset_spin),
		cmocka_unit_test_setup(
		    test_per_worker_shutdown_now_hands_back_batch_rest,
		    reset_spin),
		cmocka_unit_test_setup(
		    test_per_worker_handover_wakes_waiting_spare, reset_spin),
		cmocka_unit_test_setup(test_per_worker_exactly_once_stress,
		    reset_spin),
	};

	tu_time_bound(0);
	/* TPE_TEST_FILTER=test_per_worker_no_lost_wakeup runs one case
	 * (the mutant check of the sleep protocol). */
	if (getenv("TPE_TEST_FILTER") != NULL)
		cmocka_set_test_filter(getenv("TPE_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
