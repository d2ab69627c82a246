/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Stopping: at a shutdown or a retirement, stop accepting, close the idle connections and
 * let each request in flight finish (its answer says Connection: close); the lcore's
 * lease is held until the last one has. At the first SIGINT/SIGTERM the listener closes
 * first, while every lcore still runs.
 */
#include "http.h"

void
http_pending_done(struct http_lcore *hl, struct http_conn *h)
{
	if (!h->drain_wait)
		return;
	h->drain_wait = false;
	if (--hl->pending == 0)
		cr_lease_release(&hl->lease);
}

/*
 * Stop taking connections; close the idle ones now and the busy ones once their request
 * is answered (that answer says Connection: close). Then let lib/net drain the rest.
 */
void
http_drain_hook(unsigned lcore, void *arg)
{
	struct http_lcore *hl = http_lcore_cur();
	uint32_t i;

	(void)lcore;
	(void)arg;
	if (hl->shutting)
		return;
	hl->shutting = true;
	/* New connections go to the other lcores from now on, queued ones are handed to
	 * them; ours finish below. */
	cr_net_stop_accepting();
	for (i = 0; i < http_cfg.max_conns; i++) {
		struct http_conn *h = &hl->conns[i];

		if (!h->open || h->closing)
			continue;
		if (http_in_flight(h)) {
			h->drain_wait = true;
			hl->pending++;
		} else {
			h->closing = true;
			cr_timer_stop(&h->hdr_timer);
			cr_conn_close(h->c);
		}
	}
	if (hl->pending == 0)
		cr_lease_release(&hl->lease);
}

static void
stop_now(void *arg)
{
	(void)arg;
	cr_reactor_stop();
}

static void
visit_nothing(void *arg)
{
	(void)arg;
}

/*
 * On the main lcore: stop accepting first, while every lcore is still RUNNING (the
 * listener's close visits the RUNNING lcores), then start the shutdown once a visit of
 * our own has followed the close round every lcore (messages from one lcore to another
 * run in order).
 */
void
http_stop(struct cr_listener **listener)
{
	static struct cr_call stop_call;

	if (*listener == NULL) {
		cr_reactor_stop();
		return;
	}
	cr_listener_close(*listener);
	*listener = NULL;
	if (cr_for_each_lcore(&stop_call, visit_nothing, NULL, stop_now, NULL) != 0)
		cr_reactor_stop();
}
