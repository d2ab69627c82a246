/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Files under --root: GET and HEAD, Content-Type from the extension, Last-Modified and
 * If-Modified-Since, ETag and If-None-Match, one byte range (Range: bytes=A-B, A-, -N),
 * index.html for a directory and a 301 to "DIR/" for one named without its slash, the
 * precompressed "FILE.gz" for a client that takes gzip (nginx's gzip_static), and a body
 * on every error status. A body of at least --splice-min bytes on plain HTTP goes by splice
 * (http_splice.c) when a pipe is free; otherwise the bytes are read through lib/io
 * (cr_io_read) a chunk at a time and each chunk is queued on the connection; the next read starts while the queue is below its
 * high watermark, or when it drains. A read takes one of the lcore's read buffers for as
 * long as it is in flight (none free: the transfer waits in line for one); a transfer
 * waiting for its client holds none.
 *
 * No escape from the root: a path is %-decoded, a "." or ".." segment (literal or
 * encoded) is refused with 400, and the file is opened with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_MAGICLINKS) relative to the root, so no symlink leads out of it either (403).
 * The open (and fstat) may block on the file system, so a lib/offload helper does it; the
 * connection waits, its further input held, until the answer can be written.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cr_offload.h"
#include "cr_tls.h"
#include "http.h"

static const struct {
	const char *ext;
	const char *type;
} mime[] = {
    {"html", "text/html; charset=utf-8"},
    {"htm", "text/html; charset=utf-8"},
    {"txt", "text/plain; charset=utf-8"},
    {"css", "text/css"},
    {"js", "text/javascript"},
    {"json", "application/json"},
    {"xml", "application/xml"},
    {"svg", "image/svg+xml"},
    {"png", "image/png"},
    {"jpg", "image/jpeg"},
    {"jpeg", "image/jpeg"},
    {"gif", "image/gif"},
    {"webp", "image/webp"},
    {"ico", "image/x-icon"},
    {"pdf", "application/pdf"},
    {"wasm", "application/wasm"},
    {"md", "text/markdown; charset=utf-8"},
};

static const char *
mime_type(const char *path)
{
	const char *dot = strrchr(path, '.');
	unsigned i;

	if (dot == NULL || strchr(dot, '/') != NULL)
		return "application/octet-stream";
	for (i = 0; i < sizeof(mime) / sizeof(mime[0]); i++)
		if (http_ieq(dot + 1, strlen(dot + 1), mime[i].ext))
			return mime[i].type;
	return "application/octet-stream";
}

/* %-decode the path and check its segments; @return 0 or an HTTP status. */
static int
clean_path(const char *enc, size_t len, char *out, size_t cap)
{
	const char *s;
	int n = http_pct_decode(enc, len, out, cap);

	if (n < 0)
		return 400;
	if (out[0] != '/')
		return 400;
	for (s = out; *s != '\0';) {
		const char *e;
		size_t sl;

		while (*s == '/')
			s++;
		e = strchr(s, '/');
		sl = e != NULL ? (size_t)(e - s) : strlen(s);
		if ((sl == 1 && s[0] == '.') || (sl == 2 && s[0] == '.' && s[1] == '.'))
			return 400;
		if (memchr(s, '\\', sl) != NULL)
			return 400;
		s += sl;
	}
	return 0;
}

static int
open_beneath(int dirfd, const char *rel)
{
	/* O_NONBLOCK: a FIFO or a device opens without waiting for its other end (and is
	 * refused once fstat says what it is); a regular file is set back to blocking. */
	struct open_how how = {
	    .flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
	    .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));

	return fd < 0 ? -errno : (int)fd;
}

static int
errno_status(int err)
{
	switch (err) {
	case -ENOENT:
	case -ENOTDIR:
	case -ENAMETOOLONG:
		return 404;
	case -EXDEV: /* a symlink or ".." that leaves the root */
	case -EACCES:
	case -EPERM:
	case -ELOOP:
	case -ENXIO: /* a unix socket, a device without its driver */
	case -ENODEV:
	case -EOPNOTSUPP:
		return 403;
	default:
		return 500;
	}
}

