/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Our runtime up and down: the helper every reactor phase runs inside, and the two phases
 * that measure the runtime itself — start+stop time and the CPU an idle runtime burns.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench.h"

/* cr_reactor_init() pinned the calling thread to the main lcore's CPU; put it back so that
 * the raw phases' threads and the next runtime start from the affinity we were given. */
static void
restore_affinity(const struct bench_env *env)
{
	pthread_setaffinity_np(pthread_self(), sizeof(env->affinity), &env->affinity);
}

static const char *driver_name;

const char *
bench_runtime_driver(void)
{
	return driver_name;
}

static int
runtime_up(const struct bench_env *env)
{
	int rc = cr_reactor_init(&env->cfg, &env->table, NULL);

	if (rc != 0) {
		fprintf(stderr, "cr-bench: cr_reactor_init: %s\n", cr_strerror(rc));
		restore_affinity(env);
		return rc;
	}
	driver_name = cr_reactor_driver();
	return 0;
}

/* Only fails when called off the thread that ran cr_reactor_init(): a bug of ours. */
static void
run_main_lcore(void)
{
	int rc = cr_reactor_run();

	if (rc != 0) {
		fprintf(stderr, "cr-bench: cr_reactor_run: %s\n", cr_strerror(rc));
		abort();
	}
}

static void
runtime_down(const struct bench_env *env)
{
	cr_reactor_fini();
	restore_affinity(env);
}

int
bench_runtime(const struct bench_env *env, cr_msg_fn start, void *arg,
	      struct cr_lcore_stats stats[2])
{
	int rc = runtime_up(env);

	if (rc != 0)
		return rc;
	/* The main lcore is the calling thread from here on, so the start can be deferred. */
	if (start != NULL) {
		rc = cr_defer(start, arg);
		if (rc != 0) {
			fprintf(stderr, "cr-bench: cr_defer: %s\n", cr_strerror(rc));
			cr_reactor_stop();
		}
	}
	run_main_lcore();
	if (stats != NULL) {
		cr_lcore_stats(env->main, &stats[0]);
		cr_lcore_stats(env->other, &stats[1]);
	}
	runtime_down(env);
	return rc;
}

/* ---- start + stop ---- */

static void
stop_msg(void *arg)
{
	(void)arg;
	cr_reactor_stop();
}

static double
median_ms(uint64_t *ns, unsigned n)
{
	return (double)bench_percentile(ns, n, 50) / 1e6;
}

/*
 * One cycle: init, a stop (before run, or from a message the other lcore runs), run until
 * every lcore has left its loop, fini. @p ns receives {total, init, run, fini}.
 */
static int
startstop_cycle(const struct bench_env *env, bool by_message, uint64_t ns[4])
{
	uint64_t t0, t1, t2, t3;
	int rc;

	t0 = cr_clock_ns();
	rc = runtime_up(env);
	if (rc != 0)
		return rc;
	t1 = cr_clock_ns();
	if (by_message) {
		rc = cr_send(env->other, stop_msg, NULL);
		if (rc != 0) {
			fprintf(stderr, "cr-bench: cr_send: %s\n", cr_strerror(rc));
			cr_reactor_stop();
		}
	} else {
		cr_reactor_stop();
	}
	run_main_lcore();
	t2 = cr_clock_ns();
	cr_reactor_fini();
	t3 = cr_clock_ns();
	restore_affinity(env);
	ns[0] = t3 - t0;
	ns[1] = t1 - t0;
	ns[2] = t2 - t1;
	ns[3] = t3 - t2;
	return rc;
}

int
bench_startstop(const struct bench_env *env, struct bench_results *res)
{
	uint64_t ns[4][BENCH_STARTSTOP_CYCLES], by_msg[BENCH_STARTSTOP_CYCLES], one[4];
	unsigned c, k;
	int rc;

	for (c = 0; c < BENCH_STARTSTOP_CYCLES; c++) {
		rc = startstop_cycle(env, false, one);
		if (rc != 0)
			return rc;
		for (k = 0; k < 4; k++)
			ns[k][c] = one[k];
		rc = startstop_cycle(env, true, one);
		if (rc != 0)
			return rc;
		by_msg[c] = one[0];
	}
	res->startstop_ms = median_ms(ns[0], BENCH_STARTSTOP_CYCLES);
	res->init_ms = median_ms(ns[1], BENCH_STARTSTOP_CYCLES);
	res->run_ms = median_ms(ns[2], BENCH_STARTSTOP_CYCLES);
	res->fini_ms = median_ms(ns[3], BENCH_STARTSTOP_CYCLES);
	res->startstop_msg_ms = median_ms(by_msg, BENCH_STARTSTOP_CYCLES);
	return 0;
}

/* ---- idle CPU ---- */

struct idle_run {
	const struct bench_env *env;
	struct cr_timer timer;
	uint64_t t0, t1;     /* wall clock */
	uint64_t cpu0, cpu1; /* process CPU time, every thread */
	struct cr_lcore_stats s0[2], s1[2];
};

static uint64_t
process_cpu_ns(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0;
	return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000u +
	       ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000u;
}

static void
snapshot(const struct bench_env *env, struct cr_lcore_stats s[2])
{
	cr_lcore_stats(env->main, &s[0]);
	cr_lcore_stats(env->other, &s[1]);
}

static void
idle_end(struct cr_timer *t, void *arg)
{
	struct idle_run *r = arg;

	(void)t;
	r->t1 = cr_clock_ns();
	r->cpu1 = process_cpu_ns();
	snapshot(r->env, r->s1);
	cr_reactor_stop();
}

/* Both lcores are left with nothing to do; the main one only has the timer that ends it. */
static void
idle_start(void *arg)
{
	struct idle_run *r = arg;

	snapshot(r->env, r->s0);
	r->cpu0 = process_cpu_ns();
	r->t0 = cr_clock_ns();
	cr_timer_init(&r->timer, idle_end, r);
	cr_timer_start(&r->timer, BENCH_IDLE_NS);
}

int
bench_idle(const struct bench_env *env, struct bench_results *res)
{
	struct idle_run r;
	int rc;

	memset(&r, 0, sizeof(r));
	r.env = env;
	rc = bench_runtime(env, idle_start, &r, NULL);
	if (rc != 0)
		return rc;
	if (r.t1 <= r.t0) {
		fprintf(stderr, "cr-bench: the idle timer did not fire\n");
		return -EIO;
	}
	res->idle_cpu_pct = (double)(r.cpu1 - r.cpu0) * 100.0 / (double)(r.t1 - r.t0);
	res->idle_parks[0] = r.s1[0].parks - r.s0[0].parks;
	res->idle_parks[1] = r.s1[1].parks - r.s0[1].parks;
	return 0;
}
