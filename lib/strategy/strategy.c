/* SPDX-License-Identifier: MIT */
/*
 * strategy.c - the produce loop, the choice of PC, PIC, PEC or EPC per
 * task, pending producers, and the tpe_strategy_* functions. See
 * strategy.h for the design notes, the states and the invariants.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomic.h"
#include "base/cpu.h"
#include "base/invocation.h"
#include "base/probe.h"
#include "base/sized.h"
#include "strategy/strategy.h"

/* How one task is consumed (the design notes). Prefixed: libtool
 * defines PIC when it compiles for a shared library. */
enum mode { MODE_PC, MODE_PIC, MODE_PEC, MODE_EPC };

static void
count(uint64_t *counter, int delta)
{
	/* Relaxed: the counters order nothing. A reader that waited for a
	 * task to start (a latch, the pool's promises) sees it counted,
	 * since it was counted before it started in the same thread. */
	tpe__counter_add(counter, (uint64_t)(int64_t)delta);
}

/* ---- metrics: the EPC hand-over (strategy.h) -------------------------- */

/* Production was given up for EPC (invariant 2b). */
static void
handover_begin_locked(struct tpe_strategy *s)
{
	TPE__ASSERT_HELD(&s->lock);
	if (!s->metrics)
		return;
	TPE__ASSERT(s->handed_ns == 0);
	s->handovers++;
	s->handed_ns = tpe__now_ns();
}

/* IDLE -> PRODUCING by a pending producer (`pending`) or another thread:
 * the hand-over under way, if any, ends. */
static void
handover_end_locked(struct tpe_strategy *s, bool pending)
{
	int64_t ns;

	TPE__ASSERT_HELD(&s->lock);
	if (s->handed_ns == 0)
		return;
	if (pending) {
		ns = tpe__now_ns() - s->handed_ns;
		tpe_histogram_record(s->handover_time,
		    ns > 0 ? (uint64_t)ns : 0);
	} else {
		s->reclaimed++;
	}
	s->handed_ns = 0;
}

/* ---- pending producers ------------------------------------------------ */

/*
 * A start in progress, on the starting thread's stack: lets a pending
 * producer that the pool runs in the starting thread itself (inside
 * tpe_execute_typed: TPE_REJECT_CALLER_RUNS, a rejection handler) see
 * that it must not produce there.
 */
struct start {
	const struct tpe_strategy *s;
	bool ran_here;
	struct start *outer;
};

static TPE__TLS struct start *tls_start; /* T: this thread's starts */

static void try_produce(struct tpe_strategy *s, int from);

/* True when the pool runs s's pending producer inside the start of it
 * that this thread is making: then it only says so. */
static bool
ran_in_starter(const struct tpe_strategy *s)
{
	struct start *st;

	for (st = tls_start; st != NULL; st = st->outer)
		if (st->s == s) {
			st->ran_here = true;
			return true;
		}
	return false;
}

static void
run_queued(void *arg)
{
	if (!ran_in_starter(arg))
		try_produce(arg, TPE__PENDING_QUEUED);
}

static void
run_handed(void *arg)
{
	if (!ran_in_starter(arg))
		try_produce(arg, TPE__PENDING_HANDED);
}

/* Whether a pending producer of `kind` is on its way (strategy.h). */
static bool
on_its_way_locked(const struct tpe_strategy *s, int kind)
{
	TPE__ASSERT_HELD(&s->lock);
	return s->pending[kind] > s->starting[kind];
}

/*
 * Starts a pending producer of `kind`: HANDED through tpe_try_execute,
 * QUEUED through tpe_execute_typed. s->lock is held on entry and on return and
 * dropped while the pool decides (the pool may call a rejection handler,
 * user code). Counted before the pool is asked, undone when it refused.
 * 0 when the pool took it (it may even have run already), else the
 * pool's error, or EAGAIN when the pool ran it in this thread.
 * The caller is counted in s->callers, so s stays alive meanwhile.
 */
