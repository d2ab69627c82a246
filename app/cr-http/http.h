/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cr-http internals shared by its files (main.c says which does what, and in which
 * direction they call each other). Never installed.
 */
#ifndef CR_HTTP_H
#define CR_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "cr_app.h"
#include "cr_io.h"
#include "cr_net.h"
#include "cr_reactor.h"
#include "http_parse.h"

/*
 * Bytes a static transfer reads at a time, and reads per lcore at once (each into one of
 * HTTP_READ_BUFS buffers, held only while the read is in flight). A transfer is a file
 * slot of its connection (one per connection: its fd and offsets); one that waits for its
 * client to read holds no buffer, so clients that do not read take nothing from the
 * others but the output their own watermark allows.
 */
#define HTTP_FILE_CHUNK (32u * 1024)
#define HTTP_READ_BUFS 64u
/* Input a connection may stage beyond the head limits while a file goes out. */
#define HTTP_STAGE_SLACK (32u * 1024)
/* --splice-min's default: a body this large goes by splice (two ops a pipeful instead of
 * a read and a copy per 32 KiB chunk); not measured here yet. */
#define HTTP_SPLICE_MIN (64u * 1024)

enum { PH_HEAD = 0, PH_BODY };

/*
 * A list of array elements by index, oldest first (http_reclaim.c): each element embeds a
 * struct http_link; the list knows the array, the element size and the link's offset.
 */
#define HTTP_LINK_NONE UINT32_MAX
struct http_link {
	uint32_t prev, next;
	bool on;
};
struct http_ilist {
	uint32_t head, tail; /* HTTP_LINK_NONE: empty */
};
void http_ilist_init(struct http_ilist *l);
void http_ilist_push(struct http_ilist *l, void *base, size_t size, size_t off, uint32_t i);
void http_ilist_remove(struct http_ilist *l, void *base, size_t size, size_t off, uint32_t i);

/* App counters, summed per lcore in struct http_lcore and pushed to telemetry. */
enum {
	CNT_REQUESTS = 0,
	CNT_RESP_1XX,
	CNT_RESP_2XX,
	CNT_RESP_3XX,
	CNT_RESP_4XX,
	CNT_RESP_5XX,
	CNT_PARSE_ERRORS,
	CNT_HEADER_TIMEOUTS,
	CNT_STATIC_BYTES,
	CNT_BODY_TIMEOUTS,
	CNT_RECLAIMED,
	CNT_SPLICED,
	CNT_COUNT
};

struct http_file;

/* One connection's state, in a per-lcore array indexed by cr_conn_index(). */
struct http_conn {
	struct cr_conn *c;
	struct http_parser p;
	struct http_body body;
	struct cr_timer hdr_timer;
	char *stage; /* a partial head (or input held while a file goes out) */
	uint32_t stage_len;
	uint8_t phase; /* PH_HEAD, PH_BODY */
	bool open;
	bool closing; /* the response written last says close: read no more */
	bool failed;  /* a send failed: destroy once back in the callback */
	bool read_stopped;
	bool peer_eof;	/* the peer shut its side: ours shuts once the answers are out */
	bool held_cut;	/* input behind a transfer did not fit: refused after the rest */
	bool replaying; /* the held input is being answered (it fits the stage again) */
	bool pend_keep; /* the answer due once the body is read */
	uint8_t pend_kind;
	uint16_t pend_status;
	struct http_file *file;
	uint64_t req_start_ns; /* the head of the request being answered; 0 once counted */
	/* The body being read: when it began, its last piece, its bytes (http_reclaim.c). */
	uint64_t body_start_ns, body_last_ns, body_bytes;
	/* On the lcore's list of connections a new one may end (http_reclaim.c). */
	struct http_link lru;
	/* The access line of the request being answered, in its slot (http_access.c). */
	uint16_t acc_pre, acc_len; /* 0: none begun */
	bool acc_head_only;
	char peer[48]; /* the peer's address for the access log, once known */
};

