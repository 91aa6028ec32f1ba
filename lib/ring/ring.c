/* SPDX-License-Identifier: MIT */
/*
 * ring.c - tpe_ring_t, a bounded single-producer single-consumer ring of
 * pointers: the edge between two tasklets, whose refusal when full is the
 * backpressure.
 *
 * Where it sits: on the public header and lib/base only, as any client
 * of the library (build-aux/check-layering.sh).
 *
 * Design notes
 * ------------
 * A Lamport ring: an array of capacity slots, a power of two, and two
 * indices that count items since creation. The producer alone writes
 * `tail` (the number of items ever offered), the consumer alone writes
 * `head` (the number ever taken). Item number i lives in slots[i & mask].
 * Invariants, read as unsigned size_t arithmetic:
 *   0 <= tail - head <= capacity        (the items in the ring)
 *   head and tail only grow, by one (offer) or by n (drain)
 *   slots[i & mask] for head <= i < tail hold the items, oldest at head
 *
 * The indices are never reduced modulo the capacity: the slot is found
 * with `& mask`, and fullness and emptiness with the difference tail -
 * head. So the ring never confuses full with empty (no slot is sacrificed)
 * and needs no flag for it. A size_t index overflows after 2^64 items (2^32
 * on a 32-bit machine) and wraps to 0. That is harmless: unsigned
 * arithmetic is modulo 2^N, so tail - head is still the true count as long
 * as that count fits in size_t (it is at most capacity); and since the
 * capacity is a power of two it divides 2^N, so index 2^N - 1 falls on
 * slot mask (the last) and its successor, 0 after the wrap, on slot 0
 * (the first): the wrap of the index lands on the slot that follows,
 * exactly as it would without the wrap. With a
 * capacity that is not a power of two, i % capacity would jump at the
 * wrap and the ring would reuse a slot out of turn; that is one of the
 * two reasons the capacity must be a power of two (the other: a mask
 * instead of a division on every item). test_ring's wrap test starts the
 * indices just below SIZE_MAX (tpe__ring_set_index_for_test).
 *
 * Cached indices. Each side keeps a private copy of the other side's
 * index and reads the shared one only when its copy says it cannot go on:
 * the producer re-reads `head` only when the ring looks full
 * (tail - head_cache == capacity), the consumer re-reads `tail` only when
 * its copy shows fewer items than it takes (for a poll: when the ring
 * looks empty, tail_cache == head; a drain of max items re-reads when
 * fewer than max are known, so that it takes every item offered before
 * it, up to max). A stale copy is always on
 * the safe side, because the real index only grew since: the producer
 * sees no more room than there is, the consumer no more items. When
 * neither side waits for the other, each touches only its own cache line
 * and the slots: a line moves between the processors once per batch of
 * slots, not once per item for each index.
 *
 * Layout: the consumer's fields, then the producer's, then the slots,
 * with a whole cache line of padding between the groups (malloc does not
 * align to a line, so padding a full line is what guarantees that two
 * groups never share one). Each side has its own copy of the mask so that
 * nothing read-only sits on the other side's line.
 *
 * Memory ordering (every pair is release -> acquire):
 *   offer:  writes slots[tail & mask] (plain), then stores tail + 1
 *           (release). The consumer loads tail (acquire) before it reads
 *           the slot: the item's write, and everything the producer did
 *           before the offer, happen-before the consumer reads it.
 *   take:   reads the slots (plain), then stores head + n (release). The
 *           producer loads head (acquire) before it writes a slot again:
 *           the consumer's read of the old item happens-before the
 *           producer's overwrite (no write-after-read race).
 *   close:  stores closed = 1 (release) after the producer's last tail
 *           store. The consumer, finding the ring empty, loads closed
 *           (acquire) and then loads tail once more: a tail stored before
 *           the close is seen, so items offered before close are never
 *           lost to EPIPE.
 * A side reads its own index with a relaxed load: it is the only writer.
 * The slots need no atomics: the index protocol above gives every write
 * and read of a slot a happens-before order, so they never race.
 *
 * Weakly ordered processors (ARM, POWER, RISC-V): the three pairs above
 * are the whole of the ordering, and each is a release store against an
 * acquire load of the same word, which every processor keeps (the
 * compiler emits stlr/ldar, dmb, lwsync). Nothing relies on x86's order
 * of plain stores (the slot before the index: the release keeps it), nor
 * on a load of the slot being ordered after the index load by their
 * address (the acquire keeps it, no dependency needed), nor on a
 * store-then-load order: no side stores and then loads the other side's
 * word expecting the two not to pass each other (a full side re-reads
 * head after the failed look, an empty one tail: each a plain acquire
 * of a newer value). The cached copies are private, so a stale one is
 * only a reason to load the shared index again. The close pair is
 * acquire-then-load: the consumer's second load of tail comes after its
 * acquire of closed, and the producer's last tail store before its
 * release of closed, so that tail is seen.
 *
 * One producer thread at a time, one consumer thread at a time. Each
 * side's private fields (its index, its cached copy) are plain state of
 * whichever thread acts for that side. A side may move to another thread
 * (a tasklet that another worker takes over) if the move itself gives
 * happens-before from the old thread's last call to the new thread's
 * first: a mutex both take, a release/acquire on the queue the tasklet
 * travels through, pthread_join. Without that order two threads would be
 * the producer at once, and the ring's contents are undefined.
 * tpe_ring_close is a producer-side call: a close from another thread
 * racing an offer could let the consumer end the stream (EPIPE) before
 * the item of that offer arrives.
 *
 * Layer: a client of the public API; it includes include/tpe.h and
 * lib/base only (base/atomic.h: the named atomics and TPE__CACHE_LINE;
 * doc/architecture.md, build-aux/check-layering.sh).
 *
 * Legend: base/sync.h (P and C: the one thread acting for that side).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "tpe.h"

#include "base/atomic.h"
#include "base/sync.h"
#include "ring/ring.h"

struct tpe_ring {
	/* The consumer's line. */
	size_t head;              /* A: items taken; written by C (release),
				   * read by the producer (acquire) */
	size_t tail_cache;        /* C: the last tail it loaded */
	size_t cmask;             /* I: capacity - 1, the consumer's copy */
	char pad1_[TPE__CACHE_LINE];
	/* The producer's line. */
	size_t tail;              /* A: items offered; written by P (release),
				   * read by the consumer (acquire) */
	size_t head_cache;        /* P: the last head it loaded */
	size_t pmask;             /* I: capacity - 1, the producer's copy */
	int closed;               /* A: set once by P's close (release), read
				   * by the consumer (acquire) */
	char pad2_[TPE__CACHE_LINE];
	/* Written by P before its tail release, read by C after its tail
	 * acquire; rewritten by P only after its head acquire. */
	void *slots[];
};

