/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Log components, levels and lines (lib/eal/eal_log.c); timestamps, sinks and reopening
 * (eal_log_sink.c); the log thread, per-thread buffers and dropping (eal_log_thread.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ut_cunit.h"

#include "cr_eal.h"
#include "cr_log.h"
#include "eal_internal.h"

#define OUT_MAX (1 << 20)

CR_LOG_COMPONENT(static_comp, "test.static")

static struct cr_log_component lib_a = {"lib.a", CR_LOG_NOTICE, NULL};
static struct cr_log_component lib_b = {"lib.b", CR_LOG_NOTICE, NULL};
static struct cr_log_component drv_x = {"drv.x", CR_LOG_NOTICE, NULL};

static char *err_text;

/* ---- capturing stderr ---- */

struct capture {
	int saved;
	FILE *tmp;
};

static void
capture_begin(struct capture *c)
{
	fflush(NULL);
	c->tmp = tmpfile();
	CU_ASSERT_PTR_NOT_NULL_FATAL(c->tmp);
	c->saved = dup(STDERR_FILENO);
	dup2(fileno(c->tmp), STDERR_FILENO);
}

static void
capture_end(struct capture *c)
{
	size_t n;

	dup2(c->saved, STDERR_FILENO);
	close(c->saved);
	rewind(c->tmp);
	n = fread(err_text, 1, OUT_MAX - 1, c->tmp);
	err_text[n] = '\0';
	fclose(c->tmp);
}

static int
level_of(const struct cr_log_component *c)
{
	return atomic_load(&c->level);
}

/* ---- tests ---- */

static void
test_static_component(void)
{
	CU_ASSERT_EQUAL(level_of(&static_comp), CR_LOG_NOTICE);
	CU_ASSERT_EQUAL(cr_log_set_level("test.static:debug"), 0);
	CU_ASSERT_EQUAL(level_of(&static_comp), CR_LOG_DEBUG);
}

static void
test_parse_level(void)
{
	static const char *const bad[] = {"", "2", "8", "37", "loud", "debug ", "-1"};

	CU_ASSERT_EQUAL(cr_log_parse_level("err"), CR_LOG_ERR);
	CU_ASSERT_EQUAL(cr_log_parse_level("error"), CR_LOG_ERR);
	CU_ASSERT_EQUAL(cr_log_parse_level("warning"), CR_LOG_WARNING);
	CU_ASSERT_EQUAL(cr_log_parse_level("warn"), CR_LOG_WARNING);
	CU_ASSERT_EQUAL(cr_log_parse_level("notice"), CR_LOG_NOTICE);
	CU_ASSERT_EQUAL(cr_log_parse_level("INFO"), CR_LOG_INFO);
	CU_ASSERT_EQUAL(cr_log_parse_level("debug"), CR_LOG_DEBUG);
	CU_ASSERT_EQUAL(cr_log_parse_level("3"), CR_LOG_ERR);
	CU_ASSERT_EQUAL(cr_log_parse_level("7"), CR_LOG_DEBUG);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CU_ASSERT_EQUAL(cr_log_parse_level(bad[i]), -EINVAL);
	CU_ASSERT_EQUAL(cr_log_parse_level(NULL), -EINVAL);
}

static void
test_patterns(void)
{
	cr_log_register(&lib_a);
	cr_log_register(&lib_b);
	cr_log_register(&drv_x);
	cr_log_register(&lib_a); /* twice is harmless */

	CU_ASSERT_EQUAL(cr_log_set_level("notice"), 0);
	CU_ASSERT_EQUAL(cr_log_set_level("lib.*:debug"), 0);
	CU_ASSERT_EQUAL(level_of(&lib_a), CR_LOG_DEBUG);
	CU_ASSERT_EQUAL(level_of(&lib_b), CR_LOG_DEBUG);
	CU_ASSERT_EQUAL(level_of(&drv_x), CR_LOG_NOTICE);

	/* Several at once, applied in order: the later one wins. */
	CU_ASSERT_EQUAL(cr_log_set_level("drv.x:err,lib.a:4,lib.b:info,lib.b:3"), 0);
	CU_ASSERT_EQUAL(level_of(&lib_a), CR_LOG_WARNING);
	CU_ASSERT_EQUAL(level_of(&lib_b), CR_LOG_ERR);
	CU_ASSERT_EQUAL(level_of(&drv_x), CR_LOG_ERR);

	/* An exact name is not a prefix. */
	CU_ASSERT_EQUAL(cr_log_set_level("lib:debug,lib.:debug"), 0);
	CU_ASSERT_EQUAL(level_of(&lib_a), CR_LOG_WARNING);

	CU_ASSERT_EQUAL(cr_log_set_level("*:info"), 0);
	CU_ASSERT_EQUAL(level_of(&drv_x), CR_LOG_INFO);
	CU_ASSERT_EQUAL(level_of(&lib_a), CR_LOG_INFO);

	CU_ASSERT_EQUAL(cr_log_set_level("warning"), 0);
	CU_ASSERT_EQUAL(level_of(&lib_a), CR_LOG_WARNING);
	CU_ASSERT_EQUAL(level_of(&drv_x), CR_LOG_WARNING);
	CU_ASSERT_EQUAL(level_of(&static_comp), CR_LOG_WARNING);
}

static void
test_later_registration(void)
{
	static struct cr_log_component lib_c = {"lib.c", CR_LOG_NOTICE, NULL};
	static struct cr_log_component lib_d = {"lib.d", CR_LOG_NOTICE, NULL};
	static struct cr_log_component drv_y = {"drv.y", CR_LOG_NOTICE, NULL};
	static struct cr_log_component other = {"other", CR_LOG_NOTICE, NULL};
	static struct cr_log_component lib_e = {"lib.e", CR_LOG_NOTICE, NULL};

	CU_ASSERT_EQUAL(cr_log_set_level("notice"), 0);
	CU_ASSERT_EQUAL(cr_log_set_level("lib.*:debug,lib.d:err"), 0);
	CU_ASSERT_EQUAL(cr_log_set_level("drv.y:info"), 0);
	cr_log_register(&lib_c);
	cr_log_register(&lib_d);
	cr_log_register(&drv_y);
	cr_log_register(&other);
	CU_ASSERT_EQUAL(level_of(&lib_c), CR_LOG_DEBUG);
	CU_ASSERT_EQUAL(level_of(&lib_d), CR_LOG_ERR);
	CU_ASSERT_EQUAL(level_of(&drv_y), CR_LOG_INFO);
	CU_ASSERT_EQUAL(level_of(&other), CR_LOG_NOTICE);

	/* A global level replaces what came before, for later components too. */
	CU_ASSERT_EQUAL(cr_log_set_level("err"), 0);
	cr_log_register(&lib_e);
	CU_ASSERT_EQUAL(level_of(&lib_e), CR_LOG_ERR);
	CU_ASSERT_EQUAL(level_of(&lib_c), CR_LOG_ERR);
}

static void
test_many_specs(void)
{
	static struct cr_log_component late = {"many.late", CR_LOG_NOTICE, NULL};
	char spec[64];

	CU_ASSERT_EQUAL(cr_log_set_level("notice"), 0);
	CU_ASSERT_EQUAL(cr_log_set_level("many.late:debug"), 0);
	/* More patterns than are remembered: the oldest is forgotten, nothing breaks. */
	for (int i = 0; i < 40; i++) {
		snprintf(spec, sizeof(spec), "many.%d:info", i);
		CU_ASSERT_EQUAL(cr_log_set_level(spec), 0);
	}
	cr_log_register(&late);
	CU_ASSERT_EQUAL(level_of(&late), CR_LOG_NOTICE);
	CU_ASSERT_EQUAL(cr_log_set_level("notice"), 0);
}

static void
test_bad_spec_changes_nothing(void)
{
	static const char *const bad[] = {
		"",	     ",",	    "lib.*:loud",   "lib.a:",	  ":debug", "debug,",
		",debug",    "8",	    "lib.a:debug:x", "lib.a:debug,lib.b:nope",
		"lib.a:debug,,info",
		"3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3", /* 17 elements */
		"a123456789012345678901234567890123456789012345678901234567890123:debug",
	};
	static struct cr_log_component late = {"lib.late", CR_LOG_NOTICE, NULL};

	CU_ASSERT_EQUAL(cr_log_set_level("notice,lib.a:info"), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CU_ASSERT_EQUAL(cr_log_set_level(bad[i]), -EINVAL);
		CU_ASSERT_EQUAL(level_of(&lib_a), CR_LOG_INFO);
		CU_ASSERT_EQUAL(level_of(&lib_b), CR_LOG_NOTICE);
	}
	CU_ASSERT_EQUAL(cr_log_set_level(NULL), -EINVAL);
	cr_log_register(&late);
	CU_ASSERT_EQUAL(level_of(&late), CR_LOG_NOTICE);
}

static void
test_write(void)
{
	struct capture c;
	char big[3000];

	CU_ASSERT_EQUAL(cr_log_set_level("notice"), 0);
	cr_log_set_timestamps(false);
	capture_begin(&c);
	CR_LOG(lib_a, NOTICE, "hello %d", 5);
	CR_LOG(lib_a, DEBUG, "hidden");
	CR_LOG(lib_a, ERR, "ends in a newline\n");
	cr_log_write(&lib_b, CR_LOG_INFO, "filtered too");
	cr_log_write(&lib_b, CR_LOG_WARNING, "%s", "direct");
	capture_end(&c);
	CU_ASSERT_STRING_EQUAL(err_text, "lib.a: notice: hello 5\n"
					 "lib.a: err: ends in a newline\n"
					 "lib.b: warning: direct\n");

	/* Too long: truncated, still one line. */
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	capture_begin(&c);
	CR_LOG(lib_a, NOTICE, "%s", big);
	capture_end(&c);
	/* 1 KiB with the timestamp, which is not shown here. */
	CU_ASSERT_EQUAL(strlen(err_text), 1023 - CR__LOG_STAMP_LEN);
	CU_ASSERT_EQUAL(strncmp(err_text, "lib.a: notice: xxx", 18), 0);
	CU_ASSERT_EQUAL(err_text[1022 - CR__LOG_STAMP_LEN], '\n');

	/* errno survives logging. */
	errno = EBADF;
	capture_begin(&c);
	CR_LOG(lib_a, ERR, "close: %s", strerror(errno));
	capture_end(&c);
	CU_ASSERT_EQUAL(errno, EBADF);
	cr_log_set_timestamps(true);
}

#define WRITERS 4
#define LINES	500

static void *
writer(void *arg)
{
	long id = (long)arg;

	for (int i = 0; i < LINES; i++)
		CR_LOG(lib_a, NOTICE, "writer %ld line %d ................................", id, i);
	return NULL;
}

static void
test_lines_do_not_interleave(void)
{
	pthread_t t[WRITERS];
	unsigned counts[WRITERS] = {0};
	struct capture c;
	unsigned lines = 0;

	cr_log_set_timestamps(false);
	capture_begin(&c);
	for (long i = 0; i < WRITERS; i++)
		pthread_create(&t[i], NULL, writer, (void *)i);
	for (int i = 0; i < WRITERS; i++)
		pthread_join(t[i], NULL);
	capture_end(&c);

	for (char *line = strtok(err_text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
		long id;
		int n, end = 0;

		lines++;
		if (sscanf(line, "lib.a: notice: writer %ld line %d %n", &id, &n, &end) != 2 ||
		    id < 0 || id >= WRITERS || strlen(line + end) != 32) {
			CU_FAIL("mangled line");
			continue;
		}
		counts[id]++;
	}
	CU_ASSERT_EQUAL(lines, WRITERS * LINES);
	for (int i = 0; i < WRITERS; i++)
		CU_ASSERT_EQUAL(counts[i], LINES);
	cr_log_set_timestamps(true);
}

/* ---- timestamps ---- */

static void
test_time_format_matches_gmtime(void)
{
	/* Epoch, leap days, century rules, the end of 32-bit time, four-digit years. */
	static const int64_t fixed[] = {0,	     86399,	 86400,	     951782400,
					951868800,   4107542400, 4107628800, 2147483647,
					2147483648,  1709164800, 253402300799};
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

/* ---- files ---- */

static char tmpdir[64];

static void
path_in_tmp(char *buf, size_t len, const char *name)
{
	if (tmpdir[0] == '\0') {
		snprintf(tmpdir, sizeof(tmpdir), "/tmp/eal_log_ut.XXXXXX");
		CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(tmpdir));
	}
	snprintf(buf, len, "%s/%s", tmpdir, name);
}

/* The whole of @p path into err_text ("" if it does not exist). */
static const char *
slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	size_t n = 0;

	if (f != NULL) {
		n = fread(err_text, 1, OUT_MAX - 1, f);
		fclose(f);
	}
	err_text[n] = '\0';
	return err_text;
}

static unsigned
count_lines(const char *text, const char *needle)
{
	unsigned n = 0;

	for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle))
		n++;
	return n;
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
	/* Flushed after each line: were the log thread running (it is not yet, in this
	 * order), a line still buffered at a reopen would go to the new file. */
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

