/* SPDX-License-Identifier: BSD-3-Clause */
/* Outbound TCP: a nonblocking socket and one connect op with lib/io's deadline. */
#include <errno.h>
#include <unistd.h>

#include "net_internal.h"

static void
connect_done(void *ctx, const struct cr_io_cqe *cqe)
{
	struct cr_conn *c = ctx;

	/* The op's hold becomes the one cr__conn_connected() drops below. */
	c->connect_op = 0;
	cr__conn_connected(c, cqe->res);
	cr__conn_unhold(c);
}

static bool
opts_valid(const struct cr_conn_opts *o)
{
	return o == NULL || o->low_watermark == 0 || o->high_watermark == 0 ||
	       o->low_watermark <= o->high_watermark;
}

struct cr_conn *
cr_tcp_connect(const struct cr_net_addr *to, uint64_t timeout_ns,
	       const struct cr_conn_opts *opts, const struct cr_conn_ops *ops, void *arg)
{
	struct net_lcore *nl = cr__net_cur();
	struct cr_conn *c;
	int fd, err;

	if (nl == NULL)
		return NULL;
	/* Also on a closing lcore (retiring, or told to close and not yet draining): what it
	 * still serves may need a connection (a proxy's backend, for a client it took just
	 * before), and is waited for like the others. Only once lib/net stops, no more. */
	if (!nl->up || nl->stopping) {
		errno = EPERM;
		return NULL;
	}
	if (to == NULL || ops == NULL || to->len == 0 || !opts_valid(opts) ||
	    (to->u.sa.sa_family != AF_INET && to->u.sa.sa_family != AF_INET6)) {
		errno = EINVAL;
		return NULL;
	}
	c = cr__net_conn_get(nl);
	if (c == NULL) {
		errno = EMFILE;
		return NULL;
	}
	fd = socket(to->u.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		err = errno;
		goto out_put;
	}
	if (opts == NULL || !opts->nagle)
		(void)cr__socket_opts_nodelay(fd, false);
	cr__conn_init(c, nl, fd, opts, ops, arg);
	c->state = CONN_CONNECTING;
	if (nl->draining)
		cr__conn_begin_ending(c); /* ends at its boundary, as the others here do */
	c->connect_op = cr_io_connect(fd, &to->u.sa, to->len, timeout_ns, connect_done, c);
	if (c->connect_op == 0) {
		err = errno;
		/* Never opened and never reported: take it back quietly (no op holds it,
		 * so the end frees the slot and closes the socket). */
		cr__conn_end(c, 0, false);
		NET_STAT_ADD(nl, closed, -1);
		errno = err;
		return NULL;
	}
	cr__conn_hold(c);
	return c;

out_put:
	cr__net_conn_put(nl, c);
	errno = err;
	return NULL;
}
