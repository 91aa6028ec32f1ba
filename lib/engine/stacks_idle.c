/* SPDX-License-Identifier: MIT */
/*
 * stacks_idle.c - the stacks engine's idle protocol: when a worker whose
 * stack is empty spins, watches or sleeps deep, and who wakes it, without
 * losing a wake-up and without a wake-up per task.
 *
 * Design notes
 * ------------
 * Where it sits: a part of the stacks engine (stacks.h); stacks.c's loop
 * calls tpe__stacks_idle_wait when its stack is empty, its pushes call
 * tpe__stacks_ensure_watcher. It steals through stacks.c and parks on
 * base/park.h.
 *
 * The states of a worker, and what a push onto its stack, a take (it
 * finds tasks: its own, or stolen) and a timeout do in each:
 *
 *   state     flags           push onto its stack   take        timeout
 *   --------  --------------  --------------------  ----------  ----------
 *   awake     busy            lands; if sleepers    runs the    -
 *                             sleep deep and none   batch
 *                             watches, wakes one
 *                             (ensure_watcher)
 *   spinning  busy, spinner   seen at its next      a steal:    SPIN_NS
 *             (one at most)   look: awake, takes    awake       spent: it
 *                                                               sleeps
 *   watching  ASLEEP marker,  replaces the marker   its look    WATCH_NS:
 *             in `watchers`   and wakes it: awake,  stole:      a look
 *                             passes the watch on   awake, the  (steal);
 *                             (pass_watch)          watch       none: it
 *                                                   passed on   watches on
 *   deep      ASLEEP marker,  replaces the marker   -           none
 *             in `deep`       and wakes it: awake
 *
 * A worker is awake (`busy`) from its start or wake-up until it goes to
 * sleep, running or idle. An idle worker spins (looking at its stack and
 * at others to steal) only when no other worker is awake and none spins
 * (`spinner`); otherwise it goes to sleep at once: spinners take the CPU
 * the submitters need, and one awake worker finds what there is. A
 * sleeper sleeps without a timeout (`deep`) when no other worker is
 * awake, else as a watcher that wakes every WATCH_NS to steal. A push
 * that lands behind an awake worker (it did not replace a marker) while
 * sleepers sleep but none watches wakes one to watch. So a task pushed
 * behind a worker stuck in a long task (or into the batch it holds back)
 * never waits for that task with idle workers asleep; and a lone task to
 * an idle pool wakes one worker only.
 *
 * The sleep protocol (a marker in the stack word and a wake sequence; one
 * RMW per push, and a system call only when the owner really sleeps):
 *   owner:   CAS head NULL -> ASLEEP (fails: a task came, take it)
 *            loop: seq = park_prepare; if head != ASLEEP or gen moved:
 *                  stop; park_wait(seq)
 *            then CAS head ASLEEP -> NULL if the marker is still there
 *   pusher:  CAS head old -> node (old ASLEEP: the node's next is NULL);
 *            if old was ASLEEP: park_wake_all (the sequence moves)
 * The pusher replaces the marker before it moves the sequence, and the
 * owner reads the sequence before it looks at head: if the owner still
 * sees the marker, its seq is older than the pusher's wake, so park_wait
 * returns at once or is woken. The pool's changes (shutdown, pause,
 * resume) bump `gen` after their change and then wake every slot
 * (tpe__stacks_wake_all_locked), and the owner reads gen after its marker
 * and before it sleeps: the same argument. A waker that wants a sleeper
 * (wake_one) takes its marker away with a CAS and wakes its park: the
 * same again (base/park.h). Removing the re-check (the head and gen
 * tests inside the loop of wait_for_change) loses wake-ups:
 * test_per_worker's no_lost_wakeup fails without it.
 *
 * The two store-then-load handshakes (tpe__dekker_store/_load, or a
 * seq_cst RMW as the store; base/atomic.h), where each side writes its
 * own word and then reads the other's, so that at least one of them
 * sees the other:
 *   1. The watcher pair. A pusher pushes (its CAS), then loads `deep` and
 *      `watchers` (ensure_watcher); a sleeper counts itself in `deep`,
 *      then loads the busy flags (other_awake) and watches instead if a
 *      worker is awake. A worker stores busy (tpe__stacks_set_awake)
 *      before it takes its marker back, so a push that lands after that
 *      finds it awake; a worker that takes a batch of more than one task
 *      makes the pusher's check itself after its busy store, once it has
 *      published the rest of its batch (run_batch, stacks.c): the pushes
 *      behind the first may have landed while it was not yet awake. And
 *      a watcher that stops watching (woken, or leaving with a stolen
 *      stack) and was the last one decrements `watchers`, then loads the
 *      heads and rests of the awake workers (pass_watch), against a
 *      pusher's (or a batch's) store followed by its load of `watchers`:
 *      the pushes behind a busy worker that found it watching woke
 *      nobody, so it wakes a deep sleeper to watch in its place.
 *   2. The tpe_wait_idle pair. The pool is idle when every stack is
 *      empty and no worker is awake. A worker stores busy = 0 before it
 *      sleeps (or waits out a pause holding nothing), then loads
 *      pool->idle_waiters and, when a waiter exists, takes the pool lock
 *      to wake it (tpe__pool_notify_idle_locked). The waiter counts itself
 *      in idle_waiters before it looks at the heads and then the busy
 *      flags (pool.h, tpe__stacks_idle_locked): either it sees the worker
 *      awake, or the worker sees it. A thief sets busy before its
 *      exchange or CAS (a release), so a waiter that reads the emptied
 *      word sees it busy. tpe_wait_idle so returns once the last worker
 *      has ended its spin.
 *
 * Why this is enough on a weakly ordered CPU (ARM, POWER): the handshakes
 * are the store-buffering pattern, which release and acquire alone do not
 * forbid there (both loads may read the old values: each store may still
 * sit in its core's store buffer). seq_cst on both sides forbids it: the
 * compilers emit, on AArch64, STLR / LDAR (or a full-barrier RMW), which
 * the architecture keeps in order against each other; on POWER a hwsync
 * before each seq_cst load and store. A side that used a weaker access
 * (a relaxed busy store, an acquire load of `deep`) would lose a wake-up
 * on those machines only, never on x86-64, where every RMW is a full
 * barrier and a seq_cst store is an XCHG: so each access of the pairs
 * here names its partner. The sleep protocol's order is the park's
 * (base/park.h: seq_cst on the sequence and on the look). The rest of
 * the idle words are hints that order nothing (`spinner`'s acquire CAS
 * and release store only hand the role on; `paused` is followed by a bump
 * of gen; a relaxed look at a head is re-checked by the take's RMW).
 *
 * Legend (doc/architecture.md) and the fields: stacks.h.
 */
