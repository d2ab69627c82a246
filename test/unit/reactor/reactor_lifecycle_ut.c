/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Retire, start again, resize and shut down on real threads and the real backend named
 * by $CR_UT_DRIVER; leases held across them. A control thread (not an lcore) drives the
 * lifecycle while the main lcore runs its loop.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cr_lease.h"
#include "cr_reactor.h"
#include "ut_cunit.h"
#include "ut_driver.h"

static struct cr_eal_config cfg;
static struct cr_lcore_table table;
static unsigned worker; /* the lcore we retire and restart */

static void
sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

/* Poll a condition for up to 5 s (bounded). */
#define WAIT_FOR(cond)                                                                     \
	do {                                                                               \
		for (int w_ = 0; w_ < 5000 && !(cond); w_++)                               \
			sleep_ms(1);                                                       \
	} while (0)

static int
setup(void)
{
	char err[256];

	ut_require_driver();
	cr_eal_config_defaults(&cfg);
	cfg.io_driver = ut_driver();
	if (cr_eal_lcore_table(&cfg, &table, err, sizeof(err)) != 0)
		return 1;
	worker = table.lcores[table.n - 1].lcore_id;
	return 0;
}

static _Atomic unsigned retire_done_calls, retired_id;
static _Atomic unsigned hook_retire, hook_shutdown;

static void
on_retired(unsigned lcore, void *arg)
{
	(void)arg;
	atomic_store(&retired_id, lcore);
	atomic_fetch_add(&retire_done_calls, 1);
}

static void
on_retire_hook(unsigned lcore, void *arg)
{
	(void)lcore;
	(void)arg;
	atomic_fetch_add(&hook_retire, 1);
}

static void
on_shutdown_hook(unsigned lcore, void *arg)
{
	(void)lcore;
	(void)arg;
	atomic_fetch_add(&hook_shutdown, 1);
}

static const struct cr_reactor_hooks hooks = {
	.on_retire = on_retire_hook, .on_shutdown = on_shutdown_hook};

static _Atomic unsigned pings;

static void
ping(void *arg)
{
	(void)arg;
	atomic_fetch_add(&pings, 1);
}

static _Atomic int ctl_failures;
#define CTL_CHECK(c)                                                                       \
	do {                                                                               \
		if (!(c)) {                                                                \
			fprintf(stderr, "control check failed: %s (line %d)\n", #c, __LINE__); \
			atomic_fetch_add(&ctl_failures, 1);                                \
		}                                                                          \
	} while (0)

/* ---- retire, send refused, start again, resize ---- */

static void *
ctl_retire_restart(void *arg)
{
	struct cr_lcore_stats st;
	uint64_t inc0;
	int rc;

	(void)arg;
	cr_lcore_stats(worker, &st);
	inc0 = st.incarnation;
	CTL_CHECK(cr_lcore_retire(cr_lcore_main(), NULL, NULL) == -EBUSY);
	CTL_CHECK(cr_lcore_retire(worker, on_retired, NULL) == 0);
	CTL_CHECK(cr_lcore_retire(worker, on_retired, NULL) == -EALREADY);
	WAIT_FOR(atomic_load(&retire_done_calls) == 1);
	CTL_CHECK(cr_lcore_state(worker) == CR_LCORE_OFFLINE);
	CTL_CHECK(atomic_load(&retired_id) == worker);
	CTL_CHECK(atomic_load(&hook_retire) == 1);
	/* an OFFLINE lcore refuses at once; the caller keeps arg */
	CTL_CHECK(cr_send(worker, ping, NULL) == -ESHUTDOWN);
	CTL_CHECK(cr_lcore_count() == table.n - 1);

	rc = cr_lcore_start(worker);
	CTL_CHECK(rc == 0);
	WAIT_FOR(cr_lcore_state(worker) == CR_LCORE_RUNNING);
	cr_lcore_stats(worker, &st);
	CTL_CHECK(st.incarnation == inc0 + 1);
	CTL_CHECK(cr_lcore_start(worker) == -EALREADY);
	CTL_CHECK(cr_send(worker, ping, NULL) == 0);
	WAIT_FOR(atomic_load(&pings) == 1);
	CTL_CHECK(atomic_load(&pings) == 1);

	/* resize down to the main lcore, then back up */
	CTL_CHECK(cr_pool_resize(0) == -EINVAL);
	CTL_CHECK(cr_pool_resize(table.n + 1) == -EINVAL);
	CTL_CHECK(cr_pool_resize(1) == 0);
	WAIT_FOR(cr_lcore_state(worker) == CR_LCORE_OFFLINE);
	CTL_CHECK(cr_lcore_count() == 1);
	CTL_CHECK(cr_pool_resize(table.n) == 0);
	WAIT_FOR(cr_lcore_count() == table.n);
	CTL_CHECK(cr_lcore_count() == table.n);
	cr_lcore_stats(worker, &st);
	CTL_CHECK(st.incarnation == inc0 + 2);
	cr_reactor_stop();
	return NULL;
}


/* Run the initialised runtime with @p ctl on a control thread, then fini; @p ctl's checks
 * (CTL_CHECK) must all have held. */
static void
run_controlled(void *(*ctl)(void *))
{
	pthread_t t;

	CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, ctl, NULL), 0);
	CU_ASSERT_EQUAL(cr_reactor_run(), 0);
	pthread_join(t, NULL);
	cr_reactor_fini();
	CU_ASSERT_EQUAL(atomic_load(&ctl_failures), 0);
}

