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

static const struct ut_case cases[] = {
	{"monotonic clock", test_clock},
	{"hypervisor bit", test_is_vm},
	{"error strings", test_strerror},
};

UT_MAIN("eal_misc", cases, NULL, NULL)
