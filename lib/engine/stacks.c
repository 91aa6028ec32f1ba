/* SPDX-License-Identifier: MIT */
/*
 * stacks.c - the stacks engine (engine.h), TPE_QUEUE_PER_WORKER: a
 * lock-free stack per worker for many tiny tasks.
 *
 * Design notes
 * ------------
 * Where it sits: an engine (engine.h), called by the pool through its ops
 * only; it runs tasks through the task module (pool/task.h), reads and
 * writes the pool's wc and idle waiters (pool.h), and is built on
 * lib/base's stack, park and backoff. It keeps its own storage: no queue
 * kind, no policy, no reserved threads (its row in kinds.c).
 *
 * The pool is fixed: core == max == n workers, all started by tpe_create
 * (pool.c, attach_engine), none leaving before shutdown. Worker i owns
 * slots[i]; a worker learns i from next_slot when its loop starts. Since
 * every slot has its owner from the first submission on, no task can wait
 * in a slot whose thread is missing. (Managed blocking, below, adds spare
 * threads beyond n and moves a slot from a blocked thread to a spare; a
 * slot then still has a thread that will own it.)
 *
 * Submit (pw_submit, no lock, any thread): the node comes from the
 * thread's node cache (node_cache.c: carved in address order from the
 * thread's chunk, so that a worker's walk of a batch is prefetched; no
 * malloc in the steady state: this kind lets the pool's return stack hold
 * TPE__NODE_RETURNS_MANY nodes' worth of chunks, so that workers do not
 * free what submitters allocated); the task is counted
 * in its slot's `pushed` (a relaxed add on the line the push takes anyway:
 * no counter line shared by every submitter), then pushed with one CAS
 * onto the slot's stack. The slot is the next of a thread-local round robin (no
 * shared line, seeded per thread), unless that slot's worker sleeps and
 * one of the next PICK_TRIES slots has an awake worker: then that one
 * (pick_slot). So a pool with more workers than its load needs runs on the
 * awake ones and does not pay a wake-up for every other task; a push lands
 * on a sleeping worker's stack only to wake it. pick_slot has loaded the
 * top to look for the SLEEP marker, so the push's first CAS guesses that
 * top: the line is here already, and a guess of "empty" would fail
 * whenever the worker is behind.
 *
 * Large batches run newest first: a stack taken whole (by its owner or a
 * thief) that holds more than LIFO_BATCH tasks by the estimate of the
 * slot's counters (`pushed` - `taken_upto` just before the take) is run
 * as it comes, without the reversal. Reversing walks every node once more
 * before the run walks it again, and the old nodes of a large stack are
 * cold: with a submitter far ahead (hundreds of thousands of tasks), that
 * walk was most of the worker's time (70% of its perf samples, on the
 * load of `next`), so the worker fell further behind and the run settled
 * at 2 to 4 times the time per task (the bench's bimodal tiny figures).
 * Newest first also runs the nodes still in cache first. The usual small
 * batches still run oldest first; the kind promises no order (Order).
 *
 * Back-pressure without waiting: every BACKLOG_EVERY-th push of a thread
 * looks at how many tasks its slot received since its stack was last
 * taken whole (`pushed` - `taken_upto`, relaxed hints) and, above
 * BACKLOG_MAX, yields the CPU once (sched_yield). A submitter that runs
 * ahead of the workers (one submitter, two workers, two cores: it only
 * pushes, they also run and recycle) otherwise builds a backlog of
 * millions of nodes; the workers then walk cold nodes (each a cache miss,
 * twice: reversal, then the run) and fall further behind, and the run
 * settles at 2 to 4 times the time per task of one without a backlog (the
 * bench's bimodal tiny figures: a backlog of 1 to 3 million tasks in the
 * slow runs, of thousands in the fast ones). The yield lets a worker
 * that shares the submitter's CPU catch up; the submitter never waits
 * and nothing is refused. `taken_upto` is stored by whoever takes the
 * whole stack (its owner, a thief), so steals leave no drift behind.
 *
 * The stack word `head` holds NULL (empty), a task (the newest), or one of
 * two markers that only its owner sets (a waker may clear SLEEP):
 *   SLEEP   the owner is asleep, or about to be: a push that replaces it
 *           wakes the owner (the protocol below);
 *   CLOSED  the owner has left (shutdown): a push that finds it fails, and
 *           the task is refused with ECANCELED. So a push that succeeds
 *           always lands where its owner will look again: shutdown drains
 *           every stack and no task is stranded behind a worker that left.
 *
 * Take (owner): one exchange detaches the whole stack; the worker reverses
 * it (oldest first; not a large one, below) and runs the batch. While a
 * task of the batch runs, the rest of the batch is published in `rest` (a
 * release store) and taken back after it with one exchange, unless a thief
 * took it. Between tasks the worker checks the pool: pause waits,
 * shutdown-now hands the rest back through the discard callback. Nodes
 * leave a stack or `rest` only all at once (an exchange, or a CAS of the
 * whole top to NULL), never singly, so there is no ABA problem: a CAS
 * that finds the same top takes whatever stack is there, and no link
 * under a top is written while it is in a stack.
 *
 * Awake, spinning, sleeping. A worker is awake (`busy`, seq_cst) from its
 * start or wake-up until it goes to sleep, running or idle. An idle worker
 * spins (SPIN_NS, looking at its stack and at others to steal) only when
 * no other worker is awake and none spins (`spinner`); otherwise it goes
 * to sleep at once: spinners take the CPU the submitters need, and one
 * awake worker finds what there is. A sleeper sleeps without a timeout
 * (`deep`) when no other worker is awake, else as a watcher (`watchers`)
 * that wakes every WATCH_NS to steal. A push that lands behind an awake
 * worker (it did not replace a SLEEP marker) while sleepers sleep but none
 * watches wakes one to watch. Dekker pair, seq_cst both sides: the pusher
 * pushes, then loads `deep` and `watchers`; a sleeper counts itself in
 * `deep`, then looks at the busy flags and watches instead if a worker is
 * awake. A worker sets busy before it takes its SLEEP marker back, so a
 * push that lands after that finds it awake; and a worker that takes a
 * batch of more than one task makes the same check after its busy store
 * (the pushes behind the first may have landed while it was not yet
 * awake, and a sleeper may have gone deep then). Either the pusher (or
 * the worker) wakes a watcher or the sleeper watches. The worker's check
 * comes after it has published the rest of its batch (run_batch), so that
 * a watcher that leaves meanwhile sees that rest (below). A watcher that
 * stops watching (woken by a push or a waker, or leaving with a stolen
 * stack) and was the last one, while sleepers sleep deep, looks for tasks
 * waiting behind an awake worker and, if it finds any, wakes a sleeper to
 * watch (pass_watch): the pushes behind that worker found it watching and
 * woke nobody. Dekker pair again, seq_cst both sides: the watcher
 * decrements `watchers`, then loads the heads and rests; the pusher (or
 * the worker) pushes (or publishes its rest), then loads `watchers`. So a
 * task pushed behind a worker stuck in a long task (or into the batch it
 * holds back) never waits for that task with idle workers asleep; and a
 * lone task to an idle pool wakes one worker only.
 *
 * Steal rule: an idle worker (spinning, or a watcher's look every
 * WATCH_NS) takes from another awake worker first the rest of the batch
 * behind its running task, else its whole stack, and runs it oldest
 * first (a large stack newest first). So a worker stuck in a long task
 * strands nothing: what it holds back and what is pushed onto its stack
 * are taken within WATCH_NS by a watcher, at once by a spinner. A thief
 * marks itself awake before it takes (the tpe_wait_idle paragraph below);
 * a watcher whose steal finds the tasks gone (the owner took them first)
 * marks itself asleep again before it sleeps on.
 *
 * Order: tasks that one thread submits to one slot are pushed in order and
 * each detach of at most LIFO_BATCH tasks runs them oldest first, but the
 * slot a task goes to depends on who sleeps, and a thief runs part of a
 * worker's tasks while the owner runs others. So the kind promises no
 * order (tpe_attr_set_queue(3)).
 *
 * Sleep protocol (a marker in the stack word and a wake sequence; one RMW
 * per push, and a system call only when the owner really sleeps):
 *   owner:   CAS head NULL -> SLEEP (fails: a task came, take it)
 *            loop: seq = park_prepare; if head != SLEEP or gen moved: stop;
 *                  park_wait(seq)
 *            then CAS head SLEEP -> NULL if the marker is still there
 *   pusher:  CAS head old -> node (old SLEEP: the node's next is NULL);
 *            if old was SLEEP: park_wake_all (the sequence moves)
 * The pusher replaces SLEEP before it moves the sequence, and the owner reads
 * the sequence before it looks at head: if the owner still sees SLEEP, its seq
 * is older than the pusher's wake, so park_wait returns at once or is
 * woken. The pool's changes (shutdown, pause, resume) bump `gen` after
 * their change and then wake every slot (pw_wake_all), and the owner
 * reads gen after its marker and before it sleeps: the same argument. A
 * waker that wants a sleeper (wake_one) takes its marker away with a CAS
 * and wakes its park: the same again (base/park.h). Removing the re-check (the head
 * and gen tests inside the loop) loses wake-ups: test_per_worker's
 * no_lost_wakeup fails without it.
 *
 * tpe_wait_idle: the pool is idle when every stack is empty and no worker
 * is awake. A worker clears busy (seq_cst) before it sleeps (or waits out a
 * pause holding nothing), then loads pool->idle_waiters and, when a waiter
 * exists, takes the pool lock to wake it (tpe__pool_notify_idle_locked).
 * The waiter counts itself in idle_waiters (seq_cst) before it looks at
 * the heads and then the busy flags (pool.h): either it sees the worker
 * awake, or the worker sees it. A thief sets busy before its exchange or
 * CAS (a release), so a waiter that reads the emptied word sees it busy.
 * tpe_wait_idle so returns once the last worker has ended its spin.
 *
 * Statistics without a lock per task: each slot counts, written by its
 * owner only (release stores, read with acquire loads), the tasks it
 * started and completed and the tasks it handed back at shutdown-now;
 * remove_if (the drains) counts what it took, under the pool lock.
 * queued = pushed - started - handed back - removed; active = started
 * - completed; submitted = the sum of pushed. The taken counters are read
 * (acquire) before the pushed ones: a task's push count happens before
 * its push, its take and its started store, so a snapshot never shows
 * more taken than submitted.
 *
 * Managed blocking (the section at the end of this file): a worker that
 * begins a blocking section hands its slot over at once, as Go hands a
 * blocked thread's processor to another: the slot, its stack and the rest
 * of its batch go to a spare thread (woken, or started up to max plus the
 * spares), which runs them as the slot's owner; the blocked thread ends
 * its task without a slot and then becomes a spare itself (it takes back
 * its slot at tpe_blocking_end if nobody took it meanwhile).
 *
 * Legend and lock order: base/sync.h (O: the slot's owner). A slot's park
 * (base/park.h) takes no lock where it has futexes; where it has none, a
 * wake-up under pool->lock takes the park's own lock after it.
 */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"

