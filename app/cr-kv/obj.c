/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Type and encoding names, and freeing any collection by its type (see obj.h).
 */
#include <stdlib.h>

#include "obj.h"
#include "t_hash.h"
#include "t_list.h"
#include "t_set.h"
#include "t_zset.h"

static const char *const type_names[KV_T_COUNT] = {
    [KV_T_STRING] = "string", [KV_T_LIST] = "list", [KV_T_SET] = "set",
    [KV_T_ZSET] = "zset",     [KV_T_HASH] = "hash",
};

static const char *const enc_names[KV_ENC_COUNT] = {
    [KV_ENC_RAW] = "raw",	    [KV_ENC_INT] = "int",
    [KV_ENC_EMBSTR] = "embstr",	    [KV_ENC_QUICKLIST] = "quicklist",
    [KV_ENC_INTSET] = "intset",	    [KV_ENC_HASHTABLE] = "hashtable",
    [KV_ENC_LISTPACK] = "listpack", [KV_ENC_SKIPLIST] = "skiplist",
};

const char *
kv_type_name(unsigned type)
{
	return type < KV_T_COUNT ? type_names[type] : "unknown";
}

const char *
kv_enc_name(unsigned enc)
{
	return enc < KV_ENC_COUNT ? enc_names[enc] : "unknown";
}

size_t
kv_obj_elements(unsigned type, unsigned enc, const void *obj)
{
	struct kv_entry e = {.type = type & 0xf, .enc = enc & 0xf, .obj = (void *)obj};

	switch (type) {
	case KV_T_LIST:
		return ((const struct kv_qlist *)obj)->count;
	case KV_T_SET:
		return set_len(&e);
	case KV_T_ZSET:
		return zset_len(&e);
	case KV_T_HASH:
		return hash_len(&e);
	default:
		return 1;
	}
}

void
kv_obj_free(unsigned type, unsigned enc, void *obj)
{
	switch (type) {
	case KV_T_LIST:
		ql_free(obj);
		break;
	case KV_T_SET:
		set_free(enc, obj);
		break;
	case KV_T_ZSET:
		zset_free(enc, obj);
		break;
	case KV_T_HASH:
		hash_free(enc, obj);
		break;
	default:
		break;
	}
}

bool
kv_obj_free_some(unsigned type, unsigned enc, void *obj, unsigned *budget)
{
	switch (type) {
	case KV_T_LIST:
		return ql_free_some(obj, budget);
	case KV_T_SET:
		return set_free_some(enc, obj, budget);
	case KV_T_ZSET:
		return zset_free_some(enc, obj, budget);
	case KV_T_HASH:
		return hash_free_some(enc, obj, budget);
	default:
		return true;
	}
}

size_t
kv_obj_mem(unsigned type, unsigned enc, const void *obj)
{
	switch (type) {
	case KV_T_LIST:
		return ql_mem(obj);
	case KV_T_SET:
		return set_mem(enc, obj);
	case KV_T_ZSET:
		return zset_mem(enc, obj);
	case KV_T_HASH:
		return hash_mem(enc, obj);
	default:
		return 0;
	}
}
