/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Lent receive buffers (net_buf.c) on the real runtime, once per io driver: a buffer held
 * across callbacks keeps its bytes while later receives go on (spares take its place), a
 * buffer outlives the connection that received it (close, destroy) and goes back at its
 * last unref, a connection at its cap stops reading alone and reads again when one is
 * released, and 1,000 holders at their caps (then a greedy one using the last spares)
 * cannot pause a connection that holds nothing. The runtime has one lcore, so the counts
 * of its pool are exact.
 */
#include <stddef.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ut_net.h"

#define HOLD_TOTAL (128u * 1024) /* streamed to a connection that holds every buffer */
#define HOLD_MAX 512		 /* its cap: more than its deliveries can be */
#define NHOLDERS 1000		 /* holders at a cap of one buffer */
#define HOLDER_BYTES 16384u	 /* each of them sends this much */
#define CAPPED_MAX 4
#define CAPPED_FIRST (CAPPED_MAX * 4096u) /* enough to reach its cap */
#define CAPPED_BYTES (CAPPED_FIRST + 65536u) /* the rest, sent once it is at its cap */
#define GREEDY_MAX 64
#define GREEDY_BYTES (GREEDY_MAX * 4096u)
#define INNOCENT_BYTES (1u << 20)

struct held {
	struct cr_buf *b;
	uint64_t off; /* where its bytes are in the stream */
};

/* One scenario; everything but the client's flags lives on the main lcore. */
static struct {
	struct cr_listener *l;
	struct cr_net_addr addr;
	pthread_t client;
	bool client_started;
	void *(*client_fn)(void *);
	struct ut_every every;
	bool (*step)(void);
	struct cr_conn_opts copts;
	_Atomic bool client_done;
	_Atomic int phase; /* the server's, for the client */
	int closes, close_err;
	bool client_ok;
	/* the holding connection */
	struct cr_conn *conn;
	struct held h[HOLD_MAX];
	unsigned nh;
	uint64_t rx;
	unsigned bad, same_twice, held_at_close, held_after_close;
	int hold_outside_errno;
	bool destroy_in_data;
	bool destroy_then_hold; /* cr_conn_destroy() first, then cr_conn_hold() */
	unsigned tied_to_dead; /* buffers held after the destroy still tied to its slot */
} S;

static uint8_t stream[INNOCENT_BYTES];

static void
s_reset(void)
{
	memset(&S, 0, sizeof(S));
	S.close_err = 1;
	ut_fill(stream, 0, sizeof(stream));
}

static uint64_t
main_stat(size_t off)
{
	struct cr_net_stats st;

	CU_ASSERT_EQUAL(cr_net_stats(cr_lcore_id(), &st), 0);
	return *(uint64_t *)((char *)&st + off);
}

#define MAIN_STAT(field) main_stat(offsetof(struct cr_net_stats, field))

static bool
s_tick(void *arg)
{
	(void)arg;
	if (!S.step())
		return false;
	cr_reactor_stop();
	return true;
}

static void
s_start(void *arg)
{
	struct cr_tcp_listen_opts o = ut_listen_opts(false);
	const struct cr_conn_ops *ops = arg;

	o.conn = S.copts;
	CU_ASSERT_EQUAL_FATAL(cr_tcp_listen(&o, ops, NULL, &S.l), 0);
	cr_listener_addr(S.l, &S.addr);
	CU_ASSERT_EQUAL(pthread_create(&S.client, NULL, S.client_fn, NULL), 0);
	S.client_started = true;
	ut_every(&S.every, 2, s_tick, NULL);
}

static void
s_run(const struct cr_conn_ops *ops, void *(*client)(void *), bool (*step)(void),
      unsigned ms)
{
	S.client_fn = client;
	S.step = step;
	ut_net_run(s_start, (void *)ops, ms);
	if (S.client_started)
		pthread_join(S.client, NULL);
}

static void
on_close(struct cr_conn *c, int err)
{
	/* Ended: the buffers are the app's alone, counted against no connection. */
	CU_ASSERT_EQUAL(cr_conn_held_bufs(c), 0);
	if (c == S.conn)
		S.conn = NULL;
	S.close_err = err;
	S.closes++;
}

