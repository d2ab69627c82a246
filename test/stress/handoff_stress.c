/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Seeded stress of cr_send with exact counts, on real threads and the backend named by
 * $CR_UT_DRIVER.
 *
 * Phase 1: every lcore and two foreign threads send to random lcores in random bursts,
 * pausing at random so targets park between bursts. Every accepted message must run
 * exactly once, in order per (sender, target); no wake-up may be lost (the run would hang
 * and the watchdog fail it).
 *
 * Phase 2: foreign threads and lcores keep sending while the runtime stops. Every send
 * that returned 0 must have run; every other one must have failed with -ESHUTDOWN or
 * -EAGAIN.
 *
 * Usage: handoff_stress [SEED [MESSAGES_PER_SENDER]]
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

#include "cr_reactor.h"
#include "ut_driver.h"

#define N_FOREIGN 2
#define MAX_SENDERS (CR_MAX_LCORES + N_FOREIGN)

static struct cr_eal_config cfg;
static struct cr_lcore_table table;
static unsigned n_lcores, ids[CR_MAX_LCORES];
static uint64_t per_sender;
static unsigned seed;
static int failures;

#define CHECK(cond, ...)                                                                   \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);   \
			fprintf(stderr, __VA_ARGS__);                                      \
			fprintf(stderr, " (seed %u)\n", seed);                             \
			failures++;                                                        \
		}                                                                          \
	} while (0)

/* Owned by each target lcore while running; read after the run. */
struct target_state {
	uint64_t next_seq[MAX_SENDERS];
	uint64_t received;
	uint64_t out_of_order;
};
static struct target_state tstate[CR_MAX_LCORES];

/* Sender-side: accepted counts per (sender slot, target index). */
static uint64_t accepted[MAX_SENDERS][CR_MAX_LCORES];
static uint64_t refused[MAX_SENDERS];
static _Atomic uint64_t total_received;
static _Atomic uint64_t expected_total; /* set when every sender is done */
static _Atomic int senders_done;

static inline uint64_t
xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static unsigned
lcore_index(unsigned id)
{
	for (unsigned i = 0; i < n_lcores; i++)
		if (ids[i] == id)
			return i;
	abort();
}

static void
maybe_finish(void)
{
	uint64_t exp = atomic_load(&expected_total);

	if (atomic_load(&senders_done) == (int)(n_lcores + N_FOREIGN) &&
	    atomic_load(&total_received) == exp)
		cr_reactor_stop();
}

static void
receive(void *arg)
{
	uint64_t v = (uint64_t)(uintptr_t)arg;
	unsigned slot = (unsigned)(v >> 48);
	uint64_t seq = v & ((UINT64_C(1) << 48) - 1);
	struct target_state *ts = &tstate[lcore_index(cr_lcore_id())];

	if (seq != ts->next_seq[slot])
		ts->out_of_order++;
	ts->next_seq[slot] = seq + 1;
	ts->received++;
	atomic_fetch_add(&total_received, 1);
	maybe_finish();
}

/* The sequence number of the next message from @p slot to target index @p t. */
static uint64_t seqs[MAX_SENDERS][CR_MAX_LCORES];

static int
send_one(unsigned slot, unsigned t)
{
	uint64_t v = ((uint64_t)slot << 48) | seqs[slot][t];
	int rc = cr_send(ids[t], receive, (void *)(uintptr_t)v);

	if (rc == 0) {
		seqs[slot][t]++;
		accepted[slot][t]++;
	}
	return rc;
}

static void
sender_done(unsigned slot)
{
	uint64_t mine = 0;

	for (unsigned t = 0; t < n_lcores; t++)
		mine += accepted[slot][t];
	atomic_fetch_add(&expected_total, mine);
	atomic_fetch_add(&senders_done, 1);
}

/* ---- lcore senders: a task that sends a burst, then pauses on a timer or defers ---- */

struct lcore_sender {
	unsigned slot;
	uint64_t rng;
	uint64_t sent;
	struct cr_timer pause;
	bool phase2;
};
static struct lcore_sender lsend[CR_MAX_LCORES];

