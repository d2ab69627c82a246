/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UDP sockets: recv_depth receives kept posted with cr_io_recvmsg(), and a free list of
 * send_depth send slots for cr_io_sendmsg(). Every buffer, msghdr and address a posted op
 * names lives in the socket's one allocation, which is freed only when the last op has
 * had its final completion.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "net_internal.h"

#define L cr__net_log

#define DEFAULT_MAX_DGRAM 65536
#define DEFAULT_RECV_DEPTH 8
#define DEFAULT_SEND_DEPTH 32
#define MAX_DEPTH 4096
/* A receive slot that fails this many times in a row stops (no busy loop on a dead fd). */
#define MAX_RECV_ERRORS 8

struct udp_slot {
	struct cr_udp *u;
	struct udp_slot *next_free;
	cr_op_id op;
	struct msghdr msg;
	struct iovec iov;
	struct cr_net_addr addr;
	uint8_t *buf;
	unsigned errors;
};

struct cr_udp {
	struct cr_udp *next, *prev; /* the lcore's list until closed */
	struct net_lcore *nl;
	const struct cr_udp_ops *ops;
	void *arg;
	int fd;
	int owned; /* the address's slot in net_socket.c's table, or -1 */
	bool stopped; /* no receives posted, sends refused (drained or closed) */
	bool closed;  /* the app's handle is gone: freed at holds == 0 */
	unsigned holds; /* ops in flight plus callbacks on the stack */
	uint32_t max_dgram, n_recv, n_send;
	struct udp_slot *free_send;
	struct udp_slot slots[]; /* n_recv receive slots, then n_send send slots */
};

static void
udp_free(struct cr_udp *u)
{
	close(u->fd);
	cr__udp_release_owned(u->owned);
	cr_numa_free(u);
}

static void
udp_unhold(struct cr_udp *u)
{
	if (--u->holds == 0 && u->closed)
		udp_free(u);
}

static void
udp_released(void *arg)
{
	udp_unhold(arg);
}

static void recv_done(void *ctx, const struct cr_io_cqe *cqe);

static int
recv_post(struct udp_slot *s)
{
	struct cr_udp *u = s->u;

	memset(&s->msg, 0, sizeof(s->msg));
	s->msg.msg_name = &s->addr.u;
	s->msg.msg_namelen = sizeof(s->addr.u);
	s->iov.iov_base = s->buf;
	s->iov.iov_len = u->max_dgram;
	s->msg.msg_iov = &s->iov;
	s->msg.msg_iovlen = 1;
	s->op = cr_io_recvmsg(u->fd, &s->msg, recv_done, s);
	if (s->op == 0)
		return -errno;
	u->holds++;
	return 0;
}

static void
recv_done(void *ctx, const struct cr_io_cqe *cqe)
{
	struct udp_slot *s = ctx;
	struct cr_udp *u = s->u;
	int rc;

	s->op = 0; /* the op's hold is this callback's */
	if (cqe->res >= 0) {
		s->errors = 0;
		s->addr.len = s->msg.msg_namelen;
		NET_STAT_ADD(u->nl, udp_in, 1);
		if (u->ops->on_datagram != NULL)
			u->ops->on_datagram(u, s->buf, (size_t)cqe->res, &s->addr);
	} else if (cqe->res != -EAGAIN && cqe->res != -EINTR) {
		/* (-EAGAIN: io_uring's one poll-and-retry found nothing; just post again.) */
		s->errors++;
		if (u->ops->on_error != NULL && !u->stopped)
			u->ops->on_error(u, cqe->res);
	}
	if (!u->stopped && s->errors < MAX_RECV_ERRORS) {
		rc = recv_post(s);
		if (rc != 0) {
			CR_LOG(L, WARNING, "lcore %u: UDP fd %d: cannot post a receive: %s",
			       u->nl->lcore, u->fd, cr_strerror(rc));
			if (u->ops->on_error != NULL)
				u->ops->on_error(u, rc);
		}
	}
	udp_unhold(u);
}

static void
send_done(void *ctx, const struct cr_io_cqe *cqe)
{
	struct udp_slot *s = ctx;
	struct cr_udp *u = s->u;

	s->op = 0;
	if (cqe->res < 0)
		NET_STAT_ADD(u->nl, udp_drops, 1);
	else
		NET_STAT_ADD(u->nl, udp_out, 1);
	s->next_free = u->free_send;
	u->free_send = s;
	udp_unhold(u);
}

int
cr_udp_send(struct cr_udp *u, const void *data, size_t len, const struct cr_net_addr *to)
{
	struct udp_slot *s;

	if (u == NULL || (data == NULL && len != 0) || to == NULL || to->len == 0)
		return -EINVAL;
	NET_ASSERT_OWNER(u->nl);
	if (u->stopped)
		return -EBADF;
	if (len > u->max_dgram)
		return -EMSGSIZE;
	s = u->free_send;
	if (s == NULL) {
		NET_STAT_ADD(u->nl, udp_drops, 1);
		return -ENOBUFS;
	}
	memcpy(s->buf, data, len);
	s->addr = *to;
	memset(&s->msg, 0, sizeof(s->msg));
	s->msg.msg_name = &s->addr.u;
	s->msg.msg_namelen = to->len;
	s->iov.iov_base = s->buf;
	s->iov.iov_len = len;
	s->msg.msg_iov = &s->iov;
	s->msg.msg_iovlen = 1;
	s->op = cr_io_sendmsg(u->fd, &s->msg, send_done, s);
	if (s->op == 0)
		return -errno;
	u->free_send = s->next_free;
	u->holds++;
	return 0;
}

