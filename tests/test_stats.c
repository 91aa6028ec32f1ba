/* SPDX-License-Identifier: MIT */
/*
 * test_stats.c - tpe_get_stats and the growing-struct rule: a caller built
 * against an older, smaller struct tpe_stats, or a newer, larger one, gets
 * exactly its own fields and nothing past its size; the internal copy
 * (lib/sized.c) keeps whole members.
 */
#define _GNU_SOURCE
#include <string.h>

#include "base/sized.h"
#include "helpers.h"

#define GUARD 0xa5 /* what the caller's memory held before the call */
#define SLACK 64   /* guard bytes past the largest struct a test passes */

/*
 * A pool in a known, stable state: core 1, max 2, a bounded queue of 2;
 * both workers blocked in a task, two tasks queued, one rejected.
 */
struct fixture {
	tpe_t *pool;
	struct tu_latch started, release;
	struct tu_blocker b[2];
	struct tpe_stats want;
};

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	int i;

	assert_non_null(f);
	tu_latch_init(&f->started, 2);
	tu_latch_init(&f->release, 1);
	for (i = 0; i < 2; i++)
		f->b[i] = (struct tu_blocker){ &f->started, &f->release, NULL,
		    0 };
	f->pool = tu_pool(1, 2, TPE_QUEUE_BOUNDED, 2, TPE_REJECT_ABORT);
	assert_int_equal(tpe_execute(f->pool, tu_blocker_fn, &f->b[0]), 0);
	assert_int_equal(tpe_execute(f->pool, tu_nop_fn, NULL), 0);
	assert_int_equal(tpe_execute(f->pool, tu_nop_fn, NULL), 0);
	assert_int_equal(tpe_execute(f->pool, tu_blocker_fn, &f->b[1]), 0);
	assert_int_equal(tpe_execute(f->pool, tu_nop_fn, NULL), EAGAIN);
	tu_latch_wait(&f->started);
	memset(&f->want, 0, sizeof(f->want));
	f->want.pool_size = 2;
	f->want.core_size = 1;
	f->want.max_size = 2;
	f->want.active = 2;
	f->want.largest_pool_size = 2;
	f->want.queued = 2;
	f->want.submitted = 4;
	f->want.rejected = 1;
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	tu_latch_count_down(&f->release);
	assert_int_equal(tpe_destroy(f->pool), 0);
	tu_latch_destroy(&f->started);
	tu_latch_destroy(&f->release);
	free(f);
	return 0;
}

/* struct tpe_stats as an older header might have had it. */
struct stats_old {
	size_t pool_size;
	size_t core_size;
	size_t max_size;
	size_t active;
	size_t idle;
};

/* struct tpe_stats as a newer header might have it. */
struct stats_new {
	struct tpe_stats today;
	uint64_t later;
	size_t later_too;
};

/* The caller's memory: any version of the struct, then guard bytes. */
union caller_mem {
	struct stats_old old;
	struct tpe_stats today;
	struct stats_new new;
	unsigned char b[sizeof(struct stats_new) + SLACK];
};

/* Fills m with GUARD, then asks for `size` bytes of stats. */
static int
get_into(tpe_t *pool, union caller_mem *m, size_t size)
{
	memset(m, GUARD, sizeof(*m));
	return tpe_get_stats(pool, &m->today, size);
}

/* Bytes [from, to) of buf still hold GUARD. */
static void
assert_guard(const void *buf, size_t from, size_t to)
{
	const unsigned char *p = buf;

	for (; from < to; from++)
		if (p[from] != GUARD)
			fail_msg("byte %zu was written (0x%02x)", from, p[from]);
}

/* Bytes [from, to) of buf are 0. */
static void
assert_zero(const void *buf, size_t from, size_t to)
{
	const unsigned char *p = buf;

	for (; from < to; from++)
		if (p[from] != 0)
			fail_msg("byte %zu is 0x%02x, not 0", from, p[from]);
}

/* ---- the normal call ----------------------------------------------------- */

/* A program built against this header passes its own sizeof. */
static void
test_stats_full_size(void **state)
{
	struct fixture *f = *state;
	struct tpe_stats s;

	memset(&s, GUARD, sizeof(s));
	assert_int_equal(tpe_get_stats(f->pool, &s, sizeof(s)), 0);
	assert_int_equal(s.pool_size, 2);
	assert_int_equal(s.core_size, 1);
	assert_int_equal(s.max_size, 2);
	assert_int_equal(s.active, 2);
	assert_int_equal(s.idle, 0);
	assert_int_equal(s.largest_pool_size, 2);
	assert_int_equal(s.queued, 2);
	assert_int_equal(s.reserved, 0);
	assert_int_equal(s.submitted, 4);
	assert_int_equal(s.completed, 0);
	assert_int_equal(s.rejected, 1);
	assert_memory_equal(&s, &f->want, sizeof(s));
}

/* ---- callers built against other versions of the header ------------------ */

/* An old caller gets its five fields, and its memory past them is untouched. */
static void
test_stats_old_caller(void **state)
{
	struct fixture *f = *state;
	union caller_mem m;

	assert_int_equal(get_into(f->pool, &m, sizeof(m.old)), 0);
	assert_int_equal(m.old.pool_size, 2);
	assert_int_equal(m.old.core_size, 1);
	assert_int_equal(m.old.max_size, 2);
	assert_int_equal(m.old.active, 2);
	assert_int_equal(m.old.idle, 0);
	assert_guard(&m, sizeof(m.old), sizeof(m));
}

