/* SPDX-License-Identifier: MIT */
/*
 * fuzz_api.c - a libFuzzer harness: the input bytes are a pool's
 * attributes and then a sequence of API calls, each checked against a
 * model of what its manual page promises.
 *
 * Built by build-aux/build-fuzz.sh with clang -fsanitize=fuzzer,address,
 * undefined; run by .ci/phase-fuzz.sh (the corpus as a regression, then a
 * bounded fuzzing time). A broken promise calls abort() with the call and
 * the two results on stderr, so libFuzzer saves the input.
 *
 * The model knows, for each call, the pool's state (shut down, paused, its
 * queue kind, sizes and rejection policy) and each task's fate (refused,
 * accepted, ran, handed back, removed, cancelled). It checks:
 *   - bad inputs (NULL handles, NULL functions, invalid enum values and
 *     sizes) return EINVAL and change nothing;
 *   - every other call returns 0 or an error its page documents for the
 *     model's state (ECANCELED after shutdown, ENOTSUP on a per-worker
 *     queue, EAGAIN only where a refusal is possible, ...);
 *   - at the end (gate opened, shutdown, termination): every accepted task
 *     ran exactly once, or was handed back or removed once; no refused task
 *     ran; a future is done with its result exactly when its task ran, and
 *     cancelled exactly when it did not; every produced task of the
 *     strategy ran once; LeakSanitizer checks that nothing leaked.
 * No fault is injected here (tests/fault_sweep.c does that), so ENOMEM is
 * never expected.
 *
 * Tasks that block (the "gate") are only submitted when the rejection
 * policy cannot run them in the submitting thread, which would wait for
 * itself. Every wait has a small timeout, and the end waits at most 10 s
 * for termination: a pool that does not terminate is reported as a hang.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tpe.h>

#define MS INT64_C(1000000)
#define SLOTS 512
#define MAX_OPS 256

/* ---- the input -------------------------------------------------------- */

static const uint8_t *in;
static size_t in_left;

static unsigned
take(void)
{
	if (in_left == 0)
		return 0;
	in_left--;
	return *in++;
}

/* ---- the figures (printed at exit) ------------------------------------ */

static unsigned long calls, bad_inputs;

static void
figures(void)
{
	fprintf(stderr, "fuzz_api: %lu API calls checked, %lu of them bad "
	    "inputs (NULL or invalid values)\n", calls, bad_inputs);
}

/* ---- checks ----------------------------------------------------------- */

static void
broken(int line, const char *call, int rc, const char *want)
{
	fprintf(stderr, "fuzz_api.c:%d: %s returned %d (%s), expected %s\n",
	    line, call, rc, rc > 0 ? strerror(rc) : "-", want);
	abort();
}

