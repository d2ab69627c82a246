/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RESP3 replies (HELLO 3). Every command writes RESP2 (so do the shards' parts, the
 * merges, the transactions, and what scripts read); a client that chose RESP3 gets its
 * replies rewritten here, on its own lcore, as each becomes final: the reply of a command
 * run at once (dispatch.c), of a request (kreq_finish()), of each command an EXEC runs.
 * What changes is what Redis 7.0 writes with its RESP3 reply calls, by command:
 *
 *   every command     null bulk and null array: "_"
 *   maps "%"          HGETALL, CONFIG GET, COMMAND DOCS (and the docs inside), HELLO
 *   sets "~"          SMEMBERS, SINTER, SUNION, SDIFF, SPOP with a count, and the flag,
 *                     category, tip, key-spec and subcommand lists of COMMAND (INFO)
 *   doubles ","       ZSCORE, ZINCRBY, ZADD INCR, ZMSCORE's elements
 *   score pairs       WITHSCORES replies (ZRANGE..., ZUNION/ZINTER/ZDIFF, ZRANDMEMBER),
 *                     ZPOPMIN/ZPOPMAX with a count and ZMPOP/BZMPOP: [member, double]
 *                     each; ZPOPMIN/MAX without a count and BZPOPMIN/MAX: the score a
 *                     double in the flat reply; HRANDFIELD WITHVALUES: [field, value]
 *   verbatim "="      INFO, CLIENT LIST, CLIENT INFO ("txt:")
 *   push ">"          (P)SUBSCRIBE and (P)UNSUBSCRIBE confirmations (messages: pubsub.c)
 *
 * INCRBYFLOAT and HINCRBYFLOAT stay bulk strings, ZSCAN's scores too, as in Redis 7.0.
 * The cost is one copy of a RESP3 client's replies; RESP2 clients pay a test of
 * kconn.resp.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv.h"

enum shape {
	S_PLAIN = 0, /* nulls only */
	S_NONE,	     /* written in the client's protocol already (HELLO, EXEC's array) */
	S_TOPNULL,   /* EXEC: its elements are translated; "*-1" alone */
	S_MAP,
	S_SET,
	S_SPOP, /* a set with a count */
	S_DOUBLE,
	S_DOUBLES,
	S_WITHSCORES, /* pairs when WITHSCORES is among the options */
	S_ZPOP,	      /* flat without a count, pairs with */
	S_BZPOP,      /* key, member, score */
	S_ZMPOP,      /* key, pairs */
	S_HRAND,      /* pairs with WITHVALUES */
	S_VERBATIM,
	S_PUSH,
	S_DOCS,
	S_CMDINFO,
};

static const struct {
	const char *name;
	enum shape s;
} shapes[] = {
    {"hgetall", S_MAP},
    {"config|get", S_MAP},
    {"smembers", S_SET},
    {"sinter", S_SET},
    {"sunion", S_SET},
    {"sdiff", S_SET},
    {"spop", S_SPOP},
    {"zscore", S_DOUBLE},
    {"zincrby", S_DOUBLE},
    {"zadd", S_DOUBLE},
    {"zmscore", S_DOUBLES},
    {"zrange", S_WITHSCORES},
    {"zrevrange", S_WITHSCORES},
    {"zrangebyscore", S_WITHSCORES},
    {"zrevrangebyscore", S_WITHSCORES},
    {"zunion", S_WITHSCORES},
    {"zinter", S_WITHSCORES},
    {"zdiff", S_WITHSCORES},
    {"zrandmember", S_WITHSCORES},
    {"zpopmin", S_ZPOP},
    {"zpopmax", S_ZPOP},
    {"bzpopmin", S_BZPOP},
    {"bzpopmax", S_BZPOP},
    {"zmpop", S_ZMPOP},
    {"bzmpop", S_ZMPOP},
    {"hrandfield", S_HRAND},
    {"info", S_VERBATIM},
    {"client|list", S_VERBATIM},
    {"client|info", S_VERBATIM},
    {"subscribe", S_PUSH},
    {"psubscribe", S_PUSH},
    {"unsubscribe", S_PUSH},
    {"punsubscribe", S_PUSH},
    {"command|docs", S_DOCS},
    {"command|info", S_CMDINFO},
    {"command", S_CMDINFO},
    {"hello", S_NONE},
    {"reset", S_NONE},
    {"function|stats", S_NONE},
    {"exec", S_TOPNULL},
};

/* By command slot (kv_cmd.stat): filled once at load, read only after. */
static uint8_t shape_of[KV_CMDSTAT_MAX];

