/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Corelists ("0-3,6"): parsing into a cpuset and formatting back.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cr_eal.h"
#include "eal_internal.h"

/* Longest piece of user text quoted back in an error line. */
#define QUOTE_MAX 40

static int
quote_len(size_t n)
{
	return n > QUOTE_MAX ? QUOTE_MAX : (int)n;
}

/*
 * Read decimal digits from [p, end). The value saturates at max_id + 1 so that a huge
 * number cannot overflow and still reads as "too large".
 */
static const char *
scan_number(const char *p, const char *end, unsigned max_id, unsigned long long *val)
{
	unsigned long long v = 0;

	while (p < end && *p >= '0' && *p <= '9') {
		v = v * 10 + (unsigned)(*p - '0');
		if (v > max_id)
			v = (unsigned long long)max_id + 1;
		p++;
	}
	*val = v;
	return p;
}

/* One element of [el, el + n): "N" or "N-M". */
static int
parse_element(const char *el, size_t n, unsigned max_id, unsigned long long *lo,
	      unsigned long long *hi, char *err, size_t errlen)
{
	const char *end = el + n;
	const char *p = scan_number(el, end, max_id, lo);
	const char *hi_txt = el;

	if (p == el || (p != end && *p != '-')) {
		cr__errf(err, errlen, "'%.*s' is not a CPU id", quote_len(n), el);
		return -EINVAL;
	}
	*hi = *lo;
	if (p != end) {
		hi_txt = p + 1;
		p = scan_number(hi_txt, end, max_id, hi);
		if (p == hi_txt || p != end) {
			cr__errf(err, errlen, "'%.*s' is not a CPU range", quote_len(n), el);
			return -EINVAL;
		}
	}
	if (*lo > *hi) {
		cr__errf(err, errlen, "range %.*s is reversed", quote_len(n), el);
		return -EINVAL;
	}
	if (*hi > max_id) {
		cr__errf(err, errlen, "CPU %.*s is above the largest supported id %u",
			 quote_len((size_t)(end - hi_txt)), hi_txt, max_id);
		return -EINVAL;
	}
	return 0;
}

int
cr__corelist_walk(const char *s, unsigned max_id, cr__corelist_fn fn, void *ctx, char *err,
		  size_t errlen)
{
	const char *el = s;

	if (*s == '\0') {
		cr__errf(err, errlen, "empty list");
		return -EINVAL;
	}
	for (;;) {
		size_t n = strcspn(el, ",");
		unsigned long long lo, hi;
		int rc;

		if (n == 0) {
			if (el[0] == '\0')
				cr__errf(err, errlen, "trailing ','");
			else
				cr__errf(err, errlen, "empty element at position %zu",
					 (size_t)(el - s) + 1);
			return -EINVAL;
		}
		rc = parse_element(el, n, max_id, &lo, &hi, err, errlen);
		if (rc == 0 && fn != NULL)
			rc = fn((unsigned)lo, (unsigned)hi, ctx);
		if (rc != 0 || el[n] == '\0')
			return rc;
		el += n + 1;
	}
}

static int
add_range(unsigned lo, unsigned hi, void *ctx)
{
	struct cr_cpuset *out = ctx;

	for (unsigned id = lo; id <= hi; id++)
		cr_cpuset_set(out, id);
	return 0;
}

int
cr_corelist_parse(const char *s, struct cr_cpuset *out, char *err, size_t errlen)
{
	int rc;

	memset(out, 0, sizeof(*out));
	if (s == NULL) {
		cr__errf(err, errlen, "empty list");
		return -EINVAL;
	}
	rc = cr__corelist_walk(s, CR_MAX_LCORES - 1, add_range, out, err, errlen);
	if (rc != 0)
		memset(out, 0, sizeof(*out));
	return rc;
}

unsigned
cr_cpuset_count(const struct cr_cpuset *s)
{
	unsigned n = 0;

	for (size_t i = 0; i < sizeof(s->bits) / sizeof(s->bits[0]); i++)
		n += (unsigned)__builtin_popcountll(s->bits[i]);
	return n;
}

/* Appends to a fixed buffer; output past the end is dropped, the string stays terminated. */
struct appender {
	char *buf;
	size_t len;
	size_t pos;
};

static void
append_range(struct appender *a, unsigned lo, unsigned hi)
{
	const char *sep = a->pos > 0 ? "," : "";
	int n;

	if (a->pos >= a->len)
		return;
	if (lo == hi)
		n = snprintf(a->buf + a->pos, a->len - a->pos, "%s%u", sep, lo);
	else
		n = snprintf(a->buf + a->pos, a->len - a->pos, "%s%u-%u", sep, lo, hi);
	a->pos += n > 0 ? (size_t)n : 0;
}

char *
cr_cpuset_format(const struct cr_cpuset *s, char *buf, size_t len)
{
	struct appender a = {.buf = buf, .len = len, .pos = 0};
	unsigned id = 0;

	if (len == 0)
		return buf;
	buf[0] = '\0';
	while (id < CR_MAX_LCORES) {
		unsigned lo;

		if (!cr_cpuset_isset(s, id)) {
			id++;
			continue;
		}
		lo = id;
		while (cr_cpuset_isset(s, id + 1))
			id++;
		append_range(&a, lo, id);
		id++;
	}
	return buf;
}

char *
cr_lcore_table_corelist(const struct cr_lcore_table *t, char *buf, size_t len)
{
	struct cr_cpuset s;

	memset(&s, 0, sizeof(s));
	for (unsigned i = 0; i < t->n; i++)
		cr_cpuset_set(&s, t->lcores[i].lcore_id);
	return cr_cpuset_format(&s, buf, len);
}
