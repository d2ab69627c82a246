/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shard hand-off (shardmove.c): which lcore owns each shard, each lcore's view of it for
 * routing parts, and the protocol that moves a shard to another lcore when its owner
 * retires, and back to its home lcore when that starts again. shardmove.c's head comment
 * states the protocol and its invariants.
 */
#ifndef CR_KV_SHARDMOVE_H
#define CR_KV_SHARDMOVE_H

#include <stdbool.h>
#include <stdint.h>

/* ---- routing, on any lcore (its own view) ---- */

/* Where this lcore sends what is for shard @p s: 0 and the owner in *@p lcore (this lcore
 * itself, when it owns it); -EAGAIN while the shard is moving (held: try again once it
 * has moved, the way a full mailbox is tried again). */
int kv_route(unsigned s, unsigned *lcore);
/* Does this lcore own shard @p s, with nothing of it held: its parts run here? */
bool kv_route_here(unsigned s);

/* A message for a shard, its link while it is forwarded (kv_move_forward()). */
struct kv_fwd {
	struct kv_fwd *next;
	unsigned shard;
	void (*fn)(void *arg);	 /* its receiver, run on the owner */
	void (*drop)(void *arg); /* the owner is offline (a shutdown): free it */
	void *arg;
};

/* A receiver of a shard's messages (a lock release, a cancel) ran on this lcore, which
 * does not own shard @p s: its sender routed it by a view no move had reached (an lcore
 * whose closed mailbox refused its HOLD, or a message the old owner read only after its
 * GIVE). It goes on, in the order forwarded, to the owner the mover published (at once,
 * or once the shard's move is over): @p fn(@p arg) runs there; @p f is the message's own
 * link. The lcore stays (kv_move_busy()) until it is sent. */
void kv_move_forward(unsigned s, struct kv_fwd *f, void (*fn)(void *arg), void (*drop)(void *arg),
		     void *arg);

/* ---- lifecycle ---- */

/* Before the runtime starts: @p nshards shards, shard i's home lcore @p home[i], @p main
 * the main lcore (which never retires and runs the mover). */
void kv_move_init(unsigned nshards, const unsigned *home, unsigned main);
/* On @p lcore, from its start hook: @p first at the process's start (it owns its home
 * shard), else a restart (it owns nothing and learns the routing from the mover). */
void kv_move_lcore_start(unsigned lcore, bool first);
/* On @p lcore when it begins retiring: its shards go to lcores that stay. The lcore stays
 * (a lease) until the mover says it owns nothing and nothing is on its way to it. */
void kv_move_retire(unsigned lcore);
/* On @p lcore when a shutdown begins: no further move starts. On the main lcore, the
 * mover cancels a move that has not been given yet (the shard stays with its owner) and
 * lets every lcore's lease go (BYE), those of a move's owner and target once it is over. */
void kv_move_shutdown(unsigned lcore);
/* On @p lcore, a pure predicate: has it shard-move messages still to send (a control
 * message a full mailbox refused, a forwarded message)? A closing lcore does not close
 * while it has (the app's lcore_busy), or a marker the mover waits for would be lost. */
bool kv_move_busy(unsigned lcore);
/* On @p lcore at its stop. */
void kv_move_lcore_stop(unsigned lcore);
/* Shards moved out of / into @p lcore so far (telemetry, INFO). Any thread. */
uint64_t kv_move_count(unsigned lcore, bool in);

/* ---- what the protocol calls (shard.c, xshard.c; stubbed by the unit test) ---- */

/* Send this lcore's queued parts for shard @p s to its owner, lcore @p to (run them, if
 * @p to is this lcore): the shard is released here. */
void kv__move_flush(unsigned s, unsigned to);
/* On the owner: shard @p s leaves this lcore (its timers stop, its lease goes). */
void kv__move_give(unsigned s);
/* On the new owner: shard @p s is this lcore's from now (its timers start here). */
void kv__move_adopt(unsigned s);

#endif /* CR_KV_SHARDMOVE_H */
