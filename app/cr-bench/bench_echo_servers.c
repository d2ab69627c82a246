/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The raw peers of the echo mode: two minimal single-threaded TCP echo servers on
 * 127.0.0.1, each run as `cr-bench echo-server-uring|echo-server-epoll PORT` in a process
 * of its own. No parsing: whatever arrives is sent back. Each prints
 * "cr-bench: listening on 127.0.0.1:PORT" once it accepts, then runs until killed.
 *
 * The liburing loop is the limit cr-echo is held to: multishot accept, multishot recv into
 * a provided buffer ring registered by hand (liburing 2.3 has no io_uring_setup_buf_ring),
 * and one send per recv completion straight from the provided buffer, which goes back to
 * the ring when the send is done.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench.h"

#define URING_ENTRIES 4096
#define BUF_ENTRIES   4096 /* provided buffers; a power of two */
#define BUF_SIZE      4096
#define BUF_GROUP     0
#define EPOLL_BATCH   256
#define EPOLL_BUF     65536

/* ---- shared ---- */

/* Listen on 127.0.0.1:@p port (0: any); print the ready line. @return the fd or -errno. */
static int
listen_loopback(unsigned port)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	int fd, one = 1;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 4096) != 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	printf("cr-bench: listening on 127.0.0.1:%u\n", ntohs(sa.sin_port));
	fflush(stdout);
	return fd;
}

static int
parse_port(const char *s, unsigned *port)
{
	unsigned long long v;

	if (s == NULL || cr_parse_uint(s, 0, 65535, &v) != 0) {
		fprintf(stderr, "cr-bench: echo server PORT: '%s' invalid; accepted: 0-65535\n",
			s != NULL ? s : "(missing)");
		return -EINVAL;
	}
	*port = (unsigned)v;
	return 0;
}

static void
set_nodelay(int fd)
{
	int one = 1;

	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* ---- liburing ---- */

enum uring_op { OP_ACCEPT = 1, OP_RECV, OP_SEND };

struct uring_srv {
	struct io_uring ring;
	struct io_uring_buf_ring *br;
	uint8_t *bufs;
	uint32_t sent[BUF_ENTRIES], len[BUF_ENTRIES]; /* per buffer in a send */
	int lfd;
};

static uint64_t
ud(enum uring_op op, unsigned bid, int fd)
{
	return (uint64_t)op << 56 | (uint64_t)bid << 32 | (uint32_t)fd;
}

static struct io_uring_sqe *
get_sqe(struct uring_srv *s)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&s->ring);

	if (sqe == NULL) {
		io_uring_submit(&s->ring);
		sqe = io_uring_get_sqe(&s->ring);
	}
	if (sqe == NULL)
		abort(); /* the submit above emptied the SQ */
	return sqe;
}

static void
arm_accept(struct uring_srv *s)
{
	struct io_uring_sqe *sqe = get_sqe(s);

	io_uring_prep_multishot_accept(sqe, s->lfd, NULL, NULL, SOCK_CLOEXEC);
	io_uring_sqe_set_data64(sqe, ud(OP_ACCEPT, 0, s->lfd));
}

