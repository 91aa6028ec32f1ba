/* SPDX-License-Identifier: MIT */
/*
 * node_cache.c - task node allocation: nodes carved in address order from
 * per-thread chunks, which come back whole through a pool's return stack
 * once every node in them has ended, so that a steady stream of tasks
 * costs no malloc, no free and no lock.
 *
 * Design notes
 * ------------
 * Why chunks. A task node is written by its submitter and then read by
 * the worker that runs it, very often on another core. A worker walks its
 * batch through the nodes' `next` links: each load depends on the one
 * before, so the walk runs at one memory latency per node unless the
 * hardware prefetcher has brought the nodes in already, and it does that
 * only for nodes that lie in address order. Nodes recycled one by one
 * through free lists (malloc's, or a per-pool stack of single nodes, as
 * this module did before) lose that order within a second of a busy
 * pool: the per-worker pool then ran at 90 to 130 ns a task in the
 * phases where this machine's cross-core latency rose to five times its
 * usual (a cache-line round trip of 330 ns against 65), against 22 ns
 * in the calm phases, and that was its bimodal figure. With nodes carved
 * in order from chunks (this file), a submitter's nodes lie in one stream
 * of ascending addresses, and the same pool ran at a median of 33 ns in
 * those phases and 15 in the calm ones (bench/README.md, "Node
 * order").
 *
 * A chunk is at most CHUNK_BYTES of memory aligned to CHUNK_BYTES: a
 * header and `nodes` nodes (CHUNK_NODES in a whole chunk). The chunk of a
 * node is its address rounded down, so a node needs no field for it. A
 * thread's first chunk is a small one (FIRST_NODES nodes, 664 bytes): a
 * thread that submits a few tasks holds well under a kilobyte, not 16
 * KiB; every later chunk it allocates is whole. A thread takes nodes from its current chunk
 * in order (a thread-local index, no atomics); when the chunk is used up it
 * takes another: from its spare list, else the pool's whole return stack
 * (one exchange) into its spare list, else posix_memalign.
 *
 * `pending` counts what still holds the chunk: every node handed out and
 * not yet ended, plus one for the thread that carves it (the hold). It
 * starts at `nodes` + 1: the nodes not yet handed out are counted
 * from the start, so it cannot reach zero while the thread still carves
 * (a node cannot end before it is handed out). The thread gives up its
 * hold when the chunk is used up (or the thread exits, with what it did
 * not hand out). Whoever brings pending to zero owns the chunk: it pushes
 * it onto the return stack of the pool whose node it ended (base/stack.h's
 * take-all stack), or frees it when that stack holds its bound already, or
 * when there is no pool (thread exit, a forked child's leftovers). The
 * decrement is acq_rel: every thread's last use of its nodes
 * happens-before the recycling; the stack's push and take are seq_cst,
 * so the recycler's view happens-before the reuse. Chunks leave the stack
 * only all at once (the exchange): no single pop, no ABA problem.
 *
 * On a weakly ordered processor (ARM, POWER, RISC-V) the chain of
 * happens-before is: a worker's last reads of a node (it ran the task),
 * then its release half of the decrement; the acquire half of the
 * decrement that reaches zero (the RMWs on `pending` form one order, and
 * each release is seen by every later RMW); that thread's push (a
 * release); the carver's exchange (an acquire); its writes of a new node
 * into the same memory. No link of it is a plain access that x86 alone
 * would keep in order. `count` is relaxed: a bound on the stack's length,
 * read as a guess, which may let a chunk more or less be kept; it
 * guards no data. A node's own contents reach its worker through the
 * queue or stack that carries the task (its release and acquire), not
 * through this file.
 *
 * Ending a batch (tpe__node_put_chain) walks its nodes (just run, in
 * cache) and subtracts per run of nodes of the same chunk, through a few
 * entries of counts kept on the stack: one atomic per chunk per batch,
 * not per node. A batch from two submitters holds interleaved runs of
 * two chunks.
 *
 * `count` is a hint for the bound only, in chunks: the taker resets it
 * after its exchange. `max` is in nodes (node_cache.h), rounded up to
 * whole chunks.
 *
 * A thread's current chunk and spare list are released by a
 * thread-specific-data destructor when the thread exits. If no key can be
 * created, a thread keeps no chunk: each node then comes from a chunk of
 * one node, held by nothing but that node (a fallback: an aligned
 * allocation per task).
 * After fork, the child's copies of other threads' chunks are never
 * released: their threads are gone (tpe(7), "Fork").
 *
 * Memory: a chunk is allocated CHUNK_SLACK short of its size, so that the
 * allocator's own header of the next aligned block fits in the slack
 * and consecutive chunks pack at CHUNK_BYTES; CHUNK_NODES (339) nodes
 * of 48 bytes in 16 KiB is 48.3 bytes a node, and a thread that submitted
 * holds one chunk: 792 bytes until it has taken 16 nodes, then 16 KiB.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "pool/node_cache.h"
#include "base/atomic.h"
#include "base/stack.h"
#include "base/sync.h"

#define RETURN_MAX 256
#define CHUNK_BYTES ((size_t)TPE__NODE_CHUNK_BYTES)
#define CHUNK_SLACK ((size_t)TPE__CACHE_LINE)
#define FIRST_NODES ((size_t)16)

struct tpe__node_chunk {
	size_t pending;                /* A: nodes out + the hold */
	struct tpe__node_chunk *next;  /* a spare list or a return stack */
	size_t nodes;                  /* how many it holds; set when it is
					* allocated, read by its carver */
	/* The nodes, right after: the header shares its cache line with
	 * the first node or two, which the workers' decrements of pending
	 * pull from the submitter once a chunk, not once a node. Aligning
	 * them to the next line would cost 40 bytes a chunk, and 2.5 bytes
	 * a thread in a small program (make bench's heap per idle thread). */
	struct tpe__task node[];
};

