/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Pinned, named threads (lib/eal/eal_thread.c).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "ut_cunit.h"

#include "cr_eal.h"

/* What a thread saw of itself; checked on the main thread, where CUnit asserts belong. */
struct seen {
	int cpu;
	int n_allowed;
	bool only_target;
	char name[16];
	unsigned target;
	int pin_rc;
	int cpu_after_pin;
};

static void
look(struct seen *s)
{
	cpu_set_t set;

	s->cpu = sched_getcpu();
	CPU_ZERO(&set);
	pthread_getaffinity_np(pthread_self(), sizeof(set), &set);
	s->n_allowed = CPU_COUNT(&set);
	s->only_target = CPU_ISSET(s->target, &set) && s->n_allowed == 1;
	pthread_getname_np(pthread_self(), s->name, sizeof(s->name));
}

static void *
look_fn(void *arg)
{
	look(arg);
	return NULL;
}

static bool
may_run_on(unsigned cpu)
{
	cpu_set_t set;

	return sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_ISSET(cpu, &set);
}

static void
run_on(unsigned cpu)
{
	struct seen s = {.target = cpu, .cpu = -1};
	void *h = NULL;

	CU_ASSERT_EQUAL_FATAL(cr_thread_create(&h, cpu, "cr-test-lcore", look_fn, &s), 0);
	CU_ASSERT_EQUAL(cr_thread_join(h), 0);
	CU_ASSERT_EQUAL(s.cpu, (int)cpu);
	CU_ASSERT_TRUE(s.only_target);
	CU_ASSERT_STRING_EQUAL(s.name, "cr-test-lcore");
}

static void
test_pinned_before_fn(void)
{
	unsigned n = 0;

	for (unsigned cpu = 0; cpu < 2; cpu++) {
		if (may_run_on(cpu)) {
			run_on(cpu);
			n++;
		}
	}
	if (n == 0)
		CU_FAIL("neither CPU 0 nor CPU 1 is allowed");
}

static void *
repin_fn(void *arg)
{
	struct seen *s = arg;

	s->pin_rc = cr_thread_pin_self(s->target);
	s->cpu_after_pin = sched_getcpu();
	look(s);
	return NULL;
}

static void
test_pin_self(void)
{
	for (unsigned cpu = 0; cpu < 2; cpu++) {
		struct seen s = {.target = cpu};
		unsigned start;
		void *h;

		if (!may_run_on(cpu))
			continue;
		/* Start on the other CPU if we may, and move. */
		start = may_run_on(1 - cpu) ? 1 - cpu : cpu;
		CU_ASSERT_EQUAL_FATAL(cr_thread_create(&h, start, NULL, repin_fn, &s), 0);
		CU_ASSERT_EQUAL(cr_thread_join(h), 0);
		CU_ASSERT_EQUAL(s.pin_rc, 0);
		CU_ASSERT_EQUAL(s.cpu_after_pin, (int)cpu);
		CU_ASSERT_TRUE(s.only_target);
	}
}

static void *
bad_pin_fn(void *arg)
{
	struct seen *s = arg;

	s->pin_rc = cr_thread_pin_self(4000);
	return NULL;
}

static void
test_errors(void)
{
	struct seen s = {0};
	void *h = NULL;

	CU_ASSERT_EQUAL(cr_thread_create(&h, 0, "sixteen-chars-xx", look_fn, &s), -EINVAL);
	CU_ASSERT_EQUAL(cr_thread_create(&h, 0, "t", NULL, &s), -EINVAL);
	CU_ASSERT_EQUAL(cr_thread_create(NULL, 0, "t", look_fn, &s), -EINVAL);
	/* A CPU this machine does not have. */
	CU_ASSERT_EQUAL(cr_thread_create(&h, 4000, "t", look_fn, &s), -EINVAL);
	CU_ASSERT_PTR_NULL(h);
	CU_ASSERT_EQUAL(cr_thread_join(NULL), -EINVAL);

	CU_ASSERT_EQUAL_FATAL(cr_thread_create(&h, 0, NULL, bad_pin_fn, &s), 0);
	CU_ASSERT_EQUAL(cr_thread_join(h), 0);
	CU_ASSERT_EQUAL(s.pin_rc, -EINVAL);
}

static _Atomic int detached_ran;
static void *det_handle;
static _Atomic bool det_published;

static void *
detached_fn(void *arg)
{
	int i;

	(void)arg;
	/* cr_thread_create() writes the handle after the thread exists: wait for it. */
	for (i = 0; i < 5000 && !atomic_load(&det_published); i++)
		usleep(1000);
	/* Detaches itself, as an lcore thread that hands its record to a successor does. */
	atomic_store(&detached_ran, cr_thread_detach(det_handle) == 0 ? 1 : -1);
	return NULL;
}

static void
test_detach(void)
{
	int i;

	CU_ASSERT_EQUAL(cr_thread_detach(NULL), -EINVAL);
	atomic_store(&detached_ran, 0);
	CU_ASSERT_EQUAL_FATAL(
		cr_thread_create(&det_handle, CR_CPU_ANY, "cr-test-det", detached_fn, NULL), 0);
	atomic_store(&det_published, true);
	for (i = 0; i < 5000 && atomic_load(&detached_ran) == 0; i++)
		usleep(1000);
	CU_ASSERT_EQUAL(atomic_load(&detached_ran), 1);
}

static const struct ut_case cases[] = {
	{"pinned and named before fn", test_pinned_before_fn},
	{"pin self", test_pin_self},
	{"errors", test_errors},
	{"detach", test_detach},
};

UT_MAIN("eal_thread", cases, NULL, NULL)
