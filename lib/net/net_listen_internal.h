/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The listener's internals, shared by its files: the listener object and its start and
 * close chains (net_listen.c), one shard's accept state machine (net_accept.c), the
 * cross-lcore hand-off (net_handoff.c) and the reuseport steering (net_steer.c). Never
 * installed.
 */
#ifndef NET_LISTEN_INTERNAL_H
#define NET_LISTEN_INTERNAL_H

#include <errno.h>
#include <pthread.h>

#include "net_internal.h"

enum shard_state {
	SH_IDLE = 0, /* socket made, accept not started */
	SH_RUN,
	SH_DRAIN, /* steered away: accepting and handing off until drain_until */
	SH_CLOSED,
};

/* Listener phases, read by lcores (re)starting: they join only an OPEN listener. */
enum listener_phase {
	LP_STARTING = 0,
	LP_OPEN,
	LP_CLOSING,
};

struct net_shard {
	_Alignas(64) struct net_shard *next; /* its owner's list while SH_RUN or SH_DRAIN */
	struct net_shard *prev;
	struct cr_listener *l;
	unsigned lcore; /* whose socket it is (its index in the listener) */
	unsigned owner; /* whose thread runs it: lcore, or home for one it never reached */
	int fd;
	uint8_t state;
	bool made;    /* has (or had) a socket */
	bool visited; /* start message ran here; written once, read by home at start_done */
	bool started;
	bool cancel_sent;
	bool backing_off;
	bool waiting_slot;
	bool in_group;	/* listening: in the kernel's reuseport array (steer_lock) */
	bool leaving;	/* steered away from (steer_lock) */
	bool rejoined;	/* made by a restarted lcore: check the phase once RUNNING */
	bool finishing; /* draining, grace over: the accept cancelled, taking the rest */
	bool quench;	/* draining with no socket to steer to: serves what it takes itself */
	cr_op_id op;
	uint64_t drain_until;
	/* Draining: connections taken while every staying mailbox was full. */
	int *pend;
	unsigned n_pend, cap_pend;
	uint64_t backoff_ns;
	struct cr_timer timer;
	/* Accepted while the slab was full (the multishot raced the pause, or a
	 * reclaimable listener accepts at the limit): adopted as slots free, oldest first,
	 * so a burst at the limit is delayed rather than reset. A ring of NET_STASH,
	 * allocated when the shard starts running (none: no stash, such sockets are
	 * refused). */
	int *stash;
	unsigned stash_head, n_stash;
};

struct cr_listener {
	_Alignas(64) _Atomic unsigned refs;
	unsigned idx; /* in listeners[] */
	unsigned home;
	/* Home lcore only. */
	struct cr_listener *next, *prev;
	bool closed;
	bool starting;
	bool close_pending;
	unsigned rr; /* single_acceptor: last lcore handed a connection */
	struct cr_call start_call, close_call;
	cr_msg_fn close_fn; /* cr_listener_close()'s completion, and its argument */
	void *close_arg;
	_Atomic bool close_fired; /* the completion is on its way: once only */
	_Atomic unsigned sockets_open; /* shards whose socket is open: 0 = the port is free */
	_Atomic int phase; /* enum listener_phase; written by home */
	/* The kernel's reuseport array, mirrored; any lcore, under steer_lock. */
	pthread_mutex_t steer_lock;
	unsigned group[CR_MAX_LCORES]; /* lcore ids, in the kernel's order */
	unsigned n_group;
	unsigned n_leaving;
	unsigned steer_rr;
	bool steering; /* a program is attached */
	bool steer_failed; /* logged once */
	/* Read-only after cr_tcp_listen(). */
	struct cr_tcp_listen_opts opts;
	const struct cr_conn_ops *ops;
	void *arg;
	struct cr_net_addr bound;
	unsigned n_shards;
	struct net_shard shards[CR_MAX_LCORES]; /* by lcore id */
};

/* Handed-off connections name their listener by index: a message has one pointer, which
 * carries the index in its high half and the socket in its low half. */
