/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The client side of lib/tls (tls_client.c) against its server side, both over real
 * sockets on the real runtime, once per io driver: a client context's connection from
 * cr_tcp_connect() verifies the server (its CA, its name or IP address), sends SNI, and
 * resumes the session its lcore kept; a server of another CA, of another name, of an
 * expired certificate is refused in the handshake, on_close says so and cr_tls_failure()
 * names OpenSSL's reason.
 */
#include <stdatomic.h>

#include <openssl/pem.h>

#include "cr_tls.h"
#include "ut_certs.h"
#include "ut_net.h"

#define PING "ping over TLS"

static char ut_expired[128], ut_expired_key[128];

/* One run: @c n_conns connections in sequence from the main lcore, each sends PING, reads
 * the echo, closes. */
static struct {
	struct cr_tls_ctx *srv_ctx, *cli_ctx;
	struct cr_listener *l;
	struct cr_net_addr addr;
	unsigned n_conns, started;
	/* client side, main lcore */
	unsigned opens, echoes, closes, resumed;
	bool abort; /* end each connection with cr_conn_destroy() (no close_notify) */
	int last_err;
	char failure[256];
	bool failure_null;
	/* server side, any lcore */
	_Atomic unsigned srv_opens, srv_closes;
	char sni[64];
	_Atomic bool sni_none;
} R;

static struct ut_every every;

static void
srv_open(struct cr_conn *c)
{
	const char *n = cr_tls_server_name(c);

	if (n != NULL)
		snprintf(R.sni, sizeof(R.sni), "%s", n);
	else
		atomic_store(&R.sni_none, true);
	atomic_fetch_add(&R.srv_opens, 1);
}

static void
srv_data(struct cr_conn *c, const void *d, size_t n)
{
	CU_ASSERT_EQUAL(cr_conn_send(c, d, n), 0);
}

static void
srv_close(struct cr_conn *c, int err)
{
	(void)c;
	(void)err;
	atomic_fetch_add(&R.srv_closes, 1);
}

static const struct cr_conn_ops srv_ops = {
    .on_open = srv_open, .on_data = srv_data, .on_close = srv_close};

static void connect_one(void);

static void
cli_open(struct cr_conn *c)
{
	R.opens++;
	R.resumed += cr_tls_resumed(c);
	CU_ASSERT_EQUAL(cr_conn_send(c, PING, strlen(PING)), 0);
}

static void
cli_data(struct cr_conn *c, const void *d, size_t n)
{
	if (n == strlen(PING) && memcmp(d, PING, n) == 0)
		R.echoes++;
	if (!R.abort) {
		cr_conn_close(c);
		return;
	}
	cr_conn_destroy(c); /* no on_close: go on from here */
	R.closes++;
	if (R.started < R.n_conns)
		connect_one();
}

static void
cli_close(struct cr_conn *c, int err)
{
	const char *f = cr_tls_failure(c, R.failure, sizeof(R.failure));

	R.failure_null = f == NULL;
	R.closes++;
	R.last_err = err;
	if (R.started < R.n_conns)
		connect_one();
}

static const struct cr_conn_ops cli_ops = {
    .on_open = cli_open, .on_data = cli_data, .on_close = cli_close};

static void
connect_one(void)
{
	struct cr_conn_opts o = {0};

	R.started++;
	cr_tls_conn_opts(&o, R.cli_ctx);
	CU_ASSERT_PTR_NOT_NULL(cr_tcp_connect(&R.addr, 2000000000ull, &o, &cli_ops, NULL));
}

static bool
done(void *arg)
{
	(void)arg;
	if (R.closes < R.n_conns || atomic_load(&R.srv_closes) != atomic_load(&R.srv_opens) ||
	    UT_STAT(conns) != 0)
		return false;
	cr_listener_close(R.l, NULL, NULL);
	cr_reactor_stop();
	return true;
}

static void
run_start(void *arg)
{
	struct cr_tcp_listen_opts lo = ut_listen_opts(false);

	(void)arg;
	cr_tls_conn_opts(&lo.conn, R.srv_ctx);
	CU_ASSERT_EQUAL_FATAL(cr_tcp_listen(&lo, &srv_ops, NULL, &R.l), 0);
	cr_listener_addr(R.l, &R.addr);
	connect_one();
	ut_every(&every, 2, done, NULL);
}

