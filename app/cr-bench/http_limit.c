/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cr-bench-http-limit PORT: the limit cr-http is held to in usertools/cr-bench http.
 *
 * A minimal single-threaded HTTP/1.1 responder over liburing on 127.0.0.1:PORT (0: any):
 * multishot accept, multishot recv into a provided buffer ring registered by hand (liburing
 * 2.3 has no io_uring_setup_buf_ring), and one send per recv completion carrying one fixed
 * plaintext response per request terminator ("\r\n\r\n") in the bytes received. No parsing
 * beyond the terminator: no method, no path, no headers, no body. A terminator split over
 * two recvs is still counted once (a 0-3 byte match carried per connection). Responses of
 * a connection go out in order: while a send is in flight, newer responses wait in a
 * second buffer and leave in one send when it completes.
 *
 * Prints "cr-bench: listening on 127.0.0.1:PORT" once it accepts; runs until killed.
 * Not a server for anything but this benchmark.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define URING_ENTRIES 4096
#define BUF_ENTRIES   4096 /* provided buffers; a power of two */
#define BUF_SIZE      4096
#define BUF_GROUP     0
#define MAX_FD	      65536

/* What nginx and cr-http send for /plaintext, less the changing Date. */
static const char RESPONSE[] = "HTTP/1.1 200 OK\r\n"
			       "Server: L\r\n"
			       "Date: Thu, 01 Jan 2026 00:00:00 GMT\r\n"
			       "Content-Type: text/plain\r\n"
			       "Content-Length: 13\r\n"
			       "\r\n"
			       "Hello, World!";
#define RESPONSE_LEN (sizeof(RESPONSE) - 1)

enum op { OP_ACCEPT = 1, OP_RECV, OP_SEND };

struct obuf {
	char *data;
	size_t len, cap;
};

struct conn {
	struct obuf out[2]; /* out[sending] is in flight, the other fills */
	size_t sent;	    /* of out[sending] */
	unsigned match;	    /* bytes of "\r\n\r\n" matched at the end of the last recv */
	bool open, in_flight, recv_live, sending;
};

static struct io_uring ring;
static struct io_uring_buf_ring *br;
static uint8_t *bufs;
static struct conn *conns;
static int lfd;

static uint64_t
ud(enum op op, int fd)
{
	return (uint64_t)op << 32 | (uint32_t)fd;
}

static struct io_uring_sqe *
get_sqe(void)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

	if (sqe == NULL) {
		io_uring_submit(&ring);
		sqe = io_uring_get_sqe(&ring);
	}
	if (sqe == NULL)
		abort(); /* the submit above emptied the SQ */
	return sqe;
}

static void
arm_accept(void)
{
	struct io_uring_sqe *sqe = get_sqe();

	io_uring_prep_multishot_accept(sqe, lfd, NULL, NULL, SOCK_CLOEXEC);
	io_uring_sqe_set_data64(sqe, ud(OP_ACCEPT, lfd));
}

static void
arm_recv(int fd)
{
	struct io_uring_sqe *sqe = get_sqe();

	io_uring_prep_recv_multishot(sqe, fd, NULL, 0, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = BUF_GROUP;
	io_uring_sqe_set_data64(sqe, ud(OP_RECV, fd));
	conns[fd].recv_live = true;
}

static void
send_out(int fd)
{
	struct conn *c = &conns[fd];
	struct obuf *o = &c->out[c->sending];
	struct io_uring_sqe *sqe = get_sqe();

	io_uring_prep_send(sqe, fd, o->data + c->sent, o->len - c->sent, MSG_NOSIGNAL);
	io_uring_sqe_set_data64(sqe, ud(OP_SEND, fd));
	c->in_flight = true;
}

static void
close_if_idle(int fd)
{
	struct conn *c = &conns[fd];

	if (c->recv_live || c->in_flight)
		return;
	close(fd);
	c->out[0].len = c->out[1].len = 0;
	c->sent = 0;
	c->match = 0;
	c->open = false;
}

/* Count the request terminators in @p[0..@n), carrying a partial match in @c. */
static unsigned
count_requests(struct conn *c, const uint8_t *p, size_t n)
{
	static const char term[4] = {'\r', '\n', '\r', '\n'};
	unsigned m = c->match, reqs = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		if (p[i] == (uint8_t)term[m]) {
			if (++m == 4) {
				reqs++;
				m = 0;
			}
		} else {
			m = p[i] == '\r' ? 1 : 0;
		}
	}
	c->match = m;
	return reqs;
}

