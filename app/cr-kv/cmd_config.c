/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CONFIG GET / SET / HELP over the parameters cr-kv has, and the parsers the options
 * share with CONFIG SET (byte counts, maxmemory-clients, client-output-buffer-limit).
 * CONFIG SET changes the client limits (maxmemory-clients and the normal class of
 * client-output-buffer-limit), the slow log's two parameters, the password, maxmemory and
 * the eviction settings (evict.h) at run time; the other parameters are options.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <stdatomic.h>

#include "kv.h"
#include "script.h"

/* ---- values ---- */

int
kv_parse_bytes(const char *v, unsigned long long min, unsigned long long max,
	       unsigned long long *out)
{
	/* Redis's memtoull units: k = 1000, kb = 1024, ... */
	static const struct {
		const char *s;
		unsigned long long mul;
	} units[] = {{"", 1},
		     {"b", 1},
		     {"k", 1000},
		     {"kb", 1024},
		     {"m", 1000 * 1000},
		     {"mb", 1024 * 1024},
		     {"g", 1000000000ULL},
		     {"gb", 1024ULL * 1024 * 1024}};
	char digits[32];
	size_t n = strspn(v, "0123456789"), i;
	unsigned long long num;

	if (n == 0 || n >= sizeof(digits))
		return -EINVAL;
	memcpy(digits, v, n);
	digits[n] = '\0';
	if (cr_parse_uint(digits, 0, ~0ULL / (1024ULL * 1024 * 1024), &num) != 0)
		return -EINVAL;
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcasecmp(v + n, units[i].s) == 0) {
			num *= units[i].mul;
			if (num < min || num > max)
				return -EINVAL;
			*out = num;
			return 0;
		}
	}
	return -EINVAL;
}

int
kv_parse_maxmemory_clients(const char *v, long long *out)
{
	size_t n = strlen(v);
	unsigned long long b;

	if (n >= 2 && v[n - 1] == '%') {
		char pct[8];

		if (n - 1 >= sizeof(pct))
			return -EINVAL;
		memcpy(pct, v, n - 1);
		pct[n - 1] = '\0';
		if (strspn(pct, "0123456789") != n - 1 || cr_parse_uint(pct, 1, 100, &b) != 0)
			return -EINVAL;
		*out = -(long long)b; /* a percentage of maxmemory, stored as Redis does */
		return 0;
	}
	if (kv_parse_bytes(v, 0, (unsigned long long)INT64_MAX, &b) != 0)
		return -EINVAL;
	*out = (long long)b;
	return 0;
}

int
kv_parse_obuf_limit(const char *v, unsigned long long out[3], const char **msg)
{
	char buf[256], *tok[4], *save = NULL, *t;
	unsigned n = 0, i;
	unsigned long long val[3];

	*msg = "Wrong number of arguments in buffer limit configuration.";
	if (strlen(v) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, v);
	for (t = strtok_r(buf, " \t", &save); t != NULL; t = strtok_r(NULL, " \t", &save)) {
		if (n == 4)
			return -EINVAL; /* one class only: cr-kv has only normal clients */
		tok[n++] = t;
	}
	if (n != 4)
		return -EINVAL;
	if (strcasecmp(tok[0], "normal") != 0) {
		*msg = "Invalid client class specified in buffer limit configuration.";
		return -EINVAL;
	}
	*msg = "Error in hard, soft or soft_seconds setting in buffer limit configuration.";
	for (i = 0; i < 2; i++)
		if (kv_parse_bytes(tok[i + 1], 0, (unsigned long long)INT64_MAX, &val[i]) != 0)
			return -EINVAL;
	if (strspn(tok[3], "0123456789") != strlen(tok[3]) ||
	    cr_parse_uint(tok[3], 0, 1ULL << 40, &val[2]) != 0)
		return -EINVAL;
	memcpy(out, val, sizeof(val));
	return 0;
}

