/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Where log lines go: stderr, a file (reopened for log rotation) or the syslog socket;
 * the RFC 3339 timestamp at the start of each line; and the app's own log files (an
 * access log), whose lines go out as they are.
 *
 * Lines are written whole: a batch is at most PIPE_BUF bytes, which a pipe takes in one
 * piece, so lines of ours never interleave with another writer's on the same pipe.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cr_eal.h"
#include "cr_log.h"
#include "eal_internal.h"

#define IDENT_MAX 64
/* syslog facility "daemon" (3), shifted as RFC 5424 section 6.2.1 encodes it. */
#define FACILITY_DAEMON (3 << 3)

_Static_assert(sizeof(((struct cr__log_batch *)0)->buf) <= PIPE_BUF,
	       "a batch must reach a pipe in one piece");

/*
 * The sink. `fd` is read without the lock by the abort handler only; everything else is
 * read and written under `lock`. The log thread holds the lock for one pass of lines, so
 * a reopen waits at most for that pass.
 */
static struct {
	pthread_mutex_t lock;
	enum cr_log_sink_kind kind;
	_Atomic int fd; /* stderr, the file, or the connected syslog socket */
	char path[PATH_MAX];
	char ident[IDENT_MAX];
	char syslog_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
} sink = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .kind = CR_LOG_SINK_STDERR,
    .fd = STDERR_FILENO,
    .syslog_path = "/dev/log",
};

static _Atomic bool stamps = true;

/*
 * The app's own log files; slot i is id i + 1. `fd` is set under sink.lock and read there
 * (and by the abort handler); `open` is read by producers to refuse a closed id early.
 * `out` and `reported` belong to the drainer (one at a time: the drain claim).
 */
static struct log_file {
	_Atomic bool open;
	_Atomic int fd;
	_Atomic uint64_t dropped;
	uint64_t reported;
	char path[PATH_MAX];
	struct cr__log_batch out;
} files[CR_LOG_FILES_MAX];

/* ---- time ---- */

size_t
cr__log_format_time(char *buf, size_t len, int64_t sec, long nsec)
{
	struct cr_utc t;
	int n;

	cr_time_utc(sec, &t);
	n = snprintf(buf, len, "%04lld-%02u-%02uT%02u:%02u:%02u.%03ldZ ", (long long)t.year,
		     t.month, t.day, t.hour, t.min, t.sec, nsec / 1000000);
	return n == CR__LOG_STAMP_LEN && (size_t)n < len ? (size_t)n : 0;
}

/* gmtime_r() takes glibc's time zone lock; this takes none and calls no syscall (the
 * realtime clock is in the vDSO), so an lcore can stamp its lines. */
size_t
cr__log_timestamp(char *buf, size_t len)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return cr__log_format_time(buf, len, (int64_t)ts.tv_sec, ts.tv_nsec);
}

void
cr_log_set_timestamps(bool on)
{
	/* relaxed: a formatting choice, read per line; orders nothing. */
	atomic_store_explicit(&stamps, on, memory_order_relaxed);
}

bool
cr_log_timestamps(void)
{
	return atomic_load_explicit(&stamps, memory_order_relaxed);
}

/* ---- opening ---- */

static int
open_file(const char *path)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640);

	return fd >= 0 ? fd : -errno;
}

