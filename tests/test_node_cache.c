/* SPDX-License-Identifier: MIT */
/*
 * test_node_cache.c - task node allocation (lib/pool/node_cache.c,
 * white-box): nodes carved in address order from a thread's chunk (its
 * first one small), and
 * again in order after they came back in any order; a chunk held until its
 * last node ends and then recycled whole (or freed past the bound, or
 * when no pool takes it); a batch spread over more chunks than the walk
 * keeps counts for; a thread's exit before and after its nodes end; a
 * failed allocation; and threads that end one producer's nodes in
 * batches while it carves (every chunk comes back exactly once).
 * posix_memalign and free are wrapped to count the chunks alive.
 */
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>

#include "helpers.h"

#include "pool/node_cache.h"

/* ---- counting chunks (--wrap=posix_memalign,--wrap=free) -------------- */

int __real_posix_memalign(void **p, size_t align, size_t size);
int __wrap_posix_memalign(void **p, size_t align, size_t size);
void __real_free(void *p);
void __wrap_free(void *p);

static long chunks_made;   /* chunk-aligned blocks allocated */
static long chunks_alive;  /* and not yet freed */
static int fail_next;      /* the next chunk allocation fails */

int
__wrap_posix_memalign(void **p, size_t align, size_t size)
{
	int rc;

	if (align == TPE__NODE_CHUNK_BYTES &&
	    __atomic_exchange_n(&fail_next, 0, __ATOMIC_SEQ_CST))
		return ENOMEM;
	rc = __real_posix_memalign(p, align, size);
	if (rc == 0 && align == TPE__NODE_CHUNK_BYTES) {
		__atomic_add_fetch(&chunks_made, 1, __ATOMIC_SEQ_CST);
		__atomic_add_fetch(&chunks_alive, 1, __ATOMIC_SEQ_CST);
	}
	return rc;
}

void
__wrap_free(void *p)
{
	/* Only chunks are aligned to a chunk's size here: malloc's own
	 * blocks are 16-byte aligned, and no other block of this test is
	 * that large. A chunk is freed whole, by its start. */
	if (p != NULL && ((uintptr_t)p & (TPE__NODE_CHUNK_BYTES - 1)) == 0)
		__atomic_sub_fetch(&chunks_alive, 1, __ATOMIC_SEQ_CST);
	__real_free(p);
}

static long
alive(void)
{
	return __atomic_load_n(&chunks_alive, __ATOMIC_SEQ_CST);
}

static long
made(void)
{
	return __atomic_load_n(&chunks_made, __ATOMIC_SEQ_CST);
}

/* ---- helpers ---------------------------------------------------------- */

/* A return stack with room for `chunks` chunks. */
static void
returns_init(struct tpe__node_returns *r, size_t chunks)
{
	memset(r, 0, sizeof(*r));
	r->max = chunks * tpe__node_chunk_nodes();
}

static size_t
on_stack(const struct tpe__node_returns *r)
{
	return __atomic_load_n(&r->count, __ATOMIC_SEQ_CST);
}

/* n nodes from this thread, each asserted non-NULL. */
static void
get_n(struct tpe__node_returns *r, struct tpe__task **t, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		t[i] = tpe__node_get(r);
		assert_non_null(t[i]);
	}
}

/* Ends t[idx[0]], t[idx[1]], ... as one batch, linked in that order. */
static void
put_batch(struct tpe__node_returns *r, struct tpe__task **t,
    const size_t *idx, size_t n)
{
	size_t i;

	for (i = 0; i + 1 < n; i++)
		t[idx[i]]->next = t[idx[i + 1]];
	t[idx[n - 1]]->next = NULL;
	tpe__node_put_chain(r, t[idx[0]], n);
}

/* A permutation of 0..n-1 that is far from any order: a stride walk. */
static void
scrambled(size_t *idx, size_t n)
{
	size_t i, j = 0, step = 7;

	while (n % step == 0)
		step += 2;
	for (i = 0; i < n; i++, j = (j + step) % n)
		idx[i] = j;
}

