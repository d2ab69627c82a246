/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * app/cr-kv/script_state.h: the busy state word of an lcore's scripts, the lcore's side
 * (busy, write, end) and SCRIPT KILL's (from any lcore) stepped one after another on this
 * thread in each order: a write and a kill have exactly one outcome.
 */
#include "script_state.h"
#include "ut_cunit.h"

static _Atomic uint32_t w[2];

static void
reset(void)
{
	atomic_store(&w[0], 0);
	atomic_store(&w[1], 0);
}

static void
t_notbusy(void)
{
	reset();
	CU_ASSERT_EQUAL(kv_ss_kill(w, 2), KV_SS_NOTBUSY);
	CU_ASSERT_FALSE(kv_ss_busy(&w[0]));
	CU_ASSERT_TRUE(kv_ss_write(&w[0])); /* not busy: nothing to refuse */
	/* a script that wrote before it was busy and ended: the next one is killable */
	kv_ss_busy_begin(&w[0], true);
	kv_ss_busy_end(&w[0]);
	CU_ASSERT_EQUAL(atomic_load(&w[0]), 0);
	CU_ASSERT_EQUAL(kv_ss_kill(w, 2), KV_SS_NOTBUSY);
}

/* kill first, then the script tries to write: the write is refused */
static void
t_kill_then_write(void)
{
	reset();
	kv_ss_busy_begin(&w[1], false);
	CU_ASSERT_TRUE(kv_ss_busy(&w[1]));
	CU_ASSERT_FALSE(kv_ss_busy(&w[0])); /* the other lcore serves its clients */
	CU_ASSERT_EQUAL(kv_ss_kill(w, 2), KV_SS_KILLED);
	CU_ASSERT_TRUE(kv_ss_kill_asked(&w[1]));
	CU_ASSERT_FALSE(kv_ss_kill_asked(&w[0]));
	CU_ASSERT_FALSE(kv_ss_write(&w[1]));
	kv_ss_busy_end(&w[1]);
	CU_ASSERT_EQUAL(atomic_load(&w[1]), 0); /* the kill is spent */
	CU_ASSERT_EQUAL(kv_ss_kill(w, 2), KV_SS_NOTBUSY);
}

/* the script writes first: SCRIPT KILL answers UNKILLABLE and sets nothing */
static void
t_write_then_kill(void)
{
	reset();
	kv_ss_busy_begin(&w[0], false);
	CU_ASSERT_TRUE(kv_ss_write(&w[0]));
	CU_ASSERT_EQUAL(kv_ss_kill(w, 2), KV_SS_UNKILLABLE);
	CU_ASSERT_FALSE(kv_ss_kill_asked(&w[0]));
	CU_ASSERT_TRUE(kv_ss_write(&w[0]));
	kv_ss_busy_end(&w[0]);
	CU_ASSERT_EQUAL(atomic_load(&w[0]), 0);
}

/* it wrote before it became busy: unkillable from the start */
static void
t_wrote_before_busy(void)
{
	reset();
	kv_ss_busy_begin(&w[0], true);
	CU_ASSERT_EQUAL(kv_ss_kill(w, 2), KV_SS_UNKILLABLE);
	kv_ss_busy_end(&w[0]);
}

/* two busy scripts on one lcore: the kill stays until the last one ends */
static void
t_two_busy(void)
{
	reset();
	kv_ss_busy_begin(&w[0], false);
	kv_ss_busy_begin(&w[0], false);
	CU_ASSERT_EQUAL(atomic_load(&w[0]) & KV_SS_BUSY, 2);
	CU_ASSERT_EQUAL(kv_ss_kill(w, 2), KV_SS_KILLED);
	kv_ss_busy_end(&w[0]);
	CU_ASSERT_TRUE(kv_ss_kill_asked(&w[0])); /* the other one still sees it */
	CU_ASSERT_TRUE(kv_ss_busy(&w[0]));
	kv_ss_busy_end(&w[0]);
	CU_ASSERT_FALSE(kv_ss_kill_asked(&w[0]));
	CU_ASSERT_FALSE(kv_ss_busy(&w[0]));
}

/* busy on both lcores, one wrote: UNKILLABLE, the other is not killed either */
static void
t_two_lcores(void)
{
	reset();
	kv_ss_busy_begin(&w[0], false);
	kv_ss_busy_begin(&w[1], true);
	CU_ASSERT_EQUAL(kv_ss_kill(w, 2), KV_SS_UNKILLABLE);
	CU_ASSERT_FALSE(kv_ss_kill_asked(&w[0]));
	kv_ss_busy_end(&w[1]);
	CU_ASSERT_EQUAL(kv_ss_kill(w, 2), KV_SS_KILLED);
	CU_ASSERT_TRUE(kv_ss_kill_asked(&w[0]));
	kv_ss_busy_end(&w[0]);
}

static const struct ut_case cases[] = {
    UT_CASE(t_notbusy),		  UT_CASE(t_kill_then_write), UT_CASE(t_write_then_kill),
    UT_CASE(t_wrote_before_busy), UT_CASE(t_two_busy),	      UT_CASE(t_two_lcores),
};

UT_MAIN("kv_script_state", cases, NULL, NULL)