static void
arm_recv(struct uring_srv *s, int fd)
{
	struct io_uring_sqe *sqe = get_sqe(s);

	io_uring_prep_recv_multishot(sqe, fd, NULL, 0, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = BUF_GROUP;
	io_uring_sqe_set_data64(sqe, ud(OP_RECV, 0, fd));
}

static void
send_rest(struct uring_srv *s, int fd, unsigned bid)
{
	struct io_uring_sqe *sqe = get_sqe(s);

	io_uring_prep_send(sqe, fd, s->bufs + (size_t)bid * BUF_SIZE + s->sent[bid],
			   s->len[bid] - s->sent[bid], MSG_NOSIGNAL);
	io_uring_sqe_set_data64(sqe, ud(OP_SEND, bid, fd));
}

static void
recycle(struct uring_srv *s, unsigned bid)
{
	io_uring_buf_ring_add(s->br, s->bufs + (size_t)bid * BUF_SIZE, BUF_SIZE,
			      (unsigned short)bid, io_uring_buf_ring_mask(BUF_ENTRIES), 0);
	io_uring_buf_ring_advance(s->br, 1);
}

static void
on_recv(struct uring_srv *s, int fd, const struct io_uring_cqe *cqe)
{
	unsigned bid;

	if (cqe->res > 0 && (cqe->flags & IORING_CQE_F_BUFFER)) {
		bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
		s->len[bid] = (uint32_t)cqe->res;
		s->sent[bid] = 0;
		send_rest(s, fd, bid);
	}
	if (cqe->flags & IORING_CQE_F_MORE)
		return;
	if (cqe->res > 0 || cqe->res == -ENOBUFS)
		arm_recv(s, fd);
	else
		close(fd); /* EOF or error */
}

static void
on_send(struct uring_srv *s, int fd, unsigned bid, int res)
{
	if (res > 0 && s->sent[bid] + (uint32_t)res < s->len[bid]) {
		s->sent[bid] += (uint32_t)res;
		send_rest(s, fd, bid);
		return;
	}
	recycle(s, bid); /* done, or the peer went away: the recv side closes */
}

static void
on_cqe(struct uring_srv *s, const struct io_uring_cqe *cqe)
{
	enum uring_op op = (enum uring_op)(cqe->user_data >> 56);
	unsigned bid = (unsigned)(cqe->user_data >> 32) & 0xffffu;
	int fd = (int)(uint32_t)cqe->user_data;

	switch (op) {
	case OP_ACCEPT:
		if (cqe->res >= 0) {
			set_nodelay(cqe->res);
			arm_recv(s, cqe->res);
		}
		if (!(cqe->flags & IORING_CQE_F_MORE))
			arm_accept(s);
		break;
	case OP_RECV:
		on_recv(s, fd, cqe);
		break;
	case OP_SEND:
		on_send(s, fd, bid, cqe->res);
		break;
	}
}

/* Register BUF_ENTRIES buffers of BUF_SIZE as group BUF_GROUP, by hand. */
static int
setup_buf_ring(struct uring_srv *s)
{
	struct io_uring_buf_reg reg;
	size_t ring_sz = BUF_ENTRIES * sizeof(struct io_uring_buf);
	unsigned i;
	int rc;

	if (posix_memalign((void **)&s->br, 4096, ring_sz) != 0 ||
	    posix_memalign((void **)&s->bufs, 4096, (size_t)BUF_ENTRIES * BUF_SIZE) != 0)
		return -ENOMEM;
	memset(s->br, 0, ring_sz);
	memset(&reg, 0, sizeof(reg));
	reg.ring_addr = (uint64_t)(uintptr_t)s->br;
	reg.ring_entries = BUF_ENTRIES;
	reg.bgid = BUF_GROUP;
	rc = io_uring_register_buf_ring(&s->ring, &reg, 0);
	if (rc != 0)
		return rc;
	io_uring_buf_ring_init(s->br);
	for (i = 0; i < BUF_ENTRIES; i++)
		io_uring_buf_ring_add(s->br, s->bufs + (size_t)i * BUF_SIZE, BUF_SIZE,
				      (unsigned short)i, io_uring_buf_ring_mask(BUF_ENTRIES),
				      (int)i);
	io_uring_buf_ring_advance(s->br, BUF_ENTRIES);
	return 0;
}

static int
uring_init(struct uring_srv *s)
{
	struct io_uring_params p;
	int rc;

	/* The best a single-threaded loop can ask for; older kernels get the plain ring. */
	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
	rc = io_uring_queue_init_params(URING_ENTRIES, &s->ring, &p);
	if (rc != 0) {
		memset(&p, 0, sizeof(p));
		rc = io_uring_queue_init_params(URING_ENTRIES, &s->ring, &p);
	}
	return rc;
}

int
bench_echo_server_uring(const char *port_s)
{
	static struct uring_srv s;
	struct io_uring_cqe *cqe;
	unsigned port, head, n;
	int rc;

	if (parse_port(port_s, &port) != 0)
		return 2;
	rc = uring_init(&s);
	if (rc == 0)
		rc = setup_buf_ring(&s);
	if (rc == 0) {
		s.lfd = listen_loopback(port);
		rc = s.lfd < 0 ? s.lfd : 0;
	}
	if (rc != 0) {
		fprintf(stderr, "cr-bench: echo-server-uring: set-up: %s\n", cr_strerror(rc));
		return 1;
	}
	arm_accept(&s);
	for (;;) {
		rc = io_uring_submit_and_wait(&s.ring, 1);
		if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
			fprintf(stderr, "cr-bench: echo-server-uring: %s\n", cr_strerror(rc));
			return 1;
		}
		n = 0;
		io_uring_for_each_cqe(&s.ring, head, cqe)
		{
			on_cqe(&s, cqe);
			n++;
		}
		io_uring_cq_advance(&s.ring, n);
	}
}

/* ---- epoll ---- */

static void
epoll_echo(int ep, int fd, uint8_t *buf)
{
	ssize_t n = recv(fd, buf, EPOLL_BUF, 0), off = 0, w;

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
		close(fd);
		return;
	}
	/* One message in flight per connection: the socket buffer takes it. Should it not,
	 * wait for room right here (the minimal loop has no per-connection send queue). */
	while (off < n) {
		w = send(fd, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
		if (w > 0)
			off += w;
		else if (w < 0 && errno != EAGAIN && errno != EINTR)
			return;
	}
}

static void
epoll_accept(int ep, int lfd)
{
	struct epoll_event ev = {.events = EPOLLIN};
	int fd;

	while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		set_nodelay(fd);
		ev.data.fd = fd;
		if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
			close(fd);
	}
}

int
bench_echo_server_epoll(const char *port_s)
{
	static uint8_t buf[EPOLL_BUF];
	struct epoll_event evs[EPOLL_BATCH], ev = {.events = EPOLLIN};
	unsigned port;
	int ep, lfd, n, i;

	if (parse_port(port_s, &port) != 0)
		return 2;
	ep = epoll_create1(EPOLL_CLOEXEC);
	lfd = listen_loopback(port);
	if (ep < 0 || lfd < 0) {
		fprintf(stderr, "cr-bench: echo-server-epoll: set-up: %s\n",
			cr_strerror(lfd < 0 ? lfd : -errno));
		return 1;
	}
	(void)fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) | O_NONBLOCK);
	ev.data.fd = lfd;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) != 0) {
		fprintf(stderr, "cr-bench: echo-server-epoll: epoll_ctl: %s\n",
			cr_strerror(-errno));
		return 1;
	}
	for (;;) {
		n = epoll_wait(ep, evs, EPOLL_BATCH, -1);
		for (i = 0; i < n; i++) {
			if (evs[i].data.fd == lfd)
				epoll_accept(ep, lfd);
			else
				epoll_echo(ep, evs[i].data.fd, buf);
		}
	}
}