int
kv_parse_slowlog(const char *v, bool max_len, long long *out, const char **msg)
{
	long long n;

	if (!resp_string2ll(v, strlen(v), &n)) {
		*msg = "argument couldn't be parsed into an integer";
		return -EINVAL;
	}
	if (n < (max_len ? 0 : -1)) {
		*msg = max_len ? "argument must be between 0 and 9223372036854775807 inclusive"
			       : "argument must be between -1 and 9223372036854775807 inclusive";
		return -EINVAL;
	}
	*out = n;
	return 0;
}

/* ---- CONFIG GET ---- */

static void
config_value(const char *name, char *b, size_t n)
{
	unsigned i;

	for (i = 0; i < KV_MP_COUNT; i++) {
		if (strcmp(name, kv_memparam_names[i]) == 0) {
			kv_memparam_get(i, b, n); /* maxmemory and eviction (evict.c) */
			return;
		}
	}
	if (strcmp(name, "maxclients") == 0) {
		snprintf(b, n, "%llu", kv.maxclients);
	} else if (strcmp(name, "maxmemory-clients") == 0) {
		long long v = atomic_load_explicit(&kv.maxmemory_clients, memory_order_relaxed);

		snprintf(b, n, v < 0 ? "%lld%%" : "%lld", v < 0 ? -v : v);
	} else if (strcmp(name, "client-output-buffer-limit") == 0) {
		snprintf(b, n, "normal %llu %llu %llu",
			 atomic_load_explicit(&kv.obuf_hard, memory_order_relaxed),
			 atomic_load_explicit(&kv.obuf_soft, memory_order_relaxed),
			 atomic_load_explicit(&kv.obuf_soft_secs, memory_order_relaxed));
	} else if (strcmp(name, "slowlog-log-slower-than") == 0) {
		snprintf(b, n, "%lld",
			 atomic_load_explicit(&kv_slowlog_slower_than, memory_order_relaxed));
	} else if (strcmp(name, "slowlog-max-len") == 0) {
		snprintf(b, n, "%lld",
			 atomic_load_explicit(&kv_slowlog_max_len, memory_order_relaxed));
	} else if (strcmp(name, "proto-max-bulk-len") == 0) {
		snprintf(b, n, "%lld", kv.max_bulk);
	} else if (strcmp(name, "client-query-buffer-limit") == 0) {
		snprintf(b, n, "%llu", kv.qbuf_limit);
	} else if (strcmp(name, "port") == 0) {
		snprintf(b, n, "%u", kv.port);
	} else if (strcmp(name, "databases") == 0) {
		snprintf(b, n, "1");
	} else if (strcmp(name, "appendonly") == 0) {
		snprintf(b, n, "no");
	} else if (strcmp(name, "lua-time-limit") == 0 ||
		   strcmp(name, "busy-reply-threshold") == 0) {
		snprintf(b, n, "%lld",
			 atomic_load_explicit(&kv_lua_time_limit, memory_order_relaxed));
	} else if (strcmp(name, "requirepass") == 0) {
		snprintf(b, n, "%s", kv_auth_password());
	} else if (strcmp(name, "protected-mode") == 0) {
		snprintf(b, n, "%s",
			 atomic_load_explicit(&kv_protected_mode, memory_order_relaxed) ? "yes"
											: "no");
	} else {
		b[0] = '\0'; /* save: none */
	}
}

KV_CMD(config_get)
{
	static const char *const params[] = {"maxclients",
					     "maxmemory",
					     "maxmemory-clients",
					     "client-output-buffer-limit",
					     "slowlog-log-slower-than",
					     "slowlog-max-len",
					     "proto-max-bulk-len",
					     "client-query-buffer-limit",
					     "port",
					     "databases",
					     "maxmemory-policy",
					     "maxmemory-samples",
					     "maxmemory-eviction-tenacity",
					     "lfu-log-factor",
					     "lfu-decay-time",
					     "appendonly",
					     "save",
					     "requirepass",
					     "lua-time-limit",
					     "busy-reply-threshold",
					     "protected-mode",
					     NULL};
	bool seen[sizeof(params) / sizeof(params[0])] = {false};
	size_t start, i;
	uint32_t j;
	long long n = 0;
	char b[128];

	rb_reserve(x->out, 32);
	start = x->out->len;
	for (j = 2; j < x->argc; j++) {
		for (i = 0; params[i] != NULL; i++) {
			if (seen[i] || !kv_stringmatch(x->argv[j].p, x->argv[j].len, params[i],
						       strlen(params[i]), true))
				continue;
			seen[i] = true;
			config_value(params[i], b, sizeof(b));
			rb_bulkstr(x->out, params[i]);
			rb_bulkstr(x->out, b);
			n += 2;
		}
	}
	{
		char hdr[24];
		int h = snprintf(hdr, sizeof(hdr), "*%lld\r\n", n);

		if (rb_reserve(x->out, (size_t)h)) {
			memmove(x->out->p + start + h, x->out->p + start, x->out->len - start);
			memcpy(x->out->p + start, hdr, (size_t)h);
			x->out->len += (size_t)h;
		}
	}
}

