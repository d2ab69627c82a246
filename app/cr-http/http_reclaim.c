/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Greedy clients (issue 14): the slow-body deadline, and the reserve of connection slots.
 *
 * A body must keep coming: no gap longer than --body-timeout between two of its pieces,
 * and, once --body-timeout has passed since it began, an average of at least
 * --min-body-rate bytes a second (Apache's mod_reqtimeout MinRate: the deadline moves one
 * second later for every --min-body-rate bytes). Else 408 and close.
 *
 * The reserve: a connection that is not sending a file (idle between requests, or reading
 * a request) is on a per-lcore list, in the order its current request began (or it went
 * idle). When an lcore holds more than --max-connections minus a reserve (1/32 of it), each
 * new connection ends the oldest on that list, so a new client is served at once however
 * many idle or slow ones hold slots, while those are still being timed out.
 */
#include "http.h"

#define LRU_NONE UINT32_MAX

static uint32_t
idx(const struct http_lcore *hl, const struct http_conn *h)
{
	return (uint32_t)(h - hl->conns);
}

void
http_lru_remove(struct http_lcore *hl, struct http_conn *h)
{
	if (!h->in_lru)
		return;
	if (h->lru_prev != LRU_NONE)
		hl->conns[h->lru_prev].lru_next = h->lru_next;
	else
		hl->lru_head = h->lru_next;
	if (h->lru_next != LRU_NONE)
		hl->conns[h->lru_next].lru_prev = h->lru_prev;
	else
		hl->lru_tail = h->lru_prev;
	h->in_lru = false;
}

void
http_lru_touch(struct http_lcore *hl, struct http_conn *h)
{
	uint32_t i = idx(hl, h);

	http_lru_remove(hl, h);
	h->lru_prev = hl->lru_tail;
	h->lru_next = LRU_NONE;
	if (hl->lru_tail != LRU_NONE)
		hl->conns[hl->lru_tail].lru_next = i;
	else
		hl->lru_head = i;
	hl->lru_tail = i;
	h->in_lru = true;
}

void
http_lru_settle(struct http_lcore *hl, struct http_conn *h)
{
	if (!h->open || h->closing || h->failed || h->file != NULL)
		http_lru_remove(hl, h);
	else if (!h->in_lru)
		http_lru_touch(hl, h);
}

struct cr_conn *
http_reclaim_victim(struct http_lcore *hl, const struct http_conn *fresh)
{
	struct http_conn *v;

	if (hl->n_open <= http_cfg.max_conns - http_cfg.reserve || hl->lru_head == LRU_NONE)
		return NULL;
	v = &hl->conns[hl->lru_head];
	if (v == fresh)
		return NULL;
	hl->cnt[CNT_RECLAIMED]++;
	return v->c;
}

void
http_body_start(struct http_conn *h)
{
	h->body_start_ns = cr_now_ns();
	h->body_last_ns = h->body_start_ns;
	h->body_bytes = 0;
	if (http_cfg.body_timeout_ns > 0)
		cr_timer_start(&h->hdr_timer, http_cfg.body_timeout_ns);
}

void
http_body_got(struct http_conn *h, size_t n)
{
	if (n == 0)
		return;
	h->body_bytes += n;
	h->body_last_ns = cr_now_ns();
}

uint64_t
http_body_left_ns(const struct http_conn *h)
{
	uint64_t now = cr_now_ns(), dl = h->body_last_ns + http_cfg.body_timeout_ns;
	uint64_t r = http_cfg.min_body_rate;

	if (r > 0) {
		uint64_t earned = h->body_bytes / r * 1000000000ull +
				  h->body_bytes % r * 1000000000ull / r;
		uint64_t rate_dl = h->body_start_ns + http_cfg.body_timeout_ns + earned;

		if (rate_dl < dl)
			dl = rate_dl;
	}
	return dl > now ? dl - now : 0;
}
