/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test data: a seeded PRNG (the same sequence on every run), a position-dependent byte
 * pattern that shows a loss or a reordering, and seeded fills.
 */
#ifndef UT_DATA_H
#define UT_DATA_H

#include <stddef.h>
#include <stdint.h>

/* ---- data ---- */

static inline uint64_t
ut_rand(uint64_t *s)
{
	/* xorshift64*: cheap, seeded, the same sequence on every run */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dull;
}

/* Byte @p i of the test stream; position-dependent, so a loss or reordering shows. */
static inline uint8_t
ut_pat(uint64_t i)
{
	return (uint8_t)((i * 131u) ^ (i >> 8) ^ (i >> 16));
}

static inline void
ut_fill(uint8_t *p, uint64_t off, size_t len)
{
	for (size_t i = 0; i < len; i++)
		p[i] = ut_pat(off + i);
}

/* Index of the first byte of @p p that is not the pattern at @p off, or @p len. */
static inline size_t
ut_check(const uint8_t *p, uint64_t off, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != ut_pat(off + i))
			return i;
	return len;
}

/* @p n bytes from a seeded linear congruential sequence. */
static inline void
ut_fill_seeded(uint8_t *buf, size_t n, uint32_t seed)
{
	size_t i;

	for (i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		buf[i] = (uint8_t)(seed >> 16);
	}
}

#endif /* UT_DATA_H */