#include <stdint.h>

#include "config.h"

#include "base/atomic.h"
#include "base/cpu.h"
#include "base/park.h"
#include "base/sync.h"
#include "engine/stacks.h"
#include "metrics/metrics.h"
#include "pool/pool.h"

/* How long an idle worker spins before it sleeps: a wake-up costs more
 * (several microseconds on a virtual machine). A variable, read when a
 * spin starts, so that white-box tests can make workers sleep at once. */
int64_t tpe__stacks_spin_ns = 50000;
/* White-box tests (stacks.h): NULL outside them. */
void (*tpe__stacks_sleep_hook)(void);
void (*tpe__stacks_watch_hook)(void);
/* How often a watcher looks for tasks an awake worker holds back (ns). */
#define WATCH_NS 1000000

/*
 * Sleeps until a push or a waker replaced the owner's ASLEEP marker (when
 * `marked`) or the pool changed (gen moved): true; or until deadline_ns
 * (absolute monotonic, negative: none): false. The re-check inside the
 * loop, after park_prepare, is what makes the protocol lose no wake-up
 * (Design notes).
 */
static bool
wait_for_change(struct tpe__stacks *se, struct tpe__stacks_slot *me,
    unsigned gen, bool marked, int64_t deadline_ns)
{
	for (;;) {
		unsigned seq = tpe__park_prepare(&me->park);

		/* After park_prepare: pair with the pusher's CAS and the
		 * pool's bump of gen, each made before the waker's
		 * park_wake_all (the sleep protocol). */
		if (marked && tpe__dekker_load(&me->head) !=
		    TPE__STACKS_ASLEEP)
			return true;
		if (tpe__dekker_load(&se->gen) != gen)
			return true;
		if (deadline_ns >= 0 && tpe__now_ns() >= deadline_ns)
			return false;
		(void)tpe__park_wait(&me->park, seq, deadline_ns);
	}
}

