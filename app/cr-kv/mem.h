/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Memory of the keyspace. Every block that holds keys or values (entries, tables,
 * collections) comes from kv_malloc() and friends, which charge what the block takes
 * from the heap (malloc_usable_size() plus glibc's 8-byte chunk header) to a counter
 * bound to the calling thread: each lcore binds its shard's at start (kv_mem_bind()), so
 * a shard's figure is exact without a walk and costs one relaxed store per allocation.
 *
 * A counter belongs to its shard, not to an lcore: the lcore that owns the shard binds it
 * while it runs the shard's work (its home shard's by default, an adopted one's with
 * kv_mem_swap() around that shard's parts and duties). A shard has one owner at a time
 * and changes owner by message, so each counter has a single writer at a time. Blocks a
 * shard allocated on one lcore may be freed on another after the shard moved (glibc's
 * free() takes them from any thread); what travels between shards is copied.
 */
#ifndef CR_KV_MEM_H
#define CR_KV_MEM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct kv_mem {
	_Atomic int64_t used; /* written by the bound thread only; read by anyone */
};

/* Charge this thread's kv_malloc()s to @p m (NULL: to a counter nobody reads). */
void kv_mem_bind(struct kv_mem *m);
/* ... and return what was bound, to bind back: an lcore running a shard other than its
 * home one (an adopted shard, shardmove.c) charges that shard's counter meanwhile. */
struct kv_mem *kv_mem_swap(struct kv_mem *m);

void *kv_malloc(size_t n);
void *kv_calloc(size_t n, size_t size);
void *kv_realloc(void *p, size_t n);
void kv_free(void *p);
/* Have the allocator merge the small blocks freed since the last call (mem.c says why):
 * after each bounded step of freeing many of them. */
void kv_mem_settle(void);

/* What a block takes from the heap, as charged. */
size_t kv_mem_size(const void *p);
/* The bytes a block of kv_malloc() may use: at least what was asked. */
size_t kv_mem_usable(const void *p);

static inline int64_t
kv_mem_used(const struct kv_mem *m)
{
	/* relaxed: a statistic; pairs with the relaxed stores in mem.c */
	return atomic_load_explicit(&m->used, memory_order_relaxed);
}

#endif /* CR_KV_MEM_H */