/* A newer caller gets today's fields, and 0 in those this library lacks. */
static void
test_stats_new_caller(void **state)
{
	struct fixture *f = *state;
	union caller_mem m;

	assert_int_equal(get_into(f->pool, &m, sizeof(m.new)), 0);
	assert_memory_equal(&m.new.today, &f->want, sizeof(f->want));
	assert_int_equal(m.new.later, 0);
	assert_int_equal(m.new.later_too, 0);
	assert_guard(&m, sizeof(m.new), sizeof(m));
}

/* A size that ends inside a field: the whole fields, then zeroes. */
static void
test_stats_size_inside_a_field(void **state)
{
	struct fixture *f = *state;
	size_t head = sizeof(struct stats_old);
	union caller_mem m;

	assert_int_equal(get_into(f->pool, &m, head + 3), 0);
	assert_memory_equal(&m, &f->want, head);
	assert_zero(&m, head, head + 3);
	assert_guard(&m, head + 3, sizeof(m));
}

/* ---- errors: nothing is written ------------------------------------------ */

static void
test_stats_einval(void **state)
{
	struct fixture *f = *state;
	union caller_mem m;
	size_t size;

	for (size = 0; size < sizeof(size_t); size++) {
		assert_int_equal(get_into(f->pool, &m, size), EINVAL);
		assert_guard(&m, 0, sizeof(m));
	}
	assert_int_equal(get_into(NULL, &m, sizeof(m.today)), EINVAL);
	assert_guard(&m, 0, sizeof(m));
	assert_int_equal(tpe_get_stats(f->pool, NULL, sizeof(m.today)),
	    EINVAL);
	assert_int_equal(tpe_get_stats(NULL, NULL, 0), EINVAL);
}

/* ---- every size ---------------------------------------------------------- */

/* The whole members of `layout` that fit in size bytes end here. */
static size_t
whole_members(const struct tpe__sized *layout, size_t size)
{
	size_t whole = 0, i;

	if (size >= layout->size)
		return layout->size;
	for (i = 0; i < layout->n; i++)
		if (layout->ends[i] <= size)
			whole = layout->ends[i];
	return whole;
}

/* From 0 to past the newer struct, each size gets the whole fields that
 * fit, zeroes up to size, and nothing written past it. */
static void
test_stats_every_size(void **state)
{
	struct fixture *f = *state;
	union caller_mem m;
	size_t size, whole;

	assert_int_equal(tpe__stats_layout.size, sizeof(struct tpe_stats));
	assert_int_equal(tpe__stats_layout.ends[0], sizeof(size_t));
	for (size = 0; size <= sizeof(m.new); size++) {
		whole = whole_members(&tpe__stats_layout, size);
		if (whole == 0) {
			assert_int_equal(get_into(f->pool, &m, size), EINVAL);
			assert_guard(&m, 0, sizeof(m));
			continue;
		}
		assert_int_equal(get_into(f->pool, &m, size), 0);
		assert_memory_equal(&m, &f->want, whole);
		assert_zero(&m, whole, size);
		assert_guard(&m, size, sizeof(m));
	}
}

/* ---- the internal copy, on a struct with padding ------------------------- */

struct padded {
	uint8_t a;  /* ends at 1, then padding up to b */
	uint32_t b; /* ends at 8 */
	uint16_t c; /* ends at 10, then tail padding */
};

static void
test_stats_sized_copy_padding(void **state)
{
	static const size_t ends[] = {
		TPE__END_OF(struct padded, a),
		TPE__END_OF(struct padded, b),
		TPE__END_OF(struct padded, c),
	};
	/* For a size, the bytes copied: whole members (and the tail padding
	 * of a whole struct), never a part of one. */
	static const struct { size_t size, whole; } cases[] = {
		{ 1, 1 }, { 7, 1 }, { 8, 8 }, { 9, 8 }, { 10, 10 }, { 11, 10 },
		{ 12, 12 }, { 20, 12 },
	};
	const struct tpe__sized layout = { sizeof(struct padded), ends, 3 };
	unsigned char src[sizeof(struct padded)], dst[sizeof(src) + SLACK];
	size_t i, size, whole;

	(void)state;
	assert_int_equal(sizeof(struct padded), 12); /* as on common ABIs */
	memset(src, 0x11, sizeof(src));
	assert_int_equal(tpe__sized_check(&layout, dst, 0), EINVAL);
	assert_int_equal(tpe__sized_check(&layout, NULL, sizeof(src)), EINVAL);
	assert_int_equal(tpe__sized_check(&layout, dst, 1), 0);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size = cases[i].size;
		whole = cases[i].whole;
		memset(dst, GUARD, sizeof(dst));
		tpe__sized_copy(&layout, dst, size, src);
		assert_memory_equal(dst, src, whole);
		assert_zero(dst, whole, size);
		assert_guard(dst, size, sizeof(dst));
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_stats_full_size, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_stats_old_caller, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_stats_new_caller, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_stats_size_inside_a_field,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_stats_einval, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_stats_every_size, setup,
		    teardown),
		cmocka_unit_test(test_stats_sized_copy_padding),
	};

	tu_time_bound(0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
