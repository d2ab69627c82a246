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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cr_app.h"
#include "cr_net.h"
#include "cr_reactor.h"
#include "cr_telemetry.h"
#include "cr_tls.h"
#include "passthrough.h"
#include "proxy.h"

#define DRAIN_POLL_NS (20ull * 1000 * 1000)
#define DRAIN_LAST_NS (500ull * 1000 * 1000)

/* --tls-listen: TLS from the clients, terminated here (plain to the backends). */
static struct cr_tls_app px_tls;

static struct {
	double shutdown_timeout;
	struct cr_net_config net;
	struct cr_listener *listener, *sni_listener;
	struct cr_net_addr bound, sni_bound;
	struct cr_timer drain_timer;
	uint64_t drain_deadline;
	bool draining;
} app;

static double
secs_ns(double v)
{
	return v * 1e9;
}

/* ---- start, drain, stop ---- */

/* Before the lcore joins the pool: hold it (a lease) while it serves. */
static int
lcore_init_hook(unsigned lcore, void *arg)
{
	(void)arg;
	px_relay_lcore_start(lcore);
	return 0;
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

static int
start(void *arg)
{
	struct cr_tcp_listen_opts lo = {0};
	char a[CR_NET_ADDR_STRLEN], cl[256];
	struct px_conf *c = &px_conf;
	unsigned n = cr_lcore_count();
	int rc;

	(void)arg;
	px_conn_opts(&lo.conn, (uint64_t)secs_ns(c->client_timeout));
	if (c->listen.len != 0) {
		lo.addr = c->listen;
		rc = cr_tcp_listen(&lo, &px_client_ops, NULL, &app.listener);
		if (rc != 0)
			return cr_app_errorf(rc, "--listen %s: %s",
					     cr_net_addr_format(&c->listen, a, sizeof(a)),
					     cr_strerror(rc));
		cr_listener_addr(app.listener, &app.bound);
	}
	if (px_sni.on) {
		lo.addr = px_sni.listen;
		rc = cr_tcp_listen(&lo, &px_passthrough_ops, NULL, &app.sni_listener);
		if (rc != 0)
			return cr_app_errorf(rc, "--sni-listen %s: %s",
					     cr_net_addr_format(&px_sni.listen, a, sizeof(a)),
					     cr_strerror(rc));
		cr_listener_addr(app.sni_listener, &app.sni_bound);
	}
	/* TLS termination: the same client callbacks, plaintext to the backends. */
	rc = cr_tls_app_listen(&px_tls, &lo.conn, &px_client_ops, NULL, cl, sizeof(cl));
	if (rc != 0)
		return cr_app_errorf(rc, "%s", cl);
	if (c->check_interval > 0) {
		double t = c->check_timeout > 0			    ? c->check_timeout
			   : c->connect_timeout < c->check_interval ? c->connect_timeout
								    : c->check_interval;

		rc = px_checks_start((uint64_t)secs_ns(c->check_interval), (uint64_t)secs_ns(t));
		if (rc != 0)
			return cr_app_errorf(rc, "health checks: %s", cr_strerror(rc));
	}
	if (app.listener != NULL)
		printf("cr-proxy: listening on %s, %u backend%s (%s%s), %u lcore%s (%s), io driver "
		       "%s\n",
		       cr_net_addr_format(&app.bound, a, sizeof(a)), c->n_backends,
		       c->n_backends == 1 ? "" : "s", px_balance_name(c->balance),
		       px_btls.on ? ", TLS to the backends" : "", n, n == 1 ? "" : "s",
		       cr_lcore_table_corelist(cr_app_lcore_table(), cl, sizeof(cl)),
		       cr_reactor_driver());
	if (app.sni_listener != NULL)
		printf("cr-proxy: listening on %s (tls passthrough, %u SNI route%s), %u lcore%s, io "
		       "driver %s\n",
		       cr_net_addr_format(&app.sni_bound, a, sizeof(a)), px_sni.n_routes,
		       px_sni.n_routes == 1 ? "" : "s", n, n == 1 ? "" : "s", cr_reactor_driver());
	cr_tls_app_ready_line(&px_tls, "cr-proxy",
			      px_btls.on ? "tls, TLS to the backends" : "tls, plain to the backends");
	fflush(stdout);
	return 0;
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

/* The listener's every socket is closed: from here a new connection is refused. */
static void
drain_announce(void *arg)
{
	(void)arg;
	printf("cr-proxy: draining: %" PRIu64 " live sessions, at most %.3g s\n",
	       px_sessions_live(), app.shutdown_timeout);
	fflush(stdout);
}

/* On the main lcore, at the first SIGINT/SIGTERM: stop accepting everywhere, then wait
 * for the live sessions; a second signal forces the stop (lib/app). */
static void
drain_start(void *arg)
{
	(void)arg;
	if (app.draining)
		return;
	app.draining = true;
	cr_tls_app_close(&px_tls); /* its close goes round before the plain one's */
	if (app.sni_listener != NULL)
		cr_listener_close(app.sni_listener, app.listener == NULL ? drain_announce : NULL,
				  NULL);
	app.sni_listener = NULL;
	if (app.listener != NULL)
		cr_listener_close(app.listener, drain_announce, NULL);
	app.listener = NULL;
	px_checks_stop();
	app.drain_deadline = cr_now_ns() + (uint64_t)secs_ns(app.shutdown_timeout);
	cr_timer_init(&app.drain_timer, drain_tick, NULL);
	cr_timer_start(&app.drain_timer, 0);
}

/* ---- reload ---- */

/* SIGHUP, on lib/app's signal thread: the backends of --config again. */
static void
reload(void *arg)
{
	const char *path = cr_app_config_path();
	unsigned n = 0;
	int rc;

	(void)arg;
	cr_tls_app_reload(&px_tls, "cr-proxy");
	if (path == NULL) {
		printf("cr-proxy: SIGHUP: no --config to reload\n");
		fflush(stdout);
		return;
	}
	rc = px_conf_reload(&n);
	if (rc != 0)
		printf("cr-proxy: reload of %s failed (%s); the backends are unchanged\n", path,
		       rc == -ENOENT   ? "no backend"
		       : rc == -ENOSPC ? "more than 64 backend addresses seen"
				       : cr_strerror(rc));
	else
		printf("cr-proxy: reloaded %s: %u backend%s\n", path, n, n == 1 ? "" : "s");
	fflush(stdout);
}

/* ---- set-up ---- */

static int
telemetry_setup(void)
{
	px_ctr_sessions = cr_telemetry_counter_register("proxy_sessions", CR_TELEMETRY_COUNTER,
							"client connections accepted");
	px_ctr_connect_fail = cr_telemetry_counter_register(
	    "proxy_connect_failures", CR_TELEMETRY_COUNTER, "backend connects that failed");
	px_ctr_no_backend = cr_telemetry_counter_register(
	    "proxy_no_backend", CR_TELEMETRY_COUNTER,
	    "clients closed: no backend up, retries spent, or no local resources");
	px_ctr_nobufs =
	    cr_telemetry_counter_register("proxy_nobufs", CR_TELEMETRY_COUNTER,
					  "sessions reset for the lcore's output pool: the biggest that "
					  "waited for its reader, when the pool was down to its reserve");
	px_ctr_maxconn_waits = cr_telemetry_counter_register(
	    "proxy_maxconn_waits", CR_TELEMETRY_COUNTER, "clients that waited for --maxconn");
	px_ctr_sni_routed = cr_telemetry_counter_register(
	    "proxy_sni_routed", CR_TELEMETRY_COUNTER, "passthrough clients routed by their SNI name");
	px_ctr_sni_default = cr_telemetry_counter_register(
	    "proxy_sni_default", CR_TELEMETRY_COUNTER,
	    "passthrough clients with no SNI or an unknown name, sent to --sni-default");
	px_ctr_sni_refused = cr_telemetry_counter_register(
	    "proxy_sni_refused", CR_TELEMETRY_COUNTER,
	    "passthrough clients closed: no route for their name (or every ClientHello buffer "
	    "held by connecting sessions)");
	px_ctr_sni_bad = cr_telemetry_counter_register(
	    "proxy_sni_bad", CR_TELEMETRY_COUNTER,
	    "passthrough clients closed: not a ClientHello, over 16 KiB, EOF, --sni-timeout, or "
	    "the oldest hello when a newer one needed its buffer");
	return px_telemetry_register();
}

static int
configure(int argc, char **argv, void *arg)
{
	const struct cr_lcore_table *t = cr_app_lcore_table();
	struct px_conf *c = &px_conf;
	unsigned long long slots;
	char err[512];
	unsigned i;
	int rc;

	(void)argc;
	(void)argv;
	(void)arg;
	rc = px_conf_finish();
	if (rc != 0)
		return rc;
	rc = px_sni_check();
	if (rc != 0)
		return rc;
	rc = cr_tls_app_configure(&px_tls, NULL, err, sizeof(err));
	if (rc != 0)
		return cr_app_errorf(rc, "%s", err);
	rc = px_backend_tls_check();
	if (rc != 0)
		return rc;
	if (px_btls.on && px_tls.ctx == NULL) {
		rc = cr_tls_telemetry_register();
		if (rc != 0)
			return cr_app_errorf(rc, "telemetry command /tls: %s", cr_strerror(rc));
	}
	if (c->session_log[0] != '\0') {
		rc = px_session_log_open(c->session_log);
		if (rc != 0)
			return cr_app_errorf(rc, "--session-log %s: %s", c->session_log,
					     cr_strerror(rc));
	}
	app.shutdown_timeout = cr_app_eal_config()->shutdown_timeout;
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
	px_relay.sni_timeout_ns = (uint64_t)secs_ns(px_sni.timeout);
	rc = px_apply_all(c->backends, c->n_backends);
	if (rc == -EINVAL)
		return rc; /* a --backend-tls file or value, named on stderr */
	if (rc != 0)
		return cr_app_errorf(rc, "cannot start: %s", cr_strerror(rc));
	/* Every session may land on one lcore: two connections each, plus the checks. */
	slots = 2 * c->maxconn + PX_MAX_BACKENDS + 16;
	app.net.max_conns = (uint32_t)(slots < (1u << 24) ? slots : (1u << 24));
	app.net.chunks = (uint32_t)(c->chunks != 0 ? c->chunks : px_buffers_auto(c->maxconn));
	px_relay.chunks = app.net.chunks;
	px_relay.chunk_size = app.net.chunk_size;
	px_n_lcores = t->n;
	for (i = 0; i < t->n; i++)
		px_lcore_ids[i] = t->lcores[i].lcore_id;
	/* ClientHello buffers, and for what a TLS client sends with its handshake's end
	 * while its session has no server connection that can take it yet: one still in its
	 * own TLS handshake, or none at all (the client waits for --maxconn). */
	rc = px_relay_register(app.net.max_conns,
			       px_sni.on || px_tls.ctx != NULL ? PX_SNI_BUFFERS : 0);
	if (rc == 0)
		rc = telemetry_setup();
	if (rc != 0)
		return cr_app_errorf(rc, "cannot start: %s", cr_strerror(rc));
	return 0;
}

static int
fini(bool failed, void *arg)
{
	(void)failed;
	(void)arg;
	cr_tls_app_fini(&px_tls);
	px_backend_tls_fini();
	px_session_log_close();
	return 0;
}

static void
reopen_logs(void *arg)
{
	(void)arg;
	px_session_log_reopen();
}

int
main(int argc, char **argv)
{
	static struct cr_opt
	    all[PX_N_OPTIONS + PX_N_BTLS_OPTIONS + PX_N_SNI_OPTIONS + CR_TLS_APP_N_OPTS];
	static struct cr_app proxy = {
	    .name = "cr-proxy",
	    .summary = "L4 TCP load balancer",
	    .opts = all,
	    .net = &app.net,
	    .configure = configure,
	    .lcore_init = lcore_init_hook,
	    .start = start,
	    .retire = retire_hook,
	    .shutdown = shutdown_hook,
	    .lcore_stop = lcore_stop_hook,
	    .stop = drain_start,
	    .reload = reload,
	    .fini = fini,
	    .reopen_logs = reopen_logs,
	};

	px_conf_defaults(&px_conf);
	memcpy(all, px_options, sizeof(px_options));
	memcpy(all + PX_N_OPTIONS, px_backend_tls_options, sizeof(px_backend_tls_options));
	memcpy(all + PX_N_OPTIONS + PX_N_BTLS_OPTIONS, px_sni_options, sizeof(px_sni_options));
	proxy.n_opts = PX_N_OPTIONS + PX_N_BTLS_OPTIONS + PX_N_SNI_OPTIONS;
	cr_tls_app_opts_defaults(&px_tls.o);
	proxy.n_opts += cr_tls_app_opts_table(&px_tls.o, all + proxy.n_opts, CR_TLS_APP_N_OPTS);
	return cr_app_run(&proxy, argc, argv);
}
