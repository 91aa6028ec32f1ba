/* SPDX-License-Identifier: MIT */
/*
 * reserve.c - reserved threads and the hand-off behind tpe_try_execute.
 * See reserve.h for the design notes and the slot states.
 *
 * Memory ordering
 * ---------------
 * The lock-free words are a slot's `state`, the `slots` pointer, `want`
 * and `epoch`; the task itself travels under the slot's lock (`item`),
 * so its contents need no atomic of their own. The pairs:
 *   - slots: the first parking thread initialises the array, then stores
 *     the pointer (seq_cst, a release); slots_of (acquire) and count
 *     (seq_cst) read it before any slot.
 *   - state, parking: the owner's CAS EMPTY -> WAITING (seq_cst), then its
 *     seq_cst look at the queue's inbox (work_waiting), against the
 *     lock-free submitter's push (seq_cst CAS) then its seq_cst count of
 *     WAITING slots: a store-then-load handshake on each side (Dekker),
 *     so one of the two sees the other.
 *   - state, claiming: the claimer's CAS WAITING -> TAKEN against the
 *     owner's CAS WAITING -> EMPTY (leave): one of the two wins the same
 *     word, whatever the processor. After a won claim the claimer loads
 *     the pool's state and `paused` (seq_cst), against shutdown's and
 *     tpe_pause's seq_cst stores made before they look at the slots.
 *   - state, freeing: the owner's release store TAKEN -> EMPTY comes after
 *     its last use of the slot (under the pool lock); the next owner's CAS
 *     (an acquire) sees the slot empty.
 *   - epoch and want: relaxed counts. `epoch` is bumped under the pool
 *     lock and then the slot's lock is taken to wake its owner, which
 *     reads it under that lock: the locks order it. `want` is a number
 *     of requests, re-checked under the pool lock by a parking worker;
 *     it orders no other data.
 * Nothing here relies on x86's ordered plain accesses: every handshake is
 * seq_cst on both sides (a full barrier, or AArch64's stlr/ldar pair, on
 * a weakly ordered processor), every hand-over of data is a lock or a
 * release/acquire pair.
 */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/cpu.h"
#include "base/park.h"
#include "engine/engine.h"
#include "pool/reserve.h"
#include "pool/state.h"

enum { EMPTY, WAITING, TAKEN };

/* What a claimer gives a thread it claimed after the pool shut down. */
static struct tpe__task nothing;

size_t
tpe__reserve_capacity(const struct tpe_attr *a)
{
	const struct tpe__kind *k = tpe__kind_of(a->queue_kind);
	size_t n, ncpu;

	/* An engine without reserved threads (engine.h, caps): none. */
	if (a->max <= 1 || k == NULL || (k->caps & TPE__CAP_NO_RESERVE) != 0)
		return 0;
	if (a->reserved >= 0) {
		n = (size_t)a->reserved;
	} else {
		/* Jetty's: one reserved thread per eight pool threads, no more
		 * than the CPUs, at least one. */
		ncpu = tpe__cpu_count();
		n = a->max / 8 < ncpu ? a->max / 8 : ncpu;
		if (n == 0)
			n = 1;
	}
	return n < a->max - 1 ? n : a->max - 1;
}

void
tpe__reserve_init(struct tpe__reserve *r, size_t capacity)
{
	r->capacity = capacity;
	r->want = 0;
	r->starting = 0;
	r->epoch = 0;
	r->slots = NULL;
}

/* The slots, or NULL before the first park (reserve.h). Acquire pairs
 * with the store in tpe__reserve_slots_locked: a thread that sees the
 * array sees it initialised. */
static struct tpe__reserve_slot *
slots_of(const struct tpe__reserve *r)
{
	return __atomic_load_n(&r->slots, __ATOMIC_ACQUIRE);
}

