/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * LMPOP and ZMPOP: pop from the first non-empty of several lists or sorted sets. Keys on
 * one shard run there; keys on several are a transaction (txn.h) that locks them all,
 * reads which exist, and pops from the first in argument order on its shard, so the key
 * popped is the one Redis would pop. Their parsing and popping are shared with BLMPOP and
 * BZMPOP (cmd_block.c).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv.h"
#include "t_list.h"
#include "t_zset.h"

bool
kv_mpop_parse(struct kv_ctx *x, uint32_t at, bool zset, struct kv_mpop *m)
{
	long long numkeys;
	uint32_t where, j;
	const char *a = zset ? "min" : "left", *b = zset ? "max" : "right";

	if (!kv_arg_ll_range(x, &x->argv[at], 1, LLONG_MAX, "ERR numkeys should be greater than 0",
			     &numkeys))
		return false;
	if (numkeys >= (long long)x->argc - at - 1) { /* no room for the where */
		rb_error(x->out, kv_err_syntax);
		return false;
	}
	m->first = at + 1;
	m->nkeys = (uint32_t)numkeys;
	where = at + 1 + m->nkeys;
	if (strcasecmp(x->argv[where].p, a) == 0) {
		m->end = true;
	} else if (strcasecmp(x->argv[where].p, b) == 0) {
		m->end = false;
	} else {
		rb_error(x->out, kv_err_syntax);
		return false;
	}
	m->count = -1;
	for (j = where + 1; j < x->argc; j++) {
		if (m->count == -1 && strcasecmp(x->argv[j].p, "count") == 0 && j + 1 < x->argc) {
			j++;
			if (!kv_arg_ll_range(x, &x->argv[j], 1, LLONG_MAX,
					     "ERR count should be greater than 0", &m->count))
				return false;
		} else {
			rb_error(x->out, kv_err_syntax);
			return false;
		}
	}
	if (m->count == -1)
		m->count = 1;
	return true;
}

bool
kv_mpop_here(struct kv_ctx *x, const struct kv_mpop *m, bool zset)
{
	uint32_t i;

	for (i = 0; i < m->nkeys; i++) {
		const struct kv_arg *k = &x->argv[m->first + i];
		struct kv_entry *e = kv_key_find(x, k, 0);
		long long n, j;

		if (e == NULL)
			continue;
		if (e->type != (zset ? KV_T_ZSET : KV_T_LIST)) {
			rb_error(x->out, kv_err_wrongtype);
			return true;
		}
		if (zset) {
			kv_zpop_reply(x, e, !m->end, m->count, ZPOP_NESTED, k);
		} else {
			n = (long long)((struct kv_qlist *)e->obj)->count;
			n = m->count < n ? m->count : n;
			rb_array(x->out, 2);
			rb_bulk(x->out, k->p, k->len);
			rb_array(x->out, n);
			for (j = 0; j < n; j++)
				kv_list_pop_reply(x, e, m->end);
		}
		kv_key_drop_if_empty(x, e);
		return true;
	}
	return false;
}

static void
mpop(struct kv_ctx *x, bool zset)
{
	struct kv_mpop m;

	if (kv_mpop_parse(x, 1, zset, &m) && !kv_mpop_here(x, &m, zset))
		rb_raw(x->out, "*-1\r\n", 5);
}

KV_CMD(lmpop)
{
	mpop(x, false);
}

KV_CMD(zmpop)
{
	mpop(x, true);
}

int
kv_keys_mpop(const struct kv_arg *argv, uint32_t argc, uint32_t *idx, uint32_t max)
{
	uint32_t at = (argv[0].p[0] | 0x20) == 'b' ? 2 : 1, i;
	long long n;

	if (argc <= at || !resp_string2ll(argv[at].p, argv[at].len, &n) || n < 1 ||
	    n >= (long long)argc - at - 1)
		return -1;
	for (i = 0; i < (uint32_t)n && i < max; i++)
		idx[i] = at + 1 + i;
	return (int)i;
}

/* ---- over several shards ---- */

struct mpop_st {
	struct kv_mpop m;
	bool zset;
	struct kv_arg hop[6]; /* [cmd, "1", key, where, "COUNT", n] */
	char count[24];
};

static void
mpop_popped(struct kv_tx *tx)
{
	struct rbuf *o = &tx->kr->parts[0].out;

	kv_tx_finish(tx, o->p, o->len);
}

static void
mpop_probed(struct kv_tx *tx)
{
	struct kreq *kr = tx->kr;
	struct mpop_st *st = tx->cmd;
	uint32_t i;

	for (i = 0; i < st->m.nkeys; i++) {
		const struct kv_arg *k = &kr->argv[st->m.first + i];
		struct kv_probe pr;

		kv_tx_probe(tx, st->m.first + i, false, &pr);
		if (!pr.present)
			continue;
		if (pr.type != (st->zset ? KV_T_ZSET : KV_T_LIST)) {
			kv_tx_finish(tx,
				     "-WRONGTYPE Operation against a key holding the wrong kind of "
				     "value\r\n",
				     68);
			return;
		}
		st->hop[0] = kr->argv[0];
		st->hop[1] = (struct kv_arg){"1", 1};
		st->hop[2] = *k;
		st->hop[3] = kr->argv[st->m.first + st->m.nkeys];
		st->hop[4] = (struct kv_arg){"COUNT", 5};
		st->hop[5].len =
		    (size_t)snprintf(st->count, sizeof(st->count), "%lld", st->m.count);
		st->hop[5].p = st->count;
		if (kreq_set_parts(kr, 1) != 0) {
			kv_tx_finish(tx, "-OOM out of memory\r\n", 20);
			return;
		}
		kr->parts[0].shard = key_shard(k);
		kr->parts[0].fn = st->zset ? cmd_zmpop : cmd_lmpop;
		kreq_part_args(&kr->parts[0], 6, st->hop);
		kv_tx_steps(tx, mpop_popped);
		return;
	}
	kv_tx_finish(tx, "*-1\r\n", 5);
}

void
kv_multi_mpop(struct kreq *kr)
{
	struct kv_ctx x = {.sh = kr->kc->sh, .argc = kr->argc, .argv = kr->argv, .out = &kr->reply};
	bool zset = (kr->argv[0].p[0] | 0x20) == 'z';
	struct mpop_st *st = calloc(1, sizeof(*st));
	struct kv_tx *tx;
	uint32_t i;

	if (st == NULL || !kv_mpop_parse(&x, 1, zset, &st->m)) {
		if (st == NULL)
			rb_error(&kr->reply, kv_err_oom);
		free(st);
		kr->final = &kr->reply;
		kreq_finish(kr);
		return;
	}
	st->zset = zset;
	tx = kv_tx_new(kr);
	if (tx == NULL) {
		free(st);
		kreq_finish(kr);
		return;
	}
	tx->cmd = st;
	for (i = 0; i < st->m.nkeys; i++)
		if (kv_tx_key(tx, st->m.first + i, true) != 0) {
			kv_tx_finish(tx, "-OOM out of memory\r\n", 20);
			return;
		}
	kv_tx_lock(tx, cmd_gather_probe, 1, mpop_probed);
}
