/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Logging with one component per library ("lib.reactor", "drv.uring") and levels
 * settable at run time. A disabled level costs one relaxed load.
 */
#ifndef CR_LOG_H
#define CR_LOG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cr_config.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Levels, syslog numbering. */
enum cr_log_level {
	CR_LOG_ERR = 3,
	CR_LOG_WARNING = 4,
	CR_LOG_NOTICE = 5,
	CR_LOG_INFO = 6,
	CR_LOG_DEBUG = 7,
};

/** A log component; define with CR_LOG_COMPONENT(). */
struct cr_log_component {
	const char *name;
	_Atomic int level;
	struct cr_log_component *next; /* private: registry link */
};

/**
 * Register @p c (done by CR_LOG_COMPONENT at load time) and give it the level that
 * earlier cr_log_set_level() calls set for its name. Registering twice is harmless.
 * @p c must stay valid for the rest of the process.
 */
void cr_log_register(struct cr_log_component *c);

/**
 * Define a static component @p var named @p name, default level NOTICE (or the level
 * set for it or for all components by an earlier cr_log_set_level()).
 */
#define CR_LOG_COMPONENT(var, name)                                                        \
	static struct cr_log_component var = {name, CR_LOG_NOTICE, NULL};                  \
	__attribute__((constructor)) static void var##_register(void)                      \
	{                                                                                  \
		cr_log_register(&var);                                                     \
	}

/**
 * printf-style log line "<time> <name>: <level>: text\n", where <time> is UTC in RFC 3339
 * with milliseconds ("2024-05-01T09:30:00.123Z", left out after
 * cr_log_set_timestamps(false)). A trailing newline in @p fmt is not doubled; a line
 * longer than 1 KiB is truncated. Nothing is written if @p level is above the component's
 * level. Keeps errno. Any thread.
 *
 * Where the line goes: to the sink (stderr, cr_log_set_file(), cr_log_set_syslog()),
 * each line whole (one write(2) never carries part of a line). On a thread attached with
 * cr_log_attach() — every lcore — the line is copied into that thread's buffer and the
 * log thread writes it out: the call never blocks, and a full buffer drops the line and
 * counts it (cr_log_dropped()). Other threads (the control path, helper threads) write
 * the line themselves, under a lock, in order with what else they print.
 */
