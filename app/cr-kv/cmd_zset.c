/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Sorted-set commands on one key, as Redis 7.0's t_zset.c: ZADD and its flags, scores,
 * ranks, counts, pops, random members, ZSCAN and the removals by range. The ranges
 * themselves (ZRANGE and its older forms, ZRANGESTORE) are in cmd_zrange.c; the algebra
 * of several keys in cmd_multi.c.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv.h"
#include "t_zset.h"

static const char err_nan[] = "ERR resulting score is not a number (NaN)";

struct kv_entry *
kv_zset_read(struct kv_ctx *x, const struct kv_arg *k, bool *bad)
{
	return kv_key_typed(x, k, KV_T_ZSET, KV_FIND_READ, bad);
}

static struct kv_entry *
zset_write(struct kv_ctx *x, bool *bad)
{
	return kv_key_typed(x, &x->argv[1], KV_T_ZSET, 0, bad);
}

/* zslParseRange(): "(" for an open end; strtod()'s syntax otherwise (leading spaces,
 * inf, hex), but all of it must be consumed and NaN is refused. */
static bool
parse_bound(const struct kv_arg *a, double *v, bool *ex)
{
	const char *p = a->p;
	char *end;

	*ex = p[0] == '(';
	if (*ex)
		p++;
	*v = strtod(p, &end);
	return end[0] == '\0' && (size_t)(end - a->p) == a->len && !isnan(*v);
}

bool
kv_zparse_range(struct kv_ctx *x, const struct kv_arg *min, const struct kv_arg *max,
		struct zrange *r)
{
	if (parse_bound(min, &r->min, &r->minex) && parse_bound(max, &r->max, &r->maxex))
		return true;
	rb_error(x->out, "ERR min or max is not a float");
	return false;
}

static bool
parse_lex_item(const struct kv_arg *a, const char **s, size_t *len, bool *ex, int *kind)
{
	*kind = ZLEX_STR;
	switch (a->p[0]) {
	case '+':
	case '-':
		if (a->len != 1)
			return false;
		*kind = a->p[0] == '+' ? ZLEX_PLUS : ZLEX_MINUS;
		*ex = true;
		*s = "";
		*len = 0;
		return true;
	case '(':
	case '[':
		*ex = a->p[0] == '(';
		*s = a->p + 1;
		*len = a->len - 1;
		return true;
	default:
		return false;
	}
}

bool
kv_zparse_lex(struct kv_ctx *x, const struct kv_arg *min, const struct kv_arg *max,
	      struct zlexrange *r)
{
	if (parse_lex_item(min, &r->min, &r->minlen, &r->minex, &r->minkind) &&
	    parse_lex_item(max, &r->max, &r->maxlen, &r->maxex, &r->maxkind))
		return true;
	rb_error(x->out, "ERR min or max not valid string range item");
	return false;
}

/* ---- ZADD, ZINCRBY ---- */

