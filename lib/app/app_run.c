/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cr_app_run(): the life of an appliance process, in the order cr_app.h lists, with one
 * mapping from what failed to the exit status (0, 1, or 2 for a bad option or value).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "app_internal.h"
#include "cr_net.h"
#include "cr_reactor.h"
#include "cr_telemetry.h"

/*
 * lib/net is linked only into apps that use it (every lcore would otherwise size a
 * connection slab and a chunk pool for nothing): weak references do not pull it in. An
 * app that sets cr_app.net uses lib/net, so they are resolved there.
 */
#pragma weak cr_net_config_defaults
#pragma weak cr_net_configure

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

static struct {
	const struct cr_app *app;
	struct app_opts opts;
	struct cr_eal_config cfg;
	struct cr_lcore_table table;
	/* Set by any thread that saw a failure; read once the runtime has stopped. */
	_Atomic bool failed;
	/* cr_reactor_init() returned: lcores that start from now on are later incarnations. */
	_Atomic bool started;
	/* Lcores cr_reactor_init() starts whose lcore_start has not run yet. */
	_Atomic unsigned initial_left;
} run;

/* ---- what apps call ---- */

int
cr_app_errorf(int err, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* One call, so that the line reaches stderr whole. */
	fprintf(stderr, "%s: %s\n", run.app != NULL ? run.app->name : "coreact", line);
	fflush(stderr);
	return err;
}

void
cr_app_fail(void)
{
	atomic_store_explicit(&run.failed, true, memory_order_relaxed);
	cr_reactor_stop();
}

const char *
cr_app_name(void)
{
	return run.app != NULL ? run.app->name : NULL;
}

const struct cr_eal_config *
cr_app_eal_config(void)
{
	return &run.cfg;
}

const struct cr_lcore_table *
cr_app_lcore_table(void)
{
	return &run.table;
}

const char *
cr_app_config_path(void)
{
	return run.opts.config_path;
}

int
cr_app_config_reload(const struct cr_opt *opts, unsigned n_opts)
{
	return cr__app_config_reload(&run.opts, opts, n_opts);
}

/* ---- the hooks lib/app gives the reactor ---- */

static void
hook_timer_dropped(unsigned lcore, struct cr_timer *t, void *arg)
{
	const struct cr_app *app = arg;

	app->timer_dropped(lcore, t, app->arg);
}

static void
hook_poller_dropped(unsigned lcore, int (*fn)(void *), void *poller_arg, void *arg)
{
	const struct cr_app *app = arg;

	app->poller_dropped(lcore, fn, poller_arg, app->arg);
}

/* Tell the service manager (a Type=notify unit's $NOTIFY_SOCKET; nothing without one). */
void
cr__app_notify(const struct cr_app *app, const char *state)
{
	int rc = cr_sd_notify(state);

	if (rc != 0)
		fprintf(stderr, "%s: cannot send %s to $NOTIFY_SOCKET: %s\n", app->name, state,
			cr_strerror(rc));
}

static void
start_on_main(void *arg)
{
	const struct cr_app *app = arg;

	/* An lcore's lcore_init or lcore_start failed (and said why): the app does not run. */
	if (atomic_load_explicit(&run.failed, memory_order_relaxed)) {
		cr_reactor_stop();
		return;
	}
	/* Stopped before it started (a signal, an lcore_start that stopped the runtime):
	 * nothing to start, and nothing failed. */
	if (cr_lcore_state(cr_lcore_id()) != CR_LCORE_RUNNING)
		return;
	if (app->start != NULL && app->start(app->arg) != 0) {
		cr_app_fail();
		return;
	}
	/* Listening (its sockets queue connections already): a Type=notify unit is up. */
	cr__app_notify(app, "READY=1");
}

static void
lcore_failed(bool initial)
{
	atomic_store_explicit(&run.failed, true, memory_order_relaxed);
	/* An initial lcore's failure is seen by start_on_main(); a later one stops the app. */
	if (!initial)
		cr_reactor_stop();
}

/*
 * In the lcore's first turn (RUNNING): its lcore_start. The last of the lcores that
 * cr_reactor_init() started sends the main lcore's start.
 */
static void
lcore_first_turn(void *arg)
{
	const struct cr_app *app = run.app;
	uintptr_t a = (uintptr_t)arg;
	unsigned lcore = (unsigned)(a >> 1);
	bool initial = a & 1;

	if (app->lcore_start != NULL && app->lcore_start(lcore, app->arg) != 0)
		lcore_failed(initial);
	if (initial && atomic_fetch_sub_explicit(&run.initial_left, 1, memory_order_acq_rel) == 1) {
		int rc = cr_send(cr_lcore_main(), start_on_main, (void *)app);

		/* -ESHUTDOWN: the main lcore is stopping already; there is nothing to start. */
		if (rc != 0 && rc != -ESHUTDOWN)
			cr_app_fail();
	}
}

static void
hook_lcore_start(unsigned lcore, void *arg)
{
	const struct cr_app *app = arg;
	/* Every lcore cr_reactor_init() starts runs this hook before it returns. */
	bool initial = !atomic_load_explicit(&run.started, memory_order_relaxed);
	uintptr_t a = (uintptr_t)lcore << 1 | (initial ? 1 : 0);

	if (app->lcore_init != NULL && app->lcore_init(lcore, app->arg) != 0)
		lcore_failed(initial);
	if (cr_defer(lcore_first_turn, (void *)a) != 0) {
		cr_app_errorf(-EAGAIN, "lcore %u: cannot defer its start", lcore);
		lcore_failed(initial);
	}
}

