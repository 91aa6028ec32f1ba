/* SPDX-License-Identifier: MIT */
/*
 * test_priority.c - the priority queue kind (TPE_QUEUE_PRIORITY) and the
 * calls that give a task its priority (tpe_execute_priority(3)): the
 * heap's order (white-box, lib/queue/priority.c), then pools of one
 * blocked worker, where the order the queued tasks run in is the queue's:
 * many submitters, bounded capacity and each rejection policy,
 * tpe_remove, tpe_purge, tpe_shutdown_now's hand-back, futures, the
 * blocking submit, scale-first, scheduled tasks, statistics, the other
 * kinds (priority ignored) and a heap that cannot grow (ENOMEM).
 */
#define TU_FAULT_INJECTION
#include "helpers.h"

#include <stdlib.h>
#include <string.h>

#include "engine/locked.h"
#include "queue/queue.h"

/* The heap's growth goes through realloc: failed by a fault of its own,
 * so that the task node's allocation before it still succeeds. */
static struct fault realloc_fault;
void *__real_realloc(void *p, size_t size);
void *__wrap_realloc(void *p, size_t size);

void *
__wrap_realloc(void *p, size_t size)
{
	if (fault_hit(&realloc_fault)) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_realloc(p, size);
}

/* ---- the heap (white-box) --------------------------------------------- */

#define NODES 64
static struct tpe__task node[NODES];

