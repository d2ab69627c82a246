/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The loop: bounded turns, the park/wake protocol as explicit interleavings, the stop
 * protocol (exactly-once delivery to a closing lcore), timers and the idle spin.
 */
#include <errno.h>
#include <string.h>

#include "ut_cunit.h"
#include "ut_lcores.h"

#define NLC 3

static unsigned runs;

static void
count(void *arg)
{
	(void)arg;
	runs++;
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
	runs = 0;
	ut_now = 1000000000;
	ut_clock_step = 0;
}

static bool
parked(unsigned id)
{
	return atomic_load(&ut_lcore(id)->parked) == 1;
}

/* Target raises its flag first; the sender's flush sees it and wakes exactly once. */
static void
test_wake_sender_after_park(void)
{
	fresh();
	CU_ASSERT_TRUE(cr__park_prepare(ut_lcore(1)));
	CU_ASSERT_TRUE(parked(1));
	ut_set_current(0);
	CU_ASSERT_EQUAL(cr_send(1, count, NULL), 0);
	CU_ASSERT_EQUAL(ut_wake_signals(1), 0); /* buffered: no wake yet */
	ut_set_current(CR_LCORE_NONE);
	ut_turn(0);
	CU_ASSERT_EQUAL(ut_wake_signals(1), 1);
	CU_ASSERT_FALSE(parked(1)); /* the waker claimed the flag */
	ut_set_current(1);
	cr__park_commit(ut_lcore(1));
	ut_set_current(CR_LCORE_NONE);
	ut_turn(1);
	CU_ASSERT_EQUAL(runs, 1);
	CU_ASSERT_EQUAL(ut_lcore(1)->stats.wakes_recv, 1);
}

/* Sender enqueues before the target raises its flag: no wake is sent, and the target's
 * re-check finds the message and does not sleep. */
static void
test_wake_sender_before_park(void)
{
	fresh();
	ut_set_current(0);
	CU_ASSERT_EQUAL(cr_send(1, count, NULL), 0);
	ut_set_current(CR_LCORE_NONE);
	ut_turn(0);
	CU_ASSERT_EQUAL(ut_wake_signals(1), 0);
	CU_ASSERT_FALSE(cr__park_prepare(ut_lcore(1)));
	CU_ASSERT_FALSE(parked(1));
	ut_turn(1);
	CU_ASSERT_EQUAL(runs, 1);
}

/* Two senders race for one parked target: one sleep, one signal. */
static void
test_wake_claimed_once(void)
{
	fresh();
	CU_ASSERT_TRUE(cr__park_prepare(ut_lcore(2)));
	ut_set_current(0);
	cr_send(2, count, NULL);
	ut_set_current(1);
	cr_send(2, count, NULL);
	ut_set_current(CR_LCORE_NONE);
	CU_ASSERT_EQUAL(cr_send(2, count, NULL), 0); /* a foreign thread too */
	ut_turn(0);
	ut_turn(1);
	CU_ASSERT_EQUAL(ut_wake_signals(2), 1);
	ut_poll_until_idle(10);
	CU_ASSERT_EQUAL(runs, 3);
}

/* A foreign sender wakes a parked lcore through the foreign path. */
static void
test_wake_foreign(void)
{
	fresh();
	CU_ASSERT_TRUE(cr__park_prepare(ut_lcore(1)));
	ut_set_current(CR_LCORE_NONE);
	CU_ASSERT_EQUAL(cr_send(1, count, NULL), 0);
	CU_ASSERT_EQUAL(ut_wake_signals(1), 1);
	CU_ASSERT_FALSE(parked(1));
}

/* Work found on the re-check: the flag comes down, and a later send does not signal a
 * lcore that is awake. */
static void
test_no_wake_when_awake(void)
{
	fresh();
	ut_set_current(CR_LCORE_NONE);
	cr_send(1, count, NULL);
	CU_ASSERT_FALSE(cr__park_prepare(ut_lcore(1)));
	cr_send(1, count, NULL);
	CU_ASSERT_EQUAL(ut_wake_signals(1), 0);
	ut_turn(1);
	CU_ASSERT_EQUAL(runs, 2);
}

