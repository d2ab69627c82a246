/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Connections (net_conn.c) on the real runtime and driver: callbacks and their order,
 * half-close, graceful close, destroy with ops in flight (no callback after it, slot and
 * chunks held until the final completions), backpressure, -ENOBUFS, idle timeout, peer
 * reset, read stop/start. A client thread drives each scenario with blocking sockets.
 */
#include <stddef.h>

#include "ut_net.h"

#define BIG (8u << 20)

/* One scenario's shared state: callbacks on lcores, the client on its own thread. */
struct sc {
	struct cr_listener *l;
	struct cr_net_addr addr;
	pthread_t client;
	bool client_started;
	_Atomic int opens, closes, datas, drains, eofs;
	_Atomic int close_err;
	_Atomic size_t bytes;
	_Atomic bool client_done;
	_Atomic bool destroyed;
	_Atomic int after_destroy; /* callbacks that came after cr_conn_destroy() */
	_Atomic(struct cr_conn *) conn;
	_Atomic unsigned conn_lcore;
	_Atomic bool in_api;	   /* an app call is on the stack */
	_Atomic int cb_in_api;	   /* on_close ran inside an app call */
	_Atomic size_t max_queued;
	_Atomic int nodelay;
	int rc_send_after_shut;
	int rc_nobufs;
	size_t queued_after_nobufs;
	uint64_t slots_after_destroy, chunks_after_destroy, chunks_total;
	struct ut_every every;
	void *(*client_fn)(void *);
	struct cr_conn_opts copts;
	const struct cr_conn_ops *ops;
	uint8_t *buf;
	size_t client_got;
	bool client_ok;
	int client_eof;
};

static struct sc S;
static uint8_t payload[BIG];

static void
sc_reset(void)
{
	memset(&S, 0, sizeof(S));
	atomic_store(&S.close_err, 1);
	ut_fill_seeded(payload, sizeof(payload), 7);
}

static void
note_cb(void)
{
	if (atomic_load(&S.destroyed))
		atomic_fetch_add(&S.after_destroy, 1);
}

static void
on_open(struct cr_conn *c)
{
	int v = -1;
	socklen_t len = sizeof(v);

	note_cb();
	getsockopt(cr_conn_fd(c), IPPROTO_TCP, TCP_NODELAY, &v, &len);
	atomic_store(&S.nodelay, v);
	atomic_fetch_add(&S.opens, 1);
	atomic_store(&S.conn, c);
	atomic_store(&S.conn_lcore, cr_conn_lcore(c));
}

static void
on_data_echo(struct cr_conn *c, const void *d, size_t n)
{
	size_t q;

	note_cb();
	atomic_fetch_add(&S.datas, 1);
	atomic_fetch_add(&S.bytes, n);
	CU_ASSERT_EQUAL(cr_conn_send(c, d, n), 0);
	q = cr_conn_queued(c);
	if (q > atomic_load(&S.max_queued))
		atomic_store(&S.max_queued, q);
}

static void
on_data_count(struct cr_conn *c, const void *d, size_t n)
{
	(void)c;
	(void)d;
	note_cb();
	atomic_fetch_add(&S.datas, 1);
	atomic_fetch_add(&S.bytes, n);
}

static void
on_drain(struct cr_conn *c)
{
	note_cb();
	CU_ASSERT_TRUE(cr_conn_writable(c));
	atomic_fetch_add(&S.drains, 1);
}

static void
on_close(struct cr_conn *c, int err)
{
	(void)c;
	note_cb();
	if (atomic_load(&S.in_api))
		atomic_fetch_add(&S.cb_in_api, 1);
	atomic_store(&S.close_err, err);
	atomic_fetch_add(&S.closes, 1);
}

static void
on_eof_count(struct cr_conn *c)
{
	note_cb();
	atomic_fetch_add(&S.eofs, 1);
	atomic_store(&S.in_api, true);
	CU_ASSERT_EQUAL(cr_conn_shutdown_write(c), 0);
	atomic_store(&S.in_api, false);
}

