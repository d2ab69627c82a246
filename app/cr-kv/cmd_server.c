/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Server and connection commands: PING ECHO SELECT QUIT INFO COMMAND CLIENT HELLO TIME
 * (CONFIG: cmd_config.c). They run on the client's lcore; INFO gathers its keyspace and memory figures from
 * every shard first (KV_MERGE_INFO).
 */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <unistd.h>

#include "cr_telemetry.h"
#include "kv.h"

KV_CMD(ping)
{
	if (x->argc > 2) {
		kv_reply_wrong_arity(x->out, "ping");
		return;
	}
	if (x->kc->resp == 2 && kv_ps_subscribed(x->kc)) {
		kv_ps_pong(x); /* RESP2's subscribed mode */
		return;
	}
	if (x->argc == 1)
		rb_raw(x->out, "+PONG\r\n", 7);
	else
		rb_bulk(x->out, x->argv[1].p, x->argv[1].len);
}

KV_CMD(echo)
{
	rb_bulk(x->out, x->argv[1].p, x->argv[1].len);
}

KV_CMD(select)
{
	long long id;

	if (!kv_arg_ll(x, &x->argv[1], &id))
		return;
	if (id < INT_MIN || id > INT_MAX) {
		rb_errorf(x->out, "ERR value is out of range, value must between %d and %d",
			  INT_MIN, INT_MAX);
		return;
	}
	if (id != 0)
		rb_error(x->out, "ERR DB index is out of range");
	else
		rb_ok(x->out);
}

KV_CMD(quit)
{
	rb_ok(x->out);
	x->kc->close_after = true;
}

KV_CMD(time)
{
	struct timeval tv;
	char b[24];

	gettimeofday(&tv, NULL);
	rb_array(x->out, 2);
	rb_bulk(x->out, b, (size_t)snprintf(b, sizeof(b), "%ld", (long)tv.tv_sec));
	rb_bulk(x->out, b, (size_t)snprintf(b, sizeof(b), "%ld", (long)tv.tv_usec));
}

/* ---- CLIENT ---- */

static bool
valid_name(const struct kv_arg *a)
{
	size_t i;

	for (i = 0; i < a->len; i++)
		if (a->p[i] < '!' || a->p[i] > '~')
			return false;
	return true;
}

static void
set_name(struct kconn *kc, const struct kv_arg *a)
{
	free(kc->name);
	kc->name = NULL;
	if (a->len > 0)
		kc->name = strndup(a->p, a->len);
}

static const char err_name[] =
    "ERR Client names cannot contain spaces, newlines or special characters.";

KV_CMD(client_setname)
{
	if (!valid_name(&x->argv[2])) {
		rb_error(x->out, err_name);
		return;
	}
	set_name(x->kc, &x->argv[2]);
	rb_ok(x->out);
}

KV_CMD(client_getname)
{
	if (x->kc->name == NULL)
		rb_null(x->out);
	else
		rb_bulkstr(x->out, x->kc->name);
}

KV_CMD(client_id)
{
	rb_int(x->out, (long long)x->kc->id);
}

void
kv_reply_help(struct kv_ctx *x, const char *const *lines)
{
	size_t n = 0, i;

	while (lines[n] != NULL)
		n++;
	rb_array(x->out, (long long)n);
	for (i = 0; i < n; i++)
		rb_status(x->out, lines[i]);
}

/* ---- HELLO ---- */

