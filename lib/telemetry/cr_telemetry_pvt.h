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

#ifdef __cplusplus
}
#endif
#endif /* CR_TELEMETRY_PVT_H */
