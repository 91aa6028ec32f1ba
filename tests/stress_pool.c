/* SPDX-License-Identifier: MIT */
/*
 * stress_pool.c - the exactly-once disposition invariant under races.
 *
 *   stress_pool [threads] [tasks] [seconds] [seed]
 *
 * Defaults: 4 submitter threads, 10^6 tasks in all, 120 s, a seed from the
 * clock (printed, so a failing run can be repeated). Round after round it
 * creates a pool with a random configuration (core, max, queue kind and
 * capacity, sizing policy, rejection policy or a custom handler), starts
 * the submitters on a barrier (execute and submit, some futures cancelled),
 * and a controller that at a random point calls tpe_shutdown,
 * tpe_shutdown_now (its drained callback counts hand-backs) or nothing
 * (tpe_destroy after the submitters finish). Every task owns a slot; at the
 * end of each round:
 *   - an accepted task (0 returned) ran or was handed back exactly once;
 *   - a refused task (an error returned) neither ran nor was handed back;
 *   - ran + handed back + refused == attempts;
 *   - after ECANCELED, a submitter only ever sees ECANCELED again;
 *   - a future is done: value if it ran, ECANCELED if it was handed back.
 * Exits 0 when every check held, 1 otherwise (printing the first ones);
 * alarm(seconds) bounds the run (a hang is a failure).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tpe.h"

#define MAX_THREADS 64
#define MAX_REPORTS 20

/* ---- random numbers (xorshift64*) ------------------------------------- */

static uint64_t
rnd_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * UINT64_C(2685821657736338717);
}

static unsigned
rnd(uint64_t *s, unsigned n)
{
	return n ? (unsigned)(rnd_next(s) % n) : 0;
}

static int64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- violations -------------------------------------------------------- */

static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long violations;
static unsigned long round_no;

static void
violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
violation(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&report_lock);
	if (violations++ < MAX_REPORTS) {
		fprintf(stderr, "VIOLATION (round %lu): ", round_no);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fputc('\n', stderr);
	}
	pthread_mutex_unlock(&report_lock);
}

/* ---- slots and tasks --------------------------------------------------- */

enum { K_EXECUTE, K_SUBMIT };

struct slot {
	int ran;            /* atomic: times the task body ran */
	int handed;         /* atomic: times it was handed back */
	int rc;             /* the submitting call's result; -1 not attempted */
	int kind;
	tpe_future_t *f;
};

static void
slot_run(void *arg)
{
	__atomic_add_fetch(&((struct slot *)arg)->ran, 1, __ATOMIC_RELAXED);
}

static void *
slot_call(void *arg)
{
	__atomic_add_fetch(&((struct slot *)arg)->ran, 1, __ATOMIC_RELAXED);
	return arg;
}

static void
slot_handback(tpe_fn fn, void *arg, void *ctx)
{
	struct slot *s = arg;

	(void)ctx;
	if (s->kind == K_EXECUTE && fn != slot_run)
		violation("hand-back of an execute task with fn %p", (void *)fn);
	if (s->kind == K_SUBMIT && fn != NULL)
		violation("hand-back of a submit task with fn != NULL");
	__atomic_add_fetch(&s->handed, 1, __ATOMIC_RELAXED);
}

/* A custom rejection handler: takes (runs) or refuses, at random. */
static int
custom_reject(tpe_t *pool, tpe_fn fn, void *arg, void *ctx)
{
	uint64_t x = (uint64_t)(uintptr_t)arg ^ (uint64_t)(uintptr_t)ctx;

	(void)pool;
	if ((x >> 4) % 3 == 0)
		return EAGAIN;
	fn(arg);
	return 0;
}

/* ---- one round ---------------------------------------------------------- */

struct round {
	tpe_t *pool;
	struct slot *slots;
	size_t n;
	int nthreads;
	uint64_t seed;
	pthread_barrier_t start;
	unsigned long attempts;  /* atomic: calls made so far (all threads) */
};

struct submitter {
	pthread_t thread;
	struct round *r;
	int idx;
};

