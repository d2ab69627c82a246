/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Set commands over several keys, as Redis 7.0's t_set.c: SMOVE, SINTER, SINTERCARD,
 * SINTERSTORE, SUNION, SUNIONSTORE, SDIFF, SDIFFSTORE. Each runs in one step when its
 * keys share a shard; across shards as a transaction (cmd_multi.c): the algebra is
 * computed on the client's lcore from copies of the sources, read under the locks, and
 * a STORE's result is stored under its destination's lock.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv.h"
#include "t_set.h"

enum { OP_UNION, OP_DIFF, OP_INTER };

static size_t
size_of(const struct kv_entry *e)
{
	return e != NULL ? set_len(e) : 0;
}

static int
by_size(const void *a, const void *b)
{
	size_t x = size_of(*(struct kv_entry *const *)a), y = size_of(*(struct kv_entry *const *)b);

	return x < y ? -1 : x > y ? 1 : 0;
}

/*
 * @p op over the sources (all of them sets or absent): the members into @p res (a new set,
 * intset first, as Redis starts one), or only their number (@p card, stopping at
 * @p limit, 0: no limit). @return 0 or -ENOMEM.
 */
static int
compute(struct kv_srcs *s, int op, unsigned long limit, struct kv_entry *res, unsigned long *card)
{
	struct kv_entry **sets = s->e;
	struct set_iter it;
	const char *m;
	size_t len;
	uint32_t i, j;

	if (res != NULL) {
		res->type = KV_T_SET;
		res->enc = KV_ENC_INTSET;
		res->obj = set_new_intset();
		if (res->obj == NULL)
			return -ENOMEM;
	}
	if (card != NULL)
		*card = 0;
	if (op == OP_INTER) {
		for (i = 0; i < s->n; i++)
			if (sets[i] == NULL)
				return 0; /* with an empty set: empty */
		qsort(sets, s->n, sizeof(*sets), by_size);
		set_iter_init(&it, sets[0]);
		while (set_iter_next(&it, &m, &len)) {
			for (j = 1; j < s->n; j++)
				if (sets[j] != sets[0] && !set_has(sets[j], m, len))
					break;
			if (j < s->n)
				continue;
			if (card != NULL) {
				if (++*card == limit)
					break;
			} else if (set_add(res, m, len) < 0) {
				set_iter_end(&it);
				return -ENOMEM;
			}
		}
		set_iter_end(&it);
		return 0;
	}
	for (i = 0; i < s->n; i++) {
		if (sets[i] == NULL)
			continue;
		if (op == OP_DIFF && i > 0)
			break;
		set_iter_init(&it, sets[i]);
		while (set_iter_next(&it, &m, &len)) {
			if (op == OP_DIFF) {
				for (j = 1; j < s->n; j++)
					if (sets[j] != NULL && set_has(sets[j], m, len))
						break;
				if (j < s->n)
					continue;
			}
			if (set_add(res, m, len) < 0) {
				set_iter_end(&it);
				return -ENOMEM;
			}
		}
		set_iter_end(&it);
	}
	return 0;
}

/* The argv indices of the sources: from @p from on. */
static uint32_t *
indices(uint32_t argc, uint32_t from, uint32_t n)
{
	uint32_t *idx = malloc((n ? n : 1) * sizeof(*idx)), i;

	for (i = 0; idx != NULL && i < n; i++)
		idx[i] = from + i;
	(void)argc;
	return idx;
}

/* Compute over the sources of @p x (looked up, or from @p tx's copies) and reply, or
 * store under argv[@p dst]; @p op as compute(). */
static void
setop(struct kv_ctx *x, struct kv_tx *tx, uint32_t from, uint32_t n, int dst, int op)
{
	struct kv_srcs s = {0};
	struct kv_entry res = {0};
	uint32_t *idx = indices(x->argc, from, n);

	if (idx == NULL || kv_srcs_get(x, tx, idx, n, &s) != 0) {
		rb_error(x->out, kv_err_oom);
		goto out;
	}
	if (!kv_srcs_typed(x, &s, 1u << KV_T_SET))
		goto out;
	if (compute(&s, op, 0, &res, NULL) != 0) {
		rb_error(x->out, kv_err_oom);
		goto out;
	}
	if (dst < 0) {
		kv_set_reply_all(x, &res);
	} else if (tx != NULL) {
		/* stored by the caller, under the destination's lock */
		free(idx);
		kv_srcs_free(&s);
		kv_tx_store(tx, (uint32_t)dst, &res, (long long)set_len(&res));
		set_free(res.enc, res.obj);
		return;
	} else if (set_len(&res) == 0) {
		kv_delete(x->sh->store, x->argv[dst].p, x->argv[dst].len,
			  kv_key_hash(x, &x->argv[dst]), x->now_ms);
		rb_int(x->out, 0);
	} else {
		long long len = (long long)set_len(&res);

		if (kv_key_add(x, &x->argv[dst], KV_T_SET, res.enc, res.obj) != NULL)
			rb_int(x->out, len);
		res.obj = NULL; /* taken, or freed */
	}
out:
	if (res.obj != NULL)
		set_free(res.enc, res.obj);
	kv_srcs_free(&s);
	free(idx);
	if (tx != NULL)
		kv_tx_finish(tx, x->out->p, x->out->len);
}

