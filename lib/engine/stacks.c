/* SPDX-License-Identifier: MIT */
/*
 * stacks.c - the stacks engine (engine.h), TPE_QUEUE_PER_WORKER: a
 * lock-free stack per worker for many tiny tasks; its push, take and
 * steal, its workers' loop and its statistics.
 *
 * Design notes
 * ------------
 * Where it sits: an engine (engine.h), called by the pool through its ops
 * only; it runs tasks through the task module (pool/task.h), reads and
 * writes the pool's wc and idle waiters (pool.h), and is built on
 * lib/base's stack, park and backoff. It keeps its own storage: no queue
 * kind, no policy, no reserved threads (its row in kinds.c). Its other
 * two files: stacks_idle.c, what an idle worker does and who wakes it
 * (the state table is there); stacks_blocking.c, managed blocking. Their
 * shared state: stacks.h.
 *
 * The pool is fixed: core == max == n workers, all started by tpe_create
 * (pool.c, attach_engine), none leaving before shutdown. Worker i owns
 * slots[i]; a worker learns i from next_slot when its loop starts. Since
 * every slot has its owner from the first submission on, no task can wait
 * in a slot whose thread is missing. (Managed blocking adds spare threads
 * beyond n and moves a slot from a blocked thread to a spare; a slot then
 * still has a thread that will own it.)
 *
 * Submit (stacks_submit, no lock, any thread): the node comes from the
 * thread's node cache (node_cache.c: carved in address order from the
 * thread's chunk, so that a worker's walk of a batch is prefetched; no
 * malloc in the steady state: this kind lets the pool's return stack hold
 * TPE__NODE_RETURNS_MANY nodes' worth of chunks, so that workers do not
 * free what submitters allocated); the task is counted in its slot's
 * `pushed` (a relaxed add on the line the push takes anyway: no counter
 * line shared by every submitter), then pushed with one CAS onto the
 * slot's stack. The slot is the next of a thread-local round robin (no
 * shared line, seeded per thread), unless that slot's worker sleeps and
 * one of the next PICK_TRIES slots has an awake worker: then that one
 * (pick_slot). So a pool with more workers than its load needs runs on
 * the awake ones and does not pay a wake-up for every other task; a push
 * lands on a sleeping worker's stack only to wake it. pick_slot has
 * loaded the top to look for the ASLEEP marker, so the push's first CAS
 * guesses that top: the line is here already, and a guess of "empty"
 * would fail whenever the worker is behind.
 *
 * The stack word `head` holds NULL (empty), a task (the newest), or one of
 * two markers that only its owner sets (a waker may clear ASLEEP):
 *   TPE__STACKS_ASLEEP  the owner is asleep, or about to be: a push that
 *           replaces it wakes the owner (stacks_idle.c);
 *   TPE__STACKS_LEFT    the owner has left (shutdown): a push that finds
 *           it fails, and the task is refused with ECANCELED. So a push
 *           that succeeds always lands where its owner will look again:
 *           shutdown drains every stack and no task is stranded behind a
 *           worker that left.
 *
 * Take (owner): one exchange detaches the whole stack; the worker reverses
 * it (oldest first) and runs the batch. While a task of the batch runs,
 * the rest of the batch is published in `rest` and taken back after it
 * with one exchange, unless a thief took it. Between tasks the worker
 * checks the pool: pause waits, shutdown-now hands the rest back through
 * the discard callback. Nodes leave a stack or `rest` only all at once
 * (an exchange, or a CAS of the whole top to NULL), never singly, so
 * there is no ABA problem: a CAS that finds the same top takes whatever
 * stack is there, and no link under a top is written while it is in a
 * stack.
 *
 * Large batches run newest first: a stack taken whole (by its owner or a
 * thief) that holds more than LIFO_BATCH tasks by the estimate of the
 * slot's counters (`pushed` - `taken_upto` just before the take) is run
 * as it comes, without the reversal. Reversing walks every node once
 * more before the run walks it again, and the old nodes of a large stack
 * are cold: a worker far behind its submitter would spend most of its
 * time in that walk and fall further behind. Newest first also runs the
 * nodes still in cache first. (The measurements: bench/README.md, "The
 * per-worker pool's batches".)
 *
 * Back-pressure without waiting: every BACKLOG_EVERY-th push of a thread
 * looks at how many tasks its slot received since its stack was last
 * taken whole (`pushed` - `taken_upto`, relaxed hints) and, above
 * BACKLOG_MAX, yields the CPU once (sched_yield). A submitter that runs
 * ahead of the workers (one submitter, two workers, two cores: it only
 * pushes, they also run and recycle) otherwise builds a backlog of
 * millions of nodes, which the workers walk cold; the yield lets a worker
 * that shares the submitter's CPU catch up. The submitter never waits
 * and nothing is refused. `taken_upto` is stored by whoever takes the
 * whole stack (its owner, a thief), so steals leave no drift behind.
 *
 * Steal rule: an idle worker (spinning, or a watcher's look every
 * WATCH_NS, stacks_idle.c) takes from another awake worker first the
 * rest of the batch behind its running task, else its whole stack, and
 * runs it in run order. So a worker stuck in a long task strands
 * nothing: what it holds back and what is pushed onto its stack are
 * taken by a watcher or a spinner. A thief marks itself awake before it
 * takes (tpe_wait_idle, stacks_idle.c); a watcher whose steal finds the
 * tasks gone marks itself asleep again before it sleeps on.
 *
 * Order: tasks that one thread submits to one slot are pushed in order and
 * each detach of at most LIFO_BATCH tasks runs them oldest first, but the
 * slot a task goes to depends on who sleeps, and a thief runs part of a
 * worker's tasks while the owner runs others. So the kind promises no
 * order (tpe_attr_set_queue(3)).
 *
 * Statistics without a lock per task: each slot counts, written by its
 * owner only (tpe__owned_add: release stores, read with acquire loads),
 * the tasks it started and completed and the tasks it handed back at
 * shutdown-now; the drains count what they took, under the pool lock.
 * queued = pushed - started - handed back - removed; active = started
 * - completed; submitted = the sum of pushed. The taken counters are read
 * (acquire) before the pushed ones: a task's push count happens before
 * its push, its take and its started store, so a snapshot never shows
 * more taken than submitted.
 *
 * Which access pairs with which, and why that is enough on a weakly
 * ordered CPU (ARM, POWER), where a core may see another's stores late
 * and out of order unless an access orders them:
 *   - A task's fields, written by the submitter, then its push (a seq_cst
 *     CAS: a release) against the take (the owner's exchange, a thief's
 *     CAS, a drain's CAS: acquires): message passing. Release/acquire is
 *     exactly what it needs on every CPU (LDAR/STLR or DMB on AArch64,
 *     LWSYNC on POWER): the taker that reads the node's address reads
 *     the fields written before it.
 *   - The rest of a batch: its owner's store (a release: tpe__publish;
 *     the first of a batch seq_cst, for handshake 1 of stacks_idle.c)
 *     against the exchange that takes it (the owner's, a thief's: seq_cst
 *     RMWs, so acquires): message passing again, for the links of the
 *     rest, which the owner wrote when it reversed the batch.
 *   - The slot counters: tpe__owned_add (one writer: a load and a release
 *     store) against the acquire loads of the counts; `pushed` is a
 *     relaxed RMW, published by the push's CAS that follows it.
 *   - `gen`: the pool's change (under L), then the seq_cst bump, then the
 *     parks' wake (tpe__stacks_wake_all_locked) against the owner's load
 *     of gen before its look at the state: a change it misses moves gen
 *     for its sleep (the sleep protocol, stacks_idle.c).
 *   - The handshakes where each side stores and then loads the other's
 *     word (who sleeps, who is awake, tpe_wait_idle): stacks_idle.c,
 *     which says why they need seq_cst on both sides there.
 * Everything else here is a hint (tpe__hint_*): re-checked by an RMW or
 * read only to choose a slot or when to yield.
 *
 * Legend (doc/architecture.md) and the fields: stacks.h. A slot's park
 * (base/park.h) takes no lock where it has futexes; where it has none, a
 * wake-up under pool->lock takes the park's own lock after it.
 */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

