/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cr-kv internals shared by its files: the per-lcore shard, client connections, requests
 * that travel to the lcore owning a key and back, reply buffers and the command table.
 *
 * Routing. A key belongs to shard kv_owner(hash) of its keyed hash (of its hash tag, the
 * bytes between '{' and '}', if it has one: key_shard()); shard i's home is lcore
 * kv.shard_lcore[i], which runs it unless it is retired: each lcore routes a shard's parts
 * to the lcore its view says owns it (kv_route(), shardmove.c, which moves shards across
 * resizes). A command is parsed on the client's lcore. If it touches only keys
 * of that lcore's shard and nothing is waiting to be answered on the connection, it runs
 * at once and its reply is appended to the lcore's batch buffer (no copy, no message).
 * Otherwise it becomes a request (struct kreq) queued on the connection: its arguments
 * are copied, and each shard it touches gets a part, run at once for the local shard, or
 * queued for the other shard's lcore and sent there with the other parts for it in one
 * cr_call() (struct kbatch); when every part has answered, the request's reply is
 * complete, and replies leave the connection strictly in request order.
 *
 * Order. Parts are run on their shard in the order the connection issued them (local
 * parts at issue, remote ones through a FIFO queue per target and then the one FIFO
 * mailbox ring from this lcore to that lcore), so every shard sees one client's commands
 * in program order. A command over keys of several shards is a transaction (txn.h): the
 * connection's parsing waits until it holds its locks, after which later commands reach
 * each shard behind them; a part that touches a locked key waits in that shard's FIFO
 * queue, and so does everything after it for that shard.
 *
 * Blocking. A blocking pop holds the connection's parsing until it is answered; it waits
 * on its keys' shard, or watches the keys of several shards (bpop.h).
 */
#ifndef CR_KV_H
#define CR_KV_H

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cr_net.h"
#include "bpop.h"
#include "cr_reactor.h"
#include "mem.h"
#include "obj.h"
#include "resp.h"
#include "store.h"
#include "txn.h"
#include "clients.h"
#include "evict.h"
#include "slowlog.h"
#include "pubsub.h"
#include "shardmove.h"

#define KV_VERSION "7.0.15"

/* ---- reply buffers ---- */

struct rbuf {
	char *p;
	size_t len, cap;
	char *inl; /* inline storage (p == inl while it fits), or NULL */
};

