/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * String commands, argument for argument as Redis 7.0's t_string.c: the same checks in
 * the same order, so the same input gets the same reply or error.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv.h"

static struct kv_entry *
lookup_write(struct kv_ctx *x, const struct kv_arg *k)
{
	return kv_key_find(x, k, 0);
}

/* A string key for reading: NULL if absent; WRONGTYPE replied (and *bad) for another
 * type. */
static struct kv_entry *
string_read(struct kv_ctx *x, const struct kv_arg *k, bool *bad)
{
	return kv_key_typed(x, k, KV_T_STRING, KV_FIND_READ, bad);
}

static struct kv_entry *
string_write(struct kv_ctx *x, const struct kv_arg *k, bool *bad)
{
	return kv_key_typed(x, k, KV_T_STRING, 0, bad);
}

static struct kv_entry *
set_key(struct kv_ctx *x, const struct kv_arg *k, const struct kv_arg *v, bool keepttl)
{
	struct kv_entry *e =
	    kv_set(x->sh->store, k->p, k->len, kv_key_hash(x, k), v->p, v->len, keepttl, x->now_ms);

	if (e == NULL)
		rb_error(x->out, kv_err_oom);
	return e;
}

static void
reply_expire_error(struct kv_ctx *x, const char *cmd)
{
	rb_errorf(x->out, "ERR invalid expire time in '%s' command", cmd);
}

/* ---- SET and friends ---- */

#define F_NX	  0x1u
#define F_XX	  0x2u
#define F_GET	  0x4u
#define F_KEEPTTL 0x8u
#define F_PERSIST 0x10u
#define F_EX	  0x20u
#define F_PX	  0x40u
#define F_EXAT	  0x80u
#define F_PXAT	  0x100u

enum { MODE_SET, MODE_GET };

static bool
lc2(const char *o, char a, char b)
{
	return tolower((unsigned char)o[0]) == a && tolower((unsigned char)o[1]) == b &&
	       o[2] == '\0';
}

static bool
lc3(const char *o, char a, char b, char c)
{
	return tolower((unsigned char)o[0]) == a && tolower((unsigned char)o[1]) == b &&
	       tolower((unsigned char)o[2]) == c && o[3] == '\0';
}

static bool
lc4(const char *o, const char *w)
{
	return tolower((unsigned char)o[0]) == w[0] && tolower((unsigned char)o[1]) == w[1] &&
	       tolower((unsigned char)o[2]) == w[2] && tolower((unsigned char)o[3]) == w[3] &&
	       o[4] == '\0';
}

/* parseExtendedStringArgumentsOrReply(); options are compared as C strings, as there. */
static bool
parse_ext(struct kv_ctx *x, unsigned *flags, bool *ms, const struct kv_arg **expire, int mode)
{
	uint32_t j = mode == MODE_GET ? 2 : 3;
	const unsigned ttl_any = F_EX | F_PX | F_EXAT | F_PXAT;

	for (; j < x->argc; j++) {
		const char *o = x->argv[j].p;
		const struct kv_arg *next = j == x->argc - 1 ? NULL : &x->argv[j + 1];

		if (lc2(o, 'n', 'x') && !(*flags & F_XX) && mode == MODE_SET) {
			*flags |= F_NX;
		} else if (lc2(o, 'x', 'x') && !(*flags & F_NX) && mode == MODE_SET) {
			*flags |= F_XX;
		} else if (lc3(o, 'g', 'e', 't') && mode == MODE_SET) {
			*flags |= F_GET;
		} else if (strcasecmp(o, "KEEPTTL") == 0 && !(*flags & F_PERSIST) &&
			   !(*flags & ttl_any) && mode == MODE_SET) {
			*flags |= F_KEEPTTL;
		} else if (strcasecmp(o, "PERSIST") == 0 && mode == MODE_GET &&
			   !(*flags & ttl_any) && !(*flags & F_KEEPTTL)) {
			*flags |= F_PERSIST;
		} else if (lc2(o, 'e', 'x') && !(*flags & (F_KEEPTTL | F_PERSIST)) &&
			   !(*flags & (F_EXAT | F_PX | F_PXAT)) && next != NULL) {
			*flags |= F_EX;
			*expire = next;
			j++;
		} else if (lc2(o, 'p', 'x') && !(*flags & (F_KEEPTTL | F_PERSIST)) &&
			   !(*flags & (F_EX | F_EXAT | F_PXAT)) && next != NULL) {
			*flags |= F_PX;
			*ms = true;
			*expire = next;
			j++;
		} else if (lc4(o, "exat") && !(*flags & (F_KEEPTTL | F_PERSIST)) &&
			   !(*flags & (F_EX | F_PX | F_PXAT)) && next != NULL) {
			*flags |= F_EXAT;
			*expire = next;
			j++;
		} else if (lc4(o, "pxat") && !(*flags & (F_KEEPTTL | F_PERSIST)) &&
			   !(*flags & (F_EX | F_EXAT | F_PX)) && next != NULL) {
			*flags |= F_PXAT;
			*ms = true;
			*expire = next;
			j++;
		} else {
			rb_error(x->out, kv_err_syntax);
			return false;
		}
	}
	return true;
}

