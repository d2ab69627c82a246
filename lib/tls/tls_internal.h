/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/tls internals shared by its source files and its unit suite. Never installed.
 */
#ifndef TLS_INTERNAL_H
#define TLS_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>

#include "cr_log.h"
#include "cr_tls.h"

/* Ciphertext fed to OpenSSL at a time: one full record (16 KiB + the largest overhead).
 * The read BIO never holds more than this plus an incomplete record's head. */
#define TLS_FEED_MAX (16384u + 2048u)
/* Plaintext handed to SSL_write_ex() at a time: one record's worth. */
#define TLS_WRITE_MAX 16384u
/* Worst-case bytes a record adds to its plaintext (TLS 1.2 CBC-SHA384 padding and MAC,
 * header), used to size sends all-or-nothing. */
#define TLS_RECORD_OVERHEAD 128u

extern struct cr_log_component cr__tls_log;

/* ---- the record engine (tls_session.c): OpenSSL over two memory BIOs ---- */

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
/* Send close_notify once (established only; otherwise nothing). */
void cr__tls_session_shutdown(struct tls_session *s);
/* The last OpenSSL error of this thread as text, for logs (clears the queue). */
const char *cr__tls_errstr(char *buf, size_t len);

/* ---- session tickets (tls_tickets.c) ---- */

/* Install the process's ticket key callback on @p ctx. */
void cr__tls_tickets_install(SSL_CTX *ctx);

/* ---- contexts (tls_ctx.c) ---- */

/* One loaded set of certificates: what a reload replaces. Counted: the context holds
 * one reference, each connection that took it in its handshake another. */
struct tls_certset {
	_Atomic unsigned refs;
	unsigned n;
	SSL_CTX *ctx[CR_TLS_MAX_CERTS]; /* [0] is the default; SNI picks another */
	struct cr_tls_ctx *owner;
};

void cr__tls_certset_put(struct tls_certset *set);
/* The current set with a reference for the caller; on an lcore. */
struct tls_certset *cr__tls_ctx_take(struct cr_tls_ctx *ctx);
uint32_t cr__tls_ctx_handshake_ms(const struct cr_tls_ctx *ctx);
bool cr__tls_ctx_server(const struct cr_tls_ctx *ctx);
const char *cr__tls_ctx_server_name(const struct cr_tls_ctx *ctx);
/* The calling lcore's client session slot, or NULL off an lcore. */
SSL_SESSION **cr__tls_ctx_session_slot(struct cr_tls_ctx *ctx);

/* ---- the client side (tls_client.c) ---- */

/* A client SSL_CTX of @p ctx: keep each lcore's last session. */
void cr__tls_client_install(struct cr_tls_ctx *ctx, SSL_CTX *sc);
/* Before a client's handshake: the name to send and check, the session to offer.
 * @return 0 or -ENOMEM. */
int cr__tls_client_prepare(struct cr_tls_ctx *ctx, SSL *ssl);
void cr__tls_client_sessions_free(SSL_SESSION **sessions, unsigned n);
/* A host name or an IP address literal. */
bool cr__tls_server_name_ok(const char *name);

/* ---- counters (tls_conn.c) ---- */
struct tls_counters {
	_Atomic uint64_t handshakes, resumed, failures, timeouts, closes_notified;
};
extern struct tls_counters cr__tls_stats[CR_MAX_LCORES];

#define TLS_STAT_ADD(lc, field)                                                            \
	atomic_store_explicit(&cr__tls_stats[lc].field,                                    \
			      atomic_load_explicit(&cr__tls_stats[lc].field,               \
						   memory_order_relaxed) + 1,              \
			      memory_order_relaxed)

#endif /* TLS_INTERNAL_H */
