/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The compact list (see lp.h for the layout and why).
 */
#include <string.h>

#include "lp.h"
#include "mem.h"

/* LEB128: seven bits per byte, low first, the high bit set on all but the last. */
static size_t
varint_size(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static size_t
varint_put(unsigned char *p, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (unsigned char)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (unsigned char)v;
	return n;
}

static uint64_t
varint_get(const unsigned char *p, size_t *n)
{
	uint64_t v = 0;
	unsigned shift = 0;
	size_t i = 0;

	do {
		v |= (uint64_t)(p[i] & 0x7f) << shift;
		shift += 7;
	} while (p[i++] & 0x80);
	*n = i;
	return v;
}

/* The back length: the same seven-bit groups, most significant first, with the high bit
 * set on all but the first, so that reading from the end knows when to stop. */
static size_t
backlen_put(unsigned char *p, uint64_t v)
{
	size_t n = varint_size(v), i;

	for (i = 0; i < n; i++) {
		unsigned shift = (unsigned)(7 * (n - 1 - i));

		p[i] = (unsigned char)(((v >> shift) & 0x7f) | (i == 0 ? 0 : 0x80));
	}
	return n;
}

/* Read the back length ending just before @p end. */
static uint64_t
backlen_get(const unsigned char *end, size_t *n)
{
	uint64_t v = 0;
	unsigned shift = 0;
	size_t i = 0;

	for (;;) {
		unsigned char b = end[-1 - (long)i];

		v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		i++;
		if (!(b & 0x80))
			break;
	}
	*n = i;
	return v;
}

size_t
lp_entry_size(size_t len)
{
	size_t body = varint_size(len) + len;

	return body + varint_size(body);
}

struct lp *
lp_new(void)
{
	struct lp *l = kv_malloc(sizeof(*l));

	if (l != NULL)
		l->bytes = l->count = 0;
	return l;
}

void
lp_free(struct lp *l)
{
	kv_free(l);
}

size_t
lp_mem(const struct lp *l)
{
	return kv_mem_size(l);
}

uint32_t
lp_first(const struct lp *l)
{
	return l->count != 0 ? 0 : LP_NONE;
}

/* Size of the entry starting at @p pos. */
static size_t
entry_at(const struct lp *l, uint32_t pos)
{
	size_t n, len = varint_get(l->data + pos, &n);

	return n + len + varint_size(n + len);
}

uint32_t
lp_next(const struct lp *l, uint32_t pos)
{
	pos += (uint32_t)entry_at(l, pos);
	return pos < l->bytes ? pos : LP_NONE;
}

uint32_t
lp_prev(const struct lp *l, uint32_t pos)
{
	size_t n, body;

	if (pos == 0 || pos == LP_NONE)
		return LP_NONE;
	body = backlen_get(l->data + pos, &n);
	return pos - (uint32_t)(body + n);
}

uint32_t
lp_last(const struct lp *l)
{
	return l->count != 0 ? lp_prev(l, l->bytes) : LP_NONE;
}

uint32_t
lp_seek(const struct lp *l, long long index)
{
	uint32_t pos;

	if (index < 0)
		index += l->count;
	if (index < 0 || index >= (long long)l->count)
		return LP_NONE;
	if (index < (long long)l->count / 2) {
		for (pos = 0; index-- > 0;)
			pos = lp_next(l, pos);
	} else {
		for (pos = lp_last(l), index = l->count - 1 - index; index-- > 0;)
			pos = lp_prev(l, pos);
	}
	return pos;
}

const unsigned char *
lp_get(const struct lp *l, uint32_t pos, size_t *len)
{
	size_t n;

	*len = (size_t)varint_get(l->data + pos, &n);
	return l->data + pos + n;
}

bool
lp_eq(const struct lp *l, uint32_t pos, const void *s, size_t len)
{
	size_t n;
	const unsigned char *p = lp_get(l, pos, &n);

	return n == len && memcmp(p, s, len) == 0;
}

uint32_t
lp_find(const struct lp *l, uint32_t pos, const void *s, size_t len, unsigned skip)
{
	while (pos != LP_NONE) {
		unsigned i;

		if (lp_eq(l, pos, s, len))
			return pos;
		pos = lp_next(l, pos);
		for (i = 0; i < skip && pos != LP_NONE; i++)
			pos = lp_next(l, pos);
	}
	return LP_NONE;
}

static size_t
write_entry(unsigned char *p, const void *s, size_t len)
{
	size_t n = varint_put(p, len);

	memcpy(p + n, s, len);
	return n + len + backlen_put(p + n + len, n + len);
}

uint32_t
lp_insert(struct lp **lpp, uint32_t pos, const void *s, size_t len)
{
	struct lp *l = *lpp;
	size_t sz = lp_entry_size(len);
	struct lp *n;

	if ((uint64_t)l->bytes + sz > UINT32_MAX - 16)
		return LP_NONE;
	n = kv_realloc(l, sizeof(*l) + l->bytes + sz);
	if (n == NULL)
		return LP_NONE;
	memmove(n->data + pos + sz, n->data + pos, n->bytes - pos);
	write_entry(n->data + pos, s, len);
	n->bytes += (uint32_t)sz;
	n->count++;
	*lpp = n;
	return pos;
}

uint32_t
lp_append(struct lp **lpp, const void *s, size_t len)
{
	return lp_insert(lpp, (*lpp)->bytes, s, len);
}

void
lp_delete(struct lp **lpp, uint32_t pos, uint32_t count)
{
	struct lp *l = *lpp, *n;
	uint32_t end = pos, k = 0;

	while (k < count && end < l->bytes) {
		end += (uint32_t)entry_at(l, end);
		k++;
	}
	memmove(l->data + pos, l->data + end, l->bytes - end);
	l->bytes -= end - pos;
	l->count -= k;
	n = kv_realloc(l, sizeof(*l) + l->bytes);
	if (n != NULL) /* shrinking in place cannot fail in glibc; keep the block if it did */
		*lpp = n;
}

uint32_t
lp_replace(struct lp **lpp, uint32_t pos, const void *s, size_t len)
{
	struct lp *l = *lpp, *n;
	size_t old = entry_at(l, pos), sz = lp_entry_size(len);

	if (sz > old) {
		if ((uint64_t)l->bytes + sz - old > UINT32_MAX - 16)
			return LP_NONE;
		n = kv_realloc(l, sizeof(*l) + l->bytes + sz - old);
		if (n == NULL)
			return LP_NONE;
		l = n;
	}
	memmove(l->data + pos + sz, l->data + pos + old, l->bytes - pos - old);
	write_entry(l->data + pos, s, len);
	l->bytes = (uint32_t)(l->bytes + sz - old);
	if (sz < old && (n = kv_realloc(l, sizeof(*l) + l->bytes)) != NULL)
		l = n;
	*lpp = l;
	return pos;
}
