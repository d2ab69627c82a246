/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The origin side of blocking pops (see bpop.h): the blocked request, its timeout, its
 * cancel when the timeout passes or the client goes, and for keys on several shards the
 * watches and the attempts (the non-blocking command, as a request of its own).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <stdatomic.h>

#include "cr_log.h"
#include "kv.h"

CR_LOG_COMPONENT(bpop_log, "app.kv")

/* Timeouts longer than this (about 35 years) wait for ever. */
#define TIMEOUT_MAX_MS (1ull << 40)
/* A cancel that could not be sent yet (a full mailbox) is tried again this soon. */
#define RETRY_NS (1000 * 1000ull)

enum { AS_IS, LIST_ONE, ZSET_ONE }; /* how an attempt's reply becomes the command's */

struct kv_bpop {
	struct kd_node node; /* in bp.active, while several */
	uint64_t id;
	struct kreq *kr;
	struct cr_timer timer;
	bool several, timed_out, gone, cancelled, finished, counted;
	bool tried;	      /* an attempt found nothing (several shards) */
	bool moving;	      /* cancelled for a move: a null answer means "block again there" */
	uint64_t deadline_ns; /* cr_now_ns() at its timeout; 0: none */
	/* several shards: */
	bool active;	 /* in bp.active */
	bool sending;	 /* the watches are being sent */
	bool running;	 /* an attempt is out */
	bool again;	 /* a watched key was made since the attempt started */
	unsigned nwatch; /* shards watching */
	unsigned acks_left;
	struct kpart *watch;
	struct kv_arg *wargs;
	char idstr[24], nstr[24];
	struct rbuf err; /* a watch's error */
	const struct kv_cmd *subcmd;
	uint32_t subargc;
	struct kv_arg *subargv;
	int reshape;
};

static bool
active_eq(const struct kd_node *n, const void *key, size_t len)
{
	(void)len;
	return ((const struct kv_bpop *)n)->id == *(const uint64_t *)key;
}

static void
bpop_fini(void *arg)
{
	struct kv_bpop *bp = arg;
	unsigned i;

	if (bp == NULL)
		return;
	cr_timer_stop(&bp->timer);
	if (bp->active)
		kd_unlink(&kv_here()->bp.active, &bp->node);
	if (bp->counted)
		atomic_fetch_sub_explicit(&kv.blocked_clients, 1, memory_order_relaxed);
	if (bp->kr->kc->bpop == bp)
		bp->kr->kc->bpop = NULL;
	for (i = 0; bp->watch != NULL && i < bp->nwatch; i++)
		rb_fini(&bp->watch[i].out);
	free(bp->watch);
	free(bp->wargs);
	free(bp->subargv);
	rb_fini(&bp->err);
	free(bp);
}

/*
 * A wait cancelled for a move ended: if the shard answered the cancel (the null reply)
 * and the timeout has not passed, the command is kept to run again on the client's new
 * lcore (kv_rebl_save()) instead of being answered. What was popped is answered here,
 * first; it moves after.
 */
static bool
moves_on(struct kv_bpop *bp, const struct rbuf *final, const char *p, size_t n)
{
	if (final != NULL) {
		p = final->p;
		n = final->len;
	}
	if (n != 5 || (memcmp(p, "*-1\r\n", 5) != 0 && memcmp(p, "$-1\r\n", 5) != 0))
		return false;
	if (bp->deadline_ns != 0 && cr_now_ns() >= bp->deadline_ns)
		return false; /* its timeout passed meanwhile: that is its answer */
	return kv_rebl_save(bp->kr->kc, bp->kr, bp->deadline_ns) == 0;
}

/* The command's reply is @p n bytes at @p p (copied), or @p final. */
static void
finish(struct kv_bpop *bp, struct rbuf *final, const char *p, size_t n)
{
	struct kreq *kr = bp->kr;
	struct kconn *kc = kr->kc;
	struct kv_shard *sh = kc->sh;
	unsigned i;

	if (bp->moving && kc->conn != NULL && moves_on(bp, final, p, n)) {
		final = NULL; /* no answer here: the command runs again where it goes */
		p = "";
		n = 0;
	}
	bp->finished = true;
	cr_timer_stop(&bp->timer);
	if (bp->active) {
		kd_unlink(&sh->bp.active, &bp->node);
		bp->active = false;
	}
	for (i = 0; i < bp->nwatch; i++) {
		int rc = kv_bw_cancel(bp->watch[i].shard, sh->index, sh->oepoch, true, bp->id);

		/* Not sent: the watcher tells us when its key is next made, and is dropped
		 * then (kv_bpop_notified()). */
		if (rc != 0 && rc != -ESHUTDOWN)
			CR_LOG(bpop_log, DEBUG, "cancelling a watch on shard %u: %s",
			       bp->watch[i].shard, cr_strerror(rc));
	}
	if (final == NULL) {
		rb_reset(&kr->reply);
		rb_raw(&kr->reply, p, n);
		final = &kr->reply;
	}
	kc->bpop = NULL;
	kr->cont = NULL;
	/* Before the reply is final: the resumed parsing cannot free kr then. */
	kv_unblock(kc);
	kr->final = final;
	kreq_finish(kr); /* may free kr, and bp with it */
}

