/* SPDX-License-Identifier: BSD-3-Clause */
/* cr_offload on the real runtime: helper threads, completions on the origin, the queue
 * bound, and shutdown waiting for accepted jobs. */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "cr_offload.h"
#include "cr_reactor.h"
#include "ut_cunit.h"

static struct cr_eal_config cfg;
static struct cr_lcore_table table;

static void
sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

static int
setup(void)
{
	char err[256];

	cr_eal_config_defaults(&cfg);
	return cr_eal_lcore_table(&cfg, &table, err, sizeof(err)) == 0 ? 0 : 1;
}

#define NJOBS 1000

static _Atomic unsigned ran_off_lcore, ran_on_lcore, done_on_origin, done_total;
static unsigned origin_of[NJOBS];
static _Atomic bool gate_open;

static void
job(void *arg)
{
	(void)arg;
	if (cr_lcore_id() == CR_LCORE_NONE)
		atomic_fetch_add(&ran_off_lcore, 1);
	else
		atomic_fetch_add(&ran_on_lcore, 1);
}

static void
job_done(void *arg)
{
	unsigned i = (unsigned)(uintptr_t)arg;

	if (cr_lcore_id() == origin_of[i])
		atomic_fetch_add(&done_on_origin, 1);
	if (atomic_fetch_add(&done_total, 1) + 1 == NJOBS)
		cr_reactor_stop();
}

static void
submit_share(void *arg)
{
	unsigned start = (unsigned)(uintptr_t)arg, i;

	for (i = start; i < NJOBS; i += 2) {
		origin_of[i] = cr_lcore_id();
		CU_ASSERT_EQUAL(cr_offload(job, (void *)(uintptr_t)i, job_done), 0);
	}
}

static void
test_jobs_run_off_lcore_done_on_origin(void)
{
	unsigned other;

	atomic_store(&ran_off_lcore, 0);
	atomic_store(&ran_on_lcore, 0);
	atomic_store(&done_on_origin, 0);
	atomic_store(&done_total, 0);
	CU_ASSERT_EQUAL(cr_offload(job, NULL, job_done), -EPERM);
	CU_ASSERT_EQUAL_FATAL(cr_reactor_init(&cfg, &table, NULL), 0);
	CU_ASSERT_EQUAL(cr_offload(NULL, NULL, job_done), -EINVAL);
	other = cr_lcore_next(cr_lcore_main());
	if (other == CR_LCORE_NONE)
		other = cr_lcore_main();
	cr_send(cr_lcore_main(), submit_share, (void *)0);
	cr_send(other, submit_share, (void *)1);
	CU_ASSERT_EQUAL(cr_reactor_run(), 0);
	cr_reactor_fini();
	CU_ASSERT_EQUAL(atomic_load(&ran_off_lcore), NJOBS);
	CU_ASSERT_EQUAL(atomic_load(&ran_on_lcore), 0);
	CU_ASSERT_EQUAL(atomic_load(&done_on_origin), NJOBS);
	CU_ASSERT_EQUAL(atomic_load(&done_total), NJOBS);
}

static void
gated_job(void *arg)
{
	(void)arg;
	for (int i = 0; i < 10000 && !atomic_load(&gate_open); i++)
		sleep_ms(1);
}

static void
count_done(void *arg)
{
	(void)arg;
	atomic_fetch_add(&done_total, 1);
}

static _Atomic int full_rc, accepted_before_full;

static void
fill_queue(void *arg)
{
	int rc, n = 0;

	(void)arg;
	while ((rc = cr_offload(gated_job, NULL, count_done)) == 0 && n < 100000)
		n++;
	atomic_store(&accepted_before_full, n);
	atomic_store(&full_rc, rc);
	atomic_store(&gate_open, true);
	/* shut down at once: the accepted jobs must still complete before run returns */
	cr_reactor_stop();
}

static void
test_queue_bound_and_shutdown_waits(void)
{
	atomic_store(&done_total, 0);
	atomic_store(&gate_open, false);
	CU_ASSERT_EQUAL_FATAL(cr_reactor_init(&cfg, &table, NULL), 0);
	cr_send(cr_lcore_main(), fill_queue, NULL);
	CU_ASSERT_EQUAL(cr_reactor_run(), 0);
	cr_reactor_fini();
	CU_ASSERT_EQUAL(atomic_load(&full_rc), -EAGAIN);
	CU_ASSERT_EQUAL(atomic_load(&accepted_before_full), CR_OFFLOAD_JOBS);
	CU_ASSERT_EQUAL(atomic_load(&done_total), CR_OFFLOAD_JOBS);
}

static _Atomic int rc_in_shutdown = 1;

static void
on_shutdown(unsigned lcore, void *arg)
{
	(void)arg;
	if (lcore == table.main_lcore)
		atomic_store(&rc_in_shutdown, cr_offload(job, NULL, count_done));
}

static void
test_refused_after_shutdown(void)
{
	const struct cr_reactor_hooks hooks = {.on_shutdown = on_shutdown};

	CU_ASSERT_EQUAL_FATAL(cr_reactor_init(&cfg, &table, &hooks), 0);
	cr_reactor_stop();
	CU_ASSERT_EQUAL(cr_reactor_run(), 0);
	cr_reactor_fini();
	CU_ASSERT_EQUAL(atomic_load(&rc_in_shutdown), -ESHUTDOWN);
}

static const struct ut_case cases[] = {
	UT_CASE(test_jobs_run_off_lcore_done_on_origin),
	UT_CASE(test_queue_bound_and_shutdown_waits),
	UT_CASE(test_refused_after_shutdown),
};

UT_MAIN("offload", cases, setup, NULL)