static bool (*sc_cond)(void);

static bool
sc_check(void *arg)
{
	(void)arg;
	if (!atomic_load(&S.client_done) || !sc_cond())
		return false;
	cr_reactor_stop();
	return true;
}

static void
sc_start(void *arg)
{
	struct cr_tcp_listen_opts o = ut_listen_opts(false);

	(void)arg;
	o.conn = S.copts;
	CU_ASSERT_EQUAL_FATAL(cr_tcp_listen(&o, S.ops, &S, &S.l), 0);
	cr_listener_addr(S.l, &S.addr);
	CU_ASSERT_NOT_EQUAL(cr_net_addr_port(&S.addr), 0);
	CU_ASSERT_EQUAL(pthread_create(&S.client, NULL, S.client_fn, NULL), 0);
	S.client_started = true;
	ut_every(&S.every, 2, sc_check, NULL);
}

static void
sc_run(const struct cr_conn_ops *ops, void *(*client)(void *), bool (*cond)(void),
       unsigned ms)
{
	S.ops = ops;
	S.client_fn = client;
	sc_cond = cond;
	ut_net_run(sc_start, NULL, ms);
	if (S.client_started)
		pthread_join(S.client, NULL);
}

static bool
one_close(void)
{
	return atomic_load(&S.closes) == 1;
}

/* ---- echo, callback order, half-close ---- */

static void *
client_echo(void *arg)
{
	static uint8_t back[65536];
	int fd = ut_connect(&S.addr, 0);

	(void)arg;
	if (fd >= 0) {
		S.client_ok = ut_write_all(fd, payload, sizeof(back));
		shutdown(fd, SHUT_WR);
		S.client_got = ut_read_n(fd, back, sizeof(back));
		S.client_eof = ut_wait_eof(fd);
		S.client_ok = S.client_ok && memcmp(back, payload, sizeof(back)) == 0;
		close(fd);
	}
	atomic_store(&S.client_done, true);
	return NULL;
}

static void
test_echo_half_close(void)
{
	static const struct cr_conn_ops ops = {on_open, on_data_echo, NULL, on_drain, on_close};

	sc_reset();
	sc_run(&ops, client_echo, one_close, 10000);
	CU_ASSERT_EQUAL(S.client_got, 65536);
	CU_ASSERT_TRUE(S.client_ok);
	CU_ASSERT_EQUAL(S.client_eof, 0);
	CU_ASSERT_EQUAL(atomic_load(&S.opens), 1);
	CU_ASSERT_EQUAL(atomic_load(&S.closes), 1);
	CU_ASSERT_EQUAL(atomic_load(&S.close_err), 0);
	CU_ASSERT_EQUAL(atomic_load(&S.bytes), 65536);
	CU_ASSERT_EQUAL(atomic_load(&S.nodelay), 1); /* TCP_NODELAY by default */
}

/* on_eof given: the app shuts its side itself; no on_close inside that call. */
static void
test_on_eof_app_shutdown(void)
{
	static const struct cr_conn_ops ops = {on_open, on_data_echo, on_eof_count, NULL,
					       on_close};

	sc_reset();
	sc_run(&ops, client_echo, one_close, 10000);
	CU_ASSERT_TRUE(S.client_ok);
	CU_ASSERT_EQUAL(S.client_eof, 0);
	CU_ASSERT_EQUAL(atomic_load(&S.eofs), 1);
	CU_ASSERT_EQUAL(atomic_load(&S.close_err), 0);
	CU_ASSERT_EQUAL(atomic_load(&S.cb_in_api), 0);
}

static void
test_nagle_option(void)
{
	static const struct cr_conn_ops ops = {on_open, on_data_echo, NULL, NULL, on_close};

	sc_reset();
	S.copts.nagle = true;
	sc_run(&ops, client_echo, one_close, 10000);
	CU_ASSERT_TRUE(S.client_ok);
	CU_ASSERT_EQUAL(atomic_load(&S.nodelay), 0);
}

/* ---- destroy with ops in flight ---- */

