/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The real runtime for the suites that run lcores on threads (io, net, telemetry, app's
 * neighbours): the configuration with the io driver named by $CR_UT_DRIVER (uring or
 * epoll), a scenario run on the calling thread (the main lcore) under a watchdog that
 * forces a stop if it hangs, or the runtime on a thread of its own (so the test's thread
 * is not an lcore); clocks and sleeps. Every wait is bounded.
 */
#ifndef UT_RUNTIME_H
#define UT_RUNTIME_H

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cr_io.h"
#include "cr_reactor.h"
#include "ut_cunit.h"
#include "ut_driver.h"

#define UT_MS (1000ull * 1000)
/* How long a scenario may take before the watchdog forces the stop (and fails it). */
#define UT_WATCHDOG_MS 30000u
/* How long the runtime on its own thread is waited for (start, stop). */
#define UT_WAIT_MS 20000

static struct cr_eal_config ut_cfg;
static struct cr_lcore_table ut_table;

/* ---- clocks ---- */

static inline void
ut_sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

static inline uint64_t
ut_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t
ut_ms(void)
{
	return ut_mono_ns() / 1000000;
}

/* ---- the configuration ---- */

static inline bool
ut_uring(void)
{
	return ut_driver_uring();
}

/*
 * ut_cfg and ut_table: every lcore of this machine, the driver of $CR_UT_DRIVER, a 5 s
 * graceful shutdown. A send to a closed peer must be -EPIPE, never a signal: SIGPIPE is
 * left at its default, so one would end the test. A driver the kernel refuses skips the
 * test (exit 77). @return 0, or 1 (a suite init fails).
 */
static inline int
ut_rt_setup(void)
{
	char err[256];

	signal(SIGPIPE, SIG_DFL);
	ut_require_driver();
	cr_eal_config_defaults(&ut_cfg);
	ut_cfg.io_driver = ut_driver();
	ut_cfg.shutdown_timeout = 5;
	if (cr_eal_lcore_table(&ut_cfg, &ut_table, err, sizeof(err)) != 0) {
		fprintf(stderr, "lcore table: %s\n", err);
		return 1;
	}
	return 0;
}

/* ---- a scenario on the calling thread ---- */

struct ut_watchdog {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	bool fired;
	unsigned ms;
};

static inline void *
ut_watchdog_main(void *arg)
{
	struct ut_watchdog *w = arg;
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += w->ms / 1000;
	ts.tv_nsec += (long)(w->ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&w->lock);
	while (!w->done)
		if (pthread_cond_timedwait(&w->cond, &w->lock, &ts) == ETIMEDOUT)
			break;
	if (!w->done) {
		w->fired = true;
		fprintf(stderr, "watchdog: the scenario did not finish within %u ms\n", w->ms);
		cr_shutdown_force();
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/*
 * Start the runtime (ut_cfg, ut_table, @p hooks), run @p start(@p arg) on the main lcore,
 * and run until someone calls cr_reactor_stop() — or the watchdog forces a stop after
 * @p ms, which fails the test. @return true when the scenario ended by itself.
 */
static inline bool
ut_rt_run(const struct cr_reactor_hooks *hooks, cr_msg_fn start, void *arg, unsigned ms)
{
	struct ut_watchdog w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false,
				ms};
	pthread_t t;

	if (cr_reactor_init(&ut_cfg, &ut_table, hooks) != 0) {
		CU_FAIL("cr_reactor_init");
		return false;
	}
	CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, ut_watchdog_main, &w), 0);
	CU_ASSERT_EQUAL(cr_send(cr_lcore_main(), start, arg), 0);
	CU_ASSERT_EQUAL(cr_reactor_run(), 0);
	pthread_mutex_lock(&w.lock);
	w.done = true;
	pthread_cond_signal(&w.cond);
	pthread_mutex_unlock(&w.lock);
	pthread_join(t, NULL);
	cr_reactor_fini();
	CU_ASSERT_FALSE(w.fired);
	return !w.fired;
}

/* A scenario as a state machine: a step run every turn of the main lcore. */
static struct cr_poller *ut_poller;

struct ut_start {
	cr_poller_fn step;
	void *arg;
};