/* A static request: its file being opened (on a helper thread), then sent. */
struct http_file {
	struct http_conn *h; /* NULL once the connection went away */
	int fd;		     /* or -status once the open failed */
	uint64_t off, left;
	char *buf; /* a read buffer while a read is in flight, else NULL */
	cr_op_id op;
	struct http_link wait; /* on the lcore's list of transfers waiting for a buffer */
	bool wait_drain;
	bool opening; /* the open job is out: its completion owns the slot */
	/* What the answer needs from the head, which is gone by the time the open ends. */
	bool head_only, keep, has_ims;
	int64_t ims;
	uint8_t range_len;
	char range[64];
	bool gzip_ok;  /* the client takes gzip: a .gz sibling is served (gzip_static) */
	bool gzipped;  /* the .gz sibling was opened */
	bool want_dir; /* the path ends with '/' (a directory without it: 301) */
	uint16_t host_len, args_len, inm_len;
	char host[256];	 /* Host, without its port: the 301's Location */
	char args[1024]; /* the query, after '?' */
	char inm[256];	 /* If-None-Match */
	const char *type;
	/* A body by splice (http_splice.c): its pipe, the bytes in it, who ends it. */
	struct cr_io_pipe pipe;
	uint32_t in_pipe;
	bool splicing;	/* the pipe is the transfer's */
	bool head_wait; /* the head's last byte is queued: its sent callback starts it */
	void (*splice_end)(struct http_file *f, int err);
	struct stat st;
	char path[4096]; /* %-decoded */
};

struct http_lcore {
	struct http_conn *conns;
	char *out; /* responses of one on_data, sent with one cr_conn_send */
	size_t out_len, out_cap;
	char *tmp; /* staged input being replayed after a file went out */
	/* Free staging buffers and file slots, LIFO so the warm ones come back first. */
	char *stage_mem;
	uint32_t *stage_free;
	uint32_t stage_nfree;
	struct http_file *files; /* one per connection slot */
	uint32_t *file_free;
	uint32_t file_nfree;
	char *buf_mem; /* HTTP_READ_BUFS read buffers */
	uint32_t *buf_free;
	uint32_t buf_nfree;
	struct http_ilist wait;	   /* transfers waiting for a buffer, oldest first */
	struct cr_timer buf_timer; /* hands freed buffers to the waiting transfers */
	bool buf_timer_on;	   /* from lcore start to lcore stop */
	/* Date header, refreshed every second, and the canned responses that carry it. */
	char date[30];
	char plain[256];
	uint32_t plain_len;
	char json[256];
	uint32_t json_len;
	struct cr_timer date_timer;
	bool shutting; /* shutting down: every answer says Connection: close */
	char *acc_mem;		     /* --access-log: HTTP_ACC_SLOT bytes per connection */
	uint32_t n_open;	     /* connections open */
	struct http_ilist lru; /* reclaimable connections, oldest first (http_reclaim.c) */
	uint64_t cnt[CNT_COUNT];
};

struct http_cfg {
	struct http_limits lim;
	int ctr[CNT_COUNT]; /* telemetry counter ids */
	/* A transfer of http_static.c ended (http_conn.c resumes the connection). */
	void (*file_done)(struct http_lcore *hl, struct http_conn *h, int err);
	uint64_t header_timeout_ns;
	uint64_t keepalive_ns;
	uint64_t body_timeout_ns; /* 0: none */
	uint64_t min_body_rate;	  /* bytes a second; 0: none */
	uint32_t max_conns;
	uint32_t reserve; /* slots kept free by ending the oldest idle or slow connection */
	uint32_t stage_cap;
	/* --plaintext-path, --json-path: the built-in routes; length 0: off. */
	const char *plain_path, *json_path;
	size_t plain_path_len, json_path_len;
	uint16_t port; /* the listening port, for an absolute Location */
	int root_fd; /* -1: no --root */
	char root[4096];
	/* --hsts: the header line HTTPS answers carry (hsts_len 0: none). */
	char hsts[64];
	uint32_t hsts_len;
	/* --splice-min: bodies of at least this many bytes go by splice (0: never). */
	uint64_t splice_min;
};

