/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cr-bench: coreact's figures next to its raw peers', measured in one process and one run
 * on the same two CPUs (doc/guides/design.md "Tests and figures"). `cr-bench MODE [OPTIONS]`.
 *
 * Every phase runs under a watchdog: a phase still running after 60 s is named on stderr
 * and the process exits 1, so a bug in the library shows up as a failure, not a hang.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define APP_NAME "cr-bench"
/* Per throughput run (one round of one side): the whole run stays under ~30 s on a
 * 2-CPU VM, where cr_send at burst 1 moves a few million messages per second. */
#define DEFAULT_MESSAGES 2000000ull
#define MIN_MESSAGES	 1000ull
#define MAX_MESSAGES	 1000000000ull
#define WATCHDOG_S	 60

/* ---- the watchdog ---- */

#define WATCHDOG_MSG(name) APP_NAME ": phase '" name "' ran over 60 s; giving up\n"
#define PHASE(id, name)	   [id] = {name, WATCHDOG_MSG(name), sizeof(WATCHDOG_MSG(name)) - 1}

static const struct {
	const char *name;
	const char *msg; /* written by the signal handler as is */
	size_t len;
} phases[] = {
    PHASE(PHASE_RING_TP, "raw ring throughput"),
    PHASE(PHASE_SEND_TP, "cr_send throughput"),
    PHASE(PHASE_RING_RTT, "raw ring round trip"),
    PHASE(PHASE_SEND_RTT, "cr_send round trip"),
    PHASE(PHASE_WAKE_RAW, "raw eventfd wake"),
    PHASE(PHASE_WAKE, "wake from an lcore"),
    PHASE(PHASE_WAKE_FOREIGN, "wake from a foreign thread"),
    PHASE(PHASE_STARTSTOP, "start + stop"),
    PHASE(PHASE_IDLE, "idle CPU"),
    PHASE(PHASE_ECHO_URING, "echo: liburing loop"),
    PHASE(PHASE_ECHO_EPOLL, "echo: epoll loop"),
    PHASE(PHASE_ECHO_CR, "echo: cr-echo"),
};
_Static_assert(sizeof(phases) / sizeof(phases[0]) == PHASE_COUNT, "one entry per phase");

static volatile sig_atomic_t cur_phase = -1;
volatile sig_atomic_t bench_child_pid;
static bool show_progress;

static void
on_alarm(int sig)
{
	int p = cur_phase;

	(void)sig;
	/* Only async-signal-safe calls: the message was put together at compile time. */
	if (bench_child_pid > 0)
		kill((pid_t)bench_child_pid, SIGKILL);
	if (p >= 0 && p < PHASE_COUNT)
		(void)!write(STDERR_FILENO, phases[p].msg, phases[p].len);
	_exit(1);
}

void
bench_phase(enum bench_phase p)
{
	cur_phase = (sig_atomic_t)p;
	if (show_progress)
		fprintf(stderr, "%s: %s...\n", APP_NAME, phases[p].name);
	alarm(WATCHDOG_S);
}

void
bench_phase_end(void)
{
	alarm(0);
	cur_phase = -1;
}

static int
watchdog_init(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sigemptyset(&sa.sa_mask);
	return sigaction(SIGALRM, &sa, NULL) == 0 ? 0 : -errno;
}

/* ---- the handoff mode ---- */

static void
add_tp_stats(struct send_tp_stats *sum, const struct send_tp_stats *st)
{
	sum->eagain += st->eagain;
	sum->recv_parks += st->recv_parks;
	sum->recv_wakes += st->recv_wakes;
	sum->recv_turns += st->recv_turns;
	sum->send_turns += st->send_turns;
}

/* Raw and cr_send take turns at each burst. */
static int
handoff_throughput(const struct bench_env *env, struct bench_results *res)
{
	struct send_tp_stats st;
	unsigned b, r;
	int rc;

	for (b = 0; b < BENCH_N_BURSTS; b++) {
		for (r = 0; r < BENCH_ROUNDS; r++) {
			bench_phase(PHASE_RING_TP);
			rc = bench_ring_throughput(env, bench_bursts[b], &res->ring_mps_r[b][r]);
			if (rc != 0)
				return rc;
			bench_phase(PHASE_SEND_TP);
			rc = bench_send_throughput(env, bench_bursts[b], &res->cr_mps_r[b][r], &st);
			if (rc != 0)
				return rc;
			add_tp_stats(&res->cr_tp[b], &st);
		}
		res->ring_mps[b] = bench_median(res->ring_mps_r[b], BENCH_ROUNDS);
		res->cr_mps[b] = bench_median(res->cr_mps_r[b], BENCH_ROUNDS);
		res->tp_ratio[b] =
		    bench_median_ratio(res->cr_mps_r[b], res->ring_mps_r[b], BENCH_ROUNDS);
	}
	return 0;
}

