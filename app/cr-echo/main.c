/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cr-echo: TCP (and optionally UDP) echo on --listen HOST:PORT, served by every lcore.
 *
 * TCP: one SO_REUSEPORT listening socket per lcore (or one acceptor with
 * --single-acceptor); each connection's bytes are queued back to it, and when the peer
 * shuts its side the echo finishes and ours is shut too. UDP: one SO_REUSEPORT socket per
 * lcore, each datagram sent back to where it came from.
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
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cr_net.h"
#include "cr_reactor.h"
#include "cr_telemetry.h"

struct echo {
	struct cr_net_addr listen;
	bool have_listen;
	bool udp;
	bool single_acceptor;
	bool sockperf;
	unsigned long long max_conns;
	double idle_timeout;
	struct cr_lcore_table table;
	struct cr_listener *listener;
	struct cr_net_addr bound;
	/* Per lcore, written only by that lcore; read by main after the bind chain. */
	struct cr_udp *udp_sock[CR_MAX_LCORES];
	int udp_err[CR_MAX_LCORES];
	struct cr_call udp_call;
	int exit_code;
	/* --sockperf: per lcore, one parser per connection slot (cr_conn_index). */
	struct sp_parser *sp[CR_MAX_LCORES];
};

static struct echo app = {.max_conns = 4096};

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
	memset(&app.sp[cr_conn_lcore(c)][cr_conn_index(c)], 0, sizeof(struct sp_parser));
}

