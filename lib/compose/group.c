/* SPDX-License-Identifier: MIT */
/*
 * group.c - task groups (tpe_group_create(3)): a count of tasks given to
 * pools through the group and not yet ended, a wait for it to reach zero,
 * a cancel of what has not started, and a notify callback on reaching it.
 *
 * Where it sits: lib/compose, beside the pool: a group is a set of tasks
 * (pool/task.h, struct tpe__set) whose member nodes call back into it when
 * they end; it submits through the public tpe_execute.
 *
 * Design notes
 * ------------
 * Memory. A group is one fixed block (O(1) in its tasks); a member costs
 * its node's `set` word and nothing else (queue/node.h).
 *
 * Count. `count` is the members added and not ended. tpe_group_execute
 * adds one before it submits, sets tpe__tls_task_set so that the node the
 * submission makes joins the group, and submits. From then on task.c calls
 * group_ended exactly once for that node, however it ends (ran, handed
 * back, given to a rejection handler, freed unaccepted or by tpe_remove:
 * task.h). When the TLS is still set after the call, no node was made (the
 * pool refused before making one, or ENOMEM): nothing will end, and the
 * call ends the member itself. So a refused call leaves the count as it
 * was, once it returns; a concurrent waiter may have seen the count one
 * higher meanwhile.
 *
 * Invariants:
 *  - count is the number of member nodes made (plus, for a moment, the
 *    one being submitted) that have not ended; it never wraps below 0.
 *  - the count moves from 1 to 0 only inside an `ending` section
 *    (group_ended's slow path), never by the lock-free fast path, which
 *    takes it from c > 1 to c - 1 only.
 *  - an `ending` section touches the group for a CAS, a wake-up and the
 *    notify pair only (no user code, no lock); the notify callback runs
 *    after the section, on a copy, so tpe_group_destroy, which waits for
 *    `ending` to be 0 once the count is 0, frees nothing still in use.
 *  - the notify pair runs at most once per tpe_group_notify: whoever moves
 *    notify_state from ARMED to FIRING runs it, and only then may another
 *    tpe_group_notify arm a new one.
 *  - a member that a worker takes after the group was cancelled is not
 *    run: it is handed back to that pool's discard callback (task.c), and
 *    it ends as any handed-back task.
 *
 * Deadlock. A worker of a pool that may hold members of the group cannot
 * wait for them (the pool may need that very thread: a pool of one, or
 * the worker's own stack of a per-worker pool), nor can a thread inside a
 * hand-back callback of such a pool: tpe_group_wait returns EDEADLK there
 * unless the group is already empty. The group remembers the first
 * GROUP_POOLS pools it was given (a set of words, lock-free); after more,
 * every worker of any pool counts as one of them.
 *
 * Fork. In the child of a fork(), a pool's atfork handler frees the
 * queued nodes the parent's workers would have run (pool.c), and each
 * freed member ends here like one that tpe_remove took: a group whose
 * members were all queued becomes empty in the child, and its armed
 * notify runs there, in that handler. A member that was running in
 * another thread never ends in the child: its group stays non-empty.
 *
 * Legend: doc/architecture.md.
 */
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/atomic.h"
#include "base/fork.h"
#include "base/park.h"
#include "base/sync.h"
#include "pool/pool.h"
#include "pool/task.h"
#include "tpe.h"

/* Pools a group remembers for EDEADLK (Design notes). */
#define GROUP_POOLS 4

enum notify_state {
	NOTIFY_NONE,    /* no callback armed: tpe_group_notify may set one */
	NOTIFY_SETTING, /* tpe_group_notify is writing the pair */
	NOTIFY_ARMED,   /* the pair is set; the empty group will run it */
	NOTIFY_FIRING   /* its taker is copying the pair out */
};

struct tpe_group {
	struct tpe__set set;       /* I: the set its members' nodes name */
	size_t count;              /* A: members not ended (Design notes) */
	unsigned ending;           /* A: group_ended's slow paths in progress */
	bool cancelled;            /* A: tpe_group_cancel was called */
	bool pools_overflow;       /* A: more pools than pools[] holds */
	int notify_state;          /* A: enum notify_state */
	tpe_group_notify_fn notify; /* the pair: written in SETTING by the */
	void *notify_ctx;           /* setter, read in FIRING by the taker */
	const tpe_t *pools[GROUP_POOLS]; /* A: pools given members, NULL-ended */
	struct tpe__park park;     /* W: tpe_group_wait sleeps on it until
				    * count is 0; the ender of the last
				    * member wakes it */
};

