/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared by the lib/net suites: the runtime on real threads with the driver named by
 * $CR_UT_DRIVER (uring or epoll), a watchdog that forces a stop if a scenario hangs,
 * and small blocking-socket helpers for client threads. Everything is on loopback.
 */
#ifndef NET_UT_H
#define NET_UT_H

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cr_net.h"
#include "cr_reactor.h"
#include "ut_cunit.h"

static struct cr_eal_config ut_cfg;
static struct cr_lcore_table ut_table;

static inline int
ut_net_setup(void)
{
	const char *drv = getenv("CR_UT_DRIVER");
	char err[256];

	cr_eal_config_defaults(&ut_cfg);
	ut_cfg.io_driver =
		drv != NULL && strcmp(drv, "epoll") == 0 ? CR_IO_DRIVER_EPOLL : CR_IO_DRIVER_URING;
	ut_cfg.shutdown_timeout = 5;
	return cr_eal_lcore_table(&ut_cfg, &ut_table, err, sizeof(err)) == 0 ? 0 : 1;
}

static inline void
ut_sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

static inline uint64_t
ut_ms(void)
{
	return cr_clock_ns() / 1000000;
}

/* ---- running a scenario ---- */

struct ut_watchdog {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	bool fired;
	unsigned ms;
};

static inline void *
ut_watchdog_main(void *arg)
{
	struct ut_watchdog *w = arg;
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += w->ms / 1000;
	ts.tv_nsec += (long)(w->ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&w->lock);
	while (!w->done)
		if (pthread_cond_timedwait(&w->cond, &w->lock, &ts) == ETIMEDOUT)
			break;
	if (!w->done) {
		w->fired = true;
		cr_shutdown_force();
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* lib/net winds a closing lcore down by itself; a test may look once it has (this runs
 * in the on_shutdown hook, after lib/net's closing event). */
static void (*ut_shutdown_fn)(unsigned lcore);

static inline void
ut_shutdown_hook(unsigned lcore, void *arg)
{
	(void)arg;
	if (ut_shutdown_fn != NULL)
		ut_shutdown_fn(lcore);
}

static const struct cr_reactor_hooks ut_hooks = {
	.on_shutdown = ut_shutdown_hook,
};

/*
 * Start the runtime, run @p start(@p arg) on the main lcore, and run until someone calls
 * cr_reactor_stop() (or the watchdog forces a stop after @p ms, which fails the test).
 */
static inline void
ut_net_run(cr_msg_fn start, void *arg, unsigned ms)
{
	struct ut_watchdog w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false,
				false, ms};
	pthread_t t;

	CU_ASSERT_EQUAL_FATAL(cr_reactor_init(&ut_cfg, &ut_table, &ut_hooks), 0);
	CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, ut_watchdog_main, &w), 0);
	CU_ASSERT_EQUAL(cr_send(cr_lcore_main(), start, arg), 0);
	CU_ASSERT_EQUAL(cr_reactor_run(), 0);
	pthread_mutex_lock(&w.lock);
	w.done = true;
	pthread_cond_signal(&w.cond);
	pthread_mutex_unlock(&w.lock);
	pthread_join(t, NULL);
	cr_reactor_fini();
	CU_ASSERT_FALSE(w.fired);
}

/* A check run every @p ms on the calling lcore until it returns true; then it stops. */
struct ut_every {
	bool (*fn)(void *arg);
	void *arg;
	struct cr_poller *p;
};

static inline int
ut_every_tick(void *arg)
{
	struct ut_every *e = arg;

	if (e->fn(e->arg))
		cr_poller_unregister(&e->p);
	return 0;
}

static inline void
ut_every(struct ut_every *e, unsigned ms, bool (*fn)(void *), void *arg)
{
	e->fn = fn;
	e->arg = arg;
	e->p = cr_poller_register(ut_every_tick, e, (uint64_t)ms * 1000000);
	CU_ASSERT_PTR_NOT_NULL(e->p);
}

/* A listen spec on 127.0.0.1 (or ::1), port 0. */
static inline struct cr_tcp_listen_opts
ut_listen_opts(bool v6)
{
	struct cr_tcp_listen_opts o;

	memset(&o, 0, sizeof(o));
	CU_ASSERT_EQUAL(cr_net_addr_parse(v6 ? "[::1]:0" : "127.0.0.1:0", &o.addr), 0);
	return o;
}

/* ---- client side: blocking sockets, for threads that are not lcores ---- */

/* Connect to @p a with 5 s send/receive timeouts; -1 on failure. */
static inline int
ut_connect(const struct cr_net_addr *a, int rcvbuf)
{
	struct timeval tv = {5, 0};
	int fd = socket(a->u.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (rcvbuf > 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (connect(fd, &a->u.sa, a->len) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Read exactly @p n bytes unless EOF / error / timeout comes first; returns bytes read. */
static inline size_t
ut_read_n(int fd, void *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = recv(fd, (char *)buf + got, n - got, 0);

		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return got;
}

static inline bool
ut_write_all(int fd, const void *buf, size_t n)
{
	size_t done = 0;

	while (done < n) {
		ssize_t r = send(fd, (const char *)buf + done, n - done, MSG_NOSIGNAL);

		if (r <= 0)
			return false;
		done += (size_t)r;
	}
	return true;
}

/* Wait for EOF (0) or a reset (-1); 1 if data came instead, -2 on timeout. */
static inline int
ut_wait_eof(int fd)
{
	char c;
	ssize_t r = recv(fd, &c, 1, 0);

	if (r == 0)
		return 0;
	if (r > 0)
		return 1;
	return errno == EAGAIN || errno == EWOULDBLOCK ? -2 : -1;
}

static inline void
ut_fill(uint8_t *buf, size_t n, uint32_t seed)
{
	size_t i;

	for (i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		buf[i] = (uint8_t)(seed >> 16);
	}
}

/* Sum of a counter over every lcore of the table. */
static inline uint64_t
ut_stat_sum(size_t offset)
{
	struct cr_net_stats s;
	uint64_t sum = 0;
	unsigned i;

	for (i = 0; i < ut_table.n; i++)
		if (cr_net_stats(ut_table.lcores[i].lcore_id, &s) == 0)
			sum += *(uint64_t *)((char *)&s + offset);
	return sum;
}

#define UT_STAT(field) ut_stat_sum(offsetof(struct cr_net_stats, field))

#endif /* NET_UT_H */
