/* SPDX-License-Identifier: MIT */
/*
 * compose.c - a task that reports failure, a continuation, a completion
 * queue, and invoke-all / invoke-any: checking a list of numbers for
 * primes.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tpe.h>

#define N 6

static void
check(int rc, const char *what)
{
	if (rc != 0) {
		fprintf(stderr, "compose: %s: %s\n", what, strerror(rc));
		exit(1);
	}
}

/* Returns the number when it is prime; fails with EDOM when it is not. */
static void *
prime(void *arg)
{
	uintptr_t n = (uintptr_t)arg, d;

	for (d = 2; d * d <= n; d++)
		if (n % d == 0) {
			tpe_task_fail(EDOM);
			return NULL;
		}
	return arg;
}

/* A continuation: says how a task ended, on the thread that ended it. */
static void
report(tpe_future_t *f, void *ctx)
{
	void *r;

	if (tpe_future_get(f, 0, &r) == EIO)
		printf("then: %lu is not prime (%s)\n",
		    (unsigned long)(uintptr_t)ctx,
		    strerror(tpe_future_error(f)));
	tpe_future_release(f);
}

int
main(void)
{
	static const uintptr_t numbers[N] = { 91, 97, 1001, 7919, 8191, 9 };
	tpe_call_fn fns[N];
	void *args[N];
	tpe_future_t *f[N];
	tpe_cq_t *cq;
	tpe_t *pool;
	void *r;
	size_t i, which;
	int rc;

	check(tpe_create(&pool, NULL), "tpe_create");
	for (i = 0; i < N; i++) {
		fns[i] = prime;
		args[i] = (void *)numbers[i];
	}

	/* A continuation on one task. */
	check(tpe_submit(pool, prime, (void *)(uintptr_t)91, &f[0]),
	    "tpe_submit");
	check(tpe_future_then(f[0], report, (void *)(uintptr_t)91, NULL),
	    "tpe_future_then");
	tpe_future_release(f[0]);

	/* All of them, results in submission order. */
	check(tpe_invoke_all(pool, N, fns, args, -1, f), "tpe_invoke_all");
	for (i = 0; i < N; i++) {
		rc = tpe_future_get(f[i], 0, &r);
		printf("invoke-all: %lu %s\n", (unsigned long)numbers[i],
		    rc == 0 ? "is prime" : "is not prime");
		tpe_future_release(f[i]);
	}

	/* Any one prime. */
	rc = tpe_invoke_any(pool, N, fns, args, -1, f, &r, &which);
	check(rc, "tpe_invoke_any");
	printf("invoke-any: %lu is prime (task %zu)\n",
	    (unsigned long)(uintptr_t)r, which);
	for (i = 0; i < N; i++) {
		(void)tpe_future_get(f[i], -1, NULL); /* the others end */
		tpe_future_release(f[i]);
	}

	/* The same through a completion queue: results as they come. */
	check(tpe_cq_create(&cq, pool), "tpe_cq_create");
	for (i = 0; i < N; i++)
		check(tpe_cq_submit(cq, prime, args[i], NULL),
		    "tpe_cq_submit");
	for (i = 0; i < N; i++) {
		tpe_future_t *done;

		check(tpe_cq_take(cq, -1, &done), "tpe_cq_take");
		if (tpe_future_get(done, 0, &r) == 0)
			printf("queue: %lu is prime\n",
			    (unsigned long)(uintptr_t)r);
		tpe_future_release(done);
	}
	check(tpe_cq_destroy(cq), "tpe_cq_destroy");
	check(tpe_destroy(pool), "tpe_destroy");
	return 0;
}
