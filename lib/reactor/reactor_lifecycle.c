/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Lcore lifecycle: retire, start again, resize the pool, shut down, and the retirement
 * holds that leases are built on (DESIGN.md "Lifecycle and leases").
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

int
cr_lcore_retire(unsigned id, void (*done)(unsigned lcore, void *arg), void *arg)
{
	struct cr_lcore *lc;
	int expected = CR_LCORE_RUNNING, rc = 0;

	if (!cr__visit_begin())
		return -ESHUTDOWN;
	lc = cr__lcore(id);
	if (lc == NULL) {
		rc = -EINVAL;
		goto out;
	}
	if (lc->is_main) {
		rc = -EBUSY;
		goto out;
	}
	if (atomic_load(&cr__rt.stop)) {
		rc = -ESHUTDOWN;
		goto out;
	}
	cr__lifecycle_lock();
	if (atomic_load(&lc->retire_req) || atomic_load(&lc->state) != CR_LCORE_RUNNING) {
		rc = -EALREADY;
	} else {
		/* Written before the request is published: the lcore reads them only after it
		 * consumes retire_req (exchange, acquire) on its way out. */
		lc->retire_done = done;
		lc->retire_done_arg = arg;
		atomic_store_explicit(&lc->retire_req, true, memory_order_release);
		/* Out of the placement pool at once; the lcore does the rest itself. */
		if (!atomic_compare_exchange_strong(&lc->state, &expected, CR_LCORE_RETIRING) &&
		    atomic_exchange(&lc->retire_req, false)) {
			/* It began closing for a shutdown first and had not consumed the request:
			 * taken back, so done will not run; say so. */
			rc = -ESHUTDOWN;
		}
	}
	cr__lifecycle_unlock();
	if (rc == 0) {
		CR_LOG(log_life, INFO, "lcore %u retiring", id);
		/* Through its wake channel: we hold no admission that keeps its ring open. */
		cr__wake_if_parked(NULL, lc);
	}
out:
	cr__visit_end();
	return rc;
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
		goto out;
	}
	if (cr__cur == lc) {
		rc = -EDEADLK;
		goto out;
	}
	if (lc->thread != NULL && cr_thread_is_self(lc->thread)) {
		rc = -EDEADLK; /* from its own retire callback: it has not ended yet */
		goto out;
	}
	cr__lifecycle_lock();
	if (atomic_load(&cr__rt.stop) || joining) {
		rc = -ESHUTDOWN;
	} else if (atomic_load(&lc->state) != CR_LCORE_OFFLINE || lc->is_main) {
		rc = -EALREADY;
	} else {
		/* Claimed: nobody else starts it; join_all waits for us. */
		atomic_store(&lc->state, CR_LCORE_STARTING);
		starting++;
		rc = 0;
	}
	cr__lifecycle_unlock();
	if (rc != 0)
		goto out;
	/*
	 * Without the lock: the old thread may still be in its retire callback, which may
	 * itself make lifecycle requests. It is OFFLINE, so the join returns once that is done.
	 */
	if (lc->thread != NULL) {
		cr_thread_join(lc->thread);
		lc->thread = NULL;
	}
	rc = cr__lcore_reset(lc);
	if (rc == 0)
		rc = cr__lcore_spawn(lc);
	if (rc != 0)
		atomic_store(&lc->state, CR_LCORE_OFFLINE);
	else
		CR_LOG(log_life, INFO, "lcore %u starting", id);
	cr__lifecycle_lock();
	starting--;
	cr__lifecycle_unlock();
out:
	cr__visit_end();
	return rc;
}

static int resize(unsigned n);

int
cr_pool_resize(unsigned n)
{
	int rc;

	/* Counted in: the table is rewritten by the next cr_reactor_init(). */
	if (!cr__visit_begin())
		return -ESHUTDOWN;
	rc = resize(n);
	cr__visit_end();
	return rc;
}

static int
resize(unsigned n)
{
	unsigned i, have = 0;
	int rc = 0;

	if (n == 0 || n > cr__rt.table.n)
		return -EINVAL;
	if (atomic_load(&cr__rt.stop))
		return -ESHUTDOWN;
	for (i = 0; i < cr__rt.table.n; i++) {
		int st = cr_lcore_state(cr__rt.table.lcores[i].lcore_id);

		have += st == CR_LCORE_RUNNING || st == CR_LCORE_STARTING;
	}
	for (i = 0; i < cr__rt.table.n && have < n; i++) {
		unsigned id = cr__rt.table.lcores[i].lcore_id;

		if (cr_lcore_state(id) != CR_LCORE_OFFLINE)
			continue;
		rc = cr_lcore_start(id);
		if (rc == -EALREADY)
			continue; /* still on its way out */
		if (rc != 0)
			return rc;
		have++;
	}
	for (i = cr__rt.table.n; i-- > 0 && have > n;) {
		unsigned id = cr__rt.table.lcores[i].lcore_id;

		if (id == cr__rt.main_lcore || cr_lcore_state(id) != CR_LCORE_RUNNING)
			continue;
		if (cr_lcore_retire(id, NULL, NULL) == 0)
			have--;
	}
	return 0;
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
