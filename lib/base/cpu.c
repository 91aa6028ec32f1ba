/* SPDX-License-Identifier: MIT */
/* cpu.c - how many processors this process may run on, spinning (cpu.h). */
#include "config.h"

#include <sched.h>
#include <unistd.h>

#include "base/cpu.h"

size_t
tpe__cpu_count(void)
{
	long n;
#ifdef TPE__CPU_COUNT_AFFINITY
	cpu_set_t set;

	/* Fails only where more than CPU_SETSIZE processors may exist. */
	if (sched_getaffinity(0, sizeof(set), &set) == 0 &&
	    CPU_COUNT(&set) > 0)
		return (size_t)CPU_COUNT(&set);
#endif
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (size_t)n : 1;
}

bool
tpe__can_spin(void)
{
	static size_t ncpu; /* A: racy first use is harmless (same value) */
	size_t n = __atomic_load_n(&ncpu, __ATOMIC_RELAXED);

	if (n == 0) {
		n = tpe__cpu_count();
		__atomic_store_n(&ncpu, n, __ATOMIC_RELAXED);
	}
	return n > 1;
}
