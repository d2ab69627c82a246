/* SPDX-License-Identifier: BSD-3-Clause */
/* app/cr-kv/lp.c and intset.c, the compact encodings, against plain arrays as models. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "intset.h"
#include "lp.h"
#include "mem.h"
#include "ut_cunit.h"

static struct kv_mem mem;

static int
bind_mem(void)
{
	kv_mem_bind(&mem);
	return 0;
}

/* Walking forwards and backwards gives the entries in order, whatever their sizes (the
 * varints are 1 to 3 bytes here: lengths 0 to 20000). */
static void
test_lp_walk(void)
{
	static const size_t lens[] = {0, 1, 127, 128, 129, 16383, 16384, 20000, 5, 300};
	const unsigned n = sizeof(lens) / sizeof(lens[0]);
	struct lp *l = lp_new();
	char *buf = malloc(20001);
	uint32_t pos;
	unsigned i;

	for (i = 0; i < n; i++) {
		memset(buf, 'a' + (int)i, lens[i]);
		CU_ASSERT_NOT_EQUAL_FATAL(lp_append(&l, buf, lens[i]), LP_NONE);
	}
	CU_ASSERT_EQUAL(l->count, n);
	for (i = 0, pos = lp_first(l); pos != LP_NONE; pos = lp_next(l, pos), i++) {
		size_t len;
		const unsigned char *p = lp_get(l, pos, &len);

		CU_ASSERT_EQUAL(len, lens[i]);
		CU_ASSERT(len == 0 || (p[0] == 'a' + i && p[len - 1] == 'a' + i));
	}
	CU_ASSERT_EQUAL(i, n);
	for (i = n, pos = lp_last(l); pos != LP_NONE; pos = lp_prev(l, pos)) {
		size_t len;

		i--;
		lp_get(l, pos, &len);
		CU_ASSERT_EQUAL(len, lens[i]);
	}
	CU_ASSERT_EQUAL(i, 0);
	for (i = 0; i < n; i++) {
		size_t len;

		lp_get(l, lp_seek(l, i), &len);
		CU_ASSERT_EQUAL(len, lens[i]);
		lp_get(l, lp_seek(l, (long long)i - n), &len);
		CU_ASSERT_EQUAL(len, lens[i]);
	}
	CU_ASSERT_EQUAL(lp_seek(l, n), LP_NONE);
	CU_ASSERT_EQUAL(lp_seek(l, -(long long)n - 1), LP_NONE);
	lp_free(l);
	free(buf);
}

/* Random inserts, replaces and deletes against an array of strings. */
static void
test_lp_model(void)
{
	enum { MAX = 300 };
	char *model[MAX];
	unsigned count = 0, step, i;
	struct lp *l = lp_new();
	uint64_t rng = 99;

	for (step = 0; step < 20000; step++) {
		unsigned op, at;
		char s[200];
		size_t len;

		rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
		op = (unsigned)(rng >> 60) % 4;
		at = count ? (unsigned)((rng >> 20) % (count + 1)) : 0;
		len = (size_t)((rng >> 8) % 150);
		memset(s, 'A' + (int)(step % 26), len);
		if ((op <= 1 && count < MAX) || count == 0) {
			uint32_t pos = at == count ? l->bytes : lp_seek(l, at);

			CU_ASSERT_NOT_EQUAL_FATAL(lp_insert(&l, pos, s, len), LP_NONE);
			memmove(&model[at + 1], &model[at], (count - at) * sizeof(char *));
			model[at] = strndup(s, len);
			count++;
		} else if (op == 2 && at < count) {
			CU_ASSERT_NOT_EQUAL_FATAL(lp_replace(&l, lp_seek(l, at), s, len), LP_NONE);
			free(model[at]);
			model[at] = strndup(s, len);
		} else if (at < count) {
			unsigned k = 1 + (unsigned)(rng % 3);

			if (at + k > count)
				k = count - at;
			lp_delete(&l, lp_seek(l, at), k);
			for (i = 0; i < k; i++)
				free(model[at + i]);
			memmove(&model[at], &model[at + k], (count - at - k) * sizeof(char *));
			count -= k;
		}
		CU_ASSERT_EQUAL_FATAL(l->count, count);
	}
	for (i = 0; i < count; i++) {
		uint32_t pos = lp_seek(l, i);

		CU_ASSERT(lp_eq(l, pos, model[i], strlen(model[i])));
		CU_ASSERT_EQUAL(lp_find(l, 0, model[i], strlen(model[i]), 0) <= pos, true);
		free(model[i]);
	}
	lp_free(l);
}

