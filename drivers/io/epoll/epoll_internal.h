/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared between the epoll backend (park / wake / poll, epoll_backend.c) and its I/O ops
 * (epoll_io.c). Never installed. Everything here is touched only by the owning lcore,
 * except the lcore's struct cr_wake, which wakers use from any thread.
 */
#ifndef EPOLL_INTERNAL_H
#define EPOLL_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

#include "cr_io_driver.h"

/* Events one epoll_wait takes; the rest stay queued in the kernel for the next turn. */
#define EPOLL_MAX_EVENTS 64

/* epoll_event.data.u64 of the wake eventfd; an I/O fd is registered as fd + 1. */
#define EPOLL_TAG_EFD 0

/* An intrusive FIFO of ops, linked through cr_op.drv[0] (next) and drv[1] (prev). */
struct eio_oplist {
	struct cr_op *head;
	struct cr_op *tail;
};

/*
 * Links between fds hold fd + 1, so that 0 (what fresh, zeroed table memory holds)
 * means "none".
 */
struct eio_link {
	int prev;
	int next;
};

/* A FIFO of fds, linked through one of the eio_link members of their eio_fd. */
struct eio_fdq {
	int head;
	int tail;
};

/* One fd's ops. */
struct eio_fd {
	struct eio_oplist rd;	/* accept, recv, recvmsg, stream read: in submission order */
	struct eio_oplist wr;	/* send, sendmsg, connect, stream write */
	struct eio_link ready;	/* on eio.ready */
	struct eio_link starve; /* on eio.starved */
	uint8_t flags;		/* FD_* (epoll_io_internal.h) */
};

/* Per-lcore I/O state, inside the backend. */
struct eio {
	bool up; /* init ran, fini not yet */
	/* receive buffers: buf_ids slots of buf_size bytes, free ids on a stack. Receives
	 * may have buf_count of them lent out at once; the spares make up for those held
	 * past their callback (cr_io_buf_hold()), at most buf_spares at a time. */
	uint8_t *bufs;
	uint32_t buf_count;
	uint32_t buf_ids; /* buf_count + buf_spares */
	uint32_t buf_size;
	uint32_t buf_spares;
	uint32_t bufs_lent; /* lent to a callback, not held */
	uint32_t bufs_held;
	uint32_t *free_ids;
	uint32_t nfree;
	uint8_t *buf_out; /* BUF_LENT / BUF_HELD while out: catches a double release */
	/* fd table */
	struct eio_fd *fds;
	unsigned fd_cap;
	unsigned n_registered;	/* fds in the epoll set */
	struct eio_fdq ready;	/* fds with an op that can make progress now */
	struct eio_fdq starved; /* fds whose recv waits for a free buffer */
	/* ops that need no readiness */
	struct eio_oplist files;  /* read / write / fsync: done in the next poll */
	struct eio_oplist finish; /* final result known (cancel, bad fd): reported next poll */
	unsigned first;		  /* the source a poll serves first; each poll moves it on */
};

/* Receive buffers a recv may take now. */
static inline uint32_t
eio_bufs_free(const struct eio *io)
{
	return io->buf_count - io->bufs_lent;
}

struct cr_backend {
	int epfd;
	struct cr_wake *wake; /* the lcore's wake channel (its eventfd is in our set) */
	unsigned lcore;
	bool no_pwait2; /* epoll_pwait2 is missing (old kernel, some sandboxes) */
	/* Events park() collected, applied by the next poll() so none is lost. */
	struct epoll_event evs[EPOLL_MAX_EVENTS];
	int n_evs;
	unsigned peeks; /* pending() calls, for its occasional epoll_wait */
	struct eio io;
};

/** The driver's I/O table (cr_backend_ops.io). */
extern const struct cr_io_driver_ops cr__epoll_io_ops;

/** Apply readiness @p events of I/O fd @p fd. */
void cr__epoll_io_event(struct cr_backend *be, int fd, uint32_t events);

/** Run up to @p budget I/O completions. @return how many ran. */
unsigned cr__epoll_io_poll(struct cr_backend *be, unsigned budget);

/** True when the next cr__epoll_io_poll() has work it can do without waiting (no syscall). */
bool cr__epoll_io_pending(const struct cr_backend *be);

/** True when some fd is in the epoll set, so a poll should ask the kernel for events. */
static inline bool
cr__epoll_io_watching(const struct cr_backend *be)
{
	return be->io.n_registered != 0;
}

/** Free whatever the I/O side still holds; safe after fini and without init. */
void cr__epoll_io_free(struct cr_backend *be);

#endif /* EPOLL_INTERNAL_H */
