/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Options of an app run: the common ones (lib/eal), the app's, --config and the telemetry
 * ones, from a config file and from the command line, through the same setters.
 *
 * The config file format is cr-proxy's: one `KEY VALUE...` a line, KEY a long option
 * without its dashes, VALUE the rest of the line (words joined by one space), nothing for
 * a flag; '#' starts a comment; blank lines are skipped. The file is read before the
 * command line, so the command line overrides it (or adds to it, for options that add up).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app_internal.h"
#include "cr_net.h"
#include "cr_telemetry.h"

#define LINE_MAX_BYTES 1024

/* "FILE:LINE" while a setter runs for a config file line (cr_app_opt_where()). */
static _Thread_local const char *opt_where;

const char *
cr_app_opt_where(void)
{
	return opt_where;
}

/* --config: recorded by the first pass; the file is read before the second. */
static int
set_config(const char *val, void *ctx)
{
	struct app_opts *o = ctx;

	if (val[0] == '\0')
		return -EINVAL;
	o->config_path = val;
	return 0;
}

static int
set_nothing(const char *val, void *ctx)
{
	(void)val;
	(void)ctx;
	return 0;
}

/* --share-address: lib/net may listen where another socket listens already. */
static int
set_share_address(const char *val, void *ctx)
{
	struct cr_net_config *net = ctx;

	(void)val;
	net->share_addresses = true;
	return 0;
}

static const struct cr_opt telemetry_opts[] = {CR_TELEMETRY_OPTS};
#define N_TELEMETRY (sizeof(telemetry_opts) / sizeof(telemetry_opts[0]))

static int
build_table(const struct cr_app *app, struct app_opts *o)
{
	unsigned n = app->n_opts + 1 + N_TELEMETRY + (app->net != NULL), i = 0;

	memset(o, 0, sizeof(*o));
	o->table = calloc(n, sizeof(*o->table));
	if (o->table == NULL)
		return -ENOMEM;
	if (app->n_opts > 0)
		memcpy(o->table, app->opts, sizeof(*o->table) * app->n_opts);
	i = app->n_opts;
	o->table[i++] = (struct cr_opt){
	    "config",
	    0,
	    "FILE",
	    "read options from FILE first: one `KEY VALUE` a line, KEY a long option without "
	    "its --, '#' a comment; the command line overrides it",
	    "a readable file of `KEY VALUE` lines",
	    set_config,
	    o};
	if (app->net != NULL)
		o->table[i++] = (struct cr_opt){
		    "share-address",
		    0,
		    NULL,
		    "listen even where another process listens already (the kernel splits new "
		    "connections between them): start a new instance with it, then stop the old "
		    "one, for a restart that refuses no connection",
		    "--share-address without a value",
		    set_share_address,
		    app->net};
	memcpy(o->table + i, telemetry_opts, sizeof(telemetry_opts));
	o->n = n;
	o->info = (struct cr_app_info){app->name, app->summary, o->table, n, app->args};
	return 0;
}

void
cr__app_options_free(struct app_opts *o)
{
	free(o->table);
	cr__settings_free(&o->start);
	memset(o, 0, sizeof(*o));
}

/*
 * Walk the config file at @p path: @p fn(ctx, key, value, "FILE:LINE") for every line
 * that has a key (value NULL when the line has only the key). Stops at the first error.
 */
static int
config_walk(const char *app_name, const char *path,
	    int (*fn)(void *ctx, const char *key, const char *val, const char *where), void *ctx)
{
	char line[LINE_MAX_BYTES], val[LINE_MAX_BYTES], where[WHERE_MAX];
	unsigned lineno = 0;
	FILE *f = fopen(path, "r");
	int rc = 0;

	if (f == NULL) {
		rc = -errno;
		fprintf(stderr, "%s: --config %s: %s\n", app_name, path, cr_strerror(rc));
		return rc;
	}
	while (rc == 0 && fgets(line, sizeof(line), f) != NULL) {
		char *key, *w, *save = NULL, *hash;
		size_t len = 0;

		lineno++;
		snprintf(where, sizeof(where), "%s:%u", path, lineno);
		if (strchr(line, '\n') == NULL && !feof(f)) {
			fprintf(stderr, "%s: %s: line longer than %zu bytes\n", app_name, where,
				sizeof(line) - 2);
			rc = -EINVAL;
			break;
		}
		hash = strchr(line, '#');
		if (hash != NULL)
			*hash = '\0';
		key = strtok_r(line, " \t\r\n", &save);
		if (key == NULL)
			continue;
		val[0] = '\0';
		while ((w = strtok_r(NULL, " \t\r\n", &save)) != NULL) {
			/* The words fit: together they are shorter than the line they came from. */
			len += (size_t)snprintf(val + len, sizeof(val) - len, "%s%s",
						len > 0 ? " " : "", w);
		}
		rc = fn(ctx, key, len > 0 ? val : NULL, where);
	}
	if (rc == 0 && ferror(f)) {
		rc = errno != 0 ? -errno : -EIO;
		fprintf(stderr, "%s: --config %s: %s\n", app_name, path, cr_strerror(rc));
	}
	fclose(f);
	return rc;
}

