/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Contexts: the settings, and the set of SSL_CTXs (one per certificate) that a reload
 * replaces. Lcores only read them. A handshake takes a counted reference on the current
 * set (cr__tls_ctx_take()); a reload publishes a new set and then waits until no lcore is
 * between loading the old pointer and counting its reference (each lcore's `taking`
 * flag), so the context's own reference on the old set can go: the set is freed when the
 * last connection that took it ends.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "cr_reactor.h"
#include "tls_internal.h"
#include "tls_ktls.h"

#define L cr__tls_log
#define DEFAULT_HANDSHAKE_MS 10000u
/* Forward secrecy and an AEAD only, as Mozilla's "intermediate" profile. */
#define DEFAULT_CIPHERS "ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL"

struct cr_tls_ctx {
	struct cr_tls_config cfg; /* its strings point into the copies below */
	struct cr_tls_cert certs[CR_TLS_MAX_CERTS];
	char *strings[2 * CR_TLS_MAX_CERTS + 6];
	unsigned n_strings;
	int min_proto, max_proto;
	uint8_t alpn[256]; /* wire format: length-prefixed names */
	unsigned alpn_len;
	_Atomic(struct tls_certset *) cur;
	_Atomic unsigned refs; /* the caller's, plus one per live set */
	_Atomic unsigned reloads;
	/* Per lcore, and one more shared by threads that are not lcores (a count, so two of
	 * them may take at once). */
	struct {
		_Alignas(64) _Atomic unsigned taking;
	} lc[CR_MAX_LCORES + 1];
	/* A client's session to resume, per lcore: each touched by its lcore only
	 * (tls_client.c), freed with the context. */
	SSL_SESSION *sessions[CR_MAX_LCORES];
};

static int
fail(char *err, size_t len, int rc, const char *fmt, const char *a, const char *b)
{
	if (err != NULL)
		snprintf(err, len, fmt, a, b);
	ERR_clear_error();
	return rc;
}

static char *
keep(struct cr_tls_ctx *ctx, const char *s)
{
	char *d;

	if (s == NULL)
		return NULL;
	d = strdup(s);
	if (d != NULL)
		ctx->strings[ctx->n_strings++] = d;
	return d;
}

static int
parse_protocols(struct cr_tls_ctx *ctx, const char *p, char *err, size_t len)
{
	if (p == NULL || strcmp(p, "TLSv1.2,TLSv1.3") == 0 || strcmp(p, "TLSv1.3,TLSv1.2") == 0) {
		ctx->min_proto = TLS1_2_VERSION;
		ctx->max_proto = TLS1_3_VERSION;
	} else if (strcmp(p, "TLSv1.2") == 0) {
		ctx->min_proto = ctx->max_proto = TLS1_2_VERSION;
	} else if (strcmp(p, "TLSv1.3") == 0) {
		ctx->min_proto = ctx->max_proto = TLS1_3_VERSION;
	} else {
		return fail(err, len, -EINVAL,
			    "TLS protocols '%s': expected TLSv1.2, TLSv1.3 or TLSv1.2,TLSv1.3%s",
			    p, "");
	}
	return 0;
}

static int
parse_alpn(struct cr_tls_ctx *ctx, const char *a, char *err, size_t len)
{
	const char *p = a;

	ctx->alpn_len = 0;
	if (a == NULL)
		return 0;
	while (*p != '\0') {
		size_t n = strcspn(p, ",");

		if (n == 0 || n > 255 || ctx->alpn_len + 1 + n > sizeof(ctx->alpn))
			return fail(err, len, -EINVAL,
				    "ALPN list '%s': names of 1 to 255 bytes, comma-separated, "
				    "255 bytes in all%s", a, "");
		ctx->alpn[ctx->alpn_len++] = (uint8_t)n;
		memcpy(ctx->alpn + ctx->alpn_len, p, n);
		ctx->alpn_len += (unsigned)n;
		p += n;
		if (*p == ',')
			p++;
	}
	return 0;
}

