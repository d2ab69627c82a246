/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cr-http: an HTTP/1.1 server on --listen HOST:PORT, served by every lcore.
 *
 * Routes: /plaintext ("Hello, World!"), /json ({"message":"Hello, World!"}), and with
 * --root DIR the files under DIR (GET and HEAD). Keep-alive, pipelining (the responses to
 * one received batch go out with one send), HTTP/1.0, Connection: close, HEAD.
 *
 * Each connection is parsed in place from the receive buffer: only a head cut by the end
 * of a buffer is copied, into a staging buffer from a per-lcore pool. Responses of one
 * on_data are written into a per-lcore output buffer and handed to lib/net once. Nothing
 * is allocated per request.
 *
 * Shutdown (SIGINT/SIGTERM): stop accepting, close idle connections, let every request
 * in flight finish (its response says Connection: close), bounded by --shutdown-timeout;
 * a second signal forces it.
 *
 * With --tls-listen (http_tls.c), HTTPS on a second listener: the same callbacks, lib/tls
 * in between; ALPN http/1.1; --hsts.
 *
 * Files, each one concern, calling downward only: main.c (options, start, totals) ->
 * http_conn.c (connection callbacks) -> http_pipeline.c (requests on a connection) ->
 * http_static.c (files under --root) -> http_splice.c (a large body by splice) ->
 * http_out.c (the response writer);
 * http_shutdown.c (the stop and the drain), http_lcore.c (per-lcore state), http_date.c,
 * http_parse.c. http_static.c reports the end of a transfer through http_cfg.file_done.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cr_app.h"
#include "cr_telemetry.h"
#include "cr_tls.h"
#include "http.h"

struct http_cfg http_cfg = {
    .plain_path = "/plaintext",
    .plain_path_len = 10,
    .json_path = "/json",
    .json_path_len = 5,
    .root_fd = -1,
};

static struct {
	struct cr_net_addr listen;
	struct cr_net_config net;
	struct cr_listener *listener;
	struct cr_net_addr bound;
	unsigned long long max_conns;
	double header_timeout, keepalive, body_timeout;
	unsigned long long min_body_rate;
	unsigned long long max_line, max_header_bytes, max_fields, max_body;
	const char *root;
	const char *access_log; /* NULL: off */
	unsigned long long splice_min;
} app = {
    .max_conns = 0, /* conns_default() */
    .header_timeout = 10,
    .keepalive = 75,
    .body_timeout = 60,
    .min_body_rate = 500,
    .max_line = 8192,
    .max_header_bytes = 16384,
    .max_fields = 100,
    .max_body = 1u << 20,
    .splice_min = HTTP_SPLICE_MIN,
};

/* Prometheus: one metric per family, the unit in the name, the status class a label. */
static const struct cr_telemetry_prom ctr_prom[CNT_COUNT] = {
    [CNT_REQUESTS] = {"http_requests"},
    [CNT_RESP_1XX] = {"http_responses", "code", "1xx"},
    [CNT_RESP_2XX] = {"http_responses", "code", "2xx"},
    [CNT_RESP_3XX] = {"http_responses", "code", "3xx"},
    [CNT_RESP_4XX] = {"http_responses", "code", "4xx"},
    [CNT_RESP_5XX] = {"http_responses", "code", "5xx"},
    [CNT_PARSE_ERRORS] = {"http_parse_errors"},
    [CNT_HEADER_TIMEOUTS] = {"http_header_timeouts"},
    [CNT_STATIC_BYTES] = {"http_static_sent_bytes"},
    [CNT_BODY_TIMEOUTS] = {"http_body_timeouts"},
    [CNT_RECLAIMED] = {"http_reclaimed_connections"},
    [CNT_SPLICED] = {"http_spliced_responses"},
};

int http_hist_request = -1;

/* A request is answered: count the time since its head was parsed, once. */
void
http_request_done(struct http_conn *h)
{
	if (h->req_start_ns == 0)
		return;
	cr_telemetry_observe_ns(http_hist_request, cr_clock_ns() - h->req_start_ns);
	h->req_start_ns = 0;
}

