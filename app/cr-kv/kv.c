/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The process-wide state every file of cr-kv reads (struct kv_global), the clock, and
 * the memory every shard's store uses.
 */
#include <time.h>

#include "kv.h"

struct kv_global kv;

int64_t
kv_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t
kv_used_memory(void)
{
	uint64_t t = 0;
	unsigned i;

	for (i = 0; i < kv.nshards; i++)
		t += (uint64_t)kv_mem_used(&kv.shards[kv.shard_lcore[i]]->mem);
	return t;
}
