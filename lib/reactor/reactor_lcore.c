/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Lcore records, the runtime's start and stop, and the lcore threads. Records are static
 * for the life of the process so a stale lcore id is never a dangling pointer.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "reactor_internal.h"

CR_LOG_COMPONENT(log_reactor, "lib.reactor");

struct cr_lcore cr__lcores[CR_MAX_LCORES];
struct cr_runtime cr__rt = {.clock = cr_clock_ns};
_Thread_local struct cr_lcore *cr__cur;
_Thread_local struct cr__outbox *cr__send_out __attribute__((tls_model("initial-exec")));
static pthread_t main_thread;


int
cr__lcore_setup(struct cr_lcore *lc, const struct cr_lcore_info *info)
{
	int rc;

	lc->id = info->lcore_id;
	lc->cpu = info->cpu;
	lc->numa = info->numa_node;
	lc->out = cr_numa_zalloc(sizeof(*lc->out) * CR_MAX_LCORES, lc->numa);
	lc->defer = cr_numa_zalloc(sizeof(*lc->defer) * CR_DEFER_CAP, lc->numa);
	if (lc->out == NULL || lc->defer == NULL) {
		rc = -ENOMEM;
		goto out_free;
	}
	lc->wheel = cr_timer_wheel_create(cr__rt.clock(), 1000 * 1000);
	if (lc->wheel == NULL) {
		rc = -ENOMEM;
		goto out_free;
	}
	rc = cr_mailbox_init(&lc->mbox, &cr__rt.set, CR_MAILBOX_RING_SIZE, CR_FOREIGN_RING_SIZE,
			     CR_RING_MPSC_HTS, lc->numa);
	if (rc != 0)
		goto out_free_wheel;
	lc->backlog = NULL;
	lc->backlog_tail = &lc->backlog;
	lc->n_dirty = 0;
	lc->calls_out = 0;
	lc->defer_head = lc->defer_tail = 0;
	lc->phase = LP_SERVING;
	lc->told = 0;
	lc->retire_done = NULL;
	lc->be_own = NULL;
	lc->wake_queued = false;
	lc->waiting_holds = false;
	lc->exiting = false;
	lc->start_pending = false;
	lc->start_failed = false;
	atomic_store_explicit(&lc->retire_req, false, memory_order_relaxed);
	atomic_store_explicit(&lc->started, false, memory_order_relaxed);
	/* A new runtime counts afresh (the incarnation goes on: stale leases stay stale).
	 * Field by field: cr_lcore_stats() may be reading them from a foreign thread. */
#define CR_COUNTER_ZERO(f) CR_STAT_SET(lc, f, 0);
	CR_LCORE_COUNTERS(CR_COUNTER_ZERO)
#undef CR_COUNTER_ZERO
	cr__idle_reset(lc);
	lc->park_cost_ns = CR_PARK_COST_DEFAULT_NS; /* measured when its backend is up */
	CR_STAT_SET(lc, park_cost_ns, lc->park_cost_ns);
	lc->ops = cr__rt.ops;
	lc->now = cr__rt.clock();
	atomic_store_explicit(&lc->parked, 0, memory_order_relaxed);
	lc->wake.fd = -1;
	atomic_store_explicit(&lc->wake.woken, 0, memory_order_relaxed);
	atomic_store_explicit(&lc->wake.signals, 0, memory_order_relaxed);
	rc = lc->ops->wake_init(&lc->wake);
	if (rc != 0)
		goto out_fini_mailbox;
	atomic_store_explicit(&lc->state, CR_LCORE_STARTING, memory_order_relaxed);
	atomic_store_explicit(&lc->exists, true, memory_order_release);
	return 0;

out_fini_mailbox:
	cr_mailbox_fini(&lc->mbox);
out_free_wheel:
	cr_timer_wheel_destroy(lc->wheel);
	lc->wheel = NULL;
out_free:
	cr_numa_free(lc->out);
	cr_numa_free(lc->defer);
	lc->out = NULL;
	lc->defer = NULL;
	return rc;
}

