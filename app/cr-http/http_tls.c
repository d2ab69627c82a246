/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * HTTPS: the TLS options (lib/tls's, plus --hsts), the TLS listener beside the plain one
 * (same connection callbacks: lib/tls hands them plaintext), ALPN http/1.1, certificate
 * reload on SIGHUP, the session-ticket key rotation.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cr_app.h"
#include "cr_tls.h"
#include "http.h"

static struct {
	struct cr_tls_app_opts o;
	struct cr_tls_ctx *ctx;
	struct cr_listener *listener;
	struct cr_net_addr bound;
	unsigned long long hsts;
	bool hsts_set;
} tls;

static int
set_hsts(const char *v, void *ctx)
{
	(void)ctx;
	if (cr_parse_uint(v, 0, 1ull << 31, &tls.hsts) != 0)
		return -EINVAL;
	tls.hsts_set = true;
	return 0;
}

unsigned
http_tls_opts(struct cr_opt *out, unsigned cap)
{
	static const struct cr_opt hsts = {
	    "hsts", 0, "SECONDS",
	    "on HTTPS answers, Strict-Transport-Security: max-age=SECONDS (default: none)",
	    "a number of seconds from 0 to 2147483648", set_hsts, NULL};
	unsigned n;

	cr_tls_app_opts_defaults(&tls.o);
	n = cr_tls_app_opts_table(&tls.o, out, cap);
	if (n < cap)
		out[n++] = hsts;
	return n;
}

int
http_tls_configure(void)
{
	char err[512];
	int rc = cr_tls_app_ctx(&tls.o, "http/1.1", &tls.ctx, err, sizeof(err));

	if (rc != 0)
		return cr_app_errorf(-EINVAL, "%s", err);
	if (tls.hsts_set && tls.ctx == NULL)
		return cr_app_errorf(-EINVAL, "--hsts %llu: needs --tls-listen", tls.hsts);
	if (tls.hsts_set)
		http_cfg.hsts_len = (uint32_t)snprintf(http_cfg.hsts, sizeof(http_cfg.hsts),
						       "Strict-Transport-Security: max-age=%llu\r\n",
						       tls.hsts);
	rc = cr_tls_telemetry_register();
	if (rc != 0)
		return cr_app_errorf(rc, "telemetry command /tls: %s", cr_strerror(rc));
	return 0;
}

int
http_tls_start(const struct cr_conn_ops *ops, uint64_t idle_ns)
{
	struct cr_tcp_listen_opts lo = {0};
	char a[CR_NET_ADDR_STRLEN];
	int rc;

	if (tls.ctx == NULL)
		return 0;
	lo.addr = tls.o.listen;
	lo.conn.idle_timeout_ns = idle_ns;
	cr_tls_conn_opts(&lo.conn, tls.ctx);
	rc = cr_tcp_listen(&lo, ops, NULL, &tls.listener);
	if (rc != 0)
		return cr_app_errorf(rc, "--tls-listen %s: %s",
				     cr_net_addr_format(&tls.o.listen, a, sizeof(a)),
				     cr_strerror(rc));
	cr_listener_addr(tls.listener, &tls.bound);
	rc = cr_tls_tickets_rotate_every((uint64_t)(tls.o.ticket_rotate * 1000));
	if (rc != 0)
		return cr_app_errorf(rc, "--tls-ticket-rotate: %s", cr_strerror(rc));
	return 0;
}

/* After the plain listener's ready line, which stays the first. */
void
http_tls_ready_line(void)
{
	char a[CR_NET_ADDR_STRLEN];

	if (tls.listener != NULL)
		printf("cr-http: listening on %s (https), TLS records in %s\n",
		       cr_net_addr_format(&tls.bound, a, sizeof(a)), cr_tls_record_mode());
}

void
http_tls_stop(void)
{
	if (tls.listener != NULL)
		cr_listener_close(tls.listener, NULL, NULL);
	tls.listener = NULL;
	if (tls.ctx != NULL)
		cr_tls_tickets_stop();
}

/* SIGHUP, on lib/app's signal thread: new handshakes get the new files; live
 * connections keep theirs. */
void
http_tls_reload(void *arg)
{
	char err[512];

	(void)arg;
	if (tls.ctx == NULL)
		return;
	if (cr_tls_ctx_reload(tls.ctx, err, sizeof(err)) != 0)
		fprintf(stderr, "cr-http: SIGHUP: TLS reload failed, the old certificates stay: %s\n",
			err);
	else
		printf("cr-http: SIGHUP: TLS certificates and keys reloaded\n");
	fflush(stdout);
}

bool
http_hsts(const struct cr_conn *c)
{
	return http_cfg.hsts_len != 0 && cr_tls_conn(c);
}

void
http_tls_fini(void)
{
	cr_tls_ctx_free(tls.ctx);
	tls.ctx = NULL;
}
