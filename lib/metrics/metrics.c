/* SPDX-License-Identifier: MIT */
/*
 * metrics.c - the per-worker blocks, their merge on read, the reset
 * baseline, the timing of tasks, and the histogram helpers of tpe.h. See
 * metrics.h for the design notes and the legend.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomic.h"
#include "base/fork.h"
#include "base/park.h"
#include "base/sized.h"
#include "base/sync.h"
#include "metrics/metrics.h"

TPE__TLS struct tpe__metrics_worker *tpe__metrics_tls_worker; /* metrics.h */

TPE__TLS unsigned tpe__metrics_tls_tick; /* metrics.h */

void (*tpe__metrics_record_hook)(void); /* metrics.h */
void (*tpe__metrics_wait_hook)(void);   /* metrics.h */

/* A reader that waits for a record under way spins this long, then
 * sleeps up to this long a step (base/park.h): the record is a few dozen
 * instructions, unless its thread was preempted inside them. */
#define WAIT_SPIN_NS INT64_C(20000)
#define WAIT_SLEEP_MAX_NS INT64_C(1000000)

/* Calls a white-box test's hook when one is set (metrics.h). */
static inline void
test_hook(void (**where)(void))
{
	void (*hook)(void) = __atomic_load_n(where, __ATOMIC_RELAXED);

	if (hook != NULL)
		hook();
}

_Static_assert(sizeof(struct tpe__hist) == sizeof(struct tpe_histogram),
    "struct tpe__hist mirrors struct tpe_histogram");

/* ---- the snapshot's layout (base/sized.h) ------------------------------ */

#define END(m) TPE__END_OF(struct tpe_metrics, m)
static const size_t metrics_ends[] = {
	END(pool_size), END(active), END(idle), END(queued), END(blocked),
	END(tasks_run),
	END(tasks_timed), END(idle_waits), END(wakeups), END(spin_hits),
	END(batches), END(steals), END(stolen_tasks), END(reserve_hits),
	END(reserve_misses), END(rejected_abort), END(rejected_caller_runs),
	END(rejected_discard), END(rejected_discard_oldest),
	END(rejected_handler), END(rejected_shutdown), END(threads_started),
	END(threads_retired), END(threads_failed), END(compensations),
	END(timing_period),
	END(queue_wait), END(run_time),
};
_Static_assert(END(run_time) == sizeof(struct tpe_metrics),
    "metrics_ends lists every member");
#undef END
const struct tpe__sized tpe__metrics_layout = {
	sizeof(struct tpe_metrics), metrics_ends,
	sizeof(metrics_ends) / sizeof(metrics_ends[0])
};

/* ---- the plain counts of a read --------------------------------------- */

#define B(f) offsetof(struct tpe__metrics_worker, f)
#define O(f) offsetof(struct tpe_metrics, f)
/* Where each count of a block is, and where it goes in the snapshot. */
static const struct {
	size_t block, out;
} block_counts[TPE__M_PLAIN_BLOCK] = {
	{ B(tasks_untimed), O(tasks_run) },
	{ B(idle_waits), O(idle_waits) },
	{ B(wakeups), O(wakeups) },
	{ B(spin_hits), O(spin_hits) },
	{ B(batches), O(batches) },
	{ B(steals), O(steals) },
	{ B(stolen_tasks), O(stolen_tasks) },
};
/* Where each pool-wide counter goes in the snapshot. */
static const size_t counter_out[TPE__M_COUNT] = {
	[TPE__M_RESERVE_HIT] = O(reserve_hits),
	[TPE__M_RESERVE_MISS] = O(reserve_misses),
	[TPE__M_REJECT_ABORT] = O(rejected_abort),
	[TPE__M_REJECT_CALLER_RUNS] = O(rejected_caller_runs),
	[TPE__M_REJECT_DISCARD] = O(rejected_discard),
	[TPE__M_REJECT_DISCARD_OLDEST] = O(rejected_discard_oldest),
	[TPE__M_REJECT_HANDLER] = O(rejected_handler),
	[TPE__M_REJECT_SHUTDOWN] = O(rejected_shutdown),
	[TPE__M_THREAD_STARTED] = O(threads_started),
	[TPE__M_THREAD_RETIRED] = O(threads_retired),
	[TPE__M_THREAD_FAILED] = O(threads_failed),
};
#undef B
#undef O
/* A plain count's place in the baseline and in a raw read. */
#define COUNTER(c) (TPE__M_PLAIN_BLOCK + (c))

