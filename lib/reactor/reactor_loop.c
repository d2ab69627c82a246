/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The loop. A turn takes at most CR_BATCH from each source, then flushes what it sent;
 * an lcore with nothing to do spins when spinning pays, else parks (rules 3, 8, 9).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "reactor_internal.h"

/* Once our mailbox is closed, holds on it may drop without a message (a refused sender):
 * until it is quiesced the park is this short and the state re-checked. */
#define CLOSING_PARK_NS (100 * 1000)
/* Otherwise a closing lcore waits for leases, modules and calls: a release wakes it, and so
 * do completions, messages and timers. The bound only guards against a wake nobody sends
 * (and is cut to a shutdown's deadline, which passes without one). */
#define CLOSING_OPEN_PARK_NS (10 * 1000 * 1000)
/* "Lately", for the spin's share of busy time: both halved every 10 ms of busy time. */
#define RECENT_HALVE_NS (10ull * 1000 * 1000)

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

	if (lc->last_work != 0) {
		CR_STAT_ADD(lc, busy_ns, elapsed);
		/* What the spin's share is measured against, and forgotten as time goes. */
		lc->busy_recent_ns += elapsed;
		if (lc->busy_recent_ns > RECENT_HALVE_NS) {
			lc->busy_recent_ns /= 2;
			lc->spin_recent_ns /= 2;
		}
	} else {
		CR_STAT_ADD(lc, idle_ns, elapsed);
	}
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
 * The idle policy (rule 9). Spinning instead of parking saves the CPU of a park and its
 * wake, and the wake's latency, but only when work comes before the spin has cost more
 * than that park would have: so an lcore spins at most the measured cost of a park and
 * a wake (park_cost_ns), and only when it has a reason to expect work that soon — a reply
 * to one of its own cr_call()s is due, or its idle spells have lately been shorter than
 * that cost. Otherwise it parks at once, which is what pays when work comes further apart
 * (a request per client round trip). And spins that found nothing never take more than a
 * quarter of the time the lcore was busy lately, whatever the prediction. --idle-spin USEC fixes the
 * budget; --poll-mode never parks.
 */
#define GAP_EWMA_SHIFT 3 /* each new idle spell weighs 1/8 */
#define SPIN_SHARE_DIV 4 /* at most a quarter of busy time */
#define CALIB_PARKS 5
#define CALIB_SLEEP_NS (50ull * 1000)		 /* the waker waits for the lcore to sleep */
#define CALIB_TIMEOUT_NS (10ull * 1000 * 1000) /* a bound; the waker comes long before */
#define PARK_COST_MIN_NS 500
#define PARK_COST_MAX_NS (200ull * 1000)

void
cr__idle_reset(struct cr_lcore *lc)
{
	lc->idle_since = 0;
	lc->sent_last_turn = false;
	lc->gap_ewma_ns = UINT64_C(1000000); /* no history: nothing says work is near */
	lc->spin_recent_ns = 0;
	lc->busy_recent_ns = 0;
}

static uint64_t
thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Measured once per process (the machine does not change), by the first lcore up. */
static _Atomic uint64_t measured_park_cost_ns;

/* The calibration's waker: another thread, as a completion or a sender would be. */
struct calib {
	struct cr_lcore *lc;
	_Atomic unsigned parking; /* the lcore is about to park for the n-th time */
};

static void *
calib_waker(void *arg)
{
	struct calib *c = arg;
	struct timespec pause = {0, (long)CALIB_SLEEP_NS};
	unsigned i, spins;

	(void)cr_thread_unpin_self();
	for (i = 1; i <= CALIB_PARKS; i++) {
		/* Bounded: a lcore that never parks gets its wakes late, not never. */
		for (spins = 0; atomic_load(&c->parking) < i && spins < 100000; spins++)
			sched_yield();
		nanosleep(&pause, NULL); /* let it fall asleep */
		c->lc->ops->wake_from_foreign(&c->lc->wake);
	}
	return NULL;
}

/*
 * What a park costs the lcore's thread in CPU: going to sleep in the backend with a timer
 * armed (as a park with timers pending does) and being woken by another thread's write to
 * the wake channel, as completions and senders wake it; the median of a few. A park that a
 * timer ends costs several times more in a VM (the timer's expiry traps), but that is not
 * the park a spin saves. It differs by ten times between bare metal and a VM.
 */
