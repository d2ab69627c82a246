/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Prometheus: the text exposition format (0.0.4) of every counter, the HTTP/1.0 answer
 * that carries it, and the --metrics HOST:PORT option.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
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

void
cr__prom_label(struct cr__tbuf *t, const char *s)
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
void
cr__prom_header(struct cr__tbuf *t, const char *name, const char *type, const char *help)
{
	cr__tbuf_printf(t, "# HELP %s ", name);
	for (; help != NULL && *help != '\0'; help++) {
		if (*help == '\\')
			cr__tbuf_put(t, "\\\\", 2);
		else if (*help == '\n')
			cr__tbuf_put(t, "\\n", 2);
		else
			cr__tbuf_put(t, help, 1);
	}
	cr__tbuf_printf(t, "\n# TYPE %s %s\n", name, type);
}

void
cr__prom_value(struct cr__tbuf *t, double v)
{
	if (isnan(v))
		cr__tbuf_printf(t, "NaN");
	else if (isinf(v))
		cr__tbuf_printf(t, v > 0 ? "+Inf" : "-Inf");
	else if (v == (double)(long long)v && v < 9e15 && v > -9e15)
		cr__tbuf_printf(t, "%lld", (long long)v);
	else
		cr__tbuf_printf(t, "%.9f", v);
}

static const char *
type_name(enum cr_telemetry_kind kind)
{
	return kind == CR_TELEMETRY_COUNTER ? "counter" : "gauge";
}

/* "coreact_<family>[_total]" into @p buf. */
static const char *
family_name(char *buf, size_t len, const char *family, enum cr_telemetry_kind kind)
{
	snprintf(buf, len, "coreact_%s%s", family, kind == CR_TELEMETRY_COUNTER ? "_total" : "");
	return buf;
}

static void
sample(struct cr__tbuf *t, const char *name, unsigned lcore, const char *label,
       const char *value, uint64_t v, double scale)
{
	cr__tbuf_printf(t, "%s{lcore=\"%u\"", name, lcore);
	if (label != NULL && label[0] != '\0') {
		cr__tbuf_printf(t, ",%s=\"", label);
		cr__prom_label(t, value);
		cr__tbuf_put(t, "\"", 1);
	}
	if (scale == 1)
		cr__tbuf_printf(t, "} %llu\n", (unsigned long long)v);
	else
		cr__tbuf_printf(t, "} %.9f\n", (double)v * scale);
}

static void
render_info(struct cr__tbuf *t)
{
	const char *drv = cr_reactor_driver();

	cr__prom_header(t, "coreact_info", "gauge", "The app, its version and io driver.");
	cr__tbuf_printf(t, "coreact_info{app=\"");
	cr__prom_label(t, cr__tel_info.app);
	cr__tbuf_printf(t, "\",version=\"");
	cr__prom_label(t, CR_VERSION);
	cr__tbuf_printf(t, "\",io_driver=\"");
	cr__prom_label(t, drv != NULL ? drv : "");
	cr__tbuf_printf(t, "\"} 1\n");
}

/* One sample per lcore and state, 1 for the state the lcore is in: a state is then a
 * series a dashboard can sum (sum(coreact_lcore_state{state="RUNNING"})). */
static void
render_states(struct cr__tbuf *t, const struct cr__tel_snap *s, unsigned n)
{
	static const enum cr_lcore_state states[] = {CR_LCORE_OFFLINE, CR_LCORE_STARTING,
						     CR_LCORE_RUNNING, CR_LCORE_RETIRING};
	unsigned i, k;

	cr__prom_header(t, "coreact_lcore_state", "gauge",
			"1 for the state the lcore is in (OFFLINE, STARTING, RUNNING, RETIRING), "
			"0 for the others.");
	for (i = 0; i < n; i++)
		for (k = 0; k < sizeof(states) / sizeof(states[0]); k++)
			cr__tbuf_printf(t, "coreact_lcore_state{lcore=\"%u\",state=\"%s\"} %d\n",
					s[i].lcore, cr__tel_state_name(states[k]),
					s[i].state == states[k]);
}

static void
render_lcores(struct cr__tbuf *t, const struct cr__tel_snap *s, unsigned n)
{
	char name[CR__TEL_FAMILY_LEN + 16];
	unsigned i, k;

	render_states(t, s, n);
	for (k = 0; k < cr__tel_n_fields; k++) {
		const struct cr__tel_field *f = &cr__tel_fields[k];

		snprintf(name, sizeof(name), "%s%s", f->prom,
			 f->kind == CR_TELEMETRY_COUNTER ? "_total" : "");
		cr__prom_header(t, name, type_name(f->kind), f->help);
		for (i = 0; i < n; i++)
			sample(t, name, s[i].lcore, NULL, NULL, cr__tel_field_value(&s[i].st, f),
			       f->scale);
	}
}

/* Entry @p k of readers (@p app false) or app counters. */
static const struct cr__tel_entry *
entry(unsigned k, bool app)
{
	return app ? cr__tel_counter(k) : cr__tel_reader(k);
}

/* Has an entry before @p k (readers first, then counters) the family of @p e? */
static bool
family_seen(const struct cr__tel_entry *e, unsigned k, bool app, unsigned nr)
{
	unsigned j;

	for (j = 0; j < (app ? nr : k); j++)
		if (strcmp(cr__tel_reader(j)->family, e->family) == 0)
			return true;
	for (j = 0; app && j < k; j++)
		if (strcmp(cr__tel_counter(j)->family, e->family) == 0)
			return true;
	return false;
}

/* The samples of every entry of @p table (from @p k on) in the family of @p e. */
static void
family_samples(struct cr__tbuf *t, const char *name, const struct cr__tel_entry *e, unsigned k,
	       bool app, unsigned m, const struct cr__tel_snap *s, unsigned n)
{
	for (unsigned j = k; j < m; j++) {
		const struct cr__tel_entry *o = entry(j, app);

		if (strcmp(o->family, e->family) != 0)
			continue;
		for (unsigned i = 0; i < n; i++)
			if (app || s[i].reader_ok[j])
				sample(t, name, s[i].lcore, o->label, o->label_value,
				       app ? s[i].app[j] : s[i].reader[j], 1);
	}
}

/* Readers, then app counters, one family at a time (entries of a family may be anywhere
 * in the tables: each family is written where its first entry is). */
static void
render_entries(struct cr__tbuf *t, const struct cr__tel_snap *s, unsigned n, unsigned nr,
	       unsigned nc)
{
	char name[CR__TEL_FAMILY_LEN + 16];

	for (int pass = 0; pass < 2; pass++) {
		bool app = pass == 1;
		unsigned m = app ? nc : nr;

		for (unsigned k = 0; k < m; k++) {
			const struct cr__tel_entry *e = entry(k, app);

			if (family_seen(e, k, app, nr))
				continue;
			family_name(name, sizeof(name), e->family, e->kind);
			cr__prom_header(t, name, type_name(e->kind),
					e->help[0] != '\0' ? e->help : e->name);
			family_samples(t, name, e, k, app, m, s, n);
			/* A family of readers may go on among the counters. */
			if (!app)
				family_samples(t, name, e, 0, true, nc, s, n);
		}
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
	render_entries(t, s, n, nr, nc);
	free(s);
	cr__prom_render_hists(t);
	cr__prom_render_collectors(t);
	cr__prom_render_process(t);
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