/*
 * Open the file @p path names (a directory: its index.html). On a helper thread (it may
 * block on the file system), or on the lcore when no helper takes the job.
 * @return fd or -status.
 */
/* "FILE.gz" beside @p rel, when it is a regular file; else -1. */
static int
open_gz(const char *rel, struct stat *st)
{
	char gz[4096 + 4];
	int fd;

	if ((size_t)snprintf(gz, sizeof(gz), "%s.gz", rel) >= sizeof(gz))
		return -1;
	fd = open_beneath(http_cfg.root_fd, gz);
	if (fd < 0)
		return -1;
	if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode) ||
	    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int
open_file(struct http_file *f, struct stat *st, const char **type)
{
	const char *rel, *path = f->path;
	int fd, fd2;

	while (*path == '/')
		path++;
	rel = *path == '\0' ? "." : path;
	if (f->gzip_ok && !f->want_dir) {
		fd = open_gz(rel, st);
		if (fd >= 0) {
			f->gzipped = true;
			*type = mime_type(rel);
			return fd;
		}
	}
	fd = open_beneath(http_cfg.root_fd, rel);
	if (fd < 0)
		return -errno_status(fd);
	if (fstat(fd, st) != 0) {
		close(fd);
		return -500;
	}
	if (S_ISDIR(st->st_mode) && !f->want_dir) {
		close(fd);
		return -301;
	}
	if (S_ISDIR(st->st_mode)) {
		fd2 = open_beneath(fd, "index.html");
		close(fd);
		if (fd2 < 0)
			return -errno_status(fd2);
		fd = fd2;
		if (fstat(fd, st) != 0) {
			close(fd);
			return -500;
		}
		*type = mime_type("index.html");
	} else {
		*type = mime_type(rel);
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		return -403;
	}
	/* Back to blocking: io_uring hands -EAGAIN back for a read of an O_NONBLOCK file
	 * whose pages are not cached, instead of reading it on its worker. */
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
		close(fd);
		return -500;
	}
	return fd;
}

/*
 * Range: one "bytes=" range of a @p size-byte file. @return 1 a range to serve in
 * *first..*last, 0 serve the whole file (no Range, a form we ignore: several ranges or
 * bad syntax, as RFC 9110 14.2 allows), -1 unsatisfiable (416).
 */
static int
parse_range(const char *v, size_t len, uint64_t size, uint64_t *first, uint64_t *last)
{
	uint64_t a = 0, b = 0;
	size_t i = 6;
	bool has_a = false, has_b = false;

	if (len < 7 || memcmp(v, "bytes=", 6) != 0 || memchr(v, ',', len) != NULL)
		return 0;
	while (i < len && v[i] >= '0' && v[i] <= '9' && a < (UINT64_MAX / 10 - 10)) {
		a = a * 10 + (uint64_t)(v[i++] - '0');
		has_a = true;
	}
	if (i == len || v[i++] != '-')
		return 0;
	while (i < len && v[i] >= '0' && v[i] <= '9' && b < (UINT64_MAX / 10 - 10)) {
		b = b * 10 + (uint64_t)(v[i++] - '0');
		has_b = true;
	}
	if (i != len || (!has_a && !has_b))
		return 0;
	if (!has_a) { /* the last b bytes */
		if (b == 0 || size == 0)
			return -1;
		*first = b >= size ? 0 : size - b;
		*last = size - 1;
		return 1;
	}
	if (has_b && b < a)
		return 0; /* invalid: ignored */
	if (a >= size)
		return -1;
	*first = a;
	*last = has_b && b < size ? b : size - 1;
	return 1;
}

static int file_read(struct http_file *f);

#define WAIT_ARGS(hl) (hl)->files, sizeof(struct http_file), offsetof(struct http_file, wait)

static void
wait_remove(struct http_lcore *hl, struct http_file *f)
{
	http_ilist_remove(&hl->wait, WAIT_ARGS(hl), (uint32_t)(f - hl->files));
}

