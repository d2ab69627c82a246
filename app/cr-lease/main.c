/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cr-lease: a runnable example of a lease. An "owner" on the last lcore holds a
 * thread-affine resource (here: a batch of work it must finish on that lcore, driven by a
 * timer). The main lcore shrinks the pool to one lcore while the owner is busy: the
 * owner's lcore leaves the placement pool at once but keeps serving the owner, and goes
 * OFFLINE only after the owner has finished and released its lease. Then the pool grows
 * back and the whole runtime shuts down.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "cr_app.h"
#include "cr_lease.h"
#include "cr_reactor.h"

static unsigned long long steps = 20;

struct owner {
	struct cr_lease lease;
	struct cr_timer tick;
	unsigned long long done_steps;
	unsigned lcore;
};

static struct owner owner;
/* The owner's first message ran (its lease taken, or refused). release: pairs with the
 * acquire in control_tick(). */
static _Atomic bool owner_started;
static uint64_t t0;

static double
ms(void)
{
	return (double)(cr_clock_ns() - t0) / 1e6;
}

static const char *
state_name(enum cr_lcore_state s)
{
	static const char *const names[] = {"OFFLINE", "STARTING", "RUNNING", "RETIRING"};

	return names[s];
}

static void
owner_tick(struct cr_timer *t, void *arg)
{
	struct owner *o = arg;

	(void)t;
	o->done_steps++;
	if (o->done_steps % 5 == 0)
		printf("%7.1f ms  owner on lcore %u: step %llu of %llu (lcore is %s)\n", ms(),
		       cr_lcore_id(), o->done_steps, steps, state_name(cr_lcore_state(o->lcore)));
	if (o->done_steps < steps) {
		cr_timer_start(&o->tick, 2 * 1000 * 1000);
		return;
	}
	/* Finished: clean up the thread-affine state here, on its lcore, then release. */
	printf("%7.1f ms  owner done; releasing its lease\n", ms());
	cr_lease_release(&o->lease);
}

static void
owner_start(void *arg)
{
	struct owner *o = arg;
	int rc = cr_lease_acquire(&o->lease);

	if (rc != 0) {
		fprintf(stderr, "cr-lease: cr_lease_acquire: %s\n", cr_strerror(rc));
		atomic_store_explicit(&owner_started, true, memory_order_release);
		return;
	}
	o->lcore = cr_lcore_id();
	printf("%7.1f ms  owner leased lcore %u (incarnation %" PRIu64 ")\n", ms(), o->lcore,
	       cr_lease_incarnation(&o->lease));
	cr_timer_init(&o->tick, owner_tick, o);
	cr_timer_start(&o->tick, 2 * 1000 * 1000);
	atomic_store_explicit(&owner_started, true, memory_order_release);
}

static void
retired(unsigned lcore, void *arg)
{
	(void)arg;
	printf("%7.1f ms  lcore %u is OFFLINE (retirement complete)\n", ms(), lcore);
}

static struct cr_timer control;
static int phase;

static void
control_tick(struct cr_timer *t, void *arg)
{
	unsigned n = cr_lcore_count();

	(void)arg;
	switch (phase) {
	case 0:
		/* Once the owner is busy on its lcore: on a loaded machine its first message
		 * may take longer than this timer, and a retire before it would refuse the
		 * lease (-ESHUTDOWN) rather than show what a lease does. */
		if (!atomic_load_explicit(&owner_started, memory_order_acquire))
			break;
		printf("%7.1f ms  main: shrinking the pool to 1 lcore (have %u)\n", ms(), n);
		cr_lcore_retire(owner.lcore, retired, NULL);
		printf("%7.1f ms  main: lcore %u is %s, placement pool has %u lcore(s)\n", ms(),
		       owner.lcore, state_name(cr_lcore_state(owner.lcore)), cr_lcore_count());
		phase = 1;
		break;
	case 1:
		if (cr_lcore_state(owner.lcore) != CR_LCORE_OFFLINE)
			break;
		printf("%7.1f ms  main: growing the pool back\n", ms());
		cr_pool_resize(2);
		phase = 2;
		break;
	case 2:
		if (cr_lcore_state(owner.lcore) != CR_LCORE_RUNNING)
			break;
		printf("%7.1f ms  main: lcore %u RUNNING again; shutting down\n", ms(), owner.lcore);
		cr_reactor_stop();
		return;
	}
	cr_timer_start(t, 5 * 1000 * 1000);
}

static int
set_steps(const char *v, void *ctx)
{
	(void)ctx;
	return cr_parse_uint(v, 1, 100000, &steps);
}

static int
configure(int argc, char **argv, void *arg)
{
	const struct cr_lcore_table *t = cr_app_lcore_table();

	(void)argc;
	(void)argv;
	(void)arg;
	if (t->n < 2)
		return cr_app_errorf(-EINVAL, "needs 2 lcores, -l gave %u", t->n);
	owner.lcore = t->lcores[t->n - 1].lcore_id;
	return 0;
}

/* On the main lcore: the owner starts on the last lcore, the control timer here. */
static int
start(void *arg)
{
	int rc;

	(void)arg;
	t0 = cr_clock_ns();
	rc = cr_send(owner.lcore, owner_start, &owner);
	if (rc != 0)
		return cr_app_errorf(rc, "cr_send to lcore %u: %s", owner.lcore, cr_strerror(rc));
	cr_timer_init(&control, control_tick, NULL);
	cr_timer_start(&control, 10 * 1000 * 1000);
	return 0;
}

static int
fini(bool failed, void *arg)
{
	(void)arg;
	if (failed)
		return 1;
	printf("cr-lease: owner finished %llu of %llu steps; lease active: %s\n",
	       owner.done_steps, steps, cr_lease_active(&owner.lease) ? "yes" : "no");
	return owner.done_steps == steps && !cr_lease_active(&owner.lease) ? 0 : 1;
}

int
main(int argc, char **argv)
{
	static const struct cr_opt opts[] = {
		{"steps", 0, "N", "steps of 2 ms the owner must finish (default 20)", "1-100000",
		 set_steps, NULL},
	};
	static const struct cr_app app = {
		.name = "cr-lease",
		.summary = "a lease keeps a retiring lcore for its owner (needs 2 lcores)",
		.opts = opts,
		.n_opts = 1,
		.configure = configure,
		.start = start,
		.fini = fini,
	};

	return cr_app_run(&app, argc, argv);
}
