/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Hash commands, as Redis 7.0's t_hash.c: the same checks in the same order (argument
 * errors, then the key's type), the same replies.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv.h"
#include "t_hash.h"

static struct kv_entry *
hash_read(struct kv_ctx *x, bool *bad)
{
	return kv_key_typed(x, &x->argv[1], KV_T_HASH, KV_FIND_READ, bad);
}

/* hashTypeLookupWriteOrCreate(): the hash at argv[1], made if absent; NULL on WRONGTYPE
 * or ENOMEM (replied). */
static struct kv_entry *
hash_write(struct kv_ctx *x)
{
	bool bad;
	struct kv_entry *e = kv_key_typed(x, &x->argv[1], KV_T_HASH, 0, &bad);

	if (bad || e != NULL)
		return e;
	return kv_key_add(x, &x->argv[1], KV_T_HASH, KV_ENC_LISTPACK, hash_new());
}

/* Convert first if any field or value given is too long for a listpack. */
static bool
convert_for_args(struct kv_ctx *x, struct kv_entry *e, uint32_t from)
{
	size_t lens[64];
	uint32_t i, n = 0;

	for (i = from; i < x->argc; i++) {
		lens[n++] = x->argv[i].len;
		if (n == 64 || i + 1 == x->argc) {
			if (hash_convert_for(e, lens, n) != 0) {
				rb_error(x->out, kv_err_oom);
				return false;
			}
			n = 0;
		}
	}
	return true;
}

static void
hset_generic(struct kv_ctx *x, bool mset)
{
	struct kv_entry *e;
	long long created = 0;
	uint32_t i;

	if (x->argc % 2 == 1) {
		kv_reply_wrong_arity(x->out, mset ? "hmset" : "hset");
		return;
	}
	e = hash_write(x);
	if (e == NULL || !convert_for_args(x, e, 2))
		return;
	for (i = 2; i < x->argc; i += 2) {
		int r =
		    hash_set(e, x->argv[i].p, x->argv[i].len, x->argv[i + 1].p, x->argv[i + 1].len);

		if (r < 0) {
			rb_error(x->out, kv_err_oom);
			return;
		}
		created += r;
	}
	if (mset)
		rb_ok(x->out);
	else
		rb_int(x->out, created);
}

KV_CMD(hset)
{
	hset_generic(x, false);
}

KV_CMD(hmset)
{
	hset_generic(x, true);
}

KV_CMD(hsetnx)
{
	struct kv_entry *e = hash_write(x);
	const char *v;
	size_t vlen;

	if (e == NULL)
		return;
	if (hash_get(e, x->argv[2].p, x->argv[2].len, &v, &vlen)) {
		rb_int(x->out, 0); /* before any conversion, as Redis checks */
		return;
	}
	if (!convert_for_args(x, e, 2))
		return;
	if (hash_set(e, x->argv[2].p, x->argv[2].len, x->argv[3].p, x->argv[3].len) < 0) {
		rb_error(x->out, kv_err_oom);
		return;
	}
	rb_int(x->out, 1);
}

static void
reply_field(struct kv_ctx *x, struct kv_entry *e, const struct kv_arg *f)
{
	const char *v;
	size_t vlen;

	if (e != NULL && hash_get(e, f->p, f->len, &v, &vlen))
		rb_bulk(x->out, v, vlen);
	else
		rb_null(x->out);
}

KV_CMD(hget)
{
	bool bad;
	struct kv_entry *e = hash_read(x, &bad);

	if (!bad)
		reply_field(x, e, &x->argv[2]);
}

KV_CMD(hmget)
{
	bool bad;
	struct kv_entry *e = hash_read(x, &bad);
	uint32_t i;

	if (bad)
		return;
	rb_array(x->out, x->argc - 2);
	for (i = 2; i < x->argc; i++)
		reply_field(x, e, &x->argv[i]);
}

KV_CMD(hdel)
{
	kv_remove_members(x, KV_T_HASH, hash_del);
}

KV_CMD(hlen)
{
	bool bad;
	struct kv_entry *e = hash_read(x, &bad);

	if (!bad)
		rb_int(x->out, e != NULL ? (long long)hash_len(e) : 0);
}

KV_CMD(hstrlen)
{
	bool bad;
	struct kv_entry *e = hash_read(x, &bad);
	const char *v;
	size_t vlen;

	if (bad)
		return;
	if (e != NULL && hash_get(e, x->argv[2].p, x->argv[2].len, &v, &vlen))
		rb_int(x->out, (long long)vlen);
	else
		rb_int(x->out, 0);
}

KV_CMD(hexists)
{
	bool bad;
	struct kv_entry *e = hash_read(x, &bad);
	const char *v;
	size_t vlen;

	if (!bad)
		rb_int(x->out, e != NULL && hash_get(e, x->argv[2].p, x->argv[2].len, &v, &vlen));
}

KV_CMD(hincrby)
{
	long long incr, value = 0;
	struct kv_entry *e;
	const char *v;
	size_t vlen;
	char buf[24];
	int n;

	if (!kv_arg_ll(x, &x->argv[3], &incr))
		return;
	e = hash_write(x);
	if (e == NULL)
		return;
	if (hash_get(e, x->argv[2].p, x->argv[2].len, &v, &vlen) &&
	    !resp_string2ll(v, vlen, &value)) {
		rb_error(x->out, "ERR hash value is not an integer");
		return;
	}
	if (kv_add_overflows(value, incr)) {
		rb_error(x->out, "ERR increment or decrement would overflow");
		return;
	}
	value += incr;
	n = snprintf(buf, sizeof(buf), "%lld", value);
	if (hash_set(e, x->argv[2].p, x->argv[2].len, buf, (size_t)n) < 0) {
		rb_error(x->out, kv_err_oom);
		return;
	}
	rb_int(x->out, value);
}

