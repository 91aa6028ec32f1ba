/* SPDX-License-Identifier: MIT */
/*
 * apply.c - the parallel loop (tpe_parallel_for(3)): fn(i, arg) for every
 * i in [0, n) once, by the calling thread and helper tasks on a pool.
 *
 * Where it sits: lib/compose, beside the pool: the helpers are an internal
 * set of tasks (pool/task.h, struct tpe__set), submitted through the
 * public tpe_execute.
 *
 * Design notes
 * ------------
 * Sharing the range. `next` is the first index not handed out; a thread
 * takes a chunk [i, i + c) with one CAS from i to i + c, where c is the
 * remaining range divided by CHUNK_DIV times the threads that may take
 * part, at least 1 (guided self-scheduling): the first chunks are large
 * (few CASes on 10^7 trivial iterations), the last ones single indices
 * (64 uneven long iterations spread over every thread, none left holding
 * a long tail). Each index is handed out once: the CAS that moves next
 * past it is the only one that hands it out.
 *
 * Ending. `done` counts the iterations run; a thread adds its chunk's
 * count after running it. The caller takes chunks until none is left,
 * then waits for done to reach n: only for chunks that some thread took
 * and runs now, never for a helper that has not started (that one finds
 * next at n and does nothing). The thread whose add makes done reach n
 * wakes the caller.
 *
 * Lifetime. The state is reference-counted: the caller's reference and
 * one for each helper submitted. A helper's reference is dropped by its
 * node's end (task.c calls the set's `ended` once however the node ends:
 * run, handed back at shutdown-now or by a discarding rejection, refused).
 * Helpers are internal members: a hand-back gives them to no user
 * callback, and a custom rejection handler is not offered one. A
 * submission that made no node (the TLS still set) drops the helper's
 * reference itself. The last reference frees the state: a helper that
 * starts after the caller returned finds next at n and frees it.
 *
 * Invariants: next <= n once capped (a CAS never moves it past n);
 * done <= next; the caller returns only once done == n; refs counts the
 * caller (until it returns) and every helper node not ended.
 *
 * Legend: doc/architecture.md.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/atomic.h"
#include "base/cpu.h"
#include "base/park.h"
#include "base/sync.h"
#include "pool/task.h"
#include "tpe.h"

/* The chunk is the remaining range / (CHUNK_DIV * takers). */
#define CHUNK_DIV 2

struct apply {
	struct tpe__set set;   /* I: the helpers' set */
	size_t n;              /* I: the range [0, n) */
	tpe_apply_fn fn;       /* I */
	void *arg;             /* I */
	size_t takers;         /* I: threads that may take part (divisor) */
	size_t next;           /* A: the first index not handed out */
	size_t done;           /* A: iterations run */
	unsigned refs;         /* A: the caller's and the helpers' */
	struct tpe__park park; /* W: the caller sleeps on it until done ==
				* n; the thread that completes n wakes it */
};

static struct apply *
apply_of(const struct tpe__set *s)
{
	return (struct apply *)((uintptr_t)s - offsetof(struct apply, set));
}

static void
unref(struct apply *a)
{
	/* seq_cst (acq_rel would do): the last drop sees every other
	 * holder's use of a. */
	if (tpe__fetch_sub(&a->refs, 1) == 0) {
		tpe__park_destroy(&a->park);
		free(a);
	}
}

/* A chunk: [*first, *first + return); 0 when the range is handed out. */
static size_t
take_chunk(struct apply *a, size_t *first)
{
	/* Relaxed: the CAS below decides. */
	size_t i = tpe__hint_load(&a->next), c;

	while (i < a->n) {
		c = (a->n - i) / (CHUNK_DIV * a->takers);
		if (c == 0)
			c = 1;
		/* seq_cst CAS: pairs with the other takers' CASes; the one
		 * that moves next past i hands i out. */
		if (tpe__cas_weak(&a->next, &i, i + c)) {
			*first = i;
			return c;
		}
	}
	return 0;
}

/* Runs chunks until none is left. */
static void
run_chunks(struct apply *a)
{
	tpe_apply_fn fn = a->fn; /* I: in locals, not reloaded after each */
	void *arg = a->arg;      /* call, which the compiler must assume
				  * may change *a */
	size_t first, c, i;

	while ((c = take_chunk(a, &first)) != 0) {
		for (i = first; i < first + c; i++)
			fn(i, arg);
		/* seq_cst add (release suffices): the chunk's effects before
		 * the caller's acquire load of done == n; the thread that
		 * completes n wakes it (park.h: change, then wake). */
		if (tpe__fetch_add(&a->done, c) == a->n)
			tpe__park_wake_all(&a->park);
	}
}

static void
helper(void *arg)
{
	run_chunks(arg);
}

/* A helper's node ended (task.h): its reference goes. */
static bool
helper_ended(struct tpe__set *s)
{
	unref(apply_of(s));
	return true;
}

static const struct tpe__set_ops apply_ops = {
	.cancelled = NULL,
	.ended = helper_ended,
	.internal = true,
};

/* Helpers to ask for: one per thread the pool may have, no more than
 * the processors (a hand-off pool of a large max would start threads for
 * nothing), nor than the iterations beyond the caller's first. */
static size_t
helpers_for(tpe_t *pool, size_t n)
{
	struct tpe_stats st;
	size_t h, cpus = tpe__cpu_count();

	if (tpe_get_stats(pool, &st, sizeof(st)) != 0)
		return 0;
	h = st.max_size;
	if (h > cpus)
		h = cpus;
	if (h > n - 1)
		h = n - 1;
	return h;
}

/* Submits up to h helpers; stops at the first refusal (the caller does
 * the rest). */
static void
submit_helpers(tpe_t *pool, struct apply *a, size_t h)
{
	size_t k;
	int rc;

	for (k = 0; k < h; k++) {
		/* The helper's reference, before its node can end; pairs
		 * with unref. */
		tpe__fetch_add(&a->refs, 1);
		tpe__tls_task_set = &a->set;
		rc = tpe_execute(pool, helper, a);
		if (tpe__tls_task_set == &a->set) {
			/* No node: nothing will drop it (Design notes). */
			tpe__tls_task_set = NULL;
			tpe__fetch_sub(&a->refs, 1);
		}
		if (rc != 0)
			return;
		/* A helper ran here (CALLER_RUNS) and took everything. */
		if (tpe__hint_load(&a->next) >= a->n)
			return;
	}
}

int
tpe_parallel_for(tpe_t *pool, size_t n, tpe_apply_fn fn, void *arg)
{
	struct apply *a;
	size_t h, i;
	int64_t forever = -1;
	unsigned seq;

	if (pool == NULL || fn == NULL)
		return EINVAL;
	if (n == 0)
		return 0;
	h = helpers_for(pool, n);
	a = h == 0 ? NULL : calloc(1, sizeof(*a));
	if (a == NULL) {
		/* One iteration, no workers, or no memory: all here. */
		for (i = 0; i < n; i++)
			fn(i, arg);
		return 0;
	}
	a->set.ops = &apply_ops;
	a->n = n;
	a->fn = fn;
	a->arg = arg;
	a->takers = h + 1;
	a->refs = 1;
	tpe__park_init(&a->park);
	submit_helpers(pool, a, h);
	run_chunks(a);
	for (;;) {
		/* Before the look (park.h); pairs with the wake-up in
		 * run_chunks. seq_cst load: acquires the chunks' effects. */
		seq = tpe__park_prepare(&a->park);
		if (tpe__dekker_load(&a->done) == n)
			break;
		(void)tpe__park_wait(&a->park, seq, forever);
	}
	unref(a);
	return 0;
}
