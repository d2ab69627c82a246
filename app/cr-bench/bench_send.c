/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cr_send handoff between the two lcores: throughput at a given sender burst, and the
 * round trip of one message bounced back and forth (with cr_send and with cr_call).
 *
 * The sender is a task that sends, then defers itself, so every step is one loop turn.
 * Burst 1 is a loop of single cr_send() calls, up to 256 per turn — the counterpart of the
 * raw peer's loop of single-element enqueues; cr_send batches them itself (an outbox
 * flushed at 16 or at the end of the turn, doc/guides/design.md rule 7). A burst above 1 is one
 * cr_send_burst() call per turn: one admission and one wake check per burst, written
 * straight into the ring, as the raw peer enqueues its burst in one call.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"

/* ---- throughput ---- */

struct send_tp {
	const struct bench_env *env;
	unsigned burst;
	uint64_t sent, n;
	uint64_t eagain;
	int err;
	struct cr_lcore_stats s0[2];
	struct bench_counter cnt; /* the receiver's, on its own line */
};

static void
tp_fail(struct send_tp *p, const char *what, int rc)
{
	if (p->err == 0) {
		fprintf(stderr, "cr-bench: %s: %s\n", what, cr_strerror(rc));
		p->err = rc;
	}
	cr_reactor_stop();
}

static void
tp_done(struct bench_counter *c)
{
	(void)c;
	cr_reactor_stop();
}

/* One turn's worth of sending, on the main lcore. */
static void
tp_step(void *arg)
{
	struct send_tp *p = arg;
	unsigned i;
	int rc;

	if (p->burst > 1) {
		struct cr_msg m[64];
		unsigned k = p->burst < 64 ? p->burst : 64;

		if (p->n - p->sent < k)
			k = (unsigned)(p->n - p->sent);
		for (i = 0; i < k; i++) {
			m[i].fn = bench_count_msg;
			m[i].arg = &p->cnt;
		}
		rc = cr_send_burst(p->env->other, m, k);
		if (rc > 0)
			p->sent += (unsigned)rc;
		else if (rc == -EAGAIN)
			p->eagain++;
		else {
			tp_fail(p, "cr_send_burst", rc);
			return;
		}
		i = p->burst; /* skip the single-message loop */
	} else {
		i = 0;
	}
	for (; i < 256 && p->sent < p->n; i++) {
		rc = cr_send(p->env->other, bench_count_msg, &p->cnt);
		if (rc == -EAGAIN) {
			/* The mailbox is full: the receiver drains it while we end the turn. */
			p->eagain++;
			break;
		}
		if (rc != 0) {
			tp_fail(p, "cr_send", rc);
			return;
		}
		p->sent++;
	}
	if (p->sent < p->n) {
		rc = cr_defer(tp_step, p);
		if (rc != 0)
			tp_fail(p, "cr_defer", rc);
	}
}

static void
tp_start(void *arg)
{
	struct send_tp *p = arg;

	cr_lcore_stats(p->env->main, &p->s0[0]);
	cr_lcore_stats(p->env->other, &p->s0[1]);
	tp_step(p);
}

int
bench_send_throughput(const struct bench_env *env, unsigned burst, double *mps,
		      struct send_tp_stats *st)
{
	struct cr_lcore_stats s1[2];
	struct send_tp *p;
	int rc;

	p = cr_numa_zalloc(sizeof(*p), -1);
	if (p == NULL)
		return -ENOMEM;
	p->env = env;
	p->burst = burst;
	p->n = env->messages;
	p->cnt.target = env->messages;
	p->cnt.on_done = tp_done;
	rc = bench_runtime(env, tp_start, p, s1);
	if (rc == 0)
		rc = p->err;
	if (rc == 0 && p->cnt.n != p->n) {
		fprintf(stderr, "cr-bench: cr_send burst %u: %llu of %llu messages arrived\n",
			burst, (unsigned long long)p->cnt.n, (unsigned long long)p->n);
		rc = -EIO;
	}
	if (rc == 0) {
		*mps = bench_counter_mps(&p->cnt);
		st->eagain = p->eagain;
		st->recv_parks = s1[1].parks - p->s0[1].parks;
		st->recv_wakes = s1[1].wakes_recv - p->s0[1].wakes_recv;
		st->recv_turns = s1[1].turns - p->s0[1].turns;
		st->send_turns = s1[0].turns - p->s0[0].turns;
	}
	cr_numa_free(p);
	return rc;
}

