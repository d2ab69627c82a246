/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cr_mailbox.h"

int
cr_mailbox_init(struct cr_mailbox *mb, const struct cr_cpuset *sources, unsigned ring_size,
		unsigned foreign_size, enum cr_ring_mode foreign_mode, int numa_node)
{
	char name[32];
	unsigned id;

	memset(mb, 0, sizeof(*mb));
	if (foreign_mode == CR_RING_SPSC)
		return -EINVAL;
	for (id = 0; id < CR_MAX_LCORES; id++) {
		if (!cr_cpuset_isset(sources, id))
			continue;
		snprintf(name, sizeof(name), "mbox-from-%u", id);
		mb->from[id] = cr_ring_create(name, ring_size, CR_RING_SPSC, numa_node);
		if (mb->from[id] == NULL)
			goto out_free_rings;
		mb->src[mb->nsrc++] = (uint16_t)id;
	}
	mb->foreign = cr_ring_create("mbox-foreign", foreign_size, foreign_mode, numa_node);
	if (mb->foreign == NULL)
		goto out_free_rings;
	atomic_init(&mb->admit, 0);
	return 0;

out_free_rings:
	{
		int err = errno;

		cr_mailbox_fini(mb);
		return -err;
	}
}

void
cr_mailbox_fini(struct cr_mailbox *mb)
{
	unsigned i;

	for (i = 0; i < mb->nsrc; i++) {
		cr_ring_free(mb->from[mb->src[i]]);
		mb->from[mb->src[i]] = NULL;
	}
	mb->nsrc = 0;
	cr_ring_free(mb->foreign);
	mb->foreign = NULL;
}

unsigned
cr_mailbox_drain(struct cr_mailbox *mb, struct cr_msg *out, unsigned max)
{
	/* The foreign ring takes part in the rotation as source number nsrc. */
	unsigned nring = mb->nsrc + 1, start = mb->next_src, got = 0, i;

	for (i = 0; i < nring && got < max; i++) {
		unsigned k = (start + i) % nring;
		struct cr_ring *r = k == mb->nsrc ? mb->foreign : mb->from[mb->src[k]];

		got += cr_ring_dequeue_burst(r, out + got, max - got);
	}
	mb->next_src = (start + 1) % nring;
	return got;
}

bool
cr_mailbox_empty(const struct cr_mailbox *mb)
{
	unsigned i;

	for (i = 0; i < mb->nsrc; i++)
		if (!cr_ring_empty(mb->from[mb->src[i]]))
			return false;
	return cr_ring_empty(mb->foreign);
}

unsigned
cr_mailbox_depth(const struct cr_mailbox *mb)
{
	unsigned i, n = cr_ring_count(mb->foreign);

	for (i = 0; i < mb->nsrc; i++)
		n += cr_ring_count(mb->from[mb->src[i]]);
	return n;
}
