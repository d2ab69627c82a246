/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The JSON writer: escaping (quotes, control characters, UTF-8 kept or replaced),
 * numbers, nesting, every misuse refused rather than written, a full buffer, and a seeded
 * run of random call sequences whose accepted output must always parse.
 */
#include <math.h>

#include "telemetry_internal.h"
#include "ut_json.h"
#include "ut_runtime.h"
#include "ut_socket.h"

static char buf[4096];

/* Write one top-level string and return the text. */
static const char *
str(const char *s)
{
	static struct cr_json j;

	cr_json_init(&j, buf, sizeof(buf));
	cr_json_string(&j, NULL, s);
	CU_ASSERT_EQUAL(cr_json_finish(&j), 0);
	CU_ASSERT_TRUE(ut_json_valid(cr_json_text(&j)));
	return cr_json_text(&j);
}

static void
test_escaping(void)
{
	CU_ASSERT_STRING_EQUAL(str("plain"), "\"plain\"");
	CU_ASSERT_STRING_EQUAL(str(""), "\"\"");
	CU_ASSERT_STRING_EQUAL(str("a\"b\\c"), "\"a\\\"b\\\\c\"");
	CU_ASSERT_STRING_EQUAL(str("l1\nl2\tt\rr"), "\"l1\\nl2\\tt\\rr\"");
	CU_ASSERT_STRING_EQUAL(str("\x01\x1f\x7f"), "\"\\u0001\\u001f\\u007f\"");
	CU_ASSERT_STRING_EQUAL(str("/path/ok"), "\"/path/ok\"");
}