static void
destroy_now(void *arg)
{
	struct cr_conn *c = atomic_load(&S.conn);
	unsigned me = cr_lcore_id();
	struct cr_net_stats st;

	(void)arg;
	CU_ASSERT_EQUAL(cr_conn_lcore(c), me);
	/* A recv armed and a send stuck on a peer that does not read: both in the kernel. */
	CU_ASSERT(cr_conn_queued(c) > 0);
	cr_conn_destroy(c);
	atomic_store(&S.destroyed, true);
	cr_net_stats(me, &st);
	S.slots_after_destroy = st.conns;
	S.chunks_after_destroy = st.chunks_free;
}

static void
on_open_flood(struct cr_conn *c)
{
	size_t i;

	on_open(c);
	for (i = 0; i < BIG; i += 65536)
		CU_ASSERT_EQUAL(cr_conn_send(c, payload + i, 65536), 0);
}

static void *
client_no_read(void *arg)
{
	int fd = ut_connect(&S.addr, 4096);
	uint64_t t0 = ut_ms();

	(void)arg;
	if (fd >= 0) {
		ut_write_all(fd, "ping", 4);
		/* Let the server's sends block on our full window, then have it destroyed. */
		while (atomic_load(&S.conn) == NULL && ut_ms() - t0 < 3000)
			ut_sleep_ms(1);
		ut_sleep_ms(50);
		CU_ASSERT_EQUAL(cr_send(atomic_load(&S.conn_lcore), destroy_now, NULL), 0);
		while (!atomic_load(&S.destroyed) && ut_ms() - t0 < 3000)
			ut_sleep_ms(1);
		/* More data after the destroy must reach no callback. */
		ut_write_all(fd, "more", 4);
		/* The socket closes once the cancelled ops have completed: drain until then. */
		{
			static uint8_t sink[65536];
			ssize_t r;

			while ((r = recv(fd, sink, sizeof(sink), 0)) > 0)
				;
			S.client_eof = r == 0 ? 0 : -1;
		}
		close(fd);
	}
	atomic_store(&S.client_done, true);
	return NULL;
}

static bool
slot_back(void)
{
	return atomic_load(&S.destroyed) && UT_STAT(conns) == 0 &&
	       UT_STAT(chunks_free) == S.chunks_total;
}

static void
test_destroy_with_ops_in_flight(void)
{
	static const struct cr_conn_ops ops = {on_open_flood, on_data_count, NULL, on_drain,
					       on_close};
	struct cr_net_config nc;

	sc_reset();
	cr_net_config_defaults(&nc);
	S.chunks_total = (uint64_t)nc.chunks * ut_table.n;
	sc_run(&ops, client_no_read, slot_back, 15000);
	CU_ASSERT_TRUE(atomic_load(&S.destroyed));
	CU_ASSERT_EQUAL(atomic_load(&S.after_destroy), 0);
	CU_ASSERT_EQUAL(atomic_load(&S.closes), 0);
	/* Right after the destroy the slot and the queued chunks were still held: the kernel
	 * could still read them until the cancelled send's final completion. */
	CU_ASSERT_EQUAL(S.slots_after_destroy, 1);
	CU_ASSERT(S.chunks_after_destroy < S.chunks_total / ut_table.n);
	CU_ASSERT_EQUAL(S.client_eof != -2, true);
}

/* Destroy from inside on_data, with the multishot recv still armed. */
static void
on_data_destroy(struct cr_conn *c, const void *d, size_t n)
{
	on_data_count(c, d, n);
	if (!atomic_load(&S.destroyed)) {
		cr_conn_destroy(c);
		cr_conn_destroy(c); /* idempotent until the slot is reused */
		atomic_store(&S.destroyed, true);
	}
}

static void *
client_trickle(void *arg)
{
	int fd = ut_connect(&S.addr, 0), i;

	(void)arg;
	if (fd >= 0) {
		for (i = 0; i < 10; i++) {
			if (!ut_write_all(fd, "0123456789", 10))
				break;
			ut_sleep_ms(2);
		}
		S.client_eof = ut_wait_eof(fd);
		close(fd);
	}
	atomic_store(&S.client_done, true);
	return NULL;
}

