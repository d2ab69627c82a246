/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shard hand-off: a shard moves from the lcore that owns it to another by message, as an
 * ownership transfer (nothing is copied: the new owner runs the same store, lock table,
 * wait queue, blocked waiters, WATCH versions, lazy-free queue and memory counter), and
 * every lcore's routing follows it without a part lost, run twice, reordered or refused.
 *
 * Parties. The *mover* runs on the main lcore (which never retires): it alone decides
 * moves, one at a time, and keeps the authoritative owner of each shard. Every lcore keeps
 * its own *view* per shard: the owner it sends to, and a state: NORMAL (send to the
 * owner, or run here if that is this lcore) or HELD (a move is under way: queue, send
 * nothing). The *owner* runs the shard's parts and duties (expiry tick, lazy frees, late
 * answers).
 *
 * One move of shard s from lcore A to lcore B:
 *   1. mover: publish "s moving", send HOLD(s, A) to every lcore whose mailbox is open
 *      (the expected markers are the HOLDs accepted);
 *   2. each lcore X on HOLD: view = HELD, owner A; send MARK(s) to A. From here X
 *      queues its parts for s (and refuses lock releases and cancels with -EAGAIN: their
 *      senders retry, as for a full mailbox). What X queued for s before and had not
 *      sent yet (a full mailbox) stays queued ahead of the rest and goes to B: it was
 *      never in the ring to A, so it is after everything A ran of X's;
 *   3. A on each MARK: tell the mover (MARKED); X's MARK follows every batch X sent A for
 *      s in the one FIFO ring from X to A, so when it runs, all of them have run (or
 *      wait in s's lock queue, which moves with s);
 *   4. mover, all markers seen: GIVE(s, B) to A; A stops the shard's timers and lease and
 *      sends ADOPT(s) to B (the pointer is implied: the shard's struct never moves);
 *   5. B on ADOPT: starts the shard's duties, tells the mover (ADOPTED);
 *   6. mover: owner = B, publish, send RELEASE(s, B) to every lcore with an open mailbox;
 *   7. each lcore on RELEASE: view = NORMAL, owner B; send its queued parts for s to B
 *      (run them, on B).
 *
 * Invariants (what a reviewer checks):
 *   I1 one owner: a shard's parts and duties run on exactly one lcore at a time; the
 *      owner changes only by GIVE (A stops touching it) then ADOPT (B starts), and the
 *      message between them orders A's last access before B's first.
 *   I2 per-client order: a client lives on one lcore X. X's parts for s before its
 *      HOLD went to A ahead of X's MARK (FIFO ring X->A), A handed over only after that
 *      MARK, and X's later parts wait (HELD) until RELEASE, which comes after ADOPT: each
 *      shard sees X's parts in the order X issued them, and none twice.
 *   I3 nothing refused: no part gets an error because of a move; a part is sent only to
 *      an owner, and an owner cannot go offline while it owns a shard or one is on its
 *      way to it (each lcore holds a lease until the mover says BYE, and the mover says
 *      it only to a retiring lcore that owns nothing and is no move's target, or in a
 *      shutdown, see below).
 *   I4 one move at a time (the mover's `moving`); a retiring lcore is never a target;
 *      a move that began goes on if its target starts retiring (it is then moved on).
 *   I5 an lcore that starts again knows nothing: every shard is HELD until the mover's
 *      SYNC, sent after its UP, after which it reads the published table (a shard shown
 *      moving stays HELD: its RELEASE comes); a HOLD it got before SYNC is answered (the
 *      HOLD names the owner), a RELEASE it got before is consistent with the table.
 *   I6 no lcore waits for another: every step is a message; a full mailbox keeps the
 *      message on the sender's control queue (in order), retried next turn.
 *   I7 the markers the mover waits for are exactly the HOLDs accepted: a HOLD a closed
 *      mailbox refused (an lcore offline, or gone past its last message) is not counted.
 *      Such an lcore has no client left, but it still runs what it accepted before the
 *      close, and that may send to a shard by its view, which no move reached (a late
 *      notify whose request is over cancels its watcher: kv_bpop_notified()); and a
 *      message any lcore sent before its HOLD may still be unread in the old owner's
 *      ring when it is not that lcore's MARK the mover waits for. So a receiver of a
 *      shard's messages that finds the shard is not its own any more (release_recv(),
 *      cancel_recv()) forwards the message to the owner the mover published
 *      (kv_move_forward(); once the move is over, if one is under way). Parts cannot be
 *      sent so: a cr_call() in flight keeps its lcore's mailbox open, so its HOLD is
 *      accepted and its MARK follows the parts. A marker, like every control message
 *      a full mailbox refused, is kept until sent: an lcore with one (or a message to
 *      forward) does not close (kv_move_busy(), the app's lcore_busy), the timer that
 *      retries it included.
 *
 * Shutdown. No move starts once it begins. A move not given yet is cancelled: the shard
 * stays with its owner, every lcore gets RELEASE(s, owner) (after its HOLD, on the same
 * ring: its held parts go to the owner). A move given goes on to its end. The mover then
 * says BYE to every lcore (its lease goes): to the owner and the target of a move only
 * once it is over, so neither closes mid-move and leaves parts held for ever. After
 * that, as in any graceful shutdown, an owner goes once its own leases are gone, and a
 * part sent to it later is answered with an error (xshard.c).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "cr_lease.h"
#include "cr_log.h"
#include "cr_reactor.h"
#include "shardmove.h"

CR_LOG_COMPONENT(move_log, "app.kv")

enum { RT_NORMAL = 0, RT_HELD };

/* Control messages a full mailbox refused, in order; at most a few per lcore per move. */
#define MV_QCAP (4u * CR_MAX_LCORES + 64u)

struct mv_msg {
	unsigned to;
	cr_msg_fn fn;
	void *arg;
};

/* Per lcore, touched by that lcore only (its view, its lease, its control queue). */
struct mv_lcore {
	unsigned owner[CR_MAX_LCORES]; /* by shard */
	uint8_t state[CR_MAX_LCORES];
	struct cr_lease lease; /* held from start to BYE: it may own shards */
	bool q_armed;
	struct cr_timer q_timer;
	unsigned q_head, q_n;
	struct mv_msg q[MV_QCAP];
	/* messages of stale views, to forward (kv_move_forward()), in order */
	struct kv_fwd *fwd_head, **fwd_tail;
	unsigned fwd_n;
	bool fwd_armed;
	struct cr_timer fwd_timer;
	/* written by this lcore, read by telemetry: relaxed */
	_Atomic uint64_t moved_out, moved_in;
};

static struct mv_lcore mv_lc[CR_MAX_LCORES];

#define PUB_MOVING 0x80000000u
/* The mover's table, for lcores that start again (SYNC): owner | PUB_MOVING. Written by
 * the mover with release, read at SYNC with acquire: SYNC's message orders it. */
static _Atomic uint32_t mv_pub[CR_MAX_LCORES];

/* The mover: on the main lcore only (written before the runtime starts, then there). */
static struct {
	unsigned nshards, main;
	unsigned home[CR_MAX_LCORES];  /* by shard */
	unsigned owner[CR_MAX_LCORES]; /* by shard: authoritative */
	bool up[CR_MAX_LCORES];	       /* by lcore: running, may own shards */
	bool down[CR_MAX_LCORES];      /* retiring: its shards go, then BYE */
	bool bye[CR_MAX_LCORES];       /* BYE sent */
	int moving;		       /* the shard moving, or -1 */
	unsigned from, to;
	unsigned expect, marks; /* HOLDs accepted, MARKs seen */
	uint64_t began_ns;	/* the move's start (its duration is logged) */
	bool sending, giving, stopping;
} mv = {.moving = -1};

#define PACK(s, l) ((void *)(uintptr_t)((uintptr_t)(s) | (uintptr_t)(l) << 16))
#define P_S(a)	   ((unsigned)((uintptr_t)(a)&0xffffu))
#define P_L(a)	   ((unsigned)((uintptr_t)(a) >> 16))

static struct mv_lcore *
here(void)
{
	return &mv_lc[cr_lcore_id()];
}

/* ---- the control queue ---- */

static void hold_recv(void *arg);
static void adopt_recv(void *arg);
static void adopted_recv(void *arg);
static void main_hold_refused(unsigned s);
static void q_task(void *arg);
static void fwd_flush(struct mv_lcore *m);
static void bye_recv(void *arg);

static void
q_timer(struct cr_timer *t, void *arg)
{
	(void)t;
	q_task(arg);
}

static void
q_arm(struct mv_lcore *m)
{
	if (m->q_armed)
		return;
	m->q_armed = true;
	if (cr_defer(q_task, m) != 0)
		cr_timer_start(&m->q_timer, 1000 * 1000ull);
}

/* A closed mailbox refused @p e: its target is offline (or past its last message). */
static void
refused(const struct mv_msg *e)
{
	if (e->fn == hold_recv) {
		main_hold_refused(P_S(e->arg)); /* it sends nothing for the shard: not counted */
	} else if (e->fn == adopt_recv) {
		/* The target is gone (only in a shutdown): the shard stays here. */
		kv__move_adopt(P_S(e->arg));
		atomic_fetch_add_explicit(&here()->moved_in, 1, memory_order_relaxed);
		e = &(struct mv_msg){mv.main, adopted_recv, PACK(P_S(e->arg), cr_lcore_id())};
		if (cr_send(e->to, e->fn, e->arg) != 0)
			CR_LOG(move_log, WARNING, "shard %u: the mover is gone", P_S(e->arg));
	}
	/* Anything else was for an lcore that is gone, and with it what it was about. */
}

/* Send in order: behind what a full mailbox refused before, if anything is. */
static void
ctl_send(unsigned to, cr_msg_fn fn, void *arg)
{
	struct mv_lcore *m = here();
	struct mv_msg e = {to, fn, arg};
	int rc = -EAGAIN;

	if (m->q_n == 0)
		rc = cr_send(to, fn, arg);
	if (rc == 0)
		return;
	if (rc != -EAGAIN) {
		refused(&e);
		return;
	}
	if (m->q_n == MV_QCAP) {
		/* Broken invariant: a move sends a bounded number of messages. */
		CR_LOG(move_log, ERR, "shard move: control queue full");
		abort();
	}
	m->q[(m->q_head + m->q_n++) % MV_QCAP] = e;
	q_arm(m);
}

static void
q_task(void *arg)
{
	struct mv_lcore *m = arg;

	m->q_armed = false;
	cr_timer_stop(&m->q_timer);
	while (m->q_n != 0) {
		struct mv_msg e = m->q[m->q_head];
		int rc = cr_send(e.to, e.fn, e.arg);

		if (rc == -EAGAIN) {
			q_arm(m);
			return;
		}
		m->q_head = (m->q_head + 1) % MV_QCAP;
		m->q_n--;
		if (rc != 0)
			refused(&e);
	}
}

/* ---- forwarding what stale views sent (I7) ---- */

static void
fwd_timer(struct cr_timer *t, void *arg)
{
	struct mv_lcore *m = arg;

	(void)t;
	m->fwd_armed = false;
	fwd_flush(m);
}

/* Send the forwarded messages on to their shards' published owners, in order; from one
 * whose shard is moving (or that a full mailbox refused) on, they wait, tried again in a
 * millisecond (and at each RELEASE): this lcore stays meanwhile (kv_move_busy()). */
static void
fwd_flush(struct mv_lcore *m)
{
	struct kv_fwd *f;
	unsigned n = m->fwd_n; /* those queued now: one forwarded again waits (the timer) */

	for (; n != 0 && (f = m->fwd_head) != NULL; n--) {
		/* acquire: pairs with the release in publish(); the owner it names adopted
		 * the shard before, and gives it only after the next move is published */
		uint32_t v = atomic_load_explicit(&mv_pub[f->shard], memory_order_acquire);
		unsigned to = v & ~PUB_MOVING;
		int rc = 0;

		if (v & PUB_MOVING)
			break;
		if (to != cr_lcore_id()) {
			rc = cr_send(to, f->fn, f->arg);
			if (rc == -EAGAIN)
				break;
		}
		m->fwd_head = f->next;
		if (m->fwd_head == NULL)
			m->fwd_tail = &m->fwd_head;
		m->fwd_n--;
		if (rc != 0)
			f->drop(f->arg); /* the owner is offline: a shutdown */
		else if (to == cr_lcore_id())
			f->fn(f->arg); /* it came back here: its receiver runs it now */
	}
	if (m->fwd_head != NULL && !m->fwd_armed) {
		m->fwd_armed = true;
		cr_timer_start(&m->fwd_timer, 1000 * 1000ull);
	}
}

void
kv_move_forward(unsigned s, struct kv_fwd *f, void (*fn)(void *arg), void (*drop)(void *arg),
		void *arg)
{
	struct mv_lcore *m = here();

	f->next = NULL;
	f->shard = s;
	f->fn = fn;
	f->drop = drop;
	f->arg = arg;
	*m->fwd_tail = f;
	m->fwd_tail = &f->next;
	m->fwd_n++;
	CR_LOG(move_log, DEBUG, "lcore %u forwards a message for shard %u it does not own",
	       cr_lcore_id(), s);
	fwd_flush(m);
}

/* ---- the mover (main lcore) ---- */

static void
publish(unsigned s, unsigned owner, bool moving)
{
	/* release: pairs with the acquire in sync_recv() */
	atomic_store_explicit(&mv_pub[s], owner | (moving ? PUB_MOVING : 0), memory_order_release);
}

static unsigned
owned_by(unsigned lcore)
{
	unsigned s, n = 0;

	for (s = 0; s < mv.nshards; s++)
		n += mv.owner[s] == lcore;
	return n;
}

/* Where shard @p s goes from a retiring owner: home if it runs, else the running lcore
 * that owns fewest (the main lcore is always one). */
static unsigned
target_for(unsigned s)
{
	unsigned i, best = mv.main, bestn = ~0u;

	if (mv.up[mv.home[s]])
		return mv.home[s];
	for (i = 0; i < mv.nshards; i++) {
		unsigned l = mv.home[i], n;

		if (!mv.up[l])
			continue;
		n = owned_by(l);
		if (n < bestn) {
			best = l;
			bestn = n;
		}
	}
	return best;
}

static void release_recv(void *arg);
static void give_recv(void *arg);
static void mark_recv(void *arg);

static void
main_check(void)
{
	if (mv.moving < 0 || mv.sending || mv.giving || mv.marks < mv.expect)
		return;
	mv.giving = true;
	ctl_send(mv.from, give_recv, PACK(mv.moving, mv.to));
}

static void
main_hold_refused(unsigned s)
{
	if (mv.moving != (int)s)
		return;
	mv.expect--;
	main_check();
}

static void
start_move(unsigned s, unsigned to)
{
	unsigned i;

	mv.moving = (int)s;
	mv.from = mv.owner[s];
	mv.to = to;
	mv.marks = mv.expect = 0;
	mv.giving = false;
	CR_LOG(move_log, INFO, "shard %u moves from lcore %u to lcore %u", s, mv.from, to);
	mv.began_ns = cr_clock_ns();
	publish(s, mv.from, true);
	mv.sending = true;
	for (i = 0; i < mv.nshards; i++) {
		mv.expect++; /* taken back if refused */
		ctl_send(mv.home[i], hold_recv, PACK(s, mv.from));
	}
	mv.sending = false;
	main_check();
}

/* A shutdown: every lcore's lease may go (this one's at once), but the owner's and the
 * target's of a move under way, until it is over. */
static void
bye_all(void)
{
	unsigned i;

	for (i = 0; i < mv.nshards; i++) {
		unsigned l = mv.home[i];

		if (mv.bye[l])
			continue; /* offline, or told (it may start again: its UP tells us) */
		if (mv.moving >= 0 && (l == mv.from || l == mv.to))
			continue;
		mv.bye[l] = true;
		if (l == cr_lcore_id())
			bye_recv(NULL);
		else
			ctl_send(l, bye_recv, PACK(0, l));
	}
}

static void
schedule(void)
{
	unsigned s, i;

	if (mv.stopping) {
		bye_all();
		return;
	}
	if (mv.moving >= 0)
		return;
	for (s = 0; s < mv.nshards; s++)
		if (mv.down[mv.owner[s]]) {
			start_move(s, target_for(s));
			return;
		}
	for (s = 0; s < mv.nshards; s++)
		if (mv.owner[s] != mv.home[s] && mv.up[mv.home[s]]) {
			start_move(s, mv.home[s]); /* hand back */
			return;
		}
	for (i = 0; i < mv.nshards; i++) {
		unsigned l = mv.home[i];

		if (mv.down[l] && !mv.bye[l] && owned_by(l) == 0) {
			mv.bye[l] = true;
			CR_LOG(move_log, DEBUG, "lcore %u owns no shard: it may go", l);
			ctl_send(l, bye_recv, PACK(0, l));
		}
	}
}

static void
marked_recv(void *arg)
{
	if (mv.stopping && mv.moving != (int)P_S(arg))
		return; /* a marker of a move the shutdown cancelled */
	if (mv.moving != (int)P_S(arg) || mv.giving) {
		CR_LOG(move_log, ERR, "shard %u: a marker out of its move", P_S(arg));
		abort(); /* broken invariant I7 */
	}
	mv.marks++;
	main_check();
}

static void
adopted_recv(void *arg)
{
	unsigned s = P_S(arg), l = P_L(arg), i;

	mv.owner[s] = l;
	publish(s, l, false);
	CR_LOG(move_log, INFO, "shard %u is on lcore %u (moved in %.3f ms)", s, l,
	       (double)(cr_clock_ns() - mv.began_ns) / 1e6);
	mv.moving = -1;
	mv.giving = false;
	for (i = 0; i < mv.nshards; i++)
		ctl_send(mv.home[i], release_recv, PACK(s, l));
	schedule();
}

static void sync_recv(void *arg);

static void
up_recv(void *arg)
{
	unsigned l = P_L(arg);

	mv.up[l] = true;
	mv.down[l] = false;
	mv.bye[l] = false;
	ctl_send(l, sync_recv, PACK(0, l));
	schedule();
}

static void
down_recv(void *arg)
{
	unsigned l = P_L(arg);

	mv.down[l] = true;
	mv.up[l] = false;
	schedule();
}

static void
stop_recv(void *arg)
{
	unsigned s, i;

	(void)arg;
	mv.stopping = true;
	if (mv.moving >= 0 && !mv.giving) {
		/* Not given yet: the shard stays; the HOLDs sent are each followed by this
		 * RELEASE on the same ring, and their markers are ignored. */
		s = (unsigned)mv.moving;
		CR_LOG(move_log, INFO, "shard %u stays on lcore %u: the shutdown cancels its move",
		       s, mv.from);
		mv.moving = -1;
		publish(s, mv.from, false);
		for (i = 0; i < mv.nshards; i++)
			ctl_send(mv.home[i], release_recv, PACK(s, mv.from));
	}
	schedule(); /* BYE to all, or once the move given is over */
}

/* ---- every lcore ---- */

static void
hold_recv(void *arg)
{
	struct mv_lcore *m = here();
	unsigned s = P_S(arg), from = P_L(arg);

	/* Whatever this lcore sent for s is in the ring to `from` ahead of the marker; what it
	 * still queues for s (its out-queue, releases, cancels) waits for RELEASE (I2). */
	m->owner[s] = from;
	m->state[s] = RT_HELD;
	ctl_send(from, mark_recv, PACK(s, cr_lcore_id()));
}

/* On the owner: every part lcore P_L(arg) sent for the shard before its HOLD has run (or
 * waits in the shard's lock queue, which moves with it). */
static void
mark_recv(void *arg)
{
	ctl_send(mv.main, marked_recv, arg);
}

/* On the owner: hand the shard to P_L(arg). */
static void
give_recv(void *arg)
{
	unsigned s = P_S(arg), to = P_L(arg);

	kv__move_give(s);
	atomic_fetch_add_explicit(&here()->moved_out, 1, memory_order_relaxed);
	ctl_send(to, adopt_recv, PACK(s, cr_lcore_id()));
}

static void
adopt_recv(void *arg)
{
	unsigned s = P_S(arg);

	kv__move_adopt(s);
	atomic_fetch_add_explicit(&here()->moved_in, 1, memory_order_relaxed);
	ctl_send(mv.main, adopted_recv, PACK(s, cr_lcore_id()));
}

static void
release_recv(void *arg)
{
	struct mv_lcore *m = here();
	unsigned s = P_S(arg), to = P_L(arg);

	m->owner[s] = to;
	m->state[s] = RT_NORMAL;
	kv__move_flush(s, to);
	fwd_flush(m);
}

static void
sync_recv(void *arg)
{
	struct mv_lcore *m = here();
	unsigned s;

	(void)arg;
	for (s = 0; s < mv.nshards; s++) {
		/* acquire: pairs with the release in publish() */
		uint32_t v = atomic_load_explicit(&mv_pub[s], memory_order_acquire);

		m->owner[s] = v & ~PUB_MOVING;
		if (v & PUB_MOVING) {
			m->state[s] =
			    RT_HELD; /* its HOLD (if it is not here yet) and RELEASE come */
			continue;
		}
		m->state[s] = RT_NORMAL;
		kv__move_flush(s, m->owner[s]);
	}
	fwd_flush(m);
}

static void
bye_recv(void *arg)
{
	(void)arg;
	CR_LOG(move_log, DEBUG, "lcore %u lets its shard lease go", cr_lcore_id());
	(void)cr_lease_release(&here()->lease); /* nothing is ours or on its way: we may go */
}

/* ---- routing ---- */

int
kv_route(unsigned s, unsigned *lcore)
{
	const struct mv_lcore *m = here();

	if (m->state[s] == RT_HELD)
		return -EAGAIN;
	*lcore = m->owner[s];
	return 0;
}

bool
kv_route_here(unsigned s)
{
	const struct mv_lcore *m = here();

	return m->state[s] == RT_NORMAL && m->owner[s] == cr_lcore_id();
}

/* ---- lifecycle ---- */

void
kv_move_init(unsigned nshards, const unsigned *home, unsigned main)
{
	unsigned s, l;

	mv.nshards = nshards;
	mv.main = main;
	mv.moving = -1;
	for (s = 0; s < nshards; s++) {
		mv.home[s] = mv.owner[s] = home[s];
		mv.up[home[s]] = true;
		publish(s, home[s], false);
	}
	for (l = 0; l < CR_MAX_LCORES; l++)
		for (s = 0; s < nshards; s++) {
			mv_lc[l].owner[s] = home[s];
			mv_lc[l].state[s] = RT_NORMAL;
		}
}

void
kv_move_lcore_start(unsigned lcore, bool first)
{
	struct mv_lcore *m = &mv_lc[lcore];
	unsigned s;
	int rc;

	m->q_armed = false;
	m->q_head = m->q_n = 0;
	cr_timer_init(&m->q_timer, q_timer, m);
	m->fwd_head = NULL;
	m->fwd_tail = &m->fwd_head;
	m->fwd_n = 0;
	m->fwd_armed = false;
	cr_timer_init(&m->fwd_timer, fwd_timer, m);
	/* At init, before its first turn: admission is open. Released by BYE (or a
	 * shutdown), so this lcore cannot go while it may own a shard (I3). */
	rc = cr_lease_acquire(&m->lease);
	if (rc != 0)
		CR_LOG(move_log, ERR, "lcore %u: no lease for its shards: %s", lcore,
		       cr_strerror(rc));
	if (first)
		return;
	for (s = 0; s < mv.nshards; s++)
		m->state[s] = RT_HELD; /* until SYNC (I5) */
	ctl_send(mv.main, up_recv, PACK(0, lcore));
}

void
kv_move_retire(unsigned lcore)
{
	ctl_send(mv.main, down_recv, PACK(0, lcore));
}

void
kv_move_shutdown(unsigned lcore)
{
	/* The lease goes at the mover's BYE: not mid-move (see "Shutdown" above). */
	if (lcore == mv.main)
		stop_recv(NULL);
}

bool
kv_move_busy(unsigned lcore)
{
	const struct mv_lcore *m = &mv_lc[lcore];

	return m->q_n != 0 || m->fwd_head != NULL;
}

void
kv_move_lcore_stop(unsigned lcore)
{
	struct mv_lcore *m = &mv_lc[lcore];
	unsigned n = 0;

	cr_timer_stop(&m->q_timer);
	cr_timer_stop(&m->fwd_timer);
	m->fwd_armed = false;
	while (m->fwd_head != NULL) {
		struct kv_fwd *f = m->fwd_head;

		m->fwd_head = f->next;
		f->drop(f->arg);
		n++;
	}
	m->fwd_tail = &m->fwd_head;
	m->fwd_n = 0;
	/* Only a forced shutdown stops an lcore with these (kv_move_busy()). */
	if (m->q_n != 0 || n != 0)
		CR_LOG(move_log, WARNING,
		       "lcore %u stops with %u shard-move messages unsent, %u unforwarded", lcore,
		       m->q_n, n);
	m->q_n = 0;
	(void)cr_lease_release(&m->lease);
}

uint64_t
kv_move_count(unsigned lcore, bool in)
{
	if (lcore >= CR_MAX_LCORES)
		return 0;
	/* relaxed: a statistic; pairs with the relaxed adds in give_recv(), adopt_recv() */
	return atomic_load_explicit(in ? &mv_lc[lcore].moved_in : &mv_lc[lcore].moved_out,
				    memory_order_relaxed);
}
