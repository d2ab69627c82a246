/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One listening shard on its lcore. A shard keeps one multishot accept armed while it
 * wants connections: not while its lcore has no free connection slot (the kernel's
 * backlog holds them meanwhile) unless its connections are reclaimable (then a new one
 * that finds no slot closes idle ones to make room, net_reclaim.c), and not during a
 * back-off after the accept ended with EMFILE/ENFILE/ENOBUFS/ENOMEM, so an lcore out of
 * descriptors sleeps instead of spinning.
 *
 * Retirement drains a shard instead of dropping its backlog: steered away (net_steer.c),
 * it goes on accepting for a grace period (connections whose handshake began before the
 * program was attached), handing each connection to a staying lcore (net_handoff.c), then
 * takes what is still queued, stops listening and closes.
 */
#include <errno.h>
#include <linux/filter.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net_listen_internal.h"

#define L cr__net_log

/* ---- one shard, on its lcore ---- */

void
cr__shard_list_add(struct net_lcore *nl, struct net_shard *sh)
{
	sh->prev = NULL;
	sh->next = nl->shards;
	if (nl->shards != NULL)
		nl->shards->prev = sh;
	nl->shards = sh;
}

void
cr__shard_list_del(struct net_lcore *nl, struct net_shard *sh)
{
	if (sh->prev != NULL)
		sh->prev->next = sh->next;
	else
		nl->shards = sh->next;
	if (sh->next != NULL)
		sh->next->prev = sh->prev;
	sh->next = sh->prev = NULL;
}

/* Sockets waiting in the stashes of every shard of @p nl. */
static unsigned
lcore_stashed(const struct net_lcore *nl)
{
	const struct net_shard *sh;
	unsigned n = 0;

	for (sh = nl->shards; sh != NULL; sh = sh->next)
		n += sh->n_stash;
	return n;
}

/* Reclaimable, with the memory to hold what waits. */
static bool
may_reclaim(const struct net_shard *sh)
{
	return sh->l->opts.conn.reclaimable && sh->stash != NULL && !sh->l->opts.single_acceptor;
}

/* The stash, a FIFO ring. */
static bool
stash_push(struct net_shard *sh, int fd)
{
	if (sh->stash == NULL || sh->n_stash == NET_STASH)
		return false;
	sh->stash[(sh->stash_head + sh->n_stash++) % NET_STASH] = fd;
	return true;
}

static int
stash_pop(struct net_shard *sh)
{
	int fd = sh->stash[sh->stash_head];

	sh->stash_head = (sh->stash_head + 1) % NET_STASH;
	sh->n_stash--;
	return fd;
}

void
cr__shard_stash_init(struct net_shard *sh)
{
	if (sh->stash == NULL)
		sh->stash = malloc(NET_STASH * sizeof(*sh->stash)); /* NULL: none, refused */
	sh->stash_head = sh->n_stash = 0;
}

void
cr__shard_backoff(struct net_shard *sh)
{
	if (sh->backoff_ns == NET_BACKOFF_MIN_NS)
		CR_LOG(L, NOTICE, "lcore %u: accepting paused for %llu ms (out of descriptors?)",
		       sh->owner, (unsigned long long)(sh->backoff_ns / 1000000));
	sh->backing_off = true;
	cr_timer_start(&sh->timer, sh->backoff_ns);
	sh->backoff_ns *= 2;
	if (sh->backoff_ns > NET_BACKOFF_MAX_NS)
		sh->backoff_ns = NET_BACKOFF_MAX_NS;
}

/* The back-off is over, or a connection slot freed: adopt what waits, accept again. */
void
cr__shard_timer_fired(struct cr_timer *t, void *arg)
{
	struct net_shard *sh = arg;
	struct net_lcore *nl = &cr__net_lcores[sh->owner];
	struct cr_listener *l = sh->l;

	(void)t;
	sh->backing_off = false;
	if (sh->rejoined) {
		sh->rejoined = false;
		/* acquire: pairs with the release in close_chain(); see net_rejoin(). Closed
		 * before we accepted: what the kernel queued to us is served, then we close. */
		if (atomic_load_explicit(&l->phase, memory_order_acquire) != LP_OPEN) {
			cr__shard_drain(nl, sh, true);
			return;
		}
	}
	if (sh->state == SH_DRAIN) {
		cr__drain_tick(nl, sh);
		return;
	}
	while (sh->n_stash > 0 && nl->free_conns != NULL)
		cr__conn_adopt(nl, stash_pop(sh), &l->opts.conn, l->ops, l->arg);
	/* Still waiting: connections that were busy when it was last tried may be idle now. */
	if (sh->n_stash > 0 && nl->free_conns == NULL && may_reclaim(sh))
		(void)cr__net_reclaim(nl, lcore_stashed(nl), false);
	cr__shard_sync(sh);
}

