/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The io_uring driver's I/O ops for lib/io (doc/guides/design.md "I/O"): multishot
 * accept, multishot recv on a provided-buffer ring, send/sendmsg (zero-copy above a
 * threshold), recvmsg, connect, read/write/fsync, splice (its SQEs: uring_splice.c) and
 * cancel.
 *
 * Every op's SQE carries user_data == op->id, and everything an owner sees reaches it
 * through cr_io_complete() from the backend's poll(). lib/io counts on an op ending
 * exactly once, with its last completion, so the driver hides the kernel's own endings:
 *  - a multishot whose CQE lacks F_MORE (the CQ was full, a retry limit) is re-armed under
 *    the same user_data unless it really ended: EOF, a hard error, or a cancel asked for;
 *  - a recv that found no free buffer (-ENOBUFS) waits, its data still in the socket,
 *    until a buffer comes back, then is re-armed: nothing is lost or reordered;
 *  - a zero-copy send reports at its notification CQE, once the kernel has let go of the
 *    caller's buffer, with the result its first CQE carried.
 *
 * Ops the driver must act on outside a CQE (waiting for buffers, for an SQE, or holding a
 * final completion the driver made up) sit on the attention list, which poll() works
 * through and pending() reports; the list links through op->drv[].
 *
 * Sends of at least cr_io_config.zc_threshold bytes (the io_zc_threshold build option; the
 * environment variable CR_URING_ZC_THRESHOLD overrides it, 0 = never) go zero-copy where
 * the kernel has SEND_ZC. A zero-copy send completes only when the kernel lets go of the
 * buffer, which for TCP means when the peer has acknowledged the data.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cr_log.h"
#include "cr_reactor.h"
#include "uring_internal.h"

CR_LOG_COMPONENT(log_uio, "drv.uring");

/* The kernel's cap on one read/write/send (MAX_RW_COUNT); larger requests are short. */
#define RW_MAX		 0x7ffff000u
#define BGID		 0
#define ZC_THRESHOLD_ENV "CR_URING_ZC_THRESHOLD"

/* op->drv[] use */
#define D_FLAGS 0 /* OPF_* and the attention state */
#define D_RES	1 /* a zero-copy send's result, or the final result of ATT_DONE */
#define D_PREV	2 /* attention list links */
#define D_NEXT	3

#define OPF_ZC	     0x1u /* submitted zero-copy: wait for the notification */
#define OPF_ZC_RES   0x2u /* its result is in, only the notification is left */
#define OPF_ZC_RETRY 0x4u /* the socket refused zero-copy: send again, copying */
#define OPF_NO_ZC    0x8u /* copy, whatever the size */
#define ATT_SHIFT    8
#define ATT_MASK     (0xffu << ATT_SHIFT)

/* Why an op is on the attention list. */
enum att {
	ATT_NONE = 0,
	ATT_PARKED, /* a recv waiting for a receive buffer to come back */
	ATT_ISSUE,  /* to (re-)issue when an SQE is free: a multishot, a send falling back */
	ATT_CANCEL, /* a cancel to send when an SQE is free */
	ATT_DONE,   /* to complete finally with drv[D_RES] */
};

static enum att
att_of(const struct cr_op *op)
{
	return (enum att)((op->drv[D_FLAGS] & ATT_MASK) >> ATT_SHIFT);
}

static struct cr_op *
link_of(uint64_t v)
{
	return (struct cr_op *)(uintptr_t)v;
}

