/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What only the epoll driver has: an fd joins the epoll set only when an op would block
 * and leaves it before its last completion runs; a recv without buffers leaves the data
 * in the socket and lets the lcore park; an fd cut off by the poll budget stays ready;
 * park keeps the events it woke for, and a spinning lcore looks for them too; the fd
 * table grows past its start size; file ops on a pipe and accept on a blocking listener
 * never block the lcore. The shared io suites cover the behaviour both drivers owe; this
 * one looks inside (epoll_internal.h) to prove the path.
 *
 * Each scenario runs on the main lcore, stepped by deferred tasks, timers and callbacks
 * (no poller, so the lcore can park), under a watchdog.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cr_io.h"
#include "cr_reactor.h"
#include "epoll_internal.h"
#include "ut_cunit.h"

#define MS (1000ull * 1000)

static struct cr_eal_config cfg;
static struct cr_lcore_table table;
static struct cr_timer watchdog;
static bool timed_out;

static int
setup(void)
{
	char err[256];

	signal(SIGPIPE, SIG_DFL); /* a send to a closed peer must never raise it */
	cr_eal_config_defaults(&cfg);
	cfg.io_driver = CR_IO_DRIVER_EPOLL;
	return cr_eal_lcore_table(&cfg, &table, err, sizeof(err)) == 0 ? 0 : 1;
}

static struct cr_backend *
be(void)
{
	return cr_reactor_backend();
}

static struct eio *
eio(void)
{
	return &be()->io;
}

static void
watchdog_fired(struct cr_timer *t, void *arg)
{
	(void)t;
	(void)arg;
	fprintf(stderr, "watchdog: scenario did not finish\n");
	timed_out = true;
	cr_reactor_stop();
}

struct start {
	cr_msg_fn fn;
	void *arg;
};

static void
start_fn(void *arg)
{
	struct start *s = arg;

	cr_timer_init(&watchdog, watchdog_fired, NULL);
	cr_timer_start(&watchdog, 30000 * MS);
	s->fn(s->arg);
}

static void
run(cr_msg_fn fn, void *arg)
{
	struct start s = {fn, arg};

	timed_out = false;
	CU_ASSERT_EQUAL_FATAL(cr_reactor_init(&cfg, &table, NULL), 0);
	CU_ASSERT_STRING_EQUAL(cr_reactor_driver(), "epoll");
	CU_ASSERT_EQUAL(cr_defer(start_fn, &s), 0);
	CU_ASSERT_EQUAL(cr_reactor_run(), 0);
	cr_reactor_fini();
	CU_ASSERT_FALSE(timed_out);
}

static void
finish(void)
{
	CU_ASSERT_EQUAL(cr_io_inflight(), 0);
	cr_timer_stop(&watchdog);
	cr_reactor_stop();
}

static uint8_t
pattern(uint64_t off)
{
	uint64_t x = (off + 1) * 0x9e3779b97f4a7c15ull;

	return (uint8_t)(x >> 56);
}

static void
pair(int sv[2])
{
	int rc = socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv);

	CU_ASSERT_EQUAL_FATAL(rc, 0);
}

/* Completions as one scenario sees them. */
struct rec {
	unsigned calls, mores, finals;
	int32_t last;
	uint64_t bytes;
	bool in_order;
	bool held;	    /* keep receive buffers instead of giving them back */
	uint32_t *held_ids; /* with held: room for every buffer */
	unsigned n_held;
	cr_msg_fn next; /* run (deferred) after the final completion */
	void *next_arg;
};

static void
rec_fn(void *ctx, const struct cr_io_cqe *cqe)
{
	struct rec *r = ctx;

	r->calls++;
	if (cqe->flags & CR_IO_F_BUFFER) {
		for (int32_t i = 0; i < cqe->res; i++)
			if (((uint8_t *)cqe->buf)[i] != pattern(r->bytes + (uint64_t)i))
				r->in_order = false;
		r->bytes += (uint64_t)cqe->res;
		if (r->held)
			r->held_ids[r->n_held++] = cqe->buf_id;
		else
			cr_io_buf_release(cqe->buf_id);
	}
	if (cqe->flags & CR_IO_F_MORE) {
		r->mores++;
		return;
	}
	r->finals++;
	r->last = cqe->res;
	if (r->next != NULL)
		CU_ASSERT_EQUAL(cr_defer(r->next, r->next_arg), 0);
}

