/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Eviction passes of a shard under --maxmemory (see evict.h).
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kv.h"

/* Elements of lazily freed values freed per step of a pass (as lazyfree.c's). */
#define LAZY_BUDGET 1024u
/* Refills of the pool one pick may try before the shard is deemed stuck (its samples
 * met only keys held by transactions). */
#define PICK_ROUNDS 16u

static void pass_task(void *arg);

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Redis's evictionTimeLimitUs(), in ns (UINT64_MAX: none). */
static uint64_t
time_limit_ns(void)
{
	int t = atomic_load_explicit(&kv_memcfg.tenacity, memory_order_relaxed);

	if (t <= 10)
		return 50000ull * (uint64_t)(t > 0 ? t : 0);
	if (t < 100)
		return (uint64_t)(500.0 * pow(1.15, t - 10.0)) * 1000ull;
	return UINT64_MAX;
}

static bool
any_stuck(void)
{
	unsigned i;

	for (i = 0; i < kv.nshards; i++) {
		const struct kv_shard *o = kv.shards[kv.shard_lcore[i]];

		/* relaxed: a hint refreshed by every pass of its shard */
		if (o != NULL && atomic_load_explicit(&o->ev.stuck, memory_order_relaxed))
			return true;
	}
	return false;
}

static bool
any_evictable(void)
{
	unsigned i;

	for (i = 0; i < kv.nshards; i++) {
		const struct kv_shard *o = kv.shards[kv.shard_lcore[i]];

		/* relaxed: as any_stuck() */
		if (o != NULL && atomic_load_explicit(&o->ev.evictable, memory_order_relaxed))
			return true;
	}
	return false;
}

bool
kv_evict_refuse(void)
{
	unsigned long long max = kv_maxmemory();

	if (max == 0 || kv_used_memory() <= max)
		return false;
	return kv_policy() == KV_POL_NOEVICTION || (any_stuck() && !any_evictable());
}

/* Must this shard evict now? */
static bool
over(const struct kv_shard *sh, unsigned long long max)
{
	if (max == 0 || kv_used_memory() <= max)
		return false;
	return (uint64_t)kv_mem_used(&sh->mem) > max / kv.nshards || any_stuck();
}

/* The rank of a candidate: higher goes first. */
static unsigned long long
idle_of(const struct kv_entry *e, enum kv_policy pol, int64_t now_ms)
{
	switch (pol) {
	case KV_POL_VOLATILE_LFU:
	case KV_POL_ALLKEYS_LFU:
		return 255 - kv_lfu_counter(e->lru, now_ms);
	case KV_POL_VOLATILE_TTL:
		return ~0ULL - (unsigned long long)e->expire;
	default:
		return kv_lru_idle_ms(e->lru, now_ms);
	}
}

/* Redis's evictionPoolPopulate(): the pool keeps the best candidates seen, ascending. */
static void
pool_insert(struct kv_evict *ev, const struct kv_entry *e, unsigned long long idle)
{
	struct kv_evpool_slot *pool = ev->pool;
	unsigned k = 0, i;

	for (i = 0; i < KV_EVPOOL_SIZE; i++) /* already in it: a sample of the same key */
		if (pool[i].e == e)
			return;
	while (k < KV_EVPOOL_SIZE && pool[k].e != NULL && pool[k].idle < idle)
		k++;
	if (k == 0 && pool[KV_EVPOOL_SIZE - 1].e != NULL)
		return; /* worse than every candidate of a full pool */
	if (k < KV_EVPOOL_SIZE && pool[k].e == NULL) {
		/* an empty slot: insert there */
	} else if (pool[KV_EVPOOL_SIZE - 1].e == NULL) {
		memmove(pool + k + 1, pool + k, sizeof(*pool) * (KV_EVPOOL_SIZE - k - 1));
	} else {
		k--; /* full: drop the worst, at the left */
		memmove(pool, pool + 1, sizeof(*pool) * k);
	}
	pool[k].e = e;
	pool[k].hash = e->node.hash;
	pool[k].idle = idle;
}

static void
pool_fill(struct kv_shard *sh, enum kv_policy pol, bool with_ttl, int64_t now_ms)
{
	size_t have = with_ttl ? kv_store_expires(sh->store) : kv_store_count(sh->store);
	int want = atomic_load_explicit(&kv_memcfg.samples, memory_order_relaxed);
	size_t n = want > 0 ? (size_t)want : 1, i;

	if (n > have)
		n = have;
	for (i = 0; i < n; i++) {
		struct kv_entry *e = kv_store_sample(sh->store, with_ttl, &sh->ev.rng);

		if (e != NULL && kv_store_may_delete(sh->store, e))
			pool_insert(&sh->ev, e, idle_of(e, pol, now_ms));
	}
}

