/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Per-lcore state (net_lcore.c): sizing, counters, the calls refused off an lcore, and
 * what an lcore does with its connections when it stops — a graceful drain, or an end
 * with -ESHUTDOWN once the shutdown is forced.
 */
#include <linux/sockios.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <unistd.h>

#include "net_internal.h"
#include "ut_net.h"

static void
test_configure(void)
{
	struct cr_net_config c, def;

	cr_net_config_defaults(&def);
	CU_ASSERT_EQUAL(def.max_conns, 4096);
	CU_ASSERT_EQUAL(def.chunks, 1024);
	CU_ASSERT_EQUAL(def.chunk_size, 16384);
	c = def;
	c.max_conns = 0;
	CU_ASSERT_EQUAL(cr_net_configure(&c), -EINVAL);
	c = def;
	c.chunks = (1u << 24) + 1;
	CU_ASSERT_EQUAL(cr_net_configure(&c), -EINVAL);
	c = def;
	c.chunk_size = 255;
	CU_ASSERT_EQUAL(cr_net_configure(&c), -EINVAL);
	c.chunk_size = (1u << 20) + 1;
	CU_ASSERT_EQUAL(cr_net_configure(&c), -EINVAL);
	CU_ASSERT_EQUAL(cr_net_configure(NULL), -EINVAL);
	CU_ASSERT_EQUAL(cr_net_configure(&def), 0);
}

static struct cr_net_stats seen[CR_MAX_LCORES];
static int busy_rc;

static void
snapshot(void *arg)
{
	struct cr_net_config c;
	unsigned i;

	(void)arg;
	for (i = 0; i < ut_table.n; i++)
		cr_net_stats(ut_table.lcores[i].lcore_id, &seen[i]);
	cr_net_config_defaults(&c);
	busy_rc = cr_net_configure(&c);
	cr_reactor_stop();
}

static void
test_sizes_and_stats(void)
{
	struct cr_net_config c, def;
	struct cr_net_stats st;
	unsigned i;

	cr_net_config_defaults(&def);
	c = def;
	c.max_conns = 16;
	c.chunks = 32;
	c.chunk_size = 1024;
	CU_ASSERT_EQUAL_FATAL(cr_net_configure(&c), 0);
	ut_net_run(snapshot, NULL, 10000);
	for (i = 0; i < ut_table.n; i++) {
		CU_ASSERT_EQUAL(seen[i].chunks_free, 32);
		CU_ASSERT_EQUAL(seen[i].conns, 0);
	}
	CU_ASSERT_EQUAL(busy_rc, -EBUSY);
	CU_ASSERT_EQUAL(cr_net_configure(&def), 0);
	CU_ASSERT_EQUAL(cr_net_stats(CR_MAX_LCORES, &st), -EINVAL);
	CU_ASSERT_EQUAL(cr_net_stats(0, NULL), -EINVAL);
}

/* Pages of the chunk memory of the calling lcore that are resident, of @p *total. */
static size_t
chunk_pages_resident(size_t *total)
{
	struct net_lcore *nl = &cr__net_lcores[cr_lcore_id()];
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t start = (uintptr_t)nl->chunk_mem & ~(uintptr_t)(page - 1);
	size_t len = (uintptr_t)nl->chunk_mem + nl->chunk_stride * nl->chunks - start;
	size_t n = (len + page - 1) / page, i, in = 0;
	static unsigned char vec[(64u << 20) / 4096 + 16];

	*total = n;
	/* The first page holds the allocation's header, resident from the start. */
	if (n > sizeof(vec) || mincore((void *)start, len, vec) != 0)
		return (size_t)-1;
	for (i = 0; i < n; i++)
		in += vec[i] & 1;
	return in;
}

static size_t lazy_before, lazy_after, lazy_total;
static int lazy_send_rc;

