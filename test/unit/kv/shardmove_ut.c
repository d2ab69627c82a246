/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * app/cr-kv/shardmove.c: the shard hand-off protocol on simulated lcores stepped on this
 * thread. Messages go through one FIFO queue per (sender, target), as the mailbox rings
 * do; the test chooses which queue delivers next, so a move meets parts in flight,
 * transactions holding locks, blocked waiters, a second retire and a target retiring in
 * turn, in orders picked on purpose and then in seeded random orders.
 *
 * What the protocol moves is modelled by a shard record: its owner (give clears it,
 * adopt sets it: two owners, or a part run where the shard is not, fail at once), the
 * last sequence number of each client's parts it admitted (a part lost, run twice or
 * out of order fails), a lock with a FIFO wait queue behind it, and a blocked waiter.
 * Clients issue parts as xshard.c does: run at once when the shard is here and nothing of
 * theirs is queued for it, else queued per shard and sent as one batch to the owner the
 * view names (or held while the shard moves).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shardmove.c"

#include "ut_cunit.h"

#define NL   3 /* lcores 0 (main), 1, 2; shard i's home is lcore i */
#define NC   6 /* clients: client c lives on lcore c % NL */
#define QMAX 4096

/* ---- stubs of the runtime ---- */

static unsigned cur = 0;
unsigned
cr_lcore_id(void)
{
	return cur;
}
_Thread_local struct cr__outbox *cr__send_out;

struct msg {
	cr_msg_fn fn;
	void *arg;
};
static struct msg mq[NL][NL][QMAX]; /* [from][to] */
static unsigned mq_head[NL][NL], mq_n[NL][NL];
static bool online[NL], closed[NL]; /* closed: mailbox refuses (gone) */
static bool full[NL];		    /* the target's mailbox refuses with -EAGAIN */

int
cr__send(unsigned to, cr_msg_fn fn, void *arg)
{
	if (to >= NL || !online[to] || closed[to])
		return -ESHUTDOWN;
	if (full[to])
		return -EAGAIN;
	CU_ASSERT_FATAL(mq_n[cur][to] < QMAX);
	mq[cur][to][(mq_head[cur][to] + mq_n[cur][to]++) % QMAX] = (struct msg){fn, arg};
	return 0;
}

static struct msg dq[NL][QMAX];
static unsigned dq_head[NL], dq_n[NL];
static bool defer_full[NL]; /* the lcore's defer queue refuses (-EAGAIN) */
int
cr_defer(cr_msg_fn fn, void *arg)
{
	if (defer_full[cur])
		return -EAGAIN;
	dq[cur][(dq_head[cur] + dq_n[cur]++) % QMAX] = (struct msg){fn, arg};
	return 0;
}
/* Timers: armed on the lcore that starts them, fired at its next turn (a millisecond is
 * a turn here). */
static struct {
	struct cr_timer *t;
	cr_timer_fn fn;
	void *arg;
	unsigned lcore;
	bool armed;
} tmr[4 * NL];
static unsigned ntmr;
static unsigned timer_starts; /* over the whole run: the random cases do meet timers */
void
cr_timer_init(struct cr_timer *t, cr_timer_fn fn, void *arg)
{
	unsigned i;

	for (i = 0; i < ntmr && tmr[i].t != t; i++)
		;
	if (i == ntmr) {
		CU_ASSERT_FATAL(ntmr < sizeof(tmr) / sizeof(tmr[0]));
		ntmr++;
	}
	tmr[i].t = t;
	tmr[i].fn = fn;
	tmr[i].arg = arg;
	tmr[i].armed = false;
}
void
cr_timer_start(struct cr_timer *t, uint64_t ns)
{
	unsigned i;

	(void)ns;
	for (i = 0; i < ntmr; i++)
		if (tmr[i].t == t) {
			tmr[i].armed = true;
			tmr[i].lcore = cur;
			timer_starts++;
			return;
		}
	CU_FAIL("a timer started before its init");
}
bool
cr_timer_stop(struct cr_timer *t)
{
	unsigned i;

	for (i = 0; i < ntmr; i++)
		if (tmr[i].t == t) {
			bool was = tmr[i].armed;

			tmr[i].armed = false;
			return was;
		}
	return false;
}
static void
timers_fire(unsigned l)
{
	unsigned i;

	for (i = 0; i < ntmr; i++)
		if (tmr[i].armed && tmr[i].lcore == l) {
			tmr[i].armed = false;
			cur = l;
			tmr[i].fn(tmr[i].t, tmr[i].arg);
		}
}

