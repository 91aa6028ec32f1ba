/* SPDX-License-Identifier: MIT */
/* consumer.c - a program built against the installed libtpe by CMake and by
 * Meson (.ci/phase-consumers.sh): run 100 tasks, wait, check the count. */
#include <stdio.h>
#include <tpe.h>

static int count;

static void
add(void *arg)
{
	__atomic_fetch_add((int *)arg, 1, __ATOMIC_RELAXED);
}

int
main(void)
{
	tpe_t *pool;
	int i;

	if (tpe_create(&pool, NULL) != 0)
		return 1;
	for (i = 0; i < 100; i++)
		if (tpe_execute(pool, add, &count) != 0)
			return 1;
	if (tpe_destroy(pool) != 0)
		return 1;
	printf("libtpe %s: %d tasks ran\n", tpe_version(), count);
	return count == 100 ? 0 : 1;
}
