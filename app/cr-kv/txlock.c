/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shard side of transactions (see txn.h): the lock table, holds, the FIFO wait queue,
 * the admission of every part, and the late answers for what waited.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cr_log.h"
#include "kv.h"

CR_LOG_COMPONENT(txlock_log, "app.kv")

struct kv_klock {
	struct kd_node node;
	uint32_t shared, excl;
	uint32_t klen;
	char key[];
};

struct kv_hold {
	struct kv_hold *next, **pprev; /* the shard's holds, freed if it stops */
	uint8_t whole;		       /* KV_WHOLE_*, or 0: the keys below */
	uint32_t n;
	struct {
		struct kv_klock *lk;
		uint8_t excl;
	} k[];
};

/* Keys a plain part may name and still be checked one by one; more: the whole shard. */
#define NEEDS_MAX 64u

/* What a part needs locked: keys (argv[first], argv[first + step]... up to last, or
 * argv[idx[0..nidx)]), or the whole shard, or nothing. */
struct needs {
	const struct kv_arg *argv;
	uint32_t first, step, last;
	uint32_t nidx, idx[NEEDS_MAX];
	const uint8_t *excl_each; /* a lock request's own modes, or NULL: all @p excl */
	bool excl, whole, none;
	bool whole_lock; /* a lock request for the whole shard (excl: exclusive) */
};

/* A queued part or lock request: a copy of everything it needs. */
struct kv_wait {
	struct kv_wait *next;
	bool lock;	     /* a transaction's lock request (else a plain part) */
	unsigned origin;     /* the origin's shard index */
	struct kpart *token; /* the part on the origin: only ever sent back */
	uint64_t epoch;
	void (*fn)(struct kv_ctx *x); /* what to run once admitted (NULL: nothing) */
	bool nowait;	 /* a blocking pop whose client stopped waiting: it may not block */
	uint64_t ps_seq; /* a PUBLISH: its number (pubsub.c) */
	unsigned ps_from;
	struct needs needs;
	uint8_t *excl;
	uint32_t nkeys; /* a lock request's keys, first in argv */
	uint32_t argc;
	struct kv_arg *argv;
	char data[];
};

static bool
klock_eq(const struct kd_node *n, const void *key, size_t len)
{
	const struct kv_klock *k = (const struct kv_klock *)n;

	return k->klen == len && memcmp(k->key, key, len) == 0;
}

static struct kv_klock *
klock_find(struct kv_shard *sh, const struct kv_arg *k)
{
	return (struct kv_klock *)kd_find(&sh->tx.locks, kv_hash(k->p, k->len), k->p, k->len,
					  klock_eq);
}

static void
serving(struct kv_shard *sh, int delta)
{
	uint64_t before = sh->tx.serving;

	sh->tx.serving += (uint64_t)(int64_t)delta;
	/* Held locks and queued requests keep this lcore until they are answered. */
	if (before == 0 && sh->tx.serving != 0)
		(void)cr_lease_acquire(&sh->tx.lease_serving);
	else if (before != 0 && sh->tx.serving == 0)
		(void)cr_lease_release(&sh->tx.lease_serving);
}

void
kv_tx_await(struct kv_shard *sh, int delta)
{
	uint64_t before = sh->tx.awaiting;

	sh->tx.awaiting += (uint64_t)(int64_t)delta;
	if (before == 0 && sh->tx.awaiting != 0)
		(void)cr_lease_acquire(&sh->tx.lease_origin);
	else if (before != 0 && sh->tx.awaiting == 0)
		(void)cr_lease_release(&sh->tx.lease_origin);
}

static uint8_t
mode_of(const struct needs *n, uint32_t i)
{
	return n->excl_each != NULL ? n->excl_each[(i - n->first) / n->step] : n->excl;
}

/* Does a request for keys write one of them? */
static bool
writes(const struct needs *n)
{
	uint32_t i;

	if (n->excl_each == NULL)
		return n->excl;
	for (i = n->first; i <= n->last; i += n->step)
		if (mode_of(n, i))
			return true;
	return false;
}

