/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The command-line options every TLS server app takes (--tls-listen, --tls-cert,
 * --tls-key, ...), as struct cr_opt entries an app appends to its own table, and the
 * context they describe: one set of names, help lines and errors for cr-http, cr-kv and
 * cr-proxy.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cr_reactor.h"
#include "tls_internal.h"

static int
set_listen(const char *v, void *ctx)
{
	struct cr_tls_app_opts *o = ctx;

	if (cr_net_addr_parse(v, &o->listen) != 0)
		return -EINVAL;
	o->listen_set = true;
	return 0;
}

static int
set_cert(const char *v, void *ctx)
{
	struct cr_tls_app_opts *o = ctx;

	if (*v == '\0' || o->n_certs >= CR_TLS_MAX_CERTS)
		return -EINVAL;
	o->certs[o->n_certs++] = v;
	return 0;
}

static int
set_key(const char *v, void *ctx)
{
	struct cr_tls_app_opts *o = ctx;

	if (*v == '\0' || o->n_keys >= CR_TLS_MAX_CERTS)
		return -EINVAL;
	o->keys[o->n_keys++] = v;
	return 0;
}

static int
set_str(const char *v, void *ctx)
{
	const char **p = ctx;

	if (*v == '\0')
		return -EINVAL;
	*p = v;
	return 0;
}

static int
set_verify(const char *v, void *ctx)
{
	enum cr_tls_verify *p = ctx;

	if (strcmp(v, "none") == 0)
		*p = CR_TLS_VERIFY_NONE;
	else if (strcmp(v, "optional") == 0)
		*p = CR_TLS_VERIFY_OPTIONAL;
	else if (strcmp(v, "required") == 0)
		*p = CR_TLS_VERIFY_REQUIRED;
	else
		return -EINVAL;
	return 0;
}

static int
set_protocols(const char *v, void *ctx)
{
	if (strcmp(v, "TLSv1.2") != 0 && strcmp(v, "TLSv1.3") != 0 &&
	    strcmp(v, "TLSv1.2,TLSv1.3") != 0 && strcmp(v, "TLSv1.3,TLSv1.2") != 0)
		return -EINVAL;
	return set_str(v, ctx);
}

static int
set_ktls(const char *v, void *ctx)
{
	enum cr_tls_ktls *p = ctx;

	if (strcmp(v, "auto") == 0)
		*p = CR_TLS_KTLS_AUTO;
	else if (strcmp(v, "off") == 0)
		*p = CR_TLS_KTLS_OFF;
	else
		return -EINVAL;
	return 0;
}

static int
set_seconds(const char *v, void *ctx, double min, double max)
{
	double *d = ctx;

	if (cr_parse_seconds(v, d) != 0 || *d < min || *d > max)
		return -EINVAL;
	return 0;
}

static int
set_handshake(const char *v, void *ctx)
{
	return set_seconds(v, ctx, 0.001, 3600);
}

static int
set_rotate(const char *v, void *ctx)
{
	return set_seconds(v, ctx, 1, 7 * 86400);
}

unsigned
cr_tls_app_opts_table(struct cr_tls_app_opts *o, struct cr_opt *out, unsigned cap)
{
	const struct cr_opt t[] = {
	    {"tls-listen", 0, "HOST:PORT", "also serve TLS on HOST:PORT (needs --tls-cert, --tls-key)",
	     "HOST:PORT with a numeric host, [IPv6]:PORT, localhost:PORT or *:PORT; port 0-65535",
	     set_listen, o},
	    {"tls-cert", 0, "FILE",
	     "PEM certificate chain; repeat for SNI (the first serves unknown names)",
	     "a file name; at most 16", set_cert, o},
	    {"tls-key", 0, "FILE", "PEM private key of the --tls-cert at the same position",
	     "a file name; one per --tls-cert", set_key, o},
	    {"tls-ca", 0, "FILE", "PEM CA certificates that sign client certificates",
	     "a file name", set_str, &o->ca_file},
	    {"tls-verify", 0, "MODE", "client certificates: none (default), optional, required",
	     "none, optional or required (optional and required need --tls-ca)", set_verify,
	     &o->verify},
	    {"tls-protocols", 0, "LIST", "TLS versions (default TLSv1.2,TLSv1.3)",
	     "TLSv1.2, TLSv1.3 or TLSv1.2,TLSv1.3", set_protocols, &o->protocols},
	    {"tls-ciphers", 0, "LIST",
	     "TLS 1.2 ciphers, OpenSSL syntax (default ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL)",
	     "an OpenSSL cipher list, e.g. ECDHE+AESGCM", set_str, &o->ciphers},
	    {"tls-ciphersuites", 0, "LIST", "TLS 1.3 ciphersuites (default OpenSSL's three)",
	     "names such as TLS_AES_128_GCM_SHA256, colon-separated", set_str,
	     &o->ciphersuites},
	    {"tls-handshake-timeout", 0, "SECONDS",
	     "close a connection whose TLS handshake takes longer (default 10)",
	     "a number of seconds from 0.001 to 3600", set_handshake, &o->handshake_timeout},
	    {"tls-ticket-rotate", 0, "SECONDS",
	     "replace the session-ticket key this often (default 3600; the previous one still "
	     "resumes)",
	     "a number of seconds from 1 to 604800", set_rotate, &o->ticket_rotate},
	    {"tls-ktls", 0, "MODE",
	     "auto (default): after the handshake, records of AES-GCM connections go to the "
	     "kernel's TLS where it has it (see --version); off: always in user space",
	     "auto or off", set_ktls, &o->ktls},
	};
	unsigned i, n = sizeof(t) / sizeof(t[0]);

	for (i = 0; i < n && i < cap; i++)
		out[i] = t[i];
	return i;
}

