/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * TLS over lib/net connections, on OpenSSL 3.
 *
 * A context (struct cr_tls_ctx) holds certificates, keys and the security settings; it is
 * made once on the control path and shared read-only by every lcore. cr_tls_conn_opts()
 * puts it in a struct cr_conn_opts (a listener's opts.conn, or cr_tcp_connect()'s opts):
 * the app then keeps its struct cr_conn_ops and its cr_conn_send() / cr_conn_close() calls,
 * and sees plaintext. On a server, on_open runs once the handshake is done (a connection
 * whose handshake fails or times out is closed without any callback of the app); on_data
 * gets decrypted bytes; cr_conn_close() and cr_conn_shutdown_write() send close_notify
 * first; a peer's close_notify is an EOF (on_eof). A client connection's on_open also
 * waits for its handshake; cr_conn_send() before it returns -ENOTCONN.
 *
 * Records are made and read on the connection's lcore with memory BIOs: nothing blocks,
 * nothing locks; ciphertext waits in lib/net's output queue, so the watermarks count it.
 * TLS 1.2 and 1.3 only; renegotiation is refused; one session-ticket key set serves the
 * whole process (cr_tls_tickets_rotate()), so a ticket resumes on any lcore.
 */
#ifndef CR_TLS_H
#define CR_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cr_eal.h"
#include "cr_net.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Certificates one server context can hold for SNI. */
#define CR_TLS_MAX_CERTS 16

/** A TLS context. Opaque; shared by every lcore. */
struct cr_tls_ctx;

/** A certificate chain and its private key, both PEM files. */
struct cr_tls_cert {
	const char *cert_file; /**< leaf first, then intermediates */
	const char *key_file;
};

/** Whether connections hand their records to the kernel after the handshake (kTLS). */
enum cr_tls_ktls {
	CR_TLS_KTLS_AUTO = 0, /**< where the kernel has kTLS and the cipher is AES-GCM */
	CR_TLS_KTLS_OFF,      /**< always in user space */
};

/** Client certificates, on a server. */
enum cr_tls_verify {
	CR_TLS_VERIFY_NONE = 0, /**< server: ask none; client: do not check the server */
	CR_TLS_VERIFY_OPTIONAL, /**< server: ask, check one if sent (against ca_file) */
	CR_TLS_VERIFY_REQUIRED, /**< server: ask, refuse a client without one; client: check */
};

/** What a context is made of; NULL or zero means the default. Strings are copied. */
struct cr_tls_config {
	bool client; /**< a client context (for cr_tcp_connect()); default server */
	/**
	 * Server: at least one; [0] serves a client that sends no name or an unknown one,
	 * the others the names their certificates carry (SNI). Client: optional, at most
	 * one, sent when the server asks.
	 */
	const struct cr_tls_cert *certs;
	unsigned n_certs;
	/** PEM CA certificates: a server checks client certificates, a client the server. */
	const char *ca_file;
	enum cr_tls_verify verify;
	/** "TLSv1.2", "TLSv1.3" or "TLSv1.2,TLSv1.3" (default: both). */
	const char *protocols;
	/** TLS 1.2 cipher list, OpenSSL syntax (default: ECDHE with AES-GCM or ChaCha20). */
	const char *ciphers;
	/** TLS 1.3 ciphersuites, OpenSSL syntax (default: OpenSSL's three). */
	const char *ciphersuites;
	/**
	 * ALPN protocols, comma-separated, in our order of preference ("h2,http/1.1"). A
	 * server picks the first of its own the client offers, and goes on without ALPN when
	 * there is none in common or the client offers none; a client offers them.
	 */
	const char *alpn;
	/**
	 * Client: a host name, sent as SNI and checked against the server certificate's
	 * names; or an IP address, checked against its addresses and not sent. NULL: none
	 * sent, and only the chain is checked. A client context also keeps each lcore's last
	 * session from its server and offers it in that lcore's next handshake.
	 */
	const char *server_name;
	/** Close a connection whose handshake takes longer (default 10000 ms; 0: default). */
	uint32_t handshake_timeout_ms;
	/** kTLS: hand records to the kernel after the handshake where it can (default auto). */
	enum cr_tls_ktls ktls;
};

/**
 * Make a context: load and check every certificate and key (a key that does not match
 * its certificate is an error; an expired certificate, or a key file others may read, is
 * a warning logged once). Control path, any thread.
 * @param err  receives one line naming the file or value and the reason, on failure.
 * @return the context, or NULL with errno EINVAL (a bad value or file; see @p err),
 *         ENOMEM.
 */
struct cr_tls_ctx *cr_tls_ctx_new(const struct cr_tls_config *cfg, char *err, size_t errlen);

