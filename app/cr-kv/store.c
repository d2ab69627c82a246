/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shard's hash table (see store.h for the why of chaining and one-step resizes).
 */
#include <errno.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "siphash.h"
#include "store.h"

#define MIN_BUCKETS   16u
#define EXPIRE_SAMPLE 20u
/* Values up to this long live inside their entry: one allocation and one cache miss less
 * per key (a GET reads the key and the value from the same block). */
#define INLINE_MAX 64u

struct kv_store {
	struct kv_entry **buckets;
	uint64_t mask; /* buckets - 1 */
	size_t count;
	struct kv_entry **exp; /* entries with a TTL, for sampling */
	size_t nexp, expcap;
	/* Written by the owner only; other lcores read it (INFO, --maxmemory). */
	_Atomic uint64_t used;
	uint64_t expired_total;
	uint64_t lookups, probes; /* entries compared per lookup, for flood tests */
};

uint64_t
kv_rand(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545F4914F6CDD1DULL;
}

/*
 * The key of the keyed hash: random per process (getrandom()), so that nobody outside
 * can compute which keys collide in a table or share a shard. Set before any lcore runs
 * (at load, or by --hash-seed while options are parsed) and only read after.
 */
static uint8_t hash_key[16];

__attribute__((constructor)) static void
hash_key_init(void)
{
	size_t got = 0;

	while (got < sizeof(hash_key)) {
		ssize_t n = getrandom(hash_key + got, sizeof(hash_key) - got, 0);

		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (got < sizeof(hash_key)) {
		/* No getrandom (a kernel before 3.17): weaker, but still not known outside. */
		uint64_t mix[2] = {(uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)&got,
				   (uint64_t)getpid() * 0x9E3779B97F4A7C15ULL ^ (uint64_t)clock()};

		memcpy(hash_key, mix, sizeof(hash_key));
	}
}

void
kv_hash_set_key(const uint8_t key[16])
{
	memcpy(hash_key, key, sizeof(hash_key));
}

uint64_t
kv_hash(const void *key, size_t len)
{
	return kv_siphash(hash_key, key, len);
}

static void
used_add(struct kv_store *s, void *p, int sign)
{
	uint64_t n = p != NULL ? malloc_usable_size(p) : 0;
	uint64_t u = atomic_load_explicit(&s->used, memory_order_relaxed);

	/* relaxed: a statistic read by other lcores; orders nothing */
	atomic_store_explicit(&s->used, sign > 0 ? u + n : u - n, memory_order_relaxed);
}

struct kv_store *
kv_store_create(void)
{
	struct kv_store *s = calloc(1, sizeof(*s));

	if (s == NULL)
		return NULL;
	s->buckets = calloc(MIN_BUCKETS, sizeof(*s->buckets));
	if (s->buckets == NULL) {
		free(s);
		return NULL;
	}
	s->mask = MIN_BUCKETS - 1;
	used_add(s, s->buckets, 1);
	return s;
}

static void resize(struct kv_store *s, uint64_t n);

static char *
inline_val(struct kv_entry *e)
{
	return e->key + e->klen + 1;
}

/* Give back a heap value block, if the value has one. */
static void
heap_val_free(struct kv_store *s, struct kv_entry *e)
{
	if (e->val != NULL && e->val != inline_val(e)) {
		used_add(s, e->val, -1);
		free(e->val);
	}
	e->val = NULL;
}

static void
entry_free(struct kv_store *s, struct kv_entry *e)
{
	heap_val_free(s, e);
	used_add(s, e, -1);
	free(e);
}

void
kv_store_flush(struct kv_store *s)
{
	uint64_t i;

	for (i = 0; i <= s->mask; i++) {
		struct kv_entry *e = s->buckets[i], *n;

		for (; e != NULL; e = n) {
			n = e->next;
			entry_free(s, e);
		}
		s->buckets[i] = NULL;
	}
	s->count = 0;
	s->nexp = 0;
	if (s->mask + 1 > MIN_BUCKETS)
		resize(s, MIN_BUCKETS);
}

void
kv_store_destroy(struct kv_store *s)
{
	if (s == NULL)
		return;
	kv_store_flush(s);
	free(s->buckets);
	free(s->exp);
	free(s);
}

/* One-step rehash into @p n buckets; on ENOMEM the table just stays as it is. */
static void
resize(struct kv_store *s, uint64_t n)
{
	struct kv_entry **nb = calloc(n, sizeof(*nb));
	uint64_t i;

	if (nb == NULL)
		return;
	for (i = 0; i <= s->mask; i++) {
		struct kv_entry *e = s->buckets[i], *next;

		for (; e != NULL; e = next) {
			next = e->next;
			e->next = nb[e->hash & (n - 1)];
			nb[e->hash & (n - 1)] = e;
		}
	}
	used_add(s, s->buckets, -1);
	free(s->buckets);
	s->buckets = nb;
	s->mask = n - 1;
	used_add(s, nb, 1);
}

static struct kv_entry **
find_slot(struct kv_store *s, const char *key, size_t klen, uint64_t h)
{
	struct kv_entry **pp = &s->buckets[h & s->mask];
	uint64_t n = 0;

	for (; *pp != NULL; pp = &(*pp)->next) {
		struct kv_entry *e = *pp;

		n++;
		if (e->hash == h && e->klen == klen && memcmp(e->key, key, klen) == 0)
			break;
	}
	s->lookups++;
	s->probes += n;
	return pp;
}

static void
exp_remove(struct kv_store *s, struct kv_entry *e)
{
	struct kv_entry *last;

	if (e->expire == -1)
		return;
	last = s->exp[--s->nexp];
	s->exp[e->exp_idx] = last;
	last->exp_idx = e->exp_idx;
	e->expire = -1;
}

static void
unlink_entry(struct kv_store *s, struct kv_entry **pp)
{
	struct kv_entry *e = *pp;

	*pp = e->next;
	exp_remove(s, e);
	s->count--;
	entry_free(s, e);
	if (s->mask + 1 > MIN_BUCKETS && s->count < (s->mask + 1) / 8)
		resize(s, (s->mask + 1) / 2);
}

static bool
expired(const struct kv_entry *e, int64_t now_ms)
{
	return e->expire != -1 && e->expire <= now_ms;
}

struct kv_entry *
kv_peek(struct kv_store *s, const char *key, size_t klen, uint64_t h, int64_t now_ms)
{
	struct kv_entry *e = *find_slot(s, key, klen, h);

	return e != NULL && !expired(e, now_ms) ? e : NULL;
}

struct kv_entry *
kv_lookup(struct kv_store *s, const char *key, size_t klen, uint64_t h, int64_t now_ms)
{
	struct kv_entry **pp = find_slot(s, key, klen, h);

	if (*pp == NULL)
		return NULL;
	if (expired(*pp, now_ms)) {
		unlink_entry(s, pp);
		s->expired_total++;
		return NULL;
	}
	return *pp;
}

static int
value_store(struct kv_store *s, struct kv_entry *e, const char *val, size_t vlen)
{
	if (vlen <= e->icap) {
		heap_val_free(s, e);
		e->val = inline_val(e);
		e->vcap = e->icap;
	} else if (e->val == NULL || e->val == inline_val(e) || vlen > e->vcap ||
		   (e->vcap > 64 && vlen < e->vcap / 2)) {
		char *v = malloc(vlen + 1);

		if (v == NULL)
			return -ENOMEM;
		heap_val_free(s, e);
		e->val = v;
		e->vcap = vlen;
		used_add(s, v, 1);
	}
	memcpy(e->val, val, vlen);
	e->val[vlen] = '\0';
	e->vlen = vlen;
	return 0;
}

struct kv_entry *
kv_set(struct kv_store *s, const char *key, size_t klen, uint64_t h, const char *val, size_t vlen,
       bool keepttl, int64_t now_ms)
{
	struct kv_entry **pp = find_slot(s, key, klen, h), *e = *pp;

	if (e != NULL && expired(e, now_ms)) {
		unlink_entry(s, pp);
		s->expired_total++;
		pp = find_slot(s, key, klen, h);
		e = NULL;
	}
	if (e != NULL) {
		if (value_store(s, e, val, vlen) != 0)
			return NULL;
		if (!keepttl)
			exp_remove(s, e);
		return e;
	}
	{
		uint32_t icap = vlen <= INLINE_MAX ? (uint32_t)((vlen + 8) & ~7u) : 0;

		e = malloc(sizeof(*e) + klen + 1 + icap + 1);
		if (e == NULL)
			return NULL;
		memset(e, 0, sizeof(*e));
		e->icap = icap;
	}
	e->hash = h;
	e->expire = -1;
	e->klen = (uint32_t)klen;
	memcpy(e->key, key, klen);
	e->key[klen] = '\0';
	if (value_store(s, e, val, vlen) != 0) {
		free(e);
		return NULL;
	}
	used_add(s, e, 1);
	e->next = NULL;
	*pp = e;
	s->count++;
	if (s->count > s->mask + 1)
		resize(s, (s->mask + 1) * 2);
	return e;
}

int
kv_value_resize(struct kv_store *s, struct kv_entry *e, size_t vlen)
{
	if (vlen > e->vcap) {
		size_t cap = vlen < 1024 * 1024 ? vlen * 2 : vlen + vlen / 4;
		char *v;

		if (e->val == inline_val(e)) {
			/* Outgrows the entry: move to a heap block. */
			v = malloc(cap + 1);
			if (v == NULL)
				return -ENOMEM;
			memcpy(v, e->val, e->vlen + 1);
		} else {
			used_add(s, e->val, -1);
			v = realloc(e->val, cap + 1);
			if (v == NULL) {
				used_add(s, e->val, 1);
				return -ENOMEM;
			}
		}
		e->val = v;
		e->vcap = cap;
		used_add(s, v, 1);
	}
	if (vlen > e->vlen)
		memset(e->val + e->vlen, 0, vlen - e->vlen);
	e->vlen = vlen;
	e->val[vlen] = '\0';
	return 0;
}

bool
kv_delete(struct kv_store *s, const char *key, size_t klen, uint64_t h, int64_t now_ms)
{
	struct kv_entry **pp = find_slot(s, key, klen, h);
	bool live;

	if (*pp == NULL)
		return false;
	live = !expired(*pp, now_ms);
	if (!live)
		s->expired_total++;
	unlink_entry(s, pp);
	return live;
}

void
kv_entry_delete(struct kv_store *s, struct kv_entry *e)
{
	struct kv_entry **pp = find_slot(s, e->key, e->klen, e->hash);

	if (*pp == e)
		unlink_entry(s, pp);
}

void
kv_set_expire(struct kv_store *s, struct kv_entry *e, int64_t when_ms)
{
	if (e->expire == -1) {
		if (s->nexp == s->expcap) {
			size_t ncap = s->expcap ? s->expcap * 2 : 64;
			struct kv_entry **n;

			/* Count the old block out before realloc() may free it. */
			used_add(s, s->exp, -1);
			n = realloc(s->exp, ncap * sizeof(*n));
			if (n == NULL) {
				/* The key keeps no TTL; Redis would abort on a failed malloc. */
				used_add(s, s->exp, 1);
				return;
			}
			s->exp = n;
			s->expcap = ncap;
			used_add(s, n, 1);
		}
		e->exp_idx = (uint32_t)s->nexp;
		s->exp[s->nexp++] = e;
	}
	e->expire = when_ms;
}

bool
kv_persist(struct kv_store *s, struct kv_entry *e)
{
	if (e->expire == -1)
		return false;
	exp_remove(s, e);
	return true;
}

size_t
kv_store_count(const struct kv_store *s)
{
	return s->count;
}

size_t
kv_store_expires(const struct kv_store *s)
{
	return s->nexp;
}

uint64_t
kv_store_used(const struct kv_store *s)
{
	/* relaxed: pairs with the relaxed store in used_add() */
	return atomic_load_explicit(&s->used, memory_order_relaxed);
}

void
kv_store_probes(const struct kv_store *s, uint64_t *lookups, uint64_t *probes)
{
	*lookups = s->lookups;
	*probes = s->probes;
}

uint64_t
kv_store_expired_total(const struct kv_store *s)
{
	return s->expired_total;
}

static uint64_t
rev64(uint64_t v)
{
	v = ((v >> 1) & 0x5555555555555555ULL) | ((v & 0x5555555555555555ULL) << 1);
	v = ((v >> 2) & 0x3333333333333333ULL) | ((v & 0x3333333333333333ULL) << 2);
	v = ((v >> 4) & 0x0F0F0F0F0F0F0F0FULL) | ((v & 0x0F0F0F0F0F0F0F0FULL) << 4);
	return __builtin_bswap64(v);
}

void
kv_prefetch_bucket(const struct kv_store *s, uint64_t h)
{
	__builtin_prefetch(&s->buckets[h & s->mask]);
}

void
kv_prefetch_entry(const struct kv_store *s, uint64_t h)
{
	const struct kv_entry *e = s->buckets[h & s->mask];

	if (e != NULL)
		__builtin_prefetch(e);
}

uint64_t
kv_store_scan(struct kv_store *s, uint64_t v, void (*fn)(struct kv_entry *e, void *arg), void *arg)
{
	struct kv_entry *e;

	if (s->count == 0)
		return 0; /* as dictScan() on an empty table */
	for (e = s->buckets[v & s->mask]; e != NULL; e = e->next)
		fn(e, arg);
	/* Increment the reversed cursor over the masked bits (dictScan). */
	v |= ~s->mask;
	v = rev64(v);
	v++;
	v = rev64(v);
	return v;
}

void
kv_store_foreach(struct kv_store *s, void (*fn)(struct kv_entry *e, void *arg), void *arg)
{
	uint64_t i;
	struct kv_entry *e;

	for (i = 0; i <= s->mask; i++)
		for (e = s->buckets[i]; e != NULL; e = e->next)
			fn(e, arg);
}

struct kv_entry *
kv_store_random(struct kv_store *s, int64_t now_ms, uint64_t *rng)
{
	unsigned tries;

	for (tries = 0; s->count > 0 && tries < 1000000; tries++) {
		struct kv_entry **pp = &s->buckets[kv_rand(rng) & s->mask], *e;
		unsigned n = 0, pick;

		for (e = *pp; e != NULL; e = e->next)
			n++;
		if (n == 0)
			continue;
		pick = (unsigned)(kv_rand(rng) % n);
		while (pick-- > 0)
			pp = &(*pp)->next;
		if (!expired(*pp, now_ms))
			return *pp;
		unlink_entry(s, pp);
		s->expired_total++;
	}
	return NULL;
}

unsigned
kv_store_expire_cycle(struct kv_store *s, int64_t now_ms, uint64_t *rng, unsigned max_rounds)
{
	unsigned total = 0, round;

	for (round = 0; round < max_rounds && s->nexp > 0; round++) {
		unsigned i, n = s->nexp < EXPIRE_SAMPLE ? (unsigned)s->nexp : EXPIRE_SAMPLE;
		unsigned gone = 0;

		for (i = 0; i < n && s->nexp > 0; i++) {
			struct kv_entry *e = s->exp[kv_rand(rng) % s->nexp];

			if (expired(e, now_ms)) {
				kv_entry_delete(s, e);
				s->expired_total++;
				gone++;
			}
		}
		total += gone;
		if (gone * 4 <= n)
			break;
	}
	return total;
}

int64_t
kv_store_avg_ttl(const struct kv_store *s, int64_t now_ms)
{
	long double sum = 0;
	size_t i, n = 0;

	for (i = 0; i < s->nexp; i++) {
		int64_t t = s->exp[i]->expire - now_ms;

		if (t > 0) {
			sum += t;
			n++;
		}
	}
	return n ? (int64_t)(sum / n) : 0;
}
