/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cr_app_run() on the real runtime (every lcore of this machine, the io driver named by
 * $CR_UT_DRIVER): the options and the one help text, --config files and reloads, the order
 * of the callbacks, the exit status of every way a run can end, and the signals.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cr_app.h"
#include "cr_reactor.h"
#include "ut_capture.h"
#include "ut_cunit.h"
#include "ut_driver.h"
#include "ut_tmpdir.h"

static char out_text[UT_CAPTURE_MAX], err_text[UT_CAPTURE_MAX];

/* ---- a small app whose callbacks record what happened ---- */

static struct {
	unsigned long long count;
	char name[64];
	bool flag;
	unsigned adds, adds_from_file;
	char last_where[256];
	/* what the callbacks saw */
	int configure_argc;
	char configure_arg0[64];
	_Atomic unsigned lcore_inits, lcore_starts, lcore_stops, retires, shutdowns, starts, stops,
	    fini;
	_Atomic unsigned reloads, reopens;
	_Atomic int order; /* a clock of callbacks, to check their order */
	int start_at, fini_at, lcore_stop_at;
	/* what the callbacks return */
	int configure_rc, lcore_init_rc, lcore_start_rc, start_rc, fini_rc;
	bool start_fails_later;	    /* start returns 0 but calls cr_app_fail() */
	bool stop_at_start;	    /* start calls cr_reactor_stop() */
	bool stop_keeps_running;    /* the stop callback does not stop */
	void (*in_start)(void);	    /* more for start to do */
	bool stop_in_lcore_start;   /* the runtime stops before start could run */
	bool fini_failed;	    /* what fini was told */
	bool inited[CR_MAX_LCORES]; /* written by each lcore for itself */
} st;

static int
set_count(const char *v, void *ctx)
{
	(void)ctx;
	return cr_parse_uint(v, 1, 100, &st.count);
}

static int
set_name(const char *v, void *ctx)
{
	(void)ctx;
	if (strchr(v, '!') != NULL)
		return -EINVAL;
	snprintf(st.name, sizeof(st.name), "%s", v);
	return 0;
}

static int
set_flag(const char *v, void *ctx)
{
	(void)v;
	(void)ctx;
	st.flag = true;
	return 0;
}

/* An option that adds up, and remembers where each value came from. */
static int
set_add(const char *v, void *ctx)
{
	const char *where = cr_app_opt_where();

	(void)v;
	(void)ctx;
	st.adds++;
	if (where != NULL) {
		st.adds_from_file++;
		snprintf(st.last_where, sizeof(st.last_where), "%s", where);
	}
	return 0;
}

static const struct cr_opt opts[] = {
    {"count", 0, "N", "how many (default 1)", "1-100", set_count, NULL},
    {"name", 0, "NAME", "a name", "a name without '!'", set_name, NULL},
    {"flag", 'f', NULL, "a flag", "--flag without a value", set_flag, NULL},
    {"add", 0, "X", "adds up", "anything", set_add, NULL},
};

static int
ut_configure(int argc, char **argv, void *arg)
{
	CU_ASSERT_PTR_EQUAL(arg, &st);
	st.configure_argc = argc;
	if (argc > 0)
		snprintf(st.configure_arg0, sizeof(st.configure_arg0), "%s", argv[0]);
	CU_ASSERT_PTR_NOT_NULL(cr_app_lcore_table());
	CU_ASSERT_STRING_EQUAL(cr_app_name(), "ut-app");
	if (st.configure_rc == -EINVAL)
		return cr_app_errorf(-EINVAL, "--count %llu: too many for --name; accepted: 1",
				     st.count);
	return st.configure_rc;
}

static int
ut_lcore_init(unsigned lcore, void *arg)
{
	(void)arg;
	CU_ASSERT_EQUAL(cr_lcore_id(), lcore);
	/* Before the lcore joins the placement pool. */
	CU_ASSERT_EQUAL(cr_lcore_state(lcore), CR_LCORE_STARTING);
	atomic_fetch_add(&st.lcore_inits, 1);
	st.inited[lcore] = true;
	if (st.lcore_init_rc != 0 && lcore != cr_lcore_main())
		return cr_app_errorf(st.lcore_init_rc, "lcore %u: cannot init", lcore);
	return 0;
}

