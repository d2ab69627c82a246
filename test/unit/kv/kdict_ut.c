/* SPDX-License-Identifier: BSD-3-Clause */
/* app/cr-kv/kdict.c: lookups during a resize, the bound on work per operation, SCAN's
 * guarantee across resizes, iteration, random choice and shrinking. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kdict.h"
#include "mem.h"
#include "siphash.h"
#include "ut_cunit.h"

struct item {
	struct kd_node node;
	unsigned id;
	unsigned seen;
};

static const uint8_t key[16] = {9};

static uint64_t
hash_id(unsigned id)
{
	return kv_siphash(key, &id, sizeof(id));
}

static bool
eq_id(const struct kd_node *n, const void *k, size_t len)
{
	(void)len;
	return ((const struct item *)n)->id == *(const unsigned *)k;
}

static struct item *
find(struct kdict *d, unsigned id)
{
	return (struct item *)kd_find(d, hash_id(id), &id, sizeof(id), eq_id);
}

static struct item *
items(unsigned n)
{
	struct item *it = calloc(n, sizeof(*it));
	unsigned i;

	for (i = 0; i < n; i++) {
		it[i].id = i;
		it[i].node.hash = hash_id(i);
	}
	return it;
}

/* Growing from 4 buckets to 256k: every add moves at most 1 + 10 buckets' worth of the
 * old table (one bucket, or ten empty ones skipped), lookups find every node while both
 * tables are in use, and the resize ends. */
static void
test_grow_incrementally(void)
{
	enum { N = 200000 };
	struct item *it = items(N);
	struct kdict d;
	uint64_t max_step = 0, resizes = 0, during = 0;
	unsigned i;

	kd_init(&d);
	for (i = 0; i < N; i++) {
		int64_t before = d.rehashidx;
		bool was = kd_rehashing(&d);

		CU_ASSERT_EQUAL_FATAL(kd_add(&d, &it[i].node), 0);
		if (was && kd_rehashing(&d) && (uint64_t)(d.rehashidx - before) > max_step)
			max_step = (uint64_t)(d.rehashidx - before);
		if (!was && kd_rehashing(&d))
			resizes++;
		during += kd_rehashing(&d);
		if (kd_rehashing(&d) && i % 97 == 0) {
			unsigned j;

			for (j = 0; j <= i; j += 1013)
				CU_ASSERT_PTR_EQUAL(find(&d, j), &it[j]);
		}
	}
	CU_ASSERT_EQUAL(kd_count(&d), N);
	CU_ASSERT(resizes >= 15);
	CU_ASSERT(max_step <= 11);
	CU_ASSERT(during > N / 4); /* resizes spread over many adds, not done at once */
	while (kd_rehash(&d, 1000))
		;
	CU_ASSERT(d.size[0] >= N && d.size[0] <= 2 * (uint64_t)N * 2);
	for (i = 0; i < N; i++)
		CU_ASSERT_PTR_EQUAL(find(&d, i), &it[i]);
	kd_release(&d);
	free(it);
}

/* Deleting down to a few nodes shrinks the table back, one step per delete. */
static void
test_shrink(void)
{
	enum { N = 50000 };
	struct item *it = items(N);
	struct kdict d;
	unsigned i;

	kd_init(&d);
	for (i = 0; i < N; i++)
		kd_add(&d, &it[i].node);
	while (kd_rehash(&d, 1000))
		;
	for (i = 0; i < N - 3; i++) {
		kd_unlink(&d, &it[i].node);
		kd_shrink_if_sparse(&d);
	}
	while (kd_rehash(&d, 1000))
		kd_shrink_if_sparse(&d);
	kd_shrink_if_sparse(&d);
	while (kd_rehash(&d, 1000))
		;
	CU_ASSERT_EQUAL(kd_count(&d), 3);
	CU_ASSERT_EQUAL(d.size[0], 4);
	for (i = N - 3; i < N; i++)
		CU_ASSERT_PTR_EQUAL(find(&d, i), &it[i]);
	kd_release(&d);
	free(it);
}

static void
mark(struct kd_node *n, void *arg)
{
	(void)arg;
	((struct item *)n)->seen++;
}

/* SCAN from 0 back to 0 while the table grows and then shrinks between calls: every
 * node present for the whole scan is returned at least once. */