static void
test_retire_start_resize(void)
{
	if (table.n < 2)
		return;
	atomic_store(&retire_done_calls, 0);
	atomic_store(&hook_retire, 0);
	atomic_store(&pings, 0);
	atomic_store(&ctl_failures, 0);
	CU_ASSERT_EQUAL_FATAL(cr_reactor_init(&cfg, &table, &hooks), 0);
	run_controlled(ctl_retire_restart);
	CU_ASSERT_EQUAL(atomic_load(&hook_shutdown), table.n);
}

/* ---- a lease holds a retiring lcore until released from a foreign thread ---- */

static struct cr_lease lease;

static void
take_lease(void *arg)
{
	(void)arg;
	CTL_CHECK(cr_lease_acquire(&lease) == 0);
}

static void *
ctl_lease_retire(void *arg)
{
	int i;

	(void)arg;
	CTL_CHECK(cr_send(worker, take_lease, NULL) == 0);
	WAIT_FOR(cr_lease_active(&lease));
	CTL_CHECK(cr_lcore_retire(worker, on_retired, NULL) == 0);
	for (i = 0; i < 100; i++) { /* held: it must stay RETIRING and keep serving */
		CTL_CHECK(cr_lcore_state(worker) == CR_LCORE_RETIRING);
		sleep_ms(1);
	}
	CTL_CHECK(cr_send(worker, ping, NULL) == 0); /* its mailbox is still open */
	WAIT_FOR(atomic_load(&pings) == 1);
	CTL_CHECK(cr_lease_release(&lease) == 0);
	CTL_CHECK(cr_lease_release(&lease) == -EALREADY);
	WAIT_FOR(cr_lcore_state(worker) == CR_LCORE_OFFLINE);
	CTL_CHECK(cr_lcore_state(worker) == CR_LCORE_OFFLINE);
	cr_reactor_stop();
	return NULL;
}

static void
test_lease_holds_retirement(void)
{
	if (table.n < 2)
		return;
	memset(&lease, 0, sizeof(lease));
	atomic_store(&pings, 0);
	atomic_store(&ctl_failures, 0);
	atomic_store(&retire_done_calls, 0);
	CU_ASSERT_EQUAL_FATAL(cr_reactor_init(&cfg, &table, &hooks), 0);
	run_controlled(ctl_lease_retire);
	CU_ASSERT_EQUAL(atomic_load(&retire_done_calls), 1);
}

/* ---- graceful shutdown waits for a lease; forced does not ---- */

static _Atomic int state_at_release;

static void *
ctl_graceful(void *arg)
{
	(void)arg;
	CTL_CHECK(cr_send(worker, take_lease, NULL) == 0);
	WAIT_FOR(cr_lease_active(&lease));
	cr_shutdown(30ull * 1000 * 1000 * 1000); /* 30 s: long enough never to force here */
	sleep_ms(100);
	atomic_store(&state_at_release, cr_lcore_state(worker));
	cr_lease_release(&lease);
	return NULL;
}

