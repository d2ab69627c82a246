/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UDP sockets (net_udp.c): echo over IPv4 and IPv6 with datagrams up to the largest,
 * the send-slot and size limits, SO_REUSEPORT, and closing with receives posted or from
 * inside a callback (no callback afterwards; memory released after the final
 * completions, which ASan checks).
 */
#include <stddef.h>

#include "ut_net.h"

static struct {
	struct cr_udp *u;
	struct cr_net_addr addr;
	pthread_t client;
	_Atomic int datagrams, after_close, errors;
	_Atomic bool done, closed;
	int rc[8];
	bool ok;
	bool v6;
	bool close_in_cb;
} T;

static void
u_datagram(struct cr_udp *u, const void *d, size_t n, const struct cr_net_addr *from)
{
	if (atomic_load(&T.closed))
		atomic_fetch_add(&T.after_close, 1);
	atomic_fetch_add(&T.datagrams, 1);
	CU_ASSERT_PTR_EQUAL(cr_udp_arg(u), &T);
	CU_ASSERT(from->len != 0);
	if (T.close_in_cb) {
		cr_udp_close(u);
		atomic_store(&T.closed, true);
		return;
	}
	CU_ASSERT_EQUAL(cr_udp_send(u, d, n, from), 0);
}

static void
u_error(struct cr_udp *u, int err)
{
	(void)u;
	(void)err;
	atomic_fetch_add(&T.errors, 1);
}

static const struct cr_udp_ops u_ops = {u_datagram, u_error};

static bool
finished(void *arg)
{
	(void)arg;
	if (!atomic_load(&T.done))
		return false;
	cr_reactor_stop();
	return true;
}

static struct ut_every every;

