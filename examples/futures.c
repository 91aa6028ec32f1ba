/* SPDX-License-Identifier: MIT */
/* futures.c - submit callables, collect their results, cancel one that has not started. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tpe.h>

#define NSQUARES 5

static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static int gate_open;

static void
check(int rc, const char *what)
{
	if (rc != 0) {
		fprintf(stderr, "futures: %s: %s\n", what, strerror(rc));
		exit(1);
	}
}

/* Holds the pool's only thread until main opens the gate. */
static void *
wait_for_gate(void *arg)
{
	pthread_mutex_lock(&gate_lock);
	while (!gate_open)
		pthread_cond_wait(&gate_cond, &gate_lock);
	pthread_mutex_unlock(&gate_lock);
	return arg;
}

static void *
square(void *arg)
{
	intptr_t n = (intptr_t)arg;

	return (void *)(n * n);
}

int
main(void)
{
	tpe_future_t *gate, *futures[NSQUARES];
	tpe_attr_t *attr;
	tpe_t *pool;
	void *result;
	intptr_t i;
	int rc;

	/* One thread: the squares wait in the queue behind the gate task. */
	check(tpe_attr_create(&attr), "tpe_attr_create");
	check(tpe_attr_set_pool_size(attr, 1, 1), "tpe_attr_set_pool_size");
	check(tpe_create(&pool, attr), "tpe_create");
	tpe_attr_destroy(attr);

	check(tpe_submit(pool, wait_for_gate, NULL, &gate), "tpe_submit");
	for (i = 0; i < NSQUARES; i++)
		check(tpe_submit(pool, square, (void *)i, &futures[i]),
		    "tpe_submit");

	/* The last square has not started, so it can be cancelled: it will
	 * never run, and waiting for it reports ECANCELED. */
	check(tpe_future_cancel(futures[NSQUARES - 1]), "tpe_future_cancel");

	pthread_mutex_lock(&gate_lock);
	gate_open = 1;
	pthread_cond_broadcast(&gate_cond);
	pthread_mutex_unlock(&gate_lock);

	for (i = 0; i < NSQUARES; i++) {
		rc = tpe_future_get(futures[i], -1, &result);
		if (i == NSQUARES - 1) {
			if (rc != ECANCELED) {
				fprintf(stderr, "futures: cancelled square: %s\n",
				    strerror(rc));
				return 1;
			}
			printf("square(%ld) was cancelled\n", (long)i);
		} else {
			check(rc, "tpe_future_get");
			if ((intptr_t)result != i * i) {
				fprintf(stderr, "futures: square(%ld) = %ld\n",
				    (long)i, (long)(intptr_t)result);
				return 1;
			}
			printf("square(%ld) = %ld\n", (long)i,
			    (long)(intptr_t)result);
		}
		tpe_future_release(futures[i]);
	}
	check(tpe_future_get(gate, -1, NULL), "tpe_future_get");
	tpe_future_release(gate);
	check(tpe_destroy(pool), "tpe_destroy");
	return 0;
}