/* A pending completion, deferred task or due timer also keeps the lcore up. */
static void
test_park_recheck_sources(void)
{
	struct cr_timer t;

	fresh();
	ut_be(1)->fake_cqes = 1;
	CU_ASSERT_FALSE(cr__park_prepare(ut_lcore(1)));
	ut_turn(1);
	CU_ASSERT_TRUE(cr__park_prepare(ut_lcore(1)));
	atomic_store(&ut_lcore(1)->parked, 0);

	ut_set_current(1);
	CU_ASSERT_EQUAL(cr_defer(count, NULL), 0);
	CU_ASSERT_FALSE(cr__park_prepare(ut_lcore(1)));
	ut_set_current(CR_LCORE_NONE);
	ut_turn(1);

	ut_set_current(1);
	cr_timer_init(&t, NULL, NULL);
	cr_timer_init(&t, (cr_timer_fn)(void (*)(void))count, NULL);
	cr_timer_start(&t, 5000000);
	CU_ASSERT_TRUE(cr__park_prepare(ut_lcore(1)));
	/* the park sleeps until the timer, not forever */
	cr__park_commit(ut_lcore(1));
	CU_ASSERT(ut_be(1)->last_timeout <= 5000000);
	CU_ASSERT(ut_be(1)->last_timeout >= 4000000);
	ut_now += 5000000;
	CU_ASSERT_FALSE(cr__park_prepare(ut_lcore(1)));
	ut_set_current(CR_LCORE_NONE);
	CU_ASSERT_EQUAL(ut_turn(1), 1);
}

/* With no timer the park has no timeout: an idle lcore costs nothing. */
static void
test_park_forever_when_idle(void)
{
	fresh();
	ut_set_current(1);
	CU_ASSERT_TRUE(cr__park_prepare(ut_lcore(1)));
	cr__park_commit(ut_lcore(1));
	CU_ASSERT_EQUAL(ut_be(1)->last_timeout, UINT64_MAX);
	ut_set_current(CR_LCORE_NONE);
}

static void
resched(void *arg)
{
	runs++;
	cr_defer(resched, arg);
}

/* A task that keeps rescheduling itself gets one run per turn; the mailbox still flows. */
static void
test_self_rescheduling_task_bounded(void)
{
	unsigned i;

	fresh();
	ut_set_current(1);
	cr_defer(resched, NULL);
	ut_set_current(CR_LCORE_NONE);
	for (i = 0; i < 10; i++)
		cr_send(1, count, NULL);
	ut_poll_k(1, 5);
	/* 5 turns: 5 runs of resched, and the 10 messages in the first turn */
	CU_ASSERT_EQUAL(runs, 15);
}

static unsigned late_rc_ok, late_rc_shutdown;

static void
sends_more(void *arg)
{
	(void)arg;
	runs++;
	if (cr_send(2, count, NULL) == 0)
		late_rc_ok++;
	else
		late_rc_shutdown++;
}

/*
 * Stop with messages queued, one buffered in another lcore's outbox (a hold), and one
 * sent after the close: everything accepted runs exactly once, the late one fails at once.
 */
static void
test_stop_runs_every_accepted_message(void)
{
	unsigned i;

	fresh();
	ut_set_current(CR_LCORE_NONE);
	for (i = 0; i < 100; i++)
		CU_ASSERT_EQUAL(cr_send(2, count, NULL), 0);
	ut_set_current(0);
	CU_ASSERT_EQUAL(cr_send(2, count, NULL), 0); /* buffered in 0's outbox: a hold */
	ut_set_current(CR_LCORE_NONE);

	atomic_store(&cr__rt.stop, true);
	CU_ASSERT_FALSE(cr__lcore_done(ut_lcore(2))); /* closes, but 0 still holds */
	CU_ASSERT_FALSE(cr_mailbox_is_open(&ut_lcore(2)->mbox));
	CU_ASSERT_EQUAL(cr_send(2, count, NULL), -ESHUTDOWN); /* refused, caller keeps arg */
	ut_set_current(1);
	CU_ASSERT_EQUAL(cr_send(2, count, NULL), -ESHUTDOWN);
	ut_set_current(CR_LCORE_NONE);
	ut_turn(2);
	ut_turn(2);
	CU_ASSERT_FALSE(cr__lcore_done(ut_lcore(2))); /* the hold is still there */
	ut_turn(0);				      /* flush: hold dropped */
	CU_ASSERT_FALSE(cr__lcore_done(ut_lcore(2))); /* quiesced, but not yet drained */
	ut_turn(2);
	CU_ASSERT_TRUE(cr__lcore_done(ut_lcore(2)));
	CU_ASSERT_EQUAL(runs, 101);
	CU_ASSERT_EQUAL(cr_lcore_state(2), CR_LCORE_RETIRING);
}

