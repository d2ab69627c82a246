/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The quicklist (see t_list.h).
 */
#include <errno.h>
#include <string.h>

#include "mem.h"
#include "obj.h"
#include "t_list.h"

struct kv_qlist *
ql_new(void)
{
	return kv_calloc(1, sizeof(struct kv_qlist));
}

static void
node_free(struct kv_qnode *n)
{
	lp_free(n->lp);
	kv_free(n);
}

void
ql_free(struct kv_qlist *ql)
{
	unsigned budget = ~0u;

	while (!ql_free_some(ql, &budget))
		budget = ~0u;
}

bool
ql_free_some(struct kv_qlist *ql, unsigned *budget)
{
	while (ql->head != NULL) {
		struct kv_qnode *n = ql->head;

		if (*budget == 0)
			return false;
		*budget = n->lp->count < *budget ? *budget - n->lp->count : 0;
		ql->head = n->next;
		node_free(n);
	}
	kv_free(ql);
	return true;
}

size_t
ql_mem(const struct kv_qlist *ql)
{
	const struct kv_qnode *n;
	size_t t = kv_mem_size(ql);

	for (n = ql->head; n != NULL; n = n->next)
		t += kv_mem_size(n) + lp_mem(n->lp);
	return t;
}

static struct kv_qnode *
node_new(void)
{
	struct kv_qnode *n = kv_malloc(sizeof(*n));

	if (n == NULL)
		return NULL;
	n->lp = lp_new();
	if (n->lp == NULL) {
		kv_free(n);
		return NULL;
	}
	n->prev = n->next = NULL;
	return n;
}

/* Link @p n after @p at (NULL: as the new head). */
static void
link_after(struct kv_qlist *ql, struct kv_qnode *at, struct kv_qnode *n)
{
	n->prev = at;
	n->next = at != NULL ? at->next : ql->head;
	if (n->next != NULL)
		n->next->prev = n;
	else
		ql->tail = n;
	if (at != NULL)
		at->next = n;
	else
		ql->head = n;
	ql->nodes++;
}

static void
unlink_node(struct kv_qlist *ql, struct kv_qnode *n)
{
	if (n->prev != NULL)
		n->prev->next = n->next;
	else
		ql->head = n->next;
	if (n->next != NULL)
		n->next->prev = n->prev;
	else
		ql->tail = n->prev;
	ql->nodes--;
	node_free(n);
}

static bool
fits(const struct kv_qnode *n, size_t len)
{
	return n != NULL &&
	       (n->lp->count == 0 || n->lp->bytes + lp_entry_size(len) <= KV_LIST_NODE_BYTES);
}

int
ql_push(struct kv_qlist *ql, bool head, const void *s, size_t len)
{
	struct kv_qnode *n = head ? ql->head : ql->tail;

	if (!fits(n, len)) {
		n = node_new();
		if (n == NULL)
			return -ENOMEM;
		link_after(ql, head ? NULL : ql->tail, n);
	}
	if (lp_insert(&n->lp, head ? 0 : n->lp->bytes, s, len) == LP_NONE) {
		if (n->lp->count == 0)
			unlink_node(ql, n);
		return -ENOMEM;
	}
	ql->count++;
	return 0;
}

bool
ql_end(const struct kv_qlist *ql, bool head, struct qpos *p)
{
	p->node = head ? ql->head : ql->tail;
	if (p->node == NULL)
		return false;
	p->off = head ? lp_first(p->node->lp) : lp_last(p->node->lp);
	return true;
}

bool
ql_index(const struct kv_qlist *ql, long long index, struct qpos *p)
{
	struct kv_qnode *n;

	p->node = NULL;
	if (index < 0 || (size_t)index >= ql->count)
		return false;
	if ((size_t)index < ql->count / 2) {
		for (n = ql->head; (size_t)index >= n->lp->count; n = n->next)
			index -= n->lp->count;
	} else {
		long long back = (long long)ql->count - 1 - index;

		for (n = ql->tail; (size_t)back >= n->lp->count; n = n->prev)
			back -= n->lp->count;
		index = (long long)n->lp->count - 1 - back;
	}
	p->node = n;
	p->off = lp_seek(n->lp, index);
	return true;
}

