/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cr-proxy internals: settings, the backend table, per-lcore relay state. Never installed.
 *
 * Sharing. Backends live in one process-wide table of slots that are never freed: a slot
 * is assigned to an address once and keeps it (a reload that drops the address only clears
 * in_config), so an lcore may hold a slot index for as long as it likes. The fields every
 * lcore reads to choose a backend (in_config, weight, up) are atomics written by the
 * control path (the signal thread on reload, the main lcore's health checks) and by any
 * lcore on a connect failure (passive marking). Per-backend counters are per lcore, each
 * lcore writing only its own row, summed by telemetry and by leastconn.
 */
#ifndef PROXY_H
#define PROXY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cr_eal.h"
#include "cr_net.h"
#include "cr_reactor.h"
#include "cr_tls.h"

/* Distinct backend addresses over the life of the process (reloads included). */
#define PX_MAX_BACKENDS 64
#define PX_NAME_LEN	CR_NET_ADDR_STRLEN
#define PX_WEIGHT_MAX	256
/* Each lcore sizes 2 x maxconn connection slots at start (about 1.2 KiB per maxconn). */
#define PX_MAXCONN_MAX (1ull << 20)
#define PX_BUFFERS_MAX (1ull << 22)
/*
 * The output-chunk pool of an lcore (doc/guides/proxy.md, "Memory"). Every session is
 * owed a share of it in each direction: the pool less its reserve, split over the lcore's
 * sessions, at most PX_QUEUE_MAX and at least PX_QUEUE_MIN bytes. A direction over its
 * share stops reading its source. The reserve is lib/net's (a quarter of the pool, which
 * a connection above its high watermark may not take) plus PX_RESERVE_CHUNKS: when the
 * pool is down to it, the biggest session that waits for its reader is reset, so that
 * lib/net never has to refuse one that reads. Sized by default (--buffers auto) so that
 * every --maxconn session gets PX_QUEUE_MIN each way on one lcore.
 */
#define PX_QUEUE_MAX	      (64u * 1024)
#define PX_QUEUE_MIN	      (16u * 1024)
#define PX_RESERVE_CHUNKS     256u
/* Two directions, each of PX_QUEUE_MIN copied, a partly sent chunk and the receive buffer
 * the relay may hold at its head (a whole chunk as its record: relay_pool.c). */
#define PX_SESSION_CHUNKS     6u
#define PX_BUFFERS_AUTO_MAX   (1ull << 20)
/* The reserve and one session's share: (256 + 6) * 4 / 3 + 1. */
#define PX_BUFFERS_MIN 350u
/*
 * Splice (doc/guides/proxy.md, "How bytes move"). A direction that has moved
 * --splice-threshold bytes (default PX_SPLICE_DEFAULT) in deliveries of PX_SPLICE_MEAN_MIN
 * bytes or more on average is bulk and switches to splice; a window with a smaller mean
 * (requests and replies) starts the count again, so a long-lived connection of small
 * messages never splices (a splice costs two ops per burst where a receive costs one
 * completion). Bounds of the option: PX_SPLICE_MIN..PX_SPLICE_MAX.
 */
#define PX_SPLICE_DEFAULT  (256u * 1024)
#define PX_SPLICE_MEAN_MIN 2048u
#define PX_SPLICE_MIN	   4096ull
#define PX_SPLICE_MAX	   (1ull << 40)
/* A session that has waited this long for its reader may be reset to refill the reserve. */
#define PX_STALL_NS (200ull * 1000 * 1000)

enum px_balance {
	PX_ROUNDROBIN = 0,
	PX_LEASTCONN,
	PX_SOURCE,
};

/* One backend as a settings source lists it. */
struct px_backend_conf {
	struct cr_net_addr addr;
	unsigned weight;
	char host[PX_NAME_LEN]; /* the host as given ("localhost", "10.0.0.1"); "": unknown */
	bool tls;		/* --backend-tls applies (a --backend, not an SNI route's) */
	char sni[PX_NAME_LEN];	/* ,sni=NAME: its --backend-tls name; "": the default */
};

/* Everything --config and the command line set (SNI passthrough's: passthrough.h). */
struct px_conf {
	struct cr_net_addr listen; /* len 0: not given */
	enum px_balance balance;
	struct px_backend_conf backends[PX_MAX_BACKENDS];
	unsigned n_backends;
	double connect_timeout; /* seconds */
	unsigned retries;	/* further backends tried after the first */
	double check_interval;	/* 0: no active checks (and no passive marking) */
	double check_timeout;	/* 0: min(connect_timeout, check_interval) */
	unsigned rise, fall;
	double client_timeout, server_timeout; /* idle; 0 = never */
	unsigned long long maxconn;
	unsigned long long chunks; /* lib/net output chunks per lcore; 0: auto */
	char session_log[4096];	   /* --session-log PATH; "" is off */
	unsigned long long splice_threshold; /* --splice-threshold BYTES; 0 is off */
};

/* The settings, written by the options' setters (config.c), read by main.c. */
extern struct px_conf px_conf;
/* The options (cr_app's table); every long option is a --config key too. */
#define PX_N_OPTIONS 15
extern const struct cr_opt px_options[PX_N_OPTIONS];
void px_conf_defaults(struct px_conf *c);
/*
 * After the options: add the command line's backends to the file's and check that
 * --listen and a backend were given. @return 0, or -EINVAL after one line on stderr.
 */
int px_conf_finish(void);
/*
 * SIGHUP: read --config's backend lines again (other keys are skipped; a bad line is
 * reported and changes nothing) and apply them with the command line's. @p n_backends
 * receives how many. @return 0; -ENOENT no backend (or no --config); -ENOSPC more than
 * PX_MAX_BACKENDS; -EINVAL a bad line; -errno the file cannot be read.
 */
int px_conf_reload(unsigned *n_backends);
/*
 * Apply @p plain (the --backend list, marked for --backend-tls) and the SNI routes'
 * backends to the table, then the groups. @return px_backends_apply()'s.
 */
int px_apply_all(struct px_backend_conf *plain, unsigned n);
/*
 * "HOST:PORT[,weight=N]" as --backend takes it, or "HOST:PORT weight N" as a backend line
 * of --config has it. A bad weight is named with cr_opt_bad_part().
 */
int px_backend_parse(const char *v, struct px_backend_conf *out);
int px_balance_parse(const char *v, enum px_balance *out);
const char *px_balance_name(enum px_balance b);

/* ---- the backend table (backend.c) ---- */

struct px_slot {
	/* Set once before `used` is published; then read-only. */
	struct cr_net_addr addr;
	char name[PX_NAME_LEN];
	uint64_t hash;	   /* of name, for source balancing */
	struct cr_tls_ctx *tls; /* --backend-tls: this backend's client context; NULL: plain */
	_Atomic bool used; /* release: after addr/name/hash; pairs with acquire readers */
	_Atomic bool in_config;
	_Atomic unsigned weight;
	_Atomic bool up;
	_Atomic unsigned fails; /* consecutive failures: checks and connects */
	_Atomic unsigned oks;	/* consecutive check successes */
	_Atomic uint64_t transitions;
	bool check_inflight; /* main lcore only */
};

/* Counters of one backend on one lcore, written by that lcore only. */
struct px_bcount {
	_Atomic uint64_t active;    /* a gauge: server connections open or connecting */
	_Atomic uint64_t conns;	    /* connections established */
	_Atomic uint64_t fails;	    /* connect failures (refused, timed out, ...) */
	_Atomic uint64_t bytes_in;  /* from the backend */
	_Atomic uint64_t bytes_out; /* to the backend */
};

struct px_lcore_counts {
	_Alignas(64) struct px_bcount b[PX_MAX_BACKENDS];
};

extern struct px_slot px_slots[PX_MAX_BACKENDS];
extern struct px_lcore_counts px_counts[CR_MAX_LCORES];

#define PX_ADD(lcore, slot, field, v)                                                     \
	atomic_store_explicit(                                                            \
	    &px_counts[lcore].b[slot].field,                                              \
	    atomic_load_explicit(&px_counts[lcore].b[slot].field, memory_order_relaxed) + \
		(uint64_t)(v),                                                            \
	    memory_order_relaxed)

/*
 * Make the table hold exactly @p n backends (weights included): new addresses get slots,
 * addresses not listed leave the configuration (their live connections go on). Control
 * path, one caller at a time. @return 0, or -ENOSPC when more than PX_MAX_BACKENDS
 * distinct addresses would have been seen (nothing changed), or px_backend_tls_make()'s
 * error for a new one (the configuration unchanged).
 */
int px_backends_apply(const struct px_backend_conf *b, unsigned n);
/* The slot of @p a, or -1 (control path). */
int px_slot_find(const struct cr_net_addr *a);
/* Per-lcore chooser state. */
struct px_chooser {
	int64_t cur[PX_MAX_BACKENDS]; /* smooth weighted round robin */
	unsigned rot;
};
/*
 * Choose a backend for a client at @p client, among those up, in the configuration,
 * of weight > 0 and not in @p tried (a bit per slot). On the calling lcore.
 * @return a slot, or -1 when there is none.
 */
int px_choose(struct px_chooser *ch, enum px_balance bal, const struct cr_net_addr *client,
	      uint64_t tried);
/* A connect to @p slot failed / succeeded (any lcore). */
void px_backend_failed(int slot);
/* A TLS connect to @p slot failed for @p why: one log line naming the backend. */
void px_backend_tls_failed(int slot, const char *why);
void px_backend_connected(int slot);

extern bool px_marking; /* checks on: failures may mark a backend down */
extern unsigned px_fall, px_rise;
extern unsigned px_lcore_ids[CR_MAX_LCORES];
extern unsigned px_n_lcores;

/* A backend's counters summed over the lcores (any thread; relaxed loads). */
struct px_btotal {
	uint64_t active, conns, fails, bytes_in, bytes_out;
};
void px_backend_totals(unsigned slot, struct px_btotal *t);
/* Slots assigned so far: [0, n) (any thread). */
unsigned px_backends_used(void);

/* Start the active checks on the calling (main) lcore. */
int px_checks_start(uint64_t interval_ns, uint64_t timeout_ns);
void px_checks_stop(void);
/* The /backends telemetry command, and the Prometheus series (metrics.c). */
int px_telemetry_register(void);
int px_metrics_register(void);
/* The connect-time histogram (telemetry id): connects that succeeded. */
extern int px_hist_connect;
extern enum px_balance px_balance_mode;

/* ---- TLS to the backends (backend_tls.c) ---- */

/* What the --backend-tls options set; strings are borrowed from the command line. */
struct px_backend_tls {
	bool on; /* --backend-tls */
	bool any; /* one of the others was given */
	const char *ca_file, *sni, *protocols, *ciphers, *ciphersuites;
	enum cr_tls_verify verify;
};
extern struct px_backend_tls px_btls;
#define PX_N_BTLS_OPTIONS 7
extern const struct cr_opt px_backend_tls_options[PX_N_BTLS_OPTIONS];
/* After the options: -EINVAL (after one line) for --backend-tls-* (or a backend's sni)
 * without --backend-tls. */
int px_backend_tls_check(void);
/* A host name or an IP address, as --backend-tls-sni and ,sni= take. */
bool px_tls_name_ok(const char *v);
/*
 * The client context of backend @p b, into *@p out (NULL without --backend-tls). Control
 * path. @return 0, or -errno after one line on stderr naming the file or value.
 */
int px_backend_tls_make(const struct px_backend_conf *b, struct cr_tls_ctx **out);
/* After the runtime stopped: free every slot's context. */
void px_backend_tls_fini(void);

/* ---- relay (relay.c) ---- */

struct px_relay_conf {
	enum px_balance balance;
	uint64_t connect_timeout_ns;
	unsigned retries;
	uint64_t client_idle_ns, server_idle_ns;
	uint64_t maxconn;
	uint64_t retire_timeout_ns; /* how long a retiring lcore waits for its sessions */
	uint64_t chunks;	    /* output chunks per lcore */
	uint32_t chunk_size;	    /* bytes each */
	uint64_t sni_timeout_ns;    /* --sni-timeout */
	uint64_t splice_threshold;  /* --splice-threshold: bulk bytes before splicing; 0 off */
};
/* --buffers auto: the chunks per lcore for @p maxconn sessions. */
uint64_t px_buffers_auto(uint64_t maxconn);
/* The connection options of both sides of a session (watermarks: see PX_QUEUE_MIN). */
void px_conn_opts(struct cr_conn_opts *o);

extern const struct cr_conn_ops px_client_ops;
extern const struct cr_conn_ops px_passthrough_ops; /* --sni-listen's clients */
extern struct px_relay_conf px_relay;
/*
 * Register the per-lcore relay state (an lcore-local with a slab of @p sessions and
 * @p sniffs ClientHello buffers), before the runtime starts. @return 0 or -errno of
 * cr_lcore_local_register().
 */
int px_relay_register(unsigned sessions, unsigned sniffs);
/*
 * Lcore hooks. start: hold the lcore (a lease) while it serves. retire: stop accepting,
 * and let the lcore go when its last session ends or after retire_timeout_ns. stop: let go.
 */
void px_relay_lcore_start(unsigned lcore);
void px_relay_retire(unsigned lcore);
void px_relay_lcore_stop(unsigned lcore);
/* Sessions alive, over every lcore (any thread). */
uint64_t px_sessions_live(void);

/* ---- the session log (session_log.c) ---- */

/* Why a session ended: the first cause seen wins. */
enum px_end {
	PX_END_NONE = 0,
	PX_END_CLIENT_CLOSED, /* the client's EOF came first */
	PX_END_SERVER_CLOSED, /* the backend's EOF came first */
	PX_END_CLIENT_TIMEOUT,
	PX_END_SERVER_TIMEOUT,
	PX_END_CLIENT_RESET, /* an error on the client's side (a reset, a failed send) */
	PX_END_SERVER_RESET,
	PX_END_CONNECT_FAILED, /* every backend tried failed to connect */
	PX_END_NO_BACKEND,     /* none to try (all down, or no local resources) */
	PX_END_RETIRE,	       /* closed by the retire of its lcore */
	PX_END_SHUTDOWN,       /* closed by the process's stop */
	PX_END_NOBUFS,	       /* reset to refill the output pool, or a send refused */
	PX_END_COUNT,
};

/* What a session's line says, gathered on its lcore (turn clock, ns). */
struct px_slog {
	struct cr_net_addr front;	  /* the address the client connected to */
	int64_t accept_sec;		  /* wall clock at accept */
	unsigned accept_ms;
	uint64_t start_ns, admit_ns;	  /* accepted; admitted under --maxconn */
	uint64_t connect_ns, connected_ns; /* the last connect began; it succeeded (0: no) */
	uint64_t c2s, s2c;		  /* bytes relayed client -> backend, backend -> client */
	enum px_end end;
};

extern int px_session_log_id; /* lib/eal log file id; 0: off */
/* Open --session-log's file. @return 0 or -errno of cr_log_file_open(). */
int px_session_log_open(const char *path);
void px_session_log_reopen(void); /* SIGUSR1 */
void px_session_log_close(void);
const char *px_end_name(enum px_end e);
/* A session accepted on @p cli begins at @p now_ns. */
void px_slog_begin(struct px_slog *l, struct cr_conn *cli, uint64_t now_ns);
/* Write its line, at its end. On its lcore. */
void px_slog_write(const struct px_slog *l, const struct cr_net_addr *peer, int slot,
		   uint64_t now_ns);

/* App counters (telemetry ids). */
extern int px_ctr_sessions, px_ctr_connect_fail, px_ctr_no_backend, px_ctr_nobufs,
    px_ctr_maxconn_waits, px_ctr_splices, px_ctr_splice_bytes, px_ctr_splice_nopipe;

#endif /* PROXY_H */
