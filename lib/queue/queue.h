/* SPDX-License-Identifier: MIT */
/*
 * queue.h - the internal work-queue interface.
 *
 * Design notes
 * ------------
 * A queue is a table of operations over struct tpe__queue. Every operation
 * is called with the owning pool's lock held (L: pool->lock): the queue has
 * no lock of its own. That is deliberate: the pool decides "queue, grow or
 * reject" and a worker decides "take, wait or exit" under one lock, so no
 * decision reads a counter another thread is halfway through changing.
 * Tomcat's and Dubbo's scale-first pools read "is a worker idle" and
 * "may this worker exit" from different counters under different locks,
 * and lost or stranded tasks in the gap (policy_scale_first.c).
 *
 * Waiting is not a queue operation: tpe__queue_take() waits on the pool's
 * condition variable and counts the waiting worker in q->takers while it
 * waits. Queue kinds whose offer depends on waiting takers (hand-off,
 * scale-first) read that count.
 *
 * The one exception to "under the lock" is offer_lockfree, which a kind
 * that never refuses (the unbounded queue) may provide: submitters push
 * there without pool->lock (tpe_execute's fast path, pool.h), and the
 * nodes join the queue proper the next time a lock holder polls, sizes or
 * removes. Everything that decides on emptiness under the lock therefore
 * sees those nodes. Two decisions a lock-free offer could otherwise slip
 * past are made in the Dekker pattern, a seq_cst store followed by a
 * seq_cst load on each side (pending() is the load on the lock side):
 *   - a worker about to sleep: q->sleepers++ (store), then pending()
 *     (load) before it waits; the submitter pushes (RMW), then loads
 *     q->takers and q->sleepers (tpe__queue_sleeper_needed) and, when no
 *     awake taker will look, wakes a sleeper under the lock;
 *   - a worker about to exit: pool->wc-- (store), then the queue's size
 *     (load); the submitter pushes, then loads pool->wc (worker.c).
 *
 * Wake-ups follow Java's LinkedBlockingQueue: an offer wakes a sleeper
 * only when no awake taker (spinning, or on its way to sleep, which looks
 * once more) will see the task, and a lock-free offer only when its push
 * found the inbox empty (a later push rides on the wake-up of the first);
 * a worker that takes a task wakes the next sleeper when tasks remain that
 * no awake taker will take (the cascade, worker.c). At most one taker
 * spins at a time.
 *
 * A kind may also run its own workers (the per-worker stacks,
 * queue_per_worker.c): then it takes tasks without the lock through its
 * own submit, its workers run its worker_loop instead of get_task and
 * never wait on the pool's condition variable, and the pool's waits and
 * counts ask it (busy, counts, wake_all): the optional ops at the end of
 * struct tpe__queue_ops. The pool's locked paths (offer, poll, the
 * condition variable, q->takers) are then unused, except remove_if for
 * the drains of shutdown-now and fork.
 *
 * Invariants:
 *   - offer() either takes ownership of the node and returns 0, or returns
 *     EAGAIN and leaves ownership with the caller; offer_lockfree() always
 *     takes it;
 *   - poll() returns the oldest node (FIFO, lock-free offers in the order
 *     their pushes took effect, after every node offered under the lock
 *     before they were absorbed) or NULL when empty;
 *   - remove_if() keeps the order of the nodes it leaves.
 */
#ifndef TPE_QUEUE_H
#define TPE_QUEUE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/sync.h"
#include "pool/task.h"

struct tpe__queue;

typedef bool (*tpe__task_match_fn)(const struct tpe__task *t, void *ctx);

struct tpe__queue_ops {
	const char *name;
	/* Takes t (0) or refuses it (EAGAIN: full, or no taker for hand-off). */
	int (*offer)(struct tpe__queue *q, struct tpe__task *t);
	/* Optional: offer bypassing a policy's rule, capacity only (a decorator
	 * such as scale-first's); NULL means offer. */
	int (*force)(struct tpe__queue *q, struct tpe__task *t);
	/* The oldest node, or NULL. */
	struct tpe__task *(*poll)(struct tpe__queue *q);
	/* How many nodes the queue holds (lock-free offers included). */
	size_t (*size)(struct tpe__queue *q);
	/* How many more offers could succeed now; SIZE_MAX when unbounded. */
	size_t (*remaining)(const struct tpe__queue *q);
	/* Moves up to max nodes matching `match` (oldest first) to out. */
	size_t (*remove_if)(struct tpe__queue *q, tpe__task_match_fn match,
	    void *ctx, size_t max, struct tpe__task_list *out);
	/* Frees the queue; it must be empty. */
	void (*destroy)(struct tpe__queue *q);
	/* Optional, called WITHOUT pool->lock, from any number of threads:
	 * takes t, never refuses; returns whether no other lock-free offer
	 * was waiting to join the queue. A seq_cst read-modify-write. */
	bool (*offer_lockfree)(struct tpe__queue *q, struct tpe__task *t);
	/* Optional, without the lock: whether lock-free offers wait to join
	 * the queue. A seq_cst load, pairing with offer_lockfree's push. */
	bool (*pending)(const struct tpe__queue *q);
	/* Optional: size() == 0 without the cost of size() (for the linked
	 * queue: without absorbing the inbox). */
	bool (*is_empty)(struct tpe__queue *q);
	/* Optional: the node a discard-oldest policy may drop, taken out, or
	 * NULL; absent means poll(). The hand-off queue has none: its nodes
	 * are already given to the waiting workers that will poll them. */
	struct tpe__task *(*drop_oldest)(struct tpe__queue *q);

