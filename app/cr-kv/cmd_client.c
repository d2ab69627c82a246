/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CLIENT LIST, KILL, INFO, NO-EVICT, REPLY, HELP and RESET, as Redis 7.0 answers them.
 *
 * Clients live on the lcore that accepted them and only that lcore touches them (rule
 * 1). CLIENT LIST and CLIENT KILL are requests with a part on every shard, sent through
 * the parts machinery as INFO's are: each part lists (or kills) its own lcore's clients,
 * and the request's lcore merges the answers (lines sorted by id, as Redis lists its
 * clients in the order they connected; kill counts added up). The asking client's id
 * travels as an extra last argument, so a part knows which client is the asker (SKIPME).
 * A client killed on another lcore is closed by that lcore at once; the asker killing
 * itself gets its reply first, then is closed (Redis's CLIENT_CLOSE_AFTER_REPLY).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include "kv.h"

/* ---- one client's line ---- */

/* "ip:port" as Redis writes it ("[::1]:port" for IPv6); "" if unknown. */
static void
fmt_addr(const struct cr_net_addr *a, char *b, size_t n)
{
	char ip[CR_NET_ADDR_STRLEN];

	b[0] = '\0';
	if (a->len == 0)
		return;
	if (a->u.sa.sa_family == AF_INET6) {
		if (inet_ntop(AF_INET6, &a->u.in6.sin6_addr, ip, sizeof(ip)) != NULL)
			snprintf(b, n, "[%s]:%u", ip, cr_net_addr_port(a));
	} else if (a->u.sa.sa_family == AF_INET) {
		if (inet_ntop(AF_INET, &a->u.in4.sin_addr, ip, sizeof(ip)) != NULL)
			snprintf(b, n, "%s:%u", ip, cr_net_addr_port(a));
	}
}

static void
peer_addr(const struct kconn *kc, char *b, size_t n)
{
	struct cr_net_addr a = {0};

	b[0] = '\0';
	if (kc->conn != NULL && cr_conn_peer(kc->conn, &a) == 0)
		fmt_addr(&a, b, n);
}

static void
local_addr(const struct kconn *kc, char *b, size_t n)
{
	struct cr_net_addr a = {0};

	b[0] = '\0';
	if (kc->conn == NULL)
		return;
	a.len = sizeof(a.u);
	if (getsockname(cr_conn_fd(kc->conn), &a.u.sa, &a.len) != 0)
		a.len = 0;
	fmt_addr(&a, b, n);
}

/* Redis's client types: normal, pubsub (subscribed); no replicas or masters here. */
enum { CT_NORMAL, CT_PUBSUB, CT_REPLICA, CT_MASTER };

static int
client_type(const struct kconn *kc)
{
	return kv_ps_subscribed(kc) ? CT_PUBSUB : CT_NORMAL;
}

static int
type_by_name(const char *s)
{
	if (strcasecmp(s, "normal") == 0)
		return CT_NORMAL;
	if (strcasecmp(s, "slave") == 0 || strcasecmp(s, "replica") == 0)
		return CT_REPLICA;
	if (strcasecmp(s, "pubsub") == 0)
		return CT_PUBSUB;
	if (strcasecmp(s, "master") == 0)
		return CT_MASTER;
	return -1;
}

/* Redis 7.0's catClientInfoString(), and the client's lcore (cr-kv's own last field),
 * with what cr-kv has: no replies buffer of its own
 * (rbs, rbp 0: replies wait in lib/net's queue, then in the client's output blocks,
 * oll and omem), no argv kept between commands (argv-mem 0). */
static void
client_line(struct rbuf *o, const struct kconn *kc, int64_t now)
{
	char addr[CR_NET_ADDR_STRLEN + 8], laddr[CR_NET_ADDR_STRLEN + 8], flags[16], cmd[64];
	size_t nchan = 0, npat = 0, f = 0;
	long long multi = kv_multi_count(kc);
	char b[1024];
	int n;

	peer_addr(kc, addr, sizeof(addr));
	local_addr(kc, laddr, sizeof(laddr));
	kv_ps_counts(kc, &nchan, &npat);
	if (nchan + npat > 0)
		flags[f++] = 'P';
	if (multi >= 0)
		flags[f++] = 'x';
	if (kc->bpop != NULL)
		flags[f++] = 'b';
	if (kc->close_after)
		flags[f++] = 'c';
	if (kc->no_evict)
		flags[f++] = 'e';
	if (f == 0)
		flags[f++] = 'N';
	flags[f] = '\0';
	snprintf(cmd, sizeof(cmd), "%s", kc->last_cmd != NULL ? kc->last_cmd->name : "NULL");
	n = snprintf(
	    b, sizeof(b),
	    "id=%llu addr=%s laddr=%s fd=%d name=%s age=%lld idle=%lld flags=%s db=0 "
	    "sub=%zu psub=%zu ssub=0 multi=%lld qbuf=%zu qbuf-free=%zu argv-mem=0 "
	    "multi-mem=0 rbs=0 rbp=0 obl=0 oll=%zu omem=%zu tot-mem=%zu events=r%s "
	    "cmd=%s user=default redir=-1 resp=%u lcore=%u\n",
	    (unsigned long long)kc->id, addr, laddr, kc->conn != NULL ? cr_conn_fd(kc->conn) : -1,
	    kc->name != NULL ? kc->name : "", (long long)(now - kc->created_ms) / 1000,
	    (long long)(now - kc->last_ms) / 1000, flags, nchan, npat, multi, kc->qlen - kc->qpos,
	    kc->qcap - kc->qlen, kc->oq_head != NULL ? (size_t)1 : 0, kc->oq_alloc, kc->mem,
	    kc->oq_head != NULL ? "w" : "", cmd, kc->resp, kc->sh->lcore);
	if (n > 0)
		rb_raw(o, b, (size_t)n < sizeof(b) ? (size_t)n : sizeof(b) - 1);
}

KV_CMD(client_info)
{
	struct rbuf b;
	char inl[512];

	rb_init(&b, inl, sizeof(inl));
	client_line(&b, x->kc, kv_now_ms());
	rb_bulk(x->out, b.p, b.len); /* verbatim in RESP3 (resp3.c) */
	rb_fini(&b);
}

/* ---- CLIENT LIST and CLIENT KILL over every lcore ---- */

/* The asker's id: the last argument of a part (added by fanout()). */
static uint64_t
asker(const struct kv_ctx *x)
{
	return strtoull(x->argv[x->argc - 1].p, NULL, 10);
}

/* Does @p kc match CLIENT KILL's filters at argv[2 .. argc-2]? (Checked before.) */
struct kill_filter {
	const char *addr, *laddr;
	int type;
	unsigned long long id;
	bool skipme, old;
};

static void
kill_parse(const struct kv_ctx *x, struct kill_filter *f)
{
	uint32_t i, argc = x->argc - 1;

	memset(f, 0, sizeof(*f));
	f->type = -1;
	f->skipme = true;
	if (argc == 3) {
		f->addr = x->argv[2].p;
		f->skipme = false; /* the old form may kill itself */
		f->old = true;
		return;
	}
	for (i = 2; i + 1 < argc; i += 2) {
		const char *o = x->argv[i].p, *v = x->argv[i + 1].p;

		if (strcasecmp(o, "id") == 0)
			f->id = strtoull(v, NULL, 10);
		else if (strcasecmp(o, "type") == 0)
			f->type = type_by_name(v);
		else if (strcasecmp(o, "addr") == 0)
			f->addr = v;
		else if (strcasecmp(o, "laddr") == 0)
			f->laddr = v;
		else if (strcasecmp(o, "skipme") == 0)
			f->skipme = strcasecmp(v, "yes") == 0;
		/* USER: only "default" passed the check, and every client is it */
	}
}

static bool
kill_match(const struct kill_filter *f, const struct kconn *kc, uint64_t me)
{
	char b[CR_NET_ADDR_STRLEN + 8];

	if (kc->conn == NULL)
		return false;
	if (f->addr != NULL) {
		peer_addr(kc, b, sizeof(b));
		if (strcmp(b, f->addr) != 0)
			return false;
	}
	if (f->laddr != NULL) {
		local_addr(kc, b, sizeof(b));
		if (strcmp(b, f->laddr) != 0)
			return false;
	}
	if (f->type != -1 && client_type(kc) != f->type)
		return false;
	if (f->id != 0 && kc->id != f->id)
		return false;
	if (kc->id == me && f->skipme)
		return false;
	return true;
}

/* On every shard: kill this lcore's matching clients; answers how many. */
static void
kill_part(struct kv_ctx *x)
{
	struct kill_filter f;
	uint64_t me = asker(x);
	struct kconn *kc, *next;
	long long n = 0;

	kill_parse(x, &f);
	for (kc = x->sh->conns; kc != NULL; kc = next) {
		next = kc->next;
		if (!kill_match(&f, kc, me))
			continue;
		n++;
		if (kc->id == me)
			kc->close_after = true; /* its reply first, then it goes */
		else
			kc_abort(kc);
	}
	rb_int(x->out, n);
}

/* On every shard: this lcore's clients' lines (TYPE t, or ID ...). */
static void
list_part(struct kv_ctx *x)
{
	uint32_t argc = x->argc - 1, j;
	int64_t now = kv_now_ms();
	int type = -1;
	struct kconn *kc;

	if (argc == 4 && strcasecmp(x->argv[2].p, "type") == 0)
		type = type_by_name(x->argv[3].p);
	for (kc = x->sh->conns; kc != NULL; kc = kc->next) {
		if (kc->conn == NULL || (type != -1 && client_type(kc) != type))
			continue;
		if (argc > 3 && strcasecmp(x->argv[2].p, "id") == 0) {
			for (j = 3; j < argc; j++)
				if (strtoull(x->argv[j].p, NULL, 10) == kc->id)
					break;
			if (j == argc)
				continue;
		}
		client_line(x->out, kc, now);
	}
}

static unsigned long long
line_id(const char *p)
{
	return strtoull(p + 3, NULL, 10); /* "id=" */
}

struct line {
	const char *p;
	size_t n;
	unsigned long long id;
};

static int
line_cmp(const void *a, const void *b)
{
	const struct line *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/* Back on the asker's lcore: every lcore's lines, by id (CLIENT LIST ID: in the order
 * asked, as Redis looks each up). */
static void
list_done(struct kreq *kr)
{
	struct line *l = NULL;
	size_t nl = 0, cap = 0, i;
	struct rbuf all;
	uint32_t j, argc = kr->argc;
	bool by_id = argc > 3 && strcasecmp(kr->argv[2].p, "id") == 0;

	rb_init(&all, NULL, 0);
	for (j = 0; j < kr->nparts; j++) {
		const char *p = kr->parts[j].out.p, *end = p + kr->parts[j].out.len;

		while (p < end) {
			const char *nlp = memchr(p, '\n', (size_t)(end - p));
			size_t n = nlp != NULL ? (size_t)(nlp + 1 - p) : (size_t)(end - p);

			if (nl == cap) {
				struct line *m =
				    realloc(l, (cap = cap ? cap * 2 : 64) * sizeof(*l));

				if (m == NULL)
					goto oom;
				l = m;
			}
			l[nl].p = p;
			l[nl].n = n;
			l[nl].id = line_id(p);
			nl++;
			p += n;
		}
	}
	if (nl > 1)
		qsort(l, nl, sizeof(*l), line_cmp);
	if (by_id) {
		for (j = 3; j < argc; j++) {
			unsigned long long id = strtoull(kr->argv[j].p, NULL, 10);

			for (i = 0; i < nl; i++)
				if (l[i].id == id)
					rb_raw(&all, l[i].p, l[i].n);
		}
	} else {
		for (i = 0; i < nl; i++)
			rb_raw(&all, l[i].p, l[i].n);
	}
	free(l);
	/* In EXEC: RESP2 here, EXEC's array translates it (resp3.c) */
	kv_reply_verbatim(&kr->reply, kr->on_done == NULL && kr->kc->resp == 3,
			  all.p != NULL ? all.p : "", all.len);
	rb_fini(&all);
	kr->final = &kr->reply;
	kreq_finish(kr);
	return;
oom:
	free(l);
	rb_fini(&all);
	rb_error(&kr->reply, kv_err_oom);
	kr->final = &kr->reply;
	kreq_finish(kr);
}

static void
kill_done(struct kreq *kr)
{
	long long n = 0;
	uint32_t j;

	for (j = 0; j < kr->nparts; j++)
		if (kr->parts[j].out.len > 1 && kr->parts[j].out.p[0] == ':')
			n += strtoll(kr->parts[j].out.p + 1, NULL, 10);
	if (kr->argc == 3) { /* the old form */
		if (n == 0)
			rb_error(&kr->reply, "ERR No such client");
		else
			rb_ok(&kr->reply);
	} else {
		rb_int(&kr->reply, n);
	}
	kr->final = &kr->reply;
	kreq_finish(kr);
}

/* @p fn run on every shard, with the command's arguments and the asker's id after them,
 * merged by @p done: a request on the asker's connection, or (in EXEC) EXEC's step. */
static void
fanout(struct kv_ctx *x, void (*fn)(struct kv_ctx *), kreq_cont_fn done)
{
	struct kconn *kc = x->kc;
	struct kreq *kr = x->req;
	struct kv_arg *argv;
	char *id;
	uint32_t i;

	if (kr == NULL) {
		kr = kreq_new(kc->sh, kc, NULL, x->argc, x->argv);
		if (kr == NULL) {
			rb_error(x->out, kv_err_oom);
			return;
		}
		kc_enqueue(kc, kr);
	}
	x->taken = true;
	kr->cont = done;
	argv = malloc(sizeof(*argv) * (kr->argc + 1) + 24);
	if (argv == NULL || kreq_set_parts(kr, kv.nshards) != 0) {
		free(argv);
		kr->nparts = 0;
		rb_error(&kr->reply, kv_err_oom);
		kr->final = &kr->reply;
		kreq_finish(kr);
		return;
	}
	kr->argpool = argv; /* freed with kr */
	memcpy(argv, kr->argv, sizeof(*argv) * kr->argc);
	id = (char *)(argv + kr->argc + 1);
	argv[kr->argc].p = id;
	argv[kr->argc].len = (size_t)snprintf(id, 24, "%llu", (unsigned long long)kc->id);
	for (i = 0; i < kv.nshards; i++) {
		kr->parts[i].shard = i;
		kr->parts[i].fn = fn;
		kreq_part_args(&kr->parts[i], kr->argc + 1, argv);
	}
	kreq_launch(kr);
}

KV_CMD(client_list)
{
	uint32_t j;

	if (x->argc == 4 && strcasecmp(x->argv[2].p, "type") == 0) {
		if (type_by_name(x->argv[3].p) == -1) {
			rb_errorf(x->out, "ERR Unknown client type '%s'", x->argv[3].p);
			return;
		}
	} else if (x->argc > 3 && strcasecmp(x->argv[2].p, "id") == 0) {
		for (j = 3; j < x->argc; j++) {
			long long id;

			if (!resp_string2ll(x->argv[j].p, x->argv[j].len, &id)) {
				rb_error(x->out, "ERR Invalid client ID");
				return;
			}
		}
	} else if (x->argc != 2) {
		rb_error(x->out, kv_err_syntax);
		return;
	}
	fanout(x, list_part, list_done);
}

KV_CMD(client_kill)
{
	uint32_t i;

	if (x->argc == 3) {
		fanout(x, kill_part, kill_done); /* the old form: CLIENT KILL addr:port */
		return;
	}
	for (i = 2; i < x->argc; i += 2) {
		const char *o = x->argv[i].p;

		if (i + 1 >= x->argc) {
			rb_error(x->out, kv_err_syntax);
			return;
		}
		if (strcasecmp(o, "id") == 0) {
			long long id;

			if (!resp_string2ll(x->argv[i + 1].p, x->argv[i + 1].len, &id) || id < 1) {
				rb_error(x->out, "ERR client-id should be greater than 0");
				return;
			}
		} else if (strcasecmp(o, "type") == 0) {
			if (type_by_name(x->argv[i + 1].p) == -1) {
				rb_errorf(x->out, "ERR Unknown client type '%s'", x->argv[i + 1].p);
				return;
			}
		} else if (strcasecmp(o, "user") == 0) {
			if (strcmp(x->argv[i + 1].p, "default") != 0) {
				rb_errorf(x->out, "ERR No such user '%s'", x->argv[i + 1].p);
				return;
			}
		} else if (strcasecmp(o, "skipme") == 0) {
			if (strcasecmp(x->argv[i + 1].p, "yes") != 0 &&
			    strcasecmp(x->argv[i + 1].p, "no") != 0) {
				rb_error(x->out, kv_err_syntax);
				return;
			}
		} else if (strcasecmp(o, "addr") != 0 && strcasecmp(o, "laddr") != 0) {
			rb_error(x->out, kv_err_syntax);
			return;
		}
	}
	fanout(x, kill_part, kill_done);
}

/* ---- the asker's own settings ---- */

KV_CMD(client_no_evict)
{
	if (strcasecmp(x->argv[2].p, "on") == 0) {
		x->kc->no_evict = true;
	} else if (strcasecmp(x->argv[2].p, "off") == 0) {
		x->kc->no_evict = false;
	} else {
		rb_error(x->out, kv_err_syntax);
		return;
	}
	rb_ok(x->out);
}

KV_CMD(client_reply)
{
	struct kconn *kc = x->kc;

	if (strcasecmp(x->argv[2].p, "on") == 0) {
		kc->reply_off = kc->reply_skip = kc->reply_skip_next = false;
		rb_ok(x->out);
	} else if (strcasecmp(x->argv[2].p, "off") == 0) {
		kc->reply_off = true; /* no reply, to this one either */
	} else if (strcasecmp(x->argv[2].p, "skip") == 0) {
		if (!kc->reply_off)
			kc->reply_skip_next = true;
	} else {
		rb_error(x->out, kv_err_syntax);
	}
}

KV_CMD(client_help)
{
	static const char *const l[] = {
	    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	    "GETNAME",
	    "    Return the name of the current connection.",
	    "ID",
	    "    Return the ID of the current connection.",
	    "INFO",
	    "    Return information about the current client connection.",
	    "KILL <ip:port>",
	    "    Kill connection made from <ip:port>.",
	    "KILL <option> <value> [<option> <value> [...]]",
	    "    Kill connections. Options are:",
	    "    * ADDR (<ip:port>|<unixsocket>:0)",
	    "      Kill connections made from the specified address",
	    "    * LADDR (<ip:port>|<unixsocket>:0)",
	    "      Kill connections made to specified local address",
	    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
	    "      Kill connections by type.",
	    "    * USER <username>",
	    "      Kill connections authenticated by <username>.",
	    "    * SKIPME (YES|NO)",
	    "      Skip killing current connection (default: yes).",
	    "LIST [options ...]",
	    "    Return information about client connections. Options:",
	    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
	    "      Return clients of specified type.",
	    "REPLY (ON|OFF|SKIP)",
	    "    Control the replies sent to the current connection.",
	    "SETNAME <name>",
	    "    Assign the name <name> to the current connection.",
	    "NO-EVICT (ON|OFF)",
	    "    Protect current client connection from eviction.",
	    "HELP",
	    "    Prints this help.",
	    NULL};

	kv_reply_help(x, l);
}

/* ---- RESET ---- */

/* Redis 7.0's clearClientConnectionState(): MULTI discarded and keys unwatched, every
 * channel and pattern unsubscribed (no messages), RESP2, no name, authenticated only if
 * no password is needed, CLIENT REPLY ON and NO-EVICT off; "+RESET". */
KV_CMD(reset)
{
	struct kconn *kc = x->kc;

	kv_multi_free(kc);
	kv_ps_gone(kc);
	kc->resp = 2;
	free(kc->name);
	kc->name = NULL;
	kc->authed = !kv_auth_required();
	kc->no_evict = false;
	kc->reply_off = false;
	kc->reply_skip_next = false;
	rb_status(x->out, "RESET");
}