const void *
ql_get(const struct qpos *p, size_t *len)
{
	return lp_get(p->node->lp, p->off, len);
}

bool
ql_next(struct qpos *p)
{
	uint32_t off = lp_next(p->node->lp, p->off);

	if (off != LP_NONE) {
		p->off = off;
		return true;
	}
	p->node = p->node->next;
	if (p->node == NULL)
		return false;
	p->off = lp_first(p->node->lp);
	return true;
}

bool
ql_prev(struct qpos *p)
{
	uint32_t off = lp_prev(p->node->lp, p->off);

	if (off != LP_NONE) {
		p->off = off;
		return true;
	}
	p->node = p->node->prev;
	if (p->node == NULL)
		return false;
	p->off = lp_last(p->node->lp);
	return true;
}

int
ql_replace(struct kv_qlist *ql, struct qpos *p, const void *s, size_t len)
{
	(void)ql;
	return lp_replace(&p->node->lp, p->off, s, len) == LP_NONE ? -ENOMEM : 0;
}

/* Split a node that grew past the node size in two halves. */
static void
split_if_big(struct kv_qlist *ql, struct kv_qnode *n)
{
	struct kv_qnode *right;
	uint32_t half, pos, i;

	if (n->lp->bytes <= KV_LIST_NODE_BYTES || n->lp->count < 2)
		return;
	right = node_new();
	if (right == NULL)
		return; /* it just stays big */
	half = n->lp->count / 2;
	pos = lp_seek(n->lp, half);
	for (i = pos; i != LP_NONE; i = lp_next(n->lp, i)) {
		size_t len;
		const unsigned char *e = lp_get(n->lp, i, &len);

		if (lp_append(&right->lp, e, len) == LP_NONE) {
			node_free(right);
			return;
		}
	}
	lp_delete(&n->lp, pos, n->lp->count - half);
	link_after(ql, n, right);
}

int
ql_insert(struct kv_qlist *ql, const struct qpos *p, bool after, const void *s, size_t len)
{
	struct kv_qnode *n = p->node;
	uint32_t at = p->off;

	if (after)
		at = lp_next(n->lp, at) != LP_NONE ? lp_next(n->lp, at) : n->lp->bytes;
	if (lp_insert(&n->lp, at, s, len) == LP_NONE)
		return -ENOMEM;
	ql->count++;
	split_if_big(ql, n);
	return 0;
}

void
ql_delete(struct kv_qlist *ql, struct qpos *p, bool forward)
{
	struct kv_qnode *n = p->node;
	uint32_t before = lp_prev(n->lp, p->off);

	lp_delete(&n->lp, p->off, 1);
	ql->count--;
	if (n->lp->count == 0) {
		struct kv_qnode *to = forward ? n->next : n->prev;

		unlink_node(ql, n);
		p->node = to;
		if (to != NULL)
			p->off = forward ? lp_first(to->lp) : lp_last(to->lp);
		return;
	}
	if (forward) {
		if (p->off >= n->lp->bytes) { /* it was the node's last */
			p->node = n->next;
			if (p->node != NULL)
				p->off = lp_first(p->node->lp);
		}
	} else if (before != LP_NONE) {
		p->off = before;
	} else {
		p->node = n->prev;
		if (p->node != NULL)
			p->off = lp_last(p->node->lp);
	}
}

void
ql_delete_ends(struct kv_qlist *ql, bool head, size_t n)
{
	while (n > 0 && ql->count > 0) {
		struct kv_qnode *node = head ? ql->head : ql->tail;

		if (n >= node->lp->count) {
			n -= node->lp->count;
			ql->count -= node->lp->count;
			unlink_node(ql, node);
			continue;
		}
		if (head)
			lp_delete(&node->lp, 0, (uint32_t)n);
		else
			lp_delete(&node->lp, lp_seek(node->lp, -(long long)n), (uint32_t)n);
		ql->count -= n;
		n = 0;
	}
}
