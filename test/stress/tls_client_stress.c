/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Seeded stress of lib/tls's client side with exact counts, on real threads and the
 * backend named by $CR_UT_DRIVER: every lcore at once makes a seeded sequence of client
 * connections to a TLS listener of the same process, each with the good client context
 * (our CA, "localhost") or the bad one (another CA), one after the other per lcore, both
 * contexts shared by every lcore.
 *
 * Exact: a good connection opens, echoes and closes cleanly; a bad one is refused in its
 * handshake (on_close(-EPROTO), cr_tls_failure() naming the unknown CA, no on_open); on
 * each lcore every good connection after its first resumes the session that lcore kept
 * (a refused one in between changes nothing), so resumed = goods - 1 per lcore with a
 * good one; the server opened exactly the good ones; no connection is left.
 *
 * Usage: tls_client_stress [SEED [CONNECTIONS_PER_LCORE]]
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cr_net.h"
#include "cr_reactor.h"
#include "cr_tls.h"
#include "ut_certs.h"
#include "ut_driver.h"

#define PING "stress ping"

static unsigned seed, per_lcore = 200;
static int failures;

#define CHECK(cond, ...)                                                                \
	do {                                                                            \
		if (!(cond)) {                                                          \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                   \
			fprintf(stderr, " (seed %u)\n", seed);                          \
			failures++;                                                     \
		}                                                                       \
	} while (0)

/* Written by its lcore only while running; read after the run (the runtime's join). */
struct lstate {
	unsigned id;
	uint64_t rng;
	unsigned started, done;
	unsigned goods, bads; /* started of each kind */
	unsigned opens, echoes, resumed, refused, wrong_reason, other;
	bool cur_good;
};

static struct lstate ls[CR_MAX_LCORES];
static unsigned n_lcores;
static struct cr_tls_ctx *srv_ctx, *good_ctx, *bad_ctx;
static struct cr_listener *listener;
static struct cr_net_addr addr;
static _Atomic unsigned srv_opens, srv_closes, lcores_done;
static struct cr_poller *check_poller;
static struct cr_eal_config cfg;
static struct cr_lcore_table table;

static uint64_t
next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* ---- the server: echo ---- */

static void
srv_open(struct cr_conn *c)
{
	(void)c;
	atomic_fetch_add(&srv_opens, 1);
}

static void
srv_data(struct cr_conn *c, const void *d, size_t n)
{
	(void)cr_conn_send(c, d, n);
}

static void
srv_close(struct cr_conn *c, int err)
{
	(void)c;
	(void)err;
	atomic_fetch_add(&srv_closes, 1);
}

static const struct cr_conn_ops srv_ops = {
    .on_open = srv_open, .on_data = srv_data, .on_close = srv_close};

/* ---- the clients, one sequence per lcore ---- */

static void connect_next(struct lstate *l);

static void
cli_open(struct cr_conn *c)
{
	struct lstate *l = cr_conn_arg(c);

	l->opens++;
	l->resumed += cr_tls_resumed(c);
	if (cr_conn_send(c, PING, strlen(PING)) != 0)
		l->other++;
}

static void
cli_data(struct cr_conn *c, const void *d, size_t n)
{
	struct lstate *l = cr_conn_arg(c);

	if (n == strlen(PING) && memcmp(d, PING, n) == 0)
		l->echoes++;
	cr_conn_close(c);
}

static void
cli_close(struct cr_conn *c, int err)
{
	struct lstate *l = cr_conn_arg(c);
	char why[256];

	if (l->cur_good && err != 0)
		l->other++;
	if (!l->cur_good) {
		const char *f = cr_tls_failure(c, why, sizeof(why));

		if (err == -EPROTO)
			l->refused++;
		else
			l->other++;
		if (f == NULL || strstr(f, "unable to get local issuer certificate") == NULL)
			l->wrong_reason++;
	}
	l->done++;
	connect_next(l);
}

static const struct cr_conn_ops cli_ops = {
    .on_open = cli_open, .on_data = cli_data, .on_close = cli_close};

static void
connect_next(struct lstate *l)
{
	struct cr_conn_opts o = {0};

	if (l->started == per_lcore) {
		atomic_fetch_add(&lcores_done, 1);
		return;
	}
	l->started++;
	/* One in four refused. */
	l->cur_good = next_rand(&l->rng) % 4 != 0;
	if (l->cur_good)
		l->goods++;
	else
		l->bads++;
	cr_tls_conn_opts(&o, l->cur_good ? good_ctx : bad_ctx);
	if (cr_tcp_connect(&addr, 5000000000ull, &o, &cli_ops, l) == NULL) {
		l->other++;
		l->done++;
		atomic_fetch_add(&lcores_done, 1); /* this sequence stops here */
	}
}

static void
lcore_begin(void *arg)
{
	connect_next(arg);
}

static uint64_t
open_conns(void)
{
	struct cr_net_stats st;
	uint64_t n = 0;
	unsigned i;

	for (i = 0; i < n_lcores; i++)
		if (cr_net_stats(ls[i].id, &st) == 0)
			n += st.conns;
	return n;
}

