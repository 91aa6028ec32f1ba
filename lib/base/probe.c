/* SPDX-License-Identifier: MIT */
/* probe.c - the semaphores of the USDT probes (probe.h): one counter per
 * probe in the .probes section, raised by each tracer attached to it. */
#include "config.h"

#include "base/probe.h"

#if TPE__HAVE_PROBES
#define SEMAPHORE(name)                                                    \
	unsigned short tpe_##name##_semaphore                              \
	    __attribute__((section(".probes")))
SEMAPHORE(task__submit);
SEMAPHORE(task__start);
SEMAPHORE(task__end);
SEMAPHORE(task__reject);
SEMAPHORE(thread__start);
SEMAPHORE(thread__exit);
SEMAPHORE(block__begin);
SEMAPHORE(block__end);
SEMAPHORE(sched__due);
SEMAPHORE(strategy__handover);
#else
/* ISO C wants a translation unit to declare something. */
typedef int tpe__probe_none;
#endif
