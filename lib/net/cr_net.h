/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * TCP listeners and connections, outbound TCP connections and UDP sockets on top of
 * lib/io, one lcore at a time.
 *
 * Ownership (doc/guides/design.md rule 1). A connection or UDP socket belongs to the lcore that
 * accepted, connected or bound it; every call on it is made there and every callback runs
 * there. A listener belongs to the lcore that created it (its *home*); by default it has
 * one SO_REUSEPORT socket on every RUNNING lcore, so the kernel spreads connections over
 * the lcores and each accepted connection stays on the lcore that accepted it.
 *
 * Memory (rule 4). Each lcore sizes, when it starts, a slab of connection slots
 * (cr_net_config.max_conns) and a pool of output chunks (chunks x chunk_size bytes); no
 * connection, accept or send allocates. cr_conn_send() copies the caller's bytes into the
 * connection's output queue, appending to the last chunk while it has room. The pool is
 * mapped at start but its pages are the kernel's to give on first touch: the first use of
 * a chunk page-faults inside cr_conn_send()'s copy (and, with overcommit, memory that runs
 * out then is an OOM kill, not -ENOMEM at start) unless cr_net_config.prefault is set.
 *
 * Callbacks (struct cr_conn_ops). on_open when the connection is established, on_data for
 * each received piece (borrowed: valid only during the call), on_eof when the peer shut
 * its write side, on_drain when the output queue falls to the low watermark after it rose
 * above the high one, and on_close exactly once at the end, unless the app destroyed the
 * connection first. A callback is never called from inside a cr_* call the app made, only
 * from the lcore's loop; after on_close returns, or after cr_conn_destroy(), nothing
 * about the connection is called and its pointer is dead.
 *
 * Backpressure. While more than the high watermark (default 64 KiB) is queued, the
 * connection stops reading (the kernel's receive window then throttles the peer); it
 * reads again, and calls on_drain, once the queue is at or below the low watermark
 * (default a quarter of the high one). The watermarks do not cap cr_conn_send(); the pool
 * does (-ENOBUFS).
 *
 * Teardown (rule 6). Destroying or closing a connection abandons its ops in flight; its
 * slot, its queued chunks and its socket are released only when the last of those ops
 * has had its final completion.
 *
 * Retiring and shutting down. When an lcore begins closing (it retires, or the runtime
 * shuts down), lib/net winds it down by itself, before the app's on_retire / on_shutdown
 * hook runs. Its listening sockets stop taking new connections without resetting any that
 * are queued or accepted: retiring, new connections are steered to the lcores that stay
 * and what it takes meanwhile is handed to them; in a shutdown (or when no other socket
 * stays) they refuse new handshakes, and what was queued is accepted and served here
 * (see cr_tcp_listen()).
 * Its UDP sockets stop. Each of its connections is served to its next boundary and then
 * closed as by cr_conn_close() (queued bytes go out, then EOF): once every byte the kernel
 * had received for it when the closing began has been delivered to on_data, and the app
 * says it is at a boundary (struct cr_conn_ops.at_boundary: no request half-read or
 * unanswered); a connection that has received nothing yet gets first_request_ms (struct
 * cr_net_config) for its first request. The lcore keeps running while they finish, unless
 * a shutdown is forced; whatever is left when the lcore stops is closed then
 * (connections: on_close with -ESHUTDOWN).
 */
#ifndef CR_NET_H
#define CR_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "cr_reactor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- addresses ---- */

/** An IPv4 or IPv6 socket address. Plain data: copy it freely. */
struct cr_net_addr {
	union {
		struct sockaddr sa;
		struct sockaddr_in in4;
		struct sockaddr_in6 in6;
		struct sockaddr_storage ss;
	} u;
	socklen_t len; /**< bytes of u in use; 0 = no address */
};

/** Longest text cr_net_addr_format() writes, with its terminating NUL. */
#define CR_NET_ADDR_STRLEN (INET6_ADDRSTRLEN + 16 + 8)

/**
 * Parse "HOST:PORT" into @p out. HOST is a numeric IPv4 address, a numeric IPv6 address in
 * brackets ("[::1]:7000", "[fe80::1%eth0]:7000"), "localhost" (127.0.0.1), or "*" or
 * empty for 0.0.0.0. No name is resolved: a reactor never waits on DNS. PORT is 0-65535
 * (0: let the kernel choose when binding). Any thread.
 * @param out unchanged on failure.
 * @return 0, or -EINVAL (no ':' / no port, port not a number in 0-65535, an IPv6 address
 *         without brackets, a HOST that is not numeric, NULL argument).
 */
int cr_net_addr_parse(const char *s, struct cr_net_addr *out);

/**
 * Format @p a as "1.2.3.4:80" or "[::1]:80" into @p buf (truncated to @p len; use
 * CR_NET_ADDR_STRLEN). An empty or unknown address prints "?". Any thread.
 * @return @p buf.
 */
char *cr_net_addr_format(const struct cr_net_addr *a, char *buf, size_t len);

/** The port of @p a in host order (0 for an empty address). Any thread. */
uint16_t cr_net_addr_port(const struct cr_net_addr *a);

/* ---- per-lcore sizing ---- */

/** How every lcore sizes lib/net's memory when it starts. */
struct cr_net_config {
	uint32_t max_conns;  /**< connection slots per lcore (default 4096) */
	uint32_t chunks;     /**< output chunks per lcore (default 1024) */
	uint32_t chunk_size; /**< bytes per chunk (default 16384; 256 to 1 MiB) */
	/**
	 * How long a retiring lcore's listening socket goes on accepting after new
	 * connections were steered away from it to the sockets that stay, for handshakes
	 * already under way
	 * (default 50 ms; 0 to 60000). Raise it for clients far away (a round trip), or
	 * set net.ipv4.tcp_migrate_req=1, which moves what is left at close.
	 */
	uint32_t drain_grace_ms;
	/**
	 * On a closing lcore, how long a connection that has received nothing yet waits for
	 * its first request before it is closed (default 1000 ms; 0 to 60000): one accepted
	 * just before a retire or a shutdown is served, not dropped.
	 */
	uint32_t first_request_ms;
	/**
	 * Listen on a TCP address another socket already listens on (another process's,
	 * another listener's of this one): the kernel then splits new connections between
	 * them. Default false: cr_tcp_listen() refuses such an address with -EADDRINUSE. Set
	 * it to start a new process beside the old one and stop the old one after, a restart
	 * without refused connections.
	 */
	bool share_addresses;
	/**
	 * Touch every output chunk's pages when the lcore starts (default false). Without
	 * it a chunk's pages come with its first use: a page fault, a kernel page allocation
	 * inside cr_conn_send()'s copy on the lcore's loop, and with overcommit an OOM kill
	 * at run time where the start would have failed. With it the start costs the whole
	 * pool (chunks x chunk_size per lcore) in resident memory at once.
	 */
	bool prefault;
};

/** Fill @p cfg with the defaults. Any thread. */
void cr_net_config_defaults(struct cr_net_config *cfg);

/**
 * Set the sizes lcores use from their next start on. Call before cr_reactor_init(); a
 * running lcore keeps the sizes it started with. Control path; any thread, but not
 * concurrently with lcores starting.
 * @param cfg copied.
 * @return 0, -EINVAL (NULL, max_conns or chunks 0 or above 1<<24, chunk_size not in
 *         256..1 MiB, drain_grace_ms above 60000), -EBUSY (lcores are running).
 */
int cr_net_configure(const struct cr_net_config *cfg);

/* ---- connections ---- */

/** A TCP connection, owned by one lcore. Opaque. */
struct cr_conn;
/** A TCP listener, possibly with a socket on every lcore. Opaque. */
struct cr_listener;

/**
 * What a connection calls. Any member may be NULL. The table is not copied: it must stay
 * valid until every connection made with it has closed (a static const table is usual).
 * Every callback runs on the connection's lcore and may call any cr_conn_* function on
 * it, cr_conn_destroy() included.
 */
struct cr_conn_ops {
	/** Established: accepted, or connected by cr_tcp_connect(). */
	void (*on_open)(struct cr_conn *c);
	/**
	 * @p len > 0 bytes arrived. @p data is borrowed: it is valid only during the call
	 * (keep a copy; cr_conn_send() copies), unless the callback holds it with
	 * cr_conn_hold().
	 */
	void (*on_data)(struct cr_conn *c, const void *data, size_t len);
	/**
	 * The peer shut its write side: no more on_data. NULL means "shut ours when the queue
	 * is sent" (cr_conn_shutdown_write()); otherwise the app decides, and the connection
	 * stays open until it shuts its side or closes.
	 */
	void (*on_eof)(struct cr_conn *c);
	/** The output queue fell to the low watermark after rising above the high one. */
	void (*on_drain)(struct cr_conn *c);
	/**
	 * The end, exactly once unless cr_conn_destroy() came first. @p err is 0 after an
	 * orderly end (both sides shut, or cr_conn_close() finished), else -errno:
	 * -ECONNRESET / -EPIPE (peer reset), -ETIMEDOUT (idle timeout or connect timeout),
	 * -ECONNREFUSED and other connect errors, -ENOSPC (no lib/io op slot), -ESHUTDOWN
	 * (the lcore stopped), -EUSERS (closed idle to make room for a new connection:
	 * cr_conn_opts.reclaimable). The pointer is dead once this returns.
	 */
	void (*on_close)(struct cr_conn *c, int err);
	/**
	 * Asked on a closing lcore, and of a reclaimable connection when its lcore needs
	 * room: true when the connection is at a boundary of the app's protocol — no request
	 * half-read, none unanswered — so that closing it now loses nothing. NULL: every
	 * point between two on_data calls is one (an echo). On a closing lcore lib/net asks
	 * after each delivery and send, and every few tens of ms.
	 */
	bool (*at_boundary)(struct cr_conn *c);
	/**
	 * Moves to another lcore (cr_conn_move(); a retiring lcore's own moves). Set both
	 * on_move_out and on_move_in to opt in; either NULL: the connection never moves, and
	 * a closing lcore closes it at its boundary as before.
	 *
	 * on_move_out runs on the old lcore once the connection is quiet (no op in flight,
	 * their final completions seen, nothing queued, no buffer held, at_boundary true):
	 * the app forgets the connection there (its slot index is dead from this return on)
	 * and returns what it hands over, any pointer (NULL is fine), which travels with
	 * the socket. It must not call cr_conn_* on @p c but cr_conn_data(), cr_conn_arg()
	 * and cr_conn_index().
	 *
	 * on_move_in runs on the new lcore with that pointer, before receiving starts there;
	 * @p c is the connection's new handle (new slot, new cr_conn_index(), cr_conn_data()
	 * carried over). It also runs on the OLD lcore with the same @p c when the message
	 * could not be sent after on_move_out (the target stopped meanwhile, or its mailbox
	 * is full): the connection then stays where it was, and the app takes it back.
	 */
	void *(*on_move_out)(struct cr_conn *c);
	void (*on_move_in)(struct cr_conn *c, void *state);
	/**
	 * The moved socket reached an lcore that could not take it (no free slot, or lib/net
	 * stopped there): it is closed (the peer sees a reset or EOF) and the app frees
	 * @p state here. @p arg is cr_conn_arg() of the connection. May be NULL. Runs on
	 * that lcore.
	 */
	void (*on_move_drop)(void *arg, void *state);
};

struct cr_conn_layer;

/** Per-connection options; zero means the default. */
struct cr_conn_opts {
	/** Close with -ETIMEDOUT after this long without a byte in or out; 0 = never. */
	uint64_t idle_timeout_ns;
	/** Stop reading above this many queued bytes (default CR_NET_HIGH_WATERMARK). */
	uint32_t high_watermark;
	/** Read again, and call on_drain, at or below this (default high / 4; <= high). */
	uint32_t low_watermark;
	/** Leave Nagle's algorithm on (TCP_NODELAY is set by default). */
	bool nagle;
	/**
	 * Keep reading while the output queue is above the high watermark; on_drain still
	 * runs when it falls to the low one. For an app that throttles another connection
	 * instead, as a proxy does with the connection feeding this one's queue: stopping
	 * this one's reads too would couple the two directions of a relay, and a peer that
	 * waits for its own sends before reading (an echo) would then never drain it.
	 */
	bool keep_reading;
	/**
	 * When the lcore is out of connection slots or of descriptors (EMFILE, ENFILE) and
	 * a new connection waits, this one may be closed to make room: if it is idle at a
	 * boundary (nothing queued or being sent, at_boundary true) and among the least
	 * recently active such ones. Its on_close gets -EUSERS. Up to 16 are closed at a
	 * time, so a full lcore keeps taking new clients instead of leaving them in the
	 * kernel's backlog behind connections that say nothing (nginx reuses its keep-alive
	 * connections the same way). For protocols where an idle client is fine to drop
	 * (HTTP keep-alive, an echo); not for one whose clients expect to stay (Redis).
	 */
	bool reclaimable;
	/**
	 * A protocol layer between the socket and the app (lib/tls's cr_tls_conn_opts() sets
	 * it): NULL for none. Not copied (a static table); see struct cr_conn_layer.
	 */
	const struct cr_conn_layer *layer;
	void *layer_arg; /**< for the layer (cr_conn_layer_arg()) */
	/**
	 * Receive buffers the connection may hold at once (cr_conn_hold()); at the cap it
	 * stops reading until one is released. 0: as many as the high watermark covers
	 * (high_watermark / cr_io_buf_size(), at least 1).
	 */
	uint32_t max_held_bufs;
};

/** Default high watermark of the output queue, in bytes. */
#define CR_NET_HIGH_WATERMARK (64u * 1024)

/** How cr_tcp_listen() listens. */
struct cr_tcp_listen_opts {
	struct cr_net_addr addr; /**< to bind; port 0 lets the kernel choose (one port for all) */
	struct cr_conn_opts conn; /**< for every accepted connection */
	unsigned backlog;	  /**< listen(2) backlog per socket; 0 = 1024 */
	/**
	 * One socket, accepted on the home lcore, which hands each connection to the RUNNING
	 * lcores round robin (itself included) with cr_send(). Default: one SO_REUSEPORT
	 * socket per RUNNING lcore.
	 */
	bool single_acceptor;
	/** IPV6_V6ONLY on an IPv6 address (default: the system's, usually dual stack). */
	bool v6only;
};

/**
 * Listen on opts->addr and serve each accepted connection with @p ops and @p arg.
 *
 * The sockets are created, bound and listening when this returns (connections that
 * arrive are queued by the kernel); accepting starts on each lcore as a message reaches
 * it. By default there is one SO_REUSEPORT socket per lcore RUNNING at the time of the
 * call, and a connection stays on the lcore whose socket the kernel gave it to. With
 * single_acceptor, one socket on the calling lcore. An lcore that runs out of connection
 * slots stops accepting (connections wait in the kernel's backlog) until one frees; an
 * lcore out of file descriptors (EMFILE/ENFILE) retries after a back-off of 10 ms,
 * doubling to at most 160 ms, so it never spins.
 *
 * An lcore started later (cr_lcore_start(), a new incarnation) opens its own socket in
 * every listener open at the time, and accepts from its first turn; an lcore starting
 * while the listener itself is being started (before its start messages have gone
 * round) gets none. When an lcore retires while other lcores keep a socket, a classic
 * BPF program on the SO_REUSEPORT group steers new connections away from its socket; it
 * goes on accepting for drain_grace_ms (struct cr_net_config), hands every connection it
 * takes to a staying lcore, takes what is left queued, and closes: no queued connection
 * is reset. A socket no other stays for (a shutdown, or the listener's close) refuses
 * new handshakes instead (a socket filter drops SYNs: those clients retry, and are
 * refused once it closes), goes on accepting for drain_grace_ms (handshakes under way),
 * serves what it takes itself, takes what is left queued, and closes.
 *
 * Lcore only; the calling lcore becomes the listener's home, which alone can close it:
 * use the main lcore, which never retires.
 * @param opts copied.
 * @param ops  not copied (see struct cr_conn_ops).
 * @param arg  given to every connection (cr_conn_arg()).
 * @param out  receives the listener, to pass to cr_listener_close().
 * The address must be free: one that another socket listens on already, in this process
 * or another, is refused with -EADDRINUSE unless struct cr_net_config.share_addresses is
 * set (SO_REUSEPORT alone would let the kernel split connections between them).
 * @return 0; -EPERM off an lcore or where lib/net is not running; -EINVAL (NULL or
 *         unusable argument, watermarks inverted); -EADDRINUSE, -EACCES,
 *         -EADDRNOTAVAIL, -EMFILE, ... from socket/bind/listen; -ENOMEM; -ENOSPC (too
 *         many listeners, at most 64 at a time).
 */
int cr_tcp_listen(const struct cr_tcp_listen_opts *opts, const struct cr_conn_ops *ops,
		  void *arg, struct cr_listener **out);

/**
 * The address the listener is bound to (with the port the kernel chose for port 0).
 * Any thread, while the listener is not closed.
 */
void cr_listener_addr(const struct cr_listener *l, struct cr_net_addr *out);

/** Listening sockets made by cr_tcp_listen() (one per RUNNING lcore, or one with
 * single_acceptor); restarted lcores' sockets are not counted. Any thread. */
unsigned cr_listener_sockets(const struct cr_listener *l);

/**
 * Stop listening, without resetting what is queued: every RUNNING lcore's socket refuses
 * new handshakes, accepts and serves what it holds, and closes (see cr_tcp_listen()). Connections already accepted
 * are not affected. The handle is dead after this call. Once every socket is closed (the
 * port is free), @p done(@p arg) runs once, on the home lcore; when no message can reach
 * home (it stopped, or the last socket closed on an lcore that is past its loop), on the
 * lcore that closed the last socket instead. NULL @p l or @p done is fine.
 * On the listener's home lcore only (-EPERM is not reported: a call elsewhere is ignored
 * and logged, and @p done does not run).
 */
void cr_listener_close(struct cr_listener *l, cr_msg_fn done, void *arg);

/**
 * Connect to @p to, on the calling lcore. Returns at once; on_open runs when connected, or
 * on_close with the error (-ETIMEDOUT after @p timeout_ns, 0 = the kernel's own timeout;
 * -ECONNREFUSED, -ENETUNREACH, ...). cr_conn_send() may be called before on_open: the
 * bytes go out once connected. Also on a closing lcore (retiring or shutting down, until it
 * stops): what it still serves may need a connection; that one, too, ends at its
 * boundary, and the lcore waits for it as for the others.
 * Lcore only.
 * @param to         copied.
 * @param timeout_ns connect deadline; 0 = none of ours.
 * @param opts       copied; may be NULL for the defaults.
 * @param ops        not copied (see struct cr_conn_ops).
 * @param arg        for the app (cr_conn_arg()).
 * @return the connection, or NULL with errno EPERM (off lcore / lib/net not running or
 *         stopping),
 *         EINVAL, EMFILE (no slot: too many connections on this lcore; or no fd), ENOSPC
 *         (no lib/io op slot), or an errno from socket(2).
 */
struct cr_conn *cr_tcp_connect(const struct cr_net_addr *to, uint64_t timeout_ns,
			       const struct cr_conn_opts *opts, const struct cr_conn_ops *ops,
			       void *arg);

/**
 * Queue a copy of @p len bytes of @p data for sending, after everything queued before.
 * All of it is queued or none. Sends happen in order; a short send is resumed where it
 * stopped. On the connection's lcore.
 * @return 0 (@p data may be reused at once); -ENOBUFS (this lcore's chunk pool cannot
 *         hold it, or this connection is above its high watermark and the pool is down
 *         to its last quarter, which is kept for the connections that are not; nothing
 *         queued); -EPIPE (the write side is shut or the connection is
 *         closing or closed); -EINVAL (NULL).
 */
int cr_conn_send(struct cr_conn *c, const void *data, size_t len);

/** Bytes queued and not yet acknowledged by a send completion. On the connection's lcore. */
size_t cr_conn_queued(const struct cr_conn *c);

/** True while the queue is at or below the high watermark. On the connection's lcore. */
bool cr_conn_writable(const struct cr_conn *c);

/**
 * Half-close: once everything queued is sent, shut the write side (the peer reads EOF).
 * Receiving goes on. When both sides are shut the connection ends with on_close(0).
 * Idempotent. On the connection's lcore.
 * @return 0, or -ENOTCONN (closing or closed).
 */
int cr_conn_shutdown_write(struct cr_conn *c);

/**
 * Graceful close: no more on_data or on_eof; send what is queued, shut the write side,
 * read and drop until the peer's EOF (at most 2 s, so the kernel sends no reset for
 * unread data), then on_close(c, 0) — or on_close with the error if one comes first.
 * Idempotent. On the connection's lcore.
 */
void cr_conn_close(struct cr_conn *c);

/**
 * Abort: no callback runs after this, on_close included. Ops in flight are abandoned; the
 * socket is closed and the slot and its queued bytes are released after their final
 * completions. NULL is fine. Not after on_close returned. On the connection's lcore.
 */
void cr_conn_destroy(struct cr_conn *c);

/**
 * Stop reading: the receive is cancelled and the kernel's window then throttles the peer.
 * Data already received when the cancel lands (a few receive buffers at most) is still
 * passed to on_data: nothing is dropped. Idempotent. On the connection's lcore.
 */
void cr_conn_read_stop(struct cr_conn *c);

/** Undo cr_conn_read_stop(). On the connection's lcore. */
void cr_conn_read_start(struct cr_conn *c);

/** The app's per-connection pointer (NULL until set). On the connection's lcore. */
void *cr_conn_data(const struct cr_conn *c);

/** Set the app's per-connection pointer. On the connection's lcore. */
void cr_conn_set_data(struct cr_conn *c, void *data);

/** The arg given to cr_tcp_listen() or cr_tcp_connect(). On the connection's lcore. */
void *cr_conn_arg(const struct cr_conn *c);

/**
 * The connection's socket, for getsockopt and the like; never close it, nor read or
 * write it directly. On the connection's lcore.
 */
int cr_conn_fd(const struct cr_conn *c);

/**
 * The connection's slot index on its lcore, in [0, cr_net_config.max_conns), stable while
 * the connection lives and reused after it ends: an app keeps per-connection state in
 * arrays sized at start instead of allocating. On the connection's lcore.
 */
unsigned cr_conn_index(const struct cr_conn *c);

/** The lcore the connection belongs to. Any thread. */
unsigned cr_conn_lcore(const struct cr_conn *c);

/**
 * The app moved @p bytes onto @p c's socket itself, past the output queue (a splice from a
 * file into cr_conn_fd()): count them as activity for the idle timeout and in the lcore's
 * bytes_out. Only while the queue is empty (cr_conn_queued() 0) and nothing is queued
 * until the app's own writes are done, so the bytes keep their order. On the
 * connection's lcore.
 */
void cr_conn_note_sent(struct cr_conn *c, size_t bytes);

/**
 * Move @p c to lcore @p target, keeping the TCP connection: its socket, its options, its
 * cr_conn_data() and the state the app hands over (struct cr_conn_ops.on_move_out)
 * travel there in one message (cr_send()), and @p target re-arms the receive after
 * on_move_in. Nothing the peer sends is lost or repeated: the old receive is cancelled and
 * its final completion awaited first (data it still carried reaches on_data here), and
 * what arrives meanwhile waits in the socket.
 *
 * Returns at once; the rest runs from the lcore's loop. The move is abandoned, the
 * connection staying here and reading again, when by the time the receive is quiet the
 * connection is no longer movable: bytes that arrived made at_boundary false, the app
 * queued a send or held a buffer, the peer shut its side or reset, or @p target is no
 * longer RUNNING. If @p target begins closing after the message was sent, it takes the
 * connection anyway and closes it at its boundary, as a closing lcore does its own.
 * Call it again to retry. On the connection's lcore (inside its callbacks too).
 * A layered connection (TLS) moves with its layer's state when the layer supports it
 * (struct cr_conn_layer.move_out): lib/tls's SSL travels, the session goes on.
 * @return 0 (under way); -EINVAL (NULL, @p target is this lcore or no lcore); -ENOTSUP
 *         (the ops do not opt in, or a layer that cannot move); -EALREADY (a move is under
 *         way); -ENOTCONN (not open, closing, or either side shut); -EBUSY (bytes queued
 *         or being sent, receive buffers held, or the layer mid-exchange: a handshake);
 *         -ESHUTDOWN (@p target is not RUNNING).
 */
int cr_conn_move(struct cr_conn *c, unsigned target);

/** True while a move of @p c is under way (cr_conn_move()). On the connection's lcore. */
bool cr_conn_moving(const struct cr_conn *c);

/** The peer's address. On the connection's lcore. @return 0 or -errno of getpeername. */
int cr_conn_peer(const struct cr_conn *c, struct cr_net_addr *out);

/* ---- lent receive buffers ---- */

/**
 * A receive buffer the app holds past on_data (cr_conn_hold()): the bytes stay where the
 * kernel put them, and go back to the lcore's pool when the last reference is dropped.
 *
 * Rules. A buffer belongs to the lcore that received it: every call on it is made there
 * (a debug build asserts it). A connection holds at most cr_conn_opts.max_held_bufs at
 * once and stops reading at its cap (backpressure on itself alone); it reads again when
 * one of them is released. The lcore's spare buffers take the place of held ones, so
 * holding never starves another connection's receives; when the spares are all in use,
 * cr_conn_hold() refuses (copy instead). A buffer outlives its connection: after on_close
 * or cr_conn_destroy() the references the app has are still its own, and the buffer goes
 * back at the last cr_buf_unref(), whenever that is. Release every buffer before its
 * lcore stops (on_close is the last chance): one still held then stays valid (its bytes
 * readable, ref/unref only counting, from any one thread at a time), but its memory and
 * its handle are kept until the process exits (logged as a warning), never reused.
 */
struct cr_buf {
	/* public, read-only */
	const uint8_t *data; /**< the bytes */
	uint32_t len;	     /**< how many */
	/* private: lib/net's */
	uint32_t refs;
	uint32_t id;	      /* lib/io's buffer id */
	unsigned lcore;
	struct cr_conn *conn; /* whose cap it counts against; NULL once that one ended */
	struct cr_buf *next, *prev;
};

/**
 * Inside on_data: keep the bytes just delivered past the call, without a copy. Called
 * again in the same on_data it returns the same buffer with one more reference.
 * Only for the connection whose on_data is running, and only without a layer (a TLS
 * connection's plaintext is not in a receive buffer).
 * @return the buffer with a reference for the caller (drop it with cr_buf_unref()), or
 *         NULL with errno ENOBUFS (the connection is at its max_held_bufs, or the lcore's
 *         spares are all in use: copy the bytes instead), EINVAL (not inside @p c's
 *         on_data), ENOTSUP (a layered connection, or an io driver that cannot).
 */
struct cr_buf *cr_conn_hold(struct cr_conn *c);

/** Take one more reference on @p b. On @p b's lcore (any thread once it stopped). */
void cr_buf_ref(struct cr_buf *b);

/**
 * Drop a reference on @p b; at the last one the buffer goes back to the lcore's pool (its
 * bytes are dead from then on) and, if its connection was at its cap, that connection
 * reads again. NULL is fine. On @p b's lcore; once that lcore stopped, on any thread
 * (the reference only counts: the memory stays until the process exits).
 */
void cr_buf_unref(struct cr_buf *b);

/* ---- sends without copies ---- */

/**
 * Queue bytes [@p off, @p off + @p len) of held buffer @p b for sending on @p c, after
 * everything queued before, without a copy: the queue takes a reference on @p b and drops
 * it once those bytes are sent (or the connection ends first). @p c may be any connection
 * of @p b's lcore. The bytes count in cr_conn_queued(), the watermarks and on_drain as
 * cr_conn_send()'s do, and take one output chunk (as a record of the slice, not a copy),
 * so the pool's rules apply. On a layered connection (TLS) the layer encrypts a copy at
 * once and no reference is kept. On the connection's lcore.
 * @return 0; -ENOBUFS, -EPIPE as cr_conn_send(); -EINVAL (NULL, or the slice is not
 *         inside @p b); -EXDEV (@p b belongs to another lcore).
 */
int cr_conn_send_buf(struct cr_conn *c, struct cr_buf *b, size_t off, size_t len);

/**
 * Called once when the memory given to cr_conn_sendv() is the app's again: @p err 0 when
 * all of it was sent, -ECANCELED when the connection ended before (closed, reset or
 * destroyed: the kernel holds none of it then either).
 */
typedef void (*cr_conn_sent_fn)(void *arg, int err);

/**
 * Queue the @p n buffers of @p iov for sending on @p c, after everything queued before,
 * without a copy: the memory must stay valid and unchanged until @p sent(@p arg) runs,
 * exactly once (see cr_conn_sent_fn). It runs from the lcore's loop after the bytes went
 * out, or when the connection's queue is dropped: once its ops in flight have completed,
 * which is inside cr_conn_destroy() when none are. All or nothing: each buffer takes one
 * output chunk (a record, not a copy) and the pool's rules apply as for cr_conn_send().
 * On a layered connection (TLS) the layer encrypts a copy of each buffer at once, and
 * @p sent(@p arg, 0) runs before this returns 0; all or nothing there too when the layer
 * has @c sendv (lib/tls has), else a refused buffer leaves those before it queued.
 * On the connection's lcore.
 * @return 0; -ENOBUFS, -EPIPE as cr_conn_send() (@p sent is not called); -EINVAL (NULL,
 *         @p n 0 or above 64, no byte at all, or a buffer above 4 GiB).
 */
int cr_conn_sendv(struct cr_conn *c, const struct iovec *iov, unsigned n,
		  cr_conn_sent_fn sent, void *arg);

/** Receive buffers connection @p c holds now. On the connection's lcore. */
unsigned cr_conn_held_bufs(const struct cr_conn *c);

/* ---- layers ---- */

/**
 * A protocol layer between a connection's socket and its app, such as lib/tls: the app
 * keeps its struct cr_conn_ops and its cr_conn_* calls, and lib/net routes the socket's
 * events to the layer and the app's sends and closes through it.
 *
 * lib/net calls @c wire's callbacks where it would call the app's: the layer gets the
 * bytes off the socket (on_data), the establishment, EOF, drain, the end and the boundary
 * questions, and calls the app's own table (cr_conn_app_ops()) when it has something for
 * the app. cr_conn_send() on a layered connection is @c send, which puts what the layer
 * makes of the bytes on the wire with cr_conn_send_wire(); cr_conn_close() and
 * cr_conn_shutdown_write() first call @c shut, so the layer may queue its last words
 * (a close_notify) before the write side is shut. @c end runs when the connection ends,
 * before on_close and whether or not on_close runs (cr_conn_destroy()): the layer stops
 * its own timers there, so nothing of its reaches an app that destroyed the connection.
 * @c release runs when the slot is freed
 * (after the last final completion, whether on_close ran or cr_conn_destroy() came
 * first), so the layer frees its per-connection state then. @c sendv is
 * cr_conn_sendv() on a layered connection: it copies the @p n buffers into the layer's
 * output, all of them or none (0, or an error with nothing queued: -ENOBUFS, -EPIPE,
 * ...); NULL means @c send is called for each buffer in turn. Every member but @c wire
 * may be NULL. All of them run on the connection's lcore.
 *
 * Moves (cr_conn_move()): a layered connection moves only when its layer sets
 * @c move_out, @c move_in and @c move_drop (and the app opts in, struct cr_conn_ops). Then
 * @c movable, if set, is asked with the app's checks; false keeps the connection here
 * (the layer is mid-exchange: a handshake, a hand-over to the kernel). The layer's state
 * travels in @c move_size bytes of the move's own message (lib/net allocates them with
 * it, so the layer allocates nothing and cannot fail there). @c move_out runs on the old
 * lcore right after the app's on_move_out, with the connection quiet (no op in flight,
 * nothing queued, no buffer held, at_boundary true): the layer writes its per-connection
 * state into @p state and detaches it from @p c (stops its timers, which belong to this
 * lcore's wheel, and clears cr_conn_layer_data(), so @c end and @c release that follow
 * find nothing); what it hands over must hold nothing of this lcore's pools (DESIGN rule
 * 11). @c move_in runs on the new lcore before the app's on_move_in (and on the old one,
 * with the old @p c, when the message could not be sent; there it must not fail): the
 * layer takes its state out of @p state, attaches it to @p c and re-arms its timers
 * there; 0, or -errno after releasing what the state held (the connection is then closed
 * and the app's on_move_drop frees the app's). @c move_drop releases what @p state holds
 * when the moved socket reached an lcore which could not take it (@p layer_arg is
 * cr_conn_layer_arg()); it runs on that lcore. lib/net frees @p state's memory itself.
 */
struct cr_conn_layer {
	const struct cr_conn_ops *wire;
	int (*send)(struct cr_conn *c, const void *data, size_t len);
	int (*sendv)(struct cr_conn *c, const struct iovec *iov, unsigned n);
	void (*shut)(struct cr_conn *c);
	void (*end)(struct cr_conn *c);
	void (*release)(struct cr_conn *c);
	bool (*movable)(const struct cr_conn *c);
	size_t move_size;
	void (*move_out)(struct cr_conn *c, void *state);
	int (*move_in)(struct cr_conn *c, void *state);
	void (*move_drop)(void *layer_arg, void *state);
};

/**
 * Queue bytes on the socket itself, past the connection's layer (as cr_conn_send()
 * without one: same results). For layers. On the connection's lcore.
 */
int cr_conn_send_wire(struct cr_conn *c, const void *data, size_t len);

/**
 * As cr_conn_send_wire(), but past the pool's reserve (refused only when the pool itself
 * is out): for a layer's records of a send that cr_conn_send_room() admitted whole (the
 * first record may lift the queue above the high watermark; the rest must not then be
 * refused), and for its last words of at most a chunk (close_notify, a KeyUpdate reply),
 * without which the peer would see a cut stream. On the connection's lcore.
 */
int cr_conn_send_wire_past_reserve(struct cr_conn *c, const void *data, size_t len);

/**
 * Bytes cr_conn_send_wire() can queue now without -ENOBUFS: the room left in the
 * connection's last chunk plus this lcore's free chunks, less the pool's reserve when the
 * connection is above its high watermark (the rule cr_conn_send_wire() applies). A layer
 * that checks a send against it, then queues it with cr_conn_send_wire_past_reserve(),
 * is all or nothing as cr_conn_send() is without a layer. On the connection's lcore.
 */
size_t cr_conn_send_room(const struct cr_conn *c);

/** The app's table (the one given to cr_tcp_listen() or cr_tcp_connect()). For layers. */
const struct cr_conn_ops *cr_conn_app_ops(const struct cr_conn *c);

/** cr_conn_opts.layer of @p c (NULL: none). On the connection's lcore. */
const struct cr_conn_layer *cr_conn_layer(const struct cr_conn *c);

/** cr_conn_opts.layer_arg of @p c. For layers. On the connection's lcore. */
void *cr_conn_layer_arg(const struct cr_conn *c);

/** The layer's per-connection pointer (NULL until set). On the connection's lcore. */
void *cr_conn_layer_data(const struct cr_conn *c);

/** Set the layer's per-connection pointer. On the connection's lcore. */
void cr_conn_set_layer_data(struct cr_conn *c, void *data);

/** True from establishment until the connection ends or starts closing (cr_conn_close()):
 * what a layer asks before it calls the app. On the connection's lcore. */
bool cr_conn_is_open(const struct cr_conn *c);

/** True once the connection's lcore began closing: it is closed at its next boundary
 * (struct cr_conn_ops.at_boundary). On the connection's lcore. */
bool cr_conn_ending(const struct cr_conn *c);

/**
 * For layers: the app's stream begins now, after the layer's own exchange (lib/tls: its
 * handshake is done). On a closing lcore the wait for the first request
 * (cr_net_config.first_request_ms) then starts again from now, as for a connect that
 * completes there. On the connection's lcore.
 */
void cr_conn_layer_opened(struct cr_conn *c);

/**
 * For layers: @p len bytes of the app's reached its on_data. On a layered connection the
 * first-request wait of a closing lcore ends with the app's first bytes, not the wire's
 * (a handshake is not a request). On the connection's lcore.
 */
void cr_conn_layer_rx(struct cr_conn *c, size_t len);

/**
 * For layers: from now on the socket yields the app's bytes, not the layer's (lib/tls
 * gave its records to the kernel, kTLS). The kernel's count of received bytes then no
 * longer matches what reaches on_data: a closing lcore waits for the bytes delivered so
 * far instead (a request the kernel holds but has not decrypted at the closing may be
 * cut; on a connection already ending, the mark taken then is reset to them), and the
 * reclaim takes the connection as read. A receive failing -EIO (a record that is not
 * data: the peer's close_notify) is then the peer's EOF, not an error. On the
 * connection's lcore.
 */
void cr_conn_layer_plain(struct cr_conn *c);

/**
 * For layers: stop (@p on false) or resume reading for the layer's own reasons, as
 * cr_conn_read_stop() / cr_conn_read_start() do, but apart from the app's: the
 * connection reads only while neither has stopped it. On the connection's lcore.
 */
void cr_conn_layer_read(struct cr_conn *c, bool on);

/** True while a receive of @p c is in flight (after reads stopped, until its last
 * completion came). For layers. On the connection's lcore. */
bool cr_conn_receiving(const struct cr_conn *c);

/** The connection slots of the calling lcore (cr_net_config.max_conns as it started). */
unsigned cr_net_conn_slots(void);

/* ---- UDP ---- */

/** A UDP socket, owned by one lcore. Opaque. */
struct cr_udp;

/** What a UDP socket calls; any member may be NULL. Not copied (as cr_conn_ops). */
struct cr_udp_ops {
	/** A datagram arrived; @p data and @p from are borrowed for the call. */
	void (*on_datagram)(struct cr_udp *u, const void *data, size_t len,
			    const struct cr_net_addr *from);
	/** Receiving failed with @p err; one receive slot stops after a fatal error. */
	void (*on_error)(struct cr_udp *u, int err);
};

/** UDP socket options; zero means the default. */
struct cr_udp_opts {
	uint32_t max_datagram; /**< bytes per receive / send buffer (default 65536) */
	uint32_t recv_depth;   /**< receives kept posted (default 8) */
	uint32_t send_depth;   /**< sends in flight at most (default 32) */
	/**
	 * SO_REUSEPORT, to bind one socket per lcore. The first of this process's sockets
	 * on an address is refused (-EADDRINUSE) when another process holds it, unless
	 * cr_net_config.share_addresses: the kernel would split its datagrams with them.
	 */
	bool reuseport;
	bool v6only;	       /**< IPV6_V6ONLY on an IPv6 address */
};

/**
 * Bind a UDP socket to @p addr on the calling lcore and start receiving. Its buffers
 * (recv_depth + send_depth buffers of max_datagram bytes) are allocated here, once; a
 * longer datagram is truncated. Lcore only (control path: allocates).
 * @param addr copied; port 0 lets the kernel choose (see cr_udp_addr()).
 * @param opts copied; may be NULL for the defaults.
 * @param ops  not copied (see struct cr_udp_ops).
 * @param arg  for the app (cr_udp_arg()).
 * @return the socket, or NULL with errno EPERM (off lcore / lib/net not running), EINVAL,
 *         ENOMEM, ENOSPC (no lib/io op slot), or an errno from socket/bind.
 */
struct cr_udp *cr_udp_bind(const struct cr_net_addr *addr, const struct cr_udp_opts *opts,
			   const struct cr_udp_ops *ops, void *arg);

/**
 * Send a copy of @p len bytes of @p data to @p to. On the socket's lcore.
 * @return 0 (queued; @p data may be reused), -ENOBUFS (send_depth sends in flight),
 *         -EMSGSIZE (longer than max_datagram), -EBADF (stopped by cr_net_drain()),
 *         -EINVAL (NULL @p u or @p to, or NULL @p data with @p len), -ENOSPC (no lib/io
 *         op slot).
 */
int cr_udp_send(struct cr_udp *u, const void *data, size_t len, const struct cr_net_addr *to);

/** The bound address (with the chosen port). On the socket's lcore. @return 0 or -errno. */
int cr_udp_addr(const struct cr_udp *u, struct cr_net_addr *out);

/** The arg given to cr_udp_bind(). On the socket's lcore. */
void *cr_udp_arg(const struct cr_udp *u);

/**
 * Close: no callback after this; the memory goes after the final completions of the ops
 * in flight. NULL is fine. On the socket's lcore.
 */
void cr_udp_close(struct cr_udp *u);

/* ---- counters ---- */

/** Counters of one lcore, written by it, read by anyone without locks. */
struct cr_net_stats {
	uint64_t accepted;	  /**< connections accepted (or handed to this lcore) */
	uint64_t refused;	  /**< accepted sockets closed at once: no slot, none to wait in */
	uint64_t accept_backoffs; /**< accepts paused by EMFILE/ENFILE/ENOBUFS/ENOMEM */
	uint64_t connected;	  /**< cr_tcp_connect() successes */
	uint64_t closed;	  /**< connections ended (on_close or destroy) */
	uint64_t conns;		  /**< a gauge: connection slots in use (closing included) */
	uint64_t bytes_in;
	uint64_t bytes_out;
	uint64_t send_nobufs; /**< cr_conn_send() refused with -ENOBUFS */
	uint64_t short_sends; /**< sends the kernel took only part of (the rest is resent) */
	uint64_t udp_in;      /**< datagrams received */
	uint64_t udp_out;     /**< datagrams sent */
	uint64_t udp_drops;   /**< cr_udp_send() refused, or a send failed */
	uint64_t chunks_free; /**< a gauge: output chunks free */
	uint64_t handed_off;  /**< connections a draining listener passed to another lcore */
	uint64_t reclaimed;   /**< idle connections closed to make room (reclaimable) */
	uint64_t bufs_held;   /**< a gauge: receive buffers held (cr_conn_hold()) */
	uint64_t hold_nobufs; /**< cr_conn_hold() refused with ENOBUFS */
	uint64_t moved_out;   /**< connections moved to another lcore (cr_conn_move()) */
	uint64_t moved_in;    /**< connections moved here from another lcore */
	uint64_t move_aborts; /**< moves abandoned: the connection stayed here */
	uint64_t move_drops;  /**< moved sockets closed here: no slot to take them */
};

/** Snapshot lcore @p lcore's counters. Any thread. @return 0 or -EINVAL. */
int cr_net_stats(unsigned lcore, struct cr_net_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* CR_NET_H */
