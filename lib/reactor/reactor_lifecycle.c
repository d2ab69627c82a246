/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Lcore lifecycle: retire, start again, resize the pool, shut down, and the retirement
 * holds that leases are built on (doc/guides/design.md "Lifecycle and leases").
 *
 * Control requests are flags the lcore acts on in its own loop (cr__lcore_done); what
 * touches a backend from another thread counts itself in `stoppers` first, so fini never
 * frees a backend under it.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>

#include "reactor_internal.h"

CR_LOG_COMPONENT(log_life, "lib.reactor.lifecycle");

/*
 * Serializes lifecycle decisions: control path only, never taken on a fast path, and never
 * held across a thread join (a joined lcore may be making lifecycle requests itself).
 */
static pthread_mutex_t lifecycle_mutex = PTHREAD_MUTEX_INITIALIZER;
static unsigned starting; /* cr_lcore_start() calls between claim and spawn */
static bool joining;	  /* join_all() has begun: no more starts */

void
cr__lifecycle_begin_join(void)
{
	cr__lifecycle_lock();
	joining = true;
	while (starting != 0) {
		cr__lifecycle_unlock();
		sched_yield();
		cr__lifecycle_lock();
	}
	cr__lifecycle_unlock();
}

void
cr__lifecycle_end_join(void)
{
	cr__lifecycle_lock();
	joining = false;
	cr__lifecycle_unlock();
}

void
cr__lifecycle_lock(void)
{
	pthread_mutex_lock(&lifecycle_mutex);
}

void
cr__lifecycle_unlock(void)
{
	pthread_mutex_unlock(&lifecycle_mutex);
}

/* Count ourselves in; false (and counted out) if the runtime is not up. */
bool
cr__visit_begin(void)
{
	atomic_fetch_add(&cr__rt.stoppers, 1);
	if (atomic_load(&cr__rt.up))
		return true;
	atomic_fetch_sub(&cr__rt.stoppers, 1);
	return false;
}

void
cr__visit_end(void)
{
	atomic_fetch_sub(&cr__rt.stoppers, 1);
}

static void
wake_all(void)
{
	unsigned i;

	for (i = 0; i < CR_MAX_LCORES; i++)
		if (cr__lcore(i) != NULL)
			cr__wake_if_parked(NULL, &cr__lcores[i]);
}

static uint64_t
configured_timeout(void)
{
	double s = cr__rt.cfg.shutdown_timeout;

	return s <= 0 ? 0 : s >= 1e9 ? UINT64_MAX : (uint64_t)(s * 1e9);
}

/* UINT64_MAX - 1 asks for the configured --shutdown-timeout, read while counted in (the
 * configuration is rewritten by the next cr_reactor_init()). */
#define TIMEOUT_CONFIGURED (UINT64_MAX - 1)

void
cr_shutdown(uint64_t timeout_ns)
{
	uint64_t now, deadline, cur;

	if (!cr__visit_begin())
		return;
	if (timeout_ns == TIMEOUT_CONFIGURED)
		timeout_ns = configured_timeout();
	now = cr_clock_ns();
	deadline = timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
	/* Only ever earlier: a second signal forces, a later graceful call cannot un-force. */
	cur = atomic_load(&cr__rt.deadline);
	while (deadline < cur && !atomic_compare_exchange_weak(&cr__rt.deadline, &cur, deadline))
		;
	/* seq_cst store, then each wake's fence: a parked lcore is woken to see it. */
	atomic_store(&cr__rt.stop, true);
	wake_all();
	cr__visit_end();
}

void
cr_shutdown_force(void)
{
	cr_shutdown(0);
}

void
cr_reactor_stop(void)
{
	cr_shutdown(TIMEOUT_CONFIGURED);
}

/* Test builds step lcores at named points of the lifecycle calls (see reactor_internal.h). */
void (*cr__lifecycle_test_point)(const char *where);

static inline void
test_point(const char *where)
{
	if (cr__lifecycle_test_point != NULL)
		cr__lifecycle_test_point(where);
}