/**
 * Load the certificates and keys again from the same files (after they were replaced,
 * e.g. on SIGHUP). New handshakes use the new ones; live connections keep theirs and are
 * not dropped. On failure the old ones stay in use. Any thread (not an lcore: it waits
 * for lcores inside a handshake's start, a few microseconds), not concurrently with
 * itself or with cr_tls_ctx_free().
 * @return 0, or -EINVAL / -ENOMEM with @p err filled.
 */
int cr_tls_ctx_reload(struct cr_tls_ctx *ctx, char *err, size_t errlen);

/** Free @p ctx once no connection uses it any more (it is counted). NULL is fine. */
void cr_tls_ctx_free(struct cr_tls_ctx *ctx);

/** Reloads that succeeded so far. Any thread. */
unsigned cr_tls_ctx_reloads(const struct cr_tls_ctx *ctx);

/**
 * Make connections made with @p o TLS connections of @p ctx (sets o->layer and
 * o->layer_arg). @p ctx must outlive them (cr_tls_ctx_free() waits for them itself).
 */
void cr_tls_conn_opts(struct cr_conn_opts *o, struct cr_tls_ctx *ctx);

/** True if @p c is a TLS connection. On the connection's lcore. */
bool cr_tls_conn(const struct cr_conn *c);

/** The ALPN protocol agreed on @p c, or NULL. On the connection's lcore, after on_open. */
const char *cr_tls_alpn(const struct cr_conn *c, size_t *len);

/** The SNI name the client sent, or NULL. On the connection's lcore, after on_open. */
const char *cr_tls_server_name(const struct cr_conn *c);

/** "TLSv1.3" or "TLSv1.2", or NULL. On the connection's lcore, after on_open. */
const char *cr_tls_version(const struct cr_conn *c);

/** True if @p c resumed a session (a ticket). On the connection's lcore, after on_open. */
bool cr_tls_resumed(const struct cr_conn *c);

/** True if the client sent a certificate that verified. Server, after on_open. */
bool cr_tls_peer_verified(const struct cr_conn *c);

/**
 * True once @p c's records go through the kernel (kTLS: handed over after the handshake,
 * when the wire was quiet). On the connection's lcore.
 */
bool cr_tls_kernel(const struct cr_conn *c);

/**
 * Why @p c's TLS failed (its handshake, or a record after it), for a log line: "certificate
 * verify failed: " and OpenSSL's reason (an unknown CA, a hostname mismatch, an expired
 * certificate), or OpenSSL's reason for another failure. On the connection's lcore, until
 * on_close returns.
 * @param buf  receives the text (one line, truncated to @p len).
 * @return @p buf, or NULL if @p c is not TLS or TLS did not fail (a timeout, a reset).
 */
const char *cr_tls_failure(const struct cr_conn *c, char *buf, size_t len);

/* ---- an app's command-line options ---- */

/** What the TLS options of an app (cr_tls_app_opts_table()) set. Strings are borrowed
 * from the command line (or the --config file's lines), which outlive the app. */
struct cr_tls_app_opts {
	struct cr_net_addr listen; /**< --tls-listen */
	bool listen_set;
	const char *certs[CR_TLS_MAX_CERTS]; /**< --tls-cert, in order */
	const char *keys[CR_TLS_MAX_CERTS];  /**< --tls-key, in order */
	unsigned n_certs, n_keys;
	const char *ca_file;	       /**< --tls-ca */
	enum cr_tls_verify verify;     /**< --tls-verify */
	const char *protocols;	       /**< --tls-protocols */
	const char *ciphers;	       /**< --tls-ciphers */
	const char *ciphersuites;      /**< --tls-ciphersuites */
	double handshake_timeout;      /**< --tls-handshake-timeout, seconds (default 10) */
	double ticket_rotate;	       /**< --tls-ticket-rotate, seconds (default 3600) */
	enum cr_tls_ktls ktls;	       /**< --tls-ktls (default auto) */
};

/** The defaults of struct cr_tls_app_opts. Any thread. */
void cr_tls_app_opts_defaults(struct cr_tls_app_opts *o);

/** The number of entries cr_tls_app_opts_table() writes. */
#define CR_TLS_APP_N_OPTS 11

/**
 * Write the TLS options (--tls-listen, --tls-cert, --tls-key, --tls-ca, --tls-verify,
 * --tls-protocols, --tls-ciphers, --tls-ciphersuites, --tls-handshake-timeout,
 * --tls-ticket-rotate, --tls-ktls), which set @p o, into @p out (at most @p cap entries), for an app to
 * append to its option table. @return the entries written.
 */
unsigned cr_tls_app_opts_table(struct cr_tls_app_opts *o, struct cr_opt *out, unsigned cap);

/**
 * The server context the options describe, with ALPN @p alpn (NULL: none): *@p out NULL
 * and 0 when no TLS option was given. Control path.
 * @return 0; -EINVAL with one line in @p err (options that do not go together, or
 *         cr_tls_ctx_new()'s line naming the file or value); -ENOMEM.
 */