static int leases[NL]; /* held per lcore: it may not go while > 0 */
int
cr_lease_acquire(struct cr_lease *l)
{
	if (l->self != NULL)
		return -EALREADY;
	l->self = l;
	l->lcore = cur;
	leases[cur]++;
	return 0;
}
int
cr_lease_release(struct cr_lease *l)
{
	if (l->self != l)
		return -EALREADY;
	l->self = NULL;
	leases[l->lcore]--;
	return 0;
}
uint64_t
cr_clock_ns(void)
{
	return 0;
}
const char *
cr_strerror(int e)
{
	(void)e;
	return "stub";
}
void
cr_log_register(struct cr_log_component *c)
{
	(void)c;
}
void
cr_log_write(const struct cr_log_component *c, int level, const char *fmt, ...)
{
	(void)c, (void)level, (void)fmt;
}

/* ---- the model of what moves ---- */

enum { P_PLAIN, P_LOCK, P_UNLOCK, P_BLOCK, P_PUSH };

struct part {
	struct part *next;
	struct part *all_next; /* every part of the case, freed at the next reset() */
	unsigned client, shard, kind;
	uint64_t seq; /* per (client, shard), from 1 */
	bool answered;
	struct kv_fwd fwd; /* a notice's, while it is forwarded */
};

struct shard {
	int owner; /* -1 between give and adopt */
	uint64_t admitted[NC];
	uint64_t ran;
	int locked_by; /* client, or -1 */
	struct part *wq_head, **wq_tail;
	int waiter; /* a blocked client, or -1 */
	unsigned served;
};
static struct shard shards[NL];

static struct part *outq[NL][NL], **outq_tail[NL][NL]; /* [lcore][shard] */
static uint64_t next_seq[NC][NL];
static uint64_t issued, answered;
static struct part *all_parts;

static void
free_parts(void)
{
	while (all_parts != NULL) {
		struct part *p = all_parts;

		all_parts = p->all_next;
		free(p);
	}
}
static unsigned moves_done;

static void
shard_run(struct shard *sh, struct part *p)
{
	sh->ran++;
	switch (p->kind) {
	case P_LOCK:
		sh->locked_by = (int)p->client;
		break;
	case P_UNLOCK:
		CU_ASSERT_EQUAL(sh->locked_by, (int)p->client);
		sh->locked_by = -1;
		break;
	case P_BLOCK:
		CU_ASSERT_EQUAL(sh->waiter, -1);
		sh->waiter = (int)p->client;
		break;
	case P_PUSH:
		if (sh->waiter >= 0) {
			sh->served++;
			sh->waiter = -1;
		}
		break;
	}
	p->answered = true;
	answered++;
}

/* A part reaches its shard on lcore cur: admitted in each client's order, run now or
 * behind the lock (UNLOCK is the holder's: it never waits). */
static void
shard_admit(struct part *p)
{
	struct shard *sh = &shards[p->shard];

	CU_ASSERT_EQUAL_FATAL(sh->owner, (int)cur);		    /* I1 */
	CU_ASSERT_EQUAL_FATAL(p->seq, sh->admitted[p->client] + 1); /* I2 */
	sh->admitted[p->client] = p->seq;
	if (p->kind != P_UNLOCK && (sh->locked_by >= 0 || sh->wq_head != NULL) &&
	    sh->locked_by != (int)p->client) {
		p->next = NULL;
		*sh->wq_tail = p;
		sh->wq_tail = &p->next;
		return;
	}
	shard_run(sh, p);
	while (sh->locked_by < 0 && sh->wq_head != NULL) {
		struct part *w = sh->wq_head;

		sh->wq_head = w->next;
		if (sh->wq_head == NULL)
			sh->wq_tail = &sh->wq_head;
		shard_run(sh, w);
	}
}

static void
batch_recv(void *arg)
{
	struct part *p = arg, *next;

	for (; p != NULL; p = next) {
		next = p->next;
		shard_admit(p);
	}
}

/* A notice: a message for a shard outside its parts (a lock release, txlock.c's
 * release_recv(); a cancel, bwait.c's cancel_recv()), sent to the owner the sender's view
 * names. Run by the owner; forwarded by an lcore that does not own the shard (any more). */
static unsigned notices_dropped;
static void
notice_drop(void *arg)
{
	(void)arg;
	notices_dropped++;
}
static void
notice_recv(void *arg)
{
	struct part *p = arg;

	if (shards[p->shard].owner != (int)cur) {
		kv_move_forward(p->shard, &p->fwd, notice_recv, notice_drop, p);
		return;
	}
	p->next = NULL;
	shard_admit(p);
}

