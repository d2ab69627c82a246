/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Command line parsing (lib/eal/eal_options.c): every usage error is one line on stderr.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ut_capture.h"
#include "ut_cunit.h"

#include "cr_eal.h"
#include "cr_log.h"

/* Two cores, CPUs 0-1, whatever machine runs the test. */
#define SMALL_MACHINE "pack:1 core:2 pu:1"
#define CORELIST_ACCEPTED "accepted: CPU ids and ranges like 0-3,6"
#define OUT_MAX UT_CAPTURE_MAX

static char out_text[OUT_MAX];
static char err_text[OUT_MAX];

/* ---- an app with options of its own ---- */

struct app_state {
	char listen[64];
	unsigned long long port;
	bool verbose;
	int listen_calls;
};

static struct app_state app_state;

static int
set_listen(const char *val, void *ctx)
{
	struct app_state *st = ctx;

	st->listen_calls++;
	if (strchr(val, ':') == NULL)
		return -EINVAL;
	snprintf(st->listen, sizeof(st->listen), "%s", val);
	return 0;
}

static int
set_port(const char *val, void *ctx)
{
	struct app_state *st = ctx;

	return cr_parse_uint(val, 1, 65535, &st->port);
}

static int
set_verbose(const char *val, void *ctx)
{
	struct app_state *st = ctx;

	CU_ASSERT_PTR_NULL(val);
	st->verbose = true;
	return 0;
}

static int
set_oom(const char *val, void *ctx)
{
	(void)val, (void)ctx;
	return -ENOMEM;
}

/* A compound value, as cr-proxy's --backend: "NAME,weight=N" or, in a file, "NAME weight N". */
static int
set_backend(const char *val, void *ctx)
{
	const char *w = strchr(val, ',');
	char part[64];
	unsigned long long n;

	(void)ctx;
	if (w == NULL)
		w = strchr(val, ' ');
	if (w == NULL)
		return 0;
	if (cr_parse_uint(w + 1 + strlen("weight="), 0, 256, &n) != 0) {
		snprintf(part, sizeof(part), "%s", w + 1);
		cr_opt_bad_part(part, "0-256");
		return -EINVAL;
	}
	return 0;
}

static const struct cr_opt echo_opts[] = {
	{.name = "backend", .metavar = "B", .help = "compound", .accepted = "NAME[,weight=N]",
	 .set = set_backend},
	{.name = "listen",
	 .metavar = "HOST:PORT",
	 .help = "address to listen on",
	 .accepted = "HOST:PORT",
	 .set = set_listen,
	 .ctx = &app_state},
	{.name = "port",
	 .short_name = 'p',
	 .metavar = "PORT",
	 .help = "port to listen on",
	 .accepted = "1-65535",
	 .set = set_port,
	 .ctx = &app_state},
	{.name = "verbose", .short_name = 'v', .help = "say more", .set = set_verbose,
	 .ctx = &app_state},
	{.name = "oom", .metavar = "X", .help = "always fails", .set = set_oom},
	{.short_name = 'q', .metavar = "Q", .help = "short only, no setter"},
};

static const struct cr_app_info echo = {
	.name = "cr-echo",
	.summary = "Echo every byte back.",
	.opts = echo_opts,
	.n_opts = sizeof(echo_opts) / sizeof(echo_opts[0]),
};

static struct cr_eal_config cfg;
static struct cr_lcore_table table;
static int first_arg;

/* Run the parser on a NULL-terminated list of words after "cr-echo". */
static int
run(bool validate, ...)
{
	char *argv[32] = {"cr-echo"};
	struct ut_capture out, err;
	va_list ap;
	int argc = 1;
	int rc;

	va_start(ap, validate);
	while ((argv[argc] = va_arg(ap, char *)) != NULL)
		argc++;
	va_end(ap);

	memset(&app_state, 0, sizeof(app_state));
	cr_eal_config_defaults(&cfg);
	cfg.topology_synthetic = SMALL_MACHINE;
	first_arg = -1;
	ut_capture_begin(&out, STDOUT_FILENO);
	ut_capture_begin(&err, STDERR_FILENO);
	rc = cr_eal_parse_args(argc, argv, &echo, &cfg, validate ? &table : NULL, &first_arg);
	ut_capture_end(&err, err_text);
	ut_capture_end(&out, out_text);
	return rc;
}

