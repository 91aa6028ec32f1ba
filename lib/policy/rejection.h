/* SPDX-License-Identifier: MIT */
/*
 * rejection.h - the rejection policies: the four standard ones and the
 * adapter for a custom handler. A policy is called without pool->lock, once
 * per rejected submission; it returns 0 when it took the task, or an errno
 * value, and then the submitter keeps it.
 */
#ifndef TPE_REJECTION_H
#define TPE_REJECTION_H

#include "pool/attr.h"
#include "pool/pool.h"

/* The policy the attributes configure (standard or custom). */
void tpe__rejection_select(const struct tpe_attr *a, tpe__reject_fn *fn,
    void **ctx);

#endif /* TPE_REJECTION_H */
