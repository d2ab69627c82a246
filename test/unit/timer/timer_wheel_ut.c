/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests for lib/timer/timer_wheel.c. The source is included to check the wheel's
 * internal invariants and to count cascades (a long idle gap must not cost per tick).
 *
 * Run with --stress for the long seeded model run (suite "stress"); --stress SEED replays
 * the one seed a failure printed.
 */
#include <CUnit/Basic.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../lib/timer/timer_wheel.c"

#define US 1000ull
#define MS 1000000ull
#define S  1000000000ull

/* ---- helpers for the hand-written cases ---- */

struct rec {
	struct cr_timer t;
	int id;
	uint64_t period;    /* re-arm from the callback when non-zero */
	struct rec *victim; /* cancel this one from the callback */
	bool victim_was_armed;
	bool free_me;	      /* free the struct from its own callback */
	struct rec *arm_past; /* arm this one for "now" from the callback */
};

static struct cr_timer_wheel *g_w;
static uint64_t g_now;
static int g_log[1024];
static uint64_t g_log_at[1024];
static unsigned g_nlog;

static void
log_reset(void)
{
	g_nlog = 0;
}

static void
rec_fn(struct cr_timer *t, void *arg)
{
	struct rec *r = arg;

	CU_ASSERT_PTR_EQUAL(&r->t, t);
	CU_ASSERT_FALSE(cr_timer_armed(t));
	if (g_nlog < 1024) {
		g_log[g_nlog] = r->id;
		g_log_at[g_nlog] = g_now;
	}
	g_nlog++;
	if (r->victim != NULL)
		r->victim_was_armed = cr_timer_cancel(g_w, &r->victim->t);
	if (r->arm_past != NULL)
		cr_timer_arm(g_w, &r->arm_past->t, g_now);
	if (r->period != 0)
		cr_timer_arm(g_w, t, g_now + r->period);
	if (r->free_me)
		free(r);
}

static void
rec_init(struct rec *r, int id)
{
	memset(r, 0, sizeof(*r));
	r->id = id;
	cr_timer_init(&r->t, rec_fn, r);
}

static unsigned
run_at(uint64_t now, unsigned budget)
{
	g_now = now;
	return cr_timer_wheel_run(g_w, now, budget);
}

/* Walks every list of @p w and checks the placement rules the wheel relies on. */
static bool
wheel_ok(const struct cr_timer_wheel *w)
{
	unsigned total = 0, nexp = 0;

	for (unsigned i = 0; i < NLISTS; i++) {
		const struct timer_list *l = &w->lists[i];
		struct cr_timer *const *link = &l->first;
		struct cr_timer *t;

		for (t = l->first; t != NULL; link = &t->next, t = t->next) {
			if (t->pprev != link || t->where != i)
				return false;
			if (t == &w->fence)
				continue;
			total++;
			if (i < WHEEL_SLOTS) {
				unsigned level = i / SLOTS, shift = level * LEVEL_BITS;

				if (t->expires <= w->now ||
				    (t->expires ^ w->now) >> (shift + LEVEL_BITS) != 0 ||
				    ((t->expires >> shift) & SLOT_MASK) != i % SLOTS ||
				    ((w->now >> shift) & SLOT_MASK) >= i % SLOTS)
					return false;
			} else if (i == LIST_FAR) {
				if (t->expires <= w->now ||
				    (t->expires ^ w->now) >> HORIZON_BITS == 0)
					return false;
			} else {
				if (t->expires > w->now)
					return false;
				nexp++;
			}
		}
		if (l->last != link)
			return false;
		if (i < WHEEL_SLOTS &&
		    ((w->occupied[i / SLOTS] >> (i % SLOTS)) & 1) != (l->first != NULL))
			return false;
	}
	return total == w->count && nexp == w->nexpired;
}

/* ---- hand-written cases ---- */

static void
test_create(void)
{
	struct cr_timer_wheel *w;

	errno = 0;
	CU_ASSERT_PTR_NULL(cr_timer_wheel_create(0, 0));
	CU_ASSERT_EQUAL(errno, EINVAL);
	cr_timer_wheel_destroy(NULL);

	w = cr_timer_wheel_create(12345, MS);
	CU_ASSERT_PTR_NOT_NULL_FATAL(w);
	CU_ASSERT_EQUAL(cr_timer_wheel_tick(w), MS);
	CU_ASSERT_EQUAL(cr_timer_wheel_count(w), 0);
	CU_ASSERT_EQUAL(cr_timer_wheel_next(w), UINT64_MAX);
	CU_ASSERT_EQUAL(cr_timer_wheel_run(w, 10 * S, UINT_MAX), 0);
	CU_ASSERT_EQUAL(cr_timer_wheel_next(w), UINT64_MAX);
	cr_timer_wheel_destroy(w);
}