#include "base/atomic.h"
#include "base/cpu.h"
#include "base/park.h"
#include "base/sync.h"
#include "engine/stacks.h"
#include "pool/pool.h"
#include "pool/future.h"
#include "pool/task.h"

/* The markers of the stack word; never valid node addresses. */
#define SLEEP ((struct tpe__task *)(uintptr_t)1)
#define CLOSED ((struct tpe__task *)(uintptr_t)2)

/* How long an idle worker spins before it sleeps: a wake-up costs more
 * (several microseconds on a virtual machine). A variable, read when a
 * spin starts, so that white-box tests can make workers sleep at once. */
int64_t tpe__per_worker_spin_ns = 50000;
/* White-box tests (stacks.h): NULL outside them. */
void (*tpe__per_worker_steal_hook)(void);
void (*tpe__per_worker_sleep_hook)(void);
void (*tpe__per_worker_yield_hook)(void);
void (*tpe__per_worker_watch_hook)(void);
void (*tpe__per_worker_batch_hook)(void);
/* Back-pressure (Design notes; the values are in stacks.h for the tests). */
#define BACKLOG_EVERY TPE__PW_BACKLOG_EVERY
#define BACKLOG_MAX TPE__PW_BACKLOG_MAX
/* A stack taken whole with more tasks than this runs newest first (Design
 * notes); 1024 and 16384 did as well or a little worse in the A/B. */
#define LIFO_BATCH TPE__PW_LIFO_BATCH
/* How many slots after a sleeping one a push looks at for an awake one. */
#define PICK_TRIES 3
/* How often a watcher looks for tasks an awake worker holds back (ns). */
#define WATCH_NS 1000000
/* A batch of at most this many tasks is small: before its next detach the
 * worker lets its stack fill for up to BATCH_WAIT_NS (run_batches). */
#define BATCH_SMALL 4
#define BATCH_WAIT_NS 1000

struct slot {
	/* Pushed by submitters, taken by the owner: its own cache line. */
	struct tpe__task *head;   /* A: the stack, NULL, SLEEP or CLOSED;
				   * pushes, the owner's exchange, thieves'
				   * CAS, the drains' CAS (under L) */
	struct tpe__park park;    /* bumped by whoever wakes the owner */
	int busy;                 /* A: the owner is awake (O; a thief also
				   * sets its own before it steals) */
	uint64_t pushed;          /* A: tasks pushed here, counted by the
				   * submitter before its push (a relaxed
				   * add on the line the push takes anyway;
				   * undone when the push is refused) */
	bool handed;              /* L: its owner blocked and handed it
				   * over; no thread owns it yet */
	/* Counters, written on every task by the owner alone: a line of
	 * their own, so that they do not pull the stack's line back. */
	uint64_t started __attribute__((aligned(TPE__CACHE_LINE))); /* A, O */
	struct tpe__task *rest;   /* A: the owner's batch behind its running
				   * task, in run order; taken by the owner
				   * after the task, or by a thief */
	uint64_t completed;       /* A, O: tasks it finished */
	uint64_t dropped;         /* A, O: handed back at shutdown-now */
	uint64_t taken_upto;      /* A: `pushed` when the stack was last
				   * taken whole (the owner, a thief);
				   * relaxed, a hint for yield_if_behind */
} __attribute__((aligned(TPE__CACHE_LINE)));