void
cr__lcore_teardown(struct cr_lcore *lc)
{
	if (!atomic_load_explicit(&lc->exists, memory_order_relaxed))
		return;
	/* A backend left behind by an init that failed half-way. */
	cr__lcore_backend_stop(lc);
	lc->ops->wake_fini(&lc->wake);
	lc->wake.fd = -1;
	cr__pollers_free(lc);
	cr_mailbox_fini(&lc->mbox);
	cr_timer_wheel_destroy(lc->wheel);
	cr_numa_free(lc->out);
	cr_numa_free(lc->defer);
	lc->wheel = NULL;
	lc->out = NULL;
	lc->defer = NULL;
	atomic_store_explicit(&lc->exists, false, memory_order_release);
	atomic_store_explicit(&lc->state, CR_LCORE_OFFLINE, memory_order_relaxed);
}

/* On the lcore's own thread: the uring driver's ring must be created by its submitter. */
int
cr__lcore_backend_start(struct cr_lcore *lc)
{
	struct cr_backend *be = NULL;
	uint64_t inc;
	int rc;

	/* The previous incarnation closed its backend on the way out (lcore_leave). */
	assert(lc->be_own == NULL);
	rc = lc->ops->init(&be, lc->id, &lc->wake, &cr__rt.cfg);
	if (rc != 0)
		return rc;
	lc->be_own = be;
	if (!cr__rt.sim && !cr__rt.cfg.idle_spin_fixed && !cr__rt.cfg.poll_mode)
		cr__park_cost_measure(lc);
	/* release: pairs with the acquire in cr__wake_if_parked() */
	atomic_store_explicit(&lc->be, be, memory_order_release);
	inc = atomic_fetch_add_explicit(&lc->incarnation, 1, memory_order_relaxed) + 1;
	/* A new incarnation, admission open, no holds: a stale release no longer matches. */
	atomic_store(&lc->hold_word, inc << 32);
	return 0;
}

/*
 * The incarnation's backend goes: its ring and everything in it (doc/guides/design.md:
 * nothing of an old incarnation is kept). No lcore can be about to wake us through it: a ring wake is
 * sent only while its sender holds our mailbox admission, up to its own submit, and our
 * loop ended with the mailbox quiesced. Every other waker uses lc->wake, which stays.
 */
void
cr__lcore_backend_stop(struct cr_lcore *lc)
{
	struct cr_backend *be = lc->be_own;

	atomic_store_explicit(&lc->be, NULL, memory_order_release);
	if (be == NULL)
		return;
	/* Wakes of ours still queued go out before the ring does. */
	lc->ops->submit(be);
	lc->be_own = NULL;
	lc->ops->fini(be);
}

static int
lcore_enter(struct cr_lcore *lc)
{
	int rc = cr__modules_start(lc->id);

	if (rc != 0)
		return rc;
	/* A restart: the previous incarnation left it closed, quiesced and empty. */
	if (!cr_mailbox_is_open(&lc->mbox))
		cr_mailbox_reopen(&lc->mbox);
	if (cr__rt.hooks.on_lcore_start != NULL)
		cr__rt.hooks.on_lcore_start(lc->id, cr__rt.hooks.arg);
	/* release: the start hook's set-up is visible to whoever sees RUNNING */
	atomic_store_explicit(&lc->state, CR_LCORE_RUNNING, memory_order_release);
	atomic_store_explicit(&lc->started, true, memory_order_release);
	/* A resize that found us STARTING with too many lcores retires one now. */
	(void)cr__pool_apply();
	return 0;
}

static void
timer_dropped(struct cr_timer *t, void *arg)
{
	struct cr_lcore *lc = arg;

	if (cr__rt.hooks.on_timer_dropped != NULL)
		cr__rt.hooks.on_timer_dropped(lc->id, t, cr__rt.hooks.arg);
}