static void
test_utf8(void)
{
	/* Valid sequences of 2, 3 and 4 bytes are kept as they are. */
	CU_ASSERT_STRING_EQUAL(str("caf\xc3\xa9"), "\"caf\xc3\xa9\"");
	CU_ASSERT_STRING_EQUAL(str("\xe2\x82\xac"), "\"\xe2\x82\xac\"");
	CU_ASSERT_STRING_EQUAL(str("\xf0\x9f\x98\x80"), "\"\xf0\x9f\x98\x80\"");
	/* A lone continuation byte, a truncated sequence, an overlong form, a surrogate, a
	 * code point above U+10FFFF: each bad byte becomes U+FFFD. */
	CU_ASSERT_STRING_EQUAL(str("a\x80z"), "\"a\\ufffdz\"");
	CU_ASSERT_STRING_EQUAL(str("\xc3"), "\"\\ufffd\"");
	CU_ASSERT_STRING_EQUAL(str("\xc0\xaf"), "\"\\ufffd\\ufffd\"");
	CU_ASSERT_STRING_EQUAL(str("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");
	CU_ASSERT_STRING_EQUAL(str("\xf4\x90\x80\x80"), "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");
	CU_ASSERT_STRING_EQUAL(str("\xff"), "\"\\ufffd\"");
}

static void
test_numbers_and_literals(void)
{
	struct cr_json j;

	cr_json_init(&j, buf, sizeof(buf));
	cr_json_array_begin(&j, NULL);
	cr_json_u64(&j, NULL, UINT64_MAX);
	cr_json_i64(&j, NULL, INT64_MIN);
	cr_json_double(&j, NULL, 0.5);
	cr_json_double(&j, NULL, 1e300);
	cr_json_double(&j, NULL, NAN);
	cr_json_double(&j, NULL, -INFINITY);
	cr_json_bool(&j, NULL, true);
	cr_json_bool(&j, NULL, false);
	cr_json_null(&j, NULL);
	cr_json_string(&j, NULL, NULL);
	cr_json_stringf(&j, NULL, "%d-%s", 7, "x\"");
	cr_json_array_end(&j);
	CU_ASSERT_EQUAL(cr_json_finish(&j), 0);
	CU_ASSERT_STRING_EQUAL(cr_json_text(&j),
			       "[18446744073709551615,-9223372036854775808,0.5,1e+300,null,null,"
			       "true,false,null,null,\"7-x\\\"\"]");
	CU_ASSERT_TRUE(ut_json_valid(cr_json_text(&j)));
	CU_ASSERT_EQUAL(cr_json_len(&j), strlen(cr_json_text(&j)));
}

static void
test_nesting(void)
{
	struct cr_json j;

	cr_json_init(&j, buf, sizeof(buf));
	cr_json_object_begin(&j, NULL);
	cr_json_array_begin(&j, "a");
	cr_json_object_begin(&j, NULL);
	cr_json_object_end(&j);
	cr_json_array_begin(&j, NULL);
	cr_json_array_end(&j);
	cr_json_array_end(&j);
	cr_json_object_begin(&j, "k\"ey");
	cr_json_u64(&j, "n", 1);
	cr_json_object_end(&j);
	cr_json_object_end(&j);
	CU_ASSERT_EQUAL(cr_json_finish(&j), 0);
	CU_ASSERT_STRING_EQUAL(cr_json_text(&j), "{\"a\":[{},[]],\"k\\\"ey\":{\"n\":1}}");
}

typedef void (*misuse_fn)(struct cr_json *j);

static void
m_key_in_array(struct cr_json *j)
{
	cr_json_array_begin(j, NULL);
	cr_json_u64(j, "k", 1);
	cr_json_array_end(j);
}

static void
m_no_key_in_object(struct cr_json *j)
{
	cr_json_object_begin(j, NULL);
	cr_json_u64(j, NULL, 1);
	cr_json_object_end(j);
}

static void
m_key_at_top(struct cr_json *j)
{
	cr_json_u64(j, "k", 1);
}

static void
m_two_values(struct cr_json *j)
{
	cr_json_u64(j, NULL, 1);
	cr_json_u64(j, NULL, 2);
}

static void
m_wrong_end(struct cr_json *j)
{
	cr_json_object_begin(j, NULL);
	cr_json_array_end(j);
}

static void
m_end_at_top(struct cr_json *j)
{
	cr_json_object_end(j);
}

static void
m_left_open(struct cr_json *j)
{
	cr_json_array_begin(j, NULL);
}

static void
m_nothing(struct cr_json *j)
{
	(void)j;
}

static void
m_too_deep(struct cr_json *j)
{
	for (int i = 0; i <= CR_JSON_MAX_DEPTH; i++)
		cr_json_array_begin(j, NULL);
	for (int i = 0; i <= CR_JSON_MAX_DEPTH; i++)
		cr_json_array_end(j);
}

static void
m_dangling_key(struct cr_json *j)
{
	cr_json_object_begin(j, NULL);
	cr__json_key(j, "k");
	cr_json_object_end(j);
}

static void
test_misuse_is_refused(void)
{
	static const misuse_fn cases[] = {
	    m_key_in_array, m_no_key_in_object, m_key_at_top, m_two_values, m_wrong_end,
	    m_end_at_top,   m_left_open,	m_nothing,    m_too_deep,   m_dangling_key};
	struct cr_json j;

	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cr_json_init(&j, buf, sizeof(buf));
		cases[i](&j);
		CU_ASSERT_EQUAL(cr_json_finish(&j), -EINVAL);
	}
	/* The deepest nesting allowed is fine. */
	cr_json_init(&j, buf, sizeof(buf));
	for (int i = 0; i < CR_JSON_MAX_DEPTH; i++)
		cr_json_array_begin(&j, NULL);
	for (int i = 0; i < CR_JSON_MAX_DEPTH; i++)
		cr_json_array_end(&j);
	CU_ASSERT_EQUAL(cr_json_finish(&j), 0);
	CU_ASSERT_TRUE(ut_json_valid(cr_json_text(&j)));
}

static void
test_key_then_value(void)
{
	struct cr_json j;

	cr_json_init(&j, buf, sizeof(buf));
	cr_json_object_begin(&j, NULL);
	cr_json_u64(&j, "a", 1);
	cr__json_key(&j, "/cmd");
	cr_json_array_begin(&j, NULL);
	cr_json_array_end(&j);
	cr_json_object_end(&j);
	CU_ASSERT_EQUAL(cr_json_finish(&j), 0);
	CU_ASSERT_STRING_EQUAL(cr_json_text(&j), "{\"a\":1,\"/cmd\":[]}");
}

static void
test_full_buffer(void)
{
	char small[16];
	struct cr_json j;

	/* Every size from nothing up to one that fits: never an overrun, always a C string,
	 * and -ENOSPC until the text fits. */
	for (size_t cap = 1; cap <= sizeof(small); cap++) {
		memset(small, 'X', sizeof(small));
		cr_json_init(&j, small, cap);
		cr_json_array_begin(&j, NULL);
		cr_json_string(&j, NULL, "abc\"d");
		cr_json_u64(&j, NULL, 12);
		cr_json_array_end(&j);
		CU_ASSERT_TRUE(memchr(small, '\0', cap) != NULL);
		for (size_t k = cap; k < sizeof(small); k++)
			CU_ASSERT_EQUAL(small[k], 'X');
		CU_ASSERT_EQUAL(cr_json_finish(&j),
				cap <= strlen("[\"abc\\\"d\",12]") ? -ENOSPC : 0);
	}
}

