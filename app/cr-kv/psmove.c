/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A subscriber moves to another lcore (a retire) and loses no message, gets none twice,
 * and gets each publisher's in order.
 *
 * The difficulty: every lcore delivers each PUBLISH to its own subscribers, at its own
 * pace. When the client leaves lcore A for lcore B, B may be behind A on one publisher's
 * messages and ahead on another's. So the two agree on a cut per publishing lcore, by
 * PUBLISH numbers (pubsub.c): the messages up to the cut are A's to deliver, the rest B's.
 *
 *   A, on_move_out   the client's subscriptions stay as stubs (struct ps_stubs): what A
 *                    delivers to them is kept, with its number; the names go with the
 *                    client (struct ps_out), and what A had delivered of each lcore.
 *   B, on_move_in    the client is subscribed on B; the cut, per lcore, is the later of
 *                    what B has delivered and what A had delivered to the client. From
 *                    now on B drops what it delivers up to the cut and holds what comes
 *                    after (the connection parses nothing meanwhile, so its replies stay
 *                    behind the messages). The cut goes to A.
 *   A, cut           A keeps what it delivered up to the cut, drops the rest (B has it),
 *                    and once it has delivered up to the cut of every lcore (the
 *                    messages are on their way: each was sent to A and B alike), drops
 *                    the stubs and sends what it kept to B.
 *   B, done          once B too has delivered up to the cut, the client gets what A
 *                    forwarded, then the hold, and parses again.
 *
 * Per publisher that is its messages up to the cut in A's order, then the rest in B's:
 * in order, each once. A's lcore stays while it has stubs (its lease, pubsub.c). Each
 * lcore keeps its own side (found by id: a message that finds it gone is just freed);
 * the messages between them are freed by their receiver, or by the sender whose send
 * was refused. Should A stop without sending what it kept (a forced stop), B gives up
 * waiting after PS_GIVE_UP_NS and says so.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cr_log.h"
#include "cr_telemetry.h"
#include "kv.h"
#include "psint.h"

CR_LOG_COMPONENT(psm_log, "app.kv")

#define PS_RETRY_NS   (1000 * 1000ull)
#define PS_GIVE_UP_NS (10 * 1000 * 1000 * 1000ull)
/* The old lcore waits for the cut and the messages up to it longer than the new one waits
 * for what it forwards (PS_GIVE_UP_NS, the cut's re-sends included): the new one gives up
 * first. So a lost word bounds a retire's wait, and nothing it waits for comes after. */
#define PS_STUBS_GIVE_UP_NS (2 * PS_GIVE_UP_NS)

/* What travels with the client: what to subscribe to, and whose stubs forward. */
struct ps_out {
	unsigned from;
	uint64_t stubs; /* the old lcore's id of its stubs */
	/* What the old lcore had delivered to it, per publishing lcore: the new one may be
	 * behind, and must not deliver those again. */
	uint64_t seen[CR_MAX_LCORES];
	size_t len;
	char names[]; /* [pattern byte, u32 length, bytes]... */
};

/* B -> A */
struct ps_cut_msg {
	uint64_t stubs, arrival;
	unsigned to;
	uint64_t cut[CR_MAX_LCORES];
};

/* A -> B */
struct ps_done_msg {
	uint64_t arrival;
	unsigned from;
	struct rbuf fwd;
};

/* Ids of moves, per lcore across its incarnations: a message for an earlier one finds
 * nothing. Written by their lcore only. */
static uint64_t ps_ids[CR_MAX_LCORES];

static uint64_t
next_id(void)
{
	return ++ps_ids[cr_lcore_id()];
}

/* ---- the old lcore ---- */

static void stubs_timer(struct cr_timer *t, void *arg);

/* New stubs on this lcore's list, holding its lease until they go (stubs_release()). */
static struct ps_stubs *
stubs_new(struct kv_psshard *ps)
{
	struct ps_stubs *st = calloc(1, sizeof(*st));

	if (st == NULL)
		return NULL;
	st->id = next_id();
	rb_init(&st->fwd, NULL, 0);
	cr_timer_init(&st->timer, stubs_timer, st);
	st->deadline = cr_now_ns() + PS_STUBS_GIVE_UP_NS;
	cr_timer_start(&st->timer, PS_STUBS_GIVE_UP_NS);
	st->next = ps->moves;
	ps->moves = st;
	kv_ps_hold(ps, 1);
	return st;
}