static int
start_pending_locked(struct tpe_strategy *s, int kind)
{
	struct start st = { s, false, tls_start };
	int rc;

	TPE__ASSERT_HELD(&s->lock);
	TPE__ASSERT(s->callers > 0);
	s->pending[kind]++;
	s->starting[kind]++;
	tpe__mutex_unlock(&s->lock);

	tls_start = &st;
	if (kind == TPE__PENDING_HANDED)
		rc = tpe_try_execute(s->pool, run_handed, s);
	else
		rc = tpe_execute_typed(s->pool, run_queued, s, TPE_BLOCKING);
	tls_start = st.outer;
	if (rc == 0 && st.ran_here)
		rc = EAGAIN; /* it did nothing: refused, as far as we care */

	tpe__mutex_lock(&s->lock);
	TPE__ASSERT(s->starting[kind] > 0);
	s->starting[kind]--;
	if (rc != 0) {
		/* Never ran (or ran as a no-op): nobody else took it off. */
		TPE__ASSERT(s->pending[kind] > 0);
		s->pending[kind]--;
	}
	return rc;
}

/* ---- adaptive: the wait after a miss ---------------------------------- */

/*
 * After a miss, the longest the producer waits for another thread to take
 * production (strategy.h, "The wait after a miss"), and how many relax
 * steps it spins between its looks (a retry of tpe_try_execute and the
 * clock). Not the library's backoff (base/park.h): it yields the
 * processor at each look, a system call that made this 4 us wait some
 * 10% slower on the handoff benchmark (adaptive 0.85-1.01x forced EPC
 * over 6 interleaved rounds, against 0.96-1.10x with this loop), and the
 * thread waited for runs on another processor or the wait does not pay.
 */
#define HAND_WAIT_NS 4000
#define HAND_LOOK_RELAX 128
/* A wait must earn its CPU (base/park.h, struct tpe__spin_pay). */
#define HAND_WAIT_MISSES 4
#define HAND_WAIT_PROBE 16

int64_t tpe__strategy_hand_wait_ns = HAND_WAIT_NS; /* strategy.h */
void (*tpe__strategy_hand_wait_hook)(void);        /* strategy.h */

/* `relayed` is written under s->lock and read under it, and, by the
 * waiting producer between its looks, without it: a relaxed hint that
 * only ends a spin early (the producer re-reads it under the lock). */
static void
set_relayed_locked(struct tpe_strategy *s, bool v)
{
	TPE__ASSERT_HELD(&s->lock);
	__atomic_store_n(&s->relayed, v, __ATOMIC_RELAXED);
}

static bool
relayed_hint(const struct tpe_strategy *s)
{
	return __atomic_load_n(&s->relayed, __ATOMIC_RELAXED);
}

/* What ended a wait after a miss. */
enum waited { WAITED_NONE, WAITED_HANDED, WAITED_RELAYED };

/*
 * ADAPTIVE, after tpe_try_execute missed: when production was handed on
 * before (a task ran EPC: the pool has reserved threads, and the thread
 * of the last EPC task is running it or has just gone back to the pool,
 * where it parks; the count is relaxed, a hint: a miss that comes before
 * the first EPC task is counted does not wait) and waits pay, waits at most tpe__strategy_hand_wait_ns, s->lock
 * dropped, for that thread to take production over as its task returns
 * (a relay: consume()), or for a reserved thread to park
 * (tpe_try_execute is retried at each look). s->lock held on entry and
 * on return; the caller is the producer, and is no longer when this
 * returns WAITED_RELAYED.
 */