/* One usage error: -EINVAL, exactly @p want (plus newline) on stderr, nothing on stdout. */
static void
expect_usage_error(int rc, const char *want)
{
	char line[OUT_MAX];

	CU_ASSERT_EQUAL(rc, -EINVAL);
	CU_ASSERT_EQUAL(ut_count_lines(err_text), 1);
	CU_ASSERT_STRING_EQUAL(out_text, "");
	if (want == NULL)
		return;
	snprintf(line, sizeof(line), "%s\n", want);
	if (strcmp(err_text, line) != 0) {
		fprintf(stderr, "\n  stderr: got \"%s\", want \"%s\"\n", err_text, want);
		CU_FAIL("wrong error line");
	}
}

static void
expect_quiet_success(int rc)
{
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT_STRING_EQUAL(err_text, "");
	CU_ASSERT_STRING_EQUAL(out_text, "");
}

/* ---- tests ---- */

static void
test_defaults(void)
{
	expect_quiet_success(run(true, NULL));
	CU_ASSERT_EQUAL(first_arg, 1);
	CU_ASSERT_STRING_EQUAL(cfg.corelist, "");
	CU_ASSERT_EQUAL(cfg.main_lcore, -1);
	CU_ASSERT_FALSE(cfg.smt);
	CU_ASSERT_EQUAL(cfg.io_driver, CR_IO_DRIVER_AUTO);
	CU_ASSERT_FALSE(cfg.poll_mode);
	CU_ASSERT_FALSE(cfg.idle_spin_fixed);
	CU_ASSERT_STRING_EQUAL(cfg.telemetry, "");
	CU_ASSERT_DOUBLE_EQUAL(cfg.shutdown_timeout, 10.0, 1e-9);
	CU_ASSERT_EQUAL(table.n, 2);
	CU_ASSERT_EQUAL(table.main_lcore, 0);
}

static void
test_every_common_option(void)
{
	expect_quiet_success(run(true, "-l", "0-1", "--main-lcore", "1", "--smt", "--io-driver",
				 "uring", "--poll-mode", "--telemetry", "off", "--log-level",
				 "test.opts:debug", "--shutdown-timeout", "0.5", "--idle-spin", "7",
				 NULL));
	CU_ASSERT_EQUAL(first_arg, 17);
	CU_ASSERT_TRUE(cfg.idle_spin_fixed);
	CU_ASSERT_EQUAL(cfg.idle_spin_ns, 7000);
	CU_ASSERT_STRING_EQUAL(cfg.corelist, "0-1");
	CU_ASSERT_EQUAL(cfg.main_lcore, 1);
	CU_ASSERT_TRUE(cfg.smt);
	CU_ASSERT_EQUAL(cfg.io_driver, CR_IO_DRIVER_URING);
	CU_ASSERT_TRUE(cfg.poll_mode);
	CU_ASSERT_STRING_EQUAL(cfg.telemetry, "off");
	CU_ASSERT_DOUBLE_EQUAL(cfg.shutdown_timeout, 0.5, 1e-9);
	CU_ASSERT_EQUAL(table.n, 2);
	CU_ASSERT_EQUAL(table.main_lcore, 1);
}

static void
test_log_level_applied(void)
{
	static struct cr_log_component c = {"test.opts", CR_LOG_NOTICE, NULL};

	cr_log_register(&c);
	expect_quiet_success(run(false, "--log-level", "test.*:info", NULL));
	CU_ASSERT_EQUAL(c.level, CR_LOG_INFO);
	expect_usage_error(run(false, "--log-level", "test.*:loud", NULL), NULL);
	CU_ASSERT_EQUAL(c.level, CR_LOG_INFO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "cr-echo: --log-level test.*:loud: "));
	CU_ASSERT_EQUAL_FATAL(cr_log_set_level("test.*:notice"), 0);
}

