/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Sends without copies (net_nocopy.c) on the real runtime, once per io driver: copies,
 * held-buffer slices and app memory interleaved on one connection arrive in order, byte
 * for byte, and count in the queue; a sendv's callback runs exactly once, with 0 once sent
 * and -ECANCELED when the connection was destroyed or reset with it queued, and a queued
 * buffer's reference is dropped then too; on a layered connection the layer copies and
 * the callback runs at once. One lcore, so the pool counts are exact.
 */
#include <stddef.h>

#include "ut_net.h"

#define REQ 1000		/* what the client sends first */
#define BIG (8u << 20)		/* a sendv a peer that reads nothing cannot take */
#define KEY 0x5a		/* the toy layer's XOR */

static struct {
	struct cr_listener *l;
	struct cr_net_addr addr;
	pthread_t client;
	bool client_started;
	void *(*client_fn)(void *);
	struct ut_every every;
	bool (*step)(void);
	struct cr_conn_opts copts;
	_Atomic bool client_done, queued;
	struct cr_conn *conn;
	int closes, close_err;
	/* the server's answer, for the client to check */
	_Atomic size_t first_len;
	size_t queued_after, expect_queued;
	_Atomic int sent_calls;
	int sent_err;
	int rc_slice, hold_errno;
	bool client_ok;
	size_t client_got;
	uint64_t destroy_at;
	bool destroy;
} S;

static uint8_t req[REQ];
static uint8_t big[BIG];
static uint8_t mem1[70000], mem2[5];
static uint8_t copy1[100], copy2[200];

static void
s_reset(void)
{
	memset(&S, 0, sizeof(S));
	S.close_err = 1;
	S.sent_err = 1;
	ut_fill(req, 0, sizeof(req));
	ut_fill_seeded(mem1, sizeof(mem1), 1);
	ut_fill_seeded(mem2, sizeof(mem2), 2);
	ut_fill_seeded(copy1, sizeof(copy1), 3);
	ut_fill_seeded(copy2, sizeof(copy2), 4);
}

static uint64_t
main_stat(size_t off)
{
	struct cr_net_stats st;

	CU_ASSERT_EQUAL(cr_net_stats(cr_lcore_id(), &st), 0);
	return *(uint64_t *)((char *)&st + off);
}

#define MAIN_STAT(field) main_stat(offsetof(struct cr_net_stats, field))

static bool
s_tick(void *arg)
{
	(void)arg;
	if (!S.step())
		return false;
	cr_reactor_stop();
	return true;
}

static void
s_start(void *arg)
{
	struct cr_tcp_listen_opts o = ut_listen_opts(false);

	o.conn = S.copts;
	CU_ASSERT_EQUAL_FATAL(cr_tcp_listen(&o, arg, NULL, &S.l), 0);
	cr_listener_addr(S.l, &S.addr);
	CU_ASSERT_EQUAL(pthread_create(&S.client, NULL, S.client_fn, NULL), 0);
	S.client_started = true;
	ut_every(&S.every, 2, s_tick, NULL);
}

static void
s_run(const struct cr_conn_ops *ops, void *(*client)(void *), bool (*step)(void))
{
	S.client_fn = client;
	S.step = step;
	ut_net_run(s_start, (void *)ops, 20000);
	if (S.client_started)
		pthread_join(S.client, NULL);
}

static void
on_open(struct cr_conn *c)
{
	S.conn = c;
}

static void
on_close(struct cr_conn *c, int err)
{
	(void)c;
	S.conn = NULL;
	S.close_err = err;
	S.closes++;
}

static void
on_sent(void *arg, int err)
{
	CU_ASSERT_PTR_EQUAL(arg, &S);
	S.sent_calls++;
	S.sent_err = err;
}

/* ---- order and bytes: send, send_buf, sendv, send, send_buf ---- */

