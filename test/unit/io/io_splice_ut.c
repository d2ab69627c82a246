/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cr_io_splice and the pipe pool on the driver named by $CR_UT_DRIVER, over loopback TCP:
 * socket -> pooled pipe -> socket relays of 1 B to 64 MiB checked by sha256, a file -> pipe
 * -> socket relay, partial splices, EAGAIN (a pipe end that is not ready; a socket with
 * no data waits), cancel in flight, a deadline, a reset in the middle of a relay (no fd
 * leak over $CR_UT_SPLICE_CYCLES cycles, 1000 by default; 10000 by hand), bad arguments,
 * and the pool: exhaustion says -EAGAIN, a dirty pipe never comes back dirty.
 */
#include <fcntl.h>
#include <dirent.h>
#include <openssl/evp.h>
#include <sys/ioctl.h>

#include "cr_io.h"
#include "ut_data.h"
#include "ut_runtime.h"
#include "ut_socket.h"

/* ---- threads on the far ends: a seeded writer and a hashing reader ---- */

struct far {
	int fd;
	uint64_t len, done;
	unsigned char md[32];
	pthread_t t;
};

/* The far ends on another CPU than the main lcore where there is one: data then arrives
 * while a splice runs, not only between them. */
static void
far_pin(void)
{
	/* ut_table is set up before any far thread starts and never written after. */
	unsigned cpu = ut_table.main_lcore == 0 ? 1 : 0;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sysconf(_SC_NPROCESSORS_ONLN) > 1)
		pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void *
writer_main(void *arg)
{
	struct far *w = arg;
	uint8_t *chunk = malloc(65536);
	EVP_MD_CTX *h = EVP_MD_CTX_new();
	uint64_t s = w->len | 1;

	far_pin();
	EVP_DigestInit_ex(h, EVP_sha256(), NULL);
	while (chunk != NULL && w->done < w->len) {
		size_t n = 1 + (size_t)(ut_rand(&s) % 65536);

		if (n > w->len - w->done)
			n = (size_t)(w->len - w->done);
		ut_fill(chunk, w->done, n);
		EVP_DigestUpdate(h, chunk, n);
		if (!ut_write_all(w->fd, chunk, n))
			break;
		w->done += n;
	}
	EVP_DigestFinal_ex(h, w->md, NULL);
	EVP_MD_CTX_free(h);
	free(chunk);
	shutdown(w->fd, SHUT_WR);
	return NULL;
}

static void *
reader_main(void *arg)
{
	struct far *r = arg;
	uint8_t *buf = malloc(65536);
	EVP_MD_CTX *h = EVP_MD_CTX_new();
	ssize_t n;

	far_pin();
	EVP_DigestInit_ex(h, EVP_sha256(), NULL);
	while (buf != NULL && (n = recv(r->fd, buf, 65536, 0)) > 0) {
		EVP_DigestUpdate(h, buf, (size_t)n);
		r->done += (uint64_t)n;
	}
	EVP_DigestFinal_ex(h, r->md, NULL);
	EVP_MD_CTX_free(h);
	free(buf);
	return NULL;
}

/* ---- a one-way relay on the lcore: in -> pooled pipe -> out, to EOF ---- */

struct relay {
	int in, out;
	int64_t off; /* a file source's offset, or CR_IO_NO_OFF */
	uint32_t chunk, in_pipe;
	struct cr_io_pipe p;
	uint64_t moved;
	unsigned partial_in, partial_out, finals;
	int32_t err;
	bool done;
};

static void relay_out(struct relay *r);

static void
relay_fail(struct relay *r, int32_t err)
{
	r->err = err;
	r->done = true;
}

static void
in_cb(void *ctx, const struct cr_io_cqe *cqe)
{
	struct relay *r = ctx;

	r->finals++;
	if (cqe->flags & CR_IO_F_MORE)
		CU_FAIL("a splice completion with CR_IO_F_MORE");
	if (cqe->res < 0) {
		relay_fail(r, cqe->res);
		return;
	}
	if (cqe->res == 0) {
		shutdown(r->out, SHUT_WR);
		r->done = true;
		return;
	}
	if ((uint32_t)cqe->res < r->chunk)
		r->partial_in++;
	if (r->off >= 0)
		r->off += cqe->res;
	r->in_pipe = (uint32_t)cqe->res;
	relay_out(r);
}

