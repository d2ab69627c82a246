/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The echo mode: cr-echo on one lcore against two minimal single-threaded echo servers
 * (bench_echo_servers.c: a liburing loop, the limit, and an epoll loop), same client,
 * same run. Each server is a process of its own pinned to the second CPU; the client runs
 * here, pinned to the first: N connections, each with one B-byte message in flight
 * (ping-pong), all on one epoll. The figure is echoed messages per second of server CPU
 * (utime + stime from /proc/PID/stat over the measured window); messages per second too.
 * The three servers take turns in BENCH_ECHO_ROUNDS rounds; figures are medians.
 *
 * With $CR_BENCH_ECHO_BASE (the cr-echo of a baseline build, usertools/cr-bench
 * --baseline-build), two more take their turns in the same rounds: that cr-echo, and ours
 * with --zero-copy (each receive buffer echoed itself); the ratios of ours, and ours with
 * --zero-copy, to the baseline are the medians of each round's ratio, as the others.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define WARMUP_NS	 (500ull * 1000 * 1000)
#define STALL_NS	 (2000ull * 1000 * 1000)
#define EPOLL_BATCH	 256
#define TARGET_VS_URING	 0.9
#define TARGET_VS_EPOLL	 1.2
#define TARGET_MIN_CONNS 64

enum echo_server { SRV_URING, SRV_EPOLL, SRV_CR, SRV_CR_ZC, SRV_BASE, SRV_COUNT };

static const char *const srv_names[SRV_COUNT] = {
    [SRV_URING] = "liburing loop",
    [SRV_EPOLL] = "epoll loop",
    [SRV_CR] = "cr-echo",
    [SRV_CR_ZC] = "cr-echo -zc",
    [SRV_BASE] = "cr-echo base",
};
static const char *const srv_keys[SRV_COUNT] = {
    [SRV_URING] = "uring",
    [SRV_EPOLL] = "epoll",
    [SRV_CR] = "cr",
    [SRV_CR_ZC] = "cr_zc",
    [SRV_BASE] = "base",
};
static const enum bench_phase srv_phases[SRV_COUNT] = {
    [SRV_URING] = PHASE_ECHO_URING,
    [SRV_EPOLL] = PHASE_ECHO_EPOLL,
    [SRV_CR] = PHASE_ECHO_CR,
    [SRV_CR_ZC] = PHASE_ECHO_CR,
    [SRV_BASE] = PHASE_ECHO_CR,
};

/* The baseline's cr-echo ($CR_BENCH_ECHO_BASE), or NULL: then only the first three run. */
static const char *
base_path(void)
{
	const char *p = getenv("CR_BENCH_ECHO_BASE");

	return p != NULL && p[0] != '\0' ? p : NULL;
}

static bool
srv_on(enum echo_server k)
{
	return k < SRV_CR_ZC || base_path() != NULL;
}

struct echo_results {
	double mps_r[SRV_COUNT][BENCH_ECHO_ROUNDS];	/* messages per second */
	double per_cpu_r[SRV_COUNT][BENCH_ECHO_ROUNDS]; /* messages per server-CPU-second */
	double cpu_r[SRV_COUNT][BENCH_ECHO_ROUNDS];	/* server CPU, % of one CPU */
	double mps[SRV_COUNT], per_cpu[SRV_COUNT], cpu[SRV_COUNT]; /* medians */
	double vs_uring, vs_epoll; /* median of the rounds' ratios of messages per CPU-s */
	double vs_base, zc_vs_base; /* cr-echo, and with --zero-copy, to the baseline's */
	char cr_line[256];	   /* cr-echo's ready line */
};

struct conn {
	int fd;
	uint32_t seq;
	uint32_t sent, got;
	bool want_out;
	uint8_t *tx, *rx;
};

struct client {
	int ep;
	unsigned n, size;
	struct conn *c;
	uint8_t *mem;
	uint64_t msgs;
};