KV_CMD(hello)
{
	const struct kv_arg *name = NULL;
	bool auth = false;
	long long ver = 0;
	uint32_t j = 1;
	char b[24];

	if (x->argc >= 2) {
		if (!resp_string2ll(x->argv[1].p, x->argv[1].len, &ver)) {
			rb_error(x->out, "ERR Protocol version is not an integer or out of range");
			return;
		}
		j = 2;
		if (ver < 2 || ver > 3) {
			rb_error(x->out, "NOPROTO unsupported protocol version");
			return;
		}
	}
	for (; j < x->argc; j++) {
		uint32_t more = x->argc - 1 - j;
		const char *o = x->argv[j].p;

		if (strcasecmp(o, "AUTH") == 0 && more >= 2) {
			/* The only user is "default" (auth.c). */
			if (!kv_auth_check(&x->argv[j + 1], &x->argv[j + 2])) {
				rb_error(x->out, "WRONGPASS invalid username-password pair or user "
						 "is disabled.");
				return;
			}
			auth = true;
			j += 2;
		} else if (strcasecmp(o, "SETNAME") == 0 && more >= 1) {
			name = &x->argv[j + 1];
			if (!valid_name(name)) {
				rb_error(x->out, err_name);
				return;
			}
			j++;
		} else {
			rb_errorf(x->out, "ERR Syntax error in HELLO option '%s'", o);
			return;
		}
	}
	if (!auth && !x->kc->authed) {
		rb_error(x->out, "NOAUTH HELLO must be called with the client already "
				 "authenticated, otherwise the HELLO AUTH <user> <pass> option can "
				 "be used to authenticate the client and select the RESP protocol "
				 "version at the same time");
		return;
	}
	if (auth)
		x->kc->authed = true;
	if (name != NULL)
		set_name(x->kc, name);
	if (ver != 0)
		x->kc->resp = (uint8_t)ver; /* this reply already in it (resp3.c: as is) */
	if (x->kc->resp == 3)
		rb_raw(x->out, "%7\r\n", 4);
	else
		rb_array(x->out, 14);
	rb_bulkstr(x->out, "server");
	rb_bulkstr(x->out, "redis");
	rb_bulkstr(x->out, "version");
	rb_bulkstr(x->out, KV_VERSION);
	rb_bulkstr(x->out, "proto");
	rb_int(x->out, x->kc->resp);
	rb_bulkstr(x->out, "id");
	rb_int(x->out, (long long)x->kc->id);
	rb_bulkstr(x->out, "mode");
	rb_bulkstr(x->out, "standalone");
	rb_bulkstr(x->out, "role");
	rb_bulkstr(x->out, "master");
	rb_bulkstr(x->out, "modules");
	rb_array(x->out, 0);
	(void)b;
}

/* ---- COMMAND ---- */

static void
reply_flags(struct rbuf *o, uint32_t f)
{
	static const struct {
		uint32_t bit;
		const char *name;
	} names[] = {/* Redis's order (its addCommandFlags()') */
		     {KV_WRITE, "write"},
		     {KV_READONLY, "readonly"},
		     {KV_DENYOOM, "denyoom"},
		     {KV_ADMIN, "admin"},
		     {KV_PUBSUB, "pubsub"},
		     {KV_NOSCRIPT, "noscript"},
		     {KV_BLOCKING, "blocking"},
		     {KV_LOADING, "loading"},
		     {KV_STALE, "stale"},
		     {KV_SKIP_MONITOR, "skip_monitor"},
		     {KV_SKIP_SLOWLOG, "skip_slowlog"},
		     {KV_FAST, "fast"},
		     {KV_NO_AUTH, "no_auth"},
		     {KV_NO_MANDATORY_KEYS, "no_mandatory_keys"},
		     {KV_MOVABLEKEYS, "movablekeys"},
		     {KV_ALLOW_BUSY, "allow_busy"}};
	unsigned i, n = 0;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (f & names[i].bit)
			n++;
	rb_array(o, n);
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (f & names[i].bit)
			rb_status(o, names[i].name);
}

/* ACL categories (there are no ACLs here, but COMMAND reports them), in Redis's order. */
enum {
	CAT_KEYSPACE,
	CAT_READ,
	CAT_WRITE,
	CAT_SET,
	CAT_SORTEDSET,
	CAT_LIST,
	CAT_HASH,
	CAT_STRING,
	CAT_PUBSUB,
	CAT_ADMIN,
	CAT_FAST,
	CAT_SLOW,
	CAT_BLOCKING,
	CAT_DANGEROUS,
	CAT_CONNECTION,
	CAT_TRANSACTION,
	CAT_SCRIPTING,
	CAT_NCATS
};
static const char *const cat_names[CAT_NCATS] = {
    "keyspace", "read",	     "write",	   "set",	  "sortedset", "list",
    "hash",	"string",    "pubsub",	   "admin",	  "fast",      "slow",
    "blocking", "dangerous", "connection", "transaction", "scripting"};

