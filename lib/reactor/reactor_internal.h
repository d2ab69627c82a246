/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reactor internals shared by its source files and by the deterministic test harness.
 * Never installed.
 */
#ifndef REACTOR_INTERNAL_H
#define REACTOR_INTERNAL_H

#include <assert.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cr_config.h"
#include "cr_eal.h"
#include "cr_log.h"
#include "cr_mailbox.h"
#include "cr_reactor.h"
#include "cr_reactor_backend.h"
#include "cr_reactor_module.h"
#include "cr_timer.h"
#include "reactor_hold.h"

#ifdef CR_DEBUG
#define CR_ASSERT_ON_LCORE(lc) assert(cr__cur == (lc))
#else
#define CR_ASSERT_ON_LCORE(lc) ((void)(lc))
#endif

/* Counters: written by the owner only (relaxed load + store, no lock prefix), read by
 * anyone with relaxed loads. */
/* Every counter once; the struct and its reset are written from this list. */
#define CR_LCORE_COUNTERS(X)                                                              \
	X(turns) X(busy_ns) X(idle_ns) X(msgs_in) X(msgs_out) X(deferred) X(timers) X(cqes) \
	X(wakes_sent) X(wakes_recv) X(parks) X(spin_hits) X(spin_misses) X(spin_budget_ns)  \
	X(spin_ns) X(park_cost_ns)

struct lcore_counters {
#define CR_COUNTER_FIELD(f) _Atomic uint64_t f;
	CR_LCORE_COUNTERS(CR_COUNTER_FIELD)
#undef CR_COUNTER_FIELD
};

#define CR_STAT_ADD(lc, field, v)                                                          \
	atomic_store_explicit(&(lc)->stats.field,                                          \
			      atomic_load_explicit(&(lc)->stats.field, memory_order_relaxed) + \
				      (v),                                                 \
			      memory_order_relaxed)
#define CR_STAT_SET(lc, field, v) atomic_store_explicit(&(lc)->stats.field, (v), memory_order_relaxed)

/* A sender's buffer towards one target (rule 7: flush at CR_SEND_FLUSH or end of turn) is
 * struct cr__outbox, in cr_reactor.h for cr_send()'s inline append. */

struct cr_poller {
	cr_poller_fn fn;
	void *arg;
	uint64_t period_ns;
	struct cr_timer timer;		 /* timed pollers */
	struct cr_poller *next, **pprev; /* active pollers */
	struct cr_lcore *lc;
	bool dead; /* unregistered from its own callback: free after it returns */
};

struct cr_lcore {
	/* Read-only while the runtime is up. */
	unsigned id;
	unsigned cpu;
	int numa;
	_Atomic bool exists; /* selected in the lcore table; read by any thread */
	bool is_main;

	/* Shared, rarely written. */
	_Atomic int state;		/* enum cr_lcore_state */
	_Atomic uint64_t incarnation;	/* bumped at every start */
	_Atomic(struct cr_backend *) be; /* release at start: pairs with wake_if_parked() */
	int start_err;
	_Atomic bool started; /* reached RUNNING once in this incarnation */
	/* Lifecycle lock: the thread has passed its end (a join returns at once); a start
	 * waits for that thread's end (cr__lcore_exit); a start failed (not retried by a
	 * resize until an explicit cr_lcore_start()). */
	bool exiting, start_pending;
	_Atomic bool start_failed; /* written by starters and the thread itself, read by resize */
	/*
	 * Retirement admission and holds, one word so that taking a hold and closing are
	 * totally ordered: incarnation (bits 32-63) | closed (bit 31) | holds (bits 0-30).
	 */
	_Atomic uint64_t hold_word;
	_Atomic bool retire_req;	 /* cr_lcore_retire() asked */
	void (*retire_done)(unsigned lcore, void *arg);
	void *retire_done_arg;

	/* Park flag on its own line: set by the owner, claimed (CAS 1 -> 0) by a waker. */
	_Alignas(64) _Atomic int parked;
	/* The wake channel, alive from runtime init to fini whatever the incarnation. */
	struct cr_wake wake;