static void
test_arm_fire_cancel(void)
{
	struct rec a, b;

	g_w = cr_timer_wheel_create(0, US);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g_w);
	log_reset();
	rec_init(&a, 1);
	rec_init(&b, 2);
	CU_ASSERT_FALSE(cr_timer_armed(&a.t));
	CU_ASSERT_FALSE(cr_timer_cancel(g_w, &a.t));

	cr_timer_arm(g_w, &a.t, 5 * US);
	CU_ASSERT_TRUE(cr_timer_armed(&a.t));
	CU_ASSERT_EQUAL(cr_timer_wheel_count(g_w), 1);
	CU_ASSERT_EQUAL(cr_timer_wheel_next(g_w), 5 * US);
	CU_ASSERT_EQUAL(run_at(5 * US - 1, UINT_MAX), 0);
	CU_ASSERT_EQUAL(run_at(5 * US, UINT_MAX), 1);
	CU_ASSERT_EQUAL(g_nlog, 1);
	CU_ASSERT_FALSE(cr_timer_armed(&a.t));
	CU_ASSERT_EQUAL(cr_timer_wheel_count(g_w), 0);
	CU_ASSERT_EQUAL(cr_timer_wheel_next(g_w), UINT64_MAX);

	/* Cancel: only b fires; a second cancel reports idle. */
	cr_timer_arm(g_w, &a.t, 10 * US);
	cr_timer_arm(g_w, &b.t, 7 * US);
	CU_ASSERT_EQUAL(cr_timer_wheel_count(g_w), 2);
	CU_ASSERT_TRUE(cr_timer_cancel(g_w, &a.t));
	CU_ASSERT_FALSE(cr_timer_cancel(g_w, &a.t));
	CU_ASSERT_EQUAL(cr_timer_wheel_count(g_w), 1);
	CU_ASSERT_EQUAL(run_at(20 * US, UINT_MAX), 1);
	CU_ASSERT_EQUAL(g_nlog, 2);
	CU_ASSERT_EQUAL(g_log[1], 2);

	/* Re-arming moves: earlier, then later, and it fires once. */
	cr_timer_arm(g_w, &b.t, 300 * US);
	cr_timer_arm(g_w, &b.t, 250 * US);
	CU_ASSERT_EQUAL(cr_timer_wheel_count(g_w), 1);
	CU_ASSERT_EQUAL(run_at(249 * US, UINT_MAX), 0);
	CU_ASSERT_EQUAL(run_at(250 * US, UINT_MAX), 1);
	cr_timer_arm(g_w, &b.t, 400 * US);
	cr_timer_arm(g_w, &b.t, 5000 * US);
	CU_ASSERT_EQUAL(run_at(4999 * US, UINT_MAX), 0);
	CU_ASSERT_EQUAL(run_at(6000 * US, UINT_MAX), 1);
	CU_ASSERT_EQUAL(g_nlog, 4);
	CU_ASSERT_EQUAL(run_at(10000 * US, UINT_MAX), 0);

	/* Re-arm of an expired, not yet run timer moves it back into the wheel. */
	cr_timer_arm(g_w, &a.t, 0);
	CU_ASSERT_EQUAL(cr_timer_wheel_next(g_w), 0);
	cr_timer_arm(g_w, &a.t, 10100 * US);
	CU_ASSERT(cr_timer_wheel_next(g_w) > 10000 * US);
	CU_ASSERT(cr_timer_wheel_next(g_w) <= 10100 * US);
	CU_ASSERT_EQUAL(run_at(10050 * US, UINT_MAX), 0);
	CU_ASSERT_EQUAL(run_at(10100 * US, UINT_MAX), 1);
	CU_ASSERT_TRUE(wheel_ok(g_w));
	cr_timer_wheel_destroy(g_w);
}

static void
test_periodic(void)
{
	struct rec r;

	g_w = cr_timer_wheel_create(0, MS);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g_w);
	log_reset();
	rec_init(&r, 7);
	r.period = 10 * MS;
	cr_timer_arm(g_w, &r.t, 10 * MS);
	for (uint64_t now = 0; now <= 100 * MS; now += MS)
		run_at(now, UINT_MAX);
	CU_ASSERT_EQUAL_FATAL(g_nlog, 10);
	for (unsigned i = 0; i < 10; i++)
		CU_ASSERT_EQUAL(g_log_at[i], (i + 1) * 10 * MS);
	CU_ASSERT_TRUE(cr_timer_armed(&r.t));
	CU_ASSERT_EQUAL(cr_timer_wheel_next(g_w), 110 * MS);

	/* Re-arming itself for "now": once per run, never a livelock. */
	r.period = 0;
	r.arm_past = &r;
	CU_ASSERT_EQUAL(run_at(110 * MS, 100), 1);
	CU_ASSERT_EQUAL(run_at(110 * MS, 100), 1);
	CU_ASSERT_EQUAL(run_at(110 * MS, 100), 1);
	CU_ASSERT_EQUAL(cr_timer_wheel_next(g_w), 0);
	CU_ASSERT_TRUE(cr_timer_cancel(g_w, &r.t));
	CU_ASSERT_EQUAL(g_nlog, 13);
	cr_timer_wheel_destroy(g_w);
}

