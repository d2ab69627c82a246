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
 * many idle or slow ones hold slots, while those are still being timed out. The lists are
 * of array indexes (struct http_ilist), also used by http_static.c for the transfers waiting
 * for a read buffer.
 */
#include <stddef.h>

#include "http.h"

static struct http_link *
link_at(void *base, size_t size, size_t off, uint32_t i)
{
	return (struct http_link *)((char *)base + (size_t)i * size + off);
}

void
http_ilist_init(struct http_ilist *l)
{
	l->head = HTTP_LINK_NONE;
	l->tail = HTTP_LINK_NONE;
}

void
http_ilist_remove(struct http_ilist *l, void *base, size_t size, size_t off, uint32_t i)
{
	struct http_link *k = link_at(base, size, off, i);

	if (!k->on)
		return;
	if (k->prev != HTTP_LINK_NONE)
		link_at(base, size, off, k->prev)->next = k->next;
	else
		l->head = k->next;
	if (k->next != HTTP_LINK_NONE)
		link_at(base, size, off, k->next)->prev = k->prev;
	else
		l->tail = k->prev;
	k->on = false;
}

/* Append @p i (removed first if it is on the list). */
void
http_ilist_push(struct http_ilist *l, void *base, size_t size, size_t off, uint32_t i)
{
	struct http_link *k = link_at(base, size, off, i);

	http_ilist_remove(l, base, size, off, i);
	k->prev = l->tail;
	k->next = HTTP_LINK_NONE;
	if (l->tail != HTTP_LINK_NONE)
		link_at(base, size, off, l->tail)->next = i;
	else
		l->head = i;
	l->tail = i;
	k->on = true;
}

#define LRU_ARGS(hl) (hl)->conns, sizeof(struct http_conn), offsetof(struct http_conn, lru)

void
http_lru_remove(struct http_lcore *hl, struct http_conn *h)
{
	http_ilist_remove(&hl->lru, LRU_ARGS(hl), (uint32_t)(h - hl->conns));
}

void
http_lru_touch(struct http_lcore *hl, struct http_conn *h)
{
	http_ilist_push(&hl->lru, LRU_ARGS(hl), (uint32_t)(h - hl->conns));
}

void
http_lru_settle(struct http_lcore *hl, struct http_conn *h)
{
	if (!h->open || h->closing || h->failed || h->file != NULL)
		http_lru_remove(hl, h);
	else if (!h->lru.on)
		http_lru_touch(hl, h);
}

struct cr_conn *
http_reclaim_victim(struct http_lcore *hl, const struct http_conn *fresh)
{
	struct http_conn *v;

	if (hl->n_open <= http_cfg.max_conns - http_cfg.reserve || hl->lru.head == HTTP_LINK_NONE)
		return NULL;
	v = &hl->conns[hl->lru.head];
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
		uint64_t earned =
		    h->body_bytes / r * 1000000000ull + h->body_bytes % r * 1000000000ull / r;
		uint64_t rate_dl = h->body_start_ns + http_cfg.body_timeout_ns + earned;

		if (rate_dl < dl)
			dl = rate_dl;
	}
	return dl > now ? dl - now : 0;
}