static void
udp_list_del(struct net_lcore *nl, struct cr_udp *u)
{
	if (u->prev != NULL)
		u->prev->next = u->next;
	else
		nl->udps = u->next;
	if (u->next != NULL)
		u->next->prev = u->prev;
	u->next = u->prev = NULL;
}

/* Abandon every op: nothing is received or sent any more, no callback comes. */
static void
udp_stop(struct cr_udp *u)
{
	uint32_t i;

	if (u->stopped)
		return;
	u->stopped = true;
	for (i = 0; i < u->n_recv + u->n_send; i++) {
		struct udp_slot *s = &u->slots[i];

		/* lib/io already stopped: it retired the op itself, so its hold goes now. */
		if (s->op != 0 && cr_io_abandon(s->op, udp_released, u) != 0)
			u->holds--;
		s->op = 0;
	}
}

void
cr_udp_close(struct cr_udp *u)
{
	if (u == NULL || u->closed)
		return;
	NET_ASSERT_OWNER(u->nl);
	u->holds++;
	u->closed = true;
	udp_list_del(u->nl, u);
	udp_stop(u);
	udp_unhold(u);
}

void
cr__udp_lcore_drain(struct net_lcore *nl)
{
	struct cr_udp *u;

	for (u = nl->udps; u != NULL; u = u->next)
		udp_stop(u);
}

void
cr__udp_lcore_stop(struct net_lcore *nl)
{
	while (nl->udps != NULL)
		cr_udp_close(nl->udps);
}

static struct cr_udp *
udp_alloc(struct net_lcore *nl, const struct cr_udp_opts *o)
{
	uint32_t dgram = o != NULL && o->max_datagram != 0 ? o->max_datagram : DEFAULT_MAX_DGRAM;
	uint32_t nr = o != NULL && o->recv_depth != 0 ? o->recv_depth : DEFAULT_RECV_DEPTH;
	uint32_t ns = o != NULL && o->send_depth != 0 ? o->send_depth : DEFAULT_SEND_DEPTH;
	size_t head, size;
	struct cr_udp *u;
	uint32_t i;

	if (dgram > (1u << 20) || nr > MAX_DEPTH || ns > MAX_DEPTH) {
		errno = EINVAL;
		return NULL;
	}
	head = (sizeof(*u) + (nr + ns) * sizeof(u->slots[0]) + 63) & ~(size_t)63;
	size = head + (size_t)(nr + ns) * dgram;
	u = cr_numa_zalloc(size, nl->numa);
	if (u == NULL)
		return NULL;
	u->nl = nl;
	u->max_dgram = dgram;
	u->n_recv = nr;
	u->n_send = ns;
	for (i = 0; i < nr + ns; i++) {
		u->slots[i].u = u;
		u->slots[i].buf = (uint8_t *)u + head + (size_t)i * dgram;
	}
	for (i = nr + ns; i-- > nr;) {
		u->slots[i].next_free = u->free_send;
		u->free_send = &u->slots[i];
	}
	return u;
}

struct cr_udp *
cr_udp_bind(const struct cr_net_addr *addr, const struct cr_udp_opts *opts,
	    const struct cr_udp_ops *ops, void *arg)
{
	struct net_lcore *nl = cr__net_cur();
	struct cr_udp *u;
	uint32_t i;
	int rc;

	if (nl == NULL)
		return NULL;
	if (!cr__net_may_start(nl)) {
		errno = EPERM;
		return NULL;
	}
	if (addr == NULL || ops == NULL) {
		errno = EINVAL;
		return NULL;
	}
	u = udp_alloc(nl, opts);
	if (u == NULL)
		return NULL;
	u->ops = ops;
	u->arg = arg;
	u->fd = cr__udp_bind_owned(addr, opts != NULL && opts->reuseport,
				   opts != NULL && opts->v6only, &u->owned);
	if (u->fd < 0) {
		rc = u->fd;
		goto out_free;
	}
	u->next = nl->udps;
	if (nl->udps != NULL)
		nl->udps->prev = u;
	nl->udps = u;
	for (i = 0; i < u->n_recv; i++) {
		rc = recv_post(&u->slots[i]);
		if (rc != 0) {
			cr_udp_close(u);
			errno = -rc;
			return NULL;
		}
	}
	return u;

out_free:
	cr_numa_free(u);
	errno = -rc;
	return NULL;
}

int
cr_udp_addr(const struct cr_udp *u, struct cr_net_addr *out)
{
	memset(out, 0, sizeof(*out));
	out->len = sizeof(out->u);
	if (getsockname(u->fd, &out->u.sa, &out->len) != 0) {
		out->len = 0;
		return -errno;
	}
	return 0;
}

void *
cr_udp_arg(const struct cr_udp *u)
{
	return u->arg;
}
