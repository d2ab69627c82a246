/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The sorted integer array (see intset.h).
 */
#include <errno.h>
#include <string.h>

#include "intset.h"
#include "mem.h"
#include "resp.h"

static uint32_t
width_of(int64_t v)
{
	if (v >= INT16_MIN && v <= INT16_MAX)
		return 2;
	if (v >= INT32_MIN && v <= INT32_MAX)
		return 4;
	return 8;
}

static int64_t
get_w(const unsigned char *data, uint32_t width, uint32_t i)
{
	int16_t a;
	int32_t b;
	int64_t c;

	switch (width) {
	case 2:
		memcpy(&a, data + 2 * i, 2);
		return a;
	case 4:
		memcpy(&b, data + 4 * i, 4);
		return b;
	default:
		memcpy(&c, data + 8 * i, 8);
		return c;
	}
}

static void
set_w(unsigned char *data, uint32_t width, uint32_t i, int64_t v)
{
	int16_t a = (int16_t)v;
	int32_t b = (int32_t)v;

	switch (width) {
	case 2:
		memcpy(data + 2 * i, &a, 2);
		break;
	case 4:
		memcpy(data + 4 * i, &b, 4);
		break;
	default:
		memcpy(data + 8 * i, &v, 8);
		break;
	}
}

struct kv_intset *
intset_new(void)
{
	struct kv_intset *is = kv_malloc(sizeof(*is));

	if (is != NULL) {
		is->width = 2;
		is->len = 0;
	}
	return is;
}

void
intset_free(struct kv_intset *is)
{
	kv_free(is);
}

size_t
intset_mem(const struct kv_intset *is)
{
	return kv_mem_size(is);
}

int64_t
intset_get(const struct kv_intset *is, uint32_t i)
{
	return get_w(is->data, is->width, i);
}

/* Binary search: true and the index if found, else false and where it would go. */
static bool
search(const struct kv_intset *is, int64_t v, uint32_t *at)
{
	uint32_t lo = 0, hi = is->len;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		int64_t m = intset_get(is, mid);

		if (m == v) {
			*at = mid;
			return true;
		}
		if (m < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	*at = lo;
	return false;
}

bool
intset_find(const struct kv_intset *is, int64_t v)
{
	uint32_t at;

	return width_of(v) <= is->width && search(is, v, &at);
}

/* Widen every member to @p width, from the end so nothing is overwritten unread. */
static void
widen(struct kv_intset *is, uint32_t width)
{
	uint32_t i = is->len;

	while (i-- > 0)
		set_w(is->data, width, i, get_w(is->data, is->width, i));
	is->width = width;
}

int
intset_add(struct kv_intset **isp, int64_t v, bool *added)
{
	struct kv_intset *is = *isp, *n;
	uint32_t w = width_of(v), at = 0;

	*added = false;
	if (w <= is->width && search(is, v, &at))
		return 0;
	if (w < is->width)
		w = is->width;
	n = kv_realloc(is, sizeof(*is) + (size_t)w * (is->len + 1));
	if (n == NULL)
		return -ENOMEM;
	is = n;
	if (w > is->width) {
		/* A wider member is beyond every current one: first or last. */
		widen(is, w);
		at = v < 0 ? 0 : is->len;
	}
	memmove(is->data + (size_t)w * (at + 1), is->data + (size_t)w * at,
		(size_t)w * (is->len - at));
	set_w(is->data, w, at, v);
	is->len++;
	*added = true;
	*isp = is;
	return 0;
}

bool
intset_remove(struct kv_intset **isp, int64_t v)
{
	struct kv_intset *is = *isp, *n;
	uint32_t at;

	if (width_of(v) > is->width || !search(is, v, &at))
		return false;
	memmove(is->data + (size_t)is->width * at, is->data + (size_t)is->width * (at + 1),
		(size_t)is->width * (is->len - at - 1));
	is->len--;
	n = kv_realloc(is, sizeof(*is) + (size_t)is->width * is->len);
	if (n != NULL)
		*isp = n;
	return true;
}

bool
intset_parse(const char *s, size_t len, int64_t *v)
{
	long long ll;

	if (len > 20 || !resp_string2ll(s, len, &ll))
		return false;
	*v = ll;
	return true;
}
