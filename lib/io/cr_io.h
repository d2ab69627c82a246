/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Asynchronous I/O on the current lcore: ops in per-lcore slots named by
 * (index, generation) handles (doc/guides/design.md rule 6), submitted through the lcore's driver
 * (io_uring or epoll) and completed by callbacks in a later phase of the loop — never
 * from inside the submitting call.
 *
 * Every function here is lcore-only: an op belongs to the lcore that started it, and its
 * callback runs there.
 *
 * Lifetimes. Memory an op names (a send buffer, a msghdr and its iovecs and address, a
 * read buffer) must stay valid until the op's final completion (one without
 * CR_IO_F_MORE), or, after cr_io_abandon(), until its release callback runs. Receive
 * buffers of multishot recv belong to lib/io; the callback borrows one and gives it back
 * with cr_io_buf_release(). At a forced stop lib/io abandons every op still live, after the
 * app's on_lcore_stop hook and without release callbacks: memory such ops name must stay
 * valid until cr_reactor_run() has returned.
 *
 * Handles belong to the lcore that started the op; using one on another lcore is a bug
 * (generations start at a different base on every lcore, so it is caught as -ENOENT, not
 * applied to an unrelated op, unless a slot was reused 2^24 times).
 */
#ifndef CR_IO_H
#define CR_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "cr_msg.h"