static void
lazy_check(void *arg)
{
	static char data[3 * 16384];
	struct cr_net_stats st;

	(void)arg;
	lazy_before = chunk_pages_resident(&lazy_total);
	/* Taking chunks touches only their pages: queue 3 on a connection that never sends
	 * (connecting to a port nobody listens on keeps them queued until its end). */
	cr_net_stats(cr_lcore_id(), &st);
	lazy_send_rc = st.chunks_free == 4000 ? 0 : -1;
	{
		struct cr_tcp_listen_opts o = ut_listen_opts(false);
		static const struct cr_conn_ops ops;
		struct cr_conn *c = cr_tcp_connect(&o.addr, 0, NULL, &ops, NULL);

		if (c == NULL || cr_conn_send(c, data, sizeof(data)) != 0)
			lazy_send_rc = -1;
		lazy_after = chunk_pages_resident(&lazy_total);
		cr_net_stats(cr_lcore_id(), &st);
		if (st.chunks_free != 4000 - 3)
			lazy_send_rc = -2;
		cr_conn_destroy(c);
	}
	cr_reactor_stop();
}

/* A pool sized for the worst case costs memory only as it is used: at start no chunk page
 * is resident, and taking 3 chunks makes about 3 resident. */
static void
test_chunks_carved_on_use(void)
{
	struct cr_net_config c, def;

	cr_net_config_defaults(&def);
	c = def;
	c.chunks = 4000;
	c.chunk_size = 16384;
	CU_ASSERT_EQUAL_FATAL(cr_net_configure(&c), 0);
	ut_net_run(lazy_check, NULL, 10000);
	CU_ASSERT_NOT_EQUAL(lazy_before, (size_t)-1);
	CU_ASSERT_TRUE(lazy_total > 4000 * 4);
	CU_ASSERT_TRUE(lazy_before <= 2);
	CU_ASSERT_TRUE(lazy_after >= 3 && lazy_after <= 2 + 3 * 5);
	CU_ASSERT_EQUAL(lazy_send_rc, 0);
	CU_ASSERT_EQUAL(cr_net_configure(&def), 0);
}

static size_t pre_resident, pre_total;

static void
prefault_check(void *arg)
{
	(void)arg;
	pre_resident = chunk_pages_resident(&pre_total);
	cr_reactor_stop();
}

/* With prefault every chunk page is resident from the lcore's start, before any send. */
static void
test_chunks_prefaulted(void)
{
	struct cr_net_config c, def;

	cr_net_config_defaults(&def);
	CU_ASSERT_FALSE(def.prefault);
	c = def;
	c.chunks = 4000;
	c.chunk_size = 16384;
	c.prefault = true;
	CU_ASSERT_EQUAL_FATAL(cr_net_configure(&c), 0);
	ut_net_run(prefault_check, NULL, 10000);
	CU_ASSERT_NOT_EQUAL(pre_resident, (size_t)-1);
	CU_ASSERT_TRUE(pre_total > 4000 * 4);
	CU_ASSERT_EQUAL(pre_resident, pre_total);
	CU_ASSERT_EQUAL(cr_net_configure(&def), 0);
}

/*
 * Regression: freeing an lcore's memory left its pool's counts as they were, so a
 * cr__net_chunk_get() after it carved a chunk out of the unmapped memory. Now a freed
 * lcore's pool is empty.
 */
static void
test_freed_pool_is_empty(void)
{
	unsigned i;

	ut_net_run(prefault_check, NULL, 10000);
	for (i = 0; i < ut_table.n; i++) {
		struct net_lcore *nl = &cr__net_lcores[ut_table.lcores[i].lcore_id];

		CU_ASSERT_PTR_NULL(nl->chunk_mem);
		CU_ASSERT_EQUAL(nl->chunks_free, 0);
		CU_ASSERT_PTR_NULL(cr__net_chunk_get(nl));
	}
}

static void
test_off_lcore(void)
{
	struct cr_tcp_listen_opts o = ut_listen_opts(false);
	static const struct cr_conn_ops ops;
	static const struct cr_udp_ops uops;
	struct cr_listener *l;

	CU_ASSERT_EQUAL(cr_tcp_listen(&o, &ops, NULL, &l), -EPERM);
	errno = 0;
	CU_ASSERT_PTR_NULL(cr_tcp_connect(&o.addr, 0, NULL, &ops, NULL));
	CU_ASSERT_EQUAL(errno, EPERM);
	errno = 0;
	CU_ASSERT_PTR_NULL(cr_udp_bind(&o.addr, NULL, &uops, NULL));
	CU_ASSERT_EQUAL(errno, EPERM);
}

/* ---- stopping with connections open ---- */

