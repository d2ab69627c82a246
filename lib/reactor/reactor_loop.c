/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The loop. A turn takes at most CR_BATCH from each source, then flushes what it sent;
 * an lcore with nothing to do spins for an adaptive budget, then parks (rules 3, 8, 9).
 */
#include <errno.h>

#include "reactor_internal.h"

/* Once our mailbox is closed, holds on it may drop without a message (a refused sender):
 * until it is quiesced the park is this short and the state re-checked. */
#define CLOSING_PARK_NS (100 * 1000)
/* Otherwise a closing lcore waits for leases, modules and calls: a release wakes it, and so
 * do completions, messages and timers. The bound only guards against a wake nobody sends
 * (and is cut to a shutdown's deadline, which passes without one). */
#define CLOSING_OPEN_PARK_NS (10 * 1000 * 1000)

static unsigned
run_completions(struct cr_lcore *lc)
{
	uint64_t wakes = 0;
	unsigned n = lc->ops->poll(lc->be_own, CR_BATCH, &wakes);

	if (n != 0)
		CR_STAT_ADD(lc, cqes, n - wakes);
	if (wakes != 0)
		CR_STAT_ADD(lc, wakes_recv, wakes);
	return n;
}

static unsigned
run_timers(struct cr_lcore *lc)
{
	unsigned n;

	if (cr_timer_wheel_count(lc->wheel) == 0)
		return 0;
	n = cr_timer_wheel_run(lc->wheel, lc->now, CR_BATCH);
	if (n != 0)
		CR_STAT_ADD(lc, timers, n);
	return n;
}

static void
flush_sends(struct cr_lcore *lc, unsigned work)
{
	cr__retry_backlog(lc);
	cr__flush_outboxes(lc);
	/*
	 * A busy turn is followed at once by another, whose poll submits (one entry); but a
	 * wake we queued goes now, before the admission that keeps its target's ring open
	 * is dropped.
	 */
	if (work == 0 || !lc->ops->poll_submits || lc->wake_queued) {
		lc->ops->submit(lc->be_own);
		lc->wake_queued = false;
	}
	cr__release_outboxes(lc);
}

/*
 * One clock read per turn: the time since the previous turn began is busy if that turn did
 * work, idle otherwise (its spin and park included), so busy + idle covers every ns.
 */
static void
account(struct cr_lcore *lc, uint64_t now)
{
	uint64_t elapsed = now - lc->now;

	if (lc->last_work != 0)
		CR_STAT_ADD(lc, busy_ns, elapsed);
	else
		CR_STAT_ADD(lc, idle_ns, elapsed);
}

static bool
stop_requested(const struct cr_lcore *lc)
{
	/* acquire: pairs with the release in cr_lcore_retire(), which set retire_done */
	return atomic_load_explicit(&cr__rt.stop, memory_order_relaxed) ||
	       atomic_load_explicit(&lc->retire_req, memory_order_acquire);
}

/* A request not acted on yet, or a shutdown arriving while retiring (it is told too). */
static bool
stop_seen(const struct cr_lcore *lc)
{
	if (lc->phase == LP_SERVING)
		return stop_requested(lc);
	return !(lc->told & CLOSE_SHUTDOWN) &&
	       atomic_load_explicit(&cr__rt.stop, memory_order_relaxed);
}

unsigned
cr__lcore_turn(struct cr_lcore *lc)
{
	unsigned work = 0;
	uint64_t now;

	CR_ASSERT_ON_LCORE(lc);
	now = cr__rt.clock();
	account(lc, now);
	lc->now = now;

	work += cr__run_mailbox(lc);
	work += cr__run_deferred(lc);
	/* A retire or stop that came meanwhile (a message may ask it) is acted on first
	 * (cr__lcore_done), before more I/O is taken in: what is still queued then goes to
	 * the lcores that stay. */
	if (!stop_seen(lc)) {
		work += run_completions(lc);
		work += run_timers(lc);
		work += cr__run_pollers(lc);
	}
	flush_sends(lc, work);

	CR_STAT_ADD(lc, turns, 1);
	lc->last_work = work;
	return work;
}

