/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Commands over keys of several shards, each as one transaction (txn.h): their keys are
 * locked shard by shard, each shard's reads run as its lock is granted, the writes run
 * under the locks, and only then are the locks released, so that no other client sees
 * a state in between. (When every key is on one shard the command's own fn runs there,
 * as Redis runs it.)
 *
 * What a shard's reads send back is a small RESP reply read here with struct rd.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv.h"

/* ---- reading what the shards sent ---- */

void
rd_init(struct rd *r, const struct rbuf *b)
{
	r->p = b->p;
	r->end = b->p + b->len;
}

static long long
rd_num(struct rd *r, char type)
{
	const char *nl;
	long long v;

	if (r->p >= r->end || r->p[0] != type || (nl = memchr(r->p, '\n', r->end - r->p)) == NULL)
		return -1;
	v = strtoll(r->p + 1, NULL, 10);
	r->p = nl + 1;
	return v;
}

long long
rd_array(struct rd *r)
{
	return rd_num(r, '*');
}

long long
rd_int(struct rd *r)
{
	return rd_num(r, ':');
}

bool
rd_bulk(struct rd *r, const char **s, size_t *len)
{
	long long n;

	if (r->p < r->end && r->p[0] == '$' && r->p + 2 < r->end && r->p[1] == '-') {
		rd_num(r, '$');
		return false; /* nil */
	}
	n = rd_num(r, '$');
	if (n < 0 || r->end - r->p < n + 2)
		return false;
	*s = r->p;
	*len = (size_t)n;
	r->p += n + 2;
	return true;
}

bool
rd_error(const struct rbuf *b)
{
	return b->len > 0 && b->p[0] == '-';
}

bool
kv_tx_failed(struct kv_tx *tx)
{
	unsigned i;

	for (i = 0; i < tx->nshards; i++)
		if (rd_error(&tx->parts[i].out)) {
			kv_tx_finish(tx, tx->parts[i].out.p, tx->parts[i].out.len);
			return true;
		}
	return false;
}

/* ---- what shards read for a transaction ---- */

/* argv: [cmd, key...]: for each key, nil if absent, else [type, expire, dump]. */
KV_CMD(gather_dump)
{
	uint32_t i;

	rb_array(x->out, x->argc - 1);
	for (i = 1; i < x->argc; i++) {
		struct kv_entry *e = kv_key_find(x, &x->argv[i], KV_FIND_READ);
		struct rbuf b;

		if (e == NULL) {
			rb_null(x->out);
			continue;
		}
		rb_array(x->out, 3);
		rb_int(x->out, e->type);
		rb_int(x->out, e->expire);
		rb_init(&b, NULL, 0);
		kv_obj_dump(e, &b);
		rb_bulk(x->out, b.p, b.len);
		rb_fini(&b);
	}
}

/* argv: [cmd, key...]: for each key, nil if absent, else [type, length]. */
KV_CMD(gather_probe)
{
	uint32_t i;

	rb_array(x->out, x->argc - 1);
	for (i = 1; i < x->argc; i++) {
		struct kv_entry *e = kv_key_find(x, &x->argv[i], 0);

		if (e == NULL) {
			rb_null(x->out);
			continue;
		}
		rb_array(x->out, 2);
		rb_int(x->out, e->type);
		rb_int(x->out, (long long)kv_obj_elements(e->type, e->enc, e->obj));
	}
}

/* argv: [cmd, key, dump, expire, replace]: install the dump under key (replacing it if
 * replace is "1", else only if absent); ":1" done, ":0" the key was there. */
KV_CMD(tx_install)
{
	struct kv_entry *e;
	struct kv_loaded l;
	long long expire = -1;

	resp_string2ll(x->argv[3].p, x->argv[3].len, &expire);
	if (x->argv[4].p[0] != '1' && kv_key_find(x, &x->argv[1], 0) != NULL) {
		rb_int(x->out, 0);
		return;
	}
	if (kv_obj_load(x->argv[2].p, x->argv[2].len, &l) != 0) {
		rb_error(x->out, kv_err_oom);
		return;
	}
	e = kv_obj_install(x, &x->argv[1], &l);
	if (e == NULL)
		return;
	if (expire != -1)
		kv_set_expire(x->sh->store, e, expire);
	rb_int(x->out, 1);
}

