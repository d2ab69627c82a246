/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A compact list of byte strings in one block, in the manner of Redis's listpack (our own
 * layout, not Redis's bytes): small hashes (field, value, field, value...), small sorted
 * sets (member, score...) and the nodes of lists are one of these, so a small collection
 * costs one allocation and a few bytes per element instead of a node and a pointer each.
 *
 * An entry is its length as a LEB128 varint, its bytes, and then its own size (varint and
 * bytes) written so that it reads backwards from the entry's end: the list can be walked
 * both ways. Positions are byte offsets into the data; LP_NONE means "no entry".
 * Insertions and deletions move the bytes after them and resize the block, which is why
 * these lists are kept short (obj.h's thresholds).
 */
#ifndef CR_KV_LP_H
#define CR_KV_LP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct lp {
	uint32_t bytes; /* of data[] */
	uint32_t count; /* entries */
	unsigned char data[];
};

#define LP_NONE UINT32_MAX

struct lp *lp_new(void);
void lp_free(struct lp *l);
/* What the block takes, as mem.h charges it. */
size_t lp_mem(const struct lp *l);
/* Bytes an entry of @p len takes. */
size_t lp_entry_size(size_t len);

uint32_t lp_first(const struct lp *l);
uint32_t lp_last(const struct lp *l);
uint32_t lp_next(const struct lp *l, uint32_t pos);
uint32_t lp_prev(const struct lp *l, uint32_t pos);
/* The entry at @p index (negative: from the end, -1 the last), or LP_NONE. */
uint32_t lp_seek(const struct lp *l, long long index);
/* The bytes of the entry at @p pos (not NUL-terminated). */
const unsigned char *lp_get(const struct lp *l, uint32_t pos, size_t *len);
bool lp_eq(const struct lp *l, uint32_t pos, const void *s, size_t len);

/* From @p pos, the first entry equal to (@p s, @p len), stepping over @p skip entries
 * after each one compared (1 for hash fields); LP_NONE if none. */
uint32_t lp_find(const struct lp *l, uint32_t pos, const void *s, size_t len, unsigned skip);

/* Insert before @p pos (l->bytes: at the end). *lp may move. @return the position of the
 * new entry, or LP_NONE (ENOMEM: nothing changed). */
uint32_t lp_insert(struct lp **lp, uint32_t pos, const void *s, size_t len);
uint32_t lp_append(struct lp **lp, const void *s, size_t len);
/* Replace the entry at @p pos. @return its position, or LP_NONE (ENOMEM). */
uint32_t lp_replace(struct lp **lp, uint32_t pos, const void *s, size_t len);
/* Delete @p n entries from @p pos (fewer if the list ends first). *lp may move. */
void lp_delete(struct lp **lp, uint32_t pos, uint32_t n);

#endif /* CR_KV_LP_H */
