/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The slow log (SLOWLOG, --slowlog-log-slower-than, --slowlog-max-len) and the command-time
 * histogram, as Redis 7.0 keeps its slow log: a command whose run took at least the
 * threshold is logged with its arguments (at most 32, each cut at 128 bytes), the client's
 * address and name.
 *
 * Per lcore. The entry is made on the client's lcore when the command's reply is complete
 * (its run time is then known: the time its parts ran on their shards, carried back with
 * them), into that lcore's own list, newest first: no lock, one malloc() per entry logged
 * (Redis allocates its entry too) and nothing for a command under the threshold. SLOWLOG
 * GET, LEN and RESET run as a part on every shard (KV_MERGE_SLOWLOG): each lcore answers
 * with its own entries, which the client's lcore merges newest first by time; ids come
 * from one process-wide counter, and a process-wide floor of ids drops what Redis's one
 * list would have trimmed (slowlog.c).
 */
#ifndef CR_KV_SLOWLOG_H
#define CR_KV_SLOWLOG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct kv_slowentry;

/* One lcore's entries, touched only by its lcore. */
struct kv_slowlog {
	struct kv_slowentry *newest, *oldest;
	uint64_t n;
};

/* Set by options and CONFIG SET on any lcore, read on every lcore: relaxed. */
extern _Atomic long long kv_slowlog_slower_than; /* us; -1: off */
extern _Atomic long long kv_slowlog_max_len;

struct kconn;
struct kv_cmd;
struct kv_arg;
struct kv_shard;

/* Command @p cmd of client @p kc ran for @p ns on its shard(s) (@p failed: it answered an
 * error): into INFO commandstats, the histogram, and the slow log if it took long enough
 * (never EXEC's own: Redis logs the commands it runs). On the client's lcore. */
void kv_cmd_ran(struct kconn *kc, const struct kv_cmd *cmd, uint32_t argc,
		const struct kv_arg *argv, uint64_t ns, bool failed);

/* The histogram, registered at start (0 or -errno). */
int kv_slowlog_register(void);

/* metrics.c: the per-shard series and the histogram, registered at start (0 or -errno);
 * the shard's key count published at its tick. */
int kv_metrics_register(void);
void kv_metrics_tick(struct kv_shard *sh);

/* A slowlog-log-slower-than (@p max_len false) or slowlog-max-len value, as Redis 7.0's
 * CONFIG SET parses it: -EINVAL with its reason in @p msg (cmd_config.c). */
int kv_parse_slowlog(const char *v, bool max_len, long long *out, const char **msg);

/* Set slowlog-max-len (an option, CONFIG SET): what is over it is gone, as in Redis. */
void kv_slowlog_set_max_len(long long n);

/* Free the lcore's entries (at process end). */
void kv_slowlog_fini(struct kv_slowlog *l);

#endif /* CR_KV_SLOWLOG_H */
