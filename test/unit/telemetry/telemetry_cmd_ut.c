/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Commands: registration rules, request parsing (size limit, control characters, unknown
 * commands, parameters), handler errors and bad output turned into JSON errors, /help, and
 * cr_telemetry_call_on() against the real runtime (runs once, or is withdrawn).
 */
#include "telemetry_internal.h"
#include "ut_json.h"
#include "ut_runtime.h"
#include "ut_socket.h"

static char out[CR_TELEMETRY_MAX_REPLY + 1];

/* Dispatch @p req and return the reply, checked to be JSON. */
static const char *
ask_n(const char *req, size_t n)
{
	static struct cr_json j;

	cr_json_init(&j, out, sizeof(out));
	cr__tel_dispatch(req, n, &j);
	CU_ASSERT_EQUAL(cr_json_finish(&j), 0);
	CU_ASSERT_TRUE(ut_json_valid(cr_json_text(&j)));
	return cr_json_text(&j);
}

static const char *
ask(const char *req)
{
	return ask_n(req, strlen(req));
}

static bool
is_error(const char *reply, const char *part)
{
	return strncmp(reply, "{\"error\":\"", 10) == 0 && strstr(reply, part) != NULL;
}

/* ---- handlers ---- */

static char last_params[CR_TELEMETRY_MAX_REQUEST + 1];

static int
h_echo(const char *cmd, const char *params, struct cr_json *reply)
{
	snprintf(last_params, sizeof(last_params), "%s", params);
	cr_json_object_begin(reply, NULL);
	cr_json_string(reply, "cmd", cmd);
	cr_json_string(reply, "params", params);
	cr_json_object_end(reply);
	return 0;
}

static int
h_fail_msg(const char *cmd, const char *params, struct cr_json *reply)
{
	(void)cmd;
	cr_json_object_begin(reply, NULL); /* thrown away */
	return cr_json_errorf(reply, -EINVAL, "'%s' is not a number", params);
}

static int
h_fail_plain(const char *cmd, const char *params, struct cr_json *reply)
{
	(void)cmd, (void)params, (void)reply;
	return -ENOENT;
}

static int
h_bad_json(const char *cmd, const char *params, struct cr_json *reply)
{
	(void)cmd, (void)params;
	cr_json_object_begin(reply, NULL);
	cr_json_u64(reply, NULL, 1);
	return 0;
}

static int
h_nothing(const char *cmd, const char *params, struct cr_json *reply)
{
	(void)cmd, (void)params, (void)reply;
	return 0;
}

static int
h_huge(const char *cmd, const char *params, struct cr_json *reply)
{
	(void)cmd, (void)params;
	cr_json_array_begin(reply, NULL);
	for (unsigned i = 0; i < 200000; i++)
		cr_json_string(reply, NULL, "0123456789");
	cr_json_array_end(reply);
	return 0;
}

static int
suite_init(void)
{
	static const struct {
		const char *name;
		cr_telemetry_cmd_fn fn;
	} hs[] = {{"/t/echo", h_echo},	      {"/t/fail", h_fail_msg},	 {"/t/plain", h_fail_plain},
		  {"/t/badjson", h_bad_json}, {"/t/nothing", h_nothing}, {"/t/huge", h_huge}};

	for (unsigned i = 0; i < sizeof(hs) / sizeof(hs[0]); i++)
		if (cr_telemetry_register(hs[i].name, hs[i].fn, "test \"help\"") != 0)
			return 1;
	return 0;
}

/* ---- registration ---- */