static bool
destroyed_and_free(void)
{
	return atomic_load(&S.destroyed) && UT_STAT(conns) == 0;
}

static void
test_destroy_in_on_data(void)
{
	static const struct cr_conn_ops ops = {on_open, on_data_destroy, NULL, NULL, on_close};

	sc_reset();
	sc_run(&ops, client_trickle, destroyed_and_free, 10000);
	CU_ASSERT_EQUAL(atomic_load(&S.datas), 1);
	CU_ASSERT_EQUAL(atomic_load(&S.closes), 0);
	CU_ASSERT_EQUAL(atomic_load(&S.after_destroy), 0);
	CU_ASSERT_NOT_EQUAL(S.client_eof, -2);
}

/* ---- backpressure ---- */

static void *
client_push_then_read(void *arg)
{
	static uint8_t back[BIG];
	int fd = ut_connect(&S.addr, 16384);
	struct timeval tv = {1, 0}; /* stalled this long: the server paused, even under TSan */
	size_t sent = 0;

	(void)arg;
	if (fd >= 0) {
		/* Push without reading until the server stops taking bytes. */
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		while (sent < BIG) {
			ssize_t r = send(fd, payload + sent, BIG - sent, MSG_NOSIGNAL);

			if (r <= 0)
				break;
			sent += (size_t)r;
		}
		/* The kernel's buffers on both sides may take all of it: whether the push
		 * blocked says little; what the server queued (max_queued) says it all. */
		S.client_ok = sent > 0;
		shutdown(fd, SHUT_WR);
		tv.tv_sec = 5;
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		S.client_got = ut_read_n(fd, back, sent);
		S.client_ok = S.client_ok && S.client_got == sent &&
			      memcmp(back, payload, sent) == 0;
		S.client_eof = ut_wait_eof(fd);
		close(fd);
	}
	atomic_store(&S.client_done, true);
	return NULL;
}

/* A small send buffer: a send carrying the queue (above the 64 KiB high watermark) cannot
 * fit while the client does not read, so the kernel takes it in part, however fast or
 * slow (TSan) each side runs. With the autotuned buffer (up to 4 MiB) a slow server's
 * sends all fitted: no short send in about one TSan run in four. */
static void
on_open_small_sndbuf(struct cr_conn *c)
{
	int v = 16384;

	on_open(c);
	CU_ASSERT_EQUAL(setsockopt(cr_conn_fd(c), SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)), 0);
}

static void
test_backpressure(void)
{
	static const struct cr_conn_ops ops = {on_open_small_sndbuf, on_data_echo, NULL, on_drain,
					       on_close};

	sc_reset();
	sc_run(&ops, client_push_then_read, one_close, 20000);
	CU_ASSERT_TRUE(S.client_ok);
	CU_ASSERT_EQUAL(S.client_eof, 0);
	CU_ASSERT(atomic_load(&S.drains) >= 1);
	/* Reading stopped near the high watermark: what is queued stays far below what the
	 * client pushed (a few receive buffers may land after the stop). */
	CU_ASSERT(atomic_load(&S.max_queued) > CR_NET_HIGH_WATERMARK);
	CU_ASSERT(atomic_load(&S.max_queued) < 1024 * 1024);
	CU_ASSERT_EQUAL(atomic_load(&S.close_err), 0);
	/* The slow reader made the kernel take sends in part, and the rest went out in
	 * order (the echo matched). With zero-copy sends (uring, io_zc_threshold > 0) no
	 * short send was ever seen, so only copying sends are held to it. */
	if (ut_cfg.io_driver == CR_IO_DRIVER_EPOLL ||
	    (CR_IO_ZC_THRESHOLD == 0 && getenv("CR_URING_ZC_THRESHOLD") == NULL))
		CU_ASSERT(UT_STAT(short_sends) > 0);
}

/* Push BIG without reading, then read it all back, and only then shut our side: the
 * connection is still open when the server's queue drains. */
