/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Bulk by splice: a direction of a plain session that moves bulk stops going through
 * lib/net's receive buffers and output queue and is spliced, source socket -> pooled pipe
 * -> destination socket, with one op in flight at a time (doc/guides/proxy.md, "How bytes
 * move").
 *
 * The switch loses and reorders nothing: the source's reads are stopped first, and the
 * splice begins only once lib/net has no receive of it in flight (whatever it had received
 * went through on_data and was queued on the destination) and the destination's queue is
 * empty (sent and acknowledged), so the spliced bytes follow every queued one.
 *
 * The splice works on duplicates of the two sockets, closed once its last op completed:
 * lib/net may end a connection (a reset seen by the other direction, a retire) while a
 * splice of it is in flight, and a descriptor number it closes must not be one a splice
 * (or, epoll, a readiness wait) still uses.
 *
 * At the source's EOF the direction gives the source back to lib/net (reads started
 * again): lib/net then reads the EOF itself and the relay's on_eof shuts the destination,
 * as for a copied direction, and lib/net's own accounting of both directions (a connection
 * ends when both are done) stays right. A splice error resets the session, as a failed
 * send or a reset does in a copied one.
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "cr_app.h"
#include "cr_telemetry.h"
#include "relay_internal.h"

#define POLL_FIRST_NS (100ull * 1000)	    /* 100 us */
#define POLL_MAX_NS   (10ull * 1000 * 1000) /* 10 ms */

static void dir_in(struct px_dir *d);
static void dir_out(struct px_dir *d);

static struct cr_conn *
src_of(const struct px_dir *d)
{
	return d->c2s ? d->s->cli : d->s->srv;
}

static struct cr_conn *
dst_of(const struct px_dir *d)
{
	return d->c2s ? d->s->srv : d->s->cli;
}

static void switch_poll(struct cr_timer *t, void *arg);

void
px_dir_init(struct px_session *s)
{
	for (int i = 0; i < 2; i++) {
		struct px_dir *d = &s->dir[i];

		d->s = s;
		d->c2s = i == 0;
		d->mode = px_relay.splice_threshold != 0 ? PX_DIR_COPY : PX_DIR_NEVER;
		d->from = d->to = -1;
		d->p.rd = d->p.wr = -1;
		cr_timer_init(&d->timer, switch_poll, d);
	}
}

bool
px_dir_lib_reads(const struct px_dir *d)
{
	return d->mode == PX_DIR_COPY || d->mode == PX_DIR_BACK || d->mode == PX_DIR_NEVER;
}

bool
px_dir_busy(const struct px_session *s)
{
	return s->dir[0].op != 0 || s->dir[1].op != 0;
}

/* The duplicates closed, the pipe back (drained or replaced if bytes are left in it). */
static void
release(struct px_dir *d, enum px_dir_mode mode)
{
	cr_timer_stop(&d->timer);
	if (d->from >= 0)
		close(d->from);
	if (d->to >= 0)
		close(d->to);
	d->from = d->to = -1;
	if (d->p.rd >= 0)
		cr_io_pipe_put(&d->p);
	d->p.rd = d->p.wr = -1;
	d->in_pipe = 0;
	d->mode = mode;
}

/* After the last op of a stopped direction: the session may be free now. */
static void
released(struct px_dir *d)
{
	struct px_session *s = d->s;

	release(d, PX_DIR_NEVER);
	if (!px_dir_busy(s))
		px_session_done(px_cur(), s);
}

void
px_dir_stop(struct px_dir *d)
{
	switch (d->mode) {
	case PX_DIR_SWITCHING:
		release(d, PX_DIR_NEVER);
		break;
	case PX_DIR_SPLICE:
		if (d->op != 0) {
			d->mode = PX_DIR_STOPPING;
			(void)cr_io_cancel(d->op);
		} else {
			release(d, PX_DIR_NEVER);
		}
		break;
	case PX_DIR_COPY:
		d->mode = PX_DIR_NEVER;
		break;
	default:
		break;
	}
}

