/* SPDX-License-Identifier: MIT */
/*
 * test_attr.c - tpe_attr_* setters (success, every documented error, a
 * failing setter leaves the attribute object unchanged), tpe_create's
 * argument handling and defaults, and the version API.
 * Java behaviours (doc/java-behaviours.md): A 1-5, 9, 10; B 11, 12, 17, 18
 * (their attribute-time equivalents).
 */
#define _GNU_SOURCE
#include <limits.h>
#include <sched.h>
#include <string.h>
#include <sys/wait.h>

#include "pool/attr.h" /* TPE__HAVE_AFFINITY */
#include "base/cpu.h"  /* TPE__CPU_COUNT_AFFINITY */
#include "helpers.h"

#define EV_TIMEOUT (10 * TU_S)

/* The processors this thread may run on: the default pool size. */
static size_t
allowed_cpus(void)
{
	cpu_set_t set;

	assert_int_equal(sched_getaffinity(0, sizeof(set), &set), 0);
	assert_true(CPU_COUNT(&set) > 0);
	return (size_t)CPU_COUNT(&set);
}

/* Creates a pool from attr (asserting success) and destroys the attr. */
static tpe_t *
pool_from(tpe_attr_t *a)
{
	tpe_t *p = NULL;

	assert_int_equal(tpe_create(&p, a), 0);
	assert_non_null(p);
	tpe_attr_destroy(a);
	return p;
}

static tpe_attr_t *
new_attr(void)
{
	tpe_attr_t *a = NULL;

	assert_int_equal(tpe_attr_create(&a), 0);
	assert_non_null(a);
	return a;
}

/* A task that records the name and stack/affinity of the thread it runs on. */
struct probe {
	struct tu_latch done;
	char name[32];
	size_t stack_size;
	cpu_set_t affinity;
	int affinity_rc;
	pthread_t self;
};

static void
probe_fn(void *arg)
{
	struct probe *p = arg;
	pthread_attr_t pa;

	p->self = pthread_self();
	memset(p->name, 0, sizeof(p->name));
	pthread_getname_np(pthread_self(), p->name, sizeof(p->name));
	p->stack_size = 0;
	if (pthread_getattr_np(pthread_self(), &pa) == 0) {
		pthread_attr_getstacksize(&pa, &p->stack_size);
		pthread_attr_destroy(&pa);
	}
	CPU_ZERO(&p->affinity);
	p->affinity_rc = pthread_getaffinity_np(pthread_self(),
	    sizeof(p->affinity), &p->affinity);
	tu_latch_count_down(&p->done);
}

/* Runs probe_fn once on the pool and waits for it. */
static void
run_probe(tpe_t *pool, struct probe *p)
{
	tu_latch_init(&p->done, 1);
	assert_int_equal(tpe_execute(pool, probe_fn, p), 0);
	tu_latch_wait(&p->done);
	tu_latch_destroy(&p->done);
}

static void *
default_stack_thread(void *arg)
{
	pthread_attr_t pa;
	size_t *sz = arg;

	*sz = 0;
	if (pthread_getattr_np(pthread_self(), &pa) == 0) {
		pthread_attr_getstacksize(&pa, sz);
		pthread_attr_destroy(&pa);
	}
	return NULL;
}