/* The pool size cr_pool_resize() asked for and has not reached yet (0: none). */
static _Atomic unsigned pool_target;
/* Serializes cr__pool_apply(); never held by a thread that lcore_exit() could wait for. */
static pthread_mutex_t pool_mutex = PTHREAD_MUTEX_INITIALIZER;

void
cr__pool_reset(void)
{
	atomic_store(&pool_target, 0);
}

/*
 * Out of the placement pool at once; the lcore does the rest itself. Under the lifecycle
 * lock: the state moves first (RUNNING -> RETIRING, so a closing the lcore began for a
 * shutdown wins and is reported), then the request is published; the lcore consumes it,
 * also under the lock, only on its way out (cr__lifecycle_take_retire), so no interleaving
 * can take an accepted request back.
 */
static int
retire(struct cr_lcore *lc, void (*done)(unsigned lcore, void *arg), void *arg)
{
	int expected = CR_LCORE_RUNNING, rc = 0;

	cr__lifecycle_lock();
	if (atomic_load(&lc->retire_req)) {
		rc = -EALREADY;
	} else if (!atomic_compare_exchange_strong(&lc->state, &expected, CR_LCORE_RETIRING)) {
		/* Not RUNNING: starting, retiring, offline, or closing for a shutdown. */
		rc = expected == CR_LCORE_RETIRING && atomic_load(&cr__rt.stop) ? -ESHUTDOWN
										: -EALREADY;
	} else {
		/* Read by the lcore after it consumes the request, under this lock. */
		lc->retire_done = done;
		lc->retire_done_arg = arg;
		atomic_store_explicit(&lc->retire_req, true, memory_order_release);
		test_point("retire published");
	}
	cr__lifecycle_unlock();
	if (rc == 0) {
		CR_LOG(log_life, INFO, "lcore %u retiring", lc->id);
		/* Through its wake channel: we hold no admission that keeps its ring open. */
		cr__wake_if_parked(NULL, lc);
	}
	return rc;
}

bool
cr__lifecycle_take_retire(struct cr_lcore *lc, void (**done)(unsigned, void *), void **arg)
{
	bool taken;

	cr__lifecycle_lock();
	taken = atomic_exchange(&lc->retire_req, false);
	*done = taken ? lc->retire_done : NULL;
	*arg = taken ? lc->retire_done_arg : NULL;
	cr__lifecycle_unlock();
	return taken;
}

int
cr_lcore_retire(unsigned id, void (*done)(unsigned lcore, void *arg), void *arg)
{
	struct cr_lcore *lc;
	int rc;

	if (!cr__visit_begin())
		return -ESHUTDOWN;
	lc = cr__lcore(id);
	if (lc == NULL)
		rc = -EINVAL;
	else if (lc->is_main)
		rc = -EBUSY;
	else if (atomic_load(&cr__rt.stop))
		rc = -ESHUTDOWN;
	else {
		/* An explicit request overrides a resize still under way. */
		atomic_store(&pool_target, 0);
		rc = retire(lc, done, arg);
	}
	cr__visit_end();
	return rc;
}

/*
 * Start @p lc. Its previous thread may still be on its way out (in its retire callback,
 * or running lifecycle requests there): joining it could wait for a thread that waits for
 * us (two retire callbacks that start each other). Such a start is recorded instead and
 * carried out by that thread itself at its very end (cr__lcore_exit). Only a thread that
 * has passed that point, and so waits for nobody, is joined here.
 */