static void *
client_echo(void *arg)
{
	static const size_t sizes[] = {1, 100, 1400, 9000, 65507};
	static uint8_t out[65536], in[65536];
	struct timeval tv = {5, 0};
	struct cr_net_addr from;
	unsigned i;
	int fd;

	(void)arg;
	fd = socket(T.addr.u.sa.sa_family, SOCK_DGRAM, 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	T.ok = fd >= 0;
	for (i = 0; T.ok && i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		ssize_t r;

		ut_fill_seeded(out, sizes[i], i);
		r = sendto(fd, out, sizes[i], 0, &T.addr.u.sa, T.addr.len);
		T.ok = r == (ssize_t)sizes[i];
		from.len = sizeof(from.u);
		r = recvfrom(fd, in, sizeof(in), 0, &from.u.sa, &from.len);
		T.ok = T.ok && r == (ssize_t)sizes[i] && memcmp(in, out, sizes[i]) == 0 &&
		       cr_net_addr_port(&from) == cr_net_addr_port(&T.addr);
	}
	close(fd);
	atomic_store(&T.done, true);
	return NULL;
}

static void
start_echo(void *arg)
{
	struct cr_net_addr a;

	(void)arg;
	CU_ASSERT_EQUAL(cr_net_addr_parse(T.v6 ? "[::1]:0" : "127.0.0.1:0", &a), 0);
	T.u = cr_udp_bind(&a, NULL, &u_ops, &T);
	CU_ASSERT_PTR_NOT_NULL_FATAL(T.u);
	CU_ASSERT_EQUAL(cr_udp_addr(T.u, &T.addr), 0);
	CU_ASSERT_NOT_EQUAL(cr_net_addr_port(&T.addr), 0);
	CU_ASSERT_EQUAL(pthread_create(&T.client, NULL, client_echo, NULL), 0);
	ut_every(&every, 2, finished, NULL);
}

static void
run_echo(bool v6)
{
	memset(&T, 0, sizeof(T));
	T.v6 = v6;
	ut_net_run(start_echo, NULL, 10000);
	pthread_join(T.client, NULL);
	CU_ASSERT_TRUE(T.ok);
	CU_ASSERT_EQUAL(atomic_load(&T.datagrams), 5);
	CU_ASSERT(UT_STAT(udp_out) >= 5);
}

static void
test_echo_v4(void)
{
	run_echo(false);
}

static void
test_echo_v6(void)
{
	run_echo(true);
}

/* ---- limits and errors ---- */

static void
start_limits(void *arg)
{
	static uint8_t big[2049];
	struct cr_udp_opts o = {.max_datagram = 2048, .recv_depth = 1, .send_depth = 1};
	struct cr_net_addr a, to;
	struct cr_udp *u, *u2, *u3;

	(void)arg;
	CU_ASSERT_EQUAL(cr_net_addr_parse("127.0.0.1:0", &a), 0);
	u = cr_udp_bind(&a, &o, &u_ops, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(u);
	CU_ASSERT_EQUAL(cr_udp_addr(u, &to), 0);
	/* One send slot: the second send waits for nothing, it is refused. */
	T.rc[0] = cr_udp_send(u, big, 10, &to);
	T.rc[1] = cr_udp_send(u, big, 10, &to);
	T.rc[2] = cr_udp_send(u, big, sizeof(big), &to);
	T.rc[3] = cr_udp_send(u, big, 10, NULL);
	/* The port is taken by a socket without SO_REUSEPORT. */
	errno = 0;
	CU_ASSERT_PTR_NULL(cr_udp_bind(&to, NULL, &u_ops, NULL));
	T.rc[4] = errno;
	errno = 0;
	CU_ASSERT_PTR_NULL(cr_udp_bind(NULL, NULL, &u_ops, NULL));
	T.rc[5] = errno;
	o.max_datagram = (1u << 20) + 1;
	errno = 0;
	CU_ASSERT_PTR_NULL(cr_udp_bind(&a, &o, &u_ops, NULL));
	T.rc[6] = errno;
	/* SO_REUSEPORT on both: one port, two sockets (one per lcore in an app). */
	o = (struct cr_udp_opts){.reuseport = true};
	u2 = cr_udp_bind(&a, &o, &u_ops, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(u2);
	CU_ASSERT_EQUAL(cr_udp_addr(u2, &to), 0);
	u3 = cr_udp_bind(&to, &o, &u_ops, NULL);
	T.rc[7] = u3 != NULL;
	/* Closed with receives (and a send) posted: freed after their final completions. */
	cr_udp_close(u);
	cr_udp_close(u2);
	cr_udp_close(u3);
	cr_udp_close(NULL);
	cr_reactor_stop();
}

static void
test_limits_and_errors(void)
{
	memset(&T, 0, sizeof(T));
	ut_net_run(start_limits, NULL, 10000);
	CU_ASSERT_EQUAL(T.rc[0], 0);
	CU_ASSERT_EQUAL(T.rc[1], -ENOBUFS);
	CU_ASSERT_EQUAL(T.rc[2], -EMSGSIZE);
	CU_ASSERT_EQUAL(T.rc[3], -EINVAL);
	CU_ASSERT_EQUAL(T.rc[4], EADDRINUSE);
	CU_ASSERT_EQUAL(T.rc[5], EINVAL);
	CU_ASSERT_EQUAL(T.rc[6], EINVAL);
	CU_ASSERT_EQUAL(T.rc[7], 1);
}

/* ---- close from inside a callback ---- */

static void *
client_spray(void *arg)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0), i;

	(void)arg;
	for (i = 0; i < 20; i++) {
		sendto(fd, "spray", 5, 0, &T.addr.u.sa, T.addr.len);
		ut_sleep_ms(1);
	}
	ut_sleep_ms(50);
	close(fd);
	atomic_store(&T.done, true);
	return NULL;
}

static void
start_close_in_cb(void *arg)
{
	struct cr_net_addr a;

	(void)arg;
	T.close_in_cb = true;
	CU_ASSERT_EQUAL(cr_net_addr_parse("127.0.0.1:0", &a), 0);
	T.u = cr_udp_bind(&a, NULL, &u_ops, &T);
	CU_ASSERT_PTR_NOT_NULL_FATAL(T.u);
	CU_ASSERT_EQUAL(cr_udp_addr(T.u, &T.addr), 0);
	CU_ASSERT_EQUAL(pthread_create(&T.client, NULL, client_spray, NULL), 0);
	ut_every(&every, 2, finished, NULL);
}

static void
test_close_in_callback(void)
{
	memset(&T, 0, sizeof(T));
	ut_net_run(start_close_in_cb, NULL, 10000);
	pthread_join(T.client, NULL);
	/* Posted receives may each have held a datagram; the first closes the socket and
	 * the others are dropped without a callback. */
	CU_ASSERT_EQUAL(atomic_load(&T.datagrams), 1);
	CU_ASSERT_EQUAL(atomic_load(&T.after_close), 0);
}

static const struct ut_case cases[] = {
	UT_CASE(test_echo_v4),
	UT_CASE(test_echo_v6),
	UT_CASE(test_limits_and_errors),
	UT_CASE(test_close_in_callback),
};

UT_MAIN("net_udp", cases, ut_rt_setup, NULL)
