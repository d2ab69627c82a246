/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * app/cr-kv/txlock.c: the whole-shard lock against key locks, plain parts and the FIFO
 * wait queue, and WATCH's versions, on one shard stepped on this thread. What lies below
 * (late answers, blocked pops, leases, messages) is stubbed: a late answer is recorded.
 */
#include <stdbool.h>
#include <stdlib.h>

/* Fault injection: txlock.c's own malloc() fails while ut_malloc_fail is set. */
static bool ut_malloc_fail;
static void *
ut_malloc(size_t n)
{
	return ut_malloc_fail ? NULL : malloc(n);
}
#define malloc(n) ut_malloc(n)
#include "txlock.c"
#undef malloc

#include "ut_cunit.h"

/* ---- stubs of what txlock.c calls below it ---- */

struct kv_global kv;
static struct kv_shard shard;

struct late {
	struct kpart *token;
	void *hold;
	char reply[64];
};
static struct late lates[32];
static unsigned nlates;

int
kv_tx_late(struct kv_shard *sh, unsigned to, struct kpart *token, uint64_t epoch, void *hold,
	   const char *reply, size_t len)
{
	struct late *l = &lates[nlates++];

	(void)sh, (void)to, (void)epoch;
	l->token = token;
	l->hold = hold;
	snprintf(l->reply, sizeof(l->reply), "%.*s", (int)len, reply);
	return 0;
}
int
kv_tx_late_ran(struct kv_shard *sh, unsigned to, struct kpart *token, uint64_t epoch, void *hold,
	       const char *reply, size_t len, uint64_t run_ns)
{
	(void)run_ns;
	return kv_tx_late(sh, to, token, epoch, hold, reply, len);
}
uint64_t cr_clock_ns(void) { return 0; }
void kv_tx_late_init(struct kv_shard *sh) { (void)sh; }
void kv_tx_late_flush(struct kv_shard *sh) { (void)sh; }
void kv_tx_late_fini(struct kv_shard *sh) { (void)sh; }
void kv_tx_late_give(struct kv_shard *sh) { (void)sh; }
void kv_tx_late_adopt(struct kv_shard *sh) { (void)sh; }
/* Routing (shardmove.c): every shard is the played lcore's, not moving unless held. */
static unsigned cur_lcore; /* the lcore the test plays */
static bool route_held;	   /* every shard is moving: held */
int
kv_route(unsigned s, unsigned *lcore)
{
	if (route_held)
		return -EAGAIN;
	*lcore = kv.shard_lcore[s];
	return 0;
}
bool kv_route_here(unsigned s) { return kv.shard_lcore[s] == cur_lcore; }
/* A message for a shard this lcore does not own goes on (shardmove.c): kept here. */
static struct kv_fwd *fwd_kept;
void
kv_move_forward(unsigned s, struct kv_fwd *f, void (*fn)(void *arg), void (*drop)(void *arg),
		void *arg)
{
	CU_ASSERT_PTR_NULL(fwd_kept);
	*f = (struct kv_fwd){.shard = s, .fn = fn, .drop = drop, .arg = arg};
	fwd_kept = f;
}
bool kv_bw_pending(const struct kv_shard *sh) { (void)sh; return false; }
void kv_bw_serve(struct kv_shard *sh) { (void)sh; }
/* PUBLISH numbers: the part about to run's (kv_ps_tag()), taken by fn_pub. */
static uint32_t tag_from;
static uint64_t tag_seq;
void kv_ps_tag(uint32_t from, uint64_t seq) { tag_from = from, tag_seq = seq; }
void cmd_bw_watch(struct kv_ctx *x) { (void)x; }
int cr_lease_acquire(struct cr_lease *l) { (void)l; return 0; }
int cr_lease_release(struct cr_lease *l) { (void)l; return 0; }
unsigned cr_lcore_id(void) { return cur_lcore; }
const char *cr_strerror(int e) { (void)e; return "stub"; }
/* Messages: cr__send answers send_rc; an accepted one is kept for the test to deliver. */
static int send_rc = -1;
static struct {
	unsigned lc;
	cr_msg_fn fn;
	void *arg;
} sent[8];
static unsigned nsent;
int
cr__send(unsigned lc, cr_msg_fn fn, void *arg)
{
	if (send_rc != 0)
		return send_rc;
	sent[nsent].lc = lc;
	sent[nsent].fn = fn;
	sent[nsent++].arg = arg;
	return 0;
}
/* Deferred tasks and timers: kept, run when the test says. */
static cr_msg_fn deferred_fn;
static void *deferred_arg;
static unsigned ndeferred, ntimers;
int
cr_defer(cr_msg_fn fn, void *arg)
{
	deferred_fn = fn;
	deferred_arg = arg;
	ndeferred++;
	return 0;
}
void cr_timer_init(struct cr_timer *t, cr_timer_fn fn, void *arg) { (void)t, (void)fn, (void)arg; }
void cr_timer_start(struct cr_timer *t, uint64_t ns) { (void)t, (void)ns; ntimers++; }
bool cr_timer_stop(struct cr_timer *t) { (void)t; return false; }
_Thread_local struct cr__outbox *cr__send_out;
int64_t kv_now_ms(void) { return 1000; }
unsigned key_shard_h(const char *p, size_t len, uint64_t h) { (void)p, (void)len, (void)h; return 0; }
struct kv_entry *kv_peek(struct kv_store *s, const char *k, size_t l, uint64_t h, int64_t now)
{
	(void)s, (void)k, (void)l, (void)h, (void)now;
	return NULL;
}
void kv_store_watch(struct kv_store *s, uint32_t *v, uint32_t m) { (void)s, (void)v, (void)m; }
void
kv_store_pin(struct kv_store *s, bool (*fn)(void *, const char *, size_t), void *arg)
{
	(void)s, (void)fn, (void)arg;
}
uint64_t
kv_hash(const void *key, size_t len)
{
	const unsigned char *p = key;
	uint64_t h = 1469598103934665603ull;

	while (len-- > 0)
		h = (h ^ *p++) * 1099511628211ull;
	return h;
}
int
kv_cmd_keys(const struct kv_cmd *cmd, const struct kv_arg *argv, uint32_t argc, uint32_t *idx,
	    uint32_t max)
{
	(void)cmd, (void)argv, (void)max;
	idx[0] = 1;
	return argc > 1 ? 1 : 0;
}
void cr_log_register(struct cr_log_component *c) { (void)c; }
void
cr_log_write(const struct cr_log_component *c, int level, const char *fmt, ...)
{
	(void)c, (void)level, (void)fmt;
}

