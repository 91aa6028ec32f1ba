/* SPDX-License-Identifier: MIT */
/*
 * test_conformance.c - one template of cases run against every queue kind
 * and engine (each queue kind under queue-first and scale-first, and the
 * per-worker stacks), through the public API only (include/tpe.h), the way
 * Concurrency Kit's regressions/ck_ring/validate runs one validation
 * against each ring flavour. A case that a configuration does not promise
 * (tpe_attr_set_queue(3), tpe_remove(3), tpe_shutdown_now(3)) is skipped
 * visibly, with the reason printed before the skip.
 *
 * Every race state is built with gates (latches that a task blocks on until
 * the test opens them) and semaphores; nothing sleeps, nothing is timed.
 */
#include "helpers.h"

/* ---- the configurations ------------------------------------------------ */

struct conf {
	const char *name;
	enum tpe_queue_kind kind;
	size_t capacity;          /* of the queue kind (0: none or no bound) */
	enum tpe_policy policy;
	size_t core, max;
	size_t room;              /* tasks that wait when every worker is busy
	                           * (SIZE_MAX: no bound) */
	bool fifo;                /* one worker runs its queue in order */
	bool removes;             /* tpe_remove works (else ENOTSUP) */
};

#define NO_BOUND SIZE_MAX
static const struct conf confs[] = {
	{ "unbounded", TPE_QUEUE_UNBOUNDED, 0, TPE_POLICY_QUEUE_FIRST, 2, 2,
	    NO_BOUND, true, true },
	{ "bounded", TPE_QUEUE_BOUNDED, 4, TPE_POLICY_QUEUE_FIRST, 2, 2, 4,
	    true, true },
	{ "unbounded_scale_first", TPE_QUEUE_UNBOUNDED, 0,
	    TPE_POLICY_SCALE_FIRST, 1, 2, NO_BOUND, true, true },
	{ "bounded_scale_first", TPE_QUEUE_BOUNDED, 4, TPE_POLICY_SCALE_FIRST,
	    1, 2, 4, true, true },
	{ "handoff_queue_first", TPE_QUEUE_HANDOFF, 0, TPE_POLICY_QUEUE_FIRST,
	    1, 2, 0, false, true },
	{ "handoff_scale_first", TPE_QUEUE_HANDOFF, 0, TPE_POLICY_SCALE_FIRST,
	    1, 2, 0, false, true },
	{ "per_worker", TPE_QUEUE_PER_WORKER, 0, TPE_POLICY_QUEUE_FIRST, 2, 2,
	    NO_BOUND, false, false },
	/* The plain calls give every task priority 0: FIFO. */
	{ "priority", TPE_QUEUE_PRIORITY, 0, TPE_POLICY_QUEUE_FIRST, 2, 2,
	    NO_BOUND, true, true },
	{ "priority_bounded", TPE_QUEUE_PRIORITY, 4, TPE_POLICY_QUEUE_FIRST,
	    2, 2, 4, true, true },
	{ "priority_scale_first", TPE_QUEUE_PRIORITY, 0,
	    TPE_POLICY_SCALE_FIRST, 1, 2, NO_BOUND, true, true },
	{ "priority_bounded_scale_first", TPE_QUEUE_PRIORITY, 4,
	    TPE_POLICY_SCALE_FIRST, 1, 2, 4, true, true },
};
#define NCONFS (sizeof(confs) / sizeof(confs[0]))

/* Prints why a case does not apply to a configuration, then skips it. */
#define SKIP_BECAUSE(c, why)                                               \
	do {                                                               \
		print_message("# %s: skipped: %s\n", (c)->name, (why));    \
		skip();                                                    \
	} while (0)

/* ---- tasks with ids ---------------------------------------------------- */

/*
 * The record of one case: how often each id ran and was handed back, and
 * the order the ids ran in. Every field is atomic.
 */
#define IDS 4096
struct record {
	int ran[IDS];
	int handed[IDS];
	int order[IDS];
	int norder;
};

/* A task's argument: its id and the record it writes to. */
struct slot {
	struct record *rec;
	int id;
};