static int
all_done(void *arg)
{
	(void)arg;
	if (atomic_load(&lcores_done) < n_lcores ||
	    atomic_load(&srv_closes) != atomic_load(&srv_opens) || open_conns() != 0)
		return 0;
	cr_poller_unregister(&check_poller);
	cr_listener_close(listener, NULL, NULL);
	cr_reactor_stop();
	return 0;
}

static void
start(void *arg)
{
	struct cr_tcp_listen_opts lo = {0};
	unsigned i;

	(void)arg;
	(void)cr_net_addr_parse("127.0.0.1:0", &lo.addr);
	cr_tls_conn_opts(&lo.conn, srv_ctx);
	if (cr_tcp_listen(&lo, &srv_ops, NULL, &listener) != 0) {
		CHECK(0, "listen");
		cr_reactor_stop();
		return;
	}
	cr_listener_addr(listener, &addr);
	for (i = 0; i < n_lcores; i++)
		CHECK(cr_send(ls[i].id, lcore_begin, &ls[i]) == 0, "start lcore %u", ls[i].id);
	check_poller = cr_poller_register(all_done, NULL, 5000000ull);
	CHECK(check_poller != NULL, "poller");
}

static void
watchdog(int sig)
{
	(void)sig;
	fprintf(stderr, "FAIL: tls_client_stress did not finish within 240 s (seed %u)\n", seed);
	_exit(1);
}

static struct cr_tls_ctx *
ctx_of(const struct cr_tls_config *cfg)
{
	char err[256];
	struct cr_tls_ctx *c = cr_tls_ctx_new(cfg, err, sizeof(err));

	if (c == NULL) {
		fprintf(stderr, "context: %s\n", err);
		exit(1);
	}
	return c;
}

int
main(int argc, char **argv)
{
	struct cr_tls_cert cert;
	struct cr_tls_config sc = {0}, gc = {0}, bc = {0};
	unsigned i, goods = 0;
	char err[256];

	seed = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 1;
	if (argc > 2)
		per_lcore = (unsigned)strtoul(argv[2], NULL, 10);
	printf("tls_client_stress: seed %u, %u connections per lcore, driver %s\n", seed, per_lcore,
	       ut_driver_uring() ? "uring" : "epoll");
	signal(SIGPIPE, SIG_DFL);
	ut_require_driver();
	cr_eal_config_defaults(&cfg);
	cfg.io_driver = ut_driver();
	cfg.shutdown_timeout = 5;
	if (cr_eal_lcore_table(&cfg, &table, err, sizeof(err)) != 0) {
		fprintf(stderr, "lcore table: %s\n", err);
		return 1;
	}
	if (ut_certs_make("tls_client_stress") != 0)
		return 1;
	cert.cert_file = ut_cert;
	cert.key_file = ut_key;
	sc.certs = &cert;
	sc.n_certs = 1;
	srv_ctx = ctx_of(&sc);
	gc.client = bc.client = true;
	gc.verify = bc.verify = CR_TLS_VERIFY_REQUIRED;
	gc.server_name = bc.server_name = "localhost";
	gc.ca_file = ut_ca;
	bc.ca_file = ut_other_ca;
	good_ctx = ctx_of(&gc);
	bad_ctx = ctx_of(&bc);
	n_lcores = table.n;
	for (i = 0; i < n_lcores; i++) {
		ls[i].id = table.lcores[i].lcore_id;
		ls[i].rng = ((uint64_t)seed << 32 | (i + 1)) * 0x9e3779b97f4a7c15ull | 1;
	}
	signal(SIGALRM, watchdog);
	alarm(240);
	if (cr_reactor_init(&cfg, &table, NULL) != 0 ||
	    cr_send(cr_lcore_main(), start, NULL) != 0 || cr_reactor_run() != 0) {
		fprintf(stderr, "FAIL: the runtime did not run (seed %u)\n", seed);
		return 1;
	}
	cr_reactor_fini();
	alarm(0);
	for (i = 0; i < n_lcores; i++) {
		const struct lstate *l = &ls[i];

		printf("lcore %u: %u good (%u resumed), %u refused\n", l->id, l->goods, l->resumed,
		       l->refused);
		CHECK(l->done == per_lcore, "lcore %u: %u of %u done", l->id, l->done, per_lcore);
		CHECK(l->opens == l->goods && l->echoes == l->goods,
		      "lcore %u: %u opens, %u echoes, "
		      "%u good",
		      l->id, l->opens, l->echoes, l->goods);
		CHECK(l->refused == l->bads && l->wrong_reason == 0,
		      "lcore %u: %u refused of %u, "
		      "%u with another reason",
		      l->id, l->refused, l->bads, l->wrong_reason);
		CHECK(l->resumed == (l->goods > 0 ? l->goods - 1 : 0), "lcore %u: %u resumed of %u",
		      l->id, l->resumed, l->goods);
		CHECK(l->other == 0, "lcore %u: %u unexpected ends", l->id, l->other);
		goods += l->goods;
	}
	CHECK(atomic_load(&srv_opens) == goods, "server opened %u, %u good",
	      atomic_load(&srv_opens), goods);
	cr_tls_ctx_free(good_ctx);
	cr_tls_ctx_free(bad_ctx);
	cr_tls_ctx_free(srv_ctx);
	ut_tmpdir_remove();
	if (failures == 0)
		printf("tls_client_stress: PASS\n");
	return failures == 0 ? 0 : 1;
}
