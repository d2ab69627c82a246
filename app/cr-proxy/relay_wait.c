/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The --maxconn wait list (doc/guides/proxy.md, "Limits and stopping"). One counter over
 * every lcore says how many sessions are admitted; a client over the limit is accepted
 * but not read, and waits on its lcore's list, oldest first, until a session ends. A
 * session that ends on this lcore admits the next waiting here at once; slots freed on
 * other lcores are noticed by a retry timer.
 */
#include <stdatomic.h>

#include "relay_internal.h"

#define WAIT_RETRY_NS (10ull * 1000 * 1000)

/* Sessions counted against --maxconn, every lcore. All accesses relaxed: it orders
 * nothing else; the CAS in px_try_admit() alone keeps it at or below --maxconn. */
static _Atomic uint64_t admitted;

bool
px_try_admit(void)
{
	uint64_t n = atomic_load_explicit(&admitted, memory_order_relaxed);

	while (n < px_relay.maxconn)
		if (atomic_compare_exchange_weak_explicit(
			&admitted, &n, n + 1, memory_order_relaxed, memory_order_relaxed))
			return true;
	return false;
}

void
px_wait_del(struct px_lcore *pl, struct px_session *s)
{
	if (s->prev != NULL)
		s->prev->next = s->next;
	else
		pl->wait_head = s->next;
	if (s->next != NULL)
		s->next->prev = s->prev;
	else
		pl->wait_tail = s->prev;
	s->next = s->prev = NULL;
	s->waiting = false;
}

void
px_wait_add(struct px_lcore *pl, struct px_session *s)
{
	s->waiting = true;
	s->next = NULL;
	s->prev = pl->wait_tail;
	if (pl->wait_tail != NULL)
		pl->wait_tail->next = s;
	else
		pl->wait_head = s;
	pl->wait_tail = s;
	if (!cr_timer_armed(&pl->wait_timer))
		cr_timer_start(&pl->wait_timer, WAIT_RETRY_NS);
}

/* Admit waiting clients of this lcore while --maxconn allows. */
static void
admit_waiting(struct px_lcore *pl)
{
	while (pl->wait_head != NULL && px_try_admit()) {
		struct px_session *s = pl->wait_head;

		px_wait_del(pl, s);
		s->admitted = true;
		s->log.admit_ns = cr_now_ns();
		px_session_start(pl, s);
	}
	if (pl->wait_head != NULL && !cr_timer_armed(&pl->wait_timer))
		cr_timer_start(&pl->wait_timer, WAIT_RETRY_NS);
}

void
px_unadmit(struct px_lcore *pl, struct px_session *s)
{
	s->admitted = false;
	atomic_fetch_sub_explicit(&admitted, 1, memory_order_relaxed);
	admit_waiting(pl);
}

void
px_wait_timer_fired(struct cr_timer *t, void *arg)
{
	(void)t;
	admit_waiting(arg);
}
