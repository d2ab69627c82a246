/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The resize mode: what shrinking and growing the pool costs under load. cr-echo runs on
 * both lcores with its telemetry socket; this process keeps N connections ping-ponging
 * B-byte messages (one in flight each) and counts echoes in 10 ms buckets. At 1 s it asks
 * /pool/resize,1 and polls /lcores until the second lcore is OFFLINE; at 2.5 s it asks
 * /pool/resize,2 and polls until it is RUNNING; the run ends at 4 s. A connection the
 * retiring lcore closes (EOF) is reconnected at once and counted; a reset or a refused
 * connect is counted apart (both should stay 0).
 *
 * Figures: the time from the request to OFFLINE (and to RUNNING), the echo rate before,
 * on one lcore and after (medians of 10 ms buckets), and the dip: the lowest 50 ms
 * window around each transition as a fraction of the rate before. Rounds: the median of
 * each figure over BENCH_RESIZE_ROUNDS runs. Client and server share the two CPUs, so the
 * rates are lower than the echo mode's; the dip and the times are the point.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "bench.h"

#define BUCKET_NS    (10ull * 1000 * 1000)
#define RUN_NS	     (4000ull * 1000 * 1000)
#define SHRINK_AT_NS (1000ull * 1000 * 1000)
#define GROW_AT_NS   (2500ull * 1000 * 1000)
#define N_BUCKETS    (RUN_NS / BUCKET_NS)
#define DIP_BUCKETS  5 /* 50 ms windows */
#define POLL_EVERY_NS (1000ull * 1000)
#define BENCH_RESIZE_ROUNDS 3

struct rconn {
	int fd;
	uint32_t sent, got;
};

struct rclient {
	int ep;
	unsigned n, size, port;
	struct rconn *c;
	uint8_t *tx, *rx;
	uint64_t buckets[N_BUCKETS];
	uint64_t reconnects, resets, refused;
};

struct resize_round {
	double to_offline_ms, to_running_ms;
	double before, during, after; /* echoes per second */
	double dip_shrink, dip_grow;  /* lowest 50 ms window / before */
	uint64_t reconnects, resets, refused;
};

/* ---- telemetry ---- */

/* One request; the reply in @p out (NUL-terminated). */
static int
tele(const char *path, const char *cmd, char *out, size_t len)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t have = 0;
	ssize_t n;
	int fd, rc = 0;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    write(fd, cmd, strlen(cmd)) != (ssize_t)strlen(cmd) || write(fd, "\n", 1) != 1) {
		rc = -errno;
		close(fd);
		return rc;
	}
	while (have + 1 < len && (n = read(fd, out + have, len - 1 - have)) > 0) {
		have += (size_t)n;
		out[have] = '\0';
		if (strchr(out, '\n') != NULL)
			break;
	}
	out[have] = '\0';
	close(fd);
	return have > 0 ? 0 : -EPROTO;
}

/* The state of lcore @p id in a /lcores reply, e.g. "RUNNING"; NULL if absent. */
static const char *
state_of(const char *reply, unsigned id, char *buf, size_t len)
{
	char key[32];
	const char *at, *st, *end;

	snprintf(key, sizeof(key), "{\"lcore\":%u,", id);
	at = strstr(reply, key);
	if (at == NULL || (st = strstr(at, "\"state\":\"")) == NULL)
		return NULL;
	st += strlen("\"state\":\"");
	end = strchr(st, '"');
	if (end == NULL || (size_t)(end - st) >= len)
		return NULL;
	memcpy(buf, st, (size_t)(end - st));
	buf[end - st] = '\0';
	return buf;
}

/* ---- the client ---- */