static void
id_fn(void *arg)
{
	struct slot *s = arg;
	int k = __atomic_fetch_add(&s->rec->norder, 1, __ATOMIC_SEQ_CST);

	if (k < IDS)
		__atomic_store_n(&s->rec->order[k], s->id, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&s->rec->ran[s->id], 1, __ATOMIC_SEQ_CST);
}

/* drained callback of tpe_shutdown_now and the pool's discard callback. */
static void
handback_fn(tpe_fn fn, void *arg, void *ctx)
{
	struct slot *s = arg;

	(void)ctx;
	if (fn == id_fn)
		__atomic_add_fetch(&s->rec->handed[s->id], 1,
		    __ATOMIC_SEQ_CST);
}

static struct record *
record_new(struct slot *slots, size_t n)
{
	struct record *r = calloc(1, sizeof(*r));
	size_t i;

	assert_non_null(r);
	for (i = 0; i < n; i++)
		slots[i] = (struct slot){ r, (int)i };
	return r;
}

/* A pool of the configuration, `single`: one worker (core = max = 1). */
static tpe_t *
conf_pool(const struct conf *c, bool single)
{
	return tu_pool_with(&(struct tu_pool_opts){
	    .core = single ? 1 : c->core, .max = single ? 1 : c->max,
	    .queue = c->kind, .capacity = c->capacity, .policy = c->policy,
	    .rejection = TPE_REJECT_ABORT, .discard = handback_fn });
}

/* Holds every worker of a pool of c in a blocker task (tu_saturate). */
static void
conf_saturate(tpe_t *pool, const struct conf *c, bool single,
    struct tu_saturation *sat)
{
	tu_saturate(pool, single ? 1 : c->max, 0, sat);
}

/* Tasks that queue behind busy workers in a case: the room, at most 4. */
static size_t
conf_queued(const struct conf *c)
{
	return c->room < 4 ? c->room : 4;
}

/* ---- FIFO -------------------------------------------------------------- */

/* One worker runs the tasks queued behind it in submission order. */
static void
test_conformance_fifo(void **state)
{
	const struct conf *c = *state;
	struct tu_saturation sat;
	struct slot s[4];
	struct record *r;
	tpe_t *p;
	int i;

	if (!c->fifo)
		SKIP_BECAUSE(c, c->room == 0 ? "a hand-off queue holds no task "
		    "to order (tpe_attr_set_queue(3))" : "per-worker stacks "
		    "guarantee no order (tpe_attr_set_queue(3))");
	r = record_new(s, 4);
	p = conf_pool(c, true);
	conf_saturate(p, c, true, &sat);
	tu_fill_queue(p, 4, id_fn, s, sizeof(s[0]));
	tu_unsaturate(&sat);
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	assert_int_equal(tu_load(&r->norder), 4);
	for (i = 0; i < 4; i++)
		assert_int_equal(tu_load(&r->order[i]), i);
	assert_int_equal(tpe_destroy(p), 0);
	tu_saturation_destroy(&sat);
	free(r);
}

/* ---- tpe_remove -------------------------------------------------------- */

/*
 * Queued a, b, a, c: tpe_remove(a) takes the oldest a, so the rest run as
 * b, a, c; a second and third remove of a and of something never queued
 * find nothing more than documented (ENOENT).
 */
