/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <string.h>

#include "ut_cunit.h"
#include "ut_lcores.h"

static unsigned calls[300];
static struct cr_poller *handles[300];

static int
poll_fn(void *arg)
{
	calls[(uintptr_t)arg]++;
	return 0;
}

static int
busy_fn(void *arg)
{
	calls[(uintptr_t)arg]++;
	return 1;
}

/* Unregisters itself on its third run; ASan catches any use after free. */
static int
self_remove(void *arg)
{
	uintptr_t i = (uintptr_t)arg;

	if (++calls[i] == 3)
		cr_poller_unregister(&handles[i]);
	return 0;
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
reset(void)
{
	memset(calls, 0, sizeof(calls));
	memset(handles, 0, sizeof(handles));
	ut_stop();
	CU_ASSERT_EQUAL_FATAL(ut_start(2), 0);
}

static void
test_register_off_lcore(void)
{
	reset();
	ut_set_current(CR_LCORE_NONE);
	errno = 0;
	CU_ASSERT_PTR_NULL(cr_poller_register(poll_fn, NULL, 0));
	CU_ASSERT_EQUAL(errno, EPERM);
	cr_poller_unregister(NULL);
}

static void
test_active_every_turn(void)
{
	reset();
	ut_set_current(0);
	handles[0] = cr_poller_register(poll_fn, (void *)0, 0);
	handles[1] = cr_poller_register(busy_fn, (void *)1, 0);
	ut_set_current(CR_LCORE_NONE);
	CU_ASSERT_EQUAL(ut_poll_k(0, 5), 5); /* only busy_fn reports work */
	CU_ASSERT_EQUAL(calls[0], 5);
	CU_ASSERT_EQUAL(calls[1], 5);
	ut_set_current(0);
	cr_poller_unregister(&handles[0]);
	CU_ASSERT_PTR_NULL(handles[0]);
	cr_poller_unregister(&handles[1]);
	ut_set_current(CR_LCORE_NONE);
	ut_poll_k(0, 3);
	CU_ASSERT_EQUAL(calls[0], 5);
}

static void
test_unregister_from_own_callback(void)
{
	reset();
	ut_set_current(0);
	handles[0] = cr_poller_register(self_remove, (void *)0, 0);
	handles[1] = cr_poller_register(poll_fn, (void *)1, 0);
	handles[2] = cr_poller_register(self_remove, (void *)2, 1000000);
	ut_set_current(CR_LCORE_NONE);
	ut_poll_k(0, 10);
	CU_ASSERT_EQUAL(calls[0], 3);
	CU_ASSERT_EQUAL(calls[1], 10);
	CU_ASSERT_PTR_NULL(handles[0]);
	for (int i = 0; i < 10; i++) {
		ut_now += 1000000;
		ut_turn(0);
	}
	CU_ASSERT_EQUAL(calls[2], 3);
	CU_ASSERT_PTR_NULL(handles[2]);
	ut_set_current(0);
	cr_poller_unregister(&handles[1]);
	ut_set_current(CR_LCORE_NONE);
}

static void
test_timed_period(void)
{
	reset();
	ut_set_current(1);
	handles[0] = cr_poller_register(poll_fn, (void *)0, 10 * 1000000);
	ut_set_current(CR_LCORE_NONE);
	ut_poll_k(1, 3);
	CU_ASSERT_EQUAL(calls[0], 0);
	ut_now += 10 * 1000000;
	ut_poll_k(1, 3);
	CU_ASSERT_EQUAL(calls[0], 1);
	ut_now += 5 * 1000000;
	ut_turn(1);
	CU_ASSERT_EQUAL(calls[0], 1);
	ut_now += 5 * 1000000;
	ut_turn(1);
	CU_ASSERT_EQUAL(calls[0], 2);
	/* left registered: teardown frees it */
}

/* More active pollers than a batch: each turn runs CR_BATCH, and all get their turn. */
static void
test_more_than_a_batch(void)
{
	unsigned i, n = CR_BATCH * 2 + 3, min = UINT32_MAX, max = 0;

	CU_ASSERT_FATAL(n <= 300);
	reset();
	ut_set_current(0);
	for (i = 0; i < n; i++)
		handles[i] = cr_poller_register(poll_fn, (void *)(uintptr_t)i, 0);
	ut_set_current(CR_LCORE_NONE);
	ut_poll_k(0, n); /* n turns x CR_BATCH runs = CR_BATCH rounds of every poller */
	for (i = 0; i < n; i++) {
		min = calls[i] < min ? calls[i] : min;
		max = calls[i] > max ? calls[i] : max;
	}
	CU_ASSERT_EQUAL(min, CR_BATCH);
	CU_ASSERT_EQUAL(max, CR_BATCH);
}

static const struct ut_case cases[] = {
	UT_CASE(test_register_off_lcore),
	UT_CASE(test_active_every_turn),
	UT_CASE(test_unregister_from_own_callback),
	UT_CASE(test_timed_period),
	UT_CASE(test_more_than_a_batch),
};

UT_MAIN("reactor_poller", cases, setup, teardown)
