/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Retirement holds: what lib/lease builds leases on. Internal to coreact, never
 * installed: apps take holds through cr_lease.h.
 */
#ifndef REACTOR_HOLD_H
#define REACTOR_HOLD_H

#include <stdbool.h>
#include <stdint.h>

/*
 * Take a hold on the current lcore, atomically with its retirement admission: either the
 * hold is counted before a retire or shutdown starts to drain, or this fails.
 * @p incarnation receives the lcore's incarnation, which cr_reactor_unhold() needs.
 * Returns 0; -EPERM off an lcore; -ESHUTDOWN admission closed (retiring, shutting down).
 */
int cr_reactor_hold(unsigned *lcore, uint64_t *incarnation);

/*
 * Drop a hold taken by cr_reactor_hold() and wake the lcore so retirement can progress.
 * Any thread. A hold of an earlier incarnation (the lcore was torn down and restarted
 * since) is ignored. Returns true if a hold was dropped.
 */
bool cr_reactor_unhold(unsigned lcore, uint64_t incarnation);

#endif /* REACTOR_HOLD_H */
