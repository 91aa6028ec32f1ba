/* SPDX-License-Identifier: MIT */
/*
 * test_group.c - task groups (tpe_group_create(3) and the calls it names):
 * every member ends exactly once whether it ran, was handed back or was
 * refused, on every queue kind under both policies; wait, cancel, notify,
 * the errors, and the EDEADLK of a wait from the pool's own worker.
 *
 * States are built with gates (latches a task blocks on until the test
 * opens them); nothing sleeps. Tasks never call cmocka's asserts: they
 * record, the test thread asserts.
 */
#define TU_FAULT_INJECTION /* this binary links the --wrap wrappers */
#include "helpers.h"

/* ---- the configurations (as test_conformance's) ----------------------- */

struct conf {
	const char *name;
	enum tpe_queue_kind kind;
	size_t capacity;
	enum tpe_policy policy;
	size_t core, max;
	bool queues;    /* a single busy worker leaves room for a task */
	bool removes;   /* tpe_remove works */
};

static const struct conf confs[] = {
	{ "unbounded", TPE_QUEUE_UNBOUNDED, 0, TPE_POLICY_QUEUE_FIRST, 2, 2,
	    true, true },
	{ "bounded", TPE_QUEUE_BOUNDED, 4, TPE_POLICY_QUEUE_FIRST, 2, 2,
	    true, true },
	{ "unbounded_scale_first", TPE_QUEUE_UNBOUNDED, 0,
	    TPE_POLICY_SCALE_FIRST, 1, 2, true, true },
	{ "bounded_scale_first", TPE_QUEUE_BOUNDED, 4, TPE_POLICY_SCALE_FIRST,
	    1, 2, true, true },
	{ "handoff_queue_first", TPE_QUEUE_HANDOFF, 0, TPE_POLICY_QUEUE_FIRST,
	    1, 2, false, true },
	{ "handoff_scale_first", TPE_QUEUE_HANDOFF, 0, TPE_POLICY_SCALE_FIRST,
	    1, 2, false, true },
	{ "per_worker", TPE_QUEUE_PER_WORKER, 0, TPE_POLICY_QUEUE_FIRST, 2, 2,
	    true, false },
};
#define NCONFS (sizeof(confs) / sizeof(confs[0]))

static struct tu_handbacks handed;

static tpe_t *
conf_pool(const struct conf *c, bool single, enum tpe_rejection rej)
{
	return tu_pool_with(&(struct tu_pool_opts){
	    .core = single ? 1 : c->core, .max = single ? 1 : c->max,
	    .queue = c->kind, .capacity = c->capacity, .policy = c->policy,
	    .rejection = rej, .discard = tu_handback_fn,
	    .discard_ctx = &handed });
}

/* A notify callback: counts its runs in a struct notified, notes its
 * thread and counts a latch down. */
struct notified {
	int ran;                 /* atomic */
	pthread_t thread;        /* written before the latch */
	tpe_group_t *group;      /* the group it was given */
	struct tu_latch latch;
};

static void
notify_fn(tpe_group_t *g, void *ctx)
{
	struct notified *n = ctx;

	n->thread = pthread_self();
	n->group = g;
	__atomic_add_fetch(&n->ran, 1, __ATOMIC_SEQ_CST);
	tu_latch_count_down(&n->latch);
}

static void
notified_init(struct notified *n)
{
	memset(n, 0, sizeof(*n));
	tu_latch_init(&n->latch, 1);
}

/* ---- every kind ------------------------------------------------------- */

/*
 * Many members on each kind; a bounded or hand-off pool refuses some
 * (EAGAIN): those were never added. Every accepted one runs once, the
 * wait returns once all have, and the group is empty.
 */
