/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Lent receive buffers: on_data may keep the bytes it was given (cr_conn_hold()) instead
 * of copying them.
 *
 * A held buffer is lib/io's receive buffer itself, kept out of the pool: cr_io_buf_hold()
 * puts one of the lcore's spares in its place, so the receives of every connection see as
 * many buffers as if nothing were held. Its handle, a struct cr_buf, comes from a table
 * sized at start (one per spare: no more can be held at once), and counts references.
 *
 * While on_data runs, the delivery itself holds one reference: the app may drop its own
 * inside the call without the buffer going back under the bytes lib/net still hands it.
 * The buffer returns to lib/io exactly once, at the last cr_buf_unref(), whoever makes it
 * (the app, or recv_done() after on_data when the app kept nothing).
 *
 * A held buffer counts against its connection's cap (max_held_bufs) until it returns, or
 * until the connection ends: then the buffer is detached (conn = NULL) and is the app's
 * alone, so a slot is never kept busy by a buffer and a dead connection is never touched.
 */
#include <errno.h>
#include <string.h>

#include "net_internal.h"

/* A debug build writes over a buffer's bytes as it goes back: a use after the last unref
 * then reads garbage the tests' checksums see, not the next receive's bytes by luck. */
#ifdef CR_DEBUG
#define BUF_POISON(b) memset((void *)(uintptr_t)(b)->data, 0xdb, (b)->len)
#else
#define BUF_POISON(b) ((void)(b))
#endif

static void
held_add(struct cr_conn *c, struct cr_buf *b)
{
	b->conn = c;
	b->prev = NULL;
	b->next = c->held;
	if (c->held != NULL)
		c->held->prev = b;
	c->held = b;
	c->bufs_held++;
}

static void
held_del(struct cr_conn *c, struct cr_buf *b)
{
	if (b->prev != NULL)
		b->prev->next = b->next;
	else
		c->held = b->next;
	if (b->next != NULL)
		b->next->prev = b->prev;
	b->conn = NULL;
	b->next = b->prev = NULL;
	c->bufs_held--;
}

int
cr__net_bufs_init(struct net_lcore *nl, uint32_t n)
{
	uint32_t i;

	nl->bufs = cr_numa_zalloc(sizeof(*nl->bufs) * (n != 0 ? n : 1), nl->numa);
	if (nl->bufs == NULL)
		return -ENOMEM;
	for (i = n; i-- > 0;) {
		nl->bufs[i].next = nl->free_bufs;
		nl->free_bufs = &nl->bufs[i];
	}
	nl->nbufs = n;
	return 0;
}

/*
 * The lcore's memory goes (its last slot is free, after lcore_stop). A buffer the app
 * still holds then stays readable: lib/io keeps the memory of held buffers (their driver
 * sees them held), and the handles stay here, orphaned (lcore NET_BUF_ORPHAN), so that
 * a later cr_buf_ref()/cr_buf_unref() only counts, from whatever thread, and never gives
 * a buffer id to the next incarnation's pool. Both are kept until the process exits.
 */
void
cr__net_bufs_free(struct net_lcore *nl)
{
	uint32_t i;

	if (nl->bufs_held != 0) {
		CR_LOG(cr__net_log, WARNING,
		       "lcore %u stops with %u receive buffers held: they stay valid, their "
		       "memory is kept until the process exits",
		       nl->lcore, nl->bufs_held);
		for (i = 0; i < nl->nbufs; i++) {
			if (nl->bufs[i].refs == 0)
				continue;
			nl->bufs[i].conn = NULL;
			nl->bufs[i].next = nl->bufs[i].prev = NULL;
			nl->bufs[i].lcore = NET_BUF_ORPHAN;
		}
	} else {
		cr_numa_free(nl->bufs);
	}
	nl->bufs = NULL;
	nl->nbufs = 0;
	nl->free_bufs = NULL;
}

