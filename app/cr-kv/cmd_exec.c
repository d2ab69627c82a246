/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MULTI, EXEC, DISCARD, WATCH, UNWATCH, as Redis 7.0 has them, across shards.
 *
 * MULTI makes the connection queue its commands (a copy of each, +QUEUED); a command
 * refused before it would be queued (unknown, wrong arity, OOM) makes the EXEC answer
 * EXECABORT. EXEC is one transaction (txn.h) over every key of every queued command and
 * every WATCHed key: their shards are locked one after another in ascending order
 * (exclusively where a command writes; whole shards for KEYS, FLUSHALL, SCAN...), each
 * shard reports the versions of the watched keys as its lock is granted, and once every
 * lock is held the versions are compared with what WATCH saw: any change, and the EXEC
 * answers a null array. Otherwise the queued commands run one after another, each as it
 * would outside (on its keys' shards, merged...) but as the locks' holder (its parts are
 * KP_TX_HOP: they wait for nobody), and the locks are released once the last has
 * answered. No other client sees a state between two of them.
 *
 * WATCH's versions and their comparison: cmd_watch.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv.h"

struct kv_mxcmd {
	struct kv_mxcmd *next;
	const struct kv_cmd *cmd;
	uint32_t argc;
	struct kv_arg *argv;
	char data[];
};

struct kv_multi {
	struct kv_mxcmd *head, **tail;
	uint32_t n;
	bool dirty; /* a command was refused: EXEC answers EXECABORT */
};

/* An EXEC under way. */
struct exec {
	struct kconn *kc;
	struct kreq *kr;  /* the EXEC request: argv[1..] are the keys locked */
	struct kv_tx *tx; /* its locks, or NULL (nothing to lock) */
	struct kv_multi *mx;
	struct kv_watch *watch;
	struct kv_mxcmd *next; /* the next queued command to run */
	const struct kv_mxcmd *cur; /* the one running: the slow log's entry, as queued */
	uint64_t cur_ns;	    /* what it ran so far, over its attempts */
	int64_t now_ms; /* the EXEC's time, once it holds its locks: every command runs at it */
	struct rbuf out;       /* the reply: "*N" and the replies so far */
	bool running, in_loop, done;
	/* A blocking pop over keys of several shards: its keys tried one by one. */
	const struct kv_mxcmd *btry;
	uint32_t bfirst, bkey, bn;
};

static const char execabort[] = "-EXECABORT Transaction discarded because of previous errors.\r\n";

/* ---- the connection's state ---- */

/* A reply made now, in its turn. */
static void
reply_raw(struct kconn *kc, const char *s, size_t n)
{
	struct rbuf *o = kc_local_out(kc);

	if (o != NULL)
		rb_raw(o, s, n);
}

static void
multi_drop(struct kv_multi *mx)
{
	while (mx != NULL && mx->head != NULL) {
		struct kv_mxcmd *c = mx->head;

		mx->head = c->next;
		free(c);
	}
	free(mx);
}

void
kv_multi_free(struct kconn *kc)
{
	multi_drop(kc->mx);
	kc->mx = NULL;
	kv_watch_drop(kc->watch);
	kc->watch = NULL;
}

long long
kv_multi_count(const struct kconn *kc)
{
	return kc->mx != NULL ? (long long)kc->mx->n : -1;
}

bool
kv_multi_queues(const struct kv_cmd *cmd)
{
	/* Redis runs these at once inside MULTI; UNWATCH is queued (and does nothing). */
	if (cmd->route == KV_ROUTE_TX)
		return cmd->fn == cmd_unwatch;
	return cmd->fn != cmd_quit && cmd->fn != cmd_reset;
}

void
kv_multi_flag(struct kconn *kc)
{
	if (kc->mx != NULL)
		kc->mx->dirty = true;
}

void
kv_multi_refuse_exec(struct kconn *kc, const char *why)
{
	struct rbuf *o = kc_local_out(kc);

	kv_multi_free(kc); /* Redis's execCommandAbort(): discarded, unwatched */
	if (o != NULL)
		rb_errorf(o, "EXECABORT Transaction discarded because of: %s", why);
}

void
kv_multi_queue(struct kconn *kc, const struct kv_cmd *cmd, const struct kv_ctx *x)
{
	size_t size = sizeof(struct kv_mxcmd) + kv_args_size(x->argv, x->argc);
	struct kv_mxcmd *c = malloc(size);
	struct kv_multi *mx = kc->mx;

	if (c == NULL) {
		mx->dirty = true;
		kc_reply_error(kc, "OOM out of memory queueing the command", 38);
		return;
	}
	c->next = NULL;
	c->cmd = cmd;
	c->argc = x->argc;
	c->argv = (struct kv_arg *)c->data;
	kv_args_copy(c->argv, c->data + x->argc * sizeof(struct kv_arg), x->argv, x->argc);
	*mx->tail = c;
	mx->tail = &c->next;
	mx->n++;
	reply_raw(kc, "+QUEUED\r\n", 9);
}

/* ---- EXEC: running the queued commands ---- */

static void exec_run(struct exec *ex);

static void
exec_free(void *arg)
{
	struct exec *ex = arg;

	if (ex == NULL)
		return;
	multi_drop(ex->mx);
	kv_watch_drop(ex->watch);
	rb_fini(&ex->out);
	free(ex);
}

static void btry_next(struct exec *ex);

/* A queued command has answered: logged as Redis logs each command EXEC runs. */
static void
step_ran(struct exec *ex, const struct rbuf *o)
{
	const struct kv_mxcmd *c = ex->cur;

	if (c != NULL)
		kv_cmd_ran(ex->kc, c->cmd, c->argc, c->argv, ex->cur_ns,
			   o->len != 0 && o->p[0] == '-'); /* slowlog.h */
	ex->cur = NULL;
}

static void
step_done(struct kreq *sub)
{
	struct exec *ex = sub->owner;
	const struct rbuf *o = sub->final;

	ex->cur_ns += sub->run_ns;
	if (ex->btry != NULL) {
		/* Nothing in that key: the next one, as Redis's blockingPop walks them. */
		if (o->len >= 3 && memcmp(o->p, "*-1", 3) == 0 && ++ex->bkey < ex->bn) {
			kreq_free(ex->kc->sh, sub);
			btry_next(ex);
			return;
		}
		ex->btry = NULL;
	}
	if (o->len != 0 && o->p[0] == '-')
		kv_errstat_note(ex->kc->sh, o->p, o->len); /* as Redis: each error in EXEC */
	if (ex->kc->resp == 3 && ex->cur != NULL)
		kv_resp3_append(ex->cur->cmd, ex->cur->argc, ex->cur->argv, o, &ex->out);
	else
		rb_raw(&ex->out, o->p, o->len);
	step_ran(ex, o);
	kreq_free(ex->kc->sh, sub);
	ex->running = false;
	exec_run(ex);
}

static void
step_local(struct kreq *sub)
{
	sub->final = &sub->reply;
	kreq_finish(sub); /* step_done() */
}

/* The one shard all of a command's keys are on, -1 for several, -2 for none. */
static int
keys_shard(const struct kv_cmd *cmd, const struct kreq *sub)
{
	uint32_t *idx = malloc((sub->argc + 1) * sizeof(*idx));
	int n, i, s = -2;

	if (idx == NULL)
		return -2;
	n = kv_cmd_keys(cmd, sub->argv, sub->argc, idx, sub->argc);
	for (i = 0; i < n && s != -1; i++) {
		int k = (int)key_shard(&sub->argv[idx[i]]);

		s = s == -2 || s == k ? k : -1;
	}
	free(idx);
	return s;
}

/* Try key ex->bkey of the blocking pop ex->btry alone, on its shard, without blocking. */
static void
btry_next(struct exec *ex)
{
	const struct kv_mxcmd *c = ex->btry;
	const struct kv_arg *k = &c->argv[ex->bfirst + ex->bkey];
	struct kv_arg argv[8], one = {"1", 1};
	uint32_t argc = 0, i;
	struct kreq *sub;

	argv[argc++] = c->argv[0];
	if (ex->bfirst == 1) { /* BLPOP key... timeout */
		argv[argc++] = *k;
		argv[argc++] = c->argv[c->argc - 1];
	} else { /* BLMPOP timeout numkeys key... where [COUNT n] */
		argv[argc++] = c->argv[1];
		argv[argc++] = one;
		argv[argc++] = *k;
		for (i = ex->bfirst + ex->bn; i < c->argc && argc < 8; i++)
			argv[argc++] = c->argv[i];
	}
	sub = kreq_new(ex->kc->sh, ex->kc, c->cmd, argc, argv);
	if (sub == NULL) {
		ex->btry = NULL;
		rb_error(&ex->out, kv_err_oom);
		ex->running = false;
		exec_run(ex);
		return;
	}
	sub->on_done = step_done;
	sub->owner = ex;
	sub->hop = true;
	sub->now_ms = ex->now_ms;
	kreq_launch_one(sub, key_shard(k));
}

/* A blocking pop over keys of several shards inside MULTI pops as Redis's does there,
 * without blocking: BLMOVE and BRPOPLPUSH as LMOVE and RPOPLPUSH (one transaction over
 * both keys), the others from the first of their keys with something. */
static void
step_bpop(struct exec *ex, struct kreq *sub, const struct kv_mxcmd *c)
{
	const char *n = c->argv[0].p;
	bool zset = strcasecmp(n, "bzmpop") == 0;

	if (strcasecmp(n, "blmove") == 0 || strcasecmp(n, "brpoplpush") == 0) {
		const struct kv_cmd *m = kv_cmd_lookup(n + 1, c->argv[0].len - 1);
		struct kv_arg argv[5];
		uint32_t i, argc = c->argc - 1;
		struct kreq *mv;

		for (i = 0; i < argc; i++)
			argv[i] = c->argv[i];
		argv[0].p = n + 1;
		argv[0].len--;
		mv = m != NULL ? kreq_new(ex->kc->sh, ex->kc, m, argc, argv) : NULL;
		if (mv == NULL) {
			rb_error(&sub->reply, kv_err_oom);
			step_local(sub);
			return;
		}
		kreq_free(ex->kc->sh, sub);
		mv->on_done = step_done;
		mv->owner = ex;
		mv->hop = true;
		mv->now_ms = ex->now_ms;
		m->multi(mv);
		return;
	}
	ex->btry = c;
	ex->bkey = 0;
	if (zset || strcasecmp(n, "blmpop") == 0) {
		long long nk = 0;

		resp_string2ll(c->argv[2].p, c->argv[2].len, &nk); /* checked: keys on 2 shards */
		ex->bfirst = 3;
		ex->bn = (uint32_t)nk;
	} else {
		ex->bfirst = 1;
		ex->bn = c->argc - 2;
	}
	kreq_free(ex->kc->sh, sub);
	btry_next(ex);
}

/* Run one queued command as it would run outside, as the holder of the EXEC's locks. */
static void
step(struct exec *ex, const struct kv_mxcmd *c)
{
	struct kconn *kc = ex->kc;
	const struct kv_cmd *cmd = c->cmd;
	struct kreq *sub = kreq_new(kc->sh, kc, cmd, c->argc, c->argv);
	struct kv_ctx x;
	uint64_t t0;
	unsigned i;
	int s;

	if (sub == NULL) {
		rb_error(&ex->out, kv_err_oom);
		ex->running = false;
		return;
	}
	ex->cur = c;
	ex->cur_ns = 0;
	sub->on_done = step_done;
	sub->owner = ex;
	sub->hop = true;
	sub->now_ms = ex->now_ms;
	memset(&x, 0, sizeof(x));
	x.sh = kc->sh;
	x.argc = sub->argc;
	x.argv = sub->argv;
	x.out = &sub->reply;
	x.now_ms = ex->now_ms;
	x.kc = kc;
	x.req = sub;
	t0 = cr_clock_ns();
	if (cmd->precheck != NULL && !cmd->precheck(&x)) {
		sub->run_ns += cr_clock_ns() - t0;
		step_local(sub);
		return;
	}
	switch (cmd->route) {
	case KV_ROUTE_LOCAL:
		cmd->fn(&x);
		sub->run_ns += cr_clock_ns() - t0;
		if (!x.taken) /* else it finishes sub itself (CLIENT LIST: cmd_client.c) */
			step_local(sub);
		return;
	case KV_ROUTE_TX: /* UNWATCH: EXEC unwatches anyway */
		rb_ok(&sub->reply);
		step_local(sub);
		return;
	case KV_ROUTE_SCAN:
		kv_scan_request(sub);
		return;
	case KV_ROUTE_SCRIPT: /* under the EXEC's locks: it takes none */
		cmd->multi(sub);
		return;
	case KV_ROUTE_ALL:
		if (kreq_set_parts(sub, kv.nshards) != 0)
			break;
		for (i = 0; i < kv.nshards; i++) {
			sub->parts[i].shard = i;
			kreq_part_args(&sub->parts[i], sub->argc, sub->argv);
		}
		kreq_launch(sub);
		return;
	default:
		break;
	}
	if (cmd->route != KV_ROUTE_ALL) {
		s = keys_shard(cmd, sub);
		if (s == -2) { /* no key, or malformed arguments: the command says why */
			t0 = cr_clock_ns();
			cmd->fn(&x);
			sub->run_ns += cr_clock_ns() - t0;
			step_local(sub);
			return;
		}
		if (s >= 0) {
			kreq_launch_one(sub, (unsigned)s);
			return;
		}
		if (cmd->flags & KV_BLOCKING) {
			step_bpop(ex, sub, c);
			return;
		}
		if (cmd->route == KV_ROUTE_KEYS) {
			if (kreq_split_keys(sub, (unsigned)cmd->step) != 0)
				goto nomem;
			kreq_launch(sub);
			return;
		}
		if (cmd->multi != NULL)
			cmd->multi(sub); /* its transaction takes no locks: nested */
		else
			kv_multi_keys(sub);
		return;
	}
nomem:
	rb_reset(&sub->reply);
	rb_error(&sub->reply, kv_err_oom);
	sub->nparts = 0;
	step_local(sub);
}

static void
exec_done(struct exec *ex)
{
	struct kreq *kr = ex->kr;
	struct rbuf r = kr->reply;

	ex->done = true;
	kr->reply = ex->out; /* taken, not copied */
	ex->out = r;
	if (ex->tx != NULL) {
		kv_tx_finish(ex->tx, NULL, 0); /* releases the locks; may free kr and ex */
		return;
	}
	kr->final = &kr->reply;
	kreq_finish(kr);
}

static void
exec_run(struct exec *ex)
{
	if (ex->in_loop || ex->done)
		return;
	ex->in_loop = true;
	while (!ex->running && ex->next != NULL) {
		const struct kv_mxcmd *c = ex->next;

		ex->next = c->next;
		ex->running = true;
		step(ex, c); /* may answer at once */
	}
	ex->in_loop = false;
	if (!ex->running && ex->next == NULL)
		exec_done(ex);
}

static void
exec_locked(struct kv_tx *tx)
{
	struct exec *ex = tx->cmd;

	if (kv_tx_failed(tx))
		return;
	if (kv_watch_changed(ex->watch, ex->tx)) {
		kv_tx_finish(tx, "*-1\r\n", 5);
		return;
	}
	/* Time stands still from here to the last command, as in Redis's EXEC: a key whose
	 * TTL ends meanwhile is live for all of them (its shard keeps it: locked). */
	ex->now_ms = kv_now_ms();
	exec_run(ex);
}

/* ---- EXEC: what it locks ---- */

struct plan {
	struct kv_arg *argv; /* [EXEC, watched keys..., the commands' keys...] */
	uint8_t *excl;
	uint32_t n, cap;
	uint8_t whole[CR_MAX_LCORES];
	bool any_whole;
};

static int
plan_add(struct plan *pl, const struct kv_arg *a, bool excl)
{
	if (pl->n == pl->cap) {
		uint32_t cap = pl->cap ? pl->cap * 2 : 16;
		struct kv_arg *v = realloc(pl->argv, cap * sizeof(*v));
		uint8_t *e = v != NULL ? realloc(pl->excl, cap) : NULL;

		if (v != NULL)
			pl->argv = v;
		if (e == NULL)
			return -ENOMEM;
		pl->excl = e;
		pl->cap = cap;
	}
	pl->argv[pl->n] = *a;
	pl->excl[pl->n++] = excl;
	return 0;
}

static int
plan_cmd(struct plan *pl, const struct kv_mxcmd *c)
{
	const struct kv_cmd *cmd = c->cmd;
	/* a script may write its keys unless it is read-only */
	bool excl = (cmd->flags & KV_WRITE) != 0 ||
		    (cmd->route == KV_ROUTE_SCRIPT && !(cmd->flags & KV_READONLY));
	uint32_t *idx;
	int n, i, rc = 0;
	unsigned s;

	switch (cmd->route) {
	case KV_ROUTE_LOCAL:
	case KV_ROUTE_TX:
		return 0;
	case KV_ROUTE_ALL:
	case KV_ROUTE_SCAN:
		if (cmd->merge >= KV_MERGE_INFO)
			return 0; /* statistics: INFO, SLOWLOG */
		for (s = 0; s < kv.nshards; s++)
			if (excl || pl->whole[s] == 0)
				pl->whole[s] = excl ? KV_WHOLE_EXCL : KV_WHOLE_SHARED;
		pl->any_whole = true;
		return 0;
	default:
		break;
	}
	idx = malloc((c->argc + 1) * sizeof(*idx));
	if (idx == NULL)
		return -ENOMEM;
	n = kv_cmd_keys(cmd, c->argv, c->argc, idx, c->argc);
	for (i = 0; i < n && rc == 0; i++)
		rc = plan_add(pl, &c->argv[idx[i]], excl);
	free(idx);
	return rc;
}

static void
exec(struct kconn *kc, const struct kv_cmd *cmd)
{
	struct kv_multi *mx = kc->mx;
	struct kv_watch *watched = kc->watch, *w;
	struct plan pl = {0};
	struct kv_mxcmd *c;
	struct exec *ex = NULL;
	struct kreq *kr = NULL;
	struct kv_arg a0 = {"EXEC", 4};
	uint32_t i, nwatch = 0;
	unsigned s;
	int rc;

	if (mx == NULL) {
		kc_reply_error(kc, "ERR EXEC without MULTI", 22);
		return;
	}
	kc->mx = NULL; /* EXEC takes them: a MULTI after it starts afresh, unwatched */
	kc->watch = NULL;
	if (mx->dirty) {
		reply_raw(kc, execabort, sizeof(execabort) - 1);
		goto out;
	}
	rc = plan_add(&pl, &a0, false);
	for (w = watched; w != NULL && rc == 0; w = w->next, nwatch++) {
		struct kv_arg k = {w->key, w->klen};

		rc = plan_add(&pl, &k, false);
	}
	for (c = mx->head; c != NULL && rc == 0; c = c->next)
		rc = plan_cmd(&pl, c);
	if (rc == 0)
		kr = kreq_new(kc->sh, kc, cmd, pl.n, pl.argv);
	ex = kr != NULL ? calloc(1, sizeof(*ex)) : NULL;
	if (ex == NULL) {
		if (kr != NULL)
			kreq_free(kc->sh, kr);
		kc_reply_error(kc, "OOM out of memory starting EXEC", 31);
		goto out;
	}
	kc_enqueue(kc, kr);
	ex->kc = kc;
	ex->kr = kr;
	ex->mx = mx;
	ex->watch = watched;
	ex->next = mx->head;
	rb_init(&ex->out, NULL, 0);
	rb_array(&ex->out, mx->n);
	mx = NULL; /* the EXEC's now */
	watched = NULL;
	if (pl.n == 1 && !pl.any_whole) {
		kr->state = ex; /* nothing to lock: run them now */
		kr->state_fini = exec_free;
		ex->now_ms = kv_now_ms();
		exec_run(ex);
		goto out;
	}
	ex->tx = kv_tx_new(kr);
	if (ex->tx == NULL) {
		exec_free(ex);
		kreq_finish(kr);
		goto out;
	}
	ex->tx->cmd = ex;
	ex->tx->cmd_fini = exec_free;
	for (i = 1; i < kr->argc && rc == 0; i++)
		rc = kv_tx_key(ex->tx, i, pl.excl[i]);
	for (s = 0; s < kv.nshards; s++)
		if (pl.whole[s] != 0)
			kv_tx_whole(ex->tx, s, pl.whole[s] == KV_WHOLE_EXCL);
	if (rc != 0) {
		kv_tx_finish(ex->tx, "-OOM out of memory\r\n", 20);
		goto out;
	}
	kv_tx_lock(ex->tx, nwatch != 0 ? cmd_watch_probe : NULL, 1, exec_locked);
out:
	multi_drop(mx);
	kv_watch_drop(watched);
	free(pl.argv);
	free(pl.excl);
}

/* ---- the commands ---- */

void
kv_txcmd(struct kconn *kc, const struct kv_cmd *cmd, struct kv_ctx *x)
{
	uint64_t t0;
	size_t at;

	if (cmd->fn == cmd_exec) {
		exec(kc, cmd);
		return;
	}
	if (cmd->fn == cmd_watch) {
		kv_watch(kc, cmd, x);
		return;
	}
	x->out = kc_local_out(kc);
	if (x->out == NULL) {
		kc_abort(kc);
		return;
	}
	at = x->out->len;
	t0 = cr_clock_ns();
	cmd->fn(x);
	kv_cmd_ran(kc, cmd, x->argc, x->argv, cr_clock_ns() - t0,
		   x->out->len > at && x->out->p[at] == '-'); /* MULTI, DISCARD... */
}

KV_CMD(multi)
{
	struct kconn *kc = x->kc;

	if (kc->mx != NULL) {
		rb_error(x->out, "ERR MULTI calls can not be nested");
		return;
	}
	kc->mx = calloc(1, sizeof(*kc->mx));
	if (kc->mx == NULL) {
		rb_error(x->out, kv_err_oom);
		return;
	}
	kc->mx->tail = &kc->mx->head;
	rb_ok(x->out);
}

KV_CMD(exec)
{
	exec(x->kc, kv_cmd_lookup("exec", 4));
}

KV_CMD(discard)
{
	struct kconn *kc = x->kc;

	if (kc->mx == NULL) {
		rb_error(x->out, "ERR DISCARD without MULTI");
		return;
	}
	kv_multi_free(kc); /* and unwatch, as Redis */
	rb_ok(x->out);
}