static void
test_conformance_remove_oldest(void **state)
{
	const struct conf *c = *state;
	struct tu_saturation sat;
	struct slot s[3];
	struct record *r;
	tpe_t *p;

	if (!c->removes) {
		/* tpe_remove(3): ENOTSUP, the task still runs. */
		r = record_new(s, 1);
		p = conf_pool(c, false);
		conf_saturate(p, c, false, &sat);
		assert_int_equal(tpe_execute(p, id_fn, &s[0]), 0);
		assert_int_equal(tpe_remove(p, id_fn, &s[0]), ENOTSUP);
		tu_unsaturate(&sat);
		assert_int_equal(tpe_wait_idle(p, -1), 0);
		assert_int_equal(tu_load(&r->ran[0]), 1);
		assert_int_equal(tpe_destroy(p), 0);
		tu_saturation_destroy(&sat);
		free(r);
		return;
	}
	if (!c->fifo)
		SKIP_BECAUSE(c, "a hand-off queue holds no task to remove "
		    "(tpe_attr_set_queue(3))");
	r = record_new(s, 3);
	p = conf_pool(c, true);
	conf_saturate(p, c, true, &sat);
	assert_int_equal(tpe_execute(p, id_fn, &s[0]), 0);
	assert_int_equal(tpe_execute(p, id_fn, &s[1]), 0);
	assert_int_equal(tpe_execute(p, id_fn, &s[0]), 0);
	assert_int_equal(tpe_execute(p, id_fn, &s[2]), 0);
	assert_int_equal(tpe_remove(p, id_fn, &s[0]), 0);
	assert_int_equal(tpe_remove(p, id_fn, r), ENOENT);
	assert_int_equal(tu_stats(p).queued, 3);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	assert_int_equal(tu_load(&r->norder), 3);
	assert_int_equal(tu_load(&r->order[0]), 1);
	assert_int_equal(tu_load(&r->order[1]), 0);
	assert_int_equal(tu_load(&r->order[2]), 2);
	assert_int_equal(tpe_remove(p, id_fn, &s[0]), ENOENT);
	assert_int_equal(tu_load(&r->handed[0]), 0); /* no callback */
	assert_int_equal(tpe_destroy(p), 0);
	tu_saturation_destroy(&sat);
	free(r);
}

/* ---- ownership on refusal ---------------------------------------------- */

/*
 * A refused task never runs and is never handed back: its argument, a
 * sentinel, stays the caller's. Saturated: EAGAIN where the configuration
 * can be saturated; shut down: ECANCELED everywhere.
 */
struct sentinel {
	int ran;
	unsigned magic;
};
#define MAGIC 0x5e7e1u

static void
sentinel_fn(void *arg)
{
	struct sentinel *s = arg;

	__atomic_add_fetch(&s->ran, 1, __ATOMIC_SEQ_CST);
	s->magic = 0;
}

static int sentinel_handed;

static void
sentinel_handback(tpe_fn fn, void *arg, void *ctx)
{
	(void)fn;
	(void)arg;
	(void)ctx;
	__atomic_add_fetch(&sentinel_handed, 1, __ATOMIC_SEQ_CST);
}

static void
assert_refused(tpe_t *p, int want)
{
	struct sentinel s = { 0, MAGIC };

	assert_int_equal(tpe_execute(p, sentinel_fn, &s), want);
	assert_int_equal(tu_ran(&s), 0);
	assert_int_equal(s.magic, MAGIC);
}

static void
test_conformance_refused_saturated(void **state)
{
	const struct conf *c = *state;
	struct tu_saturation sat;
	uint64_t rejected;
	tpe_t *p;

	if (c->room == NO_BOUND)
		SKIP_BECAUSE(c, c->kind == TPE_QUEUE_PER_WORKER ? "per-worker "
		    "stacks never refuse a task (tpe_attr_set_queue(3))" :
		    "an unbounded queue never rejects while the pool runs "
		    "(tpe_attr_set_queue(3))");
	sentinel_handed = 0;
	p = tu_pool_with(&(struct tu_pool_opts){ .core = c->core,
	    .max = c->max, .queue = c->kind, .capacity = c->capacity,
	    .policy = c->policy, .discard = sentinel_handback });
	conf_saturate(p, c, false, &sat);
	tu_fill_queue(p, c->room, tu_nop_fn, NULL, 0);
	rejected = tu_stats(p).rejected;
	assert_refused(p, EAGAIN);
	assert_int_equal(tu_stats(p).rejected, rejected + 1);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(tu_load(&sentinel_handed), 0);
	tu_saturation_destroy(&sat);
}

static void
test_conformance_refused_shut_down(void **state)
{
	const struct conf *c = *state;
	struct tu_saturation sat;
	tpe_t *p;

	sentinel_handed = 0;
	p = tu_pool_with(&(struct tu_pool_opts){ .core = c->core,
	    .max = c->max, .queue = c->kind, .capacity = c->capacity,
	    .policy = c->policy, .discard = sentinel_handback });
	conf_saturate(p, c, false, &sat);
	assert_int_equal(tpe_shutdown(p), 0);
	assert_refused(p, ECANCELED);
	assert_int_equal(tu_stats(p).rejected, 0); /* never reached policy */
	tu_unsaturate(&sat);
	assert_int_equal(tpe_await_termination(p, -1), 0);
	assert_refused(p, ECANCELED);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(tu_load(&sentinel_handed), 0);
	tu_saturation_destroy(&sat);
}