KV_CMD(hincrbyfloat)
{
	long double incr, value = 0;
	struct kv_entry *e;
	char buf[5 * 1024];
	const char *v;
	size_t vlen, n;

	if (!kv_parse_ld(x->argv[3].p, x->argv[3].len, &incr)) {
		rb_error(x->out, kv_err_float);
		return;
	}
	if (isnan(incr) || isinf(incr)) {
		rb_error(x->out, "ERR value is NaN or Infinity");
		return;
	}
	e = hash_write(x);
	if (e == NULL)
		return;
	if (hash_get(e, x->argv[2].p, x->argv[2].len, &v, &vlen) && !kv_parse_ld(v, vlen, &value)) {
		rb_error(x->out, "ERR hash value is not a float");
		return;
	}
	value += incr;
	if (isnan(value) || isinf(value)) {
		rb_error(x->out, "ERR increment would produce NaN or Infinity");
		return;
	}
	n = kv_fmt_ld(buf, sizeof(buf), value);
	if (hash_set(e, x->argv[2].p, x->argv[2].len, buf, n) < 0) {
		rb_error(x->out, kv_err_oom);
		return;
	}
	rb_bulk(x->out, buf, n);
}

enum { H_KEYS = 1, H_VALS = 2 };

static void
getall(struct kv_ctx *x, unsigned what)
{
	bool bad;
	struct kv_entry *e = hash_read(x, &bad);
	struct hash_iter it;
	const char *f, *v;
	size_t flen, vlen;

	if (bad)
		return;
	if (e == NULL) {
		rb_array(x->out, 0);
		return;
	}
	rb_array(x->out, (long long)hash_len(e) * (what == (H_KEYS | H_VALS) ? 2 : 1));
	hash_iter_init(&it, e);
	while (hash_iter_next(&it, &f, &flen, &v, &vlen)) {
		if (what & H_KEYS)
			rb_bulk(x->out, f, flen);
		if (what & H_VALS)
			rb_bulk(x->out, v, vlen);
	}
	hash_iter_end(&it);
}

KV_CMD(hkeys)
{
	getall(x, H_KEYS);
}

KV_CMD(hvals)
{
	getall(x, H_VALS);
}

KV_CMD(hgetall)
{
	getall(x, H_KEYS | H_VALS);
}

static void
reply_random(struct kv_ctx *x, struct kv_entry *e, bool withvalues)
{
	const char *f, *v;
	size_t flen, vlen;

	hash_random(e, &x->sh->rng, &f, &flen, &v, &vlen);
	rb_bulk(x->out, f, flen);
	if (withvalues)
		rb_bulk(x->out, v, vlen);
}

/* Distinct random fields: a partial Fisher-Yates shuffle over the hash's fields. */
static void
random_distinct(struct kv_ctx *x, struct kv_entry *e, size_t count, bool withvalues)
{
	size_t n = hash_len(e), i = 0, j;
	struct hash_iter it;
	struct {
		const char *f, *v;
		size_t flen, vlen;
	} *all = malloc(n * sizeof(*all)), t;

	if (all == NULL) {
		rb_error(x->out, kv_err_oom);
		return;
	}
	hash_iter_init(&it, e);
	while (hash_iter_next(&it, &all[i].f, &all[i].flen, &all[i].v, &all[i].vlen))
		i++;
	hash_iter_end(&it);
	rb_array(x->out, (long long)(withvalues ? count * 2 : count));
	for (i = 0; i < count; i++) {
		j = i + (size_t)(kv_rand(&x->sh->rng) % (n - i));
		t = all[i];
		all[i] = all[j];
		all[j] = t;
		rb_bulk(x->out, all[i].f, all[i].flen);
		if (withvalues)
			rb_bulk(x->out, all[i].v, all[i].vlen);
	}
	free(all);
}

KV_CMD(hrandfield)
{
	bool bad, withvalues = false, uniq = true;
	struct kv_entry *e;
	size_t count, size, i;

	if (x->argc == 2) {
		e = kv_key_typed(x, &x->argv[1], KV_T_HASH, KV_FIND_READ, &bad);
		if (bad)
			return;
		if (e == NULL)
			rb_null(x->out);
		else
			reply_random(x, e, false);
		return;
	}
	if (!kv_rand_count(x, "withvalues", &count, &uniq, &withvalues))
		return;
	e = kv_key_typed(x, &x->argv[1], KV_T_HASH, KV_FIND_READ, &bad);
	if (bad)
		return;
	if (e == NULL || count == 0) {
		rb_array(x->out, 0);
		return;
	}
	size = hash_len(e);
	if (!uniq || count == 1) {
		rb_array(x->out, (long long)(withvalues ? count * 2 : count));
		for (i = 0; i < count; i++)
			reply_random(x, e, withvalues);
		return;
	}
	if (count >= size) {
		getall(x, withvalues ? H_KEYS | H_VALS : H_KEYS);
		return;
	}
	random_distinct(x, e, count, withvalues);
}

static void
hscan_visit(const char *f, size_t flen, const char *v, size_t vlen, void *arg)
{
	struct kv_scan_walk *w = arg;

	w->visited += 2;
	if (!kv_scan_match(w->o, f, flen))
		return;
	rb_bulk(&w->items, f, flen);
	rb_bulk(&w->items, v, vlen);
	w->n += 2;
}

static uint64_t
hscan_step(struct kv_entry *e, uint64_t cursor, struct kv_scan_walk *w)
{
	return hash_scan(e, cursor, hscan_visit, w);
}

KV_CMD(hscan)
{
	kv_scan_collection(x, KV_T_HASH, hscan_step);
}