/* ---- the histogram ---------------------------------------------------- */

/* Values below 2^SUB_BITS+1 have a bucket each; each power of two above
 * has 2^SUB_BITS buckets (tpe.h). */
#define SUB_BITS 5
#define SUB (1u << SUB_BITS)
/* The first value that no longer fits: it and above count in the last
 * bucket. */
#define TOP_SHIFT 38
_Static_assert(((TOP_SHIFT - 1 - SUB_BITS) << SUB_BITS) + 2 * SUB ==
    TPE_HISTOGRAM_BUCKETS, "TPE_HISTOGRAM_BUCKETS matches the layout");

size_t
tpe__hist_index(uint64_t v)
{
	unsigned e, shift;

	if (v < SUB)
		return (size_t)v;
	if (v >= (UINT64_C(1) << TOP_SHIFT))
		v = (UINT64_C(1) << TOP_SHIFT) - 1;
	e = 63u - (unsigned)__builtin_clzll(v);
	shift = e - SUB_BITS;
	return ((size_t)shift << SUB_BITS) + (size_t)(v >> shift);
}

uint64_t
tpe_histogram_bucket_lower(size_t bucket)
{
	unsigned shift;

	if (bucket >= TPE_HISTOGRAM_BUCKETS)
		return UINT64_MAX;
	if (bucket < 2 * SUB)
		return bucket;
	shift = (unsigned)(bucket >> SUB_BITS) - 1;
	return (uint64_t)(bucket - ((size_t)shift << SUB_BITS)) << shift;
}

/* The width of a bucket: its values are lower .. lower + width - 1. */
static uint64_t
bucket_width(size_t bucket)
{
	if (bucket < 2 * SUB)
		return 1;
	return UINT64_C(1) << ((bucket >> SUB_BITS) - 1);
}

void
tpe__hist_record(struct tpe__hist *h, uint64_t v, bool shared)
{
	tpe__metrics_add_any(&h->buckets[tpe__hist_index(v)], 1, shared);
	tpe__metrics_add_any(&h->count, 1, shared);
	tpe__metrics_add_any(&h->sum_ns, v, shared);
}

int
tpe_histogram_record(struct tpe_histogram *h, uint64_t value_ns)
{
	if (h == NULL)
		return EINVAL;
	h->buckets[tpe__hist_index(value_ns)]++;
	h->count++;
	h->sum_ns += value_ns;
	return 0;
}

int
tpe_histogram_percentile(const struct tpe_histogram *h, double percentile,
    uint64_t *value_ns)
{
	uint64_t total = 0, rank, seen = 0;
	size_t i;

	if (value_ns != NULL)
		*value_ns = 0;
	/* !(a <= b) also refuses NaN. */
	if (h == NULL || value_ns == NULL || !(percentile >= 0.0) ||
	    !(percentile <= 100.0))
		return EINVAL;
	for (i = 0; i < TPE_HISTOGRAM_BUCKETS; i++)
		total += h->buckets[i];
	if (total == 0)
		return ENOENT;
	/* The smallest value that percentile % of the values are at or
	 * below: the rank ceil(p * total / 100), at least the first. */
	rank = (uint64_t)(percentile / 100.0 * (double)total);
	if ((double)rank < percentile / 100.0 * (double)total)
		rank++;
	if (rank == 0)
		rank = 1;
	if (rank > total)
		rank = total;
	for (i = 0; i < TPE_HISTOGRAM_BUCKETS; i++) {
		seen += h->buckets[i];
		if (seen >= rank)
			break;
	}
	/* The bucket's midpoint: within half a width, 1/64, of any value
	 * in it. */
	*value_ns = tpe_histogram_bucket_lower(i) + (bucket_width(i) - 1) / 2;
	return 0;
}

