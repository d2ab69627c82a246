/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The set type's two encodings (see t_set.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "intset.h"
#include "mem.h"
#include "obj.h"
#include "t_set.h"

static bool
member_eq(const struct kd_node *n, const void *key, size_t len)
{
	const struct kv_smember *m = (const struct kv_smember *)n;

	return m->len == len && memcmp(m->data, key, len) == 0;
}

_Static_assert(offsetof(struct kv_smember, len) == offsetof(struct kd_node, aux) &&
		   offsetof(struct kv_smember, data) == sizeof(struct kd_node),
	       "a member's length is its node's aux word, its bytes follow the node");

static struct kv_smember *
member_new(const char *s, size_t len)
{
	struct kv_smember *m = kv_malloc(sizeof(*m) + len + 1);

	if (m == NULL)
		return NULL;
	m->len = (uint32_t)len;
	memcpy(m->data, s, len);
	m->data[len] = '\0';
	m->node.hash = (uint32_t)kv_hash(s, len);
	return m;
}

static struct kv_set *
table_new(size_t hint)
{
	struct kv_set *s = kv_malloc(sizeof(*s));

	if (s == NULL)
		return NULL;
	kd_init(&s->d);
	if (kd_expand(&s->d, hint) != 0) {
		kv_free(s);
		return NULL;
	}
	return s;
}

void *
set_new_intset(void)
{
	return intset_new();
}

void *
set_new_for(const char *m, size_t len, unsigned *enc)
{
	int64_t v;

	if (intset_parse(m, len, &v)) {
		*enc = KV_ENC_INTSET;
		return intset_new();
	}
	*enc = KV_ENC_HASHTABLE;
	return table_new(4);
}

static void
node_free(struct kd_node *n)
{
	kv_free(n);
}

void
set_free(unsigned enc, void *obj)
{
	unsigned budget = ~0u;

	if (enc == KV_ENC_INTSET) {
		intset_free(obj);
		return;
	}
	kd_drain(&((struct kv_set *)obj)->d, node_free, &budget);
	kv_free(obj);
}

bool
set_free_some(unsigned enc, void *obj, unsigned *budget)
{
	if (enc == KV_ENC_INTSET) {
		intset_free(obj);
		(*budget)--;
		return true;
	}
	if (!kd_drain(&((struct kv_set *)obj)->d, node_free, budget))
		return false;
	kv_free(obj);
	return true;
}

size_t
set_len(const struct kv_entry *e)
{
	if (e->enc == KV_ENC_INTSET)
		return ((const struct kv_intset *)e->obj)->len;
	return kd_count(&((const struct kv_set *)e->obj)->d);
}

size_t
set_mem(unsigned enc, const void *obj)
{
	const struct kv_set *s = obj;
	struct kd_iter it;
	struct kd_node *n;
	size_t t;

	if (enc == KV_ENC_INTSET)
		return intset_mem(obj);
	t = kv_mem_size(s) + kd_mem(&s->d);
	kd_iter_init((struct kdict *)&s->d, &it);
	while ((n = kd_next(&it)) != NULL)
		t += kv_mem_size(n);
	kd_iter_end(&it);
	return t;
}

static int
table_add(struct kv_set *s, const char *m, size_t len)
{
	struct kv_smember *n;
	uint64_t h = kv_hash(m, len);

	if (kd_find(&s->d, h, m, len, member_eq) != NULL)
		return 0;
	n = member_new(m, len);
	if (n == NULL)
		return -ENOMEM;
	if (kd_add(&s->d, &n->node) != 0) {
		kv_free(n);
		return -ENOMEM;
	}
	return 1;
}

static int
to_table(struct kv_entry *e)
{
	struct kv_intset *is = e->obj;
	struct kv_set *s = table_new(is->len + 1);
	uint32_t i;

	if (s == NULL)
		return -ENOMEM;
	for (i = 0; i < is->len; i++) {
		char b[24];
		int n = snprintf(b, sizeof(b), "%lld", (long long)intset_get(is, i));

		if (table_add(s, b, (size_t)n) < 0) {
			set_free(KV_ENC_HASHTABLE, s);
			return -ENOMEM;
		}
	}
	intset_free(is);
	e->obj = s;
	e->enc = KV_ENC_HASHTABLE;
	return 0;
}