static void
accept_done(void *ctx, const struct cr_io_cqe *cqe)
{
	struct net_shard *sh = ctx;
	struct cr_listener *l = sh->l;
	struct net_lcore *nl = &cr__net_lcores[sh->owner];
	bool final = !(cqe->flags & CR_IO_F_MORE);

	if (final) {
		sh->op = 0;
		sh->cancel_sent = false;
	}
	if (cqe->res >= 0) {
		sh->backoff_ns = NET_BACKOFF_MIN_NS;
		if (sh->state == SH_DRAIN) {
			cr__drain_take(l, nl, sh, cqe->res);
		} else if (sh->state != SH_RUN) {
			close(cqe->res); /* closed with the accept still reporting */
			NET_STAT_ADD(nl, refused, 1);
		} else if (l->opts.single_acceptor) {
			cr__hand_off(l, nl, cqe->res);
		} else if (cr__conn_adopt(nl, cqe->res, &l->opts.conn, l->ops, l->arg) == NULL) {
			/* No slot: it waits for one (a reclaimable listener accepts at the limit
			 * on purpose, to learn that someone waits), or raced past the pause. */
			if (stash_push(sh, cqe->res)) {
				if (may_reclaim(sh))
					(void)cr__net_reclaim(nl, lcore_stashed(nl), false);
			} else {
				close(cqe->res);
				NET_STAT_ADD(nl, refused, 1);
			}
		}
	} else if (final && cr__accept_error_is_resource(-cqe->res)) {
		NET_STAT_ADD(nl, accept_backoffs, 1);
		/* Out of this process's descriptors (not the system's: ENFILE), with idle
		 * connections to give back, or some on their way back already. */
		if (cqe->res == -EMFILE && may_reclaim(sh) && sh->state == SH_RUN &&
		    (cr__net_reclaim(nl, 1 + nl->conns_used / 256, true) > 0 ||
		     nl->reclaiming > 0)) {
			/* Descriptors are being given back: try again soon, no doubling. */
			sh->backing_off = true;
			cr_timer_start(&sh->timer, NET_RECLAIM_RETRY_NS);
		} else {
			cr__shard_backoff(sh);
		}
	} else if (final && cqe->res != -ECANCELED) {
		CR_LOG(L, WARNING, "lcore %u: accept on fd %d ended: %s", sh->owner, sh->fd,
		       cr_strerror(cqe->res));
		cr__shard_backoff(sh);
	}
	if (final && sh->state == SH_DRAIN && sh->finishing) {
		cr_timer_start(&sh->timer, 0); /* every result is in: take the rest */
		return;
	}
	/* Every time: the connection just adopted may have taken the last slot. */
	cr__shard_sync(sh);
}