#ifdef __cplusplus
extern "C" {
#endif

/** An op handle: slot index and generation. 0 is never a valid handle. */
typedef uint64_t cr_op_id;

/** More completions of this op follow (multishot accept / recv). */
#define CR_IO_F_MORE 0x1u
/** A receive buffer is attached: cqe->buf, cqe->res bytes, give back cqe->buf_id. */
#define CR_IO_F_BUFFER 0x2u

/** One completion as a callback sees it. */
struct cr_io_cqe {
	int32_t res;	 /**< >= 0: result (bytes, new fd, 0 at EOF); < 0: -errno */
	uint32_t flags;	 /**< CR_IO_F_* */
	void *buf;	 /**< with CR_IO_F_BUFFER: the received data */
	uint32_t buf_id; /**< with CR_IO_F_BUFFER: for cr_io_buf_release() */
};

/**
 * Completion callback; runs on the op's lcore. For a multishot op it runs once per
 * completion; the last one has no CR_IO_F_MORE, and the handle is dead after it.
 */
typedef void (*cr_io_fn)(void *ctx, const struct cr_io_cqe *cqe);

/**
 * Start a multishot accept on listening socket @p lfd. Each completion's res is a new
 * connected socket (nonblocking, close-on-exec) or -errno. On -EMFILE/-ENFILE/-ENOBUFS the
 * op ends (no CR_IO_F_MORE): the owner decides when to start accepting again.
 * @return a handle, or 0 with errno EPERM (off lcore), ENOTSUP (no io driver),
 *         ENOSPC (no free op slot) or another errno from the driver.
 */
cr_op_id cr_io_accept(int lfd, cr_io_fn fn, void *ctx);

/**
 * Start a multishot receive on stream socket @p fd into lib/io's per-lcore receive buffers.
 * Completions carry CR_IO_F_BUFFER and res bytes; res 0 is EOF (final), res < 0 an error
 * (final). If the buffers run out the driver re-arms by itself: no byte is lost or
 * reordered, the owner only sees data arrive later.
 * @return a handle or 0 with errno as cr_io_accept().
 */
cr_op_id cr_io_recv(int fd, cr_io_fn fn, void *ctx);

/** Give a receive buffer back. On the lcore that received it. */
void cr_io_buf_release(uint32_t buf_id);

/**
 * Keep receive buffer @p buf_id past the callback it came with, until cr_io_buf_release():
 * one of the lcore's spare buffers (the io_buf_spares build option) takes its place at
 * once, so receives never run short because buffers are held. On the lcore that received
 * it, before giving it back.
 * @return 0; -ENOBUFS (every spare is in use: copy the bytes and release the buffer as
 *         usual); -EINVAL (@p buf_id is not lent out, or held already); -ENOTSUP (the
 *         driver cannot); -EPERM (off an lcore with lib/io).
 */
int cr_io_buf_hold(uint32_t buf_id);

/** Size in bytes of each receive buffer on this lcore. */
uint32_t cr_io_buf_size(void);

/**
 * Send @p len bytes of @p buf on @p fd (MSG_NOSIGNAL: a closed peer is -EPIPE, never a
 * signal). One completion with the bytes sent, which may be fewer than @p len (the caller
 * resends the rest) or -errno. @p buf must stay valid until it runs.
 * Large sends may use zero-copy (SEND_ZC); the completion then runs only once the kernel
 * has released @p buf.
 */
cr_op_id cr_io_send(int fd, const void *buf, size_t len, cr_io_fn fn, void *ctx);

/** sendmsg(2) with MSG_NOSIGNAL; @p msg and everything it points to live until completion. */
cr_op_id cr_io_sendmsg(int fd, const struct msghdr *msg, cr_io_fn fn, void *ctx);

/** recvmsg(2) into the caller's @p msg (for UDP); one completion. */
cr_op_id cr_io_recvmsg(int fd, struct msghdr *msg, cr_io_fn fn, void *ctx);

/**
 * Connect nonblocking socket @p fd to @p addr (copied). One completion: 0 or -errno;
 * -ETIMEDOUT if @p timeout_ns (0 = none) passed first (the attempt is then cancelled).
 */
cr_op_id cr_io_connect(int fd, const struct sockaddr *addr, socklen_t addrlen,
		       uint64_t timeout_ns, cr_io_fn fn, void *ctx);

/** pread(2)-like read of a file at @p offset. One completion: bytes or -errno. */
cr_op_id cr_io_read(int fd, void *buf, size_t len, uint64_t offset, cr_io_fn fn, void *ctx);

/** pwrite(2)-like write. One completion: bytes or -errno. */
cr_op_id cr_io_write(int fd, const void *buf, size_t len, uint64_t offset, cr_io_fn fn,
		     void *ctx);

/** fsync(2). One completion: 0 or -errno. */
cr_op_id cr_io_fsync(int fd, cr_io_fn fn, void *ctx);

/** cr_io_splice() offset meaning "none": the fd's own position (a file), or a pipe/socket. */
#define CR_IO_NO_OFF (-1)

/**
 * Move up to @p len bytes from @p fd_in to @p fd_out without copying them through user
 * memory, as splice(2): one end must be a pipe, the other a socket, a file or a pipe.
 * @p off_in / @p off_out: the offset in a file end (not advanced; the caller adds the result),
 * or CR_IO_NO_OFF. @p flags: SPLICE_F_MOVE and SPLICE_F_MORE only (lib/io adds
 * SPLICE_F_NONBLOCK itself). @p timeout_ns: a deadline as cr_io_set_deadline() (0 = none).
 *
 * One completion: the bytes moved (which may be fewer than @p len: a partial splice; the
 * caller splices the rest), 0 at EOF of @p fd_in, or -errno. The op waits for the non-pipe
 * end (the socket's data, or room in it); the pipe end is the caller's and must be ready —
 * room in it for a splice into it, bytes for a splice out of it — or the completion is
 * -EAGAIN (nobody else will fill or drain an lcore's pipe, so waiting for it would be
 * waiting forever). The socket end is made O_NONBLOCK if it is not already.
 * @return a handle, or 0 with errno EINVAL (bad flags, len 0, no pipe end), EBADF, or as
 *         cr_io_accept().
 */
cr_op_id cr_io_splice(int fd_in, int64_t off_in, int fd_out, int64_t off_out, size_t len,
		      unsigned flags, uint64_t timeout_ns, cr_io_fn fn, void *ctx);

/** A pipe of this lcore's pool: read end rd, write end wr, both O_NONBLOCK. */
struct cr_io_pipe {
	int rd;
	int wr;
};

/**
 * Give every lcore that starts from now on a pool of @p count pipes of @p size bytes each
 * (F_SETPIPE_SZ, or as near as the system allows; 0 and 0: the io_pipes and io_pipe_size
 * build options, 16 of 256 KiB by default). Without this call an lcore has no pool (each
 * pipe costs two descriptors and a share of the per-user pipe pages, which an app that
 * never splices should not pay): cr_io_pipe_get() says -EAGAIN. Call it before the runtime
 * starts, from one thread. @return 0; -EINVAL for a size over 1 MiB or under a page.
 */
int cr_io_pipe_pool(unsigned count, uint32_t size);

/**
 * Take a pipe from this lcore's pool (made at lcore start as cr_io_pipe_pool() asked). Never
 * blocks: when the pool is empty, -EAGAIN — the caller falls back to copying.
 * @return 0 with @p *p filled, -EAGAIN (pool empty), -EPERM off an lcore, -ENOTSUP no io
 *         driver.
 */
int cr_io_pipe_get(struct cr_io_pipe *p);

/**
 * Give @p p back to this lcore's pool. A pipe with bytes still in it is drained; one
 * that cannot be drained at once is closed and replaced by a new pipe, so the pool never
 * hands out a pipe with stale bytes. No op may still use it.
 */
void cr_io_pipe_put(const struct cr_io_pipe *p);

/** Pipes free in this lcore's pool, and its capacity in bytes of each pipe. */
unsigned cr_io_pipe_free(void);
uint32_t cr_io_pipe_size(void);

/**
 * A relay of two connected sockets through two pooled pipes (io_relay.c): each direction
 * splices from one socket into its pipe and from the pipe into the other socket. EOF on
 * one side shuts the other for writing (half-close) while the other direction goes on.
 * The caller owns the storage (it stays valid until @p done has run) and the sockets (it
 * closes them after @p done). Fields are lib/io's; read bytes[] and err in @p done.
 */
struct cr_io_relay;
typedef void (*cr_io_relay_fn)(void *ctx, struct cr_io_relay *r);

struct cr_io_relay_dir {
	struct cr_io_relay *r;
	int from, to;
	struct cr_io_pipe p;
	uint32_t in_pipe; /* bytes in the pipe, not yet in @c to */
	uint64_t bytes;	  /* bytes delivered to @c to */
	cr_op_id op;
	bool eof; /* @c from said EOF and @c to was shut for writing */
};

struct cr_io_relay {
	struct cr_io_relay_dir dir[2]; /**< [0]: a to b, [1]: b to a */
	int32_t err;		       /**< 0 (both sides ended), or the first -errno */
	bool stopping;
	cr_io_relay_fn done;
	void *ctx;
};

/**
 * Start relaying between sockets @p a and @p b. @p done runs once, on this lcore, when
 * both directions have ended (EOF each way: err 0), or after the first error in either
 * (the other is cancelled; err says which errno), or after cr_io_relay_stop() (-ECANCELED);
 * by then no op is in flight and both pipes are back in the pool.
 * @return 0; -EAGAIN if the pool has not two pipes free (copy instead: nothing was
 *         taken), -EPERM off an lcore, -ENOTSUP no io driver, or the -errno of a first
 *         splice that could not start.
 */
int cr_io_relay_start(struct cr_io_relay *r, int a, int b, cr_io_relay_fn done, void *ctx);

/** End relay @p r: its ops are cancelled, and its done callback runs with -ECANCELED. */
void cr_io_relay_stop(struct cr_io_relay *r);

/**
 * Set a deadline on op @p id: if it has not completed @p timeout_ns from now, it is
 * cancelled and its (final) completion reports -ETIMEDOUT.
 * @return 0, -ENOENT (no such live op of this lcore), -EPERM off an lcore, -ENOTSUP no io
 *         driver.
 */
int cr_io_set_deadline(cr_op_id id, uint64_t timeout_ns);

/**
 * Cancel op @p id: the kernel is asked to stop it, and its callback still runs for its
 * final completion (typically -ECANCELED, or the result if it completed first): exactly
 * one outcome.
 * @return 0, -ENOENT (no such live op: it already completed or was abandoned), -EPERM
 *         off an lcore, -ENOTSUP no io driver.
 */
int cr_io_cancel(cr_op_id id);

/**
 * Abandon op @p id: cancel it and never call its callback again. The slot, and any memory
 * the op names, stay in the kernel's hands until its final CQE; then lib/io releases what
 * it owns (receive buffers) and runs @p release(@p arg) if non-NULL, so the owner knows
 * its memory is free. Use this when destroying the owner.
 * @return 0, -ENOENT (no such live op; @p release is not called), -EPERM off an lcore,
 *         -ENOTSUP no io driver.
 */
int cr_io_abandon(cr_op_id id, cr_msg_fn release, void *arg);

/** True while @p id names a live, not abandoned op. */
bool cr_io_live(cr_op_id id);

/** Ops in flight on this lcore, abandoned ones included. */
unsigned cr_io_inflight(void);

#ifdef __cplusplus
}
#endif
#endif /* CR_IO_H */