/* ---- parts ---- */

/* The origin releases the hold of lock request @p t, with the message made with it. */
#define KV_TX_RELEASE(sh, t) kv_tx_release((sh), (t)->lock.hold, (t)->lock.hold_epoch, &(t)->lock.rel)

static const struct kv_cmd set_cmd = {.name = "set", .flags = KV_WRITE, .route = KV_ROUTE_KEY1,
				      .first_key = 1, .last_key = 1, .step = 1};
static const struct kv_cmd get_cmd = {.name = "get", .flags = KV_READONLY, .route = KV_ROUTE_KEY1,
				      .first_key = 1, .last_key = 1, .step = 1};

static unsigned ran; /* commands run, in order: their tags */
static char order[32];

static void
fn_tag(struct kv_ctx *x)
{
	order[ran++] = x->argv[2].p[0];
	rb_int(x->out, 1);
}

struct tpart {
	struct kreq kr;
	struct kpart p;
	struct kv_arg argv[3];
	struct kv_txlock lock;
	struct kv_arg key;
	uint8_t excl;
};

/* A plain part: @p cmd on @p key, tagged @p tag. */
static void
plain(struct tpart *t, const struct kv_cmd *cmd, const char *key, const char *tag)
{
	memset(t, 0, sizeof(*t));
	t->kr.cmd = cmd;
	t->argv[0] = (struct kv_arg){cmd->name, strlen(cmd->name)};
	t->argv[1] = (struct kv_arg){key, strlen(key)};
	t->argv[2] = (struct kv_arg){tag, strlen(tag)};
	t->p.kr = &t->kr;
	t->p.fn = fn_tag;
	t->p.argc = 3;
	t->p.argv = t->argv;
	t->p.kind = KP_PLAIN;
	rb_init(&t->p.out, t->p.inl, sizeof(t->p.inl));
}