/* Move @p op to attention state @p att: off the list for ATT_NONE, else to its tail. */
static void
attn_set(struct uring_io *io, struct cr_op *op, enum att att)
{
	enum att old = att_of(op);

	if (old != ATT_NONE) {
		struct cr_op *prev = link_of(op->drv[D_PREV]), *next = link_of(op->drv[D_NEXT]);

		if (prev != NULL)
			prev->drv[D_NEXT] = op->drv[D_NEXT];
		else
			io->attn_head = next;
		if (next != NULL)
			next->drv[D_PREV] = op->drv[D_PREV];
		else
			io->attn_tail = prev;
		io->n_attn--;
		if (old == ATT_PARKED)
			io->n_parked--;
	}
	op->drv[D_FLAGS] = (op->drv[D_FLAGS] & ~(uint64_t)ATT_MASK) | ((uint64_t)att << ATT_SHIFT);
	if (att == ATT_NONE)
		return;
	op->drv[D_PREV] = (uint64_t)(uintptr_t)io->attn_tail;
	op->drv[D_NEXT] = 0;
	if (io->attn_tail != NULL)
		io->attn_tail->drv[D_NEXT] = (uint64_t)(uintptr_t)op;
	else
		io->attn_head = op;
	io->attn_tail = op;
	io->n_attn++;
	if (att == ATT_PARKED)
		io->n_parked++;
}

static struct cr_op *
op_lookup(const struct uring_io *io, uint64_t user_data)
{
	uint32_t index = (uint32_t)(user_data >> CR_OP_TAG_BITS) & (CR_OP_MAX - 1);
	struct cr_op *op;

	if (index >= io->ops_cap)
		return NULL;
	op = io->ops[index];
	return op != NULL && op->state != CR_OP_FREE && op->id == user_data ? op : NULL;
}

/* ---- receive buffers ---- */

static void *
buf_addr(const struct uring_io *io, uint32_t bid)
{
	return io->bufs + (size_t)bid * io->buf_size;
}

static void
buf_give(struct uring_io *io, uint32_t bid)
{
	io_uring_buf_ring_add(io->br, buf_addr(io, bid), io->buf_size, (unsigned short)bid,
			      io_uring_buf_ring_mask(io->buf_count), 0);
	/* release: the kernel reads the entry after it sees the new tail */
	io_uring_buf_ring_advance(io->br, 1);
}

/* Take the buffer a CQE names, if any; it is lent until someone gives it back. */
static bool
buf_take(struct uring_io *io, uint32_t cflags, void **buf, uint32_t *bid)
{
	if (!(cflags & IORING_CQE_F_BUFFER))
		return false;
	*bid = cflags >> IORING_CQE_BUFFER_SHIFT;
	if (*bid >= io->buf_ids || io->lent[*bid]) {
		CR_LOG(log_uio, ERR, "CQE names receive buffer %u, not ours to take", *bid);
		return false;
	}
	io->lent[*bid] = BUF_LENT;
	io->bufs_lent++;
	*buf = buf_addr(io, *bid);
	return true;
}

static void
buf_release(struct cr_backend *be, uint32_t bid)
{
	struct uring_io *io = &be->io;

	if (bid >= io->buf_ids || !io->lent[bid]) {
		/* Giving a buffer back twice would let two recvs share it; refuse loudly. */
		CR_LOG(log_uio, ERR, "receive buffer %u released but not lent out", bid);
		return;
	}
	if (io->lent[bid] == BUF_HELD) {
		/* A spare took its place in the ring when it was held: it is a spare now. */
		io->lent[bid] = 0;
		io->spares[io->nspares++] = (uint16_t)bid;
		return;
	}
	io->lent[bid] = 0;
	io->bufs_lent--;
	buf_give(io, bid);
	/* Recvs parked on -ENOBUFS are re-armed by the next poll(); pending() says so. */
}

/* The ring gets a spare in the place of @p bid, which stays out until released. */
static int
buf_hold(struct cr_backend *be, uint32_t bid)
{
	struct uring_io *io = &be->io;

	if (bid >= io->buf_ids || io->lent[bid] != BUF_LENT)
		return -EINVAL;
	if (io->nspares == 0)
		return -ENOBUFS;
	io->lent[bid] = BUF_HELD;
	io->bufs_lent--;
	buf_give(io, io->spares[--io->nspares]);
	return 0;
}