static enum waited
wait_for_producer_locked(struct tpe_strategy *s)
{
	enum waited w = WAITED_NONE;
	int64_t deadline;
	bool started;
	int k;

	TPE__ASSERT_HELD(&s->lock);
	if (tpe__counter_read(&s->epc) == 0 || !tpe__can_spin() ||
	    tpe__strategy_hand_wait_ns <= 0 ||
	    !tpe__spin_pays(&s->wait_pay, HAND_WAIT_MISSES, HAND_WAIT_PROBE))
		return WAITED_NONE;
	s->waiting = true;
	tpe__mutex_unlock(&s->lock);
	if (tpe__strategy_hand_wait_hook != NULL)
		tpe__strategy_hand_wait_hook();
	deadline = tpe__now_ns() + tpe__strategy_hand_wait_ns;
	for (;;) {
		tpe__mutex_lock(&s->lock);
		/* A start drops the lock: a relay that comes meanwhile makes
		 * the relayer the producer, whatever the start did. */
		started = !s->relayed &&
		    start_pending_locked(s, TPE__PENDING_HANDED) == 0;
		if (s->relayed)
			w = WAITED_RELAYED;
		else if (started && on_its_way_locked(s, TPE__PENDING_HANDED))
			w = WAITED_HANDED;
		if (w != WAITED_NONE || tpe__now_ns() >= deadline)
			break;
		tpe__mutex_unlock(&s->lock);
		for (k = 0; k < HAND_LOOK_RELAX && !relayed_hint(s); k++)
			tpe__cpu_relax();
	}
	s->waiting = false;
	set_relayed_locked(s, false);
	tpe__spin_paid(&s->wait_pay, w != WAITED_NONE);
	return w;
}

/*
 * EPC's question, asked by the producer: is another thread on its way to
 * produce? Reuses one that is, or starts one: a HANDED one, and, when
 * `may_queue` (forced EPC), else a QUEUED one. True: yes, and production
 * is given up (IDLE) before the task runs (invariant 2b), or was relayed
 * (2c); *gen is then the generation this thread produced in, which
 * consume() compares after the task (invariant 3). False: nothing
 * changed, the caller still produces (a start that succeeded but whose
 * producer ran before we looked again found us producing and set
 * REPRODUCING: it is not on its way any more).
 */
static bool
hand_production_on(struct tpe_strategy *s, bool may_queue, uint64_t *gen)
{
	enum waited w = WAITED_NONE;
	bool yes;

	tpe__mutex_lock(&s->lock);
	TPE__ASSERT(s->state != TPE__S_IDLE);
	/* Ours while we produce: only a relay (which the wait below may
	 * meet, lock dropped) changes it before we give production up. */
	*gen = s->gen;
	yes = on_its_way_locked(s, TPE__PENDING_HANDED) ||
	    (may_queue && on_its_way_locked(s, TPE__PENDING_QUEUED));
	if (!yes && start_pending_locked(s, TPE__PENDING_HANDED) == 0)
		yes = on_its_way_locked(s, TPE__PENDING_HANDED);
	if (!yes && !may_queue) {
		w = wait_for_producer_locked(s);
		yes = w != WAITED_NONE;
	}
	if (!yes && may_queue &&
	    start_pending_locked(s, TPE__PENDING_QUEUED) == 0)
		yes = on_its_way_locked(s, TPE__PENDING_QUEUED);
	if (yes) {
		/* Relayed: production already has its next producer, the
		 * consumer that took it over (invariant 2c). */
		if (w != WAITED_RELAYED) {
			s->state = TPE__S_IDLE;
			handover_begin_locked(s);
		}
	}
	tpe__mutex_unlock(&s->lock);
	return yes;
}

/* ---- the produce loop ------------------------------------------------- */

/* For MODE_EPC, *gen is hand_production_on's. */
static enum mode
select_mode(struct tpe_strategy *s, enum tpe_invocation type,
    bool non_blocking, uint64_t *gen)
{
	switch (s->mode) {
	case TPE_STRATEGY_PC:
		return MODE_PC;
	case TPE_STRATEGY_PEC:
		return MODE_PEC;
	case TPE_STRATEGY_EPC:
		/* No thread at all for production: consume here and go on
		 * producing, which is PC. */
		return hand_production_on(s, true, gen) ? MODE_EPC : MODE_PC;
	case TPE_STRATEGY_ADAPTIVE:
		break;
	}
	if (type == TPE_NON_BLOCKING)
		return MODE_PC;
	if (non_blocking)
		return type == TPE_EITHER ? MODE_PC : MODE_PEC;
	if (hand_production_on(s, false, gen))
		return MODE_EPC;
	return type == TPE_EITHER ? MODE_PIC : MODE_PEC;
}