static void *
client_push_read_shut(void *arg)
{
	static uint8_t back[BIG];
	int fd = ut_connect(&S.addr, 16384);

	(void)arg;
	if (fd >= 0) {
		S.client_ok = ut_write_all(fd, payload, BIG);
		S.client_got = ut_read_n(fd, back, BIG);
		S.client_ok = S.client_ok && S.client_got == BIG && memcmp(back, payload, BIG) == 0;
		shutdown(fd, SHUT_WR);
		S.client_eof = ut_wait_eof(fd);
		close(fd);
	}
	atomic_store(&S.client_done, true);
	return NULL;
}

/* With keep_reading the queue is not a reason to stop reading: a push that the client
 * does not read back meanwhile is taken in whole (far past the high watermark; without
 * keep_reading the client's writes would block for good), and on_drain still runs once
 * the client reads. The server's send buffer is small, as in test_backpressure: with the
 * autotuned one the kernel took most of the echo and the queue stayed under 1 MiB in an
 * ASan run on a loaded machine. */
static void
test_keep_reading(void)
{
	static const struct cr_conn_ops ops = {on_open_small_sndbuf, on_data_echo, NULL, on_drain,
					       on_close};

	sc_reset();
	S.copts.keep_reading = true;
	sc_run(&ops, client_push_read_shut, one_close, 20000);
	CU_ASSERT_TRUE(S.client_ok);
	CU_ASSERT_EQUAL(S.client_got, BIG);
	CU_ASSERT_EQUAL(S.client_eof, 0);
	CU_ASSERT(atomic_load(&S.drains) >= 1);
	CU_ASSERT(atomic_load(&S.max_queued) > 1024 * 1024);
	CU_ASSERT_EQUAL(atomic_load(&S.close_err), 0);
}

/* ---- -ENOBUFS, -EPIPE, half-close from our side ---- */

static void
on_open_small_pool(struct cr_conn *c)
{
	static uint8_t b[1025];

	on_open(c);
	/* 4 chunks of 256 bytes on this lcore: 1024 fit, one more byte does not. */
	CU_ASSERT_EQUAL(cr_conn_send(c, b, 1000), 0);
	CU_ASSERT_EQUAL(cr_conn_send(c, b, 24), 0);
	S.rc_nobufs = cr_conn_send(c, b, 1);
	S.queued_after_nobufs = cr_conn_queued(c);
	atomic_store(&S.in_api, true);
	CU_ASSERT_EQUAL(cr_conn_shutdown_write(c), 0);
	CU_ASSERT_EQUAL(cr_conn_shutdown_write(c), 0);
	S.rc_send_after_shut = cr_conn_send(c, b, 1);
	atomic_store(&S.in_api, false);
}

static void *
client_read_1024_then_send(void *arg)
{
	static uint8_t back[2048];
	int fd = ut_connect(&S.addr, 0);

	(void)arg;
	if (fd >= 0) {
		S.client_got = ut_read_n(fd, back, sizeof(back)); /* 1024, then EOF */
		/* Our side is still open: the server still reads (on_data_count). */
		S.client_ok = ut_write_all(fd, "late", 4);
		shutdown(fd, SHUT_WR);
		S.client_eof = ut_wait_eof(fd);
		close(fd);
	}
	atomic_store(&S.client_done, true);
	return NULL;
}

static void
test_nobufs_epipe_half_close(void)
{
	static const struct cr_conn_ops ops = {on_open_small_pool, on_data_count, NULL, NULL,
					       on_close};
	struct cr_net_config nc, def;

	sc_reset();
	cr_net_config_defaults(&def);
	nc = def;
	nc.chunks = 4;
	nc.chunk_size = 256;
	CU_ASSERT_EQUAL_FATAL(cr_net_configure(&nc), 0);
	sc_run(&ops, client_read_1024_then_send, one_close, 10000);
	CU_ASSERT_EQUAL(cr_net_configure(&def), 0);
	CU_ASSERT_EQUAL(S.rc_nobufs, -ENOBUFS);
	CU_ASSERT_EQUAL(S.queued_after_nobufs, 1024);
	CU_ASSERT_EQUAL(S.rc_send_after_shut, -EPIPE);
	CU_ASSERT_EQUAL(S.client_got, 1024);
	CU_ASSERT_TRUE(S.client_ok);
	CU_ASSERT_EQUAL(atomic_load(&S.bytes), 4);
	CU_ASSERT_EQUAL(atomic_load(&S.close_err), 0);
	CU_ASSERT_EQUAL(atomic_load(&S.cb_in_api), 0);
	CU_ASSERT(UT_STAT(send_nobufs) >= 1);
}