static void
test_register_rules(void)
{
	char longname[CR_TELEMETRY_CMD_LEN + 1];

	CU_ASSERT_EQUAL(cr_telemetry_register(NULL, h_echo, NULL), -EINVAL);
	CU_ASSERT_EQUAL(cr_telemetry_register("/ok", NULL, NULL), -EINVAL);
	CU_ASSERT_EQUAL(cr_telemetry_register("noslash", h_echo, NULL), -EINVAL);
	CU_ASSERT_EQUAL(cr_telemetry_register("/", h_echo, NULL), -EINVAL);
	CU_ASSERT_EQUAL(cr_telemetry_register("/a,b", h_echo, NULL), -EINVAL);
	CU_ASSERT_EQUAL(cr_telemetry_register("/a b", h_echo, NULL), -EINVAL);
	CU_ASSERT_EQUAL(cr_telemetry_register("/a\n", h_echo, NULL), -EINVAL);
	memset(longname, 'a', sizeof(longname));
	longname[0] = '/';
	longname[CR_TELEMETRY_CMD_LEN - 1] = '\0';
	CU_ASSERT_EQUAL(cr_telemetry_register(longname, h_echo, NULL), 0);
	longname[CR_TELEMETRY_CMD_LEN - 1] = 'a';
	longname[CR_TELEMETRY_CMD_LEN] = '\0';
	CU_ASSERT_EQUAL(cr_telemetry_register(longname, h_echo, NULL), -EINVAL);
	/* Built-ins and taken names. */
	CU_ASSERT_EQUAL(cr_telemetry_register("/stats", h_echo, NULL), -EEXIST);
	CU_ASSERT_EQUAL(cr_telemetry_register("/help", h_echo, NULL), -EEXIST);
	CU_ASSERT_EQUAL(cr_telemetry_register("/t/echo", h_echo, NULL), -EEXIST);
	/* The names the lifecycle commands will use are valid. */
	CU_ASSERT_TRUE(cr__tel_cmd_name_ok("/pool/resize"));
	CU_ASSERT_TRUE(cr__tel_cmd_name_ok("/lcore/retire"));
	CU_ASSERT_TRUE(cr__tel_cmd_name_ok("/app-x/v1.2_z"));
}

/* ---- parsing ---- */

static void
test_params(void)
{
	CU_ASSERT_STRING_EQUAL(ask("/t/echo"),
			       "{\"/t/echo\":{\"cmd\":\"/t/echo\",\"params\":\"\"}}");
	CU_ASSERT_STRING_EQUAL(ask("/t/echo,"),
			       "{\"/t/echo\":{\"cmd\":\"/t/echo\",\"params\":\"\"}}");
	/* Only the first comma splits; the rest is the handler's. */
	ask("/t/echo,1,2 x\"y");
	CU_ASSERT_STRING_EQUAL(last_params, "1,2 x\"y");
	/* A trailing "\r\n" or "\n" is not part of the request. */
	ask("/t/echo,abc\r\n");
	CU_ASSERT_STRING_EQUAL(last_params, "abc");
	ask("/t/echo,abc\n");
	CU_ASSERT_STRING_EQUAL(last_params, "abc");
	/* Bytes that are not UTF-8 reach the handler and come back escaped. */
	CU_ASSERT_PTR_NOT_NULL(strstr(ask("/t/echo,\xff"), "\\ufffd"));
}

static void
test_bad_requests(void)
{
	CU_ASSERT_TRUE(is_error(ask(""), "empty request"));
	CU_ASSERT_TRUE(is_error(ask("\r\n"), "empty request"));
	CU_ASSERT_TRUE(is_error(ask("/nope"), "unknown command '/nope'; try /help"));
	CU_ASSERT_TRUE(is_error(ask("/nope,1"), "unknown command '/nope'"));
	CU_ASSERT_TRUE(is_error(ask("stats"), "'stats' is not a command"));
	CU_ASSERT_TRUE(is_error(ask("/stats\x01"), "control characters"));
	CU_ASSERT_TRUE(is_error(ask("/st\tats"), "control characters"));
	CU_ASSERT_TRUE(is_error(ask_n("/stats\0x", 8), "control characters"));
	/* The error text quotes the request, escaped. */
	CU_ASSERT_TRUE(is_error(ask("/\"quote\\"), "unknown command '/\\\"quote\\\\'"));
}

