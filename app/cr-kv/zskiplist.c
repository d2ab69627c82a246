/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The skiplist (see zskiplist.h). Order is by score, then by member bytes; the header is
 * a node with every level and no member.
 */
#include <errno.h>
#include <string.h>

#include "mem.h"
#include "zskiplist.h"

int
zs_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);

	if (c != 0)
		return c;
	return alen < blen ? -1 : alen > blen ? 1 : 0;
}

static struct zs_node *
node_alloc(int level, size_t mlen)
{
	struct zs_node *n =
	    kv_malloc(sizeof(*n) + (size_t)level * sizeof(struct zs_level) + mlen + 1);

	if (n != NULL) {
		memset(n, 0, sizeof(*n) + (size_t)level * sizeof(struct zs_level));
		n->level = (uint8_t)level;
		n->mlen = (uint32_t)mlen;
	}
	return n;
}

int
zsl_init(struct zsl *z)
{
	z->header = node_alloc(ZSL_MAXLEVEL, 0);
	if (z->header == NULL)
		return -ENOMEM;
	z->tail = NULL;
	z->length = 0;
	z->level = 1;
	return 0;
}

void
zsl_fini(struct zsl *z)
{
	kv_free(z->header);
	z->header = NULL;
}

static int
random_level(uint64_t *rng)
{
	int level = 1;

	while (level < ZSL_MAXLEVEL && (kd_rand(rng) & 0xffff) < 0xffff / 4)
		level++;
	return level;
}

struct zs_node *
zsl_node_new(double score, const char *m, size_t len, uint64_t *rng)
{
	struct zs_node *n = node_alloc(random_level(rng), len);

	if (n == NULL)
		return NULL;
	n->score = score;
	memcpy((char *)zs_member(n), m, len);
	((char *)zs_member(n))[len] = '\0';
	return n;
}

/* Does @p x come before (score, m)? */
static bool
before(const struct zs_node *x, double score, const char *m, size_t len)
{
	return x->score < score || (x->score == score && zs_cmp(zs_member(x), x->mlen, m, len) < 0);
}

void
zsl_link(struct zsl *z, struct zs_node *n)
{
	struct zs_node *update[ZSL_MAXLEVEL], *x = z->header;
	unsigned long rank[ZSL_MAXLEVEL];
	const char *m = zs_member(n);
	int i;

	for (i = z->level - 1; i >= 0; i--) {
		rank[i] = i == z->level - 1 ? 0 : rank[i + 1];
		while (x->lvl[i].forward != NULL &&
		       before(x->lvl[i].forward, n->score, m, n->mlen)) {
			rank[i] += x->lvl[i].span;
			x = x->lvl[i].forward;
		}
		update[i] = x;
	}
	if (n->level > z->level) {
		for (i = z->level; i < n->level; i++) {
			rank[i] = 0;
			update[i] = z->header;
			update[i]->lvl[i].span = z->length;
		}
		z->level = n->level;
	}
	for (i = 0; i < n->level; i++) {
		n->lvl[i].forward = update[i]->lvl[i].forward;
		update[i]->lvl[i].forward = n;
		/* The span of the link we split is shared between the two halves. */
		n->lvl[i].span = update[i]->lvl[i].span - (rank[0] - rank[i]);
		update[i]->lvl[i].span = (rank[0] - rank[i]) + 1;
	}
	for (i = n->level; i < z->level; i++)
		update[i]->lvl[i].span++;
	n->backward = update[0] == z->header ? NULL : update[0];
	if (n->lvl[0].forward != NULL)
		n->lvl[0].forward->backward = n;
	else
		z->tail = n;
	z->length++;
}

void
zsl_unlink(struct zsl *z, struct zs_node *n)
{
	struct zs_node *update[ZSL_MAXLEVEL], *x = z->header;
	const char *m = zs_member(n);
	int i;

	for (i = z->level - 1; i >= 0; i--) {
		while (x->lvl[i].forward != NULL && x->lvl[i].forward != n &&
		       before(x->lvl[i].forward, n->score, m, n->mlen))
			x = x->lvl[i].forward;
		update[i] = x;
	}
	for (i = 0; i < z->level; i++) {
		if (update[i]->lvl[i].forward == n) {
			update[i]->lvl[i].span += n->lvl[i].span - 1;
			update[i]->lvl[i].forward = n->lvl[i].forward;
		} else {
			update[i]->lvl[i].span--;
		}
	}
	if (n->lvl[0].forward != NULL)
		n->lvl[0].forward->backward = n->backward;
	else
		z->tail = n->backward;
	while (z->level > 1 && z->header->lvl[z->level - 1].forward == NULL)
		z->level--;
	z->length--;
}

void
zsl_update_score(struct zsl *z, struct zs_node *n, double score)
{
	struct zs_node *prev = n->backward, *next = n->lvl[0].forward;
	const char *m = zs_member(n);

	/* Still between its neighbours: only the score changes. */
	if ((prev == NULL || before(prev, score, m, n->mlen)) &&
	    (next == NULL || !before(next, score, m, n->mlen))) {
		n->score = score;
		return;
	}
	zsl_unlink(z, n);
	n->score = score;
	zsl_link(z, n);
}

