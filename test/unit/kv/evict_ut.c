/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * app/cr-kv/evict.c: eviction passes of two shards stepped on this thread, as two lcores
 * would run them in turn (each pass with its shard's memory counter bound, as its lcore
 * binds it): who evicts while the process-wide total is over (a shard over its share, or
 * every shard while one is stuck), when writes are refused, which key each policy picks,
 * keys held by a transaction, WATCH's versions, lazily freed values. Deferred tasks and
 * timers are stubbed: a continuation is counted and run when the test says.
 */
#include <stdlib.h>

#include "evict.c"
#include "t_list.h"
#include "ut_cunit.h"

/* ---- stubs of what evict.c calls beside the store ---- */

static cr_msg_fn deferred_fn;
static void *deferred_arg;
static unsigned ndeferred;
int
cr_defer(cr_msg_fn fn, void *arg)
{
	deferred_fn = fn;
	deferred_arg = arg;
	ndeferred++;
	return 0;
}
/* Messages to other lcores: kept for the test to deliver. */
static struct {
	unsigned lc;
	cr_msg_fn fn;
	void *arg;
} sent[8];
static unsigned nsent;
int
cr__send(unsigned lc, cr_msg_fn fn, void *arg)
{
	if (nsent == 8)
		return -ENOBUFS;
	sent[nsent].lc = lc;
	sent[nsent].fn = fn;
	sent[nsent++].arg = arg;
	return 0;
}
_Thread_local struct cr__outbox *cr__send_out;
static unsigned cur_lcore;
/* Routing (shardmove.c): every shard at home, none moving. */
int
kv_route(unsigned s, unsigned *lcore)
{
	*lcore = kv.shard_lcore[s];
	return 0;
}
unsigned
cr_lcore_id(void)
{
	return cur_lcore;
}

void
cr_timer_init(struct cr_timer *t, cr_timer_fn fn, void *arg)
{
	(void)t, (void)fn, (void)arg;
}
void
cr_timer_start(struct cr_timer *t, uint64_t ns)
{
	(void)t, (void)ns;
}
bool
cr_timer_stop(struct cr_timer *t)
{
	(void)t;
	return false;
}
void
kv_lazy_kick(struct kv_shard *sh)
{
	(void)sh;
}
int
kv_parse_bytes(const char *v, unsigned long long min, unsigned long long max,
	       unsigned long long *out)
{
	char *end;
	unsigned long long n = strtoull(v, &end, 10);

	if (*end != '\0' || n < min || n > max)
		return -EINVAL;
	*out = n;
	return 0;
}

/* ---- two shards ---- */

static struct kv_shard shards[2];

/* Play @p sh's lcore: its allocations are charged to it. */
static struct kv_shard *
on(unsigned i)
{
	cur_lcore = i;
	kv_mem_bind(&shards[i].mem);
	return &shards[i];
}

/* Deliver what was sent, each on its lcore. */
static void
deliver(void)
{
	unsigned i, n = nsent;

	nsent = 0;
	for (i = 0; i < n; i++) {
		(void)on(sent[i].lc);
		sent[i].fn(sent[i].arg);
	}
}

static int
setup(void)
{
	unsigned i;

	kv.nshards = 2;
	for (i = 0; i < 2; i++) {
		kv.shard_lcore[i] = i;
		kv.shards[i] = &shards[i];
		shards[i].index = i;
		shards[i].lcore = i;
		atomic_store_explicit(&shards[i].owner, i, memory_order_relaxed);
	}
	return 0;
}

/* Each case starts with two empty shards and Redis's defaults. */
static void
reset(enum kv_policy pol, unsigned long long max)
{
	unsigned i;

	for (i = 0; i < 2; i++) {
		struct kv_shard *sh = on(i);

		if (sh->store != NULL)
			kv_store_destroy(sh->store);
		sh->store = kv_store_create();
		CU_ASSERT_PTR_NOT_NULL_FATAL(sh->store);
		memset(&sh->ev, 0, sizeof(sh->ev));
		kv_evict_init(sh);
	}
	kv_memparam_apply(KV_MP_SAMPLES, 5);
	kv_memparam_apply(KV_MP_TENACITY, 100); /* no time limit: passes run to the end */
	kv_memparam_apply(KV_MP_POLICY, (unsigned long long)pol);
	kv_memparam_apply(KV_MP_MAXMEMORY, max);
	deferred_fn = NULL;
	ndeferred = 0;
	nsent = 0;
}

