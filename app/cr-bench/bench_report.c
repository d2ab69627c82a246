/* SPDX-License-Identifier: BSD-3-Clause */
/* The two outputs: a table for people, one JSON object for scripts. Same figures in both. */
#include <stdio.h>

#include "bench.h"

/* The targets. "~0 % idle CPU" is read as at most 1 % of one CPU. */
#define TARGET_TP_RATIO	    0.8
#define TARGET_RTT_RATIO    1.25
#define TARGET_WAKE_P99_US  20.0
#define TARGET_IDLE_PCT	    1.0
#define TARGET_STARTSTOP_MS 5.0

enum target_id {
	T_BURST1,
	T_BURST32,
	T_RTT,
	T_WAKE,
	T_WAKE_FOREIGN,
	T_STARTSTOP,
	T_IDLE,
	T_COUNT,
};

static const char *const target_keys[] = {
    [T_BURST1] = "cr_burst1",
    [T_BURST32] = "cr_burst32",
    [T_RTT] = "cr_rtt",
    [T_WAKE] = "wake_p99",
    [T_WAKE_FOREIGN] = "wake_foreign_p99",
    [T_STARTSTOP] = "startstop",
    [T_IDLE] = "idle_cpu",
};
_Static_assert(sizeof(target_keys) / sizeof(target_keys[0]) == T_COUNT, "one key per target");

static double
ratio(double ours, double raw)
{
	return raw > 0 ? ours / raw : 0.0;
}

static void
targets_met(const struct bench_results *r, bool met[T_COUNT])
{
	met[T_BURST1] = r->tp_ratio[0] >= TARGET_TP_RATIO;
	met[T_BURST32] = r->tp_ratio[1] >= TARGET_TP_RATIO;
	met[T_RTT] = r->rtt_ratio > 0 && r->rtt_ratio <= TARGET_RTT_RATIO;
	met[T_WAKE] = r->wake.p99_us <= TARGET_WAKE_P99_US;
	met[T_WAKE_FOREIGN] = r->wake_foreign.p99_us <= TARGET_WAKE_P99_US;
	met[T_STARTSTOP] = r->startstop_ms <= TARGET_STARTSTOP_MS;
	met[T_IDLE] = r->idle_cpu_pct <= TARGET_IDLE_PCT;
}

/* ---- table ---- */

#define ROW_FMT "%-34s %10s %10s %7s  %-16s %s\n"

static void
row(const char *metric, const char *raw, const char *ours, const char *ratio_s, const char *target,
    const char *verdict)
{
	printf(ROW_FMT, metric, raw, ours, ratio_s, target, verdict);
}

/*
 * A row with a raw figure, ours and @p rat (ours / raw); @p prec digits after the point.
 * @p verdict: 1 met, 0 missed, -1 no target.
 */
static void
row_vs(const char *metric, double raw, double ours, double rat, int prec, const char *target,
       int verdict)
{
	char a[32], b[32], c[32];

	snprintf(a, sizeof(a), "%.*f", prec, raw);
	snprintf(b, sizeof(b), "%.*f", prec, ours);
	snprintf(c, sizeof(c), "%.2f", rat);
	row(metric, a, b, c, target, verdict < 0 ? "" : verdict ? "met" : "MISSED");
}

/* A row with our figure only. */
static void
row_ours(const char *metric, double ours, int prec, const char *target, bool met)
{
	char b[32];

	snprintf(b, sizeof(b), "%.*f", prec, ours);
	row(metric, "-", b, "-", target, met ? "met" : "MISSED");
}

