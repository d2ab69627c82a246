/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The Date header: formatted once a second per lcore by a timer aligned to the wall
 * clock's second, so a request never pays for gmtime and every lcore's responses agree.
 */
#include <time.h>

#include "http.h"

static void
date_refresh(struct http_lcore *hl)
{
	struct timespec ts;
	uint64_t to_next;

	clock_gettime(CLOCK_REALTIME, &ts);
	http_date_format((int64_t)ts.tv_sec, hl->date);
	http_canned_rebuild(hl);
	/* Fire just after the next second starts. */
	to_next = 1000000000u - (uint64_t)ts.tv_nsec + 1000000u;
	cr_timer_start(&hl->date_timer, to_next);
}

static void
date_tick(struct cr_timer *t, void *arg)
{
	(void)t;
	date_refresh(arg);
}

void
http_date_start(struct http_lcore *hl)
{
	cr_timer_init(&hl->date_timer, date_tick, hl);
	date_refresh(hl);
}

void
http_date_stop(struct http_lcore *hl)
{
	cr_timer_stop(&hl->date_timer);
}
