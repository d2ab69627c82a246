/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Pub/Sub (pubsub.c): SUBSCRIBE, PSUBSCRIBE and their UNSUBSCRIBEs, PUBLISH, PUBSUB.
 *
 * Registrations are per lcore: a client's channels and patterns are kept by its own
 * lcore (struct kv_psshard), touched only there (rule 1), so a client that goes leaves
 * nothing on any other lcore. PUBLISH is a KV_ROUTE_ALL command: one part per shard,
 * sent through the ordinary parts machinery (xshard.c: the FIFO queue per target and the
 * mailbox ring), so the parts of one connection reach each lcore in the order it sent
 * them; each part delivers to that lcore's subscribers and answers how many it reached,
 * and the merge adds them up (Redis's receiver count). Messages are framed in one place,
 * ps_frame(), as RESP2 arrays; a RESP3 subscriber is sent the same frame with ">" in
 * place of its "*" (deliver()); the confirmations are translated as replies (resp3.c).
 *
 * A subscribed client is of Redis's "pubsub" class for the output limits
 * (client-output-buffer-limit pubsub 32mb 8mb 60: outq.c asks kv_ps_limits()).
 */
#ifndef CR_KV_PUBSUB_H
#define CR_KV_PUBSUB_H

#include <stdbool.h>
#include <stdint.h>

struct kconn;
struct kreq;
struct kpart;
struct kv_shard;
struct kv_cmd;
struct kv_ctx;
struct rbuf;

int kv_ps_init(struct kv_shard *sh); /* 0 or -ENOMEM */
void kv_ps_fini(struct kv_shard *sh);
/* @p kc's socket is gone: drop its subscriptions (on its lcore). */
void kv_ps_gone(struct kconn *kc);
/* PUBLISH's numbers (pubsub.c): the next of this lcore's, taken once per PUBLISH for
 * all its parts; and the one of the part about to run here. */
uint64_t kv_ps_next_seq(void);
void kv_ps_tag(uint32_t from, uint64_t seq);
/* The lcore is closing: its lease goes once no client or stub is left. */
void kv_ps_closing(struct kv_shard *sh);
/* A client connection comes to this lcore (+1: opened, moved in) or leaves it (-1: gone,
 * moved out): the lcore's pub/sub lease counts them (pubsub.c). */
void kv_ps_client(struct kv_shard *sh, int delta);
/* A subscriber moves (psmove.c): on the old lcore as it leaves (its subscriptions stay
 * as stubs that forward; what to subscribe to goes with it: 0, or -ENOMEM and it lost
 * them), on the new lcore as it arrives (or back on the old one when the move was
 * refused), and where a move was dropped (its socket closed). */
int kv_ps_move_out(struct kconn *kc);
void kv_ps_move_in(struct kconn *kc);
void kv_ps_move_drop(struct kconn *kc);
/* Is @p kc subscribed to a channel or pattern (RESP2's subscribed mode)? */
bool kv_ps_subscribed(const struct kconn *kc);
/* CLIENT LIST's sub= and psub=. */
void kv_ps_counts(const struct kconn *kc, size_t *nchan, size_t *npat);
/* In subscribed mode, may @p cmd run? */
bool kv_ps_allowed(const struct kv_cmd *cmd);
/* The output limits of @p kc's class if it is subscribed: true and hard, soft, seconds. */
bool kv_ps_limits(const struct kconn *kc, unsigned long long lim[3]);
/* PING in subscribed mode: "*2 pong <arg or empty>" as Redis replies. */
void kv_ps_pong(struct kv_ctx *x);
/* KV_MERGE_PUBSUB: PUBLISH's count, PUBSUB's answers over every shard. */
void kv_ps_merge(struct kreq *kr, struct kpart *parts, uint32_t nparts, struct rbuf *out);

void cmd_subscribe(struct kv_ctx *x);
void cmd_unsubscribe(struct kv_ctx *x);
void cmd_psubscribe(struct kv_ctx *x);
void cmd_punsubscribe(struct kv_ctx *x);
void cmd_publish(struct kv_ctx *x);
void cmd_pubsub_channels(struct kv_ctx *x);
void cmd_pubsub_numsub(struct kv_ctx *x);
void cmd_pubsub_numpat(struct kv_ctx *x);
void cmd_pubsub_help(struct kv_ctx *x);
/* PUBSUB CHANNELS takes one pattern at most (Redis's error text otherwise). */
bool precheck_pubsub_channels(struct kv_ctx *x);

#endif /* CR_KV_PUBSUB_H */