/* Arm or cancel the multishot accept as the shard's state asks. */
void
cr__shard_sync(struct net_shard *sh)
{
	struct net_lcore *nl = &cr__net_lcores[sh->owner];
	bool want;

	if (sh->state != SH_RUN && sh->state != SH_DRAIN)
		return;
	if (sh->state == SH_DRAIN) {
		/* Handing off: no slot of ours needed (serving here: one is); lib/io ops may
		 * still start on a closing lcore. */
		bool room = !sh->quench || nl->free_conns != NULL;

		if (!room && !sh->waiting_slot) {
			sh->waiting_slot = true;
			nl->accept_paused = true;
		}
		if (room && !sh->backing_off && !sh->finishing && sh->n_pend == 0 && sh->op == 0) {
			sh->op = cr_io_accept(sh->fd, accept_done, sh);
			if (sh->op == 0)
				cr__shard_backoff(sh);
		}
		return;
	}
	/* Out of slots, a reclaimable listener goes on accepting: a connection that then
	 * finds no slot makes room by closing an idle one (cr__net_reclaim). */
	want = !sh->backing_off &&
	       (sh->l->opts.single_acceptor ||
		(sh->n_stash == 0 && (nl->free_conns != NULL || may_reclaim(sh))));
	if (!want && !sh->backing_off) {
		sh->waiting_slot = true;
		nl->accept_paused = true;
		/* A slot freed before the pause was noted (a reclaimed connection's can come
		 * back at once): adopt what waits from the timer. */
		if (sh->n_stash > 0 && nl->free_conns != NULL)
			cr_timer_start(&sh->timer, 0);
		/* Waiting with nothing idle to close and no slot on its way back: look again
		 * later (a freed slot starts the timer sooner, cr__listen_slot_freed()). */
		else if (sh->n_stash > 0 && may_reclaim(sh) && nl->reclaiming == 0)
			cr_timer_start(&sh->timer, NET_RECLAIM_POLL_NS);
	}
	if (want && sh->op == 0 && cr__net_may_start(nl)) {
		sh->op = cr_io_accept(sh->fd, accept_done, sh);
		if (sh->op == 0) {
			CR_LOG(L, WARNING, "lcore %u: cannot accept on fd %d: %s", sh->owner,
			       sh->fd, cr_strerror(errno));
			cr__shard_backoff(sh);
		}
	} else if (!want && sh->op != 0 && !sh->cancel_sent) {
		sh->cancel_sent = true;
		cr_io_cancel(sh->op);
	}
}

void
cr__listen_slot_freed(struct net_lcore *nl)
{
	struct net_shard *sh;

	/* Running, or closing with a socket that serves its own backlog. */
	if (!nl->up || nl->stopping || (!cr__net_may_start(nl) && !nl->draining))
		return;
	nl->accept_paused = false;
	/* Not now: this may run inside an app call (cr_conn_destroy), and adopting calls
	 * on_open. The shard's timer does it in the lcore's timer phase. */
	for (sh = nl->shards; sh != NULL; sh = sh->next) {
		if ((sh->waiting_slot || sh->n_stash > 0) && !sh->backing_off) {
			sh->waiting_slot = false;
			cr_timer_start(&sh->timer, 0);
		}
	}
}

void
cr__shard_run(struct net_lcore *nl, struct net_shard *sh)
{
	sh->state = SH_RUN;
	sh->backoff_ns = NET_BACKOFF_MIN_NS;
	cr__shard_stash_init(sh);
	cr__shard_list_add(nl, sh);
	cr__shard_sync(sh);
}

static void
shard_released(void *arg)
{
	struct net_shard *sh = arg;
	struct cr_listener *l = sh->l;

	cr__shard_forget_fd(sh);
	cr__listener_socket_closed(l);
	cr__listener_put(l);
}

void
cr__shard_close(struct net_lcore *nl, struct net_shard *sh)
{
	if (sh->state != SH_RUN && sh->state != SH_DRAIN)
		return;
	sh->state = SH_CLOSED;
	cr__shard_list_del(nl, sh);
	cr__group_leave_locked(sh->l, sh);
	cr_timer_stop(&sh->timer);
	sh->backing_off = false;
	sh->waiting_slot = false;
	while (sh->n_stash > 0)
		close(stash_pop(sh));
	free(sh->stash);
	sh->stash = NULL;
	cr__pend_drop(nl, sh);
	/* The socket stays open until the accept's final completion. */
	if (sh->op != 0 && cr_io_abandon(sh->op, shard_released, sh) == 0) {
		sh->op = 0;
		return;
	}
	sh->op = 0;
	shard_released(sh);
}

/*
 * A draining shard's timer: during the grace, place what waits and keep the accept armed;
 * after it, cancel the accept and, once its last result is in (every connection it took
 * placed, none closed by an abandon), take what the socket still holds, a batch per tick,
 * stop listening and close. A retiring shard whose listener closes meanwhile serves the
 * rest itself.
 */
