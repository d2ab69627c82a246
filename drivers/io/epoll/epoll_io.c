/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The epoll driver's I/O ops: the op semantics of cr_io.h rebuilt from readiness and
 * nonblocking syscalls, for hosts that refuse io_uring.
 *
 * Each op waits in exactly one list: a side (read or write) of its fd, the file queue
 * (read / write / fsync on regular files, which are always ready) or the finish queue (its
 * final result is already known: cancelled, bad fd). A new socket op is tried at the next
 * poll without waiting for readiness; only EAGAIN makes it wait, and only then is its fd
 * added to the epoll set. Fds are registered edge-triggered, so a side that became ready
 * keeps running syscalls until EAGAIN; an fd that is still runnable when the budget runs
 * out stays on the ready list, and pending() keeps the lcore from parking meanwhile.
 *
 * A completion can re-enter the driver (its callback submits, cancels, releases buffers or
 * closes its fd), so after every cr_io_complete() the state is looked up afresh by fd: the
 * table itself may have been reallocated by a submit.
 *
 * Limitation of this fallback: reads, writes and fsyncs of regular files run synchronously
 * in the poll and block the lcore for as long as the disk takes.
 *
 * Files: epoll_io.c (this: the driver ops, receive buffers), epoll_fd.c (the fd table and
 * the epoll set), epoll_try.c (one attempt of each op kind), epoll_poll.c (the poll side).
 */
#include <errno.h>
#include <string.h>
#include <sys/resource.h>

#include "cr_reactor.h"
#include "epoll_io_internal.h"

struct cr_log_component cr__eio_log = {"drv.epoll.io", CR_LOG_NOTICE, NULL};

__attribute__((constructor)) static void
eio_log_register(void)
{
	cr_log_register(&cr__eio_log);
}

/* ---- the driver ops ---- */

static int
io_submit(struct cr_backend *be, struct cr_op *op)
{
	struct eio *io = &be->io;
	const struct opdef *d;
	int rc;

	if (op->kind >= sizeof(cr__eio_opdefs) / sizeof(cr__eio_opdefs[0]) ||
	    cr__eio_opdefs[op->kind].side == 0)
		return -EINVAL;
	d = &cr__eio_opdefs[op->kind];
	/* As with io_uring, a bad fd is the op's result, not the submit's. */
	if (op->fd < 0) {
		finish_later(io, op, -EBADF);
		return 0;
	}
	if (d->file) {
		list_append(&io->files, op, IN_FILES);
		return 0;
	}
	/* An lcore must never block in accept4 or connect, which take no MSG_DONTWAIT. */
	if (d->nonblock && (rc = cr__eio_set_nonblock(op->fd)) != 0) {
		finish_later(io, op, rc);
		return 0;
	}
	return cr__eio_fd_add_op(be, op);
}

static int
io_cancel(struct cr_backend *be, struct cr_op *op)
{
	struct eio *io = &be->io;

	switch (op_where(op)) {
	case IN_FINISH:
		return -EALREADY;
	case IN_FILES:
		list_remove(&io->files, op);
		break;
	case IN_RD:
	case IN_WR:
		/* Off the fd at once: its owner may close it before the completion runs. */
		cr__eio_fd_remove_op(be, op);
		break;
	default:
		return -ENOENT;
	}
	finish_later(io, op, -ECANCELED);
	return 0;
}

static void
io_buf_release(struct cr_backend *be, uint32_t buf_id)
{
	struct eio *io = &be->io;

	if (buf_id >= io->buf_ids || !io->buf_out[buf_id]) {
		CR_LOG(cr__eio_log, ERR, "lcore %u: receive buffer %u released but not lent",
		       be->lcore, buf_id);
		return;
	}
	if (io->buf_out[buf_id] == BUF_HELD)
		io->bufs_held--;
	else
		io->bufs_lent--;
	io->buf_out[buf_id] = 0;
	io->free_ids[io->nfree++] = buf_id;
	/* A starved recv resumes from the next poll (pending() says so). */
}

/*
 * The free stack holds the spares too; held buffers are capped at their number, so the
 * receives always have buf_count buffers as if nothing were held.
 */
static int
io_buf_hold(struct cr_backend *be, uint32_t buf_id)
{
	struct eio *io = &be->io;

	if (buf_id >= io->buf_ids || io->buf_out[buf_id] != BUF_LENT)
		return -EINVAL;
	if (io->bufs_held == io->buf_spares)
		return -ENOBUFS;
	io->bufs_lent--;
	io->bufs_held++;
	io->buf_out[buf_id] = BUF_HELD;
	return 0;
}

