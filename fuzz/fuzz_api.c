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
 * The same input also drives, each against its pages:
 *   - the strategy: a scripted producer (odd answers, unknown types),
 *     tpe_strategy_get_stats with every size (the bytes it may write, the
 *     counters a mode cannot use, the sum once production has ended) and
 *     tpe_strategy_destroy (EBUSY only while something is in flight);
 *   - the tasklet service: configurations and tasklet arrays of every
 *     size, scripted tasklets (progress, finish, errors, for ever,
 *     blocking) whose first call may destroy their service or wait for,
 *     cancel or add to their own job; each call never overlapping another,
 *     none after the end or after the completion the caller saw; each end
 *     callback once, with the result the calls call for, on the thread of
 *     the last call; each job's result;
 *   - the SPSC ring, against a model FIFO, and between two tasklets;
 *   - the C-Thread-Pool API: jobs run once, none added while paused starts
 *     before the resume, none runs after the destroy;
 *   - delayed and periodic tasks (tpe_schedule(3)): ECANCELED after
 *     shutdown, EINVAL for bad input, never a refusal; a one-shot runs or
 *     is handed back once, its future as a submit's (NULL result for
 *     tpe_schedule); a saturated delay reads INT64_MAX and cancels with 0;
 *     a periodic task cancels its own future after a few runs (0), its
 *     future never completes with 0 and it is handed back exactly once.
 *     The pool's TPE_SCHED_* flags come from the attribute bytes already
 *     taken (no byte of the input format moves).
 * No fault is injected here (tests/fault_sweep.c does that), so ENOMEM is
 * never expected but for a ring too large for a size_t.
 *
 * Tasks that block (the "gate") are only submitted when the rejection
 * policy cannot run them in the submitting thread, which would wait for
 * itself. Every wait has a small timeout, and the end waits at most 10 s
 * for termination: a pool that does not terminate is reported as a hang.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tpe.h>
#include <tpe/thpool.h>

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

/*
 * The operations: each step of an input is one byte, taken modulo
 * OP_COUNT, and then the operation's own bytes. New operations are
 * appended before OP_COUNT, never inserted: an input whose operation bytes
 * are below the old count keeps its meaning (fuzz/corpus/ relies on it).
 */
enum op {
	/* the pool (tpe_create(3)) and its futures */
	OP_EXECUTE,             /* 0 */
	OP_EXECUTE_GATED,
	OP_SUBMIT,
	OP_TRY_EXECUTE,
	OP_REMOVE,
	OP_PURGE,               /* 5 */
	OP_PAUSE,
	OP_RESUME,
	OP_SET_POOL_SIZE,
	OP_WAIT_IDLE,
	OP_SHUTDOWN,            /* 10 */
	OP_SHUTDOWN_NOW,
	OP_AWAIT_TERMINATION,
	OP_FUTURE_GET,
	OP_FUTURE_CANCEL,
	OP_FUTURE_RELEASE,      /* 15 */
	/* the execution strategy over the pool (tpe_strategy_create(3)) */
	OP_STRATEGY_CREATE,
	OP_STRATEGY_PRODUCE,
	OP_STRATEGY_DISPATCH,
	OP_OPEN_GATE,
	OP_GET_STATS,           /* 20 */
	OP_BAD_INPUT,
	OP_STRATEGY_SCRIPT,     /* the producer's script */
	OP_STRATEGY_STATS,
	OP_STRATEGY_DESTROY,
	/* the cooperative tasklet service (tpe_coop_create(3)) */
	OP_COOP_CREATE,         /* 25 */
	OP_COOP_SUBMIT,
	OP_JOB_WAIT,
	OP_JOB_CANCEL,
	OP_JOB_RELEASE,
	OP_COOP_DESTROY,        /* 30 */
	/* the SPSC ring (tpe_ring_create(3)), against a model FIFO */
	OP_RING_CREATE,
	OP_RING_OFFER,
	OP_RING_POLL,
	OP_RING_DRAIN,
	OP_RING_CLOSE,          /* 35 */
	OP_RING_DESTROY,
	/* the C-Thread-Pool API (tpe_thpool(3)) */
	OP_THPOOL_INIT,
	OP_THPOOL_ADD,
	OP_THPOOL_WAIT,
	OP_THPOOL_PAUSE,        /* 40 */
	OP_THPOOL_RESUME,
	OP_THPOOL_WORKING,
	OP_THPOOL_DESTROY,
	OP_BAD_INPUT_MORE,      /* bad inputs of the calls above */
	OP_RING_PIPE,           /* a ring between two tasklets (45) */
	OP_THPOOL_ADD_SELF,     /* a job that calls its own pool */
	/* blocking submission (tpe_execute_wait(3)) and the job's outcome
	 * (tpe_job_wait_result(3)) */
	OP_EXECUTE_WAIT,
	OP_SUBMIT_WAIT,
	OP_JOB_WAIT_RESULT,     /* 49 */
	/* delayed and periodic tasks (tpe_schedule(3)) */
	OP_SCHEDULE,            /* 50 */
	OP_SCHEDULE_CALL,
	OP_SCHEDULE_PERIODIC,
	OP_FUTURE_GET_DELAY,
	OP_SCHEDULE_NEVER,      /* a saturated delay, cancelled */
	OP_BAD_INPUT_SCHED,     /* 55 */
	OP_COUNT
};

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
		__atomic_add_fetch(&bad_inputs, 1, __ATOMIC_RELAXED);       \
		(void)EXPECT(call, EINVAL);                                 \
	} while (0)

