/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Topology -> lcore table (lib/eal/eal_topology.c), on hwloc synthetic topologies.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "ut_cunit.h"

#include "cr_eal.h"
#include "cr_log.h"

#define TWO_BY_FOUR_BY_TWO "pack:2 core:4 pu:2"

static struct cr_lcore_table table;
static char err[512];

static int
select_lcores(const char *synthetic, const char *corelist, const char *allowed, bool smt,
	      int main_lcore)
{
	struct cr_eal_config cfg;
	struct cr_cpuset allowed_set;

	cr_eal_config_defaults(&cfg);
	cfg.topology_synthetic = synthetic;
	cfg.smt = smt;
	cfg.main_lcore = main_lcore;
	if (corelist != NULL)
		snprintf(cfg.corelist, sizeof(cfg.corelist), "%s", corelist);
	if (allowed != NULL) {
		CU_ASSERT_EQUAL_FATAL(cr_corelist_parse(allowed, &allowed_set, NULL, 0), 0);
		cfg.allowed = &allowed_set;
	}
	memset(&table, 0xa5, sizeof(table));
	err[0] = '\0';
	return cr_eal_lcore_table(&cfg, &table, err, sizeof(err));
}

static void
expect_ids(const char *want)
{
	char got[256];

	cr_lcore_table_corelist(&table, got, sizeof(got));
	if (strcmp(got, want) != 0) {
		fprintf(stderr, "\n  lcores: got %s, want %s\n", got, want);
		CU_FAIL("wrong lcores");
	}
	for (unsigned i = 0; i < table.n; i++) {
		CU_ASSERT_EQUAL(table.lcores[i].lcore_id, table.lcores[i].cpu);
		if (i > 0)
			CU_ASSERT_TRUE(table.lcores[i - 1].lcore_id < table.lcores[i].lcore_id);
	}
}

static void
expect_err(const char *want)
{
	if (strcmp(err, want) != 0) {
		fprintf(stderr, "\n  error: got \"%s\", want \"%s\"\n", err, want);
		CU_FAIL("wrong error text");
	}
}

static void
test_default_one_per_core(void)
{
	CU_ASSERT_EQUAL_FATAL(select_lcores(TWO_BY_FOUR_BY_TWO, NULL, NULL, false, -1), 0);
	CU_ASSERT_EQUAL(table.n, 8);
	expect_ids("0,2,4,6,8,10,12,14");
	CU_ASSERT_EQUAL(table.main_lcore, 0);
	for (unsigned i = 0; i < table.n; i++) {
		CU_ASSERT_EQUAL(table.lcores[i].cpu, 2 * i);
		CU_ASSERT_EQUAL(table.lcores[i].core, i);
		CU_ASSERT_EQUAL(table.lcores[i].package, i / 4);
		CU_ASSERT_EQUAL(table.lcores[i].numa_node, 0);
	}
}

static void
test_smt(void)
{
	CU_ASSERT_EQUAL_FATAL(select_lcores(TWO_BY_FOUR_BY_TWO, NULL, NULL, true, -1), 0);
	CU_ASSERT_EQUAL(table.n, 16);
	expect_ids("0-15");
	for (unsigned i = 0; i < table.n; i++) {
		CU_ASSERT_EQUAL(table.lcores[i].core, i / 2);
		CU_ASSERT_EQUAL(table.lcores[i].package, i / 8);
	}
}

static void
test_allowed_with_holes(void)
{
	/*
	 * Cores are {0,1} {2,3} {4,5} {6,7} {8,9} {10,11} ...: core 1 and core 3 have no
	 * allowed PU, core 2 only its second one.
	 */
	CU_ASSERT_EQUAL_FATAL(select_lcores(TWO_BY_FOUR_BY_TWO, NULL, "0,1,5,8-11", false, -1),
			      0);
	CU_ASSERT_EQUAL(table.n, 4);
	expect_ids("0,5,8,10");
	CU_ASSERT_EQUAL(table.lcores[1].core, 2);
	CU_ASSERT_EQUAL(table.lcores[2].core, 4);
	CU_ASSERT_EQUAL(table.lcores[2].package, 1);

	CU_ASSERT_EQUAL_FATAL(select_lcores(TWO_BY_FOUR_BY_TWO, NULL, "0,1,5,8-11", true, -1),
			      0);
	expect_ids("0-1,5,8-11");
}

