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
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cr_log.h"
#include "cr_reactor.h"
#include "epoll_internal.h"

CR_LOG_COMPONENT(log_eio, "drv.epoll.io");

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

/* ---- op links and flags in cr_op.drv[] ---- */

static struct cr_op *
op_next(const struct cr_op *op)
{
	return (struct cr_op *)(uintptr_t)op->drv[0];
}

static struct cr_op *
op_prev(const struct cr_op *op)
{
	return (struct cr_op *)(uintptr_t)op->drv[1];
}

static void
op_set_next(struct cr_op *op, struct cr_op *next)
{
	op->drv[0] = (uint64_t)(uintptr_t)next;
}

static void
op_set_prev(struct cr_op *op, struct cr_op *prev)
{
	op->drv[1] = (uint64_t)(uintptr_t)prev;
}

static enum op_where
op_where(const struct cr_op *op)
{
	return (enum op_where)(op->drv[2] & 0xff);
}

static void
op_set_where(struct cr_op *op, enum op_where w)
{
	op->drv[2] = (op->drv[2] & ~(uint64_t)0xff) | (uint64_t)w;
}

static bool
op_has(const struct cr_op *op, uint32_t flag)
{
	return (op->drv[2] & flag) != 0;
}

static void
op_set(struct cr_op *op, uint32_t flag)
{
	op->drv[2] |= flag;
}

static void
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

static void
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
static void
finish_later(struct eio *io, struct cr_op *op, int32_t res)
{
	op->drv[3] = (uint32_t)res;
	list_append(&io->finish, op, IN_FINISH);
}

static size_t
rw_len(const struct cr_op *op)
{
	return op->u.rw.len < MAX_RW ? op->u.rw.len : MAX_RW;
}

/* ---- fd queues (ready, starved) ---- */

static struct eio_link *
fdq_link(struct eio *io, int fd, bool starve)
{
	return starve ? &io->fds[fd].starve : &io->fds[fd].ready;
}

static void
fdq_append(struct eio *io, int fd, bool starve)
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

static void
fdq_unlink(struct eio *io, int fd, bool starve)
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
	CR_LOG(log_eio, INFO, "lcore %u: fd table grown to %u entries for fd %d", be->lcore, cap,
	       fd);
	return 0;
}

static int
fd_watch(struct cr_backend *be, int fd)
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

/*
 * No op uses @p fd any more. It leaves the epoll set now, before the last completion runs:
 * its owner may close the fd there, and the number may come back as another socket.
 */
static void
fd_release(struct cr_backend *be, int fd)
{
	struct eio *io = &be->io;
	struct eio_fd *e = &io->fds[fd];

	if (e->flags & FD_ON_READY)
		fdq_unlink(io, fd, false);
	if (e->flags & FD_STARVED)
		fdq_unlink(io, fd, true);
	if (e->flags & FD_REGISTERED) {
		/* EBADF / ENOENT: the owner closed it already, which took it out of the set. */
		if (epoll_ctl(be->epfd, EPOLL_CTL_DEL, fd, NULL) < 0)
			CR_LOG(log_eio, DEBUG, "EPOLL_CTL_DEL fd %d: %s", fd, strerror(errno));
		io->n_registered--;
	}
	e->flags = 0;
}

/* Put @p fd on the queues its state calls for. */
static void
fd_update(struct cr_backend *be, int fd)
{
	struct eio *io = &be->io;
	struct eio_fd *e = &io->fds[fd];
	bool runnable;

	if (e->rd.head == NULL && e->wr.head == NULL) {
		fd_release(be, fd);
		return;
	}
	if ((e->flags & FD_STARVED) && (e->rd.head == NULL || e->rd.head->kind != CR_OP_RECV))
		fdq_unlink(io, fd, true);
	runnable = ((e->flags & FD_RD_READY) && e->rd.head != NULL && !(e->flags & FD_STARVED)) ||
		   ((e->flags & FD_WR_READY) && e->wr.head != NULL);
	if (runnable && !(e->flags & FD_ON_READY))
		fdq_append(io, fd, false);
	else if (!runnable && (e->flags & FD_ON_READY))
		fdq_unlink(io, fd, false);
}

