/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A live connection moved to another lcore (cr_conn_move()), in three steps:
 *
 *   quiesce (old lcore)  reads stop: the receive is cancelled, and data it still carried
 *                        reaches on_data here; the move waits for its final completion,
 *                        so no completion of this slot's generation can land later.
 *   hand over (old)      still movable (open, nothing queued or sent, no buffer held,
 *                        at_boundary, the target RUNNING)? on_move_out gives the app's
 *                        state; one message carries socket and state (cr_send); the slot
 *                        is freed without closing the socket. Not movable, or the send
 *                        refused: the move is abandoned and the connection reads again
 *                        (on_move_in gives the app its state back if it had handed it).
 *   take (new lcore)     a fresh slot, on_move_in, then the receive is armed. What the peer
 *                        sent meanwhile is in the socket.
 *
 * A layered connection (lib/tls) moves when its layer says how (struct cr_conn_layer's
 * move_out / move_in / move_drop): the layer's state travels in the same message, handed
 * over right after the app's and taken back right before it, so on each lcore the layer
 * is whole before the app sees the connection. The layer's own quiet point (movable: no
 * handshake under way, no hand-over to the kernel) is checked with the others, at the
 * start and again at the hand-over.
 *
 * The message is accepted exactly once or refused at once (rule 5), so exactly one lcore
 * owns the socket at every point. The record is allocated per move and freed by the
 * receiver: a move is a control-path event (a retire, a rebalance), not a per-request one.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#include "net_internal.h"

#define L cr__net_log

struct net_move {
	int fd;
	unsigned from;
	const struct cr_conn_ops *ops;
	void *arg, *data, *state;
	struct cr_conn_opts opts; /* with the layer and its arg */
	uint64_t rx_bytes, app_rx, last_active;
	bool read_stopped, layer_read_stopped, plain_socket;
	/* The layer's state, cr_conn_layer.move_size bytes (its move_out writes them). */
	_Alignas(max_align_t) unsigned char layer_state[];
};

/* The app opts in, and so does its layer, if it has one. */
static bool
opted_in(const struct cr_conn *c)
{
	const struct cr_conn_layer *ly = c->layer;

	if (c->ops->on_move_out == NULL || c->ops->on_move_in == NULL)
		return false;
	return ly == NULL || (ly->move_out != NULL && ly->move_in != NULL && ly->move_drop != NULL);
}

/* The layer is at a point where its state may travel (no handshake under way). */
static bool
layer_quiet(const struct cr_conn *c)
{
	return c->layer == NULL || c->layer->movable == NULL || c->layer->movable(c);
}

bool
cr__conn_movable(const struct cr_conn *c)
{
	return opted_in(c) && layer_quiet(c) && !c->nl->quench;
}

int
cr_conn_move(struct cr_conn *c, unsigned target)
{
	if (c == NULL || target >= CR_MAX_LCORES)
		return -EINVAL;
	NET_ASSERT_OWNER(c->nl);
	if (target == c->nl->lcore)
		return -EINVAL;
	if (!opted_in(c))
		return -ENOTSUP;
	if (c->moving)
		return -EALREADY;
	if (c->state != CONN_OPEN || c->read_eof || c->wr_shut_req || c->finish_pending)
		return -ENOTCONN;
	if (c->queued != 0 || c->send_op != 0 || c->bufs_held != 0 || !layer_quiet(c))
		return -EBUSY;
	if (cr_lcore_state(target) != CR_LCORE_RUNNING)
		return -ESHUTDOWN;
	c->moving = true;
	c->move_to = target;
	/* Cancels the receive (read_wanted() is false while moving); the rest from the loop. */
	cr__conn_progress(c, false);
	cr__conn_arm_timer(c);
	return 0;
}

bool
cr_conn_moving(const struct cr_conn *c)
{
	return c->moving;
}

static void
move_abort(struct cr_conn *c)
{
	c->moving = false;
	NET_STAT_ADD(c->nl, move_aborts, 1);
	CR_LOG(L, DEBUG, "lcore %u: move of fd %d to lcore %u abandoned", c->nl->lcore, c->fd,
	       c->move_to);
	cr__conn_progress(c, true);
	cr__conn_arm_timer(c);
}

/* Nothing of lib/net's or its layer's is under way: open, nothing queued or in flight. */
static bool
quiet(const struct cr_conn *c)
{
	return c->state == CONN_OPEN && !c->read_eof && !c->wr_shut_req && !c->finish_pending &&
	       c->queued == 0 && c->send_op == 0 && c->bufs_held == 0 && layer_quiet(c);
}

/* The app's at_boundary first: whatever it does (a flush, a close) is then seen below. */
static bool
still_movable(struct cr_conn *c)
{
	if (c->state != CONN_OPEN)
		return false;
	if (c->wire->at_boundary != NULL && !c->wire->at_boundary(c))
		return false;
	return quiet(c) && cr_lcore_state(c->move_to) == CR_LCORE_RUNNING;
}

/* The move is off after on_move_out gave the app's state: the app takes it back here. */
static void
take_back(struct cr_conn *c, struct net_move *m)
{
	void *state = m->state;

	free(m);
	c->ops->on_move_in(c, state);
	move_abort(c);
}

static void move_in_msg(void *arg);