/*
 * PEC. When the pool refuses the task (saturated, shut down, out of
 * memory), the producing thread runs it, as TPE_REJECT_CALLER_RUNS would:
 * nothing is lost. It is counted in the mode it ran in: an EITHER task
 * runs as non-blocking (PIC), any other as it is (PC). A task that the
 * pool's own TPE_REJECT_CALLER_RUNS ran inside tpe_execute_typed counts
 * as PEC: the strategy cannot tell.
 */
static void
execute_or_run(struct tpe_strategy *s, tpe_fn fn, void *arg,
    enum tpe_invocation type)
{
	count(&s->pec, 1); /* before the task can start (count()) */
	if (tpe_execute_typed(s->pool, fn, arg, type) == 0)
		return;
	count(&s->pec, -1);
	if (type == TPE_EITHER) {
		count(&s->pic, 1);
		tpe__invoke_non_blocking(fn, arg);
	} else {
		count(&s->pc, 1);
		fn(arg);
	}
}

/*
 * Runs one task; true when this thread is still the producer afterwards.
 * For EPC it is the race of invariant 3, after the task, always.
 */
static bool
consume(struct tpe_strategy *s, tpe_fn fn, void *arg,
    enum tpe_invocation type, bool non_blocking)
{
	uint64_t gen = 0;
	bool again;

	switch (select_mode(s, type, non_blocking, &gen)) {
	case MODE_PC:
		count(&s->pc, 1);
		fn(arg);
		return true;
	case MODE_PIC:
		count(&s->pic, 1);
		tpe__invoke_non_blocking(fn, arg);
		return true;
	case MODE_PEC:
		execute_or_run(s, fn, arg, type);
		return true;
	case MODE_EPC:
		break;
	}
	count(&s->epc, 1);
	TPE__PROBE2(strategy__handover, s, s->pool);
	fn(arg);
	tpe__mutex_lock(&s->lock);
	if (s->state == TPE__S_IDLE && s->gen == gen) {
		/* Nobody produced since we gave production up: we beat the
		 * pending producer. */
		s->state = TPE__S_PRODUCING;
		s->gen++;
		handover_end_locked(s, false);
		again = true;
	} else if (s->waiting && !s->relayed) {
		/* The producer waits for a thread after a miss: this one
		 * takes production over, state unchanged (invariant 2c). */
		set_relayed_locked(s, true);
		s->gen++; /* a relay: a new producer */
		again = true;
	} else {
		/* Another thread produces, or produced since and found
		 * nothing (IDLE, gen moved on): leave. */
		s->callers--;
		again = false;
	}
	tpe__mutex_unlock(&s->lock);
	return again;
}

/*
 * The producer returned nothing. True: production ended (IDLE, and this
 * thread has left the strategy). False: someone asked for more while it
 * produced; produce again.
 */
static bool
end_production(struct tpe_strategy *s)
{
	bool end;

	tpe__mutex_lock(&s->lock);
	/* IDLE here would mean a second producer took over (invariant 1). */
	TPE__ASSERT(s->state != TPE__S_IDLE);
	end = s->state == TPE__S_PRODUCING;
	if (end) {
		s->state = TPE__S_IDLE;
		s->callers--;
	} else {
		s->state = TPE__S_PRODUCING;
	}
	tpe__mutex_unlock(&s->lock);
	return end;
}

static void
produce_loop(struct tpe_strategy *s, bool non_blocking)
{
	enum tpe_invocation type;
	tpe_fn fn;
	void *arg;

	for (;;) {
		fn = NULL;
		arg = NULL;
		type = TPE_BLOCKING;
		if (!s->produce(s->ctx, &fn, &arg, &type)) {
			if (end_production(s))
				return;
			continue;
		}
		if (fn == NULL)
			continue; /* no task after all (tpe_strategy_create(3)) */
		/* An unknown type is the safe one: it never runs inline
		 * without a hand-off (Jetty: not Invocable means BLOCKING). */
		if (!tpe__invocation_valid(type))
			type = TPE_BLOCKING;
		if (!consume(s, fn, arg, type, non_blocking))
			return;
	}
}

