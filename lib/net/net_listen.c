/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Listeners. The sockets are made on the calling (home) lcore, so bind errors come back
 * at once; each is then handed, with cr_for_each_lcore(), to the lcore that will accept on
 * it. From then on a socket's shard is touched only by its lcore (doc/guides/design.md rule 1).
 *
 * A shard keeps one multishot accept armed while it wants connections: not while its
 * lcore has no free connection slot (the kernel's backlog holds them meanwhile), and not
 * during a back-off after the accept ended with EMFILE/ENFILE/ENOBUFS/ENOMEM, so an lcore
 * out of descriptors sleeps instead of spinning.
 *
 * The listener's memory is shared by its shards and freed by whoever drops the last
 * reference: the app's handle, one per shard whose socket is still open, one per
 * connection being handed to another lcore (single_acceptor, or a draining shard).
 *
 * Retirement drains a shard instead of dropping its backlog. The kernel keeps the
 * SO_REUSEPORT sockets of one port in an array (in listen(2) order; a socket that stops
 * listening is replaced by the last one) and, with a classic BPF program attached,
 * gives a new connection to the socket at the index the program returns. The listener
 * mirrors that array (group[], under steer_lock, every listen and every stop of a socket
 * done while holding it), so a program that spreads connections over the sockets not
 * leaving can be built at any time. A leaving shard goes on accepting for a grace period
 * (connections whose handshake began before the program was attached), handing each
 * connection to a staying lcore, then takes what is still queued, stops listening and
 * closes. A restarted lcore gets a new socket in every listener still open.
 */
#include <errno.h>
#include <linux/filter.h>
#include <pthread.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net_internal.h"

#define L cr__net_log

enum shard_state {
	SH_IDLE = 0, /* socket made, accept not started */
	SH_RUN,
	SH_DRAIN, /* steered away: accepting and handing off until drain_until */
	SH_CLOSED,
};

/* Listener phases, read by lcores (re)starting: they join only an OPEN listener. */
enum listener_phase {
	LP_STARTING = 0,
	LP_OPEN,
	LP_CLOSING,
};

struct net_shard {
	_Alignas(64) struct net_shard *next; /* the lcore's list while SH_RUN */
	struct net_shard *prev;
	struct cr_listener *l;
	unsigned lcore;
	int fd;
	uint8_t state;
	bool made;    /* has (or had) a socket */
	bool visited; /* start message ran here; written once, read by home at start_done */
	bool started;
	bool cancel_sent;
	bool backing_off;
	bool waiting_slot;
	bool in_group;	/* listening: in the kernel's reuseport array (steer_lock) */
	bool leaving;	/* steered away from (steer_lock) */
	bool rejoined;	/* made by a restarted lcore: check the phase once RUNNING */
	bool finishing; /* draining, grace over: the accept cancelled, taking the rest */
	cr_op_id op;
	uint64_t drain_until;
	/* Draining: connections taken while every staying mailbox was full. */
	int *pend;
	unsigned n_pend, cap_pend;
	uint64_t backoff_ns;
	struct cr_timer timer;
	/* Accepted while the slab was full (the multishot raced the pause): adopted as
	 * slots free, so a burst at the limit is delayed rather than reset. */
	unsigned n_stash;
	int stash[NET_STASH];
};

struct cr_listener {
	_Alignas(64) _Atomic unsigned refs;
	unsigned idx; /* in listeners[] */
	unsigned home;
	/* Home lcore only. */
	struct cr_listener *next, *prev;
	bool closed;
	bool starting;
	bool close_pending;
	unsigned rr; /* single_acceptor: last lcore handed a connection */
	struct cr_call start_call, close_call;
	_Atomic int phase; /* enum listener_phase; written by home */
	/* The kernel's reuseport array, mirrored; any lcore, under steer_lock. */
	pthread_mutex_t steer_lock;
	unsigned group[CR_MAX_LCORES]; /* lcore ids, in the kernel's order */
	unsigned n_group;
	unsigned n_leaving;
	unsigned steer_rr;
	bool steering; /* a program is attached */
	bool steer_failed; /* logged once */
	/* Read-only after cr_tcp_listen(). */
	struct cr_tcp_listen_opts opts;
	const struct cr_conn_ops *ops;
	void *arg;
	struct cr_net_addr bound;
	unsigned n_shards;
	struct net_shard shards[CR_MAX_LCORES]; /* by lcore id */
};

/* Handed-off connections name their listener by index: a message has one pointer, which
 * carries the index in its high half and the socket in its low half. */
_Static_assert(sizeof(uintptr_t) >= 8, "a hand-off message packs an index and an fd");

static struct cr_listener *listeners[NET_MAX_LISTENERS];
static pthread_mutex_t listeners_lock = PTHREAD_MUTEX_INITIALIZER;

static void
listener_put(struct cr_listener *l)
{
	/* acq_rel: the last one sees every shard's writes before it frees. */
	if (atomic_fetch_sub_explicit(&l->refs, 1, memory_order_acq_rel) != 1)
		return;
	pthread_mutex_lock(&listeners_lock);
	listeners[l->idx] = NULL;
	pthread_mutex_unlock(&listeners_lock);
	free(l);
}

/* A reference, unless the last one is already gone (the listener is being freed). */
static bool
ref_unless_zero(struct cr_listener *l)
{
	unsigned r = atomic_load_explicit(&l->refs, memory_order_relaxed);

	while (r != 0)
		if (atomic_compare_exchange_weak_explicit(&l->refs, &r, r + 1,
							  memory_order_relaxed,
							  memory_order_relaxed))
			return true;
	return false;
}

static int
listener_register(struct cr_listener *l)
{
	unsigned i;
	int rc = -ENOSPC;

	pthread_mutex_lock(&listeners_lock);
	for (i = 0; i < NET_MAX_LISTENERS; i++) {
		if (listeners[i] == NULL) {
			listeners[i] = l;
			l->idx = i;
			rc = 0;
			break;
		}
	}
	pthread_mutex_unlock(&listeners_lock);
	return rc;
}

/* ---- steering: the kernel's reuseport array and the program over it ---- */

/*
 * Attach a program that spreads new connections over the sockets not leaving (by the
 * packet's hash, or at random when it has none), or detach it when no socket is
 * leaving or none would stay. steer_lock held. A failure only costs the steering: the
 * leaving socket then keeps taking connections until it closes, and hands them off.
 */
static void
steer_update(struct cr_listener *l)
{
	struct sock_filter code[5 + 2 * CR_MAX_LCORES];
	struct sock_fprog prog = {.filter = code};
	unsigned stay[CR_MAX_LCORES], n = 0, i, k = 0;
	int fd, zero = 0;

	if (l->n_group == 0) {
		l->steering = false; /* the kernel's group went with its last socket */
		return;
	}
	fd = l->shards[l->group[0]].fd;
	for (i = 0; i < l->n_group; i++)
		if (!l->shards[l->group[i]].leaving)
			stay[n++] = i;
	if (l->n_leaving == 0 || n == 0) {
		if (l->steering &&
		    setsockopt(fd, SOL_SOCKET, SO_DETACH_REUSEPORT_BPF, &zero, sizeof(zero)) != 0)
			CR_LOG(L, WARNING, "cannot detach the reuseport program: %s",
			       cr_strerror(-errno));
		l->steering = false;
		return;
	}
	code[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
						 (uint32_t)(SKF_AD_OFF + SKF_AD_RXHASH));
	code[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1);
	code[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
						 (uint32_t)(SKF_AD_OFF + SKF_AD_RANDOM));
	code[k++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, n);
	for (i = 0; i < n; i++) {
		code[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, i, 0, 1);
		code[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, stay[i]);
	}
	code[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, stay[0]);
	prog.len = (unsigned short)k;
	if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof(prog)) != 0) {
		if (!l->steer_failed)
			CR_LOG(L, WARNING,
			       "cannot steer connections away from a retiring lcore: %s",
			       cr_strerror(-errno));
		l->steer_failed = true;
		return;
	}
	l->steering = true;
}

