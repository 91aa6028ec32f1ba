/* SPDX-License-Identifier: MIT */
/*
 * chaos_coop.c - the chaos stress of the two services that are not a tpe_t
 * pool: tasklet jobs (tpe_coop_*) and the C-Thread-Pool API (thpool_*).
 * tests/chaos.c covers the pool; make check-stress and .ci/phase-chaos.sh
 * run this one beside it.
 *
 *   tests/chaos_coop [seconds]    (default 10; TPE_CHAOS_SEED repeats the
 *                                  set-up of a run's rounds)
 *
 * A tasklet round: a random service (1-4 workers, a random backoff bound,
 * stealing on or off), two submitter threads submitting jobs of random
 * tasklets (some blocking; each returns MADE_PROGRESS or NO_PROGRESS a
 * random number of times, then TPE_DONE or EIO), a chaos thread that
 * cancels, polls and waits on random jobs; the round ends by waiting for
 * every job and destroying, or by destroying at once. Checked per tasklet:
 * never called by two threads at once, never called after its end, its
 * end callback exactly once (0 after TPE_DONE, EIO after EIO, else
 * ECANCELED) and on the thread that called it last, none of a refused job
 * ever called or ended; per job: the result of tpe_job_wait agrees with
 * its tasklets' results, and with tpe_job_wait_result's outcome (which
 * the chaos thread also polls: ETIMEDOUT writes nothing).
 *
 * A thpool round: thpool_init with 1-4 threads, two submitters adding
 * jobs, a chaos thread pausing, resuming and reading the working count;
 * the round ends with thpool_wait then thpool_destroy (every job ran
 * exactly once) or thpool_destroy at once (C-Thread-Pool drops what is
 * queued: every job ran at most once). Each round: no thread left.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpe.h"
#include "tpe/thpool.h"

#define TU_NO_CMOCKA /* a plain program, not a cmocka test */
#include "helpers.h"

#define JOBS_PER_SUB 24
#define MAX_TASKLETS 8
#define NSUB 2

static uint64_t violations;

#define CHECK(cond, ...)                                                   \
	do {                                                               \
		if (!(cond)) {                                             \
			__atomic_add_fetch(&violations, 1, __ATOMIC_SEQ_CST); \
			fprintf(stderr, "chaos_coop: violation: " __VA_ARGS__); \
			fputc('\n', stderr);                               \
		}                                                          \
	} while (0)

/* ---- tasklet rounds ---------------------------------------------------- */

struct tl {
	int steps;          /* calls before the last one */
	int last;           /* TPE_DONE or EIO */
	int calls;          /* A */
	int in_call;        /* A: 1 during a call */
	int ended;          /* A: end callbacks */
	int result;         /* A: the end callback's result */
	pthread_t caller;   /* A: the thread of the latest call */
};

struct job_slot {
	struct tl tl[MAX_TASKLETS];
	size_t n;
	tpe_job_t *job;     /* A: published once submitted */
	int submit_rc;
	int wait_rc;        /* -1: not waited */
};

struct coop_round {
	tpe_coop_t *coop;
	struct job_slot jobs[NSUB][JOBS_PER_SUB];
	uint64_t seed;
	int done;           /* A: submitters finished */
};

static uint64_t tasklets_called, tasklets_ended, jobs_submitted, jobs_refused,
    jobs_cancelled;

static int
tl_fn(void *ctx)
{
	struct tl *t = ctx;
	int c, r;

	CHECK(__atomic_exchange_n(&t->in_call, 1, __ATOMIC_ACQ_REL) == 0,
	    "tasklet called by two threads at once");
	CHECK(__atomic_load_n(&t->ended, __ATOMIC_ACQUIRE) == 0,
	    "tasklet called after its end");
	c = __atomic_add_fetch(&t->calls, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&t->caller, pthread_self(), __ATOMIC_RELAXED);
	__atomic_add_fetch(&tasklets_called, 1, __ATOMIC_RELAXED);
	if (c > t->steps)
		r = t->last;
	else
		r = c % 3 == 0 ? TPE_NO_PROGRESS : TPE_MADE_PROGRESS;
	__atomic_store_n(&t->in_call, 0, __ATOMIC_RELEASE);
	return r;
}