#include "base/atomic.h"
#include "base/cpu.h"
#include "base/park.h"
#include "base/sync.h"
#include "engine/stacks.h"
#include "pool/future.h"
#include "pool/pool.h"
#include "pool/task.h"

/* White-box tests (stacks.h): NULL outside them. */
void (*tpe__stacks_steal_hook)(void);
void (*tpe__stacks_yield_hook)(void);
void (*tpe__stacks_batch_hook)(void);
/* Back-pressure (Design notes; the values are in stacks.h for the tests). */
#define BACKLOG_EVERY TPE__STACKS_BACKLOG_EVERY
#define BACKLOG_MAX TPE__STACKS_BACKLOG_MAX
/* A stack taken whole with more tasks than this runs newest first (Design
 * notes). */
#define LIFO_BATCH TPE__STACKS_LIFO_BATCH
/* How many slots after a sleeping one a push looks at for an awake one. */
#define PICK_TRIES 3
/* A batch of at most this many tasks is small: before its next detach the
 * worker lets its stack fill for up to BATCH_WAIT_NS (let_fill). */
#define BATCH_SMALL 4
#define BATCH_WAIT_NS 1000

/* ---- push ------------------------------------------------------------- */

/* The slot for this thread's next push: a thread-local round robin. */
static size_t
next_index(struct tpe__stacks *se)
{
	static TPE__TLS size_t rr;
	static TPE__TLS bool seeded;
	size_t i;

	if (!seeded) {
		/* Spread submitters: each thread starts somewhere else. */
		rr = (size_t)((uintptr_t)&rr >> 6);
		seeded = true;
	}
	/* Kept below n: a division only when it is not (another pool). */
	i = rr < se->n ? rr : rr % se->n;
	rr = i + 1;
	return i;
}