/* A socket now listening joins the end of the array. steer_lock held. */
static void
group_join(struct cr_listener *l, struct net_shard *sh)
{
	sh->in_group = true;
	l->group[l->n_group++] = sh->lcore;
}

/*
 * Stop listening now, in the kernel and in the mirror: the last socket moves into the
 * hole, as the kernel does it (reuseport_detach_sock). shutdown(2) unhashes a listening
 * socket at once, whoever else holds a reference to its file. steer_lock held.
 */
static void
group_leave(struct cr_listener *l, struct net_shard *sh)
{
	unsigned i;

	if (!sh->in_group)
		return;
	(void)shutdown(sh->fd, SHUT_RD);
	sh->in_group = false;
	for (i = 0; i < l->n_group && l->group[i] != sh->lcore; i++)
		;
	assert(i < l->n_group);
	l->group[i] = l->group[--l->n_group];
	if (sh->leaving) {
		sh->leaving = false;
		l->n_leaving--;
	}
	steer_update(l);
}

static void
group_leave_locked(struct cr_listener *l, struct net_shard *sh)
{
	pthread_mutex_lock(&l->steer_lock);
	group_leave(l, sh);
	pthread_mutex_unlock(&l->steer_lock);
}

/*
 * Steer new connections away from @p sh. False when no other socket would take them
 * (the last one, or everything is stopping): then it just closes.
 */
