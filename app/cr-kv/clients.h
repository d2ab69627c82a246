/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cr-kv's clients as a whole (issue 14): a connection's output (outq.c), what clients'
 * buffers take and the eviction that bounds it (climem.c), and the parsers of those
 * limits the options share with CONFIG SET (cmd_config.c). Included by kv.h.
 */
#ifndef CR_KV_CLIENTS_H
#define CR_KV_CLIENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kconn;
struct kv_shard;
struct rbuf;

/* outq.c: a connection's output. Replies go to lib/net's queue while it holds less than
 * a slice; the rest waits here, in the app's memory, and is fed to lib/net a slice at a
 * time as the client reads. So a big reply needs no big share of the lcore's chunk pool,
 * and a client that does not read holds only its own memory (counted, and bounded by the
 * output limits and --maxmemory-clients). */
bool kc_send(struct kconn *kc, const char *p, size_t n); /* false: it was aborted */
/* kc_send() of @p b's bytes; a big heap buffer is taken over rather than copied (@p b is
 * then empty). */
bool kc_send_rbuf(struct kconn *kc, struct rbuf *b);
void kc_pump(struct kconn *kc); /* feed lib/net: its queue drained, or chunks freed */
/* Are @p kc's replies not yet read over what its next command may wait behind? Then its
 * parsing pauses (dispatch.c) until they are half gone. */
bool kc_out_full(struct kconn *kc);
void kc_oq_drop(struct kconn *kc); /* the socket is gone: free what waits */
void kv_outq_tick(struct kv_shard *sh); /* the soft output limit, from the 100 ms tick */
void kv_outq_init(struct kv_shard *sh);
void kv_outq_fini(struct kv_shard *sh);

/* climem.c: client memory, --maxmemory-clients */
void kc_mem_update(struct kconn *kc); /* after its buffers grew or shrank */
void kv_climem_tick(struct kv_shard *sh); /* from the shard's 100 ms tick */
void kv_climem_init(struct kv_shard *sh);
void kv_climem_fini(struct kv_shard *sh);
/* The limit in bytes now (0: off). */
uint64_t kv_maxmemory_clients(void);
/* INFO: the highest query buffer and output of a client in the last few seconds. */
uint64_t kv_recent_max_input(void);
uint64_t kv_recent_max_output(void);

/* cmd_config.c: values as options and CONFIG SET take them (0 or -EINVAL) */
int kv_parse_bytes(const char *v, unsigned long long min, unsigned long long max,
		   unsigned long long *out);
int kv_parse_maxmemory_clients(const char *v, long long *out);
/* "normal HARD SOFT SECONDS": *msg names what is wrong (Redis's text) on -EINVAL. */
int kv_parse_obuf_limit(const char *v, unsigned long long out[3], const char **msg);

#endif /* CR_KV_CLIENTS_H */
