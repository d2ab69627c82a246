/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The interface between the reactor and a library above it that keeps per-lcore state
 * (lib/io, lib/net, lib/offload, lib/app): the reactor starts, asks and stops each module
 * on every lcore, every incarnation. For library writers, not for apps; an I/O driver
 * uses cr_reactor_backend.h instead.
 */
#ifndef CR_REACTOR_MODULE_H
#define CR_REACTOR_MODULE_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * A library above the reactor (lib/io, lib/net, ...) that keeps per-lcore state. Modules
 * are told of each event in registration order (their dependency order), and stopped in
 * the reverse. lcore_start runs on the lcore after its backend is up and before the app's
 * start hook; lcore_stop runs on the lcore after the app's stop hook, before the backend
 * goes.
 */
struct cr_reactor_module {
	const char *name;
	int (*lcore_start)(unsigned lcore);
	/**
	 * The lcore begins closing, before the app's on_retire or on_shutdown hook:
	 * @p shutdown false for a retire, true for a shutdown (given again, with true, if
	 * a shutdown overtakes a retire). The module winds its work there down by itself
	 * (lib/net drains its listeners and ends its connections at their boundaries). May
	 * be NULL.
	 */
	void (*lcore_closing)(unsigned lcore, bool shutdown);
	void (*lcore_stop)(unsigned lcore);
	/**
	 * A pure predicate: while true, a closing lcore does not close: the module still has
	 * work there (ops in flight, connections, offload jobs). @p forced: the shutdown
	 * timeout passed — return true only for work that must still finish (lcore_stop
	 * then tears the rest down). May be NULL.
	 */
	bool (*lcore_busy)(unsigned lcore, bool forced);
};

/**
 * Register a module, from a constructor of the module's priority below. At most 8.
 *
 * Registration order is the dependency order, so it cannot be left to the order default
 * constructors run in: in a static binary that is the link order of the archives, where
 * a library comes before those it uses (lib/net before lib/io), and lib/io would then
 * stop first, its driver torn down before lib/net drops the receive buffers its queues
 * hold. A priority per layer fixes the order whatever the link.
 */
void cr_reactor_module_register(const struct cr_reactor_module *m);

/* Constructor priorities of the registrations (101..: before any default constructor). */
#define CR_MODULE_PRIO_APP 101 /* lib/app's lcore-locals: first up, last down */
#define CR_MODULE_PRIO_IO  102 /* lib/io: under every module that makes I/O */
#define CR_MODULE_PRIO_NET 103 /* lib/net: on lib/io */
#define CR_MODULE_PRIO_TOP 104 /* anything above (lib/offload) */

#ifdef __cplusplus
}
#endif
#endif /* CR_REACTOR_MODULE_H */