static int
queue_responses(struct conn *c, unsigned reqs)
{
	struct obuf *o = &c->out[!c->sending];
	size_t need = o->len + (size_t)reqs * RESPONSE_LEN;
	unsigned i;

	if (need > o->cap) {
		size_t cap = o->cap ? o->cap : 4096;
		char *d;

		while (cap < need)
			cap *= 2;
		d = realloc(o->data, cap);
		if (d == NULL)
			return -ENOMEM;
		o->data = d;
		o->cap = cap;
	}
	for (i = 0; i < reqs; i++, o->len += RESPONSE_LEN)
		memcpy(o->data + o->len, RESPONSE, RESPONSE_LEN);
	return 0;
}

/* The filled buffer becomes the one in flight, if none is. */
static void
flush(int fd)
{
	struct conn *c = &conns[fd];

	if (c->in_flight || c->out[!c->sending].len == 0)
		return;
	c->out[c->sending].len = 0;
	c->sending = !c->sending;
	c->sent = 0;
	send_out(fd);
}

static void
on_recv(int fd, const struct io_uring_cqe *cqe)
{
	struct conn *c = &conns[fd];
	unsigned bid, reqs;

	if (cqe->res > 0 && (cqe->flags & IORING_CQE_F_BUFFER)) {
		bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
		reqs = count_requests(c, bufs + (size_t)bid * BUF_SIZE, (size_t)cqe->res);
		io_uring_buf_ring_add(br, bufs + (size_t)bid * BUF_SIZE, BUF_SIZE,
				      (unsigned short)bid, io_uring_buf_ring_mask(BUF_ENTRIES), 0);
		io_uring_buf_ring_advance(br, 1);
		if (reqs > 0 && queue_responses(c, reqs) == 0)
			flush(fd);
	}
	if (cqe->flags & IORING_CQE_F_MORE)
		return;
	c->recv_live = false;
	if (cqe->res > 0 || cqe->res == -ENOBUFS)
		arm_recv(fd);
	else
		close_if_idle(fd); /* EOF or an error: close once the send is done */
}

static void
on_send(int fd, int res)
{
	struct conn *c = &conns[fd];
	struct obuf *o = &c->out[c->sending];

	c->in_flight = false;
	if (res > 0 && c->sent + (size_t)res < o->len) {
		c->sent += (size_t)res;
		send_out(fd);
		return;
	}
	if (res < 0) { /* the peer went away: drop what waits, the recv side ends */
		c->out[0].len = c->out[1].len = 0;
		close_if_idle(fd);
		return;
	}
	flush(fd);
	close_if_idle(fd); /* if the recv side ended and nothing is left to send */
}

