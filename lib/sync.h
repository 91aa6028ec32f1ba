/* SPDX-License-Identifier: MIT */
/*
 * sync.h - thin pthread wrappers: calls that cannot fail in a correct program
 * abort with a message naming the call; timed waits on CLOCK_MONOTONIC.
 */
#ifndef TPE_SYNC_H
#define TPE_SYNC_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#define TPE__NS_PER_S INT64_C(1000000000)

/* Aborts with "libtpe: <what>: <strerror(err)>"; only for broken invariants. */
void tpe__panic(const char *what, int err) __attribute__((noreturn));

void tpe__mutex_init(pthread_mutex_t *m);
void tpe__mutex_destroy(pthread_mutex_t *m);
void tpe__mutex_lock(pthread_mutex_t *m);
void tpe__mutex_unlock(pthread_mutex_t *m);

/* A condition variable that times its waits on CLOCK_MONOTONIC. */
void tpe__cond_init(pthread_cond_t *c);
void tpe__cond_destroy(pthread_cond_t *c);
void tpe__cond_signal(pthread_cond_t *c);
void tpe__cond_broadcast(pthread_cond_t *c);

/*
 * Waits on c until woken or until the absolute monotonic time `deadline_ns`
 * (negative: no deadline). Returns 0 when woken (possibly spuriously) or
 * ETIMEDOUT once the deadline has passed.
 */
int tpe__cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m,
    int64_t deadline_ns);

int64_t tpe__now_ns(void);

/*
 * The absolute deadline for a relative timeout: negative stays negative
 * (forever); overflow saturates at INT64_MAX.
 */
int64_t tpe__deadline(int64_t timeout_ns);

#endif /* TPE_SYNC_H */
