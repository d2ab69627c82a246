/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Seeded stress of retire / start / resize with messages and leases in flight, exact
 * counts, on real threads ($CR_UT_DRIVER). A control thread retires and restarts every
 * non-main lcore at random while the main lcore and a foreign thread keep sending to
 * them and the workers take and drop leases. Every send that returned 0 must run exactly
 * once; every other one must have failed with -ESHUTDOWN or -EAGAIN; every retirement
 * must complete once its lease is released.
 *
 * Usage: lifecycle_stress [SEED [CYCLES]]
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cr_lease.h"
#include "cr_reactor.h"
#include "ut_driver.h"

static struct cr_eal_config cfg;
static struct cr_lcore_table table;
static unsigned seed, cycles;
static _Atomic uint64_t accepted, ran, refused;
static _Atomic bool senders_on;
static _Atomic int failures;
static struct cr_lease leases[CR_MAX_LCORES];
static _Atomic unsigned retired_calls;

#define CHECK(c, ...)                                                                      \
	do {                                                                               \
		if (!(c)) {                                                                \
			fprintf(stderr, "FAIL line %d: %s (seed %u) ", __LINE__, #c, seed);      \
			fprintf(stderr, __VA_ARGS__);                                      \
			fprintf(stderr, "\n");                                             \
			atomic_fetch_add(&failures, 1);                                    \
		}                                                                          \
	} while (0)

static uint64_t
xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void
sleep_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};

	nanosleep(&ts, NULL);
}

static void
counted(void *arg)
{
	(void)arg;
	atomic_fetch_add(&ran, 1);
}

/* On a worker: take a lease (if admission is open) or drop the one it holds. */
static void
toggle_lease(void *arg)
{
	struct cr_lease *l = &leases[cr_lcore_id()];
	int rc;

	(void)arg;
	if (cr_lease_active(l)) {
		cr_lease_release(l);
		return;
	}
	rc = cr_lease_acquire(l);
	CHECK(rc == 0 || rc == -ESHUTDOWN, "acquire rc %d", rc);
}

static void
count_send(int rc)
{
	if (rc == 0)
		atomic_fetch_add(&accepted, 1);
	else if (rc == -ESHUTDOWN || rc == -EAGAIN)
		atomic_fetch_add(&refused, 1);
	else
		CHECK(0, "send rc %d", rc);
}

static unsigned
random_lcore(uint64_t *rng)
{
	return table.lcores[xorshift(rng) % table.n].lcore_id;
}

/* Main-lcore sender: a task that sends a few messages per turn while senders_on. */
static uint64_t main_rng;
static struct cr_timer main_tick;

/* A burst of 1-32 to one lcore: all of it accepted (counted) or none (refused). */
static void
send_burst(unsigned id, unsigned n)
{
	struct cr_msg m[32];
	unsigned i;
	int rc;

	for (i = 0; i < n; i++) {
		m[i].fn = counted;
		m[i].arg = NULL;
	}
	rc = cr_send_burst(id, m, n);
	if (rc > 0) {
		atomic_fetch_add(&accepted, (uint64_t)rc);
		if ((unsigned)rc < n)
			atomic_fetch_add(&refused, n - (uint64_t)rc); /* the ring was full */
	} else {
		CHECK(rc == -ESHUTDOWN || rc == -EAGAIN, "burst rc %d", rc);
		atomic_fetch_add(&refused, n);
	}
}

static void
main_send(struct cr_timer *t, void *arg)
{
	(void)t;
	(void)arg;
	for (int i = 0; i < 8; i++) {
		unsigned id = random_lcore(&main_rng);
		int rc = cr_send(id, counted, NULL);

		count_send(rc);
	}
	/* Bursts too, racing the retires (issue 13's burst hand-off). */
	send_burst(random_lcore(&main_rng), 1 + (unsigned)(xorshift(&main_rng) % 32));
	if (atomic_load(&senders_on))
		cr_timer_start(&main_tick, 50 * 1000);
}

static void *
foreign_sender(void *arg)
{
	uint64_t rng = seed * 31 + 7;

	(void)arg;
	while (atomic_load(&senders_on)) {
		count_send(cr_send(random_lcore(&rng), counted, NULL));
		if (xorshift(&rng) % 8 == 0)
			send_burst(random_lcore(&rng), 1 + (unsigned)(xorshift(&rng) % 32));
		if (xorshift(&rng) % 16 == 0)
			sleep_us((long)(xorshift(&rng) % 200));
	}
	return NULL;
}

