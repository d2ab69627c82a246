/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Prometheus: the text format checked line by line (prom_check.h), values equal to the
 * frozen counters, lcore states as 0/1 per state, app counters and readers under their
 * default names and in labelled families of their own, the HTTP answers, and --metrics
 * HOST:PORT parsing.
 */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>

#include "prom_check.h"
#include "telemetry_internal.h"
#include "ut_json.h"
#include "ut_runtime.h"
#include "ut_socket.h"
#include "tel_internal_ut.h"

static unsigned lib_readers, lib_counters, lib_families;

static char text[CR_TELEMETRY_MAX_REPLY + 1];
static int id_hits, id_depth, id_2xx, id_5xx, id_plain;

static int
read_conns(unsigned lcore, uint64_t *out, void *arg)
{
	(void)arg;
	*out = 40 + lcore;
	return 0;
}

static int
read_none(unsigned lcore, uint64_t *out, void *arg)
{
	(void)lcore, (void)out, (void)arg;
	return -ENODATA;
}

static void
bump(void *arg)
{
	(void)arg;
	cr_telemetry_add(id_hits, 3);
	cr_telemetry_set(id_depth, 9);
	cr_telemetry_add(id_2xx, 20 + cr_lcore_id());
	cr_telemetry_add(id_5xx, 5);
	cr_telemetry_add(id_plain, 7);
}

/* Families the linked libraries registered before this suite: readers and counters whose
 * family no earlier entry has. */
static unsigned
count_families(void)
{
	unsigned n = 0, nr = cr__tel_n_readers(), nc = cr__tel_n_counters();

	for (unsigned i = 0; i < nr + nc; i++) {
		const struct cr__tel_entry *e = i < nr ? cr__tel_reader(i) : cr__tel_counter(i - nr);
		bool seen = false;

		for (unsigned j = 0; j < i && !seen; j++) {
			const struct cr__tel_entry *o =
			    j < nr ? cr__tel_reader(j) : cr__tel_counter(j - nr);

			seen = strcmp(o->family, e->family) == 0;
		}
		n += !seen;
	}
	return n;
}

static int
suite_init(void)
{
	const struct cr_telemetry_prom r2 = {"t_responses", "code", "2xx"};
	const struct cr_telemetry_prom r5 = {"t_responses", "code", "5xx"};
	const struct cr_telemetry_prom plain = {"t_sent_bytes", NULL, NULL};

	/* before this suite registers its own */
	lib_readers = cr__tel_n_readers();
	lib_counters = cr__tel_n_counters();
	lib_families = count_families();
	id_2xx = cr_telemetry_counter_register_prom("t_resp_2xx", CR_TELEMETRY_COUNTER,
						    "Responses by status class.", &r2);
	id_5xx = cr_telemetry_counter_register_prom("t_resp_5xx", CR_TELEMETRY_COUNTER,
						    "not the family's help", &r5);
	id_plain = cr_telemetry_counter_register_prom("t_static", CR_TELEMETRY_COUNTER,
						      "Bytes sent.", &plain);
	if (id_2xx < 0 || id_5xx < 0 || id_plain < 0)
		return 1;
	id_hits =
	    cr_telemetry_counter_register("hits", CR_TELEMETRY_COUNTER, "Hits\\with\nnewline.");
	id_depth = cr_telemetry_counter_register("depth", CR_TELEMETRY_GAUGE, NULL);
	if (id_hits < 0 || id_depth < 0 ||
	    cr_telemetry_reader_register("connections", CR_TELEMETRY_GAUGE, "Open connections.",
					 read_conns, NULL) != 0 ||
	    cr_telemetry_reader_register("nothing", CR_TELEMETRY_GAUGE, NULL, read_none, NULL) != 0)
		return 1;
	return ut_rt_start() ? 0 : 1;
}

static const char *
render(void)
{
	return tel_render(text, sizeof(text));
}


/* ---- tests ---- */

