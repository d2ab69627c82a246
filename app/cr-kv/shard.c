/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A shard's start on its lcore (timers, the out-queues) and stop (freeing what lib/net
 * closed without telling us).
 */
#include <errno.h>
#include <stdlib.h>

#include "cr_telemetry.h"
#include "kv.h"
#include "script.h"

/* Redis's serverCron at hz 10: active expiry, and a millisecond of moving the table's
 * buckets while it is being resized (activerehashing). */
static void
shard_tick(struct cr_timer *t, void *arg)
{
	struct kv_shard *sh = arg;
	unsigned n = kv_store_expire_cycle(sh->store, kv_now_ms(), &sh->rng, 16);

	sh->expired_active += n;
	if (n > 0)
		cr_telemetry_add(kv.tel_expired, n);
	kv_store_rehash_for(sh->store, 1000 * 1000ull);
	kv_lazy_kick(sh);
	kv_evict_kick(sh);
	kv_climem_tick(sh);
	kv_outq_tick(sh);
	(void)kv_mem_peak(kv_used_memory()); /* INFO's used_memory_peak, as Redis's cron */
	kv_metrics_tick(sh);
	cr_timer_start(t, 100 * 1000 * 1000ull);
}

int
kv_shard_start(unsigned lcore)
{
	struct kv_shard *sh = kv.shards[lcore];

	kv_mem_bind(&sh->mem);
	sh->closing = false;
	cr_timer_init(&sh->closing_timer, NULL, NULL);
	if (kv_tx_shard_init(sh) != 0 || kv_ps_init(sh) != 0)
		return -ENOMEM;
	kv_xshard_init(sh);
	kv_bw_init(sh);
	kv_bp_init(sh);
	kv_lazy_init(sh);
	kv_evict_init(sh);
	kv_outq_init(sh);
	kv_climem_init(sh);
	cr_timer_init(&sh->expire_timer, shard_tick, sh);
	cr_timer_start(&sh->expire_timer, 100 * 1000 * 1000ull);
	kv_metrics_tick(sh);
	return 0;
}

void
kv_shard_stop(unsigned lcore)
{
	struct kv_shard *sh = kv.shards[lcore];
	struct kconn *kc;

	cr_timer_stop(&sh->expire_timer);
	if (cr_timer_armed(&sh->closing_timer))
		cr_timer_stop(&sh->closing_timer);
	kv_lazy_fini(sh);
	kv_evict_fini(sh);
	kv_outq_fini(sh);
	kv_climem_fini(sh);
	/* Connections lib/net closed without on_close (the lcore stopped): free their
	 * state. Every call was answered before this hook runs. */
	while ((kc = sh->conns) != NULL) {
		struct kreq *kr;

		kc->bpop = NULL; /* its request is freed below, not cancelled */
		kc_gone(kc);
		while ((kr = kc->head) != NULL) {
			kc->head = kr->next;
			kreq_free(sh, kr);
		}
		kconn_free(kc);
	}
	kv_bw_fini(sh); /* before the late answers' last flush */
	kv_bp_fini(sh);
	kv_ps_fini(sh); /* after its clients, who dropped their subscriptions */
	kv_tx_shard_fini(sh);
	kv_xshard_fini(sh);
	kv_script_shard_fini(lcore); /* after the requests, whose scripts it held */
	kreq_free_list(sh);
	kv_mem_bind(NULL); /* the counter lives in sh, which main() frees */
}
