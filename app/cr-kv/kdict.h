/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An intrusive chained hash table with incremental rehashing, for the keyspace and for
 * the big encodings of hashes, sets and sorted sets. The caller embeds a struct kd_node
 * in its own objects and says how a node is compared with a key (kd_eq_fn); the table
 * stores no keys and allocates only its bucket arrays.
 *
 * Growing or shrinking never stalls: a resize allocates the new bucket array and then
 * moves one bucket (skipping at most ten empty ones) per later lookup, insert or delete,
 * plus what the owner's periodic kd_rehash_for() moves, as Redis's dict does. While it
 * moves, both arrays are searched and inserts go to the new one. It grows when there are
 * as many nodes as buckets and shrinks when fewer than a tenth of the buckets are used.
 *
 * kd_scan() is Redis's reverse-binary cursor over both arrays: an element present from
 * the first call to the last is returned at least once, however the table is resized in
 * between. Iteration (kd_next()) and scans pause the moving for as long as they last.
 */
#ifndef CR_KV_KDICT_H
#define CR_KV_KDICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kd_node {
	struct kd_node *next;
	uint32_t hash; /* the low 32 bits of the key's hash (tables stay under 2^32 buckets) */
	uint32_t aux;  /* the owner's: the table never reads or writes it */
};

struct kdict {
	struct kd_node **t[2];
	uint64_t size[2]; /* buckets: a power of two, or 0 */
	uint64_t used[2];
	int64_t rehashidx; /* next bucket of t[0] to move, or -1 */
	unsigned paused;   /* iterations in progress: no moving */
	uint64_t probes;   /* nodes compared by kd_find(), for flood tests */
	uint64_t drain;	   /* kd_drain()'s place: a bucket index over both arrays */
};

/* Does @p n hold the key (@p key, @p len)? */
typedef bool (*kd_eq_fn)(const struct kd_node *n, const void *key, size_t len);

void kd_init(struct kdict *d);
/* Free the bucket arrays (not the nodes). */
void kd_release(struct kdict *d);

static inline uint64_t
kd_count(const struct kdict *d)
{
	return d->used[0] + d->used[1];
}

static inline bool
kd_rehashing(const struct kdict *d)
{
	return d->rehashidx != -1;
}

/* The node for a key, or NULL. Moves a bucket if a resize is under way. */
struct kd_node *kd_find(struct kdict *d, uint64_t h, const void *key, size_t len, kd_eq_fn eq);
/* Add @p n (its hash set, its key absent). @return 0, or -ENOMEM if the table had no
 * buckets and none could be allocated. */
int kd_add(struct kdict *d, struct kd_node *n);
/* Remove node @p n, which is in the table. */
void kd_unlink(struct kdict *d, struct kd_node *n);
/* Put @p n in place of @p old (same hash and key; old is no longer referred to). */
void kd_replace(struct kdict *d, struct kd_node *old, struct kd_node *n);

/* Make room for @p n nodes now (or start a resize to it). @return 0 or -ENOMEM. */
int kd_expand(struct kdict *d, uint64_t n);
/* Move up to @p n buckets of a resize. @return true if there is more to move. */
bool kd_rehash(struct kdict *d, unsigned n);
/* Move buckets for about @p ns nanoseconds (100 at a time). @return buckets moved. */
uint64_t kd_rehash_for(struct kdict *d, uint64_t ns);
/* Start a shrink if the table is sparse (the check after deletes). */
void kd_shrink_if_sparse(struct kdict *d);

/* Visit the bucket(s) at @p cursor and return the next cursor (0: done). */
uint64_t kd_scan(struct kdict *d, uint64_t cursor, void (*fn)(struct kd_node *n, void *arg),
		 void *arg);

/* A node chosen at random (each bucket alike, then each node of it), or NULL if empty. */
struct kd_node *kd_random(struct kdict *d, uint64_t *rng);

/* Iteration over every node: start with kd_iter_init(), kd_next() until NULL, then
 * kd_iter_end() (it resumes the moving). The table must not change in between, except
 * that the node just returned may be unlinked and freed. */
struct kd_iter {
	struct kdict *d;
	int table;
	uint64_t index;
	struct kd_node *next;
};
void kd_iter_init(struct kdict *d, struct kd_iter *it);
struct kd_node *kd_next(struct kd_iter *it);
void kd_iter_end(struct kd_iter *it);

/* Free up to *budget nodes with @p fn (less what it freed), bucket by bucket, resuming
 * where the last call stopped; true once every node and the arrays are freed. For a
 * table nothing else uses any more (a value being freed lazily). */
bool kd_drain(struct kdict *d, void (*fn)(struct kd_node *n), unsigned *budget);

/* Bytes the bucket arrays take (as mem.h charges them). */
size_t kd_mem(const struct kdict *d);

/* xorshift64* for random choices. */
uint64_t kd_rand(uint64_t *state);

#endif /* CR_KV_KDICT_H */