/* The key to evict under @p pol, or NULL if there is none this shard may evict. */
static struct kv_entry *
pick(struct kv_shard *sh, enum kv_policy pol, int64_t now_ms)
{
	bool with_ttl = kv_policy_volatile(pol);
	unsigned round;

	for (round = 0; round < PICK_ROUNDS; round++) {
		int k;

		if ((with_ttl ? kv_store_expires(sh->store) : kv_store_count(sh->store)) == 0)
			return NULL;
		if (pol == KV_POL_ALLKEYS_RANDOM || pol == KV_POL_VOLATILE_RANDOM) {
			/* as many tries per round as the pool's refill samples */
			int i, n = atomic_load_explicit(&kv_memcfg.samples, memory_order_relaxed);

			for (i = 0; i < n; i++) {
				struct kv_entry *e =
				    kv_store_sample(sh->store, with_ttl, &sh->ev.rng);

				if (e != NULL && kv_store_may_delete(sh->store, e))
					return e;
			}
			continue;
		}
		pool_fill(sh, pol, with_ttl, now_ms);
		for (k = (int)KV_EVPOOL_SIZE - 1; k >= 0; k--) {
			struct kv_evpool_slot *c = &sh->ev.pool[k];
			struct kv_entry *e;

			if (c->e == NULL)
				continue;
			/* A candidate may have gone since it was sampled: a ghost. */
			e = kv_store_holds(sh->store, c->e, c->hash) ? (struct kv_entry *)c->e
								     : NULL;
			c->e = NULL;
			if (e != NULL && (!with_ttl || e->expire != -1) &&
			    kv_store_may_delete(sh->store, e))
				return e;
		}
	}
	return NULL;
}

/* Other lcores read the flag on every write they check: store it only when it changes,
 * so its cache line is not written after every batch. */
static void
set_stuck(struct kv_shard *sh, bool v)
{
	/* relaxed: a hint for kv_evict_refuse() and the other shards' passes */
	if (atomic_load_explicit(&sh->ev.stuck, memory_order_relaxed) != v)
		atomic_store_explicit(&sh->ev.stuck, v, memory_order_relaxed);
}

static void
set_evictable(struct kv_shard *sh, enum kv_policy pol)
{
	bool v =
	    pol != KV_POL_NOEVICTION && (kv_policy_volatile(pol) ? kv_store_expires(sh->store)
								 : kv_store_count(sh->store)) != 0;

	/* relaxed: as set_stuck() */
	if (atomic_load_explicit(&sh->ev.evictable, memory_order_relaxed) != v)
		atomic_store_explicit(&sh->ev.evictable, v, memory_order_relaxed);
}

static void
kick_msg(void *arg)
{
	struct kv_shard *sh = arg;
	struct kv_mem *prev;

	/* relaxed: the flag only collapses kicks; the pass reads everything afresh */
	atomic_store_explicit(&sh->ev.kick_pending, false, memory_order_relaxed);
	if (!kv_shard_owned(sh))
		return; /* it moved meanwhile: its owner's tick will do (shardmove.c) */
	prev = kv_mem_swap(&sh->mem);
	kv_evict_kick(sh);
	kv_mem_swap(prev);
}

/* Stuck: ask every other shard that may evict for a pass now. */
static void
kick_others(struct kv_shard *sh)
{
	unsigned i, to;

	for (i = 0; i < kv.nshards; i++) {
		struct kv_shard *o = kv.shards[kv.shard_lcore[i]];

		if (o == NULL || o == sh ||
		    !atomic_load_explicit(&o->ev.evictable, memory_order_relaxed) ||
		    atomic_exchange_explicit(&o->ev.kick_pending, true, memory_order_relaxed))
			continue;
		/* to the lcore running it (held while it moves); refused or full: its tick will do */
		if (kv_route(i, &to) != 0 || cr_send(to, kick_msg, o) != 0)
			atomic_store_explicit(&o->ev.kick_pending, false, memory_order_relaxed);
	}
}