static void
test_log_sinks(void)
{
	char path[] = "/tmp/eal_options_ut.XXXXXX", file[64], shown[64];
	FILE *f;

	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(path));
	snprintf(file, sizeof(file), "%s/app.log", path);
	expect_quiet_success(run(false, "--log-file", file, "--log-timestamps", "none", NULL));
	CU_ASSERT_EQUAL(cr_log_sink(shown, sizeof(shown)), CR_LOG_SINK_FILE);
	CU_ASSERT_STRING_EQUAL(shown, file);
	CU_ASSERT_FALSE(cr_log_timestamps());
	/* The file takes the lines; nothing of them reaches stderr. */
	f = fopen(file, "r");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fclose(f);
	/* --syslog after --log-file: one line naming both. */
	expect_usage_error(run(false, "--syslog", NULL),
			   "cr-echo: --syslog: --log-file was given too; accepted: --syslog "
			   "without a value; not with --log-file");
	expect_quiet_success(run(false, "--log-timestamps", "rfc3339", NULL));
	CU_ASSERT_TRUE(cr_log_timestamps());
	expect_usage_error(run(false, "--log-timestamps", "iso", NULL),
			   "cr-echo: --log-timestamps iso: unknown format; accepted: rfc3339, none");
	CU_ASSERT_EQUAL(cr_log_set_file(NULL), 0);
	unlink(file);
	/* A file that cannot be opened is named with the reason; the sink stays stderr. */
	expect_usage_error(run(false, "--log-file", "/nonexistent-dir/x.log", NULL),
			   "cr-echo: --log-file /nonexistent-dir/x.log: cannot open: No such file "
			   "or directory; accepted: a file this user can create or append to; not "
			   "with --syslog");
	CU_ASSERT_EQUAL(cr_log_sink(NULL, 0), CR_LOG_SINK_STDERR);
	snprintf(file, sizeof(file), "%s", path);
	expect_usage_error(run(false, "--log-file", file, NULL), NULL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "cannot open: Is a directory"));
	rmdir(path);
}

static void
test_value_forms(void)
{
	expect_quiet_success(run(true, "--io-driver=epoll", "-l0", "--listen=1.2.3.4:80", "-p",
				 "8080", "--shutdown-timeout=3", "--main-lcore=0", NULL));
	CU_ASSERT_EQUAL(cfg.io_driver, CR_IO_DRIVER_EPOLL);
	CU_ASSERT_STRING_EQUAL(cfg.corelist, "0");
	CU_ASSERT_STRING_EQUAL(app_state.listen, "1.2.3.4:80");
	CU_ASSERT_EQUAL(app_state.port, 8080);
	CU_ASSERT_DOUBLE_EQUAL(cfg.shutdown_timeout, 3.0, 1e-9);
	CU_ASSERT_EQUAL(table.n, 1);

	expect_quiet_success(run(false, "-p80", "--port", "81", "-v", "-q", "x", NULL));
	CU_ASSERT_EQUAL(app_state.port, 81);
	CU_ASSERT_TRUE(app_state.verbose);

	/* "=" with nothing after it is an empty value, handed to the setter. */
	expect_usage_error(run(false, "--listen=", NULL),
			   "cr-echo: --listen '': invalid value; accepted: HOST:PORT");
}

static void
test_non_option_arguments(void)
{
	expect_quiet_success(run(false, "-l", "0", "serve", "--bogus", NULL));
	CU_ASSERT_EQUAL(first_arg, 3);
	expect_quiet_success(run(false, "--smt", "--", "--bogus", NULL));
	CU_ASSERT_EQUAL(first_arg, 3);
	CU_ASSERT_TRUE(cfg.smt);
	expect_quiet_success(run(false, "-", NULL));
	CU_ASSERT_EQUAL(first_arg, 1);
}

