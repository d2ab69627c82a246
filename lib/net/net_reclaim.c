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

/* Idle at a boundary: open, nothing queued or in flight, and the app agrees (at_boundary
 * is asked last: it is the app's call). */
static bool
idle_now(struct cr_conn *c)
{
	return c->reclaimable && c->state == CONN_OPEN && !c->ending && !c->finish_pending &&
	       c->queued == 0 && c->sending == 0;
}

unsigned
cr__net_reclaim(struct net_lcore *nl, unsigned want)
{
	struct cr_conn *pick[NET_RECLAIM_BATCH], *c;
	unsigned n = 0, ended = 0, i, j;
	uint64_t now;

	/* Slots already coming back count for as many of those waiting. */
	want = want > nl->reclaiming ? want - nl->reclaiming : 0;
	if (want > NET_RECLAIM_BATCH)
		want = NET_RECLAIM_BATCH;
	if (want == 0)
		return 0;
	/* The @p want least recently active, oldest first: one pass over the live list. */
	for (c = nl->live; c != NULL; c = c->next) {
		if (!idle_now(c) || (n == want && c->last_active >= pick[n - 1]->last_active))
			continue;
		if (c->ops->at_boundary != NULL && !c->ops->at_boundary(c))
			continue;
		j = n < want ? n++ : n - 1;
		while (j > 0 && pick[j - 1]->last_active > c->last_active) {
			pick[j] = pick[j - 1];
			j--;
		}
		pick[j] = c;
	}
	/* Held first: an on_close may end another of them, and a slot freed must not be
	 * taken again under us by a connect that on_close starts. */
	for (i = 0; i < n; i++)
		cr__conn_hold(pick[i]);
	for (i = 0; i < n; i++) {
		if (pick[i]->state == CONN_OPEN) {
			pick[i]->reclaimed = true;
			nl->reclaiming++;
			cr__conn_end(pick[i], -EUSERS, true);
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
		CR_LOG(L, NOTICE,
		       "lcore %u: full (%u of %u connection slots in use): closed %u idle "
		       "connections to make room; raise the connection limit or the descriptor "
		       "limit (ulimit -n)",
		       nl->lcore, nl->conns_used, nl->max_conns, ended);
	}
	return ended;
}
