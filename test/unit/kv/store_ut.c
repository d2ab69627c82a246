/* SPDX-License-Identifier: BSD-3-Clause */
/* app/cr-kv/store.c: the shard's hash table, expiry, SCAN cursor and memory count. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"
#include "obj.h"
#include "store.h"
#include "ut_cunit.h"

#define NOW 1000000

static struct kv_mem mem; /* what the stores of this thread take */

static uint64_t
used(void)
{
	return (uint64_t)kv_mem_used(&mem);
}

static int
bind_mem(void)
{
	kv_mem_bind(&mem);
	return 0;
}

static struct kv_entry *
put(struct kv_store *s, const char *k, const char *v)
{
	return kv_set(s, k, strlen(k), kv_hash(k, strlen(k)), v, strlen(v), false, NOW);
}

static struct kv_entry *
get(struct kv_store *s, const char *k, int64_t now)
{
	return kv_lookup(s, k, strlen(k), kv_hash(k, strlen(k)), now);
}

static void
test_set_get_delete(void)
{
	struct kv_store *s = kv_store_create();
	uint64_t base;
	struct kv_entry *e;

	/* The table is made by the first insert: take the base with it. */
	CU_ASSERT_PTR_NOT_NULL_FATAL(put(s, "first", "v"));
	CU_ASSERT(kv_delete(s, "first", 5, kv_hash("first", 5), NOW));
	base = used();

	CU_ASSERT_PTR_NULL(get(s, "a", NOW));
	e = put(s, "a", "1");
	CU_ASSERT_PTR_NOT_NULL_FATAL(e);
	CU_ASSERT(used() > base);
	CU_ASSERT_EQUAL(kv_store_count(s), 1);
	e = put(s, "a", "a much longer value than before");
	CU_ASSERT_EQUAL(kv_store_count(s), 1);
	e = get(s, "a", NOW);
	CU_ASSERT_PTR_NOT_NULL_FATAL(e);
	CU_ASSERT_EQUAL(e->vlen, 31);
	CU_ASSERT_STRING_EQUAL(e->val, "a much longer value than before");
	CU_ASSERT(kv_delete(s, "a", 1, kv_hash("a", 1), NOW));
	CU_ASSERT(!kv_delete(s, "a", 1, kv_hash("a", 1), NOW));
	CU_ASSERT_EQUAL(kv_store_count(s), 0);
	CU_ASSERT(used() <= base); /* the table may have shrunk below its first size */
	kv_store_destroy(s);
}

/* Grow to many keys and shrink back: every key stays reachable; memory returns. */
static void
test_resize(void)
{
	struct kv_store *s = kv_store_create();
	uint64_t base = used();
	char k[32];
	int i;

	for (i = 0; i < 20000; i++) {
		snprintf(k, sizeof(k), "key:%d", i);
		CU_ASSERT_PTR_NOT_NULL_FATAL(put(s, k, k));
	}
	CU_ASSERT_EQUAL(kv_store_count(s), 20000);
	for (i = 0; i < 20000; i += 7) {
		struct kv_entry *e;

		snprintf(k, sizeof(k), "key:%d", i);
		e = get(s, k, NOW);
		CU_ASSERT_PTR_NOT_NULL_FATAL(e);
		CU_ASSERT_STRING_EQUAL(e->val, k);
	}
	for (i = 0; i < 20000; i++) {
		snprintf(k, sizeof(k), "key:%d", i);
		CU_ASSERT(kv_delete(s, k, strlen(k), kv_hash(k, strlen(k)), NOW));
	}
	CU_ASSERT_EQUAL(kv_store_count(s), 0);
	while (kv_store_rehash_for(s, 1000000000ull))
		;
	/* Back to the smallest table: the same sizes asked of malloc, though a reused chunk
	 * can be a little bigger (malloc_usable_size) than the first one was. */
	CU_ASSERT(used() <= base + 256);
	kv_store_destroy(s);
}

/* Short values live in the entry, long ones on the heap; a value moves between the two
 * as it is overwritten, and memory follows. */
