/* SPDX-License-Identifier: MIT */
/*
 * test_ring.c - tpe_ring_t, the SPSC ring: every function's bad input and
 * documented errors, backpressure (a full ring refuses and the caller
 * keeps the item), close and end of stream, drain, NULL items, the
 * indices' wrap past SIZE_MAX (white-box), a malloc failure, and a
 * producer thread and a consumer thread passing a long numbered stream
 * (none lost, none reordered), with poll and with drain.
 *
 * The stream's length is TPE_RING_ITEMS (default 10^7, the acceptance
 * figure; the small-ring stream is a thousandth of it). ThreadSanitizer
 * instruments every atomic and every slot access: on the shared two-core
 * development machine (load 15), 10^7 items took 11.5 s (poll) and 5.3 s
 * (drain) under TSan, and the small ring 6.1 s with a tenth of that:
 * 23 s, more than the ~20 s wanted in make check; 10^6 items took 1 to
 * 6 s, by the machine's load. A TSan build (detected at compile time)
 * therefore defaults to 10^6 (TSAN_ITEMS), and TPE_RING_ITEMS=10000000
 * runs the full length there too. The plain, ASan/UBSan and debug builds
 * run 10^7 (0.4 to 3.4 s a stream in the plain build, by the load).
 *
 * Linked with -Wl,--wrap=malloc: the library's malloc (libtpe_core is a
 * static archive here) goes through __wrap_malloc below, which fails
 * when the calling thread armed it.
 */
#include <string.h>

#include "helpers.h"

#include "base/cpu.h"
#include "ring/ring.h"

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

#define FULL_ITEMS 10000000UL
#define TSAN_ITEMS 1000000UL

/* ---- malloc failure --------------------------------------------------- */

void *__real_malloc(size_t size);
void *__wrap_malloc(size_t size);

/* Armed by one thread for its own calls only. */
static _Thread_local bool fail_malloc;

void *
__wrap_malloc(size_t size)
{
	if (fail_malloc) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_malloc(size);
}

/* ---- helpers ---------------------------------------------------------- */

#define ITEM(i) ((void *)(uintptr_t)(i))

static tpe_ring_t *
make_ring(size_t capacity)
{
	tpe_ring_t *r = NULL;

	assert_int_equal(tpe_ring_create(&r, capacity), 0);
	assert_non_null(r);
	return r;
}

/* Offers items first .. first + n - 1, each must be taken. */
static void
offer_seq(tpe_ring_t *r, uintptr_t first, size_t n)
{
	for (size_t i = 0; i < n; i++)
		assert_int_equal(tpe_ring_offer(r, ITEM(first + i)), 0);
}

/* Polls n items, which must be first .. first + n - 1. */
static void
poll_seq(tpe_ring_t *r, uintptr_t first, size_t n)
{
	void *item;

	for (size_t i = 0; i < n; i++) {
		item = ITEM(1);
		assert_int_equal(tpe_ring_poll(r, &item), 0);
		assert_ptr_equal(item, ITEM(first + i));
	}
}

static void
assert_empty(tpe_ring_t *r)
{
	void *item = ITEM(7), *items[2] = { ITEM(7), ITEM(7) };
	size_t count = 99;

	assert_int_equal(tpe_ring_poll(r, &item), EAGAIN);
	assert_ptr_equal(item, ITEM(7));
	assert_int_equal(tpe_ring_drain(r, items, 2, &count), EAGAIN);
	assert_int_equal(count, 99);
	assert_ptr_equal(items[0], ITEM(7));
}

/* ---- create and destroy ----------------------------------------------- */

static void
test_ring_create_bad_capacity(void **state)
{
	static const size_t bad[] = { 0, 1, 3, 5, 6, 7, 12, 1000, 1025,
	    SIZE_MAX, SIZE_MAX - 1, (SIZE_MAX >> 1) + 2 };
	tpe_ring_t *r = ITEM(1);

	(void)state;
	assert_int_equal(tpe_ring_create(NULL, 8), EINVAL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(tpe_ring_create(&r, bad[i]), EINVAL);
		assert_ptr_equal(r, ITEM(1)); /* not written */
	}
}

static void
test_ring_create_overflow_enomem(void **state)
{
	/* Powers of two whose slot array does not fit in size_t. */
	static const size_t huge[] = { (SIZE_MAX >> 1) + 1, (SIZE_MAX >> 2) + 1,
	    (SIZE_MAX >> 3) + 1 };
	tpe_ring_t *r = ITEM(1);

	(void)state;
	for (size_t i = 0; i < sizeof(huge) / sizeof(huge[0]); i++) {
		assert_int_equal(tpe_ring_create(&r, huge[i]), ENOMEM);
		assert_ptr_equal(r, ITEM(1));
	}
}