/*
 * The lcore stops (its relay state goes, after lib/io stopped): a forced stop abandoned the
 * splice in flight, whose completion never comes, so nothing else would close the
 * duplicates. lib/io is done with them (it waited for every op's last completion) and has
 * closed its pipes, lent ones included: forget the pipe, close ours.
 */
void
px_dir_forget(struct px_dir *d)
{
	if (d->from >= 0)
		close(d->from);
	if (d->to >= 0)
		close(d->to);
	d->from = d->to = -1;
	d->p.rd = d->p.wr = -1;
	d->op = 0;
	d->mode = PX_DIR_NEVER;
}

void
px_dir_eof(struct px_dir *d)
{
	if (d->mode == PX_DIR_SWITCHING)
		release(d, PX_DIR_NEVER);
	else if (d->mode == PX_DIR_COPY)
		d->mode = PX_DIR_NEVER;
}

/* A splice failed: the side it failed on is why the session ends, as a reset is. */
static void
dir_fail(struct px_dir *d, bool on_src)
{
	struct px_session *s = d->s;
	bool client = d->c2s == on_src;

	px_ended(s, client ? PX_END_CLIENT_RESET : PX_END_SERVER_RESET);
	px_session_abort(px_cur(), s); /* stops both directions */
}

/* The source's EOF, the pipe empty: lib/net reads the source again and finds the EOF. */
static void
dir_back(struct px_dir *d)
{
	struct cr_conn *src = src_of(d);

	release(d, PX_DIR_BACK);
	if (src != NULL)
		cr_conn_read_start(src);
}

static void
count_in(struct px_dir *d, uint32_t n)
{
	struct px_session *s = d->s;

	cr_telemetry_add(px_ctr_splice_bytes, n);
	if (d->c2s) {
		s->cli_active = cr_now_ns();
		PX_ADD(cr_lcore_id(), s->slot, bytes_out, n);
		s->log.c2s += n;
	} else {
		s->srv_active = cr_now_ns();
		PX_ADD(cr_lcore_id(), s->slot, bytes_in, n);
		s->log.s2c += n;
	}
}

static void
in_done(void *ctx, const struct cr_io_cqe *cqe)
{
	struct px_dir *d = ctx;

	d->op = 0;
	if (d->mode == PX_DIR_STOPPING) {
		released(d);
	} else if (cqe->res > 0) {
		d->in_pipe = (uint32_t)cqe->res;
		count_in(d, (uint32_t)cqe->res);
		dir_out(d);
	} else if (cqe->res == 0) {
		dir_back(d);
	} else if (cqe->res == -EAGAIN || cqe->res == -EINTR) {
		dir_in(d); /* the pipe is empty here: only the socket can say so, and then waits */
	} else {
		dir_fail(d, true);
	}
}

static void
out_done(void *ctx, const struct cr_io_cqe *cqe)
{
	struct px_dir *d = ctx;

	d->op = 0;
	if (d->mode == PX_DIR_STOPPING) {
		released(d);
	} else if (cqe->res > 0) {
		d->in_pipe -= (uint32_t)cqe->res;
		if (d->c2s)
			d->s->srv_active = cr_now_ns();
		else
			d->s->cli_active = cr_now_ns();
		if (d->in_pipe != 0)
			dir_out(d);
		else
			dir_in(d);
	} else if (cqe->res == -EAGAIN || cqe->res == -EINTR) {
		dir_out(d);
	} else {
		dir_fail(d, false); /* 0 out of a pipe with bytes would repeat forever: an error */
	}
}

static void
dir_in(struct px_dir *d)
{
	d->op = cr_io_splice(d->from, CR_IO_NO_OFF, d->p.wr, CR_IO_NO_OFF, cr_io_pipe_size(),
			     SPLICE_F_MOVE, 0, in_done, d);
	if (d->op == 0)
		dir_fail(d, true);
}

static void
dir_out(struct px_dir *d)
{
	d->op = cr_io_splice(d->p.rd, CR_IO_NO_OFF, d->to, CR_IO_NO_OFF, d->in_pipe,
			     SPLICE_F_MOVE | SPLICE_F_MORE, 0, out_done, d);
	if (d->op == 0)
		dir_fail(d, false);
}