void
cr__conn_move_step(struct cr_conn *c)
{
	struct net_move *m;
	int rc;

	if (!c->moving || c->recv_op != 0 || c->state == CONN_DEAD)
		return;
	if (!still_movable(c) ||
	    (m = malloc(sizeof(*m) + (c->layer != NULL ? c->layer->move_size : 0))) == NULL) {
		move_abort(c);
		return;
	}
	m->fd = c->fd;
	m->from = c->nl->lcore;
	m->ops = c->ops;
	m->arg = c->arg;
	m->opts = (struct cr_conn_opts){
	    .idle_timeout_ns = c->idle_ns,
	    .high_watermark = c->high_wm,
	    .low_watermark = c->low_wm,
	    .nagle = true, /* the socket keeps its TCP_NODELAY as it is */
	    .keep_reading = c->keep_reading,
	    .reclaimable = c->reclaimable,
	    .max_held_bufs = c->max_held,
	};
	m->opts.layer = c->layer;
	m->opts.layer_arg = c->layer_arg;
	m->rx_bytes = c->rx_bytes;
	m->app_rx = c->app_rx;
	m->last_active = c->last_active;
	m->read_stopped = c->read_stopped;
	m->layer_read_stopped = c->layer_read_stopped;
	m->plain_socket = c->plain_socket;
	/* The app first, then its layer: the layer is whole while the app hands over. */
	m->state = c->ops->on_move_out(c);
	m->data = c->data; /* as on_move_out left it */
	if (!quiet(c)) {
		/* on_move_out sent or closed, which cr_net.h forbids: the bytes it queued must
		 * go from here, so the connection stays (its layer would refuse to leave). */
		take_back(c, m);
		return;
	}
	if (c->layer != NULL)
		c->layer->move_out(c, m->layer_state);
	rc = cr_send(c->move_to, move_in_msg, m);
	if (rc != 0) {
		/* Refused at once: the message never ran; layer and app take their state back
		 * here, in the order the new lcore would have. The layer's slot is the one it
		 * left (this connection's), so taking it back cannot fail. */
		if (c->layer != NULL && c->layer->move_in(c, m->layer_state) != 0)
			abort(); /* broken invariant: its own slot refused it */
		take_back(c, m);
		return;
	}
	NET_STAT_ADD(c->nl, moved_out, 1);
	CR_LOG(L, DEBUG, "lcore %u: fd %d moved to lcore %u", c->nl->lcore, c->fd, c->move_to);
	/* The socket is the target's from the send on: the slot goes, the socket stays. */
	c->moved = true;
	c->fd = -1;
	cr__conn_end(c, 0, false);
}

static void
move_in_msg(void *arg)
{
	struct net_move *m = arg;
	struct net_lcore *nl = cr__net_cur();
	struct cr_conn *c = NULL;
	void *state = m->state;
	int rc;

	if (nl != NULL && !nl->stopping)
		c = cr__net_conn_get(nl);
	if (c == NULL) {
		CR_LOG(L, WARNING, "lcore %u: a connection moved from lcore %u is closed: %s",
		       cr_lcore_id(), m->from, nl == NULL ? "lib/net stopped" : "no free slot");
		close(m->fd);
		if (nl != NULL)
			NET_STAT_ADD(nl, move_drops, 1);
		if (m->opts.layer != NULL)
			m->opts.layer->move_drop(m->opts.layer_arg, m->layer_state);
		if (m->ops->on_move_drop != NULL)
			m->ops->on_move_drop(m->arg, state);
		free(m);
		return;
	}
	cr__conn_init(c, nl, m->fd, &m->opts, m->ops, m->arg);
	c->state = CONN_OPEN;
	c->data = m->data;
	c->rx_bytes = m->rx_bytes;
	c->app_rx = m->app_rx;
	c->last_active = m->last_active;
	c->read_stopped = m->read_stopped;
	c->layer_read_stopped = m->layer_read_stopped;
	c->plain_socket = m->plain_socket;
	cr__conn_hold(c);
	if (c->layer != NULL && (rc = c->layer->move_in(c, m->layer_state)) != 0) {
		/* The layer could not take it here (it freed its state): the socket closes, the
		 * app never saw this slot and frees its state as for any dropped move. */
		CR_LOG(L, WARNING, "lcore %u: a connection moved from lcore %u is closed: %s",
		       nl->lcore, m->from, cr_strerror(rc));
		NET_STAT_ADD(nl, move_drops, 1);
		if (m->ops->on_move_drop != NULL)
			m->ops->on_move_drop(m->arg, state);
		free(m);
		c->moved = true; /* not a close of the app's: counted as a drop */
		cr__conn_end(c, rc, false);
		cr__conn_unhold(c);
		return;
	}
	free(m);
	NET_STAT_ADD(nl, moved_in, 1);
	c->ops->on_move_in(c, state);
	/* Receive armed now: what the peer sent since the old receive ended is in the socket. */
	cr__conn_progress(c, true);
	/* This lcore began closing after the move was sent: served here to its boundary. */
	if (nl->draining)
		cr__conn_begin_ending(c);
	cr__conn_arm_timer(c);
	cr__conn_unhold(c);
}

/* The next RUNNING lcore after the last one picked, round robin; not this one. */
int
cr__conn_move_away(struct cr_conn *c)
{
	struct net_lcore *nl = c->nl;
	unsigned id = nl->move_rr, i;

	for (i = 0; i < CR_MAX_LCORES; i++) {
		id = cr_lcore_next(id);
		if (id == CR_LCORE_NONE)
			id = cr_lcore_next(CR_LCORE_NONE);
		if (id == CR_LCORE_NONE)
			return -ENOENT;
		if (id == nl->lcore || cr_lcore_state(id) != CR_LCORE_RUNNING)
			continue;
		nl->move_rr = id;
		return cr_conn_move(c, id);
	}
	return -ENOENT;
}