static void
test_ring_create_malloc_fails(void **state)
{
	tpe_ring_t *r = ITEM(1);
	int rc;

	(void)state;
	fail_malloc = true;
	rc = tpe_ring_create(&r, 1024);
	fail_malloc = false;
	assert_int_equal(rc, ENOMEM);
	assert_ptr_equal(r, ITEM(1));
	/* And it works again once malloc does. */
	assert_int_equal(tpe_ring_create(&r, 1024), 0);
	tpe_ring_destroy(r);
}

static void
test_ring_create_smallest(void **state)
{
	tpe_ring_t *r = make_ring(2);

	(void)state;
	assert_empty(r);
	offer_seq(r, 10, 2);
	assert_int_equal(tpe_ring_offer(r, ITEM(12)), EAGAIN);
	poll_seq(r, 10, 2);
	assert_empty(r);
	tpe_ring_destroy(r);
}

static void
test_ring_destroy_null(void **state)
{
	(void)state;
	tpe_ring_destroy(NULL);
}

/* Items left in the ring are the caller's: destroy frees the ring only
 * (ASan's leak check sees nothing else to free). */
static void
test_ring_destroy_nonempty(void **state)
{
	tpe_ring_t *r = make_ring(4);

	(void)state;
	offer_seq(r, 1, 3);
	tpe_ring_destroy(r);
}

/* ---- bad arguments ---------------------------------------------------- */

static void
test_ring_bad_arguments(void **state)
{
	tpe_ring_t *r = make_ring(4);
	void *item = ITEM(5), *items[4] = { 0 };
	size_t count = 77;

	(void)state;
	assert_int_equal(tpe_ring_offer(NULL, ITEM(1)), EINVAL);
	assert_int_equal(tpe_ring_poll(NULL, &item), EINVAL);
	assert_int_equal(tpe_ring_poll(r, NULL), EINVAL);
	assert_int_equal(tpe_ring_drain(NULL, items, 4, &count), EINVAL);
	assert_int_equal(tpe_ring_drain(r, NULL, 4, &count), EINVAL);
	assert_int_equal(tpe_ring_drain(r, items, 4, NULL), EINVAL);
	assert_int_equal(tpe_ring_drain(r, items, 0, &count), EINVAL);
	assert_int_equal(tpe_ring_close(NULL), EINVAL);
	assert_ptr_equal(item, ITEM(5));
	assert_int_equal(count, 77);
	/* The bad calls touched nothing: one item in, one out. */
	assert_int_equal(tpe_ring_offer(r, ITEM(3)), 0);
	assert_int_equal(tpe_ring_drain(r, items, 0, &count), EINVAL);
	poll_seq(r, 3, 1);
	assert_empty(r);
	tpe_ring_destroy(r);
}

/* ---- backpressure, order, NULL ---------------------------------------- */

static void
test_ring_full_refuses(void **state)
{
	tpe_ring_t *r = make_ring(8);
	int mine = 42;

	(void)state;
	offer_seq(r, 100, 8);
	/* Full: refused, and it stays refused; the item is not in the ring. */
	assert_int_equal(tpe_ring_offer(r, &mine), EAGAIN);
	assert_int_equal(tpe_ring_offer(r, &mine), EAGAIN);
	/* One slot freed: the next offer is taken, behind the others. */
	poll_seq(r, 100, 1);
	assert_int_equal(tpe_ring_offer(r, ITEM(108)), 0);
	assert_int_equal(tpe_ring_offer(r, &mine), EAGAIN);
	poll_seq(r, 101, 8);
	assert_empty(r);
	assert_int_equal(mine, 42);
	tpe_ring_destroy(r);
}

static void
test_ring_empty_eagain(void **state)
{
	tpe_ring_t *r = make_ring(4);

	(void)state;
	assert_empty(r);
	offer_seq(r, 1, 1);
	poll_seq(r, 1, 1);
	assert_empty(r);
	tpe_ring_destroy(r);
}

