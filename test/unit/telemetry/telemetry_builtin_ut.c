/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * /lcores, /stats and /info against the real runtime: every lcore listed with its state,
 * counters that match cr_lcore_stats(), totals that are the sums (checked exactly once the
 * loops have stopped and the counters are frozen), app counters and readers included.
 */
#include <unistd.h>

#include "telemetry_internal.h"
#include "ut_json.h"
#include "ut_runtime.h"
#include "ut_socket.h"
#include "tel_internal_ut.h"

static char out[CR_TELEMETRY_MAX_REPLY + 1];
static int id_hits, id_shards_out;

static const char *
ask(const char *req)
{
	return tel_ask(out, sizeof(out), req);
}

static int
read_conns(unsigned lcore, uint64_t *out_v, void *arg)
{
	(void)arg;
	*out_v = 1000 + lcore;
	return 0;
}

static int
read_moved_in(unsigned lcore, uint64_t *out_v, void *arg)
{
	(void)arg;
	*out_v = 70 + lcore;
	return 0;
}

static void
hit(void *arg)
{
	cr_telemetry_add(id_hits, (uint64_t)(uintptr_t)arg);
}

static int
suite_init(void)
{
	id_hits = cr_telemetry_counter_register("hits", CR_TELEMETRY_COUNTER, "Hits.");
	if (id_hits < 0 || cr_telemetry_reader_register("connections", CR_TELEMETRY_GAUGE,
							"Connections.", read_conns, NULL) != 0)
		return 1;
	/* Move counters (names ending in moved_in / moved_out): /lcores shows them too. */
	id_shards_out = cr_telemetry_counter_register("shards_moved_out", CR_TELEMETRY_COUNTER,
						      "Shards moved away.");
	if (id_shards_out < 0 ||
	    cr_telemetry_reader_register("conns_moved_in", CR_TELEMETRY_COUNTER, "Moved in.",
					 read_moved_in, NULL) != 0)
		return 1;
	return ut_rt_start() ? 0 : 1;
}

static void
test_lcores(void)
{
	const char *r = ask("/lcores");
	char want[256];
	unsigned id, n = 0;

	CU_ASSERT_EQUAL(strncmp(r, "{\"/lcores\":[{", 12), 0);
	CR_LCORE_FOREACH(id)
	{
		snprintf(
		    want, sizeof(want),
		    "{\"lcore\":%u,\"cpu\":%u,\"numa\":%d,\"state\":\"RUNNING\",\"incarnation\":1,"
		    "\"main\":%s,\"moved\":{\"conns_moved_in\":%u,\"shards_moved_out\":0}}",
		    id, id, cr_lcore_numa(id), id == cr_lcore_main() ? "true" : "false", 70 + id);
		CU_ASSERT_PTR_NOT_NULL(strstr(r, want));
		n++;
	}
	CU_ASSERT_TRUE(n >= 1);
}

static void
test_info(void)
{
	const char *r = ask("/info");
	char want[128];

	CU_ASSERT_PTR_NOT_NULL(strstr(r, "\"version\":\"" CR_VERSION "\""));
	snprintf(want, sizeof(want), "\"pid\":%d,", (int)getpid());
	CU_ASSERT_PTR_NOT_NULL(strstr(r, want));
	snprintf(want, sizeof(want), "\"io_driver\":\"%s\"", cr_reactor_driver());
	CU_ASSERT_PTR_NOT_NULL(strstr(r, want));
	snprintf(want, sizeof(want), "\"main_lcore\":%u,\"running\":%u,", cr_lcore_main(),
		 cr_lcore_count());
	CU_ASSERT_PTR_NOT_NULL(strstr(r, want));
	/* Not started through cr_telemetry_start(): no app name, socket or metrics. */
	CU_ASSERT_PTR_NOT_NULL(strstr(r, "\"app\":null"));
	CU_ASSERT_PTR_NOT_NULL(strstr(r, "\"socket\":null,\"metrics\":null"));
}

static void
test_stats_one_lcore(void)
{
	char req[32], anchor[32];
	unsigned id = cr_lcore_main();
	unsigned long long v;
	const char *r;

	snprintf(req, sizeof(req), "/stats,%u", id);
	r = ask(req);
	snprintf(anchor, sizeof(anchor), "{\"lcore\":%u,", id);
	CU_ASSERT_PTR_NOT_NULL(strstr(r, anchor));
	/* Exactly one lcore object. */
	CU_ASSERT_PTR_NULL(strstr(strstr(r, anchor) + 1, "{\"lcore\":"));
	CU_ASSERT_TRUE(ut_json_u64_after(r, anchor, "\"connections\":", &v));
	CU_ASSERT_EQUAL(v, 1000 + id);
}

/* /lcore/retire, /lcore/start and /pool/resize drive the lifecycle; bad values get a
 * JSON error naming them. */
static bool
state_is(unsigned id, enum cr_lcore_state st)
{
	for (int i = 0; i < 5000 && cr_lcore_state(id) != st; i++)
		ut_sleep_ms(1);
	return cr_lcore_state(id) == st;
}

