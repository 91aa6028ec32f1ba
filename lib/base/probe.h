/* SPDX-License-Identifier: MIT */
/*
 * probe.h - USDT probes: fixed points in the library where a tracer
 * (bpftrace, perf, SystemTap) attaches to a running program, without a
 * rebuild, to see which task waited, which pool refused, when threads
 * came and went. tpe(7), "Tracing", lists them for users.
 *
 * Design notes
 * ------------
 * What a probe is: <sys/sdt.h> (Debian: systemtap-sdt-dev) turns
 * TPE__PROBEn(name, ...) into one nop instruction and a note in the ELF
 * file's .note.stapsdt section that says where the nop is and where each
 * argument lives (a register or a stack slot). A tracer that attaches
 * replaces the nop with a breakpoint; nobody attached, it stays a nop:
 * the arguments are only named, not computed into anything, so a probe
 * costs nothing but keeping its arguments live at that point.
 *
 * Work done only for a tracer: a probe whose argument costs something
 * to compute (a clock read) is guarded by TPE__PROBE_ENABLED(name), which
 * reads the probe's semaphore: a counter in the .probes section that
 * every tracer attached to that probe adds one to (the kernel's uprobes
 * do it for bpftrace and perf). A plain load, no ordering: a tracer that
 * attaches while a task runs may miss that task's end, as it may miss
 * any event that began before it attached.
 *
 * Built in where <sys/sdt.h> exists (configure says "USDT probes: yes");
 * elsewhere, or with --disable-probes (TPE_DISABLE_PROBES), every macro
 * below is a no-op that evaluates nothing and TPE__PROBE_ENABLED is 0.
 *
 * The provider is "tpe"; a probe's name is written with a double
 * underscore (task__start), which tracers show as a dash (task-start);
 * bpftrace names them usdt:PATH:tpe:task__start. Arguments: the pool (or
 * strategy) first, then the pool's name (its thread-name prefix, a C
 * string), then what the event has. Adding a probe: add its semaphore to
 * probe.c and its line to tpe(7).
 *
 * Where it sits: lib/base, the bottom layer; every other part may call it.
 */
#ifndef TPE_PROBE_H
#define TPE_PROBE_H

#include "config.h" /* HAVE_SYS_SDT_H */

#if !defined(TPE_DISABLE_PROBES) && defined(HAVE_SYS_SDT_H)
#define TPE__HAVE_PROBES 1
#else
#define TPE__HAVE_PROBES 0
#endif

#if TPE__HAVE_PROBES

/* Every probe of a file that includes this header has a semaphore
 * (sdt.h then names it provider_name_semaphore): defined in probe.c. */
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

#define TPE__PROBE_SEMAPHORE(name)                                         \
	extern unsigned short tpe_##name##_semaphore
TPE__PROBE_SEMAPHORE(task__submit);
TPE__PROBE_SEMAPHORE(task__start);
TPE__PROBE_SEMAPHORE(task__end);
TPE__PROBE_SEMAPHORE(task__reject);
TPE__PROBE_SEMAPHORE(thread__start);
TPE__PROBE_SEMAPHORE(thread__exit);
TPE__PROBE_SEMAPHORE(block__begin);
TPE__PROBE_SEMAPHORE(block__end);
TPE__PROBE_SEMAPHORE(sched__due);
TPE__PROBE_SEMAPHORE(strategy__handover);

/* Whether a tracer is attached to probe `name` (above: a plain load). */
#define TPE__PROBE_ENABLED(name)                                           \
	__builtin_expect(__atomic_load_n(&tpe_##name##_semaphore,          \
	    __ATOMIC_RELAXED) != 0, 0)

#define TPE__PROBE2(name, a, b) STAP_PROBE2(tpe, name, a, b)
#define TPE__PROBE3(name, a, b, c) STAP_PROBE3(tpe, name, a, b, c)
#define TPE__PROBE4(name, a, b, c, d) STAP_PROBE4(tpe, name, a, b, c, d)
#define TPE__PROBE5(name, a, b, c, d, e)                                   \
	STAP_PROBE5(tpe, name, a, b, c, d, e)

#else /* !TPE__HAVE_PROBES */

/* The arguments are named, never evaluated (sizeof), so that what only
 * a probe reads raises no "unused" warning. */
#define TPE__PROBE_ENABLED(name) 0
#define TPE__PROBE2(name, a, b) ((void)sizeof(a), (void)sizeof(b))
#define TPE__PROBE3(name, a, b, c) (TPE__PROBE2(name, a, b), (void)sizeof(c))
#define TPE__PROBE4(name, a, b, c, d)                                      \
	(TPE__PROBE3(name, a, b, c), (void)sizeof(d))
#define TPE__PROBE5(name, a, b, c, d, e)                                   \
	(TPE__PROBE4(name, a, b, c, d), (void)sizeof(e))

#endif /* TPE__HAVE_PROBES */

#endif /* TPE_PROBE_H */
