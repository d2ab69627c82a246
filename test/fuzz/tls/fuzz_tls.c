/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for lib/tls/tls_session.c, the record engine, on the server side.
 *
 * The first byte chooses the mode; its low 7 bits the piece size (0: whole), for bytes
 * are fed to the server in pieces as lib/net's receives would feed them.
 * - Below 128, raw: the rest is what a client sent, from its first byte (a ClientHello,
 *   garbage). The server's answer is random each run, so this mode reaches the first
 *   flight and the record framing, not a finished handshake.
 * - From 128, scripted: a real OpenSSL client (in memory) finishes a handshake first, then
 *   the rest is a script of steps, each a byte (the step) and a length byte: the client
 *   encrypts that many bytes of the input as records, or those bytes are put raw into the
 *   stream (a forged or cut record), or the client sends close_notify or a KeyUpdate.
 *   Here bit 6 of the first byte makes the client stop at TLS 1.2, and the piece size is
 *   its low 6 bits.
 *   Checked: the plaintext delivered is always a prefix of what the client encrypted
 *   (never a forged byte, never out of order), and once no raw bytes went in, all of it.
 * Both modes check after every piece: the write BIO is empty (all OpenSSL wrote was
 * handed over), the read BIO holds at most two feeds, plaintext comes in records of at
 * most 16 KiB and only once established, nothing after a failure or close_notify.
 * The server has an ECDSA P-256 certificate made in memory at start, TLS 1.2 and 1.3,
 * tickets off (their keys are the process's, tls_tickets.c, not built here). The corpus
 * holds ClientHellos captured from `openssl s_client`, truncated variants, and scripts.
 */
#include <stdarg.h>
#include <stdint.h>
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

static SSL_CTX *server_ctx, *client_ctx;

#define SENT_MAX 65536

struct run {
	struct tls_session s;
	BIO *crb; /* the scripted client's read BIO: the server's output goes there */
	unsigned established;
	bool closed_or_failed; /* nothing may be delivered after this */
	uint8_t sent[SENT_MAX]; /* what the client encrypted */
	size_t sent_len, got;
};

static int
io_out(void *arg, const void *data, size_t len)
{
	struct run *r = arg;

	if (r->crb != NULL && BIO_write(r->crb, data, (int)len) != (int)len)
		abort();
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

	if (r->established != 1 || r->closed_or_failed || len == 0 || len > 16384)
		abort();
	/* A forged record must not decrypt: only what the client encrypted, in order. */
	if (r->got + len > r->sent_len || memcmp(r->sent + r->got, data, len) != 0)
		abort();
	r->got += len;
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
	client_ctx = SSL_CTX_new(TLS_client_method());
	if (client_ctx == NULL)
		abort();
	SSL_CTX_set_verify(client_ctx, SSL_VERIFY_NONE, NULL);
	return 0;
}

/* Feed @p len bytes to the server in pieces of at most @p piece_max, checking as we go. */
static int
feed(struct run *r, const uint8_t *p, size_t len, size_t piece_max)
{
	size_t off = 0;
	int rc = 0;

	while (off < len && rc == 0 && !r->closed_or_failed) {
		size_t n = len - off;
		uint32_t pick = (uint32_t)((off + 1) * 2654435761u);

		if (n > piece_max)
			n = 1 + pick % piece_max;
		rc = cr__tls_session_input(&r->s, p + off, n);
		off += n;
		if (BIO_ctrl_pending(r->s.wbio) != 0)
			abort();
		if (!r->s.failed && BIO_ctrl_pending(r->s.rbio) > 2 * TLS_FEED_MAX)
			abort();
		if (rc != 0)
			r->closed_or_failed = true;
	}
	return rc;
}

/* What the client wrote, to the server; what the server wrote, read by the client. */
static void
pump(struct run *r, SSL *cli, BIO *cwb, size_t piece_max)
{
	uint8_t buf[4096];
	size_t k;
	char *p;
	long n = BIO_get_mem_data(cwb, &p);

	if (n > 0) {
		uint8_t *copy = malloc((size_t)n);

		memcpy(copy, p, (size_t)n);
		(void)BIO_reset(cwb);
		(void)feed(r, copy, (size_t)n, piece_max);
		free(copy);
	}
	while (SSL_read_ex(cli, buf, sizeof(buf), &k) == 1)
		; /* tickets, a KeyUpdate, our replies: the client takes them in */
	ERR_clear_error();
}

/* A handshake with a real client, then the script. */
static void
scripted(struct run *r, const uint8_t *data, size_t size, size_t piece_max, bool tls12)
{
	SSL *cli = SSL_new(client_ctx);
	BIO *crb = BIO_new(BIO_s_mem()), *cwb = BIO_new(BIO_s_mem());
	size_t off = 0, w;
	bool raw = false;
	int i;

	BIO_set_mem_eof_return(crb, -1);
	SSL_set_bio(cli, crb, cwb);
	SSL_set_connect_state(cli);
	if (tls12)
		SSL_set_max_proto_version(cli, TLS1_2_VERSION);
	r->crb = crb;
	for (i = 0; i < 8 && SSL_do_handshake(cli) != 1; i++)
		pump(r, cli, cwb, piece_max);
	ERR_clear_error();
	pump(r, cli, cwb, piece_max);
	while (off + 2 <= size && !r->closed_or_failed) {
		unsigned step = data[off] % 4;
		size_t n = data[off + 1];

		off += 2;
		if (n > size - off)
			n = size - off;
		if (step == 0 && r->sent_len + n <= SENT_MAX && n > 0 &&
		    SSL_write_ex(cli, data + off, n, &w) == 1) {
			memcpy(r->sent + r->sent_len, data + off, n);
			r->sent_len += n;
		} else if (step == 1) {
			BIO_write(cwb, data + off, (int)n); /* raw bytes in the stream */
			raw = raw || n > 0;
		} else if (step == 2) {
			(void)SSL_shutdown(cli);
		} else if (step == 3) {
			(void)SSL_key_update(cli, SSL_KEY_UPDATE_REQUESTED);
			(void)SSL_do_handshake(cli);
		}
		ERR_clear_error();
		if (step <= 1)
			off += n;
		pump(r, cli, cwb, piece_max);
		if (r->s.established && !r->s.failed && !r->s.peer_closed)
			(void)cr__tls_session_write(&r->s, "ok", 2);
	}
	/* Nothing forged went in: every byte the client encrypted arrived. */
	if (!raw && !r->s.failed && r->established == 1 && r->got != r->sent_len)
		abort();
	r->crb = NULL; /* SSL_free() frees it */
	SSL_free(cli);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct run r;
	size_t piece_max;

	if (size < 1)
		return 0;
	piece_max = data[0] & (data[0] & 0x80 ? 0x3f : 0x7f);
	if (piece_max == 0)
		piece_max = SIZE_MAX;
	memset(&r, 0, sizeof(r));
	if (cr__tls_session_init(&r.s, server_ctx, true, &io, &r) != 0)
		return 0;
	if (data[0] & 0x80)
		scripted(&r, data + 1, size - 1, piece_max, data[0] & 0x40);
	else
		(void)feed(&r, data + 1, size - 1, piece_max);
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
