/* SPDX-License-Identifier: MIT */
/*
 * kinds.c - the table of queue kinds: for each, its storage, the engine
 * that runs it and what a pool of that kind can do (engine.h, caps). A new
 * kind is its file in lib/queue (or a new engine) and one row here.
 */
#include "engine/engine.h"

static int
create_linked(struct tpe__queue **q, const struct tpe_attr *a)
{
	(void)a;
	return tpe__queue_linked_create(q);
}

static int
create_array(struct tpe__queue **q, const struct tpe_attr *a)
{
	return tpe__queue_array_create(q, a->queue_capacity);
}

static int
create_handoff(struct tpe__queue **q, const struct tpe_attr *a)
{
	(void)a;
	return tpe__queue_handoff_create(q);
}

static int
create_priority(struct tpe__queue **q, const struct tpe_attr *a)
{
	return tpe__queue_priority_create(q, a->queue_capacity);
}

static const struct tpe__kind kinds[] = {
	[TPE_QUEUE_UNBOUNDED] = { "unbounded", TPE__ENGINE_LOCKED,
	    TPE__CAP_UNBOUNDED | TPE__CAP_POLICIES, create_linked },
	[TPE_QUEUE_BOUNDED] = { "bounded", TPE__ENGINE_LOCKED,
	    TPE__CAP_CAPACITY | TPE__CAP_POLICIES, create_array },
	[TPE_QUEUE_HANDOFF] = { "handoff", TPE__ENGINE_LOCKED,
	    TPE__CAP_POLICIES, create_handoff },
	[TPE_QUEUE_PER_WORKER] = { "per-worker", TPE__ENGINE_STACKS,
	    TPE__CAP_FIXED | TPE__CAP_DRAIN_ONLY | TPE__CAP_NO_RESERVE |
	    TPE__CAP_UNBOUNDED | TPE__CAP_UNORDERED, NULL },
	/* Unbounded or bounded by its capacity (TPE__CAP_CAPACITY_ANY). */
	[TPE_QUEUE_PRIORITY] = { "priority", TPE__ENGINE_LOCKED,
	    TPE__CAP_CAPACITY_ANY | TPE__CAP_POLICIES, create_priority },
};

const struct tpe__kind *
tpe__kind_of(enum tpe_queue_kind kind)
{
	if ((unsigned)kind >= sizeof(kinds) / sizeof(kinds[0]) ||
	    kinds[kind].name == NULL)
		return NULL;
	return &kinds[kind];
}
