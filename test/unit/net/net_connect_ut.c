/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Outbound connections (net_connect.c), lib/net on both ends: echo over IPv4 and IPv6
 * with bytes queued before the connect completes, refused, timed out, destroyed while
 * connecting, and the argument and slot errors.
 */
#include <fcntl.h>
#include <stddef.h>

#include "ut_net.h"

static struct {
	struct cr_listener *l;
	struct cr_net_addr addr;
	struct cr_conn *c;
	int opens, closes, close_err;
	char got[64];
	size_t ngot;
	uint64_t t0, took_ms;
	int pre_rc;
	int errs[4];
	int full_fd, filler[8];
	bool v6;
	bool destroyed;
} T;

/* Server side: echo. */
static void
s_data(struct cr_conn *c, const void *d, size_t n)
{
	CU_ASSERT_EQUAL(cr_conn_send(c, d, n), 0);
}

static const struct cr_conn_ops s_ops = {NULL, s_data, NULL, NULL, NULL};

/* Client side, on the main lcore. */
static void
c_open(struct cr_conn *c)
{
	CU_ASSERT_FALSE(T.destroyed);
	T.opens++;
	CU_ASSERT_EQUAL(cr_conn_send(c, "hello", 5), 0);
}

static void
c_data(struct cr_conn *c, const void *d, size_t n)
{
	CU_ASSERT_FATAL(T.ngot + n <= sizeof(T.got));
	memcpy(T.got + T.ngot, d, n);
	T.ngot += n;
	if (T.ngot == 8)
		cr_conn_close(c);
}

static void
c_close(struct cr_conn *c, int err)
{
	(void)c;
	CU_ASSERT_FALSE(T.destroyed);
	T.closes++;
	T.close_err = err;
	T.took_ms = ut_ms() - T.t0;
	cr_reactor_stop();
}

static const struct cr_conn_ops c_ops = {c_open, c_data, NULL, NULL, c_close};

static void
start_echo(void *arg)
{
	struct cr_tcp_listen_opts o = ut_listen_opts(T.v6);

	(void)arg;
	CU_ASSERT_EQUAL_FATAL(cr_tcp_listen(&o, &s_ops, NULL, &T.l), 0);
	cr_listener_addr(T.l, &T.addr);
	T.c = cr_tcp_connect(&T.addr, 1000000000ull, NULL, &c_ops, &T);
	CU_ASSERT_PTR_NOT_NULL_FATAL(T.c);
	CU_ASSERT_PTR_EQUAL(cr_conn_arg(T.c), &T);
	CU_ASSERT_EQUAL(cr_conn_lcore(T.c), cr_lcore_id());
	/* Queued before the connection exists: sent first, once connected. */
	T.pre_rc = cr_conn_send(T.c, "pre", 3);
}

static void
run_echo(bool v6)
{
	memset(&T, 0, sizeof(T));
	T.v6 = v6;
	ut_net_run(start_echo, NULL, 10000);
	CU_ASSERT_EQUAL(T.pre_rc, 0);
	CU_ASSERT_EQUAL(T.opens, 1);
	CU_ASSERT_EQUAL(T.closes, 1);
	CU_ASSERT_EQUAL(T.close_err, 0);
	CU_ASSERT_EQUAL(T.ngot, 8);
	CU_ASSERT_EQUAL(memcmp(T.got, "prehello", 8), 0);
	CU_ASSERT(UT_STAT(connected) >= 1);
}

static void
test_connect_echo_v4(void)
{
	run_echo(false);
}

static void
test_connect_echo_v6(void)
{
	run_echo(true);
}

/* ---- failures ---- */

static void
start_refused(void *arg)
{
	struct cr_net_addr a;
	int fd;

	(void)arg;
	/* A port that was just free: nothing listens there. */
	fd = socket(AF_INET, SOCK_STREAM, 0);
	CU_ASSERT_EQUAL(cr_net_addr_parse("127.0.0.1:0", &a), 0);
	CU_ASSERT_EQUAL(bind(fd, &a.u.sa, a.len), 0);
	a.len = sizeof(a.u);
	getsockname(fd, &a.u.sa, &a.len);
	close(fd);
	T.t0 = ut_ms();
	CU_ASSERT_PTR_NOT_NULL(cr_tcp_connect(&a, 0, NULL, &c_ops, NULL));
}

static void
test_connect_refused(void)
{
	memset(&T, 0, sizeof(T));
	ut_net_run(start_refused, NULL, 10000);
	CU_ASSERT_EQUAL(T.opens, 0);
	CU_ASSERT_EQUAL(T.closes, 1);
	CU_ASSERT_EQUAL(T.close_err, -ECONNREFUSED);
}