static int
expect_in(int line, const char *call, int rc, ...)
{
	char want[128] = "";
	va_list ap;
	int v;

	__atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
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

/* SCHED: tpe_schedule (fn task_fn; a future with a NULL result, if any);
 * a tpe_schedule_call task is a FUTURE; PERIODIC: fn periodic_fn. */
enum kind { PLAIN, GATED, FUTURE, PRODUCED, SCHED, PERIODIC };

/* A task's fate: accepted by the caller's thread; ran, handed, by any. */
struct slot {
	int kind;
	int accepted;
	int removed;       /* tpe_remove returned 0 for it */
	int ran;           /* atomic */
	int handed;        /* atomic */
	tpe_future_t *future;
	int cancelled;     /* tpe_future_cancel returned 0 */
	int stop_after;    /* PERIODIC: cancels itself after so many runs */
	tpe_future_t *self; /* A: PERIODIC: its future, for that cancel */
	int running;       /* A: PERIODIC: a run in progress */
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

/* A periodic run: never two at once; from its stop_after-th run on it
 * cancels its own future, which says 0 even while it runs. */
static void
periodic_fn(void *arg)
{
	struct slot *s = arg;
	/* Pairs with the release store after the schedule call. */
	tpe_future_t *f = __atomic_load_n(&s->self, __ATOMIC_ACQUIRE);

	CHECK(__atomic_add_fetch(&s->running, 1, __ATOMIC_SEQ_CST) == 1);
	if (__atomic_add_fetch(&s->ran, 1, __ATOMIC_SEQ_CST) >=
	    s->stop_after && f != NULL)
		(void)EXPECT(tpe_future_cancel(f), 0);
	__atomic_sub_fetch(&s->running, 1, __ATOMIC_SEQ_CST);
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
	if (fn != NULL && fn != task_fn && fn != gated_fn &&
	    fn != periodic_fn) {
		fn(arg);
		return;
	}
	/* A periodic task comes back after its last run has ended. */
	CHECK(fn != periodic_fn ||
	    __atomic_load_n(&s->running, __ATOMIC_SEQ_CST) == 0);
	__atomic_add_fetch(&s->handed, 1, __ATOMIC_SEQ_CST);
}

/*
 * The strategy's producer: one task per unit of `budget`, in the way its
 * script says (OP_STRATEGY_SCRIPT; without one, the types in turn). The
 * strategy never calls it from two threads at once, and each call
 * happens-before the next (tpe_strategy_create(3)), so the script's
 * position needs no atomic. An odd answer (false with budget left, or
 * true with no task) is never given twice in a row: production goes on.
 */
static int budget, produced;    /* atomic */
static uint8_t script[8];
static unsigned script_len, script_pos;
static bool odd_last;

static bool
produce_fn(void *ctx, tpe_fn *fn, void **arg, enum tpe_invocation *type)
{
	struct slot *s;
	unsigned len = __atomic_load_n(&script_len, __ATOMIC_RELAXED);
	unsigned act = len == 0 ? 8 :
	    __atomic_load_n(&script[script_pos++ % len], __ATOMIC_RELAXED) % 8;

	(void)ctx;
	if (!odd_last && act == 5) {    /* nothing now, though budget is left */
		odd_last = true;
		return false;
	}
	if (!odd_last && act == 4) {    /* true with no task: counts nothing */
		odd_last = true;
		*fn = NULL;
		*arg = NULL;
		*type = TPE_NON_BLOCKING;
		return true;
	}
	odd_last = false;
	if (__atomic_load_n(&produced, __ATOMIC_SEQ_CST) >=
	    __atomic_load_n(&budget, __ATOMIC_SEQ_CST))
		return false;
	if ((s = new_slot(PRODUCED)) == NULL)
		return false;
	__atomic_add_fetch(&produced, 1, __ATOMIC_SEQ_CST);
	s->accepted = 1;
	*fn = task_fn;
	*arg = s;
	if (act == 8)
		*type = (enum tpe_invocation)((s - slots) % 3);
	else if (act == 3)      /* unknown: counts as TPE_BLOCKING */
		*type = (enum tpe_invocation)(17 + script_pos % 3);
	else
		*type = (enum tpe_invocation)(act % 3);
	return true;
}

/* ---- the model -------------------------------------------------------- */

static struct {
	size_t core, max;
	int kind, cap, policy, rejection, reserved;
	bool shutdown, paused;
	bool no_reserved;       /* created with a capacity of 0 reserved threads */
	unsigned sched_flags;   /* TPE_SCHED_* */
} m;

static tpe_t *pool;
static tpe_strategy_t *strategy;

/* May a submission be refused (EAGAIN) with no failure? */
static bool
may_refuse(void)
{
	if (m.kind != TPE_QUEUE_BOUNDED && m.kind != TPE_QUEUE_HANDOFF &&
	    !(m.kind == TPE_QUEUE_PRIORITY && m.cap > 0))
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
	int kind = (int)(take() % 6), cap = (int)(take() % 4);
	int policy = (int)(take() % 3), rej = (int)(take() % 5);
	int reserved = (int)(take() % 5) - 2;
	unsigned sched_flags;
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
	/* The priority kind takes any capacity (0: unbounded). */
	ok = kind == TPE_QUEUE_PRIORITY || (kind <= TPE_QUEUE_PER_WORKER &&
	    (kind == TPE_QUEUE_BOUNDED ? cap > 0 : cap == 0) &&
	    (kind != TPE_QUEUE_PER_WORKER || core == max));
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
	/* From the bytes taken above: the input format does not move. */
	sched_flags = (unsigned)(core * 5 + max * 3 + (size_t)rej) % 8;
	BAD(tpe_attr_set_schedule_flags(NULL, 0));
	BAD(tpe_attr_set_schedule_flags(attr, 0x8u << (core % 4)));
	(void)EXPECT(tpe_attr_set_schedule_flags(attr, sched_flags), 0);
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
	m.sched_flags = sched_flags;
	/* tpe_attr_set_reserved_threads(3): 0, or a maximum size of 1;
	 * tpe_try_execute(3): a per-worker queue's workers never park. */
	m.no_reserved = reserved == 0 || max == 1 ||
	    kind == TPE_QUEUE_PER_WORKER;
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

/* ---- the strategy: its script, counters and destroy ------------------- */

static int strategy_mode;
static int produced_base;       /* `produced` when the strategy was created */
static struct tpe_strategy_stats strategy_last; /* the last full snapshot */
/* The pool was idle (tpe_wait_idle) or terminated after the last call of
 * tpe_strategy_produce or tpe_strategy_dispatch: nothing is in flight in
 * the strategy, and tpe_strategy_destroy(3) must succeed. */
static bool strategy_quiet;

static void
strategy_create(void)
{
	tpe_strategy_t *s;
	int mode = (int)(take() % 6);

	if (mode > TPE_STRATEGY_EPC) {
		BAD(tpe_strategy_create(&s, pool, produce_fn, NULL,
		    (enum tpe_strategy_mode)mode));
		return;
	}
	if (strategy != NULL)
		return;
	(void)EXPECT(tpe_strategy_create(&strategy, pool, produce_fn, NULL,
	    (enum tpe_strategy_mode)mode), 0);
	strategy_mode = mode;
	memset(&strategy_last, 0, sizeof(strategy_last));
	produced_base = __atomic_load_n(&produced, __ATOMIC_SEQ_CST);
	strategy_quiet = true;
}

/* The producer's script: up to 8 actions, in turn (produce_fn). */
static void
strategy_script(void)
{
	unsigned i, n = take() % 9;

	for (i = 0; i < n; i++)
		__atomic_store_n(&script[i], (uint8_t)take(), __ATOMIC_RELAXED);
	__atomic_store_n(&script_len, n, __ATOMIC_RELAXED);
}

/*
 * tpe_strategy_get_stats with `size` bytes, checked against its page: the
 * bytes past size untouched, the rest of a size that ends inside a field
 * and the fields the library does not know set to 0, a size below pc
 * EINVAL with nothing written; the counters of the modes the strategy's
 * mode cannot use are 0. `ended`: production has ended, so the counters
 * add up to the tasks the producer returned.
 */
static void
strategy_stats(size_t size, bool ended)
{
	union {
		struct tpe_strategy_stats st;
		uint64_t u[8];
		unsigned char b[64];
	} buf;
	size_t i, known = sizeof(buf.st) / sizeof(uint64_t), full;
	uint64_t none = 0;

	memset(&buf, 0xa5, sizeof(buf));
	if (size < sizeof(uint64_t)) {
		BAD(tpe_strategy_get_stats(strategy, &buf.st, size));
		for (i = 0; i < sizeof(buf.b); i++)
			CHECK(buf.b[i] == 0xa5);
		return;
	}
	(void)EXPECT(tpe_strategy_get_stats(strategy, &buf.st, size), 0);
	for (i = 0; i < sizeof(buf.b); i++) {
		if (i >= size)
			CHECK(buf.b[i] == 0xa5);
		else if (i >= sizeof(buf.st) ||
		    (i / sizeof(uint64_t) + 1) * sizeof(uint64_t) > size)
			CHECK(buf.b[i] == 0);
	}
	full = size / sizeof(uint64_t);
	if (full > known)
		full = known;
	for (i = full; i < known; i++)
		buf.u[i] = 0;   /* not read: count them as 0 below */
	switch (strategy_mode) {
	case TPE_STRATEGY_PC:
		none = buf.st.pic | buf.st.pec | buf.st.epc;
		break;
	case TPE_STRATEGY_PEC:
		none = buf.st.epc;
		break;
	case TPE_STRATEGY_EPC:
		none = buf.st.pec;
		break;
	default:        /* "Without reserved threads, ... never uses EPC." */
		none = m.no_reserved ? buf.st.epc : 0;
		break;
	}
	CHECK(none == 0);
	/* "A counter never goes down, except pec for a moment". */
	if (full == known) {
		CHECK(buf.st.pc >= strategy_last.pc &&
		    buf.st.pic >= strategy_last.pic &&
		    buf.st.epc >= strategy_last.epc);
		strategy_last = buf.st;
	}
	if (ended && full == known)
		CHECK(buf.st.pc + buf.st.pic + buf.st.pec + buf.st.epc ==
		    (uint64_t)(__atomic_load_n(&produced, __ATOMIC_SEQ_CST) -
		    produced_base));
}

static void
strategy_destroy(void)
{
	int rc;

	if (strategy == NULL)
		return;
	if (strategy_quiet) {
		strategy_stats(sizeof(struct tpe_strategy_stats), true);
		rc = EXPECT(tpe_strategy_destroy(strategy), 0);
	} else {
		rc = EXPECT(tpe_strategy_destroy(strategy), 0, EBUSY);
	}
	if (rc == 0) {
		/* Nothing produces any more: forget the owed tasks. */
		strategy = NULL;
		__atomic_store_n(&budget, __atomic_load_n(&produced,
		    __ATOMIC_SEQ_CST), __ATOMIC_SEQ_CST);
	}
}

/* ---- the cooperative tasklet service ----------------------------------- */

#define JOBS 12
#define TASKLETS 4
#define FOREVER 1000    /* a tasklet that never finishes by itself */
#define TASKLET_V1 (offsetof(struct tpe_tasklet, flags) + sizeof(unsigned))

struct job_model;

/* A tasklet: its script, and what the library did with it. */
struct tasklet_model {
	struct job_model *job;  /* I: set before the submission */
	unsigned steps;         /* I: calls before the final one */
	int step_rc;            /* I: what they return (a progress value) */
	int final;              /* I: what the last call returns, or FOREVER */
	int action;             /* I: done at the first call (tasklet_action) */
	bool has_end;           /* I: an end callback was given */
	int in_call;            /* A: 1 inside a call (never two at once) */
	int calls;              /* A */
	int last;               /* A: what the last call returned */
	int ended;              /* A: end callbacks run */
	int end_result;         /* written by end_fn, read once ended */
	pthread_t last_thread;  /* the thread of the last call (end_fn) */
};

struct job_model {
	tpe_coop_t *coop;       /* I: its service */
	unsigned gen;           /* I: which service of this input */
	size_t n;               /* I */
	bool finite;            /* I: completes without a cancel */
	tpe_job_t *handle;      /* job_lock; NULL once released */
	int cancelled;          /* A: cancelled, or its service destroyed */
	int frozen;             /* A: completed as seen by the caller */
	struct tasklet_model t[TASKLETS];
};

/* Orders a tasklet's use of its job's handle before the release. */
static pthread_mutex_t job_lock = PTHREAD_MUTEX_INITIALIZER;
static struct job_model jobs[JOBS];
static int njobs;
/* Jobs that tasklets submit (action 5), released at once. */
#define CHILDREN 16
static struct job_model children[CHILDREN];
static int nchildren;           /* A */
static int child_submitted[CHILDREN];   /* A */
static tpe_coop_t *coop;
static unsigned coop_gen;

static const int finals[8] = { TPE_DONE, TPE_DONE, TPE_DONE, EIO,
	ETIMEDOUT, -7, FOREVER, TPE_DONE };

/* The end result a tasklet's calls call for: ECANCELED when it had not
 * finished by itself; any negative value but the two progress values
 * counts as EINVAL (tpe_coop_submit(3)). */
static int
expected_end(struct tasklet_model *t)
{
	int last = __atomic_load_n(&t->last, __ATOMIC_SEQ_CST);

	if (__atomic_load_n(&t->calls, __ATOMIC_SEQ_CST) == 0 ||
	    last == TPE_MADE_PROGRESS || last == TPE_NO_PROGRESS)
		return ECANCELED;
	return last < 0 ? EINVAL : last;
}

static int tasklet_fn(void *ctx);
static void end_fn(void *ctx, int result);

/* A tasklet submits a job of one tasklet to its own service and releases
 * it: 0, or ECANCELED once tpe_coop_destroy has begun. */
static void
submit_child(struct job_model *parent)
{
	int k = __atomic_fetch_add(&nchildren, 1, __ATOMIC_SEQ_CST);
	struct tpe_tasklet tl;
	struct job_model *j;
	tpe_job_t *h;

	if (k >= CHILDREN)
		return;
	j = &children[k];
	j->coop = parent->coop;
	j->gen = parent->gen;
	j->n = 1;
	j->finite = true;
	j->t[0].job = j;
	j->t[0].steps = 1;
	j->t[0].step_rc = TPE_MADE_PROGRESS;
	j->t[0].final = TPE_DONE;
	j->t[0].has_end = true;
	tl = (struct tpe_tasklet){ tasklet_fn, &j->t[0], end_fn, 0 };
	if (EXPECT(tpe_coop_submit(j->coop, &tl, 1, sizeof(tl), &h), 0,
	    ECANCELED) != 0)
		return;
	__atomic_store_n(&child_submitted[k], 1, __ATOMIC_SEQ_CST);
	tpe_job_release(h);
}

/* What a tasklet does at its first call, from a thread of its service:
 * the calls that would wait for the service itself must not (EDEADLK),
 * and a cancel of its own job only marks it (tpe_job_cancel(3)). */
static void
tasklet_action(struct tasklet_model *t)
{
	struct job_model *j = t->job;

	if (t->action == 1) {
		(void)EXPECT(tpe_coop_destroy(j->coop), EDEADLK);
		return;
	}
	if (t->action == 5) {
		submit_child(j);
		return;
	}
	pthread_mutex_lock(&job_lock);
	if (j->handle != NULL) {
		switch (t->action) {
		case 2:
			(void)EXPECT(tpe_job_wait(j->handle, 1 * MS), EDEADLK);
			break;
		case 3:     /* 0 only looks: it cannot have completed */
			(void)EXPECT(tpe_job_wait(j->handle, 0), ETIMEDOUT);
			break;
		case 4:
			__atomic_store_n(&j->cancelled, 1, __ATOMIC_SEQ_CST);
			(void)EXPECT(tpe_job_cancel(j->handle), 0);
			break;
		}
	}
	pthread_mutex_unlock(&job_lock);
}

static int
tasklet_fn(void *ctx)
{
	struct tasklet_model *t = ctx;
	int n, rc;

	/* Calls never overlap, none follows the end or the completion. */
	CHECK(__atomic_exchange_n(&t->in_call, 1, __ATOMIC_SEQ_CST) == 0);
	CHECK(__atomic_load_n(&t->ended, __ATOMIC_SEQ_CST) == 0);
	CHECK(__atomic_load_n(&t->job->frozen, __ATOMIC_SEQ_CST) == 0);
	n = __atomic_fetch_add(&t->calls, 1, __ATOMIC_SEQ_CST);
	if (n == 0 && t->action != 0)
		tasklet_action(t);
	rc = t->final == FOREVER || (unsigned)n < t->steps ? t->step_rc :
	    t->final;
	t->last_thread = pthread_self();
	__atomic_store_n(&t->last, rc, __ATOMIC_SEQ_CST);
	__atomic_store_n(&t->in_call, 0, __ATOMIC_SEQ_CST);
	return rc;
}

static void
end_fn(void *ctx, int result)
{
	struct tasklet_model *t = ctx;

	/* Exactly once, after the last call, on the thread that made it
	 * (tpe_coop_submit(3)). */
	CHECK(__atomic_exchange_n(&t->ended, 1, __ATOMIC_SEQ_CST) == 0);
	CHECK(__atomic_load_n(&t->in_call, __ATOMIC_SEQ_CST) == 0);
	if (__atomic_load_n(&t->calls, __ATOMIC_SEQ_CST) > 0)
		CHECK(pthread_equal(t->last_thread, pthread_self()));
	t->end_result = result;
}

/* A tasklet of a bad submission: never called. */
static int
never_fn(void *ctx)
{
	(void)ctx;
	broken(__LINE__, "a tasklet of a refused submission", 0, "no call");
	return TPE_DONE;
}

/*
 * The job has completed (its wait returned rc, which is its result):
 * every end callback ran once with what its tasklet's calls call for, and
 * rc is 0 when all finished, ECANCELED only when it was cancelled, else
 * one of the errors its tasklets returned (tpe_job_wait(3)).
 */
static void
job_check(struct job_model *j, int rc)
{
	bool all_done = true, from_tasklet = false;
	bool cancelled = __atomic_load_n(&j->cancelled, __ATOMIC_SEQ_CST);
	size_t i;
	int e;

	__atomic_store_n(&j->frozen, 1, __ATOMIC_SEQ_CST);
	for (i = 0; i < j->n; i++) {
		struct tasklet_model *t = &j->t[i];

		e = expected_end(t);
		if (t->has_end) {
			CHECK(__atomic_load_n(&t->ended, __ATOMIC_SEQ_CST) == 1);
			CHECK(t->end_result == e);
		}
		all_done = all_done && e == 0;
		from_tasklet = from_tasklet || (e == rc && e != ECANCELED);
	}
	if (rc == 0)
		CHECK(all_done);
	else if (rc == ECANCELED)
		CHECK(cancelled);
	else
		CHECK(from_tasklet);
	if (!cancelled && all_done)
		CHECK(rc == 0);
}

static struct job_model *
pick_job(void)
{
	return njobs == 0 ? NULL : &jobs[take() % (unsigned)njobs];
}

static void
coop_create(void)
{
	static const size_t threads[8] = { 0, 1, 2, 1, 2, 3, 4097, 1 };
	static const int64_t parks[4] = { 0, 1000, 50000, -1 };
	static const unsigned flags[4] = { 0, TPE_COOP_NO_STEALING, 0, 0x8 };
	static const char *names[4] = { NULL, "fz", "a-long-thread-name", NULL };
	struct {
		struct tpe_coop_config c;
		unsigned char later[16];    /* a newer program's fields */
	} cfg;
	tpe_coop_t *c = (tpe_coop_t *)&cfg;     /* not written on error */
	unsigned a = take(), b = take(), sz = (b >> 2) & 7;
	size_t size = sz == 5 ? sizeof(cfg) : sz == 6 ?
	    sizeof(cfg.c) - 1 - (b >> 5) : sizeof(cfg.c);
	bool ok;
	int rc;

	memset(&cfg, 0, sizeof(cfg));
	cfg.c.threads = threads[a & 7];
	cfg.c.max_park_ns = parks[(a >> 3) & 3];
	cfg.c.flags = flags[(a >> 5) & 3];
	cfg.c.thread_name = names[b & 3];
	ok = sz == 7 || (size >= sizeof(cfg.c) && cfg.c.threads <= 4096 &&
	    cfg.c.max_park_ns >= 0 && (cfg.c.flags & ~TPE_COOP_NO_STEALING) == 0);
	if (ok && coop != NULL)
		return;     /* one service at a time */
	rc = EXPECT(tpe_coop_create(&c, sz == 7 ? NULL : &cfg.c, size),
	    ok ? 0 : EINVAL);
	if (!ok) {
		__atomic_add_fetch(&bad_inputs, 1, __ATOMIC_RELAXED);
		CHECK(c == (tpe_coop_t *)&cfg);
		return;
	}
	if (rc == 0) {
		coop = c;
		coop_gen++;
	}
}

static void
coop_submit(void)
{
	unsigned char buf[TASKLETS * (sizeof(struct tpe_tasklet) + 16)];
	struct tpe_tasklet tl;
	struct job_model *j;
	tpe_job_t *h = (tpe_job_t *)buf;        /* not written on error */
	size_t i, n = take() % (TASKLETS + 1), size, stride;
	unsigned b = take() % 8;
	bool bad, any_forever = false, any_error = false;
	int rc;

	if (coop == NULL || njobs >= JOBS)
		return;
	/* "smaller than the first version of the structure": the library
	 * takes the end of its last field, flags, without the padding. */
	size = b < 5 ? sizeof(tl) : b == 5 ? TASKLET_V1 : b == 6 ?
	    sizeof(tl) + 16 : TASKLET_V1 - 1;
	stride = size;
	bad = n == 0 || size < TASKLET_V1;
	j = &jobs[njobs];
	memset(j, 0, sizeof(*j));
	j->coop = coop;
	j->gen = coop_gen;
	j->n = n;
	memset(buf, 0, sizeof(buf));
	for (i = 0; i < n; i++) {
		struct tasklet_model *t = &j->t[i];
		unsigned a = take(), c = take();

		t->job = j;
		t->steps = a & 3;
		t->step_rc = a & 4 ? TPE_NO_PROGRESS : TPE_MADE_PROGRESS;
		t->final = finals[(a >> 3) & 7];
		if (t->final == FOREVER)    /* backs off: no busy worker */
			t->step_rc = TPE_NO_PROGRESS;
		t->has_end = (a & 0x80) == 0 || (c & 0x08) == 0;
		t->action = (c & 7) >= 4 ? (int)(c & 7) - 3 :
		    (c & 0x87) == 0x83 ? 5 : 0;
		any_forever = any_forever || t->final == FOREVER;
		any_error = any_error || (t->final != FOREVER && t->final != 0);
		memset(&tl, 0, sizeof(tl));
		tl.fn = tasklet_fn;
		tl.ctx = t;
		tl.end = t->has_end ? end_fn : NULL;
		tl.flags = a & 0x40 ? TPE_TASKLET_BLOCKING : 0;
		if ((c & 0x70) == 0x70) {
			tl.fn = NULL;
			bad = true;
		} else if ((c & 0xf0) == 0x60) {
			tl.flags |= 0x4;    /* a flag the library does not know */
			bad = true;
		}
		memcpy(buf + i * stride, &tl, stride < sizeof(tl) ? stride :
		    sizeof(tl));
	}
	j->finite = !any_forever || any_error;
	if (bad)
		__atomic_add_fetch(&bad_inputs, 1, __ATOMIC_RELAXED);
	rc = EXPECT(tpe_coop_submit(coop, (const struct tpe_tasklet *)buf, n,
	    size, &h), bad ? EINVAL : 0);
	if (rc != 0) {
		/* No tasklet called, no end callback run, *job not written. */
		CHECK(h == (tpe_job_t *)buf);
		for (i = 0; i < n; i++)
			CHECK(j->t[i].calls == 0 && j->t[i].ended == 0);
		return;
	}
	pthread_mutex_lock(&job_lock);
	j->handle = h;
	pthread_mutex_unlock(&job_lock);
	njobs++;
}

static void
job_wait(void)
{
	struct job_model *j = pick_job();
	unsigned b = take() % 4;
	int64_t timeout = b == 0 ? 0 : b == 1 ? 100000 : b == 2 ? 1 * MS : -1;
	int rc;

	if (j == NULL || j->handle == NULL)
		return;
	if (timeout < 0 && !j->finite &&
	    !__atomic_load_n(&j->cancelled, __ATOMIC_SEQ_CST))
		timeout = 1 * MS;
	rc = EXPECT(tpe_job_wait(j->handle, timeout), 0, ETIMEDOUT, ECANCELED,
	    EIO, EINVAL);
	/* ETIMEDOUT is also a result (issue 16): known only without limit. */
	if (rc != ETIMEDOUT || timeout < 0)
		job_check(j, rc);
}

/* tpe_job_wait_result(3): 0 and the outcome once the job completed,
 * ETIMEDOUT (nothing written) while it has not; never ETIMEDOUT without
 * a limit. */
static void
job_wait_result(void)
{
	struct job_model *j = pick_job();
	unsigned b = take() % 4;
	int64_t timeout = b == 0 ? 0 : b == 1 ? 100000 : b == 2 ? 1 * MS : -1;
	int rc, result = INT_MIN;

	if (j == NULL || j->handle == NULL)
		return;
	if (timeout < 0 && !j->finite &&
	    !__atomic_load_n(&j->cancelled, __ATOMIC_SEQ_CST))
		timeout = 1 * MS;
	rc = EXPECT(tpe_job_wait_result(j->handle, timeout, &result), 0,
	    ETIMEDOUT);
	if (rc == 0) {
		job_check(j, result);
	} else {
		CHECK(result == INT_MIN);
		CHECK(timeout >= 0);
	}
}

static void
job_cancel(void)
{
	struct job_model *j = pick_job();

	if (j == NULL || j->handle == NULL)
		return;
	__atomic_store_n(&j->cancelled, 1, __ATOMIC_SEQ_CST);
	(void)EXPECT(tpe_job_cancel(j->handle), 0);
	/* From outside the service it returns once the job has completed:
	 * its result is there, and no call starts later. */
	job_check(j, EXPECT(tpe_job_wait(j->handle, 0), 0, ECANCELED, EIO,
	    EINVAL, ETIMEDOUT));
}

static void
job_release(void)
{
	struct job_model *j = pick_job();
	tpe_job_t *h;

	if (j == NULL)
		return;
	pthread_mutex_lock(&job_lock);
	h = j->handle;
	j->handle = NULL;
	pthread_mutex_unlock(&job_lock);
	tpe_job_release(h);     /* NULL: nothing happens */
}

/* tpe_coop_destroy(3): every job of the service cancelled, each tasklet
 * ended once, the jobs not released still answer their result. */
static void
coop_destroy(void)
{
	int i;

	if (coop == NULL)
		return;
	for (i = 0; i < njobs; i++)
		if (jobs[i].gen == coop_gen)
			__atomic_store_n(&jobs[i].cancelled, 1, __ATOMIC_SEQ_CST);
	(void)EXPECT(tpe_coop_destroy(coop), 0);
	coop = NULL;
	for (i = 0; i < njobs; i++) {
		struct job_model *j = &jobs[i];
		size_t k;

		if (j->gen != coop_gen)
			continue;
		__atomic_store_n(&j->frozen, 1, __ATOMIC_SEQ_CST);
		if (j->handle != NULL) {
			job_check(j, EXPECT(tpe_job_wait(j->handle, 0), 0,
			    ECANCELED, EIO, EINVAL, ETIMEDOUT));
			continue;
		}
		for (k = 0; k < j->n; k++)
			if (j->t[k].has_end)
				CHECK(__atomic_load_n(&j->t[k].ended,
				    __ATOMIC_SEQ_CST) == 1 &&
				    j->t[k].end_result == expected_end(&j->t[k]));
	}
	/* The jobs its tasklets submitted: ended once, or never called. */
	for (i = 0; i < CHILDREN && i < nchildren; i++) {
		struct tasklet_model *t = &children[i].t[0];

		if (children[i].gen != coop_gen)
			continue;
		__atomic_store_n(&children[i].frozen, 1, __ATOMIC_SEQ_CST);
		if (child_submitted[i])
			CHECK(t->ended == 1 && t->end_result == expected_end(t));
		else
			CHECK(t->calls == 0 && t->ended == 0);
	}
}

/* ---- a ring between two tasklets -------------------------------------- */

/* The producer offers 1..k, the consumer takes them in order, by polls or
 * drains, until the end of the stream; stealing may move either side to
 * another worker between two calls (the hand-over of tpe_ring_create(3)). */
static struct {
	tpe_ring_t *ring;       /* I */
	uintptr_t k;            /* I */
	bool drain;             /* I */
	uintptr_t sent;         /* the producer's */
	uintptr_t got;          /* the consumer's */
} pipe_m;

static int
pipe_producer(void *ctx)
{
	bool moved = false;

	(void)ctx;
	while (pipe_m.sent < pipe_m.k) {
		if (EXPECT(tpe_ring_offer(pipe_m.ring, (void *)(pipe_m.sent + 1)),
		    0, EAGAIN) != 0)
			return moved ? TPE_MADE_PROGRESS : TPE_NO_PROGRESS;
		pipe_m.sent++;
		moved = true;
	}
	(void)EXPECT(tpe_ring_close(pipe_m.ring), 0);
	return TPE_DONE;
}

static int
pipe_consumer(void *ctx)
{
	void *items[8];
	size_t i, n = 1;
	bool moved = false;
	int rc;

	(void)ctx;
	for (;;) {
		if (pipe_m.drain)
			rc = EXPECT(tpe_ring_drain(pipe_m.ring, items, 8, &n), 0,
			    EAGAIN, EPIPE);
		else
			rc = EXPECT(tpe_ring_poll(pipe_m.ring, &items[0]), 0,
			    EAGAIN, EPIPE);
		if (rc == EAGAIN)
			return moved ? TPE_MADE_PROGRESS : TPE_NO_PROGRESS;
		if (rc == EPIPE) {
			CHECK(pipe_m.got == pipe_m.k);
			return TPE_DONE;
		}
		CHECK(n >= 1 && n <= 8);
		for (i = 0; i < n; i++)
			CHECK((uintptr_t)items[i] == ++pipe_m.got);
		moved = true;
	}
}

static void
ring_pipe(void)
{
	static const size_t caps[4] = { 2, 4, 8, 2 };
	unsigned a = take(), b = take();
	struct tpe_tasklet tl[2];
	tpe_job_t *h;

	if (coop == NULL)
		return;
	memset(&pipe_m, 0, sizeof(pipe_m));
	if (EXPECT(tpe_ring_create(&pipe_m.ring, caps[a & 3]), 0) != 0)
		return;
	pipe_m.k = b % 48;
	pipe_m.drain = (a & 4) != 0;
	tl[0] = (struct tpe_tasklet){ pipe_producer, NULL, NULL,
	    a & 8 ? TPE_TASKLET_BLOCKING : 0 };
	tl[1] = (struct tpe_tasklet){ pipe_consumer, NULL, NULL,
	    a & 16 ? TPE_TASKLET_BLOCKING : 0 };
	if (EXPECT(tpe_coop_submit(coop, tl, 2, sizeof(tl[0]), &h), 0) == 0) {
		(void)EXPECT(tpe_job_wait(h, -1), 0);
		CHECK(pipe_m.sent == pipe_m.k && pipe_m.got == pipe_m.k);
		tpe_job_release(h);
	}
	tpe_ring_destroy(pipe_m.ring);
}

/* ---- the SPSC ring, against a model FIFO ------------------------------ */

#define RING_MAX 64

static tpe_ring_t *ring;
static struct {
	size_t cap, head, count;
	uintptr_t item[RING_MAX];
	uintptr_t next;         /* the next item: 0 (NULL) first */
	bool closed;
} rm;

static void
ring_create(void)
{
	static const size_t caps[16] = { 0, 1, 2, 3, 4, 6, 8, 16, 64, 5, 2, 4,
	    SIZE_MAX / 8 + 1, SIZE_MAX / 2 + 1, SIZE_MAX, 32 };
	tpe_ring_t *r = (tpe_ring_t *)&rm;      /* not written on error */
	size_t cap = caps[take() % 16];
	bool pow2 = cap >= 2 && (cap & (cap - 1)) == 0;
	int rc;

	if (!pow2) {
		BAD(tpe_ring_create(&r, cap));
		CHECK(r == (tpe_ring_t *)&rm);
		return;
	}
	/* Its array of pointers does not fit in a size_t: ENOMEM. */
	rc = EXPECT(tpe_ring_create(&r, cap), cap > RING_MAX ? ENOMEM : 0);
	if (rc != 0) {
		CHECK(r == (tpe_ring_t *)&rm);
		return;
	}
	tpe_ring_destroy(ring);     /* items in it are ours: plain numbers */
	ring = r;
	memset(&rm, 0, sizeof(rm));
	rm.cap = cap;
}

static void
ring_offer(void)
{
	unsigned i, k = 1 + take() % 4;

	for (i = 0; i < k && ring != NULL; i++) {
		void *item = (void *)rm.next;

		if (rm.closed) {
			(void)EXPECT(tpe_ring_offer(ring, item), EPIPE);
		} else if (rm.count == rm.cap) {
			(void)EXPECT(tpe_ring_offer(ring, item), EAGAIN);
		} else {
			(void)EXPECT(tpe_ring_offer(ring, item), 0);
			rm.item[(rm.head + rm.count++) % rm.cap] = rm.next++;
		}
	}
}

static void
ring_poll(void)
{
	void *item = &rm;

	if (ring == NULL)
		return;
	if (rm.count == 0) {
		(void)EXPECT(tpe_ring_poll(ring, &item),
		    rm.closed ? EPIPE : EAGAIN);
		CHECK(item == &rm);
		return;
	}
	(void)EXPECT(tpe_ring_poll(ring, &item), 0);
	CHECK((uintptr_t)item == rm.item[rm.head]);
	rm.head = (rm.head + 1) % rm.cap;
	rm.count--;
}

static void
ring_drain(void)
{
	static const size_t maxes[8] = { 0, 1, 2, 3, 5, 8, 70, 1 };
	void *items[72];
	size_t i, count = 99, max = maxes[take() % 8], k;

	if (ring == NULL)
		return;
	for (i = 0; i < 72; i++)
		items[i] = &rm;
	if (max == 0) {
		BAD(tpe_ring_drain(ring, items, 0, &count));
		CHECK(count == 99 && items[0] == &rm);
		return;
	}
	k = max < rm.count ? max : rm.count;
	if (k == 0) {
		(void)EXPECT(tpe_ring_drain(ring, items, max, &count),
		    rm.closed ? EPIPE : EAGAIN);
		CHECK(count == 99);
	} else {
		(void)EXPECT(tpe_ring_drain(ring, items, max, &count), 0);
		CHECK(count == k);
		for (i = 0; i < k; i++) {
			CHECK((uintptr_t)items[i] == rm.item[rm.head]);
			rm.head = (rm.head + 1) % rm.cap;
			rm.count--;
		}
	}
	for (i = k; i < 72; i++)
		CHECK(items[i] == &rm);
}

/* ---- the C-Thread-Pool API -------------------------------------------- */

#define THPOOLS 2
#define THJOBS 96

static threadpool th[THPOOLS];
static struct {
	int n;
	bool paused;
	bool self_jobs;         /* a job of it may call it */
} thm[THPOOLS];
static struct thjob {
	int pool;               /* its pool; -1 once destroyed */
	int ran;                /* A */
	int ran_at_destroy;
	bool after_pause;       /* added while its pool was paused */
	int action;             /* I: a call on its own pool (thjob_fn) */
	threadpool self;        /* I: its pool, for the action */
	int n;                  /* I: its pool's threads */
} thjobs[THJOBS];
static int nthjobs;
/* The jobs that jobs add to their own pool (action 4). */
static struct thjob thkids[THJOBS];
static int nthkids;             /* A */

static void
thjob_fn(void *arg)
{
	struct thjob *t = arg;
	int k, r;

	CHECK(__atomic_fetch_add(&t->ran, 1, __ATOMIC_SEQ_CST) == 0);
	/* tpe_thpool(3): called from one of the pool's jobs, thpool_wait()
	 * returns at once and thpool_destroy() does nothing. */
	switch (t->action) {
	case 1:
		thpool_wait(t->self);
		break;
	case 2:
		thpool_destroy(t->self);
		break;
	case 3:     /* this thread runs a job */
		r = thpool_num_threads_working(t->self);
		CHECK(r >= 1 && r <= t->n);
		break;
	case 4:
		k = __atomic_fetch_add(&nthkids, 1, __ATOMIC_SEQ_CST);
		if (k >= THJOBS)
			break;
		/* `pool` is its pool + 1, 0 until it is added. */
		__atomic_store_n(&thkids[k].pool, t->pool + 1, __ATOMIC_SEQ_CST);
		CHECK(thpool_add_work(t->self, thjob_fn, &thkids[k]) == 0);
		break;
	}
}

/* The jobs added by jobs of pool i, once it is idle: each ran once. */
static void
thkids_check(int i)
{
	int k, n = __atomic_load_n(&nthkids, __ATOMIC_SEQ_CST);

	for (k = 0; k < n && k < THJOBS; k++)
		if (__atomic_load_n(&thkids[k].pool, __ATOMIC_SEQ_CST) == i + 1)
			CHECK(__atomic_load_n(&thkids[k].ran,
			    __ATOMIC_SEQ_CST) == 1);
}

static void
thpool_resume_checked(int i)
{
	struct thjob *t;
	int k;

	/* No job added while paused has started (tpe_thpool(3)). */
	for (k = 0; k < nthjobs; k++) {
		t = &thjobs[k];
		if (t->pool == i && t->after_pause)
			CHECK(__atomic_load_n(&t->ran, __ATOMIC_SEQ_CST) == 0);
		if (t->pool == i)
			t->after_pause = false;
	}
	thpool_resume(th[i]);
	thm[i].paused = false;
}

static void
thpool_destroy_checked(int i)
{
	int k;

	if (th[i] != NULL && thm[i].self_jobs) {
		/* No other call on the pool may be under way at its
		 * destroy: its jobs that call it have to be over. */
		if (thm[i].paused)
			thpool_resume_checked(i);
		thpool_wait(th[i]);
		thkids_check(i);
		for (k = 0; k < THJOBS; k++)
			if (__atomic_load_n(&thkids[k].pool,
			    __ATOMIC_SEQ_CST) == i + 1)
				__atomic_store_n(&thkids[k].pool, -1,
				    __ATOMIC_SEQ_CST);
	}
	thpool_destroy(th[i]);      /* NULL: nothing */
	/* The jobs still queued never run: those added while paused. */
	for (k = 0; k < nthjobs; k++) {
		struct thjob *t = &thjobs[k];

		if (t->pool != i)
			continue;
		t->ran_at_destroy = __atomic_load_n(&t->ran, __ATOMIC_SEQ_CST);
		CHECK(t->ran_at_destroy <= 1);
		if (t->after_pause && thm[i].paused)
			CHECK(t->ran_at_destroy == 0);
		t->pool = -1;
	}
	th[i] = NULL;
	thm[i].paused = false;
	thm[i].self_jobs = false;
}

static void
thpool_op(int op)
{
	static const int counts[8] = { -1, 0, 1, 2, 3, INT_MIN, 1, 2 };
	int i = (int)(take() % THPOOLS), k, r;
	struct thjob *t;

	switch (op) {
	case OP_THPOOL_INIT:
		r = counts[take() % 8];
		if (th[i] != NULL)
			thpool_destroy_checked(i);
		th[i] = thpool_init(r);
		__atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
		CHECK((th[i] == NULL) == (r <= 0));
		if (r <= 0)
			__atomic_add_fetch(&bad_inputs, 1, __ATOMIC_RELAXED);
		thm[i].n = r;
		break;
	case OP_THPOOL_ADD:
		__atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
		if (th[i] == NULL) {
			__atomic_add_fetch(&bad_inputs, 1, __ATOMIC_RELAXED);
			CHECK(thpool_add_work(th[i], thjob_fn, &thjobs[0]) == -1);
			break;
		}
		if (nthjobs >= THJOBS)
			break;
		t = &thjobs[nthjobs++];
		t->pool = i;
		t->after_pause = thm[i].paused;
		CHECK(thpool_add_work(th[i], thjob_fn, t) == 0);
		break;
	case OP_THPOOL_ADD_SELF:
		k = 1 + (int)(take() % 4);
		if (th[i] == NULL || nthjobs >= THJOBS)
			break;
		__atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
		t = &thjobs[nthjobs++];
		t->pool = i;
		t->after_pause = thm[i].paused;
		t->action = k;
		t->self = th[i];
		t->n = thm[i].n;
		thm[i].self_jobs = true;
		CHECK(thpool_add_work(th[i], thjob_fn, t) == 0);
		break;
	case OP_THPOOL_WAIT:
		if (thm[i].paused)
			break;      /* waits until another thread resumes */
		thpool_wait(th[i]);
		if (th[i] == NULL)
			break;
		for (k = 0; k < nthjobs; k++)
			if (thjobs[k].pool == i)
				CHECK(__atomic_load_n(&thjobs[k].ran,
				    __ATOMIC_SEQ_CST) == 1);
		thkids_check(i);
		CHECK(thpool_num_threads_working(th[i]) == 0);
		break;
	case OP_THPOOL_PAUSE:
		thpool_pause(th[i]);
		thm[i].paused = th[i] != NULL;
		break;
	case OP_THPOOL_RESUME:
		thpool_resume_checked(i);
		break;
	case OP_THPOOL_WORKING:
		r = thpool_num_threads_working(th[i]);
		__atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
		CHECK(r >= 0 && r <= (th[i] == NULL ? 0 : thm[i].n));
		break;
	default:
		thpool_destroy_checked(i);
		break;
	}
}

/* The bad inputs of the strategy's counters, the tasklets, the ring and
 * the thpool API, one per call. */
static void
bad_input_more(void)
{
	struct tpe_strategy_stats st;
	struct tpe_tasklet tl = { never_fn, NULL, NULL, 0 };
	tpe_coop_t *c;
	tpe_job_t *j;
	tpe_ring_t *r;
	void *item, *items[2];
	size_t count;

	switch (take() % 20) {
	case 0: BAD(tpe_coop_create(NULL, NULL, 0)); break;
	case 1: BAD(tpe_coop_submit(NULL, &tl, 1, sizeof(tl), &j)); break;
	case 2: BAD(tpe_coop_submit(coop, NULL, 1, sizeof(tl), &j)); break;
	case 3: BAD(tpe_coop_submit(coop, &tl, 1, sizeof(tl), NULL)); break;
	case 4: BAD(tpe_job_wait(NULL, small_timeout())); break;
	case 5: BAD(tpe_job_cancel(NULL)); break;
	case 6: BAD(tpe_coop_destroy(NULL)); break;
	case 7: BAD(tpe_ring_create(NULL, 4)); break;
	case 8: BAD(tpe_ring_offer(NULL, NULL)); break;
	case 9: BAD(tpe_ring_poll(NULL, &item)); break;
	case 10: BAD(tpe_ring_poll(ring, NULL)); break;
	case 11: BAD(tpe_ring_drain(NULL, items, 2, &count)); break;
	case 12: BAD(tpe_ring_drain(ring, NULL, 2, &count)); break;
	case 13: BAD(tpe_ring_drain(ring, items, 2, NULL)); break;
	case 14: BAD(tpe_ring_close(NULL)); break;
	case 15: BAD(tpe_strategy_get_stats(NULL, &st, sizeof(st))); break;
	case 16: BAD(tpe_strategy_get_stats(strategy, NULL, sizeof(st)));
		break;
	case 17: BAD(tpe_strategy_destroy(NULL)); break;
	case 18:    /* NULL: nothing happens, or -1 and 0 */
		tpe_job_release(NULL);
		tpe_ring_destroy(NULL);
		thpool_wait(NULL);
		thpool_pause(NULL);
		thpool_resume(NULL);
		thpool_destroy(NULL);
		CHECK(thpool_num_threads_working(NULL) == 0);
		CHECK(thpool_add_work(NULL, thjob_fn, NULL) == -1);
		break;
	default:
		__atomic_add_fetch(&bad_inputs, 1, __ATOMIC_RELAXED);
		CHECK(thpool_add_work(th[0], NULL, NULL) == -1);
		break;
	}
	(void)c;
	(void)r;
}

/* The end of every input: everything accounted for exactly once. */
/* ---- delayed and periodic tasks (tpe_schedule(3)) ---------------------- */

/* ECANCELED after shutdown; otherwise 0: a schedule is never refused. */
static int
sched_rc(int rc, tpe_future_t *f, const char *call)
{
	__atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
	if (rc != (m.shutdown ? ECANCELED : 0))
		broken(__LINE__, call, rc, m.shutdown ? "ECANCELED" : "0");
	if (rc != 0 && f != NULL)
		broken(__LINE__, call, rc, "no future on failure");
	return rc;
}

/* A one-shot due in the past, now, in 1 or 3 ms; a future or not. */
static void
schedule_one(bool call)
{
	static const int64_t delays[4] = { -1, 0, 1 * MS, 3 * MS };
	int64_t d = delays[take() % 4];
	bool want = take() % 2 == 0;
	struct slot *s = new_slot(call ? FUTURE : SCHED);
	int rc;

	if (s == NULL)
		return;
	s->future = NULL;
	s->stop_after = call ? -1 : 0; /* a FUTURE of tpe_schedule_call */
	if (call)
		rc = sched_rc(tpe_schedule_call(pool, call_fn, s, d, want ?
		    &s->future : NULL), s->future, "tpe_schedule_call");
	else
		rc = sched_rc(tpe_schedule(pool, task_fn, s, d, want ?
		    &s->future : NULL), s->future, "tpe_schedule");
	s->accepted = rc == 0;
}

/* Fixed rate or fixed delay, 100 us or 1 ms; it stops itself. */
static void
schedule_periodic(void)
{
	unsigned b = take();
	int64_t initial = (int64_t)(b % 3) * MS / 2 - 1;
	int64_t period = b & 4 ? 1 * MS : MS / 10;
	struct slot *s = new_slot(PERIODIC);
	tpe_future_t *f = NULL;
	int rc;

	if (s == NULL)
		return;
	s->stop_after = 1 + (int)(take() % 3);
	if (b & 8)
		rc = sched_rc(tpe_schedule_at_fixed_rate(pool, periodic_fn, s,
		    initial, period, &f), f, "tpe_schedule_at_fixed_rate");
	else
		rc = sched_rc(tpe_schedule_with_fixed_delay(pool, periodic_fn,
		    s, initial, period, &f), f, "tpe_schedule_with_fixed_delay");
	s->accepted = rc == 0;
	s->future = f;
	/* Pairs with the task's acquire load. */
	__atomic_store_n(&s->self, f, __ATOMIC_RELEASE);
}

static void
future_get_delay(void)
{
	struct slot *s = pick();
	int64_t d = 12345;

	if (s == NULL || s->future == NULL || (s->kind != SCHED &&
	    s->kind != PERIODIC && !(s->kind == FUTURE && s->stop_after < 0)))
		return;
	(void)EXPECT(tpe_future_get_delay(s->future, &d), 0);
	/* At most the longest delay scheduled here (3 ms), or never. */
	CHECK(d <= 3 * MS || d == INT64_MAX);
}

/* A delay that saturates: "never"; cancelled, it comes back once. */
static void
schedule_never(void)
{
	struct slot *s = new_slot(SCHED);
	int64_t d = 0;
	int rc;

	if (s == NULL)
		return;
	s->future = NULL;
	rc = sched_rc(tpe_schedule(pool, task_fn, s, INT64_MAX - (int64_t)take(),
	    &s->future), s->future, "tpe_schedule(never)");
	s->accepted = rc == 0;
	if (rc != 0)
		return;
	(void)EXPECT(tpe_future_get_delay(s->future, &d), 0);
	CHECK(d > INT64_MAX / 2);
	(void)EXPECT(tpe_future_cancel(s->future), 0);
	s->cancelled = 1;
}

/* The bad inputs of the schedule calls: EINVAL, nothing scheduled, no
 * future written. */
static void
bad_input_sched(void)
{
	tpe_future_t *f = (tpe_future_t *)&f;
	int64_t d = 7;
	struct slot *s = new_slot(PLAIN);

	if (s == NULL)
		return;
	switch (take() % 9) {
	case 0:
		BAD(tpe_schedule(NULL, task_fn, s, 0, &f));
		break;
	case 1:
		BAD(tpe_schedule(pool, NULL, s, 0, &f));
		break;
	case 2:
		BAD(tpe_schedule_call(pool, NULL, s, 0, &f));
		break;
	case 3:
		BAD(tpe_schedule_at_fixed_rate(pool, task_fn, s, 0,
		    -(int64_t)take(), &f));
		break;
	case 4:
		BAD(tpe_schedule_with_fixed_delay(pool, task_fn, s, 0,
		    -(int64_t)take(), &f));
		break;
	case 5:
		BAD(tpe_schedule_at_fixed_rate(pool, NULL, s, 0, MS, &f));
		break;
	case 6:
		BAD(tpe_future_get_delay(NULL, &d));
		break;
	case 7:
		if (slots[0].future != NULL && slots[0].kind != FUTURE)
			BAD(tpe_future_get_delay(slots[0].future, NULL));
		break;
	default:
		/* A future of tpe_submit is not a scheduled one. */
		if (slots[0].kind == FUTURE && slots[0].future != NULL &&
		    slots[0].stop_after == 0)
			BAD(tpe_future_get_delay(slots[0].future, &d));
		break;
	}
	CHECK(f == (tpe_future_t *)&f || f == NULL);
	CHECK(d == 7 || d == 12345);
	CHECK(s->ran == 0 && s->handed == 0);
}

/* ---- the end ----------------------------------------------------------- */

static void
finish(void)
{
	void *result;
	int i, k, rc;

	open_gate();
	if (!m.shutdown)
		(void)EXPECT(tpe_resume(pool), 0);
	(void)EXPECT(tpe_shutdown(pool), 0);
	if (tpe_await_termination(pool, 10000 * MS) != 0)
		broken(__LINE__, "tpe_await_termination", ETIMEDOUT, "0 (hang)");
	CHECK(tpe_is_terminated(pool));
	if (strategy != NULL) {
		/* After shutdown it produces, and runs, in this thread; a
		 * false of the script ends one call (produce_fn). */
		for (i = 0; i < 2 * SLOTS && __atomic_load_n(&produced,
		    __ATOMIC_SEQ_CST) < __atomic_load_n(&budget,
		    __ATOMIC_SEQ_CST) && __atomic_load_n(&nslots,
		    __ATOMIC_SEQ_CST) < SLOTS; i++)
			(void)EXPECT(tpe_strategy_produce(strategy), 0);
		CHECK(__atomic_load_n(&produced, __ATOMIC_SEQ_CST) ==
		    __atomic_load_n(&budget, __ATOMIC_SEQ_CST) ||
		    __atomic_load_n(&nslots, __ATOMIC_SEQ_CST) >= SLOTS);
		strategy_quiet = true;
		strategy_destroy();
		CHECK(strategy == NULL);
	}
	for (i = 0; i < SLOTS && i < nslots; i++) {
		struct slot *s = &slots[i];
		int ran = __atomic_load_n(&s->ran, __ATOMIC_SEQ_CST);
		int handed = __atomic_load_n(&s->handed, __ATOMIC_SEQ_CST);

		if (!s->accepted) {
			CHECK(ran == 0 && handed == 0);
			continue;
		}
		if (s->kind == PERIODIC) {
			/* Any number of runs; back once; cancelled. */
			CHECK(handed == 1 && !s->removed);
			CHECK(tpe_future_get(s->future, 0, NULL) == ECANCELED);
			CHECK(tpe_future_is_cancelled(s->future));
			tpe_future_release(s->future);
			continue;
		}
		if (s->kind == FUTURE || (s->kind == SCHED &&
		    s->future != NULL)) {
			CHECK(ran <= 1 && handed <= 1);
			CHECK(!(ran && (handed || s->cancelled)));
			if (s->future == NULL)
				continue;
			result = NULL;
			rc = EXPECT(tpe_future_get(s->future, 0, &result), 0,
			    ECANCELED);
			CHECK(rc == 0 ? ran == 1 && result == (s->kind == SCHED ?
			    NULL : s) : ran == 0);
			CHECK(tpe_future_is_done(s->future));
			CHECK(tpe_future_is_cancelled(s->future) == (rc != 0));
			tpe_future_release(s->future);
			continue;
		}
		CHECK(ran + handed + s->removed == 1);
	}
	(void)EXPECT(tpe_destroy(pool), 0);

	coop_destroy();
	for (i = 0; i < njobs; i++) {
		if (jobs[i].handle != NULL)
			tpe_job_release(jobs[i].handle);
		jobs[i].handle = NULL;
	}
	tpe_ring_destroy(ring);
	for (i = 0; i < THPOOLS; i++)
		thpool_destroy_checked(i);
	/* Nothing runs after its pool's destroy. */
	for (k = 0; k < nthjobs; k++)
		CHECK(__atomic_load_n(&thjobs[k].ran, __ATOMIC_SEQ_CST) ==
		    thjobs[k].ran_at_destroy);
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
	int op, rc, code;

	in = data;
	in_left = size;
	memset(slots, 0, sizeof(slots));
	nslots = 0;
	budget = produced = 0;
	gate_open = 0;
	strategy = NULL;
	strategy_quiet = true;
	script_len = script_pos = 0;
	odd_last = false;
	memset(&m, 0, sizeof(m));
	memset(jobs, 0, sizeof(jobs));
	njobs = 0;
	memset(children, 0, sizeof(children));
	memset(child_submitted, 0, sizeof(child_submitted));
	nchildren = 0;
	coop = NULL;
	ring = NULL;
	memset(&rm, 0, sizeof(rm));
	memset(th, 0, sizeof(th));
	memset(thm, 0, sizeof(thm));
	memset(thjobs, 0, sizeof(thjobs));
	nthjobs = 0;
	memset(thkids, 0, sizeof(thkids));
	nthkids = 0;

	pool = create_pool();
	for (op = 0; op < MAX_OPS && in_left > 0; op++) {
		switch ((code = (int)(take() % OP_COUNT))) {
		case OP_EXECUTE:
		case OP_EXECUTE_GATED:     /* a task that waits for the gate */
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
		case OP_SUBMIT:
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
		case OP_TRY_EXECUTE:     /* EAGAIN when none is parked */
			if ((s = new_slot(PLAIN)) == NULL)
				break;
			/* tpe_try_execute(3): EAGAIN also when the pool is
			 * paused or has no capacity of reserved threads. */
			rc = m.shutdown ? EXPECT(tpe_try_execute(pool, task_fn, s),
			    ECANCELED) : m.paused || m.no_reserved ?
			    EXPECT(tpe_try_execute(pool, task_fn, s), EAGAIN) :
			    EXPECT(tpe_try_execute(pool, task_fn, s), 0, EAGAIN);
			s->accepted = rc == 0;
			break;
		case OP_REMOVE:     /* a plain task */
			if ((s = pick()) == NULL || s->kind == FUTURE ||
			    s->kind == PRODUCED || s->kind == PERIODIC ||
			    (s->kind == SCHED && s->future != NULL))
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
		case OP_PURGE:
			n = 99;
			rc = EXPECT(tpe_purge(pool, &n), m.kind ==
			    TPE_QUEUE_PER_WORKER ? ENOTSUP : 0);
			CHECK(rc != 0 || n < SLOTS);
			break;
		case OP_PAUSE:
			(void)EXPECT(tpe_pause(pool), m.shutdown ? ECANCELED : 0);
			m.paused = !m.shutdown;
			break;
		case OP_RESUME:
			(void)EXPECT(tpe_resume(pool), m.shutdown ? ECANCELED : 0);
			m.paused = false;
			break;
		case OP_SET_POOL_SIZE: {   /* valid or not */
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
		case OP_WAIT_IDLE:
			if (EXPECT(tpe_wait_idle(pool, small_timeout()), 0,
			    ETIMEDOUT) == 0)
				strategy_quiet = true;
			break;
		case OP_SHUTDOWN:
			(void)EXPECT(tpe_shutdown(pool), 0);
			m.shutdown = true;
			break;
		case OP_SHUTDOWN_NOW:
			(void)EXPECT(tpe_shutdown_now(pool, handback_fn, NULL), 0);
			m.shutdown = true;
			break;
		case OP_AWAIT_TERMINATION:
			rc = EXPECT(tpe_await_termination(pool, small_timeout()),
			    0, ETIMEDOUT);
			CHECK(rc != 0 || (m.shutdown && tpe_is_terminated(pool)));
			if (rc == 0)
				strategy_quiet = true;
			break;
		case OP_FUTURE_GET: {
			void *result = NULL;

			if ((s = pick()) == NULL || s->future == NULL)
				break;
			rc = EXPECT(tpe_future_get(s->future, small_timeout(),
			    &result), 0, ETIMEDOUT, ECANCELED);
			if (rc == 0)
				CHECK(s->kind != PERIODIC && result == (s->kind ==
				    SCHED ? NULL : s) &&
				    __atomic_load_n(&s->ran, __ATOMIC_SEQ_CST));
			break;
		}
		case OP_FUTURE_CANCEL:
			if ((s = pick()) == NULL || s->future == NULL)
				break;
			/* A periodic task: 0 even while it runs. */
			rc = s->kind == PERIODIC ?
			    EXPECT(tpe_future_cancel(s->future), 0) :
			    EXPECT(tpe_future_cancel(s->future), 0, EBUSY);
			if (rc == 0)
				s->cancelled = 1;
			break;
		case OP_FUTURE_RELEASE:
			/* A periodic task's future is kept: the task cancels
			 * it itself (released at the end). */
			if ((s = pick()) == NULL || s->future == NULL ||
			    s->kind == PERIODIC)
				break;
			tpe_future_release(s->future);
			s->future = NULL;
			break;
		case OP_STRATEGY_CREATE:
			strategy_create();
			break;
		case OP_STRATEGY_PRODUCE:
			if (strategy == NULL)
				break;
			__atomic_add_fetch(&budget, 1 + (int)(take() % 4),
			    __ATOMIC_SEQ_CST);
			strategy_quiet = false;
			(void)EXPECT(tpe_strategy_produce(strategy), 0);
			break;
		case OP_STRATEGY_DISPATCH:
			if (strategy == NULL)
				break;
			__atomic_add_fetch(&budget, 1, __ATOMIC_SEQ_CST);
			strategy_quiet = false;
			/* 0 also after shutdown, when a producer is
			 * running or on its way. */
			(void)EXPECT(tpe_strategy_dispatch(strategy), 0, EAGAIN,
			    m.shutdown ? ECANCELED : 0);
			break;
		case OP_OPEN_GATE:
			open_gate();
			break;
		case OP_GET_STATS:
			memset(&st, 0xa5, sizeof(st));
			n = sizeof(size_t) +
			    take() % (sizeof(st) - sizeof(size_t) + 1);
			(void)EXPECT(tpe_get_stats(pool, &st, n), 0);
			CHECK(st.max_size == m.max || n < 3 * sizeof(size_t));
			CHECK(n >= sizeof(st) ||
			    ((unsigned char *)&st)[sizeof(st) - 1] == 0xa5);
			break;
		case OP_BAD_INPUT:
			bad_input();
			break;
		case OP_STRATEGY_SCRIPT:
			strategy_script();
			break;
		case OP_STRATEGY_STATS:
			n = take() % 41;
			if (strategy != NULL)
				strategy_stats(n, false);
			break;
		case OP_STRATEGY_DESTROY:
			strategy_destroy();
			break;
		case OP_COOP_CREATE:
			coop_create();
			break;
		case OP_COOP_SUBMIT:
			coop_submit();
			break;
		case OP_JOB_WAIT:
			job_wait();
			break;
		case OP_JOB_CANCEL:
			job_cancel();
			break;
		case OP_JOB_RELEASE:
			job_release();
			break;
		case OP_COOP_DESTROY:
			coop_destroy();
			break;
		case OP_RING_CREATE:
			ring_create();
			break;
		case OP_RING_OFFER:
			ring_offer();
			break;
		case OP_RING_POLL:
			ring_poll();
			break;
		case OP_RING_DRAIN:
			ring_drain();
			break;
		case OP_RING_CLOSE:     /* idempotent */
			if (ring == NULL)
				break;
			(void)EXPECT(tpe_ring_close(ring), 0);
			rm.closed = true;
			break;
		case OP_RING_DESTROY:
			tpe_ring_destroy(ring);     /* NULL: nothing */
			ring = NULL;
			break;
		case OP_THPOOL_INIT:
		case OP_THPOOL_ADD:
		case OP_THPOOL_WAIT:
		case OP_THPOOL_PAUSE:
		case OP_THPOOL_RESUME:
		case OP_THPOOL_WORKING:
		case OP_THPOOL_DESTROY:
		case OP_THPOOL_ADD_SELF:
			thpool_op(code);
			break;
		case OP_BAD_INPUT_MORE:
			bad_input_more();
			break;
		case OP_RING_PIPE:
			ring_pipe();
			break;
		case OP_EXECUTE_WAIT:
		case OP_SUBMIT_WAIT: {
			/*
			 * tpe_execute_wait(3): what tpe_execute does, but a
			 * refusal for saturation (a full bounded queue, a
			 * hand-off with no taker; a paused pool takes no
			 * hand-off either) waits, here at most 100 us, and
			 * never calls the rejection policy: 0, ETIMEDOUT, or
			 * EAGAIN when no worker is alive and none can start.
			 * The calling thread is no pool thread: no EDEADLK.
			 */
			int64_t timeout = take() % 2 == 0 ? 0 : 100000;
			bool may_wait = (m.kind == TPE_QUEUE_BOUNDED ||
			    m.kind == TPE_QUEUE_HANDOFF ||
			    (m.kind == TPE_QUEUE_PRIORITY && m.cap > 0));

			if ((s = new_slot(code == OP_SUBMIT_WAIT ? FUTURE :
			    PLAIN)) == NULL)
				break;
			s->future = NULL;
			if (code == OP_SUBMIT_WAIT)
				rc = m.shutdown ? EXPECT(tpe_submit_wait(pool,
				    call_fn, s, timeout, &s->future),
				    ECANCELED) : may_wait ?
				    EXPECT(tpe_submit_wait(pool, call_fn, s,
				    timeout, &s->future), 0, ETIMEDOUT, EAGAIN) :
				    EXPECT(tpe_submit_wait(pool, call_fn, s,
				    timeout, &s->future), 0);
			else
				rc = m.shutdown ? EXPECT(tpe_execute_wait(pool,
				    task_fn, s, timeout), ECANCELED) : may_wait ?
				    EXPECT(tpe_execute_wait(pool, task_fn, s,
				    timeout), 0, ETIMEDOUT, EAGAIN) :
				    EXPECT(tpe_execute_wait(pool, task_fn, s,
				    timeout), 0);
			s->accepted = rc == 0;
			if (rc != 0)
				CHECK(s->future == NULL);
			break;
		}
		case OP_JOB_WAIT_RESULT:
			job_wait_result();
			break;
		case OP_SCHEDULE:
		case OP_SCHEDULE_CALL:
			schedule_one(code == OP_SCHEDULE_CALL);
			break;
		case OP_SCHEDULE_PERIODIC:
			schedule_periodic();
			break;
		case OP_FUTURE_GET_DELAY:
			future_get_delay();
			break;
		case OP_SCHEDULE_NEVER:
			schedule_never();
			break;
		case OP_BAD_INPUT_SCHED:
			bad_input_sched();
			break;
		default:
			break;
		}
		CHECK(tpe_is_shutdown(pool) == m.shutdown);
	}
	finish();
	return 0;
}
