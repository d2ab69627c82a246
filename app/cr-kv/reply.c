/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RESP2 reply writers over a growable buffer. A buffer starts on its owner's inline
 * storage and moves to the heap only for replies that do not fit.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv.h"

static const char oom_reply[] = "-OOM out of memory building the reply\r\n";

void
rb_init(struct rbuf *b, char *inl, size_t inlcap)
{
	b->inl = inl;
	b->p = inl;
	b->cap = inl != NULL ? inlcap : 0;
	b->len = 0;
}

void
rb_fini(struct rbuf *b)
{
	if (b->p != b->inl)
		free(b->p);
	b->p = b->inl;
	b->cap = 0;
	b->len = 0;
	b->inl = NULL;
	b->p = NULL;
}

void
rb_reset(struct rbuf *b)
{
	b->len = 0;
}

bool
rb_reserve(struct rbuf *b, size_t n)
{
	size_t need = b->len + n, cap;
	char *np;

	if (need <= b->cap)
		return true;
	cap = b->cap < 64 ? 64 : b->cap;
	while (cap < need)
		cap = cap < (1u << 30) ? cap * 2 : cap + cap / 4;
	if (b->p == b->inl) {
		np = malloc(cap);
		if (np != NULL && b->len > 0)
			memcpy(np, b->p, b->len);
	} else {
		np = realloc(b->p, cap);
	}
	if (np == NULL) {
		/* Keep what is there and say why the rest is missing, if it fits. */
		if (b->cap - b->len >= sizeof(oom_reply) - 1) {
			memcpy(b->p + b->len, oom_reply, sizeof(oom_reply) - 1);
			b->len += sizeof(oom_reply) - 1;
		}
		return false;
	}
	b->p = np;
	b->cap = cap;
	return true;
}

void
rb_raw(struct rbuf *b, const void *p, size_t n)
{
	if (n == 0 || !rb_reserve(b, n))
		return;
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

void
rb_status(struct rbuf *b, const char *s)
{
	size_t n = strlen(s);

	if (!rb_reserve(b, n + 3))
		return;
	b->p[b->len++] = '+';
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len++] = '\r';
	b->p[b->len++] = '\n';
}

void
rb_ok(struct rbuf *b)
{
	rb_raw(b, "+OK\r\n", 5);
}

void
rb_errorlen(struct rbuf *b, const char *s, size_t n)
{
	size_t i;
	char *d;

	if (!rb_reserve(b, n + 3))
		return;
	b->p[b->len++] = '-';
	d = b->p + b->len;
	/* As Redis: no CR or LF may reach the wire inside an error line. */
	for (i = 0; i < n; i++)
		d[i] = (s[i] == '\r' || s[i] == '\n') ? ' ' : s[i];
	b->len += n;
	b->p[b->len++] = '\r';
	b->p[b->len++] = '\n';
}

void
rb_error(struct rbuf *b, const char *s)
{
	rb_errorlen(b, s, strlen(s));
}

void
rb_errorf(struct rbuf *b, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof(buf))
		n = sizeof(buf) - 1;
	rb_errorlen(b, buf, (size_t)n);
}

static size_t
fmt_ll(char *d, long long v)
{
	char tmp[24];
	unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
	size_t n = 0, i = 0;

	do {
		tmp[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u != 0);
	if (v < 0)
		d[i++] = '-';
	while (n > 0)
		d[i++] = tmp[--n];
	return i;
}

static void
prefixed(struct rbuf *b, char c, long long v)
{
	if (!rb_reserve(b, 24))
		return;
	b->p[b->len++] = c;
	b->len += fmt_ll(b->p + b->len, v);
	b->p[b->len++] = '\r';
	b->p[b->len++] = '\n';
}

void
rb_int(struct rbuf *b, long long v)
{
	prefixed(b, ':', v);
}

void
rb_array(struct rbuf *b, long long n)
{
	prefixed(b, '*', n);
}

void
rb_bulk(struct rbuf *b, const void *p, size_t n)
{
	if (!rb_reserve(b, n + 26))
		return;
	prefixed(b, '$', (long long)n);
	memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len++] = '\r';
	b->p[b->len++] = '\n';
}

void
rb_bulkstr(struct rbuf *b, const char *s)
{
	rb_bulk(b, s, strlen(s));
}

void
rb_null(struct rbuf *b)
{
	rb_raw(b, "$-1\r\n", 5);
}
