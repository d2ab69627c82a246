/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The client side of a context: what a connection made with cr_tcp_connect() checks and
 * sends, and the session it offers to resume.
 *
 * The name. cr_tls_config.server_name is either a host name, sent as SNI and checked
 * against the server certificate's names (SSL_set1_host), or an IP address literal,
 * checked against its IP addresses and not sent (RFC 6066 forbids literals in SNI).
 *
 * Resumption. Each lcore keeps the last session a server of this context gave it (a TLS
 * 1.3 ticket arrives after the handshake; a TLS 1.2 one at its end) and offers a copy of
 * it in each of its next handshakes until the server gives another: the ticket is reused
 * (RFC 8446 C.4 advises against it for privacy, which a proxy's own connections to its
 * backends do not need; HAProxy does the same). The slot is the lcore's own: set and read
 * on that lcore only, so no lock and no atomic; it is freed with the context. OpenSSL's
 * own client cache is off (it locks).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include <openssl/x509v3.h>

#include "cr_reactor.h"
#include "tls_internal.h"

static bool
ip_literal(const char *name)
{
	unsigned char b[16];

	return inet_pton(AF_INET, name, b) == 1 || inet_pton(AF_INET6, name, b) == 1;
}

/*
 * OpenSSL offers a new session (a ticket came): keep a copy as this lcore's, drop the last.
 * A copy, not the SSL's own session: that one travels with the SSL when the connection
 * moves to another lcore, and OpenSSL writes to it (marks it unresumable) when the SSL is
 * freed without a shutdown, so keeping it shared one object between two lcores and made
 * an abrupt end cost the next connection its resumption.
 */
static int
new_session(SSL *ssl, SSL_SESSION *sess)
{
	struct cr_tls_ctx *ctx = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
	SSL_SESSION **slot = ctx != NULL ? cr__tls_ctx_session_slot(ctx) : NULL;
	SSL_SESSION *copy;

	if (slot == NULL)
		return 0; /* not on an lcore: nothing kept */
	copy = SSL_SESSION_dup(sess);
	if (copy == NULL)
		return 0; /* the last one stays */
	SSL_SESSION_free(*slot);
	*slot = copy;
	return 0; /* OpenSSL keeps its reference to sess */
}

void
cr__tls_client_install(struct cr_tls_ctx *ctx, SSL_CTX *sc)
{
	SSL_CTX_set_app_data(sc, ctx);
	SSL_CTX_set_session_cache_mode(sc,
				       SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
	SSL_CTX_sess_set_new_cb(sc, new_session);
}

int
cr__tls_client_prepare(struct cr_tls_ctx *ctx, SSL *ssl)
{
	const char *name = cr__tls_ctx_server_name(ctx);
	SSL_SESSION **slot = cr__tls_ctx_session_slot(ctx);

	if (name != NULL && ip_literal(name)) {
		if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) != 1)
			return -ENOMEM;
	} else if (name != NULL) {
		if (SSL_set_tlsext_host_name(ssl, name) != 1 || SSL_set1_host(ssl, name) != 1)
			return -ENOMEM;
	}
	if (slot != NULL && *slot != NULL && SSL_SESSION_is_resumable(*slot)) {
		/* A copy: OpenSSL's client marks a TLS 1.3 session it resumed as used up,
		 * and a server may give no new ticket on a resumption (lib/tls's own renews
		 * TLS 1.3 tickets; others may not), so the kept one would then serve only every
		 * other connection. */
		SSL_SESSION *copy = SSL_SESSION_dup(*slot);

		if (copy != NULL) {
			(void)SSL_set_session(ssl, copy); /* stale: just a full handshake */
			SSL_SESSION_free(copy);
		}
	}
	return 0;
}

void
cr__tls_client_sessions_free(SSL_SESSION **sessions, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++) {
		SSL_SESSION_free(sessions[i]);
		sessions[i] = NULL;
	}
}

bool
cr__tls_server_name_ok(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > 253)
		return false;
	if (ip_literal(name))
		return true;
	/* A host name: letters, digits, '-', '.', '_' (some internal names have it). */
	return strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._") ==
		   n &&
	       name[0] != '.' && name[0] != '-';
}
