/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cr-http: an HTTP/1.1 server on --listen HOST:PORT, served by every lcore.
 *
 * Routes: /plaintext ("Hello, World!"), /json ({"message":"Hello, World!"}), and with
 * --root DIR the files under DIR (GET and HEAD). Keep-alive, pipelining (the responses to
 * one received batch go out with one send), HTTP/1.0, Connection: close, HEAD.
 *
 * Each connection is parsed in place from the receive buffer: only a head cut by the end
 * of a buffer is copied, into a staging buffer from a per-lcore pool. Responses of one
 * on_data are written into a per-lcore output buffer and handed to lib/net once. Nothing
 * is allocated per request.
 *
 * Shutdown (SIGINT/SIGTERM): stop accepting, close idle connections, let every request
 * in flight finish (its response says Connection: close), bounded by --shutdown-timeout;
 * a second signal forces it.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cr_telemetry.h"
#include "http.h"

struct http_cfg http_cfg = {.root_fd = -1};
struct http_lcore *http_lcores[CR_MAX_LCORES];

static struct {
	struct cr_net_addr listen;
	struct cr_lcore_table table;
	struct cr_listener *listener;
	struct cr_net_addr bound;
	unsigned long long max_conns;
	double header_timeout, keepalive;
	unsigned long long max_line, max_header_bytes, max_fields, max_body;
	const char *root;
	int exit_code;
	int ctr[CNT_COUNT];
	struct cr_call stop_call;
} app = {
    .max_conns = 4096,
    .header_timeout = 10,
    .keepalive = 75,
    .max_line = 8192,
    .max_header_bytes = 16384,
    .max_fields = 100,
    .max_body = 1u << 20,
};

static const char *const ctr_names[CNT_COUNT][2] = {
    [CNT_REQUESTS] = {"http_requests", "requests whose head was parsed"},
    [CNT_RESP_1XX] = {"http_responses_1xx", "100 Continue sent"},
    [CNT_RESP_2XX] = {"http_responses_2xx", "responses 200-299"},
    [CNT_RESP_3XX] = {"http_responses_3xx", "responses 300-399 (304)"},
    [CNT_RESP_4XX] = {"http_responses_4xx", "responses 400-499"},
    [CNT_RESP_5XX] = {"http_responses_5xx", "responses 500-599"},
    [CNT_PARSE_ERRORS] = {"http_parse_errors", "requests refused as malformed (closed)"},
    [CNT_HEADER_TIMEOUTS] = {"http_header_timeouts", "connections closed at --header-timeout"},
    [CNT_STATIC_BYTES] = {"http_static_bytes", "file bytes sent from --root"},
};

static const char PLAIN_BODY[] = "Hello, World!";
static const char JSON_BODY[] = "{\"message\":\"Hello, World!\"}";

static struct http_lcore *
cur(void)
{
	return http_lcores[cr_lcore_id()];
}

static void
stats_flush(struct http_lcore *hl)
{
	unsigned i;

	for (i = 0; i < CNT_COUNT; i++) {
		if (hl->cnt[i] != 0) {
			cr_telemetry_add(app.ctr[i], hl->cnt[i]);
			hl->cnt[i] = 0;
		}
	}
}

void
http_count_status(struct http_lcore *hl, int status)
{
	unsigned cls = (unsigned)status / 100;

	if (cls >= 1 && cls <= 5)
		hl->cnt[CNT_RESP_1XX + cls - 1]++;
}

/* ---- responses ---- */

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
	struct http_lcore *hl = cur();

	if (hl->out_len == 0)
		return;
	if (!h->failed && cr_conn_send(h->c, hl->out, hl->out_len) != 0)
		h->failed = true; /* no chunk for it (-ENOBUFS): the connection is reset */
	hl->out_len = 0;
}

void
http_out(struct http_conn *h, const void *p, size_t n)
{
	struct http_lcore *hl = cur();

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
	struct http_lcore *hl = cur();
	char buf[HEAD_MAX + 512];

	if (extra_len > 512)
		extra_len = 0;
	http_out(h, buf,
		 format_head(buf, hl->date, status, ctype, clen, extra, extra_len, keep,
			     keep && h->p.req.minor == 0));
	http_count_status(hl, status);
}

/* The date timer calls this: the canned 1.1 keep-alive answers carry the new Date. */
void http_canned_rebuild(struct http_lcore *hl);

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