static void
mixed_data(struct cr_conn *c, const void *d, size_t n)
{
	struct cr_buf *b = cr_conn_hold(c);
	struct iovec iov[2] = {{mem1, sizeof(mem1)}, {mem2, sizeof(mem2)}};

	(void)d;
	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	if (atomic_load(&S.first_len) != 0) { /* answered already: the rest is dropped */
		cr_buf_unref(b);
		return;
	}
	atomic_store(&S.first_len, n);
	S.rc_slice = cr_conn_send_buf(c, b, 1, n); /* one byte past its end */
	CU_ASSERT_EQUAL(cr_conn_send(c, copy1, sizeof(copy1)), 0);
	CU_ASSERT_EQUAL(cr_conn_send_buf(c, b, 10, n > 510 ? 500 : n - 10), 0);
	CU_ASSERT_EQUAL(cr_conn_sendv(c, iov, 2, on_sent, &S), 0);
	CU_ASSERT_EQUAL(cr_conn_send(c, copy2, sizeof(copy2)), 0);
	CU_ASSERT_EQUAL(cr_conn_send_buf(c, b, 0, n), 0);
	/* Nothing completes inside these calls: every byte is still queued. */
	S.queued_after = cr_conn_queued(c);
	S.expect_queued = sizeof(copy1) + (n > 510 ? 500 : n - 10) + sizeof(mem1) +
			  sizeof(mem2) + sizeof(copy2) + n;
	cr_buf_unref(b); /* the queue keeps its own references */
	CU_ASSERT_EQUAL(cr_conn_shutdown_write(c), 0);
}

static void *
client_mixed(void *arg)
{
	static uint8_t got[1 << 20], want[1 << 20];
	int fd = ut_connect(&S.addr, 0);
	size_t n, w = 0, slice;

	(void)arg;
	if (fd >= 0) {
		S.client_ok = ut_write_all(fd, req, sizeof(req));
		S.client_got = ut_read_n(fd, got, sizeof(got));
		n = atomic_load(&S.first_len);
		slice = n > 510 ? 500 : n - 10;
		memcpy(want + w, copy1, sizeof(copy1));
		w += sizeof(copy1);
		memcpy(want + w, req + 10, slice);
		w += slice;
		memcpy(want + w, mem1, sizeof(mem1));
		w += sizeof(mem1);
		memcpy(want + w, mem2, sizeof(mem2));
		w += sizeof(mem2);
		memcpy(want + w, copy2, sizeof(copy2));
		w += sizeof(copy2);
		memcpy(want + w, req, n);
		w += n;
		S.client_ok = S.client_ok && S.client_got == w && memcmp(got, want, w) == 0;
		close(fd);
	}
	atomic_store(&S.client_done, true);
	return NULL;
}

static bool
mixed_done(void)
{
	return atomic_load(&S.client_done) && S.closes == 1 && MAIN_STAT(bufs_held) == 0;
}

static void
test_mixed_order_exact_bytes(void)
{
	static const struct cr_conn_ops ops = {on_open, mixed_data, NULL, NULL, on_close};

	s_reset();
	s_run(&ops, client_mixed, mixed_done);
	CU_ASSERT_TRUE(S.client_ok);
	CU_ASSERT_EQUAL(S.rc_slice, -EINVAL);
	CU_ASSERT_EQUAL(S.queued_after, S.expect_queued);
	CU_ASSERT_EQUAL(S.sent_calls, 1);
	CU_ASSERT_EQUAL(S.sent_err, 0);
	CU_ASSERT_EQUAL(S.close_err, 0);
	CU_ASSERT_EQUAL(UT_STAT(bufs_held), 0);
}

/* ---- queued when the connection ends: destroyed, or reset by the peer ---- */

