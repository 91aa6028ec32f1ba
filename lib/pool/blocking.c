/* SPDX-License-Identifier: MIT */
/*
 * blocking.c - the public calls of managed blocking: tpe_blocking_begin,
 * tpe_blocking_end, tpe_managed_block (blocking.h has the design notes).
 */
#include <errno.h>
#include <stdbool.h>

#include "base/probe.h"
#include "base/sync.h"
#include "pool/blocking.h"
#include "pool/pool.h"
#include "pool/task.h"

/* The sections this thread has open (nested ones count once). */
static TPE__TLS unsigned depth;

/* The pool of the calling worker, while it runs a task; else NULL. */
static tpe_t *
this_pool(void)
{
	if (tpe__tls_running_node == NULL)
		return NULL;
	return tpe__tls_worker_pool;
}

/* The outermost section begins or ends: the engine's op, after the probe
 * a tracer may watch (base/probe.h). */
static int
outermost(tpe_t *pool, bool begin)
{
	if (begin)
		TPE__PROBE2(block__begin, pool, pool->attr.name_prefix);
	else
		TPE__PROBE2(block__end, pool, pool->attr.name_prefix);
	return pool->engine->ops->blocking(pool->engine, begin);
}

int
tpe_blocking_begin(void)
{
	tpe_t *pool = this_pool();

	if (pool == NULL)
		return 0;
	if (depth++ > 0)
		return 0;
	return outermost(pool, true);
}

int
tpe_blocking_end(void)
{
	tpe_t *pool = this_pool();

	if (pool == NULL)
		return 0;
	if (depth == 0)
		return EINVAL;
	if (--depth > 0)
		return 0;
	return outermost(pool, false);
}

void
tpe__blocking_task_done(void)
{
	tpe_t *pool = tpe__tls_worker_pool;

	if (depth == 0 || pool == NULL)
		return;
	depth = 0;
	(void)outermost(pool, false);
}

int
tpe_managed_block(tpe_releasable_fn is_releasable, tpe_block_fn block,
    void *ctx)
{
	int rc;

	if (block == NULL)
		return EINVAL;
	/* Java's managedBlock: no compensation when no wait is needed. */
	if (is_releasable != NULL && is_releasable(ctx))
		return 0;
	rc = tpe_blocking_begin();
	while (!(is_releasable != NULL && is_releasable(ctx)) && !block(ctx))
		;
	(void)tpe_blocking_end();
	return rc;
}
