/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/app internals shared by its source files: the options and the config file
 * (app_options.c), the signal thread (app_signals.c), lcore-locals (app_local.c) and the
 * run (app_run.c). Never installed.
 */
#ifndef APP_INTERNAL_H
#define APP_INTERNAL_H

#include <stdbool.h>

#include "cr_app.h"
#include "cr_eal.h"

/* "FILE:LINE" of a config file line, the path included. */
#define WHERE_MAX 4200

/* A config file's settings: one entry per key, its values in file order joined by '\n',
 * where its first line is (app_reload.c). */
struct app_settings {
	unsigned n, cap;
	struct {
		char *key, *vals;
		char where[WHERE_MAX];
	} *e;
};

int cr__settings_add(struct app_settings *s, const char *key, const char *val,
		     const char *where);
void cr__settings_free(struct app_settings *s);
/* One line on stderr per key of @p now that differs from @p then (changed, added), and
 * per key of @p then that @p now lacks unless @p taken(key) (the reload applies it):
 * each takes effect at a restart. @return how many lines. */
unsigned cr__settings_report(const char *app, const char *path, const struct app_settings *then,
			     const struct app_settings *now,
			     bool (*taken)(const char *key, void *arg), void *arg);

/* The options of a run: the app's, then --config and the telemetry ones. */
struct app_opts {
	struct cr_opt *table;
	unsigned n;
	struct cr_app_info info;
	const char *config_path; /* --config FILE, or NULL */
	struct app_settings start; /* the file's settings as the run started with them */
};

/*
 * Build @p o for @p app and parse: --config first (so the file's lines apply before the
 * command line's), then the command line into @p cfg and @p table. @p first receives the
 * index of the first positional word.
 * Returns 0; 1 after --help / --version; -EINVAL after one line on stderr; -ENOMEM.
 */
int cr__app_options_parse(const struct cr_app *app, struct app_opts *o, int argc, char **argv,
			  struct cr_eal_config *cfg, struct cr_lcore_table *table, int *first);
void cr__app_options_free(struct app_opts *o);
/* cr_app_config_reload() on the options of the run. */
int cr__app_config_reload(const struct app_opts *o, const struct cr_opt *opts, unsigned n_opts);

/*
 * The signals lib/app takes: SIGINT, SIGTERM, SIGUSR1, and SIGHUP when @p hup. Block them
 * in the calling thread (before the lcore threads exist, which inherit the mask); then
 * start the thread that takes them. Returns 0 or -errno.
 */
int cr__app_signals_block(bool hup);
int cr__app_signals_start(const struct cr_app *app);
/* The run is over: the signal thread stops calling into the app. */
void cr__app_signals_detach(void);

/* The app's lcore_busy(), for lib/app's reactor module (app_run.c): false without one. */
bool cr__app_lcore_busy(unsigned lcore, bool forced);

/* The lcore-locals' registry is closed while lcores run (app_local.c). */
void cr__app_locals_reset(void);

/* The descriptor limit (app_fds.c): raise the soft one to the hard one, before the
 * options; after configure(), one line on stderr when app->net's slots do not fit it. */
void cr__app_fds_raise(void);
void cr__app_fds_check(const struct cr_app *app);

/* cr_sd_notify(@p state), a line on stderr if it fails (app_run.c). */
void cr__app_notify(const struct cr_app *app, const char *state);

#endif /* APP_INTERNAL_H */