static void
test_scan_across_resizes(void)
{
	enum { KEEP = 3000, MORE = 40000 };
	struct item *it = items(KEEP + MORE);
	uint64_t cursor = 0, calls = 0;
	struct kdict d;
	unsigned i, added = 0;

	kd_init(&d);
	for (i = 0; i < KEEP; i++)
		kd_add(&d, &it[i].node);
	do {
		cursor = kd_scan(&d, cursor, mark, NULL);
		calls++;
		if (calls < 400 && added < MORE) { /* grow, through several resizes */
			for (i = 0; i < 200 && added < MORE; i++, added++)
				kd_add(&d, &it[KEEP + added].node);
		} else if (added > 0) { /* then shrink again */
			for (i = 0; i < 400 && added > 0; i++) {
				added--;
				kd_unlink(&d, &it[KEEP + added].node);
				kd_shrink_if_sparse(&d);
			}
		}
	} while (cursor != 0 && calls < 1000000);
	CU_ASSERT_EQUAL(cursor, 0);
	for (i = 0; i < KEEP; i++)
		CU_ASSERT(it[i].seen >= 1);
	kd_release(&d);
	free(it);
}

/* Iteration visits every node once, including during a resize, and the node just
 * returned may be unlinked. */
static void
test_iterate_and_unlink(void)
{
	enum { N = 10000 };
	struct item *it = items(N);
	struct kd_iter iter;
	struct kd_node *n;
	struct kdict d;
	unsigned i, visited = 0;

	kd_init(&d);
	for (i = 0; i < N; i++)
		kd_add(&d, &it[i].node);
	CU_ASSERT(kd_rehashing(&d));
	kd_iter_init(&d, &iter);
	while ((n = kd_next(&iter)) != NULL) {
		struct item *x = (struct item *)n;

		x->seen++;
		visited++;
		if (x->id % 2 == 0)
			kd_unlink(&d, n);
	}
	kd_iter_end(&iter);
	CU_ASSERT_EQUAL(visited, N);
	for (i = 0; i < N; i++)
		CU_ASSERT_EQUAL(it[i].seen, 1);
	CU_ASSERT_EQUAL(kd_count(&d), N / 2);
	for (i = 0; i < N; i++)
		CU_ASSERT_PTR_EQUAL(find(&d, i), i % 2 ? &it[i] : NULL);
	kd_release(&d);
	free(it);
}

/* Random choice reaches every node, also while a resize is under way. */
static void
test_random(void)
{
	enum { N = 100 };
	struct item *it = items(N);
	struct kdict d;
	uint64_t rng = 12345;
	unsigned i, distinct = 0;

	kd_init(&d);
	CU_ASSERT_PTR_NULL(kd_random(&d, &rng));
	for (i = 0; i < N; i++)
		kd_add(&d, &it[i].node);
	for (i = 0; i < 20000; i++)
		((struct item *)kd_random(&d, &rng))->seen++;
	for (i = 0; i < N; i++)
		distinct += it[i].seen > 0;
	CU_ASSERT_EQUAL(distinct, N);
	kd_release(&d);
	free(it);
}

/* A node replaced in place keeps its place; the table charges its buckets to mem.h. */
static void
test_replace_and_mem(void)
{
	static struct kv_mem m;
	struct item a = {.id = 7}, b = {.id = 7};
	struct kdict d;

	kv_mem_bind(&m);
	kd_init(&d);
	a.node.hash = hash_id(7);
	kd_add(&d, &a.node);
	CU_ASSERT(kv_mem_used(&m) > 0);
	CU_ASSERT_EQUAL((uint64_t)kv_mem_used(&m), kd_mem(&d));
	kd_replace(&d, &a.node, &b.node);
	CU_ASSERT_PTR_EQUAL(find(&d, 7), &b);
	kd_release(&d);
	CU_ASSERT_EQUAL(kv_mem_used(&m), 0);
	kv_mem_bind(NULL);
}

static const struct ut_case cases[] = {
    UT_CASE(test_grow_incrementally), UT_CASE(test_shrink), UT_CASE(test_scan_across_resizes),
    UT_CASE(test_iterate_and_unlink), UT_CASE(test_random), UT_CASE(test_replace_and_mem),
};

UT_MAIN("kv_kdict", cases, NULL, NULL)
