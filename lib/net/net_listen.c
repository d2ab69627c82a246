/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Listeners. The sockets are made on the calling (home) lcore, so bind errors come back
 * at once; each is then handed, with cr_for_each_lcore(), to the lcore that will accept on
 * it. From then on a socket's shard is touched only by its lcore (doc/guides/design.md rule 1).
 *
 * The listener's memory is shared by its shards and freed by whoever drops the last
 * reference: the app's handle, one per shard whose socket is still open, one per
 * connection being handed to another lcore (single_acceptor, or a draining shard).
 *
 * Retirement drains a shard instead of dropping its backlog (net_accept.c: one shard's
 * accepts and its drain; net_steer.c: steering new connections away from it;
 * net_handoff.c: passing what it took to an lcore that stays). A restarted lcore gets a
 * new socket in every listener still open (cr__listen_lcore_rejoin).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net_listen_internal.h"

#define L cr__net_log

static struct cr_listener *listeners[NET_MAX_LISTENERS];
static pthread_mutex_t listeners_lock = PTHREAD_MUTEX_INITIALIZER;

void
cr__listener_put(struct cr_listener *l)
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

/* The sender of a hand-off holds a reference, so the slot cannot be reused under it. */
struct cr_listener *
cr__listener_by_index(unsigned idx)
{
	return listeners[idx];
}

/* On the home lcore (or where the last socket closed): the app's close completion. */
static void
close_completed(void *arg)
{
	struct cr_listener *l = arg;

	l->close_fn(l->close_arg);
	cr__listener_put(l);
}

/*
 * A shard's socket has closed (on its owner lcore). When it was the last and the app
 * closed the listener with a completion, that runs: on home, or here when home no
 * longer takes messages. A reference keeps the listener until it has.
 */
/* Once, whoever sees both "closing" and "no socket left" first (see close_chain()). */
static void
complete_close(struct cr_listener *l)
{
	if (l->close_fn == NULL || atomic_exchange(&l->close_fired, true))
		return;
	atomic_fetch_add_explicit(&l->refs, 1, memory_order_relaxed);
	if (cr_lcore_id() == l->home || cr_send(l->home, close_completed, l) != 0)
		close_completed(l);
}

void
cr__listener_socket_closed(struct cr_listener *l)
{
	/* seq_cst: with close_chain()'s phase store and count load, one of the two sees
	 * both the phase and the count at 0. */
	if (atomic_fetch_sub(&l->sockets_open, 1) != 1)
		return;
	if (atomic_load(&l->phase) == LP_CLOSING)
		complete_close(l);
}

void
cr__shard_forget_fd(struct net_shard *sh)
{
	pthread_mutex_lock(&listeners_lock);
	close(sh->fd);
	sh->fd = -1;
	pthread_mutex_unlock(&listeners_lock);
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
		cr__shard_run(nl, sh);
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
	unsigned i;

	l->starting = false;
	/* Shards whose lcore stopped before the message came: never touched there. */
	for (i = 0; i < CR_MAX_LCORES; i++) {
		struct net_shard *sh = &l->shards[i];

		if (!sh->made || (sh->visited && sh->started))
			continue;
		/* Connections may wait in it: steered away (or, with no other socket to
		 * steer to, kept from queuing more), then drained from home, a batch per
		 * tick; what no staying lcore takes, home serves itself. Its reference goes
		 * when it closes. */
		if (!cr__group_steer_away(l, sh))
			cr__shard_quench(sh);
		sh->owner = l->home;
		sh->state = SH_DRAIN;
		/* No accept, no grace: it takes what is queued and closes, so that its lcore,
		 * started again, finds the slot free to listen again (a handshake still under
		 * way at that point is lost). */
		sh->finishing = true;
		cr__shard_list_add(&cr__net_lcores[l->home], sh);
		cr_timer_start(&sh->timer, 0);
	}
	/* release: lcores that start from now on see the whole set-up and join. */
	if (!l->close_pending)
		atomic_store_explicit(&l->phase, LP_OPEN, memory_order_release);
	if (l->close_pending)
		close_chain(l);
}

static void
close_visit(void *arg)
{
	struct cr_listener *l = arg;
	unsigned me = cr_lcore_id();
	struct net_shard *sh = &l->shards[me];

	/* A shard made at listen time and started, or one a restarted lcore made: it
	 * serves what it holds queued, then closes. */
	if (sh->started)
		cr__shard_drain(&cr__net_lcores[me], sh, true);
}

static void
close_done(void *arg)
{
	cr__listener_put(arg); /* the app's reference */
}

