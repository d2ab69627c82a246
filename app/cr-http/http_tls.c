/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * HTTPS: lib/tls's server options (struct cr_tls_app) plus --hsts, a TLS listener beside
 * the plain one with the same connection callbacks (lib/tls hands them plaintext), ALPN
 * http/1.1, reload on SIGHUP.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cr_app.h"
#include "cr_tls.h"
#include "http.h"

static struct {
	struct cr_tls_app t;
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

	cr_tls_app_opts_defaults(&tls.t.o);
	n = cr_tls_app_opts_table(&tls.t.o, out, cap);
	if (n < cap)
		out[n++] = hsts;
	return n;
}

int
http_tls_configure(void)
{
	char err[512];
	int rc = cr_tls_app_configure(&tls.t, "http/1.1", err, sizeof(err));

	if (rc != 0)
		return cr_app_errorf(rc, "%s", err);
	if (tls.hsts_set && tls.t.ctx == NULL)
		return cr_app_errorf(-EINVAL, "--hsts %llu: needs --tls-listen", tls.hsts);
	if (tls.hsts_set)
		http_cfg.hsts_len = (uint32_t)snprintf(http_cfg.hsts, sizeof(http_cfg.hsts),
						       "Strict-Transport-Security: max-age=%llu\r\n",
						       tls.hsts);
	return 0;
}

int
http_tls_start(const struct cr_conn_ops *ops, uint64_t idle_ns)
{
	struct cr_conn_opts co = {.idle_timeout_ns = idle_ns};
	char err[512];
	int rc = cr_tls_app_listen(&tls.t, &co, ops, NULL, err, sizeof(err));

	return rc != 0 ? cr_app_errorf(rc, "%s", err) : 0;
}

/* After the plain listener's ready line, which stays the first. */
void
http_tls_ready_line(void)
{
	cr_tls_app_ready_line(&tls.t, "cr-http", "https");
}

void
http_tls_stop(void)
{
	cr_tls_app_close(&tls.t);
}

/* SIGHUP, on lib/app's signal thread: new handshakes get the new files; live
 * connections keep theirs. */
void
http_tls_reload(void *arg)
{
	(void)arg;
	cr_tls_app_reload(&tls.t, "cr-http");
}

bool
http_hsts(const struct cr_conn *c)
{
	return http_cfg.hsts_len != 0 && cr_tls_conn(c);
}

void
http_tls_fini(void)
{
	cr_tls_app_fini(&tls.t);
}

/* The TLS listener's port (0: none), for an absolute Location on HTTPS. */
uint16_t
http_tls_port(void)
{
	return tls.t.ctx != NULL ? cr_net_addr_port(&tls.t.bound) : 0;
}
