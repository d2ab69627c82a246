/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The kTLS hand-over's key material (tls_ktls_keys.c), checked without the kernel: after a
 * handshake of our record engine against an in-memory OpenSSL client, with records both
 * ways already made in user space (the client's first request in the flight of its
 * Finished, our answer, TLS 1.3's tickets), the parameters for TLS_TX and TLS_RX are
 * turned into records here with AES-GCM exactly as the kernel makes and reads them
 * (RFC 8446 5.2-5.3, RFC 5288 3): the client's OpenSSL must read the two we make, and we
 * must read the two it makes. A wrong key, IV or sequence number fails the AEAD tag.
 * TLS 1.2 and 1.3, AES-128-GCM and AES-256-GCM; ChaCha20 is refused (-ENOTSUP).
 */
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>

#include "tls_ktls.h"
#include "tls_session.h"
#include "ut_certs.h"
#include "ut_cunit.h"

struct side {
	struct tls_session s;
	struct tls_ktls k;
	SSL *cli;
	BIO *crb, *cwb; /* the client's */
	uint8_t plain[256];
	size_t plain_len;
	bool up;
};

static SSL_CTX *srv_ctx, *cli_ctx;

static int
srv_out(void *arg, const void *d, size_t n)
{
	struct side *x = arg;

	return BIO_write(x->crb, d, (int)n) == (int)n ? 0 : -ENOMEM;
}

static void
srv_up(void *arg)
{
	((struct side *)arg)->up = true;
}

static void
srv_plain(void *arg, const void *d, size_t n)
{
	struct side *x = arg;

	CU_ASSERT_FATAL(x->plain_len + n <= sizeof(x->plain));
	memcpy(x->plain + x->plain_len, d, n);
	x->plain_len += n;
}

static const struct tls_session_io io = {srv_out, srv_up, srv_plain, NULL};

/* What the client wrote, to the server. */
static void
to_server(struct side *x)
{
	char *p;
	long n = BIO_get_mem_data(x->cwb, &p);

	if (n > 0) {
		CU_ASSERT_EQUAL(cr__tls_session_input(&x->s, p, (size_t)n), 0);
	}
	(void)BIO_reset(x->cwb);
}

/* ---- the kernel's record, by hand ---- */

static const EVP_CIPHER *
aead(const struct tls_ktls_info *in)
{
	return in->u.gcm128.info.cipher_type == TLS_CIPHER_AES_GCM_128 ? EVP_aes_128_gcm()
								       : EVP_aes_256_gcm();
}

/* Key, salt, iv and rec_seq of either layout. */
static void
fields(const struct tls_ktls_info *in, const uint8_t **key, const uint8_t **salt,
       const uint8_t **iv, uint64_t *seq)
{
	const uint8_t *rs;
	unsigned i;

	if (in->u.gcm128.info.cipher_type == TLS_CIPHER_AES_GCM_128) {
		*key = in->u.gcm128.key, *salt = in->u.gcm128.salt, *iv = in->u.gcm128.iv;
		rs = in->u.gcm128.rec_seq;
	} else {
		*key = in->u.gcm256.key, *salt = in->u.gcm256.salt, *iv = in->u.gcm256.iv;
		rs = in->u.gcm256.rec_seq;
	}
	for (*seq = 0, i = 0; i < 8; i++)
		*seq = *seq << 8 | rs[i];
}

/* The nonce and additional data of record @p n (0 the first) after the hand-over. */
static void
nonce_aad(const struct tls_ktls_info *in, unsigned n, size_t plen, uint8_t nonce[12], uint8_t *aad,
	  size_t *aad_len, uint8_t explicit_iv[8], const uint8_t *hdr)
{
	const uint8_t *key, *salt, *iv;
	uint64_t seq, e = 0;
	unsigned i;

	fields(in, &key, &salt, &iv, &seq);
	seq += n;
	memcpy(nonce, salt, 4);
	if (in->u.gcm128.info.version == TLS_1_3_VERSION) {
		memcpy(nonce + 4, iv, 8);
		for (i = 0; i < 8; i++)
			nonce[4 + i] ^= (uint8_t)(seq >> (56 - 8 * i));
		memcpy(aad, hdr, 5);
		*aad_len = 5;
		return;
	}
	for (i = 0; i < 8; i++)
		e = e << 8 | iv[i];
	e += n; /* the kernel counts its explicit nonce up from the one given */
	for (i = 0; i < 8; i++) {
		explicit_iv[i] = (uint8_t)(e >> (56 - 8 * i));
		aad[i] = (uint8_t)(seq >> (56 - 8 * i));
	}
	memcpy(nonce + 4, explicit_iv, 8);
	aad[8] = 23, aad[9] = 3, aad[10] = 3;
	aad[11] = (uint8_t)(plen >> 8), aad[12] = (uint8_t)plen;
	*aad_len = 13;
}

/* Application data record @p n as the kernel would send it. @return its length. */
static size_t
kernel_seal(const struct tls_ktls_info *in, unsigned n, const char *msg, uint8_t *rec)
{
	bool v13 = in->u.gcm128.info.version == TLS_1_3_VERSION;
	size_t plen = strlen(msg), inner = plen + (v13 ? 1 : 0), body = (v13 ? 0 : 8);
	uint8_t nonce[12], aad[13], pt[128], ex[8];
	const uint8_t *key, *salt, *iv;
	size_t aad_len, len = body + inner + 16;
	uint64_t seq;
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
	int k;

	fields(in, &key, &salt, &iv, &seq);
	rec[0] = 23, rec[1] = 3, rec[2] = 3, rec[3] = (uint8_t)(len >> 8), rec[4] = (uint8_t)len;
	memcpy(pt, msg, plen);
	if (v13)
		pt[plen] = 23; /* the inner content type */
	nonce_aad(in, n, plen, nonce, aad, &aad_len, ex, rec);
	if (!v13)
		memcpy(rec + 5, ex, 8);
	CU_ASSERT_FATAL(EVP_EncryptInit_ex(c, aead(in), NULL, key, nonce) == 1);
	CU_ASSERT(EVP_EncryptUpdate(c, NULL, &k, aad, (int)aad_len) == 1);
	CU_ASSERT(EVP_EncryptUpdate(c, rec + 5 + body, &k, pt, (int)inner) == 1);
	CU_ASSERT(EVP_EncryptFinal_ex(c, rec + 5 + body + inner, &k) == 1);
	CU_ASSERT(EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, 16, rec + 5 + body + inner) == 1);
	EVP_CIPHER_CTX_free(c);
	return 5 + len;
}

