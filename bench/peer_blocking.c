/* SPDX-License-Identifier: MIT */
/*
 * peer_blocking.c - libtpe pools for the blocking scenario of tpe-bench:
 * tasks of which half block in poll(2), on a pool of core = max = the
 * processors, with managed blocking and without, and on a pool sized for
 * the blocking (the floor).
 *
 * Design notes
 *   Each peer has create_blocking and block only (peer.h): it takes part in
 *   the blocking scenario and no other. block(ms) is how a task of the
 *   scenario waits: poll(NULL, 0, ms), inside tpe_blocking_begin /
 *   tpe_blocking_end for "tpe-blk-managed". The managed pool may start
 *   BLK_SPARES threads beyond its maximum (tpe_attr_set_max_spare_threads);
 *   the sized pool has that many more threads from the start, so that
 *   both can have as many tasks in poll at once.
 */
#include <errno.h>
#include <poll.h>

#include <tpe.h>

#include "peer.h"

static int
blk_create(void **out, int threads, size_t spares)
{
	tpe_attr_t *attr;
	tpe_t *pool;
	size_t started;
	int rc;

	rc = tpe_attr_create(&attr);
	if (rc != 0)
		return rc;
	rc = tpe_attr_set_pool_size(attr, (size_t)threads, (size_t)threads);
	if (rc == 0)
		rc = tpe_attr_set_max_spare_threads(attr, spares);
	if (rc == 0)
		rc = tpe_create(&pool, attr);
	tpe_attr_destroy(attr);
	if (rc != 0)
		return rc;
	rc = tpe_prestart_core_threads(pool, &started);
	if (rc != 0) {
		(void)tpe_destroy(pool);
		return rc;
	}
	*out = pool;
	return 0;
}

static int
blk_create_cpus(void **out, int cpus)
{
	return blk_create(out, cpus, TPE_BENCH_BLK_SPARES);
}

static int
blk_create_sized(void **out, int cpus)
{
	return blk_create(out, cpus + TPE_BENCH_BLK_SPARES, 0);
}

static void
blk_poll(int ms)
{
	(void)poll(NULL, 0, ms);
}

static void
blk_poll_managed(int ms)
{
	(void)tpe_blocking_begin();
	(void)poll(NULL, 0, ms);
	(void)tpe_blocking_end();
}

static int
blk_submit(void *p, peer_fn fn, void *arg)
{
	return tpe_execute(p, fn, arg);
}

static int
blk_wait_all(void *p)
{
	return tpe_wait_idle(p, -1);
}

static int
blk_destroy(void *p)
{
	return tpe_destroy(p);
}

#define BLK_PEER(var, nm, wh, cr, bl)					\
const struct peer var = {						\
	.name = nm,							\
	.what = wh,							\
	.submit = blk_submit,						\
	.wait_all = blk_wait_all,					\
	.destroy = blk_destroy,						\
	.create_blocking = cr,						\
	.block = bl,							\
}

BLK_PEER(tpe_bench_peer_blk_managed, "tpe-blk-managed",
    "core = max = CPUs, tpe_blocking_begin/end around the poll, "
    "64 spare threads", blk_create_cpus, blk_poll_managed);
BLK_PEER(tpe_bench_peer_blk_plain, "tpe-blk-plain",
    "core = max = CPUs, a plain poll", blk_create_cpus, blk_poll);
BLK_PEER(tpe_bench_peer_blk_sized, "tpe-blk-sized",
    "core = max = CPUs + 64, a plain poll (the floor)", blk_create_sized,
    blk_poll);
