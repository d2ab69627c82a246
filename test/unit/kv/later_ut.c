/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * app/cr-kv/later.h: a script's next time slice is run in a later turn whatever the state
 * of the lcore's defer queue: deferred when there is room, from its timer in a tick when
 * the queue is full (it used to be a kill, which could cut a script that wrote). On the
 * deterministic lcore harness, with the real reactor.
 */
#include "later.h"
#include "ut_cunit.h"
#include "ut_lcores.h"

static unsigned fillers, slices;

static void
filler(void *arg)
{
	(void)arg;
	fillers++;
}

static void
slice(void *arg)
{
	(*(unsigned *)arg)++;
}

static void
slice_timer(struct cr_timer *t, void *arg)
{
	(void)t;
	slice(arg);
}

static void
fresh(void)
{
	ut_stop();
	CU_ASSERT_EQUAL_FATAL(ut_start(1), 0);
	ut_now = 1000000000;
	ut_clock_step = 0;
	fillers = slices = 0;
}

/* room in the queue: the next turn, the timer not used */
static void
t_deferred(void)
{
	struct cr_timer t;

	fresh();
	ut_set_current(0);
	cr_timer_init(&t, slice_timer, &slices);
	kv_later(slice, &slices, &t);
	CU_ASSERT_FALSE(cr_timer_armed(&t));
	ut_set_current(CR_LCORE_NONE);
	ut_turn(0);
	CU_ASSERT_EQUAL(slices, 1);
	ut_poll_until_idle(10);
	CU_ASSERT_EQUAL(slices, 1);
}

/* a full queue (a real -EAGAIN): the slice runs once, from the timer, after the tick */
static void
t_queue_full(void)
{
	struct cr_timer t;
	unsigned i;

	fresh();
	ut_set_current(0);
	for (i = 0; i < CR_DEFER_CAP; i++)
		CU_ASSERT_EQUAL_FATAL(cr_defer(filler, NULL), 0);
	CU_ASSERT_EQUAL(cr_defer(filler, NULL), -EAGAIN);
	cr_timer_init(&t, slice_timer, &slices);
	kv_later(slice, &slices, &t);
	CU_ASSERT_TRUE(cr_timer_armed(&t));
	ut_set_current(CR_LCORE_NONE);
	ut_poll_until_idle(CR_DEFER_CAP);
	CU_ASSERT_EQUAL(fillers, CR_DEFER_CAP);
	CU_ASSERT_EQUAL(slices, 0); /* not before its tick */
	ut_now += 2000000;
	ut_poll_until_idle(10);
	CU_ASSERT_EQUAL(slices, 1);
	CU_ASSERT_FALSE(cr_timer_armed(&t));
}

static int
setup(void)
{
	return ut_start(1);
}

static int
teardown(void)
{
	ut_stop();
	return 0;
}

static const struct ut_case cases[] = {
    UT_CASE(t_deferred),
    UT_CASE(t_queue_full),
};

UT_MAIN("kv_later", cases, setup, teardown)