static struct {
	struct cr_listener *l;
	struct cr_net_addr addr;
	pthread_t client;
	_Atomic int opens, closes, close_err;
	_Atomic bool client_eof;
	bool force;
	bool client_closes;
} T;

static void
t_open(struct cr_conn *c)
{
	(void)c;
	atomic_fetch_add(&T.opens, 1);
}

static void
t_close(struct cr_conn *c, int err)
{
	(void)c;
	atomic_store(&T.close_err, err);
	atomic_fetch_add(&T.closes, 1);
}

static const struct cr_conn_ops t_ops = {.on_open = t_open, .on_close = t_close};

static void *
t_client(void *arg)
{
	int fd = ut_connect(&T.addr, 0);

	(void)arg;
	if (fd < 0)
		return NULL;
	while (atomic_load(&T.opens) == 0)
		ut_sleep_ms(1);
	if (T.force)
		cr_shutdown_force();
	else
		cr_reactor_stop();
	/* Graceful: the server shuts its side; we answer with ours, so it ends cleanly. */
	atomic_store(&T.client_eof, ut_wait_eof(fd) == 0);
	if (!T.client_closes)
		ut_sleep_ms(300);
	close(fd);
	return NULL;
}

static void
t_start(void *arg)
{
	struct cr_tcp_listen_opts o = ut_listen_opts(false);

	(void)arg;
	CU_ASSERT_EQUAL_FATAL(cr_tcp_listen(&o, &t_ops, NULL, &T.l), 0);
	cr_listener_addr(T.l, &T.addr);
	CU_ASSERT_EQUAL(pthread_create(&T.client, NULL, t_client, NULL), 0);
}

static void
test_stop_drains_gracefully(void)
{
	memset(&T, 0, sizeof(T));
	T.client_closes = true;
	ut_net_run(t_start, NULL, 10000);
	pthread_join(T.client, NULL);
	CU_ASSERT_EQUAL(atomic_load(&T.opens), 1);
	CU_ASSERT_EQUAL(atomic_load(&T.closes), 1);
	CU_ASSERT_EQUAL(atomic_load(&T.close_err), 0);
	CU_ASSERT_TRUE(atomic_load(&T.client_eof));
	CU_ASSERT_EQUAL(UT_STAT(conns), 0);
}

static void
test_forced_stop_ends_with_eshutdown(void)
{
	memset(&T, 0, sizeof(T));
	T.force = true;
	ut_net_run(t_start, NULL, 10000);
	pthread_join(T.client, NULL);
	CU_ASSERT_EQUAL(atomic_load(&T.opens), 1);
	CU_ASSERT_EQUAL(atomic_load(&T.closes), 1);
	CU_ASSERT_EQUAL(atomic_load(&T.close_err), -ESHUTDOWN);
	CU_ASSERT_EQUAL(UT_STAT(conns), 0);
}

/* ---- a stop serves every byte received before it (issue 12 item 4) ---- */

#define ECHO_MAX (8 * 1024 * 1024)

static struct {
	struct cr_listener *l;
	struct cr_net_addr addr;
	pthread_t client;
	size_t written, acked, got;
	bool same, eof;
	int last_errno;
} W;

static void
w_data(struct cr_conn *c, const void *d, size_t n)
{
	CU_ASSERT_EQUAL(cr_conn_send(c, d, n), 0);
}

static const struct cr_conn_ops w_ops = {.on_data = w_data};

static void *
w_client(void *arg)
{
	static uint8_t out[ECHO_MAX], in[ECHO_MAX];
	struct timeval tv = {10, 0};
	int fd = ut_connect(&W.addr, 4096), outq = 0, i, fl;
	ssize_t r = 0;

	(void)arg;
	if (fd < 0)
		return NULL;
	for (i = 0; i < ECHO_MAX; i++)
		out[i] = (uint8_t)(i * 7 + 3);
	/* Send until every buffer on the way is full, reading nothing back: the server's
	 * queue rises above its high watermark, it stops reading, and what it has not read
	 * waits in its kernel. */
	fl = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	for (i = 0; i < 2000 && W.written < ECHO_MAX; i++) {
		r = write(fd, out + W.written, ECHO_MAX - W.written);
		if (r > 0)
			W.written += (size_t)r;
		else
			ut_sleep_ms(1);
	}
	ut_sleep_ms(50);
	/* What the server's kernel has acknowledged: received before the stop. */
	CU_ASSERT_EQUAL(ioctl(fd, SIOCOUTQ, &outq), 0);
	W.acked = W.written - (size_t)outq;
	cr_reactor_stop();
	fcntl(fd, F_SETFL, fl);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	while (W.got < sizeof(in) && (r = read(fd, in + W.got, sizeof(in) - W.got)) > 0)
		W.got += (size_t)r;
	W.last_errno = r < 0 ? errno : 0;
	W.eof = r == 0;
	W.same = W.got >= W.acked && memcmp(in, out, W.got) == 0;
	close(fd);
	return NULL;
}

