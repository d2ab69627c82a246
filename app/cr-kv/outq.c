/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A connection's output (see kv.h): what lib/net's queue cannot take yet waits in blocks
 * of the app's memory and is fed to it a slice at a time; the output limits of Redis's
 * "normal" client class (client-output-buffer-limit) close the client over them.
 *
 * lib/net's chunk pool is shared by the lcore's connections and sized at start (DESIGN
 * rule 4). Here a connection holds at most about OQ_FEED of it, whatever the size of its
 * replies, so one that does not read holds that much and no more: it cannot take the
 * pool from the others unless about chunks x chunk_size / OQ_FEED such clients gather on
 * one lcore. A connection refused chunks (-ENOBUFS) waits on the shard's starved list,
 * retried every millisecond; its replies are never dropped for want of chunks.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>

#include "cr_log.h"
#include "kv.h"

CR_LOG_COMPONENT(outq_log, "app.kv")

/* lib/net's queue of one connection is fed up to this (above its high watermark, so that
 * on_drain comes when the client has read most of it). */
#define OQ_FEED (128u * 1024)
/* A copied block holds at least this much, so that small replies behind a big one share. */
#define OQ_BLOCK (16u * 1024)
/* A reply at least this big in a heap buffer is taken over, not copied. */
#define OQ_TAKE (64u * 1024)
#define STARVED_RETRY_NS (1000 * 1000ull)

struct kv_oblk {
	struct kv_oblk *next;
	char *p;
	size_t len, off; /* bytes in p; of which handed to lib/net */
	size_t cap;	 /* what p takes (its allocation) */
	char data[];	 /* p, unless a reply's buffer was taken over */
};

static void
oblk_free(struct kconn *kc, struct kv_oblk *b)
{
	kc->oq_alloc -= b->cap + sizeof(*b);
	if (b->p != b->data)
		free(b->p);
	free(b);
}

static void
oq_push(struct kconn *kc, struct kv_oblk *b)
{
	b->next = NULL;
	if (kc->oq_tail != NULL)
		kc->oq_tail->next = b;
	else
		kc->oq_head = b;
	kc->oq_tail = b;
	kc->oq_bytes += b->len;
	kc->oq_alloc += b->cap + sizeof(*b);
}

static bool
oq_copy(struct kconn *kc, const char *p, size_t n)
{
	struct kv_oblk *t = kc->oq_tail, *b;
	size_t cap;

	if (t != NULL && t->p == t->data && t->cap - t->len >= n) {
		memcpy(t->p + t->len, p, n);
		t->len += n;
		kc->oq_bytes += n;
		return true;
	}
	cap = n < OQ_BLOCK ? OQ_BLOCK : n;
	b = malloc(sizeof(*b) + cap);
	if (b == NULL)
		return false;
	b->p = b->data;
	b->len = n;
	b->off = 0;
	b->cap = cap;
	memcpy(b->p, p, n);
	oq_push(kc, b);
	return true;
}

static bool
starved_unlink(struct kconn **pp, struct kconn *kc)
{
	while (*pp != NULL && *pp != kc)
		pp = &(*pp)->starved_next;
	if (*pp == NULL)
		return false;
	*pp = kc->starved_next;
	return true;
}

void
kc_oq_drop(struct kconn *kc)
{
	struct kv_oblk *b;

	while ((b = kc->oq_head) != NULL) {
		kc->oq_head = b->next;
		oblk_free(kc, b);
	}
	kc->oq_tail = NULL;
	kc->oq_bytes = 0;
	if (kc->starved) {
		/* On the list, or on the part of it starved_retry() has yet to pump. */
		if (!starved_unlink(&kc->sh->starved, kc))
			(void)starved_unlink(&kc->sh->starved_round, kc);
		kc->starved = false;
	}
}

static void
starve(struct kconn *kc)
{
	struct kv_shard *sh = kc->sh;

	if (kc->starved)
		return;
	kc->starved = true;
	kc->starved_next = sh->starved;
	sh->starved = kc;
	if (!cr_timer_armed(&sh->starved_timer))
		cr_timer_start(&sh->starved_timer, STARVED_RETRY_NS);
}

