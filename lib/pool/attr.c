/* SPDX-License-Identifier: MIT */
/* attr.c - tpe_attr_t: defaults, validation, and the setters. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "pool/attr.h"
#include "base/cpu.h"
#include "engine/engine.h"

#define DEFAULT_KEEP_ALIVE_NS (INT64_C(60) * 1000000000)

void
tpe__attr_defaults(struct tpe_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->core = a->max = tpe__cpu_count();
	a->keep_alive_ns = DEFAULT_KEEP_ALIVE_NS;
	a->queue_kind = TPE_QUEUE_UNBOUNDED;
	a->policy = TPE_POLICY_QUEUE_FIRST;
	a->rejection = TPE_REJECT_ABORT;
	a->reserved = -1;
	a->max_spare = TPE_DEFAULT_SPARE_THREADS;
	strcpy(a->name_prefix, "tpe");
}

/* The capacity rule of the kind's row (engine/kinds.c). */
static bool
queue_valid(enum tpe_queue_kind kind, size_t capacity)
{
	const struct tpe__kind *k = tpe__kind_of(kind);

	if (k == NULL)
		return false;
	if ((k->caps & TPE__CAP_CAPACITY_ANY) != 0)
		return true;
	return (k->caps & TPE__CAP_CAPACITY) != 0 ? capacity > 0 :
	    capacity == 0;
}

/*
 * What the kind's engine can do (engine.h, caps): a fixed pool has core ==
 * max and no core timeout (tpe_attr_set_queue(3)); a kind without
 * TPE__CAP_POLICIES takes only the queue-first policy. Other kinds:
 * anything.
 */
static bool
kind_allows(const struct tpe_attr *a)
{
	const struct tpe__kind *k = tpe__kind_of(a->queue_kind);
	unsigned caps = k != NULL ? k->caps : 0;

	if ((caps & TPE__CAP_FIXED) != 0 &&
	    (a->core != a->max || a->allow_core_timeout))
		return false;
	return (caps & TPE__CAP_POLICIES) != 0 ||
	    a->policy == TPE_POLICY_QUEUE_FIRST;
}

int
tpe__attr_validate(const struct tpe_attr *a)
{
	if (a->max == 0 || a->core > a->max || !kind_allows(a))
		return EINVAL;
	if (a->keep_alive_ns < 0 ||
	    (a->keep_alive_ns == 0 && a->allow_core_timeout))
		return EINVAL;
	if (!queue_valid(a->queue_kind, a->queue_capacity))
		return EINVAL;
	if (a->policy != TPE_POLICY_QUEUE_FIRST &&
	    a->policy != TPE_POLICY_SCALE_FIRST)
		return EINVAL;
	if ((unsigned)a->rejection > TPE_REJECT_DISCARD_OLDEST)
		return EINVAL;
	return 0;
}

int
tpe_attr_create(tpe_attr_t **attr)
{
	struct tpe_attr *a;

	if (attr == NULL)
		return EINVAL;
	a = malloc(sizeof(*a));
	if (a == NULL)
		return ENOMEM;
	tpe__attr_defaults(a);
	*attr = a;
	return 0;
}

void
tpe_attr_destroy(tpe_attr_t *attr)
{
	free(attr);
}

int
tpe_attr_set_pool_size(tpe_attr_t *attr, size_t core, size_t max)
{
	struct tpe_attr c;

	if (attr == NULL || max == 0 || core > max)
		return EINVAL;
	c = *attr;
	c.core = core;
	c.max = max;
	if (!kind_allows(&c))
		return EINVAL;
	*attr = c;
	return 0;
}

int
tpe_attr_set_keep_alive(tpe_attr_t *attr, int64_t keep_alive_ns)
{
	if (attr == NULL || keep_alive_ns < 0 ||
	    (keep_alive_ns == 0 && attr->allow_core_timeout))
		return EINVAL;
	attr->keep_alive_ns = keep_alive_ns;
	return 0;
}

int
tpe_attr_set_allow_core_timeout(tpe_attr_t *attr, bool allow)
{
	struct tpe_attr c;

	if (attr == NULL || (allow && attr->keep_alive_ns == 0))
		return EINVAL;
	c = *attr;
	c.allow_core_timeout = allow;
	if (!kind_allows(&c))
		return EINVAL;
	*attr = c;
	return 0;
}

int
tpe_attr_set_queue(tpe_attr_t *attr, enum tpe_queue_kind kind, size_t capacity)
{
	struct tpe_attr c;

	if (attr == NULL || !queue_valid(kind, capacity))
		return EINVAL;
	c = *attr;
	c.queue_kind = kind;
	c.queue_capacity = capacity;
	if (!kind_allows(&c))
		return EINVAL;
	*attr = c;
	return 0;
}

int
tpe_attr_set_policy(tpe_attr_t *attr, enum tpe_policy policy)
{
	struct tpe_attr c;

	if (attr == NULL || (policy != TPE_POLICY_QUEUE_FIRST &&
	    policy != TPE_POLICY_SCALE_FIRST))
		return EINVAL;
	c = *attr;
	c.policy = policy;
	if (!kind_allows(&c))
		return EINVAL;
	*attr = c;
	return 0;
}

int
tpe_attr_set_rejection(tpe_attr_t *attr, enum tpe_rejection rejection)
{
	if (attr == NULL || (unsigned)rejection > TPE_REJECT_DISCARD_OLDEST)
		return EINVAL;
	attr->rejection = rejection;
	attr->reject_fn = NULL;
	attr->reject_ctx = NULL;
	return 0;
}

