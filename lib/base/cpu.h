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

/*
 * One step of a spin: tells the processor that this thread waits (the
 * other hardware thread of the core gets its share; Linux's cpu_relax).
 * x86: pause. ARM: yield (ARMv7 and later; a no-op where not
 * implemented). POWER: "or 1,1,1" then "or 2,2,2", low then medium
 * thread priority. RISC-V: pause (Zihintpause), written as the fence
 * hint it is, which a processor without the extension runs as a no-op.
 * s390x and the rest: a compiler barrier only.
 */
static inline void
tpe__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__) || \
    (defined(__arm__) && defined(__ARM_ARCH) && __ARM_ARCH >= 7)
	__asm__ __volatile__("yield" ::: "memory");
#elif defined(__powerpc64__) || defined(__powerpc__)
	__asm__ __volatile__("or 1,1,1\n\tor 2,2,2" ::: "memory");
#elif defined(__riscv)
	__asm__ __volatile__(".insn i 0x0f, 0, x0, x0, 0x010" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

#endif /* TPE_CPU_H */
