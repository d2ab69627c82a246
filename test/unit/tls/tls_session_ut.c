/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The record engine (tls_session.c) and contexts (tls_ctx.c, tls_tickets.c) against an
 * in-memory peer: a plain OpenSSL client over memory BIOs, its bytes carried to our server
 * session in pieces of a chosen size. Handshakes (TLS 1.2 and 1.3), records split at every
 * byte, a ClientHello a byte at a time, renegotiation refused, bad and missing
 * certificates, an old protocol refused, garbage, close_notify both ways, SNI, ALPN,
 * resumption on another thread after rotations and a reload, and the context's errors.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>

#include "tls_internal.h"
#include "ut_certs.h"
#include "ut_cunit.h"

/* Our server session and what it produced. */
struct srv {
	struct tls_session s;
	struct tls_certset *set;
	uint8_t *out; /* ciphertext for the client, not yet carried */
	size_t out_len;
	uint8_t *plain; /* plaintext delivered */
	size_t plain_len;
	int established;
	int out_fail; /* out() returns this (0: accept) */
};

#define BUF (4u << 20)

static int
srv_out(void *arg, const void *d, size_t n)
{
	struct srv *v = arg;

	if (v->out_fail != 0)
		return v->out_fail;
	CU_ASSERT_FATAL(v->out_len + n <= BUF);
	memcpy(v->out + v->out_len, d, n);
	v->out_len += n;
	return 0;
}

static void
srv_established(void *arg)
{
	((struct srv *)arg)->established++;
}

static void
srv_plain(void *arg, const void *d, size_t n)
{
	struct srv *v = arg;

	CU_ASSERT_FATAL(v->plain_len + n <= BUF);
	memcpy(v->plain + v->plain_len, d, n);
	v->plain_len += n;
}

static const struct tls_session_io srv_io = {srv_out, srv_established, srv_plain, NULL};

/* The client: OpenSSL itself over two memory BIOs. */
struct cli {
	SSL_CTX *ctx;
	SSL *ssl;
	BIO *rbio, *wbio;
};

