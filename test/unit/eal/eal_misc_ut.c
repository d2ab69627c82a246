/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Clocks, hypervisor detection, error strings (lib/eal/eal_misc.c).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ut_cunit.h"

#include "cr_eal.h"

static void
test_clock(void)
{
	struct timespec ts;
	uint64_t a, b, ref;

	a = cr_clock_ns();
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ref = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	b = cr_clock_ns();
	CU_ASSERT_TRUE(a <= ref);
	CU_ASSERT_TRUE(ref <= b);
}

static void
test_is_vm(void)
{
#if defined(__x86_64__) || defined(__i386__)
	/* The kernel shows the same CPUID bit as the "hypervisor" flag. */
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[4096];
	bool flag = false;

	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, "flags", 5) == 0) {
			flag = strstr(line, " hypervisor") != NULL;
			break;
		}
	}
	fclose(f);
	CU_ASSERT_EQUAL(cr_eal_is_vm(), flag);
#else
	CU_ASSERT_FALSE(cr_eal_is_vm());
#endif
}

/* Copied there: the other thread's buffer dies with it. */
static char other_thread_str[128];

static void *
other_thread(void *arg)
{
	(void)arg;
	snprintf(other_thread_str, sizeof(other_thread_str), "%s", cr_strerror(-ENOENT));
	return NULL;
}

static void
test_strerror(void)
{
	char want[128];
	const char *mine;
	pthread_t t;

	snprintf(want, sizeof(want), "%s", strerror(EINVAL));
	CU_ASSERT_STRING_EQUAL(cr_strerror(-EINVAL), want);
	CU_ASSERT_STRING_EQUAL(cr_strerror(EINVAL), want);
	CU_ASSERT_PTR_NOT_NULL(cr_strerror(-99999));
	CU_ASSERT_PTR_NOT_NULL(cr_strerror(-2147483647 - 1));

	mine = cr_strerror(-EAGAIN);
	pthread_create(&t, NULL, other_thread, NULL);
	pthread_join(t, NULL);
	snprintf(want, sizeof(want), "%s", strerror(EAGAIN));
	CU_ASSERT_STRING_EQUAL(mine, want);
	snprintf(want, sizeof(want), "%s", strerror(ENOENT));
	CU_ASSERT_STRING_EQUAL(other_thread_str, want);
}

/* cr_time_utc() against gmtime_r() (which takes glibc's lock; fine in a test): every day
 * from 1900 to 2200 at a time of day that moves, leap days and the days around them,
 * times before 1970, and the ends of a day. */
static void
check_utc(int64_t sec)
{
	time_t t = (time_t)sec;
	struct cr_utc u;
	struct tm tm;

	CU_ASSERT_PTR_NOT_NULL_FATAL(gmtime_r(&t, &tm));
	cr_time_utc(sec, &u);
	if (u.year != tm.tm_year + 1900 || u.month != (unsigned)tm.tm_mon + 1 ||
	    u.day != (unsigned)tm.tm_mday || u.hour != (unsigned)tm.tm_hour ||
	    u.min != (unsigned)tm.tm_min || u.sec != (unsigned)tm.tm_sec) {
		printf("\n%lld: %lld-%u-%u %u:%u:%u, gmtime %d-%d-%d %d:%d:%d\n", (long long)sec,
		       (long long)u.year, u.month, u.day, u.hour, u.min, u.sec, tm.tm_year + 1900,
		       tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
		CU_FAIL("cr_time_utc() and gmtime_r() disagree");
	}
}

static void
test_time_utc(void)
{
	static const int64_t edges[] = {
	    0,	    -1,	       86399,	  86400,	-86400,
	    -86401, 951782400, 951868800, 4107542400LL, 1772409600LL + 43199};
	int64_t day;
	unsigned i;

	for (day = -25567; day < 84006; day++) /* 1900-01-01 .. 2200-01-01 */
		check_utc(day * 86400 + (day * 7919) % 86400);
	for (i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
		check_utc(edges[i]);
}

static const struct ut_case cases[] = {
    {"UTC fields of a unix time", test_time_utc},
    {"monotonic clock", test_clock},
    {"hypervisor bit", test_is_vm},
    {"error strings", test_strerror},
};

UT_MAIN("eal_misc", cases, NULL, NULL)
