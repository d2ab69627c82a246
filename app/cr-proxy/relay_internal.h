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

#include "cr_io.h"
#include "cr_lease.h"
#include "passthrough.h"
#include "proxy.h"

/*
 * One direction of a session (splice.c). It starts copied (lib/net receives, the relay
 * queues on the other side); a plain one that moves bulk switches to splice once lib/net
 * has nothing of it left (SWITCHING), and gives the source back to lib/net at its EOF
 * (BACK), so that lib/net sees the EOF and the half-close goes on as always.
 */
enum px_dir_mode {
	PX_DIR_COPY = 0,  /* lib/net reads the source; the bulk detector counts */
	PX_DIR_SWITCHING, /* source read stopped: waiting for lib/net's last bytes of it */
	PX_DIR_SPLICE,	  /* source -> pipe -> destination, lib/net reading none of it */
	PX_DIR_STOPPING,  /* cancelled: the last op's completion releases it */
	PX_DIR_BACK,	  /* spliced up to the source's EOF; lib/net reads it again */
	PX_DIR_NEVER,	  /* copied to the end (EOF seen while switching, TLS, ...) */
};

struct px_session;

struct px_dir {
	struct px_session *s;
	uint8_t mode;	 /* enum px_dir_mode */
	bool c2s;	 /* client to server */
	int from, to;	 /* our duplicates of the two sockets while switching or splicing */
	struct cr_io_pipe p;
	uint32_t in_pipe; /* bytes in the pipe, not yet in the destination */
	cr_op_id op;	  /* the splice in flight (one at a time: nothing reordered) */
	uint64_t win_bytes; /* the bulk detector's window: bytes and deliveries */
	uint32_t win_reads;
	uint64_t poll_ns;	/* switching: the next wait for lib/net to be done */
	struct cr_timer timer; /* switching: look again */
};

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
	/* Idle timeouts (--client-timeout, --server-timeout) are the relay's, not lib/net's:
	 * a spliced direction moves bytes lib/net never sees. A side is active when bytes
	 * are read from it or relayed to it (turn clock). */
	uint64_t cli_active, srv_active;
	struct cr_timer idle;
	struct px_dir dir[2]; /* [0] client to server, [1] server to client */
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

/* The calling lcore's relay state. */
struct px_lcore *px_cur(void);
/* Free @p s if both its connections are gone and no splice of it is in flight. */
void px_session_done(struct px_lcore *pl, struct px_session *s);

/*
 * Receive buffers of @p s held past their on_data (the relay queues them on the other side,
 * relay_pool.c): while any is, the session is not at a boundary (its bytes sit in its
 * lcore's pool). Queued bytes of an ended connection's buffers are in the other side's
 * cr_conn_queued().
 */
static inline bool
px_session_holds_bufs(const struct px_session *s)
{
	return (s->cli != NULL && cr_conn_held_bufs(s->cli) != 0) ||
	       (s->srv != NULL && cr_conn_held_bufs(s->srv) != 0);
}

/* Admitted under --maxconn: connect it (a passthrough session reads its hello first). */
void px_session_start(struct px_lcore *pl, struct px_session *s);

/* ---- the --maxconn wait list (relay_wait.c) ---- */

/* Count a session against --maxconn. @return false at the limit. */
bool px_try_admit(void);
/* Put @p s at the end of its lcore's wait list (not read meanwhile), or take it off. */
void px_wait_add(struct px_lcore *pl, struct px_session *s);
void px_wait_del(struct px_lcore *pl, struct px_session *s);
/* An admitted session ends: count it no more, and admit the next waiting here. */
void px_unadmit(struct px_lcore *pl, struct px_session *s);
/* The lcore's retry timer: admit what --maxconn allows now (slots freed elsewhere). */
void px_wait_timer_fired(struct cr_timer *t, void *arg);

/* ---- splicing bulk (splice.c) ---- */

/* A session begins: both directions copied. */
void px_dir_init(struct px_session *s);
/* @p n bytes of direction @p d were relayed by copy (or held buffer): the bulk detector
 * may start the switch to splice. In the source's on_data. */
void px_dir_note(struct px_lcore *pl, struct px_dir *d, size_t n);
/* The source of @p d is read by lib/net (copy mode, or back after the splice's EOF). */
bool px_dir_lib_reads(const struct px_dir *d);
/* The source's EOF reached lib/net while switching: copied to the end. */
void px_dir_eof(struct px_dir *d);
/* End direction @p d's splicing, if any: cancelled, released at its last completion. */
void px_dir_stop(struct px_dir *d);
/* The lcore stops: close what a splice abandoned by a forced stop left (lcore_fini). */
void px_dir_forget(struct px_dir *d);
/* A splice of @p s is in flight (it keeps the session). */
bool px_dir_busy(const struct px_session *s);

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
