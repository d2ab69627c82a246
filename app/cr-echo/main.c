/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cr-echo: TCP (and optionally UDP) echo on --listen HOST:PORT, served by every lcore.
 *
 * TCP: one SO_REUSEPORT listening socket per lcore (or one acceptor with
 * --single-acceptor); each connection's bytes are queued back to it, and when the peer
 * shuts its side the echo finishes and ours is shut too. UDP: one SO_REUSEPORT socket per
 * lcore, each datagram sent back to where it came from.
 *
 * --zero-copy echoes each received buffer itself: held (cr_conn_hold()) and queued with
 * cr_conn_send_buf(), no copy; a hold refused (the connection at its cap, or the lcore's
 * spares in use) falls back to a copy. To compare the two paths (cr-bench echo).
 *
 * --sockperf answers sockperf clients the way `sockperf server` does: a message is
 * echoed only if it asks for a reply (ping-pong), with its client flag cleared; the
 * others (throughput, warm-up) are consumed. Messages are framed by their 14-byte header.
 *
 * Ready when it prints "cr-echo: listening on ADDR ..."; SIGINT or SIGTERM stops it
 * gracefully within --shutdown-timeout, a second signal at once.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cr_app.h"
#include "cr_net.h"
#include "cr_reactor.h"

struct echo {
	struct cr_net_addr listen;
	bool udp;
	bool single_acceptor;
	bool sockperf;
	bool zero_copy;
	unsigned long long max_conns;
	double idle_timeout;
	struct cr_net_config net;
	struct cr_listener *listener;
	struct cr_net_addr bound;
	/* bound is set: lcores started from now on bind their UDP socket themselves.
	 * release: after bound; pairs with the acquire in lcore_start(). */
	_Atomic bool udp_ready;
	struct cr_call udp_call;
	/* The first UDP bind that failed in the start-up chain, and where. */
	int udp_err;
	unsigned udp_err_lcore;
	/* Lcore-locals: the lcore's UDP socket; with --sockperf, one parser per
	 * connection slot (cr_conn_index). */
	int local_udp, local_sp;
};

/* max_conns 0: what fits the descriptor limit (cr_app_conns_fit()). */
static struct echo app = {.idle_timeout = 60, .local_udp = -1, .local_sp = -1};

/* ---- TCP ---- */

static void
tcp_data(struct cr_conn *c, const void *data, size_t len)
{
	/* Backpressure keeps a connection near its high watermark; -ENOBUFS means the
	 * whole lcore's pool is taken, and an echo that drops bytes is wrong: reset. */
	if (cr_conn_send(c, data, len) != 0)
		cr_conn_destroy(c);
}

static const struct cr_conn_ops tcp_ops = {
	.on_data = tcp_data,
	/* on_eof NULL: shut our side once the echo is out, then the connection ends. */
};

/* --zero-copy: the receive buffer itself goes back out; the queue keeps it until sent. */
static void
tcp_data_held(struct cr_conn *c, const void *data, size_t len)
{
	struct cr_buf *b = cr_conn_hold(c);
	int rc;

	if (b == NULL) {
		rc = cr_conn_send(c, data, len);
	} else {
		rc = cr_conn_send_buf(c, b, 0, b->len);
		cr_buf_unref(b);
	}
	if (rc != 0)
		cr_conn_destroy(c);
}

static const struct cr_conn_ops tcp_held_ops = {.on_data = tcp_data_held};

/* ---- sockperf's protocol ---- */

/* sockperf's message header: u64 sequence, u16 flags, u32 length (header included),
 * all big-endian, packed: 14 bytes. */
#define SP_HDR 14u
#define SP_FLAGS_AT 8
#define SP_LEN_AT 10
#define SP_CLIENT 0x1u
#define SP_PONG 0x2u
#define SP_WARMUP 0x4u
#define SP_MAX_MSG 65536u

struct sp_parser {
	uint8_t hdr[SP_HDR];
	uint8_t have; /* header bytes so far */
	bool reply;   /* the current message is echoed */
	uint32_t left; /* its body bytes still to come */
};