static bool
conflicts(struct kv_shard *sh, const struct needs *n)
{
	uint32_t i;

	if (n->none || sh->tx.held == 0)
		return false;
	/* The whole shard (a plain KEYS-like part, or a whole-shard lock): any exclusive
	 * lock is in the way; for an exclusive one, any lock at all. */
	if (n->whole)
		return n->excl || sh->tx.excl_held != 0;
	/* Keys: a whole-shard lock holds off every write, an exclusive one everything. */
	if (sh->tx.whole_excl != 0 || (sh->tx.whole_shared != 0 && writes(n)))
		return true;
	for (i = 0; i < n->nidx; i++) {
		struct kv_klock *k = klock_find(sh, &n->argv[n->idx[i]]);

		if (k != NULL && (k->excl != 0 || (n->excl && k->shared != 0)))
			return true;
	}
	if (n->nidx != 0)
		return false;
	for (i = n->first; i <= n->last; i += n->step) {
		struct kv_klock *k = klock_find(sh, &n->argv[i]);

		if (k != NULL && (k->excl != 0 || (mode_of(n, i) && k->shared != 0)))
			return true;
	}
	return false;
}

static void drop(struct kv_shard *sh, struct kv_hold *h);

/* Lock the keys of @p n (no conflict: checked). @return the hold, or NULL (ENOMEM). */
static struct kv_hold *
take(struct kv_shard *sh, const struct needs *n)
{
	uint32_t count = n->whole_lock ? 0 : (n->last - n->first) / n->step + 1, i, j = 0;
	struct kv_hold *h = kv_malloc(sizeof(*h) + count * sizeof(h->k[0]));

	if (h == NULL)
		return NULL;
	h->n = 0;
	h->whole = 0;
	if (n->whole_lock) {
		h->whole = n->excl ? KV_WHOLE_EXCL : KV_WHOLE_SHARED;
		if (n->excl) {
			sh->tx.whole_excl++;
			sh->tx.excl_held++;
		} else {
			sh->tx.whole_shared++;
		}
		sh->tx.held++;
	}
	for (i = n->first; count != 0 && i <= n->last; i += n->step, j++) {
		const struct kv_arg *a = &n->argv[i];
		struct kv_klock *k = klock_find(sh, a);
		uint8_t excl = mode_of(n, i);

		if (k == NULL) {
			k = kv_malloc(sizeof(*k) + a->len);
			if (k == NULL)
				break;
			k->shared = k->excl = 0;
			k->klen = (uint32_t)a->len;
			memcpy(k->key, a->p, a->len);
			k->node.hash = kv_hash(a->p, a->len);
			if (kd_add(&sh->tx.locks, &k->node) != 0) {
				kv_free(k);
				break;
			}
		}
		if (excl) {
			k->excl++;
			sh->tx.excl_held++;
		} else {
			k->shared++;
		}
		sh->tx.held++;
		h->k[h->n].lk = k;
		h->k[h->n++].excl = excl;
	}
	h->next = sh->tx.holds;
	if (h->next != NULL)
		h->next->pprev = &h->next;
	h->pprev = &sh->tx.holds;
	sh->tx.holds = h;
	if (h->n != count) {
		drop(sh, h); /* half taken: give it back */
		return NULL;
	}
	serving(sh, 1);
	return h;
}

static void
drop(struct kv_shard *sh, struct kv_hold *h)
{
	uint32_t i;

	*h->pprev = h->next;
	if (h->next != NULL)
		h->next->pprev = h->pprev;
	if (h->whole != 0) {
		if (h->whole == KV_WHOLE_EXCL) {
			sh->tx.whole_excl--;
			sh->tx.excl_held--;
			sh->tx.wgen++; /* anything may have been written */
		} else {
			sh->tx.whole_shared--;
		}
		sh->tx.held--;
	}
	for (i = 0; i < h->n; i++) {
		struct kv_klock *k = h->k[i].lk;

		if (h->k[i].excl) {
			k->excl--;
			sh->tx.excl_held--;
			kv_wv_touch(sh, k->node.hash); /* written, or may have been */
		} else {
			k->shared--;
		}
		sh->tx.held--;
		if (k->shared == 0 && k->excl == 0) {
			kd_unlink(&sh->tx.locks, &k->node);
			kv_free(k);
		}
	}
	kv_free(h);
}

