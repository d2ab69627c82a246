/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * WATCH and UNWATCH, and the check EXEC makes (cmd_exec.c).
 *
 * WATCH reads, for each key, its shard's version counter for the key's hash slot (bumped
 * by every write of a key of that slot, expiry included: txlock.c, store.c), the shard's
 * whole generation (bumped by FLUSH*), whether the key is live, and the shard's
 * incarnation; the connection parses nothing further until they are recorded. EXEC
 * reads them again under its locks (watch_probe, as each lock is granted) and compares.
 * Every write bumps its key's counter, so a modified key is always seen modified; a write
 * to another key of the same slot (1 in 65536) is a false "modified" (doc/guides/kv.md
 * lists the others).
 */
#include <stdlib.h>
#include <string.h>

#include "kv.h"

/* ---- the shard's side ---- */

/* argv: [cmd, key...]: for each key of this shard, [version, shard generation, live,
 * shard incarnation] (WATCH records it, EXEC compares); nil for a key of another. */
KV_CMD(watch_probe)
{
	uint32_t i;

	rb_array(x->out, x->argc - 1);
	for (i = 1; i < x->argc; i++) {
		const struct kv_arg *k = &x->argv[i];
		uint64_t h = kv_hash(k->p, k->len);

		if (key_shard_h(k->p, k->len, h) != x->sh->index) {
			rb_null(x->out);
			continue;
		}
		rb_array(x->out, 4);
		rb_int(x->out, x->sh->tx.wver[h & (KV_WVER_SLOTS - 1)]);
		rb_int(x->out, (long long)x->sh->tx.wgen);
		rb_int(x->out, kv_peek(x->sh->store, k->p, k->len, h, x->now_ms) != NULL);
		rb_int(x->out, (long long)x->sh->tx.epoch);
	}
}

/* ---- the client's side ---- */

void
kv_watch_drop(struct kv_watch *w)
{
	while (w != NULL) {
		struct kv_watch *next = w->next;

		free(w);
		w = next;
	}
}


/* Read what watch_probe answered for argv[@p i] of part @p p: false if it did not. */
static bool
probe_read(const struct kpart *p, uint32_t i, long long v[4])
{
	struct rd r;
	long long n;
	uint32_t k, j;

	if (rd_error(&p->out))
		return false;
	rd_init(&r, &p->out);
	n = rd_array(&r);
	for (k = 1; k < p->argc && (long long)k <= n; k++) {
		if (r.p < r.end && r.p[0] == '$') { /* a key of another shard */
			const char *s;
			size_t len;

			rd_bulk(&r, &s, &len);
			continue;
		}
		if (rd_array(&r) != 4)
			return false;
		for (j = 0; j < 4; j++)
			v[j] = rd_int(&r);
		if (k == i)
			return true;
	}
	return false;
}

static void
watch_done(struct kreq *kr)
{
	struct kconn *kc = kr->kc;
	uint32_t i, k;

	kr->cont = NULL;
	rb_reset(&kr->reply);
	for (i = 0; i < kr->nparts; i++)
		if (rd_error(&kr->parts[i].out)) {
			rb_raw(&kr->reply, kr->parts[i].out.p, kr->parts[i].out.len);
			goto out;
		}
	for (i = 0; i < kr->nparts; i++) {
		const struct kpart *p = &kr->parts[i];

		for (k = 1; k < p->argc; k++) {
			struct kv_watch *w = malloc(sizeof(*w) + p->argv[k].len);
			long long v[4];

			if (w == NULL || !probe_read(p, k, v)) {
				free(w);
				rb_reset(&kr->reply);
				rb_error(&kr->reply, kv_err_oom);
				goto out;
			}
			w->ver = v[0];
			w->gen = v[1];
			w->live = v[2];
			w->epoch = v[3];
			w->klen = p->argv[k].len;
			memcpy(w->key, p->argv[k].p, w->klen);
			w->next = kc->watch;
			kc->watch = w;
		}
	}
	rb_ok(&kr->reply);
out:
	kr->final = &kr->reply;
	kreq_finish(kr); /* may free kr */
	kv_unblock(kc);
}

/* Each key's version from its shard (behind any transaction writing it there); the
 * connection parses nothing further until they are recorded, so an EXEC after it
 * compares with them. */
void
kv_watch(struct kconn *kc, const struct kv_cmd *cmd, struct kv_ctx *x)
{
	struct kreq *kr;
	uint32_t i;

	if (kc->mx != NULL) {
		kc_reply_error(kc, "ERR WATCH inside MULTI is not allowed", 37);
		return;
	}
	kr = kreq_new(kc->sh, kc, cmd, x->argc, x->argv);
	if (kr == NULL) {
		kc_abort(kc);
		return;
	}
	kc_enqueue(kc, kr);
	if (kreq_split_keys(kr, 1) != 0) {
		rb_error(&kr->reply, kv_err_oom);
		kr->final = &kr->reply;
		kr->nparts = 0;
		kreq_finish(kr);
		return;
	}
	for (i = 0; i < kr->nparts; i++)
		kr->parts[i].fn = cmd_watch_probe;
	kr->cont = watch_done;
	kc->blocked++;
	kreq_launch(kr);
}

bool
kv_watch_changed(const struct kv_watch *list, const struct kv_tx *tx)
{
	const struct kv_watch *w;
	uint32_t i = 1;

	for (w = list; w != NULL; w = w->next, i++) {
		const struct kv_arg *k = &tx->kr->argv[i];
		int at = kv_tx_at(tx, key_shard(k));
		const struct kpart *p;
		long long v[4];
		uint32_t j;

		if (at < 0)
			return true;
		p = &tx->parts[at];
		for (j = 1; j < p->argc; j++)
			if (p->argv[j].p == k->p)
				break;
		if (j == p->argc || !probe_read(p, j, v))
			return true;
		if (v[0] != w->ver || v[1] != w->gen || v[3] != w->epoch || (w->live && !v[2]))
			return true; /* written, flushed, restarted, or expired (Redis 7.0) */
	}
	return false;
}

KV_CMD(watch)
{
	kv_watch(x->kc, kv_cmd_lookup("watch", 5), x);
}

KV_CMD(unwatch)
{
	kv_watch_drop(x->kc->watch);
	x->kc->watch = NULL;
	rb_ok(x->out);
}
