/* SPDX-License-Identifier: MIT */
/* queue.c - the waiting side of the queue interface, shared by every kind. */
#include <errno.h>
#include <sched.h>
#include <unistd.h>

#include "base/cpu.h"
#include "queue/queue.h"
#include "base/sync.h"

/* How long a taker spins before it sleeps; a wake-up costs more. */
#define SPIN_NS 20000
#define SPIN_CHECK 64

/* Spins (lock dropped) until an offer is seen (true), or the spin budget
 * or the deadline runs out (false). */
static bool
spin_for_offer(struct tpe__queue *q, struct tpe__mutex *lock,
    int64_t deadline_ns)
{
	/* Acquire pairs with the release store in tpe__queue_offered(). */
	unsigned seen = __atomic_load_n(&q->offers, __ATOMIC_ACQUIRE);
	int64_t end = tpe__now_ns() + SPIN_NS;
	unsigned i;

	if (deadline_ns >= 0 && deadline_ns < end)
		end = deadline_ns;
	bool offered = false;

	tpe__mutex_unlock(lock);
	for (i = 1;; i++) {
		if (__atomic_load_n(&q->offers, __ATOMIC_ACQUIRE) != seen ||
		    tpe__queue_pending(q)) {
			offered = true;
			break;
		}
		if (i % SPIN_CHECK == 0) {
			if (tpe__now_ns() >= end)
				break;
			sched_yield(); /* a submitter may share this CPU */
		} else {
			tpe__cpu_relax();
		}
	}
	tpe__mutex_lock(lock);
	return offered;
}

struct tpe__task *
tpe__queue_take(struct tpe__queue *q, struct tpe__mutex *lock,
    pthread_cond_t *cond, int64_t deadline_ns, bool spin, int *rc)
{
	struct tpe__task *t;

	TPE__ASSERT_HELD(lock);
	/* Sleepers are a subset of the takers (queue.h). */
	TPE__ASSERT(q->sleepers <= q->takers);
	*rc = 0;
	t = q->ops->poll(q);
	if (t != NULL)
		return t;
	/*
	 * Counted while waiting, spinning or asleep: an offer that relies on
	 * a waiting taker (hand-off, scale-first) reads q->takers under the
	 * same lock; it signals `cond` only for sleepers.
	 */
	__atomic_store_n(&q->takers, q->takers + 1, __ATOMIC_SEQ_CST);
	/* One spinner at a time: a second one would only take CPU from the
	 * submitters it waits for (two cores, tiny tasks); it sleeps, and
	 * the wake-up rules in queue.h call it when the queue builds up. */
	if (spin && tpe__can_spin() && q->takers - q->sleepers == 1) {
		if (!spin_for_offer(q, lock, deadline_ns))
			*rc = EAGAIN; /* nothing came: the next wait sleeps */
		if (deadline_ns >= 0 && tpe__now_ns() >= deadline_ns)
			*rc = ETIMEDOUT;
	} else {
		/*
		 * Dekker with the lock-free offer (queue.h): the seq_cst store
		 * of sleepers, then the seq_cst load in pending(). Either this
		 * sees the node, or the submitter sees sleepers > 0 and signals
		 * under the lock, which it cannot take before the wait has
		 * released it.
		 */
		__atomic_store_n(&q->sleepers, q->sleepers + 1,
		    __ATOMIC_SEQ_CST);
		if (!tpe__queue_pending(q))
			*rc = tpe__cond_wait_until(cond, lock, deadline_ns);
		TPE__ASSERT(q->sleepers > 0);
		__atomic_store_n(&q->sleepers, q->sleepers - 1,
		    __ATOMIC_RELAXED);
	}
	TPE__ASSERT(q->takers > 0);
	__atomic_store_n(&q->takers, q->takers - 1, __ATOMIC_RELAXED);
	/*
	 * No poll here: the caller re-checks the pool's state first (paused,
	 * stopped) and polls at its next call, before it may decide to exit.
	 */
	return NULL;
}