static void
test_group_each_member_once_every_kind(void **state)
{
	enum { N = 2000 };
	static int ran[N];
	size_t k, i;

	(void)state;
	for (k = 0; k < NCONFS; k++) {
		const struct conf *c = &confs[k];
		tpe_t *p = conf_pool(c, false, TPE_REJECT_ABORT);
		tpe_group_t *g;
		int accepted = 0, rc, sum = 0;
		bool once = true;

		memset(ran, 0, sizeof(ran));
		assert_int_equal(tpe_group_create(&g), 0);
		for (i = 0; i < N; i++) {
			rc = tpe_group_execute(g, p, tu_count_fn, &ran[i]);
			if (rc == 0)
				accepted++;
			else
				assert_int_equal(rc, EAGAIN);
			/* A refused one is not counted: at most the
			 * accepted are pending. */
			assert_true(tpe_group_size(g) <= (size_t)accepted);
		}
		assert_int_equal(tpe_group_wait(g, TU_WAIT_BOUND), 0);
		assert_int_equal(tpe_group_size(g), 0);
		for (i = 0; i < N; i++) {
			sum += tu_load(&ran[i]);
			once = once && tu_load(&ran[i]) <= 1;
		}
		print_message("# %s: %d of %d accepted\n", c->name, accepted,
		    N);
		assert_true(once);
		assert_int_equal(sum, accepted);
		assert_true(accepted > 0);
		assert_int_equal(tpe_group_destroy(g), 0);
		tpe_destroy(p);
	}
}

/*
 * A member held by a gate keeps the group non-empty: a poll and a timed
 * wait say ETIMEDOUT, destroy says EBUSY; the gate opens, the wait says 0.
 */
static void
test_group_wait_times_out_then_completes(void **state)
{
	struct tu_latch started, release;
	struct tu_blocker b = { &started, &release, NULL, 0 };
	tpe_group_t *g;
	tpe_t *p = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);

	(void)state;
	tu_latch_init(&started, 1);
	tu_latch_init(&release, 1);
	assert_int_equal(tpe_group_create(&g), 0);
	assert_int_equal(tpe_group_wait(g, 0), 0);
	assert_int_equal(tpe_group_execute(g, p, tu_blocker_fn, &b), 0);
	assert_int_equal(tpe_group_size(g), 1);
	assert_int_equal(tpe_group_wait(g, 0), ETIMEDOUT);
	assert_int_equal(tpe_group_wait(g, TU_MS), ETIMEDOUT);
	assert_int_equal(tpe_group_destroy(g), EBUSY);
	assert_true(tu_latch_wait_for(&started, TU_WAIT_BOUND));
	tu_latch_count_down(&release);
	assert_int_equal(tpe_group_wait(g, TU_WAIT_BOUND), 0);
	assert_int_equal(tu_ran(&b), 1);
	assert_int_equal(tpe_group_destroy(g), 0);
	tpe_destroy(p);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release);
}

/* One group, two pools: the wait covers both. */
static void
test_group_several_pools(void **state)
{
	struct tu_latch release;
	struct tu_blocker b1 = { NULL, &release, NULL, 0 };
	struct tu_blocker b2 = { NULL, &release, NULL, 0 };
	tpe_t *p1 = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	tpe_t *p2 = tu_pool(2, 2, TPE_QUEUE_PER_WORKER, 0, TPE_REJECT_ABORT);
	tpe_group_t *g;

	(void)state;
	tu_latch_init(&release, 1);
	assert_int_equal(tpe_group_create(&g), 0);
	assert_int_equal(tpe_group_execute(g, p1, tu_blocker_fn, &b1), 0);
	assert_int_equal(tpe_group_execute(g, p2, tu_blocker_fn, &b2), 0);
	assert_int_equal(tpe_group_size(g), 2);
	assert_int_equal(tpe_group_wait(g, 0), ETIMEDOUT);
	tu_latch_count_down(&release);
	assert_int_equal(tpe_group_wait(g, TU_WAIT_BOUND), 0);
	assert_int_equal(tu_ran(&b1) + tu_ran(&b2), 2);
	assert_int_equal(tpe_group_destroy(g), 0);
	tpe_destroy(p1);
	tpe_destroy(p2);
	tu_latch_destroy(&release);
}

