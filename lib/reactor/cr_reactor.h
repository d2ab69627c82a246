/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * The reactor: one pinned thread per lcore running a run-to-completion loop, and the
 * ways work reaches an lcore — messages (cr_send), calls with a completion back on the
 * caller (cr_call), deferred tasks (cr_defer), pollers and timers.
 *
 * Each loop turn takes at most CR_BATCH items from each source (mailbox, deferred tasks,
 * completions, expired timers, pollers), flushes what it sent, then goes round again; an
 * lcore with nothing to do spins for an adaptive budget and then parks until a message,
 * a completion or its next timer (doc/guides/design.md rules 3, 8, 9).
 */
#ifndef CR_REACTOR_H
#define CR_REACTOR_H

#include <stdbool.h>
#include <stdint.h>

#include "cr_config.h"
#include "cr_eal.h"
#include "cr_msg.h"
#include "cr_timer.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Returned by cr_lcore_id() off an lcore. */
#define CR_LCORE_NONE UINT32_MAX

/** Lcore lifecycle states (doc/guides/design.md "Lifecycle and leases"). */
enum cr_lcore_state {
	CR_LCORE_OFFLINE = 0,
	CR_LCORE_STARTING,
	CR_LCORE_RUNNING,
	CR_LCORE_RETIRING,
};

/** Per-lcore hooks an app passes to cr_reactor_init(). Any may be NULL. */
struct cr_reactor_hooks {
	/** On lcore @p lcore, before its first turn (each incarnation). */
	void (*on_lcore_start)(unsigned lcore, void *arg);
	/**
	 * On lcore @p lcore after its last message ran, before its thread ends. The loop is
	 * over: cr_send(), cr_call() and cr_defer() from here fail with -ESHUTDOWN.
	 */
	void (*on_lcore_stop)(unsigned lcore, void *arg);
	/**
	 * On lcore @p lcore when it starts retiring (cr_lcore_retire(), cr_pool_resize()):
	 * hand off or close what the app owns there. The lcore keeps serving until that is
	 * done and its leases are released.
	 */
	void (*on_retire)(unsigned lcore, void *arg);
	/** On every lcore when a shutdown starts: close or finish what the app owns there. */
	void (*on_shutdown)(unsigned lcore, void *arg);
	/**
	 * On lcore @p lcore after on_lcore_stop and the modules' stop: timer @p t was still
	 * armed and has been cancelled (an lcore's timers do not outlive its incarnation).
	 * The loop is over: sends fail here, and a timer armed here is dropped with the
	 * wheel. Note it, to re-arm the duty from the next incarnation's on_lcore_start, or
	 * to move it (a foreign thread, the retire callback, may send). NULL: each such
	 * timer is cancelled, and their number logged once at NOTICE level.
	 */
	void (*on_timer_dropped)(unsigned lcore, struct cr_timer *t, void *arg);
	/**
	 * Likewise for a poller still registered: it has been unregistered and freed (the
	 * handle cr_poller_register() gave is dead); @p fn and @p poller_arg say which.
	 */
	void (*on_poller_dropped)(unsigned lcore, int (*fn)(void *), void *poller_arg, void *arg);
	void *arg;
};

/**
 * Start the runtime: one lcore per entry of @p table, each with its mailbox, timer wheel
 * and backend (io driver per cfg->io_driver). Threads for every lcore but the main one are
 * started, pinned, and enter their loops; the main lcore is the calling thread, which must
 * then call cr_reactor_run(). Messages may be sent to any lcore as soon as this returns.
 *
 * @param cfg   copied.
 * @param table copied.
 * @param hooks copied; may be NULL.
 * @return 0; -EALREADY if running; -EINVAL bad table; -ENODEV no usable io driver (one
 *         line logged saying why); -ENOMEM; another -errno from thread creation.
 */
int cr_reactor_init(const struct cr_eal_config *cfg, const struct cr_lcore_table *table,
		    const struct cr_reactor_hooks *hooks);

/**
 * Run the main lcore's loop on the calling thread (the one that called cr_reactor_init)
 * until cr_reactor_stop(), then wait until every lcore has stopped.
 * @return 0, or -EPERM when called from another thread.
 */
int cr_reactor_run(void);