	/*
	 * A kind that runs its own workers (the per-worker stacks,
	 * queue_per_worker.c): it takes tasks without pool->lock and its
	 * workers never wait on the pool's condition variable, so the pool
	 * hands over to it at the few places below. Optional, all or none;
	 * the other kinds leave them NULL and the pool's paths are unchanged.
	 */
	/* tpe_create, once the pool is set up, L not held: the kind learns
	 * its pool (before any worker starts). 0 or an errno value. */
	int (*attach)(struct tpe__queue *q, tpe_t *pool);
	/* tpe_execute and tpe_submit, L not held, any thread: all of the
	 * dispatch. 0: the pool took the task; else (ECANCELED, ENOMEM) it
	 * did not, and the caller keeps fn/arg and f. */
	int (*submit)(struct tpe__queue *q, tpe_fn fn, void *arg,
	    struct tpe_future *f);
	/* worker_main, L not held: the worker's whole life between its
	 * start and its exit, in place of get_task; it returns once the
	 * worker must exit (worker.c then gives up its place in wc), or
	 * false when the process forked in user code (worker.c, forked()). */
	bool (*worker_loop)(struct tpe__queue *q);
	/* wake_workers_locked, L held: the pool's state, its paused flag or
	 * its configuration changed; wakes the kind's sleeping workers so
	 * that they look again. */
	void (*wake_all)(struct tpe__queue *q);
	/* Any thread, no lock: whether a worker of the kind holds or runs a
	 * task (tpe_wait_idle's "nothing running"). Made of seq_cst loads,
	 * called after is_empty (the kind says why that order). */
	bool (*busy)(const struct tpe__queue *q);
	/* tpe_get_stats, L held: the counts of the kind's workers, which do
	 * not touch pool->active and pool->completed (no lock per task). */
	void (*counts)(const struct tpe__queue *q, size_t *active,
	    uint64_t *completed);
	/* The pool is fixed: core == max, all workers started by tpe_create
	 * and never leaving before shutdown; tpe_set_pool_size and
	 * tpe_set_allow_core_timeout refuse changes (EINVAL). */
	bool fixed_pool;
	/* remove_if supports only "every task" (the drains of shutdown-now
	 * and fork): tpe_remove and tpe_purge return ENOTSUP. */
	bool drain_only;
};

struct tpe__queue {
	const struct tpe__queue_ops *ops;
	size_t takers;   /* L, A: workers waiting in tpe__queue_take() */
	size_t sleepers; /* L, A: those of them asleep on the condition
			  * variable; the lock-free offer reads it (above) */
	unsigned offers; /* A: bumped after each accepted offer (L held);
			  * spinning takers read it without the lock */
};

/* After an offer succeeded (L held): wakes spinning takers. */
static inline void
tpe__queue_offered(struct tpe__queue *q)
{
	/* Release pairs with the acquire load in the spin of tpe__queue_take;
	 * the spinner then takes the lock, which orders the node itself. */
	__atomic_store_n(&q->offers, q->offers + 1, __ATOMIC_RELEASE);
}

/* Whether a submitter must signal the condition variable after an offer:
 * only when more tasks wait than spinning takers will pick up. L held. */
static inline bool
tpe__queue_needs_signal(struct tpe__queue *q)
{
	return q->sleepers > 0 &&
	    q->ops->size(q) > q->takers - q->sleepers;
}