static void
buf_put(struct http_lcore *hl, struct http_file *f)
{
	if (f->buf == NULL)
		return;
	hl->buf_free[hl->buf_nfree++] =
	    (uint32_t)((size_t)(f->buf - hl->buf_mem) / HTTP_FILE_CHUNK);
	f->buf = NULL;
	/* The transfers in line get it from the timer, not from inside this caller. */
	if (hl->wait.head != HTTP_LINK_NONE && hl->buf_timer_on && !cr_timer_armed(&hl->buf_timer))
		cr_timer_start(&hl->buf_timer, 1);
}

static void
file_put(struct http_lcore *hl, struct http_file *f)
{
	if (f->fd >= 0)
		close(f->fd);
	wait_remove(hl, f);
	buf_put(hl, f);
	f->fd = -1;
	f->h = NULL;
	f->op = 0;
	hl->file_free[hl->file_nfree++] = (uint32_t)(f - hl->files);
}

static void
file_released(void *arg)
{
	struct http_file *f = arg;

	file_put(http_lcore_cur(), f);
}

static void
file_end(struct http_lcore *hl, struct http_conn *h, int err)
{
	struct http_file *f = h->file;

	h->file = NULL;
	file_put(hl, f);
	http_cfg.file_done(hl, h, err);
}

/* A spliced body ended (http_splice.c), or its connection went away before. */
static void
splice_over(struct http_file *f, int err)
{
	struct http_lcore *hl = http_lcore_cur();

	if (f->h == NULL)
		file_put(hl, f);
	else
		file_end(hl, f->h, err);
}

static void
read_done(void *ctx, const struct cr_io_cqe *cqe)
{
	struct http_file *f = ctx;
	struct http_conn *h = f->h;
	struct http_lcore *hl = http_lcore_cur();
	size_t n;

	f->op = 0;
	if (cqe->res <= 0) {
		/* An error, or the file shrank: the Content-Length sent cannot be kept. */
		file_end(hl, h, cqe->res < 0 ? cqe->res : -EIO);
		return;
	}
	n = (size_t)cqe->res;
	if (n > f->left)
		n = (size_t)f->left;
	if (cr_conn_send(h->c, f->buf, n) != 0) {
		file_end(hl, h, -ENOBUFS);
		return;
	}
	buf_put(hl, f); /* copied into the connection's queue */
	hl->cnt[CNT_STATIC_BYTES] += n;
	f->off += n;
	f->left -= n;
	if (f->left == 0) {
		file_end(hl, h, 0);
		return;
	}
	if (!cr_conn_writable(h->c))
		f->wait_drain = true;
	else if (file_read(f) != 0)
		file_end(hl, h, -ENOSPC);
}

/* Read the next chunk, or wait in line for a buffer (after those already waiting). */
static int
file_read(struct http_file *f)
{
	struct http_lcore *hl = http_lcore_cur();
	size_t n = f->left < HTTP_FILE_CHUNK ? (size_t)f->left : HTTP_FILE_CHUNK;

	f->wait_drain = false;
	if (f->buf == NULL) {
		if (hl->buf_nfree == 0 || (hl->wait.head != HTTP_LINK_NONE && !f->wait.on)) {
			if (!f->wait.on)
				http_ilist_push(&hl->wait, WAIT_ARGS(hl),
						(uint32_t)(f - hl->files));
			return 0;
		}
		wait_remove(hl, f);
		f->buf = hl->buf_mem + (size_t)hl->buf_free[--hl->buf_nfree] * HTTP_FILE_CHUNK;
	}
	f->op = cr_io_read(f->fd, f->buf, n, f->off, read_done, f);
	return f->op == 0 ? -errno : 0;
}

/* The buffer timer: the transfers waiting in line read, oldest first, while buffers last. */
static void
buf_tick(struct cr_timer *t, void *arg)
{
	struct http_lcore *hl = arg;

	(void)t;
	while (hl->buf_nfree > 0 && hl->wait.head != HTTP_LINK_NONE) {
		struct http_file *f = &hl->files[hl->wait.head];
		struct http_conn *h = f->h;

		if (file_read(f) != 0)
			file_end(hl, h, -ENOSPC);
	}
}

void
http_static_start(struct http_lcore *hl)
{
	cr_timer_init(&hl->buf_timer, buf_tick, hl);
	hl->buf_timer_on = true;
}