static struct cr_tls_ctx *
server_ctx(const char *protocols, const char *alpn, enum cr_tls_verify verify)
{
	struct cr_tls_cert certs[2] = {{ut_cert, ut_key}, {ut_cert_b, ut_key_b}};
	struct cr_tls_config cfg = {
		.certs = certs,
		.n_certs = 2,
		.protocols = protocols,
		.alpn = alpn,
		.verify = verify,
		.ca_file = verify != CR_TLS_VERIFY_NONE ? ut_ca : NULL,
	};
	char err[256] = "";
	struct cr_tls_ctx *ctx = cr_tls_ctx_new(&cfg, err, sizeof(err));

	if (ctx == NULL)
		fprintf(stderr, "server_ctx: %s\n", err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	return ctx;
}

static void
srv_init(struct srv *v, struct cr_tls_ctx *ctx)
{
	memset(v, 0, sizeof(*v));
	v->out = malloc(BUF);
	v->plain = malloc(BUF);
	v->set = cr__tls_ctx_take(ctx);
	CU_ASSERT_EQUAL_FATAL(cr__tls_session_init(&v->s, v->set->ctx[0], true, &srv_io, v), 0);
}

static void
srv_fini(struct srv *v)
{
	cr__tls_session_fini(&v->s);
	cr__tls_certset_put(v->set);
	free(v->out);
	free(v->plain);
}

static void
cli_init(struct cli *k, int max_proto, const char *ca, const char *sni)
{
	memset(k, 0, sizeof(*k));
	k->ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_set_max_proto_version(k->ctx, max_proto);
	if (ca != NULL) {
		SSL_CTX_load_verify_locations(k->ctx, ca, NULL);
		SSL_CTX_set_verify(k->ctx, SSL_VERIFY_PEER, NULL);
	}
	k->ssl = SSL_new(k->ctx);
	k->rbio = BIO_new(BIO_s_mem());
	k->wbio = BIO_new(BIO_s_mem());
	BIO_set_mem_eof_return(k->rbio, -1);
	SSL_set_bio(k->ssl, k->rbio, k->wbio);
	SSL_set_connect_state(k->ssl);
	if (sni != NULL)
		SSL_set_tlsext_host_name(k->ssl, sni);
}

static void
cli_fini(struct cli *k)
{
	SSL_free(k->ssl);
	SSL_CTX_free(k->ctx);
}

/* Our server session of @p ctx and a client: how most cases begin and end. */
static void
pair_init(struct srv *v, struct cli *k, struct cr_tls_ctx *ctx, int max_proto, const char *ca,
	  const char *sni)
{
	srv_init(v, ctx);
	cli_init(k, max_proto, ca, sni);
}

static void
pair_fini(struct srv *v, struct cli *k, struct cr_tls_ctx *ctx)
{
	cli_fini(k);
	srv_fini(v);
	cr_tls_ctx_free(ctx);
}

/* Carry the client's bytes to the server in pieces of @p piece; returns the last input
 * result (0, 1 or -errno). */
static int
to_server(struct cli *k, struct srv *v, size_t piece)
{
	char *p;
	long n = BIO_get_mem_data(k->wbio, &p);
	int rc = 0;
	long off;

	for (off = 0; off < n && rc == 0; off += (long)piece) {
		size_t m = (size_t)(n - off) < piece ? (size_t)(n - off) : piece;

		rc = cr__tls_session_input(&v->s, p + off, m);
	}
	(void)BIO_reset(k->wbio);
	return rc;
}

static void
to_client(struct srv *v, struct cli *k)
{
	if (v->out_len > 0)
		BIO_write(k->rbio, v->out, (int)v->out_len);
	v->out_len = 0;
}

/* Run the handshake to its end (or failure): 1 established both sides, else 0. */
static int
handshake(struct cli *k, struct srv *v, size_t piece, int *srv_rc)
{
	int i, r = 0, e = 0;

	*srv_rc = 0;
	for (i = 0; i < 20; i++) {
		ERR_clear_error();
		r = SSL_do_handshake(k->ssl);
		e = SSL_get_error(k->ssl, r);
		*srv_rc = to_server(k, v, piece);
		to_client(v, k);
		if (*srv_rc < 0)
			return 0;
		if (r == 1 && v->s.established)
			break;
		if (r != 1 && e != SSL_ERROR_WANT_READ)
			return 0;
	}
	/* TLS 1.3: the server's tickets arrive after the client's handshake ended. */
	(void)SSL_read(k->ssl, NULL, 0);
	return r == 1 && v->s.established;
}

/* Client reads all it can: appended to @p buf. */
static size_t
cli_read(struct cli *k, uint8_t *buf, size_t cap)
{
	size_t got = 0, n;

	while (got < cap && SSL_read_ex(k->ssl, buf + got, cap - got, &n) == 1)
		got += n;
	return got;
}

static int
suite_init(void)
{
	return ut_certs_make("tls_session_ut");
}

static int
suite_fini(void)
{
	return ut_tmpdir_remove();
}

/* ---- cases ---- */

static void
check_handshake(int max_proto, const char *want)
{
	struct cr_tls_ctx *ctx = server_ctx(NULL, NULL, CR_TLS_VERIFY_NONE);
	uint8_t buf[64];
	struct srv v;
	struct cli k;
	int rc;

	pair_init(&v, &k, ctx, max_proto, ut_ca, "localhost");
	CU_ASSERT_EQUAL(handshake(&k, &v, 1 << 20, &rc), 1);
	CU_ASSERT_EQUAL(v.established, 1);
	CU_ASSERT_STRING_EQUAL(SSL_get_version(v.s.ssl), want);
	CU_ASSERT_EQUAL(SSL_get_verify_result(k.ssl), X509_V_OK);
	/* Both ways. */
	CU_ASSERT_EQUAL(SSL_write(k.ssl, "ping", 4), 4);
	CU_ASSERT_EQUAL(to_server(&k, &v, 1 << 20), 0);
	CU_ASSERT_EQUAL(v.plain_len, 4);
	CU_ASSERT_NSTRING_EQUAL(v.plain, "ping", 4);
	CU_ASSERT_EQUAL(cr__tls_session_write(&v.s, "pong!", 5), 0);
	to_client(&v, &k);
	CU_ASSERT_EQUAL(cli_read(&k, buf, sizeof(buf)), 5);
	CU_ASSERT_NSTRING_EQUAL(buf, "pong!", 5);
	pair_fini(&v, &k, ctx);
}

static void
test_handshake_tls13(void)
{
	check_handshake(TLS1_3_VERSION, "TLSv1.3");
}

static void
test_handshake_tls12(void)
{
	check_handshake(TLS1_2_VERSION, "TLSv1.2");
}

/* The whole handshake fed a byte at a time, then records of every size to 40000 bytes
 * (three records) also a byte at a time: the same plaintext comes out. */
static void
test_partial_records(void)
{
	struct cr_tls_ctx *ctx = server_ctx(NULL, NULL, CR_TLS_VERIFY_NONE);
	static uint8_t msg[40000];
	struct srv v;
	struct cli k;
	size_t i;
	int rc;

	for (i = 0; i < sizeof(msg); i++)
		msg[i] = (uint8_t)(i * 7 + 3);
	pair_init(&v, &k, ctx, TLS1_3_VERSION, NULL, NULL);
	CU_ASSERT_EQUAL(handshake(&k, &v, 1, &rc), 1);
	CU_ASSERT_EQUAL(SSL_write(k.ssl, msg, sizeof(msg)), (int)sizeof(msg));
	CU_ASSERT_EQUAL(to_server(&k, &v, 1), 0);
	CU_ASSERT_EQUAL(v.plain_len, sizeof(msg));
	CU_ASSERT_EQUAL(memcmp(v.plain, msg, sizeof(msg)), 0);
	pair_fini(&v, &k, ctx);
}

/* One record cut at each byte in turn: nothing is delivered before its last byte, and
 * all of it once it came. */
static void
test_record_split_every_byte(void)
{
	struct cr_tls_ctx *ctx = server_ctx(NULL, NULL, CR_TLS_VERIFY_NONE);
	struct srv v;
	struct cli k;
	long n = 0, cut;
	char *p;
	int rc, bad = 0;

	pair_init(&v, &k, ctx, TLS1_3_VERSION, NULL, NULL);
	CU_ASSERT_EQUAL_FATAL(handshake(&k, &v, 1 << 20, &rc), 1);
	for (cut = 1;; cut++) {
		size_t before = v.plain_len;

		CU_ASSERT_EQUAL_FATAL(SSL_write(k.ssl, "0123456789abcdef", 16), 16);
		n = BIO_get_mem_data(k.wbio, &p);
		if (cut >= n)
			break;
		bad |= cr__tls_session_input(&v.s, p, (size_t)cut) != 0;
		bad |= v.plain_len != before;
		bad |= cr__tls_session_input(&v.s, p + cut, (size_t)(n - cut)) != 0;
		bad |= v.plain_len != before + 16;
		bad |= memcmp(v.plain + before, "0123456789abcdef", 16) != 0;
		(void)BIO_reset(k.wbio);
	}
	CU_ASSERT(n > 16 + 16); /* header, tag: the record was cut everywhere in it */
	CU_ASSERT_EQUAL(bad, 0);
	pair_fini(&v, &k, ctx);
}

/* A TLS 1.2 client asks to renegotiate: no second handshake happens. */
static void
test_renegotiation_refused(void)
{
	struct cr_tls_ctx *ctx = server_ctx("TLSv1.2", NULL, CR_TLS_VERIFY_NONE);
	struct srv v;
	struct cli k;
	int rc, i, r = 0;

	pair_init(&v, &k, ctx, TLS1_2_VERSION, NULL, NULL);
	CU_ASSERT_EQUAL_FATAL(handshake(&k, &v, 1 << 20, &rc), 1);
	CU_ASSERT_EQUAL_FATAL(SSL_renegotiate(k.ssl), 1);
	for (i = 0; i < 5 && r != 1; i++) {
		ERR_clear_error();
		r = SSL_do_handshake(k.ssl);
		(void)to_server(&k, &v, 1 << 20);
		to_client(&v, &k);
	}
	/* A second handshake would have finished within these rounds. */
	CU_ASSERT_NOT_EQUAL(r, 1);
	CU_ASSERT_EQUAL(SSL_num_renegotiations(k.ssl) > 0 && SSL_is_init_finished(k.ssl) &&
				!SSL_renegotiate_pending(k.ssl), 0);
	CU_ASSERT_EQUAL(v.established, 1);
	pair_fini(&v, &k, ctx);
}

/* A client that trusts another CA refuses our certificate; the server's session fails
 * on its alert. */
static void
test_bad_certificate(void)
{
	struct cr_tls_ctx *ctx = server_ctx(NULL, NULL, CR_TLS_VERIFY_NONE);
	struct srv v;
	struct cli k;
	int rc;

	pair_init(&v, &k, ctx, TLS1_3_VERSION, ut_other_ca, "localhost");
	CU_ASSERT_EQUAL(handshake(&k, &v, 1 << 20, &rc), 0);
	CU_ASSERT_NOT_EQUAL(SSL_get_verify_result(k.ssl), X509_V_OK);
	/* The client's alert reaches the server (in the handshake's last carry, or now). */
	CU_ASSERT(rc == -EPROTO || to_server(&k, &v, 1 << 20) == -EPROTO);
	CU_ASSERT(v.s.failed);
	CU_ASSERT_EQUAL(v.plain_len, 0);
	ERR_clear_error();
	pair_fini(&v, &k, ctx);
}

static void
client_cert_case(enum cr_tls_verify verify, bool send_cert, int want_ok)
{
	struct cr_tls_ctx *ctx = server_ctx(NULL, NULL, verify);
	struct srv v;
	struct cli k;
	int rc, ok, i;
	uint8_t b[8];

	pair_init(&v, &k, ctx, TLS1_3_VERSION, ut_ca, "localhost");
	if (send_cert) {
		CU_ASSERT_EQUAL(SSL_use_certificate_file(k.ssl, ut_ccert, SSL_FILETYPE_PEM), 1);
		CU_ASSERT_EQUAL(SSL_use_PrivateKey_file(k.ssl, ut_ckey, SSL_FILETYPE_PEM), 1);
	}
	ok = handshake(&k, &v, 1 << 20, &rc);
	/* TLS 1.3: the client ends its handshake before the server judged its certificate;
	 * a refusal is the server's failed session (and an alert to the client). */
	for (i = 0; i < 3 && rc == 0; i++) {
		(void)cli_read(&k, b, sizeof(b));
		rc = to_server(&k, &v, 1 << 20);
		to_client(&v, &k);
	}
	CU_ASSERT_EQUAL(ok && rc == 0 && v.s.established, want_ok);
	if (want_ok && send_cert) {
		X509 *x = SSL_get1_peer_certificate(v.s.ssl);

		CU_ASSERT_PTR_NOT_NULL(x);
		CU_ASSERT_EQUAL(SSL_get_verify_result(v.s.ssl), X509_V_OK);
		X509_free(x);
	}
	ERR_clear_error();
	pair_fini(&v, &k, ctx);
}

static void
test_client_cert_required(void)
{
	client_cert_case(CR_TLS_VERIFY_REQUIRED, true, 1);
	client_cert_case(CR_TLS_VERIFY_REQUIRED, false, 0);
}

static void
test_client_cert_optional(void)
{
	client_cert_case(CR_TLS_VERIFY_OPTIONAL, true, 1);
	client_cert_case(CR_TLS_VERIFY_OPTIONAL, false, 1);
}

/* A TLS 1.0 / 1.1 client (it needs @SECLEVEL=0 to even try) is refused. */
static void
test_old_protocol_refused(void)
{
	struct cr_tls_ctx *ctx = server_ctx(NULL, NULL, CR_TLS_VERIFY_NONE);
	struct srv v;
	struct cli k;
	int rc;

	pair_init(&v, &k, ctx, TLS1_1_VERSION, NULL, NULL);
	SSL_set_min_proto_version(k.ssl, TLS1_VERSION);
	SSL_set_cipher_list(k.ssl, "DEFAULT:@SECLEVEL=0");
	CU_ASSERT_EQUAL(handshake(&k, &v, 1 << 20, &rc), 0);
	CU_ASSERT_EQUAL(rc, -EPROTO);
	CU_ASSERT_EQUAL(v.established, 0);
	ERR_clear_error();
	pair_fini(&v, &k, ctx);
}

/* Bytes that are no TLS at all: the session fails at once, nothing is delivered. */
static void
test_garbage(void)
{
	struct cr_tls_ctx *ctx = server_ctx(NULL, NULL, CR_TLS_VERIFY_NONE);
	static const char get[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	struct srv v;

	srv_init(&v, ctx);
	CU_ASSERT_EQUAL(cr__tls_session_input(&v.s, get, sizeof(get) - 1), -EPROTO);
	CU_ASSERT_EQUAL(v.established, 0);
	CU_ASSERT_EQUAL(v.plain_len, 0);
	/* Once failed, it stays failed. */
	CU_ASSERT_EQUAL(cr__tls_session_write(&v.s, "x", 1), -ENOTCONN);
	ERR_clear_error();
	srv_fini(&v);
	cr_tls_ctx_free(ctx);
}

static void
test_close_notify(void)
{
	struct cr_tls_ctx *ctx = server_ctx(NULL, NULL, CR_TLS_VERIFY_NONE);
	uint8_t b[8];
	struct srv v;
	struct cli k;
	int rc;

	/* Ours: the client reads a clean end. */
	pair_init(&v, &k, ctx, TLS1_3_VERSION, NULL, NULL);
	CU_ASSERT_EQUAL_FATAL(handshake(&k, &v, 1 << 20, &rc), 1);
	cr__tls_session_shutdown(&v.s);
	cr__tls_session_shutdown(&v.s); /* once */
	CU_ASSERT(v.out_len > 0 && v.out_len < 64);
	to_client(&v, &k);
	CU_ASSERT_EQUAL(SSL_read(k.ssl, b, sizeof(b)), 0);
	CU_ASSERT_EQUAL(SSL_get_error(k.ssl, 0), SSL_ERROR_ZERO_RETURN);
	CU_ASSERT_EQUAL(cr__tls_session_write(&v.s, "x", 1), -ENOTCONN);
	cli_fini(&k);
	srv_fini(&v);
	/* Theirs: the server's input says so, after the data before it. */
	pair_init(&v, &k, ctx, TLS1_3_VERSION, NULL, NULL);
	CU_ASSERT_EQUAL_FATAL(handshake(&k, &v, 1 << 20, &rc), 1);
	CU_ASSERT_EQUAL(SSL_write(k.ssl, "last", 4), 4);
	CU_ASSERT_EQUAL(SSL_shutdown(k.ssl), 0);
	CU_ASSERT_EQUAL(to_server(&k, &v, 1 << 20), 1);
	CU_ASSERT_EQUAL(v.plain_len, 4);
	CU_ASSERT(v.s.peer_closed);
	pair_fini(&v, &k, ctx);
}

/* The wire refuses (lib/net's pool is full): the session fails, nothing half-sent. */
static void
test_out_refused(void)
{
	struct cr_tls_ctx *ctx = server_ctx(NULL, NULL, CR_TLS_VERIFY_NONE);
	struct srv v;
	struct cli k;
	int rc;

	pair_init(&v, &k, ctx, TLS1_3_VERSION, NULL, NULL);
	CU_ASSERT_EQUAL_FATAL(handshake(&k, &v, 1 << 20, &rc), 1);
	v.out_fail = -ENOBUFS;
	CU_ASSERT_EQUAL(cr__tls_session_write(&v.s, "abc", 3), -ENOBUFS);
	CU_ASSERT(v.s.failed);
	CU_ASSERT_EQUAL(v.out_len, 0);
	pair_fini(&v, &k, ctx);
}

static const char *
served_cn(struct srv *v)
{
	static char cn[64];
	X509 *x = SSL_get_certificate(v->s.ssl);

	cn[0] = '\0';
	if (x != NULL)
		X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, cn,
					  sizeof(cn));
	return cn;
}

static void
sni_case(const char *name, const char *want_cn)
{
	struct cr_tls_ctx *ctx = server_ctx(NULL, NULL, CR_TLS_VERIFY_NONE);
	struct srv v;
	struct cli k;
	int rc;

	pair_init(&v, &k, ctx, TLS1_3_VERSION, ut_ca, name);
	if (name != NULL && strcmp(name, want_cn) == 0)
		SSL_set1_host(k.ssl, name); /* and the certificate is checked for it */
	CU_ASSERT_EQUAL(handshake(&k, &v, 1 << 20, &rc), 1);
	CU_ASSERT_STRING_EQUAL(served_cn(&v), want_cn);
	pair_fini(&v, &k, ctx);
}

static void
test_sni(void)
{
	sni_case("b.test", "b.test");
	sni_case("a.test", "localhost");
	sni_case("unknown.test", "localhost");
	sni_case(NULL, "localhost");
}

static void
alpn_case(const unsigned char *offer, unsigned len, const char *want)
{
	struct cr_tls_ctx *ctx = server_ctx(NULL, "h2,http/1.1", CR_TLS_VERIFY_NONE);
	const unsigned char *p;
	unsigned n = 0;
	struct srv v;
	struct cli k;
	int rc;

	pair_init(&v, &k, ctx, TLS1_3_VERSION, NULL, NULL);
	if (offer != NULL)
		SSL_set_alpn_protos(k.ssl, offer, len);
	CU_ASSERT_EQUAL(handshake(&k, &v, 1 << 20, &rc), 1);
	SSL_get0_alpn_selected(k.ssl, &p, &n);
	if (want == NULL) {
		CU_ASSERT_EQUAL(n, 0);
	} else {
		CU_ASSERT(n == strlen(want) && memcmp(p, want, n) == 0);
	}
	pair_fini(&v, &k, ctx);
}

static void
test_alpn(void)
{
	alpn_case((const unsigned char *)"\x08http/1.1", 9, "http/1.1");
	/* Our preference wins over the client's order. */
	alpn_case((const unsigned char *)"\x08http/1.1\x02h2", 12, "h2");
	alpn_case((const unsigned char *)"\x04spdy", 5, NULL);
	alpn_case(NULL, 0, NULL);
}

/* ---- resumption: a ticket from one thread resumes on another ---- */

struct resume_arg {
	struct cr_tls_ctx *ctx;
	SSL_SESSION *in;   /* offered, or NULL */
	SSL_SESSION *out;  /* the session the client ends with */
	int max_proto;
	int resumed;
	int ok;
};

static void *
resume_thread(void *p)
{
	struct resume_arg *a = p;
	struct srv v;
	struct cli k;
	int rc;

	srv_init(&v, a->ctx);
	cli_init(&k, a->max_proto, NULL, NULL);
	if (a->in != NULL)
		CU_ASSERT_EQUAL(SSL_set_session(k.ssl, a->in), 1);
	a->ok = handshake(&k, &v, 1 << 20, &rc);
	a->resumed = SSL_session_reused(v.s.ssl);
	a->out = SSL_get1_session(k.ssl);
	/* A connection freed without close_notify marks its session not resumable. */
	(void)SSL_shutdown(k.ssl);
	cli_fini(&k);
	srv_fini(&v);
	return NULL;
}

static int
resume_on_thread(struct cr_tls_ctx *ctx, int max_proto, SSL_SESSION **sess)
{
	struct resume_arg a = {ctx, *sess, NULL, max_proto, 0, 0};
	pthread_t t;

	pthread_create(&t, NULL, resume_thread, &a);
	pthread_join(t, NULL);
	CU_ASSERT_EQUAL(a.ok, 1);
	SSL_SESSION_free(*sess);
	*sess = a.out;
	return a.resumed;
}

static void
resume_case(int max_proto)
{
	struct cr_tls_ctx *ctx = server_ctx(NULL, NULL, CR_TLS_VERIFY_NONE);
	SSL_SESSION *s = NULL, *old;
	char err[256];

	CU_ASSERT_EQUAL(resume_on_thread(ctx, max_proto, &s), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	/* Another thread, the same ticket key. */
	CU_ASSERT_EQUAL(resume_on_thread(ctx, max_proto, &s), 1);
	/* After a reload: the keys are the process's, not the context's. */
	CU_ASSERT_EQUAL(cr_tls_ctx_reload(ctx, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(resume_on_thread(ctx, max_proto, &s), 1);
	/* One rotation: the previous key still opens it. */
	old = s;
	SSL_SESSION_up_ref(old);
	CU_ASSERT_EQUAL(cr_tls_tickets_rotate(), 0);
	CU_ASSERT_EQUAL(resume_on_thread(ctx, max_proto, &s), 1);
	/* Two: a ticket of two keys ago does not. */
	CU_ASSERT_EQUAL(cr_tls_tickets_rotate(), 0);
	CU_ASSERT_EQUAL(resume_on_thread(ctx, max_proto, &old), 0);
	SSL_SESSION_free(old);
	SSL_SESSION_free(s);
	cr_tls_ctx_free(ctx);
}

static void
test_resume_other_thread_tls13(void)
{
	resume_case(TLS1_3_VERSION);
}

static void
test_resume_other_thread_tls12(void)
{
	resume_case(TLS1_2_VERSION);
}

/* ---- the context's errors: one line naming the file or value ---- */

static void
expect_error(struct cr_tls_config *cfg, const char *needle, const char *needle2)
{
	char err[256] = "";
	struct cr_tls_ctx *ctx = cr_tls_ctx_new(cfg, err, sizeof(err));

	CU_ASSERT_PTR_NULL(ctx);
	CU_ASSERT_EQUAL(errno, EINVAL);
	if (strstr(err, needle) == NULL || (needle2 != NULL && strstr(err, needle2) == NULL)) {
		fprintf(stderr, "error line '%s' lacks '%s'\n", err, needle);
		CU_FAIL("error line");
	}
	CU_ASSERT_PTR_NULL(strchr(err, '\n'));
	cr_tls_ctx_free(ctx);
}

static void
test_ctx_errors(void)
{
	struct cr_tls_cert c = {ut_cert, ut_key};
	struct cr_tls_config cfg = {.certs = &c, .n_certs = 1};
	char missing[160];

	snprintf(missing, sizeof(missing), "%s/nope.pem", ut_tmpdir);
	c.cert_file = missing;
	expect_error(&cfg, missing, "No such file");
	c.cert_file = ut_cert;
	c.key_file = ut_key_b;
	expect_error(&cfg, ut_key_b, "does not match");
	c.key_file = ut_ca; /* a certificate, not a key */
	expect_error(&cfg, ut_ca, "private key");
	c.key_file = ut_key;
	cfg.protocols = "TLSv1.1";
	expect_error(&cfg, "TLSv1.1", "TLSv1.2");
	cfg.protocols = NULL;
	cfg.ciphers = "NOSUCHCIPHER";
	expect_error(&cfg, "NOSUCHCIPHER", NULL);
	cfg.ciphers = NULL;
	cfg.ciphersuites = "TLS_NOPE";
	expect_error(&cfg, "TLS_NOPE", NULL);
	cfg.ciphersuites = NULL;
	cfg.verify = CR_TLS_VERIFY_REQUIRED;
	expect_error(&cfg, "CA file", NULL);
	cfg.verify = CR_TLS_VERIFY_NONE;
	cfg.alpn = "h2,,x";
	expect_error(&cfg, "h2,,x", NULL);
	cfg.alpn = NULL;
	cfg.n_certs = 0;
	expect_error(&cfg, "no certificate", NULL);
	ERR_clear_error();
}

/* A failed reload keeps the old certificates; a good one serves the new. */
static void
test_reload(void)
{
	struct cr_tls_ctx *ctx = server_ctx(NULL, NULL, CR_TLS_VERIFY_NONE);
	char err[256] = "", cmd[1200];
	struct srv live, v;
	struct cli kl, k;
	uint8_t b[8];
	int rc;

	/* A connection up before the reload goes on after it. */
	pair_init(&live, &kl, ctx, TLS1_3_VERSION, NULL, NULL);
	CU_ASSERT_EQUAL_FATAL(handshake(&kl, &live, 1 << 20, &rc), 1);
	CU_ASSERT_STRING_EQUAL(served_cn(&live), "localhost");
	/* Replace server.pem/key by b's: the default certificate is now b.test. */
	snprintf(cmd, sizeof(cmd), "cp %s %s.orig && cp %s %s.orig && cp %s %s && cp %s %s",
		 ut_cert, ut_cert, ut_key, ut_key, ut_cert_b, ut_cert, ut_key_b, ut_key);
	CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
	CU_ASSERT_EQUAL(cr_tls_ctx_reload(ctx, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(cr_tls_ctx_reloads(ctx), 1);
	pair_init(&v, &k, ctx, TLS1_3_VERSION, NULL, NULL);
	CU_ASSERT_EQUAL(handshake(&k, &v, 1 << 20, &rc), 1);
	CU_ASSERT_STRING_EQUAL(served_cn(&v), "b.test");
	cli_fini(&k);
	srv_fini(&v);
	/* A broken key: refused, the old set stays. */
	snprintf(cmd, sizeof(cmd), "echo broken > %s", ut_key);
	CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
	CU_ASSERT_EQUAL(cr_tls_ctx_reload(ctx, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, ut_key));
	CU_ASSERT_EQUAL(cr_tls_ctx_reloads(ctx), 1);
	pair_init(&v, &k, ctx, TLS1_3_VERSION, NULL, NULL);
	CU_ASSERT_EQUAL(handshake(&k, &v, 1 << 20, &rc), 1);
	CU_ASSERT_STRING_EQUAL(served_cn(&v), "b.test");
	cli_fini(&k);
	srv_fini(&v);
	/* The old connection still talks, on its old certificate set. */
	CU_ASSERT_EQUAL(SSL_write(kl.ssl, "live", 4), 4);
	CU_ASSERT_EQUAL(to_server(&kl, &live, 1 << 20), 0);
	CU_ASSERT_EQUAL(live.plain_len, 4);
	CU_ASSERT_EQUAL(cr__tls_session_write(&live.s, "ok", 2), 0);
	to_client(&live, &kl);
	CU_ASSERT_EQUAL(cli_read(&kl, b, sizeof(b)), 2);
	pair_fini(&live, &kl, ctx);
	snprintf(cmd, sizeof(cmd), "mv %s.orig %s && mv %s.orig %s", ut_cert, ut_cert, ut_key,
		 ut_key);
	CU_ASSERT_EQUAL(system(cmd), 0);
	ERR_clear_error();
}

static void
test_ktls_probe(void)
{
	/* What the kernel says, asked the same way independently. */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int r = setsockopt(fd, IPPROTO_TCP, 31 /* TCP_ULP */, "tls", 4);
	bool want = r == 0 || errno == ENOTCONN;

	close(fd);
	CU_ASSERT_EQUAL(cr_tls_ktls_available(), want);
	CU_ASSERT_STRING_EQUAL(cr_tls_record_mode(), "user-space");
}

static const struct ut_case cases[] = {
	UT_CASE(test_handshake_tls13),
	UT_CASE(test_handshake_tls12),
	UT_CASE(test_partial_records),
	UT_CASE(test_record_split_every_byte),
	UT_CASE(test_renegotiation_refused),
	UT_CASE(test_bad_certificate),
	UT_CASE(test_client_cert_required),
	UT_CASE(test_client_cert_optional),
	UT_CASE(test_old_protocol_refused),
	UT_CASE(test_garbage),
	UT_CASE(test_close_notify),
	UT_CASE(test_out_refused),
	UT_CASE(test_sni),
	UT_CASE(test_alpn),
	UT_CASE(test_resume_other_thread_tls13),
	UT_CASE(test_resume_other_thread_tls12),
	UT_CASE(test_ctx_errors),
	UT_CASE(test_reload),
	UT_CASE(test_ktls_probe),
};

UT_MAIN("tls_session", cases, suite_init, suite_fini)
