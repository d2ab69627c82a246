/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * SNI passthrough, a session's first phase: read the client's bytes into a buffer of the
 * lcore's (PX_SNI_BUFFERS of PX_SNI_MAX bytes, made at the lcore's start) until they hold
 * a whole ClientHello (sni_parse.c), pick the group of its name (sni_route.c), and let the
 * relay connect to one of it (px_connect_next()). Once the server connection is open, the
 * bytes read are sent to it as they came and the session relays both ways as any other:
 * the TLS is the client's and the backend's, end to end.
 *
 * The client is not read while its session connects, as on the plain listener. What
 * arrives all the same before the server connection is open goes into the same buffer,
 * after what is there, and is sent with it: the bytes after the hello that were read with
 * it, and, on --tls-listen, the plaintext lib/tls decrypted from the record that ended
 * the client's handshake (it delivers it in the same call as on_open, past the read stop)
 * while the session has no server connection that can take it yet (--backend-tls: one in
 * its own handshake; or none, the client waiting for --maxconn). More than a buffer
 * holds, or no buffer to be had, resets the session (proxy_nobufs). What is not a
 * ClientHello, a hello not whole within PX_SNI_MAX bytes or --sni-timeout, an EOF before
 * it: closed without a backend, counted (proxy_sni_bad), and logged no_backend,
 * client_timeout (--sni-timeout) or client_closed (the EOF). No name, or an unknown one:
 * --sni-default's group, else closed (proxy_sni_refused). When every buffer is taken, the
 * session that has read its hello longest gives its buffer to the newcomer (take()).
 */
#include <errno.h>
#include <string.h>

#include "cr_telemetry.h"
#include "passthrough.h"
#include "relay_internal.h"

int px_ctr_sni_routed = -1, px_ctr_sni_default = -1, px_ctr_sni_refused = -1, px_ctr_sni_bad = -1;

/* The hello's handshake bytes, gathered from its records: one lcore's, used within a call. */
static _Thread_local uint8_t scratch[PX_SNI_MAX];

/* The sessions reading their hello, oldest first: who gives a buffer up when none is free. */
static void
sniffing_del(struct px_lcore *pl, struct px_sniff *b)
{
	if (b->lprev != NULL)
		b->lprev->lnext = b->lnext;
	else
		pl->sniff_old = b->lnext;
	if (b->lnext != NULL)
		b->lnext->lprev = b->lprev;
	else
		pl->sniff_new = b->lprev;
	b->lprev = b->lnext = NULL;
}

static void
sniffing_add(struct px_lcore *pl, struct px_sniff *b)
{
	b->lnext = NULL;
	b->lprev = pl->sniff_new;
	if (pl->sniff_new != NULL)
		pl->sniff_new->lnext = b;
	else
		pl->sniff_old = b;
	pl->sniff_new = b;
}

/* @p s reads its hello no more: its timer and its place in the list go. */
static void
stop_sniffing(struct px_lcore *pl, struct px_session *s)
{
	if (!s->sniffing)
		return;
	s->sniffing = false;
	cr_timer_stop(&s->sniff->timer);
	sniffing_del(pl, s->sniff);
}

/* Close @p s before any backend, counted in @p ctr, ended for @p e. */
static void
sni_close(struct px_lcore *pl, struct px_session *s, int ctr, enum px_end e)
{
	cr_telemetry_add(ctr, 1);
	px_ended(s, e);
	stop_sniffing(pl, s);
	cr_conn_read_stop(s->cli);
	cr_conn_close(s->cli);
}

static void
sniff_timeout(struct cr_timer *t, void *arg)
{
	struct px_sniff *b = arg;

	(void)t;
	if (b->s != NULL && b->s->sniffing && b->s->cli != NULL)
		sni_close(b->pl, b->s, px_ctr_sni_bad, PX_END_CLIENT_TIMEOUT);
}

void
px_sni_lcore_init(struct px_lcore *pl, struct px_sniff *slab, unsigned n)
{
	unsigned i;

	pl->sniff_free = NULL;
	pl->sniff_old = pl->sniff_new = NULL;
	for (i = n; i-- > 0;) {
		slab[i].next = pl->sniff_free;
		slab[i].pl = pl;
		pl->sniff_free = &slab[i];
		cr_timer_init(&slab[i].timer, sniff_timeout, &slab[i]);
	}
}

/*
 * A buffer for @p s. None free: the session that has read its hello longest gives its
 * own up and is closed (proxy_sni_bad), so a flood of hellos that never finish takes
 * buffers from each other, not from clients that send theirs at once. NULL: none at all
 * (every buffer held by sessions past their hello, connecting).
 */