_Static_assert(sizeof(uintptr_t) >= 8, "a hand-off message packs an index and an fd");

/* The listener registry (net_listen.c). */
struct cr_listener *cr__listener_by_index(unsigned idx);
void cr__listener_put(struct cr_listener *l);
/* A shard's socket is closed (its owner lcore); the last one completes a close. */
void cr__listener_socket_closed(struct cr_listener *l);
/* Close the shard's socket and forget it, under the lock rejoining lcores read it with. */
void cr__shard_forget_fd(struct net_shard *sh);

/* Not closing (starting counts: its home hands off the backlog of shards never started). */
static inline bool
cr__listener_open(const struct cr_listener *l)
{
	return atomic_load_explicit(&l->phase, memory_order_acquire) != LP_CLOSING;
}

/* Steering (net_steer.c): the kernel's reuseport array, mirrored, and the program over it. */
void cr__steer_update(struct cr_listener *l);
void cr__group_join(struct cr_listener *l, struct net_shard *sh);
void cr__group_leave_locked(struct cr_listener *l, struct net_shard *sh);
bool cr__group_steer_away(struct cr_listener *l, struct net_shard *sh);
unsigned cr__group_staying(struct cr_listener *l, unsigned *ids);

/* One shard on its lcore (net_accept.c). */
void cr__shard_list_add(struct net_lcore *nl, struct net_shard *sh);
void cr__shard_list_del(struct net_lcore *nl, struct net_shard *sh);
void cr__shard_backoff(struct net_shard *sh);
/* The stash's memory, when the shard starts running (on its lcore). */
void cr__shard_stash_init(struct net_shard *sh);
void cr__shard_timer_fired(struct cr_timer *t, void *arg);
void cr__shard_sync(struct net_shard *sh);
void cr__shard_run(struct net_lcore *nl, struct net_shard *sh);
void cr__shard_close(struct net_lcore *nl, struct net_shard *sh);
void cr__drain_tick(struct net_lcore *nl, struct net_shard *sh);
void cr__shard_drain(struct net_lcore *nl, struct net_shard *sh, bool quench);
void cr__shard_quench(struct net_shard *sh);

/* Hand-off (net_handoff.c). */
void cr__listen_refuse(struct net_lcore *nl, int fd);
int cr__place_conn(struct cr_listener *l, struct net_lcore *nl, struct net_shard *sh, int fd);
bool cr__pend_push(struct net_shard *sh, int fd);
bool cr__pend_place(struct cr_listener *l, struct net_lcore *nl, struct net_shard *sh);
void cr__pend_drop(struct net_lcore *nl, struct net_shard *sh);
void cr__drain_take(struct cr_listener *l, struct net_lcore *nl, struct net_shard *sh, int fd);
/* What cr__take_queued() found. */
enum take_result {
	TAKE_EMPTY,    /* nothing left in the socket */
	TAKE_MORE,     /* a batch taken, or some must wait for a mailbox or a slot: tick again */
	TAKE_RESOURCE, /* out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM): back off */
};
enum take_result cr__take_queued(struct cr_listener *l, struct net_lcore *nl,
				 struct net_shard *sh);
void cr__hand_off(struct cr_listener *l, struct net_lcore *nl, int fd);

/* accept(2) errors that concern the socket's resources, not one connection. */
static inline bool
cr__accept_error_is_resource(int err)
{
	return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

/* accept(2) errors that end only the connection they name (see its man page). */
static inline bool
cr__accept_error_is_transient(int err)
{
	switch (err) {
	case ECONNABORTED:
	case EPROTO:
	case EPERM:
	case ENETDOWN:
	case ENOPROTOOPT:
	case EHOSTDOWN:
	case ENONET:
	case EHOSTUNREACH:
	case EOPNOTSUPP:
	case ENETUNREACH:
		return true;
	default:
		return false;
	}
}

#endif /* NET_LISTEN_INTERNAL_H */
