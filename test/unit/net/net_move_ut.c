/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cr_conn_move() stepped on three simulated lcores over the harness's fake I/O driver:
 * each completion lands when the test queues it, so the interleavings a real kernel gives
 * only by chance are fixed here — data completing just before the cancel, a move asked
 * inside a receive's completion (the app's on_data), a move started while a cancel is out,
 * the peer's EOF or reset racing the move, a target that retires before or after the
 * connection was handed to it, two lcores retiring in the same turn, and a layered
 * connection (a toy layer standing where lib/tls does): the order of the hand-over's
 * callbacks, a layer mid-exchange, a send refused after on_move_out (the target's mailbox
 * full: both take their state back, in order), and a layer that cannot take the
 * connection on the new lcore (closed there, both states freed, counted as a drop).
 */
#include <errno.h>
#include <string.h>

#include "cr_net.h"
#include "net_internal.h"
#include "ut_cunit.h"
#include "ut_io.h"

#define TOKEN ((void *)0x5eed)

static struct {
	struct cr_conn *c;
	unsigned opens, closes, eofs, outs, ins, drops;
	int move_in_data; /* > 0: on_data asks to move there (then 0 again) */
	int move_in_data_rc;
	char order[64]; /* the hand-over's callbacks, in order: "A>" app out, "L<" ... */
	unsigned data_lcore, in_lcore;
	unsigned waiting_at_out; /* ops waiting on the old lcore when on_move_out ran */
	int close_err;
	bool send_in_out; /* on_move_out sends (which cr_net.h forbids) */
	void *state_in;
	char in[256];
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
	CU_ASSERT_FATAL(st.in_len + len <= sizeof(st.in));
	memcpy(st.in + st.in_len, data, len);
	st.in_len += len;
	st.data_lcore = cr_conn_lcore(c);
	if (st.move_in_data > 0) {
		st.move_in_data_rc = cr_conn_move(c, (unsigned)st.move_in_data);
		st.move_in_data = 0;
	}
}

static void
order_add(const char *what)
{
	strncat(st.order, what, sizeof(st.order) - strlen(st.order) - 1);
}

static void
on_eof(struct cr_conn *c)
{
	st.eofs++;
	(void)cr_conn_shutdown_write(c);
}

static void
on_close(struct cr_conn *c, int err)
{
	(void)c;
	st.closes++;
	st.close_err = err;
}

/* A line protocol: between two requests when everything read ends with a newline. */
static bool
at_boundary(struct cr_conn *c)
{
	(void)c;
	return st.in_len == 0 || st.in[st.in_len - 1] == '\n';
}

static void *
on_move_out(struct cr_conn *c)
{
	order_add("A>");
	st.outs++;
	st.waiting_at_out = ut_io_waiting(cr_conn_lcore(c));
	if (st.send_in_out)
		CU_ASSERT_EQUAL(cr_conn_send(c, "late\n", 5), 0);
	st.c = NULL;
	return TOKEN;
}

static void
on_move_in(struct cr_conn *c, void *state)
{
	order_add("A<");
	st.ins++;
	st.c = c;
	st.in_lcore = cr_lcore_id();
	st.state_in = state;
}

static void
on_move_drop(void *arg, void *state)
{
	(void)arg;
	(void)state;
	order_add("A!");
	st.drops++;
}

static const struct cr_conn_ops ops = {
    .on_open = on_open,
    .on_data = on_data,
    .on_eof = on_eof,
    .on_close = on_close,
    .at_boundary = at_boundary,
    .on_move_out = on_move_out,
    .on_move_in = on_move_in,
    .on_move_drop = on_move_drop,
};

static int
suite_init(void)
{
	if (ut_start_io(3) != 0)
		return 1;
	ut_set_current(0);
	return 0;
}

static int
suite_fini(void)
{
	ut_set_current(CR_LCORE_NONE);
	ut_stop();
	return 0;
}

/* The retiring lcore's loop check (the harness does not run it): true once it may stop. */
static bool
lcore_done(unsigned id)
{
	struct cr_lcore *prev = cr__cur;
	bool d;

	cr__set_cur(ut_lcore(id));
	d = cr__lcore_done(ut_lcore(id));
	cr__set_cur(prev);
	return d;
}