/* --idle-spin: auto, or a budget in microseconds up to 10 ms; anything else, one line. */
static void
test_idle_spin(void)
{
	expect_quiet_success(run(true, "--idle-spin", "0", NULL));
	CU_ASSERT_TRUE(cfg.idle_spin_fixed);
	CU_ASSERT_EQUAL(cfg.idle_spin_ns, 0);
	expect_quiet_success(run(true, "--idle-spin", "auto", NULL));
	CU_ASSERT_FALSE(cfg.idle_spin_fixed);
	expect_usage_error(run(true, "--idle-spin", "x", NULL),
			   "cr-echo: --idle-spin x: not auto or 0..10000 microseconds; accepted: "
			   "auto or 0..10000 microseconds");
	expect_usage_error(run(true, "--idle-spin", "10001", NULL), NULL);
	expect_usage_error(run(true, "--idle-spin", "-1", NULL), NULL);
}

static void
test_bad_corelists(void)
{
	static const char *const bad[] = {"",	"x",  "3-1", "0-999", "1,,2",
					  "1-", "-1", "0-3,", " 1",   "1a"};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char prefix[64];

		expect_usage_error(run(true, "-l", bad[i], NULL), NULL);
		snprintf(prefix, sizeof(prefix),
			 "cr-echo: -l %s: ", bad[i][0] != '\0' ? bad[i] : "''");
		CU_ASSERT_EQUAL(strncmp(err_text, prefix, strlen(prefix)), 0);
	}
	expect_usage_error(run(true, "-l", "", NULL),
			   "cr-echo: -l '': empty list; " CORELIST_ACCEPTED);
	expect_usage_error(run(true, "-l", "3-1", NULL),
			   "cr-echo: -l 3-1: range 3-1 is reversed; " CORELIST_ACCEPTED);
	expect_usage_error(run(true, "-l", "x", NULL),
			   "cr-echo: -l x: 'x' is not a CPU id; " CORELIST_ACCEPTED);
	expect_usage_error(run(true, "-l", "0-999", NULL),
			   "cr-echo: -l 0-999: CPU 999 does not exist; this machine has CPUs 0-1");
	expect_usage_error(run(true, "-l", "1,,2", NULL),
			   "cr-echo: -l 1,,2: empty element at position 3; " CORELIST_ACCEPTED);
	/* Syntax is checked even without a table; existence is not. */
	expect_usage_error(run(false, "-l", "1-", NULL),
			   "cr-echo: -l 1-: '1-' is not a CPU range; " CORELIST_ACCEPTED);
	expect_quiet_success(run(false, "-l", "0-999", NULL));
}

static void
test_main_lcore(void)
{
	expect_usage_error(
	    run(true, "-l", "0-1", "--main-lcore", "5", NULL),
	    "cr-echo: --main-lcore 5: not in the lcore list 0-1; accepted: one of 0-1");
	expect_usage_error(run(true, "--main-lcore", "x", NULL),
			   "cr-echo: --main-lcore x: not a CPU id; accepted: a CPU id from the "
			   "lcore list");
	expect_usage_error(run(true, "--main-lcore", "-1", NULL), NULL);
}

static void
test_unknown_option(void)
{
	expect_usage_error(run(true, "--bogus", NULL),
			   "cr-echo: --bogus: unknown option; accepted: see cr-echo --help");
	expect_usage_error(run(true, "--bogus=1", NULL),
			   "cr-echo: --bogus: unknown option; accepted: see cr-echo --help");
	expect_usage_error(run(true, "-z", NULL),
			   "cr-echo: -z: unknown option; accepted: see cr-echo --help");
	/* Flags do not cluster. */
	expect_usage_error(run(true, "-vh", NULL),
			   "cr-echo: -vh: unknown option; accepted: see cr-echo --help");
	/* No abbreviations: a prefix of an option is not that option. */
	expect_usage_error(run(true, "--list", "a:1", NULL),
			   "cr-echo: --list: unknown option; accepted: see cr-echo --help");
}