static void
init_nodes(void)
{
	size_t i;

	memset(node, 0, sizeof(node));
	for (i = 0; i < NODES; i++)
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
match_all(const struct tpe__task *t, void *ctx)
{
	(void)t;
	(void)ctx;
	return true;
}

/* Node i is offered at prio[i]; the expected poll order is by priority,
 * then by i (FIFO among equals). */
static const int prio[12] = { 1, 5, 1, 3, 5, -2, 3, 1, 5, 0, -2, 3 };
static const size_t by_rank[12] = { 1, 4, 8, 3, 6, 11, 0, 2, 7, 9, 5, 10 };

static void
offer_all(struct tpe__queue *q)
{
	size_t i;

	for (i = 0; i < 12; i++)
		assert_int_equal(tpe__queue_offer(q, &node[i], 0, prio[i]), 0);
}

static void
test_priority_heap_order(void **state)
{
	struct tpe__queue *q;
	uint64_t rnd = 42;
	int last_p = INT32_MAX;
	size_t i, last_i = 0;
	int p[NODES];

	(void)state;
	init_nodes();
	assert_int_equal(tpe__queue_priority_create(&q, 0), 0);
	assert_int_equal(q->ops->remaining(q), SIZE_MAX);
	assert_null(q->ops->poll(q));
	offer_all(q);
	assert_int_equal(q->ops->size(q), 12);
	for (i = 0; i < 12; i++)
		assert_int_equal(id_of(q->ops->poll(q)), by_rank[i]);
	assert_null(q->ops->poll(q));
	/* The plain offer ranks at 0: after 1, before -1, FIFO with 0. */
	assert_int_equal(q->ops->offer(q, &node[0], 0), 0);
	assert_int_equal(tpe__queue_offer(q, &node[1], 0, -1), 0);
	assert_int_equal(tpe__queue_offer(q, &node[2], 0, 0), 0);
	assert_int_equal(tpe__queue_offer(q, &node[3], 0, 1), 0);
	assert_int_equal(id_of(q->ops->poll(q)), 3);
	assert_int_equal(id_of(q->ops->poll(q)), 0);
	assert_int_equal(id_of(q->ops->poll(q)), 2);
	assert_int_equal(id_of(q->ops->poll(q)), 1);
	/* Random priorities, polls between offers, the heap grown past its
	 * first allocation: never a higher priority after a lower one, and
	 * FIFO (by node index, offered in order) among equals. */
	for (i = 0; i < NODES; i++) {
		p[i] = (int)tu_rnd(&rnd, 4);
		assert_int_equal(tpe__queue_offer(q, &node[i], 0, p[i]), 0);
	}
	for (i = 0; i < NODES; i++) {
		struct tpe__task *t = q->ops->poll(q);
		size_t id = id_of(t);

		assert_true(p[id] <= last_p);
		if (p[id] == last_p)
			assert_true(id > last_i);
		last_p = p[id];
		last_i = id;
	}
	assert_true(tpe__queue_is_empty(q));
	q->ops->destroy(q);
}

static void
test_priority_heap_bounded(void **state)
{
	struct tpe__queue *q;
	size_t i;

	(void)state;
	init_nodes();
	assert_int_equal(tpe__queue_priority_create(&q, SIZE_MAX), EINVAL);
	assert_int_equal(tpe__queue_priority_create(&q, 4), 0);
	for (i = 0; i < 4; i++) {
		assert_int_equal(q->ops->remaining(q), 4 - i);
		assert_int_equal(tpe__queue_offer(q, &node[i], 0, (int)i), 0);
	}
	assert_int_equal(q->ops->remaining(q), 0);
	/* Full, whatever the priority. */
	assert_int_equal(tpe__queue_offer(q, &node[4], 0, 100), EAGAIN);
	assert_int_equal(q->ops->offer(q, &node[4], 0), EAGAIN);
	assert_int_equal(q->ops->size(q), 4);
	assert_int_equal(id_of(q->ops->poll(q)), 3);
	assert_int_equal(q->ops->remaining(q), 1);
	assert_int_equal(tpe__queue_offer(q, &node[4], 0, 100), 0);
	assert_int_equal(id_of(q->ops->poll(q)), 4);
	q->ops->destroy(q);
}

static void
test_priority_heap_drop_oldest(void **state)
{
	struct tpe__queue *q;

	(void)state;
	init_nodes();
	assert_int_equal(tpe__queue_priority_create(&q, 0), 0);
	assert_null(q->ops->drop_oldest(q));
	offer_all(q);
	/* The lowest priority (-2), the oldest of those first: 5, then 10;
	 * then 0's only node (9); then the oldest 1 (node 0). */
	assert_int_equal(id_of(q->ops->drop_oldest(q)), 5);
	assert_int_equal(id_of(q->ops->drop_oldest(q)), 10);
	assert_int_equal(id_of(q->ops->drop_oldest(q)), 9);
	assert_int_equal(id_of(q->ops->drop_oldest(q)), 0);
	/* The rest in order. */
	assert_int_equal(q->ops->size(q), 8);
	assert_int_equal(id_of(q->ops->poll(q)), 1);
	assert_int_equal(id_of(q->ops->poll(q)), 4);
	assert_int_equal(id_of(q->ops->poll(q)), 8);
	assert_int_equal(id_of(q->ops->poll(q)), 3);
	assert_int_equal(id_of(q->ops->poll(q)), 6);
	assert_int_equal(id_of(q->ops->poll(q)), 11);
	assert_int_equal(id_of(q->ops->poll(q)), 2);
	assert_int_equal(id_of(q->ops->poll(q)), 7);
	assert_null(q->ops->poll(q));
	q->ops->destroy(q);
}

static void
test_priority_heap_remove_if(void **state)
{
	struct tpe__queue *q;
	struct tpe__task_list out;
	size_t i;

	(void)state;
	init_nodes();
	assert_int_equal(tpe__queue_priority_create(&q, 0), 0);
	offer_all(q);
	tpe__task_list_init(&out);
	/* Odd nodes in poll order: 1 3 11 7 9 5; the first three move. */
	assert_int_equal(q->ops->remove_if(q, match_odd, NULL, 3, &out), 3);
	assert_int_equal(id_of(tpe__task_list_pop(&out)), 1);
	assert_int_equal(id_of(tpe__task_list_pop(&out)), 3);
	assert_int_equal(id_of(tpe__task_list_pop(&out)), 11);
	assert_int_equal(q->ops->size(q), 9);
	/* The rest keeps its order. */
	for (i = 0; i < 12; i++) {
		size_t id = by_rank[i];

		if (id == 1 || id == 11 || id == 3)
			continue;
		assert_int_equal(id_of(q->ops->poll(q)), id);
	}
	assert_null(q->ops->poll(q));
	/* Everything, in poll order (tpe_shutdown_now's hand-back). */
	offer_all(q);
	assert_int_equal(q->ops->remove_if(q, match_all, NULL, SIZE_MAX,
	    &out), 12);
	for (i = 0; i < 12; i++)
		assert_int_equal(id_of(tpe__task_list_pop(&out)), by_rank[i]);
	assert_int_equal(q->ops->size(q), 0);
	assert_int_equal(q->ops->remove_if(q, match_all, NULL, SIZE_MAX,
	    &out), 0);
	q->ops->destroy(q);
}

/* ---- pools of one blocked worker -------------------------------------- */

/* A task that logs its id in the order the tasks ran. */
#define LOG_MAX 4096
struct run_log {
	int n;       /* taken by a task before it writes its id */
	int ended;   /* counted after it wrote it (release) */
	int id[LOG_MAX];
};

struct logged {
	struct run_log *log;
	int id;
	int prio;
	int ran;
};

static void
log_fn(void *arg)
{
	struct logged *l = arg;
	int i = __atomic_fetch_add(&l->log->n, 1, __ATOMIC_SEQ_CST);

	__atomic_add_fetch(&l->ran, 1, __ATOMIC_SEQ_CST);
	if (i < LOG_MAX)
		l->log->id[i] = l->id;
	/* Release: a reader that sees the count (acquire) sees the id. */
	__atomic_add_fetch(&l->log->ended, 1, __ATOMIC_RELEASE);
}

/* How many logged tasks ended, their ids readable (acquire). */
static int
ended(const struct run_log *log)
{
	return __atomic_load_n(&log->ended, __ATOMIC_ACQUIRE);
}

static void *
log_call(void *arg)
{
	log_fn(arg);
	return arg;
}

/* A pool of `kind` with one worker held by blocker b (released through
 * *release). */
static tpe_t *
blocked_pool(struct tu_pool_opts o, struct tu_latch *started,
    struct tu_latch *release, struct tu_blocker *b)
{
	tpe_t *p;

	if (o.max == 0)
		o.core = o.max = 1;
	p = tu_pool_with(&o);
	tu_latch_init(started, 1);
	tu_latch_init(release, 1);
	*b = (struct tu_blocker){ started, release, NULL, 0 };
	assert_int_equal(tpe_execute(p, tu_blocker_fn, b), 0);
	assert_true(tu_latch_wait_for(started, TU_WAIT_BOUND));
	return p;
}

static void
finish(tpe_t *p, struct tu_latch *started, struct tu_latch *release)
{
	tu_latch_count_down(release);
	assert_int_equal(tpe_destroy(p), 0);
	tu_latch_destroy(started);
	tu_latch_destroy(release);
}

/* The log holds the ids of l[] (n of them) in priority order, FIFO (by id)
 * among equal priorities. */
static void
assert_rank_order(const struct run_log *log, const struct logged *l, int n)
{
	int i;

	assert_int_equal(log->n, n);
	for (i = 1; i < n; i++) {
		const struct logged *a = &l[log->id[i - 1]];
		const struct logged *b = &l[log->id[i]];

		assert_true(a->prio >= b->prio);
		if (a->prio == b->prio)
			assert_true(a->id < b->id);
	}
}

/* Many submitters, random priorities: each takes a ticket under a lock
 * and submits under it, so that the ticket order is the order the pool
 * accepted the tasks (FIFO among equals is then exact). */
#define SUBMITTERS 4
#define PER_SUBMITTER 200
struct submitters {
	tpe_t *pool;
	pthread_mutex_t lock;
	int next;
	struct run_log log;
	struct logged l[SUBMITTERS * PER_SUBMITTER];
	pthread_barrier_t go;
	uint64_t seed[SUBMITTERS];
};

struct submitter {
	struct submitters *s;
	int k;
};

static void *
submitter_main(void *arg)
{
	struct submitter *me = arg;
	struct submitters *s = me->s;
	int i;

	pthread_barrier_wait(&s->go);
	for (i = 0; i < PER_SUBMITTER; i++) {
		int p = (int)tu_rnd(&s->seed[me->k], 8) - 2;
		struct logged *l;

		pthread_mutex_lock(&s->lock);
		l = &s->l[s->next];
		*l = (struct logged){ &s->log, s->next, p, 0 };
		s->next++;
		assert_int_equal(tpe_execute_priority(s->pool, log_fn, l, p),
		    0);
		pthread_mutex_unlock(&s->lock);
	}
	return NULL;
}

static void
test_priority_many_submitters_order(void **state)
{
	static struct submitters s;
	struct submitter me[SUBMITTERS];
	pthread_t th[SUBMITTERS];
	struct tu_latch started, release;
	struct tu_blocker b;
	int i;

	(void)state;
	memset(&s, 0, sizeof(s));
	s.pool = blocked_pool((struct tu_pool_opts){
	    .queue = TPE_QUEUE_PRIORITY }, &started, &release, &b);
	pthread_mutex_init(&s.lock, NULL);
	pthread_barrier_init(&s.go, NULL, SUBMITTERS);
	for (i = 0; i < SUBMITTERS; i++) {
		s.seed[i] = (uint64_t)i * 7919 + 1;
		me[i] = (struct submitter){ &s, i };
		assert_int_equal(pthread_create(&th[i], NULL, submitter_main,
		    &me[i]), 0);
	}
	for (i = 0; i < SUBMITTERS; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(tu_stats(s.pool).queued,
	    SUBMITTERS * PER_SUBMITTER);
	assert_int_equal(s.log.n, 0);
	finish(s.pool, &started, &release);
	assert_rank_order(&s.log, s.l, SUBMITTERS * PER_SUBMITTER);
	pthread_barrier_destroy(&s.go);
	pthread_mutex_destroy(&s.lock);
}

/* Submits l[0..n) with their priorities (ids 0..n-1), asserting each. */
static void
submit_logged(tpe_t *p, struct run_log *log, struct logged *l,
    const int *prios, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		l[i] = (struct logged){ log, i, prios[i], 0 };
		assert_int_equal(tpe_execute_priority(p, log_fn, &l[i],
		    prios[i]), 0);
	}
}

static void
test_priority_plain_execute_is_zero(void **state)
{
	struct tu_latch started, release;
	struct tu_blocker b;
	struct run_log log = { 0 };
	struct logged l[4];
	tpe_t *p, *q;

	(void)state;
	p = blocked_pool((struct tu_pool_opts){ .queue = TPE_QUEUE_PRIORITY },
	    &started, &release, &b);
	l[0] = (struct logged){ &log, 0, -1, 0 };
	l[1] = (struct logged){ &log, 1, 0, 0 };
	l[2] = (struct logged){ &log, 2, 1, 0 };
	l[3] = (struct logged){ &log, 3, 0, 0 };
	assert_int_equal(tpe_execute_priority(p, log_fn, &l[0], -1), 0);
	/* A refused priority call leaves no priority behind on this thread
	 * (the call resets it): the plain calls after it rank at 0. */
	q = tu_pool(1, 1, TPE_QUEUE_PER_WORKER, 0, TPE_REJECT_ABORT);
	assert_int_equal(tpe_shutdown(q), 0);
	assert_int_equal(tpe_execute_priority(q, log_fn, &l[2], 7), ECANCELED);
	assert_int_equal(tpe_destroy(q), 0);
	assert_int_equal(tpe_execute(p, log_fn, &l[1]), 0);
	assert_int_equal(tpe_execute_priority(p, log_fn, &l[2], 1), 0);
	assert_int_equal(tpe_execute_typed(p, log_fn, &l[3], TPE_BLOCKING), 0);
	finish(p, &started, &release);
	assert_int_equal(log.n, 4);
	assert_int_equal(log.id[0], 2);
	assert_int_equal(log.id[1], 1);
	assert_int_equal(log.id[2], 3);
	assert_int_equal(log.id[3], 0);
}

/* Bounded (capacity 3) under each rejection policy: the fourth queued
 * task finds the queue full. */
struct discards {
	int n;
	void *arg[8];
};

static void
discard_fn(tpe_fn fn, void *arg, void *ctx)
{
	struct discards *d = ctx;

	(void)fn;
	if (d->n < 8)
		d->arg[d->n] = arg;
	d->n++;
}

static void
test_priority_bounded_rejections(void **state)
{
	static const int prios[3] = { 2, -1, -1 };
	struct tu_latch started, release;
	struct tu_blocker b;
	struct run_log log = { 0 };
	struct logged l[4];
	struct discards d = { 0 };
	tpe_t *p;

	(void)state;
	/* ABORT: refused, the caller keeps it; nothing else moves. */
	p = blocked_pool((struct tu_pool_opts){ .queue = TPE_QUEUE_PRIORITY,
	    .capacity = 3, .rejection = TPE_REJECT_ABORT }, &started,
	    &release, &b);
	submit_logged(p, &log, l, prios, 3);
	l[3] = (struct logged){ &log, 3, 9, 0 };
	assert_int_equal(tpe_execute_priority(p, log_fn, &l[3], 9), EAGAIN);
	assert_int_equal(tu_stats(p).queued, 3);
	assert_int_equal(tu_stats(p).rejected, 1);
	finish(p, &started, &release);
	assert_int_equal(log.n, 3);
	assert_int_equal(tu_ran(&l[3]), 0);

	/* DISCARD_OLDEST: the lowest priority, oldest of those (l[1]), goes
	 * to the discard callback; the new task is queued at its rank. */
	memset(&log, 0, sizeof(log));
	p = blocked_pool((struct tu_pool_opts){ .queue = TPE_QUEUE_PRIORITY,
	    .capacity = 3, .rejection = TPE_REJECT_DISCARD_OLDEST,
	    .discard = discard_fn, .discard_ctx = &d }, &started, &release,
	    &b);
	submit_logged(p, &log, l, prios, 3);
	l[3] = (struct logged){ &log, 3, 0, 0 };
	assert_int_equal(tpe_execute_priority(p, log_fn, &l[3], 0), 0);
	assert_int_equal(d.n, 1);
	assert_ptr_equal(d.arg[0], &l[1]);
	assert_int_equal(tu_stats(p).queued, 3);
	finish(p, &started, &release);
	assert_int_equal(log.n, 3);
	assert_int_equal(log.id[0], 0);
	assert_int_equal(log.id[1], 3);
	assert_int_equal(log.id[2], 2);

	/* CALLER_RUNS: runs on this thread, at once. */
	memset(&log, 0, sizeof(log));
	p = blocked_pool((struct tu_pool_opts){ .queue = TPE_QUEUE_PRIORITY,
	    .capacity = 3, .rejection = TPE_REJECT_CALLER_RUNS }, &started,
	    &release, &b);
	submit_logged(p, &log, l, prios, 3);
	l[3] = (struct logged){ &log, 3, 9, 0 };
	assert_int_equal(tpe_execute_priority(p, log_fn, &l[3], 9), 0);
	assert_int_equal(log.n, 1);
	assert_int_equal(log.id[0], 3);
	finish(p, &started, &release);
	assert_int_equal(log.n, 4);

	/* DISCARD: handed to the discard callback. */
	memset(&log, 0, sizeof(log));
	memset(&d, 0, sizeof(d));
	p = blocked_pool((struct tu_pool_opts){ .queue = TPE_QUEUE_PRIORITY,
	    .capacity = 3, .rejection = TPE_REJECT_DISCARD,
	    .discard = discard_fn, .discard_ctx = &d }, &started, &release,
	    &b);
	submit_logged(p, &log, l, prios, 3);
	l[3] = (struct logged){ &log, 3, 9, 0 };
	assert_int_equal(tpe_execute_priority(p, log_fn, &l[3], 9), 0);
	assert_int_equal(d.n, 1);
	assert_ptr_equal(d.arg[0], &l[3]);
	finish(p, &started, &release);
	assert_int_equal(log.n, 3);
}

/* Records what tpe_shutdown_now hands back, in order. */
static void
handback_fn(tpe_fn fn, void *arg, void *ctx)
{
	struct run_log *h = ctx;

	(void)fn;
	h->id[h->n++] = ((struct logged *)arg)->id;
}

static void
test_priority_remove_purge_handback(void **state)
{
	static const int prios[6] = { 0, 3, 0, 7, 3, -4 };
	struct tu_latch started, release;
	struct tu_blocker b;
	struct run_log log = { 0 }, back = { 0 };
	struct logged l[6], c = { &log, 6, 5, 0 };
	tpe_future_t *f;
	size_t purged = 0;
	tpe_t *p;

	(void)state;
	p = blocked_pool((struct tu_pool_opts){ .queue = TPE_QUEUE_PRIORITY },
	    &started, &release, &b);
	submit_logged(p, &log, l, prios, 6);
	/* A future at priority 5, cancelled: purged. */
	assert_int_equal(tpe_submit_priority(p, log_call, &c, 5, &f), 0);
	assert_int_equal(tpe_future_cancel(f), 0);
	assert_int_equal(tpe_purge(p, &purged), 0);
	assert_int_equal(purged, 1);
	tpe_future_release(f);
	/* tpe_remove takes l[4] out; a second remove finds nothing. */
	assert_int_equal(tpe_remove(p, log_fn, &l[4]), 0);
	assert_int_equal(tpe_remove(p, log_fn, &l[4]), ENOENT);
	assert_int_equal(tu_stats(p).queued, 5);
	/* The hand-back in priority order, FIFO among equals. */
	assert_int_equal(tpe_shutdown_now(p, handback_fn, &back), 0);
	assert_int_equal(back.n, 5);
	assert_int_equal(back.id[0], 3);
	assert_int_equal(back.id[1], 1);
	assert_int_equal(back.id[2], 0);
	assert_int_equal(back.id[3], 2);
	assert_int_equal(back.id[4], 5);
	finish(p, &started, &release);
	assert_int_equal(log.n, 0);
}

static void
test_priority_futures(void **state)
{
	struct tu_latch started, release;
	struct tu_blocker b;
	struct run_log log = { 0 };
	struct logged l[3];
	tpe_future_t *f[3], *g = TU_SENTINEL;
	void *r;
	int i;

	(void)state;
	{
		tpe_t *p = blocked_pool((struct tu_pool_opts){
		    .queue = TPE_QUEUE_PRIORITY }, &started, &release, &b);

		for (i = 0; i < 3; i++) {
			l[i] = (struct logged){ &log, i, i, 0 };
			assert_int_equal(tpe_submit_priority(p, log_call,
			    &l[i], i, &f[i]), 0);
		}
		/* Errors: no future pointer, no function, no pool. */
		assert_int_equal(tpe_submit_priority(p, log_call, &l[0], 1,
		    NULL), EINVAL);
		assert_int_equal(tpe_submit_priority(p, NULL, &l[0], 1, &g),
		    EINVAL);
		assert_int_equal(tpe_submit_priority(NULL, log_call, &l[0], 1,
		    &g), EINVAL);
		assert_int_equal(tpe_execute_priority(p, NULL, &l[0], 1),
		    EINVAL);
		assert_int_equal(tpe_execute_priority(NULL, log_fn, &l[0], 1),
		    EINVAL);
		assert_int_equal(tu_stats(p).queued, 3);
		tu_latch_count_down(&release);
		for (i = 0; i < 3; i++) {
			assert_int_equal(tpe_future_get(f[i], TU_WAIT_BOUND,
			    &r), 0);
			assert_ptr_equal(r, &l[i]);
			tpe_future_release(f[i]);
		}
		assert_int_equal(tpe_shutdown(p), 0);
		assert_int_equal(tpe_submit_priority(p, log_call, &l[0], 1,
		    &g), ECANCELED);
		assert_int_equal(tpe_execute_priority(p, log_fn, &l[0], 1),
		    ECANCELED);
		finish(p, &started, &release);
	}
	assert_int_equal(log.n, 3);
	assert_int_equal(log.id[0], 2);
	assert_int_equal(log.id[1], 1);
	assert_int_equal(log.id[2], 0);
}

/* The blocking submit: a waiter's task enters at its priority once room
 * appears. */
static sem_t joined;

static void
joined_hook(tpe_t *pool)
{
	(void)pool;
	sem_post(&joined);
}

struct waiter {
	tpe_t *pool;
	struct logged *l;
	int rc;
};

static void *
waiter_main(void *arg)
{
	struct waiter *w = arg;

	w->rc = tpe_execute_wait_priority(w->pool, log_fn, w->l, w->l->prio,
	    TU_WAIT_BOUND);
	return NULL;
}

static void
test_priority_blocking_submit(void **state)
{
	static const int prios[2] = { 0, 1 };
	struct tu_latch started, release;
	struct tu_blocker b;
	struct run_log log = { 0 };
	struct logged l[4];
	struct waiter w;
	tpe_future_t *f = TU_SENTINEL;
	pthread_t th;
	void *r;
	tpe_t *p;

	(void)state;
	p = blocked_pool((struct tu_pool_opts){ .queue = TPE_QUEUE_PRIORITY,
	    .capacity = 2 }, &started, &release, &b);
	submit_logged(p, &log, l, prios, 2);
	l[2] = (struct logged){ &log, 2, 5, 0 };
	l[3] = (struct logged){ &log, 3, 9, 0 };
	/* Full: no wait (ETIMEDOUT), nothing kept. */
	assert_int_equal(tpe_execute_wait_priority(p, log_fn, &l[2], 5, 0),
	    ETIMEDOUT);
	assert_int_equal(tpe_submit_wait_priority(p, log_call, &l[3], 9, 0,
	    &f), ETIMEDOUT);
	assert_int_equal(tpe_execute_wait_priority(p, NULL, &l[2], 5, 0),
	    EINVAL);
	/* A waiter at 5; room made by removing l[0]: it enters before l[1]. */
	assert_int_equal(sem_init(&joined, 0, 0), 0);
	tpe__submit_joined_hook = joined_hook;
	w = (struct waiter){ p, &l[2], -1 };
	assert_int_equal(pthread_create(&th, NULL, waiter_main, &w), 0);
	assert_true(tu_sem_wait_for(&joined, TU_WAIT_BOUND));
	assert_int_equal(tpe_remove(p, log_fn, &l[0]), 0);
	pthread_join(th, NULL);
	tpe__submit_joined_hook = NULL;
	assert_int_equal(w.rc, 0);
	assert_int_equal(tu_stats(p).queued, 2);
	tu_latch_count_down(&release);
	assert_true(TU_EVENTUALLY(ended(&log) == 2, TU_WAIT_BOUND));
	/* Room now: the future variant. */
	assert_int_equal(tpe_submit_wait_priority(p, log_call, &l[3], 9,
	    TU_WAIT_BOUND, &f), 0);
	assert_int_equal(tpe_future_get(f, TU_WAIT_BOUND, &r), 0);
	assert_ptr_equal(r, &l[3]);
	tpe_future_release(f);
	finish(p, &started, &release);
	sem_destroy(&joined);
	assert_int_equal(log.n, 3);
	assert_int_equal(log.id[0], 2);
	assert_int_equal(log.id[1], 1);
	assert_int_equal(log.id[2], 3);
}

/* The blocking forms' own errors: EDEADLK from the only worker of a
 * saturated pool, ECANCELED once shut down. */
struct deadlock_task {
	tpe_t *pool;
	struct tu_latch *go;
	struct logged *l;
	int rc;
};

static void
deadlock_fn(void *arg)
{
	struct deadlock_task *d = arg;

	tu_latch_wait(d->go);
	d->rc = tpe_execute_wait_priority(d->pool, log_fn, d->l, 3, -1);
}

static void
test_priority_wait_errors(void **state)
{
	struct tu_latch go, done;
	struct run_log log = { 0 };
	struct logged l[2] = { { &log, 0, 0, 0 }, { &log, 1, 3, 0 } };
	struct deadlock_task d;
	struct tu_blocker fin;
	tpe_future_t *f = NULL;
	tpe_t *p;

	(void)state;
	p = tu_pool_with(&(struct tu_pool_opts){ .core = 1, .max = 1,
	    .queue = TPE_QUEUE_PRIORITY, .capacity = 1 });
	tu_latch_init(&go, 1);
	tu_latch_init(&done, 1);
	d = (struct deadlock_task){ p, &go, &l[1], -1 };
	assert_int_equal(tpe_execute(p, deadlock_fn, &d), 0);
	/* The queue full behind it, then the task asks to wait. */
	assert_int_equal(tpe_execute_priority(p, log_fn, &l[0], 0), 0);
	tu_latch_count_down(&go);
	fin = (struct tu_blocker){ NULL, NULL, &done, 0 };
	assert_int_equal(tpe_execute_wait_priority(p, tu_blocker_fn, &fin, 0,
	    TU_WAIT_BOUND), 0);
	assert_true(tu_latch_wait_for(&done, TU_WAIT_BOUND));
	assert_int_equal(d.rc, EDEADLK);
	assert_int_equal(tu_ran(&l[1]), 0);
	assert_int_equal(tpe_shutdown(p), 0);
	assert_int_equal(tpe_execute_wait_priority(p, log_fn, &l[1], 3,
	    TU_WAIT_BOUND), ECANCELED);
	assert_int_equal(tpe_submit_wait_priority(p, log_call, &l[1], 3,
	    TU_WAIT_BOUND, &f), ECANCELED);
	assert_int_equal(tpe_submit_wait_priority(p, log_call, &l[1], 3,
	    TU_WAIT_BOUND, NULL), EINVAL);
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(log.n, 1);
	tu_latch_destroy(&go);
	tu_latch_destroy(&done);
}

/* A blocking submitter beside a worker that drains the queue: whether
 * the pool can saturate is decided without the lock from what is fixed
 * at create, not from the queue's room (a data race under TSan). */
static void
test_priority_wait_beside_worker(void **state)
{
	static struct logged l[20000];
	struct run_log log = { 0 };
	int i;
	tpe_t *p;

	(void)state;
	p = tu_pool(1, 1, TPE_QUEUE_PRIORITY, 2, TPE_REJECT_ABORT);
	for (i = 0; i < 20000; i++) {
		l[i] = (struct logged){ &log, i, i % 3, 0 };
		assert_int_equal(tpe_execute_wait_priority(p, log_fn, &l[i],
		    i % 3, -1), 0);
	}
	assert_int_equal(tpe_destroy(p), 0);
	assert_int_equal(log.n, 20000);
}

/* Scale-first, core 1, max 2: both workers held, the tasks queue (the
 * re-enqueue at max); one worker let go runs them in priority order. */
static void
test_priority_scale_first(void **state)
{
	static const int prios[5] = { 1, 4, 1, 4, 2 };
	struct tu_latch started, release1, release2;
	struct tu_blocker b1, b2;
	struct run_log log = { 0 };
	struct logged l[5];
	tpe_t *p;

	(void)state;
	p = tu_pool_with(&(struct tu_pool_opts){ .core = 1, .max = 2,
	    .queue = TPE_QUEUE_PRIORITY, .capacity = 8,
	    .policy = TPE_POLICY_SCALE_FIRST });
	tu_latch_init(&started, 2);
	tu_latch_init(&release1, 1);
	tu_latch_init(&release2, 1);
	b1 = (struct tu_blocker){ &started, &release1, NULL, 0 };
	b2 = (struct tu_blocker){ &started, &release2, NULL, 0 };
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &b1), 0);
	/* Scale-first: no idle worker, so a second one starts for b2. */
	assert_int_equal(tpe_execute(p, tu_blocker_fn, &b2), 0);
	assert_true(tu_latch_wait_for(&started, TU_WAIT_BOUND));
	submit_logged(p, &log, l, prios, 5);
	assert_int_equal(tu_stats(p).queued, 5);
	assert_int_equal(tu_stats(p).pool_size, 2);
	tu_latch_count_down(&release1);
	assert_true(TU_EVENTUALLY(ended(&log) == 5, TU_WAIT_BOUND));
	assert_rank_order(&log, l, 5);
	tu_latch_count_down(&release2);
	assert_int_equal(tpe_destroy(p), 0);
	tu_latch_destroy(&started);
	tu_latch_destroy(&release1);
	tu_latch_destroy(&release2);
}