/*
 * Cancel: members queued behind a busy single worker are not run but
 * handed back to the discard callback once the worker takes them; a new
 * member is refused (ECANCELED); the wait then says 0. Every kind where a
 * member can wait (hand-off has no room: the refusal is checked there).
 */
static void
test_group_cancel_hands_back_every_kind(void **state)
{
	enum { M = 3 };
	size_t k;
	int i;

	(void)state;
	for (k = 0; k < NCONFS; k++) {
		const struct conf *c = &confs[k];
		tpe_t *p = conf_pool(c, true, TPE_REJECT_ABORT);
		struct tu_saturation sat;
		int ran[M] = { 0 }, extra = 0;
		tpe_group_t *g;

		tu_handbacks_init(&handed);
		assert_int_equal(tpe_group_create(&g), 0);
		tu_saturate(p, 1, 0, &sat);
		for (i = 0; c->queues && i < M; i++)
			assert_int_equal(tpe_group_execute(g, p, tu_count_fn,
			    &ran[i]), 0);
		assert_int_equal(tpe_group_cancel(g), 0);
		assert_int_equal(tpe_group_execute(g, p, tu_count_fn, &extra),
		    ECANCELED);
		tu_unsaturate(&sat);
		assert_int_equal(tpe_group_wait(g, TU_WAIT_BOUND), 0);
		for (i = 0; i < M; i++)
			assert_int_equal(tu_load(&ran[i]), 0);
		assert_int_equal(tu_handbacks_count(&handed),
		    c->queues ? M : 0);
		for (i = 0; c->queues && i < M; i++) {
			assert_ptr_equal(handed.fn[i], tu_count_fn);
			assert_ptr_equal(handed.arg[i], &ran[i]);
		}
		assert_int_equal(tu_load(&extra), 0);
		assert_int_equal(tpe_group_destroy(g), 0);
		tpe_destroy(p);
		tu_saturation_destroy(&sat);
	}
}

/* tpe_shutdown_now hands queued members back: each ends once, the group
 * empties, on every kind that queues. */
static void
test_group_shutdown_now_ends_members_every_kind(void **state)
{
	enum { M = 3 };
	size_t k;
	int i;

	(void)state;
	for (k = 0; k < NCONFS; k++) {
		const struct conf *c = &confs[k];
		tpe_t *p = conf_pool(c, true, TPE_REJECT_ABORT);
		struct tu_handbacks drained;
		struct tu_saturation sat;
		int ran[M] = { 0 };
		tpe_group_t *g;

		if (!c->queues)
			continue;
		tu_handbacks_init(&drained);
		tu_handbacks_init(&handed);
		assert_int_equal(tpe_group_create(&g), 0);
		tu_saturate(p, 1, 0, &sat);
		for (i = 0; i < M; i++)
			assert_int_equal(tpe_group_execute(g, p, tu_count_fn,
			    &ran[i]), 0);
		assert_int_equal(tpe_group_size(g), M);
		assert_int_equal(tpe_shutdown_now(p, tu_handback_fn, &drained),
		    0);
		tu_unsaturate(&sat);
		assert_int_equal(tpe_await_termination(p, TU_WAIT_BOUND), 0);
		/* Handed back, not lost: the group is empty at once. */
		assert_int_equal(tpe_group_size(g), 0);
		assert_int_equal(tpe_group_wait(g, 0), 0);
		/* The per-worker kind's worker hands back what its stack
		 * holds through the discard callback (tpe_shutdown_now(3)). */
		assert_int_equal(tu_handbacks_count(&drained) +
		    tu_handbacks_count(&handed), M);
		for (i = 0; i < M; i++)
			assert_int_equal(tu_load(&ran[i]), 0);
		assert_int_equal(tpe_group_destroy(g), 0);
		tpe_destroy(p);
		tu_saturation_destroy(&sat);
	}
}

/* A refused member was never added: a shut-down pool (ECANCELED, no node
 * made) and a full one (EAGAIN, a node made and freed). */
