/* SPDX-License-Identifier: MIT */
/*
 * priority.c - the priority queue (TPE_QUEUE_PRIORITY): a binary heap of
 * ranked nodes, higher priority first and first in, first out among equal
 * priorities; unbounded (capacity 0) or bounded.
 *
 * Where it sits: a queue kind (queue.h), storage under the pool lock; it
 * includes queue/ and base/ only, and is one row of engine/kinds.c.
 *
 * Design notes
 * ------------
 * The node (queue/node.h) carries no priority: the heap keeps it beside
 * the node, in an entry {priority, seq, node}, so that a task costs the
 * node nothing on every other kind. seq is the number of the offer (L: the
 * queue's counter), and an entry ranks before another when its priority
 * is higher, or equal with a lower seq: the heap order is a total order,
 * and among equal priorities the first offered is polled first (Java's
 * PriorityBlockingQueue leaves equals in no order). A 64-bit seq does not
 * wrap in the life of a process.
 *
 * offer and poll are O(log n) (sift up, sift down). The unbounded heap
 * grows by doubling when an offer finds it full; when that allocation
 * fails the offer refuses with ENOMEM and the caller keeps its node (the
 * heap never shrinks, so a refused offer leaves it as it was). A bounded
 * heap allocates its capacity at create and refuses with EAGAIN when full.
 *
 * drop_oldest, for the discard-oldest policy, takes the entry of the
 * lowest priority and, among those, the oldest offered (the one that has
 * waited longest among those that would run last). Newer entries of the
 * same priority may sit below it, so it scans the whole heap: O(n), paid
 * only by a rejection under that policy.
 * remove_if (tpe_remove, tpe_purge, tpe_shutdown_now's hand-back) moves
 * the matching entries to the end of the array, sorts them by rank, hands
 * out the first `max` in poll order, and rebuilds the heap from the rest
 * (O(n + k log k) for k matches).
 */
#include <errno.h>
#include <stdlib.h>

#include "queue/queue.h"

struct prio_entry {
	int priority;        /* the submitting call's */
	uint64_t seq;        /* the offer's number: FIFO among equals */
	struct tpe__task *t;
};

struct queue_priority {
	struct tpe__queue base;
	size_t capacity;         /* I: 0 when unbounded */
	size_t n;                /* L: entries in the heap */
	size_t cap;              /* L: entries allocated */
	uint64_t next_seq;       /* L */
	struct prio_entry *heap; /* L: heap[0] ranks first */
};

/* The queue behind the interface's base: through void *, since its
 * 64-bit field raises its alignment above the base's on 32-bit CPUs
 * (-Wcast-align on armhf); the base is its first member. */
static struct queue_priority *
pq_of(struct tpe__queue *q)
{
	return (struct queue_priority *)(void *)q;
}

/* Whether a is polled before b. */
static bool
ranks_before(const struct prio_entry *a, const struct prio_entry *b)
{
	if (a->priority != b->priority)
		return a->priority > b->priority;
	return a->seq < b->seq;
}

static void
sift_up(struct prio_entry *h, size_t i)
{
	struct prio_entry e = h[i];

	while (i > 0 && ranks_before(&e, &h[(i - 1) / 2])) {
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i] = e;
}

static void
sift_down(struct prio_entry *h, size_t n, size_t i)
{
	struct prio_entry e = h[i];
	size_t c;

	while ((c = 2 * i + 1) < n) {
		if (c + 1 < n && ranks_before(&h[c + 1], &h[c]))
			c++;
		if (!ranks_before(&h[c], &e))
			break;
		h[i] = h[c];
		i = c;
	}
	h[i] = e;
}

/* Takes entry i out of the heap, which stays a heap. */
static struct tpe__task *
take_at(struct queue_priority *pq, size_t i)
{
	struct tpe__task *t = pq->heap[i].t;

	pq->n--;
	if (i < pq->n) {
		pq->heap[i] = pq->heap[pq->n];
		sift_down(pq->heap, pq->n, i);
		sift_up(pq->heap, i);
	}
	return t;
}

/* Room for one more entry: 0, or ENOMEM (the heap unchanged). */
static int
reserve_one(struct queue_priority *pq)
{
	struct prio_entry *nh;
	size_t cap;

	if (pq->n < pq->cap)
		return 0;
	if (pq->cap > SIZE_MAX / 2 / sizeof(*nh))
		return ENOMEM;
	cap = pq->cap * 2;
	nh = realloc(pq->heap, cap * sizeof(*nh));
	if (nh == NULL)
		return ENOMEM;
	pq->heap = nh;
	pq->cap = cap;
	return 0;
}

