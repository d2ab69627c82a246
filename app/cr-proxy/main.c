/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cr-proxy: an L4 TCP load balancer. Every lcore accepts on its own SO_REUSEPORT socket
 * of --listen and relays each connection it accepted to a backend, connecting from the
 * same lcore: a session never crosses cores.
 *
 * Ready when it prints "cr-proxy: listening on ADDR ...". SIGHUP re-reads --config and
 * replaces the backend list (live connections go on); the first SIGINT/SIGTERM stops
 * accepting and waits for the live sessions to finish, at most --shutdown-timeout; a
 * second one stops at once. See doc/guides/proxy.md.
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
#include "proxy.h"

#define DRAIN_POLL_NS (20ull * 1000 * 1000)
#define DRAIN_LAST_NS (500ull * 1000 * 1000)

static struct {
	struct px_conf conf;
	/* --backend values, kept apart: a reload takes FILE's backends plus these. */
	struct px_backend_conf cli_backends[PX_MAX_BACKENDS];
	unsigned n_cli_backends;
	const char *config_path;
	double shutdown_timeout;
	struct cr_lcore_table table;
	struct cr_listener *listener;
	struct cr_net_addr bound;
	struct cr_timer drain_timer;
	uint64_t drain_deadline;
	bool draining;
	int exit_code;
} app;

static double
secs_ns(double v)
{
	return v * 1e9;
}

/* ---- start, drain, stop ---- */

static void
lcore_start_hook(unsigned lcore, void *arg)
{
	(void)arg;
	px_relay_lcore_start(lcore);
}

static void
lcore_stop_hook(unsigned lcore, void *arg)
{
	(void)arg;
	px_relay_lcore_stop(lcore);
}

/* An lcore leaves the pool: its sessions finish first (see px_relay_retire()). */
static void
retire_hook(unsigned lcore, void *arg)
{
	(void)arg;
	px_relay_retire(lcore);
}

/*
 * The runtime stops: by now drain_start() let the sessions finish (or the timeout ran
 * out), so close what is left.
 */
static void
shutdown_hook(unsigned lcore, void *arg)
{
	(void)arg;
	px_relay_lcore_stop(lcore);
}

static const struct cr_reactor_hooks hooks = {
    .on_lcore_start = lcore_start_hook,
    .on_lcore_stop = lcore_stop_hook,
    .on_retire = retire_hook,
    .on_shutdown = shutdown_hook,
};

static void
start_serving(void *arg)
{
	struct cr_tcp_listen_opts lo = {0};
	char a[CR_NET_ADDR_STRLEN], cl[256];
	struct px_conf *c = &app.conf;
	unsigned n = cr_lcore_count();
	int rc;

	(void)arg;
	lo.addr = c->listen;
	lo.conn.idle_timeout_ns = (uint64_t)secs_ns(c->client_timeout);
	lo.conn.keep_reading = true;
	rc = cr_tcp_listen(&lo, &px_client_ops, NULL, &app.listener);
	if (rc != 0) {
		fprintf(stderr, "cr-proxy: --listen %s: %s\n",
			cr_net_addr_format(&c->listen, a, sizeof(a)), cr_strerror(rc));
		goto fail;
	}
	cr_listener_addr(app.listener, &app.bound);
	if (c->check_interval > 0) {
		double t = c->check_timeout > 0			    ? c->check_timeout
			   : c->connect_timeout < c->check_interval ? c->connect_timeout
								    : c->check_interval;

		rc = px_checks_start((uint64_t)secs_ns(c->check_interval), (uint64_t)secs_ns(t));
		if (rc != 0) {
			fprintf(stderr, "cr-proxy: health checks: %s\n", cr_strerror(rc));
			goto fail;
		}
	}
	printf("cr-proxy: listening on %s, %u backend%s (%s), %u lcore%s (%s), io driver %s\n",
	       cr_net_addr_format(&app.bound, a, sizeof(a)), c->n_backends,
	       c->n_backends == 1 ? "" : "s", px_balance_name(c->balance), n, n == 1 ? "" : "s",
	       cr_lcore_table_corelist(&app.table, cl, sizeof(cl)), cr_reactor_driver());
	fflush(stdout);
	return;
fail:
	app.exit_code = 1;
	cr_reactor_stop();
}

static void
drain_tick(struct cr_timer *t, void *arg)
{
	(void)t;
	(void)arg;
	if (px_sessions_live() == 0) {
		cr_reactor_stop();
		return;
	}
	if (cr_now_ns() >= app.drain_deadline) {
		/* Out of time: close what is left (queued bytes still go out), then stop. */
		printf("cr-proxy: shutdown timeout: closing %" PRIu64 " live sessions\n",
		       px_sessions_live());
		fflush(stdout);
		cr_shutdown(DRAIN_LAST_NS);
		return;
	}
	cr_timer_start(&app.drain_timer, DRAIN_POLL_NS);
}

