/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The interface between lib/io and an I/O driver (drivers/io/uring, drivers/io/epoll).
 * For driver writers, not for apps. Everything runs on the owning lcore's thread.
 */
#ifndef CR_IO_DRIVER_H
#define CR_IO_DRIVER_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "cr_io.h"
#include "cr_reactor_backend.h"
#include "cr_timer.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * True for an accept(2) error @p err (positive errno) that concerns one connection, not
 * the listener (see accept(2)): a multishot or repeated accept goes on after it. The
 * others (EMFILE, ENFILE, ENOBUFS, ENOMEM, anything saying it is no listener) end the op.
 */
static inline bool
cr_io_accept_error_transient(int err)
{
	switch (err) {
	case ECONNABORTED:
	case EPROTO:
	case EPERM:
	case EINTR:
	case ENETDOWN:
	case ENETUNREACH:
	case ENOPROTOOPT:
	case EHOSTDOWN:
	case EHOSTUNREACH:
	case ENONET:
		return true;
	default:
		return false;
	}
}

enum cr_op_kind {
	CR_OP_ACCEPT = 1,
	CR_OP_RECV,
	CR_OP_SEND,
	CR_OP_SENDMSG,
	CR_OP_RECVMSG,
	CR_OP_CONNECT,
	CR_OP_READ,
	CR_OP_WRITE,
	CR_OP_FSYNC,
	CR_OP_SPLICE, /* the last kind: drivers size their tables by it */
};

enum cr_op_state {
	CR_OP_FREE = 0,
	CR_OP_LIVE,	 /* callbacks run */
	CR_OP_ABANDONED, /* no callbacks; slot held until the final CQE */
};

/*
 * user_data of an op's SQE / completion: bits 0-2 are 0 (drivers use other tags for
 * their own CQEs), bits 3-26 the slot index, bits 27-63 the generation.
 */
#define CR_OP_TAG_BITS 3
#define CR_OP_INDEX_BITS 24
#define CR_OP_MAX (1u << CR_OP_INDEX_BITS)
#define CR_OP_GEN_SHIFT (CR_OP_TAG_BITS + CR_OP_INDEX_BITS)
#define CR_OP_GEN_MASK ((UINT64_C(1) << (64 - CR_OP_GEN_SHIFT)) - 1)

/**
 * The handle of slot @p index's next generation after @p id. Generations wrap within
 * their 37 bits and skip 0, so a handle is never 0 (0 means "no op" to every caller),
 * however often a slot is reused.
 */
static inline cr_op_id
cr_op_next_id(cr_op_id id, uint32_t index)
{
	uint64_t gen = ((id >> CR_OP_GEN_SHIFT) + 1) & CR_OP_GEN_MASK;

	if (gen == 0)
		gen = 1;
	return (gen << CR_OP_GEN_SHIFT) | ((uint64_t)index << CR_OP_TAG_BITS);
}

/** An op slot. lib/io fills the arguments; the driver reads them and may use drv[]. */
struct cr_op {
	/* lib/io, read-only for drivers */
	cr_op_id id; /* == user_data */
	uint32_t index;
	uint8_t kind;  /* enum cr_op_kind */
	uint8_t state; /* enum cr_op_state */
	bool timed_out;
	bool cancel_sent;
	cr_io_fn fn;
	void *ctx;
	cr_msg_fn release;
	void *release_arg;
	struct cr_timer deadline;
	struct cr_op *next_free;

	/* arguments */
	int fd;
	union {
		struct {
			void *buf; /* const for send / write */
			size_t len;
			uint64_t off;
		} rw;
		struct {
			struct msghdr *msg;
		} msg;
		struct {
			struct sockaddr_storage addr;
			socklen_t len;
		} connect;
		/* op->fd is the end the op waits for: fd_in, or fd_out when fd_in is a pipe */
		struct {
			int fd_in, fd_out;
			int64_t off_in, off_out; /* CR_IO_NO_OFF: none */
			uint32_t len;
			uint32_t flags;	  /* splice(2) flags, SPLICE_F_NONBLOCK included */
			bool wait_out;	  /* op->fd == fd_out: wait for room, not data */
			bool wait_file;	  /* op->fd is a regular file: always ready */
		} splice;
	} u;

	/* driver private */
	uint64_t drv[4];
};

/**
 * A splice of @p op said EAGAIN: true if its pipe end is the reason (a splice out of an
 * empty pipe, or into a full one), so waiting for the other end would not help; the op
 * then ends with -EAGAIN (cr_io.h). Asked of the pipe itself (poll, no wait), which only
 * this lcore fills and drains, so the answer cannot race (a byte count of the socket can:
 * data arriving during the splice). Only on the EAGAIN path.
 */
bool cr_io_splice_pipe_stuck(const struct cr_op *op);

/** Receive buffer pool sizing, from the build configuration. */
struct cr_io_config {
	uint32_t buf_count; /**< receive buffers per lcore (power of two, <= 32768) */
	uint32_t buf_size;  /**< bytes each */
	/** more buffers, which take the place of those held (cr_io_buf_hold()); <= 32768 */
	uint32_t buf_spares;
	uint32_t zc_threshold; /**< sends of at least this many bytes may use SEND_ZC; 0 = never */
};

/** The largest splice one op moves (the kernel's MAX_RW_COUNT; results fit an int32). */
#define CR_IO_SPLICE_MAX 0x7ffff000u

/** A driver's I/O table; pointed to by its cr_backend_ops.io. */
struct cr_io_driver_ops {
	/** Set up receive buffers etc. on the lcore. @return 0 or -errno. */
	int (*init)(struct cr_backend *be, const struct cr_io_config *cfg);
	/** Free what init made; every op has completed by now. */
	void (*fini)(struct cr_backend *be);
	/**
	 * Queue @p op (kind and arguments filled in). Its completions are reported later, from
	 * the backend's poll(), through cr_io_complete() — never from inside submit.
	 * @return 0 or -errno (nothing queued, no completion will come).
	 */
	int (*submit)(struct cr_backend *be, struct cr_op *op);
	/** Ask for @p op to be cancelled; its final completion still comes. @return 0 or -errno. */
	int (*cancel)(struct cr_backend *be, struct cr_op *op);
	/** Give receive buffer @p buf_id back to the pool. */
	void (*buf_release)(struct cr_backend *be, uint32_t buf_id);
	/** Bytes per receive buffer. */
	uint32_t (*buf_size)(struct cr_backend *be);
	/**
	 * Keep lent buffer @p buf_id past its callback (cr_io_buf_hold()): a spare takes its
	 * place among the buffers receives use. NULL: the driver cannot (-ENOTSUP).
	 * @return 0, -ENOBUFS (no spare left), -EINVAL (not lent, or held already).
	 */
	int (*buf_hold)(struct cr_backend *be, uint32_t buf_id);
};

/**
 * Report a completion of the op named by @p user_data. Drivers call this from their
 * poll(). @p buf / @p buf_id with CR_IO_F_BUFFER. A completion for a generation that is no
 * longer live (abandoned and retired) only gives its buffer back.
 */
void cr_io_complete(uint64_t user_data, int32_t res, uint32_t flags, void *buf,
		    uint32_t buf_id);

#ifdef __cplusplus
}
#endif
#endif /* CR_IO_DRIVER_H */
