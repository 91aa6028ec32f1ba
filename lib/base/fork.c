/* SPDX-License-Identifier: MIT */
/* fork.c - the fork() handlers and their registry (fork.h). */
#include <pthread.h>

#include "base/fork.h"
#include "base/sync.h"

/* Initialised with the fork handlers, before its first use, so that a debug
 * build makes it error-checking like every other lock. */
static struct tpe__mutex registry_lock;
unsigned tpe__fork_generation; /* A: bumped in every child of fork() */
static struct tpe__fork_entry *registry_head; /* R */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void
prepare(void)
{
	struct tpe__fork_entry *p;

	tpe__mutex_lock(&registry_lock);
	for (p = registry_head; p != NULL; p = p->next)
		tpe__mutex_lock(p->lock);
}

static void
parent(void)
{
	struct tpe__fork_entry *p;

	for (p = registry_head; p != NULL; p = p->next)
		tpe__mutex_unlock(p->lock);
	tpe__mutex_unlock(&registry_lock);
}

static void
child(void)
{
	struct tpe__fork_entry *p;

	/* Threads that waited in the parent are still counted by the copied
	 * mutexes and condition variables: initialise them afresh instead of
	 * unlocking (glibc's destroy would otherwise report EBUSY). */
	__atomic_add_fetch(&tpe__fork_generation, 1, __ATOMIC_RELAXED);
	for (p = registry_head; p != NULL; p = p->next)
		p->child(p->ctx);
	tpe__mutex_init_ranked(&registry_lock, TPE__RANK_FORK);
	tpe__mutex_forget_held();
}

static void
install_handlers(void)
{
	int rc;

	tpe__mutex_init_ranked(&registry_lock, TPE__RANK_FORK);
	rc = pthread_atfork(prepare, parent, child);
	if (rc != 0)
		tpe__panic("pthread_atfork", rc);
}

void
tpe__fork_register(struct tpe__fork_entry *e)
{
	pthread_once(&atfork_once, install_handlers);
	tpe__mutex_lock(&registry_lock);
	e->prev = NULL;
	e->next = registry_head;
	if (registry_head != NULL)
		registry_head->prev = e;
	registry_head = e;
	tpe__mutex_unlock(&registry_lock);
}

void
tpe__fork_unregister(struct tpe__fork_entry *e)
{
	tpe__mutex_lock(&registry_lock);
	if (e->prev != NULL)
		e->prev->next = e->next;
	else
		registry_head = e->next;
	if (e->next != NULL)
		e->next->prev = e->prev;
	tpe__mutex_unlock(&registry_lock);
}
