/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * TLS as a lib/net connection layer (struct cr_conn_layer): lib/net gives the socket's
 * events to the wire table below, which runs the record engine (tls_session.c) and calls
 * the app's own table with plaintext; the app's sends and closes come through the layer.
 *
 * Per-connection state is an array per lcore indexed by the connection's slot
 * (cr_conn_index()), made at the lcore's first TLS connection: nothing is allocated per
 * connection but what OpenSSL allocates for its SSL. A connection that moves to another
 * lcore takes its state along (tls_move.c).
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/err.h>

#include "cr_reactor.h"
#include "tls_conn.h"
#include "tls_internal.h"
#include "tls_ktls.h"

#ifndef SOL_TLS
#define SOL_TLS 282
#endif
#ifndef TCP_ULP
#define TCP_ULP 31
#endif

#define L cr__tls_log

struct cr_log_component cr__tls_log = {"lib.tls", CR_LOG_NOTICE, NULL};

__attribute__((constructor)) static void
tls_log_register(void)
{
	cr_log_register(&cr__tls_log);
}

struct tls_counters cr__tls_stats[CR_MAX_LCORES];

/* A quiet wire is looked for this often, this many times (then user space stays). */
#define KTLS_STEP_NS (1000ull * 1000)
#define KTLS_TRIES 500

/* Touched by its lcore only. */
static struct {
	struct tls_conn *conns;
	unsigned n;
} tls_lcores[CR_MAX_LCORES];

static const struct cr_conn_layer tls_layer;

static struct tls_conn *
conn_of(const struct cr_conn *c)
{
	return cr_conn_layer_data(c);
}

static const struct cr_conn_ops *
app(const struct tls_conn *tc)
{
	return cr_conn_app_ops(tc->c);
}

/*
 * The handshake failed or timed out: a server closes it quietly (the app never saw it),
 * a client's app hears @p err in on_close. A failure closes gracefully, so the alert
 * OpenSSL queued reaches the peer; a timeout has nothing to send and aborts.
 */
static void
fail_handshake(struct tls_conn *tc, int err, bool graceful)
{
	struct cr_conn *c = tc->c;

	tc->fail_err = err;
	if (graceful) {
		cr_conn_close(c); /* wire_close() tells a client's app */
		return;
	}
	if (tc->client && app(tc)->on_close != NULL)
		app(tc)->on_close(c, err);
	cr_conn_destroy(c);
}

static void
hs_timeout(struct cr_timer *t, void *arg)
{
	struct tls_conn *tc = arg;

	(void)t;
	TLS_STAT_ADD(cr_conn_lcore(tc->c), timeouts);
	CR_LOG(L, INFO, "lcore %u: TLS handshake timed out", cr_conn_lcore(tc->c));
	fail_handshake(tc, -ETIMEDOUT, false);
}

/* ---- what the engine calls ---- */

/* What OpenSSL sends by itself once established (a KeyUpdate reply, a ticket): short. */
#define TLS_OWN_WORDS_MAX 1024u

static int
io_out(void *arg, const void *data, size_t len)
{
	struct tls_conn *tc = arg;

	/* The rest of an admitted send, and the layer's own short words after the handshake,
	 * pass the pool's reserve: refusing them would cut the stream the peer reads. */
	if (tc->admitted || (tc->s.established && len <= TLS_OWN_WORDS_MAX))
		return cr_conn_send_wire_past_reserve(tc->c, data, len);
	return cr_conn_send_wire(tc->c, data, len);
}

static void
io_established(void *arg)
{
	struct tls_conn *tc = arg;
	unsigned lc = cr_conn_lcore(tc->c);

	cr_timer_stop(&tc->hs_timer);
	TLS_STAT_ADD(lc, handshakes);
	if (SSL_session_reused(tc->s.ssl))
		TLS_STAT_ADD(lc, resumed);
	tc->app_open = true;
	cr_conn_layer_opened(tc->c);
	if (tc->ktls == KTLS_WANT)
		cr_timer_start(&tc->ktls_timer, 0); /* not inside this call: from the loop */
	if (app(tc)->on_open != NULL)
		app(tc)->on_open(tc->c);
}

