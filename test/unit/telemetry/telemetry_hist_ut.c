/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Histograms (lib/telemetry/telemetry_hist.c): registration rules, the bucket each value
 * lands in (a value equal to a bound is in that bound's bucket), per-lcore rows summed on
 * read while lcores keep observing (exact totals), Prometheus _bucket/_sum/_count with
 * cumulative counts and le in seconds, and /histograms in JSON. Against the real runtime.
 */
#include <sched.h>

#include "prom_check.h"
#include "telemetry_internal.h"
#include "ut_json.h"
#include "ut_runtime.h"
#include "ut_socket.h"
#include "tel_internal_ut.h"

static char text[CR_TELEMETRY_MAX_REPLY + 1];
static const uint64_t small_bounds[] = {1000, 5000, 1000000};
static int id_small, id_lat;

static const char *
render(void)
{
	return tel_render(text, sizeof(text));
}

static const char *
ask(const char *req)
{
	return tel_ask(text, sizeof(text), req);
}

static void
test_register_rules(void)
{
	const uint64_t down[] = {5, 3}, same[] = {5, 5};
	uint64_t many[CR_TELEMETRY_HIST_MAX_BOUNDS + 1];

	for (unsigned i = 0; i < sizeof(many) / sizeof(many[0]); i++)
		many[i] = i + 1;
	id_small =
	    cr_telemetry_histogram_register("t_small_seconds", "Small ones.", small_bounds, 3);
	id_lat = cr_telemetry_histogram_register("t_latency_seconds", NULL, NULL, 0);
	CU_ASSERT_TRUE_FATAL(id_small >= 0 && id_lat >= 0 && id_small != id_lat);
	/* Again with the same bounds: the same id; with others: taken. */
	CU_ASSERT_EQUAL(cr_telemetry_histogram_register("t_small_seconds", NULL, small_bounds, 3),
			id_small);
	CU_ASSERT_EQUAL(cr_telemetry_histogram_register("t_small_seconds", NULL, small_bounds, 2),
			-EEXIST);
	CU_ASSERT_EQUAL(cr_telemetry_histogram_register("t_latency_seconds", NULL, NULL, 0),
			id_lat);
	/* A duration in seconds, named as such; bounds that rise; 1..30 of them. */
	CU_ASSERT_EQUAL(cr_telemetry_histogram_register("t_latency", NULL, NULL, 0), -EINVAL);
	CU_ASSERT_EQUAL(cr_telemetry_histogram_register("_seconds", NULL, NULL, 0), -EINVAL);
	CU_ASSERT_EQUAL(cr_telemetry_histogram_register("T_x_seconds", NULL, NULL, 0), -EINVAL);
	CU_ASSERT_EQUAL(cr_telemetry_histogram_register(NULL, NULL, NULL, 0), -EINVAL);
	CU_ASSERT_EQUAL(cr_telemetry_histogram_register("t_down_seconds", NULL, down, 2), -EINVAL);
	CU_ASSERT_EQUAL(cr_telemetry_histogram_register("t_same_seconds", NULL, same, 2), -EINVAL);
	CU_ASSERT_EQUAL(cr_telemetry_histogram_register("t_zero_seconds", NULL, small_bounds, 0),
			-EINVAL);
	CU_ASSERT_EQUAL(cr_telemetry_histogram_register("t_many_seconds", NULL, many,
							CR_TELEMETRY_HIST_MAX_BOUNDS + 1),
			-EINVAL);
	/* One namespace with the counters' Prometheus families, both ways. */
	CU_ASSERT_TRUE(cr_telemetry_counter_register_prom(
			   "t_wait", CR_TELEMETRY_GAUGE, NULL,
			   &(struct cr_telemetry_prom){"t_wait_seconds", NULL, NULL}) >= 0);
	CU_ASSERT_EQUAL(cr_telemetry_histogram_register("t_wait_seconds", NULL, NULL, 0), -EEXIST);
	CU_ASSERT_EQUAL(cr_telemetry_counter_register_prom(
			    "t_lat", CR_TELEMETRY_GAUGE, NULL,
			    &(struct cr_telemetry_prom){"t_latency_seconds", NULL, NULL}),
			-EEXIST);
	/* Off an lcore, observing does nothing (and a bad id never does anything). */
	cr_telemetry_observe_ns(id_small, 1);
	cr_telemetry_observe_ns(-1, 1);
	cr_telemetry_observe_ns(CR_TELEMETRY_MAX_HISTOGRAMS, 1);
}

static void
observe_fixed(void *arg)
{
	(void)arg;
	/* 0 and 1000 in the first bucket (<= 1 us), 1001 and 5000 in the second, 5001 and
	 * 1000000 in the third, 1000001 beyond the last bound. */
	static const uint64_t v[] = {0, 1000, 1001, 5000, 5001, 1000000, 1000001};

	for (unsigned i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		cr_telemetry_observe_ns(id_small, v[i]);
	cr_telemetry_observe_ns(id_small + 1000, 1); /* not registered: nothing */
}

static void
test_buckets(void)
{
	struct cr_telemetry_hist_snap s;
	unsigned id, n = 0;

	CR_LCORE_FOREACH(id)
	{
		CU_ASSERT_EQUAL(cr_telemetry_call_on(id, observe_fixed, NULL, 5000000000ull), 0);
		CU_ASSERT_EQUAL(cr_telemetry_histogram_read(id_small, id, &s), 0);
		CU_ASSERT_EQUAL(s.n_bounds, 3);
		CU_ASSERT_EQUAL(s.buckets[0], 2);
		CU_ASSERT_EQUAL(s.buckets[1], 2);
		CU_ASSERT_EQUAL(s.buckets[2], 2);
		CU_ASSERT_EQUAL(s.buckets[3], 1);
		CU_ASSERT_EQUAL(s.count, 7);
		CU_ASSERT_EQUAL(s.sum_ns, 0 + 1000 + 1001 + 5000 + 5001 + 1000000 + 1000001);
		n++;
	}
	CU_ASSERT_EQUAL(cr_telemetry_histogram_read(id_small, CR_LCORE_NONE, &s), 0);
	CU_ASSERT_EQUAL(s.count, 7 * n);
	CU_ASSERT_EQUAL(s.buckets[3], n);
	CU_ASSERT_EQUAL(s.bounds_ns[2], 1000000);
	CU_ASSERT_EQUAL(cr_telemetry_histogram_read(id_small, CR_MAX_LCORES, &s), -EINVAL);
	CU_ASSERT_EQUAL(cr_telemetry_histogram_read(99, CR_LCORE_NONE, &s), -EINVAL);
	CU_ASSERT_EQUAL(cr_telemetry_histogram_read(id_small, CR_LCORE_NONE, NULL), -EINVAL);
}

#define OBSERVATIONS 2000000

static _Atomic unsigned observers_done;

static void
observe_many(void *arg)
{
	(void)arg;
	for (unsigned i = 0; i < OBSERVATIONS; i++)
		cr_telemetry_observe_ns(id_lat, (uint64_t)(i % 1000) * 20000);
	atomic_fetch_add(&observers_done, 1);
}

static void
start_observing(void *arg)
{
	/* From the lcore itself, so the call_on caller does not wait for the whole run. */
	if (cr_defer(observe_many, arg) != 0)
		atomic_fetch_add(&observers_done, 1);
}

static void
test_read_while_observing(void)
{
	struct cr_telemetry_hist_snap s, before;
	unsigned id, n = 0, reads = 0;
	uint64_t last = 0;

	CU_ASSERT_EQUAL(cr_telemetry_histogram_read(id_lat, CR_LCORE_NONE, &before), 0);
	CR_LCORE_FOREACH(id)
	{
		CU_ASSERT_EQUAL(cr_telemetry_call_on(id, start_observing, NULL, 5000000000ull), 0);
		n++;
	}
	/* Reads while the lcores write never see a count fall or differ from its buckets. */
	for (uint64_t until = cr_clock_ns() + UT_WAIT_MS * 1000000ull;
	     atomic_load(&observers_done) < n && cr_clock_ns() < until;) {
		uint64_t sum = 0;

		CU_ASSERT_EQUAL(cr_telemetry_histogram_read(id_lat, CR_LCORE_NONE, &s), 0);
		for (unsigned b = 0; b <= s.n_bounds; b++)
			sum += s.buckets[b];
		CU_ASSERT_EQUAL(sum, s.count);
		CU_ASSERT_TRUE(s.count >= last);
		last = s.count;
		reads++;
		sched_yield();
	}
	CU_ASSERT_EQUAL_FATAL(atomic_load(&observers_done), n);
	CU_ASSERT_EQUAL(cr_telemetry_histogram_read(id_lat, CR_LCORE_NONE, &s), 0);
	CU_ASSERT_EQUAL(s.count - before.count, (uint64_t)OBSERVATIONS * n);
	/* i % 1000 * 20 us: 0 .. 19.98 ms, i.e. 1 in the first bucket (<= 5 us) per 1000,
	 * and none above 25 ms. */
	CU_ASSERT_EQUAL(s.buckets[0] - before.buckets[0], (uint64_t)OBSERVATIONS / 1000 * n);
	CU_ASSERT_EQUAL(s.buckets[CR_TELEMETRY_LATENCY_N_BOUNDS], before.buckets[20]);
	CU_ASSERT_EQUAL(s.sum_ns - before.sum_ns,
			(uint64_t)n * (OBSERVATIONS / 1000) * (999 * 1000 / 2) * 20000);
	printf("(%u reads during the run) ", reads);
}

static void
test_prometheus(void)
{
	const char *t = render();
	unsigned n = 0, id;
	char want[512];

	PROM_ASSERT_VALID(t);
	CR_LCORE_FOREACH(id)
	n++;
	snprintf(want, sizeof(want),
		 "# HELP coreact_t_small_seconds Small ones.\n"
		 "# TYPE coreact_t_small_seconds histogram\n"
		 "coreact_t_small_seconds_bucket{le=\"0.000001\"} %u\n"
		 "coreact_t_small_seconds_bucket{le=\"0.000005\"} %u\n"
		 "coreact_t_small_seconds_bucket{le=\"0.001\"} %u\n"
		 "coreact_t_small_seconds_bucket{le=\"+Inf\"} %u\n"
		 "coreact_t_small_seconds_sum %.9f\n"
		 "coreact_t_small_seconds_count %u\n",
		 2 * n, 4 * n, 6 * n, 7 * n, n * 2012003e-9, 7 * n);
	if (strstr(t, want) == NULL)
		fprintf(stderr, "\n  want:\n%s", want);
	CU_ASSERT_PTR_NOT_NULL(strstr(t, want));
	/* Default bounds: 5 us .. 10 s. */
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "coreact_t_latency_seconds_bucket{le=\"0.000005\"} "));
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "coreact_t_latency_seconds_bucket{le=\"2.5\"} "));
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "coreact_t_latency_seconds_bucket{le=\"10\"} "));
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "# HELP coreact_t_latency_seconds t_latency_seconds\n"));
}

