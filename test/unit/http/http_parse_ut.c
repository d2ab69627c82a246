/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The request parser: every bad input of issue 5 with its status code; the good requests
 * split across two buffers at every byte boundary (as a head cut by the end of a receive
 * buffer is resumed from a copy); chunked and Content-Length bodies fed a byte at a time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_parse.h"
#include "ut_cunit.h"

static struct http_limits lim;

static int
suite_init(void)
{
	http_limits_default(&lim);
	return 0;
}

/* Parse @p s whole; @return what http_parse_head() returned. */
static int
parse_all(const char *s, size_t len, struct http_parser *p)
{
	http_parser_init(p);
	return http_parse_head(p, s, len, &lim);
}

static int
parse_str(const char *s)
{
	struct http_parser p;

	return parse_all(s, strlen(s), &p);
}

/*
 * Feed @p s split at @p cut: the first call sees s[0..cut), the second a copy of all of it
 * in another buffer (the parser must not keep pointers). @return the final result.
 */
static int
parse_split(const char *s, size_t len, size_t cut, struct http_parser *p, char *copy)
{
	int rc;

	http_parser_init(p);
	rc = http_parse_head(p, s, cut, &lim);
	if (rc != 0)
		return rc;
	memcpy(copy, s, len);
	return http_parse_head(p, copy, len, &lim);
}

static void
span_is(const char *buf, struct http_span sp, const char *want)
{
	CU_ASSERT_EQUAL(sp.len, strlen(want));
	if (sp.len == strlen(want))
		CU_ASSERT(memcmp(buf + sp.off, want, sp.len) == 0);
}

/* Every cut of a good request gives the same complete head. */
static void
good_every_cut(const char *s, void (*check)(const char *buf, const struct http_request *r))
{
	size_t len = strlen(s), cut;
	char *copy = malloc(len + 1);
	struct http_parser p;

	for (cut = 0; cut <= len; cut++) {
		int rc = parse_split(s, len, cut, &p, copy);

		CU_ASSERT_EQUAL(rc, (int)len);
		if (rc != (int)len) {
			fprintf(stderr, "cut %zu of %s: %d\n", cut, s, rc);
			break;
		}
		check(copy, &p.req);
	}
	free(copy);
}

static void
check_get(const char *buf, const struct http_request *r)
{
	CU_ASSERT_EQUAL(r->method, HTTP_GET);
	CU_ASSERT_EQUAL(r->minor, 1);
	CU_ASSERT(r->keep_alive);
	CU_ASSERT(!r->chunked && !r->has_length);
	span_is(buf, r->target, "/a/b%20c?x=1");
	span_is(buf, r->path, "/a/b%20c");
	span_is(buf, r->host, "example.com");
	span_is(buf, r->range, "bytes=1-2");
	span_is(buf, r->if_modified_since, "Sun, 06 Nov 1994 08:49:37 GMT");
	CU_ASSERT_EQUAL(r->fields, 4);
}

static void
test_good_get(void)
{
	good_every_cut("GET /a/b%20c?x=1 HTTP/1.1\r\nHost: example.com\r\nRange: bytes=1-2\r\n"
		       "If-Modified-Since:   Sun, 06 Nov 1994 08:49:37 GMT  \r\n"
		       "X-Obs: caf\xc3\xa9\t!\r\n\r\n",
		       check_get);
}

static void
check_post(const char *buf, const struct http_request *r)
{
	CU_ASSERT_EQUAL(r->method, HTTP_POST);
	CU_ASSERT(r->has_length);
	CU_ASSERT_EQUAL(r->content_length, 5);
	CU_ASSERT(!r->keep_alive);
	CU_ASSERT(r->expect_continue);
	span_is(buf, r->path, "/p");
}

static void
test_good_post(void)
{
	good_every_cut(
	    "\r\nPOST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n"
	    "Content-Length: 5\r\nConnection: foo, Close\r\nExpect: 100-continue\r\n\r\n",
	    check_post);
}

static void
check_10(const char *buf, const struct http_request *r)
{
	(void)buf;
	CU_ASSERT_EQUAL(r->method, HTTP_HEAD);
	CU_ASSERT_EQUAL(r->minor, 0);
	CU_ASSERT(r->keep_alive); /* 1.0 with keep-alive */
	CU_ASSERT_EQUAL(r->host.len, 0);
}

static void
test_good_http10(void)
{
	good_every_cut("HEAD / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", check_10);
	CU_ASSERT_EQUAL(parse_str("GET / HTTP/1.0\r\n\r\n"), 18);
}