static void lcore_send_step(void *arg);

static void
pause_fired(struct cr_timer *t, void *arg)
{
	(void)t;
	lcore_send_step(arg);
}

static void
lcore_send_step(void *arg)
{
	struct lcore_sender *s = arg;
	unsigned burst = 1 + (unsigned)(xorshift(&s->rng) % 40), i;

	for (i = 0; i < burst && (s->phase2 || s->sent < per_sender); i++) {
		int rc = send_one(s->slot, (unsigned)(xorshift(&s->rng) % n_lcores));

		if (rc == 0) {
			s->sent++;
		} else {
			CHECK(rc == -EAGAIN || (s->phase2 && rc == -ESHUTDOWN), "rc %d", rc);
			refused[s->slot]++;
			if (rc == -ESHUTDOWN)
				return; /* phase 2: the runtime is stopping */
			break;
		}
	}
	if (!s->phase2 && s->sent == per_sender) {
		sender_done(s->slot);
		maybe_finish();
		return;
	}
	if (xorshift(&s->rng) % 8 == 0) /* pause so targets go idle and park */
		cr_timer_start(&s->pause, (xorshift(&s->rng) % 300) * 1000);
	else if (cr_defer(lcore_send_step, s) != 0)
		cr_timer_start(&s->pause, 0);
}

static void
on_start(unsigned id, void *arg)
{
	struct lcore_sender *s = &lsend[lcore_index(id)];

	(void)arg;
	cr_timer_init(&s->pause, pause_fired, s);
}

static void
on_stop(unsigned id, void *arg)
{
	struct lcore_sender *s = &lsend[lcore_index(id)];

	(void)arg;
	cr_timer_stop(&s->pause);
}

static void
start_lcore_sender(void *arg)
{
	lcore_send_step(arg);
}

/* ---- foreign senders ---- */

struct foreign_sender {
	unsigned slot;
	uint64_t rng;
	bool phase2;
	_Atomic bool *stop_flag;
	pthread_t thread;
};
static struct foreign_sender fsend[N_FOREIGN];

static void
sleep_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};

	nanosleep(&ts, NULL);
}

static void *
foreign_main(void *arg)
{
	struct foreign_sender *f = arg;
	uint64_t sent = 0, spins = 0;

	while (f->phase2 || sent < per_sender) {
		int rc = send_one(f->slot, (unsigned)(xorshift(&f->rng) % n_lcores));

		if (rc == 0) {
			sent++;
		} else if (rc == -EAGAIN) {
			refused[f->slot]++;
			sched_yield();
		} else {
			CHECK(f->phase2 && rc == -ESHUTDOWN, "rc %d", rc);
			refused[f->slot]++;
			break;
		}
		if (xorshift(&f->rng) % 64 == 0)
			sleep_us((long)(xorshift(&f->rng) % 300));
		if (f->phase2 && ++spins > 50 * 1000 * 1000)
			break; /* bounded even if stop never shows */
	}
	if (!f->phase2) {
		sender_done(f->slot);
		maybe_finish();
	}
	return NULL;
}

/* ---- phases ---- */

static void
reset_counts(void)
{
	memset(tstate, 0, sizeof(tstate));
	memset(accepted, 0, sizeof(accepted));
	memset(refused, 0, sizeof(refused));
	memset(seqs, 0, sizeof(seqs));
	atomic_store(&total_received, 0);
	atomic_store(&expected_total, 0);
	atomic_store(&senders_done, 0);
}