/* The stack size a thread created with default attributes gets. */
static size_t
default_stack_size(void)
{
	pthread_t t;
	size_t sz = 0;

	assert_int_equal(pthread_create(&t, NULL, default_stack_thread, &sz), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_true(sz > 0);
	return sz;
}

/* ---- version ----------------------------------------------------------- */

static void
test_attr_version(void **state)
{
	char buf[64];

	(void)state;
	assert_non_null(tpe_version());
	assert_string_equal(tpe_version(), "0.1.0");
	snprintf(buf, sizeof(buf), "%d.%d.%d", TPE_VERSION_MAJOR,
	    TPE_VERSION_MINOR, TPE_VERSION_PATCH);
	assert_string_equal(tpe_version(), buf);
	assert_int_equal(TPE_VERSION_HEX, 0x000100);
	assert_int_equal(TPE_VERSION_HEX, (TPE_VERSION_MAJOR << 16) |
	    (TPE_VERSION_MINOR << 8) | TPE_VERSION_PATCH);
}

/* ---- create / destroy ---------------------------------------------------- */

static void
test_attr_create_null(void **state)
{
	(void)state;
	assert_int_equal(tpe_attr_create(NULL), EINVAL);
	tpe_attr_destroy(NULL); /* a no-op */
}

/* Item 9, 10: a default attr gives core == max == allowed CPUs, a fresh pool
 * has no thread and zero counters. */
static void
test_attr_defaults(void **state)
{
	tpe_t *p = pool_from(new_attr());
	struct tpe_stats s = tu_stats(p);

	(void)state;
	assert_int_equal(s.core_size, allowed_cpus());
	assert_int_equal(s.max_size, allowed_cpus());
	assert_int_equal(s.pool_size, 0);
	assert_int_equal(s.active, 0);
	assert_int_equal(s.idle, 0);
	assert_int_equal(s.largest_pool_size, 0);
	assert_int_equal(s.queued, 0);
	assert_int_equal(s.reserved, 0);
	assert_int_equal(s.submitted, 0);
	assert_int_equal(s.completed, 0);
	assert_int_equal(s.rejected, 0);
	assert_false(tpe_is_shutdown(p));
	assert_false(tpe_is_terminated(p));
	assert_int_equal(tpe_destroy(p), 0);
}

/* Default queue is unbounded and the default thread name prefix is "tpe". */
static void
test_attr_defaults_queue_unbounded_and_name(void **state)
{
	static struct tu_saturation sat;
	static int count;
	static struct probe pr;
	size_t ncpu = allowed_cpus(), nb, i;
	tpe_t *p = pool_from(new_attr());
	struct tpe_stats s;

	(void)state;
	nb = ncpu < TU_SAT_MAX ? ncpu : TU_SAT_MAX;
	/* First probe: the pool's first thread is "tpe-1". */
	run_probe(p, &pr);
	tu_assert_thread_name(pr.name, "tpe-1");
	assert_false(pthread_equal(pr.self, pthread_self()));
	/* Occupy every core thread (ncpu of them; the pool may hold fewer
	 * blockers if ncpu > TU_SAT_MAX, so use the rest of the core for
	 * nothing). */
	tu_saturate(p, nb, 0, &sat);
	count = 0;
	if (nb == ncpu) {
		/* Saturated at max: an unbounded queue takes everything. */
		for (i = 0; i < 1000; i++)
			assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
		s = tu_stats(p);
		assert_int_equal(s.queued, 1000);
		assert_int_equal(s.rejected, 0);
		assert_int_equal(s.pool_size, ncpu);
	}
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(tu_load(&count), nb == ncpu ? 1000 : 0);
	tu_saturation_destroy(&sat);
}

static void
test_attr_create_pool_null_args(void **state)
{
	tpe_attr_t *a = new_attr();
	tpe_t *p;

	(void)state;
	assert_int_equal(tpe_create(NULL, a), EINVAL);
	assert_int_equal(tpe_create(NULL, NULL), EINVAL);
	tpe_attr_destroy(a);

	/* NULL attr: defaults. */
	p = NULL;
	assert_int_equal(tpe_create(&p, NULL), 0);
	assert_non_null(p);
	assert_int_equal(tu_stats(p).core_size, allowed_cpus());
	assert_int_equal(tu_stats(p).max_size, allowed_cpus());
	assert_int_equal(tu_stats(p).pool_size, 0);
	assert_int_equal(tpe_destroy(p), 0);
}

/* tpe_create copies the attributes: destroying (and reusing) the attr right
 * after create changes nothing. */
static void
test_attr_destroyed_after_create(void **state)
{
	static struct tu_latch started, release;
	static struct tu_blocker b1, b2;
	static int count;
	tpe_attr_t *a = new_attr(), *a2;
	tpe_t *p;
	struct tpe_stats s;

	(void)state;
	assert_int_equal(tpe_attr_set_pool_size(a, 1, 2), 0);
	assert_int_equal(tpe_attr_set_queue(a, TPE_QUEUE_BOUNDED, 1), 0);
	assert_int_equal(tpe_create(&p, a), 0);
	/* Changing the attr after create must not affect the pool. */
	assert_int_equal(tpe_attr_set_pool_size(a, 5, 9), 0);
	assert_int_equal(tpe_attr_set_queue(a, TPE_QUEUE_UNBOUNDED, 0), 0);
	tpe_attr_destroy(a);
	/* Allocate something of the same size over the freed memory. */
	a2 = new_attr();
	assert_int_equal(tpe_attr_set_pool_size(a2, 7, 8), 0);

	s = tu_stats(p);
	assert_int_equal(s.core_size, 1);
	assert_int_equal(s.max_size, 2);
	/* Behaves as P(1, 2, ABQ(1)): 2 running + 1 queued, the 4th rejected. */
	tu_latch_init(&started, 2);
	tu_latch_init(&release, 1);
	b1 = (struct tu_blocker){ &started, &release, NULL, 0 };
	b2 = b1;
	count = 0;
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &b1), 0);
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &b2), 0);
	tu_latch_wait(&started);
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), EAGAIN);
	s = tu_stats(p);
	assert_int_equal(s.pool_size, 2);
	assert_int_equal(s.queued, 1);
	tu_latch_count_down(&release);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(tu_load(&count), 1);
	tpe_attr_destroy(a2);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
}

/* ---- invalid pool sizes are refused (items 1-5) ------------------------ */

static void
test_attr_pool_size(void **state)
{
	tpe_attr_t *a = new_attr();
	tpe_t *p;

	(void)state;
	assert_int_equal(tpe_attr_set_pool_size(NULL, 1, 1), EINVAL);
	assert_int_equal(tpe_attr_set_pool_size(a, 2, 5), 0);
	/* max == 0, even with core 0 (item 3). */
	assert_int_equal(tpe_attr_set_pool_size(a, 0, 0), EINVAL);
	/* core > max (item 5). */
	assert_int_equal(tpe_attr_set_pool_size(a, 2, 1), EINVAL);
	assert_int_equal(tpe_attr_set_pool_size(a, 6, 5), EINVAL);
	/* "Negative" sizes (items 1, 2) become huge size_t: core > max. */
	assert_int_equal(tpe_attr_set_pool_size(a, (size_t)-1, 5), EINVAL);
	/* The failing calls left (2, 5). */
	p = pool_from(a);
	assert_int_equal(tu_stats(p).core_size, 2);
	assert_int_equal(tu_stats(p).max_size, 5);
	assert_int_equal(tu_stats(p).pool_size, 0);
	assert_int_equal(tpe_destroy(p), 0);

	/* core == max and core == 0 are fine. */
	a = new_attr();
	assert_int_equal(tpe_attr_set_pool_size(a, 3, 3), 0);
	p = pool_from(a);
	assert_int_equal(tu_stats(p).core_size, 3);
	assert_int_equal(tu_stats(p).max_size, 3);
	assert_int_equal(tpe_destroy(p), 0);

	a = new_attr();
	assert_int_equal(tpe_attr_set_pool_size(a, 0, 1), 0);
	p = pool_from(a);
	assert_int_equal(tu_stats(p).core_size, 0);
	assert_int_equal(tu_stats(p).max_size, 1);
	assert_int_equal(tpe_destroy(p), 0);
}

/* ---- keep-alive and allow-core-timeout (items 4, 17, 18) --------------- */

static void
test_attr_keep_alive(void **state)
{
	tpe_attr_t *a = new_attr();

	(void)state;
	assert_int_equal(tpe_attr_set_keep_alive(NULL, TU_S), EINVAL);
	assert_int_equal(tpe_attr_set_keep_alive(a, -1), EINVAL);
	assert_int_equal(tpe_attr_set_keep_alive(a, INT64_MIN), EINVAL);
	/* 0 is accepted while allow-core-timeout is false (item 4). */
	assert_int_equal(tpe_attr_set_keep_alive(a, 0), 0);
	/* allow-core-timeout with keep-alive 0 (item 18); false never fails. */
	assert_int_equal(tpe_attr_set_allow_core_timeout(a, true), EINVAL);
	assert_int_equal(tpe_attr_set_allow_core_timeout(a, false), 0);
	assert_int_equal(tpe_attr_set_allow_core_timeout(NULL, false), EINVAL);
	assert_int_equal(tpe_attr_set_keep_alive(a, INT64_MAX), 0);
	assert_int_equal(tpe_attr_set_keep_alive(a, 10 * TU_MS), 0);
	assert_int_equal(tpe_attr_set_allow_core_timeout(a, true), 0);
	/* keep-alive 0 while allow-core-timeout (item 17). */
	assert_int_equal(tpe_attr_set_keep_alive(a, 0), EINVAL);
	assert_int_equal(tpe_attr_set_keep_alive(a, -5), EINVAL);
	assert_int_equal(tpe_attr_set_allow_core_timeout(a, false), 0);
	assert_int_equal(tpe_attr_set_allow_core_timeout(a, true), 0);
	tpe_attr_destroy(a);
}

