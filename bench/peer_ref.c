/* SPDX-License-Identifier: MIT */
/*
 * peer_ref.c - the near-limit reference of tpe-bench: how cheaply a task can
 * move from a submitter to a worker on this machine when nothing else
 * matters. Not a usable pool: its workers never sleep.
 *
 * Design notes
 *   Data path: one inbox per worker, because a single word that every
 *   submitter writes (a shared queue head, a shared counter) caps the whole
 *   pool at the rate one cache line can move between cores:
 *   - one Treiber stack per worker; a submitter pushes with one CAS to the
 *     worker its thread-local round-robin counter names;
 *   - a worker takes its whole stack with one exchange, reverses it and
 *     runs it oldest first; no ABA is possible, nodes only leave a stack all
 *     at once;
 *   - task nodes are preallocated per submitting thread in chunks and
 *     recycled: after a batch, the worker pushes each run of nodes that came
 *     from the same submitter back onto that submitter's "returned" stack
 *     with one CAS, and the submitter takes them all with one exchange when
 *     its private free list is empty. So no malloc or free per task.
 *   - workers spin and never sleep: after an empty poll a worker calls
 *     sched_yield, so that it does not hold a CPU that a submitter is
 *     waiting for (this machine has as many cores as workers; yielding
 *     after every empty poll measured better here than pausing 64 times
 *     between yields, for throughput and far better for latency);
 *   - a worker looks at its stack before it takes it (an exchange on an
 *     empty stack would pull the line from the submitter for nothing), and
 *     after a batch of at most REF_SMALL tasks it lets its stack fill for
 *     REF_FILL_NS before the next take: detaching after every task or two
 *     pulls the line on nearly every push (the same two tricks the
 *     per-worker pool uses; without them the per-worker pool ran faster
 *     than this "floor", which then bounded nothing).
 *   Shutdown: destroy sets stop; a worker exits when it finds its stack
 *   empty after having seen stop; tpe-bench only destroys an idle pool.
 *
 *   Legend: A = atomic, O = owner thread only, I = set at create.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "peer.h"

#define CHUNK_NODES 4096
#define CACHE_LINE 64
#define REF_SMALL 4
#define REF_FILL_NS 1000

#if defined(__x86_64__) || defined(__i386__)
#define ref_pause() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define ref_pause() __asm__ __volatile__("yield" ::: "memory")
#else
#define ref_pause() __asm__ __volatile__("" ::: "memory")
#endif

struct rsub;

struct rnode {
	struct rnode *next;
	peer_fn fn;
	void *arg;
	struct rsub *owner;
};

struct rchunk {
	struct rchunk *next;
	struct rnode nodes[CHUNK_NODES];
};

/* One per (submitting thread, pool). */
struct rsub {
	_Alignas(CACHE_LINE) _Atomic(struct rnode *) returned; /* A */
	_Alignas(CACHE_LINE) struct rnode *free;  /* O */
	unsigned rr;                              /* O: next worker */
	struct rchunk *chunks;                    /* O, then destroy */
	struct rsub *next_sub;                    /* pool->subs_lock */
};

struct rworker {
	_Alignas(CACHE_LINE) _Atomic(struct rnode *) head; /* A: the stack */
	struct rpool *pool;                                /* I */
	pthread_t thread;                                  /* I */
};

struct rpool {
	struct rworker *workers; /* I */
	unsigned n;              /* I */
	unsigned long gen;       /* I: tells this pool's thread-locals apart */
	_Atomic int stop;        /* A */
	pthread_mutex_t subs_lock;
	struct rsub *subs;       /* subs_lock */
	unsigned nsubs;          /* subs_lock */
};

static _Atomic unsigned long pool_gen;
static __thread struct rsub *tl_sub;
static __thread unsigned long tl_gen;

static struct rsub *
my_sub(struct rpool *pool)
{
	struct rsub *s;

	if (tl_gen == pool->gen)
		return tl_sub;
	if (posix_memalign((void **)&s, CACHE_LINE, sizeof(*s)) != 0)
		return NULL;
	atomic_init(&s->returned, NULL);
	s->free = NULL;
	s->chunks = NULL;
	pthread_mutex_lock(&pool->subs_lock);
	s->rr = pool->nsubs++ % pool->n; /* spread the starting points */
	s->next_sub = pool->subs;
	pool->subs = s;
	pthread_mutex_unlock(&pool->subs_lock);
	tl_sub = s;
	tl_gen = pool->gen;
	return s;
}

static struct rnode *
grow(struct rsub *s)
{
	struct rchunk *c = malloc(sizeof(*c));
	int i;

	if (c == NULL)
		return NULL;
	c->next = s->chunks;
	s->chunks = c;
	for (i = 0; i < CHUNK_NODES - 1; i++)
		c->nodes[i].next = &c->nodes[i + 1];
	c->nodes[CHUNK_NODES - 1].next = NULL;
	return &c->nodes[0];
}

