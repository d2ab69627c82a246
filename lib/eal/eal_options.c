/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Command line: the options every app takes, then the app's own.
 *
 * A small hand-written loop rather than getopt_long: getopt keeps global state between
 * calls, prints its own messages, and cannot say what a value should have been.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cr_eal.h"
#include "cr_log.h"
#include "eal_internal.h"

#define WHY_MAX 256
#define ERR_MAX 512

#define DEFAULT_SHUTDOWN_TIMEOUT 10.0

/* What a common option does when it is seen. */
enum opt_action {
	ACT_APPLY,
	ACT_HELP,
	ACT_VERSION,
};

/*
 * A common option: the user-visible part is a struct cr_opt like an app's, but its
 * setter writes into the config and can say exactly what is wrong with a value.
 */
struct common_opt {
	struct cr_opt o;
	enum opt_action act;
	int (*apply)(struct cr_eal_config *cfg, const char *val, char *why, size_t len);
};

/* An option found on the command line. */
struct found_opt {
	const struct cr_opt *o;
	const struct common_opt *common; /* NULL for an app option */
};

static const char *const io_driver_names[] = {
	[CR_IO_DRIVER_AUTO] = "auto",
	[CR_IO_DRIVER_URING] = "uring",
	[CR_IO_DRIVER_EPOLL] = "epoll",
};
_Static_assert(sizeof(io_driver_names) / sizeof(io_driver_names[0]) == CR_IO_DRIVER_EPOLL + 1,
	       "one name per driver");

void
cr_eal_config_defaults(struct cr_eal_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->main_lcore = -1;
	cfg->io_driver = CR_IO_DRIVER_AUTO;
	cfg->shutdown_timeout = DEFAULT_SHUTDOWN_TIMEOUT;
	cfg->topology_synthetic = NULL;
	cfg->allowed = NULL;
}

