/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Message rings: DPDK rte_ring set up with rte_ring_init() on our own NUMA-local memory,
 * carrying inline 16-byte {fn, arg} elements (struct cr_msg). No EAL is initialised.
 *
 * Internal to coreact (not installed): it includes DPDK's headers, which need
 * `-include rte_config.h`; apps see messages through cr_msg.h only.
 */
#ifndef CR_RING_H
#define CR_RING_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "cr_msg.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Producer/consumer discipline of a ring. */
enum cr_ring_mode {
	CR_RING_SPSC,	  /**< one producer thread, one consumer thread */
	CR_RING_MPSC_HTS, /**< many producers, head/tail sync: safe under preemption */
	CR_RING_MPSC_RTS, /**< many producers, relaxed tail sync: safe under preemption */
};

/** A ring of struct cr_msg. It is an rte_ring; the type keeps callers off its API. */
struct cr_ring;

/**
 * Create a ring of @p count slots (a power of two; count - 1 usable) on NUMA node
 * @p numa_node (-1: any). Control path.
 * @param name for diagnostics (copied; truncated to the rte_ring limit).
 * @return the ring, or NULL with errno EINVAL (bad count or mode) or ENOMEM.
 */
struct cr_ring *cr_ring_create(const char *name, unsigned count, enum cr_ring_mode mode,
			       int numa_node);

/** Free a ring; NULL is fine. The caller guarantees no thread still uses it. */
void cr_ring_free(struct cr_ring *r);

/** Enqueue up to @p n messages; @return how many were taken (in order, a prefix). */
static inline unsigned
cr_ring_enqueue_burst(struct cr_ring *r, const struct cr_msg *m, unsigned n)
{
	return rte_ring_enqueue_burst_elem((struct rte_ring *)r, m, sizeof(*m), n, NULL);
}

/** Dequeue up to @p n messages into @p m; @return how many. Consumer thread only. */
static inline unsigned
cr_ring_dequeue_burst(struct cr_ring *r, struct cr_msg *m, unsigned n)
{
	return rte_ring_dequeue_burst_elem((struct rte_ring *)r, m, sizeof(*m), n, NULL);
}

/*
 * rte_ring_count() and rte_ring_empty() read the tails with plain loads; these use atomic
 * ones, so a cross-thread peek is well defined (and clean under ThreadSanitizer). The
 * acquire pairs with the release store of the tail in the ring's enqueue/dequeue. The
 * HTS and RTS layouts keep their tail position at the same offset as prod.tail, which DPDK
 * itself relies on.
 */
static inline unsigned
cr__ring_used(const struct rte_ring *r)
{
	uint32_t pt = __atomic_load_n(&r->prod.tail, __ATOMIC_ACQUIRE);
	uint32_t ct = __atomic_load_n(&r->cons.tail, __ATOMIC_ACQUIRE);
	uint32_t n = (pt - ct) & r->mask;

	return n > r->capacity ? r->capacity : n;
}

/** Entries currently queued (a snapshot when producers are active). Any thread. */
static inline unsigned
cr_ring_count(const struct cr_ring *r)
{
	return cr__ring_used((const struct rte_ring *)r);
}

/** True when the ring holds nothing (a snapshot). Any thread. */
static inline bool
cr_ring_empty(const struct cr_ring *r)
{
	const struct rte_ring *rr = (const struct rte_ring *)r;

	return __atomic_load_n(&rr->prod.tail, __ATOMIC_ACQUIRE) ==
	       __atomic_load_n(&rr->cons.tail, __ATOMIC_RELAXED);
}

/** Usable capacity (count - 1). */
static inline unsigned
cr_ring_capacity(const struct cr_ring *r)
{
	return rte_ring_get_capacity((const struct rte_ring *)r);
}

#ifdef __cplusplus
}
#endif
#endif /* CR_RING_H */