/* Feed lib/net from the blocks; false when the connection went (-EPIPE: closing). */
static void
pump(struct kconn *kc)
{
	struct kv_oblk *b;

	while ((b = kc->oq_head) != NULL) {
		size_t q = cr_conn_queued(kc->conn), n = b->len - b->off;
		int rc;

		if (q >= OQ_FEED)
			return; /* above the high watermark: on_drain calls again */
		if (n > OQ_FEED - q)
			n = OQ_FEED - q;
		rc = cr_conn_send(kc->conn, b->p + b->off, n);
		if (rc == -ENOBUFS) {
			starve(kc);
			return;
		}
		if (rc != 0) { /* -EPIPE: our side is shut, nothing more can go */
			kc_oq_drop(kc);
			break;
		}
		b->off += n;
		kc->oq_bytes -= n;
		if (b->off == b->len) {
			kc->oq_head = b->next;
			if (kc->oq_head == NULL)
				kc->oq_tail = NULL;
			oblk_free(kc, b);
		}
	}
}

static void
obuf_close(struct kconn *kc, size_t used, const char *which)
{
	atomic_fetch_add_explicit(&kv.obuf_closed, 1, memory_order_relaxed);
	CR_LOG(outq_log, WARNING,
	       "client %llu closed for overcoming of output buffer limits: %zu bytes owed, "
	       "over the %s limit",
	       (unsigned long long)kc->id, used, which);
	kc_abort(kc);
}

/*
 * Redis's checkClientOutputBufferLimits() for the normal class (pubsub for a subscriber): when output is added,
 * and for the soft limit at the shard's tick too. Over the hard limit: closed; over the soft one: closed once it has
 * stayed over for longer than the soft seconds. True if the client stays.
 */
static bool
out_limits_ok(struct kconn *kc)
{
	unsigned long long hard = atomic_load_explicit(&kv.obuf_hard, memory_order_relaxed);
	unsigned long long soft = atomic_load_explicit(&kv.obuf_soft, memory_order_relaxed);
	unsigned long long secs = atomic_load_explicit(&kv.obuf_soft_secs, memory_order_relaxed);
	unsigned long long ps[3];
	size_t used;

	if (kv_ps_limits(kc, ps)) { /* a subscriber: Redis's pubsub class */
		hard = ps[0];
		soft = ps[1];
		secs = ps[2];
	}
	if (hard == 0 && soft == 0)
		return true;
	/* As Redis counts its reply blocks: the memory of those not yet wholly sent. */
	used = kc->oq_alloc + cr_conn_queued(kc->conn);
	if (hard != 0 && used >= hard) {
		obuf_close(kc, used, "hard");
		return false;
	}
	if (soft == 0 || used < soft) {
		kc->obuf_soft_since = 0;
		return true;
	}
	if (kc->obuf_soft_since == 0) {
		kc->obuf_soft_since = kv_now_ms();
		return true;
	}
	if (kv_now_ms() - kc->obuf_soft_since > (int64_t)secs * 1000) {
		obuf_close(kc, used, "soft");
		return false;
	}
	return true;
}

static bool
queued_out(struct kconn *kc)
{
	pump(kc);
	kc_mem_update(kc);
	return kc->conn != NULL && out_limits_ok(kc);
}

static bool
enomem(struct kconn *kc, size_t n)
{
	CR_LOG(outq_log, WARNING, "client %llu: no memory for a reply of %zu bytes; closing it",
	       (unsigned long long)kc->id, n);
	kc_abort(kc);
	return false;
}

bool
kc_send(struct kconn *kc, const char *p, size_t n)
{
	if (kc->conn == NULL || n == 0)
		return kc->conn != NULL;
	if (kc->oq_head == NULL && cr_conn_queued(kc->conn) + n <= OQ_FEED) {
		int rc = cr_conn_send(kc->conn, p, n);

		if (rc == 0 || rc == -EPIPE)
			return rc == 0 ? out_limits_ok(kc) : true;
		/* -ENOBUFS: the pool is short just now; the reply waits in a block. */
	}
	if (!oq_copy(kc, p, n))
		return enomem(kc, n);
	return queued_out(kc);
}