/* A readable regular file, or one line saying why not. */
static int
check_file(const char *what, const char *path, char *err, size_t len)
{
	struct stat st;
	int fd;

	if (path == NULL || *path == '\0')
		return fail(err, len, -EINVAL, "TLS %s: no file given%s", what, "");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0) {
		char why[96];

		snprintf(why, sizeof(why), ": %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return fail(err, len, -EINVAL, "%s%s", path, why);
	}
	close(fd);
	if (!S_ISREG(st.st_mode))
		return fail(err, len, -EINVAL, "%s: not a regular file (TLS %s)", path, what);
	return 0;
}

static void
warn_cert(const char *cert_file, const char *key_file, SSL_CTX *sc)
{
	X509 *x = SSL_CTX_get0_certificate(sc);
	struct stat st;

	if (x != NULL && X509_cmp_current_time(X509_get0_notAfter(x)) < 0)
		CR_LOG(L, WARNING, "%s: certificate expired", cert_file);
	if (stat(key_file, &st) == 0 && (st.st_mode & S_IROTH))
		CR_LOG(L, WARNING, "%s: private key readable by every user (chmod 600)", key_file);
}

static int
load_cert(SSL_CTX *sc, const struct cr_tls_cert *c, char *err, size_t len)
{
	char why[160];
	int rc;

	rc = check_file("certificate", c->cert_file, err, len);
	if (rc == 0)
		rc = check_file("key", c->key_file, err, len);
	if (rc != 0)
		return rc;
	if (SSL_CTX_use_certificate_chain_file(sc, c->cert_file) != 1)
		return fail(err, len, -EINVAL, "%s: not a PEM certificate (%s)", c->cert_file,
			    cr__tls_errstr(why, sizeof(why)));
	if (SSL_CTX_use_PrivateKey_file(sc, c->key_file, SSL_FILETYPE_PEM) != 1) {
		if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH)
			return fail(err, len, -EINVAL, "%s: key does not match certificate %s",
				    c->key_file, c->cert_file);
		return fail(err, len, -EINVAL, "%s: not a PEM private key (%s)", c->key_file,
			    cr__tls_errstr(why, sizeof(why)));
	}
	if (SSL_CTX_check_private_key(sc) != 1)
		return fail(err, len, -EINVAL, "%s: key does not match certificate %s",
			    c->key_file, c->cert_file);
	warn_cert(c->cert_file, c->key_file, sc);
	return 0;
}

