/* SPDX-License-Identifier: MIT */
/*
 * worker.h - worker threads: creation, the run loop, exit and joining.
 */
#ifndef TPE_WORKER_H
#define TPE_WORKER_H

#include <pthread.h>
#include <stdbool.h>

#include "pool/pool.h"

struct tpe__worker {
	pthread_t thread;           /* L: set by the creator once created */
	bool joinable;              /* L: thread is set; a reap may join it */
	tpe_t *pool;                /* I */
	struct tpe__task *first;    /* the creator's task; owned by the worker once started */
	unsigned long id;           /* I: the N of "prefix-N" */
	struct tpe__worker *prev, *next; /* L: on pool->live or pool->exited */
};

/*
 * Starts a worker with `first` as its first task (may be NULL). Called and
 * returns with pool->lock held, but drops it while the thread is created.
 * Reserves the slot first (wc, nthreads, active when first != NULL), so
 * concurrent callers never overshoot a bound; undoes it on failure.
 * Returns 0, ENOMEM (the worker record), or EAGAIN for any failure of
 * pthread_create. On failure the caller still owns `first`.
 */
int tpe__worker_start_locked(tpe_t *pool, struct tpe__task *first);

/* Joins and frees every exited worker. pool->lock not held. */
void tpe__worker_reap(tpe_t *pool);

/* In the child of fork(): frees every worker record without joining. */
void tpe__worker_forget_all_locked(tpe_t *pool);

#endif /* TPE_WORKER_H */
