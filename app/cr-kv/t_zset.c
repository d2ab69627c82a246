/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The sorted set's two encodings (see t_zset.h). In the listpack a member is followed by
 * its score: an integral one (below 2^53 in magnitude) as the fewest bytes (1-7) of a
 * little-endian two's complement integer, any other as the 8 bytes of its double, as
 * Redis's listpack keeps integral scores as integers.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "lp.h"
#include "mem.h"
#include "obj.h"
#include "t_zset.h"

static __thread uint64_t level_rng = 0x853c49e6748fea9bULL;

/* ---- listpack ---- */

#define ZL_SCORE_MAX 8u

/* A score's bytes in the listpack (see above); @return how many. */
static size_t
zl_score_put(unsigned char out[ZL_SCORE_MAX], double d)
{
	if (fabs(d) < 9007199254740992.0 && d == (double)(int64_t)d && !(d == 0 && signbit(d))) {
		int64_t v = (int64_t)d;
		size_t n = 1, i;

		while (n < 7 && (v < -(1LL << (8 * n - 1)) || v >= (1LL << (8 * n - 1))))
			n++;
		for (i = 0; i < n; i++)
			out[i] = (unsigned char)((uint64_t)v >> (8 * i));
		return n;
	}
	memcpy(out, &d, sizeof(d));
	return sizeof(d);
}

static double
zl_score(const struct lp *l, uint32_t member)
{
	size_t n, i;
	const unsigned char *p = lp_get(l, lp_next(l, member), &n);
	uint64_t u = 0;
	double d;

	if (n == sizeof(d)) {
		memcpy(&d, p, sizeof(d));
		return d;
	}
	for (i = 0; i < n; i++)
		u |= (uint64_t)p[i] << (8 * i);
	if (u >> (8 * n - 1) & 1) /* negative: extend the sign */
		u |= ~0ULL << (8 * n);
	return (double)(int64_t)u;
}

static uint32_t
zl_find(const struct lp *l, const char *m, size_t len, double *score)
{
	uint32_t pos = lp_find(l, lp_first(l), m, len, 1);

	if (pos != LP_NONE && score != NULL)
		*score = zl_score(l, pos);
	return pos;
}

/* Does the member at @p pos come before (score, m)? */
static bool
zl_before(const struct lp *l, uint32_t pos, double score, const char *m, size_t len)
{
	double s = zl_score(l, pos);
	size_t n;
	const unsigned char *p;

	if (s != score)
		return s < score;
	p = lp_get(l, pos, &n);
	return zs_cmp((const char *)p, n, m, len) < 0;
}

static int
zl_insert(struct lp **lpp, double score, const char *m, size_t len)
{
	struct lp *l = *lpp;
	uint32_t pos = lp_first(l);
	unsigned char b[ZL_SCORE_MAX];

	/* Redis's listpack keeps -0 as the integer 0 (it prints "0"): so do we. */
	if (score == 0)
		score = 0;
	while (pos != LP_NONE && zl_before(l, pos, score, m, len))
		pos = lp_next(l, lp_next(l, pos));
	if (pos == LP_NONE)
		pos = l->bytes;
	if (lp_insert(lpp, pos, m, len) == LP_NONE)
		return -ENOMEM;
	if (lp_insert(lpp, lp_next(*lpp, pos) != LP_NONE ? lp_next(*lpp, pos) : (*lpp)->bytes, b,
		      zl_score_put(b, score)) == LP_NONE) {
		lp_delete(lpp, pos, 1);
		return -ENOMEM;
	}
	return 0;
}

/* ---- skiplist ---- */

static bool
node_eq(const struct kd_node *n, const void *key, size_t len)
{
	const struct zs_node *z = (const struct zs_node *)n;

	return z->mlen == len && memcmp(zs_member(z), key, len) == 0;
}

static struct zs_node *
zs_find(struct kv_zset *z, const char *m, size_t len)
{
	return (struct zs_node *)kd_find(&z->d, kv_hash(m, len), m, len, node_eq);
}

static struct kv_zset *
zs_new(size_t hint)
{
	struct kv_zset *z = kv_malloc(sizeof(*z));

	if (z == NULL)
		return NULL;
	kd_init(&z->d);
	if (zsl_init(&z->zsl) != 0 || kd_expand(&z->d, hint) != 0) {
		zsl_fini(&z->zsl);
		kv_free(z);
		return NULL;
	}
	return z;
}

