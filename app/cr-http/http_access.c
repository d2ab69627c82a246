/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The access log (--access-log PATH): one line per response in nginx's "combined"
 * format,
 *
 *   ADDR - - [02/Dec/2026:03:41:06 +0000] "GET /a HTTP/1.1" 200 13 "REFERER" "AGENT"
 *
 * with what nginx escapes escaped the way it does (", \ and bytes outside 0x20-0x7e as
 * \xHH), "-" for an absent field. The time is UTC, from the lcore's Date of this second.
 *
 * The head is gone by the time a deferred answer (a body read, a file opened) goes out,
 * so when a head is parsed its fields are formatted into the connection's slot of the
 * lcore's access memory (HTTP_ACC_SLOT bytes each; a longer field is cut); the status
 * and the body bytes are added when the response head is written. Lines go through
 * lib/eal's log files (cr_log_file_put()): copied into the lcore's log buffer, written
 * by the log thread; a full buffer drops and counts the line, never blocks the lcore.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cr_log.h"
#include "http.h"

static int access_id = -1;

bool
http_access_on(void)
{
	return access_id > 0;
}

int
http_access_open(const char *path)
{
	int id = cr_log_file_open(path);

	if (id < 0)
		return id;
	access_id = id;
	return 0;
}

void
http_access_reopen(void *arg)
{
	(void)arg;
	if (access_id > 0)
		(void)cr_log_file_reopen(access_id);
}

void
http_access_close(void)
{
	if (access_id > 0)
		cr_log_file_close(access_id);
	access_id = -1;
}

uint64_t
http_access_dropped(void)
{
	return access_id > 0 ? cr_log_file_dropped(access_id) : 0;
}

/* Append @p s[0..n) escaped as nginx escapes a variable; stops at @p end. */
static char *
put_esc(char *d, const char *end, const char *s, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\' || c < 0x20 || c > 0x7e) {
			if (end - d < 4)
				break;
			*d++ = '\\';
			*d++ = 'x';
			*d++ = hex[c >> 4];
			*d++ = hex[c & 15];
		} else {
			if (end - d < 1)
				break;
			*d++ = (char)c;
		}
	}
	return d;
}

/* A quoted field: "value", or "-" when absent. */
static char *
put_field(char *d, const char *end, const char *s, size_t n)
{
	*d++ = '"';
	if (n == 0)
		*d++ = '-';
	else
		d = put_esc(d, end - 1, s, n);
	*d++ = '"';
	return d;
}

/* The peer's address, without its port, once per connection. */
static const char *
peer(struct http_conn *h)
{
	struct cr_net_addr a;
	char t[CR_NET_ADDR_STRLEN], *c;

	if (h->peer[0] != '\0')
		return h->peer;
	if (cr_conn_peer(h->c, &a) != 0) {
		snprintf(h->peer, sizeof(h->peer), "-");
		return h->peer;
	}
	cr_net_addr_format(&a, t, sizeof(t));
	c = strrchr(t, ':');
	if (c != NULL)
		*c = '\0';
	if (t[0] == '[') { /* [::1] -> ::1, as nginx writes it */
		memmove(t, t + 1, strlen(t));
		t[strlen(t) - 1] = '\0';
	}
	snprintf(h->peer, sizeof(h->peer), "%s", t);
	return h->peer;
}

static char *
slot_of(struct http_lcore *hl, const struct http_conn *h)
{
	return hl->acc_mem + (size_t)cr_conn_index(h->c) * HTTP_ACC_SLOT;
}

/*
 * Format "ADDR - - [TIME] "LINE" " and " "REFERER" "AGENT"\n" into the connection's
 * slot: the part before the status and the part after the body bytes. @p head NULL: a
 * head that could not be parsed, logged as "-".
 */
static void
begin(struct http_lcore *hl, struct http_conn *h, const char *head, size_t head_len)
{
	char *s = slot_of(hl, h), *d = s, *end = s + HTTP_ACC_SLOT - 64;
	const char *dt = hl->date, *ref = NULL, *ua = NULL, *eol;
	size_t line = 0, nref = 0, nua = 0;

	if (head != NULL) {
		eol = memchr(head, '\n', head_len);
		line = eol != NULL ? (size_t)(eol - head) : head_len;
		if (line > 0 && head[line - 1] == '\r')
			line--;
		nref = http_header_value(head, head_len, "referer", &ref);
		nua = http_header_value(head, head_len, "user-agent", &ua);
	}
	/* "Wed, 02 Dec 2026 03:41:06 GMT" -> "02/Dec/2026:03:41:06 +0000" */
	d += snprintf(d, (size_t)(end - d), "%s - - [%.2s/%.3s/%.4s:%.8s +0000] ", peer(h),
		      dt + 5, dt + 8, dt + 12, dt + 17);
	/* The request line keeps half the room, the referer and agent a quarter each. */
	d = put_field(d, d + (end - d) / 2, head, line);
	*d++ = ' ';
	h->acc_pre = (uint16_t)(d - s);
	*d++ = ' ';
	d = put_field(d, d + (end - d) / 2, ref, nref);
	*d++ = ' ';
	d = put_field(d, end, ua, nua);
	*d++ = '\n';
	h->acc_len = (uint16_t)(d - s);
}

void
http_access_begin(struct http_conn *h, const char *head, size_t head_len, bool head_only)
{
	struct http_lcore *hl = http_lcore_cur();

	if (access_id <= 0)
		return;
	begin(hl, h, head, head_len);
	h->acc_head_only = head_only;
}

void
http_access_end(struct http_conn *h, int status, uint64_t body_bytes)
{
	struct http_lcore *hl = http_lcore_cur();
	char line[HTTP_ACC_SLOT + 48];
	const char *s;
	int n;

	if (access_id <= 0)
		return;
	if (h->acc_len == 0) {
		begin(hl, h, NULL, 0); /* a response to no parsed head (400, 408, 503) */
		h->acc_head_only = false;
	}
	if (h->acc_head_only)
		body_bytes = 0;
	s = slot_of(hl, h);
	memcpy(line, s, h->acc_pre);
	n = snprintf(line + h->acc_pre, sizeof(line) - h->acc_pre, "%d %llu", status,
		     (unsigned long long)body_bytes);
	memcpy(line + h->acc_pre + n, s + h->acc_pre, (size_t)(h->acc_len - h->acc_pre));
	(void)cr_log_file_put(access_id, line, (size_t)h->acc_len + (size_t)n);
	h->acc_len = 0;
}