/*
 * @p c's categories as Redis 7.0 has them: those its flags imply (Redis's
 * setImplicitACLCategories()) and those of its kind (its group, and a few by name as
 * Redis's command table has them); a mere container has none of its own.
 */
static void
categories(const struct kv_cmd *c, bool on[CAT_NCATS])
{
	static const struct {
		const char *group;
		int cat;
	} by_group[] = {{"string", CAT_STRING},
			{"hash", CAT_HASH},
			{"list", CAT_LIST},
			{"set", CAT_SET},
			{"sorted-set", CAT_SORTEDSET},
			{"generic", CAT_KEYSPACE},
			{"connection", CAT_CONNECTION},
			{"transactions", CAT_TRANSACTION},
			{"scripting", CAT_SCRIPTING}};
	unsigned i;

	memset(on, 0, sizeof(bool) * CAT_NCATS);
	if (c->fn != NULL || c->sub == NULL) { /* not a mere container */
		for (i = 0; i < sizeof(by_group) / sizeof(by_group[0]); i++)
			if (c->group != NULL && strcmp(c->group, by_group[i].group) == 0)
				on[by_group[i].cat] = true;
		if (strncmp(c->name, "command", 7) == 0)
			on[CAT_CONNECTION] = true;
		if (strcmp(c->name, "dbsize") == 0 || strcmp(c->name, "flushdb") == 0 ||
		    strcmp(c->name, "flushall") == 0)
			on[CAT_KEYSPACE] = true;
		if (strcmp(c->name, "keys") == 0 || strcmp(c->name, "flushdb") == 0 ||
		    strcmp(c->name, "flushall") == 0 || strcmp(c->name, "info") == 0)
			on[CAT_DANGEROUS] = true;
	}
	on[CAT_WRITE] |= (c->flags & KV_WRITE) != 0;
	on[CAT_READ] |= (c->flags & KV_READONLY) != 0 && !on[CAT_SCRIPTING];
	on[CAT_ADMIN] |= (c->flags & KV_ADMIN) != 0;
	on[CAT_DANGEROUS] |= (c->flags & KV_ADMIN) != 0;
	on[CAT_PUBSUB] |= (c->flags & KV_PUBSUB) != 0;
	on[CAT_FAST] |= (c->flags & KV_FAST) != 0;
	on[CAT_BLOCKING] |= (c->flags & KV_BLOCKING) != 0;
	on[CAT_SLOW] = !on[CAT_FAST];
}

static void
reply_categories(struct rbuf *o, const struct kv_cmd *c)
{
	bool on[CAT_NCATS];
	unsigned i, n = 0;
	char b[24];

	categories(c, on);
	for (i = 0; i < CAT_NCATS; i++)
		n += on[i];
	rb_array(o, n);
	for (i = 0; i < CAT_NCATS; i++)
		if (on[i]) {
			snprintf(b, sizeof(b), "@%s", cat_names[i]);
			rb_status(o, b);
		}
}

/* COMMAND CAT_LIST FILTERBY ACLCAT: is @p c in category @p cat (a name without "@")? */
static bool
in_category(const struct kv_cmd *c, const struct kv_arg *cat)
{
	bool on[CAT_NCATS];
	unsigned i;

	for (i = 0; i < CAT_NCATS; i++)
		if (strcasecmp(cat->p, cat_names[i]) == 0)
			break;
	if (i == CAT_NCATS)
		return false;
	categories(c, on);
	return on[i];
}

static void
reply_info(struct rbuf *o, const struct kv_cmd *c)
{
	unsigned nsub = 0;
	const struct kv_cmd *s;

	rb_array(o, 10);
	rb_bulkstr(o, c->name);
	rb_int(o, c->arity);
	reply_flags(o, c->flags);
	rb_int(o, c->first_key);
	rb_int(o, c->last_key);
	rb_int(o, c->step);
	reply_categories(o, c);
	rb_array(o, 0); /* tips */
	rb_array(o, 0); /* key specs */
	for (s = c->sub; s != NULL && s->name != NULL; s++)
		nsub++;
	rb_array(o, nsub);
	for (s = c->sub; s != NULL && s->name != NULL; s++)
		reply_info(o, s);
}