static void
test_single_pu(void)
{
	CU_ASSERT_EQUAL_FATAL(select_lcores("pu:1", NULL, NULL, false, -1), 0);
	CU_ASSERT_EQUAL(table.n, 1);
	CU_ASSERT_EQUAL(table.main_lcore, 0);
	CU_ASSERT_EQUAL(table.lcores[0].cpu, 0);
	CU_ASSERT_EQUAL(table.lcores[0].core, 0);
	CU_ASSERT_EQUAL(table.lcores[0].package, 0);
}

static void
test_corelist(void)
{
	CU_ASSERT_EQUAL_FATAL(select_lcores(TWO_BY_FOUR_BY_TWO, "6,1-3", NULL, false, -1), 0);
	expect_ids("1-3,6");
	CU_ASSERT_EQUAL(table.main_lcore, 1);
	CU_ASSERT_EQUAL(table.lcores[0].core, 0);
	CU_ASSERT_EQUAL(table.lcores[3].core, 3);

	/* smt does not widen an explicit list. */
	CU_ASSERT_EQUAL_FATAL(select_lcores(TWO_BY_FOUR_BY_TWO, "4", NULL, true, -1), 0);
	expect_ids("4");
}

static void
test_corelist_not_allowed(void)
{
	CU_ASSERT_EQUAL(select_lcores(TWO_BY_FOUR_BY_TWO, "2-5", "0-3,8", false, -1), -EINVAL);
	expect_err("-l 2-5: CPU 4 is not in the allowed cpuset 0-3,8");
}

static void
test_corelist_missing_cpu(void)
{
	CU_ASSERT_EQUAL(select_lcores("pack:1 core:2 pu:1", "0-999", NULL, false, -1), -EINVAL);
	expect_err("-l 0-999: CPU 999 does not exist; this machine has CPUs 0-1");
	CU_ASSERT_EQUAL(select_lcores("pack:1 core:2 pu:1", "1,2", NULL, false, -1), -EINVAL);
	expect_err("-l 1,2: CPU 2 does not exist; this machine has CPUs 0-1");
}

static void
test_corelist_syntax(void)
{
	CU_ASSERT_EQUAL(select_lcores(TWO_BY_FOUR_BY_TWO, "0-99,x", NULL, false, -1), -EINVAL);
	expect_err("-l 0-99,x: 'x' is not a CPU id; accepted: CPU ids and ranges like 0-3,6");
}

static void
test_main_lcore(void)
{
	CU_ASSERT_EQUAL(select_lcores("pack:1 core:2 pu:1", "0-1", NULL, false, 5), -EINVAL);
	expect_err("--main-lcore 5: not in the lcore list 0-1; accepted: one of 0-1");

	CU_ASSERT_EQUAL(select_lcores(TWO_BY_FOUR_BY_TWO, NULL, NULL, false, 3), -EINVAL);
	expect_err("--main-lcore 3: not in the lcore list 0,2,4,6,8,10,12,14; "
		   "accepted: one of 0,2,4,6,8,10,12,14");

	CU_ASSERT_EQUAL_FATAL(select_lcores(TWO_BY_FOUR_BY_TWO, NULL, NULL, false, 6), 0);
	CU_ASSERT_EQUAL(table.main_lcore, 6);
}

static void
test_numa_nodes(void)
{
	CU_ASSERT_EQUAL_FATAL(select_lcores("package:2 numa:1 core:2 pu:2", NULL, NULL, false, -1),
			      0);
	expect_ids("0,2,4,6");
	CU_ASSERT_EQUAL(table.lcores[0].numa_node, 0);
	CU_ASSERT_EQUAL(table.lcores[1].numa_node, 0);
	CU_ASSERT_EQUAL(table.lcores[2].numa_node, 1);
	CU_ASSERT_EQUAL(table.lcores[3].numa_node, 1);
	CU_ASSERT_EQUAL(table.lcores[2].package, 1);

	/* Two nodes inside each package. */
	CU_ASSERT_EQUAL_FATAL(select_lcores("pack:2 group:2 numa:1 core:1 pu:1", NULL, NULL, false,
					    -1),
			      0);
	expect_ids("0-3");
	for (unsigned i = 0; i < table.n; i++)
		CU_ASSERT_EQUAL(table.lcores[i].numa_node, (int)i);
}

