/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Pub/Sub (see pubsub.h). Per lcore: a table from channel to its subscribers, a list of
 * patterns with theirs, and per client the list of what it is subscribed to. Allocation
 * happens at (un)subscribe; a message is framed once per lcore into a buffer the lcore
 * keeps (it grows only for a message longer than any before) and handed to each
 * subscriber's output.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kv.h"
#include "pubsub.h"
#include "psint.h"

#define PS_TAB_INITIAL 64u

/*
 * PUBLISH numbers: each lcore numbers the messages its publishers send (one number per
 * PUBLISH, the same in every lcore's part of it), and every lcore notes the last number
 * of each other lcore it delivered (kv_psshard.seen). A message goes to every lcore
 * through one FIFO path per pair of lcores and runs as it arrives (a PUBLISH part, plain
 * or a step of EXEC or EVAL, never waits in a transaction's queue: txlock.c), so each
 * lcore runs one lcore's messages in increasing order of their numbers, and "delivered
 * up to n" means the same messages on every lcore: what lets a moving subscriber's two
 * lcores agree where one stops and the other starts (psmove.c).
 *
 * Written by their lcore only; read by an lcore that starts (kv_ps_init()). seq_cst:
 * a number taken before a send that the starting lcore's closed mailbox refused is seen
 * by its read after the mailbox reopened (both orders with the mailbox's own atomics).
 */
static _Atomic uint64_t ps_seq[CR_MAX_LCORES];

/* The message being delivered (kv_ps_tag()), consumed by cmd_publish. Per lcore. */
static _Thread_local struct {
	uint32_t from;
	uint64_t seq;
} ps_cur_tag, ps_cur;

uint64_t
kv_ps_next_seq(void)
{
	return atomic_fetch_add(&ps_seq[cr_lcore_id()], 1) + 1;
}

void
kv_ps_tag(uint32_t from, uint64_t seq)
{
	ps_cur_tag.from = from;
	ps_cur_tag.seq = seq;
}

void
kv_ps_current(uint32_t *from, uint64_t *seq)
{
	*from = ps_cur.from;
	*seq = ps_cur.seq;
}

/* The lease that keeps a retiring lcore while clients or stubs are here: a stub forwards
 * until the messages its move's cut names have come, or its done message is accepted
 * (psmove.c). Every client counts, subscribed or not: one there may still SUBSCRIBE and
 * then move, and a lease once let go cannot be taken again on a closing lcore. Taken when
 * the lcore starts (a retiring lcore admits no lease), let go once it is closing and
 * holds nothing. */
void
kv_ps_hold(struct kv_psshard *ps, int delta)
{
	ps->holders += (unsigned)delta;
	if (ps->closing && ps->holders == 0 && cr_lease_active(&ps->lease))
		(void)cr_lease_release(&ps->lease);
}

void
kv_ps_client(struct kv_shard *sh, int delta)
{
	if (sh->ps != NULL)
		kv_ps_hold(sh->ps, delta);
}

void
kv_ps_closing(struct kv_shard *sh)
{
	struct kv_psshard *ps = sh->ps;

	ps->closing = true;
	kv_ps_hold(ps, 0);
}

/* Redis's client-output-buffer-limit pubsub 32mb 8mb 60. */
static const unsigned long long ps_limits[3] = {32ull << 20, 8ull << 20, 60};

static struct kv_psshard *
ps_here(struct kv_shard *sh)
{
	return sh->ps;
}

/* A PUBLISH or PUBSUB part runs on each shard's owner for that lcore's subscribers: the
 * part of a shard its home lcore does not run now (it moved, shardmove.c) reaches no one
 * (the owner's own part reaches its subscribers once). */
static struct kv_psshard *
ps_part(struct kv_ctx *x)
{
	return x->sh == kv_here() ? x->sh->ps : NULL;
}