struct pw_queue {
	struct tpe__engine base;  /* I */
	tpe_t *pool;              /* I: set by attach */
	size_t n;                 /* I: slots, = workers */
	struct slot *slots;       /* I: n of them */
	uint64_t removed;         /* L: taken out by remove_if */
	/* Written by workers going to sleep and by the pool's changes,
	 * read by pushes and spinners: a line of their own. */
	/* A: the next starting worker's slot */
	size_t next_slot __attribute__((aligned(TPE__CACHE_LINE)));
	unsigned gen;             /* A: bumped after each change of the pool */
	int paused;               /* A: pool->paused, copied under L */
	size_t deep;              /* A: workers asleep with no timeout */
	size_t watchers;          /* A: workers asleep with a timeout */
	/* Written at each start and end of a spin: away from the above,
	 * which every push reads. */
	int spinner __attribute__((aligned(TPE__CACHE_LINE))); /* A: 1 while
							 * a worker spins */
	/* Managed blocking (the section at the end of this file). */
	pthread_cond_t spare_cond; /* spare threads wait here, with L */
	size_t spares;            /* L: threads without a slot looking for
				   * one, or started to */
	size_t nfree;             /* L: slots handed over, not yet owned */
	size_t orphans;           /* A: threads without a slot still in the
				   * task they blocked in; seq_cst, the
				   * tpe_wait_idle pair of set_asleep */
	uint64_t orphan_done;     /* A: tasks those finished (statistics) */
};

/* Managed blocking, at the end of this file. */
static TPE__TLS struct slot *tls_slot; /* the slot this thread owns */
static struct slot *adopt(struct pw_queue *pq, bool counted);
static bool lost_slot(struct pw_queue *pq, struct slot *me,
    struct tpe__task *t, struct tpe__task *done, size_t n);
static bool took_back(void);

/*
 * The stacks engine whose base is q. Every tpe__engine this file's ops
 * receive was made by tpe__engine_stacks_create as a pw_queue (base
 * first, the whole aligned to a cache line), so the cast restores the type
 * it was made with; it goes through void * because the compiler cannot
 * know that the stricter alignment holds (clang's -Wcast-align).
 */
static inline struct pw_queue *
pw_of(struct tpe__engine *q)
{
	return (struct pw_queue *)(void *)q;
}

static inline const struct pw_queue *
pw_of_const(const struct tpe__engine *q)
{
	return (const struct pw_queue *)(const void *)q;
}

static inline bool
is_task(const struct tpe__task *h)
{
	return (uintptr_t)h > (uintptr_t)CLOSED;
}

static int
load_state(const tpe_t *pool)
{
	/* Pairs with set_state_locked (pool.c), then pw_wake_all. */
	return __atomic_load_n(&pool->state, __ATOMIC_SEQ_CST);
}

/* An owner-only counter: one writer, so a load and a store, no RMW.
 * Release pairs with the acquire loads of the statistics (counts). */
static inline void
count(uint64_t *c)
{
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + 1,
	    __ATOMIC_RELEASE);
}

/*
 * Sleeps until a push or a waker replaced the owner's SLEEP marker (when
 * `marked`) or the pool changed (gen moved): true; or until deadline_ns
 * (absolute monotonic, negative: none): false. The re-check inside the
 * loop, after park_prepare, is what makes the protocol lose no
 * wake-up (Design notes).
 */
static bool
wait_for_change(struct pw_queue *pq, struct slot *me, unsigned gen,
    bool marked, int64_t deadline_ns)
{
	for (;;) {
		unsigned seq = tpe__park_prepare(&me->park);

		/* seq_cst loads, after park_prepare: pair with the
		 * pusher's CAS and the pool's bump of gen, each made before
		 * the waker's park_wake_all. */
		if (marked && __atomic_load_n(&me->head, __ATOMIC_SEQ_CST) !=
		    SLEEP)
			return true;
		if (__atomic_load_n(&pq->gen, __ATOMIC_SEQ_CST) != gen)
			return true;
		if (deadline_ns >= 0 && tpe__now_ns() >= deadline_ns)
			return false;
		(void)tpe__park_wait(&me->park, seq, deadline_ns);
	}
}

/* ---- awake flag, tpe_wait_idle, watchers ----------------------------- */

/* Wakes one sleeping worker other than `me` (NULL: any), taking its
 * marker away so that a push onto its stack does not wake it again. */
static void
wake_one(struct pw_queue *pq, const struct slot *me)
{
	size_t i;

	for (i = 0; i < pq->n; i++) {
		struct slot *s = &pq->slots[i];
		struct tpe__task *expect = SLEEP;

		if (s != me &&
		    __atomic_load_n(&s->head, __ATOMIC_RELAXED) == SLEEP &&
		    __atomic_compare_exchange_n(&s->head, &expect, NULL,
		    false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
			tpe__park_wake_all(&s->park);
			return;
		}
	}
}

/*
 * Tasks wait behind awake worker `s`: when sleepers sleep but none
 * watches, wakes one to watch (Design notes). seq_cst loads, after the
 * caller's push or its busy store: the Dekker pair of a sleeper's count
 * in `deep` and its look at the busy flags.
 */
static void
ensure_watcher(struct pw_queue *pq, const struct slot *s)
{
	if (pq->n > 1 && __atomic_load_n(&pq->deep, __ATOMIC_SEQ_CST) > 0 &&
	    __atomic_load_n(&pq->watchers, __ATOMIC_SEQ_CST) == 0)
		wake_one(pq, s);
}

/*
 * Watcher `me` stops watching (woken, or with a stolen stack): tasks
 * waiting behind an awake worker other than `me` (on its stack or in the
 * rest of its batch) may have been pushed while it watched, so no push
 * woke anyone for them; ensure_watcher then wakes a deep sleeper to watch
 * in its place if `me` was the last watcher (Design notes). seq_cst loads,
 * after the caller's decrement of `watchers`: the Dekker pair of a push's
 * (or a batch's) ensure_watcher.
 */
static void
pass_watch(struct pw_queue *pq, const struct slot *me)
{
	size_t i;

	for (i = 0; i < pq->n; i++) {
		const struct slot *s = &pq->slots[i];

		if (s != me &&
		    __atomic_load_n(&s->busy, __ATOMIC_SEQ_CST) &&
		    (is_task(__atomic_load_n(&s->head, __ATOMIC_SEQ_CST)) ||
		    __atomic_load_n(&s->rest, __ATOMIC_SEQ_CST) != NULL)) {
			ensure_watcher(pq, me);
			return;
		}
	}
}

/*
 * The worker is awake (after its start, a sleep or a pause): seq_cst, and
 * before it takes its SLEEP marker back, so that a push that lands after
 * that sees it awake (the watcher pair, Design notes).
 */
static void
set_awake(struct slot *me)
{
	__atomic_store_n(&me->busy, 1, __ATOMIC_SEQ_CST);
}

/* Before a thief's CAS, which is a release: a waiter that reads the head
 * it wrote sees the thief awake (Design notes). */
static void
set_busy(struct slot *me)
{
	if (__atomic_load_n(&me->busy, __ATOMIC_RELAXED) == 0)
		__atomic_store_n(&me->busy, 1, __ATOMIC_RELAXED);
}

/* The worker holds no task and goes to sleep (or waits out a pause). */
static void
set_asleep(struct pw_queue *pq, struct slot *me)
{
	tpe_t *pool = pq->pool;

	if (__atomic_load_n(&me->busy, __ATOMIC_RELAXED) == 0)
		return;
	/* Dekker with tpe_wait_idle: store busy, then load idle_waiters
	 * (seq_cst both, tpe__pool_idle_waited). */
	__atomic_store_n(&me->busy, 0, __ATOMIC_SEQ_CST);
	if (tpe__pool_idle_waited(pool)) {
		tpe__mutex_lock(&pool->lock);
		tpe__pool_notify_idle_locked(pool);
		tpe__mutex_unlock(&pool->lock);
	}
}

/* Whether a worker other than `me` is awake; seq_cst loads (the Dekker
 * pair of set_awake). */
static bool
other_awake(const struct pw_queue *pq, const struct slot *me)
{
	size_t i;

	for (i = 0; i < pq->n; i++)
		if (&pq->slots[i] != me &&
		    __atomic_load_n(&pq->slots[i].busy, __ATOMIC_SEQ_CST))
			return true;
	return false;
}

/* ---- push, take, steal ------------------------------------------------ */

/* Calls a white-box test's hook when one is set (stacks.h). */
static inline void
test_hook(void (**where)(void))
{
	void (*hook)(void) = __atomic_load_n(where, __ATOMIC_RELAXED);

	if (hook != NULL)
		hook();
}

/* The slot for this thread's next push: a thread-local round robin. */
static size_t
next_index(struct pw_queue *pq)
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
	i = rr < pq->n ? rr : rr % pq->n;
	rr = i + 1;
	return i;
}