/**
 * Ask every lcore to stop: cr_shutdown() with the configured --shutdown-timeout. Each
 * lcore closes its mailbox, runs every message it had accepted, waits for the replies of
 * its own outstanding cr_call()s, and leaves its loop. Any thread, any number of times;
 * returns at once.
 */
void cr_reactor_stop(void);

/**
 * Shut down: close admission everywhere (leases, then mailboxes), run the on_shutdown
 * hooks, and wait for leases, module work (ops in flight, connections, offload jobs) and
 * the replies of outstanding calls, at most @p timeout_ns; after that the shutdown is
 * *forced*: leases and connections are no longer waited for, ops are cancelled and their
 * completions awaited, every accepted message still runs. Any thread, any number of times
 * (a later call can only bring the deadline closer). cr_reactor_run() returns when every
 * lcore is OFFLINE.
 */
void cr_shutdown(uint64_t timeout_ns);

/** cr_shutdown() with a deadline of now: the forced path at once (a second SIGTERM). */
void cr_shutdown_force(void);

/**
 * Retire lcore @p lcore: it leaves the placement pool at once (state RETIRING), runs the
 * on_retire hook, keeps serving in bounded turns — its mailbox stays open — until its
 * leases are released and its modules idle, then closes its mailbox, runs what it had
 * accepted and goes OFFLINE. Then @p done(@p lcore, @p arg) runs on the retired lcore's
 * thread as its last act, outside any lcore (it may cr_send like a foreign thread, and
 * make lifecycle requests, its own lcore's start included). Any thread. Cancels a
 * cr_pool_resize() still under way.
 * @return 0 (@p done will run exactly once, also if a shutdown begins meanwhile);
 *         -EINVAL not an lcore; -EBUSY the main lcore (it cannot retire); -EALREADY not
 *         RUNNING (starting, retiring or offline); -ESHUTDOWN the runtime is shutting down
 *         (@p done will not run).
 */
int cr_lcore_retire(unsigned lcore, void (*done)(unsigned lcore, void *arg), void *arg);

/**
 * Start OFFLINE lcore @p lcore again (a new incarnation): a new pinned thread, backend,
 * module and app start hooks; it joins the placement pool when RUNNING. The state is
 * STARTING when this returns. If the lcore's previous thread has not ended yet (it is in
 * its retire callback, which may be the caller), the new thread is launched by that thread
 * as its last act; otherwise here. Any thread. Cancels a cr_pool_resize() still under way.
 * @return 0; -EINVAL not in the lcore table; -EALREADY not OFFLINE; -ESHUTDOWN shutting
 *         down; -EDEADLK called from @p lcore's own loop; -errno from thread creation.
 */
int cr_lcore_start(unsigned lcore);

/**
 * Start or retire lcores until @p n are RUNNING, within the lcore table: starts the
 * lowest-numbered OFFLINE lcores, retires the highest-numbered RUNNING ones (never the
 * main lcore). What cannot be done now is carried out as soon as it can: an lcore still
 * RETIRING is started again once it is OFFLINE, an lcore still STARTING is retired once it
 * is RUNNING. A later cr_pool_resize(), cr_lcore_retire() or cr_lcore_start() replaces
 * the request. Asynchronous; any thread.
 * @return 0 (the pool has @p n lcores running or starting); -EINPROGRESS accepted, and
 *         waiting for an lcore to finish retiring or starting; -EINVAL n == 0 or above
 *         the table size; -ESHUTDOWN; or the first error of a start.
 */
int cr_pool_resize(unsigned n);

/**
 * Join the lcore threads and free everything. After cr_reactor_run() returned. Threads
 * that are not lcores must have stopped calling cr_send() (after the stop their sends fail
 * with -ESHUTDOWN, but fini frees the rings); cr_reactor_stop() and cr_lcore_stats() stay
 * safe from any thread.
 */
void cr_reactor_fini(void);

/** The calling thread's lcore id, or CR_LCORE_NONE. */
unsigned cr_lcore_id(void);

/** The main lcore's id. */
unsigned cr_lcore_main(void);

/** Number of lcores in the placement pool (RUNNING). Any thread; a snapshot. */
unsigned cr_lcore_count(void);

/** State of lcore @p id; CR_LCORE_OFFLINE for an id that is not an lcore. Any thread. */
enum cr_lcore_state cr_lcore_state(unsigned id);

