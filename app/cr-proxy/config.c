/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Settings: defaults, --backend values and the --config line format (doc/guides/proxy.md).
 *
 * A config file holds one setting per line, `KEY VALUE...`, with the keys named after the
 * long options: listen, backend (repeatable, `backend HOST:PORT [weight N]`), balance,
 * connect-timeout, retries, check-interval, check-timeout, rise, fall, client-timeout,
 * server-timeout, maxconn, buffers. '#' starts a comment; blank lines are skipped.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cr_eal.h"
#include "proxy.h"

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
	c->chunks = 2048;
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

static int
parse_weight(const char *v, unsigned *out)
{
	unsigned long long w;

	if (cr_parse_uint(v, 0, PX_WEIGHT_MAX, &w) != 0)
		return -EINVAL;
	*out = (unsigned)w;
	return 0;
}

int
px_backend_parse(const char *v, struct px_backend_conf *out)
{
	char buf[256];
	char *comma;

	if (strlen(v) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, v);
	out->weight = 1;
	comma = strrchr(buf, ',');
	if (comma != NULL) {
		*comma = '\0';
		if (strncmp(comma + 1, "weight=", 7) != 0 ||
		    parse_weight(comma + 8, &out->weight) != 0)
			return -EINVAL;
	}
	if (cr_net_addr_parse(buf, &out->addr) != 0 || cr_net_addr_port(&out->addr) == 0)
		return -EINVAL;
	return 0;
}

/* One key and its words; prints the error itself. */
static int
conf_line(struct px_conf *c, char **w, unsigned n, const char *file, unsigned line)
{
	const char *k = w[0];
	unsigned long long u;
	double *secs = NULL;
	unsigned *count = NULL;
	struct px_backend_conf b;

	if (strcmp(k, "backend") == 0) {
		if (n != 2 && !(n == 4 && strcmp(w[2], "weight") == 0))
			goto usage;
		if (c->n_backends == PX_MAX_BACKENDS) {
			fprintf(stderr, "cr-proxy: %s:%u: more than %d backends\n", file, line,
				PX_MAX_BACKENDS);
			return -EINVAL;
		}
		if (cr_net_addr_parse(w[1], &b.addr) != 0 || cr_net_addr_port(&b.addr) == 0) {
			fprintf(stderr,
				"cr-proxy: %s:%u: backend %s: not a HOST:PORT with a "
				"numeric host and a port 1-65535\n",
				file, line, w[1]);
			return -EINVAL;
		}
		b.weight = 1;
		if (n == 4 && parse_weight(w[3], &b.weight) != 0) {
			fprintf(stderr, "cr-proxy: %s:%u: weight %s: accepted: 0-%d\n", file, line,
				w[3], PX_WEIGHT_MAX);
			return -EINVAL;
		}
		c->backends[c->n_backends++] = b;
		return 0;
	}
	if (n != 2)
		goto usage;
	if (strcmp(k, "listen") == 0) {
		if (cr_net_addr_parse(w[1], &c->listen) != 0) {
			fprintf(stderr,
				"cr-proxy: %s:%u: listen %s: not a HOST:PORT with a numeric "
				"host\n",
				file, line, w[1]);
			return -EINVAL;
		}
		c->have_listen = true;
		return 0;
	}
	if (strcmp(k, "balance") == 0) {
		if (px_balance_parse(w[1], &c->balance) != 0) {
			fprintf(stderr,
				"cr-proxy: %s:%u: balance %s: accepted: roundrobin, "
				"leastconn, source\n",
				file, line, w[1]);
			return -EINVAL;
		}
		return 0;
	}
	if (strcmp(k, "connect-timeout") == 0)
		secs = &c->connect_timeout;
	else if (strcmp(k, "check-interval") == 0)
		secs = &c->check_interval;
	else if (strcmp(k, "check-timeout") == 0)
		secs = &c->check_timeout;
	else if (strcmp(k, "client-timeout") == 0)
		secs = &c->client_timeout;
	else if (strcmp(k, "server-timeout") == 0)
		secs = &c->server_timeout;
	if (secs != NULL) {
		double d;

		if (cr_parse_seconds(w[1], &d) != 0 || d > 1e6) {
			fprintf(stderr,
				"cr-proxy: %s:%u: %s %s: accepted: seconds from 0 to "
				"1000000, e.g. 0.5\n",
				file, line, k, w[1]);
			return -EINVAL;
		}
		*secs = d;
		return 0;
	}
	if (strcmp(k, "retries") == 0)
		count = &c->retries;
	else if (strcmp(k, "rise") == 0)
		count = &c->rise;
	else if (strcmp(k, "fall") == 0)
		count = &c->fall;
	if (count != NULL) {
		unsigned long long lo = count == &c->retries ? 0 : 1;

		if (cr_parse_uint(w[1], lo, 100, &u) != 0) {
			fprintf(stderr, "cr-proxy: %s:%u: %s %s: accepted: %llu-100\n", file, line,
				k, w[1], lo);
			return -EINVAL;
		}
		*count = (unsigned)u;
		return 0;
	}
	if (strcmp(k, "maxconn") == 0 || strcmp(k, "buffers") == 0) {
		unsigned long long hi = k[0] == 'm' ? PX_MAXCONN_MAX : PX_BUFFERS_MAX;

		if (cr_parse_uint(w[1], 1, hi, &u) != 0) {
			fprintf(stderr, "cr-proxy: %s:%u: %s %s: accepted: 1-%llu\n", file, line, k,
				w[1], hi);
			return -EINVAL;
		}
		*(k[0] == 'm' ? &c->maxconn : &c->chunks) = u;
		return 0;
	}
	fprintf(stderr,
		"cr-proxy: %s:%u: %s: unknown key; accepted: listen, backend, balance, "
		"connect-timeout, retries, check-interval, check-timeout, rise, fall, "
		"client-timeout, server-timeout, maxconn, buffers\n",
		file, line, k);
	return -EINVAL;
usage:
	if (strcmp(k, "backend") == 0)
		fprintf(stderr,
			"cr-proxy: %s:%u: backend: wrong values; accepted: `backend "
			"HOST:PORT` or `backend HOST:PORT weight N`\n",
			file, line);
	else
		fprintf(stderr,
			"cr-proxy: %s:%u: %s: wrong number of values; accepted: `%s "
			"VALUE`\n",
			file, line, k, k);
	return -EINVAL;
}