static int
ut_lcore_start(unsigned lcore, void *arg)
{
	(void)arg;
	CU_ASSERT_EQUAL(cr_lcore_id(), lcore);
	/* In its first turn: it runs, lib/net would open sockets for it. */
	CU_ASSERT_EQUAL(cr_lcore_state(lcore), CR_LCORE_RUNNING);
	CU_ASSERT_TRUE(st.inited[lcore]); /* this lcore's lcore_init came first */
	atomic_fetch_add(&st.lcore_starts, 1);
	if (st.lcore_start_rc != 0 && lcore != cr_lcore_main())
		return cr_app_errorf(st.lcore_start_rc, "lcore %u: cannot start", lcore);
	if (st.stop_in_lcore_start)
		cr_reactor_stop();
	return 0;
}

static int
ut_start(void *arg)
{
	(void)arg;
	CU_ASSERT_EQUAL(cr_lcore_id(), cr_lcore_main());
	/* Every lcore is up, each started once. */
	CU_ASSERT_EQUAL(atomic_load(&st.lcore_starts), cr_app_lcore_table()->n);
	CU_ASSERT_EQUAL(cr_lcore_count(), cr_app_lcore_table()->n);
	st.start_at = atomic_fetch_add(&st.order, 1);
	atomic_fetch_add(&st.starts, 1);
	if (st.start_rc != 0)
		return cr_app_errorf(st.start_rc, "start failed");
	if (st.in_start != NULL)
		st.in_start();
	if (st.start_fails_later)
		cr_app_fail();
	if (st.stop_at_start)
		cr_reactor_stop();
	return 0;
}

static void
ut_shutdown(unsigned lcore, void *arg)
{
	(void)lcore;
	(void)arg;
	atomic_fetch_add(&st.shutdowns, 1);
}

static void
ut_lcore_stop(unsigned lcore, void *arg)
{
	(void)arg;
	CU_ASSERT_EQUAL(cr_lcore_id(), lcore);
	if (lcore == cr_lcore_main())
		st.lcore_stop_at = atomic_fetch_add(&st.order, 1);
	atomic_fetch_add(&st.lcore_stops, 1);
}

static void
ut_stop(void *arg)
{
	(void)arg;
	CU_ASSERT_EQUAL(cr_lcore_id(), cr_lcore_main());
	atomic_fetch_add(&st.stops, 1);
	if (!st.stop_keeps_running)
		cr_reactor_stop();
}

static void
ut_reload(void *arg)
{
	(void)arg;
	CU_ASSERT_EQUAL(cr_lcore_id(), CR_LCORE_NONE);
	atomic_fetch_add(&st.reloads, 1);
}

static void
ut_reopen(void *arg)
{
	(void)arg;
	atomic_fetch_add(&st.reopens, 1);
}

static int
ut_fini(bool failed, void *arg)
{
	(void)arg;
	st.fini_failed = failed;
	CU_ASSERT_EQUAL(cr_lcore_count(), 0);
	st.fini_at = atomic_fetch_add(&st.order, 1);
	atomic_fetch_add(&st.fini, 1);
	return st.fini_rc;
}

static struct cr_app app = {
    .name = "ut-app",
    .summary = "a test app",
    .opts = opts,
    .n_opts = sizeof(opts) / sizeof(opts[0]),
    .configure = ut_configure,
    .lcore_init = ut_lcore_init,
    .lcore_start = ut_lcore_start,
    .start = ut_start,
    .shutdown = ut_shutdown,
    .lcore_stop = ut_lcore_stop,
    .stop = ut_stop,
    .reload = ut_reload,
    .reopen_logs = ut_reopen,
    .fini = ut_fini,
    .arg = &st,
};

static const char *
driver(void)
{
	const char *d = getenv("CR_UT_DRIVER");

	return d != NULL ? d : "uring";
}

