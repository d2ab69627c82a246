/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the kernel needs to take a session's records (kTLS): for each direction the key,
 * the static IV ("salt" and "iv" in <linux/tls.h>) and the sequence number of the next
 * record, as struct tls12_crypto_info_aes_gcm_128 / _256.
 *
 * OpenSSL 3.0 fills these itself only for a socket BIO it owns (ktls_configure_crypto()
 * is internal): our sessions run over memory BIOs, their bytes moved by lib/net. So the
 * material is taken as the handshake goes, from what OpenSSL does expose:
 * - TLS 1.3: the keylog callback gives each direction's application traffic secret at
 *   the moment that direction changes to it; key and IV are HKDF-Expand-Label(secret,
 *   "key" / "iv") (RFC 8446, 7.3).
 * - TLS 1.2: the master secret (SSL_SESSION_get_master_key()) and both randoms give the
 *   key block by the PRF (RFC 5246, 6.3): client key, server key, client IV, server IV.
 * - The sequence numbers: the message callback sees every record header OpenSSL reads or
 *   writes, in order; a direction's count starts again at its key change (the keylog
 *   line in TLS 1.3, the header of its ChangeCipherSpec record in TLS 1.2) and counts
 *   each record after it.
 * SSL_export_keying_material() is no use here: it derives new keys, not the session's.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/kdf.h>

#include "tls_ktls.h"

/* The direction's index in struct tls_ktls: what we read, what we write. */
enum { RX = 0, TX = 1 };

static int
hex_byte(const char *p)
{
	static const char digits[] = "0123456789abcdef";
	const char *hi, *lo;

	/* The end first (strchr() finds the terminator too), and never past it. */
	if (p[0] == '\0' || p[1] == '\0')
		return -1;
	hi = strchr(digits, p[0]);
	lo = strchr(digits, p[1]);
	return hi == NULL || lo == NULL ? -1 : (int)((hi - digits) << 4 | (lo - digits));
}

/* "CLIENT_TRAFFIC_SECRET_0 <client random> <secret>": a TLS 1.3 application secret. */
void
cr__tls_ktls_keylog(const SSL *ssl, const char *line)
{
	struct tls_ktls *k = SSL_get_app_data(ssl);
	const char *p;
	int dir, b;
	unsigned n = 0;

	if (k == NULL)
		return;
	if (strncmp(line, "CLIENT_TRAFFIC_SECRET_0 ", 24) == 0)
		dir = SSL_is_server((SSL *)ssl) ? RX : TX;
	else if (strncmp(line, "SERVER_TRAFFIC_SECRET_0 ", 24) == 0)
		dir = SSL_is_server((SSL *)ssl) ? TX : RX;
	else
		return;
	p = strchr(line + 24, ' ');
	if (p == NULL)
		return;
	for (p++; n < sizeof(k->secret[dir]) && (b = hex_byte(p)) >= 0; p += 2)
		k->secret[dir][n++] = (uint8_t)b;
	k->secret_len[dir] = (uint8_t)n;
	k->seq[dir] = 0;
	k->counting[dir] = true;
}

void
cr__tls_ktls_msg(int write_p, int version, int content_type, const void *buf, size_t len, SSL *ssl,
		 void *arg)
{
	struct tls_ktls *k = SSL_get_app_data(ssl);
	int dir = write_p ? TX : RX;

	(void)version;
	(void)arg;
	if (k == NULL || len < 1)
		return;
	/* TLS 1.3's KeyUpdate (handshake type 24), either way: the keys move on from the
	 * secrets the keylog gave, and only the _0 ones are given. No hand-over then. */
	if (content_type == SSL3_RT_HANDSHAKE && ((const uint8_t *)buf)[0] == SSL3_MT_KEY_UPDATE)
		k->rekeyed = true;
	if (content_type != SSL3_RT_HEADER)
		return;
	if (k->counting[dir])
		k->seq[dir]++;
	/* TLS 1.2: the record after a ChangeCipherSpec is the first of the new keys. (By the
	 * header: OpenSSL 3.0 calls back for the CCS it writes, not for the one it reads.) */
	if (((const uint8_t *)buf)[0] == SSL3_RT_CHANGE_CIPHER_SPEC &&
	    SSL_version(ssl) == TLS1_2_VERSION) {
		k->seq[dir] = 0;
		k->counting[dir] = true;
	}
}

