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
	if (e == NULL ||
	    !kv_rank_range((long long)((struct kv_qlist *)e->obj)->count, &start, &end)) {
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
	if (kv_rank_range(llen, &start, &end)) {
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

/* ---- LMOVE, RPOPLPUSH ---- */

bool
kv_list_where(struct kv_ctx *x, const struct kv_arg *a, bool *head)
{
	if (strcasecmp(a->p, "right") == 0)
		*head = false;
	else if (strcasecmp(a->p, "left") == 0)
		*head = true;
	else {
		rb_error(x->out, kv_err_syntax);
		return false;
	}
	return true;
}

/* Pop from one end of @p src into a copy (the element's bytes go with the node). */
static char *
pop_copy(struct kv_entry *src, bool head, size_t *len)
{
	struct qpos p;
	const void *v;
	char *c;

	ql_end(src->obj, head, &p);
	v = ql_get(&p, len);
	c = malloc(*len + 1);
	if (c == NULL)
		return NULL;
	memcpy(c, v, *len);
	ql_delete_ends(src->obj, head, 1);
	return c;
}

/* lmoveGenericCommand() on one shard. */
void
kv_lmove_here(struct kv_ctx *x, bool from_head, bool to_head)
{
	struct kv_entry *src, *dst;
	struct kv_arg v;
	bool bad;
	char *c;

	src = kv_key_typed(x, &x->argv[1], KV_T_LIST, 0, &bad);
	if (bad)
		return;
	if (src == NULL) {
		rb_null(x->out);
		return;
	}
	dst = kv_key_typed(x, &x->argv[2], KV_T_LIST, 0, &bad);
	if (bad)
		return;
	c = pop_copy(src, from_head, &v.len);
	if (c == NULL) {
		rb_error(x->out, kv_err_oom);
		return;
	}
	v.p = c;
	if (dst == NULL)
		dst = kv_key_add(x, &x->argv[2], KV_T_LIST, KV_ENC_QUICKLIST, ql_new());
	if (dst != NULL && kv_list_push(x, dst, to_head, &v) == 0)
		rb_bulk(x->out, v.p, v.len);
	kv_key_drop_if_empty(x, src);
	free(c);
}

KV_CMD(lmove)
{
	bool from, to;

	if (kv_list_where(x, &x->argv[3], &from) && kv_list_where(x, &x->argv[4], &to))
		kv_lmove_here(x, from, to);
}

KV_CMD(rpoplpush)
{
	kv_lmove_here(x, false, true);
}

/* argv: [cmd, key, "left"|"right"]: pop one element (the key deleted if emptied). */
KV_CMD(tx_lpop)
{
	struct kv_entry *e = kv_key_find(x, &x->argv[1], 0);

	if (e == NULL || e->type != KV_T_LIST) {
		rb_null(x->out);
		return;
	}
	kv_list_pop_reply(x, e, x->argv[2].p[0] == 'l');
	kv_key_drop_if_empty(x, e);
}

/* argv: [cmd, key, "left"|"right", element]: push it (the list made if absent). */
KV_CMD(tx_lpush)
{
	struct kv_entry *e = kv_key_find(x, &x->argv[1], 0);

	if (e == NULL &&
	    (e = kv_key_add(x, &x->argv[1], KV_T_LIST, KV_ENC_QUICKLIST, ql_new())) == NULL)
		return;
	if (kv_list_push(x, e, x->argv[2].p[0] == 'l', &x->argv[3]) == 0)
		rb_bulk(x->out, x->argv[3].p, x->argv[3].len);
}

struct lmove_st {
	struct kv_arg pop[3], push[4];
	char *elem;
};

static void
lmove_st_fini(void *arg)
{
	struct lmove_st *st = arg;

	if (st != NULL)
		free(st->elem);
	free(st);
}

static void
lmove_pushed(struct kv_tx *tx)
{
	struct rbuf *o = &tx->kr->parts[0].out;

	kv_tx_finish(tx, o->p, o->len);
}

static void
lmove_popped(struct kv_tx *tx)
{
	struct kreq *kr = tx->kr;
	struct lmove_st *st = tx->cmd;
	struct rbuf *o = &kr->parts[0].out;
	const char *v;
	size_t len;
	struct rd r;

	rd_init(&r, o);
	if (rd_error(o) || !rd_bulk(&r, &v, &len)) {
		kv_tx_finish(tx, o->p, o->len);
		return;
	}
	st->elem = malloc(len + 1);
	if (st->elem == NULL) {
		kv_tx_finish(tx, "-OOM out of memory\r\n", 20);
		return;
	}
	memcpy(st->elem, v, len);
	st->push[3].p = st->elem;
	st->push[3].len = len;
	kreq_set_parts(kr, 1);
	kr->parts[0].shard = key_shard(&kr->argv[2]);
	kr->parts[0].fn = cmd_tx_lpush;
	kreq_part_args(&kr->parts[0], 4, st->push);
	kv_tx_steps(tx, lmove_pushed);
}

static void
lmove_probed(struct kv_tx *tx)
{
	struct kreq *kr = tx->kr;
	bool rpoplpush = kr->argc == 3;
	struct lmove_st *st = tx->cmd;
	struct kv_probe src, dst;

	kv_tx_probe(tx, 1, false, &src);
	kv_tx_probe(tx, 2, false, &dst);
	if (src.present && src.type != KV_T_LIST) {
		kv_tx_finish(
		    tx, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
		    68);
		return;
	}
	if (!src.present) {
		kv_tx_finish(tx, "$-1\r\n", 5);
		return;
	}
	if (dst.present && dst.type != KV_T_LIST) {
		kv_tx_finish(
		    tx, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
		    68);
		return;
	}
	st->pop[0] = st->push[0] = kr->argv[0];
	st->pop[1] = kr->argv[1];
	st->push[1] = kr->argv[2];
	st->pop[2].p = rpoplpush || strcasecmp(kr->argv[3].p, "right") == 0 ? "right" : "left";
	st->push[2].p = !rpoplpush && strcasecmp(kr->argv[4].p, "right") == 0 ? "right" : "left";
	st->pop[2].len = strlen(st->pop[2].p);
	st->push[2].len = strlen(st->push[2].p);
	if (kreq_set_parts(kr, 1) != 0) {
		kv_tx_finish(tx, "-OOM out of memory\r\n", 20);
		return;
	}
	kr->parts[0].shard = key_shard(&kr->argv[1]);
	kr->parts[0].fn = cmd_tx_lpop;
	kreq_part_args(&kr->parts[0], 3, st->pop);
	kv_tx_steps(tx, lmove_popped);
}

void
kv_multi_lmove(struct kreq *kr)
{
	struct kv_ctx x = {.sh = kr->kc->sh, .argc = kr->argc, .argv = kr->argv, .out = &kr->reply};
	struct lmove_st *st;
	struct kv_tx *tx;
	bool a, b;

	/* The directions are checked before any key is touched, as Redis does. */
	if (kr->argc == 5 &&
	    (!kv_list_where(&x, &kr->argv[3], &a) || !kv_list_where(&x, &kr->argv[4], &b))) {
		kr->final = &kr->reply;
		kreq_finish(kr);
		return;
	}
	tx = kv_tx_new(kr);
	if (tx == NULL) {
		kreq_finish(kr);
		return;
	}
	st = calloc(1, sizeof(*st));
	if (st == NULL) {
		kv_tx_finish(tx, "-OOM out of memory\r\n", 20);
		return;
	}
	tx->cmd = st;
	tx->cmd_fini = lmove_st_fini;
	kv_tx_key(tx, 1, true);
	kv_tx_key(tx, 2, true);
	kv_tx_lock(tx, cmd_gather_probe, 1, lmove_probed);
}