static void
test_cancel_from_callback(void)
{
	struct rec a, b, c, d;

	g_w = cr_timer_wheel_create(0, MS);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g_w);
	log_reset();
	rec_init(&a, 1);
	rec_init(&b, 2);
	rec_init(&c, 3);
	rec_init(&d, 4);
	/* a and b due on the same tick, a first; c due earlier, d later; all due by 50 ms. */
	a.victim = &b;
	c.victim = &d;
	cr_timer_arm(g_w, &a.t, 20 * MS);
	cr_timer_arm(g_w, &b.t, 20 * MS);
	cr_timer_arm(g_w, &c.t, 10 * MS);
	cr_timer_arm(g_w, &d.t, 40 * MS);
	CU_ASSERT_EQUAL(run_at(50 * MS, UINT_MAX), 2);
	CU_ASSERT_EQUAL(g_nlog, 2);
	CU_ASSERT_EQUAL(g_log[0], 3);
	CU_ASSERT_EQUAL(g_log[1], 1);
	CU_ASSERT_TRUE(a.victim_was_armed);
	CU_ASSERT_TRUE(c.victim_was_armed);
	CU_ASSERT_FALSE(cr_timer_armed(&b.t));
	CU_ASSERT_FALSE(cr_timer_armed(&d.t));
	CU_ASSERT_EQUAL(cr_timer_wheel_count(g_w), 0);

	/* Cancelling oneself from the callback: already idle. */
	a.victim = &a;
	cr_timer_arm(g_w, &a.t, 60 * MS);
	CU_ASSERT_EQUAL(run_at(60 * MS, UINT_MAX), 1);
	CU_ASSERT_FALSE(a.victim_was_armed);
	CU_ASSERT_TRUE(wheel_ok(g_w));
	cr_timer_wheel_destroy(g_w);
}

static void
test_free_in_callback(void)
{
	struct rec *r[8];

	g_w = cr_timer_wheel_create(0, MS);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g_w);
	log_reset();
	for (int i = 0; i < 8; i++) {
		r[i] = malloc(sizeof(*r[i]));
		CU_ASSERT_PTR_NOT_NULL_FATAL(r[i]);
		rec_init(r[i], i);
		r[i]->free_me = true;
		/* Pairs on one tick, so the wheel walks on past a freed neighbour. */
		cr_timer_arm(g_w, &r[i]->t, (1 + i / 2) * MS);
	}
	CU_ASSERT_EQUAL(run_at(2 * MS, UINT_MAX), 4);
	CU_ASSERT_EQUAL(run_at(10 * MS, 1), 1);
	CU_ASSERT_EQUAL(run_at(10 * MS, UINT_MAX), 3);
	CU_ASSERT_EQUAL(g_nlog, 8);
	for (int i = 0; i < 8; i++)
		CU_ASSERT_EQUAL(g_log[i], i);
	CU_ASSERT_EQUAL(cr_timer_wheel_count(g_w), 0);
	CU_ASSERT_TRUE(wheel_ok(g_w));
	cr_timer_wheel_destroy(g_w);
}

static void
test_arm_past_from_callback(void)
{
	struct rec a, b;

	g_w = cr_timer_wheel_create(0, MS);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g_w);
	log_reset();
	rec_init(&a, 1);
	rec_init(&b, 2);
	a.arm_past = &b;
	cr_timer_arm(g_w, &a.t, 5 * MS);
	CU_ASSERT_EQUAL(run_at(5 * MS, UINT_MAX), 1);
	CU_ASSERT_TRUE(cr_timer_armed(&b.t));
	CU_ASSERT_EQUAL(cr_timer_wheel_next(g_w), 0);
	CU_ASSERT_EQUAL(run_at(5 * MS, UINT_MAX), 1);
	CU_ASSERT_EQUAL(g_nlog, 2);
	CU_ASSERT_EQUAL(g_log[1], 2);

	/* A due, not yet run timer re-armed for the past by a callback also waits. */
	a.arm_past = &b;
	cr_timer_arm(g_w, &a.t, 6 * MS);
	cr_timer_arm(g_w, &b.t, 6 * MS);
	CU_ASSERT_EQUAL(run_at(6 * MS, UINT_MAX), 1);
	CU_ASSERT_EQUAL(cr_timer_wheel_count(g_w), 1);
	CU_ASSERT_EQUAL(run_at(6 * MS, UINT_MAX), 1);
	CU_ASSERT_EQUAL(g_nlog, 4);
	CU_ASSERT_TRUE(wheel_ok(g_w));
	cr_timer_wheel_destroy(g_w);
}

static void
test_cancel_expired(void)
{
	struct rec r[3];

	g_w = cr_timer_wheel_create(100 * MS, MS);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g_w);
	log_reset();
	for (int i = 0; i < 3; i++) {
		rec_init(&r[i], i);
		cr_timer_arm(g_w, &r[i].t, 50 * MS + i);
	}
	CU_ASSERT_EQUAL(cr_timer_wheel_next(g_w), 0);
	CU_ASSERT_EQUAL(run_at(100 * MS, 0), 0);
	CU_ASSERT_EQUAL(run_at(100 * MS, 1), 1);
	CU_ASSERT_TRUE(cr_timer_cancel(g_w, &r[1].t));
	CU_ASSERT_FALSE(cr_timer_cancel(g_w, &r[1].t));
	CU_ASSERT_EQUAL(cr_timer_wheel_count(g_w), 1);
	CU_ASSERT_EQUAL(cr_timer_wheel_next(g_w), 0);
	CU_ASSERT_EQUAL(run_at(100 * MS, UINT_MAX), 1);
	CU_ASSERT_EQUAL(g_nlog, 2);
	CU_ASSERT_EQUAL(g_log[0], 0);
	CU_ASSERT_EQUAL(g_log[1], 2);

	cr_timer_arm(g_w, &r[0].t, 0);
	CU_ASSERT_TRUE(cr_timer_cancel(g_w, &r[0].t));
	CU_ASSERT_EQUAL(cr_timer_wheel_next(g_w), UINT64_MAX);
	CU_ASSERT_EQUAL(run_at(200 * MS, UINT_MAX), 0);
	CU_ASSERT_TRUE(wheel_ok(g_w));
	cr_timer_wheel_destroy(g_w);
}

