/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * app/cr-kv's collection types (t_hash.c, t_set.c, t_list.c, t_zset.c, zskiplist.c):
 * each against a plain model, with Redis 7.0's conversion thresholds, and freeing a big
 * value in bounded steps.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"
#include "obj.h"
#include "t_hash.h"
#include "t_list.h"
#include "t_set.h"
#include "t_zset.h"
#include "ut_cunit.h"

static struct kv_mem mem;

static int
bind_mem(void)
{
	kv_mem_bind(&mem);
	return 0;
}

static uint64_t rng = 2024;

static unsigned
rnd(unsigned n)
{
	return (unsigned)(kd_rand(&rng) % n);
}

/* 512 short fields stay a listpack (in insertion order); the 513th, or one value over 64
 * bytes, makes it a hashtable; every field is found either way. */
static void
test_hash_conversion(void)
{
	struct kv_entry e = {.type = KV_T_HASH, .enc = KV_ENC_LISTPACK, .obj = hash_new()};
	struct hash_iter it;
	const char *f, *v;
	size_t flen, vlen;
	char k[32], val[80];
	unsigned i;

	for (i = 0; i < 512; i++) {
		snprintf(k, sizeof(k), "f%u", i);
		CU_ASSERT_EQUAL(hash_set(&e, k, strlen(k), k, strlen(k)), 1);
	}
	CU_ASSERT_EQUAL(e.enc, KV_ENC_LISTPACK);
	CU_ASSERT_EQUAL(hash_set(&e, "f3", 2, "new", 3), 0);
	hash_iter_init(&it, &e);
	for (i = 0; hash_iter_next(&it, &f, &flen, &v, &vlen); i++) {
		snprintf(k, sizeof(k), "f%u", i);
		CU_ASSERT(flen == strlen(k) && memcmp(f, k, flen) == 0);
	}
	hash_iter_end(&it);
	CU_ASSERT_EQUAL(i, 512);
	CU_ASSERT_EQUAL(hash_set(&e, "f512", 4, "x", 1), 1);
	CU_ASSERT_EQUAL(e.enc, KV_ENC_HASHTABLE);
	CU_ASSERT_EQUAL(hash_len(&e), 513);
	CU_ASSERT(hash_get(&e, "f3", 2, &v, &vlen) && vlen == 3 && memcmp(v, "new", 3) == 0);
	CU_ASSERT(hash_del(&e, "f3", 2));
	CU_ASSERT(!hash_get(&e, "f3", 2, &v, &vlen));
	hash_free(e.enc, e.obj);

	e.enc = KV_ENC_LISTPACK;
	e.obj = hash_new();
	memset(val, 'v', sizeof(val));
	CU_ASSERT_EQUAL(hash_set(&e, "a", 1, val, 64), 1);
	CU_ASSERT_EQUAL(e.enc, KV_ENC_LISTPACK);
	CU_ASSERT_EQUAL(hash_set(&e, "b", 1, val, 65), 1);
	CU_ASSERT_EQUAL(e.enc, KV_ENC_HASHTABLE);
	CU_ASSERT(hash_get(&e, "a", 1, &v, &vlen) && vlen == 64);
	hash_free(e.enc, e.obj);
	CU_ASSERT_EQUAL(kv_mem_used(&mem), 0);
}

/* Integers stay an intset up to 512 of them (sorted); a non-integer or the 513th makes a
 * hashtable. */
static void
test_set_conversion(void)
{
	unsigned enc;
	struct kv_entry e = {.type = KV_T_SET};
	struct set_iter it;
	const char *m;
	size_t len;
	char k[32];
	unsigned i;
	long long last = -1000000;

	e.obj = set_new_for("5", 1, &enc);
	e.enc = enc;
	CU_ASSERT_EQUAL(enc, KV_ENC_INTSET);
	for (i = 0; i < 512; i++) {
		snprintf(k, sizeof(k), "%u", (i * 7919) % 1000);
		set_add(&e, k, strlen(k));
	}
	CU_ASSERT_EQUAL(e.enc, KV_ENC_INTSET);
	CU_ASSERT_EQUAL(set_len(&e), 512);
	set_iter_init(&it, &e);
	while (set_iter_next(&it, &m, &len)) {
		CU_ASSERT(atoll(m) > last);
		last = atoll(m);
	}
	set_iter_end(&it);
	CU_ASSERT_EQUAL(set_add(&e, "100000", 6), 1);
	CU_ASSERT_EQUAL(e.enc, KV_ENC_HASHTABLE);
	CU_ASSERT(set_has(&e, "100000", 6) && set_has(&e, "0", 1));
	CU_ASSERT(set_rem(&e, "0", 1) && !set_has(&e, "0", 1));
	set_free(e.enc, e.obj);

	e.obj = set_new_for("1", 1, &enc);
	e.enc = enc;
	set_add(&e, "1", 1);
	CU_ASSERT_EQUAL(set_add(&e, "x", 1), 1);
	CU_ASSERT_EQUAL(e.enc, KV_ENC_HASHTABLE);
	CU_ASSERT(set_has(&e, "1", 1) && set_has(&e, "x", 1) && !set_has(&e, "01", 2));
	set_free(e.enc, e.obj);
	CU_ASSERT_EQUAL(kv_mem_used(&mem), 0);
}