static void
stuck_data(struct cr_conn *c, const void *d, size_t n)
{
	struct iovec iov = {big, sizeof(big)};
	struct cr_buf *b;

	(void)d;
	(void)n;
	if (atomic_load(&S.queued))
		return;
	/* More than the peer's window: it stays queued behind the part in flight. */
	CU_ASSERT_EQUAL(cr_conn_sendv(c, &iov, 1, on_sent, &S), 0);
	b = cr_conn_hold(c);
	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	CU_ASSERT_EQUAL(cr_conn_send_buf(c, b, 0, b->len), 0);
	cr_buf_unref(b);
	S.destroy_at = ut_ms() + 50;
	atomic_store(&S.queued, true);
}

static void *
client_stuck(void *arg)
{
	int fd = ut_connect(&S.addr, 4096);
	uint64_t until = ut_ms() + 5000;
	struct linger lg = {1, 0};

	(void)arg;
	if (fd >= 0) {
		S.client_ok = ut_write_all(fd, req, sizeof(req));
		while (!atomic_load(&S.queued) && ut_ms() < until)
			ut_sleep_ms(1);
		if (!S.destroy) {
			/* A reset: unread data and SO_LINGER 0. */
			ut_sleep_ms(50);
			setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		} else {
			while (!atomic_load(&S.client_done) && ut_ms() < until &&
			       S.sent_calls == 0)
				ut_sleep_ms(1);
		}
		close(fd);
	}
	atomic_store(&S.client_done, true);
	return NULL;
}

static bool
stuck_step(void)
{
	if (S.destroy && S.conn != NULL && atomic_load(&S.queued) && ut_ms() >= S.destroy_at) {
		cr_conn_destroy(S.conn);
		S.conn = NULL;
	}
	/* Done once the slot is free: its queue was dropped then. */
	return atomic_load(&S.client_done) && atomic_load(&S.queued) && S.conn == NULL &&
	       UT_STAT(conns) == 0;
}

static void
test_sendv_cancelled_on_destroy(void)
{
	static const struct cr_conn_ops ops = {on_open, stuck_data, NULL, NULL, on_close};

	s_reset();
	S.destroy = true;
	s_run(&ops, client_stuck, stuck_step);
	CU_ASSERT_TRUE(S.client_ok);
	CU_ASSERT_EQUAL(S.closes, 0);
	CU_ASSERT_EQUAL(S.sent_calls, 1);
	CU_ASSERT_EQUAL(S.sent_err, -ECANCELED);
	CU_ASSERT_EQUAL(UT_STAT(bufs_held), 0);
	CU_ASSERT_EQUAL(UT_STAT(chunks_free), 1024);
}

static void
test_sendv_cancelled_on_reset(void)
{
	static const struct cr_conn_ops ops = {on_open, stuck_data, NULL, NULL, on_close};

	s_reset();
	s_run(&ops, client_stuck, stuck_step);
	CU_ASSERT_TRUE(S.client_ok);
	CU_ASSERT_EQUAL(S.closes, 1);
	CU_ASSERT(S.close_err < 0);
	CU_ASSERT_EQUAL(S.sent_calls, 1);
	CU_ASSERT_EQUAL(S.sent_err, -ECANCELED);
	CU_ASSERT_EQUAL(UT_STAT(bufs_held), 0);
	CU_ASSERT_EQUAL(UT_STAT(chunks_free), 1024);
}

/* ---- tiny pieces: the pool's reserve counts chunks, not bytes ---- */

#define GREEDY_TRIES 40	  /* sendv calls the greedy connection makes, at most */
#define INNOCENT (1u << 20) /* the innocent connection's copy: 64 chunks of 16 KiB */

static struct {
	struct cr_conn *a;		/* the greedy one: its peer reads nothing */
	_Atomic bool a_seen;
	unsigned accepted;	/* sendv calls of a that were taken */
	int refused_rc;		/* what the first refused one returned */
	uint64_t free_after; /* chunks free once a was refused */
	bool a_writable;	/* cr_conn_writable(a) then */
	int innocent_rc;
} T;