int
cr_parse_uint(const char *s, unsigned long long min, unsigned long long max,
	      unsigned long long *out)
{
	unsigned long long v;
	char *end;

	/* strtoull would take spaces, a sign and wrap "-1" around; only digits are a number. */
	if (s == NULL || s[0] < '0' || s[0] > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

int
cr_parse_seconds(const char *s, double *out)
{
	double v;
	char *end;

	if (s == NULL || s[0] == '\0' || s[0] == ' ' || (s[0] >= '\t' && s[0] <= '\r'))
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || *end != '\0' || !isfinite(v) || v < 0)
		return -EINVAL;
	/* "-0" is zero seconds, not a negative duration. */
	*out = v == 0 ? 0.0 : v;
	return 0;
}

/* ---- setters of the common options ---- */

/* The name of the app whose options cr_eal_parse_args() is parsing (the syslog ident). */
static const char *parsing_app;

static int
set_corelist(struct cr_eal_config *cfg, const char *val, char *why, size_t len)
{
	int rc;

	if (strlen(val) >= sizeof(cfg->corelist)) {
		cr__errf(why, len, "longer than %zu characters", sizeof(cfg->corelist) - 1);
		return -EINVAL;
	}
	/*
	 * Syntax only: whether each CPU exists and is allowed is the topology's call, which
	 * can then say which CPUs this machine has.
	 */
	rc = cr__corelist_walk(val, INT_MAX, NULL, NULL, why, len);
	if (rc != 0)
		return rc;
	memcpy(cfg->corelist, val, strlen(val) + 1);
	return 0;
}

static int
set_main_lcore(struct cr_eal_config *cfg, const char *val, char *why, size_t len)
{
	unsigned long long v;

	if (cr_parse_uint(val, 0, INT_MAX, &v) != 0) {
		cr__errf(why, len, "not a CPU id");
		return -EINVAL;
	}
	cfg->main_lcore = (int)v;
	return 0;
}

static int
set_smt(struct cr_eal_config *cfg, const char *val, char *why, size_t len)
{
	(void)val, (void)why, (void)len;
	cfg->smt = true;
	return 0;
}

static int
set_io_driver(struct cr_eal_config *cfg, const char *val, char *why, size_t len)
{
	for (size_t i = 0; i < sizeof(io_driver_names) / sizeof(io_driver_names[0]); i++) {
		if (strcmp(val, io_driver_names[i]) == 0) {
			cfg->io_driver = (enum cr_io_driver)i;
			return 0;
		}
	}
	cr__errf(why, len, "unknown driver");
	return -EINVAL;
}

static int
set_poll_mode(struct cr_eal_config *cfg, const char *val, char *why, size_t len)
{
	(void)val, (void)why, (void)len;
	cfg->poll_mode = true;
	return 0;
}

static int
set_idle_spin(struct cr_eal_config *cfg, const char *val, char *why, size_t len)
{
	unsigned long long us;

	if (strcmp(val, "auto") == 0) {
		cfg->idle_spin_fixed = false;
		cfg->idle_spin_ns = 0;
		return 0;
	}
	if (cr_parse_uint(val, 0, 10000, &us) != 0) {
		cr__errf(why, len, "not auto or 0..10000 microseconds");
		return -EINVAL;
	}
	cfg->idle_spin_fixed = true;
	cfg->idle_spin_ns = us * 1000;
	return 0;
}

static int
set_telemetry(struct cr_eal_config *cfg, const char *val, char *why, size_t len)
{
	size_t n = strlen(val);

	if (n == 0) {
		cr__errf(why, len, "empty path");
		return -EINVAL;
	}
	/* The path ends up in a sockaddr_un, whose sun_path has this size. */
	if (n >= sizeof(cfg->telemetry)) {
		cr__errf(why, len, "path longer than %zu bytes", sizeof(cfg->telemetry) - 1);
		return -EINVAL;
	}
	memcpy(cfg->telemetry, val, n + 1);
	return 0;
}

static int
set_log_level(struct cr_eal_config *cfg, const char *val, char *why, size_t len)
{
	(void)cfg;
	if (cr_log_set_level(val) != 0) {
		cr__errf(why, len, "not a log level spec");
		return -EINVAL;
	}
	return 0;
}

static int
set_log_file(struct cr_eal_config *cfg, const char *val, char *why, size_t len)
{
	int rc;

	(void)cfg;
	if (cr_log_sink(NULL, 0) == CR_LOG_SINK_SYSLOG) {
		cr__errf(why, len, "--syslog was given too");
		return -EINVAL;
	}
	rc = cr_log_set_file(val);
	if (rc != 0) {
		cr__errf(why, len, "cannot open: %s", cr_strerror(rc));
		return -EINVAL;
	}
	return 0;
}

static int
set_syslog(struct cr_eal_config *cfg, const char *val, char *why, size_t len)
{
	int rc;

	(void)cfg, (void)val;
	if (cr_log_sink(NULL, 0) == CR_LOG_SINK_FILE) {
		cr__errf(why, len, "--log-file was given too");
		return -EINVAL;
	}
	rc = cr_log_set_syslog(parsing_app != NULL ? parsing_app : "coreact");
	if (rc != 0) {
		cr__errf(why, len, "cannot reach the syslog socket /dev/log: %s", cr_strerror(rc));
		return -EINVAL;
	}
	return 0;
}

static int
set_log_timestamps(struct cr_eal_config *cfg, const char *val, char *why, size_t len)
{
	(void)cfg;
	if (strcmp(val, "rfc3339") == 0)
		cr_log_set_timestamps(true);
	else if (strcmp(val, "none") == 0)
		cr_log_set_timestamps(false);
	else {
		cr__errf(why, len, "unknown format");
		return -EINVAL;
	}
	return 0;
}

static int
set_shutdown_timeout(struct cr_eal_config *cfg, const char *val, char *why, size_t len)
{
	if (cr_parse_seconds(val, &cfg->shutdown_timeout) != 0) {
		cr__errf(why, len, "not a number of seconds");
		return -EINVAL;
	}
	return 0;
}

static const struct common_opt common_opts[] = {
	{
		.o = {.name = "corelist",
		      .short_name = 'l',
		      .metavar = "CORELIST",
		      .help = "CPUs to run lcores on (default: the first CPU of each core)",
		      .accepted = "CPU ids and ranges like 0-3,6"},
		.apply = set_corelist,
	},
	{
		.o = {.name = "main-lcore",
		      .metavar = "N",
		      .help = "lcore that runs on the calling thread (default: the lowest)",
		      .accepted = "a CPU id from the lcore list"},
		.apply = set_main_lcore,
	},
	{
		.o = {.name = "smt",
		      .help = "use every hardware thread, not one per core",
		      .accepted = "--smt without a value"},
		.apply = set_smt,
	},
	{
		.o = {.name = "io-driver",
		      .metavar = "DRIVER",
		      .help = "I/O driver: auto, uring or epoll (default: auto)",
		      .accepted = "auto, uring, epoll"},
		.apply = set_io_driver,
	},
	{
		.o = {.name = "poll-mode",
		      .help = "never park idle lcores (burns CPU, lowest latency)",
		      .accepted = "--poll-mode without a value"},
		.apply = set_poll_mode,
	},
	{
		.o = {.name = "idle-spin",
		      .metavar = "USEC|auto",
		      .help = "spin this long before an idle lcore parks; 0 parks at once; auto "
			      "(default) spins only when work is due sooner than a park costs",
		      .accepted = "auto or 0..10000 microseconds"},
		.apply = set_idle_spin,
	},
	{
		.o = {.name = "telemetry",
		      .metavar = "PATH|off",
		      .help = "telemetry socket, or off (default: <app>.<pid>.sock in "
			      "$XDG_RUNTIME_DIR/coreact, else /tmp/coreact-<uid>)",
		      .accepted = "off or a socket path of at most 107 bytes"},
		.apply = set_telemetry,
	},
	{
		.o = {.name = "log-level",
		      .metavar = "SPEC",
		      .help = "log levels: LEVEL or PATTERN:LEVEL[,...], e.g. lib.*:debug",
		      .accepted = "LEVEL or PATTERN:LEVEL joined with ',', LEVEL one of err, "
				  "warning, notice, info, debug, 3-7"},
		.apply = set_log_level,
	},
	{
		.o = {.name = "log-file",
		      .metavar = "PATH",
		      .help = "append log lines to PATH instead of stderr (reopened by "
			      "/log/reopen, for logrotate)",
		      .accepted = "a file this user can create or append to; not with --syslog"},
		.apply = set_log_file,
	},
	{
		.o = {.name = "syslog",
		      .help = "send log lines to syslog (/dev/log, facility daemon)",
		      .accepted = "--syslog without a value; not with --log-file"},
		.apply = set_syslog,
	},
	{
		.o = {.name = "log-timestamps",
		      .metavar = "FORMAT",
		      .help = "rfc3339: log lines start with the UTC time (default); none: they "
			      "do not (a journal adds its own)",
		      .accepted = "rfc3339, none"},
		.apply = set_log_timestamps,
	},
	{
		.o = {.name = "shutdown-timeout",
		      .metavar = "SECONDS",
		      .help = "graceful shutdown time before it is forced (default: 10)",
		      .accepted = "a number of seconds >= 0, e.g. 0.5 or 10"},
		.apply = set_shutdown_timeout,
	},
	{
		.o = {.name = "help", .short_name = 'h', .help = "print this help and exit"},
		.act = ACT_HELP,
	},
	{
		.o = {.name = "version", .help = "print the version and exit"},
		.act = ACT_VERSION,
	},
};

#define N_COMMON (sizeof(common_opts) / sizeof(common_opts[0]))

/* ---- lookup ---- */

static bool
long_name_is(const struct cr_opt *o, const char *name, size_t n)
{
	return o->name != NULL && strlen(o->name) == n && strncmp(o->name, name, n) == 0;
}

/* Common options first: an app cannot shadow -l or --help by accident. */
static bool
find_long(const struct cr_app_info *app, const char *name, size_t n, struct found_opt *f)
{
	for (size_t i = 0; i < N_COMMON; i++) {
		if (long_name_is(&common_opts[i].o, name, n)) {
			*f = (struct found_opt){.o = &common_opts[i].o, .common = &common_opts[i]};
			return true;
		}
	}
	for (unsigned i = 0; i < app->n_opts; i++) {
		if (long_name_is(&app->opts[i], name, n)) {
			*f = (struct found_opt){.o = &app->opts[i], .common = NULL};
			return true;
		}
	}
	return false;
}

static bool
find_short(const struct cr_app_info *app, char c, struct found_opt *f)
{
	for (size_t i = 0; i < N_COMMON; i++) {
		if (common_opts[i].o.short_name == c) {
			*f = (struct found_opt){.o = &common_opts[i].o, .common = &common_opts[i]};
			return true;
		}
	}
	for (unsigned i = 0; i < app->n_opts; i++) {
		if (app->opts[i].short_name == c) {
			*f = (struct found_opt){.o = &app->opts[i], .common = NULL};
			return true;
		}
	}
	return false;
}

/* ---- output ---- */

/* The one line a usage error prints; a single call so that it reaches stderr whole. */
static int
usage_error(const struct cr_app_info *app, const char *what, const char *why,
	    const char *accepted)
{
	fprintf(stderr, "%s: %s: %s; accepted: %s\n", app->name, what, why, accepted);
	return -EINVAL;
}

static int
unknown_option(const struct cr_app_info *app, const char *opt, size_t n)
{
	fprintf(stderr, "%s: %.*s: unknown option; accepted: see %s --help\n", app->name,
		(int)n, opt, app->name);
	return -EINVAL;
}

static void
opt_synopsis(const struct cr_opt *o, char *buf, size_t len)
{
	const char *meta_sep = o->metavar != NULL ? " " : "";
	const char *meta = o->metavar != NULL ? o->metavar : "";

	if (o->name == NULL)
		snprintf(buf, len, "-%c%s%s", o->short_name, meta_sep, meta);
	else if (o->short_name != 0)
		snprintf(buf, len, "-%c, --%s%s%s", o->short_name, o->name, meta_sep, meta);
	else
		snprintf(buf, len, "    --%s%s%s", o->name, meta_sep, meta);
}

static int
synopsis_width(const struct cr_opt *o)
{
	char buf[128];

	opt_synopsis(o, buf, sizeof(buf));
	return (int)strlen(buf);
}

static void
print_opt(FILE *f, const struct cr_opt *o, int width)
{
	char buf[128];

	opt_synopsis(o, buf, sizeof(buf));
	fprintf(f, "  %-*s  %s\n", width, buf, o->help != NULL ? o->help : "");
}

static void
print_help(const struct cr_app_info *app, FILE *f)
{
	int width = 0;

	for (size_t i = 0; i < N_COMMON; i++) {
		int w = synopsis_width(&common_opts[i].o);
		width = w > width ? w : width;
	}
	for (unsigned i = 0; i < app->n_opts; i++) {
		int w = synopsis_width(&app->opts[i]);
		width = w > width ? w : width;
	}
	if (app->args != NULL)
		fprintf(f, "Usage: %s %s [OPTIONS]\n", app->name, app->args);
	else
		fprintf(f, "Usage: %s [OPTIONS]\n", app->name);
	if (app->summary != NULL)
		fprintf(f, "%s\n", app->summary);
	fprintf(f, "\nCommon options:\n");
	for (size_t i = 0; i < N_COMMON; i++)
		print_opt(f, &common_opts[i].o, width);
	if (app->n_opts > 0) {
		fprintf(f, "\nOptions of %s:\n", app->name);
		for (unsigned i = 0; i < app->n_opts; i++)
			print_opt(f, &app->opts[i], width);
	}
	fflush(f);
}

/* Layers that add --version lines (the reactor, lib/tls), in registration order. */
#define VERSION_EXTRA_MAX 4
static void (*version_extra[VERSION_EXTRA_MAX])(FILE *f, const struct cr_eal_config *cfg);
static unsigned n_version_extra;

void
cr_eal_set_version_extra(void (*fn)(FILE *f, const struct cr_eal_config *cfg))
{
	unsigned i;

	for (i = 0; i < n_version_extra; i++)
		if (version_extra[i] == fn)
			return;
	if (n_version_extra < VERSION_EXTRA_MAX)
		version_extra[n_version_extra++] = fn;
}

static void
print_version(const struct cr_app_info *app, const struct cr_eal_config *cfg, FILE *f)
{
	fprintf(f, "%s coreact %s\n", app->name, CR_VERSION);
	/* Layers above add what they know: the io driver --io-driver picks (the reactor), how
	 * TLS records are made (lib/tls). */
	for (unsigned i = 0; i < n_version_extra; i++)
		version_extra[i](f, cfg);
	fflush(f);
}

/* ---- the loop ---- */

/* What the running setter said about a compound value (cr_opt_bad_part()). */
static _Thread_local char bad_part[128];
static _Thread_local char bad_part_accepted[256];

void
cr_opt_bad_part(const char *part, const char *accepted)
{
	snprintf(bad_part, sizeof(bad_part), "%s", part != NULL ? part : "");
	snprintf(bad_part_accepted, sizeof(bad_part_accepted), "%s",
		 accepted != NULL ? accepted : "see the option's --help");
}

/*
 * Apply @p f with value @p val (NULL for a flag); @p shown is the option as typed, @p where
 * "FILE:LINE" for a config file line (NULL on the command line).
 */
static int
apply_opt(const struct cr_app_info *app, struct cr_eal_config *cfg, const struct found_opt *f,
	  const char *where, const char *shown, const char *val)
{
	char what[ERR_MAX];
	char why[WHY_MAX] = "invalid value";
	const char *accepted = f->o->accepted;
	int rc;

	bad_part[0] = '\0';
	if (f->common != NULL)
		rc = f->common->apply(cfg, val, why, sizeof(why));
	else
		rc = f->o->set != NULL ? f->o->set(val, f->o->ctx) : 0;
	if (rc == 0)
		return 0;
	/* An empty value would vanish from the line; quote it so the user sees it. */
	if (val == NULL)
		snprintf(what, sizeof(what), "%s%s%s", where != NULL ? where : "",
			 where != NULL ? ": " : "", shown);
	else
		snprintf(what, sizeof(what), "%s%s%s %s", where != NULL ? where : "",
			 where != NULL ? ": " : "", shown, val[0] != '\0' ? val : "''");
	if (rc != -EINVAL) {
		/* Not the value's fault (e.g. -ENOMEM): say what happened, keep the errno. */
		fprintf(stderr, "%s: %s: %s\n", app->name, what, cr_strerror(rc));
		return rc;
	}
	if (bad_part[0] != '\0') {
		/* In a file the line number says where: name the part first, then the line. */
		if (where != NULL)
			fprintf(stderr, "%s: %s: %s: invalid in `%s %s`; accepted: %s\n", app->name,
				where, bad_part, shown, val != NULL ? val : "", bad_part_accepted);
		else
			fprintf(stderr, "%s: %s: %s: invalid; accepted: %s\n", app->name, what,
				bad_part, bad_part_accepted);
		return -EINVAL;
	}
	if (accepted == NULL) {
		char see[128];

		snprintf(see, sizeof(see), "see %s --help", app->name);
		return usage_error(app, what, why, see);
	}
	return usage_error(app, what, why, accepted);
}

/*
 * Handle argv[*i], an option (starts with '-', is not "-" or "--"), consuming its value
 * from argv[*i + 1] when it has one there.
 * @return 0, 1 for help/version, or a negative errno after printing one line.
 */
static int
parse_one(int argc, char **argv, int *i, const struct cr_app_info *app,
	  struct cr_eal_config *cfg)
{
	const char *arg = argv[*i];
	const char *val = NULL;
	char shown[128];
	struct found_opt f;

	if (arg[1] == '-') {
		const char *name = arg + 2;
		size_t n = strcspn(name, "=");

		if (!find_long(app, name, n, &f))
			return unknown_option(app, arg, n + 2);
		snprintf(shown, sizeof(shown), "--%.*s", (int)n, name);
		if (name[n] == '=')
			val = name + n + 1;
		if (val != NULL && f.o->metavar == NULL)
			return usage_error(app, arg, "takes no value",
					   f.o->accepted != NULL ? f.o->accepted : "no value");
	} else {
		if (!find_short(app, arg[1], &f) || (f.o->metavar == NULL && arg[2] != '\0'))
			return unknown_option(app, arg, strlen(arg));
		snprintf(shown, sizeof(shown), "-%c", arg[1]);
		if (arg[2] != '\0')
			val = arg + 2;
	}

	if (f.common != NULL && f.common->act == ACT_HELP) {
		print_help(app, stdout);
		return 1;
	}
	if (f.common != NULL && f.common->act == ACT_VERSION) {
		print_version(app, cfg, stdout);
		return 1;
	}
	if (f.o->metavar != NULL && val == NULL) {
		char why[WHY_MAX];

		if (*i + 1 >= argc) {
			snprintf(why, sizeof(why), "missing %s", f.o->metavar);
			return usage_error(app, shown, why,
					   f.o->accepted != NULL ? f.o->accepted : f.o->metavar);
		}
		/* Like getopt: the next word is the value even if it starts with '-'. */
		val = argv[++*i];
	}
	return apply_opt(app, cfg, &f, NULL, shown, val);
}

int
cr_eal_parse_args(int argc, char **argv, const struct cr_app_info *app,
		  struct cr_eal_config *cfg, struct cr_lcore_table *table, int *first_arg)
{
	char err[ERR_MAX];
	int i;
	int rc;

	parsing_app = app->name;
	/* argv[0] is the program; an empty argv (argc 0) has no options either. */
	for (i = argc > 0 ? 1 : 0; i < argc; i++) {
		const char *arg = argv[i];

		if (strcmp(arg, "--") == 0) {
			i++;
			break;
		}
		if (arg[0] != '-' || arg[1] == '\0')
			break;
		rc = parse_one(argc, argv, &i, app, cfg);
		if (rc != 0)
			return rc;
	}
	if (first_arg != NULL)
		*first_arg = i;
	if (table == NULL)
		return 0;
	rc = cr_eal_lcore_table(cfg, table, err, sizeof(err));
	if (rc != 0)
		fprintf(stderr, "%s: %s\n", app->name, err);
	return rc;
}

const struct cr_opt *
cr_eal_find_opt(const struct cr_app_info *app, const char *name)
{
	struct found_opt f;

	if (name == NULL || !find_long(app, name, strlen(name), &f))
		return NULL;
	return f.o;
}

int
cr_eal_apply_opt(const struct cr_app_info *app, struct cr_eal_config *cfg, const char *name,
		 const char *val, const char *where)
{
	struct found_opt f;
	char what[ERR_MAX];

	if (!find_long(app, name, strlen(name), &f)) {
		fprintf(stderr,
			"%s: %s: %s: unknown key; accepted: the long options of %s --help, "
			"without their --\n",
			app->name, where, name, app->name);
		return -EINVAL;
	}
	if (f.common != NULL && f.common->act != ACT_APPLY) {
		snprintf(what, sizeof(what), "%s: %s", where, name);
		return usage_error(app, what, "not a setting", "the options that set something");
	}
	if (f.o->metavar == NULL && val != NULL) {
		snprintf(what, sizeof(what), "%s: %s %s", where, name, val);
		return usage_error(app, what, "takes no value",
				   f.o->accepted != NULL ? f.o->accepted : "the key alone");
	}
	if (f.o->metavar != NULL && val == NULL) {
		char why[WHY_MAX];

		snprintf(what, sizeof(what), "%s: %s", where, name);
		snprintf(why, sizeof(why), "missing %s", f.o->metavar);
		return usage_error(app, what, why,
				   f.o->accepted != NULL ? f.o->accepted : f.o->metavar);
	}
	return apply_opt(app, cfg, &f, where, name, val);
}
