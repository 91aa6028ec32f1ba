/* SPDX-License-Identifier: MIT */
/*
 * task.c - a task's life: made, then run on a worker, run in the caller,
 * handed back or discarded, or freed unaccepted; each way ends the node
 * the same way, on the pool's return stack (node_cache.c).
 *
 * Design notes
 * ------------
 * A function here that calls user code on a thread that is not the pool's
 * worker first copies what it needs out of the node and ends it: the
 * callback may destroy the pool afterwards where the manual allows it. A
 * worker ends the node after the task (the pool outlives its workers), so
 * that the node goes back warm, and the submitter that reuses it finds it
 * on the return stack at its next allocation.
 *
 * fork() from user code: in the child only the forking thread exists, and
 * the atfork handler (base/fork.c) has marked every pool terminated and
 * reset its counters. A thread that comes back from user code into pool
 * code in the child must therefore touch neither the pool nor the future
 * (whose lock a parent thread may hold): every call into user code here is
 * followed by tpe__forked_since(), and the functions return false so that
 * their caller returns at once too. The rule is in tpe(7), "Fork".
 *
 * Ownership of a future: a task node made by tpe_submit holds the pool's
 * reference to its future; whoever ends the node without handing that
 * reference on (to a custom rejection handler's pair) drops it.
 *
 * Sets (task.h, struct tpe__set). A node made while tpe__tls_task_set is
 * set joins that set, and the TLS goes back to NULL: one node per setting.
 * Every function here that ends a node that is in a set calls the set's
 * `ended` exactly once for it, last: after the node ended and after the
 * user's code for it (the task and its hooks, the discard callback, the
 * rejection handler), so that whoever the set wakes sees all of it
 * (tpe__task_free too: a node freed unaccepted, or taken out by
 * tpe_remove, ended there). A node of a set is read (t->set) while it is
 * still owned, before it ends: after that it may be another task's. A
 * cancelled set's member is handed back instead of run, before its hooks,
 * as a cancelled future is. An internal set's members reach no user
 * callback: hand_back gives them to nobody, and a custom rejection handler
 * is not offered one (the refusal frees it, which ends it).
 */
#include <errno.h>
#include <stdlib.h>

#include "pool/future.h"
#include "base/invocation.h"
#include "pool/attr.h"
#include "base/fork.h"
#include "pool/node_cache.h"
#include "pool/task.h"
#include "metrics/metrics.h"
#include "base/probe.h"
#include "base/tick.h"

TPE__TLS struct tpe__task *tpe__tls_running_node; /* task.h */
TPE__TLS tpe_t *tpe__tls_hook_pool;                /* task.h */
TPE__TLS struct tpe__set *tpe__tls_task_set;       /* task.h */

/* The end of a member of s (NULL: none); false: forked in s's callback. */
static tpe__not_forked
set_ended(struct tpe__set *s)
{
	return s == NULL || s->ops->ended(s);
}

/* Whether a member of s (NULL: none) is to be handed back, not run. */
static bool
set_cancelled(const struct tpe__set *s)
{
	return s != NULL && s->ops->cancelled != NULL && s->ops->cancelled(s);
}

/* The spent nodes this thread keeps (tpe__task_keep), newest first; this
 * thread only. */
#define KEPT_MAX 32
static TPE__TLS struct {
	struct tpe__task *first;
	size_t n;
} kept;

void
tpe__task_atfork_child(void)
{
	struct tpe__task *t, *next;

	if (tpe__tls_running_node != NULL)
		tpe__node_put(NULL, tpe__tls_running_node);
	tpe__tls_running_node = NULL;
	for (t = kept.first; kept.n > 0; t = next, kept.n--) {
		next = t->next;
		tpe__node_put(NULL, t);
	}
	kept.first = NULL;
}

void
tpe__task_keep(const struct tpe__tasks *ts, struct tpe__task *t)
{
	t->next = kept.first;
	kept.first = t;
	if (++kept.n >= KEPT_MAX)
		tpe__task_flush_kept(ts);
}

void
tpe__task_flush_kept(const struct tpe__tasks *ts)
{
	if (kept.n == 0)
		return;
	tpe__node_put_chain(ts->returns, kept.first, kept.n);
	kept.first = NULL;
	kept.n = 0;
}

/* The one way a node ends: back to its pool's return stack. */
static void
end(const struct tpe__tasks *ts, struct tpe__task *t)
{
	tpe__node_put(ts->returns, t);
}

/* Now on the metrics' clock, for a tracer (probe.h); never 0. */
static int64_t
probe_stamp(void)
{
	int64_t now;

	tpe__tick_init();
	now = tpe__tick_now();
	return now != 0 ? now : 1;
}