/* ---- graceful close ---- */

static void
on_open_send_close(struct cr_conn *c)
{
	size_t i;

	on_open(c);
	for (i = 0; i < (1u << 20); i += 65536)
		CU_ASSERT_EQUAL(cr_conn_send(c, payload + i, 65536), 0);
	atomic_store(&S.in_api, true);
	cr_conn_close(c);
	cr_conn_close(c);
	CU_ASSERT_EQUAL(cr_conn_send(c, "x", 1), -EPIPE);
	atomic_store(&S.in_api, false);
}

static void *
client_read_all(void *arg)
{
	static uint8_t back[(1u << 20) + 1];
	int fd = ut_connect(&S.addr, 0);

	(void)arg;
	if (fd >= 0) {
		ut_write_all(fd, "ignored", 7); /* dropped by the closing server */
		S.client_got = ut_read_n(fd, back, sizeof(back));
		S.client_ok = S.client_got == (1u << 20) && memcmp(back, payload, 1u << 20) == 0;
		close(fd);
	}
	atomic_store(&S.client_done, true);
	return NULL;
}

static void
test_close_graceful(void)
{
	static const struct cr_conn_ops ops = {on_open_send_close, on_data_count, NULL, NULL,
					       on_close};

	sc_reset();
	sc_run(&ops, client_read_all, one_close, 10000);
	CU_ASSERT_TRUE(S.client_ok);
	CU_ASSERT_EQUAL(atomic_load(&S.datas), 0);
	CU_ASSERT_EQUAL(atomic_load(&S.close_err), 0);
	CU_ASSERT_EQUAL(atomic_load(&S.cb_in_api), 0);
}

/* ---- idle timeout, peer reset ---- */

static void *
client_idle(void *arg)
{
	int fd = ut_connect(&S.addr, 0);

	(void)arg;
	if (fd >= 0) {
		S.client_eof = ut_wait_eof(fd);
		close(fd);
	}
	atomic_store(&S.client_done, true);
	return NULL;
}

static void
test_idle_timeout(void)
{
	static const struct cr_conn_ops ops = {on_open, on_data_echo, NULL, NULL, on_close};
	uint64_t t0;

	sc_reset();
	S.copts.idle_timeout_ns = 100 * 1000 * 1000;
	t0 = ut_ms();
	sc_run(&ops, client_idle, one_close, 10000);
	CU_ASSERT_EQUAL(S.client_eof, 0);
	CU_ASSERT_EQUAL(atomic_load(&S.close_err), -ETIMEDOUT);
	CU_ASSERT(ut_ms() - t0 >= 100);
	CU_ASSERT(ut_ms() - t0 < 3000);
}

static void *
client_reset(void *arg)
{
	struct linger lg = {1, 0};
	int fd = ut_connect(&S.addr, 2048);

	(void)arg;
	if (fd >= 0) {
		/* Big enough that the echo is still being sent when the reset lands. */
		struct timeval tv = {0, 200000};

		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		ut_write_all(fd, payload, BIG);
		setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		close(fd);
	}
	atomic_store(&S.client_done, true);
	return NULL;
}

static void
test_peer_reset_mid_send(void)
{
	static const struct cr_conn_ops ops = {on_open, on_data_echo, NULL, NULL, on_close};
	int err;

	sc_reset();
	sc_run(&ops, client_reset, one_close, 10000);
	err = atomic_load(&S.close_err);
	CU_ASSERT(err == -ECONNRESET || err == -EPIPE);
	CU_ASSERT_EQUAL(atomic_load(&S.closes), 1);
}

