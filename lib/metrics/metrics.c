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
#include "base/sized.h"
#include "base/sync.h"
#include "metrics/metrics.h"

TPE__TLS struct tpe__metrics_worker *tpe__metrics_tls_worker; /* metrics.h */

TPE__TLS unsigned tpe__metrics_tls_tick; /* metrics.h */

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
	free(m->baseline);
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

void
tpe__metrics_task_end_slow(struct tpe__metrics_worker *w,
    int64_t accepted_tick, int64_t start_tick)
{
	int64_t now = tpe__metrics_clock();

	tpe__hist_record(&w->queue_wait,
	    tpe__tick_to_ns(start_tick - accepted_tick), false);
	tpe__hist_record(&w->run_time, tpe__tick_to_ns(now - start_tick),
	    false);
	tpe__metrics_add(&w->tasks_timed, 1);
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

static void
hist_sub(struct tpe_histogram *dst, const struct tpe_histogram *base)
{
	size_t i;

	dst->count -= base->count;
	dst->sum_ns -= base->sum_ns;
	for (i = 0; i < TPE_HISTOGRAM_BUCKETS; i++)
		dst->buckets[i] -= base->buckets[i];
}

/* The raw sums since tpe_create, into out (the counters only). */
static void
read_raw(const struct tpe__metrics *m, struct tpe_metrics *out)
{
	const struct tpe__metrics_worker *w;

	/* Acquire: pairs with the release CAS of worker_get. */
	for (w = tpe__observe(&m->all); w != NULL; w = w->all_next) {
		out->tasks_run += tpe__hint_load(&w->tasks_run);
		out->tasks_timed += tpe__hint_load(&w->tasks_timed);
		out->idle_waits += tpe__hint_load(&w->idle_waits);
		out->wakeups += tpe__hint_load(&w->wakeups);
		out->spin_hits += tpe__hint_load(&w->spin_hits);
		out->batches += tpe__hint_load(&w->batches);
		out->steals += tpe__hint_load(&w->steals);
		out->stolen_tasks += tpe__hint_load(&w->stolen_tasks);
		tpe__hist_sum(&out->queue_wait, &w->queue_wait);
		tpe__hist_sum(&out->run_time, &w->run_time);
	}
#define C(f, i) out->f = tpe__counter_read(&m->counters[i])
	C(reserve_hits, TPE__M_RESERVE_HIT);
	C(reserve_misses, TPE__M_RESERVE_MISS);
	C(rejected_abort, TPE__M_REJECT_ABORT);
	C(rejected_caller_runs, TPE__M_REJECT_CALLER_RUNS);
	C(rejected_discard, TPE__M_REJECT_DISCARD);
	C(rejected_discard_oldest, TPE__M_REJECT_DISCARD_OLDEST);
	C(rejected_handler, TPE__M_REJECT_HANDLER);
	C(rejected_shutdown, TPE__M_REJECT_SHUTDOWN);
	C(threads_started, TPE__M_THREAD_STARTED);
	C(threads_retired, TPE__M_THREAD_RETIRED);
	C(threads_failed, TPE__M_THREAD_FAILED);
#undef C
}

void
tpe__metrics_read_locked(const struct tpe__metrics *m,
    struct tpe_metrics *out)
{
	const struct tpe_metrics *b = m->baseline;

	memset(out, 0, sizeof(*out));
	read_raw(m, out);
	out->timing_period = m->time_all ? 1 : TPE__METRICS_PERIOD;
	if (b == NULL)
		return;
	out->tasks_run -= b->tasks_run;
	out->tasks_timed -= b->tasks_timed;
	out->idle_waits -= b->idle_waits;
	out->wakeups -= b->wakeups;
	out->spin_hits -= b->spin_hits;
	out->batches -= b->batches;
	out->steals -= b->steals;
	out->stolen_tasks -= b->stolen_tasks;
	out->reserve_hits -= b->reserve_hits;
	out->reserve_misses -= b->reserve_misses;
	out->rejected_abort -= b->rejected_abort;
	out->rejected_caller_runs -= b->rejected_caller_runs;
	out->rejected_discard -= b->rejected_discard;
	out->rejected_discard_oldest -= b->rejected_discard_oldest;
	out->rejected_handler -= b->rejected_handler;
	out->rejected_shutdown -= b->rejected_shutdown;
	out->threads_started -= b->threads_started;
	out->threads_retired -= b->threads_retired;
	out->threads_failed -= b->threads_failed;
	hist_sub(&out->queue_wait, &b->queue_wait);
	hist_sub(&out->run_time, &b->run_time);
}

int
tpe__metrics_reset_locked(struct tpe__metrics *m)
{
	if (m->baseline == NULL) {
		m->baseline = malloc(sizeof(*m->baseline));
		if (m->baseline == NULL)
			return ENOMEM;
	}
	memset(m->baseline, 0, sizeof(*m->baseline));
	read_raw(m, m->baseline);
	return 0;
}