/*
 * Where this push goes: the round robin's slot, unless its worker sleeps
 * and one of the next PICK_TRIES slots has an awake worker: then that one,
 * so that a pool with more workers than its load needs leaves the others
 * asleep (watchers take what an awake worker falls behind on) instead of
 * waking one for every other task. Hints: the push's CAS decides, and
 * wakes the owner if it replaced a marker after all.
 */
static struct tpe__stacks_slot *
pick_slot(struct tpe__stacks *se, struct tpe__task **seen)
{
	size_t i = next_index(se), k;
	struct tpe__stacks_slot *s = &se->slots[i];

	*seen = tpe__hint_load(&s->head);
	if (*seen != TPE__STACKS_ASLEEP)
		return s;
	for (k = 1; k < se->n && k <= PICK_TRIES; k++) {
		struct tpe__stacks_slot *o = &se->slots[(i + k) % se->n];
		struct tpe__task *h = tpe__hint_load(&o->head);

		if (h != TPE__STACKS_ASLEEP && h != TPE__STACKS_LEFT) {
			*seen = h;
			return o;
		}
	}
	return s;
}

/*
 * Pushes t onto s: the old top (NULL, ASLEEP or a task), or LEFT when the
 * owner has left and t was not pushed. `seen` is the top pick_slot
 * loaded: the first CAS guesses it (the line is here already).
 */
static struct tpe__task *
push(struct tpe__stacks_slot *s, struct tpe__task *t, struct tpe__task *seen)
{
	/* seq_cst: release for the node's fields (pairs with the owner's
	 * take and the thief's), and the sleep protocol's order of the
	 * marker before the wake sequence (stacks_idle.c). */
	return tpe__task_stack_push_marked_from_mpsc(&s->head, t, t,
	    TPE__STACKS_LEFT, TPE__STACKS_ASLEEP, seen);
}

/*
 * How many tasks were pushed onto s since its stack was last taken whole:
 * hints, an estimate. Signed: a refused push's undo may leave pushed a
 * little below taken_upto.
 */
static inline int64_t
behind(const struct tpe__stacks_slot *s)
{
	return (int64_t)(tpe__hint_load(&s->pushed) -
	    tpe__hint_load(&s->taken_upto));
}

/* A whole stack was taken: what was pushed so far is not behind. */
static inline void
mark_taken(struct tpe__stacks_slot *s)
{
	tpe__hint_store(&s->taken_upto, tpe__hint_load(&s->pushed));
}

/*
 * Every BACKLOG_EVERY-th push of this thread: yields the CPU once when
 * more than BACKLOG_MAX tasks were pushed onto s since its last whole
 * take (Design notes).
 */
static void
yield_if_behind(struct tpe__stacks_slot *s)
{
	static TPE__TLS unsigned pushes;

	if ((++pushes & (BACKLOG_EVERY - 1)) != 0 || behind(s) <= BACKLOG_MAX)
		return;
	tpe__stacks_test_hook(&tpe__stacks_yield_hook);
	sched_yield();
}