/* Parse a complete header; mark it as the server's if it is to be answered. */
static int
sp_header(uint8_t *hdr, bool *reply, uint32_t *body)
{
	uint16_t flags = (uint16_t)(hdr[SP_FLAGS_AT] << 8 | hdr[SP_FLAGS_AT + 1]);
	uint32_t len = (uint32_t)hdr[SP_LEN_AT] << 24 | (uint32_t)hdr[SP_LEN_AT + 1] << 16 |
		       (uint32_t)hdr[SP_LEN_AT + 2] << 8 | hdr[SP_LEN_AT + 3];

	if (len < SP_HDR || len > SP_MAX_MSG)
		return -EPROTO;
	*reply = (flags & SP_CLIENT) && (flags & SP_PONG) && !(flags & SP_WARMUP);
	*body = len - SP_HDR;
	if (*reply)
		hdr[SP_FLAGS_AT + 1] &= (uint8_t)~SP_CLIENT;
	return 0;
}

static void
sp_open(struct cr_conn *c)
{
	struct sp_parser *parsers = cr_lcore_local(app.local_sp);

	memset(&parsers[cr_conn_index(c)], 0, sizeof(struct sp_parser));
}

static void
sp_data(struct cr_conn *c, const void *data, size_t len)
{
	struct sp_parser *p = (struct sp_parser *)cr_lcore_local(app.local_sp) + cr_conn_index(c);
	const uint8_t *b = data;
	size_t n;
	int rc = 0;

	while (len > 0 && rc == 0) {
		if (p->have < SP_HDR) {
			n = SP_HDR - p->have;
			if (n > len)
				n = len;
			memcpy(p->hdr + p->have, b, n);
			p->have = (uint8_t)(p->have + n);
			if (p->have == SP_HDR) {
				rc = sp_header(p->hdr, &p->reply, &p->left);
				if (rc == 0 && p->reply)
					rc = cr_conn_send(c, p->hdr, SP_HDR);
			}
		} else {
			n = p->left < len ? p->left : len;
			if (p->reply)
				rc = cr_conn_send(c, b, n);
			p->left -= (uint32_t)n;
		}
		b += n;
		len -= n;
		if (p->have == SP_HDR && p->left == 0)
			p->have = 0;
	}
	if (rc != 0)
		cr_conn_destroy(c);
}

static const struct cr_conn_ops sp_tcp_ops = {
	.on_open = sp_open,
	.on_data = sp_data,
};

/* ---- UDP ---- */

static void
udp_datagram(struct cr_udp *u, const void *data, size_t len, const struct cr_net_addr *from)
{
	/* A full send queue drops the echo, as UDP may; lib/net counts it. */
	(void)cr_udp_send(u, data, len, from);
}

static const struct cr_udp_ops udp_ops = {.on_datagram = udp_datagram};

static void
sp_datagram(struct cr_udp *u, const void *data, size_t len, const struct cr_net_addr *from)
{
	static _Thread_local uint8_t msg[SP_MAX_MSG];
	bool reply;
	uint32_t body;

	if (len < SP_HDR || len > SP_MAX_MSG)
		return;
	memcpy(msg, data, len);
	if (sp_header(msg, &reply, &body) == 0 && reply)
		(void)cr_udp_send(u, msg, len, from);
}

static const struct cr_udp_ops sp_udp_ops = {.on_datagram = sp_datagram};

/* The calling lcore's UDP socket, bound once per incarnation. */
static int
udp_bind_here(void)
{
	static const struct cr_udp_opts opts = {.reuseport = true};
	struct cr_udp **sock = cr_lcore_local(app.local_udp);

	if (*sock != NULL)
		return 0;
	*sock = cr_udp_bind(&app.bound, &opts, app.sockperf ? &sp_udp_ops : &udp_ops, NULL);
	return *sock == NULL ? -errno : 0;
}

static void
udp_bind_visit(void *arg)
{
	int rc;

	(void)arg;
	rc = udp_bind_here();
	if (rc != 0 && app.udp_err == 0) {
		/* The visits run one after another (cr_for_each_lcore): no race. */
		app.udp_err = rc;
		app.udp_err_lcore = cr_lcore_id();
	}
}

static void print_ready(void);

