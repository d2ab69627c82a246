/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Counters: naming rules and one namespace for app counters, readers and the reactor's
 * fields; app counters written on their lcores (and ignored elsewhere); snapshots with
 * readers; lcore enumeration; the registry full.
 */
#include "telemetry_internal.h"
#include "ut_json.h"
#include "ut_runtime.h"
#include "ut_socket.h"

/* Readers the linked libraries register at load time (lib/io's ops_in_flight, ...); they
 * come first, before this suite's own. */
static unsigned
lib_readers(void)
{
	static unsigned n = UINT32_MAX;
	unsigned i;

	if (n == UINT32_MAX)
		for (n = 0, i = 0; i < cr__tel_n_readers(); i++)
			if (strcmp(cr__tel_reader(i)->name, "ops_in_flight") == 0 ||
			    strcmp(cr__tel_reader(i)->name, "log_dropped_lines") == 0)
				n++;
	return n;
}

static int
read_lcore_x10(unsigned lcore, uint64_t *out, void *arg)
{
	(void)arg;
	*out = lcore * 10u + 1;
	return 0;
}

static int
read_fails(unsigned lcore, uint64_t *out, void *arg)
{
	(void)lcore, (void)out, (void)arg;
	return -ENODATA;
}

static void
test_names(void)
{
	char longname[CR_TELEMETRY_NAME_LEN + 1];

	CU_ASSERT_EQUAL(cr_telemetry_counter_register(NULL, CR_TELEMETRY_COUNTER, NULL), -EINVAL);
	CU_ASSERT_EQUAL(cr_telemetry_counter_register("", CR_TELEMETRY_COUNTER, NULL), -EINVAL);
	CU_ASSERT_EQUAL(cr_telemetry_counter_register("Upper", CR_TELEMETRY_COUNTER, NULL),
			-EINVAL);
	CU_ASSERT_EQUAL(cr_telemetry_counter_register("9lives", CR_TELEMETRY_COUNTER, NULL),
			-EINVAL);
	CU_ASSERT_EQUAL(cr_telemetry_counter_register("a-b", CR_TELEMETRY_COUNTER, NULL), -EINVAL);
	CU_ASSERT_EQUAL(cr_telemetry_counter_register("a\"b", CR_TELEMETRY_COUNTER, NULL), -EINVAL);
	CU_ASSERT_EQUAL(cr_telemetry_counter_register("ok", (enum cr_telemetry_kind)7, NULL),
			-EINVAL);
	memset(longname, 'a', sizeof(longname));
	longname[CR_TELEMETRY_NAME_LEN] = '\0';
	CU_ASSERT_EQUAL(cr_telemetry_counter_register(longname, CR_TELEMETRY_COUNTER, NULL),
			-EINVAL);
	longname[CR_TELEMETRY_NAME_LEN - 1] = '\0';
	CU_ASSERT_TRUE(cr_telemetry_counter_register(longname, CR_TELEMETRY_COUNTER, NULL) >= 0);
	/* The reactor's fields and the keys of an lcore's JSON object are taken. */
	CU_ASSERT_EQUAL(cr_telemetry_counter_register("turns", CR_TELEMETRY_COUNTER, NULL),
			-EEXIST);
	CU_ASSERT_EQUAL(cr_telemetry_counter_register("state", CR_TELEMETRY_GAUGE, NULL), -EEXIST);
	CU_ASSERT_EQUAL(
	    cr_telemetry_reader_register("cqes", CR_TELEMETRY_COUNTER, NULL, read_fails, NULL),
	    -EEXIST);
	CU_ASSERT_EQUAL(cr_telemetry_reader_register("x", CR_TELEMETRY_COUNTER, NULL, NULL, NULL),
			-EINVAL);
}