/* ---- what a plain part touches ---- */

static void
plain_needs(const struct kpart *p, struct needs *n)
{
	const struct kv_cmd *cmd = p->kr->cmd;

	memset(n, 0, sizeof(*n));
	n->argv = p->argv;
	n->step = 1;
	if (cmd == NULL || p->fn == cmd_bw_watch) { /* a watch reads nothing */
		n->none = true;
		return;
	}
	n->excl = (cmd->flags & KV_WRITE) != 0;
	switch (cmd->route) {
	case KV_ROUTE_KEY1:
		n->first = n->last = (uint32_t)cmd->first_key;
		break;
	case KV_ROUTE_KEYS:
		n->first = 1;
		n->step = (uint32_t)cmd->step;
		n->last = p->argc - 1;
		break;
	case KV_ROUTE_TX: /* WATCH's keys: their versions once no transaction writes them */
		n->first = 1;
		n->last = p->argc - 1;
		break;
	case KV_ROUTE_ALL:
	case KV_ROUTE_SCAN:
		/* INFO and SLOWLOG read no key: they wait for no lock */
		n->none = cmd->merge >= KV_MERGE_INFO;
		n->whole = !n->none;
		break;
	case KV_ROUTE_MULTI: {
		int k = kv_cmd_keys(cmd, p->argv, p->argc, n->idx, NEEDS_MAX);

		if (k < 0 || (uint32_t)k == NEEDS_MAX)
			n->whole = true; /* malformed, or many keys: wait for every lock */
		else if (k == 0)
			n->none = true;
		else
			n->nidx = (uint32_t)k;
		return;
	}
	default:
		n->none = true;
		break;
	}
	if (!n->none && !n->whole && n->first >= p->argc)
		n->none = true;
}

static void
lock_needs(const struct kpart *p, struct needs *n)
{
	memset(n, 0, sizeof(*n));
	n->argv = p->lock->keys;
	n->first = 0;
	n->step = 1;
	if (p->lock->whole != 0) {
		/* The shard's keys are in it: only the whole-shard lock is taken. */
		n->whole = n->whole_lock = true;
		n->excl = p->lock->whole == KV_WHOLE_EXCL;
		return;
	}
	n->last = p->lock->nkeys - 1;
	n->excl_each = p->lock->excl;
	n->none = p->lock->nkeys == 0;
}

/* ---- WATCH's versions ---- */

void
kv_wv_touch_key(struct kv_shard *sh, const char *key, size_t len)
{
	kv_wv_touch(sh, kv_hash(key, len));
}

/* What a plain part that writes touched. */
static void
touch_needs(struct kv_shard *sh, const struct needs *n)
{
	uint32_t i;

	if (n->none)
		return;
	if (n->whole) {
		sh->tx.wgen++;
		return;
	}
	for (i = 0; i < n->nidx; i++)
		kv_wv_touch_key(sh, n->argv[n->idx[i]].p, n->argv[n->idx[i]].len);
	for (i = n->first; n->nidx == 0 && i <= n->last; i += n->step)
		kv_wv_touch_key(sh, n->argv[i].p, n->argv[i].len);
}

