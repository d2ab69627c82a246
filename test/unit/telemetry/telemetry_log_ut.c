/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The log in telemetry (lib/telemetry/telemetry_log.c): /log shows where lines go and what
 * each lcore dropped, the log_dropped_lines reader counts an lcore's drops, /log/reopen
 * moves to a new file after a rename, and says so when it cannot. Against the real
 * runtime: the lines come from lcores, through the log thread.
 */
#include <sys/stat.h>

#include "eal_internal.h"
#include "telemetry_internal.h"
#include "ut_json.h"
#include "ut_runtime.h"
#include "ut_socket.h"
#include "tel_internal_ut.h"

CR_LOG_COMPONENT(log_ut, "test.tel");

static char out[CR_TELEMETRY_MAX_REPLY + 1];
static char text[1 << 20];
static char dir[64] = "/tmp/telemetry_log_ut.XXXXXX";

static const char *
ask(const char *req)
{
	return tel_ask(out, sizeof(out), req);
}

static const char *
slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	size_t n = 0;

	if (f != NULL) {
		n = fread(text, 1, sizeof(text) - 1, f);
		fclose(f);
	}
	text[n] = '\0';
	return text;
}

struct say {
	const char *what;
	unsigned times;
};

static void
say_on_lcore(void *arg)
{
	const struct say *s = arg;

	for (unsigned i = 0; i < s->times; i++)
		CR_LOG(log_ut, NOTICE,
		       "%s on lcore %u, line %u ............................"
		       "................................................",
		       s->what, cr_lcore_id(), i);
}

static unsigned
last_lcore(void)
{
	unsigned id, last = CR_LCORE_NONE;

	CR_LCORE_FOREACH(id)
	last = id;
	return last;
}

static void
test_log_and_reopen(void)
{
	char path[128], rotated[160], want[256];
	struct say one = {"first", 1}, two = {"second", 1};
	unsigned lc = last_lcore();

	snprintf(path, sizeof(path), "%s/app.log", dir);
	snprintf(rotated, sizeof(rotated), "%s.1", path);
	CU_ASSERT_EQUAL_FATAL(cr_log_set_file(path), 0);
	snprintf(want, sizeof(want),
		 "{\"/log\":{\"sink\":\"file\",\"path\":\"%s\",\"timestamps\":true,"
		 "\"dropped_lines\":{\"0\":0",
		 path);
	CU_ASSERT_EQUAL(strncmp(ask("/log"), want, strlen(want)), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "}}}"));

	CU_ASSERT_EQUAL_FATAL(cr_telemetry_call_on(lc, say_on_lcore, &one, 5000000000ull), 0);
	cr_log_flush();
	CU_ASSERT_EQUAL_FATAL(rename(path, rotated), 0);
	snprintf(want, sizeof(want),
		 "{\"/log/reopen\":{\"sink\":\"file\",\"path\":\"%s\","
		 "\"reopened\":true}}",
		 path);
	CU_ASSERT_STRING_EQUAL(ask("/log/reopen"), want);
	CU_ASSERT_EQUAL_FATAL(cr_telemetry_call_on(lc, say_on_lcore, &two, 5000000000ull), 0);
	cr_log_flush();
	CU_ASSERT_PTR_NOT_NULL(strstr(slurp(rotated), "test.tel: notice: first on lcore"));
	CU_ASSERT_PTR_NULL(strstr(text, "second"));
	CU_ASSERT_PTR_NOT_NULL(strstr(slurp(path), "test.tel: notice: second on lcore"));
	CU_ASSERT_PTR_NULL(strstr(text, "first"));
	CU_ASSERT_TRUE(strstr(ask("/log/reopen,x"), "takes no parameters") != NULL);

	/* The directory is gone: an error reply, and the old file keeps the lines. */
	unlink(path);
	unlink(rotated);
	CU_ASSERT_EQUAL_FATAL(rmdir(dir), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(ask("/log/reopen"),
				      "{\"error\":\"/log/reopen: cannot reopen the log: No such "
				      "file or directory; still writing to the old one\"}"));
	CU_ASSERT_EQUAL(mkdir(dir, 0700), 0);
	CU_ASSERT_EQUAL(cr_log_set_file(NULL), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(ask("/log"), "{\"/log\":{\"sink\":\"stderr\","));
}

static void
test_dropped_lines_reader(void)
{
	struct say many = {"flood", 2000};
	struct cr__tel_snap s;
	char path[128], want[64];
	unsigned lc = last_lcore(), r, found = UINT32_MAX;
	uint64_t dropped;

	snprintf(path, sizeof(path), "%s/flood.log", dir);
	CU_ASSERT_EQUAL_FATAL(cr_log_set_file(path), 0);
	/* The log thread holds off: 2000 lines of ~170 bytes do not fit 64 KiB. */
	cr__log_pause(true);
	CU_ASSERT_EQUAL_FATAL(cr_telemetry_call_on(lc, say_on_lcore, &many, 5000000000ull), 0);
	dropped = cr_log_dropped(lc);
	CU_ASSERT_TRUE(dropped > 1000 && dropped < 2000);
	CU_ASSERT_EQUAL_FATAL(cr__tel_snapshot(lc, &s), 0);
	for (r = 0; r < s.n_readers; r++)
		if (strcmp(cr__tel_reader(r)->name, "log_dropped_lines") == 0)
			found = r;
	CU_ASSERT_TRUE_FATAL(found != UINT32_MAX);
	CU_ASSERT_TRUE(s.reader_ok[found]);
	CU_ASSERT_EQUAL(s.reader[found], dropped);
	snprintf(want, sizeof(want), "\"%u\":%llu", lc, (unsigned long long)dropped);
	CU_ASSERT_PTR_NOT_NULL(strstr(ask("/log"), want));
	cr__log_pause(false);
	cr_log_flush();
	snprintf(want, sizeof(want), "%llu log lines dropped on lcore %u",
		 (unsigned long long)dropped, lc);
	CU_ASSERT_PTR_NOT_NULL(strstr(slurp(path), want));
	CU_ASSERT_EQUAL(cr_log_set_file(NULL), 0);
	unlink(path);
}

static int
suite_init(void)
{
	cr_log_set_level("test.tel:notice");
	if (mkdtemp(dir) == NULL)
		return 1;
	return ut_rt_start() ? 0 : 1;
}

static int
suite_fini(void)
{
	bool ok = ut_rt_stop();

	ut_rt_fini();
	rmdir(dir);
	return ok ? 0 : 1;
}

static const struct ut_case cases[] = {
    UT_CASE(test_log_and_reopen),
    UT_CASE(test_dropped_lines_reader),
};

UT_MAIN("telemetry_log", cases, suite_init, suite_fini)
