/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cr-hello: the smallest coreact app. A token travels round the lcores with cr_send; each
 * lcore also keeps a timer. It prints what happens and stops after --laps laps (or at
 * SIGINT/SIGTERM).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cr_reactor.h"

static unsigned long long laps = 3;
static bool quiet;

struct token {
	unsigned long long lap;
	unsigned hops;
	uint64_t started_ns;
};

static void pass(void *arg);

static unsigned
next_lcore(unsigned id)
{
	unsigned n = cr_lcore_next(id);

	return n != CR_LCORE_NONE ? n : cr_lcore_next(CR_LCORE_NONE);
}

static void
pass(void *arg)
{
	struct token *t = arg;
	unsigned me = cr_lcore_id(), to;
	int rc;

	t->hops++;
	if (me == cr_lcore_main()) {
		if (t->hops > 1) {
			printf("lap %llu: the token visited %u lcores in %.1f us\n", t->lap + 1,
			       t->hops - 1, (double)(cr_now_ns() - t->started_ns) / 1000.0);
			t->lap++;
		}
		if (t->lap == laps) {
			cr_reactor_stop();
			return;
		}
		t->hops = 1;
		t->started_ns = cr_now_ns();
	}
	to = next_lcore(me);
	if (!quiet)
		printf("  lcore %u (CPU %d) passes the token to lcore %u\n", me, sched_getcpu(),
		       to);
	rc = cr_send(to, pass, t);
	if (rc != 0)
		fprintf(stderr, "cr-hello: cr_send to lcore %u: %s\n", to, cr_strerror(rc));
}

static int
set_laps(const char *v, void *ctx)
{
	(void)ctx;
	return cr_parse_uint(v, 1, 1000000, &laps);
}

static int
set_quiet(const char *v, void *ctx)
{
	(void)v;
	(void)ctx;
	quiet = true;
	return 0;
}

static void *
signal_thread(void *arg)
{
	sigset_t *set = arg;
	int sig;

	if (sigwait(set, &sig) == 0)
		cr_reactor_stop();
	return NULL;
}

int
main(int argc, char **argv)
{
	static const struct cr_opt opts[] = {
		{"laps", 0, "N", "laps of the token round the lcores (default 3)", "1-1000000",
		 set_laps, NULL},
		{"quiet", 'q', NULL, "print only one line per lap", NULL, set_quiet, NULL},
	};
	static const struct cr_app_info app = {
		"cr-hello", "pass a token round the lcores with cr_send", opts, 2};
	struct cr_eal_config cfg;
	struct cr_lcore_table table;
	struct token tok = {0};
	sigset_t set;
	pthread_t sigt;
	char cl[256];
	int rc;

	cr_eal_config_defaults(&cfg);
	rc = cr_eal_parse_args(argc, argv, &app, &cfg, &table, NULL);
	if (rc != 0)
		return rc > 0 ? 0 : 2;
	/* Signals go to one thread that asks for a stop; lcores never see them. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	rc = cr_reactor_init(&cfg, &table, NULL);
	if (rc != 0) {
		fprintf(stderr, "cr-hello: cannot start: %s\n", cr_strerror(rc));
		return 1;
	}
	pthread_create(&sigt, NULL, signal_thread, &set);
	pthread_detach(sigt);
	printf("cr-hello: %u lcores (%s), main lcore %u, io driver %s\n", cr_lcore_count(),
	       cr_lcore_table_corelist(&table, cl, sizeof(cl)), cr_lcore_main(),
	       cr_reactor_driver());
	fflush(stdout);
	pass(&tok);
	cr_reactor_run();
	cr_reactor_fini();
	printf("cr-hello: %llu laps done, stopped cleanly\n", tok.lap);
	return 0;
}