static void
test_graceful_shutdown_waits_for_lease(void)
{
	pthread_t t;

	if (table.n < 2)
		return;
	memset(&lease, 0, sizeof(lease));
	atomic_store(&ctl_failures, 0);
	CU_ASSERT_EQUAL_FATAL(cr_reactor_init(&cfg, &table, &hooks), 0);
	pthread_create(&t, NULL, ctl_graceful, NULL);
	CU_ASSERT_EQUAL(cr_reactor_run(), 0);
	pthread_join(t, NULL);
	cr_reactor_fini();
	CU_ASSERT_EQUAL(atomic_load(&state_at_release), CR_LCORE_RETIRING);
	CU_ASSERT_EQUAL(atomic_load(&ctl_failures), 0);
}

static struct cr_lease *heap_lease;

static void
take_heap_lease(void *arg)
{
	(void)arg;
	CTL_CHECK(cr_lease_acquire(heap_lease) == 0);
}

static void *
ctl_forced(void *arg)
{
	(void)arg;
	CTL_CHECK(cr_send(worker, take_heap_lease, NULL) == 0);
	WAIT_FOR(cr_lease_active(heap_lease));
	cr_shutdown(20ull * 1000 * 1000); /* 20 ms, then forced: the lease is not waited for */
	return NULL;
}

static void
test_forced_shutdown_with_active_lease(void)
{
	pthread_t t;

	if (table.n < 2)
		return;
	heap_lease = calloc(1, sizeof(*heap_lease));
	atomic_store(&ctl_failures, 0);
	CU_ASSERT_EQUAL_FATAL(cr_reactor_init(&cfg, &table, &hooks), 0);
	pthread_create(&t, NULL, ctl_forced, NULL);
	CU_ASSERT_EQUAL(cr_reactor_run(), 0); /* returns although the lease is held */
	pthread_join(t, NULL);
	CU_ASSERT_TRUE(cr_lease_active(heap_lease));
	cr_reactor_fini();
	/* after a forced teardown the lease is safe to release and free (ASan watches) */
	CU_ASSERT_EQUAL(cr_lease_release(heap_lease), 0);
	free(heap_lease);
	CU_ASSERT_EQUAL(atomic_load(&ctl_failures), 0);
}

/* A lease from an earlier runtime is a no-op on the next one (a new incarnation). */
static void
test_stale_lease_across_incarnations(void)
{
	struct cr_lcore_stats st;

	if (table.n < 2)
		return;
	heap_lease = calloc(1, sizeof(*heap_lease));
	CU_ASSERT_EQUAL_FATAL(cr_reactor_init(&cfg, &table, &hooks), 0);
	pthread_t t;
	pthread_create(&t, NULL, ctl_forced, NULL);
	cr_reactor_run();
	pthread_join(t, NULL);
	cr_reactor_fini();
	CU_ASSERT_EQUAL_FATAL(cr_reactor_init(&cfg, &table, &hooks), 0);
	cr_lcore_stats(worker, &st);
	CU_ASSERT(st.incarnation > cr_lease_incarnation(heap_lease));
	CU_ASSERT_EQUAL(cr_lease_release(heap_lease), 0); /* marks it inactive, drops nothing */
	cr_reactor_stop();
	CU_ASSERT_EQUAL(cr_reactor_run(), 0); /* no phantom hold was dropped or kept */
	cr_reactor_fini();
	free(heap_lease);
}

/* A retire callback that starts its own lcore again: that thread has not ended, so the
 * start is carried out by it at its very end (it used to be refused with -EDEADLK, and
 * before that, to join itself). */
static _Atomic int self_start_rc = 1;

static void
retired_then_self_start(unsigned lcore, void *arg)
{
	(void)arg;
	atomic_store(&self_start_rc, cr_lcore_start(lcore));
}

