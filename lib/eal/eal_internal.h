/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/eal internals shared between its source files; never installed.
 */
#ifndef EAL_INTERNAL_H
#define EAL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cr_log.h"

/** The "lib.eal" log component. */
extern struct cr_log_component cr__eal_log;

/** snprintf into an optional error buffer (@p err may be NULL or @p len 0). */
void cr__errf(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/** Called by cr__corelist_walk() for each element, lo <= hi; returns 0 to go on. */
typedef int (*cr__corelist_fn)(unsigned lo, unsigned hi, void *ctx);

/**
 * Check the syntax of corelist @p s and, when @p fn is not NULL, call it for each element
 * in the order written. Ids above @p max_id are rejected.
 *
 * @return 0, -EINVAL with one line in @p err, or whatever @p fn returned (it writes its
 *         own message).
 */
int cr__corelist_walk(const char *s, unsigned max_id, cr__corelist_fn fn, void *ctx, char *err,
		      size_t errlen);

/* ---- logging: eal_log.c, eal_log_sink.c, eal_log_thread.c ---- */

/* Longest log line, its newline and NUL included. */
#define CR__LOG_LINE_MAX 1024
/* Length of the timestamp cr__log_timestamp() writes, its trailing space included. */
#define CR__LOG_STAMP_LEN 25

/* The name of @p level ("err" .. "debug"), clamped to the known ones. */
const char *cr__log_level_name(int level);

/*
 * Write the UTC time now as "YYYY-MM-DDTHH:MM:SS.mmmZ " into @p buf. @return its length
 * (CR__LOG_STAMP_LEN), or 0 if @p len is too small. No lock, no allocation.
 */
size_t cr__log_timestamp(char *buf, size_t len);
/* The same for @p sec / @p nsec since the epoch (the unit tests check it). */
size_t cr__log_format_time(char *buf, size_t len, int64_t sec, long nsec);

/*
 * Hand one formatted line to wherever it goes: a thread's buffer while the log thread
 * runs, else the sink directly. @p body is where the text after the timestamp starts.
 */
void cr__log_emit(const char *line, size_t len, size_t body, int level);

/* ---- the sink (eal_log_sink.c) ---- */

/* Lines gathered for one write(2) of at most PIPE_BUF bytes, for the sink (file 0) or a
 * log file of cr_log_file_open(). */
struct cr__log_batch {
	int file;
	size_t len;
	char buf[4096];
};

/* The level byte of a buffered record that is a line of log file (byte & 0x7f). */
#define CR__LOG_REC_FILE 0x80

/* Sink lock around a batch of lines; the log thread takes it once per pass. */
void cr__log_sink_lock(void);
void cr__log_sink_unlock(void);
/* Add one line to @p b (writing @p b out first when it is full). Under the sink lock,
 * or from the abort handler, which takes no lock. */
void cr__log_batch_add(struct cr__log_batch *b, const char *line, size_t len, size_t body,
		       int level);
/* Write out what @p b holds. Same context as cr__log_batch_add(). */
void cr__log_batch_flush(struct cr__log_batch *b);
/* Write one line now: takes the sink lock. */
void cr__log_sink_line(const char *line, size_t len, size_t body, int level);

/* ---- log files of the app's own (eal_log_sink.c) ---- */

/* True when log file @p id is open. Any thread. */
bool cr__log_file_ok(int id);
/* Write one line of log file @p id now: takes the sink lock. */
void cr__log_file_line(int id, const char *line, size_t len);
/* Count one line of log file @p id dropped. Any thread. */
void cr__log_file_count_drop(int id);
/* The drainer: add a buffered line of log file @p id to that file's batch (dropped when
 * the file was closed since). Under the sink lock, or from the abort handler. */
void cr__log_file_add(int id, const char *line, size_t len);
/* The drainer, after a pass: write out every file's batch, and add to @p out one warning
 * line per file whose drops were not reported yet. Same context as cr__log_file_add(). */
void cr__log_files_flush(struct cr__log_batch *out);

/* ---- tests of the log thread ---- */

/* Bytes of each buffer allocated from now on (a power of two >= 4096). */
void cr__log_set_buf_size(size_t bytes);
/* While paused, the log thread takes nothing from the buffers (cr_log_flush() still
 * does). */
void cr__log_pause(bool paused);
/* Path of the syslog socket from now on (default "/dev/log"). */
void cr__log_set_syslog_path(const char *path);

#endif /* EAL_INTERNAL_H */
