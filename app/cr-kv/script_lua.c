/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One lcore's Lua 5.1 VM, set up as Redis 7.0 sets up its own: the base, table, string
 * and math libraries, cjson and bit (Debian's lua-cjson and lua-bitop), the redis.*
 * library, no io, os, loadfile, dofile, print, require...; globals and library tables
 * read-only ("Attempt to modify a readonly table"), a missing global an error ("Script
 * attempted to access nonexistent global variable"); Redis's conversions between Lua
 * values and RESP2; its PRNG for math.random, reseeded before each script.
 *
 * Scripts see the globals through a proxy (an empty table whose metatable reads the real
 * globals, and KEYS and ARGV of the script running now), so several scripts may be under
 * way on one lcore (each in its coroutine, one running at a time) without sharing KEYS.
 *
 * pcall, xpcall and coroutine.resume/wrap are replaced by versions written over
 * coroutines (in the manner of coxpcall), so that a redis.call waiting for another shard,
 * or a time slice, can yield through them: Lua 5.1 cannot yield across its own pcall.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "cr_log.h"
#include "kv.h"
#include "script.h"

CR_LOG_COMPONENT(script_log, "app.kv.script")

extern int luaopen_cjson(lua_State *L);
extern int luaopen_bit(lua_State *L);

#define REG_PROTECTED "kv.protected" /* registry: set of read-only proxies */
#define REG_GLOBALS   "kv.globals"   /* registry: the scripts' globals proxy */

/* ---- the C-call depth of a coroutine ----
 *
 * Lua 5.1 refuses to yield across a C call of the VM (a metamethod, a table.sort
 * comparator, a string.gsub callback...), by raising an error. A hook that yields for a
 * time slice must not raise, so it asks first, from the two counters lua_yield() itself
 * compares. They are not in the API: this is the head of 5.1's struct lua_State (lstate.h,
 * unchanged since 5.1.0), checked against the API's accessors when the VM is made; if the
 * check fails, slices are off (a script then runs in one go, SCRIPT KILL still works). */
struct lua51_head {
	void *next;
	unsigned char tt, marked, status;
	void *top, *base, *l_G, *ci;
	const void *savedpc;
	void *stack_last, *stack, *end_ci, *base_ci;
	int stacksize, size_ci;
	unsigned short nCcalls, baseCcalls;
	unsigned char hookmask, allowhook;
	int basehookcount, hookcount;
	lua_Hook hook;
};

static bool
yieldable(lua_State *co)
{
	const struct lua51_head *h = (const void *)co;

	return h->nCcalls <= h->baseCcalls;
}

/* The prelude's pcall and coroutine.resume pass a yield up (see there): each coroutine
 * between @p co and @p top yields in turn, and each must be able to, or the yield fails
 * half-way, after the redis.call it waits for was sent. */
bool
kv_lua_can_yield(struct kv_lua *v, lua_State *co, lua_State *top)
{
	unsigned d = v->depth, i;

	if (!v->can_probe || d > KV_LUA_NEST)
		return false;
	/* the entries past the one that resumed co are stale (a resume left by an error
	 * that a raw pcall caught): skip them */
	while (d > 0 && v->nested[d - 1] != co)
		d--;
	if (d == 0 && co != top)
		return false; /* not resumed by the script's coroutines: cannot tell */
	if (d > 0 && v->nest[0] != top)
		return false;
	if (!yieldable(co))
		return false;
	for (i = 0; i < d; i++)
		if (!yieldable(v->nest[i]))
			return false;
	return true;
}

/* coroutine.resume, under the prelude's: notes who resumes whom for kv_lua_can_yield(). */
static int
l_resume(lua_State *L)
{
	struct kv_lua *v = lua_touserdata(L, lua_upvalueindex(1));
	lua_CFunction resume = lua_tocfunction(L, lua_upvalueindex(2));
	lua_State *co = lua_tothread(L, 1);
	unsigned d = v->depth;
	int n;

	if (co == NULL)
		return resume(L); /* its argument error */
	if (d < KV_LUA_NEST) {
		v->nest[d] = L;
		v->nested[d] = co;
	}
	v->depth = d + 1; /* past KV_LUA_NEST: not recorded, and nothing under it yields */
	n = resume(L);	  /* catches co's errors: it raises none but its own (ENOMEM) */
	v->depth = d;
	return n;
}

static int
probe_inside(lua_State *L)
{
	const struct lua51_head *h = (const void *)L;

	lua_pushboolean(L, h->nCcalls > h->baseCcalls);
	return 1;
}

static bool
probe_layout(lua_State *L)
{
	const struct lua51_head *h = (const void *)L;
	bool inside;

	if (h->hook != lua_gethook(L) || h->basehookcount != lua_gethookcount(L) ||
	    h->hookmask != lua_gethookmask(L))
		return false;
	lua_pushcfunction(L, probe_inside);
	if (lua_pcall(L, 0, 1, 0) != 0) {
		lua_pop(L, 1);
		return false;
	}
	inside = lua_toboolean(L, -1);
	lua_pop(L, 1);
	return inside && h->nCcalls == h->baseCcalls;
}

/* ---- math.random: Redis's redisLrand48(), seeded 0 before each script ---- */

static int32_t
lrand48_next(struct kv_lua *v)
{
	v->rand48 = (v->rand48 * 0x5DEECE66DULL + 0xB) & ((1ULL << 48) - 1);
	return (int32_t)(v->rand48 >> 17);
}

void
kv_lua_reseed(struct kv_lua *v)
{
	v->rand48 = (0ULL << 16) | 0x330E;
}

static struct kv_lua *
vm_of(lua_State *L)
{
	return lua_touserdata(L, lua_upvalueindex(1));
}

static int
math_random(lua_State *L)
{
	struct kv_lua *v = vm_of(L);
	lua_Number r = (lua_Number)(lrand48_next(v) % INT32_MAX) / (lua_Number)INT32_MAX;
	int l, u;

	switch (lua_gettop(L)) {
	case 0:
		lua_pushnumber(L, r);
		break;
	case 1:
		u = luaL_checkint(L, 1);
		luaL_argcheck(L, 1 <= u, 1, "interval is empty");
		lua_pushnumber(L, floor(r * u) + 1);
		break;
	case 2:
		l = luaL_checkint(L, 1);
		u = luaL_checkint(L, 2);
		luaL_argcheck(L, l <= u, 2, "interval is empty");
		lua_pushnumber(L, floor(r * (u - l + 1)) + l);
		break;
	default:
		return luaL_error(L, "wrong number of arguments");
	}
	return 1;
}

static int
math_randomseed(lua_State *L)
{
	struct kv_lua *v = vm_of(L);
	int32_t s = (int32_t)luaL_checkint(L, 1);

	v->rand48 = ((uint64_t)(uint32_t)s << 16) | 0x330E;
	return 0;
}

/* ---- errors as Redis makes them ---- */

void
kv_lua_push_error(lua_State *L, const char *s, size_t n)
{
	const char *sp;
	size_t cl, ml;

	/* "-CODE msg": the code is the first word; "msg": the code is ERR (Redis's
	 * luaPushErrorBuff()); a trailing CR/LF is trimmed. */
	lua_newtable(L);
	lua_pushstring(L, "err");
	if (n > 0 && s[0] == '-') {
		sp = memchr(s, ' ', n);
		if (sp == NULL) {
			lua_pushstring(L, "ERR ");
			lua_pushlstring(L, s + 1, n - 1);
		} else {
			cl = (size_t)(sp - s) - 1;
			lua_pushlstring(L, s + 1, cl);
			lua_pushstring(L, " ");
			ml = n - cl - 2;
			while (ml > 0 && (sp[ml] == '\r' || sp[ml] == '\n'))
				ml--;
			lua_pushlstring(L, sp + 1, ml);
			lua_concat(L, 3);
			goto set;
		}
	} else {
		lua_pushstring(L, "ERR ");
		lua_pushlstring(L, s, n);
	}
	while (lua_objlen(L, -1) > 0) {
		size_t l;
		const char *t = lua_tolstring(L, -1, &l);

		if (t[l - 1] != '\r' && t[l - 1] != '\n')
			break;
		lua_pushlstring(L, t, l - 1);
		lua_remove(L, -2);
	}
	lua_concat(L, 2);
set:
	lua_rawset(L, -3);
}

/* Raise {err = "ERR <msg>"} (Redis's luaPushError() + luaError()). */
static int
raise_err(lua_State *L, const char *msg)
{
	lua_newtable(L);
	lua_pushstring(L, "err");
	lua_pushfstring(L, "ERR %s", msg);
	lua_rawset(L, -3);
	return lua_error(L);
}

/* ---- RESP -> Lua ---- */

static const char *
line_end(const char *p, const char *end)
{
	const char *q = memchr(p, '\r', (size_t)(end - p));

	return q != NULL ? q : end;
}

static const char *
push_one(lua_State *L, const char *p, const char *end)
{
	const char *e = line_end(p + 1, end);
	long long n = 0, i;

	if (p >= end)
		return end;
	luaL_checkstack(L, 4, "reached lua stack limit");
	switch (p[0]) {
	case '+':
		lua_newtable(L);
		lua_pushstring(L, "ok");
		lua_pushlstring(L, p + 1, (size_t)(e - p - 1));
		lua_rawset(L, -3);
		return e + 2;
	case '-':
		lua_newtable(L);
		lua_pushstring(L, "err");
		lua_pushlstring(L, p + 1, (size_t)(e - p - 1));
		lua_rawset(L, -3);
		return e + 2;
	case ':':
		resp_string2ll(p + 1, (size_t)(e - p - 1), &n);
		lua_pushnumber(L, (lua_Number)n);
		return e + 2;
	case '$':
		resp_string2ll(p + 1, (size_t)(e - p - 1), &n);
		if (n < 0) {
			lua_pushboolean(L, 0);
			return e + 2;
		}
		lua_pushlstring(L, e + 2, (size_t)n);
		return e + 2 + n + 2;
	case '*':
		resp_string2ll(p + 1, (size_t)(e - p - 1), &n);
		if (n < 0) {
			lua_pushboolean(L, 0);
			return e + 2;
		}
		lua_createtable(L, n < 1024 ? (int)n : 1024, 0);
		p = e + 2;
		for (i = 1; i <= n; i++) {
			p = push_one(L, p, end);
			lua_rawseti(L, -2, (int)i);
		}
		return p;
	default:
		lua_pushboolean(L, 0);
		return end;
	}
}

void
kv_lua_push_reply(lua_State *L, const char *p, size_t n)
{
	(void)push_one(L, p, p + n);
}

/* ---- Lua -> RESP2 (Redis 7.0's luaReplyToRedisReply()) ---- */

static void
error_text(struct rbuf *out, const char *s, size_t n)
{
	/* "-%s": trailing CR/LF trimmed, the others made spaces (rb_errorlen) */
	while (n > 0 && (s[n - 1] == '\r' || s[n - 1] == '\n'))
		n--;
	rb_errorlen(out, s, n);
}

static bool
field(lua_State *L, int t, const char *name, int type)
{
	lua_pushstring(L, name);
	lua_rawget(L, t);
	if (lua_type(L, -1) == type)
		return true;
	lua_pop(L, 1);
	return false;
}

static void
to_resp(lua_State *L, int idx, struct rbuf *out)
{
	size_t len, at;
	const char *s;
	long long n = 0;
	lua_Number d;
	int t;

	if (idx < 0)
		idx = lua_gettop(L) + idx + 1;
	if (!lua_checkstack(L, 4)) {
		rb_error(out, "ERR reached lua stack limit");
		return;
	}
	switch (lua_type(L, idx)) {
	case LUA_TSTRING:
		s = lua_tolstring(L, idx, &len);
		rb_bulk(out, s, len);
		return;
	case LUA_TBOOLEAN:
		if (lua_toboolean(L, idx))
			rb_int(out, 1);
		else
			rb_null(out);
		return;
	case LUA_TNUMBER:
		d = lua_tonumber(L, idx);
		/* (long long)d, as x86-64 converts what does not fit: LLONG_MIN */
		rb_int(out, d >= -9223372036854775808.0 && d < 9223372036854775808.0 ? (long long)d
										     : LLONG_MIN);
		return;
	case LUA_TTABLE:
		break;
	default:
		rb_null(out);
		return;
	}
	if (field(L, idx, "err", LUA_TSTRING)) {
		s = lua_tolstring(L, -1, &len);
		error_text(out, s, len);
		lua_pop(L, 1);
		return;
	}
	if (field(L, idx, "ok", LUA_TSTRING)) {
		char *c;
		size_t i;

		s = lua_tolstring(L, -1, &len);
		c = malloc(len + 1);
		if (c != NULL) {
			for (i = 0; i < len; i++)
				c[i] = s[i] == '\r' || s[i] == '\n' ? ' ' : s[i];
			c[len] = '\0';
			rb_raw(out, "+", 1);
			rb_raw(out, c, len);
			rb_raw(out, "\r\n", 2);
			free(c);
		}
		lua_pop(L, 1);
		return;
	}
	if (field(L, idx, "double", LUA_TNUMBER)) {
		kv_reply_double(out, lua_tonumber(L, -1));
		lua_pop(L, 1);
		return;
	}
	if (field(L, idx, "map", LUA_TTABLE) || field(L, idx, "set", LUA_TTABLE)) {
		bool map;

		lua_pushstring(L, "map");
		lua_rawget(L, idx);
		map = lua_rawequal(L, -1, -2);
		lua_pop(L, 1);
		t = lua_gettop(L);
		at = kv_array_begin(out);
		lua_pushnil(L);
		while (lua_next(L, t) != 0) {
			to_resp(L, -2, out);
			if (map)
				to_resp(L, -1, out);
			n += map ? 2 : 1;
			lua_pop(L, 1);
		}
		kv_array_end(out, at, n);
		lua_pop(L, 1);
		return;
	}
	at = kv_array_begin(out);
	for (;;) {
		lua_rawgeti(L, idx, (int)n + 1);
		if (lua_isnil(L, -1)) {
			lua_pop(L, 1);
			break;
		}
		to_resp(L, -1, out);
		lua_pop(L, 1);
		n++;
	}
	kv_array_end(out, at, n);
}

void
kv_lua_to_resp(lua_State *L, int idx, struct rbuf *out)
{
	to_resp(L, idx, out);
}

/* ---- the error reply of a script that failed ---- */

void
kv_lua_error_reply(lua_State *co, const char *sha, struct rbuf *out)
{
	lua_Debug ar;
	int level, line = -1;
	char src[80] = "@user_script";
	const char *msg = NULL;
	size_t mlen = 0;
	char buf[256];

	/* Redis's __redis__err__handler: where the error was raised, or its caller when that
	 * was a C function; here also past the library's own Lua wrappers (redis.call...). */
	for (level = 0; lua_getstack(co, level, &ar); level++) {
		if (!lua_getinfo(co, "Sl", &ar))
			break;
		if (strcmp(ar.what, "C") == 0 || strcmp(ar.source, "=kv") == 0)
			continue;
		line = ar.currentline;
		snprintf(src, sizeof(src), "%s", ar.source);
		break;
	}
	lua_checkstack(co, 4);
	if (lua_istable(co, -1)) {
		lua_getfield(co, -1, "err");
		if (lua_isstring(co, -1))
			msg = lua_tolstring(co, -1, &mlen);
		if (msg != NULL) {
			size_t at = out->len;

			error_text(out, msg, mlen);
			if (line >= 0) {
				out->len -= 2; /* reopen it: " script: ..." goes before the CRLF */
				(void)at;
				snprintf(buf, sizeof(buf), " script: %s, on %s:%d.\r\n", sha, src,
					 line);
				rb_raw(out, buf, strlen(buf));
			}
			lua_pop(co, 1);
			return;
		}
		lua_pop(co, 1);
		lua_pushstring(co, "unknown error");
	} else if (!lua_isstring(co, -1)) {
		lua_pushstring(co, lua_isnil(co, -1) ? "nil" : luaL_typename(co, -1));
	} else {
		lua_pushvalue(co, -1);
	}
	lua_pushstring(co, "ERR ");
	lua_insert(co, -2);
	lua_concat(co, 2);
	msg = lua_tolstring(co, -1, &mlen);
	error_text(out, msg, mlen);
	if (line >= 0) {
		out->len -= 2;
		snprintf(buf, sizeof(buf), " script: %s, on %s:%d.\r\n", sha, src, line);
		rb_raw(out, buf, strlen(buf));
	}
	lua_pop(co, 1);
}

/* ---- the redis.* library ---- */

static int
l_sha1hex(lua_State *L)
{
	char sha[KV_SHA_LEN + 1];
	const char *s;
	size_t n;

	if (lua_gettop(L) != 1)
		return raise_err(L, "wrong number of arguments");
	s = lua_tolstring(L, 1, &n);
	kv_sha1hex(s != NULL ? s : "", s != NULL ? n : 0, sha);
	lua_pushstring(L, sha);
	return 1;
}

static int
l_error_reply(lua_State *L)
{
	const char *s;
	size_t n;
	char *c;

	if (lua_gettop(L) != 1 || lua_type(L, -1) != LUA_TSTRING) {
		lua_settop(L, 0);
		kv_lua_push_error(L, "wrong number or type of arguments", 33);
		return 1;
	}
	s = lua_tolstring(L, 1, &n);
	if (n > 0 && s[0] == '-') {
		kv_lua_push_error(L, s, n);
		return 1;
	}
	c = malloc(n + 1);
	if (c == NULL)
		return raise_err(L, "out of memory");
	c[0] = '-';
	memcpy(c + 1, s, n);
	kv_lua_push_error(L, c, n + 1);
	free(c);
	return 1;
}

static int
l_status_reply(lua_State *L)
{
	if (lua_gettop(L) != 1 || lua_type(L, -1) != LUA_TSTRING) {
		lua_settop(L, 0);
		kv_lua_push_error(L, "wrong number or type of arguments", 33);
		return 1;
	}
	lua_newtable(L);
	lua_pushstring(L, "ok");
	lua_pushvalue(L, 1);
	lua_rawset(L, -3);
	return 1;
}

static int
l_log(lua_State *L)
{
	static const int levels[] = {CR_LOG_DEBUG, CR_LOG_INFO, CR_LOG_NOTICE, CR_LOG_WARNING};
	int argc = lua_gettop(L), i, lvl;

	if (argc < 2)
		return raise_err(L, "redis.log() requires two arguments or more.");
	if (!lua_isnumber(L, 1))
		return raise_err(L, "First argument must be a number (log level).");
	lvl = (int)lua_tonumber(L, 1);
	if (lvl < 0 || lvl > 3)
		return raise_err(L, "Invalid debug level.");
	if (atomic_load_explicit(&script_log.level, memory_order_relaxed) < levels[lvl])
		return 0;
	for (i = 2; i <= argc; i++) {
		if (i > 2)
			lua_pushstring(L, " ");
		lua_pushvalue(L, i);
		if (!lua_isstring(L, -1)) {
			lua_pop(L, 1);
			lua_pushstring(L, "");
		}
	}
	lua_concat(L, 2 * (argc - 1) - 1);
	cr_log_write(&script_log, (enum cr_log_level)levels[lvl], "%s", lua_tostring(L, -1));
	return 0;
}

static int
l_setresp(lua_State *L)
{
	int n;

	if (lua_gettop(L) != 1)
		return raise_err(L, "redis.setresp() requires one argument.");
	n = (int)lua_tonumber(L, -1);
	if (n != 2 && n != 3)
		return raise_err(L, "RESP version must be 2 or 3.");
	return 0; /* cr-kv's commands answer RESP2: the conversions stay RESP2's */
}

static int
l_set_repl(lua_State *L)
{
	if (lua_gettop(L) != 1)
		return raise_err(L, "redis.set_repl() requires one argument.");
	return 0; /* nothing is replicated */
}

static int
l_true(lua_State *L)
{
	lua_pushboolean(L, 1);
	return 1;
}

static int
l_false(lua_State *L)
{
	lua_pushboolean(L, 0);
	return 1;
}

static int
l_nothing(lua_State *L)
{
	(void)L;
	return 0;
}

static int
l_acl_check_cmd(lua_State *L)
{
	const char *s;
	size_t n;

	if (lua_gettop(L) < 1 || (s = lua_tolstring(L, 1, &n)) == NULL ||
	    kv_cmd_lookup(s, n) == NULL)
		return raise_err(L, "Invalid command passed to redis.acl_check_cmd()");
	lua_pushboolean(L, 1); /* one user, allowed everything */
	return 1;
}

/* The scheduler's side of yields (script_run.c). */
static int
l_ours(lua_State *L)
{
	lua_pushboolean(L, kv_script_our_yield(L));
	return 1;
}

static int
l_ouryield(lua_State *L)
{
	kv_script_mark_yield(L);
	return lua_yield(L, 0);
}

/* ---- read-only tables and globals ---- */

static bool
is_protected(lua_State *L, int idx)
{
	bool p;

	if (!lua_istable(L, idx))
		return false;
	lua_getfield(L, LUA_REGISTRYINDEX, REG_PROTECTED);
	lua_pushvalue(L, idx < 0 ? idx - 1 : idx);
	lua_rawget(L, -2);
	p = lua_toboolean(L, -1);
	lua_pop(L, 2);
	return p;
}

static int
readonly_error(lua_State *L)
{
	return luaL_error(L, "Attempt to modify a readonly table");
}

static int
l_rawset(lua_State *L)
{
	luaL_checktype(L, 1, LUA_TTABLE);
	luaL_checkany(L, 2);
	luaL_checkany(L, 3);
	if (is_protected(L, 1)) {
		lua_pushstring(L, "Attempt to modify a readonly table");
		return lua_error(L);
	}
	lua_settop(L, 3);
	lua_rawset(L, 1);
	return 1;
}

static int
l_setmetatable(lua_State *L)
{
	int t = lua_type(L, 2);

	luaL_checktype(L, 1, LUA_TTABLE);
	luaL_argcheck(L, t == LUA_TNIL || t == LUA_TTABLE, 2, "nil or table expected");
	if (is_protected(L, 1)) {
		lua_pushstring(L, "Attempt to modify a readonly table");
		return lua_error(L);
	}
	if (luaL_getmetafield(L, 1, "__metatable"))
		return luaL_error(L, "cannot change a protected metatable");
	lua_settop(L, 2);
	lua_setmetatable(L, 1);
	return 1;
}

/* The scripts' globals: KEYS and ARGV of the running script, else the real globals, else
 * Redis's error. */
static int
globals_index(lua_State *L)
{
	size_t n;
	const char *k = lua_tolstring(L, 2, &n);

	if (k != NULL && n == 4 && memcmp(k, "KEYS", 4) == 0) {
		kv_script_push_global(L, true);
		return 1;
	}
	if (k != NULL && n == 4 && memcmp(k, "ARGV", 4) == 0) {
		kv_script_push_global(L, false);
		return 1;
	}
	lua_pushvalue(L, 2);
	lua_rawget(L, lua_upvalueindex(1));
	if (!lua_isnil(L, -1))
		return 1;
	if (k == NULL)
		return luaL_error(L, "Script attempted to access nonexistent global variable");
	return luaL_error(L, "Script attempted to access nonexistent global variable '%s'", k);
}

/* A read-only proxy of the table on top (replaced by it); @p index: its reads. */
static void
protect(lua_State *L, lua_CFunction index)
{
	int real = lua_gettop(L);

	lua_newtable(L);	  /* the proxy */
	lua_createtable(L, 0, 3); /* its metatable */
	lua_pushstring(L, "__index");
	if (index != NULL) {
		lua_pushvalue(L, real);
		lua_pushcclosure(L, index, 1);
	} else {
		lua_pushvalue(L, real);
	}
	lua_rawset(L, -3);
	lua_pushstring(L, "__newindex");
	lua_pushcfunction(L, readonly_error);
	lua_rawset(L, -3);
	lua_pushstring(L, "__metatable");
	lua_pushboolean(L, 0);
	lua_rawset(L, -3);
	lua_setmetatable(L, -2);
	lua_getfield(L, LUA_REGISTRYINDEX, REG_PROTECTED);
	lua_pushvalue(L, -2);
	lua_pushboolean(L, 1);
	lua_rawset(L, -3);
	lua_pop(L, 1);
	lua_replace(L, real);
}

/* The library's Lua part: pcall, xpcall and
 * coroutine.resume/wrap that pass our yields (a redis.call waiting, a time slice) up to
 * the scheduler and come back. Its frames are skipped when errors are located ("=kv"). */
static const char prelude[] =
    "local ours, ouryield = ...\n"
    "local create, resume, status, yield = coroutine.create, coroutine.resume,"
    " coroutine.status, coroutine.yield\n"
    "local error, type, select, unpack, rawpcall = error, type, select, unpack, pcall\n"
    "local function pc(co, ok, ...)\n"
    "  if ours() then return pc(co, resume(co, ouryield())) end\n"
    "  if ok and status(co) == 'suspended' then return pc(co, resume(co, yield(...))) end\n"
    "  return ok, ...\n"
    "end\n"
    /* Redis 7.0's pcall gives an error table's err string */
    "local function perr(ok, e, ...)\n"
    "  if not ok and type(e) == 'table' and type(e.err) == 'string' then return false, e.err end\n"
    "  return ok, e, ...\n"
    "end\n"
    "pcall = function(f, ...)\n"
    "  if type(f) ~= 'function' then return perr(rawpcall(f, ...)) end\n"
    "  local co = create(function(...) return f(...) end)\n"
    "  return perr(pc(co, resume(co, ...)))\n"
    "end\n"
    "local function xp(h, ok, ...)\n"
    "  if ok then return true, ... end\n"
    "  return false, h((...))\n"
    "end\n"
    "xpcall = function(f, h)\n"
    "  if type(f) ~= 'function' then return rawpcall(f) end\n"
    "  local co = create(function() return f() end)\n"
    "  return xp(h, pc(co, resume(co)))\n"
    "end\n"
    "local function rs(co, ok, ...)\n"
    "  if ours() then return rs(co, resume(co, ouryield())) end\n"
    "  return ok, ...\n"
    "end\n"
    "coroutine.resume = function(co, ...) return rs(co, resume(co, ...)) end\n"
    "local function wr(ok, ...) if not ok then error((...), 0) end return ... end\n"
    "coroutine.wrap = function(f)\n"
    "  local co = create(f)\n"
    "  return function(...) return wr(rs(co, resume(co, ...))) end\n"
    "end\n";

static void
set_fn(lua_State *L, const char *name, lua_CFunction f)
{
	lua_pushstring(L, name);
	lua_pushcfunction(L, f);
	lua_rawset(L, -3);
}

static void
set_num(lua_State *L, const char *name, lua_Number n)
{
	lua_pushstring(L, name);
	lua_pushnumber(L, n);
	lua_rawset(L, -3);
}

static void
open_lib(lua_State *L, lua_CFunction f, const char *name)
{
	lua_pushcfunction(L, f);
	lua_pushstring(L, name);
	lua_call(L, 1, 0);
}

static void
redis_lib(lua_State *L)
{
	lua_newtable(L);
	lua_pushstring(L, "call");
	lua_pushboolean(L, 1);
	lua_pushcclosure(L, kv_script_call, 1);
	lua_rawset(L, -3);
	lua_pushstring(L, "pcall");
	lua_pushboolean(L, 0);
	lua_pushcclosure(L, kv_script_call, 1);
	lua_rawset(L, -3);
	set_fn(L, "setresp", l_setresp);
	set_fn(L, "log", l_log);
	set_num(L, "LOG_DEBUG", 0);
	set_num(L, "LOG_VERBOSE", 1);
	set_num(L, "LOG_NOTICE", 2);
	set_num(L, "LOG_WARNING", 3);
	set_fn(L, "sha1hex", l_sha1hex);
	set_fn(L, "error_reply", l_error_reply);
	set_fn(L, "status_reply", l_status_reply);
	set_fn(L, "set_repl", l_set_repl);
	set_num(L, "REPL_NONE", 0);
	set_num(L, "REPL_AOF", 1);
	set_num(L, "REPL_SLAVE", 2);
	set_num(L, "REPL_REPLICA", 2);
	set_num(L, "REPL_ALL", 3);
	set_fn(L, "replicate_commands", l_true);
	set_fn(L, "breakpoint", l_false);
	set_fn(L, "debug", l_nothing);
	set_fn(L, "acl_check_cmd", l_acl_check_cmd);
	lua_pushstring(L, "REDIS_VERSION");
	lua_pushstring(L, KV_VERSION);
	lua_rawset(L, -3);
	set_num(L, "REDIS_VERSION_NUM", 0x07000f); /* 7.0.15 */
	lua_setglobal(L, "redis");
}

static int
setup(lua_State *L)
{
	struct kv_lua *v = lua_touserdata(L, 1);
	static const char *const gone[] = {"loadfile", "dofile", "print",   "setfenv", "getfenv",
					   "newproxy", "module", "require", NULL};
	static const char *const libs[] = {"string", "table", "math", "coroutine",
					   "redis",  "cjson", "bit",  NULL};
	unsigned i;

	open_lib(L, luaopen_base, "");
	open_lib(L, luaopen_table, LUA_TABLIBNAME);
	open_lib(L, luaopen_string, LUA_STRLIBNAME);
	open_lib(L, luaopen_math, LUA_MATHLIBNAME);
	open_lib(L, luaopen_debug, LUA_DBLIBNAME);
	lua_pushcfunction(L, luaopen_cjson);
	lua_call(L, 0, 1);
	lua_setglobal(L, "cjson");
	open_lib(L, luaopen_bit, "bit");
	lua_newtable(L);
	lua_setfield(L, LUA_REGISTRYINDEX, REG_PROTECTED);
	redis_lib(L);
	/* math.random and randomseed: Redis's PRNG */
	lua_getglobal(L, "math");
	lua_pushlightuserdata(L, v);
	lua_pushcclosure(L, math_random, 1);
	lua_setfield(L, -2, "random");
	lua_pushlightuserdata(L, v);
	lua_pushcclosure(L, math_randomseed, 1);
	lua_setfield(L, -2, "randomseed");
	lua_pop(L, 1);
	/* coroutine.resume noting its nesting, which the prelude's closes over */
	lua_getglobal(L, "coroutine");
	lua_pushlightuserdata(L, v);
	lua_getfield(L, -2, "resume");
	lua_pushcclosure(L, l_resume, 2);
	lua_setfield(L, -2, "resume");
	lua_pop(L, 1);
	/* the Lua part, with the C functions it closes over */
	if (luaL_loadbuffer(L, prelude, sizeof(prelude) - 1, "=kv") != 0)
		return lua_error(L);
	lua_pushcfunction(L, l_ours);
	lua_pushcfunction(L, l_ouryield);
	lua_call(L, 2, 0);
	lua_pushcfunction(L, l_rawset);
	lua_setglobal(L, "rawset");
	lua_pushcfunction(L, l_setmetatable);
	lua_setglobal(L, "setmetatable");
	for (i = 0; gone[i] != NULL; i++) {
		lua_pushnil(L);
		lua_setglobal(L, gone[i]);
	}
	lua_pushnil(L);
	lua_setglobal(L, LUA_DBLIBNAME); /* Redis keeps debug for its own error handler */
	lua_pushnil(L);
	lua_setfield(L, LUA_REGISTRYINDEX, "_LOADED");
	/* read-only libraries, then the globals themselves */
	for (i = 0; libs[i] != NULL; i++) {
		lua_getglobal(L, libs[i]);
		protect(L, NULL);
		lua_setglobal(L, libs[i]);
	}
	lua_pushvalue(L, LUA_GLOBALSINDEX);
	protect(L, globals_index);
	lua_pushvalue(L, -1);
	lua_setglobal(L, "_G"); /* _G of a script is its proxy */
	lua_setfield(L, LUA_REGISTRYINDEX, REG_GLOBALS);
	return 0;
}

struct kv_lua *
kv_lua_new(void)
{
	struct kv_lua *v = calloc(1, sizeof(*v));

	if (v == NULL)
		return NULL;
	v->L = luaL_newstate();
	if (v->L == NULL) {
		free(v);
		return NULL;
	}
	if (lua_cpcall(v->L, setup, v) != 0) {
		CR_LOG(script_log, ERR, "cannot set up the Lua VM: %s", lua_tostring(v->L, -1));
		lua_close(v->L);
		free(v);
		return NULL;
	}
	lua_newtable(v->L);
	v->fns = luaL_ref(v->L, LUA_REGISTRYINDEX);
	v->fns_gen = kv_sc_generation();
	lua_sethook(v->L, (lua_Hook)kv_script_hook, LUA_MASKCOUNT, 100000);
	v->can_probe = probe_layout(v->L);
	if (!v->can_probe)
		CR_LOG(script_log, WARNING,
		       "this Lua's state layout is not 5.1's: scripts past lua-time-limit run on "
		       "without time slices (SCRIPT KILL still works)");
	kv_lua_reseed(v);
	return v;
}

void
kv_lua_free(struct kv_lua *v)
{
	if (v == NULL)
		return;
	lua_close(v->L);
	free(v);
}

void
kv_lua_push_globals(lua_State *L)
{
	lua_getfield(L, LUA_REGISTRYINDEX, REG_GLOBALS);
}

struct compile {
	struct kv_lua *v;
	struct rbuf *err;
	int rc;
};

static int
compile(void *arg, const char *body, size_t len)
{
	struct compile *c = arg;
	lua_State *L = c->v->L;

	if (luaL_loadbuffer(L, body, len, "@user_script") != 0) {
		size_t n;
		const char *m = lua_tolstring(L, -1, &n);

		rb_errorf(c->err, "ERR Error compiling script (new function): %.*s", (int)n, m);
		lua_pop(L, 1);
		return -EINVAL;
	}
	kv_lua_push_globals(L);
	lua_setfenv(L, -2);
	return 0;
}

int
kv_lua_function(struct kv_lua *v, const char *sha, const char *body, size_t len, struct rbuf *err)
{
	lua_State *L = v->L;
	uint64_t gen = kv_sc_generation();
	struct compile c = {v, err, 0};
	int rc;

	if (gen != v->fns_gen) {
		/* SCRIPT FLUSH (on any lcore): what was compiled here goes too */
		luaL_unref(L, LUA_REGISTRYINDEX, v->fns);
		lua_newtable(L);
		v->fns = luaL_ref(L, LUA_REGISTRYINDEX);
		v->fns_gen = gen;
	}
	lua_rawgeti(L, LUA_REGISTRYINDEX, v->fns);
	lua_getfield(L, -1, sha);
	if (lua_isfunction(L, -1)) {
		lua_remove(L, -2);
		return 0;
	}
	lua_pop(L, 1);
	rc = body != NULL ? compile(&c, body, len) : kv_sc_with(sha, compile, &c);
	if (rc != 0) {
		lua_pop(L, 1);
		return rc;
	}
	lua_pushvalue(L, -1);
	lua_setfield(L, -3, sha);
	lua_remove(L, -2);
	return 0;
}