void
bench_report_table(const struct bench_env *env, const struct bench_results *r)
{
	bool met[T_COUNT];
	unsigned b;

	targets_met(r, met);
	printf("cr-bench handoff: lcore %u (main) -> lcore %u, io driver %s%s\n\n", env->main,
	       env->other, r->driver != NULL ? r->driver : "?",
	       cr_eal_is_vm() ? " (under a hypervisor)" : "");
	if (env->cfg.poll_mode)
		printf("--poll-mode: lcores never park, so the wake rows measure a spinning "
		       "target\n\n");
	row("metric", "raw peer", "coreact", "ratio", "target", "");
	row_vs("handoff, burst 1 (Mmsg/s)", r->ring_mps[0], r->cr_mps[0], r->tp_ratio[0], 2,
	       ">= 0.80 x raw", met[T_BURST1]);
	row_vs("handoff, burst 32 (Mmsg/s)", r->ring_mps[1], r->cr_mps[1], r->tp_ratio[1], 2,
	       ">= 0.80 x raw", met[T_BURST32]);
	row_vs("round trip, cr_send (ns)", r->ring_rtt_ns, r->cr_rtt_ns, r->rtt_ratio, 0,
	       "<= 1.25 x raw", met[T_RTT]);
	row_vs("round trip, cr_call (ns)", r->ring_rtt_ns, r->cr_call_rtt_ns, r->call_rtt_ratio, 0,
	       "-", -1);
	row_vs("wake parked lcore p50 (us)", r->wake_raw.p50_us, r->wake.p50_us,
	       ratio(r->wake.p50_us, r->wake_raw.p50_us), 1, "-", -1);
	row_vs("wake parked lcore p99 (us)", r->wake_raw.p99_us, r->wake.p99_us,
	       ratio(r->wake.p99_us, r->wake_raw.p99_us), 1, "<= 20 us", met[T_WAKE]);
	row_vs("wake from foreign thread p50 (us)", r->wake_raw.p50_us, r->wake_foreign.p50_us,
	       ratio(r->wake_foreign.p50_us, r->wake_raw.p50_us), 1, "-", -1);
	row_vs("wake from foreign thread p99 (us)", r->wake_raw.p99_us, r->wake_foreign.p99_us,
	       ratio(r->wake_foreign.p99_us, r->wake_raw.p99_us), 1, "<= 20 us",
	       met[T_WAKE_FOREIGN]);
	row_ours("start + stop, 2 lcores (ms)", r->startstop_ms, 2, "<= 5 ms", met[T_STARTSTOP]);
	row_ours("idle CPU (% of one CPU)", r->idle_cpu_pct, 2, "~0 (<= 1 %)", met[T_IDLE]);

	printf("\nHow it was measured:\n");
	printf("  raw peer: two threads pinned like the lcores, one SPSC rte_ring of %u (a mailbox "
	       "ring's size);\n  the consumer dequeues up to %u and calls each message's handler "
	       "(the same one cr_send runs).\n",
	       CR_MAILBOX_RING_SIZE, BENCH_RAW_DEQ);
	printf("  cr_send burst B: a task on the main lcore sends B messages and defers itself, "
	       "so each burst\n  is one loop turn; messages are flushed at %u per target or at "
	       "the end of the turn.\n",
	       CR_SEND_FLUSH);
	printf("  throughput: %llu messages, timed on the receiver from the first to the last. "
	       "round trip:\n  median of %u batches of %u round trips (batch time / %u). Raw and "
	       "ours take turns,\n  %u rounds each; a figure is the median of its rounds, a "
	       "throughput or round-trip\n  ratio the median of the rounds' ratios.\n",
	       (unsigned long long)env->messages, BENCH_RTT_BATCHES, BENCH_RTT_BATCH,
	       BENCH_RTT_BATCH, BENCH_ROUNDS);
	printf("  wake: %u samples, each after %u ms idle, stamped before cr_send, taken when the "
	       "handler runs;\n  raw peer: a thread blocked in read(2) on an eventfd, woken by a "
	       "write.\n",
	       BENCH_WAKE_SAMPLES, BENCH_WAKE_GAP_NS / 1000000);
	printf("\nCounters:\n");
	for (b = 0; b < BENCH_N_BURSTS; b++)
		printf("  cr_send burst %u: receiver parked %llu times, woke %llu, ran %llu turns; "
		       "sender ran %llu turns,\n    retried %llu times on -EAGAIN\n",
		       bench_bursts[b], (unsigned long long)r->cr_tp[b].recv_parks,
		       (unsigned long long)r->cr_tp[b].recv_wakes,
		       (unsigned long long)r->cr_tp[b].recv_turns,
		       (unsigned long long)r->cr_tp[b].send_turns,
		       (unsigned long long)r->cr_tp[b].eagain);
	printf("  wake from lcore: target had parked before %u of %u samples; it parked %llu "
	       "times, received\n    %llu wakes; the sender sent %llu; max %.1f us\n",
	       r->wake.parked_samples, r->wake.samples, (unsigned long long)r->wake.parks,
	       (unsigned long long)r->wake.wakes_recv, (unsigned long long)r->wake.wakes_sent,
	       r->wake.max_us);
	printf("  wake from foreign thread: target had parked before %u of %u samples; it parked "
	       "%llu times,\n    received %llu wakes; max %.1f us\n",
	       r->wake_foreign.parked_samples, r->wake_foreign.samples,
	       (unsigned long long)r->wake_foreign.parks,
	       (unsigned long long)r->wake_foreign.wakes_recv, r->wake_foreign.max_us);
	printf("  start + stop, median of %u: init %.2f ms, stop + run %.2f ms, fini %.2f ms; "
	       "stopped by a\n    message from the other lcore instead: %.2f ms\n",
	       BENCH_STARTSTOP_CYCLES, r->init_ms, r->run_ms, r->fini_ms, r->startstop_msg_ms);
	printf("  idle %u s: main lcore parked %llu times, the other %llu\n",
	       BENCH_IDLE_NS / 1000000000u, (unsigned long long)r->idle_parks[0],
	       (unsigned long long)r->idle_parks[1]);
}

