/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Blocking pops: BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP.
 *
 * A blocking command holds its connection's parsing (as Redis, a blocked client runs
 * nothing else) until it is answered: by what it popped, by a null array when its timeout
 * passes, or by an error.
 *
 * Keys on one shard (the common case; hash tags make it so). The command travels as a
 * plain part to that shard, which runs it as the non-blocking command would. If there is
 * nothing to pop there, the part waits on the shard as a waiter, queued FIFO on each key it
 * names (bwait.c). When a list or sorted set is made under one of those keys (by a push, a
 * store, a rename; a key that exists is never empty, so creation is the only event), the
 * shard serves its waiters right after the command that made it, the longest waiting
 * first, each running its command again; the first one served answers the part as a late
 * answer (txn.h). This is Redis's order exactly: a pushed element goes to a blocked client
 * before any later command runs, and a waiter whose key was made with another type stays
 * blocked (Redis 7.0). Keys a transaction has locked are served once it releases them.
 *
 * Keys on several shards. The origin asks every shard of the keys to watch them for it
 * (a watcher, FIFO among the waiters), then tries the non-blocking form of the command
 * (LMPOP, ZMPOP, LMOVE: a transaction over all the keys, so the first non-empty key in
 * argument order is the one popped, atomically). Finding nothing, it waits; a shard tells
 * it (kv_tx_notify()) whenever a watched key is made, and it tries again. Whatever is
 * popped is popped by the transaction, so nothing is popped twice or lost; but another
 * client's pop may take the element first (documented in doc/guides/kv.md).
 *
 * Timeout and disconnect. The origin's timer (or the connection going away) cancels: a
 * message to the shard, which answers a waiter still waiting with a null array, or finds
 * it already served (its answer is on the way) or still queued behind locks (then it will
 * answer a null array when its turn comes). The one answer a part gets is therefore
 * either what was popped or the null array, never both. A watcher is removed by the
 * same message; a notification for a request that is gone asks its shard to drop it.
 */
#ifndef CR_KV_BPOP_H
#define CR_KV_BPOP_H

#include <stdbool.h>
#include <stdint.h>

#include "kdict.h"

struct kv_shard;
struct kv_ctx;
struct kv_cmd;
struct kconn;
struct kpart;

/* For whom a command runs on a shard, when it runs as a plain part: what a blocking
 * command needs to wait there and be answered later. */
struct kv_from {
	struct kpart *token;	      /* the part on its origin: only ever sent back */
	unsigned origin;	      /* the origin's shard index */
	uint64_t epoch;		      /* the origin's incarnation */
	void (*fn)(struct kv_ctx *x); /* the command being run (run again to serve it) */
	bool serving;		      /* run again by the shard for a waiter: never waits again */
	bool expired; /* its client's timeout passed while it waited behind a transaction's
		       * locks: it may not wait, and answers as at its timeout */
	bool parked;		      /* out: it waits here (its answer comes later) */
};

/* Per shard, touched by its lcore only. */
struct kv_bwshard {
	struct kdict keys;			  /* struct kv_bkey by key: the keys waited for */
	struct kdict waiters;			  /* struct kv_bwaiter by who waits */
	struct kv_bkey *ready_head, **ready_tail; /* made since the last serve */
};

/* Per shard, for the blocked requests of its own clients (bpop.c). */
struct kv_bpshard {
	struct kdict active; /* struct kv_bpop of several shards, by id */
	uint64_t next_id;
};

/* ---- the shard side (bwait.c) ---- */

void kv_bw_init(struct kv_shard *sh);
/* Waiters still waiting get an error (a stopping shard). */
void kv_bw_fini(struct kv_shard *sh);
/* A key holding a new list or sorted set (@p type) was made: serve its waiters after
 * the command (kv_bw_serve()). */
void kv_bw_signal(struct kv_shard *sh, const char *key, size_t klen, unsigned type);
/* Is anything to serve? */
bool kv_bw_pending(const struct kv_shard *sh);
/* Serve the waiters of the keys made since the last call (after every command). */
void kv_bw_serve(struct kv_shard *sh);
/*
 * From a blocking command's code on its shard, with nothing to pop: wait for the keys
 * argv[@p idx[0..n)] to hold a @p type (KV_T_LIST, KV_T_ZSET); @p dst is the argv index
 * of a key it writes (BLMOVE's destination, -1: none), which must not be locked when it
 * is served. @return 0 (x->from->parked), -EAGAIN (it cannot wait: run by the shard for
 * a waiter, or not as a part), -ENOMEM.
 */
int kv_bw_park(struct kv_ctx *x, unsigned type, const uint32_t *idx, uint32_t n, int dst);
/* Cancel waiter (@p origin, @p token) on shard @p shard, or (watch) watcher @p id:
 * here, or by a message. @return 0, or a cr_send() error (-EAGAIN: try again). */
int kv_bw_cancel(unsigned shard, unsigned origin, uint64_t epoch, bool watch, uint64_t token);
/* [cmd, id, type, keys...]: watch the keys for request id of the part's origin. */
void cmd_bw_watch(struct kv_ctx *x);

/* ---- the origin side (bpop.c) ---- */

void kv_bp_init(struct kv_shard *sh);
void kv_bp_fini(struct kv_shard *sh);
/* Run blocking command @p cmd parsed from @p kc; @p shard: the one shard of its keys, or
 * -1 (several). */
void kv_bpop_dispatch(struct kconn *kc, const struct kv_cmd *cmd, struct kv_ctx *x, int shard);
/* The connection of a blocked client went away: cancel its wait. */
void kv_bpop_gone(struct kconn *kc);
/* @p kc's lcore is closing: end its wait as its timeout would (one answer: what was
 * popped meanwhile, or the null reply), so the client is answered before it is closed. */
void kv_bpop_stop_waiting(struct kconn *kc);
/* @p kc's lcore retires and it moves: cancel its wait (one answer: what was popped
 * meanwhile, which it gets first, or the cancel, after which the command is kept to run
 * again where the client goes: kv_rebl_save()). */
void kv_bpop_move(struct kconn *kc);
/* Shard @p from saw a key that request @p id watches made. */
void kv_bpop_notified(struct kv_shard *sh, unsigned from, uint64_t id);
/* The timeout (argument checks before any key is touched, as Redis). */
bool precheck_bpop(struct kv_ctx *x);
/* ... in ms (0: none), once the precheck passed (cmd_block.c). */
long long kv_bpop_timeout_ms(struct kv_ctx *x);

#endif /* CR_KV_BPOP_H */
