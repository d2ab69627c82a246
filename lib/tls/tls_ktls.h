/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The kTLS hand-over's key material (tls_ktls_keys.c): taken from OpenSSL's keylog and
 * message callbacks as a handshake goes, turned into what setsockopt(SOL_TLS, TLS_TX /
 * TLS_RX) takes. OpenSSL only: the unit suite checks it against an in-memory peer.
 * Never installed.
 */
#ifndef TLS_KTLS_H
#define TLS_KTLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/tls.h>
#include <openssl/ssl.h>

/* One session's: [0] what we read, [1] what we write. Its SSL's app data points here. */
struct tls_ktls {
	uint8_t secret[2][64]; /* TLS 1.3 application traffic secrets */
	uint8_t secret_len[2];
	uint64_t seq[2];  /* records since the direction's key change: the next one's number */
	bool counting[2]; /* the direction changed to its application keys */
	bool rekeyed;	  /* a KeyUpdate went either way: the secrets above are stale */
};

/* What setsockopt(fd, SOL_TLS, TLS_TX or TLS_RX, &u, len) takes. */
struct tls_ktls_info {
	union {
		struct tls12_crypto_info_aes_gcm_128 gcm128;
		struct tls12_crypto_info_aes_gcm_256 gcm256;
	} u;
	unsigned len;
};

/* SSL_CTX_set_keylog_callback() and SSL_CTX_set_msg_callback() of a context whose
 * sessions may be handed over: they fill the struct tls_ktls of SSL_get_app_data(). */
void cr__tls_ktls_keylog(const SSL *ssl, const char *line);
void cr__tls_ktls_msg(int write_p, int version, int content_type, const void *buf, size_t len,
		      SSL *ssl, void *arg);

/*
 * Why @p ssl's records may not go to the kernel now, or NULL if they may: not TLS 1.2 or
 * 1.3 with AES-GCM; a TLS 1.3 client (the server's NewSessionTickets may still come, and
 * the kernel would end the connection on a record that is not data); a KeyUpdate seen
 * (the kernel would get the first keys); a direction's keys not seen.
 */
const char *cr__tls_ktls_refusal(SSL *ssl, const struct tls_ktls *k);

/*
 * The kernel's parameters for @p ssl's receive (@p tx false) or send direction, after
 * its handshake, for the next record. @return 0; -ENOTSUP (cr__tls_ktls_refusal() says
 * why), -EIO (OpenSSL's KDF failed).
 */
int cr__tls_ktls_info(SSL *ssl, const struct tls_ktls *k, bool tx, struct tls_ktls_info *out);

/* Wipe the secrets. */
void cr__tls_ktls_forget(struct tls_ktls *k);

#endif /* TLS_KTLS_H */
