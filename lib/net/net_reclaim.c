/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Making room on a full lcore. When a connection waits to be accepted and the lcore has no
 * free slot, or accept(2) says the process is out of descriptors, the least recently
 * active of the connections that allow it (cr_conn_opts.reclaimable) and are idle at a
 * boundary are closed, a few at a time. Without this, clients that connect and say nothing
 * hold every slot and a new client waits in the kernel's backlog until one of them leaves,
 * which an attacker never does.
 */
#include <errno.h>

#include "net_internal.h"

#define L cr__net_log

/* Idle at a boundary as far as lib/net can tell: open, nothing queued or in flight (queued
 * counts the bytes of a send in flight too). The app's at_boundary is asked after. */
static bool
idle_now(const struct cr_conn *c)
{
	return c->reclaimable && c->state == CONN_OPEN && !c->ending && !c->finish_pending &&
	       c->queued == 0 && c->send_op == 0;
}

/* Nothing the kernel received is still on its way to on_data (a request that arrived as
 * we chose would be lost, and closing over unread bytes sends a reset). */
static bool
nothing_unread(const struct cr_conn *c)
{
	uint64_t got;

	/* The kernel's TLS yields fewer bytes than it received: no count to compare. */
	return c->plain_socket || cr__socket_bytes_received(c->fd, &got) != 0 ||
	       got <= c->rx_bytes;
}

unsigned
cr__net_reclaim(struct net_lcore *nl, unsigned want, bool for_fds)
{
	struct cr_conn *pick[NET_RECLAIM_BATCH], *c, *next;
	unsigned n = 0, ended = 0, i, j;
	uint64_t now;

	/* Slots already coming back count for as many of those waiting. */
	want = want > nl->reclaiming ? want - nl->reclaiming : 0;
	if (want > NET_RECLAIM_BATCH)
		want = NET_RECLAIM_BATCH;
	if (want == 0)
		return 0;
	/* The @p want least recently active, oldest first, in one pass over the live list;
	 * each picked one is held while it is in pick[] (at_boundary is the app's call). */
	for (c = nl->live; c != NULL; c = next) {
		bool ok;

		if (!idle_now(c) || (n == want && c->last_active >= pick[n - 1]->last_active)) {
			next = c->next;
			continue;
		}
		cr__conn_hold(c);
		ok = c->wire->at_boundary == NULL || c->wire->at_boundary(c);
		next = c->next;
		if (!ok || c->state != CONN_OPEN) {
			cr__conn_unhold(c);
			continue;
		}
		if (n == want)
			cr__conn_unhold(pick[--n]); /* the most recent of them makes way */
		for (j = n++; j > 0 && pick[j - 1]->last_active > c->last_active; j--)
			pick[j] = pick[j - 1];
		pick[j] = c;
	}
	/* An on_close may touch another of them (send to it, end it): each is looked at
	 * again just before it goes. */
	for (i = 0; i < n; i++) {
		c = pick[i];
		if (idle_now(c) && nothing_unread(c)) {
			c->reclaimed = true;
			nl->reclaiming++;
			cr__conn_end(c, -EUSERS, true);
			ended++;
		}
	}
	for (i = 0; i < n; i++)
		cr__conn_unhold(pick[i]);
	if (ended == 0)
		return 0;
	NET_STAT_ADD(nl, reclaimed, ended);
	now = cr_now_ns();
	if (now - nl->reclaim_logged_ns >= 1000000000ull || nl->reclaim_logged_ns == 0) {
		nl->reclaim_logged_ns = now;
		if (for_fds)
			CR_LOG(L, NOTICE,
			       "lcore %u: out of descriptors (EMFILE): closed %u idle connections "
			       "to make room; raise the descriptor limit (ulimit -n, LimitNOFILE=)",
			       nl->lcore, ended);
		else
			CR_LOG(L, NOTICE,
			       "lcore %u: all %u connection slots in use: closed %u idle "
			       "connections to make room; raise the connection limit",
			       nl->lcore, nl->max_conns, ended);
	}
	return ended;
}