void
cr__park_cost_measure(struct cr_lcore *lc)
{
	uint64_t s[CALIB_PARKS], t, wakes = 0;
	struct calib c = {lc, 0};
	pthread_t waker;
	unsigned i;

	t = atomic_load_explicit(&measured_park_cost_ns, memory_order_relaxed);
	if (t == 0) {
		if (pthread_create(&waker, NULL, calib_waker, &c) != 0) {
			lc->park_cost_ns = CR_PARK_COST_DEFAULT_NS;
			CR_STAT_SET(lc, park_cost_ns, lc->park_cost_ns);
			return;
		}
		for (i = 0; i < CALIB_PARKS; i++) {
			t = thread_cpu_ns();
			atomic_store(&c.parking, i + 1);
			lc->ops->park(lc->be_own, CALIB_TIMEOUT_NS);
			s[i] = thread_cpu_ns() - t;
			lc->ops->poll(lc->be_own, 4, &wakes); /* reap the wake */
		}
		pthread_join(waker, NULL);
		qsort(s, CALIB_PARKS, sizeof(s[0]), cmp_u64);
		t = s[CALIB_PARKS / 2];
		t = t < PARK_COST_MIN_NS ? PARK_COST_MIN_NS : t > PARK_COST_MAX_NS ? PARK_COST_MAX_NS : t;
		atomic_store_explicit(&measured_park_cost_ns, t, memory_order_relaxed);
	}
	lc->park_cost_ns = t;
	CR_STAT_SET(lc, park_cost_ns, lc->park_cost_ns);
}

/* A turn found work after an idle spell: how long the spell was. */
static void
idle_ended(struct cr_lcore *lc)
{
	uint64_t gap = lc->now - lc->idle_since;

	lc->idle_since = 0;
	if (gap >= lc->gap_ewma_ns)
		lc->gap_ewma_ns += (gap - lc->gap_ewma_ns) >> GAP_EWMA_SHIFT;
	else
		lc->gap_ewma_ns -= (lc->gap_ewma_ns - gap) >> GAP_EWMA_SHIFT;
}

/*
 * How long to spin now; 0 to park at once. Work is expected soon when a reply is due: to
 * one of our cr_call()s, or to the messages our last busy turn sent (a request to another
 * lcore, the ping of a ping-pong). Or when idle spells have lately been short — which only
 * spins can show: a spell that ends in a park also counts the wake's own latency.
 */
static uint64_t
spin_budget(const struct cr_lcore *lc)
{
	if (cr__rt.cfg.idle_spin_fixed)
		return cr__rt.cfg.idle_spin_ns;
	if (lc->calls_out == 0 && !lc->sent_last_turn && lc->gap_ewma_ns >= lc->park_cost_ns)
		return 0;
	if (lc->spin_recent_ns > lc->busy_recent_ns / SPIN_SHARE_DIV)
		return 0;
	return lc->park_cost_ns;
}

/*
 * Spin for @p budget ns. Sources are checked after every pause (a pause is ~25 ns;
 * checking every 16th cost ~400 ns of round trip), the clock only every 16th check.
 */
static bool
spin(struct cr_lcore *lc, uint64_t budget)
{
	uint64_t start = cr__rt.clock(), now = start;
	unsigned i = 0;
	bool hit = false;

	while (now - start < budget) {
		if (cr__lcore_has_work(lc, now)) {
			hit = true;
			break;
		}
		cpu_relax();
		if ((++i & 15) == 0)
			now = cr__rt.clock();
	}
	if (hit)
		now = cr__rt.clock();
	/* Only a spin that found nothing is waste: one that hit cost less than a park. */
	if (!hit)
		lc->spin_recent_ns += now - start;
	CR_STAT_ADD(lc, spin_ns, now - start);
	if (hit)
		CR_STAT_ADD(lc, spin_hits, 1);
	else
		CR_STAT_ADD(lc, spin_misses, 1);
	return hit;
}

void
cr__lcore_idle(struct cr_lcore *lc)
{
	uint64_t budget;

	if (cr__rt.cfg.poll_mode || lc->n_active_pollers != 0)
		return;
	budget = spin_budget(lc);
	CR_STAT_SET(lc, spin_budget_ns, budget);
	if (budget != 0 && spin(lc, budget))
		return;
	if (cr__park_prepare(lc))
		cr__park_commit(lc);
}

void
cr__lcore_loop(struct cr_lcore *lc)
{
	while (!cr__lcore_done(lc)) {
		uint64_t sent = atomic_load_explicit(&lc->stats.msgs_out, memory_order_relaxed);

		if (cr__lcore_turn(lc) != 0) {
			lc->sent_last_turn =
				atomic_load_explicit(&lc->stats.msgs_out, memory_order_relaxed) != sent;
			if (lc->idle_since != 0)
				idle_ended(lc);
			continue;
		}
		if (lc->idle_since == 0)
			lc->idle_since = lc->now;
		cr__lcore_idle(lc);
	}
	/* The last turn may have left its submit to a next turn's poll (wakes among it). */
	lc->ops->submit(lc->be_own);
}