/* xshard.c's outq_send(), on lcore cur. */
static void
flush(unsigned s)
{
	struct part *head = outq[cur][s];
	unsigned to;

	if (head == NULL || kv_route(s, &to) != 0)
		return;
	if (to != cur && cr__send(to, batch_recv, head) != 0)
		return; /* full: the next flush tries again */
	outq[cur][s] = NULL;
	outq_tail[cur][s] = &outq[cur][s];
	if (to == cur)
		batch_recv(head);
}

void
kv__move_flush(unsigned s, unsigned to)
{
	(void)to;
	flush(s);
}

void
kv__move_give(unsigned s)
{
	CU_ASSERT_EQUAL_FATAL(shards[s].owner, (int)cur);
	shards[s].owner = -1;
}

void
kv__move_adopt(unsigned s)
{
	CU_ASSERT_EQUAL_FATAL(shards[s].owner, -1);
	shards[s].owner = (int)cur;
	moves_done++;
}

/* Client @p c (on its lcore) issues a part of @p kind for shard @p s. */
static struct part *
issue(unsigned c, unsigned s, unsigned kind)
{
	struct part *p = calloc(1, sizeof(*p));

	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	p->all_next = all_parts;
	all_parts = p;
	cur = c % NL;
	CU_ASSERT_FATAL(online[cur] && !closed[cur]);
	p->client = c;
	p->shard = s;
	p->kind = kind;
	p->seq = ++next_seq[c][s];
	issued++;
	if (kv_route_here(s) && outq[cur][s] == NULL) {
		shard_admit(p);
		return p;
	}
	*outq_tail[cur][s] = p;
	outq_tail[cur][s] = &p->next;
	flush(s);
	return p;
}

/* ---- stepping ---- */

/* Deliver the head of queue from -> to: @return false if it was empty. */
static bool
deliver(unsigned from, unsigned to)
{
	struct msg m;

	if (mq_n[from][to] == 0)
		return false;
	m = mq[from][to][mq_head[from][to]];
	mq_head[from][to] = (mq_head[from][to] + 1) % QMAX;
	mq_n[from][to]--;
	cur = to;
	m.fn(m.arg);
	return true;
}

static bool
run_deferred(unsigned l)
{
	struct msg m;

	if (dq_n[l] == 0)
		return false;
	m = dq[l][dq_head[l]];
	dq_head[l] = (dq_head[l] + 1) % QMAX;
	dq_n[l]--;
	cur = l;
	m.fn(m.arg);
	return true;
}

/* Everything this lcore may still do on its own: deferred tasks and queued parts. */
static void
lcore_turn(unsigned l)
{
	unsigned s, n = dq_n[l];

	/* One turn: what was deferred before it (a task deferring itself runs next turn). */
	while (n-- > 0)
		run_deferred(l);
	timers_fire(l);
	cur = l;
	for (s = 0; s < NL; s++)
		flush(s);
}

static bool
step_all(void)
{
	unsigned f, t;
	bool any = false;

	for (f = 0; f < NL; f++)
		for (t = 0; t < NL; t++)
			while (deliver(f, t))
				any = true;
	for (f = 0; f < NL; f++)
		if (online[f]) { /* a closed one too: it runs until it stops */
			any |= dq_n[f] != 0 || kv_move_busy(f);
			lcore_turn(f);
		}
	return any;
}

/* An lcore that retired goes once its lease is released, nothing of it is queued and it
 * is not busy (cr__lcore_done() with the app's lcore_busy): its mailbox closes, what it
 * accepted runs, and once that left nothing deferred and nothing to send, it stops. */
static void
maybe_offline(unsigned l)
{
	unsigned s, f;

	if (!online[l] || l == 0)
		return;
	if (!closed[l]) {
		if (leases[l] != 0 || kv_move_busy(l))
			return;
		for (s = 0; s < NL; s++)
			if (outq[l][s] != NULL)
				return;
		closed[l] = true;
	}
	for (f = 0; f < NL; f++)
		while (deliver(f, l))
			;
	cur = l;
	for (f = dq_n[l]; f > 0; f--)
		run_deferred(l);
	if (dq_n[l] != 0 || kv_move_busy(l))
		return; /* draining: it turns on */
	kv_move_lcore_stop(l);
	online[l] = false;
}

static bool retiring[NL];

static void
settle(void)
{
	unsigned i, l;

	for (i = 0; i < 1000; i++) {
		bool any = step_all();

		for (l = 0; l < NL; l++)
			if (retiring[l])
				maybe_offline(l);
		if (!any)
			return;
	}
	CU_FAIL("the protocol did not settle in 1000 rounds");
}

static void
retire(unsigned l)
{
	cur = l;
	retiring[l] = true;
	kv_move_retire(l);
}

