/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The busy state of an lcore's scripts, in one atomic word per lcore (script_run.c): how
 * many of its scripts are past lua-time-limit, how many of those wrote, and how many
 * times SCRIPT KILL was asked for them. Each busy script keeps its own side (struct
 * kv_ss_script): the kill count when it became busy, and whether it is counted as a
 * writer. So what one script did (wrote, ended) never sticks to another: a script is
 * killed by the kills counted after it became busy, and a writer that ended no longer
 * makes the lcore unkillable.
 *
 * The lcore changes the counts; SCRIPT KILL, from any lcore, adds a kill; every change of
 * a script's fate is a compare-and-swap on the word, so a write and a kill race to one
 * outcome: either the write comes first (the lcore's scripts are unkillable) or the kill
 * does (the write is not run). The kill count is 32 bits: a script would have to miss
 * 2^32 kills between two of its hooks to miss one.
 *
 * SCRIPT KILL over all the lcores answers what it did: it first checks every word
 * (UNKILLABLE if a busy script wrote, and then it kills none), then kills each busy lcore
 * whose scripts did not write; a script that writes between the two phases is not killed,
 * and the answer is OK if at least one lcore's scripts were, else UNKILLABLE.
 *
 * Tested by stepping both sides on one thread, and by threads racing (script_state_ut.c).
 */
#ifndef CR_KV_SCRIPT_STATE_H
#define CR_KV_SCRIPT_STATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define KV_SS_BUSY	 0xffffull	   /* busy scripts of the lcore */
#define KV_SS_WROTE_ONE	 (1ull << 16)	   /* ... of which wrote: unkillable */
#define KV_SS_WROTE	 (0xffffull << 16) /* (their count) */
#define KV_SS_KILL_SHIFT 32		   /* kills asked (a count, mod 2^32) */
#define KV_SS_KILL_ONE	 (1ull << KV_SS_KILL_SHIFT)

/* One busy script's side of its lcore's word (on the lcore only). */
struct kv_ss_script {
	uint32_t kills; /* the lcore's kill count when it became busy */
	bool wrote;	/* counted in the lcore's writers */
};

static inline uint32_t
kv_ss_kills(uint64_t w)
{
	return (uint32_t)(w >> KV_SS_KILL_SHIFT);
}

/* On the lcore: script @p me becomes busy (@p wrote: it already wrote). acq_rel: pairs with
 * kv_ss_kill()'s CAS, so the kill count read is the one a later kill adds to. */
static inline void
kv_ss_busy_begin(_Atomic uint64_t *st, struct kv_ss_script *me, bool wrote)
{
	uint64_t o =
	    atomic_fetch_add_explicit(st, 1 + (wrote ? KV_SS_WROTE_ONE : 0), memory_order_acq_rel);

	me->kills = kv_ss_kills(o);
	me->wrote = wrote;
}

/* On the lcore: busy script @p me ended (its write no longer counts). */
static inline void
kv_ss_busy_end(_Atomic uint64_t *st, struct kv_ss_script *me)
{
	/* release: pairs with the acquire loads of kv_ss_kill() */
	atomic_fetch_sub_explicit(st, 1 + (me->wrote ? KV_SS_WROTE_ONE : 0), memory_order_release);
	me->wrote = false;
}

/* On the lcore: busy script @p me is about to write. @return false if a kill came first (the
 * write must not run). acq_rel: pairs with kv_ss_kill()'s CAS. */
static inline bool
kv_ss_write(_Atomic uint64_t *st, struct kv_ss_script *me)
{
	uint64_t o;

	if (me->wrote)
		return true;
	o = atomic_load_explicit(st, memory_order_acquire);
	do {
		if (kv_ss_kills(o) != me->kills)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(
	    st, &o, o + KV_SS_WROTE_ONE, memory_order_acq_rel, memory_order_acquire));
	me->wrote = true;
	return true;
}

/* On the lcore, from the hook: was busy script @p me killed? (acquire: pairs with the kill) */
static inline bool
kv_ss_kill_asked(_Atomic uint64_t *st, const struct kv_ss_script *me)
{
	return kv_ss_kills(atomic_load_explicit(st, memory_order_acquire)) != me->kills;
}

/* On the lcore: are its other clients to get -BUSY? (relaxed: only it changes the count) */
static inline bool
kv_ss_busy(_Atomic uint64_t *st)
{
	return (atomic_load_explicit(st, memory_order_relaxed) & KV_SS_BUSY) != 0;
}

enum kv_ss_kill_result { KV_SS_NOTBUSY, KV_SS_UNKILLABLE, KV_SS_KILLED };

/* SCRIPT KILL's first phase: NOTBUSY, UNKILLABLE (a busy script wrote: kill none), or
 * KILLED (go on with kv_ss_kill_busy()). Any lcore. */
static inline enum kv_ss_kill_result
kv_ss_kill_check(_Atomic uint64_t *words, unsigned n)
{
	bool busy = false, wrote = false;
	unsigned i;

	for (i = 0; i < n; i++) {
		/* acquire: pairs with the lcores' updates */
		uint64_t s = atomic_load_explicit(&words[i], memory_order_acquire);

		busy |= (s & KV_SS_BUSY) != 0;
		wrote |= (s & KV_SS_WROTE) != 0;
	}
	return !busy ? KV_SS_NOTBUSY : wrote ? KV_SS_UNKILLABLE : KV_SS_KILLED;
}

/* SCRIPT KILL's second phase: a kill for every busy lcore none of whose scripts wrote.
 * @return KILLED if one lcore's scripts were, else UNKILLABLE (they all wrote since the
 * check) or NOTBUSY (they all ended). Any lcore. */
static inline enum kv_ss_kill_result
kv_ss_kill_busy(_Atomic uint64_t *words, unsigned n)
{
	unsigned i, killed = 0, wrote = 0;

	for (i = 0; i < n; i++) {
		uint64_t o = atomic_load_explicit(&words[i], memory_order_acquire);

		/* acq_rel: pairs with kv_ss_write(): a script that wrote first makes this
		 * fail, and one that writes after sees the kill */
		while ((o & KV_SS_BUSY) != 0 && (o & KV_SS_WROTE) == 0)
			if (atomic_compare_exchange_weak_explicit(&words[i], &o, o + KV_SS_KILL_ONE,
								  memory_order_acq_rel,
								  memory_order_acquire)) {
				killed++;
				break;
			}
		if ((o & KV_SS_BUSY) != 0 && (o & KV_SS_WROTE) != 0)
			wrote++;
	}
	return killed != 0 ? KV_SS_KILLED : wrote != 0 ? KV_SS_UNKILLABLE : KV_SS_NOTBUSY;
}

/* SCRIPT KILL, on any lcore, over the words of @p n lcores: both phases. */
static inline enum kv_ss_kill_result
kv_ss_kill(_Atomic uint64_t *words, unsigned n)
{
	enum kv_ss_kill_result r = kv_ss_kill_check(words, n);

	return r == KV_SS_KILLED ? kv_ss_kill_busy(words, n) : r;
}

#endif /* CR_KV_SCRIPT_STATE_H */