static void
test_one_namespace(void)
{
	int a = cr_telemetry_counter_register("requests", CR_TELEMETRY_COUNTER, "Requests.");
	int b = cr_telemetry_counter_register("queue_len", CR_TELEMETRY_GAUGE, NULL);

	CU_ASSERT_TRUE(a >= 0);
	CU_ASSERT_TRUE(b >= 0 && b != a);
	/* Same name and kind: the same id; other kind: taken. */
	CU_ASSERT_EQUAL(cr_telemetry_counter_register("requests", CR_TELEMETRY_COUNTER, NULL), a);
	CU_ASSERT_EQUAL(cr_telemetry_counter_register("requests", CR_TELEMETRY_GAUGE, NULL),
			-EEXIST);
	CU_ASSERT_EQUAL(cr_telemetry_reader_register("connections", CR_TELEMETRY_GAUGE, "Conns.",
						     read_lcore_x10, NULL),
			0);
	CU_ASSERT_EQUAL(
	    cr_telemetry_reader_register("broken", CR_TELEMETRY_GAUGE, NULL, read_fails, NULL), 0);
	CU_ASSERT_EQUAL(cr_telemetry_reader_register("connections", CR_TELEMETRY_GAUGE, NULL,
						     read_lcore_x10, NULL),
			-EEXIST);
	CU_ASSERT_EQUAL(cr_telemetry_counter_register("connections", CR_TELEMETRY_GAUGE, NULL),
			-EEXIST);
	CU_ASSERT_EQUAL(cr_telemetry_reader_register("requests", CR_TELEMETRY_COUNTER, NULL,
						     read_lcore_x10, NULL),
			-EEXIST);
	CU_ASSERT_EQUAL(cr__tel_n_readers(), lib_readers() + 2);
	CU_ASSERT_STRING_EQUAL(cr__tel_counter((unsigned)a)->help, "Requests.");
	CU_ASSERT_EQUAL(cr__tel_counter((unsigned)b)->kind, CR_TELEMETRY_GAUGE);
}

static void
test_off_lcore_is_ignored(void)
{
	int a = cr_telemetry_counter_register("requests", CR_TELEMETRY_COUNTER, NULL);
	uint64_t v = 1;

	cr_telemetry_add(a, 5);
	cr_telemetry_set(a, 5);
	cr_telemetry_add(-1, 5);
	cr_telemetry_add(CR_TELEMETRY_MAX_COUNTERS, 5);
	for (unsigned i = 0; i < CR_MAX_LCORES; i++) {
		CU_ASSERT_EQUAL(cr_telemetry_counter_read(a, i, &v), 0);
		CU_ASSERT_EQUAL(v, 0);
	}
	CU_ASSERT_EQUAL(cr_telemetry_counter_read(-1, 0, &v), -EINVAL);
	CU_ASSERT_EQUAL(cr_telemetry_counter_read(CR_TELEMETRY_MAX_COUNTERS - 1, 0, &v), -EINVAL);
	CU_ASSERT_EQUAL(cr_telemetry_counter_read(a, CR_MAX_LCORES, &v), -EINVAL);
	CU_ASSERT_EQUAL(cr_telemetry_counter_read(a, 0, NULL), -EINVAL);
}

static int id_requests, id_queue;

/* On each lcore: add its id + 1 three times, set the gauge to 100 + id. */
static void
bump(void *arg)
{
	unsigned me = cr_lcore_id();

	(void)arg;
	for (int i = 0; i < 3; i++)
		cr_telemetry_add(id_requests, me + 1);
	cr_telemetry_set(id_queue, 7);
	cr_telemetry_set(id_queue, 100 + me);
}