/* The failing setters above left keep-alive 10 ms and allow-core-timeout
 * true: a core thread times out and the pool drains to 0. */
static void
test_attr_keep_alive_unchanged_after_error(void **state)
{
	static int count;
	tpe_attr_t *a = new_attr();
	tpe_t *p;
	int64_t t0;

	(void)state;
	assert_int_equal(tpe_attr_set_pool_size(a, 1, 1), 0);
	assert_int_equal(tpe_attr_set_keep_alive(a, 10 * TU_MS), 0);
	assert_int_equal(tpe_attr_set_allow_core_timeout(a, true), 0);
	assert_int_equal(tpe_attr_set_keep_alive(a, 0), EINVAL);
	assert_int_equal(tpe_attr_set_keep_alive(a, -1), EINVAL);
	p = pool_from(a);
	count = 0;
	t0 = tu_now_ns();
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	assert_true(TU_EVENTUALLY(tu_stats(p).pool_size == 0, EV_TIMEOUT));
	assert_int_equal(tu_stats(p).largest_pool_size, 1);
	/* The core thread waited at least the keep-alive before exiting. */
	assert_true(tu_now_ns() - t0 >= 10 * TU_MS);
	assert_int_equal(tu_load(&count), 1);
	assert_int_equal(tpe_destroy(p), 0);
}

/* allow-core-timeout false: a core thread does not time out. */
static void
test_attr_allow_core_timeout_false(void **state)
{
	static int count;
	static struct tu_tids tids = TU_TIDS_INIT;
	tpe_attr_t *a = new_attr();
	tpe_t *p;

	(void)state;
	assert_int_equal(tpe_attr_set_pool_size(a, 1, 1), 0);
	assert_int_equal(tpe_attr_set_keep_alive(a, 5 * TU_MS), 0);
	assert_int_equal(tpe_attr_set_allow_core_timeout(a, true), 0);
	assert_int_equal(tpe_attr_set_allow_core_timeout(a, false), 0);
	assert_int_equal(tpe_attr_set_thread_hooks(a, tu_tids_hook, NULL,
	    &tids), 0);
	p = pool_from(a);
	count = 0;
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0);
	assert_true(TU_EVENTUALLY(tu_stats(p).completed == 1, EV_TIMEOUT));
	/* Not a wait of some keep-alive periods (which a slow machine may not
	 * cover): the core thread sleeps with no time-out, so it cannot
	 * leave on one. */
	if (tu_tids_wait_untimed(&tids, 1) < 0) {
		assert_int_equal(tpe_destroy(p), 0);
		skip(); /* this system cannot tell how a thread waits */
	}
	assert_true(TU_EVENTUALLY(tu_tids_wait_untimed(&tids, 1) == 1,
	    EV_TIMEOUT));
	assert_int_equal(tu_stats(p).pool_size, 1);
	assert_int_equal(tpe_destroy(p), 0);
}

/*
 * Waits until a witness pool - one prestarted thread, keep-alive
 * `keep_alive_ns`, core timeout allowed - has lost that thread to its
 * keep-alive. When this returns, at least `keep_alive_ns` have passed
 * since it was called, measured by the library's own timed wait (a lower
 * bound only; no sleep, no timing assertion).
 */
static void
outlast_keep_alive(int64_t keep_alive_ns)
{
	tpe_t *w = tu_pool_with(&(struct tu_pool_opts){ .core = 1, .max = 1,
	    .keep_alive = keep_alive_ns, .allow_core_timeout = true });
	size_t n = 0;

	assert_int_equal(tpe_prestart_core_threads(w, &n), 0);
	assert_int_equal(n, 1);
	assert_true(TU_EVENTUALLY(tu_stats(w).pool_size == 0, EV_TIMEOUT));
	assert_int_equal(tu_stats(w).largest_pool_size, 1);
	assert_int_equal(tpe_destroy(w), 0);
}

/* Prestarts every core thread of p and waits until all of them wait. */
static void
prestart_all_idle(tpe_t *p, size_t ncore)
{
	size_t n = 0;

	assert_int_equal(tpe_prestart_core_threads(p, &n), 0);
	assert_int_equal(n, ncore);
	assert_true(TU_EVENTUALLY(tu_stats(p).idle == ncore, EV_TIMEOUT));
}

/* Asserts that p still has all its `ncore` threads, every one idle. */
static void
assert_all_idle(tpe_t *p, size_t ncore)
{
	struct tpe_stats s = tu_stats(p);

	assert_int_equal(s.pool_size, ncore);
	assert_int_equal(s.idle, ncore);
	assert_int_equal(s.largest_pool_size, ncore);
}

/*
 * Item 10: core threads may not time out by default, in a pool created
 * with NULL attributes and in one created from fresh attributes (core ==
 * max == online CPUs for both). Observable at once: keep-alive 0 is
 * accepted, which is refused while core timeout is allowed. Observable by
 * behaviour: with a 1 ms keep-alive (set at run time on the NULL-attr
 * pool), every prestarted core thread outlives an idle period of 50
 * keep-alives; the control, allowing core timeout on the same pools,
 * then drains them to no thread.
 */