/* getExpireMillisecondsOrReply(): the absolute expiry time in ms. */
static bool
expire_ms(struct kv_ctx *x, const struct kv_arg *a, unsigned flags, bool ms, const char *cmd,
	  long long *out)
{
	long long v;

	if (!kv_arg_ll(x, a, &v))
		return false;
	if (v <= 0 || (!ms && v > LLONG_MAX / 1000)) {
		reply_expire_error(x, cmd);
		return false;
	}
	if (!ms)
		v *= 1000;
	if (flags & (F_PX | F_EX)) {
		/* Redis adds without a check and then tests for <= 0 (wrapped). */
		v = (long long)((unsigned long long)v + (unsigned long long)x->now_ms);
	}
	if (v <= 0) {
		reply_expire_error(x, cmd);
		return false;
	}
	*out = v;
	return true;
}

/* setGenericCommand() */
static void
set_generic(struct kv_ctx *x, unsigned flags, const struct kv_arg *key, const struct kv_arg *val,
	    const struct kv_arg *expire, bool ms, const char *ok, const char *abort,
	    const char *cmd)
{
	long long when = 0;
	struct kv_entry *e;
	bool found;

	if (expire != NULL && !expire_ms(x, expire, flags, ms, cmd, &when))
		return;
	if (flags & F_GET) {
		bool bad;

		e = string_read(x, key, &bad);
		if (bad)
			return;
		if (e == NULL)
			rb_null(x->out);
		else
			rb_bulk(x->out, e->val, e->vlen);
	}
	/* Whether the key exists matters only to NX and XX (kv_set() expires a stale one
	 * itself): a plain SET looks the key up once. */
	if (flags & (F_NX | F_XX)) {
		found = lookup_write(x, key) != NULL;
		if (((flags & F_NX) && found) || ((flags & F_XX) && !found)) {
			if (!(flags & F_GET))
				rb_raw(x->out, abort, strlen(abort));
			return;
		}
	}
	e = set_key(x, key, val, (flags & F_KEEPTTL) != 0);
	if (e == NULL)
		return;
	if (expire != NULL)
		kv_set_expire(x->sh->store, e, when);
	if (!(flags & F_GET))
		rb_raw(x->out, ok, strlen(ok));
}

KV_CMD(set)
{
	const struct kv_arg *expire = NULL;
	unsigned flags = 0;
	bool ms = false;

	if (!parse_ext(x, &flags, &ms, &expire, MODE_SET))
		return;
	set_generic(x, flags, &x->argv[1], &x->argv[2], expire, ms, "+OK\r\n", "$-1\r\n", "set");
}

KV_CMD(setnx)
{
	set_generic(x, F_NX, &x->argv[1], &x->argv[2], NULL, false, ":1\r\n", ":0\r\n", "setnx");
}

KV_CMD(setex)
{
	set_generic(x, F_EX, &x->argv[1], &x->argv[3], &x->argv[2], false, "+OK\r\n", "$-1\r\n",
		    "setex");
}

KV_CMD(psetex)
{
	set_generic(x, F_PX, &x->argv[1], &x->argv[3], &x->argv[2], true, "+OK\r\n", "$-1\r\n",
		    "psetex");
}

KV_CMD(get)
{
	bool bad;
	struct kv_entry *e = string_read(x, &x->argv[1], &bad);

	if (bad)
		return;
	if (e == NULL)
		rb_null(x->out);
	else
		rb_bulk(x->out, e->val, e->vlen);
}

KV_CMD(getset)
{
	bool bad;
	struct kv_entry *e = string_read(x, &x->argv[1], &bad);

	if (bad)
		return;
	if (e == NULL)
		rb_null(x->out);
	else
		rb_bulk(x->out, e->val, e->vlen);
	set_key(x, &x->argv[1], &x->argv[2], false);
}

