/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Messages between lcores: cr_send with per-target buffering, the mailbox drain, the wake
 * protocol (rule 8), and the carriers behind cr_call and cr_for_each_lcore.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "reactor_internal.h"

CR_LOG_COMPONENT(log_msg, "lib.reactor.msg");

/*
 * Wake @p target if it is parked. The caller has just published messages (or a stop
 * request, or a dropped hold); the seq_cst fence orders that publication before our read
 * of `parked`, and pairs with the fence in cr__park_prepare() (Dekker): either the target
 * sees our work on its re-check, or we see its flag and wake it. The CAS claims the wake
 * so one sleep gets one signal.
 *
 * Two ways to wake. @p from, an lcore that holds the target's mailbox admission (and keeps
 * it until its next submit: cr__release_outboxes), rides on its own ring (io_uring's
 * MSG_RING): the target cannot close that ring before the wake is submitted. Everyone
 * else (@p from NULL: foreign threads, lease releases, lifecycle requests) writes the
 * target's wake channel, which lives as long as the runtime: a wake that reaches an
 * incarnation after the one it aimed at is a spurious wake there, never a write to a
 * closed or reused descriptor.
 */
void
cr__wake_if_parked(struct cr_lcore *from, struct cr_lcore *target)
{
	int one = 1;
	struct cr_backend *be;

	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&target->parked, memory_order_relaxed) != 1)
		return;
	if (!atomic_compare_exchange_strong_explicit(&target->parked, &one, 0,
						     memory_order_acq_rel, memory_order_relaxed))
		return;
	if (from != NULL) {
		/* acquire: pairs with the release store of `be` in cr__lcore_backend_start();
		 * NULL only before the target's first start (its mailbox opens earlier). */
		be = atomic_load_explicit(&target->be, memory_order_acquire);
		if (be != NULL) {
			from->ops->wake_from_lcore(from->be_own, be, &target->wake);
			from->wake_queued = true;
			CR_STAT_ADD(from, wakes_sent, 1);
			return;
		}
	}
	cr__rt.ops->wake_from_foreign(&target->wake);
}

static void
outbox_flush(struct cr_lcore *lc, unsigned t)
{
	struct cr__outbox *ob = &lc->out[t];
	struct cr_lcore *target = &cr__lcores[t];
	unsigned n;

	if (ob->n == 0)
		return;
	n = cr_mailbox_put(&target->mbox, lc->id, ob->msgs, ob->n);
	if (n == 0)
		return;
	if (n < ob->n)
		memmove(ob->msgs, ob->msgs + n, (ob->n - n) * sizeof(ob->msgs[0]));
	ob->n -= n;
	CR_STAT_ADD(lc, msgs_out, n);
	/* The hold stays until cr__release_outboxes(), after the submit our wake rides on. */
	cr__wake_if_parked(lc, target);
}

void
cr__flush_outboxes(struct cr_lcore *lc)
{
	unsigned i;

	for (i = 0; i < lc->n_dirty; i++)
		outbox_flush(lc, lc->dirty[i]);
}

/*
 * End of turn, after the submit: drop the admission of every target we no longer buffer
 * for. Until here it kept the target from closing its ring under a wake of ours that was
 * not yet submitted; targets whose ring was full stay held and listed.
 */
void
cr__release_outboxes(struct cr_lcore *lc)
{
	unsigned i, kept = 0;

	for (i = 0; i < lc->n_dirty; i++) {
		unsigned t = lc->dirty[i];
		struct cr__outbox *ob = &lc->out[t];

		if (ob->n != 0) {
			lc->dirty[kept++] = (uint16_t)t;
			continue;
		}
		ob->listed = false;
		if (ob->held) {
			/* release inside: our enqueues are visible before the hold drops */
			cr_mailbox_unadmit(&cr__lcores[t].mbox);
			ob->held = false;
		}
	}
	lc->n_dirty = kept;
}

/* Hold @p t's admission until the end of this turn (cr__release_outboxes). */
static int
outbox_hold(struct cr_lcore *lc, unsigned t)
{
	struct cr__outbox *ob = &lc->out[t];
	int rc;

	if (!ob->held) {
		rc = cr_mailbox_admit(&cr__lcores[t].mbox);
		if (rc != 0)
			return rc;
		ob->held = true;
	}
	/* Once per target, however often a full outbox was flushed this turn. */
	if (!ob->listed) {
		ob->listed = true;
		lc->dirty[lc->n_dirty++] = (uint16_t)t;
	}
	return 0;
}

