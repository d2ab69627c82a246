/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cr-kv: an in-memory key-value server speaking RESP2 (Redis's protocol), with the
 * keyspace sharded across lcores by key hash. See kv.h for the routing model and
 * doc/guides/kv.md for what multi-key commands guarantee across shards.
 *
 * Ready when it prints "cr-kv: listening on ADDR ..."; SIGINT or SIGTERM stops it
 * gracefully within --shutdown-timeout, a second signal at once (cr_app_run()).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <stdatomic.h>

#include "cr_app.h"
#include "cr_net.h"
#include "cr_reactor.h"
#include "cr_telemetry.h"
#include "cr_tls.h"
#include "kv.h"
#include "script.h"

static struct {
	struct cr_net_addr listen;
	struct cr_net_config net;
	struct cr_listener *listener;
	struct cr_net_addr bound;
	struct cr_tls_app tls; /* --tls-listen: RESP over TLS (redis-cli --tls) */
} app;

/* ---- lcores ---- */

static int
lcore_init(unsigned lcore, void *arg)
{
	(void)arg;
	return kv.shards[lcore] != NULL ? kv_shard_start(lcore) : 0;
}

static void
lcore_stop(unsigned lcore, void *arg)
{
	(void)arg;
	if (kv.shards[lcore] != NULL)
		kv_shard_stop(lcore);
}

/* A shutdown: the clients blocked here get their answer (the null reply) before they
 * are closed; no shard move starts from now (one not given yet is cancelled, one given
 * ends), and each shard stays with its owner until it stops (shardmove.c); the scripts
 * running here stop (kv_script_closing()). */
static void
shutdown_hook(unsigned lcore, void *arg)
{
	(void)arg;
	kv_script_closing(lcore, true);
	if (kv.shards[lcore] == NULL)
		return;
	kv_clients_closing(kv.shards[lcore]);
	kv_move_shutdown(lcore);
}

/* A closing lcore does not close while it has shard-move messages to send: a marker the
 * mover waits for, a message forwarded to a shard's owner (shardmove.c). */
static bool
lcore_busy(unsigned lcore, bool forced, void *arg)
{
	(void)arg;
	return !forced && kv.shards[lcore] != NULL && kv_move_busy(lcore);
}

/* The shards this lcore owns go to lcores that stay (shardmove.c); it stays until they
 * have. Its clients are closed at their boundary, as in a shutdown; its scripts that did
 * not write stop (kv_script_closing()). */
static void
retire_hook(unsigned lcore, void *arg)
{
	(void)arg;
	kv_script_closing(lcore, false);
	if (kv.shards[lcore] == NULL)
		return;
	kv_clients_closing(kv.shards[lcore]);
	kv_move_retire(lcore);
}

static int
shards_create(void)
{
	const struct cr_lcore_table *t = cr_app_lcore_table();
	unsigned i;

	/* Shards outlive an lcore's incarnation (a retired lcore keeps its keys), so they are
	 * not lcore-locals: one per lcore of the table, for the life of the process. */
	kv.nshards = t->n;
	for (i = 0; i < t->n; i++) {
		unsigned id = t->lcores[i].lcore_id;
		struct kv_shard *sh = cr_numa_zalloc(sizeof(*sh), t->lcores[i].numa_node);

		if (sh == NULL)
			return -ENOMEM;
		kv.shard_lcore[i] = id;
		kv.shards[id] = sh;
		sh->lcore = id;
		sh->index = i;
		sh->rng = 0x9E3779B97F4A7C15ULL ^ (uint64_t)(id + 1) * 0xBF58476D1CE4E5B9ULL;
		sh->crng = sh->rng ^ 0x94D049BB133111EBULL;
		atomic_store_explicit(&sh->owner, id, memory_order_relaxed); /* before start */
		sh->args_cap = 16;
		sh->args = malloc(sizeof(*sh->args) * sh->args_cap);
		sh->store = kv_store_create();
		if (sh->args == NULL || sh->store == NULL)
			return -ENOMEM;
		rb_init(&sh->batch, NULL, 0);
	}
	kv_move_init(kv.nshards, kv.shard_lcore, t->main_lcore);
	return 0;
}

static int
shards_destroy(bool failed, void *arg)
{
	unsigned i;

	(void)failed;
	(void)arg;
	for (i = 0; i < CR_MAX_LCORES; i++) {
		struct kv_shard *sh = kv.shards[i];

		if (sh == NULL)
			continue;
		kv_store_destroy(sh->store);
		kv_slowlog_fini(&sh->slowlog);
		free(sh->args);
		rb_fini(&sh->batch);
		cr_numa_free(sh);
		kv.shards[i] = NULL;
	}
	return 0;
}

/* ---- start ---- */

static int
start(void *arg)
{
	struct cr_tcp_listen_opts lo = {0};
	char a[CR_NET_ADDR_STRLEN], cl[256];
	unsigned n;
	int rc;

	(void)arg;
	lo.addr = app.listen;
	rc = cr_tcp_listen(&lo, &kv_conn_ops, NULL, &app.listener);
	if (rc != 0)
		return cr_app_errorf(rc, "--listen %s: %s",
				     cr_net_addr_format(&app.listen, a, sizeof(a)),
				     cr_strerror(rc));
	cr_listener_addr(app.listener, &app.bound);
	kv.port = cr_net_addr_port(&app.bound);
	rc = cr_tls_app_listen(&app.tls, NULL, &kv_conn_ops, NULL, cl, sizeof(cl));
	if (rc != 0)
		return cr_app_errorf(rc, "%s", cl);
	n = cr_lcore_count();
	printf("cr-kv: listening on %s (resp), %u lcore%s (%s), %u shard%s, io driver %s\n",
	       cr_net_addr_format(&app.bound, a, sizeof(a)), n, n == 1 ? "" : "s",
	       cr_lcore_table_corelist(cr_app_lcore_table(), cl, sizeof(cl)), kv.nshards,
	       kv.nshards == 1 ? "" : "s", cr_reactor_driver());
	cr_tls_app_ready_line(&app.tls, "cr-kv", "resp over tls");
	fflush(stdout);
	return 0;
}

/* The first SIGINT/SIGTERM, on the main lcore: the TLS key rotation timer goes first. */
static void
stop(void *arg)
{
	(void)arg;
	cr_tls_app_close(&app.tls);
	cr_reactor_stop();
}

static void
tls_reload(void *arg)
{
	(void)arg;
	cr_tls_app_reload(&app.tls, "cr-kv");
}

static int
fini(bool failed, void *arg)
{
	int rc;

	cr_tls_app_fini(&app.tls);
	rc = shards_destroy(failed, arg);
	kv_auth_fini(); /* no lcore reads the password now */
	kv_sc_fini();	/* nor the script cache */
	return rc;
}

static int
telemetry_counters(void)
{
	int rc;

	kv.tel_cmds = cr_telemetry_counter_register("kv_commands", CR_TELEMETRY_COUNTER,
						    "commands run (parsed on this lcore)");
	kv.tel_remote = cr_telemetry_counter_register(
	    "kv_remote_parts", CR_TELEMETRY_COUNTER,
	    "command parts handed to the lcore owning the key (cr_call)");
	kv.tel_proto = cr_telemetry_counter_register("kv_protocol_errors", CR_TELEMETRY_COUNTER,
						     "clients closed for a protocol error");
	kv.tel_qbuf = cr_telemetry_counter_register(
	    "kv_qbuf_limit_closed", CR_TELEMETRY_COUNTER,
	    "clients closed for a query buffer over --client-query-buffer-limit");
	kv.tel_rejected = cr_telemetry_counter_register("kv_rejected", CR_TELEMETRY_COUNTER,
							"connections refused over --maxclients");
	kv.tel_expired = cr_telemetry_counter_register("kv_expired_active", CR_TELEMETRY_COUNTER,
						       "keys removed by active expiry");
	kv.tel_moved = cr_telemetry_counter_register(
	    "kv_clients_moved_in", CR_TELEMETRY_COUNTER,
	    "clients that came here from a retiring lcore, connection and state");
	kv.tel_reblocked = cr_telemetry_counter_register(
	    "kv_blocked_moved_in", CR_TELEMETRY_COUNTER,
	    "of those, clients blocked in BLPOP or its kind, blocked again here");
	kv.tel_psfwd = cr_telemetry_counter_register(
	    "kv_pubsub_forwarded", CR_TELEMETRY_COUNTER,
	    "messages delivered here for a subscriber that had moved away, forwarded to it");
	kv.tel_moved_out = cr_telemetry_counter_register_prom(
	    "kv_shards_moved_out", CR_TELEMETRY_COUNTER,
	    "Shards handed from this lcore to another (a retire, or a hand-back).",
	    &(struct cr_telemetry_prom){"kv_shards_moved_out"});
	kv.tel_moved_in = cr_telemetry_counter_register_prom(
	    "kv_shards_moved_in", CR_TELEMETRY_COUNTER,
	    "Shards this lcore took over from another (a retire, or a hand-back).",
	    &(struct cr_telemetry_prom){"kv_shards_moved_in"});
	if (kv.tel_cmds < 0 || kv.tel_remote < 0 || kv.tel_proto < 0 || kv.tel_qbuf < 0 ||
	    kv.tel_rejected < 0 || kv.tel_expired < 0 || kv.tel_moved < 0 ||
	    kv.tel_reblocked < 0 || kv.tel_psfwd < 0 || kv.tel_moved_out < 0 ||
	    kv.tel_moved_in < 0)
		return cr_app_errorf(-ENOSPC, "telemetry counters: %s", cr_strerror(-ENOSPC));
	rc = kv_metrics_register();
	if (rc != 0)
		return cr_app_errorf(rc, "telemetry series: %s", cr_strerror(rc));
	return 0;
}

/* After the options: lib/net's sizing, the shards, the counters. */
static int
configure(int argc, char **argv, void *arg)
{
	char err[512];
	int rc;

	(void)argc;
	(void)argv;
	(void)arg;
	rc = cr_tls_app_configure(&app.tls, NULL, err, sizeof(err));
	if (rc != 0)
		return cr_app_errorf(rc, "%s", err);
	/* Connection slots per lcore: enough for every client on one lcore, plus the ones
	 * refused with an error (they hold a slot until closed). */
	app.net.max_conns =
	    (uint32_t)(kv.maxclients + 64 < (1u << 24) ? kv.maxclients + 64 : (1u << 24));
	/* 64 MiB of output per lcore. A connection holds at most a slice of it (outq.c), its
	 * big replies wait in its own memory; lib/net keeps the last quarter for connections
	 * under their high watermark, so slow readers, however many, cannot take it all. */
	app.net.chunks = 4096;
	/* What the descriptors must hold is maxclients (and the refused ones), not that on
	 * every lcore. */
	cr_app_conns_limit(kv.maxclients + 64);
	rc = shards_create();
	if (rc == 0)
		rc = telemetry_counters();
	if (rc != 0) {
		shards_destroy(true, NULL);
		return rc == -ENOMEM ? cr_app_errorf(rc, "%s", cr_strerror(rc)) : rc;
	}
	return 0;
}

/* ---- options ---- */

static int
set_maxclients(const char *v, void *ctx)
{
	(void)ctx;
	return cr_parse_uint(v, 1, 1u << 24, &kv.maxclients);
}

/* --maxmemory and the eviction settings (evict.h): ctx is the KV_MP_* index. */
static int
set_memparam(const char *v, void *ctx)
{
	unsigned i = (unsigned)(uintptr_t)ctx;
	unsigned long long n;
	const char *msg;

	if (kv_memparam_parse(i, v, &n, &msg) != 0)
		return -EINVAL;
	kv_memparam_apply(i, n);
	return 0;
}

static int
set_max_bulk(const char *v, void *ctx)
{
	unsigned long long n;

	(void)ctx;
	if (kv_parse_bytes(v, 1024 * 1024, (unsigned long long)INT64_MAX, &n) != 0)
		return -EINVAL;
	kv.max_bulk = (long long)n;
	return 0;
}

static int
set_maxmemory_clients(const char *v, void *ctx)
{
	long long n;

	(void)ctx;
	if (kv_parse_maxmemory_clients(v, &n) != 0)
		return -EINVAL;
	atomic_store_explicit(&kv.maxmemory_clients, n, memory_order_relaxed);
	return 0;
}

static int
set_obuf_limit(const char *v, void *ctx)
{
	unsigned long long l[3];
	const char *msg;

	(void)ctx;
	if (kv_parse_obuf_limit(v, l, &msg) != 0)
		return -EINVAL;
	atomic_store_explicit(&kv.obuf_hard, l[0], memory_order_relaxed);
	atomic_store_explicit(&kv.obuf_soft, l[1], memory_order_relaxed);
	atomic_store_explicit(&kv.obuf_soft_secs, l[2], memory_order_relaxed);
	return 0;
}

static int
set_slowlog(const char *v, bool max_len)
{
	const char *msg;
	long long n;

	if (kv_parse_slowlog(v, max_len, &n, &msg) != 0)
		return -EINVAL;
	if (max_len)
		kv_slowlog_set_max_len(n);
	else
		atomic_store_explicit(&kv_slowlog_slower_than, n, memory_order_relaxed);
	return 0;
}

static int
set_lua_time_limit(const char *v, void *ctx)
{
	const char *msg;
	long long n;

	(void)ctx;
	if (kv_parse_slowlog(v, true, &n, &msg) != 0)
		return -EINVAL;
	atomic_store_explicit(&kv_lua_time_limit, n, memory_order_relaxed);
	return 0;
}

static int
set_slowlog_slower(const char *v, void *ctx)
{
	(void)ctx;
	return set_slowlog(v, false);
}

static int
set_slowlog_len(const char *v, void *ctx)
{
	(void)ctx;
	return set_slowlog(v, true);
}

static int
set_requirepass(const char *v, void *ctx)
{
	(void)ctx;
	return kv_auth_set(v, strlen(v));
}

static int
set_protected_mode(const char *v, void *ctx)
{
	(void)ctx;
	if (strcasecmp(v, "yes") == 0)
		atomic_store_explicit(&kv_protected_mode, true, memory_order_relaxed);
	else if (strcasecmp(v, "no") == 0)
		atomic_store_explicit(&kv_protected_mode, false, memory_order_relaxed);
	else
		return -EINVAL;
	return 0;
}

static int
set_retire_grace(const char *v, void *ctx)
{
	unsigned long long n;

	(void)ctx;
	if (cr_parse_uint(v, 0, 3600, &n) != 0)
		return -EINVAL;
	kv.closing_grace_s = (unsigned)n;
	return 0;
}

static int
set_qbuf_limit(const char *v, void *ctx)
{
	(void)ctx;
	return kv_parse_bytes(v, 1024 * 1024, 1ULL << 40, &kv.qbuf_limit);
}

/* 32 hex digits: the key of the keyed hash, for reproducing a layout (tests). */
static int
set_hash_seed(const char *v, void *ctx)
{
	uint8_t key[16];
	unsigned i;

	(void)ctx;
	if (strlen(v) != 32 || strspn(v, "0123456789abcdefABCDEF") != 32)
		return -EINVAL;
	for (i = 0; i < 16; i++) {
		char byte[3] = {v[2 * i], v[2 * i + 1], '\0'};

		key[i] = (uint8_t)strtoul(byte, NULL, 16);
	}
	kv_hash_set_key(key);
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct cr_opt opts[] = {
	    CR_APP_OPT_LISTEN(&app.listen, "address to serve (default 127.0.0.1:6379)"),
	    {"maxclients", 0, "N",
	     "client connections at most, over all lcores (default 10000); the next gets "
	     "-ERR max number of clients reached",
	     "1-16777216", set_maxclients, NULL},
	    {"maxmemory", 0, "BYTES",
	     "bound on the keyspace's memory: over it keys are evicted as --maxmemory-policy "
	     "says, or writes refused with -OOM (default 0: no limit; also CONFIG SET)",
	     "a byte count with an optional unit: 100mb, 2gb, 0", set_memparam,
	     (void *)(uintptr_t)KV_MP_MAXMEMORY},
	    {"maxmemory-policy", 0, "POLICY",
	     "what goes over --maxmemory, as Redis 7.0 (default noeviction: writes get -OOM; "
	     "also CONFIG SET)",
	     "volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, "
	     "allkeys-lfu, allkeys-random or noeviction",
	     set_memparam, (void *)(uintptr_t)KV_MP_POLICY},
	    {"maxmemory-samples", 0, "N",
	     "keys sampled for each eviction pick (default 5; also CONFIG SET)",
	     "an integer from 1 to 2147483647", set_memparam, (void *)(uintptr_t)KV_MP_SAMPLES},
	    {"maxmemory-eviction-tenacity", 0, "N",
	     "time an eviction pass may take before it goes on after other work: 50 us per "
	     "unit up to 10, then 15 % more per unit, 100 no limit (default 10; also CONFIG "
	     "SET)",
	     "an integer from 0 to 100", set_memparam, (void *)(uintptr_t)KV_MP_TENACITY},
	    {"lfu-log-factor", 0, "N",
	     "how slowly the LFU counter grows (default 10; also CONFIG SET)",
	     "an integer from 0 to 2147483647", set_memparam, (void *)(uintptr_t)KV_MP_LFU_LOG},
	    {"lfu-decay-time", 0, "MINUTES",
	     "the LFU counter drops by one per this many idle minutes (default 1, 0 never; also "
	     "CONFIG SET)",
	     "an integer from 0 to 2147483647", set_memparam, (void *)(uintptr_t)KV_MP_LFU_DECAY},
	    {"maxmemory-clients", 0, "BYTES|N%",
	     "bound on the memory of every client together (query buffers, replies waiting to "
	     "be read): over it, the client taking the most is closed first, as Redis 7.0's "
	     "client eviction (default 0: no bound; N% is of --maxmemory)",
	     "a byte count with an optional unit (64mb, 0), or a percentage 1%-100%",
	     set_maxmemory_clients, NULL},
	    {"client-output-buffer-limit", 0, "LIMITS",
	     "'normal HARD SOFT SECONDS': close a client whose replies waiting to be read reach "
	     "HARD bytes, or stay over SOFT bytes for more than SECONDS (checked when a reply is "
	     "added, as Redis does, and every 100 ms); 0 turns a bound off (default "
	     "'normal 0 0 0': none, as Redis); subscribers have Redis's 'pubsub 32mb 8mb 60', "
	     "fixed",
	     "the normal class with two byte counts and seconds, e.g. 'normal 256mb 64mb 60'",
	     set_obuf_limit, NULL},
	    {"proto-max-bulk-len", 0, "BYTES",
	     "longest bulk string in a request, and longest value (default 512mb)",
	     "a byte count of at least 1mb, e.g. 512mb", set_max_bulk, NULL},
	    {"client-query-buffer-limit", 0, "BYTES",
	     "close a client whose unprocessed input exceeds this (default 1gb)",
	     "a byte count from 1mb to 1024gb, e.g. 1gb", set_qbuf_limit, NULL},
	    {"slowlog-log-slower-than", 0, "USEC",
	     "log commands that ran this long or longer in the slow log (SLOWLOG GET), as "
	     "Redis; 0 logs every command, -1 none (default 10000; also CONFIG SET)",
	     "an integer from -1 to 9223372036854775807", set_slowlog_slower, NULL},
	    {"slowlog-max-len", 0, "N",
	     "entries the slow log keeps, the newest (default 128; also CONFIG SET)",
	     "an integer from 0 to 9223372036854775807", set_slowlog_len, NULL},
	    {"lua-time-limit", 0, "MS",
	     "a script running longer is busy: the other clients of its lcore get -BUSY and "
	     "SCRIPT KILL may stop it, as Redis (default 5000; also CONFIG SET lua-time-limit "
	     "or busy-reply-threshold)",
	     "an integer from 0 to 9223372036854775807", set_lua_time_limit, NULL},
	    {"requirepass", 0, "PASSWORD",
	     "clients must AUTH (or HELLO ... AUTH default PASSWORD) with it before any other "
	     "command, as Redis (default: none; also CONFIG SET requirepass)",
	     "any string; empty for none", set_requirepass, NULL},
	    {"protected-mode", 0, "yes|no",
	     "with no password set, refuse clients from addresses other than loopback with "
	     "Redis's -DENIED text, as Redis (default yes; also CONFIG SET protected-mode)",
	     "yes or no", set_protected_mode, NULL},
	    {"retire-grace", 0, "SECONDS",
	     "when an lcore retires or shuts down, close its clients still in the middle of a "
	     "request (or not reading their replies) after this long, logged (default 10; 0: "
	     "wait for them)",
	     "0-3600", set_retire_grace, NULL},
	    {"hash-seed", 0, "HEX",
	     "key of the keyed hash that places keys in tables and on shards (default: random "
	     "per process; a fixed one only to reproduce a layout, as tests do)",
	     "32 hex digits (16 bytes)", set_hash_seed, NULL},
	};
	static struct cr_opt all[sizeof(opts) / sizeof(opts[0]) + CR_TLS_APP_N_OPTS];
	static struct cr_app kv_app = {
	    .name = "cr-kv",
	    .summary = "an in-memory key-value server speaking RESP, sharded across lcores",
	    .opts = all,
	    .net = &app.net,
	    .configure = configure,
	    .lcore_init = lcore_init,
	    .start = start,
	    .retire = retire_hook,
	    .shutdown = shutdown_hook,
	    .lcore_stop = lcore_stop,
	    .lcore_busy = lcore_busy,
	    .stop = stop,
	    .reload = tls_reload,
	    .fini = fini,
	};
	unsigned n = sizeof(opts) / sizeof(opts[0]);

	memcpy(all, opts, sizeof(opts));
	cr_tls_app_opts_defaults(&app.tls.o);
	kv_app.n_opts = n + cr_tls_app_opts_table(&app.tls.o, all + n, CR_TLS_APP_N_OPTS);

	kv.maxclients = 10000;
	kv.closing_grace_s = 10;
	kv.max_bulk = 512LL * 1024 * 1024;
	kv.qbuf_limit = 1024ULL * 1024 * 1024;
	kv.start_ms = (uint64_t)kv_now_ms();
	cr_net_addr_parse("127.0.0.1:6379", &app.listen);
	return cr_app_run(&kv_app, argc, argv);
}