/* Scheduled tasks enter at their priority. */
static void
test_priority_scheduled(void **state)
{
	static const int prios[4] = { 0, 6, -3, 6 };
	struct tu_latch started, release;
	struct tu_blocker b;
	struct run_log log = { 0 };
	struct logged l[4];
	tpe_future_t *f[4], *g = TU_SENTINEL;
	int i;
	tpe_t *p;


	(void)state;
	p = blocked_pool((struct tu_pool_opts){ .queue = TPE_QUEUE_PRIORITY },
	    &started, &release, &b);
	for (i = 0; i < 4; i++) {
		l[i] = (struct logged){ &log, i, prios[i], 0 };
		assert_int_equal(tpe_schedule_priority(p, log_fn, &l[i], 0,
		    prios[i], &f[i]), 0);
	}
	assert_int_equal(tpe_schedule_priority(p, NULL, &l[0], 0, 1, &g),
	    EINVAL);
	assert_null(g);
	assert_int_equal(tpe_schedule_priority(NULL, log_fn, &l[0], 0, 1, &g),
	    EINVAL);
	/* All four entered the queue (the blocker was the first). */
	assert_true(TU_EVENTUALLY(tu_stats(p).submitted == 5, TU_WAIT_BOUND));
	tu_latch_count_down(&release);
	for (i = 0; i < 4; i++) {
		assert_int_equal(tpe_future_get(f[i], TU_WAIT_BOUND, NULL), 0);
		tpe_future_release(f[i]);
	}
	assert_int_equal(tpe_shutdown(p), 0);
	assert_int_equal(tpe_schedule_priority(p, log_fn, &l[0], 0, 1, &g),
	    ECANCELED);
	finish(p, &started, &release);
	assert_rank_order(&log, l, 4);
	assert_int_equal(log.id[0], 1);
}

