/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What a connection layer (struct cr_conn_layer, lib/tls) asks of lib/net and tells it:
 * the app's table, the layer's own pointers, the closing, the receive in flight, the
 * app's stream beginning and its bytes, a socket that yields plaintext (kTLS).
 */
#include "net_internal.h"

const struct cr_conn_ops *
cr_conn_app_ops(const struct cr_conn *c)
{
	return c->ops;
}

const struct cr_conn_layer *
cr_conn_layer(const struct cr_conn *c)
{
	return c->layer;
}

void *
cr_conn_layer_arg(const struct cr_conn *c)
{
	return c->layer_arg;
}

void *
cr_conn_layer_data(const struct cr_conn *c)
{
	return c->layer_data;
}

void
cr_conn_set_layer_data(struct cr_conn *c, void *data)
{
	c->layer_data = data;
}

bool
cr_conn_ending(const struct cr_conn *c)
{
	return c->ending;
}

void
cr_conn_layer_opened(struct cr_conn *c)
{
	/* As a connect that completes on a closing lcore: the first request is still to come. */
	if (c->ending)
		c->first_req_until = cr_now_ns() + cr__net_first_request_ns;
}

void
cr_conn_layer_rx(struct cr_conn *c, size_t len)
{
	c->app_rx += len;
}

void
cr_conn_layer_plain(struct cr_conn *c)
{
	c->plain_socket = true;
	/* Ending: end_after counted what the kernel received, records; what reaches on_data
	 * from now is their plaintext, fewer bytes: it would never get there. What was
	 * delivered is the mark, as for a socket whose count is unknown; a look soon. */
	if (c->ending && c->end_after > c->rx_bytes) {
		c->end_after = c->rx_bytes;
		cr_timer_start(&c->timer, 0);
	}
}

bool
cr_conn_receiving(const struct cr_conn *c)
{
	return c->recv_op != 0;
}

void
cr_conn_layer_read(struct cr_conn *c, bool on)
{
	NET_ASSERT_OWNER(c->nl);
	c->layer_read_stopped = !on;
	cr__conn_progress(c, false);
}