/* What the app left behind: an lcore's pollers and timers end with its incarnation. */
static void
drop_leftovers(struct cr_lcore *lc)
{
	unsigned pollers = cr__pollers_drop(lc);
	unsigned timers = cr_timer_wheel_cancel_all(lc->wheel, timer_dropped, lc);

	if ((pollers != 0 && cr__rt.hooks.on_poller_dropped == NULL) ||
	    (timers != 0 && cr__rt.hooks.on_timer_dropped == NULL))
		CR_LOG(log_reactor, NOTICE,
		       "lcore %u stopped with %u poller%s and %u timer%s still armed: cancelled",
		       lc->id, pollers, pollers == 1 ? "" : "s", timers, timers == 1 ? "" : "s");
}

static void
lcore_leave(struct cr_lcore *lc)
{
	/* Nothing would flush or run what the hooks send or defer from here on. */
	lc->phase = LP_GONE;
	cr__send_out = NULL; /* cr_send() takes the slow path, which refuses */
	if (cr__rt.hooks.on_lcore_stop != NULL)
		cr__rt.hooks.on_lcore_stop(lc->id, cr__rt.hooks.arg);
	cr__modules_stop(lc->id);
	drop_leftovers(lc);
	cr__lcore_backend_stop(lc);
	atomic_store_explicit(&lc->state, CR_LCORE_OFFLINE, memory_order_release);
}

static void *
lcore_thread(void *arg)
{
	struct cr_lcore *lc = arg;
	void (*done)(unsigned lcore, void *arg);
	void *done_arg;
	int rc;

	cr__set_cur(lc);
	/* Log lines go through the log thread: an lcore never waits on a write (rule 2).
	 * If that cannot be set up, the lcore writes its lines itself. */
	(void)cr_log_attach(lc->id);
	rc = cr__lcore_backend_start(lc);
	if (rc == 0) {
		rc = lcore_enter(lc);
		if (rc != 0)
			cr__lcore_backend_stop(lc);
	}
	if (rc != 0) {
		cr__set_cur(NULL);
		lc->start_err = rc;
		cr_log_detach();
		lc->start_failed = true;
		atomic_store_explicit(&lc->state, CR_LCORE_OFFLINE, memory_order_release);
		cr__lcore_exit(lc);
		return NULL;
	}
	cr__lcore_loop(lc);
	lcore_leave(lc);
	cr_log_detach();
	cr__set_cur(NULL);
	/* The request, if one made us retire (taken under the lifecycle lock). The callback
	 * may make lifecycle requests of its own, this lcore's start included. */
	if (cr__lifecycle_take_retire(lc, &done, &done_arg) && done != NULL)
		done(lc->id, done_arg);
	/* A resize that waited for us to be OFFLINE. */
	(void)cr__pool_apply();
	cr__lcore_exit(lc);
	return NULL;
}

/*
 * Make an OFFLINE lcore whose thread has been joined ready for a new incarnation. On the
 * control thread: the join orders the old thread's last writes before these.
 */
int
cr__lcore_reset(struct cr_lcore *lc)
{
	struct cr_timer_wheel *w = cr_timer_wheel_create(cr__rt.clock(), 1000 * 1000);

	if (w == NULL)
		return -ENOMEM;
	cr_timer_wheel_destroy(lc->wheel);
	lc->wheel = w;
	cr__pollers_free(lc);
	lc->phase = LP_SERVING;
	lc->told = 0;
	lc->retire_done = NULL;
	lc->retire_done_arg = NULL;
	lc->start_err = 0;
	lc->exiting = false;
	lc->start_pending = false;
	cr__idle_reset(lc);
	lc->now = cr__rt.clock();
	lc->last_work = 0;
	atomic_store(&lc->retire_req, false);
	atomic_store(&lc->started, false);
	/* The mailbox stays closed (sends fail with -ESHUTDOWN) until the new thread is up:
	 * a start that fails must not leave an open mailbox nobody drains. */
	atomic_store_explicit(&lc->state, CR_LCORE_STARTING, memory_order_release);
	return 0;
}

