/* SPDX-License-Identifier: BSD-3-Clause */
/* Creating and binding the sockets listeners and UDP sockets use (control path), and what
 * lib/net asks of a connected TCP socket. */
#include <errno.h>
#include <linux/tcp.h> /* the kernel's struct tcp_info: glibc's lacks tcpi_bytes_received */
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
