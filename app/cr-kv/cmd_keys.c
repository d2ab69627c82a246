/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Key commands (Redis 7.0's db.c and expire.c).
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv.h"

static struct kv_entry *
lookup(struct kv_ctx *x, const struct kv_arg *k)
{
	return kv_key_find(x, k, 0);
}

/* Redis's LOOKUP_NOTOUCH: TYPE, EXISTS, TTL, OBJECT do not count as an access. */
static struct kv_entry *
peek(struct kv_ctx *x, const struct kv_arg *k)
{
	return kv_key_find(x, k, KV_FIND_NOTOUCH);
}

KV_CMD(del)
{
	long long n = 0;
	uint32_t i;

	for (i = 1; i < x->argc; i++) {
		const struct kv_arg *k = &x->argv[i];

		if (kv_delete(x->sh->store, k->p, k->len, kv_hash(k->p, k->len), x->now_ms))
			n++;
	}
	rb_int(x->out, n);
}

KV_CMD(exists)
{
	long long n = 0;
	uint32_t i;

	for (i = 1; i < x->argc; i++)
		if (peek(x, &x->argv[i]) != NULL)
			n++;
	rb_int(x->out, n);
}

KV_CMD(touch)
{
	long long n = 0;
	uint32_t i;

	for (i = 1; i < x->argc; i++)
		if (lookup(x, &x->argv[i]) != NULL)
			n++;
	rb_int(x->out, n);
}

KV_CMD(type)
{
	struct kv_entry *e = peek(x, &x->argv[1]);

	rb_status(x->out, e != NULL ? kv_type_name(e->type) : "none");
}

#define EXP_NX 1u
#define EXP_XX 2u
#define EXP_GT 4u
#define EXP_LT 8u

static void
expire_generic(struct kv_ctx *x, long long basetime, bool ms, const char *name)
{
	unsigned flags = 0;
	long long when, cur;
	struct kv_entry *e;
	uint32_t j;

	for (j = 3; j < x->argc; j++) {
		const char *o = x->argv[j].p;

		if (strcasecmp(o, "nx") == 0)
			flags |= EXP_NX;
		else if (strcasecmp(o, "xx") == 0)
			flags |= EXP_XX;
		else if (strcasecmp(o, "gt") == 0)
			flags |= EXP_GT;
		else if (strcasecmp(o, "lt") == 0)
			flags |= EXP_LT;
		else {
			rb_errorf(x->out, "ERR Unsupported option %s", o);
			return;
		}
	}
	if ((flags & EXP_NX) && (flags & (EXP_XX | EXP_GT | EXP_LT))) {
		rb_error(x->out, "ERR NX and XX, GT or LT options at the same time are not "
				 "compatible");
		return;
	}
	if ((flags & EXP_GT) && (flags & EXP_LT)) {
		rb_error(x->out, "ERR GT and LT options at the same time are not compatible");
		return;
	}
	if (!kv_arg_ll(x, &x->argv[2], &when))
		return;
	if (!ms) {
		if (when > LLONG_MAX / 1000 || when < LLONG_MIN / 1000) {
			rb_errorf(x->out, "ERR invalid expire time in '%s' command", name);
			return;
		}
		when *= 1000;
	}
	if (when > LLONG_MAX - basetime) {
		rb_errorf(x->out, "ERR invalid expire time in '%s' command", name);
		return;
	}
	when += basetime;
	e = lookup(x, &x->argv[1]);
	if (e == NULL) {
		rb_int(x->out, 0);
		return;
	}
	if (flags) {
		cur = e->expire;
		if (((flags & EXP_NX) && cur != -1) || ((flags & EXP_XX) && cur == -1) ||
		    ((flags & EXP_GT) && (when <= cur || cur == -1)) ||
		    ((flags & EXP_LT) && cur != -1 && when >= cur)) {
			rb_int(x->out, 0);
			return;
		}
	}
	if (when <= x->now_ms)
		kv_entry_delete(x->sh->store, e);
	else
		kv_set_expire(x->sh->store, e, when);
	rb_int(x->out, 1);
}

KV_CMD(expire)
{
	expire_generic(x, x->now_ms, false, "expire");
}

KV_CMD(pexpire)
{
	expire_generic(x, x->now_ms, true, "pexpire");
}

KV_CMD(expireat)
{
	expire_generic(x, 0, false, "expireat");
}

KV_CMD(pexpireat)
{
	expire_generic(x, 0, true, "pexpireat");
}

static void
ttl_generic(struct kv_ctx *x, bool ms)
{
	struct kv_entry *e = peek(x, &x->argv[1]);
	long long ttl;

	if (e == NULL) {
		rb_int(x->out, -2);
		return;
	}
	if (e->expire == -1) {
		rb_int(x->out, -1);
		return;
	}
	ttl = e->expire - x->now_ms;
	if (ttl < 0)
		ttl = 0;
	rb_int(x->out, ms ? ttl : (ttl + 500) / 1000);
}

KV_CMD(ttl)
{
	ttl_generic(x, false);
}

KV_CMD(pttl)
{
	ttl_generic(x, true);
}

KV_CMD(persist)
{
	struct kv_entry *e = lookup(x, &x->argv[1]);

	rb_int(x->out, e != NULL && kv_persist(x->sh->store, e) ? 1 : 0);
}

/* RENAME / RENAMENX when both keys are on this shard: Redis's renameGenericCommand(). */
KV_CMD(rename_local)
{
	const struct kv_arg *src = &x->argv[1], *dst = &x->argv[2];
	bool nx = x->argv[0].len == 8;
	struct kv_entry *e;

	e = lookup(x, src);
	if (e == NULL) {
		rb_error(x->out, "ERR no such key");
		return;
	}
	if (src->len == dst->len && memcmp(src->p, dst->p, src->len) == 0) {
		if (nx)
			rb_int(x->out, 0);
		else
			rb_ok(x->out);
		return;
	}
	if (nx && lookup(x, dst) != NULL) {
		rb_int(x->out, 0);
		return;
	}
	e = kv_entry_rename(x->sh->store, e, dst->p, dst->len, kv_key_hash(x, dst), x->now_ms);
	if (e == NULL) {
		rb_error(x->out, "OOM out of memory in rename");
		return;
	}
	kv_bw_signal(x->sh, dst->p, dst->len, e->type); /* a list or zset made under dst */
	if (nx)
		rb_int(x->out, 1);
	else
		rb_ok(x->out);
}

/* COPY's options (argv[3...]): REPLACE and DB (0 only). @return 0, or -EINVAL (replied). */
int
kv_copy_opts(struct kv_ctx *x, bool *replace)
{
	uint32_t j;

	*replace = false;
	for (j = 3; j < x->argc; j++) {
		if (strcasecmp(x->argv[j].p, "replace") == 0) {
			*replace = true;
		} else if (strcasecmp(x->argv[j].p, "db") == 0 && j + 1 < x->argc) {
			long long db;

			if (!kv_arg_ll_range(x, &x->argv[j + 1], INT_MIN, INT_MAX, kv_err_int, &db))
				return -EINVAL;
			if (db != 0) {
				rb_error(x->out, "ERR DB index is out of range");
				return -EINVAL;
			}
			j++;
		} else {
			rb_error(x->out, kv_err_syntax);
			return -EINVAL;
		}
	}
	if (x->argv[1].len == x->argv[2].len &&
	    memcmp(x->argv[1].p, x->argv[2].p, x->argv[1].len) == 0) {
		rb_error(x->out, "ERR source and destination objects are the same");
		return -EINVAL;
	}
	return 0;
}

/* COPY when both keys are on this shard: the value is dumped and built again, with its
 * encoding (Redis's dup functions keep it). */
KV_CMD(copy_local)
{
	const struct kv_arg *dst = &x->argv[2];
	struct kv_entry *e, *d;
	struct kv_loaded l;
	bool replace;
	struct rbuf b;
	int64_t expire;

	if (kv_copy_opts(x, &replace) != 0)
		return;
	e = kv_key_find(x, &x->argv[1], KV_FIND_READ);
	if (e == NULL) {
		rb_int(x->out, 0);
		return;
	}
	if (lookup(x, dst) != NULL && !replace) {
		rb_int(x->out, 0);
		return;
	}
	expire = e->expire;
	rb_init(&b, NULL, 0);
	kv_obj_dump(e, &b);
	if (kv_obj_load(b.p, b.len, &l) != 0) {
		rb_fini(&b);
		rb_error(x->out, kv_err_oom);
		return;
	}
	d = kv_obj_install(x, dst, &l);
	rb_fini(&b);
	if (d == NULL)
		return;
	if (expire != -1)
		kv_set_expire(x->sh->store, d, expire);
	rb_int(x->out, 1);
}

/* ---- OBJECT ---- */

static struct kv_entry *
object_key(struct kv_ctx *x)
{
	struct kv_entry *e = peek(x, &x->argv[2]);

	if (e == NULL)
		rb_null(x->out);
	return e;
}

KV_CMD(object_encoding)
{
	struct kv_entry *e = object_key(x);

	if (e != NULL)
		rb_bulkstr(x->out, kv_enc_name(e->enc));
}

KV_CMD(object_freq)
{
	struct kv_entry *e = object_key(x);

	if (e == NULL)
		return;
	if (kv_policy_lfu(kv_policy()))
		rb_int(x->out, (long long)kv_lfu_counter(e->lru, x->now_ms));
	else
		rb_error(x->out,
			 "ERR An LFU maxmemory policy is not selected, access frequency not "
			 "tracked. Please note that when switching between policies at runtime "
			 "LRU and LFU data will take some time to adjust.");
}

KV_CMD(object_idletime)
{
	struct kv_entry *e = object_key(x);

	if (e == NULL)
		return;
	if (kv_policy_lfu(kv_policy()))
		rb_error(x->out,
			 "ERR An LFU maxmemory policy is selected, idle time not tracked. Please "
			 "note that when switching between policies at runtime LRU and LFU data "
			 "will take some time to adjust.");
	else
		rb_int(x->out, (long long)(kv_lru_idle_ms(e->lru, x->now_ms) / 1000));
}

KV_CMD(object_refcount)
{
	struct kv_entry *e = object_key(x);
	long long v;

	if (e == NULL)
		return;
	/* Redis shares the objects of the integers 0..9999: their count is INT_MAX. */
	if (e->type == KV_T_STRING && e->enc == KV_ENC_INT && resp_string2ll(e->val, e->vlen, &v) &&
	    v >= 0 && v < 10000)
		rb_int(x->out, 2147483647);
	else
		rb_int(x->out, 1);
}

KV_CMD(object_help)
{
	static const char *const l[] = {
	    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	    "ENCODING <key>",
	    "    Return the kind of internal representation used in order to store the value",
	    "    associated with a <key>.",
	    "FREQ <key>",
	    "    Return the access frequency index of the <key>. The returned integer is",
	    "    proportional to the logarithm of the recent access frequency of the key.",
	    "IDLETIME <key>",
	    "    Return the idle time of the <key>, that is the approximated number of",
	    "    seconds elapsed since the last access to the key.",
	    "REFCOUNT <key>",
	    "    Return the number of references of the value associated with the specified",
	    "    <key>.",
	    "HELP",
	    "    Prints this help.",
	    NULL};
	unsigned n = 0;

	while (l[n] != NULL)
		n++;
	rb_array(x->out, n);
	for (n = 0; l[n] != NULL; n++)
		rb_status(x->out, l[n]);
}

/* ---- KEYS, SCAN, DBSIZE, FLUSHDB, RANDOMKEY ---- */

/* Redis's stringmatchlen(), with its nesting limit. */
static bool
match(const char *pat, size_t plen, const char *s, size_t slen, bool nocase, int nest,
      bool *skip_longer)
{
	if (nest > 1000)
		return false;
	while (plen > 0 && slen > 0) {
		switch (pat[0]) {
		case '*':
			while (plen > 1 && pat[1] == '*') {
				pat++;
				plen--;
			}
			if (plen == 1)
				return true;
			while (slen > 0) {
				if (match(pat + 1, plen - 1, s, slen, nocase, nest + 1,
					  skip_longer))
					return true;
				if (*skip_longer)
					return false;
				s++;
				slen--;
			}
			/* No match for the rest from anywhere: a longer match of an earlier
			 * '*' cannot help either (Redis's skipLongerMatches). */
			*skip_longer = true;
			return false;
		case '?':
			s++;
			slen--;
			break;
		case '[': {
			bool not, ok = false;

			pat++;
			plen--;
			not = plen > 0 && pat[0] == '^';
			if (not ) {
				pat++;
				plen--;
			}
			for (;;) {
				if (plen > 0 && pat[0] == '\\' && plen >= 2) {
					pat++;
					plen--;
					if (pat[0] == s[0])
						ok = true;
				} else if (plen == 0 || pat[0] == ']') {
					break;
				} else if (plen >= 3 && pat[1] == '-') {
					int a = (unsigned char)pat[0], b = (unsigned char)pat[2];
					int c = (unsigned char)s[0];

					if (a > b) {
						int t = a;

						a = b;
						b = t;
					}
					if (nocase) {
						a = tolower(a);
						b = tolower(b);
						c = tolower(c);
					}
					pat += 2;
					plen -= 2;
					if (c >= a && c <= b)
						ok = true;
				} else if (nocase ? tolower((unsigned char)pat[0]) ==
							tolower((unsigned char)s[0])
						  : pat[0] == s[0]) {
					ok = true;
				}
				pat++;
				plen--;
			}
			if (plen == 0) {
				/* Redis: an unterminated '[' ends the pattern here. */
				pat--;
				plen++;
			}
			if (not )
				ok = !ok;
			if (!ok)
				return false;
			s++;
			slen--;
			break;
		}
		case '\\':
			if (plen >= 2) {
				pat++;
				plen--;
			}
			/* fall through */
		default:
			if (nocase ? tolower((unsigned char)pat[0]) != tolower((unsigned char)s[0])
				   : pat[0] != s[0])
				return false;
			s++;
			slen--;
			break;
		}
		pat++;
		plen--;
		if (slen == 0) {
			while (plen > 0 && *pat == '*') {
				pat++;
				plen--;
			}
			break;
		}
	}
	return plen == 0 && slen == 0;
}

bool
kv_stringmatch(const char *pat, size_t plen, const char *s, size_t slen, bool nocase)
{
	bool skip = false;

	return match(pat, plen, s, slen, nocase, 0, &skip);
}

struct keys_walk {
	struct kv_ctx *x;
	const struct kv_arg *pat;
	bool all;
	long long n;
};

static void
keys_visit(struct kv_entry *e, void *arg)
{
	struct keys_walk *w = arg;

	if (e->expire != -1 && e->expire <= w->x->now_ms)
		return;
	if (!w->all && !kv_stringmatch(w->pat->p, w->pat->len, e->key, e->klen, false))
		return;
	rb_bulk(w->x->out, e->key, e->klen);
	w->n++;
}

KV_CMD(keys)
{
	struct keys_walk w = {x, &x->argv[1], false, 0};
	size_t start = x->out->len;

	w.all = x->argv[1].len == 1 && x->argv[1].p[0] == '*';
	kv_store_foreach(x->sh->store, keys_visit, &w);
	kv_array_end(x->out, start, w.n);
}

int
kv_parse_scan_cursor(const struct kv_arg *a, unsigned long long *out)
{
	char *end;

	errno = 0;
	*out = strtoull(a->p, &end, 10);
	if (isspace((unsigned char)a->p[0]) || end[0] != '\0' || errno == ERANGE)
		return -EINVAL;
	return 0;
}

struct scan_walk {
	struct kv_arg *keys;
	size_t n, cap;
	bool nomem;
};

static void
scan_visit(struct kv_entry *e, void *arg)
{
	struct scan_walk *w = arg;

	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 32;
		struct kv_arg *k = realloc(w->keys, cap * sizeof(*k));

		if (k == NULL) {
			w->nomem = true;
			return;
		}
		w->keys = k;
		w->cap = cap;
	}
	/* Keep the entry: the filter below needs its expiry too. */
	w->keys[w->n].p = (const char *)e;
	w->keys[w->n].len = 0;
	w->n++;
}

