/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cr-bench internals shared by its source files. Never installed.
 *
 * Every figure is measured against its raw peer in the same process and the same run, on
 * the same two CPUs: the peer first, then ours, so the ratio compares like with like.
 */
#ifndef CR_BENCH_H
#define CR_BENCH_H

#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cr_eal.h"
#include "cr_reactor.h"
#include "cr_ring.h"

/* Throughput runs at these sender bursts; [0] and [1] of every burst-indexed array. */
#define BENCH_N_BURSTS 2
extern const unsigned bench_bursts[BENCH_N_BURSTS];

/* Raw and ours take turns this many times per figure, which is the median of its rounds:
 * a noisy neighbour (a VM's host) then spoils one round, not one side. */
#define BENCH_ROUNDS 5

/* A raw consumer takes up to this many per dequeue (the best a hand-written loop does). */
#define BENCH_RAW_DEQ 32

/* Round trips per timed batch; the figure is the median over batches. */
#define BENCH_RTT_BATCH	  1000
#define BENCH_RTT_BATCHES 200

/* Wake samples, after a few unrecorded ones that let the lcores settle. */
#define BENCH_WAKE_SAMPLES 1000
#define BENCH_WAKE_WARMUP  10
#define BENCH_WAKE_TOTAL   (BENCH_WAKE_WARMUP + BENCH_WAKE_SAMPLES)
/* Idle time before each sample: well past the largest spin budget, so the target parks. */
#define BENCH_WAKE_GAP_NS (2 * 1000 * 1000)

/* The echo mode's three servers take turns this many times; figures are medians. */
#define BENCH_ECHO_ROUNDS 3

#define BENCH_STARTSTOP_CYCLES 20
#define BENCH_IDLE_NS	       (1000 * 1000 * 1000)

/* What the run is about: options and the two lcores. Read-only once the phases start. */
struct bench_env {
	struct cr_eal_config cfg;
	struct cr_lcore_table table; /* exactly two lcores */
	unsigned main, other;	     /* lcore ids (== CPUs) */
	uint64_t messages;	     /* per throughput run */
	bool json;
	unsigned connections, seconds, message_size; /* echo mode */
	cpu_set_t affinity; /* the main thread's at start; restored after each runtime */
};

/* One wake-latency series. */
struct wake_result {
	double p50_us, p99_us, max_us;
	unsigned samples;
	unsigned parked_samples; /* samples before which the target had parked again */
	uint64_t parks, wakes_recv, wakes_sent; /* target / sender counter deltas */
};

/* Receiver-side counters of one cr_send throughput run. */
struct send_tp_stats {
	uint64_t eagain;     /* cr_send refusals the producer retried */
	uint64_t recv_parks; /* times the receiver parked */
	uint64_t recv_wakes; /* wakes it received */
	uint64_t recv_turns; /* its loop turns */
	uint64_t send_turns; /* the producer lcore's */
};

struct bench_results {
	const char *driver;
	double ring_mps[BENCH_N_BURSTS], cr_mps[BENCH_N_BURSTS]; /* medians of the rounds */
	double ring_mps_r[BENCH_N_BURSTS][BENCH_ROUNDS], cr_mps_r[BENCH_N_BURSTS][BENCH_ROUNDS];
	struct send_tp_stats cr_tp[BENCH_N_BURSTS];    /* summed over the rounds */
	double ring_rtt_ns, cr_rtt_ns, cr_call_rtt_ns; /* medians of the rounds */
	/* ours / raw: the median of each round's ratio, so that a slow spell of the machine
	 * that hits one round does not tilt the comparison */
	double tp_ratio[BENCH_N_BURSTS], rtt_ratio, call_rtt_ratio;
	double ring_rtt_r[BENCH_ROUNDS], cr_rtt_r[BENCH_ROUNDS], cr_call_rtt_r[BENCH_ROUNDS];
	struct wake_result wake_raw, wake, wake_foreign;
	double startstop_ms, init_ms, run_ms, fini_ms, startstop_msg_ms;
	double idle_cpu_pct;
	uint64_t idle_parks[2]; /* main, other */
};

/* ---- main.c: the watchdog ---- */

enum bench_phase {
	PHASE_RING_TP,
	PHASE_SEND_TP,
	PHASE_RING_RTT,
	PHASE_SEND_RTT,
	PHASE_WAKE_RAW,
	PHASE_WAKE,
	PHASE_WAKE_FOREIGN,
	PHASE_STARTSTOP,
	PHASE_IDLE,
	PHASE_ECHO_URING,
	PHASE_ECHO_EPOLL,
	PHASE_ECHO_CR,
	PHASE_COUNT,
};

/* The server process of the echo run in progress (0: none); the watchdog kills it. */
extern volatile sig_atomic_t bench_child_pid;

/* Enter @p p: if it is still running 60 s from now the process says so and exits 1. */
void bench_phase(enum bench_phase p);
/* Leave the current phase (disarm the watchdog). */
void bench_phase_end(void);

/* ---- bench_stats.c ---- */