int
kv_ps_init(struct kv_shard *sh)
{
	struct kv_psshard *ps = calloc(1, sizeof(*ps));
	unsigned i;

	if (ps == NULL)
		return -ENOMEM;
	ps->tab = calloc(PS_TAB_INITIAL, sizeof(*ps->tab));
	if (ps->tab == NULL) {
		free(ps);
		return -ENOMEM;
	}
	ps->mask = PS_TAB_INITIAL - 1;
	rb_init(&ps->frame, ps->inl, sizeof(ps->inl));
	ps->lease = (struct cr_lease)CR_LEASE_INIT;
	(void)cr_lease_acquire(&ps->lease);
	/* What was sent while this lcore was offline never comes: counted as delivered. */
	for (i = 0; i < CR_MAX_LCORES; i++)
		ps->seen[i] = atomic_load(&ps_seq[i]);
	sh->ps = ps;
	return 0;
}

void
kv_ps_fini(struct kv_shard *sh)
{
	struct kv_psshard *ps = sh->ps;
	struct ps_chan *c, *n;
	size_t i;

	if (ps == NULL)
		return;
	kv_psm_fini(ps);
	if (cr_lease_active(&ps->lease))
		(void)cr_lease_release(&ps->lease);
	/* Its clients are gone by now (kv_ps_gone() freed their subscriptions). */
	for (i = 0; i <= ps->mask; i++)
		for (c = ps->tab[i]; c != NULL; c = n) {
			n = c->hnext;
			free(c);
		}
	for (c = ps->pats; c != NULL; c = n) {
		n = c->hnext;
		free(c);
	}
	rb_fini(&ps->frame);
	free(ps->tab);
	free(ps);
	sh->ps = NULL;
}

/* ---- framing: the one place a pub/sub push is written ---- */

/* "*n" then the kind (a RESP3 subscriber gets ">n": deliver()). */
static void
ps_frame_head(struct rbuf *b, unsigned n, const char *kind)
{
	rb_array(b, n);
	rb_bulkstr(b, kind);
}

/* message channel payload; pmessage pattern channel payload. */
static void
ps_frame(struct rbuf *b, const struct ps_chan *pat, const struct kv_arg *ch,
	 const struct kv_arg *msg)
{
	ps_frame_head(b, pat != NULL ? 4 : 3, pat != NULL ? "pmessage" : "message");
	if (pat != NULL)
		rb_bulk(b, pat->name, pat->len);
	rb_bulk(b, ch->p, ch->len);
	rb_bulk(b, msg->p, msg->len);
}

/* subscribe channel count, and the others; a NULL name is a nil (nothing to drop). */
static void
ps_frame_count(struct rbuf *b, const char *kind, const char *name, size_t len, size_t count)
{
	ps_frame_head(b, 3, kind);
	if (name != NULL)
		rb_bulk(b, name, len);
	else
		rb_null(b);
	rb_int(b, (long long)count);
}

/* ---- registry ---- */

static size_t
ps_client_count(const struct kconn *kc)
{
	return kc->ps != NULL ? kc->ps->nchan + kc->ps->npat : 0;
}

bool
kv_ps_subscribed(const struct kconn *kc)
{
	return kc != NULL && ps_client_count(kc) != 0;
}

static struct ps_chan **
chan_slot(struct kv_psshard *ps, const char *p, size_t len, uint64_t h)
{
	struct ps_chan **pp = &ps->tab[h & ps->mask];

	while (*pp != NULL &&
	       !((*pp)->h == h && (*pp)->len == len && memcmp((*pp)->name, p, len) == 0))
		pp = &(*pp)->hnext;
	return pp;
}

static struct ps_chan **
pat_slot(struct kv_psshard *ps, const char *p, size_t len)
{
	struct ps_chan **pp = &ps->pats;

	while (*pp != NULL && !((*pp)->len == len && memcmp((*pp)->name, p, len) == 0))
		pp = &(*pp)->hnext;
	return pp;
}