static void
io_plain(void *arg, const void *data, size_t len)
{
	struct tls_conn *tc = arg;

	cr_conn_layer_rx(tc->c, len);
	if (app(tc)->on_data != NULL)
		app(tc)->on_data(tc->c, data, len);
}

static bool
io_alive(void *arg)
{
	struct tls_conn *tc = arg;

	return tc->in_use && cr_conn_is_open(tc->c);
}

static const struct tls_session_io session_io = {
	.out = io_out,
	.established = io_established,
	.plain = io_plain,
	.alive = io_alive,
};

/* ---- the kTLS hand-over ---- */

/*
 * Once the handshake is done the records can go to the kernel (setsockopt TLS_TX and
 * TLS_RX with the keys and sequence numbers of tls_ktls_keys.c), but only at a quiet
 * point of the byte stream: no ciphertext of ours still queued (the kernel would encrypt
 * it again), no part of a record held, and no receive in flight (its bytes were read
 * before the kernel took over: ciphertext that must still go through OpenSSL). So the
 * timer waits for the queue to empty and the record to end, stops reading, waits for the
 * last receive, and checks again: quiet, it hands over; not (a receive brought half a
 * record), it reads again and waits. What OpenSSL decrypted meanwhile went to the app as
 * always. After KTLS_TRIES looks, or if the cipher or the kernel refuses, user space stays.
 */
/* No more keys or record counts for this one: the callbacks cost nothing from now. */
static void
ktls_stop_capture(struct tls_conn *tc)
{
	SSL_set_msg_callback(tc->s.ssl, NULL);
	SSL_set_app_data(tc->s.ssl, NULL);
	cr__tls_ktls_forget(&tc->kt);
}

/* User space stays. ktls_fallbacks counts a connection that lives on in user space, not
 * one that ended (or began ending) before its hand-over: @p counted. */
static void
ktls_fallback(struct tls_conn *tc, const char *why, bool counted)
{
	if (tc->ktls == KTLS_STOPPING)
		cr_conn_layer_read(tc->c, true);
	tc->ktls = KTLS_NO;
	ktls_stop_capture(tc);
	if (counted)
		TLS_STAT_ADD(cr_conn_lcore(tc->c), kernel_fallbacks);
	CR_LOG(L, DEBUG, "lcore %u: kTLS not used for a connection: %s", cr_conn_lcore(tc->c),
	       why);
}

static void
ktls_install(struct tls_conn *tc)
{
	struct cr_conn *c = tc->c;
	struct tls_ktls_info tx, rx;
	const char *why = cr__tls_ktls_refusal(tc->s.ssl, &tc->kt);
	int fd = cr_conn_fd(c), rc = -ENOTSUP;

	if (why == NULL) {
		rc = cr__tls_ktls_info(tc->s.ssl, &tc->kt, true, &tx);
		if (rc == 0)
			rc = cr__tls_ktls_info(tc->s.ssl, &tc->kt, false, &rx);
	}
	ktls_stop_capture(tc);
	if (rc != 0) {
		ktls_fallback(tc, why != NULL ? why : "the key derivation failed", true);
		return;
	}
	/* The ULP alone changes nothing: without TLS_TX the socket is plain TCP still. */
	if (setsockopt(fd, IPPROTO_TCP, TCP_ULP, "tls", sizeof("tls")) != 0 ||
	    setsockopt(fd, SOL_TLS, TLS_TX, &tx.u, tx.len) != 0) {
		ktls_fallback(tc, strerror(errno), true);
		goto out;
	}
	tc->ktls = KTLS_KERNEL; /* our sends are the kernel's now, whatever comes next */
	if (setsockopt(fd, SOL_TLS, TLS_RX, &rx.u, rx.len) != 0) {
		/* Sends in the kernel, receives not: no way on. Its close_notify goes out. */
		CR_LOG(L, WARNING, "lcore %u: kTLS receive refused (%s): connection closed",
		       cr_conn_lcore(c), strerror(errno));
		tc->fail_err = -EPROTO;
		cr_conn_close(c);
		goto out;
	}
	cr_conn_layer_plain(c);
	cr_conn_layer_read(c, true);
	TLS_STAT_ADD(cr_conn_lcore(c), kernel);
out:
	OPENSSL_cleanse(&tx, sizeof(tx));
	OPENSSL_cleanse(&rx, sizeof(rx));
}

