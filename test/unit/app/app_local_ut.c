/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cr_lcore_local on the real runtime (io driver per $CR_UT_DRIVER): a zeroed block per
 * lcore incarnation, created before the app's lcore_start and destroyed after its
 * lcore_stop — and after lib/net closed the lcore's last connections, whose callbacks
 * still find their state — across a resize that retires an lcore and starts it again.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cr_app.h"
#include "cr_net.h"
#include "cr_reactor.h"
#include "ut_cunit.h"
#include "ut_driver.h"

#define MAGIC	0x10ca1u
#define N_CONNS 8

struct state {
	uint32_t magic;
	unsigned lcore;
	unsigned opened, closed;    /* connections of this incarnation */
	struct cr_timer left_armed; /* fini does not disarm it: the reactor cancels it */
	uint8_t rest[200];
};

struct small {
	uint64_t v;
};

static int id_state = -1, id_small = -1;
static _Atomic int clock_;

/* Per lcore, what happened to its blocks (written by that lcore, read after joins). */
static struct {
	unsigned inits, finis, small_inits, small_finis, starts, stops;
	bool init_saw_zero, fini_saw_magic, start_saw_state, aligned;
	int last_init_at, last_fini_at, small_init_at, small_fini_at, stop_at;
	int last_close_at; /* the last on_close of a connection there */
	bool close_saw_state;
	unsigned timers_dropped;
	bool dropped_ours;
} seen[CR_MAX_LCORES];

static unsigned worker; /* the lcore the resize retires and starts again */
static _Atomic unsigned opened, resize_done;
static struct cr_listener *listener;
static uint16_t port;

static bool
all_zero(const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		if (b[i] != 0)
			return false;
	return true;
}

static int
state_init(void *mem, unsigned lcore, void *arg)
{
	struct state *s = mem;

	CU_ASSERT_PTR_EQUAL(arg, &seen);
	CU_ASSERT_EQUAL(cr_lcore_id(), lcore);
	seen[lcore].init_saw_zero = all_zero(s, sizeof(*s));
	seen[lcore].aligned = ((uintptr_t)mem & 63) == 0;
	s->magic = MAGIC;
	s->lcore = lcore;
	seen[lcore].inits++;
	seen[lcore].last_init_at = atomic_fetch_add(&clock_, 1);
	return 0;
}

static void
state_fini(void *mem, unsigned lcore, void *arg)
{
	struct state *s = mem;

	(void)arg;
	CU_ASSERT_EQUAL(cr_lcore_id(), lcore);
	seen[lcore].fini_saw_magic = s->magic == MAGIC && s->lcore == lcore;
	/* Every connection of the incarnation had its on_close before this. */
	CU_ASSERT_EQUAL(s->closed, s->opened);
	s->magic = 0;
	seen[lcore].finis++;
	seen[lcore].last_fini_at = atomic_fetch_add(&clock_, 1);
}

static int
small_init(void *mem, unsigned lcore, void *arg)
{
	(void)mem;
	(void)arg;
	seen[lcore].small_inits++;
	seen[lcore].small_init_at = atomic_fetch_add(&clock_, 1);
	return 0;
}

static void
small_fini(void *mem, unsigned lcore, void *arg)
{
	(void)mem;
	(void)arg;
	seen[lcore].small_finis++;
	seen[lcore].small_fini_at = atomic_fetch_add(&clock_, 1);
}

/* ---- connections: their callbacks use the lcore's state until the very end ---- */

static void
conn_open(struct cr_conn *c)
{
	struct state *s = cr_lcore_local(id_state);

	(void)c;
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	s->opened++;
	atomic_fetch_add(&opened, 1);
}

static void
conn_close(struct cr_conn *c, int err)
{
	struct state *s = cr_lcore_local(id_state);
	unsigned me = cr_lcore_id();

	(void)c;
	(void)err;
	seen[me].close_saw_state = s != NULL && s->magic == MAGIC;
	if (s != NULL)
		s->closed++;
	seen[me].last_close_at = atomic_fetch_add(&clock_, 1);
}

static const struct cr_conn_ops conn_ops = {.on_open = conn_open, .on_close = conn_close};

