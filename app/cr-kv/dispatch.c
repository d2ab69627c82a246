/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The request engine: the commands parsed from a connection's query buffer, each looked
 * up, checked and routed: run here at once, or as a request with parts on the shards of
 * its keys (xshard.c), its reply placed in request order (pipeline.c). See kv.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <stdatomic.h>

#include "cr_log.h"
#include "cr_telemetry.h"
#include "kv.h"
#include "script.h"

CR_LOG_COMPONENT(kv_log, "app.kv")

static bool
is_http(const struct kv_arg *a)
{
	char c = (char)(a->p[0] | 0x20);

	if (c != 'h' && c != 'p')
		return false; /* the common case, without two strcasecmp() per command */
	return strcasecmp(a->p, "host:") == 0 || strcasecmp(a->p, "post") == 0;
}

static void
unknown_command(struct kconn *kc, const struct kv_arg *argv, uint32_t argc)
{
	char buf[512];
	size_t n, al = 0;
	uint32_t i;

	/* Redis: "'%.*s' " per argument while the list is under 128 bytes; %s stops at NUL. */
	char args[400];

	args[0] = '\0';
	for (i = 1; i < argc && al < 128; i++) {
		int w =
		    snprintf(args + al, sizeof(args) - al, "'%.*s' ", (int)(128 - al), argv[i].p);

		if (w > 0)
			al += (size_t)w < sizeof(args) - al ? (size_t)w : sizeof(args) - al - 1;
	}
	n = (size_t)snprintf(buf, sizeof(buf),
			     "ERR unknown command '%.128s', with args beginning with: %s",
			     argv[0].p, args);
	kc_reply_error(kc, buf, n < sizeof(buf) ? n : sizeof(buf) - 1);
}

static void
run_here(struct kconn *kc, const struct kv_cmd *cmd, struct kv_ctx *x)
{
	uint64_t t0;
	size_t at;

	x->out = kc_local_out(kc);
	if (x->out == NULL) {
		kc_abort(kc);
		return;
	}
	at = x->out->len;
	t0 = cr_clock_ns();
	cmd->fn(x);
	kv_cmd_ran(kc, cmd, x->argc, x->argv, cr_clock_ns() - t0,
		   x->out->len > at && x->out->p[at] == '-');
	if (kc->resp == 3)
		kv_resp3_fix(cmd, x->argc, x->argv, x->out, at); /* resp3.c */
	/* A command without keys (or refused) runs here even while the home shard is away
	 * (shardmove.c): it touched no key, and the shard is not ours to touch. */
	if (!kv_home_here(x->sh))
		return;
	if (cmd->flags & KV_WRITE) {
		/* WATCH's versions: one counter bumped for the common single-key write. */
		if (x->h1_ok && cmd->route == KV_ROUTE_KEY1)
			kv_wv_touch(x->sh, x->h1);
		else
			kv_wv_touch_cmd(x->sh, cmd, x->argc, x->argv);
	}
	if (kv_bw_pending(x->sh))
		kv_bw_serve(x->sh); /* it made a key blocked clients wait for */
}

/* A command whose keys live on more than one shard, or on another one. */
static void
dispatch_parts(struct kconn *kc, const struct kv_cmd *cmd, struct kv_ctx *x, unsigned key1)
{
	struct kreq *kr = kreq_new(kc->sh, kc, cmd, x->argc, x->argv);
	uint32_t i;

	if (kr == NULL) {
		kc_abort(kc);
		return;
	}
	kc_enqueue(kc, kr);
	switch (cmd->route) {
	case KV_ROUTE_KEY1:
	case KV_ROUTE_KEYS:
	case KV_ROUTE_MULTI:
		kreq_set_parts(kr, 1);
		kr->one.shard = key1; /* every key is there */
		kreq_part_args(&kr->one, kr->argc, kr->argv);
		break;
	case KV_ROUTE_ALL:
		if (kreq_set_parts(kr, kv.nshards) != 0)
			goto nomem;
		for (i = 0; i < kv.nshards; i++) {
			kr->parts[i].shard = i;
			kreq_part_args(&kr->parts[i], kr->argc, kr->argv);
		}
		break;
	default:
		break;
	}
	kreq_launch(kr);
	return;
nomem:
	rb_error(&kr->reply, "OOM out of memory routing the command");
	kr->final = &kr->reply;
	kr->nparts = 0;
	kreq_finish(kr);
}

