/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Corelist parsing and formatting (lib/eal/eal_corelist.c).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ut_cunit.h"

#include "cr_eal.h"

static void
expect_set(const char *list, const unsigned *ids, unsigned n)
{
	struct cr_cpuset s;
	char err[128] = "";

	CU_ASSERT_EQUAL_FATAL(cr_corelist_parse(list, &s, err, sizeof(err)), 0);
	CU_ASSERT_STRING_EQUAL(err, "");
	CU_ASSERT_EQUAL(cr_cpuset_count(&s), n);
	for (unsigned i = 0; i < n; i++)
		CU_ASSERT_TRUE(cr_cpuset_isset(&s, ids[i]));
}

static void
expect_bad(const char *list, const char *want)
{
	struct cr_cpuset s;
	char err[128] = "";

	memset(&s, 0xff, sizeof(s));
	CU_ASSERT_EQUAL(cr_corelist_parse(list, &s, err, sizeof(err)), -EINVAL);
	CU_ASSERT_EQUAL(cr_cpuset_count(&s), 0);
	CU_ASSERT_PTR_NULL(strchr(err, '\n'));
	CU_ASSERT_NOT_EQUAL(err[0], '\0');
	if (want != NULL && strcmp(err, want) != 0) {
		fprintf(stderr, "\n  corelist '%s': got \"%s\", want \"%s\"\n", list, err, want);
		CU_FAIL("wrong error text");
	}
}

static void
test_good(void)
{
	static const unsigned one[] = {0};
	static const unsigned ranges[] = {0, 1, 2, 3, 6};
	static const unsigned unsorted[] = {0, 1};
	static const unsigned overlap[] = {0, 1, 2, 3};
	static const unsigned top[] = {CR_MAX_LCORES - 1};
	char last[16];

	expect_set("0", one, 1);
	expect_set("0-3,6", ranges, 5);
	expect_set("1,0", unsorted, 2);
	expect_set("0-2,1-3", overlap, 4);
	expect_set("3,3,3-3", overlap + 3, 1);
	snprintf(last, sizeof(last), "%d", CR_MAX_LCORES - 1);
	expect_set(last, top, 1);
	expect_set("007", (const unsigned[]){7}, 1);
}

static void
test_full_range(void)
{
	struct cr_cpuset s;
	char list[32];

	snprintf(list, sizeof(list), "0-%d", CR_MAX_LCORES - 1);
	CU_ASSERT_EQUAL(cr_corelist_parse(list, &s, NULL, 0), 0);
	CU_ASSERT_EQUAL(cr_cpuset_count(&s), CR_MAX_LCORES);
}

static void
test_bad(void)
{
	char too_large[96];

	snprintf(too_large, sizeof(too_large), "CPU 999 is above the largest supported id %d",
		 CR_MAX_LCORES - 1);
	expect_bad("", "empty list");
	expect_bad("x", "'x' is not a CPU id");
	expect_bad("3-1", "range 3-1 is reversed");
	expect_bad("0-999", too_large);
	expect_bad("1,,2", "empty element at position 3");
	expect_bad(",1", "empty element at position 1");
	expect_bad("1-", "'1-' is not a CPU range");
	expect_bad("-1", "'-1' is not a CPU id");
	expect_bad("0-3,", "trailing ','");
	expect_bad(" 1", "' 1' is not a CPU id");
	expect_bad("1a", "'1a' is not a CPU id");
	expect_bad("1-2-3", "'1-2-3' is not a CPU range");
	expect_bad("1-x", "'1-x' is not a CPU range");
	expect_bad("1 ", "'1 ' is not a CPU id");
	expect_bad("0,1;2", "'1;2' is not a CPU id");
	expect_bad("99999999999999999999999999", NULL);
	expect_bad("0-99999999999999999999999999", NULL);
}

static void
test_null_err(void)
{
	struct cr_cpuset s;
	char tiny[4] = "zzz";

	CU_ASSERT_EQUAL(cr_corelist_parse("x", &s, NULL, 0), -EINVAL);
	CU_ASSERT_EQUAL(cr_corelist_parse(NULL, &s, NULL, 0), -EINVAL);
	/* A short buffer is truncated, never overrun. */
	CU_ASSERT_EQUAL(cr_corelist_parse("3-1", &s, tiny, sizeof(tiny)), -EINVAL);
	CU_ASSERT_STRING_EQUAL(tiny, "ran");
}

static void
test_format(void)
{
	struct cr_cpuset s;
	char buf[64];
	char small[4];

	CU_ASSERT_EQUAL_FATAL(cr_corelist_parse("6,0-3,9,10", &s, NULL, 0), 0);
	CU_ASSERT_STRING_EQUAL(cr_cpuset_format(&s, buf, sizeof(buf)), "0-3,6,9-10");
	CU_ASSERT_STRING_EQUAL(cr_cpuset_format(&s, small, sizeof(small)), "0-3");
	memset(&s, 0, sizeof(s));
	CU_ASSERT_STRING_EQUAL(cr_cpuset_format(&s, buf, sizeof(buf)), "");
	cr_cpuset_set(&s, CR_MAX_LCORES - 1);
	snprintf(small, sizeof(small), "%d", CR_MAX_LCORES - 1);
	CU_ASSERT_STRING_EQUAL(cr_cpuset_format(&s, buf, sizeof(buf)), small);
}

static void
test_table_corelist(void)
{
	struct cr_lcore_table t;
	static const unsigned ids[] = {0, 1, 2, 5, 7, 8};
	char buf[64];

	memset(&t, 0, sizeof(t));
	for (unsigned i = 0; i < 6; i++)
		t.lcores[t.n++].lcore_id = ids[i];
	CU_ASSERT_STRING_EQUAL(cr_lcore_table_corelist(&t, buf, sizeof(buf)), "0-2,5,7-8");
	t.n = 0;
	CU_ASSERT_STRING_EQUAL(cr_lcore_table_corelist(&t, buf, sizeof(buf)), "");
}

static const struct ut_case cases[] = {
	{"good lists", test_good},
	{"every id", test_full_range},
	{"bad lists and their messages", test_bad},
	{"optional or short err buffer", test_null_err},
	{"cpuset to corelist", test_format},
	{"table to corelist", test_table_corelist},
};

UT_MAIN("eal_corelist", cases, NULL, NULL)