/* A message run while closing may still send; sends to the closed lcore fail. */
static void
test_stop_messages_sending_while_closing(void)
{
	fresh();
	late_rc_ok = late_rc_shutdown = 0;
	ut_set_current(CR_LCORE_NONE);
	cr_send(1, sends_more, NULL);
	atomic_store(&cr__rt.stop, true);
	cr__lcore_done(ut_lcore(2)); /* 2 closes first */
	ut_turn(1);		     /* sends_more: its send to 2 is refused */
	CU_ASSERT_EQUAL(late_rc_shutdown, 1);
	CU_ASSERT_EQUAL(late_rc_ok, 0);
}

static void
noop(void *arg)
{
	(void)arg;
}

/* An lcore with a call out keeps its mailbox open until the reply is in. */
static void
test_stop_waits_for_own_calls(void)
{
	struct cr_call c;

	fresh();
	ut_set_current(0);
	CU_ASSERT_EQUAL(cr_call(1, &c, noop, NULL, count, NULL), 0);
	ut_set_current(CR_LCORE_NONE);
	atomic_store(&cr__rt.stop, true);
	CU_ASSERT_FALSE(cr__lcore_done(ut_lcore(0)));
	CU_ASSERT_TRUE(cr_mailbox_is_open(&ut_lcore(0)->mbox));
	ut_turn(0); /* flush the call */
	CU_ASSERT_FALSE(cr__lcore_done(ut_lcore(1))); /* 1 closes; the call is already in */
	ut_turn(1);				      /* runs it, replies */
	ut_turn(1);
	ut_turn(0);
	CU_ASSERT_EQUAL(runs, 1);
	CU_ASSERT_TRUE(cr__lcore_done(ut_lcore(0)));
	/* once closed, a new call cannot be made: its reply could not get back */
	ut_set_current(0);
	CU_ASSERT_EQUAL(cr_call(1, &c, noop, NULL, count, NULL), -ESHUTDOWN);
	ut_set_current(CR_LCORE_NONE);
}

/* One idle step of lcore 1, the clock advancing 1 us per read. */
static void
idle_once(struct cr_lcore *lc)
{
	ut_clock_step = 1000;
	ut_set_current(1);
	cr__lcore_idle(lc);
	ut_set_current(CR_LCORE_NONE);
	ut_clock_step = 0;
}

/*
 * The idle policy: with no history (or idle spells longer than a park costs) an idle
 * lcore parks at once, spending nothing on a spin.
 */
static void
test_idle_parks_when_spells_are_long(void)
{
	struct cr_lcore *lc;
	struct cr_lcore_stats st;

	fresh();
	lc = ut_lcore(1);
	idle_once(lc);
	CU_ASSERT_EQUAL(ut_be(1)->parks, 1);
	CU_ASSERT_EQUAL(cr_lcore_stats(1, &st), 0);
	CU_ASSERT_EQUAL(st.spin_hits + st.spin_misses, 0);
	CU_ASSERT_EQUAL(st.spin_ns, 0);
	CU_ASSERT_EQUAL(st.spin_budget_ns, 0);
}

/* Spells shorter than a park: it spins, at most what a park costs, and a hit parks not. */
static void
test_idle_spins_when_spells_are_short(void)
{
	struct cr_lcore *lc;
	struct cr_lcore_stats st;

	fresh();
	lc = ut_lcore(1);
	lc->park_cost_ns = 5000;
	lc->gap_ewma_ns = 1000;
	lc->busy_recent_ns = 1000000;
	ut_clock_step = 1000;
	ut_set_current(1);
	cr__lcore_idle(lc); /* nothing comes: spins ~5 us, then parks */
	CU_ASSERT_EQUAL(ut_be(1)->parks, 1);
	CU_ASSERT_EQUAL(cr_lcore_stats(1, &st), 0);
	CU_ASSERT_EQUAL(st.spin_misses, 1);
	CU_ASSERT_EQUAL(st.spin_budget_ns, 5000);
	CU_ASSERT(st.spin_ns >= 5000 && st.spin_ns <= 7000);
	cr_defer(count, NULL);
	cr__lcore_idle(lc); /* work is there: a hit, no park */
	ut_set_current(CR_LCORE_NONE);
	ut_clock_step = 0;
	CU_ASSERT_EQUAL(ut_be(1)->parks, 1);
	CU_ASSERT_EQUAL(cr_lcore_stats(1, &st), 0);
	CU_ASSERT_EQUAL(st.spin_hits, 1);
}