extern struct http_cfg http_cfg;

/* http_tls.c: HTTPS beside the plain listener. */
unsigned http_tls_opts(struct cr_opt *out, unsigned cap);
int http_tls_configure(void);
int http_tls_start(const struct cr_conn_ops *ops, uint64_t idle_ns);
void http_tls_ready_line(void);
void http_tls_stop(void);
void http_tls_reload(void *arg);
void http_tls_fini(void);
/* The answers on @p c carry the HSTS line. */
bool http_hsts(const struct cr_conn *c);
uint16_t http_tls_port(void);

/* http_lcore.c: the per-lcore state, an lcore-local. */
extern int http_local;
int http_lcore_register(void);
/* lcore_init / lcore_stop: the Date timer. */
int http_lcore_start(unsigned lcore, void *arg);
void http_lcore_stop(unsigned lcore, void *arg);

/* The calling lcore's state. */
static inline struct http_lcore *
http_lcore_cur(void)
{
	return cr_lcore_local(http_local);
}
/* The request-time histogram (telemetry id) and its observation (http_lcore.c). */
extern int http_hist_request;
void http_request_done(struct http_conn *h);

/* http_access.c: --access-log. */
#define HTTP_ACC_SLOT 2048u
bool http_access_on(void);
int http_access_open(const char *path);
/* cr_app.reopen_logs (SIGUSR1, the signal thread). */
void http_access_reopen(void *arg);
void http_access_close(void);
uint64_t http_access_dropped(void);
/* A head was parsed: its access fields go into the connection's slot. */
void http_access_begin(struct http_conn *h, const char *head, size_t head_len, bool head_only);
/* The response head is written: the line goes out, with @p status and the body's bytes. */
void http_access_end(struct http_conn *h, int status, uint64_t body_bytes);

/* http_date.c */
void http_date_start(struct http_lcore *hl);
void http_date_stop(struct http_lcore *hl);

/* http_out.c: the response writer, into the lcore's output buffer. */
void http_out(struct http_conn *h, const void *p, size_t n);
/* The most header bytes http_out_head() takes in @p extra (more are left out). */
#define HTTP_EXTRA_MAX 6144u
void http_out_head(struct http_conn *h, int status, const char *ctype, uint64_t clen,
		   const char *extra, size_t extra_len, bool keep);
void http_out_flush(struct http_conn *h);
void http_count_status(struct http_lcore *hl, int status);
/* The date timer calls this: the canned 1.1 keep-alive answers carry the new Date. */
void http_canned_rebuild(struct http_lcore *hl);
/* An error answer, body "STATUS Reason"; without @p keep the connection closes after it. */
void http_reply_status(struct http_conn *h, int status, bool keep, const char *extra,
		       size_t extra_len);
/* The same for a request whose head is gone: @p head_only says whether it was HEAD. */
void http_reply_status_to(struct http_conn *h, int status, bool keep, bool head_only,
			  const char *extra, size_t extra_len);
/* The built-in routes' answer: /plaintext, or /json with @p json. */
void http_reply_hello(struct http_lcore *hl, struct http_conn *h, bool json, bool keep);

/* http_pipeline.c: requests on a connection. */
/*
 * Parse and answer what @p data holds, after whatever is staged. Stops at a close, a
 * failure, or a transfer that started (the rest is staged until it ends).
 */