static const char value[100] = "0123456789012345678901234567890123456789012345678901234567"
			       "890123456789012345678901234567890123456";

/* @p n keys "PREFIX:i" on shard @p i, with a TTL of @p ttl_ms from now (0: none). */
static void
fill(unsigned i, const char *prefix, unsigned n, int64_t ttl_ms)
{
	struct kv_shard *sh = on(i);
	int64_t now = kv_now_ms();
	unsigned j;

	for (j = 0; j < n; j++) {
		char k[64];
		int len = snprintf(k, sizeof(k), "%s:%u", prefix, j);
		struct kv_entry *e = kv_set(sh->store, k, (size_t)len, kv_hash(k, (size_t)len),
					    value, sizeof(value), false, now);

		CU_ASSERT_PTR_NOT_NULL_FATAL(e);
		if (ttl_ms != 0)
			kv_set_expire(sh->store, e, now + ttl_ms + j);
	}
}

static uint64_t
used(unsigned i)
{
	return (uint64_t)kv_mem_used(&shards[i].mem);
}

static bool
has(unsigned i, const char *prefix, unsigned j)
{
	char k[64];
	int len = snprintf(k, sizeof(k), "%s:%u", prefix, j);

	return kv_peek(shards[i].store, k, (size_t)len, kv_hash(k, (size_t)len), kv_now_ms()) !=
	       NULL;
}

static uint64_t
evicted(unsigned i)
{
	return atomic_load(&shards[i].ev.evicted);
}

/* The keys of one shard (hash tags): it may use the whole limit, not just its share. */
static void
test_one_shard_uses_all(void)
{
	uint64_t full, max;

	reset(KV_POL_ALLKEYS_RANDOM, 0);
	fill(0, "a", 1000, 0);
	full = used(0);
	max = full * 3 / 4;
	kv_memparam_apply(KV_MP_MAXMEMORY, max);
	CU_ASSERT_TRUE(kv_used_memory() > max);
	kv_evict_kick(on(1)); /* the other lcore, empty: nothing to do */
	CU_ASSERT_EQUAL(evicted(1), 0);
	kv_evict_kick(on(0));
	CU_ASSERT_TRUE(kv_used_memory() <= max);
	CU_ASSERT_TRUE(used(0) > max - max / 10); /* not down to its share (max / 2) */
	CU_ASSERT_EQUAL(evicted(0), 1000 - kv_store_count(shards[0].store));
	CU_ASSERT_FALSE(kv_evict_refuse());
}

/* Keys on both: each shard evicts down to its share, the other's keys untouched. */
static void
test_shares(void)
{
	uint64_t max;
	size_t n1;

	reset(KV_POL_ALLKEYS_LRU, 0);
	fill(0, "a", 1000, 0);
	fill(1, "b", 1000, 0);
	max = (used(0) + used(1)) / 2;
	kv_memparam_apply(KV_MP_MAXMEMORY, max);
	n1 = kv_store_count(shards[1].store);
	kv_evict_kick(on(0));
	CU_ASSERT_TRUE(used(0) <= max / 2);
	CU_ASSERT_TRUE(used(0) > max / 2 - max / 20);
	CU_ASSERT_EQUAL(kv_store_count(shards[1].store), n1); /* no lcore touches another's */
	CU_ASSERT_TRUE(kv_used_memory() > max);		      /* over until shard 1's pass */
	CU_ASSERT_FALSE(kv_evict_refuse());		      /* shard 1 can evict: no refusal */
	kv_evict_kick(on(1));
	CU_ASSERT_TRUE(kv_used_memory() <= max);
	CU_ASSERT_EQUAL(evicted(0) + evicted(1),
			2000 - kv_store_count(shards[0].store) - kv_store_count(shards[1].store));
}

/* volatile-lru: shard 0 has no TTL key and is stuck; it asks shard 1 for a pass, which
 * evicts for it; writes are refused only while no shard has anything to evict. */
