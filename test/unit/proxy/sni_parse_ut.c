/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cr-proxy's ClientHello reader (sni_parse.c) on real hellos made by OpenSSL's client
 * (TLS 1.3 and TLS 1.2, with and without SNI), re-framed into records of every size down
 * to one byte and fed every prefix; and on what is not a hello: HTTP, other records,
 * another handshake message, lengths that lie, a hello over 16 KiB, every single-byte
 * corruption of a real one (which must never read outside the buffer: ASan).
 */
#include <stdlib.h>
#include <string.h>

#include <openssl/ssl.h>

#include "sni_parse.h"
#include "ut_cunit.h"

static uint8_t scratch[PX_SNI_MAX];
static char name[PX_SNI_NAME_MAX];

/* The first flight of an OpenSSL client with @p sni (NULL: none), at most TLS @p max. */
static size_t
hello(const char *sni, int max, uint8_t *out, size_t cap)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL *ssl = SSL_new(ctx);
	BIO *rb = BIO_new(BIO_s_mem()), *wb = BIO_new(BIO_s_mem());
	char *p;
	long n;

	SSL_CTX_set_max_proto_version(ctx, max);
	SSL_set_bio(ssl, rb, wb);
	if (sni != NULL)
		SSL_set_tlsext_host_name(ssl, sni);
	(void)SSL_connect(ssl);
	n = BIO_get_mem_data(wb, &p);
	CU_ASSERT_FATAL(n > 0 && (size_t)n <= cap);
	memcpy(out, p, (size_t)n);
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	return (size_t)n;
}

/* The same handshake bytes in records of @p k bytes each. */
static size_t
reframe(const uint8_t *in, size_t n, size_t k, uint8_t *out)
{
	size_t hs = (size_t)in[3] << 8 | in[4], off = 0, o = 0;

	CU_ASSERT_FATAL(hs + 5 == n); /* OpenSSL sends its hello in one record */
	while (off < hs) {
		size_t m = hs - off < k ? hs - off : k;

		out[o] = 22;
		out[o + 1] = 3;
		out[o + 2] = 1;
		out[o + 3] = (uint8_t)(m >> 8);
		out[o + 4] = (uint8_t)m;
		memcpy(out + o + 5, in + 5 + off, m);
		o += 5 + m;
		off += m;
	}
	return o;
}

static enum px_sni_result
parse(const uint8_t *b, size_t n)
{
	name[0] = '\0';
	return px_sni_parse(b, n, scratch, sizeof(scratch), name, sizeof(name));
}

/* Every prefix of @p b is MORE, the whole is @p want (with @p want_name). */
static void
prefixes(const uint8_t *b, size_t n, enum px_sni_result want, const char *want_name)
{
	size_t i, bad = 0;

	for (i = 0; i < n; i++)
		bad += parse(b, i) != PX_SNI_MORE;
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT_EQUAL(parse(b, n), want);
	if (want_name != NULL)
		CU_ASSERT_STRING_EQUAL(name, want_name);
}

static void
test_real_hellos(void)
{
	static uint8_t h[4096];
	size_t n;

	n = hello("a.test", TLS1_3_VERSION, h, sizeof(h));
	prefixes(h, n, PX_SNI_FOUND, "a.test");
	n = hello("Mixed.Case.Example", TLS1_2_VERSION, h, sizeof(h));
	prefixes(h, n, PX_SNI_FOUND, "mixed.case.example");
	n = hello(NULL, TLS1_3_VERSION, h, sizeof(h));
	prefixes(h, n, PX_SNI_NONE, NULL);
}

/* Records of 1, 2, 7, 100 bytes: the hello is found in the gathered payloads. */
static void
test_split_records(void)
{
	static uint8_t h[4096], r[6 * 4096];
	static const size_t ks[] = {1, 2, 7, 100};
	size_t n = hello("b.test", TLS1_3_VERSION, h, sizeof(h)), i;

	for (i = 0; i < sizeof(ks) / sizeof(ks[0]); i++) {
		size_t m = reframe(h, n, ks[i], r);

		prefixes(r, m, PX_SNI_FOUND, "b.test");
	}
}

