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
	return kv_lookup(x->sh->store, k->p, k->len, kv_hash(k->p, k->len), x->now_ms);
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
		if (lookup(x, &x->argv[i]) != NULL)
			n++;
	rb_int(x->out, n);
}

KV_CMD(type)
{
	rb_status(x->out, lookup(x, &x->argv[1]) != NULL ? "string" : "none");
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
	struct kv_entry *e = lookup(x, &x->argv[1]);
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
	struct kv_entry *e, *d;
	int64_t expire;

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
	expire = e->expire;
	{
		struct kv_arg v = {e->val, e->vlen};

		d = kv_set(x->sh->store, dst->p, dst->len, kv_hash(dst->p, dst->len), v.p, v.len,
			   false, x->now_ms);
	}
	if (d == NULL) {
		rb_error(x->out, "OOM out of memory in rename");
		return;
	}
	if (expire != -1)
		kv_set_expire(x->sh->store, d, expire);
	/* d may have been allocated after e moved nothing: e is still valid (no rehash
	 * frees entries), so delete it by key. */
	kv_delete(x->sh->store, src->p, src->len, kv_hash(src->p, src->len), x->now_ms);
	if (nx)
		rb_int(x->out, 1);
	else
		rb_ok(x->out);
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

/* Write an array header in front of what was written since @p start. */
static void
prepend_array(struct rbuf *out, size_t start, long long n)
{
	char hdr[24];
	int h = snprintf(hdr, sizeof(hdr), "*%lld\r\n", n);

	if (!rb_reserve(out, (size_t)h))
		return;
	memmove(out->p + start + h, out->p + start, out->len - start);
	memcpy(out->p + start, hdr, (size_t)h);
	out->len += (size_t)h;
}

KV_CMD(keys)
{
	struct keys_walk w = {x, &x->argv[1], false, 0};
	size_t start = x->out->len;

	w.all = x->argv[1].len == 1 && x->argv[1].p[0] == '*';
	kv_store_foreach(x->sh->store, keys_visit, &w);
	prepend_array(x->out, start, w.n);
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
		if (type != NULL && strcasecmp(type, "string") != 0)
			continue;
		rb_bulk(x->out, e->key, e->klen);
		n++;
	}
	prepend_array(x->out, start, n);
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
