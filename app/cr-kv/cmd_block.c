/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The blocking pops on their shard (see bpop.h): each pops as its non-blocking form
 * would, or, with nothing to pop, waits there (kv_bw_park()) to be run again when one of
 * its keys is made. Their timeout is checked on the client's lcore first (precheck).
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv.h"
#include "t_list.h"

/* Redis 7.0's getTimeoutFromObjectOrReply(UNIT_SECONDS): seconds as a long double, to ms
 * rounded up (so that 0.0001 is 1 ms, not 0, for ever); a product out of range becomes
 * LLONG_MIN, as the x86 conversion makes it, hence "negative". */
static bool
timeout_arg(struct kv_ctx *x, const struct kv_arg *a)
{
	long double v, ms;
	long long t;

	if (!kv_parse_ld(a->p, a->len, &v)) {
		rb_error(x->out, "ERR timeout is not a float or out of range");
		return false;
	}
	ms = ceill(v * 1000.0L);
	t = ms > -9223372036854775808.0L && ms < 9223372036854775808.0L ? (long long)ms : LLONG_MIN;
	if (t < 0) {
		rb_error(x->out, "ERR timeout is negative");
		return false;
	}
	/* Redis 7.0 has no upper bound (7.2 says "timeout is out of range"); a timeout of
	 * more than about 35 years waits for ever here (bpop.c). */
	return true;
}

/* Where the timeout is: BLMPOP, BZMPOP first; BLMOVE after its directions (checked
 * before it); the others last. */
static const struct kv_arg *
timeout_of(struct kv_ctx *x, bool *ok)
{
	const char *n = x->argv[0].p;
	bool dummy;

	*ok = true;
	if (strcasecmp(n, "blmpop") == 0 || strcasecmp(n, "bzmpop") == 0)
		return &x->argv[1];
	if (strcasecmp(n, "blmove") == 0) {
		*ok =
		    kv_list_where(x, &x->argv[3], &dummy) && kv_list_where(x, &x->argv[4], &dummy);
		return &x->argv[5];
	}
	return &x->argv[x->argc - 1];
}

bool
precheck_bpop(struct kv_ctx *x)
{
	bool ok;
	const struct kv_arg *t = timeout_of(x, &ok);

	return ok && timeout_arg(x, t);
}

long long
kv_bpop_timeout_ms(struct kv_ctx *x)
{
	bool ok;
	const struct kv_arg *a = timeout_of(x, &ok);
	long double v = 0;

	(void)kv_parse_ld(a->p, a->len, &v); /* checked by the precheck */
	v = ceill(v * 1000.0L);
	return v < 9223372036854775808.0L ? (long long)v : LLONG_MAX;
}

/* Nothing to pop: wait for argv[first..first + n) (and not with dst locked). */
static void
wait_for(struct kv_ctx *x, unsigned type, uint32_t first, uint32_t n, int dst)
{
	uint32_t small[16] = {0}, *idx = n <= 16 ? small : malloc(n * sizeof(*idx)), i;
	int rc = -ENOMEM;

	if (idx != NULL) {
		for (i = 0; i < n; i++)
			idx[i] = first + i;
		rc = kv_bw_park(x, type, idx, n, dst);
	}
	if (idx != small)
		free(idx);
	if (rc == -ENOMEM)
		rb_error(x->out, kv_err_oom);
	else if (rc != 0 && x->from == NULL && dst >= 0)
		rb_null(x->out); /* BLMOVE run by EXEC: Redis's null inside MULTI */
	else if (rc != 0 && (x->from == NULL || !x->from->serving))
		rb_raw(x->out, "*-1\r\n", 5); /* it cannot block here: as a timeout */
	/* Run again for a waiter and still nothing: it keeps waiting, nothing replied. */
}

/* blockingPopGenericCommand(): the first existing key of the keys argv[1..argc-2]; of
 * another type, WRONGTYPE. */
static void
bpop(struct kv_ctx *x, unsigned type, bool end)
{
	uint32_t i, n = x->argc - 2;

	for (i = 1; i <= n; i++) {
		const struct kv_arg *k = &x->argv[i];
		struct kv_entry *e = kv_key_find(x, k, 0);

		if (e == NULL)
			continue;
		if (e->type != type) {
			rb_error(x->out, kv_err_wrongtype);
			return;
		}
		if (type == KV_T_LIST) {
			rb_array(x->out, 2);
			rb_bulk(x->out, k->p, k->len);
			kv_list_pop_reply(x, e, end);
		} else {
			kv_zpop_reply(x, e, !end, 1, ZPOP_KEY, k);
		}
		kv_key_drop_if_empty(x, e);
		return;
	}
	wait_for(x, type, 1, n, -1);
}

KV_CMD(blpop)
{
	bpop(x, KV_T_LIST, true);
}

KV_CMD(brpop)
{
	bpop(x, KV_T_LIST, false);
}

KV_CMD(bzpopmin)
{
	bpop(x, KV_T_ZSET, true);
}

KV_CMD(bzpopmax)
{
	bpop(x, KV_T_ZSET, false);
}

static void
bmove(struct kv_ctx *x, bool from, bool to)
{
	struct kv_entry *e = kv_key_find(x, &x->argv[1], 0);

	if (e != NULL && e->type != KV_T_LIST)
		rb_error(x->out, kv_err_wrongtype);
	else if (e != NULL)
		kv_lmove_here(x, from, to);
	else
		wait_for(x, KV_T_LIST, 1, 1, 2);
}

KV_CMD(blmove)
{
	bool from, to;

	if (kv_list_where(x, &x->argv[3], &from) && kv_list_where(x, &x->argv[4], &to))
		bmove(x, from, to);
}

KV_CMD(brpoplpush)
{
	bmove(x, false, true);
}

static void
bmpop(struct kv_ctx *x, bool zset)
{
	struct kv_mpop m;

	if (kv_mpop_parse(x, 2, zset, &m) && !kv_mpop_here(x, &m, zset))
		wait_for(x, zset ? KV_T_ZSET : KV_T_LIST, m.first, m.nkeys, -1);
}

KV_CMD(blmpop)
{
	bmpop(x, false);
}

KV_CMD(bzmpop)
{
	bmpop(x, true);
}
