/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cr-proxy's Prometheus series: the connect-time histogram, and per backend (a label whose
 * values are known only at run time, so a collector writes them at each scrape): up,
 * weight, sessions, connections, connect failures, bytes each way and the health-check
 * state, one series per state.
 */
#include <stdatomic.h>

#include "cr_telemetry.h"
#include "proxy.h"

int px_hist_connect = -1;

/* What the health checks make of a backend, as one 0/1 series per state. */
enum check_state {
	CHECK_UP,	 /* up, nothing failing */
	CHECK_FALLING,	 /* up, with failures in a row (fewer than --fall) */
	CHECK_DOWN,	 /* down, no check passed since */
	CHECK_RISING,	 /* down, with checks passed in a row (fewer than --rise) */
	CHECK_UNCHECKED, /* --check-interval 0: never marked */
	CHECK_N,
};

static const char *const check_names[CHECK_N] = {
    [CHECK_UP] = "up",
    [CHECK_FALLING] = "falling",
    [CHECK_DOWN] = "down",
    [CHECK_RISING] = "rising",
    [CHECK_UNCHECKED] = "unchecked",
};

static enum check_state
check_state(const struct px_slot *s)
{
	/* relaxed: a report; the fields are atomics the checks and lcores write */
	bool up = atomic_load_explicit(&s->up, memory_order_relaxed);

	if (!px_marking)
		return CHECK_UNCHECKED;
	if (up)
		return atomic_load_explicit(&s->fails, memory_order_relaxed) != 0 ? CHECK_FALLING
										   : CHECK_UP;
	return atomic_load_explicit(&s->oks, memory_order_relaxed) != 0 ? CHECK_RISING
									 : CHECK_DOWN;
}

/* The backends in the configuration: those a reload dropped keep their slot, not their
 * series. */
static bool
listed(const struct px_slot *s)
{
	return atomic_load_explicit(&s->in_config, memory_order_relaxed);
}

enum series { S_UP, S_WEIGHT, S_SESSIONS, S_CONNS, S_FAILS, S_IN, S_OUT, S_N };

static const struct {
	const char *family;
	enum cr_telemetry_kind kind;
	const char *help;
} series[S_N] = {
    [S_UP] = {"proxy_backend_up", CR_TELEMETRY_GAUGE, "1 when the backend takes sessions."},
    [S_WEIGHT] = {"proxy_backend_weight", CR_TELEMETRY_GAUGE, "The backend's weight."},
    [S_SESSIONS] = {"proxy_backend_sessions", CR_TELEMETRY_GAUGE,
		    "Server connections open or connecting."},
    [S_CONNS] = {"proxy_backend_connections", CR_TELEMETRY_COUNTER,
		 "Server connections established."},
    [S_FAILS] = {"proxy_backend_connect_failures", CR_TELEMETRY_COUNTER,
		 "Connects that failed (refused, timed out, ...)."},
    [S_IN] = {"proxy_backend_received_bytes", CR_TELEMETRY_COUNTER,
	      "Bytes received from the backend."},
    [S_OUT] = {"proxy_backend_sent_bytes", CR_TELEMETRY_COUNTER, "Bytes sent to the backend."},
};

static double
value(enum series k, const struct px_slot *s, const struct px_btotal *t)
{
	switch (k) {
	case S_UP:
		return atomic_load_explicit(&s->up, memory_order_relaxed);
	case S_WEIGHT:
		return atomic_load_explicit(&s->weight, memory_order_relaxed);
	case S_SESSIONS:
		return (double)t->active;
	case S_CONNS:
		return (double)t->conns;
	case S_FAILS:
		return (double)t->fails;
	case S_IN:
		return (double)t->bytes_in;
	default:
		return (double)t->bytes_out;
	}
}

static void
collect(struct cr_prom *p, void *arg)
{
	struct px_btotal t[PX_MAX_BACKENDS];
	unsigned n = px_backends_used(), i, k;

	(void)arg;
	for (i = 0; i < n; i++)
		px_backend_totals(i, &t[i]);
	for (k = 0; k < S_N; k++) {
		cr_prom_family(p, series[k].family, series[k].kind, series[k].help);
		for (i = 0; i < n; i++)
			if (listed(&px_slots[i]))
				cr_prom_sample(p, value(k, &px_slots[i], &t[i]), "backend",
					       px_slots[i].name, NULL);
	}
	cr_prom_family(p, "proxy_backend_check_state", CR_TELEMETRY_GAUGE,
		       "1 for the backend's health-check state (up, falling, down, rising, "
		       "unchecked), 0 for the others.");
	for (i = 0; i < n; i++) {
		enum check_state st;

		if (!listed(&px_slots[i]))
			continue;
		st = check_state(&px_slots[i]);
		for (k = 0; k < CHECK_N; k++)
			cr_prom_sample(p, st == k, "backend", px_slots[i].name, "state",
				       check_names[k], NULL);
	}
}

int
px_metrics_register(void)
{
	px_hist_connect = cr_telemetry_histogram_register(
	    "proxy_connect_duration_seconds",
	    "Time from a backend connect started to established (connects that failed are "
	    "not in it).",
	    NULL, 0);
	if (px_hist_connect < 0)
		return px_hist_connect;
	return cr_telemetry_prom_register(collect, NULL);
}
