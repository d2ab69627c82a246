/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Sorted-set commands over several keys, as Redis 7.0's zunionInterDiffGenericCommand():
 * ZUNION, ZINTER, ZDIFF, their STOREs, ZINTERCARD (sets count as sorted sets of score 1),
 * and ZRANGESTORE. In one step on one shard, else as a transaction that computes on the
 * client's lcore from copies of the sources read under the locks (cmd_multi.c).
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv.h"
#include "t_set.h"
#include "t_zset.h"

enum { OP_UNION, OP_DIFF, OP_INTER };
enum { AGG_SUM, AGG_MIN, AGG_MAX };

struct zsrc {
	struct kv_entry *e; /* NULL: absent */
	double weight;
};

struct zopts {
	int op, agg;
	bool withscores, cardonly, store;
	long long limit;
	uint32_t numidx; /* where numkeys is */
	long long n;
};

static size_t
len_of(const struct kv_entry *e)
{
	if (e == NULL)
		return 0;
	return e->type == KV_T_SET ? set_len(e) : zset_len(e);
}

static int
by_len(const void *a, const void *b)
{
	size_t x = len_of(((const struct zsrc *)a)->e), y = len_of(((const struct zsrc *)b)->e);

	return x < y ? -1 : x > y ? 1 : 0;
}

static void
aggregate(double *target, double v, int agg)
{
	if (agg == AGG_SUM) {
		*target += v;
		if (isnan(*target))
			*target = 0.0; /* inf + -inf */
	} else if (agg == AGG_MIN) {
		if (v < *target)
			*target = v;
	} else if (v > *target) {
		*target = v;
	}
}

/* A source's score for member m, if it has it (a set's members score 1). */
static bool
score_in(struct kv_entry *e, const char *m, size_t len, double *s)
{
	if (e == NULL)
		return false;
	if (e->type == KV_T_SET) {
		*s = 1.0;
		return set_has(e, m, len);
	}
	return zset_score(e, m, len, s);
}

/* Walk a source's members with their scores. */
typedef bool (*each_fn)(void *arg, const char *m, size_t len, double s);

static bool
each(struct kv_entry *e, each_fn fn, void *arg)
{
	if (e == NULL)
		return true;
	if (e->type == KV_T_SET) {
		struct set_iter it;
		const char *m;
		size_t len;
		bool go = true;

		set_iter_init(&it, e);
		while (go && set_iter_next(&it, &m, &len))
			go = fn(arg, m, len, 1.0);
		set_iter_end(&it);
		return go;
	} else {
		struct zit it;
		bool go = true;

		for (zit_rank(&it, e, 0); go && zit_ok(&it); zit_step(&it, false)) {
			const char *m;
			size_t len;
			double s;

			zit_get(&it, &m, &len, &s);
			go = fn(arg, m, len, s);
		}
		return go;
	}
}

struct walk {
	struct zsrc *src;
	uint32_t n, i;
	const struct zopts *o;
	struct kv_entry *res;
	unsigned long card;
	size_t maxlen;
	bool nomem;
};

static bool
add_res(struct walk *w, const char *m, size_t len, double s)
{
	int out;

	if (zset_add(w->res, s, m, len, 0, &out, NULL) < 0) {
		w->nomem = true;
		return false;
	}
	if (len > w->maxlen)
		w->maxlen = len;
	return true;
}

static bool
inter_one(void *arg, const char *m, size_t len, double s0)
{
	struct walk *w = arg;
	double score = w->src[0].weight * s0, v;
	uint32_t j;

	if (isnan(score))
		score = 0;
	for (j = 1; j < w->n; j++) {
		if (w->src[j].e == w->src[0].e)
			v = s0 * w->src[j].weight;
		else if (score_in(w->src[j].e, m, len, &v))
			v *= w->src[j].weight;
		else
			return true;
		aggregate(&score, v, w->o->agg);
	}
	if (w->o->cardonly)
		return !(++w->card == (unsigned long)w->o->limit && w->o->limit != 0);
	return add_res(w, m, len, score);
}

