/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared by the epoll driver's I/O files: how an op waits (its links and flags in
 * cr_op.drv[]), the fd table and its queues (epoll_fd.c), one attempt of each op kind
 * (epoll_try.c), the driver ops (epoll_io.c) and the poll side (epoll_poll.c).
 * Never installed; the lcore that owns the backend is the only one to touch any of it.
 */
#ifndef EPOLL_IO_INTERNAL_H
#define EPOLL_IO_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cr_log.h"
#include "epoll_internal.h"

extern struct cr_log_component cr__eio_log;

/* eio_fd.flags */
#define FD_REGISTERED 0x01 /* in the epoll set */
#define FD_RD_READY   0x02 /* the read side has not seen EAGAIN since its last event */
#define FD_WR_READY   0x04
#define FD_ON_READY   0x08 /* on eio.ready */
#define FD_STARVED    0x10 /* on eio.starved: the recv at the head of rd found no buffer */

/* Completions one fd may take per visit before the next ready fd gets its turn. */
#define FD_QUOTA 16
/* Fd table bounds: the start size follows RLIMIT_NOFILE within these; a larger fd grows
 * the table on submit, up to FD_CAP_MAX. */
#define FD_CAP_MIN	 1024u
#define FD_CAP_START_MAX (1u << 20)
#define FD_CAP_MAX	 (1u << 24)
/* io_uring's limit on one read or write (MAX_RW_COUNT); keeps every result in an int32. */
#define MAX_RW 0x7ffff000u
/* Spare receive buffers at most (cr_io_config.buf_spares). */
#define MAX_SPARES 32768u
/* eio.buf_out[] of a buffer that is out: lent to a callback, or held past it. */
#define BUF_LENT 1
#define BUF_HELD 2
/* Nonblocking calls are not expected to see EINTR at all; a few retries cover the odd one. */
#define EINTR_TRIES 3

/* Where an op waits: the low byte of drv[2]. */
enum op_where {
	IN_NONE = 0,
	IN_RD,
	IN_WR,
	IN_FILES,
	IN_FINISH,
};

/* Op flags: drv[2] above the low byte. */
#define OPF_CONNECTING (1u << 8) /* connect() said EINPROGRESS; the next step is SO_ERROR */
#define OPF_BLOCKING   (1u << 9) /* the fd refused RWF_NOWAIT: plain read / write */

enum outcome {
	OUT_MORE,   /* a completion with CR_IO_F_MORE: the op stays at the head */
	OUT_FINAL,  /* the op's last completion */
	OUT_WAIT,   /* EAGAIN: wait for the side's next readiness event */
	OUT_STARVE, /* recv without a free buffer */
	OUT_STREAM, /* a file op on an fd without offsets: move it to the fd's lists */
};

struct result {
	int32_t res;
	uint32_t flags;
	void *buf;
	uint32_t buf_id;
};

/* Per kind: the fd side it waits on, and its attempt once there (epoll_try.c). */
typedef enum outcome (*try_fn)(struct eio *io, struct cr_op *op, struct result *r);

struct opdef {
	uint8_t side;  /* IN_RD / IN_WR; 0: not a known kind */
	bool file;     /* starts on the file queue */
	bool nonblock; /* the syscall has no per-call nonblocking flag: set O_NONBLOCK */
	try_fn try;
};

extern const struct opdef cr__eio_opdefs[CR_OP_SPLICE + 1];

/* The side @p op waits on: its kind's, but a splice waits for room when fd_in is a pipe. */
static inline enum op_where
op_side(const struct cr_op *op)
{
	if (op->kind == CR_OP_SPLICE)
		return op->u.splice.wait_out ? IN_WR : IN_RD;
	return (enum op_where)cr__eio_opdefs[op->kind].side;
}

/* A read, write or fsync of a regular file (OUT_STREAM: it has no offsets, wait on it). */
enum outcome cr__eio_try_file(struct eio *io, struct cr_op *op, struct result *r);
int cr__eio_set_nonblock(int fd);

/* ---- the fd table (epoll_fd.c) ---- */

void cr__eio_fdq_append(struct eio *io, int fd, bool starve);
void cr__eio_fdq_unlink(struct eio *io, int fd, bool starve);
/* Add @p fd to the epoll set (edge-triggered) if it is not there. @return 0 or -errno. */
int cr__eio_fd_watch(struct cr_backend *be, int fd);
/*
 * No op uses @p fd any more. It leaves the epoll set now, before the last completion runs:
 * its owner may close the fd there, and the number may come back as another socket.
 */
void cr__eio_fd_release(struct cr_backend *be, int fd);
/* Put @p fd on the queues its state calls for. */
void cr__eio_fd_update(struct cr_backend *be, int fd);
/* Queue socket op @p op on its fd's side (the table grows for a large fd). 0 or -errno. */
int cr__eio_fd_add_op(struct cr_backend *be, struct cr_op *op);
void cr__eio_fd_remove_op(struct cr_backend *be, struct cr_op *op);

/* ---- op links and flags in cr_op.drv[] ---- */

/* ---- op links and flags in cr_op.drv[] ---- */

static inline struct cr_op *
op_next(const struct cr_op *op)
{
	return (struct cr_op *)(uintptr_t)op->drv[0];
}

static inline struct cr_op *
op_prev(const struct cr_op *op)
{
	return (struct cr_op *)(uintptr_t)op->drv[1];
}

static inline void
op_set_next(struct cr_op *op, struct cr_op *next)
{
	op->drv[0] = (uint64_t)(uintptr_t)next;
}

static inline void
op_set_prev(struct cr_op *op, struct cr_op *prev)
{
	op->drv[1] = (uint64_t)(uintptr_t)prev;
}

static inline enum op_where
op_where(const struct cr_op *op)
{
	return (enum op_where)(op->drv[2] & 0xff);
}

static inline void
op_set_where(struct cr_op *op, enum op_where w)
{
	op->drv[2] = (op->drv[2] & ~(uint64_t)0xff) | (uint64_t)w;
}

static inline bool
op_has(const struct cr_op *op, uint32_t flag)
{
	return (op->drv[2] & flag) != 0;
}

static inline void
op_set(struct cr_op *op, uint32_t flag)
{
	op->drv[2] |= flag;
}

static inline void
list_append(struct eio_oplist *l, struct cr_op *op, enum op_where w)
{
	op_set_next(op, NULL);
	op_set_prev(op, l->tail);
	if (l->tail != NULL)
		op_set_next(l->tail, op);
	else
		l->head = op;
	l->tail = op;
	op_set_where(op, w);
}

static inline void
list_remove(struct eio_oplist *l, struct cr_op *op)
{
	struct cr_op *next = op_next(op), *prev = op_prev(op);

	if (prev != NULL)
		op_set_next(prev, next);
	else
		l->head = next;
	if (next != NULL)
		op_set_prev(next, prev);
	else
		l->tail = prev;
	op_set_next(op, NULL);
	op_set_prev(op, NULL);
	op_set_where(op, IN_NONE);
}

/* Report @p op's final result @p res from the next poll. */
static inline void
finish_later(struct eio *io, struct cr_op *op, int32_t res)
{
	op->drv[3] = (uint32_t)res;
	list_append(&io->finish, op, IN_FINISH);
}

static inline size_t
rw_len(const struct cr_op *op)
{
	return op->u.rw.len < MAX_RW ? op->u.rw.len : MAX_RW;
}

#endif /* EPOLL_IO_INTERNAL_H */