static void
test_stuck(void)
{
	uint64_t max;
	unsigned j;

	reset(KV_POL_VOLATILE_LRU, 0);
	fill(0, "p", 1000, 0);	    /* no TTL */
	fill(1, "t", 300, 3600000); /* TTL */
	max = used(0) + used(1) - used(1) / 2;
	kv_memparam_apply(KV_MP_MAXMEMORY, ~0ULL);
	kv_evict_kick(on(1)); /* a pass under the limit: shard 1 publishes that it may evict */
	kv_memparam_apply(KV_MP_MAXMEMORY, max);
	kv_evict_kick(on(0));
	CU_ASSERT_TRUE(atomic_load(&shards[0].ev.stuck));
	CU_ASSERT_EQUAL(evicted(0), 0);
	CU_ASSERT_FALSE(kv_evict_refuse()); /* shard 1 may evict: not refused */
	CU_ASSERT_EQUAL_FATAL(nsent, 1);    /* ... and is asked to, on its lcore */
	CU_ASSERT_EQUAL(sent[0].lc, 1);
	kv_evict_kick(on(0)); /* stuck again: one pass asked at a time */
	CU_ASSERT_EQUAL(nsent, 1);
	deliver(); /* shard 1 is under its share, but shard 0 is stuck */
	CU_ASSERT_FALSE(atomic_load(&shards[1].ev.kick_pending));
	CU_ASSERT_TRUE(kv_used_memory() <= max);
	CU_ASSERT_TRUE(evicted(1) > 0);
	CU_ASSERT_FALSE(kv_evict_refuse());
	for (j = 0; j < 1000; j++)
		CU_ASSERT_TRUE(has(0, "p", j));
	kv_evict_kick(on(0)); /* its next pass: not over any more */
	CU_ASSERT_FALSE(atomic_load(&shards[0].ev.stuck));
	/* Below what shard 0 alone holds: shard 1 evicts all it may, then both are stuck. */
	kv_memparam_apply(KV_MP_MAXMEMORY, used(0) / 2);
	kv_evict_kick(on(0));
	deliver();
	CU_ASSERT_EQUAL(kv_store_count(shards[1].store), 0);
	CU_ASSERT_EQUAL(evicted(1), 300);
	CU_ASSERT_TRUE(atomic_load(&shards[1].ev.stuck));
	CU_ASSERT_FALSE(atomic_load(&shards[1].ev.evictable));
	CU_ASSERT_TRUE(kv_evict_refuse()); /* nothing left to evict anywhere */
	for (j = 0; j < 1000; j++)
		CU_ASSERT_TRUE(has(0, "p", j));
	/* noeviction: refused, nothing evicted, nobody stuck */
	reset(KV_POL_NOEVICTION, 0);
	fill(0, "a", 100, 0);
	kv_memparam_apply(KV_MP_MAXMEMORY, used(0) / 2);
	kv_evict_kick(on(0));
	CU_ASSERT_EQUAL(evicted(0), 0);
	CU_ASSERT_EQUAL(nsent, 0);
	CU_ASSERT_TRUE(kv_evict_refuse());
	kv_memparam_apply(KV_MP_MAXMEMORY, 0);
	CU_ASSERT_FALSE(kv_evict_refuse());
}

/* Keys a transaction holds are never picked; with only those left the shard is stuck. */
static const char *pinned_prefix;
static bool
pin_fn(void *arg, const char *key, size_t klen)
{
	(void)arg, (void)klen;
	return pinned_prefix != NULL && strncmp(key, pinned_prefix, strlen(pinned_prefix)) == 0;
}

static void
test_pinned(void)
{
	unsigned j;

	reset(KV_POL_ALLKEYS_RANDOM, 0);
	fill(0, "held", 5, 0);
	fill(0, "free", 50, 0);
	kv_store_pin(shards[0].store, pin_fn, NULL);
	pinned_prefix = "held";
	kv_memparam_apply(KV_MP_MAXMEMORY, 1);
	kv_evict_kick(on(0));
	for (j = 0; j < 5; j++)
		CU_ASSERT_TRUE(has(0, "held", j));
	for (j = 0; j < 50; j++)
		CU_ASSERT_FALSE(has(0, "free", j));
	CU_ASSERT_EQUAL(evicted(0), 50);
	CU_ASSERT_TRUE(atomic_load(&shards[0].ev.stuck));
	pinned_prefix = NULL; /* the transaction ends */
	kv_evict_kick(on(0));
	CU_ASSERT_EQUAL(kv_store_count(shards[0].store), 0);
	kv_store_pin(shards[0].store, NULL, NULL);
}

