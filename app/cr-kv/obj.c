/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Type and encoding names, and freeing any collection by its type (see obj.h).
 */
#include <stdlib.h>

#include "obj.h"

static const char *const type_names[KV_T_COUNT] = {
    [KV_T_STRING] = "string", [KV_T_LIST] = "list", [KV_T_SET] = "set",
    [KV_T_ZSET] = "zset",     [KV_T_HASH] = "hash",
};

static const char *const enc_names[KV_ENC_COUNT] = {
    [KV_ENC_RAW] = "raw",	    [KV_ENC_INT] = "int",	  [KV_ENC_EMBSTR] = "embstr",
    [KV_ENC_QUICKLIST] = "quicklist", [KV_ENC_INTSET] = "intset",
    [KV_ENC_HASHTABLE] = "hashtable", [KV_ENC_LISTPACK] = "listpack",
    [KV_ENC_SKIPLIST] = "skiplist",
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
	(void)type;
	(void)enc;
	(void)obj;
	return 1;
}

void
kv_obj_free(unsigned type, unsigned enc, void *obj)
{
	(void)type;
	(void)enc;
	(void)obj;
	abort(); /* no collection type yet */
}

bool
kv_obj_free_some(unsigned type, unsigned enc, void *obj, unsigned *budget)
{
	kv_obj_free(type, enc, obj);
	(*budget)--;
	return true;
}