/* ---- the log thread ---- */

struct attached_writer {
	unsigned id;
	unsigned lines;
	int rc;
};

static void *
attached_writer(void *arg)
{
	struct attached_writer *w = arg;

	w->rc = cr_log_attach(w->id);
	for (unsigned i = 0; w->rc == 0 && i < w->lines; i++)
		CR_LOG(lib_a, NOTICE, "lcore %u line %u", w->id, i);
	cr_log_detach();
	return NULL;
}

static void
test_attached_threads_write_through_log_thread(void)
{
	struct attached_writer w[3] = {{.id = 1, .lines = 300},
				       {.id = 2, .lines = 300},
				       {.id = 3, .lines = 300}};
	pthread_t t[3];
	char path[128], needle[64];

	cr_log_set_timestamps(false);
	path_in_tmp(path, sizeof(path), "thread.log");
	CU_ASSERT_EQUAL_FATAL(cr_log_set_file(path), 0);
	CU_ASSERT_EQUAL(cr_log_attach(CR_MAX_LCORES), -EINVAL);
	for (int i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, attached_writer, &w[i]);
	for (int i = 0; i < 3; i++) {
		pthread_join(t[i], NULL);
		CU_ASSERT_EQUAL(w[i].rc, 0);
	}
	/* An unattached thread shares the other buffer while the log thread runs. */
	CR_LOG(lib_b, NOTICE, "from the test thread");
	cr_log_flush();
	slurp(path);
	for (unsigned id = 1; id <= 3; id++) {
		snprintf(needle, sizeof(needle), "lib.a: notice: lcore %u line ", id);
		CU_ASSERT_EQUAL(count_lines(err_text, needle), 300);
		/* In order per thread. */
		snprintf(needle, sizeof(needle), "lcore %u line 299\n", id);
		CU_ASSERT_PTR_NOT_NULL(strstr(err_text, needle));
		CU_ASSERT_TRUE(strstr(err_text, needle) >
			       strstr(err_text, id == 1   ? "lcore 1 line 298\n"
						: id == 2 ? "lcore 2 line 298\n"
							  : "lcore 3 line 298\n"));
		CU_ASSERT_EQUAL(cr_log_dropped(id), 0);
	}
	CU_ASSERT_EQUAL(count_lines(err_text, "lib.b: notice: from the test thread\n"), 1);
	CU_ASSERT_EQUAL(cr_log_dropped(CR_LOG_OTHER_THREADS), 0);

	/* Two threads cannot share one buffer. */
	CU_ASSERT_EQUAL(cr_log_attach(4), 0);
	{
		struct attached_writer dup = {.id = 4, .lines = 0};
		pthread_t d;

		pthread_create(&d, NULL, attached_writer, &dup);
		pthread_join(d, NULL);
		CU_ASSERT_EQUAL(dup.rc, -EBUSY);
	}
	cr_log_detach();
	cr_log_detach(); /* twice is nothing */
	CU_ASSERT_EQUAL(cr_log_set_file(NULL), 0);
	unlink(path);
	cr_log_set_timestamps(true);
}

