/* SPDX-License-Identifier: MIT */
/*
 * peer_glib.c - GLib's GThreadPool as a tpe-bench peer.
 *
 * Design notes
 *   The pool is exclusive (its nthreads threads start at once and stay, the
 *   GLib counterpart of core = max), the way a fixed worker pool is set up
 *   with GLib. A GThreadPool runs one function per pool and pushes only a
 *   data pointer, which must not be NULL. That is how GLib is used: so the
 *   peer binds the function of the first submit to the pool (one
 *   compare-and-swap; later submits compare with a relaxed load) and pushes
 *   the bare argument for it, with no per-task allocation. A task with
 *   another function (tpe-bench's few blocking tasks) is pushed as a
 *   malloc'd (fn, arg) pair whose pointer is tagged with bit 0; so is an
 *   argument with bit 0 set. Every measured stream of tpe-bench uses the
 *   bound function.
 *   GLib has no wait-for-idle; g_thread_pool_free(pool, FALSE, TRUE) drains.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include <glib.h>

#include "peer.h"

struct gpool {
	GThreadPool *tp;
	_Atomic(peer_fn) fn; /* A: bound by the first submit, then read-only */
};

struct pair {
	peer_fn fn;
	void *arg;
};

#define TAG ((uintptr_t)1)

static void
trampoline(gpointer data, gpointer user_data)
{
	struct gpool *g = user_data;
	struct pair *pr;

	if (((uintptr_t)data & TAG) != 0) {
		pr = (struct pair *)((uintptr_t)data & ~TAG);
		pr->fn(pr->arg);
		free(pr);
		return;
	}
	/* Relaxed: the push that carried data (GAsyncQueue's mutex) orders
	 * the store of fn before this load. */
	atomic_load_explicit(&g->fn, memory_order_relaxed)(data);
}

static int
gl_create(void **out, int nthreads)
{
	struct gpool *g = calloc(1, sizeof(*g));
	GError *err = NULL;

	if (g == NULL)
		return ENOMEM;
	g->tp = g_thread_pool_new(trampoline, g, nthreads, TRUE, &err);
	if (g->tp == NULL || err != NULL) {
		if (g->tp != NULL)
			g_thread_pool_free(g->tp, TRUE, TRUE);
		if (err != NULL)
			g_error_free(err);
		free(g);
		return EAGAIN;
	}
	*out = g;
	return 0;
}

static int
gl_submit(void *p, peer_fn fn, void *arg)
{
	struct gpool *g = p;
	peer_fn bound = atomic_load_explicit(&g->fn, memory_order_relaxed);
	GError *err = NULL;

	struct pair *pr = NULL;
	void *data = arg;

	if (arg == NULL)
		return EINVAL;
	if (bound == NULL) {
		/* Pairs with itself in a concurrent first submit. */
		if (atomic_compare_exchange_strong(&g->fn, &bound, fn))
			bound = fn;
	}
	if (bound != fn || ((uintptr_t)arg & TAG) != 0) {
		pr = malloc(sizeof(*pr));
		if (pr == NULL)
			return ENOMEM;
		pr->fn = fn;
		pr->arg = arg;
		data = (void *)((uintptr_t)pr | TAG);
	}
	if (!g_thread_pool_push(g->tp, data, &err)) {
		if (err != NULL)
			g_error_free(err);
		free(pr);
		return EAGAIN;
	}
	return 0;
}

static int
gl_destroy(void *p)
{
	struct gpool *g = p;

	g_thread_pool_free(g->tp, FALSE, TRUE);
	free(g);
	return 0;
}

const struct peer tpe_bench_peer_glib = {
	.name = "glib",
	.what = "GThreadPool, exclusive (fixed threads), g_thread_pool_push",
	.create = gl_create,
	.submit = gl_submit,
	.submitter_done = NULL,
	.wait_all = NULL,
	.destroy = gl_destroy,
};
