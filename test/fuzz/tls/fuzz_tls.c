/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for lib/tls/tls_session.c, the record engine, on the server side.
 *
 * The input is what a client sent: fed to a fresh server session in pieces (sizes drawn
 * from the input's first byte), as lib/net's receives would feed it. The server has an
 * ECDSA P-256 certificate made in memory at start, TLS 1.2 and 1.3, tickets off (their
 * keys are the process's, in tls_tickets.c, not built here). Checked after every piece:
 * the write BIO is empty (everything OpenSSL wrote was handed over), the read BIO holds
 * at most a feed and a record, plaintext comes in records of at most 16 KiB and only once
 * established, nothing is delivered after a failure or the peer's close_notify. If the
 * handshake finished, a reply and a close_notify are written. The corpus holds a
 * ClientHello captured from `openssl s_client` and truncated variants.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include "tls_session.h"

struct cr_log_component cr__tls_log = {"lib.tls", CR_LOG_NOTICE, NULL};

/* lib/eal's log is not built here: format the line (so its arguments are checked), drop it. */
void
cr_log_write(const struct cr_log_component *c, int level, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	(void)c;
	(void)level;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
}

static SSL_CTX *server_ctx;

struct run {
	struct tls_session s;
	size_t out_bytes;
	unsigned established;
	bool closed_or_failed; /* nothing may be delivered after this */
};

static int
io_out(void *arg, const void *data, size_t len)
{
	struct run *r = arg;

	(void)data;
	r->out_bytes += len;
	return 0;
}

static void
io_established(void *arg)
{
	struct run *r = arg;

	r->established++;
}

static void
io_plain(void *arg, const void *data, size_t len)
{
	struct run *r = arg;

	(void)data;
	if (r->established != 1 || r->closed_or_failed || len == 0 || len > 16384)
		abort();
}

static const struct tls_session_io io = {io_out, io_established, io_plain, NULL};

static SSL_CTX *
make_ctx(void)
{
	EVP_PKEY *k = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	X509_NAME *n;
	SSL_CTX *c = SSL_CTX_new(TLS_server_method());

	if (k == NULL || x == NULL || c == NULL)
		abort();
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), -3600);
	X509_gmtime_adj(X509_getm_notAfter(x), 86400);
	X509_set_pubkey(x, k);
	n = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)"localhost", -1,
				   -1, 0);
	X509_set_issuer_name(x, n);
	if (X509_sign(x, k, EVP_sha256()) == 0 || SSL_CTX_use_certificate(c, x) != 1 ||
	    SSL_CTX_use_PrivateKey(c, k) != 1)
		abort();
	/* lib/tls's server settings (tls_ctx.c), tickets aside. */
	SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
	SSL_CTX_set_options(c, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
				   SSL_OP_NO_COMPRESSION | SSL_OP_NO_TICKET);
	SSL_CTX_set_cipher_list(c, "ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL");
	SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF);
	X509_free(x);
	EVP_PKEY_free(k);
	return c;
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	server_ctx = make_ctx();
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct run r;
	size_t off = 1, piece_max;
	int rc = 0;

	if (size < 1)
		return 0;
	/* 0: one piece; else pieces of 1 to the first byte's value. */
	piece_max = data[0] == 0 ? size : data[0];
	memset(&r, 0, sizeof(r));
	if (cr__tls_session_init(&r.s, server_ctx, true, &io, &r) != 0)
		return 0;
	while (off < size && rc == 0) {
		size_t n = size - off;
		uint32_t pick = (uint32_t)(off * 2654435761u);

		if (n > piece_max)
			n = 1 + pick % piece_max;
		rc = cr__tls_session_input(&r.s, data + off, n);
		off += n;
		if (BIO_ctrl_pending(r.s.wbio) != 0)
			abort();
		if (!r.s.failed && BIO_ctrl_pending(r.s.rbio) > 2 * TLS_FEED_MAX)
			abort();
		if (rc != 0)
			r.closed_or_failed = true;
	}
	if (r.established > 1 || (r.established == 1) != r.s.established)
		abort();
	if (r.s.established && !r.s.failed && !r.s.peer_closed) {
		static const char reply[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";

		(void)cr__tls_session_write(&r.s, reply, sizeof(reply) - 1);
		cr__tls_session_shutdown(&r.s);
	}
	cr__tls_session_fini(&r.s);
	ERR_clear_error();
	return 0;
}
