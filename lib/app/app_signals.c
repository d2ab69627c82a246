/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Signals: one thread of lib/app takes SIGINT, SIGTERM, SIGUSR1 (and SIGHUP when the app
 * reloads) with sigwait(); every other thread, lcores included, has them blocked, so no
 * callback runs in a signal handler and no lcore is interrupted.
 *
 * The first SIGINT/SIGTERM of a run asks for the app's graceful stop (its stop callback on
 * the main lcore, or cr_reactor_stop()), any later one forces the shutdown. The thread is
 * started once per process and serves whichever run is current.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#include "app_internal.h"
#include "cr_log.h"
#include "cr_reactor.h"

/* What the thread waits for: all four, whatever the current run blocks elsewhere. */
static sigset_t wait_set;
static bool thread_up;
/* The current run's app; NULL between runs. release: pairs with the acquire in the thread. */
static _Atomic(const struct cr_app *) sig_app;
static _Atomic unsigned stops; /* SIGINT/SIGTERM seen in this run */

/*
 * Without a reload callback SIGHUP stays unblocked in the app's threads, so it keeps its
 * default action (the process ends), as for a program that does not handle it.
 */
int
cr__app_signals_block(bool hup)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGUSR1);
	if (hup)
		sigaddset(&set, SIGHUP);
	return -pthread_sigmask(SIG_BLOCK, &set, NULL);
}

static void
stop_on_main(void *arg)
{
	const struct cr_app *app = arg;

	app->stop(app->arg);
}

static void
on_stop_signal(const struct cr_app *app)
{
	if (atomic_fetch_add_explicit(&stops, 1, memory_order_relaxed) != 0) {
		cr_shutdown_force();
		return;
	}
	cr__app_notify(app, "STOPPING=1");
	/* A main lcore that no longer takes messages is stopping already. */
	if (app->stop == NULL || cr_send(cr_lcore_main(), stop_on_main, (void *)app) != 0)
		cr_reactor_stop();
}

/* systemd's reload protocol: RELOADING=1 with the time it began (Type=notify-reload
 * wants MONOTONIC_USEC), READY=1 once done. */
static void
notify_reloading(const struct cr_app *app)
{
	struct timespec ts;
	char msg[64];

	clock_gettime(CLOCK_MONOTONIC, &ts);
	snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%llu",
		 (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000);
	cr__app_notify(app, msg);
}

static void *
signal_thread(void *arg)
{
	int sig;

	(void)arg;
	pthread_sigmask(SIG_BLOCK, &wait_set, NULL);
	while (sigwait(&wait_set, &sig) == 0) {
		const struct cr_app *app = atomic_load_explicit(&sig_app, memory_order_acquire);

		if (app == NULL)
			continue;
		if (sig == SIGHUP) {
			if (app->reload != NULL) {
				notify_reloading(app);
				app->reload(app->arg);
				/* Serving again, with what the reload could apply. */
				cr__app_notify(app, "READY=1");
			}
		} else if (sig == SIGUSR1) {
			/* logrotate's postrotate: our log file first, then the app's own */
			(void)cr_log_reopen();
			if (app->reopen_logs != NULL)
				app->reopen_logs(app->arg);
		} else {
			on_stop_signal(app);
		}
	}
	return NULL;
}

int
cr__app_signals_start(const struct cr_app *app)
{
	pthread_t t;
	int rc;

	atomic_store_explicit(&stops, 0, memory_order_relaxed);
	atomic_store_explicit(&sig_app, app, memory_order_release);
	if (thread_up)
		return 0;
	sigemptyset(&wait_set);
	sigaddset(&wait_set, SIGINT);
	sigaddset(&wait_set, SIGTERM);
	sigaddset(&wait_set, SIGUSR1);
	sigaddset(&wait_set, SIGHUP);
	rc = pthread_create(&t, NULL, signal_thread, NULL);
	if (rc != 0) {
		atomic_store_explicit(&sig_app, NULL, memory_order_release);
		return -rc;
	}
	pthread_detach(t);
	thread_up = true;
	return 0;
}

void
cr__app_signals_detach(void)
{
	atomic_store_explicit(&sig_app, NULL, memory_order_release);
}