/* The quicklist against an array: pushes, pops, index, replace, insert, delete. */
static void
test_list_model(void)
{
	enum { MAX = 3000 };
	static char *model[MAX];
	struct kv_qlist *ql = ql_new();
	unsigned n = 0, step, i;
	struct qpos p;

	for (step = 0; step < 30000; step++) {
		unsigned op = rnd(7), at = n ? rnd(n) : 0;
		char s[400];
		size_t len = rnd(10) == 0 ? 300 + rnd(100) : rnd(12);

		memset(s, 'a' + (int)(step % 26), len);
		if ((op <= 1 || n == 0) && n < MAX) {
			bool head = op == 0;

			CU_ASSERT_EQUAL_FATAL(ql_push(ql, head, s, len), 0);
			if (head)
				memmove(&model[1], &model[0], n * sizeof(char *));
			model[head ? 0 : n] = strndup(s, len);
			n++;
		} else if (op == 2 && n < MAX) {
			bool after = rnd(2);

			CU_ASSERT_FATAL(ql_index(ql, at, &p));
			CU_ASSERT_EQUAL_FATAL(ql_insert(ql, &p, after, s, len), 0);
			at += after;
			memmove(&model[at + 1], &model[at], (n - at) * sizeof(char *));
			model[at] = strndup(s, len);
			n++;
		} else if (op == 3) {
			CU_ASSERT_FATAL(ql_index(ql, at, &p));
			CU_ASSERT_EQUAL_FATAL(ql_replace(ql, &p, s, len), 0);
			free(model[at]);
			model[at] = strndup(s, len);
		} else if (op == 4) {
			bool fwd = rnd(2);

			CU_ASSERT_FATAL(ql_index(ql, at, &p));
			ql_delete(ql, &p, fwd);
			free(model[at]);
			memmove(&model[at], &model[at + 1], (n - at - 1) * sizeof(char *));
			n--;
			/* p is on the element after (before) the deleted one */
			if (fwd && at < n) {
				size_t l;
				const void *g = ql_get(&p, &l);

				CU_ASSERT(l == strlen(model[at]) && memcmp(g, model[at], l) == 0);
			} else if (!fwd && at > 0) {
				size_t l;
				const void *g = ql_get(&p, &l);

				CU_ASSERT(l == strlen(model[at - 1]) &&
					  memcmp(g, model[at - 1], l) == 0);
			} else {
				CU_ASSERT_PTR_NULL(p.node);
			}
		} else {
			unsigned k = rnd(4);
			bool head = rnd(2);

			if (k > n)
				k = n;
			ql_delete_ends(ql, head, k);
			for (i = 0; i < k; i++)
				free(model[head ? i : n - 1 - i]);
			if (head)
				memmove(&model[0], &model[k], (n - k) * sizeof(char *));
			n -= k;
		}
		CU_ASSERT_EQUAL_FATAL(ql->count, n);
	}
	i = 0;
	if (ql_end(ql, true, &p))
		do {
			size_t l;
			const void *g = ql_get(&p, &l);

			CU_ASSERT(l == strlen(model[i]) && memcmp(g, model[i], l) == 0);
			i++;
		} while (ql_next(&p));
	CU_ASSERT_EQUAL(i, n);
	for (i = n; ql_end(ql, false, &p) && i == n;) {
		do
			i--;
		while (ql_prev(&p));
	}
	CU_ASSERT_EQUAL(i, 0);
	for (i = 0; i < n; i++)
		free(model[i]);
	ql_free(ql);
	CU_ASSERT_EQUAL(kv_mem_used(&mem), 0);
}

