/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The incrementally rehashed table (see kdict.h for the why).
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "kdict.h"
#include "mem.h"

#define MIN_SIZE     4u
#define EMPTY_VISITS 10u /* empty buckets a rehash step may skip per bucket moved */
#define MIN_FILL_PCT 10u

uint64_t
kd_rand(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545F4914F6CDD1DULL;
}

void
kd_init(struct kdict *d)
{
	memset(d, 0, sizeof(*d));
	d->rehashidx = -1;
}

void
kd_release(struct kdict *d)
{
	kv_free(d->t[0]);
	kv_free(d->t[1]);
	kd_init(d);
}

size_t
kd_mem(const struct kdict *d)
{
	return kv_mem_size(d->t[0]) + kv_mem_size(d->t[1]);
}

static uint64_t
pow2_at_least(uint64_t n)
{
	uint64_t s = MIN_SIZE;

	while (s < n && s < (1ULL << 62))
		s <<= 1;
	return s;
}

/* Start moving to a table of @p size buckets (or make the first one). */
static int
resize_to(struct kdict *d, uint64_t size)
{
	struct kd_node **t;

	if (kd_rehashing(d) || size == d->size[0])
		return 0;
	t = kv_calloc(size, sizeof(*t));
	if (t == NULL)
		return -ENOMEM;
	if (d->t[0] == NULL) {
		d->t[0] = t;
		d->size[0] = size;
		return 0;
	}
	d->t[1] = t;
	d->size[1] = size;
	d->used[1] = 0;
	d->rehashidx = 0;
	return 0;
}

int
kd_expand(struct kdict *d, uint64_t n)
{
	return resize_to(d, pow2_at_least(n));
}

bool
kd_rehash(struct kdict *d, unsigned n)
{
	unsigned empty = n * EMPTY_VISITS;

	if (!kd_rehashing(d))
		return false;
	while (n-- > 0 && d->used[0] != 0) {
		struct kd_node *e, *next;

		while (d->t[0][d->rehashidx] == NULL) {
			d->rehashidx++;
			if (--empty == 0)
				return true;
		}
		for (e = d->t[0][d->rehashidx]; e != NULL; e = next) {
			uint64_t i = e->hash & (d->size[1] - 1);

			next = e->next;
			e->next = d->t[1][i];
			d->t[1][i] = e;
			d->used[0]--;
			d->used[1]++;
		}
		d->t[0][d->rehashidx++] = NULL;
	}
	if (d->used[0] != 0)
		return true;
	kv_free(d->t[0]);
	d->t[0] = d->t[1];
	d->size[0] = d->size[1];
	d->used[0] = d->used[1];
	d->t[1] = NULL;
	d->size[1] = d->used[1] = 0;
	d->rehashidx = -1;
	return false;
}

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t
kd_rehash_for(struct kdict *d, uint64_t ns)
{
	uint64_t start = now_ns(), moved = 0;

	if (d->paused != 0)
		return 0;
	while (kd_rehash(d, 100)) {
		moved += 100;
		if (now_ns() - start > ns)
			break;
	}
	return moved;
}

static void
step(struct kdict *d)
{
	if (d->paused == 0)
		kd_rehash(d, 1);
}

struct kd_node *
kd_find(struct kdict *d, uint64_t h, const void *key, size_t len, kd_eq_fn eq)
{
	int t;

	if (kd_count(d) == 0)
		return NULL;
	if (kd_rehashing(d))
		step(d);
	for (t = 0; t <= 1; t++) {
		struct kd_node *e;

		if (d->t[t] == NULL)
			break;
		for (e = d->t[t][h & (d->size[t] - 1)]; e != NULL; e = e->next) {
			d->probes++;
			if (e->hash == (uint32_t)h && eq(e, key, len))
				return e;
		}
		if (!kd_rehashing(d))
			break;
	}
	return NULL;
}

int
kd_add(struct kdict *d, struct kd_node *n)
{
	int t;

	if (d->t[0] == NULL && resize_to(d, MIN_SIZE) != 0)
		return -ENOMEM;
	if (kd_rehashing(d))
		step(d);
	else if (d->used[0] >= d->size[0])
		(void)resize_to(d, pow2_at_least(d->used[0] * 2)); /* no room: grow later */
	t = kd_rehashing(d) ? 1 : 0;
	n->next = d->t[t][n->hash & (d->size[t] - 1)];
	d->t[t][n->hash & (d->size[t] - 1)] = n;
	d->used[t]++;
	return 0;
}

/* The link that points at @p n, and the table it is in. */
static struct kd_node **
link_of(struct kdict *d, const struct kd_node *n, int *table)
{
	int t;

	for (t = 0; t <= 1 && d->t[t] != NULL; t++) {
		struct kd_node **pp = &d->t[t][n->hash & (d->size[t] - 1)];

		for (; *pp != NULL; pp = &(*pp)->next) {
			if (*pp == n) {
				*table = t;
				return pp;
			}
		}
	}
	return NULL;
}

void
kd_unlink(struct kdict *d, struct kd_node *n)
{
	int t = 0;
	struct kd_node **pp = link_of(d, n, &t);

	if (pp == NULL)
		return;
	*pp = n->next;
	d->used[t]--;
	if (kd_rehashing(d))
		step(d);
}

