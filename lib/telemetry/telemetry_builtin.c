/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The built-in commands: /lcores, /stats and /info read lcore state and counters with the
 * reactor's lock-free getters, so they never stop an lcore; /pool/resize, /lcore/retire
 * and /lcore/start are the lifecycle requests (asynchronous: they reply once asked).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "telemetry_internal.h"

struct cr__tel_info cr__tel_info;

static int
no_params(const char *params, struct cr_json *reply)
{
	if (params[0] != '\0')
		return cr_json_errorf(reply, -EINVAL, "takes no parameters, got '%s'", params);
	return 0;
}

/* A counter of things moved between lcores: its name ends in "moved_in" or "moved_out"
 * (lib/net's net_moved_in / net_moved_out; an app's own, such as a shard count). */
static bool
is_move_counter(const char *name)
{
	size_t n = strlen(name);

	return (n >= 8 && strcmp(name + n - 8, "moved_in") == 0) ||
	       (n >= 9 && strcmp(name + n - 9, "moved_out") == 0);
}

/* The lcore's move counters (this incarnation's), as an object "moved". */
static void
write_moves(struct cr_json *j, unsigned id)
{
	struct cr__tel_snap s;
	unsigned i;

	cr_json_object_begin(j, "moved");
	if (cr__tel_snapshot(id, &s) == 0) {
		for (i = 0; i < s.n_readers; i++)
			if (s.reader_ok[i] && is_move_counter(cr__tel_reader(i)->name))
				cr_json_u64(j, cr__tel_reader(i)->name, s.reader[i]);
		for (i = 0; i < s.n_counters; i++)
			if (is_move_counter(cr__tel_counter(i)->name))
				cr_json_u64(j, cr__tel_counter(i)->name, s.app[i]);
	}
	cr_json_object_end(j);
}

int
cr__tel_cmd_lcores(const char *cmd, const char *params, struct cr_json *reply)
{
	struct cr_lcore_stats st;
	unsigned id;
	int rc;

	(void)cmd;
	rc = no_params(params, reply);
	if (rc != 0)
		return rc;
	cr_json_array_begin(reply, NULL);
	for (id = cr__tel_lcore_next(CR_LCORE_NONE); id != CR_LCORE_NONE;
	     id = cr__tel_lcore_next(id)) {
		if (cr_lcore_stats(id, &st) != 0)
			continue;
		cr_json_object_begin(reply, NULL);
		cr_json_u64(reply, "lcore", id);
		/* An lcore id is the OS index of its CPU (cr_eal.h). */
		cr_json_u64(reply, "cpu", id);
		cr_json_i64(reply, "numa", cr_lcore_numa(id));
		cr_json_string(reply, "state", cr__tel_state_name(cr_lcore_state(id)));
		cr_json_u64(reply, "incarnation", st.incarnation);
		cr_json_bool(reply, "main", id == cr_lcore_main());
		write_moves(reply, id);
		cr_json_object_end(reply);
	}
	cr_json_array_end(reply);
	return 0;
}

/* Add @p s into @p total: the fields and values that are summed. */
static void
accumulate(struct cr__tel_snap *total, const struct cr__tel_snap *s)
{
	unsigned i;

	for (i = 0; i < cr__tel_n_fields; i++) {
		const struct cr__tel_field *f = &cr__tel_fields[i];
		uint64_t v = cr__tel_field_value(&total->st, f) + cr__tel_field_value(&s->st, f);

		memcpy((char *)&total->st + f->off, &v, sizeof(v));
	}
	for (i = 0; i < s->n_readers; i++) {
		total->reader[i] += s->reader_ok[i] ? s->reader[i] : 0;
		total->reader_ok[i] |= s->reader_ok[i];
	}
	for (i = 0; i < s->n_counters; i++)
		total->app[i] += s->app[i];
}

/* The values of @p s as members of the open object; @p total leaves out the per-lcore
 * gauges that do not add up (spin budget, incarnation). */