static bool
group_steer_away(struct cr_listener *l, struct net_shard *sh)
{
	bool others;

	pthread_mutex_lock(&l->steer_lock);
	others = sh->in_group && l->n_group - l->n_leaving > 1;
	if (others) {
		sh->leaving = true;
		l->n_leaving++;
		steer_update(l);
	}
	pthread_mutex_unlock(&l->steer_lock);
	return others;
}

/* The lcores whose socket stays, into @p ids, starting round robin; returns how many. */
static unsigned
group_staying(struct cr_listener *l, unsigned *ids)
{
	unsigned i, n = 0;

	pthread_mutex_lock(&l->steer_lock);
	for (i = 0; i < l->n_group; i++) {
		unsigned cand = l->group[(l->steer_rr + i) % l->n_group];

		if (!l->shards[cand].leaving)
			ids[n++] = cand;
	}
	if (l->n_group != 0)
		l->steer_rr = (l->steer_rr + 1) % l->n_group;
	pthread_mutex_unlock(&l->steer_lock);
	return n;
}

/* Not closing (starting counts: its home hands off the backlog of shards never started). */
static bool
listener_open(const struct cr_listener *l)
{
	return atomic_load_explicit(&l->phase, memory_order_acquire) != LP_CLOSING;
}

/* ---- one shard, on its lcore ---- */

static void shard_sync(struct net_shard *sh);
static void shard_close(struct net_lcore *nl, struct net_shard *sh);
static void drain_tick(struct net_lcore *nl, struct net_shard *sh);

static void
shard_list_add(struct net_lcore *nl, struct net_shard *sh)
{
	sh->prev = NULL;
	sh->next = nl->shards;
	if (nl->shards != NULL)
		nl->shards->prev = sh;
	nl->shards = sh;
}

static void
shard_list_del(struct net_lcore *nl, struct net_shard *sh)
{
	if (sh->prev != NULL)
		sh->prev->next = sh->next;
	else
		nl->shards = sh->next;
	if (sh->next != NULL)
		sh->next->prev = sh->prev;
	sh->next = sh->prev = NULL;
}

static void
backoff(struct net_shard *sh)
{
	if (sh->backoff_ns == NET_BACKOFF_MIN_NS)
		CR_LOG(L, NOTICE, "lcore %u: accepting paused for %llu ms (out of descriptors?)",
		       sh->lcore, (unsigned long long)(sh->backoff_ns / 1000000));
	sh->backing_off = true;
	cr_timer_start(&sh->timer, sh->backoff_ns);
	sh->backoff_ns *= 2;
	if (sh->backoff_ns > NET_BACKOFF_MAX_NS)
		sh->backoff_ns = NET_BACKOFF_MAX_NS;
}

/* The back-off is over, or a connection slot freed: adopt what waits, accept again. */
static void
shard_timer_fired(struct cr_timer *t, void *arg)
{
	struct net_shard *sh = arg;
	struct net_lcore *nl = &cr__net_lcores[sh->lcore];
	struct cr_listener *l = sh->l;

	(void)t;
	sh->backing_off = false;
	if (sh->rejoined) {
		sh->rejoined = false;
		/* acquire: pairs with the release in close_chain(); see net_rejoin(). */
		if (atomic_load_explicit(&l->phase, memory_order_acquire) != LP_OPEN) {
			shard_close(nl, sh);
			return;
		}
	}
	if (sh->state == SH_DRAIN) {
		drain_tick(nl, sh);
		return;
	}
	while (sh->n_stash > 0 && nl->free_conns != NULL) {
		int fd = sh->stash[0];

		sh->n_stash--;
		memmove(sh->stash, sh->stash + 1, sh->n_stash * sizeof(sh->stash[0]));
		cr__conn_adopt(nl, fd, &l->opts.conn, l->ops, l->arg);
	}
	shard_sync(sh);
}

static int place_conn(struct cr_listener *l, struct net_lcore *nl, int fd);

static void
refuse(struct net_lcore *nl, int fd)
{
	close(fd);
	if (nl != NULL)
		NET_STAT_ADD(nl, refused, 1);
}