void http_process(struct http_lcore *hl, struct http_conn *h, const char *data, size_t len);
/* Keep @p n bytes of input for later (a partial head, or input behind a transfer). */
bool http_stash(struct http_lcore *hl, struct http_conn *h, const char *data, size_t n);
/* Input behind a transfer: held while it fits, the rest refused later; false: no stage. */
bool http_hold(struct http_lcore *hl, struct http_conn *h, const char *data, size_t n);
/* After the held input was answered: 503 and close for what http_hold() had to drop. */
void http_hold_refuse(struct http_lcore *hl, struct http_conn *h);
void http_stage_put(struct http_lcore *hl, struct http_conn *h);
void http_header_timer_arm(struct http_conn *h);
/* A request is being read or answered (a staged head, a body, a transfer). */
bool http_in_flight(const struct http_conn *h);
/* May the answer being written keep the connection open (not shutting down: a retire
 * moves every connection, plain or TLS, to another lcore at its boundary)? */
bool http_may_keep(const struct http_lcore *hl);

/* http_reclaim.c: the slow-body deadline and the reserve of connection slots. */
void http_lru_remove(struct http_lcore *hl, struct http_conn *h);
/* To the newest end: a request began, or the connection opened. */
void http_lru_touch(struct http_lcore *hl, struct http_conn *h);
/* After a callback: on the list unless closing or sending a file. */
void http_lru_settle(struct http_lcore *hl, struct http_conn *h);
/* Above the reserve: the oldest idle or slow connection to end for @p fresh, else NULL. */
struct cr_conn *http_reclaim_victim(struct http_lcore *hl, const struct http_conn *fresh);
/* A body begins (arms the body deadline), @p n more of its bytes arrived. */
void http_body_start(struct http_conn *h);
void http_body_got(struct http_conn *h, size_t n);
/* Time left before the body misses --body-timeout or --min-body-rate; 0: missed. */
uint64_t http_body_left_ns(const struct http_conn *h);

/* http_splice.c: a body by splice, file -> pipe -> socket (plain HTTP, --splice-min). */
bool http_splice_wanted(const struct http_conn *h, uint64_t len);
/*
 * Send @p f's body (f->off, f->left) after the head just written: 0 started, and @p end
 * runs once when it is over (0, or -errno; f->h NULL if the connection went away);
 * -EAGAIN no pipe free (copy instead, nothing taken); another -errno: h->failed is set.
 */
int http_splice_start(struct http_lcore *hl, struct http_conn *h, struct http_file *f,
		      void (*end)(struct http_file *f, int err));
/* The connection went away: true if @p f comes back through its end callback later. */
bool http_splice_abort(struct http_file *f);

/* http_static.c */
/*
 * Serve @p req (GET or HEAD, path under --root) on @p h: the response head, and either
 * the whole answer or a started transfer (h->file set), which ends in http_cfg.file_done.
 */
void http_static_serve(struct http_lcore *hl, struct http_conn *h, const char *head,
		       const struct http_request *req, bool keep);
/* The connection is going away: end its transfer (the read in flight is abandoned). */
void http_static_abort(struct http_lcore *hl, struct http_conn *h);
/* The open of @p h's file took --header-timeout: answer 503, close (the job ends alone). */
void http_static_open_expired(struct http_lcore *hl, struct http_conn *h);
/* lcore start / stop: the timer that hands read buffers out. */
void http_static_start(struct http_lcore *hl);
void http_static_stop(struct http_lcore *hl);
/* Continue a transfer after the output queue drained. */
void http_static_drained(struct http_lcore *hl, struct http_conn *h);

/* http_conn.c: the connection callbacks. */
extern const struct cr_conn_ops http_conn_ops;
/* Before the lcores start: set http_cfg.file_done. */
void http_conn_init(void);

/* http_shutdown.c */
/* cr_conn_ops.at_boundary: lib/net may close the connection now (no request half-read or
 * being answered). */
bool http_at_boundary(struct cr_conn *c);
/* retire / shutdown: every answer from now on says Connection: close. */
void http_drain_hook(unsigned lcore, void *arg);
/* The first SIGINT/SIGTERM, on the main lcore: close @p *listener, then stop. */
void http_stop(struct cr_listener **listener);

#endif /* CR_HTTP_H */
