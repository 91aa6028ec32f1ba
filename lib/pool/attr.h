/* SPDX-License-Identifier: MIT */
/*
 * attr.h - the pool attributes object (tpe_attr_t), copied by tpe_create.
 *
 * Where it sits: lib/pool; the attributes are read by the pool, its
 * engines (the kinds table) and the reserve; validation asks the kinds
 * table (engine/kinds.c) what each queue kind allows.
 */
#ifndef TPE_ATTR_H
#define TPE_ATTR_H

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>

#include "tpe.h"

/* The CPU affinity of a pthread_attr_t can be read and set (glibc, musl,
 * FreeBSD); elsewhere tpe_attr_set_pthread_attr does not copy it. */
#if defined(HAVE_PTHREAD_ATTR_GETAFFINITY_NP) && \
    defined(HAVE_PTHREAD_ATTR_SETAFFINITY_NP) && \
    defined(HAVE_DECL_CPU_COUNT) && HAVE_DECL_CPU_COUNT
#define TPE__HAVE_AFFINITY 1
#endif

#define TPE__NAME_PREFIX_MAX 12

/* Thread-creation attributes taken out of a user pthread_attr_t. */
struct tpe__thread_attr {
	size_t stack_size;     /* 0: system default */
	bool have_guard;
	size_t guard_size;
	bool have_sched;
	int inherit_sched;
	int sched_policy;
	struct sched_param sched_param;
	bool have_scope;
	int scope;
#ifdef TPE__HAVE_AFFINITY
	bool have_affinity;
	cpu_set_t affinity;
#endif
};

struct tpe_attr {
	size_t core;
	size_t max;
	int64_t keep_alive_ns;
	bool allow_core_timeout;
	enum tpe_queue_kind queue_kind;
	size_t queue_capacity;
	enum tpe_policy policy;
	enum tpe_rejection rejection;
	tpe_reject_fn reject_fn; /* custom handler; NULL: use `rejection` */
	void *reject_ctx;
	char name_prefix[TPE__NAME_PREFIX_MAX + 1];
	struct tpe__thread_attr thread;
	tpe_task_hook_fn before, after;
	void *task_hook_ctx;
	tpe_pool_hook_fn on_start, on_exit;
	void *thread_hook_ctx;
	tpe_pool_hook_fn terminated;
	void *terminated_ctx;
	tpe_handback_fn discard;
	void *discard_ctx;
	int reserved;            /* reserved threads; -1: the heuristic */
	unsigned sched_flags;    /* TPE_SCHED_* (lib/sched) */
	size_t max_spare;        /* threads beyond max for blocked workers */
	unsigned metrics;        /* TPE_METRICS_* (lib/metrics); 0: off */
};

/* Fills a with the defaults (used by tpe_attr_create and tpe_create(NULL)). */
void tpe__attr_defaults(struct tpe_attr *a);

/* EINVAL if the combination is contradictory. */
int tpe__attr_validate(const struct tpe_attr *a);

/* Applies the thread attributes to a pthread_attr_t made by the caller. */
int tpe__thread_attr_apply(const struct tpe__thread_attr *ta,
    pthread_attr_t *pa);

#endif /* TPE_ATTR_H */
