/* SPDX-License-Identifier: BSD-3-Clause */
/* cr_send, cr_call and cr_for_each_lcore on simulated lcores stepped on one thread. */
#include <errno.h>
#include <string.h>

#include "ut_cunit.h"
#include "ut_lcores.h"

#define NLC 3

static unsigned ran[NLC][64];
static unsigned ran_on[4096];
static unsigned order[8192], n_order;

static void
reset(void)
{
	memset(ran, 0, sizeof(ran));
	memset(ran_on, 0xff, sizeof(ran_on));
	n_order = 0;
}

static void
record(void *arg)
{
	unsigned v = (unsigned)(uintptr_t)arg;

	ran[cr_lcore_id()][v % 64]++;
	if (v < 4096)
		ran_on[v] = cr_lcore_id();
	order[n_order++] = v;
}

static int
setup(void)
{
	reset();
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
	reset();
}

static void
test_send_bad_lcore(void)
{
	fresh();
	ut_set_current(0);
	CU_ASSERT_EQUAL(cr_send(NLC, record, NULL), -EINVAL);
	CU_ASSERT_EQUAL(cr_send(CR_MAX_LCORES + 5, record, NULL), -EINVAL);
	CU_ASSERT_EQUAL(cr_send(CR_LCORE_NONE, record, NULL), -EINVAL);
	CU_ASSERT_EQUAL(cr_send(1, NULL, NULL), -EINVAL);
	ut_set_current(CR_LCORE_NONE);
	CU_ASSERT_EQUAL(cr_send(NLC, record, NULL), -EINVAL);
}

/* A buffered message reaches the target after the sender's turn ends, not before. */
static void
test_send_flushes_at_end_of_turn(void)
{
	fresh();
	ut_set_current(0);
	CU_ASSERT_EQUAL(cr_send(1, record, (void *)(uintptr_t)7), 0);
	ut_set_current(CR_LCORE_NONE);
	ut_turn(1);
	CU_ASSERT_EQUAL(ran[1][7], 0); /* still in lcore 0's outbox */
	ut_turn(0);			/* end of 0's turn flushes */
	ut_turn(1);
	CU_ASSERT_EQUAL(ran[1][7], 1);
	ut_poll_until_idle(10);
	CU_ASSERT_EQUAL(ran[1][7], 1);
}

/* The outbox flushes by itself at CR_SEND_FLUSH messages. */
static void
test_send_flushes_at_16(void)
{
	unsigned i;

	fresh();
	ut_set_current(0);
	for (i = 0; i < CR_SEND_FLUSH; i++)
		CU_ASSERT_EQUAL(cr_send(1, record, (void *)(uintptr_t)i), 0);
	ut_set_current(CR_LCORE_NONE);
	ut_turn(1);
	CU_ASSERT_EQUAL(n_order, CR_SEND_FLUSH);
	for (i = 0; i < n_order; i++)
		CU_ASSERT_EQUAL(order[i], i);
}

/*
 * cr_send()'s inline append writes the outbox of the lcore this thread runs now: the first
 * send to a target takes its admission in cr__send(), the next ones append inline, and a
 * switch to another lcore (the simulator's, or a thread leaving its lcore) moves it along.
 */
static void
test_send_inline_follows_current(void)
{
	fresh();
	ut_set_current(0);
	CU_ASSERT_PTR_EQUAL(cr__send_out, ut_lcore(0)->out);
	CU_ASSERT_EQUAL(cr_send(2, record, (void *)(uintptr_t)1), 0);
	CU_ASSERT(ut_lcore(0)->out[2].held);
	CU_ASSERT_EQUAL(cr_send(2, record, (void *)(uintptr_t)2), 0);
	CU_ASSERT_EQUAL(ut_lcore(0)->out[2].n, 2);
	ut_set_current(1);
	CU_ASSERT_PTR_EQUAL(cr__send_out, ut_lcore(1)->out);
	CU_ASSERT_EQUAL(cr_send(2, record, (void *)(uintptr_t)3), 0);
	CU_ASSERT_EQUAL(cr_send(2, record, (void *)(uintptr_t)4), 0);
	CU_ASSERT_EQUAL(ut_lcore(0)->out[2].n, 2);
	CU_ASSERT_EQUAL(ut_lcore(1)->out[2].n, 2);
	CU_ASSERT_EQUAL(cr_send(2, NULL, NULL), -EINVAL); /* held or not, fn is checked */
	ut_set_current(CR_LCORE_NONE);
	CU_ASSERT_PTR_NULL(cr__send_out);
	ut_poll_until_idle(10);
	CU_ASSERT_EQUAL(n_order, 4);
	CU_ASSERT_EQUAL(ran[2][1] + ran[2][2] + ran[2][3] + ran[2][4], 4);
}

