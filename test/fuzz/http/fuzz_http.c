/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for app/cr-http's request parser. The input is a byte stream as a
 * connection would deliver it: heads and bodies, one request after another. Each head is
 * parsed whole and again cut in two at a point the input chooses (resumed from a copy, as
 * cr-http does when a head spans receive buffers), and both must agree; every span must lie
 * inside the head; bodies are framed whole and a byte at a time, and both must agree.
 * Decoders (%-escapes, dates) run on what the head names.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http_parse.h"

#define CHECK(c)                          \
	do {                              \
		if (!(c))                 \
			__builtin_trap(); \
	} while (0)

static void
span_ok(struct http_span s, uint32_t head_len)
{
	CHECK(s.off <= head_len && s.len <= head_len - s.off);
}

static void
decoders(const uint8_t *head, const struct http_request *r)
{
	char out[256];
	int64_t t;
	int n;

	n = http_pct_decode((const char *)head + r->path.off, r->path.len, out, sizeof(out));
	CHECK(n < (int)sizeof(out));
	if (n >= 0)
		CHECK(out[n] == '\0');
	if (http_date_parse((const char *)head + r->if_modified_since.off, r->if_modified_since.len,
			    &t) == 0) {
		char d[30];

		http_date_format(t, d);
		if (t >= 0 && t < 253402300800) /* years 1970-9999 round-trip */
			CHECK(memcmp(d + 5, (const char *)head + r->if_modified_since.off + 5,
				     24) == 0);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_limits lim;
	size_t pos = 0;
	unsigned cutsel;
	int rounds = 0;

	if (size < 2)
		return 0;
	http_limits_default(&lim);
	/* Small limits reach the limit paths with small inputs. */
	if (data[0] & 1) {
		lim.max_line = 64;
		lim.max_header_bytes = 128;
		lim.max_fields = 4;
		lim.max_body = 100;
	}
	cutsel = data[1];
	data += 2;
	size -= 2;
	while (pos < size && rounds++ < 64) {
		struct http_parser whole, cut;
		const uint8_t *p = data + pos;
		size_t len = size - pos,
		       k = len ? (cutsel * 131u + (unsigned)rounds) % (len + 1) : 0;
		uint8_t *copy;
		int a, b;

		http_parser_init(&whole);
		a = http_parse_head(&whole, (const char *)p, len, &lim);
		http_parser_init(&cut);
		b = http_parse_head(&cut, (const char *)p, k, &lim);
		if (b == 0) {
			/* A malloc'd copy: ASan catches a pointer kept into the first buffer. */
			copy = malloc(len ? len : 1);
			CHECK(copy != NULL);
			memcpy(copy, p, len);
			b = http_parse_head(&cut, (const char *)copy, len, &lim);
			free(copy);
		}
		/* A head complete in the prefix, or an error found there, is the whole's. */
		CHECK(a == b);
		if (a <= 0)
			break;
		CHECK((size_t)a <= len && whole.req.head_len == (uint32_t)a);
		CHECK(memcmp(&whole.req, &cut.req, sizeof(whole.req)) == 0);
		span_ok(whole.req.target, (uint32_t)a);
		span_ok(whole.req.path, (uint32_t)a);
		span_ok(whole.req.host, (uint32_t)a);
		span_ok(whole.req.range, (uint32_t)a);
		span_ok(whole.req.if_modified_since, (uint32_t)a);
		CHECK(whole.req.path.len <= whole.req.target.len);
		CHECK(whole.req.fields <= lim.max_fields);
		CHECK(!(whole.req.chunked && whole.req.has_length));
		decoders(p, &whole.req);
		pos += (size_t)a;
		{
			struct http_body bw, bb;
			size_t used, used1 = 0, i;
			int rw, rb = 0;

			if (!http_body_init(&bw, &whole.req))
				continue;
			http_body_init(&bb, &whole.req);
			rw = http_body_feed(&bw, (const char *)data + pos, size - pos, &used, &lim);
			CHECK(used <= size - pos);
			CHECK(rw == 0 || rw == 1 || rw == -400 || rw == -413 || rw == -431);
			for (i = pos; i < size && rb == 0; i++) {
				size_t u;

				rb = http_body_feed(&bb, (const char *)data + i, 1, &u, &lim);
				CHECK(u <= 1);
				used1 += u;
			}
			CHECK(rw == rb);
			if (rw == 1)
				CHECK(used == used1);
			if (rw != 1)
				break;
			if (!whole.req.chunked)
				CHECK(used == whole.req.content_length);
			pos += used;
		}
	}
	return 0;
}
