/* SPDX-License-Identifier: MIT */
/*
 * engine.h - the engine interface: what runs a pool's workers and carries a
 * submitted task to one of them.
 *
 * Design notes
 * ------------
 * Where it sits: the pool (lib/pool) owns the object tpe_t, its lifecycle,
 * its sizes, its threads and its statistics; an engine owns the path of a
 * task from tpe_execute to the worker that runs it, and the loop of each
 * worker. The pool calls an engine only through these ops, every one of
 * them mandatory, and an engine calls back into the pool's worker and
 * lifecycle functions (pool.h): the pool and its own worker loop, as in
 * every pool. Two engines:
 *   - the locked engine (locked.c): Java's execute over a queue kind
 *     (lib/queue) under the pool lock, with the unbounded queue's
 *     lock-free step 2, a policy (lib/policy) and reserved threads;
 *   - the stacks engine (stacks.c, stacks_idle.c, stacks_blocking.c;
 *     its state in stacks.h): a lock-free stack per worker for many tiny
 *     tasks; a fixed pool that never refuses.
 * Which engine and which queue kind a pool gets is one row of kinds.c.
 *
 * What a pool may ask of its engine is its capabilities word (caps, TPE__
 * CAP_*), read from the row of kinds.c: attr.c validates attributes with it
 * and the pool refuses what an engine cannot do, in one place each.
 *
 * Locks: "L" is pool->lock (the legend: doc/architecture.md; the lock
 * order: base/sync.h).
 */
#ifndef TPE_ENGINE_H
#define TPE_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/sync.h"
#include "policy/policy.h"
#include "pool/attr.h"
#include "pool/task.h"
#include "queue/queue.h"
#include "tpe.h"

/* ---- capabilities ----------------------------------------------------- */

/* The pool is fixed: core == max, every worker started by tpe_create and
 * none leaving before shutdown; resizing and core timeout are refused. */
#define TPE__CAP_FIXED        (1u << 0)
/* drain_locked supports only "every task": tpe_remove and tpe_purge
 * return ENOTSUP. */
#define TPE__CAP_DRAIN_ONLY   (1u << 1)
/* No reserved threads (tpe_try_execute never finds one). */
#define TPE__CAP_NO_RESERVE   (1u << 2)
/* Storage never refuses a task: with a policy that does not gate step 2,
 * a submission is never rejected for saturation. */
#define TPE__CAP_UNBOUNDED    (1u << 3)
/* Tasks run in no promised order (tpe_attr_set_queue(3)). */
#define TPE__CAP_UNORDERED    (1u << 4)
/* The policy may be scale-first (a gate on the queue step). */
#define TPE__CAP_POLICIES     (1u << 5)
/* The kind takes a capacity (> 0); the others take 0. */
#define TPE__CAP_CAPACITY     (1u << 6)
/* The kind takes any capacity: 0 unbounded, > 0 bounded (the priority
 * kind). The engine asks its queue (remaining) which one it is. */
#define TPE__CAP_CAPACITY_ANY (1u << 7)

/* ---- the kinds table (kinds.c) ---------------------------------------- */

enum tpe__engine_id {
	TPE__ENGINE_LOCKED,
	TPE__ENGINE_STACKS
};

struct tpe__kind {
	const char *name;
	enum tpe__engine_id engine;
	unsigned caps;
	/* The storage for the locked engine; NULL for an engine that keeps
	 * its own. 0 or an errno value. */
	int (*create_queue)(struct tpe__queue **q, const struct tpe_attr *a);
};

/* The row of a queue kind, or NULL for an unknown kind. */
const struct tpe__kind *tpe__kind_of(enum tpe_queue_kind kind);

/* ---- the engine interface --------------------------------------------- */

/*
 * The priority of the submission the calling thread is making (tpe_execute_
 * priority(3)), a thread-local so that the ops below keep one signature
 * for every call: the priority calls (pool/priority.c) set it around the
 * plain call and reset it to 0 after; the locked engine's submit and
 * submit_wait take it (tpe__submit_priority_take) before any user code can
 * run on this thread within the call (a caller-runs task, a rejection
 * handler, which may submit again), and carry it as an argument from there
 * to the queue's offer (queue.h, tpe__queue_offer). A scheduled task's
 * priority is its record's (tpe__sched_priority). The stacks engine, whose
 * tasks run in no order, ignores it.
 */
extern TPE__TLS int tpe__submit_priority; /* O: each thread its own */

static inline int
tpe__submit_priority_take(void)
{
	int p = tpe__submit_priority;

	if (p != 0)
		tpe__submit_priority = 0;
	return p;
}

struct tpe__engine;

/* What tpe_get_stats reports of the engine's workers and tasks. */
struct tpe__engine_counts {
	size_t active;      /* workers running a task */
	size_t idle;        /* workers waiting for one */
	uint64_t completed; /* tasks finished */
	size_t queued;      /* tasks accepted and not yet started */
	uint64_t submitted; /* tasks the engine counted as accepted itself,
			     * beyond pool->submitted (the stacks engine
			     * counts per stack); read after the counts
			     * above, before pool->submitted */
};

