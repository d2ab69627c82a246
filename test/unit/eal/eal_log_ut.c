/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Log components, levels and the line format (lib/eal/eal_log.c).
 */
#include "log_ut.h"

CR_LOG_COMPONENT(static_comp, "test.static")

static struct cr_log_component drv_x = {"drv.x", CR_LOG_NOTICE, NULL};

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

static const struct ut_case cases[] = {
	{"CR_LOG_COMPONENT", test_static_component},
	{"level names", test_parse_level},
	{"patterns", test_patterns},
	{"later registration picks up levels", test_later_registration},
	{"more specs than are remembered", test_many_specs},
	{"bad spec changes nothing", test_bad_spec_changes_nothing},
	{"line format", test_write},
	{"lines from threads do not interleave", test_lines_do_not_interleave},
};

UT_MAIN("eal_log", cases, log_suite_init, log_suite_fini)