static void
ktls_step(struct cr_timer *t, void *arg)
{
	struct tls_conn *tc = arg;
	struct cr_conn *c = tc->c;
	bool quiet;

	(void)t;
	if (!tc->in_use || !cr_conn_is_open(c) || tc->s.failed || tc->s.shut_sent ||
	    tc->s.peer_closed) {
		ktls_fallback(tc, "closing", false);
		return;
	}
	/* Ending (its lcore closing): lib/net's end_after counts the kernel's bytes received,
	 * ciphertext; after a hand-over its reads would count plaintext, never reaching it. */
	if (cr_conn_ending(c)) {
		ktls_fallback(tc, "the lcore is closing", false);
		return;
	}
	quiet = cr__tls_session_at_record_end(&tc->s) && cr_conn_queued(c) == 0;
	if (tc->ktls == KTLS_STOPPING && !cr_conn_receiving(c)) {
		if (quiet) {
			ktls_install(tc);
			return;
		}
		cr_conn_layer_read(c, true); /* half a record came: read the rest first */
		tc->ktls = KTLS_WANT;
	} else if (tc->ktls == KTLS_WANT && quiet) {
		cr_conn_layer_read(c, false);
		tc->ktls = KTLS_STOPPING;
	}
	if (++tc->ktls_tries >= KTLS_TRIES) {
		ktls_fallback(tc, "the wire was never quiet", true);
		return;
	}
	cr_timer_start(&tc->ktls_timer, KTLS_STEP_NS);
}

/* Our close_notify through the kernel: an alert record (TLS_SET_RECORD_TYPE 21). Only
 * when nothing is queued before it, or it would overtake; else the peer sees FIN alone. */
static bool
ktls_close_notify(struct cr_conn *c)
{
	static const uint8_t alert[2] = {1, 0}; /* warning, close_notify */
	char cbuf[CMSG_SPACE(1)] = {0};
	struct iovec iov = {(void *)alert, sizeof(alert)};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			   .msg_controllen = sizeof(cbuf)};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);

	if (cr_conn_queued(c) != 0)
		return false;
	cm->cmsg_level = SOL_TLS;
	cm->cmsg_type = TLS_SET_RECORD_TYPE;
	cm->cmsg_len = CMSG_LEN(1);
	*CMSG_DATA(cm) = 21;
	return sendmsg(cr_conn_fd(c), &m, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)sizeof(alert);
}

/* ---- what lib/net calls ---- */

struct tls_conn *
cr__tls_conn_slot(struct cr_conn *c)
{
	unsigned lc = cr_conn_lcore(c), i = cr_conn_index(c);

	if (tls_lcores[lc].conns == NULL) {
		unsigned n = cr_net_conn_slots();

		/* Once per lcore id, for the process's life: the slots never change size. */
		tls_lcores[lc].conns = calloc(n, sizeof(struct tls_conn));
		if (tls_lcores[lc].conns == NULL)
			return NULL;
		tls_lcores[lc].n = n;
	}
	return i < tls_lcores[lc].n ? &tls_lcores[lc].conns[i] : NULL;
}

