/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A strict, incremental, allocation-free HTTP/1.1 request parser (RFC 9112).
 *
 * The head (request line and header fields) is parsed from a buffer that holds it from its
 * first byte; the caller may call again with more bytes appended (in the same buffer or in a
 * copy of it): parsing resumes at the last complete line. Everything the parser reports is
 * an offset from the start of that buffer, so the bytes may move between calls.
 *
 * The body is framed by a separate byte-stream decoder (Content-Length or chunked) that
 * keeps no bytes: it only says how many belong to the body and when it ends.
 *
 * Every error is the HTTP status code to answer with, negated; after any of them the
 * connection cannot be framed any more and must close.
 */
#ifndef HTTP_PARSE_H
#define HTTP_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum http_method {
	HTTP_GET = 0,
	HTTP_HEAD,
	HTTP_POST,
	HTTP_PUT,
	HTTP_DELETE,
	HTTP_OPTIONS,
	HTTP_PATCH,
	HTTP_CONNECT,
	HTTP_TRACE,
	HTTP_METHOD_COUNT
};

/** Limits; http_limits_default() fills in the documented defaults. */
struct http_limits {
	uint32_t max_line;	   /**< request line, CRLF excluded (8 KiB) -> 414 */
	uint32_t max_header_bytes; /**< header field lines with their CRLFs (16 KiB) -> 431 */
	uint32_t max_fields;	   /**< header fields (100) -> 431 */
	uint64_t max_body;	   /**< body bytes (1 MiB) -> 413 */
};

void http_limits_default(struct http_limits *l);

/** A piece of the head: offset from its first byte, and length. len 0 = absent. */
struct http_span {
	uint32_t off;
	uint32_t len;
};

/** What a complete head says. */
struct http_request {
	uint8_t method;	      /**< enum http_method */
	uint8_t minor;	      /**< HTTP/1.minor: 0 or 1 (1.2+ is served as 1.1) */
	bool keep_alive;      /**< after the response, the connection may carry another */
	bool chunked;	      /**< Transfer-Encoding: chunked */
	bool has_length;      /**< Content-Length present */
	bool expect_continue; /**< Expect: 100-continue */
	uint32_t fields;      /**< header fields */
	uint64_t content_length;
	struct http_span target; /**< the request-target as sent ("/a/b?c") */
	struct http_span path;	 /**< its path ("/a/b"), still %-encoded */
	struct http_span host;
	struct http_span if_modified_since;
	struct http_span range;
	uint32_t head_len; /**< bytes of the head, final empty line included */
};

/** Parser state; zero it with http_parser_init() before each request. */
struct http_parser {
	uint32_t pos;	    /* bytes of complete lines consumed */
	uint32_t hdr_bytes; /* bytes of header lines so far */
	uint8_t state;	    /* request line, fields, done */
	uint8_t host_count;
	uint8_t te_count;
	bool bad_te;
	bool tok_close, tok_ka, bad_expect; /* Connection tokens, Expect seen so far */
	struct http_request req;
};

void http_parser_init(struct http_parser *p);

/**
 * Parse the head in @p buf[0..len): the same bytes as the previous call plus more.
 * @return the head's length (> 0) once complete (@p p->req is then filled in); 0 when more
 *         bytes are needed; or a negated status: -400 (syntax, framing, Host), -405 (TRACE),
 *         -413 (Content-Length over max_body), -414 (request line too long), -417 (an
 *         expectation other than 100-continue), -431 (header fields too large or too many),
 *         -501 (unknown method), -505 (HTTP version other than 1.x).
 */
int http_parse_head(struct http_parser *p, const char *buf, size_t len,
		    const struct http_limits *lim);

/** Body framing, after a head: Content-Length bytes, or chunked coding. */
struct http_body {
	uint64_t left;	/* Content-Length: bytes to go; chunked: of the current chunk */
	uint64_t total; /* body bytes so far (chunked) */
	uint32_t line;	/* bytes of the current size or trailer line, trailer bytes */
	uint8_t state;
	uint8_t digits;
};

/** Set @p b up for the body @p r announces; @return true if there is a body at all. */
bool http_body_init(struct http_body *b, const struct http_request *r);

/**
 * Feed body bytes. *used receives how many of @p len belong to the body.
 * @return 1 the body ended (bytes after *used belong to the next request); 0 more needed
 *         (all @p len used); -400 (bad chunk size, a chunk longer than declared, bad
 *         line ending), -413 (body over max_body), -431 (trailer fields over the limit).
 */
int http_body_feed(struct http_body *b, const char *buf, size_t len, size_t *used,
		   const struct http_limits *lim);

/** The method's name ("GET"), for logs. */
const char *http_method_name(unsigned m);

/**
 * Decode %-escapes of @p in[0..len) into @p out (at most @p cap bytes, NUL-terminated).
 * @return the decoded length, or -1 (a bad escape, %00, or no room).
 */
int http_pct_decode(const char *in, size_t len, char *out, size_t cap);

/** Parse an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"). @return 0 or -1. */
int http_date_parse(const char *s, size_t len, int64_t *out);

/** Format @p t as an IMF-fixdate into @p out (30 bytes: 29 and a NUL). */
void http_date_format(int64_t t, char out[30]);

/**
 * The value of the first header field named @p name (lower case) in the complete head
 * @p head[0..len), blanks around it trimmed, into *@p out. @return its length; 0 when
 * absent or empty.
 */
size_t http_header_value(const char *head, size_t len, const char *name, const char **out);

/** True when @p s[0..len) equals @p lit ignoring ASCII case. */
bool http_ieq(const char *s, size_t len, const char *lit);

#endif /* HTTP_PARSE_H */
