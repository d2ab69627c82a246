/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/net internals shared by its source files and its unit suites. Never installed.
 */
#ifndef NET_INTERNAL_H
#define NET_INTERNAL_H

#include <assert.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "cr_io.h"
#include "cr_log.h"
#include "cr_net.h"
#include "cr_reactor.h"
#include "cr_timer.h"

#ifdef CR_DEBUG
#define NET_ASSERT_OWNER(nl) assert((nl)->lcore == cr_lcore_id())
#else
#define NET_ASSERT_OWNER(nl) ((void)(nl))
#endif

/* -EAGAIN completions of one connection's sends (or receives) in a row before it ends. */
#define NET_AGAIN_MAX 64
/* struct cr_buf.lcore of a buffer still held when its lcore stopped (net_buf.c). */
#define NET_BUF_ORPHAN UINT_MAX
/* Chunks one sendmsg covers at most. */
#define NET_IOV_MAX 8
/* cr_conn_close(): how long to read and drop while waiting for the peer's EOF. */
#define NET_LINGER_NS (2ull * 1000 * 1000 * 1000)
/* Accept back-off after EMFILE and friends: first delay, then doubled up to the cap. */
#define NET_BACKOFF_MIN_NS (10ull * 1000 * 1000)
#define NET_BACKOFF_MAX_NS (160ull * 1000 * 1000)
#define NET_MAX_LISTENERS 64
/* Accepted sockets a listening socket holds while its lcore has no free slot. */
#define NET_STASH 256
/* At most this many idle connections closed at a time to make room (cr__net_reclaim). */
#define NET_RECLAIM_BATCH 16
/* Out of descriptors with idle connections just closed: the next accept, this soon. */
#define NET_RECLAIM_RETRY_NS (1ull * 1000 * 1000)
/* Connections wait for a slot and none was idle: look again this often. */
#define NET_RECLAIM_POLL_NS (50ull * 1000 * 1000)
/* A draining socket's last non-blocking accepts: per tick, and in all on a listener's
 * home for a socket whose lcore never started accepting. */
#define NET_DRAIN_BATCH 64
#define NET_DRAIN_ACCEPT_MAX 4096
/* A draining socket retries hand-offs the mailboxes refused (full) this often. */
#define NET_DRAIN_RETRY_NS (100ull * 1000)
/* An ending connection that is not at a boundary yet is looked at again this often. */
#define NET_ENDING_RECHECK_NS (20ull * 1000 * 1000)

/*
 * One piece of an output queue: bytes [off, len) of it are still to be sent. A copy's
 * bytes are data[]; a chunk that carries no copy (cr_conn_send_buf(), cr_conn_sendv())
 * points at them (ext), and says what frees them once they are sent or dropped.
 */
struct net_chunk {
	struct net_chunk *next;
	uint32_t off;
	uint32_t len;
	const uint8_t *ext;    /* NULL: the bytes are data[] */
	struct cr_buf *buf;    /* ext in a held buffer: the queue's reference */
	cr_conn_sent_fn sent;  /* called once after the chunk's bytes, or when dropped */
	void *sent_arg;
	uint8_t data[];
};

enum conn_state {
	CONN_FREE = 0,
	CONN_CONNECTING,
	CONN_OPEN,
	CONN_CLOSING, /* cr_conn_close(): flushing, then dropping input until EOF */
	CONN_DEAD,    /* ended; waiting for its ops' final completions */
};

struct net_lcore;

struct cr_conn {
	/* The lcore's live list, or the free list (next only). */
	struct cr_conn *next, *prev;
	struct net_lcore *nl;
	const struct cr_conn_ops *ops;	  /* the app's */
	const struct cr_conn_ops *wire;	  /* what lib/net calls: the layer's, else ops */
	const struct cr_conn_layer *layer; /* NULL: none */
	void *layer_arg, *layer_data;
	void *arg;
	void *data;
	int fd;
	uint8_t state; /* enum conn_state */
	bool read_eof;
	bool read_stopped; /* by the app */
	bool layer_read_stopped; /* by its layer (cr_conn_layer_read), apart from the app's */
	bool keep_reading; /* cr_conn_opts.keep_reading */
	bool reclaimable;  /* cr_conn_opts.reclaimable */
	bool reclaimed;	   /* ended to make room: its slot is on the way back */
	bool above_high;
	bool recv_cancel; /* cr_io_cancel sent to recv_op */
	bool wr_shut_req;
	bool wr_shut_done;
	bool finish_pending; /* end at the next timer run (never inside an app call) */
	bool ending;	     /* the lcore is closing: close at the next boundary */
	bool plain_socket;   /* a layer gave its records to the kernel (cr_conn_layer_plain) */
	bool moving;	     /* cr_conn_move() under way: reads stop, then the hand-over */
	bool moved;	     /* handed to another lcore: the slot goes, the socket is theirs */
	unsigned move_to;
	int finish_err;
	uint8_t send_again, recv_again; /* -EAGAIN completions in a row */
	/* Ops in flight plus callbacks on the stack; the slot is freed at 0 once DEAD. */
	unsigned holds;
	cr_op_id recv_op, send_op, connect_op;
	size_t queued;
	uint32_t nchunks; /* output chunks in the queue (head..tail) */
	size_t sending; /* bytes of the send in flight */
	struct net_chunk *head, *tail;
	struct msghdr msg;
	struct iovec iov[NET_IOV_MAX];
	uint32_t high_wm, low_wm;
	uint32_t high_chunks, low_chunks; /* the watermarks as chunks a copy queue would hold */
	uint64_t idle_ns;
	uint64_t last_active;
	uint64_t linger_until;
	uint64_t rx_bytes;	  /* delivered to on_data, over the connection's life */
	uint64_t end_after;	  /* ending: the kernel had received this much at the closing */
	uint64_t first_req_until; /* ending with nothing received: wait for it until then */
	uint64_t app_rx;	  /* a layer's: bytes it delivered to the app (cr_conn_layer_rx) */
	struct cr_timer timer; /* kicks, idle timeout, linger */
	/* Lent receive buffers (net_buf.c). */
	const struct cr_io_cqe *rx_cqe; /* the delivery on_data has now; NULL outside it */
	struct cr_buf *rx_buf;		/* that delivery's buffer, once held */
	struct cr_buf *held;		/* buffers counted against max_held */
	uint32_t bufs_held, max_held;
};

