/* SPDX-License-Identifier: MIT */
/*
 * test_strategy.c - the execution strategies (tpe_strategy_*): which
 * thread runs each task in each mode, the producer's mutual exclusion, no
 * lost wake-up, pending producers, the starvation scenarios, and the
 * reserved-thread hand-offs of EPC. Tests are named after the behaviours
 * they check (numbered as in the list of Jetty's strategy behaviours this
 * library follows: idle producer 1, PC 2, EPC 3/7/16-18, PEC 4/5, PIC 6/8,
 * counters 9, mutual exclusion 10/19, lost wake-up 12/13, dispatch 14/15/
 * 20, PEC refusal 21, stop 22, starvation 23-25, chaining 30, blocking
 * producer 31).
 *
 * The producer is a queue of items (struct feed) that counts its callers,
 * and every state is built with latches, gates and the pool's task hooks;
 * nothing sleeps, except the "eventually" waits the pool itself promises
 * (a worker turning into a parked reserved thread).
 *
 * Linked with -Wl,--wrap=tpe_try_execute,--wrap=tpe_execute_typed,
 * --wrap=calloc: the library's calls of the first two go through the
 * counters below (the strategy is in a static archive, so its references
 * are redirected), and calloc can be made to fail.
 */
#define _GNU_SOURCE
#include <string.h>

#include "helpers.h"

#include "base/cpu.h"
#include "base/invocation.h"
#include "strategy/strategy.h"

/* ---- the wrappers ----------------------------------------------------- */

int __real_tpe_try_execute(tpe_t *pool, tpe_fn fn, void *arg);
int __real_tpe_execute_typed(tpe_t *pool, tpe_fn fn, void *arg,
    enum tpe_invocation type);
void *__real_calloc(size_t n, size_t size);
int __wrap_tpe_try_execute(tpe_t *pool, tpe_fn fn, void *arg);
int __wrap_tpe_execute_typed(tpe_t *pool, tpe_fn fn, void *arg,
    enum tpe_invocation type);
void *__wrap_calloc(size_t n, size_t size);

/* The strategy whose pending-producer starts are counted (its own pointer
 * is what it passes as the argument), and the counts. A: atomic. */
static void *watched;
static int try_calls, try_hits, submits;
static int fail_calloc;

static bool
is_watched(void *arg)
{
	return arg != NULL && arg == __atomic_load_n(&watched, __ATOMIC_SEQ_CST);
}

int
__wrap_tpe_try_execute(tpe_t *pool, tpe_fn fn, void *arg)
{
	int rc = __real_tpe_try_execute(pool, fn, arg);

	if (is_watched(arg)) {
		__atomic_add_fetch(&try_calls, 1, __ATOMIC_SEQ_CST);
		if (rc == 0)
			__atomic_add_fetch(&try_hits, 1, __ATOMIC_SEQ_CST);
	}
	return rc;
}

int
__wrap_tpe_execute_typed(tpe_t *pool, tpe_fn fn, void *arg,
    enum tpe_invocation type)
{
	if (is_watched(arg))
		__atomic_add_fetch(&submits, 1, __ATOMIC_SEQ_CST);
	return __real_tpe_execute_typed(pool, fn, arg, type);
}

void *
__wrap_calloc(size_t n, size_t size)
{
	if (__atomic_load_n(&fail_calloc, __ATOMIC_SEQ_CST))
		return NULL;
	return __real_calloc(n, size);
}

static void
watch(tpe_strategy_t *s)
{
	__atomic_store_n(&try_calls, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&try_hits, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&submits, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&watched, (void *)s, __ATOMIC_SEQ_CST);
}

/* ---- the producer: a queue of items ----------------------------------- */

struct item {
	tpe_fn fn;
	void *arg;
	enum tpe_invocation type;
};

#define FEED_CALLERS 64 /* the threads of the first calls are recorded */

struct feed {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct item *items;             /* lock */
	size_t cap, head, tail;         /* lock */
	bool wait_for_items, closed;    /* lock: take() blocks until closed */
	int takers;                     /* lock: producers waiting in take() */
	pthread_t caller[FEED_CALLERS]; /* lock: the thread of call i + 1 */
	int calls;                      /* A: producer calls */
	int produced;                   /* A: tasks returned */
	int inside, max_inside;         /* A: producers inside at once */
	/* Called at the start of each call with its number (1, 2, ...). */
	void (*on_call)(struct feed *f, int call);
	void *hook;                     /* for on_call */
};

static void
feed_init(struct feed *f, size_t cap)
{
	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	f->items = calloc(cap, sizeof(*f->items));
	assert_non_null(f->items);
	f->cap = cap;
}

static void
feed_destroy(struct feed *f)
{
	free(f->items);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->cond);
}

