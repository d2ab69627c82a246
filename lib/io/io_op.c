/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Op slots with generation handles (doc/guides/design.md rule 6). Each lcore has a table of slots
 * sized at start; a handle is (index, generation) and a completion whose generation is
 * not the slot's live one calls nothing. At lcore stop every op still in flight is
 * abandoned and its CQE awaited; if that cannot finish, the process aborts rather than
 * let the kernel write into freed memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cr_io_driver.h"
#include "io_fault_hook.h"
#include "io_pipe.h"
#include "cr_log.h"
#include "cr_reactor.h"
#include "cr_reactor_module.h"
#include "cr_telemetry.h"

CR_LOG_COMPONENT(log_io, "lib.io");

#define STOP_WAIT_NS (10ull * 1000 * 1000 * 1000)

void (*cr__io_fault_hook)(const struct cr_op *op, struct cr_io_cqe *cqe);

struct io_lcore {
	struct cr_op *ops;
	unsigned cap;
	struct cr_op *free;
	_Atomic unsigned inflight; /* written by the owner only; read by telemetry */
	struct cr_backend *be;
	const struct cr_io_driver_ops *drv;
};

static struct io_lcore io_lcores[CR_MAX_LCORES];

/* Clear the per-lcore state; the count with an atomic store, as telemetry may be reading. */
static void
io_reset(struct io_lcore *io)
{
	io->ops = NULL;
	io->cap = 0;
	io->free = NULL;
	io->be = NULL;
	io->drv = NULL;
	atomic_store_explicit(&io->inflight, 0, memory_order_relaxed);
}

/* Owner-only writes (no lock prefix); relaxed so telemetry may read from any thread. */
static inline void
inflight_add(struct io_lcore *io, int d)
{
	atomic_store_explicit(&io->inflight,
			      atomic_load_explicit(&io->inflight, memory_order_relaxed) + (unsigned)d,
			      memory_order_relaxed);
}

static struct io_lcore *
cur_io(void)
{
	unsigned id = cr_lcore_id();

	if (id == CR_LCORE_NONE) {
		errno = EPERM;
		return NULL;
	}
	if (io_lcores[id].drv == NULL) {
		errno = ENOTSUP;
		return NULL;
	}
	return &io_lcores[id];
}

static uint64_t
make_id(uint32_t index, uint64_t gen)
{
	return ((gen & CR_OP_GEN_MASK) << CR_OP_GEN_SHIFT) | ((uint64_t)index << CR_OP_TAG_BITS);
}

static struct cr_op *
lookup(struct io_lcore *io, cr_op_id id)
{
	uint32_t index = (uint32_t)(id >> CR_OP_TAG_BITS) & (CR_OP_MAX - 1);
	struct cr_op *op;

	if (id == 0 || index >= io->cap)
		return NULL;
	op = &io->ops[index];
	return op->state != CR_OP_FREE && op->id == id ? op : NULL;
}

static void deadline_fired(struct cr_timer *t, void *arg);

static struct cr_op *
op_get(struct io_lcore *io, enum cr_op_kind kind, int fd, cr_io_fn fn, void *ctx)
{
	struct cr_op *op = io->free;

	if (op == NULL) {
		errno = ENOSPC;
		return NULL;
	}
	io->free = op->next_free;
	op->kind = (uint8_t)kind;
	op->fd = fd;
	op->fn = fn;
	op->ctx = ctx;
	op->release = NULL;
	op->release_arg = NULL;
	op->timed_out = false;
	op->cancel_sent = false;
	memset(op->drv, 0, sizeof(op->drv));
	return op;
}

static void
op_put(struct io_lcore *io, struct cr_op *op)
{
	/* A new generation: any handle to the old one is dead from here on. */
	op->id = cr_op_next_id(op->id, op->index);
	op->state = CR_OP_FREE;
	op->next_free = io->free;
	io->free = op;
}

static cr_op_id
op_submit(struct io_lcore *io, struct cr_op *op)
{
	int rc;

	op->state = CR_OP_LIVE;
	rc = io->drv->submit(io->be, op);
	if (rc != 0) {
		op_put(io, op);
		errno = -rc;
		return 0;
	}
	inflight_add(io, 1);
	return op->id;
}