void
cr__drain_tick(struct net_lcore *nl, struct net_shard *sh)
{
	struct cr_listener *l = sh->l;
	uint64_t now = cr_now_ns();

	/* The listener closed, or a shutdown overtook the retire: nobody stays to take its
	 * connections, and once the others close, the steering goes and new handshakes
	 * would reach this socket. */
	if (!cr__listener_open(l) || nl->quench)
		cr__shard_quench(sh);
	if (now < sh->drain_until) {
		bool waiting = !cr__pend_place(l, nl, sh);

		cr__shard_sync(sh);
		if (!sh->backing_off)
			cr_timer_start(&sh->timer, waiting ? NET_DRAIN_RETRY_NS : sh->drain_until - now);
		return;
	}
	if (sh->op != 0) {
		sh->finishing = true;
		if (!sh->cancel_sent) {
			sh->cancel_sent = true;
			cr_io_cancel(sh->op);
		}
		return; /* accept_done() ticks again at the final result */
	}
	sh->finishing = true;
	switch (cr__take_queued(l, nl, sh)) {
	case TAKE_EMPTY:
		cr__shard_close(nl, sh);
		break;
	case TAKE_RESOURCE:
		NET_STAT_ADD(nl, accept_backoffs, 1);
		cr__shard_backoff(sh); /* its timer ticks again */
		break;
	case TAKE_MORE:
		if (sh->quench && nl->free_conns == NULL) {
			/* Serving here with every slot taken: the next freed slot ticks us. */
			sh->waiting_slot = true;
			nl->accept_paused = true;
		} else {
			cr_timer_start(&sh->timer, NET_DRAIN_RETRY_NS);
		}
		break;
	}
}

/*
 * Make a listening socket refuse new handshakes without touching its queue or the
 * handshakes under way: a socket filter (the kernel runs the listener's on every segment
 * it gets) that drops segments with SYN set, so no new handshake starts while the ACKs
 * that complete earlier ones still pass. Their clients retry the SYN, and are refused
 * once the socket is closed. The listen(2) backlog alone cannot do this: a limit of 0
 * still lets one connection in, which a close right after the last accept would reset.
 */
static void refuse_new_handshakes(struct net_shard *sh);

/* Serve what it takes itself from now on, and take no new handshake. */
void
cr__shard_quench(struct net_shard *sh)
{
	if (sh->quench)
		return;
	sh->quench = true;
	refuse_new_handshakes(sh);
}

static void
refuse_new_handshakes(struct net_shard *sh)
{
	struct sock_filter code[] = {
		/* A TCP socket's filter sees the segment from its TCP header: flags at 13. */
		BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 13),
		BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x02, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, 0),
		BPF_STMT(BPF_RET | BPF_K, 0xffffffffu),
	};
	struct sock_fprog prog = {.len = sizeof(code) / sizeof(code[0]), .filter = code};

	if (setsockopt(sh->fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) == 0)
		return;
	CR_LOG(L, WARNING, "lcore %u: cannot stop fd %d taking handshakes (%s): lowering its "
	       "backlog instead", sh->owner, sh->fd, cr_strerror(-errno));
	(void)listen(sh->fd, 0);
}

/*
 * Stop taking new connections on @p sh without resetting any it holds. Unless @p quench,
 * while other sockets of the listener stay, new connections are steered to them, and what
 * this one takes is handed to their lcores. Otherwise (a shutdown, the listener's close,
 * no socket to steer to) it refuses new handshakes, and serves what it takes itself.
 * Either way it goes on accepting for the drain grace (handshakes begun before), then
 * takes what is left and closes.
 */
void
cr__shard_drain(struct net_lcore *nl, struct net_shard *sh, bool quench)
{
	struct cr_listener *l = sh->l;

	if (sh->state == SH_DRAIN) {
		if (quench)
			cr__shard_quench(sh); /* a shutdown overtook the retire: no lcore stays */
		return;
	}
	if (sh->state != SH_RUN)
		return;
	if (quench || l->opts.single_acceptor || !cr__group_steer_away(l, sh))
		cr__shard_quench(sh);
	sh->state = SH_DRAIN;
	sh->drain_until = cr_now_ns() + cr__net_drain_grace_ns;
	sh->waiting_slot = false;
	cr_timer_stop(&sh->timer);
	sh->backing_off = false;
	/* What the stash holds is ours already: placed at the first tick. */
	while (sh->n_stash > 0) {
		int fd = stash_pop(sh);

		if (!cr__pend_push(sh, fd))
			cr__listen_refuse(nl, fd);
	}
	cr__shard_sync(sh);
	cr_timer_start(&sh->timer, sh->n_pend > 0 ? 0 : cr__net_drain_grace_ns);
}
