/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cr-hello: the smallest coreact app. A token travels round the lcores with cr_send. It
 * prints what happens and stops after --laps laps, or with --run-for after that many
 * seconds of laps paced by a timer (or at SIGINT/SIGTERM). It serves telemetry: an app
 * counter and gauge, and an app command that runs on an lcore (/hello/ping,ID).
 * cr_app_run() does the rest: options, signals, the runtime, telemetry, the exit status.
 */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cr_app.h"
#include "cr_reactor.h"
#include "cr_telemetry.h"

/* With --run-for, the token rests this long on the main lcore between laps. */
#define LAP_PAUSE_NS (100ull * 1000 * 1000)

static unsigned long long laps = 3;
static double run_for = -1;
static bool quiet;
static int ctr_passes = -1, gauge_laps = -1;

struct token {
	unsigned long long lap;
	unsigned hops;
	uint64_t started_ns;
	struct cr_timer pause;
};

static struct token tok;

static void pass(void *arg);

static unsigned
next_lcore(unsigned id)
{
	unsigned n = cr_lcore_next(id);

	return n != CR_LCORE_NONE ? n : cr_lcore_next(CR_LCORE_NONE);
}

static void
forward(struct token *t, unsigned me)
{
	unsigned to = next_lcore(me);
	int rc;

	if (!quiet)
		printf("  lcore %u (CPU %d) passes the token to lcore %u\n", me, sched_getcpu(),
		       to);
	rc = cr_send(to, pass, t);
	/* -ESHUTDOWN: the run is ending and the token stops here. */
	if (rc != 0 && rc != -ESHUTDOWN)
		fprintf(stderr, "cr-hello: cr_send to lcore %u: %s\n", to, cr_strerror(rc));
}

static void
pass(void *arg)
{
	struct token *t = arg;
	unsigned me = cr_lcore_id();

	t->hops++;
	cr_telemetry_add(ctr_passes, 1);
	if (me == cr_lcore_main()) {
		if (t->hops > 1) {
			printf("lap %llu: the token visited %u lcores in %.1f us\n", t->lap + 1,
			       t->hops - 1, (double)(cr_now_ns() - t->started_ns) / 1000.0);
			t->lap++;
			cr_telemetry_set(gauge_laps, t->lap);
			if (run_for >= 0) {
				fflush(stdout);
				cr_timer_start(&t->pause, LAP_PAUSE_NS);
				return;
			}
		}
		if (t->lap == laps) {
			cr_reactor_stop();
			return;
		}
		t->hops = 1;
		t->started_ns = cr_now_ns();
	}
	forward(t, me);
}

/* --run-for: the next lap after a pause, on the main lcore. */
static void
resume(struct cr_timer *tm, void *arg)
{
	struct token *t = arg;

	(void)tm;
	t->hops = 1;
	t->started_ns = cr_now_ns();
	forward(t, cr_lcore_id());
}

static void
time_up(struct cr_timer *tm, void *arg)
{
	(void)tm;
	(void)arg;
	cr_reactor_stop();
}

static int
set_laps(const char *v, void *ctx)
{
	(void)ctx;
	return cr_parse_uint(v, 1, 1000000, &laps);
}

static int
set_run_for(const char *v, void *ctx)
{
	(void)ctx;
	return cr_parse_seconds(v, &run_for);
}

static int
set_quiet(const char *v, void *ctx)
{
	(void)v;
	(void)ctx;
	quiet = true;
	return 0;
}

/* /hello/ping,ID: an app command whose work runs on lcore ID. */
struct ping {
	unsigned lcore;
	int cpu;
	uint64_t now_ns;
	uint64_t passes;
};

static void
ping_on_lcore(void *arg)
{
	struct ping *p = arg;

	p->lcore = cr_lcore_id();
	p->cpu = sched_getcpu();
	p->now_ns = cr_now_ns();
	cr_telemetry_counter_read(ctr_passes, p->lcore, &p->passes);
}

