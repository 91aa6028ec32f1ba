/* SPDX-License-Identifier: MIT */
/*
 * thpool_compat.c - a C-Thread-Pool program, unchanged, on libtpe.
 *
 * Written the way C-Thread-Pool's README teaches: include "thpool.h",
 * make a pool of 4 threads, add 40 jobs (one with the README's casts),
 * wait for them, add one more while paused, resume: 41 jobs; destroy.
 * Build it with
 *
 *	cc thpool_compat.c $(pkg-config --cflags --libs tpe-thpool)
 *
 * It exits 0 when every job ran exactly once.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include "thpool.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int jobs_done;
static long sum;

static void task(void *arg)
{
	pthread_mutex_lock(&lock);
	jobs_done++;
	sum += (long)(intptr_t)arg;
	pthread_mutex_unlock(&lock);
}

int main(void)
{
	threadpool thpool;
	int i, done;
	long total;

	puts("Making threadpool with 4 threads");
	thpool = thpool_init(4);
	if (thpool == NULL) {
		fputs("thpool_init failed\n", stderr);
		return 1;
	}

	puts("Adding 40 tasks to threadpool");
	for (i = 0; i < 39; i++) {
		if (thpool_add_work(thpool, task, (void *)(intptr_t)i) != 0) {
			fputs("thpool_add_work failed\n", stderr);
			return 1;
		}
	}
	/* The README's form: the argument cast to void *. */
	thpool_add_work(thpool, task, (void *)(intptr_t)39);

	thpool_wait(thpool);
	printf("Working threads after wait: %d\n",
	    thpool_num_threads_working(thpool));

	/* Jobs added while paused wait for the resume. */
	thpool_pause(thpool);
	puts("Adding 1 more task while paused");
	thpool_add_work(thpool, task, (void *)(intptr_t)40);
	thpool_resume(thpool);
	thpool_wait(thpool);

	puts("Killing threadpool");
	thpool_destroy(thpool);

	pthread_mutex_lock(&lock);
	done = jobs_done;
	total = sum;
	pthread_mutex_unlock(&lock);
	printf("%d jobs ran, sum %ld\n", done, total);
	return done == 41 && total == 41 * 40 / 2 ? 0 : 1;
}