/* SCAN across shards: the shard in the cursor's low bits, from the shard cursor in its
 * high bits. A shard that finishes with fewer keys than COUNT hands on to the next shard
 * in the same call (so an empty keyspace answers cursor 0 at once, as redis does). */
struct scan_state {
	unsigned bits;
	long long count, n;
	bool blocked;
	char cursor[24];
};

static void
scan_cont(struct kreq *kr)
{
	struct scan_state *st = kr->state;
	struct rbuf *o = &kr->one.out;
	const char *p = o->p, *end = o->p + o->len, *body;
	unsigned shard = kr->one.shard;
	unsigned long long local;
	struct kconn *kc = kr->kc;
	bool was_blocked = st->blocked;
	char hdr[64];
	long long n;

	if (o->len == 0 || p[0] == '-') {
		rb_reset(&kr->reply);
		rb_raw(&kr->reply, o->p, o->len);
		goto done;
	}
	p = memchr(p, '\n', (size_t)(end - p)) + 1; /* "*2" */
	p = memchr(p, '\n', (size_t)(end - p)) + 1; /* "$len" */
	local = strtoull(p, NULL, 10);
	p = memchr(p, '\n', (size_t)(end - p)) + 1; /* the cursor */
	n = strtoll(p + 1, NULL, 10);
	body = memchr(p, '\n', (size_t)(end - p)) + 1; /* "*n" */
	rb_raw(&kr->reply, body, (size_t)(end - body));
	st->n += n;
	if (local == 0 && shard + 1 < kv.nshards && st->n < st->count) {
		kreq_set_parts(kr, 1);
		kr->one.shard = shard + 1;
		kr->argv[1].p = "0";
		kr->argv[1].len = 1;
		kreq_part_args(&kr->one, kr->argc, kr->argv);
		kr->cont = scan_cont;
		kreq_launch(kr);
		return;
	}
	{
		unsigned long long global = local != 0		     ? local << st->bits | shard
					    : shard + 1 < kv.nshards ? shard + 1
								     : 0;
		struct rbuf keys = kr->reply;
		int h;

		snprintf(st->cursor, sizeof(st->cursor), "%llu", global);
		h = snprintf(hdr, sizeof(hdr), "*2\r\n$%zu\r\n%s\r\n*%lld\r\n", strlen(st->cursor),
			     st->cursor, st->n);
		rb_init(&kr->reply, NULL, 0);
		rb_raw(&kr->reply, hdr, (size_t)h);
		rb_raw(&kr->reply, keys.p, keys.len);
		rb_fini(&keys);
	}
done:
	kr->cont = NULL;
	kr->final = &kr->reply;
	kreq_finish(kr); /* may free kr */
	if (was_blocked)
		kv_unblock(kc);
}

/* Launch SCAN request @p kr (its state allocated) from global @p cursor; @p hold: the
 * connection's later commands wait until it is answered. */
static void
scan_launch(struct kreq *kr, unsigned long long cursor, bool hold)
{
	struct scan_state *st = kr->state;
	unsigned bits = 0, shard;
	uint32_t i;

	while ((1u << bits) < kv.nshards)
		bits++;
	shard = (unsigned)(cursor & ((1u << bits) - 1));
	if (shard >= kv.nshards) {
		shard = 0;
		cursor = 0;
	}
	st->bits = bits;
	st->count = 10;
	if (hold && shard + 1 < kv.nshards) {
		/* It may hand on to the next shard: later commands of this client wait from
		 * now, so that none overtakes the scan there. */
		st->blocked = true;
		kr->kc->blocked++;
	}
	for (i = 2; i + 1 < kr->argc; i++)
		if (strcasecmp(kr->argv[i].p, "count") == 0)
			resp_string2ll(kr->argv[i + 1].p, kr->argv[i + 1].len, &st->count);
	kr->cont = scan_cont;
	kreq_set_parts(kr, 1);
	kr->one.shard = shard;
	snprintf(kr->scratch, sizeof(kr->scratch), "%llu", cursor >> bits);
	kr->argv[1].p = kr->scratch;
	kr->argv[1].len = strlen(kr->scratch);
	kreq_part_args(&kr->one, kr->argc, kr->argv);
	kreq_launch(kr);
}

