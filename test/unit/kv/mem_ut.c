/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * app/cr-kv/mem.c's kv_mem_settle(), built with -O2 as a release build is: after a
 * bounded step frees many small blocks, it merges them (glibc's fastbins are empty), so
 * the next big free does not merge millions at once (lazyfree.c, evict.c).
 */
#include <malloc.h>
#include <stdlib.h>

#include "mem.h"
#include "ut_cunit.h"

#define NBLK 20000

/* Bytes in the fastbins of every arena (this thread's: the main one). */
static size_t
fastbin_bytes(void)
{
	return mallinfo2().fsmblks;
}

/* (Before: gcc -O2 compiled free(malloc(64 KiB)) to nothing, and 960,000 bytes stayed.) */
static void
test_settle_merges(void)
{
	static void *blk[NBLK];
	unsigned i;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	return; /* the sanitizer's allocator, not glibc's: no fastbins to look at */
#endif
	for (i = 0; i < NBLK; i++) {
		blk[i] = kv_malloc(40);
		CU_ASSERT_PTR_NOT_NULL_FATAL(blk[i]);
	}
	for (i = 0; i < NBLK; i++)
		kv_free(blk[i]);
	CU_ASSERT(fastbin_bytes() > NBLK / 2 * 40); /* what glibc keeps unmerged */
	kv_mem_settle();
	CU_ASSERT_EQUAL(fastbin_bytes(), 0);
}

static const struct ut_case cases[] = {
    UT_CASE(test_settle_merges),
};

UT_MAIN("kv_mem", cases, NULL, NULL)
