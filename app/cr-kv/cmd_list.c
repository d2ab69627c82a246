/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * List commands on one key, as Redis 7.0's t_list.c: the same checks in the same order,
 * the same replies. (LMOVE, RPOPLPUSH and the blocking pops are in cmd_multi.c and
 * blocking.c.)
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv.h"
#include "t_list.h"

static struct kv_entry *
list_read(struct kv_ctx *x, bool *bad)
{
	return kv_key_typed(x, &x->argv[1], KV_T_LIST, KV_FIND_READ, bad);
}

static struct kv_entry *
list_write(struct kv_ctx *x, bool *bad)
{
	return kv_key_typed(x, &x->argv[1], KV_T_LIST, 0, bad);
}

int
kv_list_push(struct kv_ctx *x, struct kv_entry *e, bool head, const struct kv_arg *v)
{
	if (ql_push(e->obj, head, v->p, v->len) != 0) {
		rb_error(x->out, kv_err_oom);
		return -1;
	}
	return 0;
}

static void
push_generic(struct kv_ctx *x, bool head, bool xx)
{
	struct kv_entry *e;
	bool bad;
	uint32_t j;

	e = list_write(x, &bad);
	if (bad)
		return;
	if (e == NULL) {
		if (xx) {
			rb_int(x->out, 0);
			return;
		}
		e = kv_key_add(x, &x->argv[1], KV_T_LIST, KV_ENC_QUICKLIST, ql_new());
		if (e == NULL)
			return;
	}
	for (j = 2; j < x->argc; j++)
		if (kv_list_push(x, e, head, &x->argv[j]) != 0)
			return;
	rb_int(x->out, (long long)((struct kv_qlist *)e->obj)->count);
}

KV_CMD(lpush)
{
	push_generic(x, true, false);
}

KV_CMD(rpush)
{
	push_generic(x, false, false);
}

KV_CMD(lpushx)
{
	push_generic(x, true, true);
}

KV_CMD(rpushx)
{
	push_generic(x, false, true);
}

/* Reply the element at one end and remove it. */
void
kv_list_pop_reply(struct kv_ctx *x, struct kv_entry *e, bool head)
{
	struct kv_qlist *ql = e->obj;
	struct qpos p;
	size_t len;
	const void *v;

	ql_end(ql, head, &p);
	v = ql_get(&p, &len);
	rb_bulk(x->out, v, len);
	ql_delete_ends(ql, head, 1);
}

static void
pop_generic(struct kv_ctx *x, bool head)
{
	struct kv_entry *e;
	long long count = 0;
	bool bad, hascount = x->argc == 3;
	size_t n, i;

	if (x->argc > 3) {
		kv_reply_wrong_arity(x->out, head ? "lpop" : "rpop");
		return;
	}
	if (hascount && !kv_arg_positive(x, &x->argv[2], NULL, &count))
		return;
	e = list_write(x, &bad);
	if (bad)
		return;
	if (e == NULL) {
		rb_raw(x->out, hascount ? "*-1\r\n" : "$-1\r\n", 5);
		return;
	}
	if (hascount && count == 0) {
		rb_array(x->out, 0);
		return;
	}
	if (!hascount) {
		kv_list_pop_reply(x, e, head);
	} else {
		n = (size_t)count < ((struct kv_qlist *)e->obj)->count
			? (size_t)count
			: ((struct kv_qlist *)e->obj)->count;
		rb_array(x->out, (long long)n);
		for (i = 0; i < n; i++)
			kv_list_pop_reply(x, e, head);
	}
	kv_key_drop_if_empty(x, e);
}

KV_CMD(lpop)
{
	pop_generic(x, true);
}

KV_CMD(rpop)
{
	pop_generic(x, false);
}

KV_CMD(llen)
{
	bool bad;
	struct kv_entry *e = list_read(x, &bad);

	if (!bad)
		rb_int(x->out, e != NULL ? (long long)((struct kv_qlist *)e->obj)->count : 0);
}

