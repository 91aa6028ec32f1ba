/* SPDX-License-Identifier: MIT */
/*
 * test_queue.c - white-box tests of the internal queue interface (lib/queue):
 * each kind's offer/poll/size/remaining/remove_if/drop_oldest, the hand-off
 * rule, the inbox; and the locked engine's wake-up rules and its waiting
 * workers (counted as idle, timing out). Links the uninstalled core library.
 */
#include "helpers.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "engine/locked.h"
#include "queue/queue.h"
#include "base/sync.h"

static struct tpe__task node[16];

static void
init_nodes(void)
{
	size_t i;

	memset(node, 0, sizeof(node));
	for (i = 0; i < 16; i++)
		node[i].arg = (void *)(uintptr_t)i;
}

static size_t
id_of(const struct tpe__task *t)
{
	return (size_t)(uintptr_t)t->arg;
}

static bool
match_odd(const struct tpe__task *t, void *ctx)
{
	(void)ctx;
	return id_of(t) % 2 == 1;
}

static bool
match_none(const struct tpe__task *t, void *ctx)
{
	(void)t;
	(void)ctx;
	return false;
}

/* FIFO order, size, and remove_if keeping order, for a fresh queue q. */
static void
check_fifo(struct tpe__queue *q, size_t n)
{
	struct tpe__task_list out;
	size_t i;

	for (i = 0; i < n; i++)
		assert_int_equal(q->ops->offer(q, &node[i], 0), 0);
	assert_int_equal(q->ops->size(q), n);

	tpe__task_list_init(&out);
	assert_int_equal(q->ops->remove_if(q, match_none, NULL, SIZE_MAX, &out),
	    0);
	assert_int_equal(q->ops->remove_if(q, match_odd, NULL, 2, &out), 2);
	assert_int_equal(out.count, 2);
	assert_int_equal(id_of(tpe__task_list_pop(&out)), 1);
	assert_int_equal(id_of(tpe__task_list_pop(&out)), 3);
	assert_int_equal(q->ops->size(q), n - 2);
	/* What stays keeps its order: 0 2 4 5 6 7 ... */
	for (i = 0; i < n; i++) {
		if (i == 1 || i == 3)
			continue;
		assert_int_equal(id_of(q->ops->poll(q)), i);
	}
	assert_null(q->ops->poll(q));
	assert_true(tpe__queue_is_empty(q));
	/* The tail is usable after removing the last node. */
	assert_int_equal(q->ops->offer(q, &node[9], 0), 0);
	assert_int_equal(q->ops->remove_if(q, match_odd, NULL, SIZE_MAX, &out),
	    1);
	assert_int_equal(q->ops->offer(q, &node[4], 0), 0);
	assert_int_equal(q->ops->offer(q, &node[6], 0), 0);
	assert_int_equal(id_of(q->ops->poll(q)), 4);
	assert_int_equal(id_of(q->ops->poll(q)), 6);
	assert_null(q->ops->poll(q));
}

static void
test_queue_linked_fifo(void **state)
{
	struct tpe__queue *q;

	(void)state;
	init_nodes();
	assert_int_equal(tpe__queue_linked_create(&q), 0);
	assert_int_equal(q->ops->remaining(q), SIZE_MAX);
	check_fifo(q, 8);
	q->ops->destroy(q);
}

static void
test_queue_array_fifo_and_bound(void **state)
{
	struct tpe__queue *q;
	size_t i;

	(void)state;
	init_nodes();
	assert_int_equal(tpe__queue_array_create(&q, 0), EINVAL);
	assert_int_equal(tpe__queue_array_create(&q, 8), 0);
	check_fifo(q, 8);
	/* Wrap the ring around, then fill it: the 9th offer is refused. */
	for (i = 0; i < 5; i++) {
		assert_int_equal(q->ops->offer(q, &node[i], 0), 0);
		assert_int_equal(id_of(q->ops->poll(q)), i);
	}
	for (i = 0; i < 8; i++) {
		assert_int_equal(q->ops->remaining(q), 8 - i);
		assert_int_equal(q->ops->offer(q, &node[i], 0), 0);
	}
	assert_int_equal(q->ops->remaining(q), 0);
	assert_int_equal(q->ops->offer(q, &node[8], 0), EAGAIN);
	{
		struct tpe__task_list out;

		tpe__task_list_init(&out);
		assert_int_equal(q->ops->remove_if(q, match_odd, NULL,
		    SIZE_MAX, &out), 4);
		for (i = 0; i < 8; i += 2)
			assert_int_equal(id_of(q->ops->poll(q)), i);
	}
	assert_null(q->ops->poll(q));
	q->ops->destroy(q);
}