/* LRU, LFU and TTL: with as many samples as keys per refill, the pool evicts the worst
 * by each rank (a key a refill missed may stay for a while: the newer half always does,
 * and nearly all of those evicted are among the 60 worst). */
static void
test_order(void)
{
	int64_t now = kv_now_ms();
	unsigned lru_now = kv_lru_clock(now), j, gone;
	uint64_t one;

	reset(KV_POL_ALLKEYS_LRU, 0);
	fill(0, "k", 200, 0);
	one = used(0) / 200;
	for (j = 0; j < 200; j++) { /* key j was last used j seconds ago */
		char k[16];
		int len = snprintf(k, sizeof(k), "k:%u", j);
		struct kv_entry *e =
		    kv_peek(shards[0].store, k, (size_t)len, kv_hash(k, (size_t)len), now);

		e->lru = (lru_now - j) & 0xffffff;
	}
	kv_memparam_apply(KV_MP_SAMPLES, 4000);
	kv_memparam_apply(KV_MP_MAXMEMORY, used(0) - 50 * one);
	kv_evict_kick(on(0));
	CU_ASSERT_TRUE(evicted(0) >= 50 && evicted(0) <= 56);
	for (j = 0, gone = 0; j < 200; j++) {
		if (j < 100)
			CU_ASSERT_TRUE(has(0, "k", j)); /* the recent ones stay */
		if (j >= 140 && !has(0, "k", j))
			gone++;
	}
	CU_ASSERT_TRUE(gone >= 45);

	reset(KV_POL_VOLATILE_TTL, 0);
	fill(0, "t", 200, 1000000); /* key j expires at now + 1000000 + j */
	fill(0, "p", 20, 0);
	kv_memparam_apply(KV_MP_SAMPLES, 4000);
	kv_memparam_apply(KV_MP_MAXMEMORY, used(0) - 50 * one);
	kv_evict_kick(on(0));
	CU_ASSERT_TRUE(evicted(0) >= 50 && evicted(0) <= 56);
	for (j = 0, gone = 0; j < 200; j++) {
		if (j >= 100)
			CU_ASSERT_TRUE(has(0, "t", j)); /* the far expiries stay */
		if (j < 60 && !has(0, "t", j))
			gone++; /* the nearest went */
	}
	CU_ASSERT_TRUE(gone >= 45);
	for (j = 0; j < 20; j++)
		CU_ASSERT_TRUE(has(0, "p", j)); /* no TTL: never */

	reset(KV_POL_ALLKEYS_LFU, 0);
	fill(0, "f", 100, 0); /* counter 5 each */
	for (j = 0; j < 50; j++) {
		char k[16];
		int len = snprintf(k, sizeof(k), "f:%u", j);
		unsigned r;

		for (r = 0; r < 3; r++) /* 5 -> 6 always: read keys rank above the others */
			(void)kv_lookup(shards[0].store, k, (size_t)len, kv_hash(k, (size_t)len),
					now);
	}
	kv_memparam_apply(KV_MP_SAMPLES, 4000);
	kv_memparam_apply(KV_MP_MAXMEMORY, used(0) - 40 * one);
	kv_evict_kick(on(0));
	for (j = 0; j < 50; j++)
		CU_ASSERT_TRUE(has(0, "f", j));
}

/* An evicted key bumps its WATCH slot; a big value is freed lazily, by the pass itself
 * while it still needs memory. */
static void
test_watch_and_lazy(void)
{
	uint32_t versions[16] = {0};
	struct kv_shard *sh;
	struct kv_entry *e;
	struct kv_qlist *ql;
	int64_t now = kv_now_ms();
	unsigned j, sum = 0;

	reset(KV_POL_ALLKEYS_RANDOM, 0);
	sh = on(0);
	kv_store_watch(sh->store, versions, 15);
	ql = ql_new();
	CU_ASSERT_PTR_NOT_NULL_FATAL(ql);
	for (j = 0; j < 5000; j++)
		CU_ASSERT_EQUAL_FATAL(ql_push(ql, false, value, sizeof(value)), 0);
	e = kv_add_obj(sh->store, "big", 3, kv_hash("big", 3), KV_T_LIST, KV_ENC_QUICKLIST, ql,
		       now);
	CU_ASSERT_PTR_NOT_NULL_FATAL(e);
	kv_memparam_apply(KV_MP_MAXMEMORY, 1000);
	kv_evict_kick(sh);
	CU_ASSERT_EQUAL(evicted(0), 1);
	for (j = 0; j < 16; j++)
		sum += versions[j];
	CU_ASSERT_EQUAL(sum, 1);
	CU_ASSERT_EQUAL(versions[kv_hash("big", 3) & 15], 1);
	CU_ASSERT_EQUAL(kv_store_lazy_pending(sh->store), 0); /* freed by the pass */
	CU_ASSERT_TRUE(used(0) <= 1000);
	kv_store_watch(sh->store, NULL, 0);
}