static int
zs_insert(struct kv_zset *z, double score, const char *m, size_t len)
{
	struct zs_node *n = zsl_node_new(score, m, len, &level_rng);

	if (n == NULL)
		return -ENOMEM;
	n->dn.hash = kv_hash(m, len);
	if (kd_add(&z->d, &n->dn) != 0) {
		kv_free(n);
		return -ENOMEM;
	}
	zsl_link(&z->zsl, n);
	return 0;
}

static void
zs_remove(struct kv_zset *z, struct zs_node *n)
{
	zsl_unlink(&z->zsl, n);
	kd_unlink(&z->d, &n->dn);
	kv_free(n);
}

static void
node_free(struct kd_node *n)
{
	kv_free(n);
}

/* ---- the type ---- */

void *
zset_new(size_t size, size_t maxlen, unsigned *enc)
{
	if (size <= KV_ZSET_MAX_LISTPACK_ENTRIES && maxlen <= KV_ZSET_MAX_LISTPACK_VALUE) {
		*enc = KV_ENC_LISTPACK;
		return lp_new();
	}
	*enc = KV_ENC_SKIPLIST;
	return zs_new(size);
}

void
zset_free(unsigned enc, void *obj)
{
	unsigned budget = ~0u;

	while (!zset_free_some(enc, obj, &budget))
		budget = ~0u;
}

bool
zset_free_some(unsigned enc, void *obj, unsigned *budget)
{
	struct kv_zset *z = obj;

	if (enc == KV_ENC_LISTPACK) {
		lp_free(obj);
		(*budget)--;
		return true;
	}
	/* The table's nodes are the skiplist's: freeing them frees both. */
	if (!kd_drain(&z->d, node_free, budget))
		return false;
	zsl_fini(&z->zsl);
	kv_free(z);
	return true;
}

size_t
zset_mem(unsigned enc, const void *obj)
{
	const struct kv_zset *z = obj;
	const struct zs_node *n;
	size_t t;

	if (enc == KV_ENC_LISTPACK)
		return lp_mem(obj);
	t = kv_mem_size(z) + kd_mem(&z->d) + kv_mem_size(z->zsl.header);
	for (n = z->zsl.header->lvl[0].forward; n != NULL; n = n->lvl[0].forward)
		t += kv_mem_size(n);
	return t;
}

size_t
zset_len(const struct kv_entry *e)
{
	if (e->enc == KV_ENC_LISTPACK)
		return ((const struct lp *)e->obj)->count / 2;
	return ((const struct kv_zset *)e->obj)->zsl.length;
}

static int
to_skiplist(struct kv_entry *e)
{
	struct lp *l = e->obj;
	struct kv_zset *z = zs_new(l->count / 2 + 1);
	uint32_t pos;

	if (z == NULL)
		return -ENOMEM;
	for (pos = lp_first(l); pos != LP_NONE; pos = lp_next(l, lp_next(l, pos))) {
		size_t len;
		const unsigned char *m = lp_get(l, pos, &len);

		if (zs_insert(z, zl_score(l, pos), (const char *)m, len) != 0) {
			zset_free(KV_ENC_SKIPLIST, z);
			return -ENOMEM;
		}
	}
	lp_free(l);
	e->obj = z;
	e->enc = KV_ENC_SKIPLIST;
	return 0;
}

void
zset_shrink_encoding(struct kv_entry *e, size_t maxlen)
{
	struct kv_zset *z = e->obj;
	struct zs_node *n;
	struct lp *l;

	if (e->enc != KV_ENC_SKIPLIST || z->zsl.length > KV_ZSET_MAX_LISTPACK_ENTRIES ||
	    maxlen > KV_ZSET_MAX_LISTPACK_VALUE)
		return;
	l = lp_new();
	if (l == NULL)
		return;
	for (n = z->zsl.header->lvl[0].forward; n != NULL; n = n->lvl[0].forward) {
		double s = n->score == 0 ? 0 : n->score;
		unsigned char b[ZL_SCORE_MAX];

		if (lp_append(&l, zs_member(n), n->mlen) == LP_NONE ||
		    lp_append(&l, b, zl_score_put(b, s)) == LP_NONE) {
			lp_free(l);
			return; /* it stays a skiplist */
		}
	}
	zset_free(KV_ENC_SKIPLIST, z);
	e->obj = l;
	e->enc = KV_ENC_LISTPACK;
}

