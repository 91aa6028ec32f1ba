/* SPDX-License-Identifier: MIT */
/*
 * invocation.h - invocation types (enum tpe_invocation) and the
 * thread-local "running as non-blocking" flag behind tpe_in_non_blocking().
 *
 * Where it sits: lib/base, the bottom layer; it includes only system
 * headers, config.h, tpe.h and base/ (build-aux/check-layering.sh).
 *
 * Design notes
 * ------------
 * The flag belongs to the thread, not to a pool: it is true only while a
 * task runs through tpe__invoke_non_blocking (a strategy's PIC mode), which
 * saves and restores it, so nested invocations unwind correctly. Every pool
 * worker clears it before each task (task.c), so a task that left it set
 * by unwinding abnormally cannot leak it into the next task.
 */
#ifndef TPE_INVOCATION_H
#define TPE_INVOCATION_H

#include <stdbool.h>

#include "base/sync.h"
#include "tpe.h"

/* T: this thread only. */
extern TPE__TLS bool tpe__tls_non_blocking;

static inline bool
tpe__invocation_valid(enum tpe_invocation type)
{
	return type == TPE_BLOCKING || type == TPE_NON_BLOCKING ||
	    type == TPE_EITHER;
}

/* Runs fn(arg) with tpe_in_non_blocking() true, then restores the flag. */
static inline void
tpe__invoke_non_blocking(tpe_fn fn, void *arg)
{
	bool was = tpe__tls_non_blocking;

	tpe__tls_non_blocking = true;
	fn(arg);
	tpe__tls_non_blocking = was;
}

#endif /* TPE_INVOCATION_H */
