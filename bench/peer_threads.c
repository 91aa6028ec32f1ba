/* SPDX-License-Identifier: MIT */
/*
 * peer_threads.c - no pool at all: a new pthread per task. The reference
 * row of the sizing scenarios (burst): the thread-creation floor, what a
 * burst costs when every task gets a thread of its own.
 *
 * Design notes
 *   submit starts a joinable thread with default attributes (as libtpe
 *   starts its workers: default stack size, 8 MiB on glibc) that runs the
 *   one task and exits; destroy joins every thread started. There is no
 *   queue and no bound: a task never waits for a thread, so the makespan of
 *   a burst is the time to create its threads plus one task. core and
 *   capacity are ignored; max is recorded and checked for sanity (core <=
 *   max), not enforced (the burst never has more than max tasks in flight).
 *   Only the sizing scenarios use it: create is NULL.
 *
 *   A floor for a thread per task, not for every pool: when creating the
 *   threads takes longer than a task, the first threads exit (glibc
 *   madvises each stack away) while later ones are still being created,
 *   and a pool can instead hand the last tasks of the burst to threads
 *   whose first task has ended (libtpe's scale-first does). Such a pool's
 *   makespan can go below this one.
 *
 *   The lock serializes submitters across pthread_create and the growth of
 *   jobs[], so a failed create leaves no hole in jobs[]. The burst
 *   submits from one thread, where the lock is never contended. The task
 *   threads never take it.
 *
 *   Legend: L = pool->lock, I = set at create, read-only after.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "peer.h"

/* One per task, allocated by the submitter and freed at destroy: the task
 * thread itself never calls malloc or free (a first malloc in a new thread
 * sets up its tcache and may create an arena, which is not thread creation
 * and which libtpe's workers do not pay either). */
struct job {
	pthread_t thread;
	peer_fn fn;
	void *arg;
};

struct tpool {
	pthread_mutex_t lock;
	struct job **jobs;    /* L: every thread started, joined at destroy */
	size_t njobs;         /* L */
	size_t cap;           /* L: slots in jobs[] */
	int max;              /* I: the max asked for (not enforced) */
};

static void *
run(void *p)
{
	struct job *j = p;

	j->fn(j->arg);
	return NULL;
}

static int
th_create_sized(void **out, int core, int max, int capacity)
{
	struct tpool *pool;

	(void)capacity;
	if (core < 0 || max < 1 || core > max)
		return EINVAL;
	pool = calloc(1, sizeof(*pool));
	if (pool == NULL)
		return ENOMEM;
	pool->max = max;
	pool->cap = (size_t)max;
	pool->jobs = calloc(pool->cap, sizeof(*pool->jobs));
	if (pool->jobs == NULL) {
		free(pool);
		return ENOMEM;
	}
	pthread_mutex_init(&pool->lock, NULL);
	*out = pool;
	return 0;
}

static int
th_submit(void *p, peer_fn fn, void *arg)
{
	struct tpool *pool = p;
	struct job *j, **grown;
	int rc = 0;

	j = malloc(sizeof(*j));
	if (j == NULL)
		return ENOMEM;
	j->fn = fn;
	j->arg = arg;
	pthread_mutex_lock(&pool->lock);
	if (pool->njobs == pool->cap) {
		grown = realloc(pool->jobs, 2 * pool->cap * sizeof(*grown));
		if (grown == NULL)
			rc = ENOMEM;
		else {
			pool->jobs = grown;
			pool->cap *= 2;
		}
	}
	if (rc == 0)
		rc = pthread_create(&j->thread, NULL, run, j);
	if (rc == 0)
		pool->jobs[pool->njobs++] = j;
	pthread_mutex_unlock(&pool->lock);
	if (rc != 0)
		free(j);
	return rc;
}

static int
th_destroy(void *p)
{
	struct tpool *pool = p;
	size_t i;
	int rc = 0, r;

	for (i = 0; i < pool->njobs; i++) {
		r = pthread_join(pool->jobs[i]->thread, NULL);
		if (r != 0 && rc == 0)
			rc = r;
		free(pool->jobs[i]);
	}
	pthread_mutex_destroy(&pool->lock);
	free(pool->jobs);
	free(pool);
	return rc;
}

const struct peer tpe_bench_peer_threads = {
	.name = "threads",
	.what = "a new pthread per task, no pool: the thread-creation floor "
	    "(sizing scenarios only)",
	.create = NULL,
	.submit = th_submit,
	.submitter_done = NULL,
	.wait_all = NULL,
	.destroy = th_destroy,
	.create_sized = th_create_sized,
};