bool
cr__lcore_has_work(struct cr_lcore *lc, uint64_t now)
{
	uint64_t next;

	if (!cr_mailbox_empty(&lc->mbox) || !cr__defer_empty(lc) || lc->n_active_pollers != 0)
		return true;
	if (lc->backlog != NULL || lc->n_dirty != 0 || stop_seen(lc))
		return true;
	/* The last lease went since we looked: retirement can go on (see cr__lcore_done). */
	if (lc->waiting_holds && cr__holds(lc) == 0)
		return true;
	if (lc->ops->pending(lc->be_own))
		return true;
	next = cr_timer_wheel_next(lc->wheel);
	return next != UINT64_MAX && next <= now;
}

/*
 * Close lease admission, then give the closing event for what started it, once each for a
 * retire and a shutdown: to the modules first, in their order (lib/net drains its
 * listeners and winds its connections down by itself), then to the app's hook.
 */
static void
begin_closing(struct cr_lcore *lc)
{
	bool stop = atomic_load_explicit(&cr__rt.stop, memory_order_relaxed);
	unsigned why = stop ? CLOSE_SHUTDOWN : CLOSE_RETIRE;

	if (lc->phase == LP_SERVING) {
		lc->phase = LP_CLOSING;
		/* seq_cst: totally ordered with cr_reactor_hold()'s fetch_add */
		atomic_fetch_or(&lc->hold_word, CR_HOLD_CLOSED);
		atomic_store_explicit(&lc->state, CR_LCORE_RETIRING, memory_order_release);
	}
	/* Once each; a shutdown that overtakes a retire is told too (stop_seen). */
	if (lc->told & why)
		return;
	lc->told |= why;
	cr__modules_closing(lc->id, stop);
	if (stop && cr__rt.hooks.on_shutdown != NULL)
		cr__rt.hooks.on_shutdown(lc->id, cr__rt.hooks.arg);
	else if (!stop && cr__rt.hooks.on_retire != NULL)
		cr__rt.hooks.on_retire(lc->id, cr__rt.hooks.arg);
}

static bool
forced(void)
{
	return atomic_load_explicit(&cr__rt.stop, memory_order_relaxed) &&
	       cr__rt.clock() >= atomic_load_explicit(&cr__rt.deadline, memory_order_relaxed);
}

/*
 * Retire / stop protocol for one lcore. Once asked: leave the placement pool, close lease
 * admission, run the app's hook; keep serving while leases are held or modules have work
 * (not waited for once a shutdown is forced); once our own calls are answered, close the
 * mailbox; when no sender holds it any more and everything accepted has run, we are done.
 * Messages that run meanwhile may still send and defer.
 */
bool
cr__lcore_done(struct cr_lcore *lc)
{
	if (stop_seen(lc))
		begin_closing(lc);
	if (lc->phase == LP_SERVING)
		return false;
	if (lc->phase == LP_CLOSING) {
		bool force = forced();

		/* Read again by cr__lcore_has_work() after `parked` is raised: a release that
		 * drops the count after this look either is seen there or sees our flag. */
		lc->waiting_holds = !force && cr__holds(lc) != 0;
		if (lc->waiting_holds)
			return false;
		if (cr__modules_busy(lc->id, force))
			return false;
		if (lc->calls_out != 0)
			return false;
		cr_mailbox_close(&lc->mbox);
		lc->phase = LP_DRAINING;
	}
	if (!cr_mailbox_quiesced(&lc->mbox) || !cr_mailbox_empty(&lc->mbox))
		return false;
	if (!cr__defer_empty(lc) || lc->n_dirty != 0 || lc->backlog != NULL)
		return false;
	/* Messages run while draining may have given a module work again (a connection
	 * handed over just before the mailbox closed): it must finish too. */
	return !cr__modules_busy(lc->id, forced());
}

/*
 * First half of parking: raise the flag, then look once more. The seq_cst fence pairs
 * with the one in cr__wake_if_parked(): a sender that enqueued before our look is seen by
 * it; one that enqueues after it sees our flag and wakes us.
 * Returns true when the lcore may sleep (the flag stays up), false when work arrived.
 */
