/* SPDX-License-Identifier: MIT */
/* ring.h - the SPSC ring's internals that white-box tests reach (ring.c). */
#ifndef TPE_RING_H
#define TPE_RING_H

#include <stddef.h>

#include "tpe.h"

/*
 * White-box tests only: moves an empty ring's four indices (both sides'
 * own and cached ones) to `index`, as if `index` items had passed through
 * it, so that a test can start near SIZE_MAX and watch the indices wrap.
 * EINVAL when ring is NULL, EBUSY when the ring is not empty. Neither
 * side may run at the same time; the test's thread is both.
 */
int tpe__ring_set_index_for_test(tpe_ring_t *ring, size_t index);

#endif /* TPE_RING_H */