/* An error answer; framing errors (every parse error) close the connection. */
static void
reply_status(struct http_conn *h, int status, bool keep, const char *extra, size_t extra_len)
{
	char body[64];
	const char *r = reason(status);
	int n = snprintf(body, sizeof(body), "%d %s\n", status, r);

	http_out_head(h, status, "text/plain", (uint64_t)n, extra, extra_len, keep);
	if (h->p.req.method != HTTP_HEAD)
		http_out(h, body, (size_t)n);
	if (!keep)
		h->closing = true;
}

static void
reply_parse_error(struct http_lcore *hl, struct http_conn *h, int status)
{
	hl->cnt[CNT_PARSE_ERRORS]++;
	h->p.req.method = HTTP_GET; /* the body goes out even if the line said HEAD */
	reply_status(h, status, false, NULL, 0);
}

static void
reply_body(struct http_conn *h, int status, const char *ctype, const char *body, size_t n,
	   bool keep)
{
	http_out_head(h, status, ctype, n, NULL, 0, keep);
	if (h->p.req.method != HTTP_HEAD)
		http_out(h, body, n);
}

/* ---- requests ---- */

/* What a request is answered with, decided from its head. */
enum { ANS_PLAIN = 1, ANS_JSON, ANS_STATUS, ANS_ALLOW, ANS_STATIC };

static bool
path_is(const char *head, const struct http_request *r, const char *lit, size_t n)
{
	return r->path.len == n && memcmp(head + r->path.off, lit, n) == 0;
}

static int
route(const char *head, const struct http_request *r, int *status)
{
	bool get = r->method == HTTP_GET || r->method == HTTP_HEAD;

	if (path_is(head, r, "/plaintext", 10))
		return get ? ANS_PLAIN : ANS_ALLOW;
	if (path_is(head, r, "/json", 5))
		return get ? ANS_JSON : ANS_ALLOW;
	if (http_cfg.root_fd < 0) {
		*status = 404;
		return ANS_STATUS;
	}
	if (!get)
		return ANS_ALLOW;
	if (r->chunked || r->content_length > 0) {
		/* Files are served as the head is read; a body would have to wait behind the
		 * transfer. Nothing needs one: refused. */
		*status = 400;
		return ANS_STATUS;
	}
	return ANS_STATIC;
}

static void
answer(struct http_lcore *hl, struct http_conn *h, int kind, int status, bool keep)
{
	static const char allow[] = "Allow: GET, HEAD\r\n";
	const struct http_request *r = &h->p.req;

	switch (kind) {
	case ANS_PLAIN:
	case ANS_JSON:
		if (keep && r->minor == 1 && r->method == HTTP_GET) {
			/* The common case: a canned answer with this second's Date. */
			if (kind == ANS_PLAIN)
				http_out(h, hl->plain, hl->plain_len);
			else
				http_out(h, hl->json, hl->json_len);
			hl->cnt[CNT_RESP_2XX]++;
		} else if (kind == ANS_PLAIN) {
			reply_body(h, 200, "text/plain", PLAIN_BODY, sizeof(PLAIN_BODY) - 1, keep);
		} else {
			reply_body(h, 200, "application/json", JSON_BODY, sizeof(JSON_BODY) - 1,
				   keep);
		}
		break;
	case ANS_ALLOW:
		reply_status(h, 405, keep, allow, sizeof(allow) - 1);
		break;
	default:
		reply_status(h, status, keep, NULL, 0);
		break;
	}
}

static void
header_timer_arm(struct http_conn *h)
{
	if (!cr_timer_armed(&h->hdr_timer))
		cr_timer_start(&h->hdr_timer, http_cfg.header_timeout_ns);
}

/* Keep @p n bytes of input for later (a partial head, or input behind a transfer). */
static bool
stash(struct http_lcore *hl, struct http_conn *h, const char *data, size_t n)
{
	if (h->stage == NULL) {
		if (hl->stage_nfree == 0)
			return false;
		h->stage =
		    hl->stage_mem + (size_t)hl->stage_free[--hl->stage_nfree] * http_cfg.stage_cap;
		h->stage_len = 0;
	}
	if (h->stage_len + n > http_cfg.stage_cap)
		return false;
	memmove(h->stage + h->stage_len, data, n);
	h->stage_len += (uint32_t)n;
	return true;
}

static void
stage_put(struct http_lcore *hl, struct http_conn *h)
{
	if (h->stage == NULL)
		return;
	hl->stage_free[hl->stage_nfree++] =
	    (uint32_t)((size_t)(h->stage - hl->stage_mem) / http_cfg.stage_cap);
	h->stage = NULL;
	h->stage_len = 0;
}