int
tpe_ring_create(tpe_ring_t **ring, size_t capacity)
{
	tpe_ring_t *r;

	if (ring == NULL || capacity < 2 || (capacity & (capacity - 1)) != 0)
		return EINVAL;
	/* A valid capacity whose array cannot even be sized is memory that
	 * cannot be had. */
	if (capacity > (SIZE_MAX - sizeof(*r)) / sizeof(r->slots[0]))
		return ENOMEM;
	r = malloc(sizeof(*r) + capacity * sizeof(r->slots[0]));
	if (r == NULL)
		return ENOMEM;
	r->head = 0;
	r->tail_cache = 0;
	r->cmask = capacity - 1;
	r->tail = 0;
	r->head_cache = 0;
	r->pmask = capacity - 1;
	r->closed = 0;
	/* Published to both sides by whatever hands them the ring. */
	*ring = r;
	return 0;
}

int
tpe_ring_offer(tpe_ring_t *ring, void *item)
{
	size_t t;

	if (ring == NULL)
		return EINVAL;
	/* Relaxed: closed is written by the producer side only, which is
	 * this thread or one ordered before it (design notes). */
	if (tpe__hint_load(&ring->closed))
		return EPIPE;
	/* Relaxed: the producer is tail's only writer. */
	t = tpe__hint_load(&ring->tail);
	if (t - ring->head_cache > ring->pmask) {
		/* Looks full: the consumer may have moved on. Acquire, pairs
		 * with the consumer's release store of head in take(): its
		 * reads of the slots it freed happen-before the write below. */
		ring->head_cache = tpe__observe(&ring->head);
		if (t - ring->head_cache > ring->pmask)
			return EAGAIN; /* really full: the caller keeps item */
	}
	ring->slots[t & ring->pmask] = item;
	/* Release, pairs with the consumer's acquire loads of tail in
	 * take(): publishes the slot just written. */
	tpe__publish(&ring->tail, t + 1);
	return 0;
}