static void
test_inline_values(void)
{
	struct kv_store *s = kv_store_create();
	uint64_t base = used(), small;
	char big[300];
	struct kv_entry *e = put(s, "k", "short");

	CU_ASSERT_PTR_NOT_NULL_FATAL(e);
	CU_ASSERT(e->val == e->key + 2);
	small = used();
	memset(big, 'b', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	e = put(s, "k", big);
	CU_ASSERT(e->val != e->key + 2);
	CU_ASSERT_STRING_EQUAL(e->val, big);
	CU_ASSERT(used() > small);
	e = put(s, "k", "tiny");
	CU_ASSERT(e->val == e->key + 2);
	CU_ASSERT_STRING_EQUAL(get(s, "k", NOW)->val, "tiny");
	CU_ASSERT_EQUAL(used(), small);
	/* APPEND past the inline room moves the value out, keeping its bytes. */
	CU_ASSERT_EQUAL_FATAL(kv_value_resize(s, e, 200), 0);
	CU_ASSERT(memcmp(e->val, "tiny\0\0", 6) == 0);
	CU_ASSERT(kv_delete(s, "k", 1, kv_hash("k", 1), NOW));
	CU_ASSERT(used() <= base + 64);
	kv_store_destroy(s);
}

static void
test_value_resize(void)
{
	struct kv_store *s = kv_store_create();
	struct kv_entry *e = put(s, "k", "ab");

	CU_ASSERT_EQUAL_FATAL(kv_value_resize(s, e, 10), 0);
	CU_ASSERT_EQUAL(e->vlen, 10);
	CU_ASSERT(memcmp(e->val, "ab\0\0\0\0\0\0\0\0", 11) == 0);
	kv_store_destroy(s);
}

/* A read of an expired key deletes it (lazy expiry); peek reports it absent only. */
static void
test_lazy_expiry(void)
{
	struct kv_store *s = kv_store_create();
	struct kv_entry *e = put(s, "t", "v");

	kv_set_expire(s, e, NOW + 100);
	CU_ASSERT_EQUAL(kv_store_expires(s), 1);
	CU_ASSERT_PTR_NOT_NULL(get(s, "t", NOW + 99));
	CU_ASSERT_PTR_NULL(kv_peek(s, "t", 1, kv_hash("t", 1), NOW + 100));
	CU_ASSERT_EQUAL(kv_store_count(s), 1);
	CU_ASSERT_PTR_NULL(get(s, "t", NOW + 100));
	CU_ASSERT_EQUAL(kv_store_count(s), 0);
	CU_ASSERT_EQUAL(kv_store_expires(s), 0);
	CU_ASSERT_EQUAL(kv_store_expired_total(s), 1);
	/* SET without KEEPTTL drops a TTL; PERSIST too. */
	e = put(s, "t", "v");
	kv_set_expire(s, e, NOW + 100);
	e = kv_set(s, "t", 1, kv_hash("t", 1), "w", 1, true, NOW);
	CU_ASSERT_EQUAL(e->expire, NOW + 100);
	e = put(s, "t", "x");
	CU_ASSERT_EQUAL(e->expire, -1);
	CU_ASSERT_EQUAL(kv_store_expires(s), 0);
	kv_set_expire(s, e, NOW + 5);
	CU_ASSERT(kv_persist(s, e));
	CU_ASSERT(!kv_persist(s, e));
	kv_store_destroy(s);
}

/* Active expiry: sampling removes expired keys that nobody reads, and leaves the rest. */
static void
test_active_expiry(void)
{
	struct kv_store *s = kv_store_create();
	uint64_t rng = 42;
	unsigned total = 0, i;
	char k[32];

	for (i = 0; i < 1000; i++) {
		struct kv_entry *e;

		snprintf(k, sizeof(k), "k%u", i);
		e = put(s, k, "v");
		if (i < 800)
			kv_set_expire(s, e, NOW + 10);
		else if (i < 900)
			kv_set_expire(s, e, NOW + 1000000);
	}
	CU_ASSERT_EQUAL(kv_store_expires(s), 900);
	CU_ASSERT(kv_store_avg_ttl(s, NOW) > 0);
	for (i = 0; i < 200 && kv_store_count(s) > 200; i++)
		total += kv_store_expire_cycle(s, NOW + 20, &rng, 16);
	CU_ASSERT_EQUAL(total, 800);
	CU_ASSERT_EQUAL(kv_store_count(s), 200);
	CU_ASSERT_EQUAL(kv_store_expires(s), 100);
	/* Nothing expired: one sample, nothing removed. */
	CU_ASSERT_EQUAL(kv_store_expire_cycle(s, NOW + 20, &rng, 16), 0);
	kv_store_destroy(s);
}

/* Keys a transaction holds ("p..."): expired, never deleted until it lets them go. */
static bool
pin_p(void *arg, const char *key, size_t len)
{
	return *(bool *)arg && len > 0 && key[0] == 'p';
}

static void
test_pinned_expiry(void)
{
	struct kv_store *s = kv_store_create();
	uint64_t rng = 7;
	bool holding = true;
	unsigned i;
	char k[32];

	kv_store_pin(s, pin_p, &holding);
	for (i = 0; i < 40; i++) {
		snprintf(k, sizeof(k), "%c%u", i < 20 ? 'p' : 'q', i);
		kv_set_expire(s, put(s, k, "v"), NOW + 10);
	}
	for (i = 0; i < 50; i++)
		kv_store_expire_cycle(s, NOW + 20, &rng, 16);
	CU_ASSERT_EQUAL(kv_store_count(s), 20); /* the q's went, the p's stay */
	CU_ASSERT_PTR_NULL(kv_lookup_ex(s, "p0", 2, kv_hash("p0", 2), NOW + 20, false));
	CU_ASSERT_PTR_NULL(kv_store_random(s, NOW + 20, &rng)); /* gone to a reader... */
	CU_ASSERT_EQUAL(kv_store_count(s), 20);			 /* ... but not deleted */
	CU_ASSERT_PTR_NOT_NULL(kv_lookup_ex(s, "p0", 2, kv_hash("p0", 2), NOW + 5, false));
	holding = false; /* released: the next cycle deletes them */
	for (i = 0; i < 50 && kv_store_count(s) > 0; i++)
		kv_store_expire_cycle(s, NOW + 20, &rng, 16);
	CU_ASSERT_EQUAL(kv_store_count(s), 0);
	kv_store_destroy(s);
}

struct seen {
	unsigned char *hit;
	int n;
};

static void
mark(struct kv_entry *e, void *arg)
{
	struct seen *w = arg;
	int i = atoi(e->key + 1);

	w->hit[i]++;
	w->n++;
}

/* SCAN's guarantee: a key present from start to end is returned at least once, even
 * when the table grows (and shrinks) between calls. */
static void
test_scan_resize(void)
{
	struct kv_store *s = kv_store_create();
	unsigned char hit[6000] = {0};
	struct seen w = {hit, 0};
	uint64_t cursor = 0;
	int i, steps = 0;
	char k[32];

	for (i = 0; i < 1000; i++) {
		snprintf(k, sizeof(k), "k%d", i);
		put(s, k, "v");
	}
	do {
		cursor = kv_store_scan(s, cursor, mark, &w);
		steps++;
		if (steps == 50) /* grow: 1000 -> 6000 keys */
			for (i = 1000; i < 6000; i++) {
				snprintf(k, sizeof(k), "k%d", i);
				put(s, k, "v");
			}
		if (steps == 3000) /* shrink: drop the new ones again */
			for (i = 1000; i < 6000; i++) {
				snprintf(k, sizeof(k), "k%d", i);
				kv_delete(s, k, strlen(k), kv_hash(k, strlen(k)), NOW);
			}
	} while (cursor != 0 && steps < 100000);
	CU_ASSERT_EQUAL(cursor, 0);
	for (i = 0; i < 1000; i++)
		CU_ASSERT(hit[i] >= 1);
	kv_store_destroy(s);
}

static void
test_random_and_flush(void)
{
	struct kv_store *s = kv_store_create();
	uint64_t rng = 7;
	struct kv_entry *e;

	CU_ASSERT_PTR_NULL(kv_store_random(s, NOW, &rng));
	e = put(s, "gone", "v");
	kv_set_expire(s, e, NOW - 1);
	put(s, "here", "v");
	e = kv_store_random(s, NOW, &rng);
	CU_ASSERT_PTR_NOT_NULL_FATAL(e);
	CU_ASSERT_STRING_EQUAL(e->key, "here");
	kv_store_flush(s, false);
	CU_ASSERT_EQUAL(kv_store_count(s), 0);
	CU_ASSERT_EQUAL(kv_store_scan(s, 0, mark, NULL), 0);
	kv_store_destroy(s);
}

/*
 * Hash flooding (issue 14 item 11). The hash cr-kv used before SipHash, kept here to
 * build a key set that collides under it: 8-byte keys whose old hashes share their low
 * 20 bits, i.e. one bucket in any table of up to a million buckets. Every step of the
 * old hash of an 8-byte key is invertible, so each key is made from the hash wanted.
 */
static uint64_t
old_hash8(const uint8_t k[8])
{
	uint64_t h = 0x9E3779B97F4A7C15ULL ^ (8 * 0xff51afd7ed558ccdULL), w;

	memcpy(&w, k, 8);
	h = (h ^ w) * 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 31;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

static uint64_t
mul_inverse(uint64_t c)
{
	uint64_t inv = c;
	int i;

	for (i = 0; i < 6; i++) /* Newton: each step doubles the correct low bits */
		inv *= 2 - c * inv;
	return inv;
}

static void
old_hash8_preimage(uint64_t h, uint8_t k[8])
{
	uint64_t w;

	h ^= h >> 33;
	h *= mul_inverse(0xc4ceb9fe1a85ec53ULL);
	h ^= h >> 33;
	h *= mul_inverse(0xff51afd7ed558ccdULL);
	h ^= h >> 33;
	h ^= (h >> 31) ^ (h >> 62);
	h *= mul_inverse(0xbf58476d1ce4e5b9ULL);
	w = h ^ 0x9E3779B97F4A7C15ULL ^ (8 * 0xff51afd7ed558ccdULL);
	memcpy(k, &w, 8);
}

#define FLOOD_KEYS 20000

/* The colliding set does collide under the old hash, and costs the store (keyed now)
 * about one comparison per lookup, where the old hash cost FLOOD_KEYS / 2. */
static void
test_flood_resistance(void)
{
	static uint8_t keys[FLOOD_KEYS][8];
	struct kv_store *s = kv_store_create();
	uint64_t l0, p0, l1, p1;
	unsigned i;

	for (i = 0; i < FLOOD_KEYS; i++) {
		old_hash8_preimage((uint64_t)i << 20 | 0x5a5a5, keys[i]);
		CU_ASSERT_EQUAL_FATAL(old_hash8(keys[i]) & 0xfffff, 0x5a5a5);
	}
	for (i = 0; i < FLOOD_KEYS; i++)
		CU_ASSERT_PTR_NOT_NULL_FATAL(
		    kv_set(s, (const char *)keys[i], 8, kv_hash(keys[i], 8), "v", 1, false, NOW));
	kv_store_probes(s, &l0, &p0);
	for (i = 0; i < FLOOD_KEYS; i++)
		CU_ASSERT_PTR_NOT_NULL(
		    kv_lookup(s, (const char *)keys[i], 8, kv_hash(keys[i], 8), NOW));
	kv_store_probes(s, &l1, &p1);
	CU_ASSERT_EQUAL(l1 - l0, FLOOD_KEYS);
	printf("\n    %u colliding keys: %.2f entries compared per lookup\n", FLOOD_KEYS,
	       (double)(p1 - p0) / (double)(l1 - l0));
	CU_ASSERT((p1 - p0) < 3 * (uint64_t)FLOOD_KEYS);
	kv_store_destroy(s);
}

/* The hash is keyed: another key gives other hashes (so another layout). */
static void
test_hash_key(void)
{
	static const uint8_t k1[16] = {1}, k2[16] = {2};
	uint64_t a, b;

	kv_hash_set_key(k1);
	a = kv_hash("some key", 8);
	CU_ASSERT_EQUAL(kv_hash("some key", 8), a);
	kv_hash_set_key(k2);
	b = kv_hash("some key", 8);
	CU_ASSERT_NOT_EQUAL(a, b);
	kv_hash_set_key(k1);
	CU_ASSERT_EQUAL(kv_hash("some key", 8), a);
}

static const struct ut_case cases[] = {
    UT_CASE(test_set_get_delete), UT_CASE(test_resize),		  UT_CASE(test_value_resize),
    UT_CASE(test_inline_values),  UT_CASE(test_lazy_expiry),	  UT_CASE(test_active_expiry), UT_CASE(test_pinned_expiry),
    UT_CASE(test_scan_resize),	  UT_CASE(test_random_and_flush), UT_CASE(test_flood_resistance),
    UT_CASE(test_hash_key),
};

UT_MAIN("kv_store", cases, bind_mem, NULL)
