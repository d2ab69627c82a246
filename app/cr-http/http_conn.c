/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Connection callbacks (struct cr_conn_ops): a connection's state lives in the lcore's
 * array, indexed by cr_conn_index(). Each callback hands its input to the pipeline, then
 * settles: what was written goes out, and the connection is closed or reset as decided.
 */
#include <string.h>

#include "cr_telemetry.h"
#include "http.h"

static void
stats_flush(struct http_lcore *hl)
{
	unsigned i;

	for (i = 0; i < CNT_COUNT; i++) {
		if (hl->cnt[i] != 0) {
			cr_telemetry_add(http_cfg.ctr[i], hl->cnt[i]);
			hl->cnt[i] = 0;
		}
	}
}

static void conn_release(struct http_lcore *hl, struct http_conn *h);

/* After a callback: send what it wrote, then close or reset as it decided. */
static void
conn_settle(struct http_lcore *hl, struct http_conn *h)
{
	http_out_flush(h);
	stats_flush(hl);
	http_lru_settle(hl, h);
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
	struct http_lcore *hl = http_lcore_cur();

	(void)t;
	if (h->open && h->file != NULL) {
		http_static_open_expired(hl, h);
		conn_settle(hl, h);
		return;
	}
	if (!h->open || h->closing)
		return;
	if (h->phase == PH_BODY) {
		uint64_t left = http_body_left_ns(h);

		if (left > 0) {
			cr_timer_start(&h->hdr_timer, left);
			return;
		}
		hl->cnt[CNT_BODY_TIMEOUTS]++;
		h->p.req.method = HTTP_GET;
		h->phase = PH_HEAD;
		http_reply_status(h, 408, false, NULL, 0);
		http_request_done(h);
		conn_settle(hl, h);
		return;
	}
	hl->cnt[CNT_HEADER_TIMEOUTS]++;
	if (h->stage_len > 0) {
		h->p.req.method = HTTP_GET;
		http_reply_status(h, 408, false, NULL, 0);
	}
	h->closing = true;
	conn_settle(hl, h);
}

/* A connection's state in this lcore's array, fresh: a new one, or one moved here. */
static struct http_conn *
conn_begin(struct http_lcore *hl, struct cr_conn *c)
{
	struct http_conn *h = &hl->conns[cr_conn_index(c)];

	memset(h, 0, sizeof(*h));
	h->c = c;
	h->open = true;
	hl->n_open++;
	http_lru_touch(hl, h);
	cr_timer_init(&h->hdr_timer, hdr_timeout, h);
	return h;
}

static void
on_open(struct cr_conn *c)
{
	struct http_lcore *hl = http_lcore_cur();
	struct http_conn *h = conn_begin(hl, c);
	struct cr_conn *victim;

	victim = http_reclaim_victim(hl, h);
	if (victim != NULL) {
		/* Its slot and socket now, not after a graceful close: it is the oldest idle
		 * or slow connection, and this one needs the room. */
		conn_release(hl, &hl->conns[cr_conn_index(victim)]);
		cr_conn_destroy(victim);
		stats_flush(hl);
	}
	/* Also while shutting: it was queued before the stop, and its request is answered
	 * (with Connection: close). */
	http_header_timer_arm(h);
}

static void
on_data(struct cr_conn *c, const void *data, size_t len)
{
	struct http_lcore *hl = http_lcore_cur();
	struct http_conn *h = &hl->conns[cr_conn_index(c)];

	if (h->closing)
		return;
	if (h->file != NULL) {
		/* A transfer is going out: hold the input until it is done. */
		if (!http_hold(hl, h, data, len))
			h->failed = true;
		else if (!h->read_stopped) {
			h->read_stopped = true;
			cr_conn_read_stop(c);
		}
	} else {
		http_process(hl, h, data, len);
	}
	conn_settle(hl, h);
}

/* A transfer of http_static.c ended (its file_done callback): resume the staged input. */
static void
file_done(struct http_lcore *hl, struct http_conn *h, int err)
{
	http_request_done(h);
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
		h->replaying = true;
		http_process(hl, h, hl->tmp, n);
		h->replaying = false;
	}
	http_hold_refuse(hl, h);
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
	struct http_lcore *hl = http_lcore_cur();
	struct http_conn *h = &hl->conns[cr_conn_index(c)];

	h->peer_eof = true;
	if (h->file != NULL)
		return; /* file_done() finishes */
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
	struct http_lcore *hl = http_lcore_cur();
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
	http_stage_put(hl, h);
	http_lru_remove(hl, h);
	hl->n_open--;
	h->open = false;
	h->c = NULL;
}

static void
on_close(struct cr_conn *c, int err)
{
	struct http_lcore *hl = http_lcore_cur();

	(void)err;
	conn_release(hl, &hl->conns[cr_conn_index(c)]);
}

/*
 * Moves (a retire): lib/net moves a connection only at a boundary (http_at_boundary: no
 * head or body half-read, no file going out) with nothing queued, so between two requests
 * nothing of the request engine is live and nothing is handed over (the access log's
 * peer address is looked up again when needed); the new lcore starts the connection
 * afresh, its keep-alive wait (the header timer) from the move.
 */
static void *
on_move_out(struct cr_conn *c)
{
	struct http_lcore *hl = http_lcore_cur();

	conn_release(hl, &hl->conns[cr_conn_index(c)]);
	stats_flush(hl);
	return NULL;
}

static void
on_move_in(struct cr_conn *c, void *state)
{
	struct http_lcore *hl = http_lcore_cur();
	struct http_conn *h = conn_begin(hl, c);

	(void)state;
	http_header_timer_arm(h);
}

const struct cr_conn_ops http_conn_ops = {
    .on_move_out = on_move_out,
    .on_move_in = on_move_in,
    .on_open = on_open,
    .on_data = on_data,
    .on_eof = on_eof,
    .on_drain = on_drain,
    .on_close = on_close,
    .at_boundary = http_at_boundary,
};

void
http_conn_init(void)
{
	http_cfg.file_done = file_done;
}
