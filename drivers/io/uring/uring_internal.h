/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internals of the io_uring driver shared by its park/wake/poll half (uring_backend.c) and
 * its I/O ops (uring_io.c). Never installed; tests include it to read the counters.
 *
 * user_data tags (low 3 bits; the rest is a pointer, an index or an op handle):
 *   TAG_OP     an op of lib/io: user_data == op->id (lib/io keeps these bits 0)
 *   TAG_WAKE   a MSG_RING wake posted into our CQ by another lcore
 *   TAG_EFD    the poll on our wake channel's eventfd fired: a foreign wake
 *   TAG_MSGERR a MSG_RING we sent failed; the payload is the target's struct cr_wake
 *   TAG_CANCEL our ASYNC_CANCEL failed (success posts nothing); the op's own CQE follows
 */
#ifndef URING_INTERNAL_H
#define URING_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <liburing.h>

#include "cr_io_driver.h"
#include "cr_reactor_backend.h"

#define TAG_MASK   7u
#define TAG_OP	   0u
#define TAG_WAKE   1u
#define TAG_EFD	   2u
#define TAG_MSGERR 3u
#define TAG_CANCEL 4u

/* Events a user cannot see directly; tests read them to prove a path was taken. */
struct uring_io_stats {
	uint64_t cq_overflows; /* polls that found completions waiting in the overflow list */
	uint64_t rearms;       /* multishots re-armed after a CQE without F_MORE */
	uint64_t enobufs;      /* recvs parked because every receive buffer was lent out */
	uint64_t zc_sends;     /* sends submitted as SEND_ZC / SENDMSG_ZC */
	uint64_t zc_refused;   /* of which the socket refused zero-copy: sent again, copying */
	uint64_t sqe_waits;    /* re-arms and cancels postponed for want of an SQE */
};

/*
 * I/O state of one lcore's ring. Ops the driver must act on outside a CQE (a recv waiting
 * for buffers, a re-arm or cancel waiting for an SQE, a final completion made up by the
 * driver) sit on the attention list, linked through op->drv[].
 */
/* uring_io.lent[] of a buffer that is out: lent to a callback, or held past it. */
#define BUF_LENT 1
#define BUF_HELD 2

struct uring_io {
	/* receive buffers: one provided-buffer ring, group 0 */
	struct io_uring_buf_ring *br;
	size_t br_bytes;
	uint8_t *bufs;
	uint8_t *lent; /* per buffer id: BUF_LENT or BUF_HELD while out, else 0 */
	uint32_t buf_count; /* ring entries */
	uint32_t buf_ids;   /* ring entries plus spares: ids [0, buf_ids) */
	uint32_t buf_size;
	uint32_t bufs_lent; /* ring entries taken and not given back yet */
	/* Buffers in no ring entry: one takes the place of each buffer held past its
	 * callback, and a held buffer comes back here when released. */
	uint16_t *spares;
	uint32_t nspares;
	bool br_registered;

	uint32_t zc_threshold; /* 0: never zero-copy */
	bool zc_send, zc_sendmsg;

	struct cr_op **ops; /* by slot index: the op last submitted in that slot */
	uint32_t ops_cap;

	struct cr_op *attn_head, *attn_tail;
	unsigned n_attn;   /* on the list */
	unsigned n_parked; /* of which waiting for buffers */

	struct uring_io_stats stats;
};

struct cr_backend {
	struct io_uring ring;
	struct cr_wake *wake; /* the lcore's wake channel: a poll on its eventfd stays armed */
	bool efd_armed;
	unsigned setup_flags;
	struct uring_io io;
};

/* An SQE, submitting what is queued once if the SQ is full; NULL if still none. */
struct io_uring_sqe *cr__uring_get_sqe(struct cr_backend *be);

/* A CQE tagged TAG_OP, already consumed from the CQ (its fields copied). */
void cr__uring_io_cqe(struct cr_backend *be, uint64_t user_data, int32_t res, uint32_t flags);

/* Act on the attention list: re-arms and re-issues whatever @p budget, completions at
 * most @p budget of them (the number delivered is returned). */
unsigned cr__uring_io_run(struct cr_backend *be, unsigned budget);

/* True when cr__uring_io_run() has something to do now. */
bool cr__uring_io_pending(const struct cr_backend *be);

/* Free what the I/O half holds, without asking the kernel: after the ring is gone. */
void cr__uring_io_free(struct cr_backend *be);

/* 0 when this kernel has what the I/O half needs, else -ENOSYS and why in @p why. */
int cr__uring_io_probe(struct io_uring *ring, char *why, size_t len);

/* Splice (uring_splice.c): its state bit in op->drv[0], the flags word of uring_io.c. */
#define URING_OPF_SPLICING 0x10u /* the SQE in flight is the splice, not the poll before it */
/* Prepare @p op's next SQE: the poll of its waiting end, or the splice itself. */
void cr__uring_prep_splice(struct io_uring_sqe *sqe, struct cr_op *op);
/* A CQE of splice @p op. @return true if the op ends with *@p res; false: issue again. */
bool cr__uring_splice_cqe(struct cr_op *op, int32_t *res);

extern const struct cr_io_driver_ops cr__uring_io_ops;

#endif /* URING_INTERNAL_H */
