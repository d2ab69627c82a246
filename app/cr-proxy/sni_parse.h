/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The server_name of a TLS ClientHello (sni_parse.c), for SNI passthrough. No OpenSSL, no
 * allocation, no state between calls. Never installed.
 */
#ifndef SNI_PARSE_H
#define SNI_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most bytes a passthrough listener reads before it must have the whole hello. */
#define PX_SNI_MAX 16384u
/* The longest name: a DNS name is at most 253 characters. */
#define PX_SNI_NAME_MAX 256u

enum px_sni_result {
	PX_SNI_MORE = 0, /* a ClientHello so far: send more */
	PX_SNI_FOUND,	 /* a whole ClientHello with a host_name, lower-cased into name */
	PX_SNI_NONE,	 /* a whole ClientHello without one */
	PX_SNI_BAD,	 /* not a ClientHello, or a malformed one, or one over PX_SNI_MAX */
};

/*
 * Look at the first @p len bytes a client sent. @p scratch (at least PX_SNI_MAX bytes)
 * receives the hello's handshake bytes; @p name (of @p cap bytes) the name, NUL-ended.
 * Any thread; nothing kept.
 */
enum px_sni_result px_sni_parse(const uint8_t *buf, size_t len, uint8_t *scratch,
				size_t scratch_len, char *name, size_t cap);
const char *px_sni_result_name(enum px_sni_result r);

#endif /* SNI_PARSE_H */