static int
send_from_lcore(struct cr_lcore *lc, unsigned t, cr_msg_fn fn, void *arg)
{
	struct cr__outbox *ob = &lc->out[t];
	int rc;

	if (lc->phase == LP_GONE)
		return -ESHUTDOWN;
	if (ob->n == CR_SEND_FLUSH) {
		outbox_flush(lc, t);
		if (ob->n == CR_SEND_FLUSH)
			return -EAGAIN;
	}
	rc = outbox_hold(lc, t);
	if (rc != 0)
		return rc;
	ob->msgs[ob->n].fn = fn;
	ob->msgs[ob->n].arg = arg;
	ob->n++;
	if (ob->n == CR_SEND_FLUSH)
		outbox_flush(lc, t);
	return 0;
}

static int
send_foreign(struct cr_lcore *target, cr_msg_fn fn, void *arg)
{
	struct cr_msg m = {fn, arg};
	unsigned n;
	int rc;

	rc = cr_mailbox_admit(&target->mbox);
	if (rc != 0)
		return rc;
	n = cr_mailbox_put_foreign(&target->mbox, &m, 1);
	/*
	 * Wake while still holding admission: the target cannot finish stopping, and so its
	 * backend cannot be freed, before our wake has touched it.
	 */
	if (n != 0)
		cr__wake_if_parked(NULL, target);
	cr_mailbox_unadmit(&target->mbox);
	return n != 0 ? 0 : -EAGAIN;
}

/* cr_send() when its inline append does not apply (cr_reactor.h). */
int
cr__send(unsigned lcore, cr_msg_fn fn, void *arg)
{
	struct cr_lcore *target = cr__lcore(lcore);

	if (target == NULL || fn == NULL)
		return -EINVAL;
	if (cr__cur == NULL)
		return send_foreign(target, fn, arg);
	return send_from_lcore(cr__cur, lcore, fn, arg);
}

int
cr_send_burst(unsigned lcore, const struct cr_msg *msgs, unsigned n)
{
	struct cr_lcore *target = cr__lcore(lcore), *lc = cr__cur;
	unsigned put, i;
	int rc;

	if (target == NULL || n == 0)
		return -EINVAL;
	for (i = 0; i < n; i++)
		if (msgs[i].fn == NULL)
			return -EINVAL;
	if (lc == NULL) {
		rc = cr_mailbox_admit(&target->mbox);
		if (rc != 0)
			return rc;
		put = cr_mailbox_put_foreign(&target->mbox, msgs, n);
		/* before unadmit: see send_foreign() */
		if (put != 0)
			cr__wake_if_parked(NULL, target);
		cr_mailbox_unadmit(&target->mbox);
		return put != 0 ? (int)put : -EAGAIN;
	}
	if (lc->phase == LP_GONE)
		return -ESHUTDOWN;
	outbox_flush(lc, lcore);
	if (lc->out[lcore].n != 0)
		return -EAGAIN; /* the ring is full behind what we had buffered */
	/* The outbox's hold covers the burst and the wake, up to the end of the turn. */
	rc = outbox_hold(lc, lcore);
	if (rc != 0)
		return rc;
	put = cr_mailbox_put(&target->mbox, lc->id, msgs, n);
	if (put == 0)
		return -EAGAIN;
	CR_STAT_ADD(lc, msgs_out, put);
	cr__wake_if_parked(lc, target);
	return (int)put;
}

unsigned
cr__run_mailbox(struct cr_lcore *lc)
{
	struct cr_msg msgs[CR_BATCH];
	unsigned n, i;

	n = cr_mailbox_drain(&lc->mbox, msgs, CR_BATCH);
	for (i = 0; i < n; i++)
		msgs[i].fn(msgs[i].arg);
	if (n != 0)
		CR_STAT_ADD(lc, msgs_in, n);
	return n;
}

/* ---- carriers: cr_call and cr_for_each_lcore ---- */

static void call_reply(void *arg);
static void each_run(void *arg);

static void
backlog_push(struct cr_lcore *lc, struct cr_call *c)
{
	c->next = NULL;
	*lc->backlog_tail = c;
	lc->backlog_tail = &c->next;
}

