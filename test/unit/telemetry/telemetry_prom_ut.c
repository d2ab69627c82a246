/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Prometheus: the text format checked line by line (HELP then TYPE then samples of that
 * metric, names, labels, escaping, numbers), values equal to the frozen counters, app
 * counters and readers, the HTTP answers, and --metrics HOST:PORT parsing.
 */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>

#include "telemetry_internal.h"
#include "ut_json.h"
#include "ut_runtime.h"
#include "ut_socket.h"

static unsigned lib_readers;

static char text[CR_TELEMETRY_MAX_REPLY + 1];
static int id_hits, id_depth;

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
}

static int
suite_init(void)
{
	lib_readers = cr__tel_n_readers(); /* before this suite registers its own */
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

/* ---- a checker for the exposition format ---- */

static bool
metric_name_ok(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
		      (i > 0 && c >= '0' && c <= '9')))
			return false;
	}
	return n > 0;
}

/* Labels from '{' to '}': name="value" pairs, value escapes \\ \" \n only. @return the
 * byte after '}', or NULL. */
static const char *
labels_ok(const char *p)
{
	if (*p++ != '{')
		return NULL;
	while (*p != '}') {
		const char *name = p;

		while ((*p >= 'a' && *p <= 'z') || *p == '_')
			p++;
		if (p == name || *p++ != '=' || *p++ != '"')
			return NULL;
		while (*p != '"') {
			if (*p == '\0' || *p == '\n')
				return NULL;
			if (*p == '\\' && p[1] != '\\' && p[1] != '"' && p[1] != 'n')
				return NULL;
			p += *p == '\\' ? 2 : 1;
		}
		p++;
		if (*p == ',')
			p++;
		else if (*p != '}')
			return NULL;
	}
	return p + 1;
}

struct prom_check {
	unsigned metrics, samples;
	unsigned bad_line; /* 1-based; 0 = all good */
};

static struct prom_check
check_text(const char *t)
{
	struct prom_check c = {0};
	char help[128] = "", type[128] = "";
	unsigned line = 0;

	while (*t != '\0') {
		const char *eol = strchr(t, '\n');
		size_t n;
		char tname[128], ttype[16];

		line++;
		if (eol == NULL)
			goto bad; /* every line ends in a newline */
		n = (size_t)(eol - t);
		if (strncmp(t, "# HELP ", 7) == 0) {
			if (sscanf(t + 7, "%127s", help) != 1)
				goto bad;
		} else if (strncmp(t, "# TYPE ", 7) == 0) {
			if (sscanf(t + 7, "%127s %15s", tname, ttype) != 2 ||
			    strcmp(tname, help) != 0 ||
			    (strcmp(ttype, "counter") != 0 && strcmp(ttype, "gauge") != 0))
				goto bad;
			/* Counters end in _total, gauges do not. */
			n = strlen(tname);
			if ((strcmp(ttype, "counter") == 0) !=
			    (n > 6 && strcmp(tname + n - 6, "_total") == 0))
				goto bad;
			snprintf(type, sizeof(type), "%s", tname);
			c.metrics++;
		} else {
			const char *brace = memchr(t, '{', n), *p;
			char *end;

			if (brace == NULL || !metric_name_ok(t, (size_t)(brace - t)) ||
			    strncmp(t, type, strlen(type)) != 0 ||
			    (size_t)(brace - t) != strlen(type))
				goto bad;
			p = labels_ok(brace);
			if (p == NULL || *p++ != ' ')
				goto bad;
			if (!isfinite(strtod(p, &end)) || end != eol)
				goto bad;
			c.samples++;
		}
		t = eol + 1;
	}
	return c;
bad:
	c.bad_line = line;
	return c;
}

static const char *
render(void)
{
	struct cr__tbuf t;

	cr__tbuf_init(&t, text, sizeof(text));
	cr__prom_render(&t);
	CU_ASSERT_FALSE(t.overflow);
	return text;
}

/* The value of the sample that starts with @p prefix (name and labels). */
static bool
sample_value(const char *t, const char *prefix, double *v)
{
	char key[256];
	const char *p;

	snprintf(key, sizeof(key), "\n%s ", prefix);
	p = strstr(t, key);
	if (p == NULL)
		return false;
	*v = strtod(p + strlen(key), NULL);
	return true;
}

/* ---- tests ---- */

static void
test_format_and_values(void)
{
	struct cr_lcore_stats st;
	unsigned id, n = 0;
	char prefix[128];
	struct prom_check c;
	const char *t;
	double v;

	CR_LCORE_FOREACH(id)
	CU_ASSERT_EQUAL(cr_telemetry_call_on(id, bump, NULL, 5000000000ull), 0);
	CU_ASSERT_TRUE(ut_rt_stop());
	t = render();
	c = check_text(t);
	if (c.bad_line != 0)
		fprintf(stderr, "bad line %u in:\n%s", c.bad_line, t);
	CU_ASSERT_EQUAL(c.bad_line, 0);
	for (id = cr__tel_lcore_next(CR_LCORE_NONE); id != CR_LCORE_NONE;
	     id = cr__tel_lcore_next(id)) {
		CU_ASSERT_EQUAL_FATAL(cr_lcore_stats(id, &st), 0);
		snprintf(prefix, sizeof(prefix), "coreact_lcore_turns_total{lcore=\"%u\"}", id);
		CU_ASSERT_TRUE(sample_value(t, prefix, &v) && v == (double)st.turns);
		snprintf(prefix, sizeof(prefix), "coreact_lcore_busy_seconds_total{lcore=\"%u\"}",
			 id);
		CU_ASSERT_TRUE(sample_value(t, prefix, &v) &&
			       fabs(v - (double)st.busy_ns * 1e-9) < 1e-9);
		snprintf(prefix, sizeof(prefix),
			 "coreact_lcore_state{lcore=\"%u\",state=\"OFFLINE\"}", id);
		CU_ASSERT_TRUE(sample_value(t, prefix, &v) && v == 0);
		snprintf(prefix, sizeof(prefix), "coreact_app_hits_total{lcore=\"%u\"}", id);
		CU_ASSERT_TRUE(sample_value(t, prefix, &v) && v == 3);
		snprintf(prefix, sizeof(prefix), "coreact_app_depth{lcore=\"%u\"}", id);
		CU_ASSERT_TRUE(sample_value(t, prefix, &v) && v == 9);
		snprintf(prefix, sizeof(prefix), "coreact_lcore_connections{lcore=\"%u\"}", id);
		CU_ASSERT_TRUE(sample_value(t, prefix, &v) && v == 40 + id);
		n++;
	}
	/* info, state, the reactor's fields, two readers (one never answers), two app values:
	 * one sample per lcore each, except info (one) and the silent reader (none). */
	/* Plus the readers the linked libraries registered (lib/io: ops in flight), each with
	 * one sample per lcore. */
	CU_ASSERT_EQUAL(c.metrics, 2 + cr__tel_n_fields + 2 + 2 + lib_readers);
	CU_ASSERT_EQUAL(c.samples, 1 + n * (1 + cr__tel_n_fields + 1 + 2 + lib_readers));
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
	c = check_text(t);
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
	CU_ASSERT_EQUAL(check_text(body).bad_line, 0);

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
