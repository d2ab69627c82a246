/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Lease contract points on simulated lcores stepped on one thread (deterministic): each
 * test is one guarantee of doc/guides/design.md "Lifecycle and leases" or of cr_lease.h.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cr_lease.h"
#include "ut_cunit.h"
#include "ut_lcores.h"

#define NLC 3

static unsigned runs_on[NLC];

static void
count(void *arg)
{
	(void)arg;
	runs_on[cr_lcore_id()]++;
}

static int
setup(void)
{
	return ut_start(NLC);
}

static int
teardown(void)
{
	ut_stop();
	return 0;
}

static void
fresh(void)
{
	ut_stop();
	CU_ASSERT_EQUAL_FATAL(ut_start(NLC), 0);
	memset(runs_on, 0, sizeof(runs_on));
	ut_now = 1000000000;
	ut_clock_step = 0;
}

static bool
done(unsigned id)
{
	struct cr_lcore *prev = cr__cur;
	bool d;

	cr__set_cur(ut_lcore(id));
	d = cr__lcore_done(ut_lcore(id));
	cr__set_cur(prev);
	return d;
}

static void
acquire_on(unsigned id, struct cr_lease *l, int expect)
{
	ut_set_current(id);
	CU_ASSERT_EQUAL(cr_lease_acquire(l), expect);
	ut_set_current(CR_LCORE_NONE);
}

/* Owner retained across shrink: the leased lcore leaves the pool but keeps serving, and
 * finishes retiring only after the release. */
static void
test_owner_retained_across_shrink(void)
{
	struct cr_lease l = CR_LEASE_INIT;
	unsigned i;

	fresh();
	acquire_on(2, &l, 0);
	CU_ASSERT_TRUE(cr_lease_active(&l));
	CU_ASSERT_EQUAL(cr_lease_lcore(&l), 2);
	CU_ASSERT_EQUAL(cr_lcore_retire(2, NULL, NULL), 0);
	CU_ASSERT_EQUAL(cr_lcore_state(2), CR_LCORE_RETIRING);
	CU_ASSERT_EQUAL(cr_lcore_count(), 2); /* out of the placement pool at once */
	for (i = 0; i < 50; i++) {
		CU_ASSERT_FALSE(done(2));
		ut_turn(2);
	}
	/* exact-owner messages still arrive while it is held */
	CU_ASSERT_EQUAL(cr_send(2, count, NULL), 0);
	ut_turn(2);
	CU_ASSERT_EQUAL(runs_on[2], 1);
	CU_ASSERT_TRUE(cr_mailbox_is_open(&ut_lcore(2)->mbox));
	CU_ASSERT_EQUAL(cr_lease_release(&l), 0);
	CU_ASSERT_TRUE(done(2));
	CU_ASSERT_EQUAL(cr_send(2, count, NULL), -ESHUTDOWN); /* closed once done */
}

/* Admission closed -> acquire fails and nothing is counted. */
static void
test_admission_closed(void)
{
	struct cr_lease l = CR_LEASE_INIT;

	fresh();
	CU_ASSERT_EQUAL(cr_lcore_retire(1, NULL, NULL), 0);
	CU_ASSERT_FALSE(done(1) && false);
	acquire_on(1, &l, -ESHUTDOWN);
	CU_ASSERT_FALSE(cr_lease_active(&l));
	CU_ASSERT_EQUAL(cr__holds(ut_lcore(1)), 0);
	CU_ASSERT_TRUE(done(1));
}

/*
 * A retiring lcore kept by a lease sleeps until the release wakes it (bounded at 10 ms
 * against a lost wake), not in 100 us naps: the release's wake is what ends the wait.
 */
