/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One session-ticket key set for the process. Every context's SSL_CTX encrypts its
 * tickets with the current key and accepts the current and the previous one, so a ticket
 * issued on one lcore (or by a context a reload replaced) resumes on any other.
 *
 * The keys live in a ring of TICKET_SLOTS slots and a generation: slot gen % TICKET_SLOTS
 * is current, the one before it previous. A rotation fills the next slot, then publishes
 * the generation (release: pairs with the acquire in ticket_cb()). Readers never lock:
 * the slot a rotation writes is one no reader uses unless it loaded the generation two
 * rotations ago and is still inside this callback — rotations are at least a second
 * apart (cr_tls_tickets_rotate_every()), so that is no thread's state on a running lcore;
 * even then the worst is a ticket that fails to decrypt, and a full handshake.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "cr_reactor.h"
#include "tls_internal.h"

#define L cr__tls_log
#define TICKET_SLOTS 4

struct ticket_key {
	uint8_t name[16];
	uint8_t aes[32];
	uint8_t hmac[32];
};

static struct ticket_key keys[TICKET_SLOTS];
static _Atomic uint64_t key_gen;
static pthread_once_t keys_once = PTHREAD_ONCE_INIT;

/* The rotation timer, on the lcore that started it. */
static struct cr_timer rotate_timer;
static uint64_t rotate_ns;
static bool rotating;

static int
fill_key(struct ticket_key *k)
{
	return RAND_bytes((uint8_t *)k, sizeof(*k)) == 1 ? 0 : -EIO;
}

static void
keys_init(void)
{
	if (fill_key(&keys[0]) != 0)
		abort(); /* no randomness: nothing in TLS can work */
}

int
cr_tls_tickets_rotate(void)
{
	uint64_t gen;
	int rc;

	pthread_once(&keys_once, keys_init);
	gen = atomic_load_explicit(&key_gen, memory_order_relaxed);
	rc = fill_key(&keys[(gen + 1) % TICKET_SLOTS]);
	if (rc != 0)
		return rc;
	/* release: pairs with the acquire in ticket_cb(): the slot is whole before it is used. */
	atomic_store_explicit(&key_gen, gen + 1, memory_order_release);
	return 0;
}

uint64_t
cr_tls_tickets_generation(void)
{
	return atomic_load_explicit(&key_gen, memory_order_acquire);
}

static void
rotate_fired(struct cr_timer *t, void *arg)
{
	(void)arg;
	if (cr_tls_tickets_rotate() != 0)
		CR_LOG(L, WARNING, "session-ticket keys: no random bytes; keys kept");
	cr_timer_start(t, rotate_ns);
}

int
cr_tls_tickets_rotate_every(uint64_t interval_ms)
{
	if (cr_lcore_id() == CR_LCORE_NONE)
		return -EPERM;
	if (interval_ms < 1000)
		return -EINVAL;
	pthread_once(&keys_once, keys_init);
	rotate_ns = interval_ms * 1000000ull;
	if (!rotating)
		cr_timer_init(&rotate_timer, rotate_fired, NULL);
	rotating = true;
	cr_timer_start(&rotate_timer, rotate_ns);
	return 0;
}

void
cr_tls_tickets_stop(void)
{
	if (rotating)
		cr_timer_stop(&rotate_timer);
	rotating = false;
}

static int
key_setup(const struct ticket_key *k, const uint8_t *iv, EVP_CIPHER_CTX *cctx,
	  EVP_MAC_CTX *hctx, int enc)
{
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, (void *)k->hmac,
						  sizeof(k->hmac)),
		OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, "SHA256", 0),
		OSSL_PARAM_construct_end(),
	};

	if (EVP_CipherInit_ex(cctx, EVP_aes_256_cbc(), NULL, k->aes, iv, enc) != 1)
		return -1;
	return EVP_MAC_CTX_set_params(hctx, params) == 1 ? 0 : -1;
}

/* OpenSSL's ticket key callback: 1 use this key, 2 use it and issue a fresh ticket,
 * 0 unknown key (full handshake), -1 error. */
static int
ticket_cb(SSL *ssl, unsigned char *name, unsigned char *iv, EVP_CIPHER_CTX *cctx,
	  EVP_MAC_CTX *hctx, int enc)
{
	/* acquire: pairs with the release in cr_tls_tickets_rotate(). */
	uint64_t gen = atomic_load_explicit(&key_gen, memory_order_acquire);
	const struct ticket_key *cur = &keys[gen % TICKET_SLOTS];
	const struct ticket_key *prev = gen > 0 ? &keys[(gen - 1) % TICKET_SLOTS] : NULL;

	if (enc) {
		memcpy(name, cur->name, sizeof(cur->name));
		if (RAND_bytes(iv, EVP_MAX_IV_LENGTH) != 1)
			return -1;
		return key_setup(cur, iv, cctx, hctx, 1) == 0 ? 1 : -1;
	}
	/* TLS 1.3 clients use a ticket once (RFC 8446, C.4; OpenSSL's client marks a resumed
	 * session used up): without a fresh ticket on each resumption, every other connection
	 * of such a client is a full handshake. 2 asks OpenSSL for new tickets. */
	if (memcmp(name, cur->name, sizeof(cur->name)) == 0)
		return key_setup(cur, iv, cctx, hctx, 0) == 0 ?
			       (SSL_version(ssl) == TLS1_3_VERSION ? 2 : 1) : -1;
	if (prev != NULL && memcmp(name, prev->name, sizeof(prev->name)) == 0)
		return key_setup(prev, iv, cctx, hctx, 0) == 0 ? 2 : -1;
	return 0;
}

void
cr__tls_tickets_install(SSL_CTX *ctx)
{
	pthread_once(&keys_once, keys_init);
	SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, ticket_cb);
}