static void
test_budget(void)
{
	struct rec r[101];
	unsigned total = 0;

	g_w = cr_timer_wheel_create(0, MS);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g_w);
	log_reset();
	/* Deadlines interleaved so arming order is not deadline order; pairs share a tick. */
	for (int i = 0; i < 100; i++) {
		int id = (i * 37) % 100;

		rec_init(&r[id], id);
		cr_timer_arm(g_w, &r[id].t, (1 + id / 2) * MS);
	}
	for (int call = 0; call < 10; call++) {
		unsigned n = run_at(1 * S, 10);

		CU_ASSERT_EQUAL(n, 10);
		CU_ASSERT_EQUAL(g_nlog, total + n);
		total += n;
		CU_ASSERT_EQUAL(cr_timer_wheel_count(g_w), 100 - total + (call > 4));
		CU_ASSERT_EQUAL(cr_timer_wheel_next(g_w), 0);
		if (call == 4) {
			/* A timer armed for the past while others wait queues behind them. */
			rec_init(&r[100], 100);
			cr_timer_arm(g_w, &r[100].t, 0);
		}
	}
	CU_ASSERT_EQUAL(run_at(1 * S, 10), 1);
	CU_ASSERT_EQUAL(run_at(1 * S, 10), 0);
	CU_ASSERT_EQUAL_FATAL(g_nlog, 101);
	for (int i = 0; i < 100; i += 2) {
		/* Ids i and i+1 share a tick: the one armed first runs first. Arming position of
		 * an id is id * 73 % 100, as 37 * 73 = 1 mod 100. */
		bool even_first = (i * 73) % 100 < ((i + 1) * 73) % 100;

		CU_ASSERT_EQUAL(g_log[i], even_first ? i : i + 1);
		CU_ASSERT_EQUAL(g_log[i + 1], even_first ? i + 1 : i);
	}
	CU_ASSERT_EQUAL(g_log[100], 100);
	cr_timer_wheel_destroy(g_w);
}

static void
test_ties_arming_order(void)
{
	struct rec r[6];
	const uint64_t dl = (1ull << 20) + 77;

	g_w = cr_timer_wheel_create(0, 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g_w);
	log_reset();
	for (int i = 0; i < 6; i++)
		rec_init(&r[i], i);
	/* Armed at different times, so they start out on different levels. */
	cr_timer_arm(g_w, &r[0].t, dl);
	cr_timer_arm(g_w, &r[1].t, dl);
	cr_timer_arm(g_w, &r[2].t, dl);
	run_at(dl - 70, UINT_MAX);
	cr_timer_arm(g_w, &r[3].t, dl);
	cr_timer_arm(g_w, &r[0].t, dl); /* re-armed: now after 3 */
	run_at(dl - 3, UINT_MAX);
	cr_timer_arm(g_w, &r[4].t, dl);
	run_at(dl - 1, UINT_MAX);
	cr_timer_arm(g_w, &r[5].t, dl);
	CU_ASSERT_EQUAL(g_nlog, 0);
	CU_ASSERT_EQUAL(run_at(dl, UINT_MAX), 6);
	CU_ASSERT_EQUAL_FATAL(g_nlog, 6);
	CU_ASSERT_EQUAL(g_log[0], 1);
	CU_ASSERT_EQUAL(g_log[1], 2);
	CU_ASSERT_EQUAL(g_log[2], 3);
	CU_ASSERT_EQUAL(g_log[3], 0);
	CU_ASSERT_EQUAL(g_log[4], 4);
	CU_ASSERT_EQUAL(g_log[5], 5);
	cr_timer_wheel_destroy(g_w);
}

static void
check_tick(uint64_t tick)
{
	struct rec r;
	uint64_t start = 3 * tick + tick / 2;

	g_w = cr_timer_wheel_create(start, tick);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g_w);
	CU_ASSERT_EQUAL(cr_timer_wheel_tick(g_w), tick);
	log_reset();
	rec_init(&r, 1);

	/* 1 ns ahead of an unaligned start: due at the next tick boundary. */
	cr_timer_arm(g_w, &r.t, start + 1);
	CU_ASSERT_EQUAL(cr_timer_wheel_next(g_w), 4 * tick);
	CU_ASSERT_EQUAL(run_at(4 * tick - 1, UINT_MAX), 0);
	CU_ASSERT_EQUAL(run_at(4 * tick, UINT_MAX), 1);

	/* Just past a boundary rounds up to the next one. */
	cr_timer_arm(g_w, &r.t, 5 * tick + 1);
	CU_ASSERT_EQUAL(cr_timer_wheel_next(g_w), 6 * tick);
	CU_ASSERT_EQUAL(run_at(5 * tick + 1, UINT_MAX), 0);
	CU_ASSERT_EQUAL(run_at(6 * tick - 1, UINT_MAX), 0);
	CU_ASSERT_EQUAL(run_at(6 * tick, UINT_MAX), 1);

	/* On a boundary: exact. */
	cr_timer_arm(g_w, &r.t, 10 * tick);
	CU_ASSERT_EQUAL(cr_timer_wheel_next(g_w), 10 * tick);
	CU_ASSERT_EQUAL(run_at(10 * tick - 1, UINT_MAX), 0);
	CU_ASSERT_EQUAL(run_at(10 * tick, UINT_MAX), 1);

	/* Within the current tick but after "now": not yet due. */
	run_at(20 * tick + 1, UINT_MAX);
	cr_timer_arm(g_w, &r.t, 20 * tick + 2);
	CU_ASSERT_EQUAL(run_at(20 * tick + 2, UINT_MAX), 0);
	CU_ASSERT_EQUAL(run_at(21 * tick, UINT_MAX), 1);
	CU_ASSERT_EQUAL(g_nlog, 4);
	cr_timer_wheel_destroy(g_w);
}

