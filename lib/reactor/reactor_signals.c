/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * How an app stops on signals: a thread of its own takes SIGINT/SIGTERM (and SIGHUP if
 * asked) with sigwait(); every other thread, lcores included, has them blocked.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>

#include "cr_reactor.h"

static sigset_t sig_set;
static bool sig_hup;
static void (*sig_on_stop)(void *);
static void (*sig_on_hup)(void *);
static void *sig_arg;

int
cr_reactor_signals_block(bool hup)
{
	sigemptyset(&sig_set);
	sigaddset(&sig_set, SIGINT);
	sigaddset(&sig_set, SIGTERM);
	if (hup)
		sigaddset(&sig_set, SIGHUP);
	sig_hup = hup;
	return -pthread_sigmask(SIG_BLOCK, &sig_set, NULL);
}

static void *
signal_thread(void *arg)
{
	unsigned stops = 0;
	int sig;

	(void)arg;
	while (sigwait(&sig_set, &sig) == 0) {
		if (sig == SIGHUP) {
			if (sig_on_hup != NULL)
				sig_on_hup(sig_arg);
		} else if (stops++ != 0) {
			cr_shutdown_force();
		} else if (sig_on_stop != NULL) {
			sig_on_stop(sig_arg);
		} else {
			cr_reactor_stop();
		}
	}
	return NULL;
}

int
cr_reactor_signals_start(void (*on_stop)(void *arg), void (*on_hup)(void *arg), void *arg)
{
	pthread_t t;
	int rc;

	if (on_hup != NULL && !sig_hup)
		return -EINVAL;
	sig_on_stop = on_stop;
	sig_on_hup = on_hup;
	sig_arg = arg;
	rc = pthread_create(&t, NULL, signal_thread, NULL);
	if (rc != 0)
		return -rc;
	pthread_detach(t);
	return 0;
}
