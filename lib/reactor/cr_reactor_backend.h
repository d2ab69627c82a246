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

/** A driver's operations. Unless noted, on the owning lcore's thread only. */
struct cr_backend_ops {
	const char *name;
	/** 0 when the driver can run here, else -errno with a reason in @p why. Any thread. */
	int (*probe)(char *why, size_t len);
	/** Create the backend of lcore @p lcore on its own thread. @return 0 or -errno. */
	int (*init)(struct cr_backend **out, unsigned lcore, const struct cr_eal_config *cfg);
	/** Tear down; the driver waits for everything the kernel may still touch. NULL ok. */
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
	 * next submit; the reactor submits at the end of every turn, or (poll_submits) in
	 * the next turn's poll, which follows at once.
	 */
	void (*wake_from_lcore)(struct cr_backend *self, struct cr_backend *target);
	/** Wake @p target's lcore from a thread that is not an lcore. Any thread. */
	void (*wake_from_foreign)(struct cr_backend *target);
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
