/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A fake lib/io driver for the deterministic harness: ops submitted on a simulated lcore
 * wait in its backend until the test completes them — with a result, more to come, or
 * received bytes in one of the driver's buffers — and the completions reach lib/io from
 * the lcore's next poll, as a real driver's do. Cancel queues -ECANCELED as the final
 * completion. So I/O state machines (lib/io's slots, deadlines and abandons; lib/net's
 * connections) are stepped one turn at a time, without sockets or the kernel.
 */
#ifndef UT_IO_H
#define UT_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cr_io_driver.h"
#include "ut_lcores.h"

/* Ops one lcore may have waiting, and completions queued, at once. */
#define UT_IO_MAX_OPS  256
#define UT_IO_MAX_CQES 256

struct ut_io_cqe {
	uint64_t user_data; /* the op's id when it was queued */
	int32_t res;
	uint32_t flags;
	void *buf;
	uint32_t buf_id;
};

/* The fake driver's state in a simulated lcore's backend. */
struct ut_io {
	struct cr_op *ops[UT_IO_MAX_OPS]; /* submitted, final completion not queued yet */
	unsigned n_ops;
	struct ut_io_cqe cq[UT_IO_MAX_CQES];
	unsigned cq_head, cq_tail; /* free-running */
	uint8_t *bufs;
	uint32_t buf_count, buf_size;
	uint8_t *buf_out; /* 1 while lent */
	uint64_t submits, cancels;
};

/* ut_start() with the fake I/O driver: lib/io (and lib/net when linked) run on it. */
int ut_start_io(unsigned n);
/* CUnit suite init / fini: one simulated lcore with the fake I/O driver, current. */
int ut_io_suite_init(void);
int ut_io_suite_fini(void);

/* The oldest waiting op of @p kind (enum cr_op_kind) on @p fd of lcore @p lcore, or NULL. */
struct cr_op *ut_io_op(unsigned lcore, int kind, int fd);
/* Ops waiting on lcore @p lcore (submitted, no final completion queued). */
unsigned ut_io_waiting(unsigned lcore);
/* The fake state of lcore @p lcore (counters, buffers). */
struct ut_io *ut_io(unsigned lcore);

/*
 * Queue a completion of @p op with @p res; with @p more the op stays waiting (multishot),
 * else it is its final one. Reported from the lcore's next turn.
 */
void ut_io_complete(unsigned lcore, struct cr_op *op, int32_t res, bool more);
/*
 * Queue a receive completion of @p op carrying a copy of @p len bytes of @p data in a
 * driver buffer (CR_IO_F_BUFFER); @p more as above. @return 0, -ENOBUFS (every buffer is
 * lent) or -EMSGSIZE (more than a buffer holds).
 */
int ut_io_deliver(unsigned lcore, struct cr_op *op, const void *data, size_t len, bool more);
/* Receive buffers lent to callbacks and not given back. */
unsigned ut_io_bufs_out(unsigned lcore);

#endif /* UT_IO_H */