/** NUMA node of lcore @p id, -1 if unknown. */
int cr_lcore_numa(unsigned id);

/**
 * Next RUNNING lcore after @p prev (CR_LCORE_NONE to start), or CR_LCORE_NONE.
 * Any thread.
 */
unsigned cr_lcore_next(unsigned prev);

/** Iterate the RUNNING lcores in id order. */
#define CR_LCORE_FOREACH(i)                                                                \
	for ((i) = cr_lcore_next(CR_LCORE_NONE); (i) != CR_LCORE_NONE; (i) = cr_lcore_next(i))

/**
 * Send @p fn(@p arg) to run on lcore @p lcore, exactly once (doc/guides/design.md rule 5).
 *
 * From an lcore the message is buffered and flushed in a burst (at CR_SEND_FLUSH messages
 * or at the end of the turn); from any other thread it goes straight into the target's
 * foreign ring. Messages from one sender to one target run in the order sent.
 *
 * Ownership: on 0 the message owns @p arg until @p fn runs; on error the caller keeps it.
 * Any thread.
 * @return 0; -EINVAL no such lcore or @p fn NULL; -ESHUTDOWN the target's mailbox is
 *         closed (offline, stopping); -EAGAIN the target's mailbox (or the sender's buffer
 *         for it) is full.
 */
static inline int cr_send(unsigned lcore, cr_msg_fn fn, void *arg);

/** @cond PRIVATE */
/*
 * cr_send()'s fast path, inline: on an lcore that already holds the target's mailbox
 * admission this turn and has room in its buffer for it, a send is an append to that
 * buffer, with no call. Everything else (the first send to a target in a turn, the send
 * that fills the buffer, foreign threads, a stopping lcore) goes to cr__send(). The layout
 * is the library's; apps use cr_send().
 */
struct cr__outbox {
	struct cr_msg msgs[CR_SEND_FLUSH];
	uint16_t n;
	bool held;   /* the target's mailbox admission is ours until the end of the turn */
	bool listed; /* in the sender's list of targets to flush */
};
int cr__send(unsigned lcore, cr_msg_fn fn, void *arg);
#ifndef __cplusplus
/* This thread's outboxes while it runs an lcore that may send, else NULL. */
extern _Thread_local struct cr__outbox *cr__send_out __attribute__((tls_model("initial-exec")));

static inline int
cr_send(unsigned lcore, cr_msg_fn fn, void *arg)
{
	struct cr__outbox *out = cr__send_out;

	if (out != NULL && lcore < CR_MAX_LCORES && fn != NULL && out[lcore].held &&
	    out[lcore].n < CR_SEND_FLUSH - 1) {
		out[lcore].msgs[out[lcore].n].fn = fn;
		out[lcore].msgs[out[lcore].n].arg = arg;
		out[lcore].n++;
		return 0;
	}
	return cr__send(lcore, fn, arg);
}
#else
static inline int
cr_send(unsigned lcore, cr_msg_fn fn, void *arg)
{
	return cr__send(lcore, fn, arg);
}
#endif
/** @endcond */

/**
 * Send up to @p n messages to lcore @p lcore as one burst, straight into its mailbox ring:
 * one admission and one wake check for the whole burst, no copy through the outbox. From
 * an lcore, anything already buffered for that target is flushed first, so per-target
 * order holds across cr_send() and cr_send_burst(). Any thread.
 * @return how many were accepted (a prefix of @p msgs; each runs exactly once), or when
 *         none was: -EINVAL (no such lcore, n == 0, a NULL fn), -ESHUTDOWN, -EAGAIN (full).
 *         The caller keeps the args of the messages not accepted.
 */
int cr_send_burst(unsigned lcore, const struct cr_msg *msgs, unsigned n);

/**
 * A call in flight; caller-owned storage that must stay valid until @c done has run.
 * Fields are private.
 */
struct cr_call {
	cr_msg_fn hop_fn;     /* private: next hop */
	void *hop_arg;	      /* private */
	struct cr_call *next; /* private: backlog link */
	unsigned hop_target;  /* private */
	unsigned origin;      /* private */
	cr_msg_fn fn;	      /* private */
	void *arg;	      /* private */
	cr_msg_fn done;	      /* private */
	void *done_arg;	      /* private */
	unsigned cursor;      /* private: cr_for_each_lcore position */
};