/* ---- CONFIG SET ---- */

/* The memory settings (evict.h) follow at SET_MEM + KV_MP_*. */
enum {
	SET_MMC,
	SET_OBUF,
	SET_SLOWER,
	SET_SLOWLEN,
	SET_PASS,
	SET_LUA,
	SET_BUSY,
	SET_PROT,
	SET_MEM,
	SET_NPARAMS = SET_MEM + KV_MP_COUNT
};

/*
 * CONFIG SET param value [param value ...]: every value is checked before any is applied,
 * as Redis does, so a bad one changes nothing.
 */
KV_CMD(config_set)
{
	static const char *const names[SET_NPARAMS] = {"maxmemory-clients",
						       "client-output-buffer-limit",
						       "slowlog-log-slower-than",
						       "slowlog-max-len",
						       "requirepass",
						       "lua-time-limit",
						       "busy-reply-threshold",
						       "protected-mode",
						       "maxmemory",
						       "maxmemory-policy",
						       "maxmemory-samples",
						       "maxmemory-eviction-tenacity",
						       "lfu-log-factor",
						       "lfu-decay-time"};
	static const char *const fixed[] = {"maxclients",
					    "proto-max-bulk-len",
					    "client-query-buffer-limit",
					    "port",
					    "databases",
					    "appendonly",
					    "save",
					    NULL};
	bool set[SET_NPARAMS] = {false};
	unsigned long long mem[KV_MP_COUNT] = {0};
	long long mmc = 0;
	unsigned long long obuf[3] = {0};
	long long slow[2] = {0}, lua = 0;
	const struct kv_arg *pw = NULL;
	bool prot = true;
	const char *msg;
	uint32_t j;
	unsigned i;

	if (x->argc < 4) {
		kv_reply_wrong_arity(x->out, "config|set");
		return;
	}
	if (x->argc % 2 != 0) { /* a name without a value: Redis's answer */
		rb_error(x->out, kv_err_syntax);
		return;
	}
	for (j = 2; j < x->argc; j += 2) {
		const char *p = x->argv[j].p, *v = x->argv[j + 1].p;

		for (i = 0; i < SET_NPARAMS && strcasecmp(p, names[i]) != 0; i++)
			;
		if (i < SET_NPARAMS && set[i]) {
			rb_errorf(x->out,
				  "ERR CONFIG SET failed (possibly related to argument '%s') - "
				  "duplicate parameter",
				  names[i]);
			return;
		}
		if (i == SET_MMC && kv_parse_maxmemory_clients(v, &mmc) != 0) {
			rb_errorf(x->out,
				  "ERR CONFIG SET failed (possibly related to argument '%s') - "
				  "argument must be a memory or percent value",
				  names[i]);
			return;
		}
		if ((i == SET_SLOWER || i == SET_SLOWLEN) &&
		    kv_parse_slowlog(v, i == SET_SLOWLEN, &slow[i - SET_SLOWER], &msg) != 0) {
			rb_errorf(x->out,
				  "ERR CONFIG SET failed (possibly related to argument '%s') - %s",
				  names[i], msg);
			return;
		}
		if ((i == SET_LUA || i == SET_BUSY) && kv_parse_slowlog(v, true, &lua, &msg) != 0) {
			rb_errorf(x->out,
				  "ERR CONFIG SET failed (possibly related to argument '%s') - %s",
				  names[i], msg);
			return;
		}
		if (i == SET_OBUF && kv_parse_obuf_limit(v, obuf, &msg) != 0) {
			rb_errorf(x->out,
				  "ERR CONFIG SET failed (possibly related to argument '%s') - %s",
				  names[i], msg);
			return;
		}
		if (i >= SET_MEM && i < SET_NPARAMS &&
		    kv_memparam_parse(i - SET_MEM, v, &mem[i - SET_MEM], &msg) != 0) {
			rb_errorf(x->out,
				  "ERR CONFIG SET failed (possibly related to argument '%s') - %s",
				  names[i], msg);
			return;
		}
		if (i == SET_PROT) {
			if (strcasecmp(v, "yes") != 0 && strcasecmp(v, "no") != 0) {
				rb_errorf(x->out,
					  "ERR CONFIG SET failed (possibly related to argument '%s') - "
					  "argument must be 'yes' or 'no'",
					  names[i]);
				return;
			}
			prot = strcasecmp(v, "yes") == 0;
		}
		if (i == SET_PASS)
			pw = &x->argv[j + 1];
		if (i < SET_NPARAMS) {
			set[i] = true;
			continue;
		}
		for (i = 0; fixed[i] != NULL && strcasecmp(p, fixed[i]) != 0; i++)
			;
		if (fixed[i] != NULL)
			rb_errorf(
			    x->out,
			    "ERR CONFIG SET failed (possibly related to argument '%s') - cr-kv "
			    "sets it at start only: use --%s",
			    fixed[i], fixed[i]);
		else
			rb_errorf(x->out,
				  "ERR Unknown option or number of arguments for CONFIG SET - '%s'",
				  p);
		return;
	}
	if (set[SET_PASS] && kv_auth_set(pw->p, pw->len) != 0) {
		rb_error(x->out, kv_err_oom); /* first: nothing else is applied either */
		return;
	}
	/* relaxed: each value stands alone; a client's next check reads it */
	if (set[SET_MMC])
		atomic_store_explicit(&kv.maxmemory_clients, mmc, memory_order_relaxed);
	if (set[SET_OBUF]) {
		atomic_store_explicit(&kv.obuf_hard, obuf[0], memory_order_relaxed);
		atomic_store_explicit(&kv.obuf_soft, obuf[1], memory_order_relaxed);
		atomic_store_explicit(&kv.obuf_soft_secs, obuf[2], memory_order_relaxed);
	}
	if (set[SET_SLOWER])
		atomic_store_explicit(&kv_slowlog_slower_than, slow[0], memory_order_relaxed);
	if (set[SET_SLOWLEN])
		kv_slowlog_set_max_len(slow[1]);
	if (set[SET_PROT])
		atomic_store_explicit(&kv_protected_mode, prot, memory_order_relaxed);
	if (set[SET_LUA] || set[SET_BUSY])
		atomic_store_explicit(&kv_lua_time_limit, lua, memory_order_relaxed);
	for (i = 0; i < KV_MP_COUNT; i++)
		if (set[SET_MEM + i])
			kv_memparam_apply(i, mem[i]);
	if ((set[SET_MEM + KV_MP_MAXMEMORY] || set[SET_MEM + KV_MP_POLICY]) &&
	    kv_shard_owned(x->sh)) /* its home shard, unless that runs elsewhere now */
		kv_evict_kick(x->sh); /* Redis evicts at once; the other shards at their tick */
	rb_ok(x->out);
}

KV_CMD(config_help)
{
	static const char *const l[] = {
	    "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	    "GET <pattern>",
	    "    Return parameters matching the glob-like <pattern> and their values.",
	    "SET <directive> <value>",
	    "    Set the configuration <directive> to <value> (maxmemory,",
	    "    maxmemory-policy, maxmemory-samples, maxmemory-eviction-tenacity,",
	    "    lfu-log-factor, lfu-decay-time, maxmemory-clients,",
	    "    client-output-buffer-limit, slowlog-log-slower-than, slowlog-max-len,",
	    "    requirepass and protected-mode;",
	    "    the others are set at start).",
	    "HELP",
	    "    Print this help.",
	    NULL};

	kv_reply_help(x, l);
}
