/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Listeners (net_listen.c): one SO_REUSEPORT socket per lcore, the single-acceptor
 * hand-off, closing a listener, errors, the pause at max_conns that resumes when a slot
 * frees, and reclaimable connections closed, least recently active first, for new ones. (Out-of-descriptor back-off is driven by test/integration, with a low
 * ulimit -n and a connect flood, for both drivers.)
 */
#include <stddef.h>

#include "ut_net.h"

#define NCLIENTS 64

static struct {
	struct cr_listener *l;
	struct cr_net_addr addr;
	unsigned sockets;
	pthread_t client;
	_Atomic int opens, closes;
	_Atomic int per_lcore[CR_MAX_LCORES];
	_Atomic bool done;
	_Atomic bool closed_listener;
	int refused_after_close;
	bool echo_after_close;
	int listen_rc[5];
	int fds[NCLIENTS];
	bool single;
	int opens_at_limit, opens_after;
} T;

static void
t_open(struct cr_conn *c)
{
	atomic_fetch_add(&T.per_lcore[cr_conn_lcore(c)], 1);
	atomic_fetch_add(&T.opens, 1);
}

static void
t_data(struct cr_conn *c, const void *d, size_t n)
{
	CU_ASSERT_EQUAL(cr_conn_send(c, d, n), 0);
}

static void
t_close(struct cr_conn *c, int err)
{
	(void)c;
	(void)err;
	atomic_fetch_add(&T.closes, 1);
}

static const struct cr_conn_ops t_ops = {t_open, t_data, NULL, NULL, t_close};

static bool
t_finished(void *arg)
{
	(void)arg;
	if (!atomic_load(&T.done))
		return false;
	cr_reactor_stop();
	return true;
}

static struct ut_every every;

static void
t_start(void *(*client)(void *))
{
	struct cr_tcp_listen_opts o = ut_listen_opts(false);

	o.single_acceptor = T.single;
	CU_ASSERT_EQUAL_FATAL(cr_tcp_listen(&o, &t_ops, NULL, &T.l), 0);
	cr_listener_addr(T.l, &T.addr);
	T.sockets = cr_listener_sockets(T.l);
	CU_ASSERT_EQUAL(pthread_create(&T.client, NULL, client, NULL), 0);
	ut_every(&every, 2, t_finished, NULL);
}

static void *
client_many(void *arg)
{
	int i;

	(void)arg;
	for (i = 0; i < NCLIENTS; i++)
		T.fds[i] = ut_connect(&T.addr, 0);
	for (i = 0; i < NCLIENTS; i++) {
		char b[2] = {(char)i, 0};

		if (T.fds[i] < 0)
			continue;
		ut_write_all(T.fds[i], b, 2);
		CU_ASSERT_EQUAL(ut_read_n(T.fds[i], b, 2), 2);
		CU_ASSERT_EQUAL(b[0], (char)i);
		close(T.fds[i]);
	}
	while (atomic_load(&T.closes) < NCLIENTS)
		ut_sleep_ms(1);
	atomic_store(&T.done, true);
	return NULL;
}

static void
start_many(void *arg)
{
	(void)arg;
	t_start(client_many);
}

static void
test_socket_per_lcore(void)
{
	unsigned i, served = 0;

	memset(&T, 0, sizeof(T));
	ut_net_run(start_many, NULL, 20000);
	pthread_join(T.client, NULL);
	CU_ASSERT_EQUAL(T.sockets, ut_table.n);
	CU_ASSERT_EQUAL(atomic_load(&T.opens), NCLIENTS);
	for (i = 0; i < ut_table.n; i++)
		served += atomic_load(&T.per_lcore[ut_table.lcores[i].lcore_id]) > 0;
	/* The kernel hashes 64 connections over the sockets: every lcore gets some. */
	CU_ASSERT_EQUAL(served, ut_table.n);
}