KV_CMD(command)
{
	unsigned i;

	if (x->argc > 1) {
		/* A subcommand the table does not have reaches here only with argc 1. */
		kv_reply_wrong_arity(x->out, "command");
		return;
	}
	rb_array(x->out, kv_ncmds);
	for (i = 0; i < kv_ncmds; i++)
		reply_info(x->out, &kv_cmds[i]);
}

KV_CMD(command_count)
{
	rb_int(x->out, kv_ncmds);
}

/* A command or, "container|sub", a subcommand, as Redis 7.0's COMMAND INFO and DOCS look
 * names up. */
static const struct kv_cmd *
lookup_full(const struct kv_arg *a)
{
	const char *bar = memchr(a->p, '|', a->len);
	const struct kv_cmd *c;

	if (bar == NULL)
		return kv_cmd_lookup(a->p, a->len);
	c = kv_cmd_lookup(a->p, (size_t)(bar - a->p));
	if (c == NULL || c->sub == NULL)
		return NULL;
	return kv_cmd_sub_lookup(c, bar + 1, a->len - (size_t)(bar + 1 - a->p));
}

/* COMMAND LIST [FILTERBY MODULE m | ACLCAT c | PATTERN p]: every command and subcommand
 * ("config|get"), as Redis 7.0 lists them. */
KV_CMD(command_list)
{
	const struct kv_arg *pat = NULL, *cat = NULL;
	const struct kv_cmd *s;
	unsigned i;
	size_t start;
	long long n = 0;

	if (x->argc == 5 && strcasecmp(x->argv[2].p, "filterby") == 0) {
		if (strcasecmp(x->argv[3].p, "module") == 0) {
			rb_array(x->out, 0); /* no module */
			return;
		}
		if (strcasecmp(x->argv[3].p, "aclcat") == 0)
			cat = &x->argv[4];
		else if (strcasecmp(x->argv[3].p, "pattern") == 0)
			pat = &x->argv[4];
		else {
			rb_error(x->out, kv_err_syntax);
			return;
		}
	} else if (x->argc != 2) {
		rb_error(x->out, kv_err_syntax);
		return;
	}
	start = kv_array_begin(x->out);
	for (i = 0; i < kv_ncmds; i++) {
		const struct kv_cmd *c = &kv_cmds[i];

		if ((cat == NULL || in_category(c, cat)) &&
		    (pat == NULL ||
		     kv_stringmatch(pat->p, pat->len, c->name, strlen(c->name), true))) {
			rb_bulkstr(x->out, c->name);
			n++;
		}
		for (s = c->sub; s != NULL && s->name != NULL; s++) {
			if ((pat != NULL &&
			     !kv_stringmatch(pat->p, pat->len, s->name, strlen(s->name), true)) ||
			    (cat != NULL && !in_category(s, cat)))
				continue;
			rb_bulkstr(x->out, s->name);
			n++;
		}
	}
	kv_array_end(x->out, start, n);
}

KV_CMD(command_info)
{
	uint32_t j;
	unsigned i;

	if (x->argc == 2) {
		rb_array(x->out, kv_ncmds);
		for (i = 0; i < kv_ncmds; i++)
			reply_info(x->out, &kv_cmds[i]);
		return;
	}
	rb_array(x->out, x->argc - 2);
	for (j = 2; j < x->argc; j++) {
		const struct kv_cmd *c = lookup_full(&x->argv[j]);

		if (c == NULL)
			rb_null(x->out);
		else
			reply_info(x->out, c);
	}
}

static void
reply_doc(struct rbuf *o, const struct kv_cmd *c)
{
	unsigned nsub = 0;
	const struct kv_cmd *s;

	for (s = c->sub; s != NULL && s->name != NULL; s++)
		nsub++;
	rb_bulkstr(o, c->name);
	rb_array(o, nsub ? 8 : 6);
	rb_bulkstr(o, "summary");
	rb_bulkstr(o, c->summary != NULL ? c->summary : "");
	rb_bulkstr(o, "since");
	rb_bulkstr(o, "1.0.0");
	rb_bulkstr(o, "group");
	rb_bulkstr(o, c->group != NULL ? c->group : "generic");
	if (nsub) {
		rb_bulkstr(o, "subcommands");
		rb_array(o, nsub * 2);
		for (s = c->sub; s != NULL && s->name != NULL; s++)
			reply_doc(o, s);
	}
}

