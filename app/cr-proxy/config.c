/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Settings: defaults, the option table (lib/app reads it from the command line and from
 * --config, whose keys are the long options: listen, backend, balance, connect-timeout,
 * retries, check-interval, check-timeout, rise, fall, client-timeout, server-timeout,
 * maxconn, buffers, session-log, splice-threshold), and what SIGHUP reloads (the
 * backends). See doc/guides/proxy.md.
 *
 * A backend is `--backend HOST:PORT[,weight=N]` on the command line and
 * `backend HOST:PORT [weight N]` in a file; the file's backends and the command line's are
 * kept apart, because a reload replaces the first and keeps the second.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cr_app.h"
#include "cr_eal.h"
#include "passthrough.h"
#include "proxy.h"

struct px_conf px_conf;

/* --backend values, kept apart: a reload takes FILE's backends plus these. */
static struct px_backend_conf cli_backends[PX_MAX_BACKENDS];
static unsigned n_cli_backends;

void
px_conf_defaults(struct px_conf *c)
{
	memset(c, 0, sizeof(*c));
	c->balance = PX_ROUNDROBIN;
	c->connect_timeout = 2.0;
	c->retries = 3;
	c->check_interval = 2.0;
	c->rise = 2;
	c->fall = 3;
	c->client_timeout = 60.0;
	c->server_timeout = 60.0;
	c->maxconn = 4096;
	c->chunks = 0; /* auto: from --maxconn */
	c->splice_threshold = PX_SPLICE_DEFAULT;
}

int
px_balance_parse(const char *v, enum px_balance *out)
{
	if (strcmp(v, "roundrobin") == 0)
		*out = PX_ROUNDROBIN;
	else if (strcmp(v, "leastconn") == 0)
		*out = PX_LEASTCONN;
	else if (strcmp(v, "source") == 0)
		*out = PX_SOURCE;
	else
		return -EINVAL;
	return 0;
}

const char *
px_balance_name(enum px_balance b)
{
	static const char *const names[] = {
	    [PX_ROUNDROBIN] = "roundrobin",
	    [PX_LEASTCONN] = "leastconn",
	    [PX_SOURCE] = "source",
	};

	return names[b];
}

/* The weight part, "weight=N" (command line) or "weight N" (file): names itself if bad. */
static int
parse_weight(const char *part, const char *num, unsigned *out)
{
	unsigned long long w;

	if (cr_parse_uint(num, 0, PX_WEIGHT_MAX, &w) != 0) {
		cr_opt_bad_part(part, "0-256");
		return -EINVAL;
	}
	*out = (unsigned)w;
	return 0;
}

/* The host part of "HOST:PORT" or "[HOST]:PORT", for --backend-tls's default name. */
static void
host_of(const char *hp, char *out, size_t len)
{
	const char *colon = strrchr(hp, ':');
	size_t n = colon != NULL ? (size_t)(colon - hp) : strlen(hp);

	if (n >= 2 && hp[0] == '[' && hp[n - 1] == ']') {
		hp++;
		n -= 2;
	}
	if (n >= len)
		n = 0;
	memcpy(out, hp, n);
	out[n] = '\0';
}

/* One part after the address: "weight N" / "sni NAME" (file), "weight=N" / "sni=NAME". */
static int
backend_part(const char *part, const char *val, struct px_backend_conf *out)
{
	size_t k = (size_t)(val - part) - 1;

	if (k == 6 && strncmp(part, "weight", 6) == 0)
		return parse_weight(part, val, &out->weight);
	if (k == 3 && strncmp(part, "sni", 3) == 0) {
		if (!px_tls_name_ok(val) || strlen(val) >= sizeof(out->sni)) {
			cr_opt_bad_part(part, "a host name or an IP address");
			return -EINVAL;
		}
		strcpy(out->sni, val);
		return 0;
	}
	return -EINVAL;
}

int
px_backend_parse(const char *v, struct px_backend_conf *out)
{
	char buf[256], *p, *next;
	bool file;

	if (strlen(v) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, v);
	memset(out, 0, sizeof(*out));
	out->weight = 1;
	/* The file's form has spaces ("HOST:PORT weight N sni NAME"); the command line's
	 * commas ("HOST:PORT,weight=N,sni=NAME"). An address has neither. */
	file = strpbrk(buf, " \t") != NULL;
	p = strpbrk(buf, file ? " \t" : ",");
	if (p != NULL)
		*p++ = '\0';
	while (p != NULL && *p != '\0') {
		char *val;

		if (file) {
			/* KEY VALUE: the pair, as one part for the error line. */
			val = strpbrk(p, " \t");
			if (val == NULL)
				return -EINVAL;
			next = strpbrk(val + 1, " \t");
		} else {
			next = strchr(p, ',');
			val = strchr(p, '=');
			if (val == NULL || (next != NULL && val > next))
				return -EINVAL;
		}
		if (next != NULL)
			*next++ = '\0';
		if (backend_part(p, val + 1, out) != 0)
			return -EINVAL;
		p = next;
	}
	if (cr_net_addr_parse(buf, &out->addr) != 0 || cr_net_addr_port(&out->addr) == 0)
		return -EINVAL;
	host_of(buf, out->host, sizeof(out->host));
	return 0;
}