static void
tiny_data(struct cr_conn *c, const void *d, size_t n)
{
	struct iovec iov[64];
	unsigned i, k;
	int rc = 0;

	(void)d;
	(void)n;
	if (T.a == NULL) {
		T.a = c;
		atomic_store(&T.a_seen, true);
		return;
	}
	if (c == T.a || atomic_load(&S.queued))
		return;
	/* 64 one-byte pieces a call: 64 chunks for 64 bytes, far below the high watermark
	 * in bytes. All in this one callback, so no send completes in between. */
	for (k = 0; k < GREEDY_TRIES; k++) {
		for (i = 0; i < 64; i++)
			iov[i] = (struct iovec){mem1 + 64 * k + i, 1};
		rc = cr_conn_sendv(T.a, iov, 64, on_sent, &S);
		if (rc != 0)
			break;
		T.accepted++;
	}
	T.refused_rc = rc;
	T.free_after = MAIN_STAT(chunks_free);
	T.a_writable = cr_conn_writable(T.a);
	/* A connection with nothing queued: the reserve is there for it. */
	T.innocent_rc = cr_conn_send(c, big, INNOCENT);
	atomic_store(&S.queued, true);
}

static void *
client_tiny(void *arg)
{
	int a = ut_connect(&S.addr, 4096), b = -1;
	uint64_t until = ut_ms() + 5000;

	(void)arg;
	if (a >= 0) {
		S.client_ok = ut_write_all(a, req, 10);
		while (!atomic_load(&T.a_seen) && ut_ms() < until)
			ut_sleep_ms(1);
		b = ut_connect(&S.addr, 4096);
		S.client_ok = S.client_ok && b >= 0 && ut_write_all(b, req, 10);
		while (!atomic_load(&S.queued) && ut_ms() < until)
			ut_sleep_ms(1);
	}
	/* Unread data: both close with a reset, and their queues are dropped. */
	if (b >= 0)
		close(b);
	if (a >= 0)
		close(a);
	atomic_store(&S.client_done, true);
	return NULL;
}

static bool
tiny_done(void)
{
	return atomic_load(&S.client_done) && S.closes == 2 && UT_STAT(conns) == 0;
}

static void
test_tiny_pieces_keep_the_reserve(void)
{
	static const struct cr_conn_ops ops = {on_open, tiny_data, NULL, NULL, on_close};

	s_reset();
	memset(&T, 0, sizeof(T));
	s_run(&ops, client_tiny, tiny_done);
	CU_ASSERT_TRUE(S.client_ok);
	CU_ASSERT_TRUE(atomic_load(&S.queued));
	/* The first 64 pieces lift it past what 64 KiB in 4 KiB pieces would hold (17
	 * chunks); from then on it may not go below the reserve (1024 / 4): 11 more calls. */
	CU_ASSERT_EQUAL(T.accepted, 12);
	CU_ASSERT_EQUAL(T.refused_rc, -ENOBUFS);
	CU_ASSERT(T.free_after >= 1024 / 4);
	CU_ASSERT_FALSE(T.a_writable);
	CU_ASSERT_EQUAL(T.innocent_rc, 0);
	/* Every taken sendv said so exactly once, and every chunk came back. */
	CU_ASSERT_EQUAL(S.sent_calls, (int)T.accepted);
	CU_ASSERT_EQUAL(UT_STAT(chunks_free), 1024);
}

/* ---- a layered connection: the layer copies, the callback runs at once ---- */

static int
xor_send(struct cr_conn *c, const void *data, size_t len)
{
	uint8_t buf[65536];
	const uint8_t *p = data;
	size_t i;

	if (len > sizeof(buf))
		return -ENOBUFS;
	for (i = 0; i < len; i++)
		buf[i] = p[i] ^ KEY;
	return cr_conn_send_wire(c, buf, len);
}