/* A pass stops at its time limit (tenacity 0: after 16 keys) and goes on deferred. */
static void
test_tenacity(void)
{
	reset(KV_POL_ALLKEYS_RANDOM, 0);
	fill(0, "a", 500, 0);
	kv_memparam_apply(KV_MP_TENACITY, 0);
	kv_memparam_apply(KV_MP_MAXMEMORY, 1);
	kv_evict_kick(on(0));
	CU_ASSERT_EQUAL(evicted(0), 16);
	CU_ASSERT_EQUAL(ndeferred, 1);
	CU_ASSERT_TRUE(shards[0].ev.armed);
	kv_evict_kick(on(0)); /* armed: a kick waits for the continuation */
	CU_ASSERT_EQUAL(evicted(0), 16);
	while (deferred_fn != NULL && ndeferred < 100) {
		cr_msg_fn fn = deferred_fn;

		deferred_fn = NULL;
		fn(deferred_arg);
	}
	CU_ASSERT_EQUAL(kv_store_count(shards[0].store), 0);
	CU_ASSERT_EQUAL(evicted(0), 500);
}

/* A pass cut short at its time limit when its shard moves goes on on the new owner, which
 * runs it to the end; the continuation deferred on the old owner does nothing. (Before:
 * the new owner evicted nothing until its next kick.) */
static void
test_move_resumes(void)
{
	cr_msg_fn stale_fn;
	void *stale_arg;

	reset(KV_POL_ALLKEYS_RANDOM, 0);
	fill(0, "a", 500, 0);
	kv_memparam_apply(KV_MP_TENACITY, 0);
	kv_memparam_apply(KV_MP_MAXMEMORY, 1);
	kv_evict_kick(on(0));
	CU_ASSERT_EQUAL(evicted(0), 16);
	CU_ASSERT_PTR_NOT_NULL_FATAL(deferred_fn);
	stale_fn = deferred_fn, stale_arg = deferred_arg;
	deferred_fn = NULL;
	kv_evict_give(&shards[0]); /* on lcore 0, then lcore 1 adopts it */
	atomic_store_explicit(&shards[0].owner, CR_LCORE_NONE, memory_order_relaxed);
	cur_lcore = 1;
	atomic_store_explicit(&shards[0].owner, 1u, memory_order_relaxed);
	kv_evict_adopt(&shards[0]);
	CU_ASSERT_TRUE(shards[0].ev.armed);
	cur_lcore = 0;
	stale_fn(stale_arg); /* on the old owner: not its shard any more */
	CU_ASSERT_EQUAL(evicted(0), 16);
	cur_lcore = 1;
	kv_mem_bind(&shards[1].mem); /* lcore 1's own; pass_task binds the shard's */
	while (deferred_fn != NULL && ndeferred < 100) {
		cr_msg_fn fn = deferred_fn;

		deferred_fn = NULL;
		fn(deferred_arg);
	}
	CU_ASSERT_EQUAL(kv_store_count(shards[0].store), 0);
	CU_ASSERT_EQUAL(evicted(0), 500);
	atomic_store_explicit(&shards[0].owner, 0u, memory_order_relaxed);
}

static const struct ut_case cases[] = {
    UT_CASE(test_one_shard_uses_all),
    UT_CASE(test_shares),
    UT_CASE(test_stuck),
    UT_CASE(test_pinned),
    UT_CASE(test_order),
    UT_CASE(test_watch_and_lazy),
    UT_CASE(test_tenacity),
    UT_CASE(test_move_resumes),
};

UT_MAIN("kv_evict", cases, setup, NULL)
