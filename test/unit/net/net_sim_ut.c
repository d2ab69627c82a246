/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A lib/net connection stepped one turn at a time on a simulated lcore, over the
 * harness's fake I/O driver: the connect, the receive and every send complete when and how
 * the test says — a short send resumed where it stopped, bytes kept in order behind it,
 * data and EOF after the close began — with no peer and no kernel TCP. (The socket itself is
 * a real, never connected fd: lib/net makes it before the connect op.)
 */
#include <errno.h>
#include <string.h>

#include "cr_net.h"
#include "net_internal.h"
#include "ut_cunit.h"
#include "ut_io.h"

static struct {
	struct cr_conn *c;
	unsigned opens, closes, datas, eofs;
	int close_err;
	char in[64];
	size_t in_len;
} st;

static void
on_open(struct cr_conn *c)
{
	st.c = c;
	st.opens++;
}

static void
on_data(struct cr_conn *c, const void *data, size_t len)
{
	(void)c;
	memcpy(st.in + st.in_len, data, len);
	st.in_len += len;
	st.datas++;
}

static void
on_close(struct cr_conn *c, int err)
{
	(void)c;
	st.closes++;
	st.close_err = err;
}

/* The peer is done: what we queued still goes, then our FIN. */
static void
on_eof(struct cr_conn *c)
{
	st.eofs++;
	(void)cr_conn_shutdown_write(c);
}

static const struct cr_conn_ops ops = {
    .on_open = on_open, .on_data = on_data, .on_eof = on_eof, .on_close = on_close};

/* The send op waiting on @p fd: what it sends. */
static struct cr_op *
send_op(int fd, const char *want, size_t len)
{
	struct cr_op *op = ut_io_op(0, CR_OP_SEND, fd);

	CU_ASSERT_PTR_NOT_NULL_FATAL(op);
	CU_ASSERT_EQUAL(op->u.rw.len, len);
	CU_ASSERT_EQUAL(memcmp(op->u.rw.buf, want, len), 0);
	return op;
}

