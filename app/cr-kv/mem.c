/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The keyspace allocator (see mem.h): malloc with a per-thread charge.
 */
#include <malloc.h>
#include <stdlib.h>

#include "mem.h"

/* glibc: an in-use chunk is its usable size plus the size word before it. */
#define CHUNK_HEADER 8u

/* NULL: charged to nobody (a thread with no shard bound). */
static __thread struct kv_mem *cur;

void
kv_mem_bind(struct kv_mem *m)
{
	cur = m;
}

struct kv_mem *
kv_mem_swap(struct kv_mem *m)
{
	struct kv_mem *prev = cur;

	kv_mem_bind(m);
	return prev;
}

/* Non-const: gcc takes a const pointer argument for a read of what a fresh, uninitialised
 * block holds (-Wmaybe-uninitialized); malloc_usable_size() reads only the chunk header. */
static size_t
chunk_size(void *p)
{
	return p != NULL ? malloc_usable_size(p) + CHUNK_HEADER : 0;
}

size_t
kv_mem_size(const void *p)
{
	return chunk_size((void *)p);
}

size_t
kv_mem_usable(const void *p)
{
	return p != NULL ? malloc_usable_size((void *)p) : 0;
}

static void
charge(int64_t n)
{
	int64_t u;

	if (cur == NULL)
		return;
	u = atomic_load_explicit(&cur->used, memory_order_relaxed);

	/* relaxed: the bound thread is the only writer; readers want a recent figure only */
	atomic_store_explicit(&cur->used, u + n, memory_order_relaxed);
}

void *
kv_malloc(size_t n)
{
	void *p = malloc(n);

	if (p != NULL)
		charge((int64_t)chunk_size(p));
	return p;
}

void *
kv_calloc(size_t n, size_t size)
{
	void *p = calloc(n, size);

	if (p != NULL)
		charge((int64_t)chunk_size(p));
	return p;
}

void *
kv_realloc(void *p, size_t n)
{
	size_t old = chunk_size(p);
	void *q = realloc(p, n);

	if (q != NULL)
		charge((int64_t)chunk_size(q) - (int64_t)old);
	return q;
}

void
kv_free(void *p)
{
	if (p == NULL)
		return;
	charge(-(int64_t)chunk_size(p));
	free(p);
}

/*
 * glibc keeps freed small blocks in "fastbins" and merges them all at once, in free(), the
 * next time a block of 64 KiB or more is freed in that arena (malloc_consolidate()): after
 * a lazy free of a few million small nodes that one free() walks every one of them, a
 * stall of seconds. Freeing such a block right after each bounded step makes each merge
 * cover only that step's blocks. Only the calling thread's arena: blocks of another
 * arena (a moved shard's, allocated on its home lcore) are merged there (kv.md).
 */
void
kv_mem_settle(void)
{
	/* volatile: gcc removes a malloc() whose block is only freed (-O1 and up), and with
	 * it the merge */
	void *volatile p = malloc(64u * 1024);

	free(p);
}
