/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * AUTH, --requirepass and CONFIG SET requirepass, as Redis 7.0 has them for its one user,
 * "default": without a password every client is authenticated from the start (and AUTH
 * <password> is an error); with one, a new client gets -NOAUTH for everything but AUTH,
 * HELLO and QUIT until it authenticates. A client authenticated before a password was
 * set stays so, as in Redis (its flag is set when it connects).
 *
 * The password is read by every lcore and set by any (CONFIG SET): each value is an
 * immutable block published with one atomic pointer; a replaced block is kept on a list
 * until the process ends (an lcore may still be reading it), so a reader needs no lock.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv.h"

struct kv_pass {
	struct kv_pass *older; /* the blocks it replaced, freed at the end */
	size_t len;	       /* 0: no password */
	char p[];
};

/* release: pairs with the acquire in current() */
static _Atomic(struct kv_pass *) pass;

static const struct kv_pass *
current(void)
{
	return atomic_load_explicit(&pass, memory_order_acquire);
}

int
kv_auth_set(const char *p, size_t len)
{
	struct kv_pass *n = malloc(sizeof(*n) + len + 1), *old;

	if (n == NULL)
		return -ENOMEM;
	n->len = len;
	memcpy(n->p, p, len);
	n->p[len] = '\0';
	old = atomic_load_explicit(&pass, memory_order_relaxed);
	do
		n->older = old;
	while (!atomic_compare_exchange_weak_explicit(&pass, &old, n, memory_order_release,
						      memory_order_relaxed));
	return 0;
}

bool
kv_auth_required(void)
{
	const struct kv_pass *c = current();

	return c != NULL && c->len != 0;
}

const char *
kv_auth_password(void)
{
	const struct kv_pass *c = current();

	return c != NULL ? c->p : "";
}

/* Compare in a time that does not depend on where they differ (Redis's
 * time_independent_strcmp()). */
static bool
same_secret(const char *a, size_t alen, const char *b, size_t blen)
{
	unsigned char diff = alen != blen;
	size_t i;

	for (i = 0; i < alen; i++)
		diff |= (unsigned char)(a[i] ^ b[i % (blen ? blen : 1)]);
	return blen != 0 && diff == 0;
}

bool
kv_auth_check(const struct kv_arg *user, const struct kv_arg *pw)
{
	const struct kv_pass *c = current();

	if (user != NULL && strcmp(user->p, "default") != 0)
		return false;
	if (c == NULL || c->len == 0)
		return true; /* "default" has no password: any is accepted */
	return same_secret(pw->p, pw->len, c->p, c->len);
}

void
kv_auth_fini(void)
{
	struct kv_pass *c = atomic_exchange_explicit(&pass, NULL, memory_order_acquire);

	while (c != NULL) {
		struct kv_pass *o = c->older;

		free(c);
		c = o;
	}
}

KV_CMD(auth)
{
	const struct kv_arg *user = NULL, *pw = &x->argv[1];

	if (x->argc > 3) {
		rb_error(x->out, kv_err_syntax);
		return;
	}
	if (x->argc == 3) {
		user = &x->argv[1];
		pw = &x->argv[2];
	} else if (!kv_auth_required()) {
		rb_error(x->out, "ERR AUTH <password> called without any password configured for "
				 "the default user. Are you sure your configuration is correct?");
		return;
	}
	if (!kv_auth_check(user, pw)) {
		rb_error(x->out, "WRONGPASS invalid username-password pair or user is disabled.");
		return;
	}
	x->kc->authed = true;
	rb_ok(x->out);
}