static bool
union_one(void *arg, const char *m, size_t len, double s)
{
	struct walk *w = arg;
	double score = w->src[w->i].weight * s, cur;
	int out;

	if (isnan(score))
		score = 0;
	if (zset_score(w->res, m, len, &cur)) {
		aggregate(&cur, score, w->o->agg);
		if (zset_add(w->res, cur, m, len, 0, &out, NULL) < 0)
			w->nomem = true;
		return !w->nomem;
	}
	return add_res(w, m, len, score);
}

static bool
diff_one(void *arg, const char *m, size_t len, double s)
{
	struct walk *w = arg;
	uint32_t j;
	double v;

	for (j = 1; j < w->n; j++)
		if (score_in(w->src[j].e, m, len, &v))
			return true;
	return add_res(w, m, len, s);
}

/* Parse what follows the keys (WEIGHTS AGGREGATE WITHSCORES LIMIT), as Redis does. */
static bool
parse_opts(struct kv_ctx *x, struct zopts *o, struct zsrc *src, uint32_t j)
{
	uint32_t i;

	while (j < x->argc) {
		uint32_t left = x->argc - j;
		const char *a = x->argv[j].p;

		if (o->op != OP_DIFF && !o->cardonly && left >= (uint32_t)o->n + 1 &&
		    strcasecmp(a, "weights") == 0) {
			j++;
			for (i = 0; i < o->n; i++, j++) {
				if (!kv_parse_double(x->argv[j].p, x->argv[j].len,
						     &src[i].weight)) {
					rb_error(x->out, "ERR weight value is not a float");
					return false;
				}
			}
		} else if (o->op != OP_DIFF && !o->cardonly && left >= 2 &&
			   strcasecmp(a, "aggregate") == 0) {
			const char *v = x->argv[j + 1].p;

			if (strcasecmp(v, "sum") == 0)
				o->agg = AGG_SUM;
			else if (strcasecmp(v, "min") == 0)
				o->agg = AGG_MIN;
			else if (strcasecmp(v, "max") == 0)
				o->agg = AGG_MAX;
			else {
				rb_error(x->out, kv_err_syntax);
				return false;
			}
			j += 2;
		} else if (!o->store && !o->cardonly && strcasecmp(a, "withscores") == 0) {
			o->withscores = true;
			j++;
		} else if (o->cardonly && left >= 2 && strcasecmp(a, "limit") == 0) {
			if (!kv_arg_positive(x, &x->argv[j + 1], "ERR LIMIT can't be negative",
					     &o->limit))
				return false;
			j += 2;
		} else {
			rb_error(x->out, kv_err_syntax);
			return false;
		}
	}
	return true;
}

static bool
parse_numkeys(struct kv_ctx *x, struct zopts *o)
{
	if (!kv_arg_ll(x, &x->argv[o->numidx], &o->n))
		return false;
	if (o->n < 1) {
		rb_errorf(x->out, "ERR at least 1 input key is needed for '%s' command",
			  x->argv[0].len > 0 ? kv_cmd_lookup(x->argv[0].p, x->argv[0].len)->name
					     : "");
		return false;
	}
	if (o->n > (long long)(x->argc - o->numidx - 1)) {
		rb_error(x->out, kv_err_syntax);
		return false;
	}
	return true;
}

static void
reply_res(struct kv_ctx *x, struct kv_entry *res, bool withscores)
{
	struct zit it;
	long long n = (long long)zset_len(res);

	rb_array(x->out, withscores ? n * 2 : n);
	for (zit_rank(&it, res, 0); zit_ok(&it); zit_step(&it, false)) {
		const char *m;
		size_t len;
		double s;

		zit_get(&it, &m, &len, &s);
		rb_bulk(x->out, m, len);
		if (withscores)
			kv_reply_double(x->out, s);
	}
}

/* zunionInterDiffGenericCommand(): numkeys at argv[@p numidx], a destination at argv[1]
 * if @p store; from @p tx's copies when it is not NULL. */