int cr_tls_app_ctx(const struct cr_tls_app_opts *o, const char *alpn, struct cr_tls_ctx **out,
		   char *err, size_t len);

/**
 * A server app's TLS listener, from its options: what cr-http, cr-kv and cr-proxy share.
 * Zero it, then cr_tls_app_opts_defaults(&t->o) before the options are parsed.
 */
struct cr_tls_app {
	struct cr_tls_app_opts o;
	struct cr_tls_ctx *ctx;	     /**< NULL: no TLS option given */
	struct cr_listener *listener; /**< after cr_tls_app_listen() */
	struct cr_net_addr bound;     /**< its address, the kernel's port for 0 */
};

/**
 * After the options (an app's configure()): make the context (cr_tls_app_ctx()) and
 * register /tls. Nothing when no TLS option was given. @return 0 or -errno, with one line
 * in @p err.
 */
int cr_tls_app_configure(struct cr_tls_app *t, const char *alpn, char *err, size_t len);

/**
 * On the main lcore (the app's start()): listen on --tls-listen with @p conn's options
 * (copied; NULL: defaults) made TLS, serving @p ops / @p arg, and start the ticket key
 * rotation (--tls-ticket-rotate). Nothing without a context. @return 0 or -errno, with
 * one line in @p err.
 */
int cr_tls_app_listen(struct cr_tls_app *t, const struct cr_conn_opts *conn,
		      const struct cr_conn_ops *ops, void *arg, char *err, size_t len);

/** Print "PROG: listening on ADDR (PROTO), TLS records in MODE" if listening. */
void cr_tls_app_ready_line(const struct cr_tls_app *t, const char *prog, const char *proto);

/** On the main lcore at the app's stop: close the listener, stop the rotation. */
void cr_tls_app_close(struct cr_tls_app *t);

/** The app's reload (SIGHUP, signal thread): cr_tls_ctx_reload(), one line either way. */
void cr_tls_app_reload(struct cr_tls_app *t, const char *prog);

/** After the runtime stopped (the app's fini()): free the context. */
void cr_tls_app_fini(struct cr_tls_app *t);

/* ---- session tickets ---- */

/**
 * Replace the process's session-ticket key: tickets of the previous key still resume (and
 * get a fresh ticket), older ones no longer. Any thread.
 * @return 0 or -EIO (no random bytes).
 */
int cr_tls_tickets_rotate(void);

/** Rotations so far. Any thread. */
uint64_t cr_tls_tickets_generation(void);

/**
 * Rotate every @p interval_ms (at least 1000) from a timer of the calling lcore (use the
 * main lcore); calling it again changes the interval. Stop it with cr_tls_tickets_stop()
 * before that lcore stops.
 * @return 0, -EPERM (not an lcore), -EINVAL (below 1000).
 */
int cr_tls_tickets_rotate_every(uint64_t interval_ms);

/** Stop the rotation timer. On the lcore that started it. */
void cr_tls_tickets_stop(void);

/* ---- kTLS and counters ---- */

/**
 * Whether the kernel offers kTLS (the "tls" TCP upper layer protocol): probed once, on a
 * socket, by asking for it. Any thread.
 */
bool cr_tls_ktls_available(void);

/**
 * "kernel" where kTLS runs (the kernel has it and no context turned it off: connections
 * with AES-GCM hand their records over after the handshake), else "user-space".
 */
const char *cr_tls_record_mode(void);

/** Counters of one lcore. */
struct cr_tls_stats {
	uint64_t handshakes; /**< finished, full or resumed */
	uint64_t resumed;    /**< of which resumed with a ticket */
	uint64_t failures;   /**< handshakes that failed (bad input, alerts, certificates) */
	uint64_t timeouts;   /**< handshakes closed after the handshake timeout */
	uint64_t closes_notified; /**< close_notify sent */
	uint64_t kernel;	  /**< connections whose records went to the kernel (kTLS) */
	uint64_t kernel_fallbacks; /**< kTLS wanted, user space kept (cipher, kernel, busy,
				    a TLS 1.3 client, a KeyUpdate); not one that ended first */
};

/** Snapshot lcore @p lcore's counters. Any thread. @return 0 or -EINVAL. */
int cr_tls_stats(unsigned lcore, struct cr_tls_stats *out);

/**
 * Register the /tls telemetry command: the OpenSSL version, where records are made
 * ("records": "user-space" or "kernel"), whether the kernel has kTLS, the ticket key
 * rotations and the handshake totals over every lcore. Control path, once.
 * @return 0 or cr_telemetry_register()'s error.
 */
int cr_tls_telemetry_register(void);

#ifdef __cplusplus
}
#endif
#endif /* CR_TLS_H */