static void
test_single_acceptor_round_robin(void)
{
	unsigned i;

	memset(&T, 0, sizeof(T));
	T.single = true;
	ut_net_run(start_many, NULL, 20000);
	pthread_join(T.client, NULL);
	CU_ASSERT_EQUAL(T.sockets, 1);
	CU_ASSERT_EQUAL(atomic_load(&T.opens), NCLIENTS);
	for (i = 0; i < ut_table.n; i++)
		CU_ASSERT_EQUAL(atomic_load(&T.per_lcore[ut_table.lcores[i].lcore_id]),
				NCLIENTS / (int)ut_table.n);
}

/* ---- closing a listener: new connections refused, accepted ones unaffected ---- */

static _Atomic unsigned close_done_on = UINT32_MAX - 1;

/* The completion: every socket is closed, so the port is free. */
static void
listener_closed(void *arg)
{
	(void)arg;
	atomic_store(&close_done_on, cr_lcore_id());
}

static void
close_listener(void *arg)
{
	(void)arg;
	cr_listener_close(T.l, listener_closed, NULL);
	cr_listener_close(NULL, NULL, NULL);
	atomic_store(&T.closed_listener, true);
}

static void *
client_close(void *arg)
{
	uint64_t t0;
	char b[4];
	int live, fd = -1;

	(void)arg;
	live = ut_connect(&T.addr, 0);
	CU_ASSERT_FATAL(live >= 0);
	/* Accepted first: one still in a socket's backlog is reset when that socket closes. */
	t0 = ut_ms();
	while (atomic_load(&T.opens) == 0 && ut_ms() - t0 < 3000)
		ut_sleep_ms(1);
	CU_ASSERT_EQUAL(cr_send(cr_lcore_main(), close_listener, NULL), 0);
	while (!atomic_load(&T.closed_listener))
		ut_sleep_ms(1);
	/* Each lcore closes its socket when the close message reaches it. */
	t0 = ut_ms();
	while (ut_ms() - t0 < 3000) {
		fd = ut_connect(&T.addr, 0);
		if (fd < 0) {
			T.refused_after_close = errno;
			break;
		}
		close(fd);
		ut_sleep_ms(5);
	}
	T.echo_after_close = ut_write_all(live, "live", 4) && ut_read_n(live, b, 4) == 4 &&
			     memcmp(b, "live", 4) == 0;
	t0 = ut_ms();
	while (atomic_load(&close_done_on) == UINT32_MAX - 1 && ut_ms() - t0 < 3000)
		ut_sleep_ms(1);
	close(live);
	while (atomic_load(&T.closes) < atomic_load(&T.opens))
		ut_sleep_ms(1);
	atomic_store(&T.done, true);
	return NULL;
}

static void
start_close(void *arg)
{
	(void)arg;
	t_start(client_close);
}

static void
test_close_listener(void)
{
	memset(&T, 0, sizeof(T));
	ut_net_run(start_close, NULL, 20000);
	pthread_join(T.client, NULL);
	CU_ASSERT_EQUAL(T.refused_after_close, ECONNREFUSED);
	CU_ASSERT_TRUE(T.echo_after_close);
	CU_ASSERT_EQUAL(atomic_load(&close_done_on), cr_lcore_main());
}

/* ---- errors ---- */

/* A socket of our own listening on @p o's address (SO_REUSEPORT or not); @p o gets the
 * port it was bound to. */
static int
hold_port(struct cr_tcp_listen_opts *o, bool reuseport)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (reuseport)
		CU_ASSERT_EQUAL(setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &(int){1}, sizeof(int)), 0);
	CU_ASSERT_EQUAL(bind(fd, &o->addr.u.sa, o->addr.len), 0);
	CU_ASSERT_EQUAL(listen(fd, 1), 0);
	o->addr.len = sizeof(o->addr.u);
	getsockname(fd, &o->addr.u.sa, &o->addr.len);
	return fd;
}