/* ---- one shard ---- */

KV_CMD(sinter)
{
	setop(x, NULL, 1, x->argc - 1, -1, OP_INTER);
}

KV_CMD(sunion)
{
	setop(x, NULL, 1, x->argc - 1, -1, OP_UNION);
}

KV_CMD(sdiff)
{
	setop(x, NULL, 1, x->argc - 1, -1, OP_DIFF);
}

KV_CMD(sinterstore)
{
	setop(x, NULL, 2, x->argc - 2, 1, OP_INTER);
}

KV_CMD(sunionstore)
{
	setop(x, NULL, 2, x->argc - 2, 1, OP_UNION);
}

KV_CMD(sdiffstore)
{
	setop(x, NULL, 2, x->argc - 2, 1, OP_DIFF);
}

/* SINTERCARD numkeys key... [LIMIT limit]: the arguments' checks, in Redis's order. */
static bool
sintercard_args(struct kv_ctx *x, long long *numkeys, long long *limit)
{
	uint32_t j;

	*limit = 0;
	if (!kv_arg_ll_range(x, &x->argv[1], 1, LLONG_MAX, "ERR numkeys should be greater than 0",
			     numkeys))
		return false;
	if (*numkeys > (long long)x->argc - 2) {
		rb_error(x->out, "ERR Number of keys can't be greater than number of args");
		return false;
	}
	for (j = 2 + (uint32_t)*numkeys; j < x->argc; j++) {
		if (strcasecmp(x->argv[j].p, "limit") == 0 && j + 1 < x->argc) {
			if (!kv_arg_positive(x, &x->argv[++j], "ERR LIMIT can't be negative",
					     limit))
				return false;
		} else {
			rb_error(x->out, kv_err_syntax);
			return false;
		}
	}
	return true;
}

static void
sintercard(struct kv_ctx *x, struct kv_tx *tx)
{
	long long numkeys, limit;
	struct kv_srcs s = {0};
	unsigned long card;
	uint32_t *idx = NULL;

	if (!sintercard_args(x, &numkeys, &limit))
		goto out;
	idx = indices(x->argc, 2, (uint32_t)numkeys);
	if (idx == NULL || kv_srcs_get(x, tx, idx, (uint32_t)numkeys, &s) != 0) {
		rb_error(x->out, kv_err_oom);
		goto out;
	}
	if (!kv_srcs_typed(x, &s, 1u << KV_T_SET))
		goto out;
	compute(&s, OP_INTER, (unsigned long)limit, NULL, &card);
	rb_int(x->out, (long long)card);
out:
	kv_srcs_free(&s);
	free(idx);
	if (tx != NULL)
		kv_tx_finish(tx, x->out->p, x->out->len);
}

KV_CMD(sintercard)
{
	sintercard(x, NULL);
}

int
kv_keys_sintercard(const struct kv_arg *argv, uint32_t argc, uint32_t *idx, uint32_t max)
{
	long long n;
	uint32_t i;

	if (!resp_string2ll(argv[1].p, argv[1].len, &n) || n < 1 || n > (long long)argc - 2)
		return -1;
	for (i = 0; i < (uint32_t)n && i < max; i++)
		idx[i] = 2 + i;
	return (int)i;
}

/* ---- across shards ---- */

static void
computed(struct kv_tx *tx)
{
	struct kreq *kr = tx->kr;
	const char *name = kr->cmd->name;
	bool store = strstr(name, "store") != NULL;
	int op = strncmp(name, "sinter", 6) == 0   ? OP_INTER
		 : strncmp(name, "sunion", 6) == 0 ? OP_UNION
						   : OP_DIFF;
	struct kv_ctx x;
	struct rbuf out;

	rb_init(&out, NULL, 0);
	kv_tx_ctx(tx, &x, &out);
	if (strcmp(name, "sintercard") == 0)
		sintercard(&x, tx);
	else if (store)
		setop(&x, tx, 2, kr->argc - 2, 1, op);
	else
		setop(&x, tx, 1, kr->argc - 1, -1, op);
	rb_fini(&out);
}

void
kv_multi_setop(struct kreq *kr)
{
	uint32_t small[64], *idx = small;
	int n = kv_cmd_keys(kr->cmd, kr->argv, kr->argc, idx, 64);
	bool store = strstr(kr->cmd->name, "store") != NULL;

	if (n == 64 && kr->argc > 64) {
		idx = malloc(kr->argc * sizeof(*idx));
		n = idx != NULL ? kv_cmd_keys(kr->cmd, kr->argv, kr->argc, idx, kr->argc) : -1;
	}
	if (n < 0) {
		rb_error(&kr->reply, kv_err_oom);
		kreq_finish(kr);
	} else if (store) {
		kv_tx_compute(kr, idx + 1, (uint32_t)n - 1, 1, computed); /* idx[0] is dst */
	} else {
		kv_tx_compute(kr, idx, (uint32_t)n, -1, computed);
	}
	if (idx != small)
		free(idx);
}