void
kv_wv_touch_cmd(struct kv_shard *sh, const struct kv_cmd *cmd, uint32_t argc,
		const struct kv_arg *argv)
{
	uint32_t small[16], *idx = argc <= 16 ? small : malloc(argc * sizeof(*idx));
	int n, i;

	if (cmd->route == KV_ROUTE_ALL || cmd->route == KV_ROUTE_SCAN || idx == NULL) {
		sh->tx.wgen++; /* FLUSH*, or no memory to say which: all of them */
		if (idx != small)
			free(idx);
		return;
	}
	n = kv_cmd_keys(cmd, argv, argc, idx, argc);
	for (i = 0; i < n; i++)
		kv_wv_touch_key(sh, argv[idx[i]].p, argv[idx[i]].len);
	if (idx != small)
		free(idx);
}

/* ---- running ---- */

/* Run @p fn; @p from says for whom (NULL: a transaction's own step, which never waits).
 * @return true if the command waits on this shard (a blocking pop): its answer comes
 * later. */
static bool
run_at(struct kv_shard *sh, void (*fn)(struct kv_ctx *x), uint32_t argc, const struct kv_arg *argv,
       struct rbuf *out, struct kv_from *from, int64_t now_ms)
{
	struct kv_ctx x = {
	    .sh = sh,
	    .argc = argc,
	    .argv = argv,
	    .out = out,
	    .now_ms = now_ms,
	    .from = from,
	};

	if (fn != NULL)
		fn(&x);
	if (kv_bw_pending(sh))
		kv_bw_serve(sh); /* a list or sorted set its clients wait for was made */
	return from != NULL && from->parked;
}

static bool
run(struct kv_shard *sh, void (*fn)(struct kv_ctx *x), uint32_t argc, const struct kv_arg *argv,
    struct rbuf *out, struct kv_from *from)
{
	return run_at(sh, fn, argc, argv, out, from, kv_now_ms());
}

/* A step of a command EXEC runs: at the EXEC's time (its request is read during the call
 * that brought the part, as its arguments are). */
static int64_t
part_now(const struct kpart *p)
{
	return p->kr != NULL && p->kr->now_ms != 0 ? p->kr->now_ms : kv_now_ms();
}

/* Run a plain part: it may wait on this shard (then p->state gets KP_PARKED). @return
 * true if it answered. */
static bool
run_plain(struct kv_shard *sh, struct kpart *p)
{
	struct kv_from from = {.token = p, .origin = p->origin, .epoch = p->epoch, .fn = p->fn};
	const struct kv_cmd *cmd = p->kr->cmd;
	bool waits = run(sh, p->fn, p->argc, p->argv, &p->out, &from);

	if (cmd != NULL && (cmd->flags & KV_WRITE) && p->fn != cmd_bw_watch) {
		struct needs n;

		plain_needs(p, &n);
		touch_needs(sh, &n);
	}
	if (!waits)
		return true;
	p->state |= KP_PARKED;
	return false;
}

/* Copy a part that must wait into the queue. */
static int
park(struct kv_shard *sh, struct kpart *p, const struct needs *n, bool lock)
{
	size_t size = sizeof(struct kv_wait), i;
	uint32_t nk = lock ? p->lock->nkeys : 0;
	const struct kv_arg *src = lock ? p->lock->keys : p->argv;
	uint32_t argc = lock ? nk : p->argc;
	struct kv_wait *w;
	char *d;

	/* A lock request's keys and a plain part's arguments are both copied as argv; a lock
	 * request with a part to run copies that part's arguments after its keys. */
	size += (size_t)(argc + (lock ? p->argc : 0)) * sizeof(struct kv_arg) + nk;
	for (i = 0; i < argc; i++)
		size += src[i].len + 1;
	for (i = 0; lock && i < p->argc; i++)
		size += p->argv[i].len + 1;
	w = kv_malloc(size);
	if (w == NULL)
		return -ENOMEM;
	memset(w, 0, sizeof(*w));
	w->lock = lock;
	w->origin = p->origin;
	w->token = p;
	w->epoch = p->epoch;
	w->fn = p->fn;
	w->ps_seq = p->ps_seq;
	w->ps_from = p->ps_from;
	w->needs = *n;
	w->argv = (struct kv_arg *)w->data;
	d = (char *)(w->argv + argc + (lock ? p->argc : 0));
	if (lock) {
		w->excl = (uint8_t *)d;
		if (nk > 0) /* a whole-shard lock has no keys and no excl array */
			memcpy(w->excl, p->lock->excl, nk);
		d += nk;
	}
	for (i = 0; i < argc + (lock ? p->argc : 0); i++) {
		const struct kv_arg *a = i < argc ? &src[i] : &p->argv[i - argc];

		if (a->len > 0)
			memcpy(d, a->p, a->len);
		d[a->len] = '\0';
		w->argv[i].p = d;
		w->argv[i].len = a->len;
		d += a->len + 1;
	}
	w->nkeys = nk;
	w->needs.argv = w->argv;
	w->needs.excl_each = lock && !n->whole_lock ? w->excl : NULL;
	w->argc = lock ? p->argc : p->argc;
	w->next = NULL;
	*sh->tx.wq_tail = w;
	sh->tx.wq_tail = &w->next;
	sh->tx.waiting++;
	sh->tx.parked_total++;
	serving(sh, 1);
	p->state |= KP_PARKED;
	return 0;
}