bool
kc_send_rbuf(struct kconn *kc, struct rbuf *b)
{
	struct kv_oblk *o;

	if (kc->conn == NULL || b->len < OQ_TAKE || b->p == b->inl)
		return kc_send(kc, b->p, b->len);
	o = malloc(sizeof(*o));
	if (o == NULL)
		return enomem(kc, b->len);
	o->p = b->p;
	o->len = b->len;
	o->off = 0;
	o->cap = b->cap;
	if (b->cap - b->len > b->len / 8) {
		/* The buffer grew by doubling: give back what the reply does not use, so
		 * that the client is charged for its reply, not for the growth (a big
		 * buffer shrinks in place, by mremap). */
		char *np = realloc(b->p, b->len);

		if (np != NULL) {
			o->p = np;
			o->cap = b->len;
		}
	}
	oq_push(kc, o);
	b->p = b->inl; /* the buffer is the block's now */
	b->cap = 0;
	b->len = 0;
	return queued_out(kc);
}

/*
 * How much unread output a client's next command waits behind. With a hard limit set,
 * that limit (the client is closed past it, as in Redis); without one (Redis's default,
 * where the output of a client that pipelines without reading grows without bound), 8 MiB:
 * the commands it sent after run as it reads, so one client cannot make the lcore build
 * hundreds of megabytes of replies for it in one go.
 */
#define OUT_PAUSE (8u << 20)

static size_t
out_pending(struct kconn *kc)
{
	size_t n = kc->oq_alloc;

	if (kc->in_input)
		n += kc->sh->batch.len; /* its replies made in this batch, not sent yet */
	return n;
}

bool
kc_out_full(struct kconn *kc)
{
	unsigned long long hard = atomic_load_explicit(&kv.obuf_hard, memory_order_relaxed);

	if (out_pending(kc) < (hard != 0 ? hard : OUT_PAUSE))
		return false;
	kc->out_paused = true;
	return true;
}

void
kc_pump(struct kconn *kc)
{
	unsigned long long hard;

	if (kc->conn == NULL)
		return;
	if (kc->oq_head != NULL) {
		pump(kc);
		kc_mem_update(kc);
	}
	hard = atomic_load_explicit(&kv.obuf_hard, memory_order_relaxed);
	if (kc->out_paused && out_pending(kc) < (hard != 0 ? hard : OUT_PAUSE) / 2) {
		kc->out_paused = false;
		if (kc->blocked == 0 && !kc->in_input && !kc->close_after && kc->conn != NULL) {
			kc->resume(kc); /* parse what waits; may free kc */
			return;
		}
	}
	if (kc->conn != NULL && kc->oq_head == NULL && kc->close_after)
		kc_flush(kc); /* the last owed bytes went: the close waited for them */
}

static void
starved_retry(struct cr_timer *t, void *arg)
{
	struct kv_shard *sh = arg;
	struct kconn *kc;

	(void)t;
	/* Taken off one at a time: a pump may close (and unlink) another of them. One
	 * starved again goes on the list for the next round. */
	sh->starved_round = sh->starved;
	sh->starved = NULL;
	while ((kc = sh->starved_round) != NULL) {
		sh->starved_round = kc->starved_next;
		kc->starved = false;
		kc_pump(kc); /* may starve it again, or free it */
	}
}

/* The soft limit also when no reply is added: a client over it that sends nothing more
 * (or whose requests wait unread behind its unread replies) is closed in its time. */
void
kv_outq_tick(struct kv_shard *sh)
{
	struct kconn *kc, *next;

	/* (Subscribers have a soft limit always: the pubsub class's.) */
	for (kc = sh->conns; kc != NULL; kc = next) {
		next = kc->next;
		if (kc->conn != NULL && kc->obuf_soft_since != 0)
			(void)out_limits_ok(kc); /* may close and free kc */
	}
}

void
kv_outq_init(struct kv_shard *sh)
{
	sh->starved = NULL;
	sh->starved_round = NULL;
	cr_timer_init(&sh->starved_timer, starved_retry, sh);
}

void
kv_outq_fini(struct kv_shard *sh)
{
	cr_timer_stop(&sh->starved_timer);
	sh->starved = NULL;
}
