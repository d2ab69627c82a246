/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Lcore-locals: per-lcore state created at each lcore start and destroyed at its end, for
 * every incarnation. All of an lcore's blocks live in one NUMA-local allocation made when
 * lib/app's reactor module starts on the lcore.
 *
 * lib/app's module must start before the other modules and stop after them: a block's
 * fini runs only once lib/net has closed the lcore's last connections (whose callbacks
 * use the app's state) and lib/io has seen the final completion of every op (whose buffers
 * may be in a block). Modules stop in the reverse order of registration, so lib/app
 * registers from a constructor that runs before the default-priority ones of the other
 * libraries.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>

#include "app_internal.h"
#include "cr_reactor.h"
#include "cr_reactor_module.h"

struct local_def {
	size_t size;
	size_t off; /* in the lcore's allocation, a multiple of 64 */
	cr_lcore_local_init_fn init;
	cr_lcore_local_fini_fn fini;
	void *arg;
};

static struct local_def defs[CR_LCORE_LOCAL_MAX];
static unsigned n_defs;
static size_t total;
/* Set by the module for the calling lcore's current incarnation. */
static _Thread_local char *my_block;
/* Per lcore, for its stop; the lcore's own thread only (and the run's end, after joins). */
static char *blocks[CR_MAX_LCORES];
static unsigned inited[CR_MAX_LCORES];
/*
 * An ended incarnation's block, fini done, memory kept: the reactor cancels the timers an
 * lcore left armed after every module stopped, and one may sit in a block. Freed at the
 * lcore's next start or at the end of the run.
 */
static char *ended[CR_MAX_LCORES];

int
cr_lcore_local_register(size_t size, cr_lcore_local_init_fn init, cr_lcore_local_fini_fn fini,
			void *arg)
{
	struct local_def *d;

	if (size == 0)
		return -EINVAL;
	/* Lcores size their blocks when they start: changing the layout under them is refused. */
	if (cr_lcore_count() != 0)
		return -EBUSY;
	if (n_defs == CR_LCORE_LOCAL_MAX)
		return -ENOSPC;
	d = &defs[n_defs];
	*d = (struct local_def){size, total, init, fini, arg};
	total += (size + 63) & ~(size_t)63;
	return (int)n_defs++;
}

void *
cr_lcore_local(int id)
{
	if (my_block == NULL || id < 0 || (unsigned)id >= n_defs)
		return NULL;
	return my_block + defs[id].off;
}

void
cr__app_locals_reset(void)
{
	for (unsigned i = 0; i < CR_MAX_LCORES; i++) {
		cr_numa_free(ended[i]);
		ended[i] = NULL;
	}
	n_defs = 0;
	total = 0;
}

static void
locals_fini(unsigned lcore)
{
	char *b = blocks[lcore];

	while (inited[lcore] > 0) {
		const struct local_def *d = &defs[--inited[lcore]];

		if (d->fini != NULL)
			d->fini(b + d->off, lcore, d->arg);
	}
	my_block = NULL;
	blocks[lcore] = NULL;
	ended[lcore] = b;
}

static int
locals_start(unsigned lcore)
{
	char *b;
	int rc;

	cr_numa_free(ended[lcore]);
	ended[lcore] = NULL;
	if (n_defs == 0)
		return 0;
	b = cr_numa_zalloc(total, cr_lcore_numa(lcore));
	if (b == NULL)
		return -ENOMEM;
	blocks[lcore] = b;
	my_block = b;
	inited[lcore] = 0;
	while (inited[lcore] < n_defs) {
		const struct local_def *d = &defs[inited[lcore]];

		rc = d->init != NULL ? d->init(b + d->off, lcore, d->arg) : 0;
		if (rc != 0) {
			locals_fini(lcore);
			return rc;
		}
		inited[lcore]++;
	}
	return 0;
}

static void
locals_stop(unsigned lcore)
{
	if (blocks[lcore] != NULL)
		locals_fini(lcore);
}

static const struct cr_reactor_module app_module = {
    .name = "app",
    .lcore_start = locals_start,
    .lcore_stop = locals_stop,
    .lcore_busy = cr__app_lcore_busy, /* the app's (app_run.c) */
};

/* Priority 101 (the first an app may use): before every default-priority constructor. */
__attribute__((constructor(CR_MODULE_PRIO_APP))) static void
app_register(void)
{
	cr_reactor_module_register(&app_module);
}