KV_CMD(getdel)
{
	bool bad;
	struct kv_entry *e = string_read(x, &x->argv[1], &bad);

	if (bad)
		return;
	if (e == NULL) {
		rb_null(x->out);
		return;
	}
	rb_bulk(x->out, e->val, e->vlen);
	kv_entry_delete(x->sh->store, e);
}

KV_CMD(getex)
{
	const struct kv_arg *expire = NULL;
	unsigned flags = 0;
	bool ms = false;
	long long when = 0;
	struct kv_entry *e;
	bool bad;

	if (!parse_ext(x, &flags, &ms, &expire, MODE_GET))
		return;
	e = string_read(x, &x->argv[1], &bad);
	if (bad)
		return;
	if (e == NULL) {
		rb_null(x->out);
		return;
	}
	if (expire != NULL && !expire_ms(x, expire, flags, ms, "getex", &when))
		return;
	rb_bulk(x->out, e->val, e->vlen);
	if ((flags & (F_PXAT | F_EXAT)) && when <= x->now_ms)
		kv_entry_delete(x->sh->store, e);
	else if (expire != NULL)
		kv_set_expire(x->sh->store, e, when);
	else if (flags & F_PERSIST)
		kv_persist(x->sh->store, e);
}

KV_CMD(mget)
{
	uint32_t i;

	rb_array(x->out, x->argc - 1);
	for (i = 1; i < x->argc; i++) {
		struct kv_entry *e = kv_key_find(x, &x->argv[i], KV_FIND_READ);

		if (e == NULL || e->type != KV_T_STRING)
			rb_null(x->out);
		else
			rb_bulk(x->out, e->val, e->vlen);
	}
}

bool
precheck_mset(struct kv_ctx *x)
{
	if (x->argc % 2 == 0) {
		kv_reply_wrong_arity(x->out, x->argv[0].len == 6 ? "msetnx" : "mset");
		return false;
	}
	return true;
}

KV_CMD(mset)
{
	uint32_t i;

	for (i = 1; i + 1 < x->argc; i += 2)
		if (set_key(x, &x->argv[i], &x->argv[i + 1], false) == NULL)
			return;
	rb_ok(x->out);
}

/* MSETNX when every key is on one shard: exactly Redis's (atomic). */
KV_CMD(msetnx_local)
{
	uint32_t i;

	for (i = 1; i + 1 < x->argc; i += 2) {
		if (lookup_write(x, &x->argv[i]) != NULL) {
			rb_int(x->out, 0);
			return;
		}
	}
	for (i = 1; i + 1 < x->argc; i += 2)
		if (set_key(x, &x->argv[i], &x->argv[i + 1], false) == NULL)
			return;
	rb_int(x->out, 1);
}

static bool
check_len(struct kv_ctx *x, long long size, long long append)
{
	long long total = (long long)((unsigned long long)size + (unsigned long long)append);

	if (total > kv.max_bulk || total < size || total < append) {
		rb_error(x->out, "ERR string exceeds maximum allowed size (proto-max-bulk-len)");
		return false;
	}
	return true;
}

KV_CMD(append)
{
	bool bad;
	struct kv_entry *e = string_write(x, &x->argv[1], &bad);
	const struct kv_arg *v = &x->argv[2];
	size_t old;

	if (bad)
		return;
	if (e == NULL) {
		if (set_key(x, &x->argv[1], v, false) != NULL)
			rb_int(x->out, (long long)v->len);
		return;
	}
	if (!check_len(x, (long long)e->vlen, (long long)v->len))
		return;
	old = e->vlen;
	if (kv_value_resize(x->sh->store, e, old + v->len) != 0) {
		rb_error(x->out, "OOM out of memory appending");
		return;
	}
	memcpy(e->val + old, v->p, v->len);
	e->enc = KV_ENC_RAW;
	rb_int(x->out, (long long)e->vlen);
}

KV_CMD(strlen)
{
	bool bad;
	struct kv_entry *e = string_read(x, &x->argv[1], &bad);

	if (!bad)
		rb_int(x->out, e == NULL ? 0 : (long long)e->vlen);
}

