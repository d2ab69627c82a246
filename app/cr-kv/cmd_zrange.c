/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ZRANGE in all its forms (BYSCORE, BYLEX, REV, LIMIT, WITHSCORES), its older names
 * (ZREVRANGE, ZRANGEBYSCORE, ZREVRANGEBYSCORE, ZRANGEBYLEX, ZREVRANGEBYLEX) and
 * ZRANGESTORE, as Redis 7.0's zrangeGenericCommand(): options first, then the range,
 * then the key. The members go to a sink: the reply, or a new sorted set for ZRANGESTORE.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv.h"
#include "t_zset.h"

enum ztype { Z_AUTO, Z_RANK, Z_SCORE, Z_LEX };
enum zdir { D_AUTO, D_FWD, D_REV };

static void
sink_begin(struct zsink *k, long long n)
{
	if (k->store) {
		unsigned enc;

		k->dst.type = KV_T_ZSET;
		k->dst.obj = zset_new(n >= 0 ? (size_t)n : 0, 0, &enc);
		k->dst.enc = enc;
		k->failed = k->dst.obj == NULL;
		return;
	}
	k->known = n >= 0;
	if (k->known)
		rb_array(k->x->out, k->withscores ? n * 2 : n);
	else
		k->start = kv_array_begin(k->x->out);
}

static void
sink_emit(struct zsink *k, const char *m, size_t len, double s)
{
	k->n++;
	if (k->store) {
		int out;

		if (!k->failed && zset_add(&k->dst, s, m, len, 0, &out, NULL) < 0)
			k->failed = true;
		return;
	}
	rb_bulk(k->x->out, m, len);
	if (k->withscores)
		kv_reply_double(k->x->out, s);
}

static void
sink_end(struct zsink *k)
{
	if (!k->store && !k->known)
		kv_array_end(k->x->out, k->start, k->withscores ? k->n * 2 : k->n);
}

static void
by_rank(struct zsink *k, struct kv_entry *e, long long start, long long end, bool rev)
{
	long long llen = (long long)zset_len(e), i;
	struct zit it;

	if (!kv_rank_range(llen, &start, &end)) {
		sink_begin(k, 0);
		return;
	}
	sink_begin(k, end - start + 1);
	zit_rank(&it, e, (unsigned long)(rev ? llen - 1 - start : start));
	for (i = start; i <= end; i++) {
		const char *m;
		size_t len;
		double s;

		zit_get(&it, &m, &len, &s);
		sink_emit(k, m, len, s);
		zit_step(&it, rev);
	}
}

/* Walk from the iterator's place while @p in() holds, after skipping @p offset, at most
 * @p limit (negative: no limit), as genericZrangebyscoreCommand() does. */
static void
walk(struct zsink *k, struct zit *it, bool ok, bool rev, long long offset, long long limit,
     bool (*in)(const char *m, size_t len, double s, const void *r), const void *r)
{
	sink_begin(k, -1);
	/* Redis: while (offset--) skips on for a negative offset, to the end. */
	while (ok && offset != 0) {
		offset--;
		ok = zit_step(it, rev);
	}
	while (ok && limit != 0) {
		const char *m;
		size_t len;
		double s;

		zit_get(it, &m, &len, &s);
		if (!in(m, len, s, r))
			break;
		sink_emit(k, m, len, s);
		if (limit > 0)
			limit--;
		ok = zit_step(it, rev);
	}
}

struct dir_range {
	const void *r;
	bool rev;
};

static bool
in_score(const char *m, size_t len, double s, const void *arg)
{
	const struct dir_range *d = arg;

	(void)m;
	(void)len;
	return d->rev ? zrange_gte_min(s, d->r) : zrange_lte_max(s, d->r);
}

static bool
in_lex(const char *m, size_t len, double s, const void *arg)
{
	const struct dir_range *d = arg;

	(void)s;
	return d->rev ? zlex_gte_min(m, len, d->r) : zlex_lte_max(m, len, d->r);
}

/*
 * zrangeGenericCommand(): argv[@p first] is the source key; for a store, argv[1] is the
 * destination and the members go into k->dst. @return false if an error was replied.
 */
