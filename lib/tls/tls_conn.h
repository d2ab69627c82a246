/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A TLS connection's state (tls_conn.c), shared with its moves (tls_move.c). Never
 * installed.
 */
#ifndef TLS_CONN_H
#define TLS_CONN_H

#include <stdbool.h>
#include <stdint.h>

#include "cr_net.h"
#include "cr_timer.h"
#include "tls_internal.h"
#include "tls_ktls.h"

/*
 * One per connection slot of an lcore (cr_conn_index()), in that lcore's array. A moved
 * connection's is copied into the move's message and out of it into a slot of the new
 * lcore (tls_move.c): nothing in it may point into the struct itself but what
 * cr__tls_conn_attach() sets again (the session's arg, the SSL's app data, the timers).
 */
struct tls_conn {
	struct tls_session s;
	struct cr_conn *c;
	struct tls_certset *set;
	struct cr_timer hs_timer;
	bool in_use;
	bool app_open; /* the app's on_open ran (a server's, after the handshake) */
	bool client;
	bool admitted; /* within a send cr_conn_send_room() admitted whole, or the last words */
	int fail_err;  /* a failed handshake (a client's) or a broken record: for on_close */
	/* kTLS (the hand-over, tls_conn.c): where it stands, its tries, its keys. */
	uint8_t ktls;
	uint16_t ktls_tries;
	struct cr_timer ktls_timer;
	struct tls_ktls kt;
};

/* The hand-over: not wanted or given up; waiting for a quiet wire; reads stopped,
 * waiting for the last receive; done, records in the kernel. */
enum { KTLS_NO = 0, KTLS_WANT, KTLS_STOPPING, KTLS_KERNEL };

/* The calling lcore's state for slot cr_conn_index(@p c) (made at its first use), or
 * NULL (no memory). On @p c's lcore. */
struct tls_conn *cr__tls_conn_slot(struct cr_conn *c);

/* Bind @p tc (its state in place, its slot @p c's) to @p c on this lcore: the session's
 * owner, the SSL's app data for the kTLS capture, the timers on this lcore's wheel (the
 * kTLS one started when a hand-over is wanted), the layer's pointer. On @p c's lcore. */
void cr__tls_conn_attach(struct tls_conn *tc, struct cr_conn *c);

/* Moves (tls_move.c): struct cr_conn_layer's members; the state is a struct tls_conn. */
bool cr__tls_movable(const struct cr_conn *c);
void cr__tls_move_out(struct cr_conn *c, void *state);
int cr__tls_move_in(struct cr_conn *c, void *state);
void cr__tls_move_drop(void *layer_arg, void *state);

#endif /* TLS_CONN_H */