static void
test_attr_default_allow_core_timeout_false(void **state)
{
	size_t ncpu = allowed_cpus();
	tpe_attr_t *a = new_attr();
	tpe_t *pn = NULL, *pa;

	(void)state;
	assert_int_equal(tpe_attr_set_keep_alive(a, 0), 0);
	assert_int_equal(tpe_attr_set_keep_alive(a, TU_MS), 0);
	pa = pool_from(a);
	assert_int_equal(tpe_create(&pn, NULL), 0);
	assert_int_equal(tpe_set_keep_alive(pn, 0), 0);
	assert_int_equal(tpe_set_keep_alive(pn, TU_MS), 0);
	assert_int_equal(tu_stats(pn).core_size, ncpu);
	assert_int_equal(tu_stats(pn).max_size, ncpu);
	assert_int_equal(tu_stats(pa).core_size, ncpu);
	assert_int_equal(tu_stats(pa).max_size, ncpu);

	prestart_all_idle(pn, ncpu);
	prestart_all_idle(pa, ncpu);
	outlast_keep_alive(50 * TU_MS);
	assert_all_idle(pn, ncpu);
	assert_all_idle(pa, ncpu);

	/* Control: the 1 ms keep-alive was in effect. */
	assert_int_equal(tpe_set_allow_core_timeout(pn, true), 0);
	assert_int_equal(tpe_set_allow_core_timeout(pa, true), 0);
	assert_true(TU_EVENTUALLY(tu_stats(pn).pool_size == 0, EV_TIMEOUT));
	assert_true(TU_EVENTUALLY(tu_stats(pa).pool_size == 0, EV_TIMEOUT));
	assert_int_equal(tpe_destroy(pn), 0);
	assert_int_equal(tpe_destroy(pa), 0);
}

/*
 * Item 10: the default keep-alive, documented as 60 seconds
 * (tpe_attr_set_keep_alive(3)). There is no getter, and the exact value
 * would take 60 s to observe, so only this much is checked, for a
 * NULL-attr pool and for fresh attributes: the default is not 0 (core
 * timeout, refused with keep-alive 0, is accepted without setting one),
 * and with core timeout allowed and the default keep-alive, every
 * prestarted core thread outlives an idle period of 200 ms. The control,
 * a 1 ms keep-alive set on the same pools, then drains them (their
 * threads were in timed waits, and re-time them with the new value).
 */
static void
test_attr_default_keep_alive(void **state)
{
	size_t ncpu = allowed_cpus();
	tpe_attr_t *a = new_attr();
	tpe_t *pn = NULL, *pa;

	(void)state;
	assert_int_equal(tpe_attr_set_allow_core_timeout(a, true), 0);
	pa = pool_from(a);
	assert_int_equal(tpe_create(&pn, NULL), 0);
	assert_int_equal(tpe_set_allow_core_timeout(pn, true), 0);

	prestart_all_idle(pn, ncpu);
	prestart_all_idle(pa, ncpu);
	outlast_keep_alive(200 * TU_MS);
	assert_all_idle(pn, ncpu);
	assert_all_idle(pa, ncpu);

	/* Control: the threads were waiting with a timeout. */
	assert_int_equal(tpe_set_keep_alive(pn, TU_MS), 0);
	assert_int_equal(tpe_set_keep_alive(pa, TU_MS), 0);
	assert_true(TU_EVENTUALLY(tu_stats(pn).pool_size == 0, EV_TIMEOUT));
	assert_true(TU_EVENTUALLY(tu_stats(pa).pool_size == 0, EV_TIMEOUT));
	assert_int_equal(tpe_destroy(pn), 0);
	assert_int_equal(tpe_destroy(pa), 0);
}

/* ---- queue ------------------------------------------------------------- */

static void
test_attr_queue_errors(void **state)
{
	tpe_attr_t *a = new_attr();

	(void)state;
	assert_int_equal(tpe_attr_set_queue(NULL, TPE_QUEUE_UNBOUNDED, 0), EINVAL);
	assert_int_equal(tpe_attr_set_queue(a, TPE_QUEUE_UNBOUNDED, 0), 0);
	assert_int_equal(tpe_attr_set_queue(a, TPE_QUEUE_UNBOUNDED, 5), EINVAL);
	assert_int_equal(tpe_attr_set_queue(a, TPE_QUEUE_BOUNDED, 0), EINVAL);
	assert_int_equal(tpe_attr_set_queue(a, TPE_QUEUE_BOUNDED, 1), 0);
	assert_int_equal(tpe_attr_set_queue(a, TPE_QUEUE_HANDOFF, 1), EINVAL);
	assert_int_equal(tpe_attr_set_queue(a, TPE_QUEUE_HANDOFF, 0), 0);
	assert_int_equal(tpe_attr_set_queue(a, (enum tpe_queue_kind)99, 0), EINVAL);
	assert_int_equal(tpe_attr_set_queue(a, (enum tpe_queue_kind)99, 4), EINVAL);
	assert_int_equal(tpe_attr_set_queue(a, (enum tpe_queue_kind)-1, 0), EINVAL);
	tpe_attr_destroy(a);
}

/* Checks that pool p (core 1, max 1, the one thread blocked) queues exactly
 * `cap` tasks and rejects the next one. */
static void
check_capacity(tpe_t *p, size_t cap)
{
	static struct tu_saturation sat;
	static int count;
	struct tpe_stats s;

	count = 0;
	tu_saturate(p, 1, 0, &sat);
	tu_fill_queue(p, cap, tu_count_fn, &count, 0);
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), EAGAIN);
	s = tu_stats(p);
	assert_int_equal(s.queued, cap);
	assert_int_equal(s.rejected, 1);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(tu_load(&count), (int)cap);
	tu_saturation_destroy(&sat);
}

static void
test_attr_queue_bounded_unchanged_after_error(void **state)
{
	tpe_attr_t *a = new_attr();

	(void)state;
	assert_int_equal(tpe_attr_set_pool_size(a, 1, 1), 0);
	assert_int_equal(tpe_attr_set_queue(a, TPE_QUEUE_BOUNDED, 3), 0);
	assert_int_equal(tpe_attr_set_queue(a, TPE_QUEUE_HANDOFF, 3), EINVAL);
	assert_int_equal(tpe_attr_set_queue(a, TPE_QUEUE_UNBOUNDED, 7), EINVAL);
	assert_int_equal(tpe_attr_set_queue(a, (enum tpe_queue_kind)42, 0), EINVAL);
	check_capacity(pool_from(a), 3);
}

static void
test_attr_queue_handoff(void **state)
{
	tpe_attr_t *a = new_attr();

	(void)state;
	assert_int_equal(tpe_attr_set_pool_size(a, 1, 1), 0);
	assert_int_equal(tpe_attr_set_queue(a, TPE_QUEUE_HANDOFF, 0), 0);
	assert_int_equal(tpe_attr_set_queue(a, TPE_QUEUE_BOUNDED, 0), EINVAL);
	check_capacity(pool_from(a), 0);
}