static void *
ctl_self_start(void *arg)
{
	struct cr_lcore_stats st;
	uint64_t inc0;

	(void)arg;
	cr_lcore_stats(worker, &st);
	inc0 = st.incarnation;
	CTL_CHECK(cr_lcore_retire(worker, retired_then_self_start, NULL) == 0);
	WAIT_FOR(atomic_load(&self_start_rc) != 1);
	WAIT_FOR(cr_lcore_state(worker) == CR_LCORE_RUNNING);
	CTL_CHECK(cr_lcore_state(worker) == CR_LCORE_RUNNING);
	cr_lcore_stats(worker, &st);
	CTL_CHECK(st.incarnation == inc0 + 1);
	CTL_CHECK(cr_send(worker, ping, NULL) == 0);
	WAIT_FOR(atomic_load(&pings) == 1);
	CTL_CHECK(atomic_load(&pings) == 1);
	cr_reactor_stop();
	return NULL;
}

static void
test_retire_callback_restarts_itself(void)
{
	pthread_t t;

	if (table.n < 2)
		return;
	atomic_store(&ctl_failures, 0);
	atomic_store(&pings, 0);
	atomic_store(&self_start_rc, 1);
	CU_ASSERT_EQUAL_FATAL(cr_reactor_init(&cfg, &table, &hooks), 0);
	pthread_create(&t, NULL, ctl_self_start, NULL);
	CU_ASSERT_EQUAL(cr_reactor_run(), 0);
	pthread_join(t, NULL);
	cr_reactor_fini();
	CU_ASSERT_EQUAL(atomic_load(&self_start_rc), 0);
	CU_ASSERT_EQUAL(atomic_load(&ctl_failures), 0);
}

/* Regression (lifecycle review): a lifecycle request made by an lcore while the main
 * thread joins the lcores at shutdown used to block on the lock join_all held. */
static _Atomic int late_start_rc = 1;

static void
slow_shutdown_hook(unsigned lcore, void *arg)
{
	(void)arg;
	if (lcore != worker)
		return;
	sleep_ms(50); /* let the main lcore finish and reach its joins first */
	atomic_store(&late_start_rc, cr_lcore_start(cr_lcore_main()));
	cr_pool_resize(1);
}

static void
test_lifecycle_request_during_join(void)
{
	const struct cr_reactor_hooks h = {.on_shutdown = slow_shutdown_hook};

	if (table.n < 2)
		return;
	CU_ASSERT_EQUAL_FATAL(cr_reactor_init(&cfg, &table, &h), 0);
	cr_reactor_stop();
	CU_ASSERT_EQUAL(cr_reactor_run(), 0); /* returns: no deadlock */
	cr_reactor_fini();
	CU_ASSERT_EQUAL(atomic_load(&late_start_rc), -ESHUTDOWN);
}

/* ---- nothing of an old incarnation is kept (issue 12 item 2) ---- */

static int
count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

#define CYCLES 50

static _Atomic int fds_before, fds_after;

static void *
ctl_cycles(void *arg)
{
	int i;

	(void)arg;
	WAIT_FOR(cr_lcore_state(worker) == CR_LCORE_RUNNING);
	atomic_store(&fds_before, count_fds());
	for (i = 0; i < CYCLES; i++) {
		CTL_CHECK(cr_lcore_retire(worker, NULL, NULL) == 0);
		WAIT_FOR(cr_lcore_state(worker) == CR_LCORE_OFFLINE);
		CTL_CHECK(cr_lcore_start(worker) == 0);
		WAIT_FOR(cr_lcore_state(worker) == CR_LCORE_RUNNING);
	}
	atomic_store(&fds_after, count_fds());
	cr_reactor_stop();
	return NULL;
}

/* Each retire closed its ring and its eventfd: 2 fds a cycle stayed open before. */
static void
test_cycles_keep_fds_flat(void)
{
	if (table.n < 2)
		return;
	atomic_store(&ctl_failures, 0);
	CU_ASSERT_EQUAL_FATAL(cr_reactor_init(&cfg, &table, &hooks), 0);
	run_controlled(ctl_cycles);
	CU_ASSERT(atomic_load(&fds_before) > 0);
	CU_ASSERT_EQUAL(atomic_load(&fds_after), atomic_load(&fds_before));
}

