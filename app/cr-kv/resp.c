/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RESP2 request parsing, step for step as Redis 7.0's processMultibulkBuffer() and
 * processInlineBuffer(), so that odd input gets the same answer: the line scans stop at a
 * NUL as strchr() does, the two bytes after a bulk are skipped unread, a count line ends
 * at '\r' with one more byte present, and the error texts are Redis's.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resp.h"

enum { REQ_NONE = 0, REQ_MULTIBULK, REQ_INLINE };

void
resp_parser_init(struct resp_parser *p, long long max_bulk)
{
	memset(p, 0, sizeof(*p));
	p->bulklen = -1;
	p->argv = p->small;
	p->argcap = sizeof(p->small) / sizeof(p->small[0]);
	p->max_bulk = max_bulk;
}

void
resp_parser_fini(struct resp_parser *p)
{
	if (p->argv != p->small)
		free(p->argv);
	p->argv = p->small;
	p->argcap = sizeof(p->small) / sizeof(p->small[0]);
}

static void
reset(struct resp_parser *p)
{
	p->reqtype = REQ_NONE;
	p->multibulklen = 0;
	p->bulklen = -1;
	p->argc = 0;
}

static int
push_arg(struct resp_parser *p, size_t off, size_t len)
{
	if (p->argc == p->argcap) {
		uint32_t ncap = p->argcap * 2;
		struct resp_arg *n;

		if (ncap < p->argcap)
			return -ENOMEM;
		if (p->argv == p->small) {
			n = malloc(sizeof(*n) * ncap);
			if (n != NULL)
				memcpy(n, p->small, sizeof(p->small));
		} else {
			n = realloc(p->argv, sizeof(*n) * ncap);
		}
		if (n == NULL)
			return -ENOMEM;
		p->argv = n;
		p->argcap = ncap;
	}
	p->argv[p->argc].off = off;
	p->argv[p->argc].len = len;
	p->argc++;
	return 0;
}

bool
resp_string2ll(const char *s, size_t slen, long long *value)
{
	const char *p = s;
	size_t plen = 0;
	bool negative = false;
	unsigned long long v;

	if (slen == 0 || slen >= 21)
		return false;
	if (slen == 1 && p[0] == '0') {
		*value = 0;
		return true;
	}
	if (p[0] == '-') {
		negative = true;
		p++;
		plen++;
		if (plen == slen)
			return false;
	}
	if (p[0] >= '1' && p[0] <= '9') {
		v = (unsigned long long)(p[0] - '0');
		p++;
		plen++;
	} else {
		return false;
	}
	while (plen < slen && p[0] >= '0' && p[0] <= '9') {
		if (v > ULLONG_MAX / 10)
			return false;
		v *= 10;
		if (v > ULLONG_MAX - (unsigned long long)(p[0] - '0'))
			return false;
		v += (unsigned long long)(p[0] - '0');
		p++;
		plen++;
	}
	if (plen < slen)
		return false;
	if (negative) {
		if (v > (unsigned long long)(-(LLONG_MIN + 1)) + 1)
			return false;
		*value = (long long)(0ULL - v);
	} else {
		if (v > LLONG_MAX)
			return false;
		*value = (long long)v;
	}
	return true;
}

