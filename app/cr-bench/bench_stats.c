/* SPDX-License-Identifier: BSD-3-Clause */
/* Small shared pieces: the counting handler, percentiles, the spin hint. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

const unsigned bench_bursts[BENCH_N_BURSTS] = {1, 32};

void
bench_count_msg(void *arg)
{
	struct bench_counter *c = arg;

	/* Timed on the receiver from the first message to the last: producer start-up and
	 * the consumer's first cache misses stay out of the figure. */
	if (c->n == 0)
		c->t_first = cr_clock_ns();
	if (++c->n == c->target) {
		c->t_last = cr_clock_ns();
		if (c->on_done != NULL)
			c->on_done(c);
	}
}

double
bench_counter_mps(const struct bench_counter *c)
{
	uint64_t dt = c->t_last - c->t_first;

	/* n - 1 intervals lie between the first and the last timestamp. */
	if (c->n < 2 || dt == 0)
		return 0.0;
	return (double)(c->n - 1) * 1e3 / (double)dt;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double
bench_median(const double *v, unsigned n)
{
	double s[BENCH_ROUNDS * 4];

	if (n > sizeof(s) / sizeof(s[0]))
		n = sizeof(s) / sizeof(s[0]);
	memcpy(s, v, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

double
bench_median_ratio(const double *ours, const double *raw, unsigned n)
{
	double r[BENCH_ROUNDS * 4];
	unsigned i;

	if (n > sizeof(r) / sizeof(r[0]))
		n = sizeof(r) / sizeof(r[0]);
	for (i = 0; i < n; i++)
		r[i] = raw[i] > 0 ? ours[i] / raw[i] : 0.0;
	return bench_median(r, n);
}

uint64_t
bench_percentile(uint64_t *v, unsigned n, unsigned pct)
{
	unsigned rank;

	qsort(v, n, sizeof(*v), cmp_u64);
	/* Nearest rank: the smallest value with at least pct% of the samples at or below. */
	rank = (unsigned)(((uint64_t)n * pct + 99) / 100);
	return v[rank == 0 ? 0 : rank - 1];
}

void
bench_wake_summary(struct wake_result *out, uint64_t *lat_ns, unsigned n)
{
	out->samples = n;
	out->p50_us = (double)bench_percentile(lat_ns, n, 50) / 1e3;
	out->p99_us = (double)bench_percentile(lat_ns, n, 99) / 1e3;
	out->max_us = (double)lat_ns[n - 1] / 1e3;
}

void
bench_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield");
#endif
}

int
bench_numa(const struct bench_env *env, unsigned lcore)
{
	unsigned i;

	for (i = 0; i < env->table.n; i++)
		if (env->table.lcores[i].lcore_id == lcore)
			return env->table.lcores[i].numa_node;
	return -1;
}

void
bench_sleep_ns(uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};

	nanosleep(&ts, NULL);
}

#define COUNT_POLL_NS (20 * 1000)
#define COUNT_POLLS   50000

bool
bench_wait_count(_Atomic unsigned *count, unsigned want)
{
	unsigned polls;

	for (polls = 0; polls < COUNT_POLLS; polls++) {
		if (atomic_load_explicit(count, memory_order_acquire) >= want)
			return true;
		bench_sleep_ns(COUNT_POLL_NS);
	}
	return false;
}
