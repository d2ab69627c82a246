/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One shard of the keyspace: a table of keys to typed values (strings, lists, sets,
 * sorted sets, hashes) with optional expiry times, owned and touched by one lcore only.
 *
 * The table is kdict.h's: chained, so that SCAN can use Redis's reverse-binary cursor (a
 * key present from the first call to the last is returned at least once even if the
 * table is resized in between), and resized incrementally, so that no command pays for
 * moving the whole table: each lookup moves a bucket, and the shard's timer moves more
 * for a bounded time (kv_store_rehash_for()).
 *
 * Keys are hashed with a keyed hash (kv_hash()): a client cannot choose keys that share a
 * bucket, so chains stay short whatever the keys.
 *
 * Expiry is Redis's: lazy (a lookup of an expired key deletes it and reports it absent)
 * and active (kv_store_expire_cycle() samples keys that have a TTL and deletes the
 * expired ones, repeating while more than a quarter of a sample was expired).
 *
 * A deleted value with more than 64 elements is not freed at once but queued and freed a
 * bounded number of elements at a time (kv_store_lazy_step()), as Redis's lazyfree does
 * on its thread; here the shard's own lcore does it between other work.
 *
 * Memory: what the store allocates is charged to the thread's counter (mem.h).
 */
#ifndef CR_KV_STORE_H
#define CR_KV_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kdict.h"

/*
 * 48 bytes before the key: what a value can hold is not stored but read from the
 * allocator (the room after the key in the entry's own block, or the heap block's usable
 * size), and the key's length sits in the node's spare word.
 */
struct kv_entry {
	union {
		struct kd_node node; /* in the table: chain and hash */
		struct {
			char node_words_[12];
			uint32_t klen; /* the node's aux word */
		};
	};
	int64_t expire;	   /* unix time in ms, or -1 */
	uint32_t exp_idx;  /* position in the expires array while expire != -1 */
	unsigned type : 4; /* enum kv_type (obj.h) */
	unsigned enc : 4;  /* enum kv_enc */
	unsigned lru : 24; /* access field (policy.h): LRU clock or LFU counter */
	size_t vlen;	   /* a string's length */
	union {
		char *val; /* a string: vlen bytes + NUL (for the number parsers), in the room
			    * after the key or in a heap block */
		void *obj; /* a collection: its type's object */
	};
	char key[]; /* klen bytes + NUL, then the room for a value inline */
};

struct kv_store;

/* The keyed hash of every key (SipHash-1-3, siphash.h), with a random per-process key. */
uint64_t kv_hash(const void *key, size_t len);
/* Replace the random key (--hash-seed, tests); before any lookup. */
void kv_hash_set_key(const uint8_t key[16]);

/* Redis's LRU clock: seconds, 24 bits (policy.c). */
unsigned kv_lru_clock(int64_t now_ms);

struct kv_store *kv_store_create(void);
void kv_store_destroy(struct kv_store *s);

/* The live entry for a key, or NULL; an expired one is deleted (lazy expiry). The
 * access is recorded (LRU) unless @p touch is false (TYPE, TTL, OBJECT...). */
struct kv_entry *kv_lookup_ex(struct kv_store *s, const char *key, size_t klen, uint64_t h,
			      int64_t now_ms, bool touch);
static inline struct kv_entry *
kv_lookup(struct kv_store *s, const char *key, size_t klen, uint64_t h, int64_t now_ms)
{
	return kv_lookup_ex(s, key, klen, h, now_ms, true);
}
/* As kv_lookup() but an expired entry is left in place and reported absent. */
struct kv_entry *kv_peek(struct kv_store *s, const char *key, size_t klen, uint64_t h,
			 int64_t now_ms);

/* Set key to a string (created or replaced, whatever its type). keepttl keeps an
 * existing TTL, else it goes. The encoding is Redis's for a value from a client: int,
 * embstr up to 44 bytes, else raw. @return the entry, or NULL (ENOMEM). */
struct kv_entry *kv_set(struct kv_store *s, const char *key, size_t klen, uint64_t h,
			const char *val, size_t vlen, bool keepttl, int64_t now_ms);

/* Make room for @p vlen value bytes in string @p e (new bytes zeroed), for APPEND and
 * SETRANGE; it becomes raw. @return 0 or -ENOMEM. */
int kv_value_resize(struct kv_store *s, struct kv_entry *e, size_t vlen);

/* Add a key holding collection @p obj of @p type / @p enc (the key must be absent or
 * expired). @return the entry, or NULL (ENOMEM: obj is not taken). */