static void
start(unsigned l)
{
	CU_ASSERT_FATAL(!online[l]);
	online[l] = true;
	closed[l] = false;
	retiring[l] = false;
	cur = l;
	kv_move_lcore_start(l, false);
}

static void
reset(void)
{
	unsigned l, s;
	unsigned home[NL] = {0, 1, 2};

	free_parts();

	memset(&mv, 0, sizeof(mv));
	memset(mv_lc, 0, sizeof(mv_lc));
	memset(mq_head, 0, sizeof(mq_head));
	memset(mq_n, 0, sizeof(mq_n));
	memset(dq_head, 0, sizeof(dq_head));
	memset(dq_n, 0, sizeof(dq_n));
	memset(leases, 0, sizeof(leases));
	memset(full, 0, sizeof(full));
	memset(defer_full, 0, sizeof(defer_full));
	ntmr = 0;
	notices_dropped = 0;
	memset(retiring, 0, sizeof(retiring));
	memset(next_seq, 0, sizeof(next_seq));
	issued = answered = 0;
	moves_done = 0;
	kv_move_init(NL, home, 0);
	for (s = 0; s < NL; s++) {
		memset(&shards[s], 0, sizeof(shards[s]));
		shards[s].owner = (int)s;
		shards[s].locked_by = -1;
		shards[s].waiter = -1;
		shards[s].wq_tail = &shards[s].wq_head;
	}
	for (l = 0; l < NL; l++) {
		online[l] = true;
		closed[l] = false;
		for (s = 0; s < NL; s++) {
			outq[l][s] = NULL;
			outq_tail[l][s] = &outq[l][s];
		}
		cur = l;
		kv_move_lcore_start(l, true);
	}
}

/* Every part issued was admitted, in order, and answered, and each shard has one owner
 * that is an lcore still running. */
static void
check_quiet(void)
{
	unsigned s, c;

	settle();
	CU_ASSERT_EQUAL(answered, issued);
	for (s = 0; s < NL; s++) {
		CU_ASSERT(shards[s].owner >= 0 && online[shards[s].owner]);
		for (c = 0; c < NC; c++)
			CU_ASSERT_EQUAL(shards[s].admitted[c], next_seq[c][s]);
	}
}

/* ---- cases ---- */

/* Parts from every lcore are in flight to shard 2 (queued in the rings) when lcore 2
 * retires: they run on lcore 2 first, the ones issued after the hold wait and run on its
 * successor, none twice, none out of order. */
static void
test_parts_in_flight(void)
{
	unsigned c, i;

	reset();
	for (i = 0; i < 5; i++)
		for (c = 0; c < NC; c++)
			issue(c, 2, P_PLAIN);
	retire(2);
	/* The mover's HOLDs go out; parts keep coming before and after each lcore sees its
	 * HOLD. */
	for (i = 0; i < 20; i++) {
		deliver(2, 0); /* DOWN */
		deliver(0, i % NL);
		for (c = 0; c < NC; c++)
			if (!closed[c % NL])
				issue(c, 2, P_PLAIN);
		deliver(i % NL, 2);
	}
	check_quiet();
	CU_ASSERT_FALSE(online[2]);
	CU_ASSERT_EQUAL(shards[2].owner, 0); /* home gone: the least loaded, the main one */
	CU_ASSERT_EQUAL(moves_done, 1);
	CU_ASSERT_EQUAL(kv_move_count(2, false), 1);
	CU_ASSERT_EQUAL(kv_move_count(0, true), 1);
}

/* A transaction holds shard 1's lock when lcore 1 retires: parts of other clients wait
 * behind it, the lock and its queue move with the shard, and the holder's UNLOCK (issued
 * after the move began, held, then sent to the new owner) releases them there. */
static void
test_lock_across_move(void)
{
	reset();
	issue(0, 1, P_LOCK); /* client 0 on lcore 0 */
	settle();
	issue(2, 1, P_PLAIN); /* client 2 on lcore 2: waits behind the lock */
	issue(5, 1, P_PLAIN); /* client 5 on lcore 2 */
	settle();
	CU_ASSERT_EQUAL(shards[1].locked_by, 0);
	CU_ASSERT_PTR_NOT_NULL(shards[1].wq_head);
	retire(1);
	deliver(1, 0);	       /* DOWN: the mover sends HOLDs */
	deliver(0, 0);	       /* lcore 0's HOLD: it is held now */
	issue(0, 1, P_UNLOCK); /* queued on lcore 0 */
	CU_ASSERT_PTR_NOT_NULL(outq[0][1]);
	check_quiet();
	CU_ASSERT_EQUAL(shards[1].locked_by, -1);
	CU_ASSERT_PTR_NULL(shards[1].wq_head);
	CU_ASSERT_NOT_EQUAL(shards[1].owner, 1);
}