void
cr__tls_conn_attach(struct tls_conn *tc, struct cr_conn *c)
{
	tc->c = c;
	tc->s.arg = tc;
	cr_timer_init(&tc->hs_timer, hs_timeout, tc);
	cr_timer_init(&tc->ktls_timer, ktls_step, tc);
	/* The keylog and message callbacks' (capturing until a hand-over or its end). */
	if (tc->ktls == KTLS_WANT)
		SSL_set_app_data(tc->s.ssl, &tc->kt);
	/* Moved while a hand-over was wanted: it goes on from this lcore's loop. */
	if (tc->ktls == KTLS_WANT && tc->app_open)
		cr_timer_start(&tc->ktls_timer, 0);
	cr_conn_set_layer_data(c, tc);
}

static int
conn_start(struct cr_conn *c)
{
	struct cr_tls_ctx *ctx = cr_conn_layer_arg(c);
	struct tls_conn *tc = cr__tls_conn_slot(c);
	int rc;

	if (tc == NULL)
		return -ENOMEM;
	memset(tc, 0, sizeof(*tc));
	tc->c = c;
	tc->client = !cr__tls_ctx_server(ctx);
	tc->set = cr__tls_ctx_take(ctx);
	if (cr__tls_session_init(&tc->s, tc->set->ctx[0], !tc->client, &session_io, tc) != 0) {
		cr__tls_certset_put(tc->set);
		return -ENOMEM;
	}
	tc->in_use = true;
	if (cr__tls_ctx_ktls(ctx))
		tc->ktls = KTLS_WANT;
	cr__tls_conn_attach(tc, c);
	cr_timer_start(&tc->hs_timer, (uint64_t)cr__tls_ctx_handshake_ms(ctx) * 1000000u);
	if (!tc->client)
		return 0;
	rc = cr__tls_client_prepare(ctx, tc->s.ssl);
	return rc != 0 ? rc : cr__tls_session_start(&tc->s);
}

static void
wire_open(struct cr_conn *c)
{
	int rc = conn_start(c);

	if (rc == 0)
		return;
	if (conn_of(c) != NULL) {
		fail_handshake(conn_of(c), rc, true);
		return;
	}
	/* No state at all: nothing of ours to clean. */
	if (!cr__tls_ctx_server(cr_conn_layer_arg(c)) && cr_conn_app_ops(c)->on_close != NULL)
		cr_conn_app_ops(c)->on_close(c, rc);
	cr_conn_destroy(c);
}

/* The peer's end of the stream, with or without close_notify: the app's EOF. */
static void
peer_done(struct tls_conn *tc)
{
	if (app(tc)->on_eof != NULL)
		app(tc)->on_eof(tc->c);
	else
		(void)cr_conn_shutdown_write(tc->c);
}

static void
wire_data(struct cr_conn *c, const void *data, size_t len)
{
	struct tls_conn *tc = conn_of(c);
	bool was_open;
	int rc;

	if (tc == NULL)
		return;
	if (tc->ktls == KTLS_KERNEL) {
		io_plain(tc, data, len); /* the kernel decrypted it */
		return;
	}
	was_open = tc->app_open;
	rc = cr__tls_session_input(&tc->s, data, len);
	if (!tc->in_use || !cr_conn_is_open(c))
		return; /* the app closed or destroyed it meanwhile */
	if (rc < 0 && !was_open && !tc->app_open) {
		TLS_STAT_ADD(cr_conn_lcore(c), failures);
		fail_handshake(tc, -EPROTO, true);
	} else if (rc < 0) {
		/* A broken record or an alert: what was queued still goes; on_close says so. */
		tc->fail_err = -EPROTO;
		cr_conn_close(c);
	} else if (rc == 1) {
		peer_done(tc);
	}
}