static void
hook_lcore_stop(unsigned lcore, void *arg)
{
	const struct cr_app *app = arg;

	if (app->lcore_stop != NULL)
		app->lcore_stop(lcore, app->arg);
}

bool
cr__app_lcore_busy(unsigned lcore, bool forced)
{
	/* run.app is set before the lcore threads start, cleared after they stopped */
	const struct cr_app *app = run.app;

	return app != NULL && app->lcore_busy != NULL && app->lcore_busy(lcore, forced, app->arg);
}

static void
hook_retire(unsigned lcore, void *arg)
{
	const struct cr_app *app = arg;

	if (app->retire != NULL)
		app->retire(lcore, app->arg);
}

static void
hook_shutdown(unsigned lcore, void *arg)
{
	const struct cr_app *app = arg;

	if (app->shutdown != NULL)
		app->shutdown(lcore, app->arg);
}

/* ---- the steps ---- */

/* The options and the app's configure(); returns an exit status, or -1 to go on. */
static int
configure(const struct cr_app *app, int argc, char **argv)
{
	int first = argc;
	int rc;

	if (app->net != NULL && cr_net_config_defaults != NULL)
		cr_net_config_defaults(app->net);
	rc = cr__app_options_parse(app, &run.opts, argc, argv, &run.cfg, &run.table, &first);
	if (rc == 0 && app->configure != NULL)
		rc = app->configure(argc - first, argv + first, app->arg);
	if (rc == 0) {
		cr__app_fds_check(app);
		return -1;
	}
	return rc == 1 ? EXIT_OK : rc == -EINVAL ? EXIT_USAGE : EXIT_FAIL;
}

static const char *
driver_name(enum cr_io_driver d)
{
	return d == CR_IO_DRIVER_URING ? "uring" : d == CR_IO_DRIVER_EPOLL ? "epoll" : "auto";
}

/* lib/net's sizing and the runtime, with the one mapping of their errors to an exit status. */
static int
start_runtime(const struct cr_app *app)
{
	const struct cr_reactor_hooks hooks = {
	    .on_lcore_start = hook_lcore_start,
	    .on_lcore_stop = hook_lcore_stop,
	    .on_retire = hook_retire,
	    .on_shutdown = hook_shutdown,
	    /* NULL unless the app wants them: the reactor then logs the count instead. */
	    .on_timer_dropped = app->timer_dropped != NULL ? hook_timer_dropped : NULL,
	    .on_poller_dropped = app->poller_dropped != NULL ? hook_poller_dropped : NULL,
	    .arg = (void *)app,
	};
	int rc = 0;

	if (app->net != NULL && cr_net_configure != NULL)
		rc = cr_net_configure(app->net);
	if (rc != 0) {
		cr_app_errorf(rc, "cannot size lib/net: %s", cr_strerror(rc));
		return EXIT_FAIL;
	}
	rc = cr__app_signals_block(app->reload != NULL);
	if (rc != 0) {
		cr_app_errorf(rc, "cannot block signals: %s", cr_strerror(rc));
		return EXIT_FAIL;
	}
	rc = cr_reactor_init(&run.cfg, &run.table, &hooks);
	if (rc == -ENODEV && run.cfg.io_driver != CR_IO_DRIVER_AUTO) {
		/* The driver asked for is refused here; the line above says why. */
		cr_app_errorf(rc,
			      "--io-driver %s: cannot run here; accepted: auto, or a driver "
			      "this system allows",
			      driver_name(run.cfg.io_driver));
		return EXIT_USAGE;
	}
	if (rc != 0) {
		cr_app_errorf(rc, "cannot start: %s", cr_strerror(rc));
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

/* The signal thread and telemetry; 0 or the failure, reported. */
static int
start_services(const struct cr_app *app)
{
	int rc;

	rc = cr__app_signals_start(app);
	if (rc != 0)
		return cr_app_errorf(rc, "cannot start the signal thread: %s", cr_strerror(rc));
	rc = cr_telemetry_start(&run.cfg, app->name);
	if (rc != 0)
		/* The library logged which path or address failed and why; the hint says what
		 * to do about it ("" when it knows nothing to say). */
		return cr_app_errorf(rc, "cannot start telemetry: %s%s%s", cr_strerror(rc),
				     cr_telemetry_hint()[0] != '\0' ? "; " : "",
				     cr_telemetry_hint());
	cr_telemetry_announce(app->name);
	return 0;
}

int
cr_app_run(const struct cr_app *app, int argc, char **argv)
{
	int status;

	memset(&run.cfg, 0, sizeof(run.cfg));
	run.app = app;
	atomic_store(&run.failed, false);
	atomic_store(&run.started, false);
	cr_eal_config_defaults(&run.cfg);
	cr__app_fds_raise();
	status = configure(app, argc, argv);
	if (status >= 0)
		goto out_options; /* configure() cleaned up after itself */
	atomic_store(&run.initial_left, run.table.n);
	status = start_runtime(app);
	if (status != EXIT_OK)
		goto out_fini;
	atomic_store_explicit(&run.started, true, memory_order_relaxed);
	if (start_services(app) != 0)
		cr_app_fail();
	cr_reactor_run();
	cr__app_signals_detach();
	cr_telemetry_stop();
	cr_reactor_fini();
	status = atomic_load_explicit(&run.failed, memory_order_relaxed) ? EXIT_FAIL : EXIT_OK;
out_fini:
	if (app->fini != NULL && app->fini(status != EXIT_OK, app->arg) != 0 && status == EXIT_OK)
		status = EXIT_FAIL;
out_options:
	cr__app_options_free(&run.opts);
	cr__app_locals_reset();
	fflush(stdout);
	run.app = NULL;
	return status;
}
