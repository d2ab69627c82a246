/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The busy state of an lcore's scripts, in one atomic word per lcore (script_run.c): how
 * many of its scripts are past lua-time-limit, whether one of those wrote, and a kill
 * request. The lcore changes the count and sets WROTE; SCRIPT KILL, from any lcore, sets
 * KILL; every change is a compare-and-swap, so a write and a kill race to one outcome:
 * either the write comes first (the script is unkillable) or the kill does (the write is
 * not run). Tested by stepping both sides on one thread (script_state_ut.c).
 */
#ifndef CR_KV_SCRIPT_STATE_H
#define CR_KV_SCRIPT_STATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define KV_SS_BUSY  0xffffu    /* busy scripts of the lcore */
#define KV_SS_WROTE (1u << 16) /* one of them wrote: unkillable */
#define KV_SS_KILL  (1u << 17) /* SCRIPT KILL asked for them to stop */

/* On the lcore: a script becomes busy (@p wrote: it already wrote). */
static inline void
kv_ss_busy_begin(_Atomic uint32_t *st, bool wrote)
{
	uint32_t o = atomic_load_explicit(st, memory_order_relaxed), n;

	do
		n = (o + 1) | (wrote ? KV_SS_WROTE : 0);
	while (!atomic_compare_exchange_weak_explicit(st, &o, n, memory_order_acq_rel,
						      memory_order_relaxed));
}

/* On the lcore: a busy script ended; the last one clears the kill and the write. */
static inline void
kv_ss_busy_end(_Atomic uint32_t *st)
{
	uint32_t o = atomic_load_explicit(st, memory_order_relaxed), n;

	do {
		n = o - 1;
		if ((n & KV_SS_BUSY) == 0)
			n = 0;
	} while (!atomic_compare_exchange_weak_explicit(st, &o, n, memory_order_acq_rel,
							memory_order_relaxed));
}

/* On the lcore: a busy script is about to write. @return false if a kill came first (the
 * write must not run). acq_rel: pairs with kv_ss_kill()'s CAS. */
static inline bool
kv_ss_write(_Atomic uint32_t *st)
{
	uint32_t o = atomic_load_explicit(st, memory_order_acquire);

	do {
		if (o & KV_SS_KILL)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(
	    st, &o, o | KV_SS_WROTE, memory_order_acq_rel, memory_order_acquire));
	return true;
}

/* On the lcore, from the hook: was a kill asked for? (acquire: pairs with the kill) */
static inline bool
kv_ss_kill_asked(_Atomic uint32_t *st)
{
	return (atomic_load_explicit(st, memory_order_acquire) & KV_SS_KILL) != 0;
}

/* On the lcore: are its other clients to get -BUSY? (relaxed: only it changes the count) */
static inline bool
kv_ss_busy(_Atomic uint32_t *st)
{
	return (atomic_load_explicit(st, memory_order_relaxed) & KV_SS_BUSY) != 0;
}

enum kv_ss_kill_result { KV_SS_NOTBUSY, KV_SS_UNKILLABLE, KV_SS_KILLED };

/* SCRIPT KILL, on any lcore, over the words of @p n lcores: every busy lcore whose scripts
 * did not write gets KILL; if a busy one wrote, UNKILLABLE. */
static inline enum kv_ss_kill_result
kv_ss_kill(_Atomic uint32_t *words, unsigned n)
{
	bool busy = false, wrote = false;
	unsigned i;

	for (i = 0; i < n; i++) {
		uint32_t s = atomic_load_explicit(&words[i], memory_order_acquire);

		busy |= (s & KV_SS_BUSY) != 0;
		wrote |= (s & KV_SS_BUSY) != 0 && (s & KV_SS_WROTE) != 0;
	}
	if (!busy)
		return KV_SS_NOTBUSY;
	for (i = 0; i < n && !wrote; i++) {
		uint32_t o = atomic_load_explicit(&words[i], memory_order_acquire);

		/* acq_rel: pairs with kv_ss_write(): a script that wrote first makes this
		 * fail, and one that writes after sees the kill */
		while ((o & KV_SS_BUSY) != 0 && !(o & KV_SS_WROTE) &&
		       !atomic_compare_exchange_weak_explicit(&words[i], &o, o | KV_SS_KILL,
							      memory_order_acq_rel,
							      memory_order_acquire))
			;
		if ((o & KV_SS_BUSY) != 0 && (o & KV_SS_WROTE))
			wrote = true;
	}
	return wrote ? KV_SS_UNKILLABLE : KV_SS_KILLED;
}

#endif /* CR_KV_SCRIPT_STATE_H */
