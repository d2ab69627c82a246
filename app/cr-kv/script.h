/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT, with Lua 5.1 as Redis 7.0
 * embeds it (see doc/guides/kv.md, "Scripting").
 *
 * script_cache.c  the process-wide script cache (SHA1 -> body), read by every lcore
 *                 without a lock; SCRIPT FLUSH swaps in an empty table.
 * script_lua.c    each lcore's Lua VM: the sandbox, the redis.* library, the
 *                 conversions between Lua values and RESP.
 * script_run.c    running one script: its keys locked as a transaction (txn.h), the
 *                 script in a coroutine on the client's lcore, each redis.call run as a
 *                 step under the locks (a yield while it is on another shard), time
 *                 slices and BUSY past lua-time-limit, SCRIPT KILL.
 */
#ifndef CR_KV_SCRIPT_H
#define CR_KV_SCRIPT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kv_ctx;
struct kv_arg;
struct kreq;
struct kconn;
struct kv_shard;
struct rbuf;
typedef struct lua_State lua_State;

/* ---- script_cache.c ---- */

#define KV_SHA_LEN 40

/* SHA1 of @p p as 40 lower-case hex digits and a NUL. */
void kv_sha1hex(const void *p, size_t n, char out[KV_SHA_LEN + 1]);
/* Add a script (its SHA1 computed into @p sha). @return 0 or -ENOMEM. Any lcore. */
int kv_sc_put(const char *body, size_t len, char sha[KV_SHA_LEN + 1]);
/* Is @p sha (40 hex digits, any case) cached? Any lcore. */
bool kv_sc_exists(const char *sha, size_t len);
/* Call @p fn with the body of @p sha while it cannot be freed. @return what fn returned,
 * or -ENOENT (not cached). Any lcore. */
int kv_sc_with(const char *sha, int (*fn)(void *arg, const char *body, size_t len), void *arg);
/* The cache's generation: bumped by every flush (an lcore's compiled scripts are valid
 * while it is unchanged). */
uint64_t kv_sc_generation(void);
/* SCRIPT FLUSH: an empty cache from now on; the old one is freed once no lcore reads it. */
int kv_sc_flush(void);
/* At exit, after the lcores stopped. */
void kv_sc_fini(void);

/* ---- script_run.c ---- */

/* lua-time-limit (busy-reply-threshold) in milliseconds: set by --lua-time-limit and
 * CONFIG SET from any lcore, read by the running scripts' hooks (relaxed). */
extern _Atomic long long kv_lua_time_limit;
/* Is a script of this lcore past lua-time-limit? (Its other clients then get -BUSY.) */
bool kv_script_busy_here(void);
/* EVAL's reply for another client of a busy lcore (Redis's text). */
extern const char kv_err_busy[];

/* The commands (cmd_table.c): EVAL's key positions, its argument check, SCRIPT. */
int kv_keys_script(const struct kv_arg *argv, uint32_t argc, uint32_t *idx, uint32_t max);
bool precheck_eval(struct kv_ctx *x);
void cmd_script_load(struct kv_ctx *x);
void cmd_script_exists(struct kv_ctx *x);
void cmd_script_flush(struct kv_ctx *x);
void cmd_script_kill(struct kv_ctx *x);
void cmd_script_debug(struct kv_ctx *x);
void cmd_script_help(struct kv_ctx *x);

/* EVAL & co: kr is the request (on its connection, or a command EXEC runs). */
void kv_script_eval(struct kreq *kr);
/* The lcore's VM, made at first use (NULL: ENOMEM). */
struct kv_lua *kv_lua_here(void);
void kv_script_shard_fini(unsigned lcore);
/* Lcore @p lcore starts closing (its shutdown or retire hook, on it): its running scripts
 * stop at their next hook, with an error reply: at a shutdown all of them (as Redis's
 * SHUTDOWN NOSAVE), at a retire those that did not write (one that wrote runs to its end,
 * and the retire waits for it). */
void kv_script_closing(unsigned lcore, bool shutdown);

/* ---- script_lua.c: one lcore's VM ---- */

struct kv_srun;

/* Coroutines resuming coroutines, deepest first kept (Lua 5.1 stops at 200 C levels). */
#define KV_LUA_NEST 256

struct kv_lua {
	lua_State *L;
	int fns;	     /* registry ref: table SHA -> compiled function */
	uint64_t fns_gen;    /* the cache generation they were compiled under */
	int scratch;	     /* registry ref: a scratch table (kept empty) */
	struct kv_srun *cur; /* the script whose coroutine runs now, or NULL */
	bool can_probe;	     /* kv_lua_can_yield() reads the VM's C-call depth */
	bool our_yield;	     /* the coroutine's last yield was ours (see prelude) */
	uint64_t rand48;     /* math.random's state (Redis's redisLrand48) */
	/* The coroutines between the running one and the script's: nest[i] resumed
	 * nested[i] (coroutine.resume, l_resume()); nest[0] is the script's coroutine. */
	unsigned depth;
	lua_State *nest[KV_LUA_NEST], *nested[KV_LUA_NEST];
};

struct kv_lua *kv_lua_new(void);
void kv_lua_free(struct kv_lua *v);
/* Push the compiled function of @p sha (compiling @p body, if not NULL, when it is not
 * compiled yet). @return 0; -ENOENT (not cached: NOSCRIPT); -EINVAL (a compile error, its
 * text in @p err). */
int kv_lua_function(struct kv_lua *v, const char *sha, const char *body, size_t len,
		    struct rbuf *err);
/* Can @p co yield now, and every coroutine that resumed it up to @p top (the script's,
 * resumed by the lcore), in turn: no C call of the VM (a metamethod, a sort or gsub
 * callback) between any of them and its resume? Before a yield that goes up to the lcore
 * (a redis.call waiting, a time slice). */
bool kv_lua_can_yield(struct kv_lua *v, lua_State *co, lua_State *top);
/* Push RESP reply @p p (one complete reply) as Redis converts it to Lua. */
void kv_lua_push_reply(lua_State *L, const char *p, size_t n);
/* Append the Lua value at @p idx to @p out as Redis converts it to RESP2. */
void kv_lua_to_resp(lua_State *L, int idx, struct rbuf *out);
/* Push {err = "<code> <msg>"} as redis.error_reply() makes it ("-CODE msg" or "msg"). */
void kv_lua_push_error(lua_State *L, const char *s, size_t n);
/* The script's error reply for the error object on top of @p co (its stack not unwound):
 * "-ERR ... script: <sha>, on @user_script:<line>." */
void kv_lua_error_reply(lua_State *co, const char *sha, struct rbuf *out);
/* Push the scripts' globals (a read-only proxy; KEYS and ARGV of the running script). */
void kv_lua_push_globals(lua_State *L);
/* Reseed math.random as Redis does before each script. */
void kv_lua_reseed(struct kv_lua *v);

/* script_run.c, for script_lua.c */
/* redis.call / redis.pcall from a script's coroutine @p L (Lua C function). */
int kv_script_call(lua_State *L);
/* The count hook: kill flag, time limit, time slices. */
void kv_script_hook(lua_State *L, void *ar);
/* KEYS and ARGV of the running script (pushes the table, or nil). */
void kv_script_push_global(lua_State *L, bool keys);
/* Did the running script's last yield come from us (a redis.call waiting, a slice)?
 * Clears it. */
bool kv_script_our_yield(lua_State *L);
/* ... mark the coming yield as ours. */
void kv_script_mark_yield(lua_State *L);

#endif /* CR_KV_SCRIPT_H */