/* A client blocked on shard 1 stays blocked across the move and is served by a push
 * that reaches the new owner. */
static void
test_blocked_waiter(void)
{
	reset();
	issue(1, 1, P_BLOCK); /* client 1, on lcore 1 itself */
	settle();
	CU_ASSERT_EQUAL(shards[1].waiter, 1);
	retire(1);
	settle();
	CU_ASSERT_EQUAL(shards[1].owner, 0);
	CU_ASSERT_EQUAL(shards[1].waiter, 1);
	issue(3, 1, P_PUSH); /* client 3 on lcore 0: the shard is its lcore's now */
	check_quiet();
	CU_ASSERT_EQUAL(shards[1].served, 1);
}

/* Lcores 1 and 2 retire at once (the second while the first's shard moves): the moves
 * run one after another, both shards end on lcore 0, both lcores go. */
static void
test_second_retire_races(void)
{
	unsigned c;

	reset();
	retire(1);
	deliver(1, 0); /* DOWN(1): shard 1's move starts */
	retire(2);     /* while it is under way */
	deliver(2, 0); /* DOWN(2): queued behind */
	for (c = 0; c < NC; c++)
		if (c % NL == 0)
			issue(c, 1, P_PLAIN), issue(c, 2, P_PLAIN);
	check_quiet();
	CU_ASSERT_FALSE(online[1]);
	CU_ASSERT_FALSE(online[2]);
	CU_ASSERT_EQUAL(shards[1].owner, 0);
	CU_ASSERT_EQUAL(shards[2].owner, 0);
}

/* Shard 2 is being handed back to lcore 2, which started again, when lcore 2 retires
 * once more: the move completes (lcore 2 adopts it while retiring), then the shard moves
 * on to an lcore that stays; lcore 2 goes only after that (its lease is held until the
 * mover's BYE). */
static void
test_target_retires(void)
{
	unsigned i;

	reset();
	retire(2);
	check_quiet();
	CU_ASSERT_EQUAL(shards[2].owner, 0);
	start(2);
	deliver(2, 0); /* UP(2): SYNC back, and the hand-back begins */
	CU_ASSERT_EQUAL(mv.moving, 2);
	CU_ASSERT_EQUAL(mv.to, 2);
	deliver(0, 1); /* lcore 1's HOLD */
	deliver(0, 2); /* SYNC, HOLD on lcore 2 */
	retire(2);     /* the target retires meanwhile */
	for (i = 0; i < 10; i++)
		issue(0, 2, P_PLAIN), issue(1, 2, P_PLAIN), issue(2, 2, P_PLAIN);
	check_quiet();
	CU_ASSERT_FALSE(online[2]);
	CU_ASSERT_NOT_EQUAL(shards[2].owner, 2);
	CU_ASSERT_EQUAL(kv_move_count(2, true), 1);  /* it did adopt it ... */
	CU_ASSERT_EQUAL(kv_move_count(2, false), 2); /* ... and gave it on */
}

/* Lcore 2 retires, then starts again: its shard comes back to it (hand back); parts
 * its new clients issue before it knows the routing (held until SYNC) run in order. */
static void
test_hand_back(void)
{
	unsigned i;

	reset();
	retire(2);
	check_quiet();
	CU_ASSERT_EQUAL(shards[2].owner, 0);
	start(2);
	issue(2, 2, P_PLAIN); /* before SYNC: held */
	issue(2, 0, P_PLAIN);
	CU_ASSERT_PTR_NOT_NULL(outq[2][2]);
	for (i = 0; i < 5; i++)
		issue(0, 2, P_PLAIN), issue(2, 2, P_PLAIN);
	check_quiet();
	CU_ASSERT_EQUAL(shards[2].owner, 2);
	CU_ASSERT_EQUAL(kv_move_count(2, true), 1);
	CU_ASSERT_EQUAL(kv_move_count(0, false), 1);
	/* Once back, its parts run at once on lcore 2 again. */
	cur = 2;
	CU_ASSERT_TRUE(kv_route_here(2));
}

/* A full mailbox refuses parts, markers and control messages for a while: they are
 * kept, in order, and go when it takes them again. */
static void
test_full_mailboxes(void)
{
	unsigned c, i;

	reset();
	for (c = 0; c < NC; c++)
		issue(c, 1, P_PLAIN);
	full[1] = true; /* lcore 1 takes nothing */
	for (c = 0; c < NC; c++)
		if (c % NL != 1)
			issue(c, 1, P_PLAIN);
	retire(1);
	for (i = 0; i < 20; i++) {
		step_all();
		if (i == 10)
			full[1] = false;
		for (c = 0; c < NC; c++)
			if (!closed[c % NL])
				issue(c, 1, P_PLAIN);
	}
	check_quiet();
	CU_ASSERT_EQUAL(shards[1].owner, 0);
}

