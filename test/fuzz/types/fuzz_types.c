/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for app/cr-kv's collection types (t_hash.c, t_set.c, t_list.c,
 * t_zset.c and the listpack, intset, skiplist and table below them), the storage of
 * issue 18's commands.
 *
 * The input is a program: each step takes a byte for the type and the operation, then
 * the bytes its arguments need, and runs it on one hash, one set, one list and one
 * sorted set, and on a plain model of each. Names are short ("m7", small integers for a
 * set) or long enough to pass a listpack's 64-byte limit, so the conversions (listpack ->
 * hashtable, intset -> hashtable, listpack -> skiplist) happen in the middle of a run.
 * Checked after every step: each return value and length against the model; at the end
 * every element by iteration (a sorted set in its order), and after the frees, no byte
 * left counted by the allocator (kv_mem).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../app/cr-kv/mem.h"
#include "../../../app/cr-kv/obj.h"
#include "../../../app/cr-kv/t_hash.h"
#include "../../../app/cr-kv/t_list.h"
#include "../../../app/cr-kv/t_set.h"
#include "../../../app/cr-kv/t_zset.h"

#define IDS	 256
#define LIST_MAX 2048

#define CHECK(c)                                                                          \
	do {                                                                              \
		if (!(c)) {                                                               \
			fprintf(stderr, "fuzz_types: %s:%d: %s\n", __FILE__, __LINE__, #c); \
			abort();                                                          \
		}                                                                         \
	} while (0)

struct in {
	const uint8_t *p, *end;
};

static unsigned
u8(struct in *in)
{
	return in->p < in->end ? *in->p++ : 0;
}

/* A hash field or sorted-set member: "m<id>", or from id 192 on, 60 to 123 bytes. */
static size_t
name(unsigned id, char *b)
{
	size_t n;

	if (id < 192)
		return (size_t)snprintf(b, 16, "m%u", id);
	n = 60 + (id - 192);
	memset(b, 'a' + (int)(id % 26), n);
	b[0] = (char)id;
	return n;
}

/* A set member: a small integer (intset) below 128, then "s<id>", long from 250 on. */
static size_t
set_name(unsigned id, char *b)
{
	if (id < 128)
		return (size_t)snprintf(b, 16, "%d", (int)id - 64);
	if (id < 250)
		return (size_t)snprintf(b, 16, "s%u", id);
	return name(id, b);
}

/* A value: @p len bytes of @p c (a hash's, a list element's). */
struct val {
	uint16_t len;
	uint8_t c, on;
};

static void
val_bytes(struct val v, char *b)
{
	memset(b, v.c, v.len);
}

static int
cmp_member(const char *a, size_t al, const char *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);

	return c != 0 ? c : (al > bl) - (al < bl);
}

struct model {
	struct val hash[IDS];
	size_t hash_n;
	uint8_t set[IDS];
	size_t set_n;
	struct val list[LIST_MAX];
	size_t list_n;
	int zs[IDS]; /* score * 2, INT32_MIN: absent */
	size_t zs_n;
};

static void
do_hash(struct kv_entry *e, struct model *m, struct in *in)
{
	char f[128], v[128];
	unsigned op = u8(in) % 3, id = u8(in);
	size_t flen = name(id, f), vlen;
	const char *got;

	if (op == 0) {
		struct val nv = {(uint16_t)(u8(in) % 100), (uint8_t)('a' + u8(in) % 26), 1};

		val_bytes(nv, v);
		CHECK(hash_set(e, f, flen, v, nv.len) == (m->hash[id].on ? 0 : 1));
		m->hash_n += !m->hash[id].on;
		m->hash[id] = nv;
	} else if (op == 1) {
		CHECK(hash_del(e, f, flen) == (m->hash[id].on != 0));
		m->hash_n -= m->hash[id].on;
		m->hash[id].on = 0;
	} else {
		CHECK(hash_get(e, f, flen, &got, &vlen) == (m->hash[id].on != 0));
		if (m->hash[id].on) {
			val_bytes(m->hash[id], v);
			CHECK(vlen == m->hash[id].len && memcmp(got, v, vlen) == 0);
		}
	}
	CHECK(hash_len(e) == m->hash_n);
}

static void
do_set(struct kv_entry *e, struct model *m, struct in *in)
{
	char s[128];
	unsigned op = u8(in) % 3, id = u8(in);
	size_t len = set_name(id, s);

	if (op == 0) {
		CHECK(set_add(e, s, len) == (m->set[id] ? 0 : 1));
		m->set_n += !m->set[id];
		m->set[id] = 1;
	} else if (op == 1) {
		CHECK(set_rem(e, s, len) == (m->set[id] != 0));
		m->set_n -= m->set[id];
		m->set[id] = 0;
	} else {
		CHECK(set_has(e, s, len) == (m->set[id] != 0));
	}
	CHECK(set_len(e) == m->set_n);
}

