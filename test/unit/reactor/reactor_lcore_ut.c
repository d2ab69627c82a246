/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The runtime on real threads and the real backend named by $CR_UT_DRIVER (uring or
 * epoll): start, messages across lcores, parking, stop, start again.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cr_reactor.h"
#include "ut_cunit.h"
#include "ut_driver.h"

static struct cr_eal_config cfg;
static struct cr_lcore_table table;
static _Atomic unsigned starts[CR_MAX_LCORES], stops[CR_MAX_LCORES];

static void
on_start(unsigned id, void *arg)
{
	(void)arg;
	CU_ASSERT_EQUAL(cr_lcore_id(), id);
	starts[id]++;
}

static void
on_stop(unsigned id, void *arg)
{
	(void)arg;
	stops[id]++;
}

static const struct cr_reactor_hooks hooks = {on_start, on_stop, NULL};

static int
setup(void)
{
	char err[256];

	ut_require_driver();
	cr_eal_config_defaults(&cfg);
	cfg.io_driver = ut_driver();
	return cr_eal_lcore_table(&cfg, &table, err, sizeof(err)) == 0 ? 0 : 1;
}

static unsigned other(void)
{
	unsigned o = cr_lcore_next(cr_lcore_main());

	return o == CR_LCORE_NONE ? cr_lcore_main() : o;
}

static void
sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

static void
test_init_errors(void)
{
	struct cr_lcore_table bad = table;

	bad.n = 0;
	CU_ASSERT_EQUAL(cr_reactor_init(&cfg, &bad, NULL), -EINVAL);
	bad = table;
	bad.main_lcore = CR_MAX_LCORES - 1;
	CU_ASSERT_EQUAL(cr_reactor_init(&cfg, &bad, NULL), -EINVAL);
	CU_ASSERT_EQUAL(cr_reactor_run(), -EPERM);
	CU_ASSERT_EQUAL(cr_lcore_id(), CR_LCORE_NONE);
}

struct pingpong {
	unsigned left;
	unsigned main_runs, other_runs;
};

static void pp_main(void *arg);

static void
pp_other(void *arg)
{
	struct pingpong *pp = arg;

	pp->other_runs++;
	CU_ASSERT_EQUAL(cr_send(cr_lcore_main(), pp_main, pp), 0);
}

static void
pp_main(void *arg)
{
	struct pingpong *pp = arg;

	pp->main_runs++;
	if (--pp->left == 0) {
		cr_reactor_stop();
		return;
	}
	CU_ASSERT_EQUAL(cr_send(other(), pp_other, pp), 0);
}

static void
test_start_pingpong_stop_twice(void)
{
	for (int round = 0; round < 2; round++) {
		struct pingpong pp = {.left = 10000};
		struct cr_lcore_stats st;
		unsigned i;

		memset(starts, 0, sizeof(starts));
		memset(stops, 0, sizeof(stops));
		CU_ASSERT_EQUAL_FATAL(cr_reactor_init(&cfg, &table, &hooks), 0);
		CU_ASSERT_EQUAL(cr_reactor_init(&cfg, &table, &hooks), -EALREADY);
		CU_ASSERT_STRING_EQUAL(cr_reactor_driver(),
				       cfg.io_driver == CR_IO_DRIVER_EPOLL ? "epoll" : "uring");
		CU_ASSERT_EQUAL(cr_lcore_id(), table.main_lcore);
		CU_ASSERT_EQUAL(cr_lcore_count(), table.n);
		for (i = 0; i < table.n; i++)
			CU_ASSERT_EQUAL(starts[table.lcores[i].lcore_id], 1);
		CU_ASSERT_EQUAL(cr_send(other(), pp_other, &pp), 0);
		CU_ASSERT_EQUAL(cr_reactor_run(), 0);
		CU_ASSERT_EQUAL(pp.main_runs, 10000);
		CU_ASSERT_EQUAL(pp.other_runs, 10000);
		for (i = 0; i < table.n; i++) {
			unsigned id = table.lcores[i].lcore_id;

			CU_ASSERT_EQUAL(stops[id], 1);
			CU_ASSERT_EQUAL(cr_lcore_state(id), CR_LCORE_OFFLINE);
		}
		CU_ASSERT_EQUAL(cr_lcore_stats(table.main_lcore, &st), 0);
		CU_ASSERT(st.msgs_in >= 10000);
		CU_ASSERT_EQUAL(cr_send(other(), pp_other, &pp), -ESHUTDOWN);
		cr_reactor_fini();
		CU_ASSERT_EQUAL(cr_lcore_id(), CR_LCORE_NONE);
	}
}