static void
test_queue_handoff_needs_unclaimed_taker(void **state)
{
	struct tpe__queue *q;

	(void)state;
	init_nodes();
	assert_int_equal(tpe__queue_handoff_create(&q), 0);
	assert_int_equal(q->ops->remaining(q), 0);
	assert_int_equal(q->ops->offer(q, &node[0], 0), EAGAIN);
	assert_int_equal(q->ops->offer(q, &node[0], 2), 0);
	assert_int_equal(q->ops->offer(q, &node[1], 2), 0);
	/* Both waiting takers are claimed: a third offer is refused. */
	assert_int_equal(q->ops->offer(q, &node[2], 2), EAGAIN);
	/* Nothing to drop: the nodes are the waiting workers'. */
	assert_null(q->ops->drop_oldest(q));
	assert_int_equal(id_of(q->ops->poll(q)), 0);
	assert_int_equal(id_of(q->ops->poll(q)), 1);
	q->ops->destroy(q);
}

/* A worker waiting for a task counts as idle (the locked engine's takers),
 * and a hand-off offer is taken by it. */
static void
test_queue_waiting_worker_counts_idle(void **state)
{
	struct tpe_stats st;
	tpe_attr_t *a;
	tpe_t *pool;
	size_t started;

	(void)state;
	assert_int_equal(tpe_attr_create(&a), 0);
	assert_int_equal(tpe_attr_set_pool_size(a, 1, 1), 0);
	assert_int_equal(tpe_attr_set_queue(a, TPE_QUEUE_HANDOFF, 0), 0);
	assert_int_equal(tpe_attr_set_reserved_threads(a, 0), 0);
	assert_int_equal(tpe_create(&pool, a), 0);
	tpe_attr_destroy(a);
	assert_int_equal(tpe_prestart_core_threads(pool, &started), 0);
	assert_int_equal(started, 1);
	assert_true(TU_EVENTUALLY(({
		assert_int_equal(tpe_get_stats(pool, &st, sizeof(st)), 0);
		st.idle == 1; }), 10 * TU_S));
	/* The one worker waits: the hand-off takes the task. */
	assert_int_equal(tpe_execute(pool, tu_nop_fn, NULL), 0);
	assert_int_equal(tpe_wait_idle(pool, -1), 0);
	assert_int_equal(tpe_get_stats(pool, &st, sizeof(st)), 0);
	assert_int_equal(st.completed, 1);
	assert_int_equal(tpe_destroy(pool), 0);
}

/* A waiting worker whose keep-alive passes leaves (core timeout). */
static void
test_queue_waiting_worker_times_out(void **state)
{
	struct tpe_stats st;
	tpe_attr_t *a;
	tpe_t *pool;
	int64_t t0;

	(void)state;
	assert_int_equal(tpe_attr_create(&a), 0);
	assert_int_equal(tpe_attr_set_pool_size(a, 1, 1), 0);
	assert_int_equal(tpe_attr_set_keep_alive(a, 5 * TU_MS), 0);
	assert_int_equal(tpe_attr_set_allow_core_timeout(a, true), 0);
	assert_int_equal(tpe_attr_set_reserved_threads(a, 0), 0);
	assert_int_equal(tpe_create(&pool, a), 0);
	tpe_attr_destroy(a);
	t0 = tu_now_ns();
	assert_int_equal(tpe_prestart_core_threads(pool, NULL), 0);
	assert_true(TU_EVENTUALLY(({
		assert_int_equal(tpe_get_stats(pool, &st, sizeof(st)), 0);
		st.pool_size == 0; }), 10 * TU_S));
	/* Not before its keep-alive (a lower bound only). */
	assert_true(tu_now_ns() - t0 >= 5 * TU_MS);
	assert_int_equal(tpe_destroy(pool), 0);
}