/*
 * Starts each case with no chunk held by this thread, and past its small
 * first chunk: the next chunk it allocates is whole.
 */
static int
setup(void **state)
{
	struct tpe__node_returns r;
	struct tpe__task *t[32];
	size_t n = 0, i;

	(void)state;
	returns_init(&r, 1);
	tpe__node_cache_flush();
	do {
		t[n] = tpe__node_get(&r);
		assert_non_null(t[n]);
	} while (tpe__node_chunk_nodes_of(t[n++]) != tpe__node_chunk_nodes()
	    && n < 32);
	assert_int_equal(tpe__node_chunk_nodes_of(t[n - 1]),
	    tpe__node_chunk_nodes());
	for (i = 0; i < n; i++)
		tpe__node_put(&r, t[i]);
	tpe__node_cache_flush();
	tpe__node_returns_free(&r);
	return 0;
}

/* ---- one thread ------------------------------------------------------- */

/* A thread's nodes lie one after another in one chunk. */
static void
test_node_carved_in_order(void **state)
{
	struct tpe__node_returns r;
	size_t n = tpe__node_chunk_nodes(), i;
	struct tpe__task **t = calloc(n, sizeof(*t));
	size_t *idx = calloc(n, sizeof(*idx));
	long before = made();

	(void)state;
	assert_non_null(t);
	assert_non_null(idx);
	assert_true(n >= 300); /* 16 KiB of 40-byte nodes */
	returns_init(&r, 4);
	get_n(&r, t, n);
	for (i = 1; i < n; i++)
		assert_ptr_equal(t[i], t[i - 1] + 1);
	assert_int_equal(made() - before, 1);
	scrambled(idx, n);
	put_batch(&r, t, idx, n);
	tpe__node_cache_flush();
	tpe__node_returns_free(&r);
	free(idx);
	free(t);
}

/*
 * Nodes that came back in any order are handed out again in address
 * order: the chunk comes back whole once its last node ended and is
 * carved from its start. Node order is what lets the workers' walks be
 * prefetched (node_cache.c); before chunks, recycled nodes came back in
 * the return stack's order and this case failed.
 */
static void
test_node_recycled_in_order(void **state)
{
	struct tpe__node_returns r;
	size_t n = tpe__node_chunk_nodes(), i, half = n / 2;
	struct tpe__task **t = calloc(n + 1, sizeof(*t));
	struct tpe__task **v = calloc(n, sizeof(*v));
	struct tpe__task **u = calloc(n, sizeof(*u));
	size_t *idx = calloc(n, sizeof(*idx));
	long base = alive(), before;

	(void)state;
	assert_non_null(t);
	assert_non_null(v);
	assert_non_null(u);
	assert_non_null(idx);
	returns_init(&r, 4);
	/* The whole first chunk, and one node of a second: the thread
	 * gives up its hold on the first. */
	get_n(&r, t, n + 1);
	assert_int_equal(on_stack(&r), 0);
	/* Back in two scrambled batches, as two workers would. */
	scrambled(idx, n);
	put_batch(&r, t, idx, half);
	assert_int_equal(on_stack(&r), 0); /* half of it still out */
	put_batch(&r, t, idx + half, n - half);
	assert_int_equal(on_stack(&r), 1);
	/* The second chunk used up: the next comes from the stack, and is
	 * carved from its start. */
	get_n(&r, v, n - 1);
	before = made();
	get_n(&r, u, n);
	assert_int_equal(made(), before);
	assert_ptr_equal(u[0], t[0]);
	for (i = 1; i < n; i++)
		assert_ptr_equal(u[i], u[i - 1] + 1);
	/* Everything ends: the second chunk goes to the stack, the first
	 * is freed with the thread's hold. */
	tpe__node_put(&r, t[n]);
	for (i = 0; i < n - 1; i++)
		idx[i] = i;
	put_batch(&r, v, idx, n - 1);
	put_batch(&r, u, idx, n - 1);
	tpe__node_put(&r, u[n - 1]);
	tpe__node_cache_flush();
	tpe__node_returns_free(&r);
	assert_int_equal(alive(), base);
	free(idx);
	free(u);
	free(v);
	free(t);
}