/* Bytes after the hello (early data, the next record) change nothing. */
static void
test_trailing_bytes(void)
{
	static uint8_t h[4096];
	size_t n = hello("a.test", TLS1_3_VERSION, h, sizeof(h));

	memcpy(h + n, "\x17\x03\x03\x00\x05hello", 10);
	CU_ASSERT_EQUAL(parse(h, n + 10), PX_SNI_FOUND);
	CU_ASSERT_STRING_EQUAL(name, "a.test");
}

static void
test_not_a_hello(void)
{
	static uint8_t h[4096];
	size_t n = hello("a.test", TLS1_3_VERSION, h, sizeof(h));
	static const uint8_t alert[] = {21, 3, 3, 0, 2, 2, 40};
	static const uint8_t server_hello[] = {22, 3, 3, 0, 4, 2, 0, 0, 0};
	static const uint8_t empty_rec[] = {22, 3, 1, 0, 0};
	static const uint8_t sslv2[] = {0x80, 0x2e, 0x01, 0x03, 0x01};
	/* A hello of 20000 bytes announced: more than we wait for. */
	static const uint8_t huge[] = {22, 3, 1, 0x40, 0x00, 1, 0x00, 0x4e, 0x20};

	CU_ASSERT_EQUAL(parse((const uint8_t *)"GET / HTTP/1.1\r\n", 16), PX_SNI_BAD);
	CU_ASSERT_EQUAL(parse((const uint8_t *)"G", 1), PX_SNI_BAD);
	CU_ASSERT_EQUAL(parse(alert, sizeof(alert)), PX_SNI_BAD);
	CU_ASSERT_EQUAL(parse(server_hello, sizeof(server_hello)), PX_SNI_BAD);
	CU_ASSERT_EQUAL(parse(empty_rec, sizeof(empty_rec)), PX_SNI_BAD);
	CU_ASSERT_EQUAL(parse(sslv2, sizeof(sslv2)), PX_SNI_BAD);
	CU_ASSERT_EQUAL(parse(huge, sizeof(huge)), PX_SNI_BAD);
	/* A second record that is not a handshake, before the hello is whole. */
	{
		static uint8_t r[8192];
		size_t m = reframe(h, n, 50, r);

		r[55] = 23;
		CU_ASSERT_EQUAL(parse(r, m), PX_SNI_BAD);
	}
	/* Extensions that claim one byte more than the hello holds. */
	{
		size_t ext_len_at = 5 + 4 + 2 + 32;

		ext_len_at += 1 + h[ext_len_at];
		ext_len_at += 2 + ((size_t)h[ext_len_at] << 8 | h[ext_len_at + 1]);
		ext_len_at += 1 + h[ext_len_at];
		h[ext_len_at + 1]++;
		CU_ASSERT_EQUAL(parse(h, n), PX_SNI_BAD);
	}
	/* A hello of 16300 bytes announced, in records of one byte: 16 KiB read and still
	 * not whole. */
	{
		static const uint8_t head[] = {1, 0x00, 0x3f, 0xac};
		static uint8_t r[PX_SNI_MAX + 6];
		size_t o, k;

		for (o = 0, k = 0; o + 6 <= sizeof(r); o += 6, k++) {
			memcpy(r + o, "\x16\x03\x01\x00\x01", 5);
			r[o + 5] = k < 4 ? head[k] : 0;
		}
		CU_ASSERT_EQUAL(parse(r, PX_SNI_MAX - 1), PX_SNI_MORE);
		CU_ASSERT_EQUAL(parse(r, PX_SNI_MAX), PX_SNI_BAD);
	}
}

/* Every byte of a real hello changed in turn: any answer, never a read out of bounds
 * (the copy is exactly as long as the hello, so ASan sees one). */
static void
test_every_corruption(void)
{
	static uint8_t h[4096];
	size_t n = hello("a.test", TLS1_3_VERSION, h, sizeof(h)), i;
	unsigned found = 0;

	for (i = 0; i < n; i++) {
		uint8_t *c = malloc(n);

		memcpy(c, h, n);
		c[i] ^= 0xff;
		found += parse(c, n) == PX_SNI_FOUND;
		free(c);
	}
	/* Most bytes (random, ciphers, key shares) do not touch the name's framing. */
	CU_ASSERT(found > n / 2);
}

static const struct ut_case cases[] = {
    UT_CASE(test_real_hellos), UT_CASE(test_split_records),    UT_CASE(test_trailing_bytes),
    UT_CASE(test_not_a_hello), UT_CASE(test_every_corruption),
};

UT_MAIN("sni_parse", cases, NULL, NULL)