static void
check_chunked(const char *buf, const struct http_request *r)
{
	(void)buf;
	CU_ASSERT(r->chunked);
	CU_ASSERT_EQUAL(r->method, HTTP_PUT);
}

static void
test_good_chunked(void)
{
	good_every_cut("PUT /u HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n",
		       check_chunked);
}

static void
check_absolute(const char *buf, const struct http_request *r)
{
	span_is(buf, r->target, "HTTP://example.com:80/x/y?q=/z");
	span_is(buf, r->path, "/x/y");
}

static void
test_good_absolute_form(void)
{
	good_every_cut("GET HTTP://example.com:80/x/y?q=/z HTTP/1.1\r\nHost: example.com\r\n\r\n",
		       check_absolute);
}

static void
test_incomplete(void)
{
	CU_ASSERT_EQUAL(parse_str(""), 0);
	CU_ASSERT_EQUAL(parse_str("GET / HTTP/1.1\r\nHost: h\r\n"), 0);
	CU_ASSERT_EQUAL(parse_str("GET / HTTP/1.1\r\nHost: h\r\n\r"), 0);
	/* Within one more request past the head: only the head is taken. */
	CU_ASSERT_EQUAL(parse_str("GET / HTTP/1.1\r\nHost: h\r\n\r\nGET"), 27);
	CU_ASSERT_EQUAL(parse_str("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n"), 31);
}

struct bad {
	const char *req;
	int status;
};

