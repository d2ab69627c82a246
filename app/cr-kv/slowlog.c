/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * SLOWLOG GET / LEN / RESET / HELP and the command-time histogram (slowlog.h). What each
 * lcore logs stays in its own list; the commands run on every shard and their answers
 * are merged here, on the client's lcore.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cr_telemetry.h"
#include "kv.h"

/* Redis's SLOWLOG_ENTRY_MAX_ARGC and SLOWLOG_ENTRY_MAX_STRING. */
#define MAX_ARGC   32u
#define MAX_STRING 128u

_Atomic long long kv_slowlog_slower_than = 10000;
_Atomic long long kv_slowlog_max_len = 128;
/* Ids of every lcore's entries: one counter, so they are unique process-wide. */
static _Atomic uint64_t next_id;
/*
 * Entries with a lower id are gone, as from Redis's one list: Redis trims its list to
 * slowlog-max-len after every command, so what it keeps is the entries made since the
 * highest (next id - max-len) it has seen. Raised when an entry is made, when max-len is
 * set and by RESET (to the next id); each lcore drops what is under it, and the lcores'
 * entries together are then at most max-len.
 */
static _Atomic uint64_t floor_id;
static int hist_cmd = -1;

struct kv_slowentry {
	struct kv_slowentry *newer, *older;
	uint64_t id, duration_us;
	int64_t time_us; /* the wall clock when logged: the order across lcores */
	uint32_t argc;
	const char *peer, *name;
	struct kv_arg argv[];
};

static long long
max_len(void)
{
	/* relaxed: pairs with the relaxed store of CONFIG SET; a value read per use */
	return atomic_load_explicit(&kv_slowlog_max_len, memory_order_relaxed);
}

static uint64_t
floor_now(void)
{
	/* relaxed: the entries it hides are this lcore's own; nothing else is ordered */
	return atomic_load_explicit(&floor_id, memory_order_relaxed);
}

static void
raise_floor(uint64_t to)
{
	uint64_t cur = floor_now();

	while (cur < to && !atomic_compare_exchange_weak_explicit(
			       &floor_id, &cur, to, memory_order_relaxed, memory_order_relaxed))
		;
}

/* What Redis's trim after a command leaves: the newest max-len ids. */
static void
floor_for_len(void)
{
	uint64_t next = atomic_load_explicit(&next_id, memory_order_relaxed);
	long long max = max_len();

	if (next > (uint64_t)max)
		raise_floor(next - (uint64_t)max);
}

void
kv_slowlog_set_max_len(long long n)
{
	/* relaxed: read per use by every lcore */
	atomic_store_explicit(&kv_slowlog_max_len, n, memory_order_relaxed);
	floor_for_len();
}

static void
drop_oldest(struct kv_slowlog *l)
{
	struct kv_slowentry *e = l->oldest;

	l->oldest = e->newer;
	if (l->oldest != NULL)
		l->oldest->older = NULL;
	else
		l->newest = NULL;
	l->n--;
	free(e);
}

/* Drop what Redis's trim would have (this lcore's entries are in id order). */
static void
trim(struct kv_slowlog *l)
{
	uint64_t fl = floor_now();
	long long max = max_len();

	while (l->n > 0 && (l->oldest->id < fl || (long long)l->n > max))
		drop_oldest(l);
}

void
kv_slowlog_fini(struct kv_slowlog *l)
{
	while (l->n > 0)
		drop_oldest(l);
}

#define REDACTED "(redacted)"

/* HELLO's AUTH username and password, which Redis logs as "(redacted)": a bit per
 * argument (from its own parse: an argument after an error is logged as sent). */