static const char *const ctr_names[CNT_COUNT][2] = {
    [CNT_REQUESTS] = {"http_requests", "requests whose head was parsed"},
    [CNT_RESP_1XX] = {"http_responses_1xx", "responses by status class (1xx: 100 Continue)"},
    [CNT_RESP_2XX] = {"http_responses_2xx", "responses 200-299"},
    [CNT_RESP_3XX] = {"http_responses_3xx", "responses 300-399 (304)"},
    [CNT_RESP_4XX] = {"http_responses_4xx", "responses 400-499"},
    [CNT_RESP_5XX] = {"http_responses_5xx", "responses 500-599"},
    [CNT_PARSE_ERRORS] = {"http_parse_errors", "requests refused as malformed (closed)"},
    [CNT_HEADER_TIMEOUTS] = {"http_header_timeouts", "connections closed at --header-timeout"},
    [CNT_STATIC_BYTES] = {"http_static_bytes", "file bytes sent from --root"},
    [CNT_BODY_TIMEOUTS] = {"http_body_timeouts",
			   "connections closed at --body-timeout or --min-body-rate"},
    [CNT_RECLAIMED] = {"http_reclaimed",
		       "idle or slow connections ended to keep the reserve of slots free"},
    [CNT_SPLICED] = {"http_spliced", "file bodies sent by splice (--splice-min)"},
};

/* ---- start and stop ---- */

/* On the main lcore, once every lcore runs. */
static int
start(void *arg)
{
	struct cr_tcp_listen_opts lo = {0};
	char a[CR_NET_ADDR_STRLEN], cl[256];
	unsigned n;
	int rc;

	(void)arg;
	lo.addr = app.listen;
	lo.conn.idle_timeout_ns = http_cfg.keepalive_ns;
	/* Out of slots or descriptors, lib/net may end an idle keep-alive connection for a
	 * new one (http_at_boundary() says which are idle); the reserve (http_reclaim.c)
	 * usually made room before. */
	lo.conn.reclaimable = true;
	rc = cr_tcp_listen(&lo, &http_conn_ops, NULL, &app.listener);
	if (rc != 0)
		return cr_app_errorf(rc, "--listen %s: %s",
				     cr_net_addr_format(&app.listen, a, sizeof(a)),
				     cr_strerror(rc));
	cr_listener_addr(app.listener, &app.bound);
	http_cfg.port = cr_net_addr_port(&app.bound);
	rc = http_tls_start(&http_conn_ops, http_cfg.keepalive_ns);
	if (rc != 0)
		return rc;
	n = cr_lcore_count();
	printf("cr-http: listening on %s (http), %u lcore%s (%s), io driver %s%s%s\n",
	       cr_net_addr_format(&app.bound, a, sizeof(a)), n, n == 1 ? "" : "s",
	       cr_lcore_table_corelist(cr_app_lcore_table(), cl, sizeof(cl)), cr_reactor_driver(),
	       app.root != NULL ? ", root " : "", app.root != NULL ? http_cfg.root : "");
	http_tls_ready_line();
	fflush(stdout);
	return 0;
}

/* The first SIGINT/SIGTERM, on the main lcore. */
static void
stop(void *arg)
{
	(void)arg;
	http_tls_stop(); /* its listener's close goes round before http_stop()'s visit */
	http_stop(&app.listener);
}

static int
fini(bool failed, void *arg)
{
	const struct cr_lcore_table *lt = cr_app_lcore_table();
	uint64_t t[CNT_COUNT] = {0}, v;
	unsigned i, k;

	(void)arg;
	for (i = 0; i < lt->n && !failed; i++) /* a failed start prints no totals */
		for (k = 0; k < CNT_COUNT; k++)
			if (cr_telemetry_counter_read(http_cfg.ctr[k], lt->lcores[i].lcore_id,
						      &v) == 0)
				t[k] += v;
	if (!failed)
		printf("cr-http: stopped: %" PRIu64 " requests, responses 2xx %" PRIu64
		       " 3xx %" PRIu64 " 4xx %" PRIu64 " 5xx %" PRIu64 ", %" PRIu64
		       " parse errors, %" PRIu64 " header timeouts\n",
		       t[CNT_REQUESTS], t[CNT_RESP_2XX], t[CNT_RESP_3XX], t[CNT_RESP_4XX],
		       t[CNT_RESP_5XX], t[CNT_PARSE_ERRORS], t[CNT_HEADER_TIMEOUTS]);
	fflush(stdout);
	if (http_cfg.root_fd >= 0)
		close(http_cfg.root_fd);
	http_access_close();
	http_tls_fini();
	return 0;
}

/* /http: the configuration and the totals (telemetry thread; the config is immutable
 * once the lcores run, the counters are read as /stats reads them). */
