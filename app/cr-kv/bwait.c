/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shard side of blocking pops (see bpop.h): who waits for which keys, FIFO per key;
 * serving them when a key they wait for is made; watchers of requests over several
 * shards; cancels.
 *
 * A waiter is a copy of its command (run again to serve it), queued on each of its keys
 * (struct kv_bent). A key made while waiters exist goes on the ready list; after the
 * command that made it, kv_bw_serve() walks each ready key's queue in order: a waiter of
 * the key's type runs its command again (which pops and answers it, as its origin's late
 * answer) and leaves every queue; a watcher is told (it stays, until its request cancels
 * it). A ready key locked by a transaction, or whose first waiter would write a locked
 * key, stays ready until a release serves it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>

#include "cr_log.h"
#include "kv.h"

CR_LOG_COMPONENT(bwait_log, "app.kv")

struct kv_bent;

struct kv_bkey {
	struct kd_node node;
	struct kv_bent *head, **tail;
	struct kv_bkey *next_ready;
	bool ready; /* on the ready list: freed when it leaves it, not before */
	uint32_t klen;
	char key[];
};

struct kv_bwaiter;

struct kv_bent {
	struct kv_bent *next, **pprev;
	struct kv_bkey *k;
	struct kv_bwaiter *w;
};

/* Who waits: (origin shard, watcher or not, the part or the request id). */
struct wid {
	uint64_t origin, watch, token;
};

struct kv_bwaiter {
	struct kd_node node; /* in bw.waiters */
	struct wid id;
	uint64_t epoch; /* the origin's incarnation */
	unsigned type;	/* what the keys must hold to serve it */
	int dst;	/* argv index of a key it writes, or -1 */
	void (*fn)(struct kv_ctx *x);
	uint32_t argc;
	struct kv_arg *argv;
	uint64_t run_ns; /* its command's runs here while served (slowlog.h) */
	uint32_t nent;
	struct kv_bent ent[];
};

static bool
bkey_eq(const struct kd_node *n, const void *key, size_t len)
{
	const struct kv_bkey *k = (const struct kv_bkey *)n;

	return k->klen == len && memcmp(k->key, key, len) == 0;
}

static bool
waiter_eq(const struct kd_node *n, const void *key, size_t len)
{
	(void)len;
	return memcmp(&((const struct kv_bwaiter *)n)->id, key, sizeof(struct wid)) == 0;
}

static struct kv_bkey *
bkey_find(struct kv_shard *sh, const char *key, size_t len)
{
	return (struct kv_bkey *)kd_find(&sh->bw.keys, kv_hash(key, len), key, len, bkey_eq);
}

static struct kv_bwaiter *
waiter_find(struct kv_shard *sh, const struct wid *id)
{
	return (struct kv_bwaiter *)kd_find(&sh->bw.waiters, kv_hash(id, sizeof(*id)), id,
					    sizeof(*id), waiter_eq);
}

static void
bkey_maybe_free(struct kv_shard *sh, struct kv_bkey *k)
{
	if (k->head != NULL || k->ready)
		return;
	kd_unlink(&sh->bw.keys, &k->node);
	kv_free(k);
}

/* Take @p w off every queue and free it. */
static void
unregister(struct kv_shard *sh, struct kv_bwaiter *w)
{
	uint32_t i;

	for (i = 0; i < w->nent; i++) {
		struct kv_bent *e = &w->ent[i];

		*e->pprev = e->next;
		if (e->next != NULL)
			e->next->pprev = e->pprev;
		else
			e->k->tail = e->pprev;
		bkey_maybe_free(sh, e->k);
	}
	kd_unlink(&sh->bw.waiters, &w->node);
	if (!w->id.watch)
		atomic_fetch_sub_explicit(&kv.blocked_clients, 1, memory_order_relaxed);
	kv_free(w);
}

