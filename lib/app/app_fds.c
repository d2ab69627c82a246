/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The descriptor limit. Every connection is a descriptor, so a server that keeps the usual
 * soft limit (often 1024) runs out long before its connection slots do. lib/app raises the
 * soft limit to the hard one at start, as nginx's worker_rlimit_nofile does, offers apps a
 * slot count that fits it, and says so in one line when the slots asked for do not.
 */
#include <stdint.h>
#include <stdio.h>
#include <sys/resource.h>

#include "app_internal.h"
#include "cr_net.h"

/* Descriptors kept for what is not a connection: rings, eventfds, listeners, telemetry,
 * log files, the files an app opens. */
#define FDS_RESERVE 64
/* What cr_app_conns_fit() offers at most and at least, per lcore. */
#define FIT_MAX 4096
#define FIT_MIN 64

static uint64_t nofile; /* the soft limit after the raise; 0 = unknown or unlimited */

void
cr__app_fds_raise(void)
{
	struct rlimit rl;

	nofile = 0;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		struct rlimit up = {rl.rlim_max, rl.rlim_max};

		if (setrlimit(RLIMIT_NOFILE, &up) == 0)
			rl.rlim_cur = rl.rlim_max;
	}
	if (rl.rlim_cur != RLIM_INFINITY)
		nofile = rl.rlim_cur;
}

uint32_t
cr_app_conns_fit(void)
{
	const struct cr_lcore_table *t = cr_app_lcore_table();
	unsigned lcores = t != NULL && t->n > 0 ? t->n : 1;
	uint64_t per;

	if (nofile == 0)
		return FIT_MAX;
	per = nofile > FDS_RESERVE ? (nofile - FDS_RESERVE) / lcores : 0;
	return per > FIT_MAX ? FIT_MAX : per < FIT_MIN ? FIT_MIN : (uint32_t)per;
}

void
cr__app_fds_check(const struct cr_app *app)
{
	const struct cr_lcore_table *t = cr_app_lcore_table();
	unsigned lcores = t != NULL && t->n > 0 ? t->n : 1;
	uint64_t slots;

	if (app->net == NULL || nofile == 0)
		return;
	slots = (uint64_t)app->net->max_conns * lcores;
	if (slots + FDS_RESERVE <= nofile)
		return;
	fprintf(stderr,
		"%s: %llu connection slots (%u per lcore x %u) but a descriptor limit of %llu "
		"(RLIMIT_NOFILE): past about %llu connections new ones wait; raise the limit "
		"(ulimit -n, LimitNOFILE=) or lower the connection limit\n",
		app->name, (unsigned long long)slots, app->net->max_conns, lcores,
		(unsigned long long)nofile,
		(unsigned long long)(nofile > FDS_RESERVE ? nofile - FDS_RESERVE : 0));
	fflush(stderr);
}