/* How a worker's loop ended (worker_loop). FORKED_CHILD is 0, false: the
 * process forked in user code and this thread is the child's copy of
 * the worker, which must touch nothing of the pool. */
enum tpe__worker_end {
	TPE__WORKER_FORKED_CHILD = 0,
	TPE__WORKER_EXIT = 1
};

struct tpe__engine_ops {
	const char *name;
	/*
	 * attach: tpe_create, L not held, before any worker starts: the
	 * engine learns its pool. 0 or an errno value (the pool is then
	 * destroyed).
	 */
	int (*attach)(struct tpe__engine *e, tpe_t *pool);
	/*
	 * submit: tpe_execute and tpe_submit, L not held, any thread: the
	 * whole dispatch. 0: the pool (or a rejection verdict) took the
	 * task; else an errno value (ECANCELED, EAGAIN, ENOMEM, or a custom
	 * handler's) and the caller keeps fn/arg and f.
	 */
	int (*submit)(struct tpe__engine *e, tpe_fn fn, void *arg,
	    struct tpe_future *f);
	/*
	 * submit_wait: tpe_execute_wait and tpe_submit_wait, L not held:
	 * submit, but where submit would reject the task for saturation,
	 * wait for room until the absolute monotonic deadline_ns (negative:
	 * none; timeout_ns == 0: do not wait). 0, ETIMEDOUT, EDEADLK, or
	 * submit's errors (never a rejection verdict's); the caller keeps
	 * the task on every error.
	 */
	int (*submit_wait)(struct tpe__engine *e, tpe_fn fn, void *arg,
	    struct tpe_future *f, int64_t timeout_ns);
	/*
	 * try_submit: tpe_try_execute, L not held, the pool RUNNING and not
	 * paused when the caller looked: hands the task straight to an idle
	 * reserved worker, or refuses at once (EAGAIN; ECANCELED when the
	 * pool was shut down meanwhile; ENOMEM) and the caller keeps it; a
	 * miss may ask for a reserved worker.
	 */
	int (*try_submit)(struct tpe__engine *e, tpe_fn fn, void *arg);
	/*
	 * worker_loop: a worker's life between its start and its exit, L
	 * held on entry and on return (dropped while tasks run); `first` is
	 * the task it was started with, or NULL. Returns TPE__WORKER_EXIT
	 * once the worker has given up its place in wc and must exit, or
	 * TPE__WORKER_FORKED_CHILD (L not held; touch nothing of the pool).
	 */
	enum tpe__worker_end (*worker_loop)(struct tpe__engine *e,
	    struct tpe__task *first);
	/*
	 * wake_all_locked: L held. The pool's state, its paused flag or its
	 * configuration changed: every idle worker looks again.
	 */
	void (*wake_all_locked)(struct tpe__engine *e);
	/*
	 * idle_locked: L held. No task is queued, held by a worker or
	 * running (tpe_wait_idle's condition, with the reserve's hand-offs,
	 * which the pool adds). An engine whose workers run without L gives
	 * its reason why this answer cannot miss a task (stacks_idle.c).
	 */
	bool (*idle_locked)(struct tpe__engine *e);
	/* counts_locked: L held. The statistics of the engine's workers. */
	void (*counts_locked)(struct tpe__engine *e,
	    struct tpe__engine_counts *c);
	/*
	 * drain_locked: L held. Moves up to max queued tasks for which match
	 * is true (every task when match is NULL), oldest first where the
	 * engine has an order, to out: the caller owns them. With
	 * TPE__CAP_DRAIN_ONLY, match is always NULL.
	 */
	size_t (*drain_locked)(struct tpe__engine *e, tpe__task_match_fn match,
	    void *ctx, size_t max, struct tpe__task_list *out);
	/* forget_locked: L held, in the child of fork(): the workers do not
	 * exist here; forget them and every count of them. */
	void (*forget_locked)(struct tpe__engine *e);
	/* destroy: no lock; the pool has terminated. Frees the engine and
	 * its storage, which is empty. */
	void (*destroy)(struct tpe__engine *e);
	/*
	 * blocking: L not held, on a worker of this pool running a task: it
	 * enters (begin) or leaves its outermost blocking section
	 * (pool/blocking.h). begin: 0, or EAGAIN / ENOMEM when a worker was
	 * needed to stand in for it and none could be started (it counts as
	 * blocked anyway); end: 0.
	 */
	int (*blocking)(struct tpe__engine *e, bool begin);
};

struct tpe__engine {
	const struct tpe__engine_ops *ops; /* I */
	unsigned caps;                     /* I: the kind's TPE__CAP_* */
};

/*
 * The engine for the attributes' queue kind, with the policy p (copied).
 * 0, ENOMEM, or the queue kind's error.
 */
int tpe__engine_create(const struct tpe_attr *a, const struct tpe__policy *p,
    struct tpe__engine **e);

/* The engines' constructors, one per tpe__engine_id (engine.c). */
int tpe__engine_locked_create(struct tpe__queue *q,
    const struct tpe__policy *p, struct tpe__engine **e);
int tpe__engine_stacks_create(size_t workers, struct tpe__engine **e);

#endif /* TPE_ENGINE_H */
