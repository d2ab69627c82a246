/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Collectors (lib/telemetry/telemetry_collect.c): what a collector writes appears in the
 * Prometheus text after the built-in metrics, in registration order, with HELP and TYPE,
 * escaped label values and valid numbers; a bad family name skips the family and its
 * samples, a bad label name skips the sample; registration limits.
 */
#include <math.h>

#include "prom_check.h"
#include "telemetry_internal.h"
#include "ut_json.h"
#include "ut_runtime.h"
#include "ut_socket.h"
#include "tel_internal_ut.h"

static char text[CR_TELEMETRY_MAX_REPLY + 1];
static unsigned calls;

static const char *
render(void)
{
	return tel_render(text, sizeof(text));
}

static void
backends(struct cr_prom *p, void *arg)
{
	CU_ASSERT_PTR_EQUAL(arg, &calls);
	calls++;
	cr_prom_family(p, "t_backend_up", CR_TELEMETRY_GAUGE, "1 when the backend is up.");
	cr_prom_sample(p, 1, "backend", "10.0.0.1:80", NULL);
	cr_prom_sample(p, 0, "backend", "odd\"name\\", NULL);
	cr_prom_sample(p, 1, "Bad-Label", "x", NULL); /* skipped */
	cr_prom_family(p, "t_backend_sent_bytes", CR_TELEMETRY_COUNTER, NULL);
	cr_prom_sample(p, 12345, "backend", "10.0.0.1:80", "state", "up", NULL);
	cr_prom_sample(p, 0.5, NULL);
	cr_prom_family(p, "Bad-Family", CR_TELEMETRY_GAUGE, "skipped");
	cr_prom_sample(p, 7, "backend", "x", NULL); /* skipped with its family */
}

static void
second(struct cr_prom *p, void *arg)
{
	(void)arg;
	/* A sample before any family is nothing. */
	cr_prom_sample(p, 3, NULL);
	cr_prom_family(p, "t_second", CR_TELEMETRY_GAUGE, "After the first collector.");
	cr_prom_sample(p, INFINITY, NULL);
}

static void
test_collectors(void)
{
	const char *t, *a, *b;

	CU_ASSERT_EQUAL(cr_telemetry_prom_register(NULL, NULL), -EINVAL);
	CU_ASSERT_EQUAL(cr_telemetry_prom_register(backends, &calls), 0);
	CU_ASSERT_EQUAL(cr_telemetry_prom_register(second, NULL), 0);
	t = render();
	PROM_ASSERT_VALID(t);
	CU_ASSERT_EQUAL(calls, 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(t,
				      "# HELP coreact_t_backend_up 1 when the backend is up.\n"
				      "# TYPE coreact_t_backend_up gauge\n"
				      "coreact_t_backend_up{backend=\"10.0.0.1:80\"} 1\n"
				      "coreact_t_backend_up{backend=\"odd\\\"name\\\\\"} 0\n"
				      "# HELP coreact_t_backend_sent_bytes_total "
				      "t_backend_sent_bytes\n"
				      "# TYPE coreact_t_backend_sent_bytes_total counter\n"
				      "coreact_t_backend_sent_bytes_total{backend=\"10.0.0.1:80\","
				      "state=\"up\"} 12345\n"
				      "coreact_t_backend_sent_bytes_total 0.500000000\n"
				      "# HELP coreact_t_second After the first collector.\n"
				      "# TYPE coreact_t_second gauge\n"
				      "coreact_t_second +Inf\n"));
	CU_ASSERT_PTR_NULL(strstr(t, "Bad"));
	/* After the built-in metrics, before the process ones. */
	a = strstr(t, "coreact_info");
	b = strstr(t, "coreact_t_backend_up");
	CU_ASSERT_TRUE(a != NULL && b != NULL && a < b);
	a = strstr(t, "# TYPE process_");
	CU_ASSERT_TRUE(a == NULL || a > b);
	render();
	CU_ASSERT_EQUAL(calls, 2);
}

static void
test_full(void)
{
	int rc = 0;

	for (unsigned i = 0; i < CR_TELEMETRY_MAX_COLLECTORS && rc == 0; i++)
		rc = cr_telemetry_prom_register(second, NULL);
	CU_ASSERT_EQUAL(rc, -ENOSPC);
}

static const struct ut_case cases[] = {
    UT_CASE(test_collectors),
    UT_CASE(test_full),
};

UT_MAIN("telemetry_collect", cases, NULL, NULL)