/*
 * cr_app_run() with "--telemetry off --io-driver DRIVER" and the NULL-terminated words
 * after them; what it printed lands in out_text / err_text. The app stops at start unless
 * the test asks otherwise.
 */
static int
run_words(const char *const *words)
{
	char *argv[32] = {"ut-app", "--telemetry", "off", "--io-driver", (char *)driver()};
	struct ut_capture out, err;
	int argc = 5, rc;

	while (*words != NULL)
		argv[argc++] = (char *)*words++;
	ut_capture_begin(&out, STDOUT_FILENO);
	ut_capture_begin(&err, STDERR_FILENO);
	rc = cr_app_run(&app, argc, argv);
	ut_capture_end(&err, err_text);
	ut_capture_end(&out, out_text);
	return rc;
}

#define RUN(...) run_words((const char *const[]){__VA_ARGS__, NULL})

static void
reset(void)
{
	memset(&st, 0, sizeof(st));
	st.count = 1;
	st.stop_at_start = true;
}

static void
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(text, f);
	fclose(f);
}

/* One usage error: exit 2 and exactly one line on stderr, which contains @p want. */
static void
expect_usage(int status, const char *want)
{
	CU_ASSERT_EQUAL(status, 2);
	CU_ASSERT_EQUAL(ut_count_lines(err_text), 1);
	if (strstr(err_text, want) == NULL) {
		fprintf(stderr, "\n  stderr: got \"%s\", want a line with \"%s\"\n", err_text,
			want);
		CU_FAIL("wrong error line");
	}
}

/* ---- options ---- */

static void
test_help(void)
{
	reset();
	CU_ASSERT_EQUAL(RUN("--help"), 0);
	/* One help text: the common options, then the app's, --config and --metrics. */
	CU_ASSERT_PTR_NOT_NULL(strstr(out_text, "Usage: ut-app [OPTIONS]"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out_text, "--corelist CORELIST"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out_text, "--count N"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out_text, "-f, --flag"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out_text, "--config FILE"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out_text, "--metrics HOST:PORT"));
	CU_ASSERT_EQUAL(atomic_load(&st.lcore_starts), 0); /* nothing started */
	CU_ASSERT_EQUAL(st.fini, 0);
	reset();
	CU_ASSERT_EQUAL(RUN("--version"), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out_text, "ut-app coreact "));
}

static void
test_options(void)
{
	reset();
	CU_ASSERT_EQUAL(RUN("--count", "7", "--name=x", "-f", "--shutdown-timeout", "3"), 0);
	CU_ASSERT_EQUAL(st.count, 7);
	CU_ASSERT_STRING_EQUAL(st.name, "x");
	CU_ASSERT_TRUE(st.flag);
	CU_ASSERT_DOUBLE_EQUAL(cr_app_eal_config()->shutdown_timeout, 3.0, 1e-9);
	CU_ASSERT_EQUAL(st.configure_argc, 0);
	CU_ASSERT_STRING_EQUAL(err_text, "");

	reset();
	expect_usage(RUN("--count", "0"), "ut-app: --count 0: invalid value; accepted: 1-100");
	CU_ASSERT_EQUAL(st.fini, 0);
	reset();
	expect_usage(RUN("--bogus"), "ut-app: --bogus: unknown option");
	reset();
	expect_usage(RUN("-l", "3-1"), "ut-app: -l 3-1: range 3-1 is reversed");
	reset();
	expect_usage(RUN("word"), "ut-app: word: unexpected argument; accepted: options only");

	/* An app that takes words gets them in configure(). */
	reset();
	app.args = "WORD";
	CU_ASSERT_EQUAL(RUN("--count", "2", "word"), 0);
	app.args = NULL;
	CU_ASSERT_EQUAL(st.configure_argc, 1);
	CU_ASSERT_STRING_EQUAL(st.configure_arg0, "word");
}

/* ---- config files ---- */