static void
test_lifecycle_commands(void)
{
	unsigned last = CR_LCORE_NONE, id, n = 0;
	char req[64];

	CR_LCORE_FOREACH(id)
	{
		last = id;
		n++;
	}
	CU_ASSERT_PTR_NOT_NULL(strstr(ask("/lcore/retire,x"), "\"error\":\"/lcore/retire: 'x' is not"));
	CU_ASSERT_PTR_NOT_NULL(strstr(ask("/pool/resize,0"), "\"error\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(ask("/pool/resize,999"), "\"error\""));
	snprintf(req, sizeof(req), "/lcore/retire,%u", cr_lcore_main());
	CU_ASSERT_PTR_NOT_NULL(strstr(ask(req), "the main lcore cannot retire"));
	if (last == cr_lcore_main())
		return; /* one lcore: nothing to retire */
	snprintf(req, sizeof(req), "/lcore/retire,%u", last);
	CU_ASSERT_PTR_NOT_NULL(strstr(ask(req), "\"requested\":\"retire\""));
	CU_ASSERT_TRUE(state_is(last, CR_LCORE_OFFLINE));
	snprintf(req, sizeof(req), "/lcore/start,%u", last);
	CU_ASSERT_PTR_NOT_NULL(strstr(ask(req), "\"requested\":\"start\""));
	CU_ASSERT_TRUE(state_is(last, CR_LCORE_RUNNING));
	CU_ASSERT_PTR_NOT_NULL(strstr(ask(req), "it is not OFFLINE"));
	CU_ASSERT_PTR_NOT_NULL(strstr(ask("/pool/resize,1"), "\"requested\":\"resize\""));
	CU_ASSERT_TRUE(state_is(last, CR_LCORE_OFFLINE));
	snprintf(req, sizeof(req), "/pool/resize,%u", n);
	CU_ASSERT_PTR_NOT_NULL(strstr(ask(req), "\"requested\":\"resize\""));
	CU_ASSERT_TRUE(state_is(last, CR_LCORE_RUNNING));
}

static void
test_stats_totals_frozen(void)
{
	struct cr_lcore_stats st, sum;
	unsigned long long v;
	uint64_t want_hits = 0;
	const char *r;
	char anchor[32];
	unsigned id;

	CR_LCORE_FOREACH(id)
	{
		CU_ASSERT_EQUAL(
		    cr_telemetry_call_on(id, hit, (void *)(uintptr_t)(id + 5), 5000000000ull), 0);
		want_hits += id + 5;
	}
	/* Freeze the counters: stop the loops, keep the records. */
	CU_ASSERT_TRUE(ut_rt_stop());
	memset(&sum, 0, sizeof(sum));
	r = ask("/stats");
	for (id = cr__tel_lcore_next(CR_LCORE_NONE); id != CR_LCORE_NONE;
	     id = cr__tel_lcore_next(id)) {
		CU_ASSERT_EQUAL_FATAL(cr_lcore_stats(id, &st), 0);
		snprintf(anchor, sizeof(anchor), "{\"lcore\":%u,", id);
		CU_ASSERT_PTR_NOT_NULL(strstr(r, anchor));
		CU_ASSERT_TRUE(
		    ut_json_u64_after(r, anchor, "\"state\":\"OFFLINE\",\"turns\":", &v));
		CU_ASSERT_EQUAL(v, st.turns);
		CU_ASSERT_TRUE(ut_json_u64_after(r, anchor, "\"msgs_in\":", &v));
		CU_ASSERT_EQUAL(v, st.msgs_in);
		CU_ASSERT_TRUE(ut_json_u64_after(r, anchor, "\"busy_ns\":", &v));
		CU_ASSERT_EQUAL(v, st.busy_ns);
		CU_ASSERT_TRUE(ut_json_u64_after(r, anchor, "\"hits\":", &v));
		CU_ASSERT_EQUAL(v, id + 5);
		sum.turns += st.turns;
		sum.msgs_in += st.msgs_in;
		sum.wakes_recv += st.wakes_recv;
		sum.idle_ns += st.idle_ns;
	}
	CU_ASSERT_TRUE(ut_json_u64_after(r, "\"total\":", "\"turns\":", &v));
	CU_ASSERT_EQUAL(v, sum.turns);
	CU_ASSERT_TRUE(ut_json_u64_after(r, "\"total\":", "\"msgs_in\":", &v));
	CU_ASSERT_EQUAL(v, sum.msgs_in);
	CU_ASSERT_TRUE(ut_json_u64_after(r, "\"total\":", "\"wakes_recv\":", &v));
	CU_ASSERT_EQUAL(v, sum.wakes_recv);
	CU_ASSERT_TRUE(ut_json_u64_after(r, "\"total\":", "\"idle_ns\":", &v));
	CU_ASSERT_EQUAL(v, sum.idle_ns);
	CU_ASSERT_TRUE(ut_json_u64_after(r, "\"total\":", "\"hits\":", &v));
	CU_ASSERT_EQUAL(v, want_hits);
	/* Gauges that do not add up are not totalled. */
	CU_ASSERT_PTR_NULL(strstr(strstr(r, "\"total\":"), "incarnation"));
	CU_ASSERT_PTR_NULL(strstr(strstr(r, "\"total\":"), "spin_budget_ns"));
	ut_rt_fini();
	/* Torn down: nothing to list. */
	CU_ASSERT_PTR_NOT_NULL(strstr(ask("/lcores"), "{\"/lcores\":[]}"));
	CU_ASSERT_PTR_NOT_NULL(strstr(ask("/stats"), "\"lcores\":[],\"total\":{\"turns\":0,"));
	CU_ASSERT_PTR_NOT_NULL(strstr(ask("/info"), "\"main_lcore\":null"));
}

static const struct ut_case cases[] = {
	UT_CASE(test_lcores),
	UT_CASE(test_info),
	UT_CASE(test_stats_one_lcore),
	UT_CASE(test_lifecycle_commands),
	UT_CASE(test_stats_totals_frozen),
};

UT_MAIN("telemetry_builtin", cases, suite_init, NULL)