int
kv_ps_move_out(struct kconn *kc)
{
	struct kv_psshard *ps = kc->sh->ps;
	struct kv_psclient *pc = kc->ps;
	struct ps_stubs *st;
	struct ps_out *o;
	struct ps_sub *s;
	size_t len = 0;
	char *w;

	if (pc == NULL)
		return 0;
	if (pc->subs == NULL) {
		kv_ps_gone(kc); /* it unsubscribed from everything: nothing to carry */
		return 0;
	}
	for (s = pc->subs; s != NULL; s = s->cnext)
		len += 5 + s->ch->len;
	o = malloc(sizeof(*o) + len);
	st = o != NULL ? stubs_new(ps) : NULL;
	if (st == NULL) {
		free(o);
		kv_ps_gone(kc);
		return -ENOMEM;
	}
	o->from = cr_lcore_id();
	o->len = len;
	memcpy(o->seen, ps->seen, sizeof(o->seen));
	/* Oldest first (the list is newest first): subscribed again in that order, the
	 * client's list is as it was (UNSUBSCRIBE without arguments lists it). */
	for (w = o->names + len, s = pc->subs; s != NULL; s = s->cnext) {
		uint32_t n = (uint32_t)s->ch->len;

		w -= 5 + n;
		w[0] = (char)s->ch->pattern;
		memcpy(w + 1, &n, 4);
		memcpy(w + 5, s->ch->name, n);
		s->kc = NULL;
		s->fwd = st;
	}
	o->stubs = st->id;
	st->subs = pc;
	kc->ps = NULL;
	kc->ps_out = o;
	return 0;
}

bool
kv_psm_forward(struct ps_stubs *st, const struct rbuf *f)
{
	struct ps_tag t;

	kv_ps_current(&t.from, &t.seq);
	if (st->cut_known && t.seq > st->cut[t.from])
		return false; /* past the cut: the new lcore delivers it */
	t.len = (uint32_t)f->len;
	rb_raw(&st->fwd, &t, sizeof(t));
	rb_raw(&st->fwd, f->p, f->len);
	st->nfwd++;
	return true;
}

/* Drop the stubs' subscriptions: nothing more is forwarded. */
static void
stubs_drop_subs(struct kv_psshard *ps, struct ps_stubs *st)
{
	struct ps_sub *s, *n;

	if (st->subs == NULL)
		return;
	for (s = st->subs->subs; s != NULL; s = n) {
		n = s->cnext;
		kv_ps_unlink(ps, s);
	}
	free(st->subs);
	st->subs = NULL;
}

/* The stubs go, and their hold on the lease with them. */
static void
stubs_release(struct kv_psshard *ps, struct ps_stubs *st)
{
	struct ps_stubs **pp = &ps->moves;
	struct ps_done_msg *d = st->done;

	while (*pp != NULL && *pp != st)
		pp = &(*pp)->next;
	if (*pp != NULL)
		*pp = st->next;
	stubs_drop_subs(ps, st);
	if (d != NULL) {
		rb_fini(&d->fwd);
		free(d);
	}
	if (cr_timer_armed(&st->timer))
		cr_timer_stop(&st->timer);
	rb_fini(&st->fwd);
	free(st);
	kv_ps_hold(ps, -1);
}

static void done_msg(void *arg);

/* Send what was kept to the new lcore; a full mailbox: again shortly, until the deadline.
 * The stubs (and the lease) stay until it is accepted. */
static void
done_send(struct kv_psshard *ps, struct ps_stubs *st)
{
	int rc = cr_send(st->to, done_msg, st->done);

	if (rc == -EAGAIN && !ps->stopping && cr_now_ns() < st->deadline) {
		cr_timer_start(&st->timer, PS_RETRY_NS);
		return;
	}
	if (rc == 0)
		st->done = NULL; /* the new lcore's now */
	else
		CR_LOG(psm_log, WARNING,
		       "a moved subscriber's messages could not reach lcore %u: %s", st->to,
		       cr_strerror(rc));
	stubs_release(ps, st);
}

/* Everything up to the cut was delivered here (or it gives up): the subscriptions go,
 * what they kept goes. */