cr_op_id
cr_io_accept(int lfd, cr_io_fn fn, void *ctx)
{
	struct io_lcore *io = cur_io();
	struct cr_op *op;

	if (io == NULL || (op = op_get(io, CR_OP_ACCEPT, lfd, fn, ctx)) == NULL)
		return 0;
	return op_submit(io, op);
}

cr_op_id
cr_io_recv(int fd, cr_io_fn fn, void *ctx)
{
	struct io_lcore *io = cur_io();
	struct cr_op *op;

	if (io == NULL || (op = op_get(io, CR_OP_RECV, fd, fn, ctx)) == NULL)
		return 0;
	return op_submit(io, op);
}

static cr_op_id
rw_op(enum cr_op_kind kind, int fd, void *buf, size_t len, uint64_t off, cr_io_fn fn,
      void *ctx)
{
	struct io_lcore *io = cur_io();
	struct cr_op *op;

	if (io == NULL || (op = op_get(io, kind, fd, fn, ctx)) == NULL)
		return 0;
	op->u.rw.buf = buf;
	op->u.rw.len = len;
	op->u.rw.off = off;
	return op_submit(io, op);
}

cr_op_id
cr_io_send(int fd, const void *buf, size_t len, cr_io_fn fn, void *ctx)
{
	return rw_op(CR_OP_SEND, fd, (void *)(uintptr_t)buf, len, 0, fn, ctx);
}

cr_op_id
cr_io_read(int fd, void *buf, size_t len, uint64_t offset, cr_io_fn fn, void *ctx)
{
	return rw_op(CR_OP_READ, fd, buf, len, offset, fn, ctx);
}

cr_op_id
cr_io_write(int fd, const void *buf, size_t len, uint64_t offset, cr_io_fn fn, void *ctx)
{
	return rw_op(CR_OP_WRITE, fd, (void *)(uintptr_t)buf, len, offset, fn, ctx);
}

cr_op_id
cr_io_fsync(int fd, cr_io_fn fn, void *ctx)
{
	return rw_op(CR_OP_FSYNC, fd, NULL, 0, 0, fn, ctx);
}

static cr_op_id
msg_op(enum cr_op_kind kind, int fd, struct msghdr *msg, cr_io_fn fn, void *ctx)
{
	struct io_lcore *io = cur_io();
	struct cr_op *op;

	if (io == NULL || (op = op_get(io, kind, fd, fn, ctx)) == NULL)
		return 0;
	op->u.msg.msg = msg;
	return op_submit(io, op);
}

cr_op_id
cr_io_sendmsg(int fd, const struct msghdr *msg, cr_io_fn fn, void *ctx)
{
	return msg_op(CR_OP_SENDMSG, fd, (struct msghdr *)(uintptr_t)msg, fn, ctx);
}

cr_op_id
cr_io_recvmsg(int fd, struct msghdr *msg, cr_io_fn fn, void *ctx)
{
	return msg_op(CR_OP_RECVMSG, fd, msg, fn, ctx);
}

cr_op_id
cr_io_connect(int fd, const struct sockaddr *addr, socklen_t addrlen, uint64_t timeout_ns,
	      cr_io_fn fn, void *ctx)
{
	struct io_lcore *io = cur_io();
	struct cr_op *op;
	cr_op_id id;

	if (io == NULL)
		return 0;
	if (addrlen > sizeof(op->u.connect.addr)) {
		errno = EINVAL;
		return 0;
	}
	op = op_get(io, CR_OP_CONNECT, fd, fn, ctx);
	if (op == NULL)
		return 0;
	memcpy(&op->u.connect.addr, addr, addrlen);
	op->u.connect.len = addrlen;
	id = op_submit(io, op);
	if (id != 0 && timeout_ns != 0)
		cr_io_set_deadline(id, timeout_ns);
	return id;
}

