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
		mb->bit_of[id] = (uint16_t)mb->nsrc;
		mb->src[mb->nsrc++] = (uint16_t)id;
	}
	mb->foreign = cr_ring_create("mbox-foreign", foreign_size, foreign_mode, numa_node);
	if (mb->foreign == NULL)
		goto out_free_rings;
	atomic_init(&mb->admit, 0);
	for (id = 0; id < CR_MAILBOX_BELL_WORDS; id++)
		atomic_init(&mb->bell[id], 0);
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

static struct cr_ring *
ring_of(struct cr_mailbox *mb, unsigned bit)
{
	return bit == mb->nsrc ? mb->foreign : mb->from[mb->src[bit]];
}

unsigned
cr_mailbox_drain(struct cr_mailbox *mb, struct cr_msg *out, unsigned max)
{
	uint64_t rang[CR_MAILBOX_BELL_WORDS];
	unsigned nbits = mb->nsrc + 1, start = mb->next_src, got = 0, i, w;
	bool any = false;

	/* acquire: pairs with the release in cr__mailbox_ring_bell(): the senders' enqueues
	 * are visible to the dequeues below. */
	for (w = 0; w < CR_MAILBOX_BELL_WORDS; w++) {
		rang[w] = mb->owed[w];
		if (atomic_load_explicit(&mb->bell[w], memory_order_relaxed) != 0)
			rang[w] |= atomic_exchange_explicit(&mb->bell[w], 0, memory_order_acquire);
		mb->owed[w] = 0;
		any |= rang[w] != 0;
	}
	if (!any)
		return 0;
	for (i = 0; i < nbits; i++) {
		unsigned k = start + i < nbits ? start + i : start + i - nbits;

		if (!(rang[k >> 6] & (UINT64_C(1) << (k & 63))))
			continue;
		if (got < max)
			got += cr_ring_dequeue_burst(ring_of(mb, k), out + got, max - got);
		/* Full before this ring was emptied (or not reached): look again next time. */
		if (got == max)
			mb->owed[k >> 6] |= UINT64_C(1) << (k & 63);
	}
	mb->next_src = start + 1 < nbits ? start + 1 : 0;
	return got;
}

unsigned
cr_mailbox_depth(const struct cr_mailbox *mb)
{
	unsigned i, n = cr_ring_count(mb->foreign);

	for (i = 0; i < mb->nsrc; i++)
		n += cr_ring_count(mb->from[mb->src[i]]);
	return n;
}