/* A lock request for the whole shard (@p whole) or for @p key (exclusively if @p excl). */
static void
lockreq(struct tpart *t, uint8_t whole, const char *key, bool excl, const char *tag)
{
	plain(t, &get_cmd, key != NULL ? key : "-", tag);
	t->p.kind = KP_TX_LOCK;
	t->p.lock = &t->lock;
	t->lock.whole = whole;
	if (key != NULL) {
		t->key = t->argv[1];
		t->excl = excl;
		t->lock.nkeys = 1;
		t->lock.keys = &t->key;
		t->lock.excl = &t->excl;
	}
}

static int
setup(void)
{
	kv.nshards = 1;
	kv.shards[0] = &shard;
	memset(&shard, 0, sizeof(shard));
	kv_mem_bind(&shard.mem);
	kv_tx_origin_init(&shard);
	return kv_tx_shard_init(&shard) == 0 ? 0 : -1;
}

static void
reset(void)
{
	ran = 0;
	nlates = 0;
	memset(order, 0, sizeof(order));
}

/* A shared whole-shard lock: reads run beside it, a write to any key waits in the queue,
 * and so does everything after it (FIFO); its release lets them run in order. */
static void
test_whole_shared(void)
{
	struct tpart w, r1, set, r2, w2;

	reset();
	lockreq(&w, KV_WHOLE_SHARED, NULL, false, "K");
	CU_ASSERT_TRUE(kv_tx_clear(&shard));
	CU_ASSERT_TRUE(kv_tx_run_part(&shard, &w.p));
	CU_ASSERT_PTR_NOT_NULL_FATAL(w.lock.hold);
	CU_ASSERT_FALSE(kv_tx_clear(&shard)); /* the fast path's test sees it */
	CU_ASSERT_TRUE(kv_tx_key_locked(&shard, "anykey", 6));

	plain(&r1, &get_cmd, "a", "1");
	CU_ASSERT_TRUE(kv_tx_run_part(&shard, &r1.p)); /* a read runs */
	plain(&set, &set_cmd, "a", "2");
	CU_ASSERT_FALSE(kv_tx_run_part(&shard, &set.p)); /* a write waits */
	CU_ASSERT(set.p.state & KP_PARKED);
	plain(&r2, &get_cmd, "b", "3");
	CU_ASSERT_FALSE(kv_tx_run_part(&shard, &r2.p)); /* behind it: FIFO */
	lockreq(&w2, KV_WHOLE_SHARED, NULL, false, "L");
	CU_ASSERT_FALSE(kv_tx_run_part(&shard, &w2.p)); /* another KEYS: behind them too */
	CU_ASSERT_STRING_EQUAL(order, "K1");

	kv_tx_release_here(&shard, w.lock.hold);
	CU_ASSERT_STRING_EQUAL(order, "K123L");
	CU_ASSERT_EQUAL_FATAL(nlates, 3);
	CU_ASSERT_PTR_EQUAL(lates[0].token, &set.p);
	CU_ASSERT_PTR_EQUAL(lates[1].token, &r2.p);
	CU_ASSERT_PTR_EQUAL(lates[2].token, &w2.p);
	CU_ASSERT_PTR_NOT_NULL_FATAL(lates[2].hold); /* the second whole lock is held now */
	CU_ASSERT_EQUAL(shard.tx.whole_shared, 1);
	kv_tx_release_here(&shard, lates[2].hold);
	CU_ASSERT_TRUE(kv_tx_clear(&shard));
	CU_ASSERT_EQUAL(shard.tx.whole_shared, 0);
	CU_ASSERT_EQUAL(shard.tx.held, 0);
}

/* Exclusive key locks and a whole-shard lock wait for each other, in both orders. */
static void
test_whole_vs_keys(void)
{
	struct tpart k, w, k2, r;

	reset();
	lockreq(&k, 0, "x", true, "X");
	CU_ASSERT_TRUE(kv_tx_run_part(&shard, &k.p));
	lockreq(&w, KV_WHOLE_SHARED, NULL, false, "K");
	CU_ASSERT_FALSE(kv_tx_run_part(&shard, &w.p)); /* a KEYS waits for the MSET */
	kv_tx_release_here(&shard, k.lock.hold);
	CU_ASSERT_EQUAL_FATAL(nlates, 1);
	CU_ASSERT_STRING_EQUAL(order, "XK");
	/* Held whole and shared: a shared key lock is granted, an exclusive one waits. */
	lockreq(&r, 0, "y", false, "R");
	CU_ASSERT_TRUE(kv_tx_run_part(&shard, &r.p));
	lockreq(&k2, 0, "z", true, "Z");
	CU_ASSERT_FALSE(kv_tx_run_part(&shard, &k2.p));
	kv_tx_release_here(&shard, r.lock.hold);
	CU_ASSERT_EQUAL(nlates, 1); /* still behind the whole lock */
	kv_tx_release_here(&shard, lates[0].hold);
	CU_ASSERT_EQUAL_FATAL(nlates, 2);
	CU_ASSERT_STRING_EQUAL(order, "XKRZ");
	kv_tx_release_here(&shard, lates[1].hold);
	CU_ASSERT_TRUE(kv_tx_clear(&shard));
}