static void
w_start(void *arg)
{
	struct cr_tcp_listen_opts o = ut_listen_opts(false);

	(void)arg;
	CU_ASSERT_EQUAL_FATAL(cr_tcp_listen(&o, &w_ops, NULL, &W.l), 0);
	cr_listener_addr(W.l, &W.addr);
	CU_ASSERT_EQUAL(pthread_create(&W.client, NULL, w_client, NULL), 0);
}

/*
 * Regression: the stop closed every connection at once, and input the kernel held for
 * one was dropped with it (the client got part of its echo, then EOF or a reset). Now
 * what had arrived before the stop is delivered and answered first.
 */
static void
test_stop_echoes_what_was_received(void)
{
	memset(&W, 0, sizeof(W));
	ut_net_run(w_start, NULL, 30000);
	pthread_join(W.client, NULL);
	CU_ASSERT(W.acked > 256 * 1024); /* the scenario: much of it in the server's kernel */
	CU_ASSERT(W.got >= W.acked);
	CU_ASSERT_TRUE(W.same);
	CU_ASSERT_TRUE(W.eof); /* then an orderly EOF, no reset */
	CU_ASSERT_EQUAL(W.last_errno, 0);
	printf("(%zu written, %zu acked, %zu echoed) ", W.written, W.acked, W.got);
}

/* ---- a closing lcore stops its UDP sockets; their handles stay ---- */

static int drain_rc[4];
static struct cr_udp *drain_udp;
static struct cr_net_addr drain_to;

static void
drain_look(unsigned lcore)
{
	if (lcore != cr_lcore_main() || drain_udp == NULL)
		return;
	/* Stopped by the closing event, not freed: the handle still takes calls. */
	drain_rc[1] = cr_udp_send(drain_udp, "x", 1, &drain_to);
	drain_rc[2] = cr_udp_addr(drain_udp, &drain_to);
	cr_udp_close(drain_udp);
	drain_udp = NULL;
}

static void
drain_now(void *arg)
{
	static const struct cr_udp_ops uops;
	struct cr_net_addr a;

	(void)arg;
	CU_ASSERT_EQUAL(cr_net_addr_parse("127.0.0.1:0", &a), 0);
	drain_udp = cr_udp_bind(&a, NULL, &uops, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(drain_udp);
	CU_ASSERT_EQUAL(cr_udp_addr(drain_udp, &drain_to), 0);
	drain_rc[0] = cr_udp_send(drain_udp, "x", 1, &drain_to);
	cr_reactor_stop();
}

static void
test_closing_keeps_udp_handles(void)
{
	ut_shutdown_fn = drain_look;
	ut_net_run(drain_now, NULL, 10000);
	ut_shutdown_fn = NULL;
	CU_ASSERT_EQUAL(drain_rc[0], 0);
	CU_ASSERT_EQUAL(drain_rc[1], -EBADF);
	CU_ASSERT_EQUAL(drain_rc[2], 0);
}

static const struct ut_case cases[] = {
	UT_CASE(test_configure),
	UT_CASE(test_sizes_and_stats),
	UT_CASE(test_chunks_carved_on_use),
	UT_CASE(test_chunks_prefaulted),
	UT_CASE(test_freed_pool_is_empty),
	UT_CASE(test_off_lcore),
	UT_CASE(test_stop_drains_gracefully),
	UT_CASE(test_forced_stop_ends_with_eshutdown),
	UT_CASE(test_stop_echoes_what_was_received),
	UT_CASE(test_closing_keeps_udp_handles),
};

UT_MAIN("net_lcore", cases, ut_rt_setup, NULL)
