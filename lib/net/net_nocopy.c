/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Sends without copies: cr_conn_send_buf() (a held receive buffer, or a slice of it) and
 * cr_conn_sendv() (the app's memory, with a callback when it is free again).
 *
 * Each piece is one output chunk of the connection's queue, in order with the copies
 * cr_conn_send() makes, but its bytes stay where they are: the chunk points at them
 * (ext) and carries what frees them, a reference on the buffer or the sent callback.
 * Taking a chunk per piece keeps the pool's rules (its reserve, -ENOBUFS) and the queue's
 * accounting (queued, watermarks, on_drain) exactly as they are for copies.
 *
 * What a chunk owes is paid once, in cr__net_chunk_drop(): when its last byte is sent
 * (consume() in net_conn.c), or when the connection's queue is dropped at the free of its
 * slot, which comes after every op's final completion, so the kernel is done with the
 * bytes (a zero-copy send included).
 */
#include <errno.h>

#include "net_internal.h"

/* The limit of cr_conn_sendv(): a sendv is at most this many chunks. */
#define SENDV_MAX 64

void
cr__net_chunk_drop(struct net_lcore *nl, struct net_chunk *ch, int err)
{
	struct cr_buf *b = ch->buf;
	cr_conn_sent_fn sent = ch->sent;
	void *arg = ch->sent_arg;

	cr__net_chunk_put(nl, ch);
	cr_buf_unref(b);
	if (sent != NULL)
		sent(arg, err);
}

/* What cr_conn_send() says before it queues anything. */
static int
send_check(struct cr_conn *c)
{
	NET_ASSERT_OWNER(c->nl);
	if (c->wr_shut_req || (c->state != CONN_OPEN && c->state != CONN_CONNECTING))
		return -EPIPE;
	return 0;
}

/* One chunk for @p len bytes at @p p, admitted already. */
static struct net_chunk *
queue_ext(struct cr_conn *c, const uint8_t *p, size_t len)
{
	struct net_chunk *ch = cr__net_chunk_get(c->nl);

	ch->ext = p;
	ch->len = (uint32_t)len;
	cr__conn_append(c, ch);
	c->queued += len;
	return ch;
}

static void
queued_more(struct cr_conn *c)
{
	if (cr__conn_above_high(c))
		c->above_high = true;
	cr__conn_progress(c, false);
}

int
cr_conn_send_buf(struct cr_conn *c, struct cr_buf *b, size_t off, size_t len)
{
	struct net_chunk *ch;
	int rc;

	if (c == NULL || b == NULL || off > b->len || len > b->len - off)
		return -EINVAL;
	if (b->lcore != c->nl->lcore)
		return -EXDEV;
	if (c->layer != NULL && c->layer->send != NULL)
		return c->layer->send(c, b->data + off, len); /* encrypted from a copy */
	rc = send_check(c);
	if (rc != 0 || len == 0)
		return rc;
	if (!cr__conn_admit(c, 1, false))
		return -ENOBUFS;
	ch = queue_ext(c, b->data + off, len);
	cr_buf_ref(b);
	ch->buf = b;
	queued_more(c);
	return 0;
}

/*
 * The layer copies each buffer into its records: the memory is free at once. A layer
 * with sendv takes them all or none (lib/tls does); one without is given them one by
 * one, and a refusal leaves those before it queued.
 */
static int
sendv_layered(struct cr_conn *c, const struct iovec *iov, unsigned n, cr_conn_sent_fn sent,
	      void *arg)
{
	unsigned i;
	int rc = 0;

	if (c->layer->sendv != NULL)
		rc = c->layer->sendv(c, iov, n);
	else
		for (i = 0; i < n && rc == 0; i++)
			rc = c->layer->send(c, iov[i].iov_base, iov[i].iov_len);
	if (rc != 0)
		return rc;
	sent(arg, 0);
	return 0;
}

int
cr_conn_sendv(struct cr_conn *c, const struct iovec *iov, unsigned n, cr_conn_sent_fn sent,
	      void *arg)
{
	struct net_chunk *ch = NULL;
	size_t total = 0;
	unsigned i, pieces = 0;
	int rc;

	if (c == NULL || iov == NULL || sent == NULL || n == 0 || n > SENDV_MAX)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		if (iov[i].iov_len > UINT32_MAX || (iov[i].iov_base == NULL && iov[i].iov_len))
			return -EINVAL;
		total += iov[i].iov_len;
		pieces += iov[i].iov_len != 0;
	}
	if (total == 0)
		return -EINVAL;
	if (c->layer != NULL && c->layer->send != NULL)
		return sendv_layered(c, iov, n, sent, arg);
	rc = send_check(c);
	if (rc != 0)
		return rc;
	if (!cr__conn_admit(c, pieces, false))
		return -ENOBUFS;
	for (i = 0; i < n; i++)
		if (iov[i].iov_len != 0)
			ch = queue_ext(c, iov[i].iov_base, iov[i].iov_len);
	/* The last chunk's: once it is sent, every byte before it is too. */
	ch->sent = sent;
	ch->sent_arg = arg;
	queued_more(c);
	return 0;
}