static void
test_on_lcores_and_snapshot(void)
{
	struct cr__tel_snap s;
	unsigned id, n = 0, listed = 0;
	uint64_t v;

	id_requests = cr_telemetry_counter_register("requests", CR_TELEMETRY_COUNTER, NULL);
	id_queue = cr_telemetry_counter_register("queue_len", CR_TELEMETRY_GAUGE, NULL);
	/* No runtime: no lcores. */
	CU_ASSERT_EQUAL(cr__tel_lcore_next(CR_LCORE_NONE), CR_LCORE_NONE);
	CU_ASSERT_EQUAL(cr__tel_snapshot(0, &s), -EINVAL);
	if (!ut_rt_start()) {
		CU_FAIL("runtime did not start");
		return;
	}
	CR_LCORE_FOREACH(id)
	{
		CU_ASSERT_EQUAL(cr_telemetry_call_on(id, bump, NULL, 5000000000ull), 0);
		n++;
	}
	CR_LCORE_FOREACH(id)
	{
		CU_ASSERT_EQUAL(cr_telemetry_counter_read(id_requests, id, &v), 0);
		CU_ASSERT_EQUAL(v, 3 * (id + 1));
		CU_ASSERT_EQUAL(cr_telemetry_counter_read(id_queue, id, &v), 0);
		CU_ASSERT_EQUAL(v, 100 + id);
		CU_ASSERT_EQUAL(cr__tel_snapshot(id, &s), 0);
		CU_ASSERT_EQUAL(s.lcore, id);
		CU_ASSERT_EQUAL(s.state, CR_LCORE_RUNNING);
		CU_ASSERT_TRUE(s.st.incarnation >= 1);
		CU_ASSERT_EQUAL(s.n_readers, lib_readers() + 2);
		CU_ASSERT_TRUE(s.reader_ok[lib_readers()]);
		CU_ASSERT_EQUAL(s.reader[lib_readers()], id * 10u + 1);
		CU_ASSERT_FALSE(s.reader_ok[lib_readers() + 1]);
		CU_ASSERT_EQUAL(s.app[id_requests], 3 * (id + 1));
		CU_ASSERT_EQUAL(s.app[id_queue], 100 + id);
	}
	for (id = cr__tel_lcore_next(CR_LCORE_NONE); id != CR_LCORE_NONE;
	     id = cr__tel_lcore_next(id))
		listed++;
	CU_ASSERT_EQUAL(listed, n);
	/* Stopped but not torn down: still listed, OFFLINE, counters kept. */
	CU_ASSERT_TRUE(ut_rt_stop());
	listed = 0;
	for (id = cr__tel_lcore_next(CR_LCORE_NONE); id != CR_LCORE_NONE;
	     id = cr__tel_lcore_next(id)) {
		CU_ASSERT_EQUAL(cr__tel_snapshot(id, &s), 0);
		CU_ASSERT_EQUAL(s.state, CR_LCORE_OFFLINE);
		CU_ASSERT_EQUAL(s.app[id_requests], 3 * (id + 1));
		listed++;
	}
	CU_ASSERT_EQUAL(listed, n);
	ut_rt_fini();
	CU_ASSERT_EQUAL(cr__tel_lcore_next(CR_LCORE_NONE), CR_LCORE_NONE);
}

static void
test_fields_table(void)
{
	struct cr_lcore_stats st;

	/* Every member of struct cr_lcore_stats is one field, at its own offset. */
	memset(&st, 0, sizeof(st));
	st.turns = 11;
	st.wakes_recv = 22;
	st.incarnation = 33;
	for (unsigned i = 0; i < cr__tel_n_fields; i++) {
		const struct cr__tel_field *f = &cr__tel_fields[i];
		uint64_t v = cr__tel_field_value(&st, f), want = 0;

		if (strcmp(f->name, "turns") == 0)
			want = 11;
		else if (strcmp(f->name, "wakes_recv") == 0)
			want = 22;
		else if (strcmp(f->name, "incarnation") == 0)
			want = 33;
		CU_ASSERT_EQUAL(v, want);
		CU_ASSERT_EQUAL(strncmp(f->prom, "coreact_lcore_", 14), 0);
	}
	CU_ASSERT_STRING_EQUAL(cr__tel_state_name(CR_LCORE_RETIRING), "RETIRING");
	CU_ASSERT_STRING_EQUAL(cr__tel_state_name(CR_LCORE_STARTING), "STARTING");
}