static void
stubs_finish(struct kv_psshard *ps, struct ps_stubs *st)
{
	struct ps_done_msg *d = calloc(1, sizeof(*d));

	stubs_drop_subs(ps, st);
	if (d == NULL) {
		CR_LOG(psm_log, ERR, "no memory to forward a moved subscriber's messages");
		stubs_release(ps, st);
		return;
	}
	d->arrival = st->arrival;
	d->from = cr_lcore_id();
	if (st->nfwd != 0)
		cr_telemetry_add(kv.tel_psfwd, st->nfwd);
	d->fwd = st->fwd; /* taken over: the new lcore frees it */
	rb_init(&st->fwd, NULL, 0);
	st->done = d;
	st->deadline = cr_now_ns() + PS_GIVE_UP_NS;
	done_send(ps, st);
}

static void
stubs_timer(struct cr_timer *t, void *arg)
{
	struct ps_stubs *st = arg;
	struct kv_psshard *ps = kv_here()->ps;

	(void)t;
	if (st->done != NULL) {
		done_send(ps, st);
		return;
	}
	if (st->cut_known) {
		CR_LOG(psm_log, WARNING,
		       "lcore %u: a moved subscriber's messages up to its cut did not all come "
		       "within %llu s: some may be lost",
		       cr_lcore_id(), PS_STUBS_GIVE_UP_NS / 1000000000ull);
		stubs_finish(ps, st);
		return;
	}
	CR_LOG(psm_log, WARNING,
	       "lcore %u: no word from where a subscriber moved within %llu s: its stubs go",
	       cr_lcore_id(), PS_STUBS_GIVE_UP_NS / 1000000000ull);
	stubs_release(ps, st);
}

static bool
stubs_done(const struct kv_psshard *ps, const struct ps_stubs *st)
{
	unsigned i;

	for (i = 0; i < CR_MAX_LCORES; i++)
		if (ps->seen[i] < st->cut[i])
			return false;
	return true;
}

void
kv_psm_check(struct kv_psshard *ps)
{
	struct ps_stubs *st, *next;

	for (st = ps->moves; st != NULL; st = next) {
		next = st->next;
		if (st->cut_known && st->subs != NULL && stubs_done(ps, st))
			stubs_finish(ps, st);
	}
}

/* Keep only what is up to the cut: what was kept before it was known may pass it. */
static void
fwd_trim(struct ps_stubs *st)
{
	size_t r = 0, w = 0;

	while (r < st->fwd.len) {
		struct ps_tag t;

		memcpy(&t, st->fwd.p + r, sizeof(t));
		if (t.seq <= st->cut[t.from]) {
			memmove(st->fwd.p + w, st->fwd.p + r, sizeof(t) + t.len);
			w += sizeof(t) + t.len;
		} else {
			st->nfwd--;
		}
		r += sizeof(t) + t.len;
	}
	st->fwd.len = w;
}

static void
cut_msg(void *arg)
{
	struct ps_cut_msg *c = arg;
	struct kv_shard *sh = kv_here();
	struct kv_psshard *ps = sh != NULL ? sh->ps : NULL;
	struct ps_stubs *st = NULL;

	for (st = ps != NULL ? ps->moves : NULL; st != NULL && st->id != c->stubs; st = st->next)
		;
	if (ps == NULL || (st != NULL && (st->subs == NULL || st->cut_known))) {
		free(c); /* stopped, or already finishing */
		return;
	}
	if (st == NULL) {
		/* An earlier incarnation's, or given up: nothing kept, but the new lcore
		 * need not wait. */
		st = stubs_new(ps);
		if (st == NULL) {
			free(c);
			return; /* the new lcore gives up waiting */
		}
		st->to = c->to;
		st->arrival = c->arrival;
		free(c);
		stubs_finish(ps, st);
		return;
	}
	st->to = c->to;
	st->arrival = c->arrival;
	memcpy(st->cut, c->cut, sizeof(st->cut));
	st->cut_known = true;
	free(c);
	fwd_trim(st);
	if (stubs_done(ps, st))
		stubs_finish(ps, st);
}

/* ---- a move dropped on its way: its old lcore is told, until its mailbox takes it ---- */

struct ps_bye {
	struct ps_bye *next;
	unsigned to;
	struct ps_cut_msg *msg;
	struct cr_timer timer;
	uint64_t deadline;
};

static void
bye_unlink(struct kv_psshard *ps, struct ps_bye *b)
{
	struct ps_bye **pp = &ps->byes;

	while (*pp != NULL && *pp != b)
		pp = &(*pp)->next;
	if (*pp != NULL)
		*pp = b->next;
}