/* Record @p n from the peer, read as the kernel would: its plaintext, or -1 if the tag
 * does not verify. */
static int
kernel_open(const struct tls_ktls_info *in, unsigned n, const uint8_t *rec, size_t rlen, char *out)
{
	bool v13 = in->u.gcm128.info.version == TLS_1_3_VERSION;
	size_t body = v13 ? 0 : 8, clen = rlen - 5 - body - 16, aad_len;
	uint8_t nonce[12], aad[13], ex[8];
	const uint8_t *key, *salt, *iv;
	uint64_t seq;
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
	int k, ok;

	fields(in, &key, &salt, &iv, &seq);
	nonce_aad(in, n, clen, nonce, aad, &aad_len, ex, rec);
	if (!v13)
		memcpy(nonce + 4, rec + 5, 8); /* TLS 1.2: the record carries its own */
	ok = EVP_DecryptInit_ex(c, aead(in), NULL, key, nonce) == 1 &&
	     EVP_DecryptUpdate(c, NULL, &k, aad, (int)aad_len) == 1 &&
	     EVP_DecryptUpdate(c, (uint8_t *)out, &k, rec + 5 + body, (int)clen) == 1 &&
	     EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, 16, (void *)(rec + rlen - 16)) == 1 &&
	     EVP_DecryptFinal_ex(c, (uint8_t *)out + k, &k) == 1;
	EVP_CIPHER_CTX_free(c);
	if (!ok)
		return -1;
	if (v13)
		clen--; /* drop the inner content type (no padding from OpenSSL) */
	out[clen] = '\0';
	return (int)clen;
}