struct tpe__task *
tpe__task_new(const struct tpe__tasks *ts, tpe_fn fn, void *arg, struct tpe_future *f,
    const void *owner)
{
	struct tpe__task *t = tpe__node_get(ts->returns);

	if (t != NULL) {
		t->next = NULL;
		int64_t now = tpe__metrics_stamp(ts->attr->metrics);

		/* A tracer on task__start wants every task's queue wait
		 * (probe.h): stamp the ones the metrics do not. */
		if (now == 0 && TPE__PROBE_ENABLED(task__start))
			now = probe_stamp();
		TPE__PROBE4(task__submit, ts->pool, ts->attr->name_prefix, fn,
		    f != NULL ? f->arg : arg);

		/* A future's task has no function of its own (node.h). */
		TPE__ASSERT((fn == NULL) == (f != NULL));
		t->fn = fn;
		t->arg = arg;
		t->owner = owner;
		/* One node per setting (task.h); this thread's own. */
		t->set = tpe__tls_task_set;
		if (t->set != NULL)
			tpe__tls_task_set = NULL;
		if (f != NULL) {
			t->u.future = f;
			f->accepted_tick = now;
		} else {
			t->u.accepted_tick = now;
		}
	}
	return t;
}

void
tpe__task_free(const struct tpe__tasks *ts, struct tpe__task *t)
{
	struct tpe__set *s = t->set;

	end(ts, t);
	/* Nothing of the user's ran: no fork to look for. */
	(void)set_ended(s);
}

/* The argument the user gave: the callable's for a tpe_submit task. */
static void *
user_arg(const struct tpe__task *t)
{
	struct tpe_future *f = tpe__task_future(t);

	return f != NULL ? f->arg : t->arg;
}

/* tpe__task_hand_back; with `keep`, the node is left to the caller
 * (tpe__task_run_keep). */
static tpe__not_forked
hand_back(const struct tpe__tasks *ts, struct tpe__task *t, tpe_handback_fn cb, void *ctx,
    bool keep)
{
	struct tpe_future *f = tpe__task_future(t);
	struct tpe__set *s = t->set;
	tpe_fn fn = f != NULL ? NULL : t->fn;
	void *arg = user_arg(t);
	unsigned gen = tpe__fork_gen();

	if (!keep)
		end(ts, t);
	if (f != NULL)
		tpe__future_cancel(f);
	/* The library's own pair is nobody else's to see (Design notes). */
	if (s != NULL && s->ops->internal)
		cb = NULL;
	if (cb != NULL) {
		cb(fn, arg, ctx);
		if (tpe__forked_since(gen))
			return false;
	}
	if (f != NULL)
		tpe__future_unref(f);
	return set_ended(s);
}

tpe__not_forked
tpe__task_hand_back(const struct tpe__tasks *ts, struct tpe__task *t, tpe_handback_fn cb,
    void *ctx)
{
	return hand_back(ts, t, cb, ctx, false);
}

tpe__not_forked
tpe__task_discard(const struct tpe__tasks *ts, struct tpe__task *t)
{
	return tpe__task_hand_back(ts, t, ts->attr->discard,
	    ts->attr->discard_ctx);
}

tpe__not_forked
tpe__task_hand_back_list(const struct tpe__tasks *ts, struct tpe__task_list *l,
    tpe_handback_fn cb, void *ctx)
{
	/* Termination waits for this list (pool->handing_back): a callback
	 * that waits for it would wait for itself (tpe_await_termination's
	 * EDEADLK). */
	tpe_t *outer = tpe__tls_hook_pool;
	struct tpe__task *t;
	bool ok = true;

	tpe__tls_hook_pool = ts->pool;
	while (ok && (t = tpe__task_list_pop(l)) != NULL)
		ok = tpe__task_hand_back(ts, t, cb, ctx);
	/* Forked in a callback: the rest are the parent's to hand back. */
	tpe__tls_hook_pool = outer;
	return ok;
}

void
tpe__task_run_inline(const struct tpe__tasks *ts, struct tpe__task *t)
{
	struct tpe_future *f = tpe__task_future(t);
	struct tpe__set *s = t->set;
	tpe_fn fn = t->fn;
	void *arg = t->arg;
	unsigned gen = tpe__fork_gen();

	if (set_cancelled(s)) {
		(void)tpe__task_discard(ts, t);
		return;
	}
	end(ts, t);
	if (f == NULL)
		fn(arg);
	else if (tpe__future_run(f) != TPE__FORKED)
		tpe__future_unref(f);
	if (!tpe__forked_since(gen))
		(void)set_ended(s);
}

/* A tpe_submit task that a custom rejection handler took, as fn(arg). */
static void
run_handed_future(void *arg)
{
	struct tpe_future *f = arg;

	if (tpe__future_run(f) != TPE__FORKED)
		tpe__future_unref(f);
}