/* ---- a wake sent by an lcore on its way out is delivered (issue 12 item 8) ---- */

static struct cr_lease main_lease;

static void
take_main_lease(void *arg)
{
	(void)arg;
	CTL_CHECK(cr_lease_acquire(&main_lease) == 0);
}

/* The worker's last words: it lets go of a lease held on the (idle, parked) main lcore.
 * Its ring has seen its last submit, so the wake must not ride on it. */
static void
stop_hook_releases(unsigned lcore, void *arg)
{
	(void)arg;
	if (lcore == worker && cr_lease_active(&main_lease))
		CTL_CHECK(cr_lease_release(&main_lease) == 0);
}

static void *
ctl_wake_from_stop(void *arg)
{
	(void)arg;
	CTL_CHECK(cr_send(cr_lcore_main(), take_main_lease, NULL) == 0);
	WAIT_FOR(cr_lease_active(&main_lease));
	sleep_ms(50); /* main goes idle and parks */
	CTL_CHECK(cr_lcore_retire(worker, NULL, NULL) == 0);
	WAIT_FOR(cr_lcore_state(worker) == CR_LCORE_OFFLINE);
	CTL_CHECK(!cr_lease_active(&main_lease));
	sleep_ms(50);
	/* A lost wake used to leave main asleep with its flag taken: no sender woke it. */
	CTL_CHECK(cr_send(cr_lcore_main(), ping, NULL) == 0);
	WAIT_FOR(atomic_load(&pings) == 1);
	CTL_CHECK(atomic_load(&pings) == 1);
	cr_reactor_stop();
	return NULL;
}

static void
test_wake_from_stop_hook_delivered(void)
{
	const struct cr_reactor_hooks h = {.on_lcore_stop = stop_hook_releases};

	if (table.n < 2)
		return;
	memset(&main_lease, 0, sizeof(main_lease));
	atomic_store(&pings, 0);
	atomic_store(&ctl_failures, 0);
	CU_ASSERT_EQUAL_FATAL(cr_reactor_init(&cfg, &table, &h), 0);
	run_controlled(ctl_wake_from_stop);
}

/* ---- a resize while an lcore is still RETIRING is carried out (issue 12 item 3) ---- */

/* Take the lease, or (the second time, on the holder's lcore) let it go. */
static void
toggle_lease_msg(void *arg)
{
	(void)arg;
	if (cr_lease_active(&lease))
		cr_lease_release(&lease);
	else
		CTL_CHECK(cr_lease_acquire(&lease) == 0);
}

static void *
ctl_resize_while_retiring(void *arg)
{
	int rc;

	(void)arg;
	CTL_CHECK(cr_send(worker, toggle_lease_msg, NULL) == 0);
	WAIT_FOR(cr_lease_active(&lease));
	CTL_CHECK(cr_pool_resize(table.n - 1) == 0); /* retires the worker: held, RETIRING */
	WAIT_FOR(cr_lcore_state(worker) == CR_LCORE_RETIRING);
	CTL_CHECK(cr_lcore_state(worker) == CR_LCORE_RETIRING);
	/* Back up while it still retires: accepted, and done once it is OFFLINE. */
	rc = cr_pool_resize(table.n);
	CTL_CHECK(rc == -EINPROGRESS);
	sleep_ms(20);
	CTL_CHECK(cr_lcore_state(worker) == CR_LCORE_RETIRING);
	CTL_CHECK(cr_send(worker, toggle_lease_msg, NULL) == 0); /* the owner lets go */
	WAIT_FOR(cr_lcore_state(worker) == CR_LCORE_RUNNING);
	CTL_CHECK(cr_lcore_state(worker) == CR_LCORE_RUNNING);
	CTL_CHECK(cr_lcore_count() == table.n);
	/* Down while it is still STARTING: retired once RUNNING. */
	CTL_CHECK(cr_pool_resize(table.n - 1) == 0);
	WAIT_FOR(cr_lcore_state(worker) == CR_LCORE_OFFLINE);
	CTL_CHECK(cr_lcore_start(worker) == 0);
	rc = cr_pool_resize(table.n - 1);
	CTL_CHECK(rc == 0 || rc == -EINPROGRESS);
	WAIT_FOR(cr_lcore_state(worker) == CR_LCORE_OFFLINE);
	CTL_CHECK(cr_lcore_state(worker) == CR_LCORE_OFFLINE);
	sleep_ms(20);
	CTL_CHECK(cr_lcore_state(worker) == CR_LCORE_OFFLINE);
	cr_reactor_stop();
	return NULL;
}