/* ---- the cases ---- */

/* Our server and the client handshaken in @p version and @p suite, a request and its
 * answer made in user space; @p ck, if not NULL, takes the client's keys. */
static void
handshake(struct side *x, int version, const char *suite, struct tls_ktls *ck)
{
	char got[128];
	size_t n, w;
	int r = 0, i;

	memset(x, 0, sizeof(*x));
	CU_ASSERT_EQUAL_FATAL(cr__tls_session_init(&x->s, srv_ctx, true, &io, x), 0);
	SSL_set_app_data(x->s.ssl, &x->k);
	x->cli = SSL_new(cli_ctx);
	if (ck != NULL)
		SSL_set_app_data(x->cli, ck);
	x->crb = BIO_new(BIO_s_mem());
	x->cwb = BIO_new(BIO_s_mem());
	BIO_set_mem_eof_return(x->crb, -1);
	SSL_set_bio(x->cli, x->crb, x->cwb);
	SSL_set_connect_state(x->cli);
	SSL_set_min_proto_version(x->cli, version);
	SSL_set_max_proto_version(x->cli, version);
	if (version == TLS1_3_VERSION) {
		CU_ASSERT_EQUAL(SSL_set_ciphersuites(x->cli, suite), 1);
	} else {
		CU_ASSERT_EQUAL(SSL_set_cipher_list(x->cli, suite), 1);
	}
	for (i = 0; i < 10 && (r = SSL_do_handshake(x->cli)) != 1; i++)
		to_server(x);
	CU_ASSERT_EQUAL_FATAL(r, 1);
	/* The client's first request goes in the flight of its Finished. */
	CU_ASSERT_EQUAL(SSL_write_ex(x->cli, "GET /1", 6, &w), 1);
	to_server(x);
	CU_ASSERT_FATAL(x->up);
	CU_ASSERT(x->plain_len == 6 && memcmp(x->plain, "GET /1", 6) == 0);
	CU_ASSERT_EQUAL(cr__tls_session_write(&x->s, "200 one", 7), 0);
	CU_ASSERT(SSL_read_ex(x->cli, got, sizeof(got), &n) == 1 && n == 7); /* tickets too */
	CU_ASSERT(cr__tls_session_at_record_end(&x->s));
}

static void
handover_case(int version, const char *suite)
{
	struct side x;
	struct tls_ktls_info tx, rx;
	uint8_t rec[256];
	char got[128];
	size_t n, w;
	int i;
	char *p;
	long plen;

	handshake(&x, version, suite, NULL);

	/* The hand-over's parameters... */
	CU_ASSERT_EQUAL_FATAL(cr__tls_ktls_info(x.s.ssl, &x.k, true, &tx), 0);
	CU_ASSERT_EQUAL_FATAL(cr__tls_ktls_info(x.s.ssl, &x.k, false, &rx), 0);
	CU_ASSERT_EQUAL(tx.u.gcm128.info.version,
			version == TLS1_3_VERSION ? TLS_1_3_VERSION : TLS_1_2_VERSION);
	/* ...make records the client reads... */
	for (i = 0; i < 2; i++) {
		n = kernel_seal(&tx, (unsigned)i, i == 0 ? "kernel one" : "kernel two", rec);
		CU_ASSERT_EQUAL(BIO_write(x.crb, rec, (int)n), (int)n);
		memset(got, 0, sizeof(got));
		CU_ASSERT_EQUAL(SSL_read_ex(x.cli, got, sizeof(got), &n), 1);
		CU_ASSERT_STRING_EQUAL(got, i == 0 ? "kernel one" : "kernel two");
		ERR_clear_error();
	}
	/* ...and read the client's. */
	for (i = 0; i < 2; i++) {
		CU_ASSERT_EQUAL(SSL_write_ex(x.cli, i == 0 ? "GET /2" : "GET /3", 6, &w), 1);
		plen = BIO_get_mem_data(x.cwb, &p);
		CU_ASSERT_FATAL(plen > 0 && (size_t)plen <= sizeof(rec));
		memcpy(rec, p, (size_t)plen);
		(void)BIO_reset(x.cwb);
		CU_ASSERT_EQUAL(kernel_open(&rx, (unsigned)i, rec, (size_t)plen, got), 6);
		CU_ASSERT_STRING_EQUAL(got, i == 0 ? "GET /2" : "GET /3");
	}
	cr__tls_ktls_forget(&x.k);
	SSL_free(x.cli);
	cr__tls_session_fini(&x.s);
}