static void
on_retired(unsigned lcore, void *arg)
{
	(void)lcore;
	(void)arg;
	atomic_fetch_add(&retired_calls, 1);
}

static void
on_stop(unsigned lcore, void *arg)
{
	(void)arg;
	/* the owner cleans up on its lcore; a forced stop may leave it held: drop it */
	if (cr_lease_active(&leases[lcore]))
		cr_lease_release(&leases[lcore]);
}

static void *
control(void *arg)
{
	uint64_t rng = seed * 7919 + 1;
	unsigned c, retires = 0, i;

	(void)arg;
	for (c = 0; c < cycles; c++) {
		unsigned id = random_lcore(&rng);
		int st = cr_lcore_state(id), rc;

		switch (xorshift(&rng) % 4) {
		case 0: /* retire (its lease, if any, is dropped later by toggle) */
			rc = cr_lcore_retire(id, on_retired, NULL);
			CHECK(rc == 0 || rc == -EBUSY || rc == -EALREADY, "retire rc %d", rc);
			retires += rc == 0;
			break;
		case 1:
			rc = cr_lcore_start(id);
			CHECK(rc == 0 || rc == -EALREADY, "start %u (state %d) rc %d", id, st, rc);
			break;
		case 2:
			rc = cr_pool_resize(1 + (unsigned)(xorshift(&rng) % table.n));
			CHECK(rc == 0 || rc == -EINPROGRESS, "resize rc %d", rc);
			break;
		default:
			rc = cr_send(id, toggle_lease, NULL);
			CHECK(rc == 0 || rc == -ESHUTDOWN || rc == -EAGAIN, "toggle rc %d", rc);
			break;
		}
		sleep_us((long)(xorshift(&rng) % 2000));
	}
	/* Let every retirement finish: release every lease through its owner, start all. */
	for (i = 0; i < 200; i++) {
		unsigned id, busy = 0;

		for (unsigned k = 0; k < table.n; k++) {
			id = table.lcores[k].lcore_id;
			if (cr_lease_active(&leases[id]) && cr_send(id, toggle_lease, NULL) == 0)
				busy++;
			if (cr_lcore_state(id) == CR_LCORE_RETIRING)
				busy++;
		}
		if (busy == 0)
			break;
		sleep_us(5000);
	}
	CHECK(i < 200, "retirements did not finish");
	cr_pool_resize(table.n);
	atomic_store(&senders_on, false);
	sleep_us(20000);
	printf("lifecycle stress: %u control steps, %u retires requested\n", cycles, retires);
	cr_reactor_stop();
	return NULL;
}

static void
watchdog(int sig)
{
	static const char msg[] = "FAIL: watchdog: lifecycle stress hung\n";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

int
main(int argc, char **argv)
{
	const struct cr_reactor_hooks hooks = {.on_lcore_stop = on_stop};
	pthread_t ctl, fs;
	char err[256];

	seed = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 0) : 1;
	cycles = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 0) : 300;
	ut_require_driver();
	cr_eal_config_defaults(&cfg);
	cfg.io_driver = ut_driver();
	if (cr_eal_lcore_table(&cfg, &table, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	signal(SIGALRM, watchdog);
	alarm(240);
	main_rng = seed;
	atomic_store(&senders_on, true);
	if (cr_reactor_init(&cfg, &table, &hooks) != 0)
		return 1;
	cr_timer_init(&main_tick, main_send, NULL);
	cr_timer_start(&main_tick, 0);
	pthread_create(&ctl, NULL, control, NULL);
	pthread_create(&fs, NULL, foreign_sender, NULL);
	cr_reactor_run();
	pthread_join(ctl, NULL);
	pthread_join(fs, NULL);
	cr_reactor_fini();
	alarm(0);
	printf("accepted %" PRIu64 ", ran %" PRIu64 ", refused %" PRIu64 ", retirements done %u\n",
	       atomic_load(&accepted), atomic_load(&ran), atomic_load(&refused),
	       atomic_load(&retired_calls));
	CHECK(atomic_load(&accepted) == atomic_load(&ran), "accepted != ran");
	printf("%d failure(s)\n", atomic_load(&failures));
	return atomic_load(&failures) != 0 ? 1 : 0;
}
