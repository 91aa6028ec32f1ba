/* SPDX-License-Identifier: MIT */
/*
 * fault_sweep.c - every allocation and every thread start of a scenario
 * made to fail in turn.
 *
 * Each scenario (the table `scenarios` at the end: adding one is a function
 * and a line) is a short, fixed use of the library. It first runs once
 * counting the allocations (malloc, calloc, realloc, posix_memalign) and
 * thread starts (pthread_create) it reaches, then once for every k with
 * exactly the k-th allocation failing, once for every k with every
 * allocation from the k-th on failing (memory gone for good: the clean-up
 * must need none), then once for every k with the k-th thread start
 * failing. Every run is a forked child, with an alarm, so that
 * a crash, an abort, a hang or a spin is reported for its k and the next
 * run starts from a fresh process (no node cached by a thread, no state
 * left behind). A run passes when:
 *   - every call returned 0 or an error its manual page documents for what
 *     failed (ENOMEM for an allocation, EAGAIN for a thread start; EAGAIN
 *     also where the scenario may meet a documented refusal) and the
 *     scenario adapts (a failed create ends it, a refused task is not
 *     counted, ...); an error when nothing was made to fail is a failure;
 *   - a call that failed wrote no out-parameter;
 *   - after the pool terminated, every accepted task ran exactly once or
 *     was handed back (shutdown_now's callback, the discard callback), and
 *     every refused task neither ran nor was handed back;
 *   - nothing leaked: every block allocated through the wrappers was freed
 *     (a table of live blocks; in the ASan build, LeakSanitizer checks the
 *     counting and thread-start runs again when the child exits);
 *   - the child ended within its alarm (TPE_TEST_TIME_SCALE scales it).
 *
 * Linked with -Wl,--wrap= for those functions and free; libtpe_core.la is
 * a static archive, so the library's calls are redirected too. This file's
 * scenario code allocates nothing itself, so every allocation counted is
 * the library's (libc's and cmocka's own are not redirected).
 *
 * Figures are printed as TAP comments: scenarios, fault points injected
 * (allocations once, allocations from then on, thread starts), failures
 * found.
 */
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "helpers.h"
#include "tpe/thpool.h"

#include "pool/node_cache.h"

/* ---- the wrappers ----------------------------------------------------- */

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
int __real_posix_memalign(void **p, size_t align, size_t size);
void __real_free(void *p);
int __real_pthread_create(pthread_t *thread, const pthread_attr_t *attr,
    void *(*start)(void *), void *arg);

void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
int __wrap_posix_memalign(void **p, size_t align, size_t size);
void __wrap_free(void *p);
int __wrap_pthread_create(pthread_t *thread, const pthread_attr_t *attr,
    void *(*start)(void *), void *arg);

/*
 * The child's counters, in memory shared with the parent, which reads them
 * after the child ended. Written atomically: the library allocates and
 * starts threads from its workers too.
 */
struct run {
	long allocs;     /* allocation calls seen */
	long starts;     /* pthread_create calls seen */
	long fail_alloc; /* the allocation to fail (0-based), or -1 */
	long fail_start; /* the thread start to fail, or -1 */
	int persistent;  /* fail_alloc and every allocation after it fail */
	long fired;      /* faults injected (0 or 1) */
	long live;       /* blocks still allocated at the end */
};

static struct run *run;

static bool
hit(long *seen, long at, bool persistent)
{
	long n = __atomic_fetch_add(seen, 1, __ATOMIC_SEQ_CST);

	if (at < 0 || (persistent ? n < at : n != at))
		return false;
	__atomic_store_n(&run->fired, 1, __ATOMIC_SEQ_CST);
	return true;
}

static bool
alloc_fails(void)
{
	return run != NULL &&
	    hit(&run->allocs, run->fail_alloc, run->persistent != 0);
}

/*
 * The live blocks: an open-addressing set of the pointers the wrappers
 * returned and free has not taken back. A pointer free gets that is not
 * in it (allocated by libc for itself) is passed on untouched.
 */
#define LIVE_SLOTS 4096
#define TOMBSTONE ((void *)1)
static void *live[LIVE_SLOTS];
static long live_count;
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static bool live_overflow;

static size_t
live_hash(const void *p)
{
	uintptr_t v = (uintptr_t)p;

	return (size_t)((v >> 4) * UINT64_C(0x9e3779b97f4a7c15) >> 20) %
	    LIVE_SLOTS;
}

static void
live_add(void *p)
{
	size_t i, n;

	if (p == NULL || run == NULL)
		return;
	pthread_mutex_lock(&live_lock);
	for (i = live_hash(p), n = 0; n < LIVE_SLOTS;
	    i = (i + 1) % LIVE_SLOTS, n++)
		if (live[i] == NULL || live[i] == TOMBSTONE) {
			live[i] = p;
			live_count++;
			break;
		}
	if (n == LIVE_SLOTS)
		live_overflow = true;
	pthread_mutex_unlock(&live_lock);
}

