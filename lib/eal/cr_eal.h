/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Environment abstraction: options, topology -> lcore table, threads, memory.
 *
 * An lcore id is the OS index of the CPU (PU) it runs on, as in DPDK: `-l 0-3,6` names
 * CPUs 0..3 and 6, and lcore 6 runs pinned to CPU 6.
 */
#ifndef CR_EAL_H
#define CR_EAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cr_config.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A set of CPU / lcore ids below CR_MAX_LCORES. */
struct cr_cpuset {
	uint64_t bits[(CR_MAX_LCORES + 63) / 64];
};

static inline void
cr_cpuset_set(struct cr_cpuset *s, unsigned id)
{
	s->bits[id / 64] |= UINT64_C(1) << (id % 64);
}

static inline bool
cr_cpuset_isset(const struct cr_cpuset *s, unsigned id)
{
	return id < CR_MAX_LCORES && (s->bits[id / 64] >> (id % 64)) & 1;
}

/** Number of ids in @p s. */
unsigned cr_cpuset_count(const struct cr_cpuset *s);

/**
 * Format @p s as a corelist ("0-3,6"; "" when empty) into @p buf, truncated to @p len.
 * @return @p buf.
 */
char *cr_cpuset_format(const struct cr_cpuset *s, char *buf, size_t len);

/**
 * Parse a DPDK-style corelist: comma-separated ids and ranges, e.g. "0-3,6".
 *
 * @param s      the text; whitespace is not accepted.
 * @param out    cleared, then filled; left cleared on failure.
 * @param err    on failure receives one line (no newline) saying what is wrong with which
 *               part, e.g. "range 3-1 is reversed", "'x' is not a CPU id" or "CPU 999 is
 *               above the largest supported id 127"; may be NULL.
 * @param errlen size of @p err.
 * @return 0, or -EINVAL (empty list, empty element, non-digit, reversed range, id too
 *         large, trailing garbage).
 */
int cr_corelist_parse(const char *s, struct cr_cpuset *out, char *err, size_t errlen);

/** I/O driver choice (`--io-driver`). */
enum cr_io_driver {
	CR_IO_DRIVER_AUTO = 0,
	CR_IO_DRIVER_URING,
	CR_IO_DRIVER_EPOLL,
};

/** Common options every coreact app takes (doc/guides/design.md, "Apps and tools"). */
struct cr_eal_config {
	char corelist[256];	   /**< -l as given; "" = default selection. */
	int main_lcore;		   /**< --main-lcore; -1 = lowest id in the list. */
	bool smt;		   /**< --smt: every PU instead of one per core. */
	enum cr_io_driver io_driver; /**< --io-driver. */
	bool poll_mode;		   /**< --poll-mode: never park. */
	/**
	 * --idle-spin USEC: an idle lcore spins idle_spin_ns before it parks (0: parks at
	 * once). Without it (idle_spin_fixed false, "auto") the budget adapts.
	 */
	bool idle_spin_fixed;
	uint64_t idle_spin_ns;
	char telemetry[108];	   /**< --telemetry PATH|off; "" = default path. */
	double shutdown_timeout;   /**< --shutdown-timeout SECONDS, default 10. */
	/** Tests only: hwloc synthetic topology string; NULL = this machine. */
	const char *topology_synthetic;
	/** Tests only: allowed CPUs (as taskset would set); NULL = the process's cpuset. */
	const struct cr_cpuset *allowed;
};

/**
 * Fill @p cfg with the defaults: no corelist, main_lcore -1, auto driver, telemetry at
 * the default path, shutdown_timeout 10, this machine's topology and cpuset.
 */
void cr_eal_config_defaults(struct cr_eal_config *cfg);

/** One selected lcore. */
struct cr_lcore_info {
	unsigned lcore_id; /**< == cpu */
	unsigned cpu;	   /**< OS index of the PU */
	unsigned core;	   /**< logical index of its physical core */
	unsigned package;  /**< logical index of its package */
	int numa_node;	   /**< OS index of its NUMA node, -1 if unknown */
};