	_Alignas(64) struct lcore_counters stats;

	/* The mailbox: rings owned by this lcore as consumer; admission word shared. */
	struct cr_mailbox mbox;

	/* Owner only from here on. */
	_Alignas(64) uint64_t now; /* start of the current turn */
	unsigned last_work;	   /* work done by the last turn, for busy/idle accounting */
	struct cr__outbox *out;		   /* [CR_MAX_LCORES], by target id */
	uint16_t dirty[CR_MAX_LCORES];	   /* targets with buffered messages */
	unsigned n_dirty;
	struct cr_call *backlog, **backlog_tail; /* hops waiting for mailbox room */
	unsigned calls_out;		   /* our cr_call / for_each replies not yet back */
	struct cr_msg *defer;		   /* [CR_DEFER_CAP] FIFO */
	unsigned defer_head, defer_tail;   /* free-running indexes */
	struct cr_timer_wheel *wheel;
	struct cr_poller *pollers;	   /* active pollers */
	struct cr_poller *timed_pollers;
	struct cr_poller *poller_iter;	   /* next in the current pass */
	struct cr_poller *poller_running;  /* whose callback runs now */
	unsigned n_active_pollers;
	/* The idle policy (rule 9, reactor_loop.c). */
	uint64_t idle_since;	       /* the first idle turn's start, 0 while busy */
	bool sent_last_turn;	       /* the last busy turn sent messages: replies may come */
	uint64_t gap_ewma_ns;	       /* how long idle spells last, smoothed */
	uint64_t park_cost_ns;	       /* CPU a park and its wake cost here, measured */
	uint64_t spin_recent_ns;       /* spun in vain, and busy, lately (halved together) */
	uint64_t busy_recent_ns;
	bool wake_queued;   /* a wake of ours rides on our next submit */
	bool waiting_holds; /* closing, and the last look found leases held */
	uint8_t phase;	    /* enum lcore_phase */
	uint8_t told;	    /* CLOSE_* bits: closing events given (modules, app hooks) */
	const struct cr_backend_ops *ops;
	struct cr_backend *be_own; /* same as be, without the atomic load */
	void *thread;
};

/*
 * Where an lcore is in its closing (retire or shutdown), owner only. SERVING until a stop
 * is seen; CLOSING: lease admission closed, modules and app told, serving on until holds,
 * module work and our calls are done; DRAINING: mailbox closed, running what it accepted;
 * GONE: the loop is over (sends and defers fail with -ESHUTDOWN).
 */
enum lcore_phase {
	LP_SERVING = 0,
	LP_CLOSING,
	LP_DRAINING,
	LP_GONE,
};

/* Closing events an lcore has given: for a retire, then (maybe later) for a shutdown. */
#define CLOSE_RETIRE   1u
#define CLOSE_SHUTDOWN 2u

struct cr_runtime {
	struct cr_eal_config cfg;
	struct cr_lcore_table table;
	struct cr_reactor_hooks hooks;
	const struct cr_backend_ops *ops;
	struct cr_cpuset set;
	unsigned main_lcore;
	_Atomic bool up;
	bool sim; /* deterministic harness: no threads */
	_Atomic bool stop;
	_Atomic unsigned stoppers; /* foreign cr_reactor_stop() calls in progress */
	_Atomic uint64_t deadline; /* graceful shutdown ends here; forced after (ns) */
	uint64_t (*clock)(void);
};

extern struct cr_lcore cr__lcores[CR_MAX_LCORES];
extern struct cr_runtime cr__rt;
extern _Thread_local struct cr_lcore *cr__cur;

static inline struct cr_lcore *
cr__lcore(unsigned id)
{
	return id < CR_MAX_LCORES &&
			       atomic_load_explicit(&cr__lcores[id].exists, memory_order_acquire)
		       ? &cr__lcores[id]
		       : NULL;
}

/* This thread runs @p lc now (NULL: none); cr_send()'s inline path follows it. */
static inline void
cr__set_cur(struct cr_lcore *lc)
{
	cr__cur = lc;
	cr__send_out = lc != NULL && lc->phase != LP_GONE ? lc->out : NULL;
}