static void
relay_in(struct relay *r)
{
	if (cr_io_splice(r->in, r->off, r->p.wr, CR_IO_NO_OFF, r->chunk, SPLICE_F_MOVE, 0,
			 in_cb, r) == 0)
		relay_fail(r, -errno);
}

static void
out_cb(void *ctx, const struct cr_io_cqe *cqe)
{
	struct relay *r = ctx;

	r->finals++;
	if (cqe->res <= 0) {
		relay_fail(r, cqe->res < 0 ? cqe->res : -EPIPE);
		return;
	}
	if ((uint32_t)cqe->res < r->in_pipe)
		r->partial_out++;
	r->in_pipe -= (uint32_t)cqe->res;
	r->moved += (uint64_t)cqe->res;
	if (r->in_pipe != 0)
		relay_out(r);
	else
		relay_in(r);
}

static void
relay_out(struct relay *r)
{
	if (cr_io_splice(r->p.rd, CR_IO_NO_OFF, r->out, CR_IO_NO_OFF, r->in_pipe, SPLICE_F_MOVE,
			 0, out_cb, r) == 0)
		relay_fail(r, -errno);
}

static int
pipe_bytes(int fd)
{
	int n = -1;

	return ioctl(fd, FIONREAD, &n) == 0 ? n : -1;
}

/* ---- socket -> pipe -> socket, 1 B to 8 MiB ---- */

struct sock_relay {
	struct relay r;
	int a[2], b[2]; /* a[0] written by the writer, a[1] read by the relay; b likewise */
	unsigned phase, pipes_free;
};

static int
sock_relay_step(void *arg)
{
	struct sock_relay *s = arg;

	switch (s->phase) {
	case 0:
		s->pipes_free = cr_io_pipe_free();
		CU_ASSERT_FATAL(cr_io_pipe_get(&s->r.p) == 0);
		s->r.chunk = cr_io_pipe_size();
		relay_in(&s->r);
		s->phase = 1;
		break;
	case 1:
		if (!s->r.done)
			break;
		CU_ASSERT_EQUAL(cr_io_inflight(), 0);
		CU_ASSERT_EQUAL(pipe_bytes(s->r.p.rd), 0);
		cr_io_pipe_put(&s->r.p);
		CU_ASSERT_EQUAL(cr_io_pipe_free(), s->pipes_free);
		ut_finish();
		break;
	}
	return 1;
}

static void
relay_sockets(uint64_t len)
{
	struct sock_relay s = {.r.off = CR_IO_NO_OFF};
	struct far w = {0}, rd = {0};

	CU_ASSERT_FATAL(ut_tcp_pair(s.a) == 0 && ut_tcp_pair(s.b) == 0);
	s.r.in = s.a[1];
	s.r.out = s.b[0];
	w.fd = s.a[0];
	w.len = len;
	rd.fd = s.b[1];
	CU_ASSERT_FATAL(pthread_create(&w.t, NULL, writer_main, &w) == 0);
	CU_ASSERT_FATAL(pthread_create(&rd.t, NULL, reader_main, &rd) == 0);
	ut_run(sock_relay_step, &s);
	if (!s.r.done)
		shutdown(s.b[0], SHUT_RDWR); /* let the reader end */
	pthread_join(w.t, NULL);
	pthread_join(rd.t, NULL);
	printf("\n    %llu bytes: %u partial in, %u partial out, %u splices",
	       (unsigned long long)len, s.r.partial_in, s.r.partial_out, s.r.finals);
	CU_ASSERT_EQUAL(s.r.err, 0);
	CU_ASSERT_EQUAL(w.done, len);
	CU_ASSERT_EQUAL(s.r.moved, len);
	CU_ASSERT_EQUAL(rd.done, len);
	CU_ASSERT(memcmp(w.md, rd.md, sizeof(w.md)) == 0);
	for (int i = 0; i < 2; i++) {
		close(s.a[i]);
		close(s.b[i]);
	}
}

