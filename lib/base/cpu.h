/* SPDX-License-Identifier: MIT */
/*
 * cpu.h - how many processors this process may run on, and spinning.
 *
 * Where it sits: lib/base, the bottom layer; it includes only system
 * headers, config.h, tpe.h and base/ (build-aux/check-layering.sh).
 */
#ifndef TPE_CPU_H
#define TPE_CPU_H

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdbool.h>
#include <stddef.h>

/* The affinity mask can be counted (configure: sched_getaffinity and
 * CPU_COUNT); elsewhere tpe__cpu_count counts the online processors. */
#if defined(HAVE_SCHED_GETAFFINITY) && defined(HAVE_DECL_CPU_COUNT) && \
    HAVE_DECL_CPU_COUNT
#define TPE__CPU_COUNT_AFFINITY 1
#endif

/*
 * The processors in the calling thread's CPU affinity mask
 * (sched_getaffinity), which its new threads inherit; where that is not
 * available (TPE__CPU_COUNT_AFFINITY undefined) or fails, the online
 * processors (sysconf); at least 1. Read afresh at each call: the mask may
 * change.
 */
size_t tpe__cpu_count(void);

/* Whether spinning can pay: more than one processor (counted once; a
 * racy first use is harmless, every thread computes the same value). */
bool tpe__can_spin(void);

/* One step of a spin: tells the processor that this thread waits. */
static inline void
tpe__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

#endif /* TPE_CPU_H */