void
http_static_stop(struct http_lcore *hl)
{
	/* What is still open is closed after this: no buffer is handed out any more. */
	hl->buf_timer_on = false;
	cr_timer_stop(&hl->buf_timer);
}

void
http_static_drained(struct http_lcore *hl, struct http_conn *h)
{
	struct http_file *f = h->file;

	if (f != NULL && f->wait_drain && f->op == 0 && !f->wait.on && file_read(f) != 0)
		file_end(hl, h, -ENOSPC);
}

void
http_static_abort(struct http_lcore *hl, struct http_conn *h)
{
	struct http_file *f = h->file;

	h->file = NULL;
	if (f == NULL)
		return;
	f->h = NULL;
	if (f->opening)
		return; /* open_done() sees no connection and puts the slot */
	if ((f->splicing || f->head_wait) && http_splice_abort(f))
		return; /* splice_over() puts it */
	/* The kernel may still write into f->buf: the slot comes back after the read ends. */
	if (f->op != 0 && cr_io_abandon(f->op, file_released, f) == 0)
		return;
	file_put(hl, f);
}

void
http_static_open_expired(struct http_lcore *hl, struct http_conn *h)
{
	static const char retry[] = "Retry-After: 1\r\n";
	struct http_file *f = h->file;

	(void)hl;
	if (f == NULL || !f->opening)
		return;
	f->h = NULL; /* open_done() puts the slot back */
	h->file = NULL;
	http_reply_status(h, 503, false, retry, sizeof(retry) - 1);
	http_request_done(h);
}

/*
 * If-None-Match: "*", or a list of entity tags one of which is @p etag, compared weakly
 * (a W/ prefix is ignored), as RFC 9110 13.1.2 says for GET and HEAD.
 */
