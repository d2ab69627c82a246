/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * TLS to the backends (--backend-tls): a client context per backend slot, made on the
 * control path when the slot is assigned and read-only after (struct px_slot.tls), so
 * each backend is checked against its own name and each lcore resumes its own last
 * session with it. The name is the backend's own (`,sni=NAME`; `sni NAME` in --config),
 * else --backend-tls-sni, else its host as given: a name is sent as SNI and checked
 * against the certificate's names, an IP address is checked against its addresses
 * (lib/tls, cr_tls_config.server_name). The name of a slot's first sight stays: a reload
 * that changes it for the same address does not apply.
 *
 * A handshake that fails (a certificate that does not verify, a backend that does not
 * speak TLS) or does not finish, TCP connect included, within --connect-timeout is a
 * connect failure: the next backend is tried, it counts towards --fall, and one line
 * names the backend and why.
 * A health check of such a backend is a whole handshake with its context (backend.c), so
 * a backend whose certificate does not verify stays down.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cr_app.h"
#include "cr_tls.h"
#include "proxy.h"

struct px_backend_tls px_btls = {.verify = CR_TLS_VERIFY_REQUIRED};

static int
set_flag(const char *v, void *ctx)
{
	(void)v;
	*(bool *)ctx = true;
	return 0;
}

static int
set_str(const char *v, void *ctx)
{
	if (*v == '\0')
		return -EINVAL;
	*(const char **)ctx = v;
	px_btls.any = true;
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

/* A host name or an IP address: what lib/tls takes as server_name. */
bool
px_tls_name_ok(const char *v)
{
	size_t n = strlen(v);

	return n > 0 && n <= 253 && v[0] != '.' && v[0] != '-' && strstr(v, "..") == NULL &&
	       strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._:") == n;
}

static int
set_sni(const char *v, void *ctx)
{
	return px_tls_name_ok(v) ? set_str(v, ctx) : -EINVAL;
}

static int
set_verify(const char *v, void *ctx)
{
	enum cr_tls_verify *p = ctx;

	if (strcmp(v, "none") == 0)
		*p = CR_TLS_VERIFY_NONE;
	else if (strcmp(v, "required") == 0)
		*p = CR_TLS_VERIFY_REQUIRED;
	else
		return -EINVAL;
	px_btls.any = true;
	return 0;
}

const struct cr_opt px_backend_tls_options[PX_N_BTLS_OPTIONS] = {
    {"backend-tls", 0, NULL,
     "connect to the backends over TLS (their certificates checked: see "
     "--backend-tls-verify); health checks are then TLS handshakes",
     "", set_flag, &px_btls.on},
    {"backend-tls-ca", 0, "FILE",
     "PEM CA certificates that sign the backends' certificates (default: the system's)",
     "a file name", set_str, &px_btls.ca_file},
    {"backend-tls-verify", 0, "MODE",
     "required (default: the chain, and the name or IP address) or none (no check at all)",
     "none or required", set_verify, &px_btls.verify},
    {"backend-tls-sni", 0, "NAME",
     "the name sent as SNI and checked in every backend's certificate (default: the "
     "backend's host; an IP address is checked, not sent)",
     "a host name or an IP address", set_sni, &px_btls.sni},
    {"backend-tls-protocols", 0, "LIST", "TLS versions to the backends (default TLSv1.2,TLSv1.3)",
     "TLSv1.2, TLSv1.3 or TLSv1.2,TLSv1.3", set_protocols, &px_btls.protocols},
    {"backend-tls-ciphers", 0, "LIST",
     "TLS 1.2 ciphers to the backends, OpenSSL syntax (default ECDHE+AESGCM:ECDHE+CHACHA20)",
     "an OpenSSL cipher list", set_str, &px_btls.ciphers},
    {"backend-tls-ciphersuites", 0, "LIST",
     "TLS 1.3 ciphersuites to the backends (default OpenSSL's three)",
     "names such as TLS_AES_128_GCM_SHA256, colon-separated", set_str, &px_btls.ciphersuites},
};
_Static_assert(sizeof(px_backend_tls_options) / sizeof(px_backend_tls_options[0]) ==
		   PX_N_BTLS_OPTIONS,
	       "PX_N_BTLS_OPTIONS");

int
px_backend_tls_check(void)
{
	unsigned i;

	for (i = 0; i < px_conf.n_backends && !px_btls.on; i++)
		if (px_conf.backends[i].sni[0] != '\0')
			return cr_app_errorf(-EINVAL,
					     "--backend %s,sni=%s: sni without --backend-tls",
					     px_conf.backends[i].host, px_conf.backends[i].sni);
	if (px_btls.on || !px_btls.any)
		return 0;
	return cr_app_errorf(-EINVAL, "--backend-tls-ca, -verify, -sni, -protocols, -ciphers, "
				      "-ciphersuites: given without --backend-tls");
}

/* The name of a backend: its sni=, --backend-tls-sni, its host as given, its address. */
static const char *
server_name(const struct px_backend_conf *b, char *buf, size_t len)
{
	char a[CR_NET_ADDR_STRLEN];
	const void *ip;
	int af = b->addr.u.sa.sa_family;

	if (b->sni[0] != '\0')
		return b->sni;
	if (px_btls.sni != NULL)
		return px_btls.sni;
	if (b->host[0] != '\0')
		return b->host;
	ip = af == AF_INET ? (const void *)&b->addr.u.in4.sin_addr
			   : (const void *)&b->addr.u.in6.sin6_addr;
	if (inet_ntop(af, ip, a, sizeof(a)) == NULL)
		return NULL;
	snprintf(buf, len, "%s", a);
	return buf;
}

int
px_backend_tls_make(const struct px_backend_conf *b, struct cr_tls_ctx **out)
{
	struct cr_tls_config cfg = {0};
	char name[CR_NET_ADDR_STRLEN], err[512];
	double t = px_conf.connect_timeout > 0 ? px_conf.connect_timeout : 10;

	*out = NULL;
	if (!px_btls.on || !b->tls)
		return 0;
	cfg.client = true;
	cfg.ca_file = px_btls.ca_file;
	cfg.verify = px_btls.verify;
	cfg.server_name = server_name(b, name, sizeof(name));
	cfg.protocols = px_btls.protocols;
	cfg.ciphers = px_btls.ciphers;
	cfg.ciphersuites = px_btls.ciphersuites;
	/* Only a backstop: this timer starts once TCP is up. A session's connect timer
	 * (relay.c) bounds its TCP connect and handshake together by --connect-timeout, a
	 * health check's (backend.c) by --check-timeout. */
	cfg.handshake_timeout_ms = (uint32_t)(t * 1000 + 0.5);
	if (cfg.handshake_timeout_ms == 0)
		cfg.handshake_timeout_ms = 1;
	*out = cr_tls_ctx_new(&cfg, err, sizeof(err));
	if (*out == NULL)
		return cr_app_errorf(-errno, "--backend-tls, backend %s: %s",
				     cr_net_addr_format(&b->addr, name, sizeof(name)), err);
	return 0;
}

void
px_backend_tls_fini(void)
{
	unsigned i, n = px_backends_used();

	for (i = 0; i < n; i++) {
		cr_tls_ctx_free(px_slots[i].tls);
		px_slots[i].tls = NULL;
	}
}