static void
test_tick_rounding(void)
{
	check_tick(MS);
	check_tick(100 * US);
	check_tick(S);
	check_tick(3);
}

static void
test_next(void)
{
	struct rec a, b;
	uint64_t n;

	g_w = cr_timer_wheel_create(0, 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g_w);
	rec_init(&a, 1);
	rec_init(&b, 2);
	cr_timer_arm(g_w, &a.t, 40);
	CU_ASSERT_EQUAL(cr_timer_wheel_next(g_w), 40);
	cr_timer_arm(g_w, &b.t, 5000);
	CU_ASSERT_EQUAL(cr_timer_wheel_next(g_w), 40);
	CU_ASSERT_TRUE(cr_timer_cancel(g_w, &a.t));
	n = cr_timer_wheel_next(g_w);
	CU_ASSERT(n > 0 && n <= 5000);
	/* Following next() reaches the deadline in a few wakes, never past it. */
	for (int i = 0; i < 8 && n < 5000; i++) {
		CU_ASSERT_EQUAL(cr_timer_wheel_run(g_w, n, UINT_MAX), 0);
		n = cr_timer_wheel_next(g_w);
		CU_ASSERT(n <= 5000);
	}
	CU_ASSERT_EQUAL(n, 5000);
	cr_timer_arm(g_w, &a.t, 0);
	CU_ASSERT_EQUAL(cr_timer_wheel_next(g_w), 0);
	cr_timer_wheel_destroy(g_w);
	CU_ASSERT_FALSE(cr_timer_armed(&a.t));
	CU_ASSERT_FALSE(cr_timer_armed(&b.t));
}

static void
test_idle_jump(void)
{
	struct rec a, b;
	const uint64_t far = (1ull << 30) + 12345;
	const uint64_t beyond = (1ull << 40) + 5;
	uint64_t c0;

	g_w = cr_timer_wheel_create(0, 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g_w);
	log_reset();
	rec_init(&a, 1);
	rec_init(&b, 2);

	/* Empty wheel: a jump costs nothing. */
	run_at(1ull << 30, UINT_MAX);
	CU_ASSERT_EQUAL(g_w->cascades, 0);

	/* One timer 2^30 ticks away: one cascade per level it passes, not per tick. */
	cr_timer_arm(g_w, &a.t, (1ull << 30) + far);
	c0 = g_w->cascades;
	CU_ASSERT_EQUAL(run_at((1ull << 30) + far - 1, UINT_MAX), 0);
	CU_ASSERT_EQUAL(run_at((1ull << 30) + far, UINT_MAX), 1);
	CU_ASSERT(g_w->cascades - c0 >= 1 && g_w->cascades - c0 <= LEVELS);

	/* Beyond the horizon: re-queued at each 2^36 boundary, exact at the end. */
	c0 = g_w->cascades;
	cr_timer_arm(g_w, &b.t, g_now + beyond);
	CU_ASSERT(cr_timer_wheel_next(g_w) <= g_now + beyond);
	CU_ASSERT_EQUAL(run_at(g_now + beyond - 1, UINT_MAX), 0);
	CU_ASSERT(cr_timer_armed(&b.t));
	CU_ASSERT_EQUAL(cr_timer_wheel_next(g_w), g_now + 1);
	CU_ASSERT_EQUAL(run_at(g_now + 1, UINT_MAX), 1);
	CU_ASSERT(g_w->cascades - c0 <= (beyond >> HORIZON_BITS) + 1 + LEVELS);
	CU_ASSERT_EQUAL(g_nlog, 2);
	CU_ASSERT_TRUE(wheel_ok(g_w));
	cr_timer_wheel_destroy(g_w);
}

static void
test_extremes(void)
{
	struct rec a, b;

	/* Deadlines near the end of time: no overflow, never early. */
	g_w = cr_timer_wheel_create(UINT64_MAX - 1000, 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g_w);
	log_reset();
	rec_init(&a, 1);
	rec_init(&b, 2);
	cr_timer_arm(g_w, &a.t, UINT64_MAX);
	CU_ASSERT(cr_timer_wheel_next(g_w) > UINT64_MAX - 1000);
	CU_ASSERT_EQUAL(run_at(UINT64_MAX - 1, UINT_MAX), 0);
	CU_ASSERT_EQUAL(run_at(UINT64_MAX, UINT_MAX), 1);
	cr_timer_wheel_destroy(g_w);

	g_w = cr_timer_wheel_create(0, MS);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g_w);
	cr_timer_arm(g_w, &b.t, UINT64_MAX);
	CU_ASSERT_TRUE(cr_timer_armed(&b.t));
	CU_ASSERT_EQUAL(cr_timer_wheel_count(g_w), 1);
	CU_ASSERT(cr_timer_wheel_next(g_w) > 0);
	CU_ASSERT_TRUE(wheel_ok(g_w));
	/* Time going backwards does not move the wheel back. */
	CU_ASSERT_EQUAL(run_at(5 * S, UINT_MAX), 0);
	CU_ASSERT_EQUAL(run_at(1 * S, UINT_MAX), 0);
	CU_ASSERT_EQUAL(g_w->now, 5 * S / MS);
	cr_timer_wheel_destroy(g_w);
	CU_ASSERT_FALSE(cr_timer_armed(&b.t));
}