static void
zsetop(struct kv_ctx *x, struct kv_tx *tx, struct zopts *o)
{
	struct kv_srcs s = {0};
	struct kv_entry res = {0};
	struct zsrc *src = NULL;
	uint32_t *idx = NULL, i;
	struct walk w;
	unsigned enc;

	if (!parse_numkeys(x, o))
		goto out;
	idx = malloc((size_t)o->n * sizeof(*idx));
	src = calloc((size_t)o->n, sizeof(*src));
	if (idx == NULL || src == NULL)
		goto nomem;
	for (i = 0; i < o->n; i++)
		idx[i] = o->numidx + 1 + i;
	if (kv_srcs_get(x, tx, idx, (uint32_t)o->n, &s) != 0)
		goto nomem;
	if (!kv_srcs_typed(x, &s, 1u << KV_T_SET | 1u << KV_T_ZSET))
		goto out;
	for (i = 0; i < o->n; i++) {
		src[i].e = s.e[i];
		src[i].weight = 1.0;
	}
	if (!parse_opts(x, o, src, o->numidx + 1 + (uint32_t)o->n))
		goto out;
	if (o->op != OP_DIFF)
		qsort(src, (size_t)o->n, sizeof(*src), by_len);
	memset(&w, 0, sizeof(w));
	w.src = src;
	w.n = (uint32_t)o->n;
	w.o = o;
	w.res = &res;
	res.type = KV_T_ZSET;
	res.obj = zset_new(KV_ZSET_MAX_LISTPACK_ENTRIES + 1, 0, &enc); /* a skiplist, as Redis */
	res.enc = enc;
	if (res.obj == NULL)
		goto nomem;
	if (o->op == OP_INTER) {
		if (len_of(src[0].e) > 0)
			each(src[0].e, inter_one, &w);
	} else if (o->op == OP_UNION) {
		for (w.i = 0; w.i < w.n && !w.nomem; w.i++)
			each(src[w.i].e, union_one, &w);
	} else {
		each(src[0].e, diff_one, &w);
	}
	if (w.nomem)
		goto nomem;
	if (o->cardonly) {
		rb_int(x->out, (long long)w.card);
	} else if (!o->store) {
		reply_res(x, &res, o->withscores);
	} else {
		long long n = (long long)zset_len(&res);

		zset_shrink_encoding(&res, w.maxlen);
		if (tx != NULL) {
			kv_srcs_free(&s);
			free(idx);
			free(src);
			kv_tx_store(tx, 1, &res, n);
			zset_free(res.enc, res.obj);
			return;
		}
		if (n == 0) {
			kv_delete(x->sh->store, x->argv[1].p, x->argv[1].len,
				  kv_key_hash(x, &x->argv[1]), x->now_ms);
			rb_int(x->out, 0);
		} else {
			if (kv_key_add(x, &x->argv[1], KV_T_ZSET, res.enc, res.obj) != NULL)
				rb_int(x->out, n);
			res.obj = NULL;
		}
	}
	goto out;
nomem:
	rb_error(x->out, kv_err_oom);
out:
	if (res.obj != NULL)
		zset_free(res.enc, res.obj);
	kv_srcs_free(&s);
	free(idx);
	free(src);
	if (tx != NULL)
		kv_tx_finish(tx, x->out->p, x->out->len);
}

static void
zsetop_named(struct kv_ctx *x, struct kv_tx *tx, const char *name)
{
	struct zopts o = {0};

	o.store = strstr(name, "store") != NULL;
	o.cardonly = strcmp(name, "zintercard") == 0;
	o.op = strncmp(name, "zunion", 6) == 0	 ? OP_UNION
	       : strncmp(name, "zinter", 6) == 0 ? OP_INTER
						 : OP_DIFF;
	o.numidx = o.store ? 2 : 1;
	zsetop(x, tx, &o);
}