static void
list_check_at(struct kv_qlist *ql, struct model *m, size_t i, const struct qpos *p)
{
	char want[9000];
	const void *got;
	size_t len;

	(void)ql;
	got = ql_get(p, &len);
	val_bytes(m->list[i], want);
	CHECK(len == m->list[i].len && memcmp(got, want, len) == 0);
}

static void
do_list(struct kv_qlist *ql, struct model *m, struct in *in)
{
	char b[9000];
	unsigned op = u8(in) % 5, a = u8(in);
	struct val nv = {(uint16_t)(a == 255 ? 8500 : a), (uint8_t)u8(in), 1};
	struct qpos p;
	size_t i;

	val_bytes(nv, b);
	if (op == 0 && m->list_n < LIST_MAX) { /* push at the head or the tail */
		bool head = nv.c & 1;

		CHECK(ql_push(ql, head, b, nv.len) == 0);
		if (head) {
			memmove(&m->list[1], &m->list[0], m->list_n * sizeof(m->list[0]));
			m->list[0] = nv;
		} else {
			m->list[m->list_n] = nv;
		}
		m->list_n++;
	} else if (op == 1) { /* pop from either end */
		bool head = nv.c & 1;

		CHECK(ql_end(ql, head, &p) == (m->list_n > 0));
		if (m->list_n > 0) {
			list_check_at(ql, m, head ? 0 : m->list_n - 1, &p);
			ql_delete_ends(ql, head, 1);
			if (head)
				memmove(&m->list[0], &m->list[1], (m->list_n - 1) * sizeof(m->list[0]));
			m->list_n--;
		}
	} else if (m->list_n > 0) {
		i = (size_t)(a * 257u + nv.c) % m->list_n;
		CHECK(ql_index(ql, (long long)i, &p));
		list_check_at(ql, m, i, &p);
		if (op == 2) { /* replace */
			CHECK(ql_replace(ql, &p, b, nv.len) == 0);
			m->list[i] = nv;
		} else if (op == 3 && m->list_n < LIST_MAX) { /* insert after or before */
			bool after = nv.c & 2;
			size_t at = after ? i + 1 : i;

			CHECK(ql_insert(ql, &p, after, b, nv.len) == 0);
			memmove(&m->list[at + 1], &m->list[at], (m->list_n - at) * sizeof(m->list[0]));
			m->list[at] = nv;
			m->list_n++;
		} else if (op == 4) { /* delete in the middle */
			ql_delete(ql, &p, true);
			memmove(&m->list[i], &m->list[i + 1], (m->list_n - i - 1) * sizeof(m->list[0]));
			m->list_n--;
		}
	}
	CHECK(ql->count == m->list_n);
}

/* The model's rank of member @p id: those with a lower (score, member). */
static unsigned long
zs_rank(const struct model *m, unsigned id)
{
	char a[128], b[128];
	size_t al = name(id, a), bl;
	unsigned long r = 0;
	unsigned j;

	for (j = 0; j < IDS; j++) {
		if (j == id || m->zs[j] == INT32_MIN)
			continue;
		bl = name(j, b);
		if (m->zs[j] < m->zs[id] || (m->zs[j] == m->zs[id] && cmp_member(b, bl, a, al) < 0))
			r++;
	}
	return r;
}

static void
do_zset(struct kv_entry *e, struct model *m, struct in *in)
{
	char s[128];
	unsigned op = u8(in) % 3, id = u8(in);
	size_t len = name(id, s);
	int score2 = (int)(int8_t)u8(in);
	unsigned long rank;
	double sc, ns;
	int out = 0;

	if (op == 0) {
		CHECK(zset_add(e, score2 / 2.0, s, len, 0, &out, &ns) == 1);
		if (m->zs[id] == INT32_MIN)
			CHECK(out & ZADD_OUT_ADDED);
		else if (m->zs[id] != score2)
			CHECK((out & ZADD_OUT_UPDATED) && !(out & ZADD_OUT_ADDED));
		else
			CHECK(!(out & (ZADD_OUT_ADDED | ZADD_OUT_UPDATED)));
		m->zs_n += m->zs[id] == INT32_MIN;
		m->zs[id] = score2;
	} else if (op == 1) {
		CHECK(zset_del(e, s, len) == (m->zs[id] != INT32_MIN));
		m->zs_n -= m->zs[id] != INT32_MIN;
		m->zs[id] = INT32_MIN;
	} else if (m->zs[id] == INT32_MIN) {
		CHECK(!zset_score(e, s, len, &sc));
		CHECK(!zset_rank(e, s, len, false, &rank, &sc));
	} else {
		CHECK(zset_score(e, s, len, &sc) && sc == m->zs[id] / 2.0);
		CHECK(zset_rank(e, s, len, false, &rank, &sc) && rank == zs_rank(m, id));
		CHECK(zset_rank(e, s, len, true, &rank, &sc) && rank == m->zs_n - 1 - zs_rank(m, id));
	}
	CHECK(zset_len(e) == m->zs_n);
}