/* The end a splice waits for: the one that is not a pipe (fd_in if both are). */
static int
splice_wait_end(struct cr_op *op)
{
	struct stat in, out;
	int fl;

	if (fstat(op->u.splice.fd_in, &in) != 0 || fstat(op->u.splice.fd_out, &out) != 0)
		return -errno;
	if (!S_ISFIFO(in.st_mode) && !S_ISFIFO(out.st_mode))
		return -EINVAL;
	op->u.splice.wait_out = S_ISFIFO(in.st_mode) && !S_ISFIFO(out.st_mode);
	op->fd = op->u.splice.wait_out ? op->u.splice.fd_out : op->u.splice.fd_in;
	op->u.splice.wait_file = S_ISREG(op->u.splice.wait_out ? out.st_mode : in.st_mode);
	if (op->u.splice.wait_file)
		return 0;
	/* SPLICE_F_NONBLOCK covers the pipe end only: a blocking socket would block the
	 * splice (an io_uring worker, or the lcore itself under epoll). */
	fl = fcntl(op->fd, F_GETFL);
	if (fl < 0)
		return -errno;
	if (!(fl & O_NONBLOCK) && fcntl(op->fd, F_SETFL, fl | O_NONBLOCK) != 0)
		return -errno;
	return 0;
}

bool
cr_io_splice_pipe_stuck(const struct cr_op *op)
{
	short ev = op->u.splice.wait_out ? POLLIN : POLLOUT;
	struct pollfd pfd = {op->u.splice.wait_out ? op->u.splice.fd_in : op->u.splice.fd_out,
			     ev, 0};
	int n = poll(&pfd, 1, 0);

	return n == 0 || (n == 1 && !(pfd.revents & ev));
}

cr_op_id
cr_io_splice(int fd_in, int64_t off_in, int fd_out, int64_t off_out, size_t len,
	     unsigned flags, uint64_t timeout_ns, cr_io_fn fn, void *ctx)
{
	struct io_lcore *io = cur_io();
	struct cr_op *op;
	cr_op_id id;
	int rc;

	if (io == NULL)
		return 0;
	if (len == 0 || (flags & ~(unsigned)(SPLICE_F_MOVE | SPLICE_F_MORE)) != 0 ||
	    off_in < CR_IO_NO_OFF || off_out < CR_IO_NO_OFF) {
		errno = EINVAL;
		return 0;
	}
	op = op_get(io, CR_OP_SPLICE, fd_in, fn, ctx);
	if (op == NULL)
		return 0;
	op->u.splice.fd_in = fd_in;
	op->u.splice.fd_out = fd_out;
	op->u.splice.off_in = off_in;
	op->u.splice.off_out = off_out;
	op->u.splice.len = len > CR_IO_SPLICE_MAX ? CR_IO_SPLICE_MAX : (uint32_t)len;
	op->u.splice.flags = flags | SPLICE_F_NONBLOCK;
	rc = splice_wait_end(op);
	if (rc != 0) {
		op_put(io, op);
		errno = -rc;
		return 0;
	}
	id = op_submit(io, op);
	if (id != 0 && timeout_ns != 0)
		cr_io_set_deadline(id, timeout_ns);
	return id;
}

static void
send_cancel(struct io_lcore *io, struct cr_op *op)
{
	int rc;

	if (op->cancel_sent)
		return;
	op->cancel_sent = true;
	rc = io->drv->cancel(io->be, op);
	if (rc != 0 && rc != -ENOENT && rc != -EALREADY)
		CR_LOG(log_io, WARNING, "cancel of op %#llx failed: %s",
		       (unsigned long long)op->id, cr_strerror(rc));
}

static void
deadline_fired(struct cr_timer *t, void *arg)
{
	struct cr_op *op = arg;
	struct io_lcore *io = &io_lcores[cr_lcore_id()];

	(void)t;
	op->timed_out = true;
	send_cancel(io, op);
}

/* The live op @p id names on this lcore, or NULL with *rc = -errno (-ENOENT: none). */
static struct cr_op *
find_live(cr_op_id id, struct io_lcore **iop, int *rc)
{
	struct io_lcore *io = cur_io();
	struct cr_op *op;

	if (io == NULL) {
		*rc = -errno;
		return NULL;
	}
	op = lookup(io, id);
	if (op == NULL || op->state != CR_OP_LIVE) {
		*rc = -ENOENT;
		return NULL;
	}
	*iop = io;
	return op;
}

int
cr_io_set_deadline(cr_op_id id, uint64_t timeout_ns)
{
	struct io_lcore *io;
	int rc;
	struct cr_op *op = find_live(id, &io, &rc);

	if (op == NULL)
		return rc;
	cr_timer_start(&op->deadline, timeout_ns);
	return 0;
}