KV_CMD(command_docs)
{
	uint32_t j;
	unsigned i, n = 0;
	size_t start;

	if (x->argc == 2) {
		rb_array(x->out, kv_ncmds * 2);
		for (i = 0; i < kv_ncmds; i++)
			reply_doc(x->out, &kv_cmds[i]);
		return;
	}
	start = x->out->len;
	for (j = 2; j < x->argc; j++) {
		const struct kv_cmd *c = lookup_full(&x->argv[j]);

		if (c != NULL) {
			reply_doc(x->out, c);
			n++;
		}
	}
	{
		char hdr[24];
		int h = snprintf(hdr, sizeof(hdr), "*%u\r\n", n * 2);

		if (rb_reserve(x->out, (size_t)h)) {
			memmove(x->out->p + start + h, x->out->p + start, x->out->len - start);
			memcpy(x->out->p + start, hdr, (size_t)h);
			x->out->len += (size_t)h;
		}
	}
}

KV_CMD(command_help)
{
	static const char *const l[] = {
	    "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	    "(no subcommand)",
	    "    Return details about all commands.",
	    "COUNT",
	    "    Return the total number of commands in this server.",
	    "LIST",
	    "    Return a list of all commands in this server.",
	    "INFO [<command-name> ...]",
	    "    Return details about multiple commands.",
	    "    If no command names are given, documentation details for all",
	    "    commands are returned.",
	    "DOCS [<command-name> ...]",
	    "    Return documentation details about multiple commands.",
	    "    If no command names are given, documentation details for all",
	    "    commands are returned.",
	    "HELP",
	    "    Print this help.",
	    NULL};

	kv_reply_help(x, l);
}

/* ---- INFO ---- */

/* Figures each shard sends INFO: keys, expires, avg ttl, memory, hits, misses, expired,
 * transaction locks granted, parts that waited behind locks, values being freed. */
#define INFO_FIGURES_BASE 10
/* ... then the error replies by code and their total (errstat.c) */
#define INFO_FIGURES (INFO_FIGURES_BASE + KV_ERRSTAT_KINDS + 1)

enum {
	SEC_SERVER = 1,
	SEC_CLIENTS = 2,
	SEC_MEMORY = 4,
	SEC_STATS = 8,
	SEC_KEYSPACE = 16,
	SEC_CMDSTATS = 32,
	SEC_PERSISTENCE = 64,
	SEC_REPLICATION = 128,
	SEC_CPU = 256,
	SEC_MODULES = 512,
	SEC_ERRORSTATS = 1024,
	SEC_CLUSTER = 2048
};
/* INFO and INFO default: every section but commandstats, as Redis's */
#define SEC_DEFAULT (4095u & ~(unsigned)SEC_CMDSTATS)
static unsigned info_sections(uint32_t argc, const struct kv_arg *argv);

/* On each shard: its figures, as an array of integers for kv_info_merge(), then (INFO
 * commandstats) five per command it counted: slot, calls, ns, rejected, failed. */