static int
stacks_submit(struct tpe__engine *e, tpe_fn fn, void *arg,
    struct tpe_future *f)
{
	struct tpe__stacks *se = tpe__stacks_of(e);
	tpe_t *pool = se->pool;
	struct tpe__task *t, *old, *seen;
	struct tpe__stacks_slot *s;

	if (tpe__stacks_state_seq_cst(pool) != TPE__RUNNING)
		return ECANCELED;
	t = tpe__task_new(&pool->tasks, fn, arg, f, NULL);
	if (t == NULL)
		return ENOMEM;
	s = pick_slot(se, &seen);
	/* Counted before any worker can take it (the statistics), in the
	 * slot: no line shared by every submitter (Design notes). Relaxed:
	 * the push's CAS, a release, publishes it with the node. */
	tpe__counter_add(&s->pushed, 1);
	old = push(s, t, seen);
	if (old == TPE__STACKS_LEFT) {
		/* The owner left: the pool is shut down. */
		tpe__counter_sub(&s->pushed, 1);
		tpe__task_free(&pool->tasks, t);
		return ECANCELED;
	}
	if (old == TPE__STACKS_ASLEEP)
		tpe__park_wake_all(&s->park); /* the marker is gone: wake it */
	else
		tpe__stacks_ensure_watcher(se, s); /* t waits behind it */
	yield_if_behind(s);
	return 0;
}

/* ---- take and steal --------------------------------------------------- */

/* A detached stack (newest first) turned oldest first, or back. */
static struct tpe__task *
reverse(struct tpe__task *h)
{
	return tpe__task_stack_reverse(h);
}

/* A stack taken whole (newest first) in run order: oldest first, or as it
 * is when the take's estimate said large (Design notes). */
static struct tpe__task *
run_order(struct tpe__task *h, bool large)
{
	return large ? h : reverse(h);
}

/* The owner takes its whole stack, in run order; NULL when it is empty. */
static struct tpe__task *
take_own(struct tpe__stacks_slot *me)
{
	struct tpe__task *h = tpe__hint_load(&me->head);
	bool large;

	if (!tpe__stacks_is_task(h))
		return NULL;
	large = behind(me) > LIFO_BATCH;
	/* An exchange (an acquire): pairs with the push's CAS, for the
	 * nodes. No marker can be here: only this thread sets them, and it
	 * is awake. */
	h = tpe__task_stack_take_all(&me->head);
	TPE__ASSERT(h == NULL || tpe__stacks_is_task(h));
	mark_taken(me);
	return run_order(h, large);
}

/*
 * The rest of a batch that the slot's last owner left behind when it
 * blocked (managed blocking), in run order; NULL when none. A hint
 * first: NULL but after an adoption.
 */
static struct tpe__task *
take_left(struct tpe__stacks_slot *me)
{
	if (tpe__hint_load(&me->rest) == NULL)
		return NULL;
	/* An acquire: pairs with the store of rest (run_batch). */
	return tpe__exchange(&me->rest, NULL);
}

/*
 * stacks.h. Either comes back in run order: the rest as its owner
 * published it, the stack as run_order.
 */
struct tpe__task *
tpe__stacks_steal(struct tpe__stacks *se, struct tpe__stacks_slot *me)
{
	size_t k, i = (size_t)(me - se->slots);

	for (k = 1; k < se->n; k++) {
		struct tpe__stacks_slot *v = &se->slots[(i + k) % se->n];
		struct tpe__task *h;
		bool large;

		/* Only from an awake worker: a sleeper's stack wakes it. */
		if (tpe__dekker_load(&v->busy) == 0)
			continue;
		if (tpe__hint_load(&v->rest) != NULL) {
			tpe__stacks_set_busy(me);
			tpe__stacks_test_hook(&tpe__stacks_steal_hook);
			/* An acquire: pairs with the owner's store of rest
			 * (run_batch), for the links. */
			h = tpe__exchange(&v->rest, NULL);
			if (h != NULL)
				return h;
		}
		h = tpe__dekker_load(&v->head);
		if (!tpe__stacks_is_task(h))
			continue;
		tpe__stacks_set_busy(me);
		tpe__stacks_test_hook(&tpe__stacks_steal_hook);
		large = behind(v) > LIFO_BATCH;
		/* An acquire: pairs with the pushes' CAS. */
		if (tpe__cas(&v->head, &h, NULL)) {
			mark_taken(v);
			return run_order(h, large);
		}
	}
	return NULL;
}

