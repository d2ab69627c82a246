/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The connection's events from lib/net (cr_conn_ops): admission against --maxclients,
 * bytes appended to the query buffer and handed to the request engine, end of input and
 * close.
 */
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>

#include "cr_log.h"
#include "cr_telemetry.h"
#include "kv.h"

CR_LOG_COMPONENT(conn_log, "app.kv")

static bool
qbuf_append(struct kconn *kc, const void *data, size_t len)
{
	if (kc->qlen + len > kc->qcap) {
		size_t cap = kc->qcap;
		char *n;

		while (cap < kc->qlen + len)
			cap = cap < (1u << 30) ? cap * 2 : cap + cap / 4;
		n = realloc(kc->qbuf, cap + 1);
		if (n == NULL)
			return false;
		kc->qbuf = n;
		kc->qcap = cap;
	}
	memcpy(kc->qbuf + kc->qlen, data, len);
	kc->qlen += len;
	return true;
}

static void
conn_data(struct cr_conn *c, const void *data, size_t len)
{
	struct kconn *kc = cr_conn_data(c);

	if (kc == NULL)
		return;
	if (!qbuf_append(kc, data, len)) {
		kc_abort(kc);
		return;
	}
	kc_mem_update(kc); /* over --maxmemory-clients: an eviction pass is deferred */
	if (kc->qlen > kv.qbuf_limit) {
		atomic_fetch_add_explicit(&kv.qbuf_closed, 1, memory_order_relaxed);
		cr_telemetry_add(kv.tel_qbuf, 1);
		CR_LOG(conn_log, WARNING,
		       "closing client %llu that reached max query buffer length (%zu bytes)",
		       (unsigned long long)kc->id, kc->qlen);
		kc_abort(kc);
		return;
	}
	/* kv_process_input() may destroy the connection and free kc: touch neither after. */
	if (kc->blocked == 0 && !kc->close_after)
		kv_process_input(kc);
	else
		kc_stop_reading_if_needed(kc);
}

static void
conn_open(struct cr_conn *c)
{
	static const char maxerr[] = "-ERR max number of clients reached\r\n";
	struct kconn *kc;
	uint64_t n;

	atomic_fetch_add_explicit(&kv.conns_total, 1, memory_order_relaxed);
	/* relaxed: admission counts; an exact bound needs no ordering with anything else */
	n = atomic_fetch_add_explicit(&kv.nclients, 1, memory_order_relaxed) + 1;
	if (n > kv.maxclients) {
		atomic_fetch_sub_explicit(&kv.nclients, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&kv.rejected, 1, memory_order_relaxed);
		cr_telemetry_add(kv.tel_rejected, 1);
		(void)cr_conn_send(c, maxerr, sizeof(maxerr) - 1);
		cr_conn_close(c);
		return;
	}
	if (kv_protected_refuse(c)) { /* protected.c: the DENIED text is sent */
		atomic_fetch_sub_explicit(&kv.nclients, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&kv.rejected, 1, memory_order_relaxed);
		cr_telemetry_add(kv.tel_rejected, 1);
		cr_conn_close(c);
		return;
	}
	/* The request engine resumes parsing when a hold on the connection ends. */
	kc = kconn_new(kv_here(), c, kv_process_input);
	if (kc == NULL) {
		atomic_fetch_sub_explicit(&kv.nclients, 1, memory_order_relaxed);
		cr_conn_destroy(c);
		return;
	}
	cr_conn_set_data(c, kc);
	kc_mem_update(kc);
}

static void
conn_close(struct cr_conn *c, int err)
{
	struct kconn *kc = cr_conn_data(c);

	(void)err;
	if (kc == NULL)
		return;
	kc_gone(kc);
	kc_maybe_free(kc);
}

void
kc_eof(struct kconn *kc)
{
	/* Redis closes a client whose peer shut its side, replies owed or not; it has run
	 * what it read before. Held parsing (KC_MAX_QUEUED) goes on first, then this again. */
	if (kc->parse_held) {
		kc->eof_held = true;
		return;
	}
	kc->eof_held = false;
	if ((kc->head == NULL && kc->oq_head == NULL) || kc->bpop != NULL) {
		cr_conn_close(kc->conn); /* a blocked client too: its wait is cancelled */
		return;
	}
	/* Replies are still owed: send them, then close. */
	kc->close_after = true;
}

