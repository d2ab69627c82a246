/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * upper: a TCP server that upper-cases each line its clients send, on every lcore; the
 * whole coreact app API on one page. Built outside the tree against the installed library:
 *   cc -std=c11 main.c $(pkg-config --cflags --libs libcoreact) -o upper
 *   ./upper --listen 127.0.0.1:7070        (then: nc 127.0.0.1 7070)
 * --config FILE, -l, --io-driver, --telemetry, SIGINT/SIGTERM, the exit status: lib/app.
 */
#include <ctype.h>
#include <stdio.h>

#include "cr_app.h"
#include "cr_net.h"
#include "cr_telemetry.h"

#define LINE_MAX_BYTES 1024

/* Per connection: the line read so far. Each lcore has an array of them. */
struct line {
	unsigned len;
	char buf[LINE_MAX_BYTES];
};

static struct cr_net_addr listen_addr; /* --listen */
static struct cr_net_config net;       /* lib/net's sizing: its defaults */
static struct cr_listener *listener;
static int lines_local, lines_counter; /* lcore-local and telemetry ids */

/* A whole line (or a full buffer) goes back upper-cased. */
static void
flush_line(struct cr_conn *c, struct line *l)
{
	for (unsigned i = 0; i < l->len; i++)
		l->buf[i] = (char)toupper((unsigned char)l->buf[i]);
	if (cr_conn_send(c, l->buf, l->len) != 0)
		cr_conn_destroy(c); /* no room to queue the answer: reset */
	l->len = 0;
	cr_telemetry_add(lines_counter, 1);
}

static void
on_open(struct cr_conn *c)
{
	struct line *lines = cr_lcore_local(lines_local);

	lines[cr_conn_index(c)].len = 0;
}

static void
on_data(struct cr_conn *c, const void *data, size_t len)
{
	struct line *l = (struct line *)cr_lcore_local(lines_local) + cr_conn_index(c);
	const char *p = data;

	for (size_t i = 0; i < len; i++) {
		l->buf[l->len++] = p[i];
		if (p[i] == '\n' || l->len == LINE_MAX_BYTES)
			flush_line(c, l);
	}
}

static const struct cr_conn_ops ops = {.on_open = on_open, .on_data = on_data};

/* After the options, before the lcores start: per-lcore state and a counter. */
static int
configure(int argc, char **argv, void *arg)
{
	(void)argc, (void)argv, (void)arg;
	if (listen_addr.len == 0)
		cr_net_addr_parse("127.0.0.1:7070", &listen_addr);
	lines_local =
	    cr_lcore_local_register(sizeof(struct line) * net.max_conns, NULL, NULL, NULL);
	lines_counter =
	    cr_telemetry_counter_register("upper_lines", CR_TELEMETRY_COUNTER, "lines upper-cased");
	return lines_local < 0 ? lines_local : lines_counter < 0 ? lines_counter : 0;
}

/* On the main lcore, once: one SO_REUSEPORT socket per lcore, then the ready line. */
static int
start(void *arg)
{
	struct cr_tcp_listen_opts lo = {.addr = listen_addr};
	struct cr_net_addr bound;
	char a[CR_NET_ADDR_STRLEN];
	int rc = cr_tcp_listen(&lo, &ops, arg, &listener);

	if (rc != 0)
		return cr_app_errorf(rc, "--listen %s: %s",
				     cr_net_addr_format(&listen_addr, a, sizeof(a)),
				     cr_strerror(rc));
	cr_listener_addr(listener, &bound);
	printf("upper: listening on %s, %u lcores\n", cr_net_addr_format(&bound, a, sizeof(a)),
	       cr_lcore_count());
	fflush(stdout);
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct cr_opt opts[] = {
	    CR_APP_OPT_LISTEN(&listen_addr, "address to serve (default 127.0.0.1:7070)"),
	};
	static const struct cr_app app = {
	    .name = "upper",
	    .summary = "a TCP server that upper-cases each line",
	    .opts = opts,
	    .n_opts = 1,
	    .net = &net,
	    .configure = configure,
	    .start = start,
	    /* Retire, shutdown: lib/net stops accepting on a closing lcore and ends each
	     * connection at a boundary (all it had received answered): nothing to add. */
	};

	return cr_app_run(&app, argc, argv);
}