/* argv: [cmd, key...]: delete them. */
KV_CMD(tx_delete)
{
	uint32_t i;

	for (i = 1; i < x->argc; i++)
		kv_delete(x->sh->store, x->argv[i].p, x->argv[i].len, kv_key_hash(x, &x->argv[i]),
			  x->now_ms);
	rb_ok(x->out);
}

/* ---- the element a shard read for the i-th declared key ---- */

/* Read what gather_dump (@p dump) or gather_probe sent for kr->argv[@p idx]. */
bool
kv_tx_probe(struct kv_tx *tx, uint32_t idx, bool dump, struct kv_probe *out)
{
	const struct kv_arg *k = &tx->kr->argv[idx];
	int at = kv_tx_at(tx, key_shard(k));
	struct kpart *p;
	struct rd r;
	uint32_t i;
	long long n;

	memset(out, 0, sizeof(*out));
	if (at < 0)
		return false;
	p = &tx->parts[at];
	if (rd_error(&p->out))
		return false;
	rd_init(&r, &p->out);
	n = rd_array(&r);
	for (i = 1; i < p->argc && (long long)i <= n; i++) {
		bool here = p->argv[i].len == k->len && memcmp(p->argv[i].p, k->p, k->len) == 0;
		const char *s;
		size_t len;

		if (r.p < r.end && r.p[0] == '$') { /* nil: absent */
			rd_bulk(&r, &s, &len);
			if (here)
				return true;
			continue;
		}
		rd_array(&r);
		out->type = rd_int(&r);
		if (dump) {
			out->expire = rd_int(&r);
			rd_bulk(&r, &out->dump, &out->dlen);
		} else {
			(void)rd_int(&r);
		}
		if (here) {
			out->present = true;
			return true;
		}
	}
	return false;
}

/* ---- MGET, MSET, DEL, UNLINK, EXISTS, TOUCH ---- */

static void
multi_keys_done(struct kv_tx *tx)
{
	struct rbuf out;

	rb_init(&out, NULL, 0);
	kv_merge_parts(tx->kr, tx->parts, tx->nshards, &out);
	kv_tx_finish(tx, out.p, out.len);
	rb_fini(&out);
}

/* One step: each shard's part is the command itself on its keys, run as its lock is
 * granted; the replies are merged as the command's merge says. */
void
kv_multi_keys(struct kreq *kr)
{
	const struct kv_cmd *cmd = kr->cmd;
	bool excl = (cmd->flags & KV_WRITE) != 0;
	struct kv_tx *tx = kv_tx_new(kr);
	uint32_t i;

	if (tx == NULL) {
		kreq_finish(kr);
		return;
	}
	for (i = 1; i < kr->argc; i += (uint32_t)cmd->step)
		if (kv_tx_key(tx, i, excl) != 0) {
			kv_tx_finish(tx, "-OOM out of memory\r\n", 20);
			return;
		}
	kv_tx_lock(tx, cmd->fn, (unsigned)cmd->step, multi_keys_done);
}

/* ---- KEYS, DBSIZE, RANDOMKEY, FLUSHDB, FLUSHALL ---- */

static void
multi_all_done(struct kv_tx *tx)
{
	struct kreq *kr = tx->kr;

	/* Every shard's part ran under its lock, and no write reached any of them since:
	 * together one snapshot. The writers may go before the (big) merge. */
	kv_tx_unlock(tx);
	rb_reset(&kr->reply);
	kv_merge_parts(kr, tx->parts, tx->nshards, &kr->reply);
	kv_tx_finish(tx, NULL, 0);
}

/* Every shard locked whole, in ascending order (shared for the reads, exclusive for
 * FLUSH*), each running the command as its lock is granted; released once all are. */