static void
test_relay_sizes(void)
{
	/* 64 MiB: long enough that data keeps arriving during splices (a socket that
	 * looked empty to the splice has bytes a moment later; not the pipe's fault). */
	static const uint64_t sizes[] = {1, 4096, 65537, 1 << 20, 8 << 20, 64 << 20};

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		relay_sockets(sizes[i]);
}

/* ---- file -> pipe -> socket ---- */

static void
test_file_to_socket(void)
{
	const uint64_t len = (3u << 20) + 123;
	char path[] = "/tmp/cr_splice_ut.XXXXXX";
	struct sock_relay s = {.r.off = 0};
	struct far rd = {0};
	uint8_t *data = malloc(len);
	unsigned char md[32];
	int fd = mkstemp(path);

	CU_ASSERT_FATAL(fd >= 0 && data != NULL);
	unlink(path);
	ut_fill(data, 0, len);
	CU_ASSERT_FATAL(write(fd, data, len) == (ssize_t)len);
	EVP_Digest(data, len, md, NULL, EVP_sha256(), NULL);
	CU_ASSERT_FATAL(ut_tcp_pair(s.b) == 0);
	s.a[0] = s.a[1] = -1;
	s.r.in = fd;
	s.r.out = s.b[0];
	rd.fd = s.b[1];
	CU_ASSERT_FATAL(pthread_create(&rd.t, NULL, reader_main, &rd) == 0);
	ut_run(sock_relay_step, &s);
	if (!s.r.done)
		shutdown(s.b[0], SHUT_RDWR);
	pthread_join(rd.t, NULL);
	CU_ASSERT_EQUAL(s.r.err, 0);
	CU_ASSERT_EQUAL(s.r.moved, len);
	CU_ASSERT_EQUAL((uint64_t)s.r.off, len);
	/* Offsets given: the file's own position is not moved. */
	CU_ASSERT_EQUAL(lseek(fd, 0, SEEK_CUR), (off_t)len);
	CU_ASSERT_EQUAL(rd.done, len);
	CU_ASSERT(memcmp(md, rd.md, sizeof(md)) == 0);
	close(fd);
	close(s.b[0]);
	close(s.b[1]);
	free(data);
}

/* ---- single ops: partial, EAGAIN, waiting, cancel, deadline, bad arguments ---- */

struct one {
	int sv[2];
	struct cr_io_pipe p;
	unsigned phase, turns, calls;
	int32_t res;
	uint64_t t0, t1;
	cr_op_id id;
};

static void
one_cb(void *ctx, const struct cr_io_cqe *cqe)
{
	struct one *o = ctx;

	o->calls++;
	o->res = cqe->res;
	o->t1 = ut_mono_ns();
}

/* Start a splice of @p len from socket sv[1] into the pipe (or out of it, @p out). */
static void
one_start(struct one *o, bool out, uint32_t len, uint64_t timeout_ns)
{
	o->calls = 0;
	o->res = 0;
	o->t0 = ut_mono_ns();
	o->id = out ? cr_io_splice(o->p.rd, CR_IO_NO_OFF, o->sv[1], CR_IO_NO_OFF, len, 0,
				   timeout_ns, one_cb, o)
		    : cr_io_splice(o->sv[1], CR_IO_NO_OFF, o->p.wr, CR_IO_NO_OFF, len, 0,
				   timeout_ns, one_cb, o);
	CU_ASSERT(o->id != 0);
}