/* ---- round trip ---- */

struct send_rtt {
	const struct bench_env *env;
	unsigned i, batch; /* round trips in this batch; batches done (0 = warm-up) */
	uint64_t t0;
	int err;
	struct cr_call call;
	uint64_t batch_ns[BENCH_RTT_BATCHES];
};

static void
rtt_fail(struct send_rtt *r, const char *what, int rc)
{
	if (r->err == 0) {
		fprintf(stderr, "cr-bench: %s: %s\n", what, cr_strerror(rc));
		r->err = rc;
	}
	cr_reactor_stop();
}

/* Count one round trip on the main lcore. @return true when the run is over. */
static bool
rtt_lap(struct send_rtt *r)
{
	uint64_t now;

	if (++r->i < BENCH_RTT_BATCH)
		return false;
	now = cr_clock_ns();
	if (r->batch > 0)
		r->batch_ns[r->batch - 1] = now - r->t0;
	r->t0 = now;
	r->i = 0;
	if (++r->batch > BENCH_RTT_BATCHES) {
		cr_reactor_stop();
		return true;
	}
	return false;
}

static void rtt_pong(void *arg);

/* On the other lcore. */
static void
rtt_ping(void *arg)
{
	struct send_rtt *r = arg;
	int rc = cr_send(r->env->main, rtt_pong, r);

	if (rc != 0)
		rtt_fail(r, "cr_send", rc);
}

/* On the main lcore. */
static void
rtt_pong(void *arg)
{
	struct send_rtt *r = arg;
	int rc;

	if (rtt_lap(r))
		return;
	rc = cr_send(r->env->other, rtt_ping, r);
	if (rc != 0)
		rtt_fail(r, "cr_send", rc);
}

static void
rtt_start(void *arg)
{
	struct send_rtt *r = arg;
	int rc;

	r->t0 = cr_clock_ns();
	rc = cr_send(r->env->other, rtt_ping, r);
	if (rc != 0)
		rtt_fail(r, "cr_send", rc);
}

static void
call_noop(void *arg)
{
	(void)arg;
}

static void
call_done(void *arg)
{
	struct send_rtt *r = arg;
	int rc;

	if (rtt_lap(r))
		return;
	/* The call is finished with @c r->call once this runs, so it can carry the next. */
	rc = cr_call(r->env->other, &r->call, call_noop, NULL, call_done, r);
	if (rc != 0)
		rtt_fail(r, "cr_call", rc);
}

static void
call_start(void *arg)
{
	struct send_rtt *r = arg;
	int rc;

	r->t0 = cr_clock_ns();
	rc = cr_call(r->env->other, &r->call, call_noop, NULL, call_done, r);
	if (rc != 0)
		rtt_fail(r, "cr_call", rc);
}

static int
run_rtt(const struct bench_env *env, cr_msg_fn start, double *rtt_ns)
{
	struct send_rtt *r;
	int rc;

	r = cr_numa_zalloc(sizeof(*r), -1);
	if (r == NULL)
		return -ENOMEM;
	r->env = env;
	rc = bench_runtime(env, start, r, NULL);
	if (rc == 0)
		rc = r->err;
	if (rc == 0)
		*rtt_ns =
		    (double)bench_percentile(r->batch_ns, BENCH_RTT_BATCHES, 50) / BENCH_RTT_BATCH;
	cr_numa_free(r);
	return rc;
}

int
bench_send_rtt(const struct bench_env *env, double *rtt_ns)
{
	return run_rtt(env, rtt_start, rtt_ns);
}

int
bench_call_rtt(const struct bench_env *env, double *rtt_ns)
{
	return run_rtt(env, call_start, rtt_ns);
}