/* A reply to its own call is due: it spins even with no short spells behind it. */
static void
test_idle_spins_for_a_reply(void)
{
	struct cr_lcore *lc;
	struct cr_lcore_stats st;

	fresh();
	lc = ut_lcore(1);
	lc->park_cost_ns = 3000;
	lc->busy_recent_ns = 1000000;
	lc->calls_out = 1;
	idle_once(lc);
	lc->calls_out = 0;
	CU_ASSERT_EQUAL(cr_lcore_stats(1, &st), 0);
	CU_ASSERT_EQUAL(st.spin_misses, 1);
	CU_ASSERT_EQUAL(st.spin_budget_ns, 3000);
}

/* Its last busy turn sent messages (a ping, a request): the reply is worth a spin. */
static void
test_idle_spins_after_sending(void)
{
	struct cr_lcore *lc;
	struct cr_lcore_stats st;

	fresh();
	lc = ut_lcore(1);
	lc->park_cost_ns = 4000;
	lc->busy_recent_ns = 1000000;
	lc->sent_last_turn = true;
	idle_once(lc);
	CU_ASSERT_EQUAL(cr_lcore_stats(1, &st), 0);
	CU_ASSERT_EQUAL(st.spin_misses, 1);
	CU_ASSERT_EQUAL(st.spin_budget_ns, 4000);
}

/* Spinning never takes more than a quarter of the time the lcore was busy lately. */
static void
test_idle_spin_share_bounded(void)
{
	struct cr_lcore *lc;
	struct cr_lcore_stats st;

	fresh();
	lc = ut_lcore(1);
	lc->park_cost_ns = 5000;
	lc->gap_ewma_ns = 1000;
	lc->busy_recent_ns = 40000;
	lc->spin_recent_ns = 10001; /* just over a quarter */
	idle_once(lc);
	CU_ASSERT_EQUAL(cr_lcore_stats(1, &st), 0);
	CU_ASSERT_EQUAL(st.spin_hits + st.spin_misses, 0);
	CU_ASSERT_EQUAL(ut_be(1)->parks, 1);
}

/* --idle-spin 0: an idle lcore parks at once, without a spin (no hit, no miss). */
static void
test_idle_spin_zero_parks_at_once(void)
{
	struct cr_lcore *lc;
	struct cr_lcore_stats st;

	fresh();
	lc = ut_lcore(1);
	lc->calls_out = 1; /* even with a reply due */
	cr__rt.cfg.idle_spin_fixed = true;
	cr__rt.cfg.idle_spin_ns = 0;
	idle_once(lc);
	cr__rt.cfg.idle_spin_fixed = false;
	lc->calls_out = 0;
	CU_ASSERT_EQUAL(ut_be(1)->parks, 1);
	CU_ASSERT_EQUAL(cr_lcore_stats(1, &st), 0);
	CU_ASSERT_EQUAL(st.spin_hits + st.spin_misses, 0);
}

static const struct ut_case cases[] = {
	UT_CASE(test_wake_sender_after_park),
	UT_CASE(test_idle_spin_zero_parks_at_once),
	UT_CASE(test_wake_sender_before_park),
	UT_CASE(test_wake_claimed_once),
	UT_CASE(test_wake_foreign),
	UT_CASE(test_no_wake_when_awake),
	UT_CASE(test_park_recheck_sources),
	UT_CASE(test_park_forever_when_idle),
	UT_CASE(test_self_rescheduling_task_bounded),
	UT_CASE(test_stop_runs_every_accepted_message),
	UT_CASE(test_stop_messages_sending_while_closing),
	UT_CASE(test_stop_waits_for_own_calls),
	UT_CASE(test_idle_parks_when_spells_are_long),
	UT_CASE(test_idle_spins_when_spells_are_short),
	UT_CASE(test_idle_spins_for_a_reply),
	UT_CASE(test_idle_spins_after_sending),
	UT_CASE(test_idle_spin_share_bounded),
};

UT_MAIN("reactor_loop", cases, setup, teardown)
