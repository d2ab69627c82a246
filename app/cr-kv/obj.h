/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Value types and their encodings, with Redis 7.0's names (TYPE, OBJECT ENCODING) and
 * conversion thresholds, and what the store needs to free any value.
 *
 * A string is the entry's own bytes (store.h). A collection is an object the entry points
 * to, whose layout its encoding says:
 *   list  quicklist  struct kv_qlist (t_list.c): nodes of compact lists (lp.h)
 *   set   intset     struct kv_intset (intset.h)    hashtable  struct kv_set (t_set.c)
 *   zset  listpack   struct lp, member and score    skiplist   struct kv_zset (t_zset.c)
 *   hash  listpack   struct lp, field and value     hashtable  struct kv_hash (t_hash.c)
 */
#ifndef CR_KV_OBJ_H
#define CR_KV_OBJ_H

#include <stdbool.h>
#include <stddef.h>

enum kv_type { KV_T_STRING = 0, KV_T_LIST, KV_T_SET, KV_T_ZSET, KV_T_HASH, KV_T_COUNT };

enum kv_enc {
	KV_ENC_RAW = 0,
	KV_ENC_INT,
	KV_ENC_EMBSTR,
	KV_ENC_QUICKLIST,
	KV_ENC_INTSET,
	KV_ENC_HASHTABLE,
	KV_ENC_LISTPACK,
	KV_ENC_SKIPLIST,
	KV_ENC_COUNT
};

/* Redis 7.0's defaults. */
#define KV_HASH_MAX_LISTPACK_ENTRIES 512u
#define KV_HASH_MAX_LISTPACK_VALUE   64u
#define KV_ZSET_MAX_LISTPACK_ENTRIES 128u
#define KV_ZSET_MAX_LISTPACK_VALUE   64u
#define KV_SET_MAX_INTSET_ENTRIES    512u
#define KV_LIST_NODE_BYTES	     8192u /* list-max-listpack-size -2 */
#define KV_EMBSTR_MAX		     44u
/* A value with more elements than this is freed lazily (Redis's LAZYFREE_THRESHOLD). */
#define KV_LAZYFREE_THRESHOLD 64u

const char *kv_type_name(unsigned type);
const char *kv_enc_name(unsigned enc);

/* Elements of a collection (1 for a string). */
size_t kv_obj_elements(unsigned type, unsigned enc, const void *obj);
void kv_obj_free(unsigned type, unsigned enc, void *obj);
/* Free about *budget elements of @p obj (less what it used); true once all of it is
 * freed, obj included. */
bool kv_obj_free_some(unsigned type, unsigned enc, void *obj, unsigned *budget);
/* What a collection takes (a walk: for MEMORY USAGE and tests). */
size_t kv_obj_mem(unsigned type, unsigned enc, const void *obj);

#endif /* CR_KV_OBJ_H */
