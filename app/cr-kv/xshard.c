/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Parts between shards: a request's parts are run at once for the local shard and
 * queued per target shard for the others; each target's queue goes to its lcore as one
 * cr_call() (struct kbatch), is run there in order, and comes back; a request whose parts
 * have all answered is complete (merged, or handed to its continuation).
 *
 * Remote parts travel in batches: a part for another shard is queued on this lcore's
 * out-queue for that shard, and the queue goes as one cr_call() at the end of the input
 * being parsed, or at the end of the turn for parts queued by completions. One message
 * then carries a pipeline's worth of parts, and the owner prefetches all their keys
 * before running them. The queue is FIFO per target, so one client's parts still reach
 * each shard in the order issued. A full mailbox (-EAGAIN) leaves the queue as it is, to
 * go with the next attempt (next turn).
 */
#include <errno.h>
#include <stdlib.h>

#include "cr_log.h"
#include "cr_telemetry.h"
#include "kv.h"

CR_LOG_COMPONENT(xshard_log, "app.kv")

struct kbatch {
	struct cr_call call;
	struct kbatch *next_free;
	struct kpart *head;
	unsigned n;
	unsigned shard; /* every part's */
};

#define BATCH_MAX 256u

/* Run @p p on this shard (or queue it behind a transaction's locks), the time it ran
 * kept in it for its request (the slow log's duration). @return true if it answered. */
static bool
part_run(struct kv_shard *sh, struct kpart *p)
{
	uint64_t t0 = cr_clock_ns();
	bool answered = kv_tx_run_part(sh, p);

	p->run_ns += cr_clock_ns() - t0;
	return answered;
}

/* Back on the request's lcore: what the part ran counts for its request. */
static void
part_took(struct kpart *p)
{
	if (p->kr != NULL)
		p->kr->run_ns += p->run_ns;
	p->run_ns = 0;
}

/* On the lcore owning shard @p s: prefetch every part's first key, then run (or queue,
 * behind a transaction's locks) each in order, charging the shard's memory. */
static void
parts_run(unsigned s, struct kpart *head)
{
	struct kv_shard *sh = kv_shard_at(s);
	struct kv_mem *prev;
	struct kpart *p;

	if (!kv_shard_owned(sh)) {
		/* Broken invariant (shardmove.c I1): parts go to the owner only. */
		CR_LOG(xshard_log, ERR, "parts for shard %u on lcore %u, which does not own it", s,
		       cr_lcore_id());
		abort();
	}
	prev = kv_mem_swap(&sh->mem);
	for (p = head; p != NULL; p = p->next_out)
		if (p->argc >= 2)
			kv_prefetch_bucket(sh->store, kv_hash(p->argv[1].p, p->argv[1].len));
	for (p = head; p != NULL; p = p->next_out)
		(void)part_run(sh, p);
	kv_lazy_kick(sh);
	kv_evict_kick(sh);
	kv_mem_swap(prev);
}

static void
batch_run(void *arg)
{
	struct kbatch *b = arg;

	parts_run(b->shard, b->head);
}

static void
kreq_complete(struct kreq *kr)
{
	if (kr->cont != NULL) {
		kr->cont(kr);
		return;
	}
	if (kr->nparts == 1 && kr->cmd->merge == KV_MERGE_ONE) {
		kr->final = &kr->one.out;
	} else {
		kv_merge(kr, &kr->reply);
		kr->final = &kr->reply;
	}
	kreq_finish(kr);
}

/* A request part's answer is in (the on_answer of every kreq_launch()ed part). */
static void
kreq_part_done(struct kpart *p)
{
	struct kreq *kr = p->kr;

	if (--kr->left == 0 && kr->sent == kr->nparts)
		kreq_complete(kr); /* may free kr, and p with it */
}

static void
part_answered(struct kpart *p)
{
	part_took(p);
	p->on_answer(p); /* may free p */
}