static int
ref_submit(void *p, peer_fn fn, void *arg)
{
	struct rpool *pool = p;
	struct rsub *s = my_sub(pool);
	struct rworker *w;
	struct rnode *n, *old;

	if (s == NULL)
		return ENOMEM;
	n = s->free;
	if (n == NULL) {
		/* Pairs with the release CAS in give_back(). */
		n = atomic_exchange_explicit(&s->returned, NULL,
		    memory_order_acquire);
		if (n == NULL && (n = grow(s)) == NULL)
			return ENOMEM;
	}
	s->free = n->next;
	n->fn = fn;
	n->arg = arg;
	n->owner = s;
	w = &pool->workers[s->rr];
	if (++s->rr == pool->n)
		s->rr = 0;
	old = atomic_load_explicit(&w->head, memory_order_relaxed);
	do
		n->next = old;
	/* Release pairs with the acquire exchange in worker(). */
	while (!atomic_compare_exchange_weak_explicit(&w->head, &old, n,
	    memory_order_release, memory_order_relaxed));
	return 0;
}

/* Push the segment first..last back to its submitter's free nodes. */
static void
give_back(struct rnode *first, struct rnode *last)
{
	struct rsub *s = first->owner;
	struct rnode *old = atomic_load_explicit(&s->returned,
	    memory_order_relaxed);

	do
		last->next = old;
	/* Release pairs with the acquire exchange in ref_submit(). */
	while (!atomic_compare_exchange_weak_explicit(&s->returned, &old,
	    first, memory_order_release, memory_order_relaxed));
}

/* REF_FILL_NS of pause instructions (the clock read every 16). */
static void
fill_wait(void)
{
	struct timespec ts;
	long long end, now;
	int k;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	end = ts.tv_sec * 1000000000LL + ts.tv_nsec + REF_FILL_NS;
	do {
		for (k = 0; k < 16; k++)
			ref_pause();
		clock_gettime(CLOCK_MONOTONIC, &ts);
		now = ts.tv_sec * 1000000000LL + ts.tv_nsec;
	} while (now < end);
}

static void *
worker(void *p)
{
	struct rworker *w = p;
	struct rnode *h, *prev, *next, *n, *seg;
	bool small = false;
	size_t k;

	for (;;) {
		if (small)
			fill_wait();
		small = false;
		/* A look first: no exchange on an empty stack. */
		h = atomic_load_explicit(&w->head, memory_order_relaxed);
		/* Acquire pairs with the release CAS in ref_submit(). */
		if (h != NULL)
			h = atomic_exchange_explicit(&w->head, NULL,
			    memory_order_acquire);
		if (h == NULL) {
			/* Pairs with the store in ref_destroy(); the stack was
			 * empty after stop was seen, so it is drained. */
			if (atomic_load_explicit(&w->pool->stop,
			    memory_order_acquire) &&
			    atomic_load_explicit(&w->head,
			    memory_order_acquire) == NULL)
				return NULL;
			sched_yield(); /* spin, but let a submitter have the CPU */
			continue;
		}
		/* Reverse: oldest first. */
		prev = NULL;
		while (h != NULL) {
			next = h->next;
			h->next = prev;
			prev = h;
			h = next;
		}
		h = prev;
		k = 0;
		for (n = h; n != NULL; n = n->next, k++)
			n->fn(n->arg);
		small = k <= REF_SMALL;
		/* Hand the nodes back, one CAS per run of one submitter's. */
		seg = h;
		while (seg != NULL) {
			n = seg;
			while (n->next != NULL && n->next->owner == seg->owner)
				n = n->next;
			next = n->next;
			give_back(seg, n);
			seg = next;
		}
	}
}

static int
ref_destroy(void *p)
{
	struct rpool *pool = p;
	struct rsub *s;
	struct rchunk *c;
	unsigned i;

	atomic_store_explicit(&pool->stop, 1, memory_order_release);
	for (i = 0; i < pool->n; i++)
		if (pool->workers[i].pool != NULL)
			pthread_join(pool->workers[i].thread, NULL);
	while ((s = pool->subs) != NULL) {
		pool->subs = s->next_sub;
		while ((c = s->chunks) != NULL) {
			s->chunks = c->next;
			free(c);
		}
		free(s);
	}
	pthread_mutex_destroy(&pool->subs_lock);
	free(pool->workers);
	free(pool);
	return 0;
}

static int
ref_create(void **out, int nthreads)
{
	struct rpool *pool;
	unsigned i;
	int rc;

	if (nthreads < 1)
		return EINVAL;
	pool = calloc(1, sizeof(*pool));
	if (pool == NULL)
		return ENOMEM;
	if (posix_memalign((void **)&pool->workers, CACHE_LINE,
	    (size_t)nthreads * sizeof(struct rworker)) != 0) {
		free(pool);
		return ENOMEM;
	}
	pool->n = (unsigned)nthreads;
	pool->gen = atomic_fetch_add(&pool_gen, 1) + 1;
	pthread_mutex_init(&pool->subs_lock, NULL);
	for (i = 0; i < pool->n; i++) {
		atomic_init(&pool->workers[i].head, NULL);
		pool->workers[i].pool = NULL;
	}
	for (i = 0; i < pool->n; i++) {
		pool->workers[i].pool = pool;
		rc = pthread_create(&pool->workers[i].thread, NULL, worker,
		    &pool->workers[i]);
		if (rc != 0) {
			pool->workers[i].pool = NULL;
			ref_destroy(pool);
			return rc;
		}
	}
	*out = pool;
	return 0;
}

const struct peer tpe_bench_peer_ref = {
	.name = "ref",
	.what = "near-limit reference: Treiber stack per worker, recycled "
	    "nodes, spinning workers",
	.create = ref_create,
	.submit = ref_submit,
	.submitter_done = NULL,
	.wait_all = NULL,
	.destroy = ref_destroy,
};
