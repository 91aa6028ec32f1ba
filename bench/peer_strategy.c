/* SPDX-License-Identifier: MIT */
/*
 * peer_strategy.c - libtpe's execution strategies as tpe-bench peers:
 * tpe-adaptive, tpe-pc, tpe-pec and tpe-epc drive the same producer on
 * the same pool, and differ only in the mode given to tpe_strategy_create.
 *
 * Design notes
 *   The pool: core = max = nthreads, with `reserved` reserved threads
 *   (tpe_attr_set_reserved_threads), so that EPC can hand production to
 *   one; its core threads are prestarted. The same pool for all four
 *   modes: PC and PEC simply never ask for a reserved thread.
 *
 *   Every produced task is typed TPE_BLOCKING, as a request handler is:
 *   the adaptive strategy then runs it in the producing thread only after
 *   handing production to a reserved thread (EPC), and gives it to the
 *   pool (PEC) when none is free. A NON_BLOCKING task would always be run
 *   by the producer (PC), whatever the mode of adaptive.
 *
 *   The producing thread of run_producer is the caller's (the scenario's
 *   main thread, a thread that may block); resume is
 *   tpe_strategy_dispatch, which starts production on a pool thread.
 *   destroy shuts the pool down and waits for it before it destroys the
 *   strategy, so that no pool thread is still inside the strategy then.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <tpe.h>

#include "peer.h"

struct sp {
	tpe_t *pool;
	tpe_strategy_t *strategy;
	peer_produce_fn produce;
	void *ctx;
};

/* The tpe_produce_fn over the scenario's producer. */
static bool
sp_produce(void *ctx, tpe_fn *fn, void **arg, enum tpe_invocation *type)
{
	struct sp *sp = ctx;
	peer_fn f;

	if (!sp->produce(sp->ctx, &f, arg))
		return false;
	*fn = f;
	*type = TPE_BLOCKING;
	return true;
}

static int
sp_create(void **out, int nthreads, int reserved, peer_produce_fn produce,
    void *ctx, enum tpe_strategy_mode mode)
{
	tpe_attr_t *attr;
	struct sp *sp;
	int rc;

	sp = calloc(1, sizeof(*sp));
	if (sp == NULL)
		return ENOMEM;
	sp->produce = produce;
	sp->ctx = ctx;
	rc = tpe_attr_create(&attr);
	if (rc != 0) {
		free(sp);
		return rc;
	}
	rc = tpe_attr_set_pool_size(attr, (size_t)nthreads, (size_t)nthreads);
	if (rc == 0)
		rc = tpe_attr_set_reserved_threads(attr, reserved);
	if (rc == 0)
		rc = tpe_create(&sp->pool, attr);
	tpe_attr_destroy(attr);
	if (rc == 0)
		rc = tpe_prestart_core_threads(sp->pool, NULL);
	if (rc == 0)
		rc = tpe_strategy_create(&sp->strategy, sp->pool, sp_produce,
		    sp, mode);
	if (rc != 0) {
		if (sp->pool != NULL)
			tpe_destroy(sp->pool);
		free(sp);
		return rc;
	}
	*out = sp;
	return 0;
}

static int
sp_run(void *p)
{
	return tpe_strategy_produce(((struct sp *)p)->strategy);
}

static int
sp_resume(void *p)
{
	return tpe_strategy_dispatch(((struct sp *)p)->strategy);
}

/* How the strategy consumed the tasks: "epc 97% pec 3%". */
static void
sp_note(void *p, char *buf, size_t len)
{
	struct tpe_strategy_stats st;
	double all;

	if (tpe_strategy_get_stats(((struct sp *)p)->strategy, &st,
	    sizeof(st)) != 0) {
		snprintf(buf, len, "no strategy statistics");
		return;
	}
	all = (double)(st.pc + st.pic + st.pec + st.epc);
	if (all == 0)
		all = 1;
	snprintf(buf, len, "pc %.0f%% pic %.0f%% pec %.0f%% epc %.0f%%",
	    100.0 * (double)st.pc / all, 100.0 * (double)st.pic / all,
	    100.0 * (double)st.pec / all, 100.0 * (double)st.epc / all);
}

static int
sp_destroy(void *p)
{
	struct sp *sp = p;
	int rc;

	rc = tpe_shutdown(sp->pool);
	if (rc == 0)
		rc = tpe_await_termination(sp->pool, -1);
	if (rc == 0)
		rc = tpe_strategy_destroy(sp->strategy);
	if (rc == 0)
		rc = tpe_destroy(sp->pool);
	free(sp);
	return rc;
}

#define SP_MODE(m, M)							\
static int								\
sp_create_##m(void **out, int nthreads, int reserved,			\
    peer_produce_fn produce, void *ctx)					\
{									\
	return sp_create(out, nthreads, reserved, produce, ctx,		\
	    TPE_STRATEGY_##M);						\
}									\
									\
const struct peer tpe_bench_peer_strategy_##m = {			\
	.name = "tpe-" #m,						\
	.what = "tpe_strategy_produce, TPE_STRATEGY_" #M ", BLOCKING "	\
	    "tasks, a pool with reserved threads (producer scenarios "	\
	    "only)",							\
	.destroy = sp_destroy,						\
	.create_producer = sp_create_##m,				\
	.run_producer = sp_run,						\
	.resume = sp_resume,						\
	.note = sp_note,						\
}

SP_MODE(adaptive, ADAPTIVE);
SP_MODE(pc, PC);
SP_MODE(pec, PEC);
SP_MODE(epc, EPC);
