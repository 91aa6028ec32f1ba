/* SPDX-License-Identifier: MIT */
/*
 * linked.h - the linked list kind's parts that the hand-off kind shares
 * (linked.c, handoff.c). Inside lib/queue only.
 */
#ifndef TPE_QUEUE_LINKED_H
#define TPE_QUEUE_LINKED_H

#include "queue/queue.h"

/*
 * The list and its inbox. The inbox sits on a cache line of its own:
 * submitters write it, workers write the rest.
 */
struct tpe__queue_linked {
	struct tpe__queue base;
	struct tpe__task_list list; /* L */
	char pad_[TPE__CACHE_LINE];
	struct tpe__task *inbox;    /* A: pushed lock-free, emptied under L */
	char pad2_[TPE__CACHE_LINE - sizeof(struct tpe__task *)];
};

/* A linked queue with `ops`, with or without an inbox. 0 or ENOMEM. */
int tpe__linked_init(struct tpe__queue **q, const struct tpe__queue_ops *ops,
    bool inbox);
/* The ops both kinds share (queue.h gives their contracts); push is an
 * offer that never refuses. */
int tpe__linked_push(struct tpe__queue *q, struct tpe__task *t);
struct tpe__task *tpe__linked_poll(struct tpe__queue *q);
size_t tpe__linked_size(struct tpe__queue *q);
size_t tpe__linked_remove_if(struct tpe__queue *q, tpe__task_match_fn match,
    void *ctx, size_t max, struct tpe__task_list *out);
void tpe__linked_destroy(struct tpe__queue *q);

#endif /* TPE_QUEUE_LINKED_H */