/* Every held buffer still has its bytes of the stream. */
static unsigned
held_bad(void)
{
	unsigned i, bad = 0;

	for (i = 0; i < S.nh; i++)
		if (ut_check(S.h[i].b->data, S.h[i].off, S.h[i].b->len) != S.h[i].b->len)
			bad++;
	return bad;
}

static void
unref_all(void)
{
	unsigned i;

	for (i = 0; i < S.nh; i++)
		cr_buf_unref(S.h[i].b);
	S.nh = 0;
}

/* ---- hold across callbacks, release after the end ---- */

static void
hold_open(struct cr_conn *c)
{
	struct cr_buf *b;

	S.conn = c;
	errno = 0;
	b = cr_conn_hold(c); /* not inside on_data */
	CU_ASSERT_PTR_NULL(b);
	S.hold_outside_errno = errno;
}

static void
hold_data(struct cr_conn *c, const void *d, size_t n)
{
	struct cr_buf *b, *again;

	if (S.destroy_then_hold) {
		cr_conn_destroy(c);
		S.conn = NULL;
	}
	b = cr_conn_hold(c);
	if (S.destroy_then_hold && b != NULL && b->conn != NULL)
		S.tied_to_dead++;

	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	CU_ASSERT_PTR_EQUAL(b->data, d);
	CU_ASSERT_EQUAL(b->len, n);
	/* Twice in one on_data: the same buffer, one more reference. */
	again = cr_conn_hold(c);
	S.same_twice += again == b;
	cr_buf_unref(again);
	CU_ASSERT_FATAL(S.nh < HOLD_MAX);
	S.h[S.nh].b = b;
	S.h[S.nh].off = S.rx;
	S.nh++;
	S.rx += n;
	if (S.destroy_in_data && !S.destroy_then_hold) {
		cr_conn_destroy(c);
		S.conn = NULL;
	}
}

static void
hold_eof(struct cr_conn *c)
{
	/* Everything arrived while every earlier buffer stayed held: none was reused. */
	S.bad = held_bad();
	S.held_at_close = cr_conn_held_bufs(c);
	cr_conn_close(c);
}

static void *
client_stream(void *arg)
{
	int fd = ut_connect(&S.addr, 0);

	(void)arg;
	if (fd >= 0) {
		S.client_ok = ut_write_all(fd, stream, HOLD_TOTAL);
		shutdown(fd, SHUT_WR);
		S.client_ok = S.client_ok && ut_wait_eof(fd) == 0;
		close(fd);
	}
	atomic_store(&S.client_done, true);
	return NULL;
}

/* Once it closed: the buffers still hold their bytes; then every one goes back. */
static bool
release_after_close(void)
{
	if (!atomic_load(&S.client_done) || S.closes != 1)
		return false;
	S.held_after_close = (unsigned)MAIN_STAT(bufs_held);
	S.bad += held_bad();
	unref_all();
	return true;
}

static void
test_hold_across_callbacks_release_after_close(void)
{
	static const struct cr_conn_ops ops = {hold_open, hold_data, hold_eof, NULL, on_close};
	unsigned n;

	s_reset();
	S.copts.max_held_bufs = HOLD_MAX;
	s_run(&ops, client_stream, release_after_close, 20000);
	n = S.nh;
	CU_ASSERT_TRUE(S.client_ok);
	CU_ASSERT_EQUAL(S.hold_outside_errno, EINVAL);
	CU_ASSERT_EQUAL(S.rx, HOLD_TOTAL);
	CU_ASSERT_EQUAL(S.bad, 0);
	CU_ASSERT_EQUAL(S.close_err, 0);
	CU_ASSERT(S.held_at_close > 1); /* more than one buffer's worth was held at once */
	CU_ASSERT_EQUAL(S.held_after_close, S.held_at_close);
	CU_ASSERT_EQUAL(n, 0);
	CU_ASSERT_EQUAL(UT_STAT(bufs_held), 0);
}