/* The arguments a queued item runs with (a lock request's come after its keys). */
static const struct kv_arg *
wait_args(const struct kv_wait *w)
{
	return w->lock ? w->argv + w->nkeys : w->argv;
}

bool
kv_tx_clear(struct kv_shard *sh)
{
	return sh->tx.held == 0 && sh->tx.wq_head == NULL;
}

bool
kv_tx_run_part(struct kv_shard *sh, struct kpart *p)
{
	struct needs n;
	struct kv_hold *h;

	if (p->ps_seq != 0)
		kv_ps_tag(p->ps_from, p->ps_seq); /* a PUBLISH: its number (pubsub.c) */
	if (p->kind == KP_TX_HOP) {
		/* Under its transaction's locks, at its time. */
		run_at(sh, p->fn, p->argc, p->argv, &p->out, NULL, part_now(p));
		return true;
	}
	if (p->kind == KP_PLAIN) {
		/* A PUBLISH part touches no key and runs at once, as one from EXEC or EVAL
		 * does (KP_TX_HOP): so every lcore runs a publishing lcore's messages in the
		 * order of their numbers, which a subscriber's move relies on (pubsub.c), and
		 * one client's PUBLISH and a later EXEC's reach subscribers in that order. */
		if (kv_tx_clear(sh) || p->ps_seq != 0)
			return run_plain(sh, p);
		plain_needs(p, &n);
	} else {
		lock_needs(p, &n);
	}
	if (sh->tx.wq_head != NULL || conflicts(sh, &n)) {
		if (park(sh, p, &n, p->kind == KP_TX_LOCK) == 0)
			return false;
		rb_reset(&p->out);
		rb_error(&p->out, "OOM out of memory queueing behind a transaction");
		return true;
	}
	if (p->kind == KP_TX_LOCK) {
		h = n.none ? NULL : take(sh, &n);
		if (h == NULL && !n.none) {
			rb_reset(&p->out);
			rb_error(&p->out, "OOM out of memory taking locks");
			return true;
		}
		p->lock->hold = h;
		p->lock->hold_epoch = sh->tx.epoch;
		sh->tx.tx_total++;
		run(sh, p->fn, p->argc, p->argv, &p->out, NULL);
		return true;
	}
	return run_plain(sh, p);
}

/* @p run_ns: how long it ran here, for its request's slow log duration. */
static void
late_send(struct kv_shard *sh, const struct kv_wait *w, struct kv_hold *h, const struct rbuf *r,
	  uint64_t run_ns)
{
	if (kv_tx_late_ran(sh, w->origin, w->token, w->epoch, h, r->p, r->len, run_ns) != 0) {
		CR_LOG(txlock_log, ERR, "out of memory answering a queued part; its client waits");
		if (h != NULL)
			kv_tx_release_here(sh, h);
	}
}

