/* SPDX-License-Identifier: MIT */
/*
 * peer_libtpe.c - libtpe as a tpe-bench peer: the default queue-first pool
 * with core = max = nthreads and the default unbounded queue.
 *
 * Design notes
 *   Only the pool size is set; everything else is tpe_attr_create's default
 *   (queue-first, TPE_QUEUE_UNBOUNDED, abort policy), the pool a user gets
 *   when sizing it. The core threads are prestarted, as the other fixed
 *   pools start theirs at create. tpe_wait_idle is the peer's wait-for-idle.
 *
 *   For the sizing scenarios (burst) the same peer builds a core..max pool
 *   with a bounded queue, queue-first; "libtpe-scale" is that pool with
 *   TPE_POLICY_SCALE_FIRST and takes part only in those scenarios.
 *
 *   "libtpe-pw" is the small-task pool: TPE_QUEUE_PER_WORKER, a fixed pool
 *   of nthreads workers (started by tpe_create), a stack per worker.
 *
 *   "libtpe-m" and "libtpe-pw-m" are "libtpe" and "libtpe-pw" with their
 *   runtime metrics on (tpe_attr_set_metrics(3), the default sampling),
 *   for issue 22's cost budget: tiny-1 with metrics >= 0.9x without.
 */
#include <errno.h>

#include <tpe.h>

#include "peer.h"

/* A fixed pool of nthreads workers with the given queue kind and
 * metrics flags (0: none). */
static int
fixed(void **out, int nthreads, enum tpe_queue_kind kind, unsigned metrics)
{
	tpe_attr_t *attr;
	tpe_t *pool;
	int rc;

	rc = tpe_attr_create(&attr);
	if (rc != 0)
		return rc;
	rc = tpe_attr_set_pool_size(attr, (size_t)nthreads, (size_t)nthreads);
	if (rc == 0)
		rc = tpe_attr_set_queue(attr, kind, 0);
	if (rc == 0)
		rc = tpe_attr_set_metrics(attr, metrics);
	if (rc == 0)
		rc = tpe_create(&pool, attr);
	tpe_attr_destroy(attr);
	if (rc != 0)
		return rc;
	rc = tpe_prestart_core_threads(pool, NULL);
	if (rc != 0) {
		tpe_destroy(pool);
		return rc;
	}
	*out = pool;
	return 0;
}

static int
tp_create(void **out, int nthreads)
{
	return fixed(out, nthreads, TPE_QUEUE_UNBOUNDED, 0);
}

static int
tp_create_per_worker(void **out, int nthreads)
{
	return fixed(out, nthreads, TPE_QUEUE_PER_WORKER, 0);
}

static int
tp_create_metrics(void **out, int nthreads)
{
	return fixed(out, nthreads, TPE_QUEUE_UNBOUNDED, TPE_METRICS_ON);
}

static int
tp_create_per_worker_metrics(void **out, int nthreads)
{
	return fixed(out, nthreads, TPE_QUEUE_PER_WORKER, TPE_METRICS_ON);
}

static int
sized(void **out, int core, int max, int capacity, enum tpe_policy policy)
{
	tpe_attr_t *attr;
	tpe_t *pool;
	int rc;

	rc = tpe_attr_create(&attr);
	if (rc != 0)
		return rc;
	rc = tpe_attr_set_pool_size(attr, (size_t)core, (size_t)max);
	if (rc == 0)
		rc = tpe_attr_set_queue(attr, TPE_QUEUE_BOUNDED,
		    (size_t)capacity);
	if (rc == 0)
		rc = tpe_attr_set_policy(attr, policy);
	if (rc == 0)
		rc = tpe_create(&pool, attr);
	tpe_attr_destroy(attr);
	if (rc != 0)
		return rc;
	rc = tpe_prestart_core_threads(pool, NULL);
	if (rc != 0) {
		tpe_destroy(pool);
		return rc;
	}
	*out = pool;
	return 0;
}

static int
tp_create_queue_first(void **out, int core, int max, int capacity)
{
	return sized(out, core, max, capacity, TPE_POLICY_QUEUE_FIRST);
}

static int
tp_create_scale_first(void **out, int core, int max, int capacity)
{
	return sized(out, core, max, capacity, TPE_POLICY_SCALE_FIRST);
}

static int
tp_submit(void *p, peer_fn fn, void *arg)
{
	return tpe_execute(p, fn, arg);
}

static int
tp_wait_all(void *p)
{
	return tpe_wait_idle(p, -1);
}

static int
tp_destroy(void *p)
{
	return tpe_destroy(p);
}

const struct peer tpe_bench_peer_libtpe = {
	.name = "libtpe",
	.what = "tpe_execute, default queue-first pool, core = max, "
	    "unbounded queue",
	.create = tp_create,
	.submit = tp_submit,
	.submitter_done = NULL,
	.wait_all = tp_wait_all,
	.destroy = tp_destroy,
	.create_sized = tp_create_queue_first,
};

const struct peer tpe_bench_peer_libtpe_scale = {
	.name = "libtpe-scale",
	.what = "tpe_execute, scale-first pool (sizing scenarios only)",
	.create = NULL,
	.submit = tp_submit,
	.submitter_done = NULL,
	.wait_all = tp_wait_all,
	.destroy = tp_destroy,
	.create_sized = tp_create_scale_first,
};

const struct peer tpe_bench_peer_libtpe_pw = {
	.name = "libtpe-pw",
	.what = "tpe_execute, TPE_QUEUE_PER_WORKER: fixed pool, a stack per "
	    "worker",
	.create = tp_create_per_worker,
	.submit = tp_submit,
	.submitter_done = NULL,
	.wait_all = tp_wait_all,
	.destroy = tp_destroy,
};

const struct peer tpe_bench_peer_libtpe_metrics = {
	.name = "libtpe-m",
	.what = "libtpe with tpe_attr_set_metrics(TPE_METRICS_ON)",
	.create = tp_create_metrics,
	.submit = tp_submit,
	.submitter_done = NULL,
	.wait_all = tp_wait_all,
	.destroy = tp_destroy,
};

const struct peer tpe_bench_peer_libtpe_pw_metrics = {
	.name = "libtpe-pw-m",
	.what = "libtpe-pw with tpe_attr_set_metrics(TPE_METRICS_ON)",
	.create = tp_create_per_worker_metrics,
	.submit = tp_submit,
	.submitter_done = NULL,
	.wait_all = tp_wait_all,
	.destroy = tp_destroy,
};
