/* SPDX-License-Identifier: MIT */
/*
 * tick.h - a cheap clock for timing tasks (the metrics, metrics.h): the
 * processor's time-stamp counter where it is invariant and the kernel
 * keeps time with it, else CLOCK_MONOTONIC.
 *
 * Design notes
 * ------------
 * Why: a timed task reads a clock three times (accepted, started, ended).
 * clock_gettime through the vDSO cost 22 ns a read on the 2-core VM this
 * was written on, rdtsc 10 ns: of a timed task's some 80 ns, 36 go.
 *
 * When the counter is used: on x86-64, when CPUID says it is invariant
 * (leaf 0x80000007, EDX bit 8: one rate in every power state) and the
 * kernel's current clocksource is "tsc". The kernel only keeps time with
 * a TSC it checked to be synchronised across the processors, so a stamp
 * taken on one CPU (the submitter's) and a reading on another (the
 * worker's) subtract. Anywhere else (another architecture, a TSC the
 * kernel does not trust, no /sys) a tick is a nanosecond of
 * CLOCK_MONOTONIC, read with tpe__now_ns.
 *
 * Calibration, once per process (pthread_once), by the first pool created
 * with metrics: two (tick, ns) pairs taken 2 ms apart, each with its ticks
 * read just before and after the clock_gettime, retried when those two are
 * far apart (a preemption in between), the pair's tick the midpoint;
 * nanoseconds per tick is the quotient. Error: the clock's jitter, tens of
 * ns, over 2 ms: some 1e-4, far under the histograms' 3%.
 *
 * Memory order: tick_tsc and ns_per_tick are written once, inside
 * tpe__tick_init's pthread_once, and never again. Every thread that reads
 * a tick reads it for a pool created with metrics, whose tpe_create called
 * tpe__tick_init first, and reached that pool through whatever handed it
 * the pool pointer (the caller's synchronisation): so the writes happen
 * before its reads.
 *
 * Where it sits: lib/base, the bottom layer.
 */
#ifndef TPE_TICK_H
#define TPE_TICK_H

#include <stdbool.h>
#include <stdint.h>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "base/sync.h"

/* Whether a tick is a TSC count (tick.c; written once, above). */
extern bool tpe__tick_tsc;

/* Chooses the clock and calibrates it, once per process; any thread. */
void tpe__tick_init(void);

/* Now, in ticks (after tpe__tick_init): comparable across threads. */
static inline int64_t
tpe__tick_now(void)
{
#if defined(__x86_64__)
	if (tpe__tick_tsc)
		return (int64_t)__rdtsc();
#endif
	return tpe__now_ns();
}

/* A span of ticks in nanoseconds (negative: 0). */
uint64_t tpe__tick_to_ns(int64_t ticks);

/* White-box (tests): the clock chosen again, the TSC allowed or not. No
 * pool with metrics may exist meanwhile. */
void tpe__tick_select(bool allow_tsc);

#endif /* TPE_TICK_H */