static int
ops_step(void *arg)
{
	struct one *o = arg;
	char buf[4096];

	o->turns++;
	switch (o->phase) {
	case 0: /* partial: 1000 bytes wait in the socket, 1 MiB asked for */
		CU_ASSERT_FATAL(cr_io_pipe_get(&o->p) == 0);
		memset(buf, 'p', sizeof(buf));
		CU_ASSERT(send(o->sv[0], buf, 1000, 0) == 1000);
		one_start(o, false, 1 << 20, 0);
		o->phase = 1;
		break;
	case 1:
		if (o->calls == 0)
			break;
		CU_ASSERT_EQUAL(o->res, 1000);
		CU_ASSERT_EQUAL(pipe_bytes(o->p.rd), 1000);
		/* partial out: 1000 bytes in the pipe, 4000 asked for */
		one_start(o, true, 4000, 0);
		o->phase = 2;
		break;
	case 2:
		if (o->calls == 0)
			break;
		CU_ASSERT_EQUAL(o->res, 1000);
		CU_ASSERT_EQUAL(ut_read_n(o->sv[0], buf, 1000), 1000);
		/* EAGAIN: out of an empty pipe there is nothing to wait for */
		one_start(o, true, 100, 0);
		o->phase = 3;
		break;
	case 3:
		if (o->calls == 0)
			break;
		CU_ASSERT_EQUAL(o->res, -EAGAIN);
		CU_ASSERT_EQUAL(cr_io_inflight(), 0);
		/* a socket with no data: the op waits, then data comes */
		one_start(o, false, 4096, 0);
		o->turns = 0;
		o->phase = 4;
		break;
	case 4:
		if (o->turns < 50)
			break;
		CU_ASSERT_EQUAL(o->calls, 0);
		CU_ASSERT(cr_io_live(o->id));
		CU_ASSERT(send(o->sv[0], "late", 4, 0) == 4);
		o->phase = 5;
		break;
	case 5:
		if (o->calls == 0)
			break;
		CU_ASSERT_EQUAL(o->res, 4);
		CU_ASSERT_EQUAL(read(o->p.rd, buf, 4), 4);
		/* cancel in flight: the final completion comes, exactly once */
		one_start(o, false, 4096, 0);
		o->turns = 0;
		o->phase = 6;
		break;
	case 6:
		if (o->turns < 20)
			break;
		CU_ASSERT_EQUAL(o->calls, 0);
		CU_ASSERT_EQUAL(cr_io_cancel(o->id), 0);
		CU_ASSERT_EQUAL(cr_io_cancel(o->id), 0); /* still live until the final CQE */
		o->turns = 0;
		o->phase = 7;
		break;
	case 7:
		if (o->calls == 0)
			break;
		if (o->turns < 20)
			break; /* a second completion would show by now */
		CU_ASSERT_EQUAL(o->calls, 1);
		CU_ASSERT_EQUAL(o->res, -ECANCELED);
		CU_ASSERT_FALSE(cr_io_live(o->id));
		CU_ASSERT_EQUAL(cr_io_cancel(o->id), -ENOENT);
		CU_ASSERT_EQUAL(cr_io_inflight(), 0);
		CU_ASSERT_EQUAL(pipe_bytes(o->p.rd), 0);
		/* a deadline: 50 ms with no data */
		one_start(o, false, 4096, 50 * UT_MS);
		o->phase = 8;
		break;
	case 8:
		if (o->calls == 0)
			break;
		CU_ASSERT_EQUAL(o->res, -ETIMEDOUT);
		CU_ASSERT(o->t1 - o->t0 >= 50 * UT_MS);
		CU_ASSERT_EQUAL(cr_io_inflight(), 0);
		/* EAGAIN into a full pipe while the socket has bytes */
		while (write(o->p.wr, buf, sizeof(buf)) > 0)
			;
		CU_ASSERT(send(o->sv[0], buf, 100, 0) == 100);
		one_start(o, false, 4096, 0);
		o->phase = 9;
		break;
	case 9:
		if (o->calls == 0)
			break;
		CU_ASSERT_EQUAL(o->res, -EAGAIN);
		/* bad arguments: no pipe end, unknown flags, nothing to move, a bad fd */
		errno = 0;
		CU_ASSERT_EQUAL(cr_io_splice(o->sv[1], -1, o->sv[1], -1, 10, 0, 0, one_cb, o), 0);
		CU_ASSERT_EQUAL(errno, EINVAL);
		errno = 0;
		CU_ASSERT_EQUAL(cr_io_splice(o->sv[1], -1, o->p.wr, -1, 10, SPLICE_F_NONBLOCK, 0,
					     one_cb, o), 0);
		CU_ASSERT_EQUAL(errno, EINVAL);
		errno = 0;
		CU_ASSERT_EQUAL(cr_io_splice(o->sv[1], -1, o->p.wr, -1, 0, 0, 0, one_cb, o), 0);
		CU_ASSERT_EQUAL(errno, EINVAL);
		errno = 0;
		CU_ASSERT_EQUAL(cr_io_splice(-1, -1, o->p.wr, -1, 10, 0, 0, one_cb, o), 0);
		CU_ASSERT_EQUAL(errno, EBADF);
		CU_ASSERT_EQUAL(cr_io_inflight(), 0);
		/* a full pipe goes back: replaced, never handed out dirty */
		cr_io_pipe_put(&o->p);
		ut_finish();
		break;
	}
	return 1;
}