static void
arm(struct kv_shard *sh)
{
	sh->ev.armed = true;
	if (cr_defer(pass_task, sh) != 0)
		cr_timer_start(&sh->ev.timer, 1000 * 1000ull); /* defer queue full: in 1 ms */
}

/* One pass: evict until not over, nothing is left to evict, or the time is up. */
static void
pass(struct kv_shard *sh)
{
	unsigned long long max = kv_maxmemory();
	enum kv_policy pol = kv_policy();
	uint64_t start = 0, limit = 0;
	int64_t now_ms = 0;
	unsigned n;

	for (n = 0;; n++) {
		struct kv_entry *e;

		if (pol == KV_POL_NOEVICTION || !over(sh, max))
			break;
		if (n == 0) { /* over: the clocks are read only then */
			start = now_ns();
			limit = time_limit_ns();
			now_ms = kv_now_ms();
		} else if ((n & 15) == 0 && now_ns() - start > limit) {
			arm(sh); /* Redis's EVICT_RUNNING: go on after other work */
			break;
		}
		if (kv_store_lazy_pending(sh->store) != 0) {
			/* memory already given up: free it first */
			(void)kv_store_lazy_step(sh->store, LAZY_BUDGET);
			kv_mem_settle();
			continue;
		}
		e = pick(sh, pol, now_ms);
		if (e == NULL) {
			set_evictable(sh, pol);
			set_stuck(sh, true);
			kick_others(sh); /* at most one pass asked of each at a time */
			return;
		}
		kv_store_evict(sh->store, e);
		atomic_store_explicit(&sh->ev.evicted,
				      atomic_load_explicit(&sh->ev.evicted, memory_order_relaxed) +
					  1,
				      memory_order_relaxed);
	}
	set_stuck(sh, false);
	set_evictable(sh, pol);
	if (n > 0)
		kv_lazy_kick(sh);
}

static void
pass_task(void *arg)
{
	struct kv_shard *sh = arg;
	struct kv_mem *prev;

	if (!kv_shard_owned(sh))
		return; /* deferred before the shard moved away: its new owner evicts */
	prev = kv_mem_swap(&sh->mem);
	sh->ev.armed = false;
	pass(sh);
	kv_mem_swap(prev);
}

static void
pass_timer(struct cr_timer *t, void *arg)
{
	(void)t;
	pass_task(arg);
}

void
kv_evict_kick(struct kv_shard *sh)
{
	if (sh->ev.armed)
		return;
	if (kv_maxmemory() == 0) {
		set_stuck(sh, false);
		return;
	}
	pass(sh);
}

void
kv_evict_init(struct kv_shard *sh)
{
	memset(sh->ev.pool, 0, sizeof(sh->ev.pool)); /* entries of another run are gone */
	if (sh->ev.rng == 0)
		sh->ev.rng = 0x9E3779B97F4A7C15ULL * (sh->index + 1);
	sh->ev.armed = false;
	atomic_store_explicit(&sh->ev.kick_pending, false, memory_order_relaxed);
	cr_timer_init(&sh->ev.timer, pass_timer, sh);
}

/* The shard leaves this lcore: a pass_task() already deferred here does nothing; its
 * pool (entries of its own store) goes with it, and a pass cut short (at its time limit)
 * goes on on the new owner. */
void
kv_evict_give(struct kv_shard *sh)
{
	cr_timer_stop(&sh->ev.timer);
	sh->ev.resume = sh->ev.armed;
	sh->ev.armed = false;
}

void
kv_evict_adopt(struct kv_shard *sh)
{
	cr_timer_init(&sh->ev.timer, pass_timer, sh);
	if (sh->ev.resume) {
		sh->ev.resume = false;
		arm(sh); /* deferred: not inside the hand-off's message */
	}
}

void
kv_evict_fini(struct kv_shard *sh)
{
	cr_timer_stop(&sh->ev.timer);
	sh->ev.armed = false;
	atomic_store_explicit(&sh->ev.stuck, false, memory_order_relaxed);
	atomic_store_explicit(&sh->ev.evictable, false, memory_order_relaxed);
}

uint64_t
kv_evicted_keys(void)
{
	uint64_t t = 0;
	unsigned i;

	for (i = 0; i < kv.nshards; i++) {
		const struct kv_shard *o = kv.shards[kv.shard_lcore[i]];

		if (o != NULL) /* relaxed: a statistic */
			t += atomic_load_explicit(&o->ev.evicted, memory_order_relaxed);
	}
	return t;
}