static uint64_t
stat_of(unsigned lcore, size_t off)
{
	struct cr_net_stats s;

	CU_ASSERT_EQUAL_FATAL(cr_net_stats(lcore, &s), 0);
	return *(uint64_t *)((char *)&s + off);
}
#define STAT(lcore, f) stat_of(lcore, offsetof(struct cr_net_stats, f))

/* An open connection on lcore 0 with options @p o (NULL: none), its receive armed;
 * returns its fd. */
static int
open_conn_opts(const struct cr_conn_opts *o)
{
	struct cr_net_addr to;
	struct cr_conn *c;
	int fd;

	memset(&st, 0, sizeof(st));
	ut_set_current(0);
	CU_ASSERT_EQUAL_FATAL(cr_net_addr_parse("127.0.0.1:9", &to), 0);
	c = cr_tcp_connect(&to, 0, o, &ops, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	fd = cr_conn_fd(c);
	ut_io_complete(0, ut_io_op(0, CR_OP_CONNECT, fd), 0, false);
	ut_poll_k(0, 2);
	CU_ASSERT_EQUAL_FATAL(st.opens, 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ut_io_op(0, CR_OP_RECV, fd));
	return fd;
}

static int
open_conn(void)
{
	return open_conn_opts(NULL);
}

/* End the connection where it is now, and check nothing is left waiting anywhere. */
static void
close_conn(void)
{
	unsigned lc;

	CU_ASSERT_PTR_NOT_NULL_FATAL(st.c);
	lc = cr_conn_lcore(st.c);
	ut_set_current(lc);
	cr_conn_destroy(st.c);
	st.c = NULL;
	ut_poll_until_idle(20);
	ut_set_current(0);
	for (lc = 0; lc < 3; lc++) {
		CU_ASSERT_EQUAL(ut_io_waiting(lc), 0);
		CU_ASSERT_EQUAL(ut_io_bufs_out(lc), 0);
	}
}

/* The plain case: quiesced on 0 (no op left there), handed over, receiving on 1. */
static void
test_move(void)
{
	uint64_t out0 = STAT(0, moved_out), in1 = STAT(1, moved_in);
	int fd = open_conn();
	struct cr_op *op;

	CU_ASSERT_EQUAL(ut_io_deliver(0, ut_io_op(0, CR_OP_RECV, fd), "one\n", 4, true), 0);
	ut_turn(0);
	CU_ASSERT_EQUAL(cr_conn_move(st.c, 1), 0);
	CU_ASSERT_EQUAL(cr_conn_move(st.c, 1), -EALREADY);
	CU_ASSERT(cr_conn_moving(st.c));
	ut_poll_until_idle(20);
	CU_ASSERT_EQUAL(st.outs, 1);
	CU_ASSERT_EQUAL(st.ins, 1);
	CU_ASSERT_EQUAL(st.waiting_at_out, 0); /* the receive's final completion came first */
	CU_ASSERT_EQUAL(st.in_lcore, 1);
	CU_ASSERT_PTR_EQUAL(st.state_in, TOKEN);
	CU_ASSERT_EQUAL_FATAL(cr_conn_lcore(st.c), 1);
	CU_ASSERT_EQUAL(cr_conn_fd(st.c), fd);
	CU_ASSERT_PTR_NULL(ut_io_op(0, CR_OP_RECV, fd));
	op = ut_io_op(1, CR_OP_RECV, fd);
	CU_ASSERT_PTR_NOT_NULL_FATAL(op);
	CU_ASSERT_EQUAL(STAT(0, moved_out), out0 + 1);
	CU_ASSERT_EQUAL(STAT(1, moved_in), in1 + 1);
	/* The next bytes reach the app on lcore 1, after the first ones. */
	CU_ASSERT_EQUAL(ut_io_deliver(1, op, "two\n", 4, true), 0);
	ut_turn(1);
	CU_ASSERT_EQUAL(st.data_lcore, 1);
	CU_ASSERT_EQUAL(st.in_len, 8);
	CU_ASSERT_EQUAL(memcmp(st.in, "one\ntwo\n", 8), 0);
	CU_ASSERT_EQUAL(st.closes, 0);
	close_conn();
}

/*
 * Half a request completes just before the cancel: it is delivered on the old lcore, the
 * app is no longer at a boundary, so the move is abandoned and the connection reads on
 * there; once the request is whole, a second move goes through.
 */
static void
test_move_racing_data(void)
{
	uint64_t aborts = STAT(0, move_aborts);
	int fd = open_conn();
	struct cr_op *op = ut_io_op(0, CR_OP_RECV, fd);

	CU_ASSERT_EQUAL(ut_io_deliver(0, op, "GET /", 5, true), 0);
	CU_ASSERT_EQUAL(cr_conn_move(st.c, 1), 0);
	ut_poll_until_idle(20);
	CU_ASSERT_EQUAL(st.outs, 0);
	CU_ASSERT_EQUAL(st.ins, 0);
	CU_ASSERT_EQUAL(STAT(0, move_aborts), aborts + 1);
	CU_ASSERT_FALSE(cr_conn_moving(st.c));
	CU_ASSERT_EQUAL(cr_conn_lcore(st.c), 0);
	op = ut_io_op(0, CR_OP_RECV, fd); /* reading again, here */
	CU_ASSERT_PTR_NOT_NULL_FATAL(op);
	CU_ASSERT_PTR_NULL(ut_io_op(1, CR_OP_RECV, fd));
	CU_ASSERT_EQUAL(ut_io_deliver(0, op, "\n", 1, true), 0);
	ut_turn(0);
	CU_ASSERT_EQUAL(cr_conn_move(st.c, 1), 0);
	ut_poll_until_idle(20);
	CU_ASSERT_EQUAL(st.outs, 1);
	CU_ASSERT_EQUAL_FATAL(cr_conn_lcore(st.c), 1);
	CU_ASSERT_EQUAL(st.in_len, 6);
	CU_ASSERT_EQUAL(memcmp(st.in, "GET /\n", 6), 0);
	CU_ASSERT_PTR_NOT_NULL(ut_io_op(1, CR_OP_RECV, fd));
	close_conn();
}

/*
 * A move started while the app's own cancel is out (cr_conn_read_stop()): it waits for
 * that cancel's final completion, and the stopped reads travel: lcore 1 arms no receive
 * until the app starts reading there.
 */
static void
test_move_during_cancel(void)
{
	int fd = open_conn();

	cr_conn_read_stop(st.c);
	CU_ASSERT_TRUE(cr_conn_receiving(st.c)); /* the cancel is out, not completed */
	CU_ASSERT_EQUAL(cr_conn_move(st.c, 1), 0);
	ut_poll_until_idle(20);
	CU_ASSERT_EQUAL(st.outs, 1);
	CU_ASSERT_EQUAL(st.waiting_at_out, 0);
	CU_ASSERT_EQUAL_FATAL(cr_conn_lcore(st.c), 1);
	CU_ASSERT_PTR_NULL(ut_io_op(1, CR_OP_RECV, fd));
	ut_set_current(1);
	cr_conn_read_start(st.c);
	ut_set_current(0);
	CU_ASSERT_PTR_NOT_NULL(ut_io_op(1, CR_OP_RECV, fd));
	close_conn();
}

/* The peer's EOF completes the receive before the cancel: no move, the EOF is served. */
static void
test_move_racing_eof(void)
{
	int fd = open_conn();

	ut_io_complete(0, ut_io_op(0, CR_OP_RECV, fd), 0, false);
	CU_ASSERT_EQUAL(cr_conn_move(st.c, 1), 0);
	ut_poll_until_idle(20);
	CU_ASSERT_EQUAL(st.outs, 0);
	CU_ASSERT_EQUAL(st.ins, 0);
	CU_ASSERT_EQUAL(st.eofs, 1);
	CU_ASSERT_EQUAL(st.closes, 1); /* both sides shut: ended once, on lcore 0 */
	CU_ASSERT_EQUAL(st.close_err, 0);
	CU_ASSERT_EQUAL(cr_conn_move(NULL, 1), -EINVAL);
	for (unsigned lc = 0; lc < 3; lc++)
		CU_ASSERT_EQUAL(ut_io_waiting(lc), 0);
}

/*
 * The move asked inside a receive's completion (the app's on_data, a multishot receive
 * still armed): the cancel goes out after the callback returns, its final completion is
 * awaited, and the bytes after the move reach the app on the new lcore, in order.
 */
static void
test_move_inside_on_data(void)
{
	int fd = open_conn();
	struct cr_op *op = ut_io_op(0, CR_OP_RECV, fd);

	st.move_in_data = 1;
	CU_ASSERT_EQUAL(ut_io_deliver(0, op, "one\n", 4, true), 0);
	ut_poll_until_idle(20);
	CU_ASSERT_EQUAL(st.move_in_data_rc, 0);
	CU_ASSERT_EQUAL(st.outs, 1);
	CU_ASSERT_EQUAL(st.waiting_at_out, 0);
	CU_ASSERT_EQUAL_FATAL(cr_conn_lcore(st.c), 1);
	CU_ASSERT_PTR_NULL(ut_io_op(0, CR_OP_RECV, fd));
	op = ut_io_op(1, CR_OP_RECV, fd);
	CU_ASSERT_PTR_NOT_NULL_FATAL(op);
	CU_ASSERT_EQUAL(ut_io_deliver(1, op, "two\n", 4, true), 0);
	ut_turn(1);
	CU_ASSERT_EQUAL(st.in_len, 8);
	CU_ASSERT_EQUAL(memcmp(st.in, "one\ntwo\n", 8), 0);
	close_conn();
}

/* The peer's reset completes the receive before the cancel: no move, ended once there. */
static void
test_move_racing_reset(void)
{
	int fd = open_conn();

	ut_io_complete(0, ut_io_op(0, CR_OP_RECV, fd), -ECONNRESET, false);
	CU_ASSERT_EQUAL(cr_conn_move(st.c, 1), 0);
	ut_poll_until_idle(20);
	CU_ASSERT_EQUAL(st.outs, 0);
	CU_ASSERT_EQUAL(st.ins, 0);
	CU_ASSERT_EQUAL(st.closes, 1);
	CU_ASSERT_EQUAL(st.close_err, -ECONNRESET);
	for (unsigned lc = 0; lc < 3; lc++)
		CU_ASSERT_EQUAL(ut_io_waiting(lc), 0);
}

/* ---- a layered connection: a toy layer where lib/tls would be ---- */

/* The layer's per-connection state: one per lcore (one connection at a time here). */
static struct toy {
	unsigned value; /* what travels */
	bool attached;
} toy[3];

static struct {
	bool busy;	/* mid-exchange: movable() false */
	bool refuse_in; /* move_in fails on any lcore but the one the state left */
	unsigned from;	/* the lcore move_out ran on */
	unsigned releases, freed;
} ly;

static struct toy *
toy_of(struct cr_conn *c)
{
	return cr_conn_layer_data(c);
}

static void
w_open(struct cr_conn *c)
{
	struct toy *t = &toy[cr_conn_lcore(c)];

	t->value = 42;
	t->attached = true;
	cr_conn_set_layer_data(c, t);
	on_open(c);
}

static void
w_data(struct cr_conn *c, const void *data, size_t len)
{
	CU_ASSERT_PTR_NOT_NULL(toy_of(c)); /* the layer is whole before the app hears */
	on_data(c, data, len);
}

static const struct cr_conn_ops wire = {
    .on_open = w_open,
    .on_data = w_data,
    .on_eof = on_eof,
    .on_close = on_close,
    .at_boundary = at_boundary,
};

static bool
l_movable(const struct cr_conn *c)
{
	(void)c;
	return !ly.busy;
}

static void
l_move_out(struct cr_conn *c, void *state)
{
	struct toy *t = toy_of(c);

	order_add("L>");
	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	ly.from = cr_lcore_id();
	memcpy(state, &t->value, sizeof(t->value));
	t->value = 0;
	t->attached = false;
	cr_conn_set_layer_data(c, NULL);
}

static int
l_move_in(struct cr_conn *c, void *state)
{
	struct toy *t = &toy[cr_lcore_id()];

	order_add("L<");
	if (ly.refuse_in && cr_lcore_id() != ly.from) {
		ly.freed++;
		return -ENOMEM;
	}
	CU_ASSERT_FALSE(t->attached);
	memcpy(&t->value, state, sizeof(t->value));
	t->attached = true;
	cr_conn_set_layer_data(c, t);
	return 0;
}

static void
l_move_drop(void *arg, void *state)
{
	(void)arg;
	(void)state;
	order_add("L!");
	ly.freed++;
}

static void
l_release(struct cr_conn *c)
{
	struct toy *t = toy_of(c);

	if (t == NULL)
		return;
	ly.releases++;
	t->attached = false;
	cr_conn_set_layer_data(c, NULL);
}

static const struct cr_conn_layer toy_layer = {
    .wire = &wire,
    .release = l_release,
    .movable = l_movable,
    .move_size = sizeof(unsigned),
    .move_out = l_move_out,
    .move_in = l_move_in,
    .move_drop = l_move_drop,
};

static int
open_layered(void)
{
	struct cr_conn_opts o = {.layer = &toy_layer};

	memset(&ly, 0, sizeof(ly));
	memset(toy, 0, sizeof(toy));
	return open_conn_opts(&o);
}

/* The hand-over in order: app out, layer out, (message), layer in, app in; the layer's
 * state travels, the old lcore's is gone; a layer mid-exchange refuses the move at once. */
static void
test_layer_move(void)
{
	int fd = open_layered();
	struct cr_op *op;

	CU_ASSERT_EQUAL(ut_io_deliver(0, ut_io_op(0, CR_OP_RECV, fd), "one\n", 4, true), 0);
	ut_turn(0);
	ly.busy = true;
	CU_ASSERT_EQUAL(cr_conn_move(st.c, 1), -EBUSY);
	ly.busy = false;
	CU_ASSERT_EQUAL(cr_conn_move(st.c, 1), 0);
	ut_poll_until_idle(20);
	CU_ASSERT_STRING_EQUAL(st.order, "A>L>L<A<");
	CU_ASSERT_EQUAL_FATAL(cr_conn_lcore(st.c), 1);
	CU_ASSERT_FALSE(toy[0].attached);
	CU_ASSERT_TRUE(toy[1].attached);
	CU_ASSERT_EQUAL(toy[1].value, 42);
	CU_ASSERT_EQUAL(ly.releases, 0); /* the old slot's release found nothing of the layer */
	op = ut_io_op(1, CR_OP_RECV, fd);
	CU_ASSERT_PTR_NOT_NULL_FATAL(op);
	CU_ASSERT_EQUAL(ut_io_deliver(1, op, "two\n", 4, true), 0);
	ut_turn(1);
	CU_ASSERT_EQUAL(st.in_len, 8);
	close_conn();
	CU_ASSERT_EQUAL(ly.releases, 1);
	CU_ASSERT_EQUAL(ly.freed, 0);
}

/* Reads the layer stopped for its own reasons stay stopped on the new lcore, apart from
 * the app's, until the layer starts them there. */
static void
test_layer_read_stop_travels(void)
{
	int fd = open_layered();

	cr_conn_layer_read(st.c, false);
	CU_ASSERT_EQUAL(cr_conn_move(st.c, 1), 0);
	ut_poll_until_idle(20);
	CU_ASSERT_EQUAL_FATAL(cr_conn_lcore(st.c), 1);
	CU_ASSERT_PTR_NULL(ut_io_op(1, CR_OP_RECV, fd));
	ut_set_current(1);
	cr_conn_layer_read(st.c, true);
	ut_set_current(0);
	CU_ASSERT_PTR_NOT_NULL(ut_io_op(1, CR_OP_RECV, fd));
	close_conn();
}

/* The layer began an exchange between cr_conn_move() and the hand-over: abandoned
 * before anything was handed over; the connection reads on where it is. */
static void
test_layer_busy_at_handover(void)
{
	uint64_t aborts = STAT(0, move_aborts);
	int fd = open_layered();

	CU_ASSERT_EQUAL(cr_conn_move(st.c, 1), 0);
	ly.busy = true;
	ut_poll_until_idle(20);
	CU_ASSERT_STRING_EQUAL(st.order, "");
	CU_ASSERT_EQUAL(STAT(0, move_aborts), aborts + 1);
	CU_ASSERT_EQUAL_FATAL(cr_conn_lcore(st.c), 0);
	CU_ASSERT_TRUE(toy[0].attached);
	CU_ASSERT_PTR_NOT_NULL(ut_io_op(0, CR_OP_RECV, fd));
	ly.busy = false;
	close_conn();
	CU_ASSERT_EQUAL(ly.releases, 1);
}

static void
noop(void *arg)
{
	(void)arg;
}

/*
 * The message is refused after on_move_out (lcore 1's mailbox full): the layer, then the
 * app, take their state back on lcore 0, and the connection reads on there. Once lcore 1
 * drained its mailbox, the move goes through.
 */
static void
test_layer_send_refused(void)
{
	uint64_t aborts = STAT(0, move_aborts);
	int fd = open_layered();
	unsigned i, k;

	for (i = 0; i < 1u << 20 && cr_send(1, noop, NULL) == 0; i++)
		;
	CU_ASSERT_EQUAL_FATAL(cr_send(1, noop, NULL), -EAGAIN);
	CU_ASSERT_EQUAL(cr_conn_move(st.c, 1), 0);
	for (k = 0; k < 20 && cr_conn_moving(st.c); k++)
		ut_turn(0); /* lcore 1 does not run: its mailbox stays full */
	CU_ASSERT_FALSE(cr_conn_moving(st.c));
	CU_ASSERT_STRING_EQUAL(st.order, "A>L>L<A<");
	CU_ASSERT_EQUAL(STAT(0, move_aborts), aborts + 1);
	CU_ASSERT_EQUAL_FATAL(cr_conn_lcore(st.c), 0);
	CU_ASSERT_TRUE(toy[0].attached);
	CU_ASSERT_EQUAL(toy[0].value, 42);
	CU_ASSERT_PTR_NOT_NULL(ut_io_op(0, CR_OP_RECV, fd));
	ut_poll_until_idle(1000); /* lcore 1 runs every message it had accepted */
	st.order[0] = '\0';
	CU_ASSERT_EQUAL(cr_conn_move(st.c, 1), 0);
	ut_poll_until_idle(20);
	CU_ASSERT_STRING_EQUAL(st.order, "A>L>L<A<");
	CU_ASSERT_EQUAL_FATAL(cr_conn_lcore(st.c), 1);
	CU_ASSERT_EQUAL(toy[1].value, 42);
	close_conn();
}

/* The layer cannot take the connection on the new lcore: the socket closes there, the
 * layer freed its state, the app's goes to on_move_drop; no on_close, nothing left. */
static void
test_layer_refused_on_target(void)
{
	uint64_t drops = STAT(1, move_drops), in1 = STAT(1, moved_in);
	int fd = open_layered();

	(void)fd;
	ly.refuse_in = true;
	CU_ASSERT_EQUAL(cr_conn_move(st.c, 1), 0);
	ut_poll_until_idle(20);
	CU_ASSERT_STRING_EQUAL(st.order, "A>L>L<A!");
	CU_ASSERT_EQUAL(st.drops, 1);
	CU_ASSERT_EQUAL(ly.freed, 1);
	CU_ASSERT_EQUAL(ly.releases, 0);
	CU_ASSERT_EQUAL(st.closes, 0);
	CU_ASSERT_EQUAL(STAT(1, move_drops), drops + 1);
	CU_ASSERT_EQUAL(STAT(1, moved_in), in1);
	for (unsigned lc = 0; lc < 3; lc++) {
		CU_ASSERT_EQUAL(ut_io_waiting(lc), 0);
		CU_ASSERT_PTR_NULL(ut_io_op(lc, CR_OP_RECV, fd));
	}
}

/*
 * An app that sends in on_move_out (cr_net.h forbids it): the bytes it queued go out from
 * here, the app takes its state back, and the move is abandoned. Before, the connection
 * left with them still queued and they were dropped with the old slot (a TLS layer, seeing
 * itself not movable any more, aborted the process).
 */
static void
test_send_in_move_out(void)
{
	uint64_t aborts = STAT(0, move_aborts), in1 = STAT(1, moved_in);
	int fd = open_conn();

	st.send_in_out = true;
	CU_ASSERT_EQUAL(cr_conn_move(st.c, 1), 0);
	ut_poll_until_idle(20);
	CU_ASSERT_EQUAL(st.outs, 1);
	CU_ASSERT_EQUAL(st.ins, 1);
	CU_ASSERT_EQUAL(st.in_lcore, 0);
	CU_ASSERT_PTR_EQUAL(st.state_in, TOKEN);
	CU_ASSERT_EQUAL_FATAL(cr_conn_lcore(st.c), 0);
	CU_ASSERT_EQUAL(STAT(0, move_aborts), aborts + 1);
	CU_ASSERT_EQUAL(STAT(1, moved_in), in1);
	CU_ASSERT_PTR_NOT_NULL(ut_io_op(0, CR_OP_SEND, fd));
	CU_ASSERT_EQUAL(st.closes, 0);
	close_conn();
}

/* What a move refuses at once. */
static void
test_move_refused(void)
{
	int fd = open_conn();

	(void)fd;
	CU_ASSERT_EQUAL(cr_conn_move(st.c, 0), -EINVAL);
	CU_ASSERT_EQUAL(cr_conn_move(st.c, CR_MAX_LCORES), -EINVAL);
	CU_ASSERT_EQUAL(cr_conn_send(st.c, "x", 1), 0);
	CU_ASSERT_EQUAL(cr_conn_move(st.c, 1), -EBUSY);
	CU_ASSERT_FALSE(cr_conn_moving(st.c));
	close_conn();
}

/*
 * The target retires between cr_conn_move() and the hand-over: the move is abandoned
 * before on_move_out, and the connection stays on lcore 0, reading.
 */
static void
test_target_retires_before(void)
{
	int fd = open_conn();
	unsigned i;

	CU_ASSERT_EQUAL(cr_conn_move(st.c, 2), 0);
	CU_ASSERT_EQUAL_FATAL(cr_lcore_retire(2, NULL, NULL), 0);
	for (i = 0; i < 50; i++) {
		ut_poll_until_idle(20);
		if (lcore_done(2))
			break;
	}
	CU_ASSERT(i < 50);
	CU_ASSERT_EQUAL(st.outs, 0);
	CU_ASSERT_EQUAL(st.ins, 0);
	CU_ASSERT_EQUAL_FATAL(cr_conn_lcore(st.c), 0);
	CU_ASSERT_PTR_NOT_NULL(ut_io_op(0, CR_OP_RECV, fd));
	CU_ASSERT_EQUAL(cr_conn_move(st.c, 2), -ESHUTDOWN);
	close_conn();
}

/*
 * The target begins retiring after the connection was handed to it (the retire request
 * queued behind the move message): it takes the connection, and its own retire moves it
 * on to the lcore that stays — back to 0 here — instead of closing it.
 */
static void
test_target_retires_after(void)
{
	int fd = open_conn();
	unsigned i;

	CU_ASSERT_EQUAL(cr_conn_move(st.c, 1), 0);
	for (i = 0; i < 20 && st.outs == 0; i++)
		ut_turn(0);
	CU_ASSERT_EQUAL_FATAL(st.outs, 1);
	CU_ASSERT_EQUAL(st.ins, 0); /* the message waits in lcore 1's mailbox */
	CU_ASSERT_EQUAL_FATAL(cr_lcore_retire(1, NULL, NULL), 0);
	for (i = 0; i < 50; i++) {
		ut_poll_until_idle(20);
		if (lcore_done(1))
			break;
		ut_now += 10 * 1000 * 1000;
	}
	CU_ASSERT(i < 50); /* nothing of the connection holds the retire */
	CU_ASSERT_EQUAL(st.outs, 2);
	CU_ASSERT_EQUAL(st.ins, 2);
	CU_ASSERT_EQUAL(st.closes, 0);
	CU_ASSERT_EQUAL(st.drops, 0);
	CU_ASSERT_EQUAL_FATAL(cr_conn_lcore(st.c), 0);
	CU_ASSERT_PTR_NOT_NULL(ut_io_op(0, CR_OP_RECV, fd));
	close_conn();
}

/*
 * Two retires race: the connection's lcore (1) retires and moves it at its boundary to
 * the one other RUNNING lcore (2), whose own retire is asked while the connection is in
 * its mailbox. 2 takes it and moves it on to 0, the one that stays: never closed, never
 * dropped, and both lcores reach OFFLINE. (Fresh lcores: the tests above retired theirs.)
 */
static void
test_two_retires(void)
{
	uint64_t out;
	int fd;
	unsigned i;

	ut_stop();
	CU_ASSERT_EQUAL_FATAL(ut_start_io(3), 0);
	fd = open_conn();
	CU_ASSERT_EQUAL(cr_conn_move(st.c, 1), 0);
	ut_poll_until_idle(20);
	CU_ASSERT_EQUAL_FATAL(cr_conn_lcore(st.c), 1);
	out = STAT(1, moved_out);
	ut_set_current(0);
	CU_ASSERT_EQUAL_FATAL(cr_lcore_retire(1, NULL, NULL), 0);
	for (i = 0; i < 50 && STAT(1, moved_out) == out; i++) {
		ut_turn(0);
		ut_turn(1);
		(void)lcore_done(1); /* the loop's check, where the closing begins */
		ut_now += 10 * 1000 * 1000;
	}
	CU_ASSERT_EQUAL_FATAL(STAT(1, moved_out), out + 1);
	CU_ASSERT_EQUAL(st.ins, 1); /* the message waits in lcore 2's mailbox */
	CU_ASSERT_EQUAL_FATAL(cr_lcore_retire(2, NULL, NULL), 0);
	for (i = 0; i < 100; i++) {
		ut_poll_until_idle(20);
		if (lcore_done(1) && lcore_done(2))
			break;
		ut_now += 10 * 1000 * 1000;
	}
	CU_ASSERT(i < 100);
	CU_ASSERT_EQUAL(st.outs, 3);
	CU_ASSERT_EQUAL(st.ins, 3);
	CU_ASSERT_EQUAL(st.closes, 0);
	CU_ASSERT_EQUAL(st.drops, 0);
	CU_ASSERT_EQUAL_FATAL(cr_conn_lcore(st.c), 0);
	CU_ASSERT_PTR_NOT_NULL(ut_io_op(0, CR_OP_RECV, fd));
	close_conn();
}


/*
 * A peer that reads nothing: its answers stay queued, so the connection is never quiet
 * enough to move. Once NET_LINGER_NS passed with none of them taken it is closed as an
 * unmovable one is at its boundary (its answers get the linger) and the lcore retires.
 * (Before: the retire waited for the queue to drain, for ever.)
 */
static void
test_unread_answers_close(void)
{
	unsigned i;
	int fd;

	ut_stop();
	CU_ASSERT_EQUAL_FATAL(ut_start_io(3), 0);
	fd = open_conn();
	CU_ASSERT_EQUAL(cr_conn_move(st.c, 1), 0);
	ut_poll_until_idle(20);
	CU_ASSERT_EQUAL_FATAL(cr_conn_lcore(st.c), 1);
	ut_set_current(1);
	CU_ASSERT_EQUAL(cr_conn_send(st.c, "answer\n", 7), 0);
	ut_poll_until_idle(20);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ut_io_op(1, CR_OP_SEND, fd)); /* never completes */
	ut_set_current(0);
	CU_ASSERT_EQUAL_FATAL(cr_lcore_retire(1, NULL, NULL), 0);
	/* Within the linger's time: it waits for its answers to go, to move. */
	for (i = 0; i < 100; i++) {
		ut_turn(0);
		ut_turn(1);
		CU_ASSERT_FALSE(lcore_done(1));
		ut_now += 10 * 1000 * 1000;
	}
	CU_ASSERT_EQUAL(st.closes, 0);
	CU_ASSERT_EQUAL(st.outs, 1); /* the first move only */
	/* Then closed, its answers given the linger; the lcore retires. */
	for (i = 0; i < 600; i++) {
		ut_poll_until_idle(20);
		if (lcore_done(1))
			break;
		ut_now += 10 * 1000 * 1000;
	}
	CU_ASSERT(i < 600);
	CU_ASSERT_EQUAL(st.closes, 1);
	CU_ASSERT_EQUAL(st.outs, 1);
}