/* ---- destroy inside on_data with the buffer held ---- */

static bool
release_after_destroy(void)
{
	if (S.nh == 0 || S.conn != NULL || UT_STAT(conns) != 0)
		return false;
	/* The slot is free, the buffer is the app's alone. */
	S.held_after_close = (unsigned)MAIN_STAT(bufs_held);
	S.bad += held_bad();
	unref_all();
	return true;
}

static void *
client_ping(void *arg)
{
	int fd = ut_connect(&S.addr, 0);

	(void)arg;
	if (fd >= 0) {
		S.client_ok = ut_write_all(fd, stream, 1000);
		S.client_ok = S.client_ok && ut_wait_eof(fd) != -2;
		close(fd);
	}
	atomic_store(&S.client_done, true);
	return NULL;
}

static void
test_destroy_in_on_data_with_held(void)
{
	static const struct cr_conn_ops ops = {hold_open, hold_data, NULL, NULL, on_close};

	s_reset();
	S.destroy_in_data = true;
	s_run(&ops, client_ping, release_after_destroy, 10000);
	CU_ASSERT_EQUAL(S.closes, 0); /* destroyed: no on_close */
	CU_ASSERT_EQUAL(S.held_after_close, 1);
	CU_ASSERT_EQUAL(S.same_twice, 1);
	CU_ASSERT_EQUAL(S.bad, 0);
	CU_ASSERT_EQUAL(UT_STAT(bufs_held), 0);
}

/* A hold after cr_conn_destroy() in the same on_data: the buffer is the app's, detached (it
 * was tied to the dead slot, whose reuse then saw a held list and a count not its own). */
static void
test_hold_after_destroy_in_on_data(void)
{
	static const struct cr_conn_ops ops = {hold_open, hold_data, NULL, NULL, on_close};

	s_reset();
	S.destroy_then_hold = true;
	s_run(&ops, client_ping, release_after_destroy, 10000);
	CU_ASSERT_EQUAL(S.closes, 0);
	CU_ASSERT_EQUAL(S.nh, 0); /* unref_all() released it */
	CU_ASSERT_EQUAL(S.tied_to_dead, 0);
	CU_ASSERT_EQUAL(S.held_after_close, 1);
	CU_ASSERT_EQUAL(S.bad, 0);
	CU_ASSERT_EQUAL(UT_STAT(bufs_held), 0);
}

/* ---- held while the lcore stops: the bytes stay, the unref is safe afterwards ---- */

static bool
stop_while_held(void)
{
	/* Hold it and stop: the shutdown ends the connection with the buffer still held. */
	return S.nh == 1;
}

/*
 * Pages of the stopped lcore's receive buffers (ids [0, CR_IO_BUFS + CR_IO_BUF_SPARES) from
 * the held one's address down) still mapped: mincore() fails ENOMEM on an unmapped page.
 */
static unsigned
pool_pages_mapped(const struct cr_buf *b)
{
	long page = sysconf(_SC_PAGESIZE);
	uintptr_t base = (uintptr_t)b->data - (uintptr_t)b->id * CR_IO_BUF_SIZE;
	uintptr_t end = base + (uintptr_t)(CR_IO_BUFS + CR_IO_BUF_SPARES) * CR_IO_BUF_SIZE;
	unsigned char vec;
	unsigned n = 0;

	for (uintptr_t a = base & ~(uintptr_t)(page - 1); a < end; a += (uintptr_t)page)
		n += mincore((void *)a, (size_t)page, &vec) == 0;
	return n;
}

/* After the runtime stopped, from this (main) thread: the bytes are still there, and the
 * references still count; a new runtime on the same lcore starts clean. Only the held
 * buffer's pages are kept of its lcore's pool (A1: the whole pool was, 8 MiB for 4 KiB). */
