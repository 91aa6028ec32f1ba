/* SPDX-License-Identifier: MIT */
/*
 * coop.h - the cooperative tasklet service (coop.c): the internals the
 * white-box tests read. The design notes are at the top of coop.c.
 */
#ifndef TPE_COOP_H
#define TPE_COOP_H

#include <stddef.h>
#include <stdint.h>

#include "base/park.h"
#include "tpe.h"

/* The idle backoff before a worker parks (coop.c): passes that spin, then
 * passes that yield, then parks of PARK_MIN_NS doubling. */
#define TPE__COOP_SPIN_PASSES 4
#define TPE__COOP_YIELD_PASSES 4
#define TPE__COOP_PARK_MIN_NS TPE__BACKOFF_SLEEP_MIN_NS

/*
 * The park time of the n-th consecutive idle pass (n >= 1) when the bound
 * is max_ns: 0 for the spinning and yielding passes, then PARK_MIN_NS,
 * twice that, ..., never more than max_ns.
 */
int64_t tpe__coop_park_ns(uint64_t n, int64_t max_ns);

/* How many workers of coop are parked without a timeout (they own no
 * tasklet). Any thread, no lock; a snapshot. */
size_t tpe__coop_parked_forever(tpe_coop_t *coop);

/* How many dedicated threads of blocking tasklets coop has not yet seen
 * end. Any thread; a snapshot. */
size_t tpe__coop_blocking_threads(tpe_coop_t *coop);

/* How many times a worker of coop woke in its park wait (a signal, a
 * timeout, or a spurious wake-up; a timed park's end counts). Any
 * thread; a snapshot. */
uint64_t tpe__coop_wakeups(tpe_coop_t *coop);

/* How many timed parks of coop's workers ran to their timeout (the others
 * ended when the worker was given news). Any thread; a snapshot. */
uint64_t tpe__coop_park_timeouts(tpe_coop_t *coop);

/* White-box tests only (NULL otherwise): called by the thread that ended
 * a job's last tasklet, after it counted it (remaining is 0) and before it
 * completes the job, with no lock held. */
extern void (*tpe__coop_complete_hook)(tpe_job_t *job);

#endif /* TPE_COOP_H */
