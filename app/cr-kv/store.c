/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shard's keyspace (see store.h): entries in an incrementally rehashed table, their
 * string values, expiry, and the queue of values being freed lazily.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "mem.h"
#include "obj.h"
#include "policy.h"
#include "resp.h"
#include "siphash.h"
#include "store.h"

#define EXPIRE_SAMPLE 20u
/* Values up to this long live inside their entry: one allocation and one cache miss less
 * per key (a GET reads the key and the value from the same block). */
#define INLINE_MAX 64u

/* Something being freed a step at a time: a collection, or a whole old table. */
struct lazy {
	struct lazy *next;
	unsigned type, enc;
	void *obj;	     /* a collection, or NULL for a table */
	struct kdict table;  /* a flushed table, its entries still in it */
	struct kd_iter iter; /* where the table's freeing is */
};

struct kv_store {
	struct kdict d;
	struct kv_entry **exp; /* entries with a TTL, for sampling */
	size_t nexp, expcap;
	struct lazy *lazy_head, **lazy_tail;
	size_t lazy_n;
	uint64_t expired_total;
	uint64_t lookups, probes; /* entries compared per lookup, for flood tests */
	uint32_t *wver, wmask;	  /* WATCH's versions by key hash, or NULL (txn.h) */
	bool (*pinned)(void *arg, const char *key, size_t klen); /* kv_store_pin() */
	void *pin_arg;
	uint64_t rng; /* the LFU counter's coin (policy.h) */
};

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

uint64_t
kv_rand(uint64_t *state)
{
	return kd_rand(state);
}

static struct kv_entry *
entry_of(struct kd_node *n)
{
	return (struct kv_entry *)n; /* the node is the entry's first member */
}

struct kv_store *
kv_store_create(void)
{
	struct kv_store *s = kv_calloc(1, sizeof(*s));

	if (s == NULL)
		return NULL;
	/* No table yet: the first insert makes it, on the lcore whose memory counter it
	 * is charged to (the store itself is made by main(), before any lcore runs). */
	kd_init(&s->d);
	s->lazy_tail = &s->lazy_head;
	s->rng = kv_hash(&s, sizeof(s)) | 1;
	return s;
}

_Static_assert(offsetof(struct kv_entry, klen) == offsetof(struct kd_node, aux),
	       "the key's length is the node's aux word");
_Static_assert(sizeof(struct kv_entry) == 48, "an entry's header is 48 bytes");

static char *
inline_val(struct kv_entry *e)
{
	return e->key + e->klen + 1;
}

/* Bytes of value (its NUL excluded) the entry's own block holds after the key. */
static size_t
inline_room(const struct kv_entry *e)
{
	size_t used = sizeof(*e) + e->klen + 2; /* the key's NUL and the value's */
	size_t have = kv_mem_usable(e);

	return have > used ? have - used : 0;
}

/* What a string's value may grow to in place, its NUL excluded. */
static size_t
val_cap(struct kv_entry *e)
{
	if (e->val == NULL)
		return 0;
	if (e->val == inline_val(e))
		return inline_room(e);
	return kv_mem_usable(e->val) - 1;
}

static bool
is_string(const struct kv_entry *e)
{
	return e->type == KV_T_STRING;
}

/* Give back a heap value block, if the value has one. */
static void
heap_val_free(struct kv_entry *e)
{
	if (e->val != NULL && e->val != inline_val(e))
		kv_free(e->val);
	e->val = NULL;
}

static void
lazy_push(struct kv_store *s, struct lazy *l)
{
	l->next = NULL;
	*s->lazy_tail = l;
	s->lazy_tail = &l->next;
	s->lazy_n++;
}

/* Free a collection now, or queue it if it is big. */
static void
obj_release(struct kv_store *s, unsigned type, unsigned enc, void *obj)
{
	struct lazy *l;

	if (kv_obj_elements(type, enc, obj) > KV_LAZYFREE_THRESHOLD &&
	    (l = kv_calloc(1, sizeof(*l))) != NULL) {
		l->type = type;
		l->enc = enc;
		l->obj = obj;
		lazy_push(s, l);
		return;
	}
	kv_obj_free(type, enc, obj);
}