/* On the main lcore: stop accepting everywhere, then wait for the live sessions. */
static void
drain_start(void *arg)
{
	(void)arg;
	if (app.draining)
		return;
	app.draining = true;
	cr_listener_close(app.listener, NULL, NULL);
	app.listener = NULL;
	px_checks_stop();
	printf("cr-proxy: draining: %" PRIu64 " live sessions, at most %.3g s\n",
	       px_sessions_live(), app.shutdown_timeout);
	fflush(stdout);
	app.drain_deadline = cr_now_ns() + (uint64_t)secs_ns(app.shutdown_timeout);
	cr_timer_init(&app.drain_timer, drain_tick, NULL);
	cr_timer_start(&app.drain_timer, 0);
}

/* ---- reload ---- */

static int
merge_backends(struct px_conf *c)
{
	unsigned i;

	for (i = 0; i < app.n_cli_backends; i++) {
		if (c->n_backends == PX_MAX_BACKENDS)
			return -ENOSPC;
		c->backends[c->n_backends++] = app.cli_backends[i];
	}
	return 0;
}

/* On the signal thread. */
static void
reload(void)
{
	struct px_conf *c;
	int rc;

	if (app.config_path == NULL) {
		printf("cr-proxy: SIGHUP: no --config to reload\n");
		fflush(stdout);
		return;
	}
	c = malloc(sizeof(*c));
	if (c == NULL)
		return;
	px_conf_defaults(c);
	rc = px_conf_load(app.config_path, c);
	if (rc == 0)
		rc = merge_backends(c);
	if (rc == 0 && c->n_backends == 0)
		rc = -ENOENT;
	if (rc == 0)
		rc = px_backends_apply(c->backends, c->n_backends);
	if (rc != 0)
		printf("cr-proxy: reload of %s failed (%s); the backends are unchanged\n",
		       app.config_path,
		       rc == -ENOENT   ? "no backend"
		       : rc == -ENOSPC ? "more than 64 backend addresses seen"
				       : cr_strerror(rc));
	else
		printf("cr-proxy: reloaded %s: %u backend%s\n", app.config_path, c->n_backends,
		       c->n_backends == 1 ? "" : "s");
	fflush(stdout);
	free(c);
}

/*
 * On the signal thread. SIGHUP reloads. The first SIGINT/SIGTERM drains (stop accepting,
 * let live sessions finish within --shutdown-timeout); a second one forces the stop.
 */
static void
on_stop_signal(void *arg)
{
	(void)arg;
	if (cr_send(cr_lcore_main(), drain_start, NULL) != 0)
		cr_reactor_stop();
}

static void
on_hup_signal(void *arg)
{
	(void)arg;
	reload();
}

/* ---- options ---- */

static int
set_listen(const char *v, void *ctx)
{
	(void)ctx;
	if (cr_net_addr_parse(v, &app.conf.listen) != 0)
		return -EINVAL;
	app.conf.have_listen = true;
	return 0;
}

static int
set_backend(const char *v, void *ctx)
{
	(void)ctx;
	if (app.n_cli_backends == PX_MAX_BACKENDS)
		return -EINVAL;
	return px_backend_parse(v, &app.cli_backends[app.n_cli_backends++]);
}

static int
set_balance(const char *v, void *ctx)
{
	(void)ctx;
	return px_balance_parse(v, &app.conf.balance);
}

static int
set_config(const char *v, void *ctx)
{
	/* Read before the other options (see main), so they override it. */
	(void)v;
	(void)ctx;
	return 0;
}

static int
set_secs(const char *v, void *ctx)
{
	double d;

	if (cr_parse_seconds(v, &d) != 0 || d > 1e6)
		return -EINVAL;
	*(double *)ctx = d;
	return 0;
}

static int
set_count(const char *v, void *ctx)
{
	unsigned long long u;
	unsigned *p = ctx;

	if (cr_parse_uint(v, p == &app.conf.retries ? 0 : 1, 100, &u) != 0)
		return -EINVAL;
	*p = (unsigned)u;
	return 0;
}

static int
set_maxconn(const char *v, void *ctx)
{
	return cr_parse_uint(v, 1, PX_MAXCONN_MAX, ctx);
}

static int
set_buffers(const char *v, void *ctx)
{
	return cr_parse_uint(v, 1, PX_BUFFERS_MAX, ctx);
}