static void
write_pattern(int fd, uint64_t off, size_t len)
{
	uint8_t buf[4096];

	while (len > 0) {
		size_t n = len < sizeof(buf) ? len : sizeof(buf);

		for (size_t i = 0; i < n; i++)
			buf[i] = pattern(off + i);
		CU_ASSERT_EQUAL_FATAL(write(fd, buf, n), (ssize_t)n);
		off += n;
		len -= n;
	}
}

/* ---- an fd joins the set only to wait, and leaves it at once ---- */

struct watch {
	int sv[2];
	cr_op_id id;
	struct rec send, recv;
	int step;
};

static void
watch_step(void *arg)
{
	struct watch *w = arg;
	uint64_t wakes = 0;

	switch (w->step++) {
	case 0:
		pair(w->sv);
		w->id = cr_io_send(w->sv[0], "x", 1, rec_fn, &w->send);
		CU_ASSERT_EQUAL(w->send.calls, 0); /* never from inside submit */
		w->send.next = watch_step;
		w->send.next_arg = w;
		return;
	case 1:
		/* A send that did not block never needed the epoll set. */
		CU_ASSERT_EQUAL(w->send.last, 1);
		CU_ASSERT_EQUAL(eio()->n_registered, 0);
		w->id = cr_io_recv(w->sv[0], rec_fn, &w->recv);
		/* Tried once, found nothing: now it waits in the set. */
		cr_reactor_backend_ops()->poll(be(), CR_BATCH, &wakes);
		CU_ASSERT_EQUAL(w->recv.calls, 0);
		CU_ASSERT_EQUAL(eio()->n_registered, 1);
		CU_ASSERT_FALSE(cr__epoll_io_pending(be()));
		/* Cancel takes it out before returning: its owner may close the fd next. */
		CU_ASSERT_EQUAL(cr_io_cancel(w->id), 0);
		CU_ASSERT_EQUAL(eio()->n_registered, 0);
		CU_ASSERT_EQUAL(w->recv.calls, 0);
		close(w->sv[0]);
		w->recv.next = watch_step;
		w->recv.next_arg = w;
		return;
	case 2:
		CU_ASSERT_EQUAL(w->recv.calls, 1);
		CU_ASSERT_EQUAL(w->recv.last, -ECANCELED);
		close(w->sv[1]);
		finish();
		return;
	}
}

static void
test_registered_only_while_waiting(void)
{
	struct watch w = {0};

	run(watch_step, &w);
	CU_ASSERT_EQUAL(w.step, 3);
}

/* ---- the last completion may close the fd and reuse its number ---- */

struct reuse {
	int sv[2], old_fd;
	struct rec a, b;
	int step;
};

static void reuse_step(void *arg);

static void
reuse_last(void *ctx, const struct cr_io_cqe *cqe)
{
	struct reuse *u = ctx;

	rec_fn(&u->a, cqe);
	if (cqe->flags & CR_IO_F_MORE)
		return;
	/* Out of the set and off every queue before this callback ran. */
	CU_ASSERT_EQUAL(cqe->res, 0);
	CU_ASSERT_EQUAL(eio()->n_registered, 0);
	CU_ASSERT_EQUAL(eio()->fds[u->sv[0]].flags, 0);
	u->old_fd = u->sv[0];
	close(u->sv[0]);
	close(u->sv[1]);
	pair(u->sv);
	CU_ASSERT_NOT_EQUAL(cr_io_recv(u->sv[0], rec_fn, &u->b), 0);
	write_pattern(u->sv[1], 0, 3000);
	shutdown(u->sv[1], SHUT_WR);
}