/* The consumer's poll and drain: up to max (>= 1) items, oldest first. */
static int
take(tpe_ring_t *ring, void **items, size_t max, size_t *count)
{
	size_t h, avail, n, i;

	/* Relaxed: the consumer is head's only writer. */
	h = tpe__hint_load(&ring->head);
	avail = ring->tail_cache - h;
	if (avail < max) {
		/* Looks empty, or holds fewer than the caller takes: the
		 * producer may have offered since. Acquire, pairs with the
		 * release store of tail in tpe_ring_offer. */
		ring->tail_cache = tpe__observe(&ring->tail);
		avail = ring->tail_cache - h;
	}
	if (avail == 0) {
		/* Acquire, pairs with the release store in tpe_ring_close:
		 * every tail store before the close is then visible to the
		 * load below, so the end of the stream is never reported
		 * while an item offered before the close is still on its
		 * way. */
		if (!tpe__observe(&ring->closed))
			return EAGAIN;
		/* Acquire, pairs with tpe_ring_offer's release of tail. */
		ring->tail_cache = tpe__observe(&ring->tail);
		avail = ring->tail_cache - h;
		if (avail == 0)
			return EPIPE;
	}
	TPE__ASSERT(avail <= ring->cmask + 1);
	n = avail < max ? avail : max;
	for (i = 0; i < n; i++)
		items[i] = ring->slots[(h + i) & ring->cmask];
	/* Release, pairs with the producer's acquire load of head in
	 * tpe_ring_offer: the reads above happen-before it reuses the
	 * slots. */
	tpe__publish(&ring->head, h + n);
	*count = n;
	return 0;
}

int
tpe_ring_poll(tpe_ring_t *ring, void **item)
{
	size_t n;

	if (ring == NULL || item == NULL)
		return EINVAL;
	return take(ring, item, 1, &n);
}

int
tpe_ring_drain(tpe_ring_t *ring, void **items, size_t max, size_t *count)
{
	if (ring == NULL || items == NULL || count == NULL || max == 0)
		return EINVAL;
	return take(ring, items, max, count);
}

int
tpe_ring_close(tpe_ring_t *ring)
{
	if (ring == NULL)
		return EINVAL;
	/* Release, pairs with the consumer's acquire load of closed in
	 * take(): orders every tail store before it. A second close
	 * stores the same value. */
	tpe__publish(&ring->closed, 1);
	return 0;
}

void
tpe_ring_destroy(tpe_ring_t *ring)
{
	/* Both sides are done with the ring, and ordered before this call
	 * (the caller's business, as with any free). */
	free(ring);
}

int
tpe__ring_set_index_for_test(tpe_ring_t *ring, size_t index)
{
	if (ring == NULL)
		return EINVAL;
	if (ring->head != ring->tail)
		return EBUSY;
	ring->head = index;
	ring->tail_cache = index;
	ring->tail = index;
	ring->head_cache = index;
	return 0;
}