struct zm {
	char m[16];
	double s;
};

static int
zm_cmp(const void *a, const void *b)
{
	const struct zm *x = a, *y = b;

	if (x->s != y->s)
		return x->s < y->s ? -1 : 1;
	return strcmp(x->m, y->m);
}

/* Check the set against the sorted model: order both ways, ranks, scores, ranges. */
static void
zcheck(struct kv_entry *e, struct zm *model, unsigned n)
{
	struct zit it;
	unsigned i;

	qsort(model, n, sizeof(*model), zm_cmp);
	CU_ASSERT_EQUAL_FATAL(zset_len(e), n);
	for (i = 0, zit_rank(&it, e, 0); zit_ok(&it); zit_step(&it, false), i++) {
		const char *m;
		size_t len;
		double s;
		unsigned long rank;

		zit_get(&it, &m, &len, &s);
		CU_ASSERT(len == strlen(model[i].m) && memcmp(m, model[i].m, len) == 0);
		CU_ASSERT_EQUAL(s, model[i].s);
		CU_ASSERT(zset_rank(e, model[i].m, len, false, &rank, &s) && rank == i);
		CU_ASSERT(zset_rank(e, model[i].m, len, true, &rank, &s) && rank == n - 1 - i);
	}
	CU_ASSERT_EQUAL(i, n);
	for (i = 0; n > 0 && i < 20; i++) {
		unsigned a = rnd(n), b = rnd(n), k, expect = 0;
		struct zrange r = {model[a].s, model[b].s, rnd(2) == 0, rnd(2) == 0};
		const char *m;
		size_t len;
		double s;

		for (k = 0; k < n; k++)
			expect += zrange_gte_min(model[k].s, &r) && zrange_lte_max(model[k].s, &r);
		CU_ASSERT_EQUAL(zset_count_score(e, &r), expect);
		if (zit_score(&it, e, &r, false)) {
			zit_get(&it, &m, &len, &s);
			for (k = 0;
			     !(zrange_gte_min(model[k].s, &r) && zrange_lte_max(model[k].s, &r));)
				k++;
			CU_ASSERT(memcmp(m, model[k].m, len) == 0);
		} else {
			CU_ASSERT_EQUAL(expect, 0);
		}
		if (zit_score(&it, e, &r, true)) {
			zit_get(&it, &m, &len, &s);
			for (k = n - 1;
			     !(zrange_gte_min(model[k].s, &r) && zrange_lte_max(model[k].s, &r));)
				k--;
			CU_ASSERT(memcmp(m, model[k].m, len) == 0);
		}
	}
}

/* Adds, score updates (NX, XX, GT, LT, INCR) and deletes against a sorted array, first as a
 * listpack, then across the conversion to a skiplist at 129 members. */