/*
 * Becomes the producer if the state is IDLE (invariant 1), else asks the
 * producer for one more pass. `from` is the kind of pending producer that
 * arrives here, or -1 for a tpe_strategy_produce call.
 */
static void
try_produce(struct tpe_strategy *s, int from)
{
	tpe__mutex_lock(&s->lock);
	if (from >= 0) {
		TPE__ASSERT(s->pending[from] > 0);
		s->pending[from]--; /* arrived: no longer pending */
	}
	switch (s->state) {
	case TPE__S_IDLE:
		s->state = TPE__S_PRODUCING;
		s->gen++; /* IDLE -> PRODUCING: a new producer */
		s->callers++;
		handover_end_locked(s, from >= 0);
		break;
	case TPE__S_PRODUCING:
		s->state = TPE__S_REPRODUCING;
		tpe__mutex_unlock(&s->lock);
		return;
	default:
		tpe__mutex_unlock(&s->lock);
		return;
	}
	tpe__mutex_unlock(&s->lock);
	/* Sampled once, when this thread becomes the producer (Jetty). */
	produce_loop(s, tpe__tls_non_blocking);
}

/* ---- the API ---------------------------------------------------------- */

int
tpe_strategy_create(tpe_strategy_t **sp, tpe_t *pool, tpe_produce_fn produce,
    void *ctx, enum tpe_strategy_mode mode)
{
	struct tpe_strategy *s;

	if (sp == NULL || pool == NULL || produce == NULL)
		return EINVAL;
	switch (mode) {
	case TPE_STRATEGY_ADAPTIVE:
	case TPE_STRATEGY_PC:
	case TPE_STRATEGY_PEC:
	case TPE_STRATEGY_EPC:
		break;
	default:
		return EINVAL;
	}
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return ENOMEM;
	s->pool = pool;
	s->produce = produce;
	s->ctx = ctx;
	s->mode = mode;
	s->state = TPE__S_IDLE;
	tpe__mutex_init_ranked(&s->lock, TPE__RANK_STRATEGY);
	*sp = s;
	return 0;
}

int
tpe_strategy_produce(tpe_strategy_t *s)
{
	if (s == NULL)
		return EINVAL;
	try_produce(s, -1);
	return 0;
}

int
tpe_strategy_dispatch(tpe_strategy_t *s)
{
	int rc = 0;

	if (s == NULL)
		return EINVAL;
	tpe__mutex_lock(&s->lock);
	switch (s->state) {
	case TPE__S_IDLE:
		if (on_its_way_locked(s, TPE__PENDING_QUEUED) ||
		    on_its_way_locked(s, TPE__PENDING_HANDED))
			break; /* it will call the producer (invariant 4) */
		s->callers++;
		rc = start_pending_locked(s, TPE__PENDING_QUEUED);
		s->callers--;
		break;
	case TPE__S_PRODUCING:
		s->state = TPE__S_REPRODUCING;
		break;
	default:
		break;
	}
	tpe__mutex_unlock(&s->lock);
	return rc;
}

int
tpe_strategy_get_stats(const tpe_strategy_t *s,
    struct tpe_strategy_stats *stats, size_t size)
{
	struct tpe_strategy_stats snap = { 0 };
	int rc;

	if (s == NULL)
		return EINVAL;
	rc = tpe__sized_check(&tpe__strategy_stats_layout, stats, size);
	if (rc != 0)
		return rc;
	snap.pc = tpe__counter_read(&s->pc);
	snap.pic = tpe__counter_read(&s->pic);
	snap.pec = tpe__counter_read(&s->pec);
	snap.epc = tpe__counter_read(&s->epc);
	tpe__sized_copy(&tpe__strategy_stats_layout, stats, size, &snap);
	return 0;
}