static void
test_bad_values(void)
{
	expect_usage_error(
	    run(true, "--io-driver", "foo", NULL),
	    "cr-echo: --io-driver foo: unknown driver; accepted: auto, uring, epoll");
	expect_usage_error(run(true, "--shutdown-timeout", "-1", NULL),
			   "cr-echo: --shutdown-timeout -1: not a number of seconds; accepted: a "
			   "number of seconds >= 0, e.g. 0.5 or 10");
	expect_usage_error(run(true, "--shutdown-timeout", "nan", NULL), NULL);
	expect_usage_error(run(true, "--telemetry", "", NULL), NULL);
	expect_usage_error(run(true, "--smt=1", NULL),
			   "cr-echo: --smt=1: takes no value; accepted: --smt without a value");
	expect_usage_error(run(true, "--verbose=yes", NULL),
			   "cr-echo: --verbose=yes: takes no value; accepted: no value");
}

static void
test_long_values(void)
{
	char path[200];

	memset(path, 'p', sizeof(path) - 1);
	path[sizeof(path) - 1] = '\0';
	expect_usage_error(run(true, "--telemetry", path, NULL), NULL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err_text, ": path longer than 107 bytes; accepted: "));
	path[108] = '\0';
	expect_usage_error(run(true, "--telemetry", path, NULL), NULL);
	path[107] = '\0';
	expect_quiet_success(run(true, "--telemetry", path, NULL));
	CU_ASSERT_STRING_EQUAL(cfg.telemetry, path);
}

static void
test_missing_argument(void)
{
	expect_usage_error(run(true, "--io-driver", NULL),
			   "cr-echo: --io-driver: missing DRIVER; accepted: auto, uring, epoll");
	expect_usage_error(run(true, "-l", NULL),
			   "cr-echo: -l: missing CORELIST; " CORELIST_ACCEPTED);
	expect_usage_error(run(true, "--listen", NULL),
			   "cr-echo: --listen: missing HOST:PORT; accepted: HOST:PORT");
	expect_usage_error(run(true, "-q", NULL), "cr-echo: -q: missing Q; accepted: Q");
}

static void
test_app_setter_rejects(void)
{
	expect_usage_error(run(true, "--listen", "nowhere", NULL),
			   "cr-echo: --listen nowhere: invalid value; accepted: HOST:PORT");
	CU_ASSERT_EQUAL(app_state.listen_calls, 1);
	expect_usage_error(run(true, "-p", "0", NULL),
			   "cr-echo: -p 0: invalid value; accepted: 1-65535");
	expect_usage_error(run(true, "--port=99999", NULL),
			   "cr-echo: --port 99999: invalid value; accepted: 1-65535");

	/* Not a usage error: the errno goes back and the line says what happened. */
	CU_ASSERT_EQUAL(run(true, "--oom", "x", NULL), -ENOMEM);
	CU_ASSERT_EQUAL(ut_count_lines(err_text), 1);
	CU_ASSERT_EQUAL(strncmp(err_text, "cr-echo: --oom x: ", 18), 0);
}

static void
test_help(void)
{
	static const char *const wanted[] = {
		"Usage: cr-echo",
		"Echo every byte back.",
		"--corelist CORELIST",
		"--main-lcore N",
		"--smt",
		"--io-driver DRIVER",
		"--poll-mode",
		"--idle-spin USEC|auto",
		"--telemetry PATH|off",
		"--log-level SPEC",
		"--shutdown-timeout SECONDS",
		"-h, --help",
		"--version",
		"--listen HOST:PORT",
		"address to listen on",
		"-p, --port PORT",
		"-v, --verbose",
		"say more",
		"-q Q",
	};

	CU_ASSERT_EQUAL(run(true, "--help", NULL), 1);
	CU_ASSERT_STRING_EQUAL(err_text, "");
	for (size_t i = 0; i < sizeof(wanted) / sizeof(wanted[0]); i++) {
		if (strstr(out_text, wanted[i]) == NULL) {
			fprintf(stderr, "\n  --help lacks \"%s\"\n", wanted[i]);
			CU_FAIL("incomplete help");
		}
	}
	CU_ASSERT_EQUAL(run(true, "-l", "0", "-h", "--bogus", NULL), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(out_text, "Usage: cr-echo"));
	CU_ASSERT_STRING_EQUAL(err_text, "");
}