static uint64_t
redacted(const struct kv_cmd *cmd, uint32_t argc, const struct kv_arg *argv)
{
	uint64_t mask = 0;
	uint32_t j;

	if (cmd->fn == cmd_auth)
		return argc >= 64 ? ~1ull : ((1ull << argc) - 1) & ~1ull; /* every argument */
	if (cmd->fn != cmd_hello)
		return 0;
	for (j = 2; j < argc && j + 2 < 64; j++) {
		uint32_t more = argc - 1 - j;

		if (strcasecmp(argv[j].p, "AUTH") == 0 && more >= 2) {
			mask |= 3ull << (j + 1);
			j += 2;
		} else if (strcasecmp(argv[j].p, "SETNAME") == 0 && more >= 1) {
			j++;
		} else {
			break;
		}
	}
	return mask;
}

/* Argument @p j of @p argc as Redis logs it, into @p d (NULL: measure only); its length. */
static size_t
arg_text(const struct kv_arg *argv, uint32_t argc, uint32_t slargc, uint32_t j, uint64_t red,
	 char *d)
{
	char tail[48];
	size_t n;

	if (j < 64 && (red >> j & 1)) {
		if (d != NULL)
			memcpy(d, REDACTED, sizeof(REDACTED) - 1);
		return sizeof(REDACTED) - 1;
	}
	if (slargc != argc && j == slargc - 1) {
		n = (size_t)snprintf(tail, sizeof(tail), "... (%u more arguments)",
				     argc - slargc + 1);
		if (d != NULL)
			memcpy(d, tail, n);
		return n;
	}
	if (argv[j].len <= MAX_STRING) {
		if (d != NULL)
			memcpy(d, argv[j].p, argv[j].len);
		return argv[j].len;
	}
	n = (size_t)snprintf(tail, sizeof(tail), "... (%zu more bytes)", argv[j].len - MAX_STRING);
	if (d != NULL) {
		memcpy(d, argv[j].p, MAX_STRING);
		memcpy(d + MAX_STRING, tail, n);
	}
	return MAX_STRING + n;
}

static char *
put_str(char *d, const char *s, size_t n, const char **at)
{
	memcpy(d, s, n);
	d[n] = '\0';
	*at = d;
	return d + n + 1;
}

static void
push(struct kv_shard *sh, struct kconn *kc, const struct kv_cmd *cmd, uint32_t argc,
     const struct kv_arg *argv, uint64_t us)
{
	struct kv_slowlog *l = &sh->slowlog;
	uint32_t slargc = argc < MAX_ARGC ? argc : MAX_ARGC, j;
	char peer[CR_NET_ADDR_STRLEN] = "";
	const char *name = kc->name != NULL ? kc->name : "";
	struct kv_slowentry *e;
	struct cr_net_addr a;
	struct timespec ts;
	uint64_t red = redacted(cmd, argc, argv);
	size_t size, pl, nl;
	char *d;

	if (max_len() == 0) {
		/* Redis makes the entry (taking an id) and trims it at once */
		atomic_fetch_add_explicit(&next_id, 1, memory_order_relaxed);
		floor_for_len();
		return;
	}
	if (kc->conn != NULL && cr_conn_peer(kc->conn, &a) == 0)
		cr_net_addr_format(&a, peer, sizeof(peer));
	pl = strlen(peer);
	nl = strlen(name);
	size = sizeof(*e) + slargc * sizeof(struct kv_arg) + pl + 1 + nl + 1;
	for (j = 0; j < slargc; j++)
		size += arg_text(argv, argc, slargc, j, red, NULL) + 1;
	e = malloc(size);
	if (e == NULL)
		return; /* not logged: the command itself went through */
	clock_gettime(CLOCK_REALTIME, &ts);
	e->id = atomic_fetch_add_explicit(&next_id, 1, memory_order_relaxed); /* unique only */
	e->time_us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
	e->duration_us = us;
	e->argc = slargc;
	d = (char *)(e->argv + slargc);
	for (j = 0; j < slargc; j++) {
		size_t n = arg_text(argv, argc, slargc, j, red, d);

		d[n] = '\0';
		e->argv[j].p = d;
		e->argv[j].len = n;
		d += n + 1;
	}
	d = put_str(d, peer, pl, &e->peer);
	(void)put_str(d, name, nl, &e->name);
	e->older = l->newest;
	e->newer = NULL;
	if (l->newest != NULL)
		l->newest->newer = e;
	else
		l->oldest = e;
	l->newest = e;
	l->n++;
	floor_for_len();
	trim(l);
}