static void
write_values(struct cr_json *j, const struct cr__tel_snap *s, bool total)
{
	unsigned i;

	for (i = 0; i < cr__tel_n_fields; i++)
		if (!total || cr__tel_fields[i].in_total)
			cr_json_u64(j, cr__tel_fields[i].name,
				    cr__tel_field_value(&s->st, &cr__tel_fields[i]));
	for (i = 0; i < s->n_readers; i++)
		if (s->reader_ok[i])
			cr_json_u64(j, cr__tel_reader(i)->name, s->reader[i]);
	cr_json_object_begin(j, "app");
	for (i = 0; i < s->n_counters; i++)
		cr_json_u64(j, cr__tel_counter(i)->name, s->app[i]);
	cr_json_object_end(j);
}

int
cr__tel_cmd_stats(const char *cmd, const char *params, struct cr_json *reply)
{
	struct cr__tel_snap s, total;
	unsigned long long one = 0;
	unsigned id;

	(void)cmd;
	if (params[0] != '\0') {
		if (cr_parse_uint(params, 0, CR_MAX_LCORES - 1, &one) != 0 ||
		    cr_lcore_stats((unsigned)one, &s.st) != 0)
			return cr_json_errorf(
			    reply, -EINVAL,
			    "'%s' is not an lcore; accepted: an lcore id from /lcores", params);
	}
	memset(&total, 0, sizeof(total));
	total.n_readers = cr__tel_n_readers();
	total.n_counters = cr__tel_n_counters();
	cr_json_object_begin(reply, NULL);
	cr_json_u64(reply, "time_ns", cr_clock_ns());
	cr_json_array_begin(reply, "lcores");
	for (id = cr__tel_lcore_next(CR_LCORE_NONE); id != CR_LCORE_NONE;
	     id = cr__tel_lcore_next(id)) {
		if ((params[0] != '\0' && id != one) || cr__tel_snapshot(id, &s) != 0)
			continue;
		/* Registered meanwhile: report only what the totals cover. */
		s.n_readers = s.n_readers < total.n_readers ? s.n_readers : total.n_readers;
		s.n_counters = s.n_counters < total.n_counters ? s.n_counters : total.n_counters;
		accumulate(&total, &s);
		cr_json_object_begin(reply, NULL);
		cr_json_u64(reply, "lcore", id);
		cr_json_string(reply, "state", cr__tel_state_name(s.state));
		write_values(reply, &s, false);
		cr_json_object_end(reply);
	}
	cr_json_array_end(reply);
	cr_json_object_begin(reply, "total");
	write_values(reply, &total, true);
	cr_json_object_end(reply);
	cr_json_object_end(reply);
	return 0;
}

int
cr__tel_cmd_info(const char *cmd, const char *params, struct cr_json *reply)
{
	struct cr_lcore_stats st;
	struct cr_cpuset set;
	char corelist[512];
	const struct cr__tel_info *in = &cr__tel_info;
	unsigned id, n = 0;
	int rc;

	(void)cmd;
	rc = no_params(params, reply);
	if (rc != 0)
		return rc;
	memset(&set, 0, sizeof(set));
	cr_json_object_begin(reply, NULL);
	cr_json_string(reply, "app", in->app[0] != '\0' ? in->app : NULL);
	cr_json_i64(reply, "pid", getpid());
	cr_json_string(reply, "version", CR_VERSION);
	cr_json_string(reply, "io_driver", cr_reactor_driver());
	cr_json_array_begin(reply, "lcores");
	for (id = cr__tel_lcore_next(CR_LCORE_NONE); id != CR_LCORE_NONE;
	     id = cr__tel_lcore_next(id)) {
		cr_json_u64(reply, NULL, id);
		cr_cpuset_set(&set, id);
		n++;
	}
	cr_json_array_end(reply);
	cr_json_string(reply, "corelist", cr_cpuset_format(&set, corelist, sizeof(corelist)));
	if (n > 0 && cr_lcore_stats(cr_lcore_main(), &st) == 0)
		cr_json_u64(reply, "main_lcore", cr_lcore_main());
	else
		cr_json_null(reply, "main_lcore");
	cr_json_u64(reply, "running", cr_lcore_count());
	cr_json_string(reply, "socket", in->socket[0] != '\0' ? in->socket : NULL);
	cr_json_string(reply, "metrics", in->metrics[0] != '\0' ? in->metrics : NULL);
	cr_json_u64(reply, "uptime_ns", in->started_ns != 0 ? cr_clock_ns() - in->started_ns : 0);
	cr_json_object_end(reply);
	return 0;
}