/* Serve the queue from its head while the head can run. */
static void
drain(struct kv_shard *sh)
{
	struct kv_wait *w;

	while ((w = sh->tx.wq_head) != NULL && !conflicts(sh, &w->needs)) {
		struct kv_hold *h = NULL;
		uint64_t t0 = cr_clock_ns();
		struct rbuf out;

		sh->tx.wq_head = w->next;
		if (sh->tx.wq_head == NULL)
			sh->tx.wq_tail = &sh->tx.wq_head;
		sh->tx.waiting--;
		rb_init(&out, NULL, 0);
		if (w->lock && !w->needs.none) {
			h = take(sh, &w->needs);
			if (h == NULL)
				rb_error(&out, "OOM out of memory taking locks");
			else
				sh->tx.tx_total++;
		}
		if (w->lock && (h != NULL || w->needs.none)) {
			run(sh, w->fn, w->argc, wait_args(w), &out, NULL);
			late_send(sh, w, h, &out, cr_clock_ns() - t0);
		} else if (w->lock) {
			late_send(sh, w, h, &out, 0);
		} else {
			/* nowait: its client stopped waiting; it answers as at its timeout. */
			struct kv_from from = {.token = w->token,
					       .origin = w->origin,
					       .epoch = w->epoch,
					       .fn = w->fn,
					       .expired = w->nowait};

			if (w->ps_seq != 0)
				kv_ps_tag(w->ps_from, w->ps_seq);

			if (!run(sh, w->fn, w->argc, wait_args(w), &out, &from))
				late_send(sh, w, h, &out, cr_clock_ns() - t0);
			if (w->needs.excl)
				touch_needs(sh, &w->needs);
		}
		rb_fini(&out);
		serving(sh, -1);
		kv_free(w);
	}
}

void
kv_tx_release_here(struct kv_shard *sh, void *hold)
{
	if (hold == NULL)
		return;
	drop(sh, hold);
	serving(sh, -1);
	drain(sh);
	if (kv_bw_pending(sh))
		kv_bw_serve(sh); /* what waited for these keys while they were locked */
}

/* The store's question before it deletes an expired key: a key a transaction holds stays
 * until the release (it reads at its own, frozen, time; anyone else sees it gone). */
static bool
pinned(void *arg, const char *key, size_t len)
{
	return kv_tx_key_locked(arg, key, len);
}

bool
kv_tx_key_locked(struct kv_shard *sh, const char *key, size_t len)
{
	struct kv_arg a = {.p = key, .len = len};

	if (sh->tx.held == 0)
		return false;
	return sh->tx.whole_shared != 0 || sh->tx.whole_excl != 0 || klock_find(sh, &a) != NULL;
}

bool
kv_tx_wait_cancel(struct kv_shard *sh, unsigned origin, struct kpart *token, uint64_t epoch)
{
	struct kv_wait *w;

	for (w = sh->tx.wq_head; w != NULL; w = w->next)
		if (!w->lock && w->origin == origin && w->token == token && w->epoch == epoch) {
			w->nowait = true;
			return true;
		}
	return false;
}

static void
release_recv(void *arg)
{
	struct kv_release *r = arg;
	struct kv_shard *sh = kv_shard_at(r->shard);
	struct kv_mem *prev;

	if (!kv_shard_owned(sh)) {
		/* Routed by a view no move had reached (shardmove.c I7): on to the owner. A
		 * refused one is freed: its shard, and its locks, are gone (a shutdown). */
		kv_move_forward(r->shard, &r->fwd, release_recv, free, r);
		return;
	}
	prev = kv_mem_swap(&sh->mem);
	if (r->epoch == sh->tx.epoch)
		kv_tx_release_here(sh, r->hold);
	kv_mem_swap(prev);
	free(r);
}

struct kv_release *
kv_tx_release_new(void)
{
	return malloc(sizeof(struct kv_release));
}

static void rel_task(void *arg);

