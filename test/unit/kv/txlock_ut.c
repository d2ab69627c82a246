/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * app/cr-kv/txlock.c: the whole-shard lock against key locks, plain parts and the FIFO
 * wait queue, and WATCH's versions, on one shard stepped on this thread. What lies below
 * (late answers, blocked pops, leases, messages) is stubbed: a late answer is recorded.
 */
#include "txlock.c"

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
bool kv_bw_pending(const struct kv_shard *sh) { (void)sh; return false; }
void kv_bw_serve(struct kv_shard *sh) { (void)sh; }
void cmd_bw_watch(struct kv_ctx *x) { (void)x; }
int cr_lease_acquire(struct cr_lease *l) { (void)l; return 0; }
int cr_lease_release(struct cr_lease *l) { (void)l; return 0; }
unsigned cr_lcore_id(void) { return 0; }
const char *cr_strerror(int e) { (void)e; return "stub"; }
int cr__send(unsigned lc, cr_msg_fn fn, void *arg) { (void)lc, (void)fn, (void)arg; return -1; }
_Thread_local struct cr__outbox *cr__send_out;
int64_t kv_now_ms(void) { return 1000; }
unsigned key_shard_h(const char *p, size_t len, uint64_t h) { (void)p, (void)len, (void)h; return 0; }
struct kv_entry *kv_peek(struct kv_store *s, const char *k, size_t l, uint64_t h, int64_t now)
{
	(void)s, (void)k, (void)l, (void)h, (void)now;
	return NULL;
}
void kv_store_watch(struct kv_store *s, uint32_t *v, uint32_t m) { (void)s, (void)v, (void)m; }
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

static const struct ut_case cases[] = {
    UT_CASE(test_whole_shared), UT_CASE(test_whole_vs_keys), UT_CASE(test_whole_exclusive),
    UT_CASE(test_versions),
};

UT_MAIN("kv_txlock", cases, setup, NULL)
