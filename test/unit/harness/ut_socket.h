/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Client-side sockets for test threads that are not lcores: loopback TCP listeners and
 * connections, socket pairs, bounded blocking reads and writes, and a line-oriented unix
 * socket client (the telemetry endpoint). Blocking calls carry timeouts or poll first.
 */
#ifndef UT_SOCKET_H
#define UT_SOCKET_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

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
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};

	return a;
}

/* A blocking connect to 127.0.0.1:@p port. */
static inline int
ut_connect_port(uint16_t port)
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
	fds[0] = ut_connect_port(port);
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

/* @p sa for @p path; false if it does not fit. */
static inline bool
ut_sun(struct sockaddr_un *sa, const char *path)
{
	size_t n = path != NULL ? strlen(path) : sizeof(sa->sun_path);

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (n >= sizeof(sa->sun_path))
		return false;
	memcpy(sa->sun_path, path, n + 1);
	return true;
}

static inline int
ut_unix_connect(const char *path)
{
	struct sockaddr_un sa;
	int fd;

	if (!ut_sun(&sa, path))
		return -1;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* Read one line (newline dropped) into @p out within 5 s. @return its length, or -1 on
 * timeout, EOF or overflow. */
static inline ssize_t
ut_read_line(int fd, char *out, size_t cap)
{
	size_t len = 0;

	while (len + 1 < cap) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (poll(&p, 1, 5000) != 1)
			return -1;
		n = recv(fd, out + len, 1, 0);
		if (n <= 0)
			return -1;
		if (out[len] == '\n') {
			out[len] = '\0';
			return (ssize_t)len;
		}
		len++;
	}
	return -1;
}

/* Send @p req (a newline is added) and read the reply line. */
static inline ssize_t
ut_request(int fd, const char *req, char *out, size_t cap)
{
	size_t n = strlen(req);
	char *line = malloc(n + 1);
	ssize_t rc = -1;

	if (line == NULL)
		return -1;
	memcpy(line, req, n);
	line[n] = '\n';
	if (send(fd, line, n + 1, MSG_NOSIGNAL) == (ssize_t)(n + 1))
		rc = ut_read_line(fd, out, cap);
	free(line);
	return rc;
}

/* Whether the peer closed @p fd within 5 s (reading and dropping what is left). */
static inline bool
ut_peer_closed(int fd)
{
	char buf[256];

	for (int i = 0; i < 1000; i++) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (poll(&p, 1, 5000) != 1)
			return false;
		n = recv(fd, buf, sizeof(buf), 0);
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return true;
		if (n < 0)
			return false;
	}
	return false;
}

#endif /* UT_SOCKET_H */