static void
test_full_buffer_drops_and_counts(void)
{
	char path[128], line[64], want[128];
	const unsigned total = 500;
	/* A record is a 4-byte header and the line, its timestamp included (the file sink
	 * leaves it out here): "<stamp>lib.a: notice: drop NNN\n". */
	const size_t rec = 4 + CR__LOG_STAMP_LEN + strlen("lib.a: notice: drop 000\n");
	const unsigned fit = (unsigned)(4096 / rec);

	cr_log_set_timestamps(false);
	path_in_tmp(path, sizeof(path), "drop.log");
	CU_ASSERT_EQUAL_FATAL(cr_log_set_file(path), 0);
	cr__log_set_buf_size(4096);
	CU_ASSERT_EQUAL_FATAL(cr_log_attach(9), 0);
	cr__log_set_buf_size(64 * 1024);
	cr__log_pause(true);
	for (unsigned i = 0; i < total; i++)
		CR_LOG(lib_a, NOTICE, "drop %03u", i);
	CU_ASSERT_EQUAL(cr_log_dropped(9), total - fit);
	/* Nothing was written while the log thread was held. */
	CU_ASSERT_STRING_EQUAL(slurp(path), "");
	cr__log_pause(false);
	cr_log_flush();
	slurp(path);
	CU_ASSERT_EQUAL(count_lines(err_text, "lib.a: notice: drop "), fit);
	snprintf(line, sizeof(line), "drop %03u\n", fit - 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err_text, line));
	snprintf(line, sizeof(line), "drop %03u\n", fit);
	CU_ASSERT_PTR_NULL(strstr(err_text, line));
	snprintf(want, sizeof(want),
		 "lib.eal: warning: %u log lines dropped on lcore 9: its log buffer was full\n",
		 total - fit);
	CU_ASSERT_EQUAL(count_lines(err_text, want), 1);

	/* Drained, the buffer takes lines again, and the drops are not reported twice. */
	CR_LOG(lib_a, NOTICE, "after");
	cr_log_flush();
	slurp(path);
	CU_ASSERT_EQUAL(count_lines(err_text, "lib.a: notice: after\n"), 1);
	CU_ASSERT_EQUAL(count_lines(err_text, "log lines dropped"), 1);
	CU_ASSERT_EQUAL(cr_log_dropped(9), total - fit);
	cr_log_detach();
	CU_ASSERT_EQUAL(cr_log_set_file(NULL), 0);
	unlink(path);
	cr_log_set_timestamps(true);
}