static uint32_t
io_buf_size(struct cr_backend *be)
{
	return be->io.buf_size;
}

static unsigned
fd_cap_start(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur > FD_CAP_START_MAX)
		return FD_CAP_START_MAX;
	return rl.rlim_cur < FD_CAP_MIN ? FD_CAP_MIN : (unsigned)rl.rlim_cur;
}

static int
io_init(struct cr_backend *be, const struct cr_io_config *cfg)
{
	struct eio *io = &be->io;
	int node = cr_lcore_numa(be->lcore);
	uint32_t i, n;

	if (cfg->buf_count == 0 || cfg->buf_size == 0 || cfg->buf_size > MAX_RW)
		return -EINVAL;
	if (cfg->buf_spares > MAX_SPARES)
		return -EINVAL;
	n = cfg->buf_count + cfg->buf_spares;
	memset(io, 0, sizeof(*io));
	/* Untouched pages of these mappings cost nothing: a large table is cheap. */
	io->bufs = cr_numa_zalloc((size_t)n * cfg->buf_size, node);
	if (io->bufs == NULL)
		goto out;
	io->free_ids = cr_numa_zalloc(sizeof(*io->free_ids) * n, node);
	if (io->free_ids == NULL)
		goto out_free_bufs;
	io->buf_out = cr_numa_zalloc(n, node);
	if (io->buf_out == NULL)
		goto out_free_ids;
	io->fd_cap = fd_cap_start();
	io->fds = cr_numa_zalloc(sizeof(*io->fds) * io->fd_cap, node);
	if (io->fds == NULL)
		goto out_free_out;
	io->buf_count = cfg->buf_count;
	io->buf_ids = n;
	io->buf_size = cfg->buf_size;
	io->buf_spares = cfg->buf_spares;
	/* Lowest ids on top: a quiet lcore keeps reusing the same few, cache-warm buffers. */
	for (i = 0; i < n; i++)
		io->free_ids[i] = n - 1 - i;
	io->nfree = n;
	io->up = true;
	return 0;

out_free_out:
	cr_numa_free(io->buf_out);
out_free_ids:
	cr_numa_free(io->free_ids);
out_free_bufs:
	cr_numa_free(io->bufs);
out:
	memset(io, 0, sizeof(*io));
	return -ENOMEM;
}

void
cr__epoll_io_free(struct cr_backend *be)
{
	struct eio *io = &be->io;

	cr_numa_free(io->fds);
	cr_numa_free(io->buf_out);
	cr_numa_free(io->free_ids);
	cr_numa_free(io->bufs);
	memset(io, 0, sizeof(*io));
}

static bool
buf_is_held(size_t id, void *arg)
{
	const struct eio *io = arg;

	return io->buf_out[id] == BUF_HELD;
}

static void
io_fini(struct cr_backend *be)
{
	struct eio *io = &be->io;

	/* lib/io saw every op's final completion, so every fd left the set with its last op;
	 * the kernel holds nothing of ours. */
	if (io->n_registered != 0 || io->nfree != io->buf_ids)
		CR_LOG(cr__eio_log, WARNING,
		       "lcore %u: %u fds still watched, %u receive buffers lent at fini", be->lcore,
		       io->n_registered, io->buf_ids - io->nfree);
	if (io->bufs_held != 0) {
		/* The app still reads them (cr_conn_hold()): their pages stay, with no owner,
		 * until the process exits; the rest of the pool goes. The next incarnation maps
		 * its own. */
		size_t kept =
		    cr_numa_free_except(io->bufs, io->buf_size, io->buf_ids, buf_is_held, io);

		CR_LOG(cr__eio_log, NOTICE,
		       "lcore %u: %u receive buffers held at stop; their %zu KiB are kept",
		       be->lcore, io->bufs_held, kept / 1024);
		io->bufs = NULL;
	}
	cr__epoll_io_free(be);
}

const struct cr_io_driver_ops cr__epoll_io_ops = {
	.init = io_init,
	.fini = io_fini,
	.submit = io_submit,
	.cancel = io_cancel,
	.buf_release = io_buf_release,
	.buf_size = io_buf_size,
	.buf_hold = io_buf_hold,
};
