/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * SipHash-c-d, written from the paper's description (section 2): the state is four
 * 64-bit words initialised from the key and the constants "somepseudorandomlygenerated
 * bytes"; each 8-byte little-endian message word m is xored into v3, followed by c
 * SipRounds, then xored into v0; the last word holds the remaining bytes and the length
 * mod 256 in its top byte; finalisation xors 0xff into v2 and runs d SipRounds; the
 * result is v0 ^ v1 ^ v2 ^ v3.
 */
#include <string.h>

#include "siphash.h"

static inline uint64_t
rotl(uint64_t x, unsigned b)
{
	return (x << b) | (x >> (64 - b));
}

static inline uint64_t
load_le64(const uint8_t *p)
{
	uint64_t v = 0;
	unsigned i;

	for (i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

#define SIPROUND(v0, v1, v2, v3)   \
	do {                       \
		v0 += v1;          \
		v1 = rotl(v1, 13); \
		v1 ^= v0;          \
		v0 = rotl(v0, 32); \
		v2 += v3;          \
		v3 = rotl(v3, 16); \
		v3 ^= v2;          \
		v0 += v3;          \
		v3 = rotl(v3, 21); \
		v3 ^= v0;          \
		v2 += v1;          \
		v1 = rotl(v1, 17); \
		v1 ^= v2;          \
		v2 = rotl(v2, 32); \
	} while (0)

/* Inline in both entry points, so that the store's 1-3 gets its round counts as
 * constants. */
static inline uint64_t
siphash(const uint8_t key[16], const void *data, size_t len, unsigned c, unsigned d)
{
	const uint8_t *p = data;
	uint64_t k0 = load_le64(key), k1 = load_le64(key + 8);
	uint64_t v0 = k0 ^ 0x736f6d6570736575ULL, v1 = k1 ^ 0x646f72616e646f6dULL;
	uint64_t v2 = k0 ^ 0x6c7967656e657261ULL, v3 = k1 ^ 0x7465646279746573ULL;
	uint64_t m;
	uint8_t last[8] = {0};
	size_t left = len;
	unsigned i;

	for (; left >= 8; p += 8, left -= 8) {
		m = load_le64(p);
		v3 ^= m;
		for (i = 0; i < c; i++)
			SIPROUND(v0, v1, v2, v3);
		v0 ^= m;
	}
	memcpy(last, p, left);
	last[7] = (uint8_t)len;
	m = load_le64(last);
	v3 ^= m;
	for (i = 0; i < c; i++)
		SIPROUND(v0, v1, v2, v3);
	v0 ^= m;
	v2 ^= 0xff;
	for (i = 0; i < d; i++)
		SIPROUND(v0, v1, v2, v3);
	return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t
kv_siphash(const uint8_t key[16], const void *data, size_t len)
{
	return siphash(key, data, len, 1, 3);
}

uint64_t
kv_siphash_cr(const uint8_t key[16], const void *data, size_t len, unsigned c, unsigned d)
{
	return siphash(key, data, len, c, d);
}