static int
handoff_rtt(const struct bench_env *env, struct bench_results *res)
{
	unsigned r;
	int rc;

	for (r = 0; r < BENCH_ROUNDS; r++) {
		bench_phase(PHASE_RING_RTT);
		rc = bench_ring_rtt(env, &res->ring_rtt_r[r]);
		if (rc != 0)
			return rc;
		bench_phase(PHASE_SEND_RTT);
		rc = bench_send_rtt(env, &res->cr_rtt_r[r]);
		if (rc == 0)
			rc = bench_call_rtt(env, &res->cr_call_rtt_r[r]);
		if (rc != 0)
			return rc;
	}
	res->ring_rtt_ns = bench_median(res->ring_rtt_r, BENCH_ROUNDS);
	res->cr_rtt_ns = bench_median(res->cr_rtt_r, BENCH_ROUNDS);
	res->cr_call_rtt_ns = bench_median(res->cr_call_rtt_r, BENCH_ROUNDS);
	res->rtt_ratio = bench_median_ratio(res->cr_rtt_r, res->ring_rtt_r, BENCH_ROUNDS);
	res->call_rtt_ratio = bench_median_ratio(res->cr_call_rtt_r, res->ring_rtt_r, BENCH_ROUNDS);
	return 0;
}

static int
handoff_wake(const struct bench_env *env, struct bench_results *res)
{
	int rc;

	bench_phase(PHASE_WAKE_RAW);
	rc = bench_wake_raw(env, &res->wake_raw);
	if (rc != 0)
		return rc;
	bench_phase(PHASE_WAKE);
	rc = bench_wake_lcore(env, &res->wake);
	if (rc != 0)
		return rc;
	bench_phase(PHASE_WAKE_FOREIGN);
	return bench_wake_foreign(env, &res->wake_foreign);
}

static int
run_handoff(const struct bench_env *env)
{
	struct bench_results res;
	int rc;

	memset(&res, 0, sizeof(res));
	rc = handoff_throughput(env, &res);
	if (rc == 0)
		rc = handoff_rtt(env, &res);
	if (rc == 0)
		rc = handoff_wake(env, &res);
	if (rc == 0) {
		bench_phase(PHASE_STARTSTOP);
		rc = bench_startstop(env, &res);
	}
	if (rc == 0) {
		bench_phase(PHASE_IDLE);
		rc = bench_idle(env, &res);
	}
	bench_phase_end();
	if (rc != 0)
		return rc;
	res.driver = bench_runtime_driver();
	if (env->json)
		bench_report_json(env, &res);
	else
		bench_report_table(env, &res);
	return 0;
}

static const struct {
	const char *name;
	int (*run)(const struct bench_env *env);
} modes[] = {
    {"handoff", run_handoff},
    {"echo", bench_echo_run},
    {"resize", bench_resize_run},
    {"relay", bench_relay_run},
};

/* Modes cr-bench runs in its own child processes (the echo mode's servers). */
static const struct {
	const char *name;
	int (*run)(const char *port);
} internal_modes[] = {
    {"echo-server-uring", bench_echo_server_uring},
    {"echo-server-epoll", bench_echo_server_epoll},
};

#define N_MODES (sizeof(modes) / sizeof(modes[0]))

/* ---- options ---- */

static int
set_json(const char *val, void *ctx)
{
	(void)val;
	*(bool *)ctx = true;
	return 0;
}

static int
set_messages(const char *val, void *ctx)
{
	unsigned long long v;

	if (cr_parse_uint(val, MIN_MESSAGES, MAX_MESSAGES, &v) != 0)
		return -EINVAL;
	*(uint64_t *)ctx = v;
	return 0;
}

static int
set_uint(const char *val, unsigned long long min, unsigned long long max, void *ctx)
{
	unsigned long long v;

	if (cr_parse_uint(val, min, max, &v) != 0)
		return -EINVAL;
	*(unsigned *)ctx = (unsigned)v;
	return 0;
}