/* ---- read stop / start ---- */

static void
read_start_now(void *arg)
{
	(void)arg;
	/* Nothing arrived while stopped, though the client sent. */
	CU_ASSERT_EQUAL(atomic_load(&S.datas), 0);
	cr_conn_read_start(atomic_load(&S.conn));
}

static void
on_open_stopped(struct cr_conn *c)
{
	on_open(c);
	cr_conn_read_stop(c);
}

static void *
client_send_wait(void *arg)
{
	char back[10];
	int fd = ut_connect(&S.addr, 0);

	(void)arg;
	if (fd >= 0) {
		uint64_t t0 = ut_ms();

		ut_write_all(fd, "0123456789", 10);
		ut_sleep_ms(100);
		/* Accepted by now on a quiet machine; on a loaded one (a sanitizer build beside
		 * other suites) it may take longer: read_start_now needs the connection. */
		while (atomic_load(&S.conn) == NULL && ut_ms() - t0 < 5000)
			ut_sleep_ms(5);
		CU_ASSERT_PTR_NOT_NULL_FATAL(atomic_load(&S.conn));
		CU_ASSERT_EQUAL(cr_send(atomic_load(&S.conn_lcore), read_start_now, NULL), 0);
		S.client_got = ut_read_n(fd, back, sizeof(back));
		S.client_ok = memcmp(back, "0123456789", 10) == 0;
		shutdown(fd, SHUT_WR);
		S.client_eof = ut_wait_eof(fd);
		close(fd);
	}
	atomic_store(&S.client_done, true);
	return NULL;
}

static void
test_read_stop_start(void)
{
	static const struct cr_conn_ops ops = {on_open_stopped, on_data_echo, NULL, NULL,
					       on_close};

	sc_reset();
	sc_run(&ops, client_send_wait, one_close, 10000);
	CU_ASSERT_EQUAL(S.client_got, 10);
	CU_ASSERT_TRUE(S.client_ok);
	CU_ASSERT_EQUAL(atomic_load(&S.close_err), 0);
}

/* ---- a zero-copy send abandoned after its result (issue 12 item 5) ---- */

#define ZC_BYTES (4u << 20)

static struct {
	struct cr_listener *l;
	struct cr_net_addr addr;
	pthread_t client;
	_Atomic bool queued;
	uint64_t stop_ms;
	int client_fd;
} Z;

static void
z_open(struct cr_conn *c)
{
	static uint8_t block[64 * 1024];
	unsigned i;

	/* Far more than a peer that reads nothing takes: the last sends wait for ACKs that
	 * never come, and on io_uring their zero-copy notifications with them. */
	for (i = 0; i < ZC_BYTES / sizeof(block); i++)
		CU_ASSERT_EQUAL(cr_conn_send(c, block, sizeof(block)), 0);
	atomic_store(&Z.queued, true);
}

static const struct cr_conn_ops z_ops = {.on_open = z_open};

static void *
z_client(void *arg)
{
	uint64_t t0;
	int i;

	(void)arg;
	Z.client_fd = ut_connect(&Z.addr, 4096); /* and never read */
	for (i = 0; i < 5000 && !atomic_load(&Z.queued); i++)
		ut_sleep_ms(1);
	ut_sleep_ms(200); /* the sends go out and stall on the zero window */
	t0 = ut_ms();
	cr_shutdown_force();
	while (atomic_load(&Z.queued))
		ut_sleep_ms(1); /* cleared once the run returns */
	Z.stop_ms = ut_ms() - t0;
	return NULL;
}

static void
z_start(void *arg)
{
	struct cr_tcp_listen_opts o = ut_listen_opts(false);

	(void)arg;
	CU_ASSERT_EQUAL_FATAL(cr_tcp_listen(&o, &z_ops, NULL, &Z.l), 0);
	cr_listener_addr(Z.l, &Z.addr);
	CU_ASSERT_EQUAL(pthread_create(&Z.client, NULL, z_client, NULL), 0);
}