static void
test_single_ops(void)
{
	struct one o = {0};

	CU_ASSERT_FATAL(ut_tcp_pair(o.sv) == 0);
	ut_run(ops_step, &o);
	CU_ASSERT_EQUAL(o.phase, 9);
	close(o.sv[0]);
	close(o.sv[1]);
}

/* A splice into a socket whose peer is gone: -EPIPE as the op's result, never a SIGPIPE
 * (the harness leaves SIGPIPE at its default, which would kill the test; the epoll driver
 * splices on the lcore thread, and splice(2) has no MSG_NOSIGNAL). */
static int
epipe_step(void *arg)
{
	struct one *o = arg;
	char buf[4096];

	switch (o->phase) {
	case 0:
		CU_ASSERT_FATAL(cr_io_pipe_get(&o->p) == 0);
		memset(buf, 'e', sizeof(buf));
		CU_ASSERT(write(o->p.wr, buf, sizeof(buf)) == (ssize_t)sizeof(buf));
		close(o->sv[0]);
		o->sv[0] = -1;
		one_start(o, true, sizeof(buf), 0);
		o->phase = 1;
		break;
	case 1:
		if (o->calls == 0)
			break;
		CU_ASSERT_EQUAL(o->calls, 1);
		CU_ASSERT_EQUAL(o->res, -EPIPE);
		cr_io_pipe_put(&o->p);
		ut_finish();
		o->phase = 2;
		break;
	}
	return 1;
}

static void
test_splice_to_closed_peer(void)
{
	struct one o = {0};

	CU_ASSERT_FATAL(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, o.sv) == 0);
	ut_run(epipe_step, &o);
	CU_ASSERT_EQUAL(o.phase, 2);
	close(o.sv[1]);
}

/* Off an lcore both the op and the pool say EPERM. */
static void
test_off_lcore(void)
{
	struct cr_io_pipe p;

	errno = 0;
	CU_ASSERT_EQUAL(cr_io_splice(0, -1, 1, -1, 1, 0, 0, one_cb, NULL), 0);
	CU_ASSERT_EQUAL(errno, EPERM);
	CU_ASSERT_EQUAL(cr_io_pipe_get(&p), -EPERM);
}

/* ---- cancelled at once or a one-tick deadline: one outcome per op, no byte lost ---- */

#define RACES 2000

struct race {
	struct one o;
	unsigned started, results, cancelled, bad;
	uint64_t written, in_pipe;
	bool busy;
};

static void
race_cb(void *ctx, const struct cr_io_cqe *cqe)
{
	struct race *r = ctx;
	char buf[4096];

	r->busy = false;
	if (cqe->res > 0) {
		r->results++;
		if (read(r->o.p.rd, buf, sizeof(buf)) != cqe->res)
			r->bad++;
		r->in_pipe += (uint64_t)cqe->res;
	} else if (cqe->res == -ECANCELED || cqe->res == -ETIMEDOUT) {
		r->cancelled++;
	} else {
		r->bad++;
	}
}