/* ---- the worker ------------------------------------------------------- */

/* What the loop does next: go on, leave (wc given up below), return at
 * once because this is the child of a fork (touch nothing of the pool),
 * or look for a slot (it lost its own in a blocking section). */
enum step { GO_ON, LEAVE, FORKED_CHILD, SLOTLESS };

/* Shutdown-now: the tasks the worker holds go to the discard callback. */
static enum step
hand_back_all(struct tpe__stacks *se, struct tpe__stacks_slot *me,
    struct tpe__task *fifo)
{
	struct tpe__task *t;

	while ((t = fifo) != NULL) {
		fifo = t->next;
		tpe__owned_add(&me->dropped, 1);
		if (!tpe__task_discard(&se->pool->tasks, t))
			return FORKED_CHILD;
	}
	return GO_ON;
}

/* Runs a batch in run order (take_own, take_left, steal); its nodes end
 * in one chain. *small: it held at most BATCH_SMALL tasks. */
static enum step
run_batch(struct tpe__stacks *se, struct tpe__stacks_slot *me,
    struct tpe__task *todo, bool *small)
{
	tpe_t *pool = se->pool;
	struct tpe__task *t, *done = NULL;
	/* This thread's metrics block, or NULL (lib/metrics): the thread's,
	 * not the slot's, which may change hands (managed blocking). */
	struct tpe__metrics_worker *mw = tpe__metrics_tls_worker;
	int64_t start = 0, accepted = 0;
	size_t n = 0;
	/* Tasks wait behind the first: pushed, maybe, before this worker
	 * was awake, when no push could see it awake (stacks_idle.c,
	 * handshake 1). */
	bool check = todo->next != NULL;

	if (check)
		tpe__stacks_test_hook(&tpe__stacks_batch_hook);
	while ((t = todo) != NULL) {
		/* Between tasks: pause waits, shutdown-now hands back. */
		if (tpe__hint_load(&se->paused))
			tpe__stacks_wait_while_paused(se, me);
		if (tpe__stacks_state_seq_cst(pool) >= TPE__STOP) {
			if (done != NULL)
				tpe__task_end_chain(&pool->tasks, done, n);
			return hand_back_all(se, me, todo);
		}
		todo = t->next;
		/* The rest, published while t runs, so that a long t does
		 * not hold it back from idle workers (steal). A release:
		 * pairs with the thief's exchange. */
		if (todo != NULL && check) {
			/* The first rest of a batch: the store of handshake
			 * 1 before the check (pass_watch's partner). */
			tpe__dekker_store(&me->rest, todo);
			tpe__stacks_ensure_watcher(se, me);
			check = false;
		} else if (todo != NULL) {
			tpe__publish(&me->rest, todo);
		}
		tpe__owned_add(&me->started, 1);
		if (mw != NULL)
			start = tpe__metrics_task_start(mw,
			    accepted = tpe__task_accepted_tick(t));
		if (!tpe__task_run_keep(&pool->tasks, t))
			return FORKED_CHILD; /* touch nothing of the pool */
		if (mw != NULL)
			tpe__metrics_task_end(mw, accepted, start);
		tpe__blocking_task_done();
		/* t blocked and handed the slot over: it is not ours now. */
		if (tpe__stacks_lost_slot(se, me, t, done, n))
			return SLOTLESS;
		tpe__owned_add(&me->completed, 1);
		t->next = done;
		done = t;
		n++;
		/* Back, unless a thief took it (NULL); after a slot came
		 * back to this thread, whatever its last owner left. */
		if (tpe__stacks_took_back() || todo != NULL)
			todo = tpe__exchange(&me->rest, NULL);
	}
	if (done != NULL)
		tpe__task_end_chain(&pool->tasks, done, n);
	TPE__METRICS_WORKER_ADD(mw, batches, 1);
	*small = n <= BATCH_SMALL;
	return GO_ON;
}

