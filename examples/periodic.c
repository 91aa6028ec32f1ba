/* SPDX-License-Identifier: MIT */
/*
 * periodic.c - a periodic flush and a delayed retry with cancel, on a
 * libtpe pool instead of a timer thread of one's own.
 *
 * A log buffer is flushed every 20 ms (tpe_schedule_at_fixed_rate); the
 * flush stops itself after five runs by cancelling its own future. A
 * failed "send" is retried 50 ms later (tpe_schedule); a second retry is
 * scheduled and then cancelled because the first one succeeded.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tpe.h>

#define MS (INT64_C(1000000))

struct log {
	pthread_mutex_t lock;
	int lines;            /* lock: lines written since the last flush */
	int flushes;          /* lock */
	tpe_future_t *flusher; /* set before the first run can start */
	pthread_mutex_t start; /* held by main until flusher is set */
};

static void
check(int rc, const char *what)
{
	if (rc != 0) {
		fprintf(stderr, "periodic: %s: %s\n", what, strerror(rc));
		exit(1);
	}
}

/* Runs every 20 ms; after five flushes it stops itself. */
static void
flush(void *arg)
{
	struct log *log = arg;
	int flushes;

	/* The first run may start before main has stored the future. */
	pthread_mutex_lock(&log->start);
	pthread_mutex_unlock(&log->start);
	pthread_mutex_lock(&log->lock);
	printf("flush %d: %d line(s)\n", log->flushes + 1, log->lines);
	log->lines = 0;
	flushes = ++log->flushes;
	pthread_mutex_unlock(&log->lock);
	if (flushes == 5)
		(void)tpe_future_cancel(log->flusher); /* this run ends */
}

static void
retry_send(void *arg)
{
	printf("retry %s: sent\n", (const char *)arg);
}

/* The discard callback: what was cancelled or dropped comes back here. */
static void
dropped(tpe_fn fn, void *arg, void *ctx)
{
	(void)ctx;
	if (fn == retry_send)
		printf("retry %s: cancelled, not needed\n",
		    (const char *)arg);
}

int
main(void)
{
	struct log log = { .lock = PTHREAD_MUTEX_INITIALIZER,
	    .start = PTHREAD_MUTEX_INITIALIZER };
	static char first_name[] = "#1", second_name[] = "#2";
	tpe_future_t *first, *second;
	tpe_attr_t *attr;
	tpe_t *pool;
	int i, rc;

	check(tpe_attr_create(&attr), "tpe_attr_create");
	check(tpe_attr_set_pool_size(attr, 2, 2), "tpe_attr_set_pool_size");
	check(tpe_attr_set_discard_callback(attr, dropped, NULL),
	    "tpe_attr_set_discard_callback");
	/* A cancelled retry leaves the timer at once. */
	check(tpe_attr_set_schedule_flags(attr, TPE_SCHED_REMOVE_ON_CANCEL),
	    "tpe_attr_set_schedule_flags");
	check(tpe_create(&pool, attr), "tpe_create");
	tpe_attr_destroy(attr);

	pthread_mutex_lock(&log.start);
	check(tpe_schedule_at_fixed_rate(pool, flush, &log, 20 * MS, 20 * MS,
	    &log.flusher), "tpe_schedule_at_fixed_rate");
	pthread_mutex_unlock(&log.start);

	/* The first send failed: retry in 50 ms, and once more in 200 ms
	 * in case that fails too. */
	check(tpe_schedule(pool, retry_send, first_name, 50 * MS, &first),
	    "tpe_schedule");
	check(tpe_schedule(pool, retry_send, second_name, 200 * MS,
	    &second),
	    "tpe_schedule");
	for (i = 0; i < 12; i++) {
		pthread_mutex_lock(&log.lock);
		log.lines++;
		pthread_mutex_unlock(&log.lock);
	}

	/* The first retry succeeds: the second is not needed. */
	check(tpe_future_get(first, -1, NULL), "tpe_future_get (retry)");
	rc = tpe_future_cancel(second);
	if (rc != 0 && rc != EBUSY)
		check(rc, "tpe_future_cancel");

	/* The flusher ends after its fifth run. */
	rc = tpe_future_get(log.flusher, -1, NULL);
	if (rc != ECANCELED)
		check(rc == 0 ? EINVAL : rc, "tpe_future_get (flusher)");
	printf("flusher stopped after %d flushes\n", log.flushes);

	tpe_future_release(first);
	tpe_future_release(second);
	tpe_future_release(log.flusher);
	check(tpe_destroy(pool), "tpe_destroy");
	return 0;
}
