/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Stopping. At a shutdown or a retirement lib/net takes no more connections on the lcore
 * and closes ours at their boundaries (http_at_boundary): no head or body half-read, no
 * file going out; every answer from then on says Connection: close. At the first
 * SIGINT/SIGTERM the listener closes first, while every lcore still runs.
 */
#include "http.h"

/*
 * On a retiring or shutting-down lcore, lib/net closes a connection at a boundary: no head
 * or body half-read, no file going out (its answers are queued by then, and go out
 * first). Until then it keeps reading; every answer from then on says Connection: close.
 */
bool
http_at_boundary(struct cr_conn *c)
{
	const struct http_conn *h = &http_lcore_cur()->conns[cr_conn_index(c)];

	return !h->open || !http_in_flight(h);
}

/*
 * A retire needs nothing of ours: lib/net takes no more connections here and moves every
 * one (plain or TLS: lib/tls's state travels) to an lcore that stays at its boundary
 * (on_move_out / on_move_in, http_conn.c); keep-alive goes on, answers still say
 * keep-alive. Only a shutdown says Connection: close.
 */
bool
http_may_keep(const struct http_lcore *hl)
{
	return !hl->shutting;
}

/* A shutdown: lib/net takes no more connections here and closes ours at their
 * boundaries (http_at_boundary); every answer from now on says Connection: close. */
void
http_drain_hook(unsigned lcore, void *arg)
{
	(void)lcore;
	(void)arg;
	http_lcore_cur()->shutting = true;
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
	cr_listener_close(*listener, NULL, NULL);
	*listener = NULL;
	if (cr_for_each_lcore(&stop_call, visit_nothing, NULL, stop_now, NULL) != 0)
		cr_reactor_stop();
}