static void
wire_eof(struct cr_conn *c)
{
	struct tls_conn *tc = conn_of(c);

	if (tc == NULL || !tc->app_open) {
		if (tc != NULL)
			fail_handshake(tc, -ECONNRESET, false);
		else
			cr_conn_destroy(c);
		return;
	}
	if (tc->ktls == KTLS_KERNEL) {
		/* A FIN, or a record that is not data (close_notify, an alert, a KeyUpdate):
		 * lib/net's receive has no room for its type, so it is the EOF either way. */
		CR_LOG(L, DEBUG, "lcore %u: kTLS peer ended (FIN or a control record)",
		       cr_conn_lcore(c));
		peer_done(tc);
	} else if (!tc->s.peer_closed) {
		/* No close_notify: the stream may be cut short; the app hears EOF all the same,
		 * as with a plain connection, and decides whether what it has is whole. */
		CR_LOG(L, DEBUG, "lcore %u: TLS peer closed without close_notify",
		       cr_conn_lcore(c));
		peer_done(tc);
	}
}

static void
wire_drain(struct cr_conn *c)
{
	struct tls_conn *tc = conn_of(c);

	if (tc != NULL && tc->app_open && app(tc)->on_drain != NULL)
		app(tc)->on_drain(c);
}

static void
wire_close(struct cr_conn *c, int err)
{
	struct tls_conn *tc = conn_of(c);
	bool tell = tc != NULL ? tc->app_open || tc->client
			       : !cr__tls_ctx_server(cr_conn_layer_arg(c));

	if (tc != NULL)
		cr_timer_stop(&tc->hs_timer);
	if (tc != NULL && tc->fail_err != 0)
		err = tc->fail_err;
	if (tell && cr_conn_app_ops(c)->on_close != NULL)
		cr_conn_app_ops(c)->on_close(c, err);
}

/*
 * Closing loses nothing here when the handshake is done, no part of a record is held
 * either way, and the app is at its boundary. On a closing lcore a server's handshake
 * under way is like a request half read: it is served (bounded by the handshake timeout),
 * and its client then gets the first-request wait (cr_conn_layer_opened()); only one that
 * has received nothing yet is at a boundary. A client's handshake was started by the app
 * to be used: never one. For making room (the lcore is not closing) a server's handshake
 * is a boundary: a stalled one is what the reclaim is for.
 */
static bool
wire_boundary(struct cr_conn *c)
{
	struct tls_conn *tc = conn_of(c);

	if (tc == NULL)
		return true;
	if (!tc->app_open)
		return !cr_conn_ending(c) || (!tc->client && tc->s.fed == 0);
	/* Reads stopped for the kernel's hand-over, a receive maybe in flight: a moment. */
	if (tc->ktls == KTLS_STOPPING)
		return false;
	/* In the kernel a partial record is the kernel's to hold: the app alone decides. */
	if (tc->ktls != KTLS_KERNEL && !cr__tls_session_at_record_end(&tc->s))
		return false;
	return app(tc)->at_boundary == NULL || app(tc)->at_boundary(c);
}

static const struct cr_conn_ops wire_ops = {
	.on_open = wire_open,
	.on_data = wire_data,
	.on_eof = wire_eof,
	.on_drain = wire_drain,
	.on_close = wire_close,
	.at_boundary = wire_boundary,
};

/* Wire bytes the records of @p len bytes of plaintext take at most. */
static size_t
records_need(size_t len)
{
	return len == 0 ? 0 : len + (len / TLS_WRITE_MAX + 1) * TLS_RECORD_OVERHEAD;
}

/*
 * Queue @p n buffers, all or nothing, as cr_conn_send()/cr_conn_sendv() are without TLS:
 * what the pool could not take whole is refused before a byte is encrypted. Once
 * admitted, every record passes the reserve (the first may lift the queue above the
 * high watermark; the rest must not then be refused).
 */