static uint32_t
buf_size(struct cr_backend *be)
{
	return be->io.buf_size;
}

static bool
bufs_free(const struct uring_io *io)
{
	return io->bufs_lent < io->buf_count;
}

/* ---- submission ---- */

static void
prep_multishot(struct io_uring_sqe *sqe, struct cr_op *op)
{
	if (op->kind == CR_OP_ACCEPT) {
		io_uring_prep_multishot_accept(sqe, op->fd, NULL, NULL,
					       SOCK_NONBLOCK | SOCK_CLOEXEC);
	} else {
		io_uring_prep_recv_multishot(sqe, op->fd, NULL, 0, 0);
		sqe->flags |= IOSQE_BUFFER_SELECT;
		sqe->buf_group = BGID;
	}
}

static uint32_t
rw_len(size_t len)
{
	return len > RW_MAX ? RW_MAX : (uint32_t)len;
}

static size_t
msg_len(const struct msghdr *msg)
{
	size_t i, len = 0;

	for (i = 0; i < msg->msg_iovlen; i++)
		len += msg->msg_iov[i].iov_len;
	return len;
}

static bool
use_zc(const struct cr_op *op, const struct uring_io *io, bool supported, size_t len)
{
	return supported && !(op->drv[D_FLAGS] & OPF_NO_ZC) && io->zc_threshold != 0 &&
	       len >= io->zc_threshold;
}

static void
prep_send(struct uring_io *io, struct io_uring_sqe *sqe, struct cr_op *op)
{
	if (op->kind == CR_OP_SEND) {
		uint32_t len = rw_len(op->u.rw.len);

		if (use_zc(op, io, io->zc_send, len)) {
			io_uring_prep_send_zc(sqe, op->fd, op->u.rw.buf, len, MSG_NOSIGNAL, 0);
			op->drv[D_FLAGS] |= OPF_ZC;
		} else {
			io_uring_prep_send(sqe, op->fd, op->u.rw.buf, len, MSG_NOSIGNAL);
		}
	} else if (use_zc(op, io, io->zc_sendmsg, msg_len(op->u.msg.msg))) {
		io_uring_prep_sendmsg_zc(sqe, op->fd, op->u.msg.msg, MSG_NOSIGNAL);
		op->drv[D_FLAGS] |= OPF_ZC;
	} else {
		io_uring_prep_sendmsg(sqe, op->fd, op->u.msg.msg, MSG_NOSIGNAL);
	}
	if (op->drv[D_FLAGS] & OPF_ZC)
		io->stats.zc_sends++;
}

/* Queue @p op's SQE (again, for a multishot). @return false if no SQE was free. */
static bool
op_issue(struct cr_backend *be, struct cr_op *op)
{
	struct uring_io *io = &be->io;
	struct io_uring_sqe *sqe = cr__uring_get_sqe(be);

	if (sqe == NULL)
		return false;
	io->ops[op->index] = op;
	switch (op->kind) {
	case CR_OP_ACCEPT:
	case CR_OP_RECV:
		prep_multishot(sqe, op);
		break;
	case CR_OP_SEND:
	case CR_OP_SENDMSG:
		prep_send(io, sqe, op);
		break;
	case CR_OP_RECVMSG:
		io_uring_prep_recvmsg(sqe, op->fd, op->u.msg.msg, 0);
		break;
	case CR_OP_CONNECT:
		io_uring_prep_connect(sqe, op->fd, (struct sockaddr *)&op->u.connect.addr,
				      op->u.connect.len);
		break;
	case CR_OP_READ:
		io_uring_prep_read(sqe, op->fd, op->u.rw.buf, rw_len(op->u.rw.len), op->u.rw.off);
		break;
	case CR_OP_WRITE:
		io_uring_prep_write(sqe, op->fd, op->u.rw.buf, rw_len(op->u.rw.len), op->u.rw.off);
		break;
	case CR_OP_FSYNC:
		io_uring_prep_fsync(sqe, op->fd, 0);
		break;
	case CR_OP_SPLICE:
		cr__uring_prep_splice(sqe, op);
		break;
	}
	io_uring_sqe_set_data64(sqe, op->id);
	return true;
}