/* A submitter signals only for sleepers that spinning takers will not cover. */
static void
test_queue_signal_only_for_sleepers(void **state)
{
	(void)state;
	/* queued, takers, sleepers */
	assert_false(tpe__locked_signal_needed(1, 2, 0)); /* two spinners */
	assert_false(tpe__locked_signal_needed(1, 2, 1)); /* one spinner takes it */
	assert_true(tpe__locked_signal_needed(2, 2, 1));  /* the second needs a sleeper */
	assert_false(tpe__locked_signal_needed(2, 0, 0));
}

/*
 * The unbounded queue's lock-free offers join the queue in push order,
 * after every node offered before them under the lock and before every
 * node offered after them; size, pending and remove_if see them.
 */
static void
test_queue_linked_lockfree_fifo(void **state)
{
	struct tpe__task_list out;
	struct tpe__queue *q;
	size_t i;

	(void)state;
	init_nodes();
	assert_int_equal(tpe__queue_linked_create(&q), 0);
	assert_non_null(q->inbox);
	assert_false(tpe__queue_pending(q));
	assert_true(tpe__queue_push_lockfree(q, &node[0]));  /* first: empty */
	assert_false(tpe__queue_push_lockfree(q, &node[1])); /* rides on it */
	assert_true(tpe__queue_pending(q));
	assert_int_equal(q->ops->offer(q, &node[2], 0), 0);
	assert_false(tpe__queue_pending(q));               /* absorbed */
	assert_true(tpe__queue_push_lockfree(q, &node[3]));
	assert_false(tpe__queue_push_lockfree(q, &node[4]));
	assert_int_equal(q->ops->size(q), 5);
	assert_true(tpe__queue_push_lockfree(q, &node[5]));
	tpe__task_list_init(&out);
	assert_int_equal(q->ops->remove_if(q, match_odd, NULL, SIZE_MAX, &out),
	    3);
	assert_int_equal(id_of(tpe__task_list_pop(&out)), 1);
	assert_int_equal(id_of(tpe__task_list_pop(&out)), 3);
	assert_int_equal(id_of(tpe__task_list_pop(&out)), 5);
	assert_true(tpe__queue_push_lockfree(q, &node[6]));
	for (i = 0; i <= 6; i += 2)
		assert_int_equal(id_of(q->ops->poll(q)), i);
	assert_null(q->ops->poll(q));
	assert_true(tpe__queue_is_empty(q));
	q->ops->destroy(q);
}

/* Hand-off and bounded queues take no lock-free offers (their offer
 * depends on state only the lock holder may read). */
static void
test_queue_lockfree_only_unbounded(void **state)
{
	struct tpe__queue *q;

	(void)state;
	assert_int_equal(tpe__queue_handoff_create(&q), 0);
	assert_null(q->inbox);
	assert_false(tpe__queue_pending(q));
	q->ops->destroy(q);
	assert_int_equal(tpe__queue_array_create(&q, 4), 0);
	assert_null(q->inbox);
	assert_false(tpe__queue_pending(q));
	q->ops->destroy(q);
}

/* After a lock-free push: wake a sleeper only when no awake taker will
 * look at the queue (takers that are not asleep spin or look again). */
static void
test_queue_sleeper_needed(void **state)
{
	(void)state;
	/* takers, sleepers */
	assert_false(tpe__locked_wake_needed(0, 0)); /* nobody to wake */
	assert_true(tpe__locked_wake_needed(1, 1));  /* the only taker sleeps */
	assert_false(tpe__locked_wake_needed(2, 1)); /* one is awake */
	assert_true(tpe__locked_wake_needed(2, 2));
}

/*
 * Producers push lock-free while a consumer polls under a lock: every node
 * comes out exactly once, and each producer's nodes in its push order.
 */