int
tpe_histogram_mean(const struct tpe_histogram *h, double *mean_ns)
{
	if (mean_ns != NULL)
		*mean_ns = 0.0;
	if (h == NULL || mean_ns == NULL)
		return EINVAL;
	if (h->count == 0)
		return ENOENT;
	*mean_ns = (double)h->sum_ns / (double)h->count;
	return 0;
}

/* ---- the object, its blocks ------------------------------------------- */

int
tpe__metrics_create(struct tpe__metrics **mp, unsigned flags)
{
	struct tpe__metrics *m;

	/* The clock before any stamp (base/tick.h, memory order). */
	tpe__tick_init();
	if (posix_memalign((void **)&m, TPE__CACHE_LINE, sizeof(*m)) != 0)
		return ENOMEM;
	memset(m, 0, sizeof(*m));
	m->time_all = (flags & TPE_METRICS_TIME_ALL) != 0;
	m->fork_gen = tpe__fork_gen();
	*mp = m;
	return 0;
}

void
tpe__metrics_destroy(struct tpe__metrics *m)
{
	struct tpe__metrics_worker *w, *next;

	if (m == NULL)
		return;
	for (w = m->all; w != NULL; w = next) {
		next = w->all_next;
		free(w);
	}
	free(m);
}

struct tpe__metrics_worker *
tpe__metrics_worker_get_locked(struct tpe__metrics *m)
{
	struct tpe__metrics_worker *w = m->free, *head;

	if (w != NULL) {
		m->free = w->free_next;
		w->free_next = NULL;
		return w;
	}
	if (posix_memalign((void **)&w, TPE__CACHE_LINE, sizeof(*w)) != 0)
		return NULL;
	memset(w, 0, sizeof(*w));
	/* Release: pairs with the readers' acquire load of `all`, which
	 * then see the block zeroed. */
	head = tpe__hint_load(&m->all);
	do
		w->all_next = head;
	while (!__atomic_compare_exchange_n(&m->all, &head, w, true,
	    __ATOMIC_RELEASE, __ATOMIC_RELAXED));
	return w;
}

void
tpe__metrics_worker_put_locked(struct tpe__metrics *m,
    struct tpe__metrics_worker *w)
{
	if (w == NULL)
		return;
	w->free_next = m->free;
	m->free = w;
}

/* ---- timing ----------------------------------------------------------- */

/* One record into the writer's set (design notes: the phaser). */
void
tpe__metrics_task_end_slow(struct tpe__metrics_worker *w,
    int64_t accepted_tick, int64_t start_tick)
{
	uint64_t wait_ns = tpe__tick_to_ns(start_tick - accepted_tick);
	uint64_t run_ns = tpe__tick_to_ns(tpe__metrics_clock() - start_tick);
	unsigned seq = tpe__hint_load(&w->seq); /* its own word */
	struct tpe__metrics_timed *t;

	/* (1) Odd, then the phase, both seq_cst: the Dekker pair of
	 * fold_block's store of the phase then load of seq. */
	(void)tpe__exchange(&w->seq, seq + 1);
	t = &w->timed[tpe__dekker_load(&w->phase)];
	tpe__hist_record(&t->queue_wait, wait_ns, false);
	test_hook(&tpe__metrics_record_hook);
	tpe__hist_record(&t->run_time, run_ns, false);
	/* (2) Even again, release: pairs with fold_block's acquire loads
	 * of seq, which then see the record whole. */
	tpe__publish(&w->seq, seq + 2);
}

/* ---- reading ---------------------------------------------------------- */