/* Queue a waiter for the keys argv[idx[0..n)] (duplicates once), copying argv. */
static int
enqueue(struct kv_shard *sh, const struct wid *id, uint64_t epoch, unsigned type, int dst,
	void (*fn)(struct kv_ctx *x), uint32_t argc, const struct kv_arg *argv, const uint32_t *idx,
	uint32_t n)
{
	size_t size =
	    sizeof(struct kv_bwaiter) + n * sizeof(struct kv_bent) + kv_args_size(argv, argc);
	struct kv_bwaiter *w;
	uint32_t i, j;

	w = kv_malloc(size);
	if (w == NULL)
		return -ENOMEM;
	memset(w, 0, sizeof(*w));
	w->id = *id;
	w->epoch = epoch;
	w->type = type;
	w->dst = dst;
	w->fn = fn;
	w->argc = argc;
	w->argv = (struct kv_arg *)&w->ent[n];
	kv_args_copy(w->argv, (char *)(w->argv + argc), argv, argc);
	w->node.hash = kv_hash(id, sizeof(*id));
	if (kd_add(&sh->bw.waiters, &w->node) != 0) {
		kv_free(w);
		return -ENOMEM;
	}
	if (!id->watch)
		atomic_fetch_add_explicit(&kv.blocked_clients, 1, memory_order_relaxed);
	for (i = 0; i < n; i++) {
		const struct kv_arg *a = &w->argv[idx[i]];
		struct kv_bkey *k;
		struct kv_bent *e;

		for (j = 0; j < i; j++)
			if (w->argv[idx[j]].len == a->len &&
			    memcmp(w->argv[idx[j]].p, a->p, a->len) == 0)
				break;
		if (j < i)
			continue; /* BLPOP k k: queued once */
		k = bkey_find(sh, a->p, a->len);
		if (k == NULL) {
			k = kv_malloc(sizeof(*k) + a->len);
			if (k == NULL)
				goto nomem;
			memset(k, 0, sizeof(*k));
			k->tail = &k->head;
			k->klen = (uint32_t)a->len;
			memcpy(k->key, a->p, a->len);
			k->node.hash = kv_hash(a->p, a->len);
			if (kd_add(&sh->bw.keys, &k->node) != 0) {
				kv_free(k);
				goto nomem;
			}
		}
		e = &w->ent[w->nent++];
		e->k = k;
		e->w = w;
		e->next = NULL;
		e->pprev = k->tail;
		*k->tail = e;
		k->tail = &e->next;
	}
	return 0;
nomem:
	unregister(sh, w);
	return -ENOMEM;
}

int
kv_bw_park(struct kv_ctx *x, unsigned type, const uint32_t *idx, uint32_t n, int dst)
{
	struct kv_from *f = x->from;
	struct wid id;
	int rc;

	if (f == NULL || f->serving || f->expired)
		return -EAGAIN;
	id = (struct wid){.origin = f->origin, .watch = 0, .token = (uint64_t)(uintptr_t)f->token};
	rc = enqueue(x->sh, &id, f->epoch, type, dst, f->fn, x->argc, x->argv, idx, n);
	if (rc == 0)
		f->parked = true;
	return rc;
}

void
cmd_bw_watch(struct kv_ctx *x)
{
	uint32_t small[16], *idx, i, n = x->argc - 3;
	long long rid;
	struct wid id;
	int rc = -ENOMEM;

	if (x->from == NULL || !resp_string2ll(x->argv[1].p, x->argv[1].len, &rid)) {
		rb_error(x->out, "ERR watch outside a part");
		return;
	}
	idx = n <= 16 ? small : malloc(n * sizeof(*idx));
	if (idx != NULL) {
		for (i = 0; i < n; i++)
			idx[i] = 3 + i;
		id = (struct wid){.origin = x->from->origin, .watch = 1, .token = (uint64_t)rid};
		rc = enqueue(x->sh, &id, x->from->epoch,
			     x->argv[2].p[0] == 'z' ? KV_T_ZSET : KV_T_LIST, -1, NULL, x->argc,
			     x->argv, idx, n);
	}
	if (idx != small)
		free(idx);
	if (rc == 0)
		rb_ok(x->out);
	else
		rb_error(x->out, kv_err_oom);
}

/* ---- serving ---- */