int
tpe__task_offer_to_handler(const struct tpe__tasks *ts, struct tpe__task *t,
    tpe_reject_fn handler, void *ctx)
{
	struct tpe_future *f = tpe__task_future(t);
	struct tpe__set *s = t->set;
	unsigned gen = tpe__fork_gen();
	int rc;

	/* Not the user's pair: refused unasked (Design notes). */
	if (s != NULL && s->ops->internal)
		return EAGAIN;
	if (f != NULL)
		rc = handler(ts->pool, run_handed_future, f, ctx);
	else
		rc = handler(ts->pool, t->fn, t->arg, ctx);
	/* Taken: the pair (and with it the pool's reference to f) is the
	 * handler's now, and the member of s ended; refused: the node goes
	 * back to the caller. */
	if (rc == 0) {
		end(ts, t);
		if (!tpe__forked_since(gen))
			(void)set_ended(s);
	}
	return rc;
}

/* A tracer is attached to task__start or task__end (probe.h): fires
 * task__start with the task's queue wait in ns (-1: not stamped, it was
 * submitted before the tracer attached) and returns the start time for
 * task__end. */
static int64_t
probe_started(const struct tpe__tasks *ts, const struct tpe__task *t,
    tpe_fn fn, void *arg)
{
	int64_t accepted = tpe__task_accepted_tick(t);
	int64_t now = probe_stamp();

	TPE__PROBE5(task__start, ts->pool, ts->attr->name_prefix, fn, arg,
	    accepted != 0 ? (int64_t)tpe__tick_to_ns(now - accepted) : -1);
	return now;
}

/* tpe__task_run; with `keep`, the node is left to the caller. */
static tpe__not_forked
run(const struct tpe__tasks *ts, struct tpe__task *t, bool keep)
{
	const struct tpe_attr *a = ts->attr;
	struct tpe_future *f = tpe__task_future(t);
	struct tpe__set *s = t->set;
	tpe_fn fn = t->fn;
	void *arg = user_arg(t);
	tpe_fn hook_fn = fn;
	void *hook_arg = arg;
	bool hooks = a->before != NULL || a->after != NULL;
	unsigned gen = tpe__fork_gen();
	int64_t started = 0;

	/* A task that unwound out of a non-blocking invocation must not
	 * leave the next one flagged (invocation.h). */
	tpe__tls_non_blocking = false;
	/* A future is started before the hooks: once RUNNING, a cancel says
	 * EBUSY, so no cancel can make a no-op of a task whose hooks ran
	 * (tpe_attr_set_task_hooks(3)). */
	if (f != NULL && !tpe__future_start(f)) {
		/* Cancelled while queued: a no-op that still counts as
		 * completed; the discard callback gets it. */
		return hand_back(ts, t, a->discard, a->discard_ctx, keep);
	}
	/* A cancelled set's member: the same, before the hooks too. */
	if (set_cancelled(s))
		return hand_back(ts, t, a->discard, a->discard_ctx, keep);
	/* From here to the end of the user code: freed in the child of a
	 * fork made in it (task.h). */
	tpe__tls_running_node = t;
	/* A wrapper says whether its task runs, and whose pair the hooks
	 * see; only asked when there are hooks (struct tpe__tasks). */
	if (hooks && fn == ts->wrap_fn && f == NULL)
		hooks = ts->wrap_begin(arg, &hook_fn, &hook_arg);
	if (hooks && a->before != NULL) {
		a->before(ts->pool, hook_fn, hook_arg, a->task_hook_ctx);
		if (tpe__forked_since(gen))
			return false;
	}
	if (TPE__PROBE_ENABLED(task__start) || TPE__PROBE_ENABLED(task__end))
		started = probe_started(ts, t, hook_fn, hook_arg);
	if (f == NULL)
		fn(arg);
	else if (tpe__future_run_started(f) == TPE__FORKED)
		return false;
	if (tpe__forked_since(gen))
		return false;
	if (started != 0 && TPE__PROBE_ENABLED(task__end))
		TPE__PROBE5(task__end, ts->pool, ts->attr->name_prefix, hook_fn,
		    hook_arg, (int64_t)tpe__tick_to_ns(tpe__tick_now() - started));
	if (hooks && a->after != NULL) {
		a->after(ts->pool, hook_fn, hook_arg, a->task_hook_ctx);
		if (tpe__forked_since(gen))
			return false;
	}
	tpe__tls_running_node = NULL;
	if (!keep)
		end(ts, t);
	if (f != NULL)
		tpe__future_unref(f);
	return set_ended(s);
}

tpe__not_forked
tpe__task_run(const struct tpe__tasks *ts, struct tpe__task *t)
{
	return run(ts, t, false);
}

tpe__not_forked
tpe__task_run_keep(const struct tpe__tasks *ts, struct tpe__task *t)
{
	return run(ts, t, true);
}

void
tpe__task_end_chain(const struct tpe__tasks *ts, struct tpe__task *first,
    size_t n)
{
	tpe__node_put_chain(ts->returns, first, n);
}