/* Per sender and target, messages run in the order sent; every one exactly once. */
static void
test_send_order_and_exactly_once(void)
{
	unsigned i, last = 0;
	bool ordered = true;

	fresh();
	for (i = 0; i < 1000; i++) {
		ut_set_current(0);
		CU_ASSERT_EQUAL(cr_send(2, record, (void *)(uintptr_t)i), 0);
		if (i % 37 == 0) {
			ut_set_current(CR_LCORE_NONE);
			ut_turn(0);
			ut_turn(2);
		}
	}
	ut_set_current(CR_LCORE_NONE);
	ut_poll_until_idle(100);
	CU_ASSERT_EQUAL(n_order, 1000);
	for (i = 0; i < n_order; i++) {
		if (i > 0 && order[i] != last + 1)
			ordered = false;
		last = order[i];
	}
	CU_ASSERT(ordered);
}

/* A full mailbox: -EAGAIN, the caller keeps arg, nothing lost once the target drains. */
static void
test_send_full_mailbox(void)
{
	unsigned accepted = 0, i;
	int rc = 0;

	fresh();
	ut_set_current(0);
	for (i = 0; i < 4 * CR_MAILBOX_RING_SIZE; i++) {
		rc = cr_send(1, record, (void *)(uintptr_t)(i % 4096));
		if (rc != 0)
			break;
		accepted++;
	}
	CU_ASSERT_EQUAL(rc, -EAGAIN);
	/* ring holds size - 1, the outbox one burst more */
	CU_ASSERT_EQUAL(accepted, CR_MAILBOX_RING_SIZE - 1 + CR_SEND_FLUSH);
	ut_set_current(CR_LCORE_NONE);
	ut_poll_until_idle(1000);
	CU_ASSERT_EQUAL(n_order, accepted);
	ut_set_current(0);
	CU_ASSERT_EQUAL(cr_send(1, record, NULL), 0);
	ut_set_current(CR_LCORE_NONE);
}

static void
test_send_burst(void)
{
	struct cr_msg m[40];
	unsigned i;
	int rc;

	fresh();
	for (i = 0; i < 40; i++) {
		m[i].fn = record;
		m[i].arg = (void *)(uintptr_t)(100 + i);
	}
	ut_set_current(0);
	CU_ASSERT_EQUAL(cr_send(1, record, (void *)(uintptr_t)99), 0); /* buffered first */
	CU_ASSERT_EQUAL(cr_send_burst(1, m, 40), 40);
	CU_ASSERT_EQUAL(cr_send_burst(NLC, m, 1), -EINVAL);
	CU_ASSERT_EQUAL(cr_send_burst(1, m, 0), -EINVAL);
	ut_set_current(CR_LCORE_NONE);
	ut_poll_until_idle(10);
	CU_ASSERT_EQUAL(n_order, 41);
	for (i = 0; i < n_order; i++)
		CU_ASSERT_EQUAL(order[i], 99 + i); /* the buffered one first: order kept */
	/* fill the ring: a prefix is accepted, then -EAGAIN */
	fresh();
	ut_set_current(0);
	for (i = 0; (rc = cr_send_burst(2, m, 40)) > 0; i += (unsigned)rc)
		;
	CU_ASSERT_EQUAL(rc, -EAGAIN);
	CU_ASSERT_EQUAL(i, CR_MAILBOX_RING_SIZE - 1);
	ut_set_current(CR_LCORE_NONE);
	/* a foreign thread has its own ring into the same mailbox */
	CU_ASSERT_EQUAL(cr_send_burst(2, m, 40), 40);
	ut_poll_until_idle(1000);
	CU_ASSERT_EQUAL(n_order, CR_MAILBOX_RING_SIZE - 1 + 40);
}