static void
test_errorf(void)
{
	struct cr_json j;

	cr_json_init(&j, buf, sizeof(buf));
	CU_ASSERT_STRING_EQUAL(cr__json_errmsg(&j), "");
	CU_ASSERT_EQUAL(cr_json_errorf(&j, -ENOENT, "no %s %d", "lcore", 9), -ENOENT);
	CU_ASSERT_STRING_EQUAL(cr__json_errmsg(&j), "no lcore 9");
}

/* ---- seeded random sequences ---- */

static uint64_t
rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/*
 * One random call, mostly what the writer's state allows and sometimes not, with keys and
 * strings drawn from nasty bytes.
 */
static void
random_call(struct cr_json *j, uint64_t *s)
{
	static const char *const words[] = {"",
					    "k",
					    "\"",
					    "\\",
					    "\n",
					    "\x01",
					    "\xc3\xa9",
					    "\xff\xfe",
					    "\xe2\x82",
					    "a\"b\\c\td",
					    "\xf0\x9f\x98\x80"};
	bool want_key = j->depth > 0 && !j->is_array[j->depth];
	const char *val = words[rnd(s) % 11];
	const char *key;
	unsigned what = (unsigned)(rnd(s) % 10);

	if (rnd(s) % 10 == 0)
		want_key = !want_key;
	key = want_key ? words[rnd(s) % 11] : NULL;
	/* A document is mostly an object or an array. */
	if (j->depth == 0 && rnd(s) % 10 != 0)
		what = 3 + (unsigned)(rnd(s) & 1);
	if (j->depth > 0 && what < 3) {
		/* Close, usually the right kind. */
		if ((rnd(s) % 10 != 0) == j->is_array[j->depth])
			cr_json_array_end(j);
		else
			cr_json_object_end(j);
		return;
	}
	switch (what) {
	case 3:
		cr_json_object_begin(j, key);
		break;
	case 4:
		cr_json_array_begin(j, key);
		break;
	case 5:
		cr_json_string(j, key, val);
		break;
	case 6:
		cr_json_u64(j, key, rnd(s));
		break;
	case 7:
		cr_json_double(j, key, (double)(int64_t)rnd(s) / 7.0);
		break;
	case 8:
		cr_json_bool(j, key, rnd(s) & 1);
		break;
	default:
		cr_json_null(j, key);
		break;
	}
}

static void
test_random_sequences_stay_valid(void)
{
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	unsigned ok = 0, refused = 0, full = 0;
	struct cr_json j;

	for (unsigned run = 0; run < 20000; run++) {
		unsigned calls = 1 + (unsigned)(rnd(&seed) % 40);

		cr_json_init(&j, buf, 16 + rnd(&seed) % 1024);
		/* Past a complete document anything more is a misuse; stop there mostly. */
		for (unsigned c = 0; c < calls && !(j.depth == 0 && j.top_done && rnd(&seed) % 4);
		     c++)
			random_call(&j, &seed);
		/* Mostly close what is open, so that many runs are complete documents. */
		while (j.depth > 0 && !j.misuse && rnd(&seed) % 8 != 0) {
			if (j.is_array[j.depth])
				cr_json_array_end(&j);
			else
				cr_json_object_end(&j);
		}
		switch (cr_json_finish(&j)) {
		case 0:
			ok++;
			if (!ut_json_valid(cr_json_text(&j))) {
				fprintf(stderr, "run %u: invalid: %s\n", run, cr_json_text(&j));
				CU_FAIL("accepted output is not JSON");
				return;
			}
			break;
		case -ENOSPC:
			full++;
			break;
		default:
			refused++;
			break;
		}
	}
	printf("\n  %u valid, %u refused, %u too long\n", ok, refused, full);
	CU_ASSERT_TRUE(ok > 1000 && refused > 1000 && full > 100);
}

static const struct ut_case cases[] = {
	UT_CASE(test_escaping),
	UT_CASE(test_utf8),
	UT_CASE(test_numbers_and_literals),
	UT_CASE(test_nesting),
	UT_CASE(test_misuse_is_refused),
	UT_CASE(test_key_then_value),
	UT_CASE(test_full_buffer),
	UT_CASE(test_errorf),
	UT_CASE(test_random_sequences_stay_valid),
};

UT_MAIN("telemetry_json", cases, NULL, NULL)
