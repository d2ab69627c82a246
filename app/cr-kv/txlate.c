/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Late answers (see txn.h): what a shard answers after the call that brought the request
 * has returned (a part that waited behind locks, a blocked client served or cancelled,
 * word that a watched key was made), queued in order and sent to each origin as
 * messages; a full mailbox keeps the rest for the next turn. The origin drops an answer
 * meant for an earlier incarnation of itself (its epoch), releasing any locks it carries.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cr_log.h"
#include "kv.h"

CR_LOG_COMPONENT(txlate_log, "app.kv")

/* An answer for a part that waited, or (notify) word for a blocked client's origin that a
 * key it watches was made (plain malloc: it crosses lcores). */
struct kv_late {
	struct kv_late *next;
	unsigned to, from;
	struct kpart *token;
	uint64_t epoch;
	void *hold;
	uint64_t hold_epoch;
	struct kv_release *rel; /* with a hold: its release, should the origin be gone */
	bool notify;
	uint64_t id;	 /* notify: the blocked request's (bpop.h) */
	uint64_t run_ns; /* how long the part ran on its shard (slowlog.h) */
	size_t len;
	char reply[];
};

static void late_flush(struct kv_shard *sh, bool stopping);

static void
late_free(struct kv_late *m)
{
	free(m->rel);
	free(m);
}

static void
late_recv(void *arg)
{
	struct kv_late *m = arg;
	struct kv_shard *sh = kv_here();
	struct kpart *p = m->token;

	if (m->epoch != sh->oepoch) {
		/* Meant for an earlier incarnation of this lcore: its part is gone. */
		kv_tx_release(m->from, m->hold, m->hold_epoch, &m->rel);
		late_free(m);
		return;
	}
	if (m->notify) {
		kv_bpop_notified(sh, m->from, m->id);
		late_free(m);
		return;
	}
	rb_reset(&p->out);
	rb_raw(&p->out, m->reply, m->len);
	if (p->kr != NULL)
		p->kr->run_ns += m->run_ns;
	if (p->kind == KP_TX_LOCK) {
		p->lock->hold = m->hold;
		p->lock->hold_epoch = m->hold_epoch;
	}
	late_free(m); /* the lock has its own release, made with the request */
	if (p->state & KP_AWAITING) {
		p->state = 0;
		if (!p->nolease)
			kv_tx_await(sh, -1);
		p->on_answer(p);
	} else {
		p->state |= KP_EARLY; /* the batch's own completion answers it */
	}
}

static void late_task(void *arg);

static void
late_timer(struct cr_timer *t, void *arg)
{
	(void)t;
	late_task(arg);
}

static void
late_arm(struct kv_shard *sh)
{
	if (sh->tx.late_armed)
		return;
	sh->tx.late_armed = true;
	if (cr_defer(late_task, sh) != 0)
		cr_timer_start(&sh->tx.late_timer, 1000 * 1000ull);
}

static void
late_task(void *arg)
{
	struct kv_shard *sh = arg;
	struct kv_mem *prev;

	if (!kv_shard_owned(sh))
		return; /* deferred before the shard moved away: its new owner sends them */
	prev = kv_mem_swap(&sh->mem);
	sh->tx.late_armed = false;
	cr_timer_stop(&sh->tx.late_timer);
	late_flush(sh, false);
	kv_mem_swap(prev);
}

/* Send the queued answers, in order; a full mailbox keeps the rest for later. Answers
 * to this lcore's own parts go the same way (deferred: never from inside a release),
 * except when it stops: its requests are freed by then, and those answers with them. */
static void
late_flush(struct kv_shard *sh, bool stopping)
{
	struct kv_late *m;

	while ((m = sh->tx.late_head) != NULL) {
		struct kv_late *next = m->next;
		bool local = m->to == kv_here()->index; /* the origin is this lcore */
		int rc = 0;

		/* Read everything of m before it is sent: once accepted, the origin owns it
		 * and may free it at once. */
		if (!local) {
			rc = cr_send(kv.shard_lcore[m->to], late_recv, m);
			if (rc == -EAGAIN) {
				late_arm(sh);
				return;
			}
		}
		sh->tx.late_head = next;
		if (next == NULL)
			sh->tx.late_tail = &sh->tx.late_head;
		if (local && !stopping) {
			late_recv(m);
		} else if (local || rc != 0) {
			/* The origin is gone: nobody will release what was granted for it. */
			if (m->hold != NULL)
				kv_tx_release_here(sh, m->hold);
			late_free(m);
		}
	}
}

