/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The relay's output pool policy: the chunks an lcore's sessions queue in, each session's
 * share of them, the paused list of sessions that wait for their reader, and the eviction
 * of the biggest of those when the pool is down to its reserve (doc/guides/proxy.md,
 * "Memory"). The session state machine (relay.c) queues every byte it relays through
 * px_relay_bytes().
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cr_telemetry.h"
#include "relay_internal.h"

/* lib/net keeps a quarter of the pool from connections above their high watermark. */
static uint64_t
reserve(uint64_t chunks)
{
	return chunks / 4 + PX_RESERVE_CHUNKS;
}

uint64_t
px_buffers_auto(uint64_t maxconn)
{
	/* The shares, PX_SESSION_CHUNKS per session, are the three quarters less ours. */
	uint64_t n = (PX_RESERVE_CHUNKS + PX_SESSION_CHUNKS * maxconn) * 4 / 3 + 1;

	return n < PX_BUFFERS_AUTO_MAX ? n : PX_BUFFERS_AUTO_MAX;
}

void
px_conn_opts(struct cr_conn_opts *o)
{
	/* No idle timeout of lib/net's: the relay keeps its own (relay.c), which counts the
	 * bytes it splices too. */
	o->idle_timeout_ns = 0;
	/* lib/net's watermarks only time on_drain here (keep_reading): a direction is paused
	 * above its share, never below PX_QUEUE_MIN, so it went over the high one and its
	 * on_drain comes once the queue is down to the low one. */
	o->high_watermark = PX_QUEUE_MIN;
	o->low_watermark = PX_QUEUE_MIN / 2;
	o->keep_reading = true;
}

/*
 * The bytes one direction of a session on this lcore may have queued: the pool less the
 * reserve, split over both directions of every session here (less a chunk that may be
 * partly sent, and one for the receive buffer held at its head), within [PX_QUEUE_MIN,
 * PX_QUEUE_MAX].
 */
static size_t
share(const struct px_lcore *pl)
{
	uint64_t r = reserve(px_relay.chunks);
	uint64_t avail = px_relay.chunks > r ? px_relay.chunks - r : 0;
	uint64_t per = avail / (2 * (uint64_t)(pl->live != 0 ? pl->live : 1));
	uint64_t bytes = per > 2 ? (per - 2) * px_relay.chunk_size : 0;

	if (bytes < PX_QUEUE_MIN)
		return PX_QUEUE_MIN;
	return bytes > PX_QUEUE_MAX ? PX_QUEUE_MAX : (size_t)bytes;
}

/* Fewer than the reserve would be free after queueing @p n bytes, counting the chunks of
 * sessions reset this turn as free. */
static bool
down_to_reserve(const struct px_lcore *pl, size_t n)
{
	struct cr_net_stats st;

	if (cr_net_stats(cr_lcore_id(), &st) != 0)
		return true;
	return st.chunks_free + pl->credit < reserve(px_relay.chunks) + n / px_relay.chunk_size + 2;
}

void
px_paused_sync(struct px_lcore *pl, struct px_session *s)
{
	bool want = s->cli_paused || s->srv_paused;

	if (want && !s->on_paused) {
		s->paused_ns = cr_now_ns();
		s->pprev = NULL;
		s->pnext = pl->paused;
		if (pl->paused != NULL)
			pl->paused->pprev = s;
		pl->paused = s;
	} else if (!want && s->on_paused) {
		if (s->pprev != NULL)
			s->pprev->pnext = s->pnext;
		else
			pl->paused = s->pnext;
		if (s->pnext != NULL)
			s->pnext->pprev = s->pprev;
		s->pnext = s->pprev = NULL;
	}
	s->on_paused = want;
}

/* Bytes @p s has queued in its paused directions. */
static size_t
held(const struct px_session *s)
{
	size_t h = 0;

	if (s->srv_paused && s->cli != NULL)
		h += cr_conn_queued(s->cli);
	if (s->cli_paused && s->srv != NULL)
		h += cr_conn_queued(s->srv);
	return h;
}

void
px_credit_timer_fired(struct cr_timer *t, void *arg)
{
	(void)t;
	((struct px_lcore *)arg)->credit = 0;
}