static int
open_syslog(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, rc;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

/* Under sink.lock: make @p fd (of @p kind) the sink, closing the old one. */
static void
swap_sink(enum cr_log_sink_kind kind, int fd)
{
	int old = atomic_load_explicit(&sink.fd, memory_order_relaxed);

	sink.kind = kind;
	/* relaxed: the abort handler's load may see either fd, both are usable or closed */
	atomic_store_explicit(&sink.fd, fd, memory_order_relaxed);
	if (old != STDERR_FILENO && old != fd)
		close(old);
}

int
cr_log_set_file(const char *path)
{
	int fd;

	if (path == NULL) {
		cr_log_flush();
		pthread_mutex_lock(&sink.lock);
		swap_sink(CR_LOG_SINK_STDERR, STDERR_FILENO);
		pthread_mutex_unlock(&sink.lock);
		return 0;
	}
	if (path[0] == '\0')
		return -EINVAL;
	if (strlen(path) >= sizeof(sink.path))
		return -ENAMETOOLONG;
	fd = open_file(path);
	if (fd < 0)
		return fd;
	/* Lines buffered so far belong to the old sink. */
	cr_log_flush();
	pthread_mutex_lock(&sink.lock);
	memcpy(sink.path, path, strlen(path) + 1);
	swap_sink(CR_LOG_SINK_FILE, fd);
	pthread_mutex_unlock(&sink.lock);
	return 0;
}

int
cr_log_set_syslog(const char *ident)
{
	int fd;

	if (ident == NULL)
		return cr_log_set_file(NULL);
	pthread_mutex_lock(&sink.lock);
	fd = open_syslog(sink.syslog_path);
	pthread_mutex_unlock(&sink.lock);
	if (fd < 0)
		return fd;
	cr_log_flush();
	pthread_mutex_lock(&sink.lock);
	snprintf(sink.ident, sizeof(sink.ident), "%s", ident);
	swap_sink(CR_LOG_SINK_SYSLOG, fd);
	pthread_mutex_unlock(&sink.lock);
	return 0;
}

int
cr_log_reopen(void)
{
	enum cr_log_sink_kind kind;
	char what[PATH_MAX + 16];
	int fd = 0;

	pthread_mutex_lock(&sink.lock);
	kind = sink.kind;
	if (kind == CR_LOG_SINK_FILE) {
		fd = open_file(sink.path);
		snprintf(what, sizeof(what), "%s", sink.path);
	} else if (kind == CR_LOG_SINK_SYSLOG) {
		fd = open_syslog(sink.syslog_path);
		snprintf(what, sizeof(what), "syslog at %s", sink.syslog_path);
	}
	if (fd > 0)
		swap_sink(kind, fd);
	pthread_mutex_unlock(&sink.lock);
	if (fd < 0) {
		/* Through the old sink, which is still there. */
		CR_LOG(cr__eal_log, ERR,
		       "cannot reopen the log %s: %s; still writing to the old one", what,
		       cr_strerror(fd));
		return fd;
	}
	return 0;
}

enum cr_log_sink_kind
cr_log_sink(char *buf, size_t len)
{
	enum cr_log_sink_kind kind;

	pthread_mutex_lock(&sink.lock);
	kind = sink.kind;
	if (buf != NULL && len > 0)
		snprintf(buf, len, "%s",
			 kind == CR_LOG_SINK_FILE     ? sink.path
			 : kind == CR_LOG_SINK_SYSLOG ? sink.ident
						      : "stderr");
	pthread_mutex_unlock(&sink.lock);
	return kind;
}

void
cr__log_set_syslog_path(const char *path)
{
	pthread_mutex_lock(&sink.lock);
	snprintf(sink.syslog_path, sizeof(sink.syslog_path), "%s", path);
	pthread_mutex_unlock(&sink.lock);
}

/* ---- writing ---- */

void
cr__log_sink_lock(void)
{
	pthread_mutex_lock(&sink.lock);
}

void
cr__log_sink_unlock(void)
{
	pthread_mutex_unlock(&sink.lock);
}

static void
write_all(int fd, const char *p, size_t n)
{
	size_t off = 0;

	while (off < n) {
		ssize_t w = write(fd, p + off, n - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		off += (size_t)w;
	}
}

/* One datagram per line: "<PRI>ident[pid]: text", no newline. */
static void
send_syslog(int fd, const char *text, size_t len, int level)
{
	char msg[CR__LOG_LINE_MAX + IDENT_MAX + 32];
	int n;

	if (len > 0 && text[len - 1] == '\n')
		len--;
	n = snprintf(msg, sizeof(msg), "<%d>%s[%d]: %.*s", FACILITY_DAEMON | (level & 7),
		     sink.ident, (int)getpid(), (int)len, text);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(msg))
		n = (int)sizeof(msg) - 1;
	/* A daemon that is gone or swamped costs this line, never a blocked thread forever. */
	(void)!send(fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static int
batch_fd(const struct cr__log_batch *b)
{
	if (b->file == 0)
		return atomic_load_explicit(&sink.fd, memory_order_relaxed);
	return atomic_load_explicit(&files[b->file - 1].fd, memory_order_relaxed);
}

void
cr__log_batch_flush(struct cr__log_batch *b)
{
	int fd = batch_fd(b);

	if (b->len != 0 && fd >= 0)
		write_all(fd, b->buf, b->len);
	b->len = 0;
}

/* A line as it is; one longer than the batch goes out in a write of its own. */
static void
batch_add_raw(struct cr__log_batch *b, const char *line, size_t len)
{
	int fd;

	if (len > sizeof(b->buf) - b->len)
		cr__log_batch_flush(b);
	if (len > sizeof(b->buf)) {
		fd = batch_fd(b);
		if (fd >= 0)
			write_all(fd, line, len);
		return;
	}
	memcpy(b->buf + b->len, line, len);
	b->len += len;
}

void
cr__log_batch_add(struct cr__log_batch *b, const char *line, size_t len, size_t body, int level)
{
	if (body > len)
		body = len;
	if (sink.kind == CR_LOG_SINK_SYSLOG) {
		send_syslog(atomic_load_explicit(&sink.fd, memory_order_relaxed), line + body,
			    len - body, level);
		return;
	}
	if (!cr_log_timestamps()) {
		line += body;
		len -= body;
	}
	batch_add_raw(b, line, len);
}

void
cr__log_sink_line(const char *line, size_t len, size_t body, int level)
{
	struct cr__log_batch b;

	b.file = 0;
	b.len = 0;
	pthread_mutex_lock(&sink.lock);
	cr__log_batch_add(&b, line, len, body, level);
	cr__log_batch_flush(&b);
	pthread_mutex_unlock(&sink.lock);
}

/* ---- the app's own log files ---- */

static struct log_file *
file_of(int id)
{
	if (id < 1 || id > CR_LOG_FILES_MAX)
		return NULL;
	/* acquire: pairs with the release in cr_log_file_open(); path and fd are set */
	if (!atomic_load_explicit(&files[id - 1].open, memory_order_acquire))
		return NULL;
	return &files[id - 1];
}

bool
cr__log_file_ok(int id)
{
	return file_of(id) != NULL;
}

int
cr_log_file_open(const char *path)
{
	int fd, id = -EMFILE;

	if (path == NULL || path[0] == '\0')
		return -EINVAL;
	if (strlen(path) >= sizeof(files[0].path))
		return -ENAMETOOLONG;
	fd = open_file(path);
	if (fd < 0)
		return fd;
	pthread_mutex_lock(&sink.lock);
	for (int i = 0; i < CR_LOG_FILES_MAX; i++) {
		struct log_file *f = &files[i];

		if (atomic_load_explicit(&f->open, memory_order_relaxed))
			continue;
		memcpy(f->path, path, strlen(path) + 1);
		atomic_store_explicit(&f->fd, fd, memory_order_relaxed);
		atomic_store_explicit(&f->dropped, 0, memory_order_relaxed);
		f->reported = 0;
		f->out.file = i + 1;
		f->out.len = 0;
		/* release: pairs with the acquire in file_of() */
		atomic_store_explicit(&f->open, true, memory_order_release);
		id = i + 1;
		break;
	}
	pthread_mutex_unlock(&sink.lock);
	if (id < 0)
		close(fd);
	return id;
}

void
cr__log_file_line(int id, const char *line, size_t len)
{
	struct log_file *f = file_of(id);
	struct cr__log_batch b;

	if (f == NULL)
		return;
	b.file = id;
	b.len = 0;
	pthread_mutex_lock(&sink.lock);
	batch_add_raw(&b, line, len);
	cr__log_batch_flush(&b);
	pthread_mutex_unlock(&sink.lock);
}

void
cr__log_file_count_drop(int id)
{
	/* relaxed: a count; the drainer reports it some pass later, orders nothing */
	if (id >= 1 && id <= CR_LOG_FILES_MAX)
		atomic_fetch_add_explicit(&files[id - 1].dropped, 1, memory_order_relaxed);
}

uint64_t
cr_log_file_dropped(int id)
{
	struct log_file *f = file_of(id);

	return f != NULL ? atomic_load_explicit(&f->dropped, memory_order_relaxed) : 0;
}

void
cr__log_file_add(int id, const char *line, size_t len)
{
	struct log_file *f = file_of(id);

	if (f != NULL)
		batch_add_raw(&f->out, line, len);
}

void
cr__log_files_flush(struct cr__log_batch *out)
{
	for (int i = 0; i < CR_LOG_FILES_MAX; i++) {
		struct log_file *f = &files[i];
		uint64_t dropped;
		char line[PATH_MAX + 160];
		size_t n;
		int k;

		if (!atomic_load_explicit(&f->open, memory_order_acquire))
			continue;
		cr__log_batch_flush(&f->out);
		dropped = atomic_load_explicit(&f->dropped, memory_order_relaxed);
		if (dropped == f->reported)
			continue;
		n = cr__log_timestamp(line, sizeof(line));
		k = snprintf(line + n, sizeof(line) - n,
			     "%s: warning: %llu lines of %s dropped: a log buffer was full\n",
			     cr__eal_log.name, (unsigned long long)(dropped - f->reported), f->path);
		if (k > 0 && (size_t)k < sizeof(line) - n && n + (size_t)k < CR__LOG_LINE_MAX)
			cr__log_batch_add(out, line, n + (size_t)k, n, CR_LOG_WARNING);
		f->reported = dropped;
	}
}

int
cr_log_file_reopen(int id)
{
	struct log_file *f;
	int fd, old;

	pthread_mutex_lock(&sink.lock);
	f = file_of(id);
	if (f == NULL) {
		pthread_mutex_unlock(&sink.lock);
		return -EINVAL;
	}
	fd = open_file(f->path);
	if (fd >= 0) {
		/* What this pass gathered for the old file goes to the new one. */
		old = atomic_load_explicit(&f->fd, memory_order_relaxed);
		atomic_store_explicit(&f->fd, fd, memory_order_relaxed);
		close(old);
	}
	pthread_mutex_unlock(&sink.lock);
	if (fd < 0) {
		CR_LOG(cr__eal_log, ERR, "cannot reopen the log file %s: %s; still writing to the "
		       "old one", f->path, cr_strerror(fd));
		return fd;
	}
	return 0;
}

void
cr_log_file_close(int id)
{
	struct log_file *f = file_of(id);

	if (f == NULL)
		return;
	/* What the lcores buffered for it goes out first. */
	cr_log_flush();
	pthread_mutex_lock(&sink.lock);
	cr__log_batch_flush(&f->out);
	atomic_store_explicit(&f->open, false, memory_order_relaxed);
	close(atomic_load_explicit(&f->fd, memory_order_relaxed));
	atomic_store_explicit(&f->fd, -1, memory_order_relaxed);
	pthread_mutex_unlock(&sink.lock);
}