KV_CMD(lindex)
{
	bool bad;
	struct kv_entry *e = list_read(x, &bad);
	long long index;
	struct qpos p;

	if (bad)
		return;
	if (e == NULL) {
		rb_null(x->out);
		return;
	}
	if (!kv_arg_ll(x, &x->argv[2], &index))
		return;
	if (index < 0)
		index += (long long)((struct kv_qlist *)e->obj)->count;
	if (ql_index(e->obj, index, &p)) {
		size_t len;
		const void *v = ql_get(&p, &len);

		rb_bulk(x->out, v, len);
	} else {
		rb_null(x->out);
	}
}

KV_CMD(lset)
{
	bool bad;
	struct kv_entry *e = list_write(x, &bad);
	long long index;
	struct qpos p;

	if (bad)
		return;
	if (e == NULL) {
		rb_error(x->out, "ERR no such key");
		return;
	}
	if (!kv_arg_ll(x, &x->argv[2], &index))
		return;
	if (index < 0)
		index += (long long)((struct kv_qlist *)e->obj)->count;
	if (!ql_index(e->obj, index, &p)) {
		rb_error(x->out, "ERR index out of range");
		return;
	}
	if (ql_replace(e->obj, &p, x->argv[3].p, x->argv[3].len) != 0) {
		rb_error(x->out, kv_err_oom);
		return;
	}
	rb_ok(x->out);
}

static bool
equal(const struct qpos *p, const struct kv_arg *a)
{
	size_t len;
	const void *v = ql_get(p, &len);

	return len == a->len && memcmp(v, a->p, len) == 0;
}

KV_CMD(linsert)
{
	struct kv_entry *e;
	struct qpos p;
	bool after, bad;

	if (strcasecmp(x->argv[2].p, "after") == 0)
		after = true;
	else if (strcasecmp(x->argv[2].p, "before") == 0)
		after = false;
	else {
		rb_error(x->out, kv_err_syntax);
		return;
	}
	e = list_write(x, &bad);
	if (bad)
		return;
	if (e == NULL) {
		rb_int(x->out, 0);
		return;
	}
	if (ql_end(e->obj, true, &p))
		do {
			if (!equal(&p, &x->argv[3]))
				continue;
			if (ql_insert(e->obj, &p, after, x->argv[4].p, x->argv[4].len) != 0) {
				rb_error(x->out, kv_err_oom);
				return;
			}
			rb_int(x->out, (long long)((struct kv_qlist *)e->obj)->count);
			return;
		} while (ql_next(&p));
	rb_int(x->out, -1);
}

/* Redis's addListRangeReply(): the normalised range of a list of @p llen, or false if it
 * is empty. */
static bool
range_of(long long llen, long long *start, long long *end)
{
	if (*start < 0)
		*start += llen;
	if (*end < 0)
		*end += llen;
	if (*start < 0)
		*start = 0;
	if (*start > *end || *start >= llen)
		return false;
	if (*end >= llen)
		*end = llen - 1;
	return true;
}

KV_CMD(lrange)
{
	long long start, end, i;
	struct kv_entry *e;
	struct qpos p;
	bool bad;

	if (!kv_arg_ll(x, &x->argv[2], &start) || !kv_arg_ll(x, &x->argv[3], &end))
		return;
	e = list_read(x, &bad);
	if (bad)
		return;
	if (e == NULL || !range_of((long long)((struct kv_qlist *)e->obj)->count, &start, &end)) {
		rb_array(x->out, 0);
		return;
	}
	rb_array(x->out, end - start + 1);
	ql_index(e->obj, start, &p);
	for (i = start; i <= end; i++) {
		size_t len;
		const void *v = ql_get(&p, &len);

		rb_bulk(x->out, v, len);
		ql_next(&p);
	}
}