static struct tpe_group *
group_of(const struct tpe__set *s)
{
	return (struct tpe_group *)((uintptr_t)s -
	    offsetof(struct tpe_group, set));
}

static bool
group_cancelled(const struct tpe__set *s)
{
	/* Relaxed: a hint; the seq_cst store in tpe_group_cancel. A worker
	 * that looked before it runs the member (tpe_group_cancel(3)). */
	return tpe__hint_load(&group_of(s)->cancelled);
}

/* Takes the armed notify pair (*fn, *ctx); false: none is armed, or
 * another thread took it. */
static bool
take_notify(struct tpe_group *g, tpe_group_notify_fn *fn, void **ctx)
{
	int armed = NOTIFY_ARMED;

	/* seq_cst: pairs with the ARMED store in tpe_group_notify, which
	 * then loads count (a Dekker pair with the final decrement). */
	if (!tpe__cas(&g->notify_state, &armed, NOTIFY_FIRING))
		return false;
	*fn = g->notify;
	*ctx = g->notify_ctx;
	/* Release: the pair was read before another setter may write it
	 * (its CAS from NONE). */
	tpe__publish(&g->notify_state, NOTIFY_NONE);
	return true;
}

/* A member ended (task.h's ended; also a refused submission's undo). */
static bool
group_ended(struct tpe__set *s)
{
	struct tpe_group *g = group_of(s);
	tpe_group_notify_fn fn = NULL;
	void *ctx = NULL;
	size_t c = tpe__hint_load(&g->count);
	unsigned gen;

	/* Fast path: not the last. seq_cst CAS (a release suffices): the
	 * decrements form a release sequence that the waiter's load of 0
	 * acquires, so the member's effects happen-before its return. */
	while (c > 1) {
		if (tpe__cas_weak(&g->count, &c, c - 1))
			return true;
	}
	TPE__ASSERT(c == 1);
	/* The ending section: announced before the count can reach 0, so
	 * that tpe_group_destroy, which loads count and then ending, both
	 * seq_cst, sees it (Design notes). */
	tpe__fetch_add(&g->ending, 1);
	if (tpe__fetch_sub(&g->count, 1) == 0) {
		(void)take_notify(g, &fn, &ctx);
		/* After the change of the count (park.h's rule); pairs with
		 * tpe__park_prepare in tpe_group_wait. */
		tpe__park_wake_all(&g->park);
	}
	/* The last touch of g; pairs with tpe_group_destroy's seq_cst
	 * load of ending. */
	tpe__fetch_sub(&g->ending, 1);
	if (fn == NULL)
		return true;
	gen = tpe__fork_gen();
	fn(g, ctx);
	return !tpe__forked_since(gen);
}

static const struct tpe__set_ops group_ops = {
	.cancelled = group_cancelled,
	.ended = group_ended,
	.internal = false,
};

int
tpe_group_create(tpe_group_t **groupp)
{
	struct tpe_group *g;

	if (groupp == NULL)
		return EINVAL;
	g = calloc(1, sizeof(*g));
	if (g == NULL)
		return ENOMEM;
	g->set.ops = &group_ops;
	tpe__park_init(&g->park);
	*groupp = g;
	return 0;
}

int
tpe_group_destroy(tpe_group_t *g)
{
	if (g == NULL)
		return EINVAL;
	/* seq_cst, then ending seq_cst: pairs with group_ended, which
	 * raises ending before its decrement to 0 (Design notes). */
	if (tpe__dekker_load(&g->count) != 0)
		return EBUSY;
	/* A last ender between its decrement and its last touch: a CAS
	 * and a wake-up away, no lock, no user code. */
	while (tpe__dekker_load(&g->ending) != 0)
		sched_yield();
	tpe__park_destroy(&g->park);
	free(g);
	return 0;
}

/* Remembers that pool may hold members (Design notes, Deadlock). */
static void
remember_pool(struct tpe_group *g, const tpe_t *pool)
{
	size_t i;

	for (i = 0; i < GROUP_POOLS; i++) {
		/* Acquire, and the CAS: pair with each other only (the
		 * slots only go from NULL to a pool). */
		const tpe_t *p = tpe__observe(&g->pools[i]);

		if (p == pool)
			return;
		if (p == NULL && tpe__cas(&g->pools[i], &p, pool))
			return;
		if (p == pool)
			return;
	}
	/* seq_cst beside the count's increment that follows: a waiter that
	 * sees the member sees this too. */
	tpe__dekker_store(&g->pools_overflow, true);
}