void
kv_multi_all(struct kreq *kr)
{
	bool excl = (kr->cmd->flags & KV_WRITE) != 0;
	struct kv_tx *tx = kv_tx_new(kr);
	unsigned i;

	if (tx == NULL) {
		kreq_finish(kr);
		return;
	}
	for (i = 0; i < kv.nshards; i++)
		kv_tx_whole(tx, i, excl);
	kv_tx_lock(tx, kr->cmd->fn, 1, multi_all_done);
}

/* ---- SCAN over the shards from the cursor's on: one snapshot ---- */

struct scan_all {
	unsigned bits, first;
	unsigned long long local;
	long long count;
	struct kv_arg argv[]; /* the part's own arguments */
};

static unsigned
cursor_bits(void)
{
	unsigned bits = 0;

	while ((1u << bits) < kv.nshards)
		bits++;
	return bits;
}

/* On each shard: SCAN from the cursor's position on its first shard, from 0 on the later
 * ones (argv[1] is the global cursor). */
KV_CMD(scan_part)
{
	unsigned bits = cursor_bits();
	unsigned long long c = 0;
	struct kv_arg *argv = malloc(x->argc * sizeof(*argv));
	char local[24];
	struct kv_ctx y = *x;

	if (argv == NULL) {
		rb_error(x->out, kv_err_oom);
		return;
	}
	memcpy(argv, x->argv, x->argc * sizeof(*argv));
	(void)kv_parse_scan_cursor(&x->argv[1], &c);
	argv[1].p = local;
	argv[1].len = (size_t)snprintf(local, sizeof(local), "%llu",
				       (c & ((1u << bits) - 1)) == x->sh->index ? c >> bits : 0);
	y.argv = argv;
	cmd_scan(&y);
	free(argv);
}

/* The shards' answers in ascending order, as one call that hands on to the next shard
 * while it has fewer than COUNT keys would have seen them. */
static void
scan_all_done(struct kv_tx *tx)
{
	struct kreq *kr = tx->kr;
	struct scan_all *sa = tx->cmd;
	struct rbuf keys;
	unsigned long long next = 0;
	long long total = 0;
	char hdr[64], cur[24];
	unsigned i;
	int h;

	kv_tx_unlock(tx);
	if (kv_tx_failed(tx))
		return;
	rb_init(&keys, NULL, 0);
	for (i = 0; i < tx->nshards; i++) {
		struct rd r;
		const char *c;
		size_t clen;
		long long n;

		rd_init(&r, &tx->parts[i].out);
		rd_array(&r);
		rd_bulk(&r, &c, &clen);
		n = rd_array(&r);
		rb_raw(&keys, r.p, (size_t)(r.end - r.p));
		total += n;
		next = strtoull(c, NULL, 10);
		if (next != 0) {
			next = next << sa->bits | tx->shard[i];
			break;
		}
		if (total >= sa->count || i + 1 == tx->nshards) {
			next = i + 1 < tx->nshards ? tx->shard[i + 1] : 0;
			break;
		}
	}
	snprintf(cur, sizeof(cur), "%llu", next);
	h = snprintf(hdr, sizeof(hdr), "*2\r\n$%zu\r\n%s\r\n*%lld\r\n", strlen(cur), cur, total);
	rb_reset(&kr->reply);
	rb_raw(&kr->reply, hdr, (size_t)h);
	rb_raw(&kr->reply, keys.p, keys.len);
	rb_fini(&keys);
	kv_tx_finish(tx, NULL, 0);
}

/* Every shard from the cursor's on, locked whole and shared in ascending order, each
 * scanned as its lock is granted. */
void
kv_multi_scan(struct kreq *kr, unsigned long long cursor)
{
	struct kv_tx *tx = kv_tx_new(kr);
	struct scan_all *sa;
	unsigned i;

	if (tx == NULL) {
		kreq_finish(kr);
		return;
	}
	sa = calloc(1, sizeof(*sa));
	if (sa == NULL) {
		kv_tx_finish(tx, "-OOM out of memory\r\n", 20);
		return;
	}
	tx->cmd = sa;
	sa->bits = cursor_bits();
	sa->first = (unsigned)(cursor & ((1u << sa->bits) - 1));
	sa->count = 10;
	for (i = 2; i + 1 < kr->argc; i++)
		if (strcasecmp(kr->argv[i].p, "count") == 0)
			resp_string2ll(kr->argv[i + 1].p, kr->argv[i + 1].len, &sa->count);
	for (i = sa->first; i < kv.nshards; i++)
		kv_tx_whole(tx, i, false);
	kv_tx_lock(tx, cmd_scan_part, 1, scan_all_done);
}

