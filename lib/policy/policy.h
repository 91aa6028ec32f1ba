/* SPDX-License-Identifier: MIT */
/*
 * policy.h - sizing policies. A policy decides, at tpe_create, which queue
 * the pool offers to and which rejection function it calls; the pool's
 * execute is always Java's three steps. Queue-first (Java) uses the queue
 * and the rejection policy the attributes name; scale-first wraps both
 * (policy_scale_first.c). A new policy is a new file and a line here.
 */
#ifndef TPE_POLICY_H
#define TPE_POLICY_H

#include "pool/attr.h"
#include "pool/pool.h"
#include "queue/queue.h"

struct tpe__policy_setup {
	struct tpe__queue *queue;
	tpe__reject_fn reject;
	void *reject_ctx;
	/* How far the pool grows for tasks already queued when sizes change
	 * or it resumes: to core (Java) or to max (scale-first). */
	bool queued_grow_to_max;
	void *state;                   /* freed with state_free at destroy */
	void (*state_free)(void *state);
};

int tpe__policy_install(const struct tpe_attr *a, struct tpe__policy_setup *s);

/* The queue the attributes name (unbounded, bounded or hand-off). */
int tpe__policy_base_queue(const struct tpe_attr *a, struct tpe__queue **q);

/* Scale-first: wraps the base queue and rejection in s (policy_scale_first.c). */
int tpe__scale_first_install(struct tpe__policy_setup *s);

#endif /* TPE_POLICY_H */
