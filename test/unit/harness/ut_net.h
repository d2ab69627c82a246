/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * For the lib/net suites: the runtime of ut_runtime.h with an on_shutdown hook a test may
 * fill, a listen spec on loopback, a client connect to a struct cr_net_addr, and lib/net's
 * counters summed over the lcores.
 */
#ifndef UT_NET_H
#define UT_NET_H

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <sys/time.h>

#include "cr_net.h"
#include "ut_data.h"
#include "ut_runtime.h"
#include "ut_socket.h"

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
 * Start the runtime with the hooks above, run @p start(@p arg) on the main lcore, and run
 * until someone calls cr_reactor_stop() (or the watchdog forces a stop after @p ms, which
 * fails the test).
 */
static inline void
ut_net_run(cr_msg_fn start, void *arg, unsigned ms)
{
	(void)ut_rt_run(&ut_hooks, start, arg, ms);
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

#endif /* UT_NET_H */