static void
on_cqe(const struct io_uring_cqe *cqe)
{
	enum op op = (enum op)(cqe->user_data >> 32);
	int fd = (int)(uint32_t)cqe->user_data;
	int one = 1;

	switch (op) {
	case OP_ACCEPT:
		if (cqe->res >= 0 && cqe->res < MAX_FD) {
			(void)setsockopt(cqe->res, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			conns[cqe->res].open = true;
			arm_recv(cqe->res);
		} else if (cqe->res >= 0) {
			close(cqe->res);
		}
		if (!(cqe->flags & IORING_CQE_F_MORE))
			arm_accept();
		break;
	case OP_RECV:
		on_recv(fd, cqe);
		break;
	case OP_SEND:
		on_send(fd, cqe->res);
		break;
	}
}

/* Register BUF_ENTRIES buffers of BUF_SIZE as group BUF_GROUP, by hand. */
static int
setup_buf_ring(void)
{
	struct io_uring_buf_reg reg;
	size_t ring_sz = BUF_ENTRIES * sizeof(struct io_uring_buf);
	unsigned i;
	int rc;

	if (posix_memalign((void **)&br, 4096, ring_sz) != 0 ||
	    posix_memalign((void **)&bufs, 4096, (size_t)BUF_ENTRIES * BUF_SIZE) != 0)
		return -ENOMEM;
	memset(br, 0, ring_sz);
	memset(&reg, 0, sizeof(reg));
	reg.ring_addr = (uint64_t)(uintptr_t)br;
	reg.ring_entries = BUF_ENTRIES;
	reg.bgid = BUF_GROUP;
	rc = io_uring_register_buf_ring(&ring, &reg, 0);
	if (rc != 0)
		return rc;
	io_uring_buf_ring_init(br);
	for (i = 0; i < BUF_ENTRIES; i++)
		io_uring_buf_ring_add(br, bufs + (size_t)i * BUF_SIZE, BUF_SIZE, (unsigned short)i,
				      io_uring_buf_ring_mask(BUF_ENTRIES), (int)i);
	io_uring_buf_ring_advance(br, BUF_ENTRIES);
	return 0;
}

static int
setup(unsigned port)
{
	struct io_uring_params p;
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	struct rlimit rl;
	int rc, one = 1;

	/* As many connections as the fd limit allows, up to MAX_FD. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max < MAX_FD ? rl.rlim_max : MAX_FD;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	conns = calloc(MAX_FD, sizeof(*conns));
	if (conns == NULL)
		return -ENOMEM;
	/* The best a single-threaded loop can ask for; older kernels get the plain ring. */
	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
	rc = io_uring_queue_init_params(URING_ENTRIES, &ring, &p);
	if (rc != 0) {
		memset(&p, 0, sizeof(p));
		rc = io_uring_queue_init_params(URING_ENTRIES, &ring, &p);
	}
	if (rc != 0)
		return rc;
	rc = setup_buf_ring();
	if (rc != 0)
		return rc;
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		return -errno;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	(void)setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(lfd, 4096) != 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &len) != 0)
		return -errno;
	printf("cr-bench: listening on 127.0.0.1:%u\n", ntohs(sa.sin_port));
	fflush(stdout);
	return 0;
}

int
main(int argc, char **argv)
{
	struct io_uring_cqe *cqe;
	unsigned head, n;
	unsigned long port;
	char *end;
	int rc;

	if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		printf("usage: cr-bench-http-limit PORT\n"
		       "A minimal liburing HTTP responder on 127.0.0.1:PORT (0: any) for "
		       "usertools/cr-bench:\none fixed 200 \"Hello, World!\" per \\r\\n\\r\\n "
		       "received; no parsing.\n");
		return 0;
	}
	errno = 0;
	port = argc == 2 ? strtoul(argv[1], &end, 10) : 0;
	if (argc != 2 || errno != 0 || end == argv[1] || *end != '\0' || port > 65535 ||
	    argv[1][0] == '-') {
		fprintf(stderr, "cr-bench-http-limit: PORT '%s' invalid; accepted: 0-65535\n",
			argc >= 2 ? argv[1] : "(missing)");
		return 2;
	}
	rc = setup((unsigned)port);
	if (rc != 0) {
		fprintf(stderr, "cr-bench-http-limit: set-up on port %lu: %s\n", port,
			strerror(-rc));
		return 1;
	}
	arm_accept();
	for (;;) {
		rc = io_uring_submit_and_wait(&ring, 1);
		if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
			fprintf(stderr, "cr-bench-http-limit: %s\n", strerror(-rc));
			return 1;
		}
		n = 0;
		io_uring_for_each_cqe(&ring, head, cqe)
		{
			on_cqe(cqe);
			n++;
		}
		io_uring_cq_advance(&ring, n);
	}
}