static void
bye_try(struct kv_psshard *ps, struct ps_bye *b)
{
	int rc = cr_send(b->to, cut_msg, b->msg);

	if (rc == -EAGAIN && !ps->stopping && cr_now_ns() < b->deadline) {
		cr_timer_start(&b->timer, PS_RETRY_NS);
		return;
	}
	if (rc != 0) {
		if (rc == -EAGAIN)
			CR_LOG(psm_log, WARNING,
			       "lcore %u's mailbox stayed full: its stubs of a dropped move go in "
			       "their time",
			       b->to);
		free(b->msg); /* else gone: its stubs went with it */
	}
	bye_unlink(ps, b);
	free(b);
}

static void
bye_timer(struct cr_timer *t, void *arg)
{
	(void)t;
	bye_try(kv_here()->ps, arg);
}

/* Tell lcore @p to that the move of its stubs @p stubs ended here: an empty cut, they
 * finish at once. A full mailbox: again, for up to PS_GIVE_UP_NS; no memory: the old
 * lcore gives them up in its time (PS_STUBS_GIVE_UP_NS). */
static void
bye_send(struct kv_psshard *ps, unsigned to, uint64_t stubs)
{
	struct ps_cut_msg *c = calloc(1, sizeof(*c));
	struct ps_bye *b;
	int rc;

	if (c == NULL)
		return;
	c->stubs = stubs;
	c->to = cr_lcore_id();
	rc = cr_send(to, cut_msg, c);
	if (rc == 0)
		return;
	if (rc != -EAGAIN || ps == NULL || ps->stopping || (b = calloc(1, sizeof(*b))) == NULL) {
		free(c);
		return;
	}
	b->to = to;
	b->msg = c;
	b->deadline = cr_now_ns() + PS_GIVE_UP_NS;
	cr_timer_init(&b->timer, bye_timer, b);
	cr_timer_start(&b->timer, PS_RETRY_NS);
	b->next = ps->byes;
	ps->byes = b;
}

static void arrival_finish(struct kv_psshard *ps, struct kv_psmove *m);

void
kv_psm_fini(struct kv_psshard *ps)
{
	struct ps_stubs *st;

	ps->stopping = true;
	/* Their clients are gone. A cut not sent yet goes now if it can: the old lcore's
	 * stubs finish, else they give up in their time. */
	while (ps->arrivals != NULL) {
		struct kv_psmove *m = ps->arrivals;

		if (m->cut_msg != NULL && cr_send(m->from, cut_msg, m->cut_msg) == 0)
			m->cut_msg = NULL;
		arrival_finish(ps, m);
	}
	while (ps->byes != NULL) {
		struct ps_bye *b = ps->byes;

		if (cr_timer_armed(&b->timer))
			cr_timer_stop(&b->timer);
		bye_try(ps, b); /* once more; then it goes */
	}
	/* A forced stop, or a retire that took no lease: what the stubs kept is sent if the
	 * cut came (messages past the last delivered are lost: logged), else dropped (the
	 * new lcore gives up waiting). One try each: nothing is sent again later. */
	while ((st = ps->moves) != NULL) {
		if (st->subs != NULL && st->cut_known) {
			CR_LOG(psm_log, WARNING,
			       "lcore %u stops before a moved subscriber's messages are all "
			       "delivered: some may be lost",
			       cr_lcore_id());
			stubs_finish(ps, st); /* sent or not, they go */
			continue;
		}
		if (st->done != NULL)
			CR_LOG(
			    psm_log, WARNING,
			    "lcore %u stops with a moved subscriber's messages unsent to lcore %u",
			    cr_lcore_id(), st->to);
		stubs_release(ps, st);
	}
}

/* ---- the new lcore ---- */

static void
arrival_unlink(struct kv_psshard *ps, struct kv_psmove *m)
{
	struct kv_psmove **pp = &ps->arrivals;

	while (*pp != NULL && *pp != m)
		pp = &(*pp)->next;
	if (*pp != NULL)
		*pp = m->next;
}