static void
test_resize_while_retiring_carried_out(void)
{
	if (table.n < 2)
		return;
	memset(&lease, 0, sizeof(lease));
	atomic_store(&ctl_failures, 0);
	CU_ASSERT_EQUAL_FATAL(cr_reactor_init(&cfg, &table, &hooks), 0);
	run_controlled(ctl_resize_while_retiring);
}

/* ---- two retire callbacks that start each other (issue 12 item 10) ---- */

/* Three lcores on two CPUs: lcores 1 and 2 share the last CPU (pinning allows it). */
static struct cr_lcore_table table3;
static _Atomic int in_cb, cross_rc[CR_MAX_LCORES];

static void
start_the_other(unsigned lcore, void *arg)
{
	unsigned other = (unsigned)(uintptr_t)arg;
	int i;

	/* Both callbacks run at once: each waits (bounded) for the other to begin. */
	atomic_fetch_add(&in_cb, 1);
	for (i = 0; i < 2000 && atomic_load(&in_cb) < 2; i++)
		sleep_ms(1);
	atomic_store(&cross_rc[lcore], cr_lcore_start(other) + 1000);
}

static void *
ctl_cross_start(void *arg)
{
	(void)arg;
	CTL_CHECK(cr_lcore_retire(1, start_the_other, (void *)(uintptr_t)2) == 0);
	CTL_CHECK(cr_lcore_retire(2, start_the_other, (void *)(uintptr_t)1) == 0);
	WAIT_FOR(atomic_load(&cross_rc[1]) != 0 && atomic_load(&cross_rc[2]) != 0);
	CTL_CHECK(atomic_load(&cross_rc[1]) == 1000);
	CTL_CHECK(atomic_load(&cross_rc[2]) == 1000);
	WAIT_FOR(cr_lcore_state(1) == CR_LCORE_RUNNING && cr_lcore_state(2) == CR_LCORE_RUNNING);
	CTL_CHECK(cr_lcore_state(1) == CR_LCORE_RUNNING);
	CTL_CHECK(cr_lcore_state(2) == CR_LCORE_RUNNING);
	cr_reactor_stop();
	return NULL;
}

/* Each callback started the other, whose thread was itself still in its callback: both
 * joined each other and hung. Now each start is carried out by the other thread's end. */
static void
test_retire_callbacks_start_each_other(void)
{
	unsigned i;

	memset(&table3, 0, sizeof(table3));
	table3.n = 3;
	table3.main_lcore = 0;
	for (i = 0; i < 3; i++) {
		table3.lcores[i].lcore_id = i;
		table3.lcores[i].cpu = i < table.n ? table.lcores[i].cpu : table.lcores[table.n - 1].cpu;
		table3.lcores[i].numa_node = -1;
	}
	atomic_store(&in_cb, 0);
	atomic_store(&cross_rc[1], 0);
	atomic_store(&cross_rc[2], 0);
	atomic_store(&ctl_failures, 0);
	CU_ASSERT_EQUAL_FATAL(cr_reactor_init(&cfg, &table3, &hooks), 0);
	run_controlled(ctl_cross_start);
}

/* ---- what a retiring lcore's app left armed is cancelled and reported (item 12) ---- */

static struct cr_timer left_timer;
static struct cr_poller *left_poller, *left_timed;
static _Atomic int timer_fired, timers_dropped, pollers_dropped, dropped_wrong;
static _Atomic bool left_armed_again;

static void
left_timer_fn(struct cr_timer *t, void *arg)
{
	(void)t;
	(void)arg;
	atomic_fetch_add(&timer_fired, 1);
}

static int
left_poll_fn(void *arg)
{
	(void)arg;
	return 0;
}

