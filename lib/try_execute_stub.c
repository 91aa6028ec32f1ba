/* SPDX-License-Identifier: MIT */
/*
 * try_execute_stub.c - TEMPORARY, on the strategy branch only: stand-ins
 * for tpe_try_execute and tpe_attr_set_reserved_threads until reserved
 * threads land from main (lib/reserved.c). Dropped at the merge.
 *
 * tpe_try_execute never finds a parked reserved thread here: every valid
 * call is a miss (EAGAIN), so a strategy never gets EPC from it, and the
 * EPC tests of test_strategy.c skip themselves.
 */
#include <errno.h>

#include "tpe.h"

int
tpe_try_execute(tpe_t *pool, tpe_fn fn, void *arg)
{
	(void)arg;
	if (pool == NULL || fn == NULL)
		return EINVAL;
	return EAGAIN;
}

int
tpe_attr_set_reserved_threads(tpe_attr_t *attr, int n)
{
	if (attr == NULL || n < -1)
		return EINVAL;
	return 0;
}