static void
test_size_limit(void)
{
	static char req[CR_TELEMETRY_MAX_REQUEST + 8];
	size_t max = CR_TELEMETRY_MAX_REQUEST;

	/* At the limit it is parsed (and is unknown); one byte more is refused. */
	memset(req, 'x', sizeof(req));
	req[0] = '/';
	CU_ASSERT_TRUE(is_error(ask_n(req, max), "unknown command"));
	CU_ASSERT_TRUE(is_error(ask_n(req, max + 1), "request longer than 1024 bytes"));
	/* The newline does not count. */
	req[max] = '\n';
	CU_ASSERT_TRUE(is_error(ask_n(req, max + 1), "unknown command"));
	/* Parameters count. */
	memcpy(req, "/t/echo,", 8);
	req[max] = 'x';
	CU_ASSERT_FALSE(is_error(ask_n(req, max), ""));
	CU_ASSERT_EQUAL(strlen(last_params), max - 8);
	CU_ASSERT_TRUE(is_error(ask_n(req, max + 1), "request longer"));
}

/* ---- handler results ---- */

static void
test_handler_errors(void)
{
	CU_ASSERT_STRING_EQUAL(ask("/t/fail,x"), "{\"error\":\"/t/fail: 'x' is not a number\"}");
	CU_ASSERT_STRING_EQUAL(ask("/t/plain"),
			       "{\"error\":\"/t/plain: No such file or directory\"}");
	CU_ASSERT_STRING_EQUAL(ask("/t/badjson"),
			       "{\"error\":\"/t/badjson: the handler wrote invalid JSON\"}");
	CU_ASSERT_STRING_EQUAL(ask("/t/nothing"), "{\"/t/nothing\":null}");
	CU_ASSERT_TRUE(is_error(ask("/t/huge"), "/t/huge: reply longer than 1048576 bytes"));
	/* A failed reply leaves nothing behind for the next one. */
	CU_ASSERT_STRING_EQUAL(ask("/t/echo,ok"),
			       "{\"/t/echo\":{\"cmd\":\"/t/echo\",\"params\":\"ok\"}}");
}

static void
test_builtin_params(void)
{
	CU_ASSERT_TRUE(is_error(ask("/lcores,1"), "/lcores: takes no parameters, got '1'"));
	CU_ASSERT_TRUE(is_error(ask("/info,x"), "/info: takes no parameters"));
	CU_ASSERT_TRUE(is_error(ask("/stats,x"), "/stats: 'x' is not an lcore"));
	CU_ASSERT_TRUE(is_error(ask("/stats,99999"), "is not an lcore"));
	CU_ASSERT_TRUE(is_error(ask("/stats,-1"), "is not an lcore"));
}

static void
test_help(void)
{
	const char *r = ask("/help");

	CU_ASSERT_PTR_NOT_NULL(strstr(r, "\"/help\":{\"/help\":"));
	CU_ASSERT_PTR_NOT_NULL(strstr(r, "\"/lcores\":"));
	CU_ASSERT_PTR_NOT_NULL(strstr(r, "\"/stats\":"));
	CU_ASSERT_PTR_NOT_NULL(strstr(r, "\"/info\":"));
	CU_ASSERT_PTR_NOT_NULL(strstr(r, "\"/t/echo\":\"test \\\"help\\\"\""));
	CU_ASSERT_STRING_EQUAL(ask("/help,/t/echo"), "{\"/help\":\"test \\\"help\\\"\"}");
	CU_ASSERT_TRUE(is_error(ask("/help,/nope"), "/help: no command '/nope'"));
}

/* ---- registering until full ---- */

