/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Telemetry: per-lcore counters read without locks, a unix-socket JSON endpoint per process,
 * and Prometheus text over HTTP (doc/guides/design.md "Telemetry").
 *
 * A telemetry thread (not an lcore) owns the sockets. A client sends one request line per
 * command, "/stats" or "/lcore/retire,3" (the command, then optionally ',' and parameters),
 * and gets one JSON document on one line back: {"/stats": ...} on success, {"error": "..."}
 * otherwise. Built in: /help, /lcores, /stats, /info, and the lifecycle requests
 * /pool/resize,N, /lcore/retire,ID, /lcore/start,ID; libraries and apps add theirs with
 * cr_telemetry_register().
 *
 * The socket is `<dir>/<app>.<pid>.sock`, where dir is `$XDG_RUNTIME_DIR/coreact` or else
 * `/tmp/coreact-<uid>`, created with mode 0700 (or the path given by `--telemetry PATH`).
 * The socket has mode 0600, and a peer whose uid is neither ours nor root's is refused.
 *
 * Counters: the reactor's own (cr_lcore_stats()), readers that other libraries register
 * (cr_telemetry_reader_register(): ops in flight, connections, ...), and app counters and
 * gauges: per-lcore slots in lcore-owned cache lines, written by their lcore with
 * cr_telemetry_add() / cr_telemetry_set() and summed by telemetry.
 */
#ifndef CR_TELEMETRY_H
#define CR_TELEMETRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cr_config.h"
#include "cr_eal.h"
#include "cr_reactor.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Longest request line in bytes, its newline excluded; longer ones get an error. */
#define CR_TELEMETRY_MAX_REQUEST 1024
/** Longest reply in bytes; a handler that writes more gets an error reply instead. */
#define CR_TELEMETRY_MAX_REPLY (1024 * 1024)
/** Commands that can be registered, built-ins excluded. */
#define CR_TELEMETRY_MAX_COMMANDS 64
/** Longest command name plus its NUL ("/pool/resize" is 12 + 1). */
#define CR_TELEMETRY_CMD_LEN 64
/** Longest help text plus its NUL; longer help is truncated. */
#define CR_TELEMETRY_HELP_LEN 256
/** App counters and gauges that can be registered. */
#define CR_TELEMETRY_MAX_COUNTERS 64
/** Readers that can be registered. */
#define CR_TELEMETRY_MAX_READERS 16
/** Longest counter or reader name plus its NUL. */
#define CR_TELEMETRY_NAME_LEN 48
/** Unix-socket clients served at once; more are refused with an error. */
#define CR_TELEMETRY_MAX_CLIENTS 16
/**
 * HTTP (--metrics) clients served at once, in a table of their own: they never take a unix
 * client's slot. One that has not sent its whole request within 5 s is dropped; when the
 * table is full, a new one takes the slot of the oldest still sending its request.
 */
#define CR_TELEMETRY_MAX_HTTP_CLIENTS 16

/* ---- JSON writer ---- */

/** Deepest nesting of objects and arrays. */
#define CR_JSON_MAX_DEPTH 16

/**
 * A JSON writer over a caller's buffer. Whatever the calls, the text is valid JSON once
 * cr_json_finish() returns 0: strings are escaped (invalid UTF-8 becomes U+FFFD), non-finite
 * numbers become null, and a misuse (a key where none belongs, a missing key, an end that
 * does not match, a second top-level value) is recorded and reported by cr_json_finish()
 * rather than written. Set up with cr_json_init(); every field is private.
 */
struct cr_json {
	char *buf;			       /* private */
	size_t cap, len;		       /* private */
	unsigned depth;			       /* private */
	bool is_array[CR_JSON_MAX_DEPTH + 1];  /* private: per level */
	bool has_items[CR_JSON_MAX_DEPTH + 1]; /* private: per level */
	bool key_pending;		       /* private: a key is written, its value is not */
	bool top_done;			       /* private */
	bool overflow, misuse;		       /* private */
	char errmsg[256];		       /* private: cr_json_errorf() */
};

/**
 * Start writing into @p buf (@p cap bytes, at least 1). The text is kept NUL-terminated.
 * @p buf must stay valid while @p j is used; it stays the caller's. Any thread; a writer
 * is used by one thread at a time.
 */
void cr_json_init(struct cr_json *j, char *buf, size_t cap);

/**
 * Open an object. @p key names it inside an object and must be NULL inside an array or at
 * the top level (the same rule holds for every value writer below).
 */