/*
 * Where this push goes: the round robin's slot, unless its worker sleeps
 * and one of the next PICK_TRIES slots has an awake worker: then that one,
 * so that a pool with more workers than its load needs leaves the others
 * asleep (watchers take what an awake worker falls behind on) instead of
 * waking one for every other task. Relaxed loads: a hint; the push's CAS
 * decides, and wakes the owner if it replaced a marker after all.
 */
static struct slot *
pick_slot(struct pw_queue *pq, struct tpe__task **seen)
{
	size_t i = next_index(pq), k;
	struct slot *s = &pq->slots[i];

	*seen = tpe__hint_load(&s->head);
	if (*seen != SLEEP)
		return s;
	for (k = 1; k < pq->n && k <= PICK_TRIES; k++) {
		struct slot *o = &pq->slots[(i + k) % pq->n];
		struct tpe__task *h = tpe__hint_load(&o->head);

		if (h != SLEEP && h != CLOSED) {
			*seen = h;
			return o;
		}
	}
	return s;
}

/*
 * Pushes t onto s: the old top (NULL, SLEEP or a task), or CLOSED when
 * the owner has left and t was not pushed. `seen` is the top pick_slot
 * loaded: the first CAS guesses it (the line is here already).
 */
static struct tpe__task *
push(struct slot *s, struct tpe__task *t, struct tpe__task *seen)
{
	/* seq_cst: release for the node's fields (pairs with the owner's
	 * take and the thief's), and the sleep protocol's order of the
	 * marker before the wake sequence. */
	return tpe__task_stack_push_marked_from_mpsc(&s->head, t, t, CLOSED,
	    SLEEP, seen);
}

/*
 * How many tasks were pushed onto s since its stack was last taken whole:
 * relaxed hints, an estimate. Signed: a refused push's undo may leave
 * pushed a little below taken_upto.
 */
static inline int64_t
behind(const struct slot *s)
{
	return (int64_t)(tpe__hint_load(&s->pushed) -
	    tpe__hint_load(&s->taken_upto));
}

/* A whole stack was taken: what was pushed so far is not behind. */
static inline void
mark_taken(struct slot *s)
{
	tpe__hint_store(&s->taken_upto, tpe__hint_load(&s->pushed));
}

/*
 * Every BACKLOG_EVERY-th push of this thread: yields the CPU once when
 * more than BACKLOG_MAX tasks were pushed onto s since its last whole
 * take (Design notes).
 */
static void
yield_if_behind(struct slot *s)
{
	static TPE__TLS unsigned pushes;

	if ((++pushes & (BACKLOG_EVERY - 1)) != 0 || behind(s) <= BACKLOG_MAX)
		return;
	test_hook(&tpe__per_worker_yield_hook);
	sched_yield();
}

static int
pw_submit(struct tpe__engine *q, tpe_fn fn, void *arg, struct tpe_future *f)
{
	struct pw_queue *pq = pw_of(q);
	tpe_t *pool = pq->pool;
	struct tpe__task *t, *old, *seen;
	struct slot *s;

	if (load_state(pool) != TPE__RUNNING)
		return ECANCELED;
	t = tpe__task_new(&pool->tasks, fn, arg, f, NULL);
	if (t == NULL)
		return ENOMEM;
	s = pick_slot(pq, &seen);
	/* Counted before any worker can take it (the statistics), in the
	 * slot: no line shared by every submitter (Design notes). Relaxed:
	 * the push's CAS, a release, publishes it with the node. */
	tpe__counter_add(&s->pushed, 1);
	old = push(s, t, seen);
	if (old == CLOSED) {
		/* The owner left: the pool is shut down. */
		tpe__counter_sub(&s->pushed, 1);
		tpe__task_free(&pool->tasks, t);
		return ECANCELED;
	}
	if (old == SLEEP)
		tpe__park_wake_all(&s->park); /* the marker is gone: wake its owner */
	else
		ensure_watcher(pq, s); /* t waits behind an awake worker */
	yield_if_behind(s);
	return 0;
}

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
take_own(struct slot *me)
{
	struct tpe__task *h = __atomic_load_n(&me->head, __ATOMIC_RELAXED);
	bool large;

	if (!is_task(h))
		return NULL;
	large = behind(me) > LIFO_BATCH;
	/* seq_cst (acquire): pairs with the push's CAS, for the nodes. No
	 * marker can be here: only this thread sets them, and it is awake. */
	h = tpe__task_stack_take_all(&me->head);
	TPE__ASSERT(h == NULL || is_task(h));
	mark_taken(me);
	return run_order(h, large);
}

/*
 * The rest of a batch that the slot's last owner left behind when it
 * blocked (managed blocking), in run order; NULL when none. Relaxed look
 * first: NULL but after an adoption.
 */
static struct tpe__task *
take_left(struct slot *me)
{
	if (__atomic_load_n(&me->rest, __ATOMIC_RELAXED) == NULL)
		return NULL;
	/* Acquire: pairs with the release store of rest (run_batch). */
	return __atomic_exchange_n(&me->rest, NULL, __ATOMIC_SEQ_CST);
}

/*
 * Takes from an awake other worker the rest of the batch behind its
 * running task, else its whole stack; NULL if none. Either comes back in
 * run order: the rest as its owner published it, the stack as run_order.
 */
