/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Telemetry internals shared by its source files and its unit tests. Never installed.
 */
#ifndef TELEMETRY_INTERNAL_H
#define TELEMETRY_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "cr_log.h"
#include "cr_telemetry.h"

/* Longest HTTP request head the metrics endpoint reads. */
#define CR__TEL_HTTP_MAX 4096

/* ---- telemetry_json.c ---- */

/* Write @p key and its ':' inside the open object; the next value is written with a NULL
 * key. The server uses it to wrap a handler's value as {"<cmd>": value}. */
void cr__json_key(struct cr_json *j, const char *key);
/* The message cr_json_errorf() recorded, "" if none. */
const char *cr__json_errmsg(const struct cr_json *j);

/* ---- a plain text buffer (Prometheus, HTTP) ---- */

struct cr__tbuf {
	char *buf;
	size_t cap, len;
	bool overflow;
};

void cr__tbuf_init(struct cr__tbuf *t, char *buf, size_t cap);
void cr__tbuf_printf(struct cr__tbuf *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void cr__tbuf_put(struct cr__tbuf *t, const char *s, size_t n);

/* ---- telemetry_cmd.c ---- */

/*
 * Answer one request line (@p n bytes, no newline needed) into @p reply, which the caller
 * has set up with cr_json_init(). On return the reply is always a complete JSON document:
 * {"<cmd>": value} or {"error": "..."}. Telemetry thread (or a test).
 */
void cr__tel_dispatch(const char *line, size_t n, struct cr_json *reply);

/* True when @p name is a valid command name. */
bool cr__tel_cmd_name_ok(const char *name);

/* ---- telemetry_counter.c ---- */

/* One built-in per-lcore value of struct cr_lcore_stats. */
struct cr__tel_field {
	const char *name; /* JSON key */
	size_t off;	  /* offsetof(struct cr_lcore_stats, ...) */
	enum cr_telemetry_kind kind;
	bool in_total;	  /* summed into the totals */
	const char *prom; /* Prometheus name, without _total */
	double scale;	  /* Prometheus value = value * scale (ns -> s) */
	const char *help;
};

extern const struct cr__tel_field cr__tel_fields[];
extern const unsigned cr__tel_n_fields;

/* Longest Prometheus family name after "coreact_", its NUL included. */
#define CR__TEL_FAMILY_LEN (CR_TELEMETRY_NAME_LEN + 8)
#define CR__TEL_LABEL_LEN  32
#define CR__TEL_LVALUE_LEN 64

/* A registered counter or reader; immutable once published. */
struct cr__tel_entry {
	char name[CR_TELEMETRY_NAME_LEN];
	char help[CR_TELEMETRY_HELP_LEN];
	enum cr_telemetry_kind kind;
	cr_telemetry_read_fn fn; /* readers only */
	void *arg;
	/* Prometheus: "coreact_" family [_total] {lcore, label="label_value"} */
	char family[CR__TEL_FAMILY_LEN];
	char label[CR__TEL_LABEL_LEN];	   /* "" for none */
	char label_value[CR__TEL_LVALUE_LEN];
};

/* Registration of counters, readers and histograms is serialised by one lock, so that a
 * Prometheus family name is checked against all three. */
void cr__tel_reg_lock(void);
void cr__tel_reg_unlock(void);
/* Under the registration lock: a counter, reader or built-in metric has @p family. */
bool cr__tel_family_taken(const char *family);
/* [a-z_][a-z0-9_]* shorter than @p max. */
bool cr__tel_name_ok(const char *name, size_t max);

/* Published entries: the count is read with acquire, entries below it never change. */
unsigned cr__tel_n_counters(void);
const struct cr__tel_entry *cr__tel_counter(unsigned i);
unsigned cr__tel_n_readers(void);
const struct cr__tel_entry *cr__tel_reader(unsigned i);

/* One lcore's values at one moment. */
struct cr__tel_snap {
	unsigned lcore;
	enum cr_lcore_state state;
	struct cr_lcore_stats st;
	unsigned n_readers, n_counters;
	bool reader_ok[CR_TELEMETRY_MAX_READERS];
	uint64_t reader[CR_TELEMETRY_MAX_READERS];
	uint64_t app[CR_TELEMETRY_MAX_COUNTERS];
};

/* Snapshot lcore @p lcore. @return 0 or -EINVAL (no such lcore). Any thread. */
int cr__tel_snapshot(unsigned lcore, struct cr__tel_snap *s);
/* Field @p f of @p st. */
uint64_t cr__tel_field_value(const struct cr_lcore_stats *st, const struct cr__tel_field *f);
/* Name of a state: "OFFLINE", "STARTING", "RUNNING", "RETIRING". */
const char *cr__tel_state_name(enum cr_lcore_state s);
/* Next lcore id after @p prev (CR_LCORE_NONE to start) whose record exists, any state;
 * CR_LCORE_NONE at the end. */
unsigned cr__tel_lcore_next(unsigned prev);

/* ---- telemetry_builtin.c ---- */

int cr__tel_cmd_lcores(const char *cmd, const char *params, struct cr_json *reply);
int cr__tel_cmd_stats(const char *cmd, const char *params, struct cr_json *reply);
int cr__tel_cmd_info(const char *cmd, const char *params, struct cr_json *reply);
int cr__tel_cmd_pool_resize(const char *cmd, const char *params, struct cr_json *reply);
int cr__tel_cmd_lcore_retire(const char *cmd, const char *params, struct cr_json *reply);
int cr__tel_cmd_lcore_start(const char *cmd, const char *params, struct cr_json *reply);

/* ---- telemetry_log.c ---- */

int cr__tel_cmd_log(const char *cmd, const char *params, struct cr_json *reply);
int cr__tel_cmd_log_reopen(const char *cmd, const char *params, struct cr_json *reply);

/* What /info reports; written by start/stop (under the server's lock), read by the
 * telemetry thread while it runs (start publishes it before the thread exists). */
struct cr__tel_info {
	char app[64];
	char socket[108];
	char metrics[80];
	uint64_t started_ns;
};
extern struct cr__tel_info cr__tel_info;

/* ---- telemetry_hist.c ---- */

/* A histogram's name and help; immutable once published. */
struct cr__tel_hist_meta {
	char name[CR_TELEMETRY_NAME_LEN];
	char help[CR_TELEMETRY_HELP_LEN];
};

unsigned cr__tel_n_histograms(void);
const struct cr__tel_hist_meta *cr__tel_histogram(unsigned i);
/* Under the registration lock: a histogram is called @p name. */
bool cr__tel_hist_taken(const char *name);
/* Every histogram, merged over the lcores, as Prometheus text. */
void cr__prom_render_hists(struct cr__tbuf *t);
int cr__tel_cmd_histograms(const char *cmd, const char *params, struct cr_json *reply);

/* ---- telemetry_collect.c ---- */

/* What the registered collectors write. */
void cr__prom_render_collectors(struct cr__tbuf *t);

/* ---- telemetry_process.c ---- */

/* process_cpu_seconds_total, process_resident_memory_bytes, ... of this process. */
void cr__prom_render_process(struct cr__tbuf *t);

/* ---- telemetry_prom.c ---- */

/* HELP and TYPE lines of metric @p name (written as is) of @p type ("counter", "gauge",
 * "histogram"). */
void cr__prom_header(struct cr__tbuf *t, const char *name, const char *type, const char *help);
/* A label value with \, " and newline escaped. */
void cr__prom_label(struct cr__tbuf *t, const char *s);
/* A sample value: integers as such, others with 9 decimals, non-finite as +Inf/-Inf/NaN. */
void cr__prom_value(struct cr__tbuf *t, double v);

/* Render every counter as Prometheus text into @p t. Any thread. */
void cr__prom_render(struct cr__tbuf *t);

/*
 * Answer one HTTP request head (@p n bytes) with a full HTTP/1.0 response in @p t:
 * GET or HEAD /metrics -> 200 with the text, other paths 404, other methods 405, a bad
 * request 400. @return the status code.
 */
int cr__http_respond(const char *req, size_t n, struct cr__tbuf *t);

/* Parse "HOST:PORT" into @p ss. @return 0 or -EINVAL with one line in @p why. */
int cr__metrics_parse(const char *val, struct sockaddr_storage *ss, socklen_t *sslen, char *why,
		      size_t whylen);

/* The address cr_telemetry_set_metrics() stored. @return false if none. */
bool cr__metrics_config(struct sockaddr_storage *ss, socklen_t *len);
/* Forget it (tests). */
void cr__metrics_clear(void);

/* ---- telemetry_path.c ---- */

struct sockaddr_un;

/* Where the default directory is looked for ("/tmp", "/run/user"); tests point them
 * elsewhere. */
extern const char *cr__tel_tmp_root;
extern const char *cr__tel_run_user_root;
/* The directory cr__tel_choose_path() made because the usual one was taken ("" if none);
 * cr__tel_release_dir() removes it (if empty) and forgets it. */
extern char cr__tel_fresh_dir[];
void cr__tel_release_dir(void);

/* The default directory: $XDG_RUNTIME_DIR/coreact, else /run/user/<uid>/coreact when
 * /run/user/<uid> is ours, else /tmp/coreact-<uid> (@p in_tmp set: when that one is not
 * ours with mode 0700, a fresh /tmp/coreact-<uid>-XXXXXX serves instead).
 * @return 0 or -ENAMETOOLONG. */
int cr__tel_default_dir(char *buf, size_t len, bool *in_tmp);

/* @p sa for @p path. @return 0 or -ENAMETOOLONG. */
int cr__tel_unix_addr(struct sockaddr_un *sa, const char *path);

/*
 * Choose the socket path into @p path: @p telemetry if not empty, else
 * <default dir>/<app>.<pid>.sock (making the directory, clearing dead processes' sockets).
 * Whatever is at the path must be a socket nobody accepts on, and is removed.
 * @return 0; -ENAMETOOLONG; -EPERM (directory not ours or open to others); -EADDRINUSE
 *         (someone serves the path); -EEXIST (not a socket); another -errno. Each failure
 *         logs one line naming the path.
 */
int cr__tel_choose_path(const char *telemetry, const char *app, char *path, size_t len);

#endif /* TELEMETRY_INTERNAL_H */
