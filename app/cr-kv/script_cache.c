/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The script cache, one for the process: SCRIPT LOAD (or EVAL) on one lcore is seen by
 * EVALSHA on every lcore, as Redis's one cache is.
 *
 * Readers take no lock. The table is a fixed array of buckets, each a list pushed at its
 * head with a compare-and-swap; an entry is immutable once published, so a reader walks
 * a list with acquire loads and nothing else. SCRIPT FLUSH swaps the table for an empty
 * one; the old table is retired, and freed once no lcore reads it: each reader announces
 * the table it reads in its lcore's hazard slot (and checks that it is still the current
 * one) for the few instructions of a lookup, and a table is freed only when no slot names
 * it. The reader that clears the last slot naming a retired table frees it (or, when
 * another lcore is reclaiming at that moment, the next lookup on any lcore does). No lcore
 * ever waits for another.
 *
 * The generation (what an lcore's compiled scripts are valid under) is a counter of its
 * own, bumped after the swap: reading it touches no table.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "cr_reactor.h"
#include "script.h"

#define SC_BUCKETS 4096u

struct sc_entry {
	struct sc_entry *next; /* written before the entry is published, never after */
	char sha[KV_SHA_LEN + 1];
	size_t len;
	char body[];
};

struct sc_table {
	_Atomic(struct sc_entry *) b[SC_BUCKETS];
	struct sc_table *retired_next; /* on the retired list (under retire_lock's CAS) */
};

static _Atomic(struct sc_table *) cur;
/* Bumped by every flush, after its swap of cur. */
static _Atomic uint64_t generation = 1;
/* Per lcore (and one for threads that are not lcores): the table it is reading. */
static _Atomic(struct sc_table *) hazard[CR_MAX_LCORES + 1];
/* Tables swapped out and not yet freed: a list owned by whoever holds the flag. */
static _Atomic(struct sc_table *) retired;

static unsigned
slot_here(void)
{
	unsigned id = cr_lcore_id();

	return id < CR_MAX_LCORES ? id : CR_MAX_LCORES;
}

void
kv_sha1hex(const void *p, size_t n, char out[KV_SHA_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0, i;

	if (EVP_Digest(p, n, md, &mdlen, EVP_sha1(), NULL) != 1 || mdlen != 20)
		memset(md, 0, sizeof(md));
	for (i = 0; i < 20; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[KV_SHA_LEN] = '\0';
}

static unsigned
bucket(const char *sha)
{
	unsigned h = 0, i;

	for (i = 0; i < 6; i++)
		h = h * 16 + (unsigned)(sha[i] <= '9' ? sha[i] - '0' : sha[i] - 'a' + 10);
	return h % SC_BUCKETS;
}

static struct sc_table *
table_new(void)
{
	return calloc(1, sizeof(struct sc_table));
}

static void
table_free(struct sc_table *t)
{
	unsigned i;

	for (i = 0; i < SC_BUCKETS; i++) {
		struct sc_entry *e = atomic_load_explicit(&t->b[i], memory_order_relaxed), *n;

		for (; e != NULL; e = n) {
			n = e->next;
			free(e);
		}
	}
	free(t);
}

/* The current table, protected from being freed until release(). NULL: ENOMEM. */
static struct sc_table *
acquire(void)
{
	_Atomic(struct sc_table *) *hz = &hazard[slot_here()];
	struct sc_table *t = atomic_load_explicit(&cur, memory_order_acquire);

	if (t == NULL) {
		struct sc_table *n = table_new();

		if (n == NULL)
			return NULL;
		/* acq_rel: publishes n's zeroed buckets; pairs with the acquire loads of cur */
		if (!atomic_compare_exchange_strong_explicit(&cur, &t, n, memory_order_acq_rel,
							     memory_order_acquire))
			free(n); /* another lcore made it first: t is that one */
		else
			t = n;
	}
	for (;;) {
		struct sc_table *again;

		/* seq_cst: the hazard store must be visible before we re-read cur, and a
		 * reclaimer's read of the hazard comes after its swap of cur (both seq_cst),
		 * so either it sees our hazard or we see its new table. */
		atomic_store_explicit(hz, t, memory_order_seq_cst);
		again = atomic_load_explicit(&cur, memory_order_seq_cst);
		if (again == t)
			return t;
		t = again;
	}
}

static void reclaim(void);

static void
release(void)
{
	/* seq_cst: our reads of the table come before a reclaimer sees the slot empty; and
	 * clearing it comes before we read the retired list, while a flush pushes on that list
	 * before it reads the slots (seq_cst, kv_sc_flush()): either the flush sees the slot
	 * empty and frees the table, or we see the table retired and reclaim it here. */
	atomic_store_explicit(&hazard[slot_here()], NULL, memory_order_seq_cst);
	if (atomic_load_explicit(&retired, memory_order_seq_cst) != NULL)
		reclaim();
}

static struct sc_entry *
find(struct sc_table *t, const char *sha)
{
	/* acquire: pairs with the release CAS that published the entry */
	struct sc_entry *e = atomic_load_explicit(&t->b[bucket(sha)], memory_order_acquire);

	for (; e != NULL; e = e->next)
		if (memcmp(e->sha, sha, KV_SHA_LEN) == 0)
			return e;
	return NULL;
}

static bool
sha_normal(const char *in, size_t len, char out[KV_SHA_LEN + 1])
{
	size_t i;

	if (len != KV_SHA_LEN)
		return false;
	for (i = 0; i < KV_SHA_LEN; i++) {
		char c = in[i];

		if (c >= 'A' && c <= 'F')
			c = (char)(c - 'A' + 'a');
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return false;
		out[i] = c;
	}
	out[KV_SHA_LEN] = '\0';
	return true;
}

int
kv_sc_put(const char *body, size_t len, char sha[KV_SHA_LEN + 1])
{
	struct sc_table *t;
	struct sc_entry *e, *head;
	unsigned b;

	kv_sha1hex(body, len, sha);
	t = acquire();
	if (t == NULL)
		return -ENOMEM;
	if (find(t, sha) != NULL) {
		release();
		return 0;
	}
	e = malloc(sizeof(*e) + len + 1);
	if (e == NULL) {
		release();
		return -ENOMEM;
	}
	memcpy(e->sha, sha, KV_SHA_LEN + 1);
	e->len = len;
	memcpy(e->body, body, len);
	e->body[len] = '\0';
	b = bucket(sha);
	head = atomic_load_explicit(&t->b[b], memory_order_acquire);
	do {
		struct sc_entry *s;

		/* Another lcore may have added the same script since we looked. */
		for (s = head; s != NULL; s = s->next)
			if (memcmp(s->sha, sha, KV_SHA_LEN) == 0) {
				free(e);
				release();
				return 0;
			}
		e->next = head;
		/* release: e's fields before it is reachable; pairs with find()'s acquire */
	} while (!atomic_compare_exchange_weak_explicit(&t->b[b], &head, e, memory_order_release,
							memory_order_acquire));
	release();
	return 0;
}

bool
kv_sc_exists(const char *sha, size_t len)
{
	char s[KV_SHA_LEN + 1];
	struct sc_table *t;
	bool found;

	if (!sha_normal(sha, len, s))
		return false;
	t = acquire();
	if (t == NULL)
		return false;
	found = find(t, s) != NULL;
	release();
	return found;
}

int
kv_sc_with(const char *sha, int (*fn)(void *arg, const char *body, size_t len), void *arg)
{
	char s[KV_SHA_LEN + 1];
	struct sc_table *t;
	struct sc_entry *e;
	int rc;

	if (!sha_normal(sha, strlen(sha), s))
		return -ENOENT;
	t = acquire();
	if (t == NULL)
		return -ENOMEM;
	e = find(t, s);
	rc = e != NULL ? fn(arg, e->body, e->len) : -ENOENT;
	release();
	return rc;
}

uint64_t
kv_sc_generation(void)
{
	/* acquire: pairs with the release bump in kv_sc_flush(): who sees the new generation
	 * then looks up in the new table (it compiles nothing from the old one under it) */
	return atomic_load_explicit(&generation, memory_order_acquire);
}

static bool
in_use(const struct sc_table *t)
{
	unsigned i;

	for (i = 0; i <= CR_MAX_LCORES; i++)
		/* seq_cst: ordered after the swap of cur that retired t (see acquire()) */
		if (atomic_load_explicit(&hazard[i], memory_order_seq_cst) == t)
			return true;
	return false;
}

/* Free the retired tables no lcore reads; keep the others for a later release or flush. */
static void
reclaim(void)
{
	/* Take the whole list: whoever takes it owns it (no two lcores walk it). */
	struct sc_table *t = atomic_exchange_explicit(&retired, NULL, memory_order_acq_rel), *n;
	struct sc_table *keep = NULL;

	for (; t != NULL; t = n) {
		n = t->retired_next;
		if (in_use(t)) {
			t->retired_next = keep;
			keep = t;
		} else {
			table_free(t);
		}
	}
	while (keep != NULL) { /* back on the list */
		struct sc_table *head = atomic_load_explicit(&retired, memory_order_acquire);

		n = keep->retired_next;
		do
			keep->retired_next = head;
		while (!atomic_compare_exchange_weak_explicit(
		    &retired, &head, keep, memory_order_seq_cst, memory_order_acquire));
		keep = n;
	}
}

int
kv_sc_flush(void)
{
	struct sc_table *n = table_new(), *old, *head;

	if (n == NULL)
		return -ENOMEM;
	/* seq_cst: see acquire() */
	old = atomic_exchange_explicit(&cur, n, memory_order_seq_cst);
	/* release: after the swap (see kv_sc_generation()) */
	atomic_fetch_add_explicit(&generation, 1, memory_order_release);
	if (old != NULL) {
		head = atomic_load_explicit(&retired, memory_order_acquire);
		do
			old->retired_next = head;
		/* seq_cst: before we read the slots; see release() */
		while (!atomic_compare_exchange_weak_explicit(
		    &retired, &head, old, memory_order_seq_cst, memory_order_acquire));
	}
	reclaim();
	return 0;
}

void
kv_sc_fini(void)
{
	struct sc_table *t = atomic_exchange(&cur, NULL), *n;

	if (t != NULL)
		table_free(t);
	for (t = atomic_exchange(&retired, NULL); t != NULL; t = n) {
		n = t->retired_next;
		table_free(t);
	}
}