static int
race_step(void *arg)
{
	struct race *r = arg;
	char buf[4096];
	ssize_t n;
	cr_op_id id;

	if (r->started == 0 && !r->busy)
		CU_ASSERT_FATAL(cr_io_pipe_get(&r->o.p) == 0);
	if (r->busy)
		return 1;
	if (r->started == RACES) {
		/* What no op took is still in the socket. */
		while ((n = recv(r->o.sv[1], buf, sizeof(buf), MSG_DONTWAIT)) > 0)
			r->in_pipe += (uint64_t)n;
		CU_ASSERT_EQUAL(r->in_pipe, r->written);
		CU_ASSERT_EQUAL(r->results + r->cancelled, RACES);
		CU_ASSERT_EQUAL(r->bad, 0);
		CU_ASSERT_EQUAL(cr_io_inflight(), 0);
		printf("\n    %u results, %u cancelled or timed out", r->results, r->cancelled);
		cr_io_pipe_put(&r->o.p);
		ut_finish();
		return 1;
	}
	/* Bytes on every other op, so some are ready at once and some wait. */
	if (r->started % 2 == 0 && send(r->o.sv[0], "x", 1, 0) == 1)
		r->written++;
	id = cr_io_splice(r->o.sv[1], CR_IO_NO_OFF, r->o.p.wr, CR_IO_NO_OFF, 4096, 0, 0,
			  race_cb, r);
	CU_ASSERT_FATAL(id != 0);
	r->started++;
	r->busy = true;
	/* Cancelled at once, or given a deadline of one tick. */
	if (r->started % 3 != 0) {
		CU_ASSERT_EQUAL(cr_io_cancel(id), 0);
	} else {
		CU_ASSERT_EQUAL(cr_io_set_deadline(id, UT_MS), 0);
	}
	return 1;
}

static void
test_cancel_or_deadline_one_outcome(void)
{
	struct race r = {0};

	CU_ASSERT_FATAL(ut_tcp_pair(r.o.sv) == 0);
	ut_run(race_step, &r);
	CU_ASSERT_EQUAL(r.started, RACES);
	close(r.o.sv[0]);
	close(r.o.sv[1]);
}

/* ---- a reset in the middle of a relay, many times: no fd leaks ---- */

static unsigned
fd_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	unsigned n = 0;

	if (d == NULL)
		return 0;
	while (readdir(d) != NULL)
		n++;
	closedir(d);
	return n;
}

struct rst {
	struct relay r;
	int a[2], b[2];
	unsigned phase, cycles, want, turns, resets, fds0;
	unsigned pipes_free;
};

static void
rst_close(struct rst *s)
{
	for (int i = 0; i < 2; i++) {
		close(s->a[i]);
		close(s->b[i]);
	}
}