static inline void
ut_start_fn(void *arg)
{
	struct ut_start *s = arg;

	/* Without I/O in the driver every op fails with ENOTSUP: say so once, plainly. */
	if (cr_io_buf_size() == 0)
		fprintf(stderr, "the %s driver has no I/O ops (cr_io_buf_size() == 0)\n",
			cr_reactor_driver());
	ut_poller = cr_poller_register(s->step, s->arg, 0);
	CU_ASSERT_PTR_NOT_NULL(ut_poller);
}

/* Run @p step(@p arg) every turn of the main lcore until it calls ut_finish(). */
static inline bool
ut_run(cr_poller_fn step, void *arg)
{
	struct ut_start s = {step, arg};

	return ut_rt_run(NULL, ut_start_fn, &s, UT_WATCHDOG_MS);
}

/* End the scenario: from its step or a callback on the main lcore. */
static inline void
ut_finish(void)
{
	cr_poller_unregister(&ut_poller);
	cr_reactor_stop();
}

/* A check run every @p ms on the calling lcore until it returns true; then it stops. */
struct ut_every {
	bool (*fn)(void *arg);
	void *arg;
	struct cr_poller *p;
};

static inline int
ut_every_tick(void *arg)
{
	struct ut_every *e = arg;

	if (e->fn(e->arg))
		cr_poller_unregister(&e->p);
	return 0;
}

static inline void
ut_every(struct ut_every *e, unsigned ms, bool (*fn)(void *), void *arg)
{
	e->fn = fn;
	e->arg = arg;
	e->p = cr_poller_register(ut_every_tick, e, (uint64_t)ms * UT_MS);
	CU_ASSERT_PTR_NOT_NULL(e->p);
}

/* ---- the runtime on a thread of its own ---- */

enum { RT_STARTING, RT_RUNNING, RT_FAILED, RT_STOPPED, RT_FINI, RT_DONE };

static struct {
	pthread_t th;
	_Atomic int phase;
	int rc;
	struct cr_eal_config cfg;
	struct cr_lcore_table table;
} ut_rt;

static inline bool
ut_rt_wait(int phase)
{
	for (int i = 0; i < UT_WAIT_MS && atomic_load(&ut_rt.phase) < phase; i++)
		ut_sleep_ms(1);
	return atomic_load(&ut_rt.phase) >= phase;
}

static inline void *
ut_rt_thread(void *arg)
{
	(void)arg;
	ut_rt.rc = cr_reactor_init(&ut_rt.cfg, &ut_rt.table, NULL);
	if (ut_rt.rc != 0) {
		atomic_store(&ut_rt.phase, RT_FAILED);
		return NULL;
	}
	atomic_store(&ut_rt.phase, RT_RUNNING);
	cr_reactor_run();
	atomic_store(&ut_rt.phase, RT_STOPPED);
	/* The records stay readable (frozen counters) until the test lets fini go. */
	for (int i = 0; i < UT_WAIT_MS && atomic_load(&ut_rt.phase) < RT_FINI; i++)
		ut_sleep_ms(1);
	cr_reactor_fini();
	atomic_store(&ut_rt.phase, RT_DONE);
	return NULL;
}

/* Start every lcore of this machine (default driver) on a thread of its own; @return true
 * when they all run. */
static inline bool
ut_rt_start(void)
{
	char err[256];

	cr_eal_config_defaults(&ut_rt.cfg);
	if (cr_eal_lcore_table(&ut_rt.cfg, &ut_rt.table, err, sizeof(err)) != 0) {
		fprintf(stderr, "lcore table: %s\n", err);
		return false;
	}
	atomic_store(&ut_rt.phase, RT_STARTING);
	if (pthread_create(&ut_rt.th, NULL, ut_rt_thread, NULL) != 0)
		return false;
	if (!ut_rt_wait(RT_RUNNING) || atomic_load(&ut_rt.phase) == RT_FAILED) {
		pthread_join(ut_rt.th, NULL);
		return false;
	}
	return true;
}

/* Stop the loops; the records stay until ut_rt_fini(). @return true once stopped. */
static inline bool
ut_rt_stop(void)
{
	cr_reactor_stop();
	return ut_rt_wait(RT_STOPPED);
}

static inline void
ut_rt_fini(void)
{
	atomic_store(&ut_rt.phase, RT_FINI);
	pthread_join(ut_rt.th, NULL);
}

#endif /* UT_RUNTIME_H */