static void
reuse_step(void *arg)
{
	struct reuse *u = arg;
	uint64_t wakes = 0;

	switch (u->step++) {
	case 0:
		pair(u->sv);
		u->a.in_order = u->b.in_order = true;
		u->b.next = reuse_step;
		u->b.next_arg = u;
		CU_ASSERT_NOT_EQUAL(cr_io_recv(u->sv[0], reuse_last, u), 0);
		/* Let it wait in the set first, then data and EOF. */
		cr_reactor_backend_ops()->poll(be(), CR_BATCH, &wakes);
		CU_ASSERT_EQUAL(eio()->n_registered, 1);
		write_pattern(u->sv[1], 0, 100);
		shutdown(u->sv[1], SHUT_WR);
		return;
	case 1:
		CU_ASSERT_EQUAL(u->a.bytes, 100);
		CU_ASSERT_EQUAL(u->b.bytes, 3000);
		CU_ASSERT(u->b.in_order);
		CU_ASSERT_EQUAL(u->b.last, 0);
		if (u->sv[0] != u->old_fd)
			fprintf(stderr, "(fd number not reused: %d then %d)\n", u->old_fd,
				u->sv[0]);
		close(u->sv[0]);
		close(u->sv[1]);
		finish();
		return;
	}
}

static void
test_last_completion_frees_fd_number(void)
{
	struct reuse u = {0};

	run(reuse_step, &u);
	CU_ASSERT_EQUAL(u.step, 2);
}

/* ---- no buffer: the data waits in the socket, the lcore parks, nothing is reordered ---- */

struct starve {
	int sv[2];
	struct rec r;
	uint64_t total;
	uint64_t parks_before;
	struct cr_timer t;
	pthread_t writer;
	int step;
};

static void *
starve_writer(void *arg)
{
	struct starve *s = arg;
	int fd = s->sv[1];
	int fl = fcntl(fd, F_GETFL);

	fcntl(fd, F_SETFL, fl & ~O_NONBLOCK); /* block here, on this thread only */
	write_pattern(fd, 0, s->total);
	shutdown(fd, SHUT_WR);
	return NULL;
}

static void starve_step(void *arg);

static void
starve_timer(struct cr_timer *t, void *arg)
{
	(void)t;
	starve_step(arg);
}

static void
starve_step(void *arg)
{
	struct starve *s = arg;
	struct cr_lcore_stats st;
	struct eio *io = eio();

	switch (s->step++) {
	case 0:
		pair(s->sv);
		s->total = (uint64_t)io->buf_count * io->buf_size + 300000;
		s->r.held = true;
		s->r.held_ids = calloc(io->buf_count, sizeof(*s->r.held_ids));
		CU_ASSERT_PTR_NOT_NULL_FATAL(s->r.held_ids);
		s->r.in_order = true;
		s->r.next = starve_step;
		s->r.next_arg = s;
		CU_ASSERT_NOT_EQUAL(cr_io_recv(s->sv[0], rec_fn, &s->r), 0);
		pthread_create(&s->writer, NULL, starve_writer, s);
		cr_timer_init(&s->t, starve_timer, s);
		cr_timer_start(&s->t, 10 * MS);
		return;
	case 1:
		/* Every buffer lent out: wait (bounded by the watchdog) for the recv to starve. */
		if (eio_bufs_free(io) != 0 || io->starved.head != s->sv[0] + 1) {
			s->step--;
			cr_timer_start(&s->t, 10 * MS);
			return;
		}
		CU_ASSERT_EQUAL(s->r.n_held, io->buf_count);
		CU_ASSERT_EQUAL(s->r.finals, 0);
		CU_ASSERT_FALSE(cr__epoll_io_pending(be()));
		cr_lcore_stats(cr_lcore_id(), &st);
		s->parks_before = st.parks;
		cr_timer_start(&s->t, 100 * MS);
		return;
	case 2:
		/* Starved, the lcore slept instead of spinning on the fd. */
		cr_lcore_stats(cr_lcore_id(), &st);
		CU_ASSERT(st.parks > s->parks_before);
		CU_ASSERT_EQUAL(s->r.n_held, io->buf_count);
		s->r.held = false;
		/* One buffer back is enough to resume. */
		cr_io_buf_release(s->r.held_ids[--s->r.n_held]);
		CU_ASSERT(cr__epoll_io_pending(be()));
		while (s->r.n_held > 0)
			cr_io_buf_release(s->r.held_ids[--s->r.n_held]);
		return;
	case 3:
		/* the final completion: EOF after every byte, in order */
		pthread_join(s->writer, NULL);
		CU_ASSERT_EQUAL(s->r.last, 0);
		CU_ASSERT_EQUAL(s->r.bytes, s->total);
		CU_ASSERT(s->r.in_order);
		CU_ASSERT_EQUAL(io->nfree, io->buf_ids);
		close(s->sv[0]);
		close(s->sv[1]);
		finish();
		return;
	}
}

