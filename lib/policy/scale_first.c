/* SPDX-License-Identifier: MIT */
/*
 * scale_first.c - scale-first sizing: grow threads before queueing.
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
 *   1. A gate on step 2 (queue_needs_taker): the engine offers a task to
 *      the queue only when a waiting worker is not yet claimed, takers >
 *      queued, so step 2 fails whenever no idle worker can take the task
 *      and step 3 grows the pool. `takers` counts the workers waiting for a
 *      task (engine/locked.c), under pool->lock; "idle > queued", not
 *      "idle > 0", so N racing submitters never all count on one worker.
 *   2. A re-enqueue verdict (TPE__VERDICT_REQUEUE) before the configured
 *      rejection: when step 3 fails (the pool is at max, a thread could not
 *      be created, or the pool is paused) the engine decides afresh under
 *      the lock: step 3's "at max" may be stale by then (a worker timed out
 *      and left while the lock was dropped), so it offers to an idle
 *      worker or starts a worker below max, and only then puts the task in
 *      the queue without the gate, while the queue has room; it re-checks
 *      the state, so nothing is forced into a shut-down pool (Tomcat's
 *      forced offer could queue a task behind a shutdown, where no worker
 *      would run it). Only when that fails too does the configured
 *      rejection run.
 *
 * Why the races are gone: the submitter's "is a worker idle" (takers, read
 * at the offer) and the worker's "may I time out" (get_task) are both
 * decided under pool->lock, and a worker polls the queue before it may
 * exit, so a task offered to a waiting worker is taken by it or by another
 * worker, never stranded (Tomcat BZ 65454, Elasticsearch #124667, Pinot
 * #13360). There is no submitted-task counter to leak (Dubbo #6496;
 * Tomcat's count leaked when a task failed before it ran, and the pool
 * stopped growing).
 *
 * Invariant: a task is queued only while a waiting worker is claimed for it
 * (takers > queued before the offer), or after step 3 failed (the pool at
 * max, thread creation failing, or paused).
 */
#include "policy/policy.h"

void
tpe__scale_first_setup(struct tpe__policy *p)
{
	p->name = "scale-first";
	p->queue_needs_taker = true;
	p->queued_grow_to_max = true;
	p->verdicts[0] = TPE__VERDICT_REQUEUE;
}