void
kv_scan_request(struct kreq *kr)
{
	unsigned long long cursor;

	kr->state = calloc(1, sizeof(struct scan_state));
	if (kr->state == NULL || kv_parse_scan_cursor(&kr->argv[1], &cursor) != 0) {
		rb_error(&kr->reply, kr->state == NULL ? kv_err_oom : "ERR invalid cursor");
		kr->final = &kr->reply;
		kreq_finish(kr);
		return;
	}
	scan_launch(kr, cursor, false);
}

/* SCAN over several shards in one call: one snapshot of those it may visit, unless its
 * cursor is on the last shard (then it runs there, in one step). */
static bool
scan_several(const struct kv_ctx *x)
{
	unsigned long long cursor = 0;
	unsigned bits = 0;

	while ((1u << bits) < kv.nshards)
		bits++;
	(void)kv_parse_scan_cursor(&x->argv[1], &cursor);
	return (cursor & ((1u << bits) - 1)) + 1 < kv.nshards;
}

static void
dispatch_scan(struct kconn *kc, const struct kv_cmd *cmd, struct kv_ctx *x)
{
	unsigned long long cursor;
	struct kreq *kr;

	if (kv_parse_scan_cursor(&x->argv[1], &cursor) != 0) {
		kc_reply_error(kc, "ERR invalid cursor", 18);
		return;
	}
	if (kv.nshards == 1) {
		run_here(kc, cmd, x);
		return;
	}
	if (scan_several(x)) {
		kr = kreq_new(kc->sh, kc, cmd, x->argc, x->argv);
		if (kr == NULL) {
			kc_abort(kc);
			return;
		}
		kc_enqueue(kc, kr);
		kv_multi_scan(kr, cursor);
		return;
	}
	kr = kreq_new(kc->sh, kc, cmd, x->argc, x->argv);
	if (kr != NULL)
		kr->state = calloc(1, sizeof(struct scan_state));
	if (kr == NULL || kr->state == NULL) {
		if (kr != NULL)
			kreq_free(kc->sh, kr);
		kc_abort(kc);
		return;
	}
	kc_enqueue(kc, kr);
	scan_launch(kr, cursor, true);
}

#define SHARDS_SEVERAL (-1)
#define SHARDS_NONE    (-2) /* no key, or malformed arguments: the command replies */

/* The one shard every key of the command is on, SHARDS_SEVERAL, or SHARDS_NONE. */
static int
keys_shard(const struct kv_cmd *cmd, const struct kv_ctx *x)
{
	uint32_t small[64], *idx = small, max = 64;
	int n, i, s = SHARDS_NONE;

	if (x->argc > max) {
		idx = malloc(sizeof(*idx) * x->argc);
		if (idx == NULL)
			return SHARDS_NONE;
		max = x->argc;
	}
	n = kv_cmd_keys(cmd, x->argv, x->argc, idx, max);
	for (i = 0; i < n && s != SHARDS_SEVERAL; i++) {
		int k = kv.nshards == 1 ? 0 : (int)key_shard(&x->argv[idx[i]]);

		s = s == SHARDS_NONE || s == k ? k : SHARDS_SEVERAL;
	}
	if (idx != small)
		free(idx);
	return s;
}

/* A command over keys of several shards, as a transaction (cmd_multi.c). */
static void
dispatch_multi(struct kconn *kc, const struct kv_cmd *cmd, struct kv_ctx *x)
{
	struct kreq *kr = kreq_new(kc->sh, kc, cmd, x->argc, x->argv);

	if (kr == NULL) {
		kc_abort(kc);
		return;
	}
	kc_enqueue(kc, kr);
	if (cmd->multi != NULL)
		cmd->multi(kr);
	else
		kv_multi_keys(kr);
}

/* KEYS, DBSIZE, RANDOMKEY, FLUSHDB, FLUSHALL over several shards: a transaction holding
 * every shard whole (cmd_multi.c). */