static int
read_one(unsigned lcore, uint64_t *out, void *arg)
{
	(void)lcore, (void)arg;
	*out = 1;
	return 0;
}

static void
test_prom_names(void)
{
	const struct cr_telemetry_prom ok2 = {"p_responses", "code", "2xx"};
	const struct cr_telemetry_prom ok4 = {"p_responses", "code", "4xx"};
	const struct cr_telemetry_prom dup4 = {"p_responses", "code", "4xx"};
	const struct cr_telemetry_prom other_label = {"p_responses", "status", "5xx"};
	const struct cr_telemetry_prom no_label = {"p_responses", NULL, NULL};
	const struct cr_telemetry_prom plain = {"p_received_bytes", NULL, NULL};
	const struct cr_telemetry_prom plain_again = {"p_received_bytes", NULL, NULL};
	const struct cr_telemetry_prom gauge_label = {"p_responses", "code", "1xx"};
	const struct cr_telemetry_prom builtin = {"lcore_turns", NULL, NULL};
	const struct cr_telemetry_prom info = {"info", NULL, NULL};
	const struct cr_telemetry_prom bad_family = {"P-responses", NULL, NULL};
	const struct cr_telemetry_prom bad_label[] = {{"p_x", "lcore", "1"}, {"p_x", "le", "1"},
						      {"p_x", "__a", "1"}, {"p_x", "Code", "1"},
						      {"p_x", "code", NULL}};
	const struct cr__tel_entry *e;
	char longval[80];
	int a, b;

	a = cr_telemetry_counter_register_prom("p_2xx", CR_TELEMETRY_COUNTER, "By class.", &ok2);
	b = cr_telemetry_counter_register_prom("p_4xx", CR_TELEMETRY_COUNTER, NULL, &ok4);
	CU_ASSERT_TRUE_FATAL(a >= 0 && b >= 0);
	e = cr__tel_counter((unsigned)a);
	CU_ASSERT_STRING_EQUAL(e->family, "p_responses");
	CU_ASSERT_STRING_EQUAL(e->label, "code");
	CU_ASSERT_STRING_EQUAL(e->label_value, "2xx");
	/* The same value twice, another label name, a family member without a label, another
	 * kind: each would make two series of one name or a family of two shapes. */
	CU_ASSERT_EQUAL(cr_telemetry_counter_register_prom("p_4xx_b", CR_TELEMETRY_COUNTER, NULL,
							   &dup4),
			-EEXIST);
	CU_ASSERT_EQUAL(cr_telemetry_counter_register_prom("p_5xx", CR_TELEMETRY_COUNTER, NULL,
							   &other_label),
			-EEXIST);
	CU_ASSERT_EQUAL(cr_telemetry_counter_register_prom("p_all", CR_TELEMETRY_COUNTER, NULL,
							   &no_label),
			-EEXIST);
	CU_ASSERT_EQUAL(cr_telemetry_counter_register_prom("p_1xx", CR_TELEMETRY_GAUGE, NULL,
							   &gauge_label),
			-EEXIST);
	/* A family across a reader and a counter, when both are labelled alike. */
	CU_ASSERT_EQUAL(cr_telemetry_reader_register_prom("p_3xx", CR_TELEMETRY_COUNTER, NULL,
							  &(struct cr_telemetry_prom){
							      "p_responses", "code", "3xx"},
							  read_one, NULL),
			0);
	/* One unlabelled entry is a family of its own; a second of that name is refused. */
	CU_ASSERT_TRUE(
	    cr_telemetry_counter_register_prom("p_in", CR_TELEMETRY_COUNTER, NULL, &plain) >= 0);
	CU_ASSERT_EQUAL(cr_telemetry_counter_register_prom("p_in2", CR_TELEMETRY_COUNTER, NULL,
							   &plain_again),
			-EEXIST);
	/* The default family of a counter is app_<name>; another may not take it. */
	CU_ASSERT_TRUE(cr_telemetry_counter_register("p_def", CR_TELEMETRY_COUNTER, NULL) >= 0);
	CU_ASSERT_EQUAL(cr_telemetry_counter_register_prom("p_def2", CR_TELEMETRY_COUNTER, NULL,
							   &(struct cr_telemetry_prom){
							      "app_p_def", NULL, NULL}),
			-EEXIST);
	/* Built-in families. */
	CU_ASSERT_EQUAL(cr_telemetry_counter_register_prom("p_b", CR_TELEMETRY_COUNTER, NULL,
							   &builtin),
			-EEXIST);
	CU_ASSERT_EQUAL(cr_telemetry_counter_register_prom("p_i", CR_TELEMETRY_GAUGE, NULL, &info),
			-EEXIST);
	/* Bad names. */
	CU_ASSERT_EQUAL(cr_telemetry_counter_register_prom("p_bad", CR_TELEMETRY_COUNTER, NULL,
							   &bad_family),
			-EINVAL);
	for (unsigned i = 0; i < sizeof(bad_label) / sizeof(bad_label[0]); i++)
		CU_ASSERT_EQUAL(cr_telemetry_counter_register_prom("p_bad", CR_TELEMETRY_COUNTER,
								   NULL, &bad_label[i]),
				-EINVAL);
	memset(longval, 'v', sizeof(longval) - 1);
	longval[sizeof(longval) - 1] = '\0';
	CU_ASSERT_EQUAL(cr_telemetry_counter_register_prom("p_bad", CR_TELEMETRY_COUNTER, NULL,
							   &(struct cr_telemetry_prom){
							      "p_x", "code", longval}),
			-EINVAL);
	/* A name already registered answers with its id, whatever prom says. */
	CU_ASSERT_EQUAL(cr_telemetry_counter_register_prom("p_2xx", CR_TELEMETRY_COUNTER, NULL,
							   &ok4),
			a);
}