static void *
pipe_reader(void *arg)
{
	int fd = *(int *)arg;
	char buf[4096];

	while (read(fd, buf, sizeof(buf)) > 0)
		;
	return NULL;
}

static void
test_stuck_sink_does_not_block_producer(void)
{
	char path[64];
	int p[2], flags;
	pthread_t reader;
	unsigned i;

	/* A pipe nobody reads, filled up: a write to it blocks. */
	CU_ASSERT_EQUAL_FATAL(pipe(p), 0);
	flags = fcntl(p[1], F_GETFL);
	fcntl(p[1], F_SETFL, flags | O_NONBLOCK);
	memset(err_text, 'x', 4096);
	while (write(p[1], err_text, 4096) > 0)
		;
	fcntl(p[1], F_SETFL, flags);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", p[1]);
	CU_ASSERT_EQUAL_FATAL(cr_log_set_file(path), 0);
	CU_ASSERT_EQUAL_FATAL(cr_log_attach(11), 0);
	/* The log thread blocks in write(2) on the first of these; we never do (a blocked
	 * producer would hang here until the suite's timeout). */
	for (i = 0; i < 20000; i++)
		CR_LOG(lib_a, NOTICE, "into a stuck pipe %u", i);
	CU_ASSERT_TRUE(cr_log_dropped(11) > 0);
	/* Unstick it, write out the rest, and let the reader see the end. */
	pthread_create(&reader, NULL, pipe_reader, &p[0]);
	cr_log_detach();
	CU_ASSERT_EQUAL(cr_log_set_file(NULL), 0);
	close(p[1]);
	pthread_join(reader, NULL);
	close(p[0]);
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
	/* The log thread runs by now: this thread's lines go through it. */
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

/* ---- abort ---- */

/* The child of test_abort_writes_buffered_lines: an lcore logs why, then aborts, with the
 * log thread held so that the line is still in its buffer. */
__attribute__((constructor)) static void
abort_child(void)
{
	struct sigaction dfl = {.sa_handler = SIG_DFL};

	if (getenv("EAL_LOG_UT_ABORT_CHILD") == NULL)
		return;
	/* The core dump would only slow the test down. */
	sigaction(SIGABRT, &dfl, NULL);
	cr_log_set_timestamps(false);
	if (cr_log_attach(0) != 0)
		_exit(3);
	cr__log_pause(true);
	CR_LOG(lib_a, ERR, "the reason for the abort");
	abort();
}

static void
test_abort_writes_buffered_lines(void)
{
	int p[2], status;
	pid_t pid;
	ssize_t n, got = 0;

	CU_ASSERT_EQUAL_FATAL(pipe(p), 0);
	fflush(NULL);
	pid = fork();
	CU_ASSERT_TRUE_FATAL(pid >= 0);
	if (pid == 0) {
		char *const argv[] = {"eal_log_ut", NULL};

		dup2(p[1], STDERR_FILENO);
		setenv("EAL_LOG_UT_ABORT_CHILD", "1", 1);
		execv("/proc/self/exe", argv);
		_exit(4);
	}
	close(p[1]);
	while ((n = read(p[0], err_text + got, OUT_MAX - 1 - (size_t)got)) > 0)
		got += n;
	err_text[got] = '\0';
	close(p[0]);
	CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
	CU_ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "lib.a: err: the reason for the abort\n"));
}