/* ---- seeded model test against a reference list ---- */

#define MODEL_TIMERS 48
#define MODEL_LIMIT  (UINT64_C(1) << 62)

struct model;

struct mtimer {
	struct cr_timer t;
	struct model *m;
	unsigned idx;
};

struct mref {
	struct mtimer *p; /* NULL until armed, and after a callback freed it */
	bool armed;
	uint64_t dl_ns; /* deadline asked for */
	uint64_t eff;	/* tick it counts as due at: max(rounded deadline, wheel tick) */
	uint64_t seq;	/* arming order */
};

struct model {
	uint64_t seed, rng;
	uint64_t tick;
	uint64_t now_ns; /* latest time given to run() */
	uint64_t wnow;	 /* the wheel's tick */
	uint64_t seq, run_seq;
	unsigned ran;
	unsigned op;
	bool draining;
	bool failed;
	struct cr_timer_wheel *w;
	struct mref r[MODEL_TIMERS];
};

static uint64_t
rnd(struct model *m)
{
	/* xorshift64* */
	m->rng ^= m->rng >> 12;
	m->rng ^= m->rng << 25;
	m->rng ^= m->rng >> 27;
	return m->rng * UINT64_C(2685821657736338717);
}

static void
mfail(struct model *m, const char *fmt, ...)
{
	va_list ap;

	if (m->failed)
		return;
	m->failed = true;
	fprintf(stderr, "\nmodel seed %#" PRIx64 " tick %" PRIu64 " op %u now %" PRIu64 ": ",
		m->seed, m->tick, m->op, m->now_ns);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Next timer the wheel must run: due, armed before this run() began, by (eff, seq). */
static int
mpick(const struct model *m)
{
	int best = -1;

	for (int i = 0; i < MODEL_TIMERS; i++) {
		const struct mref *r = &m->r[i];

		if (!r->armed || r->eff > m->wnow || r->seq > m->run_seq)
			continue;
		if (best < 0 || r->eff < m->r[best].eff ||
		    (r->eff == m->r[best].eff && r->seq < m->r[best].seq))
			best = i;
	}
	return best;
}

static void model_fn(struct cr_timer *t, void *arg);

static void
marm(struct model *m, unsigned i, uint64_t dl_ns)
{
	struct mref *r = &m->r[i];
	uint64_t e = dl_ns / m->tick + (dl_ns % m->tick != 0);

	if (r->p == NULL) {
		r->p = malloc(sizeof(*r->p));
		if (r->p == NULL)
			abort();
		r->p->m = m;
		r->p->idx = i;
		cr_timer_init(&r->p->t, model_fn, r->p);
	}
	if (cr_timer_armed(&r->p->t) != r->armed)
		mfail(m, "timer %u armed %d, model says %d", i, !r->armed, r->armed);
	cr_timer_arm(m->w, &r->p->t, dl_ns);
	r->armed = true;
	r->dl_ns = dl_ns;
	r->eff = e > m->wnow ? e : m->wnow;
	r->seq = ++m->seq;
}

static void
mcancel(struct model *m, unsigned i)
{
	struct mref *r = &m->r[i];
	bool was;

	if (r->p == NULL)
		return;
	was = cr_timer_cancel(m->w, &r->p->t);
	if (was != r->armed)
		mfail(m, "cancel of %u returned %d, model armed %d", i, was, r->armed);
	r->armed = false;
}

/* A deadline from 0 ticks to beyond the horizon, in the past now and then, unaligned. */
static uint64_t
rand_deadline(struct model *m)
{
	uint64_t t = m->wnow, d;

	switch (rnd(m) % 12) {
	case 0:
		d = rnd(m) % 100;
		t -= d < t ? d : t;
		break;
	case 1:
		break;
	case 2:
		t += 1 + rnd(m) % 63;
		break;
	case 3:
		t += rnd(m) % 4096;
		break;
	case 4:
		t += rnd(m) % (1u << 18);
		break;
	case 5:
		t += rnd(m) % (1u << 24);
		break;
	case 6:
		t += (1u << 24) + rnd(m) % (1u << 24);
		break;
	case 7:
		t += rnd(m) % (1u << 30);
		break;
	case 8:
		t += rnd(m) % (UINT64_C(1) << 36);
		break;
	case 9:
		t += (UINT64_C(1) << 36) + rnd(m) % (UINT64_C(1) << 40);
		break;
	default:
		t += 1 + rnd(m) % 8;
		break;
	}
	if (t > MODEL_LIMIT / m->tick)
		t = MODEL_LIMIT / m->tick;
	return t * m->tick - (t > 0 ? rnd(m) % m->tick : 0);
}

static void
model_fn(struct cr_timer *t, void *arg)
{
	struct mtimer *p = arg;
	struct model *m = p->m;
	unsigned i = p->idx;
	struct mref *r = &m->r[i];
	int want = mpick(m);
	unsigned other;

	if (&p->t != t || (int)i != want)
		mfail(m, "ran timer %u, expected %d", i, want);
	if (r->dl_ns > m->now_ns)
		mfail(m, "timer %u early: deadline %" PRIu64, i, r->dl_ns);
	if (cr_timer_armed(t))
		mfail(m, "timer %u armed in its callback", i);
	r->armed = false;
	m->ran++;

	other = rnd(m) % MODEL_TIMERS;
	switch (rnd(m) % (m->draining ? 2 : 8)) {
	case 0:
		break;
	case 1:
		free(p);
		r->p = NULL;
		break;
	case 2:
	case 3:
		marm(m, i, rand_deadline(m));
		break;
	case 4:
		mcancel(m, other);
		break;
	case 5:
		marm(m, other, rand_deadline(m));
		break;
	case 6:
		/* Due "now": must wait for the next run(). */
		marm(m, other, m->now_ns);
		break;
	default:
		marm(m, i, m->now_ns + rnd(m) % (4 * m->tick));
		break;
	}
}

static void
mcheck(struct model *m)
{
	uint64_t min_eff = UINT64_MAX, next;
	unsigned armed = 0;

	for (int i = 0; i < MODEL_TIMERS; i++) {
		const struct mref *r = &m->r[i];

		if (r->p != NULL && cr_timer_armed(&r->p->t) != r->armed)
			mfail(m, "timer %d armed %d, model says %d", i, !r->armed, r->armed);
		if (!r->armed)
			continue;
		armed++;
		if (r->eff < min_eff)
			min_eff = r->eff;
	}
	if (cr_timer_wheel_count(m->w) != armed)
		mfail(m, "count %u, model %u", cr_timer_wheel_count(m->w), armed);
	if (!wheel_ok(m->w))
		mfail(m, "wheel invariants broken");
	if (m->w->now != m->wnow)
		mfail(m, "wheel at tick %" PRIu64 ", model %" PRIu64, m->w->now, m->wnow);

	next = cr_timer_wheel_next(m->w);
	if (armed == 0) {
		if (next != UINT64_MAX)
			mfail(m, "next %" PRIu64 " on an empty wheel", next);
	} else if (min_eff <= m->wnow) {
		if (next != 0)
			mfail(m, "next %" PRIu64 " with expired timers waiting", next);
	} else if (next > min_eff * m->tick || next <= m->now_ns) {
		mfail(m, "next %" PRIu64 ", earliest deadline %" PRIu64, next, min_eff * m->tick);
	}
}

static void
mrun(struct model *m, uint64_t now_ns, unsigned budget)
{
	unsigned got;

	if (now_ns > m->now_ns)
		m->now_ns = now_ns;
	if (now_ns / m->tick > m->wnow)
		m->wnow = now_ns / m->tick;
	m->run_seq = m->seq;
	m->ran = 0;
	got = cr_timer_wheel_run(m->w, now_ns, budget);
	if (got != m->ran)
		mfail(m, "run returned %u, %u callbacks ran", got, m->ran);
	if (got > budget)
		mfail(m, "ran %u over budget %u", got, budget);
	if (got < budget && mpick(m) >= 0)
		mfail(m, "timer %d due but not run (ran %u of budget %u)", mpick(m), got, budget);
}

/* Earliest deadline, rounded up to the tick as the wheel does, in ns. */
static uint64_t
earliest_dl(const struct model *m)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < MODEL_TIMERS; i++)
		if (m->r[i].armed && m->r[i].eff < best)
			best = m->r[i].eff;
	return best == UINT64_MAX ? best : best * m->tick;
}

