/* SPDX-License-Identifier: MIT */
/*
 * peer_thpool.c - Pithikos' C-Thread-Pool as a tpe-bench peer, compiled in
 * from the thpool.c that Debian's cthreadpool-dev ships.
 *
 * Design notes
 *   The upstream source is included as is (configure finds it and defines
 *   TPE_BENCH_THPOOL_C to its path), with every public name renamed, so that
 *   it cannot collide with the thpool_* compatibility API that libtpe itself
 *   exports. thpool.c must come first: it sets _POSIX_C_SOURCE.
 *   thpool_init starts its threads at once; thpool_wait is its wait-for-idle;
 *   thpool_destroy drops what is still queued (tpe-bench only destroys an
 *   idle pool).
 */
#define thpool_init tpe_bench_thpool_init
#define thpool_add_work tpe_bench_thpool_add_work
#define thpool_wait tpe_bench_thpool_wait
#define thpool_pause tpe_bench_thpool_pause
#define thpool_resume tpe_bench_thpool_resume
#define thpool_destroy tpe_bench_thpool_destroy
#define thpool_num_threads_working tpe_bench_thpool_num_threads_working
#define DISABLE_PRINT 1

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#pragma GCC diagnostic ignored "-Wcast-function-type"
#endif

#ifndef TPE_BENCH_THPOOL_C
#define TPE_BENCH_THPOOL_C "/usr/share/cthreadpool/thpool.c"
#endif
#include TPE_BENCH_THPOOL_C

#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

#include <errno.h>

#include "peer.h"

static int
th_create(void **out, int nthreads)
{
	threadpool tp = thpool_init(nthreads);

	if (tp == NULL)
		return ENOMEM;
	*out = tp;
	return 0;
}

static int
th_submit(void *p, peer_fn fn, void *arg)
{
	return thpool_add_work((threadpool)p, fn, arg) == 0 ? 0 : ENOMEM;
}

static int
th_wait_all(void *p)
{
	thpool_wait((threadpool)p);
	return 0;
}

static int
th_destroy(void *p)
{
	thpool_destroy((threadpool)p);
	return 0;
}

const struct peer tpe_bench_peer_thpool = {
	.name = "thpool",
	.what = "C-Thread-Pool (Debian cthreadpool-dev thpool.c), thpool_add_work",
	.create = th_create,
	.submit = th_submit,
	.submitter_done = NULL,
	.wait_all = th_wait_all,
	.destroy = th_destroy,
};
