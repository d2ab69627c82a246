/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Pollers: active ones run every turn (at most CR_BATCH of them, resuming where the last
 * pass stopped), timed ones ride on the timer wheel. A poller may unregister itself from
 * its own callback; it is freed once the callback returns.
 */
#include <errno.h>
#include <stdlib.h>

#include "reactor_internal.h"

static void
poller_link(struct cr_poller **head, struct cr_poller *p)
{
	p->next = *head;
	if (p->next != NULL)
		p->next->pprev = &p->next;
	p->pprev = head;
	*head = p;
}

static void
poller_unlink(struct cr_lcore *lc, struct cr_poller *p)
{
	if (p->period_ns == 0)
		lc->n_active_pollers--;
	if (lc->poller_iter == p)
		lc->poller_iter = p->next;
	if (p->next != NULL)
		p->next->pprev = p->pprev;
	*p->pprev = p->next;
	p->next = NULL;
	p->pprev = NULL;
}

static void
timed_fire(struct cr_timer *t, void *arg)
{
	struct cr_poller *p = arg;
	struct cr_lcore *lc = p->lc;

	(void)t;
	lc->poller_running = p;
	p->fn(p->arg);
	lc->poller_running = NULL;
	if (p->dead) {
		free(p);
		return;
	}
	cr_timer_arm(lc->wheel, &p->timer, lc->now + p->period_ns);
}

struct cr_poller *
cr_poller_register(cr_poller_fn fn, void *arg, uint64_t period_ns)
{
	struct cr_lcore *lc = cr__cur;
	struct cr_poller *p;

	if (lc == NULL) {
		errno = EPERM;
		return NULL;
	}
	if (fn == NULL) {
		errno = EINVAL;
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return NULL;
	p->fn = fn;
	p->arg = arg;
	p->period_ns = period_ns;
	p->lc = lc;
	if (period_ns != 0) {
		cr_timer_init(&p->timer, timed_fire, p);
		cr_timer_arm(lc->wheel, &p->timer, cr__rt.clock() + period_ns);
		poller_link(&lc->timed_pollers, p);
		return p;
	}
	poller_link(&lc->pollers, p);
	lc->n_active_pollers++;
	return p;
}

void
cr_poller_unregister(struct cr_poller **pp)
{
	struct cr_poller *p;
	struct cr_lcore *lc;

	if (pp == NULL || *pp == NULL)
		return;
	p = *pp;
	*pp = NULL;
	lc = p->lc;
	CR_ASSERT_ON_LCORE(lc);
	if (p->period_ns != 0)
		cr_timer_cancel(lc->wheel, &p->timer);
	poller_unlink(lc, p);
	if (lc->poller_running == p)
		p->dead = true;
	else
		free(p);
}

unsigned
cr__run_pollers(struct cr_lcore *lc)
{
	unsigned ran = 0, busy = 0;
	struct cr_poller *p;

	if (lc->poller_iter == NULL)
		lc->poller_iter = lc->pollers;
	while (ran < CR_BATCH && ran < lc->n_active_pollers && (p = lc->poller_iter) != NULL) {
		lc->poller_iter = p->next;
		lc->poller_running = p;
		if (p->fn(p->arg) > 0)
			busy++;
		lc->poller_running = NULL;
		if (p->dead)
			free(p);
		ran++;
		if (lc->poller_iter == NULL)
			lc->poller_iter = lc->pollers;
	}
	return busy;
}

void
cr__pollers_free(struct cr_lcore *lc)
{
	struct cr_poller *p;

	/* At teardown, from the control thread: the lcore runs no more. */
	while ((p = lc->pollers) != NULL) {
		poller_unlink(lc, p);
		free(p);
	}
	while ((p = lc->timed_pollers) != NULL) {
		cr_timer_cancel(lc->wheel, &p->timer);
		poller_unlink(lc, p);
		free(p);
	}
}

/*
 * The lcore stops: unregister every poller left and tell the app (on_poller_dropped), on
 * the lcore's own thread. @return how many there were.
 */
unsigned
cr__pollers_drop(struct cr_lcore *lc)
{
	struct cr_poller *p;
	unsigned n = 0;

	while ((p = lc->pollers) != NULL || (p = lc->timed_pollers) != NULL) {
		cr_poller_fn fn = p->fn;
		void *parg = p->arg;

		if (p->period_ns != 0)
			cr_timer_cancel(lc->wheel, &p->timer);
		poller_unlink(lc, p);
		free(p);
		n++;
		if (cr__rt.hooks.on_poller_dropped != NULL)
			cr__rt.hooks.on_poller_dropped(lc->id, fn, parg, cr__rt.hooks.arg);
	}
	return n;
}