static void
handoff_msg(void *arg)
{
	uintptr_t v = (uintptr_t)arg;
	struct cr_listener *l = listeners[v >> 32];
	int fd = (int)(uint32_t)v;
	struct net_lcore *nl = cr__net_cur();

	if (nl == NULL || !listener_open(l)) {
		refuse(nl, fd); /* the listener closed meanwhile: as its backlog would be */
	} else if (nl->draining && !l->opts.single_acceptor) {
		/* Began retiring since it was picked: on to a socket still staying. */
		if (place_conn(l, nl, fd) == -EAGAIN)
			refuse(nl, fd);
	} else if (nl->draining ||
		   cr__conn_adopt(nl, fd, &l->opts.conn, l->ops, l->arg) == NULL) {
		refuse(nl, fd);
	}
	listener_put(l);
}

static int
send_handoff(struct cr_listener *l, unsigned target, int fd)
{
	int rc;

	atomic_fetch_add_explicit(&l->refs, 1, memory_order_relaxed);
	rc = cr_send(target, handoff_msg, (void *)((uintptr_t)l->idx << 32 | (uint32_t)fd));
	if (rc != 0)
		listener_put(l); /* never the last: the caller's shard or message holds one */
	return rc;
}

/*
 * A connection a draining socket took: to a RUNNING lcore whose socket stays (an lcore
 * still starting has joined the array before its mailbox opens), trying each in turn;
 * adopted here if this lcore is not draining. Returns 0 placed, -EAGAIN every one
 * refused for now (mailboxes full: @p fd is still the caller's), or -ESHUTDOWN refused
 * for good (@p fd closed and counted).
 */
static int
place_conn(struct cr_listener *l, struct net_lcore *nl, int fd)
{
	unsigned ids[CR_MAX_LCORES], n, i;
	bool again = false;

	if (!listener_open(l)) {
		refuse(nl, fd);
		return -ESHUTDOWN;
	}
	n = group_staying(l, ids);
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
	refuse(nl, fd);
	return -ESHUTDOWN;
}

/*
 * Connections a draining shard took while every staying mailbox was full, kept in order
 * until they take them. The list grows as needed: a retiring lcore is not a fast path,
 * and the kernel may have accepted a whole backlog before the accept could be stopped.
 */
static bool
pend_push(struct net_shard *sh, int fd)
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
static bool
pend_place(struct cr_listener *l, struct net_lcore *nl, struct net_shard *sh)
{
	unsigned i = 0;

	while (i < sh->n_pend && place_conn(l, nl, sh->pend[i]) != -EAGAIN)
		i++;
	if (i == 0)
		return sh->n_pend == 0;
	sh->n_pend -= i;
	memmove(sh->pend, sh->pend + i, sh->n_pend * sizeof(*sh->pend));
	return sh->n_pend == 0;
}

/* Close what still waits (the listener closed, or the shutdown is forced). */
static void
pend_drop(struct net_lcore *nl, struct net_shard *sh)
{
	while (sh->n_pend > 0)
		refuse(nl, sh->pend[--sh->n_pend]);
	free(sh->pend);
	sh->pend = NULL;
	sh->cap_pend = 0;
}

/* A connection a draining shard took: placed, or kept for the next tick. */
static void
drain_take(struct cr_listener *l, struct net_lcore *nl, struct net_shard *sh, int fd)
{
	if (sh->n_pend == 0 && place_conn(l, nl, fd) != -EAGAIN)
		return;
	if (!pend_push(sh, fd)) {
		refuse(nl, fd);
		return;
	}
	if (sh->n_pend == 1)
		cr_timer_start(&sh->timer, NET_DRAIN_RETRY_NS);
}

/*
 * Take what @p lfd holds queued, a batch at a time while mailboxes take them. Returns
 * true when the socket is empty and nothing waits in the stash.
 */
static bool
take_queued(struct cr_listener *l, struct net_lcore *nl, struct net_shard *sh, int lfd)
{
	int fd, n = 0;

	if (!pend_place(l, nl, sh))
		return false;
	while (n++ < NET_DRAIN_BATCH) {
		fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return errno != EINTR || take_queued(l, nl, sh, lfd);
		if (place_conn(l, nl, fd) == -EAGAIN) {
			if (!pend_push(sh, fd))
				refuse(nl, fd);
			return false;
		}
	}
	return false;
}

/* single_acceptor: the next RUNNING lcore round robin; ourselves if sending fails. */
static void
hand_off(struct cr_listener *l, struct net_lcore *nl, int fd)
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

static bool
accept_error_is_resource(int res)
{
	return res == -EMFILE || res == -ENFILE || res == -ENOBUFS || res == -ENOMEM;
}