static void
udp_bind_done(void *arg)
{
	char a[CR_NET_ADDR_STRLEN];

	(void)arg;
	if (app.udp_err != 0) {
		cr_app_errorf(app.udp_err, "UDP on %s, lcore %u: %s",
			      cr_net_addr_format(&app.bound, a, sizeof(a)), app.udp_err_lcore,
			      cr_strerror(app.udp_err));
		cr_app_fail();
		return;
	}
	atomic_store_explicit(&app.udp_ready, true, memory_order_release);
	print_ready();
}

/* ---- start and stop ---- */

static void
print_ready(void)
{
	char a[CR_NET_ADDR_STRLEN], cl[256];
	unsigned n = cr_lcore_count();

	printf("cr-echo: listening on %s (tcp%s), %u lcore%s (%s), io driver %s\n",
	       cr_net_addr_format(&app.bound, a, sizeof(a)), app.udp ? ", udp" : "", n,
	       n == 1 ? "" : "s", cr_lcore_table_corelist(cr_app_lcore_table(), cl, sizeof(cl)),
	       cr_reactor_driver());
	fflush(stdout);
}

/* On every lcore at each start: an lcore started by a resize binds its UDP socket. */
static int
lcore_start(unsigned lcore, void *arg)
{
	char a[CR_NET_ADDR_STRLEN];
	int rc;

	(void)arg;
	if (!app.udp || !atomic_load_explicit(&app.udp_ready, memory_order_acquire))
		return 0; /* at start-up, start() binds every lcore once TCP has the port */
	rc = udp_bind_here();
	if (rc != 0)
		return cr_app_errorf(rc, "UDP on %s, lcore %u: %s",
				     cr_net_addr_format(&app.bound, a, sizeof(a)), lcore,
				     cr_strerror(rc));
	return 0;
}

/* On the main lcore, once. */
static int
start(void *arg)
{
	struct cr_tcp_listen_opts lo = {0};
	char a[CR_NET_ADDR_STRLEN];
	int rc;

	(void)arg;
	lo.addr = app.listen;
	lo.single_acceptor = app.single_acceptor;
	lo.conn.idle_timeout_ns = (uint64_t)(app.idle_timeout * 1e9);
	/* A full lcore closes its least recently active idle clients for new ones. */
	lo.conn.reclaimable = true;
	rc = cr_tcp_listen(&lo, app.sockperf ? &sp_tcp_ops : app.zero_copy ? &tcp_held_ops : &tcp_ops,
			   NULL, &app.listener);
	if (rc != 0)
		return cr_app_errorf(rc, "--listen %s: %s",
				     cr_net_addr_format(&app.listen, a, sizeof(a)), cr_strerror(rc));
	cr_listener_addr(app.listener, &app.bound);
	if (!app.udp) {
		print_ready();
		return 0;
	}
	/* Bind here first so an error is reported before anything else is started. */
	rc = udp_bind_here();
	if (rc != 0)
		return cr_app_errorf(rc, "UDP on %s, lcore %u: %s",
				     cr_net_addr_format(&app.bound, a, sizeof(a)), cr_lcore_id(),
				     cr_strerror(rc));
	cr_for_each_lcore(&app.udp_call, udp_bind_visit, NULL, udp_bind_done, NULL);
	return 0;
}

static int
print_totals(bool failed, void *arg)
{
	const struct cr_lcore_table *t = cr_app_lcore_table();
	struct cr_net_stats s, sum = {0};
	unsigned i;

	(void)arg;
	if (failed)
		return 0; /* it never served: no totals to print */
	for (i = 0; i < t->n; i++) {
		if (cr_net_stats(t->lcores[i].lcore_id, &s) != 0)
			continue;
		sum.accepted += s.accepted;
		sum.refused += s.refused;
		sum.accept_backoffs += s.accept_backoffs;
		sum.reclaimed += s.reclaimed;
		sum.bytes_in += s.bytes_in;
		sum.bytes_out += s.bytes_out;
		sum.short_sends += s.short_sends;
		sum.udp_in += s.udp_in;
		sum.udp_out += s.udp_out;
		sum.udp_drops += s.udp_drops;
	}
	printf("cr-echo: stopped: %" PRIu64 " connections (%" PRIu64 " refused, %" PRIu64
	       " accept back-offs, %" PRIu64 " closed to make room), %" PRIu64
	       " bytes in, %" PRIu64 " out (%" PRIu64 " short sends); %" PRIu64
	       " datagrams in, %" PRIu64 " out, %" PRIu64 " dropped\n",
	       sum.accepted, sum.refused, sum.accept_backoffs, sum.reclaimed, sum.bytes_in,
	       sum.bytes_out,
	       sum.short_sends, sum.udp_in, sum.udp_out, sum.udp_drops);
	fflush(stdout);
	return 0;
}