static void
test_version(void)
{
	CU_ASSERT_EQUAL(run(true, "--version", NULL), 1);
	CU_ASSERT_STRING_EQUAL(out_text, "cr-echo coreact " CR_VERSION "\n");
	CU_ASSERT_STRING_EQUAL(err_text, "");
}

static void
test_parse_seconds(void)
{
	static const char *const bad[] = {"", "-1", "-0.5", "nan", "inf", " 1", "1x", "1 ", "x"};
	double v = -1;

	CU_ASSERT_EQUAL(cr_parse_seconds("0.5", &v), 0);
	CU_ASSERT_DOUBLE_EQUAL(v, 0.5, 1e-12);
	CU_ASSERT_EQUAL(cr_parse_seconds("10", &v), 0);
	CU_ASSERT_DOUBLE_EQUAL(v, 10, 1e-12);
	CU_ASSERT_EQUAL(cr_parse_seconds("1e3", &v), 0);
	CU_ASSERT_DOUBLE_EQUAL(v, 1000, 1e-12);
	CU_ASSERT_EQUAL(cr_parse_seconds("0", &v), 0);
	CU_ASSERT_DOUBLE_EQUAL(v, 0, 1e-12);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = 42;
		CU_ASSERT_EQUAL(cr_parse_seconds(bad[i], &v), -EINVAL);
		CU_ASSERT_DOUBLE_EQUAL(v, 42, 1e-12);
	}
	CU_ASSERT_EQUAL(cr_parse_seconds(NULL, &v), -EINVAL);
}

