/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The response writer: heads and bodies go into the lcore's output buffer, which one
 * cr_conn_send() hands to lib/net after a callback (one send per batch of pipelined
 * requests); the canned answers of the built-in routes carry this second's Date.
 */
#include <stdio.h>
#include <string.h>

#include "http.h"

static const char PLAIN_BODY[] = "Hello, World!";
static const char JSON_BODY[] = "{\"message\":\"Hello, World!\"}";

void
http_count_status(struct http_lcore *hl, int status)
{
	unsigned cls = (unsigned)status / 100;

	if (cls >= 1 && cls <= 5)
		hl->cnt[CNT_RESP_1XX + cls - 1]++;
}

static const char *
reason(int status)
{
	switch (status) {
	case 100:
		return "Continue";
	case 200:
		return "OK";
	case 206:
		return "Partial Content";
	case 301:
		return "Moved Permanently";
	case 304:
		return "Not Modified";
	case 400:
		return "Bad Request";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 408:
		return "Request Timeout";
	case 413:
		return "Content Too Large";
	case 414:
		return "URI Too Long";
	case 416:
		return "Range Not Satisfiable";
	case 417:
		return "Expectation Failed";
	case 431:
		return "Request Header Fields Too Large";
	case 500:
		return "Internal Server Error";
	case 501:
		return "Not Implemented";
	case 503:
		return "Service Unavailable";
	case 505:
		return "HTTP Version Not Supported";
	default:
		return "Unknown";
	}
}

void
http_out_flush(struct http_conn *h)
{
	struct http_lcore *hl = http_lcore_cur();

	if (hl->out_len == 0)
		return;
	if (!h->failed && cr_conn_send(h->c, hl->out, hl->out_len) != 0)
		h->failed = true; /* no chunk for it (-ENOBUFS): the connection is reset */
	hl->out_len = 0;
}

void
http_out(struct http_conn *h, const void *p, size_t n)
{
	struct http_lcore *hl = http_lcore_cur();

	if (hl->out_len + n > hl->out_cap) {
		http_out_flush(h);
		if (n > hl->out_cap) {
			if (!h->failed && cr_conn_send(h->c, p, n) != 0)
				h->failed = true;
			return;
		}
	}
	memcpy(hl->out + hl->out_len, p, n);
	hl->out_len += n;
}

static char *
put(char *d, const char *s, size_t n)
{
	memcpy(d, s, n);
	return d + n;
}

#define PUTS(d, lit) put((d), (lit), sizeof(lit) - 1)

