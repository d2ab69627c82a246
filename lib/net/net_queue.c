/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A connection's output queue: a list of chunks from the lcore's pool, each a copy made by
 * cr_conn_send() (filled up to chunk_size, the last one topped up by the next copy) or a
 * record of bytes that stay where they are (net_nocopy.c). One rule admits every chunk
 * taken (cr__conn_admit(): the pool's reserve), one test says whether the queue is above
 * its high watermark (cr__conn_above_high(): bytes or chunks), and the chunks go back,
 * each paying what it owes exactly once, as the kernel takes their bytes
 * (cr__conn_consume()) or when the slot is freed (cr__conn_queue_drop()).
 */
#include <errno.h>
#include <string.h>

#include "net_internal.h"

int
cr_conn_send(struct cr_conn *c, const void *data, size_t len)
{
	if (c != NULL && c->layer != NULL && c->layer->send != NULL)
		return c->layer->send(c, data, len);
	return cr_conn_send_wire(c, data, len);
}

/* Room in the last chunk: none in one that carries no copy (its bytes are not ours). */
static size_t
tail_room(const struct cr_conn *c)
{
	const struct net_chunk *t = c->tail;

	return t != NULL && t->ext == NULL ? c->nl->chunk_cap - t->len : 0;
}

bool
cr__conn_above_high(const struct cr_conn *c)
{
	return c->queued > c->high_wm || c->nchunks > c->high_chunks;
}

bool
cr__conn_admit(struct cr_conn *c, size_t need, bool past_reserve)
{
	struct net_lcore *nl = c->nl;

	/* A connection already above its high watermark (it was fed faster than its peer
	 * reads) may not take the last quarter of the pool: that share is kept for the
	 * others, so it is the greedy one that is refused, never a bystander. The reserve
	 * is chunks, so "above" counts chunks too: 64 one-byte pieces are 64 chunks. */
	if (need > nl->chunks_free ||
	    (!past_reserve && cr__conn_above_high(c) &&
	     nl->chunks_free - need < nl->chunk_reserve)) {
		NET_STAT_ADD(nl, send_nobufs, 1);
		return false;
	}
	return true;
}

void
cr__conn_append(struct cr_conn *c, struct net_chunk *ch)
{
	if (c->tail != NULL)
		c->tail->next = ch;
	else
		c->head = ch;
	c->tail = ch;
	c->nchunks++;
}

static int
send_wire(struct cr_conn *c, const void *data, size_t len, bool past_reserve)
{
	struct net_lcore *nl;
	const uint8_t *p = data;
	size_t room, need;

	if (c == NULL || (data == NULL && len != 0))
		return -EINVAL;
	nl = c->nl;
	NET_ASSERT_OWNER(nl);
	if (c->wr_shut_req || (c->state != CONN_OPEN && c->state != CONN_CONNECTING))
		return -EPIPE;
	if (len == 0)
		return 0;
	room = tail_room(c);
	need = len > room ? (len - room + nl->chunk_cap - 1) / nl->chunk_cap : 0;
	if (!cr__conn_admit(c, need, past_reserve))
		return -ENOBUFS;
	/* The tail may be in an in-flight send: the kernel reads only up to its old len. */
	while (len > 0) {
		size_t n;

		if (tail_room(c) == 0)
			cr__conn_append(c, cr__net_chunk_get(nl));
		n = nl->chunk_cap - c->tail->len;
		if (n > len)
			n = len;
		memcpy(c->tail->data + c->tail->len, p, n);
		c->tail->len += (uint32_t)n;
		c->queued += n;
		p += n;
		len -= n;
	}
	if (cr__conn_above_high(c))
		c->above_high = true;
	cr__conn_progress(c, false);
	return 0;
}

int
cr_conn_send_wire(struct cr_conn *c, const void *data, size_t len)
{
	return send_wire(c, data, len, false);
}

int
cr_conn_send_wire_past_reserve(struct cr_conn *c, const void *data, size_t len)
{
	return send_wire(c, data, len, true);
}

size_t
cr_conn_send_room(const struct cr_conn *c)
{
	const struct net_lcore *nl = c->nl;
	size_t room = tail_room(c);
	unsigned chunks = nl->chunks_free;

	/* send_wire()'s rule: one above its high watermark leaves the reserve alone. */
	if (cr__conn_above_high(c))
		chunks = chunks > nl->chunk_reserve ? chunks - nl->chunk_reserve : 0;
	return room + (size_t)chunks * nl->chunk_cap;
}

size_t
cr_conn_queued(const struct cr_conn *c)
{
	return c->queued;
}

bool
cr_conn_writable(const struct cr_conn *c)
{
	return !cr__conn_above_high(c);
}

/*
 * Bytes the kernel took: free the chunks they emptied. Those that carried no copy say so
 * (an unref, a sent callback) only once the queue is consistent again: the app may send
 * on this connection, or destroy it, from its callback.
 */
void
cr__conn_consume(struct cr_conn *c, size_t n)
{
	struct net_chunk *ch, *done = NULL, **last = &done;

	c->queued -= n;
	while (n > 0) {
		size_t take;

		ch = c->head;
		take = ch->len - ch->off;
		if (take > n)
			take = n;
		ch->off += (uint32_t)take;
		n -= take;
		if (ch->off == ch->len) {
			c->head = ch->next;
			if (c->head == NULL)
				c->tail = NULL;
			ch->next = NULL;
			c->nchunks--;
			*last = ch;
			last = &ch->next;
		}
	}
	while ((ch = done) != NULL) {
		done = ch->next;
		cr__net_chunk_drop(c->nl, ch, 0);
	}
}

/* The slot is freed, after every op's final completion: nothing of the queue is sent. */
void
cr__conn_queue_drop(struct cr_conn *c)
{
	struct net_chunk *ch;

	while ((ch = c->head) != NULL) {
		c->head = ch->next;
		cr__net_chunk_drop(c->nl, ch, -ECANCELED); /* never sent (all of it) */
	}
	c->tail = NULL;
	c->queued = 0;
	c->nchunks = 0;
}
