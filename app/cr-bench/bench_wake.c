/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Wake latency of a parked lcore: the sender leaves the target idle for 2 ms — long past
 * its spin budget, so it parks — then sends one message stamped with the clock; the
 * handler on the target records how long the message took to run. Two senders: the
 * other lcore (the wake rides on its end-of-turn submit: MSG_RING with uring, an eventfd
 * write with epoll) and a thread that is not an lcore (always an eventfd write).
 *
 * Before each sample the sender reads the target's park counter: a sample counts as
 * "parked" when the target parked again since the previous one, which is what shows that
 * the figure is a wake from sleep and not a spin hit.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"

struct wake_run;

struct wake_sample {
	uint64_t stamp; /* by the sender, before cr_send */
	uint64_t lat;	/* by the target's handler */
	struct wake_run *w;
};

struct wake_run {
	const struct bench_env *env;
	struct cr_timer timer; /* lcore sender: the gap between samples */
	void *thread;	       /* foreign sender */
	unsigned sent;	       /* sender only */
	uint64_t last_parks;   /* sender only: the target's parks at the previous sample */
	unsigned parked;       /* sender only */
	_Atomic unsigned got;  /* samples handled: written by the target (release) */
	_Atomic int err;
	struct cr_lcore_stats s0[2], s1[2]; /* {main, other} after warm-up, at the end */
	struct wake_sample s[BENCH_WAKE_TOTAL];
};

static void
snapshot(const struct bench_env *env, struct cr_lcore_stats s[2])
{
	cr_lcore_stats(env->main, &s[0]);
	cr_lcore_stats(env->other, &s[1]);
}

static void
wake_fail(struct wake_run *w, const char *what, int rc)
{
	int none = 0;

	if (atomic_compare_exchange_strong(&w->err, &none, rc))
		fprintf(stderr, "cr-bench: %s: %s\n", what, cr_strerror(rc));
	cr_reactor_stop();
}

/* On the target lcore. */
static void
wake_recv(void *arg)
{
	struct wake_sample *s = arg;
	struct wake_run *w = s->w;
	unsigned got;

	s->lat = cr_clock_ns() - s->stamp;
	/* Only this lcore writes the count; release: pairs with bench_wait_count(). */
	got = atomic_load_explicit(&w->got, memory_order_relaxed) + 1;
	atomic_store_explicit(&w->got, got, memory_order_release);
	if (got == BENCH_WAKE_TOTAL) {
		snapshot(w->env, w->s1);
		cr_reactor_stop();
	}
}

/* Account for the sample about to go and fill it in; the caller sends it next. */
static struct wake_sample *
next_sample(struct wake_run *w)
{
	struct cr_lcore_stats st;
	struct wake_sample *s;

	if (w->sent == BENCH_WAKE_WARMUP)
		snapshot(w->env, w->s0);
	cr_lcore_stats(w->env->other, &st);
	/* Every recorded sample has a warm-up one before it to compare with. */
	if (w->sent >= BENCH_WAKE_WARMUP && st.parks > w->last_parks)
		w->parked++;
	w->last_parks = st.parks;
	s = &w->s[w->sent++];
	s->w = w;
	s->stamp = cr_clock_ns();
	return s;
}

static int
finish(struct wake_run *w, struct wake_result *out)
{
	uint64_t lat[BENCH_WAKE_SAMPLES];
	unsigned i;
	int rc = atomic_load(&w->err);

	if (rc != 0)
		return rc;
	if (atomic_load(&w->got) != BENCH_WAKE_TOTAL) {
		fprintf(stderr, "cr-bench: %u of %u wake samples arrived\n", atomic_load(&w->got),
			BENCH_WAKE_TOTAL);
		return -EIO;
	}
	for (i = 0; i < BENCH_WAKE_SAMPLES; i++)
		lat[i] = w->s[BENCH_WAKE_WARMUP + i].lat;
	memset(out, 0, sizeof(*out));
	bench_wake_summary(out, lat, BENCH_WAKE_SAMPLES);
	out->parked_samples = w->parked;
	out->parks = w->s1[1].parks - w->s0[1].parks;
	out->wakes_recv = w->s1[1].wakes_recv - w->s0[1].wakes_recv;
	out->wakes_sent = w->s1[0].wakes_sent - w->s0[0].wakes_sent;
	return 0;
}

/* ---- sender: the main lcore, a timer between samples ---- */

static void
lcore_tick(struct cr_timer *t, void *arg)
{
	struct wake_run *w = arg;
	int rc;

	rc = cr_send(w->env->other, wake_recv, next_sample(w));
	if (rc != 0) {
		wake_fail(w, "cr_send", rc);
		return;
	}
	/* The target stops the runtime when the last sample has run. */
	if (w->sent < BENCH_WAKE_TOTAL)
		cr_timer_start(t, BENCH_WAKE_GAP_NS);
}

static void
lcore_start(void *arg)
{
	struct wake_run *w = arg;

	cr_timer_init(&w->timer, lcore_tick, w);
	cr_timer_start(&w->timer, BENCH_WAKE_GAP_NS);
}

/* ---- sender: a thread that is not an lcore ---- */

#define FOREIGN_EAGAIN_TRIES 1000

static int
foreign_send(struct wake_run *w)
{
	struct wake_sample *s = next_sample(w);
	unsigned tries;
	int rc;

	/* The foreign ring is empty between samples; -EAGAIN would be a library bug. */
	for (tries = 0; tries < FOREIGN_EAGAIN_TRIES; tries++) {
		rc = cr_send(w->env->other, wake_recv, s);
		if (rc != -EAGAIN)
			break;
		bench_sleep_ns(1000);
	}
	return rc;
}

static void *
foreign_thread(void *arg)
{
	struct wake_run *w = arg;
	int rc;

	while (w->sent < BENCH_WAKE_TOTAL) {
		bench_sleep_ns(BENCH_WAKE_GAP_NS);
		rc = foreign_send(w);
		if (rc != 0) {
			wake_fail(w, "cr_send from a foreign thread", rc);
			return NULL;
		}
		if (!bench_wait_count(&w->got, w->sent)) {
			wake_fail(w, "waiting for a wake sample", -ETIMEDOUT);
			return NULL;
		}
	}
	return NULL;
}

/* The sender thread shares the main lcore's CPU: that lcore has nothing to do and parks. */
static void
foreign_start(void *arg)
{
	struct wake_run *w = arg;
	int rc;

	rc = cr_thread_create(&w->thread, w->env->main, "bench-foreign", foreign_thread, w);
	if (rc != 0) {
		w->thread = NULL;
		wake_fail(w, "starting the foreign sender", rc);
	}
}

static int
run_wake(const struct bench_env *env, cr_msg_fn start, struct wake_result *out)
{
	struct wake_run *w;
	int rc;

	w = cr_numa_zalloc(sizeof(*w), -1);
	if (w == NULL)
		return -ENOMEM;
	w->env = env;
	rc = bench_runtime(env, start, w, NULL);
	if (w->thread != NULL)
		cr_thread_join(w->thread);
	if (rc == 0)
		rc = finish(w, out);
	cr_numa_free(w);
	return rc;
}

int
bench_wake_lcore(const struct bench_env *env, struct wake_result *out)
{
	return run_wake(env, lcore_start, out);
}

int
bench_wake_foreign(const struct bench_env *env, struct wake_result *out)
{
	return run_wake(env, foreign_start, out);
}