static uint64_t
check_counts(const char *phase)
{
	uint64_t acc_total = 0, recv_total = 0;

	for (unsigned t = 0; t < n_lcores; t++) {
		uint64_t acc = 0;

		for (unsigned s = 0; s < n_lcores + N_FOREIGN; s++) {
			acc += accepted[s][t];
			CHECK(tstate[t].next_seq[s] == seqs[s][t],
			      "%s: target %u from sender %u: last seq %" PRIu64 " of %" PRIu64,
			      phase, ids[t], s, tstate[t].next_seq[s], seqs[s][t]);
		}
		CHECK(tstate[t].received == acc, "%s: target %u received %" PRIu64
		      " of %" PRIu64 " accepted", phase, ids[t], tstate[t].received, acc);
		CHECK(tstate[t].out_of_order == 0, "%s: target %u: %" PRIu64 " out of order",
		      phase, ids[t], tstate[t].out_of_order);
		acc_total += acc;
		recv_total += tstate[t].received;
	}
	printf("%s: accepted %" PRIu64 ", ran %" PRIu64 "\n", phase, acc_total, recv_total);
	return acc_total;
}

static void
start_senders(bool phase2)
{
	unsigned i;

	for (i = 0; i < n_lcores; i++) {
		lsend[i].slot = i;
		lsend[i].rng = seed * 7919u + i + 1;
		lsend[i].sent = 0;
		lsend[i].phase2 = phase2;
		/* queue the first step on the lcore itself */
		CHECK(cr_send(ids[i], start_lcore_sender, &lsend[i]) == 0, "start sender");
	}
	for (i = 0; i < N_FOREIGN; i++) {
		fsend[i].slot = n_lcores + i;
		fsend[i].rng = seed * 104729u + i + 1;
		fsend[i].phase2 = phase2;
		pthread_create(&fsend[i].thread, NULL, foreign_main, &fsend[i]);
	}
}

static void
phase1(void)
{
	const struct cr_reactor_hooks hooks = {on_start, on_stop, NULL};

	reset_counts();
	if (cr_reactor_init(&cfg, &table, &hooks) != 0) {
		CHECK(0, "init");
		return;
	}
	start_senders(false);
	cr_reactor_run();
	for (unsigned i = 0; i < N_FOREIGN; i++)
		pthread_join(fsend[i].thread, NULL);
	cr_reactor_fini();
	CHECK(check_counts("phase 1") == (n_lcores + N_FOREIGN) * per_sender,
	      "every sender got all its messages in");
}

static struct cr_timer stop_timer;

static void
stop_now(struct cr_timer *t, void *arg)
{
	(void)t;
	(void)arg;
	cr_reactor_stop();
}

static void
phase2(void)
{
	const struct cr_reactor_hooks hooks = {on_start, on_stop, NULL};

	reset_counts();
	if (cr_reactor_init(&cfg, &table, &hooks) != 0) {
		CHECK(0, "init");
		return;
	}
	start_senders(true);
	cr_timer_init(&stop_timer, stop_now, NULL);
	cr_timer_start(&stop_timer, 50 * 1000 * 1000); /* stop mid-stream, after 50 ms */
	cr_reactor_run();
	for (unsigned i = 0; i < N_FOREIGN; i++)
		pthread_join(fsend[i].thread, NULL);
	cr_reactor_fini();
	check_counts("phase 2 (stop while sending)");
}

static void
watchdog(int sig)
{
	(void)sig;
	static const char msg[] = "FAIL: watchdog: a phase hung (lost wake-up?)\n";

	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

int
main(int argc, char **argv)
{
	char err[256];

	seed = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 0) : 1;
	per_sender = argc > 2 ? strtoull(argv[2], NULL, 0) : 200000;
	ut_require_driver();
	cr_eal_config_defaults(&cfg);
	cfg.io_driver = ut_driver();
	if (cr_eal_lcore_table(&cfg, &table, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	n_lcores = table.n;
	for (unsigned i = 0; i < n_lcores; i++)
		ids[i] = table.lcores[i].lcore_id;
	printf("handoff stress: seed %u, %u lcores + %d foreign threads, %" PRIu64
	       " messages each, driver %s\n",
	       seed, n_lcores, N_FOREIGN, per_sender, ut_driver_uring() ? "uring" : "epoll");
	signal(SIGALRM, watchdog);
	alarm(240);
	phase1();
	phase2();
	alarm(0);
	printf("%d failure(s)\n", failures);
	return failures != 0 ? 1 : 0;
}