/* The two KDFs, fetched once for the process: a fetch takes OpenSSL's method store lock,
 * which no hand-over should wait on. Kept to the end (an EVP_KDF is shared read-only). */
static pthread_once_t kdf_once = PTHREAD_ONCE_INIT;
static EVP_KDF *kdf_hkdf, *kdf_prf;

static void
kdf_fetch(void)
{
	kdf_hkdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
	kdf_prf = EVP_KDF_fetch(NULL, "TLS1-PRF", NULL);
}

static EVP_KDF_CTX *
kdf_ctx(bool hkdf)
{
	EVP_KDF *kdf;

	pthread_once(&kdf_once, kdf_fetch);
	kdf = hkdf ? kdf_hkdf : kdf_prf;
	return kdf != NULL ? EVP_KDF_CTX_new(kdf) : NULL;
}

/* HKDF-Expand-Label(secret, label, "", len) of TLS 1.3. */
static int
expand_label(const char *md, const uint8_t *secret, size_t slen, const char *label, uint8_t *out,
	     size_t len)
{
	uint8_t info[2 + 1 + 6 + 16 + 1];
	size_t ll = strlen(label), n = 0;
	EVP_KDF_CTX *kc = kdf_ctx(true);
	int mode = EVP_KDF_HKDF_MODE_EXPAND_ONLY, ok;
	OSSL_PARAM p[5];

	info[n++] = (uint8_t)(len >> 8);
	info[n++] = (uint8_t)len;
	info[n++] = (uint8_t)(6 + ll);
	memcpy(info + n, "tls13 ", 6);
	n += 6;
	memcpy(info + n, label, ll);
	n += ll;
	info[n++] = 0; /* no context */
	p[0] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)md, 0);
	p[1] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)secret, slen);
	p[2] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info, n);
	p[3] = OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, &mode);
	p[4] = OSSL_PARAM_construct_end();
	ok = kc != NULL && EVP_KDF_derive(kc, out, len, p) == 1;
	EVP_KDF_CTX_free(kc);
	return ok ? 0 : -EIO;
}

/* TLS 1.2's key block: PRF(master, "key expansion", server random + client random). */
static int
key_block(const char *md, SSL *ssl, uint8_t *out, size_t len)
{
	uint8_t master[64], seed[13 + 2 * SSL3_RANDOM_SIZE];
	size_t mlen = SSL_SESSION_get_master_key(SSL_get_session(ssl), master, sizeof(master));
	EVP_KDF_CTX *kc = kdf_ctx(false);
	OSSL_PARAM p[4];
	int ok;

	memcpy(seed, "key expansion", 13);
	SSL_get_server_random(ssl, seed + 13, SSL3_RANDOM_SIZE);
	SSL_get_client_random(ssl, seed + 13 + SSL3_RANDOM_SIZE, SSL3_RANDOM_SIZE);
	p[0] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)md, 0);
	p[1] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SECRET, master, mlen);
	p[2] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SEED, seed, sizeof(seed));
	p[3] = OSSL_PARAM_construct_end();
	ok = mlen > 0 && kc != NULL && EVP_KDF_derive(kc, out, len, p) == 1;
	EVP_KDF_CTX_free(kc);
	OPENSSL_cleanse(master, sizeof(master));
	return ok ? 0 : -EIO;
}

const char *
cr__tls_ktls_refusal(SSL *ssl, const struct tls_ktls *k)
{
	const SSL_CIPHER *ci = SSL_get_current_cipher(ssl);
	int nid = ci != NULL ? SSL_CIPHER_get_cipher_nid(ci) : NID_undef;
	int version = SSL_version(ssl);

	if ((nid != NID_aes_128_gcm && nid != NID_aes_256_gcm) ||
	    SSL_CIPHER_get_handshake_digest(ci) == NULL ||
	    (version != TLS1_2_VERSION && version != TLS1_3_VERSION))
		return "not AES-GCM";
	/* The server's tickets come after our Finished, any number, any time: waiting for
	 * "the last one" has no end. A TLS 1.2 client has them all before the server's
	 * Finished. */
	if (version == TLS1_3_VERSION && !SSL_is_server(ssl))
		return "client, TLS 1.3";
	if (k->rekeyed)
		return "KeyUpdate";
	if (!k->counting[RX] || !k->counting[TX])
		return "no keys";
	return NULL;
}

