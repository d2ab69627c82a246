/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The record engine: one SSL over two memory BIOs. Ciphertext from the socket is written
 * into the read BIO a record's worth at a time and OpenSSL is stepped until it wants more;
 * whatever it wrote into the write BIO is handed to the owner (lib/net's output queue) at
 * once, straight from the BIO's buffer, and the BIO is emptied. So neither BIO ever holds
 * more than about one record: the connection's bytes in flight are in lib/net's queue,
 * where its watermarks count them. Nothing here blocks, locks or knows about sockets: the
 * unit suite drives it against an in-memory peer.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>

#include "tls_session.h"

#define L cr__tls_log

/* Plaintext out of SSL_read_ex(), delivered before the next read: one record. */
static _Thread_local uint8_t plain_buf[16384];

const char *
cr__tls_errstr(char *buf, size_t len)
{
	unsigned long e = ERR_get_error();

	if (e == 0)
		snprintf(buf, len, "no OpenSSL error");
	else
		ERR_error_string_n(e, buf, len);
	ERR_clear_error();
	return buf;
}

int
cr__tls_session_init(struct tls_session *s, SSL_CTX *ctx, bool server,
		     const struct tls_session_io *io, void *arg)
{
	memset(s, 0, sizeof(*s));
	s->io = io;
	s->arg = arg;
	s->ssl = SSL_new(ctx);
	s->rbio = BIO_new(BIO_s_mem());
	s->wbio = BIO_new(BIO_s_mem());
	if (s->ssl == NULL || s->rbio == NULL || s->wbio == NULL) {
		BIO_free(s->rbio);
		BIO_free(s->wbio);
		SSL_free(s->ssl);
		s->ssl = NULL;
		return -ENOMEM;
	}
	/* An empty read BIO means "wait for more", not EOF. */
	BIO_set_mem_eof_return(s->rbio, -1);
	SSL_set_bio(s->ssl, s->rbio, s->wbio);
	if (server)
		SSL_set_accept_state(s->ssl);
	else
		SSL_set_connect_state(s->ssl);
	return 0;
}

void
cr__tls_session_fini(struct tls_session *s)
{
	if (s == NULL || s->ssl == NULL)
		return;
	SSL_free(s->ssl);
	s->ssl = NULL;
}

static bool
alive(const struct tls_session *s)
{
	return !s->failed && (s->io->alive == NULL || s->io->alive(s->arg));
}

/* Hand what OpenSSL wrote to the owner, from the BIO's own buffer, and empty it. */
static int
flush(struct tls_session *s)
{
	char *p;
	long n = BIO_get_mem_data(s->wbio, &p);
	int rc;

	if (n <= 0)
		return 0;
	rc = s->io->out(s->arg, p, (size_t)n);
	(void)BIO_reset(s->wbio);
	if (rc != 0)
		s->failed = true;
	return rc;
}

/* After an SSL call returned @p r: 0 if it only wants more input, else the failure. */
static int
ssl_result(struct tls_session *s, int r)
{
	char buf[160];
	int e = SSL_get_error(s->ssl, r);

	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
		return 0;
	if (e == SSL_ERROR_ZERO_RETURN) {
		s->peer_closed = true;
		return 1;
	}
	s->failed = true;
	s->err = ERR_peek_error();
	CR_LOG(L, INFO, "TLS: %s", cr__tls_errstr(buf, sizeof(buf)));
	/* An alert OpenSSL queued for the peer still goes out. */
	(void)flush(s);
	s->failed = true;
	return -EPROTO;
}

static int
handshake(struct tls_session *s)
{
	int r, rc;

	ERR_clear_error(); /* SSL_get_error() reads this thread's queue: only ours in it */
	r = SSL_do_handshake(s->ssl);
	rc = flush(s);

	if (rc != 0)
		return rc;
	if (r != 1)
		return ssl_result(s, r);
	s->established = true;
	s->io->established(s->arg);
	return 0;
}

int
cr__tls_session_start(struct tls_session *s)
{
	return handshake(s) < 0 ? -EPROTO : 0;
}

/* Decrypt everything the read BIO holds, delivering each record's plaintext. */
static int
read_all(struct tls_session *s)
{
	size_t got;
	int r, rc;

	while (alive(s)) {
		ERR_clear_error();
		r = SSL_read_ex(s->ssl, plain_buf, sizeof(plain_buf), &got);
		rc = flush(s); /* a KeyUpdate answer, an alert */
		if (rc != 0)
			return rc;
		if (r != 1)
			return ssl_result(s, r);
		s->io->plain(s->arg, plain_buf, got);
	}
	return 0;
}

/* Follow the record framing of @p len fed bytes (a header: type, version, length). */
static void
frame(struct tls_session *s, const uint8_t *p, size_t len)
{
	s->fed += len;
	while (len > 0) {
		size_t n;

		if (s->rec_left > 0) {
			n = len < s->rec_left ? len : s->rec_left;
			s->rec_left -= (uint32_t)n;
		} else {
			n = 1;
			s->hdr[s->hdr_have++] = *p;
			if (s->hdr_have == sizeof(s->hdr)) {
				s->rec_left = (uint32_t)s->hdr[3] << 8 | s->hdr[4];
				s->hdr_have = 0;
			}
		}
		p += n;
		len -= n;
	}
}

bool
cr__tls_session_at_record_end(const struct tls_session *s)
{
	/* After close_notify or a failure nothing more is read: what is left is no record. */
	if (s->peer_closed || s->failed)
		return true;
	return s->rec_left == 0 && s->hdr_have == 0 && !SSL_has_pending(s->ssl) &&
	       BIO_ctrl_pending(s->rbio) == 0 && BIO_ctrl_pending(s->wbio) == 0;
}

int
cr__tls_session_input(struct tls_session *s, const void *data, size_t len)
{
	const uint8_t *p = data;
	int rc = 0;

	while (len > 0 && rc == 0 && alive(s) && !s->peer_closed) {
		size_t n = len < TLS_FEED_MAX ? len : TLS_FEED_MAX;

		if (BIO_write(s->rbio, p, (int)n) != (int)n) {
			s->failed = true;
			return -ENOMEM;
		}
		frame(s, p, n);
		p += n;
		len -= n;
		if (!s->established)
			rc = handshake(s);
		if (rc == 0 && s->established)
			rc = read_all(s);
	}
	if (s->peer_closed)
		return 1;
	return rc;
}

int
cr__tls_session_write(struct tls_session *s, const void *data, size_t len)
{
	const uint8_t *p = data;
	size_t done;
	int r, rc;

	if (!s->established || s->shut_sent || s->failed)
		return -ENOTCONN;
	while (len > 0) {
		size_t n = len < TLS_WRITE_MAX ? len : TLS_WRITE_MAX;

		ERR_clear_error();
		r = SSL_write_ex(s->ssl, p, n, &done);
		rc = flush(s);
		if (rc != 0)
			return rc;
		if (r != 1)
			return ssl_result(s, r) < 0 ? -EPROTO : -EAGAIN;
		p += done;
		len -= done;
	}
	return 0;
}

void
cr__tls_session_shutdown(struct tls_session *s)
{
	if (!s->established || s->shut_sent || s->failed)
		return;
	s->shut_sent = true;
	ERR_clear_error();
	(void)SSL_shutdown(s->ssl);
	(void)flush(s);
}