static void
rel_timer(struct cr_timer *t, void *arg)
{
	(void)t;
	rel_task(arg);
}

/* Try again next turn (or in a millisecond, if no task can be deferred now). */
static void
rel_arm(struct kv_shard *sh)
{
	if (sh->tx.rel_armed)
		return;
	sh->tx.rel_armed = true;
	if (cr_defer(rel_task, sh) != 0)
		cr_timer_start(&sh->tx.rel_timer, 1000 * 1000ull);
}

/* Send what a full mailbox refused (or a shard's move held), in order. @return 0 all
 * sent; -EAGAIN a full mailbox refused one again (try next turn); -EBUSY its shard is
 * moving (its RELEASE wakes us: kv_tx_release_kick()). */
static int
rel_flush(struct kv_shard *sh)
{
	struct kv_release *r;

	while ((r = sh->tx.rel_head) != NULL) {
		struct kv_release *next = r->next;
		unsigned to;
		int rc = kv_route(r->shard, &to);

		if (rc == 0 && to == cr_lcore_id()) {
			/* It moved here meanwhile. */
			sh->tx.rel_head = next;
			if (next == NULL)
				sh->tx.rel_tail = &sh->tx.rel_head;
			release_recv(r);
			kv_tx_await(sh, -1);
			continue;
		}
		if (rc != 0)
			return -EBUSY; /* held (kv_route()) */
		rc = cr_send(to, release_recv, r);
		if (rc == -EAGAIN)
			return -EAGAIN;
		/* Accepted: the target owns r now. Refused otherwise (-ESHUTDOWN): that shard
		 * is gone, and its locks with it. */
		sh->tx.rel_head = next;
		if (next == NULL)
			sh->tx.rel_tail = &sh->tx.rel_head;
		if (rc != 0)
			free(r);
		kv_tx_await(sh, -1);
	}
	return 0;
}

static void
rel_task(void *arg)
{
	struct kv_shard *sh = arg;

	sh->tx.rel_armed = false;
	cr_timer_stop(&sh->tx.rel_timer);
	if (rel_flush(sh) == -EAGAIN)
		rel_arm(sh);
}

void
kv_tx_release_kick(struct kv_shard *sh)
{
	if (sh->tx.rel_head != NULL)
		rel_arm(sh);
}

void
kv_tx_release(unsigned shard, void *hold, uint64_t epoch, struct kv_release **rel)
{
	struct kv_shard *here = kv_here();
	struct kv_release *r = *rel;
	unsigned to = 0;
	int rc;

	if (hold == NULL)
		return;
	*rel = NULL;
	if (r == NULL) {
		/* Broken invariant: every hold is asked for with its release made. */
		CR_LOG(txlock_log, ERR, "a hold on shard %u without its release", shard);
		abort();
	}
	r->next = NULL;
	r->shard = shard;
	r->hold = hold;
	r->epoch = epoch; /* the incarnation that granted it: a later one ignores it */
	/* Behind releases already refused: a full mailbox (or a shard moving) keeps them
	 * all, in order. */
	rc = here->tx.rel_head == NULL ? kv_route(shard, &to) : -EAGAIN;
	if (rc == 0 && to == cr_lcore_id()) {
		release_recv(r);
		return;
	}
	if (rc == 0)
		rc = cr_send(to, release_recv, r);
	if (rc == 0)
		return;
	if (rc != -EAGAIN) {
		free(r); /* -ESHUTDOWN: that shard is gone, its locks with it */
		return;
	}
	*here->tx.rel_tail = r;
	here->tx.rel_tail = &r->next;
	kv_tx_await(here, 1); /* this lcore stays until the release is sent */
	rel_arm(here);
}