static void
dispatch_all(struct kconn *kc, const struct kv_cmd *cmd, struct kv_ctx *x)
{
	struct kreq *kr = kreq_new(kc->sh, kc, cmd, x->argc, x->argv);

	if (kr == NULL) {
		kc_abort(kc);
		return;
	}
	kc_enqueue(kc, kr);
	kv_multi_all(kr);
}

/* Run it here at once if its keys are here and no transaction holds locks here (else
 * as a part, which may wait behind them), on its one other shard, or as a transaction. */
static void
dispatch_keys(struct kconn *kc, const struct kv_cmd *cmd, struct kv_ctx *x)
{
	struct kv_shard *sh = kc->sh;
	int s = keys_shard(cmd, x);

	if ((cmd->flags & KV_BLOCKING) && s != SHARDS_NONE)
		kv_bpop_dispatch(kc, cmd, x, s >= 0 ? s : -1); /* it may wait: always a request */
	else if (s == SHARDS_NONE || (s == (int)sh->index && kv_home_here(sh) && kv_tx_clear(sh)))
		run_here(kc, cmd, x);
	else if (s >= 0)
		dispatch_parts(kc, cmd, x, (unsigned)s);
	else
		dispatch_multi(kc, cmd, x);
}

static void run_command_(struct kconn *kc);

/*
 * One command, its reply dropped under CLIENT REPLY OFF or SKIP (Redis's rules: the mode
 * once the command ran, so CLIENT REPLY ON answers; SKIP mutes the command after it). A
 * reply made now is cut off where it began; a request made for it is marked and answers
 * nothing when done.
 */
static void
run_command(struct kconn *kc)
{
	struct kreq *tail = kc->tail, *kr;
	struct rbuf *o = tail == NULL ? &kc->sh->batch : tail->coalesce ? tail->final : NULL;
	size_t at = o != NULL ? o->len : 0;
	bool quiet = !kc->reply_off && !kc->reply_skip;

	kc->last_ms = kc->sh->now_ms;
	run_command_(kc);
	/* An error answered here (a request's: kreq_finish()) counts in INFO errorstats. */
	if (kc->tail == tail) {
		if (o != NULL && o->len > at && o->p[at] == '-')
			kv_errstat_note(kc->sh, o->p + at, o->len - at);
	} else {
		for (kr = tail != NULL ? tail->next : kc->head; kr != NULL; kr = kr->next)
			if (kr->coalesce && kr->final->len != 0 && kr->final->p[0] == '-')
				kv_errstat_note(kc->sh, kr->final->p, kr->final->len);
	}
	if (quiet && !kc->reply_off && !kc->reply_skip_next)
		return; /* the common case */
	if (kc->reply_off || kc->reply_skip) {
		if (kc->tail == tail) {
			if (o != NULL && o->len > at)
				o->len = at;
		} else {
			for (kr = tail != NULL ? tail->next : kc->head; kr != NULL; kr = kr->next) {
				if (kr->coalesce || kr->done)
					rb_reset(kr->final); /* only this command's, so far */
				else
					kr->mute = true;
			}
		}
	}
	kc->reply_skip = kc->reply_skip_next;
	kc->reply_skip_next = false;
}