int
cr_io_cancel(cr_op_id id)
{
	struct io_lcore *io;
	int rc;
	struct cr_op *op = find_live(id, &io, &rc);

	if (op == NULL)
		return rc;
	send_cancel(io, op);
	return 0;
}

int
cr_io_abandon(cr_op_id id, cr_msg_fn release, void *arg)
{
	struct io_lcore *io;
	int rc;
	struct cr_op *op = find_live(id, &io, &rc);

	if (op == NULL)
		return rc;
	op->state = CR_OP_ABANDONED;
	op->release = release;
	op->release_arg = arg;
	cr_timer_stop(&op->deadline);
	/* Told again even if a cancel went out before: the driver may have to act on the
	 * abandon itself (a zero-copy send whose result is in breaks its connection). */
	op->cancel_sent = false;
	send_cancel(io, op);
	return 0;
}

bool
cr_io_live(cr_op_id id)
{
	struct io_lcore *io;
	int rc;

	return find_live(id, &io, &rc) != NULL;
}

unsigned
cr_io_inflight(void)
{
	struct io_lcore *io = cur_io();

	return io != NULL ? atomic_load_explicit(&io->inflight, memory_order_relaxed) : 0;
}

void
cr_io_buf_release(uint32_t buf_id)
{
	struct io_lcore *io = cur_io();

	if (io != NULL)
		io->drv->buf_release(io->be, buf_id);
}

int
cr_io_buf_hold(uint32_t buf_id)
{
	struct io_lcore *io = cur_io();

	if (io == NULL)
		return -errno;
	if (io->drv->buf_hold == NULL)
		return -ENOTSUP;
	return io->drv->buf_hold(io->be, buf_id);
}

uint32_t
cr_io_buf_size(void)
{
	struct io_lcore *io = cur_io();

	return io != NULL ? io->drv->buf_size(io->be) : 0;
}

void
cr_io_complete(uint64_t user_data, int32_t res, uint32_t flags, void *buf, uint32_t buf_id)
{
	struct io_lcore *io = &io_lcores[cr_lcore_id()];
	struct cr_io_cqe cqe = {res, flags, buf, buf_id};
	struct cr_op *op = lookup(io, user_data);
	bool final = !(flags & CR_IO_F_MORE);
	cr_io_fn fn;
	void *ctx;

	if (op == NULL) {
		/* A generation no longer live: nothing to call, only the buffer to return. */
		CR_LOG(log_io, DEBUG, "stale completion %#llx res %d",
		       (unsigned long long)user_data, res);
		if (flags & CR_IO_F_BUFFER)
			io->drv->buf_release(io->be, buf_id);
		return;
	}
	if (final)
		cr_timer_stop(&op->deadline);
	if (op->state == CR_OP_ABANDONED) {
		if (flags & CR_IO_F_BUFFER)
			io->drv->buf_release(io->be, buf_id);
		/* A connection accepted for an owner that is gone: nobody else will close it. */
		if (op->kind == CR_OP_ACCEPT && res >= 0)
			close(res);
		if (final) {
			cr_msg_fn release = op->release;
			void *arg = op->release_arg;

			inflight_add(io, -1);
			op_put(io, op);
			if (release != NULL)
				release(arg);
		}
		return;
	}
	if (final && op->timed_out && res == -ECANCELED)
		cqe.res = -ETIMEDOUT;
	if (cr__io_fault_hook != NULL)
		cr__io_fault_hook(op, &cqe);
	fn = op->fn;
	ctx = op->ctx;
	if (final) {
		/* Retire the slot first: the callback may start a new op in it. */
		inflight_add(io, -1);
		op_put(io, op);
	}
	fn(ctx, &cqe);
}

/* ---- per-lcore set-up and the retirement of everything in flight at stop ---- */