static int
server_start(const struct bench_env *env, enum echo_server k, struct bench_proc *s, char *line,
	     size_t len)
{
	char path[PATH_MAX + 32], lcore[16];
	char *argv[10];
	cpu_set_t cpus;
	int rc;

	s->pid = 0;
	s->out = -1;
	snprintf(lcore, sizeof(lcore), "%u", env->other);
	if (k == SRV_CR || k == SRV_CR_ZC || k == SRV_BASE) {
		if (k == SRV_BASE)
			snprintf(path, sizeof(path), "%s", base_path());
		else if ((rc = bench_echo_path(path, sizeof(path))) != 0)
			return rc;
		argv[0] = "cr-echo";
		argv[1] = "-l";
		argv[2] = lcore;
		argv[3] = "--listen";
		argv[4] = "127.0.0.1:0";
		argv[5] = "--telemetry";
		argv[6] = "off";
		argv[7] = k == SRV_CR_ZC ? "--zero-copy" : NULL;
		argv[8] = NULL;
	} else {
		rc = bench_self_path(path, sizeof(path));
		if (rc != 0)
			return rc;
		argv[0] = "cr-bench";
		argv[1] = k == SRV_URING ? "echo-server-uring" : "echo-server-epoll";
		argv[2] = "0";
		argv[3] = NULL;
	}
	CPU_ZERO(&cpus);
	CPU_SET(env->other, &cpus);
	rc = bench_proc_spawn(s, path, argv, &cpus);
	if (rc == -ENOENT || rc == -EACCES) {
		fprintf(stderr,
			"cr-bench: echo: %s: %s (cr-echo: $CR_BENCH_ECHO, else ../cr-echo/ of "
			"the build)\n",
			path, strerror(-rc));
		return rc;
	}
	if (rc == 0)
		rc = bench_proc_ready(s, line, len);
	if (rc != 0) {
		fprintf(stderr, "cr-bench: echo: %s did not get ready: %s\n", srv_names[k],
			cr_strerror(rc));
		bench_proc_stop(s);
	}
	return rc;
}

/* ---- the client ---- */

static void
fill(struct conn *c, unsigned idx, unsigned size)
{
	unsigned j;

	for (j = 0; j < size; j++)
		c->tx[j] = (uint8_t)(idx * 131u + c->seq * 7u + j);
}

static int
set_events(struct client *cl, unsigned i, bool out)
{
	struct epoll_event ev = {.events = EPOLLIN | (out ? EPOLLOUT : 0u), .data.u32 = i};

	cl->c[i].want_out = out;
	return epoll_ctl(cl->ep, EPOLL_CTL_MOD, cl->c[i].fd, &ev) == 0 ? 0 : -errno;
}

static int
send_msg(struct client *cl, unsigned i)
{
	struct conn *c = &cl->c[i];
	ssize_t n;

	while (c->sent < cl->size) {
		n = send(c->fd, c->tx + c->sent, cl->size - c->sent, MSG_NOSIGNAL);
		if (n > 0)
			c->sent += (uint32_t)n;
		else if (errno == EAGAIN)
			return c->want_out ? 0 : set_events(cl, i, true);
		else if (errno != EINTR)
			return -errno;
	}
	return c->want_out ? set_events(cl, i, false) : 0;
}

static int
recv_msg(struct client *cl, unsigned i)
{
	struct conn *c = &cl->c[i];
	ssize_t n = recv(c->fd, c->rx + c->got, cl->size - c->got, 0);

	if (n == 0)
		return -ECONNRESET;
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	c->got += (uint32_t)n;
	if (c->got < cl->size)
		return 0;
	if (c->sent < cl->size || memcmp(c->tx, c->rx, cl->size) != 0) {
		fprintf(stderr,
			"cr-bench: echo: connection %u: echoed bytes differ from the "
			"message sent\n",
			i);
		return -EBADMSG;
	}
	cl->msgs++;
	c->seq++;
	c->sent = c->got = 0;
	fill(c, i, cl->size);
	return send_msg(cl, i);
}

static void
client_close(struct client *cl)
{
	unsigned i;

	for (i = 0; cl->c != NULL && i < cl->n; i++)
		if (cl->c[i].fd >= 0)
			close(cl->c[i].fd);
	if (cl->ep >= 0)
		close(cl->ep);
	free(cl->c);
	free(cl->mem);
	memset(cl, 0, sizeof(*cl));
	cl->ep = -1;
}

static int
connect_one(unsigned port, int *fd_out)
{
	struct sockaddr_in sa;
	int fd, one = 1;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	*fd_out = fd;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		return -errno;
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fcntl(fd, F_SETFL, O_NONBLOCK) == 0 ? 0 : -errno;
}