KV_CMD(info_shard)
{
	struct kv_store *s = x->sh->store;
	size_t start = x->out->len;

	rb_array(x->out, INFO_FIGURES);
	rb_int(x->out, (long long)kv_store_count(s));
	rb_int(x->out, (long long)kv_store_expires(s));
	rb_int(x->out, kv_store_avg_ttl(s, x->now_ms));
	rb_int(x->out, (long long)kv_mem_used(&x->sh->mem));
	rb_int(x->out, (long long)x->sh->hits);
	rb_int(x->out, (long long)x->sh->misses);
	rb_int(x->out, (long long)kv_store_expired_total(s));
	rb_int(x->out, (long long)x->sh->tx.tx_total);
	rb_int(x->out, (long long)x->sh->tx.parked_total);
	rb_int(x->out, (long long)kv_store_lazy_pending(s));
	for (unsigned e = 0; e <= KV_ERRSTAT_KINDS; e++) /* the lcore's: not a moved shard's */
		rb_int(x->out, x->sh == kv_here() ? (long long)x->sh->errstat[e] : 0);
	if (info_sections(x->argc, x->argv) & SEC_CMDSTATS) {
		size_t before = x->out->len;
		long long n = 0;
		char hdr[24];
		int h;

		if (x->sh == kv_here()) /* the lcore's counts: not a moved shard's part */
			kv_cmdstat_put(x->sh, x->out);
		for (size_t i = before; i < x->out->len; i++)
			n += x->out->p[i] == ':';
		/* the array's real length, in place of its header */
		h = snprintf(hdr, sizeof(hdr), "*%lld\r\n", INFO_FIGURES + n);
		if (rb_reserve(x->out, (size_t)h)) {
			size_t old = (size_t)snprintf(NULL, 0, "*%d\r\n", INFO_FIGURES);

			memmove(x->out->p + start + h, x->out->p + start + old,
				x->out->len - start - old);
			memcpy(x->out->p + start, hdr, (size_t)h);
			x->out->len += (size_t)h - old;
		}
	}
}

static void
human(char *b, size_t n, double v)
{
	if (v < 1024)
		snprintf(b, n, "%.0fB", v);
	else if (v < 1024.0 * 1024)
		snprintf(b, n, "%.2fK", v / 1024);
	else if (v < 1024.0 * 1024 * 1024)
		snprintf(b, n, "%.2fM", v / (1024.0 * 1024));
	else
		snprintf(b, n, "%.2fG", v / (1024.0 * 1024 * 1024));
}

static uint64_t
counter_total(int id)
{
	uint64_t t = 0, v;
	unsigned i;

	for (i = 0; i < kv.nshards; i++)
		if (cr_telemetry_counter_read(id, kv.shard_lcore[i], &v) == 0)
			t += v;
	return t;
}

/* The sections INFO's arguments ask for; commandstats is not among the default ones, as
 * in Redis. */
static unsigned
info_sections(uint32_t argc, const struct kv_arg *argv)
{
	/* by bit, SEC_SERVER first */
	static const char *const names[] = {
	    "server",	   "clients",	  "memory", "stats",   "keyspace",   "commandstats",
	    "persistence", "replication", "cpu",    "modules", "errorstats", "cluster"};
	unsigned want = 0, i;
	uint32_t j;

	if (argc == 1)
		return SEC_DEFAULT;
	for (j = 1; j < argc; j++) {
		const char *a = argv[j].p;

		if (strcasecmp(a, "all") == 0 || strcasecmp(a, "everything") == 0)
			want |= 4095;
		else if (strcasecmp(a, "default") == 0)
			want |= SEC_DEFAULT;
		for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			if (strcasecmp(a, names[i]) == 0)
				want |= 1u << i;
	}
	return want;
}