static void
test_starved_recv_parks_and_resumes(void)
{
	struct starve *s = calloc(1, sizeof(*s));

	run(starve_step, s);
	CU_ASSERT_EQUAL(s->step, 4);
	free(s->r.held_ids);
	free(s);
}

/* ---- the budget cuts a busy fd off: it stays ready, and the lcore does not park ---- */

struct budget {
	int sv[2];
	struct rec r;
	int step;
};

static void
budget_step(void *arg)
{
	struct budget *b = arg;
	uint64_t wakes = 0;
	unsigned n;
	int i;

	switch (b->step++) {
	case 0:
		pair(b->sv);
		b->r.in_order = true;
		b->r.next = budget_step;
		b->r.next_arg = b;
		write_pattern(b->sv[1], 0, 10 * (size_t)eio()->buf_size);
		shutdown(b->sv[1], SHUT_WR);
		CU_ASSERT_NOT_EQUAL(cr_io_recv(b->sv[0], rec_fn, &b->r), 0);
		CU_ASSERT_EQUAL(b->r.calls, 0);
		/* A budget of one (a pending wake may take it first: bounded retries) */
		for (i = 0; i < 4 && b->r.calls == 0; i++) {
			n = cr_reactor_backend_ops()->poll(be(), 1, &wakes);
			CU_ASSERT_EQUAL(n, 1);
		}
		CU_ASSERT_EQUAL(b->r.mores, 1);
		/* Edge-triggered: no event will come for the data left, so the fd must stay. */
		CU_ASSERT_EQUAL(eio()->ready.head, b->sv[0] + 1);
		CU_ASSERT(cr_reactor_backend_ops()->pending(be()));
		return;
	case 1:
		CU_ASSERT_EQUAL(b->r.bytes, 10 * (uint64_t)eio()->buf_size);
		CU_ASSERT_EQUAL(b->r.mores, 10);
		CU_ASSERT_EQUAL(b->r.last, 0);
		CU_ASSERT(b->r.in_order);
		close(b->sv[0]);
		close(b->sv[1]);
		finish();
		return;
	}
}

static void
test_budget_keeps_fd_ready(void)
{
	struct budget b = {0};

	run(budget_step, &b);
	CU_ASSERT_EQUAL(b.step, 2);
}

/* ---- park keeps the events it woke for ---- */

struct parkev {
	int sv[2];
	struct rec r;
	int step;
};

static void
park_step(void *arg)
{
	struct parkev *p = arg;
	const struct cr_backend_ops *ops = cr_reactor_backend_ops();
	uint64_t wakes = 0;

	switch (p->step++) {
	case 0:
		pair(p->sv);
		p->r.in_order = true;
		p->r.next = park_step;
		p->r.next_arg = p;
		CU_ASSERT_NOT_EQUAL(cr_io_recv(p->sv[0], rec_fn, &p->r), 0);
		ops->poll(be(), CR_BATCH, &wakes); /* EAGAIN: now waiting in the set */
		CU_ASSERT_FALSE(ops->pending(be()));
		write_pattern(p->sv[1], 0, 10);
		ops->park(be(), 5000 * MS); /* returns at once: the fd is readable */
		CU_ASSERT(be()->n_evs >= 1);
		CU_ASSERT(ops->pending(be()));
		CU_ASSERT_EQUAL(p->r.calls, 0);
		/* The next poll uses them; epoll will not report that edge again. */
		ops->poll(be(), CR_BATCH, &wakes);
		CU_ASSERT_EQUAL(be()->n_evs, 0);
		CU_ASSERT_EQUAL(p->r.mores, 1);
		CU_ASSERT_EQUAL(p->r.bytes, 10);
		close(p->sv[1]);
		return;
	case 1:
		CU_ASSERT_EQUAL(p->r.last, 0);
		CU_ASSERT(p->r.in_order);
		close(p->sv[0]);
		finish();
		return;
	}
}

