/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Sorted sets: a listpack of (member, score) pairs in (score, member) order up to 128
 * members of at most 64 bytes (zset-max-listpack-entries/-value), else a skiplist with a
 * table from member to node (struct kv_zset), as Redis 7.0. A zit (iterator) walks
 * either encoding in order or in reverse from a rank, a score or a member bound.
 */
#ifndef CR_KV_T_ZSET_H
#define CR_KV_T_ZSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"
#include "zskiplist.h"

struct kv_zset {
	struct kdict d; /* struct zs_node by member */
	struct zsl zsl;
};

#define ZADD_IN_INCR 0x1
#define ZADD_IN_NX   0x2
#define ZADD_IN_XX   0x4
#define ZADD_IN_GT   0x8
#define ZADD_IN_LT   0x10

#define ZADD_OUT_NOP	 0x1
#define ZADD_OUT_NAN	 0x2
#define ZADD_OUT_ADDED	 0x4
#define ZADD_OUT_UPDATED 0x8

/* A new empty sorted set in the encoding Redis's zsetTypeCreate() picks for @p size
 * members of which the longest is @p maxlen bytes. NULL on ENOMEM. */
void *zset_new(size_t size, size_t maxlen, unsigned *enc);
void zset_free(unsigned enc, void *obj);
bool zset_free_some(unsigned enc, void *obj, unsigned *budget);
size_t zset_mem(unsigned enc, const void *obj);
size_t zset_len(const struct kv_entry *e);

bool zset_score(struct kv_entry *e, const char *m, size_t len, double *score);
/* Redis's zsetAdd(). @return 1 done (see *out), 0 the score would be NaN, -ENOMEM. */
int zset_add(struct kv_entry *e, double score, const char *m, size_t len, int in, int *out,
	     double *newscore);
bool zset_del(struct kv_entry *e, const char *m, size_t len);
/* 0-based rank from the lowest (or, @p rev, the highest) score. */
bool zset_rank(struct kv_entry *e, const char *m, size_t len, bool rev, unsigned long *rank,
	       double *score);
/* Back to a listpack if it is small enough (what Redis does to a *STORE result). */
void zset_shrink_encoding(struct kv_entry *e, size_t maxlen);

struct zit {
	struct kv_entry *e;
	uint32_t pos;	   /* listpack: the member's entry, LP_NONE past the end */
	struct zs_node *n; /* skiplist: NULL past the end */
};

bool zit_rank(struct zit *it, struct kv_entry *e, unsigned long rank);
/* The first (or, @p rev, the last) member in the range. */
bool zit_score(struct zit *it, struct kv_entry *e, const struct zrange *r, bool rev);
bool zit_lex(struct zit *it, struct kv_entry *e, const struct zlexrange *r, bool rev);
bool zit_ok(const struct zit *it);
void zit_get(const struct zit *it, const char **m, size_t *len, double *score);
/* The next member (or, @p rev, the previous one). */
bool zit_step(struct zit *it, bool rev);

/* Delete the members of ranks [start, end] (0-based, within the set). */
unsigned long zset_del_ranks(struct kv_entry *e, unsigned long start, unsigned long end);
unsigned long zset_del_score(struct kv_entry *e, const struct zrange *r);
unsigned long zset_del_lex(struct kv_entry *e, const struct zlexrange *r);
unsigned long zset_count_score(struct kv_entry *e, const struct zrange *r);
unsigned long zset_count_lex(struct kv_entry *e, const struct zlexrange *r);

#endif /* CR_KV_T_ZSET_H */