/* rc must be one of the listed values (a list ending in -1). */
#define EXPECT(call, ...) expect_in(__LINE__, #call, (call), __VA_ARGS__, -1)
#define CHECK(cond)                                                         \
	do {                                                                \
		if (!(cond))                                                \
			broken(__LINE__, #cond, 0, "true");                 \
	} while (0)
/* A bad input: it must return EINVAL. */
#define BAD(call)                                                           \
	do {                                                                \
		bad_inputs++;                                               \
		(void)EXPECT(call, EINVAL);                                 \
	} while (0)

static int
expect_in(int line, const char *call, int rc, ...)
{
	char want[128] = "";
	va_list ap;
	int v;

	calls++;
	va_start(ap, rc);
	while ((v = va_arg(ap, int)) != -1) {
		if (v == rc) {
			va_end(ap);
			return rc;
		}
		snprintf(want + strlen(want), sizeof(want) - strlen(want),
		    "%s%d", want[0] ? "|" : "", v);
	}
	va_end(ap);
	broken(line, call, rc, want);
	return rc;
}

/* ---- tasks ------------------------------------------------------------- */

enum kind { PLAIN, GATED, FUTURE, PRODUCED };

/* A task's fate: accepted by the caller's thread; ran, handed, by any. */
struct slot {
	int kind;
	int accepted;
	int removed;       /* tpe_remove returned 0 for it */
	int ran;           /* atomic */
	int handed;        /* atomic */
	tpe_future_t *future;
	int cancelled;     /* tpe_future_cancel returned 0 */
};

static struct slot slots[SLOTS];
static int nslots;      /* atomic: the producer takes slots too */

static struct slot *
new_slot(int kind)
{
	int i = __atomic_fetch_add(&nslots, 1, __ATOMIC_SEQ_CST);

	if (i >= SLOTS)
		return NULL;
	slots[i].kind = kind;
	return &slots[i];
}

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

/* The gate: gated tasks wait until it opens. */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static int gate_open;

static void
gated_fn(void *arg)
{
	pthread_mutex_lock(&gate_lock);
	while (!gate_open)
		pthread_cond_wait(&gate_cond, &gate_lock);
	pthread_mutex_unlock(&gate_lock);
	task_fn(arg);
}

static void
open_gate(void)
{
	pthread_mutex_lock(&gate_lock);
	gate_open = 1;
	pthread_cond_broadcast(&gate_cond);
	pthread_mutex_unlock(&gate_lock);
}

/*
 * shutdown_now's and the discard callback. A task of ours (fn NULL for a
 * submit task) is counted as handed back; anything else is a strategy's
 * pending producer, which must be run (tpe_strategy_create(3), CAVEATS).
 */
static void
handback_fn(tpe_fn fn, void *arg, void *ctx)
{
	struct slot *s = arg;

	(void)ctx;
	if (fn != NULL && fn != task_fn && fn != gated_fn) {
		fn(arg);
		return;
	}
	__atomic_add_fetch(&s->handed, 1, __ATOMIC_SEQ_CST);
}

/* The strategy's producer: one task per unit of `budget`. */
static int budget, produced;    /* atomic */

static bool
produce_fn(void *ctx, tpe_fn *fn, void **arg, enum tpe_invocation *type)
{
	struct slot *s;

	(void)ctx;
	if (__atomic_load_n(&produced, __ATOMIC_SEQ_CST) >=
	    __atomic_load_n(&budget, __ATOMIC_SEQ_CST))
		return false;
	if ((s = new_slot(PRODUCED)) == NULL)
		return false;
	__atomic_add_fetch(&produced, 1, __ATOMIC_SEQ_CST);
	s->accepted = 1;
	*fn = task_fn;
	*arg = s;
	*type = (enum tpe_invocation)((s - slots) % 3);
	return true;
}

/* ---- the model -------------------------------------------------------- */

static struct {
	size_t core, max;
	int kind, cap, policy, rejection, reserved;
	bool shutdown, paused;
} m;

static tpe_t *pool;
static tpe_strategy_t *strategy;

/* May a submission be refused (EAGAIN) with no failure? */
static bool
may_refuse(void)
{
	if (m.kind != TPE_QUEUE_BOUNDED && m.kind != TPE_QUEUE_HANDOFF)
		return false;
	return m.rejection == TPE_REJECT_ABORT ||
	    m.rejection == TPE_REJECT_DISCARD_OLDEST;
}

/* Builds the attributes from the input, checking each setter against
 * its page; returns the pool (NULL: the input asked for nothing valid). */
static tpe_t *
create_pool(void)
{
	tpe_attr_t *attr;
	tpe_t *p = NULL;
	size_t core = take() % 4, max = take() % 5;
	int kind = (int)(take() % 5), cap = (int)(take() % 4);
	int policy = (int)(take() % 3), rej = (int)(take() % 5);
	int reserved = (int)(take() % 5) - 2;
	int ok;

	(void)EXPECT(tpe_attr_create(&attr), 0);
	BAD(tpe_attr_set_pool_size(NULL, 1, 1));
	BAD(tpe_attr_set_queue(NULL, TPE_QUEUE_UNBOUNDED, 0));
	BAD(tpe_attr_set_reserved_threads(attr, -2 - (int)take()));

	ok = max != 0 && core <= max;
	(void)EXPECT(tpe_attr_set_pool_size(attr, core, max), ok ? 0 : EINVAL);
	if (!ok) {
		core = max = 2;
		(void)EXPECT(tpe_attr_set_pool_size(attr, 2, 2), 0);
	}
	ok = kind <= TPE_QUEUE_PER_WORKER &&
	    (kind == TPE_QUEUE_BOUNDED ? cap > 0 : cap == 0) &&
	    (kind != TPE_QUEUE_PER_WORKER || core == max);
	(void)EXPECT(tpe_attr_set_queue(attr, (enum tpe_queue_kind)kind,
	    (size_t)cap), ok ? 0 : EINVAL);
	if (!ok) {
		kind = TPE_QUEUE_UNBOUNDED;
		cap = 0;
	}
	ok = policy <= TPE_POLICY_SCALE_FIRST &&
	    !(policy == TPE_POLICY_SCALE_FIRST && kind == TPE_QUEUE_PER_WORKER);
	(void)EXPECT(tpe_attr_set_policy(attr, (enum tpe_policy)policy),
	    ok ? 0 : EINVAL);
	if (!ok)
		policy = TPE_POLICY_QUEUE_FIRST;
	ok = rej <= TPE_REJECT_DISCARD_OLDEST;
	(void)EXPECT(tpe_attr_set_rejection(attr, (enum tpe_rejection)rej),
	    ok ? 0 : EINVAL);
	if (!ok)
		rej = TPE_REJECT_ABORT;
	ok = reserved >= -1;
	(void)EXPECT(tpe_attr_set_reserved_threads(attr, reserved),
	    ok ? 0 : EINVAL);
	(void)EXPECT(tpe_attr_set_discard_callback(attr, handback_fn, NULL), 0);
	BAD(tpe_create(NULL, attr));
	(void)EXPECT(tpe_create(&p, attr), 0);
	tpe_attr_destroy(attr);

	m.core = core;
	m.max = max;
	m.kind = kind;
	m.cap = cap;
	m.policy = policy;
	m.rejection = rej;
	m.reserved = reserved;
	return p;
}

/* A slot's index from the input, among those taken. */
static struct slot *
pick(void)
{
	int n = __atomic_load_n(&nslots, __ATOMIC_SEQ_CST);

	if (n > SLOTS)
		n = SLOTS;
	return n == 0 ? NULL : &slots[take() % (unsigned)n];
}

static int64_t
small_timeout(void)
{
	return take() % 2 == 0 ? 0 : 1 * MS;
}

/* The bad inputs, one per call. */
static void
bad_input(void)
{
	struct tpe_stats st;
	tpe_strategy_t *s;
	tpe_future_t *f;

	switch (take() % 24) {
	case 0: BAD(tpe_execute(NULL, task_fn, NULL)); break;
	case 1: BAD(tpe_execute(pool, NULL, NULL)); break;
	case 2: BAD(tpe_submit(pool, call_fn, NULL, NULL)); break;
	case 3: BAD(tpe_submit(pool, NULL, NULL, &f)); break;
	case 4: BAD(tpe_try_execute(pool, NULL, NULL)); break;
	case 5: BAD(tpe_execute_typed(pool, task_fn, NULL,
	    (enum tpe_invocation)(3 + take()))); break;
	case 6: BAD(tpe_remove(pool, NULL, NULL)); break;
	case 7: BAD(tpe_purge(NULL, NULL)); break;
	case 8: BAD(tpe_pause(NULL)); break;
	case 9: BAD(tpe_resume(NULL)); break;
	case 10: BAD(tpe_set_pool_size(pool, take() % 3, 0)); break;
	case 11: BAD(tpe_set_pool_size(pool, 3 + take() % 3, 2)); break;
	case 12: BAD(tpe_set_keep_alive(pool, -1 - (int64_t)take())); break;
	case 13: BAD(tpe_get_stats(pool, &st, take() % sizeof(size_t))); break;
	case 14: BAD(tpe_get_stats(pool, NULL, sizeof(st))); break;
	case 15: BAD(tpe_wait_idle(NULL, 0)); break;
	case 16: BAD(tpe_await_termination(NULL, 0)); break;
	case 17: BAD(tpe_future_get(NULL, 0, NULL)); break;
	case 18: BAD(tpe_future_cancel(NULL)); break;
	case 19: BAD(tpe_strategy_create(&s, pool, produce_fn, NULL,
	    (enum tpe_strategy_mode)(4 + take()))); break;
	case 20: BAD(tpe_strategy_create(&s, pool, NULL, NULL,
	    TPE_STRATEGY_PC)); break;
	case 21: BAD(tpe_strategy_produce(NULL)); break;
	case 22: BAD(tpe_strategy_dispatch(NULL)); break;
	default: BAD(tpe_prestart_core_threads(NULL, NULL)); break;
	}
}

/* The end of every input: everything accounted for exactly once. */
static void
finish(void)
{
	void *result;
	int i, rc;

	open_gate();
	if (!m.shutdown)
		(void)EXPECT(tpe_resume(pool), 0);
	(void)EXPECT(tpe_shutdown(pool), 0);
	if (tpe_await_termination(pool, 10000 * MS) != 0)
		broken(__LINE__, "tpe_await_termination", ETIMEDOUT, "0 (hang)");
	CHECK(tpe_is_terminated(pool));
	if (strategy != NULL) {
		/* After shutdown it produces, and runs, in this thread. */
		(void)EXPECT(tpe_strategy_produce(strategy), 0);
		CHECK(__atomic_load_n(&produced, __ATOMIC_SEQ_CST) ==
		    __atomic_load_n(&budget, __ATOMIC_SEQ_CST) ||
		    __atomic_load_n(&nslots, __ATOMIC_SEQ_CST) >= SLOTS);
		(void)EXPECT(tpe_strategy_destroy(strategy), 0);
	}
	for (i = 0; i < SLOTS && i < nslots; i++) {
		struct slot *s = &slots[i];
		int ran = __atomic_load_n(&s->ran, __ATOMIC_SEQ_CST);
		int handed = __atomic_load_n(&s->handed, __ATOMIC_SEQ_CST);

		if (!s->accepted) {
			CHECK(ran == 0 && handed == 0);
			continue;
		}
		if (s->kind == FUTURE) {
			CHECK(ran <= 1 && handed <= 1);
			CHECK(!(ran && (handed || s->cancelled)));
			if (s->future == NULL)
				continue;
			result = NULL;
			rc = EXPECT(tpe_future_get(s->future, 0, &result), 0,
			    ECANCELED);
			CHECK(rc == 0 ? ran == 1 && result == s : ran == 0);
			CHECK(tpe_future_is_done(s->future));
			CHECK(tpe_future_is_cancelled(s->future) == (rc != 0));
			tpe_future_release(s->future);
			continue;
		}
		CHECK(ran + handed + s->removed == 1);
	}
	(void)EXPECT(tpe_destroy(pool), 0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	atexit(figures);
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tpe_stats st;
	struct slot *s;
	size_t n;
	int op, rc;

	in = data;
	in_left = size;
	memset(slots, 0, sizeof(slots));
	nslots = 0;
	budget = produced = 0;
	gate_open = 0;
	strategy = NULL;
	memset(&m, 0, sizeof(m));

	pool = create_pool();
	for (op = 0; op < MAX_OPS && in_left > 0; op++) {
		switch (take() % 22) {
		case 0:     /* execute */
		case 1:     /* execute a task that waits for the gate */
			if ((s = new_slot(PLAIN)) == NULL)
				break;
			if (op % 2 == 1 && m.rejection != TPE_REJECT_CALLER_RUNS)
				s->kind = GATED;
			rc = m.shutdown ? EXPECT(tpe_execute(pool,
			    s->kind == GATED ? gated_fn : task_fn, s), ECANCELED) :
			    may_refuse() ? EXPECT(tpe_execute(pool, s->kind ==
			    GATED ? gated_fn : task_fn, s), 0, EAGAIN) :
			    EXPECT(tpe_execute(pool, s->kind == GATED ? gated_fn :
			    task_fn, s), 0);
			s->accepted = rc == 0;
			break;
		case 2:     /* submit */
			if ((s = new_slot(FUTURE)) == NULL)
				break;
			s->future = NULL;
			rc = m.shutdown ? EXPECT(tpe_submit(pool, call_fn, s,
			    &s->future), ECANCELED) : may_refuse() ?
			    EXPECT(tpe_submit(pool, call_fn, s, &s->future), 0,
			    EAGAIN) : EXPECT(tpe_submit(pool, call_fn, s,
			    &s->future), 0);
			s->accepted = rc == 0;
			if (rc != 0)
				CHECK(s->future == NULL);
			break;
		case 3:     /* try_execute: EAGAIN when none is parked */
			if ((s = new_slot(PLAIN)) == NULL)
				break;
			rc = m.shutdown ? EXPECT(tpe_try_execute(pool, task_fn, s),
			    ECANCELED) : EXPECT(tpe_try_execute(pool, task_fn, s),
			    0, EAGAIN);
			s->accepted = rc == 0;
			break;
		case 4:     /* remove a plain task */
			if ((s = pick()) == NULL || s->kind == FUTURE ||
			    s->kind == PRODUCED)
				break;
			rc = m.kind == TPE_QUEUE_PER_WORKER ?
			    EXPECT(tpe_remove(pool, s->kind == GATED ? gated_fn :
			    task_fn, s), ENOTSUP) : EXPECT(tpe_remove(pool,
			    s->kind == GATED ? gated_fn : task_fn, s), 0, ENOENT);
			if (rc == 0) {
				CHECK(s->accepted && !s->removed);
				s->removed = 1;
			}
			break;
		case 5:
			n = 99;
			rc = EXPECT(tpe_purge(pool, &n), m.kind ==
			    TPE_QUEUE_PER_WORKER ? ENOTSUP : 0);
			CHECK(rc != 0 || n < SLOTS);
			break;
		case 6:
			(void)EXPECT(tpe_pause(pool), m.shutdown ? ECANCELED : 0);
			m.paused = !m.shutdown;
			break;
		case 7:
			(void)EXPECT(tpe_resume(pool), m.shutdown ? ECANCELED : 0);
			m.paused = false;
			break;
		case 8: {   /* set_pool_size, valid or not */
			size_t core = take() % 4, max = take() % 5;
			bool ok = max != 0 && core <= max &&
			    (m.kind != TPE_QUEUE_PER_WORKER ||
			    (core == m.core && max == m.max));

			(void)EXPECT(tpe_set_pool_size(pool, core, max),
			    ok ? 0 : EINVAL);
			if (ok) {
				m.core = core;
				m.max = max;
			}
			break;
		}
		case 9:
			(void)EXPECT(tpe_wait_idle(pool, small_timeout()), 0,
			    ETIMEDOUT);
			break;
		case 10:
			(void)EXPECT(tpe_shutdown(pool), 0);
			m.shutdown = true;
			break;
		case 11:
			(void)EXPECT(tpe_shutdown_now(pool, handback_fn, NULL), 0);
			m.shutdown = true;
			break;
		case 12:
			rc = EXPECT(tpe_await_termination(pool, small_timeout()),
			    0, ETIMEDOUT);
			CHECK(rc != 0 || (m.shutdown && tpe_is_terminated(pool)));
			break;
		case 13: {  /* future get */
			void *result = NULL;

			if ((s = pick()) == NULL || s->future == NULL)
				break;
			rc = EXPECT(tpe_future_get(s->future, small_timeout(),
			    &result), 0, ETIMEDOUT, ECANCELED);
			if (rc == 0)
				CHECK(result == s &&
				    __atomic_load_n(&s->ran, __ATOMIC_SEQ_CST));
			break;
		}
		case 14:    /* future cancel */
			if ((s = pick()) == NULL || s->future == NULL)
				break;
			rc = EXPECT(tpe_future_cancel(s->future), 0, EBUSY);
			if (rc == 0)
				s->cancelled = 1;
			break;
		case 15:    /* future release */
			if ((s = pick()) == NULL || s->future == NULL)
				break;
			tpe_future_release(s->future);
			s->future = NULL;
			break;
		case 16: {  /* strategy create */
			int mode = (int)(take() % 4);

			if (strategy != NULL)
				break;
			(void)EXPECT(tpe_strategy_create(&strategy, pool,
			    produce_fn, NULL, (enum tpe_strategy_mode)mode), 0);
			break;
		}
		case 17:    /* strategy produce */
			if (strategy == NULL)
				break;
			__atomic_add_fetch(&budget, 1 + (int)(take() % 4),
			    __ATOMIC_SEQ_CST);
			(void)EXPECT(tpe_strategy_produce(strategy), 0);
			break;
		case 18:    /* strategy dispatch */
			if (strategy == NULL)
				break;
			__atomic_add_fetch(&budget, 1, __ATOMIC_SEQ_CST);
			/* 0 also after shutdown, when a producer is
			 * running or on its way. */
			(void)EXPECT(tpe_strategy_dispatch(strategy), 0, EAGAIN,
			    m.shutdown ? ECANCELED : 0);
			break;
		case 19:
			open_gate();
			break;
		case 20:
			memset(&st, 0xa5, sizeof(st));
			n = sizeof(size_t) +
			    take() % (sizeof(st) - sizeof(size_t) + 1);
			(void)EXPECT(tpe_get_stats(pool, &st, n), 0);
			CHECK(st.max_size == m.max || n < 3 * sizeof(size_t));
			CHECK(n >= sizeof(st) ||
			    ((unsigned char *)&st)[sizeof(st) - 1] == 0xa5);
			break;
		default:
			bad_input();
			break;
		}
		CHECK(tpe_is_shutdown(pool) == m.shutdown);
	}
	finish();
	return 0;
}