static void
test_ring_null_items(void **state)
{
	tpe_ring_t *r = make_ring(4);
	void *item = ITEM(1), *items[4] = { ITEM(1), ITEM(1), ITEM(1),
	    ITEM(1) };
	size_t count = 0;

	(void)state;
	assert_int_equal(tpe_ring_offer(r, NULL), 0);
	assert_int_equal(tpe_ring_poll(r, &item), 0);
	assert_null(item);
	assert_empty(r);
	assert_int_equal(tpe_ring_offer(r, NULL), 0);
	assert_int_equal(tpe_ring_offer(r, ITEM(2)), 0);
	assert_int_equal(tpe_ring_offer(r, NULL), 0);
	assert_int_equal(tpe_ring_drain(r, items, 4, &count), 0);
	assert_int_equal(count, 3);
	assert_null(items[0]);
	assert_ptr_equal(items[1], ITEM(2));
	assert_null(items[2]);
	assert_ptr_equal(items[3], ITEM(1)); /* beyond count: untouched */
	tpe_ring_destroy(r);
}

/* ---- drain ------------------------------------------------------------ */

static void
test_ring_drain_partial_and_max(void **state)
{
	tpe_ring_t *r = make_ring(8);
	void *items[16];
	size_t count = 0;

	(void)state;
	offer_seq(r, 0, 5);
	/* max smaller than what is there: exactly max, oldest first. */
	assert_int_equal(tpe_ring_drain(r, items, 3, &count), 0);
	assert_int_equal(count, 3);
	for (size_t i = 0; i < 3; i++)
		assert_ptr_equal(items[i], ITEM(i));
	/* max larger: what is there. */
	assert_int_equal(tpe_ring_drain(r, items, 16, &count), 0);
	assert_int_equal(count, 2);
	assert_ptr_equal(items[0], ITEM(3));
	assert_ptr_equal(items[1], ITEM(4));
	assert_empty(r);
	/* A full ring drained whole across the slot array's end (head is
	 * at 5): the copy wraps at the mask. */
	offer_seq(r, 5, 8);
	assert_int_equal(tpe_ring_drain(r, items, 16, &count), 0);
	assert_int_equal(count, 8);
	for (size_t i = 0; i < 8; i++)
		assert_ptr_equal(items[i], ITEM(5 + i));
	/* max 1 behaves as poll. */
	offer_seq(r, 13, 2);
	assert_int_equal(tpe_ring_drain(r, items, 1, &count), 0);
	assert_int_equal(count, 1);
	assert_ptr_equal(items[0], ITEM(13));
	poll_seq(r, 14, 1);
	assert_empty(r);
	tpe_ring_destroy(r);
}

/* ---- close ------------------------------------------------------------ */

static void
test_ring_close_semantics(void **state)
{
	tpe_ring_t *r = make_ring(4);
	void *item = ITEM(9), *items[4];
	size_t count = 55;

	(void)state;
	offer_seq(r, 1, 3);
	assert_int_equal(tpe_ring_close(r), 0);
	assert_int_equal(tpe_ring_close(r), 0); /* idempotent */
	assert_int_equal(tpe_ring_offer(r, ITEM(4)), EPIPE);
	/* What was offered before the close is still delivered, in order. */
	poll_seq(r, 1, 1);
	assert_int_equal(tpe_ring_drain(r, items, 4, &count), 0);
	assert_int_equal(count, 2);
	assert_ptr_equal(items[0], ITEM(2));
	assert_ptr_equal(items[1], ITEM(3));
	/* Then the end of the stream, for both consumer calls, for good. */
	count = 55;
	assert_int_equal(tpe_ring_poll(r, &item), EPIPE);
	assert_ptr_equal(item, ITEM(9));
	assert_int_equal(tpe_ring_drain(r, items, 4, &count), EPIPE);
	assert_int_equal(count, 55);
	assert_int_equal(tpe_ring_close(r), 0);
	assert_int_equal(tpe_ring_poll(r, &item), EPIPE);
	assert_int_equal(tpe_ring_offer(r, ITEM(5)), EPIPE);
	tpe_ring_destroy(r);
}

static void
test_ring_close_full_and_empty(void **state)
{
	tpe_ring_t *r = make_ring(2);
	void *item;

	(void)state;
	/* Closed while full: offer says EPIPE (the end), not EAGAIN. */
	offer_seq(r, 1, 2);
	assert_int_equal(tpe_ring_offer(r, ITEM(3)), EAGAIN);
	assert_int_equal(tpe_ring_close(r), 0);
	assert_int_equal(tpe_ring_offer(r, ITEM(3)), EPIPE);
	poll_seq(r, 1, 2);
	assert_int_equal(tpe_ring_poll(r, &item), EPIPE);
	tpe_ring_destroy(r);

	/* Closed while empty: the end at once. */
	r = make_ring(2);
	assert_int_equal(tpe_ring_close(r), 0);
	assert_int_equal(tpe_ring_poll(r, &item), EPIPE);
	tpe_ring_destroy(r);
}