static void
test_send_to_self(void)
{
	fresh();
	ut_set_current(1);
	CU_ASSERT_EQUAL(cr_send(1, record, (void *)(uintptr_t)3), 0);
	ut_set_current(CR_LCORE_NONE);
	ut_turn(1); /* flushes into its own ring */
	ut_turn(1);
	CU_ASSERT_EQUAL(ran[1][3], 1);
}

static void
test_send_foreign(void)
{
	fresh();
	ut_set_current(CR_LCORE_NONE);
	CU_ASSERT_EQUAL(cr_send(2, record, (void *)(uintptr_t)9), 0);
	CU_ASSERT_EQUAL(cr_mailbox_depth(&ut_lcore(2)->mbox), 1); /* not buffered */
	ut_turn(2);
	CU_ASSERT_EQUAL(ran[2][9], 1);
}

/* A batch is at most CR_BATCH messages: a flood cannot hold a turn. */
static void
test_mailbox_batch_bound(void)
{
	unsigned i;

	fresh();
	ut_set_current(CR_LCORE_NONE);
	for (i = 0; i < 3 * CR_BATCH; i++)
		CU_ASSERT_EQUAL(cr_send(1, record, NULL), 0);
	CU_ASSERT_EQUAL(ut_turn(1), CR_BATCH);
	CU_ASSERT_EQUAL(ut_turn(1), CR_BATCH);
	CU_ASSERT_EQUAL(ut_turn(1), CR_BATCH);
	CU_ASSERT_EQUAL(ut_turn(1), 0);
}

static unsigned call_ran_on = CR_LCORE_NONE, done_ran_on = CR_LCORE_NONE, done_count;

static void
call_fn(void *arg)
{
	(void)arg;
	call_ran_on = cr_lcore_id();
}

static void
call_done(void *arg)
{
	(void)arg;
	done_ran_on = cr_lcore_id();
	done_count++;
}

static void
test_call_completes_on_origin(void)
{
	struct cr_call c;

	fresh();
	done_count = 0;
	ut_set_current(0);
	CU_ASSERT_EQUAL(cr_call(2, &c, call_fn, NULL, call_done, NULL), 0);
	CU_ASSERT_EQUAL(ut_lcore(0)->calls_out, 1);
	ut_set_current(CR_LCORE_NONE);
	ut_poll_until_idle(20);
	CU_ASSERT_EQUAL(call_ran_on, 2);
	CU_ASSERT_EQUAL(done_ran_on, 0);
	CU_ASSERT_EQUAL(done_count, 1);
	CU_ASSERT_EQUAL(ut_lcore(0)->calls_out, 0);
	ut_set_current(CR_LCORE_NONE);
	CU_ASSERT_EQUAL(cr_call(2, &c, call_fn, NULL, call_done, NULL), -EPERM);
}

/* The reply meets a full origin mailbox: it waits on the target's backlog, then arrives
 * exactly once. */
static void
test_call_reply_backlog(void)
{
	struct cr_call c;
	unsigned i;

	fresh();
	done_count = 0;
	ut_set_current(0);
	CU_ASSERT_EQUAL(cr_call(1, &c, call_fn, NULL, call_done, NULL), 0);
	ut_set_current(CR_LCORE_NONE);
	ut_turn(0);
	/* Fill lcore 0's ring from lcore 1 so the reply cannot get in. */
	ut_set_current(1);
	for (i = 0; cr_send(0, record, NULL) == 0; i++)
		;
	ut_set_current(CR_LCORE_NONE);
	ut_turn(1); /* runs the call; the reply goes to the backlog */
	CU_ASSERT_PTR_NOT_NULL(ut_lcore(1)->backlog);
	CU_ASSERT_EQUAL(done_count, 0);
	ut_poll_until_idle(1000);
	CU_ASSERT_EQUAL(done_count, 1);
	CU_ASSERT_PTR_NULL(ut_lcore(1)->backlog);
}

