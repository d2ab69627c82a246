/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Hierarchical timing wheel with intrusive timers.
 *
 * A wheel belongs to one lcore and is touched only by it; it has no locks. Timers are
 * embedded in the caller's structs: arming and cancelling are O(1) and never allocate.
 * Time is in nanoseconds on whatever clock the owner passes in (the reactor passes its
 * monotonic clock, tests pass a fake one); the wheel rounds deadlines up to its tick, so
 * a timer's effective deadline is the first multiple of the tick at or after the one asked
 * for: it never fires before that, and fires in the first cr_timer_wheel_run() whose
 * @p now_ns reaches it.
 */
#ifndef CR_TIMER_H
#define CR_TIMER_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct cr_timer;
struct cr_timer_wheel;

/** Expiry callback; runs on the wheel's lcore. May re-arm or cancel any timer, itself
 *  included, and may free the struct holding @p t once it has not re-armed it. */
typedef void (*cr_timer_fn)(struct cr_timer *t, void *arg);

/** A timer. Fields are private; embed it and set it up with cr_timer_init(). */
struct cr_timer {
	struct cr_timer *next, **pprev; /* private: slot / expired list links */
	uint64_t expires;		/* private: absolute tick */
	cr_timer_fn fn;			/* private */
	void *arg;			/* private */
	uint32_t where;			/* private: idle, slot, far or expired list */
};

/**
 * Set up @p t; it starts idle (not armed). Never call on an armed timer.
 */
void cr_timer_init(struct cr_timer *t, cr_timer_fn fn, void *arg);

/** True while @p t is armed (in a slot or expired but not yet run). */
static inline bool
cr_timer_armed(const struct cr_timer *t)
{
	return t->pprev != 0;
}

/**
 * Create a wheel whose time starts at @p now_ns with a tick of @p tick_ns (> 0).
 * Deadlines up to 2^36 ticks ahead are exact to the tick; later ones are clamped to that
 * horizon and re-queued as time passes (they still fire at their deadline).
 * @return the wheel, or NULL with errno = EINVAL / ENOMEM.
 */
struct cr_timer_wheel *cr_timer_wheel_create(uint64_t now_ns, uint64_t tick_ns);

/** Free a wheel. Armed timers are left disarmed (their memory is the caller's). NULL ok. */
void cr_timer_wheel_destroy(struct cr_timer_wheel *w);

/**
 * Arm @p t to fire at @p expires_ns (absolute, rounded up to the tick). Re-arming an armed
 * timer moves it, and it counts as armed now for ties. A deadline at or before the wheel's
 * current time (the latest @p now_ns given to create or run) fires on the next
 * cr_timer_wheel_run(), behind timers already expired. O(1); never allocates. Wheel's lcore
 * only; callbacks may call it.
 */
void cr_timer_arm(struct cr_timer_wheel *w, struct cr_timer *t, uint64_t expires_ns);

/**
 * Disarm @p t, whether it waits in the wheel or has expired and not yet run. O(1).
 * Wheel's lcore only; callbacks may call it.
 * @return true if it was armed (it will not run), false if it was idle. A timer whose
 *         callback is running is idle unless the callback re-armed it.
 */
bool cr_timer_cancel(struct cr_timer_wheel *w, struct cr_timer *t);

/**
 * Advance the wheel to @p now_ns and run at most @p budget expired timers, earliest
 * deadline first (ties in arming order). Timers left over stay expired and run first on
 * the next call. A timer armed from a callback for a time <= now runs on the next call,
 * not this one (no livelock). Each timer is disarmed before its callback runs. The cost
 * is in timers moved, not in time passed: a long idle gap is not walked tick by tick.
 * A @p now_ns earlier than the wheel's time does not move it back. Wheel's lcore only,
 * and not from a timer callback.
 * @return the number of callbacks run.
 */
unsigned cr_timer_wheel_run(struct cr_timer_wheel *w, uint64_t now_ns, unsigned budget);

/**
 * Earliest deadline (ns) among armed timers, rounded up to the tick, or UINT64_MAX if none.
 * Never later than the true earliest (rounded) deadline, so running the wheel at the
 * returned time makes progress; may be earlier for far timers (which then only costs a
 * spurious wake). 0 if expired timers are waiting to run. O(levels).
 */
uint64_t cr_timer_wheel_next(struct cr_timer_wheel *w);

/** Number of armed timers. */
unsigned cr_timer_wheel_count(const struct cr_timer_wheel *w);

/**
 * Disarm every armed timer (expired ones not yet run included) and call @p cb(t, @p arg)
 * for each, once all are disarmed: @p cb may free or re-initialize @p t; a timer it arms
 * on @p w again stays armed. Not from a timer callback of @p w. @p cb may be NULL.
 * @return how many timers were disarmed.
 */
unsigned cr_timer_wheel_cancel_all(struct cr_timer_wheel *w, cr_timer_fn cb, void *arg);

/** The wheel's tick in ns. */
uint64_t cr_timer_wheel_tick(const struct cr_timer_wheel *w);

#ifdef __cplusplus
}
#endif
#endif /* CR_TIMER_H */
