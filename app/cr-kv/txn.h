/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Transactions across shards: the mechanism that makes a command over keys of several
 * lcores atomic as other clients see it, without a lock held across a callback or an
 * lcore waiting on another (DESIGN rules 1-3). See doc/guides/kv.md for the guarantee.
 *
 * Shard side (txlock.c). Each shard keeps a lock table (key -> shared and exclusive
 * counts) for the keys of the transactions that hold locks there, and one strict FIFO
 * wait queue, in the manner of the per-shard queues of Dragonfly's VLL: a lock request
 * whose keys conflict, or that finds the queue non-empty, waits at its tail; so does any
 * plain command (a part) that would touch a locked key, so that no client sees a key in
 * the middle of a transaction. When locks are released the queue is served from its head
 * while the head's keys are free. A shard never touches another lcore's memory except
 * during the call that brought it: what waits is copied into the queue, and answered
 * later by a message to the origin (a "late answer"), checked there against the origin's
 * epoch so that an answer meant for an earlier incarnation is dropped.
 *
 * Origin side (txn.c). A transaction declares its keys, then locks its shards one at a
 * time in ascending shard order: ordered acquisition, so no two transactions wait for
 * each other in a cycle (a transaction waiting at shard s holds locks only on shards
 * below s). Each lock request can carry a part that runs on its shard as soon as the lock
 * is granted (the command's reads: MGET's values, RENAME's source); once every shard is
 * locked the command runs further steps under the locks (its writes), then releases
 * them. Strict two-phase locking: nothing is released before everything is locked, so
 * the whole is serializable. The client's connection parses nothing further until every
 * lock is held; from then on its later commands reach each shard behind the locks.
 */
#ifndef CR_KV_TXN_H
#define CR_KV_TXN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cr_lease.h"
#include "kdict.h"
#include "shardmove.h"

struct kv_shard;
struct kpart;
struct kreq;
struct kv_ctx;
struct kv_arg;
struct kv_wait;
struct kv_late;
struct kv_hold;
struct kv_cmd;

/*
 * A lock release on its way to the shard that granted the hold: allocated before the
 * hold is asked for (kv_tx_release_new()), so that releasing needs no memory and cannot
 * fail. A full mailbox keeps it on the origin's retry queue until the mailbox takes it;
 * a lost release would leave the shard locked for good. Plain malloc: it crosses lcores.
 */
struct kv_release {
	struct kv_release *next; /* on the origin's retry queue */
	unsigned shard;		 /* the target's shard index */
	void *hold;
	uint64_t epoch; /* the target's incarnation that granted the hold */
	/* its link while a lcore that does not own the shard (any more) forwards it */
	struct kv_fwd fwd;
};

/* A lock request's keys, on the origin (read by the shard during the call only). */
struct kv_txlock {
	uint32_t nkeys;
	const struct kv_arg *keys;
	const uint8_t *excl; /* per key: 1 exclusive (a write), 0 shared */
	uint8_t whole;	     /* KV_WHOLE_*: the whole shard instead of its keys */
	void *hold;	     /* out: the shard's handle of the held locks */
	uint64_t hold_epoch; /* out: the shard's incarnation that granted it */
	struct kv_release *rel; /* the origin's, made with the request: its release */
};

/* A whole-shard lock (KEYS, DBSIZE, RANDOMKEY: shared; FLUSHDB, FLUSHALL: exclusive). It
 * counts as one lock in held (and excl_held), so the fast path's kv_tx_clear() is the
 * same test as before. */
#define KV_WHOLE_SHARED 1u
#define KV_WHOLE_EXCL	2u

/* Per shard (in struct kv_shard), touched by its lcore only. */
struct kv_txshard {
	struct kdict locks; /* struct kv_klock by key */
	uint64_t held;	    /* keys locked, over all holds, and whole-shard locks */
	uint64_t excl_held; /* ... of which exclusively */
	uint32_t whole_shared, whole_excl; /* whole-shard locks held */
	/* WATCH's versions: a counter per slot of key hashes, bumped by every write to a key
	 * of the slot (and expiry), and one for the whole shard (FLUSH*). */
	uint32_t *wver;
	uint64_t wgen;
	struct kv_wait *wq_head, **wq_tail;
	uint64_t waiting;
	struct kv_hold *holds;			/* every hold granted here */
	struct kv_late *late_head, **late_tail; /* answers not yet sent (a full mailbox) */
	bool late_armed;
	struct cr_timer late_timer;
	struct kv_release *rel_head, **rel_tail; /* releases a full mailbox refused */
	bool rel_armed;
	struct cr_timer rel_timer;
	uint64_t epoch;	   /* the shard's incarnation: set once per process (it moves,
			    * it does not restart); origins use kv_shard.oepoch */
	uint64_t awaiting; /* this lcore's parts parked elsewhere, and its transactions */
	uint64_t serving;  /* holds and queued items this shard keeps for others */
	struct cr_lease lease_origin, lease_serving;
	/* statistics (INFO): */
	uint64_t parked_total, tx_total;
};

/* Part kinds (struct kpart.kind). */
enum { KP_PLAIN = 0, KP_TX_LOCK, KP_TX_HOP };
/* Part states, written by the shard (PARKED, during the call) and the origin. */
#define KP_PARKED   0x1u /* the shard queued it: its answer comes as a message */
#define KP_AWAITING 0x2u /* the origin saw the batch back and waits for that message */
#define KP_EARLY    0x4u /* the message came before the batch did */

/* The shard's side, once per process (on its home lcore's first start): @return 0 or
 * -ENOMEM. _fini when the lcore that owns it stops (a shutdown). */
int kv_tx_shard_init(struct kv_shard *sh);
void kv_tx_shard_fini(struct kv_shard *sh);
/* The origin's side (releases on their way, what this lcore awaits), per incarnation. */
void kv_tx_origin_init(struct kv_shard *sh);
void kv_tx_origin_fini(struct kv_shard *sh);
/* The shard leaves this lcore (its late-answer timer stops, its serving lease goes), or
 * arrives on it (shardmove.c). */
void kv_tx_give(struct kv_shard *sh);
void kv_tx_adopt(struct kv_shard *sh);
void kv_tx_late_give(struct kv_shard *sh);
void kv_tx_late_adopt(struct kv_shard *sh);

/*
 * Run part @p p on shard @p sh now, or queue it behind the locks it conflicts with (then
 * p->state gets KP_PARKED and its answer comes later). Every part, local or remote, goes
 * through here. @return true if it ran.
 */
bool kv_tx_run_part(struct kv_shard *sh, struct kpart *p);
/* Could a command over these keys run now on @p sh (the fast path's check)? */
bool kv_tx_clear(struct kv_shard *sh);
/* Release a hold (on its shard's lcore), then serve the wait queue. */
void kv_tx_release_here(struct kv_shard *sh, void *hold);
/* A release message for one hold (before the lock is asked for). @return NULL on ENOMEM. */
struct kv_release *kv_tx_release_new(void);
/* Release a hold granted by incarnation @p epoch of shard @p shard, on the current lcore
 * (a message, if the shard is another's), with the message *@p rel made for it by
 * kv_tx_release_new(): taken (*@p rel = NULL) when @p hold is not NULL. Cannot fail: a
 * full mailbox keeps it for a later turn (the lcore is kept meanwhile); a target that is
 * gone took its locks with it. */
void kv_tx_release(unsigned shard, void *hold, uint64_t epoch, struct kv_release **rel);
/* On the origin @p sh's lcore: a shard was released here (shardmove.c's RELEASE or SYNC):
 * the releases its move held go (deferred). */
void kv_tx_release_kick(struct kv_shard *sh);

/* The origin's bookkeeping of waiting for others (a lease keeps the lcore meanwhile). */
void kv_tx_await(struct kv_shard *sh, int delta);

/* WATCH's versions (KV_WVER_SLOTS counters by key hash; see doc/guides/kv.md): a key of
 * hash @p h was written; a command's keys were (every key it names, or the whole shard
 * for FLUSH*). */
#define KV_WVER_SLOTS (1u << 16)
/* kv_wv_touch(sh, h): kv.h (inline, on the fast path). */
void kv_wv_touch_cmd(struct kv_shard *sh, const struct kv_cmd *cmd, uint32_t argc,
		     const struct kv_arg *argv);
void kv_wv_touch_key(struct kv_shard *sh, const char *key, size_t len);

/* Is @p key locked by a transaction on @p sh? */
bool kv_tx_key_locked(struct kv_shard *sh, const char *key, size_t len);
/* The plain part (@p origin, @p token, @p epoch) queued behind locks may not block when
 * its turn comes (a blocking pop that timed out: it pops what is there, or answers a null
 * array). @return false if no such part waits. */
bool kv_tx_wait_cancel(struct kv_shard *sh, unsigned origin, struct kpart *token, uint64_t epoch);

/* Late answers (txlate.c): queued on @p sh in order and sent to their origins. Answer
 * part @p token of incarnation @p epoch of shard @p to with @p reply (and the locks of
 * @p hold, or NULL). @return 0 or -ENOMEM. */
int kv_tx_late(struct kv_shard *sh, unsigned to, struct kpart *token, uint64_t epoch, void *hold,
	       const char *reply, size_t len);
/* ... with the time the part ran here, @p run_ns, added to its request's (slowlog.h). */
int kv_tx_late_ran(struct kv_shard *sh, unsigned to, struct kpart *token, uint64_t epoch,
		   void *hold, const char *reply, size_t len, uint64_t run_ns);
/* ... the same without locks, logged on ENOMEM. */
void kv_tx_answer(struct kv_shard *sh, unsigned to, struct kpart *token, uint64_t epoch,
		  const char *reply, size_t len);
/* ... with the time it ran here (a blocked client served), as kv_tx_late_ran(). */
void kv_tx_answer_ran(struct kv_shard *sh, unsigned to, struct kpart *token, uint64_t epoch,
		      const char *reply, size_t len, uint64_t run_ns);
/* Tell shard @p to that a key blocked request @p id watches was made (bpop.h). */
void kv_tx_notify(struct kv_shard *sh, unsigned to, uint64_t epoch, uint64_t id);
void kv_tx_late_init(struct kv_shard *sh);
/* At stop: send what the mailboxes take now (answers to this lcore's own requests, freed
 * by then, are dropped); _fini drops the rest too. */
void kv_tx_late_flush(struct kv_shard *sh);
void kv_tx_late_fini(struct kv_shard *sh);

#endif /* CR_KV_TXN_H */

/* ---- the origin's API (txn.c) ---- */

struct kv_tx;
typedef void (*kv_tx_fn)(struct kv_tx *tx);

/* Per shard of a transaction, in ascending shard order. */
struct kv_tx {
	struct kreq *kr;
	unsigned nshards;
	unsigned *shard;	 /* [nshards] */
	struct kpart *parts;	 /* [nshards]: each shard's lock part; its reply after */
	struct kv_txlock *locks; /* [nshards] */
	kv_tx_fn next;
	unsigned locking; /* the shard whose lock is asked for */
	uint8_t whole[CR_MAX_LCORES]; /* per shard index: KV_WHOLE_* asked for, or 0 */
	bool in_loop, failed, blocked, finished;
	bool nested; /* a command inside EXEC: the EXEC holds its locks, it takes none */
	/* the connection parses nothing further until the transaction ends, not only until
	 * its locks are held (a script): released by kv_tx_finish(), however it ends */
	bool block_to_end;
	void *cmd; /* the command's own state */
	void (*cmd_fini)(void *cmd);
	/* private: what the parts point into */
	struct kv_arg *pool;
	uint8_t *modes;
	uint32_t *kidx, nkeys, kcap;
	uint8_t *kexcl;
	unsigned step;
};

/*
 * A transaction for request @p kr (stored as its state, freed with it). The connection
 * parses nothing further until every lock is held. @return NULL on ENOMEM (replied).
 */
struct kv_tx *kv_tx_new(struct kreq *kr);
/* Lock kr->argv[@p idx] (exclusively if @p excl). @return 0 or -ENOMEM. */
int kv_tx_key(struct kv_tx *tx, uint32_t idx, bool excl);
/* Lock the whole of shard @p shard (exclusively if @p excl): its part then runs with every
 * argument of the request, and waits for (and holds off) every write there, or every
 * command at all if exclusive. */
void kv_tx_whole(struct kv_tx *tx, unsigned shard, bool excl);
/*
 * Lock every shard of the keys given, one after another in ascending order; on each,
 * once granted, run @p gather with [argv[0], its keys] (each key followed by the
 * @p step - 1 arguments after it, as MSET's values), its reply in tx->parts[i].out.
 * Then @p next. A shard that cannot be reached ends the transaction with its error.
 */
void kv_tx_lock(struct kv_tx *tx, void (*gather)(struct kv_ctx *x), unsigned step, kv_tx_fn next);
/* The index in tx->parts of shard @p shard, or -1. */
int kv_tx_at(const struct kv_tx *tx, unsigned shard);
/*
 * Run @p n parts under the locks (request parts: kr->parts, set with kreq_set_parts()
 * and kreq_part_args(), their fn and shard set), in parallel; then @p next.
 */
void kv_tx_steps(struct kv_tx *tx, kv_tx_fn next);
/* Release every lock now (the command's reads and writes are all done). */
void kv_tx_unlock(struct kv_tx *tx);
/* Release every lock and answer the client @p reply (RESP bytes; NULL: what kr->reply
 * already holds, not copied). */
void kv_tx_finish(struct kv_tx *tx, const char *reply, size_t n);