/* Median of @p n > 0 doubles (@p v is left as it was). */
double bench_median(const double *v, unsigned n);
/* Median over i of @p ours[i] / @p raw[i] (0 if a raw figure is 0). */
double bench_median_ratio(const double *ours, const double *raw, unsigned n);
/* Sort @p v (n > 0) in place and return the nearest-rank @p pct percentile. */
uint64_t bench_percentile(uint64_t *v, unsigned n, unsigned pct);
/* Fill @p out from @p lat_ns (n > 0 latencies, sorted in place). */
void bench_wake_summary(struct wake_result *out, uint64_t *lat_ns, unsigned n);
/* Spin-wait hint. */
void bench_relax(void);
/* nanosleep(2) for @p ns. */
void bench_sleep_ns(uint64_t ns);
/*
 * Poll (sleeping 20 us between looks) until @p *count >= @p want, for at most 1 s.
 * Acquire: pairs with the release store of whoever counts. @return false on time-out.
 */
bool bench_wait_count(_Atomic unsigned *count, unsigned want);
/* NUMA node of lcore @p lcore of the run (-1 if unknown). */
int bench_numa(const struct bench_env *env, unsigned lcore);

/* ---- bench_ring.c: the raw peer ---- */

int bench_ring_throughput(const struct bench_env *env, unsigned burst, double *mps);
int bench_ring_rtt(const struct bench_env *env, double *rtt_ns);
int bench_wake_raw(const struct bench_env *env, struct wake_result *out);

/* ---- bench_runtime.c: our runtime up and down ---- */

/*
 * Bring the two-lcore runtime up, run @p start(@p arg) on the main lcore in its first
 * turn, run the main loop until something calls cr_reactor_stop(), then tear down.
 * @p stats (may be NULL) receives the counters of {main, other} as the loop ended.
 * @return 0 or the -errno of cr_reactor_init() (one line printed).
 */
int bench_runtime(const struct bench_env *env, cr_msg_fn start, void *arg,
		  struct cr_lcore_stats stats[2]);
/* Name of the io driver the runtime ran with (NULL before the first bench_runtime()). */
const char *bench_runtime_driver(void);
int bench_startstop(const struct bench_env *env, struct bench_results *res);
int bench_idle(const struct bench_env *env, struct bench_results *res);

/* ---- bench_send.c: cr_send handoff ---- */

int bench_send_throughput(const struct bench_env *env, unsigned burst, double *mps,
			  struct send_tp_stats *st);
int bench_send_rtt(const struct bench_env *env, double *rtt_ns);
int bench_call_rtt(const struct bench_env *env, double *rtt_ns);

/* ---- bench_wake.c ---- */

int bench_wake_lcore(const struct bench_env *env, struct wake_result *out);
int bench_wake_foreign(const struct bench_env *env, struct wake_result *out);

/* ---- bench_proc.c: server processes ---- */

#define BENCH_READY_MS 5000

/* One server process. */
struct bench_proc {
	pid_t pid;
	int out;       /* read end of its stdout */
	unsigned port; /* from its ready line */
};

uint64_t bench_now_ns(void);
/* The directory of this executable. */
int bench_exe_dir(char *dir, size_t len);
/* This executable's path (the echo mode starts its raw servers from it). */
int bench_self_path(char *path, size_t len);
/* cr-echo: $CR_BENCH_ECHO (usertools/cr-bench sets it), else ../cr-echo/cr-echo. */
int bench_echo_path(char *path, size_t len);
/* Fork and exec @p path pinned to @p cpus, stdout on a pipe, killed if we die. */
int bench_proc_spawn(struct bench_proc *s, const char *path, char *const argv[],
		     const cpu_set_t *cpus);
/* Read stdout up to the "listening on HOST:PORT" line (kept in @p line); set s->port. */
int bench_proc_ready(struct bench_proc *s, char *line, size_t len);
void bench_proc_stop(struct bench_proc *s);
/* utime + stime of @p pid, in clock ticks. */
int bench_proc_ticks(pid_t pid, uint64_t *ticks);
bool bench_proc_alive(pid_t pid);

/* ---- bench_resize.c ---- */

int bench_resize_run(const struct bench_env *env);

/* ---- bench_echo.c, bench_echo_servers.c: the echo mode ---- */

/* cr-echo on one lcore vs a minimal liburing and a minimal epoll echo loop. */
int bench_echo_run(const struct bench_env *env);
/* bench_relay.c: the relay mode (splice vs copy, CPU per GB). */
int bench_relay_run(const struct bench_env *env);
/* `cr-bench echo-server-uring|echo-server-epoll PORT`: serve until killed. @return exit
 * status (1 set-up failed, 2 bad PORT). */
int bench_echo_server_uring(const char *port);
int bench_echo_server_epoll(const char *port);

/* ---- bench_report.c ---- */

void bench_report_table(const struct bench_env *env, const struct bench_results *res);
void bench_report_json(const struct bench_env *env, const struct bench_results *res);

/* ---- the handler every throughput run counts with, raw or ours ---- */

/*
 * Receiver-side count; one cache line, written only by the receiving thread. The same
 * handler runs behind the raw ring and behind cr_send, so the per-message work is equal.
 */
struct bench_counter {
	_Alignas(64) uint64_t n;
	uint64_t target;
	uint64_t t_first, t_last;
	void (*on_done)(struct bench_counter *c); /* on the receiver, at the last message */
};

void bench_count_msg(void *arg);

/* Million messages per second from a counter that saw all of its target. */
double bench_counter_mps(const struct bench_counter *c);

#endif /* CR_BENCH_H */
