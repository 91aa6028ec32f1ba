/* SPDX-License-Identifier: MIT */
/*
 * task.h - a task's life: made, run on a worker, run in the caller, handed
 * back or discarded, or freed unaccepted (task.c). The node itself is
 * queue/node.h's.
 *
 * Where it sits: lib/pool, under the pool and the engines; it takes a
 * struct tpe__tasks (below), never the pool, and calls the node cache,
 * futures and lib/base.
 *
 * A node is owned by exactly one party at a time: the submitter until the
 * queue (or a worker's first-task slot) takes it, then the queue (under
 * pool->lock), then the worker that dequeued it or the code that removed it
 * (remove, purge, drain). Whoever owns it last ends it through one of the
 * functions below, which all return the node to its pool's return stack
 * the same way.
 */
#ifndef TPE_TASK_H
#define TPE_TASK_H

#include <stdbool.h>
#include <stddef.h>

#include "base/sync.h"
#include "queue/node.h"
#include "tpe.h"

/* ---- a task's life (task.c) ------------------------------------------ */

struct tpe__node_returns;
struct tpe_attr;

/*
 * What a task's life needs of its pool, and all it gets (embedded in the
 * pool as pool->tasks, all I): the return stack its nodes end on, and the
 * attributes' hooks and discard callback. `pool` is only passed on to the
 * user's callbacks.
 */
struct tpe__tasks {
	tpe_t *pool;
	const struct tpe_attr *attr;
	struct tpe__node_returns *returns;
	/*
	 * A wrapping task: a node whose fn is wrap_fn carries a wrapper of
	 * the user's task (lib/sched's record). Before the hooks, wrap_begin
	 * decides whether the user's task will run and gives the user's
	 * pair, which the hooks see instead of the wrapper's; when it says
	 * no, the hooks are not called and fn(arg) hands the task back
	 * (tpe_attr_set_task_hooks(3)). Both NULL for no wrapping.
	 */
	tpe_fn wrap_fn;
	bool (*wrap_begin)(void *arg, tpe_fn *fn, void **user_arg);
};

/*
 * A set of tasks (a task group, compose/group.c; a parallel loop's
 * helpers, compose/apply.c), reached from each member's node (node.h's
 * `set`): what a task's life asks of it. A node joins a set when it is
 * made (tpe__tls_task_set, below) and from then on ends exactly once, and
 * each way it ends calls `ended` exactly once, after its last use of the
 * node and of the user's callbacks for it: run on a worker (after the
 * after-hook) or in the caller (CALLER_RUNS), handed back (shutdown-now,
 * a discarding rejection, DISCARD_OLDEST's victim, purge), given to a
 * custom rejection handler that took it, or freed unaccepted (a refusal)
 * or by tpe_remove. So a submitter that finds its node made (the TLS
 * consumed) and the submission refused need not undo anything: `ended`
 * did.
 */
struct tpe__set;
struct tpe__set_ops {
	/* Whether a member about to run is to be handed back instead (to
	 * the pool's discard callback, the node ending as handed back); NULL
	 * for never. Any thread, no lock; called before the hooks. */
	bool (*cancelled)(const struct tpe__set *s);
	/* The member's end, once per node (above). May run the user's code
	 * (a group's notify callback): false when it forked there and this
	 * is the child (tpe__not_forked below). Any thread, no lock held. */
	bool (*ended)(struct tpe__set *s);
	/* The members are the library's own fn/arg pairs: a member handed
	 * back reaches no user callback (discard, drained, a custom
	 * rejection handler refuses it without being asked). */
	bool internal;
};
struct tpe__set {
	const struct tpe__set_ops *ops; /* I */
};

/*
 * The set the next node this thread makes joins, or NULL: set right
 * before a submission (tpe_execute) and consumed (back to NULL) by the
 * node it makes, so that the call's one node, and no other node made
 * later on this thread (a rejection handler that submits elsewhere),
 * joins. Still set after the call: no node was made (refused first, or
 * ENOMEM), and the submitter clears it. This thread only.
 */
extern TPE__TLS struct tpe__set *tpe__tls_task_set;

/* The pool whose callback (hand-back, terminated hook) this thread runs
 * now, or NULL (tpe_await_termination's EDEADLK). */
extern TPE__TLS tpe_t *tpe__tls_hook_pool;