/* A thread for @p lc's new incarnation; its handle is published under the lifecycle lock,
 * where starts and the thread's own end (cr__lcore_exit) read it. */
int
cr__lcore_spawn(struct cr_lcore *lc)
{
	char name[16];
	void *h;
	int rc;

	snprintf(name, sizeof(name), "cr-lcore-%u", lc->id);
	cr__lifecycle_lock();
	rc = cr_thread_create(&h, lc->cpu, name, lcore_thread, lc);
	if (rc == 0)
		lc->thread = h;
	cr__lifecycle_unlock();
	return rc;
}

static void
sleep_us(long us)
{
	struct timespec ts = {0, us * 1000};

	nanosleep(&ts, NULL);
}

/* Control path: wait until every worker lcore is RUNNING or failed. */
static int
wait_started(void)
{
	unsigned i;
	int rc = 0;

	for (i = 0; i < cr__rt.table.n; i++) {
		struct cr_lcore *lc = &cr__lcores[cr__rt.table.lcores[i].lcore_id];
		int st;

		if (lc->is_main)
			continue;
		while ((st = atomic_load_explicit(&lc->state, memory_order_acquire)) ==
		       CR_LCORE_STARTING)
			sleep_us(50);
		/* OFFLINE after a start is an lcore that already saw a stop, not a failure. */
		if (st == CR_LCORE_OFFLINE && rc == 0 &&
		    !atomic_load_explicit(&lc->started, memory_order_acquire)) {
			rc = lc->start_err != 0 ? lc->start_err : -EIO;
			CR_LOG(log_reactor, ERR, "lcore %u failed to start: %s", lc->id,
			       cr_strerror(rc));
		}
	}
	return rc;
}

static void
join_all(void)
{
	unsigned i;

	/* No start runs or begins from here; joins happen without the lifecycle lock. */
	cr__lifecycle_begin_join();
	for (i = 0; i < CR_MAX_LCORES; i++) {
		struct cr_lcore *lc = &cr__lcores[i];

		if (lc->thread != NULL) {
			cr_thread_join(lc->thread);
			lc->thread = NULL;
		}
	}
	cr__lifecycle_end_join();
}

static void
teardown_all(void)
{
	unsigned i;

	for (i = 0; i < CR_MAX_LCORES; i++)
		cr__lcore_teardown(&cr__lcores[i]);
	atomic_store(&cr__rt.up, false);
	cr__set_cur(NULL);
}

/* Set up every record of the table, without threads. Shared with the harness. */
static int
setup_records(const struct cr_eal_config *cfg, const struct cr_lcore_table *table)
{
	unsigned i;
	int rc;

	if (table->n == 0 || table->n > CR_MAX_LCORES)
		return -EINVAL;
	memset(&cr__rt.set, 0, sizeof(cr__rt.set));
	for (i = 0; i < table->n; i++) {
		if (table->lcores[i].lcore_id >= CR_MAX_LCORES)
			return -EINVAL;
		cr_cpuset_set(&cr__rt.set, table->lcores[i].lcore_id);
	}
	if (!cr_cpuset_isset(&cr__rt.set, table->main_lcore))
		return -EINVAL;
	cr__rt.cfg = *cfg;
	cr__rt.table = *table;
	cr__rt.main_lcore = table->main_lcore;
	atomic_store_explicit(&cr__rt.stop, false, memory_order_relaxed);
	atomic_store_explicit(&cr__rt.deadline, UINT64_MAX, memory_order_relaxed);
	for (i = 0; i < table->n; i++) {
		struct cr_lcore *lc = &cr__lcores[table->lcores[i].lcore_id];

		rc = cr__lcore_setup(lc, &table->lcores[i]);
		if (rc != 0) {
			teardown_all();
			return rc;
		}
		lc->is_main = lc->id == table->main_lcore;
	}
	atomic_store(&cr__rt.up, true);
	return 0;
}