static void
arm_leftovers(void *arg)
{
	(void)arg;
	cr_timer_init(&left_timer, left_timer_fn, NULL);
	cr_timer_start(&left_timer, 3600ull * 1000 * 1000 * 1000); /* an hour: never fires */
	left_poller = cr_poller_register(left_poll_fn, &left_poller, 0);
	left_timed = cr_poller_register(left_poll_fn, &left_timed, 1000ull * 1000 * 1000);
	CTL_CHECK(left_poller != NULL && left_timed != NULL);
}

static void
on_timer_dropped(unsigned lcore, struct cr_timer *t, void *arg)
{
	(void)arg;
	if (lcore != worker || t != &left_timer || cr_timer_armed(t))
		atomic_fetch_add(&dropped_wrong, 1);
	atomic_fetch_add(&timers_dropped, 1);
}

static void
on_poller_dropped(unsigned lcore, int (*fn)(void *), void *parg, void *arg)
{
	(void)arg;
	if (lcore != worker || fn != left_poll_fn || (parg != &left_poller && parg != &left_timed))
		atomic_fetch_add(&dropped_wrong, 1);
	*(struct cr_poller **)parg = NULL; /* the handle is dead: forget it */
	atomic_fetch_add(&pollers_dropped, 1);
}

/* In the next incarnation: the timer can be armed again, on the new wheel. */
static void
rearm_left_timer(void *arg)
{
	(void)arg;
	cr_timer_start(&left_timer, 3600ull * 1000 * 1000 * 1000);
	atomic_store(&left_armed_again, cr_timer_armed(&left_timer));
	cr_timer_stop(&left_timer);
}

static void *
ctl_leftovers(void *arg)
{
	(void)arg;
	CTL_CHECK(cr_send(worker, arm_leftovers, NULL) == 0);
	sleep_ms(20);
	CTL_CHECK(cr_lcore_retire(worker, NULL, NULL) == 0);
	WAIT_FOR(cr_lcore_state(worker) == CR_LCORE_OFFLINE);
	CTL_CHECK(atomic_load(&timers_dropped) == 1);
	CTL_CHECK(atomic_load(&pollers_dropped) == 2);
	CTL_CHECK(left_poller == NULL && left_timed == NULL);
	CTL_CHECK(cr_lcore_start(worker) == 0);
	WAIT_FOR(cr_lcore_state(worker) == CR_LCORE_RUNNING);
	CTL_CHECK(cr_send(worker, rearm_left_timer, NULL) == 0);
	WAIT_FOR(atomic_load(&left_armed_again));
	CTL_CHECK(atomic_load(&left_armed_again));
	cr_reactor_stop();
	return NULL;
}

static void
test_retire_cancels_and_reports_leftovers(void)
{
	const struct cr_reactor_hooks h = {.on_timer_dropped = on_timer_dropped,
					   .on_poller_dropped = on_poller_dropped};

	if (table.n < 2)
		return;
	atomic_store(&ctl_failures, 0);
	CU_ASSERT_EQUAL_FATAL(cr_reactor_init(&cfg, &table, &h), 0);
	run_controlled(ctl_leftovers);
	CU_ASSERT_EQUAL(atomic_load(&dropped_wrong), 0);
	CU_ASSERT_EQUAL(atomic_load(&timer_fired), 0);
}

static const struct ut_case cases[] = {
	UT_CASE(test_retire_start_resize),
	UT_CASE(test_lease_holds_retirement),
	UT_CASE(test_graceful_shutdown_waits_for_lease),
	UT_CASE(test_forced_shutdown_with_active_lease),
	UT_CASE(test_stale_lease_across_incarnations),
	UT_CASE(test_retire_callback_restarts_itself),
	UT_CASE(test_lifecycle_request_during_join),
	UT_CASE(test_cycles_keep_fds_flat),
	UT_CASE(test_wake_from_stop_hook_delivered),
	UT_CASE(test_resize_while_retiring_carried_out),
	UT_CASE(test_retire_callbacks_start_each_other),
	UT_CASE(test_retire_cancels_and_reports_leftovers),
};

UT_MAIN("reactor_lifecycle", cases, setup, NULL)