static void
test_held_past_lcore_stop(void)
{
	static const struct cr_conn_ops ops = {hold_open, hold_data, NULL, NULL, on_close};
	struct cr_buf *b;

	s_reset();
	s_run(&ops, client_ping, stop_while_held, 10000);
	CU_ASSERT_EQUAL_FATAL(S.nh, 1);
	b = S.h[0].b;
	CU_ASSERT_EQUAL(S.closes, 1); /* ended by the shutdown, the buffer still held */
	CU_ASSERT_EQUAL(held_bad(), 0); /* a use after free before: the memory was unmapped */
	/* The buffer's own pages (two at most: it need not start on a page), nothing else. */
	CU_ASSERT(pool_pages_mapped(b) <=
		  (CR_IO_BUF_SIZE + sysconf(_SC_PAGESIZE) - 1) / sysconf(_SC_PAGESIZE) + 1);
	cr_buf_ref(b);
	cr_buf_unref(b);
	CU_ASSERT_EQUAL(held_bad(), 0);
	cr_buf_unref(b); /* the last: the handle is dead now, its memory the process's */
	S.nh = 0;
	/* The next incarnation: holding and releasing as usual, nothing left of the old. */
	s_reset();
	S.copts.max_held_bufs = HOLD_MAX;
	s_run(&ops, client_stream, release_after_close, 20000);
	CU_ASSERT_TRUE(S.client_ok);
	CU_ASSERT_EQUAL(S.rx, HOLD_TOTAL);
	CU_ASSERT_EQUAL(S.bad, 0);
	CU_ASSERT_EQUAL(S.close_err, 0);
	CU_ASSERT_EQUAL(UT_STAT(bufs_held), 0);
}

/* ---- caps and the pool: holders, a capped one, a greedy one, an innocent one ---- */

enum { K_HOLDER, K_CAPPED, K_GREEDY, K_INNOCENT, K_KINDS };

/* One listener per kind, each with its cap. */
static const uint32_t kind_cap[K_KINDS] = {1, CAPPED_MAX, GREEDY_MAX, 0};
static const int kinds[K_KINDS] = {K_HOLDER, K_CAPPED, K_GREEDY, K_INNOCENT};

struct pconn {
	int kind;
	uint64_t rx;
	unsigned nh;
	struct cr_buf *h[GREEDY_MAX];
	struct cr_conn *c;
};

static struct {
	struct cr_listener *l[K_KINDS];
	struct cr_net_addr addr[K_KINDS];
	struct pconn *pc; /* by slot */
	uint64_t holder_rx, capped_rx_paused;
	unsigned holders_held, capped_held, greedy_held;
	uint64_t hold_nobufs_before;
	_Atomic bool innocent_ok;
} P;

static void
p_open(struct cr_conn *c)
{
	struct pconn *p = &P.pc[cr_conn_index(c)];

	memset(p, 0, sizeof(*p));
	p->c = c;
	p->kind = *(const int *)cr_conn_arg(c);
}

static void
p_data(struct cr_conn *c, const void *d, size_t n)
{
	struct pconn *p = &P.pc[cr_conn_index(c)];
	struct cr_buf *b;

	p->rx += n;
	if (p->kind == K_INNOCENT) {
		CU_ASSERT_EQUAL(cr_conn_send(c, d, n), 0);
		return;
	}
	if (p->kind == K_HOLDER)
		P.holder_rx += n;
	/* Hold what it may; at its cap, or with the spares used up, it copies (drops). */
	b = cr_conn_hold(c);
	if (b == NULL) {
		CU_ASSERT_EQUAL(errno, ENOBUFS);
		return;
	}
	CU_ASSERT_FATAL(p->nh < GREEDY_MAX);
	if (p->kind == K_HOLDER && p->nh == 0)
		P.holders_held++;
	p->h[p->nh++] = b;
}

static void
p_close(struct cr_conn *c, int err)
{
	(void)err;
	P.pc[cr_conn_index(c)].c = NULL;
}

static const struct cr_conn_ops p_ops = {p_open, p_data, NULL, NULL, p_close};

