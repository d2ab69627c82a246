/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Leases over the reactor's retirement holds. The hold itself (count, closed bit and
 * incarnation in one atomic word) lives in the static lcore record, so a release never
 * dereferences anything that can be freed.
 */
#include <errno.h>
#include <stddef.h>

#include "cr_lease.h"
#include "reactor_hold.h"

int
cr_lease_acquire(struct cr_lease *l)
{
	unsigned lcore;
	uint64_t inc;
	int rc;

	if (atomic_load(&l->self) == l)
		return -EBUSY;
	rc = cr_reactor_hold(&lcore, &inc);
	if (rc != 0)
		return rc;
	l->lcore = lcore;
	l->incarnation = inc;
	atomic_store(&l->self, l);
	return 0;
}

int
cr_lease_release(struct cr_lease *l)
{
	struct cr_lease *self = atomic_load(&l->self);

	if (self == NULL)
		return -EALREADY;
	if (self != l)
		return -EINVAL; /* a copy: the original still holds */
	/* Exactly one releaser wins, however many threads race. */
	if (!atomic_compare_exchange_strong(&l->self, &self, NULL))
		return -EALREADY;
	cr_reactor_unhold(l->lcore, l->incarnation);
	return 0;
}

bool
cr_lease_active(const struct cr_lease *l)
{
	return atomic_load(&((struct cr_lease *)l)->self) == l;
}

unsigned
cr_lease_lcore(const struct cr_lease *l)
{
	return l->lcore;
}

uint64_t
cr_lease_incarnation(const struct cr_lease *l)
{
	return l->incarnation;
}

int
cr_lease_move(struct cr_lease *dst, struct cr_lease *src)
{
	struct cr_lease *self = src;

	if (atomic_load(&dst->self) == dst)
		return -EBUSY;
	if (!atomic_compare_exchange_strong(&src->self, &self, NULL))
		return -EALREADY;
	dst->lcore = src->lcore;
	dst->incarnation = src->incarnation;
	atomic_store(&dst->self, dst);
	return 0;
}