static void
shape_cmd(const struct kv_cmd *c)
{
	unsigned i;

	for (i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		if (strcmp(shapes[i].name, c->name) == 0 && c->stat < KV_CMDSTAT_MAX)
			shape_of[c->stat] = (uint8_t)shapes[i].s;
}

__attribute__((constructor)) static void
build_shapes(void)
{
	const struct kv_cmd *s;
	unsigned i;

	for (i = 0; i < kv_ncmds; i++) {
		shape_cmd(&kv_cmds[i]);
		for (s = kv_cmds[i].sub; s != NULL && s->name != NULL; s++)
			shape_cmd(s);
	}
}

/* ---- reading RESP2 ---- */

struct r3 {
	const char *p, *end;
};

/* The header at r->p: its type byte and number (0 for + - :), r->p moved past its line.
 * false at the end or on bytes that are not a reply (never from a command). */
static bool
head(struct r3 *r, char *t, long long *n, const char **line, size_t *llen)
{
	const char *nl;

	if (r->p >= r->end)
		return false;
	nl = memchr(r->p, '\n', (size_t)(r->end - r->p));
	if (nl == NULL || nl == r->p)
		return false;
	*t = r->p[0];
	*line = r->p;
	*llen = (size_t)(nl + 1 - r->p);
	*n = 0;
	if (*t == '$' || *t == '*')
		*n = strtoll(r->p + 1, NULL, 10);
	r->p = nl + 1;
	return true;
}

static void cp_any(struct r3 *r, struct rbuf *o);

static void
cp_rest(struct r3 *r, struct rbuf *o)
{
	rb_raw(o, r->p, (size_t)(r->end - r->p));
	r->p = r->end;
}

/* A bulk's body after its header: copied, with its CRLF. */
static void
cp_body(struct r3 *r, struct rbuf *o, long long n)
{
	size_t k = (size_t)n + 2;

	if ((size_t)(r->end - r->p) < k)
		k = (size_t)(r->end - r->p);
	rb_raw(o, r->p, k);
	r->p += k;
}

/* Any value, its nulls as "_". */
static void
cp_any(struct r3 *r, struct rbuf *o)
{
	const char *line;
	size_t llen;
	long long n, i;
	char t;

	if (!head(r, &t, &n, &line, &llen)) {
		cp_rest(r, o);
		return;
	}
	if ((t == '$' || t == '*') && n < 0) {
		rb_raw(o, "_\r\n", 3);
		return;
	}
	rb_raw(o, line, llen);
	if (t == '$')
		cp_body(r, o, n);
	else if (t == '*')
		for (i = 0; i < n; i++)
			cp_any(r, o);
}

/*
 * The head of a bulk (@p want '$', its body in the buffer too) or of an array ('*') at
 * r->p, not a null: true, its length in *n, r->p past the head. Anything else is copied
 * as it is (cp_any()) and the caller writes nothing more: false.
 */
static bool
take(struct r3 *r, struct rbuf *o, char want, long long *n)
{
	struct r3 save = *r;
	const char *line;
	size_t llen;
	char t;

	if (head(r, &t, n, &line, &llen) && t == want && *n >= 0 &&
	    (want != '$' || (size_t)(r->end - r->p) >= (size_t)*n + 2))
		return true;
	*r = save;
	cp_any(r, o);
	return false;
}

/* A bulk holding a score as a double (",2.5"); anything else as cp_any(). */
static void
cp_double(struct r3 *r, struct rbuf *o)
{
	long long n;

	if (!take(r, o, '$', &n))
		return;
	rb_raw(o, ",", 1);
	rb_raw(o, r->p, (size_t)n + 2);
	r->p += n + 2;
}

/*
 * An array at r->p as type @p t ('%': n/2 pairs, '~', '>', '*'), each element written by
 * @p el (NULL: cp_any); a null or a non-array as cp_any().
 */
static void
cp_agg(struct r3 *r, struct rbuf *o, char t, void (*el)(struct r3 *, struct rbuf *, long long))
{
	long long n, i;

	if (!take(r, o, '*', &n))
		return;
	if (!rb_reserve(o, 24))
		return;
	o->len += (size_t)snprintf(o->p + o->len, 24, "%c%lld\r\n", t, t == '%' ? n / 2 : n);
	for (i = 0; i < n; i++) {
		if (el != NULL)
			el(r, o, i);
		else
			cp_any(r, o);
	}
}

/* A flat [member, score, ...] array as [[member, double]...] (@p val_double false:
 * [field, value] pairs). */
static void
cp_pairs(struct r3 *r, struct rbuf *o, bool val_double)
{
	long long n, i;

	if (!take(r, o, '*', &n))
		return;
	rb_array(o, n / 2);
	for (i = 0; i + 1 < n; i += 2) {
		rb_array(o, 2);
		cp_any(r, o);
		if (val_double)
			cp_double(r, o);
		else
			cp_any(r, o);
	}
}

static void
el_double(struct r3 *r, struct rbuf *o, long long i)
{
	(void)i;
	cp_double(r, o);
}

/* ZPOPMIN without a count: member, score, member, score... flat, the scores doubles. */
static void
el_flat_scores(struct r3 *r, struct rbuf *o, long long i)
{
	if (i % 2 == 1)
		cp_double(r, o);
	else
		cp_any(r, o);
}

static void
el_bzpop(struct r3 *r, struct rbuf *o, long long i)
{
	if (i == 2)
		cp_double(r, o);
	else
		cp_any(r, o);
}

/* [member, score] (already a pair in RESP2) with the score a double. */
static void
el_pair(struct r3 *r, struct rbuf *o, long long i)
{
	(void)i;
	cp_agg(r, o, '*', el_flat_scores);
}

/* ZMPOP, BZMPOP: [key, [[member, score]...]]. */
static void
el_zmpop(struct r3 *r, struct rbuf *o, long long i)
{
	if (i == 1)
		cp_agg(r, o, '*', el_pair);
	else
		cp_any(r, o);
}

/* A bulk as a verbatim string: "=<n+4>\r\ntxt:<bulk>\r\n". */
static void
cp_verbatim(struct r3 *r, struct rbuf *o)
{
	long long n;

	if (!take(r, o, '$', &n))
		return;
	kv_reply_verbatim(o, true, r->p, (size_t)n);
	r->p += n + 2;
}

/* COMMAND DOCS: name -> doc maps; a doc's "subcommands" is such a map again. */
static void cp_docs(struct r3 *r, struct rbuf *o);

/* The key whose value comes next (per lcore: every lcore translates its clients'). */
static _Thread_local const char *doc_key;
static _Thread_local size_t doc_klen;

static void
el_doc(struct r3 *r, struct rbuf *o, long long i)
{
	if (i % 2 == 0) {
		/* the key: remembered to know what its value is */
		const char *s = r->p;

		cp_any(r, o);
		doc_key = memchr(s, '\n', (size_t)(r->p - s));
		doc_key = doc_key != NULL ? doc_key + 1 : s;
		doc_klen = (size_t)(r->p - doc_key) >= 2 ? (size_t)(r->p - doc_key) - 2 : 0;
		return;
	}
	if (doc_klen == 11 && memcmp(doc_key, "subcommands", 11) == 0)
		cp_docs(r, o);
	else
		cp_any(r, o);
}

static void
el_docs(struct r3 *r, struct rbuf *o, long long i)
{
	if (i % 2 == 0)
		cp_any(r, o);
	else
		cp_agg(r, o, '%', el_doc);
}

static void
cp_docs(struct r3 *r, struct rbuf *o)
{
	cp_agg(r, o, '%', el_docs);
}

/* COMMAND INFO: [name, arity, flags, first, last, step, categories, tips, key specs,
 * subcommands], the lists sets (the subcommands' details the same again). */
static void el_info(struct r3 *r, struct rbuf *o, long long i);

static void
cp_info(struct r3 *r, struct rbuf *o)
{
	cp_agg(r, o, '*', el_info);
}

static void
el_sub(struct r3 *r, struct rbuf *o, long long i)
{
	(void)i;
	cp_info(r, o);
}

static void
el_info(struct r3 *r, struct rbuf *o, long long i)
{
	if (i == 2 || i == 6 || i == 7 || i == 8)
		cp_agg(r, o, '~', NULL);
	else if (i == 9)
		cp_agg(r, o, '~', el_sub);
	else
		cp_any(r, o);
}

static void
el_infos(struct r3 *r, struct rbuf *o, long long i)
{
	(void)i;
	cp_info(r, o);
}

/* Is WITHSCORES (WITHVALUES) among @p cmd's options? Looked for where options go, so a
 * key or member of that name is not taken for one. */
static bool
with_opt(const char *name, uint32_t argc, const struct kv_arg *argv)
{
	uint32_t from = 4, i;

	if (strcmp(name, "zrandmember") == 0) {
		from = 3;
	} else if (strcmp(name, "zunion") == 0 || strcmp(name, "zinter") == 0 ||
		   strcmp(name, "zdiff") == 0) {
		long long nk = 0;

		if (argc < 2 || !resp_string2ll(argv[1].p, argv[1].len, &nk) || nk < 1 ||
		    (unsigned long long)nk > argc)
			return false;
		from = 2 + (uint32_t)nk;
	}
	for (i = from; i < argc; i++)
		if (strcasecmp(argv[i].p, "withscores") == 0)
			return true;
	return false;
}

static void
one(enum shape s, const struct kv_cmd *cmd, uint32_t argc, const struct kv_arg *argv, struct r3 *r,
    struct rbuf *o)
{
	switch (s) {
	case S_NONE:
		cp_rest(r, o);
		return;
	case S_TOPNULL:
		if (r->end - r->p >= 5 && memcmp(r->p, "*-1\r\n", 5) == 0) {
			rb_raw(o, "_\r\n", 3);
			r->p += 5;
			return;
		}
		cp_rest(r, o);
		return;
	case S_MAP:
		cp_agg(r, o, '%', NULL);
		return;
	case S_SET:
		cp_agg(r, o, '~', NULL);
		return;
	case S_SPOP:
		if (argc == 3)
			cp_agg(r, o, '~', NULL);
		else
			cp_any(r, o);
		return;
	case S_DOUBLE:
		cp_double(r, o);
		return;
	case S_DOUBLES:
		cp_agg(r, o, '*', el_double);
		return;
	case S_WITHSCORES:
		if (with_opt(cmd->name, argc, argv))
			cp_pairs(r, o, true);
		else
			cp_any(r, o);
		return;
	case S_ZPOP:
		if (argc >= 3)
			cp_pairs(r, o, true);
		else
			cp_agg(r, o, '*', el_flat_scores);
		return;
	case S_BZPOP:
		cp_agg(r, o, '*', el_bzpop);
		return;
	case S_ZMPOP:
		cp_agg(r, o, '*', el_zmpop);
		return;
	case S_HRAND:
		if (argc == 4)
			cp_pairs(r, o, false);
		else
			cp_any(r, o);
		return;
	case S_VERBATIM:
		cp_verbatim(r, o);
		return;
	case S_PUSH:
		cp_agg(r, o, '>', NULL);
		return;
	case S_DOCS:
		cp_docs(r, o);
		return;
	case S_CMDINFO:
		cp_agg(r, o, '*', el_infos);
		return;
	case S_PLAIN:
	default:
		cp_any(r, o);
		return;
	}
}

static void
translate(const struct kv_cmd *cmd, uint32_t argc, const struct kv_arg *argv, const char *p,
	  size_t n, struct rbuf *out)
{
	enum shape s =
	    cmd != NULL && cmd->stat < KV_CMDSTAT_MAX ? (enum shape)shape_of[cmd->stat] : S_PLAIN;
	struct r3 r = {p, p + n};

	/* Most replies are one; (UN)SUBSCRIBE writes one per channel. */
	while (r.p < r.end)
		one(s, cmd, argc, argv, &r, out);
}

void
kv_resp3_fix(const struct kv_cmd *cmd, uint32_t argc, const struct kv_arg *argv, struct rbuf *b,
	     size_t from)
{
	struct rbuf t;
	char inl[256];
	enum shape s;

	if (b->len <= from)
		return;
	/* Replies that RESP3 writes alike (an integer, a status, an error, a short bulk)
	 * are left in place. */
	if (b->p[from] == '+' || b->p[from] == '-' || b->p[from] == ':')
		return;
	/* ... and so is a bulk string where no double or verbatim string is due (GET of a big
	 * value: no copy), and what the command wrote in RESP3 itself. */
	s = cmd != NULL && cmd->stat < KV_CMDSTAT_MAX ? (enum shape)shape_of[cmd->stat] : S_PLAIN;
	if (s == S_NONE || (b->p[from] == '$' && b->len > from + 1 && b->p[from + 1] != '-' &&
			    s != S_DOUBLE && s != S_VERBATIM))
		return;
	rb_init(&t, inl, sizeof(inl));
	translate(cmd, argc, argv, b->p + from, b->len - from, &t);
	b->len = from;
	rb_raw(b, t.p, t.len);
	rb_fini(&t);
}

void
kv_resp3_append(const struct kv_cmd *cmd, uint32_t argc, const struct kv_arg *argv,
		const struct rbuf *o, struct rbuf *out)
{
	translate(cmd, argc, argv, o->p, o->len, out);
}

void
kv_reply_verbatim(struct rbuf *out, bool resp3, const char *p, size_t n)
{
	if (!resp3) {
		rb_bulk(out, p, n);
		return;
	}
	if (!rb_reserve(out, n + 32))
		return;
	out->len += (size_t)snprintf(out->p + out->len, 32, "=%zu\r\ntxt:", n + 4);
	memcpy(out->p + out->len, p, n);
	out->len += n;
	out->p[out->len++] = '\r';
	out->p[out->len++] = '\n';
}
