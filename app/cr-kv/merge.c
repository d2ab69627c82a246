/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The reply of a command that ran as parts on several shards, made from the parts'
 * replies (enum kv_merge): sums, arrays interleaved back into key order, concatenations.
 */
#include <stdlib.h>
#include <string.h>

#include "kv.h"

/* Parse one RESP element at *p (within end): return its length, 0 if malformed. */
static size_t
element_len(const char *p, const char *end)
{
	const char *nl = memchr(p, '\n', (size_t)(end - p));
	long long n;

	if (nl == NULL)
		return 0;
	if (p[0] != '$')
		return (size_t)(nl + 1 - p);
	n = strtoll(p + 1, NULL, 10);
	if (n < 0)
		return (size_t)(nl + 1 - p);
	return (size_t)(nl + 1 - p) + (size_t)n + 2;
}

/* The first part that failed (its reply is an error), or NULL. */
static struct kpart *
failed_part(struct kpart *parts, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++)
		if (parts[i].out.len > 0 && parts[i].out.p[0] == '-')
			return &parts[i];
	return NULL;
}

static const char *
skip_line(const char *p, const char *end)
{
	const char *nl = memchr(p, '\n', (size_t)(end - p));

	return nl != NULL ? nl + 1 : end;
}

void
kv_merge(struct kreq *kr, struct rbuf *out)
{
	kv_merge_parts(kr, kr->parts, kr->nparts, out);
}

void
kv_merge_parts(struct kreq *kr, struct kpart *parts, uint32_t nparts, struct rbuf *out)
{
	struct kpart *bad = failed_part(parts, nparts);
	uint32_t i;

	if (bad != NULL && kr->cmd->merge < KV_MERGE_INFO) {
		rb_raw(out, bad->out.p, bad->out.len);
		return;
	}
	switch (kr->cmd->merge) {
	case KV_MERGE_ONE:
		rb_raw(out, parts[0].out.p, parts[0].out.len);
		break;
	case KV_MERGE_SUM: {
		long long t = 0;

		for (i = 0; i < nparts; i++)
			if (parts[i].out.len > 1)
				t += strtoll(parts[i].out.p + 1, NULL, 10);
		rb_int(out, t);
		break;
	}
	case KV_MERGE_OK:
		rb_ok(out);
		break;
	case KV_MERGE_MGET: {
		const char *cur[CR_MAX_LCORES], *end[CR_MAX_LCORES];
		uint32_t k;

		for (i = 0; i < nparts; i++) {
			struct rbuf *b = &parts[i].out;

			end[i] = b->p + b->len;
			cur[i] = skip_line(b->p, end[i]); /* the array header */
		}
		rb_array(out, kr->argc - 1);
		for (k = 1; k < kr->argc; k++) {
			unsigned s = key_shard(&kr->argv[k]);
			size_t n;

			for (i = 0; i < nparts && parts[i].shard != s; i++)
				;
			if (i == nparts || cur[i] >= end[i]) {
				rb_null(out);
				continue;
			}
			n = element_len(cur[i], end[i]);
			rb_raw(out, cur[i], n);
			cur[i] += n;
		}
		break;
	}
	case KV_MERGE_KEYS: {
		long long t = 0;

		for (i = 0; i < nparts; i++)
			t += strtoll(parts[i].out.p + 1, NULL, 10);
		rb_array(out, t);
		for (i = 0; i < nparts; i++) {
			struct rbuf *b = &parts[i].out;
			const char *body = skip_line(b->p, b->p + b->len);

			rb_raw(out, body, (size_t)(b->p + b->len - body));
		}
		break;
	}
	case KV_MERGE_RANDOM: {
		struct kv_shard *sh = kr->kc->sh;
		uint32_t have = 0, pick;

		for (i = 0; i < nparts; i++)
			if (parts[i].out.p[1] != '-')
				have++;
		if (have == 0) {
			rb_null(out);
			break;
		}
		pick = (uint32_t)(kv_rand(&sh->crng) % have);
		for (i = 0; i < nparts; i++) {
			if (parts[i].out.p[1] == '-')
				continue;
			if (pick-- == 0) {
				rb_raw(out, parts[i].out.p, parts[i].out.len);
				break;
			}
		}
		break;
	}
	case KV_MERGE_INFO:
		kv_info_merge(kr, parts, nparts, out);
		break;
	case KV_MERGE_SLOWLOG:
		kv_slowlog_merge(kr, parts, nparts, out);
		break;
	case KV_MERGE_RESETSTAT:
		rb_ok(out);
		break;
	case KV_MERGE_PUBSUB:
		kv_ps_merge(kr, parts, nparts, out);
		break;
	}
}