static void
tl_end(void *ctx, int result)
{
	struct tl *t = ctx;

	CHECK(__atomic_load_n(&t->in_call, __ATOMIC_ACQUIRE) == 0,
	    "end callback during a call");
	CHECK(__atomic_load_n(&t->calls, __ATOMIC_RELAXED) == 0 ||
	    pthread_equal(__atomic_load_n(&t->caller, __ATOMIC_RELAXED),
	    pthread_self()), "end callback not on the last caller");
	__atomic_store_n(&t->result, result, __ATOMIC_RELAXED);
	__atomic_add_fetch(&t->ended, 1, __ATOMIC_ACQ_REL);
	__atomic_add_fetch(&tasklets_ended, 1, __ATOMIC_RELAXED);
}

static void *
coop_submitter(void *arg)
{
	struct coop_round *r = ((void **)arg)[0];
	size_t me = (size_t)(uintptr_t)((void **)arg)[1];
	uint64_t rs = r->seed ^ (me + 1) * 0x9e3779b97f4a7c15u;
	struct tpe_tasklet desc[MAX_TASKLETS];
	size_t j, k;

	for (j = 0; j < JOBS_PER_SUB; j++) {
		struct job_slot *s = &r->jobs[me][j];
		tpe_job_t *job = NULL;

		s->n = 1 + tu_rnd(&rs, MAX_TASKLETS);
		for (k = 0; k < s->n; k++) {
			s->tl[k].steps = (int)tu_rnd(&rs, 60);
			s->tl[k].last = tu_rnd(&rs, 10) == 0 ? EIO : TPE_DONE;
			desc[k] = (struct tpe_tasklet){ tl_fn, &s->tl[k],
			    tl_end, tu_rnd(&rs, 8) == 0 ?
			    TPE_TASKLET_BLOCKING : 0 };
		}
		s->submit_rc = tpe_coop_submit(r->coop, desc, s->n,
		    sizeof(desc[0]), &job);
		if (s->submit_rc == 0) {
			__atomic_add_fetch(&jobs_submitted, 1,
			    __ATOMIC_RELAXED);
			__atomic_store_n(&s->job, job, __ATOMIC_RELEASE);
		} else {
			CHECK(s->submit_rc == EAGAIN || s->submit_rc == ENOMEM ||
			    s->submit_rc == ECANCELED,
			    "tpe_coop_submit: undocumented %d", s->submit_rc);
			__atomic_add_fetch(&jobs_refused, 1, __ATOMIC_RELAXED);
		}
	}
	__atomic_add_fetch(&r->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *
coop_chaos(void *arg)
{
	struct coop_round *r = arg;
	uint64_t rs = r->seed * 31 + 7;

	while (__atomic_load_n(&r->done, __ATOMIC_ACQUIRE) < NSUB) {
		struct job_slot *s = &r->jobs[tu_rnd(&rs, NSUB)]
		    [tu_rnd(&rs, JOBS_PER_SUB)];
		tpe_job_t *job = __atomic_load_n(&s->job, __ATOMIC_ACQUIRE);
		int rc;

		if (job == NULL) {
			sched_yield();
			continue;
		}
		switch (tu_rnd(&rs, 4)) {
		case 0:
			rc = tpe_job_cancel(job);
			CHECK(rc == 0, "tpe_job_cancel: %d", rc);
			__atomic_add_fetch(&jobs_cancelled, 1,
			    __ATOMIC_RELAXED);
			break;
		case 1:
			rc = tpe_job_wait(job, 0);
			CHECK(rc == ETIMEDOUT || rc == 0 || rc == EIO ||
			    rc == ECANCELED, "tpe_job_wait(0): %d", rc);
			break;
		case 2: {
			int res = -1;

			rc = tpe_job_wait_result(job, tu_rnd(&rs, 2) ? 0 :
			    100000, &res);
			CHECK((rc == ETIMEDOUT && res == -1) || (rc == 0 &&
			    (res == 0 || res == EIO || res == ECANCELED)),
			    "tpe_job_wait_result: %d, result %d", rc, res);
			break;
		}
		default:
			rc = tpe_job_wait(job, 100000);
			CHECK(rc == ETIMEDOUT || rc == 0 || rc == EIO ||
			    rc == ECANCELED, "tpe_job_wait: %d", rc);
			break;
		}
	}
	return NULL;
}

/*
 * A round with tasklet metrics (tpe_coop_get_metrics(3)), once every job
 * was waited for (quiescent; while jobs run a read is only a sum of
 * counters read one by one): the histogram counts the timed calls, every
 * call with TIME_ALL, and the calls counted are the calls the tasklets
 * saw.
 */
static void
check_metrics(struct coop_round *r, const struct tpe_coop_config *cfg,
    bool quiescent)
{
	static struct tpe_coop_metrics m; /* coop_round runs one at a time */
	uint64_t seen = 0;
	size_t i, j, k;
	int rc = tpe_coop_get_metrics(r->coop, &m, sizeof(m));

	CHECK(rc == 0, "tpe_coop_get_metrics: %d", rc);
	if (rc != 0 || !quiescent)
		return; /* exact only when quiescent (tpe_coop_get_metrics(3)) */
	CHECK(m.call_time.count == m.calls_timed && m.calls_timed <= m.calls,
	    "coop metrics: histogram %" PRIu64 ", timed %" PRIu64
	    ", calls %" PRIu64, m.call_time.count, m.calls_timed, m.calls);
	if ((cfg->flags & TPE_COOP_METRICS_TIME_ALL) != 0)
		CHECK(m.calls_timed == m.calls, "coop metrics: TIME_ALL "
		    "timed %" PRIu64 " of %" PRIu64, m.calls_timed, m.calls);
	for (i = 0; i < NSUB; i++)
		for (j = 0; j < JOBS_PER_SUB; j++)
			for (k = 0; k < r->jobs[i][j].n; k++)
				seen += (uint64_t)__atomic_load_n(
				    &r->jobs[i][j].tl[k].calls,
				    __ATOMIC_RELAXED);
	CHECK(m.calls == seen, "coop metrics: calls %" PRIu64 " != %" PRIu64
	    " the tasklets saw", m.calls, seen);
}

static void
coop_round(uint64_t seed, int baseline)
{
	struct coop_round *r = calloc(1, sizeof(*r));
	struct tpe_coop_config cfg = { 0 };
	pthread_t sub[NSUB], ch;
	void *args[NSUB][2];
	uint64_t rs = seed;
	bool wait_all;
	size_t i, j, k;
	int rc;

	if (r == NULL)
		return;
	r->seed = seed;
	cfg.threads = 1 + tu_rnd(&rs, 4);
	cfg.max_park_ns = tu_rnd(&rs, 2) ? 0 : 1000 * (1 + tu_rnd(&rs, 1000));
	cfg.flags = tu_rnd(&rs, 2) ? TPE_COOP_NO_STEALING : 0;
	/* Metrics in two rounds of three, every call timed in half of them. */
	k = tu_rnd(&rs, 6);
	if (k >= 2)
		cfg.flags |= TPE_COOP_METRICS |
		    (k >= 4 ? TPE_COOP_METRICS_TIME_ALL : 0);
	wait_all = tu_rnd(&rs, 2);
	rc = tpe_coop_create(&r->coop, &cfg, sizeof(cfg));
	if (rc != 0) {
		CHECK(rc == EAGAIN || rc == ENOMEM, "tpe_coop_create: %d", rc);
		free(r);
		return;
	}
	for (i = 0; i < NSUB; i++) {
		args[i][0] = r;
		args[i][1] = (void *)(uintptr_t)i;
		pthread_create(&sub[i], NULL, coop_submitter, args[i]);
	}
	pthread_create(&ch, NULL, coop_chaos, r);
	for (i = 0; i < NSUB; i++)
		pthread_join(sub[i], NULL);
	pthread_join(ch, NULL);
	for (i = 0; i < NSUB; i++)
		for (j = 0; j < JOBS_PER_SUB; j++)
			r->jobs[i][j].wait_rc = r->jobs[i][j].job != NULL &&
			    wait_all ? tpe_job_wait(r->jobs[i][j].job, -1) : -1;
	if ((cfg.flags & TPE_COOP_METRICS) != 0)
		check_metrics(r, &cfg, wait_all);
	rc = tpe_coop_destroy(r->coop);
	CHECK(rc == 0, "tpe_coop_destroy: %d", rc);
	for (i = 0; i < NSUB; i++) {
		for (j = 0; j < JOBS_PER_SUB; j++) {
			struct job_slot *s = &r->jobs[i][j];
			bool all_ok = true, has_eio = false;

			for (k = 0; k < s->n; k++) {
				struct tl *t = &s->tl[k];

				if (s->submit_rc != 0) {
					CHECK(t->calls == 0 && t->ended == 0,
					    "refused job: tasklet called %d, "
					    "ended %d", t->calls, t->ended);
					continue;
				}
				CHECK(t->ended == 1, "tasklet ended %d times",
				    t->ended);
				CHECK(t->result == 0 || t->result == EIO ||
				    t->result == ECANCELED,
				    "end result %d", t->result);
				CHECK(t->result != 0 || t->calls == t->steps + 1,
				    "ended 0 after %d of %d calls", t->calls,
				    t->steps + 1);
				CHECK(t->result != EIO || (t->last == EIO &&
				    t->calls == t->steps + 1),
				    "ended EIO without returning it");
				all_ok = all_ok && t->result == 0;
				has_eio = has_eio || t->result == EIO;
			}
			if (s->job == NULL)
				continue;
			if (s->wait_rc < 0)
				s->wait_rc = tpe_job_wait(s->job, 0);
			{
				int res = -1;

				rc = tpe_job_wait_result(s->job, 0, &res);
				CHECK(rc == 0 && res == s->wait_rc,
				    "tpe_job_wait_result: %d, result %d, "
				    "tpe_job_wait %d", rc, res, s->wait_rc);
			}
			CHECK(s->wait_rc == 0 || s->wait_rc == EIO ||
			    s->wait_rc == ECANCELED, "job result %d",
			    s->wait_rc);
			CHECK(s->wait_rc != 0 || all_ok,
			    "job 0 with a tasklet that did not end 0");
			CHECK(s->wait_rc != EIO || has_eio,
			    "job EIO with no tasklet ending EIO");
			tpe_job_release(s->job);
		}
	}
	CHECK(tu_thread_count_settled(baseline) == baseline,
	    "threads left after a tasklet round");
	free(r);
}

/* ---- thpool rounds ----------------------------------------------------- */

#define THP_JOBS 2000

struct thp_round {
	threadpool tp;
	int ran[NSUB][THP_JOBS];  /* A */
	int added[NSUB][THP_JOBS];
	int done;                 /* A */
	int nthreads;
	uint64_t seed;
};

static uint64_t thp_added, thp_ran, thp_paused;

static void
thp_job(void *arg)
{
	__atomic_add_fetch((int *)arg, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&thp_ran, 1, __ATOMIC_RELAXED);
}

static void *
thp_submitter(void *arg)
{
	struct thp_round *r = ((void **)arg)[0];
	size_t me = (size_t)(uintptr_t)((void **)arg)[1], j;

	for (j = 0; j < THP_JOBS; j++) {
		int rc = thpool_add_work(r->tp, thp_job, &r->ran[me][j]);

		CHECK(rc == 0 || rc == -1, "thpool_add_work: %d", rc);
		r->added[me][j] = rc == 0;
		if (rc == 0)
			__atomic_add_fetch(&thp_added, 1, __ATOMIC_RELAXED);
	}
	__atomic_add_fetch(&r->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *
thp_chaos(void *arg)
{
	struct thp_round *r = arg;
	uint64_t rs = r->seed * 17 + 3;
	bool paused = false;

	while (__atomic_load_n(&r->done, __ATOMIC_ACQUIRE) < NSUB) {
		int w = thpool_num_threads_working(r->tp);

		CHECK(w >= 0 && w <= r->nthreads, "working %d of %d", w,
		    r->nthreads);
		if (tu_rnd(&rs, 4) == 0) {
			if (paused)
				thpool_resume(r->tp);
			else
				thpool_pause(r->tp);
			paused = !paused;
			__atomic_add_fetch(&thp_paused, 1, __ATOMIC_RELAXED);
		}
		sched_yield();
	}
	if (paused)
		thpool_resume(r->tp);
	return NULL;
}

static void
thp_round(uint64_t seed, int baseline)
{
	struct thp_round *r = calloc(1, sizeof(*r));
	pthread_t sub[NSUB], ch;
	void *args[NSUB][2];
	uint64_t rs = seed;
	bool wait_first;
	size_t i, j;

	if (r == NULL)
		return;
	r->seed = seed;
	r->nthreads = 1 + (int)tu_rnd(&rs, 4);
	wait_first = tu_rnd(&rs, 2);
	r->tp = thpool_init(r->nthreads);
	CHECK(r->tp != NULL, "thpool_init(%d) failed", r->nthreads);
	if (r->tp == NULL) {
		free(r);
		return;
	}
	for (i = 0; i < NSUB; i++) {
		args[i][0] = r;
		args[i][1] = (void *)(uintptr_t)i;
		pthread_create(&sub[i], NULL, thp_submitter, args[i]);
	}
	pthread_create(&ch, NULL, thp_chaos, r);
	for (i = 0; i < NSUB; i++)
		pthread_join(sub[i], NULL);
	pthread_join(ch, NULL);
	if (wait_first)
		thpool_wait(r->tp);
	thpool_destroy(r->tp);
	for (i = 0; i < NSUB; i++)
		for (j = 0; j < THP_JOBS; j++) {
			int ran = __atomic_load_n(&r->ran[i][j],
			    __ATOMIC_RELAXED);

			CHECK(r->added[i][j] ? (wait_first ? ran == 1 :
			    ran <= 1) : ran == 0, "thpool job ran %d times "
			    "(added %d, waited %d)", ran, r->added[i][j],
			    wait_first);
		}
	CHECK(tu_thread_count_settled(baseline) == baseline,
	    "threads left after a thpool round");
	free(r);
}

int
main(int argc, char **argv)
{
	int64_t seconds = argc > 1 ? atol(argv[1]) : 10, end;
	const char *e = getenv("TPE_CHAOS_SEED");
	uint64_t seed = e != NULL ? strtoull(e, NULL, 0) :
	    (uint64_t)tu_now_ns();
	unsigned long coop_rounds = 0, thp_rounds = 0;
	/* After a first thread came and went: ThreadSanitizer's own thread
	 * is counted in the baseline. */
	int baseline = tu_thread_baseline(pthread_create);

	printf("chaos_coop: seed 0x%" PRIx64 ", %" PRId64 " s\n", seed,
	    seconds);
	end = tu_now_ns() + seconds * 1000000000;
	while (tu_now_ns() < end) {
		uint64_t rs = seed + coop_rounds + thp_rounds;

		tu_rnd_next(&rs);
		if ((coop_rounds + thp_rounds) % 2 == 0) {
			coop_round(rs, baseline);
			coop_rounds++;
		} else {
			thp_round(rs, baseline);
			thp_rounds++;
		}
	}
	printf("chaos_coop: tasklet rounds %lu: jobs submitted %" PRIu64
	    ", refused %" PRIu64 ", cancels %" PRIu64 "; tasklet calls %"
	    PRIu64 ", tasklets ended %" PRIu64 "\n", coop_rounds,
	    jobs_submitted, jobs_refused, jobs_cancelled, tasklets_called,
	    tasklets_ended);
	printf("chaos_coop: thpool rounds %lu: jobs added %" PRIu64
	    ", ran %" PRIu64 ", pauses/resumes %" PRIu64 "\n", thp_rounds,
	    thp_added, thp_ran, thp_paused);
	printf("chaos_coop: violations %" PRIu64 "\n", violations);
	return violations == 0 ? 0 : 1;
}