static void
zadd_generic(struct kv_ctx *x, int flags)
{
	uint32_t scoreidx = 2, j;
	long long added = 0, updated = 0, processed = 0;
	bool ch = false, bad;
	double *scores, score = 0;
	size_t elements, maxlen = 0;
	struct kv_entry *e;

	for (; scoreidx < x->argc; scoreidx++) {
		const char *o = x->argv[scoreidx].p;

		if (strcasecmp(o, "nx") == 0)
			flags |= ZADD_IN_NX;
		else if (strcasecmp(o, "xx") == 0)
			flags |= ZADD_IN_XX;
		else if (strcasecmp(o, "ch") == 0)
			ch = true;
		else if (strcasecmp(o, "incr") == 0)
			flags |= ZADD_IN_INCR;
		else if (strcasecmp(o, "gt") == 0)
			flags |= ZADD_IN_GT;
		else if (strcasecmp(o, "lt") == 0)
			flags |= ZADD_IN_LT;
		else
			break;
	}
	elements = x->argc - scoreidx;
	if (elements % 2 != 0 || elements == 0) {
		rb_error(x->out, kv_err_syntax);
		return;
	}
	elements /= 2;
	if ((flags & ZADD_IN_NX) && (flags & ZADD_IN_XX)) {
		rb_error(x->out, "ERR XX and NX options at the same time are not compatible");
		return;
	}
	if (((flags & ZADD_IN_GT) && (flags & ZADD_IN_NX)) ||
	    ((flags & ZADD_IN_LT) && (flags & ZADD_IN_NX)) ||
	    ((flags & ZADD_IN_GT) && (flags & ZADD_IN_LT))) {
		rb_error(x->out,
			 "ERR GT, LT, and/or NX options at the same time are not compatible");
		return;
	}
	if ((flags & ZADD_IN_INCR) && elements > 1) {
		rb_error(x->out, "ERR INCR option supports a single increment-element pair");
		return;
	}
	scores = malloc(elements * sizeof(*scores));
	if (scores == NULL) {
		rb_error(x->out, kv_err_oom);
		return;
	}
	for (j = 0; j < elements; j++) {
		if (!kv_arg_double(x, &x->argv[scoreidx + 2 * j], &scores[j]))
			goto out;
		if (x->argv[scoreidx + 2 * j + 1].len > maxlen)
			maxlen = x->argv[scoreidx + 2 * j + 1].len;
	}
	e = zset_write(x, &bad);
	if (bad)
		goto out;
	if (e == NULL) {
		unsigned enc;
		void *obj;

		if (flags & ZADD_IN_XX)
			goto reply;
		obj = zset_new(elements, maxlen, &enc);
		e = kv_key_add(x, &x->argv[1], KV_T_ZSET, enc, obj);
		if (e == NULL)
			goto out;
	}
	for (j = 0; j < elements; j++) {
		const struct kv_arg *m = &x->argv[scoreidx + 2 * j + 1];
		double ns = scores[j];
		int out, r = zset_add(e, scores[j], m->p, m->len, flags, &out, &ns);

		if (r < 0) {
			rb_error(x->out, kv_err_oom);
			goto out;
		}
		if (r == 0) {
			rb_error(x->out, err_nan);
			goto out;
		}
		added += (out & ZADD_OUT_ADDED) != 0;
		updated += (out & ZADD_OUT_UPDATED) != 0;
		if (!(out & ZADD_OUT_NOP))
			processed++;
		score = ns;
	}
reply:
	if (flags & ZADD_IN_INCR) {
		if (processed)
			kv_reply_double(x->out, score);
		else
			rb_null(x->out);
	} else {
		rb_int(x->out, ch ? added + updated : added);
	}
out:
	free(scores);
}

KV_CMD(zadd)
{
	zadd_generic(x, 0);
}

KV_CMD(zincrby)
{
	zadd_generic(x, ZADD_IN_INCR);
}

/* ---- single members ---- */

KV_CMD(zrem)
{
	kv_remove_members(x, KV_T_ZSET, zset_del);
}

KV_CMD(zcard)
{
	bool bad;
	struct kv_entry *e = kv_zset_read(x, &x->argv[1], &bad);

	if (!bad)
		rb_int(x->out, e != NULL ? (long long)zset_len(e) : 0);
}

KV_CMD(zscore)
{
	bool bad;
	struct kv_entry *e = kv_zset_read(x, &x->argv[1], &bad);
	double s;

	if (bad)
		return;
	if (e != NULL && zset_score(e, x->argv[2].p, x->argv[2].len, &s))
		kv_reply_double(x->out, s);
	else
		rb_null(x->out);
}

KV_CMD(zmscore)
{
	bool bad;
	struct kv_entry *e = kv_zset_read(x, &x->argv[1], &bad);
	uint32_t j;
	double s;

	if (bad)
		return;
	rb_array(x->out, x->argc - 2);
	for (j = 2; j < x->argc; j++) {
		if (e != NULL && zset_score(e, x->argv[j].p, x->argv[j].len, &s))
			kv_reply_double(x->out, s);
		else
			rb_null(x->out);
	}
}

static void
rank_generic(struct kv_ctx *x, bool rev)
{
	bool bad;
	struct kv_entry *e = kv_zset_read(x, &x->argv[1], &bad);
	unsigned long rank;
	double s;

	if (bad)
		return;
	if (e != NULL && zset_rank(e, x->argv[2].p, x->argv[2].len, rev, &rank, &s))
		rb_int(x->out, (long long)rank);
	else
		rb_null(x->out);
}

