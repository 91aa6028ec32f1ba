/* SPDX-License-Identifier: MIT */
/*
 * tick.c - the task-timing clock: the choice of the TSC or CLOCK_MONOTONIC
 * and the TSC's calibration. See tick.h for the design notes.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "base/tick.h"

bool tpe__tick_tsc;                /* tick.h: once */
static double ns_per_tick = 1.0;  /* once, with tpe__tick_tsc */
static pthread_once_t once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__)
/* CPUID: an invariant TSC. */
static bool
tsc_invariant(void)
{
	unsigned a, b, c, d;

	if ((unsigned)__get_cpuid_max(0x80000000u, NULL) < 0x80000007u)
		return false;
	__cpuid(0x80000007u, a, b, c, d);
	(void)a, (void)b, (void)c;
	return (d & (1u << 8)) != 0;
}

/* The kernel keeps time with the TSC (then synchronised, tick.h). */
static bool
kernel_uses_tsc(void)
{
	char name[32] = "";
	FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/"
	    "current_clocksource", "re");

	if (f == NULL)
		return false;
	if (fgets(name, sizeof(name), f) == NULL)
		name[0] = '\0';
	fclose(f);
	return strcmp(name, "tsc\n") == 0;
}

/* One (tick, ns) pair; false when no try was tight enough. */
static bool
pair(uint64_t *tick, int64_t *ns)
{
	uint64_t best = UINT64_MAX;
	int i;

	for (i = 0; i < 16; i++) {
		uint64_t a = __rdtsc();
		int64_t n = tpe__now_ns();
		uint64_t b = __rdtsc();

		if (b > a && b - a < best) {
			best = b - a;
			*tick = a + (b - a) / 2;
			*ns = n;
		}
	}
	return best < 100000; /* some 30 us at a few GHz */
}

static bool
calibrate(void)
{
	struct timespec two_ms = { 0, 2000000 };
	uint64_t t0, t1;
	int64_t n0, n1;

	if (!pair(&t0, &n0))
		return false;
	while (nanosleep(&two_ms, &two_ms) != 0)
		continue; /* EINTR: the rest */
	if (!pair(&t1, &n1) || t1 <= t0 || n1 <= n0)
		return false;
	ns_per_tick = (double)(n1 - n0) / (double)(t1 - t0);
	return true;
}
#endif

static void
choose(bool allow_tsc)
{
	tpe__tick_tsc = false;
	ns_per_tick = 1.0;
#if defined(__x86_64__)
	if (allow_tsc && tsc_invariant() && kernel_uses_tsc() && calibrate())
		tpe__tick_tsc = true;
#else
	(void)allow_tsc;
#endif
}

static void
init_once(void)
{
	choose(true);
}

void
tpe__tick_init(void)
{
	(void)pthread_once(&once, init_once);
}

void
tpe__tick_select(bool allow_tsc)
{
	tpe__tick_init(); /* not again later, over this choice */
	choose(allow_tsc);
}

uint64_t
tpe__tick_to_ns(int64_t ticks)
{
	if (ticks <= 0)
		return 0;
	if (!tpe__tick_tsc)
		return (uint64_t)ticks;
	return (uint64_t)((double)ticks * ns_per_tick);
}