/* ---- the app ---- */

static int
configure(int argc, char **argv, void *arg)
{
	const struct cr_lcore_table *t = cr_app_lcore_table();

	(void)argc;
	(void)argv;
	(void)arg;
	worker = t->lcores[t->n - 1].lcore_id;
	CU_ASSERT_EQUAL(cr_lcore_local_register(0, NULL, NULL, NULL), -EINVAL);
	id_state = cr_lcore_local_register(sizeof(struct state), state_init, state_fini, &seen);
	id_small = cr_lcore_local_register(sizeof(struct small), small_init, small_fini, NULL);
	CU_ASSERT_TRUE(id_state >= 0 && id_small >= 0 && id_state != id_small);
	return id_state < 0 || id_small < 0 ? -ENOMEM : 0;
}

static void
never_fires(struct cr_timer *t, void *arg)
{
	(void)t;
	(void)arg;
	CU_FAIL("the timer an lcore left armed fired");
}

static int
lcore_start(unsigned lcore, void *arg)
{
	struct state *s = cr_lcore_local(id_state);
	struct small *sm = cr_lcore_local(id_small);

	(void)arg;
	seen[lcore].start_saw_state =
	    s != NULL && s->magic == MAGIC && sm != NULL && (char *)sm != (char *)s;
	seen[lcore].starts++;
	CU_ASSERT_PTR_NULL(cr_lcore_local(99));
	cr_timer_init(&s->left_armed, never_fires, NULL);
	cr_timer_start(&s->left_armed, 3600ull * 1000 * 1000 * 1000);
	return 0;
}

/* After lib/app's fini: the block is still mapped, so this timer is still readable. */
static void
timer_dropped(unsigned lcore, struct cr_timer *t, void *arg)
{
	(void)arg;
	seen[lcore].timers_dropped++;
	seen[lcore].dropped_ours = t->fn == never_fires;
}

static void
lcore_stop(unsigned lcore, void *arg)
{
	(void)arg;
	CU_ASSERT_PTR_NOT_NULL(cr_lcore_local(id_state));
	seen[lcore].stops++;
	seen[lcore].stop_at = atomic_fetch_add(&clock_, 1);
}

static bool
wait_for(bool (*cond)(void))
{
	struct timespec ms = {0, 1000000};

	for (int i = 0; i < 20000 && !cond(); i++)
		nanosleep(&ms, NULL);
	return cond();
}

static bool
worker_offline(void)
{
	return cr_lcore_state(worker) == CR_LCORE_OFFLINE;
}

static bool
worker_running(void)
{
	return cr_lcore_state(worker) == CR_LCORE_RUNNING;
}

static bool
all_open(void)
{
	return atomic_load(&opened) >= N_CONNS;
}