void
cr__conn_deliver(struct cr_conn *c, const struct cr_io_cqe *cqe)
{
	struct cr_buf *b;

	/* Plaintext a layer makes is not in this buffer: holding is for bare connections. */
	c->rx_cqe = c->layer == NULL ? cqe : NULL;
	c->rx_buf = NULL;
	c->wire->on_data(c, cqe->buf, (size_t)cqe->res);
	b = c->rx_buf;
	c->rx_cqe = NULL;
	c->rx_buf = NULL;
	if (b != NULL)
		cr_buf_unref(b); /* the delivery's reference */
	else
		cr_io_buf_release(cqe->buf_id);
}

void
cr__conn_bufs_detach(struct cr_conn *c)
{
	while (c->held != NULL)
		held_del(c, c->held);
}

struct cr_buf *
cr_conn_hold(struct cr_conn *c)
{
	struct net_lcore *nl;
	struct cr_buf *b;
	int rc;

	if (c == NULL || (c->rx_cqe == NULL && c->layer == NULL)) {
		errno = EINVAL;
		return NULL;
	}
	nl = c->nl;
	NET_ASSERT_OWNER(nl);
	if (c->layer != NULL) {
		errno = ENOTSUP;
		return NULL;
	}
	if (c->rx_buf != NULL) {
		c->rx_buf->refs++;
		return c->rx_buf;
	}
	if (c->bufs_held >= c->max_held || nl->free_bufs == NULL) {
		rc = -ENOBUFS;
		goto refused;
	}
	rc = cr_io_buf_hold(c->rx_cqe->buf_id);
	if (rc != 0)
		goto refused;
	b = nl->free_bufs;
	nl->free_bufs = b->next;
	b->data = c->rx_cqe->buf;
	b->len = (uint32_t)c->rx_cqe->res;
	b->id = c->rx_cqe->buf_id;
	b->lcore = nl->lcore;
	b->refs = 2; /* the caller's, and the delivery's until on_data returns */
	/* An ended connection (cr_conn_destroy() inside this on_data) has released what it
	 * held and its slot goes back once on_data returns: the buffer is the app's alone,
	 * detached as at the end, and counts against no connection. */
	if (c->state != CONN_DEAD)
		held_add(c, b);
	else
		b->conn = NULL, b->next = b->prev = NULL;
	nl->bufs_held++;
	NET_STAT_ADD(nl, bufs_held, 1);
	c->rx_buf = b;
	return b;

refused:
	if (rc == -ENOBUFS)
		NET_STAT_ADD(nl, hold_nobufs, 1);
	errno = -rc;
	return NULL;
}

void
cr_buf_ref(struct cr_buf *b)
{
	if (b->lcore == NET_BUF_ORPHAN) { /* its lcore stopped: counts only */
		assert(b->refs > 0);
		b->refs++;
		return;
	}
	NET_ASSERT_OWNER(&cr__net_lcores[b->lcore]);
	assert(b->refs > 0);
	b->refs++;
}

void
cr_buf_unref(struct cr_buf *b)
{
	struct net_lcore *nl;
	struct cr_conn *c;
	bool was_capped;

	if (b == NULL)
		return;
	if (b->lcore == NET_BUF_ORPHAN) { /* its lcore stopped: counts only */
		assert(b->refs > 0);
		b->refs--;
		return;
	}
	nl = &cr__net_lcores[b->lcore];
	NET_ASSERT_OWNER(nl);
	assert(b->refs > 0);
	if (--b->refs != 0)
		return;
	c = b->conn;
	was_capped = c != NULL && c->bufs_held >= c->max_held;
	if (c != NULL)
		held_del(c, b);
	BUF_POISON(b);
	cr_io_buf_release(b->id);
	b->data = NULL;
	b->len = 0;
	b->next = nl->free_bufs;
	nl->free_bufs = b;
	nl->bufs_held--;
	NET_STAT_ADD(nl, bufs_held, -1);
	/* Below its cap again: it reads again (no callback from here: may_notify false). */
	if (was_capped)
		cr__conn_progress(c, false);
}

unsigned
cr_conn_held_bufs(const struct cr_conn *c)
{
	return c->bufs_held;
}
