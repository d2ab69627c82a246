/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The interface between the reactor and an I/O driver: park, wake and poll. The reactor
 * knows no I/O by name; drivers/io/uring, drivers/io/epoll and the test harness implement
 * this table. For driver writers, not for apps; a library that keeps per-lcore state uses
 * cr_reactor_module.h instead.
 */
#ifndef CR_REACTOR_BACKEND_H
#define CR_REACTOR_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "cr_eal.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Per-lcore backend state, defined by each driver. */
struct cr_backend;

/**
 * An lcore's wake channel for wakers that do not ride on a ring of their own: foreign
 * threads, lease releases, lifecycle requests, a failed lcore-to-lcore wake. The driver
 * makes it once per lcore record (wake_init) and the reactor keeps it for the runtime's
 * whole life, across incarnations, so a waker always finds it alive: a wake aimed at an
 * incarnation that has ended lands in the next one as a harmless spurious wake.
 */
struct cr_wake {
	int fd;		    /**< an eventfd, or -1 (the test harness) */
	_Atomic int woken;  /**< raised by a wake after its write; the driver clears it */
	_Atomic uint64_t signals; /**< foreign wakes written (diagnostics and tests) */
};

/** A driver's operations. Unless noted, on the owning lcore's thread only. */
struct cr_backend_ops {
	const char *name;
	/** 0 when the driver can run here, else -errno with a reason in @p why. Any thread. */
	int (*probe)(char *why, size_t len);
	/** Make lcore record's wake channel (once per runtime, control thread). 0 or -errno. */
	int (*wake_init)(struct cr_wake *w);
	/** Close it: no waker can reach it any more. */
	void (*wake_fini)(struct cr_wake *w);
	/**
	 * Create the backend of lcore @p lcore on its own thread, listening on @p wake (which
	 * outlives it). @return 0 or -errno.
	 */
	int (*init)(struct cr_backend **out, unsigned lcore, struct cr_wake *wake,
		    const struct cr_eal_config *cfg);
	/**
	 * Tear down; the driver waits for everything the kernel may still touch, and closes
	 * its ring. NULL ok.
	 */
	void (*fini)(struct cr_backend *be);
	/**
	 * Reap up to @p budget completions. @return how many (wake completions included);
	 * adds the number of wake signals among them to @p *wakes.
	 */
	unsigned (*poll)(struct cr_backend *be, unsigned budget, uint64_t *wakes);
	/** True when completions are waiting (cheap, no syscall). */
	bool (*pending)(struct cr_backend *be);
	/** Hand queued submissions (wakes included) to the kernel. */
	void (*submit)(struct cr_backend *be);
	/**
	 * Sleep until a completion, a wake or @p timeout_ns passes (UINT64_MAX: no timeout).
	 * Submits queued work first.
	 */
	void (*park)(struct cr_backend *be, uint64_t timeout_ns);
	/**
	 * Wake @p target's lcore from lcore @p self (on self's thread). May ride on self's
	 * next submit: the reactor calls this only while it holds the target's mailbox
	 * admission, and keeps holding it until its next submit, so @p target (and its
	 * ring) cannot go away before the wake is handed to the kernel. A wake that cannot
	 * be delivered that way goes through @p target_wake with wake_from_foreign.
	 */
	void (*wake_from_lcore)(struct cr_backend *self, struct cr_backend *target,
				struct cr_wake *target_wake);
	/** Wake the lcore listening on @p w. Any thread, at any time while the runtime is up. */
	void (*wake_from_foreign)(struct cr_wake *w);
	/** The driver's I/O operations (struct cr_io_driver_ops, lib/io); NULL if none. */
	const void *io;
	/**
	 * poll() submits what is queued before it reaps. After a turn that did work (the
	 * next turn follows at once) the reactor then leaves the submit to that turn's poll,
	 * so one kernel entry both submits and collects (io_uring with DEFER_TASKRUN).
	 */
	bool poll_submits;
};

/** Register a driver (drivers do it from a constructor). At most 8. */
void cr_backend_register(const struct cr_backend_ops *ops);

/** A registered driver by name, or NULL. */
const struct cr_backend_ops *cr_backend_find(const char *name);

/** The current lcore's backend, or NULL off an lcore. */
struct cr_backend *cr_reactor_backend(void);

/** The backend ops in use, or NULL before init. */
const struct cr_backend_ops *cr_reactor_backend_ops(void);

/** Register @p ops at load time. */
#define CR_BACKEND_REGISTER(ops)                                                           \
	__attribute__((constructor)) static void cr_backend_register_##ops(void)           \
	{                                                                                  \
		cr_backend_register(&(ops));                                               \
	}

#ifdef __cplusplus
}
#endif
#endif /* CR_REACTOR_BACKEND_H */
