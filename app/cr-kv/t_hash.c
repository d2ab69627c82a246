/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The hash type's two encodings (see t_hash.h).
 */
#include <errno.h>
#include <string.h>

#include "lp.h"
#include "mem.h"
#include "obj.h"
#include "t_hash.h"

static bool
field_eq(const struct kd_node *n, const void *key, size_t len)
{
	const struct kv_hfield *f = (const struct kv_hfield *)n;

	return f->flen == len && memcmp(f->data, key, len) == 0;
}

static struct kv_hfield *
field_new(const char *f, size_t flen, const char *v, size_t vlen)
{
	struct kv_hfield *h = kv_malloc(sizeof(*h) + flen + vlen + 2);

	if (h == NULL)
		return NULL;
	h->flen = (uint32_t)flen;
	h->vlen = (uint32_t)vlen;
	memcpy(h->data, f, flen);
	h->data[flen] = '\0';
	memcpy(h->data + flen + 1, v, vlen);
	h->data[flen + 1 + vlen] = '\0';
	h->node.hash = kv_hash(f, flen);
	return h;
}

void *
hash_new(void)
{
	return lp_new();
}

static void
table_free(struct kv_hash *h)
{
	struct kd_iter it;
	struct kd_node *n;

	kd_iter_init(&h->d, &it);
	while ((n = kd_next(&it)) != NULL)
		kv_free(n);
	kd_iter_end(&it);
	kd_release(&h->d);
	kv_free(h);
}

void
hash_free(unsigned enc, void *obj)
{
	if (enc == KV_ENC_LISTPACK)
		lp_free(obj);
	else
		table_free(obj);
}

static void
node_free(struct kd_node *n)
{
	kv_free(n);
}

bool
hash_free_some(unsigned enc, void *obj, unsigned *budget)
{
	struct kv_hash *h = obj;

	if (enc == KV_ENC_LISTPACK) {
		lp_free(obj);
		(*budget)--;
		return true;
	}
	if (!kd_drain(&h->d, node_free, budget))
		return false;
	kv_free(h);
	return true;
}

size_t
hash_len(const struct kv_entry *e)
{
	if (e->enc == KV_ENC_LISTPACK)
		return ((const struct lp *)e->obj)->count / 2;
	return kd_count(&((const struct kv_hash *)e->obj)->d);
}

static int
to_table(struct kv_entry *e)
{
	struct lp *l = e->obj;
	struct kv_hash *h = kv_malloc(sizeof(*h));
	uint32_t pos;

	if (h == NULL)
		return -ENOMEM;
	kd_init(&h->d);
	if (kd_expand(&h->d, l->count / 2) != 0) {
		kv_free(h);
		return -ENOMEM;
	}
	for (pos = lp_first(l); pos != LP_NONE; pos = lp_next(l, lp_next(l, pos))) {
		size_t flen, vlen;
		const unsigned char *f = lp_get(l, pos, &flen);
		const unsigned char *v = lp_get(l, lp_next(l, pos), &vlen);
		struct kv_hfield *n = field_new((const char *)f, flen, (const char *)v, vlen);

		if (n == NULL) {
			table_free(h);
			return -ENOMEM;
		}
		kd_add(&h->d, &n->node);
	}
	lp_free(l);
	e->obj = h;
	e->enc = KV_ENC_HASHTABLE;
	return 0;
}

int
hash_convert_for(struct kv_entry *e, const size_t *lens, size_t n)
{
	size_t i;

	if (e->enc != KV_ENC_LISTPACK)
		return 0;
	for (i = 0; i < n; i++)
		if (lens[i] > KV_HASH_MAX_LISTPACK_VALUE)
			return to_table(e);
	return 0;
}

bool
hash_get(struct kv_entry *e, const char *f, size_t flen, const char **v, size_t *vlen)
{
	if (e->enc == KV_ENC_LISTPACK) {
		struct lp *l = e->obj;
		uint32_t pos = lp_find(l, lp_first(l), f, flen, 1);

		if (pos == LP_NONE)
			return false;
		*v = (const char *)lp_get(l, lp_next(l, pos), vlen);
		return true;
	} else {
		struct kv_hash *h = e->obj;
		struct kv_hfield *n =
		    (struct kv_hfield *)kd_find(&h->d, kv_hash(f, flen), f, flen, field_eq);

		if (n == NULL)
			return false;
		*v = n->data + n->flen + 1;
		*vlen = n->vlen;
		return true;
	}
}

static int
lp_set(struct kv_entry *e, const char *f, size_t flen, const char *v, size_t vlen)
{
	struct lp *l = e->obj;
	uint32_t pos = lp_find(l, lp_first(l), f, flen, 1);

	if (pos != LP_NONE) {
		if (lp_replace(&l, lp_next(l, pos), v, vlen) == LP_NONE)
			return -ENOMEM;
		e->obj = l;
		return 0;
	}
	if (lp_append(&l, f, flen) == LP_NONE)
		return -ENOMEM;
	e->obj = l;
	if (lp_append(&l, v, vlen) == LP_NONE) {
		lp_delete(&l, lp_last(l), 1);
		e->obj = l;
		return -ENOMEM;
	}
	e->obj = l;
	if (l->count / 2 > KV_HASH_MAX_LISTPACK_ENTRIES && to_table(e) != 0)
		return -ENOMEM;
	return 1;
}

