/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Histograms of durations: bounds registered once, buckets per lcore (written only by
 * their lcore, in cr_telemetry_observe_ns()), summed over the lcores when telemetry reads
 * them: /histograms in JSON, coreact_<name>_bucket / _sum / _count in Prometheus.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "telemetry_internal.h"

/* clang-format off */
const uint64_t cr_telemetry_latency_bounds_ns[CR_TELEMETRY_LATENCY_N_BOUNDS] = {
	5000, 10000, 25000, 50000, 100000, 250000, 500000,		/* 5 us .. 500 us */
	1000000, 2500000, 5000000, 10000000, 25000000, 50000000,	/* 1 ms .. 50 ms */
	100000000, 250000000, 500000000,				/* 100 ms .. 500 ms */
	1000000000, 2500000000, 5000000000, 10000000000,		/* 1 s .. 10 s */
};
/* clang-format on */

struct cr__tel_hist_row cr__tel_hist_rows[CR_MAX_LCORES];
struct cr__tel_hist_def cr__tel_hist_defs[CR_TELEMETRY_MAX_HISTOGRAMS];
_Atomic unsigned cr__tel_n_hists;
static struct cr__tel_hist_meta metas[CR_TELEMETRY_MAX_HISTOGRAMS];

unsigned
cr__tel_n_histograms(void)
{
	/* acquire: pairs with the release in cr_telemetry_histogram_register() */
	return atomic_load_explicit(&cr__tel_n_hists, memory_order_acquire);
}

const struct cr__tel_hist_meta *
cr__tel_histogram(unsigned i)
{
	return &metas[i];
}

/* Under the registration lock. */
static int
find(const char *name)
{
	unsigned i, n = atomic_load_explicit(&cr__tel_n_hists, memory_order_relaxed);

	for (i = 0; i < n; i++)
		if (strcmp(metas[i].name, name) == 0)
			return (int)i;
	return -1;
}

bool
cr__tel_hist_taken(const char *name)
{
	return find(name) >= 0;
}

static bool
hist_name_ok(const char *name)
{
	size_t n;

	if (!cr__tel_name_ok(name, CR_TELEMETRY_NAME_LEN))
		return false;
	n = strlen(name);
	return n > strlen("_seconds") && strcmp(name + n - strlen("_seconds"), "_seconds") == 0;
}

int
cr_telemetry_histogram_register(const char *name, const char *help, const uint64_t *bounds,
				unsigned n)
{
	struct cr__tel_hist_def *d;
	unsigned i, k;
	int rc;

	if (bounds == NULL) {
		bounds = cr_telemetry_latency_bounds_ns;
		n = CR_TELEMETRY_LATENCY_N_BOUNDS;
	}
	if (!hist_name_ok(name) || n == 0 || n > CR_TELEMETRY_HIST_MAX_BOUNDS)
		return -EINVAL;
	for (i = 1; i < n; i++)
		if (bounds[i] <= bounds[i - 1])
			return -EINVAL;
	cr__tel_reg_lock();
	rc = find(name);
	if (rc >= 0) {
		d = &cr__tel_hist_defs[rc];
		if (d->n != n || memcmp(d->bounds, bounds, n * sizeof(bounds[0])) != 0)
			rc = -EEXIST;
		goto out_unlock;
	}
	if (cr__tel_family_taken(name)) {
		rc = -EEXIST;
		goto out_unlock;
	}
	k = atomic_load_explicit(&cr__tel_n_hists, memory_order_relaxed);
	if (k == CR_TELEMETRY_MAX_HISTOGRAMS) {
		rc = -ENOSPC;
		goto out_unlock;
	}
	d = &cr__tel_hist_defs[k];
	d->n = n;
	memcpy(d->bounds, bounds, n * sizeof(bounds[0]));
	snprintf(metas[k].name, sizeof(metas[k].name), "%s", name);
	snprintf(metas[k].help, sizeof(metas[k].help), "%s", help != NULL ? help : "");
	/* release: pairs with the acquire in cr_telemetry_observe_ns() and readers */
	atomic_store_explicit(&cr__tel_n_hists, k + 1, memory_order_release);
	rc = (int)k;
out_unlock:
	cr__tel_reg_unlock();
	return rc;
}

/* Add lcore @p lcore's row of histogram @p id into @p out. */
static void
add_row(struct cr_telemetry_hist_snap *out, unsigned lcore, int id)
{
	const _Atomic uint64_t *row = cr__tel_hist_rows[lcore].v[id];
	unsigned b;

	/* relaxed: pairs with the relaxed stores of cr__tel_bump() */
	for (b = 0; b <= out->n_bounds; b++)
		out->buckets[b] += atomic_load_explicit(&row[b], memory_order_relaxed);
	out->sum_ns += atomic_load_explicit(&row[CR__TEL_HIST_SUM], memory_order_relaxed);
}

