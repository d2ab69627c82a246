/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cr_reactor_signals_block/start on a real runtime: SIGHUP runs the reload callback, the
 * first SIGTERM the stop callback, a second SIGTERM forces the shutdown (the run returns).
 * Signals are sent to the process; only the signal thread takes them.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cr_reactor.h"
#include "ut_cunit.h"

static struct cr_eal_config cfg;
static struct cr_lcore_table table;
static _Atomic unsigned stops, hups;

static void
on_stop(void *arg)
{
	CU_ASSERT_PTR_EQUAL(arg, &cfg);
	atomic_fetch_add(&stops, 1);
}

static void
on_hup(void *arg)
{
	CU_ASSERT_PTR_EQUAL(arg, &cfg);
	atomic_fetch_add(&hups, 1);
}

static bool
wait_count(_Atomic unsigned *c, unsigned want)
{
	struct timespec ms = {0, 1000000};

	for (int i = 0; i < 5000 && atomic_load(c) < want; i++)
		nanosleep(&ms, NULL);
	return atomic_load(c) == want;
}

/* Not an lcore: sends the signals one at a time, each once the last was taken. */
static void *
sender(void *arg)
{
	(void)arg;
	kill(getpid(), SIGHUP);
	CU_ASSERT_TRUE(wait_count(&hups, 1));
	kill(getpid(), SIGTERM);
	CU_ASSERT_TRUE(wait_count(&stops, 1));
	kill(getpid(), SIGTERM); /* forces: cr_reactor_run() returns */
	return NULL;
}

static void
test_signals(void)
{
	char err[256];
	pthread_t t;

	cr_eal_config_defaults(&cfg);
	CU_ASSERT_EQUAL_FATAL(cr_eal_lcore_table(&cfg, &table, err, sizeof(err)), 0);
	/* A SIGHUP callback needs SIGHUP blocked. */
	CU_ASSERT_EQUAL(cr_reactor_signals_block(false), 0);
	CU_ASSERT_EQUAL(cr_reactor_signals_start(on_stop, on_hup, &cfg), -EINVAL);
	CU_ASSERT_EQUAL(cr_reactor_signals_block(true), 0);
	CU_ASSERT_EQUAL_FATAL(cr_reactor_init(&cfg, &table, NULL), 0);
	CU_ASSERT_EQUAL_FATAL(cr_reactor_signals_start(on_stop, on_hup, &cfg), 0);
	CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, sender, NULL), 0);
	CU_ASSERT_EQUAL(cr_reactor_run(), 0);
	pthread_join(t, NULL);
	cr_reactor_fini();
	CU_ASSERT_EQUAL(atomic_load(&hups), 1);
	CU_ASSERT_EQUAL(atomic_load(&stops), 1);
}

static const struct ut_case cases[] = {
	UT_CASE(test_signals),
};

UT_MAIN("reactor_signals", cases, NULL, NULL)
