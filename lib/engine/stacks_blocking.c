/* SPDX-License-Identifier: MIT */
/*
 * stacks_blocking.c - managed blocking in the stacks engine: a worker
 * that begins a blocking section hands its slot to a spare thread (the
 * locked engine's counterpart is blocking.c).
 *
 * Design notes
 * ------------
 * Where it sits: a part of the stacks engine (stacks.h); the pool calls
 * it through the engine's blocking op (pool/blocking.h), stacks.c's loop
 * after every task (tpe__stacks_lost_slot) and when a thread has no slot
 * (tpe__stacks_adopt). It starts spare threads through the pool
 * (tpe__worker_start_locked).
 *
 * A worker that begins a blocking section hands its slot over at once, as
 * Go hands a blocked thread's processor to another: under pool->lock it
 * marks the slot `handed` and counts itself in `orphans` (before any
 * thread can take the slot and go to sleep on it: tpe_wait_idle must
 * still see its task), and a spare thread takes the slot, with its stack
 * and the rest of its batch: one that waits in adopt (spare_cond, woken
 * here), else a new worker, up to max + the spares (it takes an index >=
 * n from next_slot and adopts). `spares` counts the threads that will
 * look for a handed slot (waiting, or started to), so a hand-over starts
 * a thread only when more slots are handed than spares will take. The
 * new owner runs the rest of the batch first (stacks.c, take_left), then
 * the slot as its own. The blocked thread, back from its task, takes its
 * slot back if it is still handed (tpe_blocking_end), else finishes its
 * task without a slot (its completion counted in orphan_done, the slot's
 * counters being the new owner's) and becomes a spare: it adopts a
 * handed slot or leaves after the keep-alive (at shutdown: at once, once
 * no slot is handed). Every handed slot has a live thread that will look
 * for it: its blocked thread, which looks before it leaves, so no slot
 * is stranded.
 *
 * Atomics: `orphans` is the store of handshake 2 (stacks_idle.c) for a
 * thread that runs a task without a slot: its seq_cst decrement, then its
 * load of idle_waiters, against the waiter's count and then its load of
 * orphans (tpe__stacks_idle_locked). `orphan_done` is a statistic: its
 * RMW is read with an acquire load before the slots' started counters
 * (stacks.c, counts), so that a snapshot never shows more done than
 * begun. pool->blocking.blocked is written under L with seq_cst stores,
 * for the lock-free readers of pool/blocking.h.
 *
 * Legend (doc/architecture.md) and the fields: stacks.h. The thread-local
 * words below are the thread's own (no sharing).
 */
#include <errno.h>

#include "config.h"

#include "base/atomic.h"
#include "base/sync.h"
#include "engine/stacks.h"
#include "pool/pool.h"

TPE__TLS struct tpe__stacks_slot *tpe__stacks_tls_slot;
TPE__TLS bool tpe__stacks_tls_retook;
/* The slot handed over in this thread's task (until it ends). */
static TPE__TLS struct tpe__stacks_slot *tls_handed;

/* A slot was handed over: a spare will take it (woken here), or one is
 * started. L held (dropped while a thread starts). */
static int
find_owner_locked(struct tpe__stacks *se)
{
	tpe_t *pool = se->pool;
	int rc;

	TPE__ASSERT_HELD(&pool->lock);
	if (se->nfree <= se->spares) {
		tpe__cond_signal(&se->spare_cond);
		return 0;
	}
	if (pool->wc >= pool->max + pool->blocking.max_spare)
		return EAGAIN; /* watchers steal from it meanwhile */
	se->spares++; /* the new thread, until it adopts */
	rc = tpe__worker_start_locked(pool, NULL);
	if (rc == 0)
		pool->blocking.compensations++;
	else
		se->spares--;
	return rc;
}