static void
test_retiring_with_lease_parks_until_release(void)
{
	struct cr_lease a = CR_LEASE_INIT;
	struct cr_backend *be = ut_be(1);
	uint64_t signals;

	fresh();
	be = ut_be(1);
	acquire_on(1, &a, 0);
	CU_ASSERT_EQUAL(cr_lcore_retire(1, NULL, NULL), 0);
	CU_ASSERT_FALSE(done(1));
	ut_set_current(1);
	CU_ASSERT_TRUE_FATAL(cr__park_prepare(ut_lcore(1)));
	cr__park_commit(ut_lcore(1));
	ut_set_current(CR_LCORE_NONE);
	CU_ASSERT_TRUE(be->last_timeout >= 10ull * 1000 * 1000);
	/* It parked again, flag up: the release from a foreign thread wakes it. */
	ut_set_current(1);
	CU_ASSERT_TRUE_FATAL(cr__park_prepare(ut_lcore(1)));
	ut_set_current(CR_LCORE_NONE);
	signals = ut_wake_signals(1);
	cr_lease_release(&a);
	CU_ASSERT_EQUAL(ut_wake_signals(1), signals + 1);
	CU_ASSERT_TRUE(done(1));
}

/* The race itself: a hold counted before the close keeps the lcore; one after fails. */
static void
test_acquire_vs_close_ordering(void)
{
	struct cr_lease a = CR_LEASE_INIT, b = CR_LEASE_INIT;

	fresh();
	acquire_on(1, &a, 0);				/* before */
	CU_ASSERT_EQUAL(cr_lcore_retire(1, NULL, NULL), 0);
	CU_ASSERT_FALSE(done(1));			/* closes admission, waits */
	acquire_on(1, &b, -ESHUTDOWN);			/* after */
	CU_ASSERT_EQUAL(cr__holds(ut_lcore(1)), 1);
	cr_lease_release(&a);
	CU_ASSERT_TRUE(done(1));
}

static struct cr_lease owner_lease;
static unsigned owner_runs, owner_stop_after;

static void
owner_step(void *arg)
{
	(void)arg;
	owner_runs++;
	if (owner_runs == owner_stop_after) {
		cr_lease_release(&owner_lease);
		return;
	}
	cr_defer(owner_step, NULL);
}

/* A continuously self-rescheduling owner is served in bounded turns (messages keep
 * flowing) and retirement completes once it releases. */
static void
test_self_rescheduling_owner_bounded(void)
{
	unsigned turns = 0, i;

	fresh();
	owner_runs = 0;
	owner_stop_after = 100;
	memset(&owner_lease, 0, sizeof(owner_lease));
	acquire_on(1, &owner_lease, 0);
	ut_set_current(1);
	cr_defer(owner_step, NULL);
	ut_set_current(CR_LCORE_NONE);
	CU_ASSERT_EQUAL(cr_lcore_retire(1, NULL, NULL), 0);
	for (i = 0; i < 20; i++)
		cr_send(1, count, NULL);
	while (!done(1) && turns < 1000) {
		ut_turn(1);
		turns++;
		if (turns == 1)
			CU_ASSERT_EQUAL(runs_on[1], 20); /* messages not starved by the owner */
	}
	CU_ASSERT_EQUAL(owner_runs, 100);
	CU_ASSERT(turns >= 100 && turns < 110); /* one owner step per turn */
	CU_ASSERT_TRUE(done(1));
}

static void *
release_thread(void *arg)
{
	cr_lease_release(arg);
	return NULL;
}

/* Release is idempotent and works from a foreign thread. */
static void
test_release_idempotent_foreign(void)
{
	struct cr_lease l = CR_LEASE_INIT;
	pthread_t t;

	fresh();
	acquire_on(1, &l, 0);
	CU_ASSERT_EQUAL(cr__holds(ut_lcore(1)), 1);
	pthread_create(&t, NULL, release_thread, &l);
	pthread_join(t, NULL);
	CU_ASSERT_FALSE(cr_lease_active(&l));
	CU_ASSERT_EQUAL(cr__holds(ut_lcore(1)), 0);
	CU_ASSERT_EQUAL(cr_lease_release(&l), -EALREADY);
	CU_ASSERT_EQUAL(cr_lease_release(&l), -EALREADY);
	CU_ASSERT_EQUAL(cr__holds(ut_lcore(1)), 0);
	/* acquire again after release */
	acquire_on(1, &l, 0);
	acquire_on(1, &l, -EBUSY);
	CU_ASSERT_EQUAL(cr_lease_release(&l), 0);
}

