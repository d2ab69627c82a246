/* SPDX-License-Identifier: BSD-3-Clause */
/* app/cr-kv/resp.c: the RESP2 request parser, against Redis 7.0's behaviour. */
#include <stdlib.h>
#include <string.h>

#include "resp.h"
#include "ut_cunit.h"

#define MAXBULK (512LL * 1024 * 1024)

struct feed {
	char buf[256 * 1024];
	size_t len, pos;
	struct resp_parser p;
};

static void
feed_init(struct feed *f, long long max_bulk)
{
	memset(f, 0, offsetof(struct feed, p));
	resp_parser_init(&f->p, max_bulk);
}

static void
feed_add(struct feed *f, const char *s, size_t n)
{
	CU_ASSERT_FATAL(f->len + n < sizeof(f->buf));
	memcpy(f->buf + f->len, s, n);
	f->len += n;
}

static int
feed_next(struct feed *f, const char **err)
{
	return resp_parse(&f->p, f->buf, f->len, &f->pos, err);
}

static void
arg_is(struct feed *f, unsigned i, const char *s, size_t n)
{
	CU_ASSERT_FATAL(i < f->p.argc);
	CU_ASSERT_EQUAL(f->p.argv[i].len, n);
	CU_ASSERT(memcmp(f->buf + f->p.argv[i].off, s, n) == 0);
	CU_ASSERT_EQUAL(f->buf[f->p.argv[i].off + n], '\0');
}

static void
test_multibulk(void)
{
	static const char req[] = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nva\0ue\r\n";
	struct feed *f = malloc(sizeof(*f));
	const char *err;

	feed_init(f, MAXBULK);
	feed_add(f, req, sizeof(req) - 1);
	CU_ASSERT_EQUAL(feed_next(f, &err), RESP_COMMAND);
	CU_ASSERT_EQUAL(f->p.argc, 3);
	arg_is(f, 0, "SET", 3);
	arg_is(f, 1, "k", 1);
	arg_is(f, 2, "va\0ue", 5);
	CU_ASSERT_EQUAL(f->pos, sizeof(req) - 1);
	CU_ASSERT_EQUAL(feed_next(f, &err), RESP_NEED_MORE);
	resp_parser_fini(&f->p);
	free(f);
}

/* Fed one byte at a time, a pipeline parses to the same commands. */
static void
test_byte_by_byte(void)
{
	static const char req[] = "*2\r\n$4\r\nECHO\r\n$3\r\nabc\r\nPING\r\n\r\n*-1\r\n"
				  "*1\r\n$4\r\nPING\r\nGET \"a b\"\n";
	struct feed *f = malloc(sizeof(*f));
	const char *err;
	int got = 0, r;
	size_t i;

	feed_init(f, MAXBULK);
	for (i = 0; i < sizeof(req) - 1; i++) {
		feed_add(f, req + i, 1);
		while ((r = feed_next(f, &err)) == RESP_COMMAND) {
			got++;
			if (got == 1) {
				arg_is(f, 0, "ECHO", 4);
				arg_is(f, 1, "abc", 3);
			} else if (got == 4) {
				arg_is(f, 0, "GET", 3);
				arg_is(f, 1, "a b", 3);
			}
		}
		CU_ASSERT_EQUAL(r, RESP_NEED_MORE);
	}
	CU_ASSERT_EQUAL(got, 4);
	resp_parser_fini(&f->p);
	free(f);
}

/* Compacting the buffer in the middle of a request keeps its arguments right. */
static void
test_shift(void)
{
	struct feed *f = malloc(sizeof(*f));
	const char *err;
	size_t keep;

	feed_init(f, MAXBULK);
	feed_add(f, "PING\r\n*2\r\n$3\r\nGET\r\n$2\r\nk", 24);
	CU_ASSERT_EQUAL(feed_next(f, &err), RESP_COMMAND);
	CU_ASSERT_EQUAL(feed_next(f, &err), RESP_NEED_MORE);
	keep = resp_parser_keep(&f->p, f->pos);
	CU_ASSERT_EQUAL(keep, 6);
	memmove(f->buf, f->buf + keep, f->len - keep);
	f->len -= keep;
	f->pos -= keep;
	resp_parser_shift(&f->p, keep);
	feed_add(f, "y\r\n", 3);
	CU_ASSERT_EQUAL(feed_next(f, &err), RESP_COMMAND);
	arg_is(f, 0, "GET", 3);
	arg_is(f, 1, "ky", 2);
	resp_parser_fini(&f->p);
	free(f);
}

static void
expect_error(const char *in, size_t n, long long max_bulk, const char *want, size_t wantlen)
{
	struct feed *f = malloc(sizeof(*f));
	const char *err = NULL;
	int r;

	feed_init(f, max_bulk);
	feed_add(f, in, n);
	while ((r = feed_next(f, &err)) == RESP_COMMAND)
		;
	CU_ASSERT_EQUAL(r, RESP_ERROR);
	CU_ASSERT_PTR_NOT_NULL_FATAL(err);
	CU_ASSERT_EQUAL(f->p.errlen, wantlen);
	CU_ASSERT(memcmp(err, want, wantlen) == 0);
	resp_parser_fini(&f->p);
	free(f);
}

#define EXPECT(in, max, want) expect_error(in, sizeof(in) - 1, max, want, sizeof(want) - 1)

