/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Commands that need more than one round across shards: RENAME / RENAMENX of a key to a
 * key on another shard, and MSETNX over keys of several shards. When all their keys are
 * on one shard they run there in one step, exactly as Redis runs them (atomic).
 *
 * Across shards they run in phases, each phase a part on one shard, with the client's
 * parsing held meanwhile (nothing it sends later overtakes them). Other clients can run
 * between the phases; doc/guides/kv.md says what that means for each command.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv.h"

/* ---- phases on the shards ---- */

static struct kv_entry *
lookup(struct kv_ctx *x, const struct kv_arg *k)
{
	return kv_lookup(x->sh->store, k->p, k->len, kv_hash(k->p, k->len), x->now_ms);
}

/* argv: [cmd, key]: ":1" if it exists, else ":0". */
KV_CMD(rename_exists)
{
	rb_int(x->out, lookup(x, &x->argv[1]) != NULL ? 1 : 0);
}

/* argv: [cmd, key]: remove the key; reply "$n dump" (objcopy.c) then ":expire", or an
 * error. */
KV_CMD(rename_take)
{
	struct kv_entry *e = lookup(x, &x->argv[1]);
	struct rbuf b;

	if (e == NULL) {
		rb_error(x->out, "ERR no such key");
		return;
	}
	rb_init(&b, NULL, 0);
	kv_obj_dump(e, &b);
	rb_bulk(x->out, b.p, b.len);
	rb_fini(&b);
	rb_int(x->out, e->expire);
	kv_entry_delete(x->sh->store, e);
}

/* argv: [cmd, key, dump, expire, nx]: set it (nx "1": only if absent); ":1" set, ":0"
 * not. */
KV_CMD(rename_put)
{
	const struct kv_arg *k = &x->argv[1];
	long long expire = -1;
	struct kv_entry *e;
	struct kv_loaded l;

	resp_string2ll(x->argv[3].p, x->argv[3].len, &expire);
	if (x->argv[4].p[0] == '1' && lookup(x, k) != NULL) {
		rb_int(x->out, 0);
		return;
	}
	if (kv_obj_load(x->argv[2].p, x->argv[2].len, &l) != 0) {
		rb_error(x->out, "OOM out of memory in rename");
		return;
	}
	e = kv_obj_install(x, k, &l);
	if (e == NULL)
		return;
	if (expire != -1)
		kv_set_expire(x->sh->store, e, expire);
	rb_int(x->out, 1);
}

/* argv: [cmd, k1, v1, k2, v2, ...]: how many of the keys exist. */
KV_CMD(msetnx_check)
{
	long long n = 0;
	uint32_t i;

	for (i = 1; i + 1 < x->argc; i += 2)
		if (lookup(x, &x->argv[i]) != NULL)
			n++;
	rb_int(x->out, n);
}

/* ---- sequencing on the client's lcore ---- */

struct rename_state {
	unsigned src, dst;
	bool nx;
	struct kv_arg put[5];
	char expire[24];
	char answer[128]; /* the client's reply, while the source is being restored */
	size_t alen;
	char value[]; /* the value taken from the source (the state grows to hold it) */
};

static void
finish(struct kreq *kr, const char *reply, size_t n)
{
	struct kconn *kc = kr->kc;

	rb_reset(&kr->reply);
	rb_raw(&kr->reply, reply, n);
	kr->cont = NULL;
	kr->final = &kr->reply;
	kreq_finish(kr); /* may free kr */
	kv_unblock(kc);
}

static void
phase(struct kreq *kr, unsigned shard, void (*fn)(struct kv_ctx *x), uint32_t argc,
      struct kv_arg *argv, kreq_cont_fn next)
{
	kreq_set_parts(kr, 1);
	kr->one.shard = shard;
	kr->one.fn = fn;
	kreq_part_args(&kr->one, argc, argv);
	kr->cont = next;
	kreq_launch(kr);
}

static void rename_taken(struct kreq *kr);

static void
rename_restored(struct kreq *kr)
{
	struct rename_state *st = kr->state;

	finish(kr, st->answer, st->alen);
}

/* Put the taken value back under the source key (only if nobody wrote it meanwhile: the
 * newer value wins), then answer @p reply. */
static void
restore_then_answer(struct kreq *kr, const char *reply, size_t n)
{
	struct rename_state *st = kr->state;

	st->alen = n < sizeof(st->answer) ? n : sizeof(st->answer);
	memcpy(st->answer, reply, st->alen);
	st->put[1] = kr->argv[1];
	st->put[4].p = "1";
	phase(kr, st->src, cmd_rename_put, 5, st->put, rename_restored);
}

static void
rename_put_done(struct kreq *kr)
{
	struct rename_state *st = kr->state;
	struct rbuf *o = &kr->one.out;

	if (o->len > 0 && o->p[0] == '-') {
		/* Could not store the value: put it back where it was, answer the error. */
		char err[128];
		size_t n = o->len < sizeof(err) ? o->len : sizeof(err);

		memcpy(err, o->p, n);
		restore_then_answer(kr, err, n);
		return;
	}
	if (!st->nx) {
		finish(kr, "+OK\r\n", 5);
		return;
	}
	if (o->len > 1 && o->p[1] == '1') {
		finish(kr, ":1\r\n", 4);
		return;
	}
	/* RENAMENX lost a race: the destination appeared after the check. */
	restore_then_answer(kr, ":0\r\n", 4);
}

