/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Where log lines go (lib/eal/eal_log_sink.c): the RFC 3339 timestamp, a log file renamed
 * and reopened, syslog datagrams.
 */
#include <regex.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include "log_ut.h"

/* ---- timestamps ---- */

static void
test_time_format_matches_gmtime(void)
{
	/* Epoch, leap days, century rules, the end of 32-bit time, four-digit years. */
	static const int64_t fixed[] = {0,	    86399,	86400,	     951782400,
					951868800,  4107542400, 4107628800,  2147483647,
					2147483648, 1709164800, 253402300799};
	char got[64], want[64];
	struct tm tm;
	unsigned seed = 12345;

	for (unsigned i = 0; i < sizeof(fixed) / sizeof(fixed[0]) + 20000; i++) {
		int64_t t;
		time_t tt;

		if (i < sizeof(fixed) / sizeof(fixed[0])) {
			t = fixed[i];
		} else {
			seed = seed * 1103515245u + 12345u;
			t = (int64_t)(seed % 4102444800u); /* 1970 .. 2100 */
		}
		tt = (time_t)t;
		CU_ASSERT_PTR_NOT_NULL_FATAL(gmtime_r(&tt, &tm));
		snprintf(want, sizeof(want), "%04d-%02d-%02dT%02d:%02d:%02d.789Z ",
			 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
			 tm.tm_sec);
		CU_ASSERT_EQUAL(cr__log_format_time(got, sizeof(got), t, 789999999),
				CR__LOG_STAMP_LEN);
		if (strcmp(got, want) != 0) {
			fprintf(stderr, "\n  %lld: got %s, want %s\n", (long long)t, got, want);
			CU_FAIL("timestamp differs from gmtime_r");
			break;
		}
	}
	CU_ASSERT_EQUAL(cr__log_format_time(got, CR__LOG_STAMP_LEN, 0, 0), 0);
}

static void
test_line_has_timestamp(void)
{
	struct capture c;
	regex_t re;
	struct timespec now;
	struct tm tm;
	char want[32];

	CU_ASSERT_EQUAL_FATAL(regcomp(&re,
				      "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\."
				      "[0-9]{3}Z lib\\.a: warning: stamped 7\n$",
				      REG_EXTENDED),
			      0);
	cr_log_set_timestamps(true);
	CU_ASSERT_TRUE(cr_log_timestamps());
	clock_gettime(CLOCK_REALTIME, &now);
	capture_begin(&c);
	CR_LOG(lib_a, WARNING, "stamped %d", 7);
	capture_end(&c);
	CU_ASSERT_EQUAL(regexec(&re, err_text, 0, NULL, 0), 0);
	/* The date is today's (UTC), to the minute unless one just turned. */
	gmtime_r(&now.tv_sec, &tm);
	strftime(want, sizeof(want), "%Y-%m-%dT%H:", &tm);
	CU_ASSERT_EQUAL(strncmp(err_text, want, strlen(want)), 0);
	regfree(&re);

	cr_log_set_timestamps(false);
	CU_ASSERT_FALSE(cr_log_timestamps());
	capture_begin(&c);
	CR_LOG(lib_a, WARNING, "bare");
	capture_end(&c);
	CU_ASSERT_STRING_EQUAL(err_text, "lib.a: warning: bare\n");
	cr_log_set_timestamps(true);
}

static void
test_file_and_reopen(void)
{
	char path[128], rotated[160], buf[256];

	cr_log_set_timestamps(false);
	path_in_tmp(path, sizeof(path), "app.log");
	snprintf(rotated, sizeof(rotated), "%s.1", path);
	CU_ASSERT_EQUAL(cr_log_sink(NULL, 0), CR_LOG_SINK_STDERR);
	CU_ASSERT_EQUAL_FATAL(cr_log_set_file(path), 0);
	CU_ASSERT_EQUAL(cr_log_sink(buf, sizeof(buf)), CR_LOG_SINK_FILE);
	CU_ASSERT_STRING_EQUAL(buf, path);
	/* Flushed after each line: were the log thread running (this suite never starts
	 * it), a line still buffered at a reopen would go to the new file. */
	CR_LOG(lib_a, NOTICE, "one");
	cr_log_flush();
	/* logrotate renames the file; we keep writing to it until told to reopen. */
	CU_ASSERT_EQUAL_FATAL(rename(path, rotated), 0);
	CR_LOG(lib_a, NOTICE, "two");
	cr_log_flush();
	CU_ASSERT_EQUAL(cr_log_reopen(), 0);
	CR_LOG(lib_a, NOTICE, "three");
	cr_log_flush();
	CU_ASSERT_STRING_EQUAL(slurp(rotated), "lib.a: notice: one\nlib.a: notice: two\n");
	CU_ASSERT_STRING_EQUAL(slurp(path), "lib.a: notice: three\n");

	/* Appended, not truncated, when set again. */
	CU_ASSERT_EQUAL(cr_log_set_file(path), 0);
	CR_LOG(lib_a, NOTICE, "four");
	cr_log_flush();
	CU_ASSERT_STRING_EQUAL(slurp(path), "lib.a: notice: three\nlib.a: notice: four\n");

	/* A reopen that fails keeps the old file and says why, in it. */
	unlink(path);
	unlink(rotated);
	CU_ASSERT_EQUAL_FATAL(rmdir(tmpdir), 0);
	CU_ASSERT_EQUAL(cr_log_reopen(), -ENOENT);
	CU_ASSERT_EQUAL(cr_log_sink(NULL, 0), CR_LOG_SINK_FILE);
	CU_ASSERT_EQUAL(mkdir(tmpdir, 0700), 0);

	/* Bad paths change nothing. */
	CU_ASSERT_EQUAL(cr_log_set_file(""), -EINVAL);
	CU_ASSERT_EQUAL(cr_log_set_file("/nonexistent-dir/x.log"), -ENOENT);
	CU_ASSERT_EQUAL(cr_log_sink(buf, sizeof(buf)), CR_LOG_SINK_FILE);
	CU_ASSERT_STRING_EQUAL(buf, path);

	/* Back to stderr; reopening stderr is nothing. */
	CU_ASSERT_EQUAL(cr_log_set_file(NULL), 0);
	CU_ASSERT_EQUAL(cr_log_sink(buf, sizeof(buf)), CR_LOG_SINK_STDERR);
	CU_ASSERT_STRING_EQUAL(buf, "stderr");
	CU_ASSERT_EQUAL(cr_log_reopen(), 0);
	cr_log_set_timestamps(true);
}