/* A complete head at @p head: answer it and set up for its body and the next request. */
static void
handle_request(struct http_lcore *hl, struct http_conn *h, const char *head)
{
	struct http_request *r = &h->p.req;
	bool keep = r->keep_alive && !hl->shutting;
	int kind, status = 0;
	bool body;

	hl->cnt[CNT_REQUESTS]++;
	cr_timer_stop(&h->hdr_timer);
	body = http_body_init(&h->body, r);
	if (body && r->expect_continue && r->minor == 1) {
		static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";

		http_out(h, cont, sizeof(cont) - 1);
		hl->cnt[CNT_RESP_1XX]++;
	}
	kind = route(head, r, &status);
	if (!keep)
		h->closing = true;
	if (body) {
		/* Answered once the body is read (and found well framed and within the limit);
		 * no route needs its bytes, so they are only counted. */
		h->pend_kind = (uint8_t)kind;
		h->pend_status = (uint16_t)status;
		h->pend_keep = keep;
		h->phase = PH_BODY;
		h->closing = false; /* not before the body is read */
		return;
	}
	h->phase = PH_HEAD;
	if (kind == ANS_STATIC)
		http_static_serve(hl, h, head, r, keep);
	else
		answer(hl, h, kind, status, keep);
}

static void
next_request_reset(struct http_conn *h)
{
	http_parser_init(&h->p);
}

/*
 * Parse and answer what @p data holds, after whatever is staged. Stops at a close, a
 * failure, or a transfer that started (the rest is staged until it ends).
 */
static void
process(struct http_lcore *hl, struct http_conn *h, const char *data, size_t len)
{
	while (len > 0 && !h->closing && !h->failed && h->file == NULL) {
		const char *head;
		int rc;

		if (h->phase == PH_BODY) {
			size_t used;

			rc = http_body_feed(&h->body, data, len, &used, &http_cfg.lim);
			data += used;
			len -= used;
			if (rc < 0) {
				reply_parse_error(hl, h, -rc);
				break;
			}
			if (rc == 1) {
				/* A shutdown may have begun while the body came. */
				bool keep = h->pend_keep && !hl->shutting;

				h->phase = PH_HEAD;
				answer(hl, h, h->pend_kind, h->pend_status, keep);
				if (!keep)
					h->closing = true;
				next_request_reset(h);
			}
			continue;
		}
		if (h->stage_len > 0) {
			size_t old = h->stage_len, room = http_cfg.stage_cap - old;
			size_t n = len < room ? len : room;

			memcpy(h->stage + old, data, n);
			rc = http_parse_head(&h->p, h->stage, old + n, &http_cfg.lim);
			if (rc == 0) {
				h->stage_len += (uint32_t)n;
				data += n;
				len -= n;
				if (len > 0) /* the limits fit the stage: not reached */
					reply_parse_error(hl, h, 431);
				break;
			}
			if (rc > 0) {
				data += (size_t)rc - old;
				len -= (size_t)rc - old;
			}
			head = h->stage;
			h->stage_len = 0;
		} else {
			rc = http_parse_head(&h->p, data, len, &http_cfg.lim);
			if (rc == 0) {
				if (!stash(hl, h, data, len)) {
					h->failed = true;
					break;
				}
				header_timer_arm(h);
				len = 0;
				break;
			}
			head = data;
			if (rc > 0) {
				data += rc;
				len -= (size_t)rc;
			}
		}
		if (rc < 0) {
			reply_parse_error(hl, h, -rc);
			break;
		}
		handle_request(hl, h, head);
		if (h->phase == PH_HEAD)
			next_request_reset(h);
	}
	if (h->file != NULL && len > 0 && !stash(hl, h, data, len))
		h->failed = true;
	if (h->stage != NULL && h->stage_len == 0)
		stage_put(hl, h);
}

/* ---- closing lcores ---- */

/*
 * On a retiring or shutting-down lcore, lib/net closes a connection at a boundary: no head
 * or body half-read, no file going out (its answers are queued by then, and go out
 * first). Until then it keeps reading; every answer from then on says Connection: close.
 */
static bool
at_boundary(struct cr_conn *c)
{
	const struct http_conn *h = &cur()->conns[cr_conn_index(c)];

	return !h->open || (h->stage_len == 0 && h->phase != PH_BODY && h->file == NULL);
}