static void
errors(void *arg)
{
	struct cr_tcp_listen_opts o = ut_listen_opts(false);
	struct cr_listener *l = NULL;
	int fd;

	(void)arg;
	/* A port held by a socket without SO_REUSEPORT. */
	fd = hold_port(&o, false);
	T.listen_rc[0] = cr_tcp_listen(&o, &t_ops, NULL, &l);
	close(fd);
	o = ut_listen_opts(false);
	o.conn.high_watermark = 100;
	o.conn.low_watermark = 200;
	T.listen_rc[1] = cr_tcp_listen(&o, &t_ops, NULL, &l);
	o = ut_listen_opts(false);
	memset(&o.addr, 0, sizeof(o.addr));
	T.listen_rc[2] = cr_tcp_listen(&o, &t_ops, NULL, &l);
	o = ut_listen_opts(true);
	T.listen_rc[3] = cr_tcp_listen(&o, NULL, NULL, &l);
	/* One held with SO_REUSEPORT, as another process of ours would: the kernel would let
	 * us join its group and split the connections; one owner per address refuses it. */
	o = ut_listen_opts(false);
	fd = hold_port(&o, true);
	T.listen_rc[4] = cr_tcp_listen(&o, &t_ops, NULL, &l);
	close(fd);
	cr_reactor_stop();
}

static void
test_errors(void)
{
	memset(&T, 0, sizeof(T));
	ut_net_run(errors, NULL, 10000);
	CU_ASSERT_EQUAL(T.listen_rc[0], -EADDRINUSE);
	CU_ASSERT_EQUAL(T.listen_rc[1], -EINVAL);
	CU_ASSERT_EQUAL(T.listen_rc[2], -EINVAL);
	CU_ASSERT_EQUAL(T.listen_rc[3], -EINVAL);
	CU_ASSERT_EQUAL(T.listen_rc[4], -EADDRINUSE);
}

/* ---- the connection-slot limit: accepting pauses, then resumes ---- */

#define LIMIT 4
#define OVER 7

static void *
client_over_limit(void *arg)
{
	uint64_t t0;
	int i;

	(void)arg;
	for (i = 0; i < OVER; i++) {
		T.fds[i] = ut_connect(&T.addr, 0); /* the kernel's backlog takes them all */
		CU_ASSERT(T.fds[i] >= 0);
		ut_sleep_ms(5);
	}
	ut_sleep_ms(200);
	T.opens_at_limit = atomic_load(&T.opens);
	for (i = 0; i < OVER - LIMIT; i++)
		close(T.fds[i]); /* free slots: accepting resumes */
	t0 = ut_ms();
	while (atomic_load(&T.opens) < OVER && ut_ms() - t0 < 3000)
		ut_sleep_ms(1);
	T.opens_after = atomic_load(&T.opens);
	for (i = OVER - LIMIT; i < OVER; i++) {
		char b[1] = {'q'};

		CU_ASSERT_TRUE(ut_write_all(T.fds[i], b, 1) && ut_read_n(T.fds[i], b, 1) == 1);
		close(T.fds[i]);
	}
	while (atomic_load(&T.closes) < atomic_load(&T.opens))
		ut_sleep_ms(1);
	atomic_store(&T.done, true);
	return NULL;
}

static void
start_over(void *arg)
{
	(void)arg;
	t_start(client_over_limit);
}

static void
test_slot_limit_pauses_accept(void)
{
	struct cr_lcore_table full = ut_table;
	struct cr_net_config c, def;

	/* One lcore, so that every connection counts against the same slab. */
	ut_table.n = 1;
	ut_table.lcores[0] = full.lcores[0];
	ut_table.main_lcore = full.lcores[0].lcore_id;
	cr_net_config_defaults(&def);
	c = def;
	c.max_conns = LIMIT;
	CU_ASSERT_EQUAL_FATAL(cr_net_configure(&c), 0);
	memset(&T, 0, sizeof(T));
	ut_net_run(start_over, NULL, 20000);
	pthread_join(T.client, NULL);
	CU_ASSERT_EQUAL(UT_STAT(refused), 0);
	ut_table = full;
	CU_ASSERT_EQUAL(cr_net_configure(&def), 0);
	CU_ASSERT_EQUAL(T.opens_at_limit, LIMIT);
	CU_ASSERT_EQUAL(T.opens_after, OVER);
}

/* ---- reclaimable connections: a full lcore closes its least recently active idle one ---- */