int
cr__sim_init(const struct cr_eal_config *cfg, const struct cr_lcore_table *table,
	     const struct cr_backend_ops *ops, uint64_t (*clock)(void))
{
	unsigned i;
	int rc;

	if (atomic_load(&cr__rt.up))
		return -EALREADY;
	memset(&cr__rt.hooks, 0, sizeof(cr__rt.hooks));
	cr__rt.ops = ops;
	cr__rt.sim = true;
	cr__rt.clock = clock;
	rc = setup_records(cfg, table);
	if (rc != 0)
		return rc;
	for (i = 0; i < table->n; i++) {
		struct cr_lcore *lc = &cr__lcores[table->lcores[i].lcore_id];

		cr__set_cur(lc);
		rc = cr__lcore_backend_start(lc);
		if (rc == 0)
			rc = lcore_enter(lc);
		if (rc != 0)
			break;
	}
	cr__set_cur(NULL);
	if (rc != 0)
		cr__sim_fini();
	return rc;
}

void
cr__sim_fini(void)
{
	teardown_all();
	cr__rt.sim = false;
	cr__rt.clock = cr_clock_ns;
}

int
cr_reactor_init(const struct cr_eal_config *cfg, const struct cr_lcore_table *table,
		const struct cr_reactor_hooks *hooks)
{
	struct cr_lcore *main_lc;
	unsigned i;
	int rc;

	if (atomic_load(&cr__rt.up))
		return -EALREADY;
	rc = cr__select_backend(cfg, &cr__rt.ops);
	if (rc != 0)
		return rc;
	memset(&cr__rt.hooks, 0, sizeof(cr__rt.hooks));
	if (hooks != NULL)
		cr__rt.hooks = *hooks;
	cr__rt.sim = false;
	cr__rt.clock = cr_clock_ns;
	cr__pool_reset();
	rc = setup_records(cfg, table);
	if (rc != 0)
		return rc;
	main_lc = &cr__lcores[cr__rt.main_lcore];
	rc = cr_thread_pin_self(main_lc->cpu);
	if (rc != 0) {
		CR_LOG(log_reactor, ERR, "cannot pin the main lcore to CPU %u: %s", main_lc->cpu,
		       cr_strerror(rc));
		goto out_teardown;
	}
	cr__set_cur(main_lc);
	main_thread = pthread_self();
	rc = cr__lcore_backend_start(main_lc);
	if (rc != 0)
		goto out_teardown;
	for (i = 0; i < table->n; i++) {
		struct cr_lcore *lc = &cr__lcores[table->lcores[i].lcore_id];

		if (lc->is_main)
			continue;
		rc = cr__lcore_spawn(lc);
		if (rc != 0) {
			atomic_store_explicit(&lc->state, CR_LCORE_OFFLINE, memory_order_relaxed);
			CR_LOG(log_reactor, ERR, "cannot start lcore %u: %s", lc->id,
			       cr_strerror(rc));
			break;
		}
	}
	if (rc == 0)
		rc = wait_started();
	if (rc == 0)
		rc = lcore_enter(main_lc);
	if (rc != 0)
		goto out_stop;
	return 0;

out_stop:
	cr_reactor_stop();
	join_all();
	cr__lcore_backend_stop(main_lc);
out_teardown:
	teardown_all();
	return rc;
}

int
cr_reactor_run(void)
{
	struct cr_lcore *lc;

	if (!atomic_load(&cr__rt.up) || cr__rt.sim ||
	    !pthread_equal(pthread_self(), main_thread))
		return -EPERM;
	lc = &cr__lcores[cr__rt.main_lcore];
	/* As on the other lcores, for the loop only: init and fini, on the control path,
	 * write their lines themselves, in order with the app's own output. */
	(void)cr_log_attach(lc->id);
	cr__lcore_loop(lc);
	lcore_leave(lc);
	cr_log_detach();
	join_all();
	return 0;
}