/* Seeded random interleavings: clients issue plain parts and short transactions to
 * every shard while lcores 1 and 2 retire and start again, messages delivered in a random
 * order of queues. Exact counts: every part admitted once, in order; every shard ends at
 * home. */
static uint64_t rng_state;
static unsigned
rnd(unsigned n)
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (unsigned)((rng_state >> 33) % n);
}

/* A client's transaction: its lock request, and once granted (answered) its release. */
static struct part *tx_lock[NC];

static void
tx_end(unsigned c)
{
	if (tx_lock[c] != NULL && tx_lock[c]->answered) {
		issue(c, tx_lock[c]->shard, P_UNLOCK);
		tx_lock[c] = NULL;
	}
}

static void
random_run(uint64_t seed)
{
	unsigned i, s, c, l;
	bool busy;

	reset();
	memset(tx_lock, 0, sizeof(tx_lock));
	rng_state = seed;
	for (i = 0; i < 4000; i++) {
		unsigned r = rnd(100);

		if (r < 40) {
			c = rnd(NC);
			l = c % NL;
			if (!online[l] || closed[l] || retiring[l])
				continue;
			if (tx_lock[c] != NULL)
				tx_end(c); /* once granted: a client waits for its locks */
			else if (rnd(8) == 0)
				tx_lock[c] = issue(c, rnd(NL), P_LOCK);
			else
				issue(c, rnd(NL), P_PLAIN);
		} else if (r < 89) {
			deliver(rnd(NL), rnd(NL));
		} else if (r < 90) {
			/* a mailbox or a defer queue full for a while: control messages
			 * wait, some on timers */
			l = rnd(NL);
			if (rnd(2) == 0)
				defer_full[l] = !defer_full[l];
			else
				full[l] = !full[l];
		} else if (r < 95) {
			l = rnd(NL);
			if (online[l] && !closed[l])
				lcore_turn(l);
		} else {
			l = 1 + rnd(NL - 1);
			if (online[l] && !retiring[l]) {
				/* its clients' transactions end first (a boundary) */
				busy = false;
				for (c = 0; c < NC; c++)
					if (c % NL == l) {
						tx_end(c);
						busy |= tx_lock[c] != NULL;
					}
				if (!busy)
					retire(l);
			} else if (!online[l]) {
				start(l);
			} else {
				maybe_offline(l);
			}
		}
	}
	memset(defer_full, 0, sizeof(defer_full));
	memset(full, 0, sizeof(full));
	for (i = 0; i < 10; i++) {
		settle();
		for (c = 0; c < NC; c++)
			tx_end(c);
	}
	for (l = 1; l < NL; l++)
		if (!online[l])
			start(l);
	check_quiet();
	for (c = 0; c < NC; c++)
		CU_ASSERT_PTR_NULL(tx_lock[c]);
	for (s = 0; s < NL; s++) {
		CU_ASSERT_EQUAL(shards[s].owner, (int)s);
		CU_ASSERT_EQUAL(shards[s].locked_by, -1);
	}
}

static void
test_random_interleavings(void)
{
	uint64_t seed;
	unsigned total = 0;

	for (seed = 1; seed <= 200; seed++) {
		random_run(seed);
		total += moves_done;
		if (CU_get_number_of_failures() != 0) {
			fprintf(stderr, "failed with seed %llu\n", (unsigned long long)seed);
			return;
		}
	}
	CU_ASSERT(total > 200);	     /* the runs did move shards, many times */
	CU_ASSERT(timer_starts > 0); /* and met full defer queues */
	fprintf(stderr, "(%u moves, %u control-queue timers) ", total, timer_starts);
}

/* ---- what the review of issue 17 found ---- */

/* An lcore whose mailbox closed (its HOLD refused, so not counted) still runs a message
 * it accepted before the close: a late notify whose request is over cancels its watcher
 * (bpop.c's kv_bpop_notified() -> kv_bw_cancel()), routed by its view, which no move
 * reached, to the old owner after its GIVE. The old owner forwards it to the new one.
 * (Before: the old owner ran it, beside the new owner: I1 failed.) */
