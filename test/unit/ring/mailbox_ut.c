/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <string.h>

#include "cr_mailbox.h"
#include "ut_cunit.h"

static struct cr_mailbox mb;

static void
noop(void *arg)
{
	(void)arg;
}

static void
init3(void)
{
	struct cr_cpuset s;

	memset(&s, 0, sizeof(s));
	cr_cpuset_set(&s, 0);
	cr_cpuset_set(&s, 2);
	cr_cpuset_set(&s, 5);
	CU_ASSERT_EQUAL_FATAL(cr_mailbox_init(&mb, &s, 64, 64, CR_RING_MPSC_HTS, -1), 0);
}

static void
test_init_bad(void)
{
	struct cr_cpuset s;

	memset(&s, 0, sizeof(s));
	cr_cpuset_set(&s, 1);
	CU_ASSERT_EQUAL(cr_mailbox_init(&mb, &s, 64, 64, CR_RING_SPSC, -1), -EINVAL);
	CU_ASSERT_EQUAL(cr_mailbox_init(&mb, &s, 63, 64, CR_RING_MPSC_HTS, -1), -EINVAL);
}

/* Admission: holds are counted; close refuses new ones; quiesced only when none left. */
static void
test_admission(void)
{
	init3();
	CU_ASSERT_TRUE(cr_mailbox_is_open(&mb));
	CU_ASSERT_FALSE(cr_mailbox_quiesced(&mb));
	CU_ASSERT_EQUAL(cr_mailbox_admit(&mb), 0);
	CU_ASSERT_EQUAL(cr_mailbox_admit(&mb), 0);
	cr_mailbox_close(&mb);
	CU_ASSERT_FALSE(cr_mailbox_is_open(&mb));
	CU_ASSERT_EQUAL(cr_mailbox_admit(&mb), -ESHUTDOWN);
	CU_ASSERT_FALSE(cr_mailbox_quiesced(&mb));
	cr_mailbox_unadmit(&mb);
	CU_ASSERT_FALSE(cr_mailbox_quiesced(&mb));
	cr_mailbox_unadmit(&mb);
	CU_ASSERT_TRUE(cr_mailbox_quiesced(&mb));
	cr_mailbox_close(&mb); /* idempotent */
	CU_ASSERT_TRUE(cr_mailbox_quiesced(&mb));
	cr_mailbox_reopen(&mb);
	CU_ASSERT_TRUE(cr_mailbox_is_open(&mb));
	CU_ASSERT_EQUAL(cr_mailbox_admit(&mb), 0);
	cr_mailbox_unadmit(&mb);
	cr_mailbox_fini(&mb);
}

/* Drain visits sources round robin, foreign ring included; nothing starves. */
static void
test_drain_fair(void)
{
	struct cr_msg m = {noop, NULL}, out[8];
	unsigned i, n, from_foreign = 0, from_0 = 0, from_2 = 0, from_5 = 0;

	init3();
	for (i = 0; i < 40; i++) {
		m.arg = (void *)(uintptr_t)0;
		cr_mailbox_put(&mb, 0, &m, 1);
		m.arg = (void *)(uintptr_t)2;
		cr_mailbox_put(&mb, 2, &m, 1);
		m.arg = (void *)(uintptr_t)5;
		cr_mailbox_put(&mb, 5, &m, 1);
		m.arg = (void *)(uintptr_t)99;
		cr_mailbox_put_foreign(&mb, &m, 1);
	}
	CU_ASSERT_EQUAL(cr_mailbox_depth(&mb), 160);
	/* 4 drains of 8: each source gets to go first once */
	for (i = 0; i < 4; i++) {
		n = cr_mailbox_drain(&mb, out, 8);
		CU_ASSERT_EQUAL(n, 8);
		for (unsigned k = 0; k < n; k++) {
			uintptr_t a = (uintptr_t)out[k].arg;

			from_0 += a == 0;
			from_2 += a == 2;
			from_5 += a == 5;
			from_foreign += a == 99;
		}
	}
	CU_ASSERT_EQUAL(from_0, 8);
	CU_ASSERT_EQUAL(from_2, 8);
	CU_ASSERT_EQUAL(from_5, 8);
	CU_ASSERT_EQUAL(from_foreign, 8);
	while (cr_mailbox_drain(&mb, out, 8) != 0)
		;
	CU_ASSERT_TRUE(cr_mailbox_empty(&mb));
	cr_mailbox_fini(&mb);
}

/*
 * The doorbell: a put rings its ring's bit, a drain looks only at rings whose bit rang,
 * a drain cut short by its limit looks again next time at what it left, and the empty
 * check sees a bell without scanning a ring.
 */
static void
test_doorbell(void)
{
	struct cr_msg m = {noop, NULL}, out[64];
	unsigned i, n, total = 0;

	init3();
	CU_ASSERT_TRUE(cr_mailbox_empty(&mb));
	CU_ASSERT_EQUAL(cr_mailbox_drain(&mb, out, 8), 0);
	for (i = 0; i < 20; i++)
		CU_ASSERT_EQUAL(cr_mailbox_put(&mb, 5, &m, 1), 1);
	CU_ASSERT_EQUAL(atomic_load(&mb.bell[0]), UINT64_C(1) << mb.bit_of[5]);
	CU_ASSERT_FALSE(cr_mailbox_empty(&mb));
	/* Eight at a time: the bell is taken at once, the rest is owed, not lost. */
	n = cr_mailbox_drain(&mb, out, 8);
	CU_ASSERT_EQUAL(n, 8);
	CU_ASSERT_EQUAL(atomic_load(&mb.bell[0]), 0);
	CU_ASSERT_FALSE(cr_mailbox_empty(&mb));
	total += n;
	while ((n = cr_mailbox_drain(&mb, out, 8)) != 0)
		total += n;
	CU_ASSERT_EQUAL(total, 20);
	CU_ASSERT_TRUE(cr_mailbox_empty(&mb));
	/* A foreign put rings the last bit. */
	CU_ASSERT_EQUAL(cr_mailbox_put_foreign(&mb, &m, 1), 1);
	CU_ASSERT_EQUAL(atomic_load(&mb.bell[0]), UINT64_C(1) << mb.nsrc);
	CU_ASSERT_EQUAL(cr_mailbox_drain(&mb, out, 8), 1);
	CU_ASSERT_TRUE(cr_mailbox_empty(&mb));
	cr_mailbox_fini(&mb);
}

static const struct ut_case cases[] = {
	UT_CASE(test_init_bad),
	UT_CASE(test_admission),
	UT_CASE(test_drain_fair),
	UT_CASE(test_doorbell),
};

UT_MAIN("mailbox", cases, NULL, NULL)