static void
run_command_(struct kconn *kc)
{
	struct kv_shard *sh = kc->sh;
	const struct kv_cmd *cmd;
	struct kv_ctx x;
	uint32_t i, argc = kc->rp.argc;
	char err[200];
	uint64_t t0;

	if (argc > sh->args_cap) {
		uint32_t cap = sh->args_cap;
		struct kv_arg *a;

		while (cap < argc)
			cap *= 2;
		a = realloc(sh->args, sizeof(*a) * cap);
		if (a == NULL) {
			kc_abort(kc);
			return;
		}
		sh->args = a;
		sh->args_cap = cap;
	}
	for (i = 0; i < argc; i++) {
		sh->args[i].p = kc->qbuf + kc->rp.argv[i].off;
		sh->args[i].len = kc->rp.argv[i].len;
	}
	memset(&x, 0, sizeof(x));
	x.sh = sh;
	x.argc = argc;
	x.argv = sh->args;
	x.now_ms = sh->now_ms; /* one clock read per batch of input */
	x.kc = kc;
	cr_telemetry_add(kv.tel_cmds, 1);
	if (is_http(&sh->args[0])) {
		/* HTTP sent to the RESP port (a cross-protocol attack): close, no reply. */
		CR_LOG(kv_log, WARNING, "client %llu sent '%s': HTTP on the RESP port; closing it",
		       (unsigned long long)kc->id, sh->args[0].p);
		kc_abort(kc);
		return;
	}
	cmd = kv_cmd_lookup(sh->args[0].p, sh->args[0].len);
	kc->last_cmd = cmd;
	if (cmd != NULL && cmd->sub != NULL && argc >= 2) {
		const struct kv_cmd *sub = kv_cmd_sub_lookup(cmd, sh->args[1].p, sh->args[1].len);

		if (sub == NULL) {
			char up[32];
			size_t k;

			kc->last_cmd = NULL; /* Redis's lookupCommand() found none: "cmd=NULL" */
			for (k = 0; cmd->name[k] != '\0' && k < sizeof(up) - 1; k++)
				up[k] = (char)(cmd->name[k] - 'a' + 'A');
			up[k] = '\0';
			i = (uint32_t)snprintf(err, sizeof(err),
					       "ERR unknown subcommand '%.128s'. Try %s HELP.",
					       sh->args[1].p, up);
			kv_multi_flag(kc);
			kc_reply_error(kc, err, i < sizeof(err) ? i : sizeof(err) - 1);
			return;
		}
		cmd = sub;
		kc->last_cmd = cmd;
	}
	if (cmd == NULL) {
		kv_multi_flag(kc); /* refused in MULTI: the EXEC fails (EXECABORT) */
		unknown_command(kc, sh->args, argc);
		return;
	}
	if ((cmd->arity > 0 && (uint32_t)cmd->arity != argc) ||
	    (cmd->arity < 0 && argc < (uint32_t)-cmd->arity)) {
		struct rbuf *o = kc_local_out(kc);

		if (kc->mx != NULL && cmd->fn == cmd_exec) {
			kv_multi_refuse_exec(kc, "wrong number of arguments for 'exec' command");
			return;
		}
		kv_multi_flag(kc);
		kv_cmd_rejected(kc, cmd);
		if (o != NULL)
			kv_reply_wrong_arity(o, cmd->name);
		return;
	}
	if (!kc->authed && !(cmd->flags & KV_NO_AUTH)) {
		/* Redis's rejectCommand(): an EXEC aborts (in MULTI or not), else the EXEC to
		 * come fails */
		kv_cmd_rejected(kc, cmd);
		if (cmd->fn == cmd_exec) {
			kv_multi_refuse_exec(kc, "NOAUTH Authentication required.");
			return;
		}
		kv_multi_flag(kc);
		kc_reply_error(kc, "NOAUTH Authentication required.", 31);
		return;
	}
	if (!(cmd->flags & KV_ALLOW_BUSY) && kv_script_busy_here()) {
		/* A script of this lcore runs past lua-time-limit (script.h): Redis's
		 * rejectCommand(), before MULTI queues it */
		kv_cmd_rejected(kc, cmd);
		if (cmd->fn == cmd_exec && kc->mx != NULL) {
			kv_multi_refuse_exec(kc, kv_err_busy);
			return;
		}
		kv_multi_flag(kc);
		kc_reply_error(kc, kv_err_busy, strlen(kv_err_busy));
		return;
	}
	if ((cmd->flags & KV_DENYOOM) && kv_evict_refuse()) {
		kv_multi_flag(kc);
		kv_cmd_rejected(kc, cmd);
		kc_reply_error(kc, "OOM command not allowed when used memory > 'maxmemory'.", 55);
		return;
	}
	if (kc->resp == 2 && kv_ps_subscribed(kc) && !kv_ps_allowed(cmd)) {
		/* RESP2's subscribed mode: Redis 7.0's processCommand() text */
		kv_multi_flag(kc);
		kv_cmd_rejected(kc, cmd);
		i = (uint32_t)snprintf(err, sizeof(err),
				       "ERR Can't execute '%s': only (P|S)SUBSCRIBE / "
				       "(P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this "
				       "context",
				       cmd->name);
		kc_reply_error(kc, err, i < sizeof(err) ? i : sizeof(err) - 1);
		return;
	}
	if (kc->mx != NULL && kv_multi_queues(cmd)) {
		kv_multi_queue(kc, cmd, &x); /* MULTI: run by EXEC (its checks then) */
		return;
	}
	if (cmd->precheck != NULL) {
		x.out = kc_local_out(kc);
		if (x.out == NULL) {
			kc_abort(kc);
			return;
		}
		t0 = cr_clock_ns();
		if (!cmd->precheck(&x)) {
			/* It answered an error, as Redis's command would have: logged as Redis's */
			kv_cmd_ran(kc, cmd, argc, sh->args, cr_clock_ns() - t0, true);
			return;
		}
	}
	switch (cmd->route) {
	case KV_ROUTE_LOCAL:
		run_here(kc, cmd, &x);
		return;
	case KV_ROUTE_KEY1: {
		const struct kv_arg *k = &sh->args[cmd->first_key];
		uint64_t h = kv_hash(k->p, k->len);
		unsigned s = key_shard_h(k->p, k->len, h);

		if (cmd->first_key == 1) {
			x.h1 = h; /* the command's own lookup needs not hash it again */
			x.h1_ok = true;
		}
		if (s == sh->index && kv_home_here(sh) && kv_tx_clear(sh))
			run_here(kc, cmd, &x);
		else
			dispatch_parts(kc, cmd, &x, s);
		return;
	}
	case KV_ROUTE_KEYS:
	case KV_ROUTE_MULTI:
		dispatch_keys(kc, cmd, &x);
		return;
	case KV_ROUTE_ALL:
		if (cmd->merge >= KV_MERGE_INFO)
			dispatch_parts(kc, cmd, &x, 0); /* statistics (INFO, SLOWLOG): no locks */
		else if (kv.nshards == 1 && kv_tx_clear(sh))
			run_here(kc, cmd, &x);
		else if (kv.nshards == 1)
			dispatch_parts(kc, cmd, &x, 0);
		else
			dispatch_all(kc, cmd, &x); /* one snapshot of every shard */
		return;
	case KV_ROUTE_SCAN:
		dispatch_scan(kc, cmd, &x);
		return;
	case KV_ROUTE_TX:
		kv_txcmd(kc, cmd, &x);
		return;
	case KV_ROUTE_SCRIPT:
		dispatch_multi(kc, cmd, &x); /* its cmd->multi runs it (script_run.c) */
		return;
	}
}