/* A listener whose accept queue is full and never drained: SYNs are dropped. */
static void
fill_backlog(void)
{
	unsigned i;

	T.full_fd = socket(AF_INET, SOCK_STREAM, 0);
	CU_ASSERT_EQUAL(cr_net_addr_parse("127.0.0.1:0", &T.addr), 0);
	CU_ASSERT_EQUAL(bind(T.full_fd, &T.addr.u.sa, T.addr.len), 0);
	CU_ASSERT_EQUAL(listen(T.full_fd, 0), 0);
	T.addr.len = sizeof(T.addr.u);
	getsockname(T.full_fd, &T.addr.u.sa, &T.addr.len);
	for (i = 0; i < 8; i++) {
		T.filler[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		connect(T.filler[i], &T.addr.u.sa, T.addr.len);
	}
	ut_sleep_ms(50);
}

static void
unfill_backlog(void)
{
	unsigned i;

	for (i = 0; i < 8; i++)
		close(T.filler[i]);
	close(T.full_fd);
}

static void
start_timeout(void *arg)
{
	(void)arg;
	fill_backlog();
	T.t0 = ut_ms();
	CU_ASSERT_PTR_NOT_NULL(cr_tcp_connect(&T.addr, 200000000ull, NULL, &c_ops, NULL));
}

static void
test_connect_timeout(void)
{
	memset(&T, 0, sizeof(T));
	ut_net_run(start_timeout, NULL, 10000);
	unfill_backlog();
	CU_ASSERT_EQUAL(T.opens, 0);
	CU_ASSERT_EQUAL(T.closes, 1);
	CU_ASSERT_EQUAL(T.close_err, -ETIMEDOUT);
	CU_ASSERT(T.took_ms >= 150);
	CU_ASSERT(T.took_ms < 2000);
}

static bool
slots_free(void *arg)
{
	(void)arg;
	if (UT_STAT(conns) != 0)
		return false;
	cr_reactor_stop();
	return true;
}

static struct ut_every every;

static void
start_destroy_pending(void *arg)
{
	struct cr_conn *c;

	(void)arg;
	fill_backlog();
	c = cr_tcp_connect(&T.addr, 0, NULL, &c_ops, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_EQUAL(cr_conn_send(c, "x", 1), 0);
	cr_conn_destroy(c);
	T.destroyed = true;
	ut_every(&every, 2, slots_free, NULL);
}

static void
test_destroy_while_connecting(void)
{
	memset(&T, 0, sizeof(T));
	ut_net_run(start_destroy_pending, NULL, 10000);
	unfill_backlog();
	CU_ASSERT_EQUAL(T.opens, 0);
	CU_ASSERT_EQUAL(T.closes, 0);
}

static void
start_errors(void *arg)
{
	struct cr_net_addr a;
	struct cr_conn *c;

	(void)arg;
	memset(&a, 0, sizeof(a));
	errno = 0;
	CU_ASSERT_PTR_NULL(cr_tcp_connect(&a, 0, NULL, &c_ops, NULL));
	T.errs[0] = errno;
	CU_ASSERT_EQUAL(cr_net_addr_parse("127.0.0.1:9", &a), 0);
	errno = 0;
	CU_ASSERT_PTR_NULL(cr_tcp_connect(&a, 0, NULL, NULL, NULL));
	T.errs[1] = errno;
	/* max_conns is 1 here: the second has no slot. */
	fill_backlog();
	c = cr_tcp_connect(&T.addr, 0, NULL, &c_ops, NULL);
	CU_ASSERT_PTR_NOT_NULL(c);
	errno = 0;
	CU_ASSERT_PTR_NULL(cr_tcp_connect(&T.addr, 0, NULL, &c_ops, NULL));
	T.errs[2] = errno;
	T.destroyed = true;
	cr_conn_destroy(c);
	cr_reactor_stop();
}

static void
test_errors(void)
{
	struct cr_net_config nc, def;

	memset(&T, 0, sizeof(T));
	cr_net_config_defaults(&def);
	nc = def;
	nc.max_conns = 1;
	CU_ASSERT_EQUAL_FATAL(cr_net_configure(&nc), 0);
	ut_net_run(start_errors, NULL, 10000);
	unfill_backlog();
	CU_ASSERT_EQUAL(cr_net_configure(&def), 0);
	CU_ASSERT_EQUAL(T.errs[0], EINVAL);
	CU_ASSERT_EQUAL(T.errs[1], EINVAL);
	CU_ASSERT_EQUAL(T.errs[2], EMFILE);
	CU_ASSERT_EQUAL(T.closes, 0);
}

static const struct ut_case cases[] = {
	UT_CASE(test_connect_echo_v4),
	UT_CASE(test_connect_echo_v6),
	UT_CASE(test_connect_refused),
	UT_CASE(test_connect_timeout),
	UT_CASE(test_destroy_while_connecting),
	UT_CASE(test_errors),
};

UT_MAIN("net_connect", cases, ut_rt_setup, NULL)