static struct px_sniff *
take(struct px_lcore *pl, struct px_session *s)
{
	struct px_sniff *b = pl->sniff_free;

	if (b != NULL) {
		pl->sniff_free = b->next;
	} else if (pl->sniff_old != NULL) {
		struct px_session *old = pl->sniff_old->s;

		b = old->sniff;
		sni_close(pl, old, px_ctr_sni_bad, PX_END_NO_BACKEND);
		old->sniff = NULL; /* taken over: its session ends without it */
	} else {
		return NULL;
	}
	b->next = NULL;
	b->s = s;
	b->len = 0;
	s->sniff = b;
	return b;
}

void
px_sni_begin(struct px_lcore *pl, struct px_session *s)
{
	struct px_sniff *b = take(pl, s);

	if (b == NULL) {
		sni_close(pl, s, px_ctr_sni_refused, PX_END_NO_BACKEND);
		return;
	}
	s->sniffing = true;
	sniffing_add(pl, b);
	cr_timer_start(&b->timer, px_relay.sni_timeout_ns);
	cr_conn_read_start(s->cli);
}

void
px_sni_end(struct px_lcore *pl, struct px_session *s)
{
	struct px_sniff *b = s->sniff;

	if (b == NULL)
		return;
	stop_sniffing(pl, s);
	b->s = NULL;
	b->next = pl->sniff_free;
	pl->sniff_free = b;
	s->sniff = NULL;
}

/* The hello is whole: route it, or close it. */
static void
route(struct px_lcore *pl, struct px_session *s, enum px_sni_result r, const char *name)
{
	bool is_default;
	uint64_t g = px_sni_group(r == PX_SNI_FOUND ? name : NULL, &is_default);

	if (g == 0) {
		sni_close(pl, s, px_ctr_sni_refused, PX_END_NO_BACKEND);
		return;
	}
	cr_telemetry_add(is_default ? px_ctr_sni_default : px_ctr_sni_routed, 1);
	stop_sniffing(pl, s);
	s->group = g;
	/* Nothing more is read until the server connection is open. */
	cr_conn_read_stop(s->cli);
	px_connect_next(pl, s);
}

/* Early bytes that do not fit a buffer (or find none): the session cannot go on whole. */
static void
early_overflow(struct px_lcore *pl, struct px_session *s)
{
	cr_telemetry_add(px_ctr_nobufs, 1);
	px_ended(s, PX_END_NOBUFS);
	px_session_abort(pl, s);
}

void
px_sni_data(struct px_lcore *pl, struct px_session *s, const void *d, size_t n)
{
	struct px_sniff *b = s->sniff != NULL ? s->sniff : take(pl, s);
	char name[PX_SNI_NAME_MAX];
	enum px_sni_result r;

	if (b == NULL) {
		early_overflow(pl, s);
		return;
	}
	if (n > PX_SNI_MAX - b->len) {
		/* More than we read before the hello must be whole; or a hello followed at once
		 * by more than the buffer holds, which we could not replay. */
		if (s->sniffing)
			sni_close(pl, s, px_ctr_sni_bad, PX_END_NO_BACKEND);
		else
			early_overflow(pl, s);
		return;
	}
	memcpy(b->buf + b->len, d, n);
	b->len += (uint32_t)n;
	if (!s->sniffing)
		return; /* routed already: replayed with the hello */
	r = px_sni_parse(b->buf, b->len, scratch, sizeof(scratch), name, sizeof(name));
	if (r == PX_SNI_MORE)
		return;
	if (r == PX_SNI_BAD) {
		sni_close(pl, s, px_ctr_sni_bad, PX_END_NO_BACKEND);
		return;
	}
	route(pl, s, r, name);
}

void
px_sni_eof(struct px_lcore *pl, struct px_session *s)
{
	sni_close(pl, s, px_ctr_sni_bad, PX_END_CLIENT_CLOSED);
}

bool
px_sni_replay(struct px_lcore *pl, struct px_session *s)
{
	struct px_sniff *b = s->sniff;
	size_t n = b->len;
	int rc;

	rc = cr_conn_send(s->srv, b->buf, n);
	px_sni_end(pl, s);
	if (rc != 0) {
		px_ended(s, PX_END_SERVER_CLOSED);
		px_session_abort(pl, s);
		return false;
	}
	PX_ADD(cr_lcore_id(), s->slot, bytes_out, n);
	s->log.c2s += n;
	return true;
}