/* Other kinds keep their order and ignore the priority. */
static void
test_priority_ignored_by_other_kinds(void **state)
{
	static const int prios[3] = { 0, 5, 9 };
	static const enum tpe_queue_kind kinds[2] = { TPE_QUEUE_UNBOUNDED,
	    TPE_QUEUE_BOUNDED };
	struct tu_latch started, release;
	struct tu_blocker b;
	struct run_log log;
	struct logged l[3];
	int k;
	tpe_t *p;

	(void)state;
	for (k = 0; k < 2; k++) {
		memset(&log, 0, sizeof(log));
		p = blocked_pool((struct tu_pool_opts){ .queue = kinds[k],
		    .capacity = kinds[k] == TPE_QUEUE_BOUNDED ? 4 : 0 },
		    &started, &release, &b);
		submit_logged(p, &log, l, prios, 3);
		finish(p, &started, &release);
		assert_int_equal(log.n, 3);
		assert_int_equal(log.id[0], 0);
		assert_int_equal(log.id[1], 1);
		assert_int_equal(log.id[2], 2);
	}
}

/* The unbounded heap cannot grow: ENOMEM, the task stays the caller's,
 * the queue as it was; the next call, with memory, succeeds. */
static void
test_priority_heap_growth_enomem(void **state)
{
	static int prios[65];
	static struct logged l[65];
	struct tu_latch started, release;
	struct tu_blocker b;
	struct run_log log = { 0 };
	struct logged x = { &log, 65, 3, 0 };
	tpe_t *p;

	(void)state;
	p = blocked_pool((struct tu_pool_opts){ .queue = TPE_QUEUE_PRIORITY },
	    &started, &release, &b);
	/* 64 entries fill the first allocation (priority.c). */
	submit_logged(p, &log, l, prios, 64);
	fault_arm(&realloc_fault, 0, -1, false);
	assert_int_equal(tpe_execute_priority(p, log_fn, &x, 3), ENOMEM);
	assert_int_equal(fault_disarm(&realloc_fault), 1);
	assert_int_equal(tu_stats(p).queued, 64);
	assert_int_equal(tu_stats(p).rejected, 0);
	finish(p, &started, &release);
	assert_int_equal(log.n, 64);
	assert_int_equal(tu_ran(&x), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_priority_heap_order),
		cmocka_unit_test(test_priority_heap_bounded),
		cmocka_unit_test(test_priority_heap_drop_oldest),
		cmocka_unit_test(test_priority_heap_remove_if),
		cmocka_unit_test(test_priority_many_submitters_order),
		cmocka_unit_test(test_priority_plain_execute_is_zero),
		cmocka_unit_test(test_priority_bounded_rejections),
		cmocka_unit_test(test_priority_remove_purge_handback),
		cmocka_unit_test(test_priority_futures),
		cmocka_unit_test(test_priority_blocking_submit),
		cmocka_unit_test(test_priority_wait_errors),
		cmocka_unit_test(test_priority_wait_beside_worker),
		cmocka_unit_test(test_priority_scale_first),
		cmocka_unit_test(test_priority_scheduled),
		cmocka_unit_test(test_priority_ignored_by_other_kinds),
		cmocka_unit_test(test_priority_heap_growth_enomem),
	};

	tu_time_bound(0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