void
kv_evict_resetstat(struct kv_shard *sh)
{
	atomic_store_explicit(&sh->ev.evicted, 0, memory_order_relaxed);
}

/* ---- the settings, for options and CONFIG GET / SET ---- */

const char *const kv_memparam_names[KV_MP_COUNT] = {
    "maxmemory",      "maxmemory-policy", "maxmemory-samples", "maxmemory-eviction-tenacity",
    "lfu-log-factor", "lfu-decay-time",
};

/* Redis's numeric configs: an integer (string2ll), then its range; @p range says it. */
static int
parse_int(const char *v, long long min, long long max, const char *range, unsigned long long *out,
	  const char **msg)
{
	long long n;

	if (!resp_string2ll(v, strlen(v), &n)) {
		*msg = "argument couldn't be parsed into an integer";
		return -EINVAL;
	}
	if (n < min || n > max) {
		*msg = range;
		return -EINVAL;
	}
	*out = (unsigned long long)n;
	return 0;
}

int
kv_memparam_parse(unsigned i, const char *v, unsigned long long *out, const char **msg)
{
	enum kv_policy p;

	switch (i) {
	case KV_MP_MAXMEMORY:
		*msg = "argument must be a memory value";
		return kv_parse_bytes(v, 0, ~0ULL, out);
	case KV_MP_POLICY:
		*msg = "argument(s) must be one of the following: volatile-lru, volatile-lfu, "
		       "volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, "
		       "noeviction";
		if (kv_policy_parse(v, &p) != 0)
			return -EINVAL;
		*out = (unsigned long long)p;
		return 0;
	case KV_MP_SAMPLES:
		return parse_int(v, 1, INT_MAX,
				 "argument must be between 1 and 2147483647 inclusive", out, msg);
	case KV_MP_TENACITY:
		return parse_int(v, 0, 100, "argument must be between 0 and 100 inclusive", out,
				 msg);
	case KV_MP_LFU_LOG:
	case KV_MP_LFU_DECAY:
		return parse_int(v, 0, INT_MAX,
				 "argument must be between 0 and 2147483647 inclusive", out, msg);
	default:
		*msg = "unknown parameter";
		return -EINVAL;
	}
}

void
kv_memparam_apply(unsigned i, unsigned long long v)
{
	/* relaxed: each setting stands alone (policy.h) */
	switch (i) {
	case KV_MP_MAXMEMORY:
		atomic_store_explicit(&kv_memcfg.maxmemory, v, memory_order_relaxed);
		break;
	case KV_MP_POLICY:
		atomic_store_explicit(&kv_memcfg.policy, (int)v, memory_order_relaxed);
		break;
	case KV_MP_SAMPLES:
		atomic_store_explicit(&kv_memcfg.samples, (int)v, memory_order_relaxed);
		break;
	case KV_MP_TENACITY:
		atomic_store_explicit(&kv_memcfg.tenacity, (int)v, memory_order_relaxed);
		break;
	case KV_MP_LFU_LOG:
		atomic_store_explicit(&kv_memcfg.lfu_log_factor, (int)v, memory_order_relaxed);
		break;
	case KV_MP_LFU_DECAY:
		atomic_store_explicit(&kv_memcfg.lfu_decay_time, (int)v, memory_order_relaxed);
		break;
	default:
		break;
	}
}

void
kv_memparam_get(unsigned i, char *b, size_t n)
{
	switch (i) {
	case KV_MP_MAXMEMORY:
		snprintf(b, n, "%llu", kv_maxmemory());
		break;
	case KV_MP_POLICY:
		snprintf(b, n, "%s", kv_policy_name(kv_policy()));
		break;
	case KV_MP_SAMPLES:
		snprintf(b, n, "%d",
			 atomic_load_explicit(&kv_memcfg.samples, memory_order_relaxed));
		break;
	case KV_MP_TENACITY:
		snprintf(b, n, "%d",
			 atomic_load_explicit(&kv_memcfg.tenacity, memory_order_relaxed));
		break;
	case KV_MP_LFU_LOG:
		snprintf(b, n, "%d",
			 atomic_load_explicit(&kv_memcfg.lfu_log_factor, memory_order_relaxed));
		break;
	case KV_MP_LFU_DECAY:
		snprintf(b, n, "%d",
			 atomic_load_explicit(&kv_memcfg.lfu_decay_time, memory_order_relaxed));
		break;
	default:
		b[0] = '\0';
		break;
	}
}