static int
priority_offer_ranked(struct tpe__queue *q, struct tpe__task *t,
    size_t takers, int priority)
{
	struct queue_priority *pq = pq_of(q);
	int rc;

	(void)takers;
	if (pq->capacity != 0 && pq->n >= pq->capacity)
		return EAGAIN;
	rc = reserve_one(pq);
	if (rc != 0)
		return rc;
	pq->heap[pq->n].priority = priority;
	pq->heap[pq->n].seq = pq->next_seq++;
	pq->heap[pq->n].t = t;
	sift_up(pq->heap, pq->n++);
	return 0;
}

static int
priority_offer(struct tpe__queue *q, struct tpe__task *t, size_t takers)
{
	return priority_offer_ranked(q, t, takers, 0);
}

static struct tpe__task *
priority_poll(struct tpe__queue *q)
{
	struct queue_priority *pq = pq_of(q);

	return pq->n == 0 ? NULL : take_at(pq, 0);
}

static size_t
priority_size(struct tpe__queue *q)
{
	return pq_of(q)->n;
}

static size_t
priority_remaining(const struct tpe__queue *q)
{
	const struct queue_priority *pq =
	    (const struct queue_priority *)(const void *)q;

	return pq->capacity == 0 ? SIZE_MAX : pq->capacity - pq->n;
}

static int
compare_rank(const void *a, const void *b)
{
	if (ranks_before(a, b))
		return -1;
	return ranks_before(b, a) ? 1 : 0;
}

static size_t
priority_remove_if(struct tpe__queue *q, tpe__task_match_fn match,
    void *ctx, size_t max, struct tpe__task_list *out)
{
	struct queue_priority *pq = pq_of(q);
	struct prio_entry *h = pq->heap;
	size_t i, kept = 0, k, moved;

	if (max == 0 || pq->n == 0)
		return 0;
	/* The matches to the end, the others (in any order) to the front. */
	for (i = 0, k = pq->n; i < k;) {
		if (match(h[i].t, ctx)) {
			struct prio_entry e = h[i];

			h[i] = h[--k];
			h[k] = e;
		} else {
			i++;
		}
	}
	kept = k;
	if (kept == pq->n)
		return 0;
	/* In poll order; those past max go back. */
	qsort(&h[kept], pq->n - kept, sizeof(*h), compare_rank);
	moved = pq->n - kept < max ? pq->n - kept : max;
	for (i = 0; i < moved; i++)
		tpe__task_list_push(out, h[kept + i].t);
	for (i = kept + moved; i < pq->n; i++)
		h[k++] = h[i];
	pq->n = k;
	/* Floyd's heap construction over what stays. */
	for (i = pq->n / 2; i-- > 0;)
		sift_down(h, pq->n, i);
	return moved;
}

/* Whether a is dropped before b: the lower priority, then the older. */
static bool
drops_before(const struct prio_entry *a, const struct prio_entry *b)
{
	if (a->priority != b->priority)
		return a->priority < b->priority;
	return a->seq < b->seq;
}

static struct tpe__task *
priority_drop_oldest(struct tpe__queue *q)
{
	struct queue_priority *pq = pq_of(q);
	size_t i, victim = 0;

	if (pq->n == 0)
		return NULL;
	/* Not always a leaf (newer equals may sit below it): every entry. */
	for (i = 1; i < pq->n; i++)
		if (drops_before(&pq->heap[i], &pq->heap[victim]))
			victim = i;
	return take_at(pq, victim);
}

static void
priority_destroy(struct tpe__queue *q)
{
	struct queue_priority *pq = pq_of(q);

	free(pq->heap);
	free(pq);
}

static const struct tpe__queue_ops priority_ops = {
	.name = "priority",
	.offer = priority_offer,
	.offer_ranked = priority_offer_ranked,
	.poll = priority_poll,
	.size = priority_size,
	.remaining = priority_remaining,
	.remove_if = priority_remove_if,
	.drop_oldest = priority_drop_oldest,
	.destroy = priority_destroy,
};

/* The unbounded heap's first allocation, in entries. */
#define INITIAL_ENTRIES 64

int
tpe__queue_priority_create(struct tpe__queue **q, size_t capacity)
{
	struct queue_priority *pq;
	size_t cap = capacity != 0 ? capacity : INITIAL_ENTRIES;

	if (cap > SIZE_MAX / sizeof(struct prio_entry))
		return EINVAL;
	pq = calloc(1, sizeof(*pq));
	if (pq == NULL)
		return ENOMEM;
	pq->heap = malloc(cap * sizeof(*pq->heap));
	if (pq->heap == NULL) {
		free(pq);
		return ENOMEM;
	}
	pq->base.ops = &priority_ops;
	pq->capacity = capacity;
	pq->cap = cap;
	*q = &pq->base;
	return 0;
}
