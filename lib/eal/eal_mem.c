/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * NUMA-local memory for per-lcore structures. Control path only.
 *
 * Each allocation is its own anonymous mapping: fresh pages are already zero, and the
 * binding is set before any page is touched, so every page faults in on the right node.
 * The first cache line of the mapping holds a header that cr_numa_free() reads back.
 */
#include <assert.h>
#include <stdbool.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include <hwloc.h>

#include "cr_eal.h"
#include "eal_internal.h"

#define ALIGN	  64
#define MEM_MAGIC UINT64_C(0x63726e756d61616c) /* "crnumaal" */

struct mem_header {
	uint64_t magic;
	size_t len; /* of the whole mapping, which starts at the header */
};
_Static_assert(sizeof(struct mem_header) <= ALIGN, "header fits before the aligned block");

/*
 * Loading a topology costs milliseconds, so one is loaded on first use and kept for the
 * process's lifetime; it only answers "which nodeset is node N".
 */
static pthread_once_t topo_once = PTHREAD_ONCE_INIT;
static hwloc_topology_t mem_topo;

static void
load_topology(void)
{
	hwloc_topology_t t;

	if (hwloc_topology_init(&t) != 0)
		return;
	if (hwloc_topology_load(t) != 0) {
		hwloc_topology_destroy(t);
		return;
	}
	mem_topo = t;
}

/* Bind [base, base + len) to @p node if this machine has it; unbound memory still works. */
static void
bind_to_node(void *base, size_t len, int node)
{
	hwloc_obj_t obj;

	pthread_once(&topo_once, load_topology);
	if (mem_topo == NULL)
		return;
	obj = hwloc_get_numanode_obj_by_os_index(mem_topo, (unsigned)node);
	if (obj == NULL)
		return;
	if (hwloc_set_area_membind(mem_topo, base, len, obj->nodeset, HWLOC_MEMBIND_BIND,
				   HWLOC_MEMBIND_BYNODESET) != 0)
		CR_LOG(cr__eal_log, DEBUG, "cannot bind %zu bytes to NUMA node %d: %s", len, node,
		       cr_strerror(errno));
}

void *
cr_numa_zalloc(size_t size, int node)
{
	struct mem_header *h;
	size_t len;
	void *base;

	if (size == 0) {
		errno = EINVAL;
		return NULL;
	}
	if (size > SIZE_MAX - ALIGN) {
		errno = ENOMEM;
		return NULL;
	}
	len = size + ALIGN;
	base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED)
		return NULL;
	if (node >= 0)
		bind_to_node(base, len, node);
	h = base;
	h->magic = MEM_MAGIC;
	h->len = len;
	/* mmap returns page-aligned memory, so one ALIGN step in keeps the alignment. */
	return (char *)base + ALIGN;
}

void
cr_numa_free(void *p)
{
	struct mem_header *h;

	if (p == NULL)
		return;
	h = (struct mem_header *)((char *)p - ALIGN);
	assert(h->magic == MEM_MAGIC && "cr_numa_free() of memory not from cr_numa_zalloc()");
	munmap(h, h->len);
}

/* Is page [@p a, @p a + @p page) part of a kept unit of [@p p, @p p + @p unit * @p n)? */
static bool
page_kept(uintptr_t a, size_t page, const char *p, size_t unit, size_t n,
	  bool (*keep)(size_t, void *), void *arg)
{
	uintptr_t lo = (uintptr_t)p, hi = lo + unit * n;
	size_t i, last;

	if (a + page <= lo || a >= hi)
		return false; /* the header's, or past the end */
	i = a > lo ? (a - lo) / unit : 0;
	last = (a + page - 1 - lo) / unit;
	for (; i <= last && i < n; i++)
		if (keep(i, arg))
			return true;
	return false;
}

size_t
cr_numa_free_except(void *p, size_t unit, size_t n, bool (*keep)(size_t i, void *arg), void *arg)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), kept = 0;
	struct mem_header *h;
	uintptr_t a, end, run = 0;

	if (p == NULL)
		return 0;
	h = (struct mem_header *)((char *)p - ALIGN);
	assert(h->magic == MEM_MAGIC &&
	       "cr_numa_free_except() of memory not from cr_numa_zalloc()");
	assert(unit != 0 && unit * n <= h->len - ALIGN);
	end = (uintptr_t)h + ((h->len + page - 1) & ~(page - 1));
	/* Runs of pages no kept unit touches go at once; the header goes with the first. */
	for (a = (uintptr_t)h; a < end; a += page) {
		if (!page_kept(a, page, p, unit, n, keep, arg)) {
			if (run == 0)
				run = a;
			continue;
		}
		kept += page;
		if (run != 0)
			munmap((void *)run, a - run);
		run = 0;
	}
	if (run != 0)
		munmap((void *)run, end - run);
	return kept;
}