static unsigned
occurrences(const char *t, const char *needle)
{
	unsigned n = 0;

	for (const char *p = t; (p = strstr(p, needle)) != NULL; p += strlen(needle))
		n++;
	return n;
}

static void
test_format_and_values(void)
{
	static const char *const states[] = {"OFFLINE", "STARTING", "RUNNING", "RETIRING"};
	struct cr_lcore_stats st;
	unsigned id, n = 0, process;
	char prefix[128];
	struct prom_check c;
	const char *t;
	double v = -1;

	CR_LCORE_FOREACH(id)
	CU_ASSERT_EQUAL(cr_telemetry_call_on(id, bump, NULL, 5000000000ull), 0);
	CU_ASSERT_TRUE(ut_rt_stop());
	t = render();
	c = prom_check_text(t);
	if (c.bad_line != 0)
		fprintf(stderr, "bad line %u (%s) in:\n%s", c.bad_line, c.why, t);
	CU_ASSERT_EQUAL(c.bad_line, 0);
	for (id = cr__tel_lcore_next(CR_LCORE_NONE); id != CR_LCORE_NONE;
	     id = cr__tel_lcore_next(id)) {
		double sum = 0;

		CU_ASSERT_EQUAL_FATAL(cr_lcore_stats(id, &st), 0);
		snprintf(prefix, sizeof(prefix), "coreact_lcore_turns_total{lcore=\"%u\"}", id);
		CU_ASSERT_TRUE(prom_sample_value(t, prefix, &v) && v == (double)st.turns);
		snprintf(prefix, sizeof(prefix), "coreact_lcore_busy_seconds_total{lcore=\"%u\"}",
			 id);
		CU_ASSERT_TRUE(prom_sample_value(t, prefix, &v) &&
			       fabs(v - (double)st.busy_ns * 1e-9) < 1e-9);
		/* Stopped: 1 for OFFLINE, 0 for every other state. */
		for (unsigned k = 0; k < 4; k++) {
			snprintf(prefix, sizeof(prefix),
				 "coreact_lcore_state{lcore=\"%u\",state=\"%s\"}", id, states[k]);
			CU_ASSERT_TRUE(prom_sample_value(t, prefix, &v) && v == (k == 0));
			sum += v;
		}
		CU_ASSERT_EQUAL(sum, 1);
		snprintf(prefix, sizeof(prefix), "coreact_app_hits_total{lcore=\"%u\"}", id);
		CU_ASSERT_TRUE(prom_sample_value(t, prefix, &v) && v == 3);
		snprintf(prefix, sizeof(prefix), "coreact_app_depth{lcore=\"%u\"}", id);
		CU_ASSERT_TRUE(prom_sample_value(t, prefix, &v) && v == 9);
		snprintf(prefix, sizeof(prefix), "coreact_lcore_connections{lcore=\"%u\"}", id);
		CU_ASSERT_TRUE(prom_sample_value(t, prefix, &v) && v == 40 + id);
		/* Two counters as one metric with a code label, one under its own name. */
		snprintf(prefix, sizeof(prefix),
			 "coreact_t_responses_total{lcore=\"%u\",code=\"2xx\"}", id);
		CU_ASSERT_TRUE(prom_sample_value(t, prefix, &v) && v == 20 + id);
		snprintf(prefix, sizeof(prefix),
			 "coreact_t_responses_total{lcore=\"%u\",code=\"5xx\"}", id);
		CU_ASSERT_TRUE(prom_sample_value(t, prefix, &v) && v == 5);
		snprintf(prefix, sizeof(prefix), "coreact_t_sent_bytes_total{lcore=\"%u\"}", id);
		CU_ASSERT_TRUE(prom_sample_value(t, prefix, &v) && v == 7);
		n++;
	}
	CU_ASSERT_EQUAL(occurrences(t, "# TYPE coreact_t_responses_total counter\n"), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "# HELP coreact_t_responses_total Responses by status "
					 "class.\n# TYPE coreact_t_responses_total counter\n"));
	CU_ASSERT_PTR_NULL(strstr(t, "t_resp_2xx"));
	CU_ASSERT_PTR_NULL(strstr(t, "coreact_app_t_static"));
	/* info, state, the reactor's fields, every family of readers and counters (the
	 * libraries' and this suite's: two readers, two app values, two families of three
	 * counters), and the process metrics. Samples: one per lcore each (the silent reader:
	 * none; a state: four), info and each process metric one. */
	process = occurrences(t, "# TYPE process_");
	CU_ASSERT_TRUE(process >= 5);
	CU_ASSERT_EQUAL(c.metrics, 2 + cr__tel_n_fields + lib_families + 2 + 2 + 2 + process);
	CU_ASSERT_EQUAL(c.samples, 1 + process +
				       n * (4 + cr__tel_n_fields + (cr__tel_n_readers() - 1) +
					    cr__tel_n_counters()));
	CU_ASSERT_EQUAL(cr__tel_n_counters(), lib_counters + 5);
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "# TYPE coreact_app_hits_total counter\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "# TYPE coreact_app_depth gauge\n"));
	CU_ASSERT_PTR_NOT_NULL(
	    strstr(t, "# HELP coreact_app_hits_total Hits\\\\with\\nnewline.\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "# TYPE coreact_lcore_nothing gauge\n"));
	CU_ASSERT_PTR_NULL(strstr(t, "coreact_lcore_nothing{"));
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "# TYPE coreact_lcore_spin_budget_seconds gauge\n"));
}