/* ---- connection callbacks ---- */

static void conn_release(struct http_lcore *hl, struct http_conn *h);

/* After a callback: send what it wrote, then close or reset as it decided. */
static void
conn_settle(struct http_lcore *hl, struct http_conn *h)
{
	http_out_flush(h);
	stats_flush(hl);
	if (h->failed) {
		struct cr_conn *c = h->c;

		conn_release(hl, h);
		cr_conn_destroy(c);
		return;
	}
	if (h->closing && h->file == NULL) {
		cr_timer_stop(&h->hdr_timer);
		cr_conn_close(h->c);
	}
}

static void
hdr_timeout(struct cr_timer *t, void *arg)
{
	struct http_conn *h = arg;
	struct http_lcore *hl = cur();

	(void)t;
	if (!h->open || h->closing || h->file != NULL || h->phase == PH_BODY)
		return;
	hl->cnt[CNT_HEADER_TIMEOUTS]++;
	if (h->stage_len > 0) {
		h->p.req.method = HTTP_GET;
		reply_status(h, 408, false, NULL, 0);
	}
	h->closing = true;
	conn_settle(hl, h);
}

static void
on_open(struct cr_conn *c)
{
	struct http_lcore *hl = cur();
	struct http_conn *h = &hl->conns[cr_conn_index(c)];

	memset(h, 0, sizeof(*h));
	h->c = c;
	h->open = true;
	cr_timer_init(&h->hdr_timer, hdr_timeout, h);
	/* Also while shutting: it was queued before the stop, and its request is answered
	 * (with Connection: close). */
	header_timer_arm(h);
}

static void
on_data(struct cr_conn *c, const void *data, size_t len)
{
	struct http_lcore *hl = cur();
	struct http_conn *h = &hl->conns[cr_conn_index(c)];

	if (h->closing)
		return;
	if (h->file != NULL) {
		/* A transfer is going out: hold the input until it is done. */
		if (!stash(hl, h, data, len))
			h->failed = true;
		else if (!h->read_stopped) {
			h->read_stopped = true;
			cr_conn_read_stop(c);
		}
	} else {
		process(hl, h, data, len);
	}
	conn_settle(hl, h);
}

void
http_file_done(struct http_lcore *hl, struct http_conn *h, int err)
{
	if (err != 0) {
		h->failed = true;
		conn_settle(hl, h);
		return;
	}
	if (!h->closing && h->stage_len > 0) {
		/* Replay what arrived meanwhile, from a copy: the stage is refilled from it. */
		size_t n = h->stage_len;

		memcpy(hl->tmp, h->stage, n);
		h->stage_len = 0;
		process(hl, h, hl->tmp, n);
	}
	if (h->read_stopped && h->file == NULL && !h->closing) {
		h->read_stopped = false;
		cr_conn_read_start(h->c);
	}
	if (h->peer_eof && h->file == NULL && !h->closing) {
		/* As on_eof() would have: a request left incomplete is dropped. */
		if (h->stage_len > 0 || h->phase == PH_BODY)
			h->closing = true;
		else
			(void)cr_conn_shutdown_write(h->c);
		cr_timer_stop(&h->hdr_timer);
	}
	conn_settle(hl, h);
}

/*
 * The peer shut its side: no more requests. Whatever is answered goes out, then ours
 * shuts; but an answer still to come (a file being opened or sent, and the requests held
 * behind it) goes first. A request cut short by the EOF is dropped with the connection.
 */
static void
on_eof(struct cr_conn *c)
{
	struct http_lcore *hl = cur();
	struct http_conn *h = &hl->conns[cr_conn_index(c)];

	h->peer_eof = true;
	if (h->file != NULL)
		return; /* http_file_done() finishes */
	if (h->stage_len > 0 || h->phase == PH_BODY)
		h->closing = true;
	else
		(void)cr_conn_shutdown_write(c);
	cr_timer_stop(&h->hdr_timer);
	conn_settle(hl, h);
}

static void
on_drain(struct cr_conn *c)
{
	struct http_lcore *hl = cur();
	struct http_conn *h = &hl->conns[cr_conn_index(c)];

	if (h->file != NULL)
		http_static_drained(hl, h);
}

static void
conn_release(struct http_lcore *hl, struct http_conn *h)
{
	if (!h->open)
		return;
	cr_timer_stop(&h->hdr_timer);
	if (h->file != NULL)
		http_static_abort(hl, h);
	stage_put(hl, h);
	h->open = false;
	h->c = NULL;
}

