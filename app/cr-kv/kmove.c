/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A client moves to another lcore when its own retires (lib/net's cr_conn_move(), at a
 * boundary: conn_at_boundary()), so a resize disconnects nobody. struct kconn itself is
 * the state handed over; each of its fields, as it stands at a boundary:
 *
 *   travels     id, name, authed (AUTH, and so the slow log's and CLIENT's identity),
 *               mx (the MULTI queue and its dirty flag: heap copies of the commands),
 *               watch (the WATCHed keys and the versions, generations and shard
 *               incarnations they were read at: a shard keeps its versions and its
 *               incarnation when it moves (shardmove.c), so EXEC on the new lcore
 *               compares them as the old one would), qbuf/qcap/rp (the query
 *               buffer and the idle parser: their memory is the process's heap), resume,
 *               read_stopped, resp (RESP2 or 3: a RESP3 client's forwarded and held
 *               messages are sent as push frames, psmove.c), no_evict, the CLIENT REPLY
 *               mode (reply_off, reply_skip, reply_skip_next), created_ms, last_ms and
 *               last_cmd (CLIENT LIST's age, idle and cmd)
 *   rebuilt     next/pprev (the new lcore's list), sh, conn (the new handle), mem (the
 *               old lcore's client memory gives it up, the new one counts it),
 *               obuf_soft_since (nothing is queued: 0), the pub/sub registrations (ps:
 *               subscribed again on the new lcore, psmove.c), a blocking command (rebl:
 *               cancelled here and sent again there with what is left of its timeout)
 *   not at a    head/tail/queued (a request in flight or a reply owed), have_cmd and a
 *   boundary    parser in the middle of a request, oq_* and starved (output not yet with
 *   (it waits)  lib/net), out_paused, blocked (a WATCH being recorded, a transaction, a
 *               subscriber's messages still coming from its old lcore: psm), in_input,
 *               flush_pending and resume_pending (a deferred task of this lcore holds it),
 *               parse_held (only with requests in flight), bpop (cancelled first)
 *   never moves close_after, close_hard and kill_timer, eof_held: lib/net does not move a
 *               connection that is being shut or read its EOF; it closes it
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>

#include "cr_log.h"
#include "cr_telemetry.h"
#include "kv.h"

CR_LOG_COMPONENT(kmove_log, "app.kv")

/* A blocking command to run again where the client goes. */
struct kv_rebl {
	uint64_t deadline_ns; /* cr_now_ns() when it times out; 0: it waits for ever */
	uint32_t argc, tidx;  /* tidx: the timeout's argument */
	size_t len;
	char args[]; /* [u32 length, bytes] per argument */
};

bool
kv_move_possible(const struct kv_shard *sh)
{
	unsigned id;

	if (!sh->closing)
		return false;
	CR_LCORE_FOREACH(id)
	if (id != sh->lcore)
		return true;
	return false;
}

int
kv_rebl_save(struct kconn *kc, const struct kreq *kr, uint64_t deadline_ns)
{
	struct kv_rebl *r;
	size_t len = 0;
	uint32_t i;
	char *w;
	bool timeout_first =
	    strcmp(kr->cmd->name, "blmpop") == 0 || strcmp(kr->cmd->name, "bzmpop") == 0;

	for (i = 0; i < kr->argc; i++)
		len += 4 + kr->argv[i].len;
	r = malloc(sizeof(*r) + len);
	if (r == NULL)
		return -ENOMEM;
	r->deadline_ns = deadline_ns;
	r->argc = kr->argc;
	r->tidx = timeout_first ? 1 : kr->argc - 1;
	r->len = len;
	for (w = r->args, i = 0; i < kr->argc; i++) {
		uint32_t n = (uint32_t)kr->argv[i].len;

		memcpy(w, &n, 4);
		memcpy(w + 4, kr->argv[i].p, n);
		w += 4 + n;
	}
	free(kc->rebl);
	kc->rebl = r;
	kc->blocked++; /* nothing runs here before it: it runs where the client goes */
	return 0;
}

static int
rb_cmd_arg(struct rbuf *b, const char *p, size_t n)
{
	char head[32];
	int h = snprintf(head, sizeof(head), "$%zu\r\n", n);

	rb_raw(b, head, (size_t)h);
	rb_raw(b, p, n);
	rb_raw(b, "\r\n", 2);
	return 0;
}

/* The blocking command goes in front of what the client sent after it, with the time
 * left of its timeout (at least a millisecond: it looks once more and answers). */
static int
rebl_inject(struct kconn *kc)
{
	struct kv_rebl *r = kc->rebl;
	struct rbuf b;
	char head[32], tmo[40];
	const char *p = r->args;
	size_t rest = kc->qlen - kc->qpos;
	uint32_t i;
	int h;

	if (r->deadline_ns == 0) {
		snprintf(tmo, sizeof(tmo), "0");
	} else {
		uint64_t now = cr_now_ns();
		uint64_t ms = r->deadline_ns > now ? (r->deadline_ns - now + 999999) / 1000000 : 1;

		snprintf(tmo, sizeof(tmo), "%llu.%03llu", (unsigned long long)(ms / 1000),
			 (unsigned long long)(ms % 1000));
	}
	rb_init(&b, NULL, 0);
	h = snprintf(head, sizeof(head), "*%u\r\n", r->argc);
	rb_raw(&b, head, (size_t)h);
	for (i = 0; i < r->argc; i++) {
		uint32_t n;

		memcpy(&n, p, 4);
		if (i == r->tidx)
			rb_cmd_arg(&b, tmo, strlen(tmo));
		else
			rb_cmd_arg(&b, p + 4, n);
		p += 4 + n;
	}
	if (kc->qcap < b.len + rest) {
		char *n = realloc(kc->qbuf, b.len + rest + 1);

		if (n == NULL) {
			rb_fini(&b);
			return -ENOMEM;
		}
		kc->qbuf = n;
		kc->qcap = b.len + rest;
	}
	memmove(kc->qbuf + b.len, kc->qbuf + kc->qpos, rest);
	memcpy(kc->qbuf, b.p, b.len);
	kc->qpos = 0;
	kc->qlen = b.len + rest;
	rb_fini(&b);
	free(r);
	kc->rebl = NULL;
	return 0;
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
	if (kc->blocked == 0 && !kc->in_input && kc->qpos < kc->qlen)
		kc->resume(kc); /* may free kc */
}

static void
resume_fired(struct cr_timer *t, void *arg)
{
	(void)t;
	deferred_resume(arg);
}

/* Parse what waits in the query buffer, from the loop rather than from lib/net's call (or
 * a PUBLISH part's); the defer queue full: from a timer, in a tick. */
static void
resume_later(struct kconn *kc)
{
	if (kc->resume_pending)
		return;
	kc->resume_pending = true;
	if (cr_defer(deferred_resume, kc) == 0)
		return;
	cr_timer_init(&kc->resume_timer, resume_fired, kc);
	cr_timer_start(&kc->resume_timer, 1);
}

void
kv_unblock_later(struct kconn *kc)
{
	if (--kc->blocked == 0 && kc->conn != NULL)
		resume_later(kc);
}

/* Run the blocking command here after all: no lcore is left to take the client (a
 * shutdown began). On a closing lcore it does not wait: it answers now. */
static void
rebl_here(void *arg)
{
	struct kconn *kc = arg;

	kc->resume_pending = false;
	if (kc->conn == NULL) {
		kc_maybe_free(kc);
		return;
	}
	if (kc->rebl == NULL)
		return;
	if (rebl_inject(kc) != 0) {
		kc_abort(kc);
		return;
	}
	kv_unblock(kc); /* parses it; may free kc */
}

bool
kv_rebl_boundary(struct kconn *kc)
{
	if (kv_move_possible(kc->sh))
		return true;
	if (!kc->resume_pending && cr_defer(rebl_here, kc) == 0)
		kc->resume_pending = true;
	return false;
}

void *
kv_conn_move_out(struct cr_conn *c)
{
	struct kconn *kc = cr_conn_data(c);

	if (kc == NULL)
		return NULL;
	if (kv_ps_move_out(kc) != 0) {
		CR_LOG(kmove_log, WARNING,
		       "client %llu: no memory to carry its subscriptions: it is closed once moved",
		       (unsigned long long)kc->id);
		kc->move_lost = true;
	}
	kc->move_from = kc->sh->lcore;
	/* Its output is empty (a boundary), but it may still be on this lcore's list of
	 * those waiting for chunks (outq.c), which this lcore's timer walks. */
	kc_oq_drop(kc);
	kc->conn = NULL;
	kc_mem_update(kc); /* this lcore's client memory no longer counts it */
	if (kc->next != NULL)
		kc->next->pprev = kc->pprev;
	*kc->pprev = kc->next;
	kv_ps_client(kc->sh, -1);
	kc->next = NULL;
	kc->pprev = NULL;
	kc->obuf_soft_since = 0;
	kc->sh = NULL;
	return kc;
}

void
kv_conn_move_in(struct cr_conn *c, void *state)
{
	struct kconn *kc = state;
	struct kv_shard *sh = kv_here();
	bool back = kc->move_from == sh->lcore;

	kc->conn = c;
	kc->sh = sh;
	cr_conn_set_data(c, kc);
	kc->next = sh->conns;
	if (sh->conns != NULL)
		sh->conns->pprev = &kc->next;
	sh->conns = kc;
	kc->pprev = &sh->conns;
	kv_ps_client(sh, 1);
	kc_mem_update(kc);
	kv_ps_move_in(kc);
	if (back && kc->move_lost) {
		/* The move was refused, and its subscriptions were dropped for want of memory
		 * to carry them: without them it would miss messages unawares. */
		CR_LOG(kmove_log, WARNING,
		       "client %llu: its subscriptions were lost in a move that was refused; "
		       "closing it",
		       (unsigned long long)kc->id);
		cr_conn_close(c);
		return;
	}
	if (back)
		return; /* the move was refused: it is tried again at the next boundary */
	/* relaxed: counts, read by INFO */
	atomic_fetch_add_explicit(&kv.clients_moved, 1, memory_order_relaxed);
	cr_telemetry_add(kv.tel_moved, 1);
	if (kc->move_lost) {
		cr_conn_close(c);
		return;
	}
	if (kc->rebl != NULL) {
		atomic_fetch_add_explicit(&kv.blocked_moved, 1, memory_order_relaxed);
		cr_telemetry_add(kv.tel_reblocked, 1);
		if (rebl_inject(kc) != 0) {
			CR_LOG(kmove_log, WARNING,
			       "client %llu: no memory to block it again after "
			       "its move; closing it",
			       (unsigned long long)kc->id);
			cr_conn_close(c);
			return;
		}
		kc->blocked--;
	}
	if (kc->qpos < kc->qlen)
		resume_later(kc);
}

void
kv_conn_move_drop(void *arg, void *state)
{
	struct kconn *kc = state;

	(void)arg;
	if (kc == NULL)
		return;
	kc->sh = kv_here();
	kv_ps_move_drop(kc);
	/* relaxed: a count, read for admission and INFO */
	atomic_fetch_sub_explicit(&kv.nclients, 1, memory_order_relaxed);
	kconn_free(kc);
}
