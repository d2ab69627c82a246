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
#include "tls_session.h"

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
/* Its connections hand their records to the kernel when they can (kTLS on and here). */
bool cr__tls_ctx_ktls(const struct cr_tls_ctx *ctx);
/* For the unit suite: contexts made from now on try the hand-over even where the probe
 * said the kernel has no kTLS; such a kernel then refuses it (the fallback path). */
extern bool cr__tls_ktls_try_anyway;
/* A context with kTLS off was made: the process no longer says "kernel". */
void cr__tls_ktls_turned_off(void);

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
	_Atomic uint64_t kernel, kernel_fallbacks;
};
extern struct tls_counters cr__tls_stats[CR_MAX_LCORES];

#define TLS_STAT_ADD(lc, field)                                                            \
	atomic_store_explicit(&cr__tls_stats[lc].field,                                    \
			      atomic_load_explicit(&cr__tls_stats[lc].field,               \
						   memory_order_relaxed) + 1,              \
			      memory_order_relaxed)

#endif /* TLS_INTERNAL_H */
