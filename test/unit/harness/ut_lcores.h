/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Deterministic multi-lcore harness (after SPDK's ut_multithread): N simulated lcores
 * stepped on one thread with a fake clock and a fake backend that records parks and
 * wake signals instead of sleeping.
 */
#ifndef UT_LCORES_H
#define UT_LCORES_H

#include <stdbool.h>
#include <stdint.h>

#include "reactor_internal.h"

/* The fake backend's state, one per simulated lcore. Wake signals go through the
 * lcore's struct cr_wake (woken: not yet reaped; signals: delivered), as on the real
 * drivers; ut_wake_signals() reads them. */
struct cr_backend {
	unsigned lcore;
	struct cr_wake *wake;
	uint64_t parks;		/* times park() was entered */
	uint64_t last_timeout;	/* timeout of the last park */
	unsigned fake_cqes;	/* completions a test pretends are waiting */
	struct ut_io *io;	/* the fake I/O driver's state (ut_io.h), or NULL */
};

extern const struct cr_backend_ops ut_sim_ops;

/* Fake clock: now, plus an optional step added at every read (for spin loops). */
extern uint64_t ut_now;
extern uint64_t ut_clock_step;
uint64_t ut_clock(void);

/* Set up lcores 0..n-1 (main 0). Returns 0 or -errno. */
int ut_start(unsigned n);
/* The same with backend @p ops (ut_start_io() passes one with the fake I/O driver). */
int ut_start_ops(unsigned n, const struct cr_backend_ops *ops);
/* Stop the lcores' modules (as each lcore's end would), then free everything. */
void ut_stop(void);
/* Set by ut_start_io(): the fake I/O driver's completions, reported from the sim poll. */
extern unsigned (*ut_io_poll_hook)(struct cr_backend *be, unsigned budget);
extern bool (*ut_io_pending_hook)(const struct cr_backend *be);

/* Make @p id the current lcore (CR_LCORE_NONE: a foreign thread). */
void ut_set_current(unsigned id);
/* One turn of @p id (as current); returns its work count. Restores the previous current. */
unsigned ut_turn(unsigned id);
/* Turn @p id exactly @p k times; returns total work. */
unsigned ut_poll_k(unsigned id, unsigned k);
/* Turn every lcore round robin until a whole round does nothing (at most @p max_rounds).
 * Returns the number of rounds with work. */
unsigned ut_poll_until_idle(unsigned max_rounds);
/* The fake backend of @p id. */
struct cr_backend *ut_be(unsigned id);
/* The lcore record of @p id. */
struct cr_lcore *ut_lcore(unsigned id);
/* Wake signals delivered to lcore @p id so far, over all its incarnations. */
uint64_t ut_wake_signals(unsigned id);

#endif /* UT_LCORES_H */
