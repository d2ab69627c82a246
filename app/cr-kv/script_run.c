/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Running a script (EVAL, EVALSHA, EVAL_RO, EVALSHA_RO). See doc/guides/kv.md,
 * "Scripting", for the guarantee.
 *
 * A script runs on its client's lcore, in a coroutine of that lcore's VM. Its declared
 * keys (KEYS) are locked first, as one transaction (txn.h: the shards one after another
 * in ascending order, exclusively, or shared for EVAL_RO and no-writes scripts), so no
 * other client sees a state in the middle of it. Each redis.call is run as the locks'
 * holder, as EXEC runs its commands (its parts are KP_TX_HOP): one on this lcore's shard
 * answers at once; one on another shard is sent there, the coroutine yields, and it is
 * resumed when the answer comes. A key the script did not declare is refused (a
 * difference from Redis, as Dragonfly's). No lcore waits for another, none touches
 * another's shard (DESIGN rules 1-3).
 *
 * Past lua-time-limit the script is "busy": its lcore's other clients get -BUSY, and the
 * count hook (every 100,000 instructions) yields the coroutine for a time slice, so the
 * lcore goes round its loop between slices: it reads its sockets (a SCRIPT KILL sent to
 * it is parsed there as any command) and its mailbox. SCRIPT KILL, from any lcore, counts
 * a kill in the busy lcore's state word that the hook reads; a script that wrote is
 * unkillable, decided atomically in that same word (script_state.h). A shutdown or a
 * retire stops the lcore's scripts at their next hook (kv_script_closing()).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <lauxlib.h>
#include <lua.h>

#include "kv.h"
#include "later.h"
#include "script.h"
#include "script_state.h"

_Atomic long long kv_lua_time_limit = 5000;

const char kv_err_busy[] =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";

/* Per lcore: its scripts' busy state (script_state.h). */
static _Atomic uint64_t lstate[CR_MAX_LCORES];
static struct kv_lua *vms[CR_MAX_LCORES];
/* Per lcore (its own): it is closing, and which of its scripts stop (kv_script_closing()). */
enum { STOP_NONE, STOP_UNWRITTEN, STOP_ALL };
static uint8_t closing[CR_MAX_LCORES];

/* Script flags (Redis 7.0's shebang). */
#define SF_NO_WRITES 0x1u
#define SF_SHEBANG   0x2u

struct kv_srun {
	struct kreq *kr;
	struct kv_tx *tx; /* its locks (or, nested in EXEC, none), or NULL: no keys */
	struct kv_lua *v;
	lua_State *co;
	int co_ref, keys_ref, argv_ref;
	char sha[KV_SHA_LEN + 1];
	uint32_t numkeys;
	const struct kv_arg *keys;
	bool ro, wrote, busy, killed, held, in_call, sub_done;
	struct kv_ss_script ss;	     /* its side of the lcore's busy state, while busy */
	struct cr_timer slice_timer; /* a slice when the defer queue is full */
	struct kreq *sub;	     /* the redis.call under way */
	lua_State *call_L;	     /* ... the coroutine that made it */
	bool raise;		     /* ... redis.call (not pcall): an error reply raises */
	int err_ref;		     /* an error to raise in call_L when it goes on (the hook) */
	int keyset_ref;		     /* KEYS as a set, when there are many (declared()) */
	uint64_t start_ns;
	int64_t now_ms;
	struct rbuf out;
};

static unsigned
here(void)
{
	return cr_lcore_id();
}

struct kv_lua *
kv_lua_here(void)
{
	unsigned lc = here();

	if (vms[lc] == NULL)
		vms[lc] = kv_lua_new();
	return vms[lc];
}

void
kv_script_closing(unsigned lcore, bool shutdown)
{
	uint8_t stop = shutdown ? STOP_ALL : STOP_UNWRITTEN;

	if (stop > closing[lcore])
		closing[lcore] = stop; /* the scripts' hooks read it (stopped()) */
}

void
kv_script_shard_fini(unsigned lcore)
{
	kv_lua_free(vms[lcore]);
	vms[lcore] = NULL;
	/* every script of the lcore was freed (srun_free() ended its busy time): the next
	 * incarnation starts from a clean word whatever a bug left there (relaxed: the lcore
	 * is stopped; a SCRIPT KILL racing with it sees no busy script either way) */
	atomic_store_explicit(&lstate[lcore], 0, memory_order_relaxed);
	closing[lcore] = STOP_NONE; /* its next start */
}

bool
kv_script_busy_here(void)
{
	return kv_ss_busy(&lstate[here()]);
}

bool
kv_script_our_yield(lua_State *L)
{
	struct kv_lua *v = vms[here()];
	bool ours = v->our_yield;

	(void)L;
	v->our_yield = false;
	return ours;
}

void
kv_script_mark_yield(lua_State *L)
{
	(void)L;
	vms[here()]->our_yield = true;
}

void
kv_script_push_global(lua_State *L, bool keys)
{
	struct kv_srun *r = vms[here()]->cur;

	if (r == NULL)
		lua_pushnil(L);
	else
		lua_rawgeti(L, LUA_REGISTRYINDEX, keys ? r->keys_ref : r->argv_ref);
}

/* ---- busy and kill (script_state.h) ---- */

static void
become_busy(struct kv_srun *r)
{
	r->busy = true;
	kv_ss_busy_begin(&lstate[here()], &r->ss, r->wrote);
}

static void
end_busy(struct kv_srun *r)
{
	if (!r->busy)
		return;
	r->busy = false;
	kv_ss_busy_end(&lstate[here()], &r->ss);
}

/* Its lcore is closing and this script is to stop (kv_script_closing()). */
static bool
stopped(const struct kv_srun *r)
{
	uint8_t c = closing[here()];

	return c == STOP_ALL || (c == STOP_UNWRITTEN && !r->wrote);
}

/* A script is about to write: from now on it cannot be killed, unless a kill came first.
 * @return false if it was killed. */
static bool
note_write(struct kv_srun *r)
{
	if (stopped(r))
		return false;
	r->wrote = true;
	return !r->busy || kv_ss_write(&lstate[here()], &r->ss);
}

static int
raise_killed(lua_State *L)
{
	lua_newtable(L);
	lua_pushstring(L, "err");
	lua_pushstring(L, closing[here()] != STOP_NONE
			      ? "ERR cr-kv: script stopped: its lcore shuts down or retires"
			      : "ERR Script killed by user with SCRIPT KILL...");
	lua_rawset(L, -3);
	return lua_error(L);
}

void
kv_script_hook(lua_State *L, void *ar)
{
	struct kv_lua *v = vms[here()];
	struct kv_srun *r = v != NULL ? v->cur : NULL;
	long long limit;
	uint64_t now;

	(void)ar;
	if (r == NULL)
		return;
	if (r->err_ref != LUA_NOREF && L == r->call_L) {
		/* redis.call's error reply, raised where the script goes on (a C function that
		 * yielded cannot raise when it is resumed) */
		lua_sethook(L, (lua_Hook)kv_script_hook, LUA_MASKCOUNT, 100000);
		lua_rawgeti(L, LUA_REGISTRYINDEX, r->err_ref);
		luaL_unref(L, LUA_REGISTRYINDEX, r->err_ref);
		r->err_ref = LUA_NOREF;
		lua_error(L);
		return;
	}
	/* acquire: pairs with SCRIPT KILL's CAS */
	if (r->killed || stopped(r) ||
	    (r->busy && !r->wrote && kv_ss_kill_asked(&lstate[here()], &r->ss))) {
		/* Every line from now on raises, as Redis's hook does: pcall cannot save it
		 * (the library's own Lua lines, pcall's, are not the script's: they go on) */
		lua_Debug d;

		if (r->killed && lua_getstack(L, 0, &d) && lua_getinfo(L, "S", &d) &&
		    strcmp(d.source, "=kv") == 0)
			return;
		r->killed = true;
		lua_sethook(L, (lua_Hook)kv_script_hook, LUA_MASKLINE, 0);
		if (L != r->co) /* and where it goes on once a pcall caught this */
			lua_sethook(r->co, (lua_Hook)kv_script_hook, LUA_MASKLINE, 0);
		raise_killed(L);
		return;
	}
	now = cr_clock_ns();
	limit = atomic_load_explicit(&kv_lua_time_limit, memory_order_relaxed);
	if (!r->busy && now - r->start_ns >= (uint64_t)(limit > 0 ? limit : 0) * 1000000ull)
		become_busy(r);
	if (r->busy && kv_lua_can_yield(v, L, r->co)) {
		v->our_yield = true; /* a time slice: the lcore goes round its loop */
		lua_yield(L, 0);
	}
}

/* ---- finishing ---- */

static void
srun_free(void *arg)
{
	struct kv_srun *r = arg;

	if (r == NULL)
		return;
	end_busy(r); /* a script freed before it finished (its lcore stops) */
	if (cr_timer_armed(&r->slice_timer))
		cr_timer_stop(&r->slice_timer);
	if (r->v != NULL) {
		lua_State *L = r->v->L;

		luaL_unref(L, LUA_REGISTRYINDEX, r->co_ref);
		luaL_unref(L, LUA_REGISTRYINDEX, r->keys_ref);
		luaL_unref(L, LUA_REGISTRYINDEX, r->argv_ref);
		luaL_unref(L, LUA_REGISTRYINDEX, r->err_ref);
		luaL_unref(L, LUA_REGISTRYINDEX, r->keyset_ref);
	}
	if (r->sub != NULL)
		kreq_free(r->kr->kc->sh, r->sub);
	rb_fini(&r->out);
	free(r);
}

/* Answer the client r->out; frees r (with its request, perhaps). */
static void
finish(struct kv_srun *r)
{
	struct kreq *kr = r->kr;
	struct kconn *kc = kr->kc;

	end_busy(r);
	if (r->start_ns != 0)
		kr->run_ns += cr_clock_ns() - r->start_ns;
	if (r->held) {
		/* Before the reply is final: the resumed parsing cannot free kr then. */
		r->held = false;
		kv_unblock(kc);
	}
	if (r->tx != NULL) {
		kv_tx_finish(r->tx, r->out.p, r->out.len); /* copies it; frees r */
		return;
	}
	rb_reset(&kr->reply);
	rb_raw(&kr->reply, r->out.p, r->out.len);
	kr->final = &kr->reply;
	kreq_finish(kr); /* may free kr, and r with it */
}

static void
fail(struct kv_srun *r, const char *err)
{
	rb_reset(&r->out);
	rb_error(&r->out, err);
	finish(r);
}

/* ---- running the coroutine ---- */

static void resume(struct kv_srun *r, int nargs);

static void
slice(void *arg)
{
	resume(arg, 0);
}

static void
slice_timer(struct cr_timer *t, void *arg)
{
	(void)t;
	resume(arg, 0);
}

static void
resume(struct kv_srun *r, int nargs)
{
	struct kv_lua *v = r->v;
	int st;

	for (;;) {
		v->cur = r;
		v->our_yield = false;
		v->depth = 0; /* r->co, resumed by the lcore */
		st = lua_resume(r->co, nargs);
		v->cur = NULL;
		nargs = 0;
		if (st != LUA_YIELD)
			break;
		if (!v->our_yield) {
			/* coroutine.yield() outside a coroutine: Lua 5.1 inside Redis refuses it */
			lua_settop(r->co, 0);
			lua_pushstring(r->co, "attempt to yield across metamethod/C-call boundary");
			st = LUA_ERRRUN;
			break;
		}
		v->our_yield = false;
		if (r->sub != NULL)
			return; /* a redis.call waits for another shard: call_done() resumes */
		/* A time slice: the lcore goes round its loop, then this goes on (in a tick
		 * if its defer queue is full: a script that wrote must not be cut). */
		kv_later(slice, r, &r->slice_timer);
		return;
	}
	rb_reset(&r->out);
	if (st == 0)
		kv_lua_to_resp(r->co, lua_gettop(r->co) >= 1 ? 1 : 0, &r->out);
	else
		kv_lua_error_reply(r->co, r->sha, &r->out);
	if (st == 0 && lua_gettop(r->co) == 0) {
		rb_reset(&r->out);
		rb_null(&r->out);
	}
	lua_settop(r->co, 0);
	finish(r);
}

static void
start(struct kv_srun *r)
{
	cr_timer_init(&r->slice_timer, slice_timer, r);
	r->start_ns = cr_clock_ns();
	r->now_ms = r->kr->now_ms != 0 ? r->kr->now_ms : kv_now_ms();
	resume(r, 0);
}

static void
locked(struct kv_tx *tx)
{
	if (!kv_tx_failed(tx))
		start(tx->cmd);
}

/* ---- redis.call ---- */

/* The error table on top: raised by redis.call, returned by redis.pcall. */
static int
give_err(lua_State *L, bool raise)
{
	return raise ? lua_error(L) : 1;
}

static int
push_err(lua_State *L, const char *msg, bool raise)
{
	lua_newtable(L);
	lua_pushstring(L, "err");
	lua_pushstring(L, msg);
	lua_rawset(L, -3);
	return give_err(L, raise);
}

/* Is @p k one of the script's KEYS? (A set of them when there are many.) */
static bool
declared(lua_State *L, const struct kv_srun *r, const struct kv_arg *k)
{
	uint32_t i;
	bool in;

	if (r->keyset_ref != LUA_NOREF) {
		lua_rawgeti(L, LUA_REGISTRYINDEX, r->keyset_ref);
		lua_pushlstring(L, k->p, k->len);
		lua_rawget(L, -2);
		in = lua_toboolean(L, -1);
		lua_pop(L, 2);
		return in;
	}
	for (i = 0; i < r->numkeys; i++)
		if (r->keys[i].len == k->len && memcmp(r->keys[i].p, k->p, k->len) == 0)
			return true;
	return false;
}

static void
call_done(struct kreq *sub)
{
	struct kv_srun *r = sub->owner;
	const struct rbuf *o = sub->final;

	r->kr->run_ns += sub->run_ns;
	if (r->in_call) {
		r->sub_done = true; /* answered at once: the call reads it */
		return;
	}
	kv_lua_push_reply(r->co, o->p, o->len);
	if (r->raise && o->len != 0 && o->p[0] == '-') {
		r->err_ref = luaL_ref(r->co, LUA_REGISTRYINDEX);
		lua_sethook(r->call_L, (lua_Hook)kv_script_hook, LUA_MASKCOUNT, 1);
		lua_pushnil(r->co);
	}
	r->sub = NULL;
	kreq_free(r->kr->kc->sh, sub);
	resume(r, 1);
}

static void
done_here(struct kreq *sub)
{
	sub->final = &sub->reply;
	kreq_finish(sub); /* call_done() */
}

/* The one shard every key is on, -1 for several, -2 for none. */
static int
keys_shard(const struct kv_cmd *cmd, const struct kv_arg *argv, uint32_t argc, uint32_t *idx, int n)
{
	int i, s = -2;

	(void)cmd;
	(void)argc;
	for (i = 0; i < n && s != -1; i++) {
		int k = (int)key_shard(&argv[idx[i]]);

		s = s == -2 || s == k ? k : -1;
	}
	return s;
}

/* Launch @p sub as EXEC runs a queued command (the caller holds the locks). */
static void
launch(struct kv_srun *r, struct kreq *sub, int s)
{
	const struct kv_cmd *cmd = sub->cmd;
	struct kconn *kc = r->kr->kc;
	struct kv_ctx x;
	unsigned i;

	memset(&x, 0, sizeof(x));
	x.sh = kc->sh;
	x.argc = sub->argc;
	x.argv = sub->argv;
	x.out = &sub->reply;
	x.now_ms = r->now_ms;
	x.kc = kc;
	if (cmd->precheck != NULL && !cmd->precheck(&x)) {
		done_here(sub);
		return;
	}
	if (cmd->route == KV_ROUTE_LOCAL || s == -2) {
		uint64_t t0 = cr_clock_ns();

		cmd->fn(&x);
		sub->run_ns += cr_clock_ns() - t0;
		done_here(sub);
		return;
	}
	if (cmd->route == KV_ROUTE_ALL) { /* INFO, PUBLISH...: no locks */
		if (kreq_set_parts(sub, kv.nshards) != 0)
			goto nomem;
		for (i = 0; i < kv.nshards; i++) {
			sub->parts[i].shard = i;
			kreq_part_args(&sub->parts[i], sub->argc, sub->argv);
		}
		kreq_launch(sub);
		return;
	}
	if (s >= 0) {
		kreq_launch_one(sub, (unsigned)s);
		return;
	}
	if (cmd->route == KV_ROUTE_KEYS) {
		if (kreq_split_keys(sub, (unsigned)cmd->step) != 0)
			goto nomem;
		kreq_launch(sub);
		return;
	}
	if (cmd->multi != NULL)
		cmd->multi(sub); /* a nested transaction: the script holds the locks */
	else
		kv_multi_keys(sub);
	return;
nomem:
	rb_reset(&sub->reply);
	rb_error(&sub->reply, kv_err_oom);
	sub->nparts = 0;
	done_here(sub);
}

/* Why @p cmd may not run from this script (Redis's order of checks), or NULL. */
static const char *
refused(struct kv_srun *r, const struct kv_cmd *cmd, uint32_t argc)
{
	if ((cmd->arity > 0 && (uint32_t)cmd->arity != argc) ||
	    (cmd->arity < 0 && argc < (uint32_t)-cmd->arity))
		return "ERR Wrong number of args calling Redis command from script";
	if (cmd->flags & KV_NOSCRIPT)
		return "ERR This Redis command is not allowed from script";
	if (r->ro && (cmd->flags & KV_WRITE))
		return "ERR Write commands are not allowed from read-only scripts.";
	if ((cmd->flags & KV_DENYOOM) && kv_evict_refuse()) /* Redis: pre_command_oom_state */
		return "OOM command not allowed when used memory > 'maxmemory'.";
	if ((cmd->route == KV_ROUTE_ALL && cmd->merge < KV_MERGE_INFO) ||
	    cmd->route == KV_ROUTE_SCAN || cmd->route == KV_ROUTE_SCRIPT)
		return "ERR cr-kv: this command reads or writes the whole keyspace, which a script "
		       "may not: a script touches only the keys it declares (a difference from "
		       "Redis)";
	return NULL;
}

int
kv_script_call(lua_State *L)
{
	struct kv_lua *v = vms[here()];
	struct kv_srun *r = v != NULL ? v->cur : NULL;
	bool raise = lua_toboolean(L, lua_upvalueindex(1));
	int argc = lua_gettop(L), i, nk, s;
	struct kv_arg *argv, *base;
	uint32_t *idx;
	char *nums;
	const struct kv_cmd *cmd;
	const char *why;
	struct kreq *sub;
	char err[300];

	if (r == NULL) {
		return push_err(L, "ERR redis.call outside a script", raise);
	}
	if (argc <= 0) {
		return push_err(
		    L, "ERR Please specify at least one argument for this redis lib call", raise);
	}
	base = argv = malloc((size_t)argc * (sizeof(*argv) + sizeof(*idx) + 32));
	if (argv == NULL) {
		return push_err(L, "ERR out of memory", raise);
	}
	idx = (uint32_t *)(argv + argc);
	nums = (char *)(idx + argc);
	for (i = 0; i < argc; i++) {
		if (lua_type(L, i + 1) == LUA_TNUMBER) {
			/* not lua_tolstring(): its %.14g loses precision (Redis's comment) */
			int n =
			    snprintf(nums + 32 * i, 32, "%.17g", (double)lua_tonumber(L, i + 1));

			argv[i].p = nums + 32 * i;
			argv[i].len = (size_t)n;
		} else if (lua_type(L, i + 1) == LUA_TSTRING) {
			argv[i].p = lua_tolstring(L, i + 1, &argv[i].len);
		} else {
			free(base);
			return push_err(
			    L, "ERR Lua redis lib command arguments must be strings or integers",
			    raise);
		}
	}
	cmd = kv_cmd_lookup(argv[0].p, argv[0].len);
	if (cmd != NULL && cmd->sub != NULL && argc >= 2)
		cmd = kv_cmd_sub_lookup(cmd, argv[1].p, argv[1].len);
	if (cmd == NULL) {
		free(base);
		return push_err(L, "ERR Unknown Redis command called from script", raise);
	}
	why = refused(r, cmd, (uint32_t)argc);
	if (why != NULL) {
		free(base);
		if (why[0] != 'O')
			return push_err(L, why, raise);
		kv_lua_push_error(L, "-OOM command not allowed when used memory > 'maxmemory'.",
				  56);
		return give_err(L, raise);
	}
	if (cmd->flags & KV_BLOCKING) {
		/* BLMPOP, BZMPOP (the blocking pops Redis lets scripts call) do not block
		 * there: they run as LMPOP, ZMPOP (its timeout dropped) */
		cmd = kv_cmd_lookup(cmd->name + 1, strlen(cmd->name) - 1);
		if (cmd == NULL) {
			free(base);
			return push_err(L, "ERR Unknown Redis command called from script", raise);
		}
		argv++;
		argc--;
		argv[0].p = cmd->name; /* what its key positions are read by */
		argv[0].len = strlen(cmd->name);
	}
	nk = cmd->route == KV_ROUTE_LOCAL || cmd->route == KV_ROUTE_ALL
		 ? 0
		 : kv_cmd_keys(cmd, argv, (uint32_t)argc, idx, (uint32_t)argc);
	for (i = 0; i < nk; i++)
		if (!declared(L, r, &argv[idx[i]])) {
			snprintf(
			    err, sizeof(err),
			    "ERR cr-kv: script accessed undeclared key '%.128s': a script may "
			    "touch only the keys it declares in KEYS (a difference from Redis)",
			    argv[idx[i]].p);
			free(base);
			return push_err(L, err, raise);
		}
	s = nk < 0 ? -2 : keys_shard(cmd, argv, (uint32_t)argc, idx, nk);
	/* Will it answer at once (a shard this lcore runs now: not merely its home, which may
	 * be moving or away), or must the script wait (and so yield)? */
	if (((cmd->route == KV_ROUTE_ALL && kv.nshards > 1) ||
	     (cmd->route != KV_ROUTE_LOCAL && cmd->route != KV_ROUTE_ALL && s != -2 &&
	      (s < 0 || !kv_route_here((unsigned)s)))) &&
	    v->can_probe && !kv_lua_can_yield(v, L, r->co)) {
		free(base);
		return push_err(L,
				"ERR cr-kv: a redis.call for another shard cannot wait inside a "
				"metamethod or a sort, gsub or load callback",
				raise);
	}
	if ((cmd->flags & KV_WRITE) && !note_write(r)) {
		free(base);
		r->killed = true;
		return raise_killed(L);
	}
	sub = kreq_new(r->kr->kc->sh, r->kr->kc, cmd, (uint32_t)argc, argv);
	free(base);
	if (sub == NULL) {
		return push_err(L, "ERR out of memory", raise);
	}
	sub->on_done = call_done;
	sub->owner = r;
	sub->hop = true;
	sub->now_ms = r->now_ms;
	r->sub = sub;
	r->sub_done = false;
	r->in_call = true;
	launch(r, sub, s);
	r->in_call = false;
	if (r->sub_done) {
		const struct rbuf *o = sub->final;

		bool err = o->len != 0 && o->p[0] == '-';

		kv_lua_push_reply(L, o->p, o->len);
		r->sub = NULL;
		kreq_free(r->kr->kc->sh, sub);
		return err ? give_err(L, raise) : 1;
	}
	r->call_L = L;
	r->raise = raise;
	v->our_yield = true; /* the answer resumes us (call_done()) */
	return lua_yield(L, 0);
}

/* ---- EVAL ---- */

/* Redis 7.0's shebang: "#!lua [flags=f1,f2]". @return 0, or -EINVAL with the error in
 * @p err; *skip: the bytes of the first line (the body compiled starts at its '\n'). */
static int
shebang(const char *body, size_t len, unsigned *flags, size_t *skip, char *err, size_t errn)
{
	const char *nl, *p, *end, *w;

	*flags = 0;
	*skip = 0;
	if (len < 2 || body[0] != '#' || body[1] != '!')
		return 0;
	nl = memchr(body, '\n', len);
	if (nl == NULL) {
		snprintf(err, errn, "ERR Invalid script shebang");
		return -EINVAL;
	}
	*skip = (size_t)(nl - body);
	*flags = SF_SHEBANG;
	p = body;
	end = nl;
	for (w = p; p < end; w = p) {
		size_t n;

		while (w < end && (*w == ' ' || *w == '\t' || *w == '\r'))
			w++;
		for (p = w; p < end && *p != ' ' && *p != '\t' && *p != '\r'; p++)
			;
		n = (size_t)(p - w);
		if (n == 0)
			break;
		if (w == body) {
			if (n != 5 || memcmp(w, "#!lua", 5) != 0) {
				snprintf(err, errn, "ERR Unexpected engine in script shebang: %.*s",
					 (int)n, w);
				return -EINVAL;
			}
			continue;
		}
		if (n >= 6 && memcmp(w, "flags=", 6) == 0) {
			const char *f = w + 6, *c;

			while (f <= p) {
				size_t fl;

				for (c = f; c < p && *c != ','; c++)
					;
				fl = (size_t)(c - f);
				if (fl == 9 && memcmp(f, "no-writes", 9) == 0)
					*flags |= SF_NO_WRITES;
				else if (!((fl == 9 && memcmp(f, "allow-oom", 9) == 0) ||
					   (fl == 11 && memcmp(f, "allow-stale", 11) == 0) ||
					   (fl == 10 && memcmp(f, "no-cluster", 10) == 0) ||
					   (fl == 21 &&
					    memcmp(f, "allow-cross-slot-keys", 21) == 0) ||
					   fl == 0)) {
					snprintf(err, errn,
						 "ERR Unexpected flag in script shebang: %.*s",
						 (int)fl, f);
					return -EINVAL;
				}
				f = c + 1;
			}
			continue;
		}
		snprintf(err, errn, "ERR Unknown lua shebang option: %.*s", (int)n, w);
		return -EINVAL;
	}
	return 0;
}

struct sbcopy {
	unsigned flags;
	char err[200];
};

static int
shebang_of(void *arg, const char *body, size_t len)
{
	struct sbcopy *c = arg;
	size_t skip;

	return shebang(body, len, &c->flags, &skip, c->err, sizeof(c->err));
}

static int
kv_keys_eval(const struct kv_arg *argv, uint32_t argc, uint32_t *idx, uint32_t max)
{
	long long n;
	uint32_t i;

	if (argc < 3 || !resp_string2ll(argv[2].p, argv[2].len, &n) || n < 0 ||
	    n > (long long)argc - 3)
		return -1;
	for (i = 0; i < (uint32_t)n && i < max; i++)
		idx[i] = 3 + i;
	return (int)i;
}

int
kv_keys_script(const struct kv_arg *argv, uint32_t argc, uint32_t *idx, uint32_t max)
{
	return kv_keys_eval(argv, argc, idx, max);
}

bool
precheck_eval(struct kv_ctx *x)
{
	long long n;

	if (!resp_string2ll(x->argv[2].p, x->argv[2].len, &n)) {
		rb_error(x->out, kv_err_int);
		return false;
	}
	if (n > (long long)x->argc - 3) {
		rb_error(x->out, "ERR Number of keys can't be greater than number of args");
		return false;
	}
	if (n < 0) {
		rb_error(x->out, "ERR Number of keys can't be negative");
		return false;
	}
	return true;
}

static void
push_strings(lua_State *L, const struct kv_arg *a, uint32_t n)
{
	uint32_t i;

	lua_createtable(L, (int)n, 0);
	for (i = 0; i < n; i++) {
		lua_pushlstring(L, a[i].p, a[i].len);
		lua_rawseti(L, -2, (int)i + 1);
	}
}

void
kv_script_eval(struct kreq *kr)
{
	const char *name = kr->cmd->name;
	bool sha = strncmp(name, "evalsha", 7) == 0;
	struct kv_lua *v = kv_lua_here();
	struct kv_srun *r = NULL;
	struct sbcopy sb = {0};
	char lsha[KV_SHA_LEN + 1];
	size_t skip = 0;
	long long nk = 0;
	uint32_t i;
	int rc;

	r = v != NULL ? calloc(1, sizeof(*r)) : NULL;
	if (r == NULL || !precheck_eval(&(struct kv_ctx){
			     .argc = kr->argc, .argv = kr->argv, .out = &kr->reply})) {
		if (r == NULL)
			rb_error(&kr->reply, kv_err_oom);
		free(r);
		kr->final = &kr->reply;
		kreq_finish(kr);
		return;
	}
	r->kr = kr;
	r->v = v;
	r->co_ref = r->keys_ref = r->argv_ref = r->err_ref = r->keyset_ref = LUA_NOREF;
	rb_init(&r->out, NULL, 0);
	kr->state = r;
	kr->state_fini = srun_free;
	resp_string2ll(kr->argv[2].p, kr->argv[2].len, &nk);
	r->numkeys = (uint32_t)nk;
	r->keys = kr->argv + 3;
	r->ro = strstr(name, "_ro") != NULL;
	/* the function: compiled here, or from the process's cache */
	if (sha) {
		for (i = 0; i < KV_SHA_LEN && i < kr->argv[1].len; i++)
			lsha[i] = (char)(kr->argv[1].p[i] | (kr->argv[1].p[i] >= 'A' ? 0x20 : 0));
		lsha[i] = '\0';
		rc = kr->argv[1].len == KV_SHA_LEN ? kv_sc_with(lsha, shebang_of, &sb) : -ENOENT;
		if (rc == -ENOENT) {
			fail(r, "NOSCRIPT No matching script. Please use EVAL.");
			return;
		}
		if (rc != 0) {
			fail(r, sb.err);
			return;
		}
		rc = kv_lua_function(v, lsha, NULL, 0, &r->out);
	} else {
		if (shebang(kr->argv[1].p, kr->argv[1].len, &sb.flags, &skip, sb.err,
			    sizeof(sb.err)) != 0) {
			fail(r, sb.err);
			return;
		}
		kv_sha1hex(kr->argv[1].p, kr->argv[1].len, lsha);
		rc =
		    kv_lua_function(v, lsha, kr->argv[1].p + skip, kr->argv[1].len - skip, &r->out);
		if (rc == 0 && kv_sc_put(kr->argv[1].p, kr->argv[1].len, lsha) != 0)
			rc = -ENOMEM;
	}
	if (rc == -ENOENT) {
		fail(r, "NOSCRIPT No matching script. Please use EVAL.");
		return;
	}
	if (rc != 0) {
		if (rc == -ENOMEM)
			fail(r, kv_err_oom);
		else
			finish(r); /* the compile error is in r->out */
		return;
	}
	memcpy(r->sha, lsha, sizeof(lsha));
	if (sb.flags & SF_NO_WRITES)
		r->ro = true;
	/* its coroutine, seeing the scripts' globals, and its KEYS and ARGV */
	r->co = lua_newthread(v->L);
	lua_pushvalue(v->L, -2);
	lua_xmove(v->L, r->co, 1);
	kv_lua_push_globals(r->co);
	lua_replace(r->co, LUA_GLOBALSINDEX);
	r->co_ref = luaL_ref(v->L, LUA_REGISTRYINDEX);
	lua_pop(v->L, 1); /* the function */
	push_strings(v->L, r->keys, r->numkeys);
	r->keys_ref = luaL_ref(v->L, LUA_REGISTRYINDEX);
	if (r->numkeys > 16) {
		lua_createtable(v->L, 0, (int)r->numkeys);
		for (i = 0; i < r->numkeys; i++) {
			lua_pushlstring(v->L, r->keys[i].p, r->keys[i].len);
			lua_pushboolean(v->L, 1);
			lua_rawset(v->L, -3);
		}
		r->keyset_ref = luaL_ref(v->L, LUA_REGISTRYINDEX);
	}
	push_strings(v->L, kr->argv + 3 + r->numkeys, kr->argc - 3 - r->numkeys);
	r->argv_ref = luaL_ref(v->L, LUA_REGISTRYINDEX);
	/* A client's own EVAL: nothing of its later commands runs until it is done. */
	if (r->numkeys == 0) {
		if (kr->on_done == NULL) {
			r->held = true;
			kr->kc->blocked++;
		}
		start(r);
		return;
	}
	/* With keys, the transaction's own hold does it, kept to its end: kv_tx_finish()
	 * releases it however the transaction ends, also when its locks could not be taken
	 * (then r never runs, and finish() is not called). */
	r->tx = kv_tx_new(kr); /* its state is now the transaction's, which owns r */
	if (r->tx == NULL) {
		kr->state = NULL;
		srun_free(r);
		kr->final = &kr->reply;
		kreq_finish(kr);
		return;
	}
	r->tx->cmd = r;
	r->tx->cmd_fini = srun_free;
	r->tx->block_to_end = true;
	rc = 0;
	for (i = 0; i < r->numkeys && rc == 0; i++)
		rc = kv_tx_key(r->tx, 3 + i, !r->ro);
	if (rc != 0) {
		fail(r, kv_err_oom);
		return;
	}
	kv_tx_lock(r->tx, NULL, 1, locked);
}

/* ---- SCRIPT ---- */

KV_CMD(script_load)
{
	struct kv_lua *v = kv_lua_here();
	struct sbcopy sb = {0};
	char sha[KV_SHA_LEN + 1];
	size_t skip;

	if (v == NULL) {
		rb_error(x->out, kv_err_oom);
		return;
	}
	if (shebang(x->argv[2].p, x->argv[2].len, &sb.flags, &skip, sb.err, sizeof(sb.err)) != 0) {
		rb_error(x->out, sb.err);
		return;
	}
	kv_sha1hex(x->argv[2].p, x->argv[2].len, sha);
	if (kv_lua_function(v, sha, x->argv[2].p + skip, x->argv[2].len - skip, x->out) != 0)
		return; /* the compile error is replied */
	lua_pop(v->L, 1);
	if (kv_sc_put(x->argv[2].p, x->argv[2].len, sha) != 0) {
		rb_error(x->out, kv_err_oom);
		return;
	}
	rb_bulk(x->out, sha, KV_SHA_LEN);
}

KV_CMD(script_exists)
{
	uint32_t i;

	rb_array(x->out, x->argc - 2);
	for (i = 2; i < x->argc; i++)
		rb_int(x->out, kv_sc_exists(x->argv[i].p, x->argv[i].len));
}

KV_CMD(script_flush)
{
	if (x->argc > 3 || (x->argc == 3 && strcasecmp(x->argv[2].p, "sync") != 0 &&
			    strcasecmp(x->argv[2].p, "async") != 0)) {
		rb_error(x->out, "ERR SCRIPT FLUSH only support SYNC|ASYNC option");
		return;
	}
	if (kv_sc_flush() != 0) {
		rb_error(x->out, kv_err_oom);
		return;
	}
	rb_ok(x->out);
}

KV_CMD(script_kill)
{
	switch (kv_ss_kill(lstate, CR_MAX_LCORES)) {
	case KV_SS_NOTBUSY:
		rb_error(x->out, "NOTBUSY No scripts in execution right now.");
		return;
	case KV_SS_UNKILLABLE:
		rb_error(x->out, "UNKILLABLE Sorry the script already executed write commands "
				 "against the dataset. You can either wait the script termination "
				 "or kill the server in a hard way using the SHUTDOWN NOSAVE "
				 "command.");
		return;
	case KV_SS_KILLED:
		rb_ok(x->out);
		return;
	}
}

KV_CMD(script_debug)
{
	if (strcasecmp(x->argv[2].p, "no") == 0)
		rb_ok(x->out); /* debugging is off: it always is */
	else if (strcasecmp(x->argv[2].p, "yes") == 0 || strcasecmp(x->argv[2].p, "sync") == 0)
		rb_error(x->out, "ERR cr-kv has no Lua debugger");
	else
		rb_error(x->out, "ERR Use SCRIPT DEBUG YES/SYNC/NO");
}

KV_CMD(script_help)
{
	static const char *const l[] = {
	    "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	    "DEBUG (YES|SYNC|NO)",
	    "    Set the debug mode for subsequent scripts executed.",
	    "EXISTS <sha1> [<sha1> ...]",
	    "    Return information about the existence of the scripts in the script cache.",
	    "FLUSH [ASYNC|SYNC]",
	    "    Flush the Lua scripts cache. Very dangerous on replicas.",
	    "    When called without the optional mode argument, the behavior is determined by "
	    "the",
	    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
	    "    * ASYNC: Asynchronously flush the scripts cache.",
	    "    * SYNC: Synchronously flush the scripts cache.",
	    "KILL",
	    "    Kill the currently executing Lua script.",
	    "LOAD <script>",
	    "    Load a script into the scripts cache without executing it.",
	    "HELP",
	    "    Prints this help.",
	    NULL};

	kv_reply_help(x, l);
}