/* ---- policy ------------------------------------------------------------- */

static void
test_attr_policy(void **state)
{
	static struct tu_saturation sat;
	tpe_attr_t *a = new_attr();
	tpe_t *p;
	struct tpe_stats s;

	(void)state;
	assert_int_equal(tpe_attr_set_policy(NULL, TPE_POLICY_QUEUE_FIRST), EINVAL);
	assert_int_equal(tpe_attr_set_policy(a, TPE_POLICY_QUEUE_FIRST), 0);
	assert_int_equal(tpe_attr_set_policy(a, (enum tpe_policy)7), EINVAL);
	assert_int_equal(tpe_attr_set_policy(a, (enum tpe_policy)-1), EINVAL);
	assert_int_equal(tpe_attr_set_pool_size(a, 1, 2), 0);
	p = pool_from(a);
	/* Queue-first with an unbounded queue: never more than core. */
	tu_saturate(p, 1, 1, &sat);
	s = tu_stats(p);
	assert_int_equal(s.pool_size, 1);
	assert_int_equal(s.queued, 1);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(sat.b[1].ran, 1);
	tu_saturation_destroy(&sat);
}

/* Scale-first: with the core thread busy, a new task starts a thread up to
 * max before it is queued (tpe_attr_set_policy(3)). */
static void
test_attr_policy_scale_first(void **state)
{
	static struct tu_saturation sat;
	static struct tu_blocker queued;
	tpe_attr_t *a = new_attr();
	tpe_t *p;
	struct tpe_stats s;

	(void)state;
	assert_int_equal(tpe_attr_set_pool_size(a, 1, 2), 0);
	assert_int_equal(tpe_attr_set_policy(a, TPE_POLICY_SCALE_FIRST), 0);
	assert_int_equal(tpe_attr_set_policy(a, (enum tpe_policy)5), EINVAL);
	p = pool_from(a);
	tu_saturate(p, 2, 0, &sat);
	s = tu_stats(p);
	assert_int_equal(s.pool_size, 2);
	assert_int_equal(s.queued, 0);
	/* At max: the queue takes it. */
	queued = (struct tu_blocker){ NULL, &sat.release, NULL, 0 };
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &queued), 0);
	assert_int_equal(tu_stats(p).queued, 1);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(queued.ran, 1);
	tu_saturation_destroy(&sat);
}

/* ---- setting the rejection policy or handler (item 12) ----------------- */

struct reject_rec {
	pthread_mutex_t lock;
	int calls;
	tpe_t *pool;
	tpe_fn fn;
	void *arg;
	void *ctx;
};

static struct reject_rec rrec = { PTHREAD_MUTEX_INITIALIZER, 0, NULL, NULL,
	NULL, NULL };

static int
reject_handler(tpe_t *pool, tpe_fn fn, void *arg, void *ctx)
{
	pthread_mutex_lock(&rrec.lock);
	rrec.calls++;
	rrec.pool = pool;
	rrec.fn = fn;
	rrec.arg = arg;
	rrec.ctx = ctx;
	pthread_mutex_unlock(&rrec.lock);
	return ENOSPC;
}

static int
reject_handler2(tpe_t *pool, tpe_fn fn, void *arg, void *ctx)
{
	(void)pool;
	(void)fn;
	(void)arg;
	(void)ctx;
	return EPERM;
}

static int
rrec_calls(void)
{
	int n;

	pthread_mutex_lock(&rrec.lock);
	n = rrec.calls;
	pthread_mutex_unlock(&rrec.lock);
	return n;
}

/* Saturates P(1,1,HANDOFF) built from a, executes one more counting task,
 * returns that call's result; tears the pool down. *count says whether it
 * ran. */
static int
saturated_execute(tpe_attr_t *a, int *count)
{
	static struct tu_saturation sat;
	tpe_t *p;
	int rc;

	assert_int_equal(tpe_attr_set_pool_size(a, 1, 1), 0);
	assert_int_equal(tpe_attr_set_queue(a, TPE_QUEUE_HANDOFF, 0), 0);
	p = pool_from(a);
	tu_saturate(p, 1, 0, &sat);
	*count = 0;
	rc = tpe_execute(p, tu_count_fn, count);
	assert_int_equal(tu_stats(p).rejected, 1);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	tu_saturation_destroy(&sat);
	return rc;
}

static void
test_attr_rejection(void **state)
{
	static int count;
	tpe_attr_t *a = new_attr();

	(void)state;
	assert_int_equal(tpe_attr_set_rejection(NULL, TPE_REJECT_ABORT), EINVAL);
	assert_int_equal(tpe_attr_set_rejection(a, (enum tpe_rejection)4), EINVAL);
	assert_int_equal(tpe_attr_set_rejection(a, (enum tpe_rejection)-1), EINVAL);
	assert_int_equal(tpe_attr_set_rejection(a, TPE_REJECT_ABORT), 0);
	assert_int_equal(tpe_attr_set_rejection(a, TPE_REJECT_CALLER_RUNS), 0);
	assert_int_equal(tpe_attr_set_rejection(a, TPE_REJECT_DISCARD_OLDEST), 0);
	assert_int_equal(tpe_attr_set_rejection(a, TPE_REJECT_DISCARD), 0);
	/* A failing call keeps DISCARD. */
	assert_int_equal(tpe_attr_set_rejection(a, (enum tpe_rejection)17), EINVAL);
	assert_int_equal(saturated_execute(a, &count), 0);
	assert_int_equal(count, 0);

	/* Default is ABORT. */
	assert_int_equal(saturated_execute(new_attr(), &count), EAGAIN);
	assert_int_equal(count, 0);

	/* CALLER_RUNS runs it in the caller. */
	a = new_attr();
	assert_int_equal(tpe_attr_set_rejection(a, TPE_REJECT_CALLER_RUNS), 0);
	assert_int_equal(saturated_execute(a, &count), 0);
	assert_int_equal(count, 1);
}

