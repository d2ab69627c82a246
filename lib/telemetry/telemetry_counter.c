/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What telemetry counts: the reactor's per-lcore counters, the readers other libraries
 * register, and the app's counters and gauges in lcore-owned rows; and one lcore's
 * snapshot of all three.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "telemetry_internal.h"

struct cr__tel_row cr__tel_rows[CR_MAX_LCORES];

/* One row per field, as a table reads. */
/* clang-format off */
#define F(n, k, t, p, s, h) {#n, offsetof(struct cr_lcore_stats, n), k, t, p, s, h}
#define C CR_TELEMETRY_COUNTER
#define G CR_TELEMETRY_GAUGE

const struct cr__tel_field cr__tel_fields[] = {
	F(turns, C, true, "coreact_lcore_turns", 1, "Loop turns."),
	F(busy_ns, C, true, "coreact_lcore_busy_seconds", 1e-9, "Time in turns that did work."),
	F(idle_ns, C, true, "coreact_lcore_idle_seconds", 1e-9, "Time spent spinning or parked."),
	F(msgs_in, C, true, "coreact_lcore_msgs_in", 1, "Messages run from the mailbox."),
	F(msgs_out, C, true, "coreact_lcore_msgs_out", 1, "Messages sent to lcores."),
	F(deferred, C, true, "coreact_lcore_deferred", 1, "Deferred tasks run."),
	F(timers, C, true, "coreact_lcore_timers", 1, "Timers fired."),
	F(cqes, C, true, "coreact_lcore_cqes", 1, "Completions reaped."),
	F(wakes_sent, C, true, "coreact_lcore_wakes_sent", 1, "Wakes sent to parked lcores."),
	F(wakes_recv, C, true, "coreact_lcore_wakes_received", 1, "Wakes received."),
	F(parks, C, true, "coreact_lcore_parks", 1, "Times the lcore parked."),
	F(spin_hits, C, true, "coreact_lcore_spin_hits", 1, "Idle spins that found work."),
	F(spin_misses, C, true, "coreact_lcore_spin_misses", 1, "Idle spins that ended parked."),
	F(spin_budget_ns, G, false, "coreact_lcore_spin_budget_seconds", 1e-9,
	  "The last idle spin's budget (0: parked at once)."),
	F(spin_ns, C, true, "coreact_lcore_spin_seconds_total", 1e-9,
	  "Time spent spinning while idle: what the idle policy costs."),
	F(park_cost_ns, G, false, "coreact_lcore_park_cost_seconds", 1e-9,
	  "CPU a park and its wake cost on this lcore, measured at its start."),
	F(incarnation, G, false, "coreact_lcore_incarnation", 1, "Starts of the lcore."),
	F(mailbox_depth, G, true, "coreact_lcore_mailbox_depth", 1, "Messages queued in the mailbox."),
};
/* clang-format on */
const unsigned cr__tel_n_fields = sizeof(cr__tel_fields) / sizeof(cr__tel_fields[0]);

/* A counter the reactor adds must be added here too, or it would go unreported. */
_Static_assert(sizeof(cr__tel_fields) / sizeof(cr__tel_fields[0]) ==
		   sizeof(struct cr_lcore_stats) / sizeof(uint64_t),
	       "one field per member of struct cr_lcore_stats");

#undef F
#undef C
#undef G

/* Names the JSON object of an lcore uses besides the fields. */
static const char *const reserved[] = {"lcore", "cpu", "numa", "state", "app", "main"};

/*
 * Registration takes reg_lock; readers of the tables take none: an entry is complete
 * before the count that covers it is published (release), and never changes after. Under
 * reg_lock the counts are read relaxed: the lock holder is their only writer.
 */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cr__tel_entry counters[CR_TELEMETRY_MAX_COUNTERS];
static _Atomic unsigned n_counters;
static struct cr__tel_entry readers[CR_TELEMETRY_MAX_READERS];
static _Atomic unsigned n_readers;

unsigned
cr__tel_n_counters(void)
{
	/* acquire: pairs with the release in publish() */
	return atomic_load_explicit(&n_counters, memory_order_acquire);
}