/* --config FILE or --config=FILE before "--" (cr-proxy takes no other words, so every
 * word before it is an option or an option's value). */
static const char *
find_config(int argc, char **argv)
{
	const char *path = NULL;
	int i;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0)
			break;
		if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
			path = argv[++i];
		else if (strncmp(argv[i], "--config=", 9) == 0)
			path = argv[i] + 9;
	}
	return path;
}

static int
setup(void)
{
	struct px_conf *c = &app.conf;
	struct cr_net_config ncfg;
	unsigned long long slots;
	unsigned i;
	int rc;

	px_balance_mode = c->balance;
	px_rise = c->rise;
	px_fall = c->fall;
	px_relay.balance = c->balance;
	px_relay.connect_timeout_ns = (uint64_t)secs_ns(c->connect_timeout);
	px_relay.retries = c->retries;
	px_relay.client_idle_ns = (uint64_t)secs_ns(c->client_timeout);
	px_relay.server_idle_ns = (uint64_t)secs_ns(c->server_timeout);
	px_relay.maxconn = c->maxconn;
	px_relay.retire_timeout_ns = (uint64_t)secs_ns(app.shutdown_timeout);
	rc = px_backends_apply(c->backends, c->n_backends);
	if (rc != 0)
		return rc;
	/* Every session may land on one lcore: two connections each, plus the checks. */
	slots = 2 * c->maxconn + PX_MAX_BACKENDS + 16;
	cr_net_config_defaults(&ncfg);
	ncfg.max_conns = (uint32_t)(slots < (1u << 24) ? slots : (1u << 24));
	ncfg.chunks = (uint32_t)c->chunks;
	rc = cr_net_configure(&ncfg);
	if (rc != 0)
		return rc;
	px_n_lcores = app.table.n;
	for (i = 0; i < app.table.n; i++) {
		px_lcore_ids[i] = app.table.lcores[i].lcore_id;
		rc = px_relay_alloc(app.table.lcores[i].lcore_id, app.table.lcores[i].numa_node,
				    ncfg.max_conns);
		if (rc != 0)
			return rc;
	}
	px_ctr_sessions = cr_telemetry_counter_register("proxy_sessions", CR_TELEMETRY_COUNTER,
							"client connections accepted");
	px_ctr_connect_fail = cr_telemetry_counter_register(
	    "proxy_connect_failures", CR_TELEMETRY_COUNTER, "backend connects that failed");
	px_ctr_no_backend = cr_telemetry_counter_register(
	    "proxy_no_backend", CR_TELEMETRY_COUNTER,
	    "clients closed: no backend up, retries spent, or no local resources");
	px_ctr_nobufs =
	    cr_telemetry_counter_register("proxy_nobufs", CR_TELEMETRY_COUNTER,
					  "sessions reset: the lcore's output chunks ran out");
	px_ctr_maxconn_waits = cr_telemetry_counter_register(
	    "proxy_maxconn_waits", CR_TELEMETRY_COUNTER, "clients that waited for --maxconn");
	return px_telemetry_register();
}