static bool
etag_matches(const char *v, size_t len, const char *etag)
{
	size_t el = strlen(etag), i = 0;

	while (i < len) {
		size_t j;

		while (i < len && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		if (i < len && v[i] == '*')
			return true;
		if (i + 2 <= len && v[i] == 'W' && v[i + 1] == '/')
			i += 2;
		for (j = i; j < len && v[j] != ','; j++)
			;
		while (j > i && (v[j - 1] == ' ' || v[j - 1] == '\t'))
			j--;
		if (j - i == el && memcmp(v + i, etag, el) == 0)
			return true;
		while (i < len && v[i] != ',')
			i++;
	}
	return false;
}

/*
 * A directory named without its slash: 301 to the same path with it, the query kept, as
 * an absolute URL with the Host the client sent and the port it came to (left out when
 * 80 for http, 443 for https), the way
 * nginx writes it (absolute_redirect, port_in_redirect); the path %-decoded, as nginx.
 */
static void
redirect_dir(struct http_conn *h, struct http_file *f)
{
	char extra[HTTP_EXTRA_MAX], port[8] = "";
	bool tls = cr_tls_conn(h->c);
	unsigned p = tls ? http_tls_port() : http_cfg.port;
	int n;

	if (p != (tls ? 443u : 80u))
		snprintf(port, sizeof(port), ":%u", p);
	/* HTTP/1.0 without Host: a relative Location, which RFC 9110 10.2.2 allows. */
	n = snprintf(extra, sizeof(extra), "Location: %s%s%s%s/%s%.*s\r\n",
		     f->host_len == 0 ? "" : tls ? "https://" : "http://", f->host,
		     f->host_len > 0 ? port : "",
		     f->path, f->args_len > 0 ? "?" : "", (int)f->args_len, f->args);
	if (n < 0 || (size_t)n >= sizeof(extra))
		n = 0;
	http_reply_status_to(h, 301, f->keep, f->head_only, extra, (size_t)n);
}

/* Accept-Encoding names gzip with a q above 0 (nginx: "gzip" and no ";q=0"). */
static bool
takes_gzip(const char *v, size_t len)
{
	for (size_t i = 0; i + 4 <= len; i++) {
		size_t j = i + 4;

		if (!http_ieq(v + i, 4, "gzip") || (i > 0 && v[i - 1] != ' ' && v[i - 1] != ',' &&
						    v[i - 1] != '\t'))
			continue;
		while (j < len && (v[j] == ' ' || v[j] == '\t'))
			j++;
		if (j < len && v[j] != ',' && v[j] != ';')
			continue;
		if (j < len && v[j] == ';') {
			j++;
			while (j < len && (v[j] == ' ' || v[j] == '\t'))
				j++;
			if (j + 2 < len + 1 && (v[j] == 'q' || v[j] == 'Q') && v[j + 1] == '=') {
				j += 2;
				while (j < len && (v[j] == '0' || v[j] == '.'))
					j++;
				if (j == len || v[j] == ',' || v[j] == ' ')
					return false; /* q=0, q=0.0, ... */
			}
		}
		return true;
	}
	return false;
}

/* What the answer needs from the head, which is gone by the time the open ends. */
static void
keep_head_fields(struct http_file *f, const char *head, const struct http_request *req)
{
	const char *v, *t = head + req->target.off;
	size_t n, pe = (size_t)(req->path.off - req->target.off) + req->path.len;

	n = req->host.len;
	v = head + req->host.off;
	if (n > 0 && v[0] != '[') { /* the port goes: ours is added */
		const char *c = memchr(v, ':', n);

		if (c != NULL)
			n = (size_t)(c - v);
	} else if (n > 0) {
		const char *c = memchr(v, ']', n);

		if (c != NULL)
			n = (size_t)(c - v) + 1;
	}
	f->host_len = n < sizeof(f->host) ? (uint16_t)n : 0;
	memcpy(f->host, v, f->host_len);
	f->host[f->host_len] = '\0';
	f->args_len = 0;
	if (pe < req->target.len && t[pe] == '?' && req->target.len - pe - 1 < sizeof(f->args)) {
		f->args_len = (uint16_t)(req->target.len - pe - 1);
		memcpy(f->args, t + pe + 1, f->args_len);
	}
	n = http_header_value(head, req->head_len, "if-none-match", &v);
	f->inm_len = n < sizeof(f->inm) ? (uint16_t)n : 0;
	memcpy(f->inm, v, f->inm_len);
	n = http_header_value(head, req->head_len, "accept-encoding", &v);
	/* nginx's gzip_http_version 1.1: an HTTP/1.0 client gets the file as it is. */
	f->gzip_ok = req->minor >= 1 && n > 0 && takes_gzip(v, n);
	f->gzipped = false;
	f->want_dir = f->path[0] != '\0' && f->path[strlen(f->path) - 1] == '/';
}

/*
 * The file is open (or not): answer. Either the whole answer is written and the slot put
 * back (h->file NULL), or the head is sent and the first read started (h->file set).
 */
static void
answer_file(struct http_lcore *hl, struct http_conn *h, struct http_file *f)
{
	char extra[512], lm[30], etag[48];
	uint64_t size, first = 0, last = 0, len;
	int status, rng = 0;
	size_t xl;

	h->file = NULL;
	if (f->fd == -301) {
		redirect_dir(h, f);
		goto out_put;
	}
	if (f->fd < 0) {
		http_reply_status_to(h, -f->fd, f->keep, f->head_only, NULL, 0);
		goto out_put;
	}
	size = (uint64_t)f->st.st_size;
	http_date_format((int64_t)f->st.st_mtim.tv_sec, lm);
	/* nginx's ETag: the mtime and the size in hex. */
	snprintf(etag, sizeof(etag), "\"%llx-%llx\"", (unsigned long long)f->st.st_mtim.tv_sec,
		 (unsigned long long)size);
	xl = (size_t)snprintf(extra, sizeof(extra),
			      "Last-Modified: %s\r\nETag: %s\r\nAccept-Ranges: bytes\r\n%s", lm,
			      etag, f->gzipped ? "Content-Encoding: gzip\r\n" : "");
	if (f->inm_len > 0 ? etag_matches(f->inm, f->inm_len, etag)
			   : f->has_ims && (int64_t)f->st.st_mtim.tv_sec <= f->ims) {
		http_out_head(h, 304, NULL, UINT64_MAX, extra, xl, f->keep);
		goto out_put;
	}
	if (f->range_len > 0)
		rng = parse_range(f->range, f->range_len, size, &first, &last);
	if (rng < 0) {
		xl += (size_t)snprintf(extra + xl, sizeof(extra) - xl,
				       "Content-Range: bytes */%llu\r\n", (unsigned long long)size);
		http_reply_status_to(h, 416, f->keep, f->head_only, extra, xl);
		goto out_put;
	}
	if (rng > 0) {
		len = last - first + 1;
		xl += (size_t)snprintf(
		    extra + xl, sizeof(extra) - xl, "Content-Range: bytes %llu-%llu/%llu\r\n",
		    (unsigned long long)first, (unsigned long long)last, (unsigned long long)size);
		status = 206;
	} else {
		len = size;
		status = 200;
	}
	http_out_head(h, status, f->type, len, extra, xl, f->keep);
	if (f->head_only || len == 0)
		goto out_put;
	f->off = first;
	f->left = len;
	h->file = f;
	if (http_splice_wanted(h, len)) {
		int rc = http_splice_start(hl, h, f, splice_over);

		if (rc == 0)
			return;
		if (rc != -EAGAIN) {
			h->file = NULL;
			goto out_put;
		}
	}
	http_out_flush(h);
	if (h->failed || file_read(f) != 0) {
		h->file = NULL;
		h->failed = true;
		goto out_put;
	}
	return;
out_put:
	file_put(hl, f);
}

/* On a helper thread. */
static void
open_job(void *arg)
{
	struct http_file *f = arg;

	f->fd = open_file(f, &f->st, &f->type);
}

/* Back on the lcore. */
static void
open_done(void *arg)
{
	struct http_file *f = arg;
	struct http_lcore *hl = http_lcore_cur();
	struct http_conn *h = f->h;

	f->opening = false;
	if (h == NULL) {
		file_put(hl, f); /* the connection went away, or gave up waiting */
		return;
	}
	cr_timer_stop(&h->hdr_timer);
	answer_file(hl, h, f);
	if (h->file == NULL)
		http_cfg.file_done(hl, h, h->failed ? -EPIPE : 0);
	/* else the transfer runs; it ends in http_cfg.file_done() too */
}

void
http_static_serve(struct http_lcore *hl, struct http_conn *h, const char *head,
		  const struct http_request *req, bool keep)
{
	static const char retry[] = "Retry-After: 1\r\n";
	struct http_file *f;
	int status;

	if (hl->file_nfree == 0) {
		http_reply_status(h, 503, keep, retry, sizeof(retry) - 1);
		return;
	}
	f = &hl->files[hl->file_free[hl->file_nfree - 1]];
	status = clean_path(head + req->path.off, req->path.len, f->path, sizeof(f->path));
	if (status != 0) {
		http_reply_status(h, status, keep, NULL, 0);
		return;
	}
	keep_head_fields(f, head, req);
	hl->file_nfree--;
	f->h = h;
	f->fd = -1;
	f->op = 0;
	f->buf = NULL;
	f->wait.on = false;
	f->wait_drain = false;
	f->splicing = false;
	f->head_wait = false;
	f->head_only = req->method == HTTP_HEAD;
	f->keep = keep;
	f->has_ims = req->if_modified_since.len > 0 &&
		     http_date_parse(head + req->if_modified_since.off, req->if_modified_since.len,
				     &f->ims) == 0;
	/* A longer Range is no single range we serve: ignored, the whole file goes. */
	f->range_len = req->range.len < sizeof(f->range) ? (uint8_t)req->range.len : 0;
	memcpy(f->range, head + req->range.off, f->range_len);
	f->type = NULL;
	/* The open may block on the file system: a helper thread does it, and the
	 * connection waits (its further input is held) until open_done(). */
	f->opening = true;
	h->file = f;
	if (cr_offload(open_job, f, open_done) == 0) {
		/* A file system that hangs holds the helper, not the client: after
		 * --header-timeout the connection gets 503 (http_static_open_expired()). */
		cr_timer_start(&h->hdr_timer, http_cfg.header_timeout_ns);
		return;
	}
	/* No helper takes it (queue full, or this lcore is retiring): here, then. */
	f->opening = false;
	open_job(f);
	answer_file(hl, h, f);
}