static void
test_config(void)
{
	char path[256], bad[256], where[300];

	snprintf(path, sizeof(path), "%s/app.conf", ut_tmpdir);
	write_file(path, "# a comment\n\ncount 5   # the rest of a line\n"
			 "name  two  words\nflag\nadd a\nadd b\nshutdown-timeout 2.5\n");
	reset();
	CU_ASSERT_EQUAL(RUN("--config", path, "--add", "c"), 0);
	CU_ASSERT_EQUAL(st.count, 5);
	CU_ASSERT_STRING_EQUAL(st.name, "two words"); /* the words, joined by one space */
	CU_ASSERT_TRUE(st.flag);
	CU_ASSERT_DOUBLE_EQUAL(cr_app_eal_config()->shutdown_timeout, 2.5, 1e-9);
	CU_ASSERT_EQUAL(st.adds, 3);
	CU_ASSERT_EQUAL(st.adds_from_file, 2);
	snprintf(where, sizeof(where), "%s:7", path);
	CU_ASSERT_STRING_EQUAL(st.last_where, where);
	CU_ASSERT_STRING_EQUAL(err_text, "");

	/* The command line overrides the file, wherever --config stands on it. */
	reset();
	CU_ASSERT_EQUAL(RUN("--count", "9", "--config", path), 0);
	CU_ASSERT_EQUAL(st.count, 9);
	reset();
	CU_ASSERT_EQUAL(RUN("--config="
			    "/dev/null",
			    "--count", "4"),
			0);
	CU_ASSERT_EQUAL(st.count, 4);

	/* -l has a long name, so the lcores can be set in a file too. */
	write_file(path, "corelist 0\n");
	reset();
	CU_ASSERT_EQUAL(RUN("--config", path), 0);
	CU_ASSERT_STRING_EQUAL(cr_app_eal_config()->corelist, "0");
	CU_ASSERT_STRING_EQUAL(err_text, "");

	/* Every bad line is a usage error naming FILE:LINE. */
	static const struct {
		const char *text, *want;
	} bads[] = {
	    {"count 5\nbogus 1\n", ":2: bogus: unknown key"},
	    {"count 500\n", ":1: count 500: invalid value; accepted: 1-100"},
	    {"\n\ncount\n", ":3: count: missing N"},
	    {"flag yes\n", ":1: flag yes: takes no value"},
	    {"name a!b\n", ":1: name a!b: invalid value"},
	    {"io-driver foo\n", ":1: io-driver foo: unknown driver"},
	    {"help\n", ":1: help: not a setting"},
	    {"config other.conf\n", ":1: config: not a setting in a config file"},
	};
	snprintf(bad, sizeof(bad), "%s/bad.conf", ut_tmpdir);
	for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
		write_file(bad, bads[i].text);
		snprintf(where, sizeof(where), "ut-app: %s%s", bad, bads[i].want);
		reset();
		expect_usage(RUN("--config", bad), where);
		CU_ASSERT_EQUAL(atomic_load(&st.lcore_starts), 0);
	}
	/* A line too long, a missing file and a directory are bad --config values. */
	{
		char longline[2100];

		memset(longline, 'x', sizeof(longline) - 2);
		longline[sizeof(longline) - 2] = '\n';
		longline[sizeof(longline) - 1] = '\0';
		write_file(bad, longline);
		reset();
		expect_usage(RUN("--config", bad), ":1: line longer than 1022 bytes");
	}
	reset();
	snprintf(bad, sizeof(bad), "%s/missing.conf", ut_tmpdir);
	expect_usage(RUN("--config", bad), "missing.conf: No such file or directory");
	reset();
	expect_usage(RUN("--config", ut_tmpdir), ": Is a directory");
}

/* Reloads apply only the keys given; other options are skipped, unknown keys refused. */
static int reload_count_seen;

static int
set_reload_count(const char *v, void *ctx)
{
	unsigned long long n;

	(void)ctx;
	if (cr_parse_uint(v, 1, 100, &n) != 0)
		return -EINVAL;
	reload_count_seen = (int)n;
	return 0;
}

static const struct cr_opt reload_opts[] = {
    {"count", 0, "N", "", "1-100", set_reload_count, NULL},
};