bool
cr__park_prepare(struct cr_lcore *lc)
{
	atomic_store_explicit(&lc->parked, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
	if (cr__lcore_has_work(lc, cr__rt.clock())) {
		atomic_store_explicit(&lc->parked, 0, memory_order_relaxed);
		return false;
	}
	return true;
}

/*
 * How long a closing lcore may sleep. Holds on its closed mailbox drop without a wake (a
 * refused sender), so until it is quiesced the sleep is short; otherwise what it waits for
 * wakes it (a release, a completion, a message, a timer), and the bound only guards
 * against a wake nobody sends, or the shutdown's deadline, whichever is first.
 */
static uint64_t
closing_park_cap(const struct cr_lcore *lc, uint64_t now)
{
	uint64_t deadline = atomic_load_explicit(&cr__rt.deadline, memory_order_relaxed);
	uint64_t cap = CLOSING_OPEN_PARK_NS;

	if (lc->phase == LP_DRAINING && !cr_mailbox_quiesced(&lc->mbox))
		return CLOSING_PARK_NS;
	if (atomic_load_explicit(&cr__rt.stop, memory_order_relaxed) && deadline > now &&
	    deadline - now < cap)
		cap = deadline - now;
	return cap;
}

/* Second half: sleep until a wake, a completion or the next timer. */
void
cr__park_commit(struct cr_lcore *lc)
{
	uint64_t next = cr_timer_wheel_next(lc->wheel), now = cr__rt.clock(), timeout;

	timeout = next == UINT64_MAX ? UINT64_MAX : (next > now ? next - now : 0);
	if (lc->phase != LP_SERVING) {
		uint64_t cap = closing_park_cap(lc, now);

		if (timeout > cap)
			timeout = cap;
	}
	CR_STAT_ADD(lc, parks, 1);
	lc->ops->park(lc->be_own, timeout);
	/* A waker that claimed the flag already cleared it; clearing again is harmless. */
	atomic_store_explicit(&lc->parked, 0, memory_order_relaxed);
}

static inline void
cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield");
#endif
}

/*
 * Spin for the adaptive budget: work that arrives while spinning (a hit) grows the budget
 * by half, a full spin with nothing (a miss) halves it, within [min, max]. Sources are
 * checked after every pause (a pause is ~25 ns; checking every 16th cost ~400 ns of round
 * trip), the clock only every 16th check.
 */
static bool
spin(struct cr_lcore *lc)
{
	uint64_t start = cr__rt.clock(), now = start;
	unsigned i = 0;

	while (now - start < lc->spin_ns) {
		if (cr__lcore_has_work(lc, now)) {
			lc->spin_ns += lc->spin_ns / 2;
			if (lc->spin_ns > lc->spin_max_ns)
				lc->spin_ns = lc->spin_max_ns;
			CR_STAT_ADD(lc, spin_hits, 1);
			CR_STAT_SET(lc, spin_budget_ns, lc->spin_ns);
			return true;
		}
		cpu_relax();
		if ((++i & 15) == 0)
			now = cr__rt.clock();
	}
	lc->spin_ns /= 2;
	if (lc->spin_ns < lc->spin_min_ns)
		lc->spin_ns = lc->spin_min_ns;
	CR_STAT_ADD(lc, spin_misses, 1);
	CR_STAT_SET(lc, spin_budget_ns, lc->spin_ns);
	return false;
}

void
cr__lcore_idle(struct cr_lcore *lc)
{
	if (cr__rt.cfg.poll_mode || lc->n_active_pollers != 0)
		return;
	if (lc->spin_max_ns != 0 && spin(lc))
		return;
	if (cr__park_prepare(lc))
		cr__park_commit(lc);
}

void
cr__lcore_loop(struct cr_lcore *lc)
{
	while (!cr__lcore_done(lc)) {
		if (cr__lcore_turn(lc) == 0)
			cr__lcore_idle(lc);
	}
	/* The last turn may have left its submit to a next turn's poll (wakes among it). */
	lc->ops->submit(lc->be_own);
}