static void
sp_data(struct cr_conn *c, const void *data, size_t len)
{
	struct sp_parser *p = &app.sp[cr_conn_lcore(c)][cr_conn_index(c)];
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

static int
udp_bind_here(void)
{
	static const struct cr_udp_opts opts = {.reuseport = true};
	unsigned me = cr_lcore_id();

	if (app.udp_sock[me] != NULL)
		return 0;
	app.udp_sock[me] = cr_udp_bind(&app.bound, &opts, app.sockperf ? &sp_udp_ops : &udp_ops,
				       NULL);
	app.udp_err[me] = app.udp_sock[me] == NULL ? -errno : 0;
	return app.udp_err[me];
}

static void
udp_bind_visit(void *arg)
{
	(void)arg;
	udp_bind_here();
}

static void print_ready(void);

static void
udp_bind_done(void *arg)
{
	char a[CR_NET_ADDR_STRLEN];
	unsigned i;

	(void)arg;
	for (i = 0; i < CR_MAX_LCORES; i++) {
		if (app.udp_err[i] != 0) {
			fprintf(stderr, "cr-echo: UDP on %s, lcore %u: %s\n",
				cr_net_addr_format(&app.bound, a, sizeof(a)), i,
				cr_strerror(app.udp_err[i]));
			app.exit_code = 1;
			cr_reactor_stop();
			return;
		}
	}
	print_ready();
}

/* ---- start and stop ---- */

/* A stop or a retirement needs nothing of ours: lib/net stops taking connections and
 * ends each one once every byte it had received is echoed. */
static const struct cr_reactor_hooks hooks = {0};

static void
print_ready(void)
{
	char a[CR_NET_ADDR_STRLEN], cl[256];
	unsigned n = cr_lcore_count();

	printf("cr-echo: listening on %s (tcp%s), %u lcore%s (%s), io driver %s\n",
	       cr_net_addr_format(&app.bound, a, sizeof(a)), app.udp ? ", udp" : "", n,
	       n == 1 ? "" : "s", cr_lcore_table_corelist(&app.table, cl, sizeof(cl)),
	       cr_reactor_driver());
	fflush(stdout);
}

/* On the main lcore, as its first message. */
static void
start_serving(void *arg)
{
	struct cr_tcp_listen_opts lo = {0};
	char a[CR_NET_ADDR_STRLEN];
	int rc;

	(void)arg;
	lo.addr = app.listen;
	lo.single_acceptor = app.single_acceptor;
	lo.conn.idle_timeout_ns = (uint64_t)(app.idle_timeout * 1e9);
	rc = cr_tcp_listen(&lo, app.sockperf ? &sp_tcp_ops : &tcp_ops, NULL, &app.listener);
	if (rc != 0) {
		fprintf(stderr, "cr-echo: --listen %s: %s\n",
			cr_net_addr_format(&app.listen, a, sizeof(a)), cr_strerror(rc));
		app.exit_code = 1;
		cr_reactor_stop();
		return;
	}
	cr_listener_addr(app.listener, &app.bound);
	if (!app.udp) {
		print_ready();
		return;
	}
	/* Bind here first so an error is reported before anything else is started. */
	if (udp_bind_here() != 0) {
		udp_bind_done(NULL);
		return;
	}
	cr_for_each_lcore(&app.udp_call, udp_bind_visit, NULL, udp_bind_done, NULL);
}

static void
print_totals(void)
{
	struct cr_net_stats s, t = {0};
	unsigned i;

	for (i = 0; i < app.table.n; i++) {
		if (cr_net_stats(app.table.lcores[i].lcore_id, &s) != 0)
			continue;
		t.accepted += s.accepted;
		t.refused += s.refused;
		t.accept_backoffs += s.accept_backoffs;
		t.bytes_in += s.bytes_in;
		t.bytes_out += s.bytes_out;
		t.short_sends += s.short_sends;
		t.udp_in += s.udp_in;
		t.udp_out += s.udp_out;
		t.udp_drops += s.udp_drops;
	}
	printf("cr-echo: stopped: %" PRIu64 " connections (%" PRIu64 " refused, %" PRIu64
	       " accept back-offs), %" PRIu64 " bytes in, %" PRIu64 " out (%" PRIu64
	       " short sends); %" PRIu64 " datagrams in, %" PRIu64 " out, %" PRIu64
	       " dropped\n",
	       t.accepted, t.refused, t.accept_backoffs, t.bytes_in, t.bytes_out, t.short_sends,
	       t.udp_in, t.udp_out, t.udp_drops);
	fflush(stdout);
}

/* The unix socket (and --metrics), after the lcores exist; lib/net's counters are there. */
static int
telemetry_setup(const struct cr_eal_config *cfg)
{
	int rc;

	rc = cr_telemetry_start(cfg, "cr-echo");
	if (rc == 0)
		cr_telemetry_announce("cr-echo");
	return rc;
}

/* ---- options ---- */

static int
set_listen(const char *v, void *ctx)
{
	(void)ctx;
	if (cr_net_addr_parse(v, &app.listen) != 0)
		return -EINVAL;
	app.have_listen = true;
	return 0;
}

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
alloc_parsers(void)
{
	unsigned i;

	for (i = 0; i < app.table.n; i++) {
		unsigned id = app.table.lcores[i].lcore_id;

		app.sp[id] = cr_numa_zalloc(sizeof(struct sp_parser) * app.max_conns,
					    app.table.lcores[i].numa_node);
		if (app.sp[id] == NULL)
			return -ENOMEM;
	}
	return 0;
}

static void
free_parsers(void)
{
	unsigned i;

	for (i = 0; i < CR_MAX_LCORES; i++)
		cr_numa_free(app.sp[i]);
}

int
main(int argc, char **argv)
{
	static const struct cr_opt opts[] = {
		{"listen", 0, "HOST:PORT", "address to serve (required), e.g. 127.0.0.1:7000",
		 "HOST:PORT with a numeric host, [IPv6]:PORT, localhost:PORT or *:PORT; port "
		 "0-65535",
		 set_listen, NULL},
		{"udp", 0, NULL, "echo UDP datagrams on the same address and port too",
		 "--udp without a value", set_flag, &app.udp},
		{"max-connections", 0, "N", "TCP connections per lcore (default 4096)",
		 "1-16777216", set_max_conns, NULL},
		{"idle-timeout", 0, "SECONDS",
		 "close a TCP connection idle this long (default 0: never)",
		 "a number of seconds from 0 to 1000000, e.g. 0.5 or 30", set_idle, NULL},
		{"single-acceptor", 0, NULL,
		 "accept on one lcore and hand connections out round robin (default: every lcore "
		 "accepts on its own SO_REUSEPORT socket)",
		 "--single-acceptor without a value", set_flag, &app.single_acceptor},
		{"sockperf", 0, NULL,
		 "answer sockperf clients as `sockperf server` does (reply only to messages that "
		 "ask for one)",
		 "--sockperf without a value", set_flag, &app.sockperf},
		CR_TELEMETRY_OPTS,
	};
	static const struct cr_app_info info = {
		"cr-echo", "echo TCP (and UDP) on every lcore", opts,
		sizeof(opts) / sizeof(opts[0])};
	struct cr_eal_config cfg;
	struct cr_net_config ncfg;
	int rc, first;

	cr_eal_config_defaults(&cfg);
	rc = cr_eal_parse_args(argc, argv, &info, &cfg, &app.table, &first);
	if (rc != 0)
		return rc > 0 ? 0 : 2;
	if (first < argc) {
		fprintf(stderr, "cr-echo: %s: unexpected argument; accepted: options only, see "
				"cr-echo --help\n",
			argv[first]);
		return 2;
	}
	if (!app.have_listen) {
		fprintf(stderr, "cr-echo: --listen: missing; accepted: HOST:PORT, e.g. "
				"127.0.0.1:7000 or [::1]:7000\n");
		return 2;
	}
	cr_net_config_defaults(&ncfg);
	ncfg.max_conns = (uint32_t)app.max_conns;
	rc = cr_net_configure(&ncfg);
	if (rc != 0) {
		fprintf(stderr, "cr-echo: cannot size lib/net: %s\n", cr_strerror(rc));
		return 1;
	}
	if (app.sockperf && alloc_parsers() != 0) {
		fprintf(stderr, "cr-echo: %s\n", cr_strerror(-ENOMEM));
		return 1;
	}
	/* Signals go to one thread (the first SIGINT/SIGTERM stops gracefully, a second
	 * forces); lcores never see them. SIGPIPE is left alone on purpose: sends use
	 * MSG_NOSIGNAL, and the tests check that. */
	cr_reactor_signals_block(false);
	rc = cr_reactor_init(&cfg, &app.table, &hooks);
	if (rc != 0) {
		/* -ENODEV: the --io-driver asked for was refused; the line above says why. */
		if (rc == -ENODEV) {
			fprintf(stderr, "cr-echo: --io-driver: the driver asked for cannot run here\n");
			return 2;
		}
		fprintf(stderr, "cr-echo: cannot start: %s\n", cr_strerror(rc));
		return 1;
	}
	(void)cr_reactor_signals_start(NULL, NULL, NULL);
	rc = telemetry_setup(&cfg);
	if (rc == 0)
		rc = cr_send(cr_lcore_main(), start_serving, NULL);
	if (rc != 0) {
		/* The library logged what failed (a telemetry path, an address) and why. */
		fprintf(stderr, "cr-echo: cannot start: %s%s\n", cr_strerror(rc),
			cr_telemetry_socket_path() == NULL ? "; --telemetry off runs without it"
							   : "");
		cr_reactor_stop();
		app.exit_code = 1;
	}
	cr_reactor_run();
	cr_telemetry_stop();
	cr_reactor_fini();
	print_totals();
	free_parsers();
	return app.exit_code;
}
