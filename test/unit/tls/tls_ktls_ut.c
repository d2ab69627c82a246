/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The kTLS hand-over over real sockets, once per io driver: an OpenSSL client (blocking
 * socket, TLS 1.3 then TLS 1.2, AES-128-GCM) makes a round trip while the records are
 * still OpenSSL's, waits, then sends 256 KiB in 4 KiB messages, each echoed by the app;
 * the server's records must be the kernel's by then (cr_tls_kernel(), the kernel counter)
 * and every byte must come back intact. Needs a kernel with kTLS (CONFIG_TLS): without
 * one (cr_tls_ktls_available() false, as on the machine this was written on) the whole
 * suite exits 77, a skip, before any case runs.
 */
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "cr_tls.h"
#include "ut_certs.h"
#include "ut_net.h"

#define MSG   4096u
#define TOTAL (256u * 1024u)

static struct {
	struct cr_listener *l;
	struct cr_net_addr addr;
	struct cr_tls_ctx *ctx;
	pthread_t client;
	bool client_started;
	_Atomic int done, closes;
	_Atomic size_t kernel_bytes; /* echoed while the records were the kernel's */
	int version;
	int ok;
} S;

static SSL_CTX *cli_ctx;
static uint8_t payload[TOTAL];
static struct ut_every every;

static void
on_data(struct cr_conn *c, const void *d, size_t n)
{
	if (cr_tls_kernel(c))
		atomic_fetch_add(&S.kernel_bytes, n);
	CU_ASSERT_EQUAL(cr_conn_send(c, d, n), 0);
}

static void
on_close(struct cr_conn *c, int err)
{
	(void)c;
	CU_ASSERT_EQUAL(err, 0);
	atomic_fetch_add(&S.closes, 1);
}

static const struct cr_conn_ops ops = {NULL, on_data, NULL, NULL, on_close};

static bool
done(void *arg)
{
	(void)arg;
	if (!atomic_load(&S.done) || atomic_load(&S.closes) != 1)
		return false;
	cr_reactor_stop();
	return true;
}

static bool
read_n(SSL *ssl, uint8_t *buf, size_t n)
{
	size_t got = 0, k;

	while (got < n && SSL_read_ex(ssl, buf + got, n - got, &k) == 1)
		got += k;
	return got == n;
}

static void *
client(void *arg)
{
	static uint8_t back[TOTAL];
	int fd = ut_connect(&S.addr, 0);
	SSL *ssl = SSL_new(cli_ctx);
	size_t off, w;
	uint8_t b[4];

	(void)arg;
	SSL_set_fd(ssl, fd);
	SSL_set_min_proto_version(ssl, S.version);
	SSL_set_max_proto_version(ssl, S.version);
	SSL_set_tlsext_host_name(ssl, "localhost");
	if (fd >= 0 && SSL_connect(ssl) == 1 && SSL_write_ex(ssl, "ping", 4, &w) == 1 &&
	    read_n(ssl, b, 4) && memcmp(b, "ping", 4) == 0) {
		ut_sleep_ms(100); /* the hand-over: the wire is quiet */
		for (off = 0; off < TOTAL; off += MSG)
			if (SSL_write_ex(ssl, payload + off, MSG, &w) != 1 ||
			    !read_n(ssl, back + off, MSG))
				break;
		S.ok = off == TOTAL && memcmp(back, payload, TOTAL) == 0;
	}
	ERR_clear_error();
	(void)SSL_shutdown(ssl);
	SSL_free(ssl);
	if (fd >= 0)
		close(fd);
	atomic_store(&S.done, 1);
	return NULL;
}

static void
start(void *arg)
{
	struct cr_tcp_listen_opts o = ut_listen_opts(false);

	(void)arg;
	cr_tls_conn_opts(&o.conn, S.ctx);
	CU_ASSERT_EQUAL_FATAL(cr_tcp_listen(&o, &ops, NULL, &S.l), 0);
	cr_listener_addr(S.l, &S.addr);
	CU_ASSERT_EQUAL(pthread_create(&S.client, NULL, client, NULL), 0);
	S.client_started = true;
	ut_every(&every, 2, done, NULL);
}

static void
handover_case(int version)
{
	struct cr_tls_cert cert = {ut_cert, ut_key};
	struct cr_tls_config cfg = {.certs = &cert,
				    .n_certs = 1,
				    .ciphers = "ECDHE+AESGCM",
				    .ciphersuites = "TLS_AES_128_GCM_SHA256"};
	struct cr_tls_stats st0, st;
	char err[256];
	unsigned i;
	uint64_t k0 = 0, k = 0;

	for (i = 0; i < CR_MAX_LCORES; i++)
		if (cr_tls_stats(i, &st0) == 0)
			k0 += st0.kernel;
	memset(&S, 0, sizeof(S));
	S.version = version;
	S.ctx = cr_tls_ctx_new(&cfg, err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(S.ctx);
	CU_ASSERT_STRING_EQUAL(cr_tls_record_mode(), "kernel");
	ut_net_run(start, NULL, 30000);
	if (S.client_started)
		pthread_join(S.client, NULL);
	cr_tls_ctx_free(S.ctx);
	for (i = 0; i < CR_MAX_LCORES; i++)
		if (cr_tls_stats(i, &st) == 0)
			k += st.kernel;
	CU_ASSERT_EQUAL(S.ok, 1);
	CU_ASSERT_EQUAL(k - k0, 1);
	CU_ASSERT(atomic_load(&S.kernel_bytes) >= TOTAL); /* the ping too, if it came late */
}

static void
test_handover_tls13(void)
{
	handover_case(TLS1_3_VERSION);
}

static void
test_handover_tls12(void)
{
	handover_case(TLS1_2_VERSION);
}

static int
suite_init(void)
{
	if (ut_rt_setup() != 0 || ut_certs_make("tls_ktls_ut") != 0)
		return 1;
	ut_fill_seeded(payload, sizeof(payload), 7);
	cli_ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_load_verify_locations(cli_ctx, ut_ca, NULL);
	SSL_CTX_set_verify(cli_ctx, SSL_VERIFY_PEER, NULL);
	return 0;
}

static int
suite_fini(void)
{
	SSL_CTX_free(cli_ctx);
	return ut_tmpdir_remove();
}

static const struct ut_case cases[] = {
    UT_CASE(test_handover_tls13),
    UT_CASE(test_handover_tls12),
};

/* UT_MAIN, after the kernel's answer. */
int
main(void)
{
	if (!cr_tls_ktls_available()) {
		fprintf(stderr, "tls_ktls: SKIP: this kernel has no kTLS (setsockopt TCP_ULP "
				"\"tls\": ENOENT, no CONFIG_TLS)\n");
		return 77;
	}
	return ut_run_suite("tls_ktls", cases, sizeof(cases) / sizeof(cases[0]), suite_init,
			    suite_fini);
}
