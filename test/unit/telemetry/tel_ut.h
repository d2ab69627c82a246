/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared by the telemetry suites: the real runtime on a thread of its own (so the test's
 * thread is not an lcore, like the telemetry thread), a strict JSON validator, number
 * lookup in a reply, and a unix-socket client. Every wait is bounded.
 */
#ifndef TEL_UT_H
#define TEL_UT_H

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cr_reactor.h"
#include "cr_telemetry.h"
#include "ut_cunit.h"

#define UT_WAIT_MS 20000

static inline void
ut_sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

/* ---- the runtime on its own thread ---- */

enum { RT_STARTING, RT_RUNNING, RT_FAILED, RT_STOPPED, RT_FINI, RT_DONE };

static struct {
	pthread_t th;
	_Atomic int phase;
	int rc;
	struct cr_eal_config cfg;
	struct cr_lcore_table table;
} ut_rt;

static inline bool
ut_rt_wait(int phase)
{
	for (int i = 0; i < UT_WAIT_MS && atomic_load(&ut_rt.phase) < phase; i++)
		ut_sleep_ms(1);
	return atomic_load(&ut_rt.phase) >= phase;
}

static inline void *
ut_rt_thread(void *arg)
{
	(void)arg;
	ut_rt.rc = cr_reactor_init(&ut_rt.cfg, &ut_rt.table, NULL);
	if (ut_rt.rc != 0) {
		atomic_store(&ut_rt.phase, RT_FAILED);
		return NULL;
	}
	atomic_store(&ut_rt.phase, RT_RUNNING);
	cr_reactor_run();
	atomic_store(&ut_rt.phase, RT_STOPPED);
	/* The records stay readable (frozen counters) until the test lets fini go. */
	for (int i = 0; i < UT_WAIT_MS && atomic_load(&ut_rt.phase) < RT_FINI; i++)
		ut_sleep_ms(1);
	cr_reactor_fini();
	atomic_store(&ut_rt.phase, RT_DONE);
	return NULL;
}

/* Start every lcore of this machine; @return true when they all run. */
static inline bool
ut_rt_start(void)
{
	char err[256];

	cr_eal_config_defaults(&ut_rt.cfg);
	if (cr_eal_lcore_table(&ut_rt.cfg, &ut_rt.table, err, sizeof(err)) != 0) {
		fprintf(stderr, "lcore table: %s\n", err);
		return false;
	}
	atomic_store(&ut_rt.phase, RT_STARTING);
	if (pthread_create(&ut_rt.th, NULL, ut_rt_thread, NULL) != 0)
		return false;
	if (!ut_rt_wait(RT_RUNNING) || atomic_load(&ut_rt.phase) == RT_FAILED) {
		pthread_join(ut_rt.th, NULL);
		return false;
	}
	return true;
}

/* Stop the loops; the records stay until ut_rt_fini(). @return true once stopped. */
static inline bool
ut_rt_stop(void)
{
	cr_reactor_stop();
	return ut_rt_wait(RT_STOPPED);
}

static inline void
ut_rt_fini(void)
{
	atomic_store(&ut_rt.phase, RT_FINI);
	pthread_join(ut_rt.th, NULL);
}

/* ---- strict JSON validation (RFC 8259, UTF-8 checked) ---- */

static inline const char *ut_json_value(const char *p, int depth);

static inline const char *
ut_json_ws(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	return p;
}

static inline const char *
ut_json_str(const char *p)
{
	const unsigned char *s = (const unsigned char *)p;

	if (*s++ != '"')
		return NULL;
	while (*s != '"') {
		if (*s < 0x20)
			return NULL;
		if (*s == '\\') {
			s++;
			if (*s == 'u') {
				for (int i = 1; i <= 4; i++)
					if (!((s[i] >= '0' && s[i] <= '9') ||
					      (s[i] >= 'a' && s[i] <= 'f') ||
					      (s[i] >= 'A' && s[i] <= 'F')))
						return NULL;
				s += 5;
			} else if (*s != '"' && *s != '\\' && *s != '/' && *s != 'b' && *s != 'f' &&
				   *s != 'n' && *s != 'r' && *s != 't') {
				return NULL;
			} else {
				s++;
			}
		} else if (*s >= 0x80) {
			int n = *s >= 0xf0 && *s <= 0xf4 ? 4 : *s >= 0xe0 ? 3 : *s >= 0xc2 ? 2 : 0;

			if (n == 0 || *s > 0xf4)
				return NULL;
			if ((*s == 0xe0 && s[1] < 0xa0) || (*s == 0xed && s[1] > 0x9f) ||
			    (*s == 0xf0 && s[1] < 0x90) || (*s == 0xf4 && s[1] > 0x8f))
				return NULL;
			for (int i = 1; i < n; i++)
				if (s[i] < 0x80 || s[i] > 0xbf)
					return NULL;
			s += n;
		} else {
			s++;
		}
	}
	return (const char *)s + 1;
}

static inline const char *
ut_json_num(const char *p)
{
	if (*p == '-')
		p++;
	if (*p == '0')
		p++;
	else if (*p >= '1' && *p <= '9')
		while (*p >= '0' && *p <= '9')
			p++;
	else
		return NULL;
	if (*p == '.') {
		p++;
		if (!(*p >= '0' && *p <= '9'))
			return NULL;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!(*p >= '0' && *p <= '9'))
			return NULL;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	return p;
}

static inline const char *
ut_json_container(const char *p, int depth, char close)
{
	bool obj = close == '}';

	p = ut_json_ws(p + 1);
	if (*p == close)
		return p + 1;
	for (;;) {
		if (obj) {
			p = ut_json_str(p);
			if (p == NULL)
				return NULL;
			p = ut_json_ws(p);
			if (*p++ != ':')
				return NULL;
		}
		p = ut_json_value(p, depth + 1);
		if (p == NULL)
			return NULL;
		p = ut_json_ws(p);
		if (*p == close)
			return p + 1;
		if (*p++ != ',')
			return NULL;
	}
}

static inline const char *
ut_json_value(const char *p, int depth)
{
	if (depth > 64)
		return NULL;
	p = ut_json_ws(p);
	switch (*p) {
	case '{':
		return ut_json_container(p, depth, '}');
	case '[':
		return ut_json_container(p, depth, ']');
	case '"':
		return ut_json_str(p);
	case 't':
		return strncmp(p, "true", 4) == 0 ? p + 4 : NULL;
	case 'f':
		return strncmp(p, "false", 5) == 0 ? p + 5 : NULL;
	case 'n':
		return strncmp(p, "null", 4) == 0 ? p + 4 : NULL;
	default:
		return ut_json_num(p);
	}
}

/* True when @p s is exactly one JSON value (surrounding whitespace allowed). */
static inline bool
ut_json_valid(const char *s)
{
	const char *end = ut_json_value(s, 0);

	return end != NULL && *ut_json_ws(end) == '\0';
}

/*
 * The unsigned number right after @p key (e.g. "\"turns\":") at or after the first
 * @p anchor (NULL: the start). @return true if found.
 */
static inline bool
ut_json_u64_after(const char *doc, const char *anchor, const char *key, unsigned long long *out)
{
	const char *p = anchor != NULL ? strstr(doc, anchor) : doc;
	char *end;

	if (p == NULL || (p = strstr(p, key)) == NULL)
		return false;
	p += strlen(key);
	*out = strtoull(p, &end, 10);
	return end != p;
}

/* ---- a unix-socket client ---- */

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

#endif /* TEL_UT_H */