void
kv_bw_signal(struct kv_shard *sh, const char *key, size_t klen, unsigned type)
{
	struct kv_bkey *k;

	if ((type != KV_T_LIST && type != KV_T_ZSET) || kd_count(&sh->bw.keys) == 0)
		return;
	k = bkey_find(sh, key, klen);
	if (k == NULL || k->ready)
		return;
	k->ready = true;
	k->next_ready = NULL;
	*sh->bw.ready_tail = k;
	sh->bw.ready_tail = &k->next_ready;
}

bool
kv_bw_pending(const struct kv_shard *sh)
{
	return sh->bw.ready_head != NULL;
}

/* Run waiter @p w's command again; true if it answered (and is gone). */
static bool
serve_one(struct kv_shard *sh, struct kv_bwaiter *w)
{
	struct kv_from from = {.serving = true, .fn = w->fn};
	struct rbuf out;
	struct kv_ctx x = {
	    .sh = sh,
	    .argc = w->argc,
	    .argv = w->argv,
	    .out = &out,
	    .now_ms = kv_now_ms(),
	    .from = &from,
	};
	uint64_t t0 = cr_clock_ns();
	bool done;

	rb_init(&out, NULL, 0);
	w->fn(&x);
	w->run_ns += cr_clock_ns() - t0;
	done = out.len != 0;
	if (done) {
		uint32_t i;

		for (i = 0; i < w->nent; i++) /* popped from one (or failed): WATCH sees it */
			kv_wv_touch_key(sh, w->ent[i].k->key, w->ent[i].k->klen);
		if (w->dst >= 0)
			kv_wv_touch_key(sh, w->argv[w->dst].p, w->argv[w->dst].len);
		kv_tx_answer_ran(sh, (unsigned)w->id.origin, (struct kpart *)(uintptr_t)w->id.token,
				 w->epoch, out.p, out.len, w->run_ns);
		unregister(sh, w);
	}
	rb_fini(&out);
	return done;
}

/* Would serving @p w touch a key a transaction holds? */
static bool
locked(struct kv_shard *sh, const struct kv_bwaiter *w)
{
	uint32_t i;

	if (sh->tx.held == 0)
		return false;
	for (i = 0; i < w->nent; i++)
		if (kv_tx_key_locked(sh, w->ent[i].k->key, w->ent[i].k->klen))
			return true;
	return w->dst >= 0 && kv_tx_key_locked(sh, w->argv[w->dst].p, w->argv[w->dst].len);
}

/* Serve key @p k's queue while it holds its type. @return false if a lock stops it. */
static bool
serve_key(struct kv_shard *sh, struct kv_bkey *k)
{
	struct kv_bent *e = k->head;
	uint64_t h = kv_hash(k->key, k->klen);

	if (kv_tx_key_locked(sh, k->key, k->klen))
		return false;
	while (e != NULL) {
		struct kv_bwaiter *w = e->w;
		struct kv_bent *next = e->next;
		struct kv_entry *v =
		    kv_lookup_ex(sh->store, k->key, k->klen, h, kv_now_ms(), false);

		if (v == NULL)
			break; /* emptied (and deleted) */
		if (v->type != w->type) {
			e = next; /* waits for another type: stays blocked (Redis 7.0) */
			continue;
		}
		if (w->id.watch) {
			kv_tx_notify(sh, (unsigned)w->id.origin, w->epoch, w->id.token);
			e = next;
			continue;
		}
		if (locked(sh, w))
			return false;
		if (!serve_one(sh, w))
			break; /* nothing to pop after all */
		e = next;      /* w's entries are gone; next is another waiter's */
	}
	return true;
}

void
kv_bw_serve(struct kv_shard *sh)
{
	struct kv_bkey *k, *later = NULL, **later_tail = &later;

	while ((k = sh->bw.ready_head) != NULL) {
		sh->bw.ready_head = k->next_ready;
		if (sh->bw.ready_head == NULL)
			sh->bw.ready_tail = &sh->bw.ready_head;
		/* Still marked ready while it is served: not freed under us, and not queued
		 * again by what its waiters make (served in this walk anyway). */
		if (!serve_key(sh, k)) {
			k->next_ready = NULL; /* again once the lock is released */
			*later_tail = k;
			later_tail = &k->next_ready;
			continue;
		}
		k->ready = false;
		bkey_maybe_free(sh, k);
	}
	if (later != NULL) {
		*sh->bw.ready_tail = later;
		sh->bw.ready_tail = later_tail;
	}
}

