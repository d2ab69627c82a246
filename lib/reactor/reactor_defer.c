/* SPDX-License-Identifier: BSD-3-Clause */
/* The local run queue: a fixed FIFO sized at start (no allocation on the fast path). */
#include <errno.h>

#include "reactor_internal.h"

_Static_assert((CR_DEFER_CAP & (CR_DEFER_CAP - 1)) == 0, "CR_DEFER_CAP is a power of two");

int
cr_defer(cr_msg_fn fn, void *arg)
{
	struct cr_lcore *lc = cr__cur;
	struct cr_msg *m;

	if (lc == NULL)
		return -EPERM;
	if (fn == NULL)
		return -EINVAL;
	if (lc->phase == LP_GONE)
		return -ESHUTDOWN;
	if (lc->defer_tail - lc->defer_head == CR_DEFER_CAP)
		return -EAGAIN;
	m = &lc->defer[lc->defer_tail++ & (CR_DEFER_CAP - 1)];
	m->fn = fn;
	m->arg = arg;
	return 0;
}

unsigned
cr__run_deferred(struct cr_lcore *lc)
{
	/* Only what was queued before this pass: a task deferring itself waits a turn. */
	unsigned n = lc->defer_tail - lc->defer_head, i;

	if (n > CR_BATCH)
		n = CR_BATCH;
	for (i = 0; i < n; i++) {
		struct cr_msg m = lc->defer[lc->defer_head++ & (CR_DEFER_CAP - 1)];

		m.fn(m.arg);
	}
	if (n != 0)
		CR_STAT_ADD(lc, deferred, n);
	return n;
}
