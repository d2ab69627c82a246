/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * app/cr-kv/script_state.h: the busy state word of an lcore's scripts, the lcore's side
 * (busy, write, end, per script) and SCRIPT KILL's (from any lcore, in two phases) stepped
 * one after another on this thread in each order: a write and a kill have exactly one
 * outcome, what one script did never sticks to another, and the answer says what was done.
 * Then two lcores' scripts and SCRIPT KILL race on threads, seeded, with exact counts.
 */
#include <pthread.h>
#include <stdlib.h>

#include "script_state.h"
#include "ut_cunit.h"

static _Atomic uint64_t w[2];

static void
reset(void)
{
	atomic_store(&w[0], 0);
	atomic_store(&w[1], 0);
}

static void
t_notbusy(void)
{
	struct kv_ss_script a;

	reset();
	CU_ASSERT_EQUAL(kv_ss_kill(w, 2), KV_SS_NOTBUSY);
	CU_ASSERT_FALSE(kv_ss_busy(&w[0]));
	/* a script that wrote before it was busy and ended: the next one is killable */
	kv_ss_busy_begin(&w[0], &a, true);
	kv_ss_busy_end(&w[0], &a);
	CU_ASSERT_FALSE(kv_ss_busy(&w[0]));
	CU_ASSERT_EQUAL(kv_ss_kill(w, 2), KV_SS_NOTBUSY);
}

/* kill first, then the script tries to write: the write is refused */
static void
t_kill_then_write(void)
{
	struct kv_ss_script a;

	reset();
	kv_ss_busy_begin(&w[1], &a, false);
	CU_ASSERT_TRUE(kv_ss_busy(&w[1]));
	CU_ASSERT_FALSE(kv_ss_busy(&w[0])); /* the other lcore serves its clients */
	CU_ASSERT_EQUAL(kv_ss_kill(w, 2), KV_SS_KILLED);
	CU_ASSERT_TRUE(kv_ss_kill_asked(&w[1], &a));
	CU_ASSERT_FALSE(kv_ss_write(&w[1], &a));
	kv_ss_busy_end(&w[1], &a);
	CU_ASSERT_FALSE(kv_ss_busy(&w[1]));
	CU_ASSERT_EQUAL(kv_ss_kill(w, 2), KV_SS_NOTBUSY);
}

/* the script writes first: SCRIPT KILL answers UNKILLABLE and sets nothing */
static void
t_write_then_kill(void)
{
	struct kv_ss_script a;

	reset();
	kv_ss_busy_begin(&w[0], &a, false);
	CU_ASSERT_TRUE(kv_ss_write(&w[0], &a));
	CU_ASSERT_EQUAL(kv_ss_kill(w, 2), KV_SS_UNKILLABLE);
	CU_ASSERT_FALSE(kv_ss_kill_asked(&w[0], &a));
	CU_ASSERT_TRUE(kv_ss_write(&w[0], &a));
	kv_ss_busy_end(&w[0], &a);
	CU_ASSERT_EQUAL(atomic_load(&w[0]) & (KV_SS_BUSY | KV_SS_WROTE), 0);
}

/* it wrote before it became busy: unkillable from the start */
static void
t_wrote_before_busy(void)
{
	struct kv_ss_script a;

	reset();
	kv_ss_busy_begin(&w[0], &a, true);
	CU_ASSERT_EQUAL(kv_ss_kill(w, 2), KV_SS_UNKILLABLE);
	CU_ASSERT_FALSE(kv_ss_kill_asked(&w[0], &a));
	kv_ss_busy_end(&w[0], &a);
}

/* two busy scripts on one lcore: a kill stops both */
static void
t_two_busy(void)
{
	struct kv_ss_script a, b;

	reset();
	kv_ss_busy_begin(&w[0], &a, false);
	kv_ss_busy_begin(&w[0], &b, false);
	CU_ASSERT_EQUAL(atomic_load(&w[0]) & KV_SS_BUSY, 2);
	CU_ASSERT_EQUAL(kv_ss_kill(w, 2), KV_SS_KILLED);
	CU_ASSERT_TRUE(kv_ss_kill_asked(&w[0], &a));
	kv_ss_busy_end(&w[0], &a);
	CU_ASSERT_TRUE(kv_ss_kill_asked(&w[0], &b)); /* the other one still sees it */
	CU_ASSERT_TRUE(kv_ss_busy(&w[0]));
	kv_ss_busy_end(&w[0], &b);
	CU_ASSERT_FALSE(kv_ss_busy(&w[0]));
}