static void
test_json(void)
{
	char want[512];
	unsigned n = 0, id;

	CR_LCORE_FOREACH(id)
	n++;
	snprintf(want, sizeof(want),
		 "\"t_small_seconds\":{\"count\":%u,\"sum_ns\":%u,\"buckets\":[[1000,%u],[5000,%u],"
		 "[1000000,%u],[null,%u]]}",
		 7 * n, 2012003 * n, 2 * n, 2 * n, 2 * n, n);
	CU_ASSERT_PTR_NOT_NULL(strstr(ask("/histograms"), want));
	CU_ASSERT_EQUAL(strncmp(text, "{\"/histograms\":{", 16), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(ask("/histograms,x"), "takes no parameters"));
}

static void
test_full(void)
{
	char name[32];
	int rc = 0;

	for (unsigned i = 0; i < CR_TELEMETRY_MAX_HISTOGRAMS + 1 && rc >= 0; i++) {
		snprintf(name, sizeof(name), "t_fill%u_seconds", i);
		rc = cr_telemetry_histogram_register(name, NULL, NULL, 0);
	}
	CU_ASSERT_EQUAL(rc, -ENOSPC);
	CU_ASSERT_EQUAL(cr__tel_n_histograms(), CR_TELEMETRY_MAX_HISTOGRAMS);
}

static int
suite_init(void)
{
	return ut_rt_start() ? 0 : 1;
}

static int
suite_fini(void)
{
	bool ok = ut_rt_stop();

	ut_rt_fini();
	return ok ? 0 : 1;
}

static const struct ut_case cases[] = {
    UT_CASE(test_register_rules), UT_CASE(test_buckets), UT_CASE(test_read_while_observing),
    UT_CASE(test_prometheus),	  UT_CASE(test_json),	 UT_CASE(test_full),
};

UT_MAIN("telemetry_hist", cases, suite_init, suite_fini)