static void
test_label_escaping(void)
{
	struct prom_check c;
	const char *t;

	snprintf(cr__tel_info.app, sizeof(cr__tel_info.app), "a\"b\\c\nd");
	t = render();
	c = prom_check_text(t);
	CU_ASSERT_EQUAL(c.bad_line, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(
	    t, "coreact_info{app=\"a\\\"b\\\\c\\nd\",version=\"" CR_VERSION "\",io_driver=\""));
	memset(&cr__tel_info, 0, sizeof(cr__tel_info));
}

static int
http(const char *req, const char **body)
{
	struct cr__tbuf t;
	int code;
	const char *sep;

	cr__tbuf_init(&t, text, sizeof(text));
	code = cr__http_respond(req, strlen(req), &t);
	CU_ASSERT_FALSE(t.overflow);
	sep = strstr(text, "\r\n\r\n");
	CU_ASSERT_PTR_NOT_NULL_FATAL(sep);
	*body = sep + 4;
	return code;
}

static void
test_http(void)
{
	static char longreq[400];
	unsigned long long len;
	const char *body;

	CU_ASSERT_EQUAL(http("GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*", &body), 200);
	CU_ASSERT_EQUAL(strncmp(text, "HTTP/1.0 200 OK\r\n", 17), 0);
	CU_ASSERT_PTR_NOT_NULL(
	    strstr(text, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
	CU_ASSERT_TRUE(ut_json_u64_after(text, NULL, "Content-Length: ", &len));
	CU_ASSERT_EQUAL(len, strlen(body));
	CU_ASSERT_EQUAL(strncmp(body, "# HELP coreact_info ", 20), 0);
	CU_ASSERT_EQUAL(prom_check_text(body).bad_line, 0);

	CU_ASSERT_EQUAL(http("HEAD /metrics HTTP/1.0", &body), 200);
	CU_ASSERT_TRUE(ut_json_u64_after(text, NULL, "Content-Length: ", &len));
	CU_ASSERT_TRUE(len > 0);
	CU_ASSERT_STRING_EQUAL(body, "");

	CU_ASSERT_EQUAL(http("GET /metrics?name[]=x HTTP/1.0", &body), 200);
	CU_ASSERT_EQUAL(http("GET / HTTP/1.0", &body), 200);
	CU_ASSERT_EQUAL(http("GET /stats HTTP/1.0", &body), 404);
	CU_ASSERT_EQUAL(strncmp(text, "HTTP/1.0 404 Not Found\r\n", 24), 0);
	CU_ASSERT_EQUAL(http("POST /metrics HTTP/1.0", &body), 405);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "Allow: GET, HEAD\r\n"));
	CU_ASSERT_EQUAL(http("GET /metrics", &body), 400);
	CU_ASSERT_EQUAL(http("GET /metrics FTP/1.0", &body), 400);
	CU_ASSERT_EQUAL(http("GET /metrics HTTP/1.0 extra", &body), 400);
	CU_ASSERT_EQUAL(http("\x01\x02", &body), 400);
	memset(longreq, 'a', sizeof(longreq) - 1);
	memcpy(longreq, "GET /", 5);
	CU_ASSERT_EQUAL(http(longreq, &body), 414);
}