/* ---- MSETNX ---- */

/* argv: [cmd, k1, v1, ...]: how many of the keys exist. */
KV_CMD(msetnx_check)
{
	long long n = 0;
	uint32_t i;

	for (i = 1; i + 1 < x->argc; i += 2)
		if (kv_key_find(x, &x->argv[i], 0) != NULL)
			n++;
	rb_int(x->out, n);
}

static void
msetnx_set_done(struct kv_tx *tx)
{
	uint32_t i;

	for (i = 0; i < tx->kr->nparts; i++)
		if (rd_error(&tx->kr->parts[i].out)) {
			kv_tx_finish(tx, tx->kr->parts[i].out.p, tx->kr->parts[i].out.len);
			return;
		}
	kv_tx_finish(tx, ":1\r\n", 4);
}

static void
msetnx_checked(struct kv_tx *tx)
{
	struct kreq *kr = tx->kr;
	unsigned i;

	if (kv_tx_failed(tx))
		return;
	for (i = 0; i < tx->nshards; i++) {
		struct rd r;

		rd_init(&r, &tx->parts[i].out);
		if (rd_int(&r) != 0) {
			kv_tx_finish(tx, ":0\r\n", 4);
			return;
		}
	}
	/* None exists: every shard sets its keys, under the same locks. */
	if (kreq_set_parts(kr, tx->nshards) != 0) {
		kv_tx_finish(tx, "-OOM out of memory in msetnx\r\n", 30);
		return;
	}
	for (i = 0; i < tx->nshards; i++) {
		kr->parts[i].shard = tx->shard[i];
		kr->parts[i].fn = cmd_mset;
		kreq_part_args(&kr->parts[i], tx->parts[i].argc, tx->parts[i].argv);
	}
	kv_tx_steps(tx, msetnx_set_done);
}

void
kv_multi_msetnx(struct kreq *kr)
{
	struct kv_tx *tx = kv_tx_new(kr);
	uint32_t i;

	if (tx == NULL) {
		kreq_finish(kr);
		return;
	}
	for (i = 1; i < kr->argc; i += 2)
		kv_tx_key(tx, i, true);
	kv_tx_lock(tx, cmd_msetnx_check, 2, msetnx_checked);
}

/* ---- RENAME, RENAMENX, COPY: a value moves to a key of another shard ---- */

struct move {
	char expire[24];
	struct kv_arg put[5], del[2];
	bool copy;
};

static void
move_done(struct kv_tx *tx)
{
	struct kreq *kr = tx->kr;
	struct move *m = tx->cmd;
	struct rbuf *o = &kr->parts[0].out;

	if (rd_error(o)) {
		kv_tx_finish(tx, o->p, o->len);
		return;
	}
	if (m->copy)
		kv_tx_finish(tx, o->p, o->len); /* ":1" or ":0" */
	else if (kr->argv[0].len == 8)		/* RENAMENX */
		kv_tx_finish(tx, ":1\r\n", 4);
	else
		kv_tx_finish(tx, "+OK\r\n", 5);
}

/* The source's value and TTL go to the destination; RENAME deletes the source in the
 * same step (both under the locks: nobody sees the key in both places, or in none). */
