/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Seeded fault injection in lib/io's completion path, linked into test executables only.
 * When enabled it sets cr__io_fault_hook, which rewrites about one final completion in
 * @p one_in to -ENOMEM, -EAGAIN, -ECONNRESET or a short count, as the kernel might have
 * reported it. The same seed and the same ops give the same faults (see trace).
 *
 * Only final completions of live ops are touched: a multishot's data and an accepted
 * socket pass untouched (rewriting them would lose bytes or leak the socket). A short
 * count applies to send, sendmsg, read and write with res > 1. The kernel did do the work:
 * a send reported short or failed was in fact sent whole, so a resend duplicates bytes on
 * the wire. Use the shim to test how an owner reacts, not what its peer receives.
 *
 * Per-thread PRNG (seeded from the seed and the lcore id), counters shared; lcore threads.
 */
#ifndef IO_FAULT_SHIM_H
#define IO_FAULT_SHIM_H

#include <stdint.h>

enum ut_fault {
	UT_FAULT_ENOMEM,
	UT_FAULT_EAGAIN,
	UT_FAULT_ECONNRESET,
	UT_FAULT_SHORT,
	UT_FAULT_KINDS,
};

#define UT_FAULT_ALL ((1u << UT_FAULT_KINDS) - 1)

struct ut_fault_stats {
	uint64_t eligible;		   /* completions the shim could have rewritten */
	uint64_t injected[UT_FAULT_KINDS]; /* rewritten, by kind */
	uint64_t trace;			   /* hash of (op kind, fault) in injection order */
};

/* Rewrite about one eligible completion in @p one_in with kinds from @p kinds (bit per
 * enum ut_fault). Resets the counters. Call while no lcore is completing ops. */
void ut_fault_enable(uint64_t seed, unsigned one_in, unsigned kinds);

/* Stop rewriting; counters are kept. */
void ut_fault_disable(void);

void ut_fault_stats(struct ut_fault_stats *out);

#endif /* IO_FAULT_SHIM_H */