static int
rst_step(void *arg)
{
	struct rst *s = arg;
	struct linger lg = {1, 0};
	static uint8_t chunk[65536];

	switch (s->phase) {
	case 0: /* a new pair of connections, a relay waiting on the first */
		if (s->cycles == s->want) {
			CU_ASSERT_EQUAL(cr_io_pipe_free(), s->pipes_free);
			CU_ASSERT_EQUAL(cr_io_inflight(), 0);
			ut_finish();
			break;
		}
		if (s->cycles == 0)
			s->pipes_free = cr_io_pipe_free();
		memset(&s->r, 0, sizeof(s->r));
		s->r.off = CR_IO_NO_OFF;
		CU_ASSERT_FATAL(ut_tcp_pair(s->a) == 0 && ut_tcp_pair(s->b) == 0);
		CU_ASSERT_FATAL(cr_io_pipe_get(&s->r.p) == 0);
		s->r.chunk = cr_io_pipe_size();
		s->r.in = s->a[1];
		s->r.out = s->b[0];
		relay_in(&s->r);
		s->turns = 0;
		s->phase = 1;
		break;
	case 1: /* bytes, then a reset, at a turn that varies from cycle to cycle */
		if (++s->turns < 1 + s->cycles % 4)
			break;
		ut_fill(chunk, 0, sizeof(chunk));
		CU_ASSERT(send(s->a[0], chunk, 1 + (s->cycles * 7919) % sizeof(chunk), 0) > 0);
		setsockopt(s->a[0], SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		close(s->a[0]);
		s->a[0] = -1;
		s->phase = 2;
		break;
	case 2:
		if (!s->r.done)
			break;
		if (s->r.err == -ECONNRESET)
			s->resets++;
		else
			CU_ASSERT(s->r.err == 0);
		/* a pipe with bytes still in it goes back: drained or replaced */
		cr_io_pipe_put(&s->r.p);
		rst_close(s);
		s->cycles++;
		s->phase = 0;
		break;
	}
	return 1;
}

static void
test_reset_mid_relay_no_fd_leak(void)
{
	const char *env = getenv("CR_UT_SPLICE_CYCLES");
	struct rst s = {0};
	unsigned fds0 = fd_count();

	s.want = env != NULL ? (unsigned)strtoul(env, NULL, 10) : 1000;
	ut_run(rst_step, &s);
	printf("\n    %u cycles, %u reset mid-relay", s.cycles, s.resets);
	CU_ASSERT_EQUAL(s.cycles, s.want);
	CU_ASSERT(s.resets > 0);
	/* The runtime's own fds (rings, eventfds, the pool's pipes) went with it. */
	CU_ASSERT_EQUAL(fd_count(), fds0);
}

/* ---- the pool: exhaustion and the dirty-pipe rule ---- */

static int
pool_step(void *arg)
{
	struct cr_io_pipe *ps;
	struct cr_io_pipe extra, foreign;
	unsigned n = cr_io_pipe_free(), i;
	static uint8_t big[65536 * 2];
	int fds[2];

	(void)arg;
	CU_ASSERT_FATAL(n > 0);
	CU_ASSERT(cr_io_pipe_size() >= 65536);
	ps = calloc(n, sizeof(*ps));
	for (i = 0; i < n; i++) {
		CU_ASSERT_EQUAL(cr_io_pipe_get(&ps[i]), 0);
		CU_ASSERT(fcntl(ps[i].rd, F_GETFL) & O_NONBLOCK);
		CU_ASSERT_EQUAL(pipe_bytes(ps[i].rd), 0);
	}
	CU_ASSERT_EQUAL(cr_io_pipe_free(), 0);
	CU_ASSERT_EQUAL(cr_io_pipe_get(&extra), -EAGAIN);
	/* A little left in it: drained in place. */
	CU_ASSERT(write(ps[0].wr, "dirty", 5) == 5);
	cr_io_pipe_put(&ps[0]);
	CU_ASSERT_EQUAL(cr_io_pipe_get(&extra), 0);
	CU_ASSERT_EQUAL(pipe_bytes(extra.rd), 0);
	CU_ASSERT_EQUAL(extra.rd, ps[0].rd);
	ps[0] = extra;
	/* More than a cheap drain: closed and replaced; the new one is empty too. */
	CU_ASSERT(write(ps[1].wr, big, sizeof(big)) > 65536);
	cr_io_pipe_put(&ps[1]);
	CU_ASSERT_EQUAL(cr_io_pipe_get(&extra), 0);
	CU_ASSERT_EQUAL(pipe_bytes(extra.rd), 0);
	CU_ASSERT(fcntl(extra.wr, F_GETPIPE_SZ) >= (int)cr_io_pipe_size());
	ps[1] = extra;
	/* Not the pool's, or given back twice: refused, the pool unchanged. */
	CU_ASSERT_FATAL(pipe2(fds, O_CLOEXEC) == 0);
	foreign.rd = fds[0];
	foreign.wr = fds[1];
	cr_io_pipe_put(&foreign);
	CU_ASSERT_EQUAL(cr_io_pipe_free(), 0);
	close(fds[0]);
	close(fds[1]);
	for (i = 0; i < n; i++)
		cr_io_pipe_put(&ps[i]);
	cr_io_pipe_put(&ps[0]);
	CU_ASSERT_EQUAL(cr_io_pipe_free(), n);
	free(ps);
	ut_finish();
	return 1;
}

static void
test_pool_exhaustion_and_dirty_pipes(void)
{
	ut_run(pool_step, NULL);
}

static const struct ut_case cases[] = {
	UT_CASE(test_off_lcore),
	UT_CASE(test_single_ops),
	UT_CASE(test_splice_to_closed_peer),
	UT_CASE(test_relay_sizes),
	UT_CASE(test_file_to_socket),
	UT_CASE(test_pool_exhaustion_and_dirty_pipes),
	UT_CASE(test_cancel_or_deadline_one_outcome),
	UT_CASE(test_reset_mid_relay_no_fd_leak),
};

/* The pool is opt-in: these tests ask for the build's default one. */
static int
setup(void)
{
	return cr_io_pipe_pool(0, 0) != 0 ? -1 : ut_rt_setup();
}

UT_MAIN("io_splice", cases, setup, NULL)
