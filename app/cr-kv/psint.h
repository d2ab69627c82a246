/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Pub/Sub's own structures, shared by pubsub.c (the registry, the commands, delivery)
 * and psmove.c (a subscriber's move to another lcore). Not for the rest of cr-kv.
 */
#ifndef CR_KV_PSINT_H
#define CR_KV_PSINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cr_lease.h"
#include "cr_timer.h"
#include "kv.h"

struct kv_psmove;
struct ps_stubs;
struct ps_bye;

/* One client on one channel or pattern. */
struct ps_sub {
	struct ps_sub *next, **pprev; /* the channel's (pattern's) subscribers */
	struct ps_sub *cnext;	      /* the client's subscriptions; the dead list */
	struct ps_chan *ch;
	struct kconn *kc; /* NULL: dead, its client went while a message was delivered */
	/* A stub: its client moved to another lcore and what this lcore still delivers for
	 * it is forwarded there (psmove.c); kc is NULL then. */
	struct ps_stubs *fwd;
};

struct ps_chan {
	struct ps_chan *hnext; /* in its bucket, or on the pattern list */
	uint64_t h;
	struct ps_sub *subs;
	size_t nsubs;
	bool pattern;
	size_t len;
	char name[];
};

struct kv_psclient {
	struct ps_sub *subs;
	size_t nchan, npat;
};

struct kv_psshard {
	struct ps_chan **tab;
	size_t mask, nchan;
	struct ps_chan *pats;
	size_t npat;
	unsigned delivering; /* a message is being handed out: unlinking waits */
	struct ps_sub *dead;
	struct rbuf frame;
	char inl[512];
	/* The PUBLISH sequence number of the last message each lcore's publishers sent
	 * that this lcore delivered (by lcore id; a start takes what each had sent). */
	uint64_t seen[CR_MAX_LCORES];
	struct ps_stubs *moves;	    /* subscribers moved away, still forwarded to */
	struct kv_psmove *arrivals; /* subscribers moved here, waiting for the rest */
	struct ps_bye *byes;	    /* a dropped move's word to its old lcore, not sent yet */
	/* Clients here (every one: it may subscribe) plus stubs here. The lcore holds a
	 * lease from its start until it is closing and there are none, so a retire waits
	 * for the stubs to finish and their done message to be accepted (psmove.c). */
	unsigned holders;
	bool closing;
	bool stopping; /* kv_psm_fini(): nothing is sent again later */
	struct cr_lease lease;
};

/*
 * A subscriber's move (psmove.c). Each lcore keeps its own side, found by id; what
 * passes between them is a message, freed by its receiver (or by its sender when the
 * send is refused), so neither lcore ever touches the other's side.
 *
 * Old lcore: the client's subscriptions stay as stubs (struct ps_stubs) that forward
 * what this lcore still delivers for it, until the cut.
 */
struct ps_stubs {
	struct ps_stubs *next; /* on kv_psshard.moves */
	uint64_t id;
	unsigned to;	  /* the new lcore, once the cut came */
	uint64_t arrival; /* the new lcore's id of the move */
	struct kv_psclient *subs;
	bool cut_known;
	/* The cut: the last message of each lcore's publishers the new lcore delivered
	 * before it registered the client. Up to it the old lcore forwards; after it the
	 * new one delivers. */
	uint64_t cut[CR_MAX_LCORES];
	struct rbuf fwd; /* framed messages, each behind a struct ps_tag */
	uint64_t nfwd;	 /* how many */
	/* The give-up (no cut, or not all up to it, in PS_STUBS_GIVE_UP_NS); then the done
	 * message's retries while the mailbox is full, until deadline. */
	struct cr_timer timer;
	uint64_t deadline;
	void *done; /* that message, once the stubs finished; sent: NULL and they go */
};

/* New lcore: the client, registered, delivering into a hold until the old lcore's
 * forwarded messages are in (kconn.psm). */
struct kv_psmove {
	struct kv_psmove *next; /* on kv_psshard.arrivals */
	uint64_t id;
	struct kconn *kc; /* NULL once it went */
	unsigned from;
	struct rbuf hold;      /* what this lcore delivered for it meanwhile, framed */
	struct rbuf fwd;       /* what the old lcore forwarded (its done message), tagged */
	bool done_in;	       /* that came, or will not (the old lcore is gone) */
	struct cr_timer timer; /* the cut message's retry; then the give-up */
	uint64_t deadline;     /* cr_now_ns(): the give-up, PS_GIVE_UP_NS after it came */
	void *cut_msg;	       /* the cut message while it is not sent */
	/* The cut, as sent: what comes after it is this lcore's to deliver; what it
	 * delivers up to it is dropped (the old lcore delivered or forwards it). */
	uint64_t cut[CR_MAX_LCORES];
};

/* Before each forwarded frame in ps_stubs.fwd. */
struct ps_tag {
	uint32_t from, len;
	uint64_t seq;
};

/* pubsub.c */
int kv_ps_add(struct kconn *kc, const char *p, size_t len, bool pattern);
void kv_ps_unlink(struct kv_psshard *ps, struct ps_sub *s);
void kv_ps_hold(struct kv_psshard *ps, int delta);
/* The message being delivered: who published it (lcore) and its number there. */
void kv_ps_current(uint32_t *from, uint64_t *seq);

/* psmove.c */
/* A frame for @p kc, which just moved here: held, or dropped if it is up to the cut.
 * @return true if held (it counts as received here). */
bool kv_psm_hold(struct kconn *kc, const struct rbuf *f);
/* After a message was delivered here: the arrivals that have everything finish. */
void kv_psm_check_arrivals(struct kv_psshard *ps);
/* A frame for stubs @p st (its client moved). @return true if it counts as received. */
bool kv_psm_forward(struct ps_stubs *st, const struct rbuf *f);
/* After a message was delivered here: the moves whose stubs are done finish. */
void kv_psm_check(struct kv_psshard *ps);
void kv_psm_fini(struct kv_psshard *ps);
/* The client went: its move, if one is under way here, forgets it. */
void kv_psm_gone(struct kconn *kc);

#endif /* CR_KV_PSINT_H */