static int
suite_init(void)
{
	err_text = malloc(OUT_MAX);
	return err_text == NULL;
}

static int
suite_fini(void)
{
	cr_log_stop();
	if (tmpdir[0] != '\0')
		rmdir(tmpdir);
	free(err_text);
	return 0;
}

static const struct ut_case cases[] = {
	{"CR_LOG_COMPONENT", test_static_component},
	{"level names", test_parse_level},
	{"patterns", test_patterns},
	{"later registration picks up levels", test_later_registration},
	{"more specs than are remembered", test_many_specs},
	{"bad spec changes nothing", test_bad_spec_changes_nothing},
	{"line format", test_write},
	{"lines from threads do not interleave", test_lines_do_not_interleave},
	{"timestamps agree with gmtime_r", test_time_format_matches_gmtime},
	{"a line starts with its RFC 3339 time", test_line_has_timestamp},
	{"log file, rename and reopen", test_file_and_reopen},
	{"attached threads write through the log thread", test_attached_threads_write_through_log_thread},
	{"a full buffer drops and counts", test_full_buffer_drops_and_counts},
	{"a stuck sink does not block a producer", test_stuck_sink_does_not_block_producer},
	{"syslog datagrams", test_syslog},
	{"abort writes what was buffered", test_abort_writes_buffered_lines},
};

UT_MAIN("eal_log", cases, suite_init, suite_fini)