KV_CMD(getrange)
{
	long long start, end, len;
	struct kv_entry *e;
	bool bad;

	if (!kv_arg_ll(x, &x->argv[2], &start) || !kv_arg_ll(x, &x->argv[3], &end))
		return;
	e = string_read(x, &x->argv[1], &bad);
	if (bad)
		return;
	if (e == NULL) {
		rb_raw(x->out, "$0\r\n\r\n", 6);
		return;
	}
	len = (long long)e->vlen;
	if (start < 0 && end < 0 && start > end) {
		rb_raw(x->out, "$0\r\n\r\n", 6);
		return;
	}
	if (start < 0)
		start = len + start;
	if (end < 0)
		end = len + end;
	if (start < 0)
		start = 0;
	if (end < 0)
		end = 0;
	if ((unsigned long long)end >= (unsigned long long)len)
		end = len - 1;
	if (start > end || len == 0)
		rb_raw(x->out, "$0\r\n\r\n", 6);
	else
		rb_bulk(x->out, e->val + start, (size_t)(end - start + 1));
}

KV_CMD(setrange)
{
	const struct kv_arg *v = &x->argv[3];
	struct kv_entry *e;
	long long offset;
	bool bad;

	if (!kv_arg_ll(x, &x->argv[2], &offset))
		return;
	if (offset < 0) {
		rb_error(x->out, "ERR offset is out of range");
		return;
	}
	e = string_write(x, &x->argv[1], &bad);
	if (bad)
		return;
	if (e == NULL) {
		struct kv_arg empty = {"", 0};

		if (v->len == 0) {
			rb_int(x->out, 0);
			return;
		}
		if (!check_len(x, offset, (long long)v->len))
			return;
		e = set_key(x, &x->argv[1], &empty, false);
		if (e == NULL)
			return;
	} else {
		if (v->len == 0) {
			rb_int(x->out, (long long)e->vlen);
			return;
		}
		if (!check_len(x, offset, (long long)v->len))
			return;
	}
	if ((size_t)offset + v->len > e->vlen &&
	    kv_value_resize(x->sh->store, e, (size_t)offset + v->len) != 0) {
		rb_error(x->out, "OOM out of memory in setrange");
		return;
	}
	memcpy(e->val + offset, v->p, v->len);
	e->enc = KV_ENC_RAW; /* Redis unshares it: dbUnshareStringValue() */
	rb_int(x->out, (long long)e->vlen);
}

static void
incr_generic(struct kv_ctx *x, long long incr)
{
	bool bad;
	struct kv_entry *e = string_write(x, &x->argv[1], &bad);
	long long value = 0;
	char buf[24];
	struct kv_arg v;

	if (bad)
		return;
	if (e != NULL && !resp_string2ll(e->val, e->vlen, &value)) {
		rb_error(x->out, kv_err_int);
		return;
	}
	if (kv_add_overflows(value, incr)) {
		rb_error(x->out, "ERR increment or decrement would overflow");
		return;
	}
	value += incr;
	v.len = (size_t)snprintf(buf, sizeof(buf), "%lld", value);
	v.p = buf;
	if (set_key(x, &x->argv[1], &v, true) != NULL)
		rb_int(x->out, value);
}

KV_CMD(incr)
{
	incr_generic(x, 1);
}

KV_CMD(decr)
{
	incr_generic(x, -1);
}

KV_CMD(incrby)
{
	long long n;

	if (kv_arg_ll(x, &x->argv[2], &n))
		incr_generic(x, n);
}

KV_CMD(decrby)
{
	long long n;

	if (!kv_arg_ll(x, &x->argv[2], &n))
		return;
	if (n == LLONG_MIN) {
		rb_error(x->out, "ERR decrement would overflow");
		return;
	}
	incr_generic(x, -n);
}

KV_CMD(incrbyfloat)
{
	bool bad;
	struct kv_entry *e = string_write(x, &x->argv[1], &bad);
	long double value = 0, incr;
	char buf[5 * 1024];
	struct kv_arg v;

	if (bad)
		return;
	if ((e != NULL && !kv_parse_ld(e->val, e->vlen, &value)) ||
	    !kv_parse_ld(x->argv[2].p, x->argv[2].len, &incr)) {
		rb_error(x->out, "ERR value is not a valid float");
		return;
	}
	value += incr;
	if (isnan(value) || isinf(value)) {
		rb_error(x->out, "ERR increment would produce NaN or Infinity");
		return;
	}
	v.len = kv_fmt_ld(buf, sizeof(buf), value);
	v.p = buf;
	e = set_key(x, &x->argv[1], &v, true);
	if (e == NULL)
		return;
	/* Not tryObjectEncoding()'d in Redis: embstr or raw by length, even "3000". */
	e->enc = v.len <= KV_EMBSTR_MAX ? KV_ENC_EMBSTR : KV_ENC_RAW;
	rb_bulk(x->out, buf, v.len);
}