static void
test_parse_uint(void)
{
	static const char *const bad[] = {
	    "", "-1", "+1", " 1", "1 ", "0x10", "18446744073709551616", "x"};
	unsigned long long v = 7;

	CU_ASSERT_EQUAL(cr_parse_uint("0", 0, 10, &v), 0);
	CU_ASSERT_EQUAL(v, 0);
	CU_ASSERT_EQUAL(cr_parse_uint("10", 0, 10, &v), 0);
	CU_ASSERT_EQUAL(v, 10);
	CU_ASSERT_EQUAL(cr_parse_uint("18446744073709551615", 0, ~0ULL, &v), 0);
	CU_ASSERT_EQUAL(v, ~0ULL);
	v = 7;
	CU_ASSERT_EQUAL(cr_parse_uint("11", 0, 10, &v), -EINVAL);
	CU_ASSERT_EQUAL(cr_parse_uint("1", 2, 10, &v), -EINVAL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CU_ASSERT_EQUAL(cr_parse_uint(bad[i], 0, ~0ULL, &v), -EINVAL);
	CU_ASSERT_EQUAL(v, 7);
}

/* Apply one option as a config file line would. */
static int
apply(const char *name, const char *val)
{
	struct ut_capture out, err;
	int rc;

	memset(&app_state, 0, sizeof(app_state));
	cr_eal_config_defaults(&cfg);
	ut_capture_begin(&out, STDOUT_FILENO);
	ut_capture_begin(&err, STDERR_FILENO);
	rc = cr_eal_apply_opt(&echo, &cfg, name, val, "f.conf:3");
	ut_capture_end(&err, err_text);
	ut_capture_end(&out, out_text);
	return rc;
}

static void
test_apply_opt(void)
{
	expect_quiet_success(apply("listen", "127.0.0.1:80"));
	CU_ASSERT_STRING_EQUAL(app_state.listen, "127.0.0.1:80");
	expect_quiet_success(apply("verbose", NULL));
	CU_ASSERT_TRUE(app_state.verbose);
	expect_quiet_success(apply("shutdown-timeout", "2.5"));
	CU_ASSERT_DOUBLE_EQUAL(cfg.shutdown_timeout, 2.5, 1e-9);
	expect_quiet_success(apply("io-driver", "epoll"));
	CU_ASSERT_EQUAL(cfg.io_driver, CR_IO_DRIVER_EPOLL);

	expect_usage_error(apply("bogus", "1"),
			   "cr-echo: f.conf:3: bogus: unknown key; accepted: the long options "
			   "of cr-echo --help, without their --");
	expect_usage_error(apply("port", "0"),
			   "cr-echo: f.conf:3: port 0: invalid value; accepted: 1-65535");
	expect_usage_error(apply("io-driver", "foo"),
			   "cr-echo: f.conf:3: io-driver foo: unknown driver; accepted: auto, "
			   "uring, epoll");
	expect_usage_error(apply("listen", NULL),
			   "cr-echo: f.conf:3: listen: missing HOST:PORT; accepted: HOST:PORT");
	expect_usage_error(apply("verbose", "yes"),
			   "cr-echo: f.conf:3: verbose yes: takes no value; accepted: the key "
			   "alone");
	expect_usage_error(apply("help", NULL), "cr-echo: f.conf:3: help: not a setting; "
						"accepted: the options that set something");
	CU_ASSERT_EQUAL(apply("oom", "1"), -ENOMEM);
	CU_ASSERT_STRING_EQUAL(err_text, "cr-echo: f.conf:3: oom 1: Cannot allocate memory\n");
	CU_ASSERT_PTR_NOT_NULL(cr_eal_find_opt(&echo, "listen"));
	CU_ASSERT_PTR_NOT_NULL(cr_eal_find_opt(&echo, "log-level"));
	CU_ASSERT_PTR_NULL(cr_eal_find_opt(&echo, "list"));
}

/* A setter names the bad part of a compound value, on the command line and in a file. */
static void
test_bad_part(void)
{
	expect_quiet_success(run(false, "--backend", "b,weight=7", NULL));
	expect_usage_error(run(false, "--backend", "b,weight=999", NULL),
			   "cr-echo: --backend b,weight=999: weight=999: invalid; accepted: 0-256");
	expect_quiet_success(apply("backend", "b weight 7"));
	expect_usage_error(apply("backend", "b weight 900"),
			   "cr-echo: f.conf:3: weight 900: invalid in `backend b weight 900`; "
			   "accepted: 0-256");
	/* The part is said by one setter call only: the next error is the usual line. */
	expect_usage_error(run(false, "--port", "0", NULL),
			   "cr-echo: --port 0: invalid value; accepted: 1-65535");
}

static const struct ut_case cases[] = {
	{"cr_eal_apply_opt (config file lines)", test_apply_opt},
	{"cr_opt_bad_part", test_bad_part},
	{"defaults", test_defaults},
	{"every common option", test_every_common_option},
	{"--log-level is applied", test_log_level_applied},
	{"--log-file, --syslog, --log-timestamps", test_log_sinks},
	{"value forms", test_value_forms},
	{"non-option arguments", test_non_option_arguments},
	{"--idle-spin", test_idle_spin},
	{"bad corelists", test_bad_corelists},
	{"main lcore", test_main_lcore},
	{"unknown option", test_unknown_option},
	{"bad values", test_bad_values},
	{"long values", test_long_values},
	{"missing argument", test_missing_argument},
	{"app setter rejects a value", test_app_setter_rejects},
	{"--help", test_help},
	{"--version", test_version},
	{"cr_parse_seconds", test_parse_seconds},
	{"cr_parse_uint", test_parse_uint},
};

UT_MAIN("eal_options", cases, NULL, NULL)
