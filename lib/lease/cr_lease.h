/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Leases: a retirement hold on the current lcore for a long-lived, thread-affine owner
 * (doc/guides/design.md "Lifecycle and leases").
 *
 * While a lease is held, its lcore does not finish retiring and a graceful shutdown waits
 * for it (up to the shutdown timeout): the lcore keeps its mailbox open and keeps serving
 * in bounded turns, so the owner's messages, timers and I/O still reach it there.
 *
 * What a lease does NOT do: it does not pin any task or keep work from being placed
 * elsewhere (lcores share nothing; an owner's state is only ever touched on its lcore
 * anyway); it does not make a forced shutdown wait (past the timeout, or
 * cr_shutdown_force(), the lcore stops with the lease still active — the lease's memory
 * stays safe to release and free afterwards, but whatever the owner held is not cleaned
 * up for it); it does not drive the owner's progress or cancel anything; it does not
 * survive its lcore's incarnation (after a forced stop and a restart, releasing the old
 * lease is a no-op).
 *
 * Copies: a lease is identified by its address. A byte copy of an active lease (struct
 * assignment, memcpy) is not a second hold: cr_lease_active() is false for it and
 * releasing it returns -EINVAL and does nothing. To move a hold to another struct, use
 * cr_lease_move().
 */
#ifndef CR_LEASE_H
#define CR_LEASE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A lease; caller-owned, zero-initialised (CR_LEASE_INIT) before first use. */
struct cr_lease {
	_Atomic(struct cr_lease *) self; /* private: == this struct while held */
	unsigned lcore;			 /* read-only: diagnostics */
	uint64_t incarnation;		 /* read-only: diagnostics */
};

#define CR_LEASE_INIT {NULL, 0, 0}

/**
 * Take a retirement hold on the current lcore.
 * @param l an inactive lease (zeroed, or released).
 * @return 0; -EPERM off an lcore; -ESHUTDOWN the lcore is retiring or shutting down
 *         (admission closed: the hold was not counted); -EBUSY @p l is already active.
 */
int cr_lease_acquire(struct cr_lease *l);

/**
 * Release the hold and wake the lcore so its retirement can progress. Idempotent; any
 * thread, also after the runtime was torn down (then it only marks @p l inactive).
 * Concurrent release of the same lease from two threads releases once.
 * @return 0 released; -EALREADY not active (already released, or never acquired);
 *         -EINVAL @p l is a byte copy of a lease, not the lease itself (nothing done).
 */
int cr_lease_release(struct cr_lease *l);

/** True while @p l holds its lcore (false for a copy). Any thread. */
bool cr_lease_active(const struct cr_lease *l);

/** The lcore @p l was acquired on (diagnostics only; not a handle). */
unsigned cr_lease_lcore(const struct cr_lease *l);

/** The incarnation of that lcore at acquisition (diagnostics only). */
uint64_t cr_lease_incarnation(const struct cr_lease *l);

/**
 * Move the hold of @p src into @p dst (which must be inactive); @p src becomes inactive.
 * Serialize with any other use of either struct.
 * @return 0; -EALREADY @p src not active; -EBUSY @p dst active.
 */
int cr_lease_move(struct cr_lease *dst, struct cr_lease *src);

#ifdef __cplusplus
}
#endif
#endif /* CR_LEASE_H */