/* ---- options ---- */

static int
set_flag(const char *v, void *ctx)
{
	(void)v;
	*(bool *)ctx = true;
	return 0;
}

static int
set_max_conns(const char *v, void *ctx)
{
	(void)ctx;
	return cr_parse_uint(v, 1, 1u << 24, &app.max_conns);
}

static int
set_idle(const char *v, void *ctx)
{
	(void)ctx;
	if (cr_parse_seconds(v, &app.idle_timeout) != 0 || app.idle_timeout > 1e6)
		return -EINVAL;
	return 0;
}

static int
configure(int argc, char **argv, void *arg)
{
	(void)argc;
	(void)argv;
	(void)arg;
	if (app.listen.len == 0)
		return cr_app_errorf(-EINVAL, "--listen: missing; accepted: HOST:PORT, e.g. "
					      "127.0.0.1:7000 or [::1]:7000");
	if (app.zero_copy && app.sockperf)
		return cr_app_errorf(-EINVAL, "--zero-copy: not with --sockperf (which answers "
					      "messages, not bytes)");
	if (app.max_conns == 0)
		app.max_conns = cr_app_conns_fit();
	app.net.max_conns = (uint32_t)app.max_conns;
	if (app.udp) {
		app.local_udp = cr_lcore_local_register(sizeof(struct cr_udp *), NULL, NULL, NULL);
		if (app.local_udp < 0)
			return cr_app_errorf(app.local_udp, "%s", cr_strerror(app.local_udp));
	}
	if (app.sockperf) {
		app.local_sp = cr_lcore_local_register(sizeof(struct sp_parser) * app.max_conns,
						       NULL, NULL, NULL);
		if (app.local_sp < 0)
			return cr_app_errorf(app.local_sp, "%s", cr_strerror(app.local_sp));
	}
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct cr_opt opts[] = {
		CR_APP_OPT_LISTEN(&app.listen, "address to serve (required), e.g. 127.0.0.1:7000"),
		{"udp", 0, NULL, "echo UDP datagrams on the same address and port too",
		 "--udp without a value", set_flag, &app.udp},
		{"max-connections", 0, "N",
		 "TCP connections per lcore (default: 4096, or fewer to fit the descriptor "
		 "limit); a full lcore closes its least recently active idle connection for a "
		 "new one",
		 "1-16777216", set_max_conns, NULL},
		{"idle-timeout", 0, "SECONDS",
		 "close a TCP connection idle this long (default 60; 0: never)",
		 "a number of seconds from 0 to 1000000, e.g. 0.5 or 30", set_idle, NULL},
		{"single-acceptor", 0, NULL,
		 "accept on one lcore and hand connections out round robin (default: every lcore "
		 "accepts on its own SO_REUSEPORT socket)",
		 "--single-acceptor without a value", set_flag, &app.single_acceptor},
		{"sockperf", 0, NULL,
		 "answer sockperf clients as `sockperf server` does (reply only to messages that "
		 "ask for one)",
		 "--sockperf without a value", set_flag, &app.sockperf},
		{"zero-copy", 0, NULL,
		 "echo each receive buffer itself (held, sent without a copy; a copy when the "
		 "connection holds its cap of buffers or the lcore's spares are in use)",
		 "--zero-copy without a value", set_flag, &app.zero_copy},
	};
	/* SIGPIPE is left alone on purpose: sends use MSG_NOSIGNAL, and the tests check that. */
	static const struct cr_app echo = {
		.name = "cr-echo",
		.summary = "echo TCP (and UDP) on every lcore",
		.opts = opts,
		.n_opts = sizeof(opts) / sizeof(opts[0]),
		.net = &app.net,
		.configure = configure,
		.lcore_start = lcore_start,
		.start = start,
		/* No retire or shutdown hook: lib/net stops taking connections on a closing
		 * lcore and ends each one once every byte it had received is echoed. */
		.fini = print_totals,
	};

	return cr_app_run(&echo, argc, argv);
}