static void
test_group_refused_member_not_added(void **state)
{
	struct tu_saturation sat;
	int ran = 0;
	tpe_group_t *g;
	tpe_t *p = tu_pool(1, 1, TPE_QUEUE_BOUNDED, 1, TPE_REJECT_ABORT);

	(void)state;
	assert_int_equal(tpe_group_create(&g), 0);
	tu_saturate(p, 1, 1, &sat);
	assert_int_equal(tpe_group_execute(g, p, tu_count_fn, &ran), EAGAIN);
	assert_int_equal(tpe_group_size(g), 0);
	assert_int_equal(tpe_group_wait(g, 0), 0);
	tu_unsaturate(&sat);
	assert_int_equal(tpe_shutdown(p), 0);
	assert_int_equal(tpe_group_execute(g, p, tu_count_fn, &ran),
	    ECANCELED);
	assert_int_equal(tpe_group_size(g), 0);
	assert_int_equal(tpe_await_termination(p, TU_WAIT_BOUND), 0);
	assert_int_equal(tu_load(&ran), 0);
	assert_int_equal(tpe_group_destroy(g), 0);
	tpe_destroy(p);
	tu_saturation_destroy(&sat);
}

/* A custom rejection handler for the policies case: keeps (returns 0)
 * when ctx says so, records the pair. */
struct keeper {
	bool keep;
	int calls;
	tpe_fn fn;
	void *arg;
};

static int
keeper_fn(tpe_t *pool, tpe_fn fn, void *arg, void *ctx)
{
	struct keeper *k = ctx;

	(void)pool;
	k->calls++;
	k->fn = fn;
	k->arg = arg;
	return k->keep ? 0 : EAGAIN;
}

/*
 * The rejection policies that end a member without running it: DISCARD
 * (the call returns 0, the member is handed back), DISCARD_OLDEST (the
 * victim, a queued member, is handed back), a custom handler that keeps
 * it (ended) or refuses it (never added), and CALLER_RUNS (ran).
 */
static void
test_group_rejection_policies_end_members(void **state)
{
	static const enum tpe_rejection rejs[] = { TPE_REJECT_DISCARD,
	    TPE_REJECT_DISCARD_OLDEST, TPE_REJECT_CALLER_RUNS };
	size_t r;

	(void)state;
	for (r = 0; r < 3; r++) {
		struct tu_saturation sat;
		int queued = 0, late = 0;
		tpe_group_t *g;
		tpe_t *p;

		tu_handbacks_init(&handed);
		p = tu_pool_with(&(struct tu_pool_opts){ .core = 1, .max = 1,
		    .queue = TPE_QUEUE_BOUNDED, .capacity = 1,
		    .rejection = rejs[r], .discard = tu_handback_fn,
		    .discard_ctx = &handed });
		assert_int_equal(tpe_group_create(&g), 0);
		tu_saturate(p, 1, 0, &sat);
		assert_int_equal(tpe_group_execute(g, p, tu_count_fn, &queued),
		    0);
		assert_int_equal(tpe_group_execute(g, p, tu_count_fn, &late),
		    0);
		/* DISCARD: late handed back; OLDEST: queued handed back;
		 * CALLER_RUNS: late ran here. One member left either way. */
		assert_int_equal(tpe_group_size(g), 1);
		if (rejs[r] == TPE_REJECT_CALLER_RUNS) {
			assert_int_equal(tu_load(&late), 1);
			assert_int_equal(tu_handbacks_count(&handed), 0);
		} else {
			assert_int_equal(tu_handbacks_count(&handed), 1);
			assert_ptr_equal(handed.arg[0],
			    rejs[r] == TPE_REJECT_DISCARD ? &late : &queued);
		}
		tu_unsaturate(&sat);
		assert_int_equal(tpe_group_wait(g, TU_WAIT_BOUND), 0);
		assert_int_equal(tpe_group_destroy(g), 0);
		tpe_destroy(p);
		tu_saturation_destroy(&sat);
	}
}

