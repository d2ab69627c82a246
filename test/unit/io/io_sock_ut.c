/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Socket I/O through lib/io on the driver named by $CR_UT_DRIVER, over loopback TCP and
 * AF_UNIX pairs: multishot accept and recv, send/sendmsg (zero-copy above the threshold
 * on io_uring), UDP recvmsg, connect with a deadline, and the faults: receive buffers run
 * out, a tiny CQ overflows, a connection is destroyed with ops in flight, the peer resets
 * mid-send, and cancel races completion.
 *
 * On io_uring the driver's counters (uring_internal.h) prove the fault path was taken;
 * the epoll driver must show the same behaviour without them.
 */
#include <fcntl.h>
#include <sys/uio.h>

#include "cr_io_driver.h"
#include "ut_data.h"
#include "ut_runtime.h"
#include "ut_socket.h"
#include "uring_internal.h"

static struct uring_io *
uio(void)
{
	return ut_uring() ? &((struct cr_backend *)cr_reactor_backend())->io : NULL;
}

/* A foreign thread that writes @p len bytes of the test pattern, then shuts down. */
struct writer {
	int fd;
	uint64_t len, seed;
	uint64_t written;
	int err;
	pthread_t t;
};

static void *
writer_main(void *arg)
{
	struct writer *w = arg;
	uint8_t *chunk = malloc(65536);
	uint64_t s = w->seed | 1;

	while (chunk != NULL && w->written < w->len) {
		size_t n = 1 + (size_t)(ut_rand(&s) % 65536);
		ssize_t k;

		if (n > w->len - w->written)
			n = (size_t)(w->len - w->written);
		ut_fill(chunk, w->written, n);
		k = send(w->fd, chunk, n, MSG_NOSIGNAL);
		if (k <= 0) {
			w->err = errno;
			break;
		}
		w->written += (uint64_t)k;
	}
	free(chunk);
	shutdown(w->fd, SHUT_WR);
	return NULL;
}

static void
writer_start(struct writer *w, int fd, uint64_t len, uint64_t seed)
{
	w->fd = fd;
	w->len = len;
	w->seed = seed;
	w->written = 0;
	w->err = 0;
	CU_ASSERT_EQUAL(pthread_create(&w->t, NULL, writer_main, w), 0);
}

/* A received buffer holds the stream's bytes from @p off on. */
static bool
data_ok(const struct cr_io_cqe *cqe, uint64_t off)
{
	return cqe->res > 0 && ut_check(cqe->buf, off, (size_t)cqe->res) == (size_t)cqe->res;
}

static int small_tcp_pair(int fds[2]);
static void fill_socket(int fd);

/* ---- multishot accept ---- */

#define N_CONN 64

struct acc {
	int lfd, phase;
	uint16_t port;
	cr_op_id id;
	unsigned accepted, finals, bad_flags, errors;
	int32_t final_res;
	int cfds[N_CONN];
	pthread_t t;
};

static void *
connector_main(void *arg)
{
	struct acc *s = arg;

	for (int i = 0; i < N_CONN; i++)
		s->cfds[i] = ut_connect_port(s->port);
	return NULL;
}

static void
accept_cb(void *ctx, const struct cr_io_cqe *cqe)
{
	struct acc *s = ctx;

	if (!(cqe->flags & CR_IO_F_MORE)) {
		s->finals++;
		s->final_res = cqe->res;
		return;
	}
	if (cqe->res < 0) {
		s->errors++;
		return;
	}
	if (!(fcntl(cqe->res, F_GETFL) & O_NONBLOCK) || !(fcntl(cqe->res, F_GETFD) & FD_CLOEXEC))
		s->bad_flags++;
	close(cqe->res);
	s->accepted++;
}

static int
accept_step(void *arg)
{
	struct acc *s = arg;

	switch (s->phase) {
	case 0:
		s->id = cr_io_accept(s->lfd, accept_cb, s);
		CU_ASSERT_FATAL(s->id != 0);
		CU_ASSERT_EQUAL(pthread_create(&s->t, NULL, connector_main, s), 0);
		s->phase = 1;
		break;
	case 1:
		if (s->accepted < N_CONN)
			break;
		CU_ASSERT(cr_io_live(s->id));
		CU_ASSERT_EQUAL(cr_io_cancel(s->id), 0);
		s->phase = 2;
		break;
	case 2:
		if (s->finals == 0)
			break;
		CU_ASSERT_EQUAL(s->finals, 1);
		CU_ASSERT_EQUAL(s->final_res, -ECANCELED);
		CU_ASSERT_EQUAL(s->accepted, N_CONN);
		CU_ASSERT_EQUAL(s->errors, 0);
		CU_ASSERT_EQUAL(s->bad_flags, 0);
		CU_ASSERT_EQUAL(cr_io_inflight(), 0);
		ut_finish();
		break;
	}
	return 1;
}

static void
test_accept_multishot(void)
{
	struct acc s = {0};

	s.lfd = ut_listen(&s.port, N_CONN);
	CU_ASSERT_FATAL(s.lfd >= 0);
	ut_run(accept_step, &s);
	if (s.phase >= 1)
		pthread_join(s.t, NULL);
	for (int i = 0; i < N_CONN; i++) {
		CU_ASSERT(s.cfds[i] >= 0);
		if (s.cfds[i] >= 0)
			close(s.cfds[i]);
	}
	close(s.lfd);
}

/* ---- multishot recv of a stream, to EOF ---- */

#define STREAM_LEN (8ull << 20)

struct strm {
	int fds[2], phase;
	cr_op_id id;
	uint64_t got;
	unsigned finals, bad, after_final, nobuf;
	int32_t final_res;
	struct writer w;
};

static void
stream_cb(void *ctx, const struct cr_io_cqe *cqe)
{
	struct strm *s = ctx;

	if (s->finals != 0)
		s->after_final++;
	if (cqe->flags & CR_IO_F_BUFFER) {
		if (!data_ok(cqe, s->got))
			s->bad++;
		if (cqe->res > 0)
			s->got += (uint64_t)cqe->res;
		cr_io_buf_release(cqe->buf_id);
	} else if (cqe->flags & CR_IO_F_MORE) {
		s->nobuf++; /* data without a buffer, or an error that is not final */
	}
	if (!(cqe->flags & CR_IO_F_MORE)) {
		s->finals++;
		s->final_res = cqe->res;
	}
}

static int
stream_step(void *arg)
{
	struct strm *s = arg;

	switch (s->phase) {
	case 0:
		s->id = cr_io_recv(s->fds[0], stream_cb, s);
		CU_ASSERT_FATAL(s->id != 0);
		writer_start(&s->w, s->fds[1], STREAM_LEN, 11);
		s->phase = 1;
		break;
	case 1:
		if (s->finals == 0)
			break;
		CU_ASSERT_EQUAL(s->finals, 1);
		CU_ASSERT_EQUAL(s->final_res, 0);
		CU_ASSERT_EQUAL(s->got, STREAM_LEN);
		CU_ASSERT_EQUAL(s->bad, 0);
		CU_ASSERT_EQUAL(s->nobuf, 0);
		CU_ASSERT_EQUAL(cr_io_inflight(), 0);
		if (uio() != NULL)
			CU_ASSERT_EQUAL(uio()->bufs_lent, 0);
		ut_finish();
		break;
	}
	return 1;
}

