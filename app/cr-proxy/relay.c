/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Sessions: a client connection accepted on this lcore and the server connection this
 * lcore opens for it, relayed in both directions without leaving the lcore.
 *
 * - The client is not read until the server connection is open, so a failed connect
 *   loses nothing: the next backend is tried (at most --retries more, each a backend not
 *   tried yet) and what the client sent waits in the kernel meanwhile.
 * - Backpressure: bytes read from one side are queued on the other; when that queue goes
 *   over its high watermark the side they came from stops being read, until the queue's
 *   on_drain. Each connection keeps reading while its own queue is high (keep_reading):
 *   the two directions never wait for each other. How much each may queue, and who gives
 *   chunks back when the pool runs low, is relay_pool.c's.
 * - Half-close: an EOF from one side shuts the other side's write once its queue is sent;
 *   a connection ends by itself when both its directions are done.
 * - An error on one side (reset, failed send) resets the other; an idle timeout or our
 *   own stop closes the other gracefully (what is queued still goes out, then EOF).
 * - One --connect-timeout covers a backend's TCP connect and, with --backend-tls, its
 *   handshake too: lib/io's deadline bounds the first, the session's connect_timer, armed
 *   when the connect begins, the two together (lib/tls's own handshake timer would start
 *   only once TCP is up, and give the handshake a whole --connect-timeout of its own).
 * - A client's EOF that comes before the server connection is open (a TLS client's, read
 *   with its handshake's end) waits for it: shutting the write side of a connection in its
 *   TLS handshake would fail the handshake, and the bytes held for it would not go.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "cr_app.h"
#include "cr_lease.h"
#include "cr_telemetry.h"
#include "cr_tls.h"
#include "relay_internal.h"

struct px_relay_conf px_relay;
static int local_id = -1;
static unsigned slab_sessions, slab_sniffs;
/* Sessions alive, every lcore; relaxed: the count orders nothing else. */
static _Atomic uint64_t live;

int px_ctr_sessions = -1, px_ctr_connect_fail = -1, px_ctr_no_backend = -1, px_ctr_nobufs = -1,
    px_ctr_maxconn_waits = -1, px_ctr_splices = -1, px_ctr_splice_bytes = -1,
    px_ctr_splice_nopipe = -1;

static const struct cr_conn_ops px_server_ops;

static struct px_lcore *cur(void);
static void idle_fired(struct cr_timer *t, void *arg);
static void connect_expired(struct cr_timer *t, void *arg);

void
px_ended(struct px_session *s, enum px_end e)
{
	struct px_lcore *pl = cur();

	if (s->log.end != PX_END_NONE)
		return;
	/* Let go by its closing lcore, lib/net closes both sockets gracefully: the peers'
	 * EOFs that follow are not why it ended. */
	if (pl->let_go && s->log.start_ns <= pl->let_go_ns)
		e = pl->retiring ? PX_END_RETIRE : PX_END_SHUTDOWN;
	s->log.end = e;
}

/* A connection of @p s closed with @p err (0: both its directions done). */
static void
ended_err(struct px_lcore *pl, struct px_session *s, int err, bool client)
{
	if (err == -ETIMEDOUT)
		px_ended(s, client ? PX_END_CLIENT_TIMEOUT : PX_END_SERVER_TIMEOUT);
	else if (err == -ESHUTDOWN)
		px_ended(s, pl->retiring ? PX_END_RETIRE : PX_END_SHUTDOWN);
	else if (err != 0)
		px_ended(s, client ? PX_END_CLIENT_RESET : PX_END_SERVER_RESET);
	else
		px_ended(s, client ? PX_END_CLIENT_CLOSED : PX_END_SERVER_CLOSED);
}

static struct px_lcore *
cur(void)
{
	return cr_lcore_local(local_id);
}

struct px_lcore *
px_cur(void)
{
	return cur();
}

uint64_t
px_sessions_live(void)
{
	return atomic_load_explicit(&live, memory_order_relaxed);
}

/* ---- retiring ---- */

/* No session left: the lcore may retire. One that begins meanwhile (handed to us just
 * before the retire) still runs to its end; lib/net keeps the lcore for it. */
static void
release(struct px_lcore *pl)
{
	(void)cr_lease_release(&pl->lease);
}

/* Out of time (or stopping): sessions are waited for no more, lib/net closes them. */
static void
let_go(struct px_lcore *pl)
{
	cr_timer_stop(&pl->retire_timer);
	pl->let_go = true;
	pl->let_go_ns = cr_now_ns();
	release(pl);
}