static void
p_release(int kind)
{
	unsigned i, j;

	for (i = 0; i < cr_net_conn_slots(); i++) {
		struct pconn *p = &P.pc[i];

		if (p->c == NULL || p->kind != kind)
			continue;
		if (p->kind == K_HOLDER && p->nh != 0)
			P.holders_held--;
		for (j = 0; j < p->nh; j++)
			cr_buf_unref(p->h[j]);
		p->nh = 0;
	}
}

static struct pconn *
p_find(int kind)
{
	unsigned i;

	for (i = 0; i < cr_net_conn_slots(); i++)
		if (P.pc[i].c != NULL && P.pc[i].kind == kind)
			return &P.pc[i];
	return NULL;
}

/* A new connection to @p kind's listener that sends @p n bytes. */
static int
p_connect(int kind, uint32_t n)
{
	static uint8_t buf[GREEDY_BYTES];
	int fd;

	if (n > sizeof(buf))
		return -1;
	fd = ut_connect(&P.addr[kind], 0);
	if (fd < 0)
		return -1;
	memset(buf, 0x5a, n);
	if (!ut_write_all(fd, buf, n)) {
		close(fd);
		return -1;
	}
	return fd;
}

static bool
p_wait_phase(int phase)
{
	uint64_t until = ut_ms() + 20000;

	while (atomic_load(&S.phase) < phase && ut_ms() < until)
		ut_sleep_ms(2);
	return atomic_load(&S.phase) >= phase;
}

static bool
innocent_echo(void)
{
	static uint8_t back[INNOCENT_BYTES];
	int fd = ut_connect(&P.addr[K_INNOCENT], 0);
	bool ok;

	if (fd < 0)
		return false;
	ok = ut_write_all(fd, stream, INNOCENT_BYTES) &&
	     ut_read_n(fd, back, INNOCENT_BYTES) == INNOCENT_BYTES &&
	     memcmp(back, stream, INNOCENT_BYTES) == 0;
	close(fd);
	return ok;
}