/* Wakes one sleeping worker other than `me` (NULL: any), taking its
 * marker away so that a push onto its stack does not wake it again. */
static void
wake_one(struct tpe__stacks *se, const struct tpe__stacks_slot *me)
{
	size_t i;

	for (i = 0; i < se->n; i++) {
		struct tpe__stacks_slot *s = &se->slots[i];
		struct tpe__task *expect = TPE__STACKS_ASLEEP;

		/* The CAS pairs with the owner's CAS back (sleep_until_work)
		 * and moves the marker before the wake (the sleep protocol). */
		if (s != me &&
		    tpe__hint_load(&s->head) == TPE__STACKS_ASLEEP &&
		    tpe__cas(&s->head, &expect, NULL)) {
			tpe__park_wake_all(&s->park);
			return;
		}
	}
}

/* stacks.h: ensure_watcher's slow path. */
void
tpe__stacks_wake_watcher(struct tpe__stacks *se,
    const struct tpe__stacks_slot *me)
{
	wake_one(se, me);
}

/*
 * Watcher `me` stops watching (woken, or with a stolen stack): tasks
 * waiting behind an awake worker other than `me` (on its stack or in the
 * rest of its batch) may have been pushed while it watched, so no push
 * woke anyone for them; ensure_watcher then wakes a deep sleeper to watch
 * in its place if `me` was the last watcher. The loads of handshake 1,
 * after the caller's decrement of `watchers`: they pair with a push's (or
 * a batch's rest store) before its ensure_watcher.
 */
static void
pass_watch(struct tpe__stacks *se, const struct tpe__stacks_slot *me)
{
	size_t i;

	for (i = 0; i < se->n; i++) {
		const struct tpe__stacks_slot *s = &se->slots[i];

		if (s != me && tpe__dekker_load(&s->busy) &&
		    (tpe__stacks_is_task(tpe__dekker_load(&s->head)) ||
		    tpe__dekker_load(&s->rest) != NULL)) {
			tpe__stacks_ensure_watcher(se, me);
			return;
		}
	}
}

void
tpe__stacks_set_asleep(struct tpe__stacks *se, struct tpe__stacks_slot *me)
{
	tpe_t *pool = se->pool;

	if (tpe__hint_load(&me->busy) == 0)
		return;
	/* Handshake 2: store busy, then load idle_waiters (the waiter's
	 * side: tpe__pool_idle_waited, then the busy flags). */
	tpe__dekker_store(&me->busy, 0);
	if (tpe__pool_idle_waited(pool)) {
		tpe__mutex_lock(&pool->lock);
		tpe__pool_notify_idle_locked(pool);
		tpe__mutex_unlock(&pool->lock);
	}
}

/* Whether a worker other than `me` is awake: the loads of handshake 1 on
 * the sleeper's side, after its count in `deep`; they pair with
 * tpe__stacks_set_awake. */
static bool
other_awake(const struct tpe__stacks *se, const struct tpe__stacks_slot *me)
{
	size_t i;

	for (i = 0; i < se->n; i++)
		if (&se->slots[i] != me && tpe__dekker_load(&se->slots[i].busy))
			return true;
	return false;
}

void
tpe__stacks_wait_while_paused(struct tpe__stacks *se,
    struct tpe__stacks_slot *me)
{
	for (;;) {
		unsigned gen = tpe__dekker_load(&se->gen);

		/* A hint: a change of paused is followed by a bump of gen
		 * (tpe__stacks_wake_all_locked), which the wait below sees. */
		if (!tpe__hint_load(&se->paused) ||
		    tpe__stacks_state_seq_cst(se->pool) != TPE__RUNNING)
			return;
		wait_for_change(se, me, gen, false, -1);
	}
}