/*
 * An L4 session has no boundary the proxy can see: on a closing lcore lib/net closes its
 * sockets only once the proxy lets them go (the sessions ended, or the timeout passed).
 */
static bool
session_at_boundary(struct px_session *s)
{
	if (!cur()->let_go)
		return false;
	/* lib/net closes it now, reading and sending again: no splice may go on. */
	px_dir_stop(&s->dir[0]);
	px_dir_stop(&s->dir[1]);
	return true;
}

static bool
cli_at_boundary(struct cr_conn *c)
{
	return session_at_boundary(cr_conn_data(c));
}

static bool
srv_at_boundary(struct cr_conn *c)
{
	return session_at_boundary(cr_conn_arg(c));
}

static void
retire_timer_fired(struct cr_timer *t, void *arg)
{
	(void)t;
	let_go(arg);
}

void
px_relay_lcore_start(unsigned lcore)
{
	struct px_lcore *pl = cur();

	(void)lcore;
	pl->retiring = false;
	pl->let_go = false;
	(void)cr_lease_acquire(&pl->lease);
}

void
px_relay_retire(unsigned lcore)
{
	struct px_lcore *pl = cur();

	(void)lcore;
	/* lib/net steers new clients to the other lcores; ours finish, within the timeout. */
	pl->retiring = true;
	cr_timer_start(&pl->retire_timer, px_relay.retire_timeout_ns);
	if (pl->live == 0)
		release(pl);
}

void
px_relay_lcore_stop(unsigned lcore)
{
	(void)lcore;
	let_go(cur());
}

/* ---- idle timeouts ---- */

/* When the first side of @p s goes idle (the turn clock); 0: never. The server side is
 * timed from its connect's success (a connect has a timeout of its own). */
static uint64_t
idle_deadline(const struct px_session *s)
{
	uint64_t d = 0;

	if (s->cli != NULL && px_relay.client_idle_ns != 0)
		d = s->cli_active + px_relay.client_idle_ns;
	if (s->srv != NULL && s->srv_open && px_relay.server_idle_ns != 0) {
		uint64_t e = s->srv_active + px_relay.server_idle_ns;

		if (d == 0 || e < d)
			d = e;
	}
	return d;
}

/* Armed at the nearest deadline and not moved by activity: when it fires it looks at the
 * activity since, so a busy session costs one timer event per timeout period. */
static void
idle_arm(struct px_session *s)
{
	uint64_t d = idle_deadline(s), now = cr_now_ns();

	if (d == 0)
		cr_timer_stop(&s->idle);
	else
		cr_timer_start(&s->idle, d > now ? d - now : 0);
}

static void cli_ended(struct px_lcore *pl, struct px_session *s, int err);
static void srv_ended(struct px_lcore *pl, struct px_session *s, int err);

/* A side idle for its timeout ends with -ETIMEDOUT as if lib/net had timed it out: its
 * queue dropped, the other side closed gracefully. */
static void
idle_fired(struct cr_timer *t, void *arg)
{
	struct px_session *s = arg;
	uint64_t now = cr_now_ns();

	(void)t;
	if (s->cli != NULL && px_relay.client_idle_ns != 0 &&
	    now - s->cli_active >= px_relay.client_idle_ns) {
		cr_conn_destroy(s->cli);
		cli_ended(cur(), s, -ETIMEDOUT);
	} else if (s->srv != NULL && s->srv_open && px_relay.server_idle_ns != 0 &&
		   now - s->srv_active >= px_relay.server_idle_ns) {
		cr_conn_destroy(s->srv);
		srv_ended(cur(), s, -ETIMEDOUT);
	} else {
		idle_arm(s);
	}
}

/* ---- sessions ---- */

static struct px_session *
session_get(struct px_lcore *pl)
{
	struct px_session *s = pl->free;

	if (s == NULL)
		return NULL;
	pl->free = s->next;
	memset(s, 0, sizeof(*s));
	s->slot = -1;
	px_dir_init(s);
	cr_timer_init(&s->idle, idle_fired, s);
	cr_timer_init(&s->connect_timer, connect_expired, s);
	pl->live++;
	atomic_fetch_add_explicit(&live, 1, memory_order_relaxed);
	return s;
}

/* Free @p s once both its connections are gone, and its splices' last completions came
 * (they name the session). */