/* One node out holds its chunk; the bound frees what the stack cannot
 * take; a chunk nothing holds after a flush is freed. */
static void
test_node_chunk_held_then_bounded(void **state)
{
	struct tpe__node_returns r;
	size_t n = tpe__node_chunk_nodes(), i;
	struct tpe__task **t = calloc(2 * n + 1, sizeof(*t));
	size_t *idx = calloc(2 * n, sizeof(*idx));
	long base = alive();

	(void)state;
	assert_non_null(t);
	assert_non_null(idx);
	returns_init(&r, 1);
	get_n(&r, t, 2 * n + 1); /* two chunks used up, a third held */
	assert_int_equal(alive() - base, 3);
	for (i = 0; i < n; i++)
		idx[i] = i;
	put_batch(&r, t, idx, n - 1); /* all of chunk 1 but its last */
	assert_int_equal(on_stack(&r), 0);
	put_batch(&r, t, idx + n - 1, 1);
	assert_int_equal(on_stack(&r), 1);
	for (i = 0; i < n; i++)
		idx[i] = n + i;
	put_batch(&r, t, idx, n); /* chunk 2: the stack is full, freed */
	assert_int_equal(on_stack(&r), 1);
	assert_int_equal(alive() - base, 2);
	tpe__node_put(&r, t[2 * n]); /* chunk 3: still held by the thread */
	assert_int_equal(alive() - base, 2);
	tpe__node_cache_flush(); /* the hold goes, nothing else: freed */
	assert_int_equal(alive() - base, 1);
	tpe__node_returns_free(&r);
	assert_int_equal(alive(), base);
	free(idx);
	free(t);
}

/* A batch whose nodes come from more chunks than the walk keeps counts
 * for, interleaved: every chunk is counted right and comes back. */
static void
test_node_batch_over_many_chunks(void **state)
{
	enum { CHUNKS = 7 };
	struct tpe__node_returns r;
	size_t n = tpe__node_chunk_nodes(), i, k, m = 0;
	struct tpe__task **t = calloc(CHUNKS * n + 1, sizeof(*t));
	size_t *idx = calloc(CHUNKS * n, sizeof(*idx));
	long base = alive();

	(void)state;
	assert_non_null(t);
	assert_non_null(idx);
	returns_init(&r, CHUNKS);
	get_n(&r, t, CHUNKS * n + 1);
	/* Node i of chunk 0, of chunk 1, ... then node i + 1 of each. */
	for (i = 0; i < n; i++)
		for (k = 0; k < CHUNKS; k++)
			idx[m++] = k * n + i;
	put_batch(&r, t, idx, m);
	assert_int_equal(on_stack(&r), CHUNKS);
	tpe__node_put(&r, t[CHUNKS * n]);
	tpe__node_cache_flush();
	tpe__node_returns_free(&r);
	assert_int_equal(alive(), base);
	free(idx);
	free(t);
}

/* A failed chunk allocation is a NULL node; the next call works. */
static void
test_node_enomem(void **state)
{
	struct tpe__node_returns r;
	struct tpe__task *t;

	(void)state;
	returns_init(&r, 1);
	__atomic_store_n(&fail_next, 1, __ATOMIC_SEQ_CST);
	assert_null(tpe__node_get(&r));
	t = tpe__node_get(&r);
	assert_non_null(t);
	tpe__node_put(&r, t);
	tpe__node_cache_flush();
	tpe__node_returns_free(&r);
}

/* ---- threads ---------------------------------------------------------- */