static void
feed_push(struct feed *f, tpe_fn fn, void *arg, enum tpe_invocation type)
{
	pthread_mutex_lock(&f->lock);
	assert_true(f->tail - f->head < f->cap);
	f->items[f->tail++ % f->cap] = (struct item){ fn, arg, type };
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

static size_t
feed_len(struct feed *f)
{
	size_t n;

	pthread_mutex_lock(&f->lock);
	n = f->tail - f->head;
	pthread_mutex_unlock(&f->lock);
	return n;
}

static void
feed_close(struct feed *f)
{
	pthread_mutex_lock(&f->lock);
	f->closed = true;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

/* Waits until a producer is blocked in take() (wait_for_items feeds). */
static void
feed_wait_taker(struct feed *f)
{
	pthread_mutex_lock(&f->lock);
	while (f->takers == 0)
		pthread_cond_wait(&f->cond, &f->lock);
	pthread_mutex_unlock(&f->lock);
}

static pthread_t
feed_caller(struct feed *f, int call)
{
	pthread_t t;

	assert_true(call >= 1 && call <= FEED_CALLERS);
	pthread_mutex_lock(&f->lock);
	t = f->caller[call - 1];
	pthread_mutex_unlock(&f->lock);
	return t;
}

static int
feed_calls(struct feed *f)
{
	return __atomic_load_n(&f->calls, __ATOMIC_SEQ_CST);
}

/* The tpe_produce_fn. */
static bool
feed_produce(void *ctx, tpe_fn *fn, void **arg, enum tpe_invocation *type)
{
	struct feed *f = ctx;
	int in, max, call;
	bool got = false;

	in = __atomic_add_fetch(&f->inside, 1, __ATOMIC_SEQ_CST);
	max = __atomic_load_n(&f->max_inside, __ATOMIC_SEQ_CST);
	while (in > max && !__atomic_compare_exchange_n(&f->max_inside, &max,
	    in, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		;
	call = __atomic_add_fetch(&f->calls, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_lock(&f->lock);
	if (call <= FEED_CALLERS)
		f->caller[call - 1] = pthread_self();
	pthread_mutex_unlock(&f->lock);
	if (f->on_call != NULL)
		f->on_call(f, call);

	pthread_mutex_lock(&f->lock);
	while (f->wait_for_items && f->head == f->tail && !f->closed) {
		f->takers++;
		pthread_cond_broadcast(&f->cond);
		pthread_cond_wait(&f->cond, &f->lock);
		f->takers--;
	}
	if (f->head != f->tail) {
		struct item *it = &f->items[f->head++ % f->cap];

		*fn = it->fn;
		*arg = it->arg;
		*type = it->type;
		got = true;
	}
	pthread_mutex_unlock(&f->lock);
	if (got)
		__atomic_add_fetch(&f->produced, 1, __ATOMIC_SEQ_CST);
	__atomic_sub_fetch(&f->inside, 1, __ATOMIC_SEQ_CST);
	return got;
}

/* ---- tasks ------------------------------------------------------------ */

/*
 * A task that records where and how it ran: its thread and whether it
 * ran as non-blocking, then counts `started` down, waits for `release`
 * and counts `done` down (each may be NULL). `inner` (may be NULL) is a
 * strategy it runs a produce pass of, to nest strategies; `nb_after` is
 * tpe_in_non_blocking() after that pass. `open` (may be NULL) is counted
 * down first, and `destroy_me` destroyed, with the result in destroy_rc.
 */
struct probe {
	pthread_t thread;
	bool non_blocking, nb_after;
	int ran;                   /* A */
	struct tu_latch *open, *started, *release, *done;
	tpe_strategy_t *inner;
	tpe_strategy_t *destroy_me;
	int destroy_rc;
};

static void
probe_fn(void *arg)
{
	struct probe *p = arg;

	p->thread = pthread_self();
	p->non_blocking = tpe_in_non_blocking();
	__atomic_add_fetch(&p->ran, 1, __ATOMIC_SEQ_CST);
	if (p->open != NULL)
		tu_latch_count_down(p->open);
	if (p->destroy_me != NULL)
		p->destroy_rc = tpe_strategy_destroy(p->destroy_me);
	if (p->inner != NULL) {
		assert_int_equal(tpe_strategy_produce(p->inner), 0);
		p->nb_after = tpe_in_non_blocking();
	}
	if (p->started != NULL)
		tu_latch_count_down(p->started);
	if (p->release != NULL)
		tu_latch_wait(p->release);
	if (p->done != NULL)
		tu_latch_count_down(p->done);
}

/* Each of the n probes ran once, all in this thread (here) or none. */
static void
assert_ran_here(struct probe *p, size_t n, bool here)
{
	size_t i;

	for (i = 0; i < n; i++) {
		assert_int_equal(tu_ran(&p[i]), 1);
		assert_int_equal(!!pthread_equal(p[i].thread, pthread_self()),
		    here);
	}
}

static void
latch_fn(void *arg)
{
	tu_latch_count_down(arg);
}

/* ---- pools, strategies, states ---------------------------------------- */

/*
 * A pool for the strategy tests: core == max == `threads`, an unbounded
 * queue unless `o` says otherwise, and `reserved` reserved threads at most
 * (0: none, so tpe_try_execute always misses). Its workers start with the
 * first tasks (tu_saturate relies on that); warm_pool starts them all.
 */
static tpe_t *
strategy_pool(size_t threads, int reserved, struct tu_pool_opts o)
{
	tpe_attr_t *a;
	tpe_t *p;

	o.core = o.max = threads;
	a = tu_attr_with(&o);
	assert_int_equal(tpe_attr_set_reserved_threads(a, reserved), 0);
	assert_int_equal(tpe_create(&p, a), 0);
	tpe_attr_destroy(a);
	return p;
}

/* All workers started and idle: the ones a reserved thread comes from. */
static tpe_t *
warm_pool(size_t threads, int reserved, struct tu_pool_opts o)
{
	tpe_t *p = strategy_pool(threads, reserved, o);

	assert_int_equal(tpe_prestart_core_threads(p, NULL), 0);
	return p;
}

static tpe_strategy_t *
new_strategy(tpe_t *pool, struct feed *f, enum tpe_strategy_mode mode)
{
	tpe_strategy_t *s;

	assert_int_equal(tpe_strategy_create(&s, pool, feed_produce, f, mode),
	    0);
	watch(s);
	return s;
}

static struct tpe_strategy_stats
stats_of(const tpe_strategy_t *s)
{
	struct tpe_strategy_stats st;

	assert_int_equal(tpe_strategy_get_stats(s, &st, sizeof(st)), 0);
	return st;
}

static void
assert_counts(const tpe_strategy_t *s, uint64_t pc, uint64_t pic,
    uint64_t pec, uint64_t epc)
{
	struct tpe_strategy_stats st = stats_of(s);

	assert_int_equal(st.pc, pc);
	assert_int_equal(st.pic, pic);
	assert_int_equal(st.pec, pec);
	assert_int_equal(st.epc, epc);
}

/* Metrics on (tpe_strategy_set_metrics). */
static void
metrics_on(tpe_strategy_t *s)
{
	assert_int_equal(tpe_strategy_set_metrics(s, TPE_METRICS_ON), 0);
}

/*
 * The hand-over metrics: `handovers` EPC hand-overs, `reclaimed` of them
 * ended by another thread than a pending producer, the rest timed; the
 * mode counts are tpe_strategy_get_stats's.
 */
static void
assert_handovers(const tpe_strategy_t *s, uint64_t handovers,
    uint64_t reclaimed)
{
	struct tpe_strategy_metrics *m = malloc(sizeof(*m));
	struct tpe_strategy_stats st = stats_of(s);
	uint64_t sum = 0;
	size_t i;

	assert_non_null(m);
	assert_int_equal(tpe_strategy_get_metrics(s, m, sizeof(*m)), 0);
	assert_int_equal(m->pc, st.pc);
	assert_int_equal(m->pic, st.pic);
	assert_int_equal(m->pec, st.pec);
	assert_int_equal(m->epc, st.epc);
	assert_int_equal(m->handovers, handovers);
	assert_int_equal(m->handovers_reclaimed, reclaimed);
	assert_int_equal(m->handover_time.count, handovers - reclaimed);
	for (i = 0; i < TPE_HISTOGRAM_BUCKETS; i++)
		sum += m->handover_time.buckets[i];
	assert_int_equal(sum, handovers - reclaimed);
	free(m);
}

/*
 * The end of every test: the pool ran everything it was given (pending
 * producers included), then the strategy is IDLE with nothing pending
 * and nobody inside, and the producer never had company.
 */
static void
assert_quiescent(tpe_t *pool, tpe_strategy_t *s, struct feed *f)
{
	struct tpe__strategy_peek pk;

	assert_int_equal(tpe_wait_idle(pool, TU_WAIT_BOUND), 0);
	tpe__strategy_peek(s, &pk);
	assert_int_equal(pk.state, TPE__S_IDLE);
	assert_int_equal(pk.pending[TPE__PENDING_QUEUED], 0);
	assert_int_equal(pk.pending[TPE__PENDING_HANDED], 0);
	assert_int_equal(pk.starting[TPE__PENDING_QUEUED], 0);
	assert_int_equal(pk.starting[TPE__PENDING_HANDED], 0);
	assert_int_equal(pk.callers, 0);
	assert_true(__atomic_load_n(&f->max_inside, __ATOMIC_SEQ_CST) <= 1);
}

static void
finish(tpe_t *pool, tpe_strategy_t *s, struct feed *f)
{
	assert_quiescent(pool, s, f);
	assert_int_equal(tpe_strategy_destroy(s), 0);
	assert_int_equal(tpe_destroy(pool), 0);
	feed_destroy(f);
	watch(NULL);
}

static struct tpe__strategy_peek
peek(tpe_strategy_t *s)
{
	struct tpe__strategy_peek pk;

	tpe__strategy_peek(s, &pk);
	return pk;
}

/* A thread that runs one tpe_strategy_produce call. */
static void *
produce_main(void *arg)
{
	return (void *)(intptr_t)tpe_strategy_produce(arg);
}

static pthread_t
produce_in_thread(tpe_strategy_t *s)
{
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, produce_main, s), 0);
	return t;
}

static void
join_produce(pthread_t t)
{
	void *rc;

	assert_int_equal(pthread_join(t, &rc), 0);
	assert_int_equal((int)(intptr_t)rc, 0);
}

/* A produce pass run as non-blocking (a producer on a selector thread). */
static void
produce_fn(void *arg)
{
	assert_int_equal(tpe_strategy_produce(arg), 0);
}

/*
 * Holds one producer call: call number `call` announces itself (`in`)
 * and waits for `gate`. Set as a feed's on_call with the hold as its hook.
 */
struct call_hold {
	int call;
	struct tu_latch in, gate;
};

static void
call_hold_init(struct call_hold *h, int call)
{
	h->call = call;
	tu_latch_init(&h->in, 1);
	tu_latch_init(&h->gate, 1);
}

static void
call_hold_destroy(struct call_hold *h)
{
	tu_latch_destroy(&h->in);
	tu_latch_destroy(&h->gate);
}

static void
hold_call(struct feed *f, int call)
{
	struct call_hold *h = f->hook;

	if (call != h->call)
		return;
	tu_latch_count_down(&h->in);
	tu_latch_wait(&h->gate);
}

/*
 * A producer that is busy producing, for the tests that arrive meanwhile:
 * a pool of one, a strategy over an empty feed, and a thread that
 * produces, whose first producer call is held. held_start returns once
 * it is; held_release lets it go and joins the thread; held_end checks
 * and frees it all.
 */
struct held {
	tpe_t *pool;
	struct feed f;
	tpe_strategy_t *s;
	pthread_t thread;
	struct call_hold hold;
};

static void
held_start(struct held *x)
{
	x->pool = strategy_pool(1, 0, (struct tu_pool_opts){ 0 });
	call_hold_init(&x->hold, 1);
	feed_init(&x->f, 1);
	x->f.on_call = hold_call;
	x->f.hook = &x->hold;
	x->s = new_strategy(x->pool, &x->f, TPE_STRATEGY_ADAPTIVE);
	x->thread = produce_in_thread(x->s);
	tu_latch_wait(&x->hold.in);
}

static void
held_release(struct held *x)
{
	tu_latch_count_down(&x->hold.gate);
	join_produce(x->thread);
}

static void
held_end(struct held *x)
{
	finish(x->pool, x->s, &x->f);
	call_hold_destroy(&x->hold);
}

/*
 * A pool task hook that holds the strategy's pending producer before it
 * runs (the pool passes the strategy as its argument): `held` counts it
 * down, `gate` lets it go; and one run after it, which counts `ran` down
 * (its production, if it took production over, has ended). `arg` is set
 * once the strategy exists.
 */
struct hold_pending {
	void *arg;                 /* A */
	struct tu_latch held, gate, ran;
};

static void
hold_pending_hook(tpe_t *pool, tpe_fn fn, void *arg, void *ctx)
{
	struct hold_pending *h = ctx;

	(void)pool;
	(void)fn;
	if (arg == NULL || arg != __atomic_load_n(&h->arg, __ATOMIC_SEQ_CST))
		return;
	tu_latch_count_down(&h->held);
	tu_latch_wait(&h->gate);
}

static void
pending_ran_hook(tpe_t *pool, tpe_fn fn, void *arg, void *ctx)
{
	struct hold_pending *h = ctx;

	(void)pool;
	(void)fn;
	if (arg != NULL && arg == __atomic_load_n(&h->arg, __ATOMIC_SEQ_CST))
		tu_latch_count_down(&h->ran);
}

/*
 * "One reserved thread parked", built as the pool promises it: a miss of
 * tpe_try_execute asks the pool to turn an idle worker into a reserved
 * thread, so try until one hand-off succeeds, wait for that task, then
 * for the thread to park again (statistics: reserved). The waits are the
 * "eventually" kind: nothing the test could wait on instead.
 */
static bool
warm_reserved(tpe_t *pool)
{
	struct tu_latch ran;
	bool ok;

	tu_latch_init(&ran, 1);
	ok = TU_EVENTUALLY(tpe_try_execute(pool, latch_fn, &ran) == 0,
	    TU_WAIT_BOUND);
	if (ok) {
		tu_latch_wait(&ran);
		ok = TU_EVENTUALLY(tu_stats(pool).reserved >= 1, TU_WAIT_BOUND);
	}
	tu_latch_destroy(&ran);
	return ok;
}

/* Every EPC test starts from one parked reserved thread. */
#define REQUIRE_RESERVED_THREAD(pool) assert_true(warm_reserved(pool))

/*
 * `n` BLOCKING probes pushed to a feed, which block once started until
 * `release` opens; `started` opens when `n_started` of them run, `done`
 * when all have finished.
 */
#define GATED_MAX 8
struct gated {
	struct tu_latch started, release, done;
	struct probe p[GATED_MAX];
	size_t n;
};

static void
gated_push(struct gated *g, struct feed *f, size_t n, long n_started)
{
	size_t i;

	assert_true(n <= GATED_MAX);
	g->n = n;
	tu_latch_init(&g->started, n_started);
	tu_latch_init(&g->release, 1);
	tu_latch_init(&g->done, (long)n);
	for (i = 0; i < n; i++) {
		g->p[i] = (struct probe){ .started = &g->started,
		    .release = &g->release, .done = &g->done };
		feed_push(f, probe_fn, &g->p[i], TPE_BLOCKING);
	}
}

/* Opens the gate and waits until every probe has finished. */
static void
gated_finish(struct gated *g)
{
	tu_latch_count_down(&g->release);
	assert_true(tu_latch_wait_for(&g->done, TU_WAIT_BOUND));
	tu_latch_destroy(&g->started);
	tu_latch_destroy(&g->release);
	tu_latch_destroy(&g->done);
}

/* ---- 1: the idle producer --------------------------------------------- */

static void
test_strategy_idle_producer(void **state)
{
	static const enum tpe_strategy_mode modes[] = { TPE_STRATEGY_ADAPTIVE,
	    TPE_STRATEGY_PC, TPE_STRATEGY_PEC, TPE_STRATEGY_EPC };
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		tpe_t *pool = strategy_pool(1, 0, (struct tu_pool_opts){ 0 });
		struct feed f;
		tpe_strategy_t *s;

		feed_init(&f, 1);
		s = new_strategy(pool, &f, modes[i]);
		assert_int_equal(tpe_strategy_produce(s), 0);
		assert_int_equal(feed_calls(&f), 1);
		assert_true(pthread_equal(feed_caller(&f, 1), pthread_self()));
		assert_counts(s, 0, 0, 0, 0);
		assert_int_equal(tu_load(&submits) + tu_load(&try_calls), 0);
		finish(pool, s, &f);
	}
}

/* ---- 2: NON_BLOCKING is always PC ------------------------------------- */

static void
test_strategy_non_blocking_always_pc(void **state)
{
	tpe_t *pool = strategy_pool(1, 0, (struct tu_pool_opts){
	    .queue = TPE_QUEUE_BOUNDED, .capacity = 1 });
	struct tu_saturation sat;
	struct probe p[8];
	struct feed f;
	tpe_strategy_t *s;
	size_t i;

	(void)state;
	tu_saturate(pool, 1, 1, &sat); /* no thread, no room */
	feed_init(&f, 8);
	memset(p, 0, sizeof(p));
	for (i = 0; i < 8; i++)
		feed_push(&f, probe_fn, &p[i], TPE_NON_BLOCKING);
	s = new_strategy(pool, &f, TPE_STRATEGY_ADAPTIVE);
	assert_int_equal(tpe_strategy_produce(s), 0);
	assert_ran_here(p, 8, true);
	for (i = 0; i < 8; i++)
		assert_false(p[i].non_blocking);
	assert_counts(s, 8, 0, 0, 0);
	assert_int_equal(tu_load(&try_calls), 0);
	tu_unsaturate(&sat);
	finish(pool, s, &f);
	tu_saturation_destroy(&sat);
}

/* ---- 4 (and 26): BLOCKING without a reserved thread is PEC ------------ */

static void
test_strategy_blocking_no_reserved_pec(void **state)
{
	tpe_t *pool = strategy_pool(2, 0, (struct tu_pool_opts){ 0 });
	struct gated g;
	struct feed f;
	tpe_strategy_t *s;
	size_t i;

	(void)state;
	feed_init(&f, 2);
	gated_push(&g, &f, 2, 2);
	s = new_strategy(pool, &f, TPE_STRATEGY_ADAPTIVE);
	/* Returns while both tasks block: production did not wait. */
	assert_int_equal(tpe_strategy_produce(s), 0);
	assert_int_equal(feed_calls(&f), 3);
	assert_true(tu_latch_wait_for(&g.started, TU_WAIT_BOUND));
	for (i = 0; i < 2; i++) /* 26: never inline without a hand-off */
		assert_false(pthread_equal(g.p[i].thread, pthread_self()));
	assert_counts(s, 0, 0, 2, 0);
	assert_int_equal(tu_load(&try_hits), 0);
	gated_finish(&g);
	finish(pool, s, &f);
}

/* ---- 5, 6: a producer that runs as non-blocking ----------------------- */

static void
test_strategy_non_blocking_producer_pec_for_blocking(void **state)
{
	tpe_t *pool = warm_pool(2, 1, (struct tu_pool_opts){ 0 });
	struct tu_latch done;
	struct probe p[4];
	struct feed f;
	tpe_strategy_t *s;
	size_t i;

	(void)state;
	(void)warm_reserved(pool); /* a free reserved thread changes nothing */
	tu_latch_init(&done, 4);
	feed_init(&f, 4);
	for (i = 0; i < 4; i++) {
		p[i] = (struct probe){ .done = &done };
		feed_push(&f, probe_fn, &p[i], TPE_BLOCKING);
	}
	s = new_strategy(pool, &f, TPE_STRATEGY_ADAPTIVE);
	tpe__invoke_non_blocking(produce_fn, s);
	assert_true(tu_latch_wait_for(&done, TU_WAIT_BOUND));
	assert_ran_here(p, 4, false);
	for (i = 0; i < 4; i++)
		assert_false(p[i].non_blocking); /* pool threads clear it */
	assert_counts(s, 0, 0, 4, 0);
	/* Never even asked for a hand-off. */
	assert_int_equal(tu_load(&try_calls), 0);
	finish(pool, s, &f);
	tu_latch_destroy(&done);
}

static void
test_strategy_non_blocking_producer_pc_for_either(void **state)
{
	tpe_t *pool = strategy_pool(2, 1, (struct tu_pool_opts){ 0 });
	struct probe p[3];
	struct feed f;
	tpe_strategy_t *s;
	size_t i;

	(void)state;
	feed_init(&f, 3);
	memset(p, 0, sizeof(p));
	for (i = 0; i < 3; i++)
		feed_push(&f, probe_fn, &p[i], TPE_EITHER);
	s = new_strategy(pool, &f, TPE_STRATEGY_ADAPTIVE);
	tpe__invoke_non_blocking(produce_fn, s);
	assert_false(tpe_in_non_blocking());
	assert_ran_here(p, 3, true);
	for (i = 0; i < 3; i++)
		assert_true(p[i].non_blocking); /* the flag stays set */
	assert_counts(s, 3, 0, 0, 0);
	assert_int_equal(tu_load(&try_calls), 0);
	finish(pool, s, &f);
}

/* ---- 8: EITHER without a reserved thread is PIC, nested --------------- */

static void
test_strategy_either_no_reserved_pic(void **state)
{
	tpe_t *pool = strategy_pool(1, 0, (struct tu_pool_opts){ 0 });
	struct probe outer = { 0 }, inner = { 0 };
	struct feed fo, fi;
	tpe_strategy_t *so, *si;

	(void)state;
	feed_init(&fo, 1);
	feed_init(&fi, 1);
	/* The outer EITHER task runs a pass of an inner strategy, whose
	 * EITHER task then sees a non-blocking producer: PC. */
	assert_int_equal(tpe_strategy_create(&si, pool, feed_produce, &fi,
	    TPE_STRATEGY_ADAPTIVE), 0);
	outer.inner = si;
	feed_push(&fo, probe_fn, &outer, TPE_EITHER);
	feed_push(&fi, probe_fn, &inner, TPE_EITHER);
	so = new_strategy(pool, &fo, TPE_STRATEGY_ADAPTIVE);
	assert_false(tpe_in_non_blocking());
	assert_int_equal(tpe_strategy_produce(so), 0);
	assert_false(tpe_in_non_blocking()); /* restored */
	assert_true(pthread_equal(outer.thread, pthread_self()));
	assert_true(outer.non_blocking);
	assert_true(outer.nb_after); /* still set after the nested pass */
	assert_true(pthread_equal(inner.thread, pthread_self()));
	assert_true(inner.non_blocking);
	assert_counts(so, 0, 1, 0, 0);
	assert_counts(si, 1, 0, 0, 0);
	assert_quiescent(pool, si, &fi);
	assert_int_equal(tpe_strategy_destroy(si), 0);
	feed_destroy(&fi);
	finish(pool, so, &fo);
}

/* ---- 9: the counters add up ------------------------------------------- */

static void
test_strategy_counter_identity(void **state)
{
	static const enum tpe_invocation types[] = { TPE_BLOCKING,
	    TPE_NON_BLOCKING, TPE_EITHER };
	tpe_t *pool = strategy_pool(2, 0, (struct tu_pool_opts){ 0 });
	struct tu_latch done;
	struct probe p[60];
	struct tpe_strategy_stats st;
	struct feed f;
	tpe_strategy_t *s;
	unsigned seed = 9;
	size_t i, n[3] = { 0 };

	(void)state;
	tu_latch_init(&done, 60);
	feed_init(&f, 60);
	for (i = 0; i < 60; i++) {
		size_t k = (size_t)rand_r(&seed) % 3;

		p[i] = (struct probe){ .done = &done };
		feed_push(&f, probe_fn, &p[i], types[k]);
		n[k]++;
	}
	s = new_strategy(pool, &f, TPE_STRATEGY_ADAPTIVE);
	assert_int_equal(tpe_strategy_produce(s), 0);
	assert_true(tu_latch_wait_for(&done, TU_WAIT_BOUND));
	st = stats_of(s);
	assert_int_equal(st.pc + st.pic + st.pec + st.epc, 60);
	assert_int_equal(st.pc, n[1]);  /* NON_BLOCKING */
	assert_int_equal(st.pic, n[2]); /* EITHER, no reserved thread */
	assert_int_equal(st.pec, n[0]); /* BLOCKING, no reserved thread */
	for (i = 0; i < 60; i++)
		assert_int_equal(tu_ran(&p[i]), 1);
	finish(pool, s, &f);
	tu_latch_destroy(&done);
}

/* ---- 10, 19: mutual exclusion under concurrent produce/dispatch ------- */

#define MX_THREADS 4
#define MX_ROUNDS 400

struct mx {
	tpe_strategy_t *s;
	struct feed *f;
	pthread_barrier_t *start;
	int *ran;                 /* A: one counter per item */
	struct tu_latch *done;
	unsigned seed;
	int base;
};

struct mx_item {
	int *ran;
	struct tu_latch *done;
};

static void
mx_task(void *arg)
{
	struct mx_item *it = arg;

	__atomic_add_fetch(it->ran, 1, __ATOMIC_SEQ_CST);
	tu_latch_count_down(it->done);
	free(it);
}

static void *
mx_main(void *arg)
{
	static const enum tpe_invocation types[] = { TPE_BLOCKING,
	    TPE_NON_BLOCKING, TPE_EITHER };
	struct mx *m = arg;
	int i;

	pthread_barrier_wait(m->start);
	for (i = 0; i < MX_ROUNDS; i++) {
		struct mx_item *it = malloc(sizeof(*it));
		int rc;

		if (it == NULL)
			abort();
		it->ran = &m->ran[m->base + i];
		it->done = m->done;
		feed_push(m->f, mx_task, it, types[rand_r(&m->seed) % 3]);
		if (rand_r(&m->seed) % 2)
			rc = tpe_strategy_produce(m->s);
		else
			rc = tpe_strategy_dispatch(m->s);
		if (rc != 0)
			abort();
	}
	return NULL;
}

static void
test_strategy_mutual_exclusion(void **state)
{
	tpe_t *pool = strategy_pool(2, 1, (struct tu_pool_opts){ 0 });
	int *ran = calloc(MX_THREADS * MX_ROUNDS, sizeof(*ran));
	struct mx m[MX_THREADS];
	pthread_t t[MX_THREADS];
	pthread_barrier_t start;
	struct tu_latch done;
	struct tpe_strategy_stats st;
	struct feed f;
	tpe_strategy_t *s;
	int i;

	(void)state;
	assert_non_null(ran);
	tu_latch_init(&done, MX_THREADS * MX_ROUNDS);
	feed_init(&f, MX_THREADS * MX_ROUNDS);
	s = new_strategy(pool, &f, TPE_STRATEGY_ADAPTIVE);
	pthread_barrier_init(&start, NULL, MX_THREADS);
	for (i = 0; i < MX_THREADS; i++) {
		m[i] = (struct mx){ s, &f, &start, ran, &done,
		    (unsigned)i + 10, i * MX_ROUNDS };
		assert_int_equal(pthread_create(&t[i], NULL, mx_main, &m[i]),
		    0);
	}
	for (i = 0; i < MX_THREADS; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	assert_true(tu_latch_wait_for(&done, TU_WAIT_BOUND));
	assert_quiescent(pool, s, &f);
	/* 12 as well: nothing left behind; 19: each task exactly once. */
	assert_int_equal(feed_len(&f), 0);
	for (i = 0; i < MX_THREADS * MX_ROUNDS; i++)
		assert_int_equal(tu_load(&ran[i]), 1);
	st = stats_of(s);
	assert_int_equal(st.pc + st.pic + st.pec + st.epc,
	    MX_THREADS * MX_ROUNDS);
	assert_int_equal(__atomic_load_n(&f.produced, __ATOMIC_SEQ_CST),
	    MX_THREADS * MX_ROUNDS);
	pthread_barrier_destroy(&start);
	finish(pool, s, &f);
	tu_latch_destroy(&done);
	free(ran);
}

/* ---- 12: no lost wake-up ---------------------------------------------- */

struct lw {
	tpe_strategy_t *s;
	struct feed *f;
	pthread_barrier_t *round;
	int *ran;
};

static void *
lw_main(void *arg)
{
	struct lw *w = arg;
	int i;

	for (i = 0; i < MX_ROUNDS; i++) {
		pthread_barrier_wait(w->round);
		feed_push(w->f, tu_count_fn, w->ran, TPE_NON_BLOCKING);
		if (tpe_strategy_produce(w->s) != 0)
			abort();
	}
	return NULL;
}

static void
test_strategy_lost_wakeup(void **state)
{
	tpe_t *pool = strategy_pool(1, 0, (struct tu_pool_opts){ 0 });
	struct lw w[MX_THREADS];
	pthread_t t[MX_THREADS];
	pthread_barrier_t round;
	struct feed f;
	tpe_strategy_t *s;
	int i, ran = 0;

	(void)state;
	feed_init(&f, MX_THREADS * MX_ROUNDS);
	s = new_strategy(pool, &f, TPE_STRATEGY_ADAPTIVE);
	pthread_barrier_init(&round, NULL, MX_THREADS);
	for (i = 0; i < MX_THREADS; i++) {
		w[i] = (struct lw){ s, &f, &round, &ran };
		assert_int_equal(pthread_create(&t[i], NULL, lw_main, &w[i]),
		    0);
	}
	for (i = 0; i < MX_THREADS; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	/* Every produce call has returned: every item was consumed (PC,
	 * in the producing threads), none is left in the queue. */
	assert_int_equal(feed_len(&f), 0);
	assert_int_equal(tu_load(&ran), MX_THREADS * MX_ROUNDS);
	assert_counts(s, MX_THREADS * MX_ROUNDS, 0, 0, 0);
	pthread_barrier_destroy(&round);
	finish(pool, s, &f);
}

/* ---- 13: produce while producing -------------------------------------- */

static void
test_strategy_produce_while_producing_reproduces(void **state)
{
	struct held x;

	(void)state;
	held_start(&x);
	/* Returns at once (the producer is held), asking for one more pass. */
	assert_int_equal(tpe_strategy_produce(x.s), 0);
	assert_int_equal(peek(x.s).state, TPE__S_REPRODUCING);
	assert_int_equal(feed_calls(&x.f), 1);
	held_release(&x);
	/* Call 1 found nothing, then the producer looped once more. */
	assert_int_equal(feed_calls(&x.f), 2);
	assert_true(pthread_equal(feed_caller(&x.f, 2),
	    feed_caller(&x.f, 1)));
	held_end(&x);
}

/*
 * The end of the tests whose pending producer waits in the queue of a
 * saturated pool: it keeps the strategy alive (22: EBUSY); once the pool
 * is unsaturated it runs, on a pool thread, as producer call `call`; then
 * everything is checked and freed.
 */
static void
queued_pending_runs(tpe_t *pool, tpe_strategy_t *s, struct feed *f,
    struct tu_saturation *sat, int call)
{
	assert_int_equal(peek(s).pending[TPE__PENDING_QUEUED], 1);
	assert_int_equal(tpe_strategy_destroy(s), EBUSY);
	tu_unsaturate(sat);
	assert_int_equal(tpe_wait_idle(pool, TU_WAIT_BOUND), 0);
	assert_int_equal(feed_calls(f), call);
	assert_false(pthread_equal(feed_caller(f, call), pthread_self()));
	finish(pool, s, f);
	tu_saturation_destroy(sat);
}

/* ---- 14: dispatch while IDLE starts one pending producer -------------- */

static void
test_strategy_dispatch_idle_starts_one(void **state)
{
	tpe_t *pool = strategy_pool(1, 0, (struct tu_pool_opts){ 0 });
	struct tu_saturation sat;
	struct feed f;
	tpe_strategy_t *s;

	(void)state;
	tu_saturate(pool, 1, 0, &sat); /* the pending producer waits */
	feed_init(&f, 1);
	s = new_strategy(pool, &f, TPE_STRATEGY_ADAPTIVE);
	assert_int_equal(tpe_strategy_dispatch(s), 0);
	assert_int_equal(tu_load(&submits), 1);
	assert_int_equal(peek(s).pending[TPE__PENDING_QUEUED], 1);
	assert_int_equal(peek(s).state, TPE__S_IDLE);
	assert_int_equal(feed_calls(&f), 0); /* nothing ran in this thread */
	/* A second dispatch before it runs starts none. */
	assert_int_equal(tpe_strategy_dispatch(s), 0);
	assert_int_equal(tu_load(&submits), 1);
	/* 22: the pending producer keeps the strategy alive, then runs. */
	queued_pending_runs(pool, s, &f, &sat, 1);
}

/*
 * Invariant 5: ADAPTIVE counts on a HANDED pending producer only, never
 * on a QUEUED one, which may wait in the pool's queue behind blocked
 * workers. Here the pool's one worker is blocked and the dispatched
 * producer waits behind it when a BLOCKING task is produced: the task
 * goes to the pool (PEC) and production goes on; it does not run here as
 * EPC on the strength of the queued producer.
 */
static void
test_strategy_adaptive_ignores_queued_pending(void **state)
{
	tpe_t *pool = strategy_pool(1, 0, (struct tu_pool_opts){ 0 });
	struct tu_saturation sat;
	struct probe p = { 0 };
	struct feed f;
	tpe_strategy_t *s;

	(void)state;
	tu_saturate(pool, 1, 0, &sat);
	feed_init(&f, 1);
	s = new_strategy(pool, &f, TPE_STRATEGY_ADAPTIVE);
	assert_int_equal(tpe_strategy_dispatch(s), 0);
	assert_int_equal(peek(s).pending[TPE__PENDING_QUEUED], 1);
	feed_push(&f, probe_fn, &p, TPE_BLOCKING);
	assert_int_equal(tpe_strategy_produce(s), 0);
	assert_int_equal(feed_calls(&f), 2);
	assert_counts(s, 0, 0, 1, 0);
	assert_int_equal(tu_ran(&p), 0); /* queued behind the blocker */
	/* The dispatched producer runs first (call 3), then the task. */
	queued_pending_runs(pool, s, &f, &sat, 3);
	assert_int_equal(tu_ran(&p), 1);
	assert_false(pthread_equal(p.thread, pthread_self()));
}

/* ---- 15: dispatch while PRODUCING submits nothing --------------------- */

static void
test_strategy_dispatch_while_producing(void **state)
{
	struct held x;

	(void)state;
	held_start(&x);
	assert_int_equal(tpe_strategy_dispatch(x.s), 0);
	assert_int_equal(peek(x.s).state, TPE__S_REPRODUCING);
	assert_int_equal(tu_load(&submits), 0);
	held_release(&x);
	assert_int_equal(feed_calls(&x.f), 2);
	assert_int_equal(tu_load(&submits), 0);
	held_end(&x);
}

/* ---- 20: a refused pending producer is undone ------------------------- */

static void
test_strategy_dispatch_refused_undoes_pending(void **state)
{
	static const enum tpe_rejection policies[] = { TPE_REJECT_ABORT,
	    TPE_REJECT_CALLER_RUNS };
	size_t i;

	(void)state;
	/* Saturated: refused (EAGAIN); with caller-runs the pool would run
	 * it in this thread, which the strategy refuses to do. */
	for (i = 0; i < 2; i++) {
		tpe_t *pool = strategy_pool(1, 0, (struct tu_pool_opts){
		    .queue = TPE_QUEUE_BOUNDED, .capacity = 1,
		    .rejection = policies[i] });
		struct tu_saturation sat;
		struct feed f;
		tpe_strategy_t *s;

		tu_saturate(pool, 1, 1, &sat);
		feed_init(&f, 1);
		s = new_strategy(pool, &f, TPE_STRATEGY_ADAPTIVE);
		assert_int_equal(tpe_strategy_dispatch(s), EAGAIN);
		assert_int_equal(tu_load(&submits), 1);
		assert_int_equal(feed_calls(&f), 0);
		assert_int_equal(peek(s).pending[TPE__PENDING_QUEUED], 0);
		assert_int_equal(peek(s).starting[TPE__PENDING_QUEUED], 0);
		tu_unsaturate(&sat);
		assert_int_equal(tpe_wait_idle(pool, TU_WAIT_BOUND), 0);
		/* Undone, so a later dispatch submits again. */
		assert_int_equal(tpe_strategy_dispatch(s), 0);
		assert_int_equal(tu_load(&submits), 2);
		assert_int_equal(tpe_wait_idle(pool, TU_WAIT_BOUND), 0);
		assert_int_equal(feed_calls(&f), 1);
		finish(pool, s, &f);
		tu_saturation_destroy(&sat);
	}
}

static void
test_strategy_dispatch_after_shutdown(void **state)
{
	tpe_t *pool = strategy_pool(1, 0, (struct tu_pool_opts){ 0 });
	struct feed f;
	tpe_strategy_t *s;

	(void)state;
	feed_init(&f, 1);
	s = new_strategy(pool, &f, TPE_STRATEGY_ADAPTIVE);
	assert_int_equal(tpe_shutdown(pool), 0);
	assert_int_equal(tpe_strategy_dispatch(s), ECANCELED);
	assert_int_equal(feed_calls(&f), 0);
	assert_int_equal(peek(s).pending[TPE__PENDING_QUEUED], 0);
	finish(pool, s, &f);
}

/* ---- 21: a PEC task the pool refuses runs in the producing thread ----- */

static void
test_strategy_pec_refused_runs_in_producer(void **state)
{
	tpe_t *pool = strategy_pool(1, 0, (struct tu_pool_opts){
	    .queue = TPE_QUEUE_BOUNDED, .capacity = 1 });
	struct tu_saturation sat;
	struct probe p[4];
	struct feed f;
	tpe_strategy_t *s;

	(void)state;
	tu_saturate(pool, 1, 1, &sat);
	feed_init(&f, 4);
	memset(p, 0, sizeof(p));
	feed_push(&f, probe_fn, &p[0], TPE_BLOCKING);
	feed_push(&f, probe_fn, &p[1], TPE_BLOCKING);
	feed_push(&f, probe_fn, &p[2], TPE_EITHER);
	feed_push(&f, probe_fn, &p[3], TPE_NON_BLOCKING);
	s = new_strategy(pool, &f, TPE_STRATEGY_PEC);
	assert_int_equal(tpe_strategy_produce(s), 0);
	assert_ran_here(p, 4, true);
	assert_true(p[2].non_blocking); /* an EITHER task: as PIC */
	assert_false(p[0].non_blocking);
	assert_counts(s, 3, 1, 0, 0);
	assert_int_equal(feed_calls(&f), 5); /* production went on */
	tu_unsaturate(&sat);
	finish(pool, s, &f);
	tu_saturation_destroy(&sat);
}

/* After a shutdown the producing thread runs everything: nothing lost. */
static void
test_strategy_produce_after_shutdown_runs_in_caller(void **state)
{
	tpe_t *pool = strategy_pool(2, 1, (struct tu_pool_opts){ 0 });
	struct probe p[2];
	struct feed f;
	tpe_strategy_t *s;

	(void)state;
	feed_init(&f, 2);
	memset(p, 0, sizeof(p));
	feed_push(&f, probe_fn, &p[0], TPE_BLOCKING);
	feed_push(&f, probe_fn, &p[1], TPE_EITHER);
	s = new_strategy(pool, &f, TPE_STRATEGY_ADAPTIVE);
	assert_int_equal(tpe_shutdown(pool), 0);
	assert_int_equal(tpe_strategy_produce(s), 0);
	assert_true(pthread_equal(p[0].thread, pthread_self()));
	assert_true(pthread_equal(p[1].thread, pthread_self()));
	assert_true(p[1].non_blocking);
	assert_counts(s, 1, 1, 0, 0);
	finish(pool, s, &f);
}

/* ---- forced modes ----------------------------------------------------- */

static void
test_strategy_forced_pc_and_pec(void **state)
{
	tpe_t *pool = strategy_pool(2, 1, (struct tu_pool_opts){ 0 });
	struct tu_latch done;
	struct probe p[6];
	struct feed f;
	tpe_strategy_t *s;
	size_t i;

	(void)state;
	/* PC: every type runs here, as it is. */
	feed_init(&f, 3);
	memset(p, 0, sizeof(p));
	feed_push(&f, probe_fn, &p[0], TPE_BLOCKING);
	feed_push(&f, probe_fn, &p[1], TPE_EITHER);
	feed_push(&f, probe_fn, &p[2], TPE_NON_BLOCKING);
	s = new_strategy(pool, &f, TPE_STRATEGY_PC);
	assert_int_equal(tpe_strategy_produce(s), 0);
	assert_ran_here(p, 3, true);
	for (i = 0; i < 3; i++)
		assert_false(p[i].non_blocking);
	assert_counts(s, 3, 0, 0, 0);
	assert_quiescent(pool, s, &f);
	assert_int_equal(tpe_strategy_destroy(s), 0);
	feed_destroy(&f);

	/* PEC: every type goes to the pool. */
	tu_latch_init(&done, 3);
	feed_init(&f, 3);
	for (i = 3; i < 6; i++)
		p[i] = (struct probe){ .done = &done };
	feed_push(&f, probe_fn, &p[3], TPE_BLOCKING);
	feed_push(&f, probe_fn, &p[4], TPE_EITHER);
	feed_push(&f, probe_fn, &p[5], TPE_NON_BLOCKING);
	s = new_strategy(pool, &f, TPE_STRATEGY_PEC);
	assert_int_equal(tpe_strategy_produce(s), 0);
	assert_true(tu_latch_wait_for(&done, TU_WAIT_BOUND));
	assert_ran_here(&p[3], 3, false);
	assert_counts(s, 0, 0, 3, 0);
	assert_int_equal(tu_load(&try_calls), 0);
	finish(pool, s, &f);
	tu_latch_destroy(&done);
}

/*
 * Forced EPC without a reserved thread: the pending producer is queued
 * (here behind a blocked worker, so it waits), every task runs here, and
 * the queued one is reused for the next tasks.
 */
static void
test_strategy_forced_epc_queues_pending(void **state)
{
	tpe_t *pool = strategy_pool(1, 0, (struct tu_pool_opts){ 0 });
	struct tu_saturation sat;
	struct probe p[3];
	struct feed f;
	tpe_strategy_t *s;
	size_t i;

	(void)state;
	tu_saturate(pool, 1, 0, &sat);
	feed_init(&f, 3);
	memset(p, 0, sizeof(p));
	for (i = 0; i < 3; i++)
		feed_push(&f, probe_fn, &p[i], TPE_BLOCKING);
	s = new_strategy(pool, &f, TPE_STRATEGY_EPC);
	assert_int_equal(tpe_strategy_produce(s), 0);
	assert_ran_here(p, 3, true);
	assert_counts(s, 0, 0, 0, 3);
	assert_int_equal(tu_load(&try_calls), 1);
	assert_int_equal(tu_load(&submits), 1); /* one, reused */
	/* It runs late: one extra pass. */
	queued_pending_runs(pool, s, &f, &sat, 5);
}

/* ---- 22: destroy while in flight -------------------------------------- */

static void
test_strategy_destroy_while_in_flight(void **state)
{
	struct held x;

	(void)state;
	held_start(&x);
	assert_int_equal(tpe_strategy_destroy(x.s), EBUSY);
	assert_int_equal(peek(x.s).callers, 1);
	held_release(&x);
	held_end(&x); /* destroys: 0 once production ended */
}

/* ---- 23, 24: every pool thread waits for a produced task -------------- */

/*
 * Both workers of a pool of 2 block in consumers (BLOCKING) that wait for
 * something only the third task, produced after they block, signals. The
 * producer's third call waits until both consumers block; the signal
 * task must still run, in the producing thread.
 */
struct starve {
	struct tu_latch blocked, signal;
	struct probe signaller;
};

static void
signal_fn(void *arg)
{
	struct starve *st = arg;

	st->signaller.thread = pthread_self();
	st->signaller.non_blocking = tpe_in_non_blocking();
	tu_latch_count_down(&st->signal);
}

static void
starve_third_call(struct feed *f, int call)
{
	struct starve *st = f->hook;

	if (call == 3)
		tu_latch_wait(&st->blocked);
}

static void
starvation(enum tpe_invocation signal_type)
{
	tpe_t *pool = strategy_pool(2, 0, (struct tu_pool_opts){ 0 });
	struct tu_latch done;
	struct starve st;
	struct probe c[2];
	struct feed f;
	tpe_strategy_t *s;
	size_t i;

	tu_latch_init(&st.blocked, 2);
	tu_latch_init(&st.signal, 1);
	tu_latch_init(&done, 2);
	feed_init(&f, 3);
	f.on_call = starve_third_call;
	f.hook = &st;
	for (i = 0; i < 2; i++) {
		c[i] = (struct probe){ .started = &st.blocked,
		    .release = &st.signal, .done = &done };
		feed_push(&f, probe_fn, &c[i], TPE_BLOCKING);
	}
	feed_push(&f, signal_fn, &st, signal_type);
	s = new_strategy(pool, &f, TPE_STRATEGY_ADAPTIVE);
	assert_int_equal(tpe_strategy_produce(s), 0);
	assert_true(tu_latch_wait_for(&done, TU_WAIT_BOUND));
	assert_true(pthread_equal(st.signaller.thread, pthread_self()));
	assert_int_equal(st.signaller.non_blocking, signal_type == TPE_EITHER);
	if (signal_type == TPE_EITHER)
		assert_counts(s, 0, 1, 2, 0);
	else
		assert_counts(s, 1, 0, 2, 0);
	finish(pool, s, &f);
	tu_latch_destroy(&st.blocked);
	tu_latch_destroy(&st.signal);
	tu_latch_destroy(&done);
}

static void
test_strategy_starvation_non_blocking(void **state)
{
	(void)state;
	starvation(TPE_NON_BLOCKING);
}

static void
test_strategy_starvation_either(void **state)
{
	(void)state;
	starvation(TPE_EITHER);
}

/* ---- 25: production continues while consumers block ------------------- */

static void
test_strategy_production_continues_while_consumers_block(void **state)
{
	tpe_t *pool = strategy_pool(2, 0, (struct tu_pool_opts){ 0 });
	struct gated g;
	struct feed f;
	tpe_strategy_t *s;

	(void)state;
	feed_init(&f, 8);
	gated_push(&g, &f, 8, 2);
	s = new_strategy(pool, &f, TPE_STRATEGY_ADAPTIVE);
	assert_int_equal(tpe_strategy_produce(s), 0);
	/* All 8 produced and the producer asked for a 9th while every
	 * worker blocks (6 tasks wait in the pool's queue). */
	assert_true(tu_latch_wait_for(&g.started, TU_WAIT_BOUND));
	assert_int_equal(feed_calls(&f), 9);
	assert_int_equal(tu_stats(pool).queued, 6);
	gated_finish(&g);
	assert_counts(s, 0, 0, 8, 0);
	finish(pool, s, &f);
}

/* ---- 30: chained strategies ------------------------------------------- */

static void
test_strategy_chained(void **state)
{
	tpe_t *pool = strategy_pool(2, 0, (struct tu_pool_opts){ 0 });
	struct tu_latch release, done;
	struct probe outer = { 0 }, sub[3];
	struct feed fo, fi;
	tpe_strategy_t *so, *si;
	size_t i;

	(void)state;
	tu_latch_init(&release, 1);
	tu_latch_init(&done, 2);
	feed_init(&fo, 1);
	feed_init(&fi, 3);
	assert_int_equal(tpe_strategy_create(&si, pool, feed_produce, &fi,
	    TPE_STRATEGY_ADAPTIVE), 0);
	/* The inner strategy's BLOCKING sub-tasks block until the outer
	 * production has returned: the outer producer never waits. */
	for (i = 0; i < 2; i++) {
		sub[i] = (struct probe){ .release = &release, .done = &done };
		feed_push(&fi, probe_fn, &sub[i], TPE_BLOCKING);
	}
	sub[2] = (struct probe){ 0 };
	feed_push(&fi, probe_fn, &sub[2], TPE_NON_BLOCKING);
	outer.inner = si;
	feed_push(&fo, probe_fn, &outer, TPE_EITHER);
	so = new_strategy(pool, &fo, TPE_STRATEGY_ADAPTIVE);
	assert_int_equal(tpe_strategy_produce(so), 0);
	assert_counts(so, 0, 1, 0, 0);
	assert_counts(si, 1, 0, 2, 0);
	assert_true(pthread_equal(sub[2].thread, pthread_self()));
	assert_true(sub[2].non_blocking);
	tu_latch_count_down(&release);
	assert_true(tu_latch_wait_for(&done, TU_WAIT_BOUND));
	for (i = 0; i < 2; i++)
		assert_false(pthread_equal(sub[i].thread, pthread_self()));
	assert_quiescent(pool, si, &fi);
	assert_int_equal(tpe_strategy_destroy(si), 0);
	feed_destroy(&fi);
	finish(pool, so, &fo);
	tu_latch_destroy(&release);
	tu_latch_destroy(&done);
}

/* ---- 31: a producer that blocks --------------------------------------- */

#define BP_TASKS 256

static void
blocking_producer(enum tpe_strategy_mode mode)
{
	tpe_t *pool = strategy_pool(4, -1, (struct tu_pool_opts){ 0 });
	struct tu_latch done;
	struct tpe_strategy_stats st;
	struct feed f;
	tpe_strategy_t *s;
	int i;

	tu_latch_init(&done, BP_TASKS);
	feed_init(&f, BP_TASKS);
	f.wait_for_items = true; /* the producer blocks in take() */
	s = new_strategy(pool, &f, mode);
	assert_int_equal(tpe_strategy_dispatch(s), 0);
	for (i = 0; i < BP_TASKS; i++) {
		/* Now and then, only once the producer is blocked. */
		if (i % 16 == 0)
			feed_wait_taker(&f);
		feed_push(&f, latch_fn, &done, TPE_BLOCKING);
	}
	assert_true(tu_latch_wait_for(&done, TU_WAIT_BOUND));
	feed_close(&f);
	st = stats_of(s);
	assert_int_equal(st.pc + st.pic + st.pec + st.epc, BP_TASKS);
	finish(pool, s, &f);
	tu_latch_destroy(&done);
}

static void
test_strategy_blocking_producer_pec(void **state)
{
	(void)state;
	blocking_producer(TPE_STRATEGY_PEC);
}

static void
test_strategy_blocking_producer_epc(void **state)
{
	(void)state;
	blocking_producer(TPE_STRATEGY_EPC);
}

static void
test_strategy_blocking_producer_adaptive(void **state)
{
	(void)state;
	blocking_producer(TPE_STRATEGY_ADAPTIVE);
}

/* ---- 3, 7, 16, 17, 18: EPC with a reserved thread --------------------- */

/*
 * A pool of 2 with one reserved thread parked and task hooks that can
 * hold the strategy's pending producer before it runs and tell when it
 * has run.
 */
static tpe_t *
epc_pool(struct hold_pending *h)
{
	tu_latch_init(&h->held, 1);
	tu_latch_init(&h->gate, 1);
	tu_latch_init(&h->ran, 1);
	h->arg = NULL;
	return warm_pool(2, 1, (struct tu_pool_opts){
	    .before = hold_pending_hook, .after = pending_ran_hook,
	    .task_hooks_ctx = h });
}

static void
epc_pool_done(struct hold_pending *h)
{
	tu_latch_destroy(&h->held);
	tu_latch_destroy(&h->gate);
	tu_latch_destroy(&h->ran);
}

/*
 * 3, 7 and 17: the task runs here (EPC) and the reserved thread takes
 * production over. The hook holds the pending producer until the task
 * runs (so it cannot arrive before the strategy chose EPC); its producer
 * call (2) then holds until the task has seen it, so the consumer finds
 * production taken and returns without calling the producer again. The
 * task also tries to destroy the strategy: EBUSY, an EPC consumer is in
 * flight.
 */
static void
epc_pending_wins(enum tpe_invocation type)
{
	struct hold_pending h;
	tpe_t *pool = epc_pool(&h);
	struct call_hold sc;
	struct probe p;
	struct feed f;
	tpe_strategy_t *s;

	REQUIRE_RESERVED_THREAD(pool);
	call_hold_init(&sc, 2);
	feed_init(&f, 1);
	f.on_call = hold_call;
	f.hook = &sc;
	s = new_strategy(pool, &f, TPE_STRATEGY_ADAPTIVE);
	metrics_on(s);
	__atomic_store_n(&h.arg, (void *)s, __ATOMIC_SEQ_CST);
	p = (struct probe){ .open = &h.gate, .release = &sc.in,
	    .destroy_me = s };
	feed_push(&f, probe_fn, &p, type);
	assert_int_equal(tpe_strategy_produce(s), 0);
	/* The consumer has returned; the reserved thread still produces. */
	assert_true(pthread_equal(p.thread, pthread_self()));
	assert_false(p.non_blocking);
	assert_int_equal(p.destroy_rc, EBUSY);
	assert_int_equal(feed_calls(&f), 2);
	assert_false(pthread_equal(feed_caller(&f, 2), pthread_self()));
	assert_int_equal(tu_load(&try_hits), 1);
	assert_counts(s, 0, 0, 0, 1);
	/* The reserved thread took production (its call 2): one hand-over,
	 * timed. */
	assert_handovers(s, 1, 0);
	tu_latch_count_down(&sc.gate);
	finish(pool, s, &f);
	assert_int_equal(feed_calls(&f), 2);
	call_hold_destroy(&sc);
	epc_pool_done(&h);
}

static void
test_strategy_epc_blocking_pending_wins(void **state)
{
	(void)state;
	epc_pending_wins(TPE_BLOCKING);
}

static void
test_strategy_epc_either_with_reserved(void **state)
{
	(void)state;
	epc_pending_wins(TPE_EITHER);
}

/*
 * 16 and 18: the pending producer is held before it runs, so the consumer
 * wins the race after each task and produces on; the second BLOCKING task
 * reuses the pending producer on its way (one tpe_try_execute in all).
 * Released, the late pending producer makes one extra pass.
 */
static void
test_strategy_epc_consumer_wins_and_reuses_pending(void **state)
{
	struct hold_pending h;
	tpe_t *pool = epc_pool(&h);
	struct probe p[2];
	struct feed f;
	tpe_strategy_t *s;

	(void)state;
	REQUIRE_RESERVED_THREAD(pool);
	feed_init(&f, 2);
	memset(p, 0, sizeof(p));
	feed_push(&f, probe_fn, &p[0], TPE_BLOCKING);
	feed_push(&f, probe_fn, &p[1], TPE_BLOCKING);
	s = new_strategy(pool, &f, TPE_STRATEGY_ADAPTIVE);
	metrics_on(s);
	__atomic_store_n(&h.arg, (void *)s, __ATOMIC_SEQ_CST);
	assert_int_equal(tpe_strategy_produce(s), 0);
	assert_true(pthread_equal(p[0].thread, pthread_self()));
	assert_true(pthread_equal(p[1].thread, pthread_self()));
	assert_counts(s, 0, 0, 0, 2);
	assert_int_equal(tu_load(&try_calls), 1); /* 18: reused */
	assert_int_equal(tu_load(&try_hits), 1);
	assert_int_equal(feed_calls(&f), 3);      /* 16: all here */
	assert_true(pthread_equal(feed_caller(&f, 3), pthread_self()));
	assert_int_equal(peek(s).pending[TPE__PENDING_HANDED], 1);
	assert_int_equal(tpe_strategy_destroy(s), EBUSY);
	tu_latch_wait(&h.held);
	tu_latch_count_down(&h.gate);
	assert_int_equal(tpe_wait_idle(pool, TU_WAIT_BOUND), 0);
	assert_int_equal(feed_calls(&f), 4); /* the late one's extra pass */
	assert_false(pthread_equal(feed_caller(&f, 4), pthread_self()));
	/* Both hand-overs taken back by the consumer; the late pending
	 * producer found no hand-over under way (production had ended). */
	assert_handovers(s, 2, 2);
	finish(pool, s, &f);
	epc_pool_done(&h);
}

/*
 * 17, when the pending producer has already finished: it took production
 * over and found nothing while the EPC task ran, so production is IDLE
 * again when the task returns, but someone took it over meanwhile: the
 * consumer leaves (tpe_strategy_create(3)) and does not call the
 * producer a third time. The task lets the pending producer go and
 * returns once the pool has run it (its after hook).
 */
static void
epc_taken_over_and_ended(enum tpe_strategy_mode mode)
{
	struct hold_pending h;
	tpe_t *pool = epc_pool(&h);
	struct probe p;
	struct feed f;
	tpe_strategy_t *s;

	REQUIRE_RESERVED_THREAD(pool);
	feed_init(&f, 1);
	s = new_strategy(pool, &f, mode);
	metrics_on(s);
	__atomic_store_n(&h.arg, (void *)s, __ATOMIC_SEQ_CST);
	p = (struct probe){ .open = &h.gate, .release = &h.ran };
	feed_push(&f, probe_fn, &p, TPE_BLOCKING);
	assert_int_equal(tpe_strategy_produce(s), 0);
	assert_true(pthread_equal(p.thread, pthread_self()));
	/* Call 1 here, call 2 by the pending producer, and no call 3. */
	assert_int_equal(feed_calls(&f), 2);
	assert_true(pthread_equal(feed_caller(&f, 1), pthread_self()));
	assert_false(pthread_equal(feed_caller(&f, 2), pthread_self()));
	assert_counts(s, 0, 0, 0, 1);
	assert_int_equal(tu_load(&try_hits), 1);
	/* The pending producer ended the hand-over (timed): not reclaimed. */
	assert_handovers(s, 1, 0);
	finish(pool, s, &f);
	assert_int_equal(feed_calls(&f), 2);
	epc_pool_done(&h);
}

static void
test_strategy_epc_leaves_after_takeover_ended(void **state)
{
	(void)state;
	epc_taken_over_and_ended(TPE_STRATEGY_EPC);
}

static void
test_strategy_adaptive_leaves_after_takeover_ended(void **state)
{
	(void)state;
	epc_taken_over_and_ended(TPE_STRATEGY_ADAPTIVE);
}

/* ---- the wait after a miss (ADAPTIVE) ---------------------------------- */

/*
 * The producer that missed waits (strategy.h, "The wait after a miss").
 * The hook is called as each wait begins, in the waiting producer's
 * thread; the tests build what the wait is for from there.
 */
static int wait_calls;                   /* A: waits begun */
static struct tu_latch *wait_opens;      /* A: counted down at the first */

static void
wait_hook(void)
{
	struct tu_latch *l = __atomic_load_n(&wait_opens, __ATOMIC_SEQ_CST);

	if (__atomic_add_fetch(&wait_calls, 1, __ATOMIC_SEQ_CST) == 1 &&
	    l != NULL)
		tu_latch_count_down(l);
}

static void
wait_hook_set(int64_t wait_ns, struct tu_latch *opens)
{
	__atomic_store_n(&wait_calls, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&wait_opens, opens, __ATOMIC_SEQ_CST);
	tpe__strategy_hand_wait_ns = wait_ns;
	tpe__strategy_hand_wait_hook = wait_hook;
}

static int
wait_hook_reset(void **state)
{
	(void)state;
	tpe__strategy_hand_wait_hook = NULL;
	tpe__strategy_hand_wait_ns = 4000;
	__atomic_store_n(&wait_opens, NULL, __ATOMIC_SEQ_CST);
	return 0;
}

/*
 * The state every wait test starts from: a pool of 2 with one reserved
 * thread parked (R) and the other worker (W) held by a blocker; a
 * thread T produces, hands production to R for its first task p1 (EPC),
 * and blocks in p1 until `p1_release` opens. So R, producing the
 * second task, misses: no thread is parked and none can park. The pool's
 * hook holds R's pending producer until p1 runs (epc_pool), so it cannot
 * arrive before T chose EPC (then T would find production taken back
 * and send p1 to the pool).
 */
struct wait_case {
	struct hold_pending h;
	tpe_t *pool;
	tpe_strategy_t *s;
	struct feed f;
	struct tu_saturation sat;         /* W's blocker */
	struct tu_latch p1_started, p1_release;
	struct probe p1;
	struct tu_latch p2_done;          /* p2's (wait_case_push_p2) */
	struct probe p2;
	pthread_t t;
};

static void
wait_case_start(struct wait_case *c, size_t tasks)
{
	if (!tpe__can_spin())
		skip(); /* one processor: the producer never waits */
	c->pool = epc_pool(&c->h);
	tu_saturate(c->pool, 1, 0, &c->sat);
	REQUIRE_RESERVED_THREAD(c->pool);
	feed_init(&c->f, tasks + 1);
	tu_latch_init(&c->p1_started, 1);
	tu_latch_init(&c->p1_release, 1);
	tu_latch_init(&c->p2_done, 1);
	c->p1 = (struct probe){ .open = &c->h.gate,
	    .started = &c->p1_started, .release = &c->p1_release };
	feed_push(&c->f, probe_fn, &c->p1, TPE_BLOCKING);
}

static void
wait_case_produce(struct wait_case *c)
{
	c->s = new_strategy(c->pool, &c->f, TPE_STRATEGY_ADAPTIVE);
	__atomic_store_n(&c->h.arg, (void *)c->s, __ATOMIC_SEQ_CST);
	c->t = produce_in_thread(c->s);
}

/* p2, the task R produces and misses with: BLOCKING, holding until
 * `release` opens (may be NULL). */
static void
wait_case_push_p2(struct wait_case *c, struct tu_latch *release)
{
	c->p2 = (struct probe){ .release = release, .done = &c->p2_done };
	feed_push(&c->f, probe_fn, &c->p2, TPE_BLOCKING);
}

/* One wait, after which R ran p2 itself (EPC): the thread that produced
 * it, not T. */
static void
assert_p2_ran_epc(struct wait_case *c)
{
	assert_true(tu_latch_wait_for(&c->p2_done, TU_WAIT_BOUND));
	assert_int_equal(tu_load(&wait_calls), 1);
	assert_true(pthread_equal(c->p2.thread, feed_caller(&c->f, 2)));
	assert_false(pthread_equal(c->p2.thread, c->t));
}

/* Opens every gate, joins T unless `joined`, and ends the test. */
static void
wait_case_finish(struct wait_case *c, bool joined)
{
	tu_latch_count_down(&c->p1_release);
	tu_unsaturate(&c->sat);
	if (!joined)
		join_produce(c->t);
	assert_true(pthread_equal(c->p1.thread, c->t));
	finish(c->pool, c->s, &c->f);
	tu_saturation_destroy(&c->sat);
	tu_latch_destroy(&c->p1_started);
	tu_latch_destroy(&c->p1_release);
	tu_latch_destroy(&c->p2_done);
	epc_pool_done(&c->h);
}

/*
 * A relay: p1 returns while R waits after its miss, so T takes production
 * over (its call 3) and R runs p2 itself, EPC, with its caches hot. Without
 * the wait, p2 went PEC (the cascade of the design notes). p2 returns
 * only once T has found nothing and ended production: production is IDLE
 * then, but T took it over from R meanwhile, so R leaves (no call 4).
 * T's call 3 begins once p2 runs: R leaves the state to T (a relayed
 * producer that went IDLE would make T end production twice).
 */
static void
test_strategy_miss_waits_for_relay(void **state)
{
	struct wait_case c;
	struct tu_latch p2_release;
	struct call_hold call3;

	(void)state;
	wait_case_start(&c, 2);
	tu_latch_init(&p2_release, 1);
	wait_case_push_p2(&c, &p2_release);
	/* T's call 3, after its relay, waits until R runs p2: R has then
	 * acted on the relay, and production must still be T's. */
	call_hold_init(&call3, 3);
	c.f.on_call = hold_call;
	c.f.hook = &call3;
	c.p2.started = &call3.gate;
	/* The first wait opens p1: T's task returns while R waits. */
	wait_hook_set(TU_WAIT_BOUND, &c.p1_release);
	wait_case_produce(&c);
	/* Without a wait nothing opens p1: open it, then fail. */
	if (!tu_latch_wait_for(&c.p1_release, TU_WAIT_BOUND)) {
		tu_latch_count_down(&c.p1_release);
		fail_msg("the producer did not wait after its miss");
	}
	join_produce(c.t); /* T produced on after p1, then ended */
	tu_latch_count_down(&p2_release);
	assert_p2_ran_epc(&c);
	assert_true(pthread_equal(feed_caller(&c.f, 3), c.t));
	assert_int_equal(tu_load(&try_hits), 1);
	assert_counts(c.s, 0, 0, 0, 2);
	wait_case_finish(&c, true);
	assert_int_equal(feed_calls(&c.f), 3);
	tu_latch_destroy(&p2_release);
	call_hold_destroy(&call3);
}

/*
 * A reserved thread that parks while R waits: W's blocker returns, W
 * finds the queue empty and parks (R's miss asked for a thread), and R's
 * retry hands production to it (call 3); R runs p2 itself, EPC. T is
 * still in p1 meanwhile, so no relay can come.
 */
static void
test_strategy_miss_waits_for_reserved(void **state)
{
	struct wait_case c;
	struct call_hold call3;

	(void)state;
	wait_case_start(&c, 2);
	/* p2 returns once call 3 began, so R cannot take production back
	 * before W arrives (the race of 16). */
	call_hold_init(&call3, 3);
	tu_latch_count_down(&call3.gate);
	c.f.on_call = hold_call;
	c.f.hook = &call3;
	wait_case_push_p2(&c, &call3.in);
	wait_hook_set(TU_WAIT_BOUND, &c.sat.release);
	wait_case_produce(&c);
	assert_p2_ran_epc(&c);
	assert_true(tu_latch_wait_for(&c.p1_started, TU_WAIT_BOUND));
	assert_false(pthread_equal(feed_caller(&c.f, 3), c.t));
	assert_false(pthread_equal(feed_caller(&c.f, 3), c.p2.thread));
	/* T's hand-off, then W's (more if W arrived before R looked again,
	 * found R producing and parked once more: the race of 16). */
	assert_true(tu_load(&try_hits) >= 2);
	assert_counts(c.s, 0, 0, 0, 2); /* p1 counted as it started */
	wait_case_finish(&c, false);
	call_hold_destroy(&call3);
}

/*
 * A wait must earn its CPU: with T and W held, no wait can end with a
 * thread, so after 4 waits in a row that found none, R waits only at
 * every 16th miss: 36 misses make 4 + 2 waits, and all 36 tasks go PEC
 * and run once the threads are free.
 */
#define PROBE_TASKS 36
static void
test_strategy_miss_wait_earns_its_cpu(void **state)
{
	struct wait_case c;
	struct tu_latch done;
	struct probe *p = calloc(PROBE_TASKS, sizeof(*p));
	size_t i;

	(void)state;
	assert_non_null(p);
	wait_case_start(&c, PROBE_TASKS + 1);
	tu_latch_init(&done, PROBE_TASKS);
	for (i = 0; i < PROBE_TASKS; i++) {
		p[i] = (struct probe){ .done = &done };
		feed_push(&c.f, probe_fn, &p[i], TPE_BLOCKING);
	}
	wait_hook_set(1000, NULL); /* 1 us: nothing can come */
	wait_case_produce(&c);
	assert_true(tu_latch_wait_for(&c.p1_started, TU_WAIT_BOUND));
	/* R produced every task (the feed's last call found it empty). */
	assert_true(TU_EVENTUALLY(feed_calls(&c.f) == PROBE_TASKS + 2,
	    TU_WAIT_BOUND));
	assert_true(TU_EVENTUALLY(stats_of(c.s).pec == PROBE_TASKS,
	    TU_WAIT_BOUND));
	assert_int_equal(tu_load(&wait_calls), 4 + 2);
	wait_case_finish(&c, false);
	assert_true(tu_latch_wait_for(&done, TU_WAIT_BOUND));
	for (i = 0; i < PROBE_TASKS; i++)
		assert_int_equal(tu_ran(&p[i]), 1);
	tu_latch_destroy(&done);
	free(p);
}

/*
 * One relay per wait (invariant 1 through 2c): two EPC consumers whose
 * tasks return while the producer waits after a miss; the first takes
 * production over, the second leaves. The chain: T hands production to
 * R1 for p1, R1 to R2 for p2 (the pool's two reserved threads; the
 * before hook holds the k-th pending producer until the k-th task runs),
 * and R2 misses with p3 (the third worker is not reserved) and waits. Its wait hook opens p1 and p2 and
 * holds the wait until both T and R1 have decided: each either called
 * the producer (call 4 on) or left (T's produce returned, R1's pool task
 * ended). So both look while R2 still waits: exactly one of them relays.
 * A second relay would make two producers.
 */
static struct {
	struct tu_latch gate[2];       /* the k-th pending producer waits */
	struct tu_latch release[2];    /* p1, p2 return */
	void *arg;                     /* A: the strategy */
	int arrivals;                  /* A: pending producers arrived */
	struct feed *f;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool t_decided, r1_decided;    /* lock */
	int t_calls, r1_calls;         /* lock: calls 4 on, per thread */
} relay2;

static void
relay2_decided(bool by_t, bool called)
{
	pthread_mutex_lock(&relay2.lock);
	if (by_t) {
		relay2.t_decided = true;
		relay2.t_calls += called;
	} else {
		relay2.r1_decided = true;
		relay2.r1_calls += called;
	}
	pthread_cond_broadcast(&relay2.cond);
	pthread_mutex_unlock(&relay2.lock);
}

static void
relay2_before(tpe_t *pool, tpe_fn fn, void *arg, void *ctx)
{
	int k;

	(void)pool;
	(void)fn;
	(void)ctx;
	if (arg == NULL ||
	    arg != __atomic_load_n(&relay2.arg, __ATOMIC_SEQ_CST))
		return;
	k = __atomic_fetch_add(&relay2.arrivals, 1, __ATOMIC_SEQ_CST);
	if (k < 2)
		tu_latch_wait(&relay2.gate[k]);
}

static void
relay2_after(tpe_t *pool, tpe_fn fn, void *arg, void *ctx)
{
	(void)pool;
	(void)fn;
	(void)ctx;
	if (arg != NULL &&
	    arg == __atomic_load_n(&relay2.arg, __ATOMIC_SEQ_CST) &&
	    pthread_equal(pthread_self(), feed_caller(relay2.f, 2)))
		relay2_decided(false, false);
}

static void
relay2_on_call(struct feed *f, int call)
{
	if (call < 4)
		return;
	if (pthread_equal(pthread_self(), feed_caller(f, 1)))
		relay2_decided(true, true);
	else if (pthread_equal(pthread_self(), feed_caller(f, 2)))
		relay2_decided(false, true);
}

/* R2's wait after its miss. */
static void
relay2_wait_hook(void)
{
	__atomic_add_fetch(&wait_calls, 1, __ATOMIC_SEQ_CST);
	tu_latch_count_down(&relay2.release[0]);
	tu_latch_count_down(&relay2.release[1]);
	pthread_mutex_lock(&relay2.lock);
	while (!relay2.t_decided || !relay2.r1_decided)
		pthread_cond_wait(&relay2.cond, &relay2.lock);
	pthread_mutex_unlock(&relay2.lock);
}

static void *
relay2_t_main(void *arg)
{
	if (tpe_strategy_produce(arg) != 0)
		abort();
	relay2_decided(true, false);
	return NULL;
}

/*
 * Two reserved threads parked: two hand-offs held at once (while the
 * first holds its thread, a miss asks for another), then both let go
 * and parked again. The waits are the "eventually" kind of warm_reserved.
 */
static void
warm_reserved_2(tpe_t *pool)
{
	struct tu_latch release;
	struct tu_blocker b[2];
	int hits = 0;

	tu_latch_init(&release, 1);
	memset(b, 0, sizeof(b));
	b[0].release = b[1].release = &release;
	assert_true(TU_EVENTUALLY(hits == 2 ||
	    (tpe_try_execute(pool, tu_blocker_fn, &b[hits]) == 0 &&
	    ++hits == 2), TU_WAIT_BOUND));
	tu_latch_count_down(&release);
	assert_true(TU_EVENTUALLY(tu_stats(pool).reserved >= 2,
	    TU_WAIT_BOUND));
	assert_int_equal(tu_ran(&b[0]) + tu_ran(&b[1]), 2);
	tu_latch_destroy(&release);
}

static void
test_strategy_miss_wait_relays_once(void **state)
{
	struct probe p[3];
	struct feed f;
	tpe_strategy_t *s;
	tpe_t *pool;
	pthread_t t;
	int k;

	(void)state;
	if (!tpe__can_spin())
		skip(); /* one processor: the producer never waits */
	memset(p, 0, sizeof(p));
	pthread_mutex_init(&relay2.lock, NULL);
	pthread_cond_init(&relay2.cond, NULL);
	for (k = 0; k < 2; k++) {
		tu_latch_init(&relay2.gate[k], 1);
		tu_latch_init(&relay2.release[k], 1);
		p[k] = (struct probe){ .open = &relay2.gate[k],
		    .release = &relay2.release[k] };
	}
	relay2.arg = NULL;
	relay2.arrivals = 0;
	relay2.t_decided = relay2.r1_decided = false;
	relay2.t_calls = relay2.r1_calls = 0;
	pool = warm_pool(3, 2, (struct tu_pool_opts){
	    .before = relay2_before, .after = relay2_after });
	warm_reserved_2(pool);
	feed_init(&f, 3);
	f.on_call = relay2_on_call;
	relay2.f = &f;
	for (k = 0; k < 3; k++)
		feed_push(&f, probe_fn, &p[k], TPE_BLOCKING);
	__atomic_store_n(&wait_calls, 0, __ATOMIC_SEQ_CST);
	tpe__strategy_hand_wait_ns = TU_WAIT_BOUND;
	tpe__strategy_hand_wait_hook = relay2_wait_hook;
	s = new_strategy(pool, &f, TPE_STRATEGY_ADAPTIVE);
	__atomic_store_n(&relay2.arg, (void *)s, __ATOMIC_SEQ_CST);
	assert_int_equal(pthread_create(&t, NULL, relay2_t_main, s), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(tpe_wait_idle(pool, TU_WAIT_BOUND), 0);
	assert_int_equal(tu_load(&wait_calls), 1);
	/* One of T and R1 took production over (call 4, which found
	 * nothing), the other left; R2 ran p3 itself. */
	assert_int_equal(relay2.t_calls + relay2.r1_calls, 1);
	assert_int_equal(feed_calls(&f), 4);
	assert_true(pthread_equal(p[2].thread, feed_caller(&f, 3)));
	assert_counts(s, 0, 0, 0, 3);
	assert_int_equal(tu_load(&try_hits), 2);
	finish(pool, s, &f);
	for (k = 0; k < 2; k++) {
		tu_latch_destroy(&relay2.gate[k]);
		tu_latch_destroy(&relay2.release[k]);
	}
	pthread_mutex_destroy(&relay2.lock);
	pthread_cond_destroy(&relay2.cond);
}

/* ---- metrics: errors, the sized struct, off -> on --------------------- */

static void
test_strategy_metrics_errors(void **state)
{
	tpe_t *pool = strategy_pool(1, 0, (struct tu_pool_opts){ 0 });
	struct tpe_strategy_metrics *m = malloc(sizeof(*m) + 16);
	unsigned char *b = (unsigned char *)m;
	uint64_t small[2];
	struct feed f;
	tpe_strategy_t *s;
	size_t i;

	(void)state;
	assert_non_null(m);
	feed_init(&f, 4);
	s = new_strategy(pool, &f, TPE_STRATEGY_PC);
	assert_int_equal(tpe_strategy_set_metrics(NULL, TPE_METRICS_ON),
	    EINVAL);
	assert_int_equal(tpe_strategy_set_metrics(s, 0x80u | TPE_METRICS_ON),
	    EINVAL);
	assert_int_equal(tpe_strategy_set_metrics(s, TPE_METRICS_TIME_ALL),
	    EINVAL);
	assert_int_equal(tpe_strategy_get_metrics(NULL, m, sizeof(*m)),
	    EINVAL);
	assert_int_equal(tpe_strategy_get_metrics(s, NULL, sizeof(*m)),
	    EINVAL);
	assert_int_equal(tpe_strategy_get_metrics(s, m, sizeof(uint64_t) - 1),
	    EINVAL);
	/* Off (the default): ENOTSUP, nothing written. */
	memset(m, 0xa5, sizeof(*m));
	assert_int_equal(tpe_strategy_get_metrics(s, m, sizeof(*m)), ENOTSUP);
	assert_true(m->pc == 0xa5a5a5a5a5a5a5a5u);
	__atomic_store_n(&fail_calloc, 1, __ATOMIC_SEQ_CST);
	assert_int_equal(tpe_strategy_set_metrics(s, TPE_METRICS_ON), ENOMEM);
	__atomic_store_n(&fail_calloc, 0, __ATOMIC_SEQ_CST);
	assert_int_equal(tpe_strategy_get_metrics(s, m, sizeof(*m)), ENOTSUP);
	assert_int_equal(tpe_strategy_set_metrics(s, TPE_METRICS_ON |
	    TPE_METRICS_TIME_ALL), 0);
	assert_int_equal(tpe_strategy_set_metrics(s, TPE_METRICS_ON), 0);
	/* Two PC tasks: counted, no hand-over. */
	{
		struct probe p[2];

		memset(p, 0, sizeof(p));
		feed_push(&f, probe_fn, &p[0], TPE_NON_BLOCKING);
		feed_push(&f, probe_fn, &p[1], TPE_BLOCKING);
		assert_int_equal(tpe_strategy_produce(s), 0);
	}
	assert_handovers(s, 0, 0);
	/* A newer caller's struct: zeroes past this version's. */
	memset(b, 0xa5, sizeof(*m) + 16);
	assert_int_equal(tpe_strategy_get_metrics(s, m, sizeof(*m) + 16), 0);
	assert_int_equal(m->pc, 2);
	for (i = sizeof(*m); i < sizeof(*m) + 16; i++)
		assert_int_equal(b[i], 0);
	/* An older one: pc only; its copy can fail. */
	small[0] = small[1] = 0xa5a5a5a5a5a5a5a5u;
	__atomic_store_n(&fail_calloc, 1, __ATOMIC_SEQ_CST);
	assert_int_equal(tpe_strategy_get_metrics(s, (void *)small,
	    sizeof(uint64_t)), ENOMEM);
	__atomic_store_n(&fail_calloc, 0, __ATOMIC_SEQ_CST);
	assert_true(small[0] == 0xa5a5a5a5a5a5a5a5u);
	assert_int_equal(tpe_strategy_get_metrics(s, (void *)small,
	    sizeof(uint64_t)), 0);
	assert_int_equal(small[0], 2);
	assert_true(small[1] == 0xa5a5a5a5a5a5a5a5u);
	/* Off again: ENOTSUP; on again: the hand-over counts restart (the
	 * mode counts are the strategy's, never reset). */
	assert_int_equal(tpe_strategy_set_metrics(s, 0), 0);
	assert_int_equal(tpe_strategy_get_metrics(s, m, sizeof(*m)), ENOTSUP);
	metrics_on(s);
	assert_handovers(s, 0, 0);
	free(m);
	finish(pool, s, &f);
}

/* ---- bad input -------------------------------------------------------- */

static void
test_strategy_bad_input(void **state)
{
	tpe_t *pool = strategy_pool(1, 0, (struct tu_pool_opts){ 0 });
	struct tpe_strategy_stats st, pattern;
	uint64_t small[2];
	struct feed f;
	tpe_strategy_t *s = NULL, *keep = (tpe_strategy_t *)&f;

	(void)state;
	feed_init(&f, 4);
	assert_int_equal(tpe_strategy_create(NULL, pool, feed_produce, &f,
	    TPE_STRATEGY_ADAPTIVE), EINVAL);
	s = keep;
	assert_int_equal(tpe_strategy_create(&s, NULL, feed_produce, &f,
	    TPE_STRATEGY_ADAPTIVE), EINVAL);
	assert_int_equal(tpe_strategy_create(&s, pool, NULL, &f,
	    TPE_STRATEGY_ADAPTIVE), EINVAL);
	assert_int_equal(tpe_strategy_create(&s, pool, feed_produce, &f,
	    (enum tpe_strategy_mode)4), EINVAL);
	assert_int_equal(tpe_strategy_create(&s, pool, feed_produce, &f,
	    (enum tpe_strategy_mode)-1), EINVAL);
	__atomic_store_n(&fail_calloc, 1, __ATOMIC_SEQ_CST);
	assert_int_equal(tpe_strategy_create(&s, pool, feed_produce, &f,
	    TPE_STRATEGY_ADAPTIVE), ENOMEM);
	__atomic_store_n(&fail_calloc, 0, __ATOMIC_SEQ_CST);
	assert_ptr_equal(s, keep); /* untouched on failure */
	assert_int_equal(tpe_strategy_produce(NULL), EINVAL);
	assert_int_equal(tpe_strategy_dispatch(NULL), EINVAL);
	/* EINVAL writes nothing (tpe_strategy_get_stats(3)): the struct
	 * keeps a pattern the library never writes. */
	memset(&st, 0xa5, sizeof(st));
	memcpy(&pattern, &st, sizeof(st));
	assert_int_equal(tpe_strategy_get_stats(NULL, &st, sizeof(st)),
	    EINVAL);
	assert_memory_equal(&st, &pattern, sizeof(st));
	assert_int_equal(tpe_strategy_destroy(NULL), EINVAL);

	s = new_strategy(pool, &f, TPE_STRATEGY_ADAPTIVE);
	assert_int_equal(tpe_strategy_get_stats(s, NULL, sizeof(st)), EINVAL);
	assert_int_equal(tpe_strategy_get_stats(s, &st, 0), EINVAL);
	assert_memory_equal(&st, &pattern, sizeof(st));
	assert_int_equal(tpe_strategy_get_stats(s, &st, sizeof(uint64_t) - 1),
	    EINVAL);
	assert_memory_equal(&st, &pattern, sizeof(st));

	/* An unknown task type counts as BLOCKING (PEC here); a task with
	 * no function is skipped and not counted. */
	{
		struct tu_latch done;
		struct probe p;

		tu_latch_init(&done, 1);
		p = (struct probe){ .done = &done };
		feed_push(&f, probe_fn, &p, (enum tpe_invocation)7);
		feed_push(&f, NULL, NULL, TPE_NON_BLOCKING);
		assert_int_equal(tpe_strategy_produce(s), 0);
		assert_true(tu_latch_wait_for(&done, TU_WAIT_BOUND));
		assert_false(pthread_equal(p.thread, pthread_self()));
		assert_counts(s, 0, 0, 1, 0);
		tu_latch_destroy(&done);
	}
	/* An older, smaller struct gets its fields and nothing past them. */
	small[0] = small[1] = 0xa5a5a5a5a5a5a5a5u;
	assert_int_equal(tpe_strategy_get_stats(s, (void *)small,
	    sizeof(uint64_t)), 0);
	assert_int_equal(small[0], 0); /* pc */
	assert_true(small[1] == 0xa5a5a5a5a5a5a5a5u);
	finish(pool, s, &f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_strategy_idle_producer),
		cmocka_unit_test(test_strategy_non_blocking_always_pc),
		cmocka_unit_test(test_strategy_blocking_no_reserved_pec),
		cmocka_unit_test(
		    test_strategy_non_blocking_producer_pec_for_blocking),
		cmocka_unit_test(
		    test_strategy_non_blocking_producer_pc_for_either),
		cmocka_unit_test(test_strategy_either_no_reserved_pic),
		cmocka_unit_test(test_strategy_counter_identity),
		cmocka_unit_test(test_strategy_mutual_exclusion),
		cmocka_unit_test(test_strategy_lost_wakeup),
		cmocka_unit_test(
		    test_strategy_produce_while_producing_reproduces),
		cmocka_unit_test(test_strategy_dispatch_idle_starts_one),
		cmocka_unit_test(test_strategy_adaptive_ignores_queued_pending),
		cmocka_unit_test(test_strategy_dispatch_while_producing),
		cmocka_unit_test(test_strategy_dispatch_refused_undoes_pending),
		cmocka_unit_test(test_strategy_dispatch_after_shutdown),
		cmocka_unit_test(test_strategy_pec_refused_runs_in_producer),
		cmocka_unit_test(
		    test_strategy_produce_after_shutdown_runs_in_caller),
		cmocka_unit_test(test_strategy_forced_pc_and_pec),
		cmocka_unit_test(test_strategy_forced_epc_queues_pending),
		cmocka_unit_test(test_strategy_destroy_while_in_flight),
		cmocka_unit_test(test_strategy_starvation_non_blocking),
		cmocka_unit_test(test_strategy_starvation_either),
		cmocka_unit_test(
		    test_strategy_production_continues_while_consumers_block),
		cmocka_unit_test(test_strategy_chained),
		cmocka_unit_test(test_strategy_blocking_producer_pec),
		cmocka_unit_test(test_strategy_blocking_producer_epc),
		cmocka_unit_test(test_strategy_blocking_producer_adaptive),
		cmocka_unit_test(test_strategy_epc_blocking_pending_wins),
		cmocka_unit_test(test_strategy_epc_either_with_reserved),
		cmocka_unit_test(
		    test_strategy_epc_consumer_wins_and_reuses_pending),
		cmocka_unit_test(test_strategy_epc_leaves_after_takeover_ended),
		cmocka_unit_test(
		    test_strategy_adaptive_leaves_after_takeover_ended),
		cmocka_unit_test_teardown(test_strategy_miss_waits_for_relay,
		    wait_hook_reset),
		cmocka_unit_test_teardown(
		    test_strategy_miss_waits_for_reserved, wait_hook_reset),
		cmocka_unit_test_teardown(
		    test_strategy_miss_wait_earns_its_cpu, wait_hook_reset),
		cmocka_unit_test_teardown(
		    test_strategy_miss_wait_relays_once, wait_hook_reset),
		cmocka_unit_test(test_strategy_metrics_errors),
		cmocka_unit_test(test_strategy_bad_input),
	};

	tu_time_bound(0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