static void
run_stream(int fds[2])
{
	struct strm s = {.fds = {fds[0], fds[1]}};

	ut_run(stream_step, &s);
	if (s.phase >= 1)
		pthread_join(s.w.t, NULL);
	CU_ASSERT_EQUAL(s.w.err, 0);
	CU_ASSERT_EQUAL(s.after_final, 0);
	close(fds[0]);
	close(fds[1]);
}

static void
test_recv_stream(void)
{
	int fds[2];

	CU_ASSERT_FATAL(ut_tcp_pair(fds) == 0);
	run_stream(fds);
	CU_ASSERT_FATAL(ut_unix_pair(fds) == 0);
	run_stream(fds);
}

/* ---- large sends (zero-copy on io_uring), buffer reused at once after completion ---- */

#define SEND_TOTAL (32ull << 20)
#define SEND_CHUNK (1u << 20)

struct reader {
	int fd;
	uint64_t want, got, bad;
	pthread_t t;
};

static void *
reader_main(void *arg)
{
	struct reader *r = arg;
	uint8_t *buf = malloc(65536);

	while (buf != NULL && r->got < r->want) {
		ssize_t k = recv(r->fd, buf, 65536, 0);

		if (k <= 0)
			break;
		if (ut_check(buf, r->got, (size_t)k) != (size_t)k)
			r->bad++;
		r->got += (uint64_t)k;
	}
	free(buf);
	return NULL;
}

struct bigsend {
	int fds[2], phase;
	uint8_t *buf;
	uint64_t off;
	unsigned sends, shorts, errors, msgs, big;
	bool busy;
	struct iovec iov[2];
	struct msghdr msg;
	struct reader r;
	bool unix_socket;
};

static void bigsend_next(struct bigsend *s);

static void
bigsend_cb(void *ctx, const struct cr_io_cqe *cqe)
{
	struct bigsend *s = ctx;

	s->busy = false;
	if (cqe->res <= 0) {
		s->errors++;
		return;
	}
	if ((uint64_t)cqe->res < SEND_CHUNK && s->off + (uint64_t)cqe->res < SEND_TOTAL)
		s->shorts++;
	s->off += (uint64_t)cqe->res;
	/* The kernel has let go of it: scribbling now must not reach the peer. */
	memset(s->buf, 0xff, SEND_CHUNK);
}

static void
bigsend_next(struct bigsend *s)
{
	size_t len = SEND_CHUNK;
	cr_op_id id;

	if (len > SEND_TOTAL - s->off)
		len = (size_t)(SEND_TOTAL - s->off);
	ut_fill(s->buf, s->off, len);
	s->busy = true;
	if (len >= 65536)
		s->big++;
	if (++s->sends % 2 == 0) {
		id = cr_io_send(s->fds[0], s->buf, len, bigsend_cb, s);
	} else {
		/* Every other one as a two-part sendmsg. */
		s->iov[0] = (struct iovec){s->buf, len / 3};
		s->iov[1] = (struct iovec){s->buf + len / 3, len - len / 3};
		memset(&s->msg, 0, sizeof(s->msg));
		s->msg.msg_iov = s->iov;
		s->msg.msg_iovlen = 2;
		s->msgs++;
		id = cr_io_sendmsg(s->fds[0], &s->msg, bigsend_cb, s);
	}
	CU_ASSERT_FATAL(id != 0);
}

static int
bigsend_step(void *arg)
{
	struct bigsend *s = arg;

	if (s->busy)
		return 1;
	if (s->errors != 0 || s->off >= SEND_TOTAL) {
		CU_ASSERT_EQUAL(s->errors, 0);
		CU_ASSERT_EQUAL(s->off, SEND_TOTAL);
		if (uio() != NULL && uio()->zc_send && uio()->zc_sendmsg) {
			/* Every send was big enough to go zero-copy; AF_UNIX refuses it. */
			CU_ASSERT(uio()->stats.zc_sends >= s->big);
			if (s->unix_socket) {
				CU_ASSERT(uio()->stats.zc_refused >= s->big);
			} else {
				CU_ASSERT_EQUAL(uio()->stats.zc_refused, 0);
			}
		}
		ut_finish();
		return 1;
	}
	bigsend_next(s);
	return 1;
}

static void
run_bigsend(bool unix_socket)
{
	struct bigsend s = {.unix_socket = unix_socket};

	CU_ASSERT_FATAL((unix_socket ? ut_unix_pair(s.fds) : ut_tcp_pair(s.fds)) == 0);
	s.buf = malloc(SEND_CHUNK);
	CU_ASSERT_FATAL(s.buf != NULL);
	s.r.fd = s.fds[1];
	s.r.want = SEND_TOTAL;
	CU_ASSERT_FATAL(pthread_create(&s.r.t, NULL, reader_main, &s.r) == 0);
	ut_run(bigsend_step, &s);
	shutdown(s.fds[0], SHUT_WR);
	pthread_join(s.r.t, NULL);
	printf("\n    %s: %u sends (%u sendmsg), %u short", unix_socket ? "unix" : "tcp", s.sends,
	       s.msgs, s.shorts);
	CU_ASSERT_EQUAL(s.r.got, SEND_TOTAL);
	CU_ASSERT_EQUAL(s.r.bad, 0);
	free(s.buf);
	close(s.fds[0]);
	close(s.fds[1]);
}

static void
test_send_large_reuse_after_completion(void)
{
	run_bigsend(false);
	run_bigsend(true);
	printf("\n");
}

/* ---- UDP: sendmsg with an address, recvmsg with the source ---- */

struct udp {
	int a, b, phase;
	struct sockaddr_in addr_b, from;
	char out[32], in[64];
	struct iovec iov_out, iov_in;
	struct msghdr m_out, m_in;
	unsigned calls_out, calls_in;
	int32_t res_out, res_in;
};

static void
udp_out_cb(void *ctx, const struct cr_io_cqe *cqe)
{
	struct udp *s = ctx;

	s->calls_out++;
	s->res_out = cqe->res;
}

static void
udp_in_cb(void *ctx, const struct cr_io_cqe *cqe)
{
	struct udp *s = ctx;

	s->calls_in++;
	s->res_in = cqe->res;
}