/* ---- tpe_shutdown_now -------------------------------------------------- */

/*
 * Every worker busy, tasks queued behind them: tpe_shutdown_now hands back
 * each queued task exactly once (to its callback, or, for per-worker
 * stacks, possibly to the discard callback later) and runs none of them;
 * the running tasks finish exactly once.
 */
static void
test_conformance_shutdown_now(void **state)
{
	const struct conf *c = *state;
	size_t i, n = conf_queued(c);
	struct tu_saturation sat;
	struct slot s[4];
	struct record *r;
	tpe_t *p;

	r = record_new(s, 4);
	p = conf_pool(c, false);
	conf_saturate(p, c, false, &sat);
	tu_fill_queue(p, n, id_fn, s, sizeof(s[0]));
	if (n < 4) /* the rest are refused and stay ours */
		assert_int_equal(tpe_execute(p, id_fn, &s[n]), EAGAIN);
	assert_int_equal(tpe_shutdown_now(p, handback_fn, NULL), 0);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_await_termination(p, -1), 0);
	for (i = 0; i < c->max; i++)
		assert_int_equal(tu_ran(&sat.b[i]), 1);
	for (i = 0; i < 4; i++) {
		assert_int_equal(tu_load(&r->ran[i]), 0);
		assert_int_equal(tu_load(&r->handed[i]), i < n ? 1 : 0);
	}
	assert_int_equal(tpe_shutdown_now(p, handback_fn, NULL), 0);
	for (i = 0; i < n; i++)
		assert_int_equal(tu_load(&r->handed[i]), 1);
	assert_int_equal(tpe_destroy(p), 0);
	tu_saturation_destroy(&sat);
	free(r);
}

/* ---- tpe_wait_idle and the statistics ---------------------------------- */

/*
 * Every worker busy, tasks queued behind them, one more refused where the
 * configuration refuses, one removed where it removes: the pool is not
 * idle while a task is held; once tpe_wait_idle returns, every accepted
 * task has finished and the counters add up: submitted == accepted,
 * completed == submitted - removed, rejected == refusals by the policy.
 */
static void
test_conformance_wait_idle_stats(void **state)
{
	const struct conf *c = *state;
	size_t i, n = conf_queued(c), removed = 0, refused = 0;
	struct tu_saturation sat;
	struct tpe_stats st;
	struct slot s[5];
	struct record *r;
	tpe_t *p;

	r = record_new(s, 5);
	p = conf_pool(c, false);
	conf_saturate(p, c, false, &sat);
	tu_fill_queue(p, n, id_fn, s, sizeof(s[0]));
	if (c->room != NO_BOUND) {
		assert_int_equal(tpe_execute(p, id_fn, &s[4]), EAGAIN);
		refused = 1;
	}
	if (c->removes && n > 0) {
		assert_int_equal(tpe_remove(p, id_fn, &s[0]), 0);
		removed = 1;
	}
	assert_int_equal(tpe_wait_idle(p, 0), ETIMEDOUT);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_wait_idle(p, -1), 0);
	for (i = 0; i < c->max; i++)
		assert_int_equal(tu_ran(&sat.b[i]), 1);
	for (i = 0; i < 5; i++)
		assert_int_equal(tu_load(&r->ran[i]),
		    i < removed || i >= n ? 0 : 1);
	st = tu_stats(p);
	assert_int_equal(st.submitted, c->max + n);
	assert_int_equal(st.completed, st.submitted - removed);
	assert_int_equal(st.rejected, refused);
	assert_int_equal(st.queued, 0);
	assert_int_equal(st.active, 0);
	assert_int_equal(tpe_destroy(p), 0);
	tu_saturation_destroy(&sat);
	free(r);
}

/* ---- exactly once under a flood ---------------------------------------- */