static void
test_tls13_aes128(void)
{
	handover_case(TLS1_3_VERSION, "TLS_AES_128_GCM_SHA256");
}

static void
test_tls13_aes256(void)
{
	handover_case(TLS1_3_VERSION, "TLS_AES_256_GCM_SHA384");
}

static void
test_tls12_aes128(void)
{
	handover_case(TLS1_2_VERSION, "ECDHE-ECDSA-AES128-GCM-SHA256");
}

static void
test_tls12_aes256(void)
{
	handover_case(TLS1_2_VERSION, "ECDHE-ECDSA-AES256-GCM-SHA384");
}

/* A suite the kernel path does not take: user space stays. */
static void
test_chacha_refused(void)
{
	struct side x;
	struct tls_ktls_info tx;
	int r, i;

	memset(&x, 0, sizeof(x));
	CU_ASSERT_EQUAL_FATAL(cr__tls_session_init(&x.s, srv_ctx, true, &io, &x), 0);
	SSL_set_app_data(x.s.ssl, &x.k);
	x.cli = SSL_new(cli_ctx);
	x.crb = BIO_new(BIO_s_mem());
	x.cwb = BIO_new(BIO_s_mem());
	BIO_set_mem_eof_return(x.crb, -1);
	SSL_set_bio(x.cli, x.crb, x.cwb);
	SSL_set_connect_state(x.cli);
	CU_ASSERT_EQUAL(SSL_set_ciphersuites(x.cli, "TLS_CHACHA20_POLY1305_SHA256"), 1);
	for (i = 0; i < 10 && (r = SSL_do_handshake(x.cli)) != 1; i++)
		to_server(&x);
	to_server(&x);
	CU_ASSERT_FATAL(x.up);
	CU_ASSERT_EQUAL(cr__tls_ktls_info(x.s.ssl, &x.k, true, &tx), -ENOTSUP);
	SSL_free(x.cli);
	cr__tls_session_fini(&x.s);
}

/* A TLS 1.3 client is refused: the server's NewSessionTickets come after its Finished, as
 * many as it likes, and the kernel would end the connection on the first after a hand-over
 * (a record that is not data). A TLS 1.2 client has them all before the server's Finished. */
