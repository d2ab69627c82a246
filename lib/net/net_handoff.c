/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Connections accepted on one lcore and served on another: single_acceptor mode's round
 * robin, and what a draining shard takes and passes to an lcore whose socket stays (or
 * keeps, in order, while every staying mailbox is full). A hand-off message names the
 * listener by index and carries the socket.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net_listen_internal.h"

#define L cr__net_log

void
cr__listen_refuse(struct net_lcore *nl, int fd)
{
	close(fd);
	if (nl != NULL)
		NET_STAT_ADD(nl, refused, 1);
}

static void
handoff_msg(void *arg)
{
	uintptr_t v = (uintptr_t)arg;
	struct cr_listener *l = cr__listener_by_index((unsigned)(v >> 32));
	int fd = (int)(uint32_t)v;
	struct net_lcore *nl = cr__net_cur();

	if (nl == NULL || !cr__listener_open(l)) {
		cr__listen_refuse(nl, fd); /* the listener closed meanwhile: as its backlog would be */
	} else if (nl->draining && !l->opts.single_acceptor) {
		/* Began retiring since it was picked: on to a socket still staying. */
		if (cr__place_conn(l, nl, fd) == -EAGAIN)
			cr__listen_refuse(nl, fd);
	} else if (nl->draining ||
		   cr__conn_adopt(nl, fd, &l->opts.conn, l->ops, l->arg) == NULL) {
		cr__listen_refuse(nl, fd);
	}
	cr__listener_put(l);
}

static int
send_handoff(struct cr_listener *l, unsigned target, int fd)
{
	int rc;

	atomic_fetch_add_explicit(&l->refs, 1, memory_order_relaxed);
	rc = cr_send(target, handoff_msg, (void *)((uintptr_t)l->idx << 32 | (uint32_t)fd));
	if (rc != 0)
		cr__listener_put(l); /* never the last: the caller's shard or message holds one */
	return rc;
}

/*
 * A connection a draining socket took: to a RUNNING lcore whose socket stays (an lcore
 * still starting has joined the array before its mailbox opens), trying each in turn;
 * adopted here if this lcore is not draining. Returns 0 placed, -EAGAIN every one
 * refused for now (mailboxes full: @p fd is still the caller's), or -ESHUTDOWN refused
 * for good (@p fd closed and counted).
 */
int
cr__place_conn(struct cr_listener *l, struct net_lcore *nl, int fd)
{
	unsigned ids[CR_MAX_LCORES], n, i;
	bool again = false;

	if (!cr__listener_open(l)) {
		cr__listen_refuse(nl, fd);
		return -ESHUTDOWN;
	}
	n = cr__group_staying(l, ids);
	for (i = 0; i < n; i++) {
		int rc;

		if (ids[i] == nl->lcore || cr_lcore_state(ids[i]) != CR_LCORE_RUNNING)
			continue;
		rc = send_handoff(l, ids[i], fd);
		if (rc == 0) {
			NET_STAT_ADD(nl, handed_off, 1);
			return 0;
		}
		again |= rc == -EAGAIN;
	}
	if (!nl->draining && cr__conn_adopt(nl, fd, &l->opts.conn, l->ops, l->arg) != NULL)
		return 0;
	if (again)
		return -EAGAIN;
	cr__listen_refuse(nl, fd);
	return -ESHUTDOWN;
}

/*
 * Connections a draining shard took while every staying mailbox was full, kept in order
 * until they take them. The list grows as needed: a retiring lcore is not a fast path,
 * and the kernel may have accepted a whole backlog before the accept could be stopped.
 */
bool
cr__pend_push(struct net_shard *sh, int fd)
{
	if (sh->n_pend == sh->cap_pend) {
		unsigned cap = sh->cap_pend != 0 ? sh->cap_pend * 2 : 64;
		int *p = realloc(sh->pend, cap * sizeof(*p));

		if (p == NULL)
			return false;
		sh->pend = p;
		sh->cap_pend = cap;
	}
	sh->pend[sh->n_pend++] = fd;
	return true;
}

/* Place what waits, oldest first; false if some must wait longer. */
bool
cr__pend_place(struct cr_listener *l, struct net_lcore *nl, struct net_shard *sh)
{
	unsigned i = 0;

	while (i < sh->n_pend && cr__place_conn(l, nl, sh->pend[i]) != -EAGAIN)
		i++;
	if (i == 0)
		return sh->n_pend == 0;
	sh->n_pend -= i;
	memmove(sh->pend, sh->pend + i, sh->n_pend * sizeof(*sh->pend));
	return sh->n_pend == 0;
}

/* Close what still waits (the listener closed, or the shutdown is forced). */
void
cr__pend_drop(struct net_lcore *nl, struct net_shard *sh)
{
	while (sh->n_pend > 0)
		cr__listen_refuse(nl, sh->pend[--sh->n_pend]);
	free(sh->pend);
	sh->pend = NULL;
	sh->cap_pend = 0;
}

/* A connection a draining shard took: placed, or kept for the next tick. */
void
cr__drain_take(struct cr_listener *l, struct net_lcore *nl, struct net_shard *sh, int fd)
{
	if (sh->n_pend == 0 && cr__place_conn(l, nl, fd) != -EAGAIN)
		return;
	if (!cr__pend_push(sh, fd)) {
		cr__listen_refuse(nl, fd);
		return;
	}
	if (sh->n_pend == 1)
		cr_timer_start(&sh->timer, NET_DRAIN_RETRY_NS);
}

/*
 * Take what @p lfd holds queued, a batch at a time while mailboxes take them. Returns
 * true when the socket is empty and nothing waits in the stash.
 */
bool
cr__take_queued(struct cr_listener *l, struct net_lcore *nl, struct net_shard *sh, int lfd)
{
	int fd, n = 0;

	if (!cr__pend_place(l, nl, sh))
		return false;
	while (n++ < NET_DRAIN_BATCH) {
		fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return errno != EINTR || cr__take_queued(l, nl, sh, lfd);
		if (cr__place_conn(l, nl, fd) == -EAGAIN) {
			if (!cr__pend_push(sh, fd))
				cr__listen_refuse(nl, fd);
			return false;
		}
	}
	return false;
}

/* single_acceptor: the next RUNNING lcore round robin; ourselves if sending fails. */
void
cr__hand_off(struct cr_listener *l, struct net_lcore *nl, int fd)
{
	unsigned target = cr_lcore_next(l->rr);

	if (target == CR_LCORE_NONE)
		target = cr_lcore_next(CR_LCORE_NONE);
	l->rr = target;
	if (target != CR_LCORE_NONE && target != nl->lcore && send_handoff(l, target, fd) == 0)
		return;
	if (cr__conn_adopt(nl, fd, &l->opts.conn, l->ops, l->arg) == NULL) {
		close(fd);
		NET_STAT_ADD(nl, refused, 1);
	}
}