const struct cr__tel_entry *
cr__tel_counter(unsigned i)
{
	return &counters[i];
}

unsigned
cr__tel_n_readers(void)
{
	/* acquire: pairs with the release in publish() */
	return atomic_load_explicit(&n_readers, memory_order_acquire);
}

const struct cr__tel_entry *
cr__tel_reader(unsigned i)
{
	return &readers[i];
}

void
cr__tel_reg_lock(void)
{
	pthread_mutex_lock(&reg_lock);
}

void
cr__tel_reg_unlock(void)
{
	pthread_mutex_unlock(&reg_lock);
}

bool
cr__tel_name_ok(const char *name, size_t max)
{
	size_t i, n;

	if (name == NULL)
		return false;
	n = strlen(name);
	if (n == 0 || n >= max || (name[0] >= '0' && name[0] <= '9'))
		return false;
	for (i = 0; i < n; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') ||
		      name[i] == '_'))
			return false;
	return true;
}

static bool
name_ok(const char *name)
{
	return cr__tel_name_ok(name, CR_TELEMETRY_NAME_LEN);
}

/* Under reg_lock. */
static const struct cr__tel_entry *
find_entry(const struct cr__tel_entry *tab, unsigned n, const char *name)
{
	unsigned i;

	for (i = 0; i < n; i++)
		if (strcmp(tab[i].name, name) == 0)
			return &tab[i];
	return NULL;
}