static void
live_remove(void *p)
{
	size_t i, n;

	if (p == NULL || run == NULL)
		return;
	pthread_mutex_lock(&live_lock);
	for (i = live_hash(p), n = 0; n < LIVE_SLOTS && live[i] != NULL;
	    i = (i + 1) % LIVE_SLOTS, n++)
		if (live[i] == p) {
			live[i] = TOMBSTONE;
			live_count--;
			break;
		}
	pthread_mutex_unlock(&live_lock);
}

void *
__wrap_malloc(size_t size)
{
	void *p;

	if (alloc_fails()) {
		errno = ENOMEM;
		return NULL;
	}
	p = __real_malloc(size);
	live_add(p);
	return p;
}

void *
__wrap_calloc(size_t n, size_t size)
{
	void *p;

	if (alloc_fails()) {
		errno = ENOMEM;
		return NULL;
	}
	p = __real_calloc(n, size);
	live_add(p);
	return p;
}

void *
__wrap_realloc(void *old, size_t size)
{
	void *p;

	if (alloc_fails()) {
		errno = ENOMEM;
		return NULL;
	}
	p = __real_realloc(old, size);
	if (p != NULL) {
		live_remove(old);
		live_add(p);
	}
	return p;
}

int
__wrap_posix_memalign(void **p, size_t align, size_t size)
{
	int rc;

	if (alloc_fails())
		return ENOMEM;
	rc = __real_posix_memalign(p, align, size);
	if (rc == 0)
		live_add(*p);
	return rc;
}

void
__wrap_free(void *p)
{
	live_remove(p);
	__real_free(p);
}

int
__wrap_pthread_create(pthread_t *thread, const pthread_attr_t *attr,
    void *(*start)(void *), void *arg)
{
	if (run != NULL && hit(&run->starts, run->fail_start, false))
		return EAGAIN;
	return __real_pthread_create(thread, attr, start, arg);
}

/* ---- the child's checks ----------------------------------------------- */

static const char *scenario_name;

