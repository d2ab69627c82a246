/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What every command file shares: Redis's error texts, argument parsers (integers,
 * floats, SCAN options), number formats, and key lookups that check the type.
 */
#include <ctype.h>
#include <limits.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv.h"

const char kv_err_int[] = "ERR value is not an integer or out of range";
const char kv_err_syntax[] = "ERR syntax error";
const char kv_err_float[] = "ERR value is not a valid float";
const char kv_err_wrongtype[] = "WRONGTYPE Operation against a key holding the wrong kind of value";
const char kv_err_oom[] = "OOM out of memory storing the value";

void
kv_reply_wrong_arity(struct rbuf *out, const char *fullname)
{
	rb_errorf(out, "ERR wrong number of arguments for '%s' command", fullname);
}

bool
kv_arg_ll(struct kv_ctx *x, const struct kv_arg *a, long long *out)
{
	if (resp_string2ll(a->p, a->len, out))
		return true;
	rb_error(x->out, kv_err_int);
	return false;
}

bool
kv_arg_ll_range(struct kv_ctx *x, const struct kv_arg *a, long long min, long long max,
		const char *msg, long long *out)
{
	if (!resp_string2ll(a->p, a->len, out)) {
		rb_error(x->out, msg != NULL ? msg : kv_err_int);
		return false;
	}
	if (*out < min || *out > max) {
		if (msg != NULL)
			rb_error(x->out, msg);
		else
			rb_errorf(x->out,
				  "ERR value is out of range, value must between %lld and %lld",
				  min, max);
		return false;
	}
	return true;
}

bool
kv_arg_positive(struct kv_ctx *x, const struct kv_arg *a, const char *msg, long long *out)
{
	return kv_arg_ll_range(x, a, 0, LLONG_MAX,
			       msg != NULL ? msg : "ERR value is out of range, must be positive",
			       out);
}

bool
kv_parse_double(const char *s, size_t len, double *out)
{
	char buf[256], *end;
	double v;

	if (len == 0 || len >= sizeof(buf) || isspace((unsigned char)s[0]))
		return false;
	memcpy(buf, s, len);
	buf[len] = '\0';
	errno = 0;
	v = strtod(buf, &end);
	if ((size_t)(end - buf) != len ||
	    (errno == ERANGE && (v == HUGE_VAL || v == -HUGE_VAL || fpclassify(v) == FP_ZERO)) ||
	    isnan(v))
		return false;
	*out = v;
	return true;
}

bool
kv_arg_double(struct kv_ctx *x, const struct kv_arg *a, double *out)
{
	if (kv_parse_double(a->p, a->len, out))
		return true;
	rb_error(x->out, kv_err_float);
	return false;
}

size_t
kv_fmt_double(char *buf, size_t n, double d)
{
	if (isinf(d))
		return (size_t)snprintf(buf, n, d > 0 ? "inf" : "-inf");
	return (size_t)snprintf(buf, n, "%.17g", d);
}

void
kv_reply_double(struct rbuf *out, double d)
{
	char b[64];

	rb_bulk(out, b, kv_fmt_double(b, sizeof(b), d));
}

bool
kv_parse_ld(const char *s, size_t len, long double *out)
{
	char buf[5 * 1024];
	long double v;
	char *end;

	if (len == 0 || len >= sizeof(buf))
		return false;
	memcpy(buf, s, len);
	buf[len] = '\0';
	errno = 0;
	v = strtold(buf, &end);
	if (isspace((unsigned char)buf[0]) || end[0] != '\0' || (size_t)(end - buf) != len ||
	    (errno == ERANGE && (v == HUGE_VALL || v == -HUGE_VALL || v == 0)) || errno == EINVAL ||
	    isnan(v))
		return false;
	*out = v;
	return true;
}

