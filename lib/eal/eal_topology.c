/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The machine's topology (hwloc) and the lcores a configuration selects from it.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include <hwloc.h>

#include "cr_eal.h"
#include "eal_internal.h"

#define SET_TXT_MAX 256

/* State shared by the selection steps. */
struct selection {
	const struct cr_eal_config *cfg;
	hwloc_topology_t topo;
	hwloc_const_bitmap_t present; /* every PU of the machine, allowed or not */
	hwloc_bitmap_t allowed;
	struct cr_cpuset chosen;
	char *err;
	size_t errlen;
};

/* A cpuset as a corelist for an error line; "none" rather than an empty string. */
static const char *
set_txt(hwloc_const_bitmap_t set, char *buf, size_t len)
{
	if (hwloc_bitmap_iszero(set))
		snprintf(buf, len, "none");
	else
		hwloc_bitmap_list_snprintf(buf, len, set);
	return buf;
}

static int
open_topology(const struct cr_eal_config *cfg, hwloc_topology_t *topo, char *err, size_t errlen)
{
	int rc;

	if (hwloc_topology_init(topo) != 0) {
		rc = -errno;
		cr__errf(err, errlen, "hwloc: cannot initialise a topology: %s", cr_strerror(rc));
		return rc;
	}
	if (cfg->topology_synthetic != NULL) {
		if (hwloc_topology_set_synthetic(*topo, cfg->topology_synthetic) != 0) {
			cr__errf(err, errlen, "topology '%s': not a valid hwloc synthetic topology",
				 cfg->topology_synthetic);
			rc = -EINVAL;
			goto out_destroy;
		}
	} else {
		/*
		 * Keep the CPUs a cgroup or taskset forbids, so that naming one says "not
		 * allowed" rather than "does not exist".
		 */
		hwloc_topology_set_flags(*topo, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
	}
	if (hwloc_topology_load(*topo) != 0) {
		rc = -errno;
		cr__errf(err, errlen, "hwloc: cannot load the topology: %s", cr_strerror(rc));
		goto out_destroy;
	}
	return 0;

out_destroy:
	hwloc_topology_destroy(*topo);
	return rc;
}

/* The CPUs lcores may use: the test's set, a synthetic machine's every PU, or ours. */
static int
find_allowed(struct selection *sel)
{
	const struct cr_eal_config *cfg = sel->cfg;
	hwloc_bitmap_t bound;

	sel->allowed = hwloc_bitmap_alloc();
	if (sel->allowed == NULL)
		return -ENOMEM;
	if (cfg->allowed != NULL) {
		for (unsigned id = 0; id < CR_MAX_LCORES; id++) {
			if (cr_cpuset_isset(cfg->allowed, id))
				hwloc_bitmap_set(sel->allowed, id);
		}
		return 0;
	}
	hwloc_bitmap_copy(sel->allowed, sel->present);
	if (cfg->topology_synthetic != NULL)
		return 0;
	/* The cgroup's cpuset, narrowed by the calling thread's affinity (taskset). */
	hwloc_bitmap_and(sel->allowed, sel->allowed, hwloc_topology_get_allowed_cpuset(sel->topo));
	bound = hwloc_bitmap_alloc();
	if (bound == NULL)
		return -ENOMEM;
	if (hwloc_get_cpubind(sel->topo, bound, HWLOC_CPUBIND_THREAD) == 0)
		hwloc_bitmap_and(sel->allowed, sel->allowed, bound);
	hwloc_bitmap_free(bound);
	return 0;
}

static int
check_present(struct selection *sel, unsigned id)
{
	char set[SET_TXT_MAX];

	if (hwloc_bitmap_isset(sel->present, id))
		return 0;
	cr__errf(sel->err, sel->errlen, "-l %s: CPU %u does not exist; this machine has CPUs %s",
		 sel->cfg->corelist, id, set_txt(sel->present, set, sizeof(set)));
	return -EINVAL;
}

static int
check_cpu(struct selection *sel, unsigned id)
{
	char set[SET_TXT_MAX];
	int rc = check_present(sel, id);

	if (rc != 0)
		return rc;
	if (id >= CR_MAX_LCORES) {
		cr__errf(sel->err, sel->errlen,
			 "-l %s: CPU %u is above the largest lcore id %d; accepted: CPUs 0-%d "
			 "(build option max_lcores)",
			 sel->cfg->corelist, id, CR_MAX_LCORES - 1, CR_MAX_LCORES - 1);
		return -EINVAL;
	}
	if (!hwloc_bitmap_isset(sel->allowed, id)) {
		cr__errf(sel->err, sel->errlen, "-l %s: CPU %u is not in the allowed cpuset %s",
			 sel->cfg->corelist, id, set_txt(sel->allowed, set, sizeof(set)));
		return -EINVAL;
	}
	return 0;
}

static int
choose_range(unsigned lo, unsigned hi, void *ctx)
{
	struct selection *sel = ctx;
	int rc;

	/* The far end first: "-l 0-999" is about CPU 999, whatever lies between. */
	rc = check_present(sel, hi);
	for (unsigned id = lo; rc == 0 && id <= hi; id++) {
		rc = check_cpu(sel, id);
		if (rc == 0)
			cr_cpuset_set(&sel->chosen, id);
	}
	return rc;
}

static int
choose_listed(struct selection *sel)
{
	char why[SET_TXT_MAX];
	int rc;

	/* Syntax first, so that "0-999,x" is reported as a typo rather than a missing CPU. */
	rc = cr__corelist_walk(sel->cfg->corelist, INT_MAX, NULL, NULL, why, sizeof(why));
	if (rc != 0) {
		cr__errf(sel->err, sel->errlen,
			 "-l %s: %s; accepted: CPU ids and ranges like 0-3,6", sel->cfg->corelist,
			 why);
		return rc;
	}
	return cr__corelist_walk(sel->cfg->corelist, INT_MAX, choose_range, sel, NULL, 0);
}

static int
no_default_lcore(struct selection *sel, unsigned too_large)
{
	char allowed[SET_TXT_MAX], present[SET_TXT_MAX];

	if (too_large > 0)
		cr__errf(sel->err, sel->errlen,
			 "lcore selection: every allowed CPU is above the largest lcore id %d; "
			 "accepted: CPUs 0-%d (build option max_lcores)",
			 CR_MAX_LCORES - 1, CR_MAX_LCORES - 1);
	else
		cr__errf(sel->err, sel->errlen,
			 "lcore selection: no CPU of this machine (%s) is in the allowed cpuset %s",
			 set_txt(sel->present, present, sizeof(present)),
			 set_txt(sel->allowed, allowed, sizeof(allowed)));
	return -EINVAL;
}

/* The lowest allowed PU of every core, or every allowed PU with smt. */
static int
choose_default(struct selection *sel)
{
	hwloc_bitmap_t cores_taken = hwloc_bitmap_alloc();
	unsigned too_large = 0;
	unsigned id;

	if (cores_taken == NULL)
		return -ENOMEM;
	hwloc_bitmap_foreach_begin(id, sel->allowed)
	{
		hwloc_obj_t pu = hwloc_get_pu_obj_by_os_index(sel->topo, id);
		hwloc_obj_t core;

		if (pu == NULL)
			continue;
		if (id >= CR_MAX_LCORES) {
			too_large++;
			continue;
		}
		core = hwloc_get_ancestor_obj_by_type(sel->topo, HWLOC_OBJ_CORE, pu);
		if (!sel->cfg->smt && core != NULL) {
			if (hwloc_bitmap_isset(cores_taken, core->logical_index))
				continue;
			hwloc_bitmap_set(cores_taken, core->logical_index);
		}
		cr_cpuset_set(&sel->chosen, id);
	}
	hwloc_bitmap_foreach_end();
	hwloc_bitmap_free(cores_taken);

	if (cr_cpuset_count(&sel->chosen) == 0)
		return no_default_lcore(sel, too_large);
	if (too_large > 0)
		CR_LOG(cr__eal_log, WARNING,
		       "%u allowed CPUs are above the largest lcore id %d and left unused "
		       "(build option max_lcores)",
		       too_large, CR_MAX_LCORES - 1);
	return 0;
}

static int
numa_node_of(hwloc_topology_t topo, unsigned cpu)
{
	hwloc_obj_t node = NULL;

	/* hwloc 2 hangs NUMA nodes beside the CPU tree, so find the one whose CPUs cover it. */
	while ((node = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, node)) != NULL) {
		if (node->cpuset != NULL && hwloc_bitmap_isset(node->cpuset, cpu))
			return (int)node->os_index;
	}
	return -1;
}