/*
 * The pool is down to its reserve: reset the session that holds the most bytes over its
 * share (@p sh) in directions that have waited for their reader at least PX_STALL_NS, as
 * Redis evicts the biggest client first. A session that reads drains its queue and goes
 * on within a turn or so, however much landed on it at once; one that does not read keeps
 * what it holds, waiting. @return the session reset, or NULL when none qualifies.
 */
static struct px_session *
evict_biggest(struct px_lcore *pl, size_t sh)
{
	uint64_t now = cr_now_ns();
	struct px_session *s, *big = NULL;
	size_t most = sh;

	for (s = pl->paused; s != NULL; s = s->pnext) {
		size_t h;

		if (now - s->paused_ns < PX_STALL_NS)
			continue;
		h = held(s);
		if (h > most) {
			most = h;
			big = s;
		}
	}
	if (big == NULL)
		return NULL;
	pl->credit += most / px_relay.chunk_size + 1;
	if (!cr_timer_armed(&pl->credit_timer))
		cr_timer_start(&pl->credit_timer, 0);
	cr_telemetry_add(px_ctr_nobufs, 1);
	px_ended(big, PX_END_NOBUFS);
	px_session_abort(pl, big);
	return big;
}

/*
 * Queue the receive buffer itself when lib/net lends it (no copy: the queue's reference
 * goes once the bytes are sent), else a copy.
 *
 * Only onto an empty queue. A held buffer takes a whole output chunk as its record where
 * copies pack into chunks (and the copies behind it start a chunk of their own): a queue
 * gets at most one held buffer, at its head, and what queues behind it is copied, so a
 * direction needs one chunk more than its copied bytes, which the shares leave room for
 * (share(), PX_SESSION_CHUNKS). Without that chunk, 200 non-readers on the smallest pool
 * spent it before any had waited long enough to be taken back, and new sessions were
 * reset before their first byte (proxy_sessionlog_nobufs under meson). A reader that keeps up
 * has an empty queue when the next bytes come (a request, its reply, a pipelined batch),
 * so small transfers go without a copy; one that does not gets copies after the first
 * buffer. A session thus holds at most one of the lcore's spares per direction: 1,000
 * clients that do not read take 1,000 at most, and when the spares are all held,
 * cr_conn_hold() refuses and the bytes are copied, so a reader is never paused for them.
 * lib/net refuses too at the source's max_held_bufs (and stops reading it until one is
 * back), and for a TLS source, whose plaintext is not in a receive buffer.
 */
static int
forward(struct cr_conn *src, struct cr_conn *dst, const void *d, size_t n)
{
	struct cr_buf *b = cr_conn_queued(dst) == 0 ? cr_conn_hold(src) : NULL;
	const uint8_t *p = d;
	int rc;

	if (b == NULL)
		return cr_conn_send(dst, d, n);
	if (p >= b->data && n <= b->len && (size_t)(p - b->data) <= b->len - n)
		rc = cr_conn_send_buf(dst, b, (size_t)(p - b->data), n);
	else
		rc = cr_conn_send(dst, d, n); /* not in the buffer (never, today): copy */
	cr_buf_unref(b);
	return rc;
}

bool
px_relay_bytes(struct px_lcore *pl, struct px_session *s, struct cr_conn *src,
	       struct cr_conn *dst, bool *src_paused, const void *d, size_t n)
{
	size_t sh = share(pl);
	int rc;

	/* The reserve is for sessions within their share, or that read: the biggest that
	 * waits over its share gives its chunks up first, and may be this one. */
	while (down_to_reserve(pl, n)) {
		struct px_session *v = evict_biggest(pl, sh);

		if (v == NULL)
			break;
		if (v == s)
			return false;
	}
	rc = forward(src, dst, d, n);
	if (rc != 0) {
		/* -ENOBUFS: this lcore's output chunks are spent (see --buffers); -EPIPE:
		 * the other side is closing. Either way these bytes cannot be delivered. */
		if (rc == -ENOBUFS) {
			cr_telemetry_add(px_ctr_nobufs, 1);
			px_ended(s, PX_END_NOBUFS);
		} else {
			px_ended(s, dst == s->cli ? PX_END_CLIENT_CLOSED : PX_END_SERVER_CLOSED);
		}
		px_session_abort(pl, s);
		return false;
	}
	if (!*src_paused && cr_conn_queued(dst) > sh) {
		*src_paused = true;
		px_paused_sync(pl, s);
		cr_conn_read_stop(src);
	}
	return true;
}