static void
test_empty_allowed(void)
{
	CU_ASSERT_EQUAL(select_lcores("pack:1 core:2 pu:1", NULL, "5-6", false, -1), -EINVAL);
	expect_err("lcore selection: no CPU of this machine (0-1) is in the allowed cpuset 5-6");
}

static void
test_above_max_lcores(void)
{
	char synthetic[64], list[16], want[160];

	/* CPUs beyond CR_MAX_LCORES exist but cannot be lcores. */
	snprintf(synthetic, sizeof(synthetic), "core:%d pu:1", CR_MAX_LCORES + 2);
	snprintf(list, sizeof(list), "%d", CR_MAX_LCORES);
	snprintf(want, sizeof(want),
		 "-l %d: CPU %d is above the largest lcore id %d; accepted: CPUs 0-%d (build "
		 "option max_lcores)",
		 CR_MAX_LCORES, CR_MAX_LCORES, CR_MAX_LCORES - 1, CR_MAX_LCORES - 1);
	CU_ASSERT_EQUAL(select_lcores(synthetic, list, NULL, false, -1), -EINVAL);
	expect_err(want);

	/* The default takes what fits (and warns; keep the test's output quiet). */
	CU_ASSERT_EQUAL_FATAL(cr_log_set_level("lib.eal:err"), 0);
	CU_ASSERT_EQUAL_FATAL(select_lcores(synthetic, NULL, NULL, false, -1), 0);
	CU_ASSERT_EQUAL_FATAL(cr_log_set_level("lib.eal:notice"), 0);
	CU_ASSERT_EQUAL(table.n, CR_MAX_LCORES);
}

static void
test_bad_synthetic(void)
{
	CU_ASSERT_EQUAL(select_lcores("pack:banana", NULL, NULL, false, -1), -EINVAL);
	expect_err("topology 'pack:banana': not a valid hwloc synthetic topology");
}

static void
test_this_machine(void)
{
	struct cr_eal_config cfg;
	cpu_set_t mine;

	cr_eal_config_defaults(&cfg);
	CU_ASSERT_EQUAL_FATAL(cr_eal_lcore_table(&cfg, &table, err, sizeof(err)), 0);
	CU_ASSERT_TRUE(table.n >= 1);
	CU_ASSERT_EQUAL(table.main_lcore, table.lcores[0].lcore_id);
	CU_ASSERT_EQUAL_FATAL(sched_getaffinity(0, sizeof(mine), &mine), 0);
	for (unsigned i = 0; i < table.n; i++) {
		CU_ASSERT_TRUE(CPU_ISSET(table.lcores[i].cpu, &mine));
		CU_ASSERT_TRUE(table.lcores[i].numa_node >= 0);
	}

	cfg.smt = true;
	CU_ASSERT_EQUAL_FATAL(cr_eal_lcore_table(&cfg, &table, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(table.n, (unsigned)CPU_COUNT(&mine));

	/* NULL err is fine. */
	snprintf(cfg.corelist, sizeof(cfg.corelist), "0-999");
	CU_ASSERT_EQUAL(cr_eal_lcore_table(&cfg, &table, NULL, 0), -EINVAL);
}

static const struct ut_case cases[] = {
	{"default: first PU of each core", test_default_one_per_core},
	{"--smt: every PU", test_smt},
	{"allowed cpuset with holes", test_allowed_with_holes},
	{"single PU", test_single_pu},
	{"corelist", test_corelist},
	{"corelist outside the allowed cpuset", test_corelist_not_allowed},
	{"corelist naming missing CPUs", test_corelist_missing_cpu},
	{"corelist syntax error", test_corelist_syntax},
	{"main lcore", test_main_lcore},
	{"NUMA nodes", test_numa_nodes},
	{"no allowed CPU", test_empty_allowed},
	{"CPUs above CR_MAX_LCORES", test_above_max_lcores},
	{"bad synthetic topology", test_bad_synthetic},
	{"this machine", test_this_machine},
};

UT_MAIN("eal_topology", cases, NULL, NULL)
