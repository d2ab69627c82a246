/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A TCP connection: one multishot receive, at most one send in flight over the queued
 * chunks, and one timer for idle timeouts, the close linger and deferred ends.
 *
 * The state is re-evaluated by cr__conn_progress() after every event: it starts or stops
 * the receive (watermarks, the app's read_stop), sends what is queued, shuts the write
 * side when asked and the queue is empty, and ends the connection when both sides are
 * done. Callbacks run only from completions and timers; when an app call makes the
 * connection end, the end is deferred to a zero-delay timer so on_close never runs inside
 * the app's own call.
 *
 * Lifetime: c->holds counts ops in flight plus callbacks on the stack. Ending a
 * connection abandons its ops; the slot, its chunks and its socket are released when the
 * last hold goes, i.e. after every final completion (doc/guides/design.md rule 6).
 */
#include <errno.h>
#include <netinet/tcp.h>
#include <string.h>
#include <unistd.h>

#include "net_internal.h"

#define L cr__net_log

static void conn_timer_fired(struct cr_timer *t, void *arg);

static void
live_add(struct net_lcore *nl, struct cr_conn *c)
{
	c->prev = NULL;
	c->next = nl->live;
	if (nl->live != NULL)
		nl->live->prev = c;
	nl->live = c;
}

static void
live_del(struct net_lcore *nl, struct cr_conn *c)
{
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		nl->live = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	c->next = c->prev = NULL;
}

int
cr__socket_opts_nodelay(int fd, bool nagle)
{
	int one = 1;

	if (nagle)
		return 0;
	return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0 ? 0 : -errno;
}

void
cr__conn_apply_opts(struct cr_conn *c, const struct cr_conn_opts *o)
{
	uint32_t unit;

	c->high_wm = o != NULL && o->high_watermark != 0 ? o->high_watermark
							: CR_NET_HIGH_WATERMARK;
	c->low_wm = o != NULL && o->low_watermark != 0 ? o->low_watermark : c->high_wm / 4;
	if (c->low_wm > c->high_wm)
		c->low_wm = c->high_wm;
	/* The watermarks in chunks: a queue of high_wm bytes in pieces of a receive buffer
	 * each (held buffers forwarded with cr_conn_send_buf(), the smallest pieces an app
	 * sends in bulk), one more for a head partly sent. A queue of more chunks is above its
	 * high watermark whatever its bytes, so pieces smaller than that cannot take the
	 * pool's chunks while the bytes say "below". */
	unit = cr_io_buf_size();
	if (unit == 0 || unit > c->nl->chunk_cap)
		unit = c->nl->chunk_cap;
	c->high_chunks = (c->high_wm + unit - 1) / unit + 1;
	c->low_chunks = (c->low_wm + unit - 1) / unit + 1;
	c->idle_ns = o != NULL ? o->idle_timeout_ns : 0;
	c->keep_reading = o != NULL && o->keep_reading;
	c->reclaimable = o != NULL && o->reclaimable;
	c->layer = o != NULL ? o->layer : NULL;
	c->layer_arg = o != NULL ? o->layer_arg : NULL;
	c->wire = c->layer != NULL ? c->layer->wire : c->ops;
	c->max_held = o != NULL ? o->max_held_bufs : 0;
	if (c->max_held == 0 && cr_io_buf_size() != 0)
		c->max_held = c->high_wm / cr_io_buf_size();
	if (c->max_held == 0)
		c->max_held = 1;
}

void
cr__conn_init(struct cr_conn *c, struct net_lcore *nl, int fd, const struct cr_conn_opts *o,
	      const struct cr_conn_ops *ops, void *arg)
{
	memset(c, 0, sizeof(*c));
	c->nl = nl;
	c->fd = fd;
	c->ops = ops;
	c->arg = arg;
	c->last_active = cr_now_ns();
	cr_timer_init(&c->timer, conn_timer_fired, c);
	cr__conn_apply_opts(c, o);
	live_add(nl, c);
}

static void
conn_free(struct cr_conn *c)
{
	struct net_lcore *nl = c->nl;

	if (c->layer != NULL && c->layer->release != NULL)
		c->layer->release(c);
	cr__conn_queue_drop(c);
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	cr__net_conn_put(nl, c);
}

void
cr__conn_hold(struct cr_conn *c)
{
	c->holds++;
}

void
cr__conn_unhold(struct cr_conn *c)
{
	assert(c->holds > 0);
	if (--c->holds == 0 && c->state == CONN_DEAD)
		conn_free(c);
}

/* Release callback of an abandoned op: its final completion has come. */
static void
op_released(void *arg)
{
	cr__conn_unhold(arg);
}

static void
abandon(struct cr_conn *c, cr_op_id *id)
{
	if (*id == 0)
		return;
	/* On failure (lib/io already stopped: its own stop retired the op) nothing will call
	 * op_released, so the op's hold goes now. */
	if (cr_io_abandon(*id, op_released, c) != 0)
		c->holds--;
	*id = 0;
}

void
cr__conn_end(struct cr_conn *c, int err, bool notify)
{
	struct net_lcore *nl = c->nl;

	if (c->state == CONN_DEAD || c->state == CONN_FREE)
		return;
	cr__conn_hold(c);
	c->state = CONN_DEAD;
	c->finish_pending = false;
	c->moving = false;
	live_del(nl, c);
	cr_timer_stop(&c->timer);
	abandon(c, &c->recv_op);
	abandon(c, &c->send_op);
	abandon(c, &c->connect_op);
	cr__conn_bufs_detach(c);
	if (c->layer != NULL && c->layer->end != NULL)
		c->layer->end(c);
	if (!c->moved)
		NET_STAT_ADD(nl, closed, 1);
	CR_LOG(L, DEBUG, "lcore %u: connection fd %d ends: %s", nl->lcore, c->fd,
	       err != 0 ? cr_strerror(err) : "orderly");
	if (notify && c->wire->on_close != NULL)
		c->wire->on_close(c, err);
	cr__conn_unhold(c);
}

/*
 * Arm the one timer for the nearest of: a deferred end, the idle deadline, the linger, and
 * for an ending connection the next look at its boundary.
 */
void
cr__conn_arm_timer(struct cr_conn *c)
{
	uint64_t now = cr_now_ns(), deadline = UINT64_MAX;

	if (c->state == CONN_DEAD)
		return;
	if (c->finish_pending || (c->moving && c->recv_op == 0)) {
		cr_timer_start(&c->timer, 0);
		return;
	}
	if (c->idle_ns != 0 && c->state != CONN_CONNECTING)
		deadline = c->last_active + c->idle_ns;
	if (c->state == CONN_CLOSING && c->linger_until < deadline)
		deadline = c->linger_until;
	if (c->ending && c->state == CONN_OPEN && now + NET_ENDING_RECHECK_NS < deadline)
		deadline = now + NET_ENDING_RECHECK_NS;
	if (deadline == UINT64_MAX)
		cr_timer_stop(&c->timer);
	else
		cr_timer_start(&c->timer, deadline > now ? deadline - now : 0);
}

/* End now if callbacks are allowed here, else at the next timer run. */
static void
finish(struct cr_conn *c, int err, bool may_notify)
{
	if (may_notify) {
		cr__conn_end(c, err, true);
		return;
	}
	if (!c->finish_pending) {
		c->finish_pending = true;
		c->finish_err = err;
	}
	cr__conn_arm_timer(c);
}

/*
 * An ending connection (its lcore is closing) closes gracefully once it is served: every
 * byte the kernel had received when the closing began has reached on_data, something has
 * (or its wait for a first request is over), and the app says it is at a boundary. Only
 * from a completion or a timer (at_boundary is an app callback).
 */
static void
ending_check(struct cr_conn *c)
{
	if (!c->ending || c->state != CONN_OPEN || c->finish_pending)
		return;
	if (c->rx_bytes < c->end_after)
		return;
	/* Nothing for the app yet (a layer's handshake is not a request): wait for it. */
	if ((c->layer != NULL ? c->app_rx : c->rx_bytes) == 0 && !c->read_eof &&
	    cr_now_ns() < c->first_req_until)
		return;
	if (c->wire->at_boundary != NULL && !c->wire->at_boundary(c))
		return;
	cr_conn_close(c);
}

/*
 * An ending connection whose app takes moves goes to a RUNNING lcore at its boundary
 * instead of closing: the bytes the kernel holds for it travel in the socket, so neither
 * the mark nor the first-request wait applies. With no lcore to take it (none RUNNING, a
 * shutdown), or a peer that has read none of its answers for NET_LINGER_NS, it closes as
 * the others do.
 */
static void
ending_step(struct cr_conn *c)
{
	if (!c->ending || c->state != CONN_OPEN || c->finish_pending || c->moving)
		return;
	if (cr__conn_movable(c) && !c->read_eof && !c->wr_shut_req) {
		if (c->wire->at_boundary != NULL && !c->wire->at_boundary(c))
			return;
		/* Its answers go out first: send_done() and cr__conn_unhold() come back. A peer
		 * that takes none of them for NET_LINGER_NS is not waited for: it is closed as
		 * an unmovable connection is at its boundary (ending_check(); its answers get
		 * the linger), else it would keep its lcore RETIRING for ever. */
		if (c->bufs_held != 0)
			return;
		if (c->queued != 0 || c->send_op != 0) {
			if (cr_now_ns() - c->last_active < NET_LINGER_NS)
				return;
		} else if (cr__conn_move_away(c) == 0) {
			return;
		}
	}
	ending_check(c);
}

void
cr__conn_begin_ending(struct cr_conn *c)
{
	uint64_t got;

	if (c->ending || (c->state != CONN_OPEN && c->state != CONN_CONNECTING))
		return;
	c->ending = true;
	/* What the kernel took before this point must still reach the app; what comes later
	 * may be served too, until the boundary. Without the count, what was delivered. */
	c->end_after = c->state == CONN_OPEN && !c->plain_socket &&
				       cr__socket_bytes_received(c->fd, &got) == 0
			       ? got
			       : c->rx_bytes;
	c->first_req_until = cr_now_ns() + cr__net_first_request_ns;
	/* The first look from the timer: this may run inside an app call. */
	cr_timer_start(&c->timer, 0);
}

static void
conn_timer_fired(struct cr_timer *t, void *arg)
{
	struct cr_conn *c = arg;
	uint64_t now = cr_now_ns();

	(void)t;
	cr__conn_hold(c);
	if (c->finish_pending) {
		cr__conn_end(c, c->finish_err, true);
	} else if (c->state == CONN_CLOSING && now >= c->linger_until) {
		/* The peer never sent its EOF; what we sent is out if the queue is empty. */
		cr__conn_end(c, c->queued == 0 && c->wr_shut_done ? 0 : -ETIMEDOUT, true);
	} else if (c->idle_ns != 0 && c->state != CONN_CONNECTING &&
		   now - c->last_active >= c->idle_ns) {
		cr__conn_end(c, -ETIMEDOUT, true);
	} else {
		cr__conn_progress(c, true);
		cr__conn_move_step(c);
		ending_step(c);
		cr__conn_arm_timer(c);
	}
	cr__conn_unhold(c);
}

static void send_done(void *ctx, const struct cr_io_cqe *cqe);
static void recv_done(void *ctx, const struct cr_io_cqe *cqe);
static void layer_shut(struct cr_conn *c);

/*
 * A result that is no error of the connection. io_uring completes a send or receive with
 * -EAGAIN when its one poll-and-retry found no room (or no data) again; the op is simply
 * issued anew. Bounded, so a driver that kept failing at once could not spin.
 */
static bool
transient(int res)
{
	return res == -EAGAIN || res == -EINTR;
}

/* One send over up to NET_IOV_MAX chunks from the queue's head. */
static int
start_send(struct cr_conn *c)
{
	struct net_chunk *ch;
	unsigned n = 0;
	cr_op_id id;

	c->sending = 0;
	for (ch = c->head; ch != NULL && n < NET_IOV_MAX; ch = ch->next) {
		if (ch->len == ch->off)
			continue;
		c->iov[n].iov_base = (uint8_t *)(uintptr_t)(ch->ext != NULL ? ch->ext : ch->data) +
				     ch->off;
		c->iov[n].iov_len = ch->len - ch->off;
		c->sending += c->iov[n].iov_len;
		n++;
	}
	assert(n > 0);
	if (n == 1) {
		id = cr_io_send(c->fd, c->iov[0].iov_base, c->iov[0].iov_len, send_done, c);
	} else {
		memset(&c->msg, 0, sizeof(c->msg));
		c->msg.msg_iov = c->iov;
		c->msg.msg_iovlen = n;
		id = cr_io_sendmsg(c->fd, &c->msg, send_done, c);
	}
	if (id == 0)
		return -errno;
	c->send_op = id;
	cr__conn_hold(c);
	return 0;
}

static bool
read_wanted(const struct cr_conn *c)
{
	if (c->read_eof)
		return false;
	if (c->state == CONN_CLOSING)
		return true; /* drop input until EOF, so closing sends no reset */
	return c->state == CONN_OPEN && !c->moving && !c->read_stopped && !c->layer_read_stopped &&
	       c->bufs_held < c->max_held && (!c->above_high || c->keep_reading);
}

static int
sync_read(struct cr_conn *c)
{
	bool want = read_wanted(c);

	if (want && c->recv_op == 0) {
		c->recv_op = cr_io_recv(c->fd, recv_done, c);
		if (c->recv_op == 0)
			return -errno;
		cr__conn_hold(c);
	} else if (!want && c->recv_op != 0 && !c->recv_cancel) {
		/* Data completed before the cancel is still delivered: nothing is lost. */
		c->recv_cancel = true;
		cr_io_cancel(c->recv_op);
	}
	return 0;
}

void
cr__conn_progress(struct cr_conn *c, bool may_notify)
{
	int rc;

	if (c->state != CONN_OPEN && c->state != CONN_CLOSING)
		return;
	if (c->finish_pending) {
		if (may_notify)
			finish(c, c->finish_err, true);
		return;
	}
	if (c->send_op == 0 && c->queued != 0) {
		rc = start_send(c);
		if (rc != 0) {
			finish(c, rc, may_notify);
			return;
		}
	}
	if (c->send_op == 0 && c->queued == 0 && c->wr_shut_req && !c->wr_shut_done) {
		/* A reset peer makes this fail; the receive reports that error. */
		(void)shutdown(c->fd, SHUT_WR);
		c->wr_shut_done = true;
	}
	rc = sync_read(c);
	if (rc != 0) {
		finish(c, rc, may_notify);
		return;
	}
	if (c->wr_shut_done && c->read_eof)
		finish(c, 0, may_notify);
}

static void
send_done(void *ctx, const struct cr_io_cqe *cqe)
{
	struct cr_conn *c = ctx;
	bool drained = false;

	/* The op's hold becomes this callback's. */
	c->send_op = 0;
	if (transient(cqe->res) && ++c->send_again < NET_AGAIN_MAX) {
		/* Nothing was sent: send again (a new op waits for room afresh). */
		cr__conn_progress(c, true);
		cr__conn_unhold(c);
		return;
	}
	c->send_again = 0;
	if (cqe->res <= 0) {
		/* 0 bytes for a non-empty send would repeat forever: treat it as an error. */
		cr__conn_end(c, cqe->res < 0 ? cqe->res : -EIO, true);
		cr__conn_unhold(c);
		return;
	}
	assert((size_t)cqe->res <= c->sending);
	if ((size_t)cqe->res < c->sending)
		NET_STAT_ADD(c->nl, short_sends, 1); /* the rest goes out with the next send */
	cr__conn_consume(c, (size_t)cqe->res);
	c->last_active = cr_now_ns();
	NET_STAT_ADD(c->nl, bytes_out, (uint64_t)cqe->res);
	if (c->above_high && c->queued <= c->low_wm && c->nchunks <= c->low_chunks) {
		c->above_high = false;
		drained = true;
	}
	cr__conn_progress(c, true);
	if (drained && c->state == CONN_OPEN && c->wire->on_drain != NULL)
		c->wire->on_drain(c);
	ending_step(c);
	cr__conn_unhold(c);
}

static void
recv_done(void *ctx, const struct cr_io_cqe *cqe)
{
	struct cr_conn *c = ctx;
	bool final = !(cqe->flags & CR_IO_F_MORE);
	int res = cqe->res;

	/* A kTLS socket's control record (the peer's close_notify, an alert, a KeyUpdate) to
	 * a receive with no room for its type: the peer's stream of data ended. Only there;
	 * elsewhere -EIO is an error. */
	if (res == -EIO && c->plain_socket)
		res = 0;
	cr__conn_hold(c);
	if (final) {
		c->recv_op = 0;
		c->recv_cancel = false;
		c->holds--; /* the op's; ours keeps the slot */
	}
	if (cqe->flags & CR_IO_F_BUFFER) {
		if (cqe->res > 0) {
			c->last_active = cr_now_ns();
			c->rx_bytes += (uint64_t)cqe->res;
			NET_STAT_ADD(c->nl, bytes_in, (uint64_t)cqe->res);
		}
		if (cqe->res > 0 && c->state == CONN_OPEN && c->wire->on_data != NULL)
			cr__conn_deliver(c, cqe); /* gives the buffer back, or its holder will */
		else
			cr_io_buf_release(cqe->buf_id);
	}
	if (c->state != CONN_OPEN && c->state != CONN_CLOSING)
		goto out;
	if (res == 0) {
		c->read_eof = true;
		if (c->state == CONN_OPEN && c->wire->on_eof != NULL) {
			c->wire->on_eof(c);
		} else {
			layer_shut(c); /* the default shut of our side: the layer's words first */
			c->wr_shut_req = true;
		}
	} else if (res < 0 && res != -ECANCELED && res != -ENOBUFS &&
		   !(transient(res) && ++c->recv_again < NET_AGAIN_MAX)) {
		cr__conn_end(c, res, true);
		goto out;
	} else if (res > 0) {
		c->recv_again = 0;
	}
	cr__conn_progress(c, true);
	cr__conn_move_step(c);
	ending_step(c);
out:
	cr__conn_unhold(c);
}

struct cr_conn *
cr__conn_adopt(struct net_lcore *nl, int fd, const struct cr_conn_opts *o,
	       const struct cr_conn_ops *ops, void *arg)
{
	struct cr_conn *c = cr__net_conn_get(nl);

	if (c == NULL)
		return NULL;
	cr__conn_init(c, nl, fd, o, ops, arg);
	c->state = CONN_OPEN;
	if (o == NULL || !o->nagle)
		(void)cr__socket_opts_nodelay(fd, false);
	NET_STAT_ADD(nl, accepted, 1);
	cr__conn_hold(c);
	if (c->wire->on_open != NULL)
		c->wire->on_open(c);
	cr__conn_progress(c, true);
	/* Taken on a closing lcore (a backlog it serves itself): served, then closed. */
	if (nl->draining)
		cr__conn_begin_ending(c);
	cr__conn_arm_timer(c);
	cr__conn_unhold(c);
	return c;
}

void
cr__conn_connected(struct cr_conn *c, int res)
{
	cr__conn_hold(c);
	if (res < 0) {
		cr__conn_end(c, res, true);
	} else if (c->state == CONN_CONNECTING) {
		c->state = CONN_OPEN;
		c->last_active = cr_now_ns();
		NET_STAT_ADD(c->nl, connected, 1);
		if (c->wire->on_open != NULL)
			c->wire->on_open(c);
		cr__conn_progress(c, true);
		if (c->ending) {
			/* Ending began while connecting: nothing was received before it. */
			c->end_after = 0;
			c->first_req_until = cr_now_ns() + cr__net_first_request_ns;
		}
		cr__conn_arm_timer(c);
	}
	cr__conn_unhold(c);
}

/* ---- the app's calls ---- */

/* The layer's last words, while the connection can still send them. */
static void
layer_shut(struct cr_conn *c)
{
	if (c->layer != NULL && c->layer->shut != NULL && c->state == CONN_OPEN &&
	    !c->wr_shut_req)
		c->layer->shut(c);
}

void
cr_conn_note_sent(struct cr_conn *c, size_t bytes)
{
	NET_ASSERT_OWNER(c->nl);
	c->last_active = cr_now_ns();
	NET_STAT_ADD(c->nl, bytes_out, (uint64_t)bytes);
}

int
cr_conn_shutdown_write(struct cr_conn *c)
{
	NET_ASSERT_OWNER(c->nl);
	if (c->state != CONN_OPEN && c->state != CONN_CONNECTING)
		return -ENOTCONN;
	layer_shut(c);
	c->wr_shut_req = true;
	cr__conn_progress(c, false);
	return 0;
}

void
cr_conn_close(struct cr_conn *c)
{
	NET_ASSERT_OWNER(c->nl);
	if (c->state == CONN_CONNECTING) {
		finish(c, 0, false);
		return;
	}
	if (c->state != CONN_OPEN)
		return;
	layer_shut(c);
	c->state = CONN_CLOSING;
	c->wr_shut_req = true;
	c->linger_until = cr_now_ns() + NET_LINGER_NS;
	cr__conn_progress(c, false);
	cr__conn_arm_timer(c);
}

void
cr_conn_destroy(struct cr_conn *c)
{
	if (c == NULL)
		return;
	NET_ASSERT_OWNER(c->nl);
	cr__conn_end(c, 0, false);
}

void
cr_conn_read_stop(struct cr_conn *c)
{
	NET_ASSERT_OWNER(c->nl);
	c->read_stopped = true;
	cr__conn_progress(c, false);
}

void
cr_conn_read_start(struct cr_conn *c)
{
	NET_ASSERT_OWNER(c->nl);
	c->read_stopped = false;
	cr__conn_progress(c, false);
}

void *
cr_conn_data(const struct cr_conn *c)
{
	return c->data;
}

void
cr_conn_set_data(struct cr_conn *c, void *data)
{
	c->data = data;
}

bool
cr_conn_is_open(const struct cr_conn *c)
{
	return c->state == CONN_OPEN;
}

void *
cr_conn_arg(const struct cr_conn *c)
{
	return c->arg;
}

int
cr_conn_fd(const struct cr_conn *c)
{
	return c->fd;
}

unsigned
cr_conn_index(const struct cr_conn *c)
{
	return (unsigned)(c - c->nl->conns);
}

unsigned
cr_conn_lcore(const struct cr_conn *c)
{
	return c->nl->lcore;
}

int
cr_conn_peer(const struct cr_conn *c, struct cr_net_addr *out)
{
	memset(out, 0, sizeof(*out));
	out->len = sizeof(out->u);
	if (getpeername(c->fd, &out->u.sa, &out->len) != 0) {
		out->len = 0;
		return -errno;
	}
	return 0;
}
