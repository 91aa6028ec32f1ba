/* SPDX-License-Identifier: MIT */
/*
 * groups.c - a task group (wait for a batch, not the whole pool; a notify
 * callback; cancel what has not started) and the parallel loop (sum of
 * squares, the calling thread taking part).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tpe.h>

#define N 1000

static void
check(int rc, const char *what)
{
	if (rc != 0) {
		fprintf(stderr, "groups: %s: %s\n", what, strerror(rc));
		exit(1);
	}
}

static void
fail(const char *what)
{
	fprintf(stderr, "groups: %s\n", what);
	exit(1);
}

static void
square(void *arg)
{
	long *x = arg;

	*x = *x * *x;
}

/* The group's notify: runs once, when its last task has ended. */
static void
batch_done(tpe_group_t *g, void *ctx)
{
	(void)g;
	*(int *)ctx = 1;
}

/* Cancelled before they start: handed back to the discard callback. */
static void
discarded(tpe_fn fn, void *arg, void *ctx)
{
	(void)fn;
	(void)arg;
	__atomic_add_fetch((int *)ctx, 1, __ATOMIC_SEQ_CST);
}

static void
add_square(size_t i, void *arg)
{
	__atomic_add_fetch((long *)arg, (long)(i * i), __ATOMIC_RELAXED);
}

int
main(void)
{
	static long v[N];
	long sum = 0, want = 0;
	int notified = 0, handed = 0;
	tpe_attr_t *attr;
	tpe_group_t *g;
	tpe_t *pool;
	size_t i;

	check(tpe_attr_create(&attr), "tpe_attr_create");
	check(tpe_attr_set_pool_size(attr, 2, 2), "tpe_attr_set_pool_size");
	check(tpe_attr_set_discard_callback(attr, discarded, &handed),
	    "tpe_attr_set_discard_callback");
	check(tpe_create(&pool, attr), "tpe_create");
	tpe_attr_destroy(attr);

	/* A batch: wait for these tasks only. */
	check(tpe_group_create(&g), "tpe_group_create");
	for (i = 0; i < N; i++) {
		v[i] = (long)i;
		if (tpe_group_execute(g, pool, square, &v[i]) != 0)
			square(&v[i]);	/* refused: do it here */
	}
	check(tpe_group_notify(g, batch_done, &notified), "tpe_group_notify");
	check(tpe_group_wait(g, -1), "tpe_group_wait");
	for (i = 0; i < N; i++)
		if (v[i] != (long)(i * i))
			fail("a square is wrong");

	/* Cancel: what has not started is handed back, never lost. */
	check(tpe_group_cancel(g), "tpe_group_cancel");
	if (tpe_group_execute(g, pool, square, &v[0]) == 0)
		fail("a cancelled group took a task");
	check(tpe_group_wait(g, -1), "tpe_group_wait");
	check(tpe_group_destroy(g), "tpe_group_destroy");

	/* The loop: every i once, this thread and the pool's workers. */
	check(tpe_parallel_for(pool, N, add_square, &sum), "tpe_parallel_for");
	for (i = 0; i < N; i++)
		want += (long)(i * i);
	/* The notify ran on a worker: read after the workers are gone. */
	check(tpe_destroy(pool), "tpe_destroy");
	printf("batch of %d squared (notified %d), sum of squares %ld (%s)\n",
	    N, notified, sum, sum == want ? "right" : "wrong");
	return sum == want && notified == 1 && handed == 0 ? 0 : 1;
}