static void
test_connection(void)
{
	struct cr_net_addr to;
	struct cr_conn *c;
	struct cr_op *op;
	int fd;

	CU_ASSERT_EQUAL_FATAL(cr_net_addr_parse("127.0.0.1:9", &to), 0);
	c = cr_tcp_connect(&to, 0, NULL, &ops, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	fd = cr_conn_fd(c);
	/* Bytes queued before the connect completes wait for it. */
	CU_ASSERT_EQUAL(cr_conn_send(c, "hello", 5), 0);
	op = ut_io_op(0, CR_OP_CONNECT, fd);
	CU_ASSERT_PTR_NOT_NULL_FATAL(op);
	CU_ASSERT_PTR_NULL(ut_io_op(0, CR_OP_SEND, fd));
	ut_io_complete(0, op, 0, false);
	ut_poll_k(0, 2);
	CU_ASSERT_EQUAL(st.opens, 1);
	CU_ASSERT_PTR_NOT_NULL(ut_io_op(0, CR_OP_RECV, fd));
	/* A short send: the rest goes out next, and what was queued after it follows. */
	op = send_op(fd, "hello", 5);
	CU_ASSERT_EQUAL(cr_conn_send(c, " world", 6), 0);
	ut_io_complete(0, op, 2, false);
	ut_poll_k(0, 2);
	/* One chunk held both: the resend starts where the kernel stopped and takes the
	 * bytes appended since. */
	op = send_op(fd, "llo world", 9);
	CU_ASSERT_EQUAL(cr_conn_queued(c), 9);
	ut_io_complete(0, op, 9, false);
	ut_poll_k(0, 2);
	CU_ASSERT_EQUAL(cr_conn_queued(c), 0);
	CU_ASSERT_PTR_NULL(ut_io_op(0, CR_OP_SEND, fd));
	/* The peer's bytes, in order. */
	op = ut_io_op(0, CR_OP_RECV, fd);
	CU_ASSERT_EQUAL(ut_io_deliver(0, op, "pong", 4, true), 0);
	CU_ASSERT_EQUAL(ut_io_deliver(0, op, "!", 1, true), 0);
	ut_turn(0);
	CU_ASSERT_EQUAL(st.in_len, 5);
	CU_ASSERT_EQUAL(memcmp(st.in, "pong!", 5), 0);
	CU_ASSERT_EQUAL(ut_io_bufs_out(0), 0);
	/* A reset on the receive ends the connection, once. */
	ut_io_complete(0, op, -ECONNRESET, false);
	ut_poll_k(0, 3);
	CU_ASSERT_EQUAL(st.closes, 1);
	CU_ASSERT_EQUAL(st.close_err, -ECONNRESET);
	ut_poll_until_idle(10);
	CU_ASSERT_EQUAL(ut_io_waiting(0), 0);
}

/*
 * After a kTLS hand-over (cr_conn_layer_plain()) the kernel fails a receive with -EIO when
 * the next record is not data — the peer's close_notify, mostly: that is the peer's EOF.
 * What was queued goes out, the app hears on_eof, and the connection ends cleanly. (Before:
 * on_close(-EIO) at once, the queued reply dropped.)
 */
static void
test_plain_socket_eio_is_eof(void)
{
	struct cr_net_addr to;
	struct cr_conn *c;
	struct cr_op *op;
	int fd;

	memset(&st, 0, sizeof(st));
	CU_ASSERT_EQUAL_FATAL(cr_net_addr_parse("127.0.0.1:9", &to), 0);
	c = cr_tcp_connect(&to, 0, NULL, &ops, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	fd = cr_conn_fd(c);
	ut_io_complete(0, ut_io_op(0, CR_OP_CONNECT, fd), 0, false);
	ut_poll_k(0, 2);
	CU_ASSERT_EQUAL_FATAL(st.opens, 1);
	cr_conn_layer_plain(c);
	CU_ASSERT_EQUAL(cr_conn_send(c, "reply", 5), 0);
	op = send_op(fd, "reply", 5);
	ut_io_complete(0, ut_io_op(0, CR_OP_RECV, fd), -EIO, false);
	ut_poll_k(0, 3);
	CU_ASSERT_EQUAL(st.eofs, 1);
	CU_ASSERT_EQUAL(st.closes, 0);
	/* The reply still goes; then the FIN, and the end with both sides done. */
	CU_ASSERT_PTR_EQUAL(ut_io_op(0, CR_OP_SEND, fd), op);
	if (st.closes == 0)
		ut_io_complete(0, op, 5, false);
	ut_poll_until_idle(10);
	CU_ASSERT_EQUAL(st.closes, 1);
	CU_ASSERT_EQUAL(st.close_err, 0);
	CU_ASSERT_EQUAL(ut_io_waiting(0), 0);
}

/* -EIO on a socket that is not kTLS stays an error. */
static void
test_eio_is_error(void)
{
	struct cr_net_addr to;
	struct cr_conn *c;
	int fd;

	memset(&st, 0, sizeof(st));
	CU_ASSERT_EQUAL_FATAL(cr_net_addr_parse("127.0.0.1:9", &to), 0);
	c = cr_tcp_connect(&to, 0, NULL, &ops, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	fd = cr_conn_fd(c);
	ut_io_complete(0, ut_io_op(0, CR_OP_CONNECT, fd), 0, false);
	ut_poll_k(0, 2);
	ut_io_complete(0, ut_io_op(0, CR_OP_RECV, fd), -EIO, false);
	ut_poll_until_idle(10);
	CU_ASSERT_EQUAL(st.eofs, 0);
	CU_ASSERT_EQUAL(st.closes, 1);
	CU_ASSERT_EQUAL(st.close_err, -EIO);
	CU_ASSERT_EQUAL(ut_io_waiting(0), 0);
}

/*
 * An ending connection (its lcore closing) whose mark end_after counted the kernel's bytes
 * received as records (ciphertext), then handed to the kernel: its reads now count
 * plaintext, fewer bytes, and would never reach the mark (the connection would wait for the
 * retire's timeout). cr_conn_layer_plain() takes what was delivered as the mark: it closes
 * at its boundary.
 */
static void
test_ending_plain_socket_closes(void)
{
	struct cr_net_addr to;
	struct cr_conn *c;
	struct cr_op *op;
	int fd, i;

	memset(&st, 0, sizeof(st));
	CU_ASSERT_EQUAL_FATAL(cr_net_addr_parse("127.0.0.1:9", &to), 0);
	c = cr_tcp_connect(&to, 0, NULL, &ops, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	fd = cr_conn_fd(c);
	ut_io_complete(0, ut_io_op(0, CR_OP_CONNECT, fd), 0, false);
	ut_poll_k(0, 2);
	op = ut_io_op(0, CR_OP_RECV, fd);
	CU_ASSERT_EQUAL(ut_io_deliver(0, op, "GET /", 5, true), 0);
	ut_turn(0);
	CU_ASSERT_EQUAL_FATAL(st.in_len, 5);
	cr__conn_begin_ending(c);
	CU_ASSERT_FATAL(cr_conn_ending(c));
	/* The kernel had a 5-byte request's record: 5 + 22 bytes of ciphertext. */
	c->end_after = c->rx_bytes + 22;
	for (i = 0; i < 20; i++, ut_now += 10 * 1000 * 1000)
		ut_turn(0);
	CU_ASSERT_FATAL(cr_conn_is_open(c)); /* waits for bytes the kernel holds */
	cr_conn_layer_plain(c);
	for (i = 0; i < 20 && cr_conn_is_open(c); i++, ut_now += 10 * 1000 * 1000)
		ut_turn(0);
	CU_ASSERT(!cr_conn_is_open(c));
	/* The peer's FIN ends it. */
	ut_io_complete(0, op, 0, false);
	ut_poll_until_idle(10);
	if (st.closes == 0)
		cr_conn_destroy(c);
	CU_ASSERT_EQUAL(st.closes, 1);
	CU_ASSERT_EQUAL(st.close_err, 0);
	CU_ASSERT_EQUAL(ut_io_waiting(0), 0);
}

static const struct ut_case cases[] = {
    {"connect, a short send resumed in order, data, reset", test_connection},
    {"kTLS socket: -EIO on receive is the peer's EOF, the queue still goes",
     test_plain_socket_eio_is_eof},
    {"-EIO on a receive of a plain TCP socket is an error", test_eio_is_error},
    {"ending, handed to the kernel: closes at its boundary, not at the timeout",
     test_ending_plain_socket_closes},
};

UT_MAIN("net_sim", cases, ut_io_suite_init, ut_io_suite_fini)