size_t
kv_fmt_ld(char *buf, size_t len, long double v)
{
	int l = snprintf(buf, len, "%.17Lf", v);
	char *p;

	if (l < 0 || (size_t)l + 1 > len)
		return 0;
	if (strchr(buf, '.') != NULL) {
		p = buf + l - 1;
		while (*p == '0') {
			p--;
			l--;
		}
		if (*p == '.')
			l--;
	}
	if (l == 2 && buf[0] == '-' && buf[1] == '0') {
		buf[0] = '0';
		l = 1;
	}
	return (size_t)l;
}

uint64_t
kv_key_hash(struct kv_ctx *x, const struct kv_arg *k)
{
	uint64_t h;

	if (k == &x->argv[1] && x->h1_ok)
		return x->h1;
	h = kv_hash(k->p, k->len);
	if (k == &x->argv[1]) {
		x->h1 = h;
		x->h1_ok = true;
	}
	return h;
}

struct kv_entry *
kv_key_find(struct kv_ctx *x, const struct kv_arg *k, unsigned flags)
{
	struct kv_entry *e = kv_lookup_ex(x->sh->store, k->p, k->len, kv_key_hash(x, k), x->now_ms,
					  !(flags & KV_FIND_NOTOUCH));

	if (flags & KV_FIND_READ) {
		if (e != NULL)
			x->sh->hits++;
		else
			x->sh->misses++;
	}
	return e;
}

struct kv_entry *
kv_key_typed(struct kv_ctx *x, const struct kv_arg *k, unsigned type, unsigned flags, bool *bad)
{
	struct kv_entry *e = kv_key_find(x, k, flags);

	*bad = e != NULL && e->type != type;
	if (*bad)
		rb_error(x->out, kv_err_wrongtype);
	return *bad ? NULL : e;
}

struct kv_entry *
kv_key_add(struct kv_ctx *x, const struct kv_arg *k, unsigned type, unsigned enc, void *obj)
{
	struct kv_entry *e;

	if (obj == NULL) {
		rb_error(x->out, kv_err_oom);
		return NULL;
	}
	e = kv_add_obj(x->sh->store, k->p, k->len, kv_key_hash(x, k), type, enc, obj, x->now_ms);
	if (e == NULL) {
		kv_obj_free(type, enc, obj);
		rb_error(x->out, kv_err_oom);
		return NULL;
	}
	kv_bw_signal(x->sh, k->p, k->len, type); /* blocked clients may wait for it */
	return e;
}

bool
kv_key_drop_if_empty(struct kv_ctx *x, struct kv_entry *e)
{
	if (e == NULL || kv_obj_elements(e->type, e->enc, e->obj) != 0)
		return false;
	kv_entry_delete(x->sh->store, e);
	return true;
}

bool
kv_rank_range(long long llen, long long *start, long long *end)
{
	if (*start < 0)
		*start += llen;
	if (*end < 0)
		*end += llen;
	if (*start < 0)
		*start = 0;
	if (*start > *end || *start >= llen)
		return false;
	if (*end >= llen)
		*end = llen - 1;
	return true;
}

bool
kv_rand_count(struct kv_ctx *x, const char *with, size_t *count, bool *uniq, bool *withx)
{
	long long l;

	if (!kv_arg_ll_range(x, &x->argv[2], -LLONG_MAX, LLONG_MAX, NULL, &l))
		return false;
	if (x->argc > 4 || (x->argc == 4 && strcasecmp(x->argv[3].p, with) != 0)) {
		rb_error(x->out, kv_err_syntax);
		return false;
	}
	*withx = x->argc == 4;
	if (*withx && (l < -LLONG_MAX / 2 || l > LLONG_MAX / 2)) {
		rb_error(x->out, "ERR value is out of range");
		return false;
	}
	*uniq = l >= 0;
	*count = l < 0 ? (size_t)-l : (size_t)l;
	return true;
}