void
kd_replace(struct kdict *d, struct kd_node *old, struct kd_node *n)
{
	int t = 0;
	struct kd_node **pp = link_of(d, old, &t);

	n->hash = old->hash;
	n->next = old->next;
	if (pp != NULL)
		*pp = n;
}

void
kd_shrink_if_sparse(struct kdict *d)
{
	uint64_t used = kd_count(d);

	if (kd_rehashing(d) || d->paused != 0 || d->size[0] <= MIN_SIZE)
		return;
	if (used * 100 / d->size[0] < MIN_FILL_PCT && resize_to(d, pow2_at_least(used)) == 0)
		kd_rehash(d, 1); /* an emptied table is done at once */
}

static uint64_t
rev64(uint64_t v)
{
	v = ((v >> 1) & 0x5555555555555555ULL) | ((v & 0x5555555555555555ULL) << 1);
	v = ((v >> 2) & 0x3333333333333333ULL) | ((v & 0x3333333333333333ULL) << 2);
	v = ((v >> 4) & 0x0F0F0F0F0F0F0F0FULL) | ((v & 0x0F0F0F0F0F0F0F0FULL) << 4);
	return __builtin_bswap64(v);
}

/* Add one to the cursor's bits under @p mask, counting from the high end. */
static uint64_t
rev_increment(uint64_t v, uint64_t mask)
{
	v |= ~mask;
	v = rev64(v);
	v++;
	return rev64(v);
}

static void
visit(struct kd_node *e, void (*fn)(struct kd_node *n, void *arg), void *arg)
{
	struct kd_node *next;

	for (; e != NULL; e = next) {
		next = e->next;
		fn(e, arg);
	}
}

uint64_t
kd_scan(struct kdict *d, uint64_t v, void (*fn)(struct kd_node *n, void *arg), void *arg)
{
	uint64_t m0, m1;
	int small, large;

	if (kd_count(d) == 0)
		return 0;
	d->paused++;
	if (!kd_rehashing(d)) {
		m0 = d->size[0] - 1;
		visit(d->t[0][v & m0], fn, arg);
		v = rev_increment(v, m0);
		d->paused--;
		return v;
	}
	small = d->size[0] <= d->size[1] ? 0 : 1;
	large = 1 - small;
	m0 = d->size[small] - 1;
	m1 = d->size[large] - 1;
	visit(d->t[small][v & m0], fn, arg);
	/* Then every bucket of the larger table that the small one's bucket expands to. */
	do {
		visit(d->t[large][v & m1], fn, arg);
		v = rev_increment(v, m1);
	} while (v & (m0 ^ m1));
	d->paused--;
	return v;
}

struct kd_node *
kd_random(struct kdict *d, uint64_t *rng)
{
	struct kd_node *e = NULL, *p;
	unsigned n = 0, pick, tries;

	if (kd_count(d) == 0)
		return NULL;
	if (kd_rehashing(d))
		step(d);
	for (tries = 0; e == NULL && tries < 1000000; tries++) {
		if (kd_rehashing(d)) {
			/* Buckets of t[0] below rehashidx are empty: draw from the rest. */
			uint64_t span = d->size[0] + d->size[1] - (uint64_t)d->rehashidx;
			uint64_t i = (uint64_t)d->rehashidx + kd_rand(rng) % span;

			e = i >= d->size[0] ? d->t[1][i - d->size[0]] : d->t[0][i];
		} else {
			e = d->t[0][kd_rand(rng) & (d->size[0] - 1)];
		}
	}
	for (p = e; p != NULL; p = p->next)
		n++;
	if (n == 0)
		return NULL;
	pick = (unsigned)(kd_rand(rng) % n);
	while (pick-- > 0)
		e = e->next;
	return e;
}

bool
kd_drain(struct kdict *d, void (*fn)(struct kd_node *n), unsigned *budget)
{
	uint64_t total = d->size[0] + d->size[1];

	while (d->drain < total) {
		struct kd_node **b =
		    d->drain < d->size[0] ? &d->t[0][d->drain] : &d->t[1][d->drain - d->size[0]];

		while (*b != NULL) {
			struct kd_node *n = *b;

			if (*budget == 0)
				return false;
			*b = n->next;
			fn(n);
			(*budget)--;
		}
		d->drain++;
	}
	kd_release(d);
	return true;
}

void
kd_iter_init(struct kdict *d, struct kd_iter *it)
{
	it->d = d;
	it->table = 0;
	it->index = 0;
	it->next = NULL;
	d->paused++;
}

struct kd_node *
kd_next(struct kd_iter *it)
{
	struct kdict *d = it->d;
	struct kd_node *e;

	while (it->next == NULL) {
		if (it->table > 1 || d->t[it->table] == NULL)
			return NULL;
		if (it->index >= d->size[it->table]) {
			it->table++;
			it->index = 0;
			if (!kd_rehashing(d))
				return NULL;
			continue;
		}
		it->next = d->t[it->table][it->index++];
	}
	e = it->next;
	it->next = e->next;
	return e;
}

void
kd_iter_end(struct kd_iter *it)
{
	it->d->paused--;
}