/* A byte copy is refused: it is inactive, and releasing it leaves the original's hold. */
static void
test_copy_refused_move_defined(void)
{
	struct cr_lease l = CR_LEASE_INIT, copy, moved = CR_LEASE_INIT;

	fresh();
	acquire_on(2, &l, 0);
	memcpy(&copy, &l, sizeof(l));
	CU_ASSERT_FALSE(cr_lease_active(&copy));
	CU_ASSERT_EQUAL(cr_lease_release(&copy), -EINVAL);
	CU_ASSERT_EQUAL(cr__holds(ut_lcore(2)), 1);
	CU_ASSERT_EQUAL(cr_lease_move(&moved, &l), 0);
	CU_ASSERT_FALSE(cr_lease_active(&l));
	CU_ASSERT_TRUE(cr_lease_active(&moved));
	CU_ASSERT_EQUAL(cr_lease_move(&moved, &l), -EBUSY);
	CU_ASSERT_EQUAL(cr__holds(ut_lcore(2)), 1);
	CU_ASSERT_EQUAL(cr_lease_release(&l), -EALREADY);
	CU_ASSERT_EQUAL(cr_lease_release(&moved), 0);
	CU_ASSERT_EQUAL(cr__holds(ut_lcore(2)), 0);
}

/* Graceful shutdown waits for a lease within its timeout, then goes forced. */
static void
test_shutdown_waits_then_forced(void)
{
	struct cr_lease l = CR_LEASE_INIT;
	uint64_t t0;

	fresh();
	acquire_on(1, &l, 0);
	t0 = ut_now;
	/* cr_shutdown() takes its deadline from the real clock; set ours in its terms */
	cr_shutdown(UINT64_MAX);
	atomic_store(&cr__rt.deadline, t0 + 1000000000ull);
	CU_ASSERT_FALSE(done(1));
	ut_turn(1);
	ut_now = t0 + 999999999ull;
	CU_ASSERT_FALSE(done(1));
	CU_ASSERT_TRUE(cr_lease_active(&l));
	ut_now = t0 + 1000000000ull; /* the timeout: forced, the lease is not waited for */
	CU_ASSERT_TRUE(done(1));
	CU_ASSERT_TRUE(cr_lease_active(&l)); /* forced does not release it for the owner */
	cr_lease_release(&l);
}

/* Forced teardown with an active lease: releasing and freeing it afterwards is safe. */
static void
test_forced_teardown_then_release(void)
{
	struct cr_lease *l = calloc(1, sizeof(*l));

	fresh();
	acquire_on(1, l, 0);
	cr_shutdown_force();
	atomic_store(&cr__rt.deadline, 0); /* "now" on the real clock is not the fake one's */
	CU_ASSERT_TRUE(done(1));
	ut_stop(); /* the runtime is gone */
	CU_ASSERT_EQUAL(cr_lease_release(l), 0);
	CU_ASSERT_FALSE(cr_lease_active(l));
	free(l);
	CU_ASSERT_EQUAL_FATAL(ut_start(NLC), 0);
}

static void
test_off_lcore_rejected(void)
{
	struct cr_lease l = CR_LEASE_INIT;

	fresh();
	ut_set_current(CR_LCORE_NONE);
	CU_ASSERT_EQUAL(cr_lease_acquire(&l), -EPERM);
	CU_ASSERT_FALSE(cr_lease_active(&l));
}

/* A stale release (an earlier incarnation) is a no-op on the new one. */
static void
test_stale_incarnation_release(void)
{
	struct cr_lease old = CR_LEASE_INIT, cur = CR_LEASE_INIT;
	uint64_t inc;

	fresh();
	acquire_on(1, &old, 0);
	inc = cr_lease_incarnation(&old);
	/* what a restart does to the word: a new incarnation, open, no holds */
	atomic_store(&ut_lcore(1)->hold_word, (inc + 1) << 32);
	acquire_on(1, &cur, 0);
	CU_ASSERT_EQUAL(cr_lease_incarnation(&cur), inc + 1);
	CU_ASSERT_EQUAL(cr_lease_release(&old), 0);	/* it was ours to drop ... */
	CU_ASSERT_EQUAL(cr__holds(ut_lcore(1)), 1);	/* ... but the new hold stays */
	CU_ASSERT_EQUAL(cr_lease_release(&cur), 0);
	CU_ASSERT_EQUAL(cr__holds(ut_lcore(1)), 0);
}

