/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * NUMA memory (lib/eal/eal_mem.c).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "ut_cunit.h"
#include <hwloc.h>

#include "cr_eal.h"

static bool
all_zero(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (p[i] != 0)
			return false;
	}
	return true;
}

static void
check_block(size_t size, int node)
{
	unsigned char *p = cr_numa_zalloc(size, node);

	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL((uintptr_t)p % 64, 0);
	CU_ASSERT_TRUE(all_zero(p, size));
	/* Every byte is ours to write (ASan would catch an overrun of the mapping's end). */
	memset(p, 0xab, size);
	cr_numa_free(p);
}

static void
test_sizes_and_nodes(void)
{
	static const size_t sizes[] = {1, 63, 64, 4096 - 64, 4096, 100000, 1 << 21};

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		check_block(sizes[i], -1);
		check_block(sizes[i], 0);
	}
	/* A node this machine lacks still gives memory, just unbound. */
	check_block(4096, 4000);
}

static void
test_bound_to_node(void)
{
	hwloc_topology_t topo;
	hwloc_bitmap_t nodes;
	hwloc_membind_policy_t policy;
	void *p;

	CU_ASSERT_EQUAL_FATAL(hwloc_topology_init(&topo), 0);
	CU_ASSERT_EQUAL_FATAL(hwloc_topology_load(topo), 0);
	nodes = hwloc_bitmap_alloc();
	p = cr_numa_zalloc(1 << 16, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	if (hwloc_get_area_membind(topo, p, 1 << 16, nodes, &policy, HWLOC_MEMBIND_BYNODESET) ==
	    0) {
		CU_ASSERT_EQUAL(policy, HWLOC_MEMBIND_BIND);
		CU_ASSERT_TRUE(hwloc_bitmap_isset(nodes, 0));
		CU_ASSERT_EQUAL(hwloc_bitmap_weight(nodes), 1);
	}
	cr_numa_free(p);
	hwloc_bitmap_free(nodes);
	hwloc_topology_destroy(topo);
}

static void
test_edge_cases(void)
{
	cr_numa_free(NULL);
	errno = 0;
	CU_ASSERT_PTR_NULL(cr_numa_zalloc(0, 0));
	CU_ASSERT_EQUAL(errno, EINVAL);
	errno = 0;
	CU_ASSERT_PTR_NULL(cr_numa_zalloc(SIZE_MAX - 10, -1));
	CU_ASSERT_EQUAL(errno, ENOMEM);
}

static const struct ut_case cases[] = {
	{"sizes and nodes", test_sizes_and_nodes},
	{"bound to its node", test_bound_to_node},
	{"NULL, zero and huge sizes", test_edge_cases},
};

UT_MAIN("eal_mem", cases, NULL, NULL)