static void
protocol_error(struct kconn *kc, const char *err, size_t errlen)
{
	char buf[80];

	atomic_fetch_add_explicit(&kv.proto_errors, 1, memory_order_relaxed);
	cr_telemetry_add(kv.tel_proto, 1);
	if (err == NULL) {
		kc_reply_error(kc, "OOM out of memory parsing the request", 37);
	} else {
		memcpy(buf, "ERR ", 4);
		if (errlen > sizeof(buf) - 4)
			errlen = sizeof(buf) - 4;
		memcpy(buf + 4, err, errlen);
		kc_reply_error(kc, buf, errlen + 4);
	}
	kc->close_after = true;
	kc->close_hard = true;
}

/* Drop the consumed part of the query buffer. */
static void
compact(struct kconn *kc)
{
	size_t keep = resp_parser_keep(&kc->rp, kc->qpos);

	if (keep == 0)
		return;
	if (keep < kc->qlen)
		memmove(kc->qbuf, kc->qbuf + keep, kc->qlen - keep);
	kc->qlen -= keep;
	kc->qpos -= keep;
	resp_parser_shift(&kc->rp, keep);
	if (kc->qlen == 0 && kc->qcap > KC_QBUF_SHRINK) {
		char *n = realloc(kc->qbuf, KC_QBUF_INITIAL + 1);

		if (n != NULL) {
			kc->qbuf = n;
			kc->qcap = KC_QBUF_INITIAL;
			kc_mem_update(kc);
		}
	}
}