static void
on_close(struct cr_conn *c, int err)
{
	struct http_lcore *hl = cur();

	(void)err;
	conn_release(hl, &hl->conns[cr_conn_index(c)]);
}

static const struct cr_conn_ops http_ops = {
    .on_open = on_open,
    .on_data = on_data,
    .on_eof = on_eof,
    .on_drain = on_drain,
    .on_close = on_close,
    .at_boundary = at_boundary,
};

/* ---- lcores, start and stop ---- */

static int
lcore_alloc(unsigned id, int node)
{
	struct http_lcore *hl;
	uint32_t i, n = http_cfg.max_conns;

	hl = cr_numa_zalloc(sizeof(*hl), node);
	if (hl == NULL)
		return -ENOMEM;
	http_lcores[id] = hl;
	hl->out_cap = 64 * 1024;
	/* Address space for every connection's stage and every file slot, touched (and so
	 * backed by memory) only as they are used; LIFO reuse keeps the used set small. */
	hl->conns = cr_numa_zalloc(sizeof(struct http_conn) * n, node);
	hl->out = cr_numa_zalloc(hl->out_cap, node);
	hl->tmp = cr_numa_zalloc(http_cfg.stage_cap, node);
	hl->stage_mem = cr_numa_zalloc((size_t)http_cfg.stage_cap * n, node);
	hl->stage_free = cr_numa_zalloc(sizeof(uint32_t) * n, node);
	if (hl->conns == NULL || hl->out == NULL || hl->tmp == NULL || hl->stage_mem == NULL ||
	    hl->stage_free == NULL)
		return -ENOMEM;
	for (i = 0; i < n; i++)
		hl->stage_free[i] = n - 1 - i;
	hl->stage_nfree = n;
	if (http_cfg.root_fd >= 0) {
		hl->files = cr_numa_zalloc(sizeof(struct http_file) * HTTP_FILE_SLOTS, node);
		hl->file_mem = cr_numa_zalloc((size_t)HTTP_FILE_CHUNK * HTTP_FILE_SLOTS, node);
		hl->file_free = cr_numa_zalloc(sizeof(uint32_t) * HTTP_FILE_SLOTS, node);
		if (hl->files == NULL || hl->file_mem == NULL || hl->file_free == NULL)
			return -ENOMEM;
		for (i = 0; i < HTTP_FILE_SLOTS; i++) {
			hl->file_free[i] = HTTP_FILE_SLOTS - 1 - i;
			hl->files[i].buf = hl->file_mem + (size_t)i * HTTP_FILE_CHUNK;
			hl->files[i].fd = -1;
		}
		hl->file_nfree = HTTP_FILE_SLOTS;
	}
	return 0;
}

static void
lcores_free(void)
{
	unsigned i;

	for (i = 0; i < CR_MAX_LCORES; i++) {
		struct http_lcore *hl = http_lcores[i];

		if (hl == NULL)
			continue;
		cr_numa_free(hl->conns);
		cr_numa_free(hl->out);
		cr_numa_free(hl->tmp);
		cr_numa_free(hl->stage_mem);
		cr_numa_free(hl->stage_free);
		cr_numa_free(hl->files);
		cr_numa_free(hl->file_mem);
		cr_numa_free(hl->file_free);
		cr_numa_free(hl);
		http_lcores[i] = NULL;
	}
}

static void
lcore_start(unsigned lcore, void *arg)
{
	struct http_lcore *hl = http_lcores[lcore];

	(void)arg;
	hl->shutting = false;
	http_date_start(hl);
}

static void
lcore_stop(unsigned lcore, void *arg)
{
	(void)arg;
	http_date_stop(http_lcores[lcore]);
}

/* A retire or a shutdown: lib/net takes no more connections here and closes ours at
 * their boundaries (at_boundary); every answer from now on says Connection: close. */
static void
drain_hook(unsigned lcore, void *arg)
{
	(void)arg;
	http_lcores[lcore]->shutting = true;
}

static const struct cr_reactor_hooks hooks = {
    .on_lcore_start = lcore_start,
    .on_lcore_stop = lcore_stop,
    .on_retire = drain_hook,
    .on_shutdown = drain_hook,
};