/* ---- JSON ---- */

static void
json_num(const char *key, double v, int prec)
{
	printf(",\"%s\":%.*f", key, prec, v);
}

static void
json_u64(const char *key, uint64_t v)
{
	printf(",\"%s\":%llu", key, (unsigned long long)v);
}

static void
json_rounds(const char *key, const double *v, int prec)
{
	unsigned i;

	printf(",\"%s\":[", key);
	for (i = 0; i < BENCH_ROUNDS; i++)
		printf("%s%.*f", i == 0 ? "" : ",", prec, v[i]);
	printf("]");
}

static void
json_wake(const char *prefix, const struct wake_result *w)
{
	char key[64];

	snprintf(key, sizeof(key), "%s_p50_us", prefix);
	json_num(key, w->p50_us, 2);
	snprintf(key, sizeof(key), "%s_p99_us", prefix);
	json_num(key, w->p99_us, 2);
	snprintf(key, sizeof(key), "%s_max_us", prefix);
	json_num(key, w->max_us, 2);
	snprintf(key, sizeof(key), "%s_samples", prefix);
	json_u64(key, w->samples);
	snprintf(key, sizeof(key), "%s_parked_samples", prefix);
	json_u64(key, w->parked_samples);
	snprintf(key, sizeof(key), "%s_target_parks", prefix);
	json_u64(key, w->parks);
	snprintf(key, sizeof(key), "%s_target_wakes_recv", prefix);
	json_u64(key, w->wakes_recv);
}