static void
session_done(struct px_lcore *pl, struct px_session *s)
{
	if (s->cli != NULL || s->srv != NULL)
		return;
	px_dir_stop(&s->dir[0]);
	px_dir_stop(&s->dir[1]);
	if (px_dir_busy(s))
		return; /* px_session_done() again from the last one */
	cr_timer_stop(&s->idle);
	if (px_session_log_id > 0)
		px_slog_write(&s->log, &s->peer, s->slot, cr_now_ns());
	if (s->waiting)
		px_wait_del(pl, s);
	px_sni_end(pl, s);
	s->cli_paused = s->srv_paused = false;
	px_paused_sync(pl, s);
	s->next = pl->free;
	pl->free = s;
	atomic_fetch_sub_explicit(&live, 1, memory_order_relaxed);
	if (--pl->live == 0 && pl->retiring)
		release(pl);
	if (s->admitted)
		px_unadmit(pl, s);
}

void
px_session_done(struct px_lcore *pl, struct px_session *s)
{
	session_done(pl, s);
}

static void
srv_gone(struct px_session *s)
{
	cr_timer_stop(&s->connect_timer);
	PX_ADD(cr_lcore_id(), s->slot, active, -1);
	s->srv = NULL;
}

/* Send a reset rather than a FIN when the socket closes. */
static void
set_reset(struct cr_conn *c)
{
	struct linger lg = {1, 0};

	(void)setsockopt(cr_conn_fd(c), SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
}

/*
 * The other side of a session ended with @p err: pass it on to @p c. A timeout or our own
 * stop closes @p c gracefully (its on_close follows); anything else resets it at once.
 * @return true if @p c is gone now.
 */
static bool
pass_on(struct cr_conn *c, int err)
{
	if (err == -ETIMEDOUT || err == -ESHUTDOWN) {
		cr_conn_close(c);
		return false;
	}
	set_reset(c);
	cr_conn_destroy(c);
	return true;
}

void
px_session_abort(struct px_lcore *pl, struct px_session *s)
{
	px_dir_stop(&s->dir[0]);
	px_dir_stop(&s->dir[1]);
	if (s->srv != NULL) {
		set_reset(s->srv);
		cr_conn_destroy(s->srv);
		srv_gone(s);
	}
	if (s->cli != NULL) {
		set_reset(s->cli);
		cr_conn_destroy(s->cli);
		s->cli = NULL;
	}
	session_done(pl, s);
}

/* No backend to try: the client gets an EOF at once. */
static void
fail_client(struct px_session *s)
{
	cr_telemetry_add(px_ctr_no_backend, 1);
	px_ended(s, s->log.connect_ns != 0 ? PX_END_CONNECT_FAILED : PX_END_NO_BACKEND);
	cr_conn_close(s->cli);
}

void
px_connect_next(struct px_lcore *pl, struct px_session *s)
{
	static const struct cr_conn_opts none;
	struct cr_conn_opts o = none;
	struct cr_conn *c;
	int slot;

	if (s->attempts > px_relay.retries) {
		fail_client(s);
		return;
	}
	/* Only its group's slots: the others count as tried. */
	slot = px_choose(&pl->ch, px_relay.balance, &s->peer, s->tried | ~s->group);
	if (slot < 0) {
		fail_client(s);
		return;
	}
	s->tried |= 1ull << slot;
	s->attempts++;
	px_conn_opts(&o);
	if (!s->passthrough)
		cr_tls_conn_opts(&o, px_slots[slot].tls); /* --backend-tls; NULL: plain */
	c = cr_tcp_connect(&px_slots[slot].addr, px_relay.connect_timeout_ns, &o, &px_server_ops,
			   s);
	if (c == NULL) {
		/* Out of local resources (slots, descriptors, op slots): not the backend's
		 * fault, and another backend would fare no better. */
		fail_client(s);
		return;
	}
	s->srv = c;
	s->slot = slot;
	s->connect_ns = cr_now_ns();
	s->log.connect_ns = s->connect_ns;
	PX_ADD(cr_lcore_id(), slot, active, 1);
	/* TCP and TLS together within --connect-timeout (lib/io's deadline is TCP's alone). */
	if (cr_tls_conn(c) && px_relay.connect_timeout_ns != 0)
		cr_timer_start(&s->connect_timer, px_relay.connect_timeout_ns);
}


/* ---- the client side ---- */

/* Admitted under --maxconn: a passthrough session reads its hello first. */
void
px_session_start(struct px_lcore *pl, struct px_session *s)
{
	if (s->passthrough)
		px_sni_begin(pl, s);
	else
		px_connect_next(pl, s);
}

static void
cli_begin(struct cr_conn *c, bool passthrough)
{
	struct px_lcore *pl = cur();
	struct px_session *s = session_get(pl);

	if (s == NULL) {
		cr_conn_destroy(c);
		return;
	}
	cr_telemetry_add(px_ctr_sessions, 1);
	s->cli = c;
	s->passthrough = passthrough;
	/* A passthrough session's group is its hello's; the others', --backend's. */
	s->group = passthrough ? 0 : px_plain_group();
	cr_conn_set_data(c, s);
	/* Nothing is read until a server connection is open (or, passthrough, admitted). */
	cr_conn_read_stop(c);
	s->cli_active = cr_now_ns();
	idle_arm(s);
	(void)cr_conn_peer(c, &s->peer);
	if (px_session_log_id > 0)
		px_slog_begin(&s->log, c, cr_now_ns());
	if (!px_try_admit()) {
		cr_telemetry_add(px_ctr_maxconn_waits, 1);
		px_wait_add(pl, s);
		return;
	}
	s->admitted = true;
	px_session_start(pl, s);
}

static void
cli_open(struct cr_conn *c)
{
	cli_begin(c, false);
}

static void
cli_data(struct cr_conn *c, const void *d, size_t n)
{
	struct px_session *s = cr_conn_data(c);

	/* Before the server connection is open (a TLS client's request read with its
	 * handshake's end; a plain client is not read before), before there is one (waiting
	 * for --maxconn), and a passthrough session's first bytes: held, sent once it is open
	 * (passthrough.c). Not queued on a connection still connecting: if that connect
	 * fails the queue dies with it, and the next backend would get nothing. */
	if (s->sniff != NULL || !s->srv_open) {
		px_sni_data(cur(), s, d, n);
		return;
	}
	if (s->srv == NULL)
		return; /* the server connection has ended: nobody to relay to */
	s->cli_active = s->srv_active = cr_now_ns();
	if (px_relay_bytes(cur(), s, c, s->srv, &s->cli_paused, d, n)) {
		PX_ADD(cr_lcore_id(), s->slot, bytes_out, n);
		s->log.c2s += n;
		px_dir_note(cur(), &s->dir[0], n);
	}
}

static void
cli_eof(struct cr_conn *c)
{
	struct px_session *s = cr_conn_data(c);

	if (s->sniffing) {
		px_sni_eof(cur(), s); /* the hello will never be whole */
		return;
	}
	if (!s->srv_open) {
		/* Connecting, or not yet (waiting for --maxconn): passed on once it is open,
		 * after what is held for it. */
		s->cli_eof = true;
		return;
	}
	px_ended(s, PX_END_CLIENT_CLOSED);
	px_dir_eof(&s->dir[0]);
	if (s->srv != NULL)
		(void)cr_conn_shutdown_write(s->srv);
}

static void
cli_drain(struct cr_conn *c)
{
	struct px_session *s = cr_conn_data(c);

	if (s->srv_paused && s->srv != NULL) {
		s->srv_paused = false;
		px_paused_sync(cur(), s);
		if (px_dir_lib_reads(&s->dir[1]))
			cr_conn_read_start(s->srv);
	}
}

/* The client connection ended with @p err (on_close, or our idle timeout). */
static void
cli_ended(struct px_lcore *pl, struct px_session *s, int err)
{
	s->cli = NULL;
	px_dir_stop(&s->dir[0]);
	px_dir_stop(&s->dir[1]);
	ended_err(pl, s, err, true);
	if (s->srv != NULL && (err != 0 || !s->srv_open)) {
		/* Still connecting: the attempt is of no use now. */
		if (!s->srv_open) {
			cr_conn_destroy(s->srv);
			srv_gone(s);
		} else if (pass_on(s->srv, err)) {
			srv_gone(s);
		}
	}
	session_done(pl, s);
}

static void
cli_close(struct cr_conn *c, int err)
{
	cli_ended(cur(), cr_conn_data(c), err);
}

const struct cr_conn_ops px_client_ops = {
    .on_open = cli_open,
    .on_data = cli_data,
    .on_eof = cli_eof,
    .on_drain = cli_drain,
    .on_close = cli_close,
    .at_boundary = cli_at_boundary,
};

static void
pass_open(struct cr_conn *c)
{
	cli_begin(c, true);
}

const struct cr_conn_ops px_passthrough_ops = {
    .on_open = pass_open,
    .on_data = cli_data,
    .on_eof = cli_eof,
    .on_drain = cli_drain,
    .on_close = cli_close,
    .at_boundary = cli_at_boundary,
};

/* ---- the server side ---- */

static void
srv_open(struct cr_conn *c)
{
	struct px_session *s = cr_conn_arg(c);

	s->srv_open = true;
	cr_timer_stop(&s->connect_timer);
	s->log.connected_ns = cr_now_ns();
	s->srv_active = cr_now_ns();
	idle_arm(s);
	/* Both ends on the turn's clock: no clock read of our own per session. */
	cr_telemetry_observe_ns(px_hist_connect, cr_now_ns() - s->connect_ns);
	PX_ADD(cr_lcore_id(), s->slot, conns, 1);
	px_backend_connected(s->slot);
	if (s->sniff != NULL && !px_sni_replay(cur(), s))
		return; /* aborted */
	if (s->cli_eof) {
		px_ended(s, PX_END_CLIENT_CLOSED);
		(void)cr_conn_shutdown_write(c);
	}
	/* Also after its EOF: reading on is how lib/net meets the FIN that may follow a TLS
	 * client's close_notify, and ends the connection once our side is shut too. */
	if (s->cli != NULL)
		cr_conn_read_start(s->cli);
}

static void
srv_data(struct cr_conn *c, const void *d, size_t n)
{
	struct px_session *s = cr_conn_arg(c);

	PX_ADD(cr_lcore_id(), s->slot, bytes_in, n);
	s->cli_active = s->srv_active = cr_now_ns();
	if (s->cli != NULL && px_relay_bytes(cur(), s, c, s->cli, &s->srv_paused, d, n)) {
		s->log.s2c += n;
		px_dir_note(cur(), &s->dir[1], n);
	}
}

static void
srv_eof(struct cr_conn *c)
{
	struct px_session *s = cr_conn_arg(c);

	px_ended(s, PX_END_SERVER_CLOSED);
	px_dir_eof(&s->dir[1]);
	if (s->cli != NULL)
		(void)cr_conn_shutdown_write(s->cli);
	else
		(void)cr_conn_shutdown_write(c); /* nobody to tell: finish this side */
}

static void
srv_drain(struct cr_conn *c)
{
	struct px_session *s = cr_conn_arg(c);

	if (s->cli_paused && s->cli != NULL) {
		s->cli_paused = false;
		px_paused_sync(cur(), s);
		if (px_dir_lib_reads(&s->dir[0]))
			cr_conn_read_start(s->cli);
	}
}

/* Name why a TLS connect failed, when it got as far as TLS. */
static void
tls_failed(struct cr_conn *c, int slot, int err)
{
	char why[256];

	if (cr_tls_failure(c, why, sizeof(why)) != NULL)
		px_backend_tls_failed(slot, why);
	else if (err == -ETIMEDOUT)
		px_backend_tls_failed(slot, "timed out (TCP connect or TLS handshake)");
	else if (err == -ECONNRESET || err == -EPIPE)
		/* Its FIN or reset after the TCP connect (a refusal is -ECONNREFUSED). */
		px_backend_tls_failed(slot, "closed by the backend during the TLS handshake");
}

/* The connect to @p slot failed (its connection gone): count it, try the next. */
static void
connect_failed(struct px_lcore *pl, struct px_session *s, int slot)
{
	PX_ADD(cr_lcore_id(), slot, fails, 1);
	cr_telemetry_add(px_ctr_connect_fail, 1);
	px_backend_failed(slot);
	if (s->cli != NULL)
		px_connect_next(pl, s);
}

/* --connect-timeout passed, TCP connect and TLS handshake together, and it is not open. */
static void
connect_expired(struct cr_timer *t, void *arg)
{
	struct px_session *s = arg;
	int slot = s->slot;

	(void)t;
	if (s->srv == NULL || s->srv_open)
		return;
	cr_conn_destroy(s->srv); /* no callback: its handshake timer, too, is stopped */
	srv_gone(s);
	px_backend_tls_failed(slot, "timed out (TCP connect and TLS handshake, --connect-timeout)");
	connect_failed(cur(), s, slot);
	session_done(cur(), s);
}

/* The open server connection ended with @p err (on_close, or our idle timeout). */
static void
srv_ended(struct px_lcore *pl, struct px_session *s, int err)
{
	if (s->srv != NULL)
		srv_gone(s);
	px_dir_stop(&s->dir[0]);
	px_dir_stop(&s->dir[1]);
	ended_err(pl, s, err, false);
	if (err != 0 && s->cli != NULL && pass_on(s->cli, err))
		s->cli = NULL;
	session_done(pl, s);
}

static void
srv_close(struct cr_conn *c, int err)
{
	struct px_lcore *pl = cur();
	struct px_session *s = cr_conn_arg(c);
	int slot = s->slot;

	srv_gone(s);
	if (!s->srv_open && (err == 0 || err == -ESHUTDOWN)) {
		/* Closed by our own drain or stop while connecting: not the backend's fault. */
		px_ended(s, pl->retiring ? PX_END_RETIRE : PX_END_SHUTDOWN);
		if (s->cli != NULL)
			cr_conn_close(s->cli);
	} else if (!s->srv_open) {
		/* The connect failed (refused, timed out, unreachable, a TLS handshake that
		 * failed): try the next. */
		if (cr_tls_conn(c))
			tls_failed(c, slot, err);
		connect_failed(pl, s, slot);
	} else {
		srv_ended(pl, s, err);
		return;
	}
	session_done(pl, s);
}

static const struct cr_conn_ops px_server_ops = {
    .on_open = srv_open,
    .on_data = srv_data,
    .on_eof = srv_eof,
    .on_drain = srv_drain,
    .on_close = srv_close,
    .at_boundary = srv_at_boundary,
};

/* ---- memory ---- */

static int
lcore_init(void *mem, unsigned lcore, void *arg)
{
	struct px_lcore *pl = mem;
	unsigned i;

	(void)lcore;
	(void)arg;
	pl->slab = (struct px_session *)(pl + 1);
	px_sni_lcore_init(pl, (struct px_sniff *)(pl->slab + slab_sessions), slab_sniffs);
	for (i = slab_sessions; i-- > 0;) {
		cr_timer_init(&pl->slab[i].connect_timer, connect_expired, &pl->slab[i]);
		px_dir_init(&pl->slab[i]); /* no descriptors: lcore_fini's px_dir_forget() */
		pl->slab[i].next = pl->free;
		pl->free = &pl->slab[i];
	}
	cr_timer_init(&pl->wait_timer, px_wait_timer_fired, pl);
	cr_timer_init(&pl->retire_timer, retire_timer_fired, pl);
	cr_timer_init(&pl->credit_timer, px_credit_timer_fired, pl);
	return 0;
}

static void
lcore_fini(void *mem, unsigned lcore, void *arg)
{
	struct px_lcore *pl = mem;
	struct px_sniff *b = (struct px_sniff *)(pl->slab + slab_sessions);
	unsigned i;

	(void)lcore;
	(void)arg;
	cr_timer_stop(&pl->wait_timer);
	cr_timer_stop(&pl->retire_timer);
	cr_timer_stop(&pl->credit_timer);
	for (i = 0; i < slab_sniffs; i++)
		cr_timer_stop(&b[i].timer);
	for (i = 0; i < slab_sessions; i++) {
		cr_timer_stop(&pl->slab[i].connect_timer);
		cr_timer_stop(&pl->slab[i].idle);
		cr_timer_stop(&pl->slab[i].dir[0].timer);
		cr_timer_stop(&pl->slab[i].dir[1].timer);
		px_dir_forget(&pl->slab[i].dir[0]);
		px_dir_forget(&pl->slab[i].dir[1]);
	}
}

int
px_relay_register(unsigned sessions, unsigned sniffs)
{
	_Static_assert(sizeof(struct px_lcore) % _Alignof(struct px_session) == 0,
		       "the slab follows struct px_lcore");
	_Static_assert(sizeof(struct px_session) % _Alignof(struct px_sniff) == 0,
		       "the ClientHello buffers follow the slab");
	slab_sessions = sessions;
	slab_sniffs = sniffs;
	local_id = cr_lcore_local_register(sizeof(struct px_lcore) +
						   sizeof(struct px_session) * (size_t)sessions +
						   sizeof(struct px_sniff) * (size_t)sniffs,
					   lcore_init, lcore_fini, NULL);
	return local_id < 0 ? local_id : 0;
}