/**
 * Run @p fn(@p arg) on lcore @p lcore, then @p done(@p done_arg) back on the calling lcore.
 * While a call is out, the calling lcore keeps its mailbox open so the completion always
 * arrives. Lcore only.
 * @param c caller-owned; must stay valid and untouched until @p done runs.
 * @return 0 (@p done will run exactly once), -EPERM off an lcore, or cr_send()'s errors
 *         (nothing will run).
 */
int cr_call(unsigned lcore, struct cr_call *c, cr_msg_fn fn, void *arg, cr_msg_fn done,
	    void *done_arg);

/**
 * Run @p fn(@p arg) on every RUNNING lcore, one after another in id order, then
 * @p done(@p done_arg) on the calling lcore. Lcores that stop meanwhile are skipped.
 * Lcore only.
 * @param c caller-owned; valid until @p done runs.
 * @return 0 (done will run exactly once) or -EPERM off an lcore.
 */
int cr_for_each_lcore(struct cr_call *c, cr_msg_fn fn, void *arg, cr_msg_fn done,
		      void *done_arg);

/**
 * Run @p fn(@p arg) on this lcore in a later turn (local run queue, FIFO). A task deferred
 * from a deferred task runs in the next turn, not this one. Lcore only.
 * @return 0, -EPERM off an lcore, -EAGAIN when CR_DEFER_CAP tasks are queued.
 */
int cr_defer(cr_msg_fn fn, void *arg);

/** A poller; returns > 0 when it found work (so the lcore does not go idle), else 0. */
typedef int (*cr_poller_fn)(void *arg);

struct cr_poller;

/**
 * Register a poller on the current lcore: run every turn (@p period_ns == 0) or at most
 * once per @p period_ns (a timed poller, driven by the timer wheel). Control path
 * (allocates). Lcore only.
 * @return the poller, or NULL with errno EPERM (off lcore) or ENOMEM.
 */
struct cr_poller *cr_poller_register(cr_poller_fn fn, void *arg, uint64_t period_ns);

/**
 * Unregister and free the poller in @p *p and set *p to NULL. Safe from the poller's own
 * callback (freed after it returns). NULL or *p == NULL is fine. On the poller's lcore.
 */
void cr_poller_unregister(struct cr_poller **p);

/** The current lcore's clock (ns, monotonic), read once per turn. Lcore only. */
uint64_t cr_now_ns(void);

/**
 * Arm @p t (set up with cr_timer_init()) on the current lcore's wheel to fire @p delay_ns
 * from now. Re-arms an armed timer. Lcore only; the timer then belongs to this lcore.
 */
void cr_timer_start(struct cr_timer *t, uint64_t delay_ns);

/** Disarm @p t on the current lcore. @return true if it was armed. Lcore only. */
bool cr_timer_stop(struct cr_timer *t);

/** Counters of one lcore, written by it, read by anyone without locks. */
struct cr_lcore_stats {
	uint64_t turns;
	uint64_t busy_ns;
	uint64_t idle_ns;
	uint64_t msgs_in;
	uint64_t msgs_out;
	uint64_t deferred;
	uint64_t timers;
	uint64_t cqes;
	uint64_t wakes_sent;
	uint64_t wakes_recv;
	uint64_t parks;
	uint64_t spin_hits;
	uint64_t spin_misses;
	uint64_t spin_budget_ns; /**< the last spin's budget (a gauge; 0: parked at once) */
	uint64_t spin_ns;	 /**< time spent spinning before work came or a park */
	uint64_t park_cost_ns;	 /**< CPU a park and its wake cost on this lcore (gauge) */
	uint64_t incarnation;	 /**< bumped at every start */
	uint64_t mailbox_depth;	 /**< messages queued in its mailbox (a gauge) */
};

/** Snapshot lcore @p id's counters into @p out. Any thread. @return 0 or -EINVAL. */
int cr_lcore_stats(unsigned id, struct cr_lcore_stats *out);

/** Name of the io driver (backend) in use, or NULL before init. */
const char *cr_reactor_driver(void);

#ifdef __cplusplus
}
#endif
#endif /* CR_REACTOR_H */