int
main(int argc, char **argv)
{
	struct px_conf *c = &app.conf;
	static const struct cr_opt opts[] = {
	    {"listen", 0, "HOST:PORT",
	     "address to accept clients on (required here or in --config), e.g. "
	     "127.0.0.1:8080",
	     "HOST:PORT with a numeric host, [IPv6]:PORT, localhost:PORT or *:PORT", set_listen,
	     NULL},
	    {"backend", 0, "HOST:PORT[,weight=N]",
	     "a backend (repeat for more; at least one here or in --config); weight 0-256, "
	     "default 1",
	     "HOST:PORT with a numeric host and a port 1-65535, optionally ,weight=0-256",
	     set_backend, NULL},
	    {"balance", 0, "ALGO",
	     "roundrobin (default, weighted), leastconn (fewest connections per weight) or "
	     "source (hash of the client address)",
	     "roundrobin, leastconn, source", set_balance, NULL},
	    {"config", 0, "FILE",
	     "read settings from FILE first (one `key value` a line; see doc/guides/proxy.md); "
	     "SIGHUP re-reads its backends",
	     "a readable file", set_config, NULL},
	    {"connect-timeout", 0, "SECONDS",
	     "give up a backend connect after this long, then try the next (default 2)",
	     "seconds from 0 to 1000000 (0: the kernel's own)", set_secs,
	     &app.conf.connect_timeout},
	    {"retries", 0, "N",
	     "further backends to try after a failed connect, each a different one (default 3)",
	     "0-100", set_count, &app.conf.retries},
	    {"check-interval", 0, "SECONDS",
	     "TCP-connect to every backend this often (default 2; 0: no checks, and no "
	     "marking down on failed connects)",
	     "seconds from 0 to 1000000", set_secs, &app.conf.check_interval},
	    {"check-timeout", 0, "SECONDS",
	     "a check fails after this long (default: the lower of --connect-timeout and "
	     "--check-interval)",
	     "seconds from 0 to 1000000", set_secs, &app.conf.check_timeout},
	    {"rise", 0, "N", "checks in a row that bring a down backend up (default 2)", "1-100",
	     set_count, &app.conf.rise},
	    {"fall", 0, "N",
	     "failed checks or connects in a row that mark a backend down (default 3)", "1-100",
	     set_count, &app.conf.fall},
	    {"client-timeout", 0, "SECONDS",
	     "close a client connection idle this long (default 60; 0: never)",
	     "seconds from 0 to 1000000", set_secs, &app.conf.client_timeout},
	    {"server-timeout", 0, "SECONDS",
	     "close a backend connection idle this long (default 60; 0: never)",
	     "seconds from 0 to 1000000", set_secs, &app.conf.server_timeout},
	    {"maxconn", 0, "N",
	     "client sessions at once over all lcores; more wait unread (default 4096; each lcore "
	     "reserves about 1.2 KiB per session)",
	     "1-1048576", set_maxconn, &app.conf.maxconn},
	    {"buffers", 0, "N", "16 KiB output chunks per lcore for queued bytes (default 2048)",
	     "1-4194304", set_buffers, &app.conf.chunks},
	    CR_TELEMETRY_OPTS,
	};
	static const struct cr_app_info info = {"cr-proxy", "L4 TCP load balancer", opts,
						sizeof(opts) / sizeof(opts[0])};
	struct cr_eal_config cfg;
	int rc, first;

	px_conf_defaults(c);
	app.config_path = find_config(argc, argv);
	if (app.config_path != NULL && px_conf_load(app.config_path, c) != 0)
		return 2;
	cr_eal_config_defaults(&cfg);
	rc = cr_eal_parse_args(argc, argv, &info, &cfg, &app.table, &first);
	if (rc != 0)
		return rc > 0 ? 0 : 2;
	if (first < argc) {
		fprintf(stderr,
			"cr-proxy: %s: unexpected argument; accepted: options only, see "
			"cr-proxy --help\n",
			argv[first]);
		return 2;
	}
	if (!c->have_listen) {
		fprintf(stderr, "cr-proxy: --listen: missing; accepted: HOST:PORT, e.g. "
				"127.0.0.1:8080 (or `listen` in --config)\n");
		return 2;
	}
	if (merge_backends(c) != 0) {
		fprintf(stderr, "cr-proxy: --backend: more than %d backends\n", PX_MAX_BACKENDS);
		return 2;
	}
	if (c->n_backends == 0) {
		fprintf(stderr, "cr-proxy: --backend: missing; accepted: HOST:PORT[,weight=N], "
				"one or more (or `backend` lines in --config)\n");
		return 2;
	}
	app.shutdown_timeout = cfg.shutdown_timeout;
	rc = setup();
	if (rc != 0) {
		fprintf(stderr, "cr-proxy: cannot start: %s%s\n", cr_strerror(rc),
			rc == -ENOMEM ? " (each lcore sizes 2 x --maxconn connection slots and "
					"--buffers chunks of 16 KiB at start)"
				      : "");
		return 1;
	}
	cr_reactor_signals_block(true);
	rc = cr_reactor_init(&cfg, &app.table, &hooks);
	if (rc != 0) {
		if (rc == -ENODEV) {
			fprintf(stderr,
				"cr-proxy: --io-driver: the driver asked for cannot run here\n");
			return 2;
		}
		fprintf(stderr, "cr-proxy: cannot start: %s\n", cr_strerror(rc));
		return 1;
	}
	(void)cr_reactor_signals_start(on_stop_signal, on_hup_signal, NULL);
	rc = cr_telemetry_start(&cfg, "cr-proxy");
	if (rc == 0)
		cr_telemetry_announce("cr-proxy");
	if (rc == 0)
		rc = cr_send(cr_lcore_main(), start_serving, NULL);
	if (rc != 0) {
		fprintf(stderr, "cr-proxy: cannot start: %s%s\n", cr_strerror(rc),
			cr_telemetry_socket_path() == NULL ? "; --telemetry off runs without it"
							   : "");
		cr_reactor_stop();
		app.exit_code = 1;
	}
	cr_reactor_run();
	cr_telemetry_stop();
	cr_reactor_fini();
	px_relay_free();
	return app.exit_code;
}