/*
 * After a small batch, before the next detach: waits BATCH_WAIT_NS, so
 * that the submitters push a batch onto the stack instead of a task at a
 * time. A worker that detaches after every task or two pulls the stack's
 * line from the submitter on nearly every push: a second, slower operating
 * point of the same load (bench/README.md, "The per-worker pool's
 * batches"). Not after a wake-up: a lone task on an idle pool pays no
 * extra latency. (The wait cannot look at how many tasks the stack holds:
 * a node in it may be taken and reused meanwhile.)
 */
static void
let_fill(void)
{
	int64_t end = tpe__now_ns() + BATCH_WAIT_NS;
	int k;

	do {
		for (k = 0; k < 16; k++)
			tpe__cpu_relax();
	} while (tpe__now_ns() < end);
}

/*
 * The owner's stack is empty: leave (shut down), wait (paused), or spin,
 * steal and sleep (stacks_idle.c). *hp: a stolen stack to run, or NULL to
 * look again.
 */
static enum step
when_empty(struct tpe__stacks *se, struct tpe__stacks_slot *me,
    struct tpe__task **hp)
{
	/* gen before the state: a change after this read bumps gen later,
	 * which the spin and the sleep see (Design notes, gen). */
	unsigned gen = tpe__dekker_load(&se->gen);
	int state = tpe__stacks_state_seq_cst(se->pool);
	struct tpe__task *h;

	*hp = NULL;
	if (state >= TPE__STOP) {
		/* Closed for good; what was pushed since the drain of
		 * tpe_shutdown_now goes back. */
		h = tpe__exchange(&me->head, TPE__STACKS_LEFT);
		TPE__ASSERT(h != TPE__STACKS_LEFT && h != TPE__STACKS_ASLEEP);
		return hand_back_all(se, me, reverse(h)) == FORKED_CHILD ?
		    FORKED_CHILD : LEAVE;
	}
	if (state == TPE__SHUTDOWN) {
		h = NULL;
		/* Drained: close, so that no push lands after the owner left
		 * (a push that finds the marker is refused). */
		return tpe__cas(&me->head, &h, TPE__STACKS_LEFT) ? LEAVE :
		    GO_ON;
	}
	if (tpe__hint_load(&se->paused)) {
		/* Holding nothing: idle for tpe_wait_idle meanwhile. */
		tpe__stacks_set_asleep(se, me);
		tpe__stacks_wait_while_paused(se, me);
		tpe__stacks_set_awake(me);
		return GO_ON;
	}
	*hp = tpe__stacks_idle_wait(se, me, gen);
	return GO_ON;
}

/* A stack when_empty stole (spin, a watcher's look), in the metrics. */
static void
count_stolen(struct tpe__metrics_worker *mw, const struct tpe__task *h)
{
	uint64_t n = 0;

	for (; h != NULL; h = h->next)
		n++;
	tpe__metrics_add(&mw->steals, 1);
	tpe__metrics_add(&mw->stolen_tasks, n);
}

/*
 * A worker's whole life, without the pool lock: it is dropped on entry and
 * taken back before the worker gives up its place in wc, as get_task does
 * before it says exit (engine.h, worker_loop).
 */
static enum tpe__worker_end
stacks_worker_loop(struct tpe__engine *e, struct tpe__task *first)
{
	struct tpe__stacks *se = tpe__stacks_of(e);
	tpe_t *pool = se->pool;
	/* A relaxed RMW: a ticket, no data behind it. */
	size_t i = tpe__counter_add(&se->next_slot, 1) - 1;
	struct tpe__stacks_slot *me;
	struct tpe__task *h;
	bool small = false, woken = true;
	enum step st;

	TPE__ASSERT_HELD(&pool->lock);
	/* Started with no first task: the n of tpe_create, one per slot, and
	 * the spares of managed blocking, which adopt a handed-over slot. */
	TPE__ASSERT(first == NULL);
	(void)first;
	tpe__mutex_unlock(&pool->lock);
	if (i < se->n)
		me = tpe__stacks_tls_slot = &se->slots[i];
	else if ((me = tpe__stacks_adopt(se, true)) == NULL)
		return TPE__WORKER_EXIT; /* no slot came: wc given up, L held */
	tpe__stacks_set_awake(me);
	for (;;) {
		/* A small batch that did not follow a wake-up: let the stack
		 * fill before the next detach (let_fill). */
		if (small && !woken)
			let_fill();
		h = take_left(me);
		if (h == NULL)
			h = take_own(me);
		woken = false;
		if (h != NULL) {
			st = GO_ON;
		} else {
			st = when_empty(se, me, &h);
			woken = true;
			if (h != NULL && tpe__metrics_tls_worker != NULL)
				count_stolen(tpe__metrics_tls_worker, h);
		}
		if (st == GO_ON && h != NULL)
			st = run_batch(se, me, h, &small);
		if (st == SLOTLESS) {
			/* A spare now: another handed-over slot, or leave. */
			if ((me = tpe__stacks_adopt(se, false)) == NULL)
				return TPE__WORKER_EXIT;
			tpe__stacks_set_awake(me);
			small = false;
			woken = true;
			continue;
		}
		if (st != GO_ON)
			break;
	}
	if (st == FORKED_CHILD)
		return TPE__WORKER_FORKED_CHILD;
	tpe__stacks_set_asleep(se, me);
	tpe__mutex_lock(&pool->lock);
	TPE__ASSERT(pool->wc > 0 && pool->state >= TPE__SHUTDOWN);
	tpe__pool_set_wc_locked(pool, pool->wc - 1);
	return TPE__WORKER_EXIT;
}

