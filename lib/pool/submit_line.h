/* SPDX-License-Identifier: MIT */
/*
 * submit_line.h - the line of blocking submitters of a pool, oldest first:
 * a FIFO of records on the waiting threads' stacks (the blocking submit
 * itself: engine/locked_wait.c). All of it under the pool's lock (L),
 * which the functions take as an argument only to check it is held.
 *
 * Where it sits: lib/pool, under the pool and the locked engine; it takes
 * the line and the lock to check, never the pool.
 */
#ifndef TPE_SUBMIT_LINE_H
#define TPE_SUBMIT_LINE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/sync.h"

struct tpe__submit_waiter {
	struct tpe__submit_waiter *next; /* L: the next younger waiter */
	pthread_cond_t cond;             /* W: signalled under L; its thread
					  * waits on it with L */
	bool worker;                     /* I: the thread is a worker of
					  * the pool (EDEADLK) */
};

struct tpe__submit_line {
	struct tpe__submit_waiter *head; /* L: the oldest, the only one that tries */
	struct tpe__submit_waiter *tail; /* L: the newest (NULL when empty) */
	size_t waiting;                  /* L: records in the line */
	size_t workers;                  /* L: of them, workers of the pool */
};

/* Appends w (the youngest). L held. */
void tpe__submit_line_join_locked(struct tpe__submit_line *line,
    struct tpe__submit_waiter *w, struct tpe__mutex *lock);
/* Takes w out, wherever it is; when it was the head, the next one becomes
 * the head and is woken (room it was woken for may be left over). */
void tpe__submit_line_leave_locked(struct tpe__submit_line *line,
    struct tpe__submit_waiter *w, struct tpe__mutex *lock);

/* Wakes the oldest waiter, if any. L held. */
static inline void
tpe__submit_line_wake_head_locked(struct tpe__submit_line *line,
    struct tpe__mutex *lock)
{
	TPE__ASSERT_HELD(lock);
	if (line->head != NULL)
		tpe__cond_signal(&line->head->cond);
}

/* Wakes every waiter. L held. */
void tpe__submit_line_wake_all_locked(struct tpe__submit_line *line,
    struct tpe__mutex *lock);

#endif /* TPE_SUBMIT_LINE_H */
