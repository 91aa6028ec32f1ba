/* SPDX-License-Identifier: MIT */
/*
 * node_cache.c - task node allocation: a per-thread cache that a pool's workers
 * refill through the pool's return stack, so that a steady stream of tasks
 * costs no malloc, no free and no lock.
 *
 * Design notes
 * ------------
 * Nodes are plain malloc'd struct tpe__task blocks, interchangeable between
 * pools. A worker that finished a task pushes its node (or a batch's
 * nodes at once, tpe__node_put_chain) onto the pool's return stack (a
 * Treiber stack, CAS, any number of workers at once) unless the stack
 * already holds about RETURN_MAX nodes, when it frees them. A
 * submitting thread takes nodes from its own cache (thread-local, no
 * atomics); when that is empty it takes the pool's whole return stack with
 * one exchange into its cache, and only when that was empty too it calls
 * malloc. Taking the stack whole means no single-node pop, so there is no
 * ABA problem. The push is a release CAS and the take an acquire exchange:
 * the node's last use by the worker happens-before its reuse.
 *
 * `count` is a hint for the bound only: the taker resets it after its
 * exchange, so pushes in between are not counted and the stack can exceed
 * RETURN_MAX by those few. A pool may set a larger bound (`max`): near the
 * bound, every node the submitter takes in excess of what comes back is
 * a malloc and every one that comes back in excess is a free on a worker,
 * so a pool that must not free across threads in its steady state (the
 * per-worker kind) keeps a bound far above its in-flight nodes.
 *
 * A thread's cache holds at most one take (about RETURN_MAX nodes) and is
 * freed by a thread-specific-data destructor when the thread exits. If no
 * key can be created, threads keep no cache (every node is malloc'd).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "pool/node_cache.h"
#include "base/sync.h"

#define RETURN_MAX 256

struct node_cache {
	struct tpe__task *head; /* this thread only */
	bool registered;        /* the destructor will free it */
};

static TPE__TLS struct node_cache cache;
static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static bool cache_key_ok; /* written once under cache_once */

static void
free_list(struct tpe__task *t)
{
	while (t != NULL) {
		struct tpe__task *next = t->next;

		free(t);
		t = next;
	}
}

static void
cache_free(void *arg)
{
	struct node_cache *c = arg;

	free_list(c->head);
	c->head = NULL;
	c->registered = false;
}

static void
cache_key_create(void)
{
	cache_key_ok = pthread_key_create(&cache_key, cache_free) == 0;
}

/* Whether this thread may keep a cache: its destructor is registered. */
static bool
cache_usable(void)
{
	if (cache.registered)
		return true;
	pthread_once(&cache_once, cache_key_create);
	if (!cache_key_ok || pthread_setspecific(cache_key, &cache) != 0)
		return false;
	cache.registered = true;
	return true;
}

void
tpe__node_cache_flush(void)
{
	free_list(cache.head);
	cache.head = NULL;
}

struct tpe__task *
tpe__node_get(struct tpe__node_returns *r)
{
	struct tpe__task *t = cache.head;

	if (t == NULL &&
	    __atomic_load_n(&r->head, __ATOMIC_RELAXED) != NULL &&
	    cache_usable()) {
		/* Pairs with the push in tpe__node_put_chain. */
		t = tpe__task_stack_take_all(&r->head);
		__atomic_store_n(&r->count, 0, __ATOMIC_RELAXED);
	}
	if (t == NULL)
		return malloc(sizeof(*t));
	cache.head = t->next;
	return t;
}

void
tpe__node_put(struct tpe__node_returns *r, struct tpe__task *t)
{
	tpe__node_put_chain(r, t, t, 1);
}

void
tpe__node_put_chain(struct tpe__node_returns *r, struct tpe__task *first,
    struct tpe__task *last, size_t n)
{
	if (__atomic_load_n(&r->count, __ATOMIC_RELAXED) >=
	    (r->max != 0 ? r->max : RETURN_MAX)) {
		last->next = NULL;
		free_list(first);
		return;
	}
	/* Pairs with the take in tpe__node_get. */
	(void)tpe__task_stack_push_chain_mpsc(&r->head, first, last);
	__atomic_add_fetch(&r->count, n, __ATOMIC_RELAXED);
}

void
tpe__node_returns_free(struct tpe__node_returns *r)
{
	free_list(tpe__task_stack_take_all(&r->head));
	r->count = 0;
}