/* Issue again now, or as soon as an SQE is free. */
static void
op_reissue(struct cr_backend *be, struct cr_op *op)
{
	if (!op_issue(be, op)) {
		be->io.stats.sqe_waits++;
		attn_set(&be->io, op, ATT_ISSUE);
	}
}

static int
submit(struct cr_backend *be, struct cr_op *op)
{
	if (op->index >= be->io.ops_cap || op->kind < CR_OP_ACCEPT || op->kind > CR_OP_SPLICE)
		return -EINVAL;
	return op_issue(be, op) ? 0 : -EBUSY;
}

/* ---- cancellation ---- */

static bool
cancel_send(struct cr_backend *be, struct cr_op *op)
{
	struct io_uring_sqe *sqe = cr__uring_get_sqe(be);

	if (sqe == NULL)
		return false;
	io_uring_prep_cancel64(sqe, op->id, 0);
	/* Only a failed cancel posts a CQE; the op's own CQE follows either way. */
	sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
	io_uring_sqe_set_data64(sqe, TAG_CANCEL);
	return true;
}

/*
 * A zero-copy send's buffer is released only when the peer has acknowledged the data; a
 * peer that reads nothing keeps its window shut, and the notification never comes. An
 * owner that abandons the send is done with the connection (it is ending it): break it,
 * which frees the socket's send queue and so brings the notification. Only stream
 * sockets can wait like this (a datagram's buffer goes once it is sent).
 */