KV_CMD(zrank)
{
	rank_generic(x, false);
}

KV_CMD(zrevrank)
{
	rank_generic(x, true);
}

KV_CMD(zcount)
{
	struct zrange r;
	struct kv_entry *e;
	bool bad;

	if (!kv_zparse_range(x, &x->argv[2], &x->argv[3], &r))
		return;
	e = kv_zset_read(x, &x->argv[1], &bad);
	if (!bad)
		rb_int(x->out, e != NULL ? (long long)zset_count_score(e, &r) : 0);
}

KV_CMD(zlexcount)
{
	struct zlexrange r;
	struct kv_entry *e;
	bool bad;

	if (!kv_zparse_lex(x, &x->argv[2], &x->argv[3], &r))
		return;
	e = kv_zset_read(x, &x->argv[1], &bad);
	if (!bad)
		rb_int(x->out, e != NULL ? (long long)zset_count_lex(e, &r) : 0);
}

/* ---- removals by range ---- */

enum zrem_by { BY_RANK, BY_SCORE, BY_LEX };

static void
zremrange(struct kv_ctx *x, enum zrem_by by)
{
	long long start = 0, end = 0, llen;
	struct zlexrange lr;
	struct zrange r;
	struct kv_entry *e;
	unsigned long n;
	bool bad;

	if (by == BY_RANK) {
		if (!kv_arg_ll(x, &x->argv[2], &start) || !kv_arg_ll(x, &x->argv[3], &end))
			return;
	} else if (by == BY_SCORE) {
		if (!kv_zparse_range(x, &x->argv[2], &x->argv[3], &r))
			return;
	} else if (!kv_zparse_lex(x, &x->argv[2], &x->argv[3], &lr)) {
		return;
	}
	e = zset_write(x, &bad);
	if (bad)
		return;
	if (e == NULL) {
		rb_int(x->out, 0);
		return;
	}
	if (by == BY_RANK) {
		llen = (long long)zset_len(e);
		if (!kv_rank_range(llen, &start, &end)) {
			rb_int(x->out, 0);
			return;
		}
		n = zset_del_ranks(e, (unsigned long)start, (unsigned long)end);
	} else if (by == BY_SCORE) {
		n = zset_del_score(e, &r);
	} else {
		n = zset_del_lex(e, &lr);
	}
	kv_key_drop_if_empty(x, e);
	rb_int(x->out, (long long)n);
}

KV_CMD(zremrangebyrank)
{
	zremrange(x, BY_RANK);
}

KV_CMD(zremrangebyscore)
{
	zremrange(x, BY_SCORE);
}

KV_CMD(zremrangebylex)
{
	zremrange(x, BY_LEX);
}

/* ---- pops ---- */

void
kv_zpop_reply(struct kv_ctx *x, struct kv_entry *e, bool max, long long count, int style,
	      const struct kv_arg *key)
{
	long long len = (long long)zset_len(e), n = count > len ? len : count, i;

	if (style == ZPOP_KEY) {
		rb_array(x->out, 3);
		rb_bulk(x->out, key->p, key->len);
	} else if (style == ZPOP_NESTED) {
		rb_array(x->out, 2);
		rb_bulk(x->out, key->p, key->len);
		rb_array(x->out, n);
	} else {
		rb_array(x->out, n * 2);
	}
	for (i = 0; i < n; i++) {
		struct zit it;
		const char *m;
		size_t mlen;
		double s;

		zit_rank(&it, e, max ? zset_len(e) - 1 : 0);
		zit_get(&it, &m, &mlen, &s);
		if (style == ZPOP_NESTED)
			rb_array(x->out, 2);
		rb_bulk(x->out, m, mlen);
		kv_reply_double(x->out, s);
		/* The member's bytes were copied into the reply: it can go now. */
		zset_del_ranks(e, max ? zset_len(e) - 1 : 0, max ? zset_len(e) - 1 : 0);
	}
}