static void
test_tls13_client_refused(void)
{
	struct side x;
	struct tls_ktls ck;
	struct tls_ktls_info tx, rx;
	uint8_t rec[256];
	char got[128], *p;
	long plen;
	size_t n;

	memset(&ck, 0, sizeof(ck));
	handshake(&x, TLS1_3_VERSION, "TLS_AES_128_GCM_SHA256", &ck);
	CU_ASSERT(ck.counting[0] && ck.counting[1]); /* the keys were there */
	CU_ASSERT_PTR_NOT_NULL(cr__tls_ktls_refusal(x.cli, &ck));
	if (cr__tls_ktls_refusal(x.cli, &ck) != NULL)
		CU_ASSERT_STRING_EQUAL(cr__tls_ktls_refusal(x.cli, &ck), "client, TLS 1.3");
	CU_ASSERT_EQUAL(cr__tls_ktls_info(x.cli, &ck, true, &tx), -ENOTSUP);
	CU_ASSERT_EQUAL(cr__tls_ktls_info(x.cli, &ck, false, &tx), -ENOTSUP);
	/* The server of the same session may. */
	CU_ASSERT_PTR_NULL(cr__tls_ktls_refusal(x.s.ssl, &x.k));
	cr__tls_ktls_forget(&ck);
	SSL_free(x.cli);
	cr__tls_session_fini(&x.s);

	/* A TLS 1.2 client's parameters, checked as the server's are: our server reads the
	 * client's kernel record, and the client's kernel reads ours. */
	memset(&ck, 0, sizeof(ck));
	handshake(&x, TLS1_2_VERSION, "ECDHE-ECDSA-AES128-GCM-SHA256", &ck);
	CU_ASSERT_PTR_NULL(cr__tls_ktls_refusal(x.cli, &ck));
	CU_ASSERT_EQUAL_FATAL(cr__tls_ktls_info(x.cli, &ck, true, &tx), 0);
	CU_ASSERT_EQUAL_FATAL(cr__tls_ktls_info(x.cli, &ck, false, &rx), 0);
	n = kernel_seal(&tx, 0, "GET /k", rec);
	CU_ASSERT_EQUAL(cr__tls_session_input(&x.s, rec, n), 0);
	CU_ASSERT(x.plain_len == 12 && memcmp(x.plain + 6, "GET /k", 6) == 0);
	CU_ASSERT_EQUAL(cr__tls_session_write(&x.s, "200 k", 5), 0);
	plen = BIO_get_mem_data(x.crb, &p);
	CU_ASSERT_FATAL(plen > 0 && (size_t)plen <= sizeof(rec));
	memcpy(rec, p, (size_t)plen);
	(void)BIO_reset(x.crb);
	memset(got, 0, sizeof(got));
	CU_ASSERT_EQUAL(kernel_open(&rx, 0, rec, (size_t)plen, got), 5);
	CU_ASSERT_STRING_EQUAL(got, "200 k");
	cr__tls_ktls_forget(&ck);
	SSL_free(x.cli);
	cr__tls_session_fini(&x.s);
}

/* A KeyUpdate before the hand-over, from the peer or ours in reply: the keylog gave only
 * the first secrets, so the kernel would get stale keys. Refused. */
static void
test_key_update_refused(void)
{
	struct side x;
	struct tls_ktls_info tx;
	size_t w;

	handshake(&x, TLS1_3_VERSION, "TLS_AES_128_GCM_SHA256", NULL);
	CU_ASSERT_PTR_NULL(cr__tls_ktls_refusal(x.s.ssl, &x.k));
	CU_ASSERT_EQUAL(SSL_key_update(x.cli, SSL_KEY_UPDATE_REQUESTED), 1);
	CU_ASSERT_EQUAL(SSL_write_ex(x.cli, "GET /2", 6, &w), 1);
	to_server(&x);
	CU_ASSERT(x.plain_len == 12 && memcmp(x.plain + 6, "GET /2", 6) == 0);
	CU_ASSERT_EQUAL(cr__tls_ktls_info(x.s.ssl, &x.k, true, &tx), -ENOTSUP);
	CU_ASSERT_EQUAL(cr__tls_ktls_info(x.s.ssl, &x.k, false, &tx), -ENOTSUP);
	CU_ASSERT_PTR_NOT_NULL(cr__tls_ktls_refusal(x.s.ssl, &x.k));
	if (cr__tls_ktls_refusal(x.s.ssl, &x.k) != NULL)
		CU_ASSERT_STRING_EQUAL(cr__tls_ktls_refusal(x.s.ssl, &x.k), "KeyUpdate");
	cr__tls_ktls_forget(&x.k);
	SSL_free(x.cli);
	cr__tls_session_fini(&x.s);
}

