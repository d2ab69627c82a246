/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Set commands on one key, as Redis 7.0's t_set.c (SMOVE and the set algebra of several
 * keys are in cmd_multi.c).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv.h"
#include "t_set.h"

static struct kv_entry *
set_read(struct kv_ctx *x, bool *bad)
{
	return kv_key_typed(x, &x->argv[1], KV_T_SET, KV_FIND_READ, bad);
}

static struct kv_entry *
set_write(struct kv_ctx *x, bool *bad)
{
	return kv_key_typed(x, &x->argv[1], KV_T_SET, 0, bad);
}

/* setTypeCreate(): the encoding follows the first member. */
struct kv_entry *
kv_set_create(struct kv_ctx *x, const struct kv_arg *k, const struct kv_arg *first)
{
	unsigned enc;
	void *obj = set_new_for(first->p, first->len, &enc);

	return kv_key_add(x, k, KV_T_SET, enc, obj);
}

KV_CMD(sadd)
{
	struct kv_entry *e;
	long long added = 0;
	bool bad;
	uint32_t j;

	e = set_write(x, &bad);
	if (bad)
		return;
	if (e == NULL && (e = kv_set_create(x, &x->argv[1], &x->argv[2])) == NULL)
		return;
	for (j = 2; j < x->argc; j++) {
		int r = set_add(e, x->argv[j].p, x->argv[j].len);

		if (r < 0) {
			rb_error(x->out, kv_err_oom);
			return;
		}
		added += r;
	}
	rb_int(x->out, added);
}

KV_CMD(srem)
{
	kv_remove_members(x, KV_T_SET, set_rem);
}

KV_CMD(sismember)
{
	bool bad;
	struct kv_entry *e = set_read(x, &bad);

	if (!bad)
		rb_int(x->out, e != NULL && set_has(e, x->argv[2].p, x->argv[2].len));
}

KV_CMD(smismember)
{
	bool bad;
	struct kv_entry *e = set_read(x, &bad);
	uint32_t j;

	if (bad)
		return;
	rb_array(x->out, x->argc - 2);
	for (j = 2; j < x->argc; j++)
		rb_int(x->out, e != NULL && set_has(e, x->argv[j].p, x->argv[j].len));
}

KV_CMD(scard)
{
	bool bad;
	struct kv_entry *e = set_read(x, &bad);

	if (!bad)
		rb_int(x->out, e != NULL ? (long long)set_len(e) : 0);
}

void
kv_set_reply_all(struct kv_ctx *x, struct kv_entry *e)
{
	struct set_iter it;
	const char *m;
	size_t len;

	rb_array(x->out, (long long)set_len(e));
	set_iter_init(&it, e);
	while (set_iter_next(&it, &m, &len))
		rb_bulk(x->out, m, len);
	set_iter_end(&it);
}

KV_CMD(smembers)
{
	bool bad;
	struct kv_entry *e = set_read(x, &bad);

	if (bad)
		return;
	if (e == NULL)
		rb_array(x->out, 0);
	else
		kv_set_reply_all(x, e);
}

static void
reply_random(struct kv_ctx *x, struct kv_entry *e)
{
	struct set_buf buf;
	const char *m;
	size_t len;

	set_random(e, &x->sh->rng, &buf, &m, &len);
	rb_bulk(x->out, m, len);
}

/* @p count distinct members at random, each replied; removed too if @p pop. */
static void
random_distinct(struct kv_ctx *x, struct kv_entry *e, size_t count, bool pop)
{
	size_t n = set_len(e), i = 0, j;
	struct set_iter it;
	struct kv_arg *all = malloc(n * sizeof(*all)), t;
	char *copy;
	size_t bytes = 0;
	const char *m;
	size_t len;

	if (all == NULL) {
		rb_error(x->out, kv_err_oom);
		return;
	}
	set_iter_init(&it, e);
	while (set_iter_next(&it, &m, &len))
		bytes += len + 1;
	set_iter_end(&it);
	copy = malloc(bytes + 1);
	if (copy == NULL) {
		free(all);
		rb_error(x->out, kv_err_oom);
		return;
	}
	bytes = 0;
	set_iter_init(&it, e);
	while (set_iter_next(&it, &m, &len)) {
		memcpy(copy + bytes, m, len);
		all[i].p = copy + bytes;
		all[i++].len = len;
		bytes += len + 1;
	}
	set_iter_end(&it);
	rb_array(x->out, (long long)count);
	for (i = 0; i < count; i++) {
		j = i + (size_t)(kv_rand(&x->sh->rng) % (n - i));
		t = all[i];
		all[i] = all[j];
		all[j] = t;
		rb_bulk(x->out, all[i].p, all[i].len);
		if (pop)
			set_rem(e, all[i].p, all[i].len);
	}
	free(copy);
	free(all);
}

KV_CMD(spop)
{
	struct kv_entry *e;
	long long count;
	bool bad;

	if (x->argc > 3) {
		rb_error(x->out, kv_err_syntax);
		return;
	}
	if (x->argc == 2) {
		struct set_buf buf;
		const char *m;
		size_t len;

		e = set_write(x, &bad);
		if (bad)
			return;
		if (e == NULL) {
			rb_null(x->out);
			return;
		}
		set_random(e, &x->sh->rng, &buf, &m, &len);
		rb_bulk(x->out, m, len);
		/* m may point into the set: it was copied into the reply first */
		set_rem(e, x->out->p + x->out->len - 2 - len, len);
		kv_key_drop_if_empty(x, e);
		return;
	}
	if (!kv_arg_positive(x, &x->argv[2], NULL, &count))
		return;
	e = set_write(x, &bad);
	if (bad)
		return;
	if (e == NULL || count == 0) {
		rb_array(x->out, 0);
		return;
	}
	if ((size_t)count >= set_len(e)) {
		kv_set_reply_all(x, e);
		kv_entry_delete(x->sh->store, e);
		return;
	}
	random_distinct(x, e, (size_t)count, true);
}

KV_CMD(srandmember)
{
	struct kv_entry *e;
	long long l;
	size_t count, i;
	bool bad, uniq = true;

	if (x->argc > 3) {
		rb_error(x->out, kv_err_syntax);
		return;
	}
	if (x->argc == 2) {
		e = set_read(x, &bad);
		if (bad)
			return;
		if (e == NULL)
			rb_null(x->out);
		else
			reply_random(x, e);
		return;
	}
	if (!kv_arg_ll_range(x, &x->argv[2], -LLONG_MAX, LLONG_MAX, NULL, &l))
		return;
	if (l < 0) {
		uniq = false;
		count = (size_t)-l;
	} else {
		count = (size_t)l;
	}
	e = set_read(x, &bad);
	if (bad)
		return;
	if (e == NULL || count == 0) {
		rb_array(x->out, 0);
		return;
	}
	if (!uniq || count == 1) {
		rb_array(x->out, (long long)count);
		for (i = 0; i < count; i++)
			reply_random(x, e);
		return;
	}
	if (count >= set_len(e)) {
		kv_set_reply_all(x, e);
		return;
	}
	random_distinct(x, e, count, false);
}

static void
sscan_visit(const char *m, size_t len, void *arg)
{
	struct kv_scan_walk *w = arg;

	w->visited++;
	if (!kv_scan_match(w->o, m, len))
		return;
	rb_bulk(&w->items, m, len);
	w->n++;
}

static uint64_t
sscan_step(struct kv_entry *e, uint64_t cursor, struct kv_scan_walk *w)
{
	return set_scan(e, cursor, sscan_visit, w);
}

KV_CMD(sscan)
{
	kv_scan_collection(x, KV_T_SET, sscan_step);
}
