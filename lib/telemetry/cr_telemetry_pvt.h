/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Inline fast paths of cr_telemetry.h. Included by it; do not include directly.
 */
#ifndef CR_TELEMETRY_PVT_H
#define CR_TELEMETRY_PVT_H

#ifndef CR_TELEMETRY_H
#error "include cr_telemetry.h, not cr_telemetry_pvt.h"
#endif

#include <stdatomic.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * One lcore's app counter slots. Private. Each row starts on its own cache line and is
 * written only by its lcore, so updates never bounce a line between cores.
 */
struct cr__tel_row {
	_Alignas(64) _Atomic uint64_t v[CR_TELEMETRY_MAX_COUNTERS];
};

/** Private: every lcore's row, indexed by lcore id. */
extern struct cr__tel_row cr__tel_rows[CR_MAX_LCORES];

/* Private: the calling lcore's slot @p id, or NULL off an lcore or for a bad id. */
static inline _Atomic uint64_t *
cr__tel_slot(int id)
{
	unsigned lcore = cr_lcore_id();

	if (lcore >= CR_MAX_LCORES || id < 0 || id >= CR_TELEMETRY_MAX_COUNTERS)
		return NULL;
	return &cr__tel_rows[lcore].v[id];
}

/**
 * Add @p v to app counter @p id (from cr_telemetry_counter_register()) on the calling
 * lcore. The owner is the only writer, so this is a relaxed load and store, no locked
 * instruction; telemetry's relaxed loads may see it late but never torn. Lcore only: off an
 * lcore, or with a bad id, it does nothing.
 */
static inline void
cr_telemetry_add(int id, uint64_t v)
{
	_Atomic uint64_t *p = cr__tel_slot(id);

	/* relaxed: pairs with the relaxed load in cr_telemetry_counter_read(); a counter
	 * orders nothing else. */
	if (p != NULL)
		atomic_store_explicit(p, atomic_load_explicit(p, memory_order_relaxed) + v,
				      memory_order_relaxed);
}

/**
 * Set app gauge @p id to @p v on the calling lcore. Lcore only: off an lcore, or with a bad
 * id, it does nothing.
 */
static inline void
cr_telemetry_set(int id, uint64_t v)
{
	_Atomic uint64_t *p = cr__tel_slot(id);

	/* relaxed: as in cr_telemetry_add() */
	if (p != NULL)
		atomic_store_explicit(p, v, memory_order_relaxed);
}

/** Private: a histogram's bounds; written once before the count covering it is published. */
struct cr__tel_hist_def {
	unsigned n;
	uint64_t bounds[CR_TELEMETRY_HIST_MAX_BOUNDS];
};

/** Private: histograms registered (release when one is added). */
extern _Atomic unsigned cr__tel_n_hists;
extern struct cr__tel_hist_def cr__tel_hist_defs[CR_TELEMETRY_MAX_HISTOGRAMS];

/** Private: the index of a histogram's sum in its row, after the +Inf bucket. */
#define CR__TEL_HIST_SUM (CR_TELEMETRY_HIST_MAX_BOUNDS + 1)

/**
 * Private: one lcore's histogram buckets (not cumulative) and sums, written only by its
 * lcore, like the counter rows.
 */
struct cr__tel_hist_row {
	_Alignas(64) _Atomic uint64_t v[CR_TELEMETRY_MAX_HISTOGRAMS][CR__TEL_HIST_SUM + 1];
};

extern struct cr__tel_hist_row cr__tel_hist_rows[CR_MAX_LCORES];

/* Private: add @p v to a slot only its lcore writes (see cr_telemetry_add()). */
static inline void
cr__tel_bump(_Atomic uint64_t *p, uint64_t v)
{
	/* relaxed: pairs with the relaxed loads of cr_telemetry_histogram_read() */
	atomic_store_explicit(p, atomic_load_explicit(p, memory_order_relaxed) + v,
			      memory_order_relaxed);
}

/**
 * Count @p ns in histogram @p id (from cr_telemetry_histogram_register()) on the calling
 * lcore: a binary search of the bounds, then two relaxed load/store pairs in the lcore's
 * own row; no lock, no locked instruction, no allocation. Lcore only: off an lcore, or
 * with an id not registered, it does nothing.
 */
static inline void
cr_telemetry_observe_ns(int id, uint64_t ns)
{
	unsigned lcore = cr_lcore_id(), lo = 0, hi;
	const struct cr__tel_hist_def *d;
	_Atomic uint64_t *row;

	/* acquire: pairs with the release in cr_telemetry_histogram_register(); the bounds
	 * of a counted histogram are complete */
	if (lcore >= CR_MAX_LCORES || id < 0 || id >= CR_TELEMETRY_MAX_HISTOGRAMS ||
	    (unsigned)id >= atomic_load_explicit(&cr__tel_n_hists, memory_order_acquire))
		return;
	d = &cr__tel_hist_defs[id];
	hi = d->n;
	/* The first bound >= ns; none: the +Inf bucket at [n]. */
	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;

		if (ns <= d->bounds[mid])
			hi = mid;
		else
			lo = mid + 1;
	}
	row = cr__tel_hist_rows[lcore].v[id];
	cr__tel_bump(&row[lo], 1);
	cr__tel_bump(&row[CR__TEL_HIST_SUM], ns);
}

#ifdef __cplusplus
}
#endif
#endif /* CR_TELEMETRY_PVT_H */