static void
accept_done(void *ctx, const struct cr_io_cqe *cqe)
{
	struct net_shard *sh = ctx;
	struct cr_listener *l = sh->l;
	struct net_lcore *nl = &cr__net_lcores[sh->lcore];
	bool final = !(cqe->flags & CR_IO_F_MORE);

	if (final) {
		sh->op = 0;
		sh->cancel_sent = false;
	}
	if (cqe->res >= 0) {
		sh->backoff_ns = NET_BACKOFF_MIN_NS;
		if (sh->state == SH_DRAIN) {
			drain_take(l, nl, sh, cqe->res);
		} else if (sh->state != SH_RUN) {
			close(cqe->res); /* closed with the accept still reporting */
			NET_STAT_ADD(nl, refused, 1);
		} else if (l->opts.single_acceptor) {
			hand_off(l, nl, cqe->res);
		} else if (cr__conn_adopt(nl, cqe->res, &l->opts.conn, l->ops, l->arg) == NULL) {
			/* Raced past the pause: the multishot had this one already. */
			if (sh->n_stash < NET_STASH) {
				sh->stash[sh->n_stash++] = cqe->res;
			} else {
				close(cqe->res);
				NET_STAT_ADD(nl, refused, 1);
			}
		}
	} else if (final && accept_error_is_resource(cqe->res)) {
		NET_STAT_ADD(nl, accept_backoffs, 1);
		backoff(sh);
	} else if (final && cqe->res != -ECANCELED) {
		CR_LOG(L, WARNING, "lcore %u: accept on fd %d ended: %s", sh->lcore, sh->fd,
		       cr_strerror(cqe->res));
		backoff(sh);
	}
	if (final && sh->state == SH_DRAIN && sh->finishing) {
		cr_timer_start(&sh->timer, 0); /* every result is in: take the rest */
		return;
	}
	/* Every time: the connection just adopted may have taken the last slot. */
	shard_sync(sh);
}

