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

static int place(struct cr_listener *l, struct net_lcore *nl, int fd, bool keep,
		 bool local);

/*
 * A connection handed to us. If we began closing since we were picked, it goes on to an
 * lcore that stays, else it is served here (ending at its first boundary): a connection
 * that was accepted is never reset because lcores retire or the listener closes, only
 * refused when no slot is free for it.
 */
static void
handoff_msg(void *arg)
{
	uintptr_t v = (uintptr_t)arg;
	struct cr_listener *l = cr__listener_by_index((unsigned)(v >> 32));
	int fd = (int)(uint32_t)v;
	struct net_lcore *nl = cr__net_cur();

	if (nl == NULL)
		cr__listen_refuse(NULL, fd); /* lib/net never ran here */
	else
		(void)place(l, nl, fd, false, !nl->draining);
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
 * To a RUNNING lcore other than us that serves the listener: one whose socket stays
 * (an lcore still starting has joined the array before its mailbox opens), or with
 * single_acceptor any RUNNING lcore, round robin from after us. 0 sent; -EAGAIN every
 * one refused for now (mailboxes full); -ENOENT there is none.
 */
static int
send_to_staying(struct cr_listener *l, struct net_lcore *nl, int fd)
{
	unsigned ids[CR_MAX_LCORES], n = 0, i;
	bool again = false;

	if (l->opts.single_acceptor) {
		unsigned id = nl->lcore;

		while ((id = cr_lcore_next(id)) != CR_LCORE_NONE)
			ids[n++] = id;
		for (id = cr_lcore_next(CR_LCORE_NONE); id != CR_LCORE_NONE && id < nl->lcore;
		     id = cr_lcore_next(id))
			ids[n++] = id;
	} else {
		n = cr__group_staying(l, ids);
	}
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
	return again ? -EAGAIN : -ENOENT;
}

/*
 * Place accepted socket @p fd: served here at once if @p local, else handed to an lcore
 * that stays, else served here (on a closing lcore: to its first boundary). @p keep: the
 * caller can keep @p fd for a later try (a draining shard's pending list), so a full set
 * of mailboxes or a full slab waits instead of refusing. Returns 0 placed, -EAGAIN kept
 * by the caller, or -ENOSPC refused (closed and counted).
 */
static int
place(struct cr_listener *l, struct net_lcore *nl, int fd, bool keep, bool local)
{
	if (!local && !nl->quench && cr__listener_open(l)) {
		int rc = send_to_staying(l, nl, fd);

		if (rc == 0)
			return 0;
		if (rc == -EAGAIN && keep)
			return -EAGAIN;
	}
	if (cr__conn_adopt(nl, fd, &l->opts.conn, l->ops, l->arg) != NULL)
		return 0;
	if (keep)
		return -EAGAIN; /* no slot yet: one frees as a connection here ends */
	cr__listen_refuse(nl, fd);
	return -ENOSPC;
}

/*
 * A connection shard @p sh took. A retiring shard hands it on; one with no socket to
 * steer to (sh->quench), or on an lcore that is not closing (home taking the backlog of
 * a socket whose lcore stopped before it ever accepted, spread over the others first),
 * serves it here if nobody else does.
 */
int
cr__place_conn(struct cr_listener *l, struct net_lcore *nl, struct net_shard *sh, int fd)
{
	return place(l, nl, fd, true, sh->quench);
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

	while (i < sh->n_pend && cr__place_conn(l, nl, sh, sh->pend[i]) != -EAGAIN)
		i++;
	if (i == 0)
		return sh->n_pend == 0;
	sh->n_pend -= i;
	memmove(sh->pend, sh->pend + i, sh->n_pend * sizeof(*sh->pend));
	return sh->n_pend == 0;
}

/* Close what still waits (the lcore stops: a forced shutdown). */
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
	if (sh->n_pend == 0 && cr__place_conn(l, nl, sh, fd) != -EAGAIN)
		return;
	if (!cr__pend_push(sh, fd)) {
		cr__listen_refuse(nl, fd);
		return;
	}
	if (sh->n_pend == 1)
		cr_timer_start(&sh->timer, NET_DRAIN_RETRY_NS);
}

/*
 * Take what the shard's socket still holds queued, a batch at a time, placing each in
 * turn. Only EAGAIN means the queue is empty: an error that ends only the connection it
 * names (ECONNABORTED, EPROTO, ...) is passed over, and one of resources (EMFILE, ENFILE,
 * ENOBUFS, ENOMEM) is retried after a back-off, because closing the socket then would
 * reset everything still queued.
 */
enum take_result
cr__take_queued(struct cr_listener *l, struct net_lcore *nl, struct net_shard *sh)
{
	int fd, n;

	if (!cr__pend_place(l, nl, sh))
		return TAKE_MORE;
	for (n = 0; n < NET_DRAIN_BATCH; n++) {
		fd = accept4(sh->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			int err = errno;

			if (err == EAGAIN || err == EWOULDBLOCK)
				return TAKE_EMPTY;
			if (err == EINTR || cr__accept_error_is_transient(err))
				continue;
			if (cr__accept_error_is_resource(err))
				return TAKE_RESOURCE;
			/* EBADF, EINVAL: not listening any more; nothing can be taken. */
			CR_LOG(L, WARNING, "lcore %u: accept on a draining socket: %s", sh->owner,
			       cr_strerror(-err));
			return TAKE_EMPTY;
		}
		if (cr__place_conn(l, nl, sh, fd) == -EAGAIN) {
			if (!cr__pend_push(sh, fd))
				cr__listen_refuse(nl, fd);
			return TAKE_MORE;
		}
	}
	return TAKE_MORE;
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