/* The client gets what the old lcore forwarded, then what was held here, and goes on. */
static void
arrival_finish(struct kv_psshard *ps, struct kv_psmove *m)
{
	struct kconn *kc = m->kc;
	size_t r = 0;

	arrival_unlink(ps, m);
	if (cr_timer_armed(&m->timer))
		cr_timer_stop(&m->timer);
	free(m->cut_msg);
	if (kc != NULL) {
		kc->psm = NULL;
		/* A send may close it (the output limits): it stays allocated meanwhile. */
		kc->in_input = true;
		while (r < m->fwd.len && kc->conn != NULL) {
			struct ps_tag t;

			memcpy(&t, m->fwd.p + r, sizeof(t));
			if (kc->resp == 3 && t.len > 1) { /* a RESP3 client's push frame */
				if (kc_send(kc, ">", 1))
					(void)kc_send(kc, m->fwd.p + r + sizeof(t) + 1, t.len - 1);
			} else {
				(void)kc_send(kc, m->fwd.p + r + sizeof(t), t.len);
			}
			r += sizeof(t) + t.len;
		}
		if (kc->conn != NULL && m->hold.len != 0)
			(void)kc_send(kc, m->hold.p, m->hold.len);
		kc->in_input = false;
	}
	rb_fini(&m->hold);
	rb_fini(&m->fwd);
	free(m);
	if (kc == NULL)
		return;
	if (kc->conn == NULL) {
		kc_maybe_free(kc);
		return;
	}
	/* Its parsing resumes from the loop, not here: this may run inside a PUBLISH part
	 * of another client's input pass, whose replies wait in the lcore's batch. */
	kv_unblock_later(kc);
}

/* Everything is in when the old lcore's part came and this lcore has delivered up to
 * the cut: from then on what it delivers is past it. */
static bool
arrival_ready(const struct kv_psshard *ps, const struct kv_psmove *m)
{
	unsigned i;

	if (!m->done_in)
		return false;
	for (i = 0; i < CR_MAX_LCORES; i++)
		if (ps->seen[i] < m->cut[i])
			return false;
	return true;
}

void
kv_psm_check_arrivals(struct kv_psshard *ps)
{
	struct kv_psmove *m, *next;

	for (m = ps->arrivals; m != NULL; m = next) {
		next = m->next;
		if (arrival_ready(ps, m))
			arrival_finish(ps, m);
	}
}

bool
kv_psm_hold(struct kconn *kc, const struct rbuf *f)
{
	struct kv_psmove *m = kc->psm;
	struct ps_tag t;

	kv_ps_current(&t.from, &t.seq);
	if (t.seq <= m->cut[t.from])
		return false; /* the old lcore delivered it, or forwards it */
	if (kc->resp == 3 && f->len > 1) { /* a RESP3 client's push frame */
		rb_raw(&m->hold, ">", 1);
		rb_raw(&m->hold, f->p + 1, f->len - 1);
	} else {
		rb_raw(&m->hold, f->p, f->len);
	}
	return true;
}

static void
done_msg(void *arg)
{
	struct ps_done_msg *d = arg;
	struct kv_shard *sh = kv_here();
	struct kv_psmove *m;

	for (m = sh != NULL && sh->ps != NULL ? sh->ps->arrivals : NULL;
	     m != NULL && m->id != d->arrival; m = m->next)
		;
	if (m != NULL && !m->done_in) {
		m->fwd = d->fwd; /* taken over */
		rb_init(&d->fwd, NULL, 0);
		m->done_in = true;
		if (arrival_ready(sh->ps, m))
			arrival_finish(sh->ps, m);
	}
	rb_fini(&d->fwd);
	free(d);
}

static void cut_send(struct kv_psmove *m);

static void
arrival_timer(struct cr_timer *t, void *arg)
{
	struct kv_psmove *m = arg;

	(void)t;
	if (m->cut_msg != NULL) {
		cut_send(m);
		return;
	}
	CR_LOG(psm_log, WARNING,
	       "client %llu: lcore %u did not forward its messages within %llu s of its move: "
	       "some may be lost",
	       m->kc != NULL ? (unsigned long long)m->kc->id : 0ull, m->from,
	       PS_GIVE_UP_NS / 1000000000ull);
	arrival_finish(kv_here()->ps, m);
}

