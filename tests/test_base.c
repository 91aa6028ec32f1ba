/* SPDX-License-Identifier: MIT */
/*
 * test_base.c - the concurrency toolkit of lib/base (white-box): the
 * take-all Treiber stack (stack.h) alone and under many pushers and
 * takers (every node taken exactly once, each pusher's nodes in order),
 * its marker variant, the park/wake sequence (park.h) in the exact
 * lost-wake-up interleaving built with barriers and in a ping-pong, its
 * timeouts, a condition wait's deadline past a 32-bit time_t, the
 * backoff's phases, and the thread-start helper's signal mask.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>

#include "helpers.h"

#include "base/atomic.h"
#include "base/cpu.h"
#include "base/park.h"
#include "base/stack.h"
#include "base/sync.h"

struct node {
	struct node *next;
	unsigned producer;
	unsigned seq;
};

TPE__STACK_DEFINE(node_stack, struct node, next)

#define MARK_SLEEP TPE__STACK_MARK(struct node, 1)
#define MARK_CLOSED TPE__STACK_MARK(struct node, 2)

/* ---- the stack, one thread -------------------------------------------- */

static void
test_base_stack_push_take_reverse(void **state)
{
	struct node n[4] = { { 0 } }, *top = NULL, *h;
	unsigned i;

	(void)state;
	assert_true(node_stack_is_empty(&top));
	assert_null(node_stack_take_all(&top));
	assert_true(node_stack_push_mpsc(&top, &n[0]));
	assert_false(node_stack_push_mpsc(&top, &n[1]));
	/* A chain n[3] -> n[2], newest first, in one push. */
	n[3].next = &n[2];
	assert_false(node_stack_push_chain_mpsc(&top, &n[3], &n[2]));
	assert_false(node_stack_is_empty(&top));
	assert_ptr_equal(node_stack_top(&top), &n[3]);
	h = node_stack_take_all(&top);
	assert_true(node_stack_is_empty(&top));
	/* Newest first, then oldest first after the reversal. */
	assert_ptr_equal(h, &n[3]);
	h = node_stack_reverse(h);
	for (i = 0; i < 4; i++, h = h->next)
		assert_ptr_equal(h, &n[i]);
	assert_null(h);
	assert_null(node_stack_reverse(NULL));
	/* Counted: the old head is the new last node. */
	n[0].next = NULL;
	n[1].next = &n[0];
	n[2].next = &n[1];
	{
		size_t k = 99;

		assert_ptr_equal(node_stack_reverse_count(&n[2], &k), &n[0]);
		assert_int_equal(k, 3);
		assert_null(n[2].next);
		assert_null(node_stack_reverse_count(NULL, &k));
		assert_int_equal(k, 0);
	}
}

static void
test_base_stack_markers(void **state)
{
	struct node a = { 0 }, b = { 0 }, *top = MARK_SLEEP;

	(void)state;
	/* SLEEP is taken as empty: the node's link is NULL. */
	assert_ptr_equal(node_stack_push_marked_mpsc(&top, &a, &a,
	    MARK_CLOSED, MARK_SLEEP), MARK_SLEEP);
	assert_ptr_equal(top, &a);
	assert_null(a.next);
	assert_ptr_equal(node_stack_push_marked_mpsc(&top, &b, &b,
	    MARK_CLOSED, MARK_SLEEP), &a);
	assert_ptr_equal(b.next, &a);
	/* The unmarked take leaves a marker and takes nodes. */
	assert_ptr_equal(node_stack_take_all_unmarked(&top, MARK_CLOSED), &b);
	assert_null(top);
	top = MARK_SLEEP;
	assert_null(node_stack_take_all_unmarked(&top, MARK_CLOSED));
	assert_ptr_equal(top, MARK_SLEEP);
	/* CLOSED refuses: nothing pushed, the word unchanged. */
	top = MARK_CLOSED;
	assert_ptr_equal(node_stack_push_marked_mpsc(&top, &a, &a,
	    MARK_CLOSED, MARK_SLEEP), MARK_CLOSED);
	assert_ptr_equal(top, MARK_CLOSED);
	/* No markers asked for: plain pushing. */
	top = NULL;
	assert_null(node_stack_push_marked_mpsc(&top, &a, &a, NULL, NULL));
	assert_null(a.next);
}

