/* SPDX-License-Identifier: MIT */
/* cpu.h - how many processors this process may run on. */
#ifndef TPE_CPU_H
#define TPE_CPU_H

#include <stddef.h>

/*
 * The processors in the calling thread's CPU affinity mask
 * (sched_getaffinity), which its new threads inherit; where that is not
 * available or fails, the online processors (sysconf); at least 1.
 * Read afresh at each call: the mask may change.
 */
size_t tpe__cpu_count(void);

#endif /* TPE_CPU_H */