static void
zc_break(struct cr_op *op)
{
	struct sockaddr sa = {.sa_family = AF_UNSPEC};
	int type = 0;
	socklen_t len = sizeof(type);

	if (getsockopt(op->fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM)
		return;
	/* connect(AF_UNSPEC) disconnects a TCP socket at once: reset, queues purged. */
	if (connect(op->fd, &sa, sizeof(sa)) != 0)
		CR_LOG(log_uio, DEBUG, "breaking fd %d for an abandoned zero-copy send: %s",
		       op->fd, strerror(errno));
}

/* Complete @p op finally with @p res from the next poll(), never from inside a call. */
static void
complete_later(struct uring_io *io, struct cr_op *op, int32_t res)
{
	op->drv[D_RES] = (uint64_t)(int64_t)res;
	attn_set(io, op, ATT_DONE);
}

static int
cancel(struct cr_backend *be, struct cr_op *op)
{
	struct uring_io *io = &be->io;

	switch (att_of(op)) {
	case ATT_PARKED:
	case ATT_ISSUE:
		/* Nothing in the kernel to stop. */
		complete_later(io, op, -ECANCELED);
		return 0;
	case ATT_CANCEL:
	case ATT_DONE:
		return -EALREADY;
	case ATT_NONE:
		break;
	}
	if (op->drv[D_FLAGS] & (OPF_ZC_RES | OPF_ZC_RETRY)) {
		/* Sent; only the kernel's release of the buffer is left. */
		if (op->state == CR_OP_ABANDONED && (op->drv[D_FLAGS] & OPF_ZC_RES))
			zc_break(op);
		return -EALREADY;
	}
	if (!cancel_send(be, op)) {
		io->stats.sqe_waits++;
		attn_set(io, op, ATT_CANCEL);
	}
	return 0;
}

/* ---- completion ---- */

/* The op's last completion: off the attention list, then to lib/io (which may reuse it). */
static void
finish(struct cr_backend *be, struct cr_op *op, int32_t res)
{
	uint64_t id = op->id;

	attn_set(&be->io, op, ATT_NONE);
	op->drv[D_FLAGS] = 0;
	cr_io_complete(id, res, 0, NULL, 0);
}

static void
report(struct cr_op *op, int32_t res, bool has_buf, void *buf, uint32_t bid)
{
	cr_io_complete(op->id, res, CR_IO_F_MORE | (has_buf ? CR_IO_F_BUFFER : 0),
		       has_buf ? buf : NULL, has_buf ? bid : 0);
}

/*
 * A multishot's kernel request ended with a result worth passing on. Re-arm before the
 * callback runs, so a cancel it sends lands after the new request; if a cancel was already
 * asked for, the op ends here instead, once the result is out.
 */
static void
shot_ended(struct cr_backend *be, struct cr_op *op, int32_t res, bool has_buf, void *buf,
	   uint32_t bid)
{
	bool again = !op->cancel_sent;

	if (again) {
		be->io.stats.rearms++;
		op_reissue(be, op);
	}
	report(op, res, has_buf, buf, bid);
	if (!again)
		finish(be, op, -ECANCELED);
}

static void
recv_cqe(struct cr_backend *be, struct cr_op *op, int32_t res, uint32_t cflags)
{
	struct uring_io *io = &be->io;
	void *buf = NULL;
	uint32_t bid = 0;
	bool has_buf = buf_take(io, cflags, &buf, &bid);

	if (res <= 0 && has_buf) {
		/* No data in it: the owner has nothing to give back. */
		buf_release(be, bid);
		has_buf = false;
	}
	if (cflags & IORING_CQE_F_MORE) {
		report(op, res, has_buf, buf, bid);
		return;
	}
	if (res > 0) {
		shot_ended(be, op, res, has_buf, buf, bid);
		return;
	}
	if (res == -ENOBUFS && !op->cancel_sent) {
		/* The data waits in the socket until a buffer comes back. */
		io->stats.enobufs++;
		attn_set(io, op, ATT_PARKED);
		return;
	}
	finish(be, op, res == -ENOBUFS ? -ECANCELED : res);
}

static void
accept_cqe(struct cr_backend *be, struct cr_op *op, int32_t res, uint32_t cflags)
{
	if (cflags & IORING_CQE_F_MORE)
		report(op, res, false, NULL, 0);
	else if (res >= 0 || cr_io_accept_error_transient(-res))
		shot_ended(be, op, res, false, NULL, 0);
	else
		finish(be, op, res); /* -EMFILE, -ENFILE, -ENOBUFS, -ENOMEM, -ECANCELED, ... */
}

static void
zc_fallback(struct cr_backend *be, struct cr_op *op)
{
	be->io.stats.zc_refused++;
	op->drv[D_FLAGS] = (op->drv[D_FLAGS] & ~(uint64_t)(OPF_ZC | OPF_ZC_RES | OPF_ZC_RETRY)) |
			   OPF_NO_ZC;
	op_reissue(be, op);
}

/*
 * A zero-copy send: its result, then (with F_MORE) a notification once the kernel has let
 * go of the buffer. A socket that cannot do zero-copy (AF_UNIX, say) refuses it; the send
 * is then made again, copying, so the owner never sees the choice.
 */
static void
zc_cqe(struct cr_backend *be, struct cr_op *op, int32_t res, uint32_t cflags)
{
	uint64_t *fl = &op->drv[D_FLAGS];

	if (cflags & IORING_CQE_F_NOTIF) {
		if (!(*fl & OPF_ZC_RETRY))
			finish(be, op, (int32_t)(int64_t)op->drv[D_RES]);
		else if (op->cancel_sent)
			finish(be, op, -ECANCELED);
		else
			zc_fallback(be, op);
		return;
	}
	if (res == -EOPNOTSUPP && !(*fl & OPF_NO_ZC)) {
		*fl |= OPF_ZC_RETRY;
		if (cflags & IORING_CQE_F_MORE)
			return; /* once the notification is in */
		if (op->cancel_sent)
			finish(be, op, -ECANCELED);
		else
			zc_fallback(be, op);
		return;
	}
	if (cflags & IORING_CQE_F_MORE) {
		op->drv[D_RES] = (uint64_t)(int64_t)res;
		*fl |= OPF_ZC_RES;
		/* Abandoned before its result was in (the cancel came too early to break
		 * it): break it now, or the notification may never come. */
		if (op->state == CR_OP_ABANDONED)
			zc_break(op);
	} else {
		finish(be, op, res); /* no notification follows */
	}
}

/* A completion for no live op: lib/io gives back the buffer and calls nobody. */
static void
stale_cqe(struct cr_backend *be, uint64_t user_data, int32_t res, uint32_t cflags)
{
	void *buf = NULL;
	uint32_t bid = 0;
	bool has_buf = buf_take(&be->io, cflags, &buf, &bid);

	cr_io_complete(user_data, res,
		       ((cflags & IORING_CQE_F_MORE) ? CR_IO_F_MORE : 0) |
			       (has_buf ? CR_IO_F_BUFFER : 0),
		       buf, bid);
}

void
cr__uring_io_cqe(struct cr_backend *be, uint64_t user_data, int32_t res, uint32_t cflags)
{
	struct cr_op *op = op_lookup(&be->io, user_data);

	if (op == NULL) {
		stale_cqe(be, user_data, res, cflags);
		return;
	}
	switch (op->kind) {
	case CR_OP_RECV:
		recv_cqe(be, op, res, cflags);
		break;
	case CR_OP_ACCEPT:
		accept_cqe(be, op, res, cflags);
		break;
	case CR_OP_SPLICE:
		if (cr__uring_splice_cqe(op, &res))
			finish(be, op, res);
		else
			op_reissue(be, op);
		break;
	default:
		if (op->drv[D_FLAGS] & OPF_ZC)
			zc_cqe(be, op, res, cflags);
		else
			finish(be, op, res);
		break;
	}
}

bool
cr__uring_io_pending(const struct cr_backend *be)
{
	const struct uring_io *io = &be->io;

	return io->n_attn > io->n_parked || (io->n_parked != 0 && bufs_free(io));
}

/* One op taken off the attention list. @return 1 if it completed. */
static unsigned
attn_act(struct cr_backend *be, struct cr_op *op, enum att att)
{
	struct uring_io *io = &be->io;

	switch (att) {
	case ATT_DONE:
		finish(be, op, (int32_t)(int64_t)op->drv[D_RES]);
		return 1;
	case ATT_CANCEL:
		if (!cancel_send(be, op))
			attn_set(io, op, ATT_CANCEL);
		return 0;
	case ATT_PARKED:
		if (!bufs_free(io)) {
			attn_set(io, op, ATT_PARKED);
			return 0;
		}
		io->stats.rearms++;
		/* fall through */
	case ATT_ISSUE:
		if (!op_issue(be, op))
			attn_set(io, op, ATT_ISSUE);
		return 0;
	case ATT_NONE:
		break;
	}
	return 0;
}

unsigned
cr__uring_io_run(struct cr_backend *be, unsigned budget)
{
	struct uring_io *io = &be->io;
	unsigned n = 0, left;

	if (!cr__uring_io_pending(be))
		return 0;
	/*
	 * Ops put back go to the tail; counting bounds the pass to one look at each. The
	 * budget bounds completions only: re-arms, re-issues and cancels call nobody, and
	 * run whatever the budget, so a busy CQ cannot hold them off.
	 */
	for (left = io->n_attn; left != 0 && io->attn_head != NULL; left--) {
		struct cr_op *op = io->attn_head;
		enum att att = att_of(op);

		if (att == ATT_DONE && n >= budget) {
			attn_set(io, op, ATT_DONE); /* to the tail, for the next pass */
			continue;
		}
		attn_set(io, op, ATT_NONE);
		n += attn_act(be, op, att);
	}
	return n;
}

/* ---- set-up ---- */

static void
probe_zc(struct cr_backend *be)
{
	struct io_uring_probe *p = io_uring_get_probe_ring(&be->ring);

	if (p == NULL)
		return;
	be->io.zc_send = io_uring_opcode_supported(p, IORING_OP_SEND_ZC);
	be->io.zc_sendmsg = io_uring_opcode_supported(p, IORING_OP_SENDMSG_ZC);
	io_uring_free_probe(p);
}

static int
bufs_setup(struct cr_backend *be, const struct cr_io_config *cfg)
{
	struct uring_io *io = &be->io;
	struct io_uring_buf_reg reg;
	long page = sysconf(_SC_PAGESIZE);
	uint32_t i;
	int rc;

	/* Buffer ids are 16 bits: ring and spares together fit. */
	if (cfg->buf_count == 0 || cfg->buf_count > 32768 ||
	    (cfg->buf_count & (cfg->buf_count - 1)) != 0 || cfg->buf_size == 0 ||
	    cfg->buf_spares > 32768)
		return -EINVAL;
	io->buf_count = cfg->buf_count;
	io->buf_ids = cfg->buf_count + cfg->buf_spares;
	io->buf_size = cfg->buf_size;
	/* The kernel maps the ring itself; it must start on a page. */
	io->br_bytes = ((size_t)io->buf_count * sizeof(struct io_uring_buf) + (size_t)page - 1) &
		       ~((size_t)page - 1);
	io->br = mmap(NULL, io->br_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		      0);
	if (io->br == MAP_FAILED) {
		io->br = NULL;
		return -errno;
	}
	io->bufs = cr_numa_zalloc((size_t)io->buf_ids * io->buf_size,
				  cr_lcore_numa(cr_lcore_id()));
	io->lent = calloc(io->buf_ids, 1);
	io->spares = calloc(cfg->buf_spares + 1, sizeof(*io->spares));
	if (io->bufs == NULL || io->lent == NULL || io->spares == NULL)
		return -ENOMEM;
	/* Ids [buf_count, buf_ids) start as spares, the lowest on top. */
	for (i = io->buf_ids; i-- > io->buf_count;)
		io->spares[io->nspares++] = (uint16_t)i;
	memset(&reg, 0, sizeof(reg));
	reg.ring_addr = (uint64_t)(uintptr_t)io->br;
	reg.ring_entries = io->buf_count;
	reg.bgid = BGID;
	rc = io_uring_register_buf_ring(&be->ring, &reg, 0);
	if (rc != 0)
		return rc;
	io->br_registered = true;
	io_uring_buf_ring_init(io->br);
	for (i = 0; i < io->buf_count; i++)
		io_uring_buf_ring_add(io->br, buf_addr(io, i), io->buf_size, (unsigned short)i,
				      io_uring_buf_ring_mask(io->buf_count), (int)i);
	io_uring_buf_ring_advance(io->br, (int)io->buf_count);
	return 0;
}

void
cr__uring_io_free(struct cr_backend *be)
{
	struct uring_io *io = &be->io;

	if (io->br != NULL)
		munmap(io->br, io->br_bytes);
	cr_numa_free(io->bufs);
	free(io->lent);
	free(io->spares);
	free(io->ops);
	memset(io, 0, sizeof(*io));
}

static bool
buf_is_held(size_t id, void *arg)
{
	const struct uring_io *io = arg;

	return io->lent[id] == BUF_HELD;
}

static void
io_fini(struct cr_backend *be)
{
	struct uring_io *io = &be->io;
	uint32_t i, held = 0;

	/* Harmless now that every op is retired, but an owner lost track of them. */
	if (io->bufs_lent != 0)
		CR_LOG(log_uio, WARNING, "lcore %u: %u receive buffers still lent out at stop",
		       cr_lcore_id(), io->bufs_lent);
	if (io->br_registered)
		io_uring_unregister_buf_ring(&be->ring, BGID);
	for (i = 0; io->lent != NULL && i < io->buf_ids; i++)
		held += io->lent[i] == BUF_HELD;
	if (held != 0) {
		/* The app still reads them (cr_conn_hold()): their pages stay, with no owner,
		 * until the process exits; the rest of the pool goes. The next incarnation maps
		 * its own. */
		size_t kept =
		    cr_numa_free_except(io->bufs, io->buf_size, io->buf_ids, buf_is_held, io);

		CR_LOG(log_uio, NOTICE,
		       "lcore %u: %u receive buffers held at stop; their %zu KiB are kept",
		       cr_lcore_id(), held, kept / 1024);
		io->bufs = NULL;
	}
	cr__uring_io_free(be);
}

/* Sends of at least this many bytes go zero-copy: the build's figure, or the environment's. */
static uint32_t
zc_threshold(const struct cr_io_config *cfg)
{
	const char *s = getenv(ZC_THRESHOLD_ENV);
	unsigned long v;
	char *end;

	if (s == NULL || *s == '\0')
		return cfg->zc_threshold;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || *end != '\0' || v > UINT32_MAX) {
		CR_LOG(log_uio, WARNING, "%s=%s ignored: expected 0..%u bytes (0 = never)",
		       ZC_THRESHOLD_ENV, s, UINT32_MAX);
		return cfg->zc_threshold;
	}
	return (uint32_t)v;
}