/* An exclusive whole-shard lock (FLUSHALL) waits for any lock, and holds off reads. */
static void
test_whole_exclusive(void)
{
	struct tpart r, f, g;
	uint64_t gen;

	reset();
	lockreq(&r, 0, "y", false, "R");
	CU_ASSERT_TRUE(kv_tx_run_part(&shard, &r.p));
	lockreq(&f, KV_WHOLE_EXCL, NULL, true, "F");
	CU_ASSERT_FALSE(kv_tx_run_part(&shard, &f.p)); /* even a shared key lock is in the way */
	kv_tx_release_here(&shard, r.lock.hold);
	CU_ASSERT_EQUAL_FATAL(nlates, 1);
	CU_ASSERT_EQUAL(shard.tx.whole_excl, 1);
	plain(&g, &get_cmd, "y", "G");
	CU_ASSERT_FALSE(kv_tx_run_part(&shard, &g.p)); /* no read beside a flush */
	gen = shard.tx.wgen;
	kv_tx_release_here(&shard, lates[0].hold);
	CU_ASSERT_EQUAL(shard.tx.wgen, gen + 1); /* WATCH: the whole shard may have changed */
	CU_ASSERT_STRING_EQUAL(order, "RFG");
	CU_ASSERT_TRUE(kv_tx_clear(&shard));
}

/* WATCH's versions: a write run as a part bumps its key's slot, and only its slot; the
 * release of an exclusive key lock bumps that key's. */
static void
test_versions(void)
{
	struct tpart s, k;
	uint32_t a = (uint32_t)(kv_hash("a", 1) & (KV_WVER_SLOTS - 1));
	uint32_t b = (uint32_t)(kv_hash("b", 1) & (KV_WVER_SLOTS - 1));
	uint32_t va = shard.tx.wver[a], vb = shard.tx.wver[b];

	reset();
	CU_ASSERT_NOT_EQUAL_FATAL(a, b);
	plain(&s, &set_cmd, "a", "S");
	CU_ASSERT_TRUE(kv_tx_run_part(&shard, &s.p));
	CU_ASSERT_EQUAL(shard.tx.wver[a], va + 1);
	CU_ASSERT_EQUAL(shard.tx.wver[b], vb);
	plain(&s, &get_cmd, "b", "G");
	CU_ASSERT_TRUE(kv_tx_run_part(&shard, &s.p)); /* a read bumps nothing */
	CU_ASSERT_EQUAL(shard.tx.wver[b], vb);
	lockreq(&k, 0, "b", true, "K");
	CU_ASSERT_TRUE(kv_tx_run_part(&shard, &k.p));
	kv_tx_release_here(&shard, k.lock.hold);
	CU_ASSERT_EQUAL(shard.tx.wver[b], vb + 1);
}

/* The origin of a transaction is lcore 1 (shard 1); the locks are on shard 0 (lcore 0). */
static struct kv_shard origin;

static void
two_shards(void)
{
	kv_tx_shard_fini(&shard); /* whatever an earlier test left locked (a FATAL assert) */
	CU_ASSERT_EQUAL_FATAL(kv_tx_shard_init(&shard), 0);
	kv.nshards = 2;
	kv.shard_lcore[0] = 0;
	kv.shard_lcore[1] = 1;
	kv.shards[1] = &origin;
	memset(&origin, 0, sizeof(origin));
	origin.index = 1;
	kv_mem_bind(&origin.mem);
	CU_ASSERT_EQUAL_FATAL(kv_tx_shard_init(&origin), 0);
	kv_tx_origin_init(&origin);
	nsent = ndeferred = ntimers = 0;
	deferred_fn = NULL;
	cur_lcore = 0;
}