/* ---- syslog ---- */

static void
test_syslog(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char want[128], got[512];
	int fd;
	ssize_t n;

	path_in_tmp(sa.sun_path, sizeof(sa.sun_path), "log.sock");
	fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	CU_ASSERT_EQUAL_FATAL(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr__log_set_syslog_path(sa.sun_path);
	CU_ASSERT_EQUAL_FATAL(cr_log_set_syslog("ut-ident"), 0);
	CU_ASSERT_EQUAL(cr_log_sink(got, sizeof(got)), CR_LOG_SINK_SYSLOG);
	CU_ASSERT_STRING_EQUAL(got, "ut-ident");
	CR_LOG(lib_a, WARNING, "to syslog %d", 1);
	CR_LOG(lib_a, ERR, "an error");
	/* Were the log thread running, this thread's lines would go through it. */
	cr_log_flush();
	/* facility daemon (3 << 3) + severity; no timestamp of ours, no newline. */
	snprintf(want, sizeof(want), "<28>ut-ident[%d]: lib.a: warning: to syslog 1", getpid());
	n = recv(fd, got, sizeof(got) - 1, MSG_DONTWAIT);
	CU_ASSERT_TRUE_FATAL(n > 0);
	got[n] = '\0';
	CU_ASSERT_STRING_EQUAL(got, want);
	snprintf(want, sizeof(want), "<27>ut-ident[%d]: lib.a: err: an error", getpid());
	n = recv(fd, got, sizeof(got) - 1, MSG_DONTWAIT);
	CU_ASSERT_TRUE_FATAL(n > 0);
	got[n] = '\0';
	CU_ASSERT_STRING_EQUAL(got, want);
	/* The daemon restarts: reopen connects again. */
	close(fd);
	unlink(sa.sun_path);
	CU_ASSERT_EQUAL(cr_log_reopen(), -ENOENT);
	CU_ASSERT_EQUAL(cr_log_sink(NULL, 0), CR_LOG_SINK_SYSLOG);
	fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	CU_ASSERT_EQUAL_FATAL(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	CU_ASSERT_EQUAL(cr_log_reopen(), 0);
	CR_LOG(lib_a, WARNING, "again");
	cr_log_flush();
	/* The line saying the first reopen failed may come first (the log thread wrote it
	 * when it got to it). */
	do {
		n = recv(fd, got, sizeof(got) - 1, MSG_DONTWAIT);
		got[n > 0 ? n : 0] = '\0';
	} while (n > 0 && strstr(got, "lib.eal: err: cannot reopen the log syslog") != NULL);
	CU_ASSERT_PTR_NOT_NULL(strstr(got, "lib.a: warning: again"));
	close(fd);
	unlink(sa.sun_path);
	/* No daemon at all: an error, and the sink stays. */
	cr__log_set_syslog_path("/nonexistent-dir/log");
	CU_ASSERT_EQUAL(cr_log_set_syslog("x"), -ENOENT);
	CU_ASSERT_EQUAL(cr_log_set_syslog(NULL), 0);
	CU_ASSERT_EQUAL(cr_log_sink(NULL, 0), CR_LOG_SINK_STDERR);
	cr__log_set_syslog_path("/dev/log");
}

static const struct ut_case cases[] = {
    {"timestamps agree with gmtime_r", test_time_format_matches_gmtime},
    {"a line starts with its RFC 3339 time", test_line_has_timestamp},
    {"log file, rename and reopen", test_file_and_reopen},
    {"syslog datagrams", test_syslog},
};

UT_MAIN("eal_log_sink", cases, log_suite_init, log_suite_fini)
