/* SPDX-License-Identifier: MIT */
/*
 * registry.c - every live pool on one list, for the fork() handlers.
 *
 * Design notes
 * ------------
 * R: registry_lock guards the list (pool->reg_prev/reg_next, head).
 * Lock order: registry_lock -> pool->lock. prepare() takes the registry lock
 * and then every pool's lock, so no pool is halfway through a change when
 * fork() copies the address space; parent() releases them; child() runs in
 * the only thread of the child, which holds all of them: it marks every
 * pool terminated (tpe__pool_atfork_child) and initialises the locks and
 * condition variables afresh (threads that waited on them in the parent
 * do not exist here), and bumps tpe__fork_generation so that futures made
 * before the fork are freed without destroying their copied primitives.
 * pool->lock is never held while user code runs, so prepare() cannot wait
 * on a task.
 */
#include <pthread.h>

#include "pool/registry.h"
#include "pool/task.h"
#include "base/sync.h"

/* Initialised with the fork handlers, before its first use, so that a debug
 * build makes it error-checking like every other lock. */
static struct tpe__mutex registry_lock;
unsigned tpe__fork_generation; /* A: bumped in every child of fork() */
static tpe_t *registry_head; /* R */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void
prepare(void)
{
	tpe_t *p;

	tpe__mutex_lock(&registry_lock);
	for (p = registry_head; p != NULL; p = p->reg_next)
		tpe__mutex_lock(&p->lock);
}

static void
parent(void)
{
	tpe_t *p;

	for (p = registry_head; p != NULL; p = p->reg_next)
		tpe__mutex_unlock(&p->lock);
	tpe__mutex_unlock(&registry_lock);
}

static void
child(void)
{
	tpe_t *p;

	/* Threads that waited in the parent are still counted by the copied
	 * mutexes and condition variables: initialise them afresh instead of
	 * unlocking (glibc's destroy would otherwise report EBUSY). */
	__atomic_add_fetch(&tpe__fork_generation, 1, __ATOMIC_RELAXED);
	for (p = registry_head; p != NULL; p = p->reg_next)
		tpe__pool_atfork_child(p);
	tpe__task_atfork_child();
	tpe__mutex_init(&registry_lock);
}

static void
install_handlers(void)
{
	int rc;

	tpe__mutex_init(&registry_lock);
	rc = pthread_atfork(prepare, parent, child);
	if (rc != 0)
		tpe__panic("pthread_atfork", rc);
}

void
tpe__registry_add(tpe_t *pool)
{
	pthread_once(&atfork_once, install_handlers);
	tpe__mutex_lock(&registry_lock);
	pool->reg_prev = NULL;
	pool->reg_next = registry_head;
	if (registry_head != NULL)
		registry_head->reg_prev = pool;
	registry_head = pool;
	tpe__mutex_unlock(&registry_lock);
}

void
tpe__registry_remove(tpe_t *pool)
{
	tpe__mutex_lock(&registry_lock);
	if (pool->reg_prev != NULL)
		pool->reg_prev->reg_next = pool->reg_next;
	else
		registry_head = pool->reg_next;
	if (pool->reg_next != NULL)
		pool->reg_next->reg_prev = pool->reg_prev;
	tpe__mutex_unlock(&registry_lock);
}