static uint64_t
rand_now(struct model *m)
{
	uint64_t t = m->now_ns, e;

	switch (rnd(m) % 14) {
	case 0:
		return t;
	case 1:
	case 2:
	case 3:
		return t + rnd(m) % (4 * m->tick);
	case 4:
	case 5:
		return t + rnd(m) % (64 * m->tick);
	case 6:
		return t + rnd(m) % (4096 * m->tick);
	case 7:
		return t + rnd(m) % ((1u << 20) * m->tick);
	case 8:
		return t + rnd(m) % ((1u << 30) * m->tick);
	case 9:
	case 10:
		e = cr_timer_wheel_next(m->w);
		return e != UINT64_MAX && e > t ? e : t;
	case 11:
		e = earliest_dl(m);
		return e != UINT64_MAX && e > t ? e - 1 : t;
	default:
		e = earliest_dl(m);
		return e != UINT64_MAX && e > t ? e : t;
	}
}

static bool
model_seed(uint64_t seed, unsigned ops)
{
	static const uint64_t ticks[] = {1, 3, US, 100 * US, MS};
	struct model *m = calloc(1, sizeof(*m));
	uint64_t start;
	bool ok;

	if (m == NULL)
		abort();
	m->seed = seed;
	m->rng = seed * UINT64_C(0x9e3779b97f4a7c15) | 1;
	m->tick = ticks[rnd(m) % (sizeof(ticks) / sizeof(ticks[0]))];
	/* Random digits at every level (and above the horizon) from the start. */
	start = rnd(m) % ((UINT64_C(1) << 57) / m->tick) * m->tick + rnd(m) % m->tick;
	m->w = cr_timer_wheel_create(start, m->tick);
	if (m->w == NULL)
		abort();
	m->now_ns = start;
	m->wnow = start / m->tick;

	for (m->op = 0; m->op < ops && !m->failed && m->now_ns < MODEL_LIMIT / 2; m->op++) {
		unsigned i = rnd(m) % MODEL_TIMERS, c = rnd(m) % 20;

		if (c < 7)
			marm(m, i, rand_deadline(m));
		else if (c < 9)
			mcancel(m, i);
		else
			mrun(m, rand_now(m), rnd(m) % 3 ? UINT_MAX : rnd(m) % 5);
		mcheck(m);
	}
	/* Drain: step to each earliest deadline, far ones included, until nothing is armed. */
	m->draining = true;
	for (unsigned n = 0; n < 4 * MODEL_TIMERS && !m->failed; n++) {
		uint64_t e = earliest_dl(m);

		if (e == UINT64_MAX)
			break;
		if (e > m->now_ns) {
			mrun(m, e - 1, UINT_MAX);
			mcheck(m);
		}
		mrun(m, e > m->now_ns ? e : m->now_ns, UINT_MAX);
		mcheck(m);
	}
	if (earliest_dl(m) != UINT64_MAX)
		mfail(m, "drain left timers armed");

	ok = !m->failed;
	cr_timer_wheel_destroy(m->w);
	for (int i = 0; i < MODEL_TIMERS; i++)
		free(m->r[i].p);
	free(m);
	return ok;
}