/* ---- the indices' wrap past SIZE_MAX (white-box) ----------------------- */

static void
test_ring_set_index_for_test(void **state)
{
	tpe_ring_t *r = make_ring(4);

	(void)state;
	assert_int_equal(tpe__ring_set_index_for_test(NULL, 0), EINVAL);
	offer_seq(r, 1, 1);
	assert_int_equal(tpe__ring_set_index_for_test(r, 3), EBUSY);
	poll_seq(r, 1, 1);
	assert_int_equal(tpe__ring_set_index_for_test(r, 3), 0);
	tpe_ring_destroy(r);
}

static void
test_ring_index_wraparound(void **state)
{
	enum { CAP = 8 };
	void *items[CAP];
	size_t count;
	uintptr_t next_in = 0, next_out = 0;

	(void)state;
	/* Every start from SIZE_MAX - CAP to SIZE_MAX: each puts the wrap of
	 * the indices at another slot and at another fill level. */
	for (size_t back = 0; back <= CAP; back++) {
		tpe_ring_t *r = make_ring(CAP);

		assert_int_equal(tpe__ring_set_index_for_test(r,
		    SIZE_MAX - back), 0);
		/* Full across the wrap: exactly CAP taken, then refused. */
		offer_seq(r, next_in, CAP);
		next_in += CAP;
		assert_int_equal(tpe_ring_offer(r, ITEM(0)), EAGAIN);
		poll_seq(r, next_out, 3);
		next_out += 3;
		offer_seq(r, next_in, 3);
		next_in += 3;
		assert_int_equal(tpe_ring_offer(r, ITEM(0)), EAGAIN);
		assert_int_equal(tpe_ring_drain(r, items, CAP, &count), 0);
		assert_int_equal(count, CAP);
		for (size_t i = 0; i < CAP; i++)
			assert_ptr_equal(items[i], ITEM(next_out + i));
		next_out += CAP;
		assert_empty(r);
		/* A few more rounds through every slot past the wrap. */
		for (int round = 0; round < 3 * CAP; round++) {
			offer_seq(r, next_in, 5);
			next_in += 5;
			poll_seq(r, next_out, 5);
			next_out += 5;
		}
		assert_int_equal(tpe_ring_close(r), 0);
		assert_int_equal(tpe_ring_drain(r, items, CAP, &count), EPIPE);
		tpe_ring_destroy(r);
	}
	assert_int_equal(next_in, next_out);
}

/* ---- a producer thread and a consumer thread --------------------------- */

struct stream {
	tpe_ring_t *ring;
	unsigned long items;      /* how many the producer offers */
	size_t batch;             /* consumer: 0 polls, else drains this many */
	unsigned long received;   /* consumer: how many it took */
	unsigned long bad;        /* consumer: items out of sequence */
	unsigned long full;       /* producer: offers refused (EAGAIN) */
	int end;                  /* consumer: the error that ended it */
};

static unsigned long
stream_items(void)
{
	const char *e = getenv("TPE_RING_ITEMS");
	unsigned long v;
	char *end;

	if (e != NULL && *e >= '1' && *e <= '9') {
		v = strtoul(e, &end, 10);
		if (*end == '\0')
			return v;
	}
#ifdef UNDER_TSAN
	return TSAN_ITEMS;
#else
	return FULL_ITEMS;
#endif
}

/*
 * A side that finds the ring full (empty) waits for the other side to
 * move: it spins 100 pauses, which is enough while both have a processor,
 * then sleeps 10 us at a time. Not sched_yield: beside busy threads (a
 * crowded machine) a yield hands the processor to one of them for a whole
 * time slice, and the stream then moves a ring's worth of items a slice
 * (10^7 polled items took over 120 s beside 4 busy loops on 2 cores,
 * 2 s without them; 4 to 6 s either way with this wait, while other
 * builds kept the load at 24), where a sleeper is woken ahead of the busy
 * threads. `spins` counts the waiter's spins since it last moved (the
 * caller zeroes it then).
 */
static void
stream_wait(unsigned *spins)
{
	if (++*spins < 100)
		tpe__cpu_relax();
	else
		tu_sleep_ns(10000);
}