static int
rconnect(struct rclient *cl, unsigned i)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	struct epoll_event ev = {.events = EPOLLIN, .data.u32 = i};
	int fd, one = 1;

	sa.sin_port = htons((uint16_t)cl->port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		int err = -errno;

		close(fd);
		if (err == -ECONNREFUSED)
			cl->refused++;
		return err;
	}
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (epoll_ctl(cl->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
		close(fd);
		return -errno;
	}
	cl->c[i].fd = fd;
	cl->c[i].sent = cl->c[i].got = 0;
	/* Small messages on a fresh socket: the send completes at once. */
	if (send(fd, cl->tx, cl->size, MSG_NOSIGNAL) != (ssize_t)cl->size)
		return -EIO;
	cl->c[i].sent = cl->size;
	return 0;
}

static void
rdrop(struct rclient *cl, unsigned i)
{
	epoll_ctl(cl->ep, EPOLL_CTL_DEL, cl->c[i].fd, NULL);
	close(cl->c[i].fd);
	cl->c[i].fd = -1;
}

/* Readable: count a whole echo and send the next; on EOF or a reset, reconnect. */
static int
rrecv(struct rclient *cl, unsigned i, uint64_t bucket)
{
	struct rconn *c = &cl->c[i];
	ssize_t n = recv(c->fd, cl->rx, cl->size - c->got, 0);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0) {
		if (n < 0)
			cl->resets++;
		rdrop(cl, i);
		cl->reconnects++;
		return rconnect(cl, i);
	}
	c->got += (uint32_t)n;
	if (c->got < cl->size)
		return 0;
	cl->buckets[bucket]++;
	c->got = 0;
	if (send(c->fd, cl->tx, cl->size, MSG_NOSIGNAL) != (ssize_t)cl->size) {
		cl->resets++;
		rdrop(cl, i);
		cl->reconnects++;
		return rconnect(cl, i);
	}
	return 0;
}

static double
median_rate(const uint64_t *b, uint64_t from_ns, uint64_t to_ns)
{
	double v[N_BUCKETS];
	unsigned n = 0, i;

	for (i = (unsigned)(from_ns / BUCKET_NS); i < to_ns / BUCKET_NS && i < N_BUCKETS; i++)
		v[n++] = (double)b[i] * (1e9 / (double)BUCKET_NS);
	return n > 0 ? bench_median(v, n) : 0.0;
}

static double
lowest_window(const uint64_t *b, uint64_t from_ns, uint64_t to_ns)
{
	double low = -1;
	unsigned i, j;

	for (i = (unsigned)(from_ns / BUCKET_NS); i + DIP_BUCKETS <= to_ns / BUCKET_NS &&
						   i + DIP_BUCKETS <= N_BUCKETS;
	     i++) {
		uint64_t sum = 0;

		for (j = 0; j < DIP_BUCKETS; j++)
			sum += b[i + j];
		if (low < 0 || (double)sum < low)
			low = (double)sum;
	}
	return low < 0 ? 0 : low * (1e9 / (double)(BUCKET_NS * DIP_BUCKETS));
}

/* ---- one round ---- */

static int
run_round(const struct bench_env *env, const char *sock, pid_t pid, unsigned port,
	  struct resize_round *r)
{
	struct epoll_event evs[256];
	struct rclient cl;
	char reply[8192], st[32];
	uint64_t t0, t, next_poll = 0, asked_shrink = 0, asked_grow = 0;
	bool offline = false, running = false;
	unsigned i;
	int n, rc = 0;