static struct kv_late *
late_new(struct kv_shard *sh, unsigned to, struct kpart *token, uint64_t epoch, const char *reply,
	 size_t len)
{
	struct kv_late *m = malloc(sizeof(*m) + len);

	if (m == NULL)
		return NULL;
	memset(m, 0, sizeof(*m));
	m->to = to;
	m->from = sh->index;
	m->token = token;
	m->epoch = epoch;
	m->hold_epoch = sh->tx.epoch;
	m->len = len;
	if (len != 0)
		memcpy(m->reply, reply, len);
	return m;
}

static void
late_queue(struct kv_shard *sh, struct kv_late *m)
{
	*sh->tx.late_tail = m;
	sh->tx.late_tail = &m->next;
	late_arm(sh);
}

int
kv_tx_late_ran(struct kv_shard *sh, unsigned to, struct kpart *token, uint64_t epoch, void *hold,
	       const char *reply, size_t len, uint64_t run_ns)
{
	struct kv_late *m = late_new(sh, to, token, epoch, reply, len);

	if (m == NULL)
		return -ENOMEM;
	if (hold != NULL && (m->rel = kv_tx_release_new()) == NULL) {
		free(m);
		return -ENOMEM;
	}
	m->hold = hold;
	m->run_ns = run_ns;
	late_queue(sh, m);
	return 0;
}

int
kv_tx_late(struct kv_shard *sh, unsigned to, struct kpart *token, uint64_t epoch, void *hold,
	   const char *reply, size_t len)
{
	return kv_tx_late_ran(sh, to, token, epoch, hold, reply, len, 0);
}

void
kv_tx_answer_ran(struct kv_shard *sh, unsigned origin, struct kpart *token, uint64_t epoch,
		 const char *reply, size_t len, uint64_t run_ns)
{
	struct kv_late *m = late_new(sh, origin, token, epoch, reply, len);

	if (m == NULL) {
		CR_LOG(txlate_log, ERR, "out of memory answering a blocked client; it waits");
		return;
	}
	m->run_ns = run_ns;
	late_queue(sh, m);
}

void
kv_tx_answer(struct kv_shard *sh, unsigned origin, struct kpart *token, uint64_t epoch,
	     const char *reply, size_t len)
{
	kv_tx_answer_ran(sh, origin, token, epoch, reply, len, 0);
}

void
kv_tx_notify(struct kv_shard *sh, unsigned origin, uint64_t epoch, uint64_t id)
{
	struct kv_late *m = late_new(sh, origin, NULL, epoch, NULL, 0);

	if (m == NULL) {
		CR_LOG(txlate_log, ERR, "out of memory waking a blocked client; it waits");
		return;
	}
	m->notify = true;
	m->id = id;
	late_queue(sh, m);
}

void
kv_tx_late_init(struct kv_shard *sh)
{
	sh->tx.late_head = NULL;
	sh->tx.late_tail = &sh->tx.late_head;
	sh->tx.late_armed = false;
	cr_timer_init(&sh->tx.late_timer, late_timer, sh);
}

void
kv_tx_late_flush(struct kv_shard *sh)
{
	cr_timer_stop(&sh->tx.late_timer);
	sh->tx.late_armed = false;
	late_flush(sh, true);
}

void
kv_tx_late_fini(struct kv_shard *sh)
{
	kv_tx_late_flush(sh);
	while (sh->tx.late_head != NULL) {
		struct kv_late *m = sh->tx.late_head;

		sh->tx.late_head = m->next;
		late_free(m);
	}
	sh->tx.late_tail = &sh->tx.late_head;
}

void
kv_tx_late_give(struct kv_shard *sh)
{
	/* A late_task() already deferred here finds the shard gone and does nothing. */
	cr_timer_stop(&sh->tx.late_timer);
	sh->tx.late_armed = false;
}

void
kv_tx_late_adopt(struct kv_shard *sh)
{
	cr_timer_init(&sh->tx.late_timer, late_timer, sh);
	if (sh->tx.late_head != NULL)
		late_arm(sh);
}