/** The lcores a configuration selects, sorted by id. */
struct cr_lcore_table {
	unsigned n;
	unsigned main_lcore;
	struct cr_lcore_info lcores[CR_MAX_LCORES];
};

/**
 * Discover the topology with hwloc and choose the lcores.
 *
 * Default (empty corelist): the first (lowest-numbered) allowed PU of every physical core
 * (every allowed PU with smt); cores without an allowed PU are skipped. With a corelist:
 * exactly those CPUs, each of which must exist, be below CR_MAX_LCORES and be allowed.
 * main_lcore must be in the result; -1 picks the lowest id.
 *
 * The allowed cpuset is cfg->allowed if set, else every PU of a synthetic topology, else
 * the cgroup's cpuset narrowed by the calling thread's affinity (taskset).
 *
 * Control path: loads and frees an hwloc topology (milliseconds). Any thread.
 *
 * @param out receives the table; unspecified on failure.
 * @param err receives one line (no newline) naming the option, the value and what is
 *            accepted, e.g. "-l 0-999: CPU 999 does not exist; this machine has CPUs 0-1"
 *            or "--main-lcore 5: not in the lcore list 0-1; accepted: one of 0-1";
 *            may be NULL.
 * @return 0, -EINVAL (bad value or synthetic topology, message in @p err), -ENOMEM, or
 *         another -errno from hwloc.
 */
int cr_eal_lcore_table(const struct cr_eal_config *cfg, struct cr_lcore_table *out,
		       char *err, size_t errlen);

/** Format a table's ids as a corelist ("0-3,6") into @p buf. @return @p buf. */
char *cr_lcore_table_corelist(const struct cr_lcore_table *t, char *buf, size_t len);

/** An application option, for cr_eal_parse_args(). */
struct cr_opt {
	const char *name;     /**< long name without "--" */
	char short_name;      /**< 0 if none */
	const char *metavar;  /**< argument name in --help; NULL for a flag */
	const char *help;     /**< one line for --help */
	const char *accepted; /**< what values are accepted, for the error line */
	/** Store @p val (NULL for a flag); return 0 or -EINVAL for a bad value. */
	int (*set)(const char *val, void *ctx);
	void *ctx;
};

/** What an app tells the parser about itself. */
struct cr_app_info {
	const char *name;	 /**< program name, e.g. "cr-echo" */
	const char *summary;	 /**< one line for --help */
	const struct cr_opt *opts; /**< app options, may be NULL */
	unsigned n_opts;
	const char *args;	 /**< positional arguments for the usage line, e.g. "MODE"; may be NULL */
};

/**
 * Parse the common options and the app's, then validate the lcore choice against the
 * topology (so a bad -l fails before anything starts).
 *
 * Options are `--name VALUE`, `--name=VALUE`, `-x VALUE` or `-xVALUE`; a value is the
 * next word even if it starts with '-'. Options end at "--" or at the first word that
 * does not start with '-' (no reordering). Common options are matched before the app's.
 * --log-level, --log-file, --syslog and --log-timestamps are applied as soon as they are
 * parsed (cr_log_set_level(), cr_log_set_file(), ...); app setters run in command-line
 * order.
 *
 * Prints --help / --version to stdout. On a bad option prints exactly one line to stderr,
 * "<app>: <option> <value>: <what is wrong>; accepted: <what is accepted>", e.g.
 * "cr-echo: --io-driver foo: unknown driver; accepted: auto, uring, epoll"; an lcore
 * choice the topology rejects is printed as "<app>: <err of cr_eal_lcore_table()>".
 * Prints nothing on success. Control path; keeps no state between calls.
 *
 * @param cfg       filled by cr_eal_config_defaults() beforehand (tests may then set
 *                  topology_synthetic / allowed); options overwrite its fields.
 * @param first_arg receives the index of the first non-option argument; may be NULL.
 * @param table     receives the chosen lcores; may be NULL to skip validation.
 * @return 0 to go on, 1 if help or version was printed (exit 0), -EINVAL on a usage
 *         error (exit 2), or another -errno (e.g. -ENOMEM from hwloc or an app setter;
 *         the line on stderr then gives the error string).
 */