void cr_log_write(const struct cr_log_component *c, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define CR_LOG(c, lvl, ...)                                                                \
	do {                                                                               \
		if (atomic_load_explicit(&(c).level, memory_order_relaxed) >= CR_LOG_##lvl) \
			cr_log_write(&(c), CR_LOG_##lvl, __VA_ARGS__);                     \
	} while (0)

/**
 * Set levels from a spec: "LEVEL" for every component, or "PATTERN:LEVEL" where PATTERN
 * is a component name or a prefix ending in '*' ("lib.*:debug"); several specs may be
 * joined with ',' and applied in order, so a later spec wins. LEVEL is err, warning,
 * notice, info, debug (case-insensitive; "error" and "warn" too) or 3..7.
 * Specs are remembered for components registered later (the last 16 patterns; a spec for
 * every component forgets the earlier ones). Control path; any thread.
 * @return 0 or -EINVAL (empty element, bad level, pattern of 64+ characters, more than 16
 *         elements; nothing changed).
 */
int cr_log_set_level(const char *spec);

/** Parse a level name or number; @return the level or -EINVAL. */
int cr_log_parse_level(const char *s);

/* ---- where lines go ---- */

/**
 * Write log lines to the file at @p path, appended (created with mode 0640 if missing),
 * instead of the current sink; NULL goes back to stderr. Control path; any thread.
 * @param path copied; at most PATH_MAX - 1 bytes.
 * @return 0; -EINVAL (empty path); -ENAMETOOLONG; -errno from open(2) (the sink is then
 *         unchanged).
 */
int cr_log_set_file(const char *path);

/**
 * Send log lines to the local syslog daemon (the datagram socket /dev/log) as
 * "<PRI>ident[pid]: <name>: <level>: text", facility daemon, severity the line's level,
 * without our timestamp (the daemon stamps what it receives). Control path; any thread.
 * @param ident copied (truncated at 63 bytes), e.g. the app's name; NULL goes back to
 *              stderr.
 * @return 0; -errno from socket(2) or connect(2) (ENOENT: no syslog daemon listens; the
 *         sink is then unchanged).
 */
int cr_log_set_syslog(const char *ident);

/**
 * Reopen the sink, for log rotation: the file is opened again at its path (a renamed file
 * keeps what was written to it, new lines go to the new file), the syslog socket is
 * reconnected, stderr stays as it is. Lines already buffered go to the new file. Safe from
 * any thread, e.g. the thread that takes SIGUSR1 (not from an asynchronous signal
 * handler: it takes a lock).
 * @return 0; -errno from open(2) or connect(2): the old sink stays, and one line says so.
 */
int cr_log_reopen(void);

/** What cr_log_sink() describes. */
enum cr_log_sink_kind {
	CR_LOG_SINK_STDERR = 0,
	CR_LOG_SINK_FILE,
	CR_LOG_SINK_SYSLOG,
};

/**
 * The current sink, and into @p buf (may be NULL) the file's path or the syslog ident.
 * Any thread.
 */
enum cr_log_sink_kind cr_log_sink(char *buf, size_t len);

/** Put the RFC 3339 timestamp at the start of each line (default) or leave it out. */
void cr_log_set_timestamps(bool on);

/** True when lines carry a timestamp. */
bool cr_log_timestamps(void);

/* ---- the log thread and per-thread buffers ---- */

/**
 * Make the calling thread a non-blocking log producer with buffer @p id (an lcore id):
 * from now on its lines are copied into that buffer and written by the log thread, which
 * this starts if it is not running (and stops at exit, writing out what is buffered). A
 * buffer is allocated the first time its id is attached and kept for the life of the
 * process, so a thread attached again with the same id (an lcore's next incarnation)
 * reuses it. Control path; the reactor calls it on each lcore's thread.
 * @return 0; -EINVAL (@p id >= CR_MAX_LCORES); -EBUSY (another thread is attached with
 *         @p id); -ENOMEM; -errno from creating the thread or its eventfd.
 */
int cr_log_attach(unsigned id);

/**
 * Write out what the calling thread buffered and make it write its lines itself again.
 * Nothing attached is fine. Control path (waits for the log thread's current pass).
 */
void cr_log_detach(void);

/**
 * Write out every buffered line now, on the calling thread. Control path (waits for the
 * log thread's current pass); not on an lcore in steady state (it writes to the sink).
 */
void cr_log_flush(void);

/**
 * Stop the log thread: every buffered line is written, and from then on each thread
 * writes its own lines again (attached threads included). Runs at exit by itself.
 * Control path; not from an attached thread's buffer path.
 */
void cr_log_stop(void);

/**
 * Lines dropped because the buffer of lcore @p id was full. The log thread also writes
 * one line saying how many were dropped where. Any thread.
 * @return the count since the process started (0 for an id never attached).
 */
uint64_t cr_log_dropped(unsigned id);

/* ---- log files of an app's own (an access log) ---- */

/** Log files cr_log_file_open() may have open at once. */
#define CR_LOG_FILES_MAX 4
/** Longest line cr_log_file_put() takes, its newline included. */
#define CR_LOG_FILE_LINE_MAX 16384

/**
 * Open @p path (appended, created with mode 0640 if missing) as a log file of the app's
 * own, e.g. an access log. Its lines take the way log lines take (cr_log_write()): on an
 * attached thread they are copied into that thread's buffer, shared with its log lines,
 * and the log thread writes them; but they go to this file as they are, with no
 * timestamp, component or level. Control path; any thread.
 * @param path copied; at most PATH_MAX - 1 bytes.
 * @return an id >= 1 for the other cr_log_file_* calls; -EINVAL (empty path);
 *         -ENAMETOOLONG; -EMFILE (CR_LOG_FILES_MAX files open); -errno from open(2).
 */
int cr_log_file_open(const char *path);

/**
 * Write @p line[0..len), one whole line with its newline, to log file @p id. Never blocks
 * on an attached thread (an lcore): a full buffer drops the line and counts it
 * (cr_log_file_dropped(); the log thread also writes one warning line to the log saying
 * how many were dropped). Other threads write it themselves, under a lock. Any thread.
 * @return 0; -ENOBUFS (dropped); -EINVAL (no such file open, @p len 0);
 *         -EMSGSIZE (@p len over CR_LOG_FILE_LINE_MAX).
 */
int cr_log_file_put(int id, const char *line, size_t len);

/**
 * Reopen log file @p id at its path, for log rotation (as cr_log_reopen() does for the
 * log). Lines already buffered go to the new file. Any thread but an asynchronous signal
 * handler.
 * @return 0; -EINVAL (no such file open); -errno from open(2): the old file stays, and
 *         one log line says so.
 */
int cr_log_file_reopen(int id);

/** Lines of log file @p id dropped because a buffer was full (0 for no such file). */
uint64_t cr_log_file_dropped(int id);

/**
 * Write out what is buffered for log file @p id, and close it; the id may be given out
 * again. NULL-safe in spirit: an id that is not open is ignored. Control path.
 */
void cr_log_file_close(int id);

#ifdef __cplusplus
}
#endif
#endif /* CR_LOG_H */