static char reload_path[256];
static int reload_rc[4];
static char reload_err[UT_CAPTURE_MAX];

/* On the main lcore during a run: what SIGHUP's callback would do, four times. */
static void
reload_in_start(void)
{
	struct ut_capture err;

	ut_capture_begin(&err, STDERR_FILENO);
	write_file(reload_path, "name changed\ncount 6\nio-driver epoll\nflag\n");
	reload_rc[0] = cr_app_config_reload(reload_opts, 1);
	write_file(reload_path, "count 7\nbogus 1\n");
	reload_rc[1] = cr_app_config_reload(reload_opts, 1);
	write_file(reload_path, "count 0\n");
	reload_rc[2] = cr_app_config_reload(reload_opts, 1);
	unlink(reload_path);
	reload_rc[3] = cr_app_config_reload(reload_opts, 1);
	ut_capture_end(&err, reload_err);
}

static void
test_config_reload(void)
{
	char want[2000];

	snprintf(reload_path, sizeof(reload_path), "%s/reload.conf", ut_tmpdir);
	write_file(reload_path, "count 5\nname n\n");
	reset();
	st.in_start = reload_in_start;
	CU_ASSERT_EQUAL(RUN("--config", reload_path), 0);
	/* The reload took count; name, io-driver and flag wait for a restart. */
	CU_ASSERT_EQUAL(reload_rc[0], 0);
	CU_ASSERT_STRING_EQUAL(st.name, "n");
	CU_ASSERT_FALSE(st.flag);
	/* An unknown key stops the reload (the lines before it were applied). */
	CU_ASSERT_EQUAL(reload_rc[1], -EINVAL);
	CU_ASSERT_EQUAL(reload_count_seen, 7);
	CU_ASSERT_EQUAL(reload_rc[2], -EINVAL);
	CU_ASSERT_EQUAL(reload_rc[3], -ENOENT);
	/* Each key the reload does not take and that differs from the start: one line. */
	snprintf(want, sizeof(want),
		 "ut-app: %s:1: name: changed; not applied by a reload, takes effect at a "
		 "restart\n"
		 "ut-app: %s:3: io-driver: added; not applied by a reload, takes effect at a "
		 "restart\n"
		 "ut-app: %s:4: flag: added; not applied by a reload, takes effect at a "
		 "restart\n"
		 "ut-app: %s:2: bogus: unknown key; accepted: the long options of ut-app --help, "
		 "without their --\n"
		 "ut-app: %s:1: count 0: invalid value; accepted: 1-100\n"
		 "ut-app: --config %s: No such file or directory\n",
		 reload_path, reload_path, reload_path, reload_path, reload_path, reload_path);
	CU_ASSERT_STRING_EQUAL(reload_err, want);
	/* Without --config there is nothing to reload. */
	CU_ASSERT_EQUAL(cr_app_config_reload(reload_opts, 1), -ENOENT);
}

/* ---- exit status and order ---- */