/* ---- keys on one shard: the part waits there ---- */

static void
serve_done(struct kreq *kr)
{
	finish(kr->state, &kr->one.out, NULL, 0);
}

static void
serve_cancel(struct kv_bpop *bp)
{
	struct kreq *kr = bp->kr;
	struct kv_shard *sh = kr->kc->sh;
	struct kpart *p = &kr->one;
	int rc;

	if (bp->cancelled)
		return;
	if (!kv_route_here(p->shard) || sh->outq_head[p->shard] != NULL) {
		/* The cancel must reach the shard after the part: nothing of it left here. */
		kv_outq_flush(sh);
		if (sh->outq_head[p->shard] != NULL) {
			cr_timer_start(&bp->timer, RETRY_NS);
			return;
		}
	}
	rc = kv_bw_cancel(p->shard, sh->index, p->epoch, false, (uint64_t)(uintptr_t)p);
	if (rc == -EAGAIN) {
		cr_timer_start(&bp->timer, RETRY_NS);
		return;
	}
	/* Sent (or the shard is stopping, and answers every waiter as it stops): the part's
	 * one answer is what it popped or a null array. */
	bp->cancelled = true;
}

static void
serve_start(struct kv_bpop *bp, unsigned shard)
{
	struct kreq *kr = bp->kr;

	kreq_set_parts(kr, 1);
	kr->one.nolease = true; /* a client may block for ever: a shutdown closes it */
	kr->one.shard = shard;
	kreq_part_args(&kr->one, kr->argc, kr->argv);
	kr->cont = serve_done;
	kreq_launch(kr); /* may answer at once */
}

/* ---- keys on several shards: watch them, then try ---- */

static void several_next(struct kv_bpop *bp);

static void
attempt_done(struct kreq *sub)
{
	struct kv_bpop *bp = sub->owner;
	struct kv_shard *sh = bp->kr->kc->sh;
	const struct rbuf *o = sub->final;
	struct rd r;
	const char *k, *v, *m;
	size_t kl, vl, ml;

	bp->running = false;
	if (o->len >= 3 && (memcmp(o->p, "*-1", 3) == 0 || memcmp(o->p, "$-1", 3) == 0)) {
		kreq_free(sh, sub);
		bp->tried = true;
		if (!bp->counted && !bp->timed_out && !bp->gone) {
			bp->counted = true; /* nothing there: blocked from now */
			atomic_fetch_add_explicit(&kv.blocked_clients, 1, memory_order_relaxed);
		}
		several_next(bp);
		return;
	}
	rd_init(&r, o);
	if (rd_error(o) || bp->reshape == AS_IS) {
		finish(bp, NULL, o->p, o->len);
	} else {
		struct rbuf *out = &bp->kr->reply;

		rb_reset(out);
		rd_array(&r);
		rd_bulk(&r, &k, &kl);
		rd_array(&r);
		if (bp->reshape == ZSET_ONE)
			rd_array(&r);
		rd_bulk(&r, &v, &vl);
		rb_array(out, bp->reshape == ZSET_ONE ? 3 : 2);
		rb_bulk(out, k, kl);
		rb_bulk(out, v, vl);
		if (bp->reshape == ZSET_ONE && rd_bulk(&r, &m, &ml))
			rb_bulk(out, m, ml);
		finish(bp, out, NULL, 0);
	}
	kreq_free(sh, sub);
}

static void
attempt(struct kv_bpop *bp)
{
	struct kconn *kc = bp->kr->kc;
	struct kreq *sub = kreq_new(kc->sh, kc, bp->subcmd, bp->subargc, bp->subargv);

	if (sub == NULL) {
		finish(bp, NULL, "-OOM out of memory\r\n", 20);
		return;
	}
	sub->on_done = attempt_done;
	sub->owner = bp;
	bp->running = true;
	bp->again = false;
	bp->subcmd->multi(sub); /* over several shards, as a transaction */
}