/* reactor_lcore.c: per-lcore set-up and tear-down, shared with the harness. */
int cr__lcore_setup(struct cr_lcore *lc, const struct cr_lcore_info *info);
void cr__lcore_teardown(struct cr_lcore *lc);
int cr__lcore_backend_start(struct cr_lcore *lc);
void cr__lcore_backend_stop(struct cr_lcore *lc);
int cr__modules_start(unsigned lcore);
void cr__modules_closing(unsigned lcore, bool shutdown);
void cr__modules_stop(unsigned lcore);
bool cr__modules_busy(unsigned lcore, bool forced);

#define CR_HOLD_CLOSED (UINT64_C(1) << 31)
#define CR_HOLD_COUNT_MASK (CR_HOLD_CLOSED - 1)

static inline unsigned
cr__holds(const struct cr_lcore *lc)
{
	return (unsigned)(atomic_load_explicit(&lc->hold_word, memory_order_acquire) &
			  CR_HOLD_COUNT_MASK);
}
int cr__select_backend(const struct cr_eal_config *cfg, const struct cr_backend_ops **out);

/* Deterministic harness: set up every lcore of @p table on the calling thread, with
 * @p ops as backend and @p clock as time; no threads. Step them with cr__lcore_turn()
 * after setting cr__cur. */
int cr__sim_init(const struct cr_eal_config *cfg, const struct cr_lcore_table *table,
		 const struct cr_backend_ops *ops, uint64_t (*clock)(void));
void cr__sim_fini(void);

/* Lifecycle (reactor_lifecycle.c / reactor_lcore.c) */
bool cr__visit_begin(void);
void cr__visit_end(void);
void cr__lifecycle_begin_join(void);
void cr__lifecycle_end_join(void);
void cr__lifecycle_lock(void);
void cr__lifecycle_unlock(void);
int cr__lcore_reset(struct cr_lcore *lc);
int cr__lcore_spawn(struct cr_lcore *lc);
bool cr__lifecycle_take_retire(struct cr_lcore *lc, void (**done)(unsigned, void *),
			       void **arg);
void cr__lcore_exit(struct cr_lcore *lc);
int cr__pool_apply(void);
void cr__pool_reset(void);
/* Test builds: called at named points of lifecycle calls, to step lcores in between. */
extern void (*cr__lifecycle_test_point)(const char *where);

/* The idle policy (reactor_loop.c): state reset at each start; the park cost measured on
 * the lcore's thread once its backend is up (a guess until then). */
#define CR_PARK_COST_DEFAULT_NS 5000
void cr__idle_reset(struct cr_lcore *lc);
void cr__park_cost_measure(struct cr_lcore *lc);

/* reactor_loop.c: one turn, the stop check, and the two halves of parking. */
unsigned cr__lcore_turn(struct cr_lcore *lc);
bool cr__lcore_done(struct cr_lcore *lc);
bool cr__lcore_has_work(struct cr_lcore *lc, uint64_t now);
bool cr__park_prepare(struct cr_lcore *lc);
void cr__park_commit(struct cr_lcore *lc);
void cr__lcore_idle(struct cr_lcore *lc);
void cr__lcore_loop(struct cr_lcore *lc);

/* reactor_msg.c */
void cr__flush_outboxes(struct cr_lcore *lc);
void cr__release_outboxes(struct cr_lcore *lc);
void cr__retry_backlog(struct cr_lcore *lc);
unsigned cr__run_mailbox(struct cr_lcore *lc);
void cr__wake_if_parked(struct cr_lcore *from, struct cr_lcore *target);

/* reactor_defer.c */
unsigned cr__run_deferred(struct cr_lcore *lc);
static inline bool
cr__defer_empty(const struct cr_lcore *lc)
{
	return lc->defer_head == lc->defer_tail;
}

/* reactor_poller.c */
unsigned cr__run_pollers(struct cr_lcore *lc);
void cr__pollers_free(struct cr_lcore *lc);
unsigned cr__pollers_drop(struct cr_lcore *lc);

#endif /* REACTOR_INTERNAL_H */