struct net_shard;
struct cr_udp;

/* Counters: written by the owner only (relaxed load + store), read by anyone. */
struct net_counters {
	_Atomic uint64_t accepted, refused, accept_backoffs, connected, closed, conns;
	_Atomic uint64_t bytes_in, bytes_out, send_nobufs, short_sends, udp_in, udp_out, udp_drops;
	_Atomic uint64_t chunks_free, handed_off, reclaimed, bufs_held, hold_nobufs;
	_Atomic uint64_t moved_out, moved_in, move_aborts, move_drops;
};

#define NET_STAT_ADD(nl, field, v)                                                         \
	atomic_store_explicit(&(nl)->stats.field,                                          \
			      atomic_load_explicit(&(nl)->stats.field, memory_order_relaxed) + \
				      (v),                                                 \
			      memory_order_relaxed)

/* An lcore's lib/net state; touched only by that lcore (counters read by anyone). */
struct net_lcore {
	_Alignas(64) bool up;
	bool stopping;
	bool orphaned; /* stopped with slots still held: free at the last release */
	bool draining; /* closing (retire or shutdown): no new connections */
	bool quench;   /* shutting down: no lcore stays, every socket serves its own backlog */
	unsigned lcore;
	int numa;

	struct cr_conn *conns; /* slab */
	uint32_t max_conns;
	uint32_t conns_used;
	struct cr_conn *free_conns;
	struct cr_conn *live; /* not DEAD */

	uint8_t *chunk_mem;
	size_t chunk_stride;
	uint32_t chunk_cap; /* data bytes per chunk */
	uint32_t chunks_free;
	/* Chunks [carved, chunks) were never used: taken in order when the free list is
	 * empty, so a pool sized for the worst case costs memory only as it is used. */
	uint32_t chunks, carved;
	uint32_t chunk_reserve; /* kept for connections at or below their high watermark */
	struct net_chunk *free_chunks;

	struct cr_buf *bufs; /* handles of held receive buffers: one per spare */
	uint32_t nbufs;
	struct cr_buf *free_bufs;
	uint32_t bufs_held;

	struct net_shard *shards;     /* listening sockets served here */
	struct cr_listener *homed;    /* listeners whose home is here */
	struct cr_udp *udps;
	bool accept_paused;	      /* a shard waits for a free connection slot */
	uint32_t reclaiming;	      /* slots of reclaimed connections not yet free */
	uint64_t reclaim_logged_ns;   /* last "closed idle connections" line (1 per second) */
	unsigned move_rr;	      /* the last lcore a closing lcore moved a connection to */

	struct net_counters stats; /* last: net_lcore_start() clears what is before it */
};

extern struct net_lcore cr__net_lcores[CR_MAX_LCORES];
/* How long a retiring lcore's listening socket goes on accepting (cr_net_config). */
extern uint64_t cr__net_drain_grace_ns;
extern bool cr__net_share_addresses; /* struct cr_net_config.share_addresses */
/* How long an ending connection that received nothing waits for its first request. */
extern uint64_t cr__net_first_request_ns;
extern struct cr_log_component cr__net_log;

/* The current lcore's state if lib/net runs on it, else NULL with errno EPERM. */
struct net_lcore *cr__net_cur(void);
/* True while new ops may start: the lcore is RUNNING and lib/net is not stopping. */
bool cr__net_may_start(const struct net_lcore *nl);

/* Slab and pool (net_lcore.c). */
struct cr_conn *cr__net_conn_get(struct net_lcore *nl);
void cr__net_conn_put(struct net_lcore *nl, struct cr_conn *c);
struct net_chunk *cr__net_chunk_get(struct net_lcore *nl);
void cr__net_chunk_put(struct net_lcore *nl, struct net_chunk *ch);
/* Put @p ch back, after what a chunk without a copy owes: its unref, its sent callback
 * with @p err (0: its bytes went out). */