static int
layer_write(struct cr_conn *c, const struct iovec *iov, unsigned n)
{
	struct tls_conn *tc = conn_of(c);
	size_t need = 0, total = 0;
	unsigned i;
	int rc = 0;

	for (i = 0; i < n; i++) {
		if (iov[i].iov_base == NULL && iov[i].iov_len != 0)
			return -EINVAL;
		total += iov[i].iov_len;
		need += records_need(iov[i].iov_len);
	}
	if (tc != NULL && tc->ktls == KTLS_KERNEL) {
		/* The kernel makes the records: the queue holds the plaintext as it is. */
		if (tc->s.shut_sent)
			return -EPIPE;
		if (n == 1)
			return cr_conn_send_wire(c, iov[0].iov_base, iov[0].iov_len);
		if (cr_conn_send_room(c) < total)
			return cr_conn_is_open(c) ? -ENOBUFS : -EPIPE;
		for (i = 0; i < n && rc == 0; i++)
			rc = cr_conn_send_wire_past_reserve(c, iov[i].iov_base, iov[i].iov_len);
		return rc;
	}
	if (tc == NULL || !tc->s.established)
		return cr_conn_is_open(c) || tc == NULL ? -ENOTCONN : -EPIPE;
	if (!cr_conn_is_open(c) || tc->s.shut_sent)
		return -EPIPE;
	if (total == 0)
		return 0;
	if (cr_conn_send_room(c) < need)
		return -ENOBUFS;
	tc->admitted = true;
	for (i = 0; i < n && rc == 0; i++)
		if (iov[i].iov_len != 0)
			rc = cr__tls_session_write(&tc->s, iov[i].iov_base, iov[i].iov_len);
	tc->admitted = false;
	return rc == 0 ? 0 : -EPIPE;
}

static int
layer_send(struct cr_conn *c, const void *data, size_t len)
{
	struct iovec iov = {(void *)(uintptr_t)data, len};

	return layer_write(c, &iov, 1);
}

static int
layer_sendv(struct cr_conn *c, const struct iovec *iov, unsigned n)
{
	return layer_write(c, iov, n);
}

static void
layer_shut(struct cr_conn *c)
{
	struct tls_conn *tc = conn_of(c);

	if (tc == NULL || !tc->s.established || tc->s.shut_sent)
		return;
	if (tc->ktls == KTLS_KERNEL) {
		tc->s.shut_sent = true;
		if (ktls_close_notify(c))
			TLS_STAT_ADD(cr_conn_lcore(c), closes_notified);
		return;
	}
	tc->admitted = true; /* close_notify: the last words */
	cr__tls_session_shutdown(&tc->s);
	tc->admitted = false;
	TLS_STAT_ADD(cr_conn_lcore(c), closes_notified);
}

/* Ended, told or not (cr_conn_destroy()): no handshake timeout may reach the app now. */
static void
layer_end(struct cr_conn *c)
{
	struct tls_conn *tc = conn_of(c);

	if (tc != NULL) {
		cr_timer_stop(&tc->hs_timer);
		cr_timer_stop(&tc->ktls_timer);
	}
}

static void
layer_release(struct cr_conn *c)
{
	struct tls_conn *tc = conn_of(c);

	if (tc == NULL)
		return;
	cr_timer_stop(&tc->hs_timer);
	cr_timer_stop(&tc->ktls_timer);
	cr__tls_ktls_forget(&tc->kt);
	cr__tls_session_fini(&tc->s);
	cr__tls_certset_put(tc->set);
	tc->in_use = false;
	tc->c = NULL;
	cr_conn_set_layer_data(c, NULL);
}

static const struct cr_conn_layer tls_layer = {
	.wire = &wire_ops,
	.send = layer_send,
	.sendv = layer_sendv,
	.shut = layer_shut,
	.end = layer_end,
	.release = layer_release,
	.movable = cr__tls_movable,
	.move_size = sizeof(struct tls_conn),
	.move_out = cr__tls_move_out,
	.move_in = cr__tls_move_in,
	.move_drop = cr__tls_move_drop,
};