static void *
submitter_main(void *arg)
{
	struct submitter *sub = arg;
	struct round *r = sub->r;
	size_t per = r->n / (size_t)r->nthreads;
	size_t lo = per * (size_t)sub->idx;
	size_t hi = sub->idx == r->nthreads - 1 ? r->n : lo + per;
	uint64_t rs = r->seed ^ ((uint64_t)sub->idx * UINT64_C(0x9e3779b97f4a7c15));
	bool cancelled = false;
	size_t i;

	rs |= 1;
	pthread_barrier_wait(&r->start);
	for (i = lo; i < hi; i++) {
		struct slot *s = &r->slots[i];
		int rc;

		if (rnd(&rs, 10) < 7) {
			s->kind = K_EXECUTE;
			rc = tpe_execute(r->pool, slot_run, s);
		} else {
			s->kind = K_SUBMIT;
			rc = tpe_submit(r->pool, slot_call, s, &s->f);
			if (rc == 0 && rnd(&rs, 20) == 0)
				(void)tpe_future_cancel(s->f);
		}
		s->rc = rc;
		__atomic_add_fetch(&r->attempts, 1, __ATOMIC_RELAXED);
		if (rc != 0 && rc != EAGAIN && rc != ECANCELED)
			violation("slot %zu: unexpected return value %d", i, rc);
		if (cancelled && rc != ECANCELED)
			violation("slot %zu: %d after ECANCELED", i, rc);
		if (rc == ECANCELED)
			cancelled = true;
	}
	return NULL;
}

struct totals {
	uint64_t attempts, accepted, ran, handed, refused_again, refused_cancel;
	uint64_t rounds, shutdowns, shutdown_nows, destroys;
};

static const char *queue_names[] = { "unbounded", "bounded", "handoff",
	"per-worker" };
static const char *rej_names[] = { "abort", "caller-runs", "discard",
	"discard-oldest", "custom" };