void rb_init(struct rbuf *b, char *inl, size_t inlcap);
void rb_fini(struct rbuf *b);
void rb_reset(struct rbuf *b);
/* Make room for @p n more bytes; false on ENOMEM (the buffer then holds an OOM error). */
bool rb_reserve(struct rbuf *b, size_t n);
void rb_raw(struct rbuf *b, const void *p, size_t n);
void rb_status(struct rbuf *b, const char *s);
/* "-" + text + CRLF; text like "ERR syntax error"; CR and LF in it become spaces. */
void rb_error(struct rbuf *b, const char *s);
void rb_errorlen(struct rbuf *b, const char *s, size_t n);
void rb_errorf(struct rbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rb_int(struct rbuf *b, long long v);
void rb_bulk(struct rbuf *b, const void *p, size_t n);
void rb_bulkstr(struct rbuf *b, const char *s);
void rb_null(struct rbuf *b);
void rb_array(struct rbuf *b, long long n);
void rb_ok(struct rbuf *b);

/* ---- commands ---- */

struct kv_arg {
	const char *p; /* NUL-terminated at p[len] */
	size_t len;
};

struct kv_shard;
struct kconn;

/* What a command runs with, on the lcore of the shard it runs on. */
struct kv_ctx {
	struct kv_shard *sh;
	uint32_t argc;
	const struct kv_arg *argv;
	struct rbuf *out;
	int64_t now_ms;
	struct kconn *kc; /* the client: only for KV_ROUTE_LOCAL commands, else NULL */
	uint64_t h1;	  /* kv_hash() of argv[1], once h1_ok */
	bool h1_ok;
	struct kv_from *from; /* run as a plain part on its shard: for whom (bpop.h) */
	/* A KV_ROUTE_LOCAL command EXEC runs: its request, which the command may take over
	 * (taken: it finishes it later, CLIENT LIST's parts on every shard); else NULL. */
	struct kreq *req;
	bool taken;
};

enum kv_route {
	KV_ROUTE_LOCAL = 0, /* no keys: runs on the client's lcore */
	KV_ROUTE_KEY1,	    /* one key, argv[1]: runs on its shard */
	KV_ROUTE_KEYS,	    /* keys at 1, 1+step, ...: one part per shard, merged */
	KV_ROUTE_ALL,	    /* every shard: one part each, merged */
	KV_ROUTE_SCAN,	    /* the shard the cursor names */
	KV_ROUTE_MULTI,	    /* keys as cmd->keys says: run on their shard if they share one,
			     * else cmd->multi() runs it as a transaction */
	KV_ROUTE_TX,	    /* MULTI, EXEC, DISCARD, WATCH, UNWATCH: the client's transaction
			     * (cmd_exec.c) */
	KV_ROUTE_SCRIPT,    /* EVAL...: its keys locked, the script run on the client's lcore
			     * (cmd->multi, script_run.c) */
};

enum kv_merge {
	KV_MERGE_ONE = 0, /* the single part's reply */
	KV_MERGE_SUM,	  /* integers added */
	KV_MERGE_OK,	  /* +OK unless a part failed */
	KV_MERGE_MGET,	  /* arrays interleaved back into key order */
	KV_MERGE_KEYS,	  /* arrays concatenated */
	KV_MERGE_RANDOM,  /* one non-nil bulk, chosen at random */
	KV_MERGE_INFO,	  /* shard statistics, formatted by the INFO command */
	KV_MERGE_SLOWLOG, /* every lcore's slow log entries (slowlog.c) */
	KV_MERGE_RESETSTAT, /* +OK: every lcore reset its own statistics (CONFIG RESETSTAT) */
	KV_MERGE_PUBSUB,    /* PUBLISH's receivers, PUBSUB's answers (pubsub.c) */
};

/* Command flags (also what COMMAND INFO reports). */
#define KV_WRITE       0x1u
#define KV_READONLY    0x2u
#define KV_DENYOOM     0x4u
#define KV_FAST	       0x8u
#define KV_LOADING     0x10u
#define KV_STALE       0x20u
#define KV_NOSCRIPT    0x40u
#define KV_BLOCKING    0x80u
#define KV_MOVABLEKEYS 0x100u
#define KV_NO_AUTH     0x200u /* runs before AUTH (AUTH, HELLO, QUIT) */
#define KV_SKIP_MONITOR 0x400u
#define KV_NO_MANDATORY_KEYS 0x800u
#define KV_ALLOW_BUSY  0x1000u /* runs while a script of the lcore is busy (script.h) */
#define KV_ADMIN       0x2000u /* Redis's flags, for COMMAND INFO only */
#define KV_PUBSUB      0x4000u
#define KV_SKIP_SLOWLOG 0x8000u

/* auth.c: the password (--requirepass, CONFIG SET requirepass), from any lcore. */
int kv_auth_set(const char *p, size_t len); /* 0 or -ENOMEM; "" : none */
bool kv_auth_required(void);
const char *kv_auth_password(void); /* valid until kv_auth_fini() */
/* Is @p pw the password of @p user (NULL: "default"), the only user? */
bool kv_auth_check(const struct kv_arg *user, const struct kv_arg *pw);
void kv_auth_fini(void);
/* protected.c: --protected-mode, CONFIG SET protected-mode (any lcore). */
extern _Atomic bool kv_protected_mode;
/* Refuse a new client (Redis's -DENIED text sent): protected mode is on, no password is
 * set, and its peer is not a loopback address. */
bool kv_protected_refuse(struct cr_conn *c);

struct kv_cmd {
	const char *name; /* lower case, "client|setname" for subcommands */
	int arity;	  /* as Redis: n exact, -n at least n */
	uint32_t flags;
	enum kv_route route;
	enum kv_merge merge;
	int first_key, last_key, step; /* for COMMAND INFO and KV_ROUTE_KEYS */
	void (*fn)(struct kv_ctx *x);
	/* Checked on the client's lcore before routing (MSET's even count); may be NULL. */
	bool (*precheck)(struct kv_ctx *x);
	const struct kv_cmd *sub; /* container: subcommands, NULL-terminated */
	const char *group;	  /* for COMMAND DOCS */
	const char *summary;
	/* KV_ROUTE_MULTI: the argv indices of the keys, at most @p max (-1: the arguments
	 * are malformed, the command's fn replies why); NULL: first_key..last_key by step. */
	int (*keys)(const struct kv_arg *argv, uint32_t argc, uint32_t *idx, uint32_t max);
	void (*multi)(struct kreq *kr); /* ... over several shards (cmd_multi.c) */
	unsigned stat; /* its slot in each shard's cstat[] (INFO commandstats); 0: none */
};

/* INFO commandstats: per lcore, per command (kv_cmd.stat), touched by its lcore only. */
#define KV_CMDSTAT_MAX 512u
struct kv_cmdstat {
	uint64_t calls, ns, rejected, failed;
};
/* A command refused before it ran (arity, NOAUTH, OOM): Redis's rejected_calls. */
void kv_cmd_rejected(struct kconn *kc, const struct kv_cmd *cmd);
/* INFO: this shard's non-zero counters appended to @p out; the merge's table. */
void kv_cmdstat_put(const struct kv_shard *sh, struct rbuf *out);
const struct kv_cmd *kv_cmd_by_stat(unsigned stat);
/* The argv indices of @p cmd's keys (see kv_cmd.keys). */
int kv_cmd_keys(const struct kv_cmd *cmd, const struct kv_arg *argv, uint32_t argc, uint32_t *idx,
		uint32_t max);

const struct kv_cmd *kv_cmd_lookup(const char *name, size_t len);
const struct kv_cmd *kv_cmd_sub_lookup(const struct kv_cmd *c, const char *name, size_t len);
extern const struct kv_cmd kv_cmds[];
extern const unsigned kv_ncmds;

/* Command implementations (cmd_*.c). */
#define KV_CMD(n) void cmd_##n(struct kv_ctx *x)
KV_CMD(get);
KV_CMD(set);
KV_CMD(setnx);
KV_CMD(setex);
KV_CMD(psetex);
KV_CMD(getset);
KV_CMD(getdel);
KV_CMD(getex);
KV_CMD(mget);
KV_CMD(mset);
KV_CMD(append);
KV_CMD(strlen);
KV_CMD(getrange);
KV_CMD(setrange);
KV_CMD(incr);
KV_CMD(decr);
KV_CMD(incrby);
KV_CMD(decrby);
KV_CMD(incrbyfloat);
KV_CMD(msetnx_local);
KV_CMD(del);
KV_CMD(exists);
KV_CMD(type);
KV_CMD(expire);
KV_CMD(pexpire);
KV_CMD(expireat);
KV_CMD(pexpireat);
KV_CMD(ttl);
KV_CMD(pttl);
KV_CMD(persist);
KV_CMD(rename_local);
KV_CMD(copy_local);
KV_CMD(touch);
KV_CMD(object_encoding);
KV_CMD(object_freq);
KV_CMD(object_idletime);
KV_CMD(object_refcount);
KV_CMD(object_help);
KV_CMD(keys);
KV_CMD(scan);
KV_CMD(dbsize);
KV_CMD(flushdb);
KV_CMD(randomkey);
KV_CMD(info_shard);
KV_CMD(msetnx_check);
KV_CMD(hset);
KV_CMD(hmset);
KV_CMD(hsetnx);
KV_CMD(hget);
KV_CMD(hmget);
KV_CMD(hdel);
KV_CMD(hlen);
KV_CMD(hstrlen);
KV_CMD(hexists);
KV_CMD(hincrby);
KV_CMD(hincrbyfloat);
KV_CMD(hkeys);
KV_CMD(hvals);
KV_CMD(hgetall);
KV_CMD(hrandfield);
KV_CMD(hscan);
KV_CMD(lpush);
KV_CMD(rpush);
KV_CMD(lpushx);
KV_CMD(rpushx);
KV_CMD(lpop);
KV_CMD(rpop);
KV_CMD(llen);
KV_CMD(lindex);
KV_CMD(lset);
KV_CMD(linsert);
KV_CMD(lrange);
KV_CMD(ltrim);
KV_CMD(lrem);
KV_CMD(lpos);
KV_CMD(sadd);
KV_CMD(srem);
KV_CMD(sismember);
KV_CMD(smismember);
KV_CMD(scard);
KV_CMD(smembers);
KV_CMD(spop);
KV_CMD(srandmember);
KV_CMD(sscan);
KV_CMD(zadd);
KV_CMD(zincrby);
KV_CMD(zrem);
KV_CMD(zcard);
KV_CMD(zscore);
KV_CMD(zmscore);
KV_CMD(zrank);
KV_CMD(zrevrank);
KV_CMD(zcount);
KV_CMD(zlexcount);
KV_CMD(zremrangebyrank);
KV_CMD(zremrangebyscore);
KV_CMD(zremrangebylex);
KV_CMD(zpopmin);
KV_CMD(zpopmax);
KV_CMD(zrandmember);
KV_CMD(zscan);
KV_CMD(zrange);
KV_CMD(zrevrange);
KV_CMD(zrangebyscore);
KV_CMD(zrevrangebyscore);
KV_CMD(zrangebylex);
KV_CMD(zrevrangebylex);
KV_CMD(lmove);
KV_CMD(rpoplpush);
KV_CMD(smove);
KV_CMD(sinter);
KV_CMD(sinterstore);
KV_CMD(sintercard);
KV_CMD(sunion);
KV_CMD(sunionstore);
KV_CMD(sdiff);
KV_CMD(sdiffstore);
KV_CMD(zunion);
KV_CMD(zinter);
KV_CMD(zdiff);
KV_CMD(zunionstore);
KV_CMD(zinterstore);
KV_CMD(zdiffstore);
KV_CMD(zintercard);
KV_CMD(zrangestore);
KV_CMD(lmpop);
KV_CMD(zmpop);
KV_CMD(blpop);
KV_CMD(brpop);
KV_CMD(blmove);
KV_CMD(brpoplpush);
KV_CMD(blmpop);
KV_CMD(bzpopmin);
KV_CMD(bzpopmax);
KV_CMD(bzmpop);
KV_CMD(tx_srem);
KV_CMD(tx_sadd);
KV_CMD(tx_lpop);
KV_CMD(tx_lpush);
KV_CMD(ping);
KV_CMD(echo);
KV_CMD(select);
KV_CMD(quit);
KV_CMD(command);
KV_CMD(command_count);
KV_CMD(command_docs);
KV_CMD(command_info);
KV_CMD(client_setname);
KV_CMD(client_getname);
KV_CMD(client_id);
KV_CMD(hello);
KV_CMD(auth);
KV_CMD(config_resetstat);
KV_CMD(config_get);
KV_CMD(config_set);
KV_CMD(time);
KV_CMD(command_list);
KV_CMD(client_info);
KV_CMD(client_help);
KV_CMD(client_list);
KV_CMD(client_kill);
KV_CMD(client_no_evict);
KV_CMD(client_reply);
KV_CMD(reset);
KV_CMD(function_flush);
KV_CMD(function_list);
KV_CMD(function_stats);
KV_CMD(function_dump);
KV_CMD(function_kill);
KV_CMD(function_delete);
KV_CMD(function_help);
KV_CMD(config_rewrite);
KV_CMD(config_help);
KV_CMD(command_help);
KV_CMD(slowlog_get);
KV_CMD(slowlog_len);
KV_CMD(slowlog_reset);
KV_CMD(slowlog_help);
bool precheck_slowlog_get(struct kv_ctx *x);
bool precheck_mset(struct kv_ctx *x);
bool precheck_flush(struct kv_ctx *x);
bool precheck_info(struct kv_ctx *x);
bool precheck_keys_scan(struct kv_ctx *x);

/* Shared by the command files (cmd_util.c). */
extern const char kv_err_int[], kv_err_syntax[], kv_err_float[], kv_err_wrongtype[], kv_err_oom[];
void kv_reply_wrong_arity(struct rbuf *out, const char *fullname);
/* A HELP subcommand's reply: @p lines, NULL-terminated (cmd_server.c). */
void kv_reply_help(struct kv_ctx *x, const char *const *lines);
/* Parse an argument, replying Redis's error text if it is not one. */
bool kv_arg_ll(struct kv_ctx *x, const struct kv_arg *a, long long *out);
/* ... and within [min, max]: Redis's getRangeLongFromObjectOrReply(), whose @p msg (when
 * not NULL) answers both a bad number and one out of range. */
bool kv_arg_ll_range(struct kv_ctx *x, const struct kv_arg *a, long long min, long long max,
		     const char *msg, long long *out);
/* getPositiveLongFromObjectOrReply(): 0 or more ("must be positive" by default). */
bool kv_arg_positive(struct kv_ctx *x, const struct kv_arg *a, const char *msg, long long *out);
bool kv_arg_double(struct kv_ctx *x, const struct kv_arg *a, double *out);
/* Redis's getDoubleFromObject() / string2ld(), without a reply. */
bool kv_parse_double(const char *s, size_t len, double *out);
bool kv_parse_ld(const char *s, size_t len, long double *out);
/* Redis's "%.17g" for doubles (inf, -inf), and ld2string(LD_STR_HUMAN). */
size_t kv_fmt_double(char *buf, size_t n, double d);
size_t kv_fmt_ld(char *buf, size_t n, long double v);
void kv_reply_double(struct rbuf *out, double d);
/* An array whose length is known once its elements are written. */
size_t kv_array_begin(struct rbuf *out);
void kv_array_end(struct rbuf *out, size_t start, long long n);

#define KV_FIND_READ	0x1u /* count a keyspace hit or miss */
#define KV_FIND_NOTOUCH 0x2u /* do not record the access (TYPE, TTL, OBJECT...) */
uint64_t kv_key_hash(struct kv_ctx *x, const struct kv_arg *k);
struct kv_entry *kv_key_find(struct kv_ctx *x, const struct kv_arg *k, unsigned flags);
/* The key's entry if it holds @p type, else NULL: absent (*bad false) or of another type
 * (*bad true, and WRONGTYPE was replied). */
struct kv_entry *kv_key_typed(struct kv_ctx *x, const struct kv_arg *k, unsigned type,
			      unsigned flags, bool *bad);
/* Add a key holding a new collection (NULL: ENOMEM, replied, obj freed). */
struct kv_entry *kv_key_add(struct kv_ctx *x, const struct kv_arg *k, unsigned type, unsigned enc,
			    void *obj);
/* Delete the key if its collection became empty, as Redis does; true if it did. */
bool kv_key_drop_if_empty(struct kv_ctx *x, struct kv_entry *e);
/* Redis's rank range normalisation (LRANGE, ZRANGE, ZREMRANGEBYRANK...): @p start and
 * @p end made to lie in [0, llen), or false if the range is empty. */
bool kv_rank_range(long long llen, long long *start, long long *end);
/* Would a + b overflow a long long? */
static inline bool
kv_add_overflows(long long a, long long b)
{
	return (b < 0 && a < 0 && b < LLONG_MIN - a) || (b > 0 && a > 0 && b > LLONG_MAX - a);
}
/* HRANDFIELD, ZRANDMEMBER key count [@p with]: the count (negative: repeats allowed, so
 * not *uniq) and the option, as Redis parses them; false if an error was replied. */
bool kv_rand_count(struct kv_ctx *x, const char *with, size_t *count, bool *uniq, bool *withx);
/* HDEL, SREM, ZREM: remove argv[2...] from the collection of @p type at argv[1] with
 * @p del, the key deleted once empty; replies how many went. */
void kv_remove_members(struct kv_ctx *x, unsigned type,
		       bool (*del)(struct kv_entry *e, const char *m, size_t len));

struct kv_scan_opts {
	const struct kv_arg *pat; /* NULL: every element */
	const char *type;	  /* SCAN TYPE, or NULL */
	long long count;
};
/* SCAN's options from argv[from] on; replies and returns -EINVAL on a bad one. */
int kv_parse_scan_opts(struct kv_ctx *x, uint32_t from, struct kv_scan_opts *o, bool allow_type);
bool kv_scan_match(const struct kv_scan_opts *o, const char *s, size_t len);
/* "*2", then the cursor: the caller writes the elements' array. */
void kv_reply_scan_cursor(struct rbuf *out, uint64_t cursor);
/* HSCAN, SSCAN, ZSCAN: what a type's visitor appends to. */
struct kv_scan_walk {
	struct rbuf items; /* the elements kept, as bulks */
	const struct kv_scan_opts *o;
	long long n, visited; /* elements kept, and seen (Redis's COUNT counts those) */
};
/* KEY cursor [MATCH p] [COUNT n] over the collection of @p type at argv[1] (absent: an
 * empty scan): @p step visits the elements at a cursor and returns the next (0: done). */
void kv_scan_collection(struct kv_ctx *x, unsigned type,
			uint64_t (*step)(struct kv_entry *e, uint64_t cursor,
					 struct kv_scan_walk *w));

int kv_parse_scan_cursor(const struct kv_arg *a, unsigned long long *out); /* cmd_keys.c */
int kv_copy_opts(struct kv_ctx *x, bool *replace);			   /* cmd_keys.c */
bool kv_stringmatch(const char *pat, size_t plen, const char *s, size_t slen, bool nocase);

/* errstat.c: INFO errorstats, per lcore (the client's): count error reply @p p, @p n
 * bytes, under its code; the code of slot @p i (NULL past the last). */
#define KV_ERRSTAT_KINDS 16u
void kv_errstat_note(struct kv_shard *sh, const char *p, size_t n);
const char *kv_errstat_name(unsigned i);
/* info_more.c: INFO's sections for what cr-kv does not have (persistence, replicas...). */
void kv_info_persistence(struct rbuf *b);
void kv_info_replication(struct rbuf *b);
void kv_info_cpu(struct rbuf *b);
void kv_info_errorstats(struct rbuf *b, const long long *errs);
void kv_info_cluster(struct rbuf *b);

/* ---- shards, connections, requests ---- */

struct kreq;
struct kbatch;

/*
 * Per lcore: its clients' side (touched only by its lcore, rule 1, except the atomics
 * noted) and its home shard, index == the lcore's position in the table. The shard's side
 * (store, mem, tx's lock table and queue, bw, expiry and lazy-free duties, hits, misses,
 * rng) is touched by the lcore that *owns* the shard, which is its home lcore except while
 * the home lcore is retired or starting again (shardmove.c moves it). The struct itself
 * never moves: a shard's owner reaches it as kv_shard_at(index).
 */
struct kv_shard {
	unsigned lcore, index;
	/* The lcore owning this shard now (CR_LCORE_NONE between its give and its adopt):
	 * written by the owner, read by deferred tasks to see whether the shard is still
	 * theirs (kv_shard_owned()). */
	_Atomic unsigned owner;
	bool shard_ready;    /* the shard's side was set up (its home's first start) */
	uint64_t oepoch;     /* this lcore's incarnation, as the origin of parts */
	uint64_t crng;	     /* the clients' side's random numbers (RANDOMKEY's pick) */
	struct cr_timer lcore_tick; /* the clients' side's 100 ms tick (climem, outq) */
	bool closing; /* its lcore retires or shuts down: a blocking command does not wait */
	struct cr_timer closing_timer; /* then: clients not at a boundary after the grace go */
	struct kv_store *store;
	uint64_t rng;
	struct rbuf batch;   /* replies of the connection being served, sent in one go */
	struct kv_arg *args; /* scratch argv for commands run from the query buffer */
	uint32_t args_cap;
	/* Parts queued for each other shard, sent as one batch (xshard.c). */
	struct kpart *outq_head[CR_MAX_LCORES], **outq_tail[CR_MAX_LCORES];
	/* PUBLISH and PUBSUB parts for other lcores a full mailbox refused (xshard.c) */
	struct kpart *lparts_head, **lparts_tail;
	unsigned outq_n[CR_MAX_LCORES];
	bool outq_armed;	    /* an outq_task() is deferred or timed */
	struct cr_timer outq_timer; /* its fallback when cr_defer() is full */
	struct kbatch *free_batches;
	struct kreq *free_reqs;
	unsigned nfree;
	struct kconn *conns; /* every client connection of this lcore */
	struct cr_timer expire_timer;
	struct kv_mem mem;	    /* what this shard's keyspace takes (mem.h) */
	struct kv_evict ev;	    /* its eviction under --maxmemory (evict.h) */
	struct kv_txshard tx;	    /* locks and waiters of transactions (txn.h) */
	struct kv_bwshard bw;	    /* blocked clients waiting for keys here (bpop.h) */
	struct kv_bpshard bp;	    /* this lcore's clients blocked on several shards */
	bool lazy_armed;	    /* a lazy-free step is deferred (lazyfree.c) */
	struct cr_timer lazy_timer; /* its fallback when cr_defer() is full */
	/* Connections waiting for lib/net's output chunks, retried on a timer (outq.c). */
	struct kconn *starved;
	struct kconn *starved_round; /* those starved_retry() has yet to pump (outq.c) */
	struct cr_timer starved_timer;
	/* Client memory (climem.c): this shard's clients' total, the biggest one's (read
	 * by other lcores choosing whom to evict: relaxed), the peaks INFO reports. */
	uint64_t clients_mem;
	_Atomic uint64_t biggest_client;
	_Atomic uint64_t recent_in[2], recent_out[2];
	unsigned recent_cur, recent_ticks;
	_Atomic bool evict_pending; /* an eviction pass is deferred or sent here */
	struct cr_timer evict_timer; /* its fallback when cr_defer() is full */
	/* Counters read by INFO from the lcore where it runs: relaxed. */
	uint64_t hits, misses, expired_active;
	struct kv_cmdstat cstat[KV_CMDSTAT_MAX];
	struct kv_slowlog slowlog; /* commands of this lcore's clients that ran long */
	int64_t now_ms; /* the clock when the batch being parsed arrived */
	struct kv_psshard *ps; /* its clients' channels and patterns (pubsub.h) */
	uint64_t errstat[KV_ERRSTAT_KINDS + 1]; /* error replies by code, then all (errstat.c) */
};

/* Requests a connection may have in flight before it stops parsing (and reading): what
 * it sends after waits in its query buffer, so that a pipelining client's remote requests
 * do not fill another shard's queue ahead of everyone else's. */
#define KC_MAX_QUEUED 128u
/* Replies one connection may build in one pass over its input: past this much, the rest
 * of its input is parsed in a later pass (the deferred phase of a later turn), after the
 * other connections' completions of this turn. Without it, 64 completions of clients that
 * each pipeline 16 GETs of a 512 KiB value made one turn build 512 MiB of replies, and
 * every other client of the lcore waited seconds for that turn to end. */
#define KC_INPUT_SLICE (64u * 1024)
/* A query buffer starts this big and is shrunk back when it is idle and over SHRINK. */
#define KC_QBUF_INITIAL 4096u
#define KC_QBUF_SHRINK	(64u * 1024)

typedef void (*kconn_resume_fn)(struct kconn *kc);

struct kconn {
	struct kconn *next, **pprev; /* the shard's list */
	kconn_resume_fn resume;	     /* parse again: a hold on the connection ended */
	struct cr_conn *conn;	     /* NULL once closed */
	struct kv_shard *sh;
	char *qbuf;
	size_t qlen, qpos, qcap;
	struct resp_parser rp;
	struct kreq *head, *tail;   /* replies still owed, in request order */
	unsigned queued;	    /* requests in head..tail */
	unsigned blocked;	    /* reasons not to run the next command */
	bool have_cmd;		    /* rp holds a parsed command not yet run */
	bool close_after;	    /* close once every reply is out */
	bool close_hard;	    /* ... and promptly: a protocol error, not QUIT */
	struct cr_timer kill_timer; /* close_hard: reset if the peer keeps sending */
	struct cr_timer resume_timer; /* resume_pending when the defer queue was full */
	bool read_stopped;
	bool in_input;	     /* kv_process_input() is on the stack */
	bool flush_pending;  /* a deferred_flush() is queued: kc must live until it runs */
	bool parse_held;     /* parsing stopped: KC_MAX_QUEUED requests in flight, or a pass
			      * built KC_INPUT_SLICE of replies */
	bool resume_pending; /* a deferred resume is queued: kc must live until it runs */
	bool eof_held;	     /* the peer shut its side while parsing was held */
	uint64_t id;
	char *name;
	bool authed; /* AUTH done, or no password when it connected (auth.c) */
	struct kv_bpop *bpop; /* the blocking command it waits in (bpop.h), or NULL */
	struct kv_multi *mx;	 /* MULTI: the commands queued for EXEC, or NULL */
	struct kv_watch *watch; /* WATCHed keys and their versions (cmd_exec.c) */
	/* Replies handed over but not yet in lib/net's queue, oldest first (outq.c). */
	struct kv_oblk *oq_head, *oq_tail;
	size_t oq_bytes;	    /* unsent bytes in them */
	size_t oq_alloc;	    /* the memory they take */
	struct kconn *starved_next; /* on the shard's list of those waiting for chunks */
	bool starved;
	bool out_paused; /* parsing waits: its unread replies are over kv_out_pause() */
	int64_t obuf_soft_since; /* over the soft output limit since (ms), or 0 */
	size_t mem;		 /* what it takes, as last counted (climem.c) */
	struct kv_psclient *ps;	 /* its channels and patterns (pubsub.h), or NULL */
	/* The client's protocol and settings (resp3.c, cmd_client.c): part of the state a
	 * moved connection takes with it, as id and name are. */
	uint8_t resp;		       /* 2, or 3 after HELLO 3: its replies are translated */
	bool no_evict;		       /* CLIENT NO-EVICT on: --maxmemory-clients spares it */
	bool reply_off, reply_skip;    /* CLIENT REPLY OFF; SKIP: this command's reply */
	bool reply_skip_next;	       /* CLIENT REPLY SKIP: the next command's */
	int64_t created_ms, last_ms;   /* CLIENT LIST's age and idle */
	const struct kv_cmd *last_cmd; /* ... and cmd= (the last command it sent) */
	/* Moves to another lcore (kmove.c): what its subscriptions were, on the way; the
	 * move of its messages it waits for (psmove.c); the blocking command it waited in,
	 * to block again where it goes. */
	struct ps_out *ps_out;
	struct kv_psmove *psm;
	struct kv_rebl *rebl;
	unsigned move_from; /* the lcore it left (a refused move comes back there) */
	bool move_lost;	    /* its subscriptions could not be carried: closed on arrival */
};

/* One shard's share of a request. */
struct kpart {
	struct kreq *kr;
	void (*fn)(struct kv_ctx *x); /* what runs on the shard (the command's by default) */
	struct kpart *next_out;	      /* in a batch to another shard */
	unsigned shard;
	uint32_t argc;
	struct kv_arg *argv;
	struct rbuf out;
	/* Its answer is in: every part gets this set when it is launched (xshard.c). */
	void (*on_answer)(struct kpart *p);
	uint8_t kind;		/* KP_PLAIN, KP_TX_LOCK, KP_TX_HOP (txn.h) */
	uint8_t state;		/* KP_PARKED... (txn.h) */
	struct kv_txlock *lock; /* KP_TX_LOCK: its keys, and the hold once granted */
	uint64_t epoch;		/* the origin's kv_txshard.epoch when it was sent */
	unsigned origin;	/* the origin's shard index */
	bool nolease;		/* the origin's: waiting for it keeps no lease (a blocked pop,
				 * which a shutdown need not wait for) */
	uint64_t run_ns;	/* how long it ran on its shard (written there), for kreq.run_ns */
	uint64_t ps_seq;	/* PUBLISH: its number on the origin's lcore (pubsub.c), else 0 */
	unsigned ps_from;	/* ... and that lcore */
	char inl[80];
};

typedef void (*kreq_cont_fn)(struct kreq *kr);

struct kreq {
	struct kreq *next; /* on the connection */
	struct kconn *kc;
	const struct kv_cmd *cmd;
	bool done;
	bool coalesce; /* a run of local replies: later local ones are appended */
	uint32_t nparts, sent, left;
	struct kpart *parts;	/* &one when nparts <= 1 */
	struct kv_arg *argpool; /* the parts' argument arrays (KV_ROUTE_KEYS) */
	char scratch[32];	/* a part's rewritten argument (SCAN's shard cursor) */
	kreq_cont_fn cont;	/* when every part has answered; NULL: merge by cmd */
	int phase;
	void *state;			 /* a multi-phase command's own */
	void (*state_fini)(void *state); /* frees it (NULL: free()) */
	struct rbuf *final;		 /* the bytes to send when done */
	/* A request made by another (a blocked pop's attempt, bpop.c): not on the
	 * connection; called instead when its reply is final, and frees it. */
	void (*on_done)(struct kreq *kr);
	void *owner;
	bool hop; /* a command EXEC runs under its locks: its parts are KP_TX_HOP */
	struct rbuf reply;
	uint32_t argc;
	struct kv_arg *argv;
	size_t size;	 /* allocation size: KREQ_SMALL comes from the shard's free list */
	uint64_t run_ns; /* its parts' run times so far (the slow log's duration) */
	/* A command EXEC runs: the EXEC's time, which every part of it runs at (Redis
	 * freezes the clock for a transaction); 0: the clock's, when each part runs. */
	int64_t now_ms;
	bool mute; /* CLIENT REPLY OFF or SKIP when it was sent: its reply is dropped */
	struct kpart one;
	char data[];
};

#define KREQ_SMALL 1024u

struct kv_global {
	unsigned nshards;
	unsigned shard_lcore[CR_MAX_LCORES];
	struct kv_shard *shards[CR_MAX_LCORES]; /* by lcore id */
	long long max_bulk;
	unsigned long long maxclients;
	unsigned long long qbuf_limit;
	_Atomic uint64_t nclients;
	_Atomic uint64_t next_client_id;
	_Atomic uint64_t conns_total, rejected, qbuf_closed, proto_errors;
	_Atomic uint64_t mem_peak;
	_Atomic uint64_t blocked_clients; /* waiting in a blocking command (INFO) */
	/* Set by options and CONFIG SET on any lcore, read on every lcore: relaxed. */
	_Atomic long long maxmemory_clients; /* > 0 bytes, < 0 percent of maxmemory, 0 off */
	_Atomic unsigned long long obuf_hard, obuf_soft, obuf_soft_secs; /* "normal" class */
	_Atomic uint64_t clients_mem; /* every client's memory, all lcores (climem.c) */
	_Atomic uint64_t evicted_clients, obuf_closed;
	_Atomic uint64_t clients_moved, blocked_moved; /* kmove.c: arrived from a retiring lcore */
	unsigned closing_grace_s;		       /* --retire-grace */
	uint64_t start_ms;
	unsigned port;
	int tel_cmds, tel_remote, tel_proto, tel_qbuf, tel_rejected, tel_expired;
	int tel_moved, tel_reblocked, tel_psfwd;
	int tel_moved_out, tel_moved_in; /* shards (shardmove.c) */
};

extern struct kv_global kv;

static inline unsigned
kv_owner(uint64_t h)
{
	return (unsigned)((h >> 40) % kv.nshards);
}

static inline struct kv_shard *
kv_here(void)
{
	return kv.shards[cr_lcore_id()];
}

/* Shard @p s's struct (on its home lcore's record), wherever it runs now. */
static inline struct kv_shard *
kv_shard_at(unsigned s)
{
	return kv.shards[kv.shard_lcore[s]];
}

/* Does @p sh's lcore (the caller) own its home shard now, with nothing of it held: may a
 * command for it run at once there (the fast path)? */
static inline bool
kv_home_here(const struct kv_shard *sh)
{
	return kv_route_here(sh->index);
}

/* Does the calling lcore own @p sh now? */
static inline bool
kv_shard_owned(struct kv_shard *sh)
{
	/* relaxed: only the owner writes it, and a shard changes owner by message (the
	 * give happens-before the adopt); a stale lcore reads a value that is not its own */
	return atomic_load_explicit(&sh->owner, memory_order_relaxed) == cr_lcore_id();
}

/* WATCH's version of the slot of key hash @p h is bumped: a key there was written. */
static inline void
kv_wv_touch(struct kv_shard *sh, uint64_t h)
{
	sh->tx.wver[h & (KV_WVER_SLOTS - 1)]++;
}

int64_t kv_now_ms(void);
uint64_t kv_used_memory(void);
/* The process's resident set (/proc/self/statm), and the highest used memory seen. */
uint64_t kv_rss(void);
uint64_t kv_mem_peak(uint64_t now);

/* kreq.c: request objects */
struct kreq *kreq_new(struct kv_shard *sh, struct kconn *kc, const struct kv_cmd *cmd,
		      uint32_t argc, const struct kv_arg *argv);
void kreq_free(struct kv_shard *sh, struct kreq *kr);
void kreq_free_list(struct kv_shard *sh); /* the shard's free list, at stop */
int kreq_set_parts(struct kreq *kr, uint32_t n);
void kreq_part_args(struct kpart *p, uint32_t argc, struct kv_arg *argv);
int kreq_split_keys(struct kreq *kr, unsigned step);
/* Arguments as one block: the bytes an argv and copies of its strings take, and the copy
 * (@p dst's strings from @p d on, each NUL-terminated); returns the end of what it wrote. */
size_t kv_args_size(const struct kv_arg *argv, uint32_t argc);
char *kv_args_copy(struct kv_arg *dst, char *d, const struct kv_arg *argv, uint32_t argc);
/* The shard of a key (of its hash tag, "{...}", if it has one); _h when its hash is known. */
unsigned key_shard(const struct kv_arg *a);
unsigned key_shard_h(const char *p, size_t len, uint64_t h);

/* kconn.c: the connection object */
struct kconn *kconn_new(struct kv_shard *sh, struct cr_conn *c, kconn_resume_fn resume);
void kconn_free(struct kconn *kc);
/* kmove.c: a client moves to another lcore when its own retires (lib/net's moves). */
void *kv_conn_move_out(struct cr_conn *c);
void kv_conn_move_in(struct cr_conn *c, void *state);
void kv_conn_move_drop(void *arg, void *state);
/* Is there a RUNNING lcore for the clients of closing @p sh to go to? */
bool kv_move_possible(const struct kv_shard *sh);
/* A blocking command cancelled to move: @p kr runs again where the client goes, with
 * what is left until @p deadline_ns (0: none). Holds the client's parsing. -ENOMEM. */
int kv_rebl_save(struct kconn *kc, const struct kreq *kr, uint64_t deadline_ns);
/* conn_at_boundary() of a client holding one: true if it can move, else it runs here. */
bool kv_rebl_boundary(struct kconn *kc);
void kc_maybe_free(struct kconn *kc); /* free it if nothing refers to it any more */
void kc_gone(struct kconn *kc);	      /* its socket is gone (closed or destroyed) */
void kc_abort(struct kconn *kc);      /* destroy the socket now, free if possible */
/* kc_send() and the output: clients.h */
void kc_close_hard(struct kconn *kc);
/* The peer shut its side: close now, or once the replies owed (and the requests read
 * before, when parsing is held) are answered. */
void kc_eof(struct kconn *kc);
void kc_stop_reading_if_needed(struct kconn *kc);
/* Release a hold on the connection's parsing (a multi-phase command is done); the last
 * one resumes it. */
void kv_unblock(struct kconn *kc);
/* The same, its parsing resumed from the loop (kmove.c): for a caller that may run inside
 * another client's input pass. */
void kv_unblock_later(struct kconn *kc);

/* pipeline.c: reply order */
void kc_enqueue(struct kconn *kc, struct kreq *kr);
/* Where a reply made now on this lcore goes: the batch, or behind what is owed (NULL on
 * ENOMEM). */
struct rbuf *kc_local_out(struct kconn *kc);
void kc_reply_error(struct kconn *kc, const char *s, size_t n);
/* Send the completed replies at the head, in order; may free kc. */
void kc_flush(struct kconn *kc);
void kreq_finish(struct kreq *kr); /* the reply is final: flush it in its turn */

/* xshard.c: parts between shards */
void kreq_launch(struct kreq *kr);
/* kreq_launch() of one part, the whole command, on shard @p s. */
void kreq_launch_one(struct kreq *kr, unsigned s);
/* Run part @p p (its shard, fn, args and on_answer set) here or on its shard; its
 * on_answer is called when its reply is in (at once if it ran here). */
void kv_part_send(struct kv_shard *sh, struct kpart *p);
void kv_outq_flush(struct kv_shard *sh);
void kv_xshard_init(struct kv_shard *sh);
void kv_xshard_fini(struct kv_shard *sh);

/* resp3.c: RESP3 replies, for a client that said HELLO 3. Commands write RESP2; the
 * bytes @p b holds from @p from on (the replies of @p cmd) are rewritten as Redis 7.0
 * writes them in RESP3: nulls, maps, sets, doubles, score pairs, verbatim strings, push
 * frames. */
void kv_resp3_fix(const struct kv_cmd *cmd, uint32_t argc, const struct kv_arg *argv,
		  struct rbuf *b, size_t from);
/* ... a command's reply @p o appended to @p out so (EXEC's array). */
void kv_resp3_append(const struct kv_cmd *cmd, uint32_t argc, const struct kv_arg *argv,
		     const struct rbuf *o, struct rbuf *out);
/* A bulk string as RESP3's verbatim "txt" (INFO, CLIENT LIST), or as a bulk. */
void kv_reply_verbatim(struct rbuf *out, bool resp3, const char *p, size_t n);

/* merge.c */
void kv_merge(struct kreq *kr, struct rbuf *out);
void kv_merge_parts(struct kreq *kr, struct kpart *parts, uint32_t nparts, struct rbuf *out);
void kv_info_merge(struct kreq *kr, struct kpart *parts, uint32_t nparts,
		   struct rbuf *out); /* cmd_server.c */
void kv_slowlog_merge(struct kreq *kr, struct kpart *parts, uint32_t nparts,
		      struct rbuf *out); /* slowlog.c */

/* dispatch.c: the request engine */
void kv_process_input(struct kconn *kc);
/* SCAN request @p kr (not on the connection's fast path): its cursor's shard, handing on
 * to the next ones in the same call. */
void kv_scan_request(struct kreq *kr);

/* cmd_exec.c: MULTI, EXEC, DISCARD, WATCH, UNWATCH */
/* In MULTI, is @p cmd queued (not one of the few that run at once)? */
bool kv_multi_queues(const struct kv_cmd *cmd);
/* Queue it (+QUEUED), or, refused before queueing, make the EXEC fail (EXECABORT). */
void kv_multi_queue(struct kconn *kc, const struct kv_cmd *cmd, const struct kv_ctx *x);
void kv_multi_flag(struct kconn *kc);
/* EXEC itself refused in MULTI (@p why): EXECABORT with it, and the MULTI discarded. */
void kv_multi_refuse_exec(struct kconn *kc, const char *why);
/* A KV_ROUTE_TX command. */
void kv_txcmd(struct kconn *kc, const struct kv_cmd *cmd, struct kv_ctx *x);
/* The connection's MULTI and WATCH state, at its end. */
void kv_multi_free(struct kconn *kc);
/* CLIENT LIST's multi=: the commands queued, or -1 outside MULTI. */
long long kv_multi_count(const struct kconn *kc);
/* cmd_watch.c: a WATCHed key and what its shard said of it then. */
struct kv_watch {
	struct kv_watch *next;
	long long ver, gen, live, epoch;
	size_t klen;
	char key[];
};
void kv_watch(struct kconn *kc, const struct kv_cmd *cmd, struct kv_ctx *x);
void kv_watch_drop(struct kv_watch *list);
/* Has a key of @p list changed since WATCH? Read from what watch_probe answered for
 * @p tx's lock requests, whose keys argv[1...] start with @p list's, in its order. */
bool kv_watch_changed(const struct kv_watch *list, const struct kv_tx *tx);

/* cmd_list.c: for the commands that move elements between lists */
int kv_list_push(struct kv_ctx *x, struct kv_entry *e, bool head, const struct kv_arg *v);
void kv_list_pop_reply(struct kv_ctx *x, struct kv_entry *e, bool head);
/* LEFT (head) or RIGHT, else a syntax error replied. */
bool kv_list_where(struct kv_ctx *x, const struct kv_arg *a, bool *head);
/* LMOVE argv[1] to argv[2] on this shard (replied). */
void kv_lmove_here(struct kv_ctx *x, bool from_head, bool to_head);

/* cmd_set.c */
struct kv_entry *kv_set_create(struct kv_ctx *x, const struct kv_arg *k,
			       const struct kv_arg *first);
void kv_set_reply_all(struct kv_ctx *x, struct kv_entry *e);

/* cmd_zset.c, cmd_zrange.c */
struct zrange;
struct zlexrange;
struct kv_entry *kv_zset_read(struct kv_ctx *x, const struct kv_arg *k, bool *bad);
bool kv_zparse_range(struct kv_ctx *x, const struct kv_arg *min, const struct kv_arg *max,
		     struct zrange *r);
bool kv_zparse_lex(struct kv_ctx *x, const struct kv_arg *min, const struct kv_arg *max,
		   struct zlexrange *r);
/* Reply and remove the @p count lowest or highest: member, score... (ZPOP_FLAT); "key,
 * member, score" (ZPOP_KEY, one: BZPOPMIN); "key, [[member, score]...]" (ZPOP_NESTED:
 * ZMPOP). */
enum { ZPOP_FLAT, ZPOP_KEY, ZPOP_NESTED };
void kv_zpop_reply(struct kv_ctx *x, struct kv_entry *e, bool max, long long count, int style,
		   const struct kv_arg *key);
/* Where ZRANGE's members go: the reply, or (store) a new sorted set in dst. */
struct zsink {
	struct kv_ctx *x;
	bool store, withscores, known, failed;
	bool given; /* the source is src (NULL: absent), not looked up */
	struct kv_entry *src;
	size_t start;
	long long n;
	struct kv_entry dst; /* store: type, enc and obj of the set being built */
};
/* ZRANGESTORE's source read into k->dst (NULL obj: empty result); false if an error was
 * replied. */
bool kv_zrangestore_collect(struct kv_ctx *x, struct zsink *k, struct kv_entry *src);

/* cmd_multi.c: commands over several shards, as transactions */
struct rd {
	const char *p, *end;
};
void rd_init(struct rd *r, const struct rbuf *b);
long long rd_array(struct rd *r);
long long rd_int(struct rd *r);
bool rd_bulk(struct rd *r, const char **s, size_t *len); /* false: nil */
bool rd_error(const struct rbuf *b);
struct kv_tx;
/* A part whose shard could not be reached answered with an error: @p tx ends with that
 * error as its reply (kv_tx_finish()), and true; false when every part answered. */
bool kv_tx_failed(struct kv_tx *tx);
/* What gather_dump / gather_probe read of one key on its shard. */
struct kv_probe {
	bool present;
	long long type, expire; /* expire: gather_dump's only */
	const char *dump;	/* gather_dump's: the value (objcopy.c) */
	size_t dlen;
};
/* What a shard read for kr->argv[@p idx] (false: it did not answer it). */
bool kv_tx_probe(struct kv_tx *tx, uint32_t idx, bool dump, struct kv_probe *out);
void kv_multi_keys(struct kreq *kr);
void kv_multi_all(struct kreq *kr); /* KEYS, DBSIZE...: every shard, whole */
/* SCAN from global @p cursor over the shards from its on, as one snapshot. */
void kv_multi_scan(struct kreq *kr, unsigned long long cursor);
KV_CMD(scan_part);
void kv_multi_msetnx(struct kreq *kr);
void kv_multi_rename(struct kreq *kr);
void kv_multi_copy(struct kreq *kr);
void kv_multi_lmove(struct kreq *kr); /* cmd_list.c */
void kv_multi_smove(struct kreq *kr); /* cmd_setalg.c */
void kv_multi_setop(struct kreq *kr);
void kv_multi_zsetop(struct kreq *kr); /* cmd_zalg.c */
void kv_multi_zrangestore(struct kreq *kr);
void kv_multi_mpop(struct kreq *kr); /* cmd_mpop.c */
int kv_keys_mpop(const struct kv_arg *argv, uint32_t argc, uint32_t *idx, uint32_t max);
/* LMPOP / ZMPOP's [numkeys key... where [COUNT n]] from argv[@p at] (replied if bad). */
struct kv_mpop {
	uint32_t first, nkeys; /* argv index of the first key, and how many */
	bool end;	       /* LEFT, MIN: true */
	long long count;
};
bool kv_mpop_parse(struct kv_ctx *x, uint32_t at, bool zset, struct kv_mpop *m);
/* Pop from the first non-empty key (replied, true), or find none (false, nothing
 * replied); WRONGTYPE for a key of another type before it (true). */
bool kv_mpop_here(struct kv_ctx *x, const struct kv_mpop *m, bool zset);
int kv_keys_sintercard(const struct kv_arg *argv, uint32_t argc, uint32_t *idx, uint32_t max);
int kv_keys_numkeys(const struct kv_arg *argv, uint32_t argc, uint32_t *idx, uint32_t max);
KV_CMD(gather_dump);
KV_CMD(gather_probe);
KV_CMD(tx_install);
KV_CMD(tx_delete);
KV_CMD(watch_probe);
KV_CMD(multi);
KV_CMD(exec);
KV_CMD(discard);
KV_CMD(watch);
KV_CMD(unwatch);

/* The keys a multi-key command reads: looked up here (tx NULL), or rebuilt from what their
 * shards sent (kv_tx_compute()). e[i] NULL: absent. */
struct kv_srcs {
	uint32_t n;
	struct kv_entry **e;
	struct kv_entry *own;
};
int kv_srcs_get(struct kv_ctx *x, struct kv_tx *tx, const uint32_t *idx, uint32_t n,
		struct kv_srcs *s);
void kv_srcs_free(struct kv_srcs *s);
/* Every present source of one of @p types (a mask of 1 << KV_T_*); else WRONGTYPE. */
bool kv_srcs_typed(struct kv_ctx *x, const struct kv_srcs *s, unsigned types);
void kv_tx_compute(struct kreq *kr, const uint32_t *idx, uint32_t n, int dst, kv_tx_fn compute);
void kv_tx_ctx(struct kv_tx *tx, struct kv_ctx *x, struct rbuf *out);
/* Store @p res (n elements; 0: delete) under kr->argv[@p dst] on its shard, then answer n. */
void kv_tx_store(struct kv_tx *tx, uint32_t dst, struct kv_entry *res, long long n);

/* objcopy.c: a value as bytes and back (COPY, values moving between shards) */
struct kv_loaded {
	unsigned type, enc;
	void *obj;     /* a collection (the caller's until installed) */
	const char *s; /* a string: its bytes, inside what was loaded */
	size_t slen;
};
void kv_obj_dump(struct kv_entry *e, struct rbuf *b);
/* @return 0, -EINVAL (not a dump), -ENOMEM. */
int kv_obj_load(const char *p, size_t len, struct kv_loaded *out);
/* Make key @p k hold the loaded value (replacing it), keeping its encoding; NULL on
 * ENOMEM (replied). l->obj is taken either way. */
struct kv_entry *kv_obj_install(struct kv_ctx *x, const struct kv_arg *k, struct kv_loaded *l);

/* lazyfree.c: free queued values a bounded step per turn (call after writes) */
void kv_lazy_kick(struct kv_shard *sh);
void kv_lazy_init(struct kv_shard *sh);
void kv_lazy_give(struct kv_shard *sh);	 /* the shard leaves this lcore */
void kv_lazy_adopt(struct kv_shard *sh); /* ... arrives on it */
void kv_lazy_fini(struct kv_shard *sh);

/* conn.c: lib/net events; shard.c: start and stop; kv.c */
extern const struct cr_conn_ops kv_conn_ops;
/* @p sh's lcore begins closing: no client of it waits in a blocking command from here. */
void kv_clients_closing(struct kv_shard *sh);
int kv_shard_start(unsigned lcore);
void kv_shard_stop(unsigned lcore);

#endif /* CR_KV_H */
