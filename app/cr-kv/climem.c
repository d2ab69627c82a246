/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Client memory and Redis 7.0's client eviction (maxmemory-clients).
 *
 * A client's memory is its connection state, its query buffer's allocation and its
 * output waiting in the app (outq.c); lib/net's queue, at most a slice per connection, is
 * not counted. Each lcore keeps its clients' total and adds it into one process-wide
 * atomic (INFO's mem_clients_normal). When that total is over the limit, the client
 * taking the most memory is closed first, then the next, until the total is under it.
 *
 * Which one is the biggest is asked across lcores without touching another lcore's
 * connections (rule 1): each lcore publishes the size of its own biggest client as it
 * grows and whenever it looks; the lcore that finds the total over the limit evicts its own biggest if no
 * other lcore has published a bigger one, and otherwise sends that lcore a message to
 * run the same pass. A published size may be stale (the client has shrunk or gone): the
 * pass there publishes a fresh one and, if the biggest is now elsewhere, passes the turn
 * on; every pass looks again, so this settles.
 */
#include <errno.h>
#include <stdatomic.h>

#include "cr_log.h"
#include "kv.h"

CR_LOG_COMPONENT(climem_log, "app.kv")

#define EVICT_RETRY_NS (1000 * 1000ull)
/* Ticks (100 ms) per window of INFO's client_recent_max_*: two windows are reported. */
#define RECENT_TICKS 20u

uint64_t
kv_maxmemory_clients(void)
{
	long long v = atomic_load_explicit(&kv.maxmemory_clients, memory_order_relaxed);

	if (v >= 0)
		return (uint64_t)v;
	return kv_maxmemory() / 100 * (uint64_t)-v;
}

static bool
over_limit(void)
{
	uint64_t lim = kv_maxmemory_clients();

	/* acquire: pairs with the release in kc_mem_update() */
	return lim != 0 && atomic_load_explicit(&kv.clients_mem, memory_order_acquire) > lim;
}

static size_t
mem_now(const struct kconn *kc)
{
	if (kc->conn == NULL)
		return 0;
	return sizeof(*kc) + kc->qcap + 1 + kc->oq_alloc;
}

/* A peak of the current window, read by INFO on any lcore (relaxed: a figure). */
static void
note_peak(_Atomic uint64_t *slot, uint64_t v)
{
	if (v > atomic_load_explicit(slot, memory_order_relaxed))
		atomic_store_explicit(slot, v, memory_order_relaxed);
}

static void evict_kick(struct kv_shard *sh);

void
kc_mem_update(struct kconn *kc)
{
	struct kv_shard *sh = kc->sh;
	size_t now = mem_now(kc), was = kc->mem;

	if (now == was)
		return;
	kc->mem = now;
	sh->clients_mem += now - was; /* unsigned: wraps back for a shrink */
	if (!kc->no_evict && now > atomic_load_explicit(&sh->biggest_client, memory_order_relaxed))
		atomic_store_explicit(&sh->biggest_client, now, memory_order_relaxed);
	/* release: an lcore that sees this growth in the total (the acquire in over_limit())
	 * also sees this client published as its lcore's biggest, so it does not evict a
	 * smaller one of its own for it */
	atomic_fetch_add_explicit(&kv.clients_mem, (uint64_t)(now - was), memory_order_release);
	if (now < was)
		return;
	note_peak(&sh->recent_in[sh->recent_cur], kc->qcap);
	note_peak(&sh->recent_out[sh->recent_cur], kc->oq_alloc);
	if (over_limit())
		evict_kick(sh);
}

/* This lcore's biggest client, published for the other lcores' passes. */
static struct kconn *
biggest(struct kv_shard *sh)
{
	struct kconn *kc, *big = NULL;

	/* A client that said CLIENT NO-EVICT on counts in the total but is never chosen. */
	for (kc = sh->conns; kc != NULL; kc = kc->next)
		if (kc->conn != NULL && !kc->no_evict && (big == NULL || kc->mem > big->mem))
			big = kc;
	/* relaxed: a hint for choosing; the pass where it lives looks again */
	atomic_store_explicit(&sh->biggest_client, big != NULL ? big->mem : 0,
			      memory_order_relaxed);
	return big;
}

/* The other shard that published the biggest client, and its size. */
static struct kv_shard *
biggest_elsewhere(struct kv_shard *sh, uint64_t *size)
{
	struct kv_shard *best = NULL;
	unsigned i;

	*size = 0;
	for (i = 0; i < kv.nshards; i++) {
		struct kv_shard *o = kv.shards[kv.shard_lcore[i]];
		uint64_t v;

		if (o == sh)
			continue;
		v = atomic_load_explicit(&o->biggest_client, memory_order_relaxed);
		if (v > *size) {
			*size = v;
			best = o;
		}
	}
	return best;
}

static void
evict_msg(void *arg)
{
	evict_kick(arg);
}

static void
evict(struct kconn *kc)
{
	atomic_fetch_add_explicit(&kv.evicted_clients, 1, memory_order_relaxed);
	CR_LOG(climem_log, WARNING,
	       "client %llu evicted: it took %zu bytes, clients take %llu of maxmemory-clients "
	       "%llu",
	       (unsigned long long)kc->id, kc->mem,
	       (unsigned long long)atomic_load_explicit(&kv.clients_mem, memory_order_relaxed),
	       (unsigned long long)kv_maxmemory_clients());
	kc_abort(kc);
}

/* Deferred, so that no client being evicted is in a callback on the stack. */
static void
evict_pass(void *arg)
{
	struct kv_shard *sh = arg;

	/* relaxed: the flag only collapses kicks; the pass reads everything afresh */
	atomic_store_explicit(&sh->evict_pending, false, memory_order_relaxed);
	while (over_limit()) {
		struct kconn *big = biggest(sh);
		struct kv_shard *other;
		uint64_t osize;

		other = biggest_elsewhere(sh, &osize);
		if (other != NULL && (big == NULL || osize > big->mem)) {
			/* Its lcore evicts it (or, finding it gone, passes the turn on). */
			if (cr_send(other->lcore, evict_msg, other) == 0)
				return;
			/* Its lcore is offline (its clients were closed) or its mailbox is
			 * full: do not wait for it; a full one publishes again at its tick. */
			atomic_store_explicit(&other->biggest_client, 0, memory_order_relaxed);
			continue;
		}
		if (big == NULL)
			return;
		evict(big);
	}
	(void)biggest(sh);
}

static void
evict_timer_fired(struct cr_timer *t, void *arg)
{
	(void)t;
	evict_pass(arg);
}

static void
evict_kick(struct kv_shard *sh)
{
	if (atomic_exchange_explicit(&sh->evict_pending, true, memory_order_relaxed))
		return;
	if (cr_defer(evict_pass, sh) != 0 && !cr_timer_armed(&sh->evict_timer))
		cr_timer_start(&sh->evict_timer, EVICT_RETRY_NS);
}

void
kv_climem_tick(struct kv_shard *sh)
{
	if (++sh->recent_ticks >= RECENT_TICKS) {
		struct kconn *kc;
		unsigned cur = sh->recent_cur ^ 1u;

		/* A new window starts with what the clients hold now. */
		sh->recent_ticks = 0;
		atomic_store_explicit(&sh->recent_in[cur], 0, memory_order_relaxed);
		atomic_store_explicit(&sh->recent_out[cur], 0, memory_order_relaxed);
		sh->recent_cur = cur;
		for (kc = sh->conns; kc != NULL; kc = kc->next) {
			note_peak(&sh->recent_in[cur], kc->qcap);
			note_peak(&sh->recent_out[cur], kc->oq_alloc);
		}
	}
	if (kv_maxmemory_clients() == 0)
		return;
	if (over_limit())
		evict_kick(sh); /* a CONFIG SET lowered it, or a message was refused */
	else
		(void)biggest(sh);
}

static uint64_t
recent_max(size_t off)
{
	uint64_t m = 0;
	unsigned i, j;

	for (i = 0; i < kv.nshards; i++) {
		struct kv_shard *sh = kv.shards[kv.shard_lcore[i]];
		_Atomic uint64_t *w = (_Atomic uint64_t *)((char *)sh + off);

		for (j = 0; j < 2; j++) {
			uint64_t v = atomic_load_explicit(&w[j], memory_order_relaxed);

			m = v > m ? v : m;
		}
	}
	return m;
}

uint64_t
kv_recent_max_input(void)
{
	return recent_max(offsetof(struct kv_shard, recent_in));
}

uint64_t
kv_recent_max_output(void)
{
	return recent_max(offsetof(struct kv_shard, recent_out));
}

void
kv_climem_init(struct kv_shard *sh)
{
	atomic_store_explicit(&sh->evict_pending, false, memory_order_relaxed);
	cr_timer_init(&sh->evict_timer, evict_timer_fired, sh);
}

void
kv_climem_fini(struct kv_shard *sh)
{
	cr_timer_stop(&sh->evict_timer);
}