static void
test_http_small_buffer(void)
{
	static char small[512];
	struct cr__tbuf t;

	cr__tbuf_init(&t, small, sizeof(small));
	CU_ASSERT_EQUAL(cr__http_respond("GET /metrics HTTP/1.0", 21, &t), 500);
	CU_ASSERT_FALSE(t.overflow);
	CU_ASSERT_EQUAL(strncmp(small, "HTTP/1.0 500 ", 13), 0);
}

static void
test_metrics_option(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char why[300];

	CU_ASSERT_EQUAL(cr__metrics_parse("127.0.0.1:9100", &ss, &len, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(ss.ss_family, AF_INET);
	CU_ASSERT_EQUAL(ntohs(((struct sockaddr_in *)&ss)->sin_port), 9100);
	CU_ASSERT_EQUAL(cr__metrics_parse("[::1]:0", &ss, &len, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(ss.ss_family, AF_INET6);
	CU_ASSERT_EQUAL(cr__metrics_parse("0.0.0.0:65535", &ss, &len, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(cr__metrics_parse("localhost:80", &ss, &len, why, sizeof(why)), 0);

	CU_ASSERT_EQUAL(cr__metrics_parse("127.0.0.1", &ss, &len, why, sizeof(why)), -EINVAL);
	CU_ASSERT_STRING_EQUAL(why, "no ':PORT'");
	CU_ASSERT_EQUAL(cr__metrics_parse(":80", &ss, &len, why, sizeof(why)), -EINVAL);
	CU_ASSERT_STRING_EQUAL(why, "empty host");
	CU_ASSERT_EQUAL(cr__metrics_parse("::1:80", &ss, &len, why, sizeof(why)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "brackets"));
	CU_ASSERT_EQUAL(cr__metrics_parse("1.2.3.4:65536", &ss, &len, why, sizeof(why)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "not a port"));
	CU_ASSERT_EQUAL(cr__metrics_parse("1.2.3.4:x", &ss, &len, why, sizeof(why)), -EINVAL);
	CU_ASSERT_EQUAL(cr__metrics_parse("1.2.3.4:", &ss, &len, why, sizeof(why)), -EINVAL);
	CU_ASSERT_EQUAL(cr__metrics_parse("[1.2.3.4]:80", &ss, &len, why, sizeof(why)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "cannot resolve"));

	/* The option setter keeps the last good value and refuses bad ones. */
	CU_ASSERT_EQUAL(cr_telemetry_set_metrics("bad", NULL), -EINVAL);
	CU_ASSERT_FALSE(cr__metrics_config(&ss, &len));
	CU_ASSERT_EQUAL(cr_telemetry_set_metrics("127.0.0.1:0", NULL), 0);
	CU_ASSERT_TRUE(cr__metrics_config(&ss, &len));
	cr__metrics_clear();
	CU_ASSERT_FALSE(cr__metrics_config(&ss, &len));
}

static int
suite_fini(void)
{
	ut_rt_fini();
	return 0;
}

static const struct ut_case cases[] = {
	UT_CASE(test_format_and_values),
	UT_CASE(test_label_escaping),
	UT_CASE(test_http),
	UT_CASE(test_http_small_buffer),
	UT_CASE(test_metrics_option),
};

UT_MAIN("telemetry_prom", cases, suite_init, suite_fini)