unsigned long
zsl_rank(const struct zsl *z, const struct zs_node *n)
{
	const struct zs_node *x = z->header;
	const char *m = zs_member(n);
	unsigned long rank = 0;
	int i;

	for (i = z->level - 1; i >= 0; i--) {
		while (
		    x->lvl[i].forward != NULL &&
		    (x->lvl[i].forward == n || before(x->lvl[i].forward, n->score, m, n->mlen))) {
			rank += x->lvl[i].span;
			x = x->lvl[i].forward;
			if (x == n)
				return rank;
		}
	}
	return 0;
}

struct zs_node *
zsl_by_rank(const struct zsl *z, unsigned long rank)
{
	struct zs_node *x = z->header;
	unsigned long traversed = 0;
	int i;

	for (i = z->level - 1; i >= 0; i--) {
		while (x->lvl[i].forward != NULL && traversed + x->lvl[i].span <= rank) {
			traversed += x->lvl[i].span;
			x = x->lvl[i].forward;
		}
		if (traversed == rank)
			return x == z->header ? NULL : x;
	}
	return NULL;
}

bool
zrange_gte_min(double v, const struct zrange *r)
{
	return r->minex ? v > r->min : v >= r->min;
}

bool
zrange_lte_max(double v, const struct zrange *r)
{
	return r->maxex ? v < r->max : v <= r->max;
}

bool
zrange_empty(const struct zrange *r)
{
	return r->min > r->max || (r->min == r->max && (r->minex || r->maxex));
}

/* Redis's sdscmplex(): a string against a range end, "-" and "+" included. */
static int
cmplex(int akind, const char *a, size_t alen, int bkind, const char *b, size_t blen)
{
	if (akind == bkind && akind != ZLEX_STR)
		return 0;
	if (akind == ZLEX_MINUS || bkind == ZLEX_PLUS)
		return -1;
	if (akind == ZLEX_PLUS || bkind == ZLEX_MINUS)
		return 1;
	return zs_cmp(a, alen, b, blen);
}

bool
zlex_gte_min(const char *m, size_t len, const struct zlexrange *r)
{
	int c = cmplex(ZLEX_STR, m, len, r->minkind, r->min, r->minlen);

	return r->minex ? c > 0 : c >= 0;
}

bool
zlex_lte_max(const char *m, size_t len, const struct zlexrange *r)
{
	int c = cmplex(ZLEX_STR, m, len, r->maxkind, r->max, r->maxlen);

	return r->maxex ? c < 0 : c <= 0;
}

bool
zlex_empty(const struct zlexrange *r)
{
	int c = cmplex(r->minkind, r->min, r->minlen, r->maxkind, r->max, r->maxlen);

	return c > 0 || (c == 0 && (r->minex || r->maxex));
}

struct zs_node *
zsl_first_in_range(const struct zsl *z, const struct zrange *r)
{
	struct zs_node *x = z->header;
	int i;

	if (zrange_empty(r) || z->tail == NULL || !zrange_gte_min(z->tail->score, r))
		return NULL;
	for (i = z->level - 1; i >= 0; i--)
		while (x->lvl[i].forward != NULL && !zrange_gte_min(x->lvl[i].forward->score, r))
			x = x->lvl[i].forward;
	x = x->lvl[0].forward;
	return x != NULL && zrange_lte_max(x->score, r) ? x : NULL;
}

struct zs_node *
zsl_last_in_range(const struct zsl *z, const struct zrange *r)
{
	struct zs_node *x = z->header;
	int i;

	if (zrange_empty(r) || z->header->lvl[0].forward == NULL ||
	    !zrange_lte_max(z->header->lvl[0].forward->score, r))
		return NULL;
	for (i = z->level - 1; i >= 0; i--)
		while (x->lvl[i].forward != NULL && zrange_lte_max(x->lvl[i].forward->score, r))
			x = x->lvl[i].forward;
	return x != z->header && zrange_gte_min(x->score, r) ? x : NULL;
}

struct zs_node *
zsl_first_in_lex(const struct zsl *z, const struct zlexrange *r)
{
	struct zs_node *x = z->header;
	int i;

	if (zlex_empty(r) || z->tail == NULL || !zlex_gte_min(zs_member(z->tail), z->tail->mlen, r))
		return NULL;
	for (i = z->level - 1; i >= 0; i--)
		while (x->lvl[i].forward != NULL &&
		       !zlex_gte_min(zs_member(x->lvl[i].forward), x->lvl[i].forward->mlen, r))
			x = x->lvl[i].forward;
	x = x->lvl[0].forward;
	return x != NULL && zlex_lte_max(zs_member(x), x->mlen, r) ? x : NULL;
}

struct zs_node *
zsl_last_in_lex(const struct zsl *z, const struct zlexrange *r)
{
	struct zs_node *x = z->header, *first = z->header->lvl[0].forward;
	int i;

	if (zlex_empty(r) || first == NULL || !zlex_lte_max(zs_member(first), first->mlen, r))
		return NULL;
	for (i = z->level - 1; i >= 0; i--)
		while (x->lvl[i].forward != NULL &&
		       zlex_lte_max(zs_member(x->lvl[i].forward), x->lvl[i].forward->mlen, r))
			x = x->lvl[i].forward;
	return x != z->header && zlex_gte_min(zs_member(x), x->mlen, r) ? x : NULL;
}