void
kv_cmd_ran(struct kconn *kc, const struct kv_cmd *cmd, uint32_t argc, const struct kv_arg *argv,
	   uint64_t ns, bool failed)
{
	/* relaxed: pairs with the relaxed store of CONFIG SET */
	long long thr = atomic_load_explicit(&kv_slowlog_slower_than, memory_order_relaxed);
	struct kv_cmdstat *st = &kc->sh->cstat[cmd->stat];

	st->calls++;
	st->ns += ns;
	st->failed += failed;
	cr_telemetry_observe_ns(hist_cmd, ns);
	if (thr >= 0 && ns / 1000 >= (unsigned long long)thr && cmd->fn != cmd_exec)
		push(kc->sh, kc, cmd, argc, argv, ns / 1000);
}

int
kv_slowlog_register(void)
{
	hist_cmd = cr_telemetry_histogram_register(
	    "kv_command_duration_seconds",
	    "Time a command ran on its shard(s): the sum of its parts' run times (what SLOWLOG "
	    "logs)",
	    NULL, 0);
	return hist_cmd < 0 ? hist_cmd : 0;
}

/* ---- the commands: on every shard ---- */

/* SLOWLOG GET's count (checked by precheck_slowlog_get()): -1 is every entry. */
static long long
get_count(const struct kv_ctx *x)
{
	long long count = 10;

	if (x->argc == 3)
		resp_string2ll(x->argv[2].p, x->argv[2].len, &count);
	return count < 0 ? LLONG_MAX : count;
}

/* This lcore's newest entries: as Redis's, but with the time in microseconds, which the
 * merge orders by (and turns into seconds). */
KV_CMD(slowlog_get)
{
	struct kv_slowlog *l = &x->sh->slowlog;
	long long want = get_count(x), n = 0;
	struct kv_slowentry *e;
	uint32_t j;

	if (x->sh != kv_here()) {
		/* A moved shard's part: the log is its home lcore's, not here (shardmove.c) */
		rb_array(x->out, 0);
		return;
	}
	trim(l);
	for (e = l->newest; e != NULL && n < want; e = e->older)
		n++;
	rb_array(x->out, n);
	for (e = l->newest; n-- > 0; e = e->older) {
		rb_array(x->out, 6);
		rb_int(x->out, (long long)e->id);
		rb_int(x->out, e->time_us);
		rb_int(x->out, (long long)e->duration_us);
		rb_array(x->out, e->argc);
		for (j = 0; j < e->argc; j++)
			rb_bulk(x->out, e->argv[j].p, e->argv[j].len);
		rb_bulkstr(x->out, e->peer);
		rb_bulkstr(x->out, e->name);
	}
}

KV_CMD(slowlog_len)
{
	if (x->sh != kv_here()) {
		rb_int(x->out, 0); /* as SLOWLOG GET's */
		return;
	}
	trim(&x->sh->slowlog);
	rb_int(x->out, (long long)x->sh->slowlog.n);
}

KV_CMD(slowlog_reset)
{
	/* Every entry made so far is gone, an offline lcore's too */
	raise_floor(atomic_load_explicit(&next_id, memory_order_relaxed));
	if (x->sh == kv_here())
		kv_slowlog_fini(&x->sh->slowlog);
	rb_ok(x->out);
}

/* On the client's lcore, before the parts go: Redis's checks, with its error texts. */
bool
precheck_slowlog_get(struct kv_ctx *x)
{
	long long count;

	if (x->argc > 3) {
		rb_errorf(x->out,
			  "ERR unknown subcommand or wrong number of arguments for '%.128s'. Try "
			  "SLOWLOG HELP.",
			  x->argv[1].p);
		return false;
	}
	return x->argc < 3 ||
	       kv_arg_ll_range(x, &x->argv[2], -1, LLONG_MAX,
			       "ERR count should be greater than or equal to -1", &count);
}