static int
cmd_ping(const char *cmd, const char *params, struct cr_json *reply)
{
	struct ping p = {0};
	unsigned long long id;
	int rc;

	(void)cmd;
	if (cr_parse_uint(params, 0, CR_MAX_LCORES - 1, &id) != 0)
		return cr_json_errorf(reply, -EINVAL, "'%s' is not an lcore id; usage: "
				      "/hello/ping,ID", params);
	rc = cr_telemetry_call_on((unsigned)id, ping_on_lcore, &p, 1000ull * 1000 * 1000);
	if (rc != 0)
		return cr_json_errorf(reply, rc, "lcore %llu: %s", id, cr_strerror(rc));
	cr_json_object_begin(reply, NULL);
	cr_json_u64(reply, "lcore", p.lcore);
	cr_json_i64(reply, "cpu", p.cpu);
	cr_json_u64(reply, "now_ns", p.now_ns);
	cr_json_u64(reply, "token_passes", p.passes);
	cr_json_object_end(reply);
	return 0;
}

/* App counters and the command, registered before the telemetry socket opens. */
static int
configure(int argc, char **argv, void *arg)
{
	int rc;

	(void)argc;
	(void)argv;
	(void)arg;
	ctr_passes = cr_telemetry_counter_register("token_passes", CR_TELEMETRY_COUNTER,
						   "Times the token arrived on the lcore.");
	gauge_laps = cr_telemetry_counter_register("laps_done", CR_TELEMETRY_GAUGE,
						   "Laps the token completed (main lcore).");
	rc = cr_telemetry_register("/hello/ping", cmd_ping,
				   "run on lcore ID and report its cpu, clock and token passes; "
				   "/hello/ping,ID");
	if (ctr_passes < 0 || gauge_laps < 0 || (rc != 0 && rc != -EEXIST)) {
		rc = ctr_passes < 0 ? ctr_passes : gauge_laps < 0 ? gauge_laps : rc;
		return cr_app_errorf(rc, "telemetry counters: %s", cr_strerror(rc));
	}
	return 0;
}

static struct cr_timer stop_timer; /* --run-for */

/* On the main lcore, every lcore up: the token starts its first lap. */
static int
start(void *arg)
{
	char cl[256];

	(void)arg;
	printf("cr-hello: %u lcores (%s), main lcore %u, io driver %s\n", cr_lcore_count(),
	       cr_lcore_table_corelist(cr_app_lcore_table(), cl, sizeof(cl)), cr_lcore_main(),
	       cr_reactor_driver());
	fflush(stdout);
	cr_timer_init(&tok.pause, resume, &tok);
	if (run_for > 0) {
		cr_timer_init(&stop_timer, time_up, NULL);
		cr_timer_start(&stop_timer, (uint64_t)(run_for * 1e9));
	}
	pass(&tok);
	return 0;
}

/* The timers live on the main lcore: a stop cancels them there, so none is left armed. */
static void
shutdown(unsigned lcore, void *arg)
{
	(void)arg;
	if (lcore != cr_lcore_main())
		return;
	(void)cr_timer_stop(&tok.pause);
	if (run_for > 0)
		(void)cr_timer_stop(&stop_timer);
}

static int
fini(bool failed, void *arg)
{
	(void)arg;
	if (!failed)
		printf("cr-hello: %llu laps done, stopped cleanly\n", tok.lap);
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct cr_opt opts[] = {
		{"laps", 0, "N", "laps of the token round the lcores (default 3)", "1-1000000",
		 set_laps, NULL},
		{"quiet", 'q', NULL, "print only one line per lap", NULL, set_quiet, NULL},
		{"run-for", 0, "SECONDS",
		 "lap for SECONDS instead of --laps, 100 ms apart (0: until a signal)",
		 "a number of seconds >= 0, e.g. 0.5 or 10", set_run_for, NULL},
	};
	static const struct cr_app app = {
		.name = "cr-hello",
		.summary = "pass a token round the lcores with cr_send",
		.opts = opts,
		.n_opts = sizeof(opts) / sizeof(opts[0]),
		.configure = configure,
		.start = start,
		.shutdown = shutdown,
		.fini = fini,
	};

	return cr_app_run(&app, argc, argv);
}