bool
zset_score(struct kv_entry *e, const char *m, size_t len, double *score)
{
	struct zs_node *n;

	if (e->enc == KV_ENC_LISTPACK)
		return zl_find(e->obj, m, len, score) != LP_NONE;
	n = zs_find(e->obj, m, len);
	if (n != NULL)
		*score = n->score;
	return n != NULL;
}

/* The score found exists: apply NX / INCR / GT / LT. @return 1 to go on with @p *score,
 * 0 NaN, 2 nothing to do. */
static int
existing(double cur, double *score, int in, int *out)
{
	if (in & ZADD_IN_NX) {
		*out |= ZADD_OUT_NOP;
		return 2;
	}
	if (in & ZADD_IN_INCR) {
		*score += cur;
		if (isnan(*score)) {
			*out |= ZADD_OUT_NAN;
			return 0;
		}
	}
	if (((in & ZADD_IN_LT) && *score >= cur) || ((in & ZADD_IN_GT) && *score <= cur)) {
		*out |= ZADD_OUT_NOP;
		return 2;
	}
	return 1;
}

static int
add_listpack(struct kv_entry *e, double score, const char *m, size_t len, int in, int *out,
	     double *newscore)
{
	struct lp *l = e->obj;
	double cur;
	uint32_t pos = zl_find(l, m, len, &cur);
	int r;

	if (pos != LP_NONE) {
		r = existing(cur, &score, in, out);
		if (r != 1)
			return r == 2 ? 1 : 0;
		if (newscore != NULL)
			*newscore = score;
		if (score != cur) {
			lp_delete(&l, pos, 2);
			e->obj = l;
			if (zl_insert(&l, score, m, len) != 0)
				return -ENOMEM;
			e->obj = l;
			*out |= ZADD_OUT_UPDATED;
		}
		return 1;
	}
	if (in & ZADD_IN_XX) {
		*out |= ZADD_OUT_NOP;
		return 1;
	}
	if (l->count / 2 + 1 > KV_ZSET_MAX_LISTPACK_ENTRIES || len > KV_ZSET_MAX_LISTPACK_VALUE)
		return to_skiplist(e) == 0 ? 2 : -ENOMEM; /* go on as a skiplist */
	if (zl_insert(&l, score, m, len) != 0)
		return -ENOMEM;
	e->obj = l;
	if (newscore != NULL)
		*newscore = score;
	*out |= ZADD_OUT_ADDED;
	return 1;
}

int
zset_add(struct kv_entry *e, double score, const char *m, size_t len, int in, int *out,
	 double *newscore)
{
	struct kv_zset *z;
	struct zs_node *n;
	int r;

	*out = 0;
	if (isnan(score)) {
		*out = ZADD_OUT_NAN;
		return 0;
	}
	if (e->enc == KV_ENC_LISTPACK) {
		r = add_listpack(e, score, m, len, in, out, newscore);
		if (r != 2)
			return r;
	}
	z = e->obj;
	n = zs_find(z, m, len);
	if (n != NULL) {
		r = existing(n->score, &score, in, out);
		if (r != 1)
			return r == 2 ? 1 : 0;
		if (newscore != NULL)
			*newscore = score;
		if (score != n->score) {
			zsl_update_score(&z->zsl, n, score);
			*out |= ZADD_OUT_UPDATED;
		}
		return 1;
	}
	if (in & ZADD_IN_XX) {
		*out |= ZADD_OUT_NOP;
		return 1;
	}
	if (zs_insert(z, score, m, len) != 0)
		return -ENOMEM;
	if (newscore != NULL)
		*newscore = score;
	*out |= ZADD_OUT_ADDED;
	return 1;
}

bool
zset_del(struct kv_entry *e, const char *m, size_t len)
{
	struct zs_node *n;

	if (e->enc == KV_ENC_LISTPACK) {
		struct lp *l = e->obj;
		uint32_t pos = zl_find(l, m, len, NULL);

		if (pos == LP_NONE)
			return false;
		lp_delete(&l, pos, 2);
		e->obj = l;
		return true;
	}
	n = zs_find(e->obj, m, len);
	if (n == NULL)
		return false;
	zs_remove(e->obj, n);
	kd_shrink_if_sparse(&((struct kv_zset *)e->obj)->d);
	return true;
}