/* ---- lifecycle ---- */

static int
lcore_param(const char *params, unsigned long long max, const char *what,
	    struct cr_json *reply, unsigned long long *out)
{
	if (cr_parse_uint(params, 0, max, out) != 0)
		return cr_json_errorf(reply, -EINVAL, "'%s' is not %s", params, what);
	return 0;
}

static void
lifecycle_reply(struct cr_json *reply, const char *what, unsigned long long v,
		const char *pending)
{
	cr_json_object_begin(reply, NULL);
	cr_json_string(reply, "requested", what);
	cr_json_u64(reply, "value", v);
	cr_json_u64(reply, "running", cr_lcore_count());
	if (pending != NULL)
		cr_json_string(reply, "pending", pending);
	cr_json_object_end(reply);
}

int
cr__tel_cmd_pool_resize(const char *cmd, const char *params, struct cr_json *reply)
{
	unsigned long long n;
	int rc;

	(void)cmd;
	rc = lcore_param(params, CR_MAX_LCORES, "a number of lcores; accepted: 1 up to the lcores "
			 "the app was started with", reply, &n);
	if (rc != 0)
		return rc;
	rc = cr_pool_resize((unsigned)n);
	if (rc == -EINVAL)
		return cr_json_errorf(reply, rc, "%llu lcores: accepted 1 up to the lcores the app "
				      "was started with", n);
	if (rc != 0 && rc != -EINPROGRESS)
		return cr_json_errorf(reply, rc, "resize to %llu: %s", n, cr_strerror(rc));
	lifecycle_reply(reply, "resize", n,
			rc == -EINPROGRESS ? "an lcore is still retiring or starting: the resize "
					     "completes when it is OFFLINE or RUNNING"
					   : NULL);
	return 0;
}

int
cr__tel_cmd_lcore_retire(const char *cmd, const char *params, struct cr_json *reply)
{
	unsigned long long id;
	int rc;

	(void)cmd;
	rc = lcore_param(params, CR_MAX_LCORES - 1, "an lcore id; accepted: an id from /lcores",
			 reply, &id);
	if (rc != 0)
		return rc;
	rc = cr_lcore_retire((unsigned)id, NULL, NULL);
	if (rc != 0)
		return cr_json_errorf(reply, rc, "retire lcore %llu: %s", id,
				      rc == -EBUSY ? "the main lcore cannot retire"
				      : rc == -EALREADY ? "it is not RUNNING"
				      : rc == -EINVAL ? "no such lcore"
						      : cr_strerror(rc));
	lifecycle_reply(reply, "retire", id, NULL);
	return 0;
}

int
cr__tel_cmd_lcore_start(const char *cmd, const char *params, struct cr_json *reply)
{
	unsigned long long id;
	int rc;

	(void)cmd;
	rc = lcore_param(params, CR_MAX_LCORES - 1, "an lcore id; accepted: an id from /lcores",
			 reply, &id);
	if (rc != 0)
		return rc;
	rc = cr_lcore_start((unsigned)id);
	if (rc != 0)
		return cr_json_errorf(reply, rc, "start lcore %llu: %s", id,
				      rc == -EALREADY ? "it is not OFFLINE"
				      : rc == -EINVAL ? "no such lcore"
						      : cr_strerror(rc));
	lifecycle_reply(reply, "start", id, NULL);
	return 0;
}