static struct part *late_cancel;
static void
late_notify(void *arg)
{
	unsigned to;

	(void)arg;
	/* what kv_bw_cancel() does: kv_route(), then cr_send(owner, cancel_recv) */
	CU_ASSERT_EQUAL_FATAL(kv_route(1, &to), 0);
	CU_ASSERT_EQUAL(to, 1); /* stale: shard 1 has moved */
	CU_ASSERT_EQUAL(cr__send(to, notice_recv, late_cancel), 0);
}

static struct part *
notice_new(unsigned c, unsigned s)
{
	struct part *p = calloc(1, sizeof(*p));

	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	p->all_next = all_parts;
	all_parts = p;
	p->client = c;
	p->shard = s;
	p->kind = P_PLAIN;
	p->seq = ++next_seq[c][s];
	issued++;
	return p;
}

static void
test_closed_lcore_sends_by_stale_view(void)
{
	int i;

	reset();
	retire(2);
	/* step until lcore 2 got its BYE, without letting it go */
	for (i = 0; i < 50 && leases[2] != 0; i++)
		step_all();
	CU_ASSERT_EQUAL_FATAL(leases[2], 0);
	CU_ASSERT_EQUAL(shards[2].owner, 0);
	/* lcore 2 accepted a notify from shard 1's owner just before its mailbox closed */
	cur = 1;
	cr__send(2, late_notify, NULL);
	closed[2] = true; /* draining: refuses from now, runs what it accepted */
	late_cancel = notice_new(2, 1);
	retire(1);
	/* the whole move of shard 1 (1 -> 0): lcore 2's HOLD is refused, not counted */
	for (i = 0; i < 10; i++) {
		deliver(1, 0), deliver(0, 0), deliver(0, 1), deliver(1, 1);
		run_deferred(0), run_deferred(1);
	}
	CU_ASSERT_EQUAL_FATAL(shards[1].owner, 0); /* moved */
	CU_ASSERT_EQUAL(mv.moving, -1);
	/* now lcore 2 runs what it accepted: it sends to lcore 1 by its view */
	deliver(1, 2);
	deliver(2, 1); /* lcore 1 does not own it: forwarded to lcore 0 */
	CU_ASSERT_EQUAL(shards[1].admitted[2], 0);
	check_quiet();
	CU_ASSERT_EQUAL(shards[1].admitted[2], late_cancel->seq);
	CU_ASSERT_TRUE(late_cancel->answered);
	CU_ASSERT_EQUAL(notices_dropped, 0);
	CU_ASSERT_FALSE(online[1]);
	CU_ASSERT_FALSE(online[2]);
}

/* A message an lcore sent before its HOLD is still unread in the old owner's ring when
 * the GIVE runs there, because it is not that lcore's MARK the mover waits for (its HOLD
 * was refused): the old owner forwards it, even while the shard moves again (it waits for
 * the move's end). */
static void
test_notice_unread_at_give(void)
{
	struct part *n;
	int i;

	reset();
	retire(2);
	for (i = 0; i < 50 && leases[2] != 0; i++)
		step_all();
	CU_ASSERT_EQUAL_FATAL(leases[2], 0);
	n = notice_new(2, 1);
	cur = 2;
	CU_ASSERT_EQUAL(cr__send(1, notice_recv, n), 0); /* unread in ring 2 -> 1 */
	closed[2] = true;
	retire(1);
	/* shard 1 moves to lcore 0, lcore 1 gets its RELEASE, then lcore 0's HOLD of a
	 * second move comes before the notice is read */
	while (deliver(1, 0) || deliver(0, 0) || deliver(0, 1) || deliver(1, 1) ||
	       run_deferred(0) || run_deferred(1))
		;
	CU_ASSERT_EQUAL_FATAL(shards[1].owner, 0);
	publish(1, 0, true); /* as if the mover had begun moving it on */
	deliver(2, 1);	     /* lcore 1 reads it: kept, the shard is moving */
	CU_ASSERT_TRUE(kv_move_busy(1));
	maybe_offline(1);
	CU_ASSERT_TRUE(online[1]); /* it stays while it has the notice */
	lcore_turn(1);
	CU_ASSERT_EQUAL(shards[1].admitted[2], 0);
	publish(1, 0, false); /* that move is over: the shard is (still) on lcore 0 */
	check_quiet();
	CU_ASSERT_TRUE(n->answered);
	CU_ASSERT_FALSE(online[1]);
}

/* A MARK a full mailbox refused waits on the 1 ms timer when the defer queue is full: an
 * lcore past its BYE does not go while it has it (kv_move_busy()), and sends it. (Before:
 * it went without it, timers are not waited for, and the mover waited for ever.) */