static void
test_group_custom_handler_keeps_or_refuses(void **state)
{
	struct keeper k = { false, 0, NULL, NULL };
	struct tu_saturation sat;
	int a = 0, b = 0;
	tpe_group_t *g;
	tpe_t *p;

	(void)state;
	p = tu_pool_with(&(struct tu_pool_opts){ .core = 1, .max = 1,
	    .queue = TPE_QUEUE_BOUNDED, .capacity = 1,
	    .reject_handler = keeper_fn, .reject_ctx = &k });
	assert_int_equal(tpe_group_create(&g), 0);
	tu_saturate(p, 1, 1, &sat);
	/* Refused by the handler: never added. */
	assert_int_equal(tpe_group_execute(g, p, tu_count_fn, &a), EAGAIN);
	assert_int_equal(tpe_group_size(g), 0);
	/* Kept by the handler: the pair is the handler's, the member ended. */
	k.keep = true;
	assert_int_equal(tpe_group_execute(g, p, tu_count_fn, &b), 0);
	assert_int_equal(tpe_group_size(g), 0);
	assert_int_equal(k.calls, 2);
	assert_ptr_equal(k.fn, tu_count_fn);
	assert_ptr_equal(k.arg, &b);
	tu_unsaturate(&sat);
	tpe_destroy(p);
	assert_int_equal(tu_load(&a) + tu_load(&b), 0);
	assert_int_equal(tpe_group_destroy(g), 0);
	tu_saturation_destroy(&sat);
}

/* tpe_remove takes a queued member out: it ended (the caller owns its
 * argument again), on each kind that removes. */
static void
test_group_remove_ends_member(void **state)
{
	size_t k;

	(void)state;
	for (k = 0; k < NCONFS; k++) {
		const struct conf *c = &confs[k];
		struct tu_saturation sat;
		int ran = 0;
		tpe_group_t *g;
		tpe_t *p;

		if (!c->queues || !c->removes)
			continue;
		p = conf_pool(c, true, TPE_REJECT_ABORT);
		assert_int_equal(tpe_group_create(&g), 0);
		tu_saturate(p, 1, 0, &sat);
		assert_int_equal(tpe_group_execute(g, p, tu_count_fn, &ran), 0);
		assert_int_equal(tpe_group_size(g), 1);
		assert_int_equal(tpe_remove(p, tu_count_fn, &ran), 0);
		assert_int_equal(tpe_group_size(g), 0);
		assert_int_equal(tpe_group_wait(g, 0), 0);
		tu_unsaturate(&sat);
		tpe_destroy(p);
		assert_int_equal(tu_load(&ran), 0);
		assert_int_equal(tpe_group_destroy(g), 0);
		tu_saturation_destroy(&sat);
	}
}

/*
 * Notify: at once, on the caller's thread, when the group is empty; else
 * once, when it becomes empty; a second one while armed is EBUSY; after it
 * ran it is not armed any more (the next emptying runs nothing).
 */
static void
test_group_notify_runs_once(void **state)
{
	struct notified now, later, again;
	struct tu_latch release;
	struct tu_blocker b = { NULL, &release, NULL, 0 };
	int ran = 0;
	tpe_group_t *g;
	tpe_t *p = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);

	(void)state;
	notified_init(&now);
	notified_init(&later);
	notified_init(&again);
	tu_latch_init(&release, 1);
	assert_int_equal(tpe_group_create(&g), 0);
	assert_int_equal(tpe_group_notify(g, notify_fn, &now), 0);
	assert_int_equal(tu_ran(&now), 1);
	assert_true(pthread_equal(now.thread, pthread_self()));
	assert_ptr_equal(now.group, g);

	assert_int_equal(tpe_group_execute(g, p, tu_blocker_fn, &b), 0);
	assert_int_equal(tpe_group_notify(g, notify_fn, &later), 0);
	assert_int_equal(tpe_group_notify(g, notify_fn, &again), EBUSY);
	assert_int_equal(tu_ran(&later), 0);
	tu_latch_count_down(&release);
	assert_true(tu_latch_wait_for(&later.latch, TU_WAIT_BOUND));
	assert_int_equal(tpe_group_wait(g, TU_WAIT_BOUND), 0);
	assert_false(pthread_equal(later.thread, pthread_self()));
	/* Not armed any more: another emptying runs nothing. */
	assert_int_equal(tpe_group_execute(g, p, tu_count_fn, &ran), 0);
	assert_int_equal(tpe_group_wait(g, TU_WAIT_BOUND), 0);
	assert_int_equal(tu_load(&ran), 1);
	tpe_destroy(p);
	assert_int_equal(tu_ran(&later), 1);
	assert_int_equal(tu_ran(&now), 1);
	assert_int_equal(tu_ran(&again), 0);
	/* Armed again after it ran: fine. */
	assert_int_equal(tpe_group_notify(g, notify_fn, &again), 0);
	assert_int_equal(tu_ran(&again), 1);
	assert_int_equal(tpe_group_destroy(g), 0);
	tu_latch_destroy(&release);
}