/*
 * Spins while idle, when no other worker does: returns a stolen stack,
 * or NULL when the own stack has tasks, the pool changed, or the budget
 * ran out (or another worker spins, or spinning cannot pay).
 */
static struct tpe__task *
spin(struct tpe__stacks *se, struct tpe__stacks_slot *me, unsigned gen)
{
	struct tpe__backoff b;
	struct tpe__task *h = NULL;
	enum tpe__backoff_did did;
	int free_ = 0;

	if (!tpe__can_spin() || tpe__stacks_spin_ns <= 0 ||
	    other_awake(se, me))
		return NULL;
	/* One spinner at a time: two would take the CPU the submitters
	 * need (two cores, tiny tasks), and one finds what there is. The
	 * role only: acquire pairs with the release store that ends the
	 * last spin. */
	if (!__atomic_compare_exchange_n(&se->spinner, &free_, 1, false,
	    __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return NULL;
	tpe__backoff_init(&b, tpe__stacks_spin_ns, -1, 0);
	for (;;) {
		/* A hint; the take's exchange orders the nodes. */
		if (tpe__stacks_is_task(tpe__hint_load(&me->head)))
			break;
		did = tpe__backoff_step(&b);
		if (did == TPE__BACKOFF_SPENT)
			break;
		/* After each yield, the costlier looks. */
		if (did == TPE__BACKOFF_YIELDED) {
			if (tpe__hint_load(&se->gen) != gen)
				break;
			if (se->n > 1 &&
			    (h = tpe__stacks_steal(se, me)) != NULL)
				break;
		}
	}
	tpe__publish(&se->spinner, 0);
	if (h != NULL || tpe__stacks_is_task(tpe__hint_load(&me->head)))
		TPE__METRICS_WORKER_ADD(tpe__metrics_tls_worker, spin_hits, 1);
	return h;
}

/*
 * Sleeps through the protocol of the Design notes: deep when no other
 * worker is awake, else as a watcher that looks every WATCH_NS for a
 * worker stuck in one task with tasks behind it and steals them. Returns
 * a stolen stack, or NULL to look again; the worker is awake.
 */
static struct tpe__task *
sleep_until_work(struct tpe__stacks *se, struct tpe__stacks_slot *me,
    unsigned gen)
{
	struct tpe__task *expect = NULL, *h = NULL;
	bool deep = false;

	tpe__stacks_test_hook(&tpe__stacks_sleep_hook);
	/* The owner's side of the sleep protocol (its CAS pairs with the
	 * pushes'). A push may have landed since the loop looked: then the
	 * CAS fails and the owner takes it (a plain store of the marker
	 * would drop that stack). */
	if (!tpe__cas(&me->head, &expect, TPE__STACKS_ASLEEP))
		return NULL; /* a task came: take it */
	TPE__METRICS_WORKER_ADD(tpe__metrics_tls_worker, idle_waits, 1);
	tpe__stacks_set_asleep(se, me);
	for (;;) {
		bool woken;

		deep = false;
		if (!other_awake(se, me)) {
			/* Handshake 1: counted, then a second look. */
			tpe__fetch_add(&se->deep, 1);
			deep = !other_awake(se, me);
			if (!deep)
				tpe__fetch_sub(&se->deep, 1);
		}
		if (!deep)
			tpe__fetch_add(&se->watchers, 1);
		woken = wait_for_change(se, me, gen, true,
		    deep ? -1 : tpe__now_ns() + WATCH_NS);
		if (!woken)
			tpe__stacks_test_hook(&tpe__stacks_watch_hook);
		/* Handshake 1 (pass_watch): the decrement, then the look. */
		tpe__fetch_sub(deep ? &se->deep : &se->watchers, 1);
		if (woken) {
			TPE__METRICS_WORKER_ADD(tpe__metrics_tls_worker,
			    wakeups, 1);
			break;
		}
		/* A watcher's look: tasks waiting behind an awake worker
		 * (stuck in a long task, or behind). The marker stays: a
		 * push onto this stack still wakes it. */
		if (se->n > 1 && (h = tpe__stacks_steal(se, me)) != NULL)
			break;
		/* A steal that marked this worker awake and then found the
		 * tasks gone (their owner took them first) leaves it awake:
		 * asleep again, or tpe_wait_idle would wait for it forever
		 * and other workers would watch it instead of sleeping. */
		tpe__stacks_set_asleep(se, me);
	}
	/* It stopped watching (a deep sleeper was no watcher). */
	if (!deep)
		pass_watch(se, me);
	/* Awake first, then take the marker back if no push replaced it. */
	tpe__stacks_set_awake(me);
	expect = TPE__STACKS_ASLEEP;
	(void)tpe__cas(&me->head, &expect, NULL);
	return h;
}

struct tpe__task *
tpe__stacks_idle_wait(struct tpe__stacks *se, struct tpe__stacks_slot *me,
    unsigned gen)
{
	struct tpe__task *h = spin(se, me, gen);

	if (h == NULL && !tpe__stacks_is_task(tpe__hint_load(&me->head)) &&
	    tpe__hint_load(&se->gen) == gen)
		h = sleep_until_work(se, me, gen);
	return h;
}

void
tpe__stacks_wake_all_locked(struct tpe__engine *e)
{
	struct tpe__stacks *se = tpe__stacks_of(e);
	size_t i;

	TPE__ASSERT_HELD(&se->pool->lock);
	tpe__hint_store(&se->paused, se->pool->paused);
	/* After the change (state: set_state_locked, paused: above) and
	 * before the wake-ups: pairs with the owner's read of gen in the
	 * loop (stacks.c) and in wait_for_change. */
	tpe__fetch_add(&se->gen, 1);
	for (i = 0; i < se->n; i++)
		tpe__park_wake_all(&se->slots[i].park);
	/* Spares waiting for a slot look at the state again. */
	tpe__cond_broadcast(&se->spare_cond);
}

/*
 * Idle: every stack empty, then no worker awake (handshake 2): the heads
 * are read before the busy flags. L held (the waiter's count in
 * idle_waiters was stored under it).
 */
bool
tpe__stacks_idle_locked(struct tpe__engine *e)
{
	struct tpe__stacks *se = tpe__stacks_of(e);
	size_t i;

	TPE__ASSERT_HELD(&se->pool->lock);
	for (i = 0; i < se->n; i++)
		if (tpe__stacks_is_task(tpe__dekker_load(&se->slots[i].head)))
			return false;
	for (i = 0; i < se->n; i++)
		if (tpe__dekker_load(&se->slots[i].busy))
			return false;
	/* A thread that lost its slot in a task still runs it (its
	 * decrement of orphans, then its look at idle_waiters: handshake 2,
	 * stacks_blocking.c). */
	return tpe__dekker_load(&se->orphans) == 0;
}

/*
 * Settled sleepers (stacks.h): counted asleep (deep or watching) and
 * still marked. A worker being woken is counted until it runs again, but
 * its waker took its marker away first (a push's CAS, wake_one): so the
 * smaller of the two counts. Either count alone misleads a test: a
 * counted worker whose marker is gone takes pushes onto its own stack,
 * and a marked one that is not yet counted may still go deep.
 */
size_t
tpe__stacks_sleepers(const struct tpe__engine *e)
{
	const struct tpe__stacks *se = tpe__stacks_of_const(e);
	size_t counted, marked = 0, i;

	counted = tpe__dekker_load(&se->deep) +
	    tpe__dekker_load(&se->watchers);
	for (i = 0; i < se->n; i++)
		if (tpe__dekker_load(&se->slots[i].head) == TPE__STACKS_ASLEEP)
			marked++;
	return counted < marked ? counted : marked;
}

/* Workers counted as watchers (stacks.h). */
size_t
tpe__stacks_watchers(const struct tpe__engine *e)
{
	return tpe__dekker_load(&tpe__stacks_of_const(e)->watchers);
}