static void
test_errors(void)
{
	static char big[70 * 1024];

	EXPECT("*3000000000\r\n", MAXBULK, "Protocol error: invalid multibulk length");
	EXPECT("*\r\n", MAXBULK, "Protocol error: invalid multibulk length");
	EXPECT("*01\r\n", MAXBULK, "Protocol error: invalid multibulk length");
	EXPECT("*1\r\n$-10\r\n", MAXBULK, "Protocol error: invalid bulk length");
	EXPECT("*1\r\n$blabla\r\n", MAXBULK, "Protocol error: invalid bulk length");
	EXPECT("*1\r\n$1025\r\n", 1024, "Protocol error: invalid bulk length");
	EXPECT("*1\r\nfoo\r\n", MAXBULK, "Protocol error: expected '$', got 'f'");
	EXPECT("SET \"a\r\n", MAXBULK, "Protocol error: unbalanced quotes in request");
	EXPECT("SET 'a'b\r\n", MAXBULK, "Protocol error: unbalanced quotes in request");
	memset(big, 'a', sizeof(big));
	expect_error(big, sizeof(big), MAXBULK, "Protocol error: too big inline request", 38);
	big[0] = '\0'; /* a NUL hides the newline that comes later, as strchr() in redis */
	big[100] = '\n';
	expect_error(big, sizeof(big), MAXBULK, "Protocol error: too big inline request", 38);
	big[0] = '*';
	expect_error(big, sizeof(big), MAXBULK, "Protocol error: too big mbulk count string", 42);
	memcpy(big, "*1\r\n$", 5);
	memset(big + 5, '1', sizeof(big) - 5);
	expect_error(big, sizeof(big), MAXBULK, "Protocol error: too big bulk count string", 41);
}

/* Empty lines, "*0" and "*-10" are consumed without a command. */
static void
test_ignored(void)
{
	struct feed *f = malloc(sizeof(*f));
	const char *err;

	feed_init(f, MAXBULK);
	feed_add(f, "\r\n\n   \r\n*0\r\n*-10\r\n", 18);
	CU_ASSERT_EQUAL(feed_next(f, &err), RESP_NEED_MORE);
	CU_ASSERT_EQUAL(f->pos, 18);
	/* A NUL before the count line's CR hides it (strchr in redis): no error, waits. */
	feed_add(f, "*1\r\n\0\r\n", 7);
	CU_ASSERT_EQUAL(feed_next(f, &err), RESP_NEED_MORE);
	resp_parser_fini(&f->p);
	free(f);
}

static void
test_inline_quotes(void)
{
	static const char in[] = "set \"k\\x41\\n\" 'it\\'s'  \"\"\r\n";
	struct feed *f = malloc(sizeof(*f));
	const char *err;

	feed_init(f, MAXBULK);
	feed_add(f, in, sizeof(in) - 1);
	CU_ASSERT_EQUAL_FATAL(feed_next(f, &err), RESP_COMMAND);
	CU_ASSERT_EQUAL(f->p.argc, 4);
	arg_is(f, 1, "kA\n", 3);
	arg_is(f, 2, "it's", 4);
	arg_is(f, 3, "", 0);
	resp_parser_fini(&f->p);
	free(f);
}

/* More arguments than the inline array holds: the array grows. */
static void
test_many_args(void)
{
	struct feed *f = malloc(sizeof(*f));
	const char *err;
	char tmp[32];
	int i;

	feed_init(f, MAXBULK);
	feed_add(f, "*100\r\n", 6);
	for (i = 0; i < 100; i++) {
		int n = snprintf(tmp, sizeof(tmp), "$%d\r\n%d\r\n", i < 10 ? 1 : 2, i);

		feed_add(f, tmp, (size_t)n);
	}
	CU_ASSERT_EQUAL_FATAL(feed_next(f, &err), RESP_COMMAND);
	CU_ASSERT_EQUAL(f->p.argc, 100);
	arg_is(f, 99, "99", 2);
	resp_parser_fini(&f->p);
	free(f);
}

static void
test_string2ll(void)
{
	long long v;

	CU_ASSERT(resp_string2ll("0", 1, &v) && v == 0);
	CU_ASSERT(resp_string2ll("-1", 2, &v) && v == -1);
	CU_ASSERT(resp_string2ll("9223372036854775807", 19, &v) && v == 9223372036854775807LL);
	CU_ASSERT(resp_string2ll("-9223372036854775808", 20, &v) &&
		  v == (-9223372036854775807LL - 1));
	CU_ASSERT(!resp_string2ll("9223372036854775808", 19, &v));
	CU_ASSERT(!resp_string2ll("01", 2, &v));
	CU_ASSERT(!resp_string2ll("+1", 2, &v));
	CU_ASSERT(!resp_string2ll(" 1", 2, &v));
	CU_ASSERT(!resp_string2ll("-", 1, &v));
	CU_ASSERT(!resp_string2ll("", 0, &v));
	CU_ASSERT(!resp_string2ll("-0", 2, &v));
	CU_ASSERT(!resp_string2ll("1a", 2, &v));
}

static const struct ut_case cases[] = {
    UT_CASE(test_multibulk), UT_CASE(test_byte_by_byte), UT_CASE(test_shift),
    UT_CASE(test_errors),    UT_CASE(test_ignored),	 UT_CASE(test_inline_quotes),
    UT_CASE(test_many_args), UT_CASE(test_string2ll),
};

UT_MAIN("kv_resp", cases, NULL, NULL)