/*
 * Send the carrier's next hop. A reply to the origin cannot meet a closed mailbox (the
 * origin keeps it open while calls_out > 0); a full one parks the carrier on our backlog,
 * retried every turn, so an accepted call is never dropped.
 */
static int
hop_send(struct cr_lcore *lc, struct cr_call *c, unsigned target, cr_msg_fn fn)
{
	int rc;

	c->hop_target = target;
	c->hop_fn = fn;
	rc = send_from_lcore(lc, target, fn, c);
	if (rc == -EAGAIN) {
		backlog_push(lc, c);
		return 0;
	}
	return rc;
}

static void
reply_to_origin(struct cr_lcore *lc, struct cr_call *c)
{
	int rc = hop_send(lc, c, c->origin, call_reply);

	if (rc != 0) {
		/* Broken invariant: the origin closed with a call out. Never drop silently. */
		CR_LOG(log_msg, ERR, "reply to lcore %u failed: %s", c->origin, cr_strerror(rc));
		abort();
	}
}

/* Visit the next RUNNING lcore after c->cursor, or finish on the origin. */
static void
each_advance(struct cr_lcore *lc, struct cr_call *c)
{
	unsigned next;

	for (next = cr_lcore_next(c->cursor); next != CR_LCORE_NONE; next = cr_lcore_next(next)) {
		c->cursor = next;
		if (hop_send(lc, c, next, each_run) == 0)
			return;
		/* -ESHUTDOWN: that lcore is stopping; skip it. */
	}
	reply_to_origin(lc, c);
}

void
cr__retry_backlog(struct cr_lcore *lc)
{
	struct cr_call *c = lc->backlog, *next;
	int rc;

	lc->backlog = NULL;
	lc->backlog_tail = &lc->backlog;
	for (; c != NULL; c = next) {
		next = c->next;
		rc = send_from_lcore(lc, c->hop_target, c->hop_fn, c);
		if (rc == 0)
			continue;
		if (rc == -EAGAIN) {
			backlog_push(lc, c);
		} else if (c->hop_fn == each_run) {
			each_advance(lc, c);
		} else {
			CR_LOG(log_msg, ERR, "reply to lcore %u failed: %s", c->hop_target,
			       cr_strerror(rc));
			abort();
		}
	}
}

static void
call_run(void *arg)
{
	struct cr_call *c = arg;

	c->fn(c->arg);
	reply_to_origin(cr__cur, c);
}

static void
call_reply(void *arg)
{
	struct cr_call *c = arg;
	struct cr_lcore *lc = cr__cur;

	lc->calls_out--;
	c->done(c->done_arg);
}

static int
call_admissible(struct cr_lcore *lc)
{
	if (lc == NULL)
		return -EPERM;
	/* A reply could not reach us once our mailbox is closed. */
	if (lc->phase == LP_GONE)
		return -ESHUTDOWN;
	if (!cr_mailbox_is_open(&lc->mbox))
		return -ESHUTDOWN;
	return 0;
}

int
cr_call(unsigned lcore, struct cr_call *c, cr_msg_fn fn, void *arg, cr_msg_fn done,
	void *done_arg)
{
	struct cr_lcore *lc = cr__cur;
	int rc;

	rc = call_admissible(lc);
	if (rc != 0)
		return rc;
	if (fn == NULL || done == NULL || cr__lcore(lcore) == NULL)
		return -EINVAL;
	c->origin = lc->id;
	c->fn = fn;
	c->arg = arg;
	c->done = done;
	c->done_arg = done_arg;
	rc = send_from_lcore(lc, lcore, call_run, c);
	if (rc == 0)
		lc->calls_out++;
	return rc;
}

static void
each_run(void *arg)
{
	struct cr_call *c = arg;

	c->fn(c->arg);
	each_advance(cr__cur, c);
}

int
cr_for_each_lcore(struct cr_call *c, cr_msg_fn fn, void *arg, cr_msg_fn done, void *done_arg)
{
	struct cr_lcore *lc = cr__cur;
	int rc;

	rc = call_admissible(lc);
	if (rc != 0)
		return rc;
	if (fn == NULL || done == NULL)
		return -EINVAL;
	c->origin = lc->id;
	c->fn = fn;
	c->arg = arg;
	c->done = done;
	c->done_arg = done_arg;
	c->cursor = CR_LCORE_NONE;
	lc->calls_out++;
	each_advance(lc, c);
	return 0;
}