static int
start(struct cr_lcore *lc)
{
	bool deferred = false;
	int rc;

	if (cr__cur == lc)
		return -EDEADLK;
	cr__lifecycle_lock();
	if (atomic_load(&cr__rt.stop) || joining) {
		rc = -ESHUTDOWN;
	} else if (atomic_load(&lc->state) != CR_LCORE_OFFLINE || lc->is_main) {
		rc = -EALREADY;
	} else if (lc->thread != NULL && !lc->exiting) {
		atomic_store(&lc->state, CR_LCORE_STARTING);
		lc->start_pending = true;
		deferred = true;
		rc = 0;
	} else {
		/* Claimed: nobody else starts it; join_all waits for us. */
		atomic_store(&lc->state, CR_LCORE_STARTING);
		starting++;
		rc = 0;
	}
	cr__lifecycle_unlock();
	if (rc != 0 || deferred) {
		if (deferred)
			CR_LOG(log_life, INFO, "lcore %u starts once its last thread has ended",
			       lc->id);
		return rc;
	}
	if (lc->thread != NULL) {
		cr_thread_join(lc->thread); /* it has passed its end: returns at once */
		lc->thread = NULL;
	}
	rc = cr__lcore_reset(lc);
	if (rc == 0)
		rc = cr__lcore_spawn(lc);
	if (rc != 0) {
		lc->start_failed = true;
		atomic_store(&lc->state, CR_LCORE_OFFLINE);
	} else {
		CR_LOG(log_life, INFO, "lcore %u starting", lc->id);
	}
	cr__lifecycle_lock();
	starting--;
	cr__lifecycle_unlock();
	return rc;
}

/*
 * The end of an lcore thread: nothing of the record is touched after this (but for the
 * start it may carry out). A start recorded while the thread was on its way out is made
 * here: a fresh record and a new thread, to which this one hands over its place (and
 * detaches, since nobody will join it).
 */
void
cr__lcore_exit(struct cr_lcore *lc)
{
	void *self;
	bool respawn;
	int rc;

	cr__lifecycle_lock();
	self = lc->thread;
	respawn = lc->start_pending && !joining && !atomic_load(&cr__rt.stop);
	if (lc->start_pending && !respawn)
		atomic_store(&lc->state, CR_LCORE_OFFLINE); /* shutting down: not started */
	lc->start_pending = false;
	if (respawn)
		starting++;
	else
		lc->exiting = true; /* from here on, a join of this thread returns at once */
	cr__lifecycle_unlock();
	if (!respawn)
		return;
	rc = cr__lcore_reset(lc);
	if (rc == 0)
		rc = cr__lcore_spawn(lc); /* lc->thread is the successor from here on */
	cr__lifecycle_lock();
	if (rc == 0) {
		CR_LOG(log_life, INFO, "lcore %u starting", lc->id);
		cr_thread_detach(self); /* nobody joins us: lc->thread is the successor */
	} else {
		CR_LOG(log_life, ERR, "lcore %u: cannot start again: %s", lc->id, cr_strerror(rc));
		lc->start_failed = true;
		lc->exiting = true; /* we stay lc->thread, to be joined */
		atomic_store(&lc->state, CR_LCORE_OFFLINE);
	}
	starting--;
	cr__lifecycle_unlock();
}

int
cr_lcore_start(unsigned id)
{
	struct cr_lcore *lc;
	int rc;

	if (!cr__visit_begin())
		return -ESHUTDOWN;
	lc = cr__lcore(id);
	if (lc == NULL) {
		rc = -EINVAL;
	} else {
		atomic_store(&pool_target, 0); /* an explicit request overrides a resize */
		lc->start_failed = false;
		rc = start(lc);
	}
	cr__visit_end();
	return rc;
}

/*
 * Move the pool towards pool_target: start the lowest-numbered OFFLINE lcores, retire the
 * highest-numbered RUNNING ones (never the main lcore). What cannot happen yet (an lcore
 * still RETIRING, or still STARTING when there are too many) happens when that lcore
 * reaches OFFLINE or RUNNING: both call this again. @return 0 reached, -EINPROGRESS
 * under way, or the first start error.
 */