static int
set_connections(const char *val, void *ctx)
{
	return set_uint(val, 1, 4096, ctx);
}

static int
set_seconds(const char *val, void *ctx)
{
	return set_uint(val, 1, 30, ctx);
}

static int
set_message_size(const char *val, void *ctx)
{
	return set_uint(val, 1, 1048576, ctx);
}

static const char summary[] =
    "Measure coreact against its raw peers on two CPUs, in one process and one run.\n"
    "Run as: " APP_NAME " MODE [OPTIONS]  (options may also come before MODE)\n"
    "\n"
    "Modes:\n"
    "  handoff  cr_send vs a raw SPSC rte_ring between two pinned threads: throughput at\n"
    "           burst 1 and 32, round trip (cr_send and cr_call), wake latency of a parked\n"
    "           lcore (from an lcore and from a foreign thread) vs an eventfd, start+stop\n"
    "           time and idle CPU. Uses the main lcore and the next lcore of the table.\n"
    "  echo     cr-echo on one lcore vs a minimal liburing echo loop (the limit) and a\n"
    "           minimal epoll loop, each a process alone on the second CPU, one after\n"
    "           another in 3 rounds; the client (this process, first CPU) keeps one message\n"
    "           in flight per connection over 127.0.0.1. Messages per server-CPU-second\n"
    "           and the ratios. Options: --connections, --seconds, --message-size.\n"
    "  resize   cr-echo on both lcores under ping-pong load (client here, on the same two\n"
    "           CPUs): /pool/resize,1 then /pool/resize,2 on its telemetry socket; time\n"
    "           to OFFLINE and to RUNNING, echo rate before/on one lcore/after, the lowest\n"
    "           50 ms window of each transition, and the client's reconnects and resets.\n"
    "           3 rounds, medians. Options: --connections, --message-size.\n"
    "  relay    CPU seconds per GB of a one-way relay on the second lcore: through pooled\n"
    "           pipes (cr_io_relay, splice) vs through receive buffers (cr_io_recv +\n"
    "           cr_io_send); sender and sink threads on the first CPU, 3 rounds each of\n"
    "           --seconds, medians and the ratio. Options: --seconds.\n"
    "  echo-server-uring PORT, echo-server-epoll PORT\n"
    "           internal: the echo mode's raw servers (PORT 0: any port), which it starts.\n"
    "\n"
    "Exit status: 0 measured (targets missed or not), 1 a run failed or hung, 2 usage.";

/*
 * Parse options before and after the mode word (the common parser stops at the first
 * word that is not an option). @return 0, 1 for help/version, or a negative errno.
 */
static int
parse_args(int argc, char **argv, const struct cr_app_info *app, struct bench_env *env,
	   const char **mode)
{
	int first = 0, next, rc;

	*mode = NULL;
	rc = cr_eal_parse_args(argc, argv, app, &env->cfg, NULL, &first);
	while (rc == 0 && first < argc) {
		if (*mode != NULL) {
			fprintf(stderr,
				"%s: %s: unexpected argument; accepted: one MODE, then "
				"options\n",
				APP_NAME, argv[first]);
			return -EINVAL;
		}
		*mode = argv[first];
		/* The mode word stands in for argv[0]: parsing goes on after it. */
		rc = cr_eal_parse_args(argc - first, argv + first, app, &env->cfg, NULL, &next);
		first += next;
	}
	return rc;
}

static int
find_mode(const char *mode)
{
	char accepted[128] = "";
	unsigned i;

	for (i = 0; mode != NULL && i < N_MODES; i++)
		if (strcmp(mode, modes[i].name) == 0)
			return (int)i;
	for (i = 0; i < N_MODES; i++)
		snprintf(accepted + strlen(accepted), sizeof(accepted) - strlen(accepted), "%s%s",
			 i == 0 ? "" : ", ", modes[i].name);
	if (mode == NULL)
		fprintf(stderr, "%s: mode: missing; accepted: %s\n", APP_NAME, accepted);
	else
		fprintf(stderr, "%s: mode '%s': unknown; accepted: %s\n", APP_NAME, mode, accepted);
	return -EINVAL;
}

