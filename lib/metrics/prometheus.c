/* SPDX-License-Identifier: MIT */
/*
 * prometheus.c - a struct tpe_metrics in the Prometheus text exposition
 * format (version 0.0.4), to a FILE * or a buffer
 * (tpe_metrics_write_prometheus(3)).
 *
 * One writer, two sinks: each line is formatted with vfprintf to the
 * stream, or with vsnprintf into the buffer while counting the bytes the
 * whole text needs, so that a buffer too small says how large one must
 * be. No lock, no allocation: the snapshot is the caller's.
 *
 * The histograms are cut into 17 cumulative buckets, le = 2^7, 2^9, ...,
 * 2^37 ns (128 ns to 137 s, a factor of 4 apart) and +Inf: each le is a
 * bound of the log-linear buckets of tpe.h, so every count is exact (it
 * counts the values of at most le - 1 ns).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "metrics/metrics.h"

struct sink {
	FILE *f;       /* the stream, or NULL: the buffer */
	char *buf;
	size_t len;
	size_t pos;    /* bytes the text needs so far (without the NUL) */
	int err;
};

static void emit(struct sink *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
emit(struct sink *s, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (s->err != 0)
		return;
	va_start(ap, fmt);
	if (s->f != NULL) {
		if (vfprintf(s->f, fmt, ap) < 0)
			s->err = EIO;
	} else {
		n = vsnprintf(s->pos < s->len ? s->buf + s->pos : NULL,
		    s->pos < s->len ? s->len - s->pos : 0, fmt, ap);
		if (n < 0)
			s->err = EIO;
		else
			s->pos += (size_t)n;
	}
	va_end(ap);
}

/* A metric name: [a-zA-Z_:][a-zA-Z0-9_:]*. */
static bool
valid_prefix(const char *p)
{
	size_t i;

	if (p[0] == '\0' || (p[0] >= '0' && p[0] <= '9'))
		return false;
	for (i = 0; p[i] != '\0'; i++) {
		char c = p[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '_' || c == ':'))
			return false;
	}
	return true;
}

/* The caller's label pairs go between braces as they are: no brace and
 * no line break in them. */
static bool
valid_labels(const char *l)
{
	return strpbrk(l, "{}\n") == NULL;
}

struct names {
	const char *prefix;
	const char *labels; /* "" for none */
};

/* The "{labels}" of a sample, or "". */
static void
emit_labels(struct sink *s, const struct names *n, const char *extra)
{
	bool any = n->labels[0] != '\0';

	if (!any && extra == NULL)
		return;
	emit(s, "{%s%s%s}", n->labels, any && extra != NULL ? "," : "",
	    extra != NULL ? extra : "");
}

static void
emit_head(struct sink *s, const struct names *n, const char *name,
    const char *type, const char *help)
{
	emit(s, "# HELP %s_%s %s\n# TYPE %s_%s %s\n", n->prefix, name, help,
	    n->prefix, name, type);
}

/* A counter or a gauge: its head and its one sample. */
static void
emit_one(struct sink *s, const struct names *n, const char *type,
    const char *name, const char *help, uint64_t v)
{
	emit_head(s, n, name, type, help);
	emit(s, "%s_%s", n->prefix, name);
	emit_labels(s, n, NULL);
	emit(s, " %" PRIu64 "\n", v);
}

#define emit_counter(s, n, name, help, v) \
	emit_one((s), (n), "counter", (name), (help), (v))
#define emit_gauge(s, n, name, help, v) \
	emit_one((s), (n), "gauge", (name), (help), (v))

static void
emit_histogram(struct sink *s, const struct names *n, const char *name,
    const char *help, const struct tpe_histogram *h)
{
	uint64_t cum = 0, total = 0;
	size_t i = 0, end;
	unsigned k;
	char le[48];

	for (end = 0; end < TPE_HISTOGRAM_BUCKETS; end++)
		total += h->buckets[end];
	emit_head(s, n, name, "histogram", help);
	for (k = 7; k <= 37; k += 2) {
		/* The buckets below 2^k ns. */
		end = tpe__hist_index(UINT64_C(1) << k);
		for (; i < end; i++)
			cum += h->buckets[i];
		snprintf(le, sizeof(le), "le=\"%.12g\"",
		    (double)(UINT64_C(1) << k) / 1e9);
		emit(s, "%s_%s_bucket", n->prefix, name);
		emit_labels(s, n, le);
		emit(s, " %" PRIu64 "\n", cum);
	}
	emit(s, "%s_%s_bucket", n->prefix, name);
	emit_labels(s, n, "le=\"+Inf\"");
	emit(s, " %" PRIu64 "\n", total);
	emit(s, "%s_%s_sum", n->prefix, name);
	emit_labels(s, n, NULL);
	emit(s, " %" PRIu64 ".%09" PRIu64 "\n", h->sum_ns / 1000000000u,
	    h->sum_ns % 1000000000u);
	emit(s, "%s_%s_count", n->prefix, name);
	emit_labels(s, n, NULL);
	emit(s, " %" PRIu64 "\n", total);
}