static void
test_park_keeps_events(void)
{
	struct parkev p = {0};

	run(park_step, &p);
	CU_ASSERT_EQUAL(p.step, 2);
}

/* ---- a spinning lcore sees readiness without parking ---- */

static void
spin_step(void *arg)
{
	struct parkev *p = arg;
	const struct cr_backend_ops *ops = cr_reactor_backend_ops();
	uint64_t wakes = 0;
	bool seen = false;
	int i;

	switch (p->step++) {
	case 0:
		pair(p->sv);
		p->r.next = spin_step;
		p->r.next_arg = p;
		CU_ASSERT_NOT_EQUAL(cr_io_recv(p->sv[0], rec_fn, &p->r), 0);
		ops->poll(be(), CR_BATCH, &wakes); /* EAGAIN: now waiting in the set */
		write_pattern(p->sv[1], 0, 10);
		/* What the spin loop calls: within a bounded number of calls it must look. */
		for (i = 0; i < 1000 && !seen; i++)
			seen = ops->pending(be());
		CU_ASSERT(seen);
		CU_ASSERT(be()->n_evs >= 1);
		CU_ASSERT_EQUAL(p->r.calls, 0);
		close(p->sv[1]);
		return;
	case 1:
		CU_ASSERT_EQUAL(p->r.bytes, 10);
		CU_ASSERT_EQUAL(p->r.last, 0);
		close(p->sv[0]);
		finish();
		return;
	}
}

static void
test_spin_sees_readiness(void)
{
	struct parkev p = {0};

	run(spin_step, &p);
	CU_ASSERT_EQUAL(p.step, 2);
}

/* ---- an fd above the table's start size ---- */

struct grow {
	int sv[2], big;
	unsigned cap0;
	struct rlimit rl;
	struct rec r;
	int step;
};

static void
grow_step(void *arg)
{
	struct grow *g = arg;

	switch (g->step++) {
	case 0:
		g->cap0 = eio()->fd_cap;
		/* The table was sized under a low limit; raise it back and use a higher fd. */
		CU_ASSERT_EQUAL(setrlimit(RLIMIT_NOFILE, &g->rl), 0);
		pair(g->sv);
		g->big = (int)g->cap0 + 100;
		CU_ASSERT_EQUAL_FATAL(dup2(g->sv[0], g->big), g->big);
		g->r.in_order = true;
		g->r.next = grow_step;
		g->r.next_arg = g;
		CU_ASSERT_NOT_EQUAL(cr_io_recv(g->big, rec_fn, &g->r), 0);
		CU_ASSERT(eio()->fd_cap > (unsigned)g->big);
		write_pattern(g->sv[1], 0, 5000);
		shutdown(g->sv[1], SHUT_WR);
		return;
	case 1:
		CU_ASSERT_EQUAL(g->r.bytes, 5000);
		CU_ASSERT_EQUAL(g->r.last, 0);
		CU_ASSERT(g->r.in_order);
		close(g->big);
		close(g->sv[0]);
		close(g->sv[1]);
		finish();
		return;
	}
}

static void
test_fd_table_grows(void)
{
	struct grow g = {0};
	struct rlimit low;

	CU_ASSERT_EQUAL_FATAL(getrlimit(RLIMIT_NOFILE, &g.rl), 0);
	if (g.rl.rlim_cur != RLIM_INFINITY && g.rl.rlim_cur < 1024 + 200) {
		fprintf(stderr, "(RLIMIT_NOFILE %llu too low to test growth)\n",
			(unsigned long long)g.rl.rlim_cur);
		return;
	}
	low = g.rl;
	low.rlim_cur = 1024;
	CU_ASSERT_EQUAL_FATAL(setrlimit(RLIMIT_NOFILE, &low), 0);
	run(grow_step, &g);
	setrlimit(RLIMIT_NOFILE, &g.rl);
	CU_ASSERT_EQUAL(g.step, 2);
	CU_ASSERT_EQUAL(g.cap0, 1024);
}

