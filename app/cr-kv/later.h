/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Run something in a later turn of this lcore, without fail: a script's time slice
 * (script_run.c) must go on after the lcore went round its loop, whatever the state of
 * its defer queue.
 */
#ifndef CR_KV_LATER_H
#define CR_KV_LATER_H

#include "cr_reactor.h"

/*
 * Run @p fn(@p arg) in a later turn of this lcore: deferred (the next turn), or, when the
 * defer queue is full (cr_defer()'s -EAGAIN at CR_DEFER_CAP), from timer @p t in a tick.
 * @p t is set up with cr_timer_init() to call fn(arg), lives as long as arg, and is
 * stopped by its owner when arg is freed first. Lcore only.
 */
static inline void
kv_later(cr_msg_fn fn, void *arg, struct cr_timer *t)
{
	if (cr_defer(fn, arg) != 0)
		cr_timer_start(t, 1);
}

#endif /* CR_KV_LATER_H */