/* Whether pool may hold members (for EDEADLK). */
static bool
may_hold(struct tpe_group *g, const tpe_t *pool)
{
	size_t i;

	if (pool == NULL)
		return false;
	if (tpe__dekker_load(&g->pools_overflow))
		return true;
	for (i = 0; i < GROUP_POOLS; i++) {
		/* Acquire: pairs with remember_pool's CAS. */
		if (tpe__observe(&g->pools[i]) == pool)
			return true;
	}
	return false;
}

int
tpe_group_execute(tpe_group_t *g, tpe_t *pool, tpe_fn fn, void *arg)
{
	int rc;

	if (g == NULL || pool == NULL || fn == NULL)
		return EINVAL;
	/* seq_cst: pairs with tpe_group_cancel's store. */
	if (tpe__dekker_load(&g->cancelled))
		return ECANCELED;
	remember_pool(g, pool);
	/* seq_cst: before the member can exist, so that its end finds it
	 * counted; pairs with group_ended's CAS and fetch_sub. */
	tpe__fetch_add(&g->count, 1);
	tpe__tls_task_set = &g->set;
	rc = tpe_execute(pool, fn, arg);
	if (tpe__tls_task_set == &g->set) {
		/* No node was made: nothing will end this member (Design
		 * notes, Count). */
		TPE__ASSERT(rc != 0);
		tpe__tls_task_set = NULL;
		(void)group_ended(&g->set);
	}
	return rc;
}

int
tpe_group_wait(tpe_group_t *g, int64_t timeout_ns)
{
	int64_t deadline;
	unsigned seq;

	if (g == NULL)
		return EINVAL;
	/* seq_cst: pairs with group_ended's decrement (acquires the
	 * members' effects through its release sequence). */
	if (tpe__dekker_load(&g->count) == 0)
		return 0;
	if (timeout_ns != 0 && (may_hold(g, tpe__tls_worker_pool) ||
	    may_hold(g, tpe__tls_hook_pool)))
		return EDEADLK;
	deadline = tpe__deadline(timeout_ns);
	for (;;) {
		/* Before the look (park.h); pairs with the wake-up in
		 * group_ended. */
		seq = tpe__park_prepare(&g->park);
		if (tpe__dekker_load(&g->count) == 0)
			return 0;
		if (timeout_ns == 0 ||
		    tpe__park_wait(&g->park, seq, deadline) == ETIMEDOUT) {
			return tpe__dekker_load(&g->count) == 0 ? 0 :
			    ETIMEDOUT;
		}
	}
}

int
tpe_group_cancel(tpe_group_t *g)
{
	if (g == NULL)
		return EINVAL;
	/* seq_cst: pairs with tpe_group_execute's load and the workers'
	 * relaxed look (group_cancelled). */
	tpe__dekker_store(&g->cancelled, true);
	return 0;
}

int
tpe_group_notify(tpe_group_t *g, tpe_group_notify_fn fn, void *ctx)
{
	int none = NOTIFY_NONE;

	if (g == NULL || fn == NULL)
		return EINVAL;
	/* Pairs with take_notify's release store of NONE: the last taker
	 * has read the old pair. */
	if (!tpe__cas(&g->notify_state, &none, NOTIFY_SETTING))
		return EBUSY;
	g->notify = fn;
	g->notify_ctx = ctx;
	/* seq_cst store, then seq_cst load of count: with group_ended's
	 * seq_cst decrement and CAS on notify_state, one of the two sees
	 * the other (Dekker), so an empty group never misses its notify. */
	tpe__dekker_store(&g->notify_state, NOTIFY_ARMED);
	if (tpe__dekker_load(&g->count) != 0 || !take_notify(g, &fn, &ctx))
		return 0;
	/* Empty already: now, on this thread. */
	fn(g, ctx);
	return 0;
}

size_t
tpe_group_size(const tpe_group_t *g)
{
	if (g == NULL)
		return 0;
	/* Relaxed: a snapshot (tpe_group_size(3)). */
	return tpe__hint_load(&g->count);
}