static void
close_chain(struct cr_listener *l)
{
	/* Under the lock: an lcore joining either sees CLOSING and stays out, or joined
	 * before, is RUNNING, and so is visited below (or closes its shard itself). The
	 * seq_cst store pairs with cr__listener_socket_closed(): every socket may have closed
	 * already (a close asked while starting, the shards quicker than start_done). */
	pthread_mutex_lock(&listeners_lock);
	atomic_store(&l->phase, LP_CLOSING);
	pthread_mutex_unlock(&listeners_lock);
	if (atomic_load(&l->sockets_open) == 0)
		complete_close(l);
	if (l->opts.single_acceptor) {
		cr__shard_drain(&cr__net_lcores[l->home], &l->shards[l->home], true);
		cr__listener_put(l);
		return;
	}
	if (cr_for_each_lcore(&l->close_call, close_visit, l, close_done, l) != 0)
		cr__listener_put(l); /* off lcore: cannot happen on home */
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
cr_listener_close(struct cr_listener *l, cr_msg_fn done, void *arg)
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
	/* Published by close_chain()'s release of the phase. */
	l->close_fn = done;
	l->close_arg = arg;
	homed_del(nl, l);
	if (l->starting)
		l->close_pending = true;
	else
		close_chain(l);
}

/* The lcore begins closing: every shard it runs stops taking new connections. */
void
cr__listen_lcore_closing(struct net_lcore *nl)
{
	struct net_shard *sh, *next;

	for (sh = nl->shards; sh != NULL; sh = next) {
		next = sh->next;
		cr__shard_drain(nl, sh, nl->quench);
	}
}

/* True while a shard of this lcore still drains (at most the grace and its backlog). */
bool
cr__listen_lcore_draining(const struct net_lcore *nl)
{
	const struct net_shard *sh;

	for (sh = nl->shards; sh != NULL; sh = sh->next)
		if (sh->state == SH_DRAIN)
			return true;
	return false;
}

/* The lcore stops: close its shards (what they still hold is reset: the shutdown was
 * forced, or the drain is over), and drop the app's hold on listeners homed here (the
 * other lcores close their own shards when they stop). */
void
cr__listen_lcore_stop(struct net_lcore *nl)
{
	struct cr_listener *l;

	while (nl->shards != NULL)
		cr__shard_close(nl, nl->shards);
	while ((l = nl->homed) != NULL) {
		/* cr_for_each_lcore() calls are answered before an lcore stops. */
		assert(!l->starting);
		l->closed = true;
		homed_del(nl, l);
		/* Nobody can close it now: restarted lcores must not join it. */
		pthread_mutex_lock(&listeners_lock);
		atomic_store_explicit(&l->phase, LP_CLOSING, memory_order_release);
		pthread_mutex_unlock(&listeners_lock);
		cr__listener_put(l);
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
	atomic_fetch_add_explicit(&l->sockets_open, 1, memory_order_relaxed);
	if (!l->opts.single_acceptor)
		cr__group_join(l, sh);
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
	sh->owner = lcore;
	sh->fd = -1;
	cr_timer_init(&sh->timer, cr__shard_timer_fired, sh);
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

/*
 * One owner per address: does another socket listen on @p a already? A bind without
 * SO_REUSEPORT fails with EADDRINUSE when one does (SO_REUSEADDR only passes over
 * sockets that do not listen). The probe closes before our sockets bind, so two
 * processes starting at the same instant can both pass: the window is the few
 * microseconds between this close and the first bind. Port 0 is the kernel's choice of
 * a free port: nothing to check.
 */
static int
address_free(const struct cr_tcp_listen_opts *o)
{
	int fd;

	if (cr__net_share_addresses || cr_net_addr_port(&o->addr) == 0)
		return 0;
	fd = cr__net_bind_socket(&o->addr, SOCK_STREAM, false, o->v6only);
	if (fd < 0)
		return fd;
	close(fd);
	return 0;
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
	rc = address_free(opts);
	if (rc != 0)
		return rc;
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

		cr__shard_run(nl, sh);
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
			cr__steer_update(l); /* the program must know the new index */
		pthread_mutex_unlock(&l->steer_lock);
		if (rc != 0) {
			char buf[64];

			CR_LOG(L, WARNING, "lcore %u: cannot listen on %s again: %s", nl->lcore,
			       cr_net_addr_format(&l->bound, buf, sizeof(buf)), cr_strerror(rc));
			cr__listener_put(l);
			continue;
		}
		sh->made = sh->visited = sh->started = sh->rejoined = true;
		sh->state = SH_RUN;
		sh->backoff_ns = NET_BACKOFF_MIN_NS;
		cr__shard_stash_init(sh);
		cr__shard_list_add(nl, sh);
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