/* two busy scripts on one lcore, the writer ends: the other one is killable (it was
 * UNKILLABLE for ever when the write was a bit of the lcore's word) */
static void
t_writer_ended(void)
{
	struct kv_ss_script a, b;

	reset();
	kv_ss_busy_begin(&w[0], &a, false);
	kv_ss_busy_begin(&w[0], &b, false);
	CU_ASSERT_TRUE(kv_ss_write(&w[0], &a));
	CU_ASSERT_EQUAL(kv_ss_kill(w, 2), KV_SS_UNKILLABLE);
	kv_ss_busy_end(&w[0], &a);
	CU_ASSERT_EQUAL(kv_ss_kill(w, 2), KV_SS_KILLED);
	CU_ASSERT_TRUE(kv_ss_kill_asked(&w[0], &b));
	kv_ss_busy_end(&w[0], &b);
}

/* a kill stops the scripts busy when it came, not one that becomes busy after */
static void
t_kill_not_inherited(void)
{
	struct kv_ss_script a, c;

	reset();
	kv_ss_busy_begin(&w[0], &a, false);
	CU_ASSERT_EQUAL(kv_ss_kill(w, 2), KV_SS_KILLED);
	kv_ss_busy_begin(&w[0], &c, false); /* while a still runs to its next hook */
	CU_ASSERT_TRUE(kv_ss_kill_asked(&w[0], &a));
	CU_ASSERT_FALSE(kv_ss_kill_asked(&w[0], &c));
	CU_ASSERT_TRUE(kv_ss_write(&w[0], &c)); /* c may write */
	CU_ASSERT_FALSE(kv_ss_write(&w[0], &a));
	kv_ss_busy_end(&w[0], &a);
	CU_ASSERT_EQUAL(kv_ss_kill(w, 2), KV_SS_UNKILLABLE);
	kv_ss_busy_end(&w[0], &c);
}

/* busy on both lcores, one wrote: UNKILLABLE, the other is not killed either */
static void
t_two_lcores(void)
{
	struct kv_ss_script a, b;

	reset();
	kv_ss_busy_begin(&w[0], &a, false);
	kv_ss_busy_begin(&w[1], &b, true);
	CU_ASSERT_EQUAL(kv_ss_kill(w, 2), KV_SS_UNKILLABLE);
	CU_ASSERT_FALSE(kv_ss_kill_asked(&w[0], &a));
	kv_ss_busy_end(&w[1], &b);
	CU_ASSERT_EQUAL(kv_ss_kill(w, 2), KV_SS_KILLED);
	CU_ASSERT_TRUE(kv_ss_kill_asked(&w[0], &a));
	kv_ss_busy_end(&w[0], &a);
}

/* lcore 1's script writes between SCRIPT KILL's check and its kills: lcore 0's script is
 * killed, lcore 1's goes on, and the answer is OK (one was killed) */
static void
t_write_between_phases(void)
{
	struct kv_ss_script a, b;

	reset();
	kv_ss_busy_begin(&w[0], &a, false);
	kv_ss_busy_begin(&w[1], &b, false);
	CU_ASSERT_EQUAL(kv_ss_kill_check(w, 2), KV_SS_KILLED);
	CU_ASSERT_TRUE(kv_ss_write(&w[1], &b));
	CU_ASSERT_EQUAL(kv_ss_kill_busy(w, 2), KV_SS_KILLED);
	CU_ASSERT_TRUE(kv_ss_kill_asked(&w[0], &a));
	CU_ASSERT_FALSE(kv_ss_kill_asked(&w[1], &b));
	/* both wrote in between: none killed, UNKILLABLE */
	CU_ASSERT_EQUAL(kv_ss_kill_check(w, 2), KV_SS_UNKILLABLE);
	kv_ss_busy_end(&w[0], &a);
	kv_ss_busy_end(&w[1], &b);
	kv_ss_busy_begin(&w[0], &a, false);
	kv_ss_busy_begin(&w[1], &b, false);
	CU_ASSERT_EQUAL(kv_ss_kill_check(w, 2), KV_SS_KILLED);
	CU_ASSERT_TRUE(kv_ss_write(&w[0], &a));
	CU_ASSERT_TRUE(kv_ss_write(&w[1], &b));
	CU_ASSERT_EQUAL(kv_ss_kill_busy(w, 2), KV_SS_UNKILLABLE);
	CU_ASSERT_FALSE(kv_ss_kill_asked(&w[0], &a));
	CU_ASSERT_FALSE(kv_ss_kill_asked(&w[1], &b));
	kv_ss_busy_end(&w[0], &a);
	kv_ss_busy_end(&w[1], &b);
}