/* The part was queued behind locks: its answer comes as a message (txlock.c). */
static void
part_parked(struct kv_shard *sh, struct kpart *p)
{
	if (p->state & KP_EARLY) {
		p->state = 0;
		part_answered(p);
		return;
	}
	p->state |= KP_AWAITING;
	if (!p->nolease)
		kv_tx_await(sh, 1);
}

static void
batch_put(struct kv_shard *sh, struct kbatch *b)
{
	b->next_free = sh->free_batches;
	sh->free_batches = b;
}

/* Back on the client's lcore: each part is answered, in order. */
static void
parts_done(struct kv_shard *sh, struct kpart *p)
{
	struct kpart *next;

	for (; p != NULL; p = next) {
		next = p->next_out;
		if (p->state & KP_PARKED) {
			part_took(p); /* its run, when the locks are granted, is not counted */
			part_parked(sh, p);
		} else {
			part_answered(p);
		}
	}
}

static void
batch_done(void *arg)
{
	struct kbatch *b = arg;
	struct kv_shard *sh = kv_here();
	struct kpart *head = b->head;

	batch_put(sh, b);
	parts_done(sh, head);
}

static void outq_task(void *arg);

static void
outq_timer(struct cr_timer *t, void *arg)
{
	(void)t;
	outq_task(arg);
}

/* Send the out-queues at the end of this turn (or, if the defer queue is full, in a
 * tick). */
static void
outq_arm(struct kv_shard *sh)
{
	if (sh->outq_armed)
		return;
	sh->outq_armed = true;
	if (cr_defer(outq_task, sh) != 0)
		cr_timer_start(&sh->outq_timer, 1);
}

/*
 * PUBLISH and PUBSUB (KV_MERGE_PUBSUB) are per *lcore*: each part answers for the
 * subscribers of the lcore that runs it (pubsub.c). So their parts go to the home lcore
 * of their index, whichever lcore runs that shard now (shardmove.c), and run there
 * without the shard (they name no key): a retiring lcore still hears the messages its
 * moving subscribers wait for (psmove.c), and a restarted one before its shard is back.
 * One FIFO path per pair of lcores keeps one publisher's messages in order.
 */
static bool
lcore_scoped(const struct kreq *kr)
{
	return kr != NULL && kr->cmd != NULL && kr->cmd->merge == KV_MERGE_PUBSUB;
}

static void
lpart_exec(struct kpart *p)
{
	struct kv_ctx x = {.sh = kv_here(),
			   .argc = p->argc,
			   .argv = p->argv,
			   .out = &p->out,
			   .now_ms = kv_now_ms()};
	uint64_t t0 = cr_clock_ns();

	if (p->ps_seq != 0)
		kv_ps_tag(p->ps_from, p->ps_seq); /* a PUBLISH: its number (pubsub.c) */
	p->fn(&x);
	p->run_ns += cr_clock_ns() - t0;
}

static void
lbatch_run(void *arg)
{
	struct kbatch *b = arg;

	lpart_exec(b->head);
}

static void outq_arm(struct kv_shard *sh);

/* Send @p p to its lcore. @return 0 sent; -EAGAIN refused by a full mailbox (or no
 * memory: tried again); 1 its lcore is offline, its answer is in p->out (the caller
 * answers it: never from inside kreq_launch()'s loop). */
static int
lpart_send(struct kv_shard *sh, struct kpart *p)
{
	struct kbatch *b = sh->free_batches;
	int rc;

	if (b != NULL)
		sh->free_batches = b->next_free;
	else if ((b = malloc(sizeof(*b))) == NULL)
		return -EAGAIN;
	p->next_out = NULL;
	b->head = p;
	b->n = 1;
	b->shard = p->shard;
	rc = cr_call(kv.shard_lcore[p->shard], &b->call, lbatch_run, b, batch_done, b);
	if (rc == 0)
		return 0;
	batch_put(sh, b);
	if (rc == -EAGAIN)
		return -EAGAIN;
	/* That lcore is offline: it has no subscriber, and counts nothing. */
	rb_reset(&p->out);
	rb_errorf(&p->out, "ERR the lcore of this part is offline (%s)", cr_strerror(rc));
	return 1;
}