/* lp_find with a skip compares only every other entry (hash fields, not values). */
static void
test_lp_find_skip(void)
{
	struct lp *l = lp_new();

	lp_append(&l, "f1", 2);
	lp_append(&l, "f2", 2); /* a value equal to a field */
	lp_append(&l, "f2", 2);
	lp_append(&l, "v", 1);
	CU_ASSERT_EQUAL(lp_find(l, 0, "f2", 2, 1), lp_seek(l, 2));
	CU_ASSERT_EQUAL(lp_find(l, 0, "f2", 2, 0), lp_seek(l, 1));
	CU_ASSERT_EQUAL(lp_find(l, 0, "v", 1, 1), LP_NONE);
	lp_free(l);
	CU_ASSERT_EQUAL(kv_mem_used(&mem), 0);
}

/* The intset stays sorted and distinct, widens from 2 to 4 to 8 bytes when it must, and
 * finds exactly what it holds. */
static void
test_intset(void)
{
	static const int64_t vals[] = {
	    5, -3, 5, 32767, -32768, 32768, -2147483649LL, 9223372036854775807LL, 0, -1, 100};
	struct kv_intset *is = intset_new();
	uint32_t i;
	bool added;

	for (i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		CU_ASSERT_EQUAL_FATAL(intset_add(&is, vals[i], &added), 0);
		CU_ASSERT_EQUAL(added, i != 2);
	}
	CU_ASSERT_EQUAL(is->width, 8);
	CU_ASSERT_EQUAL(is->len, 10);
	for (i = 1; i < is->len; i++)
		CU_ASSERT(intset_get(is, i - 1) < intset_get(is, i));
	CU_ASSERT_EQUAL(intset_get(is, 0), -2147483649LL);
	CU_ASSERT_EQUAL(intset_get(is, is->len - 1), 9223372036854775807LL);
	for (i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
		CU_ASSERT(intset_find(is, vals[i]));
	CU_ASSERT(!intset_find(is, 6));
	CU_ASSERT(intset_remove(&is, 32768));
	CU_ASSERT(!intset_remove(&is, 32768));
	CU_ASSERT(!intset_find(is, 32768));
	CU_ASSERT_EQUAL(is->len, 9);
	intset_free(is);

	is = intset_new();
	CU_ASSERT_EQUAL(intset_add(&is, 1, &added), 0);
	CU_ASSERT_EQUAL(is->width, 2);
	CU_ASSERT_EQUAL(intset_add(&is, 70000, &added), 0);
	CU_ASSERT_EQUAL(is->width, 4);
	CU_ASSERT(intset_find(is, 1) && intset_find(is, 70000));
	intset_free(is);
	CU_ASSERT_EQUAL(kv_mem_used(&mem), 0);
}

static void
test_intset_parse(void)
{
	int64_t v;

	CU_ASSERT(intset_parse("-9223372036854775808", 20, &v) && v == INT64_MIN);
	CU_ASSERT(!intset_parse("9223372036854775808", 19, &v));
	CU_ASSERT(!intset_parse("01", 2, &v));
	CU_ASSERT(!intset_parse("+1", 2, &v));
	CU_ASSERT(!intset_parse(" 1", 2, &v));
	CU_ASSERT(!intset_parse("", 0, &v));
	CU_ASSERT(intset_parse("0", 1, &v) && v == 0);
}

static const struct ut_case cases[] = {
    UT_CASE(test_lp_walk), UT_CASE(test_lp_model),     UT_CASE(test_lp_find_skip),
    UT_CASE(test_intset),  UT_CASE(test_intset_parse),
};

UT_MAIN("kv_lp", cases, bind_mem, NULL)
