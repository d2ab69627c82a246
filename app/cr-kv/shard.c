/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An lcore's start and stop (its clients' side: timers, the out-queues; freeing what
 * lib/net closed without telling us), and its shards' duties: the home shard's set-up at
 * the process's start, and what a shard takes with it from lcore to lcore when it moves
 * (shardmove.c): its expiry tick, lazy frees, late answers and serving lease.
 */
#include <errno.h>
#include <stdlib.h>

#include "cr_telemetry.h"
#include "kv.h"
#include "script.h"

/* Redis's serverCron at hz 10, for one shard on the lcore that owns it: active expiry,
 * and a millisecond of moving the table's buckets while it is being resized
 * (activerehashing). */
static void
shard_tick(struct cr_timer *t, void *arg)
{
	struct kv_shard *sh = arg;
	struct kv_mem *prev = kv_mem_swap(&sh->mem);
	unsigned n = kv_store_expire_cycle(sh->store, kv_now_ms(), &sh->rng, 16);

	sh->expired_active += n;
	if (n > 0)
		cr_telemetry_add(kv.tel_expired, n);
	kv_store_rehash_for(sh->store, 1000 * 1000ull);
	kv_lazy_kick(sh);
	kv_evict_kick(sh);
	kv_metrics_tick(sh);
	kv_mem_swap(prev);
	cr_timer_start(t, 100 * 1000 * 1000ull);
}

/* The clients' side's tick, on the lcore of @p arg. */
static void
lcore_tick(struct cr_timer *t, void *arg)
{
	struct kv_shard *sh = arg;

	kv_climem_tick(sh);
	kv_outq_tick(sh);
	(void)kv_mem_peak(kv_used_memory()); /* INFO's used_memory_peak, as Redis's cron */
	cr_timer_start(t, 100 * 1000 * 1000ull);
}

/* The shard's duties start on this lcore (its home at the start, or an adopter). */
static void
duties_start(struct kv_shard *sh)
{
	/* relaxed: see kv_shard_owned() */
	atomic_store_explicit(&sh->owner, cr_lcore_id(), memory_order_relaxed);
	if (sh == kv_here())
		kv_mem_bind(&sh->mem); /* the home shard: charged by default */
	cr_timer_init(&sh->expire_timer, shard_tick, sh);
	cr_timer_start(&sh->expire_timer, 100 * 1000 * 1000ull);
	kv_tx_adopt(sh);
	kv_lazy_adopt(sh);
	kv_evict_adopt(sh);
	kv_metrics_tick(sh);
}

static void
duties_stop(struct kv_shard *sh)
{
	cr_timer_stop(&sh->expire_timer);
	kv_lazy_give(sh);
	kv_evict_give(sh);
	kv_tx_give(sh);
	if (sh == kv_here())
		kv_mem_bind(NULL);
	atomic_store_explicit(&sh->owner, CR_LCORE_NONE, memory_order_relaxed);
}

void
kv__move_give(unsigned s)
{
	struct kv_shard *sh = kv_shard_at(s);

	duties_stop(sh);
	cr_telemetry_add(kv.tel_moved_out, 1);
}

void
kv__move_adopt(unsigned s)
{
	struct kv_shard *sh = kv_shard_at(s);

	duties_start(sh);
	cr_telemetry_add(kv.tel_moved_in, 1);
}

int
kv_shard_start(unsigned lcore)
{
	struct kv_shard *sh = kv.shards[lcore];
	bool first = !sh->shard_ready;

	sh->closing = false;
	cr_timer_init(&sh->closing_timer, NULL, NULL);
	sh->oepoch++;
	if (first) {
		/* The shard's side, once: from now on it moves rather than stops. */
		kv_mem_bind(&sh->mem);
		if (kv_tx_shard_init(sh) != 0)
			return -ENOMEM;
		kv_bw_init(sh);
		kv_lazy_init(sh);
		kv_evict_init(sh);
		sh->shard_ready = true;
	}
	if (kv_ps_init(sh) != 0)
		return -ENOMEM;
	kv_tx_origin_init(sh);
	kv_xshard_init(sh);
	kv_bp_init(sh);
	kv_outq_init(sh);
	kv_climem_init(sh);
	cr_timer_init(&sh->lcore_tick, lcore_tick, sh);
	cr_timer_start(&sh->lcore_tick, 100 * 1000 * 1000ull);
	kv_move_lcore_start(lcore, first);
	if (first)
		duties_start(sh);
	else
		kv_mem_bind(NULL); /* its shard comes back by message (shardmove.c) */
	return 0;
}

/* A shutdown stops the lcore that owns @p sh: its waiters and queued parts are answered
 * (an error, if they could not run), its locks dropped. */
static void
shard_fini(struct kv_shard *sh)
{
	struct kv_mem *prev = kv_mem_swap(&sh->mem);

	duties_stop(sh);
	kv_lazy_fini(sh);
	kv_evict_fini(sh);
	kv_bw_fini(sh); /* before the late answers' last flush */
	kv_tx_shard_fini(sh);
	kv_mem_swap(prev);
}

void
kv_shard_stop(unsigned lcore)
{
	struct kv_shard *sh = kv.shards[lcore];
	struct kconn *kc;
	unsigned s;

	cr_timer_stop(&sh->lcore_tick);
	if (cr_timer_armed(&sh->closing_timer))
		cr_timer_stop(&sh->closing_timer);
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
	/* The shards this lcore owns: only in a shutdown (a retiring lcore gave them all
	 * away before its lease went). */
	for (s = 0; s < kv.nshards; s++)
		if (kv_shard_owned(kv_shard_at(s)))
			shard_fini(kv_shard_at(s));
	kv_bp_fini(sh);
	kv_ps_fini(sh); /* after its clients, who dropped their subscriptions */
	kv_tx_origin_fini(sh);
	kv_xshard_fini(sh);
	kv_script_shard_fini(lcore); /* after the requests, whose scripts it held */
	kreq_free_list(sh);
	kv_move_lcore_stop(lcore);
	kv_mem_bind(NULL); /* the counters live in the shards, which main() frees */
}