#define ZOP(name)                             \
	KV_CMD(name)                          \
	{                                     \
		zsetop_named(x, NULL, #name); \
	}
ZOP(zunion)
ZOP(zinter)
ZOP(zdiff)
ZOP(zunionstore)
ZOP(zinterstore)
ZOP(zdiffstore)
ZOP(zintercard)

/* numkeys key... (and, for the STOREs, the destination first). */
int
kv_keys_numkeys(const struct kv_arg *argv, uint32_t argc, uint32_t *idx, uint32_t max)
{
	const struct kv_cmd *c = kv_cmd_lookup(argv[0].p, argv[0].len);
	uint32_t at = c != NULL && strstr(c->name, "store") != NULL ? 2 : 1, i, n = 0;
	long long k;

	if (at == 2 && n < max)
		idx[n++] = 1;
	if (!resp_string2ll(argv[at].p, argv[at].len, &k) || k < 1 ||
	    k > (long long)(argc - at - 1))
		return -1;
	for (i = 0; i < (uint32_t)k && n < max; i++)
		idx[n++] = at + 1 + i;
	return (int)n;
}

static void
zcomputed(struct kv_tx *tx)
{
	struct kv_ctx x;
	struct rbuf out;

	rb_init(&out, NULL, 0);
	kv_tx_ctx(tx, &x, &out);
	zsetop_named(&x, tx, tx->kr->cmd->name);
	rb_fini(&out);
}

void
kv_multi_zsetop(struct kreq *kr)
{
	uint32_t small[64], *idx = small;
	int n;
	bool store = strstr(kr->cmd->name, "store") != NULL;

	if (kr->argc > 64)
		idx = malloc(kr->argc * sizeof(*idx));
	n = idx != NULL ? kv_keys_numkeys(kr->argv, kr->argc, idx, kr->argc > 64 ? kr->argc : 64)
			: -1;
	if (n < 0) {
		rb_error(&kr->reply, kv_err_oom);
		kreq_finish(kr);
	} else if (store) {
		kv_tx_compute(kr, idx + 1, (uint32_t)n - 1, 1, zcomputed);
	} else {
		kv_tx_compute(kr, idx, (uint32_t)n, -1, zcomputed);
	}
	if (idx != small)
		free(idx);
}

/* ---- ZRANGESTORE dst src min max [...] ---- */

static void
zrangestore(struct kv_ctx *x, struct kv_tx *tx, struct kv_entry *src)
{
	struct zsink k;
	long long n;

	if (!kv_zrangestore_collect(x, &k, src))
		goto out;
	n = k.dst.obj != NULL ? (long long)zset_len(&k.dst) : 0;
	if (k.failed) {
		rb_error(x->out, kv_err_oom);
	} else if (tx != NULL) {
		kv_tx_store(tx, 1, &k.dst, n);
		if (k.dst.obj != NULL)
			zset_free(k.dst.enc, k.dst.obj);
		return;
	} else if (n == 0) {
		kv_delete(x->sh->store, x->argv[1].p, x->argv[1].len, kv_key_hash(x, &x->argv[1]),
			  x->now_ms);
		rb_int(x->out, 0);
	} else {
		if (kv_key_add(x, &x->argv[1], KV_T_ZSET, k.dst.enc, k.dst.obj) != NULL)
			rb_int(x->out, n);
		k.dst.obj = NULL;
	}
	if (k.dst.obj != NULL)
		zset_free(k.dst.enc, k.dst.obj);
out:
	if (tx != NULL)
		kv_tx_finish(tx, x->out->p, x->out->len);
}

KV_CMD(zrangestore)
{
	zrangestore(x, NULL, NULL);
}

static void
zr_computed(struct kv_tx *tx)
{
	struct kv_srcs s = {0};
	uint32_t idx = 2;
	struct kv_ctx x;
	struct rbuf out;

	rb_init(&out, NULL, 0);
	kv_tx_ctx(tx, &x, &out);
	if (kv_srcs_get(&x, tx, &idx, 1, &s) != 0) {
		rb_error(&out, kv_err_oom);
		kv_tx_finish(tx, out.p, out.len);
	} else {
		/* The source as its shard read it; type 0xf stands for "absent" (looked up
		 * on the destination's shard otherwise). */
		struct kv_entry none = {.type = 0xf};

		zrangestore(&x, tx, s.e[0] != NULL ? s.e[0] : &none);
	}
	kv_srcs_free(&s);
	rb_fini(&out);
}

void
kv_multi_zrangestore(struct kreq *kr)
{
	uint32_t idx = 2;

	kv_tx_compute(kr, &idx, 1, 1, zr_computed);
}
