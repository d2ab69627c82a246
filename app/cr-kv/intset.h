/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A sorted array of distinct integers, each 2, 4 or 8 bytes wide as the largest one
 * needs (the whole array widens when a wider one arrives): the compact encoding of a set
 * whose members are all integers (Redis's intset, up to set-max-intset-entries). Lookups
 * are binary searches.
 */
#ifndef CR_KV_INTSET_H
#define CR_KV_INTSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kv_intset {
	uint32_t width; /* bytes per member: 2, 4 or 8 */
	uint32_t len;
	unsigned char data[];
};

struct kv_intset *intset_new(void);
void intset_free(struct kv_intset *is);
size_t intset_mem(const struct kv_intset *is);

/* Add @p v; *added says whether it was new. *isp may move. @return 0 or -ENOMEM. */
int intset_add(struct kv_intset **isp, int64_t v, bool *added);
/* Remove @p v; @return whether it was there. */
bool intset_remove(struct kv_intset **isp, int64_t v);
bool intset_find(const struct kv_intset *is, int64_t v);
int64_t intset_get(const struct kv_intset *is, uint32_t i);

/* Redis's string2ll() accepts it and it is a set member an intset can hold. */
bool intset_parse(const char *s, size_t len, int64_t *v);

#endif /* CR_KV_INTSET_H */