struct tpe__reserve_slot *
tpe__reserve_slots_locked(struct tpe__reserve *r, struct tpe__mutex *lock)
{
	struct tpe__reserve_slot *s;
	size_t i;

	TPE__ASSERT_HELD(lock);
	/* Relaxed: L orders this with the only store, below. */
	s = __atomic_load_n(&r->slots, __ATOMIC_RELAXED);
	if (s != NULL || r->capacity == 0)
		return s;
	if (posix_memalign((void **)&s, TPE__CACHE_LINE,
	    r->capacity * sizeof(*s)) != 0)
		return NULL;
	for (i = 0; i < r->capacity; i++) {
		s[i].state = EMPTY;
		s[i].item = NULL;
		tpe__mutex_init_ranked(&s[i].lock, TPE__RANK_SLOT);
		tpe__cond_init(&s[i].cond);
	}
	/* seq_cst, a release: before the first slot CAS (count()), and
	 * readers that see the array see it initialised. */
	tpe__dekker_store(&r->slots, s);
	return s;
}

void
tpe__reserve_destroy(struct tpe__reserve *r)
{
	struct tpe__reserve_slot *s = slots_of(r);
	size_t i;

	if (s == NULL)
		return;
	for (i = 0; i < r->capacity; i++) {
		tpe__cond_destroy(&s[i].cond);
		tpe__mutex_destroy(&s[i].lock);
	}
	free(s);
	r->slots = NULL;
}

void
tpe__reserve_atfork_child(struct tpe__reserve *r)
{
	struct tpe__reserve_slot *s = slots_of(r);
	size_t i;

	/* The parked threads are the parent's: their slots are free here,
	 * and their primitives may count waiters that do not exist. */
	for (i = 0; s != NULL && i < r->capacity; i++) {
		s[i].state = EMPTY;
		s[i].item = NULL;
		tpe__mutex_init_ranked(&s[i].lock, TPE__RANK_SLOT);
		tpe__cond_init(&s[i].cond);
	}
	r->want = 0;
	r->starting = 0;
}

/* seq_cst: the submitter's count of parked threads after its lock-free
 * push pairs with the parking thread's CAS to WAITING (park). */
static int
load_state(const struct tpe__reserve_slot *s)
{
	return __atomic_load_n(&s->state, __ATOMIC_SEQ_CST);
}

static size_t
count(const struct tpe__reserve *r, int state)
{
	const struct tpe__reserve_slot *s;
	size_t i, n = 0;

	/* A reserve no thread ever parked in has no slots, nothing to
	 * count, and no slot line is read on a lock-free submission.
	 * seq_cst: pairs with the store that publishes the slots, which the
	 * first parking thread makes before its slot CAS: a reader that sees
	 * none read before any thread began to park, and that thread's look
	 * at the work after its CAS sees what the reader pushed before (the
	 * lock-free offer's Dekker pair). */
	s = tpe__dekker_load(&r->slots);
	for (i = 0; s != NULL && i < r->capacity; i++)
		if (load_state(&s[i]) == state)
			n++;
	return n;
}

size_t
tpe__reserve_parked(const struct tpe__reserve *r)
{
	return count(r, WAITING);
}

size_t
tpe__reserve_handing(const struct tpe__reserve *r)
{
	return count(r, TAKEN);
}

/* Where this thread starts looking: spreads claimers over the slots. */
static size_t
first_slot(const struct tpe__reserve *r)
{
	static TPE__TLS char here;

	return ((uintptr_t)&here >> 6) % r->capacity;
}

/* seq_cst: pairs with the seq_cst store of the pool's state by shutdown
 * (pool.c, set_state_locked), which then wakes the parked threads. */
