/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Hierarchical timing wheel.
 *
 * Time is kept in ticks. Level L has 64 slots of 64^L ticks each. A timer due at tick e
 * sits at the level of the highest 6-bit digit in which e differs from the wheel's current
 * tick, in the slot named by e's digit there. So every occupied slot of a level lies
 * *ahead* of the current digit, within the current revolution of the level above: slots
 * never wrap, the lowest set bit of a level's bitmap is its next slot, and the lowest
 * non-empty level holds the earliest one. When time reaches a slot, its timers are placed
 * again against the new time: one level down each step, or onto the expired list when due.
 *
 * Six levels cover 36 bits of ticks. A timer that differs from the current tick above
 * bit 36 waits on the far list, which is placed again each time the current tick crosses
 * a multiple of 2^36, so it too fires at its exact tick.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "cr_timer.h"

#define LEVEL_BITS   6
#define SLOTS	     (1u << LEVEL_BITS)
#define SLOT_MASK    (SLOTS - 1)
#define LEVELS	     6
#define HORIZON_BITS (LEVELS * LEVEL_BITS)
#define WHEEL_SLOTS  (LEVELS * SLOTS)

/* Values of cr_timer.where: a slot index below WHEEL_SLOTS, or one of these. */
#define LIST_FAR     WHEEL_SLOTS
#define LIST_EXPIRED (WHEEL_SLOTS + 1)
#define NLISTS	     (WHEEL_SLOTS + 2)
#define WHERE_IDLE   UINT32_MAX

_Static_assert(SLOTS == 64, "one uint64_t occupancy bitmap per level");
_Static_assert(HORIZON_BITS < 64, "the far list needs ticks above the horizon");

/* Tail-queue head: appending at the tail keeps arming order among equal deadlines. */
struct timer_list {
	struct cr_timer *first;
	struct cr_timer **last;
};

struct cr_timer_wheel {
	uint64_t tick_ns;
	uint64_t now;		   /* current tick; everything due by it has expired */
	unsigned count;		   /* armed timers, expired ones included */
	unsigned nexpired;	   /* timers on the expired list */
	bool running;		   /* inside cr_timer_wheel_run() */
	uint64_t cascades;	   /* slot lists re-placed; tests read it */
	uint64_t occupied[LEVELS]; /* bit s of level L: slot list L*64+s is non-empty */
	struct cr_timer fence;	   /* ends the batch cr_timer_wheel_run() may run */
	struct timer_list lists[NLISTS];
};

static void
list_init(struct timer_list *l)
{
	l->first = NULL;
	l->last = &l->first;
}

static void
list_append(struct timer_list *l, struct cr_timer *t)
{
	t->next = NULL;
	t->pprev = l->last;
	*l->last = t;
	l->last = &t->next;
}

static void
list_remove(struct timer_list *l, struct cr_timer *t)
{
	if (t->next != NULL)
		t->next->pprev = t->pprev;
	else
		l->last = t->pprev;
	*t->pprev = t->next;
	t->next = NULL;
	t->pprev = NULL;
}

/* Which list a timer due at tick @p expires belongs on when the wheel is at tick @p now. */
static uint32_t
list_for(uint64_t now, uint64_t expires)
{
	unsigned level;

	if (expires <= now)
		return LIST_EXPIRED;
	level = (63 - __builtin_clzll(expires ^ now)) / LEVEL_BITS;
	if (level >= LEVELS)
		return LIST_FAR;
	return level * SLOTS + ((expires >> (level * LEVEL_BITS)) & SLOT_MASK);
}

static void
place(struct cr_timer_wheel *w, struct cr_timer *t)
{
	uint32_t where = list_for(w->now, t->expires);

	t->where = where;
	list_append(&w->lists[where], t);
	if (where < WHEEL_SLOTS)
		w->occupied[where / SLOTS] |= UINT64_C(1) << (where % SLOTS);
	else if (where == LIST_EXPIRED)
		w->nexpired++;
}

static void
unplace(struct cr_timer_wheel *w, struct cr_timer *t)
{
	uint32_t where = t->where;

	list_remove(&w->lists[where], t);
	t->where = WHERE_IDLE;
	if (where < WHEEL_SLOTS) {
		if (w->lists[where].first == NULL)
			w->occupied[where / SLOTS] &= ~(UINT64_C(1) << (where % SLOTS));
	} else if (where == LIST_EXPIRED) {
		w->nexpired--;
	}
}

/*
 * The next tick at which a list in the wheel must be placed again, and which list.
 * Only the lowest non-empty level can hold it: any higher level's slots start at a later
 * digit of a higher place. False if the wheel (expired list aside) is empty.
 */
static bool
next_event(const struct cr_timer_wheel *w, uint64_t *tick, uint32_t *where)
{
	for (unsigned level = 0; level < LEVELS; level++) {
		unsigned shift = level * LEVEL_BITS;
		unsigned slot;

		if (w->occupied[level] == 0)
			continue;
		slot = __builtin_ctzll(w->occupied[level]);
		*where = level * SLOTS + slot;
		*tick = (w->now >> (shift + LEVEL_BITS) << (shift + LEVEL_BITS)) |
			((uint64_t)slot << shift);
		return true;
	}
	if (w->lists[LIST_FAR].first == NULL)
		return false;
	/* A far timer differs from now above the horizon, so now is below the last span. */
	assert((w->now >> HORIZON_BITS) < (UINT64_MAX >> HORIZON_BITS));
	*where = LIST_FAR;
	*tick = ((w->now >> HORIZON_BITS) + 1) << HORIZON_BITS;
	return true;
}