/* The pipe and the duplicates; none free: copy on (the next window tries again). */
static bool
take_pipe(struct px_dir *d, struct cr_conn *src, struct cr_conn *dst)
{
	if (cr_io_pipe_get(&d->p) != 0) {
		d->p.rd = d->p.wr = -1;
		return false;
	}
	d->from = fcntl(cr_conn_fd(src), F_DUPFD_CLOEXEC, 0);
	d->to = d->from < 0 ? -1 : fcntl(cr_conn_fd(dst), F_DUPFD_CLOEXEC, 0);
	return d->to >= 0;
}

/* Switching: splice once lib/net is done with the source and the destination's queue. */
static void
switch_poll(struct cr_timer *t, void *arg)
{
	struct px_dir *d = arg;
	struct px_session *s = d->s;
	struct cr_conn *src = src_of(d), *dst = dst_of(d);
	bool *paused = d->c2s ? &s->cli_paused : &s->srv_paused;

	(void)t;
	if (d->mode != PX_DIR_SWITCHING || src == NULL || dst == NULL)
		return;
	if (cr_conn_receiving(src) || cr_conn_queued(dst) != 0) {
		/* A destination that reads slowly keeps its queue: look less often. Its bytes
		 * stay the pool's to take back meanwhile (the paused list, if over its share). */
		cr_timer_start(&d->timer, d->poll_ns);
		d->poll_ns = d->poll_ns * 2 < POLL_MAX_NS ? d->poll_ns * 2 : POLL_MAX_NS;
		return;
	}
	if (!take_pipe(d, src, dst)) {
		release(d, PX_DIR_COPY);
		cr_telemetry_add(px_ctr_splice_nopipe, 1);
		if (!*paused)
			cr_conn_read_start(src);
		return;
	}
	/* Its reads are ours from now on: a drain of the destination must not start them. */
	if (*paused) {
		*paused = false;
		px_paused_sync(px_cur(), s);
	}
	d->mode = PX_DIR_SPLICE;
	/* lib/net will not see the bytes spliced from the source: a closing lcore must not
	 * wait for it to deliver what the kernel received (the mark is what it delivered),
	 * as for a kTLS socket, whose count is not the app's either. */
	cr_conn_layer_plain(src);
	cr_telemetry_add(px_ctr_splices, 1);
	dir_in(d);
}

static bool
splice_ok(const struct px_session *s)
{
	return s->cli != NULL && s->srv != NULL && s->srv_open && s->sniff == NULL &&
	       !s->sniffing && cr_conn_layer(s->cli) == NULL && cr_conn_layer(s->srv) == NULL &&
	       cr_conn_is_open(s->cli) && cr_conn_is_open(s->srv) && !cr_conn_ending(s->cli) &&
	       !cr_conn_ending(s->srv);
}

/*
 * Begin the switch: stop the source's reads and wait for lib/net to be done with both.
 * The pipe is taken only when the splice can start, so a destination that does not read
 * holds none meanwhile; its paused flag (if it is over its share) stays, and with it the
 * pool's right to take its queued bytes back.
 */
static void
dir_switch(struct px_dir *d)
{
	if (!splice_ok(d->s))
		return;
	d->mode = PX_DIR_SWITCHING;
	cr_conn_read_stop(src_of(d));
	d->poll_ns = POLL_FIRST_NS;
	cr_timer_start(&d->timer, 0);
}

void
px_dir_note(struct px_lcore *pl, struct px_dir *d, size_t n)
{
	(void)pl;
	if (d->mode != PX_DIR_COPY)
		return;
	d->win_bytes += n;
	d->win_reads++;
	if (d->win_bytes < px_relay.splice_threshold)
		return;
	if (d->win_bytes / d->win_reads >= PX_SPLICE_MEAN_MIN)
		dir_switch(d);
	d->win_bytes = 0;
	d->win_reads = 0;
}