void cr__net_chunk_drop(struct net_lcore *nl, struct net_chunk *ch, int err);

/* Lent receive buffers (net_buf.c). */
int cr__net_bufs_init(struct net_lcore *nl, uint32_t n);
void cr__net_bufs_free(struct net_lcore *nl);
/* Call on_data with @p cqe's bytes; the buffer goes back after, unless the app holds it. */
void cr__conn_deliver(struct cr_conn *c, const struct cr_io_cqe *cqe);
/* The connection ends: the buffers it holds are the app's alone from now on. */
void cr__conn_bufs_detach(struct cr_conn *c);

/* Connections (net_conn.c). */
/* Above its high watermark, in bytes or in chunks (tiny pieces of sendv/send_buf take a
 * chunk each): the test the pool's reserve, reads and cr_conn_writable() apply. */
bool cr__conn_above_high(const struct cr_conn *c);
/* The kernel took @p n bytes from the head of @p c's queue (net_queue.c). */
void cr__conn_consume(struct cr_conn *c, size_t n);
/* Drop what @p c still has queued, at the free of its slot (net_queue.c). */
void cr__conn_queue_drop(struct cr_conn *c);
/* May @p c take @p need more chunks (the pool's reserve rule)? Counts a refusal. */
bool cr__conn_admit(struct cr_conn *c, size_t need, bool past_reserve);
/* Put @p ch at the end of @p c's queue. */
void cr__conn_append(struct cr_conn *c, struct net_chunk *ch);
void cr__conn_init(struct cr_conn *c, struct net_lcore *nl, int fd,
		   const struct cr_conn_opts *o, const struct cr_conn_ops *ops, void *arg);
/* Take accepted socket @p fd as a connection; NULL (fd untouched) when no slot. */
struct cr_conn *cr__conn_adopt(struct net_lcore *nl, int fd, const struct cr_conn_opts *o,
			       const struct cr_conn_ops *ops, void *arg);
/* The connected callback of cr_tcp_connect (net_connect.c). */
void cr__conn_connected(struct cr_conn *c, int res);
void cr__conn_end(struct cr_conn *c, int err, bool notify);
/* The lcore is closing: serve @p c to its next boundary, then close it gracefully. */
void cr__conn_begin_ending(struct cr_conn *c);
/* (Re)arm @p c's timer for its nearest deadline (net_conn.c). */
void cr__conn_arm_timer(struct cr_conn *c);
/* Moves (net_move.c). Does @p c's app take moves, and may this lcore make them now? */
bool cr__conn_movable(const struct cr_conn *c);
/* A move under way whose receive is quiet: hand @p c over, or abandon the move. From a
 * completion or a timer only (app callbacks run). */
void cr__conn_move_step(struct cr_conn *c);
/* A closing lcore: move @p c (at its boundary) to a RUNNING lcore. 0 or -errno. */
int cr__conn_move_away(struct cr_conn *c);
/* A UDP socket bound to @p a; with @p reuseport, refused (-EADDRINUSE) when another
 * process holds the address, unless cr_net_config.share_addresses. *slot receives what
 * cr__udp_release_owned() takes once the socket is closed (-1: nothing). */
int cr__udp_bind_owned(const struct cr_net_addr *a, bool reuseport, bool v6only, int *slot);
void cr__udp_release_owned(int slot);
/* Bytes the kernel has received on TCP socket @p fd so far (tcpi_bytes_received). */
int cr__socket_bytes_received(int fd, uint64_t *out);
void cr__conn_hold(struct cr_conn *c);
void cr__conn_unhold(struct cr_conn *c);
/* Start reading, sending or ending as the state asks; @p may_notify: callbacks allowed. */
void cr__conn_progress(struct cr_conn *c, bool may_notify);
void cr__conn_apply_opts(struct cr_conn *c, const struct cr_conn_opts *o);
/* Out of room with @p want connections waiting: end up to that many (at most
 * NET_RECLAIM_BATCH, less those already on the way) reclaimable idle connections, least
 * recently active first (net_reclaim.c); @p for_fds: out of descriptors rather than of
 * slots (for the log line). From a completion or a timer only. @return how many ended. */
unsigned cr__net_reclaim(struct net_lcore *nl, unsigned want, bool for_fds);
int cr__socket_opts_nodelay(int fd, bool nagle);

/* Listeners (net_listen.c). */
void cr__listen_lcore_stop(struct net_lcore *nl);
void cr__listen_lcore_closing(struct net_lcore *nl);
bool cr__listen_lcore_draining(const struct net_lcore *nl);
void cr__listen_lcore_rejoin(struct net_lcore *nl);
void cr__listen_slot_freed(struct net_lcore *nl);

/* UDP (net_udp.c). */
void cr__udp_lcore_drain(struct net_lcore *nl);
void cr__udp_lcore_stop(struct net_lcore *nl);

/* Options shared by TCP and UDP sockets. */
int cr__net_bind_socket(const struct cr_net_addr *a, int type, bool reuseport, bool v6only);

#endif /* NET_INTERNAL_H */
