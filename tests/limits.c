/* SPDX-License-Identifier: MIT */
/*
 * limits.c - a burst against the system's limits: a scale-first pool with
 * a maximum in the thousands gets more blocking tasks than the process may
 * have threads (tests/limits.sh sets the limit: RLIMIT_NPROC, or
 * RLIMIT_AS, or TPE_LIMITS_FAKE_NPROC below).
 *
 *   limits [max [burst]]
 *
 * Checks: each refusal is EAGAIN or ENOMEM (tpe_execute(3)); the limit was
 * reached (some refusal happened; exit status 3 when none did, so the
 * script can tell a limit that did not bite); every accepted task runs
 * once; after the burst the pool takes and runs more tasks (a refused one
 * is retried, boundedly); tpe_destroy returns and no thread is left. The
 * whole run is bounded by alarm(): a hang fails.
 *
 * With TPE_LIMITS_FAKE_NPROC=N, pthread_create fails with EAGAIN while the
 * process has N threads or more: the fallback when no real limit can be
 * set (this program is linked with -Wl,--wrap=pthread_create).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tpe.h"

#define TU_NO_CMOCKA /* a plain program, not a cmocka test */
#include "helpers.h"

int __real_pthread_create(pthread_t *thread, const pthread_attr_t *attr,
    void *(*start)(void *), void *arg);
int __wrap_pthread_create(pthread_t *thread, const pthread_attr_t *attr,
    void *(*start)(void *), void *arg);


static int fake_nproc;  /* I: 0, or the fallback's thread limit */

int
__wrap_pthread_create(pthread_t *thread, const pthread_attr_t *attr,
    void *(*start)(void *), void *arg)
{
	if (fake_nproc > 0 && tu_thread_count() >= fake_nproc)
		return EAGAIN;
	return __real_pthread_create(thread, attr, start, arg);
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int open_gate;            /* lock */
static int *ran;                 /* A: per task */

static void
blocker(void *arg)
{
	__atomic_add_fetch(&ran[(uintptr_t)arg], 1, __ATOMIC_SEQ_CST);
	pthread_mutex_lock(&lock);
	while (!open_gate)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
}

static void
counter(void *arg)
{
	__atomic_add_fetch(&ran[(uintptr_t)arg], 1, __ATOMIC_SEQ_CST);
}

int
main(int argc, char **argv)
{
	size_t max = argc > 1 ? strtoul(argv[1], NULL, 0) : 4000;
	unsigned burst = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 0) :
	    (unsigned)max + 1000, after = 2000, i, tries;
	unsigned accepted = 0, eagain = 0, enomem = 0, other = 0;
	unsigned after_ok = 0, after_retries = 0, wrong = 0, nran = 0;
	int threads0, threads1, rc;
	const char *e = getenv("TPE_LIMITS_FAKE_NPROC");
	struct tpe_stats st;
	tpe_attr_t *a;
	tpe_t *pool;

	threads0 = tu_thread_baseline(__real_pthread_create);
	alarm(240);
	if (e != NULL)
		fake_nproc = atoi(e);
	ran = calloc(burst + after, sizeof(int));
	if (ran == NULL || tpe_attr_create(&a) != 0 ||
	    tpe_attr_set_pool_size(a, 0, max) != 0 ||
	    tpe_attr_set_policy(a, TPE_POLICY_SCALE_FIRST) != 0 ||
	    tpe_attr_set_queue(a, TPE_QUEUE_BOUNDED, 64) != 0 ||
	    tpe_attr_set_keep_alive(a, INT64_C(10000000000)) != 0 ||
	    tpe_create(&pool, a) != 0) {
		/* Under RLIMIT_AS the setup itself may fail: say so. */
		fprintf(stderr, "limits: setup failed\n");
		return 2;
	}
	tpe_attr_destroy(a);

	/* The burst: every accepted task blocks until all were offered. */
	for (i = 0; i < burst; i++) {
		rc = tpe_execute(pool, blocker, (void *)(uintptr_t)i);
		if (rc == 0)
			accepted++;
		else if (rc == EAGAIN)
			eagain++;
		else if (rc == ENOMEM)
			enomem++;
		else {
			other++;
			fprintf(stderr, "limits: tpe_execute = %d (%s)\n", rc,
			    strerror(rc));
		}
	}
	(void)tpe_get_stats(pool, &st, sizeof(st));
	printf("limits: burst of %u on max %zu: accepted %u, EAGAIN %u, "
	    "ENOMEM %u, other %u; threads %zu\n", burst, max, accepted,
	    eagain, enomem, other, st.pool_size);
	pthread_mutex_lock(&lock);
	open_gate = 1;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	if ((rc = tpe_wait_idle(pool, -1)) != 0) {
		fprintf(stderr, "limits: tpe_wait_idle = %d\n", rc);
		other++;
	}

	/* After the burst: the pool still works. */
	for (i = burst; i < burst + after; i++) {
		for (tries = 0; (rc = tpe_execute(pool, counter,
		    (void *)(uintptr_t)i)) != 0 && tries < 1000; tries++) {
			if (rc != EAGAIN && rc != ENOMEM)
				break;
			after_retries++;
			usleep(100);
		}
		if (rc == 0)
			after_ok++;
		else
			fprintf(stderr, "limits: after the burst, task %u: %d\n",
			    i, rc);
	}
	if ((rc = tpe_destroy(pool)) != 0) {
		fprintf(stderr, "limits: tpe_destroy = %d\n", rc);
		other++;
	}
	for (i = 0; i < burst; i++) {
		if (ran[i] > 1)
			wrong++;
		nran += ran[i] != 0;
	}
	for (i = burst; i < burst + after; i++)
		if (ran[i] != 1)
			wrong++;
	if (nran != accepted) {
		fprintf(stderr, "limits: %u burst tasks ran, %u accepted\n",
		    nran, accepted);
		wrong++;
	}
	threads1 = tu_thread_count_settled(threads0);
	printf("limits: after the burst: %u of %u accepted (%u retries), all "
	    "ran: %s; threads %d at start, %d at the end\n", after_ok, after,
	    after_retries, wrong == 0 ? "yes" : "NO", threads0, threads1);
	if (other != 0 || wrong != 0 || after_ok != after ||
	    threads1 != threads0) {
		printf("limits: FAILED\n");
		return 1;
	}
	if (eagain + enomem == 0) {
		printf("limits: the limit was not reached\n");
		return 3;
	}
	printf("limits: OK\n");
	return 0;
}
