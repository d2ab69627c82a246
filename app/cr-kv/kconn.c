/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A client connection's state (struct kconn): creation and teardown, sends, the hard
 * close after a protocol error, and the hold on its parsing while a multi-phase command
 * runs. The connection outlives its socket while replies are owed or a deferred flush is
 * queued; kc_maybe_free() frees it when nothing refers to it any more.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>

#include "kv.h"

struct kconn *
kconn_new(struct kv_shard *sh, struct cr_conn *c, kconn_resume_fn resume)
{
	struct kconn *kc = calloc(1, sizeof(*kc));

	if (kc == NULL)
		return NULL;
	kc->qbuf = malloc(KC_QBUF_INITIAL + 1);
	if (kc->qbuf == NULL) {
		free(kc);
		return NULL;
	}
	kc->qcap = KC_QBUF_INITIAL;
	kc->conn = c;
	kc->sh = sh;
	kc->resume = resume;
	kc->id = atomic_fetch_add_explicit(&kv.next_client_id, 1, memory_order_relaxed) + 1;
	kc->authed = !kv_auth_required();
	kc->resp = 2;
	kc->created_ms = kc->last_ms = kv_now_ms();
	resp_parser_init(&kc->rp, kv.max_bulk);
	kc->next = sh->conns;
	if (sh->conns != NULL)
		sh->conns->pprev = &kc->next;
	sh->conns = kc;
	kc->pprev = &sh->conns;
	kv_ps_client(sh, 1); /* the lcore's pub/sub lease counts it (it may subscribe) */
	return kc;
}

void
kconn_free(struct kconn *kc)
{
	if (cr_timer_armed(&kc->resume_timer)) /* a stopping lcore frees what is left */
		cr_timer_stop(&kc->resume_timer);
	kc_oq_drop(kc);
	kv_ps_gone(kc);
	kv_multi_free(kc);
	resp_parser_fini(&kc->rp);
	free(kc->qbuf);
	free(kc->name);
	free(kc->rebl);
	free(kc);
}

void
kc_maybe_free(struct kconn *kc)
{
	if (kc->conn == NULL && kc->head == NULL && !kc->in_input && !kc->flush_pending &&
	    !kc->resume_pending)
		kconn_free(kc);
}

void
kc_gone(struct kconn *kc)
{
	if (kc->conn == NULL)
		return;
	if (kc->close_hard)
		cr_timer_stop(&kc->kill_timer);
	cr_conn_set_data(kc->conn, NULL);
	kc->conn = NULL;
	if (kc->bpop != NULL)
		kv_bpop_gone(kc); /* a blocked client: cancel its wait */
	kv_ps_gone(kc); /* its subscriptions, all on this lcore */
	if (kc->next != NULL)
		kc->next->pprev = kc->pprev;
	*kc->pprev = kc->next;
	kv_ps_client(kc->sh, -1);
	kc_oq_drop(kc);
	kc_mem_update(kc); /* to nothing: it is gone */
	/* relaxed: a count, read for admission and INFO */
	atomic_fetch_sub_explicit(&kv.nclients, 1, memory_order_relaxed);
}

void
kc_abort(struct kconn *kc)
{
	struct cr_conn *c = kc->conn;

	kc_gone(kc);
	cr_conn_destroy(c);
	kc_maybe_free(kc);
}

static void
kill_fired(struct cr_timer *t, void *arg)
{
	struct kconn *kc = arg;

	(void)t;
	if (kc->conn != NULL)
		kc_abort(kc);
}

/*
 * After a protocol error: send the error, shut our side and stop reading, and reset the
 * connection shortly after, as redis closes such a client at once rather than reading
 * whatever else it sends (a NUL and then endless data must not keep it open).
 */
void
kc_close_hard(struct kconn *kc)
{
	if (cr_timer_armed(&kc->kill_timer))
		return;
	cr_conn_shutdown_write(kc->conn);
	if (!kc->read_stopped) {
		kc->read_stopped = true;
		cr_conn_read_stop(kc->conn);
	}
	cr_timer_init(&kc->kill_timer, kill_fired, kc);
	cr_timer_start(&kc->kill_timer, 100 * 1000 * 1000ull);
}

void
kc_stop_reading_if_needed(struct kconn *kc)
{
	if (kc->conn != NULL && !kc->read_stopped &&
	    (kc->queued >= KC_MAX_QUEUED ||
	     ((kc->blocked != 0 || kc->out_paused) && kc->qlen > KC_QBUF_SHRINK))) {
		kc->read_stopped = true;
		cr_conn_read_stop(kc->conn);
	}
}

void
kv_unblock(struct kconn *kc)
{
	if (--kc->blocked == 0 && kc->conn != NULL && !kc->in_input)
		kc->resume(kc);
}
