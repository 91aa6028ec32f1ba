/* SPDX-License-Identifier: MIT */
/*
 * thpool.h - the C-Thread-Pool API (Pithikos' thpool.h) on libtpe.
 *
 * A program written for C-Thread-Pool builds unchanged against this header:
 * `#include "thpool.h"` with the flags of `pkg-config --cflags --libs
 * tpe-thpool`, which put the directory of this file on the include path and
 * link -ltpe. Each pool is a fixed libtpe pool (num_threads workers, an
 * unbounded FIFO queue). The calls behave as C-Thread-Pool documents them,
 * without its defects: pools share no state, pausing needs no signal,
 * thpool_init fails cleanly. tpe_thpool(3) describes the API and every
 * difference.
 *
 * This header is self-contained: it declares no tpe_ name. A program may
 * also include <tpe.h>, but nothing here gives access to the libtpe pool
 * behind a threadpool.
 */
#ifndef TPE_THPOOL_H
#define TPE_THPOOL_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && __GNUC__ >= 4
#define TPE_THPOOL_API __attribute__((visibility("default")))
#else
#define TPE_THPOOL_API
#endif

/* An opaque pool handle; the struct tag is C-Thread-Pool's. */
typedef struct thpool_ *threadpool;

/* Starts a pool of num_threads threads (> 0); NULL on any failure, with
 * nothing started or allocated left behind. */
TPE_THPOOL_API threadpool thpool_init(int num_threads);

/* Queues function_p(arg_p); 0 on success, -1 on failure (NULL pool or
 * function, no memory). The pool never frees arg_p. */
TPE_THPOOL_API int thpool_add_work(threadpool, void (*function_p)(void *),
    void *arg_p);

/* Waits until the queue is empty and no job is running. */
TPE_THPOOL_API void thpool_wait(threadpool);

/* This pool's threads start no new job until thpool_resume; running jobs
 * finish, jobs can still be added. Other pools are not affected. */
TPE_THPOOL_API void thpool_pause(threadpool);
TPE_THPOOL_API void thpool_resume(threadpool);

/* Waits for the running jobs, drops the queued ones (they never run),
 * joins the threads and frees the pool. */
TPE_THPOOL_API void thpool_destroy(threadpool);

/* The number of threads running a job now. */
TPE_THPOOL_API int thpool_num_threads_working(threadpool);

#ifdef __cplusplus
}
#endif

#endif /* TPE_THPOOL_H */
