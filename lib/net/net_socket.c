/* SPDX-License-Identifier: BSD-3-Clause */
/* Creating and binding the sockets listeners and UDP sockets use. Control path. */
#include <errno.h>
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