KV_CMD(ltrim)
{
	long long start, end, llen, ltrim, rtrim;
	struct kv_entry *e;
	bool bad;

	if (!kv_arg_ll(x, &x->argv[2], &start) || !kv_arg_ll(x, &x->argv[3], &end))
		return;
	e = list_write(x, &bad);
	if (bad)
		return;
	if (e == NULL) {
		rb_ok(x->out);
		return;
	}
	llen = (long long)((struct kv_qlist *)e->obj)->count;
	if (range_of(llen, &start, &end)) {
		ltrim = start;
		rtrim = llen - end - 1;
	} else {
		ltrim = llen;
		rtrim = 0;
	}
	ql_delete_ends(e->obj, true, (size_t)ltrim);
	ql_delete_ends(e->obj, false, (size_t)rtrim);
	kv_key_drop_if_empty(x, e);
	rb_ok(x->out);
}

KV_CMD(lrem)
{
	long long toremove, removed = 0;
	struct kv_entry *e;
	struct qpos p;
	bool bad, fwd = true;

	if (!kv_arg_ll(x, &x->argv[2], &toremove))
		return;
	e = list_write(x, &bad);
	if (bad)
		return;
	if (e == NULL) {
		rb_int(x->out, 0);
		return;
	}
	if (toremove < 0) {
		toremove = -toremove;
		fwd = false;
	}
	ql_end(e->obj, fwd, &p);
	while (p.node != NULL) {
		if (equal(&p, &x->argv[3])) {
			ql_delete(e->obj, &p, fwd);
			removed++;
			if (toremove != 0 && removed == toremove)
				break;
		} else if (!(fwd ? ql_next(&p) : ql_prev(&p))) {
			break;
		}
	}
	kv_key_drop_if_empty(x, e);
	rb_int(x->out, removed);
}

KV_CMD(lpos)
{
	long long rank = 1, count = -1, maxlen = 0, index = 0, matches = 0, llen, n = 0;
	struct kv_entry *e;
	struct qpos p;
	bool bad, fwd = true;
	size_t start = 0;
	uint32_t j;

	for (j = 3; j < x->argc; j++) {
		const char *opt = x->argv[j].p;
		bool more = j + 1 < x->argc;

		if (strcasecmp(opt, "rank") == 0 && more) {
			if (!kv_arg_ll(x, &x->argv[++j], &rank))
				return;
			if (rank == 0) {
				rb_error(x->out,
					 "ERR RANK can't be zero: use 1 to start from the first "
					 "match, 2 from the second ... or use negative to start "
					 "from the end of the list");
				return;
			}
		} else if (strcasecmp(opt, "count") == 0 && more) {
			if (!kv_arg_positive(x, &x->argv[++j], "ERR COUNT can't be negative",
					     &count))
				return;
		} else if (strcasecmp(opt, "maxlen") == 0 && more) {
			if (!kv_arg_positive(x, &x->argv[++j], "ERR MAXLEN can't be negative",
					     &maxlen))
				return;
		} else {
			rb_error(x->out, kv_err_syntax);
			return;
		}
	}
	if (rank < 0) {
		/* Redis negates it in a long: LLONG_MIN stays negative, so that every match
		 * counts (computed here without the overflow). */
		rank = rank == LLONG_MIN ? LLONG_MIN : -rank;
		fwd = false;
	}
	e = list_read(x, &bad);
	if (bad)
		return;
	if (e == NULL) {
		if (count != -1)
			rb_array(x->out, 0);
		else
			rb_null(x->out);
		return;
	}
	llen = (long long)((struct kv_qlist *)e->obj)->count;
	if (count != -1)
		start = kv_array_begin(x->out);
	ql_end(e->obj, fwd, &p);
	while (p.node != NULL && (maxlen == 0 || index < maxlen)) {
		if (equal(&p, &x->argv[2]) && ++matches >= rank) {
			long long at = fwd ? index : llen - index - 1;

			if (count == -1) {
				rb_int(x->out, at);
				return;
			}
			rb_int(x->out, at);
			n++;
			if (count != 0 && (long long)((unsigned long long)matches -
						      (unsigned long long)rank + 1) >= count)
				break;
		}
		index++;
		if (!(fwd ? ql_next(&p) : ql_prev(&p)))
			break;
	}
	if (count != -1)
		kv_array_end(x->out, start, n);
	else
		rb_null(x->out);
}
