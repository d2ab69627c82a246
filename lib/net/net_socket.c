/* SPDX-License-Identifier: BSD-3-Clause */
/* Creating and binding the sockets listeners and UDP sockets use (control path), and what
 * lib/net asks of a connected TCP socket. */
#include <errno.h>
#include <linux/tcp.h> /* the kernel's struct tcp_info: glibc's lacks tcpi_bytes_received */
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "net_internal.h"

int
cr__net_bind_socket(const struct cr_net_addr *a, int type, bool reuseport, bool v6only)
{
	int fd, one = 1, err;

	if (a == NULL || a->len == 0 ||
	    (a->u.sa.sa_family != AF_INET && a->u.sa.sa_family != AF_INET6))
		return -EINVAL;
	fd = socket(a->u.sa.sa_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* TCP only: on UDP it would let another socket steal the port's datagrams. */
	if (type == SOCK_STREAM &&
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0)
		goto out_close;
	if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0)
		goto out_close;
	if (a->u.sa.sa_family == AF_INET6 && v6only &&
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) != 0)
		goto out_close;
	if (bind(fd, &a->u.sa, a->len) != 0)
		goto out_close;
	return fd;

out_close:
	err = errno;
	close(fd);
	return -err;
}

int
cr__socket_bytes_received(int fd, uint64_t *out)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
		return -errno;
	/* Kernels before 4.1 return a shorter struct, without the field. */
	if (len < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof(ti.tcpi_bytes_received))
		return -ENOTSUP;
	*out = ti.tcpi_bytes_received;
	return 0;
}

/*
 * One owner per UDP address. Each lcore binds its own SO_REUSEPORT socket, and a socket
 * of another process (same uid) that set SO_REUSEPORT too would be joined just the same,
 * the kernel then splitting datagrams between the two. So the addresses this process
 * holds are counted here: the first bind of one probes it without SO_REUSEPORT
 * (EADDRINUSE: another holds it), the next ones are ours. Binds and releases are control
 * path, under the lock; the window left is the one of cr_tcp_listen()'s probe.
 */
#define UDP_OWNED_MAX 64

static pthread_mutex_t udp_owned_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	struct cr_net_addr a;
	unsigned n;
} udp_owned[UDP_OWNED_MAX];

static bool
same_addr(const struct cr_net_addr *x, const struct cr_net_addr *y)
{
	if (x->u.sa.sa_family != y->u.sa.sa_family)
		return false;
	if (x->u.sa.sa_family == AF_INET)
		return x->u.in4.sin_port == y->u.in4.sin_port &&
		       x->u.in4.sin_addr.s_addr == y->u.in4.sin_addr.s_addr;
	return x->u.in6.sin6_port == y->u.in6.sin6_port &&
	       memcmp(&x->u.in6.sin6_addr, &y->u.in6.sin6_addr, sizeof(struct in6_addr)) == 0 &&
	       x->u.in6.sin6_scope_id == y->u.in6.sin6_scope_id;
}

static int
udp_owned_find(const struct cr_net_addr *a)
{
	int i;

	for (i = 0; i < UDP_OWNED_MAX; i++)
		if (udp_owned[i].n > 0 && same_addr(&udp_owned[i].a, a))
			return i;
	return -1;
}

int
cr__udp_bind_owned(const struct cr_net_addr *a, bool reuseport, bool v6only, int *slot)
{
	struct cr_net_addr bound;
	int i, fd;

	*slot = -1;
	if (!reuseport || cr__net_share_addresses)
		return cr__net_bind_socket(a, SOCK_DGRAM, reuseport, v6only);
	pthread_mutex_lock(&udp_owned_lock);
	i = cr_net_addr_port(a) != 0 ? udp_owned_find(a) : -1;
	if (i < 0) {
		for (i = 0; i < UDP_OWNED_MAX && udp_owned[i].n > 0; i++)
			;
		/* Port 0 is the kernel's choice of a free port: nothing to probe. */
		fd = i == UDP_OWNED_MAX ? -ENOSPC : 0;
		if (fd == 0 && cr_net_addr_port(a) != 0) {
			fd = cr__net_bind_socket(a, SOCK_DGRAM, false, v6only);
			if (fd >= 0)
				close(fd);
		}
		if (fd < 0) {
			pthread_mutex_unlock(&udp_owned_lock);
			return fd;
		}
	}
	fd = cr__net_bind_socket(a, SOCK_DGRAM, true, v6only);
	bound.len = sizeof(bound.u);
	if (fd >= 0 && udp_owned[i].n == 0 && getsockname(fd, &bound.u.sa, &bound.len) != 0) {
		int err = errno;

		close(fd);
		fd = -err;
	}
	if (fd >= 0) {
		if (udp_owned[i].n == 0)
			udp_owned[i].a = bound; /* with the port the kernel chose */
		udp_owned[i].n++;
		*slot = i;
	}
	pthread_mutex_unlock(&udp_owned_lock);
	return fd;
}

void
cr__udp_release_owned(int slot)
{
	if (slot < 0)
		return;
	pthread_mutex_lock(&udp_owned_lock);
	udp_owned[slot].n--;
	pthread_mutex_unlock(&udp_owned_lock);
}