static void
one_shard(void)
{
	kv_tx_shard_fini(&origin);
	kv.nshards = 1;
	kv.shards[1] = NULL;
	cur_lcore = 0;
	send_rc = -1;
	ut_malloc_fail = false;
}

/* A lock on shard 0 held by the origin, and a GET of its key waiting behind it. */
static void
held_with_waiter(struct tpart *k, struct tpart *g)
{
	reset();
	cur_lcore = 0;
	lockreq(k, 0, "x", true, "X");
	k->lock.rel = kv_tx_release_new(); /* as txn.c makes it, with the request */
	CU_ASSERT_TRUE_FATAL(kv_tx_run_part(&shard, &k->p));
	CU_ASSERT_PTR_NOT_NULL_FATAL(k->lock.hold);
	plain(g, &get_cmd, "x", "G");
	CU_ASSERT_FALSE_FATAL(kv_tx_run_part(&shard, &g->p));
}

/* Deliver what the origin's mailbox accepted, on shard 0's lcore. */
static void
deliver(void)
{
	unsigned i;

	cur_lcore = 0;
	for (i = 0; i < nsent; i++) {
		CU_ASSERT_EQUAL(sent[i].lc, 0);
		sent[i].fn(sent[i].arg);
	}
	nsent = 0;
}

/* A release whose message finds the target's mailbox full (-EAGAIN) is kept and sent
 * again once the mailbox takes it: the shard is unlocked, the GET behind it runs. (Before:
 * the release was dropped with a log line, and the shard stayed locked for good.) */
static void
test_release_full_mailbox(void)
{
	struct tpart k, g;
	unsigned tries;

	two_shards();
	held_with_waiter(&k, &g);
	cur_lcore = 1;
	send_rc = -EAGAIN;
	KV_TX_RELEASE(0, &k);
	CU_ASSERT_EQUAL(nsent, 0);
	CU_ASSERT_FALSE(kv_tx_clear(&shard));
	/* Still full for a few more tries: each one is retried, nothing is lost. */
	for (tries = 0; tries < 3 && deferred_fn != NULL; tries++) {
		cr_msg_fn fn = deferred_fn;

		deferred_fn = NULL;
		fn(deferred_arg);
	}
	CU_ASSERT_EQUAL(tries, 3);
	CU_ASSERT_PTR_NOT_NULL_FATAL(deferred_fn); /* armed again */
	CU_ASSERT_EQUAL(nsent, 0);
	send_rc = 0;
	{
		cr_msg_fn fn = deferred_fn;

		deferred_fn = NULL;
		fn(deferred_arg);
	}
	CU_ASSERT_EQUAL_FATAL(nsent, 1);
	CU_ASSERT_PTR_NULL(deferred_fn); /* sent: nothing more to retry */
	deliver();
	CU_ASSERT_STRING_EQUAL(order, "XG");
	CU_ASSERT_EQUAL(nlates, 1);
	CU_ASSERT_TRUE(kv_tx_clear(&shard));
	one_shard();
}

/* A release with no memory left to allocate anything still goes: its message was made
 * with the lock. (Before: malloc failed and the release was dropped.) */
static void
test_release_no_memory(void)
{
	struct tpart k, g;

	two_shards();
	held_with_waiter(&k, &g);
	cur_lcore = 1;
	send_rc = 0;
	ut_malloc_fail = true;
	KV_TX_RELEASE(0, &k);
	ut_malloc_fail = false;
	CU_ASSERT_EQUAL_FATAL(nsent, 1);
	deliver();
	CU_ASSERT_STRING_EQUAL(order, "XG");
	CU_ASSERT_TRUE(kv_tx_clear(&shard));
	one_shard();
}

/* A release routed by a stale view reaches the lcore that owned shard 0 after it gave the
 * shard away (shardmove.c I7): it touches nothing there and is forwarded; run on the new
 * owner, it releases the lock and the GET behind it runs. (Before: the old owner ran it,
 * unlocking the shard and running the GET beside the new owner.) */
