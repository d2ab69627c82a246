/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The skiplist of a big sorted set (after W. Pugh, "Skip lists: a probabilistic
 * alternative to balanced trees", 1990, with the spans Redis adds for ranks): nodes in
 * (score, member) order, each with 1 to 32 levels (a level more with probability 1/4);
 * every forward link records how many nodes it skips, so a rank is found in O(log n).
 *
 * A node is also the member's node in the sorted set's table (struct kd_node first), so
 * a member costs one allocation: the node, its levels and its bytes.
 */
#ifndef CR_KV_ZSKIPLIST_H
#define CR_KV_ZSKIPLIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kdict.h"

#define ZSL_MAXLEVEL 32

struct zs_node {
	struct kd_node dn; /* in the sorted set's table, by member */
	double score;
	struct zs_node *backward;
	uint32_t mlen;
	uint8_t level;
	struct zs_level {
		struct zs_node *forward;
		unsigned long span;
	} lvl[]; /* level of them, then the member's mlen bytes and a NUL */
};

struct zsl {
	struct zs_node *header, *tail;
	unsigned long length;
	int level;
};

static inline const char *
zs_member(const struct zs_node *n)
{
	return (const char *)&n->lvl[n->level];
}

/* A score range: [min, max], either end exclusive. */
struct zrange {
	double min, max;
	bool minex, maxex;
};

/* A member range for BYLEX: each end a string (inclusive or not), or "-" (before every
 * string) or "+" (after every string), as Redis parses them. */
enum { ZLEX_STR = 0, ZLEX_MINUS = -1, ZLEX_PLUS = 1 };
struct zlexrange {
	const char *min, *max;
	size_t minlen, maxlen;
	bool minex, maxex;
	int minkind, maxkind; /* ZLEX_* */
};

int zsl_init(struct zsl *z);
void zsl_fini(struct zsl *z); /* frees the header only: the table owns the nodes */

/* Redis's sdscmp(): bytes, then the shorter first. */
int zs_cmp(const char *a, size_t alen, const char *b, size_t blen);

/* A new node (not linked) with a random level; NULL on ENOMEM. */
struct zs_node *zsl_node_new(double score, const char *m, size_t len, uint64_t *rng);
void zsl_link(struct zsl *z, struct zs_node *n);
void zsl_unlink(struct zsl *z, struct zs_node *n);
/* Move @p n to @p score (in place when its order does not change). */
void zsl_update_score(struct zsl *z, struct zs_node *n, double score);

/* 1-based rank of @p n, which is in the list. */
unsigned long zsl_rank(const struct zsl *z, const struct zs_node *n);
/* The node of 1-based @p rank, or NULL. */
struct zs_node *zsl_by_rank(const struct zsl *z, unsigned long rank);

bool zrange_gte_min(double v, const struct zrange *r);
bool zrange_lte_max(double v, const struct zrange *r);
bool zlex_gte_min(const char *m, size_t len, const struct zlexrange *r);
bool zlex_lte_max(const char *m, size_t len, const struct zlexrange *r);
bool zrange_empty(const struct zrange *r);
bool zlex_empty(const struct zlexrange *r);

/* The first / last node in the range, or NULL. */
struct zs_node *zsl_first_in_range(const struct zsl *z, const struct zrange *r);
struct zs_node *zsl_last_in_range(const struct zsl *z, const struct zrange *r);
struct zs_node *zsl_first_in_lex(const struct zsl *z, const struct zlexrange *r);
struct zs_node *zsl_last_in_lex(const struct zsl *z, const struct zlexrange *r);

#endif /* CR_KV_ZSKIPLIST_H */
