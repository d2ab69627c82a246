/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The relay's internals, shared by its session state machine (relay.c) and its output
 * pool policy (relay_pool.c). Never installed.
 */
#ifndef RELAY_INTERNAL_H
#define RELAY_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cr_lease.h"
#include "passthrough.h"
#include "proxy.h"

struct px_session {
	struct px_session *next, *prev;	  /* free list or wait list */
	struct px_session *pnext, *pprev; /* the paused list: a direction is paused */
	struct cr_conn *cli, *srv;
	struct cr_net_addr peer;
	uint64_t tried; /* a bit per backend slot */
	int slot;	/* the backend of srv */
	uint64_t connect_ns; /* when the connect to it started (the turn's clock) */
	/* A TLS backend's TCP connect and handshake together: --connect-timeout (relay.c). */
	struct cr_timer connect_timer;
	uint64_t paused_ns;  /* when it went on the paused list (the turn's clock) */
	unsigned attempts;
	bool srv_open;
	bool cli_paused, srv_paused; /* reads we stopped for backpressure */
	bool admitted;		     /* counted against --maxconn */
	bool waiting;		     /* on the wait list */
	bool on_paused;		     /* on the paused list */
	bool passthrough;	     /* from --sni-listen: plain TCP to the backend, after the hello */
	bool cli_eof;		     /* the client's EOF came before the server connection opened */
	bool sniffing;		     /* reading its ClientHello into sniff */
	struct px_sniff *sniff;	     /* the bytes read before the server connection opened */
	uint64_t group;		     /* the slots it may connect to */
	struct px_slog log;	     /* --session-log */
};

/* A passthrough session's first bytes, until they are sent on to its backend. */
struct px_sniff {
	struct px_sniff *next;		/* the lcore's free list */
	struct px_sniff *lprev, *lnext; /* the lcore's sniffing list, oldest first */
	struct px_lcore *pl;
	struct px_session *s;
	struct cr_timer timer; /* --sni-timeout */
	uint32_t len;
	uint8_t buf[PX_SNI_MAX];
};

/* An lcore's relay state, an lcore-local (one per incarnation); its slab follows it. */
struct px_lcore {
	struct px_session *slab;
	struct px_session *free;
	struct px_session *wait_head, *wait_tail;
	struct cr_timer wait_timer;
	struct px_session *paused; /* sessions with a direction paused: who holds chunks */
	/* Chunks of sessions reset this turn, not back yet (they return with the final
	 * completions of their sends); forgotten at the next tick. */
	uint64_t credit;
	struct cr_timer credit_timer;
	struct px_chooser ch;
	struct px_sniff *sniff_free; /* ClientHello buffers (--sni-listen) */
	struct px_sniff *sniff_old, *sniff_new; /* those of sessions reading their hello */
	unsigned live; /* sessions on this lcore */
	/* Held while the lcore serves, so a retirement waits for its sessions. */
	struct cr_lease lease;
	bool retiring;
	bool let_go; /* sessions no longer waited for: lib/net may close them */
	uint64_t let_go_ns;	      /* since when */
	struct cr_timer retire_timer; /* --shutdown-timeout: stop waiting for them */
};

/* The session ended for @p e, unless it had already for another cause (relay.c; a
 * session let go by its closing lcore ended for that). On its lcore. */
void px_ended(struct px_session *s, enum px_end e);

/* ---- the session (relay.c) ---- */

/* A fatal relay error: reset both sides now. */
void px_session_abort(struct px_lcore *pl, struct px_session *s);
/* Connect @p s to the next backend of its group it has not tried, or end it. */
void px_connect_next(struct px_lcore *pl, struct px_session *s);

/* ---- SNI passthrough (passthrough.c) ---- */

void px_sni_lcore_init(struct px_lcore *pl, struct px_sniff *slab, unsigned n);
/* An admitted passthrough session: read its hello (or close it: no buffer free). */
void px_sni_begin(struct px_lcore *pl, struct px_session *s);
/* Bytes of a session that is sniffing; routes it once the hello is whole. */
void px_sni_data(struct px_lcore *pl, struct px_session *s, const void *d, size_t n);
/* The client's EOF before its hello was whole. */
void px_sni_eof(struct px_lcore *pl, struct px_session *s);
/* The server connection is open: send it the bytes read. @return false if aborted. */
bool px_sni_replay(struct px_lcore *pl, struct px_session *s);
/* Give the buffer back (at the session's end; nothing if none). */
void px_sni_end(struct px_lcore *pl, struct px_session *s);

/* ---- the output pool: each session's share (relay_pool.c) ---- */

/* Put @p s on, or take it off, the paused list as its paused directions say. */
void px_paused_sync(struct px_lcore *pl, struct px_session *s);
/*
 * Queue @p d on @p dst; stop reading @p src while @p dst is over its share.
 * @return false if the session was aborted.
 */
bool px_relay_bytes(struct px_lcore *pl, struct px_session *s, struct cr_conn *src,
		    struct cr_conn *dst, bool *src_paused, const void *d, size_t n);
/* The chunks of sessions reset in a turn are back: forget their credit. */
void px_credit_timer_fired(struct cr_timer *t, void *arg);

#endif /* RELAY_INTERNAL_H */
