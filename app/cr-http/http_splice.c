/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A static file's body by splice (--splice-min): file -> pipe -> socket, through lib/io
 * (cr_io_splice, both drivers) and a pipe of the lcore's pool, so its bytes never pass
 * through user memory or the connection's output queue. For plain HTTP only (TLS
 * encrypts a copy), for bodies of at least --splice-min bytes, and when the pool has a
 * pipe free; otherwise http_static.c copies, as before.
 *
 * Order. The head (and every earlier response of the connection) goes through lib/net's
 * queue; the body may go onto the socket only once all of that is out. So the head's last
 * byte ('\n') is queued with cr_conn_sendv(): its sent callback runs once every byte
 * before it has been sent, and the splices start from there. The connection's further
 * input is held while the transfer runs (http_conn.c), so nothing is queued behind the
 * body before it ends; the next responses follow it in order.
 *
 * Timeouts and a client that stops reading: every splice into the socket has the
 * keep-alive timeout as its deadline (no byte moved for that long: -ETIMEDOUT, the
 * connection is reset), and each one that moves bytes counts as activity on the
 * connection (cr_conn_note_sent()), as a send would. A transfer holds one pipe and its
 * file slot, nothing else, however slowly its client reads.
 *
 * Ownership. The transfer's slot (struct http_file) is released by f->splice_end() once,
 * after the last op's final completion: when the connection goes away mid-transfer
 * (http_splice_abort()), an op in flight is abandoned and the slot comes back from its
 * release callback, and a head still queued comes back from its sent callback
 * (-ECANCELED, at the free of the connection's slot).
 */
#include <errno.h>
#include <fcntl.h>

#include "cr_tls.h"
#include "http.h"

static const char head_end[1] = {'\n'};

static void to_pipe(struct http_file *f);
static void to_socket(struct http_file *f);

/* The end of the transfer: the pipe goes back (drained or replaced by the pool), then
 * the slot is http_static.c's again. */
static void
splice_end(struct http_file *f, int err)
{
	if (f->splicing) {
		cr_io_pipe_put(&f->pipe);
		f->splicing = false;
	}
	f->op = 0;
	f->splice_end(f, err);
}

static void
socket_done(void *ctx, const struct cr_io_cqe *cqe)
{
	struct http_file *f = ctx;
	struct http_lcore *hl = http_lcore_cur();

	f->op = 0;
	if (cqe->res <= 0) {
		/* -ETIMEDOUT: the client read nothing for the keep-alive timeout. */
		splice_end(f, cqe->res < 0 ? cqe->res : -EPIPE);
		return;
	}
	f->in_pipe -= (uint32_t)cqe->res;
	hl->cnt[CNT_STATIC_BYTES] += (uint64_t)cqe->res;
	cr_conn_note_sent(f->h->c, (size_t)cqe->res);
	if (f->in_pipe > 0)
		to_socket(f); /* a partial splice: the rest of the pipe */
	else if (f->left > 0)
		to_pipe(f);
	else
		splice_end(f, 0);
}

static void
to_socket(struct http_file *f)
{
	unsigned flags = f->left > 0 ? SPLICE_F_MORE : 0;

	f->op = cr_io_splice(f->pipe.rd, CR_IO_NO_OFF, cr_conn_fd(f->h->c), CR_IO_NO_OFF,
			     f->in_pipe, flags, http_cfg.keepalive_ns, socket_done, f);
	if (f->op == 0)
		splice_end(f, -errno);
}

static void
pipe_done(void *ctx, const struct cr_io_cqe *cqe)
{
	struct http_file *f = ctx;
	uint64_t n;

	f->op = 0;
	if (cqe->res <= 0) {
		/* An error, or the file shrank: the Content-Length sent cannot be kept. */
		splice_end(f, cqe->res < 0 ? cqe->res : -EIO);
		return;
	}
	n = (uint64_t)cqe->res;
	f->in_pipe = (uint32_t)n;
	f->off += n;
	f->left -= n;
	to_socket(f);
}

/* The pipe is empty: fill it from the file, at most its size and what is left. */
static void
to_pipe(struct http_file *f)
{
	uint64_t n = f->left < cr_io_pipe_size() ? f->left : cr_io_pipe_size();

	f->op = cr_io_splice(f->fd, (int64_t)f->off, f->pipe.wr, CR_IO_NO_OFF, (size_t)n,
			     SPLICE_F_MOVE, 0, pipe_done, f);
	if (f->op == 0)
		splice_end(f, -errno);
}

/* The head and everything before it are out: the body may follow on the socket. */
static void
head_sent(void *arg, int err)
{
	struct http_file *f = arg;

	f->head_wait = false;
	if (err != 0 || f->h == NULL) {
		splice_end(f, err != 0 ? err : -ECANCELED);
		return;
	}
	to_pipe(f);
}

bool
http_splice_wanted(const struct http_conn *h, uint64_t len)
{
	return http_cfg.splice_min != 0 && len >= http_cfg.splice_min && !cr_tls_conn(h->c);
}

int
http_splice_start(struct http_lcore *hl, struct http_conn *h, struct http_file *f,
		  void (*end)(struct http_file *f, int err))
{
	struct iovec iov = {(void *)(uintptr_t)head_end, sizeof(head_end)};
	int rc;

	/* No pipe free: the caller copies (nothing was taken). */
	if (cr_io_pipe_get(&f->pipe) != 0)
		return -EAGAIN;
	f->splicing = true;
	f->splice_end = end;
	f->in_pipe = 0;
	/* The head is the last thing written (http_out_head()): all but its final '\n' is
	 * copied into the queue, that byte marks where the body may start. */
	if (hl->out_len == 0 || hl->out[hl->out_len - 1] != '\n') {
		cr_io_pipe_put(&f->pipe);
		f->splicing = false;
		return -EAGAIN;
	}
	hl->out_len--;
	http_out_flush(h);
	rc = h->failed ? -EPIPE : cr_conn_sendv(h->c, &iov, 1, head_sent, f);
	if (rc != 0) {
		cr_io_pipe_put(&f->pipe);
		f->splicing = false;
		h->failed = true;
		return rc;
	}
	f->head_wait = true;
	hl->cnt[CNT_SPLICED]++;
	return 0;
}

static void
splice_released(void *arg)
{
	splice_end(arg, -ECANCELED);
}

bool
http_splice_abort(struct http_file *f)
{
	/* The connection is gone (f->h NULL): what is in flight ends the transfer. */
	if (f->head_wait)
		return true; /* head_sent(-ECANCELED) comes when the slot is freed */
	if (f->op != 0 && cr_io_abandon(f->op, splice_released, f) == 0)
		return true;
	if (f->splicing) {
		cr_io_pipe_put(&f->pipe);
		f->splicing = false;
	}
	f->op = 0;
	return false;
}