/*
 * Two submitters start together and submit FLOOD tasks each; when both
 * are half-way, the test calls tpe_shutdown_now while they go on. Every id
 * is run or handed back exactly once if it was accepted, and neither if it
 * was refused.
 */
#define FLOOD 2000
struct flood {
	pthread_barrier_t start;
	sem_t halfway;
	tpe_t *pool;
	struct slot *slots;
	int accepted[2 * FLOOD];
};

struct submitter {
	struct flood *f;
	int first;
};

static void *
submitter_main(void *arg)
{
	struct submitter *sub = arg;
	struct flood *f = sub->f;
	int i, id;

	pthread_barrier_wait(&f->start);
	for (i = 0; i < FLOOD; i++) {
		if (i == FLOOD / 2)
			sem_post(&f->halfway);
		id = sub->first + i;
		f->accepted[id] = tpe_execute(f->pool, id_fn,
		    &f->slots[id]) == 0;
	}
	return NULL;
}

static void
test_conformance_flood_exactly_once(void **state)
{
	const struct conf *c = *state;
	struct submitter sub[2];
	struct flood *f = calloc(1, sizeof(*f));
	struct slot *s = calloc(2 * FLOOD, sizeof(*s));
	pthread_t t[2];
	struct record *r;
	int i, accepted = 0, done;

	assert_non_null(f);
	assert_non_null(s);
	r = record_new(s, 2 * FLOOD);
	f->slots = s;
	f->pool = conf_pool(c, false);
	assert_int_equal(pthread_barrier_init(&f->start, NULL, 2), 0);
	assert_int_equal(sem_init(&f->halfway, 0, 0), 0);
	for (i = 0; i < 2; i++) {
		sub[i] = (struct submitter){ f, i * FLOOD };
		assert_int_equal(pthread_create(&t[i], NULL, submitter_main,
		    &sub[i]), 0);
	}
	for (i = 0; i < 2; i++)
		assert_true(tu_sem_wait_for(&f->halfway, TU_WAIT_BOUND));
	assert_int_equal(tpe_shutdown_now(f->pool, handback_fn, NULL), 0);
	for (i = 0; i < 2; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	assert_int_equal(tpe_await_termination(f->pool, -1), 0);
	for (i = 0; i < 2 * FLOOD; i++) {
		done = tu_load(&r->ran[i]) + tu_load(&r->handed[i]);
		if (done != f->accepted[i])
			fail_msg("%s: task %d accepted %d, ran %d, handed "
			    "back %d", c->name, i, f->accepted[i],
			    tu_load(&r->ran[i]), tu_load(&r->handed[i]));
		accepted += f->accepted[i];
	}
	assert_int_equal(tu_stats(f->pool).submitted, (uint64_t)accepted);
	assert_int_equal(tpe_destroy(f->pool), 0);
	sem_destroy(&f->halfway);
	pthread_barrier_destroy(&f->start);
	free(r);
	free(s);
	free(f);
}

/* ---- the template over the table --------------------------------------- */

static const struct {
	const char *name;
	CMUnitTestFunction fn;
} cases[] = {
	{ "fifo", test_conformance_fifo },
	{ "remove_oldest", test_conformance_remove_oldest },
	{ "refused_saturated", test_conformance_refused_saturated },
	{ "refused_shut_down", test_conformance_refused_shut_down },
	{ "shutdown_now", test_conformance_shutdown_now },
	{ "wait_idle_stats", test_conformance_wait_idle_stats },
	{ "flood_exactly_once", test_conformance_flood_exactly_once },
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

int
main(void)
{
	static struct CMUnitTest tests[NCONFS * NCASES];
	static char names[NCONFS * NCASES][80];
	size_t i, j, k = 0;

	for (j = 0; j < NCASES; j++)
		for (i = 0; i < NCONFS; i++, k++) {
			snprintf(names[k], sizeof(names[k]),
			    "test_conformance_%s/%s", cases[j].name,
			    confs[i].name);
			tests[k] = (struct CMUnitTest){ .name = names[k],
			    .test_func = cases[j].fn,
			    .initial_state = (void *)&confs[i] };
		}
	tu_time_bound(0);
	return _cmocka_run_group_tests("test_conformance", tests, k, NULL,
	    NULL);
}
