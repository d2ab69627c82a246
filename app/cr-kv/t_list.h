/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Lists: a quicklist, as Redis 7.0 always encodes them: a doubly linked list of nodes,
 * each a compact list (lp.h) of up to 8 KB of elements (list-max-listpack-size -2); an
 * element bigger than that has a node of its own. Pushes and pops at either end touch
 * one node; an index walks nodes by their counts, from the nearer end.
 *
 * A position (struct qpos) is a node and an offset in it, valid until the list changes
 * other than through the function given it.
 */
#ifndef CR_KV_T_LIST_H
#define CR_KV_T_LIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lp.h"

struct kv_qnode {
	struct kv_qnode *prev, *next;
	struct lp *lp;
};

struct kv_qlist {
	struct kv_qnode *head, *tail;
	size_t count, nodes;
};

struct qpos {
	struct kv_qnode *node; /* NULL: no element (past either end) */
	uint32_t off;
};

struct kv_qlist *ql_new(void);
void ql_free(struct kv_qlist *ql);
bool ql_free_some(struct kv_qlist *ql, unsigned *budget);
size_t ql_mem(const struct kv_qlist *ql);

/* @return 0 or -ENOMEM. */
int ql_push(struct kv_qlist *ql, bool head, const void *s, size_t len);
/* The element at @p index (0 <= index < count). */
bool ql_index(const struct kv_qlist *ql, long long index, struct qpos *p);
/* The first or last element. */
bool ql_end(const struct kv_qlist *ql, bool head, struct qpos *p);
const void *ql_get(const struct qpos *p, size_t *len);
/* Step to the next (prev) element; false (and p->node NULL) past the end. */
bool ql_next(struct qpos *p);
bool ql_prev(struct qpos *p);
/* Replace the element at @p p (p stays on it). @return 0 or -ENOMEM. */
int ql_replace(struct kv_qlist *ql, struct qpos *p, const void *s, size_t len);
/* Insert before or after the element at @p p. @return 0 or -ENOMEM. */
int ql_insert(struct kv_qlist *ql, const struct qpos *p, bool after, const void *s, size_t len);
/* Delete the element at @p p; p moves to the element after it (@p forward) or before. */
void ql_delete(struct kv_qlist *ql, struct qpos *p, bool forward);
/* Delete @p n elements from the head (@p head) or the tail. */
void ql_delete_ends(struct kv_qlist *ql, bool head, size_t n);

#endif /* CR_KV_T_LIST_H */