static void
several_next(struct kv_bpop *bp)
{
	if (bp->finished || bp->sending || bp->acks_left != 0 || bp->running)
		return;
	if (bp->err.len != 0)
		finish(bp, NULL, bp->err.p, bp->err.len);
	else if (!bp->tried)
		attempt(bp); /* the first, even past the timeout: Redis looks before it blocks */
	else if (bp->timed_out || bp->gone)
		finish(bp, NULL, "*-1\r\n", 5);
	else if (bp->again)
		attempt(bp); /* a watched key was made */
}

static void
watch_acked(struct kpart *p)
{
	struct kv_bpop *bp = p->kr->state;

	if (rd_error(&p->out) && bp->err.len == 0)
		rb_raw(&bp->err, p->out.p, p->out.len);
	bp->acks_left--;
	several_next(bp);
}

/* The command tried without blocking, and the keys it waits for. */
static int
several_plan(struct kv_bpop *bp, uint32_t *first, uint32_t *n, bool *zset)
{
	struct kreq *kr = bp->kr;
	const char *name = kr->cmd->name;
	uint32_t i, j = 0;

	bp->subargv = calloc(kr->argc + 3, sizeof(*bp->subargv));
	if (bp->subargv == NULL)
		return -ENOMEM;
	*zset = name[1] == 'z';
	if (strcmp(name, "blmove") == 0 || strcmp(name, "brpoplpush") == 0) {
		bp->subcmd = kv_cmd_lookup(name + 1, strlen(name + 1));
		for (i = 0; i + 1 < kr->argc; i++)
			bp->subargv[j++] = kr->argv[i];
		*first = 1;
		*n = 1; /* the source */
	} else if (strcmp(name, "blmpop") == 0 || strcmp(name, "bzmpop") == 0) {
		long long nk = 0;

		bp->subcmd = kv_cmd_lookup(name + 1, strlen(name + 1));
		bp->subargv[j++] = kr->argv[0];
		for (i = 2; i < kr->argc; i++)
			bp->subargv[j++] = kr->argv[i];
		resp_string2ll(kr->argv[2].p, kr->argv[2].len, &nk); /* routed: valid */
		*first = 3;
		*n = (uint32_t)nk;
	} else {
		bool right = strcmp(name, "brpop") == 0 || strcmp(name, "bzpopmax") == 0;

		bp->subcmd = kv_cmd_lookup(*zset ? "zmpop" : "lmpop", 5);
		bp->reshape = *zset ? ZSET_ONE : LIST_ONE;
		bp->subargv[j++] = kr->argv[0];
		bp->subargv[j].len =
		    (size_t)snprintf(bp->nstr, sizeof(bp->nstr), "%u", kr->argc - 2);
		bp->subargv[j++].p = bp->nstr;
		for (i = 1; i + 1 < kr->argc; i++)
			bp->subargv[j++] = kr->argv[i];
		bp->subargv[j].p = *zset ? (right ? "MAX" : "MIN") : (right ? "RIGHT" : "LEFT");
		bp->subargv[j].len = strlen(bp->subargv[j].p);
		j++;
		*first = 1;
		*n = kr->argc - 2;
	}
	bp->subargc = j;
	if (bp->subcmd == NULL || bp->subcmd->multi == NULL)
		return -EINVAL;
	/* Named as what it is: its key positions are that command's. */
	bp->subargv[0] = (struct kv_arg){bp->subcmd->name, strlen(bp->subcmd->name)};
	return 0;
}

static int
several_start(struct kv_bpop *bp)
{
	struct kreq *kr = bp->kr;
	struct kv_shard *sh = kr->kc->sh;
	uint32_t first, n, i, pos = 0;
	unsigned count[CR_MAX_LCORES] = {0}, s;
	bool zset;

	if (several_plan(bp, &first, &n, &zset) != 0)
		return -ENOMEM;
	for (i = 0; i < n; i++)
		count[key_shard(&kr->argv[first + i])]++;
	for (s = 0; s < kv.nshards; s++)
		bp->nwatch += count[s] != 0;
	bp->watch = calloc(bp->nwatch, sizeof(*bp->watch));
	bp->wargs = calloc(n + 3 * bp->nwatch, sizeof(*bp->wargs));
	if (bp->watch == NULL || bp->wargs == NULL) {
		bp->nwatch = 0;
		return -ENOMEM;
	}
	bp->id = ++sh->bp.next_id;
	snprintf(bp->idstr, sizeof(bp->idstr), "%llu", (unsigned long long)bp->id);
	bp->node.hash = kv_hash(&bp->id, sizeof(bp->id));
	if (kd_add(&sh->bp.active, &bp->node) != 0) {
		bp->nwatch = 0;
		return -ENOMEM;
	}
	bp->active = true;
	/* [watch, id, type, the shard's keys...] per shard */
	for (s = 0, i = 0; s < kv.nshards; s++) {
		struct kpart *p;
		struct kv_arg *a;
		uint32_t k, m = 0;

		if (count[s] == 0)
			continue;
		p = &bp->watch[i++];
		a = bp->wargs + pos;
		a[m++] = (struct kv_arg){"bw.watch", 8};
		a[m++] = (struct kv_arg){bp->idstr, strlen(bp->idstr)};
		a[m++] = (struct kv_arg){zset ? "z" : "l", 1};
		for (k = 0; k < n; k++)
			if (key_shard(&kr->argv[first + k]) == s)
				a[m++] = kr->argv[first + k];
		pos += m;
		p->kr = kr;
		p->fn = cmd_bw_watch;
		p->shard = s;
		p->argc = m;
		p->argv = a;
		p->on_answer = watch_acked;
		rb_init(&p->out, p->inl, sizeof(p->inl));
	}
	bp->several = true;
	bp->acks_left = bp->nwatch;
	bp->sending = true;
	for (i = 0; i < bp->nwatch; i++)
		kv_part_send(sh, &bp->watch[i]); /* its answer may come at once */
	bp->sending = false;
	several_next(bp);
	return 0;
}