void
kv_remove_members(struct kv_ctx *x, unsigned type,
		  bool (*del)(struct kv_entry *e, const char *m, size_t len))
{
	bool bad;
	struct kv_entry *e = kv_key_typed(x, &x->argv[1], type, 0, &bad);
	long long n = 0;
	uint32_t i;

	if (bad)
		return;
	for (i = 2; e != NULL && i < x->argc; i++) {
		if (del(e, x->argv[i].p, x->argv[i].len))
			n++;
		if (kv_key_drop_if_empty(x, e))
			break;
	}
	rb_int(x->out, n);
}

int
kv_parse_scan_opts(struct kv_ctx *x, uint32_t from, struct kv_scan_opts *o, bool allow_type)
{
	uint32_t i = from;

	o->pat = NULL;
	o->type = NULL;
	o->count = 10;
	while (i < x->argc) {
		uint32_t left = x->argc - i;

		if (strcasecmp(x->argv[i].p, "count") == 0 && left >= 2) {
			if (!kv_arg_ll(x, &x->argv[i + 1], &o->count))
				return -EINVAL;
			if (o->count < 1) {
				rb_error(x->out, kv_err_syntax);
				return -EINVAL;
			}
			i += 2;
		} else if (strcasecmp(x->argv[i].p, "match") == 0 && left >= 2) {
			o->pat = &x->argv[i + 1];
			if (o->pat->len == 1 && o->pat->p[0] == '*')
				o->pat = NULL;
			i += 2;
		} else if (allow_type && strcasecmp(x->argv[i].p, "type") == 0 && left >= 2) {
			o->type = x->argv[i + 1].p;
			i += 2;
		} else {
			rb_error(x->out, kv_err_syntax);
			return -EINVAL;
		}
	}
	return 0;
}

bool
kv_scan_match(const struct kv_scan_opts *o, const char *s, size_t len)
{
	return o->pat == NULL || kv_stringmatch(o->pat->p, o->pat->len, s, len, false);
}

void
kv_reply_scan_cursor(struct rbuf *out, uint64_t cursor)
{
	char b[24];

	rb_array(out, 2);
	rb_bulk(out, b, (size_t)snprintf(b, sizeof(b), "%llu", (unsigned long long)cursor));
}

void
kv_scan_collection(struct kv_ctx *x, unsigned type,
		   uint64_t (*step)(struct kv_entry *e, uint64_t cursor, struct kv_scan_walk *w))
{
	unsigned long long cursor;
	struct kv_scan_opts o;
	struct kv_scan_walk w;
	struct kv_entry *e;
	long long iters;
	bool bad;

	if (kv_parse_scan_cursor(&x->argv[2], &cursor) != 0) {
		rb_error(x->out, "ERR invalid cursor");
		return;
	}
	e = kv_key_typed(x, &x->argv[1], type, KV_FIND_READ, &bad);
	if (bad)
		return;
	if (e == NULL) {
		rb_raw(x->out, "*2\r\n$1\r\n0\r\n*0\r\n", 15);
		return;
	}
	if (kv_parse_scan_opts(x, 3, &o, false) != 0)
		return;
	w.o = &o;
	w.n = w.visited = 0;
	rb_init(&w.items, NULL, 0);
	iters = o.count * 10;
	do {
		cursor = step(e, cursor, &w);
	} while (cursor != 0 && iters-- > 0 && w.visited < o.count);
	kv_reply_scan_cursor(x->out, cursor);
	rb_array(x->out, w.n);
	rb_raw(x->out, w.items.p, w.items.len);
	rb_fini(&w.items);
}

size_t
kv_array_begin(struct rbuf *out)
{
	return out->len;
}

void
kv_array_end(struct rbuf *out, size_t start, long long n)
{
	char hdr[24];
	int h = snprintf(hdr, sizeof(hdr), "*%lld\r\n", n);

	if (!rb_reserve(out, (size_t)h))
		return;
	memmove(out->p + start + h, out->p + start, out->len - start);
	memcpy(out->p + start, hdr, (size_t)h);
	out->len += (size_t)h;
}
