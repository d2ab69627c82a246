/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An incremental RESP2 request parser: multibulk ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n") and
 * inline ("GET k\r\n") requests, with Redis 7's limits and error texts.
 *
 * The parser works over the caller's query buffer and never copies: an argument is an
 * (offset, length) pair into that buffer, NUL-terminated in place (the byte after a bulk,
 * which Redis skips unread, or a separator of an inline line, is overwritten), so the
 * caller may compact or grow the buffer between calls (resp_parser_shift()). Inline
 * arguments are unquoted in place: the decoded text is never longer than the source.
 * The only allocation is the argument array, grown for commands with more arguments than
 * it holds (16 to start with).
 */
#ifndef CR_KV_RESP_H
#define CR_KV_RESP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Redis's PROTO_INLINE_MAX_SIZE: an inline request, or a count line, at most this long. */
#define RESP_INLINE_MAX (64u * 1024)

struct resp_arg {
	size_t off; /* into the query buffer */
	size_t len;
};

struct resp_parser {
	/* private */
	int reqtype;		/* 0 between requests, else RESP_REQ_* */
	long long multibulklen; /* bulks still to come */
	long long bulklen;	/* -1: the next bulk's length line is still to be read */
	size_t start;		/* where the current request began */
	uint32_t argc;
	uint32_t argcap;
	struct resp_arg *argv;
	struct resp_arg small[16];
	long long max_bulk; /* --proto-max-bulk-len */
	size_t errlen;	    /* length of the last error text (it may hold a NUL) */
	char errbuf[40];
};

enum resp_result {
	RESP_ERROR = -1,    /* a protocol error: reply resp_error text, then close */
	RESP_NEED_MORE = 0, /* nothing complete yet: read more and call again */
	RESP_COMMAND = 1,   /* argc/argv hold a request (argc >= 1) */
};

void resp_parser_init(struct resp_parser *p, long long max_bulk);
void resp_parser_fini(struct resp_parser *p);

/*
 * Parse the next request in buf[*pos, len). On RESP_COMMAND, *pos is past it and
 * p->argc / p->argv describe it until the next call. Empty requests (an empty inline
 * line, "*0", "*-10") are consumed silently. On RESP_ERROR, *err is the error text
 * without "-ERR " or CRLF, e.g. "Protocol error: invalid bulk length". buf must have
 * room for one byte at buf[len] (a NUL is written there for the inline scan).
 * Returns -ENOMEM as RESP_ERROR with *err NULL when the argument array cannot grow.
 */
enum resp_result resp_parse(struct resp_parser *p, char *buf, size_t len, size_t *pos,
			    const char **err);

/* The first byte the parser still needs (the start of an incomplete request). */
size_t resp_parser_keep(const struct resp_parser *p, size_t pos);

/* The buffer's first @p delta bytes were dropped: move the offsets of a partial request. */
void resp_parser_shift(struct resp_parser *p, size_t delta);

/* Redis's string2ll(): strict decimal, no spaces, no '+', no leading zeros. */
bool resp_string2ll(const char *s, size_t len, long long *out);

/* Emulate sdssplitargs() over one line, in place; returns the argument count or -1 on
 * unbalanced quotes. */
int resp_split_inline(char *line, size_t len, size_t base, struct resp_parser *p);

#endif /* CR_KV_RESP_H */