int
px_conf_load(const char *path, struct px_conf *c)
{
	char line[1024];
	char *w[8];
	unsigned n, lineno = 0;
	FILE *f = fopen(path, "r");
	struct stat st;
	int rc = 0;

	if (f == NULL) {
		rc = -errno;
		fprintf(stderr, "cr-proxy: --config %s: %s\n", path, cr_strerror(rc));
		return rc;
	}
	/* fopen() opens a directory for reading; only the first read fails, with EISDIR. */
	if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
		fclose(f);
		fprintf(stderr, "cr-proxy: --config %s: %s\n", path, cr_strerror(-EISDIR));
		return -EISDIR;
	}
	while (rc == 0 && fgets(line, sizeof(line), f) != NULL) {
		char *p, *save = NULL;

		lineno++;
		if (strchr(line, '\n') == NULL && !feof(f)) {
			fprintf(stderr, "cr-proxy: %s:%u: line longer than %zu bytes\n", path,
				lineno, sizeof(line) - 2);
			rc = -EINVAL;
			break;
		}
		p = strchr(line, '#');
		if (p != NULL)
			*p = '\0';
		n = 0;
		for (p = strtok_r(line, " \t\r\n", &save); p != NULL;
		     p = strtok_r(NULL, " \t\r\n", &save)) {
			if (n == sizeof(w) / sizeof(w[0])) {
				fprintf(stderr, "cr-proxy: %s:%u: too many words\n", path, lineno);
				rc = -EINVAL;
				break;
			}
			w[n++] = p;
		}
		if (rc == 0 && n > 0)
			rc = conf_line(c, w, n, path, lineno);
	}
	if (rc == 0 && ferror(f)) {
		rc = errno != 0 ? -errno : -EIO;
		fprintf(stderr, "cr-proxy: --config %s: %s\n", path, cr_strerror(rc));
	}
	fclose(f);
	return rc;
}