struct tpe__stacks_slot *
tpe__stacks_adopt(struct tpe__stacks *se, bool counted)
{
	tpe_t *pool = se->pool;
	bool expired = false;
	int64_t deadline;
	size_t i;

	tpe__mutex_lock(&pool->lock);
	if (!counted)
		se->spares++;
	deadline = tpe__deadline(pool->keep_alive_ns);
	for (;;) {
		if (se->nfree > 0) {
			for (i = 0; !se->slots[i].handed; i++)
				TPE__ASSERT(i + 1 < se->n);
			se->slots[i].handed = false;
			se->nfree--;
			se->spares--;
			tpe__stacks_tls_slot = &se->slots[i];
			tpe__mutex_unlock(&pool->lock);
			return tpe__stacks_tls_slot;
		}
		if (expired || pool->state >= TPE__SHUTDOWN)
			break;
		expired = tpe__cond_wait_until(&se->spare_cond, &pool->lock,
		    deadline) == ETIMEDOUT;
	}
	se->spares--;
	tpe__stacks_tls_slot = NULL;
	TPE__ASSERT(pool->wc > 0);
	tpe__pool_set_wc_locked(pool, pool->wc - 1);
	return NULL;
}

void
tpe__stacks_end_slotless(struct tpe__stacks *se, struct tpe__task *t,
    struct tpe__task *done, size_t n)
{
	tpe_t *pool = se->pool;

	/* A statistic: the acquire load in the counts pairs with it. */
	tpe__fetch_add(&se->orphan_done, 1);
	t->next = done;
	tpe__task_end_chain(&pool->tasks, t, n + 1);
	tls_handed = NULL;
	/* Handshake 2, as tpe__stacks_set_asleep: the decrement, then the
	 * load of idle_waiters. */
	tpe__fetch_sub(&se->orphans, 1);
	if (tpe__pool_idle_waited(pool)) {
		tpe__mutex_lock(&pool->lock);
		tpe__pool_notify_idle_locked(pool);
		tpe__mutex_unlock(&pool->lock);
	}
}

int
tpe__stacks_blocking(struct tpe__engine *e, bool begin)
{
	struct tpe__stacks *se = tpe__stacks_of(e);
	tpe_t *pool = se->pool;
	struct tpe__blocking *b = &pool->blocking;
	struct tpe__stacks_slot *s;
	int rc = 0;

	tpe__mutex_lock(&pool->lock);
	if (begin) {
		tpe__dekker_store(&b->blocked, b->blocked + 1);
		s = tpe__stacks_tls_slot;
		/* A second section of a task that lost its slot in the
		 * first: nothing left to hand over. */
		if (s == NULL)
			goto out;
		TPE__ASSERT(!s->handed);
		/* Counted before the slot can be taken (Design notes). */
		tpe__fetch_add(&se->orphans, 1);
		s->handed = true;
		se->nfree++;
		tpe__stacks_tls_slot = NULL;
		tls_handed = s;
		rc = find_owner_locked(se);
	} else {
		TPE__ASSERT(b->blocked > 0);
		tpe__dekker_store(&b->blocked, b->blocked - 1);
		s = tls_handed;
		if (s != NULL && s->handed) {
			/* Nobody took it: back to this thread, which owns a
			 * slot again and so is no orphan. */
			s->handed = false;
			se->nfree--;
			tpe__stacks_tls_slot = s;
			tls_handed = NULL;
			tpe__stacks_tls_retook = true;
			tpe__fetch_sub(&se->orphans, 1);
		}
	}
out:
	tpe__mutex_unlock(&pool->lock);
	return rc;
}

/* Spare threads and handed-over slots (stacks.h). Takes L. */
void
tpe__stacks_handover_counts(const struct tpe__engine *e, size_t *spares,
    size_t *unowned)
{
	const struct tpe__stacks *se = tpe__stacks_of_const(e);

	tpe__mutex_lock(&se->pool->lock);
	*spares = se->spares;
	*unowned = se->nfree;
	tpe__mutex_unlock(&se->pool->lock);
}