static bool
claim(struct tpe__reserve_slot *s)
{
	int expect = WAITING;

	return load_state(s) == WAITING &&
	    __atomic_compare_exchange_n(&s->state, &expect, TAKEN, false,
	    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
}

static void
give(struct tpe__reserve_slot *s, struct tpe__task *item)
{
	tpe__mutex_lock(&s->lock);
	s->item = item;
	tpe__cond_signal(&s->cond);
	tpe__mutex_unlock(&s->lock);
}

void (*tpe__reserve_hand_hook)(void); /* reserve.h */

bool
tpe__reserve_hand(struct tpe__reserve *r, struct tpe__task *t,
    const int *state, const bool *paused, bool *cancelled)
{
	struct tpe__reserve_slot *slots = slots_of(r);
	size_t i, k;

	*cancelled = false;
	/* No slots yet: no thread ever parked, none to claim. */
	if (slots == NULL)
		return false;
	i = first_slot(r);
	for (k = 0; k < r->capacity; k++, i = (i + 1) % r->capacity) {
		struct tpe__reserve_slot *s = &slots[i];

		if (!claim(s))
			continue;
		/* After the claim, as Java's execute re-checks after its
		 * offer: a shutdown that came first is seen here, and its
		 * wake-up finds this slot TAKEN and leaves it to us. */
		if (__atomic_load_n(state, __ATOMIC_SEQ_CST) != TPE__RUNNING) {
			give(s, &nothing);
			*cancelled = true;
			return false;
		}
		/* seq_cst: pairs with tpe_pause's store (pool.c,
		 * set_paused_locked). A pause after this look is caught by
		 * the owner, which holds the task until resume. */
		if (__atomic_load_n(paused, __ATOMIC_SEQ_CST)) {
			give(s, &nothing);
			return false;
		}
		if (tpe__reserve_hand_hook != NULL)
			tpe__reserve_hand_hook();
		give(s, t);
		return true;
	}
	return false;
}

bool
tpe__reserve_request(struct tpe__reserve *r)
{
	size_t want = __atomic_load_n(&r->want, __ATOMIC_RELAXED);

	while (want + tpe__reserve_parked(r) < r->capacity &&
	    !__atomic_compare_exchange_n(&r->want, &want, want + 1, true,
	    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
		;
	return __atomic_load_n(&r->want, __ATOMIC_SEQ_CST) > 0;
}

size_t
tpe__reserve_wanted(const struct tpe__reserve *r)
{
	/* Relaxed: a hint; the start it leads to is decided under L. */
	return __atomic_load_n(&r->want, __ATOMIC_RELAXED);
}

bool
tpe__reserve_wanted_locked(struct tpe__reserve *r, struct tpe__mutex *lock,
    bool *reserved)
{
	size_t want;

	TPE__ASSERT_HELD(lock);
	if (*reserved)
		return true;
	want = __atomic_load_n(&r->want, __ATOMIC_RELAXED);
	while (want > 0) {
		if (__atomic_compare_exchange_n(&r->want, &want, want - 1,
		    true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
			/* A want is served: one thread started for the
			 * wants (if any) is accounted for. */
			if (r->starting > 0)
				r->starting--;
			*reserved = true;
			return true;
		}
	}
	return false;
}

/* The owner's CAS WAITING -> EMPTY: false when a claimer won the slot. */
static bool
leave(struct tpe__reserve_slot *s)
{
	int expect = WAITING;

	return __atomic_compare_exchange_n(&s->state, &expect, EMPTY, false,
	    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
}

/* A free slot, claimed for the caller as WAITING, or NULL (all taken, or
 * no memory for the slots: the thread does not park). L held. */
static struct tpe__reserve_slot *
occupy(struct tpe__reserve *r, struct tpe__mutex *lock)
{
	struct tpe__reserve_slot *slots = tpe__reserve_slots_locked(r, lock);
	size_t i, k;

	if (slots == NULL)
		return NULL;
	i = first_slot(r);
	for (k = 0; k < r->capacity; k++, i = (i + 1) % r->capacity) {
		struct tpe__reserve_slot *s = &slots[i];
		int expect = EMPTY;

		/* Release: a claimer that sees WAITING sees an empty item. */
		if (__atomic_compare_exchange_n(&s->state, &expect, WAITING,
		    false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
			return s;
	}
	return NULL;
}

/* How long a parked thread watches its slot before it sleeps: a hand-off
 * to a sleeping thread costs a wake-up and a context switch (several
 * microseconds), one to a spinning thread a cache line. Like the locked
 * engine's takers, and only with more than one CPU (base/park.h). */
int64_t tpe__reserve_spin_ns = 20000; /* A: relaxed; reserve.h */

static void
spin_until_claimed(const struct tpe__reserve_slot *s, unsigned epoch,
    const struct tpe__reserve *r)
{
	struct tpe__backoff b;

	tpe__backoff_init(&b, tpe__hint_load(&tpe__reserve_spin_ns), -1, 0);
	/* Acquire pairs with the claimer's CAS to TAKEN; the item itself is
	 * read under the slot lock afterwards. */
	while (load_state(s) == WAITING &&
	    tpe__hint_load(&r->epoch) == epoch &&
	    tpe__backoff_step(&b) != TPE__BACKOFF_SPENT)
		;
}

struct tpe__task *
tpe__reserve_park_locked(struct tpe__reserve *r,
    const struct tpe__reserve_env *env, bool *reserved)
{
	struct tpe__reserve_slot *s;
	struct tpe__task *item;
	unsigned epoch;
	int64_t deadline;
	bool stay = true;

	TPE__ASSERT_HELD(env->lock);
	s = occupy(r, env->lock);
	if (s == NULL) {
		*reserved = false;
		return NULL;
	}
	/* Read under the pool lock, after get_task's checks of the pool: a
	 * change made since (under the same lock) bumps it. */
	epoch = __atomic_load_n(&r->epoch, __ATOMIC_RELAXED);
	deadline = env->keep_alive_ns > 0 ?
	    tpe__deadline(env->keep_alive_ns) : -1;
	/*
	 * Dekker with the lock-free offer (engine/locked.c): the seq_cst CAS
	 * to WAITING above, then the seq_cst look at the inbox in
	 * work_waiting; the submitter pushes, then counts parked threads.
	 * Either this sees its task and does not park, or it sees this
	 * thread parked and wakes it.
	 */
	if (env->work_waiting(env->ctx) && leave(s))
		return NULL;
	tpe__mutex_unlock(env->lock);

	spin_until_claimed(s, epoch, r);
	tpe__mutex_lock(&s->lock);
	while (s->item == NULL) {
		int rc;

		if (deadline != -2 &&
		    __atomic_load_n(&r->epoch, __ATOMIC_RELAXED) != epoch) {
			if (leave(s))
				break; /* re-check the pool, stay reserved */
			deadline = -2; /* claimed: the item is coming */
		}
		rc = tpe__cond_wait_until(&s->cond, &s->lock,
		    deadline >= 0 ? deadline : -1);
		if (rc == ETIMEDOUT && s->item == NULL) {
			if (leave(s)) {
				stay = false; /* idled out */
				break;
			}
			deadline = -2;
		}
	}
	item = s->item;
	s->item = NULL;
	tpe__mutex_unlock(&s->lock);
	tpe__mutex_lock(env->lock);
	/*
	 * A task handed over as the pool was paused (the claimer looked at
	 * `paused` before tpe_pause set it) waits in before_start for resume
	 * or shutdown, which clears the pause: the worker loop starts it in
	 * this same critical section, so no task starts while paused. The
	 * slot stays TAKEN meanwhile, so tpe_wait_idle counts the task.
	 */
	if (item != NULL && item != &nothing)
		env->before_start(env->ctx);
	/*
	 * The slot stays TAKEN until the pool lock is held again: a task
	 * counts as on its way (tpe__reserve_handing) until the worker loop
	 * counts it in active, in this same critical section, so
	 * tpe_wait_idle never sees the pool idle in between. Only then is
	 * the slot free for the next owner.
	 */
	if (item != NULL)
		__atomic_store_n(&s->state, EMPTY, __ATOMIC_RELEASE);
	*reserved = stay;
	return item == &nothing ? NULL : item;
}

void
tpe__reserve_wake_all_locked(struct tpe__reserve *r, struct tpe__mutex *lock)
{
	struct tpe__reserve_slot *slots = slots_of(r);
	size_t i;

	TPE__ASSERT_HELD(lock);
	__atomic_add_fetch(&r->epoch, 1, __ATOMIC_RELAXED);
	for (i = 0; slots != NULL && i < r->capacity; i++) {
		struct tpe__reserve_slot *s = &slots[i];

		if (load_state(s) != WAITING)
			continue;
		/* Under the slot lock: the owner either has not read the
		 * epoch yet, or is waiting and gets this broadcast. */
		tpe__mutex_lock(&s->lock);
		tpe__cond_broadcast(&s->cond);
		tpe__mutex_unlock(&s->lock);
	}
}