/* A broken promise: reported on stderr (the test's log), the run fails. */
#define CHECK(cond)                                                         \
	do {                                                                \
		if (!(cond))                                                \
			violation(__LINE__, #cond);                         \
	} while (0)

static void
violation(int line, const char *what)
{
	fprintf(stderr, "# %s (alloc %ld%s, start %ld): line %d: %s\n",
	    scenario_name, run->fail_alloc, run->persistent ? " on" : "",
	    run->fail_start, line, what);
	fflush(stderr);
	_exit(3);
}

static bool
fired(void)
{
	return __atomic_load_n(&run->fired, __ATOMIC_SEQ_CST) != 0;
}

/*
 * A call's result: 0, or an error that what failed explains. `refusal` is
 * an error the call may also return without any fault (a documented
 * refusal in this scenario: EAGAIN from tpe_try_execute), or 0.
 */
static int
expect(int rc, int refusal)
{
	if (rc == 0 || (refusal != 0 && rc == refusal))
		return rc;
	if (rc != ENOMEM && rc != EAGAIN)
		violation(0, strerror(rc));
	CHECK(fired());
	/* ENOMEM only for memory. EAGAIN for a thread, or for memory when the
	 * worker that could not be made was an extra one: then the pool is
	 * saturated and the rejection policy refuses (tpe_execute(3)). */
	CHECK(rc != ENOMEM || run->fail_alloc >= 0);
	return rc;
}

/* ---- tasks and their accounting --------------------------------------- */

#define SLOTS 32

/* One task's fate; `ran` and `handed` are atomic (workers write them). */
struct slot {
	int accepted;
	int ran;
	int handed;
};

static struct slot slots[SLOTS];

static void
task_fn(void *arg)
{
	struct slot *s = arg;

	__atomic_add_fetch(&s->ran, 1, __ATOMIC_SEQ_CST);
}

static void *
call_fn(void *arg)
{
	task_fn(arg);
	return arg;
}

/* shutdown_now's and the discard callback: fn is NULL for a submit task,
 * whose arg is the callable's, a slot too. */
static void
handback_fn(tpe_fn fn, void *arg, void *ctx)
{
	struct slot *s = arg;

	(void)fn;
	(void)ctx;
	__atomic_add_fetch(&s->handed, 1, __ATOMIC_SEQ_CST);
}

/* A task that holds its worker until `gate` opens. */
static struct tu_latch gate;

static void
gated_fn(void *arg)
{
	tu_latch_wait(&gate);
	task_fn(arg);
}

/* Every accepted task ran or came back exactly once; no refused one did. */
static void
check_slots(void)
{
	int i;

	for (i = 0; i < SLOTS; i++) {
		struct slot *s = &slots[i];
		int n = tu_load(&s->ran) + tu_load(&s->handed);

		CHECK(n == (s->accepted ? 1 : 0));
	}
}

static int
execute(tpe_t *pool, tpe_fn fn, int i)
{
	int rc = expect(tpe_execute(pool, fn, &slots[i]), 0);

	slots[i].accepted = rc == 0;
	return rc;
}

/* ---- pools ------------------------------------------------------------ */

struct shape {
	size_t core, max;
	enum tpe_queue_kind kind;
	size_t cap;
	enum tpe_policy policy;
	int reserved;
};

/* TPE_METRICS_* for the pools pool_of makes (a metrics scenario sets it
 * in its child). */
static unsigned pool_metrics;

/* Creates a pool of `sh`; NULL when an injected fault refused it (then
 * nothing was written and nothing is kept). */
static tpe_t *
pool_of(const struct shape *sh)
{
	tpe_attr_t *attr = (tpe_attr_t *)&attr;  /* sentinel */
	tpe_t *pool = (tpe_t *)&pool;
	int rc;

	rc = expect(tpe_attr_create(&attr), 0);
	if (rc != 0) {
		CHECK(attr == (tpe_attr_t *)&attr);
		return NULL;
	}
	CHECK(tpe_attr_set_pool_size(attr, sh->core, sh->max) == 0);
	CHECK(tpe_attr_set_queue(attr, sh->kind, sh->cap) == 0);
	CHECK(tpe_attr_set_policy(attr, sh->policy) == 0);
	CHECK(tpe_attr_set_reserved_threads(attr, sh->reserved) == 0);
	CHECK(tpe_attr_set_discard_callback(attr, handback_fn, NULL) == 0);
	CHECK(tpe_attr_set_metrics(attr, pool_metrics) == 0);
	rc = expect(tpe_create(&pool, attr), 0);
	tpe_attr_destroy(attr);
	if (rc != 0) {
		CHECK(pool == (tpe_t *)&pool);
		return NULL;
	}
	return pool;
}

/* The end every run must reach: shut down, terminate, destroy. */
static void
finish(tpe_t *pool)
{
	CHECK(tpe_shutdown(pool) == 0);
	CHECK(tpe_await_termination(pool, 30 * TU_S) == 0);
	CHECK(tpe_destroy(pool) == 0);
}

/* ---- the scenarios ------------------------------------------------------ */

static void
run_shape(const struct shape *sh, int tasks)
{
	tpe_t *pool = pool_of(sh);
	int i;

	if (pool == NULL)
		return;
	for (i = 0; i < tasks; i++)
		(void)execute(pool, task_fn, i);
	finish(pool);
}

/* submit + future get: an accepted call's future completes with its
 * result; a refused one wrote no future. */
static void
sc_submit(void)
{
	static const struct shape sh = { 1, 2, TPE_QUEUE_UNBOUNDED, 0,
	    TPE_POLICY_QUEUE_FIRST, 0 };
	tpe_t *pool = pool_of(&sh);
	tpe_future_t *f[4];
	void *result;
	int i;

	if (pool == NULL)
		return;
	for (i = 0; i < 4; i++) {
		f[i] = (tpe_future_t *)&f[i];
		slots[i].accepted =
		    expect(tpe_submit(pool, call_fn, &slots[i], &f[i]), 0) == 0;
		if (!slots[i].accepted)
			CHECK(f[i] == (tpe_future_t *)&f[i]);
	}
	for (i = 0; i < 4; i++) {
		if (!slots[i].accepted)
			continue;
		result = NULL;
		CHECK(tpe_future_get(f[i], -1, &result) == 0);
		CHECK(result == &slots[i]);
		CHECK(tpe_future_is_done(f[i]));
		tpe_future_release(f[i]);
	}
	finish(pool);
}

/*
 * The blocking submit on a bounded pool smaller than the work: an accepted
 * call ran its task once (a future with its result); a refused one kept
 * it, with ENOMEM for memory, or EAGAIN when no worker is alive and none
 * could start (tpe_execute_wait(3)); without a limit it never times out.
 */
static void
sc_execute_wait(void)
{
	static const struct shape sh = { 1, 2, TPE_QUEUE_BOUNDED, 1,
	    TPE_POLICY_QUEUE_FIRST, 0 };
	tpe_t *pool = pool_of(&sh);
	tpe_future_t *f[2];
	void *result;
	int i;

	if (pool == NULL)
		return;
	for (i = 0; i < 6; i++)
		slots[i].accepted = expect(tpe_execute_wait(pool, task_fn,
		    &slots[i], -1), 0) == 0;
	for (i = 0; i < 2; i++) {
		f[i] = (tpe_future_t *)&f[i];
		slots[6 + i].accepted = expect(tpe_submit_wait(pool, call_fn,
		    &slots[6 + i], -1, &f[i]), 0) == 0;
		if (!slots[6 + i].accepted)
			CHECK(f[i] == (tpe_future_t *)&f[i]);
	}
	for (i = 0; i < 2; i++) {
		if (!slots[6 + i].accepted)
			continue;
		result = NULL;
		CHECK(tpe_future_get(f[i], -1, &result) == 0);
		CHECK(result == &slots[6 + i]);
		tpe_future_release(f[i]);
	}
	finish(pool);
}

/* shutdown_now with queued tasks and futures: each comes back once. */
static void
sc_shutdown_now(void)
{
	static const struct shape sh = { 1, 1, TPE_QUEUE_UNBOUNDED, 0,
	    TPE_POLICY_QUEUE_FIRST, 0 };
	tpe_t *pool = pool_of(&sh);
	tpe_future_t *f[3];
	void *result;
	int i;

	if (pool == NULL)
		return;
	tu_latch_init(&gate, 1);
	(void)execute(pool, gated_fn, 0);
	for (i = 1; i < 4; i++)
		(void)execute(pool, task_fn, i);
	for (i = 0; i < 3; i++) {
		f[i] = NULL;
		slots[4 + i].accepted = expect(tpe_submit(pool, call_fn,
		    &slots[4 + i], &f[i]), 0) == 0;
	}
	CHECK(tpe_shutdown_now(pool, handback_fn, NULL) == 0);
	tu_latch_count_down(&gate);
	CHECK(tpe_await_termination(pool, 30 * TU_S) == 0);
	for (i = 0; i < 3; i++) {
		int rc;

		if (f[i] == NULL)
			continue;
		rc = tpe_future_get(f[i], 0, &result);
		CHECK(rc == 0 || rc == ECANCELED);
		CHECK((rc == ECANCELED) == (tu_load(&slots[4 + i].handed) == 1));
		tpe_future_release(f[i]);
	}
	CHECK(tpe_destroy(pool) == 0);
	tu_latch_destroy(&gate);
}

/* set_pool_size growth with tasks queued behind a busy worker: the new
 * workers it starts for them may fail to start; it still returns 0. */
static void
sc_set_pool_size(void)
{
	static const struct shape sh = { 1, 1, TPE_QUEUE_UNBOUNDED, 0,
	    TPE_POLICY_QUEUE_FIRST, 0 };
	tpe_t *pool = pool_of(&sh);
	int i;

	if (pool == NULL)
		return;
	tu_latch_init(&gate, 1);
	(void)execute(pool, gated_fn, 0);
	for (i = 1; i < 5; i++)
		(void)execute(pool, task_fn, i);
	CHECK(tpe_set_pool_size(pool, 4, 4) == 0);
	CHECK(tpe_set_pool_size(pool, 4, 6) == 0);
	tu_latch_count_down(&gate);
	for (i = 5; i < 8; i++)
		(void)execute(pool, task_fn, i);
	finish(pool);
	tu_latch_destroy(&gate);
}

/* prestart: the workers *started counts were started, even on error. */
static void
sc_prestart(void)
{
	static const struct shape sh = { 3, 3, TPE_QUEUE_UNBOUNDED, 0,
	    TPE_POLICY_QUEUE_FIRST, 0 };
	tpe_t *pool = pool_of(&sh);
	size_t started = 99;
	int rc, i;

	if (pool == NULL)
		return;
	rc = expect(tpe_prestart_core_threads(pool, &started), 0);
	CHECK(rc == 0 ? started == 3 : started < 3);
	CHECK(tu_stats(pool).pool_size <= 3);
	for (i = 0; i < 3; i++)
		(void)execute(pool, task_fn, i);
	finish(pool);
}

/* Reserved threads + tpe_try_execute (EAGAIN: none parked, documented),
 * falling back to tpe_execute as its manual page shows. */
static void
sc_reserved(void)
{
	static const struct shape sh = { 1, 3, TPE_QUEUE_UNBOUNDED, 0,
	    TPE_POLICY_QUEUE_FIRST, 2 };
	tpe_t *pool = pool_of(&sh);
	int i, rc;

	if (pool == NULL)
		return;
	(void)execute(pool, task_fn, 0);
	(void)tpe_wait_idle(pool, 5 * TU_S);
	for (i = 1; i < 6; i++) {
		rc = expect(tpe_try_execute(pool, task_fn, &slots[i]), EAGAIN);
		if (rc == 0)
			slots[i].accepted = 1;
		else
			(void)execute(pool, task_fn, i);
	}
	finish(pool);
}

/* tpe_strategy_*: every produced task runs exactly once, whatever the pool
 * refuses; dispatch may fail with ENOMEM/EAGAIN; destroy frees all. */
static int produced;   /* the producer is never called by two threads */

static bool
produce_fn(void *ctx, tpe_fn *fn, void **arg, enum tpe_invocation *type)
{
	int n = __atomic_load_n((int *)ctx, __ATOMIC_SEQ_CST);
	int i = __atomic_load_n(&produced, __ATOMIC_SEQ_CST);

	if (i >= n)
		return false;
	__atomic_store_n(&produced, i + 1, __ATOMIC_SEQ_CST);
	slots[i].accepted = 1;
	*fn = task_fn;
	*arg = &slots[i];
	*type = (enum tpe_invocation)(i % 3);
	return true;
}

static void
strategy(enum tpe_strategy_mode mode, int reserved)
{
	struct shape sh = { 2, 2, TPE_QUEUE_UNBOUNDED, 0,
	    TPE_POLICY_QUEUE_FIRST, 0 };
	tpe_strategy_t *s = (tpe_strategy_t *)&s;
	static int n;
	tpe_t *pool;
	int rc;

	sh.reserved = reserved;
	if ((pool = pool_of(&sh)) == NULL)
		return;
	__atomic_store_n(&n, 6, __ATOMIC_SEQ_CST);
	rc = expect(tpe_strategy_create(&s, pool, produce_fn, &n, mode), 0);
	if (rc != 0) {
		CHECK(s == (tpe_strategy_t *)&s);
		finish(pool);
		return;
	}
	/* 0, or after a fault only ENOMEM (memory) or EAGAIN: the errors
	 * tpe_strategy_dispatch(3) lists for it, not any error. */
	(void)expect(tpe_strategy_dispatch(s), 0);
	CHECK(tpe_strategy_produce(s) == 0);
	__atomic_store_n(&n, 12, __ATOMIC_SEQ_CST);  /* read by the producer */
	CHECK(tpe_strategy_produce(s) == 0);
	CHECK(tpe_shutdown(pool) == 0);
	CHECK(tpe_await_termination(pool, 30 * TU_S) == 0);
	/* A producer still on its way ran before termination. */
	CHECK(tu_load(&produced) == 12);
	CHECK(tpe_strategy_destroy(s) == 0);
	CHECK(tpe_destroy(pool) == 0);
}

static void
sc_strategy_adaptive(void)
{
	strategy(TPE_STRATEGY_ADAPTIVE, 1);
}

static void
sc_strategy_pec(void)
{
	strategy(TPE_STRATEGY_PEC, 0);
}

static void
sc_strategy_epc(void)
{
	strategy(TPE_STRATEGY_EPC, 1);
}

/* ---- the sweep -------------------------------------------------------- */

/* A scenario: fn, or (fn NULL) create a pool of `shape`, execute `tasks`
 * tasks, shut down. */
struct scenario {
	const char *name;
	void (*fn)(void);
	struct shape shape;
	int tasks;
};

#define QF TPE_POLICY_QUEUE_FIRST
#define SF TPE_POLICY_SCALE_FIRST

/*
 * Adding a scenario: a line here (and a function above, for more than
 * create + execute + shutdown). The sizes keep every task within the
 * pool's room, so that a refusal can only come from an injected fault:
 * the hand-off pool's max covers its tasks; a per-worker pool with no
 * task checks its create, which starts every worker.
 */
/* ---- the services beside the pool: tasklets, rings, thpool ------------ */

static int
tasklet_fn(void *ctx)
{
	(void)ctx;
	return TPE_DONE;
}

/* A tasklet's end: 0 counts as ran, anything else as handed back, so that
 * check_slots sees each accepted tasklet end exactly once. */
static void
tasklet_end(void *ctx, int result)
{
	struct slot *s = ctx;

	__atomic_add_fetch(result == 0 ? &s->ran : &s->handed, 1,
	    __ATOMIC_SEQ_CST);
}

/* A tasklet service and two jobs (one with a blocking tasklet): an accepted
 * job ends every tasklet once; a refused one called and ended none. */
static void
sc_coop(void)
{
	struct tpe_coop_config cfg = { .threads = 2 };
	tpe_coop_t *coop = (tpe_coop_t *)&coop;
	struct tpe_tasklet t[3];
	int j, k;

	if (expect(tpe_coop_create(&coop, &cfg, sizeof(cfg)), 0) != 0) {
		CHECK(coop == (tpe_coop_t *)&coop);
		return;
	}
	for (j = 0; j < 2; j++) {
		tpe_job_t *job = (tpe_job_t *)&job;

		for (k = 0; k < 3; k++)
			t[k] = (struct tpe_tasklet){ tasklet_fn,
			    &slots[3 * j + k], tasklet_end,
			    j == 1 && k == 2 ? TPE_TASKLET_BLOCKING : 0 };
		if (expect(tpe_coop_submit(coop, t, 3, sizeof(t[0]), &job),
		    0) != 0) {
			CHECK(job == (tpe_job_t *)&job);
			continue;
		}
		for (k = 0; k < 3; k++)
			slots[3 * j + k].accepted = 1;
		if (j == 0) {
			CHECK(tpe_job_wait(job, -1) == 0);
		} else {
			/* The outcome's own channel: 0 here, nothing failed. */
			int result = -1;

			CHECK(tpe_job_wait_result(job, -1, &result) == 0);
			CHECK(result == 0);
		}
		tpe_job_release(job);
	}
	CHECK(tpe_coop_destroy(coop) == 0);
}

/* A ring: created or ENOMEM with nothing written; then no allocation. */
static void
sc_ring(void)
{
	tpe_ring_t *ring = (tpe_ring_t *)&ring;
	void *item = NULL;

	if (expect(tpe_ring_create(&ring, 8), 0) != 0) {
		CHECK(ring == (tpe_ring_t *)&ring);
		return;
	}
	CHECK(tpe_ring_offer(ring, &slots[0]) == 0);
	CHECK(tpe_ring_poll(ring, &item) == 0 && item == &slots[0]);
	tpe_ring_destroy(ring);
}

/* The C-Thread-Pool API: thpool_init gives NULL only for a fault,
 * thpool_add_work -1 only for one, and every added job runs once. */
static void
sc_thpool(void)
{
	threadpool tp = thpool_init(2);
	int i;

	if (tp == NULL) {
		CHECK(fired());
		return;
	}
	for (i = 0; i < 6; i++) {
		slots[i].accepted = thpool_add_work(tp, task_fn, &slots[i]) == 0;
		if (!slots[i].accepted)
			CHECK(fired());
	}
	thpool_wait(tp);
	thpool_destroy(tp);
}

/* ---- delayed and periodic tasks (tpe_schedule(3)) ---------------------- */

/* A failed schedule call kept the task and, if it wrote the future, wrote
 * NULL (tpe.h: "on any error nothing was scheduled"). */
static int
scheduled(int rc, tpe_future_t **f, tpe_future_t *sentinel, int i)
{
	rc = expect(rc, 0);
	slots[i].accepted = rc == 0;
	if (rc != 0 && f != NULL)
		CHECK(*f == NULL || *f == sentinel);
	return rc;
}

/*
 * The four kinds of schedule: one due now without a future, a callable
 * with its result, one in 10 s cancelled at once (its argument comes back
 * through the discard callback), one still pending at tpe_shutdown (it
 * runs: Java's default). The first schedule starts the timer thread:
 * EAGAIN when that start fails, ENOMEM for memory.
 */
static void
sc_schedule(void)
{
	static const struct shape sh = { 1, 2, TPE_QUEUE_UNBOUNDED, 0,
	    TPE_POLICY_QUEUE_FIRST, 0 };
	tpe_t *pool = pool_of(&sh);
	tpe_future_t *f1 = (tpe_future_t *)&f1, *f2 = (tpe_future_t *)&f2;
	void *result = NULL;
	int64_t d;
	int rc;

	if (pool == NULL)
		return;
	(void)scheduled(tpe_schedule(pool, task_fn, &slots[0], 0, NULL), NULL,
	    NULL, 0);
	if (scheduled(tpe_schedule_call(pool, call_fn, &slots[1], 100000,
	    &f1), &f1, (tpe_future_t *)&f1, 1) == 0) {
		/* Memory gone for good: the due task is offered again
		 * every millisecond and never enters the pool. */
		rc = tpe_future_get(f1, 2 * TU_S, &result);
		CHECK(rc == 0 || (rc == ETIMEDOUT && fired()));
		CHECK(rc != 0 || result == &slots[1]);
		tpe_future_release(f1);
	}
	if (scheduled(tpe_schedule(pool, task_fn, &slots[2], 10 * TU_S, &f2),
	    &f2, (tpe_future_t *)&f2, 2) == 0) {
		CHECK(tpe_future_get_delay(f2, &d) == 0 && d > 0);
		CHECK(tpe_future_cancel(f2) == 0);
		tpe_future_release(f2);
	}
	(void)scheduled(tpe_schedule(pool, task_fn, &slots[3], TU_MS, NULL),
	    NULL, NULL, 3);
	finish(pool);
}

/* Periodic runs: counted apart (any number); the argument comes back
 * once, by the discard callback, when the task stops. */
static int periodic_runs, periodic_stopped;
static tpe_future_t *periodic_self;

static void
periodic_fn(void *arg)
{
	/* Pairs with the release store of periodic_self. */
	tpe_future_t *f = __atomic_load_n(&periodic_self, __ATOMIC_ACQUIRE);

	(void)arg;
	/* The fixed-rate task stops itself from its second run on. */
	if (__atomic_add_fetch(&periodic_runs, 1, __ATOMIC_SEQ_CST) >= 2 &&
	    f != NULL && !__atomic_exchange_n(&periodic_stopped, 1,
	    __ATOMIC_SEQ_CST))
		CHECK(tpe_future_cancel(f) == 0);
}

/*
 * A fixed-rate task that cancels itself and a fixed-delay one that
 * tpe_shutdown stops (Java's default), each re-armed through the heap
 * (whose growth may fail: the task is then cancelled and handed back).
 */
static void
sc_periodic(void)
{
	static const struct shape sh = { 1, 1, TPE_QUEUE_UNBOUNDED, 0,
	    TPE_POLICY_QUEUE_FIRST, 0 };
	tpe_t *pool = pool_of(&sh);
	tpe_future_t *f = NULL;
	int i, rc;

	if (pool == NULL)
		return;
	if (scheduled(tpe_schedule_at_fixed_rate(pool, periodic_fn,
	    &slots[0], 0, 100000, &f), &f, NULL, 0) == 0) {
		__atomic_store_n(&periodic_self, f, __ATOMIC_RELEASE);
		rc = tpe_future_get(f, 2 * TU_S, NULL);
		CHECK(rc == ECANCELED || (rc == ETIMEDOUT && fired()));
	}
	(void)scheduled(tpe_schedule_with_fixed_delay(pool, periodic_fn,
	    &slots[1], 0, 200000, NULL), NULL, NULL, 1);
	finish(pool);
	if (f != NULL)
		tpe_future_release(f);
	/* Each accepted periodic task came back once, after its runs. */
	for (i = 0; i < 2; i++) {
		CHECK(tu_load(&slots[i].handed) == (slots[i].accepted ? 1 : 0));
		slots[i].handed = slots[i].accepted = 0;
	}
}

/* tpe_shutdown_now with scheduled tasks pending: each is handed back
 * once, its future cancelled at once. */
static void
sc_schedule_shutdown_now(void)
{
	static const struct shape sh = { 1, 1, TPE_QUEUE_UNBOUNDED, 0,
	    TPE_POLICY_QUEUE_FIRST, 0 };
	tpe_t *pool = pool_of(&sh);
	tpe_future_t *f[3];
	int i;

	if (pool == NULL)
		return;
	for (i = 0; i < 3; i++) {
		f[i] = NULL;
		(void)scheduled(tpe_schedule(pool, task_fn, &slots[i],
		    10 * TU_S, &f[i]), &f[i], NULL, i);
	}
	CHECK(tpe_shutdown_now(pool, handback_fn, NULL) == 0);
	/* Cancelled at once, also when no array for the hand-back can be
	 * allocated (the timer then hands them back a chunk at a time). */
	for (i = 0; i < 3; i++)
		CHECK(f[i] == NULL || tpe_future_get(f[i], 0, NULL) ==
		    ECANCELED);
	CHECK(tpe_await_termination(pool, 30 * TU_S) == 0);
	CHECK(tpe_destroy(pool) == 0);
	for (i = 0; i < 3; i++) {
		if (f[i] == NULL)
			continue;
		CHECK(tpe_future_get(f[i], 0, NULL) == ECANCELED);
		tpe_future_release(f[i]);
	}
}

/*
 * Metrics (tpe_get_metrics(3)) on a pool whose every task is timed: a
 * worker whose block cannot be allocated is a failed start, so once the
 * pool is idle every accepted task was counted, and the histograms hold
 * the timed ones. The
 * snapshot and the text live in static storage (this file's code
 * allocates nothing itself).
 */
static struct tpe_metrics metrics_snap;
static char metrics_text[1 << 16];

static void
sc_metrics(void)
{
	static const struct shape sh = { 2, 2, TPE_QUEUE_UNBOUNDED, 0,
	    TPE_POLICY_QUEUE_FIRST, 0 };
	tpe_t *pool;
	int i, accepted = 0, rc;

	pool_metrics = TPE_METRICS_ON | TPE_METRICS_TIME_ALL;
	pool = pool_of(&sh);
	if (pool == NULL)
		return;
	for (i = 0; i < 6; i++)
		accepted += execute(pool, task_fn, i) == 0;
	CHECK(tpe_wait_idle(pool, 30 * TU_S) == 0);
	rc = tpe_get_metrics(pool, &metrics_snap, sizeof(metrics_snap));
	CHECK(rc == 0);
	CHECK(metrics_snap.tasks_run == (uint64_t)accepted);
	CHECK(metrics_snap.run_time.count == metrics_snap.tasks_timed);
	CHECK(tpe_metrics_format_prometheus(metrics_text,
	    sizeof(metrics_text), NULL, &metrics_snap, sizeof(metrics_snap),
	    "tpe", NULL) == 0);
	(void)expect(tpe_metrics_reset(pool), 0);
	finish(pool);
}

/* A per-worker pool with metrics, sampled: create, tasks, shutdown. */
static void
sc_per_worker_metrics(void)
{
	static const struct shape sh = { 3, 3, TPE_QUEUE_PER_WORKER, 0,
	    TPE_POLICY_QUEUE_FIRST, 0 };

	pool_metrics = TPE_METRICS_ON;
	run_shape(&sh, 8);
}

static const struct scenario scenarios[] = {
	{ "unbounded", NULL, { 2, 2, TPE_QUEUE_UNBOUNDED, 0, QF, 0 }, 6 },
	{ "bounded", NULL, { 1, 3, TPE_QUEUE_BOUNDED, 8, QF, 0 }, 6 },
	{ "handoff", NULL, { 0, 4, TPE_QUEUE_HANDOFF, 0, QF, 0 }, 3 },
	{ "scale_first", NULL, { 1, 3, TPE_QUEUE_UNBOUNDED, 0, SF, 0 }, 6 },
	{ "scale_first_bounded", NULL, { 1, 3, TPE_QUEUE_BOUNDED, 8, SF, 0 },
	    6 },
	{ "per_worker", NULL, { 3, 3, TPE_QUEUE_PER_WORKER, 0, QF, 0 }, 8 },
	{ "per_worker_create", NULL, { 4, 4, TPE_QUEUE_PER_WORKER, 0, QF, 0 },
	    0 },
	{ .name = "submit_get", .fn = sc_submit },
	{ .name = "execute_wait", .fn = sc_execute_wait },
	{ .name = "shutdown_now", .fn = sc_shutdown_now },
	{ .name = "set_pool_size", .fn = sc_set_pool_size },
	{ .name = "prestart", .fn = sc_prestart },
	{ .name = "reserved_try_execute", .fn = sc_reserved },
	{ .name = "strategy_adaptive", .fn = sc_strategy_adaptive },
	{ .name = "strategy_pec", .fn = sc_strategy_pec },
	{ .name = "strategy_epc", .fn = sc_strategy_epc },
	{ .name = "coop_jobs", .fn = sc_coop },
	{ .name = "ring", .fn = sc_ring },
	{ .name = "thpool", .fn = sc_thpool },
	{ .name = "schedule", .fn = sc_schedule },
	{ .name = "periodic", .fn = sc_periodic },
	{ .name = "schedule_shutdown_now", .fn = sc_schedule_shutdown_now },
	{ .name = "metrics", .fn = sc_metrics },
	{ .name = "per_worker_metrics", .fn = sc_per_worker_metrics },
};

#define NSCENARIOS (sizeof(scenarios) / sizeof(scenarios[0]))

/* The figures, over all scenarios. */
static long total_alloc_points, total_oom_points, total_start_points;
static long total_runs, total_failed;

/* Runs one child; returns true when it kept every promise. */
static bool
run_child(const struct scenario *sc, long fail_alloc, long fail_start,
    bool persistent)
{
	unsigned limit = 20 * tu_time_scale();
	pid_t pid;
	int status;

	memset(run, 0, sizeof(*run));
	run->fail_alloc = fail_alloc;
	run->fail_start = fail_start;
	run->persistent = persistent;
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(limit);
		scenario_name = sc->name;
		memset(slots, 0, sizeof(slots));
		produced = 0;
		if (sc->fn != NULL)
			sc->fn();
		else
			run_shape(&sc->shape, sc->tasks);
		check_slots();
		/* The submitting thread's cached task nodes (node.c) are
		 * the only blocks a finished run may keep. */
		tpe__node_cache_flush();
		pthread_mutex_lock(&live_lock);
		run->live = live_count;
		pthread_mutex_unlock(&live_lock);
		CHECK(!live_overflow);
		CHECK(run->live == 0);
		/* The ASan build's LeakSanitizer runs at exit: in the counting
		 * and thread-start runs, as a check of the table, which sees
		 * every allocation the library makes (it allocates through
		 * the wrapped functions only). The allocation runs skip it:
		 * it would take most of the sweep's time. */
		if (fail_alloc >= 0)
			_exit(0);
		exit(0);
	}
	while (waitpid(pid, &status, 0) < 0)
		assert_int_equal(errno, EINTR);
	total_runs++;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return true;
	total_failed++;
	if (WIFSIGNALED(status))
		fprintf(stderr, "# %s (alloc %ld%s, start %ld): killed by "
		    "signal %d%s\n", sc->name, fail_alloc, persistent ? " on" :
		    "", fail_start, WTERMSIG(status),
		    WTERMSIG(status) == SIGALRM ? " (hang)" : "");
	else
		fprintf(stderr, "# %s (alloc %ld%s, start %ld): exit status "
		    "%d\n", sc->name, fail_alloc, persistent ? " on" : "",
		    fail_start, WEXITSTATUS(status));
	return false;
}