static void
print_ready(void)
{
	char a[CR_NET_ADDR_STRLEN], cl[256];
	unsigned n = cr_lcore_count();

	printf("cr-http: listening on %s (http), %u lcore%s (%s), io driver %s%s%s\n",
	       cr_net_addr_format(&app.bound, a, sizeof(a)), n, n == 1 ? "" : "s",
	       cr_lcore_table_corelist(&app.table, cl, sizeof(cl)), cr_reactor_driver(),
	       app.root != NULL ? ", root " : "", app.root != NULL ? http_cfg.root : "");
	fflush(stdout);
}

static void
start_serving(void *arg)
{
	struct cr_tcp_listen_opts lo = {0};
	char a[CR_NET_ADDR_STRLEN];
	int rc;

	(void)arg;
	lo.addr = app.listen;
	lo.conn.idle_timeout_ns = http_cfg.keepalive_ns;
	rc = cr_tcp_listen(&lo, &http_ops, NULL, &app.listener);
	if (rc != 0) {
		fprintf(stderr, "cr-http: --listen %s: %s\n",
			cr_net_addr_format(&app.listen, a, sizeof(a)), cr_strerror(rc));
		app.exit_code = 1;
		cr_reactor_stop();
		return;
	}
	cr_listener_addr(app.listener, &app.bound);
	print_ready();
}

static void
stop_now(void *arg)
{
	(void)arg;
	cr_reactor_stop();
}

static void
visit_nothing(void *arg)
{
	(void)arg;
}

/*
 * On the main lcore: stop accepting first, while every lcore is still RUNNING (the
 * listener's close visits the RUNNING lcores), then start the shutdown once a visit of
 * our own has followed the close round every lcore (messages from one lcore to another
 * run in order).
 */
static void
begin_stop(void *arg)
{
	(void)arg;
	if (app.listener == NULL) {
		cr_reactor_stop();
		return;
	}
	cr_listener_close(app.listener, NULL, NULL);
	app.listener = NULL;
	if (cr_for_each_lcore(&app.stop_call, visit_nothing, NULL, stop_now, NULL) != 0)
		cr_reactor_stop();
}

/* The first SIGINT/SIGTERM (on the signal thread): begin_stop on the main lcore. */
static void
on_stop_signal(void *arg)
{
	(void)arg;
	if (cr_send(cr_lcore_main(), begin_stop, NULL) != 0)
		cr_reactor_stop();
}

static int
telemetry_setup(const struct cr_eal_config *cfg)
{
	int rc;

	rc = cr_telemetry_start(cfg, "cr-http");
	if (rc == 0)
		cr_telemetry_announce("cr-http");
	return rc;
}

static void
print_totals(void)
{
	uint64_t t[CNT_COUNT] = {0}, v;
	unsigned i, k;

	for (i = 0; i < app.table.n; i++)
		for (k = 0; k < CNT_COUNT; k++)
			if (cr_telemetry_counter_read(app.ctr[k], app.table.lcores[i].lcore_id,
						      &v) == 0)
				t[k] += v;
	printf("cr-http: stopped: %" PRIu64 " requests, responses 2xx %" PRIu64 " 3xx %" PRIu64
	       " 4xx %" PRIu64 " 5xx %" PRIu64 ", %" PRIu64 " parse errors, %" PRIu64
	       " header timeouts\n",
	       t[CNT_REQUESTS], t[CNT_RESP_2XX], t[CNT_RESP_3XX], t[CNT_RESP_4XX], t[CNT_RESP_5XX],
	       t[CNT_PARSE_ERRORS], t[CNT_HEADER_TIMEOUTS]);
	fflush(stdout);
}

/* /http: the configuration and the totals (telemetry thread; the config is immutable
 * once the lcores run, the counters are read as /stats reads them). */
static int
tel_http(const char *cmd, const char *params, struct cr_json *j)
{
	char a[CR_NET_ADDR_STRLEN];
	uint64_t v, t;
	unsigned i, k;

	(void)cmd;
	(void)params;
	cr_json_object_begin(j, NULL);
	cr_json_string(j, "listen", cr_net_addr_format(&app.listen, a, sizeof(a)));
	cr_json_string(j, "root", http_cfg.root_fd >= 0 ? http_cfg.root : NULL);
	cr_json_object_begin(j, "limits");
	cr_json_u64(j, "max_request_line", http_cfg.lim.max_line);
	cr_json_u64(j, "max_header_bytes", http_cfg.lim.max_header_bytes);
	cr_json_u64(j, "max_header_fields", http_cfg.lim.max_fields);
	cr_json_u64(j, "max_body", http_cfg.lim.max_body);
	cr_json_double(j, "header_timeout_s", (double)http_cfg.header_timeout_ns / 1e9);
	cr_json_double(j, "keepalive_timeout_s", (double)http_cfg.keepalive_ns / 1e9);
	cr_json_u64(j, "max_connections_per_lcore", http_cfg.max_conns);
	cr_json_object_end(j);
	cr_json_object_begin(j, "totals");
	for (k = 0; k < CNT_COUNT; k++) {
		for (t = 0, i = 0; i < app.table.n; i++)
			if (cr_telemetry_counter_read(app.ctr[k], app.table.lcores[i].lcore_id,
						      &v) == 0)
				t += v;
		cr_json_u64(j, ctr_names[k][0], t);
	}
	cr_json_object_end(j);
	cr_json_object_end(j);
	return 0;
}

