/* SPDX-License-Identifier: MIT */
/* replace_handrolled.c - a typical hand-rolled pthread pool, and the same program on libtpe. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tpe.h>

#define NTHREADS 4
#define NCHUNKS 64
#define CHUNK 5000

/*
 * The work: count the primes in [lo, hi). Each chunk is one task; its
 * argument is the chunk, and the task writes its answer into it.
 */
struct chunk {
	unsigned long lo, hi;
	unsigned long primes;
};

static void
count_primes(void *arg)
{
	struct chunk *c = arg;
	unsigned long n, d;

	c->primes = 0;
	for (n = c->lo; n < c->hi; n++) {
		if (n < 2)
			continue;
		for (d = 2; d * d <= n; d++)
			if (n % d == 0)
				break;
		if (d * d > n)
			c->primes++;
	}
}

/* ---- before: the pool many programs carry ----------------------------- */

/*
 * A fixed set of threads and a linked FIFO under one mutex and condition
 * variable. No bound on the queue, no error path for pthread_create or
 * malloc in the callers, no way to get a task back: the usual shape.
 */
struct job {
	void (*fn)(void *);
	void *arg;
	struct job *next;
};

struct handrolled {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct job *head, *tail;	/* guarded by lock */
	int stopping;			/* guarded by lock */
	pthread_t threads[NTHREADS];
};

static void *
handrolled_worker(void *arg)
{
	struct handrolled *hp = arg;
	struct job *j;

	for (;;) {
		pthread_mutex_lock(&hp->lock);
		while (hp->head == NULL && !hp->stopping)
			pthread_cond_wait(&hp->cond, &hp->lock);
		if (hp->head == NULL) {		/* stopping, queue drained */
			pthread_mutex_unlock(&hp->lock);
			return NULL;
		}
		j = hp->head;
		hp->head = j->next;
		if (hp->head == NULL)
			hp->tail = NULL;
		pthread_mutex_unlock(&hp->lock);
		j->fn(j->arg);
		free(j);
	}
}

static int
handrolled_start(struct handrolled *hp)
{
	int i;

	memset(hp, 0, sizeof(*hp));
	pthread_mutex_init(&hp->lock, NULL);
	pthread_cond_init(&hp->cond, NULL);
	for (i = 0; i < NTHREADS; i++)
		if (pthread_create(&hp->threads[i], NULL, handrolled_worker,
		    hp) != 0)
			return -1;	/* and the started threads leak */
	return 0;
}

static int
handrolled_add(struct handrolled *hp, void (*fn)(void *), void *arg)
{
	struct job *j = malloc(sizeof(*j));

	if (j == NULL)
		return -1;
	j->fn = fn;
	j->arg = arg;
	j->next = NULL;
	pthread_mutex_lock(&hp->lock);
	if (hp->tail != NULL)
		hp->tail->next = j;
	else
		hp->head = j;
	hp->tail = j;
	pthread_cond_signal(&hp->cond);
	pthread_mutex_unlock(&hp->lock);
	return 0;
}

/* Run what is queued, then stop and join every thread. */
static void
handrolled_finish(struct handrolled *hp)
{
	int i;

	pthread_mutex_lock(&hp->lock);
	hp->stopping = 1;
	pthread_cond_broadcast(&hp->cond);
	pthread_mutex_unlock(&hp->lock);
	for (i = 0; i < NTHREADS; i++)
		pthread_join(hp->threads[i], NULL);
	pthread_cond_destroy(&hp->cond);
	pthread_mutex_destroy(&hp->lock);
}

static unsigned long
run_handrolled(struct chunk *chunks)
{
	struct handrolled hp;
	unsigned long total = 0;
	int i;

	if (handrolled_start(&hp) != 0)
		exit(1);
	for (i = 0; i < NCHUNKS; i++)
		if (handrolled_add(&hp, count_primes, &chunks[i]) != 0)
			exit(1);
	handrolled_finish(&hp);
	for (i = 0; i < NCHUNKS; i++)
		total += chunks[i].primes;
	return total;
}

/* ---- after: the same program on libtpe -------------------------------- */

/*
 * The task function does not change. The pool is the hand-rolled one's
 * equivalent: NTHREADS threads and an unbounded FIFO (the default). The
 * calls return an errno value, and tpe_destroy runs what is queued, then
 * joins every thread, as handrolled_finish did.
 */
static unsigned long
run_libtpe(struct chunk *chunks)
{
	tpe_attr_t *attr;
	tpe_t *pool;
	unsigned long total = 0;
	int i, rc;

	if ((rc = tpe_attr_create(&attr)) != 0 ||
	    (rc = tpe_attr_set_pool_size(attr, NTHREADS, NTHREADS)) != 0 ||
	    (rc = tpe_create(&pool, attr)) != 0) {
		fprintf(stderr, "replace_handrolled: %s\n", strerror(rc));
		exit(1);
	}
	tpe_attr_destroy(attr);
	for (i = 0; i < NCHUNKS; i++) {
		rc = tpe_execute(pool, count_primes, &chunks[i]);
		if (rc != 0) {
			fprintf(stderr, "replace_handrolled: tpe_execute: %s\n",
			    strerror(rc));
			exit(1);
		}
	}
	if ((rc = tpe_destroy(pool)) != 0) {
		fprintf(stderr, "replace_handrolled: tpe_destroy: %s\n",
		    strerror(rc));
		exit(1);
	}
	for (i = 0; i < NCHUNKS; i++)
		total += chunks[i].primes;
	return total;
}

int
main(void)
{
	static struct chunk before[NCHUNKS], after[NCHUNKS];
	unsigned long a, b;
	int i;

	for (i = 0; i < NCHUNKS; i++) {
		before[i].lo = after[i].lo = (unsigned long)i * CHUNK;
		before[i].hi = after[i].hi = (unsigned long)(i + 1) * CHUNK;
	}
	a = run_handrolled(before);
	b = run_libtpe(after);
	printf("primes below %lu: hand-rolled pool %lu, libtpe %lu\n",
	    (unsigned long)NCHUNKS * CHUNK, a, b);
	return a == b ? 0 : 1;
}
