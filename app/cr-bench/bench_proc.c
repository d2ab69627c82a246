/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Server processes the benchmark modes start and watch: spawn pinned with stdout on a
 * pipe, read the ready line, count the process's CPU time, stop.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

uint64_t
bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int
bench_exe_dir(char *dir, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", dir, len - 1);
	char *slash;

	if (n <= 0)
		return -errno;
	dir[n] = '\0';
	slash = strrchr(dir, '/');
	if (slash == NULL)
		return -ENOENT;
	*slash = '\0';
	return 0;
}

int
bench_self_path(char *path, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", path, len - 1);

	if (n <= 0)
		return -errno;
	path[n] = '\0';
	return 0;
}

int
bench_echo_path(char *path, size_t len)
{
	const char *env = getenv("CR_BENCH_ECHO");
	char dir[PATH_MAX];
	int rc;

	/* usertools/cr-bench says where cr-echo is (installed: the bindir); run from the
	 * build, it is in ../cr-echo/. */
	if (env != NULL && env[0] != '\0') {
		snprintf(path, len, "%s", env);
		return 0;
	}
	rc = bench_exe_dir(dir, sizeof(dir));
	if (rc != 0)
		return rc;
	snprintf(path, len, "%s/../cr-echo/cr-echo", dir);
	return 0;
}

/* In the child: pin, die with the parent, stdout to the pipe, exec. Never returns. */
static void
child_exec(const cpu_set_t *cpus, int wfd, const char *path, char *const argv[])
{
	if (sched_setaffinity(0, sizeof(*cpus), cpus) != 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 ||
	    dup2(wfd, STDOUT_FILENO) < 0)
		_exit(127);
	if (getppid() == 1)
		_exit(127); /* the parent is gone already */
	execv(path, argv);
	_exit(127);
}

/* Read the ready line ("... listening on HOST:PORT ..."); keep it in @p line. */
int
bench_proc_ready(struct bench_proc *s, char *line, size_t len)
{
	struct pollfd pfd = {.fd = s->out, .events = POLLIN};
	uint64_t deadline = bench_now_ns() + BENCH_READY_MS * 1000000ull;
	size_t have = 0;
	const char *at, *colon;
	ssize_t n;

	while (bench_now_ns() < deadline && have + 1 < len) {
		if (poll(&pfd, 1, 100) <= 0)
			continue;
		n = read(s->out, line + have, len - 1 - have);
		if (n <= 0)
			return -EPIPE; /* exited before it was ready */
		have += (size_t)n;
		line[have] = '\0';
		at = strstr(line, "listening on ");
		if (at == NULL || strchr(at, '\n') == NULL)
			continue;
		at += strlen("listening on ");
		colon = strchr(at, ' ');
		colon = colon != NULL ? colon : strchr(at, '\n');
		while (colon > at && colon[-1] != ':')
			colon--;
		*strchr(line, '\n') = '\0';
		s->port = (unsigned)atoi(colon);
		return s->port > 0 ? 0 : -EPROTO;
	}
	return -ETIMEDOUT;
}

void
bench_proc_stop(struct bench_proc *s)
{
	if (s->pid > 0) {
		kill(s->pid, SIGKILL);
		(void)waitpid(s->pid, NULL, 0);
	}
	bench_child_pid = 0;
	s->pid = 0;
	if (s->out >= 0)
		close(s->out);
	s->out = -1;
}

int
bench_proc_spawn(struct bench_proc *s, const char *path, char *const argv[], const cpu_set_t *cpus)
{
	int p[2], rc;

	s->pid = 0;
	s->out = -1;
	s->port = 0;
	if (access(path, X_OK) != 0)
		return -errno;
	if (pipe2(p, O_CLOEXEC) != 0)
		return -errno;
	fflush(NULL);
	s->pid = fork();
	if (s->pid == 0)
		child_exec(cpus, p[1], path, argv);
	close(p[1]);
	s->out = p[0];
	if (s->pid < 0) {
		rc = -errno;
		s->pid = 0;
		bench_proc_stop(s);
		return rc;
	}
	bench_child_pid = s->pid;
	return 0;
}

/* utime + stime of @p pid, in clock ticks. */
int
bench_proc_ticks(pid_t pid, uint64_t *ticks)
{
	char path[64], buf[1024];
	unsigned long long ut, st;
	const char *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* comm may hold spaces */
	/* after ")": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
	 * utime stime (fields 3..15) */
	if (p == NULL ||
	    sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -EPROTO;
	*ticks = ut + st;
	return 0;
}

bool
bench_proc_alive(pid_t pid)
{
	return waitpid(pid, NULL, WNOHANG) == 0;
}

