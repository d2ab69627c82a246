/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A value written out as bytes and built again: COPY, and values that move between
 * shards (RENAME, COPY, and the sources a multi-key command reads from other shards).
 * The layout is ours, never sent to clients: a type byte, an encoding byte, then for a
 * string its bytes, for a collection its element count and each element as a LEB128
 * length and the bytes (a sorted set's score as the 8 bytes of a double after its
 * member, a hash's value after its field). Building keeps the encoding, as Redis's COPY
 * keeps it (a small hashtable-encoded hash stays one).
 */
#include <errno.h>
#include <string.h>

#include "intset.h"
#include "kv.h"
#include "lp.h"
#include "t_hash.h"
#include "t_list.h"
#include "t_set.h"
#include "t_zset.h"

static void
put_varint(struct rbuf *b, uint64_t v)
{
	unsigned char t[10];
	size_t n = 0;

	while (v >= 0x80) {
		t[n++] = (unsigned char)(v | 0x80);
		v >>= 7;
	}
	t[n++] = (unsigned char)v;
	rb_raw(b, t, n);
}

static void
put_str(struct rbuf *b, const void *p, size_t n)
{
	put_varint(b, n);
	rb_raw(b, p, n);
}

void
kv_obj_dump(struct kv_entry *e, struct rbuf *b)
{
	unsigned char hdr[2] = {(unsigned char)e->type, (unsigned char)e->enc};

	rb_raw(b, hdr, 2);
	switch (e->type) {
	case KV_T_STRING:
		rb_raw(b, e->val, e->vlen);
		return;
	case KV_T_LIST: {
		struct kv_qlist *ql = e->obj;
		struct qpos p;

		put_varint(b, ql->count);
		if (ql_end(ql, true, &p))
			do {
				size_t n;
				const void *s = ql_get(&p, &n);

				put_str(b, s, n);
			} while (ql_next(&p));
		return;
	}
	case KV_T_SET: {
		struct set_iter it;
		const char *m;
		size_t n;

		put_varint(b, set_len(e));
		set_iter_init(&it, e);
		while (set_iter_next(&it, &m, &n))
			put_str(b, m, n);
		set_iter_end(&it);
		return;
	}
	case KV_T_ZSET: {
		struct zit it;

		put_varint(b, zset_len(e));
		for (zit_rank(&it, e, 0); zit_ok(&it); zit_step(&it, false)) {
			const char *m;
			size_t n;
			double s;

			zit_get(&it, &m, &n, &s);
			put_str(b, m, n);
			rb_raw(b, &s, sizeof(s));
		}
		return;
	}
	case KV_T_HASH: {
		struct hash_iter it;
		const char *f, *v;
		size_t fl, vl;

		put_varint(b, hash_len(e));
		hash_iter_init(&it, e);
		while (hash_iter_next(&it, &f, &fl, &v, &vl)) {
			put_str(b, f, fl);
			put_str(b, v, vl);
		}
		hash_iter_end(&it);
		return;
	}
	}
}

struct reader {
	const unsigned char *p, *end;
	bool bad;
};

static uint64_t
get_varint(struct reader *r)
{
	uint64_t v = 0;
	unsigned shift = 0;

	while (r->p < r->end && shift < 64) {
		unsigned char c = *r->p++;

		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return v;
		shift += 7;
	}
	r->bad = true;
	return 0;
}

static const char *
get_str(struct reader *r, size_t *n)
{
	const unsigned char *s;

	*n = (size_t)get_varint(r);
	if (r->bad || (size_t)(r->end - r->p) < *n) {
		r->bad = true;
		*n = 0;
		return "";
	}
	s = r->p;
	r->p += *n;
	return (const char *)s;
}

/* Build the collection into @p e (type and encoding set, obj NULL). */
static int
load_elements(struct reader *r, struct kv_entry *e)
{
	uint64_t n = get_varint(r), i;
	unsigned enc;

	switch (e->type) {
	case KV_T_LIST:
		e->obj = ql_new();
		break;
	case KV_T_SET:
		e->obj = e->enc == KV_ENC_INTSET ? set_new_intset() : set_new_for("x", 1, &enc);
		break;
	case KV_T_ZSET:
		e->obj = zset_new(e->enc == KV_ENC_LISTPACK ? 0 : KV_ZSET_MAX_LISTPACK_ENTRIES + 1,
				  0, &enc);
		break;
	case KV_T_HASH:
		e->obj = hash_new();
		if (e->obj != NULL && e->enc == KV_ENC_HASHTABLE) {
			size_t big = KV_HASH_MAX_LISTPACK_VALUE + 1;

			e->enc = KV_ENC_LISTPACK;
			if (hash_convert_for(e, &big, 1) != 0)
				return -ENOMEM;
		}
		break;
	default:
		return -EINVAL;
	}
	if (e->obj == NULL)
		return -ENOMEM;
	for (i = 0; i < n && !r->bad; i++) {
		size_t ml, vl;
		const char *m = get_str(r, &ml), *v;
		int rc = 0, out;
		double s;

		switch (e->type) {
		case KV_T_LIST:
			rc = ql_push(e->obj, false, m, ml);
			break;
		case KV_T_SET:
			rc = set_add(e, m, ml) < 0 ? -ENOMEM : 0;
			break;
		case KV_T_ZSET:
			if ((size_t)(r->end - r->p) < sizeof(s)) {
				r->bad = true;
				break;
			}
			memcpy(&s, r->p, sizeof(s));
			r->p += sizeof(s);
			rc = zset_add(e, s, m, ml, 0, &out, NULL) < 0 ? -ENOMEM : 0;
			break;
		case KV_T_HASH:
			v = get_str(r, &vl);
			rc = hash_set(e, m, ml, v, vl) < 0 ? -ENOMEM : 0;
			break;
		}
		if (rc != 0)
			return rc;
	}
	return r->bad ? -EINVAL : 0;
}

int
kv_obj_load(const char *p, size_t len, struct kv_loaded *out)
{
	struct reader r = {(const unsigned char *)p, (const unsigned char *)p + len, false};
	struct kv_entry e;
	int rc;

	memset(out, 0, sizeof(*out));
	if (len < 2 || p[0] >= KV_T_COUNT || (unsigned char)p[1] >= KV_ENC_COUNT)
		return -EINVAL;
	memset(&e, 0, sizeof(e));
	e.type = (unsigned char)p[0] & 0xf;
	e.enc = (unsigned char)p[1] & 0xf;
	out->type = e.type;
	r.p += 2;
	if (e.type == KV_T_STRING) {
		out->enc = e.enc;
		out->s = p + 2;
		out->slen = len - 2;
		return 0;
	}
	rc = load_elements(&r, &e);
	if (rc != 0) {
		if (e.obj != NULL)
			kv_obj_free(e.type, e.enc, e.obj);
		return rc;
	}
	out->enc = e.enc;
	out->obj = e.obj;
	return 0;
}

struct kv_entry *
kv_obj_install(struct kv_ctx *x, const struct kv_arg *k, struct kv_loaded *l)
{
	struct kv_entry *e;

	if (l->type != KV_T_STRING) {
		e = kv_key_add(x, k, l->type, l->enc, l->obj);
		l->obj = NULL; /* taken, or freed */
		return e;
	}
	e = kv_set(x->sh->store, k->p, k->len, kv_key_hash(x, k), l->s, l->slen, false, x->now_ms);
	if (e == NULL) {
		rb_error(x->out, kv_err_oom);
		return NULL;
	}
	e->enc = l->enc & 0xf;
	return e;
}