int
cr__pool_apply(void)
{
	unsigned n, i, have = 0, moving = 0;
	int rc = 0;

	if (atomic_load(&pool_target) == 0)
		return 0;
	pthread_mutex_lock(&pool_mutex);
	n = atomic_load(&pool_target);
	if (n == 0 || atomic_load(&cr__rt.stop))
		goto out;
	for (i = 0; i < cr__rt.table.n; i++) {
		struct cr_lcore *lc = &cr__lcores[cr__rt.table.lcores[i].lcore_id];
		int st = atomic_load(&lc->state);

		if (st == CR_LCORE_STARTING || (st == CR_LCORE_RUNNING && !atomic_load(&lc->retire_req)))
			have++;
		else if (st == CR_LCORE_RETIRING)
			moving++;
	}
	for (i = 0; i < cr__rt.table.n && have < n; i++) {
		struct cr_lcore *lc = &cr__lcores[cr__rt.table.lcores[i].lcore_id];
		int src;

		if (atomic_load(&lc->state) != CR_LCORE_OFFLINE || lc->start_failed)
			continue;
		src = start(lc);
		if (src == 0)
			have++;
		else if (src != -EALREADY && rc == 0)
			rc = src;
	}
	for (i = cr__rt.table.n; i-- > 0 && have > n;) {
		struct cr_lcore *lc = &cr__lcores[cr__rt.table.lcores[i].lcore_id];

		if (lc->is_main)
			continue;
		if (atomic_load(&lc->state) == CR_LCORE_STARTING) {
			moving++; /* retired once RUNNING: it applies the target then */
			continue;
		}
		if (retire(lc, NULL, NULL) == 0)
			have--;
	}
	if (rc == 0 && have != n)
		rc = -EINPROGRESS;
	if (rc == 0 && moving == 0)
		atomic_store(&pool_target, 0); /* reached, nothing under way: done */
out:
	pthread_mutex_unlock(&pool_mutex);
	return rc;
}

int
cr_pool_resize(unsigned n)
{
	int rc;

	/* Counted in: the table is rewritten by the next cr_reactor_init(). */
	if (!cr__visit_begin())
		return -ESHUTDOWN;
	if (n == 0 || n > cr__rt.table.n)
		rc = -EINVAL;
	else if (atomic_load(&cr__rt.stop))
		rc = -ESHUTDOWN;
	else {
		atomic_store(&pool_target, n);
		rc = cr__pool_apply();
	}
	cr__visit_end();
	return rc;
}

int
cr_reactor_hold(unsigned *lcore, uint64_t *incarnation)
{
	struct cr_lcore *lc = cr__cur;
	uint64_t w;

	if (lc == NULL)
		return -EPERM;
	/* seq_cst RMW: totally ordered with begin_closing()'s fetch_or of the closed bit. */
	w = atomic_fetch_add(&lc->hold_word, 1);
	if (w & CR_HOLD_CLOSED) {
		atomic_fetch_sub(&lc->hold_word, 1);
		return -ESHUTDOWN;
	}
	*lcore = lc->id;
	*incarnation = w >> 32;
	return 0;
}

bool
cr_reactor_unhold(unsigned id, uint64_t incarnation)
{
	struct cr_lcore *lc;
	uint64_t w;
	bool dropped = false;

	if (!cr__visit_begin())
		return false; /* the runtime is gone: nothing left to release */
	lc = cr__lcore(id);
	if (lc == NULL)
		goto out;
	w = atomic_load(&lc->hold_word);
	/* seq_cst CAS: the drop comes before the fence and `parked` read of the wake below,
	 * pairing with cr__park_prepare()'s flag, fence and holds re-check. */
	while ((w >> 32) == incarnation && (w & CR_HOLD_COUNT_MASK) != 0) {
		if (atomic_compare_exchange_weak(&lc->hold_word, &w, w - 1)) {
			dropped = true;
			break;
		}
	}
	/*
	 * Wake after dropping, so the lcore cannot look, see our hold and park past its
	 * drop. It may finish retiring meanwhile: the wake channel outlives every
	 * incarnation, and a wake that reaches the next one is only spurious there.
	 */
	if (dropped)
		cr__wake_if_parked(NULL, lc);
out:
	cr__visit_end();
	return dropped;
}