static void *
client_pool(void *arg)
{
	static int fds[NHOLDERS];
	int capped, greedy = -1, i, n = 0;

	(void)arg;
	for (i = 0; i < NHOLDERS; i++) {
		fds[i] = p_connect(K_HOLDER, HOLDER_BYTES);
		n += fds[i] >= 0;
	}
	capped = p_connect(K_CAPPED, CAPPED_FIRST);
	S.client_ok = n == NHOLDERS && capped >= 0;
	/* 1: the holders and the capped one at their caps: the greedy one takes the rest. */
	if (S.client_ok && p_wait_phase(1)) {
		greedy = p_connect(K_GREEDY, GREEDY_BYTES);
		/* The capped one stopped reading: this waits in its socket. */
		S.client_ok = ut_write_all(capped, stream, CAPPED_BYTES - CAPPED_FIRST);
	}
	S.client_ok = S.client_ok && greedy >= 0;
	/* 2: the spares are used up; one that holds nothing is served all the same. */
	if (S.client_ok && p_wait_phase(2))
		atomic_store(&P.innocent_ok, innocent_echo());
	atomic_store(&S.client_done, true);
	p_wait_phase(4);
	for (i = 0; i < NHOLDERS; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (capped >= 0)
		close(capped);
	if (greedy >= 0)
		close(greedy);
	return NULL;
}

static bool
pool_step(void)
{
	struct pconn *capped = p_find(K_CAPPED), *greedy = p_find(K_GREEDY);

	switch (atomic_load(&S.phase)) {
	case 0:
		if (P.holders_held != NHOLDERS || capped == NULL || capped->nh != CAPPED_MAX)
			return false;
		P.capped_held = cr_conn_held_bufs(capped->c);
		P.hold_nobufs_before = MAIN_STAT(hold_nobufs);
		atomic_store(&S.phase, 1);
		return false;
	case 1:
		if (greedy == NULL || greedy->rx != GREEDY_BYTES)
			return false;
		P.greedy_held = greedy->nh;
		atomic_store(&S.phase, 2);
		return false;
	case 2:
		if (!atomic_load(&S.client_done))
			return false;
		/* The capped one stayed paused while the innocent one was served. */
		P.capped_rx_paused = capped != NULL ? capped->rx : 0;
		p_release(K_GREEDY);
		atomic_store(&S.phase, 3);
		return false;
	case 3:
		/* Released, each reads again up to its cap: release until all of it came. */
		p_release(K_CAPPED);
		p_release(K_HOLDER);
		if (P.holder_rx != (uint64_t)NHOLDERS * HOLDER_BYTES || capped == NULL ||
		    capped->rx != CAPPED_BYTES)
			return false;
		atomic_store(&S.phase, 4);
		return false;
	default:
		p_release(K_CAPPED);
		p_release(K_HOLDER);
		return MAIN_STAT(bufs_held) == 0;
	}
}

static void
pool_start(void *arg)
{
	int k;

	(void)arg;
	for (k = 0; k < K_KINDS; k++) {
		struct cr_tcp_listen_opts o = ut_listen_opts(false);

		o.conn.max_held_bufs = kind_cap[k];
		o.conn.keep_reading = k == K_INNOCENT; /* it echoes all before reading back */
		CU_ASSERT_EQUAL_FATAL(cr_tcp_listen(&o, &p_ops, (void *)&kinds[k], &P.l[k]), 0);
		cr_listener_addr(P.l[k], &P.addr[k]);
	}
	CU_ASSERT_EQUAL(pthread_create(&S.client, NULL, client_pool, NULL), 0);
	S.client_started = true;
	ut_every(&S.every, 2, s_tick, NULL);
}

static void
test_caps_and_pool(void)
{
	struct cr_net_config nc;
	unsigned expect_greedy;

	if (CR_IO_BUF_SPARES < NHOLDERS + CAPPED_MAX + 1) {
		fprintf(stderr, "io_buf_spares %u: too few for this test\n", CR_IO_BUF_SPARES);
		return;
	}
	s_reset();
	memset(&P, 0, sizeof(P));
	cr_net_config_defaults(&nc);
	P.pc = calloc(nc.max_conns, sizeof(*P.pc));
	CU_ASSERT_PTR_NOT_NULL_FATAL(P.pc);
	S.step = pool_step;
	ut_net_run(pool_start, NULL, 60000);
	if (S.client_started)
		pthread_join(S.client, NULL);
	free(P.pc);
	expect_greedy = CR_IO_BUF_SPARES - NHOLDERS - CAPPED_MAX;
	if (expect_greedy > GREEDY_MAX)
		expect_greedy = GREEDY_MAX;
	CU_ASSERT_TRUE(S.client_ok);
	CU_ASSERT_TRUE(atomic_load(&P.innocent_ok));
	CU_ASSERT_EQUAL(P.capped_held, CAPPED_MAX);
	CU_ASSERT_EQUAL(P.capped_rx_paused, CAPPED_FIRST);
	CU_ASSERT_EQUAL(P.greedy_held, expect_greedy);
	CU_ASSERT_EQUAL(P.holder_rx, (uint64_t)NHOLDERS * HOLDER_BYTES);
	CU_ASSERT_EQUAL(UT_STAT(bufs_held), 0);
}

static const struct ut_case cases[] = {
	UT_CASE(test_hold_across_callbacks_release_after_close),
	UT_CASE(test_destroy_in_on_data_with_held),
	UT_CASE(test_hold_after_destroy_in_on_data),
	UT_CASE(test_caps_and_pool),
	UT_CASE(test_held_past_lcore_stop),
};

/* The runtime of ut_rt_setup() on its first lcore alone. */
static int
one_lcore_setup(void)
{
	char err[256];

	if (ut_rt_setup() != 0)
		return 1;
	snprintf(ut_cfg.corelist, sizeof(ut_cfg.corelist), "%u", ut_table.lcores[0].lcore_id);
	if (cr_eal_lcore_table(&ut_cfg, &ut_table, err, sizeof(err)) != 0) {
		fprintf(stderr, "lcore table: %s\n", err);
		return 1;
	}
	return 0;
}

UT_MAIN("net_buf", cases, one_lcore_setup, NULL)
