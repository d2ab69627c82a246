/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The epoll driver's fd table: per fd, its ops waiting on each side in submission order,
 * its readiness flags and its place on the ready and starved queues; the epoll set, which
 * an fd joins only when an op of it first meets EAGAIN, and leaves with its last op.
 */
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>

#include "cr_reactor.h"
#include "epoll_io_internal.h"

/* ---- fd queues (ready, starved) ---- */

static struct eio_link *
fdq_link(struct eio *io, int fd, bool starve)
{
	return starve ? &io->fds[fd].starve : &io->fds[fd].ready;
}

void
cr__eio_fdq_append(struct eio *io, int fd, bool starve)
{
	struct eio_fdq *q = starve ? &io->starved : &io->ready;
	struct eio_link *k = fdq_link(io, fd, starve);

	k->next = 0;
	k->prev = q->tail;
	if (q->tail != 0)
		fdq_link(io, q->tail - 1, starve)->next = fd + 1;
	else
		q->head = fd + 1;
	q->tail = fd + 1;
	io->fds[fd].flags |= starve ? FD_STARVED : FD_ON_READY;
}

void
cr__eio_fdq_unlink(struct eio *io, int fd, bool starve)
{
	struct eio_fdq *q = starve ? &io->starved : &io->ready;
	struct eio_link *k = fdq_link(io, fd, starve);

	if (k->prev != 0)
		fdq_link(io, k->prev - 1, starve)->next = k->next;
	else
		q->head = k->next;
	if (k->next != 0)
		fdq_link(io, k->next - 1, starve)->prev = k->prev;
	else
		q->tail = k->prev;
	k->prev = k->next = 0;
	io->fds[fd].flags &= (uint8_t) ~(starve ? FD_STARVED : FD_ON_READY);
}

/* ---- the fd table and the epoll set ---- */

/* Control path in practice: only an fd above RLIMIT_NOFILE at start gets here. */
static int
fd_reserve(struct cr_backend *be, int fd)
{
	struct eio *io = &be->io;
	unsigned cap = io->fd_cap;
	struct eio_fd *fds;

	if ((unsigned)fd < cap)
		return 0;
	if ((unsigned)fd >= FD_CAP_MAX)
		return -ENOMEM;
	while (cap <= (unsigned)fd)
		cap *= 2;
	fds = cr_numa_zalloc(sizeof(*fds) * cap, cr_lcore_numa(be->lcore));
	if (fds == NULL)
		return -ENOMEM;
	memcpy(fds, io->fds, sizeof(*fds) * io->fd_cap);
	cr_numa_free(io->fds);
	io->fds = fds;
	io->fd_cap = cap;
	CR_LOG(cr__eio_log, INFO, "lcore %u: fd table grown to %u entries for fd %d", be->lcore,
	       cap, fd);
	return 0;
}

int
cr__eio_fd_watch(struct cr_backend *be, int fd)
{
	struct eio_fd *e = &be->io.fds[fd];
	struct epoll_event ev = {
	    .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
	    .data.u64 = (uint64_t)fd + 1,
	};

	if (e->flags & FD_REGISTERED)
		return 0;
	/* EEXIST: a dup of a closed fd kept its old registration alive; take it over. */
	if (epoll_ctl(be->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 &&
	    (errno != EEXIST || epoll_ctl(be->epfd, EPOLL_CTL_MOD, fd, &ev) < 0))
		return -errno;
	e->flags |= FD_REGISTERED;
	be->io.n_registered++;
	return 0;
}

void
cr__eio_fd_release(struct cr_backend *be, int fd)
{
	struct eio *io = &be->io;
	struct eio_fd *e = &io->fds[fd];

	if (e->flags & FD_ON_READY)
		cr__eio_fdq_unlink(io, fd, false);
	if (e->flags & FD_STARVED)
		cr__eio_fdq_unlink(io, fd, true);
	if (e->flags & FD_REGISTERED) {
		/* EBADF / ENOENT: the owner closed it already, which took it out of the set. */
		if (epoll_ctl(be->epfd, EPOLL_CTL_DEL, fd, NULL) < 0)
			CR_LOG(cr__eio_log, DEBUG, "EPOLL_CTL_DEL fd %d: %s", fd, strerror(errno));
		io->n_registered--;
	}
	e->flags = 0;
}

void
cr__eio_fd_update(struct cr_backend *be, int fd)
{
	struct eio *io = &be->io;
	struct eio_fd *e = &io->fds[fd];
	bool runnable;

	if (e->rd.head == NULL && e->wr.head == NULL) {
		cr__eio_fd_release(be, fd);
		return;
	}
	if ((e->flags & FD_STARVED) && (e->rd.head == NULL || e->rd.head->kind != CR_OP_RECV))
		cr__eio_fdq_unlink(io, fd, true);
	runnable = ((e->flags & FD_RD_READY) && e->rd.head != NULL && !(e->flags & FD_STARVED)) ||
		   ((e->flags & FD_WR_READY) && e->wr.head != NULL);
	if (runnable && !(e->flags & FD_ON_READY))
		cr__eio_fdq_append(io, fd, false);
	else if (!runnable && (e->flags & FD_ON_READY))
		cr__eio_fdq_unlink(io, fd, false);
}

/* ---- queueing ---- */

int
cr__eio_fd_add_op(struct cr_backend *be, struct cr_op *op)
{
	enum op_where side = op_side(op);
	struct eio_oplist *l;
	struct eio_fd *e;
	int rc;

	rc = fd_reserve(be, op->fd);
	if (rc != 0)
		return rc;
	e = &be->io.fds[op->fd];
	l = side == IN_RD ? &e->rd : &e->wr;
	/* The first op of a side is tried before any event: most sockets are ready. Later ones
	 * queue behind it, and it waits for the side's next event already. */
	if (l->head == NULL)
		e->flags |= side == IN_RD ? FD_RD_READY : FD_WR_READY;
	list_append(l, op, side);
	cr__eio_fd_update(be, op->fd);
	return 0;
}

void
cr__eio_fd_remove_op(struct cr_backend *be, struct cr_op *op)
{
	struct eio_fd *e = &be->io.fds[op->fd];
	bool rd = op_where(op) == IN_RD;
	struct eio_oplist *l = rd ? &e->rd : &e->wr;
	bool was_head = l->head == op;

	list_remove(l, op);
	/* The new head was never tried, and may not wait for what the old one did (a send
	 * behind a connect): give it its first attempt. */
	if (was_head && l->head != NULL)
		e->flags |= rd ? FD_RD_READY : FD_WR_READY;
	cr__eio_fd_update(be, op->fd);
}
