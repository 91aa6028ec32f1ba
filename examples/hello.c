/* SPDX-License-Identifier: MIT */
/* hello.c - create a pool, run ten tasks on it, wait for them, destroy it. */
#include <stdio.h>
#include <tpe.h>

static void
hello(void *arg)
{
	printf("hello from task %d\n", *(int *)arg);
}

int
main(void)
{
	static int ids[10];
	tpe_t *pool;
	int i;

	if (tpe_create(&pool, NULL) != 0)	/* NULL: default attributes */
		return 1;
	for (i = 0; i < 10; i++) {
		ids[i] = i;
		if (tpe_execute(pool, hello, &ids[i]) != 0)
			return 1;
	}
	tpe_wait_idle(pool, -1);		/* -1: no timeout */
	puts("all ten tasks ran");
	return tpe_destroy(pool) != 0;		/* shut down, join, free */
}