static void
lparts_flush(struct kv_shard *sh)
{
	struct kpart *p;

	while ((p = sh->lparts_head) != NULL) {
		struct kpart *next = p->next_out;
		int rc = lpart_send(sh, p);

		if (rc == -EAGAIN) {
			outq_arm(sh);
			return;
		}
		sh->lparts_head = next;
		if (next == NULL)
			sh->lparts_tail = &sh->lparts_head;
		if (rc == 1)
			part_answered(p); /* may free p */
	}
}

/* @return true if its answer is in at once (it ran here, or its lcore is offline): the
 * caller answers it. */
static bool
lpart_launch(struct kv_shard *sh, struct kpart *p)
{
	int rc = -EAGAIN;

	if (kv.shard_lcore[p->shard] == cr_lcore_id()) {
		lpart_exec(p);
		return true;
	}
	if (sh->lparts_head == NULL)
		rc = lpart_send(sh, p);
	if (rc == -EAGAIN) { /* behind what was refused before, in order */
		p->next_out = NULL;
		*sh->lparts_tail = p;
		sh->lparts_tail = &p->next_out;
		outq_arm(sh);
	}
	return rc == 1;
}

static void
outq_clear(struct kv_shard *sh, unsigned t)
{
	sh->outq_head[t] = NULL;
	sh->outq_tail[t] = &sh->outq_head[t];
	sh->outq_n[t] = 0;
}

static void
outq_send(struct kv_shard *sh, unsigned t)
{
	struct kbatch *b = sh->free_batches;
	struct kpart *p, *next;
	unsigned to;
	int rc;

	if (kv_route(t, &to) != 0)
		return; /* the shard is moving: its RELEASE sends the queue (shardmove.c) */
	if (to == cr_lcore_id()) {
		/* It moved here while these waited: run them as its batch would have run,
		 * all of them, then answer them all (an answer may issue more parts). */
		p = sh->outq_head[t];
		outq_clear(sh, t);
		parts_run(t, p);
		parts_done(sh, p);
		return;
	}
	if (b != NULL) {
		sh->free_batches = b->next_free;
	} else {
		b = malloc(sizeof(*b));
		if (b == NULL) {
			outq_arm(sh); /* try again later */
			return;
		}
	}
	b->head = sh->outq_head[t];
	b->n = sh->outq_n[t];
	b->shard = t;
	rc = cr_call(to, &b->call, batch_run, b, batch_done, b);
	if (rc == -EAGAIN) {
		batch_put(sh, b);
		outq_arm(sh);
		return;
	}
	outq_clear(sh, t);
	if (rc == 0) {
		cr_telemetry_add(kv.tel_remote, b->n);
		return;
	}
	/* The shard's lcore is gone (a shutdown: owners stay while they own): every part
	 * fails. */
	batch_put(sh, b);
	for (p = b->head; p != NULL; p = next) {
		next = p->next_out;
		rb_reset(&p->out);
		rb_errorf(&p->out, "ERR the shard of this key is unavailable (%s)",
			  cr_strerror(rc));
		part_answered(p);
	}
}

void
kv_outq_flush(struct kv_shard *sh)
{
	unsigned t;

	lparts_flush(sh);
	for (t = 0; t < kv.nshards; t++)
		if (sh->outq_head[t] != NULL)
			outq_send(sh, t);
}

static void
outq_task(void *arg)
{
	struct kv_shard *sh = arg;

	sh->outq_armed = false;
	cr_timer_stop(&sh->outq_timer);
	kv_outq_flush(sh);
}

static void
outq_push(struct kv_shard *sh, struct kpart *p)
{
	unsigned t = p->shard;

	p->next_out = NULL;
	*sh->outq_tail[t] = p;
	sh->outq_tail[t] = &p->next_out;
	if (++sh->outq_n[t] >= BATCH_MAX)
		outq_send(sh, t);
}

static void
prepare(struct kv_shard *sh, struct kpart *p)
{
	p->epoch = sh->oepoch;
	p->origin = sh->index;
	p->state = 0;
	p->ps_seq = 0;
}