void
kv_info_merge(struct kreq *kr, struct kpart *parts, uint32_t nparts, struct rbuf *out)
{
	long long t[INFO_FIGURES] = {0}, avg_sum = 0, avg_n = 0;
	unsigned want = info_sections(kr->argc, kr->argv), secs = 0;
	struct kv_cmdstat *cs = (want & SEC_CMDSTATS) ? calloc(KV_CMDSTAT_MAX, sizeof(*cs)) : NULL;
	int64_t now = kv_now_ms();
	struct rbuf b;
	char h1[32], h2[32];
	uint32_t i;
	int k;

	for (i = 0; i < nparts; i++) {
		const char *p = parts[i].out.p, *end = p + parts[i].out.len;

		if (parts[i].out.len == 0 || p[0] != '*')
			continue;
		p = memchr(p, '\n', (size_t)(end - p));
		for (k = 0; k < (int)INFO_FIGURES && p != NULL && p + 1 < end; k++) {
			long long v = strtoll(p + 2, NULL, 10);

			t[k] += v;
			if (k == 2 && v > 0) {
				avg_sum += v;
				avg_n++;
			}
			p = memchr(p + 1, '\n', (size_t)(end - p - 1));
		}
		/* then commandstats: slot, calls, ns, rejected, failed */
		while (cs != NULL && p != NULL && p + 1 < end) {
			long long v[5];

			for (k = 0; k < 5 && p != NULL && p + 1 < end; k++) {
				v[k] = strtoll(p + 2, NULL, 10);
				p = memchr(p + 1, '\n', (size_t)(end - p - 1));
			}
			if (k < 5 || v[0] <= 0 || v[0] >= (long long)KV_CMDSTAT_MAX)
				break;
			cs[v[0]].calls += (uint64_t)v[1];
			cs[v[0]].ns += (uint64_t)v[2];
			cs[v[0]].rejected += (uint64_t)v[3];
			cs[v[0]].failed += (uint64_t)v[4];
		}
	}
	rb_init(&b, NULL, 0);
#define SECTION(name)                                                   \
	do {                                                            \
		if (secs++)                                             \
			rb_raw(&b, "\r\n", 2);                          \
		rb_raw(&b, "# " name "\r\n", strlen("# " name "\r\n")); \
	} while (0)
#define LINE(...)                                               \
	do {                                                    \
		char l_[256];                                   \
		int n_ = snprintf(l_, sizeof(l_), __VA_ARGS__); \
		rb_raw(&b, l_, (size_t)n_);                     \
		rb_raw(&b, "\r\n", 2);                          \
	} while (0)
	if (want & SEC_SERVER) {
		uint64_t up = (uint64_t)(now - (int64_t)kv.start_ms) / 1000;

		SECTION("Server");
		LINE("redis_version:%s", KV_VERSION);
		LINE("redis_mode:standalone");
		LINE("server_name:cr-kv");
		LINE("os:Linux");
		LINE("arch_bits:%d", (int)sizeof(void *) * 8);
		LINE("multiplexing_api:%s", cr_reactor_driver());
		LINE("process_id:%ld", (long)getpid());
		LINE("tcp_port:%u", kv.port);
		LINE("server_time_usec:%lld", (long long)now * 1000);
		LINE("uptime_in_seconds:%llu", (unsigned long long)up);
		LINE("uptime_in_days:%llu", (unsigned long long)up / 86400);
		LINE("hz:10");
		LINE("lcores:%u", kv.nshards);
	}
	if (want & SEC_CLIENTS) {
		SECTION("Clients");
		LINE("connected_clients:%llu",
		     (unsigned long long)atomic_load_explicit(&kv.nclients, memory_order_relaxed));
		LINE("maxclients:%llu", kv.maxclients);
		LINE("client_recent_max_input_buffer:%llu",
		     (unsigned long long)kv_recent_max_input());
		LINE("client_recent_max_output_buffer:%llu",
		     (unsigned long long)kv_recent_max_output());
		LINE("blocked_clients:%llu", (unsigned long long)atomic_load_explicit(
						 &kv.blocked_clients, memory_order_relaxed));
	}
	if (want & SEC_MEMORY) {
		uint64_t rss = kv_rss(), peak = kv_mem_peak((uint64_t)(t[3] > 0 ? t[3] : 0));

		SECTION("Memory");
		human(h1, sizeof(h1), (double)t[3]);
		human(h2, sizeof(h2), (double)kv_maxmemory());
		LINE("used_memory:%lld", t[3]);
		LINE("used_memory_human:%s", h1);
		human(h1, sizeof(h1), (double)rss);
		LINE("used_memory_rss:%llu", (unsigned long long)rss);
		LINE("used_memory_rss_human:%s", h1);
		human(h1, sizeof(h1), (double)peak);
		LINE("used_memory_peak:%llu", (unsigned long long)peak);
		LINE("used_memory_peak_human:%s", h1);
		LINE("mem_fragmentation_ratio:%.2f", t[3] > 0 ? (double)rss / (double)t[3] : 0.0);
		LINE("mem_allocator:libc");
		LINE("maxmemory:%llu", kv_maxmemory());
		LINE("maxmemory_human:%s", h2);
		LINE("maxmemory_policy:%s", kv_policy_name(kv_policy()));
		LINE("mem_clients_slaves:0");
		LINE("mem_clients_normal:%llu", (unsigned long long)atomic_load_explicit(
						    &kv.clients_mem, memory_order_relaxed));
		LINE("lazyfree_pending_objects:%lld", t[9]);
	}
	if (want & SEC_PERSISTENCE) {
		SECTION("Persistence");
		kv_info_persistence(&b); /* info_more.c */
	}
	if (want & SEC_STATS) {
		SECTION("Stats");
		LINE("total_connections_received:%llu", (unsigned long long)atomic_load_explicit(
							    &kv.conns_total, memory_order_relaxed));
		LINE("total_commands_processed:%llu",
		     (unsigned long long)counter_total(kv.tel_cmds));
		LINE("rejected_connections:%llu",
		     (unsigned long long)atomic_load_explicit(&kv.rejected, memory_order_relaxed));
		LINE("expired_keys:%lld", t[6]);
		LINE("evicted_keys:%llu", (unsigned long long)kv_evicted_keys());
		LINE("evicted_clients:%llu", (unsigned long long)atomic_load_explicit(
						 &kv.evicted_clients, memory_order_relaxed));
		LINE("keyspace_hits:%lld", t[4]);
		LINE("keyspace_misses:%lld", t[5]);
		LINE("total_error_replies:%lld", t[INFO_FIGURES_BASE + KV_ERRSTAT_KINDS]);
		LINE("client_query_buffer_limit_disconnections:%llu",
		     (unsigned long long)atomic_load_explicit(&kv.qbuf_closed,
							      memory_order_relaxed));
		LINE("client_output_buffer_limit_disconnections:%llu",
		     (unsigned long long)atomic_load_explicit(&kv.obuf_closed,
							      memory_order_relaxed));
		LINE("protocol_errors:%llu", (unsigned long long)atomic_load_explicit(
						 &kv.proto_errors, memory_order_relaxed));
		LINE("cross_lcore_requests:%llu", (unsigned long long)counter_total(kv.tel_remote));
		LINE("cross_shard_locks_granted:%lld", t[7]);
		LINE("commands_waited_for_locks:%lld", t[8]);
	}
	if (want & SEC_REPLICATION) {
		SECTION("Replication");
		kv_info_replication(&b);
	}
	if (want & SEC_CPU) {
		SECTION("CPU");
		kv_info_cpu(&b);
	}
	if (want & SEC_MODULES)
		SECTION("Modules");
	if (want & SEC_CMDSTATS) {
		SECTION("Commandstats");
		for (k = 1; cs != NULL && k < (int)KV_CMDSTAT_MAX; k++) {
			const struct kv_cmd *c = kv_cmd_by_stat((unsigned)k);
			unsigned long long us = cs[k].ns / 1000;

			if (c == NULL || (cs[k].calls == 0 && cs[k].rejected == 0 && cs[k].failed == 0))
				continue;
			LINE("cmdstat_%s:calls=%llu,usec=%llu,usec_per_call=%.2f,rejected_calls=%llu,"
			     "failed_calls=%llu",
			     c->name, (unsigned long long)cs[k].calls, us,
			     cs[k].calls ? (double)us / (double)cs[k].calls : 0.0,
			     (unsigned long long)cs[k].rejected, (unsigned long long)cs[k].failed);
		}
	}
	if (want & SEC_ERRORSTATS) {
		SECTION("Errorstats");
		kv_info_errorstats(&b, &t[INFO_FIGURES_BASE]);
	}
	if (want & SEC_CLUSTER) {
		SECTION("Cluster");
		kv_info_cluster(&b);
	}
	if (want & SEC_KEYSPACE) {
		SECTION("Keyspace");
		if (t[0] > 0)
			LINE("db0:keys=%lld,expires=%lld,avg_ttl=%lld", t[0], t[1],
			     avg_n ? avg_sum / avg_n : 0);
	}
	free(cs);
#undef SECTION
#undef LINE
	rb_bulk(out, b.p != NULL ? b.p : "", b.len);
	rb_fini(&b);
}
