/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Listeners. The sockets are made on the calling (home) lcore, so bind errors come back
 * at once; each is then handed, with cr_for_each_lcore(), to the lcore that will accept on
 * it. From then on a socket's shard is touched only by its lcore (DESIGN.md rule 1).
 *
 * A shard keeps one multishot accept armed while it wants connections: not while its
 * lcore has no free connection slot (the kernel's backlog holds them meanwhile), and not
 * during a back-off after the accept ended with EMFILE/ENFILE/ENOBUFS/ENOMEM, so an lcore
 * out of descriptors sleeps instead of spinning.
 *
 * The listener's memory is shared by its shards and freed by whoever drops the last
 * reference: the app's handle, one per shard whose socket is still open, one per
 * connection being handed to another lcore (single_acceptor).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net_internal.h"

#define L cr__net_log

enum shard_state {
	SH_IDLE = 0, /* socket made, accept not started */
	SH_RUN,
	SH_CLOSED,
};

struct net_shard {
	_Alignas(64) struct net_shard *next; /* the lcore's list while SH_RUN */
	struct net_shard *prev;
	struct cr_listener *l;
	unsigned lcore;
	int fd;
	uint8_t state;
	bool visited; /* start message ran here; written once, read by home at start_done */
	bool started;
	bool cancel_sent;
	bool backing_off;
	bool waiting_slot;
	cr_op_id op;
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
	/* Read-only after cr_tcp_listen(). */
	struct cr_tcp_listen_opts opts;
	const struct cr_conn_ops *ops;
	void *arg;
	struct cr_net_addr bound;
	unsigned n_shards;
	struct net_shard *shard_of[CR_MAX_LCORES];
	struct net_shard shards[];
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

/* ---- one shard, on its lcore ---- */

static void shard_sync(struct net_shard *sh);

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
	while (sh->n_stash > 0 && nl->free_conns != NULL) {
		int fd = sh->stash[0];

		sh->n_stash--;
		memmove(sh->stash, sh->stash + 1, sh->n_stash * sizeof(sh->stash[0]));
		cr__conn_adopt(nl, fd, &l->opts.conn, l->ops, l->arg);
	}
	shard_sync(sh);
}

static void
handoff_msg(void *arg)
{
	uintptr_t v = (uintptr_t)arg;
	struct cr_listener *l = listeners[v >> 32];
	int fd = (int)(uint32_t)v;
	struct net_lcore *nl = cr__net_cur();

	if (nl == NULL || nl->draining ||
	    cr__conn_adopt(nl, fd, &l->opts.conn, l->ops, l->arg) == NULL) {
		close(fd);
		if (nl != NULL)
			NET_STAT_ADD(nl, refused, 1);
	}
	listener_put(l);
}

/* single_acceptor: the next RUNNING lcore round robin; ourselves if sending fails. */
static void
hand_off(struct cr_listener *l, struct net_lcore *nl, int fd)
{
	unsigned target = cr_lcore_next(l->rr);

	if (target == CR_LCORE_NONE)
		target = cr_lcore_next(CR_LCORE_NONE);
	l->rr = target;
	if (target != CR_LCORE_NONE && target != nl->lcore) {
		atomic_fetch_add_explicit(&l->refs, 1, memory_order_relaxed);
		if (cr_send(target, handoff_msg, (void *)((uintptr_t)l->idx << 32 | (uint32_t)fd)) ==
		    0)
			return;
		listener_put(l); /* never the last: our shard holds one */
	}
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
		if (l->opts.single_acceptor) {
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
	/* Every time: the connection just adopted may have taken the last slot. */
	shard_sync(sh);
}

/* Arm or cancel the multishot accept as the shard's state asks. */
static void
shard_sync(struct net_shard *sh)
{
	struct net_lcore *nl = &cr__net_lcores[sh->lcore];
	bool want;

	if (sh->state != SH_RUN)
		return;
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
	if (sh->state != SH_RUN)
		return;
	sh->state = SH_CLOSED;
	shard_list_del(nl, sh);
	cr_timer_stop(&sh->timer);
	sh->backing_off = false;
	sh->waiting_slot = false;
	while (sh->n_stash > 0)
		close(sh->stash[--sh->n_stash]);
	/* The socket stays open until the accept's final completion. */
	if (sh->op != 0 && cr_io_abandon(sh->op, shard_released, sh) == 0) {
		sh->op = 0;
		return;
	}
	sh->op = 0;
	shard_released(sh);
}

/* ---- start and close, driven from the home lcore ---- */

static void
start_visit(void *arg)
{
	struct cr_listener *l = arg;
	unsigned me = cr_lcore_id();
	struct net_shard *sh = l->shard_of[me];
	struct net_lcore *nl = cr__net_cur();

	if (sh == NULL)
		return; /* started after cr_tcp_listen(): no socket for it */
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
	for (i = 0; i < l->n_shards; i++) {
		struct net_shard *sh = &l->shards[i];

		if (sh->visited && sh->started)
			continue;
		sh->state = SH_CLOSED;
		close(sh->fd);
		sh->fd = -1;
		dead++;
	}
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
	struct net_shard *sh = l->shard_of[me];

	if (sh != NULL && sh->visited && sh->started)
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
	if (l->opts.single_acceptor) {
		shard_close(&cr__net_lcores[l->home], &l->shards[0]);
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

/* Retiring or shutting down: stop accepting here. */
void
cr__listen_lcore_drain(struct net_lcore *nl)
{
	while (nl->shards != NULL)
		shard_close(nl, nl->shards);
}

/* The lcore stops: close its shards, and drop the app's hold on listeners homed here
 * (the other lcores close their own shards when they stop). */
void
cr__listen_lcore_stop(struct net_lcore *nl)
{
	struct cr_listener *l;

	cr__listen_lcore_drain(nl);
	while ((l = nl->homed) != NULL) {
		/* cr_for_each_lcore() calls are answered before an lcore stops. */
		assert(!l->starting);
		l->closed = true;
		homed_del(nl, l);
		listener_put(l);
	}
}

/* ---- creation ---- */

static int
open_sockets(struct cr_listener *l)
{
	struct cr_net_addr a = l->opts.addr;
	unsigned i;
	int fd;

	for (i = 0; i < l->n_shards; i++) {
		fd = cr__net_bind_socket(&a, SOCK_STREAM, !l->opts.single_acceptor,
					 l->opts.v6only);
		if (fd < 0)
			return fd;
		l->shards[i].fd = fd;
		if (listen(fd, l->opts.backlog != 0 ? (int)l->opts.backlog : 1024) != 0)
			return -errno;
		if (i == 0) {
			/* Port 0: every other socket takes the port the kernel gave the first. */
			l->bound.len = sizeof(l->bound.u);
			if (getsockname(fd, &l->bound.u.sa, &l->bound.len) != 0)
				return -errno;
			a = l->bound;
		}
	}
	return 0;
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
	struct cr_listener *l;
	size_t size;
	int rc;

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
	size = sizeof(*l) + n * sizeof(l->shards[0]);
	l = aligned_alloc(64, (size + 63) & ~(size_t)63);
	if (l == NULL)
		return -ENOMEM;
	memset(l, 0, size);
	l->home = nl->lcore;
	l->rr = nl->lcore;
	l->opts = *opts;
	l->ops = ops;
	l->arg = arg;
	l->n_shards = n;
	for (i = 0; i < n; i++) {
		struct net_shard *sh = &l->shards[i];

		sh->l = l;
		sh->lcore = ids[i];
		sh->fd = -1;
		cr_timer_init(&sh->timer, shard_timer_fired, sh);
		l->shard_of[ids[i]] = sh;
	}
	rc = open_sockets(l);
	if (rc != 0)
		goto out_close;
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
		shard_run(nl, &l->shards[0]);
		l->shards[0].started = l->shards[0].visited = true;
		return 0;
	}
	l->starting = true;
	rc = cr_for_each_lcore(&l->start_call, start_visit, l, start_done, l);
	assert(rc == 0); /* only -EPERM off an lcore */
	return 0;

out_close:
	for (i = 0; i < n; i++)
		if (l->shards[i].fd >= 0)
			close(l->shards[i].fd);
	free(l);
	return rc;
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
