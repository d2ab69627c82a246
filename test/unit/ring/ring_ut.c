/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>

#include "cr_ring.h"
#include "ut_cunit.h"

static void
noop(void *arg)
{
	(void)arg;
}

static void
test_create_bad(void)
{
	errno = 0;
	CU_ASSERT_PTR_NULL(cr_ring_create("x", 100, CR_RING_SPSC, -1));
	CU_ASSERT_EQUAL(errno, EINVAL);
	CU_ASSERT_PTR_NULL(cr_ring_create("x", 0, CR_RING_SPSC, -1));
	CU_ASSERT_PTR_NULL(cr_ring_create("x", 64, (enum cr_ring_mode)42, -1));
	cr_ring_free(NULL);
}

static void
test_fifo_and_capacity(void)
{
	enum cr_ring_mode modes[] = {CR_RING_SPSC, CR_RING_MPSC_HTS, CR_RING_MPSC_RTS};

	for (unsigned m = 0; m < 3; m++) {
		struct cr_ring *r = cr_ring_create("t", 64, modes[m], 0);
		struct cr_msg in[100], out[100];
		unsigned i, n;

		CU_ASSERT_PTR_NOT_NULL_FATAL(r);
		CU_ASSERT_EQUAL(cr_ring_capacity(r), 63);
		CU_ASSERT_TRUE(cr_ring_empty(r));
		for (i = 0; i < 100; i++) {
			in[i].fn = noop;
			in[i].arg = (void *)(uintptr_t)i;
		}
		n = cr_ring_enqueue_burst(r, in, 100);
		CU_ASSERT_EQUAL(n, 63); /* a prefix: the rest is the caller's */
		CU_ASSERT_EQUAL(cr_ring_count(r), 63);
		CU_ASSERT_EQUAL(cr_ring_enqueue_burst(r, in, 1), 0);
		n = cr_ring_dequeue_burst(r, out, 10);
		CU_ASSERT_EQUAL(n, 10);
		n += cr_ring_dequeue_burst(r, out + 10, 90);
		CU_ASSERT_EQUAL(n, 63);
		for (i = 0; i < n; i++) {
			CU_ASSERT_EQUAL(out[i].arg, (void *)(uintptr_t)i);
			CU_ASSERT_PTR_EQUAL(out[i].fn, noop);
		}
		CU_ASSERT_TRUE(cr_ring_empty(r));
		cr_ring_free(r);
	}
}

static const struct ut_case cases[] = {
	UT_CASE(test_create_bad),
	UT_CASE(test_fifo_and_capacity),
};

UT_MAIN("ring", cases, NULL, NULL)