static const struct bad bads[] = {
    /* Bad request line. */
    {"GET\r\n\r\n", 400},
    {"GET /\r\n\r\n", 400},
    {"GET  / HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"GET / HTTP/1.1 \r\nHost: h\r\n\r\n", 400},
    {" GET / HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"GET / HTTX/1.1\r\nHost: h\r\n\r\n", 400},
    {"GET / HTTP/1\r\nHost: h\r\n\r\n", 400},
    {"GET / HTTP/1.x\r\nHost: h\r\n\r\n", 400},
    {"GET a HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"GET http://h HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"GET http:///x HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"GET ftp://h/x HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"GET * HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"G(T / HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    /* URI with a space or a control char, bad escapes. */
    {"GET /a b HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"GET /a\x01 HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"GET /a\x7f HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"GET /a\tb HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"GET /\xc3\xa9 HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"GET /a% HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"GET /a%1 HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"GET /a%zz HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    {"GET /a?q=%g1 HTTP/1.1\r\nHost: h\r\n\r\n", 400},
    /* Methods. */
    {"FOO / HTTP/1.1\r\nHost: h\r\n\r\n", 501},
    {"get / HTTP/1.1\r\nHost: h\r\n\r\n", 501},
    {"TRACE / HTTP/1.1\r\nHost: h\r\n\r\n", 405},
    /* Versions. */
    {"GET / HTTP/2.0\r\nHost: h\r\n\r\n", 505},
    {"GET / HTTP/9\r\nHost: h\r\n\r\n", 505},
    {"GET / HTTP/0.9\r\nHost: h\r\n\r\n", 505},
    /* Framing. */
    {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
    {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 400},
    {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", 400},
    {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3, 3\r\n\r\n", 400},
    {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n", 400},
    {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: \r\n\r\n", 400},
    {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", 400},
    {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 400},
    {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
     "Transfer-Encoding: chunked\r\n\r\n",
     400},
    {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
    {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1048577\r\n\r\n", 413},
    {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999999\r\n\r\n", 413},
    /* Host. */
    {"GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\n\r\n", 400},
    /* Line endings, folding, whitespace before the colon, bad field syntax. */
    {"GET / HTTP/1.1\nHost: h\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: h\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: h\r\n\n", 400},
    {"GET / HTTP/1.1\r\nHost: h\r\nX: a\rb\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n\tb\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost : h\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost\t: h\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: h\r\n: x\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: h\r\nX: a\x01\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: h\r\nExpect: something\r\n\r\n", 417},
};

static void
test_bad_inputs(void)
{
	unsigned i;

	for (i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
		const char *s = bads[i].req;
		struct http_parser p;
		int rc;

		rc = parse_all(s, strlen(s), &p);
		if (rc != -bads[i].status)
			fprintf(stderr, "case %u %.40s: got %d, want %d\n", i, s, rc,
				-bads[i].status);
		CU_ASSERT_EQUAL(rc, -bads[i].status);
	}
}

/* The NUL case with its real length (strlen stops at the NUL). */
static void
test_nul_in_value(void)
{
	static const char s[] = "GET / HTTP/1.1\r\nHost: h\r\nX: a\0b\r\n\r\n";
	struct http_parser p;

	CU_ASSERT_EQUAL(parse_all(s, sizeof(s) - 1, &p), -400);
}

static void
test_limits(void)
{
	size_t n = 20000, i;
	char *s = malloc(n + 200);
	struct http_parser p;

	/* Request line: 8192 bytes is fine, 8193 is 414, complete or not. */
	memcpy(s, "GET /", 5);
	memset(s + 5, 'a', 8192 - 5 - 9);
	memcpy(s + 8192 - 9, " HTTP/1.1\r\nHost: h\r\n\r\n", 23);
	CU_ASSERT_EQUAL(parse_all(s, 8192 + 13, &p), 8192 + 13);
	memcpy(s, "GET /", 5);
	memset(s + 5, 'a', 8193 - 5 - 9);
	memcpy(s + 8193 - 9, " HTTP/1.1\r\nHost: h\r\n\r\n", 23);
	CU_ASSERT_EQUAL(parse_all(s, 8193 + 13, &p), -414);
	memset(s, 'a', 9000);
	memcpy(s, "GET /", 5);
	CU_ASSERT_EQUAL(parse_all(s, 9000, &p), -414); /* no line end yet */
	CU_ASSERT_EQUAL(parse_all(s, 8193, &p), 0);    /* could still be 8192 + CR */

	/* Header bytes: one 17 KiB field, complete or not. */
	i = (size_t)sprintf(s, "GET / HTTP/1.1\r\nHost: h\r\nX: ");
	memset(s + i, 'v', 17000);
	CU_ASSERT_EQUAL(parse_all(s, i + 17000, &p), -431);
	memcpy(s + i + 17000, "\r\n\r\n", 4);
	CU_ASSERT_EQUAL(parse_all(s, i + 17004, &p), -431);

	/* Fields: 100 fine, 101 too many. */
	i = (size_t)sprintf(s, "GET / HTTP/1.1\r\nHost: h\r\n");
	for (unsigned k = 1; k < 100; k++)
		i += (size_t)sprintf(s + i, "X%u: v\r\n", k);
	memcpy(s + i, "\r\n", 2);
	CU_ASSERT_EQUAL(parse_all(s, i + 2, &p), (int)i + 2);
	i += (size_t)sprintf(s + i, "Y: v\r\n");
	memcpy(s + i, "\r\n", 2);
	CU_ASSERT_EQUAL(parse_all(s, i + 2, &p), -431);
	free(s);
}

/* Feed a body one byte at a time, then whole; both must agree. */
static int
body_feed(const char *head, const char *body, size_t blen, size_t *used_total)
{
	struct http_parser p;
	struct http_body b;
	size_t used, i;
	int rc = 0, whole;

	CU_ASSERT_FATAL(parse_all(head, strlen(head), &p) > 0);
	http_body_init(&b, &p.req);
	whole = http_body_feed(&b, body, blen, &used, &lim);
	*used_total = used;
	http_body_init(&b, &p.req);
	for (i = 0; i < blen && rc == 0; i++) {
		rc = http_body_feed(&b, body + i, 1, &used, &lim);
		CU_ASSERT(used <= 1);
	}
	CU_ASSERT_EQUAL(rc, whole);
	return whole;
}

static const char CH[] = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";

static void
test_chunked(void)
{
	static const char ok[] = "5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nT: v\r\n\r\nNEXT";
	size_t used;

	CU_ASSERT_EQUAL(body_feed(CH, ok, sizeof(ok) - 1, &used), 1);
	CU_ASSERT_EQUAL(used, sizeof(ok) - 1 - 4);
	CU_ASSERT_EQUAL(body_feed(CH, "0\r\n\r\n", 5, &used), 1);
	CU_ASSERT_EQUAL(body_feed(CH, "5\r\nhel", 6, &used), 0);
	/* Bad sizes, a chunk longer than declared, bare LF. */
	CU_ASSERT_EQUAL(body_feed(CH, "zz\r\n", 4, &used), -400);
	CU_ASSERT_EQUAL(body_feed(CH, "\r\n", 2, &used), -400);
	CU_ASSERT_EQUAL(body_feed(CH, "-1\r\n", 4, &used), -400);
	CU_ASSERT_EQUAL(body_feed(CH, "5 \r\n", 4, &used), -400);
	CU_ASSERT_EQUAL(body_feed(CH, "3\r\nabcdef\r\n0\r\n\r\n", 17, &used), -400);
	CU_ASSERT_EQUAL(body_feed(CH, "3\nabc\r\n", 7, &used), -400);
	CU_ASSERT_EQUAL(body_feed(CH, "3\r\nabc\n", 7, &used), -400);
	CU_ASSERT_EQUAL(body_feed(CH, "0\r\n\n", 4, &used), -400);
	/* Over the body limit: one huge chunk, or many that add up. */
	CU_ASSERT_EQUAL(body_feed(CH, "100001\r\n", 8, &used), -413);
	CU_ASSERT_EQUAL(body_feed(CH, "ffffffffffffffffff\r\n", 20, &used), -413);
}

static void
test_chunked_sum_limit(void)
{
	struct http_parser p;
	struct http_body b;
	static char chunk[70000];
	size_t used, n;
	int rc = 0, k;

	CU_ASSERT_FATAL(parse_all(CH, strlen(CH), &p) > 0);
	http_body_init(&b, &p.req);
	n = (size_t)sprintf(chunk, "10000\r\n");
	memset(chunk + n, 'x', 0x10000);
	memcpy(chunk + n + 0x10000, "\r\n", 2);
	n += 0x10000 + 2;
	for (k = 0; k < 17 && rc == 0; k++)
		rc = http_body_feed(&b, chunk, n, &used, &lim);
	CU_ASSERT_EQUAL(k, 17);
	CU_ASSERT_EQUAL(rc, -413); /* the 17th 64 KiB chunk passes 1 MiB */
}

static void
test_length_body(void)
{
	static const char head[] = "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n";
	size_t used;

	CU_ASSERT_EQUAL(body_feed(head, "helloGET", 8, &used), 1);
	CU_ASSERT_EQUAL(used, 5);
	CU_ASSERT_EQUAL(body_feed(head, "hel", 3, &used), 0);
	CU_ASSERT_EQUAL(used, 3);
}

static void
test_pct_and_dates(void)
{
	char out[32];
	int64_t t;
	char d[30];

	CU_ASSERT_EQUAL(http_pct_decode("/a%20b%2e", 9, out, sizeof(out)), 5);
	CU_ASSERT_STRING_EQUAL(out, "/a b.");
	CU_ASSERT_EQUAL(http_pct_decode("/a%00", 5, out, sizeof(out)), -1);
	CU_ASSERT_EQUAL(http_pct_decode("/a%2", 4, out, sizeof(out)), -1);
	CU_ASSERT_EQUAL(http_date_parse("Sun, 06 Nov 1994 08:49:37 GMT", 29, &t), 0);
	CU_ASSERT_EQUAL(t, 784111777);
	http_date_format(784111777, d);
	CU_ASSERT_STRING_EQUAL(d, "Sun, 06 Nov 1994 08:49:37 GMT");
	CU_ASSERT_EQUAL(http_date_parse("Sunday, 06-Nov-94 08:49:37 GMT", 30, &t), -1);
	CU_ASSERT_EQUAL(http_date_parse("Sun, 06 Foo 1994 08:49:37 GMT", 29, &t), -1);
	CU_ASSERT_EQUAL(http_date_parse("Sun, 31 Nov 1994 08:49:37 GMT", 29, &t), -1);
	CU_ASSERT_EQUAL(http_date_parse("Sun, 29 Feb 1900 08:49:37 GMT", 29, &t), -1);
	CU_ASSERT_EQUAL(http_date_parse("Tue, 29 Feb 2000 08:49:37 GMT", 29, &t), 0);
	CU_ASSERT_EQUAL(http_date_parse("Sun, 06 Nov 1994 24:00:00 GMT", 29, &t), -1);
}

static const struct ut_case cases[] = {
    UT_CASE(test_good_get),	 UT_CASE(test_good_post),	   UT_CASE(test_good_http10),
    UT_CASE(test_good_chunked),	 UT_CASE(test_good_absolute_form), UT_CASE(test_incomplete),
    UT_CASE(test_bad_inputs),	 UT_CASE(test_nul_in_value),	   UT_CASE(test_limits),
    UT_CASE(test_chunked),	 UT_CASE(test_chunked_sum_limit),  UT_CASE(test_length_body),
    UT_CASE(test_pct_and_dates),
};

UT_MAIN("http_parse", cases, suite_init, NULL)