/*
 * Returns the queue's oldest task; when there is none, waits once (counted
 * in q->takers) until woken or until `deadline_ns` (absolute monotonic,
 * negative = none) and returns NULL, so that the caller re-checks its own
 * state (paused, stopped) before it calls again, which polls first. *rc is
 * ETIMEDOUT when the deadline passed, else 0. Called with `lock` (the pool
 * lock) held.
 *
 * With `spin`, the wait spins briefly with the lock dropped, watching
 * q->offers, and returns after the spin without sleeping (so the caller
 * re-checks the pool's state, which may have changed unseen); *rc is then
 * 0 when an offer was seen (another taker may have won it: spinning again
 * is worth it) or EAGAIN when none came. Without `spin`, the wait sleeps
 * on `cond`.
 */
struct tpe__task *tpe__queue_take(struct tpe__queue *q,
    struct tpe__mutex *lock, pthread_cond_t *cond, int64_t deadline_ns,
    bool spin, int *rc);

int tpe__queue_linked_create(struct tpe__queue **q);
int tpe__queue_array_create(struct tpe__queue **q, size_t capacity);
int tpe__queue_handoff_create(struct tpe__queue **q);
/* A stack for each of `workers` workers (queue_per_worker.c). */
int tpe__queue_per_worker_create(struct tpe__queue **q, size_t workers);
/* White-box tests: how long an idle per-worker worker spins before it
 * sleeps (ns; 0: at once; set before tpe_create), and how many of a
 * per-worker queue's workers sleep or are going to. */
extern int64_t tpe__per_worker_spin_ns;
size_t tpe__queue_per_worker_sleepers(const struct tpe__queue *q);
/* White-box tests: called (when set) by a thief after it marked itself
 * awake and before it takes another worker's tasks, so that a test can
 * let the owner take them first (the steal then fails). */
extern void (*tpe__per_worker_steal_hook)(void);

/*
 * After a lock-free offer, without the lock: whether a sleeping worker
 * must be woken because no awake taker will look at the queue. takers is
 * loaded before sleepers, so a taker counted as awake here either is, or
 * stored its sleepers increment after this load and so sees the node in
 * its last look (the Dekker pair above).
 */
static inline bool
tpe__queue_sleeper_needed(const struct tpe__queue *q)
{
	size_t takers = __atomic_load_n(&q->takers, __ATOMIC_SEQ_CST);
	size_t sleepers = __atomic_load_n(&q->sleepers, __ATOMIC_SEQ_CST);

	return sleepers > 0 && takers <= sleepers;
}

/* Whether offer_lockfree'd nodes wait to join the queue; false for kinds
 * without lock-free offers. Any thread. */
static inline bool
tpe__queue_pending(const struct tpe__queue *q)
{
	return q->ops->pending != NULL && q->ops->pending(q);
}

/*
 * The linked queue, shared with the hand-off queue (which never offers
 * lock-free, so its inbox stays empty). `inbox` is a Treiber stack that
 * submitters push onto without the lock; a lock holder takes it whole with
 * one exchange, reverses it and appends it to `list`. It sits on a cache
 * line of its own: submitters write it, workers write the rest.
 */
#define TPE__CACHE_LINE 64
struct tpe__queue_linked {
	struct tpe__queue base;
	struct tpe__task_list list; /* L */
	char pad_[TPE__CACHE_LINE];
	struct tpe__task *inbox;    /* A: pushed lock-free, emptied under L */
	char pad2_[TPE__CACHE_LINE - sizeof(struct tpe__task *)];
};
int tpe__linked_offer(struct tpe__queue *q, struct tpe__task *t);
struct tpe__task *tpe__linked_poll(struct tpe__queue *q);
size_t tpe__linked_size(struct tpe__queue *q);
size_t tpe__linked_remove_if(struct tpe__queue *q, tpe__task_match_fn match,
    void *ctx, size_t max, struct tpe__task_list *out);
void tpe__linked_destroy(struct tpe__queue *q);

static inline int
tpe__queue_force(struct tpe__queue *q, struct tpe__task *t)
{
	return q->ops->force != NULL ? q->ops->force(q, t) : q->ops->offer(q, t);
}

static inline struct tpe__task *
tpe__queue_drop_oldest(struct tpe__queue *q)
{
	return q->ops->drop_oldest != NULL ? q->ops->drop_oldest(q) :
	    q->ops->poll(q);
}

static inline bool
tpe__queue_is_empty(struct tpe__queue *q)
{
	return q->ops->is_empty != NULL ? q->ops->is_empty(q) :
	    q->ops->size(q) == 0;
}

/* Whether workers of a kind that runs its own hold or run a task. */
static inline bool
tpe__queue_busy(const struct tpe__queue *q)
{
	return q->ops->busy != NULL && q->ops->busy(q);
}

#endif /* TPE_QUEUE_H */