static void
test_zset_model(void)
{
	enum { MAX = 2000 };
	static struct zm model[MAX];
	unsigned enc, n = 0, step, i;
	struct kv_entry e = {.type = KV_T_ZSET};

	e.obj = zset_new(1, 1, &enc);
	e.enc = enc;
	CU_ASSERT_EQUAL(enc, KV_ENC_LISTPACK);
	for (step = 0; step < 6000; step++) {
		char m[16];
		double s = (double)rnd(50) / 4, ns = 0;
		int out, flags = 0;
		unsigned k;

		snprintf(m, sizeof(m), "m%u", rnd(step < 2000 ? 120 : 1500));
		for (k = 0; k < n && strcmp(model[k].m, m) != 0; k++)
			;
		if (rnd(5) == 0) {
			CU_ASSERT_EQUAL(zset_del(&e, m, strlen(m)), k < n);
			if (k < n)
				model[k] = model[--n];
			continue;
		}
		if (rnd(3) == 0)
			flags = (int[]){ZADD_IN_NX, ZADD_IN_XX, ZADD_IN_GT, ZADD_IN_LT,
					ZADD_IN_INCR}[rnd(5)];
		CU_ASSERT_EQUAL_FATAL(zset_add(&e, s, m, strlen(m), flags, &out, &ns), 1);
		if (k == n) {
			if (flags == ZADD_IN_XX) {
				CU_ASSERT_EQUAL(out, ZADD_OUT_NOP);
				continue;
			}
			CU_ASSERT_EQUAL(out, ZADD_OUT_ADDED);
			strcpy(model[n].m, m);
			model[n++].s = s;
		} else {
			double want = flags == ZADD_IN_INCR ? model[k].s + s : s;
			bool nop = flags == ZADD_IN_NX ||
				   (flags == ZADD_IN_GT && want <= model[k].s) ||
				   (flags == ZADD_IN_LT && want >= model[k].s);

			if (nop) {
				CU_ASSERT_EQUAL(out, ZADD_OUT_NOP);
			} else {
				CU_ASSERT_EQUAL(out, want != model[k].s ? ZADD_OUT_UPDATED : 0);
				model[k].s = want;
			}
		}
		if (step % 500 == 0)
			zcheck(&e, model, n);
	}
	CU_ASSERT_EQUAL(e.enc, KV_ENC_SKIPLIST);
	zcheck(&e, model, n);
	/* Delete ranges by rank and by score; then a listpack again once small. */
	CU_ASSERT_EQUAL(zset_del_ranks(&e, 0, 9), 10);
	memmove(model, model + 10, (n - 10) * sizeof(*model));
	n -= 10;
	{
		struct zrange r = {3, 8, false, true};
		unsigned long gone = zset_del_score(&e, &r);
		unsigned k, kept = 0;

		for (k = 0; k < n; k++)
			if (!(model[k].s >= 3 && model[k].s < 8))
				model[kept++] = model[k];
		CU_ASSERT_EQUAL(gone, n - kept);
		n = kept;
	}
	zcheck(&e, model, n);
	while (n > 100) {
		CU_ASSERT(zset_del(&e, model[n - 1].m, strlen(model[n - 1].m)));
		n--;
	}
	zset_shrink_encoding(&e, 5);
	CU_ASSERT_EQUAL(e.enc, KV_ENC_LISTPACK);
	zcheck(&e, model, n);
	zset_free(e.enc, e.obj);
	CU_ASSERT_EQUAL(kv_mem_used(&mem), 0);
	for (i = 0; i < 1; i++)
		(void)i;
}

/* BYLEX ranges with "-", "+", "[" and "(" over members of equal scores. */
static void
test_zset_lex(void)
{
	static const char *const ms[] = {"a", "b", "c", "d", "e"};
	unsigned enc, i, round;

	for (round = 0; round < 2; round++) {
		struct kv_entry e = {.type = KV_T_ZSET};
		struct zlexrange all = {NULL, NULL, 0, 0, true, true, ZLEX_MINUS, ZLEX_PLUS};
		struct zlexrange bd = {"b", "d", 1, 1, false, true, ZLEX_STR, ZLEX_STR};
		struct zlexrange none = {NULL, NULL, 0, 0, true, true, ZLEX_PLUS, ZLEX_MINUS};
		struct zit it;
		int out;

		e.obj = zset_new(round ? 1000 : 1, 1, &enc);
		e.enc = enc;
		for (i = 0; i < 5; i++)
			zset_add(&e, 0, ms[i], 1, 0, &out, NULL);
		CU_ASSERT_EQUAL(zset_count_lex(&e, &all), 5);
		CU_ASSERT_EQUAL(zset_count_lex(&e, &bd), 2);
		CU_ASSERT_EQUAL(zset_count_lex(&e, &none), 0);
		CU_ASSERT(zit_lex(&it, &e, &bd, true));
		{
			const char *m;
			size_t len;
			double s;

			zit_get(&it, &m, &len, &s);
			CU_ASSERT(len == 1 && m[0] == 'c');
		}
		CU_ASSERT_EQUAL(zset_del_lex(&e, &bd), 2);
		CU_ASSERT_EQUAL(zset_len(&e), 3);
		zset_free(e.enc, e.obj);
	}
	CU_ASSERT_EQUAL(kv_mem_used(&mem), 0);
}

/* A big value of each type frees in steps of a bounded number of elements, and all of
 * its memory comes back. */
