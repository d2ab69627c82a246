/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Deterministic interleavings of retire with the retiring lcore's own loop and with a
 * shutdown, on simulated lcores stepped on one thread: an lcore turn is run at the point
 * where a racing thread could run (cr__lifecycle_test_point), and every accepted request
 * must stay accepted.
 */
#include <errno.h>
#include <string.h>

#include "ut_cunit.h"
#include "ut_lcores.h"

#define NLC 3

static void
fresh(void)
{
	ut_stop();
	CU_ASSERT_EQUAL_FATAL(ut_start(NLC), 0);
	ut_now = 1000000000;
	ut_clock_step = 0;
	cr__lifecycle_test_point = NULL;
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

static unsigned stepped;
static unsigned step_id;

/* At the named point, the retiring lcore runs its loop's stop check and a turn. */
static void
step_lcore(const char *where)
{
	(void)where;
	stepped++;
	(void)done(step_id);
	ut_turn(step_id);
}

/*
 * Regression (issue 12 item 13: "retire rc -108" in the lifecycle stress under TSan): the
 * lcore saw the published request and began closing before cr_lcore_retire() moved its
 * state; the call then took its own request back and reported -ESHUTDOWN while the lcore
 * went on retiring, its done callback never to run.
 */
static void
test_lcore_acts_on_request_at_once(void)
{
	fresh();
	step_id = 1;
	stepped = 0;
	cr__lifecycle_test_point = step_lcore;
	CU_ASSERT_EQUAL(cr_lcore_retire(1, NULL, NULL), 0);
	cr__lifecycle_test_point = NULL;
	CU_ASSERT_EQUAL(stepped, 1);
	CU_ASSERT_EQUAL(cr_lcore_state(1), CR_LCORE_RETIRING);
	/* The request stays published: the lcore's end takes it and runs done. */
	CU_ASSERT_TRUE(atomic_load(&ut_lcore(1)->retire_req));
	CU_ASSERT_TRUE(done(1));
}

/* A shutdown that began closing the lcore first: refused with -ESHUTDOWN, nothing kept. */
static void
test_shutdown_first_refuses(void)
{
	fresh();
	cr_shutdown(UINT64_MAX);
	ut_set_current(1);
	(void)cr__lcore_done(ut_lcore(1));
	ut_set_current(CR_LCORE_NONE);
	CU_ASSERT_EQUAL(cr_lcore_retire(1, NULL, NULL), -ESHUTDOWN);
	CU_ASSERT_FALSE(atomic_load(&ut_lcore(1)->retire_req));
}

/* A shutdown after the retire was accepted: the request survives it (done will run). */
static void
test_shutdown_after_retire_keeps_request(void)
{
	fresh();
	CU_ASSERT_EQUAL(cr_lcore_retire(2, NULL, NULL), 0);
	(void)done(2);
	cr_shutdown(UINT64_MAX);
	(void)done(2);
	CU_ASSERT_TRUE(atomic_load(&ut_lcore(2)->retire_req));
	CU_ASSERT_EQUAL(cr_lcore_state(2), CR_LCORE_RETIRING);
	CU_ASSERT_EQUAL(cr_lcore_retire(2, NULL, NULL), -ESHUTDOWN);
}

/* Twice: the second is refused, the first stays. */
static void
test_second_retire_already(void)
{
	fresh();
	CU_ASSERT_EQUAL(cr_lcore_retire(1, NULL, NULL), 0);
	CU_ASSERT_EQUAL(cr_lcore_retire(1, NULL, NULL), -EALREADY);
	(void)done(1);
	CU_ASSERT_EQUAL(cr_lcore_retire(1, NULL, NULL), -EALREADY);
	CU_ASSERT_TRUE(atomic_load(&ut_lcore(1)->retire_req));
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

static const struct ut_case cases[] = {
	UT_CASE(test_lcore_acts_on_request_at_once),
	UT_CASE(test_shutdown_first_refuses),
	UT_CASE(test_shutdown_after_retire_keeps_request),
	UT_CASE(test_second_retire_already),
};

UT_MAIN("reactor_retire", cases, setup, teardown)