static void
test_exit_status(void)
{
	reset();
	CU_ASSERT_EQUAL(RUN("--count", "3"), 0);
	CU_ASSERT_EQUAL(st.starts, 1);
	CU_ASSERT_EQUAL(st.fini, 1);
	CU_ASSERT_FALSE(st.fini_failed);
	CU_ASSERT_EQUAL(st.lcore_stops, st.lcore_starts);
	CU_ASSERT_EQUAL(st.lcore_inits, st.lcore_starts);
	CU_ASSERT_EQUAL(st.shutdowns, st.lcore_starts);
	/* start, then the main lcore's stop, then fini once the runtime is gone. */
	CU_ASSERT_TRUE(st.start_at < st.lcore_stop_at && st.lcore_stop_at < st.fini_at);

	reset();
	st.configure_rc = -EINVAL; /* a bad combination of options */
	expect_usage(RUN("--count", "3"), "ut-app: --count 3: too many for --name");
	CU_ASSERT_EQUAL(st.fini, 0);

	reset();
	st.configure_rc = -ENOMEM;
	CU_ASSERT_EQUAL(RUN("--count", "3"), 1);
	CU_ASSERT_EQUAL(atomic_load(&st.lcore_starts), 0);

	reset();
	st.start_rc = -EADDRINUSE;
	CU_ASSERT_EQUAL(RUN(NULL), 1);
	CU_ASSERT_STRING_EQUAL(err_text, "ut-app: start failed\n");
	CU_ASSERT_EQUAL(st.fini, 1);
	CU_ASSERT_TRUE(st.fini_failed);

	reset();
	st.stop_at_start = false;
	st.start_fails_later = true;
	CU_ASSERT_EQUAL(RUN(NULL), 1);

	reset();
	st.fini_rc = 1;
	CU_ASSERT_EQUAL(RUN(NULL), 1);

	/* A stop before the app started (a signal in the first turns) is no failure. */
	reset();
	st.stop_at_start = false;
	st.stop_in_lcore_start = true;
	CU_ASSERT_EQUAL(RUN(NULL), 0);
	CU_ASSERT_STRING_EQUAL(err_text, "");
	CU_ASSERT_EQUAL(st.fini, 1);

	if (cr_app_lcore_table()->n >= 2) {
		/* An lcore that cannot start its duties: the app does not run at all. */
		reset();
		st.lcore_start_rc = -EMFILE;
		CU_ASSERT_EQUAL(RUN(NULL), 1);
		CU_ASSERT_EQUAL(st.starts, 0);
		CU_ASSERT_EQUAL(st.fini, 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(err_text, ": cannot start\n"));
		reset();
		st.lcore_init_rc = -ENOMEM;
		CU_ASSERT_EQUAL(RUN(NULL), 1);
		CU_ASSERT_EQUAL(st.starts, 0);
		CU_ASSERT_PTR_NOT_NULL(strstr(err_text, ": cannot init\n"));
	}
}

/* ---- signals ---- */

static bool
wait_count(_Atomic unsigned *c, unsigned want)
{
	struct timespec ms = {0, 1000000};

	for (int i = 0; i < 10000 && atomic_load(c) < want; i++)
		nanosleep(&ms, NULL);
	return atomic_load(c) >= want;
}

/* Not an lcore: each signal once the last one was taken. */
static void *
sender(void *arg)
{
	(void)arg;
	CU_ASSERT_TRUE(wait_count(&st.starts, 1));
	kill(getpid(), SIGHUP);
	CU_ASSERT_TRUE(wait_count(&st.reloads, 1));
	kill(getpid(), SIGUSR1);
	CU_ASSERT_TRUE(wait_count(&st.reopens, 1));
	kill(getpid(), SIGTERM);
	CU_ASSERT_TRUE(wait_count(&st.stops, 1));
	/* The app's stop keeps running: a second signal forces the shutdown. */
	kill(getpid(), SIGINT);
	return NULL;
}

static void
test_signals(void)
{
	pthread_t t;

	reset();
	st.stop_at_start = false;
	st.stop_keeps_running = true;
	CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, sender, NULL), 0);
	CU_ASSERT_EQUAL(RUN("--shutdown-timeout", "30"), 0);
	pthread_join(t, NULL);
	CU_ASSERT_EQUAL(st.reloads, 1);
	CU_ASSERT_EQUAL(st.reopens, 1);
	CU_ASSERT_EQUAL(st.stops, 1); /* the second signal did not call it again */
	CU_ASSERT_EQUAL(st.fini, 1);
}

static const struct ut_case cases[] = {
    {"--help and --version", test_help},
    {"options", test_options},
    {"--config files", test_config},
    {"--config reload", test_config_reload},
    {"exit status and the order of callbacks", test_exit_status},
    {"signals: HUP, USR1, TERM, then a forced stop", test_signals},
};

static int
suite_init(void)
{
	ut_require_driver(); /* $CR_UT_DRIVER refused by this kernel: skip (exit 77) */
	return ut_tmpdir_make("cr-app-ut");
}

static int
suite_fini(void)
{
	return ut_tmpdir_remove();
}

UT_MAIN("app_run", cases, suite_init, suite_fini)
