/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cr-kv's own Prometheus series, per shard: coreact_kv_keys{shard="i"} and
 * coreact_kv_memory_bytes{shard="i"} (doc/guides/kv.md, "Telemetry"). They are written by
 * a collector on the telemetry thread, which reads what each shard's lcore publishes: the
 * key count, stored at the shard's 100 ms tick, and the shard's memory counter (mem.h),
 * both with relaxed loads. The command-time histogram is the slow log's (slowlog.c).
 */
#include <stdio.h>
#include <stdatomic.h>

#include "cr_telemetry.h"
#include "kv.h"

/* By shard index; written by the shard's lcore only. */
static _Atomic uint64_t shard_keys[CR_MAX_LCORES];

void
kv_metrics_tick(struct kv_shard *sh)
{
	/* relaxed: a statistic; pairs with the relaxed load in collect() */
	atomic_store_explicit(&shard_keys[sh->index], kv_store_count(sh->store),
			      memory_order_relaxed);
}

static void
collect(struct cr_prom *p, void *arg)
{
	char idx[16];
	unsigned i;

	(void)arg;
	cr_prom_family(p, "kv_keys", CR_TELEMETRY_GAUGE,
		       "Keys in the shard, expired ones not yet removed included (sampled every "
		       "100 ms).");
	for (i = 0; i < kv.nshards; i++) {
		snprintf(idx, sizeof(idx), "%u", i);
		cr_prom_sample(p,
			       (double)atomic_load_explicit(&shard_keys[i], memory_order_relaxed),
			       "shard", idx, NULL);
	}
	cr_prom_family(p, "kv_memory_bytes", CR_TELEMETRY_GAUGE,
		       "Heap taken by the shard's keys and values (their blocks' usable size plus "
		       "the allocator's header), as INFO's used_memory sums it.");
	for (i = 0; i < kv.nshards; i++) {
		snprintf(idx, sizeof(idx), "%u", i);
		cr_prom_sample(p, (double)kv_mem_used(&kv.shards[kv.shard_lcore[i]]->mem), "shard",
			       idx, NULL);
	}
}

int
kv_metrics_register(void)
{
	int rc = kv_slowlog_register();

	return rc != 0 ? rc : cr_telemetry_prom_register(collect, NULL);
}
