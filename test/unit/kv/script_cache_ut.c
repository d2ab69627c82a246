/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * app/cr-kv/script_cache.c: the process-wide script cache read without locks. SHA1 against
 * known vectors; puts and lookups; a SCRIPT FLUSH while another lcore is in the middle of
 * a lookup, stepped on this thread (the old table is kept while that lcore's hazard slot
 * names it, freed after); a seeded stress of four threads putting, reading and flushing,
 * every body read checked against its SHA1, with exact counts at the end.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "script_cache.c"
#include "ut_cunit.h"

/* Which "lcore" this thread is (lib/reactor's cr_lcore_id(), stubbed). */
static _Thread_local unsigned ut_lcore;

unsigned
cr_lcore_id(void)
{
	return ut_lcore;
}

static unsigned
count_entries(void)
{
	struct sc_table *t = atomic_load(&cur);
	unsigned n = 0, i;

	for (i = 0; t != NULL && i < SC_BUCKETS; i++) {
		struct sc_entry *e = atomic_load(&t->b[i]);

		for (; e != NULL; e = e->next)
			n++;
	}
	return n;
}

static unsigned
count_retired(void)
{
	struct sc_table *t = atomic_load(&retired);
	unsigned n = 0;

	for (; t != NULL; t = t->retired_next)
		n++;
	return n;
}