/* A pool's return stack of whole chunks (base/stack.h). */
TPE__STACK_DEFINE(chunk_stack, struct tpe__node_chunk, next)

/* The nodes of a whole chunk: it is allocated CHUNK_SLACK short. */
#define CHUNK_NODES ((CHUNK_BYTES - CHUNK_SLACK - \
	sizeof(struct tpe__node_chunk)) / sizeof(struct tpe__task))

size_t
tpe__node_chunk_nodes(void)
{
	return CHUNK_NODES;
}

struct node_cache {
	struct tpe__node_chunk *cur;   /* carved here; NULL: none */
	size_t next;                   /* index of cur's next node */
	size_t nodes;                  /* cur's nodes: a copy, since the
					* header's line is the workers' */
	bool grown;                    /* allocated its first chunk */
	struct tpe__node_chunk *spare; /* whole chunks, not yet carved */
	bool registered;               /* the destructor will run */
};

static TPE__TLS struct node_cache cache;
static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static bool cache_key_ok; /* written once under cache_once */

static struct tpe__node_chunk *
chunk_of(const struct tpe__task *t)
{
	return (struct tpe__node_chunk *)(void *)((uintptr_t)t &
	    ~(uintptr_t)(CHUNK_BYTES - 1));
}

size_t
tpe__node_chunk_nodes_of(const struct tpe__task *t)
{
	return chunk_of(t)->nodes;
}

static size_t
bound_chunks(const struct tpe__node_returns *r)
{
	size_t max = r->max != 0 ? r->max : RETURN_MAX;

	return (max + CHUNK_NODES - 1) / CHUNK_NODES;
}

/* A chunk nothing holds: onto r's return stack, or freed (r NULL, or
 * the stack holds its bound). */
static void
recycle(struct tpe__node_returns *r, struct tpe__node_chunk *c)
{
	if (r == NULL ||
	    __atomic_load_n(&r->count, __ATOMIC_RELAXED) >= bound_chunks(r)) {
		free(c);
		return;
	}
	/* The push pairs with the take in take_chunk (base/stack.h). */
	(void)chunk_stack_push_mpsc(&r->head, c);
	__atomic_add_fetch(&r->count, 1, __ATOMIC_RELAXED);
}

/* Drops k holds of c; the last one recycles it. */
static void
drop(struct tpe__node_returns *r, struct tpe__node_chunk *c, size_t k)
{
	/* acq_rel: every holder's use of its nodes happens-before the
	 * recycling (Design notes). */
	if (__atomic_sub_fetch(&c->pending, k, __ATOMIC_ACQ_REL) == 0)
		recycle(r, c);
}

