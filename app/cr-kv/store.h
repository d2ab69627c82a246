/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One shard of the keyspace: a hash table of string keys to string values with optional
 * expiry times, owned and touched by one lcore only.
 *
 * The table is chained with a power-of-two bucket array, so that SCAN can use Redis's
 * reverse-binary cursor: a key present from the first call to the last is returned at
 * least once even if the table grows or shrinks in between (open addressing moves keys
 * between buckets on deletion and cannot promise that). The table is resized in one step
 * (no incremental rehash): growing a table of n keys costs O(n) once.
 *
 * Keys are hashed with a keyed hash (kv_hash()): a client cannot choose keys that share a
 * bucket, so chains stay short whatever the keys.
 *
 * Expiry is Redis's: lazy (a lookup of an expired key deletes it and reports it absent)
 * and active (kv_store_expire_cycle() samples keys that have a TTL and deletes the
 * expired ones, repeating while more than a quarter of a sample was expired).
 *
 * Memory: kv_store_used() is what the entries, values and bucket array take from malloc
 * (malloc_usable_size), for --maxmemory and INFO memory.
 */
#ifndef CR_KV_STORE_H
#define CR_KV_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kv_entry {
	struct kv_entry *next; /* bucket chain */
	uint64_t hash;
	int64_t expire;	  /* unix time in ms, or -1 */
	uint32_t exp_idx; /* position in the expires array while expire != -1 */
	uint32_t klen;
	size_t vlen;
	size_t vcap;   /* what val holds, its NUL excluded */
	uint32_t icap; /* room for a value inside the entry, after the key */
	char *val;     /* vcap bytes + 1 (NUL-terminated for the number parsers): the inline
			* room after the key, or a heap block for a longer value */
	char key[];    /* klen bytes + NUL, then icap + 1 bytes of inline value */
};

struct kv_store;

/* The keyed hash of every key (SipHash-1-3, siphash.h), with a random per-process key. */
uint64_t kv_hash(const void *key, size_t len);
/* Replace the random key (--hash-seed, tests); before any lookup. */
void kv_hash_set_key(const uint8_t key[16]);

struct kv_store *kv_store_create(void);
void kv_store_destroy(struct kv_store *s);

/* The live entry for a key, or NULL; an expired one is deleted (lazy expiry). */
struct kv_entry *kv_lookup(struct kv_store *s, const char *key, size_t klen, uint64_t h,
			   int64_t now_ms);
/* As kv_lookup() but an expired entry is left in place and reported absent. */
struct kv_entry *kv_peek(struct kv_store *s, const char *key, size_t klen, uint64_t h,
			 int64_t now_ms);

/* Set key to a value (created or replaced). keepttl keeps an existing TTL, else it goes.
 * @return the entry, or NULL (ENOMEM). */
struct kv_entry *kv_set(struct kv_store *s, const char *key, size_t klen, uint64_t h,
			const char *val, size_t vlen, bool keepttl, int64_t now_ms);

/* Make room for @p vlen value bytes in @p e (new bytes zeroed), for APPEND/SETRANGE.
 * @return 0 or -ENOMEM. */
int kv_value_resize(struct kv_store *s, struct kv_entry *e, size_t vlen);

bool kv_delete(struct kv_store *s, const char *key, size_t klen, uint64_t h, int64_t now_ms);
void kv_entry_delete(struct kv_store *s, struct kv_entry *e);

void kv_set_expire(struct kv_store *s, struct kv_entry *e, int64_t when_ms);
/* @return true if a TTL was removed. */
bool kv_persist(struct kv_store *s, struct kv_entry *e);

size_t kv_store_count(const struct kv_store *s);
size_t kv_store_expires(const struct kv_store *s);
/* Bytes taken from malloc (a relaxed read is fine from another thread). */
uint64_t kv_store_used(const struct kv_store *s);
uint64_t kv_store_expired_total(const struct kv_store *s);
/* Lookups made and entries compared in them, since the store was made. */
void kv_store_probes(const struct kv_store *s, uint64_t *lookups, uint64_t *probes);

void kv_store_flush(struct kv_store *s);

/* Reverse-binary SCAN over buckets, as Redis's dictScan(): visits the bucket at
 * @p cursor, calls @p fn for each entry in it, returns the next cursor (0 at the end). */
uint64_t kv_store_scan(struct kv_store *s, uint64_t cursor,
		       void (*fn)(struct kv_entry *e, void *arg), void *arg);

/* Visit every entry (KEYS). @p fn must not delete. */
void kv_store_foreach(struct kv_store *s, void (*fn)(struct kv_entry *e, void *arg), void *arg);

/* A random live entry, or NULL if the shard is empty; expired ones met are deleted. */
struct kv_entry *kv_store_random(struct kv_store *s, int64_t now_ms, uint64_t *rng);

/* One active expiry cycle: sample up to 20 keys with a TTL, delete the expired ones,
 * repeat while more than a quarter of a sample was expired, at most @p max_rounds times.
 * @return keys deleted. */
unsigned kv_store_expire_cycle(struct kv_store *s, int64_t now_ms, uint64_t *rng,
			       unsigned max_rounds);

/* Average TTL in ms over the keys with one (for INFO keyspace), 0 if none. */
int64_t kv_store_avg_ttl(const struct kv_store *s, int64_t now_ms);

/* Prefetch hints for a pipeline of lookups: the bucket of hash @p h, then (once that has
 * arrived) the first entry of its chain. Never fault; only hints. */
void kv_prefetch_bucket(const struct kv_store *s, uint64_t h);
void kv_prefetch_entry(const struct kv_store *s, uint64_t h);

/* xorshift64* for sampling. */
uint64_t kv_rand(uint64_t *state);

#endif /* CR_KV_STORE_H */
