/* SPDX-License-Identifier: MIT */
/*
 * pipeline.c - a log pipeline on cooperative tasklets: a source reads
 * access-log lines, a transform parses them, a blocking sink writes each
 * parsed record to a CSV file and a per-status report at the end. The
 * stages are joined by SPSC rings; a full ring pushes back on its
 * producer, an empty one makes its consumer report no progress.
 *
 *   examples/pipeline [out.csv]     (default: a temporary file, removed)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tpe.h"

#define LINES 20000
#define LINE_MAX_LEN 96
#define BATCH 64

static const char *const paths[] = { "index.html", "api/users",
	"api/orders", "static/app.js", "missing" };
static const int statuses[] = { 200, 200, 201, 304, 404, 500 };

struct record {
	char path[32];
	int status;
	long bytes;
};

/* The "log file": generated lines, so that the example needs no input. */
static char lines[LINES][LINE_MAX_LEN];
static struct record records[LINES];

struct source {
	tpe_ring_t *out;
	size_t next;
};

/* Offers up to BATCH lines; a full ring keeps the rest for the next call. */
static int
source_fn(void *ctx)
{
	struct source *s = ctx;
	int k, rc;

	for (k = 0; k < BATCH && s->next < LINES; k++) {
		rc = tpe_ring_offer(s->out, lines[s->next]);
		if (rc == EAGAIN)
			return k > 0 ? TPE_MADE_PROGRESS : TPE_NO_PROGRESS;
		if (rc != 0)
			return rc;
		s->next++;
	}
	if (s->next < LINES)
		return TPE_MADE_PROGRESS;
	tpe_ring_close(s->out);
	return TPE_DONE;
}

struct transform {
	tpe_ring_t *in, *out;
	struct record *pending; /* parsed, not yet taken by the sink */
	size_t parsed;
};

static int
parse(const char *line, struct record *r)
{
	if (sscanf(line, "%*s - - [%*[^]]] \"%*s /%31s %*[^\"]\" %d %ld",
	    r->path, &r->status, &r->bytes) != 3)
		return EBADMSG;
	return 0;
}

static int
transform_fn(void *ctx)
{
	struct transform *t = ctx;
	int k, rc;
	void *item;

	for (k = 0; k < BATCH; k++) {
		if (t->pending == NULL) {
			rc = tpe_ring_poll(t->in, &item);
			if (rc == EAGAIN)
				break;
			if (rc == EPIPE) {
				tpe_ring_close(t->out);
				return TPE_DONE;
			}
			t->pending = &records[t->parsed];
			if ((rc = parse(item, t->pending)) != 0)
				return rc;
			t->parsed++;
		}
		if (tpe_ring_offer(t->out, t->pending) == EAGAIN)
			break;
		t->pending = NULL;
	}
	return k > 0 ? TPE_MADE_PROGRESS : TPE_NO_PROGRESS;
}

struct sink {
	tpe_ring_t *in;
	FILE *csv;
	size_t count[600];
	long bytes[600];
	size_t total;
};

/* Blocking: it writes to a file, so it has a thread of its own. */
static int
sink_fn(void *ctx)
{
	struct sink *s = ctx;
	void *items[BATCH];
	size_t n, i;
	int rc, st;

	rc = tpe_ring_drain(s->in, items, BATCH, &n);
	if (rc == EAGAIN)
		return TPE_NO_PROGRESS;
	if (rc == EPIPE) {
		fprintf(s->csv, "# status,requests,bytes\n");
		for (st = 0; st < 600; st++)
			if (s->count[st] > 0)
				fprintf(s->csv, "# %d,%zu,%ld\n", st,
				    s->count[st], s->bytes[st]);
		return fflush(s->csv) == 0 ? TPE_DONE : EIO;
	}
	for (i = 0; i < n; i++) {
		const struct record *r = items[i];

		if (r->status < 0 || r->status >= 600)
			return EBADMSG;
		s->count[r->status]++;
		s->bytes[r->status] += r->bytes;
		s->total++;
		if (fprintf(s->csv, "%s,%d,%ld\n", r->path, r->status,
		    r->bytes) < 0)
			return EIO;
	}
	return TPE_MADE_PROGRESS;
}

static void
make_log(void)
{
	size_t i;

	for (i = 0; i < LINES; i++)
		snprintf(lines[i], LINE_MAX_LEN,
		    "10.0.0.%zu - - [23/Nov/2026:10:%02zu:%02zu +0000] "
		    "\"GET /%s HTTP/1.1\" %d %zu", i % 250, i / 60 % 60,
		    i % 60, paths[i % 5], statuses[i % 6], 100 + i % 900);
}

int
main(int argc, char **argv)
{
	char tmp[] = "/tmp/tpe-pipeline-XXXXXX";
	const char *out = argc > 1 ? argv[1] : NULL;
	tpe_ring_t *r1 = NULL, *r2 = NULL;
	struct source src = { 0 };
	struct transform tr = { 0 };
	static struct sink sink;
	tpe_coop_t *coop;
	tpe_job_t *job;
	int rc, fd, st;

	make_log();
	if (out == NULL) {
		if ((fd = mkstemp(tmp)) < 0) {
			perror("mkstemp");
			return 1;
		}
		sink.csv = fdopen(fd, "w");
	} else {
		sink.csv = fopen(out, "w");
	}
	if (sink.csv == NULL) {
		perror("open");
		return 1;
	}
	if ((rc = tpe_ring_create(&r1, 256)) != 0 ||
	    (rc = tpe_ring_create(&r2, 256)) != 0 ||
	    (rc = tpe_coop_create(&coop, NULL, 0)) != 0) {
		fprintf(stderr, "pipeline: %s\n", strerror(rc));
		return 1;
	}
	src.out = r1;
	tr.in = r1;
	tr.out = r2;
	sink.in = r2;
	{
		struct tpe_tasklet stages[] = {
			{ source_fn, &src, NULL, 0 },
			{ transform_fn, &tr, NULL, 0 },
			{ sink_fn, &sink, NULL, TPE_TASKLET_BLOCKING },
		};

		rc = tpe_coop_submit(coop, stages, 3, sizeof(stages[0]), &job);
	}
	if (rc != 0) {
		fprintf(stderr, "pipeline: submit: %s\n", strerror(rc));
		return 1;
	}
	rc = tpe_job_wait(job, -1);
	tpe_job_release(job);
	tpe_coop_destroy(coop);
	tpe_ring_destroy(r1);
	tpe_ring_destroy(r2);
	fclose(sink.csv);
	if (out == NULL)
		unlink(tmp);
	if (rc != 0) {
		fprintf(stderr, "pipeline: %s\n", strerror(rc));
		return 1;
	}
	printf("%zu requests\nstatus  requests     bytes\n", sink.total);
	for (st = 0; st < 600; st++)
		if (sink.count[st] > 0)
			printf("%6d  %8zu  %8ld\n", st, sink.count[st],
			    sink.bytes[st]);
	return sink.total == LINES ? 0 : 1;
}
