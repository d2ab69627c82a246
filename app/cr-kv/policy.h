/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The memory policy's settings (--maxmemory, --maxmemory-policy and Redis 7.0's knobs of
 * sampled eviction), and what each key records of its accesses for it: the 24-bit field
 * of an entry (kv_entry.lru) holds Redis's LRU clock of the last access, or under an LFU
 * policy Redis's LFU data, the minute of the last decrement (16 bits) over a logarithmic
 * access counter (8 bits). Switching policy does not convert the field: as in Redis,
 * "LRU and LFU data will take some time to adjust".
 *
 * The settings are process-wide: set by options before any lcore runs and by CONFIG SET on
 * any lcore, read on every lcore with relaxed loads (each value stands alone, and a
 * reader acts on a recent one). Nothing here is per-lcore state: the eviction of a shard
 * (evict.h) keeps its own in the shard.
 */
#ifndef CR_KV_POLICY_H
#define CR_KV_POLICY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Redis 7.0's policies, in the order CONFIG SET's error lists them. */
enum kv_policy {
	KV_POL_VOLATILE_LRU = 0,
	KV_POL_VOLATILE_LFU,
	KV_POL_VOLATILE_RANDOM,
	KV_POL_VOLATILE_TTL,
	KV_POL_ALLKEYS_LRU,
	KV_POL_ALLKEYS_LFU,
	KV_POL_ALLKEYS_RANDOM,
	KV_POL_NOEVICTION,
	KV_POL_COUNT
};

struct kv_memcfg {
	_Atomic unsigned long long maxmemory; /* bytes of keyspace; 0: no limit */
	_Atomic int policy;		      /* enum kv_policy */
	_Atomic int samples;		      /* maxmemory-samples: keys sampled per pick */
	_Atomic int tenacity;		      /* maxmemory-eviction-tenacity, 0-100 */
	_Atomic int lfu_log_factor;	      /* lfu-log-factor */
	_Atomic int lfu_decay_time;	      /* lfu-decay-time, minutes */
};

/* Redis 7.0's defaults: no limit, noeviction, 5 samples, tenacity 10, LFU 10 and 1. */
extern struct kv_memcfg kv_memcfg;

static inline unsigned long long
kv_maxmemory(void)
{
	return atomic_load_explicit(&kv_memcfg.maxmemory, memory_order_relaxed);
}

static inline enum kv_policy
kv_policy(void)
{
	return (enum kv_policy)atomic_load_explicit(&kv_memcfg.policy, memory_order_relaxed);
}

static inline bool
kv_policy_lfu(enum kv_policy p)
{
	return p == KV_POL_VOLATILE_LFU || p == KV_POL_ALLKEYS_LFU;
}

static inline bool
kv_policy_volatile(enum kv_policy p)
{
	return p <= KV_POL_VOLATILE_TTL;
}

/* "allkeys-lru"...; and back (case-insensitive, as Redis): -EINVAL if none. */
const char *kv_policy_name(enum kv_policy p);
int kv_policy_parse(const char *s, enum kv_policy *out);
/* The names, comma-separated, as Redis's CONFIG SET error lists them. */
extern const char kv_policy_names[];

/* The access field of a key created now. */
unsigned kv_access_new(int64_t now_ms);
/* ... after an access now: the LRU clock, or the LFU counter decayed and then
 * incremented with probability 1 / ((counter - 5) * lfu-log-factor + 1), as Redis's
 * updateLFU() (@p rng: the caller's xorshift state). */
unsigned kv_access_touch(unsigned field, int64_t now_ms, uint64_t *rng);
/* LFU: the counter decayed by one per lfu-decay-time minutes since its last decrement
 * (Redis's LFUDecrAndReturn(): OBJECT FREQ, and what eviction ranks by). */
unsigned kv_lfu_counter(unsigned field, int64_t now_ms);
/* LRU: milliseconds since the last access, at the clock's 1 s resolution (Redis's
 * estimateObjectIdleTime()). */
unsigned long long kv_lru_idle_ms(unsigned field, int64_t now_ms);

#endif /* CR_KV_POLICY_H */