#define RC_LIMIT 4
#define RC_CLIENTS 6

static struct {
	_Atomic int next;		  /* on_open order = connect order (one lcore) */
	_Atomic int close_err[RC_CLIENTS]; /* 1: still open */
	_Atomic bool busy[RC_CLIENTS];	  /* sent "B": a request half-read */
	_Atomic bool done;
	int fds[RC_CLIENTS];
} R;

static void
r_open(struct cr_conn *c)
{
	cr_conn_set_data(c, (void *)(intptr_t)atomic_fetch_add(&R.next, 1));
}

static void
r_data(struct cr_conn *c, const void *d, size_t n)
{
	int i = (int)(intptr_t)cr_conn_data(c);

	if (((const char *)d)[0] == 'B') {
		atomic_store(&R.busy[i], true); /* unanswered: not at a boundary */
		return;
	}
	if (((const char *)d)[0] == 'F')
		atomic_store(&R.busy[i], false); /* the rest of it: answered */
	CU_ASSERT_EQUAL(cr_conn_send(c, d, n), 0);
}

static void
r_close(struct cr_conn *c, int err)
{
	atomic_store(&R.close_err[(intptr_t)cr_conn_data(c)], err);
}

static bool
r_boundary(struct cr_conn *c)
{
	return !atomic_load(&R.busy[(intptr_t)cr_conn_data(c)]);
}

static const struct cr_conn_ops r_ops = {r_open, r_data, NULL, NULL, r_close, r_boundary};

static void
r_echo(int i, char ch)
{
	char b[1] = {ch};

	CU_ASSERT_TRUE(ut_write_all(R.fds[i], b, 1) && ut_read_n(R.fds[i], b, 1) == 1);
	CU_ASSERT_EQUAL(b[0], ch);
}

static void
r_connect(int i)
{
	uint64_t t0 = ut_ms();

	R.fds[i] = ut_connect(&T.addr, 0);
	CU_ASSERT(R.fds[i] >= 0);
	while (atomic_load(&R.next) <= i && ut_ms() - t0 < 3000)
		ut_sleep_ms(1);
	CU_ASSERT_EQUAL(atomic_load(&R.next), i + 1);
	ut_sleep_ms(30); /* so that each is active at a time of its own */
}

static void *
client_reclaim(void *arg)
{
	int i;

	(void)arg;
	r_connect(0); /* half a request: never closed to make room */
	CU_ASSERT_TRUE(ut_write_all(R.fds[0], "B", 1));
	ut_sleep_ms(30);
	r_connect(1); /* talked once, idle since: the first to go */
	r_echo(1, 'a');
	r_connect(2); /* active */
	r_echo(2, 'x');
	r_connect(3); /* idle: the next to go */
	ut_sleep_ms(30);
	r_echo(2, 'y'); /* the most recently active now: full, and nobody has left */
	for (i = 0; i < RC_LIMIT; i++)
		CU_ASSERT_EQUAL(atomic_load(&R.close_err[i]), 1);
	r_connect(4); /* makes room: 1 goes */
	r_echo(4, 'z');
	CU_ASSERT_EQUAL(atomic_load(&R.close_err[1]), -EUSERS);
	CU_ASSERT_EQUAL(atomic_load(&R.close_err[3]), 1);
	r_connect(5); /* makes room: 3 goes (0 is busy, 2 and 4 more recent) */
	r_echo(5, 'w');
	r_echo(2, 'v');
	CU_ASSERT_EQUAL(atomic_load(&R.close_err[3]), -EUSERS);
	CU_ASSERT_EQUAL(atomic_load(&R.close_err[0]), 1);
	CU_ASSERT_EQUAL(atomic_load(&R.close_err[2]), 1);
	for (i = 0; i < RC_CLIENTS; i++)
		close(R.fds[i]);
	atomic_store(&R.done, true);
	return NULL;
}

static bool
r_finished(void *arg)
{
	int i;

	(void)arg;
	if (!atomic_load(&R.done))
		return false;
	for (i = 0; i < RC_CLIENTS; i++)
		if (atomic_load(&R.close_err[i]) == 1)
			return false;
	cr_reactor_stop();
	return true;
}