static const struct ut_case cases[] = {
    {"move: quiet on the old lcore, receiving on the new one, bytes in order", test_move},
    {"half a request completes before the cancel: move abandoned, retried later",
     test_move_racing_data},
    {"move while a cancel is out: waits for its final completion; stopped reads travel",
     test_move_during_cancel},
    {"the peer's EOF races the move: no move, EOF served, ended once", test_move_racing_eof},
    {"move asked inside a receive's completion (on_data)", test_move_inside_on_data},
    {"the peer's reset races the move: no move, ended once", test_move_racing_reset},
    {"layered: app out, layer out, layer in, app in; mid-exchange refused", test_layer_move},
    {"layered: the layer mid-exchange at the hand-over: abandoned", test_layer_busy_at_handover},
    {"layered: reads the layer stopped stay stopped on the new lcore", test_layer_read_stop_travels},
    {"layered: send refused after move_out: layer then app take back", test_layer_send_refused},
    {"layered: the new lcore's layer refuses: closed there, both freed",
     test_layer_refused_on_target},
    {"refused at once: self, no lcore, bytes queued", test_move_refused},
    {"on_move_out sends: the bytes go from here, the app takes its state back",
     test_send_in_move_out},
    {"target retires before the hand-over: the connection stays", test_target_retires_before},
    {"target retires after the hand-over: moved on, not closed", test_target_retires_after},
    {"two retires race: moved on by the second, to the lcore that stays", test_two_retires},
    {"a peer that reads none of its answers: closed at the linger, the lcore retires",
     test_unread_answers_close},
};

UT_MAIN("net_move", cases, suite_init, suite_fini)