static void
moved(struct kv_tx *tx)
{
	struct kreq *kr = tx->kr;
	struct move *m = tx->cmd;
	struct kv_probe src, dst;
	bool replace = !m->copy;

	if (kv_tx_failed(tx))
		return;
	kv_tx_probe(tx, 1, true, &src);
	kv_tx_probe(tx, 2, true, &dst);
	if (!src.present) {
		if (m->copy)
			kv_tx_finish(tx, ":0\r\n", 4);
		else
			kv_tx_finish(tx, "-ERR no such key\r\n", 18);
		return;
	}
	if (m->copy) {
		uint32_t j;

		for (j = 3; j < kr->argc; j++)
			if (strcasecmp(kr->argv[j].p, "replace") == 0)
				replace = true;
	}
	if (dst.present && (kr->argv[0].len == 8 || (m->copy && !replace))) {
		kv_tx_finish(tx, ":0\r\n", 4); /* RENAMENX, or COPY without REPLACE */
		return;
	}
	snprintf(m->expire, sizeof(m->expire), "%lld", src.expire);
	m->put[0] = kr->argv[0];
	m->put[1] = kr->argv[2];
	m->put[2].p = src.dump;
	m->put[2].len = src.dlen;
	m->put[3].p = m->expire;
	m->put[3].len = strlen(m->expire);
	m->put[4].p = "1";
	m->put[4].len = 1;
	m->del[0] = kr->argv[0];
	m->del[1] = kr->argv[1];
	if (kreq_set_parts(kr, m->copy ? 1 : 2) != 0) {
		kv_tx_finish(tx, "-OOM out of memory\r\n", 20);
		return;
	}
	kr->parts[0].shard = key_shard(&kr->argv[2]);
	kr->parts[0].fn = cmd_tx_install;
	kreq_part_args(&kr->parts[0], 5, m->put);
	if (!m->copy) {
		kr->parts[1].shard = key_shard(&kr->argv[1]);
		kr->parts[1].fn = cmd_tx_delete;
		kreq_part_args(&kr->parts[1], 2, m->del);
	}
	kv_tx_steps(tx, move_done);
}

static void
move_start(struct kreq *kr, bool copy)
{
	struct kv_tx *tx;
	struct move *m;

	tx = kv_tx_new(kr);
	if (tx == NULL) {
		kreq_finish(kr);
		return;
	}
	m = calloc(1, sizeof(*m));
	if (m == NULL) {
		kv_tx_finish(tx, "-OOM out of memory\r\n", 20);
		return;
	}
	m->copy = copy;
	tx->cmd = m;
	kv_tx_key(tx, 1, !copy);
	kv_tx_key(tx, 2, true);
	kv_tx_lock(tx, cmd_gather_dump, 1, moved);
}

void
kv_multi_rename(struct kreq *kr)
{
	move_start(kr, false);
}

void
kv_multi_copy(struct kreq *kr)
{
	struct kv_ctx x = {.sh = kr->kc->sh, .argc = kr->argc, .argv = kr->argv, .out = &kr->reply};
	bool replace;

	/* The options are checked before any key is touched, as Redis does. */
	if (kv_copy_opts(&x, &replace) != 0) {
		kr->final = &kr->reply;
		kreq_finish(kr);
		return;
	}
	move_start(kr, true);
}

/* ---- the sources of SINTER, ZUNION...: here, or rebuilt from their shards' copies ---- */

int
kv_srcs_get(struct kv_ctx *x, struct kv_tx *tx, const uint32_t *idx, uint32_t n, struct kv_srcs *s)
{
	uint32_t i;

	s->n = n;
	s->e = calloc(n ? n : 1, sizeof(*s->e));
	s->own = calloc(n ? n : 1, sizeof(*s->own));
	if (s->e == NULL || s->own == NULL)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		struct kv_probe p;
		struct kv_loaded l;

		if (tx == NULL) {
			s->e[i] = kv_key_find(x, &x->argv[idx[i]], KV_FIND_READ);
			continue;
		}
		if (!kv_tx_probe(tx, idx[i], true, &p) || !p.present)
			continue;
		s->own[i].type = (unsigned)p.type & 0xf;
		s->e[i] = &s->own[i];
		if (p.type == KV_T_STRING)
			continue; /* only its type matters */
		if (kv_obj_load(p.dump, p.dlen, &l) != 0)
			return -ENOMEM;
		s->own[i].enc = l.enc & 0xf;
		s->own[i].obj = l.obj;
	}
	return 0;
}