/* Retiring the main lcore is refused; a second retire of the same lcore too. */
static void
test_retire_errors(void)
{
	fresh();
	CU_ASSERT_EQUAL(cr_lcore_retire(0, NULL, NULL), -EBUSY);
	CU_ASSERT_EQUAL(cr_lcore_retire(NLC, NULL, NULL), -EINVAL);
	CU_ASSERT_EQUAL(cr_lcore_retire(1, NULL, NULL), 0);
	CU_ASSERT_EQUAL(cr_lcore_retire(1, NULL, NULL), -EALREADY);
	cr_shutdown_force();
	CU_ASSERT_EQUAL(cr_lcore_retire(2, NULL, NULL), -ESHUTDOWN);
}

/*
 * Regression (issue 12 item 7): the last release lands after the retiring lcore looked
 * (holds 1) and before it raised its park flag. The release used to wake first and drop
 * second, so it found no flag to claim; the lcore then slept up to its 10 ms bound past
 * the drop. Dropping first and counting "the holds went since the look" as work closes
 * that window.
 */
static void
test_release_between_look_and_park(void)
{
	struct cr_lease a = CR_LEASE_INIT;

	fresh();
	acquire_on(1, &a, 0);
	CU_ASSERT_EQUAL(cr_lcore_retire(1, NULL, NULL), 0);
	CU_ASSERT_FALSE(done(1)); /* its look: still held */
	CU_ASSERT_EQUAL(cr_lease_release(&a), 0); /* foreign, before the flag is up */
	ut_set_current(1);
	CU_ASSERT_FALSE(cr__park_prepare(ut_lcore(1))); /* work: it must not sleep */
	ut_set_current(CR_LCORE_NONE);
	CU_ASSERT_TRUE(done(1));
}

/* The same release after the flag is up: the wake comes after the drop, and wakes. */
static void
test_release_after_flag_wakes_after_drop(void)
{
	struct cr_lease a = CR_LEASE_INIT;
	uint64_t signals;

	fresh();
	acquire_on(1, &a, 0);
	CU_ASSERT_EQUAL(cr_lcore_retire(1, NULL, NULL), 0);
	CU_ASSERT_FALSE(done(1));
	ut_set_current(1);
	CU_ASSERT_TRUE_FATAL(cr__park_prepare(ut_lcore(1)));
	ut_set_current(CR_LCORE_NONE);
	signals = ut_wake_signals(1);
	CU_ASSERT_EQUAL(cr_lease_release(&a), 0);
	CU_ASSERT_EQUAL(ut_wake_signals(1), signals + 1);
	CU_ASSERT_EQUAL(cr__holds(ut_lcore(1)), 0);
	CU_ASSERT_TRUE(done(1));
}

static const struct ut_case cases[] = {
	UT_CASE(test_owner_retained_across_shrink),
	UT_CASE(test_admission_closed),
	UT_CASE(test_acquire_vs_close_ordering),
	UT_CASE(test_self_rescheduling_owner_bounded),
	UT_CASE(test_release_idempotent_foreign),
	UT_CASE(test_copy_refused_move_defined),
	UT_CASE(test_shutdown_waits_then_forced),
	UT_CASE(test_forced_teardown_then_release),
	UT_CASE(test_off_lcore_rejected),
	UT_CASE(test_stale_incarnation_release),
	UT_CASE(test_retire_errors),
	UT_CASE(test_retiring_with_lease_parks_until_release),
	UT_CASE(test_release_between_look_and_park),
	UT_CASE(test_release_after_flag_wakes_after_drop),
};

UT_MAIN("lease", cases, setup, teardown)
