/* SPDX-License-Identifier: MIT */
/*
 * policy_scale_first.c - scale-first sizing: grow threads before queueing.
 *
 * Design notes
 * ------------
 * The design of Tomcat's TaskQueue and Dubbo's eager pool, rebuilt so that
 * their known races cannot happen. Both decide "is a worker idle, so may I
 * queue" in the submitter and "may I time out" in the worker from
 * different, unsynchronised counters (Tomcat: the pool's active count and
 * a submitted-task count; Dubbo: the pool size), so a task can be queued
 * for a worker that is leaving and wait for the next submission, or a
 * leaked count can stop the pool from growing. Here:
 *
 *   1. A queue decorator whose offer succeeds only when a waiting worker is
 *      not yet claimed: takers > queued. tpe_execute's step 2 then fails
 *      whenever no idle worker can take the task, and step 3 grows the pool.
 *      `takers` counts the workers waiting in tpe__queue_take (take/poll),
 *      maintained by queue.c under pool->lock; "idle > queued", not
 *      "idle > 0", so N racing submitters never all count on one worker.
 *   2. A re-enqueue rejection function: when step 3 fails (the pool is at
 *      max, a thread could not be created, or the pool is paused) it forces
 *      the task into the inner queue while it has room, through
 *      tpe__pool_requeue, and only then calls the configured rejection
 *      policy. tpe__pool_requeue decides afresh under the lock: step 3's
 *      "at max" may be stale by then (a worker timed out and left while
 *      the lock was dropped), so it offers to an idle worker or starts a
 *      worker below max before it forces; and it re-checks the state, so
 *      nothing is forced into a shut-down pool (Tomcat's forced offer
 *      could queue a task behind a shutdown, where no worker would run it).
 *
 * Why the races are gone: the submitter's "is a worker idle" (takers, read
 * in offer) and the worker's "may I time out" (get_task) are both decided
 * under pool->lock, and a worker polls the queue before it may exit, so a
 * task offered to a waiting worker is taken by it or by another worker,
 * never stranded (Tomcat BZ 65454, Elasticsearch #124667, Pinot #13360).
 * There is no submitted-task counter to leak (Dubbo #6496; Tomcat's count
 * leaked when a task failed before it ran, and the pool stopped growing).
 *
 * Invariant: a task is queued only while a waiting worker is claimed for it
 * (takers > queued before the offer), or after step 3 failed (the pool at
 * max, thread creation failing, or paused).
 */
#include <errno.h>
#include <stdlib.h>

#include "policy/policy.h"
#include "policy/rejection.h"

struct scaling_queue {
	struct tpe__queue base;
	struct tpe__queue *inner;     /* I */
	tpe__reject_fn next_reject;   /* I: the configured policy */
	void *next_ctx;               /* I */
};

static struct tpe__queue *
inner_of(const struct tpe__queue *q)
{
	const struct scaling_queue *sq = (const struct scaling_queue *)q;

	/* The inner queue sees the decorator's takers (hand-off reads them). */
	sq->inner->takers = q->takers;
	return sq->inner;
}

static int
scaling_offer(struct tpe__queue *q, struct tpe__task *t)
{
	struct tpe__queue *in = inner_of(q);

	if (q->takers <= in->ops->size(in))
		return EAGAIN; /* no unclaimed idle worker: grow instead */
	return in->ops->offer(in, t);
}

/* The re-enqueue path: the inner queue's own rule only (room left). */
static int
scaling_force(struct tpe__queue *q, struct tpe__task *t)
{
	struct tpe__queue *in = inner_of(q);

	return in->ops->offer(in, t);
}

static struct tpe__task *
scaling_poll(struct tpe__queue *q)
{
	struct tpe__queue *in = inner_of(q);

	return in->ops->poll(in);
}

static struct tpe__task *
scaling_drop_oldest(struct tpe__queue *q)
{
	return tpe__queue_drop_oldest(inner_of(q));
}

static size_t
scaling_size(struct tpe__queue *q)
{
	struct tpe__queue *in = inner_of(q);

	return in->ops->size(in);
}

static size_t
scaling_remaining(const struct tpe__queue *q)
{
	struct tpe__queue *in = inner_of(q);

	return in->ops->remaining(in);
}

static size_t
scaling_remove_if(struct tpe__queue *q, tpe__task_match_fn match, void *ctx,
    size_t max, struct tpe__task_list *out)
{
	struct tpe__queue *in = inner_of(q);

	return in->ops->remove_if(in, match, ctx, max, out);
}

static void
scaling_destroy(struct tpe__queue *q)
{
	struct scaling_queue *sq = (struct scaling_queue *)q;

	sq->inner->ops->destroy(sq->inner);
	free(sq);
}

static const struct tpe__queue_ops scaling_ops = {
	.name = "scale-first",
	.offer = scaling_offer,
	.force = scaling_force,
	.poll = scaling_poll,
	.size = scaling_size,
	.remaining = scaling_remaining,
	.remove_if = scaling_remove_if,
	.destroy = scaling_destroy,
	.drop_oldest = scaling_drop_oldest,
};

static int
reject_reenqueue(tpe_t *pool, struct tpe__task *t, void *ctx)
{
	struct scaling_queue *sq = ctx;
	int rc;

	rc = tpe__pool_requeue(pool, t, tpe__queue_force);
	if (rc == 0 || rc == ECANCELED)
		return rc;
	return sq->next_reject(pool, t, sq->next_ctx);
}

int
tpe__scale_first_install(struct tpe__policy_setup *s)
{
	struct scaling_queue *sq = calloc(1, sizeof(*sq));

	if (sq == NULL)
		return ENOMEM;
	sq->base.ops = &scaling_ops;
	sq->inner = s->queue;
	sq->next_reject = s->reject;
	sq->next_ctx = s->reject_ctx;
	s->queue = &sq->base;
	s->reject = reject_reenqueue;
	s->reject_ctx = sq;
	s->queued_grow_to_max = true;
	return 0;
}