/* Under reg_lock: taken by a built-in field or a reserved key. */
static bool
builtin_name(const char *name)
{
	unsigned i;

	for (i = 0; i < cr__tel_n_fields; i++)
		if (strcmp(cr__tel_fields[i].name, name) == 0)
			return true;
	for (i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
		if (strcmp(reserved[i], name) == 0)
			return true;
	return false;
}

/* Families the Prometheus text has besides the registered ones, after "coreact_". */
static const char *const builtin_families[] = {"info", "lcore_state"};

/* Under reg_lock: @p family is the same as a built-in one's. */
static bool
builtin_family(const char *family)
{
	unsigned i;

	for (i = 0; i < cr__tel_n_fields; i++)
		if (strcmp(cr__tel_fields[i].prom + strlen("coreact_"), family) == 0)
			return true;
	for (i = 0; i < sizeof(builtin_families) / sizeof(builtin_families[0]); i++)
		if (strcmp(builtin_families[i], family) == 0)
			return true;
	return false;
}

/* Under reg_lock: the first entry, counters then readers, of @p family. */
static const struct cr__tel_entry *
find_family(const char *family)
{
	unsigned i, n = atomic_load_explicit(&n_counters, memory_order_relaxed);

	for (i = 0; i < n; i++)
		if (strcmp(counters[i].family, family) == 0)
			return &counters[i];
	n = atomic_load_explicit(&n_readers, memory_order_relaxed);
	for (i = 0; i < n; i++)
		if (strcmp(readers[i].family, family) == 0)
			return &readers[i];
	return NULL;
}

/* Under reg_lock: an entry of @p family has label value @p value. */
static bool
family_has_value(const char *family, const char *value)
{
	unsigned i, n = atomic_load_explicit(&n_counters, memory_order_relaxed);

	for (i = 0; i < n; i++)
		if (strcmp(counters[i].family, family) == 0 &&
		    strcmp(counters[i].label_value, value) == 0)
			return true;
	n = atomic_load_explicit(&n_readers, memory_order_relaxed);
	for (i = 0; i < n; i++)
		if (strcmp(readers[i].family, family) == 0 &&
		    strcmp(readers[i].label_value, value) == 0)
			return true;
	return false;
}

bool
cr__tel_family_taken(const char *family)
{
	return builtin_family(family) || find_family(family) != NULL;
}

static bool
label_ok(const char *label)
{
	static const char *const taken[] = {"lcore", "le", "quantile"};
	unsigned i;

	if (!cr__tel_name_ok(label, CR__TEL_LABEL_LEN) || strncmp(label, "__", 2) == 0)
		return false;
	for (i = 0; i < sizeof(taken) / sizeof(taken[0]); i++)
		if (strcmp(label, taken[i]) == 0)
			return false;
	return true;
}

/* The Prometheus name of a new entry, checked. Under reg_lock. */
struct prom_name {
	char family[CR__TEL_FAMILY_LEN];
	const char *label, *value;
};

static int
prom_name(const char *name, const char *dflt, enum cr_telemetry_kind kind,
	  const struct cr_telemetry_prom *prom, struct prom_name *out)
{
	const struct cr__tel_entry *e;

	out->label = "";
	out->value = "";
	if (prom == NULL || prom->family == NULL) {
		snprintf(out->family, sizeof(out->family), "%s_%s", dflt, name);
		if (prom == NULL || prom->label == NULL)
			goto check;
	} else {
		if (!cr__tel_name_ok(prom->family, CR__TEL_FAMILY_LEN))
			return -EINVAL;
		snprintf(out->family, sizeof(out->family), "%s", prom->family);
	}
	if (prom->label != NULL) {
		if (!label_ok(prom->label) || prom->label_value == NULL ||
		    strlen(prom->label_value) >= CR__TEL_LVALUE_LEN)
			return -EINVAL;
		out->label = prom->label;
		out->value = prom->label_value;
	}
check:
	if (builtin_family(out->family) || cr__tel_hist_taken(out->family))
		return -EEXIST;
	e = find_family(out->family);
	/* One family, one kind and one label name, each value once. */
	if (e != NULL && (e->kind != kind || e->label[0] == '\0' || out->label[0] == '\0' ||
			  strcmp(e->label, out->label) != 0 ||
			  family_has_value(out->family, out->value)))
		return -EEXIST;
	return 0;
}

/* Under reg_lock: fill the next entry of @p tab, then publish it. */
static void
publish(struct cr__tel_entry *tab, _Atomic unsigned *count, const char *name,
	enum cr_telemetry_kind kind, const char *help, const struct prom_name *pn,
	cr_telemetry_read_fn fn, void *arg)
{
	unsigned n = atomic_load_explicit(count, memory_order_relaxed);
	struct cr__tel_entry *e = &tab[n];

	snprintf(e->name, sizeof(e->name), "%s", name);
	snprintf(e->help, sizeof(e->help), "%s", help != NULL ? help : "");
	e->kind = kind;
	e->fn = fn;
	e->arg = arg;
	snprintf(e->family, sizeof(e->family), "%s", pn->family);
	snprintf(e->label, sizeof(e->label), "%s", pn->label);
	snprintf(e->label_value, sizeof(e->label_value), "%s", pn->value);
	/* release: pairs with the acquire in cr__tel_n_counters() / cr__tel_n_readers() */
	atomic_store_explicit(count, n + 1, memory_order_release);
}

int
cr_telemetry_counter_register_prom(const char *name, enum cr_telemetry_kind kind,
				   const char *help, const struct cr_telemetry_prom *prom)
{
	const struct cr__tel_entry *e;
	struct prom_name pn;
	unsigned n;
	int rc;

	if (!name_ok(name) || (kind != CR_TELEMETRY_COUNTER && kind != CR_TELEMETRY_GAUGE))
		return -EINVAL;
	pthread_mutex_lock(&reg_lock);
	n = atomic_load_explicit(&n_counters, memory_order_relaxed);
	e = find_entry(counters, n, name);
	if (e != NULL) {
		rc = e->kind == kind ? (int)(e - counters) : -EEXIST;
		goto out_unlock;
	}
	if (find_entry(readers, atomic_load_explicit(&n_readers, memory_order_relaxed), name) !=
		NULL ||
	    builtin_name(name)) {
		rc = -EEXIST;
		goto out_unlock;
	}
	if (n == CR_TELEMETRY_MAX_COUNTERS) {
		rc = -ENOSPC;
		goto out_unlock;
	}
	rc = prom_name(name, "app", kind, prom, &pn);
	if (rc != 0)
		goto out_unlock;
	publish(counters, &n_counters, name, kind, help, &pn, NULL, NULL);
	rc = (int)n;
out_unlock:
	pthread_mutex_unlock(&reg_lock);
	return rc;
}

int
cr_telemetry_counter_register(const char *name, enum cr_telemetry_kind kind, const char *help)
{
	return cr_telemetry_counter_register_prom(name, kind, help, NULL);
}

int
cr_telemetry_reader_register_prom(const char *name, enum cr_telemetry_kind kind,
				  const char *help, const struct cr_telemetry_prom *prom,
				  cr_telemetry_read_fn fn, void *arg)
{
	struct prom_name pn;
	unsigned n;
	int rc = 0;

	if (!name_ok(name) || fn == NULL ||
	    (kind != CR_TELEMETRY_COUNTER && kind != CR_TELEMETRY_GAUGE))
		return -EINVAL;
	pthread_mutex_lock(&reg_lock);
	n = atomic_load_explicit(&n_readers, memory_order_relaxed);
	if (find_entry(readers, n, name) != NULL ||
	    find_entry(counters, atomic_load_explicit(&n_counters, memory_order_relaxed), name) !=
		NULL ||
	    builtin_name(name)) {
		rc = -EEXIST;
		goto out_unlock;
	}
	if (n == CR_TELEMETRY_MAX_READERS) {
		rc = -ENOSPC;
		goto out_unlock;
	}
	rc = prom_name(name, "lcore", kind, prom, &pn);
	if (rc != 0)
		goto out_unlock;
	publish(readers, &n_readers, name, kind, help, &pn, fn, arg);
out_unlock:
	pthread_mutex_unlock(&reg_lock);
	return rc;
}

int
cr_telemetry_reader_register(const char *name, enum cr_telemetry_kind kind, const char *help,
			     cr_telemetry_read_fn fn, void *arg)
{
	return cr_telemetry_reader_register_prom(name, kind, help, NULL, fn, arg);
}

int
cr_telemetry_counter_read(int id, unsigned lcore, uint64_t *out)
{
	if (id < 0 || (unsigned)id >= cr__tel_n_counters() || lcore >= CR_MAX_LCORES || out == NULL)
		return -EINVAL;
	/* relaxed: pairs with the relaxed store in cr_telemetry_add() */
	*out = atomic_load_explicit(&cr__tel_rows[lcore].v[id], memory_order_relaxed);
	return 0;
}

uint64_t
cr__tel_field_value(const struct cr_lcore_stats *st, const struct cr__tel_field *f)
{
	uint64_t v;

	memcpy(&v, (const char *)st + f->off, sizeof(v));
	return v;
}

const char *
cr__tel_state_name(enum cr_lcore_state s)
{
	switch (s) {
	case CR_LCORE_OFFLINE:
		return "OFFLINE";
	case CR_LCORE_STARTING:
		return "STARTING";
	case CR_LCORE_RUNNING:
		return "RUNNING";
	case CR_LCORE_RETIRING:
		return "RETIRING";
	}
	return "UNKNOWN";
}

unsigned
cr__tel_lcore_next(unsigned prev)
{
	struct cr_lcore_stats st;
	unsigned i = prev == CR_LCORE_NONE ? 0 : prev + 1;

	/* cr_lcore_stats() answers for every lcore record, whatever its state. */
	for (; i < CR_MAX_LCORES; i++)
		if (cr_lcore_stats(i, &st) == 0)
			return i;
	return CR_LCORE_NONE;
}

int
cr__tel_snapshot(unsigned lcore, struct cr__tel_snap *s)
{
	unsigned i;
	int rc;

	rc = cr_lcore_stats(lcore, &s->st);
	if (rc != 0)
		return rc;
	s->lcore = lcore;
	s->state = cr_lcore_state(lcore);
	s->n_readers = cr__tel_n_readers();
	for (i = 0; i < s->n_readers; i++) {
		s->reader[i] = 0;
		s->reader_ok[i] = readers[i].fn(lcore, &s->reader[i], readers[i].arg) == 0;
	}
	s->n_counters = cr__tel_n_counters();
	for (i = 0; i < s->n_counters; i++)
		cr_telemetry_counter_read((int)i, lcore, &s->app[i]);
	return 0;
}