bool
zset_rank(struct kv_entry *e, const char *m, size_t len, bool rev, unsigned long *rank,
	  double *score)
{
	unsigned long r, n = zset_len(e);

	if (e->enc == KV_ENC_LISTPACK) {
		struct lp *l = e->obj;
		uint32_t pos;

		for (r = 0, pos = lp_first(l); pos != LP_NONE;
		     pos = lp_next(l, lp_next(l, pos)), r++)
			if (lp_eq(l, pos, m, len))
				break;
		if (pos == LP_NONE)
			return false;
		*score = zl_score(l, pos);
	} else {
		struct kv_zset *z = e->obj;
		struct zs_node *node = zs_find(z, m, len);

		if (node == NULL)
			return false;
		r = zsl_rank(&z->zsl, node) - 1;
		*score = node->score;
	}
	*rank = rev ? n - 1 - r : r;
	return true;
}

/* ---- iteration ---- */

bool
zit_ok(const struct zit *it)
{
	return it->e->enc == KV_ENC_LISTPACK ? it->pos != LP_NONE : it->n != NULL;
}

bool
zit_rank(struct zit *it, struct kv_entry *e, unsigned long rank)
{
	it->e = e;
	if (e->enc == KV_ENC_LISTPACK)
		it->pos = lp_seek(e->obj, (long long)rank * 2);
	else
		it->n = zsl_by_rank(&((struct kv_zset *)e->obj)->zsl, rank + 1);
	return zit_ok(it);
}

void
zit_get(const struct zit *it, const char **m, size_t *len, double *score)
{
	if (it->e->enc == KV_ENC_LISTPACK) {
		*m = (const char *)lp_get(it->e->obj, it->pos, len);
		*score = zl_score(it->e->obj, it->pos);
	} else {
		*m = zs_member(it->n);
		*len = it->n->mlen;
		*score = it->n->score;
	}
}

bool
zit_step(struct zit *it, bool rev)
{
	if (it->e->enc == KV_ENC_LISTPACK) {
		struct lp *l = it->e->obj;

		if (rev)
			it->pos = it->pos == 0 ? LP_NONE : lp_prev(l, lp_prev(l, it->pos));
		else
			it->pos = lp_next(l, lp_next(l, it->pos));
	} else {
		it->n = rev ? it->n->backward : it->n->lvl[0].forward;
	}
	return zit_ok(it);
}

/* The first member for which @p in says true (walking forward), or the last one (rev). */
static void
zl_seek(struct zit *it, bool rev, bool (*in)(const struct lp *l, uint32_t pos, const void *r),
	const void *r)
{
	struct lp *l = it->e->obj;
	uint32_t pos;

	it->pos = LP_NONE;
	if (!rev) {
		for (pos = lp_first(l); pos != LP_NONE; pos = lp_next(l, lp_next(l, pos)))
			if (in(l, pos, r)) {
				it->pos = pos;
				return;
			}
		return;
	}
	for (pos = l->count ? lp_prev(l, lp_last(l)) : LP_NONE; pos != LP_NONE;
	     pos = pos == 0 ? LP_NONE : lp_prev(l, lp_prev(l, pos)))
		if (in(l, pos, r)) {
			it->pos = pos;
			return;
		}
}

static bool
zl_gte_min(const struct lp *l, uint32_t pos, const void *r)
{
	return zrange_gte_min(zl_score(l, pos), r);
}

static bool
zl_lte_max(const struct lp *l, uint32_t pos, const void *r)
{
	return zrange_lte_max(zl_score(l, pos), r);
}

static bool
zl_lex_gte(const struct lp *l, uint32_t pos, const void *r)
{
	size_t n;
	const unsigned char *p = lp_get(l, pos, &n);

	return zlex_gte_min((const char *)p, n, r);
}

static bool
zl_lex_lte(const struct lp *l, uint32_t pos, const void *r)
{
	size_t n;
	const unsigned char *p = lp_get(l, pos, &n);

	return zlex_lte_max((const char *)p, n, r);
}

bool
zit_score(struct zit *it, struct kv_entry *e, const struct zrange *r, bool rev)
{
	it->e = e;
	if (e->enc == KV_ENC_SKIPLIST) {
		struct zsl *z = &((struct kv_zset *)e->obj)->zsl;

		it->n = rev ? zsl_last_in_range(z, r) : zsl_first_in_range(z, r);
		return it->n != NULL;
	}
	if (zrange_empty(r)) {
		it->pos = LP_NONE;
		return false;
	}
	zl_seek(it, rev, rev ? zl_lte_max : zl_gte_min, r);
	if (it->pos != LP_NONE &&
	    !(rev ? zrange_gte_min : zrange_lte_max)(zl_score(e->obj, it->pos), r))
		it->pos = LP_NONE;
	return it->pos != LP_NONE;
}