static void
conn_eof(struct cr_conn *c)
{
	struct kconn *kc = cr_conn_data(c);

	if (kc == NULL)
		cr_conn_close(c);
	else
		kc_eof(kc);
}

/*
 * Asked on a closing lcore, and before a move (kmove.c): closing or moving now loses
 * nothing when no command is half-read or parsed and not yet run, every reply owed has
 * been handed to lib/net (which sends what it holds first), and no task of this lcore
 * holds the client. A client blocked in BLPOP or its kind is not at one: its wait was
 * ended when the closing began (kv_clients_closing()), and it is at one once it was
 * cancelled to block again where it goes (rebl; what it sent after waits in the query
 * buffer and goes with it), or answered.
 */
static bool
conn_at_boundary(struct cr_conn *c)
{
	struct kconn *kc = cr_conn_data(c);

	if (kc == NULL)
		return true;
	if (kc->head != NULL || kc->oq_head != NULL || kc->have_cmd || kc->rp.reqtype != 0 ||
	    kc->flush_pending || kc->resume_pending || kc->psm != NULL ||
	    kc->blocked != (kc->rebl != NULL))
		return false;
	if (kc->rebl != NULL)
		return kv_rebl_boundary(kc);
	return kc->qpos == kc->qlen;
}

/* lib/net's queue fell to its low watermark: feed it what waits. */
static void
conn_drain(struct cr_conn *c)
{
	struct kconn *kc = cr_conn_data(c);

	if (kc != NULL)
		kc_pump(kc);
}

/*
 * The grace after the closing began: a client still not at a boundary (half a command
 * sent and then nothing, or replies it does not read) would keep a retiring lcore
 * RETIRING for ever. It is closed, and said so. So is one at a boundary whose replies
 * still wait in lib/net's queue: it does not read them, and lib/net moves a connection
 * only once its queue is empty.
 */
static void
closing_grace_over(struct cr_timer *t, void *arg)
{
	struct kv_shard *sh = arg;
	struct kconn *kc, *next;

	(void)t;
	for (kc = sh->conns; kc != NULL; kc = next) {
		size_t unsent;

		next = kc->next;
		if (kc->conn == NULL)
			continue;
		unsent = kc->oq_bytes + cr_conn_queued(kc->conn);
		if (unsent == 0 && conn_at_boundary(kc->conn))
			continue;
		CR_LOG(conn_log, WARNING,
		       "client %llu not at a request boundary %u s after lcore %u began closing "
		       "(%zu bytes of a request read, %zu of replies unsent): closing it",
		       (unsigned long long)kc->id, kv.closing_grace_s, sh->lcore,
		       kc->qlen - kc->qpos, unsent);
		kc_abort(kc); /* may free kc */
	}
}

void
kv_clients_closing(struct kv_shard *sh)
{
	struct kconn *kc, *next;
	bool move;

	sh->closing = true;
	move = kv_move_possible(sh);
	for (kc = sh->conns; kc != NULL; kc = next) {
		next = kc->next;
		if (move)
			kv_bpop_move(kc); /* cancelled here, blocked again where it goes */
		else
			kv_bpop_stop_waiting(kc);
	}
	kv_ps_closing(sh);
	if (kv.closing_grace_s != 0 && !cr_timer_armed(&sh->closing_timer)) {
		cr_timer_init(&sh->closing_timer, closing_grace_over, sh);
		cr_timer_start(&sh->closing_timer, kv.closing_grace_s * 1000000000ull);
	}
}

const struct cr_conn_ops kv_conn_ops = {
    .on_move_out = kv_conn_move_out,
    .on_move_in = kv_conn_move_in,
    .on_move_drop = kv_conn_move_drop,
    .on_open = conn_open,
    .on_data = conn_data,
    .on_eof = conn_eof,
    .on_drain = conn_drain,
    .on_close = conn_close,
    .at_boundary = conn_at_boundary,
};
