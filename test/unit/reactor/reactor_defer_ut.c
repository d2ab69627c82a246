/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>

#include "ut_cunit.h"
#include "ut_lcores.h"

static unsigned seq[CR_DEFER_CAP + 8], n_seq;

static void
rec(void *arg)
{
	seq[n_seq++] = (unsigned)(uintptr_t)arg;
}

static void
again(void *arg)
{
	rec(arg);
	cr_defer(rec, (void *)(uintptr_t)1000);
}

static int
setup(void)
{
	return ut_start(2);
}

static int
teardown(void)
{
	ut_stop();
	return 0;
}

static void
test_off_lcore(void)
{
	ut_set_current(CR_LCORE_NONE);
	CU_ASSERT_EQUAL(cr_defer(rec, NULL), -EPERM);
	ut_set_current(0);
	CU_ASSERT_EQUAL(cr_defer(NULL, NULL), -EINVAL);
	ut_set_current(CR_LCORE_NONE);
}

static void
test_fifo_batched(void)
{
	unsigned i;

	n_seq = 0;
	ut_set_current(0);
	for (i = 0; i < CR_BATCH + 10; i++)
		CU_ASSERT_EQUAL(cr_defer(rec, (void *)(uintptr_t)i), 0);
	ut_set_current(CR_LCORE_NONE);
	CU_ASSERT_EQUAL(ut_turn(0), CR_BATCH);
	CU_ASSERT_EQUAL(ut_turn(0), 10);
	CU_ASSERT_EQUAL(n_seq, CR_BATCH + 10);
	for (i = 0; i < n_seq; i++)
		CU_ASSERT_EQUAL(seq[i], i);
}

/* A task deferred by a deferred task runs in the next turn, not this one. */
static void
test_deferred_from_deferred(void)
{
	n_seq = 0;
	ut_set_current(0);
	cr_defer(again, (void *)(uintptr_t)1);
	ut_set_current(CR_LCORE_NONE);
	CU_ASSERT_EQUAL(ut_turn(0), 1);
	CU_ASSERT_EQUAL(n_seq, 1);
	CU_ASSERT_EQUAL(ut_turn(0), 1);
	CU_ASSERT_EQUAL(n_seq, 2);
	CU_ASSERT_EQUAL(seq[1], 1000);
}

static void
test_full(void)
{
	unsigned i;

	n_seq = 0;
	ut_set_current(1);
	for (i = 0; i < CR_DEFER_CAP; i++)
		CU_ASSERT_EQUAL_FATAL(cr_defer(rec, NULL), 0);
	CU_ASSERT_EQUAL(cr_defer(rec, NULL), -EAGAIN);
	ut_set_current(CR_LCORE_NONE);
	ut_poll_until_idle(CR_DEFER_CAP);
	CU_ASSERT_EQUAL(n_seq, CR_DEFER_CAP);
}

static const struct ut_case cases[] = {
	UT_CASE(test_off_lcore),
	UT_CASE(test_fifo_batched),
	UT_CASE(test_deferred_from_deferred),
	UT_CASE(test_full),
};

UT_MAIN("reactor_defer", cases, setup, teardown)