bool
zit_lex(struct zit *it, struct kv_entry *e, const struct zlexrange *r, bool rev)
{
	it->e = e;
	if (e->enc == KV_ENC_SKIPLIST) {
		struct zsl *z = &((struct kv_zset *)e->obj)->zsl;

		it->n = rev ? zsl_last_in_lex(z, r) : zsl_first_in_lex(z, r);
		return it->n != NULL;
	}
	if (zlex_empty(r)) {
		it->pos = LP_NONE;
		return false;
	}
	zl_seek(it, rev, rev ? zl_lex_lte : zl_lex_gte, r);
	if (it->pos != LP_NONE && !(rev ? zl_lex_gte : zl_lex_lte)(e->obj, it->pos, r))
		it->pos = LP_NONE;
	return it->pos != LP_NONE;
}

/* ---- ranges ---- */

static unsigned long
del_from(struct kv_entry *e, struct zit *it, unsigned long limit,
	 bool (*still)(const struct zit *it, const void *r), const void *r)
{
	unsigned long n = 0;

	if (e->enc == KV_ENC_LISTPACK) {
		struct lp *l = e->obj;
		uint32_t start = it->pos;

		while (n < limit && zit_ok(it) && (still == NULL || still(it, r))) {
			n++;
			zit_step(it, false);
		}
		if (n > 0)
			lp_delete(&l, start, (uint32_t)(2 * n));
		e->obj = l;
		return n;
	}
	while (n < limit && it->n != NULL && (still == NULL || still(it, r))) {
		struct zs_node *next = it->n->lvl[0].forward;

		zs_remove(e->obj, it->n);
		it->n = next;
		n++;
	}
	kd_shrink_if_sparse(&((struct kv_zset *)e->obj)->d);
	return n;
}

static bool
still_score(const struct zit *it, const void *r)
{
	const char *m;
	size_t len;
	double s;

	zit_get(it, &m, &len, &s);
	return zrange_lte_max(s, r);
}

static bool
still_lex(const struct zit *it, const void *r)
{
	const char *m;
	size_t len;
	double s;

	zit_get(it, &m, &len, &s);
	return zlex_lte_max(m, len, r);
}

unsigned long
zset_del_ranks(struct kv_entry *e, unsigned long start, unsigned long end)
{
	struct zit it;

	if (!zit_rank(&it, e, start))
		return 0;
	return del_from(e, &it, end - start + 1, NULL, NULL);
}

unsigned long
zset_del_score(struct kv_entry *e, const struct zrange *r)
{
	struct zit it;

	if (!zit_score(&it, e, r, false))
		return 0;
	return del_from(e, &it, ~0ul, still_score, r);
}

unsigned long
zset_del_lex(struct kv_entry *e, const struct zlexrange *r)
{
	struct zit it;

	if (!zit_lex(&it, e, r, false))
		return 0;
	return del_from(e, &it, ~0ul, still_lex, r);
}

/* Members from the iterator's place while @p still holds. */
static unsigned long
count_from(struct zit *it, bool (*still)(const struct zit *it, const void *r), const void *r)
{
	unsigned long n = 0;

	while (zit_ok(it) && still(it, r)) {
		n++;
		zit_step(it, false);
	}
	return n;
}

unsigned long
zset_count_score(struct kv_entry *e, const struct zrange *r)
{
	struct zit it, last;

	if (!zit_score(&it, e, r, false))
		return 0;
	if (e->enc == KV_ENC_SKIPLIST) {
		struct zsl *z = &((struct kv_zset *)e->obj)->zsl;

		zit_score(&last, e, r, true);
		return zsl_rank(z, last.n) - zsl_rank(z, it.n) + 1;
	}
	return count_from(&it, still_score, r);
}

unsigned long
zset_count_lex(struct kv_entry *e, const struct zlexrange *r)
{
	struct zit it, last;

	if (!zit_lex(&it, e, r, false))
		return 0;
	if (e->enc == KV_ENC_SKIPLIST) {
		struct zsl *z = &((struct kv_zset *)e->obj)->zsl;

		zit_lex(&last, e, r, true);
		return zsl_rank(z, last.n) - zsl_rank(z, it.n) + 1;
	}
	return count_from(&it, still_lex, r);
}
