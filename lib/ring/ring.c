/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cr_eal.h"
#include "cr_ring.h"

static unsigned
mode_flags(enum cr_ring_mode mode)
{
	switch (mode) {
	case CR_RING_SPSC:
		return RING_F_SP_ENQ | RING_F_SC_DEQ;
	/*
	 * The one consumer dequeues in the producers' mode too. HTS/RTS producers update the
	 * prod head/tail as one 64-bit word; the plain SC dequeue reads the 32-bit tail half,
	 * which ThreadSanitizer (and the C11 model) cannot pair with the 64-bit release. An
	 * uncontended CAS on the foreign path is the price.
	 */
	case CR_RING_MPSC_HTS:
		return RING_F_MP_HTS_ENQ | RING_F_MC_HTS_DEQ;
	case CR_RING_MPSC_RTS:
		return RING_F_MP_RTS_ENQ | RING_F_MC_RTS_DEQ;
	}
	return UINT32_MAX;
}

struct cr_ring *
cr_ring_create(const char *name, unsigned count, enum cr_ring_mode mode, int numa_node)
{
	char rname[RTE_RING_NAMESIZE];
	unsigned flags = mode_flags(mode);
	ssize_t size;
	struct rte_ring *r;
	int rc;

	if (flags == UINT32_MAX || count < 2 || (count & (count - 1)) != 0) {
		errno = EINVAL;
		return NULL;
	}
	size = rte_ring_get_memsize_elem(sizeof(struct cr_msg), count);
	if (size < 0) {
		errno = -size;
		return NULL;
	}
	r = cr_numa_zalloc((size_t)size, numa_node);
	if (r == NULL)
		return NULL;
	snprintf(rname, sizeof(rname), "%s", name != NULL ? name : "cr");
	/* rte_ring_init() only formats our memory: no memzone, no EAL. */
	rc = rte_ring_init(r, rname, count, flags);
	if (rc != 0) {
		cr_numa_free(r);
		errno = -rc;
		return NULL;
	}
	return (struct cr_ring *)r;
}

void
cr_ring_free(struct cr_ring *r)
{
	cr_numa_free(r);
}
