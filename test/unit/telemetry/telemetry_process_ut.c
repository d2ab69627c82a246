/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * process_* metrics (lib/telemetry/telemetry_process.c): present under the names client
 * libraries use, and following what the process does: descriptors it opens, memory it
 * touches, CPU it burns; its start time and descriptor limit.
 */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "prom_check.h"
#include "telemetry_internal.h"
#include "ut_json.h"
#include "ut_runtime.h"
#include "ut_socket.h"

static char text[CR_TELEMETRY_MAX_REPLY + 1];

static double
metric(const char *name)
{
	struct cr__tbuf t;
	double v = -1;

	cr__tbuf_init(&t, text, sizeof(text));
	cr__prom_render_process(&t);
	CU_ASSERT_FALSE(t.overflow);
	PROM_ASSERT_VALID(text);
	CU_ASSERT_TRUE(prom_sample_value(text, name, &v));
	return v;
}

static void
test_fds(void)
{
	double before = metric("process_open_fds"), after;
	int fds[3];
	struct rlimit rl;

	for (int i = 0; i < 3; i++)
		fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	after = metric("process_open_fds");
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	CU_ASSERT_EQUAL(after - before, 3);
	CU_ASSERT_TRUE(before >= 3); /* stdin, stdout, stderr at least */
	CU_ASSERT_EQUAL(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur != RLIM_INFINITY)
		CU_ASSERT_EQUAL(metric("process_max_fds"), (double)rl.rlim_cur);
}

static void
test_memory(void)
{
	const size_t len = 32u << 20;
	double before = metric("process_resident_memory_bytes"), after;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	CU_ASSERT_TRUE_FATAL(p != MAP_FAILED);
	memset(p, 1, len);
	after = metric("process_resident_memory_bytes");
	CU_ASSERT_TRUE(before > 0);
	CU_ASSERT_TRUE(after - before >= (double)len * 0.9);
	CU_ASSERT_TRUE(metric("process_virtual_memory_bytes") > after);
	munmap(p, len);
}

static void
test_cpu_and_start(void)
{
	double before = metric("process_cpu_seconds_total"), start, now;
	volatile uint64_t x = 0;
	uint64_t until = cr_clock_ns() + 300000000ull;
	struct timespec ts;

	/* At least 0.3 s of wall clock spinning; on a loaded machine we may get less CPU. */
	while (cr_clock_ns() < until)
		x += 1;
	CU_ASSERT_TRUE(metric("process_cpu_seconds_total") - before > 0.05);
	start = metric("process_start_time_seconds");
	clock_gettime(CLOCK_REALTIME, &ts);
	now = (double)ts.tv_sec;
	/* This test binary started moments ago (boot time has a one-second granularity). */
	CU_ASSERT_TRUE(start <= now + 2 && start > now - 300);
}

static const struct ut_case cases[] = {
    UT_CASE(test_fds),
    UT_CASE(test_memory),
    UT_CASE(test_cpu_and_start),
};

UT_MAIN("telemetry_process", cases, NULL, NULL)
