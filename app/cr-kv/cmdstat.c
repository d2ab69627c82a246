/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * INFO commandstats and CONFIG RESETSTAT. Each lcore counts its own clients' commands
 * (calls, time run, rejected, failed) in its shard's cstat[], indexed by the command's
 * table slot (kv_cmd.stat): no lock, no atomic. INFO runs a part on every shard, each
 * appends its non-zero counters to its figures, and the client's lcore adds them up;
 * CONFIG RESETSTAT runs a part on every shard, each zeroing its own.
 */
#include <stdatomic.h>
#include <string.h>

#include "kv.h"

void
kv_cmd_rejected(struct kconn *kc, const struct kv_cmd *cmd)
{
	kc->sh->cstat[cmd->stat].rejected++;
}

void
kv_cmdstat_put(const struct kv_shard *sh, struct rbuf *out)
{
	unsigned i;

	for (i = 1; i < KV_CMDSTAT_MAX; i++) {
		const struct kv_cmdstat *c = &sh->cstat[i];

		if (c->calls == 0 && c->rejected == 0 && c->failed == 0)
			continue;
		rb_int(out, (long long)i);
		rb_int(out, (long long)c->calls);
		rb_int(out, (long long)c->ns);
		rb_int(out, (long long)c->rejected);
		rb_int(out, (long long)c->failed);
	}
}

const struct kv_cmd *
kv_cmd_by_stat(unsigned stat)
{
	unsigned i;

	for (i = 0; i < kv_ncmds; i++) {
		const struct kv_cmd *c = &kv_cmds[i], *s;

		if (c->stat == stat)
			return c;
		for (s = c->sub; s != NULL && s->name != NULL; s++)
			if (s->stat == stat)
				return s;
	}
	return NULL;
}

/* On every shard: its own statistics back to zero (Redis's resetServerStats() and
 * resetCommandTableStats()); the process-wide counters once, by shard 0. */
KV_CMD(config_resetstat)
{
	struct kv_shard *sh = x->sh;

	if (sh == kv_here()) { /* its lcore's: not a moved shard's */
		memset(sh->cstat, 0, sizeof(sh->cstat));
		memset(sh->errstat, 0, sizeof(sh->errstat));
	}
	sh->hits = sh->misses = sh->expired_active = 0;
	sh->tx.tx_total = sh->tx.parked_total = 0;
	kv_store_reset_expired(sh->store);
	kv_evict_resetstat(sh);
	if (sh->index == 0) {
		/* relaxed: statistics, each alone */
		atomic_store_explicit(&kv.conns_total, 0, memory_order_relaxed);
		atomic_store_explicit(&kv.rejected, 0, memory_order_relaxed);
		atomic_store_explicit(&kv.qbuf_closed, 0, memory_order_relaxed);
		atomic_store_explicit(&kv.obuf_closed, 0, memory_order_relaxed);
		atomic_store_explicit(&kv.proto_errors, 0, memory_order_relaxed);
		atomic_store_explicit(&kv.evicted_clients, 0, memory_order_relaxed);
	}
	rb_ok(x->out);
}
