/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ut_lcores.h"

uint64_t ut_now = 1000000000;
uint64_t ut_clock_step;
unsigned (*ut_io_poll_hook)(struct cr_backend *be, unsigned budget);
bool (*ut_io_pending_hook)(const struct cr_backend *be);

uint64_t
ut_clock(void)
{
	uint64_t t = ut_now;

	ut_now += ut_clock_step;
	return t;
}

static int
sim_probe(char *why, size_t len)
{
	(void)why;
	(void)len;
	return 0;
}

static int
sim_wake_init(struct cr_wake *w)
{
	w->fd = -1;
	return 0;
}

static void
sim_wake_fini(struct cr_wake *w)
{
	(void)w;
}

static int
sim_init(struct cr_backend **out, unsigned lcore, struct cr_wake *wake,
	 const struct cr_eal_config *cfg)
{
	struct cr_backend *be = calloc(1, sizeof(*be));

	(void)cfg;
	if (be == NULL)
		return -ENOMEM;
	be->lcore = lcore;
	be->wake = wake;
	*out = be;
	return 0;
}

static void
sim_fini(struct cr_backend *be)
{
	free(be);
}

static unsigned
sim_poll(struct cr_backend *be, unsigned budget, uint64_t *wakes)
{
	unsigned n = 0;

	if (atomic_exchange(&be->wake->woken, 0)) {
		(*wakes)++;
		n++;
	}
	while (be->fake_cqes != 0 && n < budget) {
		be->fake_cqes--;
		n++;
	}
	if (be->io != NULL && n < budget)
		n += ut_io_poll_hook(be, budget - n);
	return n;
}

static bool
sim_pending(struct cr_backend *be)
{
	return atomic_load(&be->wake->woken) || be->fake_cqes != 0 ||
	       (be->io != NULL && ut_io_pending_hook(be));
}

static void
sim_submit(struct cr_backend *be)
{
	(void)be;
}

static void
sim_park(struct cr_backend *be, uint64_t timeout_ns)
{
	be->parks++;
	be->last_timeout = timeout_ns;
}

static void
sim_wake_foreign(struct cr_wake *w)
{
	atomic_store(&w->woken, 1);
	atomic_fetch_add(&w->signals, 1);
}

static void
sim_wake_lcore(struct cr_backend *self, struct cr_backend *target, struct cr_wake *tw)
{
	(void)self;
	(void)target;
	sim_wake_foreign(tw);
}

const struct cr_backend_ops ut_sim_ops = {
	.name = "sim",
	.probe = sim_probe,
	.wake_init = sim_wake_init,
	.wake_fini = sim_wake_fini,
	.init = sim_init,
	.fini = sim_fini,
	.poll = sim_poll,
	.pending = sim_pending,
	.submit = sim_submit,
	.park = sim_park,
	.wake_from_lcore = sim_wake_lcore,
	.wake_from_foreign = sim_wake_foreign,
};

int
ut_start(unsigned n)
{
	ut_io_poll_hook = NULL;
	ut_io_pending_hook = NULL;
	return ut_start_ops(n, &ut_sim_ops);
}

int
ut_start_ops(unsigned n, const struct cr_backend_ops *ops)
{
	struct cr_eal_config cfg;
	struct cr_lcore_table t;
	unsigned i;

	cr_eal_config_defaults(&cfg);
	memset(&t, 0, sizeof(t));
	t.n = n;
	t.main_lcore = 0;
	for (i = 0; i < n; i++) {
		t.lcores[i].lcore_id = i;
		t.lcores[i].cpu = i;
		t.lcores[i].numa_node = -1;
	}
	ut_clock_step = 0;
	return cr__sim_init(&cfg, &t, ops, ut_clock);
}

void
ut_stop(void)
{
	struct cr_lcore *prev = cr__cur;

	/* What an lcore's end does for its modules (lib/io waits for its last completions,
	 * which the sim poll reports): nothing of theirs outlives the run. */
	for (unsigned id = CR_MAX_LCORES; id-- > 0;) {
		if (cr__lcore(id) == NULL)
			continue;
		cr__set_cur(cr__lcore(id));
		cr__modules_stop(id);
	}
	cr__set_cur(prev);
	cr__sim_fini();
}

void
ut_set_current(unsigned id)
{
	cr__set_cur(id == CR_LCORE_NONE ? NULL : cr__lcore(id));
}

unsigned
ut_turn(unsigned id)
{
	struct cr_lcore *prev = cr__cur;
	unsigned work;

	cr__set_cur(cr__lcore(id));
	work = cr__lcore_turn(cr__cur);
	cr__set_cur(prev);
	return work;
}

unsigned
ut_poll_k(unsigned id, unsigned k)
{
	unsigned work = 0;

	while (k-- != 0)
		work += ut_turn(id);
	return work;
}

unsigned
ut_poll_until_idle(unsigned max_rounds)
{
	unsigned rounds = 0, id;

	while (rounds < max_rounds) {
		unsigned work = 0;

		for (id = 0; id < CR_MAX_LCORES; id++)
			if (cr__lcore(id) != NULL)
				work += ut_turn(id);
		/* a turn that only flushed sends reports no work, yet its target has some */
		for (id = 0; id < CR_MAX_LCORES; id++)
			if (cr__lcore(id) != NULL && cr__lcore_has_work(cr__lcore(id), ut_now))
				work++;
		if (work == 0)
			break;
		rounds++;
	}
	return rounds;
}

struct cr_backend *
ut_be(unsigned id)
{
	return cr__lcore(id)->be_own;
}

struct cr_lcore *
ut_lcore(unsigned id)
{
	return cr__lcore(id);
}

uint64_t
ut_wake_signals(unsigned id)
{
	return atomic_load(&cr__lcore(id)->wake.signals);
}
