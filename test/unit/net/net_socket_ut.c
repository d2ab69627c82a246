/* SPDX-License-Identifier: BSD-3-Clause */
/* Creating and binding sockets (net_socket.c): options, errors, reuseport. */
#include <fcntl.h>

#include "net_internal.h"
#include "ut_net.h"

static int
opt(int fd, int level, int name)
{
	int v = -1;
	socklen_t len = sizeof(v);

	CU_ASSERT_EQUAL(getsockopt(fd, level, name, &v, &len), 0);
	return v;
}

static uint16_t
bound_port(int fd)
{
	struct cr_net_addr a = {.len = sizeof(a.u)};

	CU_ASSERT_EQUAL(getsockname(fd, &a.u.sa, &a.len), 0);
	return cr_net_addr_port(&a);
}

static void
test_tcp_reuseport(void)
{
	struct cr_net_addr a;
	int fd1, fd2, fd3;

	CU_ASSERT_EQUAL(cr_net_addr_parse("127.0.0.1:0", &a), 0);
	fd1 = cr__net_bind_socket(&a, SOCK_STREAM, true, false);
	CU_ASSERT_FATAL(fd1 >= 0);
	CU_ASSERT_EQUAL(opt(fd1, SOL_SOCKET, SO_REUSEPORT), 1);
	CU_ASSERT_EQUAL(opt(fd1, SOL_SOCKET, SO_REUSEADDR), 1);
	CU_ASSERT(fcntl(fd1, F_GETFL) & O_NONBLOCK);
	CU_ASSERT(fcntl(fd1, F_GETFD) & FD_CLOEXEC);
	CU_ASSERT_EQUAL(listen(fd1, 4), 0);
	a.u.in4.sin_port = htons(bound_port(fd1));
	/* Same port: fine with SO_REUSEPORT on both, refused without. */
	fd2 = cr__net_bind_socket(&a, SOCK_STREAM, true, false);
	CU_ASSERT(fd2 >= 0);
	CU_ASSERT_EQUAL(listen(fd2, 4), 0);
	fd3 = cr__net_bind_socket(&a, SOCK_STREAM, false, false);
	CU_ASSERT_EQUAL(fd3, -EADDRINUSE);
	close(fd1);
	close(fd2);
}

static void
test_udp_and_v6(void)
{
	struct cr_net_addr a;
	int fd;

	CU_ASSERT_EQUAL(cr_net_addr_parse("127.0.0.1:0", &a), 0);
	fd = cr__net_bind_socket(&a, SOCK_DGRAM, false, false);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(opt(fd, SOL_SOCKET, SO_REUSEADDR), 0); /* never on UDP */
	CU_ASSERT_EQUAL(opt(fd, SOL_SOCKET, SO_TYPE), SOCK_DGRAM);
	close(fd);
	CU_ASSERT_EQUAL(cr_net_addr_parse("[::1]:0", &a), 0);
	fd = cr__net_bind_socket(&a, SOCK_STREAM, false, true);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(opt(fd, IPPROTO_IPV6, IPV6_V6ONLY), 1);
	close(fd);
}

static void
test_errors(void)
{
	struct cr_net_addr a;

	memset(&a, 0, sizeof(a));
	CU_ASSERT_EQUAL(cr__net_bind_socket(NULL, SOCK_STREAM, false, false), -EINVAL);
	CU_ASSERT_EQUAL(cr__net_bind_socket(&a, SOCK_STREAM, false, false), -EINVAL);
	/* An address this host does not have. */
	CU_ASSERT_EQUAL(cr_net_addr_parse("192.0.2.1:0", &a), 0);
	CU_ASSERT_EQUAL(cr__net_bind_socket(&a, SOCK_STREAM, false, false), -EADDRNOTAVAIL);
}

static const struct ut_case cases[] = {
	UT_CASE(test_tcp_reuseport),
	UT_CASE(test_udp_and_v6),
	UT_CASE(test_errors),
};

UT_MAIN("net_socket", cases, ut_rt_setup, NULL)