static int
client_open(struct client *cl, const struct bench_env *env, unsigned port)
{
	struct epoll_event ev = {.events = EPOLLIN};
	unsigned i;
	int rc;

	memset(cl, 0, sizeof(*cl));
	cl->n = env->connections;
	cl->size = env->message_size;
	cl->ep = epoll_create1(EPOLL_CLOEXEC);
	cl->c = calloc(cl->n, sizeof(*cl->c));
	cl->mem = malloc((size_t)cl->n * cl->size * 2);
	if (cl->ep < 0 || cl->c == NULL || cl->mem == NULL)
		return -ENOMEM;
	for (i = 0; i < cl->n; i++)
		cl->c[i].fd = -1;
	for (i = 0; i < cl->n; i++) {
		cl->c[i].tx = cl->mem + (size_t)i * cl->size * 2;
		cl->c[i].rx = cl->c[i].tx + cl->size;
		rc = connect_one(port, &cl->c[i].fd);
		ev.data.u32 = i;
		if (rc == 0 && epoll_ctl(cl->ep, EPOLL_CTL_ADD, cl->c[i].fd, &ev) != 0)
			rc = -errno;
		if (rc != 0)
			return rc;
	}
	for (i = 0; i < cl->n; i++) {
		fill(&cl->c[i], i, cl->size);
		rc = send_msg(cl, i);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* Run the ping-pong until @p until (CLOCK_MONOTONIC ns). */
static int
client_run(struct client *cl, pid_t server, uint64_t until)
{
	struct epoll_event evs[EPOLL_BATCH];
	uint64_t t, last_msgs = cl->msgs, last_progress = bench_now_ns();
	int n, i, rc;

	while ((t = bench_now_ns()) < until) {
		n = epoll_wait(cl->ep, evs, EPOLL_BATCH, 10);
		if (n < 0 && errno != EINTR)
			return -errno;
		for (i = 0; i < n; i++) {
			rc = 0;
			if (evs[i].events & EPOLLOUT)
				rc = send_msg(cl, evs[i].data.u32);
			if (rc == 0 && (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
				rc = recv_msg(cl, evs[i].data.u32);
			if (rc != 0)
				return rc;
		}
		if (cl->msgs != last_msgs) {
			last_msgs = cl->msgs;
			last_progress = t;
		} else if (t - last_progress > STALL_NS) {
			return bench_proc_alive(server) ? -ETIMEDOUT : -ECHILD;
		}
	}
	return 0;
}

/* ---- one measurement ---- */

static int
measure(const struct bench_env *env, struct client *cl, pid_t pid, double *mps, double *per_cpu,
	double *cpu_pct)
{
	uint64_t t0, t1, m0, k0, k1;
	double secs, cpu_s;
	int rc;

	rc = client_run(cl, pid, bench_now_ns() + WARMUP_NS);
	if (rc == 0)
		rc = bench_proc_ticks(pid, &k0);
	if (rc != 0)
		return rc;
	m0 = cl->msgs;
	t0 = bench_now_ns();
	rc = client_run(cl, pid, t0 + (uint64_t)env->seconds * 1000000000ull);
	t1 = bench_now_ns();
	if (rc == 0)
		rc = bench_proc_ticks(pid, &k1);
	if (rc != 0)
		return rc;
	secs = (double)(t1 - t0) / 1e9;
	cpu_s = (double)(k1 - k0) / (double)sysconf(_SC_CLK_TCK);
	*mps = (double)(cl->msgs - m0) / secs;
	*cpu_pct = 100.0 * cpu_s / secs;
	/* Less than a tick: the server did (next to) nothing; report 0 rather than infinity. */
	*per_cpu = cpu_s > 0 ? (double)(cl->msgs - m0) / cpu_s : 0.0;
	return 0;
}

static int
run_one(const struct bench_env *env, enum echo_server k, unsigned r, struct echo_results *res)
{
	char line[256];
	struct bench_proc s;
	struct client cl;
	int rc;

	bench_phase(srv_phases[k]);
	rc = server_start(env, k, &s, line, sizeof(line));
	if (rc != 0)
		return rc;
	if (k == SRV_CR)
		snprintf(res->cr_line, sizeof(res->cr_line), "%s", line);
	rc = client_open(&cl, env, s.port);
	if (rc == 0)
		rc = measure(env, &cl, s.pid, &res->mps_r[k][r], &res->per_cpu_r[k][r],
			     &res->cpu_r[k][r]);
	if (rc != 0)
		fprintf(stderr, "cr-bench: echo: %s, round %u: %s%s\n", srv_names[k], r + 1,
			cr_strerror(rc),
			rc == -ETIMEDOUT ? " (no echo for 2 s)"
			: rc == -ECHILD	 ? " (the server exited)"
					 : "");
	client_close(&cl);
	bench_proc_stop(&s);
	bench_phase_end();
	return rc;
}

/* ---- set-up ---- */

static int
echo_setup(const struct bench_env *env)
{
	struct rlimit rl;
	cpu_set_t set;

	if (CPU_COUNT(&env->affinity) < 2 || !CPU_ISSET(env->main, &env->affinity) ||
	    !CPU_ISSET(env->other, &env->affinity)) {
		fprintf(stderr,
			"cr-bench: echo needs two CPUs (client on %u, servers on %u); "
			"run where both are allowed\n",
			env->main, env->other);
		return -ENODEV;
	}
	/* Client and server each hold one fd per connection, plus a few. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < env->connections + 64ull) {
		fprintf(stderr,
			"cr-bench: echo: --connections %u needs %u open files; the limit "
			"is %llu (ulimit -n)\n",
			env->connections, env->connections + 64, (unsigned long long)rl.rlim_cur);
		return -EMFILE;
	}
	CPU_ZERO(&set);
	CPU_SET(env->main, &set);
	return sched_setaffinity(0, sizeof(set), &set) == 0 ? 0 : -errno;
}

/* ---- report ---- */

static bool
targets_apply(const struct bench_env *env)
{
	return env->connections >= TARGET_MIN_CONNS;
}

static const char *
verdict(const struct bench_env *env, double ratio, double target)
{
	if (!targets_apply(env))
		return "(target is for 64+ connections)";
	return ratio >= target ? "met" : "MISSED";
}

static void
report_table(const struct bench_env *env, const struct echo_results *r)
{
	const char *drv = strstr(r->cr_line, "io driver ");

	printf("cr-bench echo: client on CPU %u, each server alone on CPU %u; %u connections, "
	       "%u-byte messages, ping-pong; %u s per run, %u rounds, medians%s\n",
	       env->main, env->other, env->connections, env->message_size, env->seconds,
	       BENCH_ECHO_ROUNDS, cr_eal_is_vm() ? " (under a hypervisor)" : "");
	printf("cr-echo: 1 lcore, %s\n\n", drv != NULL ? drv : "io driver ?");
	printf("%-34s %14s %14s %14s\n", "metric", srv_names[SRV_URING], srv_names[SRV_EPOLL],
	       srv_names[SRV_CR]);
	printf("%-34s %14.0f %14.0f %14.0f\n", "messages / server-CPU-second",
	       r->per_cpu[SRV_URING], r->per_cpu[SRV_EPOLL], r->per_cpu[SRV_CR]);
	printf("%-34s %14.0f %14.0f %14.0f\n", "messages / s", r->mps[SRV_URING], r->mps[SRV_EPOLL],
	       r->mps[SRV_CR]);
	printf("%-34s %14.1f %14.1f %14.1f\n\n", "server CPU (% of one)", r->cpu[SRV_URING],
	       r->cpu[SRV_EPOLL], r->cpu[SRV_CR]);
	printf("%-34s %7s  %-16s %s\n", "ratio (msgs per server-CPU-s)", "value", "target", "");
	printf("%-34s %7.2f  %-16s %s\n", "cr-echo / liburing loop", r->vs_uring, ">= 0.90",
	       verdict(env, r->vs_uring, TARGET_VS_URING));
	printf("%-34s %7.2f  %-16s %s\n", "cr-echo / epoll loop", r->vs_epoll, ">= 1.20",
	       verdict(env, r->vs_epoll, TARGET_VS_EPOLL));
	if (base_path() != NULL) {
		printf("\nagainst the baseline's cr-echo (%s), same rounds:\n", base_path());
		printf("%-34s %14s %14s %14s\n", "metric", srv_names[SRV_CR],
		       srv_names[SRV_CR_ZC], srv_names[SRV_BASE]);
		printf("%-34s %14.0f %14.0f %14.0f\n", "messages / server-CPU-second",
		       r->per_cpu[SRV_CR], r->per_cpu[SRV_CR_ZC], r->per_cpu[SRV_BASE]);
		printf("%-34s %14.0f %14.0f %14.0f\n", "messages / s", r->mps[SRV_CR],
		       r->mps[SRV_CR_ZC], r->mps[SRV_BASE]);
		printf("%-34s %14.1f %14.1f %14.1f\n", "server CPU (% of one)", r->cpu[SRV_CR],
		       r->cpu[SRV_CR_ZC], r->cpu[SRV_BASE]);
		printf("%-34s %7.2f\n", "cr-echo / baseline", r->vs_base);
		printf("%-34s %7.2f\n", "cr-echo --zero-copy / baseline", r->zc_vs_base);
	}
	printf("\nHow it was measured: each server is a process of its own, pinned to CPU %u; "
	       "the client (one thread, one epoll) keeps one message in flight per connection "
	       "and checks every echoed byte. After a %.1f s warm-up, messages are counted for "
	       "%u s and the server's utime+stime is read from /proc/PID/stat (%ld ticks/s). "
	       "Ratios are the median of each round's ratio.\n",
	       env->other, (double)WARMUP_NS / 1e9, env->seconds, sysconf(_SC_CLK_TCK));
}

static void
json_rounds(const char *key, const double *v)
{
	unsigned i;

	printf(",\"%s\":[", key);
	for (i = 0; i < BENCH_ECHO_ROUNDS; i++)
		printf("%s%.1f", i == 0 ? "" : ",", v[i]);
	printf("]");
}

static void
report_json(const struct bench_env *env, const struct echo_results *r)
{
	char key[64];
	unsigned k;

	printf("{\"mode\":\"echo\",\"connections\":%u,\"seconds\":%u,\"message_size\":%u,"
	       "\"rounds\":%u,\"client_cpu\":%u,\"server_cpu\":%u,\"vm\":%s",
	       env->connections, env->seconds, env->message_size, BENCH_ECHO_ROUNDS, env->main,
	       env->other, cr_eal_is_vm() ? "true" : "false");
	for (k = 0; k < SRV_COUNT; k++) {
		if (!srv_on((enum echo_server)k))
			continue;
		printf(",\"echo_%s_msgs_per_cpu_s\":%.1f", srv_keys[k], r->per_cpu[k]);
		printf(",\"echo_%s_msgs_per_s\":%.1f", srv_keys[k], r->mps[k]);
		printf(",\"echo_%s_cpu_pct\":%.1f", srv_keys[k], r->cpu[k]);
		snprintf(key, sizeof(key), "echo_%s_msgs_per_cpu_s_rounds", srv_keys[k]);
		json_rounds(key, r->per_cpu_r[k]);
	}
	printf(",\"echo_cr_vs_uring\":%.3f,\"echo_cr_vs_epoll\":%.3f", r->vs_uring, r->vs_epoll);
	if (base_path() != NULL)
		printf(",\"echo_cr_vs_base\":%.3f,\"echo_cr_zc_vs_base\":%.3f", r->vs_base,
		       r->zc_vs_base);
	printf(",\"target_cr_vs_uring\":%.2f,\"target_cr_vs_epoll\":%.2f,\"targets_apply\":%s",
	       TARGET_VS_URING, TARGET_VS_EPOLL, targets_apply(env) ? "true" : "false");
	printf(",\"met\":{\"echo_cr_vs_uring\":%s,\"echo_cr_vs_epoll\":%s}}\n",
	       r->vs_uring >= TARGET_VS_URING ? "true" : "false",
	       r->vs_epoll >= TARGET_VS_EPOLL ? "true" : "false");
}

int
bench_echo_run(const struct bench_env *env)
{
	static struct echo_results res;
	unsigned r, k;
	int rc;

	rc = echo_setup(env);
	if (rc != 0)
		return rc;
	for (r = 0; r < BENCH_ECHO_ROUNDS; r++)
		for (k = 0; k < SRV_COUNT; k++) {
			if (!srv_on((enum echo_server)k))
				continue;
			rc = run_one(env, (enum echo_server)k, r, &res);
			if (rc != 0)
				return rc;
		}
	for (k = 0; k < SRV_COUNT; k++) {
		res.mps[k] = bench_median(res.mps_r[k], BENCH_ECHO_ROUNDS);
		res.per_cpu[k] = bench_median(res.per_cpu_r[k], BENCH_ECHO_ROUNDS);
		res.cpu[k] = bench_median(res.cpu_r[k], BENCH_ECHO_ROUNDS);
	}
	res.vs_uring =
	    bench_median_ratio(res.per_cpu_r[SRV_CR], res.per_cpu_r[SRV_URING], BENCH_ECHO_ROUNDS);
	res.vs_epoll =
	    bench_median_ratio(res.per_cpu_r[SRV_CR], res.per_cpu_r[SRV_EPOLL], BENCH_ECHO_ROUNDS);
	if (base_path() != NULL) {
		res.vs_base = bench_median_ratio(res.per_cpu_r[SRV_CR], res.per_cpu_r[SRV_BASE],
						 BENCH_ECHO_ROUNDS);
		res.zc_vs_base = bench_median_ratio(res.per_cpu_r[SRV_CR_ZC],
						    res.per_cpu_r[SRV_BASE], BENCH_ECHO_ROUNDS);
	}
	if (env->json)
		report_json(env, &res);
	else
		report_table(env, &res);
	return 0;
}
