/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The relay mode: CPU seconds per GB moved by a one-way relay on the second lcore, through
 * pooled pipes (cr_io_relay: splice, no copy) against through receive buffers (multishot
 * cr_io_recv, then cr_io_send of each buffer: two copies). A sender thread and a sink
 * thread on the first CPU stream over 127.0.0.1 for --seconds per round; 3 rounds each,
 * taking turns. The relay's CPU is the process's (io_uring's worker threads included)
 * less the sender's, the sink's and the main thread's own.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "cr_io.h"
#include <netinet/in.h>

#define RELAY_ROUNDS 3
#define CHUNK	     65536

struct relay_run {
	const struct bench_env *env;
	bool splice;
	int a[2], b[2]; /* a[0] sender, a[1] relay in; b[0] relay out, b[1] sink */
	uint64_t seconds;
	_Atomic uint64_t sent, got;
	double thread_cpu; /* sender + sink, seconds */
	_Atomic int done;
	int32_t err;
	/* the copy relay */
	cr_op_id recv;
	uint32_t q_id[CR_IO_BUFS], q_len[CR_IO_BUFS], q_off, q_head, q_n;
	char *q_buf[CR_IO_BUFS];
	bool eof, sending;
	struct cr_io_relay r;
};

static double
thread_cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double
proc_cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static void
pin(unsigned cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void *
sender_main(void *arg)
{
	struct relay_run *s = arg;
	static char chunk[CHUNK];
	double t0 = thread_cpu_s();
	uint64_t end;

	pin(s->env->main);
	memset(chunk, 'r', sizeof(chunk));
	end = bench_now_ns() + s->seconds * 1000000000ull;
	while (bench_now_ns() < end) {
		ssize_t n = send(s->a[0], chunk, sizeof(chunk), MSG_NOSIGNAL);

		if (n <= 0)
			break;
		atomic_fetch_add(&s->sent, (uint64_t)n);
	}
	shutdown(s->a[0], SHUT_WR);
	s->thread_cpu += thread_cpu_s() - t0;
	return NULL;
}

static void *
sink_main(void *arg)
{
	struct relay_run *s = arg;
	static char buf[CHUNK];
	double t0 = thread_cpu_s();
	ssize_t n;

	pin(s->env->main);
	shutdown(s->b[1], SHUT_WR); /* nothing goes back: the reverse direction ends at once */
	while ((n = recv(s->b[1], buf, sizeof(buf), 0)) > 0)
		atomic_fetch_add(&s->got, (uint64_t)n);
	s->thread_cpu += thread_cpu_s() - t0;
	return NULL;
}

/* ---- on the relay lcore ---- */

static void
relay_end(struct relay_run *s, int32_t err)
{
	s->err = err;
	atomic_store(&s->done, 1);
	cr_reactor_stop();
}

static void
splice_done(void *ctx, struct cr_io_relay *r)
{
	relay_end(ctx, r->err);
}

static void copy_send(struct relay_run *s);

static void
copy_sent(void *ctx, const struct cr_io_cqe *cqe)
{
	struct relay_run *s = ctx;
	uint32_t h = s->q_head;

	s->sending = false;
	if (cqe->res < 0) {
		relay_end(s, cqe->res);
		return;
	}
	s->q_off += (uint32_t)cqe->res;
	if (s->q_off == s->q_len[h]) {
		cr_io_buf_release(s->q_id[h]);
		s->q_head = (h + 1) % CR_IO_BUFS;
		s->q_n--;
		s->q_off = 0;
	}
	copy_send(s);
}

static void
copy_send(struct relay_run *s)
{
	uint32_t h = s->q_head;

	if (s->sending)
		return;
	if (s->q_n == 0) {
		if (s->eof) {
			shutdown(s->b[0], SHUT_WR);
			relay_end(s, 0);
		}
		return;
	}
	s->sending = true;
	if (cr_io_send(s->b[0], s->q_buf[h] + s->q_off, s->q_len[h] - s->q_off, copy_sent, s) ==
	    0)
		relay_end(s, -errno);
}

static void
copy_recv(void *ctx, const struct cr_io_cqe *cqe)
{
	struct relay_run *s = ctx;

	if (cqe->flags & CR_IO_F_BUFFER) {
		uint32_t t = (s->q_head + s->q_n) % CR_IO_BUFS;

		s->q_id[t] = cqe->buf_id;
		s->q_len[t] = (uint32_t)cqe->res;
		s->q_buf[t] = cqe->buf;
		s->q_n++;
	} else if (!(cqe->flags & CR_IO_F_MORE)) {
		if (cqe->res < 0) {
			relay_end(s, cqe->res);
			return;
		}
		s->eof = true;
	}
	copy_send(s);
}

static void
relay_start(void *arg)
{
	struct relay_run *s = arg;
	int rc = 0;

	if (s->splice)
		rc = cr_io_relay_start(&s->r, s->a[1], s->b[0], splice_done, s);
	else if ((s->recv = cr_io_recv(s->a[1], copy_recv, s)) == 0)
		rc = -errno;
	if (rc != 0)
		relay_end(s, rc);
}

static void
main_start(void *arg)
{
	struct relay_run *s = arg;
	int rc = cr_send(s->env->other, relay_start, s);

	if (rc != 0)
		relay_end(s, rc);
}

/* A connected loopback TCP pair: p[0] blocking, p[1] (accepted) nonblocking. */
static int
tcp_pair(int p[2])
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	p[0] = p[1] = -1;
	if (lfd < 0)
		return -1;
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(lfd, 4) == 0 &&
	    getsockname(lfd, (struct sockaddr *)&a, &len) == 0) {
		p[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (p[0] >= 0 && connect(p[0], (struct sockaddr *)&a, sizeof(a)) == 0)
			p[1] = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	}
	close(lfd);
	return p[1] >= 0 ? 0 : -1;
}

/* One round of one relay. @return CPU seconds per GB, or a negative value on failure. */
static double
relay_round(const struct bench_env *env, bool splice, uint64_t *bytes)
{
	struct relay_run *s = calloc(1, sizeof(*s));
	pthread_t ts, tk;
	double cpu0, main0, cpu, per_gb = -1;

	if (s == NULL)
		return -1;
	s->env = env;
	s->splice = splice;
	s->seconds = env->seconds;
	if (tcp_pair(s->a) != 0 || tcp_pair(s->b) != 0) {
		fprintf(stderr, "cr-bench: relay: loopback connections: %s\n", strerror(errno));
		goto out;
	}
	/* The relay's ends: a[1] (accepted) and b[1]; the sink reads b[0]. */
	{
		int t = s->b[0];

		s->b[0] = s->b[1];
		s->b[1] = t;
	}
	cpu0 = proc_cpu_s();
	main0 = thread_cpu_s();
	pthread_create(&ts, NULL, sender_main, s);
	pthread_create(&tk, NULL, sink_main, s);
	bench_phase(PHASE_ECHO_CR);
	cr_io_pipe_pool(0, 0); /* the build's default pool: the splice relay needs two pipes */
	bench_runtime(env, main_start, s, NULL);
	bench_phase_end();
	/* A relay that failed leaves the sender blocked and the sink waiting: end both. */
	if (s->err != 0) {
		shutdown(s->a[1], SHUT_RDWR);
		shutdown(s->b[1], SHUT_RDWR);
	}
	pthread_join(ts, NULL);
	pthread_join(tk, NULL);
	cpu = proc_cpu_s() - cpu0 - s->thread_cpu - (thread_cpu_s() - main0);
	*bytes = atomic_load(&s->got);
	if (s->err != 0 || *bytes != atomic_load(&s->sent))
		fprintf(stderr, "cr-bench: relay (%s): %s, %llu of %llu bytes\n",
			splice ? "splice" : "copy", s->err ? cr_strerror(s->err) : "short",
			(unsigned long long)*bytes, (unsigned long long)atomic_load(&s->sent));
	else if (*bytes != 0)
		per_gb = cpu / ((double)*bytes / 1e9);
out:
	for (int k = 0; k < 2; k++) {
		if (s->a[k] >= 0)
			close(s->a[k]);
		if (s->b[k] >= 0)
			close(s->b[k]);
	}
	free(s);
	return per_gb;
}

int
bench_relay_run(const struct bench_env *env)
{
	double v[2][RELAY_ROUNDS], sp, cp;
	uint64_t bytes[2] = {0, 0}, b;

	for (unsigned r = 0; r < RELAY_ROUNDS; r++)
		for (int m = 0; m < 2; m++) {
			v[m][r] = relay_round(env, m == 0, &b);
			if (v[m][r] < 0)
				return 1;
			bytes[m] += b;
		}
	sp = bench_median(v[0], RELAY_ROUNDS);
	cp = bench_median(v[1], RELAY_ROUNDS);
	if (env->json) {
		printf("{\"driver\": \"%s\", \"splice_cpu_s_per_gb\": %.4f, "
		       "\"copy_cpu_s_per_gb\": %.4f, \"ratio\": %.3f, \"splice_bytes\": %llu, "
		       "\"copy_bytes\": %llu}\n",
		       bench_runtime_driver(), sp, cp, sp / cp, (unsigned long long)bytes[0],
		       (unsigned long long)bytes[1]);
		return 0;
	}
	printf("relay on lcore %u (%s driver), %u rounds of %u s each, medians:\n", env->other,
	       bench_runtime_driver(), RELAY_ROUNDS, env->seconds);
	printf("  splice (cr_io_relay)      %.3f CPU s per GB  (%.2f GB moved)\n", sp,
	       (double)bytes[0] / 1e9);
	printf("  copy (recv + send)        %.3f CPU s per GB  (%.2f GB moved)\n", cp,
	       (double)bytes[1] / 1e9);
	printf("  splice / copy             %.2fx\n", sp / cp);
	return 0;
}
