/* SPDX-License-Identifier: MIT */
/*
 * strategy.c - eat-what-you-kill: a connection's requests are produced
 * from a queue by an adaptive strategy, which runs each handler in the
 * thread that produced it when another thread can take production over,
 * and on the pool otherwise (tpe_strategy_create(3)).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <tpe.h>

struct conn;

struct request {
	struct request *next;
	struct conn *conn;
	long n;
};

struct conn {
	pthread_mutex_t lock;
	pthread_cond_t all_done;
	struct request *head, **tailp; /* the requests not produced yet */
	long sum, handled;
	tpe_strategy_t *strategy;
};

/* A handler: it may block (here it only adds), so it is BLOCKING. */
static void
handle(void *arg)
{
	struct request *r = arg;
	struct conn *c = r->conn;

	pthread_mutex_lock(&c->lock);
	c->sum += r->n;
	if (++c->handled == 100)
		pthread_cond_signal(&c->all_done);
	pthread_mutex_unlock(&c->lock);
	free(r);
}

/* The producer: the next request, or false when the queue is empty. */
static bool
produce(void *ctx, tpe_fn *fn, void **arg, enum tpe_invocation *type)
{
	struct conn *c = ctx;
	struct request *r;

	pthread_mutex_lock(&c->lock);
	r = c->head;
	if (r != NULL && (c->head = r->next) == NULL)
		c->tailp = &c->head;
	pthread_mutex_unlock(&c->lock);
	if (r == NULL)
		return false;
	*fn = handle;
	*arg = r;
	*type = TPE_BLOCKING;
	return true;
}

/* A request arrives: queue it, then make sure it is produced. */
static int
arrive(struct conn *c, long n)
{
	struct request *r = malloc(sizeof(*r));

	if (r == NULL)
		return 1;
	r->next = NULL;
	r->conn = c;
	r->n = n;
	pthread_mutex_lock(&c->lock);
	*c->tailp = r;
	c->tailp = &r->next;
	pthread_mutex_unlock(&c->lock);
	return tpe_strategy_produce(c->strategy);
}

int
main(void)
{
	struct conn c = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
	    NULL, &c.head, 0, 0, NULL };
	struct tpe_strategy_stats st;
	tpe_t *pool;
	long i;

	if (tpe_create(&pool, NULL) != 0 ||
	    tpe_strategy_create(&c.strategy, pool, produce, &c,
	    TPE_STRATEGY_ADAPTIVE) != 0)
		return 1;
	for (i = 1; i <= 100; i++)
		if (arrive(&c, i) != 0)
			return 1;
	pthread_mutex_lock(&c.lock);
	while (c.handled < 100)
		pthread_cond_wait(&c.all_done, &c.lock);
	pthread_mutex_unlock(&c.lock);

	if (tpe_strategy_get_stats(c.strategy, &st, sizeof(st)) != 0)
		return 1;
	printf("sum %ld; pc %llu, pic %llu, pec %llu, epc %llu\n", c.sum,
	    (unsigned long long)st.pc, (unsigned long long)st.pic,
	    (unsigned long long)st.pec, (unsigned long long)st.epc);
	/* Pending producers run on the pool: once it is idle, the strategy
	 * is too, and may be destroyed. */
	if (tpe_wait_idle(pool, -1) != 0 ||
	    tpe_strategy_destroy(c.strategy) != 0)
		return 1;
	return tpe_destroy(pool) != 0 || c.sum != 5050;
}