static struct tpe__task *
steal(struct pw_queue *pq, struct slot *me)
{
	size_t k, i = (size_t)(me - pq->slots);

	for (k = 1; k < pq->n; k++) {
		struct slot *v = &pq->slots[(i + k) % pq->n];
		struct tpe__task *h;
		bool large;

		if (__atomic_load_n(&v->busy, __ATOMIC_SEQ_CST) == 0)
			continue;
		if (__atomic_load_n(&v->rest, __ATOMIC_RELAXED) != NULL) {
			set_busy(me);
			test_hook(&tpe__per_worker_steal_hook);
			/* Acquire: pairs with the owner's release store of
			 * rest (run_batch), for the links. */
			h = __atomic_exchange_n(&v->rest, NULL,
			    __ATOMIC_SEQ_CST);
			if (h != NULL)
				return h;
		}
		h = __atomic_load_n(&v->head, __ATOMIC_SEQ_CST);
		if (!is_task(h))
			continue;
		set_busy(me);
		test_hook(&tpe__per_worker_steal_hook);
		large = behind(v) > LIFO_BATCH;
		/* seq_cst (acquire): pairs with the pushes' CAS. */
		if (__atomic_compare_exchange_n(&v->head, &h, NULL, false,
		    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
			mark_taken(v);
			return run_order(h, large);
		}
	}
	return NULL;
}

/* ---- the worker ------------------------------------------------------- */

enum step { GO_ON, LEAVE, FORKED, SLOTLESS };

/* Shutdown-now: the tasks the worker holds go to the discard callback. */
static enum step
hand_back_all(struct pw_queue *pq, struct slot *me, struct tpe__task *fifo)
{
	struct tpe__task *t;

	while ((t = fifo) != NULL) {
		fifo = t->next;
		count(&me->dropped);
		if (!tpe__task_discard(&pq->pool->tasks, t))
			return FORKED;
	}
	return GO_ON;
}

/* While the pool is paused (and not shut down), waits for a change. */
static void
wait_while_paused(struct pw_queue *pq, struct slot *me)
{
	for (;;) {
		unsigned gen = __atomic_load_n(&pq->gen, __ATOMIC_SEQ_CST);

		/* Relaxed: a change of paused is followed by a bump of gen
		 * (pw_wake_all), which the wait below sees. */
		if (!__atomic_load_n(&pq->paused, __ATOMIC_RELAXED) ||
		    load_state(pq->pool) != TPE__RUNNING)
			return;
		wait_for_change(pq, me, gen, false, -1);
	}
}

/* Runs a batch in run order (take_own, take_left, steal); its nodes end
 * in one chain. *small: it held at most BATCH_SMALL tasks. */
static enum step
run_batch(struct pw_queue *pq, struct slot *me, struct tpe__task *todo,
    bool *small)
{
	tpe_t *pool = pq->pool;
	struct tpe__task *t, *done = NULL;
	/* This thread's metrics block, or NULL (lib/metrics): the thread's,
	 * not the slot's, which may change hands (managed blocking). */
	struct tpe__metrics_worker *mw = tpe__metrics_tls_worker;
	int64_t start = 0, accepted = 0;
	size_t n = 0;
	/* Tasks wait behind the first: pushed, maybe, before this worker
	 * was awake, when no push could see it awake (Design notes). */
	bool check = todo->next != NULL;

	if (check)
		test_hook(&tpe__per_worker_batch_hook);
	while ((t = todo) != NULL) {
		/* Between tasks: pause waits, shutdown-now hands back. */
		if (__atomic_load_n(&pq->paused, __ATOMIC_RELAXED))
			wait_while_paused(pq, me);
		if (load_state(pool) >= TPE__STOP) {
			if (done != NULL)
				tpe__task_end_chain(&pool->tasks, done, n);
			return hand_back_all(pq, me, todo);
		}
		todo = t->next;
		/* The rest, published while t runs, so that a long t does
		 * not hold it back from idle workers (steal). Release pairs
		 * with the thief's exchange. */
		if (todo != NULL && check) {
			/* The first rest of a batch: seq_cst, before the
			 * check, the Dekker pair of pass_watch. */
			__atomic_store_n(&me->rest, todo, __ATOMIC_SEQ_CST);
			ensure_watcher(pq, me);
			check = false;
		} else if (todo != NULL) {
			__atomic_store_n(&me->rest, todo, __ATOMIC_RELEASE);
		}
		count(&me->started);
		if (mw != NULL)
			start = tpe__metrics_task_start(mw,
			    accepted = tpe__task_accepted_tick(t));
		if (!tpe__task_run_keep(&pool->tasks, t))
			return FORKED; /* touch nothing of the pool */
		if (mw != NULL)
			tpe__metrics_task_end(mw, accepted, start);
		tpe__blocking_task_done();
		/* t blocked and handed the slot over: it is not ours now. */
		if (lost_slot(pq, me, t, done, n))
			return SLOTLESS;
		count(&me->completed);
		t->next = done;
		done = t;
		n++;
		/* Back, unless a thief took it (NULL); after a slot came
		 * back to this thread, whatever its last owner left. */
		if (took_back() || todo != NULL)
			todo = __atomic_exchange_n(&me->rest, NULL,
			    __ATOMIC_SEQ_CST);
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
 * point of the same load (about 3x the time per task, the split the bench
 * showed as 50 vs 150 ns per task). Not after a wake-up: a lone task on an
 * idle pool pays no extra latency. (The wait cannot look at how many tasks
 * the stack holds: a node in it may be taken and reused meanwhile.)
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
 * Spins while idle, when no other worker does: returns a stolen stack,
 * or NULL when the own stack has tasks, the pool changed, or the budget
 * ran out (or another worker spins, or spinning cannot pay).
 */
static struct tpe__task *
spin(struct pw_queue *pq, struct slot *me, unsigned gen)
{
	struct tpe__backoff b;
	struct tpe__task *h = NULL;
	enum tpe__backoff_did did;
	int free_ = 0;

	if (!tpe__can_spin() || tpe__per_worker_spin_ns <= 0 ||
	    other_awake(pq, me))
		return NULL;
	/* One spinner at a time: two would take the CPU the submitters
	 * need (two cores, tiny tasks), and one finds what there is. */
	if (!__atomic_compare_exchange_n(&pq->spinner, &free_, 1, false,
	    __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return NULL;
	tpe__backoff_init(&b, tpe__per_worker_spin_ns, -1, 0);
	for (;;) {
		/* Relaxed: a hint; take_own's exchange orders the nodes. */
		if (is_task(tpe__hint_load(&me->head)))
			break;
		did = tpe__backoff_step(&b);
		if (did == TPE__BACKOFF_SPENT)
			break;
		/* After each yield, the costlier looks. */
		if (did == TPE__BACKOFF_YIELDED) {
			if (tpe__hint_load(&pq->gen) != gen)
				break;
			if (pq->n > 1 && (h = steal(pq, me)) != NULL)
				break;
		}
	}
	__atomic_store_n(&pq->spinner, 0, __ATOMIC_RELEASE);
	if (h != NULL || is_task(tpe__hint_load(&me->head)))
		TPE__METRICS_WORKER_ADD(tpe__metrics_tls_worker, spin_hits, 1);
	return h;
}

/*
 * Sleeps through the protocol of the Design notes: without a timeout when
 * no other worker is awake, else as a watcher that looks every WATCH_NS
 * for a worker stuck in one task with tasks behind it and steals them.
 * Returns a stolen stack, or NULL to look again; the worker is awake.
 */
static struct tpe__task *
sleep_until_work(struct pw_queue *pq, struct slot *me, unsigned gen)
{
	struct tpe__task *expect = NULL, *h = NULL;
	bool deep = false;

	test_hook(&tpe__per_worker_sleep_hook);
	/* seq_cst: the owner's side of the sleep protocol. A push may have
	 * landed since idle() looked: then the CAS fails and the owner
	 * takes it (a plain store of SLEEP would drop that stack). */
	if (!__atomic_compare_exchange_n(&me->head, &expect, SLEEP, false,
	    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
		return NULL; /* a task came: take it */
	TPE__METRICS_WORKER_ADD(tpe__metrics_tls_worker, idle_waits, 1);
	set_asleep(pq, me);
	for (;;) {
		bool woken;

		deep = false;

		if (!other_awake(pq, me)) {
			/* Counted, then a second look (seq_cst both): the
			 * Dekker pair with set_awake. */
			__atomic_add_fetch(&pq->deep, 1, __ATOMIC_SEQ_CST);
			deep = !other_awake(pq, me);
			if (!deep)
				__atomic_sub_fetch(&pq->deep, 1,
				    __ATOMIC_SEQ_CST);
		}
		if (!deep)
			__atomic_add_fetch(&pq->watchers, 1, __ATOMIC_SEQ_CST);
		woken = wait_for_change(pq, me, gen, true,
		    deep ? -1 : tpe__now_ns() + WATCH_NS);
		if (!woken)
			test_hook(&tpe__per_worker_watch_hook);
		__atomic_sub_fetch(deep ? &pq->deep : &pq->watchers, 1,
		    __ATOMIC_SEQ_CST);
		if (woken) {
			TPE__METRICS_WORKER_ADD(tpe__metrics_tls_worker, wakeups, 1);
			break;
		}
		/* A watcher's look: tasks waiting behind an awake worker
		 * (stuck in a long task, or behind). The marker stays: a
		 * push onto this stack still wakes it. */
		if (pq->n > 1 && (h = steal(pq, me)) != NULL)
			break;
		/* A steal that marked this worker awake and then found the
		 * tasks gone (their owner took them first) leaves it awake:
		 * asleep again, or tpe_wait_idle would wait for it forever
		 * and other workers would watch it instead of sleeping. */
		set_asleep(pq, me);
	}
	/* It stopped watching (a deep sleeper was no watcher). */
	if (!deep)
		pass_watch(pq, me);
	/* Awake first, then take the marker back if no push replaced it. */
	set_awake(me);
	expect = SLEEP;
	__atomic_compare_exchange_n(&me->head, &expect, NULL, false,
	    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
	return h;
}

/*
 * The owner's stack is empty: leave (shut down), wait (paused), or spin,
 * steal and sleep. *hp: a stolen stack to run, or NULL to look again.
 */
static enum step
idle(struct pw_queue *pq, struct slot *me, struct tpe__task **hp)
{
	/* gen before the state: a change after this read bumps gen later,
	 * which the spin and the sleep see. */
	unsigned gen = __atomic_load_n(&pq->gen, __ATOMIC_SEQ_CST);
	int state = load_state(pq->pool);
	struct tpe__task *h;

	*hp = NULL;
	if (state >= TPE__STOP) {
		/* Closed for good; what was pushed since the drain of
		 * tpe_shutdown_now goes back. */
		h = __atomic_exchange_n(&me->head, CLOSED, __ATOMIC_SEQ_CST);
		TPE__ASSERT(h != CLOSED && h != SLEEP);
		return hand_back_all(pq, me, reverse(h)) == FORKED ? FORKED :
		    LEAVE;
	}
	if (state == TPE__SHUTDOWN) {
		h = NULL;
		/* Drained: close, so that no push lands after the owner left
		 * (a push that finds CLOSED is refused). */
		return __atomic_compare_exchange_n(&me->head, &h, CLOSED,
		    false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED) ? LEAVE : GO_ON;
	}
	if (__atomic_load_n(&pq->paused, __ATOMIC_RELAXED)) {
		/* Holding nothing: idle for tpe_wait_idle meanwhile. */
		set_asleep(pq, me);
		wait_while_paused(pq, me);
		set_awake(me);
		return GO_ON;
	}
	h = spin(pq, me, gen);
	if (h == NULL &&
	    !is_task(__atomic_load_n(&me->head, __ATOMIC_RELAXED)) &&
	    __atomic_load_n(&pq->gen, __ATOMIC_RELAXED) == gen)
		h = sleep_until_work(pq, me, gen);
	*hp = h;
	return GO_ON;
}

/* A stack idle() stole (spin, a watcher's look), in the metrics. */
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
static bool
pw_worker_loop(struct tpe__engine *q, struct tpe__task *first)
{
	struct pw_queue *pq = pw_of(q);
	tpe_t *pool = pq->pool;
	size_t i = __atomic_fetch_add(&pq->next_slot, 1, __ATOMIC_RELAXED);
	struct slot *me;
	struct tpe__task *h;
	bool small = false, woken = true;
	enum step st;

	TPE__ASSERT_HELD(&pool->lock);
	/* Started with no first task: the n of tpe_create, one per slot, and
	 * the spares of managed blocking, which adopt a handed-over slot. */
	TPE__ASSERT(first == NULL);
	(void)first;
	tpe__mutex_unlock(&pool->lock);
	if (i < pq->n)
		tls_slot = &pq->slots[i];
	else if (adopt(pq, true) == NULL)
		return true; /* no slot came: wc given up, L held */
	me = tls_slot;
	set_awake(me);
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
			st = idle(pq, me, &h);
			woken = true;
			if (h != NULL && tpe__metrics_tls_worker != NULL)
				count_stolen(tpe__metrics_tls_worker, h);
		}
		if (st == GO_ON && h != NULL)
			st = run_batch(pq, me, h, &small);
		if (st == SLOTLESS) {
			/* A spare now: another handed-over slot, or leave. */
			if (adopt(pq, false) == NULL)
				return true;
			me = tls_slot;
			set_awake(me);
			small = false;
			woken = true;
			continue;
		}
		if (st != GO_ON)
			break;
	}
	if (st == FORKED)
		return false;
	set_asleep(pq, me);
	tpe__mutex_lock(&pool->lock);
	TPE__ASSERT(pool->wc > 0 && pool->state >= TPE__SHUTDOWN);
	tpe__pool_set_wc_locked(pool, pool->wc - 1);
	return true;
}

/* ---- the rest of the interface ---------------------------------------- */

/*
 * Settled sleepers (stacks.h): counted asleep (deep or watching) and
 * still marked. A worker being woken is counted until it runs again, but
 * its waker took its marker away first (a push's CAS, wake_one): so the
 * smaller of the two counts. Either count alone misleads a test: a
 * counted worker whose marker is gone takes pushes onto its own stack,
 * and a marked one that is not yet counted may still go deep.
 */
size_t
tpe__stacks_sleepers(const struct tpe__engine *q)
{
	const struct pw_queue *pq = pw_of_const(q);
	size_t counted, marked = 0, i;

	counted = __atomic_load_n(&pq->deep, __ATOMIC_SEQ_CST) +
	    __atomic_load_n(&pq->watchers, __ATOMIC_SEQ_CST);
	for (i = 0; i < pq->n; i++)
		if (__atomic_load_n(&pq->slots[i].head, __ATOMIC_SEQ_CST) ==
		    SLEEP)
			marked++;
	return counted < marked ? counted : marked;
}

/* Workers counted as watchers (stacks.h). */
size_t
tpe__stacks_watchers(const struct tpe__engine *q)
{
	return __atomic_load_n(&pw_of_const(q)->watchers, __ATOMIC_SEQ_CST);
}

static int
pw_attach(struct tpe__engine *q, tpe_t *pool)
{
	struct pw_queue *pq = pw_of(q);

	pq->pool = pool;
	/* Before any worker or submitter touches it (node_cache.c): room for the
	 * nodes in flight, so that the steady state neither mallocs nor
	 * frees; at most TPE__NODE_RETURNS_MANY nodes' worth of chunks stay
	 * cached. */
	pool->returns.max = TPE__NODE_RETURNS_MANY;
	return pool->attr.core == pq->n && pool->attr.max == pq->n ? 0 :
	    EINVAL;
}

/* Never saturates: the blocking submit is the plain one. */
static int
pw_submit_wait(struct tpe__engine *q, tpe_fn fn, void *arg,
    struct tpe_future *f, int64_t timeout_ns)
{
	(void)timeout_ns;
	return pw_submit(q, fn, arg, f);
}

/* No reserved threads (TPE__CAP_NO_RESERVE): a worker never idles where
 * tpe_try_execute could hand it a task, so every try misses. */
static int
pw_try_submit(struct tpe__engine *q, tpe_fn fn, void *arg)
{
	(void)fn;
	(void)arg;
	tpe__metrics_count(pw_of(q)->pool->metrics, TPE__M_RESERVE_MISS);
	return EAGAIN;
}

static void
pw_wake_all_locked(struct tpe__engine *q)
{
	struct pw_queue *pq = pw_of(q);
	size_t i;

	TPE__ASSERT_HELD(&pq->pool->lock);
	__atomic_store_n(&pq->paused, pq->pool->paused, __ATOMIC_RELAXED);
	/* seq_cst, after the change (state: set_state_locked, paused:
	 * above) and before the wake-ups: pairs with the owner's read of
	 * gen in idle() and wait_for_change(). */
	__atomic_add_fetch(&pq->gen, 1, __ATOMIC_SEQ_CST);
	for (i = 0; i < pq->n; i++)
		tpe__park_wake_all(&pq->slots[i].park);
	/* Spares waiting for a slot look at the state again. */
	tpe__cond_broadcast(&pq->spare_cond);
}

/*
 * Idle: every stack empty, then no worker awake (Design notes,
 * tpe_wait_idle): the heads are read before the busy flags, all seq_cst.
 * L held (the waiter's count in idle_waiters was stored under it).
 */
static bool
pw_idle_locked(struct tpe__engine *q)
{
	struct pw_queue *pq = pw_of(q);
	size_t i;

	TPE__ASSERT_HELD(&pq->pool->lock);
	for (i = 0; i < pq->n; i++)
		if (is_task(__atomic_load_n(&pq->slots[i].head,
		    __ATOMIC_SEQ_CST)))
			return false;
	for (i = 0; i < pq->n; i++)
		if (__atomic_load_n(&pq->slots[i].busy, __ATOMIC_SEQ_CST))
			return false;
	/* A thread that lost its slot in a task still runs it (lost_slot
	 * pairs its seq_cst decrement with its look at idle_waiters). */
	return __atomic_load_n(&pq->orphans, __ATOMIC_SEQ_CST) == 0;
}

/* How many tasks were pushed, summed over the slots: read after the
 * counters of what was taken (Design notes, statistics). */
static uint64_t
pw_pushed(const struct pw_queue *pq)
{
	uint64_t pushed = 0;
	size_t i;

	for (i = 0; i < pq->n; i++)
		pushed += tpe__counter_read(&pq->slots[i].pushed);
	return pushed;
}

/* How many tasks wait: pushed minus taken (Design notes). L held. */
static size_t
pw_queued_locked(struct pw_queue *pq, uint64_t *pushed)
{
	uint64_t taken = pq->removed;
	size_t i;

	TPE__ASSERT_HELD(&pq->pool->lock);
	for (i = 0; i < pq->n; i++) {
		const struct slot *s = &pq->slots[i];

		taken += __atomic_load_n(&s->started, __ATOMIC_ACQUIRE) +
		    __atomic_load_n(&s->dropped, __ATOMIC_ACQUIRE);
	}
	*pushed = pw_pushed(pq);
	return *pushed > taken ? (size_t)(*pushed - taken) : 0;
}

/* The workers count themselves (no lock per task); an idle one is any
 * other worker of wc. L held. */
static void
pw_counts_locked(struct tpe__engine *q, struct tpe__engine_counts *c)
{
	struct pw_queue *pq = pw_of(q);
	size_t i, wc = pq->pool->wc;
	uint64_t orphan_done;

	TPE__ASSERT_HELD(&pq->pool->lock);
	/* Tasks finished by threads that lost their slot in them: read
	 * first (acquire, pairs with lost_slot's release add), so the
	 * started counters read next include each of them. */
	orphan_done = __atomic_load_n(&pq->orphan_done, __ATOMIC_ACQUIRE);
	c->completed = orphan_done;
	c->active = 0;
	for (i = 0; i < pq->n; i++) {
		const struct slot *s = &pq->slots[i];
		/* Completed before started: never more done than begun.
		 * Acquire pairs with count()'s release stores. */
		uint64_t done = __atomic_load_n(&s->completed,
		    __ATOMIC_ACQUIRE);
		uint64_t begun = __atomic_load_n(&s->started,
		    __ATOMIC_ACQUIRE);

		c->active += (size_t)(begun - done);
		c->completed += done;
	}
	c->active -= c->active < orphan_done ? c->active : (size_t)orphan_done;
	c->idle = c->active > wc ? 0 : wc - c->active;
	c->queued = pw_queued_locked(pq, &c->submitted);
}

/*
 * The drains of shutdown-now and fork (TPE__CAP_DRAIN_ONLY: every task;
 * tpe_remove and tpe_purge say ENOTSUP before they get here). Each stack
 * is detached with a CAS that leaves the owner's markers in place. L held.
 */
static size_t
pw_drain_locked(struct tpe__engine *q, tpe__task_match_fn match, void *ctx,
    size_t max, struct tpe__task_list *out)
{
	struct pw_queue *pq = pw_of(q);
	size_t i, n = 0;

	TPE__ASSERT_HELD(&pq->pool->lock);
	TPE__ASSERT(match == NULL);
	(void)match;
	(void)ctx;
	for (i = 0; i < pq->n && n < max; i++) {
		struct slot *s = &pq->slots[i];
		/* Pairs with the pushes; leaves the owner's markers. */
		struct tpe__task *h = tpe__task_stack_take_all_unmarked(
		    &s->head, CLOSED);
		struct tpe__task *t;

		if (h == NULL)
			continue;
		for (h = reverse(h); (t = h) != NULL; n++) {
			h = t->next;
			tpe__task_list_push(out, t);
		}
	}
	pq->removed += n;
	return n;
}

/* In the child of fork(): the workers are gone; a busy flag left set by
 * one would make tpe_wait_idle wait forever there. */
static void
pw_forget_locked(struct tpe__engine *q)
{
	struct pw_queue *pq = pw_of(q);
	size_t i;

	for (i = 0; i < pq->n; i++) {
		__atomic_store_n(&pq->slots[i].busy, 0, __ATOMIC_RELAXED);
		pq->slots[i].handed = false;
	}
	pq->spares = pq->nfree = 0;
	__atomic_store_n(&pq->orphans, 0, __ATOMIC_RELAXED);
	tpe__cond_init(&pq->spare_cond);
}

static void
pw_destroy(struct tpe__engine *q)
{
	struct pw_queue *pq = pw_of(q);
	size_t i;

	for (i = 0; i < pq->n; i++)
		tpe__park_destroy(&pq->slots[i].park);
	tpe__cond_destroy(&pq->spare_cond);
	free(pq->slots);
	free(pq);
}

/* ---- managed blocking ------------------------------------------------- */

/*
 * A worker that begins a blocking section (pool/blocking.h) hands its slot
 * over at once (Design notes): under pool->lock it marks the slot `handed`
 * and counts itself in `orphans` (before any thread can take the slot and
 * go to sleep on it: tpe_wait_idle must still see its task), and a spare
 * thread takes the slot: one that waits in adopt (spare_cond), else a new
 * worker, up to max + the spares (it takes index >= n from next_slot and
 * adopts). `spares` counts the threads that will look for a handed slot
 * (waiting, or started to), so a handover starts a thread only when more
 * slots are handed than spares will take. The new owner runs the rest of
 * the batch first (take_left), then the slot as its own. The blocked
 * thread, back from its task, takes its slot back if it is still handed
 * (tpe_blocking_end), else finishes its task without a slot (lost_slot:
 * its completion counted in orphan_done, the slot's counters being the
 * new owner's) and becomes a spare: it adopts a handed slot or leaves
 * after the keep-alive (at shutdown: at once, once no slot is handed).
 * Every handed slot has a live thread that will look for it: its blocked
 * thread, which looks before it leaves, so no slot is stranded.
 */
static TPE__TLS struct slot *tls_handed; /* handed over in this task */
static TPE__TLS bool tls_retook;         /* and taken back (end) */

static bool
took_back(void)
{
	if (!tls_retook)
		return false; /* every task: a load, no store */
	tls_retook = false;
	return true;
}

/* A slot was handed over: a spare will take it, or one is started. L
 * held (dropped while a thread starts). */
static int
find_owner_locked(struct pw_queue *pq)
{
	tpe_t *pool = pq->pool;
	int rc;

	TPE__ASSERT_HELD(&pool->lock);
	if (pq->nfree <= pq->spares) {
		tpe__cond_signal(&pq->spare_cond);
		return 0;
	}
	if (pool->wc >= pool->max + pool->blocking.max_spare)
		return EAGAIN; /* watchers steal from it meanwhile */
	pq->spares++; /* the new thread, until it adopts */
	rc = tpe__worker_start_locked(pool, NULL);
	if (rc == 0)
		pool->blocking.compensations++;
	else
		pq->spares--;
	return rc;
}

/*
 * A thread without a slot (counted in spares when `counted`): adopts a
 * handed-over slot (tls_slot, returned; L not held), or gives up its place
 * in wc after the keep-alive, or at shutdown once none is handed (NULL; L
 * held, as worker_loop returns).
 */
static struct slot *
adopt(struct pw_queue *pq, bool counted)
{
	tpe_t *pool = pq->pool;
	bool expired = false;
	int64_t deadline;
	size_t i;

	tpe__mutex_lock(&pool->lock);
	if (!counted)
		pq->spares++;
	deadline = tpe__deadline(pool->keep_alive_ns);
	for (;;) {
		if (pq->nfree > 0) {
			for (i = 0; !pq->slots[i].handed; i++)
				TPE__ASSERT(i + 1 < pq->n);
			pq->slots[i].handed = false;
			pq->nfree--;
			pq->spares--;
			tls_slot = &pq->slots[i];
			tpe__mutex_unlock(&pool->lock);
			return tls_slot;
		}
		if (expired || pool->state >= TPE__SHUTDOWN)
			break;
		expired = tpe__cond_wait_until(&pq->spare_cond, &pool->lock,
		    deadline) == ETIMEDOUT;
	}
	pq->spares--;
	tls_slot = NULL;
	TPE__ASSERT(pool->wc > 0);
	tpe__pool_set_wc_locked(pool, pool->wc - 1);
	return NULL;
}

/*
 * After task t (no lock): false when this thread still owns `me`; true
 * when t handed it over and nobody gave it back: t's completion is
 * counted here, the batch's spent nodes (the n from done, and t) end,
 * and the thread holds no slot and no task.
 */
static bool
lost_slot(struct pw_queue *pq, struct slot *me, struct tpe__task *t,
    struct tpe__task *done, size_t n)
{
	tpe_t *pool = pq->pool;

	if (tls_slot == me)
		return false;
	/* Release: pairs with the acquire load in pw_counts_locked. */
	__atomic_add_fetch(&pq->orphan_done, 1, __ATOMIC_RELEASE);
	t->next = done;
	tpe__task_end_chain(&pool->tasks, t, n + 1);
	tls_handed = NULL;
	/* Dekker with tpe_wait_idle, as set_asleep: the seq_cst decrement,
	 * then the load of idle_waiters. */
	__atomic_sub_fetch(&pq->orphans, 1, __ATOMIC_SEQ_CST);
	if (tpe__pool_idle_waited(pool)) {
		tpe__mutex_lock(&pool->lock);
		tpe__pool_notify_idle_locked(pool);
		tpe__mutex_unlock(&pool->lock);
	}
	return true;
}

/* Spare threads and handed-over slots (stacks.h). Takes L. */
void
tpe__stacks_handover_counts(const struct tpe__engine *q, size_t *spares,
    size_t *unowned)
{
	const struct pw_queue *pq = pw_of_const(q);

	tpe__mutex_lock(&pq->pool->lock);
	*spares = pq->spares;
	*unowned = pq->nfree;
	tpe__mutex_unlock(&pq->pool->lock);
}

/* The engine's blocking op (engine.h). */
static int
pw_blocking(struct tpe__engine *q, bool begin)
{
	struct pw_queue *pq = pw_of(q);
	tpe_t *pool = pq->pool;
	struct tpe__blocking *b = &pool->blocking;
	struct slot *s;
	int rc = 0;

	tpe__mutex_lock(&pool->lock);
	if (begin) {
		__atomic_store_n(&b->blocked, b->blocked + 1, __ATOMIC_SEQ_CST);
		s = tls_slot;
		/* A second section of a task that lost its slot in the
		 * first: nothing left to hand over. */
		if (s == NULL)
			goto out;
		TPE__ASSERT(!s->handed);
		/* Counted before the slot can be taken (above). */
		__atomic_add_fetch(&pq->orphans, 1, __ATOMIC_SEQ_CST);
		s->handed = true;
		pq->nfree++;
		tls_slot = NULL;
		tls_handed = s;
		rc = find_owner_locked(pq);
	} else {
		TPE__ASSERT(b->blocked > 0);
		__atomic_store_n(&b->blocked, b->blocked - 1, __ATOMIC_SEQ_CST);
		s = tls_handed;
		if (s != NULL && s->handed) {
			/* Nobody took it: back to this thread, which owns a
			 * slot again and so is no orphan. */
			s->handed = false;
			pq->nfree--;
			tls_slot = s;
			tls_handed = NULL;
			tls_retook = true;
			__atomic_sub_fetch(&pq->orphans, 1, __ATOMIC_SEQ_CST);
		}
	}
out:
	tpe__mutex_unlock(&pool->lock);
	return rc;
}

static const struct tpe__engine_ops stacks_ops = {
	.name = "stacks",
	.attach = pw_attach,
	.submit = pw_submit,
	.submit_wait = pw_submit_wait,
	.try_submit = pw_try_submit,
	.worker_loop = pw_worker_loop,
	.wake_all_locked = pw_wake_all_locked,
	.idle_locked = pw_idle_locked,
	.counts_locked = pw_counts_locked,
	.drain_locked = pw_drain_locked,
	.forget_locked = pw_forget_locked,
	.destroy = pw_destroy,
	.blocking = pw_blocking,
};

int
tpe__engine_stacks_create(size_t workers, struct tpe__engine **q)
{
	struct pw_queue *pq;

	if (workers == 0)
		return EINVAL;
	if (posix_memalign((void **)&pq, TPE__CACHE_LINE, sizeof(*pq)) != 0)
		return ENOMEM;
	memset(pq, 0, sizeof(*pq));
	if (posix_memalign((void **)&pq->slots, TPE__CACHE_LINE,
	    workers * sizeof(*pq->slots)) != 0) {
		free(pq);
		return ENOMEM;
	}
	memset(pq->slots, 0, workers * sizeof(*pq->slots));
	pq->n = workers;
	for (size_t i = 0; i < workers; i++)
		tpe__park_init(&pq->slots[i].park);
	tpe__cond_init(&pq->spare_cond);
	pq->base.ops = &stacks_ops;
	*q = &pq->base;
	return 0;
}