KV_CMD(slowlog_help)
{
	static const char *const l[] = {
	    "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	    "GET [<count>]",
	    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
	    "    Entries are made of:",
	    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
	    "    client name",
	    "LEN",
	    "    Return the length of the slowlog.",
	    "RESET",
	    "    Reset the slowlog.",
	    "HELP",
	    "    Prints this help.",
	    NULL};

	kv_reply_help(x, l);
}

/* ---- the merge: on the client's lcore ---- */

struct seen {
	int64_t time_us;
	long long id;
	const char *rest, *end; /* its duration, arguments, peer and name, as sent */
};

static int
newest_first(const void *a, const void *b)
{
	const struct seen *x = a, *y = b;

	if (x->time_us != y->time_us)
		return x->time_us > y->time_us ? -1 : 1;
	return x->id > y->id ? -1 : x->id < y->id;
}

/* Skip one entry's tail (duration, arguments, peer, name); false if malformed. */
static bool
skip_rest(struct rd *r)
{
	const char *s;
	size_t len;
	long long n;

	(void)rd_int(r); /* the duration */
	n = rd_array(r);
	if (n < 0)
		return false;
	while (n-- > 0)
		if (!rd_bulk(r, &s, &len))
			return false;
	return rd_bulk(r, &s, &len) && rd_bulk(r, &s, &len);
}

/* Every shard's entries in one list, newest first, at most the count. */
static void
merge_get(struct kreq *kr, struct kpart *parts, uint32_t nparts, struct rbuf *out)
{
	struct kv_ctx x = {.argc = kr->argc, .argv = kr->argv};
	long long want = get_count(&x), total = 0, n, i;
	struct seen *all;
	struct rd r;
	uint32_t k;

	for (k = 0; k < nparts; k++) {
		rd_init(&r, &parts[k].out);
		if (!rd_error(&parts[k].out) && (n = rd_array(&r)) > 0)
			total += n;
	}
	all = malloc(sizeof(*all) * (size_t)(total > 0 ? total : 1));
	if (all == NULL) {
		rb_error(out, kv_err_oom);
		return;
	}
	for (n = 0, k = 0; k < nparts; k++) {
		long long m;

		if (rd_error(&parts[k].out))
			continue; /* an lcore offline: its entries cannot be read */
		rd_init(&r, &parts[k].out);
		for (m = rd_array(&r); m > 0 && n < total; m--, n++) {
			rd_array(&r);
			all[n].id = rd_int(&r);
			all[n].time_us = rd_int(&r);
			all[n].rest = r.p;
			if (!skip_rest(&r))
				break;
			all[n].end = r.p;
		}
	}
	qsort(all, (size_t)n, sizeof(*all), newest_first);
	if (n > want)
		n = want;
	rb_array(out, n);
	for (i = 0; i < n; i++) {
		rb_array(out, 6);
		rb_int(out, all[i].id);
		rb_int(out, all[i].time_us / 1000000);
		rb_raw(out, all[i].rest, (size_t)(all[i].end - all[i].rest));
	}
	free(all);
}

void
kv_slowlog_merge(struct kreq *kr, struct kpart *parts, uint32_t nparts, struct rbuf *out)
{
	long long sum = 0;
	uint32_t k;

	if (kr->cmd->fn == cmd_slowlog_get) {
		merge_get(kr, parts, nparts, out);
		return;
	}
	if (kr->cmd->fn == cmd_slowlog_reset) {
		rb_ok(out);
		return;
	}
	for (k = 0; k < nparts; k++)
		if (!rd_error(&parts[k].out) && parts[k].out.len > 1)
			sum += strtoll(parts[k].out.p + 1, NULL, 10);
	rb_int(out, sum);
}