/* ---- the options ---- */

static int
set_backend(const char *v, void *ctx)
{
	struct px_backend_conf b;

	(void)ctx;
	if (px_backend_parse(v, &b) != 0)
		return -EINVAL;
	if (cr_app_opt_where() != NULL) {
		if (px_conf.n_backends == PX_MAX_BACKENDS)
			return -EINVAL;
		px_conf.backends[px_conf.n_backends++] = b;
	} else {
		if (n_cli_backends == PX_MAX_BACKENDS)
			return -EINVAL;
		cli_backends[n_cli_backends++] = b;
	}
	return 0;
}

static int
set_balance(const char *v, void *ctx)
{
	(void)ctx;
	return px_balance_parse(v, &px_conf.balance);
}

static int
set_secs(const char *v, void *ctx)
{
	double d;

	if (cr_parse_seconds(v, &d) != 0 || d > 1e6)
		return -EINVAL;
	*(double *)ctx = d;
	return 0;
}

static int
set_count(const char *v, void *ctx)
{
	unsigned long long u;
	unsigned *p = ctx;

	if (cr_parse_uint(v, p == &px_conf.retries ? 0 : 1, 100, &u) != 0)
		return -EINVAL;
	*p = (unsigned)u;
	return 0;
}

static int
set_maxconn(const char *v, void *ctx)
{
	return cr_parse_uint(v, 1, PX_MAXCONN_MAX, ctx);
}

static int
set_buffers(const char *v, void *ctx)
{
	if (strcmp(v, "auto") == 0) {
		*(unsigned long long *)ctx = 0;
		return 0;
	}
	return cr_parse_uint(v, PX_BUFFERS_MIN, PX_BUFFERS_MAX, ctx);
}

static int
set_splice_threshold(const char *v, void *ctx)
{
	if (strcmp(v, "off") == 0) {
		*(unsigned long long *)ctx = 0;
		return 0;
	}
	return cr_parse_uint(v, PX_SPLICE_MIN, PX_SPLICE_MAX, ctx);
}

static int
set_session_log(const char *v, void *ctx)
{
	char *out = ctx;

	if (strcmp(v, "off") == 0) {
		out[0] = '\0';
		return 0;
	}
	if (v[0] == '\0' || strlen(v) >= sizeof(px_conf.session_log))
		return -EINVAL;
	strcpy(out, v);
	return 0;
}

const struct cr_opt px_options[PX_N_OPTIONS] = {
    CR_APP_OPT_LISTEN(&px_conf.listen, "address to accept clients on (required here or in "
				       "--config, unless --sni-listen alone), e.g. 127.0.0.1:8080"),
    {"backend", 0, "HOST:PORT[,weight=N][,sni=NAME]",
     "a backend (repeat for more; at least one here or in --config, where it is `backend "
     "HOST:PORT [weight N] [sni NAME]`; SIGHUP re-reads the file's); weight 0-256, default "
     "1; sni: its --backend-tls name",
     "HOST:PORT with a numeric host and a port 1-65535, optionally ,weight=0-256 and "
     ",sni=NAME",
     set_backend, NULL},
    {"balance", 0, "ALGO",
     "roundrobin (default, weighted), leastconn (fewest connections per weight) or "
     "source (hash of the client address)",
     "roundrobin, leastconn, source", set_balance, NULL},
    {"connect-timeout", 0, "SECONDS",
     "give up a backend connect (--backend-tls: TCP connect and handshake together) after "
     "this long, then try the next (default 2)",
     "seconds from 0 to 1000000 (0: the kernel's own)", set_secs, &px_conf.connect_timeout},
    {"retries", 0, "N",
     "further backends to try after a failed connect, each a different one (default 3)",
     "0-100", set_count, &px_conf.retries},
    {"check-interval", 0, "SECONDS",
     "TCP-connect (--backend-tls: handshake) to every backend this often (default 2; 0: "
     "no checks, and no marking down on failed connects)",
     "seconds from 0 to 1000000", set_secs, &px_conf.check_interval},
    {"check-timeout", 0, "SECONDS",
     "a check (--backend-tls: TCP connect and handshake together) fails after this long "
     "(default: the lower of --connect-timeout and --check-interval)",
     "seconds from 0 to 1000000", set_secs, &px_conf.check_timeout},
    {"rise", 0, "N", "checks in a row that bring a down backend up (default 2)", "1-100",
     set_count, &px_conf.rise},
    {"fall", 0, "N", "failed checks or connects in a row that mark a backend down (default 3)",
     "1-100", set_count, &px_conf.fall},
    {"client-timeout", 0, "SECONDS",
     "close a client connection idle this long (default 60; 0: never)",
     "seconds from 0 to 1000000", set_secs, &px_conf.client_timeout},
    {"server-timeout", 0, "SECONDS",
     "close a backend connection idle this long (default 60; 0: never)",
     "seconds from 0 to 1000000", set_secs, &px_conf.server_timeout},
    {"maxconn", 0, "N",
     "client sessions at once over all lcores; more wait unread (default 4096; each lcore "
     "reserves about 1.2 KiB per session)",
     "1-1048576", set_maxconn, &px_conf.maxconn},
    {"buffers", 0, "N|auto",
     "16 KiB output chunks per lcore for queued bytes (default auto: 4 per --maxconn "
     "session and 256 more, plus a third for lib/net's reserve, at most 1048576; taken "
     "from memory as they are used)",
     "auto or 350-4194304", set_buffers, &px_conf.chunks},
    {"session-log", 0, "PATH|off",
     "append one line per session to PATH when it ends: client, accept time, frontend, "
     "backend, wait/connect/total ms, bytes each way, why it ended (default off; "
     "reopened on SIGUSR1)",
     "a file path (shorter than 4096 bytes) or off", set_session_log, px_conf.session_log},
    {"splice-threshold", 0, "BYTES|off",
     "a direction of a plain (non-TLS) session that has moved this many bytes in large "
     "reads (2 KiB or more on average) switches from receive buffers to splice(2) through "
     "a pooled pipe (default 262144; off: never splice, and no pipe pool)",
     "off or 4096-1099511627776", set_splice_threshold, &px_conf.splice_threshold},
};
_Static_assert(sizeof(px_options) / sizeof(px_options[0]) == PX_N_OPTIONS, "PX_N_OPTIONS");