/* ---- the rest of the interface ---------------------------------------- */

static int
stacks_attach(struct tpe__engine *e, tpe_t *pool)
{
	struct tpe__stacks *se = tpe__stacks_of(e);

	se->pool = pool;
	/* Before any worker or submitter touches it (node_cache.c): room for
	 * the nodes in flight, so that the steady state neither mallocs nor
	 * frees; at most TPE__NODE_RETURNS_MANY nodes' worth of chunks stay
	 * cached. */
	pool->returns.max = TPE__NODE_RETURNS_MANY;
	return pool->attr.core == se->n && pool->attr.max == se->n ? 0 :
	    EINVAL;
}

/* Never saturates: the blocking submit is the plain one. */
static int
stacks_submit_wait(struct tpe__engine *e, tpe_fn fn, void *arg,
    struct tpe_future *f, int64_t timeout_ns)
{
	(void)timeout_ns;
	return stacks_submit(e, fn, arg, f);
}

/* No reserved threads (TPE__CAP_NO_RESERVE): a worker never idles where
 * tpe_try_execute could hand it a task, so every try misses. */
static int
stacks_try_submit(struct tpe__engine *e, tpe_fn fn, void *arg)
{
	(void)fn;
	(void)arg;
	tpe__metrics_count(tpe__stacks_of(e)->pool->metrics,
	    TPE__M_RESERVE_MISS);
	return EAGAIN;
}

/* How many tasks were pushed, summed over the slots: read after the
 * counters of what was taken (Design notes, statistics). */
static uint64_t
pushed_sum(const struct tpe__stacks *se)
{
	uint64_t pushed = 0;
	size_t i;

	for (i = 0; i < se->n; i++)
		pushed += tpe__counter_read(&se->slots[i].pushed);
	return pushed;
}

/* How many tasks wait: pushed minus taken (Design notes). L held. */
static size_t
queued_locked(struct tpe__stacks *se, uint64_t *pushed)
{
	uint64_t taken = se->removed;
	size_t i;

	TPE__ASSERT_HELD(&se->pool->lock);
	for (i = 0; i < se->n; i++) {
		const struct tpe__stacks_slot *s = &se->slots[i];

		/* Pair with the owners' tpe__owned_add. */
		taken += tpe__observe(&s->started) + tpe__observe(&s->dropped);
	}
	*pushed = pushed_sum(se);
	return *pushed > taken ? (size_t)(*pushed - taken) : 0;
}

/* The workers count themselves (no lock per task); an idle one is any
 * other worker of wc. L held. */
