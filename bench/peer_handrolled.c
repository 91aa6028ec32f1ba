/* SPDX-License-Identifier: MIT */
/*
 * peer_handrolled.c - the thread pool people write by hand: one mutex, one
 * condition variable, a linked queue of malloc'd nodes, a signal per submit.
 *
 * Design notes
 *   This is the baseline every other row of tpe-bench is divided by, so it is
 *   written the way it usually is, neither crippled nor tuned: submit
 *   allocates a node, appends it under the lock and signals; a worker takes
 *   the head under the lock, runs it outside the lock and frees the node.
 *   There is no wait-for-idle (most hand-rolled pools have none; tpe-bench
 *   counts completions itself). Shutdown drains the queue, then the workers
 *   exit and are joined.
 *
 *   Legend: L = pool->lock, I = set at create, read-only after.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "peer.h"

struct node {
	struct node *next;
	peer_fn fn;
	void *arg;
};

struct hpool {
	pthread_mutex_t lock;
	pthread_cond_t cond;  /* signalled per submit, broadcast at stop */
	struct node *head;    /* L */
	struct node *tail;    /* L */
	int stop;             /* L */
	int nthreads;         /* I: threads started */
	pthread_t *threads;   /* I */
};

static void *
worker(void *p)
{
	struct hpool *pool = p;
	struct node *n;

	pthread_mutex_lock(&pool->lock);
	for (;;) {
		while (pool->head == NULL && !pool->stop)
			pthread_cond_wait(&pool->cond, &pool->lock);
		n = pool->head;
		if (n == NULL)
			break; /* stopped and drained */
		pool->head = n->next;
		if (pool->head == NULL)
			pool->tail = NULL;
		pthread_mutex_unlock(&pool->lock);
		n->fn(n->arg);
		free(n);
		pthread_mutex_lock(&pool->lock);
	}
	pthread_mutex_unlock(&pool->lock);
	return NULL;
}

static int
hr_destroy(void *p)
{
	struct hpool *pool = p;
	int i;

	pthread_mutex_lock(&pool->lock);
	pool->stop = 1;
	pthread_cond_broadcast(&pool->cond);
	pthread_mutex_unlock(&pool->lock);
	for (i = 0; i < pool->nthreads; i++)
		pthread_join(pool->threads[i], NULL);
	pthread_cond_destroy(&pool->cond);
	pthread_mutex_destroy(&pool->lock);
	free(pool->threads);
	free(pool);
	return 0;
}

static int
hr_create(void **out, int nthreads)
{
	struct hpool *pool;
	int rc;

	if (nthreads < 1)
		return EINVAL;
	pool = calloc(1, sizeof(*pool));
	if (pool == NULL)
		return ENOMEM;
	pool->threads = calloc((size_t)nthreads, sizeof(pthread_t));
	if (pool->threads == NULL) {
		free(pool);
		return ENOMEM;
	}
	pthread_mutex_init(&pool->lock, NULL);
	pthread_cond_init(&pool->cond, NULL);
	for (; pool->nthreads < nthreads; pool->nthreads++) {
		rc = pthread_create(&pool->threads[pool->nthreads], NULL,
		    worker, pool);
		if (rc != 0) {
			hr_destroy(pool);
			return rc;
		}
	}
	*out = pool;
	return 0;
}

static int
hr_submit(void *p, peer_fn fn, void *arg)
{
	struct hpool *pool = p;
	struct node *n = malloc(sizeof(*n));

	if (n == NULL)
		return ENOMEM;
	n->next = NULL;
	n->fn = fn;
	n->arg = arg;
	pthread_mutex_lock(&pool->lock);
	if (pool->tail != NULL)
		pool->tail->next = n;
	else
		pool->head = n;
	pool->tail = n;
	pthread_cond_signal(&pool->cond);
	pthread_mutex_unlock(&pool->lock);
	return 0;
}

const struct peer tpe_bench_peer_handrolled = {
	.name = "hand-rolled",
	.what = "1 mutex + 1 condvar, malloc'd list nodes, signal per submit",
	.create = hr_create,
	.submit = hr_submit,
	.submitter_done = NULL,
	.wait_all = NULL,
	.destroy = hr_destroy,
};