void
cr_tls_app_opts_defaults(struct cr_tls_app_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->handshake_timeout = 10;
	o->ticket_rotate = 3600;
}

int
cr_tls_app_ctx(const struct cr_tls_app_opts *o, const char *alpn, struct cr_tls_ctx **out,
	       char *err, size_t len)
{
	struct cr_tls_cert certs[CR_TLS_MAX_CERTS];
	struct cr_tls_config cfg = {0};
	unsigned i;

	*out = NULL;
	if (!o->listen_set && o->n_certs == 0 && o->n_keys == 0)
		return 0; /* no TLS asked */
	if (!o->listen_set) {
		snprintf(err, len, "--tls-cert / --tls-key without --tls-listen HOST:PORT");
		return -EINVAL;
	}
	if (o->n_certs == 0 || o->n_certs != o->n_keys) {
		snprintf(err, len,
			 "--tls-listen needs --tls-cert FILE and --tls-key FILE, as many of each "
			 "(%u certificates, %u keys given)", o->n_certs, o->n_keys);
		return -EINVAL;
	}
	for (i = 0; i < o->n_certs; i++) {
		certs[i].cert_file = o->certs[i];
		certs[i].key_file = o->keys[i];
	}
	cfg.certs = certs;
	cfg.n_certs = o->n_certs;
	cfg.ca_file = o->ca_file;
	cfg.verify = o->verify;
	cfg.protocols = o->protocols;
	cfg.ciphers = o->ciphers;
	cfg.ciphersuites = o->ciphersuites;
	cfg.alpn = alpn;
	cfg.ktls = o->ktls;
	cfg.handshake_timeout_ms = (uint32_t)(o->handshake_timeout * 1000 + 0.5);
	if (cfg.handshake_timeout_ms == 0)
		cfg.handshake_timeout_ms = 1;
	*out = cr_tls_ctx_new(&cfg, err, len);
	return *out != NULL ? 0 : -errno;
}

/* ---- a server app's TLS listener ---- */

int
cr_tls_app_configure(struct cr_tls_app *t, const char *alpn, char *err, size_t len)
{
	int rc = cr_tls_app_ctx(&t->o, alpn, &t->ctx, err, len);

	if (rc != 0 || t->ctx == NULL)
		return rc;
	rc = cr_tls_telemetry_register();
	if (rc != 0)
		snprintf(err, len, "telemetry command /tls: %s", cr_strerror(rc));
	return rc;
}

int
cr_tls_app_listen(struct cr_tls_app *t, const struct cr_conn_opts *conn,
		  const struct cr_conn_ops *ops, void *arg, char *err, size_t len)
{
	struct cr_tcp_listen_opts lo = {0};
	char a[CR_NET_ADDR_STRLEN];
	int rc;

	if (t->ctx == NULL)
		return 0;
	lo.addr = t->o.listen;
	if (conn != NULL)
		lo.conn = *conn;
	cr_tls_conn_opts(&lo.conn, t->ctx);
	rc = cr_tcp_listen(&lo, ops, arg, &t->listener);
	if (rc != 0) {
		snprintf(err, len, "--tls-listen %s: %s",
			 cr_net_addr_format(&t->o.listen, a, sizeof(a)), cr_strerror(rc));
		return rc;
	}
	cr_listener_addr(t->listener, &t->bound);
	rc = cr_tls_tickets_rotate_every((uint64_t)(t->o.ticket_rotate * 1000));
	if (rc != 0)
		snprintf(err, len, "--tls-ticket-rotate: %s", cr_strerror(rc));
	return rc;
}

void
cr_tls_app_ready_line(const struct cr_tls_app *t, const char *prog, const char *proto)
{
	char a[CR_NET_ADDR_STRLEN];

	if (t->listener != NULL)
		printf("%s: listening on %s (%s), TLS records in %s\n", prog,
		       cr_net_addr_format(&t->bound, a, sizeof(a)), proto, cr_tls_record_mode());
}

void
cr_tls_app_close(struct cr_tls_app *t)
{
	if (t->listener != NULL)
		cr_listener_close(t->listener, NULL, NULL);
	t->listener = NULL;
	if (t->ctx != NULL)
		cr_tls_tickets_stop();
}

void
cr_tls_app_reload(struct cr_tls_app *t, const char *prog)
{
	char err[512];

	if (t->ctx == NULL)
		return;
	if (cr_tls_ctx_reload(t->ctx, err, sizeof(err)) != 0)
		fprintf(stderr, "%s: SIGHUP: TLS reload failed, the old certificates stay: %s\n",
			prog, err);
	else
		printf("%s: SIGHUP: TLS certificates and keys reloaded\n", prog);
	fflush(stdout);
}

void
cr_tls_app_fini(struct cr_tls_app *t)
{
	cr_tls_ctx_free(t->ctx);
	t->ctx = NULL;
}
