/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The memory policy's settings and the access field of keys (see policy.h), with Redis
 * 7.0's LRU clock and LFU counter (evict.c, lfu functions).
 */
#include <errno.h>
#include <strings.h>

#include "kdict.h"
#include "policy.h"
#include "store.h"

#define LRU_BITS     24
#define LRU_MAX	     ((1u << LRU_BITS) - 1)
#define LFU_INIT_VAL 5u

struct kv_memcfg kv_memcfg = {
    .maxmemory = 0,
    .policy = KV_POL_NOEVICTION,
    .samples = 5,
    .tenacity = 10,
    .lfu_log_factor = 10,
    .lfu_decay_time = 1,
};

static const char *const names[KV_POL_COUNT] = {
    "volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl",
    "allkeys-lru",  "allkeys-lfu",  "allkeys-random",  "noeviction",
};

const char kv_policy_names[] = "volatile-lru, volatile-lfu, volatile-random, volatile-ttl, "
			       "allkeys-lru, allkeys-lfu, allkeys-random, noeviction";

const char *
kv_policy_name(enum kv_policy p)
{
	return (unsigned)p < KV_POL_COUNT ? names[p] : "noeviction";
}

int
kv_policy_parse(const char *s, enum kv_policy *out)
{
	unsigned i;

	for (i = 0; i < KV_POL_COUNT; i++) {
		if (strcasecmp(s, names[i]) == 0) {
			*out = (enum kv_policy)i;
			return 0;
		}
	}
	return -EINVAL;
}

unsigned
kv_lru_clock(int64_t now_ms)
{
	return (unsigned)(now_ms / 1000) & LRU_MAX;
}

/* Redis's LFUGetTimeInMinutes(): 16 bits of minutes. */
static unsigned
lfu_minutes(int64_t now_ms)
{
	return (unsigned)(now_ms / 1000 / 60) & 65535u;
}

unsigned
kv_access_new(int64_t now_ms)
{
	if (kv_policy_lfu(kv_policy()))
		return (lfu_minutes(now_ms) << 8) | LFU_INIT_VAL;
	return kv_lru_clock(now_ms);
}

unsigned
kv_lfu_counter(unsigned field, int64_t now_ms)
{
	unsigned ldt = (field >> 8) & 65535u, counter = field & 255u, now = lfu_minutes(now_ms);
	unsigned elapsed = now >= ldt ? now - ldt : 65535u - ldt + now;
	int decay = atomic_load_explicit(&kv_memcfg.lfu_decay_time, memory_order_relaxed);
	unsigned periods = decay > 0 ? elapsed / (unsigned)decay : 0;

	if (periods != 0)
		counter = periods > counter ? 0 : counter - periods;
	return counter;
}

/* Redis's LFULogIncr(). */
static unsigned
lfu_log_incr(unsigned counter, uint64_t *rng)
{
	int factor = atomic_load_explicit(&kv_memcfg.lfu_log_factor, memory_order_relaxed);
	double r, base, p;

	if (counter == 255)
		return 255;
	r = (double)(kd_rand(rng) >> 11) / (double)(1ULL << 53);
	base = counter > LFU_INIT_VAL ? (double)(counter - LFU_INIT_VAL) : 0.0;
	p = 1.0 / (base * factor + 1);
	return r < p ? counter + 1 : counter;
}

unsigned
kv_access_touch(unsigned field, int64_t now_ms, uint64_t *rng)
{
	if (!kv_policy_lfu(kv_policy()))
		return kv_lru_clock(now_ms);
	return (lfu_minutes(now_ms) << 8) | lfu_log_incr(kv_lfu_counter(field, now_ms), rng);
}

unsigned long long
kv_lru_idle_ms(unsigned field, int64_t now_ms)
{
	unsigned now = kv_lru_clock(now_ms);

	field &= LRU_MAX;
	if (now >= field)
		return (unsigned long long)(now - field) * 1000;
	return (unsigned long long)(now + (LRU_MAX - field)) * 1000;
}