/* ---- the stack, many threads ------------------------------------------ */

#define PUSHERS 4
#define TAKERS 2
#define PER_PUSHER 50000

struct mt {
	struct node *top;             /* the stack under test */
	pthread_barrier_t start;
	struct node *nodes;           /* PUSHERS * PER_PUSHER */
	unsigned char *seen;          /* per node: times taken */
	unsigned pushers_done;        /* A */
	unsigned long taken;          /* A */
	unsigned long empties;        /* A: pushes that found it empty */
	unsigned bad_order;           /* A */
};

struct mt_arg {
	struct mt *mt;
	unsigned id;
};

static void *
pusher_main(void *arg)
{
	struct mt_arg *a = arg;
	struct mt *mt = a->mt;
	unsigned i;

	pthread_barrier_wait(&mt->start);
	for (i = 0; i < PER_PUSHER; i++) {
		struct node *n = &mt->nodes[a->id * PER_PUSHER + i];

		n->producer = a->id;
		n->seq = i;
		/* Every third push a chain of two, the rest single. */
		if (i % 3 == 2 && i + 1 < PER_PUSHER) {
			struct node *m = n + 1;

			m->producer = a->id;
			m->seq = i + 1;
			m->next = n; /* newest (m) first */
			if (node_stack_push_chain_mpsc(&mt->top, m, n))
				tpe__counter_add(&mt->empties, 1);
			i++;
		} else if (node_stack_push_mpsc(&mt->top, n)) {
			tpe__counter_add(&mt->empties, 1);
		}
	}
	tpe__fetch_add(&mt->pushers_done, 1);
	return NULL;
}

static void *
taker_main(void *arg)
{
	struct mt_arg *a = arg;
	struct mt *mt = a->mt;
	unsigned last[PUSHERS];
	unsigned long got = 0;
	bool first[PUSHERS];
	unsigned k;

	for (k = 0; k < PUSHERS; k++)
		first[k] = true;
	pthread_barrier_wait(&mt->start);
	for (;;) {
		/* Done read before the take: after the last pusher's
		 * count, one more take sees every node. */
		bool done = tpe__dekker_load(&mt->pushers_done) == PUSHERS;
		struct node *h = node_stack_reverse(node_stack_take_all(
		    &mt->top));

		for (; h != NULL; h = h->next) {
			size_t idx = (size_t)(h - mt->nodes);

			mt->seen[idx]++;
			got++;
			/* One taker's takes come one after the other: a
			 * pusher's nodes arrive in its push order. */
			if (!first[h->producer] && h->seq <= last[h->producer])
				tpe__counter_add(&mt->bad_order, 1);
			first[h->producer] = false;
			last[h->producer] = h->seq;
		}
		if (done)
			break;
	}
	tpe__counter_add(&mt->taken, got);
	return NULL;
}