int
set_add(struct kv_entry *e, const char *m, size_t len)
{
	if (e->enc == KV_ENC_INTSET) {
		struct kv_intset *is = e->obj;
		int64_t v;
		bool added;

		if (intset_parse(m, len, &v)) {
			if (intset_add(&is, v, &added) != 0)
				return -ENOMEM;
			e->obj = is;
			if (added && is->len > KV_SET_MAX_INTSET_ENTRIES && to_table(e) != 0)
				return -ENOMEM;
			return added ? 1 : 0;
		}
		if (to_table(e) != 0)
			return -ENOMEM;
	}
	return table_add(e->obj, m, len);
}

bool
set_rem(struct kv_entry *e, const char *m, size_t len)
{
	if (e->enc == KV_ENC_INTSET) {
		struct kv_intset *is = e->obj;
		int64_t v;
		bool gone = intset_parse(m, len, &v) && intset_remove(&is, v);

		e->obj = is;
		return gone;
	} else {
		struct kv_set *s = e->obj;
		struct kd_node *n = kd_find(&s->d, kv_hash(m, len), m, len, member_eq);

		if (n == NULL)
			return false;
		kd_unlink(&s->d, n);
		kv_free(n);
		kd_shrink_if_sparse(&s->d);
		return true;
	}
}

bool
set_has(struct kv_entry *e, const char *m, size_t len)
{
	if (e->enc == KV_ENC_INTSET) {
		int64_t v;

		return intset_parse(m, len, &v) && intset_find(e->obj, v);
	}
	return kd_find(&((struct kv_set *)e->obj)->d, kv_hash(m, len), m, len, member_eq) != NULL;
}

static void
format(struct set_buf *buf, int64_t v, const char **m, size_t *len)
{
	*len = (size_t)snprintf(buf->b, sizeof(buf->b), "%lld", (long long)v);
	*m = buf->b;
}

void
set_iter_init(struct set_iter *it, struct kv_entry *e)
{
	it->e = e;
	it->i = 0;
	if (e->enc != KV_ENC_INTSET)
		kd_iter_init(&((struct kv_set *)e->obj)->d, &it->it);
}

bool
set_iter_next(struct set_iter *it, const char **m, size_t *len)
{
	if (it->e->enc == KV_ENC_INTSET) {
		struct kv_intset *is = it->e->obj;

		if (it->i >= is->len)
			return false;
		format(&it->buf, intset_get(is, it->i++), m, len);
		return true;
	} else {
		struct kv_smember *n = (struct kv_smember *)kd_next(&it->it);

		if (n == NULL)
			return false;
		*m = n->data;
		*len = n->len;
		return true;
	}
}

void
set_iter_end(struct set_iter *it)
{
	if (it->e->enc != KV_ENC_INTSET)
		kd_iter_end(&it->it);
}

void
set_random(struct kv_entry *e, uint64_t *rng, struct set_buf *buf, const char **m, size_t *len)
{
	if (e->enc == KV_ENC_INTSET) {
		struct kv_intset *is = e->obj;

		format(buf, intset_get(is, (uint32_t)(kd_rand(rng) % is->len)), m, len);
	} else {
		struct kv_smember *n =
		    (struct kv_smember *)kd_random(&((struct kv_set *)e->obj)->d, rng);

		*m = n->data;
		*len = n->len;
	}
}

struct scan_adapter {
	void (*fn)(const char *m, size_t len, void *arg);
	void *arg;
};

static void
scan_one(struct kd_node *node, void *arg)
{
	struct scan_adapter *a = arg;
	struct kv_smember *n = (struct kv_smember *)node;

	a->fn(n->data, n->len, a->arg);
}

uint64_t
set_scan(struct kv_entry *e, uint64_t cursor, void (*fn)(const char *m, size_t len, void *arg),
	 void *arg)
{
	struct scan_adapter a = {fn, arg};

	if (e->enc == KV_ENC_INTSET) {
		struct set_iter it;
		const char *m;
		size_t len;

		set_iter_init(&it, e);
		while (set_iter_next(&it, &m, &len))
			fn(m, len, arg);
		set_iter_end(&it);
		return 0;
	}
	return kd_scan(&((struct kv_set *)e->obj)->d, cursor, scan_one, &a);
}