/* The server: localhost/a.test/127.0.0.1 by default, b.test by SNI; or @p cert alone. */
static struct cr_tls_ctx *
server_ctx(const char *cert, const char *key)
{
	struct cr_tls_cert certs[2] = {{ut_cert, ut_key}, {ut_cert_b, ut_key_b}};
	struct cr_tls_config cfg = {.certs = certs, .n_certs = 2};
	char err[256];
	struct cr_tls_ctx *ctx;

	if (cert != NULL) {
		certs[0].cert_file = cert;
		certs[0].key_file = key;
		cfg.n_certs = 1;
	}
	ctx = cr_tls_ctx_new(&cfg, err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	return ctx;
}

static struct cr_tls_ctx *
client_ctx(const char *ca, enum cr_tls_verify verify, const char *name)
{
	struct cr_tls_config cfg = {.client = true,
				    .ca_file = ca,
				    .verify = verify,
				    .server_name = name,
				    .handshake_timeout_ms = 5000};
	char err[256];
	struct cr_tls_ctx *ctx = cr_tls_ctx_new(&cfg, err, sizeof(err));

	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	return ctx;
}

static void
run_opts(struct cr_tls_ctx *srv, struct cr_tls_ctx *cli, unsigned n_conns, bool abort)
{
	memset(&R, 0, sizeof(R));
	R.srv_ctx = srv;
	R.cli_ctx = cli;
	R.n_conns = n_conns;
	R.abort = abort;
	ut_net_run(run_start, NULL, 30000);
	cr_tls_ctx_free(cli);
	cr_tls_ctx_free(srv);
}

static void
run(struct cr_tls_ctx *srv, struct cr_tls_ctx *cli, unsigned n_conns)
{
	run_opts(srv, cli, n_conns, false);
}

/* Verified by its CA and name; SNI sent; every connection after the first resumes the
 * session kept from the one before (a copy: it serves whether or not the server renews). */
static void
test_verified_sni_resumed(void)
{
	run(server_ctx(NULL, NULL), client_ctx(ut_ca, CR_TLS_VERIFY_REQUIRED, "a.test"), 4);
	CU_ASSERT_EQUAL(R.opens, 4);
	CU_ASSERT_EQUAL(R.echoes, 4);
	CU_ASSERT_EQUAL(R.last_err, 0);
	CU_ASSERT_TRUE(R.failure_null);
	CU_ASSERT_STRING_EQUAL(R.sni, "a.test");
	CU_ASSERT_EQUAL(R.resumed, 3);
}

/*
 * Each connection ended abruptly (no close_notify): the next still resumes. The lcore keeps
 * a copy of the session, not the SSL's own, which OpenSSL marks unresumable when that SSL
 * is freed without a shutdown, and which travels with the SSL when the connection moves to
 * another lcore (two lcores then shared one object: a data race).
 */
static void
test_resumed_after_abrupt_end(void)
{
	run_opts(server_ctx(NULL, NULL), client_ctx(ut_ca, CR_TLS_VERIFY_REQUIRED, "a.test"), 4,
		 true);
	CU_ASSERT_EQUAL(R.opens, 4);
	CU_ASSERT_EQUAL(R.echoes, 4);
	CU_ASSERT_EQUAL(R.resumed, 3);
}

/* SNI picks the server's second certificate, which the client then checks. */
static void
test_sni_picks_certificate(void)
{
	run(server_ctx(NULL, NULL), client_ctx(ut_ca, CR_TLS_VERIFY_REQUIRED, "b.test"), 1);
	CU_ASSERT_EQUAL(R.echoes, 1);
	CU_ASSERT_STRING_EQUAL(R.sni, "b.test");
}

/* An IP address is checked against the certificate's and not sent as SNI. */
static void
test_ip_checked_not_sent(void)
{
	run(server_ctx(NULL, NULL), client_ctx(ut_ca, CR_TLS_VERIFY_REQUIRED, "127.0.0.1"), 1);
	CU_ASSERT_EQUAL(R.echoes, 1);
	CU_ASSERT_TRUE(atomic_load(&R.sni_none));
	run(server_ctx(NULL, NULL), client_ctx(ut_ca, CR_TLS_VERIFY_REQUIRED, "127.0.0.2"), 1);
	CU_ASSERT_EQUAL(R.opens, 0);
	CU_ASSERT_EQUAL(R.last_err, -EPROTO);
	CU_ASSERT_PTR_NOT_NULL(strstr(R.failure, "IP address mismatch"));
}

/* A refused server: no on_open, on_close(-EPROTO), and OpenSSL's reason. */
static void
refused(const char *reason)
{
	CU_ASSERT_EQUAL(R.opens, 0);
	CU_ASSERT_EQUAL(R.closes, 1);
	CU_ASSERT_EQUAL(R.last_err, -EPROTO);
	CU_ASSERT_EQUAL(atomic_load(&R.srv_opens), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(R.failure, reason));
	if (strstr(R.failure, reason) == NULL)
		fprintf(stderr, "failure: '%s', wanted '%s'\n", R.failure, reason);
}

static void
test_wrong_ca_refused(void)
{
	run(server_ctx(NULL, NULL), client_ctx(ut_other_ca, CR_TLS_VERIFY_REQUIRED, "localhost"),
	    1);
	refused("certificate verify failed: unable to get local issuer certificate");
}

static void
test_wrong_name_refused(void)
{
	/* c.test: the server answers with its default certificate, of other names. */
	run(server_ctx(NULL, NULL), client_ctx(ut_ca, CR_TLS_VERIFY_REQUIRED, "c.test"), 1);
	refused("certificate verify failed: hostname mismatch");
}

static void
test_expired_refused(void)
{
	run(server_ctx(ut_expired, ut_expired_key),
	    client_ctx(ut_ca, CR_TLS_VERIFY_REQUIRED, "localhost"), 1);
	refused("certificate verify failed: certificate has expired");
}

/* --verify none: another CA's server is accepted (and the name is still sent). */
static void
test_verify_none_accepts(void)
{
	run(server_ctx(NULL, NULL), client_ctx(ut_other_ca, CR_TLS_VERIFY_NONE, "c.test"), 1);
	CU_ASSERT_EQUAL(R.echoes, 1);
	CU_ASSERT_STRING_EQUAL(R.sni, "c.test");
}

/* A bad name is refused at the context, naming it. */
static void
test_bad_name(void)
{
	struct cr_tls_config cfg = {.client = true, .server_name = "a b"};
	char err[256] = "";

	CU_ASSERT_PTR_NULL(cr_tls_ctx_new(&cfg, err, sizeof(err)));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "'a b'"));
}

