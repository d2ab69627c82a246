/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/tls's record engine (tls_session.c): OpenSSL over two memory BIOs. It needs nothing
 * of the runtime but a log component, so the unit suite and the fuzz target (test/fuzz/tls)
 * build it alone. Never installed.
 */
#ifndef TLS_SESSION_H
#define TLS_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>

#include "cr_log.h"

/* Ciphertext fed to OpenSSL at a time: one full record (16 KiB + the largest overhead).
 * The read BIO never holds more than this plus an incomplete record's head. */
#define TLS_FEED_MAX (16384u + 2048u)
/* Plaintext handed to SSL_write_ex() at a time: one record's worth. */
#define TLS_WRITE_MAX 16384u
/* Worst-case bytes a record adds to its plaintext (TLS 1.2 CBC-SHA384 padding and MAC,
 * header), used to size sends all-or-nothing. */
#define TLS_RECORD_OVERHEAD 128u

/* lib/tls's log component (tls_conn.c). */
extern struct cr_log_component cr__tls_log;

/* Where a session puts what it makes. */
struct tls_session_io {
	/* Ciphertext for the peer; 0 or -errno (the session then fails). */
	int (*out)(void *arg, const void *data, size_t len);
	/* The handshake finished. */
	void (*established)(void *arg);
	/* Plaintext from the peer. */
	void (*plain)(void *arg, const void *data, size_t len);
	/* False once the owner may no longer be called (closed, destroyed): the session stops
	 * delivering. NULL: always. */
	bool (*alive)(void *arg);
};

struct tls_session {
	SSL *ssl;
	BIO *rbio, *wbio; /* owned by ssl */
	const struct tls_session_io *io;
	void *arg;
	bool established;
	bool peer_closed; /* close_notify received */
	bool shut_sent;	  /* close_notify sent */
	bool failed;
	unsigned long err; /* the OpenSSL error that failed it (0: none), for cr_tls_failure() */
	/* The peer's records as they were fed: where the last one ends. */
	uint64_t fed;	   /* ciphertext bytes fed, over the session's life */
	uint32_t rec_left; /* bytes of the current record's body still to come */
	uint8_t hdr_have;  /* bytes of the next record's 5-byte header seen */
	uint8_t hdr[5];
};

/* Set up @p s over a new SSL of @p ctx. @return 0 or -ENOMEM. */
int cr__tls_session_init(struct tls_session *s, SSL_CTX *ctx, bool server,
			 const struct tls_session_io *io, void *arg);
/* Free the SSL (no close_notify: see cr__tls_session_shutdown()). NULL-safe. */
void cr__tls_session_fini(struct tls_session *s);
/* Start a client's handshake (its ClientHello goes out). @return 0 or -EPROTO. */
int cr__tls_session_start(struct tls_session *s);
/*
 * Ciphertext from the peer: advance the handshake, deliver plaintext. @return 0;
 * 1 once the peer's close_notify came (nothing more will be delivered); -EPROTO (a TLS
 * error: an alert went out if one was due, the session is failed), or out's error.
 */
int cr__tls_session_input(struct tls_session *s, const void *data, size_t len);
/* Encrypt @p len bytes for the peer (established only). @return 0, -ENOTCONN, -EPROTO. */
int cr__tls_session_write(struct tls_session *s, const void *data, size_t len);
/*
 * True when the session holds no part of a record: every record fed was whole, OpenSSL
 * has nothing buffered or undelivered (SSL_has_pending) and neither BIO holds bytes.
 * Closing it then cuts nothing the peer sent or we made.
 */
bool cr__tls_session_at_record_end(const struct tls_session *s);
/* Send close_notify once (established only; otherwise nothing). */
void cr__tls_session_shutdown(struct tls_session *s);
/* The last OpenSSL error of this thread as text, for logs (clears the queue). */
const char *cr__tls_errstr(char *buf, size_t len);

#endif /* TLS_SESSION_H */