/* The main lcore and the lowest other one; the runtime's table holds just those two. */
static int
pick_pair(struct bench_env *env, const struct cr_lcore_table *all, const char *mode)
{
	char list[256];
	unsigned i, id;

	if (all->n < 2) {
		fprintf(stderr,
			"%s: %s needs two CPUs, one per lcore, and the lcore table has %u "
			"(CPUs %s); run where two CPUs are allowed, or pass -l with two CPUs\n",
			APP_NAME, mode, all->n, cr_lcore_table_corelist(all, list, sizeof(list)));
		return -ENODEV;
	}
	env->main = all->main_lcore;
	env->other = CR_LCORE_NONE;
	for (i = 0; i < all->n && env->other == CR_LCORE_NONE; i++)
		if (all->lcores[i].lcore_id != env->main)
			env->other = all->lcores[i].lcore_id;
	memset(&env->table, 0, sizeof(env->table));
	/* The table stays sorted by id, as cr_eal_lcore_table() made it. */
	for (i = 0; i < all->n; i++) {
		id = all->lcores[i].lcore_id;
		if (id == env->main || id == env->other)
			env->table.lcores[env->table.n++] = all->lcores[i];
	}
	env->table.main_lcore = env->main;
	return 0;
}

int
main(int argc, char **argv)
{
	struct bench_env env;
	struct cr_lcore_table all;
	const char *mode;
	char err[512];
	int rc, m;
	struct cr_opt opts[] = {
	    {.name = "json",
	     .help = "print one JSON object instead of the table",
	     .accepted = "--json without a value",
	     .set = set_json,
	     .ctx = &env.json},
	    {.name = "messages",
	     .metavar = "N",
	     .help = "messages per throughput run, raw or ours (default: 2000000)",
	     .accepted = "an integer from 1000 to 1000000000",
	     .set = set_messages,
	     .ctx = &env.messages},
	    {.name = "connections",
	     .metavar = "N",
	     .help = "echo: client connections, one message in flight each (default: 64)",
	     .accepted = "an integer from 1 to 4096",
	     .set = set_connections,
	     .ctx = &env.connections},
	    {.name = "seconds",
	     .metavar = "S",
	     .help = "echo: measured seconds per server per round (default: 3)",
	     .accepted = "an integer from 1 to 30",
	     .set = set_seconds,
	     .ctx = &env.seconds},
	    {.name = "message-size",
	     .metavar = "B",
	     .help = "echo: bytes per message (default: 64)",
	     .accepted = "an integer from 1 to 1048576",
	     .set = set_message_size,
	     .ctx = &env.message_size},
	};
	const struct cr_app_info app = {
	    .name = APP_NAME,
	    .summary = summary,
	    .opts = opts,
	    .n_opts = sizeof(opts) / sizeof(opts[0]),
	    .args = "MODE",
	};

	unsigned i;

	/* Internal modes take one PORT and none of the options. */
	for (i = 0; argc >= 2 && i < sizeof(internal_modes) / sizeof(internal_modes[0]); i++)
		if (strcmp(argv[1], internal_modes[i].name) == 0)
			return internal_modes[i].run(argc == 3 ? argv[2] : NULL);
	memset(&env, 0, sizeof(env));
	cr_eal_config_defaults(&env.cfg);
	env.messages = DEFAULT_MESSAGES;
	env.connections = 64;
	env.seconds = 3;
	env.message_size = 64;
	rc = parse_args(argc, argv, &app, &env, &mode);
	if (rc == 1)
		return 0;
	if (rc != 0)
		return rc == -EINVAL ? 2 : 1;
	m = find_mode(mode);
	if (m < 0)
		return 2;
	rc = cr_eal_lcore_table(&env.cfg, &all, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "%s: %s\n", APP_NAME, err);
		return rc == -EINVAL ? 2 : 1;
	}
	if (pick_pair(&env, &all, modes[m].name) != 0)
		return 1;
	rc = pthread_getaffinity_np(pthread_self(), sizeof(env.affinity), &env.affinity);
	if (rc == 0)
		rc = -watchdog_init();
	if (rc != 0) {
		fprintf(stderr, "%s: set-up: %s\n", APP_NAME, cr_strerror(rc));
		return 1;
	}
	show_progress = !env.json && isatty(STDERR_FILENO);
	rc = modes[m].run(&env);
	bench_phase_end();
	if (rc != 0) {
		fprintf(stderr, "%s: %s failed: %s\n", APP_NAME, modes[m].name, cr_strerror(rc));
		return 1;
	}
	return 0;
}