static int
udp_step(void *arg)
{
	struct udp *s = arg;
	struct sockaddr_in a_addr;
	socklen_t len = sizeof(a_addr);

	switch (s->phase) {
	case 0:
		s->iov_in = (struct iovec){s->in, sizeof(s->in)};
		s->m_in.msg_iov = &s->iov_in;
		s->m_in.msg_iovlen = 1;
		s->m_in.msg_name = &s->from;
		s->m_in.msg_namelen = sizeof(s->from);
		CU_ASSERT_FATAL(cr_io_recvmsg(s->b, &s->m_in, udp_in_cb, s) != 0);
		strcpy(s->out, "datagram");
		s->iov_out = (struct iovec){s->out, 8};
		s->m_out.msg_iov = &s->iov_out;
		s->m_out.msg_iovlen = 1;
		s->m_out.msg_name = &s->addr_b;
		s->m_out.msg_namelen = sizeof(s->addr_b);
		CU_ASSERT_FATAL(cr_io_sendmsg(s->a, &s->m_out, udp_out_cb, s) != 0);
		s->phase = 1;
		break;
	case 1:
		if (s->calls_in == 0 || s->calls_out == 0)
			break;
		CU_ASSERT_EQUAL(s->res_out, 8);
		CU_ASSERT_EQUAL(s->res_in, 8);
		CU_ASSERT_EQUAL(memcmp(s->in, "datagram", 8), 0);
		getsockname(s->a, (struct sockaddr *)&a_addr, &len);
		CU_ASSERT_EQUAL(s->m_in.msg_namelen, sizeof(struct sockaddr_in));
		CU_ASSERT_EQUAL(s->from.sin_port, a_addr.sin_port);
		CU_ASSERT_EQUAL(s->from.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
		ut_finish();
		break;
	}
	return 1;
}

static int
udp_socket(struct sockaddr_in *addr)
{
	socklen_t len = sizeof(*addr);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	*addr = ut_addr(0);
	if (fd < 0 || bind(fd, (struct sockaddr *)addr, sizeof(*addr)) != 0 ||
	    getsockname(fd, (struct sockaddr *)addr, &len) != 0)
		return -1;
	return fd;
}

static void
test_udp_sendmsg_recvmsg(void)
{
	struct udp s = {0};
	struct sockaddr_in a;

	s.a = udp_socket(&a);
	s.b = udp_socket(&s.addr_b);
	CU_ASSERT_FATAL(s.a >= 0 && s.b >= 0);
	ut_run(udp_step, &s);
	CU_ASSERT_EQUAL(s.phase, 1);
	close(s.a);
	close(s.b);
}

/* ---- connect: success, refused, and a deadline that passes ---- */

#define N_FILL 8

struct conn {
	int phase, lfd, full_lfd, fd, fill[N_FILL];
	uint16_t port, closed_port, full_port;
	unsigned calls;
	int32_t res;
	uint64_t t0;
};

static void
connect_cb(void *ctx, const struct cr_io_cqe *cqe)
{
	struct conn *s = ctx;

	s->calls++;
	s->res = cqe->res;
}

static int
nb_socket(void)
{
	return socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

static void
start_connect(struct conn *s, uint16_t port, uint64_t timeout_ns)
{
	struct sockaddr_in a = ut_addr(port);

	s->calls = 0;
	s->fd = nb_socket();
	CU_ASSERT_FATAL(s->fd >= 0);
	s->t0 = cr_now_ns();
	CU_ASSERT_FATAL(cr_io_connect(s->fd, (struct sockaddr *)&a, sizeof(a), timeout_ns,
				      connect_cb, s) != 0);
}

static int
connect_step(void *arg)
{
	struct conn *s = arg;
	int i;

	switch (s->phase) {
	case 0:
		start_connect(s, s->port, 5000 * UT_MS);
		s->phase = 1;
		break;
	case 1:
		if (s->calls == 0)
			break;
		CU_ASSERT_EQUAL(s->calls, 1);
		CU_ASSERT_EQUAL(s->res, 0);
		close(s->fd);
		start_connect(s, s->closed_port, 0);
		s->phase = 2;
		break;
	case 2:
		if (s->calls == 0)
			break;
		CU_ASSERT_EQUAL(s->res, -ECONNREFUSED);
		close(s->fd);
		/* Fill the accept queue (nobody accepts): further SYNs are dropped. */
		for (i = 0; i < N_FILL; i++) {
			struct sockaddr_in a = ut_addr(s->full_port);

			s->fill[i] = nb_socket();
			if (s->fill[i] >= 0)
				connect(s->fill[i], (struct sockaddr *)&a, sizeof(a));
		}
		s->t0 = cr_now_ns();
		s->phase = 3;
		break;
	case 3:
		if (cr_now_ns() - s->t0 < 50 * UT_MS)
			break;
		start_connect(s, s->full_port, 100 * UT_MS);
		s->phase = 4;
		break;
	case 4:
		if (s->calls == 0)
			break;
		CU_ASSERT_EQUAL(s->calls, 1);
		CU_ASSERT_EQUAL(s->res, -ETIMEDOUT);
		CU_ASSERT(cr_now_ns() - s->t0 >= 99 * UT_MS);
		CU_ASSERT_EQUAL(cr_io_inflight(), 0);
		close(s->fd);
		ut_finish();
		break;
	}
	return 1;
}

static void
test_connect_refused_and_deadline(void)
{
	struct conn s = {0};
	int fd;

	s.lfd = ut_listen(&s.port, 4);
	s.full_lfd = ut_listen(&s.full_port, 0);
	/* A port nobody listens on: bound once, then closed. */
	fd = ut_listen(&s.closed_port, 1);
	CU_ASSERT_FATAL(s.lfd >= 0 && s.full_lfd >= 0 && fd >= 0);
	close(fd);
	ut_run(connect_step, &s);
	CU_ASSERT_EQUAL(s.phase, 4);
	for (int i = 0; i < N_FILL; i++)
		if (s.fill[i] > 0)
			close(s.fill[i]);
	close(s.lfd);
	close(s.full_lfd);
}

/* ---- receive buffers run out: the recv waits, no byte lost or reordered ---- */

#define NOBUF_LEN (3ull * CR_IO_BUFS * CR_IO_BUF_SIZE)

struct nob {
	int fds[2], phase;
	cr_op_id id;
	uint64_t got, full_since, last;
	unsigned finals, bad, rounds;
	int32_t final_res;
	uint32_t held[CR_IO_BUFS];
	unsigned n_held;
	bool hold;
	struct writer w;
};

static void
nob_cb(void *ctx, const struct cr_io_cqe *cqe)
{
	struct nob *s = ctx;

	if (cqe->flags & CR_IO_F_BUFFER) {
		if (!data_ok(cqe, s->got))
			s->bad++;
		if (cqe->res > 0)
			s->got += (uint64_t)cqe->res;
		s->last = cr_now_ns();
		if (s->hold && s->n_held < CR_IO_BUFS)
			s->held[s->n_held++] = cqe->buf_id;
		else
			cr_io_buf_release(cqe->buf_id);
	}
	if (!(cqe->flags & CR_IO_F_MORE)) {
		s->finals++;
		s->final_res = cqe->res;
	}
}

static void
release_held(struct nob *s)
{
	while (s->n_held != 0)
		cr_io_buf_release(s->held[--s->n_held]);
}

static int
nob_step(void *arg)
{
	struct nob *s = arg;
	uint64_t now = cr_now_ns();

	switch (s->phase) {
	case 0:
		s->hold = true;
		s->id = cr_io_recv(s->fds[0], nob_cb, s);
		CU_ASSERT_FATAL(s->id != 0);
		writer_start(&s->w, s->fds[1], NOBUF_LEN, 5);
		s->phase = 1;
		break;
	case 1:
		/* Hold every buffer for a while (the recv runs dry), then give them all back. */
		if (s->n_held == CR_IO_BUFS) {
			if (s->full_since == 0)
				s->full_since = now;
			if (now - s->full_since >= 10 * UT_MS) {
				s->rounds++;
				s->full_since = 0;
				release_held(s);
			}
		} else if (s->n_held != 0 && now - s->last > 20 * UT_MS) {
			release_held(s); /* the writer is done or slow */
		}
		if (s->finals == 0)
			break;
		release_held(s);
		CU_ASSERT_EQUAL(s->finals, 1);
		CU_ASSERT_EQUAL(s->final_res, 0);
		CU_ASSERT_EQUAL(s->got, NOBUF_LEN);
		CU_ASSERT_EQUAL(s->bad, 0);
		CU_ASSERT(s->rounds >= 1);
		if (uio() != NULL) {
			printf("\n    uring: %llu ENOBUFS parks, %llu re-arms, %u hold rounds\n",
			       (unsigned long long)uio()->stats.enobufs,
			       (unsigned long long)uio()->stats.rearms, s->rounds);
			CU_ASSERT(uio()->stats.enobufs > 0);
			CU_ASSERT_EQUAL(uio()->bufs_lent, 0);
		}
		ut_finish();
		break;
	}
	return 1;
}

static void
test_buffers_run_out_no_loss(void)
{
	struct nob *s = calloc(1, sizeof(*s));

	CU_ASSERT_FATAL(s != NULL && ut_tcp_pair(s->fds) == 0);
	ut_run(nob_step, s);
	if (s->phase >= 1)
		pthread_join(s->w.t, NULL);
	CU_ASSERT_EQUAL(s->w.err, 0);
	close(s->fds[0]);
	close(s->fds[1]);
	free(s);
}

/* A second recv that waits for buffers can be cancelled; its data stays in the socket. */
struct parked {
	struct nob a;
	int b[2];
	cr_op_id idb;
	unsigned b_calls, b_data;
	int32_t b_res;
	uint64_t t;
};

static void
parked_b_cb(void *ctx, const struct cr_io_cqe *cqe)
{
	struct parked *s = ctx;

	s->b_calls++;
	s->b_res = cqe->res;
	if (cqe->flags & CR_IO_F_BUFFER) {
		s->b_data++;
		cr_io_buf_release(cqe->buf_id);
	}
}

static int
parked_step(void *arg)
{
	struct parked *s = arg;
	char got[2048];

	switch (s->a.phase) {
	case 0:
		s->a.hold = true;
		s->a.id = cr_io_recv(s->a.fds[0], nob_cb, &s->a);
		CU_ASSERT_FATAL(s->a.id != 0);
		writer_start(&s->a.w, s->a.fds[1], (CR_IO_BUFS + 256ull) * CR_IO_BUF_SIZE, 9);
		s->a.phase = 1;
		break;
	case 1:
		if (s->a.n_held < CR_IO_BUFS)
			break;
		/* Every buffer is lent out: B's data has nowhere to go. */
		memset(got, 0x5a, sizeof(got));
		CU_ASSERT_EQUAL(send(s->b[1], got, 1000, 0), 1000);
		s->idb = cr_io_recv(s->b[0], parked_b_cb, s);
		CU_ASSERT_FATAL(s->idb != 0);
		s->t = cr_now_ns();
		s->a.phase = 2;
		break;
	case 2:
		/* On io_uring: until both recvs wait for buffers; elsewhere a while. */
		if (uio() != NULL ? uio()->n_parked < 2 : cr_now_ns() - s->t < 20 * UT_MS)
			break;
		CU_ASSERT_EQUAL(s->b_calls, 0);
		CU_ASSERT_EQUAL(cr_io_cancel(s->idb), 0);
		s->a.phase = 3;
		break;
	case 3:
		if (s->b_calls == 0)
			break;
		CU_ASSERT_EQUAL(s->b_calls, 1);
		CU_ASSERT_EQUAL(s->b_data, 0);
		CU_ASSERT_EQUAL(s->b_res, -ECANCELED);
		CU_ASSERT_EQUAL(recv(s->b[0], got, sizeof(got), MSG_DONTWAIT), 1000);
		/* A gets its buffers back and goes on to EOF. */
		s->a.hold = false;
		release_held(&s->a);
		s->a.phase = 4;
		break;
	case 4:
		if (s->a.finals == 0)
			break;
		CU_ASSERT_EQUAL(s->a.final_res, 0);
		CU_ASSERT_EQUAL(s->a.got, (CR_IO_BUFS + 256ull) * CR_IO_BUF_SIZE);
		CU_ASSERT_EQUAL(s->a.bad, 0);
		CU_ASSERT_EQUAL(cr_io_inflight(), 0);
		ut_finish();
		break;
	}
	return 1;
}

static void
test_cancel_recv_waiting_for_buffers(void)
{
	struct parked *s = calloc(1, sizeof(*s));

	CU_ASSERT_FATAL(s != NULL && ut_tcp_pair(s->a.fds) == 0 && ut_tcp_pair(s->b) == 0);
	ut_run(parked_step, s);
	CU_ASSERT_EQUAL(s->a.phase, 4);
	if (s->a.phase >= 1)
		pthread_join(s->a.w.t, NULL);
	close(s->a.fds[0]);
	close(s->a.fds[1]);
	close(s->b[0]);
	close(s->b[1]);
	free(s);
}

/*
 * A recv that waits for buffers is re-armed when they come back even if every poll is
 * busy: here each turn has more completions ready (writes to /dev/null) than one poll
 * takes. The driver once re-armed waiting recvs only in a poll that had budget left, so a
 * connection could wait for as long as others kept the completion queue full (cr-kv's
 * hostile mix: 5 s with INCR floods and 8 MiB SETs).
 */
#define BUSY_OPS  (2 * CR_BATCH)
#define BUSY_TURNS 200

struct busy {
	struct parked p;
	int null_fd;
	unsigned outstanding, turns;
	uint64_t rearms_before;
};

static void
busy_write_cb(void *ctx, const struct cr_io_cqe *cqe)
{
	struct busy *s = ctx;

	CU_ASSERT_EQUAL(cqe->res, 1);
	s->outstanding--;
}

static void
busy_top_up(struct busy *s)
{
	while (s->outstanding < BUSY_OPS) {
		CU_ASSERT_FATAL(cr_io_write(s->null_fd, "x", 1, 0, busy_write_cb, s) != 0);
		s->outstanding++;
	}
}

static int
busy_step(void *arg)
{
	struct busy *s = arg;
	struct parked *p = &s->p;
	char got[1000];

	switch (p->a.phase) {
	case 0:
		p->a.hold = true;
		p->a.id = cr_io_recv(p->a.fds[0], nob_cb, &p->a);
		CU_ASSERT_FATAL(p->a.id != 0);
		writer_start(&p->a.w, p->a.fds[1], (CR_IO_BUFS + 256ull) * CR_IO_BUF_SIZE, 11);
		p->a.phase = 1;
		break;
	case 1:
		if (p->a.n_held < CR_IO_BUFS)
			break;
		memset(got, 0x5a, sizeof(got));
		CU_ASSERT_EQUAL(send(p->b[1], got, sizeof(got), 0), (ssize_t)sizeof(got));
		p->idb = cr_io_recv(p->b[0], parked_b_cb, p);
		CU_ASSERT_FATAL(p->idb != 0);
		p->t = cr_now_ns();
		p->a.phase = 2;
		break;
	case 2:
		if (uio() != NULL ? uio()->n_parked < 2 : cr_now_ns() - p->t < 20 * UT_MS)
			break;
		CU_ASSERT_EQUAL(p->b_data, 0);
		/* From now on every poll finds a full batch of completions. */
		busy_top_up(s);
		if (uio() != NULL)
			s->rearms_before = uio()->stats.rearms;
		p->a.hold = false;
		release_held(&p->a);
		p->a.phase = 3;
		break;
	case 3:
		busy_top_up(s);
		if (p->b_data == 0 && ++s->turns < BUSY_TURNS)
			break;
		CU_ASSERT(p->b_data > 0);
		CU_ASSERT(s->turns < BUSY_TURNS);
		if (uio() != NULL)
			CU_ASSERT(uio()->stats.rearms > s->rearms_before);
		CU_ASSERT_EQUAL(cr_io_cancel(p->idb), 0);
		p->a.phase = 4;
		break;
	case 4:
		if (p->a.finals == 0 || p->b_res != -ECANCELED || s->outstanding != 0)
			break;
		CU_ASSERT_EQUAL(p->a.final_res, 0);
		CU_ASSERT_EQUAL(p->a.got, (CR_IO_BUFS + 256ull) * CR_IO_BUF_SIZE);
		CU_ASSERT_EQUAL(p->a.bad, 0);
		CU_ASSERT_EQUAL(cr_io_inflight(), 0);
		ut_finish();
		break;
	}
	return 1;
}

static void
test_parked_recv_rearmed_when_busy(void)
{
	struct busy *s = calloc(1, sizeof(*s));

	CU_ASSERT_FATAL(s != NULL && ut_tcp_pair(s->p.a.fds) == 0 && ut_tcp_pair(s->p.b) == 0);
	s->null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	CU_ASSERT_FATAL(s->null_fd >= 0);
	ut_run(busy_step, s);
	CU_ASSERT_EQUAL(s->p.a.phase, 4);
	if (s->p.a.phase >= 1)
		pthread_join(s->p.a.w.t, NULL);
	close(s->p.a.fds[0]);
	close(s->p.a.fds[1]);
	close(s->p.b[0]);
	close(s->p.b[1]);
	close(s->null_fd);
	free(s);
}

/* ---- stopping with ops in flight: lib/io retires them all, the next run starts clean ---- */

struct stopl {
	struct nob a; /* holds every buffer and never gives them back */
	int b[2], c[2];
	unsigned calls;
	cr_op_id ids[3];
};

static void
stop_cb(void *ctx, const struct cr_io_cqe *cqe)
{
	struct stopl *s = ctx;

	s->calls++;
	if (cqe->flags & CR_IO_F_BUFFER)
		cr_io_buf_release(cqe->buf_id);
}

static int
stop_step(void *arg)
{
	struct stopl *s = arg;
	static char data[128 << 10];

	switch (s->a.phase) {
	case 0:
		s->a.hold = true;
		s->a.id = cr_io_recv(s->a.fds[0], nob_cb, &s->a);
		CU_ASSERT_FATAL(s->a.id != 0);
		writer_start(&s->a.w, s->a.fds[1], (CR_IO_BUFS + 256ull) * CR_IO_BUF_SIZE, 13);
		s->a.phase = 1;
		break;
	case 1:
		if (s->a.n_held < CR_IO_BUFS)
			break;
		/* A recv with data but no buffer, and two sends blocked, one zero-copy. */
		memset(data, 1, sizeof(data));
		CU_ASSERT_EQUAL(send(s->b[1], data, 1000, 0), 1000);
		s->ids[0] = cr_io_recv(s->b[0], stop_cb, s);
		fill_socket(s->c[0]);
		s->ids[1] = cr_io_send(s->c[0], data, 1000, stop_cb, s);
		s->ids[2] = cr_io_send(s->c[0], data, sizeof(data), stop_cb, s);
		CU_ASSERT(s->ids[0] && s->ids[1] && s->ids[2]);
		s->a.phase = 2;
		break;
	case 2:
		/* Leave everything as it is: no cancel, buffers still lent out. A graceful stop
		 * would wait for these ops (up to --shutdown-timeout); force it. */
		if (s->calls != 0)
			CU_FAIL("an op completed before the stop");
		cr_shutdown_force();
		ut_finish();
		break;
	}
	return 1;
}

static void
test_stop_with_ops_in_flight(void)
{
	struct stopl *s = calloc(1, sizeof(*s));
	uint64_t t0;

	CU_ASSERT_FATAL(s != NULL && ut_tcp_pair(s->a.fds) == 0 && ut_unix_pair(s->b) == 0 &&
			small_tcp_pair(s->c) == 0);
	t0 = ut_mono_ns();
	ut_run(stop_step, s);
	CU_ASSERT(ut_mono_ns() - t0 < 5000 * UT_MS); /* lib/io gives up (aborts) at 10 s */
	CU_ASSERT_EQUAL(s->a.phase, 2);
	CU_ASSERT_EQUAL(s->calls, 0);
	/* The writer is blocked on a socket nobody reads: closing it lets the thread end. */
	close(s->a.fds[0]);
	if (s->a.phase >= 1)
		pthread_join(s->a.w.t, NULL);
	close(s->a.fds[1]);
	for (int i = 0; i < 2; i++) {
		close(s->b[i]);
		close(s->c[i]);
	}
	free(s);
	/* A fresh start on the same lcores: buffers and ring set up anew. */
	test_recv_stream();
}

/* ---- a burst into a tiny CQ: it overflows, nothing is lost ---- */

#define OVF_STREAM  (2ull << 20)
#define OVF_CONN    32
#define OVF_SENDS   64
#define OVF_ROUNDS  10
#define OVF_SENDLEN 100

struct ovf {
	struct strm rx;	 /* multishot recv of a stream */
	struct acc acc;	 /* multishot accept */
	int p2[2], phase;
	unsigned round, send_calls[OVF_SENDS * OVF_ROUNDS], sends_done, sends_bad;
	uint64_t drained;
	char payload[OVF_SENDLEN];
};

static struct ovf *ovf_state;

static void
ovf_send_cb(void *ctx, const struct cr_io_cqe *cqe)
{
	unsigned i = (unsigned)(uintptr_t)ctx;

	if (ovf_state->send_calls[i]++ != 0 || cqe->res != OVF_SENDLEN)
		ovf_state->sends_bad++;
	ovf_state->sends_done++;
}

static int
ovf_step(void *arg)
{
	struct ovf *s = arg;
	char buf[65536];
	ssize_t k;
	unsigned i;

	while ((k = recv(s->p2[1], buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		s->drained += (uint64_t)k;
	switch (s->phase) {
	case 0:
		s->rx.id = cr_io_recv(s->rx.fds[0], stream_cb, &s->rx);
		s->acc.id = cr_io_accept(s->acc.lfd, accept_cb, &s->acc);
		CU_ASSERT_FATAL(s->rx.id != 0 && s->acc.id != 0);
		writer_start(&s->rx.w, s->rx.fds[1], OVF_STREAM, 3);
		CU_ASSERT_EQUAL(pthread_create(&s->acc.t, NULL, connector_main, &s->acc), 0);
		s->phase = 1;
		break;
	case 1:
		/* A burst of sends each round, many more completions than the CQ holds. */
		if (s->round < OVF_ROUNDS) {
			for (i = 0; i < OVF_SENDS; i++) {
				unsigned n = s->round * OVF_SENDS + i;

				CU_ASSERT(cr_io_send(s->p2[0], s->payload, OVF_SENDLEN, ovf_send_cb,
						     (void *)(uintptr_t)n) != 0);
			}
			s->round++;
		}
		if (s->sends_done < OVF_SENDS * OVF_ROUNDS || s->acc.accepted < N_CONN ||
		    s->rx.finals == 0)
			break;
		CU_ASSERT_EQUAL(cr_io_cancel(s->acc.id), 0);
		s->phase = 2;
		break;
	case 2:
		if (s->acc.finals == 0 || s->drained < OVF_SENDS * OVF_ROUNDS * OVF_SENDLEN)
			break;
		CU_ASSERT_EQUAL(s->sends_bad, 0);
		CU_ASSERT_EQUAL(s->drained, OVF_SENDS * OVF_ROUNDS * OVF_SENDLEN);
		CU_ASSERT_EQUAL(s->acc.final_res, -ECANCELED);
		CU_ASSERT_EQUAL(s->acc.accepted, N_CONN);
		CU_ASSERT_EQUAL(s->rx.final_res, 0);
		CU_ASSERT_EQUAL(s->rx.got, OVF_STREAM);
		CU_ASSERT_EQUAL(s->rx.bad, 0);
		CU_ASSERT_EQUAL(cr_io_inflight(), 0);
		if (uio() != NULL) {
			printf("\n    uring: %llu overflowed polls, %llu re-arms\n",
			       (unsigned long long)uio()->stats.cq_overflows,
			       (unsigned long long)uio()->stats.rearms);
			CU_ASSERT(uio()->stats.cq_overflows > 0);
		}
		ut_finish();
		break;
	}
	return 1;
}

static void
test_cq_overflow_tiny_cq(void)
{
	struct ovf *s = calloc(1, sizeof(*s));

	CU_ASSERT_FATAL(s != NULL);
	ovf_state = s;
	CU_ASSERT_FATAL(ut_unix_pair(s->rx.fds) == 0 && ut_unix_pair(s->p2) == 0);
	s->acc.lfd = ut_listen(&s->acc.port, N_CONN);
	CU_ASSERT_FATAL(s->acc.lfd >= 0);
	setenv("CR_URING_CQ_ENTRIES", "4", 1);
	ut_run(ovf_step, s);
	unsetenv("CR_URING_CQ_ENTRIES");
	CU_ASSERT_EQUAL(s->phase, 2);
	if (s->phase >= 1) {
		pthread_join(s->rx.w.t, NULL);
		pthread_join(s->acc.t, NULL);
	}
	for (int i = 0; i < N_CONN; i++)
		if (s->acc.cfds[i] > 0)
			close(s->acc.cfds[i]);
	close(s->acc.lfd);
	close(s->rx.fds[0]);
	close(s->rx.fds[1]);
	close(s->p2[0]);
	close(s->p2[1]);
	free(s);
}

/* ---- destroying connections with ops in flight ---- */

#define N_DCONN	   8
#define DSEND_LEN  (1u << 20)

struct dconn {
	int fd, peer;
	uint8_t *sendbuf;
	uint8_t rbuf[512];
	struct iovec iov;
	struct msghdr msg;
	unsigned refs;
	bool destroyed;
};

static unsigned d_calls_after_destroy, d_freed, d_released, d_early;

static void
dconn_cb(void *ctx, const struct cr_io_cqe *cqe)
{
	struct dconn *c = ctx;

	/* After destroy c is freed: ASan reports this read if it ever happens. */
	if (c->destroyed)
		d_calls_after_destroy++;
	else if (!(cqe->flags & CR_IO_F_MORE))
		d_early++;
	if (cqe->flags & CR_IO_F_BUFFER)
		cr_io_buf_release(cqe->buf_id);
}

static void
dconn_put(void *arg)
{
	struct dconn *c = arg;

	d_released++;
	if (--c->refs != 0)
		return;
	free(c->sendbuf);
	free(c);
	d_freed++;
}

static void
dconn_abandon(struct dconn *c, cr_op_id id)
{
	if (id == 0)
		return;
	c->refs++;
	if (cr_io_abandon(id, dconn_put, c) != 0)
		c->refs--;
}

struct destroy {
	int phase;
	struct dconn *c[N_DCONN];
	cr_op_id ids[N_DCONN][4];
	int peers[N_DCONN];
	unsigned abandoned, abandoned_conn, sends_abandoned;
	uint64_t until;
};

/*
 * A TCP pair with small buffers fixed before the handshake, so the window stays small and
 * autotuning cannot make room later.
 */
static int
small_tcp_pair(int fds[2])
{
	struct sockaddr_in a = ut_addr(0);
	socklen_t len = sizeof(a);
	int small = 4096, lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	fds[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || fds[0] < 0)
		return -1;
	setsockopt(lfd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(lfd, 1) != 0 ||
	    getsockname(lfd, (struct sockaddr *)&a, &len) != 0 ||
	    connect(fds[0], (struct sockaddr *)&a, sizeof(a)) != 0)
		return -1;
	fds[1] = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	close(lfd);
	return fds[1] >= 0 ? 0 : -1;
}

/* Fill the socket until the kernel takes no more, so the next send has to wait. */
static void
fill_socket(int fd)
{
	static char junk[65536];
	bool moved = true;

	/* A round that sends nothing after a pause: the data has stopped moving. */
	for (int round = 0; round < 100 && moved; round++) {
		moved = false;
		for (int i = 0; i < 1024; i++) {
			if (send(fd, junk, sizeof(junk), MSG_DONTWAIT | MSG_NOSIGNAL) <= 0)
				break;
			moved = true;
		}
		ut_sleep_ms(2);
	}
}

static int
destroy_step(void *arg)
{
	struct destroy *s = arg;
	unsigned i;

	switch (s->phase) {
	case 0:
		for (i = 0; i < N_DCONN; i++) {
			struct dconn *c = calloc(1, sizeof(*c));
			int fds[2];

			CU_ASSERT_FATAL(c != NULL && small_tcp_pair(fds) == 0);
			c->fd = fds[0];
			s->peers[i] = fds[1];
			c->sendbuf = malloc(DSEND_LEN);
			CU_ASSERT_FATAL(c->sendbuf != NULL);
			c->iov = (struct iovec){c->rbuf, sizeof(c->rbuf)};
			c->msg.msg_iov = &c->iov;
			c->msg.msg_iovlen = 1;
			fill_socket(c->fd);
			s->ids[i][0] = cr_io_recv(c->fd, dconn_cb, c);
			s->ids[i][1] = cr_io_recvmsg(c->fd, &c->msg, dconn_cb, c);
			/* One plain send and one large enough to go zero-copy, both blocked. */
			s->ids[i][2] = cr_io_send(c->fd, c->sendbuf, 1000, dconn_cb, c);
			s->ids[i][3] = cr_io_send(c->fd, c->sendbuf, DSEND_LEN, dconn_cb, c);
			CU_ASSERT(s->ids[i][0] && s->ids[i][1] && s->ids[i][2] && s->ids[i][3]);
			c->refs = 1;
			s->c[i] = c;
		}
		s->until = cr_now_ns() + 10 * UT_MS;
		s->phase = 1;
		break;
	case 1:
		if (cr_now_ns() < s->until)
			break;
		/* The recvs wait for data nobody sends; the sends, as a rule, for room. */
		CU_ASSERT_EQUAL(cr_io_inflight() + d_early, N_DCONN * 4);
		/* Destroy: abandon every live op, close the socket, drop the owner's reference. */
		for (i = 0; i < N_DCONN; i++) {
			struct dconn *c = s->c[i];

			for (unsigned k = 0; k < 4; k++) {
				dconn_abandon(c, s->ids[i][k]);
				if (k >= 2)
					s->sends_abandoned += c->refs - 1 - s->abandoned_conn;
				s->abandoned_conn = c->refs - 1;
			}
			s->abandoned_conn = 0;
			s->abandoned += c->refs - 1;
			c->destroyed = true;
			close(c->fd);
			dconn_put(c);
			s->c[i] = NULL;
		}
		CU_ASSERT_EQUAL(s->abandoned + d_early, N_DCONN * 4);
		CU_ASSERT(s->abandoned >= N_DCONN * 2); /* every recv */
		CU_ASSERT(s->sends_abandoned > 0);
		CU_ASSERT_EQUAL(d_freed, 0); /* every op still holds its reference */
		/* The peers talk and hang up meanwhile: nothing may reach the dead owners. */
		for (i = 0; i < N_DCONN; i++) {
			send(s->peers[i], "late", 4, MSG_NOSIGNAL | MSG_DONTWAIT);
			close(s->peers[i]);
		}
		s->phase = 2;
		break;
	case 2:
		if (d_freed < N_DCONN)
			break;
		s->until = cr_now_ns() + 20 * UT_MS;
		s->phase = 3;
		break;
	case 3:
		if (cr_now_ns() < s->until)
			break;
		CU_ASSERT_EQUAL(d_calls_after_destroy, 0);
		CU_ASSERT_EQUAL(d_released, s->abandoned + N_DCONN);
		if (d_early != 0)
			printf("\n    %u sends completed before the destroy\n", d_early);
		CU_ASSERT_EQUAL(cr_io_inflight(), 0);
		if (uio() != NULL)
			CU_ASSERT_EQUAL(uio()->bufs_lent, 0);
		ut_finish();
		break;
	}
	return 1;
}

static void
test_destroy_with_ops_in_flight(void)
{
	struct destroy s = {0};

	d_calls_after_destroy = d_freed = d_released = d_early = 0;
	ut_run(destroy_step, &s);
	CU_ASSERT_EQUAL(s.phase, 3);
	CU_ASSERT_EQUAL(d_freed, N_DCONN);
}

/* ---- the peer resets mid-send: -ECONNRESET / -EPIPE, never SIGPIPE ---- */

#define RST_CHUNK (1u << 20)
#define RST_READ  (256u << 10)
#define RST_LIMIT (512ull << 20)

struct rst {
	int fds[2], phase;
	uint8_t *buf;
	uint64_t sent;
	unsigned sends, shorts;
	int32_t err, err_after;
	bool busy;
	pthread_t t;
	uint64_t peer_read;
};

static void *
rst_peer(void *arg)
{
	struct rst *s = arg;
	struct linger lg = {1, 0};
	char buf[16384];

	while (s->peer_read < RST_READ) {
		ssize_t k = recv(s->fds[1], buf, sizeof(buf), 0);

		if (k <= 0)
			break;
		s->peer_read += (uint64_t)k;
	}
	/* Linger 0: close sends a RST with unread data still queued. */
	setsockopt(s->fds[1], SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(s->fds[1]);
	return NULL;
}

static void
rst_cb(void *ctx, const struct cr_io_cqe *cqe)
{
	struct rst *s = ctx;

	s->busy = false;
	if (cqe->res < 0) {
		if (s->err == 0)
			s->err = cqe->res;
		else
			s->err_after = cqe->res;
		return;
	}
	if ((uint32_t)cqe->res < RST_CHUNK)
		s->shorts++;
	s->sent += (uint64_t)cqe->res;
}

static int
rst_step(void *arg)
{
	struct rst *s = arg;

	if (s->phase == 0) {
		CU_ASSERT_EQUAL(pthread_create(&s->t, NULL, rst_peer, s), 0);
		s->phase = 1;
	}
	if (s->busy)
		return 1;
	if (s->err_after != 0 || s->sent > RST_LIMIT) {
		printf("\n    %u sends, %u short, %llu bytes before %s, then %s\n", s->sends,
		       s->shorts, (unsigned long long)s->sent, strerror(-s->err),
		       strerror(-s->err_after));
		CU_ASSERT(s->err == -ECONNRESET || s->err == -EPIPE);
		CU_ASSERT(s->err_after == -EPIPE || s->err_after == -ECONNRESET);
		CU_ASSERT(s->sent <= RST_LIMIT);
		ut_finish();
		return 1;
	}
	/* Keep sending; after the first error, once more to see the dead socket's answer. */
	s->busy = true;
	s->sends++;
	CU_ASSERT_FATAL(cr_io_send(s->fds[0], s->buf, RST_CHUNK, rst_cb, s) != 0);
	return 1;
}

static void
test_peer_reset_mid_send(void)
{
	struct rst s = {0};

	CU_ASSERT_FATAL(ut_tcp_pair(s.fds) == 0);
	s.buf = calloc(1, RST_CHUNK);
	CU_ASSERT_FATAL(s.buf != NULL);
	ut_run(rst_step, &s);
	if (s.phase >= 1)
		pthread_join(s.t, NULL);
	CU_ASSERT(s.peer_read >= RST_READ);
	close(s.fds[0]);
	free(s.buf);
}

/* ---- cancel racing completion: exactly one outcome per op, no byte lost ---- */

#define RACE_ITERS 10000
#define RACE_MODES 5

struct race {
	int sv[2], phase;
	unsigned iter, mode;
	uint64_t seed;
	cr_op_id id;
	struct iovec iov;
	struct msghdr msg;
	uint8_t rbuf[64];
	/* the current op */
	unsigned calls, finals;
	int32_t res;
	/* totals */
	unsigned stray, bad, outcome[2];
	uint64_t written, received, sent, drained0, drained1;
	/* a foreign thread writing into the same socket meanwhile */
	pthread_t t;
	_Atomic bool stop;
	_Atomic uint64_t fwritten;
};

static void *
race_writer(void *arg)
{
	struct race *s = arg;

	/* Bounded: at most ~2 s of writes at one byte per 50 us. */
	for (int i = 0; i < 40000 && !atomic_load(&s->stop); i++) {
		struct timespec ts = {0, 50000};

		if (send(s->sv[1], "f", 1, MSG_NOSIGNAL) == 1)
			atomic_fetch_add(&s->fwritten, 1);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static struct race *race_state;

static void
race_cb(void *ctx, const struct cr_io_cqe *cqe)
{
	struct race *s = race_state;
	unsigned iter = (unsigned)(uintptr_t)ctx;

	if (iter != s->iter || s->finals != 0) {
		s->stray++; /* a callback for an op that already had its outcome */
		return;
	}
	s->calls++;
	if (cqe->flags & CR_IO_F_BUFFER) {
		s->received += (uint64_t)cqe->res;
		cr_io_buf_release(cqe->buf_id);
	}
	if (!(cqe->flags & CR_IO_F_MORE)) {
		s->finals++;
		s->res = cqe->res;
	}
}

static void
race_start(struct race *s)
{
	void *ctx = (void *)(uintptr_t)s->iter;

	s->mode = (unsigned)(ut_rand(&s->seed) % RACE_MODES);
	s->calls = s->finals = 0;
	switch (s->mode) {
	case 0: /* data already there: the result usually wins */
		if (send(s->sv[1], "d", 1, MSG_NOSIGNAL) == 1)
			s->written++;
		/* fall through */
	case 1: /* nothing there: the cancel usually wins */
	case 2: /* cancelled a turn later, racing the foreign writer */
		s->iov = (struct iovec){s->rbuf, 1 + ut_rand(&s->seed) % sizeof(s->rbuf)};
		memset(&s->msg, 0, sizeof(s->msg));
		s->msg.msg_iov = &s->iov;
		s->msg.msg_iovlen = 1;
		s->id = cr_io_recvmsg(s->sv[0], &s->msg, race_cb, ctx);
		break;
	case 3: /* multishot: data, then cancel a turn later */
		s->id = cr_io_recv(s->sv[0], race_cb, ctx);
		if (send(s->sv[1], "mm", 2, MSG_NOSIGNAL) == 2)
			s->written += 2;
		break;
	case 4: /* a send and its cancel in one submission */
		s->id = cr_io_send(s->sv[0], "s", 1, race_cb, ctx);
		break;
	}
	CU_ASSERT_FATAL(s->id != 0);
	if (s->mode == 0 || s->mode == 1 || s->mode == 4)
		CU_ASSERT_EQUAL(cr_io_cancel(s->id), 0);
}

static void
race_check(struct race *s)
{
	bool cancelled = s->res == -ECANCELED;

	s->outcome[cancelled]++;
	switch (s->mode) {
	case 0:
	case 1:
	case 2:
		if (!cancelled && (s->res <= 0 || s->calls != 1))
			s->bad++;
		if (s->res > 0)
			s->received += (uint64_t)s->res;
		break;
	case 3:
		if (!cancelled)
			s->bad++;
		break;
	case 4:
		if (!cancelled && s->res != 1)
			s->bad++;
		if (s->res == 1)
			s->sent++;
		break;
	}
}

static uint64_t
drain(int fd)
{
	char buf[4096];
	uint64_t n = 0;
	ssize_t k;

	while ((k = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		n += (uint64_t)k;
	return n;
}

static int
race_step(void *arg)
{
	struct race *s = arg;

	switch (s->phase) {
	case 0:
		CU_ASSERT_EQUAL(pthread_create(&s->t, NULL, race_writer, s), 0);
		race_start(s);
		s->phase = 1;
		break;
	case 1:
		if (s->finals == 0) {
			if (s->mode == 2 || s->mode == 3)
				cr_io_cancel(s->id); /* 0, or -ENOENT once it has completed */
			break;
		}
		race_check(s);
		s->drained1 += drain(s->sv[1]); /* what the sends delivered */
		if (++s->iter < RACE_ITERS) {
			race_start(s);
			break;
		}
		atomic_store(&s->stop, true);
		s->phase = 2;
		break;
	case 2:
		/* The writer may still be mid-send: it is joined after the run. */
		CU_ASSERT_EQUAL(s->stray, 0);
		CU_ASSERT_EQUAL(s->bad, 0);
		CU_ASSERT_EQUAL(cr_io_inflight(), 0);
		printf("\n    %u results, %u cancelled\n", s->outcome[0], s->outcome[1]);
		CU_ASSERT(s->outcome[0] > 0 && s->outcome[1] > 0);
		ut_finish();
		break;
	}
	return 1;
}

static void
test_cancel_races_completion(void)
{
	struct race *s = calloc(1, sizeof(*s));

	CU_ASSERT_FATAL(s != NULL && ut_unix_pair(s->sv) == 0);
	s->seed = 0x5eed;
	race_state = s;
	ut_run(race_step, s);
	atomic_store(&s->stop, true);
	if (s->phase >= 1)
		pthread_join(s->t, NULL);
	CU_ASSERT_EQUAL(s->phase, 2);
	/* Every byte written is either received by an op or still in the socket. */
	s->drained0 = drain(s->sv[0]);
	s->drained1 += drain(s->sv[1]);
	CU_ASSERT_EQUAL(s->written + atomic_load(&s->fwritten), s->received + s->drained0);
	CU_ASSERT_EQUAL(s->sent, s->drained1);
	close(s->sv[0]);
	close(s->sv[1]);
	free(s);
}

static const struct ut_case cases[] = {
	UT_CASE(test_accept_multishot),
	UT_CASE(test_recv_stream),
	UT_CASE(test_send_large_reuse_after_completion),
	UT_CASE(test_udp_sendmsg_recvmsg),
	UT_CASE(test_connect_refused_and_deadline),
	UT_CASE(test_buffers_run_out_no_loss),
	UT_CASE(test_cancel_recv_waiting_for_buffers),
	UT_CASE(test_parked_recv_rearmed_when_busy),
	UT_CASE(test_stop_with_ops_in_flight),
	UT_CASE(test_cq_overflow_tiny_cq),
	UT_CASE(test_destroy_with_ops_in_flight),
	UT_CASE(test_peer_reset_mid_send),
	UT_CASE(test_cancel_races_completion),
};

static int
sock_setup(void)
{
	/* Zero-copy from 64 KiB whatever the build's default, so those paths always run. */
	setenv("CR_URING_ZC_THRESHOLD", "65536", 1);
	return ut_rt_setup();
}

UT_MAIN("io_sock", cases, sock_setup, NULL)