void
cr_reactor_fini(void)
{
	if (!atomic_load(&cr__rt.up))
		return;
	join_all();
	/* Foreign stoppers, releasers and retirers count themselves in before they look at
	 * `up`; once it is false and the count is zero, none can touch a backend. */
	atomic_store(&cr__rt.up, false);
	while (atomic_load(&cr__rt.stoppers) != 0)
		sleep_us(10);
	teardown_all();
}

unsigned
cr_lcore_id(void)
{
	return cr__cur != NULL ? cr__cur->id : CR_LCORE_NONE;
}

unsigned
cr_lcore_main(void)
{
	return cr__rt.main_lcore;
}

enum cr_lcore_state
cr_lcore_state(unsigned id)
{
	struct cr_lcore *lc = cr__lcore(id);

	if (lc == NULL)
		return CR_LCORE_OFFLINE;
	return atomic_load_explicit(&lc->state, memory_order_acquire);
}

int
cr_lcore_numa(unsigned id)
{
	struct cr_lcore *lc = cr__lcore(id);

	return lc != NULL ? lc->numa : -1;
}

unsigned
cr_lcore_next(unsigned prev)
{
	unsigned i = prev == CR_LCORE_NONE ? 0 : prev + 1;

	for (; i < CR_MAX_LCORES; i++)
		if (cr__lcores[i].exists && cr_lcore_state(i) == CR_LCORE_RUNNING)
			return i;
	return CR_LCORE_NONE;
}

unsigned
cr_lcore_count(void)
{
	unsigned i, n = 0;

	CR_LCORE_FOREACH(i)
	n++;
	return n;
}

uint64_t
cr_now_ns(void)
{
	return cr__cur != NULL ? cr__cur->now : cr__rt.clock();
}

void
cr_timer_start(struct cr_timer *t, uint64_t delay_ns)
{
	struct cr_lcore *lc = cr__cur;

	assert(lc != NULL);
	cr_timer_arm(lc->wheel, t, cr__rt.clock() + delay_ns);
}

bool
cr_timer_stop(struct cr_timer *t)
{
	struct cr_lcore *lc = cr__cur;

	assert(lc != NULL);
	return cr_timer_cancel(lc->wheel, t);
}

#define LOAD(f) atomic_load_explicit(&lc->stats.f, memory_order_relaxed)

int
cr_lcore_stats(unsigned id, struct cr_lcore_stats *out)
{
	struct cr_lcore *lc = cr__lcore(id);
	if (lc == NULL || out == NULL)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->turns = LOAD(turns);
	out->busy_ns = LOAD(busy_ns);
	out->idle_ns = LOAD(idle_ns);
	out->msgs_in = LOAD(msgs_in);
	out->msgs_out = LOAD(msgs_out);
	out->deferred = LOAD(deferred);
	out->timers = LOAD(timers);
	out->cqes = LOAD(cqes);
	out->wakes_sent = LOAD(wakes_sent);
	out->parks = LOAD(parks);
	out->spin_hits = LOAD(spin_hits);
	out->spin_misses = LOAD(spin_misses);
	out->spin_budget_ns = LOAD(spin_budget_ns);
	out->spin_ns = LOAD(spin_ns);
	out->park_cost_ns = LOAD(park_cost_ns);
	out->incarnation = atomic_load_explicit(&lc->incarnation, memory_order_relaxed);
	out->wakes_recv = LOAD(wakes_recv);
	/* The rings are freed at fini: read them only while counted in. */
	if (cr__visit_begin()) {
		if (atomic_load_explicit(&lc->exists, memory_order_acquire))
			out->mailbox_depth = cr_mailbox_depth(&lc->mbox);
		cr__visit_end();
	}
	return 0;
}

const char *
cr_reactor_driver(void)
{
	return cr__rt.ops != NULL ? cr__rt.ops->name : NULL;
}
