/* SPDX-License-Identifier: MIT */
/*
 * test_park.c - the rules by which a spin earns its CPU (base/park.h),
 * white-box and deterministic: struct tpe__spin_pay's misses and probes,
 * the crowded mark (its hold and expiry, given explicit times; a hold of 0
 * marks nothing), a crowded process's backoff budget, and the backoff's
 * late look
 * (the time of the last look is set by the test, so no case depends on how
 * fast this machine runs it).
 */
#include <stdint.h>

#include "helpers.h"

#include "base/cpu.h"
#include "base/park.h"

/* Clears the process-wide crowded mark: at the end of time every mark
 * has run out. */
static void
clear_crowded(void)
{
	assert_false(tpe__spin_crowded_at(INT64_MAX));
	assert_int_equal(tpe__spin_crowd_until, 0);
}

/* Marks the process crowded until the end of time. */
static void
mark_crowded_forever(void)
{
	tpe__spin_crowd_seen(INT64_MAX - 1);
	assert_true(tpe__spin_crowded());
}

static void
test_park_spin_pay_misses_then_probes(void **state)
{
	struct tpe__spin_pay p = { 0, 0 };
	unsigned i, spins = 0;

	(void)state;
	clear_crowded();
	/* Spins while fewer than 2 spins in a row found nothing. */
	assert_true(tpe__spin_pays(&p, 2, 4));
	tpe__spin_paid(&p, false);
	assert_true(tpe__spin_pays(&p, 2, 4));
	tpe__spin_paid(&p, false);
	/* Then only every 4th wait spins. */
	for (i = 0; i < 8; i++)
		spins += tpe__spin_pays(&p, 2, 4);
	assert_int_equal(spins, 2);
	/* One spin that pays: every wait spins again. */
	tpe__spin_paid(&p, true);
	assert_true(tpe__spin_pays(&p, 2, 4));
	assert_true(tpe__spin_pays(&p, 2, 4));
}

static void
test_park_crowd_mark_holds_then_expires(void **state)
{
	const int64_t t = INT64_C(1000) * TPE__NS_PER_S;

	(void)state;
	clear_crowded();
	assert_false(tpe__spin_crowded_at(t));
	tpe__spin_crowd_seen(t);
	assert_true(tpe__spin_crowded_at(t));
	assert_true(tpe__spin_crowded_at(t + TPE__SPIN_CROWD_HOLD_NS - 1));
	/* Run out: cleared, so that the next decision reads no clock. */
	assert_false(tpe__spin_crowded_at(t + TPE__SPIN_CROWD_HOLD_NS));
	assert_int_equal(tpe__spin_crowd_until, 0);
	assert_false(tpe__spin_crowded_at(t));
	/* A mark near the end of time saturates. */
	tpe__spin_crowd_seen(INT64_MAX - 1);
	assert_int_equal(tpe__spin_crowd_until, INT64_MAX);
	clear_crowded();
}

static void
test_park_hold_zero_never_marks(void **state)
{
	const int64_t t = INT64_C(1000) * TPE__NS_PER_S;

	(void)state;
	clear_crowded();
	tpe__spin_crowd_hold_ns = 0;
	tpe__spin_crowd_seen(t);
	assert_int_equal(tpe__spin_crowd_until, 0);
	assert_false(tpe__spin_crowded_at(t));
	tpe__spin_crowd_hold_ns = TPE__SPIN_CROWD_HOLD_NS;
	tpe__spin_crowd_seen(t);
	assert_true(tpe__spin_crowded_at(t));
	clear_crowded();
}

static void
test_park_crowded_backoff_has_no_budget(void **state)
{
	struct tpe__backoff b;

	(void)state;
	mark_crowded_forever();
	tpe__backoff_init(&b, 1000 * TPE__NS_PER_S, -1, 0);
	assert_int_equal(b.budget_ns, 0);
	assert_int_equal(tpe__backoff_step(&b), TPE__BACKOFF_SPENT);
	/* The sleep phase stays: a waiter that asked for one sleeps. */
	tpe__backoff_init(&b, 1000 * TPE__NS_PER_S, -1, 1000);
	assert_int_equal(tpe__backoff_step(&b), TPE__BACKOFF_SLEPT);
	clear_crowded();
	tpe__backoff_init(&b, 1000 * TPE__NS_PER_S, -1, 0);
	assert_int_equal(b.budget_ns, tpe__can_spin() ?
	    1000 * TPE__NS_PER_S : 0);
}

/* Steps b until it does something else than relax; what it did. */
static enum tpe__backoff_did
step_to_look(struct tpe__backoff *b)
{
	enum tpe__backoff_did d;

	while ((d = tpe__backoff_step(b)) == TPE__BACKOFF_RELAXED)
		;
	return d;
}

static void
test_park_late_look_ends_spin_and_marks(void **state)
{
	struct tpe__backoff b;

	(void)state;
	clear_crowded();
	if (!tpe__can_spin())
		skip(); /* one processor: no spin to end */
	tpe__backoff_init(&b, 1000 * TPE__NS_PER_S, -1, 0);
	/* The first look starts the budget: never late. Each look keeps
	 * its time, for the next one to compare. */
	assert_int_equal(step_to_look(&b), TPE__BACKOFF_YIELDED);
	assert_false(tpe__spin_crowded());
	assert_true(b.look_ns > 0 && b.look_ns <= tpe__now_ns());
	/* The last look was long ago: this thread lost its processor. The
	 * late look lets the caller look first: its work may have come. */
	b.look_ns -= 2 * TPE__SPIN_LATE_NS;
	assert_int_equal(step_to_look(&b), TPE__BACKOFF_YIELDED);
	assert_false(tpe__spin_crowded());
	/* The caller found nothing and steps again: crowded, spent. */
	assert_int_equal(tpe__backoff_step(&b), TPE__BACKOFF_SPENT);
	assert_true(tpe__spin_crowded());
	assert_int_equal(tpe__backoff_step(&b), TPE__BACKOFF_SPENT);
	/* While marked, a new spin gets no budget. */
	tpe__backoff_init(&b, 1000 * TPE__NS_PER_S, -1, 0);
	assert_int_equal(tpe__backoff_step(&b), TPE__BACKOFF_SPENT);
	clear_crowded();
}

static void
test_park_timely_look_keeps_spinning(void **state)
{
	struct tpe__backoff b;

	(void)state;
	clear_crowded();
	if (!tpe__can_spin())
		skip();
	tpe__backoff_init(&b, 1000 * TPE__NS_PER_S, -1, 0);
	assert_int_equal(step_to_look(&b), TPE__BACKOFF_YIELDED);
	/* The last look "comes after" the next one: however slow this
	 * machine, the next look is not late. */
	b.look_ns = INT64_MAX / 2;
	assert_int_equal(step_to_look(&b), TPE__BACKOFF_YIELDED);
	assert_false(tpe__spin_crowded());
	assert_int_equal(tpe__spin_crowd_until, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_park_spin_pay_misses_then_probes),
		cmocka_unit_test(test_park_crowd_mark_holds_then_expires),
		cmocka_unit_test(test_park_hold_zero_never_marks),
		cmocka_unit_test(test_park_crowded_backoff_has_no_budget),
		cmocka_unit_test(test_park_late_look_ends_spin_and_marks),
		cmocka_unit_test(test_park_timely_look_keeps_spinning),
	};

	tu_time_bound(0);
	/* Crowding is off by default (park.h): these cases turn it on. */
	tpe__spin_crowd_hold_ns = TPE__SPIN_CROWD_HOLD_NS;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
