/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Prometheus: the text exposition format (0.0.4) of every counter, the HTTP/1.0 answer
 * that carries it, and the --metrics HOST:PORT option.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "telemetry_internal.h"

/* ---- text buffer ---- */

void
cr__tbuf_init(struct cr__tbuf *t, char *buf, size_t cap)
{
	t->buf = buf;
	t->cap = cap;
	t->len = 0;
	t->overflow = cap == 0;
	if (cap != 0)
		buf[0] = '\0';
}

void
cr__tbuf_put(struct cr__tbuf *t, const char *s, size_t n)
{
	if (t->overflow)
		return;
	if (n >= t->cap - t->len) {
		t->overflow = true;
		return;
	}
	memcpy(t->buf + t->len, s, n);
	t->len += n;
	t->buf[t->len] = '\0';
}

void
cr__tbuf_printf(struct cr__tbuf *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (t->overflow)
		return;
	va_start(ap, fmt);
	n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= t->cap - t->len) {
		t->overflow = true;
		t->buf[t->len] = '\0';
		return;
	}
	t->len += (size_t)n;
}

/* ---- exposition format ---- */

/* A label value: backslash, double quote and newline escaped, as the format asks. */
static void
put_label(struct cr__tbuf *t, const char *s)
{
	for (; s != NULL && *s != '\0'; s++) {
		if (*s == '\\')
			cr__tbuf_put(t, "\\\\", 2);
		else if (*s == '"')
			cr__tbuf_put(t, "\\\"", 2);
		else if (*s == '\n')
			cr__tbuf_put(t, "\\n", 2);
		else
			cr__tbuf_put(t, s, 1);
	}
}

/* HELP text: backslash and newline escaped. */
static void
header(struct cr__tbuf *t, const char *name, enum cr_telemetry_kind kind, const char *help)
{
	const char *sfx = kind == CR_TELEMETRY_COUNTER ? "_total" : "";

	cr__tbuf_printf(t, "# HELP %s%s ", name, sfx);
	for (; help != NULL && *help != '\0'; help++) {
		if (*help == '\\')
			cr__tbuf_put(t, "\\\\", 2);
		else if (*help == '\n')
			cr__tbuf_put(t, "\\n", 2);
		else
			cr__tbuf_put(t, help, 1);
	}
	cr__tbuf_printf(t, "\n# TYPE %s%s %s\n", name, sfx,
			kind == CR_TELEMETRY_COUNTER ? "counter" : "gauge");
}

static void
sample(struct cr__tbuf *t, const char *name, enum cr_telemetry_kind kind, unsigned lcore,
       uint64_t v, double scale)
{
	const char *sfx = kind == CR_TELEMETRY_COUNTER ? "_total" : "";

	if (scale == 1)
		cr__tbuf_printf(t, "%s%s{lcore=\"%u\"} %llu\n", name, sfx, lcore,
				(unsigned long long)v);
	else
		cr__tbuf_printf(t, "%s%s{lcore=\"%u\"} %.9f\n", name, sfx, lcore,
				(double)v * scale);
}

static void
render_info(struct cr__tbuf *t)
{
	const char *drv = cr_reactor_driver();

	cr__tbuf_printf(t, "# HELP coreact_info The app, its version and io driver.\n"
			   "# TYPE coreact_info gauge\ncoreact_info{app=\"");
	put_label(t, cr__tel_info.app);
	cr__tbuf_printf(t, "\",version=\"");
	put_label(t, CR_VERSION);
	cr__tbuf_printf(t, "\",io_driver=\"");
	put_label(t, drv != NULL ? drv : "");
	cr__tbuf_printf(t, "\"} 1\n");
}

static void
render_lcores(struct cr__tbuf *t, const struct cr__tel_snap *s, unsigned n)
{
	unsigned i, k;

	cr__tbuf_printf(t, "# HELP coreact_lcore_state Lcore state: 0 OFFLINE, 1 STARTING, "
			   "2 RUNNING, 3 RETIRING.\n# TYPE coreact_lcore_state gauge\n");
	for (i = 0; i < n; i++)
		cr__tbuf_printf(t, "coreact_lcore_state{lcore=\"%u\",state=\"%s\"} %d\n",
				s[i].lcore, cr__tel_state_name(s[i].state), (int)s[i].state);
	for (k = 0; k < cr__tel_n_fields; k++) {
		const struct cr__tel_field *f = &cr__tel_fields[k];

		header(t, f->prom, f->kind, f->help);
		for (i = 0; i < n; i++)
			sample(t, f->prom, f->kind, s[i].lcore, cr__tel_field_value(&s[i].st, f),
			       f->scale);
	}
}