/* ---- two lcores' scripts and a SCRIPT KILL on threads ---- */

#define ROUNDS 20000

static pthread_barrier_t bar;
static enum kv_ss_kill_result answers[ROUNDS];
static bool killed_of[2][ROUNDS];

static void
spin(unsigned n)
{
	volatile unsigned i;

	for (i = 0; i < n; i++)
		;
}

static void *
lcore(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg, seed = 18 + id, i;

	for (i = 0; i < ROUNDS; i++) {
		struct kv_ss_script me;
		bool killed;

		kv_ss_busy_begin(&w[id], &me, false);
		pthread_barrier_wait(&bar); /* busy: the kill may come */
		spin(rand_r(&seed) % 200);
		/* the hook looks, then the script writes */
		killed = kv_ss_kill_asked(&w[id], &me) || !kv_ss_write(&w[id], &me);
		pthread_barrier_wait(&bar); /* the kill answered */
		killed_of[id][i] = killed || kv_ss_kill_asked(&w[id], &me);
		kv_ss_busy_end(&w[id], &me);
		pthread_barrier_wait(&bar);
	}
	return NULL;
}

static void
t_race(void)
{
	pthread_t th[2];
	unsigned i, seed = 7, nkilled = 0, nunkillable = 0;

	reset();
	CU_ASSERT_EQUAL(pthread_barrier_init(&bar, NULL, 3), 0);
	for (i = 0; i < 2; i++)
		CU_ASSERT_EQUAL(pthread_create(&th[i], NULL, lcore, (void *)(uintptr_t)i), 0);
	for (i = 0; i < ROUNDS; i++) {
		pthread_barrier_wait(&bar);
		spin(rand_r(&seed) % 200);
		answers[i] = kv_ss_kill(w, 2);
		pthread_barrier_wait(&bar);
		pthread_barrier_wait(&bar);
	}
	for (i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&bar);
	for (i = 0; i < ROUNDS; i++) {
		unsigned k = killed_of[0][i] + killed_of[1][i];

		/* the answer says what was done: OK if a script was killed, UNKILLABLE if none */
		if (answers[i] == KV_SS_KILLED) {
			nkilled++;
			CU_ASSERT(k >= 1);
		} else {
			nunkillable++;
			CU_ASSERT_EQUAL(answers[i], KV_SS_UNKILLABLE);
			CU_ASSERT_EQUAL(k, 0);
		}
	}
	CU_ASSERT_EQUAL(nkilled + nunkillable, ROUNDS);
	CU_ASSERT_EQUAL(atomic_load(&w[0]) & (KV_SS_BUSY | KV_SS_WROTE), 0);
	CU_ASSERT_EQUAL(atomic_load(&w[1]) & (KV_SS_BUSY | KV_SS_WROTE), 0);
}

static const struct ut_case cases[] = {
    UT_CASE(t_notbusy),
    UT_CASE(t_kill_then_write),
    UT_CASE(t_write_then_kill),
    UT_CASE(t_wrote_before_busy),
    UT_CASE(t_two_busy),
    UT_CASE(t_writer_ended),
    UT_CASE(t_kill_not_inherited),
    UT_CASE(t_two_lcores),
    UT_CASE(t_write_between_phases),
    UT_CASE(t_race),
};

UT_MAIN("kv_script_state", cases, NULL, NULL)