static void
test_base_stack_exactly_once_mt(void **state)
{
	pthread_t th[PUSHERS + TAKERS];
	struct mt_arg args[PUSHERS + TAKERS];
	struct mt mt = { 0 };
	size_t i, total = (size_t)PUSHERS * PER_PUSHER;

	(void)state;
	mt.nodes = calloc(total, sizeof(*mt.nodes));
	mt.seen = calloc(total, 1);
	assert_non_null(mt.nodes);
	assert_non_null(mt.seen);
	assert_int_equal(pthread_barrier_init(&mt.start, NULL,
	    PUSHERS + TAKERS), 0);
	for (i = 0; i < PUSHERS + TAKERS; i++) {
		args[i].mt = &mt;
		args[i].id = (unsigned)(i < PUSHERS ? i : i - PUSHERS);
		assert_int_equal(pthread_create(&th[i], NULL, i < PUSHERS ?
		    pusher_main : taker_main, &args[i]), 0);
	}
	for (i = 0; i < PUSHERS + TAKERS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	assert_null(mt.top);
	assert_int_equal(mt.taken, total);
	for (i = 0; i < total; i++)
		if (mt.seen[i] != 1)
			fail_msg("node %zu taken %u times", i, mt.seen[i]);
	assert_int_equal(mt.bad_order, 0);
	/* At least the first push found the stack empty. */
	assert_true(mt.empties >= 1);
	pthread_barrier_destroy(&mt.start);
	free(mt.seen);
	free(mt.nodes);
}

/* ---- park / wake ------------------------------------------------------ */

struct lost {
	struct tpe__park park;
	int flag;                    /* A: the condition */
	pthread_barrier_t looked;    /* the sleeper looked, saw no flag */
	pthread_barrier_t woken;     /* the waker set the flag and woke */
	int rc;
};

static void *
lost_waker(void *arg)
{
	struct lost *l = arg;

	pthread_barrier_wait(&l->looked);
	/* Between the sleeper's look and its wait: the lost wake-up's spot. */
	tpe__dekker_store(&l->flag, 1);
	tpe__park_wake_all(&l->park);
	pthread_barrier_wait(&l->woken);
	return NULL;
}

/*
 * The sleeper reads the sequence, looks at the flag (not set), and only
 * then, after the waker has set it and woken (nobody), waits: the wait
 * must return at once, since the sequence moved. Looking before reading
 * the sequence would sleep for ever here.
 */
static void
test_base_park_no_lost_wakeup(void **state)
{
	struct lost l = { 0 };
	pthread_t th;
	unsigned seq;

	(void)state;
	tpe__park_init(&l.park);
	assert_int_equal(pthread_barrier_init(&l.looked, NULL, 2), 0);
	assert_int_equal(pthread_barrier_init(&l.woken, NULL, 2), 0);
	assert_int_equal(pthread_create(&th, NULL, lost_waker, &l), 0);
	seq = tpe__park_prepare(&l.park);
	assert_int_equal(tpe__dekker_load(&l.flag), 0);
	pthread_barrier_wait(&l.looked);
	pthread_barrier_wait(&l.woken);
	/* A bound far beyond any wake-up, so that a lost one fails here
	 * instead of at the binary's time bound. */
	assert_int_equal(tpe__park_wait(&l.park, seq,
	    tpe__deadline(60 * TU_S)), 0);
	assert_int_not_equal(tpe__park_prepare(&l.park), seq);
	assert_int_equal(pthread_join(th, NULL), 0);
	pthread_barrier_destroy(&l.looked);
	pthread_barrier_destroy(&l.woken);
	tpe__park_destroy(&l.park);
}

#define ROUNDS 20000

struct pingpong {
	struct tpe__park to_b, to_a;
	unsigned ball_b, ball_a;     /* A: the round each side has reached */
};

/* Sleeps on p until *word reaches want (the park.h loop). */
static void
wait_for(struct tpe__park *p, unsigned *word, unsigned want)
{
	for (;;) {
		unsigned seq = tpe__park_prepare(p);

		if (tpe__dekker_load(word) >= want)
			return;
		(void)tpe__park_wait(p, seq, -1);
	}
}

static void *
pong_main(void *arg)
{
	struct pingpong *pp = arg;
	unsigned i;

	for (i = 1; i <= ROUNDS; i++) {
		wait_for(&pp->to_b, &pp->ball_b, i);
		tpe__dekker_store(&pp->ball_a, i);
		tpe__park_wake_all(&pp->to_a);
	}
	return NULL;
}

/* Two threads hand a ball back and forth, each sleeping in between:
 * every interleaving of a look and a wake, ROUNDS times; a lost wake-up
 * hangs (the binary's time bound). */
static void
test_base_park_ping_pong(void **state)
{
	struct pingpong pp = { 0 };
	pthread_t th;
	unsigned i;

	(void)state;
	tpe__park_init(&pp.to_b);
	tpe__park_init(&pp.to_a);
	assert_int_equal(pthread_create(&th, NULL, pong_main, &pp), 0);
	for (i = 1; i <= ROUNDS; i++) {
		tpe__dekker_store(&pp.ball_b, i);
		tpe__park_wake_all(&pp.to_b);
		wait_for(&pp.to_a, &pp.ball_a, i);
	}
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(pp.ball_a, ROUNDS);
	tpe__park_destroy(&pp.to_b);
	tpe__park_destroy(&pp.to_a);
}

static void
test_base_park_timeout(void **state)
{
	struct tpe__park p;
	unsigned seq;

	(void)state;
	tpe__park_init(&p);
	seq = tpe__park_prepare(&p);
	/* A deadline already past: at once. */
	assert_int_equal(tpe__park_wait(&p, seq, tpe__now_ns() - 1),
	    ETIMEDOUT);
	assert_int_equal(tpe__park_wait(&p, seq, 0), ETIMEDOUT);
	/* Nobody wakes: the deadline ends the wait (spurious returns are
	 * allowed, so loop as a caller does). */
	{
		int64_t deadline = tpe__deadline(TU_MS);

		while (tpe__park_wait(&p, seq, deadline) == 0)
			;
		assert_true(tpe__now_ns() >= deadline);
	}
	/* A stale sequence: at once, 0. */
	tpe__park_wake_all(&p);
	assert_int_equal(tpe__park_wait(&p, seq, -1), 0);
	tpe__park_destroy(&p);
}

/* ---- timed waits -------------------------------------------------------- */

struct far_wait {
	struct tpe__mutex m;
	pthread_cond_t c;
	int64_t deadline;
	bool waiting, go;  /* under m */
	int rc;            /* the waiter's first result other than 0 */
};

static void *
far_waiter(void *arg)
{
	struct far_wait *w = arg;

	tpe__mutex_lock(&w->m);
	w->waiting = true;
	while (!w->go && w->rc == 0)
		w->rc = tpe__cond_wait_until(&w->c, &w->m, w->deadline);
	tpe__mutex_unlock(&w->m);
	return NULL;
}

/*
 * A deadline whose seconds do not fit a 32-bit time_t (2^31 + 2^30 s of
 * CLOCK_MONOTONIC, some 100 years: a caller's long time-out): the wait
 * lasts until a wake-up, as any wait with a deadline that far. With a
 * 32-bit time_t (armhf, i386) the seconds wrapped to a negative time and
 * the wait timed out at once (build-aux/cross-check.sh armhf).
 */
static void
test_base_cond_wait_far_deadline(void **state)
{
	struct far_wait w = { .deadline = (INT64_C(3) << 30) * TPE__NS_PER_S };
	pthread_t t;

	(void)state;
	tpe__mutex_init(&w.m);
	tpe__cond_init(&w.c);
	assert_int_equal(pthread_create(&t, NULL, far_waiter, &w), 0);
	/* Holding m with waiting set: the waiter is inside its wait (or
	 * already returned from it with an error). */
	tpe__mutex_lock(&w.m);
	while (!w.waiting) {
		tpe__mutex_unlock(&w.m);
		sched_yield();
		tpe__mutex_lock(&w.m);
	}
	w.go = true;
	tpe__cond_signal(&w.c);
	tpe__mutex_unlock(&w.m);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(w.rc, 0);
	tpe__cond_destroy(&w.c);
	tpe__mutex_destroy(&w.m);
}

/* ---- backoff ---------------------------------------------------------- */

static void
test_base_backoff_phases(void **state)
{
	struct tpe__backoff b;
	enum tpe__backoff_did d;
	uint64_t yields = 0, sleeps = 0;

	(void)state;
	/* No budget, no sleep: spent at the first step. */
	tpe__backoff_init(&b, 0, -1, 0);
	assert_int_equal(tpe__backoff_step(&b), TPE__BACKOFF_SPENT);

	/* A budget: relaxes, yields every YIELD_EVERY-th step, then is
	 * spent (at once where spinning cannot pay). */
	tpe__backoff_init(&b, 100 * 1000, -1, 0);
	while ((d = tpe__backoff_step(&b)) != TPE__BACKOFF_SPENT) {
		if (d == TPE__BACKOFF_YIELDED) {
			assert_int_equal(b.steps % TPE__BACKOFF_YIELD_EVERY, 0);
			yields++;
		} else {
			assert_int_equal(d, TPE__BACKOFF_RELAXED);
		}
	}
	assert_true(!tpe__can_spin() || yields >= 1);

	/* A deadline already past ends the budget at its first look. */
	tpe__backoff_init(&b, 1000 * TU_MS, tpe__now_ns(), 0);
	while ((d = tpe__backoff_step(&b)) == TPE__BACKOFF_RELAXED)
		;
	assert_int_equal(d, TPE__BACKOFF_SPENT);
	assert_true(b.steps <= TPE__BACKOFF_YIELD_EVERY);

	/* A sleep phase: sleeps after the budget until the deadline. */
	tpe__backoff_init(&b, 0, tpe__deadline(2 * TU_MS), 100 * 1000);
	while ((d = tpe__backoff_step(&b)) == TPE__BACKOFF_SLEPT)
		sleeps++;
	assert_int_equal(d, TPE__BACKOFF_SPENT);
	assert_true(sleeps >= 1);
	assert_true(tpe__now_ns() >= b.deadline_ns);
}

static void
test_base_backoff_sleep_ladder(void **state)
{
	(void)state;
	assert_int_equal(tpe__backoff_sleep_ns(1, TU_MS), 1000);
	assert_int_equal(tpe__backoff_sleep_ns(2, TU_MS), 2000);
	assert_int_equal(tpe__backoff_sleep_ns(10, TU_MS), 512000);
	assert_int_equal(tpe__backoff_sleep_ns(11, TU_MS), TU_MS);
	assert_int_equal(tpe__backoff_sleep_ns(UINT64_MAX, TU_MS), TU_MS);
	assert_int_equal(tpe__backoff_sleep_ns(3, 3000), 3000);
}

/* ---- the thread-start helper ------------------------------------------ */

static void *
mask_main(void *arg)
{
	sigset_t *mask = arg;

	pthread_sigmask(SIG_BLOCK, NULL, mask);
	return NULL;
}

/* A thread started by tpe__thread_create blocks every asynchronous signal
 * and none of the synchronous ones; the caller's own mask is unchanged. */
static void
test_base_thread_create_blocks_signals(void **state)
{
	sigset_t before, after, child;
	pthread_t th;

	(void)state;
	pthread_sigmask(SIG_BLOCK, NULL, &before);
	assert_int_equal(tpe__thread_create(&th, NULL, mask_main, &child), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	pthread_sigmask(SIG_BLOCK, NULL, &after);
	assert_int_equal(sigismember(&child, SIGINT), 1);
	assert_int_equal(sigismember(&child, SIGTERM), 1);
	assert_int_equal(sigismember(&child, SIGUSR1), 1);
	assert_int_equal(sigismember(&child, SIGCHLD), 1);
	assert_int_equal(sigismember(&child, SIGSEGV), 0);
	assert_int_equal(sigismember(&child, SIGBUS), 0);
	assert_int_equal(sigismember(&child, SIGFPE), 0);
	assert_int_equal(sigismember(&child, SIGABRT), 0);
	assert_int_equal(sigismember(&after, SIGINT),
	    sigismember(&before, SIGINT));
	assert_int_equal(sigismember(&after, SIGUSR1),
	    sigismember(&before, SIGUSR1));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_base_stack_push_take_reverse),
		cmocka_unit_test(test_base_stack_markers),
		cmocka_unit_test(test_base_stack_exactly_once_mt),
		cmocka_unit_test(test_base_park_no_lost_wakeup),
		cmocka_unit_test(test_base_park_ping_pong),
		cmocka_unit_test(test_base_park_timeout),
		cmocka_unit_test(test_base_cond_wait_far_deadline),
		cmocka_unit_test(test_base_backoff_phases),
		cmocka_unit_test(test_base_backoff_sleep_ladder),
		cmocka_unit_test(test_base_thread_create_blocks_signals),
	};

	tu_time_bound(0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
