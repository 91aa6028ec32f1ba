/* SPDX-License-Identifier: MIT */
/*
 * worker.h - worker threads: creation, the run loop, exit and joining.
 *
 * Where it sits: the pool's side of its threads; calls the engine's
 * worker_loop and the pool's lifecycle (pool.h), as the pool calls it.
 */
#ifndef TPE_WORKER_H
#define TPE_WORKER_H

#include <pthread.h>
#include <stdbool.h>

#include "pool/pool.h"

struct tpe__worker {
	pthread_t thread;           /* L: set by the creator once created */
	tpe_t *pool;                /* I */
	struct tpe__task *first;    /* the creator's task; owned by the worker once started */
	/* 32 bits, beside the flag: the record stays 56 bytes, a 64-byte
	 * malloc chunk (64 bytes made it an 80-byte one: 16 bytes more
	 * per idle thread). N wraps after 2^32 starts; a name has 15
	 * characters anyway. */
	unsigned int id;            /* I: the N of "prefix-N" */
	bool joinable;              /* L: thread is set; a reap may join it */
	struct tpe__metrics_worker *mw; /* I: its metrics block, or NULL */
	struct tpe__worker *prev, *next; /* L: on pool->live or pool->exited */
};

/* tpe__worker_start_locked: pool.h (the engines start workers too). */

/* Joins and frees every exited worker. pool->lock not held. */
void tpe__worker_reap(tpe_t *pool);

/* In the child of fork(): frees every worker record without joining. */
void tpe__worker_forget_all_locked(tpe_t *pool);

#endif /* TPE_WORKER_H */