static void
test_release_to_old_owner(void)
{
	struct tpart k, g;
	struct kv_fwd *f;

	two_shards();
	held_with_waiter(&k, &g);
	cur_lcore = 1;
	send_rc = 0;
	KV_TX_RELEASE(0, &k);
	CU_ASSERT_EQUAL_FATAL(nsent, 1);
	atomic_store(&shard.owner, 2u); /* lcore 0 gave it, lcore 2 adopted it */
	deliver();			/* on lcore 0 */
	CU_ASSERT_STRING_EQUAL(order, "X");
	CU_ASSERT_FALSE(kv_tx_clear(&shard));
	CU_ASSERT_PTR_NOT_NULL_FATAL(fwd_kept);
	CU_ASSERT_EQUAL(fwd_kept->shard, 0);
	f = fwd_kept;
	fwd_kept = NULL;
	cur_lcore = 2;
	f->fn(f->arg);
	CU_ASSERT_PTR_NULL(fwd_kept);
	CU_ASSERT_STRING_EQUAL(order, "XG");
	CU_ASSERT_TRUE(kv_tx_clear(&shard));
	atomic_store(&shard.owner, 0u);
	one_shard();
}

/* A release made while its shard moves is held: its retry is not deferred turn after
 * turn (the lcore could not park for the whole move), the shard's RELEASE wakes it
 * (kv_tx_release_kick()) and it goes. (Before: rel_task deferred itself every turn.) */
static void
test_release_held_by_move(void)
{
	struct tpart k, g;
	cr_msg_fn fn;

	two_shards();
	held_with_waiter(&k, &g);
	cur_lcore = 1;
	send_rc = 0;
	route_held = true;
	KV_TX_RELEASE(0, &k);
	CU_ASSERT_EQUAL(nsent, 0);
	CU_ASSERT_EQUAL(ndeferred, 1);
	fn = deferred_fn;
	deferred_fn = NULL;
	fn(deferred_arg); /* still held */
	CU_ASSERT_EQUAL(nsent, 0);
	CU_ASSERT_PTR_NULL(deferred_fn); /* not again: it waits for the RELEASE */
	CU_ASSERT_EQUAL(ntimers, 0);
	route_held = false;
	kv_tx_release_kick(&origin); /* the RELEASE */
	CU_ASSERT_PTR_NOT_NULL_FATAL(deferred_fn);
	fn = deferred_fn;
	deferred_fn = NULL;
	fn(deferred_arg);
	CU_ASSERT_EQUAL_FATAL(nsent, 1);
	CU_ASSERT_PTR_NULL(deferred_fn);
	deliver();
	CU_ASSERT_STRING_EQUAL(order, "XG");
	CU_ASSERT_TRUE(kv_tx_clear(&shard));
	one_shard();
}

/* ---- PUBLISH parts ---- */

static const struct kv_cmd pub_cmd = {
    .name = "publish", .route = KV_ROUTE_ALL, .merge = KV_MERGE_PUBSUB};

#define NSRC 3
static uint64_t pub_last[NSRC];	       /* per publishing lcore, the number that ran last */
static unsigned pub_ran, pub_disorder; /* how many ran; how many after a later one */

static void
fn_pub(struct kv_ctx *x)
{
	if (tag_seq <= pub_last[tag_from])
		pub_disorder++;
	else
		pub_last[tag_from] = tag_seq;
	tag_seq = 0;
	pub_ran++;
	rb_int(x->out, 0);
}

/* A PUBLISH part of lcore @p from, number @p seq: plain, or a step of EXEC (@p hop). */
static void
pubpart(struct tpart *t, unsigned from, uint64_t seq, bool hop)
{
	plain(t, &pub_cmd, "ch", "m");
	t->p.fn = fn_pub;
	t->p.ps_from = from;
	t->p.ps_seq = seq;
	t->p.kind = hop ? KP_TX_HOP : KP_PLAIN;
}

static void
pub_reset(void)
{
	memset(pub_last, 0, sizeof(pub_last));
	pub_ran = pub_disorder = 0;
}

/* A plain PUBLISH part that meets a non-empty wait queue runs at once, as an EXEC's
 * PUBLISH part (a hop) does: the shard runs a publishing lcore's messages in the order
 * of their numbers. (Before: it waited in the queue, the EXEC's number 2 ran before the
 * plain number 1, and a subscriber moving meanwhile lost 1: pubsub.c recorded 2 as
 * delivered, the stubs on its old lcore finished at once, its new lcore dropped 1.) */
