/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * SNI passthrough's settings: --sni-listen, --sni-route NAME=HOST:PORT[,HOST:PORT...],
 * --sni-default, --sni-timeout; the routes, each a group of backend slots; and the group
 * of the plain listeners (the --backend list), which a route's backends are kept out of.
 *
 * A group is a mask of slots. The routes' backends go into the backend table with the
 * --backend ones (px_sni_backends()), so they are chosen, balanced, counted and checked
 * the same way; a session picks only among its group (px_choose()'s tried bits). Route
 * masks are made once at start (a slot keeps its address); the plain group's mask is
 * made again at every reload, published with a relaxed store: a session that starts
 * with the old mask still picks a backend that was valid a moment ago.
 */
#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "cr_app.h"
#include "passthrough.h"
#include "proxy.h"

struct px_sni_route {
	char name[PX_SNI_NAME_MAX]; /* lower case; "*.example.com" matches one label or more */
	struct px_backend_conf backends[PX_SNI_GROUP_MAX];
	unsigned n;
	uint64_t mask;
};

struct px_sni_conf px_sni = {.timeout = 5.0};
static struct px_sni_route routes[PX_SNI_ROUTES_MAX];
static unsigned n_routes;
static struct px_sni_route def; /* --sni-default; n == 0: refuse */
static _Atomic uint64_t main_mask = ~0ull;

/* "HOST:PORT[,HOST:PORT...]" into @p r. */
static int
parse_group(const char *v, struct px_sni_route *r)
{
	char buf[1024], *tok, *save = NULL;

	if (strlen(v) >= sizeof(buf) || *v == '\0')
		return -EINVAL;
	strcpy(buf, v);
	r->n = 0;
	for (tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
		if (r->n == PX_SNI_GROUP_MAX || strchr(tok, ' ') != NULL ||
		    px_backend_parse(tok, &r->backends[r->n]) != 0) {
			cr_opt_bad_part(tok, "HOST:PORT with a numeric host, at most 16 of them");
			return -EINVAL;
		}
		r->n++;
	}
	return r->n > 0 ? 0 : -EINVAL;
}

static bool
name_ok(const char *n, size_t len)
{
	size_t i;

	if (len == 0 || len >= PX_SNI_NAME_MAX || n[0] == '.' || n[len - 1] == '.')
		return false;
	for (i = 0; i + 1 < len; i++)
		if (n[i] == '.' && n[i + 1] == '.')
			return false;
	for (i = 0; i < len; i++)
		if (!isalnum((unsigned char)n[i]) && n[i] != '-' && n[i] != '.' && n[i] != '_' &&
		    !(i == 0 && n[i] == '*' && len > 2 && n[1] == '.'))
			return false;
	return true;
}

static int
set_route(const char *v, void *ctx)
{
	const char *eq = strchr(v, '=');
	struct px_sni_route *r = &routes[n_routes];
	size_t i, len;

	(void)ctx;
	if (eq == NULL || n_routes == PX_SNI_ROUTES_MAX)
		return -EINVAL;
	len = (size_t)(eq - v);
	if (!name_ok(v, len)) {
		char part[PX_SNI_NAME_MAX];

		snprintf(part, sizeof(part), "%.*s", (int)(len < 200 ? len : 200), v);
		cr_opt_bad_part(part, "a host name, or *.DOMAIN");
		return -EINVAL;
	}
	for (i = 0; i < len; i++)
		r->name[i] = (char)tolower((unsigned char)v[i]);
	r->name[len] = '\0';
	if (parse_group(eq + 1, r) != 0)
		return -EINVAL;
	n_routes++;
	return 0;
}

static int
set_default(const char *v, void *ctx)
{
	(void)ctx;
	if (strcmp(v, "refuse") == 0) {
		def.n = 0;
		return 0;
	}
	return parse_group(v, &def);
}

static int
set_listen(const char *v, void *ctx)
{
	(void)ctx;
	return cr_net_addr_parse(v, &px_sni.listen) == 0 ? 0 : -EINVAL;
}

static int
set_timeout(const char *v, void *ctx)
{
	double d;

	(void)ctx;
	if (cr_parse_seconds(v, &d) != 0 || d < 0.001 || d > 3600)
		return -EINVAL;
	px_sni.timeout = d;
	return 0;
}

const struct cr_opt px_sni_options[PX_N_SNI_OPTIONS] = {
    {"sni-listen", 0, "HOST:PORT",
     "TLS passthrough: route each client by the SNI name of its ClientHello (not "
     "decrypted; see --sni-route)",
     "HOST:PORT with a numeric host, [IPv6]:PORT, localhost:PORT or *:PORT", set_listen, NULL},
    {"sni-route", 0, "NAME=HOST:PORT[,HOST:PORT]",
     "the backends of SNI name NAME (or *.DOMAIN) on --sni-listen; repeat for more names "
     "(at most 32)",
     "NAME=HOST:PORT[,HOST:PORT...], a host name and 1 to 16 numeric HOST:PORTs", set_route, NULL},
    {"sni-default", 0, "HOST:PORT[,HOST:PORT]|refuse",
     "the backends of a ClientHello with no SNI or an unknown name (default refuse: closed)",
     "refuse, or 1 to 16 numeric HOST:PORTs, comma-separated", set_default, NULL},
    {"sni-timeout", 0, "SECONDS",
     "close a passthrough client whose ClientHello is not whole after this long (default 5)",
     "a number of seconds from 0.001 to 3600", set_timeout, NULL},
};
_Static_assert(sizeof(px_sni_options) / sizeof(px_sni_options[0]) == PX_N_SNI_OPTIONS,
	       "PX_N_SNI_OPTIONS");

int
px_sni_check(void)
{
	px_sni.on = px_sni.listen.len != 0;
	px_sni.n_routes = n_routes;
	if (!px_sni.on && (n_routes > 0 || def.n > 0))
		return cr_app_errorf(-EINVAL, "--sni-route / --sni-default without --sni-listen");
	if (px_sni.on && n_routes == 0 && def.n == 0)
		return cr_app_errorf(-EINVAL, "--sni-listen needs --sni-route NAME=HOST:PORT or "
					      "--sni-default HOST:PORT");
	return 0;
}

unsigned
px_sni_backends(struct px_backend_conf *out, unsigned cap)
{
	unsigned i, j, n = 0;

	for (i = 0; i <= n_routes; i++) {
		const struct px_sni_route *r = i < n_routes ? &routes[i] : &def;

		for (j = 0; j < r->n && n < cap; j++)
			out[n++] = r->backends[j];
	}
	return n;
}

static uint64_t
mask_of(const struct px_backend_conf *b, unsigned n)
{
	uint64_t m = 0;
	unsigned i;

	for (i = 0; i < n; i++) {
		int s = px_slot_find(&b[i].addr);

		if (s >= 0)
			m |= 1ull << s;
	}
	return m;
}

void
px_sni_groups_update(const struct px_backend_conf *plain, unsigned n)
{
	static bool routes_done;
	unsigned i;

	/* Once, before the lcores start: their slots never change. */
	if (!routes_done) {
		for (i = 0; i < n_routes; i++)
			routes[i].mask = mask_of(routes[i].backends, routes[i].n);
		def.mask = mask_of(def.backends, def.n);
		routes_done = true;
	}
	/* relaxed: pairs with the relaxed load in px_plain_group(); see the file comment. */
	atomic_store_explicit(&main_mask, px_sni.on ? mask_of(plain, n) : ~0ull,
			      memory_order_relaxed);
}

uint64_t
px_plain_group(void)
{
	return atomic_load_explicit(&main_mask, memory_order_relaxed);
}

/* "*.example.com" matches "a.example.com" and "a.b.example.com", not "example.com". */
static bool
matches(const char *pattern, const char *name)
{
	size_t pl, nl;

	if (pattern[0] != '*')
		return strcmp(pattern, name) == 0;
	pl = strlen(pattern + 1);
	nl = strlen(name);
	return nl > pl && strcmp(name + nl - pl, pattern + 1) == 0;
}

uint64_t
px_sni_group(const char *name, bool *is_default)
{
	unsigned i;

	*is_default = false;
	if (name != NULL) {
		/* Exact names first, then wildcards, each in the order given. */
		for (i = 0; i < n_routes; i++)
			if (routes[i].name[0] != '*' && matches(routes[i].name, name))
				return routes[i].mask;
		for (i = 0; i < n_routes; i++)
			if (routes[i].name[0] == '*' && matches(routes[i].name, name))
				return routes[i].mask;
	}
	*is_default = true;
	return def.mask;
}