/* ---- options ---- */

static int
set_listen(const char *v, void *ctx)
{
	(void)ctx;
	return cr_net_addr_parse(v, &app.listen) != 0 ? -EINVAL : 0;
}

static int
set_uint(const char *v, void *ctx, unsigned long long min, unsigned long long max)
{
	return cr_parse_uint(v, min, max, ctx);
}

static int
set_conns(const char *v, void *ctx)
{
	return set_uint(v, ctx, 1, 1u << 20);
}

static int
set_line(const char *v, void *ctx)
{
	return set_uint(v, ctx, 64, 1u << 20);
}

static int
set_hdr_bytes(const char *v, void *ctx)
{
	return set_uint(v, ctx, 64, 1u << 20);
}

static int
set_fields(const char *v, void *ctx)
{
	return set_uint(v, ctx, 1, 10000);
}

static int
set_body(const char *v, void *ctx)
{
	return set_uint(v, ctx, 0, 1ull << 40);
}

static int
set_seconds(const char *v, void *ctx)
{
	double *d = ctx;

	if (cr_parse_seconds(v, d) != 0 || *d > 1e6)
		return -EINVAL;
	return 0;
}

static int
set_root(const char *v, void *ctx)
{
	(void)ctx;
	if (v[0] == '\0')
		return -EINVAL;
	app.root = v;
	return 0;
}

