/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * An lcore's mailbox (doc/guides/design.md rule 7): one SPSC ring per source lcore plus one
 * multi-producer ring (HTS or RTS) for threads that are not lcores, and an admission word
 * that lets the owner close the mailbox atomically (rule 5).
 *
 * Admission: a sender takes a *hold* (cr_mailbox_admit) before it enqueues and drops it
 * (cr_mailbox_unadmit) once its messages are in the ring. The owner closes with
 * cr_mailbox_close(); from then on admit fails with -ESHUTDOWN, and once
 * cr_mailbox_quiesced() is true no message can appear any more, so a final drain sees every
 * message that was ever accepted.
 */
#ifndef CR_MAILBOX_H
#define CR_MAILBOX_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cr_config.h"
#include "cr_eal.h"
#include "cr_ring.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CR_MAILBOX_CLOSED (UINT64_C(1) << 63)

/* Doorbell words: a bit per source ring (the lcore rings in src[] order, then the foreign
 * ring). */
#define CR_MAILBOX_BELL_WORDS ((CR_MAX_LCORES + 1 + 63) / 64)

/** A mailbox. Rings are read by the owner only; @c admit and @c bell are shared. */
struct cr_mailbox {
	/* read-only after init */
	struct cr_ring *from[CR_MAX_LCORES]; /**< SPSC ring per source lcore, or NULL */
	struct cr_ring *foreign;	     /**< MP ring for non-lcore threads */
	uint16_t src[CR_MAX_LCORES];	     /**< ids with a ring, in bell-bit order */
	uint16_t bit_of[CR_MAX_LCORES];	     /**< source lcore id -> its bell bit */
	unsigned nsrc;
	/* owner only */
	unsigned next_src; /**< where the next drain starts, for fairness */
	uint64_t owed[CR_MAILBOX_BELL_WORDS]; /**< rings a capped drain left non-empty */
	/* shared: closed bit | number of holds */
	_Alignas(64) _Atomic uint64_t admit;
	/* shared: a sender sets its ring's bit after it enqueues, the owner takes them all */
	_Alignas(64) _Atomic uint64_t bell[CR_MAILBOX_BELL_WORDS];
};

/**
 * Set up @p mb with a ring from every lcore in @p sources, ring sizes @p ring_size and
 * @p foreign_size (powers of two), memory on @p numa_node. The mailbox starts open.
 * @return 0, -EINVAL or -ENOMEM (nothing left allocated).
 */
int cr_mailbox_init(struct cr_mailbox *mb, const struct cr_cpuset *sources, unsigned ring_size,
		    unsigned foreign_size, enum cr_ring_mode foreign_mode, int numa_node);

/** Free the rings. Only once no thread can send any more. */
void cr_mailbox_fini(struct cr_mailbox *mb);

/**
 * Take a hold so that messages enqueued before cr_mailbox_unadmit() are seen by the
 * owner's final drain. Any thread.
 * @return 0, or -ESHUTDOWN when the mailbox is closed (nothing held).
 */
static inline int
cr_mailbox_admit(struct cr_mailbox *mb)
{
	/*
	 * seq_cst RMW: totally ordered with the owner's fetch_or in cr_mailbox_close(), so
	 * either we count before the close (the owner waits for our unadmit) or we see it.
	 */
	uint64_t v = atomic_fetch_add_explicit(&mb->admit, 1, memory_order_seq_cst);

	if (v & CR_MAILBOX_CLOSED) {
		atomic_fetch_sub_explicit(&mb->admit, 1, memory_order_relaxed);
		return -ESHUTDOWN;
	}
	return 0;
}

/** Drop a hold. Release: pairs with the acquire in cr_mailbox_quiesced(). */
static inline void
cr_mailbox_unadmit(struct cr_mailbox *mb)
{
	atomic_fetch_sub_explicit(&mb->admit, 1, memory_order_release);
}

/** Close admission. Owner. Idempotent. */
static inline void
cr_mailbox_close(struct cr_mailbox *mb)
{
	atomic_fetch_or_explicit(&mb->admit, CR_MAILBOX_CLOSED, memory_order_seq_cst);
}

/** Open admission again (a restarted lcore). Owner; only when quiesced and empty. */
static inline void
cr_mailbox_reopen(struct cr_mailbox *mb)
{
	atomic_fetch_and_explicit(&mb->admit, ~CR_MAILBOX_CLOSED, memory_order_seq_cst);
}

/** True when open. A snapshot; any thread. */
static inline bool
cr_mailbox_is_open(const struct cr_mailbox *mb)
{
	return !(atomic_load_explicit(&mb->admit, memory_order_relaxed) & CR_MAILBOX_CLOSED);
}

/**
 * True when closed and no hold is left: every accepted message is in a ring.
 * Acquire: pairs with the release in cr_mailbox_unadmit().
 */
static inline bool
cr_mailbox_quiesced(const struct cr_mailbox *mb)
{
	return atomic_load_explicit(&mb->admit, memory_order_acquire) == CR_MAILBOX_CLOSED;
}

/*
 * Ring the bell of source @p bit: the owner drains only rings whose bit is set, and checks
 * for mail with a load per word. Always an RMW, after the enqueue: a sender that skipped it
 * on seeing the bit set could meet an owner that had just taken the bits and missed its
 * message. Release: pairs with the acquire exchange in cr_mailbox_drain().
 */
static inline void
cr__mailbox_ring_bell(struct cr_mailbox *mb, unsigned bit)
{
	atomic_fetch_or_explicit(&mb->bell[bit >> 6], UINT64_C(1) << (bit & 63),
				 memory_order_release);
}

/** Send from lcore @p src (which must be a source). Caller holds admission. */
static inline unsigned
cr_mailbox_put(struct cr_mailbox *mb, unsigned src, const struct cr_msg *m, unsigned n)
{
	unsigned put = cr_ring_enqueue_burst(mb->from[src], m, n);

	if (put != 0)
		cr__mailbox_ring_bell(mb, mb->bit_of[src]);
	return put;
}

/** Send from a foreign thread. Caller holds admission. */
static inline unsigned
cr_mailbox_put_foreign(struct cr_mailbox *mb, const struct cr_msg *m, unsigned n)
{
	unsigned put = cr_ring_enqueue_burst(mb->foreign, m, n);

	if (put != 0)
		cr__mailbox_ring_bell(mb, mb->nsrc);
	return put;
}

/**
 * Take up to @p max messages from the rings whose bell rang, visiting them round robin
 * from where the last call stopped, so no source starves another; a ring left non-empty
 * (@p max reached) is visited again next time. Owner only.
 * @return the number taken.
 */
unsigned cr_mailbox_drain(struct cr_mailbox *mb, struct cr_msg *out, unsigned max);

/**
 * True when no bell rang since the last drain and it left nothing behind: one load per
 * bell word, no ring scanned. Owner only (the seq_cst fence of a park pairs with the
 * senders' fence after their bell).
 */
static inline bool
cr_mailbox_empty(const struct cr_mailbox *mb)
{
	unsigned w;

	for (w = 0; w < CR_MAILBOX_BELL_WORDS; w++)
		if ((mb->owed[w] | atomic_load_explicit(&mb->bell[w], memory_order_relaxed)) != 0)
			return false;
	return true;
}

/** Messages queued over all rings (a snapshot). Any thread. */
unsigned cr_mailbox_depth(const struct cr_mailbox *mb);

#ifdef __cplusplus
}
#endif
#endif /* CR_MAILBOX_H */