/* Every slot busy when the newcomer arrives: it waits, and is served once one of them
 * has finished its request and gone idle. */
static void *
client_reclaim_later(void *arg)
{
	uint64_t t0;
	int i;

	(void)arg;
	for (i = 0; i < 2; i++) {
		r_connect(i);
		CU_ASSERT_TRUE(ut_write_all(R.fds[i], "B", 1));
	}
	ut_sleep_ms(30);
	R.fds[2] = ut_connect(&T.addr, 0);
	ut_sleep_ms(200);
	CU_ASSERT_EQUAL(atomic_load(&R.next), 2); /* nobody idle: it waits */
	r_echo(0, 'F');				   /* 0 is done and idle now */
	t0 = ut_ms();
	while (atomic_load(&R.next) < 3 && ut_ms() - t0 < 3000)
		ut_sleep_ms(1);
	CU_ASSERT_EQUAL(atomic_load(&R.next), 3);
	r_echo(2, 'z');
	CU_ASSERT_EQUAL(atomic_load(&R.close_err[0]), -EUSERS);
	CU_ASSERT_EQUAL(atomic_load(&R.close_err[1]), 1);
	for (i = 0; i < 3; i++)
		close(R.fds[i]);
	for (i = 3; i < RC_CLIENTS; i++)
		atomic_store(&R.close_err[i], 0); /* never connected */
	atomic_store(&R.done, true);
	return NULL;
}

static void
start_reclaim(void *arg)
{
	struct cr_tcp_listen_opts o = ut_listen_opts(false);

	o.conn.reclaimable = true;
	CU_ASSERT_EQUAL_FATAL(cr_tcp_listen(&o, &r_ops, NULL, &T.l), 0);
	cr_listener_addr(T.l, &T.addr);
	CU_ASSERT_EQUAL(pthread_create(&T.client, NULL, arg, NULL), 0);
	ut_every(&every, 2, r_finished, NULL);
}

/* One lcore with @p limit slots, @p client driving it; @return the reclaimed count. */
static uint64_t
reclaim_run(uint32_t limit, void *(*client)(void *))
{
	struct cr_lcore_table full = ut_table;
	struct cr_net_config c, def;
	uint64_t reclaimed;
	int i;

	ut_table.n = 1;
	ut_table.lcores[0] = full.lcores[0];
	ut_table.main_lcore = full.lcores[0].lcore_id;
	cr_net_config_defaults(&def);
	c = def;
	c.max_conns = limit;
	CU_ASSERT_EQUAL_FATAL(cr_net_configure(&c), 0);
	memset(&T, 0, sizeof(T));
	memset(&R, 0, sizeof(R));
	for (i = 0; i < RC_CLIENTS; i++)
		atomic_store(&R.close_err[i], 1);
	ut_net_run(start_reclaim, (void *)client, 20000);
	pthread_join(T.client, NULL);
	reclaimed = UT_STAT(reclaimed);
	CU_ASSERT_EQUAL(UT_STAT(refused), 0);
	ut_table = full;
	CU_ASSERT_EQUAL(cr_net_configure(&def), 0);
	return reclaimed;
}

static void
test_reclaim_idle(void)
{
	CU_ASSERT_EQUAL(reclaim_run(RC_LIMIT, client_reclaim), 2);
}

static void
test_reclaim_when_idle_later(void)
{
	CU_ASSERT_EQUAL(reclaim_run(2, client_reclaim_later), 1);
}

static const struct ut_case cases[] = {
	UT_CASE(test_socket_per_lcore),
	UT_CASE(test_single_acceptor_round_robin),
	UT_CASE(test_close_listener),
	UT_CASE(test_errors),
	UT_CASE(test_slot_limit_pauses_accept),
	UT_CASE(test_reclaim_idle),
	UT_CASE(test_reclaim_when_idle_later),
};

UT_MAIN("net_listen", cases, ut_rt_setup, NULL)