	memset(&cl, 0, sizeof(cl));
	memset(r, 0, sizeof(*r));
	cl.n = env->connections;
	cl.size = env->message_size;
	cl.port = port;
	cl.ep = epoll_create1(EPOLL_CLOEXEC);
	cl.c = calloc(cl.n, sizeof(*cl.c));
	cl.tx = calloc(1, cl.size);
	cl.rx = calloc(1, cl.size);
	if (cl.ep < 0 || cl.c == NULL || cl.tx == NULL || cl.rx == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	for (i = 0; i < cl.n && rc == 0; i++)
		rc = rconnect(&cl, i);
	t0 = bench_now_ns();
	while (rc == 0 && (t = bench_now_ns() - t0) < RUN_NS) {
		n = epoll_wait(cl.ep, evs, 256, 1);
		for (i = 0; i < (unsigned)(n > 0 ? n : 0) && rc == 0; i++)
			rc = rrecv(&cl, evs[i].data.u32, t / BUCKET_NS);
		if (rc != 0 || t < next_poll)
			continue;
		next_poll = t + POLL_EVERY_NS;
		if (asked_shrink == 0 && t >= SHRINK_AT_NS) {
			rc = tele(sock, "/pool/resize,1", reply, sizeof(reply));
			asked_shrink = bench_now_ns() - t0;
		} else if (asked_shrink != 0 && !offline) {
			rc = tele(sock, "/lcores", reply, sizeof(reply));
			if (rc == 0 && state_of(reply, env->other, st, sizeof(st)) != NULL &&
			    strcmp(st, "OFFLINE") == 0) {
				offline = true;
				r->to_offline_ms = (double)(bench_now_ns() - t0 - asked_shrink) / 1e6;
			}
		} else if (offline && asked_grow == 0 && t >= GROW_AT_NS) {
			rc = tele(sock, "/pool/resize,2", reply, sizeof(reply));
			asked_grow = bench_now_ns() - t0;
		} else if (asked_grow != 0 && !running) {
			rc = tele(sock, "/lcores", reply, sizeof(reply));
			if (rc == 0 && state_of(reply, env->other, st, sizeof(st)) != NULL &&
			    strcmp(st, "RUNNING") == 0) {
				running = true;
				r->to_running_ms = (double)(bench_now_ns() - t0 - asked_grow) / 1e6;
			}
		}
		if (!bench_proc_alive(pid))
			rc = -ECHILD;
	}
	if (rc == 0 && (!offline || !running)) {
		fprintf(stderr, "cr-bench: resize: lcore %u never went %s\n", env->other,
			offline ? "RUNNING again" : "OFFLINE");
		rc = -ETIMEDOUT;
	}
	if (rc == 0) {
		uint64_t off = asked_shrink + (uint64_t)(r->to_offline_ms * 1e6);
		uint64_t on = asked_grow + (uint64_t)(r->to_running_ms * 1e6);

		r->before = median_rate(cl.buckets, 300ull * 1000000, SHRINK_AT_NS);
		r->during = median_rate(cl.buckets, off + 100ull * 1000000, asked_grow);
		r->after = median_rate(cl.buckets, on + 300ull * 1000000, RUN_NS);
		r->dip_shrink = lowest_window(cl.buckets, asked_shrink, asked_grow) / r->before;
		r->dip_grow = lowest_window(cl.buckets, asked_grow, RUN_NS) / r->before;
		r->reconnects = cl.reconnects;
		r->resets = cl.resets;
		r->refused = cl.refused;
	}
out:
	for (i = 0; cl.c != NULL && i < cl.n; i++)
		if (cl.c[i].fd > 0)
			close(cl.c[i].fd);
	if (cl.ep >= 0)
		close(cl.ep);
	free(cl.c);
	free(cl.tx);
	free(cl.rx);
	return rc;
}

static int
start_echo(const struct bench_env *env, struct bench_proc *s, char *sock, size_t len)
{
	char path[PATH_MAX + 32], lcores[32], line[512];
	char rt[] = "/tmp/cr-bench-resize.XXXXXX";
	char *argv[8];
	cpu_set_t cpus;
	int rc;

	rc = bench_echo_path(path, sizeof(path));
	if (rc != 0)
		return rc;
	if (mkdtemp(rt) == NULL)
		return -errno;
	setenv("XDG_RUNTIME_DIR", rt, 1);
	snprintf(lcores, sizeof(lcores), "%u,%u", env->main, env->other);
	argv[0] = "cr-echo";
	argv[1] = "-l";
	argv[2] = lcores;
	argv[3] = "--listen";
	argv[4] = "127.0.0.1:0";
	argv[5] = NULL;
	CPU_ZERO(&cpus);
	CPU_SET(env->main, &cpus);
	CPU_SET(env->other, &cpus);
	rc = bench_proc_spawn(s, path, argv, &cpus);
	if (rc == 0)
		rc = bench_proc_ready(s, line, sizeof(line));
	if (rc != 0) {
		fprintf(stderr, "cr-bench: resize: cannot start %s: %s\n", path, cr_strerror(rc));
		bench_proc_stop(s);
		return rc;
	}
	snprintf(sock, len, "%s/coreact/cr-echo.%d.sock", rt, (int)s->pid);
	return 0;
}

int
bench_resize_run(const struct bench_env *env)
{
	struct resize_round r[BENCH_RESIZE_ROUNDS];
	double v[7][BENCH_RESIZE_ROUNDS];
	uint64_t resets = 0, refused = 0, reconnects = 0;
	struct bench_proc s;
	char sock[PATH_MAX];
	unsigned k, j;
	int rc = 0;

	for (k = 0; k < BENCH_RESIZE_ROUNDS && rc == 0; k++) {
		rc = start_echo(env, &s, sock, sizeof(sock));
		if (rc != 0)
			return rc;
		bench_sleep_ns(200ull * 1000000); /* its lcores settle */
		rc = run_round(env, sock, s.pid, s.port, &r[k]);
		bench_proc_stop(&s);
		if (rc != 0)
			fprintf(stderr, "cr-bench: resize: round %u: %s\n", k + 1, cr_strerror(rc));
	}
	if (rc != 0)
		return rc;
	for (k = 0; k < BENCH_RESIZE_ROUNDS; k++) {
		double f[7] = {r[k].to_offline_ms, r[k].to_running_ms, r[k].before, r[k].during,
			       r[k].after, r[k].dip_shrink, r[k].dip_grow};

		for (j = 0; j < 7; j++)
			v[j][k] = f[j];
		resets += r[k].resets;
		refused += r[k].refused;
		reconnects += r[k].reconnects;
	}
	if (env->json) {
		printf("{\"mode\":\"resize\",\"rounds\":%u,\"connections\":%u,"
		       "\"to_offline_ms\":%.2f,\"to_running_ms\":%.2f,\"before_mps\":%.0f,"
		       "\"one_lcore_mps\":%.0f,\"after_mps\":%.0f,\"dip_shrink\":%.3f,"
		       "\"dip_grow\":%.3f,\"reconnects\":%llu,\"resets\":%llu,\"refused\":%llu}\n",
		       BENCH_RESIZE_ROUNDS, env->connections, bench_median(v[0], k),
		       bench_median(v[1], k), bench_median(v[2], k), bench_median(v[3], k),
		       bench_median(v[4], k), bench_median(v[5], k), bench_median(v[6], k),
		       (unsigned long long)reconnects, (unsigned long long)resets,
		       (unsigned long long)refused);
		return 0;
	}
	printf("cr-echo on lcores %u,%u under %u ping-pong connections (%u B), /pool/resize "
	       "2 -> 1 -> 2; medians of %u rounds\n",
	       env->main, env->other, env->connections, env->message_size,
	       BENCH_RESIZE_ROUNDS);
	printf("  /pool/resize,1 -> lcore %u OFFLINE   %8.1f ms\n", env->other,
	       bench_median(v[0], k));
	printf("  /pool/resize,2 -> lcore %u RUNNING   %8.1f ms\n", env->other,
	       bench_median(v[1], k));
	printf("  echoes/s before (2 lcores)        %10.0f\n", bench_median(v[2], k));
	printf("  echoes/s on 1 lcore               %10.0f\n", bench_median(v[3], k));
	printf("  echoes/s after (2 lcores)         %10.0f\n", bench_median(v[4], k));
	printf("  lowest 50 ms while shrinking      %10.2f of before\n", bench_median(v[5], k));
	printf("  lowest 50 ms while growing        %10.2f of before\n", bench_median(v[6], k));
	printf("  client: %llu reconnects after EOF, %llu resets, %llu refused (all rounds)\n",
	       (unsigned long long)reconnects, (unsigned long long)resets,
	       (unsigned long long)refused);
	return 0;
}