/* An expired leaf of the suite's CA, for localhost. */
static int
make_expired(void)
{
	char p[128];
	FILE *f;
	X509 *ca;
	EVP_PKEY *k;
	int rc;

	ut_path(ut_expired, "expired.pem");
	ut_path(ut_expired_key, "expired.key");
	f = fopen(ut_ca, "r");
	ca = f != NULL ? PEM_read_X509(f, NULL, NULL, NULL) : NULL;
	if (f != NULL)
		fclose(f);
	ut_path(p, "ca.key");
	f = fopen(p, "r");
	k = f != NULL ? PEM_read_PrivateKey(f, NULL, NULL, NULL) : NULL;
	if (f != NULL)
		fclose(f);
	rc = ca != NULL && k != NULL
		 ? ut_make_leaf(ca, k, "localhost", "DNS:localhost", -1, ut_expired, ut_expired_key)
		 : -1;
	X509_free(ca);
	EVP_PKEY_free(k);
	return rc;
}

static int
suite_init(void)
{
	if (ut_rt_setup() != 0 || ut_certs_make("tls_client_ut") != 0 || make_expired() != 0)
		return 1;
	return 0;
}

static int
suite_fini(void)
{
	return ut_tmpdir_remove();
}

static const struct ut_case cases[] = {
    UT_CASE(test_verified_sni_resumed), UT_CASE(test_resumed_after_abrupt_end),
    UT_CASE(test_sni_picks_certificate),
    UT_CASE(test_ip_checked_not_sent),	UT_CASE(test_wrong_ca_refused),
    UT_CASE(test_wrong_name_refused),	UT_CASE(test_expired_refused),
    UT_CASE(test_verify_none_accepts),	UT_CASE(test_bad_name),
};

UT_MAIN("tls_client", cases, suite_init, suite_fini)
