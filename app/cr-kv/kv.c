/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The process-wide state every file of cr-kv reads (struct kv_global), the clock, and
 * the memory every shard's store uses.
 */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

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

uint64_t
kv_rss(void)
{
	unsigned long long size = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f == NULL)
		return 0;
	if (fscanf(f, "%llu %llu", &size, &resident) != 2)
		resident = 0;
	fclose(f);
	return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

uint64_t
kv_mem_peak(uint64_t now)
{
	uint64_t peak = atomic_load_explicit(&kv.mem_peak, memory_order_relaxed);

	/* relaxed: a statistic; a lost race keeps the other, also correct, maximum */
	while (now > peak &&
	       !atomic_compare_exchange_weak_explicit(&kv.mem_peak, &peak, now,
						      memory_order_relaxed, memory_order_relaxed))
		;
	return now > peak ? now : peak;
}