static int
io_lcore_start(unsigned lcore)
{
	const struct cr_backend_ops *bops = cr_reactor_backend_ops();
	struct io_lcore *io = &io_lcores[lcore];
	struct cr_io_config cfg = {
		.buf_count = CR_IO_BUFS,
		.buf_size = CR_IO_BUF_SIZE,
		.buf_spares = CR_IO_BUF_SPARES,
		.zc_threshold = CR_IO_ZC_THRESHOLD,
	};
	unsigned i;
	int rc;

	io_reset(io);
	if (bops == NULL || bops->io == NULL)
		return 0; /* a backend without I/O (the test harness): ops fail with ENOTSUP */
	io->cap = CR_IO_OPS;
	io->ops = cr_numa_zalloc(sizeof(*io->ops) * io->cap, cr_lcore_numa(lcore));
	if (io->ops == NULL)
		return -ENOMEM;
	for (i = io->cap; i-- > 0;) {
		struct cr_op *op = &io->ops[i];

		op->index = i;
		/* A different generation base per lcore: a handle passed to the wrong lcore
		 * does not match one of its ops. */
		op->id = make_id(i, ((uint64_t)lcore << 24) + 1);
		cr_timer_init(&op->deadline, deadline_fired, op);
		op->next_free = io->free;
		io->free = op;
	}
	io->be = cr_reactor_backend();
	rc = ((const struct cr_io_driver_ops *)bops->io)->init(io->be, &cfg);
	if (rc != 0) {
		cr_numa_free(io->ops);
		io_reset(io);
		return rc;
	}
	io->drv = bops->io;
	rc = cr__io_pipes_start(lcore);
	if (rc != 0) {
		io->drv->fini(io->be);
		cr_numa_free(io->ops);
		io_reset(io);
	}
	return rc;
}

static void
io_lcore_stop(unsigned lcore)
{
	const struct cr_backend_ops *bops = cr_reactor_backend_ops();
	struct io_lcore *io = &io_lcores[lcore];
	uint64_t deadline, wakes = 0;
	unsigned i;

	if (io->drv == NULL)
		return;
	for (i = 0; i < io->cap; i++)
		if (io->ops[i].state == CR_OP_LIVE)
			cr_io_abandon(io->ops[i].id, NULL, NULL);
	/* The kernel may still write into what these ops name: wait for every CQE. */
	deadline = cr_clock_ns() + STOP_WAIT_NS;
	while (atomic_load_explicit(&io->inflight, memory_order_relaxed) != 0) {
		bops->submit(io->be);
		if (bops->poll(io->be, 256, &wakes) == 0)
			bops->park(io->be, 1000 * 1000);
		if (cr_clock_ns() > deadline) {
			CR_LOG(log_io, ERR,
			       "lcore %u: %u ops still in flight after cancel; aborting rather "
			       "than free memory the kernel may write",
			       lcore, atomic_load_explicit(&io->inflight, memory_order_relaxed));
			abort();
		}
	}
	cr__io_pipes_stop(lcore);
	io->drv->fini(io->be);
	cr_numa_free(io->ops);
	io_reset(io);
}

/* A graceful retire or shutdown waits for ops in flight (the app's on_retire /
 * on_shutdown hook cancels or finishes them); once forced, io_lcore_stop abandons them. */
static bool
io_lcore_busy(unsigned lcore, bool forced)
{
	return !forced && atomic_load_explicit(&io_lcores[lcore].inflight, memory_order_relaxed);
}

static int
read_inflight(unsigned lcore, uint64_t *out, void *arg)
{
	(void)arg;
	if (lcore >= CR_MAX_LCORES)
		return -EINVAL;
	*out = atomic_load_explicit(&io_lcores[lcore].inflight, memory_order_relaxed);
	return 0;
}

static const struct cr_reactor_module io_module = {
	.name = "io",
	.lcore_start = io_lcore_start,
	.lcore_stop = io_lcore_stop,
	.lcore_busy = io_lcore_busy,
};

/* In dependency order, whatever the link order (cr_reactor_module.h). */
__attribute__((constructor(CR_MODULE_PRIO_IO))) static void
io_module_register(void)
{
	cr_reactor_module_register(&io_module);
}

__attribute__((constructor)) static void
io_register(void)
{
	cr_telemetry_reader_register_prom("ops_in_flight", CR_TELEMETRY_GAUGE,
					  "I/O ops in flight (abandoned ones included).",
					  &(struct cr_telemetry_prom){"io_ops_in_flight"},
					  read_inflight, NULL);
}