static void
test_attr_rejection_handler(void **state)
{
	static int count;
	static int ctx_obj;
	tpe_attr_t *a = new_attr();

	(void)state;
	assert_int_equal(tpe_attr_set_rejection_handler(NULL, reject_handler, NULL),
	    EINVAL);
	assert_int_equal(tpe_attr_set_rejection_handler(a, NULL, NULL), EINVAL);
	assert_int_equal(tpe_attr_set_rejection_handler(a, reject_handler,
	    &ctx_obj), 0);
	/* A failing call keeps the handler. */
	assert_int_equal(tpe_attr_set_rejection_handler(a, NULL, &count), EINVAL);
	pthread_mutex_lock(&rrec.lock);
	rrec.calls = 0;
	pthread_mutex_unlock(&rrec.lock);
	assert_int_equal(saturated_execute(a, &count), ENOSPC);
	assert_int_equal(count, 0);
	assert_int_equal(rrec_calls(), 1);
	assert_true(rrec.fn == tu_count_fn);
	assert_ptr_equal(rrec.arg, &count);
	assert_ptr_equal(rrec.ctx, &ctx_obj);
	assert_non_null(rrec.pool);

	/* A standard policy set later clears the handler. */
	a = new_attr();
	assert_int_equal(tpe_attr_set_rejection_handler(a, reject_handler, NULL), 0);
	assert_int_equal(tpe_attr_set_rejection(a, TPE_REJECT_DISCARD), 0);
	pthread_mutex_lock(&rrec.lock);
	rrec.calls = 0;
	pthread_mutex_unlock(&rrec.lock);
	assert_int_equal(saturated_execute(a, &count), 0);
	assert_int_equal(rrec_calls(), 0);
	assert_int_equal(count, 0);

	/* A handler set after a standard policy wins; the last handler wins. */
	a = new_attr();
	assert_int_equal(tpe_attr_set_rejection(a, TPE_REJECT_CALLER_RUNS), 0);
	assert_int_equal(tpe_attr_set_rejection_handler(a, reject_handler, NULL), 0);
	assert_int_equal(tpe_attr_set_rejection_handler(a, reject_handler2, NULL), 0);
	pthread_mutex_lock(&rrec.lock);
	rrec.calls = 0;
	pthread_mutex_unlock(&rrec.lock);
	assert_int_equal(saturated_execute(a, &count), EPERM);
	assert_int_equal(rrec_calls(), 0);
	assert_int_equal(count, 0);
}

/* ---- thread name -------------------------------------------------------- */

static void
test_attr_thread_name(void **state)
{
	static struct probe pr;
	tpe_attr_t *a = new_attr();
	tpe_t *p;

	(void)state;
	assert_int_equal(tpe_attr_set_thread_name(NULL, "x"), EINVAL);
	assert_int_equal(tpe_attr_set_thread_name(NULL, NULL), EINVAL);
	/* 12 bytes is the longest prefix. */
	assert_int_equal(tpe_attr_set_thread_name(a, "abcdefghijkl"), 0);
	/* 13 bytes: EINVAL, the prefix stays. */
	assert_int_equal(tpe_attr_set_thread_name(a, "abcdefghijklm"), EINVAL);
	assert_int_equal(tpe_attr_set_thread_name(a,
	    "a-much-longer-prefix-than-allowed"), EINVAL);
	p = pool_from(a);
	run_probe(p, &pr);
	tu_assert_thread_name(pr.name, "abcdefghijkl-1");
	assert_int_equal(tpe_destroy(p), 0);

	/* NULL resets to "tpe". */
	a = new_attr();
	assert_int_equal(tpe_attr_set_thread_name(a, "worker"), 0);
	assert_int_equal(tpe_attr_set_thread_name(a, NULL), 0);
	p = pool_from(a);
	run_probe(p, &pr);
	tu_assert_thread_name(pr.name, "tpe-1");
	assert_int_equal(tpe_destroy(p), 0);

	a = new_attr();
	assert_int_equal(tpe_attr_set_thread_name(a, "io"), 0);
	p = pool_from(a);
	run_probe(p, &pr);
	tu_assert_thread_name(pr.name, "io-1");
	assert_int_equal(tpe_destroy(p), 0);
}

/* ---- stack size and pthread attributes ---------------------------------- */

static void
test_attr_stack_size(void **state)
{
	static struct probe pr;
	tpe_attr_t *a = new_attr();
	tpe_t *p;
	size_t big = 2 * default_stack_size();

	(void)state;
	assert_int_equal(tpe_attr_set_stack_size(NULL, 0), EINVAL);
	assert_int_equal(tpe_attr_set_stack_size(a, 1), EINVAL);
	assert_int_equal(tpe_attr_set_stack_size(a,
	    (size_t)PTHREAD_STACK_MIN - 1), EINVAL);
	assert_int_equal(tpe_attr_set_stack_size(a, (size_t)PTHREAD_STACK_MIN), 0);
	assert_int_equal(tpe_attr_set_stack_size(a, 0), 0);
	assert_int_equal(tpe_attr_set_stack_size(a, big), 0);
	/* The failing call keeps `big`. */
	assert_int_equal(tpe_attr_set_stack_size(a, 100), EINVAL);
	p = pool_from(a);
	run_probe(p, &pr);
	assert_true(pr.stack_size >= big);
	assert_int_equal(tpe_destroy(p), 0);
}

