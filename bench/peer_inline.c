/* SPDX-License-Identifier: MIT */
/*
 * peer_inline.c - no pool and no other thread: submit runs the task in the
 * submitting thread. The machine's own row of the tiny scenarios.
 *
 * Design notes
 *   What it measures is the submit loop and the no-op task themselves,
 *   with nothing shared between threads: each submitter counts in its own
 *   slot (tpe-bench's count_task), so in tiny-2 the two submitters touch
 *   no common line. Its ns/task is the floor under every pool's, and its
 *   spread (the slowest of the runs against the fastest) is what the
 *   machine alone does to a loop from one run to the next. On a virtual
 *   machine whose cores are shared with other guests, that spread can
 *   exceed a pool's spread target: issue 19 wants the per-worker pool's
 *   slowest run within 1.5x of its fastest, and the targets block prints
 *   this row's spread next to it (speed_targets in tpe-bench.c).
 *
 *   A run of this peer is short (some tens of milliseconds against a
 *   pool's hundreds), so it samples the machine in a narrower window: its
 *   spread reads at least as wide as a longer loop's would in the same
 *   spell. Only the tiny scenarios use it (tiny_only): in the others a
 *   task that blocks or sleeps would hold the submitter.
 *
 *   There is no state: create hands back a static token (the peer
 *   interface wants a pool pointer), destroy and wait_all do nothing.
 */
#include <stddef.h>

#include "peer.h"

static char token;

static int
in_create(void **out, int nthreads)
{
	(void)nthreads;
	*out = &token;
	return 0;
}

static int
in_submit(void *pool, peer_fn fn, void *arg)
{
	(void)pool;
	fn(arg);
	return 0;
}

static int
in_destroy(void *pool)
{
	(void)pool;
	return 0;
}

const struct peer tpe_bench_peer_inline = {
	.name = "inline",
	.what = "no pool: submit runs the task in the submitting thread, "
	    "the machine's own floor and spread (tiny scenarios only)",
	.create = in_create,
	.submit = in_submit,
	.submitter_done = NULL,
	.wait_all = NULL,
	.destroy = in_destroy,
	.tiny_only = true,
};