/* Readers (@p app false) or app counters (@p app true); @p m entries were snapshotted. */
static void
render_entries(struct cr__tbuf *t, const struct cr__tel_snap *s, unsigned n, unsigned m, bool app)
{
	char name[CR_TELEMETRY_NAME_LEN + 32];
	unsigned i, k;

	for (k = 0; k < m; k++) {
		const struct cr__tel_entry *e = app ? cr__tel_counter(k) : cr__tel_reader(k);

		snprintf(name, sizeof(name), "coreact_%s_%s", app ? "app" : "lcore", e->name);
		header(t, name, e->kind, e->help[0] != '\0' ? e->help : e->name);
		for (i = 0; i < n; i++)
			if (app || s[i].reader_ok[k])
				sample(t, name, e->kind, s[i].lcore,
				       app ? s[i].app[k] : s[i].reader[k], 1);
	}
}

void
cr__prom_render(struct cr__tbuf *t)
{
	struct cr__tel_snap *s;
	unsigned id, n = 0, nr, nc, i;

	for (id = cr__tel_lcore_next(CR_LCORE_NONE); id != CR_LCORE_NONE;
	     id = cr__tel_lcore_next(id))
		n++;
	s = calloc(n != 0 ? n : 1, sizeof(*s));
	if (s == NULL) {
		t->overflow = true;
		return;
	}
	/* Every lcore sees the same registrations, so each metric has one sample per lcore. */
	nr = cr__tel_n_readers();
	nc = cr__tel_n_counters();
	i = 0;
	for (id = cr__tel_lcore_next(CR_LCORE_NONE); id != CR_LCORE_NONE && i < n;
	     id = cr__tel_lcore_next(id))
		if (cr__tel_snapshot(id, &s[i]) == 0)
			i++;
	n = i;
	render_info(t);
	render_lcores(t, s, n);
	render_entries(t, s, n, nr, false);
	render_entries(t, s, n, nc, true);
	free(s);
}

/* ---- HTTP ---- */

static void
respond(struct cr__tbuf *t, int code, const char *reason, const char *extra, const char *body,
	size_t len, bool head)
{
	cr__tbuf_printf(
	    t,
	    "HTTP/1.0 %d %s\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
	    "Content-Length: %zu\r\n%sConnection: close\r\n\r\n",
	    code, reason, len, extra);
	if (!head)
		cr__tbuf_put(t, body, len);
}

static int
respond_text(struct cr__tbuf *t, int code, const char *reason, const char *extra, const char *body,
	     bool head)
{
	respond(t, code, reason, extra, body, strlen(body), head);
	return code;
}

/* The body is rendered first, at the start of @p t, and then moved up behind the header
 * once its length is known. */
static int
respond_metrics(struct cr__tbuf *t, bool head)
{
	char hdr[256];
	size_t body_len;
	int n;

	cr__prom_render(t);
	if (t->overflow) {
		cr__tbuf_init(t, t->buf, t->cap);
		return respond_text(t, 500, "Internal Server Error", "",
				    "metrics do not fit the reply buffer\n", head);
	}
	body_len = t->len;
	n = snprintf(hdr, sizeof(hdr),
		     "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
		     "Content-Length: %zu\r\nConnection: close\r\n\r\n",
		     body_len);
	if (head)
		body_len = 0;
	if ((size_t)n + body_len >= t->cap) {
		cr__tbuf_init(t, t->buf, t->cap);
		return respond_text(t, 500, "Internal Server Error", "",
				    "metrics do not fit the reply buffer\n", head);
	}
	memmove(t->buf + n, t->buf, body_len);
	memcpy(t->buf, hdr, (size_t)n);
	t->len = (size_t)n + body_len;
	t->buf[t->len] = '\0';
	return 200;
}