int
tpe_strategy_destroy(tpe_strategy_t *s)
{
	bool busy;

	if (s == NULL)
		return EINVAL;
	tpe__mutex_lock(&s->lock);
	busy = s->callers != 0 || s->pending[TPE__PENDING_QUEUED] != 0 ||
	    s->pending[TPE__PENDING_HANDED] != 0;
	TPE__ASSERT(busy || s->state == TPE__S_IDLE);
	tpe__mutex_unlock(&s->lock);
	if (busy)
		return EBUSY;
	/* Nobody is inside (invariant 6): the last one's unlock is done. */
	tpe__mutex_destroy(&s->lock);
	free(s->handover_time);
	free(s);
	return 0;
}

void
tpe__strategy_peek(tpe_strategy_t *s, struct tpe__strategy_peek *out)
{
	int k;

	tpe__mutex_lock(&s->lock);
	out->state = s->state;
	for (k = 0; k < TPE__PENDING_KINDS; k++) {
		out->pending[k] = s->pending[k];
		out->starting[k] = s->starting[k];
	}
	out->callers = s->callers;
	tpe__mutex_unlock(&s->lock);
}

/* ---- metrics ----------------------------------------------------------- */

#define END(m) TPE__END_OF(struct tpe_strategy_metrics, m)
static const size_t strategy_metrics_ends[] = {
	END(pc), END(pic), END(pec), END(epc), END(handovers),
	END(handovers_reclaimed), END(handover_time),
};
_Static_assert(END(handover_time) == sizeof(struct tpe_strategy_metrics),
    "strategy_metrics_ends lists every member");
#undef END
static const struct tpe__sized strategy_metrics_layout = {
	sizeof(struct tpe_strategy_metrics), strategy_metrics_ends,
	sizeof(strategy_metrics_ends) / sizeof(strategy_metrics_ends[0])
};

int
tpe_strategy_set_metrics(tpe_strategy_t *s, unsigned flags)
{
	struct tpe_histogram *h = NULL;

	if (s == NULL || (flags & ~(TPE_METRICS_ON | TPE_METRICS_TIME_ALL)) ||
	    (flags != 0 && !(flags & TPE_METRICS_ON)))
		return EINVAL;
	/* Allocated outside the lock; at most one is kept. */
	if (flags != 0 && (h = calloc(1, sizeof(*h))) == NULL)
		return ENOMEM;
	tpe__mutex_lock(&s->lock);
	if (flags != 0 && !s->metrics) {
		/* Off -> on: the counts start from 0. */
		free(s->handover_time);
		s->handover_time = h;
		h = NULL;
		s->handovers = s->reclaimed = 0;
		s->handed_ns = 0;
	}
	s->metrics = flags != 0;
	if (!s->metrics)
		s->handed_ns = 0; /* a hand-over under way is not counted */
	tpe__mutex_unlock(&s->lock);
	free(h);
	return 0;
}

int
tpe_strategy_get_metrics(const tpe_strategy_t *cs,
    struct tpe_strategy_metrics *metrics, size_t size)
{
	/* s->lock is taken: the strategy is not changed. */
	struct tpe_strategy *s = (struct tpe_strategy *)cs;
	struct tpe_strategy_metrics *snap = NULL;
	bool on;

	if (s == NULL ||
	    tpe__sized_check(&strategy_metrics_layout, metrics, size) != 0)
		return EINVAL;
	tpe__mutex_lock(&s->lock);
	/* Off: the caller's struct is left as it was. */
	on = s->metrics;
	if (on && (snap = tpe__sized_out_begin(&strategy_metrics_layout,
	    metrics, size)) != NULL) {
		snap->handovers = s->handovers;
		snap->handovers_reclaimed = s->reclaimed;
		memcpy(&snap->handover_time, s->handover_time,
		    sizeof(snap->handover_time));
	}
	tpe__mutex_unlock(&s->lock);
	if (!on)
		return ENOTSUP;
	if (snap == NULL)
		return ENOMEM;
	snap->pc = tpe__counter_read(&s->pc);
	snap->pic = tpe__counter_read(&s->pic);
	snap->pec = tpe__counter_read(&s->pec);
	snap->epc = tpe__counter_read(&s->epc);
	tpe__sized_out_end(&strategy_metrics_layout, metrics, size, snap);
	return 0;
}
