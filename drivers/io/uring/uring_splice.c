/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cr_io_splice() on io_uring: a POLL_ADD on the end the op waits for, then, once it is
 * ready, IORING_OP_SPLICE with SPLICE_F_NONBLOCK, one SQE at a time under the op's
 * user_data (uring_io.c issues them and routes their CQEs here).
 *
 * Why poll first. io_uring always runs a splice in an io-wq worker (it cannot be tried
 * inline), and SPLICE_F_NONBLOCK only makes the pipe end nonblocking: a splice from a
 * socket with no data blocks that worker until data comes (splice(2)), unless the socket
 * is O_NONBLOCK — then it fails with -EAGAIN, and io_uring passes that on rather than
 * retry (splice has no poll support in io_uring). So the op arms a poll on the waiting end
 * (which completes at once if it is ready) and splices only once it is ready; no worker
 * ever sleeps on a socket, and a cancel finds the poll, which ends at once. A linked
 * poll + splice pair (IOSQE_IO_LINK) would save a round trip, but a cancel cannot find
 * a linked SQE that has not started, and two CQEs per op would need telling apart; one
 * SQE at a time keeps the op's CQE unambiguous.
 *
 * A splice issued after a ready poll that still says -EAGAIN (the pipe end is full or
 * empty, cr_io_splice_pipe_stuck) ends the op with -EAGAIN; otherwise it polls again.
 * A regular file is always ready: its splice goes out without a poll.
 */
#include <errno.h>
#include <poll.h>

#include "uring_internal.h"

void
cr__uring_prep_splice(struct io_uring_sqe *sqe, struct cr_op *op)
{
	if (op->u.splice.wait_file || (op->drv[0] & URING_OPF_SPLICING)) {
		io_uring_prep_splice(sqe, op->u.splice.fd_in, op->u.splice.off_in,
				     op->u.splice.fd_out, op->u.splice.off_out, op->u.splice.len,
				     op->u.splice.flags);
		op->drv[0] |= URING_OPF_SPLICING;
	} else {
		io_uring_prep_poll_add(sqe, op->fd, op->u.splice.wait_out ? POLLOUT : POLLIN);
	}
}

bool
cr__uring_splice_cqe(struct cr_op *op, int32_t *res)
{
	if (!(op->drv[0] & URING_OPF_SPLICING)) {
		/* The poll: a mask (ready, or an error or hang-up the splice will report), or
		 * -errno. A cancel asked for meanwhile wins over starting the splice. */
		if (*res < 0)
			return true;
		if (op->cancel_sent) {
			*res = -ECANCELED;
			return true;
		}
		op->drv[0] |= URING_OPF_SPLICING;
		return false;
	}
	/* The splice: bytes moved stand even if a cancel came meanwhile. */
	if (*res == -EAGAIN && !op->u.splice.wait_file && !op->cancel_sent &&
	    !cr_io_splice_pipe_stuck(op)) {
		op->drv[0] &= ~(uint64_t)URING_OPF_SPLICING;
		return false;
	}
	return true;
}