static unsigned each_visits[NLC], each_seq[NLC], each_n;

static void
each_fn(void *arg)
{
	(void)arg;
	each_visits[cr_lcore_id()]++;
	each_seq[each_n++] = cr_lcore_id();
}

static void
test_for_each_lcore(void)
{
	struct cr_call c;
	unsigned i;

	fresh();
	memset(each_visits, 0, sizeof(each_visits));
	each_n = 0;
	done_count = 0;
	ut_set_current(1);
	CU_ASSERT_EQUAL(cr_for_each_lcore(&c, each_fn, NULL, call_done, NULL), 0);
	ut_set_current(CR_LCORE_NONE);
	ut_poll_until_idle(50);
	for (i = 0; i < NLC; i++) {
		CU_ASSERT_EQUAL(each_visits[i], 1);
		CU_ASSERT_EQUAL(each_seq[i], i);
	}
	CU_ASSERT_EQUAL(done_count, 1);
	CU_ASSERT_EQUAL(done_ran_on, 1);
}

/* An lcore that is stopping is skipped by for_each; done still runs once. */
static void
test_for_each_skips_closed(void)
{
	struct cr_call c;

	fresh();
	memset(each_visits, 0, sizeof(each_visits));
	each_n = 0;
	done_count = 0;
	cr_mailbox_close(&ut_lcore(2)->mbox);
	ut_set_current(0);
	CU_ASSERT_EQUAL(cr_for_each_lcore(&c, each_fn, NULL, call_done, NULL), 0);
	ut_set_current(CR_LCORE_NONE);
	ut_poll_until_idle(50);
	CU_ASSERT_EQUAL(each_visits[0], 1);
	CU_ASSERT_EQUAL(each_visits[1], 1);
	CU_ASSERT_EQUAL(each_visits[2], 0);
	CU_ASSERT_EQUAL(done_count, 1);
}

/*
 * Regression: an lcore that fills several targets' mailboxes in one turn flushes each
 * outbox many times; the list of targets with buffered messages must hold each target
 * once (it used to gain an entry per flush, overflow, and drop a held outbox, so accepted
 * messages never ran and the target could never finish stopping).
 */
static unsigned flood_ran;

static void
flood_count(void *arg)
{
	(void)arg;
	flood_ran++;
}

static void
test_send_flood_many_targets(void)
{
	unsigned accepted = 0, t;

	fresh();
	flood_ran = 0;
	ut_set_current(0);
	for (t = 1; t < NLC; t++)
		while (cr_send(t, flood_count, NULL) == 0)
			accepted++;
	CU_ASSERT(ut_lcore(0)->n_dirty <= NLC);
	ut_set_current(CR_LCORE_NONE);
	ut_poll_until_idle(10000);
	CU_ASSERT_EQUAL(flood_ran, accepted);
	atomic_store(&cr__rt.stop, true);
	ut_poll_until_idle(10);
	for (t = 0; t < NLC; t++)
		CU_ASSERT_TRUE(cr__lcore_done(ut_lcore(t)));
}

static const struct ut_case cases[] = {
	UT_CASE(test_send_bad_lcore),
	UT_CASE(test_send_inline_follows_current),
	UT_CASE(test_send_flood_many_targets),
	UT_CASE(test_send_flushes_at_end_of_turn),
	UT_CASE(test_send_flushes_at_16),
	UT_CASE(test_send_order_and_exactly_once),
	UT_CASE(test_send_full_mailbox),
	UT_CASE(test_send_burst),
	UT_CASE(test_send_to_self),
	UT_CASE(test_send_foreign),
	UT_CASE(test_mailbox_batch_bound),
	UT_CASE(test_call_completes_on_origin),
	UT_CASE(test_call_reply_backlog),
	UT_CASE(test_for_each_lcore),
	UT_CASE(test_for_each_skips_closed),
};

UT_MAIN("reactor_msg", cases, setup, teardown)