int
tpe_attr_set_rejection_handler(tpe_attr_t *attr, tpe_reject_fn fn, void *ctx)
{
	if (attr == NULL || fn == NULL)
		return EINVAL;
	attr->reject_fn = fn;
	attr->reject_ctx = ctx;
	return 0;
}

int
tpe_attr_set_thread_name(tpe_attr_t *attr, const char *prefix)
{
	if (attr == NULL)
		return EINVAL;
	if (prefix == NULL)
		prefix = "tpe";
	if (strlen(prefix) > TPE__NAME_PREFIX_MAX)
		return EINVAL;
	strcpy(attr->name_prefix, prefix);
	return 0;
}

int
tpe_attr_set_stack_size(tpe_attr_t *attr, size_t bytes)
{
	if (attr == NULL || (bytes != 0 && bytes < (size_t)PTHREAD_STACK_MIN))
		return EINVAL;
	attr->thread.stack_size = bytes;
	return 0;
}

int
tpe_attr_set_pthread_attr(tpe_attr_t *attr, const pthread_attr_t *pattr)
{
	struct tpe__thread_attr ta;

	if (attr == NULL)
		return EINVAL;
	memset(&ta, 0, sizeof(ta));
	if (pattr != NULL) {
		if (pthread_attr_getstacksize(pattr, &ta.stack_size) != 0)
			return EINVAL;
		ta.have_guard =
		    pthread_attr_getguardsize(pattr, &ta.guard_size) == 0;
		ta.have_sched =
		    pthread_attr_getinheritsched(pattr, &ta.inherit_sched) == 0 &&
		    pthread_attr_getschedpolicy(pattr, &ta.sched_policy) == 0 &&
		    pthread_attr_getschedparam(pattr, &ta.sched_param) == 0;
		ta.have_scope = pthread_attr_getscope(pattr, &ta.scope) == 0;
#ifdef TPE__HAVE_AFFINITY
		ta.have_affinity = pthread_attr_getaffinity_np(pattr,
		    sizeof(ta.affinity), &ta.affinity) == 0 &&
		    CPU_COUNT(&ta.affinity) > 0;
#endif
	}
	attr->thread = ta;
	return 0;
}

int
tpe__thread_attr_apply(const struct tpe__thread_attr *ta, pthread_attr_t *pa)
{
	int rc = 0;

	if (ta->stack_size != 0)
		rc = pthread_attr_setstacksize(pa, ta->stack_size);
	if (rc == 0 && ta->have_guard)
		rc = pthread_attr_setguardsize(pa, ta->guard_size);
	if (rc == 0 && ta->have_sched) {
		rc = pthread_attr_setinheritsched(pa, ta->inherit_sched);
		if (rc == 0)
			rc = pthread_attr_setschedpolicy(pa, ta->sched_policy);
		if (rc == 0)
			rc = pthread_attr_setschedparam(pa, &ta->sched_param);
	}
	if (rc == 0 && ta->have_scope)
		rc = pthread_attr_setscope(pa, ta->scope);
#ifdef TPE__HAVE_AFFINITY
	if (rc == 0 && ta->have_affinity)
		rc = pthread_attr_setaffinity_np(pa, sizeof(ta->affinity),
		    &ta->affinity);
#endif
	return rc;
}

int
tpe_attr_set_task_hooks(tpe_attr_t *attr, tpe_task_hook_fn before,
    tpe_task_hook_fn after, void *ctx)
{
	if (attr == NULL)
		return EINVAL;
	attr->before = before;
	attr->after = after;
	attr->task_hook_ctx = ctx;
	return 0;
}

int
tpe_attr_set_thread_hooks(tpe_attr_t *attr, tpe_pool_hook_fn on_start,
    tpe_pool_hook_fn on_exit, void *ctx)
{
	if (attr == NULL)
		return EINVAL;
	attr->on_start = on_start;
	attr->on_exit = on_exit;
	attr->thread_hook_ctx = ctx;
	return 0;
}

int
tpe_attr_set_terminated_hook(tpe_attr_t *attr, tpe_pool_hook_fn fn, void *ctx)
{
	if (attr == NULL)
		return EINVAL;
	attr->terminated = fn;
	attr->terminated_ctx = ctx;
	return 0;
}

int
tpe_attr_set_discard_callback(tpe_attr_t *attr, tpe_handback_fn fn, void *ctx)
{
	if (attr == NULL)
		return EINVAL;
	attr->discard = fn;
	attr->discard_ctx = ctx;
	return 0;
}

int
tpe_attr_set_reserved_threads(tpe_attr_t *attr, int n)
{
	if (attr == NULL || n < -1)
		return EINVAL;
	attr->reserved = n;
	return 0;
}

int
tpe_attr_set_max_spare_threads(tpe_attr_t *attr, size_t n)
{
	if (attr == NULL || n > TPE_MAX_SPARE_THREADS)
		return EINVAL;
	attr->max_spare = n;
	return 0;
}

int
tpe_attr_set_schedule_flags(tpe_attr_t *attr, unsigned flags)
{
	const unsigned known = TPE_SCHED_CONTINUE_PERIODIC_AFTER_SHUTDOWN |
	    TPE_SCHED_DROP_DELAYED_AFTER_SHUTDOWN | TPE_SCHED_REMOVE_ON_CANCEL;

	if (attr == NULL || (flags & ~known) != 0)
		return EINVAL;
	attr->sched_flags = flags;
	return 0;
}

int
tpe_attr_set_metrics(tpe_attr_t *attr, unsigned flags)
{
	const unsigned known = TPE_METRICS_ON | TPE_METRICS_TIME_ALL;

	if (attr == NULL || (flags & ~known) != 0 ||
	    (flags != 0 && (flags & TPE_METRICS_ON) == 0))
		return EINVAL;
	attr->metrics = flags;
	return 0;
}