static int
io_init(struct cr_backend *be, const struct cr_io_config *cfg)
{
	struct uring_io *io = &be->io;
	int rc;

	memset(io, 0, sizeof(*io));
	io->ops_cap = CR_IO_OPS;
	io->ops = calloc(io->ops_cap, sizeof(*io->ops));
	if (io->ops == NULL)
		return -ENOMEM;
	rc = bufs_setup(be, cfg);
	if (rc != 0) {
		CR_LOG(log_uio, ERR, "receive buffer ring (%u x %u bytes): %s", cfg->buf_count,
		       cfg->buf_size, cr_strerror(rc));
		io_fini(be);
		return rc;
	}
	probe_zc(be);
	io->zc_threshold = zc_threshold(cfg);
	return 0;
}

int
cr__uring_io_probe(struct io_uring *ring, char *why, size_t len)
{
	struct io_uring_buf_reg reg;
	struct io_uring_probe *p;
	void *mem;
	int rc;

	/* SEND_ZC came with multishot recv (6.0), which cannot be probed for by itself. */
	p = io_uring_get_probe_ring(ring);
	rc = p != NULL && io_uring_opcode_supported(p, IORING_OP_SEND_ZC) ? 0 : -ENOSYS;
	io_uring_free_probe(p);
	if (rc != 0) {
		snprintf(why, len, "the kernel lacks multishot recv (io_uring of Linux 6.0)");
		return rc;
	}
	mem = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		snprintf(why, len, "mmap: %s", strerror(errno));
		return -ENOMEM;
	}
	memset(&reg, 0, sizeof(reg));
	reg.ring_addr = (uint64_t)(uintptr_t)mem;
	reg.ring_entries = 1;
	reg.bgid = BGID;
	rc = io_uring_register_buf_ring(ring, &reg, 0);
	if (rc == 0)
		io_uring_unregister_buf_ring(ring, BGID);
	else
		snprintf(why, len, "the kernel lacks provided-buffer rings: %s", strerror(-rc));
	munmap(mem, (size_t)sysconf(_SC_PAGESIZE));
	return rc == 0 ? 0 : -ENOSYS;
}

const struct cr_io_driver_ops cr__uring_io_ops = {
	.init = io_init,
	.fini = io_fini,
	.submit = submit,
	.cancel = cancel,
	.buf_release = buf_release,
	.buf_size = buf_size,
	.buf_hold = buf_hold,
};
