/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A socket-to-socket relay through pooled pipes (cr_io.h): per direction, splice the
 * source into the pipe (up to the pipe's size), then the pipe into the destination until
 * it is empty, and again; at the source's EOF the destination is shut for writing. The
 * first error ends the relay: the other direction's op is cancelled, and the callback runs
 * only once no op is left. Each direction has at most one op in flight, so nothing is
 * allocated and nothing is reordered.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>

#include "cr_io.h"

static void dir_in(struct cr_io_relay_dir *d);
static void dir_out(struct cr_io_relay_dir *d);

static bool
dir_idle(const struct cr_io_relay_dir *d)
{
	return d->op == 0;
}

/* Both directions over and nothing in flight: pipes back, the owner told. */
static void
relay_check_done(struct cr_io_relay *r)
{
	bool ended = r->stopping || r->err != 0 || (r->dir[0].eof && r->dir[1].eof);

	if (!ended || !dir_idle(&r->dir[0]) || !dir_idle(&r->dir[1]))
		return;
	cr_io_pipe_put(&r->dir[0].p);
	cr_io_pipe_put(&r->dir[1].p);
	r->dir[0].p.rd = r->dir[1].p.rd = -1;
	if (r->stopping && r->err == 0)
		r->err = -ECANCELED;
	r->done(r->ctx, r);
}

/* The first error ends both directions. */
static void
relay_fail(struct cr_io_relay *r, int32_t err)
{
	if (r->err == 0)
		r->err = err;
	for (int i = 0; i < 2; i++)
		if (r->dir[i].op != 0)
			cr_io_cancel(r->dir[i].op);
}

static bool
relay_over(const struct cr_io_relay *r)
{
	return r->stopping || r->err != 0;
}

static void
in_done(void *ctx, const struct cr_io_cqe *cqe)
{
	struct cr_io_relay_dir *d = ctx;
	struct cr_io_relay *r = d->r;

	d->op = 0;
	if (cqe->res < 0) {
		/* A cancel of ours is the other direction's doing, not a new error. */
		if (cqe->res != -ECANCELED || !relay_over(r))
			relay_fail(r, cqe->res);
	} else if (cqe->res == 0) {
		d->eof = true;
		shutdown(d->to, SHUT_WR);
	} else {
		d->in_pipe = (uint32_t)cqe->res;
		if (!relay_over(r))
			dir_out(d);
	}
	relay_check_done(r);
}

static void
out_done(void *ctx, const struct cr_io_cqe *cqe)
{
	struct cr_io_relay_dir *d = ctx;
	struct cr_io_relay *r = d->r;

	d->op = 0;
	if (cqe->res < 0) {
		if (cqe->res != -ECANCELED || !relay_over(r))
			relay_fail(r, cqe->res);
	} else {
		d->in_pipe -= (uint32_t)cqe->res;
		d->bytes += (uint64_t)cqe->res;
		if (relay_over(r))
			;
		else if (d->in_pipe != 0)
			dir_out(d);
		else
			dir_in(d);
	}
	relay_check_done(r);
}

static void
dir_in(struct cr_io_relay_dir *d)
{
	d->op = cr_io_splice(d->from, CR_IO_NO_OFF, d->p.wr, CR_IO_NO_OFF, cr_io_pipe_size(),
			     SPLICE_F_MOVE, 0, in_done, d);
	if (d->op == 0)
		relay_fail(d->r, -errno);
}

static void
dir_out(struct cr_io_relay_dir *d)
{
	d->op = cr_io_splice(d->p.rd, CR_IO_NO_OFF, d->to, CR_IO_NO_OFF, d->in_pipe,
			     SPLICE_F_MOVE, 0, out_done, d);
	if (d->op == 0)
		relay_fail(d->r, -errno);
}

int
cr_io_relay_start(struct cr_io_relay *r, int a, int b, cr_io_relay_fn done, void *ctx)
{
	int rc;

	memset(r, 0, sizeof(*r));
	r->done = done;
	r->ctx = ctx;
	rc = cr_io_pipe_get(&r->dir[0].p);
	if (rc != 0)
		return rc;
	rc = cr_io_pipe_get(&r->dir[1].p);
	if (rc != 0) {
		cr_io_pipe_put(&r->dir[0].p);
		return rc;
	}
	for (int i = 0; i < 2; i++) {
		r->dir[i].r = r;
		r->dir[i].from = i == 0 ? a : b;
		r->dir[i].to = i == 0 ? b : a;
	}
	dir_in(&r->dir[0]);
	if (r->err == 0)
		dir_in(&r->dir[1]);
	if (r->err != 0 && dir_idle(&r->dir[0]) && dir_idle(&r->dir[1])) {
		/* Nothing started: the caller hears it here, not from the callback. */
		rc = r->err;
		cr_io_pipe_put(&r->dir[0].p);
		cr_io_pipe_put(&r->dir[1].p);
		return rc;
	}
	return 0;
}

void
cr_io_relay_stop(struct cr_io_relay *r)
{
	if (r->stopping || r->dir[0].p.rd < 0)
		return;
	r->stopping = true;
	for (int i = 0; i < 2; i++)
		if (r->dir[i].op != 0)
			cr_io_cancel(r->dir[i].op);
	relay_check_done(r);
}