static void
test_full(void)
{
	char name[32];
	int rc = 0;
	unsigned i;

	for (i = 0; i < CR_TELEMETRY_MAX_COUNTERS + 1 && rc >= 0; i++) {
		snprintf(name, sizeof(name), "fill_%u", i);
		rc = cr_telemetry_counter_register(name, CR_TELEMETRY_COUNTER, NULL);
	}
	CU_ASSERT_EQUAL(rc, -ENOSPC);
	CU_ASSERT_EQUAL(cr__tel_n_counters(), CR_TELEMETRY_MAX_COUNTERS);
	/* A known name still answers with its id. */
	CU_ASSERT_TRUE(cr_telemetry_counter_register("requests", CR_TELEMETRY_COUNTER, NULL) >= 0);
	for (i = 0, rc = 0; i < CR_TELEMETRY_MAX_READERS + 1 && rc == 0; i++) {
		snprintf(name, sizeof(name), "rfill_%u", i);
		rc = cr_telemetry_reader_register(name, CR_TELEMETRY_GAUGE, NULL, read_fails, NULL);
	}
	CU_ASSERT_EQUAL(rc, -ENOSPC);
	CU_ASSERT_EQUAL(cr__tel_n_readers(), CR_TELEMETRY_MAX_READERS);
}

static const struct ut_case cases[] = {
	UT_CASE(test_names),
	UT_CASE(test_one_namespace),
	UT_CASE(test_off_lcore_is_ignored),
	UT_CASE(test_on_lcores_and_snapshot),
	UT_CASE(test_fields_table),
	UT_CASE(test_prom_names),
	UT_CASE(test_full),
};

UT_MAIN("telemetry_counter", cases, NULL, NULL)