int
cr__http_respond(const char *req, size_t n, struct cr__tbuf *t)
{
	char line[256], method[16], path[200], version[16];
	const char *eol = memchr(req, '\n', n);
	size_t len = eol != NULL ? (size_t)(eol - req) : n;
	char *q, extra;
	bool head;

	if (len > 0 && req[len - 1] == '\r')
		len--;
	if (len >= sizeof(line))
		return respond_text(t, 414, "URI Too Long", "", "request line too long\n", false);
	memcpy(line, req, len);
	line[len] = '\0';
	if (sscanf(line, "%15s %199s %15s %c", method, path, version, &extra) != 3 ||
	    strncmp(version, "HTTP/", 5) != 0)
		return respond_text(t, 400, "Bad Request", "", "bad request line\n", false);
	head = strcmp(method, "HEAD") == 0;
	if (!head && strcmp(method, "GET") != 0)
		return respond_text(t, 405, "Method Not Allowed", "Allow: GET, HEAD\r\n",
				    "only GET and HEAD\n", false);
	q = strchr(path, '?');
	if (q != NULL)
		*q = '\0';
	if (strcmp(path, "/metrics") == 0)
		return respond_metrics(t, head);
	if (strcmp(path, "/") == 0)
		return respond_text(t, 200, "OK", "", "coreact: metrics at /metrics\n", head);
	return respond_text(t, 404, "Not Found", "", "not found; metrics at /metrics\n", head);
}

/* ---- --metrics HOST:PORT ---- */

static pthread_mutex_t cfg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sockaddr_storage metrics_ss;
static socklen_t metrics_len;

int
cr__metrics_parse(const char *val, struct sockaddr_storage *ss, socklen_t *sslen, char *why,
		  size_t whylen)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
	char host[256];
	unsigned long long port;
	const char *colon;
	size_t hlen;
	int rc;

	if (val == NULL || (colon = strrchr(val, ':')) == NULL) {
		snprintf(why, whylen, "no ':PORT'");
		return -EINVAL;
	}
	hlen = (size_t)(colon - val);
	if (hlen >= 2 && val[0] == '[' && val[hlen - 1] == ']') {
		val++;
		hlen -= 2;
		hints.ai_flags = AI_NUMERICHOST;
		hints.ai_family = AF_INET6;
	} else if (memchr(val, ':', hlen) != NULL) {
		snprintf(why, whylen, "an IPv6 address goes in brackets, e.g. [::1]:9100");
		return -EINVAL;
	}
	if (hlen == 0 || hlen >= sizeof(host)) {
		snprintf(why, whylen, hlen == 0 ? "empty host" : "host name too long");
		return -EINVAL;
	}
	if (cr_parse_uint(colon + 1, 0, 65535, &port) != 0) {
		snprintf(why, whylen, "'%s' is not a port 0-65535", colon + 1);
		return -EINVAL;
	}
	memcpy(host, val, hlen);
	host[hlen] = '\0';
	rc = getaddrinfo(host, NULL, &hints, &res);
	if (rc != 0 || res == NULL || res->ai_addrlen > sizeof(*ss)) {
		snprintf(why, whylen, "cannot resolve '%s': %s", host,
			 rc != 0 ? gai_strerror(rc) : "no address");
		if (res != NULL)
			freeaddrinfo(res);
		return -EINVAL;
	}
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*sslen = res->ai_addrlen;
	freeaddrinfo(res);
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
	else if (ss->ss_family == AF_INET6)
		((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
	else {
		snprintf(why, whylen, "'%s' is not an IP host", host);
		return -EINVAL;
	}
	return 0;
}

int
cr_telemetry_set_metrics(const char *val, void *ctx)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char why[300];

	(void)ctx;
	if (cr__metrics_parse(val, &ss, &len, why, sizeof(why)) != 0)
		return -EINVAL;
	pthread_mutex_lock(&cfg_lock);
	metrics_ss = ss;
	metrics_len = len;
	pthread_mutex_unlock(&cfg_lock);
	return 0;
}

bool
cr__metrics_config(struct sockaddr_storage *ss, socklen_t *len)
{
	bool set;

	pthread_mutex_lock(&cfg_lock);
	set = metrics_len != 0;
	*ss = metrics_ss;
	*len = metrics_len;
	pthread_mutex_unlock(&cfg_lock);
	return set;
}

void
cr__metrics_clear(void)
{
	pthread_mutex_lock(&cfg_lock);
	metrics_len = 0;
	pthread_mutex_unlock(&cfg_lock);
}