int cr_eal_parse_args(int argc, char **argv, const struct cr_app_info *app,
		      struct cr_eal_config *cfg, struct cr_lcore_table *table, int *first_arg);

/**
 * The option (common or the app's) whose long name is @p name, or NULL. Control path.
 */
const struct cr_opt *cr_eal_find_opt(const struct cr_app_info *app, const char *name);

/**
 * Apply one option by its long name, as `--NAME VALUE` (or `--NAME` for a flag, @p val
 * NULL) on the command line would: the config-file path of lib/app. Errors are one line on
 * stderr like cr_eal_parse_args()'s, with @p where ("FILE:LINE") in place of the dashes:
 * "<app>: FILE:LINE: KEY VALUE: <what is wrong>; accepted: <what is accepted>". An
 * unknown name, --help / --version, a value for a flag and no value for an option that
 * needs one are usage errors too. Control path; keeps no state between calls.
 * @param cfg as for cr_eal_parse_args(); common options write into it.
 * @return 0; -EINVAL after the line (exit 2); another -errno from a setter (the line then
 *         gives the error string).
 */
int cr_eal_apply_opt(const struct cr_app_info *app, struct cr_eal_config *cfg, const char *name,
		     const char *val, const char *where);

/**
 * From an option's setter that is about to return -EINVAL for a compound value: say which
 * @p part of it is wrong and what that part accepts (e.g. "weight=999" and "0-256" for
 * `--backend 127.0.0.1:80,weight=999`), so the error line names the part instead of only
 * the whole value. Both strings are copied. Only the setter's own thread, during the call.
 */
void cr_opt_bad_part(const char *part, const char *accepted);

/**
 * Let a higher layer add lines to --version output (the reactor adds the io driver that
 * --io-driver would choose here, lib/tls how records are made). Call from a constructor;
 * up to four layers, printed in the order they registered (the same @p fn once). @p fn
 * gets the options parsed so far.
 */
void cr_eal_set_version_extra(void (*fn)(FILE *f, const struct cr_eal_config *cfg));

/** Parse "0.5" etc. into seconds; -EINVAL unless a finite number >= 0 (no spaces). */
int cr_parse_seconds(const char *s, double *out);
/** Parse an unsigned decimal (digits only) within [min, max]; -EINVAL otherwise. */
int cr_parse_uint(const char *s, unsigned long long min, unsigned long long max,
		  unsigned long long *out);

/* ---- threads ---- */

/** Pin the calling thread to @p cpu. @return 0 or -errno. Any thread. */
int cr_thread_pin_self(unsigned cpu);
/**
 * Give the calling thread the CPU affinity the process had when it started (for helper
 * threads created from a pinned lcore). @return 0 or -errno. Any thread.
 */
int cr_thread_unpin_self(void);

/** For cr_thread_create(): do not pin; the thread inherits the creator's affinity. */
#define CR_CPU_ANY UINT32_MAX

/**
 * Start a thread pinned to @p cpu before @p fn runs (CR_CPU_ANY: not pinned), named
 * @p name (<= 15 chars, named before @p fn runs; NULL keeps the inherited name). Control path; any thread.
 * @param handle receives the thread, to pass to cr_thread_join() exactly once.
 * @return 0, -EINVAL (NULL @p handle or @p fn, name too long, CPU not allowed), -ENOMEM,
 *         -EAGAIN (thread limit).
 */
int cr_thread_create(void **handle, unsigned cpu, const char *name, void *(*fn)(void *),
		     void *arg);
/** True when @p handle is the calling thread. Any thread. */
bool cr_thread_is_self(const void *handle);