static void
wire_data(struct cr_conn *c, const void *d, size_t n)
{
	uint8_t buf[65536];
	const uint8_t *p = d;
	size_t i;

	CU_ASSERT_FATAL(n <= sizeof(buf));
	for (i = 0; i < n; i++)
		buf[i] = p[i] ^ KEY;
	if (cr_conn_is_open(c))
		cr_conn_app_ops(c)->on_data(c, buf, n);
}

static void
wire_open(struct cr_conn *c)
{
	cr_conn_app_ops(c)->on_open(c);
}

static void
wire_close(struct cr_conn *c, int err)
{
	cr_conn_app_ops(c)->on_close(c, err);
}

static const struct cr_conn_ops xor_wire = {wire_open, wire_data, NULL, NULL, wire_close};
static const struct cr_conn_layer xor_layer = {.wire = &xor_wire, .send = xor_send};

static void
layered_data(struct cr_conn *c, const void *d, size_t n)
{
	struct iovec iov[2] = {{mem1, 30000}, {mem2, sizeof(mem2)}};

	(void)d;
	(void)n;
	if (atomic_load(&S.first_len) != 0)
		return;
	atomic_store(&S.first_len, n);
	errno = 0;
	CU_ASSERT_PTR_NULL(cr_conn_hold(c)); /* plaintext is not in a receive buffer */
	S.hold_errno = errno;
	CU_ASSERT_EQUAL(cr_conn_sendv(c, iov, 2, on_sent, &S), 0);
	/* Copied by the layer: the memory is free already. */
	CU_ASSERT_EQUAL(S.sent_calls, 1);
	CU_ASSERT_EQUAL(cr_conn_shutdown_write(c), 0);
}

static void *
client_layered(void *arg)
{
	static uint8_t got[65536];
	int fd = ut_connect(&S.addr, 0);
	size_t i;

	(void)arg;
	if (fd >= 0) {
		S.client_ok = ut_write_all(fd, req, sizeof(req));
		S.client_got = ut_read_n(fd, got, sizeof(got));
		for (i = 0; i < S.client_got; i++)
			got[i] ^= KEY;
		S.client_ok = S.client_ok && S.client_got == 30000 + sizeof(mem2) &&
			      memcmp(got, mem1, 30000) == 0 &&
			      memcmp(got + 30000, mem2, sizeof(mem2)) == 0;
		close(fd);
	}
	atomic_store(&S.client_done, true);
	return NULL;
}

static bool
layered_done(void)
{
	return atomic_load(&S.client_done) && S.closes == 1;
}

static void
test_layered_sendv_copies(void)
{
	static const struct cr_conn_ops ops = {on_open, layered_data, NULL, NULL, on_close};

	s_reset();
	S.copts.layer = &xor_layer;
	s_run(&ops, client_layered, layered_done);
	CU_ASSERT_TRUE(S.client_ok);
	CU_ASSERT_EQUAL(S.hold_errno, ENOTSUP);
	CU_ASSERT_EQUAL(S.sent_calls, 1);
	CU_ASSERT_EQUAL(S.sent_err, 0);
}

static const struct ut_case cases[] = {
	UT_CASE(test_mixed_order_exact_bytes),
	UT_CASE(test_sendv_cancelled_on_destroy),
	UT_CASE(test_sendv_cancelled_on_reset),
	UT_CASE(test_layered_sendv_copies),
	UT_CASE(test_tiny_pieces_keep_the_reserve),
};

/* The runtime of ut_rt_setup() on its first lcore alone. */
static int
one_lcore_setup(void)
{
	char err[256];

	if (ut_rt_setup() != 0)
		return 1;
	snprintf(ut_cfg.corelist, sizeof(ut_cfg.corelist), "%u", ut_table.lcores[0].lcore_id);
	if (cr_eal_lcore_table(&ut_cfg, &ut_table, err, sizeof(err)) != 0) {
		fprintf(stderr, "lcore table: %s\n", err);
		return 1;
	}
	return 0;
}

UT_MAIN("net_nocopy", cases, one_lcore_setup, NULL)
