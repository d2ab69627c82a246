/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/eal internals shared between its source files; never installed.
 */
#ifndef EAL_INTERNAL_H
#define EAL_INTERNAL_H

#include <stddef.h>

#include "cr_log.h"

/** The "lib.eal" log component. */
extern struct cr_log_component cr__eal_log;

/** snprintf into an optional error buffer (@p err may be NULL or @p len 0). */
void cr__errf(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/** Called by cr__corelist_walk() for each element, lo <= hi; returns 0 to go on. */
typedef int (*cr__corelist_fn)(unsigned lo, unsigned hi, void *ctx);

/**
 * Check the syntax of corelist @p s and, when @p fn is not NULL, call it for each element
 * in the order written. Ids above @p max_id are rejected.
 *
 * @return 0, -EINVAL with one line in @p err, or whatever @p fn returned (it writes its
 *         own message).
 */
int cr__corelist_walk(const char *s, unsigned max_id, cr__corelist_fn fn, void *ctx, char *err,
		      size_t errlen);

#endif /* EAL_INTERNAL_H */