static void
test_publish_overtaken(void)
{
	struct tpart k, g, p1, p2;

	two_shards();
	pub_reset();
	held_with_waiter(&k, &g); /* the queue is not empty */
	pubpart(&p1, 2, 1, false);
	pubpart(&p2, 2, 2, true);
	CU_ASSERT_TRUE(kv_tx_run_part(&shard, &p1.p));
	CU_ASSERT_TRUE(kv_tx_run_part(&shard, &p2.p));
	CU_ASSERT_EQUAL(pub_ran, 2);
	CU_ASSERT_EQUAL(pub_disorder, 0);
	kv_tx_release_here(&shard, k.lock.hold);
	free(k.lock.rel); /* released here, not by message: its message is not used */
	CU_ASSERT_STRING_EQUAL(order, "XG"); /* the GET still waited for the lock */
	CU_ASSERT_EQUAL(pub_ran, 2);
	CU_ASSERT_EQUAL(pub_disorder, 0);
	CU_ASSERT_TRUE(kv_tx_clear(&shard));
	one_shard();
}

static unsigned plain_ran;
static void
fn_count(struct kv_ctx *x)
{
	plain_ran++;
	rb_int(x->out, 1);
}

/* Seeded interleavings: key locks taken and released, reads and writes waiting behind
 * them, PUBLISH parts of three lcores, plain and from EXEC, mixed. Every PUBLISH runs once,
 * each lcore's in the order of their numbers; every other part runs once. */
static void
test_publish_stress(void)
{
	static const char *const keys[] = {"a", "b", "c", "d"};
	unsigned seed;

	for (seed = 1; seed <= 100; seed++) {
		struct tpart *parts = calloc(600, sizeof(*parts));
		void *holds[64];
		unsigned nparts = 0, nholds = 0, nplain = 0, npub = 0, step, i;
		uint64_t seq[NSRC] = {0};

		CU_ASSERT_PTR_NOT_NULL_FATAL(parts);
		srand(seed);
		reset();
		pub_reset();
		plain_ran = 0;
		for (step = 0; step < 600; step++) {
			unsigned r = (unsigned)rand() % 100;
			struct tpart *t = &parts[nparts];
			const char *key = keys[(unsigned)rand() % 4];

			if (r < 15 && nholds < 64) {
				lockreq(t, 0, key, (rand() & 1) != 0, "L");
				t->p.fn = NULL;
				nparts++;
				if (kv_tx_run_part(&shard, &t->p) && t->lock.hold != NULL)
					holds[nholds++] = t->lock.hold;
			} else if (r < 35 && nholds > 0) {
				i = (unsigned)rand() % nholds;
				kv_tx_release_here(&shard, holds[i]);
				holds[i] = holds[--nholds];
			} else if (r < 65) {
				plain(t, (rand() & 1) != 0 ? &set_cmd : &get_cmd, key, "p");
				t->p.fn = fn_count;
				nparts++;
				nplain++;
				(void)kv_tx_run_part(&shard, &t->p);
			} else {
				unsigned from = (unsigned)rand() % NSRC;

				pubpart(t, from, ++seq[from], (rand() % 4) == 0);
				nparts++;
				npub++;
				(void)kv_tx_run_part(&shard, &t->p);
			}
			/* Lock requests granted from the queue: their holds. */
			for (i = 0; i < nlates; i++)
				if (lates[i].hold != NULL && nholds < 64)
					holds[nholds++] = lates[i].hold;
			nlates = 0;
		}
		while (nholds > 0) {
			kv_tx_release_here(&shard, holds[--nholds]);
			for (i = 0; i < nlates; i++)
				if (lates[i].hold != NULL)
					holds[nholds++] = lates[i].hold;
			nlates = 0;
		}
		CU_ASSERT_TRUE(kv_tx_clear(&shard));
		CU_ASSERT_EQUAL(pub_ran, npub);
		CU_ASSERT_EQUAL(pub_disorder, 0);
		CU_ASSERT_EQUAL(plain_ran, nplain);
		free(parts);
	}
}

static const struct ut_case cases[] = {
    UT_CASE(test_whole_shared), UT_CASE(test_whole_vs_keys), UT_CASE(test_whole_exclusive),
    UT_CASE(test_versions), UT_CASE(test_release_full_mailbox), UT_CASE(test_release_no_memory),
    UT_CASE(test_release_to_old_owner), UT_CASE(test_release_held_by_move),
    UT_CASE(test_publish_overtaken), UT_CASE(test_publish_stress),
};

UT_MAIN("kv_txlock", cases, setup, NULL)