int
cr__tls_ktls_info(SSL *ssl, const struct tls_ktls *k, bool tx, struct tls_ktls_info *out)
{
	const SSL_CIPHER *ci = SSL_get_current_cipher(ssl);
	const EVP_MD *md = ci != NULL ? SSL_CIPHER_get_handshake_digest(ci) : NULL;
	int nid = ci != NULL ? SSL_CIPHER_get_cipher_nid(ci) : NID_undef;
	int dir = tx ? TX : RX, version = SSL_version(ssl), rc;
	bool ours_client = !SSL_is_server(ssl);
	size_t klen = nid == NID_aes_128_gcm ? 16 : 32;
	uint8_t key[32], iv[12], block[2 * 32 + 2 * 4];
	struct tls12_crypto_info_aes_gcm_256 *g = &out->u.gcm256;
	unsigned i;

	memset(out, 0, sizeof(*out));
	if (cr__tls_ktls_refusal(ssl, k) != NULL)
		return -ENOTSUP;
	if (version == TLS1_3_VERSION) {
		if (k->secret_len[dir] != EVP_MD_get_size(md))
			return -ENOTSUP;
		rc = expand_label(EVP_MD_get0_name(md), k->secret[dir], k->secret_len[dir], "key",
				  key, klen);
		if (rc == 0)
			rc = expand_label(EVP_MD_get0_name(md), k->secret[dir], k->secret_len[dir],
					  "iv", iv, sizeof(iv));
	} else {
		/* The client's write key first: ours if we are the client and write. */
		bool client_side = tx == ours_client;

		rc = key_block(EVP_MD_get0_name(md), ssl, block, 2 * klen + 8);
		memcpy(key, block + (client_side ? 0 : klen), klen);
		memcpy(iv, block + 2 * klen + (client_side ? 0 : 4), 4);
		/* The explicit part of a TLS 1.2 nonce is ours to choose, once per record: the
		 * kernel sends this one and counts up from it. The sequence number is unique. */
		for (i = 0; i < 8; i++)
			iv[4 + i] = (uint8_t)(k->seq[dir] >> (56 - 8 * i));
		OPENSSL_cleanse(block, sizeof(block));
	}
	if (rc != 0)
		return rc;
	g->info.version = version == TLS1_3_VERSION ? TLS_1_3_VERSION : TLS_1_2_VERSION;
	g->info.cipher_type = klen == 16 ? TLS_CIPHER_AES_GCM_128 : TLS_CIPHER_AES_GCM_256;
	/* The 128 and 256 layouts agree but for the key's length. */
	if (klen == 16) {
		struct tls12_crypto_info_aes_gcm_128 *s = &out->u.gcm128;

		memcpy(s->key, key, 16);
		memcpy(s->salt, iv, 4);
		memcpy(s->iv, iv + 4, 8);
		for (i = 0; i < 8; i++)
			s->rec_seq[i] = (uint8_t)(k->seq[dir] >> (56 - 8 * i));
		out->len = sizeof(*s);
	} else {
		memcpy(g->key, key, 32);
		memcpy(g->salt, iv, 4);
		memcpy(g->iv, iv + 4, 8);
		for (i = 0; i < 8; i++)
			g->rec_seq[i] = (uint8_t)(k->seq[dir] >> (56 - 8 * i));
		out->len = sizeof(*g);
	}
	OPENSSL_cleanse(key, sizeof(key));
	OPENSSL_cleanse(iv, sizeof(iv));
	return 0;
}

void
cr__tls_ktls_forget(struct tls_ktls *k)
{
	OPENSSL_cleanse(k, sizeof(*k));
}