enum { LF_PRODUCERS = 4, LF_PER = 50000 };

struct lf_ctx {
	struct tpe__queue *q;
	pthread_barrier_t start;
	struct tpe__task *nodes; /* LF_PRODUCERS * LF_PER */
};

struct lf_producer {
	struct lf_ctx *c;
	size_t id;
};

static void *
lf_produce(void *arg)
{
	struct lf_producer *p = arg;
	struct tpe__task *base = p->c->nodes + p->id * LF_PER;
	size_t i;

	pthread_barrier_wait(&p->c->start);
	for (i = 0; i < LF_PER; i++)
		tpe__queue_push_lockfree(p->c->q, &base[i]);
	return NULL;
}

static void
test_queue_lockfree_producers_stress(void **state)
{
	struct lf_producer prod[LF_PRODUCERS];
	pthread_t th[LF_PRODUCERS];
	size_t next[LF_PRODUCERS] = { 0 };
	struct tpe__mutex lock;
	struct lf_ctx c;
	size_t i, got = 0;

	(void)state;
	tpe__mutex_init(&lock);
	c.nodes = calloc((size_t)LF_PRODUCERS * LF_PER, sizeof(*c.nodes));
	assert_non_null(c.nodes);
	for (i = 0; i < (size_t)LF_PRODUCERS * LF_PER; i++)
		c.nodes[i].arg = (void *)(uintptr_t)i;
	assert_int_equal(tpe__queue_linked_create(&c.q), 0);
	pthread_barrier_init(&c.start, NULL, LF_PRODUCERS + 1);
	for (i = 0; i < LF_PRODUCERS; i++) {
		prod[i].c = &c;
		prod[i].id = i;
		assert_int_equal(pthread_create(&th[i], NULL, lf_produce,
		    &prod[i]), 0);
	}
	pthread_barrier_wait(&c.start);
	while (got < (size_t)LF_PRODUCERS * LF_PER) {
		struct tpe__task *t;

		tpe__mutex_lock(&lock);
		t = c.q->ops->poll(c.q);
		tpe__mutex_unlock(&lock);
		if (t == NULL) {
			/* Empty: let a producer run. Under valgrind, which
			 * runs one thread at a time, a consumer that polls on
			 * holds the only CPU for its whole time slice (this
			 * test took 50 to 550 s under helgrind). */
			sched_yield();
			continue;
		}
		i = id_of(t);
		/* In order per producer, so also never twice. */
		assert_int_equal(i % LF_PER, next[i / LF_PER]);
		next[i / LF_PER]++;
		got++;
	}
	for (i = 0; i < LF_PRODUCERS; i++)
		pthread_join(th[i], NULL);
	assert_true(tpe__queue_is_empty(c.q));
	pthread_barrier_destroy(&c.start);
	c.q->ops->destroy(c.q);
	free(c.nodes);
	tpe__mutex_destroy(&lock);
}

static void
test_queue_deadline_saturates(void **state)
{
	(void)state;
	assert_true(tpe__deadline(-1) < 0);
	assert_true(tpe__deadline(INT64_MIN) < 0);
	assert_int_equal(tpe__deadline(INT64_MAX), INT64_MAX);
	assert_true(tpe__deadline(0) <= tpe__now_ns());
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_queue_linked_fifo),
		cmocka_unit_test(test_queue_array_fifo_and_bound),
		cmocka_unit_test(test_queue_handoff_needs_unclaimed_taker),
		cmocka_unit_test(test_queue_waiting_worker_counts_idle),
		cmocka_unit_test(test_queue_waiting_worker_times_out),
		cmocka_unit_test(test_queue_signal_only_for_sleepers),
		cmocka_unit_test(test_queue_deadline_saturates),
		cmocka_unit_test(test_queue_linked_lockfree_fifo),
		cmocka_unit_test(test_queue_lockfree_only_unbounded),
		cmocka_unit_test(test_queue_sleeper_needed),
		cmocka_unit_test(test_queue_lockfree_producers_stress),
	};

	tu_time_bound(0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