static void
sweep(void **state)
{
	const struct scenario *sc = *state;
	long allocs, starts, k, alloc_points = 0, start_points = 0;
	long oom_points = 0;
	long failed = total_failed;

	/* The counting run. */
	if (!run_child(sc, -1, -1, false))
		fail_msg("%s fails with no fault injected", sc->name);
	allocs = run->allocs;
	starts = run->starts;
	assert_int_equal(run->fired, 0);
	/* Then every k: worker threads may make the count differ a little
	 * from run to run, so go on past it while faults still fire. */
	for (k = 0; k < allocs + 16; k++) {
		(void)run_child(sc, k, -1, false);
		if (run->fired)
			alloc_points++;
		else if (k >= allocs)
			break;
	}
	/* Out of memory for good from the k-th allocation on: the clean-up
	 * (shutdown, termination, destroy) must need none. */
	for (k = 0; k < allocs + 16; k++) {
		(void)run_child(sc, k, -1, true);
		if (run->fired)
			oom_points++;
		else if (k >= allocs)
			break;
	}
	for (k = 0; k < starts + 16; k++) {
		(void)run_child(sc, -1, k, false);
		if (run->fired)
			start_points++;
		else if (k >= starts)
			break;
	}
	total_alloc_points += alloc_points;
	total_oom_points += oom_points;
	total_start_points += start_points;
	printf("# %-20s %3ld allocations, %ld thread starts; injected %3ld "
	    "once, %3ld for good, %ld starts; failures %ld\n", sc->name,
	    allocs, starts, alloc_points, oom_points, start_points,
	    total_failed - failed);
	assert_int_equal(total_failed - failed, 0);
}

static int
figures(void **state)
{
	(void)state;
	printf("# fault sweep: %zu scenarios, %ld runs, fault points injected: "
	    "%ld allocations (once), %ld allocations (from then on), %ld "
	    "thread starts; failures found: %ld\n", NSCENARIOS, total_runs,
	    total_alloc_points, total_oom_points, total_start_points,
	    total_failed);
	return 0;
}

int
main(void)
{
	struct CMUnitTest tests[NSCENARIOS];
	size_t i;

	tu_time_bound(0);
	run = mmap(NULL, sizeof(*run), PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (run == MAP_FAILED)
		return 1;
	memset(tests, 0, sizeof(tests));
	for (i = 0; i < NSCENARIOS; i++) {
		tests[i].name = scenarios[i].name;
		tests[i].test_func = sweep;
		tests[i].initial_state = (void *)(uintptr_t)&scenarios[i];
	}
	return cmocka_run_group_tests_name("fault_sweep", tests, NULL, figures);
}