/* Every element, by iteration, against the model. */
static void
check_all(struct kv_entry *h, struct kv_entry *st, struct kv_entry *z, struct model *m)
{
	char b[128], v[128];
	struct hash_iter hi;
	struct set_iter si;
	struct zit zi;
	const char *f, *x;
	size_t flen, xlen, n = 0, bl;
	unsigned id;
	double sc, last_sc = 0;
	char last[128];
	size_t last_len = 0;

	hash_iter_init(&hi, h);
	while (hash_iter_next(&hi, &f, &flen, &x, &xlen)) {
		for (id = 0; id < IDS; id++)
			if ((bl = name(id, b)) == flen && memcmp(b, f, flen) == 0)
				break;
		CHECK(id < IDS && m->hash[id].on);
		val_bytes(m->hash[id], v);
		CHECK(xlen == m->hash[id].len && memcmp(x, v, xlen) == 0);
		n++;
	}
	hash_iter_end(&hi);
	CHECK(n == m->hash_n);

	n = 0;
	set_iter_init(&si, st);
	while (set_iter_next(&si, &x, &xlen)) {
		for (id = 0; id < IDS; id++)
			if ((bl = set_name(id, b)) == xlen && memcmp(b, x, xlen) == 0)
				break;
		CHECK(id < IDS && m->set[id]);
		n++;
	}
	set_iter_end(&si);
	CHECK(n == m->set_n);

	n = 0;
	if (zit_rank(&zi, z, 0)) {
		do {
			zit_get(&zi, &x, &xlen, &sc);
			for (id = 0; id < IDS; id++)
				if ((bl = name(id, b)) == xlen && memcmp(b, x, xlen) == 0)
					break;
			CHECK(id < IDS && m->zs[id] != INT32_MIN && sc == m->zs[id] / 2.0);
			CHECK(zs_rank(m, id) == n);
			CHECK(n == 0 || last_sc < sc ||
			      (last_sc == sc && cmp_member(last, last_len, x, xlen) < 0));
			memcpy(last, x, xlen);
			last_len = xlen;
			last_sc = sc;
			n++;
		} while (zit_step(&zi, false));
	}
	CHECK(n == m->zs_n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct model m;
	struct kv_mem mem = {0};
	struct in in = {data, data + size};
	struct kv_entry h = {.type = KV_T_HASH, .enc = KV_ENC_LISTPACK};
	struct kv_entry st = {.type = KV_T_SET, .enc = KV_ENC_INTSET};
	struct kv_entry z = {.type = KV_T_ZSET};
	struct kv_qlist *ql;
	unsigned i, steps = 0;

	kv_mem_bind(&mem);
	memset(&m, 0, sizeof(m));
	for (i = 0; i < IDS; i++)
		m.zs[i] = INT32_MIN;
	h.obj = hash_new();
	st.obj = set_new_intset();
	z.obj = zset_new(1, 1, &i);
	z.enc = (uint8_t)i;
	ql = ql_new();
	CHECK(h.obj != NULL && st.obj != NULL && z.obj != NULL && ql != NULL);
	while (in.p < in.end && steps++ < 4096) {
		switch (u8(&in) % 4) {
		case 0:
			do_hash(&h, &m, &in);
			break;
		case 1:
			do_set(&st, &m, &in);
			break;
		case 2:
			do_list(ql, &m, &in);
			break;
		default:
			do_zset(&z, &m, &in);
			break;
		}
	}
	check_all(&h, &st, &z, &m);
	hash_free(h.enc, h.obj);
	set_free(st.enc, st.obj);
	zset_free(z.enc, z.obj);
	ql_free(ql);
	CHECK(kv_mem_used(&mem) == 0);
	kv_mem_bind(NULL);
	return 0;
}