int
cr_telemetry_histogram_read(int id, unsigned lcore, struct cr_telemetry_hist_snap *out)
{
	const struct cr__tel_hist_def *d;
	unsigned b;

	if (id < 0 || (unsigned)id >= cr__tel_n_histograms() || out == NULL ||
	    (lcore != CR_LCORE_NONE && lcore >= CR_MAX_LCORES))
		return -EINVAL;
	d = &cr__tel_hist_defs[id];
	memset(out, 0, sizeof(*out));
	out->n_bounds = d->n;
	memcpy(out->bounds_ns, d->bounds, d->n * sizeof(d->bounds[0]));
	if (lcore != CR_LCORE_NONE) {
		add_row(out, lcore, id);
	} else {
		/* Every lcore record, whatever its state: a retired lcore's counts stay. */
		for (unsigned i = cr__tel_lcore_next(CR_LCORE_NONE); i != CR_LCORE_NONE;
		     i = cr__tel_lcore_next(i))
			add_row(out, i, id);
	}
	/* The count is the buckets' sum, so that it always equals the +Inf bucket. */
	for (b = 0; b <= out->n_bounds; b++)
		out->count += out->buckets[b];
	return 0;
}

/* A bound in seconds as Prometheus wants it in "le": shortest exact decimal. */
static void
put_seconds(struct cr__tbuf *t, uint64_t ns)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%llu.%09llu", (unsigned long long)(ns / 1000000000),
			 (unsigned long long)(ns % 1000000000));

	while (n > 0 && buf[n - 1] == '0')
		n--;
	if (n > 0 && buf[n - 1] == '.')
		n--;
	cr__tbuf_put(t, buf, (size_t)n);
}

void
cr__prom_render_hists(struct cr__tbuf *t)
{
	struct cr_telemetry_hist_snap s;
	char name[CR_TELEMETRY_NAME_LEN + 16];
	unsigned i, b, n = cr__tel_n_histograms();

	for (i = 0; i < n; i++) {
		const struct cr__tel_hist_meta *m = &metas[i];
		uint64_t cum = 0;

		if (cr_telemetry_histogram_read((int)i, CR_LCORE_NONE, &s) != 0)
			continue;
		snprintf(name, sizeof(name), "coreact_%s", m->name);
		cr__prom_header(t, name, "histogram", m->help[0] != '\0' ? m->help : m->name);
		for (b = 0; b < s.n_bounds; b++) {
			cum += s.buckets[b];
			cr__tbuf_printf(t, "%s_bucket{le=\"", name);
			put_seconds(t, s.bounds_ns[b]);
			cr__tbuf_printf(t, "\"} %llu\n", (unsigned long long)cum);
		}
		cr__tbuf_printf(t, "%s_bucket{le=\"+Inf\"} %llu\n", name,
				(unsigned long long)s.count);
		cr__tbuf_printf(t, "%s_sum ", name);
		cr__prom_value(t, (double)s.sum_ns * 1e-9);
		cr__tbuf_printf(t, "\n%s_count %llu\n", name, (unsigned long long)s.count);
	}
}

int
cr__tel_cmd_histograms(const char *cmd, const char *params, struct cr_json *reply)
{
	struct cr_telemetry_hist_snap s;
	unsigned i, b, n = cr__tel_n_histograms();

	(void)cmd;
	if (params[0] != '\0')
		return cr_json_errorf(reply, -EINVAL, "takes no parameters, got '%s'", params);
	cr_json_object_begin(reply, NULL);
	for (i = 0; i < n; i++) {
		if (cr_telemetry_histogram_read((int)i, CR_LCORE_NONE, &s) != 0)
			continue;
		cr_json_object_begin(reply, metas[i].name);
		cr_json_u64(reply, "count", s.count);
		cr_json_u64(reply, "sum_ns", s.sum_ns);
		/* Per bucket, not cumulative: [upper bound in ns, values], null for +Inf. */
		cr_json_array_begin(reply, "buckets");
		for (b = 0; b <= s.n_bounds; b++) {
			cr_json_array_begin(reply, NULL);
			if (b < s.n_bounds)
				cr_json_u64(reply, NULL, s.bounds_ns[b]);
			else
				cr_json_null(reply, NULL);
			cr_json_u64(reply, NULL, s.buckets[b]);
			cr_json_array_end(reply);
		}
		cr_json_array_end(reply);
		cr_json_object_end(reply);
	}
	cr_json_object_end(reply);
	return 0;
}
