/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A TLS connection moving to another lcore (lib/net's cr_conn_move(), a retire): the
 * layer's half of the hand-over. The session goes on: the same SSL, its keys, its
 * sequence numbers and its memory BIOs travel, so the peer sees one connection and no
 * new handshake.
 *
 * When it may move (cr__tls_movable(), asked by lib/net when the move starts and again at
 * the hand-over, with lib/net's own checks and the app's at_boundary through
 * wire_boundary()):
 *   - the handshake is done (the app's on_open ran): its timer is stopped, and no
 *     handshake message is half-way in either BIO;
 *   - no close_notify either way, no failure: the session is plainly open;
 *   - no hand-over to the kernel half-way (KTLS_STOPPING: reads stopped by the layer,
 *     which lib/net does not carry); one wanted (KTLS_WANT) goes on from the new lcore,
 *     one done (KTLS_KERNEL) is the socket's own state and travels with it;
 *   - no part of a record held either way (wire_boundary(): the framing seen is at a
 *     record's end, SSL_has_pending() false, both BIOs empty), which lib/net asks as
 *     at_boundary before the hand-over.
 * So nothing of the old lcore's pools is held (DESIGN rule 11): the engine copies each
 * receive buffer into its read BIO inside on_data and holds none, lib/net's queue is empty,
 * and the BIOs' own memory (OpenSSL's heap, not a pool) is empty. The thread-local
 * plaintext buffer of the engine is scratch within one call.
 *
 * What travels: struct tls_conn by value, in the move's message (lib/net allocates it
 * with the message: nothing here can fail on the old lcore). What stays and is rebuilt:
 * the slot (a per-lcore array indexed by cr_conn_index(): the new lcore's slot is taken
 * in cr__tls_move_in()), the timers (each lcore's wheel is its own: stopped here,
 * initialised there by cr__tls_conn_attach()), the SSL's app data (it points into the
 * slot), the counters (per-lcore counts of what happened there: a handshake stays
 * counted where it was made), a client context's session slot (per lcore: a ticket that
 * arrives after the move is kept by the new lcore, as any ticket arriving there is).
 * The certificate set's reference travels with the state (an atomic count, any thread).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "tls_conn.h"

bool
cr__tls_movable(const struct cr_conn *c)
{
	const struct tls_conn *tc = cr_conn_layer_data(c);

	return tc != NULL && tc->in_use && tc->app_open && tc->s.established && !tc->s.failed &&
	       !tc->s.shut_sent && !tc->s.peer_closed && tc->ktls != KTLS_STOPPING && !tc->admitted;
}

void
cr__tls_move_out(struct cr_conn *c, void *state)
{
	struct tls_conn *tc = cr_conn_layer_data(c);

	/* lib/net asked cr__tls_movable() just before on_move_out: a broken invariant. */
	if (tc == NULL || !cr__tls_movable(c) ||
	    (tc->ktls != KTLS_KERNEL && !cr__tls_session_at_record_end(&tc->s)))
		abort();
	cr_timer_stop(&tc->hs_timer);
	cr_timer_stop(&tc->ktls_timer);
	/* Nothing calls into this SSL until the new lcore attaches it: no callback may find
	 * the app data pointing at this slot meanwhile. */
	SSL_set_app_data(tc->s.ssl, NULL);
	memcpy(state, tc, sizeof(*tc));
	/* The slot forgets it: lib/net's end and release that follow find no state. */
	OPENSSL_cleanse(&tc->kt, sizeof(tc->kt));
	tc->in_use = false;
	tc->c = NULL;
	tc->s.ssl = NULL;
	tc->set = NULL;
	cr_conn_set_layer_data(c, NULL);
}

int
cr__tls_move_in(struct cr_conn *c, void *state)
{
	struct tls_conn *tc = cr__tls_conn_slot(c);

	if (tc == NULL) {
		cr__tls_move_drop(cr_conn_layer_arg(c), state);
		return -ENOMEM;
	}
	memcpy(tc, state, sizeof(*tc));
	OPENSSL_cleanse(state, sizeof(*tc)); /* the kTLS secrets: in the slot only now */
	cr__tls_conn_attach(tc, c);
	return 0;
}

void
cr__tls_move_drop(void *layer_arg, void *state)
{
	struct tls_conn *tc = state;

	(void)layer_arg;
	cr__tls_session_fini(&tc->s);
	cr__tls_certset_put(tc->set);
	OPENSSL_cleanse(state, sizeof(*tc));
}