/* ---- SMOVE ---- */

KV_CMD(smove)
{
	const struct kv_arg *m = &x->argv[3];
	struct kv_entry *src = kv_key_find(x, &x->argv[1], 0), *dst;

	if (src == NULL) {
		rb_int(x->out, 0);
		return;
	}
	dst = kv_key_find(x, &x->argv[2], 0);
	if (src->type != KV_T_SET || (dst != NULL && dst->type != KV_T_SET)) {
		rb_error(x->out, kv_err_wrongtype);
		return;
	}
	if (src == dst) {
		rb_int(x->out, set_has(src, m->p, m->len));
		return;
	}
	if (!set_rem(src, m->p, m->len)) {
		rb_int(x->out, 0);
		return;
	}
	kv_key_drop_if_empty(x, src);
	if (dst == NULL && (dst = kv_set_create(x, &x->argv[2], m)) == NULL)
		return;
	if (set_add(dst, m->p, m->len) < 0) {
		rb_error(x->out, kv_err_oom);
		return;
	}
	rb_int(x->out, 1);
}

/* argv: [cmd, key, member]: SREM of one member, the key deleted if emptied; ":1"/":0". */
KV_CMD(tx_srem)
{
	struct kv_entry *e = kv_key_find(x, &x->argv[1], 0);
	bool gone = e != NULL && set_rem(e, x->argv[2].p, x->argv[2].len);

	if (gone)
		kv_key_drop_if_empty(x, e);
	rb_int(x->out, gone);
}

/* argv: [cmd, key, member]: SADD of one member (the set made if absent). */
KV_CMD(tx_sadd)
{
	struct kv_entry *e = kv_key_find(x, &x->argv[1], 0);

	if (e == NULL && (e = kv_set_create(x, &x->argv[1], &x->argv[2])) == NULL)
		return;
	if (set_add(e, x->argv[2].p, x->argv[2].len) < 0)
		rb_error(x->out, kv_err_oom);
	else
		rb_int(x->out, 1);
}

struct smove_st {
	struct kv_arg args[3];
};

static void
smove_added(struct kv_tx *tx)
{
	struct rbuf *o = &tx->kr->parts[0].out;

	kv_tx_finish(tx, o->p, o->len);
}

static void
smove_removed(struct kv_tx *tx)
{
	struct kreq *kr = tx->kr;
	struct smove_st *st = tx->cmd;
	struct rbuf *o = &kr->parts[0].out;

	if (rd_error(o) || o->len < 2 || o->p[1] != '1') {
		kv_tx_finish(tx, o->p, o->len); /* not a member: 0 */
		return;
	}
	st->args[1] = kr->argv[2];
	kreq_set_parts(kr, 1);
	kr->parts[0].shard = key_shard(&kr->argv[2]);
	kr->parts[0].fn = cmd_tx_sadd;
	kreq_part_args(&kr->parts[0], 3, st->args);
	kv_tx_steps(tx, smove_added);
}

static void
smove_probed(struct kv_tx *tx)
{
	struct kreq *kr = tx->kr;
	struct kv_probe src, dst;
	struct smove_st *st;

	kv_tx_probe(tx, 1, false, &src);
	kv_tx_probe(tx, 2, false, &dst);
	if (!src.present) {
		kv_tx_finish(tx, ":0\r\n", 4);
		return;
	}
	if (src.type != KV_T_SET || (dst.present && dst.type != KV_T_SET)) {
		kv_tx_finish(
		    tx, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
		    68);
		return;
	}
	st = calloc(1, sizeof(*st));
	if (st == NULL || kreq_set_parts(kr, 1) != 0) {
		free(st);
		kv_tx_finish(tx, "-OOM out of memory\r\n", 20);
		return;
	}
	tx->cmd = st;
	st->args[0] = kr->argv[0];
	st->args[1] = kr->argv[1];
	st->args[2] = kr->argv[3];
	kr->parts[0].shard = key_shard(&kr->argv[1]);
	kr->parts[0].fn = cmd_tx_srem;
	kreq_part_args(&kr->parts[0], 3, st->args);
	kv_tx_steps(tx, smove_removed);
}

void
kv_multi_smove(struct kreq *kr)
{
	struct kv_tx *tx = kv_tx_new(kr);

	if (tx == NULL) {
		kreq_finish(kr);
		return;
	}
	kv_tx_key(tx, 1, true);
	kv_tx_key(tx, 2, true);
	kv_tx_lock(tx, cmd_gather_probe, 1, smove_probed);
}