static int
hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * sdssplitargs() in place. @p line is NUL-terminated at line[len] by the caller (the
 * scan, like Redis's, also stops at an earlier NUL). Decoded bytes are written at or
 * before the byte being read, so the source is never overwritten before it is read.
 */
int
resp_split_inline(char *line, size_t len, size_t base, struct resp_parser *p)
{
	char *s = line, *w;
	int argc = 0;

	(void)len;
	for (;;) {
		bool inq = false, insq = false, done = false;
		char *tok;

		while (*s != '\0' && isspace((unsigned char)*s))
			s++;
		if (*s == '\0')
			return argc;
		tok = w = s;
		while (!done) {
			if (inq) {
				if (s[0] == '\\' && s[1] == 'x' &&
				    hexval((unsigned char)s[2]) >= 0 &&
				    hexval((unsigned char)s[3]) >= 0) {
					*w++ = (char)(hexval((unsigned char)s[2]) * 16 +
						      hexval((unsigned char)s[3]));
					s += 3;
				} else if (s[0] == '\\' && s[1] != '\0') {
					char c;

					s++;
					switch (*s) {
					case 'n':
						c = '\n';
						break;
					case 'r':
						c = '\r';
						break;
					case 't':
						c = '\t';
						break;
					case 'b':
						c = '\b';
						break;
					case 'a':
						c = '\a';
						break;
					default:
						c = *s;
						break;
					}
					*w++ = c;
				} else if (*s == '"') {
					if (s[1] != '\0' && !isspace((unsigned char)s[1]))
						return -1;
					done = true;
				} else if (*s == '\0') {
					return -1;
				} else {
					*w++ = *s;
				}
			} else if (insq) {
				if (s[0] == '\\' && s[1] == '\'') {
					s++;
					*w++ = '\'';
				} else if (*s == '\'') {
					if (s[1] != '\0' && !isspace((unsigned char)s[1]))
						return -1;
					done = true;
				} else if (*s == '\0') {
					return -1;
				} else {
					*w++ = *s;
				}
			} else {
				switch (*s) {
				case ' ':
				case '\n':
				case '\r':
				case '\t':
				case '\0':
					done = true;
					break;
				case '"':
					inq = true;
					break;
				case '\'':
					insq = true;
					break;
				default:
					*w++ = *s;
					break;
				}
			}
			if (*s != '\0')
				s++;
		}
		/* w < s here unless the token ended at the line's NUL, and w <= that NUL. */
		if (push_arg(p, base + (size_t)(tok - line), (size_t)(w - tok)) != 0)
			return -2;
		*w = '\0';
		argc++;
	}
}

static enum resp_result
parse_inline(struct resp_parser *p, char *buf, size_t len, size_t *pos, const char **err)
{
	char *start = buf + *pos, *nl;
	size_t querylen, lf = 1;
	int argc;

	nl = strchr(start, '\n');
	if (nl == NULL) {
		if (len - *pos > RESP_INLINE_MAX) {
			*err = "Protocol error: too big inline request";
			return RESP_ERROR;
		}
		return RESP_NEED_MORE;
	}
	if (nl != start && nl[-1] == '\r')
		nl--, lf++;
	querylen = (size_t)(nl - start);
	/* The line ends at its terminator for the split, as sdsnewlen() made it a string. */
	*nl = '\0';
	argc = resp_split_inline(start, querylen, *pos, p);
	if (argc == -2) {
		*err = NULL;
		return RESP_ERROR;
	}
	if (argc < 0) {
		*err = "Protocol error: unbalanced quotes in request";
		return RESP_ERROR;
	}
	*pos += querylen + lf;
	if (argc == 0) {
		reset(p);
		return RESP_NEED_MORE + 2; /* empty line: consumed, go on */
	}
	return RESP_COMMAND;
}

static enum resp_result
parse_multibulk(struct resp_parser *p, char *buf, size_t len, size_t *pos, const char **err)
{
	char *nl;
	long long ll;

	if (p->multibulklen == 0) {
		nl = strchr(buf + *pos, '\r');
		if (nl == NULL) {
			if (len - *pos > RESP_INLINE_MAX) {
				*err = "Protocol error: too big mbulk count string";
				return RESP_ERROR;
			}
			return RESP_NEED_MORE;
		}
		if (nl - (buf + *pos) > (long)(len - *pos) - 2)
			return RESP_NEED_MORE;
		if (!resp_string2ll(buf + *pos + 1, (size_t)(nl - (buf + *pos + 1)), &ll) ||
		    ll > INT_MAX) {
			*err = "Protocol error: invalid multibulk length";
			return RESP_ERROR;
		}
		*pos = (size_t)(nl - buf) + 2;
		if (ll <= 0) {
			reset(p);
			return RESP_NEED_MORE + 2;
		}
		p->multibulklen = ll;
	}
	while (p->multibulklen > 0) {
		if (p->bulklen == -1) {
			nl = strchr(buf + *pos, '\r');
			if (nl == NULL) {
				if (len - *pos > RESP_INLINE_MAX) {
					*err = "Protocol error: too big bulk count string";
					return RESP_ERROR;
				}
				return RESP_NEED_MORE;
			}
			if (nl - (buf + *pos) > (long)(len - *pos) - 2)
				return RESP_NEED_MORE;
			if (buf[*pos] != '$') {
				/* Redis formats the byte with %c, a NUL included. */
				memcpy(p->errbuf, "Protocol error: expected '$', got ' '", 37);
				p->errbuf[35] = buf[*pos];
				*err = p->errbuf;
				return RESP_ERROR;
			}
			if (!resp_string2ll(buf + *pos + 1, (size_t)(nl - (buf + *pos + 1)), &ll) ||
			    ll < 0 || ll > p->max_bulk) {
				*err = "Protocol error: invalid bulk length";
				return RESP_ERROR;
			}
			*pos = (size_t)(nl - buf) + 2;
			p->bulklen = ll;
		}
		if (len - *pos < (size_t)p->bulklen + 2)
			return RESP_NEED_MORE;
		if (push_arg(p, *pos, (size_t)p->bulklen) != 0) {
			*err = NULL;
			return RESP_ERROR;
		}
		buf[*pos + (size_t)p->bulklen] = '\0';
		*pos += (size_t)p->bulklen + 2;
		p->bulklen = -1;
		p->multibulklen--;
	}
	return RESP_COMMAND;
}

enum resp_result
resp_parse(struct resp_parser *p, char *buf, size_t len, size_t *pos, const char **err)
{
	int r;

	*err = NULL;
	buf[len] = '\0';
	for (;;) {
		if (p->reqtype == REQ_NONE) {
			p->argc = 0;
			if (*pos >= len)
				return RESP_NEED_MORE;
			p->start = *pos;
			p->reqtype = buf[*pos] == '*' ? REQ_MULTIBULK : REQ_INLINE;
		}
		if (p->reqtype == REQ_INLINE)
			r = parse_inline(p, buf, len, pos, err);
		else
			r = parse_multibulk(p, buf, len, pos, err);
		if (r == RESP_NEED_MORE + 2)
			continue; /* an empty request, consumed */
		if (r == RESP_COMMAND)
			p->reqtype = REQ_NONE;
		else if (r == RESP_ERROR && *err != NULL)
			p->errlen = *err == p->errbuf ? 37 : strlen(*err);
		return (enum resp_result)r;
	}
}

size_t
resp_parser_keep(const struct resp_parser *p, size_t pos)
{
	return p->reqtype == REQ_NONE ? pos : p->start;
}

void
resp_parser_shift(struct resp_parser *p, size_t delta)
{
	uint32_t i;

	if (p->reqtype == REQ_NONE)
		return;
	p->start -= delta;
	for (i = 0; i < p->argc; i++)
		p->argv[i].off -= delta;
}