/* ---- both ---- */

static void
time_out(struct kv_bpop *bp)
{
	bp->timed_out = true;
	if (bp->several)
		several_next(bp);
	else
		serve_cancel(bp);
}

static void
bpop_timer(struct cr_timer *t, void *arg)
{
	(void)t;
	time_out(arg);
}

void
kv_bpop_stop_waiting(struct kconn *kc)
{
	if (kc->bpop != NULL && !kc->bpop->timed_out)
		time_out(kc->bpop);
}

void
kv_bpop_move(struct kconn *kc)
{
	if (kc->bpop == NULL || kc->bpop->timed_out)
		return;
	kc->bpop->moving = true;
	time_out(kc->bpop);
}

void
kv_bpop_dispatch(struct kconn *kc, const struct kv_cmd *cmd, struct kv_ctx *x, int shard)
{
	struct kreq *kr = kreq_new(kc->sh, kc, cmd, x->argc, x->argv);
	long long ms = kv_bpop_timeout_ms(x);
	struct kv_bpop *bp;

	if (kr == NULL) {
		kc_abort(kc);
		return;
	}
	kc_enqueue(kc, kr);
	bp = calloc(1, sizeof(*bp));
	if (bp == NULL) {
		rb_error(&kr->reply, kv_err_oom);
		kreq_finish(kr);
		return;
	}
	bp->kr = kr;
	rb_init(&bp->err, NULL, 0);
	kr->state = bp;
	kr->state_fini = bpop_fini;
	cr_timer_init(&bp->timer, bpop_timer, bp);
	/* A blocked client runs nothing else until it is answered. */
	kc->blocked++;
	kc->bpop = bp;
	if (ms > 0 && (unsigned long long)ms <= TIMEOUT_MAX_MS) {
		cr_timer_start(&bp->timer, (uint64_t)ms * 1000 * 1000);
		bp->deadline_ns = cr_now_ns() + (uint64_t)ms * 1000 * 1000;
	}
	if (shard >= 0)
		serve_start(bp, (unsigned)shard);
	else if (several_start(bp) != 0)
		finish(bp, NULL, "-OOM out of memory\r\n", 20);
	/* On a closing lcore nothing waits: what the keys hold now, else the null reply
	 * (or, with a lcore to move to, the command waits there). */
	if (kc->sh->closing && kc->bpop == bp) {
		if (kv_move_possible(kc->sh))
			kv_bpop_move(kc);
		else
			kv_bpop_stop_waiting(kc);
	}
}

void
kv_bpop_gone(struct kconn *kc)
{
	struct kv_bpop *bp = kc->bpop;

	bp->gone = true;
	if (bp->several)
		several_next(bp);
	else
		serve_cancel(bp);
}

void
kv_bpop_notified(struct kv_shard *sh, unsigned from, uint64_t id)
{
	struct kv_bpop *bp = (struct kv_bpop *)kd_find(&sh->bp.active, kv_hash(&id, sizeof(id)),
						       &id, sizeof(id), active_eq);

	if (bp == NULL) {
		/* Its request is over: the watcher its cancel missed goes now. */
		(void)kv_bw_cancel(from, sh->index, sh->oepoch, true, id);
		return;
	}
	bp->again = true;
	several_next(bp);
}

void
kv_bp_init(struct kv_shard *sh)
{
	kd_init(&sh->bp.active);
}

void
kv_bp_fini(struct kv_shard *sh)
{
	kd_release(&sh->bp.active);
}