static void
emit_all(struct sink *s, const struct names *n, const struct tpe_metrics *m)
{
	static const struct {
		const char *cause;
		size_t off;
	} rejections[] = {
		{ "abort", offsetof(struct tpe_metrics, rejected_abort) },
		{ "caller_runs",
		    offsetof(struct tpe_metrics, rejected_caller_runs) },
		{ "discard", offsetof(struct tpe_metrics, rejected_discard) },
		{ "discard_oldest",
		    offsetof(struct tpe_metrics, rejected_discard_oldest) },
		{ "handler", offsetof(struct tpe_metrics, rejected_handler) },
		{ "shutdown",
		    offsetof(struct tpe_metrics, rejected_shutdown) },
	};
	size_t i;

	emit_gauge(s, n, "threads", "Live worker threads.", m->pool_size);
	emit_gauge(s, n, "active_threads", "Workers running a task.",
	    m->active);
	emit_gauge(s, n, "idle_threads", "Workers waiting for a task.",
	    m->idle);
	emit_gauge(s, n, "queued_tasks", "Tasks waiting to start.",
	    m->queued);
	emit_gauge(s, n, "blocked_threads",
	    "Workers inside a blocking section (tpe_blocking_begin).",
	    m->blocked);
	emit_counter(s, n, "tasks_run_total", "Tasks the workers ran.",
	    m->tasks_run);
	emit_counter(s, n, "tasks_timed_total",
	    "Tasks timed into the histograms.", m->tasks_timed);
	emit_counter(s, n, "idle_waits_total",
	    "Times a worker went to sleep for lack of work.", m->idle_waits);
	emit_counter(s, n, "wakeups_total", "Times a sleeping worker woke.",
	    m->wakeups);
	emit_counter(s, n, "spin_hits_total",
	    "Spins of an idle worker that saw a task come.", m->spin_hits);
	emit_counter(s, n, "batches_total",
	    "Stacks a per-worker pool's workers took whole.", m->batches);
	emit_counter(s, n, "steals_total",
	    "Batches taken from another worker.", m->steals);
	emit_counter(s, n, "stolen_tasks_total", "Tasks in stolen batches.",
	    m->stolen_tasks);
	emit_counter(s, n, "reserve_hits_total",
	    "tpe_try_execute calls that found a reserved thread.",
	    m->reserve_hits);
	emit_counter(s, n, "reserve_misses_total",
	    "tpe_try_execute calls that found none.", m->reserve_misses);
	emit_head(s, n, "rejected_total", "counter",
	    "Submissions rejected, by cause.");
	for (i = 0; i < sizeof(rejections) / sizeof(rejections[0]); i++) {
		char cause[48];
		uint64_t v;

		memcpy(&v, (const char *)m + rejections[i].off, sizeof(v));
		snprintf(cause, sizeof(cause), "cause=\"%s\"",
		    rejections[i].cause);
		emit(s, "%s_rejected_total", n->prefix);
		emit_labels(s, n, cause);
		emit(s, " %" PRIu64 "\n", v);
	}
	emit_counter(s, n, "threads_started_total",
	    "Worker threads started.", m->threads_started);
	emit_counter(s, n, "threads_retired_total",
	    "Worker threads that exited.", m->threads_retired);
	emit_counter(s, n, "threads_failed_total",
	    "Worker thread starts that failed.", m->threads_failed);
	emit_counter(s, n, "compensations_total",
	    "Workers started to stand in for blocked ones.",
	    m->compensations);
	emit_histogram(s, n, "queue_wait_seconds",
	    "Time from acceptance to start of the timed tasks.",
	    &m->queue_wait);
	emit_histogram(s, n, "run_time_seconds",
	    "Run time of the timed tasks, hooks included.", &m->run_time);
}

/* The checks both writers share: 0 or EINVAL. */
static int
check(const struct tpe_metrics *m, size_t size, const char *prefix,
    const char *labels, struct names *n)
{
	if (m == NULL || size < sizeof(struct tpe_metrics))
		return EINVAL;
	n->prefix = prefix != NULL ? prefix : "tpe";
	n->labels = labels != NULL ? labels : "";
	if (!valid_prefix(n->prefix) || !valid_labels(n->labels))
		return EINVAL;
	return 0;
}

int
tpe_metrics_write_prometheus(FILE *out, const struct tpe_metrics *metrics,
    size_t size, const char *prefix, const char *labels)
{
	struct sink s = { out, NULL, 0, 0, 0 };
	struct names n;

	if (out == NULL || check(metrics, size, prefix, labels, &n) != 0)
		return EINVAL;
	emit_all(&s, &n, metrics);
	return s.err;
}

int
tpe_metrics_format_prometheus(char *buf, size_t len, size_t *needed,
    const struct tpe_metrics *metrics, size_t size, const char *prefix,
    const char *labels)
{
	struct sink s = { NULL, buf, len, 0, 0 };
	struct names n;

	if (needed != NULL)
		*needed = 0;
	if ((buf == NULL && len > 0) ||
	    check(metrics, size, prefix, labels, &n) != 0)
		return EINVAL;
	emit_all(&s, &n, metrics);
	if (s.err != 0)
		return s.err;
	if (needed != NULL)
		*needed = s.pos + 1;
	if (s.pos >= len) {
		if (len > 0)
			buf[0] = '\0';
		return ERANGE;
	}
	return 0;
}
