/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One attempt of each op kind: the nonblocking syscall, and what its result means — a
 * completion (more to come, or final), wait for readiness (EAGAIN), wait for a receive
 * buffer, or (a file op without offsets) wait like a socket op. Table-driven by kind.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "epoll_io_internal.h"

int
cr__eio_set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -errno;
	if (!(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

/* ---- one attempt of each kind ---- */

static enum outcome
final_errno(struct result *r)
{
	if (errno == EAGAIN || errno == EWOULDBLOCK)
		return OUT_WAIT;
	r->res = -errno;
	return OUT_FINAL;
}

static enum outcome
final_ret(ssize_t n, struct result *r)
{
	if (n < 0)
		return final_errno(r);
	r->res = (int32_t)n;
	return OUT_FINAL;
}

static enum outcome
try_accept(struct eio *io, struct cr_op *op, struct result *r)
{
	int fd, tries = 0;

	(void)io;
	do
		fd = accept4(op->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	while (fd < 0 && errno == EINTR && ++tries < EINTR_TRIES);
	if (fd >= 0) {
		r->res = fd;
		return OUT_MORE;
	}
	if (errno == EAGAIN)
		return OUT_WAIT;
	r->res = -errno;
	/* One connection failed, not the listener: the op goes on, as the io_uring driver's
	 * does. -EMFILE, -ENFILE, -ENOBUFS, -ENOMEM end it (cr_io.h): the owner decides when
	 * to accept again. So does anything that says it is no listener. */
	return cr_io_accept_error_transient(errno) ? OUT_MORE : OUT_FINAL;
}

static enum outcome
try_recv(struct eio *io, struct cr_op *op, struct result *r)
{
	ssize_t n;
	uint32_t id;
	uint8_t *buf;
	int tries = 0;

	/* The data stays in the socket, in order, until a buffer comes back. */
	if (eio_bufs_free(io) == 0)
		return OUT_STARVE;
	id = io->free_ids[--io->nfree];
	buf = io->bufs + (size_t)id * io->buf_size;
	do
		n = recv(op->fd, buf, io->buf_size, MSG_DONTWAIT);
	while (n < 0 && errno == EINTR && ++tries < EINTR_TRIES);
	if (n > 0) {
		io->buf_out[id] = BUF_LENT;
		io->bufs_lent++;
		r->res = (int32_t)n;
		r->flags = CR_IO_F_BUFFER;
		r->buf = buf;
		r->buf_id = id;
		return OUT_MORE;
	}
	io->free_ids[io->nfree++] = id;
	return final_ret(n, r);
}

static enum outcome
try_send(struct eio *io, struct cr_op *op, struct result *r)
{
	(void)io;
	return final_ret(send(op->fd, op->u.rw.buf, rw_len(op), MSG_NOSIGNAL | MSG_DONTWAIT), r);
}

static enum outcome
try_sendmsg(struct eio *io, struct cr_op *op, struct result *r)
{
	(void)io;
	return final_ret(sendmsg(op->fd, op->u.msg.msg, MSG_NOSIGNAL | MSG_DONTWAIT), r);
}

static enum outcome
try_recvmsg(struct eio *io, struct cr_op *op, struct result *r)
{
	(void)io;
	return final_ret(recvmsg(op->fd, op->u.msg.msg, MSG_DONTWAIT), r);
}

static enum outcome
try_connect(struct eio *io, struct cr_op *op, struct result *r)
{
	int err = 0;
	socklen_t len = sizeof(err);

	(void)io;
	if (op_has(op, OPF_CONNECTING)) {
		if (getsockopt(op->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			return final_errno(r);
		if (err != 0) {
			r->res = -err;
			return OUT_FINAL;
		}
	}
	/* Asked again after a writable event: EISCONN is the proof that it finished, and a
	 * stray event finds EALREADY and goes back to waiting. */
	if (connect(op->fd, (const struct sockaddr *)&op->u.connect.addr, op->u.connect.len) == 0)
		return final_ret(0, r);
	switch (errno) {
	case EISCONN:
		if (!op_has(op, OPF_CONNECTING))
			break;
		return final_ret(0, r);
	case EINPROGRESS:
	case EALREADY:
	case EINTR:
		op_set(op, OPF_CONNECTING);
		return OUT_WAIT;
	default:
		break;
	}
	r->res = -errno;
	return OUT_FINAL;
}

/* read / write of a pipe or socket: the offset means nothing there (as with io_uring). */
static enum outcome
try_stream(struct eio *io, struct cr_op *op, struct result *r)
{
	struct iovec iov = {op->u.rw.buf, rw_len(op)};
	bool rd = op->kind == CR_OP_READ;
	ssize_t n;

	(void)io;
	if (!op_has(op, OPF_BLOCKING)) {
		n = rd ? preadv2(op->fd, &iov, 1, -1, RWF_NOWAIT)
		       : pwritev2(op->fd, &iov, 1, -1, RWF_NOWAIT);
		if (n >= 0 || errno != EOPNOTSUPP)
			return final_ret(n, r);
		/* Rare (a character device): read it plainly, once it said it is ready. */
		op_set(op, OPF_BLOCKING);
	}
	n = rd ? read(op->fd, iov.iov_base, iov.iov_len) : write(op->fd, iov.iov_base, iov.iov_len);
	return final_ret(n, r);
}

/*
 * splice(2) with SPLICE_F_NONBLOCK; the waiting end is O_NONBLOCK (lib/io saw to it).
 * EAGAIN waits for that end's next readiness, unless the pipe end is the reason: then it
 * is the result (cr_io.h). A readiness event is no promise (a socket's POLLOUT threshold
 * is not the send path's), so a splice may wait more than once. Offsets are copies: the
 * op's are never advanced.
 */
/*
 * splice(2) has no MSG_NOSIGNAL: into a socket or pipe whose reader is gone it raises
 * SIGPIPE, which kills the process by default (cr-proxy was killed so under the hostile
 * non-readers). The lcore thread blocks SIGPIPE before its first splice, and takes back
 * the one an -EPIPE left pending, so the error is the op's result and nothing else.
 */
static _Thread_local bool sigpipe_blocked;

static void
block_sigpipe(void)
{
	sigset_t set;

	if (sigpipe_blocked)
		return;
	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	(void)pthread_sigmask(SIG_BLOCK, &set, NULL);
	sigpipe_blocked = true;
}

static void
take_sigpipe(void)
{
	static const struct timespec now = {0, 0};
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	(void)sigtimedwait(&set, NULL, &now);
}

static enum outcome
try_splice(struct eio *io, struct cr_op *op, struct result *r)
{
	loff_t oin = op->u.splice.off_in, oout = op->u.splice.off_out;
	ssize_t n;
	int tries = 0;

	(void)io;
	block_sigpipe();
	do
		n = splice(op->u.splice.fd_in, oin < 0 ? NULL : &oin, op->u.splice.fd_out,
			   oout < 0 ? NULL : &oout, op->u.splice.len, op->u.splice.flags);
	while (n < 0 && errno == EINTR && ++tries < EINTR_TRIES);
	if (n >= 0) {
		r->res = (int32_t)n;
		return OUT_FINAL;
	}
	if (errno == EAGAIN && !op->u.splice.wait_file && !cr_io_splice_pipe_stuck(op))
		return OUT_WAIT;
	r->res = -errno;
	if (errno == EPIPE)
		take_sigpipe();
	return OUT_FINAL;
}

enum outcome
cr__eio_try_file(struct eio *io, struct cr_op *op, struct result *r)
{
	ssize_t n;
	int tries = 0;

	(void)io;
	do {
		if (op->kind == CR_OP_READ)
			n = pread(op->fd, op->u.rw.buf, rw_len(op), (off_t)op->u.rw.off);
		else if (op->kind == CR_OP_WRITE)
			n = pwrite(op->fd, op->u.rw.buf, rw_len(op), (off_t)op->u.rw.off);
		else
			n = fsync(op->fd);
	} while (n < 0 && errno == EINTR && ++tries < EINTR_TRIES);
	/* No offsets (a pipe or socket), or a nonblocking fd that has nothing yet: both wait
	 * for readiness like any socket op. */
	if (n < 0 && op->kind != CR_OP_FSYNC && (errno == ESPIPE || errno == EAGAIN))
		return OUT_STREAM;
	r->res = n < 0 ? -errno : (int32_t)n;
	return OUT_FINAL;
}

const struct opdef cr__eio_opdefs[CR_OP_SPLICE + 1] = {
    [CR_OP_ACCEPT] = {IN_RD, false, true, try_accept},
    [CR_OP_RECV] = {IN_RD, false, false, try_recv},
    [CR_OP_SEND] = {IN_WR, false, false, try_send},
    [CR_OP_SENDMSG] = {IN_WR, false, false, try_sendmsg},
    [CR_OP_RECVMSG] = {IN_RD, false, false, try_recvmsg},
    [CR_OP_CONNECT] = {IN_WR, false, true, try_connect},
    [CR_OP_READ] = {IN_RD, true, false, try_stream},
    [CR_OP_WRITE] = {IN_WR, true, false, try_stream},
    [CR_OP_FSYNC] = {IN_WR, true, false, NULL},
    [CR_OP_SPLICE] = {IN_RD, false, false, try_splice}, /* side: op_side() */
};
_Static_assert(sizeof(cr__eio_opdefs) / sizeof(cr__eio_opdefs[0]) == CR_OP_SPLICE + 1,
	       "one opdef per enum cr_op_kind");