static void
describe_lcore(hwloc_topology_t topo, unsigned id, struct cr_lcore_info *li)
{
	hwloc_obj_t pu = hwloc_get_pu_obj_by_os_index(topo, id);
	hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_CORE, pu);
	hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, pu);

	li->lcore_id = id;
	li->cpu = id;
	/* A machine without core objects (some VMs, "pu:N") has one PU per core. */
	li->core = core != NULL ? core->logical_index : pu->logical_index;
	li->package = pkg != NULL ? pkg->logical_index : 0;
	li->numa_node = numa_node_of(topo, id);
}

static int
fill_table(struct selection *sel, struct cr_lcore_table *out)
{
	int main_lcore = sel->cfg->main_lcore;

	if (main_lcore >= 0 && !cr_cpuset_isset(&sel->chosen, (unsigned)main_lcore)) {
		char list[SET_TXT_MAX];

		cr_cpuset_format(&sel->chosen, list, sizeof(list));
		cr__errf(sel->err, sel->errlen,
			 "--main-lcore %d: not in the lcore list %s; accepted: one of %s",
			 main_lcore, list, list);
		return -EINVAL;
	}
	memset(out, 0, sizeof(*out));
	for (unsigned id = 0; id < CR_MAX_LCORES; id++) {
		if (cr_cpuset_isset(&sel->chosen, id))
			describe_lcore(sel->topo, id, &out->lcores[out->n++]);
	}
	out->main_lcore = main_lcore >= 0 ? (unsigned)main_lcore : out->lcores[0].lcore_id;
	return 0;
}

int
cr_eal_lcore_table(const struct cr_eal_config *cfg, struct cr_lcore_table *out, char *err,
		   size_t errlen)
{
	struct selection sel = {.cfg = cfg, .err = err, .errlen = errlen};
	int rc;

	cr__errf(err, errlen, "%s", "");
	rc = open_topology(cfg, &sel.topo, err, errlen);
	if (rc != 0)
		return rc;
	sel.present = hwloc_topology_get_topology_cpuset(sel.topo);
	rc = find_allowed(&sel);
	if (rc != 0)
		goto out_free_allowed;
	if (cfg->corelist[0] != '\0')
		rc = choose_listed(&sel);
	else
		rc = choose_default(&sel);
	if (rc == 0)
		rc = fill_table(&sel, out);
	if (rc == -ENOMEM)
		cr__errf(err, errlen, "lcore selection: %s", cr_strerror(rc));

out_free_allowed:
	hwloc_bitmap_free(sel.allowed);
	hwloc_topology_destroy(sel.topo);
	return rc;
}