static void
zpop(struct kv_ctx *x, bool max)
{
	long long count = 1;
	struct kv_entry *e;
	bool bad;

	if (x->argc > 3) {
		rb_error(x->out, kv_err_syntax);
		return;
	}
	if (x->argc == 3 && !kv_arg_positive(x, &x->argv[2], NULL, &count))
		return;
	e = zset_write(x, &bad);
	if (bad)
		return;
	if (e == NULL || count == 0) {
		rb_array(x->out, 0);
		return;
	}
	kv_zpop_reply(x, e, max, count, ZPOP_FLAT, NULL);
	kv_key_drop_if_empty(x, e);
}

KV_CMD(zpopmin)
{
	zpop(x, false);
}

KV_CMD(zpopmax)
{
	zpop(x, true);
}

/* ---- random members, scan ---- */

static void
reply_member_at(struct kv_ctx *x, struct kv_entry *e, unsigned long rank, bool withscores)
{
	struct zit it;
	const char *m;
	size_t len;
	double s;

	zit_rank(&it, e, rank);
	zit_get(&it, &m, &len, &s);
	rb_bulk(x->out, m, len);
	if (withscores)
		kv_reply_double(x->out, s);
}

KV_CMD(zrandmember)
{
	bool bad, withscores = false, uniq = true;
	struct kv_entry *e;
	size_t count, size, i, j;
	unsigned long *ranks;

	if (x->argc == 2) {
		e = kv_zset_read(x, &x->argv[1], &bad);
		if (bad)
			return;
		if (e == NULL)
			rb_null(x->out);
		else
			reply_member_at(x, e, (unsigned long)(kv_rand(&x->sh->rng) % zset_len(e)),
					false);
		return;
	}
	if (!kv_rand_count(x, "withscores", &count, &uniq, &withscores))
		return;
	e = kv_zset_read(x, &x->argv[1], &bad);
	if (bad)
		return;
	if (e == NULL || count == 0) {
		rb_array(x->out, 0);
		return;
	}
	size = zset_len(e);
	if (!uniq || count == 1) {
		rb_array(x->out, (long long)(withscores ? count * 2 : count));
		for (i = 0; i < count; i++)
			reply_member_at(x, e, (unsigned long)(kv_rand(&x->sh->rng) % size),
					withscores);
		return;
	}
	if (count > size)
		count = size; /* the whole set, highest score first, as Redis replies then */
	ranks = malloc(size * sizeof(*ranks));
	if (ranks == NULL) {
		rb_error(x->out, kv_err_oom);
		return;
	}
	for (i = 0; i < size; i++)
		ranks[i] = i;
	rb_array(x->out, (long long)(withscores ? count * 2 : count));
	for (i = 0; i < count; i++) {
		unsigned long t;

		if (count == size) {
			reply_member_at(x, e, (unsigned long)(size - 1 - i), withscores);
			continue;
		}
		j = i + (size_t)(kv_rand(&x->sh->rng) % (size - i));
		t = ranks[i];
		ranks[i] = ranks[j];
		ranks[j] = t;
		reply_member_at(x, e, ranks[i], withscores);
	}
	free(ranks);
}

static void
zscan_one(struct kv_scan_walk *w, const char *m, size_t len, double s)
{
	w->visited += 2;
	if (!kv_scan_match(w->o, m, len))
		return;
	rb_bulk(&w->items, m, len);
	kv_reply_double(&w->items, s);
	w->n += 2;
}

static void
zscan_visit(struct kd_node *n, void *arg)
{
	const struct zs_node *z = (const struct zs_node *)n;

	zscan_one(arg, zs_member(z), z->mlen, z->score);
}

static uint64_t
zscan_step(struct kv_entry *e, uint64_t cursor, struct kv_scan_walk *w)
{
	struct zit it;

	if (e->enc != KV_ENC_LISTPACK)
		return kd_scan(&((struct kv_zset *)e->obj)->d, cursor, zscan_visit, w);
	/* A listpack is returned whole, in order, with cursor 0 (as Redis does). */
	for (zit_rank(&it, e, 0); zit_ok(&it); zit_step(&it, false)) {
		const char *m;
		size_t len;
		double s;

		zit_get(&it, &m, &len, &s);
		zscan_one(w, m, len, s);
	}
	return 0;
}

KV_CMD(zscan)
{
	kv_scan_collection(x, KV_T_ZSET, zscan_step);
}