void
bench_report_json(const struct bench_env *env, const struct bench_results *r)
{
	bool met[T_COUNT];
	char key[64];
	unsigned b, t;

	targets_met(r, met);
	printf("{\"mode\":\"handoff\",\"driver\":\"%s\"", r->driver != NULL ? r->driver : "");
	printf(",\"lcores\":[%u,%u],\"main_lcore\":%u,\"vm\":%s,\"poll_mode\":%s", env->main,
	       env->other, env->main, cr_eal_is_vm() ? "true" : "false",
	       env->cfg.poll_mode ? "true" : "false");
	json_u64("messages", env->messages);
	for (b = 0; b < BENCH_N_BURSTS; b++) {
		snprintf(key, sizeof(key), "ring_burst%u_mps", bench_bursts[b]);
		json_num(key, r->ring_mps[b], 3);
	}
	for (b = 0; b < BENCH_N_BURSTS; b++) {
		snprintf(key, sizeof(key), "cr_burst%u_mps", bench_bursts[b]);
		json_num(key, r->cr_mps[b], 3);
	}
	for (b = 0; b < BENCH_N_BURSTS; b++) {
		snprintf(key, sizeof(key), "ring_burst%u_mps_rounds", bench_bursts[b]);
		json_rounds(key, r->ring_mps_r[b], 3);
		snprintf(key, sizeof(key), "cr_burst%u_mps_rounds", bench_bursts[b]);
		json_rounds(key, r->cr_mps_r[b], 3);
		snprintf(key, sizeof(key), "cr_burst%u_eagain", bench_bursts[b]);
		json_u64(key, r->cr_tp[b].eagain);
		snprintf(key, sizeof(key), "cr_burst%u_recv_parks", bench_bursts[b]);
		json_u64(key, r->cr_tp[b].recv_parks);
		snprintf(key, sizeof(key), "cr_burst%u_recv_wakes", bench_bursts[b]);
		json_u64(key, r->cr_tp[b].recv_wakes);
	}
	for (b = 0; b < BENCH_N_BURSTS; b++) {
		snprintf(key, sizeof(key), "cr_burst%u_ratio", bench_bursts[b]);
		json_num(key, r->tp_ratio[b], 3);
	}
	json_num("ring_rtt_ns", r->ring_rtt_ns, 1);
	json_num("cr_rtt_ns", r->cr_rtt_ns, 1);
	json_num("cr_call_rtt_ns", r->cr_call_rtt_ns, 1);
	json_num("cr_rtt_ratio", r->rtt_ratio, 3);
	json_num("cr_call_rtt_ratio", r->call_rtt_ratio, 3);
	json_rounds("ring_rtt_ns_rounds", r->ring_rtt_r, 1);
	json_rounds("cr_rtt_ns_rounds", r->cr_rtt_r, 1);
	json_rounds("cr_call_rtt_ns_rounds", r->cr_call_rtt_r, 1);
	printf(",\"rtt_method\":\"per round trip: median over %u rounds of the median of %u "
	       "batches of %u\"",
	       BENCH_ROUNDS, BENCH_RTT_BATCHES, BENCH_RTT_BATCH);
	printf(",\"rounds\":%u", BENCH_ROUNDS);
	json_wake("wake", &r->wake);
	json_u64("wake_sender_wakes_sent", r->wake.wakes_sent);
	json_wake("wake_foreign", &r->wake_foreign);
	json_num("wake_raw_p50_us", r->wake_raw.p50_us, 2);
	json_num("wake_raw_p99_us", r->wake_raw.p99_us, 2);
	json_num("startstop_ms", r->startstop_ms, 3);
	json_num("startstop_init_ms", r->init_ms, 3);
	json_num("startstop_run_ms", r->run_ms, 3);
	json_num("startstop_fini_ms", r->fini_ms, 3);
	json_num("startstop_msg_ms", r->startstop_msg_ms, 3);
	json_num("idle_cpu_pct", r->idle_cpu_pct, 3);
	json_u64("idle_parks_main", r->idle_parks[0]);
	json_u64("idle_parks_other", r->idle_parks[1]);
	printf(",\"targets_met\":{");
	for (t = 0; t < T_COUNT; t++)
		printf("%s\"%s\":%s", t == 0 ? "" : ",", target_keys[t], met[t] ? "true" : "false");
	printf("}}\n");
}