void cr_json_object_begin(struct cr_json *j, const char *key);
/** Close the innermost object. */
void cr_json_object_end(struct cr_json *j);
/** Open an array; @p key as for cr_json_object_begin(). */
void cr_json_array_begin(struct cr_json *j, const char *key);
/** Close the innermost array. */
void cr_json_array_end(struct cr_json *j);
/** Write a string value, escaped; @p val NULL writes null. */
void cr_json_string(struct cr_json *j, const char *key, const char *val);
/** Write a string value formatted printf-style (truncated at 1 KiB), escaped. */
void cr_json_stringf(struct cr_json *j, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/** Write an unsigned integer. */
void cr_json_u64(struct cr_json *j, const char *key, uint64_t val);
/** Write a signed integer. */
void cr_json_i64(struct cr_json *j, const char *key, int64_t val);
/** Write a number; NaN and infinities are written as null. */
void cr_json_double(struct cr_json *j, const char *key, double val);
/** Write true or false. */
void cr_json_bool(struct cr_json *j, const char *key, bool val);
/** Write null. */
void cr_json_null(struct cr_json *j, const char *key);

/**
 * Check the document is complete.
 * @return 0 (the text is valid JSON: one value, every object and array closed);
 *         -ENOSPC (the buffer was too small; the text is cut short);
 *         -EINVAL (a misuse, or something left open, or nothing written).
 */
int cr_json_finish(const struct cr_json *j);

/** The text written so far, NUL-terminated; valid while the buffer is. */
const char *cr_json_text(const struct cr_json *j);

/** Its length in bytes, NUL excluded. */
size_t cr_json_len(const struct cr_json *j);

/**
 * For command handlers: record a one-line error message (printf-style, truncated at 255
 * bytes) that the reply will carry instead of the handler's output, and return @p err, so
 * that a handler can end with `return cr_json_errorf(reply, -EINVAL, "...", ...);`.
 * @return @p err.
 */
int cr_json_errorf(struct cr_json *j, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ---- commands ---- */

/**
 * A command handler. Runs on the telemetry thread, one request at a time, so it must not
 * block for long (cr_telemetry_call_on() waits at most its timeout). It writes exactly one
 * value with a NULL key into @p reply (an object, an array or a scalar; nothing at all
 * gives null); the server wraps it as {"<cmd>": value}.
 *
 * @param cmd    the command as registered, e.g. "/pool/resize".
 * @param params what followed the first ',' of the request ("" when nothing did); valid
 *               until the handler returns.
 * @param reply  the writer to fill.
 * @return 0, or a negative errno: the reply is then {"error": "<cmd>: <message>"} with the
 *         message set by cr_json_errorf(), or the errno's text if none was set.
 */
typedef int (*cr_telemetry_cmd_fn)(const char *cmd, const char *params, struct cr_json *reply);

/**
 * Register command @p cmd. Names start with '/' and hold only letters, digits and
 * "/_-.", at most CR_TELEMETRY_CMD_LEN - 1 bytes. Commands stay registered for the life of
 * the process and may be registered before or after cr_telemetry_start(). Control path;
 * any thread (a constructor is fine).
 *
 * @param cmd  copied.
 * @param fn   the handler.
 * @param help one line for /help; copied (truncated to CR_TELEMETRY_HELP_LEN - 1 bytes);
 *             NULL for none.
 * @return 0; -EINVAL (bad name, NULL @p fn); -EEXIST (a command by that name, built-ins
 *         included); -ENOSPC (CR_TELEMETRY_MAX_COMMANDS are registered).
 */
int cr_telemetry_register(const char *cmd, cr_telemetry_cmd_fn fn, const char *help);

/**
 * Run @p fn(@p arg) on lcore @p lcore and wait until it has run, for command handlers that
 * must act on an lcore (rule 1: lcore-owned state is touched only by its lcore). It either
 * runs exactly once, or not at all: on -ETIMEDOUT it was withdrawn before it started and
 * never runs. Off an lcore only (the telemetry thread, or another thread that is not an
 * lcore); not after cr_reactor_fini() began.
 *
 * @param arg        the caller's; must stay valid until this returns.
 * @param timeout_ns how long to wait for @p fn to start.
 * @return 0 (@p fn ran); -EPERM (called on an lcore); -ETIMEDOUT; -ENOMEM; or cr_send()'s
 *         errors: -EINVAL (no such lcore, @p fn NULL), -ESHUTDOWN, -EAGAIN.
 */
int cr_telemetry_call_on(unsigned lcore, cr_msg_fn fn, void *arg, uint64_t timeout_ns);

/* ---- counters ---- */

/** How a value adds up. Both are summed over lcores for totals. */
enum cr_telemetry_kind {
	CR_TELEMETRY_COUNTER = 0, /**< only grows (Prometheus counter, name gets _total) */
	CR_TELEMETRY_GAUGE,	  /**< goes up and down (Prometheus gauge) */
};

/**
 * Register an app counter or gauge: one u64 slot per lcore, starting at 0, written by its
 * lcore with cr_telemetry_add() or cr_telemetry_set(), listed per lcore and summed by /stats
 * under "app", and exported to Prometheus as coreact_app_<name>[_total]. Registering the
 * same name with the same kind again returns the same id. Control path; any thread; at
 * app start, before the lcores write.
 *
 * @param name [a-z_][a-z0-9_]*, at most CR_TELEMETRY_NAME_LEN - 1 bytes; copied.
 * @param help one line; copied (truncated); NULL for none.
 * @return the id (>= 0) to pass to cr_telemetry_add() / cr_telemetry_set(); -EINVAL (bad
 *         name or kind); -EEXIST (the name is a reader's, a built-in counter's, or a
 *         counter's of the other kind); -ENOSPC (CR_TELEMETRY_MAX_COUNTERS registered).
 */
int cr_telemetry_counter_register(const char *name, enum cr_telemetry_kind kind, const char *help);

/**
 * Snapshot app counter @p id of lcore @p lcore. Any thread, no lock.
 * @return 0; -EINVAL (no such counter, lcore id out of range).
 */
int cr_telemetry_counter_read(int id, unsigned lcore, uint64_t *out);

/**
 * Reads one per-lcore value owned by another library, e.g. connections from lib/net.
 * Called on the telemetry thread while the lcore runs, so it must be safe from any thread
 * (a relaxed load of an lcore-owned counter). @return 0, or -errno to leave it out.
 */
typedef int (*cr_telemetry_read_fn)(unsigned lcore, uint64_t *out, void *arg);

/**
 * Register a reader: a per-lcore value reported by /stats next to the reactor's counters
 * (same JSON object, same total) and exported as coreact_lcore_<name>[_total]. lib/io
 * registers "ops_in_flight"; "mailbox_depth" is a built-in field already. Control path;
 * any thread (a constructor is fine).
 *
 * @param name as for cr_telemetry_counter_register(); copied.
 * @param help copied; NULL for none.
 * @param arg  passed to @p fn; must stay valid for the life of the process.
 * @return 0; -EINVAL (bad name or kind, NULL @p fn); -EEXIST (name taken); -ENOSPC.
 */
int cr_telemetry_reader_register(const char *name, enum cr_telemetry_kind kind, const char *help,
				 cr_telemetry_read_fn fn, void *arg);

/* ---- Prometheus names ---- */

/**
 * How a counter, gauge or reader is exported to Prometheus when the default name
 * (coreact_app_<name>, coreact_lcore_<name>) will not do: a family name of its own,
 * with the unit as its suffix ("http_static_file_bytes", "net_received_bytes"), and
 * optionally one label that tells this value from the others of its family, so that
 * several values are one metric ("http_responses" with code="2xx", code="4xx", ...).
 * Every sample has the lcore label too. The JSON name (/stats) stays the registered one.
 */
struct cr_telemetry_prom {
	/** After "coreact_", [a-z_][a-z0-9_]*; a counter's gets "_total". */
	const char *family;
	/** A label name ([a-z_][a-z0-9_]*, not "lcore", "le" or "__*"); NULL for none. */
	const char *label;
	/** Its value for this entry, e.g. "2xx"; at most 63 bytes. */
	const char *label_value;
};

/**
 * cr_telemetry_counter_register() with a Prometheus name of its own. Every entry of a
 * family must have the same kind and label name (and differ in the label's value); the
 * family's HELP is the first entry's help. @p prom may be NULL (the default name); its
 * strings are copied.
 * @return as cr_telemetry_counter_register(), and -EINVAL for a bad family or label,
 *         -EEXIST for a family another entry uses with another kind or label name, the
 *         same label value, or that a built-in metric has.
 */
int cr_telemetry_counter_register_prom(const char *name, enum cr_telemetry_kind kind,
				       const char *help, const struct cr_telemetry_prom *prom);

/**
 * cr_telemetry_reader_register() with a Prometheus name of its own; the rules of
 * cr_telemetry_counter_register_prom().
 */
int cr_telemetry_reader_register_prom(const char *name, enum cr_telemetry_kind kind,
				      const char *help, const struct cr_telemetry_prom *prom,
				      cr_telemetry_read_fn fn, void *arg);

/** A writer of Prometheus families, for a cr_telemetry_prom_fn. Opaque. */
struct cr_prom;

/**
 * Writes families of its own into the Prometheus text at each scrape, for values that
 * per-lcore slots do not fit: labels only known at run time (a proxy's backends). Runs on
 * the telemetry thread, so it reads what it reports with loads that are safe from any
 * thread, and must not block.
 */
typedef void (*cr_telemetry_prom_fn)(struct cr_prom *p, void *arg);

/** Collectors that can be registered. */
#define CR_TELEMETRY_MAX_COLLECTORS 8

/**
 * Register a collector; it runs at every scrape of /metrics, after the built-in metrics,
 * in registration order. Control path; any thread.
 * @param arg passed to @p fn; must stay valid for the life of the process.
 * @return 0; -EINVAL (NULL @p fn); -ENOSPC (CR_TELEMETRY_MAX_COLLECTORS registered).
 */
int cr_telemetry_prom_register(cr_telemetry_prom_fn fn, void *arg);

/**
 * Start family "coreact_<family>" (a counter's name gets "_total") with its HELP and TYPE
 * lines; the samples that follow belong to it. A bad name ([a-z_][a-z0-9_]*) skips the
 * family and its samples.
 */
void cr_prom_family(struct cr_prom *p, const char *family, enum cr_telemetry_kind kind,
		    const char *help);

/**
 * A sample of the current family: @p value, then label name / value pairs, NULL-ended:
 * `cr_prom_sample(p, 1, "backend", name, "state", "up", NULL)`. Values are escaped; a bad
 * label name skips the sample.
 */
void cr_prom_sample(struct cr_prom *p, double value, ...) __attribute__((sentinel));

/* ---- histograms ---- */

/** Histograms that can be registered. */
#define CR_TELEMETRY_MAX_HISTOGRAMS 16
/** Most bucket bounds a histogram has (the +Inf bucket not counted). */
#define CR_TELEMETRY_HIST_MAX_BOUNDS 30

/** Bounds of cr_telemetry_latency_bounds_ns: 5 us to 10 s, 1-2.5-5 per decade. */
#define CR_TELEMETRY_LATENCY_N_BOUNDS 20
/** Bucket bounds for latencies, in ns, for cr_telemetry_histogram_register(). */
extern const uint64_t cr_telemetry_latency_bounds_ns[CR_TELEMETRY_LATENCY_N_BOUNDS];

/**
 * Register a histogram of durations: per-lcore buckets that only their lcore writes
 * (cr_telemetry_observe_ns(), no lock, no allocation), summed over lcores at each read.
 * Exported to Prometheus as coreact_<name>_bucket{le="..."} (seconds), _sum (seconds) and
 * _count, and in JSON by /histograms. Registering the same name with the same bounds again
 * returns the same id. Control path; any thread; before the lcores observe.
 *
 * @param name   [a-z_][a-z0-9_]* ending in "_seconds", at most CR_TELEMETRY_NAME_LEN - 1
 *               bytes; copied.
 * @param help   one line; copied; NULL for none.
 * @param bounds ascending upper bounds in ns (each bucket counts values <= its bound),
 *               copied; NULL for cr_telemetry_latency_bounds_ns.
 * @param n      their number, 1..CR_TELEMETRY_HIST_MAX_BOUNDS (ignored with NULL bounds).
 * @return the id (>= 0) for cr_telemetry_observe_ns(); -EINVAL (bad name, bounds not
 *         ascending, bad n); -EEXIST (the name is taken with other bounds, or by a counter
 *         or reader family); -ENOSPC (CR_TELEMETRY_MAX_HISTOGRAMS registered).
 */
int cr_telemetry_histogram_register(const char *name, const char *help, const uint64_t *bounds,
				    unsigned n);

/** A histogram summed over the lcores at one moment; cr_telemetry_histogram_read(). */
struct cr_telemetry_hist_snap {
	unsigned n_bounds;
	uint64_t bounds_ns[CR_TELEMETRY_HIST_MAX_BOUNDS];
	/** Values in each bucket, not cumulative; [n_bounds] is the +Inf bucket. */
	uint64_t buckets[CR_TELEMETRY_HIST_MAX_BOUNDS + 1];
	uint64_t count; /**< the sum of the buckets */
	uint64_t sum_ns;
};

/**
 * Read histogram @p id summed over every lcore (@p lcore CR_LCORE_NONE) or of one lcore.
 * Any thread, no lock: an observation in progress may be in a bucket but not yet in the
 * sum. @return 0; -EINVAL (no such histogram or lcore).
 */
int cr_telemetry_histogram_read(int id, unsigned lcore, struct cr_telemetry_hist_snap *out);

/* ---- the endpoint ---- */

/**
 * Start the telemetry thread: the unix socket per @p cfg->telemetry ("" the default path,
 * "off" none, else that path), and the Prometheus endpoint if cr_telemetry_set_metrics()
 * set one. Call after cr_reactor_init() (lcores started later show up too).
 *
 * In the default directory, sockets left by processes that no longer exist are removed.
 * At an explicit path, a stale socket (nobody accepts on it) is replaced; a live one or a
 * file that is not a socket is an error. Each failure logs one line naming the path (or
 * the address) and the reason. Control path; any thread but the telemetry thread.
 *
 * @param cfg      read during the call only.
 * @param app_name e.g. "cr-hello"; copied; [A-Za-z0-9_.-], at most 63 bytes.
 * @return 0 (also with "off" and no metrics: nothing runs); -EINVAL (bad name, NULL);
 *         -EALREADY (running); -ENAMETOOLONG (socket path too long); -EPERM (the directory
 *         belongs to another user or is open to others); -EADDRINUSE (another process
 *         serves the path or the address); -EEXIST (the path is not a socket); -ENOMEM;
 *         another -errno from mkdir, socket, bind or listen.
 */
int cr_telemetry_start(const struct cr_eal_config *cfg, const char *app_name);

/**
 * What the user can do about the last failed cr_telemetry_start(), for the app's one line
 * after the error: "--telemetry off runs without the socket" when the socket failed,
 * "another --metrics port (0: the kernel picks one) or no --metrics runs without it" when
 * the --metrics address is taken, "no --metrics runs without it" for another --metrics
 * failure; "" after a start that succeeded or failed for another reason. The string is
 * static. Any thread.
 */
const char *cr_telemetry_hint(void);

/**
 * Stop the telemetry thread, close every connection and remove the socket file. Call before
 * cr_reactor_fini(). Nothing running is fine. Control path; any thread but the telemetry
 * thread (a handler must not call it).
 */
void cr_telemetry_stop(void);

/**
 * The socket's path while telemetry runs with one, else NULL. The string stays valid until
 * cr_telemetry_stop(). Any thread.
 */
const char *cr_telemetry_socket_path(void);

/**
 * The address the Prometheus endpoint listens on, "HOST:PORT" with the port the kernel
 * chose for port 0, into @p buf. Any thread.
 * @return 0; -ENOENT (not serving); -ENOSPC (@p buf too small).
 */
int cr_telemetry_metrics_addr(char *buf, size_t len);

/**
 * Say where telemetry is, as every sample app does after cr_telemetry_start(): on stdout,
 * "<app>: telemetry on PATH" with a socket, "<app>: metrics on http://HOST:PORT/metrics"
 * with --metrics; flushed. Nothing when telemetry does not run. Any thread.
 */
void cr_telemetry_announce(const char *app_name);

/**
 * Ask for Prometheus text on http://HOST:PORT/metrics from the next cr_telemetry_start().
 * HOST is an IPv4 address, a bracketed IPv6 address or a host name that resolves; PORT is
 * 0-65535 (0: the kernel picks; see cr_telemetry_metrics_addr()). Has the shape of a
 * cr_opt setter so apps can list it with CR_TELEMETRY_OPTS. The endpoint is read-only but
 * has no access control of its own: bind it to loopback or a trusted network. Control path;
 * before cr_telemetry_start(); not concurrently with it.
 *
 * @param val  "HOST:PORT"; copied.
 * @param ctx  unused.
 * @return 0; -EINVAL (no port, bad port, empty host, host that does not resolve).
 */
int cr_telemetry_set_metrics(const char *val, void *ctx);

/**
 * The telemetry options an app appends to its cr_opt table:
 * `static const struct cr_opt opts[] = { ..., CR_TELEMETRY_OPTS };`
 */
#define CR_TELEMETRY_OPTS                                                                       \
	{                                                                                       \
		"metrics", 0, "HOST:PORT", "serve Prometheus text on http://HOST:PORT/metrics", \
		    "HOST:PORT with an IPv4 address, [IPv6] or host name, port 0-65535",        \
		    cr_telemetry_set_metrics, NULL                                              \
	}

/** Number of entries CR_TELEMETRY_OPTS adds. */
#define CR_TELEMETRY_N_OPTS 1

#ifdef __cplusplus
}
#endif

#include "cr_telemetry_pvt.h"

#endif /* CR_TELEMETRY_H */