/*
 * Regression: the driver refused to cancel a zero-copy send whose result was in (only the
 * notification was left), the notification never came while the peer's window stayed
 * shut, the socket stayed open under the op's hold, and a forced stop aborted the process
 * after 10 s rather than free memory the kernel might still read. Abandoning such a send
 * now breaks the connection, which frees the send queue and brings the notification.
 */
static void
test_forced_stop_with_stalled_zerocopy_send(void)
{
	memset(&Z, 0, sizeof(Z));
	Z.client_fd = -1;
	setenv("CR_URING_ZC_THRESHOLD", "4096", 1);
	ut_net_run(z_start, NULL, 30000);
	atomic_store(&Z.queued, false);
	pthread_join(Z.client, NULL);
	unsetenv("CR_URING_ZC_THRESHOLD");
	if (Z.client_fd >= 0)
		close(Z.client_fd);
	CU_ASSERT(Z.stop_ms < 5000);
}

/*
 * Regression (review of issue 12): a zero-copy send abandoned after it was submitted but
 * before its result was reaped (queued in on_open, then a forced stop in the same
 * callback) was cancelled too early to be broken, and the stop still aborted after 10 s.
 */
static struct {
	struct cr_listener *l;
	struct cr_net_addr addr;
	pthread_t client;
	_Atomic bool queued;
	uint64_t t0, stop_ms;
	int fd;
} Q;

static void
q_open(struct cr_conn *c)
{
	static uint8_t block[64 * 1024];
	unsigned i;

	for (i = 0; i < ZC_BYTES / sizeof(block); i++)
		if (cr_conn_send(c, block, sizeof(block)) != 0)
			break;
	atomic_store(&Q.queued, true);
	Q.t0 = ut_ms();
	cr_shutdown_force(); /* the send is queued, not yet submitted or reaped */
}

static const struct cr_conn_ops q_ops = {.on_open = q_open};

static void *
q_client(void *arg)
{
	(void)arg;
	Q.fd = ut_connect(&Q.addr, 4096); /* and never read */
	return NULL;
}

static void
q_start(void *arg)
{
	struct cr_tcp_listen_opts o = ut_listen_opts(false);

	(void)arg;
	CU_ASSERT_EQUAL_FATAL(cr_tcp_listen(&o, &q_ops, NULL, &Q.l), 0);
	cr_listener_addr(Q.l, &Q.addr);
	CU_ASSERT_EQUAL(pthread_create(&Q.client, NULL, q_client, NULL), 0);
}

static void
test_zc_abandoned_before_result_reaped(void)
{
	memset(&Q, 0, sizeof(Q));
	Q.fd = -1;
	setenv("CR_URING_ZC_THRESHOLD", "4096", 1);
	ut_net_run(q_start, NULL, 30000);
	Q.stop_ms = ut_ms() - Q.t0;
	pthread_join(Q.client, NULL);
	unsetenv("CR_URING_ZC_THRESHOLD");
	if (Q.fd >= 0)
		close(Q.fd);
	CU_ASSERT(Q.stop_ms < 5000);
}

static const struct ut_case cases[] = {
	UT_CASE(test_echo_half_close),
	UT_CASE(test_on_eof_app_shutdown),
	UT_CASE(test_nagle_option),
	UT_CASE(test_destroy_with_ops_in_flight),
	UT_CASE(test_destroy_in_on_data),
	UT_CASE(test_backpressure),
	UT_CASE(test_keep_reading),
	UT_CASE(test_nobufs_epipe_half_close),
	UT_CASE(test_close_graceful),
	UT_CASE(test_idle_timeout),
	UT_CASE(test_peer_reset_mid_send),
	UT_CASE(test_read_stop_start),
	UT_CASE(test_forced_stop_with_stalled_zerocopy_send),
	UT_CASE(test_zc_abandoned_before_result_reaped),
};

UT_MAIN("net_conn", cases, ut_rt_setup, NULL)