/* A refused member (no node made) leaves the group empty: a notify set
 * then runs at once. */
static void
test_group_notify_on_refusal(void **state)
{
	struct notified n;
	int ran = 0;
	tpe_group_t *g;
	tpe_t *p = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);

	(void)state;
	notified_init(&n);
	assert_int_equal(tpe_group_create(&g), 0);
	assert_int_equal(tpe_shutdown(p), 0);
	assert_int_equal(tpe_group_execute(g, p, tu_count_fn, &ran),
	    ECANCELED);
	assert_int_equal(tpe_group_notify(g, notify_fn, &n), 0);
	assert_int_equal(tu_ran(&n), 1);
	assert_int_equal(tpe_group_destroy(g), 0);
	tpe_destroy(p);
}

/* A task of a pool of one thread waits for a group that has a member
 * queued behind it on that pool: EDEADLK (a poll says ETIMEDOUT, an empty
 * group 0); a group on another pool is waited for. */
struct waiter {
	tpe_group_t *group, *empty, *other;
	int rc_wait, rc_poll, rc_empty, rc_other;
	struct tu_latch started, release;
};

static void
waiter_fn(void *arg)
{
	struct waiter *w = arg;

	tu_latch_count_down(&w->started);
	tu_latch_wait(&w->release);
	w->rc_wait = tpe_group_wait(w->group, -1);
	w->rc_poll = tpe_group_wait(w->group, 0);
	w->rc_empty = tpe_group_wait(w->empty, -1);
	w->rc_other = tpe_group_wait(w->other, TU_WAIT_BOUND);
}

static void
test_group_wait_from_own_worker_edeadlk(void **state)
{
	struct waiter w;
	int ran = 0, other_ran = 0;
	tpe_t *p = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	tpe_t *q = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);

	(void)state;
	memset(&w, 0, sizeof(w));
	tu_latch_init(&w.started, 1);
	tu_latch_init(&w.release, 1);
	assert_int_equal(tpe_group_create(&w.group), 0);
	assert_int_equal(tpe_group_create(&w.empty), 0);
	assert_int_equal(tpe_group_create(&w.other), 0);
	assert_int_equal(tpe_execute(p, waiter_fn, &w), 0);
	assert_true(tu_latch_wait_for(&w.started, TU_WAIT_BOUND));
	/* Queued behind the waiter on its own pool of one. */
	assert_int_equal(tpe_group_execute(w.group, p, tu_count_fn, &ran), 0);
	assert_int_equal(tpe_group_execute(w.other, q, tu_count_fn,
	    &other_ran), 0);
	tu_latch_count_down(&w.release);
	assert_int_equal(tpe_group_wait(w.group, TU_WAIT_BOUND), 0);
	assert_int_equal(tpe_shutdown(p), 0);
	assert_int_equal(tpe_await_termination(p, TU_WAIT_BOUND), 0);
	assert_int_equal(w.rc_wait, EDEADLK);
	assert_int_equal(w.rc_poll, ETIMEDOUT);
	assert_int_equal(w.rc_empty, 0);
	assert_int_equal(w.rc_other, 0);
	assert_int_equal(tu_load(&ran), 1);
	assert_int_equal(tu_load(&other_ran), 1);
	assert_int_equal(tpe_group_destroy(w.group), 0);
	assert_int_equal(tpe_group_destroy(w.empty), 0);
	assert_int_equal(tpe_group_destroy(w.other), 0);
	tpe_destroy(p);
	tpe_destroy(q);
	tu_latch_destroy(&w.started);
	tu_latch_destroy(&w.release);
}