static void
send_batch(struct kconn *kc)
{
	struct rbuf *b = &kc->sh->batch;

	if (b->len > 0) {
		kc_send_rbuf(kc, b); /* a big reply's buffer is taken, not copied */
		b->len = 0;
	}
	if (b->cap > 1024 * 1024) {
		/* A huge reply went out: give the memory back. */
		rb_fini(b);
		rb_init(b, NULL, 0);
	}
}

/* Read "<c><digits>\r\n" at *p: the number, or -1. */
static long long
scan_len(const char **p, const char *end, char c)
{
	const char *q = *p;
	long long n = 0;

	if (q >= end || *q != c)
		return -1;
	for (q++; q < end && *q >= '0' && *q <= '9'; q++)
		if (n <= (1 << 20)) /* past the limit: refused below, without overflowing */
			n = n * 10 + (*q - '0');
	if (q + 1 >= end || q[0] != '\r' || n > (1 << 20))
		return -1;
	*p = q + 2;
	return n;
}

#define PREFETCH_MAX 32

/*
 * Pipelined requests are memory-bound: each looks its key up in a table far bigger than
 * the caches. Before running a batch, walk the complete multibulk requests in the
 * buffer (without parsing them: a light scan of the lengths), and prefetch the bucket of
 * each local key, then the first entry of each, so that the cache misses of the batch
 * overlap instead of coming one after another.
 */
static void
prefetch_batch(struct kconn *kc)
{
	const char *p = kc->qbuf + kc->qpos, *end = kc->qbuf + kc->qlen;
	struct kv_store *st = kc->sh->store;
	uint64_t hs[PREFETCH_MAX];
	unsigned n = 0, i, seen;

	if (kc->rp.reqtype != 0)
		return; /* in the middle of a request */
	/* At most PREFETCH_MAX requests, local or not: a buffer of requests for other shards
	 * is not walked to its end (and hashed) again at each turn of its parsing. */
	for (seen = 0; seen < PREFETCH_MAX && p < end; seen++) {
		long long argc = scan_len(&p, end, '*'), j, len;
		const char *key = NULL;
		size_t klen = 0;

		if (argc < 2)
			break;
		for (j = 0; j < argc; j++) {
			len = scan_len(&p, end, '$');
			if (len < 0 || end - p < len + 2)
				goto done;
			if (j == 1) {
				key = p;
				klen = (size_t)len;
			}
			p += len + 2;
		}
		hs[n] = kv_hash(key, klen);
		if (key_shard_h(key, klen, hs[n]) == kc->sh->index && kv_home_here(kc->sh))
			kv_prefetch_bucket(st, hs[n++]);
	}
done:
	if (n < 2)
		return;
	for (i = 0; i < n; i++)
		kv_prefetch_entry(st, hs[i]);
}

void
kv_process_input(struct kconn *kc)
{
	kc->in_input = true;
	kc->parse_held = false; /* set again below if it must stop again */
	kc->sh->now_ms = kv_now_ms();
	prefetch_batch(kc);
	while (kc->conn != NULL && kc->blocked == 0 && !kc->close_after && !kc_out_full(kc)) {
		const char *err;
		enum resp_result r;

		r = resp_parse(&kc->rp, kc->qbuf, kc->qlen, &kc->qpos, &err);
		if (r == RESP_NEED_MORE)
			break;
		if (r == RESP_ERROR) {
			protocol_error(kc, err, kc->rp.errlen);
			break;
		}
		run_command(kc);
		if (kc->queued >= KC_MAX_QUEUED || kc->sh->batch.len >= KC_INPUT_SLICE) {
			kc->parse_held = true; /* kc_flush() resumes it, in a later pass */
			break;
		}
	}
	if (kc->conn != NULL) {
		compact(kc);
		send_batch(kc);
		kc_stop_reading_if_needed(kc);
		if (kc->eof_held && !kc->parse_held)
			kc_eof(kc); /* what was read before the EOF is parsed */
	} else {
		kc->sh->batch.len = 0;
	}
	kv_outq_flush(kc->sh); /* the parts this input queued for other shards, in one go */
	if (kv_shard_owned(kc->sh)) {
		/* the home shard's duties: not while it runs elsewhere (shardmove.c) */
		kv_lazy_kick(kc->sh);
		kv_evict_kick(kc->sh);
	}
	kc->in_input = false;
	kc_flush(kc); /* may free kc */
}