static void
test_attr_pthread_attr(void **state)
{
	static struct probe pr;
	pthread_attr_t pa;
	cpu_set_t mine, one;
	tpe_attr_t *a;
	tpe_t *p;
	size_t def = default_stack_size(), big = 2 * def, bigger = 3 * def;
	int cpu = -1, i;

	(void)state;
	assert_int_equal(tpe_attr_set_pthread_attr(NULL, NULL), EINVAL);

	/* Stack size, affinity and detach state (ignored) are copied. */
	assert_int_equal(pthread_getaffinity_np(pthread_self(), sizeof(mine),
	    &mine), 0);
	for (i = CPU_SETSIZE - 1; i >= 0; i--)
		if (CPU_ISSET(i, &mine))
			cpu = i;
	assert_true(cpu >= 0);
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	assert_int_equal(pthread_attr_init(&pa), 0);
	assert_int_equal(pthread_attr_setstacksize(&pa, big), 0);
	assert_int_equal(pthread_attr_setaffinity_np(&pa, sizeof(one), &one), 0);
	assert_int_equal(pthread_attr_setdetachstate(&pa,
	    PTHREAD_CREATE_DETACHED), 0);
	a = new_attr();
	assert_int_equal(tpe_attr_set_pthread_attr(a, &pa), 0);
	/* The attr is copied: destroying pa changes nothing. */
	assert_int_equal(pthread_attr_destroy(&pa), 0);
	assert_int_equal(tpe_attr_set_pool_size(a, 1, 1), 0);
	p = pool_from(a);
	run_probe(p, &pr);
	assert_true(pr.stack_size >= big);
	assert_int_equal(pr.affinity_rc, 0);
#ifdef TPE__HAVE_AFFINITY
	assert_int_equal(CPU_COUNT(&pr.affinity), 1);
	assert_true(CPU_ISSET(cpu, &pr.affinity));
#else
	/* Not copied where it cannot be read (attr.h). */
	assert_true(CPU_EQUAL(&pr.affinity, &mine));
#endif
	/* Workers are joinable whatever the detach state: destroy joins. */
	assert_int_equal(tpe_destroy(p), 0);

	/* A later tpe_attr_set_stack_size overrides the pthread attr's. */
	assert_int_equal(pthread_attr_init(&pa), 0);
	assert_int_equal(pthread_attr_setstacksize(&pa, big), 0);
	a = new_attr();
	assert_int_equal(tpe_attr_set_pthread_attr(a, &pa), 0);
	assert_int_equal(tpe_attr_set_stack_size(a, bigger), 0);
	assert_int_equal(pthread_attr_destroy(&pa), 0);
	p = pool_from(a);
	run_probe(p, &pr);
	assert_true(pr.stack_size >= bigger);
	assert_int_equal(tpe_destroy(p), 0);

	/* NULL resets to defaults: the affinity is no longer restricted. */
	assert_int_equal(pthread_attr_init(&pa), 0);
	assert_int_equal(pthread_attr_setaffinity_np(&pa, sizeof(one), &one), 0);
	a = new_attr();
	assert_int_equal(tpe_attr_set_pthread_attr(a, &pa), 0);
	assert_int_equal(pthread_attr_destroy(&pa), 0);
	assert_int_equal(tpe_attr_set_pthread_attr(a, NULL), 0);
	p = pool_from(a);
	run_probe(p, &pr);
	assert_int_equal(pr.affinity_rc, 0);
	assert_true(CPU_EQUAL(&pr.affinity, &mine));
	assert_int_equal(tpe_destroy(p), 0);
}

/* ---- hooks and callbacks ------------------------------------------------ */

static int n_before, n_after, n_start, n_exit, n_term, n_discard;
static void *seen_ctx[6];

static void
h_before(tpe_t *pool, tpe_fn fn, void *arg, void *ctx)
{
	(void)pool;
	(void)fn;
	(void)arg;
	__atomic_store_n(&seen_ctx[0], ctx, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&n_before, 1, __ATOMIC_SEQ_CST);
}

static void
h_after(tpe_t *pool, tpe_fn fn, void *arg, void *ctx)
{
	(void)pool;
	(void)fn;
	(void)arg;
	__atomic_store_n(&seen_ctx[1], ctx, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&n_after, 1, __ATOMIC_SEQ_CST);
}

static void
h_start(tpe_t *pool, void *ctx)
{
	(void)pool;
	__atomic_store_n(&seen_ctx[2], ctx, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&n_start, 1, __ATOMIC_SEQ_CST);
}

static void
h_exit(tpe_t *pool, void *ctx)
{
	(void)pool;
	__atomic_store_n(&seen_ctx[3], ctx, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&n_exit, 1, __ATOMIC_SEQ_CST);
}

static void
h_term(tpe_t *pool, void *ctx)
{
	(void)pool;
	__atomic_store_n(&seen_ctx[4], ctx, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&n_term, 1, __ATOMIC_SEQ_CST);
}

static void
h_discard(tpe_fn fn, void *arg, void *ctx)
{
	(void)fn;
	(void)arg;
	__atomic_store_n(&seen_ctx[5], ctx, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&n_discard, 1, __ATOMIC_SEQ_CST);
}

static void
reset_hook_counts(void)
{
	n_before = n_after = n_start = n_exit = n_term = n_discard = 0;
	memset(seen_ctx, 0, sizeof(seen_ctx));
}

/* Runs one counting task on P(1,1,HANDOFF,DISCARD) made from a, and one
 * rejected (discarded) task; returns after destroy. */
static void
run_hooked(tpe_attr_t *a)
{
	static struct tu_saturation sat;
	static int count;
	tpe_t *p;

	assert_int_equal(tpe_attr_set_pool_size(a, 1, 1), 0);
	assert_int_equal(tpe_attr_set_queue(a, TPE_QUEUE_HANDOFF, 0), 0);
	assert_int_equal(tpe_attr_set_rejection(a, TPE_REJECT_DISCARD), 0);
	p = pool_from(a);
	count = 0;
	tu_saturate(p, 1, 0, &sat);
	assert_int_equal(tpe_execute(p, tu_count_fn, &count), 0); /* discarded */
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(count, 0);
	assert_int_equal(sat.b[0].ran, 1);
	tu_saturation_destroy(&sat);
}

