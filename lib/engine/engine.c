/* SPDX-License-Identifier: MIT */
/* engine.c - builds the engine of a pool's queue kind (engine.h). */
#include <errno.h>

#include "engine/engine.h"

int
tpe__engine_create(const struct tpe_attr *a, const struct tpe__policy *p,
    struct tpe__engine **e)
{
	const struct tpe__kind *k = tpe__kind_of(a->queue_kind);
	struct tpe__queue *q;
	int rc;

	if (k == NULL)
		return EINVAL;
	switch (k->engine) {
	case TPE__ENGINE_LOCKED:
		rc = k->create_queue(&q, a);
		if (rc != 0)
			return rc;
		rc = tpe__engine_locked_create(q, p, e);
		if (rc != 0)
			q->ops->destroy(q);
		break;
	case TPE__ENGINE_STACKS:
		rc = tpe__engine_stacks_create(a->max, e);
		break;
	default:
		return EINVAL;
	}
	if (rc == 0)
		(*e)->caps = k->caps;
	return rc;
}
