/* SPDX-License-Identifier: MIT */
/* thpool_consumer.c - a program written for C-Thread-Pool, built unchanged
 * against the installed libtpe by CMake (tpe::thpool) and by Meson
 * (tpe-thpool): only "thpool.h", found as the bundled one was. */
#include <stdio.h>
#include "thpool.h"

static int count;

static void
add(void *arg)
{
	__atomic_fetch_add((int *)arg, 1, __ATOMIC_RELAXED);
}

int
main(void)
{
	threadpool pool = thpool_init(2);
	int i;

	if (pool == NULL)
		return 1;
	for (i = 0; i < 100; i++)
		if (thpool_add_work(pool, add, &count) != 0)
			return 1;
	thpool_wait(pool);
	thpool_destroy(pool);
	printf("thpool on libtpe: %d tasks ran\n", count);
	return count == 100 ? 0 : 1;
}