void
kv_srcs_free(struct kv_srcs *s)
{
	uint32_t i;

	for (i = 0; s->own != NULL && i < s->n; i++)
		if (s->own[i].obj != NULL && s->own[i].type != KV_T_STRING)
			kv_obj_free(s->own[i].type, s->own[i].enc, s->own[i].obj);
	free(s->e);
	free(s->own);
	s->e = NULL;
	s->own = NULL;
}

bool
kv_srcs_typed(struct kv_ctx *x, const struct kv_srcs *s, unsigned types)
{
	uint32_t i;

	for (i = 0; i < s->n; i++)
		if (s->e[i] != NULL && !((1u << s->e[i]->type) & types)) {
			rb_error(x->out, kv_err_wrongtype);
			return false;
		}
	return true;
}

/* ---- a result computed here, stored under a key of another shard ---- */

struct stored {
	struct kv_arg put[5];
	struct rbuf dump;
	long long n;
	char count[24];
};

static void
stored_fini(void *arg)
{
	struct stored *st = arg;

	if (st != NULL)
		rb_fini(&st->dump);
	free(st);
}

static void
stored_done(struct kv_tx *tx)
{
	struct stored *st = tx->cmd;
	struct rbuf *o = &tx->kr->parts[0].out;
	char r[32];
	int n;

	if (rd_error(o)) {
		kv_tx_finish(tx, o->p, o->len);
		return;
	}
	n = snprintf(r, sizeof(r), ":%lld\r\n", st->n);
	kv_tx_finish(tx, r, (size_t)n);
}

void
kv_tx_store(struct kv_tx *tx, uint32_t dst, struct kv_entry *res, long long n)
{
	struct kreq *kr = tx->kr;
	struct stored *st = calloc(1, sizeof(*st));

	if (st == NULL || kreq_set_parts(kr, 1) != 0) {
		free(st);
		kv_tx_finish(tx, "-OOM out of memory\r\n", 20);
		return;
	}
	tx->cmd = st;
	tx->cmd_fini = stored_fini;
	st->n = n;
	rb_init(&st->dump, NULL, 0);
	st->put[0] = kr->argv[0];
	st->put[1] = kr->argv[dst];
	kr->parts[0].shard = key_shard(&kr->argv[dst]);
	if (n == 0) {
		/* An empty result deletes the destination, as Redis does. */
		kr->parts[0].fn = cmd_tx_delete;
		kreq_part_args(&kr->parts[0], 2, st->put);
	} else {
		kv_obj_dump(res, &st->dump);
		st->put[2].p = st->dump.p;
		st->put[2].len = st->dump.len;
		st->put[3].p = "-1";
		st->put[3].len = 2;
		st->put[4].p = "1";
		st->put[4].len = 1;
		kr->parts[0].fn = cmd_tx_install;
		kreq_part_args(&kr->parts[0], 5, st->put);
	}
	kv_tx_steps(tx, stored_done);
}

/* A command whose sources are read on their shards and whose result is computed here:
 * lock everything (the destination exclusively), bring the copies, run @p compute. */
void
kv_tx_compute(struct kreq *kr, const uint32_t *idx, uint32_t n, int dst, kv_tx_fn compute)
{
	struct kv_tx *tx = kv_tx_new(kr);
	uint32_t i;

	if (tx == NULL) {
		kreq_finish(kr);
		return;
	}
	if (dst >= 0)
		kv_tx_key(tx, (uint32_t)dst, true);
	for (i = 0; i < n; i++)
		if (kv_tx_key(tx, idx[i], false) != 0) {
			kv_tx_finish(tx, "-OOM out of memory\r\n", 20);
			return;
		}
	kv_tx_lock(tx, cmd_gather_dump, 1, compute);
}

/* The context a result computed on the origin is replied into. */
void
kv_tx_ctx(struct kv_tx *tx, struct kv_ctx *x, struct rbuf *out)
{
	memset(x, 0, sizeof(*x));
	x->sh = tx->kr->kc->sh;
	x->argc = tx->kr->argc;
	x->argv = tx->kr->argv;
	x->out = out;
	x->now_ms = tx->kr->now_ms != 0 ? tx->kr->now_ms : kv_now_ms();
}