/* The hand-over's (and a closing lcore's) quiet point: bytes after the peer's
 * close_notify, never read, hold no record. */
static void
test_record_end_after_close_notify(void)
{
	struct side x;
	char *p;
	long n;
	int r, i;

	memset(&x, 0, sizeof(x));
	CU_ASSERT_EQUAL_FATAL(cr__tls_session_init(&x.s, srv_ctx, true, &io, &x), 0);
	x.cli = SSL_new(cli_ctx);
	x.crb = BIO_new(BIO_s_mem());
	x.cwb = BIO_new(BIO_s_mem());
	BIO_set_mem_eof_return(x.crb, -1);
	SSL_set_bio(x.cli, x.crb, x.cwb);
	SSL_set_connect_state(x.cli);
	for (i = 0; i < 10 && (r = SSL_do_handshake(x.cli)) != 1; i++)
		to_server(&x);
	to_server(&x);
	CU_ASSERT_FATAL(x.up);
	CU_ASSERT(cr__tls_session_at_record_end(&x.s));
	(void)SSL_shutdown(x.cli);
	BIO_write(x.cwb, "\x17\x03\x03", 3); /* and then some */
	n = BIO_get_mem_data(x.cwb, &p);
	CU_ASSERT_EQUAL(cr__tls_session_input(&x.s, p, (size_t)n), 1);
	(void)BIO_reset(x.cwb);
	CU_ASSERT(x.s.peer_closed);
	CU_ASSERT(cr__tls_session_at_record_end(&x.s));
	SSL_free(x.cli);
	cr__tls_session_fini(&x.s);
}

static int
suite_init(void)
{
	if (ut_certs_make("tls_ktls_keys_ut") != 0)
		return 1;
	srv_ctx = SSL_CTX_new(TLS_server_method());
	cli_ctx = SSL_CTX_new(TLS_client_method());
	if (SSL_CTX_use_certificate_chain_file(srv_ctx, ut_cert) != 1 ||
	    SSL_CTX_use_PrivateKey_file(srv_ctx, ut_key, SSL_FILETYPE_PEM) != 1)
		return 1;
	/* The server prefers what the client asks here: each case picks its suite. */
	SSL_CTX_set_ciphersuites(srv_ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
					  "TLS_CHACHA20_POLY1305_SHA256");
	SSL_CTX_set_keylog_callback(srv_ctx, cr__tls_ktls_keylog);
	SSL_CTX_set_msg_callback(srv_ctx, cr__tls_ktls_msg);
	/* The client's keys too where a case gives its SSL a struct tls_ktls. */
	SSL_CTX_set_keylog_callback(cli_ctx, cr__tls_ktls_keylog);
	SSL_CTX_set_msg_callback(cli_ctx, cr__tls_ktls_msg);
	SSL_CTX_load_verify_locations(cli_ctx, ut_ca, NULL);
	SSL_CTX_set_verify(cli_ctx, SSL_VERIFY_PEER, NULL);
	return 0;
}

static int
suite_fini(void)
{
	SSL_CTX_free(srv_ctx);
	SSL_CTX_free(cli_ctx);
	return ut_tmpdir_remove();
}

static const struct ut_case cases[] = {
	UT_CASE(test_tls13_aes128),
	UT_CASE(test_tls13_aes256),
	UT_CASE(test_tls12_aes128),
	UT_CASE(test_tls12_aes256),
	UT_CASE(test_chacha_refused),
	UT_CASE(test_record_end_after_close_notify),
	UT_CASE(test_tls13_client_refused),
	UT_CASE(test_key_update_refused),
};

UT_MAIN("tls_ktls_keys", cases, suite_init, suite_fini)
