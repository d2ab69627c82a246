/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reply order on a connection: the queue of requests whose replies are owed, where a
 * reply made now goes (the lcore's batch buffer, or behind what is owed), and the flush
 * that sends completed replies strictly in request order.
 */
#include <stdlib.h>

#include "kv.h"

void
kc_enqueue(struct kconn *kc, struct kreq *kr)
{
	kr->next = NULL;
	if (kc->tail != NULL)
		kc->tail->next = kr;
	else
		kc->head = kr;
	kc->tail = kr;
	kc->queued++;
}

struct rbuf *
kc_local_out(struct kconn *kc)
{
	struct kreq *t = kc->tail;

	if (t == NULL)
		return &kc->sh->batch;
	if (t->coalesce)
		return t->final;
	/* A run of local replies behind an owed one: one request holds them all. */
	t = kreq_new(kc->sh, kc, NULL, 0, NULL);
	if (t == NULL)
		return NULL;
	t->coalesce = true;
	t->done = true;
	t->final = &t->one.out;
	kc_enqueue(kc, t);
	return t->final;
}

void
kc_reply_error(struct kconn *kc, const char *s, size_t n)
{
	struct rbuf *o = kc_local_out(kc);

	if (o != NULL)
		rb_errorlen(o, s, n);
}

static void
deferred_resume(void *arg)
{
	struct kconn *kc = arg;

	kc->resume_pending = false;
	if (kc->conn == NULL) {
		kc_maybe_free(kc);
		return;
	}
	if (kc->parse_held && kc->blocked == 0 && !kc->in_input && !kc->close_after &&
	    !kc->out_paused) {
		kc->parse_held = false;
		kc->resume(kc); /* may free kc */
	}
}

/*
 * Parsing held at KC_MAX_QUEUED requests in flight goes on in the deferred phase of the
 * turn, not on this stack: kc_flush() is called at the end of parsing too, and the other
 * connections of the lcore get their turn in between.
 */
static void
schedule_resume(struct kconn *kc)
{
	if (cr_defer(deferred_resume, kc) == 0) {
		kc->resume_pending = true;
	} else if (!kc->in_input && kc->blocked == 0 && !kc->close_after && !kc->out_paused) {
		kc->parse_held = false; /* the defer queue is full: here, then */
		kc->resume(kc);		/* may free kc */
	}
}

void
kc_flush(struct kconn *kc)
{
	struct kv_shard *sh = kc->sh;
	struct kreq *kr;

	while ((kr = kc->head) != NULL && kr->done) {
		if (kc->conn != NULL)
			kc_send_rbuf(kc, kr->final);
		kc->head = kr->next;
		if (kc->head == NULL)
			kc->tail = NULL;
		kc->queued--;
		kreq_free(sh, kr);
	}
	if (kc->conn == NULL) {
		kc_maybe_free(kc);
		return;
	}
	if (kc->close_after && kc->head == NULL && kc->oq_head == NULL) {
		if (kc->close_hard)
			kc_close_hard(kc);
		else
			cr_conn_close(kc->conn);
		return;
	}
	/* Held parsing goes on first: reading more meanwhile would grow the buffer by a read
	 * at each hold, faster than the hold lets it be parsed. */
	if (kc->read_stopped && kc->queued < KC_MAX_QUEUED / 4 && kc->blocked == 0 &&
	    !kc->out_paused && !kc->parse_held) {
		kc->read_stopped = false;
		cr_conn_read_start(kc->conn);
	}
	if (kc->parse_held && kc->queued < KC_MAX_QUEUED / 4 && !kc->resume_pending)
		schedule_resume(kc);
}

static void
deferred_flush(void *arg)
{
	struct kconn *kc = arg;

	kc->flush_pending = false;
	kc_flush(kc); /* may free kc */
}

/*
 * Replies completed by messages (other lcores answering) are sent once per turn per
 * connection, after the turn's messages have run: the deferred phase follows the mailbox
 * in a turn, so the answers of one burst leave in one send rather than one each.
 */
static void
schedule_flush(struct kconn *kc)
{
	if (kc->flush_pending)
		return;
	if (cr_defer(deferred_flush, kc) == 0)
		kc->flush_pending = true;
	else
		kc_flush(kc);
}

void
kreq_finish(struct kreq *kr)
{
	struct kconn *kc = kr->kc;

	kr->done = true;
	if (kr->final == NULL)
		kr->final = &kr->reply;
	/* (An EXEC's argv is its lock plan: the slow log takes its commands instead, one by
	 * one as they run, cmd_exec.c; EXEC is not logged, as in Redis 7.0.) */
	if (kr->cmd != NULL && kr->on_done == NULL)
		kv_cmd_ran(kc, kr->cmd, kr->argc, kr->argv, kr->run_ns,
			   kr->final->len != 0 && kr->final->p[0] == '-'); /* slowlog.h */
	if (kr->on_done != NULL) {
		kr->on_done(kr); /* not on the connection: its owner takes it (and frees it) */
		return;
	}
	if (kr->cmd != NULL && kr->final->len != 0 && kr->final->p[0] == '-')
		kv_errstat_note(kc->sh, kr->final->p, kr->final->len); /* errstat.c */
	if (kr->mute)
		rb_reset(kr->final); /* CLIENT REPLY OFF or SKIP when it was sent */
	else if (kc->resp == 3 && kr->cmd != NULL)
		kv_resp3_fix(kr->cmd, kr->argc, kr->argv, kr->final, 0); /* resp3.c */
	if (!kc->in_input)
		schedule_flush(kc);
}