/* ---- cancels ---- */

struct cancel {
	struct wid id;
	uint64_t epoch;
	unsigned shard;
	struct kv_fwd fwd; /* forwarded by a lcore that does not own the shard (any more) */
};

static void
cancel_here(struct kv_shard *sh, const struct cancel *c)
{
	struct kv_bwaiter *w = waiter_find(sh, &c->id);
	struct kpart *token = (struct kpart *)(uintptr_t)c->id.token;

	if (w != NULL && w->epoch == c->epoch) {
		if (!w->id.watch)
			kv_tx_answer(sh, (unsigned)c->id.origin, token, c->epoch, "*-1\r\n", 5);
		unregister(sh, w);
	} else if (w == NULL && !c->id.watch) {
		/* Still queued behind locks: when its turn comes it pops what is there or
		 * answers a null array, as a timeout. Else it was served, and that answer is
		 * on its way. */
		(void)kv_tx_wait_cancel(sh, (unsigned)c->id.origin, token, c->epoch);
	}
}

/* On the shard's owner: a cancel is sent there, held while the shard moves; one routed
 * by a view no move had reached goes on to the owner (shardmove.c I7). */
static void
cancel_recv(void *arg)
{
	struct cancel *c = arg;
	struct kv_shard *sh = kv_shard_at(c->shard);
	struct kv_mem *prev;

	if (!kv_shard_owned(sh)) {
		kv_move_forward(c->shard, &c->fwd, cancel_recv, free, c);
		return;
	}
	prev = kv_mem_swap(&sh->mem);
	cancel_here(sh, c);
	kv_mem_swap(prev);
	free(c);
}

int
kv_bw_cancel(unsigned shard, unsigned origin, uint64_t epoch, bool watch, uint64_t token)
{
	struct cancel c = {.id = {.origin = origin, .watch = watch, .token = token},
			   .epoch = epoch,
			   .shard = shard};
	struct cancel *m;
	unsigned to;
	int rc = kv_route(shard, &to);

	if (rc != 0)
		return rc; /* the shard is moving: -EAGAIN, tried again */
	m = malloc(sizeof(*m));
	if (m == NULL)
		return -EAGAIN;
	*m = c;
	if (to == cr_lcore_id()) {
		cancel_recv(m);
		return 0;
	}
	rc = cr_send(to, cancel_recv, m);
	if (rc != 0)
		free(m);
	return rc;
}

/* ---- start, stop ---- */

void
kv_bw_init(struct kv_shard *sh)
{
	kd_init(&sh->bw.keys);
	kd_init(&sh->bw.waiters);
	sh->bw.ready_head = NULL;
	sh->bw.ready_tail = &sh->bw.ready_head;
}

void
kv_bw_fini(struct kv_shard *sh)
{
	static const char err[] = "-ERR the shard of this key is unavailable (stopping)\r\n";
	struct kd_iter it;
	struct kd_node *n;
	unsigned left = 0;

	while (sh->bw.ready_head != NULL) {
		struct kv_bkey *k = sh->bw.ready_head;

		sh->bw.ready_head = k->next_ready;
		k->ready = false;
		bkey_maybe_free(sh, k);
	}
	sh->bw.ready_tail = &sh->bw.ready_head;
	/* Every waiter still waiting gets an error, if its origin can hear it. */
	kd_iter_init(&sh->bw.waiters, &it);
	while ((n = kd_next(&it)) != NULL) {
		struct kv_bwaiter *w = (struct kv_bwaiter *)n;

		if (!w->id.watch) {
			kv_tx_answer(sh, (unsigned)w->id.origin,
				     (struct kpart *)(uintptr_t)w->id.token, w->epoch, err,
				     sizeof(err) - 1);
			left++;
		}
		unregister(sh, w); /* the node just returned: allowed */
	}
	kd_iter_end(&it);
	if (left != 0)
		CR_LOG(bwait_log, INFO, "shard %u stopping: %u blocked clients answered an error",
		       sh->index, left);
	kd_release(&sh->bw.keys);
	kd_release(&sh->bw.waiters);
}