/* Append the command line's backends to @p c's. */
static int
merge_cli_backends(struct px_conf *c)
{
	unsigned i;

	for (i = 0; i < n_cli_backends; i++) {
		if (c->n_backends == PX_MAX_BACKENDS)
			return -ENOSPC;
		c->backends[c->n_backends++] = cli_backends[i];
	}
	return 0;
}

int
px_conf_finish(void)
{
	if (px_conf.listen.len == 0 && px_sni.listen.len != 0 && px_conf.n_backends == 0 &&
	    n_cli_backends == 0)
		return 0; /* SNI passthrough only */
	if (px_conf.listen.len == 0)
		return cr_app_errorf(-EINVAL, "--listen: missing; accepted: HOST:PORT, e.g. "
					      "127.0.0.1:8080 (or `listen` in --config, or "
					      "--sni-listen alone)");
	if (merge_cli_backends(&px_conf) != 0)
		return cr_app_errorf(-EINVAL, "--backend: more than %d backends; accepted: at "
					      "most %d, --config's and the command line's together",
				     PX_MAX_BACKENDS, PX_MAX_BACKENDS);
	if (px_conf.n_backends == 0)
		return cr_app_errorf(-EINVAL, "--backend: missing; accepted: HOST:PORT[,weight=N], "
					      "one or more (or `backend` lines in --config)");
	return 0;
}

/* ---- reload ---- */

/* The backends a reload reads, committed only once the whole file is good. */
static struct px_backend_conf reload_backends[PX_MAX_BACKENDS];
static unsigned n_reload_backends;
static bool reload_overflow;

static int
set_reload_backend(const char *v, void *ctx)
{
	struct px_backend_conf b;

	(void)ctx;
	if (px_backend_parse(v, &b) != 0)
		return -EINVAL;
	if (n_reload_backends == PX_MAX_BACKENDS)
		reload_overflow = true;
	else
		reload_backends[n_reload_backends++] = b;
	return 0;
}

static const struct cr_opt reload_options[] = {
    {"backend", 0, "HOST:PORT [weight N] [sni NAME]", "",
     "HOST:PORT with a numeric host and a port 1-65535, optionally `weight 0-256` and "
     "`sni NAME`",
     set_reload_backend, NULL},
};

int
px_conf_reload(unsigned *n_backends)
{
	struct px_conf c;
	unsigned i;
	int rc;

	n_reload_backends = 0;
	reload_overflow = false;
	rc = cr_app_config_reload(reload_options, 1);
	if (rc != 0)
		return rc;
	memset(&c, 0, sizeof(c));
	for (i = 0; i < n_reload_backends; i++)
		c.backends[c.n_backends++] = reload_backends[i];
	if (reload_overflow || merge_cli_backends(&c) != 0)
		return -ENOSPC;
	if (c.n_backends == 0)
		return -ENOENT;
	*n_backends = c.n_backends;
	return px_apply_all(c.backends, c.n_backends);
}

int
px_apply_all(struct px_backend_conf *plain, unsigned n)
{
	struct px_backend_conf all[2 * PX_MAX_BACKENDS];
	unsigned i, m;
	int rc;

	for (i = 0; i < n; i++) {
		if (plain[i].sni[0] != '\0' && !px_btls.on)
			return -EINVAL; /* a reload's line: px_backend_tls_check() at start */
		plain[i].tls = px_btls.on;
		all[i] = plain[i];
	}
	m = n + px_sni_backends(all + n, PX_MAX_BACKENDS);
	rc = px_backends_apply(all, m);
	if (rc == 0)
		px_sni_groups_update(plain, n);
	return rc;
}
