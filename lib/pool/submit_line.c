/* SPDX-License-Identifier: MIT */
/* submit_line.c - the line of blocking submitters (submit_line.h). */
#include "pool/submit_line.h"

void
tpe__submit_line_wake_all_locked(struct tpe__submit_line *line,
    struct tpe__mutex *lock)
{
	struct tpe__submit_waiter *w;

	TPE__ASSERT_HELD(lock);
	for (w = line->head; w != NULL; w = w->next)
		tpe__cond_signal(&w->cond);
}

void
tpe__submit_line_join_locked(struct tpe__submit_line *line,
    struct tpe__submit_waiter *w, struct tpe__mutex *lock)
{
	TPE__ASSERT_HELD(lock);
	w->next = NULL;
	if (line->tail != NULL)
		line->tail->next = w;
	else
		line->head = w;
	line->tail = w;
	line->waiting++;
	if (w->worker)
		line->workers++;
}

void
tpe__submit_line_leave_locked(struct tpe__submit_line *line,
    struct tpe__submit_waiter *w, struct tpe__mutex *lock)
{
	struct tpe__submit_waiter **pp, *prev = NULL;

	TPE__ASSERT_HELD(lock);
	for (pp = &line->head; *pp != w; pp = &(*pp)->next) {
		TPE__ASSERT(*pp != NULL);
		prev = *pp;
	}
	*pp = w->next;
	if (line->tail == w)
		line->tail = prev;
	TPE__ASSERT(line->waiting > 0 && (!w->worker || line->workers > 0));
	line->waiting--;
	if (w->worker)
		line->workers--;
	if (prev == NULL)
		tpe__submit_line_wake_head_locked(line, lock);
}
