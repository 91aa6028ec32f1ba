/* SPDX-License-Identifier: MIT */
/*
 * latency_plot.c - what a pool's metrics show of a mixed load: short tasks
 * (about 2 us of work), a few long ones (1 ms asleep) among them, offered
 * faster than the pool drains them at times, on a pool with metrics on and
 * every task timed (tpe_attr_set_metrics(3)). Prints the percentiles of
 * the two histograms, queue wait (accepted -> started) and run time
 * (started -> finished), and writes them as a table for gnuplot:
 *
 *	latency_plot [DATA [PNG]]
 *
 * DATA (default latency_plot.dat) gets one line per non-empty bucket:
 * "lower_ns queue_wait_count run_time_count". With PNG, it runs gnuplot
 * (if it is installed) to draw both histograms on a log scale into PNG;
 * without gnuplot it says so and still exits 0.
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <tpe.h>

#define TASKS 20000
#define LONG_EVERY 200 /* one task in 200 sleeps 1 ms */

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void
short_task(void *arg)
{
	uint64_t end = now_ns() + 2000;

	(void)arg;
	while (now_ns() < end)
		;
}

static void
long_task(void *arg)
{
	struct timespec ms = { 0, 1000000 };

	(void)arg;
	nanosleep(&ms, NULL);
}

static void
print_percentiles(const char *name, const struct tpe_histogram *h)
{
	static const double p[] = { 50, 90, 99, 99.9 };
	uint64_t v;
	double mean;
	size_t i;

	printf("%-10s count %" PRIu64, name, h->count);
	if (tpe_histogram_mean(h, &mean) == 0)
		printf("  mean %.1f us", mean / 1000);
	for (i = 0; i < sizeof(p) / sizeof(p[0]); i++)
		if (tpe_histogram_percentile(h, p[i], &v) == 0)
			printf("  p%g %.1f us", p[i], (double)v / 1000);
	printf("\n");
}

static int
write_table(const char *path, const struct tpe_metrics *m)
{
	FILE *f = fopen(path, "w");
	size_t b;

	if (f == NULL) {
		perror(path);
		return -1;
	}
	fprintf(f, "# lower_ns queue_wait run_time\n");
	for (b = 0; b < TPE_HISTOGRAM_BUCKETS; b++)
		if (m->queue_wait.buckets[b] != 0 || m->run_time.buckets[b] != 0)
			fprintf(f, "%" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
			    tpe_histogram_bucket_lower(b),
			    m->queue_wait.buckets[b], m->run_time.buckets[b]);
	return fclose(f) == 0 ? 0 : -1;
}

static void
plot(const char *data, const char *png)
{
	FILE *g = popen("gnuplot 2>/dev/null", "w");

	if (g == NULL) {
		printf("no gnuplot: %s not drawn\n", png);
		return;
	}
	fprintf(g,
	    "set terminal pngcairo size 900,500 noenhanced\n"
	    "set output '%s'\n"
	    "set title 'libtpe metrics: a mixed load (2 us tasks, 1 in %d "
	    "sleeps 1 ms)'\n"
	    "set logscale x 10\nset logscale y 10\n"
	    "set xlabel 'ns (bucket lower bound)'\nset ylabel 'tasks'\n"
	    "set key top right\nset grid\n"
	    "plot '%s' using 1:($2>0?$2:1/0) with impulses lw 2 "
	    "title 'queue wait', "
	    "'' using 1:($3>0?$3:1/0) with impulses lw 2 title 'run time'\n",
	    png, LONG_EVERY, data);
	if (pclose(g) != 0)
		printf("gnuplot failed (is it installed?): %s not drawn\n", png);
	else
		printf("wrote %s\n", png);
}

int
main(int argc, char **argv)
{
	const char *data = argc > 1 ? argv[1] : "latency_plot.dat";
	const char *png = argc > 2 ? argv[2] : NULL;
	struct tpe_metrics m;
	tpe_attr_t *attr;
	tpe_t *pool;
	int i;

	if (tpe_attr_create(&attr) != 0)
		return 1;
	if (tpe_attr_set_pool_size(attr, 2, 2) != 0 ||
	    tpe_attr_set_metrics(attr, TPE_METRICS_ON |
	    TPE_METRICS_TIME_ALL) != 0 || tpe_create(&pool, attr) != 0) {
		tpe_attr_destroy(attr);
		return 1;
	}
	tpe_attr_destroy(attr);
	for (i = 0; i < TASKS; i++) {
		if (tpe_execute(pool, i % LONG_EVERY == 0 ? long_task :
		    short_task, NULL) != 0)
			return 1;
		if (i % 1000 == 999) /* bursts, then a drain */
			tpe_wait_idle(pool, -1);
	}
	tpe_wait_idle(pool, -1);
	if (tpe_get_metrics(pool, &m, sizeof(m)) != 0)
		return 1;
	printf("tasks run %" PRIu64 ", timed %" PRIu64 "\n", m.tasks_run,
	    m.tasks_timed);
	print_percentiles("queue wait", &m.queue_wait);
	print_percentiles("run time", &m.run_time);
	if (write_table(data, &m) != 0)
		return 1;
	printf("wrote %s\n", data);
	if (png != NULL)
		plot(data, png);
	/* Every task ran and every one was timed (TPE_METRICS_TIME_ALL). */
	if (m.tasks_run != TASKS || m.run_time.count != TASKS ||
	    m.queue_wait.count != TASKS)
		return 1;
	return tpe_destroy(pool) != 0;
}