static void
test_attr_hooks(void **state)
{
	static int c1, c2, c3, c4;
	tpe_attr_t *a;

	(void)state;
	assert_int_equal(tpe_attr_set_task_hooks(NULL, h_before, h_after, NULL),
	    EINVAL);
	assert_int_equal(tpe_attr_set_thread_hooks(NULL, h_start, h_exit, NULL),
	    EINVAL);
	assert_int_equal(tpe_attr_set_terminated_hook(NULL, h_term, NULL), EINVAL);
	assert_int_equal(tpe_attr_set_discard_callback(NULL, h_discard, NULL),
	    EINVAL);

	/* All set: each is called, with its ctx. */
	reset_hook_counts();
	a = new_attr();
	assert_int_equal(tpe_attr_set_task_hooks(a, h_before, h_after, &c1), 0);
	assert_int_equal(tpe_attr_set_thread_hooks(a, h_start, h_exit, &c2), 0);
	assert_int_equal(tpe_attr_set_terminated_hook(a, h_term, &c3), 0);
	assert_int_equal(tpe_attr_set_discard_callback(a, h_discard, &c4), 0);
	run_hooked(a);
	assert_int_equal(n_before, 1);
	assert_int_equal(n_after, 1);
	assert_int_equal(n_start, 1);
	assert_int_equal(n_exit, 1);
	assert_int_equal(n_term, 1);
	assert_int_equal(n_discard, 1);
	assert_ptr_equal(seen_ctx[0], &c1);
	assert_ptr_equal(seen_ctx[1], &c1);
	assert_ptr_equal(seen_ctx[2], &c2);
	assert_ptr_equal(seen_ctx[3], &c2);
	assert_ptr_equal(seen_ctx[4], &c3);
	assert_ptr_equal(seen_ctx[5], &c4);

	/* Either hook of a pair may be NULL. */
	reset_hook_counts();
	a = new_attr();
	assert_int_equal(tpe_attr_set_task_hooks(a, NULL, h_after, NULL), 0);
	assert_int_equal(tpe_attr_set_thread_hooks(a, h_start, NULL, NULL), 0);
	run_hooked(a);
	assert_int_equal(n_before, 0);
	assert_int_equal(n_after, 1);
	assert_int_equal(n_start, 1);
	assert_int_equal(n_exit, 0);

	reset_hook_counts();
	a = new_attr();
	assert_int_equal(tpe_attr_set_task_hooks(a, h_before, NULL, NULL), 0);
	assert_int_equal(tpe_attr_set_thread_hooks(a, NULL, h_exit, NULL), 0);
	run_hooked(a);
	assert_int_equal(n_before, 1);
	assert_int_equal(n_after, 0);
	assert_int_equal(n_start, 0);
	assert_int_equal(n_exit, 1);

	/* Set then cleared with NULL: nothing is called. */
	reset_hook_counts();
	a = new_attr();
	assert_int_equal(tpe_attr_set_task_hooks(a, h_before, h_after, NULL), 0);
	assert_int_equal(tpe_attr_set_thread_hooks(a, h_start, h_exit, NULL), 0);
	assert_int_equal(tpe_attr_set_terminated_hook(a, h_term, NULL), 0);
	assert_int_equal(tpe_attr_set_discard_callback(a, h_discard, NULL), 0);
	assert_int_equal(tpe_attr_set_task_hooks(a, NULL, NULL, NULL), 0);
	assert_int_equal(tpe_attr_set_thread_hooks(a, NULL, NULL, NULL), 0);
	assert_int_equal(tpe_attr_set_terminated_hook(a, NULL, NULL), 0);
	assert_int_equal(tpe_attr_set_discard_callback(a, NULL, NULL), 0);
	run_hooked(a);
	assert_int_equal(n_before + n_after + n_start + n_exit + n_term +
	    n_discard, 0);
}

/* ---- the default size follows the CPU affinity ------------------------- */

/* 0 when a pool of default attributes, from tpe_create(NULL) and from
 * tpe_attr_create, has core == max == want; else which check failed. */
static int
default_size_is(size_t want)
{
	struct tpe_stats s1, s2;
	tpe_attr_t *a;
	tpe_t *p1, *p2;

	if (tpe_create(&p1, NULL) != 0 || tpe_attr_create(&a) != 0 ||
	    tpe_create(&p2, a) != 0)
		return 1;
	tpe_attr_destroy(a);
	if (tpe_get_stats(p1, &s1, sizeof(s1)) != 0 ||
	    tpe_get_stats(p2, &s2, sizeof(s2)) != 0)
		return 2;
	if (s1.core_size != want || s1.max_size != want ||
	    s2.core_size != want || s2.max_size != want)
		return 3;
	if (tpe_destroy(p1) != 0 || tpe_destroy(p2) != 0)
		return 4;
	return 0;
}

#ifdef TPE__CPU_COUNT_AFFINITY
/* In a child whose affinity is the first n CPUs this thread may run on,
 * the default pool size is n. */
static void
check_default_size_on(size_t n)
{
	cpu_set_t all, some;
	size_t k = 0;
	int i, status;
	pid_t pid;

	assert_int_equal(sched_getaffinity(0, sizeof(all), &all), 0);
	CPU_ZERO(&some);
	for (i = 0; i < CPU_SETSIZE && k < n; i++)
		if (CPU_ISSET(i, &all)) {
			CPU_SET(i, &some);
			k++;
		}
	assert_int_equal(k, n);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		tu_time_bound(10); /* alarms are not inherited */
		if (sched_setaffinity(0, sizeof(some), &some) != 0)
			_exit(10);
		_exit(default_size_is(n));
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}
#endif

/* The default core and max count the CPUs this process may run on (its
 * affinity), not the CPUs online; where the affinity cannot be counted
 * (cpu.h), the CPUs online. */
static void
test_attr_default_size_is_affinity(void **state)
{
	(void)state;
#ifdef TPE__CPU_COUNT_AFFINITY
	assert_int_equal(default_size_is(allowed_cpus()), 0);
	check_default_size_on(1);
	if (allowed_cpus() >= 2)
		check_default_size_on(2);
#else
	assert_int_equal(default_size_is(
	    (size_t)sysconf(_SC_NPROCESSORS_ONLN)), 0);
#endif
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_attr_version),
		cmocka_unit_test(test_attr_create_null),
		cmocka_unit_test(test_attr_defaults),
		cmocka_unit_test(test_attr_defaults_queue_unbounded_and_name),
		cmocka_unit_test(test_attr_create_pool_null_args),
		cmocka_unit_test(test_attr_destroyed_after_create),
		cmocka_unit_test(test_attr_pool_size),
		cmocka_unit_test(test_attr_keep_alive),
		cmocka_unit_test(test_attr_keep_alive_unchanged_after_error),
		cmocka_unit_test(test_attr_allow_core_timeout_false),
		cmocka_unit_test(test_attr_default_allow_core_timeout_false),
		cmocka_unit_test(test_attr_default_keep_alive),
		cmocka_unit_test(test_attr_queue_errors),
		cmocka_unit_test(test_attr_queue_bounded_unchanged_after_error),
		cmocka_unit_test(test_attr_queue_handoff),
		cmocka_unit_test(test_attr_policy),
		cmocka_unit_test(test_attr_policy_scale_first),
		cmocka_unit_test(test_attr_rejection),
		cmocka_unit_test(test_attr_rejection_handler),
		cmocka_unit_test(test_attr_thread_name),
		cmocka_unit_test(test_attr_stack_size),
		cmocka_unit_test(test_attr_pthread_attr),
		cmocka_unit_test(test_attr_hooks),
		cmocka_unit_test(test_attr_default_size_is_affinity),
	};

	tu_time_bound(0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
