/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The INFO sections Redis 7.0 has that tell what a server without persistence, replicas,
 * modules or cluster is: Persistence, Replication, CPU, Modules, Errorstats, Cluster;
 * with the fields cr-kv can fill honestly (nothing is ever saved or loaded, it is a
 * master with no replica, no module is loaded). The rest of INFO: cmd_server.c.
 */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "kv.h"

static void line(struct rbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#include <stdarg.h>

static void
line(struct rbuf *b, const char *fmt, ...)
{
	char l[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(l, sizeof(l), fmt, ap);
	va_end(ap);
	if (n > 0)
		rb_raw(b, l, (size_t)n < sizeof(l) ? (size_t)n : sizeof(l) - 1);
	rb_raw(b, "\r\n", 2);
}

void
kv_info_persistence(struct rbuf *b)
{
	line(b, "loading:0");
	line(b, "async_loading:0");
	line(b, "rdb_bgsave_in_progress:0");
	line(b, "rdb_last_save_time:%llu", (unsigned long long)kv.start_ms / 1000);
	line(b, "rdb_last_bgsave_status:ok");
	line(b, "rdb_last_bgsave_time_sec:-1");
	line(b, "rdb_current_bgsave_time_sec:-1");
	line(b, "rdb_saves:0");
	line(b, "aof_enabled:0");
	line(b, "aof_rewrite_in_progress:0");
	line(b, "aof_rewrite_scheduled:0");
	line(b, "aof_last_rewrite_time_sec:-1");
	line(b, "aof_current_rewrite_time_sec:-1");
	line(b, "aof_last_bgrewrite_status:ok");
	line(b, "aof_rewrites:0");
	line(b, "aof_last_write_status:ok");
}

void
kv_info_replication(struct rbuf *b)
{
	line(b, "role:master");
	line(b, "connected_slaves:0");
	line(b, "master_failover_state:no-failover");
	line(b, "master_repl_offset:0");
	line(b, "second_repl_offset:-1");
	line(b, "repl_backlog_active:0");
	line(b, "repl_backlog_histlen:0");
}

void
kv_info_cpu(struct rbuf *b)
{
	struct rusage self, children;

	if (getrusage(RUSAGE_SELF, &self) != 0)
		memset(&self, 0, sizeof(self));
	if (getrusage(RUSAGE_CHILDREN, &children) != 0)
		memset(&children, 0, sizeof(children));
	line(b, "used_cpu_sys:%ld.%06ld", (long)self.ru_stime.tv_sec, (long)self.ru_stime.tv_usec);
	line(b, "used_cpu_user:%ld.%06ld", (long)self.ru_utime.tv_sec, (long)self.ru_utime.tv_usec);
	line(b, "used_cpu_sys_children:%ld.%06ld", (long)children.ru_stime.tv_sec,
	     (long)children.ru_stime.tv_usec);
	line(b, "used_cpu_user_children:%ld.%06ld", (long)children.ru_utime.tv_sec,
	     (long)children.ru_utime.tv_usec);
}

/* @p errs: every lcore's counts added up, by code, then the total (errstat.c). */
void
kv_info_errorstats(struct rbuf *b, const long long *errs)
{
	unsigned i;

	for (i = 0; i < KV_ERRSTAT_KINDS; i++)
		if (errs[i] > 0 && kv_errstat_name(i) != NULL)
			line(b, "errorstat_%s:count=%lld", kv_errstat_name(i), errs[i]);
}

void
kv_info_cluster(struct rbuf *b)
{
	line(b, "cluster_enabled:0");
}