static void
run_round(struct totals *t, int nthreads, size_t n, uint64_t *rs, bool verbose)
{
	struct submitter subs[MAX_THREADS];
	struct round r;
	tpe_attr_t *a;
	size_t core, max, cap = 0, i;
	unsigned kind, rej, policy, mode;
	unsigned long trigger;
	struct tpe_stats st;
	int rc, k;

	memset(&r, 0, sizeof(r));
	r.n = n;
	r.nthreads = nthreads;
	r.seed = rnd_next(rs);
	r.slots = calloc(n, sizeof(*r.slots));
	if (r.slots == NULL) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	for (i = 0; i < n; i++)
		r.slots[i].rc = -1;

	core = rnd(rs, 5);
	max = core + 1 + rnd(rs, 4);
	kind = rnd(rs, 4);
	if (kind == TPE_QUEUE_BOUNDED)
		cap = 1 + rnd(rs, 64);
	rej = rnd(rs, 5);
	policy = rnd(rs, 2);
	if (kind == TPE_QUEUE_PER_WORKER) {
		/* A fixed, queue-first pool only (tpe_attr_set_queue(3)). */
		core = max;
		policy = TPE_POLICY_QUEUE_FIRST;
	}
	mode = rnd(rs, 3);          /* 0 nothing, 1 shutdown, 2 shutdown_now */
	trigger = rnd(rs, (unsigned)n + 1);

	if (tpe_attr_create(&a) != 0 ||
	    tpe_attr_set_pool_size(a, core, max) != 0 ||
	    tpe_attr_set_keep_alive(a, (int64_t)rnd(rs, 3) * 1000000) != 0 ||
	    tpe_attr_set_queue(a, (enum tpe_queue_kind)kind, cap) != 0 ||
	    tpe_attr_set_policy(a, (enum tpe_policy)policy) != 0 ||
	    tpe_attr_set_discard_callback(a, slot_handback, NULL) != 0) {
		fprintf(stderr, "attribute setup failed\n");
		exit(1);
	}
	if (rej < 4)
		rc = tpe_attr_set_rejection(a, (enum tpe_rejection)rej);
	else
		rc = tpe_attr_set_rejection_handler(a, custom_reject,
		    (void *)(uintptr_t)r.seed);
	if (rc != 0 || tpe_create(&r.pool, a) != 0) {
		fprintf(stderr, "pool creation failed\n");
		exit(1);
	}
	tpe_attr_destroy(a);
	if (verbose)
		printf("round %lu: n=%zu core=%zu max=%zu queue=%s/%zu "
		    "policy=%s reject=%s action=%s at %lu\n", round_no, n,
		    core, max, queue_names[kind], cap,
		    policy ? "scale-first" : "queue-first", rej_names[rej],
		    mode == 0 ? "none" : mode == 1 ? "shutdown" :
		    "shutdown_now", trigger);

	if (pthread_barrier_init(&r.start, NULL, (unsigned)nthreads + 1) != 0) {
		fprintf(stderr, "barrier failed\n");
		exit(1);
	}
	for (k = 0; k < nthreads; k++) {
		subs[k].r = &r;
		subs[k].idx = k;
		if (pthread_create(&subs[k].thread, NULL, submitter_main,
		    &subs[k]) != 0) {
			fprintf(stderr, "pthread_create failed\n");
			exit(1);
		}
	}
	pthread_barrier_wait(&r.start);
	/* The controller: wait for the trigger point, purging now and then. */
	if (mode != 0) {
		unsigned spins = 0;

		while (__atomic_load_n(&r.attempts, __ATOMIC_RELAXED) < trigger) {
			if (++spins % 64 == 0)
				(void)tpe_purge(r.pool, NULL);
			sched_yield();
		}
		if (mode == 1)
			rc = tpe_shutdown(r.pool);
		else
			rc = tpe_shutdown_now(r.pool, slot_handback, NULL);
		if (rc != 0)
			violation("shutdown%s returned %d", mode == 2 ? "_now" :
			    "", rc);
	}
	for (k = 0; k < nthreads; k++)
		pthread_join(subs[k].thread, NULL);

	if (mode == 0) {
		t->destroys++;
		rc = tpe_destroy(r.pool);
		if (rc != 0)
			violation("tpe_destroy returned %d", rc);
	} else {
		if (mode == 1)
			t->shutdowns++;
		else
			t->shutdown_nows++;
		rc = tpe_await_termination(r.pool, -1);
		if (rc != 0)
			violation("tpe_await_termination returned %d", rc);
		if (!tpe_is_terminated(r.pool))
			violation("not terminated after await_termination");
		if (tpe_get_stats(r.pool, &st, sizeof(st)) != 0)
			violation("tpe_get_stats failed");
		else if (st.pool_size != 0 || st.active != 0 || st.idle != 0 ||
		    st.queued != 0)
			violation("terminated pool: size %zu active %zu idle %zu "
			    "queued %zu", st.pool_size, st.active, st.idle,
			    st.queued);
		rc = tpe_destroy(r.pool);
		if (rc != 0)
			violation("tpe_destroy returned %d", rc);
	}

	/* The invariant, slot by slot. */
	for (i = 0; i < n; i++) {
		struct slot *s = &r.slots[i];
		int ran = __atomic_load_n(&s->ran, __ATOMIC_SEQ_CST);
		int handed = __atomic_load_n(&s->handed, __ATOMIC_SEQ_CST);
		void *res = NULL;

		if (s->rc == -1) {
			violation("slot %zu was never attempted", i);
			continue;
		}
		t->attempts++;
		t->ran += (uint64_t)ran;
		t->handed += (uint64_t)handed;
		if (s->rc != 0) {
			if (s->rc == ECANCELED)
				t->refused_cancel++;
			else
				t->refused_again++;
			if (ran + handed != 0)
				violation("slot %zu (%s) refused with %d but ran "
				    "%d, handed back %d", i, s->kind == K_SUBMIT ?
				    "submit" : "execute", s->rc, ran, handed);
			continue;
		}
		t->accepted++;
		if (ran + handed != 1)
			violation("slot %zu (%s) accepted but ran %d, handed "
			    "back %d", i, s->kind == K_SUBMIT ? "submit" :
			    "execute", ran, handed);
		if (s->kind == K_SUBMIT) {
			if (!tpe_future_is_done(s->f))
				violation("slot %zu: future not done", i);
			rc = tpe_future_get(s->f, 0, &res);
			if (ran == 1 && (rc != 0 || res != s))
				violation("slot %zu: ran but get = %d", i, rc);
			if (handed == 1 && rc != ECANCELED)
				violation("slot %zu: handed back but get = %d",
				    i, rc);
			tpe_future_release(s->f);
		}
	}
	pthread_barrier_destroy(&r.start);
	free(r.slots);
	t->rounds++;
}

