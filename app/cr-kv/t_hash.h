/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Hashes: field -> value, as a listpack (struct lp: field, value, field, value... in
 * insertion order) up to 512 fields of at most 64 bytes each, then a hashtable (struct
 * kv_hash) for good, as Redis 7.0 converts (hash-max-listpack-entries/-value). Functions
 * take the key's entry, whose encoding and object they update on conversion.
 */
#ifndef CR_KV_T_HASH_H
#define CR_KV_T_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kdict.h"
#include "store.h"

struct kv_hash {
	struct kdict d; /* of struct kv_hfield */
};

struct kv_hfield {
	struct kd_node node;
	uint32_t flen, vlen;
	char data[]; /* field, NUL, value, NUL */
};

/* A new empty hash (listpack); NULL on ENOMEM. */
void *hash_new(void);
void hash_free(unsigned enc, void *obj);
bool hash_free_some(unsigned enc, void *obj, unsigned *budget);
size_t hash_len(const struct kv_entry *e);

bool hash_get(struct kv_entry *e, const char *f, size_t flen, const char **v, size_t *vlen);
/* Set a field. @return 1 (new field), 0 (updated) or -ENOMEM. */
int hash_set(struct kv_entry *e, const char *f, size_t flen, const char *v, size_t vlen);
bool hash_del(struct kv_entry *e, const char *f, size_t flen);
/* Convert to a hashtable now if any of these lengths exceeds the listpack's limit (Redis
 * checks all of a command's arguments first). @return 0 or -ENOMEM. */
int hash_convert_for(struct kv_entry *e, const size_t *lens, size_t n);

struct hash_iter {
	struct kv_entry *e;
	uint32_t pos;
	struct kd_iter it;
};
void hash_iter_init(struct hash_iter *it, struct kv_entry *e);
bool hash_iter_next(struct hash_iter *it, const char **f, size_t *flen, const char **v,
		    size_t *vlen);
void hash_iter_end(struct hash_iter *it);

/* A field chosen at random. */
void hash_random(struct kv_entry *e, uint64_t *rng, const char **f, size_t *flen, const char **v,
		 size_t *vlen);

/* HSCAN's step: every field at once for a listpack (cursor 0 back), else kd_scan(). */
uint64_t hash_scan(struct kv_entry *e, uint64_t cursor,
		   void (*fn)(const char *f, size_t flen, const char *v, size_t vlen, void *arg),
		   void *arg);

/* What the hash takes (MEMORY USAGE, tests). */
size_t hash_mem(unsigned enc, const void *obj);

#endif /* CR_KV_T_HASH_H */