/* SCAN cursor [MATCH pattern] [COUNT count] [TYPE type] on this shard; argv[1] is the
 * shard's own cursor (the router rewrote it). */
KV_CMD(scan)
{
	const struct kv_arg *pat = NULL;
	const char *type = NULL;
	unsigned long long cursor;
	long long count = 10, iters;
	struct scan_walk w = {0};
	uint32_t i = 2;
	size_t k, start;
	long long n = 0;
	char cur[24];

	if (kv_parse_scan_cursor(&x->argv[1], &cursor) != 0) {
		rb_error(x->out, "ERR invalid cursor");
		return;
	}
	while (i < x->argc) {
		uint32_t left = x->argc - i;

		if (strcasecmp(x->argv[i].p, "count") == 0 && left >= 2) {
			if (!kv_arg_ll(x, &x->argv[i + 1], &count))
				return;
			if (count < 1) {
				rb_error(x->out, "ERR syntax error");
				return;
			}
			i += 2;
		} else if (strcasecmp(x->argv[i].p, "match") == 0 && left >= 2) {
			pat = &x->argv[i + 1];
			if (pat->len == 1 && pat->p[0] == '*')
				pat = NULL;
			i += 2;
		} else if (strcasecmp(x->argv[i].p, "type") == 0 && left >= 2) {
			type = x->argv[i + 1].p;
			i += 2;
		} else {
			rb_error(x->out, "ERR syntax error");
			return;
		}
	}
	iters = count * 10;
	do {
		cursor = kv_store_scan(x->sh->store, cursor, scan_visit, &w);
	} while (cursor != 0 && iters-- > 0 && (long long)w.n < count && !w.nomem);
	if (w.nomem) {
		free(w.keys);
		rb_error(x->out, "OOM out of memory in scan");
		return;
	}
	rb_array(x->out, 2);
	rb_bulk(x->out, cur, (size_t)snprintf(cur, sizeof(cur), "%llu", cursor));
	start = x->out->len;
	for (k = 0; k < w.n; k++) {
		const struct kv_entry *e = (const struct kv_entry *)w.keys[k].p;

		if (e->expire != -1 && e->expire <= x->now_ms)
			continue;
		if (pat != NULL && !kv_stringmatch(pat->p, pat->len, e->key, e->klen, false))
			continue;
		if (type != NULL && strcasecmp(type, kv_type_name(e->type)) != 0)
			continue;
		rb_bulk(x->out, e->key, e->klen);
		n++;
	}
	kv_array_end(x->out, start, n);
	free(w.keys);
}

KV_CMD(dbsize)
{
	rb_int(x->out, (long long)kv_store_count(x->sh->store));
}

bool
precheck_flush(struct kv_ctx *x)
{
	if (x->argc > 2 || (x->argc == 2 && strcasecmp(x->argv[1].p, "sync") != 0 &&
			    strcasecmp(x->argv[1].p, "async") != 0)) {
		rb_error(x->out, "ERR syntax error");
		return false;
	}
	return true;
}

KV_CMD(flushdb)
{
	kv_store_flush(x->sh->store, x->argc == 2 && strcasecmp(x->argv[1].p, "async") == 0);
	rb_ok(x->out);
}

KV_CMD(randomkey)
{
	struct kv_entry *e = kv_store_random(x->sh->store, x->now_ms, &x->sh->rng);

	if (e == NULL)
		rb_null(x->out);
	else
		rb_bulk(x->out, e->key, e->klen);
}