static void
on_alarm(int sig)
{
	static const char msg[] =
	    "stress_pool: time bound exceeded (hang?)\n";

	(void)sig;
	(void)!write(2, msg, sizeof(msg) - 1);
	_exit(1);
}

int
main(int argc, char **argv)
{
	int nthreads = argc > 1 ? atoi(argv[1]) : 4;
	uint64_t tasks = argc > 2 ? strtoull(argv[2], NULL, 10) : 1000000;
	unsigned seconds = argc > 3 ? (unsigned)atoi(argv[3]) : 120;
	uint64_t seed = argc > 4 ? strtoull(argv[4], NULL, 0) :
	    (uint64_t)now_ns() ^ ((uint64_t)getpid() << 32);
	bool verbose = getenv("STRESS_VERBOSE") != NULL;
	struct totals t;
	uint64_t rs, done = 0;
	int64_t t0, budget;

	if (nthreads < 1 || nthreads > MAX_THREADS || seconds == 0) {
		fprintf(stderr, "usage: %s [threads 1..%d] [tasks] [seconds] "
		    "[seed]\n", argv[0], MAX_THREADS);
		return 2;
	}
	signal(SIGALRM, on_alarm);
	alarm(seconds);
	printf("stress_pool: threads=%d tasks=%" PRIu64 " seconds=%u "
	    "seed=0x%" PRIx64 "\n", nthreads, tasks, seconds, seed);
	fflush(stdout);
	memset(&t, 0, sizeof(t));
	rs = seed | 1;
	t0 = now_ns();
	/* Stop starting rounds at 3/4 of the bound; the alarm catches hangs. */
	budget = (int64_t)seconds * 750000000;
	while (done < tasks && now_ns() - t0 < budget) {
		size_t n = 64 + rnd(&rs, 8192);

		if (n > tasks - done)
			n = (size_t)(tasks - done);
		if (n < (size_t)nthreads)
			n = (size_t)nthreads;
		round_no++;
		run_round(&t, nthreads, n, &rs, verbose);
		done += n;
		if (violations != 0)
			break;
	}
	alarm(0);
	printf("stress_pool: %" PRIu64 " rounds (%" PRIu64 " shutdown, %"
	    PRIu64 " shutdown_now, %" PRIu64 " destroy), %.1f s\n",
	    t.rounds, t.shutdowns, t.shutdown_nows, t.destroys,
	    (double)(now_ns() - t0) / 1e9);
	printf("stress_pool: attempts %" PRIu64 " = accepted %" PRIu64
	    " + refused %" PRIu64 " (EAGAIN) + %" PRIu64 " (ECANCELED)\n",
	    t.attempts, t.accepted, t.refused_again, t.refused_cancel);
	printf("stress_pool: accepted %" PRIu64 " = ran %" PRIu64
	    " + handed back %" PRIu64 "\n", t.accepted, t.ran, t.handed);
	if (done < tasks)
		printf("stress_pool: time budget reached after %" PRIu64
		    " of %" PRIu64 " tasks\n", done, tasks);
	if (t.ran + t.handed + t.refused_again + t.refused_cancel != t.attempts)
		violation("totals: ran %" PRIu64 " + handed %" PRIu64
		    " + refused %" PRIu64 " != attempts %" PRIu64, t.ran,
		    t.handed, t.refused_again + t.refused_cancel, t.attempts);
	if (violations != 0) {
		fprintf(stderr, "stress_pool: FAILED, %lu violation(s), seed "
		    "0x%" PRIx64 "\n", violations, seed);
		return 1;
	}
	printf("stress_pool: OK\n");
	return 0;
}