/* A node for a new task (node_cache.c: no lock, rarely malloc); NULL: ENOMEM. */
struct tpe__task *tpe__task_new(const struct tpe__tasks *ts, tpe_fn fn, void *arg,
    struct tpe_future *f, const void *owner);

/* Ends a node that was never accepted; its future (if any) is untouched:
 * the submitting call still owns it. */
void tpe__task_free(const struct tpe__tasks *ts, struct tpe__task *t);

/*
 * What a call that runs user code (a task, a hook, a discard callback)
 * returns: true, carry on; false, the process forked inside that code and
 * this is the child, which must touch nothing of the pool (tpe(7), "Fork").
 */
typedef bool tpe__not_forked;

/*
 * Runs an accepted task on a worker with the task hooks; a future that was
 * cancelled in the queue does not run and goes to the discard callback.
 * Ends the node. Returns false when the process forked inside user code
 * and this is the child: the caller must then touch nothing of the pool.
 */
tpe__not_forked tpe__task_run(const struct tpe__tasks *ts, struct tpe__task *t);

/*
 * The node whose user code (hooks, task) this thread runs now, or NULL;
 * this thread only. In the child of a fork() from that user code, nothing
 * ends the node any more (the run returns false and touches nothing):
 * tpe__task_atfork_child ends it there (its chunk is freed if nothing
 * else holds it: node_cache.c).
 */
extern TPE__TLS struct tpe__task *tpe__tls_running_node;

/* In the child of fork(), in the forking thread: ends the node of the
 * task that forked (see above) and the spent nodes it kept (below). The
 * future it may carry is left alone: the returning run still reads it
 * (future.h). */
void tpe__task_atfork_child(void);

/*
 * The same, but the node stays the caller's (its contents are spent): a
 * worker that runs a batch ends all its nodes at once afterwards, with
 * tpe__task_end_chain: one atomic operation per chunk of nodes
 * (node_cache.c), not per task.
 */
tpe__not_forked tpe__task_run_keep(const struct tpe__tasks *ts,
    struct tpe__task *t);
/*
 * A worker that runs one task at a time (the locked engine) keeps its
 * spent nodes (tpe__task_run_keep's) and ends them KEPT_MAX (32) at a time
 * with one atomic operation instead of two per task on the return
 * stack's line, which every worker writes. It flushes them before it
 * waits, parks or exits, so that an idle worker holds none; the child of
 * a fork frees the forking thread's (tpe__task_atfork_child). This thread
 * only.
 */
void tpe__task_keep(const struct tpe__tasks *ts, struct tpe__task *t);
void tpe__task_flush_kept(const struct tpe__tasks *ts);

/* Ends n spent nodes linked from first through their next fields. */
void tpe__task_end_chain(const struct tpe__tasks *ts, struct tpe__task *first,
    size_t n);

/* Runs an accepted task in the calling thread, without hooks
 * (TPE_REJECT_CALLER_RUNS). Ends the node. */
void tpe__task_run_inline(const struct tpe__tasks *ts, struct tpe__task *t);

/*
 * Disposes of an accepted task that will never run: its future (if any) is
 * cancelled, `cb` (if not NULL) gets it, the node ends. false: forked in
 * `cb`, this is the child (see tpe__task_run).
 */
tpe__not_forked tpe__task_hand_back(const struct tpe__tasks *ts,
    struct tpe__task *t, tpe_handback_fn cb, void *ctx);
/* The same through the pool's discard callback. */
tpe__not_forked tpe__task_discard(const struct tpe__tasks *ts,
    struct tpe__task *t);
/* Hands back every node of l, marking this thread as one that termination
 * waits for; false (the rest not handed back) after a fork in `cb`. */
tpe__not_forked tpe__task_hand_back_list(const struct tpe__tasks *ts,
    struct tpe__task_list *l, tpe_handback_fn cb, void *ctx);

/*
 * Gives a rejected task to a custom rejection handler as a pair fn(arg): a
 * tpe_submit task as a pair that runs the callable and completes the
 * future. 0: the handler took it and the node ended; else the handler's
 * error, and the caller still owns t.
 */
int tpe__task_offer_to_handler(const struct tpe__tasks *ts, struct tpe__task *t,
    tpe_reject_fn handler, void *ctx);

#endif /* TPE_TASK_H */