static int
tel_http(const char *cmd, const char *params, struct cr_json *j)
{
	const struct cr_lcore_table *lt = cr_app_lcore_table();
	char a[CR_NET_ADDR_STRLEN];
	uint64_t v, t;
	unsigned i, k;

	(void)cmd;
	(void)params;
	cr_json_object_begin(j, NULL);
	cr_json_string(j, "listen", cr_net_addr_format(&app.listen, a, sizeof(a)));
	cr_json_string(j, "root", http_cfg.root_fd >= 0 ? http_cfg.root : NULL);
	cr_json_object_begin(j, "limits");
	cr_json_u64(j, "max_request_line", http_cfg.lim.max_line);
	cr_json_u64(j, "max_header_bytes", http_cfg.lim.max_header_bytes);
	cr_json_u64(j, "max_header_fields", http_cfg.lim.max_fields);
	cr_json_u64(j, "max_body", http_cfg.lim.max_body);
	cr_json_u64(j, "splice_min", http_cfg.splice_min);
	cr_json_double(j, "header_timeout_s", (double)http_cfg.header_timeout_ns / 1e9);
	cr_json_double(j, "keepalive_timeout_s", (double)http_cfg.keepalive_ns / 1e9);
	cr_json_double(j, "body_timeout_s", (double)http_cfg.body_timeout_ns / 1e9);
	cr_json_u64(j, "min_body_rate", http_cfg.min_body_rate);
	cr_json_u64(j, "reserved_connections_per_lcore", http_cfg.reserve);
	cr_json_u64(j, "max_connections_per_lcore", http_cfg.max_conns);
	cr_json_object_end(j);
	cr_json_object_begin(j, "totals");
	for (k = 0; k < CNT_COUNT; k++) {
		for (t = 0, i = 0; i < lt->n; i++)
			if (cr_telemetry_counter_read(http_cfg.ctr[k], lt->lcores[i].lcore_id,
						      &v) == 0)
				t += v;
		cr_json_u64(j, ctr_names[k][0], t);
	}
	cr_json_object_end(j);
	cr_json_object_end(j);
	return 0;
}

/* ---- options ---- */

static int
set_uint(const char *v, void *ctx, unsigned long long min, unsigned long long max)
{
	return cr_parse_uint(v, min, max, ctx);
}

static int
set_conns(const char *v, void *ctx)
{
	return set_uint(v, ctx, 1, 1u << 20);
}

static int
set_rate(const char *v, void *ctx)
{
	return set_uint(v, ctx, 0, 1ull << 30);
}

static int
set_line(const char *v, void *ctx)
{
	return set_uint(v, ctx, 64, 1u << 20);
}

static int
set_hdr_bytes(const char *v, void *ctx)
{
	return set_uint(v, ctx, 64, 1u << 20);
}

static int
set_fields(const char *v, void *ctx)
{
	return set_uint(v, ctx, 1, 10000);
}

static int
set_body(const char *v, void *ctx)
{
	return set_uint(v, ctx, 0, 1ull << 40);
}

static int
set_splice_min(const char *v, void *ctx)
{
	return set_uint(v, ctx, 0, 1ull << 40);
}

static int
set_seconds(const char *v, void *ctx)
{
	double *d = ctx;

	if (cr_parse_seconds(v, d) != 0 || *d > 1e6)
		return -EINVAL;
	return 0;
}

static int
set_root(const char *v, void *ctx)
{
	(void)ctx;
	if (v[0] == '\0')
		return -EINVAL;
	app.root = v;
	return 0;
}

static int
set_access_log(const char *v, void *ctx)
{
	(void)ctx;
	if (v[0] == '\0')
		return -EINVAL;
	app.access_log = strcmp(v, "off") == 0 ? NULL : v;
	return 0;
}

/* --plaintext-path / --json-path: an absolute path, or off. */
static int
set_route(const char *v, void *ctx)
{
	bool json = ctx != NULL;

	if (strcmp(v, "off") == 0)
		v = "";
	else if (v[0] != '/' || strpbrk(v, "?# \t") != NULL)
		return -EINVAL;
	*(json ? &http_cfg.json_path : &http_cfg.plain_path) = v;
	*(json ? &http_cfg.json_path_len : &http_cfg.plain_path_len) = strlen(v);
	return 0;
}