/* Drop the entry's value, whatever its type; it is then an empty string. */
static void
value_drop(struct kv_store *s, struct kv_entry *e)
{
	if (is_string(e)) {
		heap_val_free(e);
	} else {
		obj_release(s, e->type, e->enc, e->obj);
		e->obj = NULL;
	}
	e->type = KV_T_STRING;
	e->enc = KV_ENC_RAW;
	e->vlen = 0;
}

static void
entry_free(struct kv_store *s, struct kv_entry *e)
{
	value_drop(s, e);
	kv_free(e);
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

void
kv_store_flush(struct kv_store *s, bool lazy)
{
	struct lazy *l = lazy ? kv_calloc(1, sizeof(*l)) : NULL;
	struct kd_iter it;
	struct kd_node *n;

	s->nexp = 0;
	if (l != NULL) {
		l->table = s->d;
		kd_iter_init(&l->table, &l->iter);
		lazy_push(s, l);
		kd_init(&s->d);
		return;
	}
	kd_iter_init(&s->d, &it);
	while ((n = kd_next(&it)) != NULL)
		entry_free(s, entry_of(n));
	kd_iter_end(&it);
	kd_release(&s->d);
}

void
kv_store_destroy(struct kv_store *s)
{
	if (s == NULL)
		return;
	kv_store_flush(s, false);
	while (kv_store_lazy_step(s, ~0u))
		;
	kv_free(s->exp);
	kv_free(s);
}

static bool
entry_eq(const struct kd_node *n, const void *key, size_t len)
{
	const struct kv_entry *e = (const struct kv_entry *)n;

	return e->klen == len && memcmp(e->key, key, len) == 0;
}

static struct kv_entry *
find(struct kv_store *s, const char *key, size_t klen, uint64_t h)
{
	uint64_t probes = s->d.probes;
	struct kd_node *n = kd_find(&s->d, h, key, klen, entry_eq);

	s->lookups++;
	s->probes += s->d.probes - probes;
	return n != NULL ? entry_of(n) : NULL;
}

static void
unlink_entry(struct kv_store *s, struct kv_entry *e)
{
	kd_unlink(&s->d, &e->node);
	exp_remove(s, e);
	entry_free(s, e);
	kd_shrink_if_sparse(&s->d);
}

static bool
expired(const struct kv_entry *e, int64_t now_ms)
{
	return e->expire != -1 && e->expire <= now_ms;
}

/* A key found expired is going: count it, and tell WATCH it was modified. */
static void
expire_note(struct kv_store *s, const struct kv_entry *e)
{
	s->expired_total++;
	if (s->wver != NULL)
		s->wver[e->node.hash & s->wmask]++;
}

void
kv_store_pin(struct kv_store *s, bool (*pinned)(void *arg, const char *key, size_t klen), void *arg)
{
	s->pinned = pinned;
	s->pin_arg = arg;
}

/* May the expired @p e be deleted now (not held by a transaction)? */
static bool
may_delete(const struct kv_store *s, const struct kv_entry *e)
{
	return s->pinned == NULL || !s->pinned(s->pin_arg, e->key, e->klen);
}

void
kv_store_watch(struct kv_store *s, uint32_t *versions, uint32_t mask)
{
	s->wver = versions;
	s->wmask = mask;
}

struct kv_entry *
kv_peek(struct kv_store *s, const char *key, size_t klen, uint64_t h, int64_t now_ms)
{
	struct kv_entry *e = find(s, key, klen, h);

	return e != NULL && !expired(e, now_ms) ? e : NULL;
}

struct kv_entry *
kv_lookup_ex(struct kv_store *s, const char *key, size_t klen, uint64_t h, int64_t now_ms,
	     bool touch)
{
	struct kv_entry *e = find(s, key, klen, h);

	if (e == NULL)
		return NULL;
	if (expired(e, now_ms)) {
		if (may_delete(s, e)) {
			expire_note(s, e);
			unlink_entry(s, e);
		}
		return NULL;
	}
	if (touch)
		e->lru = kv_access_touch(e->lru, now_ms, &s->rng) & 0xffffff;
	return e;
}

/* Redis's tryObjectEncoding() for a string from a client. */
static unsigned
string_encoding(const char *val, size_t vlen)
{
	long long v;

	if (vlen <= 20 && resp_string2ll(val, vlen, &v))
		return KV_ENC_INT;
	return vlen <= KV_EMBSTR_MAX ? KV_ENC_EMBSTR : KV_ENC_RAW;
}

static int
value_store(struct kv_entry *e, const char *val, size_t vlen)
{
	size_t cap;

	if (vlen <= inline_room(e)) {
		heap_val_free(e);
		e->val = inline_val(e);
	} else if (e->val == NULL || e->val == inline_val(e) || vlen > (cap = val_cap(e)) ||
		   (cap > 64 && vlen < cap / 2)) {
		char *v = kv_malloc(vlen + 1);

		if (v == NULL)
			return -ENOMEM;
		heap_val_free(e);
		e->val = v;
	}
	memcpy(e->val, val, vlen);
	e->val[vlen] = '\0';
	e->vlen = vlen;
	e->enc = string_encoding(val, vlen) & 0xf;
	return 0;
}

static struct kv_entry *
entry_new(const char *key, size_t klen, uint64_t h, uint32_t icap, int64_t now_ms)
{
	struct kv_entry *e = kv_malloc(sizeof(*e) + klen + 1 + icap + (icap ? 1 : 0));

	if (e == NULL)
		return NULL;
	memset(e, 0, sizeof(*e));
	e->node.hash = (uint32_t)h;
	e->expire = -1;
	e->klen = (uint32_t)klen;
	e->lru = kv_access_new(now_ms) & 0xffffff;
	memcpy(e->key, key, klen);
	e->key[klen] = '\0';
	return e;
}

static struct kv_entry *
insert(struct kv_store *s, struct kv_entry *e)
{
	if (kd_add(&s->d, &e->node) != 0) {
		entry_free(s, e);
		return NULL;
	}
	return e;
}

/* The entry for a key about to be written: the live one, or NULL (an expired one is
 * deleted first). */
static struct kv_entry *
find_for_write(struct kv_store *s, const char *key, size_t klen, uint64_t h, int64_t now_ms)
{
	struct kv_entry *e = find(s, key, klen, h);

	if (e != NULL && expired(e, now_ms)) {
		expire_note(s, e);
		unlink_entry(s, e);
		e = NULL;
	}
	return e;
}

struct kv_entry *
kv_set(struct kv_store *s, const char *key, size_t klen, uint64_t h, const char *val, size_t vlen,
       bool keepttl, int64_t now_ms)
{
	struct kv_entry *e = find_for_write(s, key, klen, h, now_ms);

	if (e != NULL) {
		if (!is_string(e))
			value_drop(s, e);
		if (value_store(e, val, vlen) != 0)
			return NULL;
		if (!keepttl)
			exp_remove(s, e);
		/* Redis: the write's lookup touches the key; under LFU the new value keeps
		 * the counter (dbOverwrite()) */
		e->lru = kv_access_touch(e->lru, now_ms, &s->rng) & 0xffffff;
		return e;
	}
	e = entry_new(key, klen, h, vlen <= INLINE_MAX ? (uint32_t)((vlen + 8) & ~7u) : 0, now_ms);
	if (e == NULL)
		return NULL;
	if (value_store(e, val, vlen) != 0) {
		kv_free(e);
		return NULL;
	}
	return insert(s, e);
}

struct kv_entry *
kv_add_obj(struct kv_store *s, const char *key, size_t klen, uint64_t h, unsigned type,
	   unsigned enc, void *obj, int64_t now_ms)
{
	struct kv_entry *e = find_for_write(s, key, klen, h, now_ms);

	if (e != NULL) {
		kv_entry_set_obj(s, e, type, enc, obj, false);
		return e;
	}
	e = entry_new(key, klen, h, 0, now_ms);
	if (e == NULL)
		return NULL;
	e->type = type & 0xf;
	e->enc = enc & 0xf;
	e->obj = obj;
	if (kd_add(&s->d, &e->node) != 0) {
		kv_free(e);
		return NULL;
	}
	return e;
}

void
kv_entry_set_obj(struct kv_store *s, struct kv_entry *e, unsigned type, unsigned enc, void *obj,
		 bool keepttl)
{
	value_drop(s, e);
	e->type = type & 0xf;
	e->enc = enc & 0xf;
	e->obj = obj;
	if (!keepttl)
		exp_remove(s, e);
}

int
kv_value_resize(struct kv_store *s, struct kv_entry *e, size_t vlen)
{
	(void)s;
	if (vlen > val_cap(e)) {
		size_t cap = vlen < 1024 * 1024 ? vlen * 2 : vlen + vlen / 4;
		char *v;

		if (e->val == inline_val(e)) {
			/* Outgrows the entry: move to a heap block. */
			v = kv_malloc(cap + 1);
			if (v == NULL)
				return -ENOMEM;
			memcpy(v, e->val, e->vlen + 1);
		} else {
			v = kv_realloc(e->val, cap + 1);
			if (v == NULL)
				return -ENOMEM;
		}
		e->val = v;
	}
	if (vlen > e->vlen)
		memset(e->val + e->vlen, 0, vlen - e->vlen);
	e->vlen = vlen;
	e->val[vlen] = '\0';
	e->enc = KV_ENC_RAW;
	return 0;
}

struct kv_entry *
kv_entry_rename(struct kv_store *s, struct kv_entry *e, const char *key, size_t klen, uint64_t h,
		int64_t now_ms)
{
	bool str = is_string(e);
	uint32_t icap = str && e->vlen <= INLINE_MAX ? (uint32_t)((e->vlen + 8) & ~7u) : 0;
	struct kv_entry *d = entry_new(key, klen, h, icap, now_ms), *old;

	if (d == NULL)
		return NULL;
	if (str) {
		unsigned enc = e->enc;

		if (value_store(d, e->val, e->vlen) != 0) {
			kv_free(d);
			return NULL;
		}
		d->enc = enc & 0xf;
	} else {
		d->type = e->type;
		d->enc = e->enc;
		d->obj = e->obj;
	}
	d->lru = e->lru;
	old = find_for_write(s, key, klen, h, now_ms);
	if (old != NULL)
		unlink_entry(s, old);
	if (kd_add(&s->d, &d->node) != 0) {
		if (!str) { /* the value stays e's */
			d->type = KV_T_STRING;
			d->obj = NULL;
		}
		entry_free(s, d);
		return NULL;
	}
	if (!str) {
		e->type = KV_T_STRING; /* the value is d's now */
		e->obj = NULL;
		e->vlen = 0;
	}
	if (e->expire != -1)
		kv_set_expire(s, d, e->expire);
	unlink_entry(s, e);
	return d;
}

bool
kv_delete(struct kv_store *s, const char *key, size_t klen, uint64_t h, int64_t now_ms)
{
	struct kv_entry *e = find(s, key, klen, h);
	bool live;

	if (e == NULL)
		return false;
	live = !expired(e, now_ms);
	if (!live)
		expire_note(s, e);
	unlink_entry(s, e);
	return live;
}

void
kv_entry_delete(struct kv_store *s, struct kv_entry *e)
{
	unlink_entry(s, e);
}

void
kv_set_expire(struct kv_store *s, struct kv_entry *e, int64_t when_ms)
{
	if (e->expire == -1) {
		if (s->nexp == s->expcap) {
			size_t ncap = s->expcap ? s->expcap * 2 : 64;
			struct kv_entry **n = kv_realloc(s->exp, ncap * sizeof(*n));

			if (n == NULL)
				return; /* The key keeps no TTL; Redis would abort on ENOMEM. */
			s->exp = n;
			s->expcap = ncap;
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
	return kd_count(&s->d);
}

size_t
kv_store_expires(const struct kv_store *s)
{
	return s->nexp;
}

void
kv_store_probes(const struct kv_store *s, uint64_t *lookups, uint64_t *probes)
{
	*lookups = s->lookups;
	*probes = s->probes;
}

void
kv_store_reset_expired(struct kv_store *s)
{
	s->expired_total = 0;
}

uint64_t
kv_store_expired_total(const struct kv_store *s)
{
	return s->expired_total;
}

size_t
kv_store_lazy_pending(const struct kv_store *s)
{
	return s->lazy_n;
}

/* Free about *budget entries of a flushed table; true once it is all gone. */
static bool
table_free_some(struct kv_store *s, struct lazy *l, unsigned *budget)
{
	struct kd_node *n;

	for (;;) {
		struct kv_entry *e;

		if (*budget == 0)
			return false;
		n = kd_next(&l->iter);
		if (n == NULL)
			break;
		e = entry_of(n);
		(*budget)--;
		if (!is_string(e))
			obj_release(s, e->type, e->enc, e->obj); /* big ones go behind */
		else
			heap_val_free(e);
		kv_free(e);
	}
	kd_iter_end(&l->iter);
	kd_release(&l->table);
	return true;
}

bool
kv_store_lazy_step(struct kv_store *s, unsigned budget)
{
	while (budget > 0 && s->lazy_head != NULL) {
		struct lazy *l = s->lazy_head;
		bool done = l->obj != NULL ? kv_obj_free_some(l->type, l->enc, l->obj, &budget)
					   : table_free_some(s, l, &budget);

		if (!done)
			break;
		s->lazy_head = l->next;
		if (s->lazy_head == NULL)
			s->lazy_tail = &s->lazy_head;
		s->lazy_n--;
		kv_free(l);
	}
	return s->lazy_head != NULL;
}

bool
kv_store_rehash_for(struct kv_store *s, uint64_t ns)
{
	/* The table shrinks here too (Redis: tryResizeHashTables), after deletes stopped. */
	kd_shrink_if_sparse(&s->d);
	kd_rehash_for(&s->d, ns);
	if (!kd_rehashing(&s->d))
		kd_shrink_if_sparse(&s->d);
	return kd_rehashing(&s->d);
}

bool
kv_store_rehashing(const struct kv_store *s)
{
	return kd_rehashing(&s->d);
}

void
kv_prefetch_bucket(const struct kv_store *s, uint64_t h)
{
	if (s->d.t[0] != NULL)
		__builtin_prefetch(&s->d.t[0][h & (s->d.size[0] - 1)]);
}

void
kv_prefetch_entry(const struct kv_store *s, uint64_t h)
{
	const struct kd_node *n;

	if (s->d.t[0] == NULL)
		return;
	n = s->d.t[0][h & (s->d.size[0] - 1)];
	if (n != NULL)
		__builtin_prefetch(n);
}

struct scan_adapter {
	void (*fn)(struct kv_entry *e, void *arg);
	void *arg;
};

static void
scan_one(struct kd_node *n, void *arg)
{
	struct scan_adapter *a = arg;

	a->fn(entry_of(n), a->arg);
}

uint64_t
kv_store_scan(struct kv_store *s, uint64_t v, void (*fn)(struct kv_entry *e, void *arg), void *arg)
{
	struct scan_adapter a = {fn, arg};

	return kd_scan(&s->d, v, scan_one, &a);
}

void
kv_store_foreach(struct kv_store *s, void (*fn)(struct kv_entry *e, void *arg), void *arg)
{
	struct kd_iter it;
	struct kd_node *n;

	kd_iter_init(&s->d, &it);
	while ((n = kd_next(&it)) != NULL)
		fn(entry_of(n), arg);
	kd_iter_end(&it);
}

struct kv_entry *
kv_store_random(struct kv_store *s, int64_t now_ms, uint64_t *rng)
{
	unsigned tries;

	for (tries = 0; tries < 100000; tries++) {
		struct kd_node *n = kd_random(&s->d, rng);
		struct kv_entry *e;

		if (n == NULL)
			return NULL;
		e = entry_of(n);
		if (!expired(e, now_ms))
			return e;
		if (!may_delete(s, e))
			continue; /* held by a transaction: gone for this reader, not deleted */
		expire_note(s, e);
		unlink_entry(s, e);
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

			if (expired(e, now_ms) && may_delete(s, e)) {
				expire_note(s, e);
				unlink_entry(s, e);
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

struct kv_entry *
kv_store_sample(struct kv_store *s, bool with_ttl, uint64_t *rng)
{
	struct kd_node *n;

	if (with_ttl)
		return s->nexp > 0 ? s->exp[kv_rand(rng) % s->nexp] : NULL;
	n = kd_random(&s->d, rng);
	return n != NULL ? entry_of(n) : NULL;
}

static bool
same_node(const struct kd_node *n, const void *key, size_t len)
{
	(void)len;
	return (const void *)n == key;
}

bool
kv_store_holds(struct kv_store *s, const struct kv_entry *e, uint64_t h)
{
	return kd_find(&s->d, h, e, 0, same_node) != NULL;
}

bool
kv_store_may_delete(const struct kv_store *s, const struct kv_entry *e)
{
	return may_delete(s, e);
}

void
kv_store_evict(struct kv_store *s, struct kv_entry *e)
{
	if (s->wver != NULL)
		s->wver[e->node.hash & s->wmask]++;
	unlink_entry(s, e);
}