static int
open_root(void)
{
	struct stat st;

	if (realpath(app.root, http_cfg.root) == NULL) {
		fprintf(stderr, "cr-http: --root %s: %s; accepted: an existing directory\n",
			app.root, cr_strerror(errno));
		return -1;
	}
	http_cfg.root_fd = open(http_cfg.root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (http_cfg.root_fd < 0 || fstat(http_cfg.root_fd, &st) != 0) {
		fprintf(stderr, "cr-http: --root %s: %s; accepted: an existing directory\n",
			app.root, cr_strerror(errno));
		return -1;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct cr_opt opts[] = {
	    {"listen", 0, "HOST:PORT", "address to serve (default 127.0.0.1:8080)",
	     "HOST:PORT with a numeric host, [IPv6]:PORT, localhost:PORT or *:PORT; port "
	     "0-65535",
	     set_listen, NULL},
	    {"root", 0, "DIR", "serve the files under DIR (GET/HEAD; default: none)",
	     "an existing directory", set_root, NULL},
	    {"max-connections", 0, "N", "connections per lcore (default 4096)", "1-1048576",
	     set_conns, &app.max_conns},
	    {"header-timeout", 0, "SECONDS",
	     "close a connection whose request head is not complete this long after it "
	     "began, or that sends nothing this long after opening (default 10)",
	     "a number of seconds from 0 to 1000000, e.g. 0.5 or 10", set_seconds,
	     &app.header_timeout},
	    {"keepalive-timeout", 0, "SECONDS",
	     "close a connection with no byte in or out this long, as between requests "
	     "(default 75; 0: never)",
	     "a number of seconds from 0 to 1000000", set_seconds, &app.keepalive},
	    {"max-request-line", 0, "BYTES", "longest request line, else 414 (default 8192)",
	     "64-1048576", set_line, &app.max_line},
	    {"max-header-bytes", 0, "BYTES", "largest header section, else 431 (default 16384)",
	     "64-1048576", set_hdr_bytes, &app.max_header_bytes},
	    {"max-header-fields", 0, "N", "most header fields, else 431 (default 100)", "1-10000",
	     set_fields, &app.max_fields},
	    {"max-body", 0, "BYTES", "largest request body, else 413 (default 1048576)",
	     "0-1099511627776", set_body, &app.max_body},
	    CR_TELEMETRY_OPTS,
	};
	static const struct cr_app_info info = {"cr-http", "HTTP/1.1 server on every lcore", opts,
						sizeof(opts) / sizeof(opts[0])};
	struct cr_eal_config cfg;
	struct cr_net_config ncfg;
	unsigned i;
	int rc, first;

	cr_net_addr_parse("127.0.0.1:8080", &app.listen);
	cr_eal_config_defaults(&cfg);
	rc = cr_eal_parse_args(argc, argv, &info, &cfg, &app.table, &first);
	if (rc != 0)
		return rc > 0 ? 0 : 2;
	if (first < argc) {
		fprintf(stderr,
			"cr-http: %s: unexpected argument; accepted: options only, see "
			"cr-http --help\n",
			argv[first]);
		return 2;
	}
	if (app.header_timeout <= 0) {
		fprintf(stderr, "cr-http: --header-timeout 0: must be above 0; accepted: a "
				"number of seconds above 0, e.g. 10\n");
		return 2;
	}
	if (app.root != NULL && open_root() != 0)
		return 2;
	http_cfg.lim.max_line = (uint32_t)app.max_line;
	http_cfg.lim.max_header_bytes = (uint32_t)app.max_header_bytes;
	http_cfg.lim.max_fields = (uint32_t)app.max_fields;
	http_cfg.lim.max_body = app.max_body;
	http_cfg.header_timeout_ns = (uint64_t)(app.header_timeout * 1e9);
	http_cfg.keepalive_ns = (uint64_t)(app.keepalive * 1e9);
	http_cfg.max_conns = (uint32_t)app.max_conns;
	/* A head at its limits, plus input held behind a transfer. */
	http_cfg.stage_cap =
	    (uint32_t)((app.max_line + 2 + app.max_header_bytes + 2 + HTTP_STAGE_SLACK + 63) &
		       ~63ull);
	for (i = 0; i < CNT_COUNT; i++) {
		app.ctr[i] = cr_telemetry_counter_register(ctr_names[i][0], CR_TELEMETRY_COUNTER,
							   ctr_names[i][1]);
		if (app.ctr[i] < 0) {
			fprintf(stderr, "cr-http: counter %s: %s\n", ctr_names[i][0],
				cr_strerror(app.ctr[i]));
			return 1;
		}
	}
	rc = cr_telemetry_register("/http", tel_http,
				   "cr-http: listen address, root, limits and request totals");
	if (rc != 0) {
		fprintf(stderr, "cr-http: telemetry command /http: %s\n", cr_strerror(rc));
		return 1;
	}
	cr_net_config_defaults(&ncfg);
	ncfg.max_conns = http_cfg.max_conns;
	rc = cr_net_configure(&ncfg);
	if (rc != 0) {
		fprintf(stderr, "cr-http: cannot size lib/net: %s\n", cr_strerror(rc));
		return 1;
	}
	for (i = 0; i < app.table.n; i++) {
		rc = lcore_alloc(app.table.lcores[i].lcore_id, app.table.lcores[i].numa_node);
		if (rc != 0) {
			fprintf(stderr, "cr-http: %s\n", cr_strerror(rc));
			lcores_free();
			return 1;
		}
	}
	cr_reactor_signals_block(false);
	rc = cr_reactor_init(&cfg, &app.table, &hooks);
	if (rc != 0) {
		lcores_free();
		if (rc == -ENODEV) {
			fprintf(stderr,
				"cr-http: --io-driver: the driver asked for cannot run here\n");
			return 2;
		}
		fprintf(stderr, "cr-http: cannot start: %s\n", cr_strerror(rc));
		return 1;
	}
	(void)cr_reactor_signals_start(on_stop_signal, NULL, NULL);
	rc = telemetry_setup(&cfg);
	if (rc == 0)
		rc = cr_send(cr_lcore_main(), start_serving, NULL);
	if (rc != 0) {
		fprintf(stderr, "cr-http: cannot start: %s%s\n", cr_strerror(rc),
			cr_telemetry_socket_path() == NULL ? "; --telemetry off runs without it"
							   : "");
		cr_reactor_stop();
		app.exit_code = 1;
	}
	cr_reactor_run();
	cr_telemetry_stop();
	cr_reactor_fini();
	print_totals();
	lcores_free();
	if (http_cfg.root_fd >= 0)
		close(http_cfg.root_fd);
	return app.exit_code;
}