static int
refuse_config_key(const char *app_name, const char *where)
{
	fprintf(stderr,
		"%s: %s: config: not a setting in a config file; accepted: the other "
		"long options\n",
		app_name, where);
	return -EINVAL;
}

struct start_ctx {
	const struct app_opts *o;
	struct cr_eal_config *cfg;
	struct app_settings *start;
};

static int
apply_start_line(void *arg, const char *key, const char *val, const char *where)
{
	struct start_ctx *c = arg;
	int rc;

	if (strcmp(key, "config") == 0)
		return refuse_config_key(c->o->info.name, where);
	opt_where = where;
	rc = cr_eal_apply_opt(&c->o->info, c->cfg, key, val, where);
	opt_where = NULL;
	/* Remembered, so that a reload can say which keys it does not apply. */
	if (rc == 0)
		rc = cr__settings_add(c->start, key, val, where);
	return rc;
}

/* The first pass: only --config is acted on (and --help, --version, bad syntax). */
static int
find_config(struct app_opts *o, int argc, char **argv)
{
	struct cr_opt *scan = calloc(o->n, sizeof(*scan));
	struct cr_app_info info = o->info;
	struct cr_eal_config scratch;
	unsigned i;
	int rc;

	if (scan == NULL)
		return -ENOMEM;
	for (i = 0; i < o->n; i++) {
		scan[i] = o->table[i];
		if (scan[i].set != set_config)
			scan[i].set = set_nothing;
	}
	info.opts = scan;
	cr_eal_config_defaults(&scratch);
	rc = cr_eal_parse_args(argc, argv, &info, &scratch, NULL, NULL);
	free(scan);
	return rc;
}

int
cr__app_options_parse(const struct cr_app *app, struct app_opts *o, int argc, char **argv,
		      struct cr_eal_config *cfg, struct cr_lcore_table *table, int *first)
{
	struct start_ctx c = {o, cfg, &o->start};
	int rc = build_table(app, o);

	if (rc == 0)
		rc = find_config(o, argc, argv);
	if (rc == 0 && o->config_path != NULL) {
		rc = config_walk(app->name, o->config_path, apply_start_line, &c);
		/* A file that cannot be read is a bad --config value, like a bad line. */
		if (rc != 0 && rc != -ENOMEM)
			rc = -EINVAL;
	}
	if (rc == 0)
		rc = cr_eal_parse_args(argc, argv, &o->info, cfg, table, first);
	if (rc == 0 && *first < argc && app->args == NULL) {
		fprintf(stderr,
			"%s: %s: unexpected argument; accepted: options only, see %s --help\n",
			app->name, argv[*first], app->name);
		rc = -EINVAL;
	}
	return rc;
}

/* ---- reload ---- */

struct reload_ctx {
	const struct app_opts *all;
	struct cr_app_info only;
	struct app_settings now; /* the keys the reload does not take, as the file has them */
};

/* Does the reload apply @p key (one of the app's reload options)? */
static bool
taken_by_reload(const char *key, void *arg)
{
	const struct reload_ctx *c = arg;
	const struct cr_opt *f = cr_eal_find_opt(&c->only, key);

	return f != NULL && f >= c->only.opts && f < c->only.opts + c->only.n_opts;
}

static int
apply_reload_line(void *arg, const char *key, const char *val, const char *where)
{
	struct reload_ctx *c = arg;
	const struct cr_opt *f = cr_eal_find_opt(&c->only, key);
	struct cr_eal_config scratch;
	int rc;

	if (strcmp(key, "config") == 0)
		return refuse_config_key(c->all->info.name, where);
	cr_eal_config_defaults(&scratch);
	if (f == NULL || f < c->only.opts || f >= c->only.opts + c->only.n_opts) {
		/* Not one the reload takes (a common option is found first): it takes effect at
		 * the next start, which the report after the walk says if it changed. An
		 * unknown key is reported as at start-up. */
		if (cr_eal_find_opt(&c->all->info, key) != NULL)
			return cr__settings_add(&c->now, key, val, where);
		return cr_eal_apply_opt(&c->all->info, &scratch, key, val, where);
	}
	opt_where = where;
	rc = cr_eal_apply_opt(&c->only, &scratch, key, val, where);
	opt_where = NULL;
	return rc;
}

int
cr__app_config_reload(const struct app_opts *o, const struct cr_opt *opts, unsigned n_opts)
{
	struct reload_ctx c = {o, o->info, {0}};
	int rc;

	if (o->config_path == NULL)
		return -ENOENT;
	c.only.opts = opts;
	c.only.n_opts = n_opts;
	rc = config_walk(o->info.name, o->config_path, apply_reload_line, &c);
	if (rc == 0)
		(void)cr__settings_report(o->info.name, o->config_path, &o->start, &c.now,
					  taken_by_reload, &c);
	cr__settings_free(&c.now);
	return rc;
}