/* ---- nothing blocks the lcore: a read of an empty pipe, accept on a blocking listener ---- */

struct noblock {
	int pfd[2], lfd;
	char buf[16];
	struct rec rd, wr, acc;
	cr_op_id id, acc_id;
	struct cr_timer t;
	int step;
};

static void noblock_step(void *arg);

static void
noblock_timer(struct cr_timer *t, void *arg)
{
	(void)t;
	noblock_step(arg);
}

static void
noblock_step(void *arg)
{
	struct noblock *nb = arg;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};

	switch (nb->step++) {
	case 0:
		CU_ASSERT_EQUAL_FATAL(pipe2(nb->pfd, O_CLOEXEC), 0); /* blocking ends */
		/* No offsets on a pipe: the read waits for data like a recv (as on io_uring). */
		nb->id = cr_io_read(nb->pfd[0], nb->buf, sizeof(nb->buf), 7, rec_fn, &nb->rd);
		CU_ASSERT_NOT_EQUAL(nb->id, 0);
		nb->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		CU_ASSERT_EQUAL_FATAL(bind(nb->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
		CU_ASSERT_EQUAL_FATAL(listen(nb->lfd, 4), 0);
		nb->acc_id = cr_io_accept(nb->lfd, rec_fn, &nb->acc);
		CU_ASSERT_NOT_EQUAL(nb->acc_id, 0);
		cr_timer_init(&nb->t, noblock_timer, nb);
		cr_timer_start(&nb->t, 50 * MS);
		return;
	case 1:
		/* Still here after 50 ms: neither blocked the lcore, neither completed. */
		CU_ASSERT_EQUAL(nb->rd.calls, 0);
		CU_ASSERT(cr_io_live(nb->id));
		CU_ASSERT_EQUAL(nb->acc.calls, 0);
		CU_ASSERT_EQUAL(cr_io_cancel(nb->acc_id), 0);
		nb->wr.next = noblock_step;
		nb->wr.next_arg = nb;
		CU_ASSERT_NOT_EQUAL(cr_io_write(nb->pfd[1], "hello", 5, 99, rec_fn, &nb->wr), 0);
		return;
	case 2:
		CU_ASSERT_EQUAL(nb->wr.last, 5);
		nb->rd.next = noblock_step;
		nb->rd.next_arg = nb;
		if (nb->rd.finals == 0)
			return; /* the read's completion runs this step again */
		/* fall through */
	case 3:
		nb->step = 4;
		CU_ASSERT_EQUAL(nb->rd.last, 5);
		CU_ASSERT(memcmp(nb->buf, "hello", 5) == 0);
		CU_ASSERT_EQUAL(nb->acc.finals, 1);
		CU_ASSERT_EQUAL(nb->acc.last, -ECANCELED);
		close(nb->pfd[0]);
		close(nb->pfd[1]);
		close(nb->lfd);
		finish();
		return;
	}
}

static void
test_nothing_blocks_the_lcore(void)
{
	struct noblock nb = {0};

	run(noblock_step, &nb);
	CU_ASSERT_EQUAL(nb.step, 4);
}

static const struct ut_case cases[] = {
	UT_CASE(test_registered_only_while_waiting),
	UT_CASE(test_last_completion_frees_fd_number),
	UT_CASE(test_starved_recv_parks_and_resumes),
	UT_CASE(test_budget_keeps_fd_ready),
	UT_CASE(test_park_keeps_events),
	UT_CASE(test_spin_sees_readiness),
	UT_CASE(test_fd_table_grows),
	UT_CASE(test_nothing_blocks_the_lcore),
};

UT_MAIN("epoll_io", cases, setup, NULL)