static bool
zrange_generic(struct kv_ctx *x, struct zsink *k, uint32_t first, enum ztype type, enum zdir dir)
{
	uint32_t minidx = first + 1, maxidx = first + 2, j;
	long long start = 0, end = 0, offset = 0, limit = -1;
	bool withscores = false, bad, ok;
	struct zlexrange lr;
	struct kv_entry *e;
	struct dir_range d;
	struct zrange r;
	struct zit it;

	for (j = first + 3; j < x->argc; j++) {
		const char *o = x->argv[j].p;
		uint32_t left = x->argc - j - 1;

		if (!k->store && strcasecmp(o, "withscores") == 0) {
			withscores = true;
		} else if (strcasecmp(o, "limit") == 0 && left >= 2) {
			if (!kv_arg_ll(x, &x->argv[j + 1], &offset) ||
			    !kv_arg_ll(x, &x->argv[j + 2], &limit))
				return false;
			j += 2;
		} else if (dir == D_AUTO && strcasecmp(o, "rev") == 0) {
			dir = D_REV;
		} else if (type == Z_AUTO && strcasecmp(o, "bylex") == 0) {
			type = Z_LEX;
		} else if (type == Z_AUTO && strcasecmp(o, "byscore") == 0) {
			type = Z_SCORE;
		} else {
			rb_error(x->out, kv_err_syntax);
			return false;
		}
	}
	if (dir == D_AUTO)
		dir = D_FWD;
	if (type == Z_AUTO)
		type = Z_RANK;
	if (limit != -1 && type == Z_RANK) {
		rb_error(x->out, "ERR syntax error, LIMIT is only supported in combination with "
				 "either BYSCORE or BYLEX");
		return false;
	}
	if (withscores && type == Z_LEX) {
		rb_error(x->out, "ERR syntax error, WITHSCORES not supported in combination with "
				 "BYLEX");
		return false;
	}
	if (dir == D_REV && type != Z_RANK) {
		minidx = first + 2; /* given as max, min */
		maxidx = first + 1;
	}
	if (type == Z_RANK) {
		if (!kv_arg_ll(x, &x->argv[minidx], &start) ||
		    !kv_arg_ll(x, &x->argv[maxidx], &end))
			return false;
	} else if (type == Z_SCORE) {
		if (!kv_zparse_range(x, &x->argv[minidx], &x->argv[maxidx], &r))
			return false;
	} else if (!kv_zparse_lex(x, &x->argv[minidx], &x->argv[maxidx], &lr)) {
		return false;
	}
	k->withscores = withscores;
	if (k->given) {
		e = k->src;
		if (e != NULL && e->type != KV_T_ZSET) {
			rb_error(x->out, kv_err_wrongtype);
			return false;
		}
	} else {
		e = kv_zset_read(x, &x->argv[first], &bad);
		if (bad)
			return false;
	}
	if (e == NULL) {
		if (k->store)
			sink_begin(k, 0);
		else
			rb_array(x->out, 0);
		return true;
	}
	d.rev = dir == D_REV;
	if (type == Z_RANK) {
		by_rank(k, e, start, end, d.rev);
	} else if (type == Z_SCORE) {
		if (offset > 0 && (size_t)offset >= zset_len(e)) {
			sink_begin(k, 0);
			return true;
		}
		d.r = &r;
		ok = zit_score(&it, e, &r, d.rev);
		walk(k, &it, ok, d.rev, offset, limit, in_score, &d);
	} else {
		if (offset > 0 && (size_t)offset >= zset_len(e)) {
			sink_begin(k, 0);
			return true;
		}
		d.r = &lr;
		ok = zit_lex(&it, e, &lr, d.rev);
		walk(k, &it, ok, d.rev, offset, limit, in_lex, &d);
	}
	sink_end(k);
	return true;
}

static void
zrange_reply(struct kv_ctx *x, enum ztype type, enum zdir dir)
{
	struct zsink k;

	memset(&k, 0, sizeof(k));
	k.x = x;
	zrange_generic(x, &k, 1, type, dir);
}

KV_CMD(zrange)
{
	zrange_reply(x, Z_AUTO, D_AUTO);
}

KV_CMD(zrevrange)
{
	zrange_reply(x, Z_RANK, D_REV);
}

KV_CMD(zrangebyscore)
{
	zrange_reply(x, Z_SCORE, D_FWD);
}

KV_CMD(zrevrangebyscore)
{
	zrange_reply(x, Z_SCORE, D_REV);
}

KV_CMD(zrangebylex)
{
	zrange_reply(x, Z_LEX, D_FWD);
}

KV_CMD(zrevrangebylex)
{
	zrange_reply(x, Z_LEX, D_REV);
}

bool
kv_zrangestore_collect(struct kv_ctx *x, struct zsink *k, struct kv_entry *src)
{
	memset(k, 0, sizeof(*k));
	k->x = x;
	k->store = true;
	k->given = src != NULL;
	k->src = src != NULL && src->type != 0xf ? src : NULL;
	if (!zrange_generic(x, k, 2, Z_AUTO, D_AUTO)) {
		if (k->dst.obj != NULL)
			zset_free(k->dst.enc, k->dst.obj);
		k->dst.obj = NULL;
		return false;
	}
	return true;
}