/* --stress SEED replays one seed (as printed on failure) instead of the range. */
static uint64_t g_only_seed;

static void
run_model(uint64_t first, unsigned seeds, unsigned ops)
{
	unsigned failed = 0;

	if (g_only_seed != 0) {
		first = g_only_seed;
		seeds = 1;
	}
	for (uint64_t s = first; s < first + seeds; s++)
		if (!model_seed(s, ops))
			failed++;
	CU_ASSERT_EQUAL(failed, 0);
}

static void
test_model(void)
{
	run_model(1, 24, 4000);
}

static void
test_model_stress(void)
{
	run_model(1000, 200, 25000);
}

/* cancel_all: every armed timer (slot, far and expired lists) is disarmed and reported
 * once, and the wheel is empty and usable afterwards. */
static unsigned cancel_seen;
static bool cancel_armed_in_cb;

static void
cancel_cb(struct cr_timer *t, void *arg)
{
	(void)arg;
	cancel_seen++;
	cancel_armed_in_cb |= cr_timer_armed(t);
}

static void
test_cancel_all(void)
{
	struct cr_timer_wheel *w = cr_timer_wheel_create(0, MS);
	struct rec r[5];
	unsigned i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(w);
	memset(r, 0, sizeof(r));
	for (i = 0; i < 5; i++)
		cr_timer_init(&r[i].t, rec_fn, &r[i]);
	cr_timer_arm(w, &r[0].t, 5 * MS);
	cr_timer_arm(w, &r[1].t, 300 * S);
	cr_timer_arm(w, &r[2].t, UINT64_C(1) << 62); /* the far list */
	cr_timer_arm(w, &r[3].t, 0);		       /* expired, not yet run */
	cancel_seen = 0;
	cancel_armed_in_cb = false;
	CU_ASSERT_EQUAL(cr_timer_wheel_cancel_all(w, cancel_cb, NULL), 4);
	CU_ASSERT_EQUAL(cancel_seen, 4);
	CU_ASSERT_FALSE(cancel_armed_in_cb);
	CU_ASSERT_EQUAL(cr_timer_wheel_count(w), 0);
	CU_ASSERT_EQUAL(cr_timer_wheel_next(w), UINT64_MAX);
	for (i = 0; i < 4; i++)
		CU_ASSERT_FALSE(cr_timer_armed(&r[i].t));
	CU_ASSERT_EQUAL(cr_timer_wheel_cancel_all(w, NULL, NULL), 0);
	g_w = w;
	log_reset();
	cr_timer_arm(w, &r[4].t, 2 * MS);
	r[4].id = 4;
	g_now = 10 * MS;
	CU_ASSERT_EQUAL(cr_timer_wheel_run(w, 10 * MS, 16), 1);
	CU_ASSERT_EQUAL(g_nlog, 1);
	cr_timer_wheel_destroy(w);
	g_w = NULL;
}

int
main(int argc, char **argv)
{
	bool stress = argc > 1 && strcmp(argv[1], "--stress") == 0;
	CU_pSuite s;
	unsigned failures;

	if (stress && argc > 2)
		g_only_seed = strtoull(argv[2], NULL, 0);
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite(stress ? "timer_wheel_stress" : "timer_wheel", NULL, NULL);
	if (s == NULL)
		goto out_cleanup;
	if (stress) {
		CU_add_test(s, "model_stress", test_model_stress);
	} else {
		CU_add_test(s, "create", test_create);
		CU_add_test(s, "arm_fire_cancel", test_arm_fire_cancel);
		CU_add_test(s, "periodic", test_periodic);
		CU_add_test(s, "cancel_from_callback", test_cancel_from_callback);
		CU_add_test(s, "free_in_callback", test_free_in_callback);
		CU_add_test(s, "arm_past_from_callback", test_arm_past_from_callback);
		CU_add_test(s, "cancel_expired", test_cancel_expired);
		CU_add_test(s, "budget", test_budget);
		CU_add_test(s, "ties_arming_order", test_ties_arming_order);
		CU_add_test(s, "tick_rounding", test_tick_rounding);
		CU_add_test(s, "next", test_next);
		CU_add_test(s, "idle_jump", test_idle_jump);
		CU_add_test(s, "extremes", test_extremes);
		CU_add_test(s, "model", test_model);
		CU_add_test(s, "cancel_all", test_cancel_all);
	}
	if (CU_get_error() != CUE_SUCCESS)
		goto out_cleanup;
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failures = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failures != 0 ? 1 : 0;

out_cleanup:
	CU_cleanup_registry();
	return 1;
}