static int
open_root(void)
{
	struct stat st;

	if (realpath(app.root, http_cfg.root) == NULL)
		return cr_app_errorf(-EINVAL, "--root %s: %s; accepted: an existing directory",
				     app.root, cr_strerror(errno));
	http_cfg.root_fd = open(http_cfg.root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (http_cfg.root_fd < 0 || fstat(http_cfg.root_fd, &st) != 0)
		return cr_app_errorf(-EINVAL, "--root %s: %s; accepted: an existing directory",
				     app.root, cr_strerror(errno));
	return 0;
}

/*
 * The default --max-connections: the slots lib/app says fit the descriptor limit (which it
 * raised to the hard one), halved with --root, where a connection may hold the file it
 * sends besides its socket.
 */
static unsigned long long
conns_default(void)
{
	unsigned long long n = cr_app_conns_fit();

	if (app.root != NULL)
		n /= 2;
	return n > 0 ? n : 1;
}

/* After the options: the limits, the counters and /http, lib/net's sizing, the lcores. */
static int
configure(int argc, char **argv, void *arg)
{
	unsigned i;
	int rc;

	(void)argc;
	(void)argv;
	(void)arg;
	if (app.header_timeout <= 0)
		return cr_app_errorf(-EINVAL, "--header-timeout 0: must be above 0; accepted: a "
					      "number of seconds above 0, e.g. 10");
	if (app.root != NULL && open_root() != 0)
		return -EINVAL;
	rc = app.access_log != NULL ? http_access_open(app.access_log) : 0;
	if (rc != 0)
		return cr_app_errorf(rc, "--access-log %s: %s; accepted: a file path, or off",
				     app.access_log, cr_strerror(rc));
	rc = http_tls_configure();
	if (rc != 0)
		return rc;
	http_cfg.lim.max_line = (uint32_t)app.max_line;
	http_cfg.lim.max_header_bytes = (uint32_t)app.max_header_bytes;
	http_cfg.lim.max_fields = (uint32_t)app.max_fields;
	http_cfg.lim.max_body = app.max_body;
	http_cfg.header_timeout_ns = (uint64_t)(app.header_timeout * 1e9);
	http_cfg.keepalive_ns = (uint64_t)(app.keepalive * 1e9);
	http_cfg.body_timeout_ns = (uint64_t)(app.body_timeout * 1e9);
	http_cfg.min_body_rate = http_cfg.body_timeout_ns > 0 ? app.min_body_rate : 0;
	http_cfg.splice_min = app.root != NULL ? app.splice_min : 0;
	/* Each lcore a pool of pipes (the build's io_pipes of io_pipe_size): a transfer that
	 * finds none free copies. Without --root or with --splice-min 0, no pipes at all. */
	if (http_cfg.splice_min != 0 && (rc = cr_io_pipe_pool(0, 0)) != 0)
		return cr_app_errorf(rc, "pipe pool: %s", cr_strerror(rc));
	if (app.max_conns == 0)
		app.max_conns = conns_default();
	http_cfg.max_conns = (uint32_t)app.max_conns;
	/* 1/32 of the slots, and one at least once there are two. */
	http_cfg.reserve = http_cfg.max_conns / 32;
	if (http_cfg.reserve == 0 && http_cfg.max_conns >= 2)
		http_cfg.reserve = 1;
	/* A head at its limits, plus input held behind a transfer. */
	http_cfg.stage_cap =
	    (uint32_t)((app.max_line + 2 + app.max_header_bytes + 2 + HTTP_STAGE_SLACK + 63) &
		       ~63ull);
	http_conn_init();
	for (i = 0; i < CNT_COUNT; i++) {
		http_cfg.ctr[i] = cr_telemetry_counter_register_prom(
		    ctr_names[i][0], CR_TELEMETRY_COUNTER, ctr_names[i][1], &ctr_prom[i]);
		if (http_cfg.ctr[i] < 0)
			return cr_app_errorf(http_cfg.ctr[i], "counter %s: %s", ctr_names[i][0],
					     cr_strerror(http_cfg.ctr[i]));
	}
	http_hist_request = cr_telemetry_histogram_register(
	    "http_request_duration_seconds",
	    "Time from a request's head parsed to its response queued (a file: sent).", NULL, 0);
	if (http_hist_request < 0)
		return cr_app_errorf(http_hist_request, "histogram: %s",
				     cr_strerror(http_hist_request));
	rc = cr_telemetry_register("/http", tel_http,
				   "cr-http: listen address, root, limits and request totals");
	if (rc != 0)
		return cr_app_errorf(rc, "telemetry command /http: %s", cr_strerror(rc));
	app.net.max_conns = http_cfg.max_conns;
	rc = http_lcore_register();
	if (rc != 0)
		return cr_app_errorf(rc, "%s", cr_strerror(rc));
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct cr_opt opts[] = {
	    CR_APP_OPT_LISTEN(&app.listen, "address to serve (default 127.0.0.1:8080)"),
	    {"root", 0, "DIR", "serve the files under DIR (GET/HEAD; default: none)",
	     "an existing directory", set_root, NULL},
	    {"access-log", 0, "PATH|off",
	     "append one line per response to PATH, in nginx's combined format; reopened on "
	     "SIGUSR1 (default off)",
	     "a file path, or off", set_access_log, NULL},
	    {"plaintext-path", 0, "PATH|off",
	     "where the built-in Hello, World! answers (default /plaintext; off: none, the "
	     "path goes to --root)",
	     "a path starting with /, without ?, # or blanks, or off", set_route, NULL},
	    {"json-path", 0, "PATH|off",
	     "where the built-in {\"message\":\"Hello, World!\"} answers (default /json; off: "
	     "none)",
	     "a path starting with /, without ?, # or blanks, or off", set_route, (void *)1},
	    {"max-connections", 0, "N",
	     "connections per lcore (default: what the descriptor limit allows, at most 4096, "
	     "half that with --root); above all but 1/32 of them, a new one ends the oldest "
	     "idle or slow one",
	     "1-1048576", set_conns, &app.max_conns},
	    {"header-timeout", 0, "SECONDS",
	     "close a connection whose request head is not complete this long after it "
	     "began, or that sends nothing this long after opening (default 10)",
	     "a number of seconds from 0 to 1000000, e.g. 0.5 or 10", set_seconds,
	     &app.header_timeout},
	    {"keepalive-timeout", 0, "SECONDS",
	     "close a connection with no byte in or out this long, as between requests "
	     "(default 75; 0: never)",
	     "a number of seconds from 0 to 1000000", set_seconds, &app.keepalive},
	    {"body-timeout", 0, "SECONDS",
	     "close with 408 a request body with a gap this long between two of its pieces "
	     "(default 60; 0: never, and no --min-body-rate)",
	     "a number of seconds from 0 to 1000000", set_seconds, &app.body_timeout},
	    {"min-body-rate", 0, "BYTES",
	     "a body must average this many bytes a second once --body-timeout passed since "
	     "it began, else 408 (default 500; 0: any rate)",
	     "0-1073741824", set_rate, &app.min_body_rate},
	    {"max-request-line", 0, "BYTES", "longest request line, else 414 (default 8192)",
	     "64-1048576", set_line, &app.max_line},
	    {"max-header-bytes", 0, "BYTES", "largest header section, else 431 (default 16384)",
	     "64-1048576", set_hdr_bytes, &app.max_header_bytes},
	    {"max-header-fields", 0, "N", "most header fields, else 431 (default 100)", "1-10000",
	     set_fields, &app.max_fields},
	    {"max-body", 0, "BYTES", "largest request body, else 413 (default 1048576)",
	     "0-1099511627776", set_body, &app.max_body},
	    {"splice-min", 0, "BYTES",
	     "a file body of at least this many bytes goes file -> pipe -> socket by splice, "
	     "not copied through the output queue; plain HTTP only, TLS copies (default "
	     "65536; 0: never)",
	     "0-1099511627776", set_splice_min, &app.splice_min},
	};
	static struct cr_opt all[sizeof(opts) / sizeof(opts[0]) + CR_TLS_APP_N_OPTS + 1];
	static struct cr_app http = {
	    .name = "cr-http",
	    .summary = "HTTP/1.1 server on every lcore",
	    .opts = all,
	    .net = &app.net,
	    .configure = configure,
	    .lcore_init = http_lcore_start,
	    .start = start,
	    .shutdown = http_drain_hook,
	    .lcore_stop = http_lcore_stop,
	    .stop = stop,
	    .reload = http_tls_reload,
	    .fini = fini,
	    .reopen_logs = http_access_reopen,
	};
	unsigned n = sizeof(opts) / sizeof(opts[0]);

	memcpy(all, opts, sizeof(opts));
	http.n_opts = n + http_tls_opts(all + n, sizeof(all) / sizeof(all[0]) - n);
	cr_net_addr_parse("127.0.0.1:8080", &app.listen);
	return cr_app_run(&http, argc, argv);
}