static char *
put_u64(char *d, uint64_t v)
{
	char t[20];
	int n = 0;

	do {
		t[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	while (n > 0)
		*d++ = t[--n];
	return d;
}

/* A response head; clen UINT64_MAX writes no Content-Length (304). */
static size_t
format_head(char *d0, const char *date, int status, const char *ctype, uint64_t clen,
	    const char *extra, size_t extra_len, bool keep, bool ka_header)
{
	char *d = d0;
	const char *r = reason(status);

	d = PUTS(d, "HTTP/1.1 ");
	d = put_u64(d, (uint64_t)status);
	*d++ = ' ';
	d = put(d, r, strlen(r));
	d = PUTS(d, "\r\nServer: coreact\r\nDate: ");
	d = put(d, date, 29);
	d = PUTS(d, "\r\n");
	if (ctype != NULL) {
		d = PUTS(d, "Content-Type: ");
		d = put(d, ctype, strlen(ctype));
		d = PUTS(d, "\r\n");
	}
	if (clen != UINT64_MAX) {
		d = PUTS(d, "Content-Length: ");
		d = put_u64(d, clen);
		d = PUTS(d, "\r\n");
	}
	if (extra_len > 0)
		d = put(d, extra, extra_len);
	if (!keep)
		d = PUTS(d, "Connection: close\r\n");
	else if (ka_header)
		d = PUTS(d, "Connection: keep-alive\r\n");
	d = PUTS(d, "\r\n");
	return (size_t)(d - d0);
}

/* The longest head format_head() writes, extra excluded. */
#define HEAD_MAX 512

void
http_out_head(struct http_conn *h, int status, const char *ctype, uint64_t clen, const char *extra,
	      size_t extra_len, bool keep)
{
	struct http_lcore *hl = http_lcore_cur();
	char more[HTTP_EXTRA_MAX + sizeof(http_cfg.hsts)], buf[HEAD_MAX + sizeof(more)];

	if (extra_len > HTTP_EXTRA_MAX)
		extra_len = 0;
	if (http_hsts(h->c)) {
		if (extra_len > 0)
			memcpy(more, extra, extra_len);
		memcpy(more + extra_len, http_cfg.hsts, http_cfg.hsts_len);
		extra = more;
		extra_len += http_cfg.hsts_len;
	}
	http_out(h, buf,
		 format_head(buf, hl->date, status, ctype, clen, extra, extra_len, keep,
			     keep && h->p.req.minor == 0));
	http_count_status(hl, status);
	http_access_end(h, status, clen == UINT64_MAX ? 0 : clen);
}

void
http_canned_rebuild(struct http_lcore *hl)
{
	size_t n;

	n = format_head(hl->plain, hl->date, 200, "text/plain", sizeof(PLAIN_BODY) - 1, NULL, 0,
			true, false);
	memcpy(hl->plain + n, PLAIN_BODY, sizeof(PLAIN_BODY) - 1);
	hl->plain_len = (uint32_t)(n + sizeof(PLAIN_BODY) - 1);
	n = format_head(hl->json, hl->date, 200, "application/json", sizeof(JSON_BODY) - 1, NULL, 0,
			true, false);
	memcpy(hl->json + n, JSON_BODY, sizeof(JSON_BODY) - 1);
	hl->json_len = (uint32_t)(n + sizeof(JSON_BODY) - 1);
}

void
http_reply_status_to(struct http_conn *h, int status, bool keep, bool head_only,
		     const char *extra, size_t extra_len)
{
	char body[64];
	const char *r = reason(status);
	int n = snprintf(body, sizeof(body), "%d %s\n", status, r);

	http_out_head(h, status, "text/plain", (uint64_t)n, extra, extra_len, keep);
	if (!head_only)
		http_out(h, body, (size_t)n);
	if (!keep)
		h->closing = true;
}

void
http_reply_status(struct http_conn *h, int status, bool keep, const char *extra, size_t extra_len)
{
	http_reply_status_to(h, status, keep, h->p.req.method == HTTP_HEAD, extra, extra_len);
}

static void
reply_body(struct http_conn *h, int status, const char *ctype, const char *body, size_t n,
	   bool keep)
{
	http_out_head(h, status, ctype, n, NULL, 0, keep);
	if (h->p.req.method != HTTP_HEAD)
		http_out(h, body, n);
}

void
http_reply_hello(struct http_lcore *hl, struct http_conn *h, bool json, bool keep)
{
	const struct http_request *r = &h->p.req;

	if (keep && r->minor == 1 && r->method == HTTP_GET && !http_hsts(h->c)) {
		/* The common case: a canned answer with this second's Date. */
		if (!json)
			http_out(h, hl->plain, hl->plain_len);
		else
			http_out(h, hl->json, hl->json_len);
		hl->cnt[CNT_RESP_2XX]++;
		if (h->acc_len != 0)
			http_access_end(h, 200, json ? sizeof(JSON_BODY) - 1 : sizeof(PLAIN_BODY) - 1);
	} else if (!json) {
		reply_body(h, 200, "text/plain", PLAIN_BODY, sizeof(PLAIN_BODY) - 1, keep);
	} else {
		reply_body(h, 200, "application/json", JSON_BODY, sizeof(JSON_BODY) - 1, keep);
	}
}