/* Arm or cancel the multishot accept as the shard's state asks. */
static void
shard_sync(struct net_shard *sh)
{
	struct net_lcore *nl = &cr__net_lcores[sh->lcore];
	bool want;

	if (sh->state != SH_RUN && sh->state != SH_DRAIN)
		return;
	if (sh->state == SH_DRAIN) {
		/* Handing off: no slot of ours needed; lib/io ops may still start. */
		if (!sh->backing_off && !sh->finishing && sh->n_pend == 0 && sh->op == 0) {
			sh->op = cr_io_accept(sh->fd, accept_done, sh);
			if (sh->op == 0)
				backoff(sh);
		}
		return;
	}
	want = !sh->backing_off &&
	       (sh->l->opts.single_acceptor || (nl->free_conns != NULL && sh->n_stash == 0));
	if (!want && !sh->backing_off) {
		sh->waiting_slot = true;
		nl->accept_paused = true;
	}
	if (want && sh->op == 0 && cr__net_may_start(nl)) {
		sh->op = cr_io_accept(sh->fd, accept_done, sh);
		if (sh->op == 0) {
			CR_LOG(L, WARNING, "lcore %u: cannot accept on fd %d: %s", sh->lcore,
			       sh->fd, cr_strerror(errno));
			backoff(sh);
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

	if (!cr__net_may_start(nl))
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

static void
shard_run(struct net_lcore *nl, struct net_shard *sh)
{
	sh->state = SH_RUN;
	sh->backoff_ns = NET_BACKOFF_MIN_NS;
	shard_list_add(nl, sh);
	shard_sync(sh);
}

static void
shard_released(void *arg)
{
	struct net_shard *sh = arg;

	close(sh->fd);
	sh->fd = -1;
	listener_put(sh->l);
}

static void
shard_close(struct net_lcore *nl, struct net_shard *sh)
{
	if (sh->state != SH_RUN && sh->state != SH_DRAIN)
		return;
	sh->state = SH_CLOSED;
	shard_list_del(nl, sh);
	group_leave_locked(sh->l, sh);
	cr_timer_stop(&sh->timer);
	sh->backing_off = false;
	sh->waiting_slot = false;
	while (sh->n_stash > 0)
		close(sh->stash[--sh->n_stash]);
	pend_drop(nl, sh);
	/* The socket stays open until the accept's final completion. */
	if (sh->op != 0 && cr_io_abandon(sh->op, shard_released, sh) == 0) {
		sh->op = 0;
		return;
	}
	sh->op = 0;
	shard_released(sh);
}

/*
 * A draining shard's timer: during the grace, retry what waits in the stash and keep the
 * accept armed; after it, cancel the accept and, once its last result is in (every
 * connection it took placed, none closed by an abandon), take what the socket still
 * holds, a batch per tick, stop listening and close. A listener closed meanwhile closes
 * the shard at once.
 */
static void
drain_tick(struct net_lcore *nl, struct net_shard *sh)
{
	struct cr_listener *l = sh->l;
	uint64_t now = cr_now_ns();

	if (!listener_open(l)) {
		shard_close(nl, sh);
		return;
	}
	if (now < sh->drain_until) {
		bool waiting = !pend_place(l, nl, sh);

		shard_sync(sh);
		if (!sh->backing_off)
			cr_timer_start(&sh->timer, waiting ? NET_DRAIN_RETRY_NS
							   : sh->drain_until - now);
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
	if (take_queued(l, nl, sh, sh->fd))
		shard_close(nl, sh);
	else
		cr_timer_start(&sh->timer, NET_DRAIN_RETRY_NS);
}

/* Steer new connections to the other sockets and drain this one; or close it now. */
static void
shard_drain(struct net_lcore *nl, struct net_shard *sh, bool forced)
{
	struct cr_listener *l = sh->l;

	if (sh->state == SH_DRAIN) {
		if (forced)
			shard_close(nl, sh);
		return;
	}
	if (forced || l->opts.single_acceptor || !group_steer_away(l, sh)) {
		shard_close(nl, sh);
		return;
	}
	sh->state = SH_DRAIN;
	sh->drain_until = cr_now_ns() + cr__net_drain_grace_ns;
	sh->waiting_slot = false;
	cr_timer_stop(&sh->timer);
	sh->backing_off = false;
	/* What the stash holds is ours already: handed off at the first tick. */
	while (sh->n_stash > 0)
		if (!pend_push(sh, sh->stash[--sh->n_stash]))
			refuse(nl, sh->stash[sh->n_stash]);
	shard_sync(sh);
	cr_timer_start(&sh->timer, sh->n_pend > 0 ? 0 : cr__net_drain_grace_ns);
}

/* ---- start and close, driven from the home lcore ---- */

static void
start_visit(void *arg)
{
	struct cr_listener *l = arg;
	unsigned me = cr_lcore_id();
	struct net_shard *sh = &l->shards[me];
	struct net_lcore *nl = cr__net_cur();

	if (!sh->made)
		return; /* started after cr_tcp_listen(): it joins at start_done */
	if (nl != NULL && cr__net_may_start(nl)) {
		shard_run(nl, sh);
		sh->started = true;
	}
	/* Read by start_done() on home: the chain's messages order the two. */
	sh->visited = true;
}

static void close_chain(struct cr_listener *l);

static void
start_done(void *arg)
{
	struct cr_listener *l = arg;
	unsigned i, dead = 0, before;

	l->starting = false;
	/* Shards whose lcore stopped before the message came: never touched there. */
	for (i = 0; i < CR_MAX_LCORES; i++) {
		struct net_shard *sh = &l->shards[i];

		if (!sh->made || (sh->visited && sh->started))
			continue;
		/* Connections may wait in it: steered away, taken and handed off here. */
		sh->state = SH_CLOSED;
		if (group_steer_away(l, sh)) {
			/* Home is not draining: what no mailbox takes it adopts itself. */
			unsigned k;

			for (k = 0; k < NET_DRAIN_ACCEPT_MAX / NET_DRAIN_BATCH; k++)
				if (take_queued(l, &cr__net_lcores[l->home], sh, sh->fd))
					break;
			pend_drop(&cr__net_lcores[l->home], sh);
		}
		group_leave_locked(l, sh);
		close(sh->fd);
		sh->fd = -1;
		dead++;
	}
	/* release: lcores that start from now on see the whole set-up and join. */
	if (!l->close_pending)
		atomic_store_explicit(&l->phase, LP_OPEN, memory_order_release);
	/* Never the last references: the app's stays until close_chain() has run. */
	before = atomic_fetch_sub_explicit(&l->refs, dead, memory_order_acq_rel);
	assert(before > dead);
	(void)before;
	if (l->close_pending)
		close_chain(l);
}

static void
close_visit(void *arg)
{
	struct cr_listener *l = arg;
	unsigned me = cr_lcore_id();
	struct net_shard *sh = &l->shards[me];

	/* A shard made at listen time and started, or one a restarted lcore made. */
	if (sh->started)
		shard_close(&cr__net_lcores[me], sh);
}

static void
close_done(void *arg)
{
	listener_put(arg); /* the app's reference */
}

static void
close_chain(struct cr_listener *l)
{
	/* Under the lock: an lcore joining either sees CLOSING and stays out, or joined
	 * before, is RUNNING, and so is visited below (or closes its shard itself). */
	pthread_mutex_lock(&listeners_lock);
	atomic_store_explicit(&l->phase, LP_CLOSING, memory_order_release);
	pthread_mutex_unlock(&listeners_lock);
	if (l->opts.single_acceptor) {
		shard_close(&cr__net_lcores[l->home], &l->shards[l->home]);
		listener_put(l);
		return;
	}
	if (cr_for_each_lcore(&l->close_call, close_visit, l, close_done, l) != 0)
		listener_put(l); /* off lcore: cannot happen on home */
}

static void
homed_del(struct net_lcore *nl, struct cr_listener *l)
{
	if (l->prev != NULL)
		l->prev->next = l->next;
	else
		nl->homed = l->next;
	if (l->next != NULL)
		l->next->prev = l->prev;
	l->next = l->prev = NULL;
}

void
cr_listener_close(struct cr_listener *l)
{
	struct net_lcore *nl;

	if (l == NULL)
		return;
	if (cr_lcore_id() != l->home) {
		CR_LOG(L, ERR, "cr_listener_close off the listener's home lcore %u: ignored",
		       l->home);
		return;
	}
	if (l->closed)
		return;
	nl = &cr__net_lcores[l->home];
	l->closed = true;
	homed_del(nl, l);
	if (l->starting)
		l->close_pending = true;
	else
		close_chain(l);
}

/*
 * Retiring or shutting down: stop accepting here, steering new connections to the
 * other lcores and handing off the queued ones where some socket stays. Returns true
 * while a shard is still draining (at most the grace period). @p forced closes at once.
 */
bool
cr__listen_lcore_drain(struct net_lcore *nl, bool forced)
{
	struct net_shard *sh, *next;
	bool busy = false;

	for (sh = nl->shards; sh != NULL; sh = next) {
		next = sh->next;
		shard_drain(nl, sh, forced);
	}
	for (sh = nl->shards; sh != NULL; sh = sh->next)
		busy |= sh->state == SH_DRAIN;
	return busy;
}

/* The lcore stops: close its shards, and drop the app's hold on listeners homed here
 * (the other lcores close their own shards when they stop). */
void
cr__listen_lcore_stop(struct net_lcore *nl)
{
	struct cr_listener *l;

	(void)cr__listen_lcore_drain(nl, true);
	while ((l = nl->homed) != NULL) {
		/* cr_for_each_lcore() calls are answered before an lcore stops. */
		assert(!l->starting);
		l->closed = true;
		homed_del(nl, l);
		/* Nobody can close it now: restarted lcores must not join it. */
		pthread_mutex_lock(&listeners_lock);
		atomic_store_explicit(&l->phase, LP_CLOSING, memory_order_release);
		pthread_mutex_unlock(&listeners_lock);
		listener_put(l);
	}
}

/* ---- creation ---- */

/* Bind and listen on @p *a (port 0 replaced by the port the kernel chose). */
static int
shard_open(struct cr_listener *l, struct net_shard *sh, struct cr_net_addr *a)
{
	int fd = cr__net_bind_socket(a, SOCK_STREAM, !l->opts.single_acceptor, l->opts.v6only);

	if (fd < 0)
		return fd;
	if (listen(fd, l->opts.backlog != 0 ? (int)l->opts.backlog : 1024) != 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	sh->fd = fd;
	if (!l->opts.single_acceptor)
		group_join(l, sh);
	if (a->u.sa.sa_family == AF_INET ? a->u.in4.sin_port == 0 : a->u.in6.sin6_port == 0) {
		l->bound.len = sizeof(l->bound.u);
		if (getsockname(fd, &l->bound.u.sa, &l->bound.len) != 0)
			return -errno;
		*a = l->bound;
	}
	return 0;
}

static void
shard_init(struct cr_listener *l, unsigned lcore)
{
	struct net_shard *sh = &l->shards[lcore];

	memset(sh, 0, sizeof(*sh));
	sh->l = l;
	sh->lcore = lcore;
	sh->fd = -1;
	cr_timer_init(&sh->timer, shard_timer_fired, sh);
}

static bool
listen_args_valid(const struct cr_tcp_listen_opts *o, const struct cr_conn_ops *ops,
		  struct cr_listener **out)
{
	const struct cr_conn_opts *c;

	if (o == NULL || ops == NULL || out == NULL || o->addr.len == 0 ||
	    (o->addr.u.sa.sa_family != AF_INET && o->addr.u.sa.sa_family != AF_INET6))
		return false;
	c = &o->conn;
	return c->low_watermark == 0 || c->high_watermark == 0 ||
	       c->low_watermark <= c->high_watermark;
}

int
cr_tcp_listen(const struct cr_tcp_listen_opts *opts, const struct cr_conn_ops *ops,
	      void *arg, struct cr_listener **out)
{
	struct net_lcore *nl = cr__net_cur();
	unsigned ids[CR_MAX_LCORES], n = 0, i, id;
	struct cr_net_addr a;
	struct cr_listener *l;
	int rc = 0;

	if (nl == NULL || !cr__net_may_start(nl))
		return -EPERM;
	if (!listen_args_valid(opts, ops, out))
		return -EINVAL;
	if (opts->single_acceptor) {
		ids[n++] = nl->lcore;
	} else {
		CR_LCORE_FOREACH(id) {
			ids[n++] = id;
		}
	}
	l = aligned_alloc(64, (sizeof(*l) + 63) & ~(size_t)63);
	if (l == NULL)
		return -ENOMEM;
	memset(l, 0, sizeof(*l));
	pthread_mutex_init(&l->steer_lock, NULL);
	l->home = nl->lcore;
	l->rr = nl->lcore;
	l->opts = *opts;
	l->ops = ops;
	l->arg = arg;
	l->n_shards = n;
	l->bound = opts->addr;
	for (id = 0; id < CR_MAX_LCORES; id++)
		shard_init(l, id);
	/* Not published yet: the mirror needs no lock. */
	a = opts->addr;
	for (i = 0; i < n && rc == 0; i++) {
		l->shards[ids[i]].made = true;
		rc = shard_open(l, &l->shards[ids[i]], &a);
	}
	if (rc == 0)
		rc = listener_register(l);
	if (rc != 0)
		goto out_close;
	atomic_store_explicit(&l->refs, 1 + n, memory_order_relaxed);
	l->next = nl->homed;
	if (nl->homed != NULL)
		nl->homed->prev = l;
	nl->homed = l;
	*out = l;
	if (opts->single_acceptor) {
		struct net_shard *sh = &l->shards[nl->lcore];

		shard_run(nl, sh);
		sh->started = sh->visited = true;
		atomic_store_explicit(&l->phase, LP_OPEN, memory_order_release);
		return 0;
	}
	l->starting = true;
	rc = cr_for_each_lcore(&l->start_call, start_visit, l, start_done, l);
	assert(rc == 0); /* only -EPERM off an lcore */
	return 0;

out_close:
	for (i = 0; i < n; i++)
		if (l->shards[ids[i]].fd >= 0)
			close(l->shards[ids[i]].fd);
	pthread_mutex_destroy(&l->steer_lock);
	free(l);
	return rc;
}

/*
 * A restarted lcore (module lcore_start, on its thread, before RUNNING): a new socket in
 * every open reuseport listener, accepting from its first turn. The shard checks the
 * phase again then, when RUNNING: a close chain that began after this check visits it.
 */
void
cr__listen_lcore_rejoin(struct net_lcore *nl)
{
	unsigned i;

	for (i = 0; i < NET_MAX_LISTENERS; i++) {
		struct cr_listener *l;
		struct net_shard *sh;
		struct cr_net_addr a;
		int rc;

		pthread_mutex_lock(&listeners_lock);
		l = listeners[i];
		if (l == NULL || l->opts.single_acceptor ||
		    atomic_load_explicit(&l->phase, memory_order_acquire) != LP_OPEN ||
		    l->shards[nl->lcore].fd >= 0) {
			pthread_mutex_unlock(&listeners_lock);
			continue;
		}
		if (!ref_unless_zero(l)) {
			pthread_mutex_unlock(&listeners_lock); /* its last put is under way */
			continue;
		}
		pthread_mutex_unlock(&listeners_lock);

		sh = &l->shards[nl->lcore];
		shard_init(l, nl->lcore);
		a = l->bound;
		pthread_mutex_lock(&l->steer_lock);
		rc = shard_open(l, sh, &a);
		if (rc == 0 && l->n_leaving > 0)
			steer_update(l); /* the program must know the new index */
		pthread_mutex_unlock(&l->steer_lock);
		if (rc != 0) {
			char buf[64];

			CR_LOG(L, WARNING, "lcore %u: cannot listen on %s again: %s", nl->lcore,
			       cr_net_addr_format(&l->bound, buf, sizeof(buf)), cr_strerror(rc));
			listener_put(l);
			continue;
		}
		sh->made = sh->visited = sh->started = sh->rejoined = true;
		sh->state = SH_RUN;
		sh->backoff_ns = NET_BACKOFF_MIN_NS;
		shard_list_add(nl, sh);
		cr_timer_start(&sh->timer, 0); /* first turn: phase check, then accept */
	}
}

void
cr_listener_addr(const struct cr_listener *l, struct cr_net_addr *out)
{
	*out = l->bound;
}

unsigned
cr_listener_sockets(const struct cr_listener *l)
{
	return l->n_shards;
}
