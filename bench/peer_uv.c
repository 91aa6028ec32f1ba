/* SPDX-License-Identifier: MIT */
/*
 * peer_uv.c - libuv's thread pool (uv_queue_work) as a tpe-bench peer.
 *
 * Design notes
 *   libuv has one thread pool per process, sized once from
 *   UV_THREADPOOL_SIZE when it is first used; tpe-bench runs every
 *   measurement in a fresh child process, so create sets the variable and
 *   then starts the pool by running one no-op request to completion.
 *   A second create with another size in the same process is refused (EBUSY).
 *
 *   uv_queue_work is not thread-safe per loop: each submitting thread gets a
 *   loop of its own (thread-local). The caller owns each request, so submit
 *   allocates it (as libuv users do) and the after-work callback, which runs
 *   on the submitter's loop, frees it. The submitter reaps completions every
 *   REAP_EVERY submits with a non-blocking uv_run, the way a busy loop thread
 *   would, and runs its loop to the end in submitter_done. Those costs are
 *   part of what is measured: they are what using this pool costs.
 *   destroy has nothing to stop: libuv's workers live until exit.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <uv.h>

#include "peer.h"

#define REAP_EVERY 256

struct ureq {
	uv_work_t req; /* first: the callbacks cast back */
	peer_fn fn;
	void *arg;
};

struct upool {
	int nthreads;
};

static int pool_size;                 /* size of this process's libuv pool */
static __thread uv_loop_t *tl_loop;   /* this thread's loop, lazily made */
static __thread unsigned tl_since_reap;

static void
work_cb(uv_work_t *req)
{
	struct ureq *u = (struct ureq *)req;

	u->fn(u->arg);
}

static void
after_cb(uv_work_t *req, int status)
{
	(void)status;
	free(req);
}

static void
noop(void *arg)
{
	(void)arg;
}

static uv_loop_t *
my_loop(void)
{
	if (tl_loop == NULL) {
		uv_loop_t *l = malloc(sizeof(*l));

		if (l == NULL)
			return NULL;
		if (uv_loop_init(l) != 0) {
			free(l);
			return NULL;
		}
		tl_loop = l;
	}
	return tl_loop;
}

static int
queue(uv_loop_t *loop, peer_fn fn, void *arg)
{
	struct ureq *u = malloc(sizeof(*u));
	int rc;

	if (u == NULL)
		return ENOMEM;
	u->fn = fn;
	u->arg = arg;
	rc = uv_queue_work(loop, &u->req, work_cb, after_cb);
	if (rc != 0) {
		free(u);
		return -rc; /* libuv errors are negated errno values */
	}
	return 0;
}

static void
uv_drain(void *p)
{
	(void)p;
	if (tl_loop == NULL)
		return;
	uv_run(tl_loop, UV_RUN_DEFAULT);
	uv_loop_close(tl_loop);
	free(tl_loop);
	tl_loop = NULL;
	tl_since_reap = 0;
}

static int
uv_create(void **out, int nthreads)
{
	struct upool *u;
	char buf[16];
	uv_loop_t *loop;
	int rc;

	if (nthreads < 1)
		return EINVAL;
	if (pool_size != 0 && pool_size != nthreads)
		return EBUSY;
	if (pool_size == 0) {
		snprintf(buf, sizeof(buf), "%d", nthreads);
		if (setenv("UV_THREADPOOL_SIZE", buf, 1) != 0)
			return errno;
		/* The first request starts all of libuv's workers. */
		loop = my_loop();
		if (loop == NULL)
			return ENOMEM;
		rc = queue(loop, noop, buf);
		if (rc != 0)
			return rc;
		uv_drain(NULL);
		pool_size = nthreads;
	}
	u = malloc(sizeof(*u));
	if (u == NULL)
		return ENOMEM;
	u->nthreads = nthreads;
	*out = u;
	return 0;
}

static int
uv_submit(void *p, peer_fn fn, void *arg)
{
	uv_loop_t *loop = my_loop();
	int rc;

	(void)p;
	if (loop == NULL)
		return ENOMEM;
	rc = queue(loop, fn, arg);
	if (rc == 0 && ++tl_since_reap >= REAP_EVERY) {
		tl_since_reap = 0;
		uv_run(loop, UV_RUN_NOWAIT);
	}
	return rc;
}

static int
uv_wait_all(void *p)
{
	uv_drain(p);
	return 0;
}

static int
uv_destroy(void *p)
{
	uv_drain(p);
	free(p);
	return 0;
}

const struct peer tpe_bench_peer_uv = {
	.name = "libuv",
	.what = "uv_queue_work, UV_THREADPOOL_SIZE threads, malloc'd uv_work_t, "
	    "a loop per submitter",
	.create = uv_create,
	.submit = uv_submit,
	.submitter_done = uv_drain,
	.wait_all = uv_wait_all,
	.destroy = uv_destroy,
};