/* Double the table at a load of 1: a bounded step, at subscribe only. */
static void
chan_grow(struct kv_psshard *ps)
{
	size_t n = (ps->mask + 1) * 2, i;
	struct ps_chan **t, *c, *next;

	if (ps->nchan <= ps->mask)
		return;
	t = calloc(n, sizeof(*t));
	if (t == NULL)
		return; /* chains grow longer instead */
	for (i = 0; i <= ps->mask; i++)
		for (c = ps->tab[i]; c != NULL; c = next) {
			next = c->hnext;
			c->hnext = t[c->h & (n - 1)];
			t[c->h & (n - 1)] = c;
		}
	free(ps->tab);
	ps->tab = t;
	ps->mask = n - 1;
}

static bool
client_has(const struct kconn *kc, const struct ps_chan *c)
{
	const struct ps_sub *s;

	for (s = kc->ps != NULL ? kc->ps->subs : NULL; s != NULL; s = s->cnext)
		if (s->ch == c)
			return true;
	return false;
}

/* Subscribe @p kc to @p p (a pattern if @p pattern); -ENOMEM. */
int
kv_ps_add(struct kconn *kc, const char *p, size_t len, bool pattern)
{
	struct kv_psshard *ps = ps_here(kc->sh);
	uint64_t h = pattern ? 0 : kv_hash(p, len);
	struct ps_chan **pp = pattern ? pat_slot(ps, p, len) : chan_slot(ps, p, len, h);
	struct ps_chan *c = *pp;
	struct ps_sub *s;

	if (c != NULL && client_has(kc, c))
		return 0;
	if (kc->ps == NULL) {
		if ((kc->ps = calloc(1, sizeof(*kc->ps))) == NULL)
			return -ENOMEM;
	}
	s = malloc(sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	if (c == NULL) {
		c = malloc(sizeof(*c) + len + 1);
		if (c == NULL) {
			free(s);
			return -ENOMEM;
		}
		c->hnext = NULL;
		c->h = h;
		c->subs = NULL;
		c->nsubs = 0;
		c->pattern = pattern;
		c->len = len;
		memcpy(c->name, p, len);
		c->name[len] = '\0';
		*pp = c;
		if (pattern) {
			ps->npat++;
		} else {
			ps->nchan++;
			chan_grow(ps);
		}
	}
	/* Appended, so that a channel's subscribers are served in the order they came. */
	s->ch = c;
	s->kc = kc;
	s->fwd = NULL;
	s->next = NULL;
	s->pprev = &c->subs;
	while (*s->pprev != NULL)
		s->pprev = &(*s->pprev)->next;
	*s->pprev = s;
	c->nsubs++;
	s->cnext = kc->ps->subs;
	kc->ps->subs = s;
	if (pattern)
		kc->ps->npat++;
	else
		kc->ps->nchan++;
	return 0;
}

static void
chan_drop_if_empty(struct kv_psshard *ps, struct ps_chan *c)
{
	struct ps_chan **pp;

	if (c->nsubs != 0 || ps->delivering != 0)
		return;
	if (c->pattern) {
		pp = pat_slot(ps, c->name, c->len);
		ps->npat--;
	} else {
		pp = chan_slot(ps, c->name, c->len, c->h);
		ps->nchan--;
	}
	*pp = c->hnext;
	free(c);
}

/* Unlink subscription @p s of its channel (the client's list is the caller's). */
void
kv_ps_unlink(struct kv_psshard *ps, struct ps_sub *s)
{
	struct ps_chan *c = s->ch;

	c->nsubs--;
	if (ps->delivering != 0) {
		/* A delivery walks this channel's list: unlinked after it. */
		s->kc = NULL;
		s->fwd = NULL;
		s->cnext = ps->dead;
		ps->dead = s;
		return;
	}
	if (s->next != NULL)
		s->next->pprev = s->pprev;
	*s->pprev = s->next;
	free(s);
	chan_drop_if_empty(ps, c);
}

/* Drop @p kc's subscription to @p a (pattern or channel): false if it had none. */
static bool
ps_del(struct kconn *kc, const char *p, size_t len, bool pattern)
{
	struct ps_sub **pp;

	for (pp = kc->ps != NULL ? &kc->ps->subs : NULL; pp != NULL && *pp != NULL;
	     pp = &(*pp)->cnext) {
		struct ps_sub *s = *pp;

		if (s->ch->pattern != pattern || s->ch->len != len ||
		    memcmp(s->ch->name, p, len) != 0)
			continue;
		*pp = s->cnext;
		if (pattern)
			kc->ps->npat--;
		else
			kc->ps->nchan--;
		kv_ps_unlink(ps_here(kc->sh), s);
		return true;
	}
	return false;
}

void
kv_ps_gone(struct kconn *kc)
{
	struct kv_psshard *ps = ps_here(kc->sh);
	struct ps_sub *s, *n;

	kv_psm_gone(kc);
	if (kc->ps == NULL)
		return;
	for (s = kc->ps->subs; s != NULL; s = n) {
		n = s->cnext;
		kv_ps_unlink(ps, s);
	}
	free(kc->ps);
	kc->ps = NULL;
}

/* The subscriptions unlinked while a message was being delivered. */
static void
ps_reap(struct kv_psshard *ps)
{
	struct ps_sub *s, *n;

	for (s = ps->dead, ps->dead = NULL; s != NULL; s = n) {
		struct ps_chan *c = s->ch;

		n = s->cnext;
		if (s->next != NULL)
			s->next->pprev = s->pprev;
		*s->pprev = s->next;
		free(s);
		chan_drop_if_empty(ps, c);
	}
}

/* ---- commands on the client's lcore ---- */

static void
subscribe(struct kv_ctx *x, bool pattern)
{
	uint32_t i;

	for (i = 1; i < x->argc; i++) {
		if (kv_ps_add(x->kc, x->argv[i].p, x->argv[i].len, pattern) != 0) {
			rb_error(x->out, kv_err_oom);
			return;
		}
		ps_frame_count(x->out, pattern ? "psubscribe" : "subscribe", x->argv[i].p,
			       x->argv[i].len, ps_client_count(x->kc));
	}
}

KV_CMD(subscribe)
{
	subscribe(x, false);
}

KV_CMD(psubscribe)
{
	subscribe(x, true);
}

static void
unsubscribe(struct kv_ctx *x, bool pattern)
{
	const char *kind = pattern ? "punsubscribe" : "unsubscribe";
	struct kconn *kc = x->kc;
	uint32_t i;
	bool any = false;

	if (x->argc > 1) {
		for (i = 1; i < x->argc; i++) {
			ps_del(kc, x->argv[i].p, x->argv[i].len, pattern);
			ps_frame_count(x->out, kind, x->argv[i].p, x->argv[i].len,
				       ps_client_count(kc));
		}
		return;
	}
	/* Every one, newest first as Redis's dict iteration is not ordered either. */
	while (kc->ps != NULL) {
		struct ps_sub *s;
		char name[256];
		size_t len;
		char *big = NULL;

		for (s = kc->ps->subs; s != NULL && s->ch->pattern != pattern; s = s->cnext)
			;
		if (s == NULL)
			break;
		len = s->ch->len;
		if (len >= sizeof(name) && (big = malloc(len + 1)) == NULL) {
			rb_error(x->out, kv_err_oom);
			return;
		}
		memcpy(big != NULL ? big : name, s->ch->name, len);
		ps_del(kc, s->ch->name, s->ch->len, pattern);
		ps_frame_count(x->out, kind, big != NULL ? big : name, len, ps_client_count(kc));
		free(big);
		any = true;
	}
	if (!any)
		ps_frame_count(x->out, kind, NULL, 0, ps_client_count(kc));
}

KV_CMD(unsubscribe)
{
	unsubscribe(x, false);
}

KV_CMD(punsubscribe)
{
	unsubscribe(x, true);
}

bool
kv_ps_allowed(const struct kv_cmd *cmd)
{
	return cmd->fn == cmd_subscribe || cmd->fn == cmd_psubscribe ||
	       cmd->fn == cmd_unsubscribe || cmd->fn == cmd_punsubscribe || cmd->fn == cmd_ping ||
	       cmd->fn == cmd_quit || cmd->fn == cmd_reset;
}

void
kv_ps_counts(const struct kconn *kc, size_t *nchan, size_t *npat)
{
	*nchan = kc->ps != NULL ? kc->ps->nchan : 0;
	*npat = kc->ps != NULL ? kc->ps->npat : 0;
}

bool
kv_ps_limits(const struct kconn *kc, unsigned long long lim[3])
{
	if (!kv_ps_subscribed(kc))
		return false;
	memcpy(lim, ps_limits, sizeof(ps_limits));
	return true;
}

void
kv_ps_pong(struct kv_ctx *x)
{
	rb_array(x->out, 2);
	rb_bulkstr(x->out, "pong");
	if (x->argc > 1)
		rb_bulk(x->out, x->argv[1].p, x->argv[1].len);
	else
		rb_bulk(x->out, "", 0);
}

/* ---- parts on every shard ---- */

/* Hand the framed message to @p kc in its reply order: behind replies still owed, else
 * straight to its output (it is not the connection being parsed: a subscribed client
 * cannot PUBLISH, so the lcore's batch is never its). */
static bool
deliver(struct kconn *kc, const struct rbuf *f)
{
	struct rbuf *o;

	if (kc->conn == NULL)
		return true;
	if (kc->psm != NULL) {
		/* It just moved here: behind what its old lcore still forwards, and not what
		 * that one delivered (psmove.c). */
		return kv_psm_hold(kc, f);
	}
	if (kc->resp == 3) {
		/* RESP3: a push frame, ">" where RESP2 has "*" (the frame is shared). */
		struct kreq *t = kc->tail;

		if (t != NULL && !t->done && kc->in_input && t->cmd != NULL &&
		    t->cmd->fn == cmd_publish) {
			/* The publisher itself, as its PUBLISH is launched: Redis writes its
			 * message before PUBLISH's count. */
			struct kreq *m = kreq_new(kc->sh, kc, NULL, 0, NULL), **pp;

			if (m == NULL) {
				kc_abort(kc);
				return true;
			}
			m->done = true;
			m->final = &m->one.out;
			rb_raw(m->final, ">", 1);
			rb_raw(m->final, f->p + 1, f->len - 1);
			for (pp = &kc->head; *pp != t; pp = &(*pp)->next)
				;
			m->next = t;
			*pp = m;
			kc->queued++;
			return true;
		}
		if (kc->tail == NULL && !kc->in_input) {
			if (kc_send(kc, ">", 1))
				(void)kc_send(kc, f->p + 1, f->len - 1); /* may close it */
			return true;
		}
		o = kc_local_out(kc);
		if (o == NULL) {
			kc_abort(kc);
			return true;
		}
		rb_raw(o, ">", 1);
		rb_raw(o, f->p + 1, f->len - 1);
		return true;
	}
	if (kc->tail == NULL && !kc->in_input) {
		(void)kc_send(kc, f->p, f->len); /* may close it: the limits (kv_ps_gone) */
		return true;
	}
	o = kc_local_out(kc);
	if (o == NULL)
		kc_abort(kc);
	else
		rb_raw(o, f->p, f->len);
	return true;
}

static size_t
deliver_all(struct kv_psshard *ps, struct ps_chan *c, const struct ps_chan *pat,
	    const struct kv_arg *ch, const struct kv_arg *msg)
{
	struct ps_sub *s;
	size_t n = 0;

	rb_reset(&ps->frame);
	ps_frame(&ps->frame, pat, ch, msg);
	for (s = c->subs; s != NULL; s = s->next) {
		if (s->fwd != NULL) {
			n += kv_psm_forward(s->fwd, &ps->frame); /* its client moved */
			continue;
		}
		if (s->kc == NULL)
			continue;
		n += deliver(s->kc, &ps->frame);
	}
	return n;
}

/* PUBLISH channel message, on each shard: its lcore's subscribers; answers how many. */
KV_CMD(publish)
{
	struct kv_psshard *ps = ps_part(x);
	const struct kv_arg *ch = &x->argv[1], *msg = &x->argv[2];
	struct ps_chan *c, *p;
	size_t n = 0;

	/* Its number: from the part (kv_ps_tag()), or taken here when it runs alone. */
	ps_cur = ps_cur_tag;
	ps_cur_tag.seq = 0;
	if (ps_cur.seq == 0) {
		ps_cur.from = cr_lcore_id();
		ps_cur.seq = kv_ps_next_seq();
	}
	if (ps == NULL) {
		rb_int(x->out, 0); /* a moved shard's part: this lcore's own part delivers */
		return;
	}
	if (ps_cur.seq > ps->seen[ps_cur.from])
		ps->seen[ps_cur.from] = ps_cur.seq;
	ps->delivering++;
	c = *chan_slot(ps, ch->p, ch->len, kv_hash(ch->p, ch->len));
	if (c != NULL)
		n += deliver_all(ps, c, NULL, ch, msg);
	for (p = ps->pats; p != NULL; p = p->hnext)
		if (p->nsubs != 0 && kv_stringmatch(p->name, p->len, ch->p, ch->len, false))
			n += deliver_all(ps, p, p, ch, msg);
	ps->delivering--;
	ps_reap(ps);
	if (ps->moves != NULL)
		kv_psm_check(ps); /* stubs waiting for this message */
	if (ps->arrivals != NULL)
		kv_psm_check_arrivals(ps); /* moved clients waiting for it */
	rb_int(x->out, (long long)n);
}

/* PUBSUB CHANNELS [pattern]: this shard's channels (with subscribers) matching it. */
KV_CMD(pubsub_channels)
{
	struct kv_psshard *ps = ps_part(x);
	size_t at = kv_array_begin(x->out), i;
	long long n = 0;
	struct ps_chan *c;

	for (i = 0; ps != NULL && i <= ps->mask; i++)
		for (c = ps->tab[i]; c != NULL; c = c->hnext) {
			if (c->nsubs == 0 ||
			    (x->argc > 2 &&
			     !kv_stringmatch(x->argv[2].p, x->argv[2].len, c->name, c->len, false)))
				continue;
			rb_bulk(x->out, c->name, c->len);
			n++;
		}
	kv_array_end(x->out, at, n);
}

bool
precheck_pubsub_channels(struct kv_ctx *x)
{
	if (x->argc <= 3)
		return true;
	/* Redis names the subcommand as it was typed */
	rb_errorf(x->out,
		  "ERR unknown subcommand or wrong number of arguments for '%.128s'. Try PUBSUB "
		  "HELP.",
		  x->argv[1].p);
	return false;
}

/* PUBSUB NUMSUB channel...: this shard's counts, one integer per channel. */
KV_CMD(pubsub_numsub)
{
	struct kv_psshard *ps = ps_part(x);
	uint32_t i;

	rb_array(x->out, x->argc - 2);
	for (i = 2; i < x->argc; i++) {
		const struct kv_arg *a = &x->argv[i];
		struct ps_chan *c =
		    ps == NULL ? NULL : *chan_slot(ps, a->p, a->len, kv_hash(a->p, a->len));

		rb_int(x->out, c != NULL ? (long long)c->nsubs : 0);
	}
}

/* PUBSUB NUMPAT: this shard's patterns (with subscribers), counted once over all. */
KV_CMD(pubsub_numpat)
{
	struct kv_psshard *ps = ps_part(x);
	size_t at = kv_array_begin(x->out);
	long long n = 0;
	struct ps_chan *p;

	for (p = ps != NULL ? ps->pats : NULL; p != NULL; p = p->hnext)
		if (p->nsubs != 0) {
			rb_bulk(x->out, p->name, p->len);
			n++;
		}
	kv_array_end(x->out, at, n);
}

KV_CMD(pubsub_help)
{
	static const char *const lines[] = {
	    "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	    "CHANNELS [<pattern>]",
	    "    Return the currently active channels matching a <pattern> (default: '*').",
	    "NUMPAT",
	    "    Return number of subscriptions to patterns.",
	    "NUMSUB [<channel> ...]",
	    "    Return the number of subscribers for the specified channels, excluding",
	    "    pattern subscriptions(default: no channels).",
	    "HELP",
	    "    Prints this help.",
	    NULL,
	};

	kv_reply_help(x, lines);
}

/* ---- merging the shards' answers ---- */

struct ps_name {
	const char *p;
	size_t len;
};

static int
name_cmp(const void *a, const void *b)
{
	const struct ps_name *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	int r = memcmp(x->p, y->p, n);

	return r != 0 ? r : (x->len > y->len) - (x->len < y->len);
}

/* A part that did not run (its lcore retired: "-ERR the shard ... is unavailable") has no
 * clients, so no subscribers: it counts nothing. */
static bool
part_ok(const struct kpart *p)
{
	return p->out.len != 0 && p->out.p[0] != '-';
}

/* The distinct bulks of the parts' arrays; -ENOMEM. */
static long long
distinct(struct kpart *parts, uint32_t nparts, struct ps_name **out)
{
	struct ps_name *v = NULL;
	long long n = 0, cap = 0, k, u;
	uint32_t i;

	for (i = 0; i < nparts; i++) {
		struct rd r;
		long long m;

		if (!part_ok(&parts[i]))
			continue;
		rd_init(&r, &parts[i].out);
		m = rd_array(&r);
		if (m > 0) {
			struct ps_name *nv = realloc(v, (size_t)(cap + m) * sizeof(*v));

			if (nv == NULL) {
				free(v);
				return -ENOMEM;
			}
			v = nv;
			cap += m;
		}
		for (k = 0; k < m; k++)
			if (rd_bulk(&r, &v[n].p, &v[n].len))
				n++;
	}
	if (n > 1)
		qsort(v, (size_t)n, sizeof(*v), name_cmp);
	for (k = 0, u = 0; k < n; k++)
		if (u == 0 || name_cmp(&v[u - 1], &v[k]) != 0)
			v[u++] = v[k];
	*out = v;
	return u;
}

void
kv_ps_merge(struct kreq *kr, struct kpart *parts, uint32_t nparts, struct rbuf *out)
{
	void (*fn)(struct kv_ctx *) = kr->cmd->fn;
	struct ps_name *v = NULL;
	long long n, k;
	uint32_t i;

	if (fn == cmd_publish) {
		for (n = 0, i = 0; i < nparts; i++) {
			struct rd r;

			if (!part_ok(&parts[i]))
				continue;
			rd_init(&r, &parts[i].out);
			n += rd_int(&r);
		}
		rb_int(out, n);
		return;
	}
	if (fn == cmd_pubsub_numsub) {
		struct rd r[CR_MAX_LCORES];

		for (i = 0; i < nparts; i++) {
			rd_init(&r[i], &parts[i].out);
			(void)rd_array(&r[i]);
		}
		rb_array(out, (long long)(kr->argc - 2) * 2);
		for (k = 2; k < kr->argc; k++) {
			for (n = 0, i = 0; i < nparts; i++)
				if (part_ok(&parts[i]))
					n += rd_int(&r[i]);
			rb_bulk(out, kr->argv[k].p, kr->argv[k].len);
			rb_int(out, n);
		}
		return;
	}
	n = distinct(parts, nparts, &v);
	if (n < 0) {
		rb_error(out, kv_err_oom);
		return;
	}
	if (fn == cmd_pubsub_numpat) {
		rb_int(out, n);
	} else {
		rb_array(out, n);
		for (k = 0; k < n; k++)
			rb_bulk(out, v[k].p, v[k].len);
	}
	free(v);
}
