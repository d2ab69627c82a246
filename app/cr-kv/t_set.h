/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Sets: an intset while every member is an integer and there are at most 512 of them
 * (set-max-intset-entries), then a hashtable of members (struct kv_set) for good, as in
 * Redis 7.0. Members are returned as bytes; an intset's are formatted into the caller's
 * buffer (struct set_buf).
 */
#ifndef CR_KV_T_SET_H
#define CR_KV_T_SET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kdict.h"
#include "store.h"

struct kv_set {
	struct kdict d; /* of struct kv_smember */
};

struct kv_smember {
	union {
		struct kd_node node;
		struct {
			char node_words_[12];
			uint32_t len; /* the node's aux word */
		};
	};
	char data[]; /* member, NUL */
};

struct set_buf {
	char b[24];
};

/* A new empty set in the encoding Redis gives one whose first member is (@p m, @p len):
 * an intset for an integer, else a hashtable. *enc says which. NULL on ENOMEM. */
void *set_new_for(const char *m, size_t len, unsigned *enc);
/* A new empty intset (what SINTERSTORE and friends start from). */
void *set_new_intset(void);
void set_free(unsigned enc, void *obj);
bool set_free_some(unsigned enc, void *obj, unsigned *budget);
size_t set_len(const struct kv_entry *e);
size_t set_mem(unsigned enc, const void *obj);

/* @return 1 added, 0 already there, -ENOMEM. */
int set_add(struct kv_entry *e, const char *m, size_t len);
bool set_rem(struct kv_entry *e, const char *m, size_t len);
bool set_has(struct kv_entry *e, const char *m, size_t len);

struct set_iter {
	struct kv_entry *e;
	uint32_t i;
	struct kd_iter it;
	struct set_buf buf;
};
void set_iter_init(struct set_iter *it, struct kv_entry *e);
bool set_iter_next(struct set_iter *it, const char **m, size_t *len);
void set_iter_end(struct set_iter *it);

/* A member chosen at random (into @p buf if it is an integer). */
void set_random(struct kv_entry *e, uint64_t *rng, struct set_buf *buf, const char **m,
		size_t *len);

/* SSCAN's step: all of an intset at once (cursor 0 back), else kd_scan(). */
uint64_t set_scan(struct kv_entry *e, uint64_t cursor,
		  void (*fn)(const char *m, size_t len, void *arg), void *arg);

#endif /* CR_KV_T_SET_H */