static void
rename_taken(struct kreq *kr)
{
	struct rename_state *st = kr->state;
	struct rbuf *o = &kr->one.out;
	const char *p = o->p, *end = o->p + o->len, *v;
	long long vlen;

	if (o->len == 0 || p[0] == '-') {
		finish(kr, o->p, o->len);
		return;
	}
	vlen = strtoll(p + 1, NULL, 10);
	v = memchr(p, '\n', (size_t)(end - p)) + 1;
	st = realloc(kr->state, sizeof(*st) + (size_t)vlen + 1);
	if (st == NULL) {
		finish(kr, "-OOM out of memory in rename\r\n", 30);
		return;
	}
	kr->state = st; /* freed with the request */
	memcpy(st->value, v, (size_t)vlen);
	st->value[vlen] = '\0';
	p = v + vlen + 2; /* ":expire" */
	snprintf(st->expire, sizeof(st->expire), "%lld", strtoll(p + 1, NULL, 10));
	st->put[0] = kr->argv[0];
	st->put[1] = kr->argv[2];
	st->put[2].p = st->value;
	st->put[2].len = (size_t)vlen;
	st->put[3].p = st->expire;
	st->put[3].len = strlen(st->expire);
	st->put[4].p = st->nx ? "1" : "0";
	st->put[4].len = 1;
	phase(kr, st->dst, cmd_rename_put, 5, st->put, rename_put_done);
}

static void
renamenx_checked(struct kreq *kr)
{
	struct rename_state *st = kr->state;
	struct rbuf *o = &kr->one.out;

	if (o->len > 0 && o->p[0] == '-') {
		finish(kr, o->p, o->len);
		return;
	}
	if (o->len > 1 && o->p[1] == '1') {
		finish(kr, ":0\r\n", 4);
		return;
	}
	phase(kr, st->src, cmd_rename_take, 2, kr->argv, rename_taken);
}

static void
renamenx_src_checked(struct kreq *kr)
{
	struct rename_state *st = kr->state;
	struct rbuf *o = &kr->one.out;

	if (o->len > 1 && o->p[1] == '0') {
		finish(kr, "-ERR no such key\r\n", 18);
		return;
	}
	/* argv[1..2] = src dst: the check of dst uses argv + 1 as [cmd, dst]. */
	phase(kr, st->dst, cmd_rename_exists, 2, kr->argv + 1, renamenx_checked);
}

static void
rename_start(struct kreq *kr)
{
	struct kconn *kc = kr->kc;
	struct rename_state *st;
	unsigned src = key_shard(&kr->argv[1]), dst = key_shard(&kr->argv[2]);

	if (src == dst) {
		phase(kr, src, cmd_rename_local, kr->argc, kr->argv, NULL);
		return;
	}
	st = calloc(1, sizeof(*st));
	if (st == NULL) {
		kr->cont = NULL;
		rb_error(&kr->reply, "OOM out of memory in rename");
		kr->final = &kr->reply;
		kreq_finish(kr);
		return;
	}
	kr->state = st;
	st->src = src;
	st->dst = dst;
	st->nx = kr->argv[0].len == 8;
	kc->blocked++;
	if (st->nx)
		phase(kr, src, cmd_rename_exists, 2, kr->argv, renamenx_src_checked);
	else
		phase(kr, src, cmd_rename_take, 2, kr->argv, rename_taken);
}

/* ---- MSETNX ---- */

static void
msetnx_set(struct kreq *kr)
{
	struct kpart *bad = NULL;
	uint32_t i;

	for (i = 0; i < kr->nparts; i++)
		if (kr->parts[i].out.len > 0 && kr->parts[i].out.p[0] == '-')
			bad = &kr->parts[i];
	if (bad != NULL)
		finish(kr, bad->out.p, bad->out.len);
	else
		finish(kr, ":1\r\n", 4);
}

static void
msetnx_checked(struct kreq *kr)
{
	uint32_t i;

	for (i = 0; i < kr->nparts; i++) {
		struct rbuf *o = &kr->parts[i].out;

		if (o->len > 0 && o->p[0] == '-') {
			finish(kr, o->p, o->len);
			return;
		}
		if (o->len > 1 && o->p[1] != '0') {
			finish(kr, ":0\r\n", 4);
			return;
		}
	}
	if (kreq_split_keys(kr, 2) != 0) {
		finish(kr, "-OOM out of memory in msetnx\r\n", 30);
		return;
	}
	for (i = 0; i < kr->nparts; i++)
		kr->parts[i].fn = cmd_mset;
	kr->cont = msetnx_set;
	kreq_launch(kr);
}

static void
msetnx_start(struct kreq *kr)
{
	struct kconn *kc = kr->kc;
	uint32_t i;

	if (kreq_split_keys(kr, 2) != 0) {
		rb_error(&kr->reply, "OOM out of memory in msetnx");
		kr->final = &kr->reply;
		kreq_finish(kr);
		return;
	}
	if (kr->nparts == 1) {
		kr->one.fn = cmd_msetnx_local;
		kr->cont = NULL;
		kreq_launch(kr);
		return;
	}
	for (i = 0; i < kr->nparts; i++)
		kr->parts[i].fn = cmd_msetnx_check;
	kc->blocked++;
	kr->cont = msetnx_checked;
	kreq_launch(kr);
}

void
kv_special_dispatch(struct kreq *kr)
{
	if (strcmp(kr->cmd->name, "msetnx") == 0)
		msetnx_start(kr);
	else
		rename_start(kr);
}