/* A foreign thread waits until the other lcore has parked, then wakes it with a send. */
struct parkwake {
	unsigned target;
	_Atomic int ran;
	uint64_t parks_before;
};

static void
mark(void *arg)
{
	struct parkwake *pw = arg;

	atomic_store(&pw->ran, 1);
}

static void *
foreign_thread(void *arg)
{
	struct parkwake *pw = arg;
	struct cr_lcore_stats st;
	int i;

	for (i = 0; i < 2000; i++) { /* up to 2 s for the target to park */
		cr_lcore_stats(pw->target, &st);
		if (st.parks > 0)
			break;
		sleep_ms(1);
	}
	pw->parks_before = st.parks;
	CU_ASSERT_EQUAL(cr_send(pw->target, mark, pw), 0);
	for (i = 0; i < 2000 && !atomic_load(&pw->ran); i++)
		sleep_ms(1);
	cr_reactor_stop();
	return NULL;
}

static void
test_parked_lcore_wakes(void)
{
	struct parkwake pw = {0};
	struct cr_lcore_stats st;
	pthread_t t;

	CU_ASSERT_EQUAL_FATAL(cr_reactor_init(&cfg, &table, NULL), 0);
	pw.target = other();
	pthread_create(&t, NULL, foreign_thread, &pw);
	CU_ASSERT_EQUAL(cr_reactor_run(), 0);
	pthread_join(t, NULL);
	CU_ASSERT(pw.parks_before > 0);
	CU_ASSERT_EQUAL(atomic_load(&pw.ran), 1);
	cr_lcore_stats(pw.target, &st);
	CU_ASSERT(st.wakes_recv >= 1);
	cr_reactor_fini();
}

static void
test_stop_before_run(void)
{
	CU_ASSERT_EQUAL_FATAL(cr_reactor_init(&cfg, &table, NULL), 0);
	cr_reactor_stop();
	CU_ASSERT_EQUAL(cr_reactor_run(), 0);
	cr_reactor_fini();
}

/* Regression: a send from on_lcore_stop (the loop has ended) must fail, not be accepted
 * into an outbox nobody will flush (which also hung the other lcores' stop). */
static _Atomic int late_send_rc = 1, late_defer_rc = 1;

static void
noop(void *arg)
{
	(void)arg;
}

static void
stop_hook_sends(unsigned id, void *arg)
{
	(void)arg;
	if (id != table.main_lcore) {
		atomic_store(&late_send_rc, cr_send(table.main_lcore, noop, NULL));
		atomic_store(&late_defer_rc, cr_defer(noop, NULL));
	}
}

static void
test_send_from_stop_hook_refused(void)
{
	const struct cr_reactor_hooks h = {NULL, stop_hook_sends, NULL};

	if (table.n < 2)
		return;
	CU_ASSERT_EQUAL_FATAL(cr_reactor_init(&cfg, &table, &h), 0);
	cr_reactor_stop();
	CU_ASSERT_EQUAL(cr_reactor_run(), 0);
	CU_ASSERT_EQUAL(atomic_load(&late_send_rc), -ESHUTDOWN);
	CU_ASSERT_EQUAL(atomic_load(&late_defer_rc), -ESHUTDOWN);
	cr_reactor_fini();
}

/* Regression: cr_reactor_stop() and cr_lcore_stats() from a foreign thread racing the
 * runtime's start, run and fini (TSan / ASan see any use of freed state). */
static _Atomic bool hammer_on;

static void *
hammer(void *arg)
{
	struct cr_lcore_stats st;

	(void)arg;
	while (atomic_load(&hammer_on)) {
		cr_reactor_stop();
		cr_lcore_stats(table.lcores[table.n - 1].lcore_id, &st);
	}
	return NULL;
}

static void
test_foreign_stop_races_fini(void)
{
	pthread_t t;
	int i;

	atomic_store(&hammer_on, true);
	pthread_create(&t, NULL, hammer, NULL);
	for (i = 0; i < 30; i++) {
		CU_ASSERT_EQUAL_FATAL(cr_reactor_init(&cfg, &table, NULL), 0);
		cr_reactor_run();
		cr_reactor_fini();
	}
	atomic_store(&hammer_on, false);
	pthread_join(t, NULL);
}

static const struct ut_case cases[] = {
	UT_CASE(test_init_errors),
	UT_CASE(test_start_pingpong_stop_twice),
	UT_CASE(test_parked_lcore_wakes),
	UT_CASE(test_stop_before_run),
	UT_CASE(test_send_from_stop_hook_refused),
	UT_CASE(test_foreign_stop_races_fini),
};

UT_MAIN("reactor_lcore", cases, setup, NULL)