struct kv_entry *kv_add_obj(struct kv_store *s, const char *key, size_t klen, uint64_t h,
			    unsigned type, unsigned enc, void *obj, int64_t now_ms);
/* Replace @p e's value with a collection (the old value is freed); its TTL goes unless
 * @p keepttl. */
void kv_entry_set_obj(struct kv_store *s, struct kv_entry *e, unsigned type, unsigned enc,
		      void *obj, bool keepttl);

/* Give @p e's value, TTL and access time to the key (@p key, @p klen) (replacing what it
 * held) and delete @p e: RENAME. @return the new entry, or NULL (ENOMEM: nothing
 * changed). */
struct kv_entry *kv_entry_rename(struct kv_store *s, struct kv_entry *e, const char *key,
				 size_t klen, uint64_t h, int64_t now_ms);

bool kv_delete(struct kv_store *s, const char *key, size_t klen, uint64_t h, int64_t now_ms);
void kv_entry_delete(struct kv_store *s, struct kv_entry *e);

void kv_set_expire(struct kv_store *s, struct kv_entry *e, int64_t when_ms);
/* @return true if a TTL was removed. */
bool kv_persist(struct kv_store *s, struct kv_entry *e);

size_t kv_store_count(const struct kv_store *s);
/* Bump @p versions[hash & @p mask] whenever a key is found expired and deleted (WATCH's
 * versions, txn.h); NULL: none. */
void kv_store_watch(struct kv_store *s, uint32_t *versions, uint32_t mask);
size_t kv_store_expires(const struct kv_store *s);
uint64_t kv_store_expired_total(const struct kv_store *s);
void kv_store_reset_expired(struct kv_store *s); /* CONFIG RESETSTAT */
/* Lookups made and entries compared in them, since the store was made. */
void kv_store_probes(const struct kv_store *s, uint64_t *lookups, uint64_t *probes);

/* Remove every key: at once, or (@p lazy) by queueing the old table for
 * kv_store_lazy_step(). */
void kv_store_flush(struct kv_store *s, bool lazy);

/* Values and tables queued for freeing, and one bounded step of freeing them (about
 * @p budget elements). @return true if more is queued. */
size_t kv_store_lazy_pending(const struct kv_store *s);
bool kv_store_lazy_step(struct kv_store *s, unsigned budget);

/* Move table buckets of a resize for about @p ns; @return true if one is under way. */
bool kv_store_rehash_for(struct kv_store *s, uint64_t ns);
bool kv_store_rehashing(const struct kv_store *s);

/* Reverse-binary SCAN over buckets, as Redis's dictScan(): visits the bucket(s) at
 * @p cursor, calls @p fn for each entry in them, returns the next cursor (0 at the end). */
uint64_t kv_store_scan(struct kv_store *s, uint64_t cursor,
		       void (*fn)(struct kv_entry *e, void *arg), void *arg);

/* Visit every entry (KEYS). @p fn must not delete. */
void kv_store_foreach(struct kv_store *s, void (*fn)(struct kv_entry *e, void *arg), void *arg);

/* A random live entry, or NULL if the shard is empty; expired ones met are deleted. */
struct kv_entry *kv_store_random(struct kv_store *s, int64_t now_ms, uint64_t *rng);

/* Before an expired key is deleted (by a lookup, RANDOMKEY or the active cycle), ask
 * @p pinned (NULL: never); a key it holds stays, and the lookup that found it expired
 * answers as if it were gone. A transaction holding the key keeps it so (txlock.c): it
 * runs at its frozen time, as Redis's EXEC does. */
void kv_store_pin(struct kv_store *s, bool (*pinned)(void *arg, const char *key, size_t klen),
		  void *arg);

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

/* Eviction (evict.c). A random entry: of every key, or (@p with_ttl) of those with a
 * TTL; NULL if there is none. Expired ones are returned too, as Redis samples them. */
struct kv_entry *kv_store_sample(struct kv_store *s, bool with_ttl, uint64_t *rng);
/* Is @p e, seen with hash @p h (and maybe freed since), still an entry of the table? It
 * is not read unless it is. */
bool kv_store_holds(struct kv_store *s, const struct kv_entry *e, uint64_t h);
/* May @p e be deleted now (no transaction holds it: kv_store_pin())? */
bool kv_store_may_delete(const struct kv_store *s, const struct kv_entry *e);
/* Delete @p e as evicted: WATCH sees its key modified; a big value is freed lazily. */
void kv_store_evict(struct kv_store *s, struct kv_entry *e);

/* xorshift64* for sampling. */
uint64_t kv_rand(uint64_t *state);

#endif /* CR_KV_STORE_H */