/* The thread gives up its current chunk, with the nodes it did not hand
 * out (freed if nothing else holds it), and frees its spare chunks. */
static void
release_all(struct node_cache *c)
{
	struct tpe__node_chunk *s;

	if (c->cur != NULL)
		drop(NULL, c->cur, c->nodes - c->next + 1);
	c->cur = NULL;
	while ((s = c->spare) != NULL) {
		c->spare = s->next;
		free(s);
	}
}

static void
cache_free(void *arg)
{
	struct node_cache *c = arg;

	release_all(c);
	c->registered = false;
}

static void
cache_key_create(void)
{
	cache_key_ok = pthread_key_create(&cache_key, cache_free) == 0;
}

/* Whether this thread may keep a chunk: its destructor is registered. */
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
	release_all(&cache);
}

/*
 * A chunk to carve: a spare, r's return stack, or a new one (a thread
 * that keeps no chunk gets a new one of one node).
 */
static struct tpe__node_chunk *
take_chunk(struct tpe__node_returns *r, bool keep)
{
	struct tpe__node_chunk *c = cache.spare;
	size_t nodes;
	void *p;

	if (c == NULL && keep &&
	    (c = chunk_stack_take_all(&r->head)) != NULL)
		__atomic_store_n(&r->count, 0, __ATOMIC_RELAXED);
	if (c != NULL) {
		cache.spare = c->next;
		return c;
	}
	nodes = !keep ? 1 : cache.grown ? CHUNK_NODES : FIRST_NODES;
	if (posix_memalign(&p, CHUNK_BYTES, sizeof(*c) +
	    nodes * sizeof(struct tpe__task)) != 0)
		return NULL;
	cache.grown = keep;
	c = p;
	c->nodes = nodes;
	return c;
}

struct tpe__task *
tpe__node_get(struct tpe__node_returns *r)
{
	struct tpe__node_chunk *c = cache.cur;
	bool keep;

	if (c != NULL && cache.next < cache.nodes)
		return &c->node[cache.next++];
	keep = cache_usable();
	c = take_chunk(r, keep);
	if (c == NULL)
		return NULL;
	/* The old chunk is used up: its hold goes; the new one is held. */
	if (cache.cur != NULL)
		drop(r, cache.cur, 1);
	cache.cur = NULL;
	if (!keep) {
		/* No destructor would release a hold: a chunk per node. */
		c->pending = 1;
		return &c->node[0];
	}
	c->pending = c->nodes + 1;
	cache.cur = c;
	cache.nodes = c->nodes;
	cache.next = 1;
	return &c->node[0];
}

void
tpe__node_put(struct tpe__node_returns *r, struct tpe__task *t)
{
	drop(r, chunk_of(t), 1);
}

/* Counts per chunk while a batch is walked: a few entries, flushed when
 * a new chunk finds them full and at the end. */
#define PUT_WAYS 4

void
tpe__node_put_chain(struct tpe__node_returns *r, struct tpe__task *first,
    size_t n)
{
	struct tpe__node_chunk *way[PUT_WAYS] = { NULL };
	size_t cnt[PUT_WAYS] = { 0 }, i, k, victim = 0;
	struct tpe__task *t = first;

	for (i = 0; i < n; i++, t = t->next) {
		struct tpe__node_chunk *c = chunk_of(t);

		for (k = 0; k < PUT_WAYS && way[k] != c && way[k] != NULL;
		    k++)
			;
		if (k == PUT_WAYS) {
			/* Full: the oldest entry goes. */
			k = victim;
			victim = (victim + 1) % PUT_WAYS;
			drop(r, way[k], cnt[k]);
			way[k] = NULL;
		}
		if (way[k] == NULL) {
			way[k] = c;
			cnt[k] = 0;
		}
		cnt[k]++;
	}
	for (k = 0; k < PUT_WAYS && way[k] != NULL; k++)
		drop(r, way[k], cnt[k]);
}

void
tpe__node_returns_free(struct tpe__node_returns *r)
{
	struct tpe__node_chunk *c = chunk_stack_take_all(&r->head);

	while (c != NULL) {
		struct tpe__node_chunk *next = c->next;

		free(c);
		c = next;
	}
	r->count = 0;
}