static void
cut_send(struct kv_psmove *m)
{
	struct kv_psshard *ps = kv_here()->ps;
	int rc = cr_send(m->from, cut_msg, m->cut_msg);
	uint64_t now = cr_now_ns();

	if (rc == -EAGAIN && now < m->deadline) {
		cr_timer_start(&m->timer, PS_RETRY_NS);
		return;
	}
	if (rc != 0) {
		/* The old lcore is gone, and its stubs with it: nothing more comes from it. Or
		 * its mailbox stayed full: its stubs give up in their time. */
		if (rc == -EAGAIN)
			CR_LOG(psm_log, WARNING,
			       "client %llu: lcore %u's mailbox stayed full for %llu s after its "
			       "move: some messages may be lost",
			       m->kc != NULL ? (unsigned long long)m->kc->id : 0ull, m->from,
			       PS_GIVE_UP_NS / 1000000000ull);
		free(m->cut_msg);
		m->done_in = true;
	}
	m->cut_msg = NULL; /* the old lcore's now (or freed) */
	cr_timer_start(&m->timer, m->deadline > now ? m->deadline - now : 0);
	if (arrival_ready(ps, m))
		arrival_finish(ps, m);
}

/* Take the stubs back on the old lcore: the move was refused. */
static void
take_back(struct kconn *kc, struct ps_out *o)
{
	struct kv_psshard *ps = kc->sh->ps;
	struct ps_stubs *st;
	struct ps_sub *s;

	for (st = ps->moves; st != NULL && st->id != o->stubs; st = st->next)
		;
	if (st == NULL || st->subs == NULL)
		return;
	for (s = st->subs->subs; s != NULL; s = s->cnext) {
		s->fwd = NULL;
		s->kc = kc;
	}
	kc->ps = st->subs;
	st->subs = NULL;
	stubs_release(ps, st);
}

void
kv_ps_move_in(struct kconn *kc)
{
	struct ps_out *o = kc->ps_out;
	struct kv_psshard *ps = kc->sh->ps;
	struct ps_cut_msg *c;
	struct kv_psmove *m;
	const char *r;
	unsigned i;
	int err = 0;

	if (o == NULL)
		return;
	kc->ps_out = NULL;
	if (o->from == cr_lcore_id()) {
		take_back(kc, o);
		free(o);
		return;
	}
	m = calloc(1, sizeof(*m));
	c = calloc(1, sizeof(*c));
	for (r = o->names; m != NULL && c != NULL && err == 0 && r < o->names + o->len;) {
		uint32_t n;

		memcpy(&n, r + 1, 4);
		err = kv_ps_add(kc, r + 5, n, r[0] != 0);
		r += 5 + n;
	}
	if (m == NULL || c == NULL || err != 0) {
		/* Without its subscriptions it would miss messages unawares: it is closed. */
		CR_LOG(psm_log, WARNING,
		       "client %llu: no memory to subscribe it again after its "
		       "move; closing it",
		       (unsigned long long)kc->id);
		free(m);
		free(c);
		c = NULL;
		m = NULL;
	}
	if (m == NULL) {
		bye_send(ps, o->from, o->stubs); /* the stubs still go */
		free(o);
		cr_conn_close(kc->conn);
		return;
	}
	m->id = next_id();
	m->kc = kc;
	m->from = o->from;
	rb_init(&m->hold, NULL, 0);
	rb_init(&m->fwd, NULL, 0);
	cr_timer_init(&m->timer, arrival_timer, m);
	m->deadline = cr_now_ns() + PS_GIVE_UP_NS;
	for (i = 0; i < CR_MAX_LCORES; i++)
		m->cut[i] = ps->seen[i] > o->seen[i] ? ps->seen[i] : o->seen[i];
	c->stubs = o->stubs;
	c->arrival = m->id;
	c->to = cr_lcore_id();
	memcpy(c->cut, m->cut, sizeof(c->cut));
	m->cut_msg = c;
	free(o);
	m->next = ps->arrivals;
	ps->arrivals = m;
	kc->psm = m;
	kc->blocked++; /* its replies stay behind the messages it is owed */
	cut_send(m);
}

void
kv_ps_move_drop(struct kconn *kc)
{
	struct ps_out *o = kc->ps_out;

	if (o == NULL)
		return;
	kc->ps_out = NULL;
	bye_send(kc->sh != NULL ? kc->sh->ps : NULL, o->from, o->stubs);
	free(o);
}

/* The client went while it waited for its old lcore: what comes is dropped. */
void
kv_psm_gone(struct kconn *kc)
{
	if (kc->psm != NULL) {
		kc->psm->kc = NULL;
		kc->psm = NULL;
	}
	free(kc->ps_out);
	kc->ps_out = NULL;
}
