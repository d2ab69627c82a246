/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared by the io suites: the real runtime on the driver named by $CR_UT_DRIVER (uring or
 * epoll), a scenario run on the main lcore under a watchdog, loopback sockets, a seeded
 * PRNG and a byte pattern. A scenario is a state machine stepped by a poller every turn;
 * it ends the run with ut_finish(). Every wait is bounded by the watchdog.
 */
#ifndef IO_UT_H
#define IO_UT_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cr_io.h"
#include "cr_reactor.h"
#include "ut_cunit.h"

#define UT_MS		(1000ull * 1000)
#define UT_WATCHDOG_NS	(30000 * UT_MS)

static struct cr_eal_config ut_cfg;
static struct cr_lcore_table ut_table;
static bool ut_timed_out;
static struct cr_timer ut_watchdog;
static struct cr_poller *ut_poller;

static inline bool
ut_uring(void)
{
	const char *d = getenv("CR_UT_DRIVER");

	return d == NULL || strcmp(d, "epoll") != 0;
}

static inline int
ut_setup(void)
{
	char err[256];

	/* A send to a closed peer must be -EPIPE, never a signal: a SIGPIPE kills the test. */
	signal(SIGPIPE, SIG_DFL);
	cr_eal_config_defaults(&ut_cfg);
	ut_cfg.io_driver = ut_uring() ? CR_IO_DRIVER_URING : CR_IO_DRIVER_EPOLL;
	return cr_eal_lcore_table(&ut_cfg, &ut_table, err, sizeof(err)) == 0 ? 0 : 1;
}

static inline void
ut_watchdog_fired(struct cr_timer *t, void *arg)
{
	(void)t;
	(void)arg;
	fprintf(stderr, "watchdog: scenario did not finish\n");
	ut_timed_out = true;
	cr_poller_unregister(&ut_poller);
	cr_reactor_stop();
}

struct ut_start {
	cr_poller_fn step;
	void *arg;
};

static inline void
ut_start_fn(void *arg)
{
	struct ut_start *s = arg;

	cr_timer_init(&ut_watchdog, ut_watchdog_fired, NULL);
	cr_timer_start(&ut_watchdog, UT_WATCHDOG_NS);
	/* Without I/O in the driver every op fails with ENOTSUP: say so once, plainly. */
	if (cr_io_buf_size() == 0)
		fprintf(stderr, "the %s driver has no I/O ops (cr_io_buf_size() == 0)\n",
			cr_reactor_driver());
	ut_poller = cr_poller_register(s->step, s->arg, 0);
	CU_ASSERT_PTR_NOT_NULL(ut_poller);
}

/* Run @p step(@p arg) every turn of the main lcore until it calls ut_finish(). */
static inline bool
ut_run(cr_poller_fn step, void *arg)
{
	struct ut_start s = {step, arg};

	ut_timed_out = false;
	if (cr_reactor_init(&ut_cfg, &ut_table, NULL) != 0) {
		CU_FAIL("cr_reactor_init");
		return false;
	}
	CU_ASSERT_EQUAL(cr_send(cr_lcore_main(), ut_start_fn, &s), 0);
	CU_ASSERT_EQUAL(cr_reactor_run(), 0);
	cr_reactor_fini();
	CU_ASSERT_FALSE(ut_timed_out);
	return !ut_timed_out;
}

/* End the scenario: from its step or a callback on the main lcore. */
static inline void
ut_finish(void)
{
	cr_timer_stop(&ut_watchdog);
	cr_poller_unregister(&ut_poller);
	cr_reactor_stop();
}

/* ---- sockets, all on loopback ---- */

static inline void
ut_nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* A TCP listener on 127.0.0.1, port chosen by the kernel and returned in @p port. */
static inline int
ut_listen(uint16_t *port, int backlog)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, backlog) != 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
		close(fd);
		return -1;
	}
	*port = ntohs(a.sin_port);
	return fd;
}

static inline struct sockaddr_in
ut_addr(uint16_t port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};

	return a;
}

/* A blocking connect to 127.0.0.1:@p port. */
static inline int
ut_connect(uint16_t port)
{
	struct sockaddr_in a = ut_addr(port);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* A connected TCP pair over loopback, both ends blocking. @return 0 or -1. */
static inline int
ut_tcp_pair(int fds[2])
{
	uint16_t port;
	int lfd = ut_listen(&port, 4);

	if (lfd < 0)
		return -1;
	fds[0] = ut_connect(port);
	fds[1] = fds[0] >= 0 ? accept4(lfd, NULL, NULL, SOCK_CLOEXEC) : -1;
	close(lfd);
	if (fds[1] < 0) {
		if (fds[0] >= 0)
			close(fds[0]);
		return -1;
	}
	return 0;
}

static inline int
ut_unix_pair(int fds[2])
{
	return socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds);
}

/* ---- data ---- */

static inline uint64_t
ut_rand(uint64_t *s)
{
	/* xorshift64*: cheap, seeded, the same sequence on every run */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dull;
}

/* Byte @p i of the test stream; position-dependent, so a loss or reordering shows. */
static inline uint8_t
ut_pat(uint64_t i)
{
	return (uint8_t)((i * 131u) ^ (i >> 8) ^ (i >> 16));
}

static inline void
ut_fill(uint8_t *p, uint64_t off, size_t len)
{
	for (size_t i = 0; i < len; i++)
		p[i] = ut_pat(off + i);
}

/* Index of the first byte of @p p that is not the pattern at @p off, or @p len. */
static inline size_t
ut_check(const uint8_t *p, uint64_t off, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != ut_pat(off + i))
			return i;
	return len;
}

static inline void
ut_sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

static inline uint64_t
ut_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif /* IO_UT_H */
