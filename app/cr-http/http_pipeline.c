/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Requests on one connection: parse each head in place (a head cut by the end of a
 * receive buffer is staged), route it, answer it (the response writer), read a body,
 * and go on to the next request of the same batch. Files under --root go to
 * http_static.c.
 */
#include <string.h>

#include "http.h"

/* What a request is answered with, decided from its head. */
enum { ANS_PLAIN = 1, ANS_JSON, ANS_STATUS, ANS_ALLOW, ANS_STATIC };

static void
reply_parse_error(struct http_lcore *hl, struct http_conn *h, int status)
{
	hl->cnt[CNT_PARSE_ERRORS]++;
	h->p.req.method = HTTP_GET; /* the body goes out even if the line said HEAD */
	http_reply_status(h, status, false, NULL, 0);
}

static bool
path_is(const char *head, const struct http_request *r, const char *lit, size_t n)
{
	return r->path.len == n && memcmp(head + r->path.off, lit, n) == 0;
}

static int
route(const char *head, const struct http_request *r, int *status)
{
	bool get = r->method == HTTP_GET || r->method == HTTP_HEAD;

	if (http_cfg.plain_path_len > 0 &&
	    path_is(head, r, http_cfg.plain_path, http_cfg.plain_path_len))
		return get ? ANS_PLAIN : ANS_ALLOW;
	if (http_cfg.json_path_len > 0 &&
	    path_is(head, r, http_cfg.json_path, http_cfg.json_path_len))
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

	switch (kind) {
	case ANS_PLAIN:
	case ANS_JSON:
		http_reply_hello(hl, h, kind == ANS_JSON, keep);
		break;
	case ANS_ALLOW:
		http_reply_status(h, 405, keep, allow, sizeof(allow) - 1);
		break;
	default:
		http_reply_status(h, status, keep, NULL, 0);
		break;
	}
}

void
http_header_timer_arm(struct http_conn *h)
{
	if (!cr_timer_armed(&h->hdr_timer))
		cr_timer_start(&h->hdr_timer, http_cfg.header_timeout_ns);
}

/* Keep @p n bytes of input for later (a partial head, or input behind a transfer). */
bool
http_stash(struct http_lcore *hl, struct http_conn *h, const char *data, size_t n)
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

/*
 * Hold input that arrived behind a transfer: what fits in the stage (the reads stop, but
 * a few receive buffers already under way still come). What does not fit is dropped, and
 * the first request it cut is refused with 503 once the held ones are answered
 * (http_hold_refuse()): requests are answered in order or refused, never lost silently.
 */
bool
http_hold(struct http_lcore *hl, struct http_conn *h, const char *data, size_t n)
{
	size_t room;

	if (h->held_cut && !h->replaying)
		return true; /* behind the cut: dropped */
	if (!http_stash(hl, h, data, 0))
		return false;
	room = http_cfg.stage_cap - h->stage_len;
	if (n > room) {
		h->held_cut = true;
		n = room;
	}
	return http_stash(hl, h, data, n);
}

void
http_hold_refuse(struct http_lcore *hl, struct http_conn *h)
{
	static const char retry[] = "Retry-After: 1\r\n";

	if (!h->held_cut || h->file != NULL || h->closing || h->failed)
		return;
	/* The request the cut fell in, or the first after the held ones. */
	h->p.req.method = HTTP_GET;
	h->phase = PH_HEAD;
	h->stage_len = 0;
	hl->cnt[CNT_REQUESTS]++;
	http_reply_status(h, 503, false, retry, sizeof(retry) - 1);
}

void
http_stage_put(struct http_lcore *hl, struct http_conn *h)
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
	bool keep = r->keep_alive && http_may_keep(hl);
	int kind, status = 0;
	bool body;

	hl->cnt[CNT_REQUESTS]++;
	/* The turn's clock: when the bytes that completed the head were reaped. */
	h->req_start_ns = cr_now_ns();
	cr_timer_stop(&h->hdr_timer);
	http_lru_touch(hl, h);
	http_access_begin(h, head, r->head_len, r->method == HTTP_HEAD);
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
		http_body_start(h);
		return;
	}
	h->phase = PH_HEAD;
	if (kind == ANS_STATIC)
		http_static_serve(hl, h, head, r, keep);
	else
		answer(hl, h, kind, status, keep);
	/* A file being opened or sent is answered when its transfer ends (file_done). */
	if (h->file == NULL)
		http_request_done(h);
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
void
http_process(struct http_lcore *hl, struct http_conn *h, const char *data, size_t len)
{
	while (len > 0 && !h->closing && !h->failed && h->file == NULL) {
		const char *head;
		int rc;

		if (h->phase == PH_BODY) {
			size_t used;

			rc = http_body_feed(&h->body, data, len, &used, &http_cfg.lim);
			data += used;
			len -= used;
			http_body_got(h, used);
			if (rc != 0)
				cr_timer_stop(&h->hdr_timer);
			if (rc < 0) {
				reply_parse_error(hl, h, -rc);
				break;
			}
			if (rc == 1) {
				/* A shutdown may have begun while the body came. */
				bool keep = h->pend_keep && http_may_keep(hl);

				h->phase = PH_HEAD;
				answer(hl, h, h->pend_kind, h->pend_status, keep);
				http_request_done(h);
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
				if (!http_stash(hl, h, data, len)) {
					h->failed = true;
					break;
				}
				http_header_timer_arm(h);
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
	if (h->file != NULL && len > 0 && !http_hold(hl, h, data, len))
		h->failed = true;
	if (h->stage != NULL && h->stage_len == 0)
		http_stage_put(hl, h);
}

bool
http_in_flight(const struct http_conn *h)
{
	return h->stage_len > 0 || h->phase == PH_BODY || h->file != NULL;
}