/**
 * Wait for a thread started by cr_thread_create() and free its handle (its return value
 * is discarded). @return 0, -EINVAL (NULL), or -errno from pthread_join (handle kept).
 */
int cr_thread_join(void *handle);

/**
 * Let a thread started by cr_thread_create() go without a join: its resources are freed
 * when it ends, and so is @p handle, at once. Instead of cr_thread_join(), exactly once.
 * @return 0, -EINVAL (NULL), or -errno from pthread_detach (handle kept).
 */
int cr_thread_detach(void *handle);

/* ---- memory ---- */

/**
 * Zeroed memory bound to NUMA node @p node (-1: no binding), aligned to 64 bytes.
 * A node this machine does not have, or a kernel that refuses the binding, gives unbound
 * memory rather than an error. Control path only: one mmap per call. Any thread.
 * @return NULL and errno (EINVAL for size 0, ENOMEM) on failure.
 */
void *cr_numa_zalloc(size_t size, int node);
/** Free memory from cr_numa_zalloc(); NULL is fine. */
void cr_numa_free(void *p);
/**
 * Free memory from cr_numa_zalloc() seen as @p n units of @p unit bytes from @p p, all but
 * the pages of the units @p keep(@p i, @p arg) says are still in use: those stay mapped,
 * at their addresses, until the process exits (nothing frees them; never call
 * cr_numa_free() on @p p after this). For a pool some of whose entries outlive their
 * owner (receive buffers an app holds when its lcore stops). Control path only.
 * @return the bytes left mapped.
 */
size_t cr_numa_free_except(void *p, size_t unit, size_t n, bool (*keep)(size_t i, void *arg),
			   void *arg);

/* ---- the service manager ---- */

/**
 * Tell the service manager (systemd, Type=notify) about the process: @p state is one or
 * more "KEY=VALUE" lines, e.g. "READY=1", "STOPPING=1", "RELOADING=1",
 * "STATUS=listening on 127.0.0.1:8080". Sent as one datagram to the unix socket
 * $NOTIFY_SOCKET names (a path, or an abstract name written with a leading '@'), as
 * sd_notify(3) does; without $NOTIFY_SOCKET, nothing is sent. Never blocks for long (a
 * datagram to a local socket). Control path; any thread.
 * @return 0 (sent, or no $NOTIFY_SOCKET); -EINVAL (NULL or empty @p state, longer than 4
 *         KiB, or $NOTIFY_SOCKET neither a path nor '@name'); -ENAMETOOLONG; -errno from
 *         socket(2) or sendto(2) (e.g. -ECONNREFUSED: nobody listens there).
 */
int cr_sd_notify(const char *state);

/** cr_sd_notify() with a printf-style @p fmt (at most 4 KiB once formatted). */
int cr_sd_notifyf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- clocks ---- */

/** CLOCK_MONOTONIC in nanoseconds. */
uint64_t cr_clock_ns(void);

/** A unix time broken down into UTC fields, by cr_time_utc(). */
struct cr_utc {
	int64_t year;	/**< proleptic Gregorian: 1970, 2026, ... */
	unsigned month; /**< 1-12 */
	unsigned day;	/**< 1-31 */
	unsigned hour, min, sec;
};

/**
 * Break @p sec (seconds since 1970-01-01 UTC, negative before) into UTC fields, with
 * plain arithmetic: no time zone lock (gmtime_r() takes glibc's), no system call, so an
 * lcore may stamp a line with it (lib/eal's log, cr-proxy's session log). Any thread.
 */
void cr_time_utc(int64_t sec, struct cr_utc *out);

/** True when running under a hypervisor (CPUID hypervisor bit). */
bool cr_eal_is_vm(void);

/**
 * strerror for a negative (or positive) errno value. The string stays valid until the
 * calling thread's next cr_strerror() call. Any thread.
 */
const char *cr_strerror(int err);

#ifdef __cplusplus
}
#endif
#endif /* CR_EAL_H */