static void
test_group_null_arguments(void **state)
{
	tpe_group_t *g;
	tpe_t *p = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	int ran = 0;

	(void)state;
	assert_int_equal(tpe_group_create(NULL), EINVAL);
	assert_int_equal(tpe_group_create(&g), 0);
	assert_int_equal(tpe_group_destroy(NULL), EINVAL);
	assert_int_equal(tpe_group_execute(NULL, p, tu_count_fn, &ran),
	    EINVAL);
	assert_int_equal(tpe_group_execute(g, NULL, tu_count_fn, &ran),
	    EINVAL);
	assert_int_equal(tpe_group_execute(g, p, NULL, &ran), EINVAL);
	assert_int_equal(tpe_group_wait(NULL, 0), EINVAL);
	assert_int_equal(tpe_group_cancel(NULL), EINVAL);
	assert_int_equal(tpe_group_notify(NULL, notify_fn, NULL), EINVAL);
	assert_int_equal(tpe_group_notify(g, NULL, NULL), EINVAL);
	assert_int_equal(tpe_group_size(NULL), 0);
	assert_int_equal(tpe_group_size(g), 0);
	assert_int_equal(tpe_group_destroy(g), 0);
	tpe_destroy(p);
	assert_int_equal(tu_load(&ran), 0);
}

/* ENOMEM: a group that cannot be allocated, a member whose node cannot
 * be (never added). */
static void
test_group_out_of_memory(void **state)
{
	tpe_group_t *g = TU_SENTINEL;
	tpe_t *p = tu_pool(1, 1, TPE_QUEUE_UNBOUNDED, 0, TPE_REJECT_ABORT);
	int ran = 0;

	(void)state;
	fault_arm(&malloc_fault, 0, -1, false);
	assert_int_equal(tpe_group_create(&g), ENOMEM);
	assert_true(fault_disarm(&malloc_fault) > 0);
	assert_ptr_equal(g, TU_SENTINEL);
	assert_int_equal(tpe_group_create(&g), 0);
	fault_arm(&malloc_fault, 0, -1, false);
	assert_int_equal(tpe_group_execute(g, p, tu_count_fn, &ran), ENOMEM);
	assert_true(fault_disarm(&malloc_fault) > 0);
	assert_int_equal(tpe_group_size(g), 0);
	assert_int_equal(tpe_group_wait(g, 0), 0);
	assert_int_equal(tpe_group_destroy(g), 0);
	tpe_destroy(p);
	assert_int_equal(tu_load(&ran), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_group_each_member_once_every_kind),
		cmocka_unit_test(test_group_wait_times_out_then_completes),
		cmocka_unit_test(test_group_several_pools),
		cmocka_unit_test(test_group_cancel_hands_back_every_kind),
		cmocka_unit_test(test_group_shutdown_now_ends_members_every_kind),
		cmocka_unit_test(test_group_refused_member_not_added),
		cmocka_unit_test(test_group_rejection_policies_end_members),
		cmocka_unit_test(test_group_custom_handler_keeps_or_refuses),
		cmocka_unit_test(test_group_remove_ends_member),
		cmocka_unit_test(test_group_notify_runs_once),
		cmocka_unit_test(test_group_notify_on_refusal),
		cmocka_unit_test(test_group_wait_from_own_worker_edeadlk),
		cmocka_unit_test(test_group_null_arguments),
		cmocka_unit_test(test_group_out_of_memory),
	};

	tu_time_bound(0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