void
cr_tls_conn_opts(struct cr_conn_opts *o, struct cr_tls_ctx *ctx)
{
	o->layer = ctx != NULL ? &tls_layer : NULL;
	o->layer_arg = ctx;
}

bool
cr_tls_conn(const struct cr_conn *c)
{
	return cr_conn_layer(c) == &tls_layer;
}

static SSL *
ssl_of(const struct cr_conn *c)
{
	struct tls_conn *tc = cr_tls_conn(c) ? conn_of(c) : NULL;

	return tc != NULL ? tc->s.ssl : NULL;
}

const char *
cr_tls_alpn(const struct cr_conn *c, size_t *len)
{
	SSL *ssl = ssl_of(c);
	const unsigned char *p = NULL;
	unsigned n = 0;

	if (ssl != NULL)
		SSL_get0_alpn_selected(ssl, &p, &n);
	if (len != NULL)
		*len = n;
	return n != 0 ? (const char *)p : NULL;
}

const char *
cr_tls_server_name(const struct cr_conn *c)
{
	SSL *ssl = ssl_of(c);

	return ssl != NULL ? SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name) : NULL;
}

const char *
cr_tls_version(const struct cr_conn *c)
{
	SSL *ssl = ssl_of(c);

	return ssl != NULL ? SSL_get_version(ssl) : NULL;
}

bool
cr_tls_resumed(const struct cr_conn *c)
{
	SSL *ssl = ssl_of(c);

	return ssl != NULL && SSL_session_reused(ssl);
}

bool
cr_tls_peer_verified(const struct cr_conn *c)
{
	SSL *ssl = ssl_of(c);
	X509 *x;
	bool ok;

	if (ssl == NULL)
		return false;
	x = SSL_get1_peer_certificate(ssl);
	ok = x != NULL && SSL_get_verify_result(ssl) == X509_V_OK;
	X509_free(x);
	return ok;
}

bool
cr_tls_kernel(const struct cr_conn *c)
{
	struct tls_conn *tc = cr_tls_conn(c) ? conn_of(c) : NULL;

	return tc != NULL && tc->ktls == KTLS_KERNEL;
}

const char *
cr_tls_failure(const struct cr_conn *c, char *buf, size_t len)
{
	struct tls_conn *tc = cr_tls_conn(c) ? conn_of(c) : NULL;
	long v;

	if (tc == NULL || tc->s.ssl == NULL || !tc->s.failed)
		return NULL;
	v = SSL_get_verify_result(tc->s.ssl);
	if (v != X509_V_OK)
		snprintf(buf, len, "certificate verify failed: %s",
			 X509_verify_cert_error_string(v));
	else if (tc->s.err != 0 && ERR_reason_error_string(tc->s.err) != NULL)
		snprintf(buf, len, "%s", ERR_reason_error_string(tc->s.err));
	else
		snprintf(buf, len, "TLS handshake failed");
	return buf;
}

int
cr_tls_stats(unsigned lcore, struct cr_tls_stats *out)
{
	const struct tls_counters *s;

	if (lcore >= CR_MAX_LCORES || out == NULL)
		return -EINVAL;
	s = &cr__tls_stats[lcore];
	out->handshakes = atomic_load_explicit(&s->handshakes, memory_order_relaxed);
	out->resumed = atomic_load_explicit(&s->resumed, memory_order_relaxed);
	out->failures = atomic_load_explicit(&s->failures, memory_order_relaxed);
	out->timeouts = atomic_load_explicit(&s->timeouts, memory_order_relaxed);
	out->closes_notified = atomic_load_explicit(&s->closes_notified, memory_order_relaxed);
	out->kernel = atomic_load_explicit(&s->kernel, memory_order_relaxed);
	out->kernel_fallbacks = atomic_load_explicit(&s->kernel_fallbacks, memory_order_relaxed);
	return 0;
}