void
tpe__hist_sum(struct tpe_histogram *dst, const struct tpe__hist *src)
{
	size_t i;

	dst->count += tpe__hint_load(&src->count);
	dst->sum_ns += tpe__hint_load(&src->sum_ns);
	for (i = 0; i < TPE_HISTOGRAM_BUCKETS; i++)
		dst->buckets[i] += tpe__hint_load(&src->buckets[i]);
}

/* The writer of w is inside a record begun at `seq` (odd): waits until
 * seq moves. (2) Acquire: pairs with the writer's release store at the
 * record's end. */
static void
wait_record(const struct tpe__metrics_worker *w, unsigned seq)
{
	struct tpe__backoff b;

	test_hook(&tpe__metrics_wait_hook);
	tpe__backoff_init(&b, WAIT_SPIN_NS, -1, WAIT_SLEEP_MAX_NS);
	while (tpe__observe(&w->seq) == seq)
		(void)tpe__backoff_step(&b);
}

/* The set w's writer recorded into until now, folded into m->timed and
 * zeroed; the writer goes on in the other (design notes). L held. */
static void
fold_block(struct tpe__metrics *m, struct tpe__metrics_worker *w)
{
	unsigned old = tpe__hint_load(&w->phase); /* L: ours to write */
	struct tpe__metrics_timed *t = &w->timed[old];
	unsigned seq;

	/* (1) The phase, then seq, both seq_cst: the Dekker pair of the
	 * writer's exchange of seq then load of the phase. (3) The store
	 * is also the release of the last zeroing of the other set. */
	tpe__dekker_store(&w->phase, old ^ 1);
	seq = tpe__dekker_load(&w->seq);
	if ((seq & 1) != 0 && !tpe__forked_since(m->fork_gen))
		wait_record(w, seq);
	tpe__hist_sum(&m->timed.queue_wait, &t->queue_wait);
	tpe__hist_sum(&m->timed.run_time, &t->run_time);
	memset(t, 0, sizeof(*t));
}

/* Folds every block, then sums the plain counts into raw (the table's
 * order). L held. */
static void
read_raw(struct tpe__metrics *m, uint64_t raw[TPE__M_PLAIN])
{
	struct tpe__metrics_worker *w;
	size_t i;

	memset(raw, 0, TPE__M_PLAIN * sizeof(raw[0]));
	/* Acquire: pairs with the release CAS of worker_get. */
	for (w = tpe__observe(&m->all); w != NULL; w = w->all_next) {
		fold_block(m, w);
		for (i = 0; i < TPE__M_PLAIN_BLOCK; i++)
			raw[i] += tpe__hint_load((uint64_t *)(void *)
			    ((char *)w + block_counts[i].block));
	}
	for (i = 0; i < TPE__M_COUNT; i++)
		raw[COUNTER(i)] = tpe__counter_read(&m->counters[i]);
}

void
tpe__metrics_read_locked(struct tpe__metrics *m, struct tpe_metrics *out)
{
	uint64_t raw[TPE__M_PLAIN], v;
	size_t i;

	memset(out, 0, sizeof(*out));
	read_raw(m, raw);
	for (i = 0; i < TPE__M_PLAIN; i++) {
		v = raw[i] - m->base[i];
		memcpy((char *)out + (i < TPE__M_PLAIN_BLOCK ?
		    block_counts[i].out : counter_out[i - TPE__M_PLAIN_BLOCK]),
		    &v, sizeof(v));
	}
	/* The tasks timed are run too (design notes). */
	out->tasks_timed = m->timed.run_time.count;
	out->tasks_run += out->tasks_timed;
	out->queue_wait = m->timed.queue_wait;
	out->run_time = m->timed.run_time;
	out->timing_period = m->time_all ? 1 : TPE__METRICS_PERIOD;
}

int
tpe__metrics_reset_locked(struct tpe__metrics *m)
{
	read_raw(m, m->base);
	memset(&m->timed, 0, sizeof(m->timed));
	/* The threads alive count as started (design notes). */
	m->base[COUNTER(TPE__M_THREAD_STARTED)] =
	    m->base[COUNTER(TPE__M_THREAD_RETIRED)];
	return 0;
}