static int
client(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CU_ASSERT_EQUAL(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

/* Not an lcore: resize 2 -> 1 -> 2, then connections on every lcore, then stop. */
static void *
control(void *arg)
{
	int fds[N_CONNS];

	(void)arg;
	CU_ASSERT_EQUAL(cr_lcore_local_register(8, NULL, NULL, NULL), -EBUSY);
	CU_ASSERT_PTR_NULL(cr_lcore_local(id_state)); /* not an lcore */
	CU_ASSERT_EQUAL(cr_pool_resize(cr_app_lcore_table()->n - 1), 0);
	CU_ASSERT_TRUE(wait_for(worker_offline));
	CU_ASSERT_EQUAL(cr_pool_resize(cr_app_lcore_table()->n), 0);
	CU_ASSERT_TRUE(wait_for(worker_running));
	atomic_store(&resize_done, 1);
	for (int i = 0; i < N_CONNS; i++)
		fds[i] = client();
	CU_ASSERT_TRUE(wait_for(all_open));
	/* The connections are left open: a stop with no grace closes them at lcore_stop. */
	cr_reactor_stop();
	for (int i = 0; i < N_CONNS; i++)
		close(fds[i]);
	return NULL;
}

static pthread_t control_thread;

static int
start(void *arg)
{
	struct cr_tcp_listen_opts lo = {0};
	struct cr_net_addr bound;
	int rc;

	(void)arg;
	cr_net_addr_parse("127.0.0.1:0", &lo.addr);
	rc = cr_tcp_listen(&lo, &conn_ops, NULL, &listener);
	if (rc != 0)
		return cr_app_errorf(rc, "listen: %s", cr_strerror(rc));
	cr_listener_addr(listener, &bound);
	port = cr_net_addr_port(&bound);
	rc = pthread_create(&control_thread, NULL, control, NULL);
	return rc != 0 ? cr_app_errorf(-rc, "control thread") : 0;
}

static const struct cr_app app = {
    .name = "ut-local",
    .configure = configure,
    .lcore_start = lcore_start,
    .start = start,
    .lcore_stop = lcore_stop,
    .timer_dropped = timer_dropped,
};

static void
test_lifetimes_across_resize(void)
{
	const char *d = getenv("CR_UT_DRIVER");
	char *argv[] = {"ut-local",
			"--telemetry",
			"off",
			"--shutdown-timeout",
			"0",
			"--io-driver",
			(char *)(d != NULL ? d : "uring")};
	const struct cr_lcore_table *t;
	int status;

	status = cr_app_run(&app, sizeof(argv) / sizeof(argv[0]), argv);
	pthread_join(control_thread, NULL);
	CU_ASSERT_EQUAL(status, 0);
	t = cr_app_lcore_table();
	CU_ASSERT_TRUE_FATAL(t->n >= 2);
	CU_ASSERT_EQUAL(atomic_load(&resize_done), 1);
	for (unsigned i = 0; i < t->n; i++) {
		unsigned id = t->lcores[i].lcore_id, inc = id == worker ? 2 : 1;

		/* One block per incarnation: the worker's second one started zeroed again. */
		CU_ASSERT_EQUAL(seen[id].inits, inc);
		CU_ASSERT_EQUAL(seen[id].finis, inc);
		CU_ASSERT_EQUAL(seen[id].small_inits, inc);
		CU_ASSERT_EQUAL(seen[id].small_finis, inc);
		CU_ASSERT_EQUAL(seen[id].starts, inc);
		CU_ASSERT_EQUAL(seen[id].stops, inc);
		CU_ASSERT_TRUE(seen[id].init_saw_zero);
		CU_ASSERT_TRUE(seen[id].aligned);
		CU_ASSERT_TRUE(seen[id].start_saw_state);
		CU_ASSERT_TRUE(seen[id].fini_saw_magic);
		/* The timer each incarnation left armed was cancelled by the reactor, safely. */
		CU_ASSERT_EQUAL(seen[id].timers_dropped, inc);
		CU_ASSERT_TRUE(seen[id].dropped_ours);
		/* Created in registration order, destroyed in reverse; after lcore_stop. */
		CU_ASSERT_TRUE(seen[id].last_init_at < seen[id].small_init_at);
		CU_ASSERT_TRUE(seen[id].stop_at < seen[id].small_fini_at);
		CU_ASSERT_TRUE(seen[id].small_fini_at < seen[id].last_fini_at);
	}
	/* lib/net closed the connections left at the stop before the state went. */
	for (unsigned i = 0, closes = 0; i < t->n; i++) {
		unsigned id = t->lcores[i].lcore_id;

		if (seen[id].last_close_at == 0)
			continue;
		closes++;
		CU_ASSERT_TRUE(seen[id].close_saw_state);
		CU_ASSERT_TRUE(seen[id].last_close_at < seen[id].last_fini_at);
		CU_ASSERT_TRUE(seen[id].stop_at < seen[id].last_close_at);
		if (i == t->n - 1)
			CU_ASSERT_TRUE(closes > 0);
	}
	/* The run forgot its registrations. */
	CU_ASSERT_EQUAL(cr_lcore_local_register(8, NULL, NULL, NULL), 0);
}

static const struct ut_case cases[] = {
    {"one block per incarnation, fini after lib/net closed", test_lifetimes_across_resize},
};

static int
suite_init(void)
{
	ut_require_driver(); /* $CR_UT_DRIVER refused by this kernel: skip (exit 77) */
	return 0;
}

UT_MAIN("app_local", cases, suite_init, NULL)
