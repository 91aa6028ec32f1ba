/* SPDX-License-Identifier: MIT */
/* policy.c - builds a pool's queue and rejection chain from its attributes. */
#include <errno.h>

#include "policy/policy.h"
#include "policy/rejection.h"

int
tpe__policy_base_queue(const struct tpe_attr *a, struct tpe__queue **q)
{
	switch (a->queue_kind) {
	case TPE_QUEUE_UNBOUNDED:
		return tpe__queue_linked_create(q);
	case TPE_QUEUE_BOUNDED:
		return tpe__queue_array_create(q, a->queue_capacity);
	case TPE_QUEUE_HANDOFF:
		return tpe__queue_handoff_create(q);
	case TPE_QUEUE_PER_WORKER:
		return tpe__queue_per_worker_create(q, a->max);
	}
	return EINVAL;
}

int
tpe__policy_install(const struct tpe_attr *a, struct tpe__policy_setup *s)
{
	int rc;

	s->state = NULL;
	s->queued_grow_to_max = false;
	s->state_free = NULL;
	rc = tpe__policy_base_queue(a, &s->queue);
	if (rc != 0)
		return rc;
	tpe__rejection_select(a, &s->reject, &s->reject_ctx);
	switch (a->policy) {
	case TPE_POLICY_QUEUE_FIRST:
		return 0;
	case TPE_POLICY_SCALE_FIRST:
		rc = tpe__scale_first_install(s);
		break;
	default:
		rc = EINVAL;
	}
	if (rc != 0)
		s->queue->ops->destroy(s->queue);
	return rc;
}
