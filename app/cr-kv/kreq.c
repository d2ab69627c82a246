/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Requests: the copy of a command that must wait for its turn or travel to other shards,
 * and its per-shard parts (see kv.h for the model). Small requests come from the
 * shard's free list; nothing here knows about connections beyond the pointer it keeps.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kv.h"

/* Requests kept on a shard's free list at most. */
#define FREE_MAX 4096u

struct kreq *
kreq_new(struct kv_shard *sh, struct kconn *kc, const struct kv_cmd *cmd, uint32_t argc,
	 const struct kv_arg *argv)
{
	size_t size = sizeof(struct kreq) + kv_args_size(argv, argc);
	struct kreq *kr;

	if (size <= KREQ_SMALL && sh->free_reqs != NULL) {
		kr = sh->free_reqs;
		sh->free_reqs = kr->next;
		sh->nfree--;
		size = KREQ_SMALL;
	} else {
		size = size <= KREQ_SMALL ? KREQ_SMALL : size;
		kr = malloc(size);
		if (kr == NULL)
			return NULL;
	}
	memset(kr, 0, sizeof(*kr));
	kr->size = size;
	kr->kc = kc;
	kr->cmd = cmd;
	kr->parts = &kr->one;
	kr->one.kr = kr;
	rb_init(&kr->one.out, kr->one.inl, sizeof(kr->one.inl));
	rb_init(&kr->reply, NULL, 0);
	kr->argc = argc;
	kr->argv = (struct kv_arg *)kr->data;
	kv_args_copy(kr->argv, kr->data + argc * sizeof(struct kv_arg), argv, argc);
	return kr;
}

size_t
kv_args_size(const struct kv_arg *argv, uint32_t argc)
{
	size_t size = argc * sizeof(struct kv_arg);
	uint32_t i;

	for (i = 0; i < argc; i++)
		size += argv[i].len + 1;
	return size;
}

char *
kv_args_copy(struct kv_arg *dst, char *d, const struct kv_arg *argv, uint32_t argc)
{
	uint32_t i;

	for (i = 0; i < argc; i++) {
		memcpy(d, argv[i].p, argv[i].len);
		d[argv[i].len] = '\0';
		dst[i].p = d;
		dst[i].len = argv[i].len;
		d += argv[i].len + 1;
	}
	return d;
}

void
kreq_free(struct kv_shard *sh, struct kreq *kr)
{
	uint32_t i;

	rb_fini(&kr->one.out);
	rb_fini(&kr->reply);
	if (kr->parts != &kr->one) {
		for (i = 0; i < kr->nparts; i++)
			rb_fini(&kr->parts[i].out);
		free(kr->parts);
	}
	free(kr->argpool);
	if (kr->state_fini != NULL)
		kr->state_fini(kr->state);
	else
		free(kr->state);
	if (kr->size == KREQ_SMALL && sh->nfree < FREE_MAX) {
		kr->next = sh->free_reqs;
		sh->free_reqs = kr;
		sh->nfree++;
	} else {
		free(kr);
	}
}

void
kreq_free_list(struct kv_shard *sh)
{
	while (sh->free_reqs != NULL) {
		struct kreq *kr = sh->free_reqs;

		sh->free_reqs = kr->next;
		free(kr);
	}
	sh->nfree = 0;
}

int
kreq_set_parts(struct kreq *kr, uint32_t n)
{
	uint32_t i;

	if (kr->parts != &kr->one) {
		for (i = 0; i < kr->nparts; i++)
			rb_fini(&kr->parts[i].out);
		free(kr->parts);
	} else {
		rb_fini(&kr->one.out);
	}
	if (n <= 1) {
		kr->parts = &kr->one;
		memset(&kr->one, 0, sizeof(kr->one));
	} else {
		kr->parts = calloc(n, sizeof(*kr->parts));
		if (kr->parts == NULL) {
			kr->parts = &kr->one;
			n = 1;
			memset(&kr->one, 0, sizeof(kr->one));
			kr->nparts = 0;
			return -ENOMEM;
		}
	}
	for (i = 0; i < n; i++) {
		kr->parts[i].kr = kr;
		kr->parts[i].fn = kr->cmd != NULL ? kr->cmd->fn : NULL;
		rb_init(&kr->parts[i].out, kr->parts[i].inl, sizeof(kr->parts[i].inl));
	}
	kr->nparts = n;
	kr->sent = 0;
	kr->left = n;
	return 0;
}

void
kreq_part_args(struct kpart *p, uint32_t argc, struct kv_arg *argv)
{
	p->argc = argc;
	p->argv = argv;
}

/* Redis Cluster's hash tag: the bytes between the first '{' and the next '}', when there
 * are some; keys with the same tag are placed on the same shard. */
static bool
hash_tag(const char *p, size_t len, const char **tag, size_t *n)
{
	const char *open = memchr(p, '{', len), *close;

	if (open == NULL)
		return false;
	close = memchr(open + 1, '}', len - (size_t)(open + 1 - p));
	if (close == NULL || close == open + 1)
		return false;
	*tag = open + 1;
	*n = (size_t)(close - open - 1);
	return true;
}

unsigned
key_shard_h(const char *p, size_t len, uint64_t h)
{
	const char *tag;
	size_t n;

	if (kv.nshards == 1)
		return 0;
	return kv_owner(hash_tag(p, len, &tag, &n) ? kv_hash(tag, n) : h);
}

unsigned
key_shard(const struct kv_arg *a)
{
	const char *tag;
	size_t n;

	if (kv.nshards == 1)
		return 0;
	return kv_owner(hash_tag(a->p, a->len, &tag, &n) ? kv_hash(tag, n) : kv_hash(a->p, a->len));
}

/* One part per shard holding keys, each with argv[0] and its keys (and their values, for
 * MSET: @p step 2), in the order given. */
int
kreq_split_keys(struct kreq *kr, unsigned step)
{
	unsigned shard_of[CR_MAX_LCORES];
	uint32_t counts[CR_MAX_LCORES] = {0}, pos = 0, i, n = 0;
	struct kv_arg *pool;

	for (i = 1; i < kr->argc; i += step)
		counts[key_shard(&kr->argv[i])]++;
	for (i = 0; i < kv.nshards; i++)
		if (counts[i] != 0)
			shard_of[n++] = i;
	pool = malloc(sizeof(*pool) * (kr->argc + n));
	if (pool == NULL || kreq_set_parts(kr, n) != 0) {
		free(pool);
		return -ENOMEM;
	}
	free(kr->argpool);
	kr->argpool = pool;
	for (i = 0; i < n; i++) {
		struct kpart *p = &kr->parts[i];
		uint32_t k, j = 0;

		p->shard = shard_of[i];
		p->argv = pool + pos;
		p->argv[j++] = kr->argv[0];
		for (k = 1; k < kr->argc; k += step) {
			if (key_shard(&kr->argv[k]) != p->shard)
				continue;
			memcpy(&p->argv[j], &kr->argv[k], sizeof(*p->argv) * step);
			j += step;
		}
		p->argc = j;
		pos += j;
	}
	return 0;
}