static void
t_sha1(void)
{
	char s[KV_SHA_LEN + 1];

	kv_sha1hex("", 0, s);
	CU_ASSERT_STRING_EQUAL(s, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
	kv_sha1hex("abc", 3, s);
	CU_ASSERT_STRING_EQUAL(s, "a9993e364706816aba3e25717850c26c9cd0d89d");
	kv_sha1hex("return 1", 8, s); /* what redis-server answers to SCRIPT LOAD "return 1" */
	CU_ASSERT_STRING_EQUAL(s, "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
}

struct seen {
	char body[64];
	size_t len;
};

static int
copy_body(void *arg, const char *body, size_t len)
{
	struct seen *s = arg;

	s->len = len < sizeof(s->body) ? len : sizeof(s->body) - 1;
	memcpy(s->body, body, s->len);
	s->body[s->len] = '\0';
	return 0;
}

static void
t_put_get(void)
{
	char sha[KV_SHA_LEN + 1], up[KV_SHA_LEN + 1];
	struct seen s;
	unsigned i;

	kv_sc_fini();
	CU_ASSERT_EQUAL(kv_sc_put("return 1", 8, sha), 0);
	CU_ASSERT_STRING_EQUAL(sha, "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
	CU_ASSERT_EQUAL(kv_sc_put("return 1", 8, sha), 0); /* again: one entry */
	CU_ASSERT_EQUAL(count_entries(), 1);
	CU_ASSERT_TRUE(kv_sc_exists(sha, KV_SHA_LEN));
	for (i = 0; i < KV_SHA_LEN; i++)
		up[i] = (char)(sha[i] >= 'a' ? sha[i] - 32 : sha[i]);
	up[KV_SHA_LEN] = '\0';
	CU_ASSERT_TRUE(kv_sc_exists(up, KV_SHA_LEN)); /* EVALSHA takes either case */
	CU_ASSERT_FALSE(kv_sc_exists(sha, KV_SHA_LEN - 1));
	CU_ASSERT_FALSE(kv_sc_exists("ffffffffffffffffffffffffffffffffffffffff", KV_SHA_LEN));
	CU_ASSERT_FALSE(kv_sc_exists("zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz", KV_SHA_LEN));
	CU_ASSERT_EQUAL(kv_sc_with(sha, copy_body, &s), 0);
	CU_ASSERT_STRING_EQUAL(s.body, "return 1");
	CU_ASSERT_EQUAL(kv_sc_with("ffffffffffffffffffffffffffffffffffffffff", copy_body, &s),
			-ENOENT);
	CU_ASSERT_EQUAL(kv_sc_flush(), 0);
	CU_ASSERT_FALSE(kv_sc_exists(sha, KV_SHA_LEN));
	CU_ASSERT_EQUAL(count_entries(), 0);
	CU_ASSERT_EQUAL(count_retired(), 0); /* nobody read it: freed at once */
	kv_sc_fini();
}

/* Lcore 1 is in the middle of a lookup (its hazard names the table) when lcore 0 flushes:
 * the old table is retired, not freed; lcore 1 still reads its entry; once it is done
 * (its slot cleared), the table is freed there and then. */
static void
t_flush_during_lookup(void)
{
	char sha[KV_SHA_LEN + 1];
	struct sc_table *t, *old, *g0;
	struct sc_entry *e;
	uint64_t gen0;

	kv_sc_fini();
	ut_lcore = 0;
	CU_ASSERT_EQUAL(kv_sc_put("return 'x'", 10, sha), 0);
	g0 = atomic_load(&cur);
	gen0 = kv_sc_generation();
	ut_lcore = 1;
	t = acquire(); /* lcore 1 starts a lookup... */
	CU_ASSERT_PTR_EQUAL(t, g0);
	e = find(t, sha);
	CU_ASSERT_PTR_NOT_NULL(e);
	ut_lcore = 0;
	CU_ASSERT_EQUAL(kv_sc_flush(), 0); /* ...lcore 0 flushes meanwhile */
	old = atomic_load(&retired);
	CU_ASSERT_PTR_EQUAL(old, g0); /* kept: lcore 1 reads it */
	CU_ASSERT_NOT_EQUAL(kv_sc_generation(), gen0);
	CU_ASSERT_FALSE(kv_sc_exists(sha, KV_SHA_LEN)); /* a new lookup sees the new table */
	CU_ASSERT_EQUAL(count_retired(), 1);		/* ...and does not free it */
	ut_lcore = 1;
	CU_ASSERT_EQUAL(memcmp(e->body, "return 'x'", 10), 0); /* still valid for lcore 1 */
	release(); /* its last reader done: freed now, not at the next flush */
	CU_ASSERT_EQUAL(count_retired(), 0);
	ut_lcore = 0;
	CU_ASSERT_EQUAL(kv_sc_flush(), 0);
	CU_ASSERT_EQUAL(count_retired(), 0);
	kv_sc_fini();
}

#define THREADS	    4
#define OPS	    20000
#define OWN	    500
#define SHARED	    100
#define FLUSH_EVERY 997

struct worker {
	unsigned id;
	unsigned seed;
	unsigned bad, reads, found;
};

static void
body_of(char *b, size_t n, unsigned who, unsigned i)
{
	snprintf(b, n, "return '%u:%u'", who, i);
}

static void *
work(void *arg)
{
	struct worker *w = arg;
	unsigned i, r = w->seed;

	ut_lcore = w->id;
	for (i = 0; i < OPS; i++) {
		char body[64], sha[KV_SHA_LEN + 1], check[KV_SHA_LEN + 1];
		struct seen s;
		unsigned pick;

		r = r * 1103515245u + 12345u;
		pick = (r >> 8) % 4;
		if (pick == 0 || pick == 1) {
			body_of(body, sizeof(body), pick == 0 ? w->id : 999, (r >> 12) % SHARED);
			if (kv_sc_put(body, strlen(body), sha) != 0)
				w->bad++;
		} else {
			body_of(body, sizeof(body), (r >> 4) % 2 ? w->id : 999, (r >> 12) % SHARED);
			kv_sha1hex(body, strlen(body), sha);
			w->reads++;
			if (kv_sc_with(sha, copy_body, &s) == 0) {
				w->found++;
				/* a body read is the one its SHA1 names, never another's */
				kv_sha1hex(s.body, s.len, check);
				if (strcmp(check, sha) != 0)
					w->bad++;
			}
		}
		if (w->id == 0 && i % FLUSH_EVERY == 0)
			if (kv_sc_flush() != 0)
				w->bad++;
	}
	/* then, without flushes: every thread its OWN scripts, and the SHARED ones */
	return NULL;
}

/* EVAL's check of the generation (kv_lua_function()) on an lcore of its own, while lcore
 * 0 flushes: it reads no table a flush may free, and never sees the generation go back. */
static _Atomic bool gen_stop;

static void *
read_gen(void *arg)
{
	unsigned *bad = arg;
	uint64_t last = 0, g;

	ut_lcore = THREADS;
	while (!atomic_load_explicit(&gen_stop, memory_order_relaxed)) {
		g = kv_sc_generation();
		if (g < last)
			(*bad)++;
		last = g;
	}
	return NULL;
}

static void *
work_final(void *arg)
{
	struct worker *w = arg;
	unsigned i;
	char body[64], sha[KV_SHA_LEN + 1];

	ut_lcore = w->id;
	for (i = 0; i < OWN; i++) {
		body_of(body, sizeof(body), 100 + w->id, i);
		if (kv_sc_put(body, strlen(body), sha) != 0)
			w->bad++;
	}
	for (i = 0; i < SHARED; i++) {
		body_of(body, sizeof(body), 7777, i);
		if (kv_sc_put(body, strlen(body), sha) != 0)
			w->bad++;
	}
	return NULL;
}

static void
t_stress(void)
{
	struct worker w[THREADS];
	pthread_t th[THREADS], gth;
	unsigned i, found = 0, gen_bad = 0;

	kv_sc_fini();
	atomic_store(&gen_stop, false);
	CU_ASSERT_EQUAL(pthread_create(&gth, NULL, read_gen, &gen_bad), 0);
	for (i = 0; i < THREADS; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].id = i;
		w[i].seed = 18 + i;
		CU_ASSERT_EQUAL(pthread_create(&th[i], NULL, work, &w[i]), 0);
	}
	for (i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	atomic_store(&gen_stop, true);
	pthread_join(gth, NULL);
	CU_ASSERT_EQUAL(gen_bad, 0);
	for (i = 0; i < THREADS; i++) {
		CU_ASSERT_EQUAL(w[i].bad, 0);
		found += w[i].found;
	}
	CU_ASSERT(found > 0);
	/* exact counts: a flush, then OWN per thread and SHARED common ones, concurrently */
	CU_ASSERT_EQUAL(kv_sc_flush(), 0);
	CU_ASSERT_EQUAL(count_retired(), 0); /* no lookup under way: all freed */
	for (i = 0; i < THREADS; i++)
		CU_ASSERT_EQUAL(pthread_create(&th[i], NULL, work_final, &w[i]), 0);
	for (i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < THREADS; i++)
		CU_ASSERT_EQUAL(w[i].bad, 0);
	CU_ASSERT_EQUAL(count_entries(), THREADS * OWN + SHARED);
	kv_sc_fini();
}

static const struct ut_case cases[] = {
    UT_CASE(t_sha1),
    UT_CASE(t_put_get),
    UT_CASE(t_flush_during_lookup),
    UT_CASE(t_stress),
};

UT_MAIN("kv_script_cache", cases, NULL, NULL)
