/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The epoll driver's poll side: readiness events applied to the fd table, then, within
 * the budget, the known results (finish queue), the file ops, and the ready fds (writes
 * before reads, a quota per fd), each poll starting with the next of the three, each
 * completion reported to lib/io.
 */
#include <sys/epoll.h>

#include "cr_reactor.h"
#include "epoll_io_internal.h"

void
cr__epoll_io_event(struct cr_backend *be, int fd, uint32_t events)
{
	struct eio *io = &be->io;
	struct eio_fd *e;

	if (fd < 0 || (unsigned)fd >= io->fd_cap)
		return;
	e = &io->fds[fd];
	/* Queued before the fd left the set: nothing waits for it any more. */
	if (!(e->flags & FD_REGISTERED))
		return;
	if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		e->flags |= FD_RD_READY;
	if (events & (EPOLLOUT | EPOLLHUP | EPOLLERR))
		e->flags |= FD_WR_READY;
	cr__eio_fd_update(be, fd);
}

bool
cr__epoll_io_pending(const struct cr_backend *be)
{
	const struct eio *io = &be->io;

	return io->finish.head != NULL || io->files.head != NULL || io->ready.head != 0 ||
	       (io->starved.head != 0 && eio_bufs_free(io) != 0);
}

/*
 * Run one side of @p fd in order until it would block, has no op, or took @p quota
 * completions. A final completion takes its op off the fd first, and the fd out of the
 * epoll set if it was the last one, because the callback may close the fd.
 */
static unsigned
side_run(struct cr_backend *be, int fd, bool rd, unsigned quota)
{
	struct eio *io = &be->io;
	uint8_t ready = rd ? FD_RD_READY : FD_WR_READY;
	unsigned n = 0;

	while (n < quota) {
		struct eio_fd *e = &io->fds[fd];
		struct eio_oplist *l = rd ? &e->rd : &e->wr;
		struct cr_op *op = l->head;
		struct result r = {0, 0, NULL, 0};
		cr_op_id id;
		int rc;

		if (op == NULL || !(e->flags & ready) || (rd && (e->flags & FD_STARVED)))
			break;
		switch (cr__eio_opdefs[op->kind].try(io, op, &r)) {
		case OUT_WAIT:
			rc = cr__eio_fd_watch(be, fd);
			if (rc == 0) {
				e->flags &= (uint8_t)~ready;
				return n;
			}
			/* No event would ever come: fail this op; the next one tries on its own. */
			CR_LOG(cr__eio_log, DEBUG, "EPOLL_CTL_ADD fd %d: %s", fd, cr_strerror(rc));
			r.res = rc;
			break;
		case OUT_STARVE:
			cr__eio_fdq_append(io, fd, true);
			return n;
		case OUT_MORE:
			cr_io_complete(op->id, r.res, r.flags | CR_IO_F_MORE, r.buf, r.buf_id);
			n++;
			continue;
		case OUT_FINAL:
		case OUT_STREAM:
			break;
		}
		id = op->id;
		list_remove(l, op);
		if (e->rd.head == NULL && e->wr.head == NULL)
			cr__eio_fd_release(be, fd);
		cr_io_complete(id, r.res, r.flags, r.buf, r.buf_id);
		n++;
	}
	return n;
}

static unsigned
run_ready(struct cr_backend *be, unsigned budget)
{
	struct eio *io = &be->io;
	unsigned n = 0, got, quota;
	int fd;

	/* Each visit either completes something or leaves the fd unrunnable (EAGAIN, no
	 * buffer, no op), so this ends within budget + the fds queued. */
	while (n < budget && io->ready.head != 0) {
		fd = io->ready.head - 1;
		cr__eio_fdq_unlink(io, fd, false);
		quota = budget - n < FD_QUOTA ? budget - n : FD_QUOTA;
		/* Writes first: flushing replies frees the peer before we read more from it. */
		got = side_run(be, fd, false, quota);
		if (got < quota)
			got += side_run(be, fd, true, quota - got);
		n += got;
		/* Back at the tail if still runnable: busy fds take turns. */
		cr__eio_fd_update(be, fd);
	}
	return n;
}

static unsigned
run_files(struct cr_backend *be, unsigned budget)
{
	struct eio *io = &be->io;
	unsigned n = 0;
	int rc;

	while (n < budget && io->files.head != NULL) {
		struct cr_op *op = io->files.head;
		struct result r = {0, 0, NULL, 0};

		list_remove(&io->files, op);
		if (cr__eio_try_file(io, op, &r) == OUT_STREAM) {
			rc = cr__eio_fd_add_op(be, op);
			if (rc != 0)
				finish_later(io, op, rc);
			continue;
		}
		cr_io_complete(op->id, r.res, 0, NULL, 0);
		n++;
	}
	return n;
}

static unsigned
run_finish(struct cr_backend *be, unsigned budget)
{
	struct eio *io = &be->io;
	unsigned n = 0;

	while (n < budget && io->finish.head != NULL) {
		struct cr_op *op = io->finish.head;

		list_remove(&io->finish, op);
		cr_io_complete(op->id, (int32_t)(uint32_t)op->drv[3], 0, NULL, 0);
		n++;
	}
	return n;
}

/* As many starved fds as there are free buffers go back to reading. */
static void
resume_starved(struct cr_backend *be)
{
	struct eio *io = &be->io;
	uint32_t k = eio_bufs_free(io);
	int fd;

	while (k-- > 0 && io->starved.head != 0) {
		fd = io->starved.head - 1;
		cr__eio_fdq_unlink(io, fd, true);
		cr__eio_fd_update(be, fd);
	}
}

/*
 * The three sources take turns at being served first: with a fixed order, a stream of
 * file ops that filled every budget kept every socket waiting.
 */
unsigned
cr__epoll_io_poll(struct cr_backend *be, unsigned budget)
{
	static unsigned (*const source[])(struct cr_backend *, unsigned) = {
		run_finish,
		run_files,
		run_ready,
	};
	const unsigned n_src = sizeof(source) / sizeof(source[0]);
	struct eio *io = &be->io;
	unsigned n = 0, first;

	if (!io->up)
		return 0;
	resume_starved(be);
	first = io->first;
	io->first = (first + 1) % n_src;
	for (unsigned i = 0; i < n_src && n < budget; i++)
		n += source[(first + i) % n_src](be, budget - n);
	return n;
}
