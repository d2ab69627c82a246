/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Eviction of keys under --maxmemory (Redis 7.0's maxmemory-policy), shard by shard.
 *
 * The limit is process-wide: the keyspace's memory is the sum of the shards' counters
 * (mem.h), which any lcore reads. A shard evicts only its own keys, on its own lcore, in a
 * pass run after each batch of commands it ran (a client's input, a batch of parts from
 * another lcore) and on its 100 ms tick. A pass evicts while the total is over the limit
 * and either this shard holds more than its share (maxmemory / shards) or some shard is
 * stuck (over the limit with nothing it may evict); so with keys spread by hash every
 * shard keeps about its share, a shard that holds all the keys (hash tags) may use the
 * whole limit, and when one shard cannot evict (volatile-* with no TTL there) the others
 * evict for it, as Redis's one pool would.
 *
 * A pass picks keys as Redis's performEvictions() does: random ones for the *-random
 * policies, else the best of a pool of 16 candidates kept across passes and refilled with
 * maxmemory-samples random keys (of every key, or of those with a TTL for volatile-*),
 * ranked by idle time (LRU), 255 - the LFU counter (LFU) or nearest expiry (TTL). It
 * stops after maxmemory-eviction-tenacity's time (500 us at the default 10, as Redis) and
 * goes on in a deferred task, so a pass never stalls the lcore. A value queued for lazy
 * freeing is freed first while a pass still needs memory (its memory is only counted
 * back as it is freed).
 *
 * Bound: between passes the total can pass the limit by what the batch of commands run
 * since each shard's last pass added; and when writes move from one shard to others, by
 * the first shard's excess over its share until its next tick (100 ms).
 *
 * A shard that finds itself stuck asks the others for a pass at once (a message to their
 * lcores), rather than leaving its excess to their next batch or tick. Writes that may
 * grow memory (Redis's denyoom) are refused with -OOM while the total is over the limit
 * and the policy is noeviction, or some shard is stuck and no shard had keys the policy
 * may evict at its last pass (kv_evict_refuse()): as Redis, only when nothing can go.
 *
 * Everything a pass keeps (pool, counters, its deferred task) is in the shard (struct
 * kv_evict), never in the lcore: a shard may move between lcores.
 */
#ifndef CR_KV_EVICT_H
#define CR_KV_EVICT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cr_reactor.h"
#include "policy.h"

#define KV_EVPOOL_SIZE 16u

struct kv_entry;
struct kv_shard;

struct kv_evpool_slot {
	const struct kv_entry *e; /* NULL: empty; maybe freed since: checked before use */
	uint64_t hash;
	unsigned long long idle; /* higher: evicted first */
};

struct kv_evict {
	struct kv_evpool_slot pool[KV_EVPOOL_SIZE]; /* ascending idle, as Redis's */
	uint64_t rng;
	_Atomic uint64_t evicted;  /* keys evicted (INFO evicted_keys); written here only */
	_Atomic bool stuck;	   /* over, with nothing this shard may evict (read by all) */
	_Atomic bool evictable;	   /* has keys the policy may evict, at its last pass */
	_Atomic bool kick_pending; /* a stuck shard asked this one for a pass */
	bool armed;		   /* a continuation is deferred or timed */
	struct cr_timer timer;	   /* its fallback when cr_defer() is full */
	bool resume; /* the shard moved with one armed: its new owner goes on (adopt) */
};

/* On the shard's lcore, at its start and stop. */
void kv_evict_init(struct kv_shard *sh);
void kv_evict_fini(struct kv_shard *sh);
/* The shard leaves this lcore, or arrives on it (shardmove.c). */
void kv_evict_give(struct kv_shard *sh);
void kv_evict_adopt(struct kv_shard *sh);
/* After a batch of commands ran on @p sh (and at its tick): a pass, if one is due. */
void kv_evict_kick(struct kv_shard *sh);
/* Must a write that may grow memory get -OOM now? (any lcore) */
bool kv_evict_refuse(void);
/* Keys evicted by every shard (INFO), and this shard's count reset (CONFIG RESETSTAT). */
uint64_t kv_evicted_keys(void);
void kv_evict_resetstat(struct kv_shard *sh);

/* The settings (options, CONFIG GET and SET), by index into kv_memparam_names. */
enum {
	KV_MP_MAXMEMORY = 0,
	KV_MP_POLICY,
	KV_MP_SAMPLES,
	KV_MP_TENACITY,
	KV_MP_LFU_LOG,
	KV_MP_LFU_DECAY,
	KV_MP_COUNT
};
extern const char *const kv_memparam_names[KV_MP_COUNT];
/* Check a value (@p msg: Redis's CONFIG SET text when it is bad), then apply it. */
int kv_memparam_parse(unsigned i, const char *v, unsigned long long *out, const char **msg);
void kv_memparam_apply(unsigned i, unsigned long long v);
void kv_memparam_get(unsigned i, char *b, size_t n);

#endif /* CR_KV_EVICT_H */