static void
test_register_until_full(void)
{
	char name[32];
	unsigned i, ok = 0;
	int rc = 0;

	for (i = 0; i < CR_TELEMETRY_MAX_COMMANDS + 1 && rc == 0; i++) {
		snprintf(name, sizeof(name), "/fill/%u", i);
		rc = cr_telemetry_register(name, h_nothing, NULL);
		ok += rc == 0;
	}
	CU_ASSERT_EQUAL(rc, -ENOSPC);
	/* Six in suite_init and one in test_register_rules. */
	CU_ASSERT_EQUAL(ok, CR_TELEMETRY_MAX_COMMANDS - 7);
	CU_ASSERT_STRING_EQUAL(ask("/fill/0"), "{\"/fill/0\":null}");
}

/* ---- cr_telemetry_call_on ---- */

struct on_lcore {
	_Atomic unsigned runs;
	unsigned lcore;
	bool block;
	_Atomic bool release;
};

static void
record(void *arg)
{
	struct on_lcore *o = arg;

	o->lcore = cr_lcore_id();
	atomic_fetch_add(&o->runs, 1);
	/* Hold the lcore, as a busy one would, until the test says so (bounded). */
	for (int i = 0; o->block && i < UT_WAIT_MS && !atomic_load(&o->release); i++)
		ut_sleep_ms(1);
}

static void
try_call_on_lcore(void *arg)
{
	int *rc = arg;

	*rc = cr_telemetry_call_on(cr_lcore_id(), record, NULL, 1000);
}

static void
test_call_on(void)
{
	struct on_lcore o = {0}, busy = {.block = true}, late = {0};
	unsigned id;
	int rc = 0;

	if (!ut_rt_start()) {
		CU_FAIL("runtime did not start");
		return;
	}
	CR_LCORE_FOREACH(id)
	{
		atomic_store(&o.runs, 0);
		CU_ASSERT_EQUAL(cr_telemetry_call_on(id, record, &o, 5000000000ull), 0);
		CU_ASSERT_EQUAL(atomic_load(&o.runs), 1);
		CU_ASSERT_EQUAL(o.lcore, id);
	}
	CU_ASSERT_EQUAL(cr_telemetry_call_on(CR_MAX_LCORES + 1, record, &o, 1000), -EINVAL);
	CU_ASSERT_EQUAL(cr_telemetry_call_on(cr_lcore_main(), NULL, &o, 1000), -EINVAL);
	/* On an lcore it would wait for itself. */
	CU_ASSERT_EQUAL(
	    cr_telemetry_call_on(cr_lcore_main(), try_call_on_lcore, &rc, 5000000000ull), 0);
	CU_ASSERT_EQUAL(rc, -EPERM);

	/* The lcore is busy: a second call times out, is withdrawn, and never runs. */
	id = cr_lcore_main();
	CU_ASSERT_EQUAL(cr_send(id, record, &busy), 0);
	for (int i = 0; i < UT_WAIT_MS && atomic_load(&busy.runs) == 0; i++)
		ut_sleep_ms(1);
	CU_ASSERT_EQUAL(cr_telemetry_call_on(id, record, &late, 20000000ull), -ETIMEDOUT);
	atomic_store(&busy.release, true);
	/* Once the lcore has run what was queued after it, the withdrawn call is gone. */
	CU_ASSERT_EQUAL(cr_telemetry_call_on(id, record, &o, 5000000000ull), 0);
	CU_ASSERT_EQUAL(atomic_load(&late.runs), 0);

	CU_ASSERT_TRUE(ut_rt_stop());
	/* Stopped: the mailbox is closed, and nothing is left behind. */
	CU_ASSERT_EQUAL(cr_telemetry_call_on(id, record, &o, 1000000ull), -ESHUTDOWN);
	ut_rt_fini();
}

static const struct ut_case cases[] = {
	UT_CASE(test_register_rules),
	UT_CASE(test_params),
	UT_CASE(test_bad_requests),
	UT_CASE(test_size_limit),
	UT_CASE(test_handler_errors),
	UT_CASE(test_builtin_params),
	UT_CASE(test_help),
	UT_CASE(test_register_until_full),
	UT_CASE(test_call_on),
};

UT_MAIN("telemetry_cmd", cases, suite_init, NULL)