static int
set_nonblock(int fd)
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
	switch (errno) {
	case EAGAIN:
		return OUT_WAIT;
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
		/* One connection failed, not the listener (accept(2)); the op goes on, as the
		 * io_uring driver's does. */
		r->res = -errno;
		return OUT_MORE;
	default:
		/* -EMFILE, -ENFILE, -ENOBUFS, -ENOMEM end the op (cr_io.h): the owner decides
		 * when to accept again. So does anything that says it is no listener. */
		r->res = -errno;
		return OUT_FINAL;
	}
}

static enum outcome
try_recv(struct eio *io, struct cr_op *op, struct result *r)
{
	ssize_t n;
	uint32_t id;
	uint8_t *buf;
	int tries = 0;

	/* The data stays in the socket, in order, until a buffer comes back. */
	if (io->nfree == 0)
		return OUT_STARVE;
	id = io->free_ids[--io->nfree];
	buf = io->bufs + (size_t)id * io->buf_size;
	do
		n = recv(op->fd, buf, io->buf_size, MSG_DONTWAIT);
	while (n < 0 && errno == EINTR && ++tries < EINTR_TRIES);
	if (n > 0) {
		io->buf_out[id] = 1;
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

static enum outcome
try_file(struct eio *io, struct cr_op *op, struct result *r)
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

typedef enum outcome (*try_fn)(struct eio *io, struct cr_op *op, struct result *r);

/* Per kind: the fd side it waits on, and its attempt once there. */
static const struct opdef {
	uint8_t side;  /* IN_RD / IN_WR; 0: not a known kind */
	bool file;     /* starts on the file queue */
	bool nonblock; /* the syscall has no per-call nonblocking flag: set O_NONBLOCK */
	try_fn try;
} opdefs[] = {
	[CR_OP_ACCEPT] = {IN_RD, false, true, try_accept},
	[CR_OP_RECV] = {IN_RD, false, false, try_recv},
	[CR_OP_SEND] = {IN_WR, false, false, try_send},
	[CR_OP_SENDMSG] = {IN_WR, false, false, try_sendmsg},
	[CR_OP_RECVMSG] = {IN_RD, false, false, try_recvmsg},
	[CR_OP_CONNECT] = {IN_WR, false, true, try_connect},
	[CR_OP_READ] = {IN_RD, true, false, try_stream},
	[CR_OP_WRITE] = {IN_WR, true, false, try_stream},
	[CR_OP_FSYNC] = {IN_WR, true, false, NULL},
};
_Static_assert(sizeof(opdefs) / sizeof(opdefs[0]) == CR_OP_FSYNC + 1,
	       "one opdef per enum cr_op_kind");

/* ---- queueing ---- */

static int
fd_add_op(struct cr_backend *be, struct cr_op *op)
{
	enum op_where side = (enum op_where)opdefs[op->kind].side;
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
	fd_update(be, op->fd);
	return 0;
}

static void
fd_remove_op(struct cr_backend *be, struct cr_op *op)
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
	fd_update(be, op->fd);
}

/* ---- the driver ops ---- */

static int
io_submit(struct cr_backend *be, struct cr_op *op)
{
	struct eio *io = &be->io;
	const struct opdef *d;
	int rc;

	if (op->kind >= sizeof(opdefs) / sizeof(opdefs[0]) || opdefs[op->kind].side == 0)
		return -EINVAL;
	d = &opdefs[op->kind];
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
	if (d->nonblock && (rc = set_nonblock(op->fd)) != 0) {
		finish_later(io, op, rc);
		return 0;
	}
	return fd_add_op(be, op);
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
		fd_remove_op(be, op);
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

	if (buf_id >= io->buf_count || !io->buf_out[buf_id]) {
		CR_LOG(log_eio, ERR, "lcore %u: receive buffer %u released but not lent", be->lcore,
		       buf_id);
		return;
	}
	io->buf_out[buf_id] = 0;
	io->free_ids[io->nfree++] = buf_id;
	/* A starved recv resumes from the next poll (pending() says so). */
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
	uint32_t i;

	if (cfg->buf_count == 0 || cfg->buf_size == 0 || cfg->buf_size > MAX_RW)
		return -EINVAL;
	memset(io, 0, sizeof(*io));
	/* Untouched pages of these mappings cost nothing: a large table is cheap. */
	io->bufs = cr_numa_zalloc((size_t)cfg->buf_count * cfg->buf_size, node);
	if (io->bufs == NULL)
		goto out;
	io->free_ids = cr_numa_zalloc(sizeof(*io->free_ids) * cfg->buf_count, node);
	if (io->free_ids == NULL)
		goto out_free_bufs;
	io->buf_out = cr_numa_zalloc(cfg->buf_count, node);
	if (io->buf_out == NULL)
		goto out_free_ids;
	io->fd_cap = fd_cap_start();
	io->fds = cr_numa_zalloc(sizeof(*io->fds) * io->fd_cap, node);
	if (io->fds == NULL)
		goto out_free_out;
	io->buf_count = cfg->buf_count;
	io->buf_size = cfg->buf_size;
	/* Lowest ids on top: a quiet lcore keeps reusing the same few, cache-warm buffers. */
	for (i = 0; i < cfg->buf_count; i++)
		io->free_ids[i] = cfg->buf_count - 1 - i;
	io->nfree = cfg->buf_count;
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

static void
io_fini(struct cr_backend *be)
{
	struct eio *io = &be->io;

	/* lib/io saw every op's final completion, so every fd left the set with its last op;
	 * the kernel holds nothing of ours. */
	if (io->n_registered != 0 || io->nfree != io->buf_count)
		CR_LOG(log_eio, WARNING,
		       "lcore %u: %u fds still watched, %u receive buffers lent at fini", be->lcore,
		       io->n_registered, io->buf_count - io->nfree);
	cr__epoll_io_free(be);
}

const struct cr_io_driver_ops cr__epoll_io_ops = {
	.init = io_init,
	.fini = io_fini,
	.submit = io_submit,
	.cancel = io_cancel,
	.buf_release = io_buf_release,
	.buf_size = io_buf_size,
};

/* ---- the poll side ---- */

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
	fd_update(be, fd);
}

bool
cr__epoll_io_pending(const struct cr_backend *be)
{
	const struct eio *io = &be->io;

	return io->finish.head != NULL || io->files.head != NULL || io->ready.head != 0 ||
	       (io->starved.head != 0 && io->nfree != 0);
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
		switch (opdefs[op->kind].try(io, op, &r)) {
		case OUT_WAIT:
			rc = fd_watch(be, fd);
			if (rc == 0) {
				e->flags &= (uint8_t)~ready;
				return n;
			}
			/* No event would ever come: fail this op; the next one tries on its own. */
			CR_LOG(log_eio, DEBUG, "EPOLL_CTL_ADD fd %d: %s", fd, cr_strerror(rc));
			r.res = rc;
			break;
		case OUT_STARVE:
			fdq_append(io, fd, true);
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
			fd_release(be, fd);
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
		fdq_unlink(io, fd, false);
		quota = budget - n < FD_QUOTA ? budget - n : FD_QUOTA;
		/* Writes first: flushing replies frees the peer before we read more from it. */
		got = side_run(be, fd, false, quota);
		if (got < quota)
			got += side_run(be, fd, true, quota - got);
		n += got;
		/* Back at the tail if still runnable: busy fds take turns. */
		fd_update(be, fd);
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
		if (try_file(io, op, &r) == OUT_STREAM) {
			rc = fd_add_op(be, op);
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
	uint32_t k = io->nfree;
	int fd;

	while (k-- > 0 && io->starved.head != 0) {
		fd = io->starved.head - 1;
		fdq_unlink(io, fd, true);
		fd_update(be, fd);
	}
}

unsigned
cr__epoll_io_poll(struct cr_backend *be, unsigned budget)
{
	unsigned n = 0;

	if (!be->io.up)
		return 0;
	resume_starved(be);
	n += run_finish(be, budget);
	n += run_files(be, budget - n);
	n += run_ready(be, budget - n);
	return n;
}