struct first_case {
	struct tpe__node_returns *r;
	size_t first; /* the first chunk's nodes, read after the join */
};

static void *
first_chunk_main(void *arg)
{
	struct first_case *c = arg;
	struct tpe__node_returns *r = c->r;
	struct tpe__task *t[32];
	size_t n = 0, i, first;

	t[n++] = tpe__node_get(r);
	assert_non_null(t[0]);
	first = tpe__node_chunk_nodes_of(t[0]);
	for (i = 1; i <= first; i++) {
		t[n] = tpe__node_get(r);
		assert_non_null(t[n]);
		if (i < first)
			assert_ptr_equal(t[n], t[n - 1] + 1);
		n++;
	}
	/* Past the small chunk: the next is whole. */
	assert_int_equal(tpe__node_chunk_nodes_of(t[n - 1]),
	    tpe__node_chunk_nodes());
	for (i = 0; i < n; i++)
		tpe__node_put(r, t[i]);
	c->first = first;
	return NULL;
}

/* A thread's first chunk is a small one (a thread that submits a few
 * tasks holds a few hundred bytes); its next one is whole. */
static void
test_node_first_chunk_small(void **state)
{
	struct tpe__node_returns r;
	struct first_case c = { &r, 0 };
	pthread_t th;
	long base = alive();

	(void)state;
	returns_init(&r, 2);
	assert_int_equal(pthread_create(&th, NULL, first_chunk_main, &c), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(c.first, 16);
	/* Both chunks ended and their thread gone: freed or on the stack. */
	tpe__node_returns_free(&r);
	assert_int_equal(alive(), base);
}

struct exit_case {
	struct tpe__node_returns *r;
	struct tpe__task *t[3];
	sem_t got, ended;
	bool wait;
};

static void *
take_three(void *arg)
{
	struct exit_case *c = arg;

	get_n(c->r, c->t, 3);
	if (c->wait) {
		sem_post(&c->got);
		sem_wait(&c->ended);
	}
	return NULL;
}

/* A thread that exits gives up its chunk: ended after the exit, the
 * nodes bring it back to the stack; ended before, the exit frees it. */
static void
test_node_thread_exit(void **state)
{
	struct tpe__node_returns r;
	struct exit_case c;
	size_t idx[3] = { 2, 0, 1 };
	pthread_t th;
	long base = alive();

	(void)state;
	memset(&c, 0, sizeof(c));
	c.r = &r;
	assert_int_equal(sem_init(&c.got, 0, 0), 0);
	assert_int_equal(sem_init(&c.ended, 0, 0), 0);
	returns_init(&r, 2);
	assert_int_equal(pthread_create(&th, NULL, take_three, &c), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(alive() - base, 1);
	put_batch(&r, c.t, idx, 3);
	assert_int_equal(on_stack(&r), 1);
	tpe__node_returns_free(&r);
	assert_int_equal(alive(), base);
	/* Ended while the thread still holds its chunk: freed at its exit
	 * (no pool to take it then). */
	c.wait = true;
	assert_int_equal(pthread_create(&th, NULL, take_three, &c), 0);
	assert_int_equal(sem_wait(&c.got), 0);
	put_batch(&r, c.t, idx, 3);
	assert_int_equal(on_stack(&r), 0);
	assert_int_equal(alive() - base, 1);
	assert_int_equal(sem_post(&c.ended), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(alive(), base);
	sem_destroy(&c.got);
	sem_destroy(&c.ended);
}

/*
 * One producer carves nodes and hands them in batches to two enders,
 * which end each batch with one put_chain while it goes on: every chunk
 * comes back exactly once (a chunk ended twice or never would show in the
 * count of chunks alive), under TSan too.
 */
#define MT_BATCH 64
#define MT_BATCHES 2000

struct mt_box {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct tpe__task *batch[2]; /* a chain per ender; NULL: empty */
	size_t n[2];
	bool done;
	struct tpe__node_returns *r;
};

struct mt_ender {
	struct mt_box *box;
	int id;
};

static void *
ender_main(void *arg)
{
	struct mt_ender *e = arg;
	struct mt_box *b = e->box;

	for (;;) {
		struct tpe__task *first;
		size_t n;

		pthread_mutex_lock(&b->lock);
		while (b->batch[e->id] == NULL && !b->done)
			pthread_cond_wait(&b->cond, &b->lock);
		first = b->batch[e->id];
		n = b->n[e->id];
		b->batch[e->id] = NULL;
		pthread_cond_broadcast(&b->cond);
		pthread_mutex_unlock(&b->lock);
		if (first == NULL)
			return NULL;
		tpe__node_put_chain(b->r, first, n);
	}
}

static void
test_node_threads_end_batches(void **state)
{
	struct tpe__node_returns r;
	struct mt_box b;
	struct mt_ender e[2];
	pthread_t th[2];
	long base = alive(), made0 = made();
	int i, k;

	(void)state;
	returns_init(&r, 4);
	memset(&b, 0, sizeof(b));
	pthread_mutex_init(&b.lock, NULL);
	pthread_cond_init(&b.cond, NULL);
	b.r = &r;
	for (i = 0; i < 2; i++) {
		e[i].box = &b;
		e[i].id = i;
		assert_int_equal(pthread_create(&th[i], NULL, ender_main,
		    &e[i]), 0);
	}
	for (k = 0; k < MT_BATCHES; k++) {
		struct tpe__task *head = NULL;
		int to = k % 2;

		/* Built newest first, as a stack: the enders see runs of
		 * descending addresses split across chunks. */
		for (i = 0; i < MT_BATCH; i++) {
			struct tpe__task *t = tpe__node_get(&r);

			assert_non_null(t);
			t->next = head;
			head = t;
		}
		pthread_mutex_lock(&b.lock);
		while (b.batch[to] != NULL)
			pthread_cond_wait(&b.cond, &b.lock);
		b.batch[to] = head;
		b.n[to] = MT_BATCH;
		pthread_cond_broadcast(&b.cond);
		pthread_mutex_unlock(&b.lock);
	}
	pthread_mutex_lock(&b.lock);
	while (b.batch[0] != NULL || b.batch[1] != NULL)
		pthread_cond_wait(&b.cond, &b.lock);
	b.done = true;
	pthread_cond_broadcast(&b.cond);
	pthread_mutex_unlock(&b.lock);
	for (i = 0; i < 2; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	/* 128000 nodes: about 315 chunks went round, through the stack
	 * and this thread's spares. Every node ended: after the flush, the
	 * stack holds every chunk still alive, and its free leaves none. A
	 * chunk recycled twice would be freed twice (and counted below
	 * base), one never recycled would stay alive. At most 256 nodes
	 * are out at once (two batches in the box, two being ended), fewer
	 * than a chunk holds: so the chunk before the current one has come
	 * back before the thread needs another, and a few allocations
	 * served all 128000 nodes. */
	assert_true(made() - made0 <= 4);
	tpe__node_cache_flush();
	tpe__node_returns_free(&r);
	assert_int_equal(alive(), base);
	pthread_cond_destroy(&b.cond);
	pthread_mutex_destroy(&b.lock);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_node_carved_in_order, setup),
		cmocka_unit_test_setup(test_node_recycled_in_order, setup),
		cmocka_unit_test_setup(test_node_chunk_held_then_bounded,
		    setup),
		cmocka_unit_test_setup(test_node_batch_over_many_chunks,
		    setup),
		cmocka_unit_test_setup(test_node_enomem, setup),
		cmocka_unit_test_setup(test_node_first_chunk_small, setup),
		cmocka_unit_test_setup(test_node_thread_exit, setup),
		cmocka_unit_test_setup(test_node_threads_end_batches, setup),
	};

	tu_time_bound(0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
