/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Certificates for the lib/tls suites, made at test time in the suite's private directory
 * (ut_tmpdir): a CA, a server certificate for "localhost" and "a.test", one for "b.test",
 * a client certificate, all signed by the CA (ECDSA P-256), and a second CA that signed
 * none of them. Never committed: each run makes its own keys.
 */
#ifndef UT_CERTS_H
#define UT_CERTS_H

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "ut_tmpdir.h"

static char ut_ca[128], ut_other_ca[128], ut_cert[128], ut_key[128], ut_cert_b[128],
	ut_key_b[128], ut_ccert[128], ut_ckey[128];

static void
ut_path(char *out, const char *name)
{
	snprintf(out, 128, "%s/%s", ut_tmpdir, name);
}

static int
ut_write_key(EVP_PKEY *k, const char *path)
{
	FILE *f = fopen(path, "w");
	int ok;

	if (f == NULL)
		return -1;
	ok = PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL);
	fclose(f);
	chmod(path, 0600);
	return ok == 1 ? 0 : -1;
}

static int
ut_write_cert(X509 *x, const char *path)
{
	FILE *f = fopen(path, "w");
	int ok;

	if (f == NULL)
		return -1;
	ok = PEM_write_X509(f, x);
	fclose(f);
	return ok == 1 ? 0 : -1;
}

static void
ut_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX v3;
	X509_EXTENSION *e;

	X509V3_set_ctx(&v3, issuer, x, NULL, NULL, 0);
	e = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
	X509_add_ext(x, e, -1);
	X509_EXTENSION_free(e);
}

/* A certificate for @p cn, signed by @p ca_key (self-signed when @p ca is NULL). */
static X509 *
ut_make_cert(EVP_PKEY *key, const char *cn, const char *san, X509 *ca, EVP_PKEY *ca_key,
	     long days)
{
	static long serial = 1;
	X509 *x = X509_new();

	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
	X509_gmtime_adj(X509_getm_notBefore(x), days < 0 ? days * 86400 * 2 : 0);
	X509_gmtime_adj(X509_getm_notAfter(x), days * 86400);
	X509_set_pubkey(x, key);
	X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
				   (const unsigned char *)cn, -1, -1, 0);
	X509_set_issuer_name(x, ca != NULL ? X509_get_subject_name(ca) : X509_get_subject_name(x));
	if (ca == NULL) {
		ut_ext(x, x, NID_basic_constraints, "critical,CA:TRUE");
		ut_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign");
	} else {
		ut_ext(x, ca, NID_basic_constraints, "CA:FALSE");
	}
	if (san != NULL)
		ut_ext(x, ca != NULL ? ca : x, NID_subject_alt_name, san);
	X509_sign(x, ca_key != NULL ? ca_key : key, EVP_sha256());
	return x;
}

/* A leaf signed by @p ca into @p cert_path / @p key_path. */
static int
ut_make_leaf(X509 *ca, EVP_PKEY *ca_key, const char *cn, const char *san, long days,
	     const char *cert_path, const char *key_path)
{
	EVP_PKEY *k = EVP_EC_gen("P-256");
	X509 *x = ut_make_cert(k, cn, san, ca, ca_key, days);
	int rc = ut_write_key(k, key_path) | ut_write_cert(x, cert_path);

	X509_free(x);
	EVP_PKEY_free(k);
	return rc;
}

/* Make every file above. @return 0, or 1 (a suite init fails). */
static int
ut_certs_make(const char *prefix)
{
	EVP_PKEY *ca_key, *other_key;
	X509 *ca, *other;
	char p[128];
	int rc = 0;

	if (ut_tmpdir_make(prefix) != 0)
		return 1;
	ut_path(ut_ca, "ca.pem");
	ut_path(ut_other_ca, "other-ca.pem");
	ut_path(ut_cert, "server.pem");
	ut_path(ut_key, "server.key");
	ut_path(ut_cert_b, "b.pem");
	ut_path(ut_key_b, "b.key");
	ut_path(ut_ccert, "client.pem");
	ut_path(ut_ckey, "client.key");
	ca_key = EVP_EC_gen("P-256");
	other_key = EVP_EC_gen("P-256");
	ca = ut_make_cert(ca_key, "coreact test CA", NULL, NULL, NULL, 2);
	other = ut_make_cert(other_key, "another CA", NULL, NULL, NULL, 2);
	rc |= ut_write_cert(ca, ut_ca);
	rc |= ut_write_cert(other, ut_other_ca);
	ut_path(p, "ca.key");
	rc |= ut_write_key(ca_key, p);
	rc |= ut_make_leaf(ca, ca_key, "localhost", "DNS:localhost,DNS:a.test,IP:127.0.0.1", 2,
			   ut_cert, ut_key);
	rc |= ut_make_leaf(ca, ca_key, "b.test", "DNS:b.test", 2, ut_cert_b, ut_key_b);
	rc |= ut_make_leaf(ca, ca_key, "client", NULL, 2, ut_ccert, ut_ckey);
	X509_free(ca);
	X509_free(other);
	EVP_PKEY_free(ca_key);
	EVP_PKEY_free(other_key);
	return rc != 0 ? 1 : 0;
}

#endif /* UT_CERTS_H */