static int
alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
	    unsigned int inlen, void *arg)
{
	struct cr_tls_ctx *ctx = arg;
	unsigned char *sel;

	(void)ssl;
	/* Ours first: the first of our names the client offers. */
	if (SSL_select_next_proto(&sel, outlen, ctx->alpn, ctx->alpn_len, in, inlen) !=
	    OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_NOACK;
	*out = sel;
	return SSL_TLSEXT_ERR_OK;
}

static int
sni_select(SSL *ssl, int *alert, void *arg)
{
	struct tls_certset *set = arg;
	const char *name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
	unsigned i;

	(void)alert;
	if (name == NULL)
		return SSL_TLSEXT_ERR_NOACK;
	for (i = 1; i < set->n; i++) {
		X509 *x = SSL_CTX_get0_certificate(set->ctx[i]);

		if (x != NULL && X509_check_host(x, name, 0, 0, NULL) == 1) {
			SSL_set_SSL_CTX(ssl, set->ctx[i]);
			return SSL_TLSEXT_ERR_OK;
		}
	}
	return SSL_TLSEXT_ERR_OK; /* the default certificate */
}

static int
setup_verify(struct cr_tls_ctx *ctx, SSL_CTX *sc, char *err, size_t len)
{
	const struct cr_tls_config *cfg = &ctx->cfg;
	char why[160];
	int mode = SSL_VERIFY_NONE;

	if (cfg->ca_file != NULL) {
		if (check_file("CA file", cfg->ca_file, err, len) != 0)
			return -EINVAL;
		if (SSL_CTX_load_verify_locations(sc, cfg->ca_file, NULL) != 1)
			return fail(err, len, -EINVAL, "%s: no PEM CA certificate (%s)",
				    cfg->ca_file, cr__tls_errstr(why, sizeof(why)));
	} else if (cfg->client && cfg->verify != CR_TLS_VERIFY_NONE) {
		(void)SSL_CTX_set_default_verify_paths(sc);
	}
	if (cfg->client) {
		if (cfg->verify != CR_TLS_VERIFY_NONE)
			mode = SSL_VERIFY_PEER;
	} else if (cfg->verify == CR_TLS_VERIFY_OPTIONAL) {
		mode = SSL_VERIFY_PEER;
	} else if (cfg->verify == CR_TLS_VERIFY_REQUIRED) {
		mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
	}
	if (!cfg->client && mode != SSL_VERIFY_NONE) {
		STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(cfg->ca_file);

		if (names != NULL)
			SSL_CTX_set_client_CA_list(sc, names);
	}
	SSL_CTX_set_verify(sc, mode, NULL);
	return 0;
}

/* One SSL_CTX with the settings, and certificate @p c (NULL: none). */
static SSL_CTX *
make_ssl_ctx(struct cr_tls_ctx *ctx, const struct cr_tls_cert *c, char *err, size_t len)
{
	const struct cr_tls_config *cfg = &ctx->cfg;
	SSL_CTX *sc = SSL_CTX_new(cfg->client ? TLS_client_method() : TLS_server_method());

	if (sc == NULL) {
		fail(err, len, -ENOMEM, "TLS: out of memory%s%s", "", "");
		errno = ENOMEM;
		return NULL;
	}
	errno = EINVAL;
	SSL_CTX_set_min_proto_version(sc, ctx->min_proto);
	SSL_CTX_set_max_proto_version(sc, ctx->max_proto);
	SSL_CTX_set_options(sc, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
					SSL_OP_NO_COMPRESSION);
	if (SSL_CTX_set_cipher_list(sc, cfg->ciphers != NULL ? cfg->ciphers : DEFAULT_CIPHERS) !=
	    1) {
		fail(err, len, -EINVAL, "TLS 1.2 ciphers '%s': no cipher OpenSSL knows%s",
		     cfg->ciphers, "");
		goto out_free;
	}
	if (cfg->ciphersuites != NULL && SSL_CTX_set_ciphersuites(sc, cfg->ciphersuites) != 1) {
		fail(err, len, -EINVAL, "TLS 1.3 ciphersuites '%s': expected names such as "
					"TLS_AES_128_GCM_SHA256%s", cfg->ciphersuites, "");
		goto out_free;
	}
	if (c != NULL && load_cert(sc, c, err, len) != 0)
		goto out_free;
	if (setup_verify(ctx, sc, err, len) != 0)
		goto out_free;
	if (cr__tls_ctx_ktls(ctx)) {
		/* The kTLS hand-over's keys and record counts (tls_ktls_keys.c). Not
		 * SSL_OP_ENABLE_KTLS: OpenSSL hands over only on a socket BIO of its own. */
		SSL_CTX_set_keylog_callback(sc, cr__tls_ktls_keylog);
		SSL_CTX_set_msg_callback(sc, cr__tls_ktls_msg);
	}
	if (cfg->client) {
		if (ctx->alpn_len != 0)
			(void)SSL_CTX_set_alpn_protos(sc, ctx->alpn, ctx->alpn_len);
		cr__tls_client_install(ctx, sc);
	} else {
		/* Stateless tickets only: no cache shared (and locked) between lcores. */
		SSL_CTX_set_session_cache_mode(sc, SSL_SESS_CACHE_OFF);
		cr__tls_tickets_install(sc);
		if (ctx->alpn_len != 0)
			SSL_CTX_set_alpn_select_cb(sc, alpn_select, ctx);
	}
	return sc;

out_free:
	SSL_CTX_free(sc);
	errno = EINVAL;
	return NULL;
}

static void
certset_free(struct tls_certset *set)
{
	unsigned i;

	for (i = 0; i < set->n; i++)
		SSL_CTX_free(set->ctx[i]);
	free(set);
}

static struct tls_certset *
certset_new(struct cr_tls_ctx *ctx, char *err, size_t len)
{
	struct tls_certset *set = calloc(1, sizeof(*set));
	unsigned i, n = ctx->cfg.n_certs > 0 ? ctx->cfg.n_certs : 1;

	if (set == NULL) {
		fail(err, len, -ENOMEM, "TLS: out of memory%s%s", "", "");
		errno = ENOMEM;
		return NULL;
	}
	for (i = 0; i < n; i++) {
		set->ctx[i] = make_ssl_ctx(ctx, ctx->cfg.n_certs > 0 ? &ctx->certs[i] : NULL, err,
					   len);
		if (set->ctx[i] == NULL) {
			int e = errno;

			certset_free(set);
			errno = e;
			return NULL;
		}
		set->n = i + 1;
	}
	if (!ctx->cfg.client && set->n > 1) {
		SSL_CTX_set_tlsext_servername_callback(set->ctx[0], sni_select);
		SSL_CTX_set_tlsext_servername_arg(set->ctx[0], set);
	}
	set->owner = ctx;
	atomic_init(&set->refs, 1);
	atomic_fetch_add_explicit(&ctx->refs, 1, memory_order_relaxed);
	return set;
}

static void
ctx_put(struct cr_tls_ctx *ctx)
{
	unsigned i;

	/* acq_rel: the last one sees every other holder's use done. */
	if (atomic_fetch_sub_explicit(&ctx->refs, 1, memory_order_acq_rel) != 1)
		return;
	cr__tls_client_sessions_free(ctx->sessions, CR_MAX_LCORES);
	for (i = 0; i < ctx->n_strings; i++)
		free(ctx->strings[i]);
	free(ctx);
}

void
cr__tls_certset_put(struct tls_certset *set)
{
	struct cr_tls_ctx *owner;

	if (atomic_fetch_sub_explicit(&set->refs, 1, memory_order_acq_rel) != 1)
		return;
	owner = set->owner;
	certset_free(set);
	ctx_put(owner);
}

struct tls_certset *
cr__tls_ctx_take(struct cr_tls_ctx *ctx)
{
	unsigned lc = cr_lcore_id();
	struct tls_certset *set;

	if (lc >= CR_MAX_LCORES)
		lc = CR_MAX_LCORES;
	/* seq_cst increment, then seq_cst load of cur: ordered against the reload's seq_cst
	 * exchange of cur, then its load of this count (a store-load pair: acquire/release
	 * cannot order it). Either the reload sees us taking, or we see its new set. */
	atomic_fetch_add(&ctx->lc[lc].taking, 1);
	set = atomic_load(&ctx->cur);
	atomic_fetch_add_explicit(&set->refs, 1, memory_order_relaxed);
	/* release: pairs with the load in wait_takers(): our count is in before we leave. */
	atomic_fetch_sub_explicit(&ctx->lc[lc].taking, 1, memory_order_release);
	return set;
}

static void
wait_takers(struct cr_tls_ctx *ctx)
{
	unsigned i;

	for (i = 0; i <= CR_MAX_LCORES; i++)
		while (atomic_load(&ctx->lc[i].taking) != 0) /* seq_cst: see cr__tls_ctx_take() */
			sched_yield();
}

static int
copy_config(struct cr_tls_ctx *ctx, const struct cr_tls_config *cfg, char *err, size_t len)
{
	unsigned i;

	ctx->cfg = *cfg;
	if (cfg->n_certs > CR_TLS_MAX_CERTS || (cfg->n_certs > 0 && cfg->certs == NULL))
		return fail(err, len, -EINVAL, "TLS: %s certificates at most%s", "16", "");
	if (!cfg->client && cfg->n_certs == 0)
		return fail(err, len, -EINVAL, "TLS server: no certificate and key given%s%s", "",
			    "");
	if (cfg->client && cfg->n_certs > 1)
		return fail(err, len, -EINVAL, "TLS client: %s certificate at most%s", "one", "");
	if (!cfg->client && cfg->verify != CR_TLS_VERIFY_NONE && cfg->ca_file == NULL)
		return fail(err, len, -EINVAL,
			    "TLS: client certificates need a CA file to check them%s%s", "", "");
	if (cfg->server_name != NULL && !cr__tls_server_name_ok(cfg->server_name))
		return fail(err, len, -EINVAL,
			    "TLS server name '%s': expected a host name or an IP address%s",
			    cfg->server_name, "");
	for (i = 0; i < cfg->n_certs; i++) {
		ctx->certs[i].cert_file = keep(ctx, cfg->certs[i].cert_file);
		ctx->certs[i].key_file = keep(ctx, cfg->certs[i].key_file);
	}
	ctx->cfg.certs = ctx->certs;
	ctx->cfg.ca_file = keep(ctx, cfg->ca_file);
	ctx->cfg.ciphers = keep(ctx, cfg->ciphers);
	ctx->cfg.ciphersuites = keep(ctx, cfg->ciphersuites);
	ctx->cfg.server_name = keep(ctx, cfg->server_name);
	ctx->cfg.protocols = NULL;
	ctx->cfg.alpn = NULL;
	if (ctx->cfg.handshake_timeout_ms == 0)
		ctx->cfg.handshake_timeout_ms = DEFAULT_HANDSHAKE_MS;
	if (parse_protocols(ctx, cfg->protocols, err, len) != 0)
		return -EINVAL;
	return parse_alpn(ctx, cfg->alpn, err, len);
}

struct cr_tls_ctx *
cr_tls_ctx_new(const struct cr_tls_config *cfg, char *err, size_t errlen)
{
	struct cr_tls_ctx *ctx;
	struct tls_certset *set;
	int rc;

	if (cfg == NULL) {
		errno = EINVAL;
		return NULL;
	}
	ctx = calloc(1, sizeof(*ctx));
	if (ctx == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	atomic_init(&ctx->refs, 1);
	if (cfg->ktls == CR_TLS_KTLS_OFF)
		cr__tls_ktls_turned_off();
	rc = copy_config(ctx, cfg, err, errlen);
	if (rc != 0)
		goto out_free;
	set = certset_new(ctx, err, errlen);
	if (set == NULL) {
		rc = -errno;
		goto out_free;
	}
	atomic_init(&ctx->cur, set);
	return ctx;

out_free:
	ctx_put(ctx);
	errno = -rc;
	return NULL;
}

int
cr_tls_ctx_reload(struct cr_tls_ctx *ctx, char *err, size_t errlen)
{
	struct tls_certset *set, *old;

	if (ctx == NULL)
		return -EINVAL;
	set = certset_new(ctx, err, errlen);
	if (set == NULL)
		return -errno;
	old = atomic_exchange(&ctx->cur, set); /* seq_cst: see cr__tls_ctx_take() */
	wait_takers(ctx);
	cr__tls_certset_put(old);
	atomic_fetch_add_explicit(&ctx->reloads, 1, memory_order_relaxed);
	CR_LOG(L, NOTICE, "TLS: certificates and keys reloaded (%u)", set->n);
	return 0;
}

unsigned
cr_tls_ctx_reloads(const struct cr_tls_ctx *ctx)
{
	return atomic_load_explicit(&ctx->reloads, memory_order_relaxed);
}

void
cr_tls_ctx_free(struct cr_tls_ctx *ctx)
{
	if (ctx == NULL)
		return;
	cr__tls_certset_put(atomic_load(&ctx->cur));
	ctx_put(ctx);
}

uint32_t
cr__tls_ctx_handshake_ms(const struct cr_tls_ctx *ctx)
{
	return ctx->cfg.handshake_timeout_ms;
}

bool
cr__tls_ctx_server(const struct cr_tls_ctx *ctx)
{
	return !ctx->cfg.client;
}

const char *
cr__tls_ctx_server_name(const struct cr_tls_ctx *ctx)
{
	return ctx->cfg.server_name;
}

bool cr__tls_ktls_try_anyway;

bool
cr__tls_ctx_ktls(const struct cr_tls_ctx *ctx)
{
	return ctx->cfg.ktls == CR_TLS_KTLS_AUTO &&
	       (cr_tls_ktls_available() || cr__tls_ktls_try_anyway);
}

SSL_SESSION **
cr__tls_ctx_session_slot(struct cr_tls_ctx *ctx)
{
	unsigned lc = cr_lcore_id();

	return lc < CR_MAX_LCORES ? &ctx->sessions[lc] : NULL;
}