static void
stacks_counts_locked(struct tpe__engine *e, struct tpe__engine_counts *c)
{
	struct tpe__stacks *se = tpe__stacks_of(e);
	size_t i, wc = se->pool->wc;
	uint64_t orphan_done;

	TPE__ASSERT_HELD(&se->pool->lock);
	/* Tasks finished by threads that lost their slot in them: read
	 * first (pairs with the RMW of stacks_blocking.c), so the started
	 * counters read next include each of them. */
	orphan_done = tpe__observe(&se->orphan_done);
	c->completed = orphan_done;
	c->active = 0;
	for (i = 0; i < se->n; i++) {
		const struct tpe__stacks_slot *s = &se->slots[i];
		/* Completed before started: never more done than begun.
		 * Pair with the owners' tpe__owned_add. */
		uint64_t done = tpe__observe(&s->completed);
		uint64_t begun = tpe__observe(&s->started);

		c->active += (size_t)(begun - done);
		c->completed += done;
	}
	c->active -= c->active < orphan_done ? c->active : (size_t)orphan_done;
	c->idle = c->active > wc ? 0 : wc - c->active;
	c->queued = queued_locked(se, &c->submitted);
}

/*
 * The drains of shutdown-now and fork (TPE__CAP_DRAIN_ONLY: every task;
 * tpe_remove and tpe_purge say ENOTSUP before they get here). Each stack
 * is detached with a CAS that leaves the owner's markers in place. L held.
 */
static size_t
stacks_drain_locked(struct tpe__engine *e, tpe__task_match_fn match,
    void *ctx, size_t max, struct tpe__task_list *out)
{
	struct tpe__stacks *se = tpe__stacks_of(e);
	size_t i, n = 0;

	TPE__ASSERT_HELD(&se->pool->lock);
	TPE__ASSERT(match == NULL);
	(void)match;
	(void)ctx;
	for (i = 0; i < se->n && n < max; i++) {
		struct tpe__stacks_slot *s = &se->slots[i];
		/* Pairs with the pushes; leaves the owner's markers. */
		struct tpe__task *h = tpe__task_stack_take_all_unmarked(
		    &s->head, TPE__STACKS_LEFT);
		struct tpe__task *t;

		if (h == NULL)
			continue;
		for (h = reverse(h); (t = h) != NULL; n++) {
			h = t->next;
			tpe__task_list_push(out, t);
		}
	}
	se->removed += n;
	return n;
}

/* In the child of fork(): the workers are gone; a busy flag left set by
 * one would make tpe_wait_idle wait forever there. */
static void
stacks_forget_locked(struct tpe__engine *e)
{
	struct tpe__stacks *se = tpe__stacks_of(e);
	size_t i;

	for (i = 0; i < se->n; i++) {
		tpe__hint_store(&se->slots[i].busy, 0);
		se->slots[i].handed = false;
	}
	se->spares = se->nfree = 0;
	tpe__hint_store(&se->orphans, 0);
	tpe__cond_init(&se->spare_cond);
}

static void
stacks_destroy(struct tpe__engine *e)
{
	struct tpe__stacks *se = tpe__stacks_of(e);
	size_t i;

	for (i = 0; i < se->n; i++)
		tpe__park_destroy(&se->slots[i].park);
	tpe__cond_destroy(&se->spare_cond);
	free(se->slots);
	free(se);
}

static const struct tpe__engine_ops stacks_ops = {
	.name = "stacks",
	.attach = stacks_attach,
	.submit = stacks_submit,
	.submit_wait = stacks_submit_wait,
	.try_submit = stacks_try_submit,
	.worker_loop = stacks_worker_loop,
	.wake_all_locked = tpe__stacks_wake_all_locked,
	.idle_locked = tpe__stacks_idle_locked,
	.counts_locked = stacks_counts_locked,
	.drain_locked = stacks_drain_locked,
	.forget_locked = stacks_forget_locked,
	.destroy = stacks_destroy,
	.blocking = tpe__stacks_blocking,
};

int
tpe__engine_stacks_create(size_t workers, struct tpe__engine **e)
{
	struct tpe__stacks *se;

	if (workers == 0)
		return EINVAL;
	if (posix_memalign((void **)&se, TPE__CACHE_LINE, sizeof(*se)) != 0)
		return ENOMEM;
	memset(se, 0, sizeof(*se));
	if (posix_memalign((void **)&se->slots, TPE__CACHE_LINE,
	    workers * sizeof(*se->slots)) != 0) {
		free(se);
		return ENOMEM;
	}
	memset(se->slots, 0, workers * sizeof(*se->slots));
	se->n = workers;
	for (size_t i = 0; i < workers; i++)
		tpe__park_init(&se->slots[i].park);
	tpe__cond_init(&se->spare_cond);
	se->base.ops = &stacks_ops;
	*e = &se->base;
	return 0;
}
