/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The process_* metrics every Prometheus client library exports, under their usual names
 * so that dashboards made for them work: CPU time, memory, file descriptors, start time.
 * Read from /proc/self and getrusage(2) on the telemetry thread at each scrape.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "telemetry_internal.h"

/* Read a small file whole into @p buf. @return its length, or -1. */
static ssize_t
read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return n;
}

/* Field @p k (1-based, as proc(5) numbers them) of /proc/self/stat. */
static bool
stat_field(unsigned k, unsigned long long *out)
{
	char buf[1024], *p;

	if (read_small("/proc/self/stat", buf, sizeof(buf)) < 0)
		return false;
	/* The command name, field 2, is in parentheses and may hold spaces: start after it. */
	p = strrchr(buf, ')');
	if (p == NULL || k < 3)
		return false;
	p++;
	for (unsigned i = 3; i <= k; i++) {
		char *end;

		while (*p == ' ')
			p++;
		if (i == k) {
			*out = strtoull(p, &end, 10);
			return end != p;
		}
		p = strchr(p, ' ');
		if (p == NULL)
			return false;
	}
	return false;
}

/* Seconds since the epoch at which the machine booted (btime of /proc/stat). */
static bool
boot_time(unsigned long long *out)
{
	char buf[8192], *p;

	if (read_small("/proc/stat", buf, sizeof(buf)) < 0)
		return false;
	p = strstr(buf, "\nbtime ");
	return p != NULL && sscanf(p + 7, "%llu", out) == 1;
}

static long
open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	long n = 0;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	/* Less the descriptor opendir() holds while it reads. */
	return n - 1;
}

static void
metric(struct cr__tbuf *t, const char *name, const char *type, const char *help, double v)
{
	cr__prom_header(t, name, type, help);
	cr__tbuf_printf(t, "%s ", name);
	cr__prom_value(t, v);
	cr__tbuf_put(t, "\n", 1);
}

void
cr__prom_render_process(struct cr__tbuf *t)
{
	long page = sysconf(_SC_PAGESIZE), tick = sysconf(_SC_CLK_TCK), fds = open_fds();
	unsigned long long vsize, rss, start, btime;
	struct rusage ru;
	struct rlimit rl;

	if (getrusage(RUSAGE_SELF, &ru) == 0)
		metric(t, "process_cpu_seconds_total", "counter",
		       "Total user and system CPU time spent in seconds.",
		       (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
			   (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6);
	if (stat_field(23, &vsize))
		metric(t, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
		       (double)vsize);
	if (stat_field(24, &rss) && page > 0)
		metric(t, "process_resident_memory_bytes", "gauge",
		       "Resident memory size in bytes.", (double)rss * (double)page);
	if (fds >= 0)
		metric(t, "process_open_fds", "gauge", "Number of open file descriptors.",
		       (double)fds);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		metric(t, "process_max_fds", "gauge", "Maximum number of open file descriptors.",
		       (double)rl.rlim_cur);
	if (stat_field(22, &start) && boot_time(&btime) && tick > 0)
		metric(t, "process_start_time_seconds", "gauge",
		       "Start time of the process since unix epoch in seconds.",
		       (double)btime + (double)start / (double)tick);
}