/* Item i is the number i (0, the first, is NULL): the sequence check is
 * the whole content check. */
static void *
producer_main(void *arg)
{
	struct stream *s = arg;
	unsigned spins;
	int rc;

	for (unsigned long i = 0; i < s->items; i++) {
		spins = 0;
		while ((rc = tpe_ring_offer(s->ring, ITEM(i))) == EAGAIN) {
			s->full++;
			stream_wait(&spins);
		}
		if (rc != 0)
			return NULL;
	}
	tpe_ring_close(s->ring);
	return NULL;
}

static void *
consumer_main(void *arg)
{
	struct stream *s = arg;
	void *items[256];
	size_t count, max = s->batch ? s->batch : 1;
	unsigned spins = 0;
	int rc;

	for (;;) {
		if (s->batch == 0) {
			rc = tpe_ring_poll(s->ring, items);
			count = 1;
		} else {
			rc = tpe_ring_drain(s->ring, items, max, &count);
		}
		if (rc == EAGAIN) {
			stream_wait(&spins);
			continue;
		}
		if (rc != 0)
			break;
		spins = 0;
		for (size_t i = 0; i < count; i++) {
			if (items[i] != ITEM(s->received))
				s->bad++;
			s->received++;
		}
	}
	s->end = rc;
	return NULL;
}

static void
run_stream(size_t capacity, size_t batch, unsigned long items)
{
	struct stream s = { 0 };
	pthread_t prod, cons;
	int64_t t0 = tu_now_ns();

	assert_true(batch <= 256);
	s.ring = make_ring(capacity);
	s.items = items;
	s.batch = batch;
	assert_int_equal(pthread_create(&cons, NULL, consumer_main, &s), 0);
	assert_int_equal(pthread_create(&prod, NULL, producer_main, &s), 0);
	assert_int_equal(pthread_join(prod, NULL), 0);
	assert_int_equal(pthread_join(cons, NULL), 0);
	/* Information for whoever tunes TPE_RING_ITEMS, asserted nowhere. */
	print_message("# %lu items, capacity %zu, %s, %lu refused offers, "
	    "%.1f s\n", s.items, capacity, batch ? "drain" : "poll", s.full,
	    (double)(tu_now_ns() - t0) / 1e9);
	assert_int_equal(s.end, EPIPE);
	assert_int_equal(s.bad, 0);
	assert_int_equal(s.received, s.items);
	tpe_ring_destroy(s.ring);
}

static void
test_ring_threads_poll(void **state)
{
	(void)state;
	run_stream(1024, 0, stream_items());
}

static void
test_ring_threads_drain(void **state)
{
	(void)state;
	run_stream(1024, 64, stream_items());
}

/*
 * A small ring, so that the producer meets a full ring and re-reads the
 * consumer's index all the time, and the drain's copy wraps often: 10^4
 * items (a thousandth of the stream) make 2500 wraps and some thousands of
 * full rings. No more: a side that finds the ring full or empty yields
 * the processor, and passes at most 4 items on once the other side had
 * its turn, so the stream moves one turn at a time on a crowded machine:
 * 10^5 items took 120 s beside 16 busy loops on 2 cores (10^4 took 15 s
 * beside 4 loops while other builds ran, load 28).
 */
static void
test_ring_threads_small_ring(void **state)
{
	(void)state;
	run_stream(4, 3, stream_items() / 1000);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ring_create_bad_capacity),
		cmocka_unit_test(test_ring_create_overflow_enomem),
		cmocka_unit_test(test_ring_create_malloc_fails),
		cmocka_unit_test(test_ring_create_smallest),
		cmocka_unit_test(test_ring_destroy_null),
		cmocka_unit_test(test_ring_destroy_nonempty),
		cmocka_unit_test(test_ring_bad_arguments),
		cmocka_unit_test(test_ring_full_refuses),
		cmocka_unit_test(test_ring_empty_eagain),
		cmocka_unit_test(test_ring_null_items),
		cmocka_unit_test(test_ring_drain_partial_and_max),
		cmocka_unit_test(test_ring_close_semantics),
		cmocka_unit_test(test_ring_close_full_and_empty),
		cmocka_unit_test(test_ring_set_index_for_test),
		cmocka_unit_test(test_ring_index_wraparound),
		cmocka_unit_test(test_ring_threads_poll),
		cmocka_unit_test(test_ring_threads_drain),
		cmocka_unit_test(test_ring_threads_small_ring),
	};

	tu_time_bound(0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