static void
test_mark_lost_on_timer(void)
{
	int i;

	reset();
	retire(2);
	for (i = 0; i < 50 && leases[2] != 0; i++)
		step_all();
	CU_ASSERT_EQUAL_FATAL(leases[2], 0);
	retire(1);
	deliver(1, 0); /* DOWN(1): HOLDs to 0, 1, 2 (2 still open: counted) */
	full[1] = true;
	defer_full[2] = true;
	deliver(0, 2); /* HOLD on lcore 2: its MARK to lcore 1 is refused, timer fallback */
	defer_full[2] = false;
	CU_ASSERT_TRUE(kv_move_busy(2));
	maybe_offline(2); /* lease 0, no parts queued, nothing deferred: but busy */
	CU_ASSERT_TRUE(online[2]);
	full[1] = false;
	settle();
	CU_ASSERT_EQUAL(mv.moving, -1);
	CU_ASSERT_EQUAL(shards[1].owner, 0);
	CU_ASSERT_EQUAL(leases[1], 0);
	CU_ASSERT_FALSE(online[1]);
	CU_ASSERT_FALSE(online[2]);
}

/* A graceful shutdown while shard 1's move is not given yet: the move is cancelled (the
 * shard stays on lcore 1, which keeps its lease until then), lcore 2's parts held for it
 * go to lcore 1 and are answered, and every lease goes. (Before: every lease went at
 * once, lcore 1's mailbox closed, lcore 2's MARK was refused and dropped, and its parts
 * stayed held for ever.) */
static void
test_shutdown_during_move(void)
{
	unsigned l;

	reset();
	retire(1);
	deliver(1, 0); /* DOWN(1): HOLDs out */
	for (l = 0; l < NL; l++) {
		cur = l;
		kv_move_shutdown(l);
	}
	if (leases[1] == 0)
		closed[1] = true; /* no hold, no client: its mailbox closes */
	while (deliver(0, 1) || deliver(1, 1))
		;
	deliver(0, 2);	      /* HOLD on lcore 2: its MARK to lcore 1 */
	issue(2, 1, P_PLAIN); /* a client of lcore 2: held */
	CU_ASSERT_PTR_NOT_NULL(outq[2][1]);
	settle();
	CU_ASSERT_PTR_NULL(outq[2][1]);
	CU_ASSERT_EQUAL(answered, issued);
	CU_ASSERT_EQUAL(shards[1].owner, 1); /* it stayed */
	for (l = 0; l < NL; l++)
		CU_ASSERT_EQUAL(leases[l], 0);
	CU_ASSERT_EQUAL(moves_done, 0);
}

/* A shutdown once shard 1's move was given: it goes on to its end; its owner and target
 * keep their leases until then, the others go at once; parts held meanwhile run on the
 * new owner. */
static void
test_shutdown_after_give(void)
{
	unsigned l, i;

	reset();
	retire(1);
	for (i = 0; i < 100 && !mv.giving; i++)
		deliver(1, 0), deliver(0, 0), deliver(0, 1), deliver(0, 2), deliver(2, 1),
		    deliver(1, 1);
	CU_ASSERT_TRUE_FATAL(mv.giving);
	issue(2, 1, P_PLAIN); /* held on lcore 2 */
	issue(0, 1, P_PLAIN); /* held on lcore 0 */
	cur = 0;
	kv_move_shutdown(0);
	for (l = 1; l < NL; l++) {
		cur = l;
		kv_move_shutdown(l);
	}
	while (deliver(0, 2))
		;
	CU_ASSERT_EQUAL(leases[2], 0); /* no part of the move: it may go */
	CU_ASSERT_EQUAL(leases[1], 1); /* the owner: until its GIVE ran */
	CU_ASSERT_EQUAL(leases[0], 1); /* the target */
	check_quiet();
	CU_ASSERT_EQUAL(shards[1].owner, 0);
	CU_ASSERT_EQUAL(moves_done, 1);
	for (l = 0; l < NL; l++)
		CU_ASSERT_EQUAL(leases[l], 0);
}

static const struct ut_case cases[] = {
    UT_CASE(test_parts_in_flight),
    UT_CASE(test_lock_across_move),
    UT_CASE(test_blocked_waiter),
    UT_CASE(test_second_retire_races),
    UT_CASE(test_target_retires),
    UT_CASE(test_hand_back),
    UT_CASE(test_full_mailboxes),
    UT_CASE(test_random_interleavings),
    UT_CASE(test_closed_lcore_sends_by_stale_view),
    UT_CASE(test_notice_unread_at_give),
    UT_CASE(test_mark_lost_on_timer),
    UT_CASE(test_shutdown_during_move),
    UT_CASE(test_shutdown_after_give),
};

static int
fini(void)
{
	free_parts();
	return 0;
}

UT_MAIN("kv_shardmove", cases, NULL, fini)