/* Time has reached list @p where: place each of its timers again, in order. */
static void
cascade(struct cr_timer_wheel *w, uint32_t where)
{
	struct cr_timer *t = w->lists[where].first;

	list_init(&w->lists[where]);
	if (where < WHEEL_SLOTS)
		w->occupied[where / SLOTS] &= ~(UINT64_C(1) << (where % SLOTS));
	while (t != NULL) {
		struct cr_timer *next = t->next;

		place(w, t);
		t = next;
	}
	w->cascades++;
}

/*
 * Move time to @p target, jumping straight from one non-empty list to the next, so the
 * cost is in timers moved, not ticks passed. Events come in time order, so timers reach
 * the expired list in deadline order.
 */
static void
advance(struct cr_timer_wheel *w, uint64_t target)
{
	uint64_t tick;
	uint32_t where;

	while (w->now < target && next_event(w, &tick, &where) && tick <= target) {
		w->now = tick;
		cascade(w, where);
	}
	if (w->now < target)
		w->now = target;
}

void
cr_timer_init(struct cr_timer *t, cr_timer_fn fn, void *arg)
{
	t->next = NULL;
	t->pprev = NULL;
	t->expires = 0;
	t->fn = fn;
	t->arg = arg;
	t->where = WHERE_IDLE;
}

struct cr_timer_wheel *
cr_timer_wheel_create(uint64_t now_ns, uint64_t tick_ns)
{
	struct cr_timer_wheel *w;

	if (tick_ns == 0) {
		errno = EINVAL;
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (w == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	w->tick_ns = tick_ns;
	w->now = now_ns / tick_ns;
	cr_timer_init(&w->fence, NULL, NULL);
	for (unsigned i = 0; i < NLISTS; i++)
		list_init(&w->lists[i]);
	return w;
}

void
cr_timer_wheel_destroy(struct cr_timer_wheel *w)
{
	if (w == NULL)
		return;
	for (unsigned i = 0; i < NLISTS; i++) {
		struct cr_timer *t = w->lists[i].first;

		while (t != NULL) {
			struct cr_timer *next = t->next;

			t->next = NULL;
			t->pprev = NULL;
			t->where = WHERE_IDLE;
			t = next;
		}
	}
	free(w);
}

void
cr_timer_arm(struct cr_timer_wheel *w, struct cr_timer *t, uint64_t expires_ns)
{
	/* Round up, so a timer never fires before its deadline; cannot overflow. */
	uint64_t expires = expires_ns / w->tick_ns + (expires_ns % w->tick_ns != 0);

	if (cr_timer_armed(t))
		unplace(w, t);
	else
		w->count++;
	t->expires = expires;
	place(w, t);
}

bool
cr_timer_cancel(struct cr_timer_wheel *w, struct cr_timer *t)
{
	if (!cr_timer_armed(t))
		return false;
	unplace(w, t);
	w->count--;
	return true;
}

unsigned
cr_timer_wheel_run(struct cr_timer_wheel *w, uint64_t now_ns, unsigned budget)
{
	struct timer_list *expired = &w->lists[LIST_EXPIRED];
	unsigned ran = 0;

	/* Called from a callback: a misuse; refuse rather than nest a second fence. */
	assert(!w->running);
	if (w->running)
		return 0;
	advance(w, now_ns / w->tick_ns);
	if (w->nexpired == 0 || budget == 0)
		return 0;

	/* Timers that callbacks arm for the past queue up behind the fence: next call. */
	w->running = true;
	list_append(expired, &w->fence);
	while (ran < budget && expired->first != &w->fence) {
		struct cr_timer *t = expired->first;

		unplace(w, t);
		w->count--;
		ran++;
		/* The callback may re-arm or free t: t is not touched after this. */
		t->fn(t, t->arg);
	}
	list_remove(expired, &w->fence);
	w->running = false;
	return ran;
}

uint64_t
cr_timer_wheel_next(struct cr_timer_wheel *w)
{
	uint64_t tick;
	uint32_t where;

	if (w->nexpired != 0)
		return 0;
	if (!next_event(w, &tick, &where))
		return UINT64_MAX;
	/* A tick past the last representable ns cannot be reached by any run() anyway. */
	if (tick > UINT64_MAX / w->tick_ns)
		return UINT64_MAX;
	return tick * w->tick_ns;
}

unsigned
cr_timer_wheel_count(const struct cr_timer_wheel *w)
{
	return w->count;
}

uint64_t
cr_timer_wheel_tick(const struct cr_timer_wheel *w)
{
	return w->tick_ns;
}

unsigned
cr_timer_wheel_cancel_all(struct cr_timer_wheel *w, cr_timer_fn cb, void *arg)
{
	unsigned i, n = 0;

	struct cr_timer *gone = NULL, *t;

	assert(!w->running);
	/* Every timer off the wheel first, onto a list of our own: a callback that arms a
	 * timer again (against the rules) leaves it armed, instead of looping here. */
	for (i = 0; i < NLISTS; i++) {
		while ((t = w->lists[i].first) != NULL) {
			unplace(w, t);
			w->count--;
			t->next = gone;
			gone = t;
			n++;
		}
	}
	while ((t = gone) != NULL) {
		gone = t->next;
		t->next = NULL;
		if (cb != NULL)
			cb(t, arg); /* t is not touched after this */
	}
	return n;
}