int
kv_tx_shard_init(struct kv_shard *sh)
{
	kd_init(&sh->tx.locks);
	sh->tx.wq_head = NULL;
	sh->tx.wq_tail = &sh->tx.wq_head;
	sh->tx.held = sh->tx.excl_held = sh->tx.waiting = 0;
	sh->tx.whole_shared = sh->tx.whole_excl = 0;
	sh->tx.serving = 0;
	sh->tx.holds = NULL;
	/* The shard's incarnation: once per process now (a shard moves, it does not stop
	 * while the process runs); holds and WATCHes name it. */
	sh->tx.epoch++;
	if (sh->tx.wver == NULL)
		sh->tx.wver = calloc(KV_WVER_SLOTS, sizeof(*sh->tx.wver));
	if (sh->tx.wver == NULL)
		return -ENOMEM;
	kv_store_watch(sh->store, sh->tx.wver, KV_WVER_SLOTS - 1);
	kv_store_pin(sh->store, pinned, sh);
	kv_tx_late_init(sh);
	return 0;
}

void
kv_tx_origin_init(struct kv_shard *sh)
{
	sh->tx.awaiting = 0;
	sh->tx.rel_head = NULL;
	sh->tx.rel_tail = &sh->tx.rel_head;
	sh->tx.rel_armed = false;
	cr_timer_init(&sh->tx.rel_timer, rel_timer, sh);
}

void
kv_tx_give(struct kv_shard *sh)
{
	kv_tx_late_give(sh);
	if (sh->tx.serving != 0)
		(void)cr_lease_release(&sh->tx.lease_serving);
}

void
kv_tx_adopt(struct kv_shard *sh)
{
	/* What it serves keeps its new lcore, as it kept the old one (a shutdown waits). */
	if (sh->tx.serving != 0)
		(void)cr_lease_acquire(&sh->tx.lease_serving);
	kv_tx_late_adopt(sh);
}

static void
free_klock(struct kd_node *n)
{
	kv_free(n);
}

void
kv_tx_shard_fini(struct kv_shard *sh)
{
	struct kv_wait *w;
	unsigned budget = ~0u;

	kv_tx_late_flush(sh);
	/* What still waits gets an error, if its origin can hear it. */
	while ((w = sh->tx.wq_head) != NULL) {
		struct rbuf out;

		sh->tx.wq_head = w->next;
		rb_init(&out, NULL, 0);
		rb_error(&out, "ERR the shard of this key is unavailable (stopping)");
		late_send(sh, w, NULL, &out, 0);
		rb_fini(&out);
		kv_free(w);
	}
	sh->tx.wq_tail = &sh->tx.wq_head;
	kv_tx_late_fini(sh); /* what cannot be sent now is dropped */
	/* Holds still out are abandoned with their locks; releases for them that come
	 * later carry this incarnation's epoch and are ignored by the next. */
	while (sh->tx.holds != NULL) {
		struct kv_hold *h = sh->tx.holds;

		sh->tx.holds = h->next;
		kv_free(h);
	}
	kd_drain(&sh->tx.locks, free_klock, &budget);
	sh->tx.held = sh->tx.excl_held = 0;
	sh->tx.whole_shared = sh->tx.whole_excl = 0;
	kv_store_watch(sh->store, NULL, 0);
	kv_store_pin(sh->store, NULL, NULL);
	free(sh->tx.wver);
	sh->tx.wver = NULL;
	(void)cr_lease_release(&sh->tx.lease_serving);
}

void
kv_tx_origin_fini(struct kv_shard *sh)
{
	/* Releases still refused: one more try, then they go with the shards that stop too
	 * (an lcore that retires alone waits for them: each keeps its lease). */
	cr_timer_stop(&sh->tx.rel_timer);
	sh->tx.rel_armed = false;
	if (rel_flush(sh) != 0)
		CR_LOG(
		    txlock_log, WARNING,
		    "stopping with lock releases not sent (a full mailbox, or their shard moving)");
	while (sh->tx.rel_head != NULL) {
		struct kv_release *r = sh->tx.rel_head;

		sh->tx.rel_head = r->next;
		free(r);
	}
	sh->tx.rel_tail = &sh->tx.rel_head;
	(void)cr_lease_release(&sh->tx.lease_origin);
}
