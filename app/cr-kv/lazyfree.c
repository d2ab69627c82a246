/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Lazy freeing on the shard's lcore: while its store has values queued for freeing (big
 * deleted collections, a table flushed with ASYNC), a deferred task frees a bounded
 * number of elements per loop turn and defers itself again, so I/O and other tasks run
 * between the steps (DESIGN rule 3) and no command waits for a free.
 */
#include "kv.h"

/* Elements freed per turn: about a millisecond of free() calls and their merging. */
#define LAZY_BUDGET 1024u

static void lazy_task(void *arg);

static void
lazy_timer(struct cr_timer *t, void *arg)
{
	(void)t;
	lazy_task(arg);
}

static void
arm(struct kv_shard *sh)
{
	sh->lazy_armed = true;
	if (cr_defer(lazy_task, sh) != 0)
		cr_timer_start(&sh->lazy_timer, 1000 * 1000ull); /* defer queue full: in 1 ms */
}

static void
lazy_task(void *arg)
{
	struct kv_shard *sh = arg;
	struct kv_mem *prev;
	bool more;

	if (!kv_shard_owned(sh))
		return; /* deferred before the shard moved away: its new owner frees them */
	prev = kv_mem_swap(&sh->mem);
	sh->lazy_armed = false;
	more = kv_store_lazy_step(sh->store, LAZY_BUDGET);
	kv_mem_settle(); /* merge this step's freed blocks now, a step's worth at a time */
	if (more)
		arm(sh);
	kv_mem_swap(prev);
}

void
kv_lazy_kick(struct kv_shard *sh)
{
	if (!sh->lazy_armed && kv_store_lazy_pending(sh->store) != 0)
		arm(sh);
}

void
kv_lazy_init(struct kv_shard *sh)
{
	cr_timer_init(&sh->lazy_timer, lazy_timer, sh);
}

/* The shard leaves this lcore: a lazy_task() already deferred here does nothing. */
void
kv_lazy_give(struct kv_shard *sh)
{
	cr_timer_stop(&sh->lazy_timer);
	sh->lazy_armed = false;
}

void
kv_lazy_adopt(struct kv_shard *sh)
{
	cr_timer_init(&sh->lazy_timer, lazy_timer, sh);
	kv_lazy_kick(sh);
}

void
kv_lazy_fini(struct kv_shard *sh)
{
	cr_timer_stop(&sh->lazy_timer);
	sh->lazy_armed = false;
}