int
hash_set(struct kv_entry *e, const char *f, size_t flen, const char *v, size_t vlen)
{
	struct kv_hash *h;
	struct kv_hfield *old, *n;
	uint64_t hv;

	if (e->enc == KV_ENC_LISTPACK) {
		if ((flen > KV_HASH_MAX_LISTPACK_VALUE || vlen > KV_HASH_MAX_LISTPACK_VALUE) &&
		    to_table(e) != 0)
			return -ENOMEM;
		if (e->enc == KV_ENC_LISTPACK)
			return lp_set(e, f, flen, v, vlen);
	}
	h = e->obj;
	hv = kv_hash(f, flen);
	old = (struct kv_hfield *)kd_find(&h->d, hv, f, flen, field_eq);
	n = field_new(f, flen, v, vlen);
	if (n == NULL)
		return -ENOMEM;
	if (old != NULL) {
		kd_replace(&h->d, &old->node, &n->node);
		kv_free(old);
		return 0;
	}
	if (kd_add(&h->d, &n->node) != 0) {
		kv_free(n);
		return -ENOMEM;
	}
	return 1;
}

bool
hash_del(struct kv_entry *e, const char *f, size_t flen)
{
	if (e->enc == KV_ENC_LISTPACK) {
		struct lp *l = e->obj;
		uint32_t pos = lp_find(l, lp_first(l), f, flen, 1);

		if (pos == LP_NONE)
			return false;
		lp_delete(&l, pos, 2);
		e->obj = l;
		return true;
	} else {
		struct kv_hash *h = e->obj;
		struct kd_node *n = kd_find(&h->d, kv_hash(f, flen), f, flen, field_eq);

		if (n == NULL)
			return false;
		kd_unlink(&h->d, n);
		kv_free(n);
		kd_shrink_if_sparse(&h->d);
		return true;
	}
}

void
hash_iter_init(struct hash_iter *it, struct kv_entry *e)
{
	it->e = e;
	if (e->enc == KV_ENC_LISTPACK)
		it->pos = lp_first(e->obj);
	else
		kd_iter_init(&((struct kv_hash *)e->obj)->d, &it->it);
}

bool
hash_iter_next(struct hash_iter *it, const char **f, size_t *flen, const char **v, size_t *vlen)
{
	if (it->e->enc == KV_ENC_LISTPACK) {
		struct lp *l = it->e->obj;

		if (it->pos == LP_NONE)
			return false;
		*f = (const char *)lp_get(l, it->pos, flen);
		it->pos = lp_next(l, it->pos);
		*v = (const char *)lp_get(l, it->pos, vlen);
		it->pos = lp_next(l, it->pos);
		return true;
	} else {
		struct kv_hfield *n = (struct kv_hfield *)kd_next(&it->it);

		if (n == NULL)
			return false;
		*f = n->data;
		*flen = n->flen;
		*v = n->data + n->flen + 1;
		*vlen = n->vlen;
		return true;
	}
}

void
hash_iter_end(struct hash_iter *it)
{
	if (it->e->enc != KV_ENC_LISTPACK)
		kd_iter_end(&it->it);
}

void
hash_random(struct kv_entry *e, uint64_t *rng, const char **f, size_t *flen, const char **v,
	    size_t *vlen)
{
	if (e->enc == KV_ENC_LISTPACK) {
		struct lp *l = e->obj;
		uint32_t pos = lp_seek(l, (long long)(kd_rand(rng) % (l->count / 2)) * 2);

		*f = (const char *)lp_get(l, pos, flen);
		*v = (const char *)lp_get(l, lp_next(l, pos), vlen);
	} else {
		struct kv_hfield *n =
		    (struct kv_hfield *)kd_random(&((struct kv_hash *)e->obj)->d, rng);

		*f = n->data;
		*flen = n->flen;
		*v = n->data + n->flen + 1;
		*vlen = n->vlen;
	}
}

struct scan_adapter {
	void (*fn)(const char *f, size_t flen, const char *v, size_t vlen, void *arg);
	void *arg;
};

static void
scan_one(struct kd_node *node, void *arg)
{
	struct scan_adapter *a = arg;
	struct kv_hfield *n = (struct kv_hfield *)node;

	a->fn(n->data, n->flen, n->data + n->flen + 1, n->vlen, a->arg);
}

uint64_t
hash_scan(struct kv_entry *e, uint64_t cursor,
	  void (*fn)(const char *f, size_t flen, const char *v, size_t vlen, void *arg), void *arg)
{
	struct scan_adapter a = {fn, arg};

	if (e->enc == KV_ENC_LISTPACK) {
		struct hash_iter it;
		const char *f, *v;
		size_t flen, vlen;

		hash_iter_init(&it, e);
		while (hash_iter_next(&it, &f, &flen, &v, &vlen))
			fn(f, flen, v, vlen, arg);
		hash_iter_end(&it);
		return 0;
	}
	return kd_scan(&((struct kv_hash *)e->obj)->d, cursor, scan_one, &a);
}

size_t
hash_mem(unsigned enc, const void *obj)
{
	const struct kv_hash *h = obj;
	struct kd_iter it;
	struct kd_node *n;
	size_t t;

	if (enc == KV_ENC_LISTPACK)
		return lp_mem(obj);
	t = kv_mem_size(h) + kd_mem(&h->d);
	kd_iter_init((struct kdict *)&h->d, &it);
	while ((n = kd_next(&it)) != NULL)
		t += kv_mem_size(n);
	kd_iter_end(&it);
	return t;
}