/* Does a part for shard @p s run here now: this lcore owns it, and none of its parts
 * queued before waits? */
static bool
runs_here(struct kv_shard *sh, unsigned s)
{
	return kv_route_here(s) && sh->outq_head[s] == NULL;
}

/* Run @p p on its shard, owned here. */
static bool
part_run_here(struct kpart *p)
{
	struct kv_shard *ts = kv_shard_at(p->shard);
	struct kv_mem *prev = kv_mem_swap(&ts->mem);
	bool answered = part_run(ts, p);

	kv_mem_swap(prev);
	return answered;
}

void
kv_part_send(struct kv_shard *sh, struct kpart *p)
{
	prepare(sh, p);
	if (lcore_scoped(p->kr)) {
		if (lpart_launch(sh, p))
			part_answered(p);
		return;
	}
	if (!runs_here(sh, p->shard)) {
		outq_push(sh, p);
		outq_arm(sh); /* at the end of this turn, with whatever else is queued */
		return;
	}
	if (part_run_here(p)) {
		part_answered(p);
	} else {
		part_took(p);
		part_parked(sh, p);
	}
}

void
kreq_launch_one(struct kreq *kr, unsigned s)
{
	kreq_set_parts(kr, 1); /* one part is inline: it cannot fail */
	kr->one.shard = s;
	kreq_part_args(&kr->one, kr->argc, kr->argv);
	kreq_launch(kr);
}

void
kreq_launch(struct kreq *kr)
{
	struct kconn *kc = kr->kc;
	struct kv_shard *sh = kc->sh;
	uint64_t ps_seq = 0;

	/* A PUBLISH: one number for all its parts, so that every lcore knows it as the same
	 * message (a subscriber's move, psmove.c). */
	if (kr->cmd != NULL && kr->cmd->fn == cmd_publish && kr->nparts > 0)
		ps_seq = kr->sent == 0 ? kv_ps_next_seq() : kr->parts[0].ps_seq;
	while (kr->sent < kr->nparts) {
		struct kpart *p = &kr->parts[kr->sent++];
		bool answered;

		prepare(sh, p);
		p->ps_seq = ps_seq;
		p->ps_from = cr_lcore_id();
		if (kr->hop)
			p->kind = KP_TX_HOP; /* EXEC holds the locks */
		if (p->on_answer == NULL)
			p->on_answer = kreq_part_done;
		if (lcore_scoped(kr)) {
			if (lpart_launch(sh, p)) {
				part_took(p);
				kr->left--;
			}
			continue;
		}
		if (!runs_here(sh, p->shard)) {
			outq_push(sh, p);
			continue;
		}
		answered = part_run_here(p);
		part_took(p);
		if (answered)
			kr->left--; /* counted here, completed below */
		else
			part_parked(sh, p);
	}
	if (kr->left == 0)
		kreq_complete(kr); /* may free kr */
	else if (!kc->in_input)
		outq_arm(sh); /* kv_process_input() sends what it queued itself */
}

void
kv__move_flush(unsigned s, unsigned to)
{
	struct kv_shard *sh = kv_here();

	(void)to; /* the view says where: the protocol set it before calling */
	if (sh->outq_head[s] != NULL)
		outq_send(sh, s);
	kv_tx_release_kick(sh); /* after the parts: releases come after what they held */
}

void
kv_xshard_init(struct kv_shard *sh)
{
	unsigned t;

	for (t = 0; t < CR_MAX_LCORES; t++)
		sh->outq_tail[t] = &sh->outq_head[t];
	sh->lparts_head = NULL;
	sh->lparts_tail = &sh->lparts_head;
	cr_timer_init(&sh->outq_timer, outq_timer, sh);
}

void
kv_xshard_fini(struct kv_shard *sh)
{
	cr_timer_stop(&sh->outq_timer);
	while (sh->free_batches != NULL) {
		struct kbatch *b = sh->free_batches;

		sh->free_batches = b->next_free;
		free(b);
	}
}