static void
test_free_in_steps(void)
{
	unsigned type;

	for (type = KV_T_LIST; type <= KV_T_HASH; type++) {
		struct kv_entry e = {.type = type};
		unsigned enc = 0, steps = 0, i;
		char k[32];

		switch (type) {
		case KV_T_LIST:
			e.obj = ql_new();
			e.enc = KV_ENC_QUICKLIST;
			break;
		case KV_T_SET:
			e.obj = set_new_for("x", 1, &enc);
			e.enc = enc;
			break;
		case KV_T_ZSET:
			e.obj = zset_new(100000, 1, &enc);
			e.enc = enc;
			break;
		default:
			e.obj = hash_new();
			e.enc = KV_ENC_LISTPACK;
			break;
		}
		for (i = 0; i < 100000; i++) {
			int out;

			snprintf(k, sizeof(k), "element:%u", i);
			if (type == KV_T_LIST)
				ql_push(e.obj, false, k, strlen(k));
			else if (type == KV_T_SET)
				set_add(&e, k, strlen(k));
			else if (type == KV_T_ZSET)
				zset_add(&e, i, k, strlen(k), 0, &out, NULL);
			else
				hash_set(&e, k, strlen(k), "v", 1);
		}
		CU_ASSERT_EQUAL(kv_obj_elements(e.type, e.enc, e.obj), 100000);
		CU_ASSERT(kv_obj_mem(e.type, e.enc, e.obj) <= (uint64_t)kv_mem_used(&mem));
		for (;;) {
			unsigned budget = 1000;
			bool done = kv_obj_free_some(e.type, e.enc, e.obj, &budget);

			steps++;
			if (done)
				break;
			CU_ASSERT_EQUAL(budget, 0);
		}
		/* A list frees whole nodes (up to 8 KB of elements each): a step may go a
		 * node's worth over its budget. */
		CU_ASSERT(steps >= (type == KV_T_LIST ? 60 : 100) && steps <= 102);
		CU_ASSERT_EQUAL(kv_mem_used(&mem), 0);
	}
}

/* Listpack scores: integral ones are kept in 1-7 bytes, others as doubles; each reads
 * back exactly, sign and all, at every byte-width boundary, and orders as a double. */
static void
test_zset_scores(void)
{
	static const double scores[] = {
	    0,
	    -1,
	    1,
	    127,
	    128,
	    -128,
	    -129,
	    32767,
	    32768,
	    -32768,
	    -32769,
	    8388607,
	    8388608,
	    2147483647.0,
	    2147483648.0,
	    -2147483649.0,
	    549755813887.0,
	    -549755813888.0,
	    140737488355327.0,
	    -140737488355328.0,
	    9007199254740991.0,
	    -9007199254740991.0,
	    9007199254740992.0,
	    1.5,
	    -2.25,
	    1e300,
	    -1e-300,
	    INFINITY,
	    -INFINITY,
	    0.1,
	};
	size_t n = sizeof(scores) / sizeof(scores[0]), i;
	struct kv_entry e = {.type = KV_T_ZSET};
	unsigned enc;
	double prev = -INFINITY;
	struct zit it;

	e.obj = zset_new(1, 1, &enc);
	e.enc = enc;
	for (i = 0; i < n; i++) {
		char m[8];
		int out;

		snprintf(m, sizeof(m), "m%zu", i);
		CU_ASSERT_EQUAL_FATAL(zset_add(&e, scores[i], m, strlen(m), 0, &out, NULL), 1);
	}
	CU_ASSERT_EQUAL(e.enc, KV_ENC_LISTPACK);
	for (i = 0; i < n; i++) {
		char m[8];
		double s = NAN;

		snprintf(m, sizeof(m), "m%zu", i);
		CU_ASSERT_TRUE(zset_score(&e, m, strlen(m), &s));
		CU_ASSERT_TRUE(s == scores[i] && !signbit(s) == !signbit(scores[i]));
	}
	CU_ASSERT_TRUE(zit_rank(&it, &e, 0));
	for (i = 0; zit_ok(&it); i++) {
		const char *m;
		size_t len;
		double s;

		zit_get(&it, &m, &len, &s);
		CU_ASSERT_TRUE(s >= prev);
		prev = s;
		(void)zit_step(&it, false);
	}
	CU_ASSERT_EQUAL(i, n);
	zset_free(e.enc, e.obj);
}

static const struct ut_case cases[] = {
    UT_CASE(test_hash_conversion), UT_CASE(test_set_conversion), UT_CASE(test_list_model),
    UT_CASE(test_zset_model),	   UT_CASE(test_zset_lex),	 UT_CASE(test_free_in_steps),
    UT_CASE(test_zset_scores),
};

UT_MAIN("kv_types", cases, bind_mem, NULL)
